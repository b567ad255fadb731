//! The Kafka Connect codec against the 200 vectors of `tests/vectors/` (bytes written by Connect's
//! JsonConverter on Java 25), and properties over arbitrary maps and bytes.

use base64::Engine as _;
use connect_offsets::codec::murmur2::{murmur2, partition_for};
use connect_offsets::internal::codec::json::{self, Json};
use connect_offsets::{FieldMap, OffsetKey, Value};
use proptest::prelude::*;

fn b64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .expect("vector base64")
}

fn field<'a>(obj: &'a [(String, Json)], name: &str) -> &'a Json {
    &obj.iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("vector field {name}"))
        .1
}

fn typed_map(list: &Json) -> Option<FieldMap> {
    let Json::Array(items) = list else {
        return None;
    };
    let mut map = FieldMap::new();
    for item in items {
        let Json::Array(t) = item else {
            panic!("typed member")
        };
        let (Json::String(name), Json::String(ty), Json::String(v)) = (&t[0], &t[1], &t[2]) else {
            panic!("typed member")
        };
        let name = String::from_utf8(b64(name)).expect("utf8 name");
        let value = match ty.as_str() {
            "null" => Value::Null,
            "bool" => Value::Bool(v == "true"),
            "int" => Value::Int(v.parse().expect("int")),
            "double" => Value::Float(f64::from_bits(
                u64::from_str_radix(v, 16).expect("hex bits"),
            )),
            "bytes" => Value::Bytes(b64(v)),
            "string" => Value::String(String::from_utf8(b64(v)).expect("utf8")),
            other => panic!("type {other}"),
        };
        map.insert(name, value);
    }
    Some(map)
}

#[test]
fn all_200_vectors_encode_byte_for_byte() {
    let text = include_str!("../vectors/connect-json.jsonl");
    let mut n = 0;
    for (line_no, line) in text.lines().enumerate() {
        let Json::Object(obj) = json::parse(line.as_bytes()).expect("vector line") else {
            panic!("object")
        };
        let Json::String(ns) = field(&obj, "namespace_b64") else {
            panic!("namespace")
        };
        let ns = String::from_utf8(b64(ns)).unwrap();
        let key = match typed_map(field(&obj, "partition")) {
            Some(p) => OffsetKey::new(ns, p),
            None => OffsetKey::null_partition(ns),
        };
        let Json::String(key_b64) = field(&obj, "key_b64") else {
            panic!("key")
        };
        let want_key = b64(key_b64);
        assert_eq!(
            String::from_utf8_lossy(&key.connect_key()),
            String::from_utf8_lossy(&want_key),
            "line {}: key bytes",
            line_no + 1
        );
        match (typed_map(field(&obj, "offset")), field(&obj, "value_b64")) {
            (Some(offset), Json::String(v)) => {
                let mut got = Vec::new();
                json::encode_value(&offset, &mut got);
                assert_eq!(
                    String::from_utf8_lossy(&got),
                    String::from_utf8_lossy(&b64(v)),
                    "line {}: value bytes",
                    line_no + 1
                );
                // Decoding gives back what Connect reads; re-encoding it gives the same bytes.
                let decoded = json::decode_value(&got).unwrap().unwrap();
                assert_eq!(
                    decoded,
                    offset.connect_normalized(),
                    "line {}: value decode",
                    line_no + 1
                );
                let mut again = Vec::new();
                json::encode_value(&decoded, &mut again);
                assert_eq!(again, got, "line {}: value re-encode", line_no + 1);
            }
            (None, Json::Null) => {}
            other => panic!("line {}: offset/value mismatch {other:?}", line_no + 1),
        }
        let Json::Int(m) = field(&obj, "murmur2") else {
            panic!("murmur2")
        };
        let Json::Int(p25) = field(&obj, "p25") else {
            panic!("p25")
        };
        assert_eq!(
            i64::from(murmur2(&want_key)),
            *m,
            "line {}: murmur2",
            line_no + 1
        );
        assert_eq!(
            i64::from(partition_for(&want_key, 25)),
            *p25,
            "line {}: partition of 25",
            line_no + 1
        );
        // The decoded key is the same key, and encodes to the same bytes.
        let decoded = json::decode_key(&want_key).unwrap();
        assert_eq!(decoded, key, "line {}: key decode", line_no + 1);
        assert_eq!(
            decoded.connect_key(),
            want_key,
            "line {}: key re-encode",
            line_no + 1
        );
        n += 1;
    }
    assert_eq!(n, 200);
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::Int),
        any::<f64>().prop_map(Value::Float),
        prop_oneof![
            any::<u64>().prop_map(f64::from_bits),
            Just(1e20),
            Just(-0.0),
            Just(5e-324),
            Just(1e-3),
            Just(1e7)
        ]
        .prop_map(Value::Float),
        any::<String>().prop_map(Value::String),
        "[\\x00-\\x1f\"\\\\\u{1F600}\u{FFFF}\u{10000}a]{0,12}".prop_map(Value::String),
        prop::collection::vec(any::<u8>(), 0..20).prop_map(Value::Bytes),
    ]
}

fn map() -> impl Strategy<Value = FieldMap> {
    prop::collection::vec((any::<String>(), value()), 0..8).prop_map(|v| v.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn encode_decode_round_trips(ns in any::<String>(), p in map(), o in map()) {
        let key = OffsetKey::new(ns.clone(), p.clone());
        let bytes = key.connect_key();
        let back = json::decode_key(&bytes).unwrap();
        prop_assert_eq!(back.namespace(), ns.as_str());
        prop_assert_eq!(back.partition().unwrap(), &p.connect_normalized());
        prop_assert_eq!(&back, &key, "structurally the same key");
        prop_assert_eq!(back.connect_key(), bytes, "same bytes again");
        let mut v = Vec::new();
        json::encode_value(&o, &mut v);
        prop_assert_eq!(json::decode_value(&v).unwrap().unwrap(), o.connect_normalized());
    }

    #[test]
    fn member_order_does_not_change_the_key(p in map()) {
        let reversed: FieldMap = p.iter().rev().map(|(n, v)| (n.to_string(), v.clone())).collect();
        prop_assert_eq!(OffsetKey::new("c", p), OffsetKey::new("c", reversed));
    }

    #[test]
    fn decoding_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        if let Err(e) = json::decode_key(&bytes) {
            prop_assert!(!e.to_string().is_empty());
        }
        let _ = json::decode_value(&bytes);
    }

    #[test]
    fn decoding_json_like_text_never_panics(s in "[\\[\\]{}\",:0-9a-z\\\\ .eE+-]{0,40}") {
        let _ = json::decode_key(s.as_bytes());
        let _ = json::decode_value(s.as_bytes());
    }
}
