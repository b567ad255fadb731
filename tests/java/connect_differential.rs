//! Differential test of the codec against Kafka Connect's own `JsonConverter`.
//!
//! A seeded generator makes 1,500 partition/offset maps full of what is hard to spell (astral
//! characters, control characters, quotes and backslashes, U+2028, doubles such as 1e20, -0.0, 5e-324,
//! 1e-3, 1e7, NaN and the infinities, random bit patterns, bytes, strings of several KB, nulls,
//! booleans, i64 extremes, null partitions, tombstones, repeated names), writes them in the typed JSON
//! Lines format of `shared/vectors` and has `connectoffsets.ConnectJsonEncode` (Connect 4.4.0's
//! `JsonConverter`, `schemas.enable=false`, after `OffsetUtils.validateFormat`, as
//! `OffsetStorageWriter` does) encode all of them in one run. Our key bytes, value bytes and murmur2
//! must equal Connect's for every one; decoding Connect's bytes and encoding them again must give the
//! same bytes.
//!
//! Runs on Java 25 (`JAVA25_HOME`, default `/usr/lib/jvm/temurin-25-jdk-amd64`): JDK 17 spells about
//! 2% of doubles with one digit more, by design (see `src/codec/json.rs`), and the crate follows
//! JDK 19+. Needs the Java classpath of `scripts/kafka classpath` (no broker). `CONNECT_DIFF_SEED` and
//! `CONNECT_DIFF_COUNT` change the seed and the number of maps.
#![cfg(feature = "kafka")]

use crate::scripts;

use std::fmt::Write as _;
use std::io::Write as _;
use std::process::Command;

use base64::Engine as _;
use connect_offsets::codec::murmur2::{murmur2, partition_for};
use connect_offsets::internal::codec::json::{self, Json};
use connect_offsets::{FieldMap, OffsetKey, Value};

/// SplitMix64: small, seeded, the same sequence on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn range(&mut self, lo: u64, hi_incl: u64) -> u64 {
        lo + self.below(hi_incl - lo + 1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize].clone()
    }
}

/// Doubles that are hard to spell, each used at least once (written with every digit on purpose).
#[allow(clippy::excessive_precision)]
fn special_doubles() -> Vec<f64> {
    let mut v = vec![
        1e20,
        -0.0,
        0.0,
        5e-324,
        -5e-324,
        1e-3,
        1e7,
        -1e7,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::from_bits(0x7ff8_0000_0000_0001), // NaN with a payload
        f64::from_bits(0xfff8_0000_0000_0000), // negative NaN
        f64::from_bits(0x7ff0_0000_0000_0001), // signalling NaN
        f64::from_bits(1e-3f64.to_bits() - 1), // just below the plain/exponent boundaries
        f64::from_bits(1e-3f64.to_bits() + 1),
        f64::from_bits(1e7f64.to_bits() - 1),
        f64::from_bits(1e7f64.to_bits() + 1),
        9_999_999.0,
        9_999_999.5,
        0.001_000_000_000_000_000_1,
        0.1,
        0.2,
        0.3,
        0.1 + 0.2,
        1.0 / 3.0,
        2.0 / 3.0,
        1.0,
        -1.0,
        3.0,
        100.0,
        1e-4,
        1e-5,
        1.0e-7,
        1e21,
        1e22,
        1e23,
        2e22,
        9_007_199_254_740_992.0, // 2^53
        9_007_199_254_740_994.0,
        9.223_372_036_854_776e18, // 2^63
        f64::MAX,
        f64::MIN,
        f64::MIN_POSITIVE,
        f64::from_bits(0x000F_FFFF_FFFF_FFFF), // largest subnormal
        f64::from_bits(2),
        f64::from_bits(3),
        f64::from_bits(10),
        f64::EPSILON,
        4.35e-322,
        2e-323,
        1.2345678901234567e-300,
        -2.974_750_298_694_635e17, // JDK 17 spells it with one digit more
        2.0e-3,
        1.0e-322,
        5.0e-310,
        123_456_789.0,
        1_234_567.125,
        0.5,
        0.25,
        1e300,
        1e-300,
        4.940_656_458_412_465_4e-324,
        8.41e21,
        5.8e-5,
        // Ties between two shortest candidates: Java takes the even last digit.
        1_573_133_138_417_423.25,
        225_525_798_402_858.125,
        -1_858_958_009_744_842.25,
    ];
    // Powers of ten across the whole range, and one ulp either side of some.
    for k in (-323..=308).step_by(7) {
        let p: f64 = format!("1e{k}").parse().unwrap();
        v.push(p);
        v.push(f64::from_bits(p.to_bits() + 1));
        if p.to_bits() > 1 {
            v.push(f64::from_bits(p.to_bits() - 1));
        }
    }
    v
}

fn random_double(r: &mut Rng) -> f64 {
    match r.below(8) {
        // Any bit pattern (NaN payloads, subnormals, infinities included).
        0..=2 => f64::from_bits(r.next()),
        // A short decimal, as offsets often are.
        3 => {
            let digits = r.range(1, 17) as u32;
            let m = r.below(10u64.pow(digits.min(18)));
            let e = r.range(0, 60) as i64 - 30;
            let s = if r.chance(50) { "-" } else { "" };
            format!("{s}{m}e{e}").parse().unwrap()
        }
        // Subnormal.
        4 => f64::from_bits(r.below(1 << 52) | if r.chance(50) { 1 << 63 } else { 0 }),
        // Integral values.
        5 => (r.next() as i64 >> r.below(63)) as f64,
        // Near a plain/exponent boundary.
        6 => {
            let base: f64 = r.pick(&[1e-3, 1e7, 1e-4, 1e6, 1.0, 10.0]);
            let delta = r.below(2000) as i64 - 1000;
            f64::from_bits((base.to_bits() as i64 + delta) as u64)
        }
        // A random exponent with a random 53-bit mantissa around it.
        _ => {
            let e = r.range(0, 2046);
            f64::from_bits((e << 52) | (r.next() & ((1 << 52) - 1)))
        }
    }
}

fn random_char(r: &mut Rng) -> char {
    const TRICKY: &[char] = &[
        '"',
        '\\',
        '/',
        '\u{2028}',
        '\u{2029}',
        '\u{FEFF}',
        '\u{FFFF}',
        '\u{FFFE}',
        '\u{D7FF}',
        '\u{E000}',
        '\u{FFFD}',
        '\0',
        '<',
        '>',
        '&',
        '\'',
        '\u{7F}',
        '\u{85}',
        '\u{A0}',
        '\u{10000}',
        '\u{10FFFF}',
        '\u{1F600}',
        '\u{1F4A9}',
        '\u{20BB7}',
    ];
    let code = match r.below(16) {
        0..=4 => r.range(0x20, 0x7E) as u32,
        5 => r.range(0, 0x1F) as u32,
        6 => r.range(0x7F, 0x9F) as u32,
        7 => return r.pick(TRICKY),
        8 => r.range(0xA0, 0x7FF) as u32,
        9 => r.range(0x800, 0xD7FF) as u32,
        10 => r.range(0xE000, 0xFFFF) as u32,
        11 | 12 => r.range(0x1F300, 0x1FAFF) as u32,
        13 => r.range(0x10000, 0x10FFFF) as u32,
        14 => r.range(0x300, 0x36F) as u32,
        _ => r.pick(&[0x8u32, 0x9, 0xA, 0xC, 0xD, 0x1B, 0x1F]),
    };
    char::from_u32(code).expect("no surrogates in the ranges")
}

fn random_string(r: &mut Rng, max: u64) -> String {
    let len = if r.chance(3) {
        r.range(2000, 6000) // several KB (up to ~24 KB of UTF-8)
    } else {
        r.below(max + 1)
    };
    (0..len).map(|_| random_char(r)).collect()
}

fn random_name(r: &mut Rng) -> String {
    const NAMES: &[&str] = &[
        "filename",
        "position",
        "kafka_topic",
        "kafka_partition",
        "kafka_offset",
        "table",
        "lsn",
        "",
        "quote\"key",
        "back\\slash",
        "line\u{2028}sep",
        "\u{1F600}",
        "tab\there",
        "nul\0",
        "ünïcødé",
        "schema",
        "server",
    ];
    if r.chance(55) {
        r.pick(NAMES).to_string()
    } else {
        let mut s = random_string(r, 12);
        if s.len() > 200 {
            s = s.chars().take(40).collect();
        }
        s
    }
}

fn random_value(r: &mut Rng) -> Value {
    match r.below(20) {
        0 | 1 => Value::Null,
        2 | 3 => Value::Bool(r.chance(50)),
        4..=6 => Value::Int(match r.below(6) {
            0 => r.pick(&[
                i64::MIN,
                i64::MAX,
                0,
                -1,
                1,
                i64::MIN + 1,
                i64::MAX - 1,
                i32::MIN as i64,
                i32::MAX as i64,
                (1 << 53) + 1,
                -(1 << 53) - 1,
            ]),
            1 | 2 => r.below(100_000) as i64,
            _ => (r.next() as i64) >> r.below(64),
        }),
        7..=11 => Value::Float(random_double(r)),
        12..=15 => Value::String(random_string(r, 24)),
        _ => {
            let len = if r.chance(5) {
                r.range(1000, 5000)
            } else {
                r.below(40)
            };
            Value::Bytes((0..len).map(|_| r.next() as u8).collect())
        }
    }
}

/// One generated map: the members in the order given (a repeated name included, as a connector's
/// `put` of the same name twice would make it).
type Members = Vec<(String, Value)>;

fn random_members(r: &mut Rng) -> Members {
    let n = match r.below(10) {
        0 => 0,
        1..=5 => r.range(1, 3),
        _ => r.range(3, 8),
    };
    let mut m: Members = (0..n).map(|_| (random_name(r), random_value(r))).collect();
    if n > 1 && r.chance(5) {
        let dup = m[0].0.clone();
        m.push((dup, random_value(r)));
    }
    m
}

struct Case {
    namespace: String,
    partition: Option<Members>,
    offset: Option<Members>,
}

fn generate(seed: u64, count: usize) -> Vec<Case> {
    let mut r = Rng(seed);
    let mut cases = Vec::with_capacity(count);
    let specials = special_doubles();
    // First every special double, as a partition value (key bytes) and as an offset value.
    for (i, d) in specials.iter().enumerate() {
        cases.push(Case {
            namespace: format!("special-{i}"),
            partition: Some(vec![("d".into(), Value::Float(*d))]),
            offset: Some(vec![
                ("d".into(), Value::Float(*d)),
                ("neg".into(), Value::Float(-*d)),
            ]),
        });
    }
    // Every tricky character, alone, in a name, a value and the connector name.
    for c in (0u32..0x20).chain([
        0x22, 0x5C, 0x2F, 0x7F, 0x2028, 0x2029, 0xFFFF, 0x1F600, 0x10FFFF,
    ]) {
        let c = char::from_u32(c).unwrap();
        cases.push(Case {
            namespace: format!("conn{c}"),
            partition: Some(vec![(format!("k{c}"), Value::String(format!("v{c}")))]),
            offset: Some(vec![(c.to_string(), Value::String(c.to_string()))]),
        });
    }
    // The fixed shapes: null partition, tombstone, empty maps, i64 extremes, bytes of every padding.
    cases.push(Case {
        namespace: "c".into(),
        partition: None,
        offset: Some(vec![("position".into(), Value::Int(i64::MIN))]),
    });
    cases.push(Case {
        namespace: "c".into(),
        partition: None,
        offset: None,
    });
    cases.push(Case {
        namespace: String::new(),
        partition: Some(vec![]),
        offset: Some(vec![]),
    });
    cases.push(Case {
        namespace: "bytes".into(),
        partition: Some(vec![
            ("b0".into(), Value::Bytes(vec![])),
            ("b1".into(), Value::Bytes(vec![0xff])),
            ("b2".into(), Value::Bytes(vec![0xfb, 0xff])),
            ("b3".into(), Value::Bytes(vec![0, 0, 0])),
        ]),
        offset: Some(vec![
            ("max".into(), Value::Int(i64::MAX)),
            ("min".into(), Value::Int(i64::MIN)),
            ("t".into(), Value::Bool(true)),
            ("f".into(), Value::Bool(false)),
            ("n".into(), Value::Null),
        ]),
    });
    while cases.len() < count {
        let namespace = if r.chance(75) {
            format!("connector-{}", r.below(60))
        } else {
            random_string(&mut r, 16)
        };
        let partition = (!r.chance(6)).then(|| random_members(&mut r));
        let offset = (!r.chance(6)).then(|| random_members(&mut r));
        cases.push(Case {
            namespace,
            partition,
            offset,
        });
    }
    cases
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn unb64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .expect("base64 from ConnectJsonEncode")
}

/// `[[name_b64, type, value], ...]` or `null` (shared/vectors/README.md).
fn typed(members: Option<&Members>) -> String {
    let Some(members) = members else {
        return "null".into();
    };
    let mut s = String::from("[");
    for (i, (name, v)) in members.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let (ty, val) = match v {
            Value::Null => ("null", String::new()),
            Value::Bool(b) => ("bool", b.to_string()),
            Value::Int(n) => ("int", n.to_string()),
            Value::Float(f) => ("double", format!("{:016x}", f.to_bits())),
            Value::Bytes(b) => ("bytes", b64(b)),
            Value::String(t) => ("string", b64(t.as_bytes())),
        };
        write!(s, r#"["{}","{ty}","{val}"]"#, b64(name.as_bytes())).unwrap();
    }
    s.push(']');
    s
}

fn field_map(members: &Members) -> FieldMap {
    let mut m = FieldMap::new();
    for (n, v) in members {
        m.insert(n.clone(), v.clone());
    }
    m
}

/// What Connect produced for one line.
struct Java {
    key: Vec<u8>,
    value: Option<Vec<u8>>,
    murmur2: i64,
}

fn parse_java_line(line: &str) -> Result<Java, String> {
    let Json::Object(obj) = json::parse(line.as_bytes()).map_err(|e| format!("{e}: {line}"))?
    else {
        return Err(format!("not an object: {line}"));
    };
    let get = |name: &str| obj.iter().find(|(n, _)| n == name).map(|(_, v)| v);
    if let Some(Json::String(e)) = get("error") {
        return Err(format!("Connect refused the line: {e}"));
    }
    let (Some(Json::String(k)), Some(v), Some(Json::Int(m))) =
        (get("key_b64"), get("value_b64"), get("murmur2"))
    else {
        return Err(format!("unexpected output: {line}"));
    };
    let value = match v {
        Json::Null => None,
        Json::String(s) => Some(unb64(s)),
        other => return Err(format!("value_b64 is {other:?}")),
    };
    Ok(Java {
        key: unb64(k),
        value,
        murmur2: *m,
    })
}

/// Both byte strings as text, cut around the first difference.
fn show_diff(ours: &[u8], theirs: &[u8]) -> String {
    let at = ours
        .iter()
        .zip(theirs)
        .position(|(a, b)| a != b)
        .unwrap_or(ours.len().min(theirs.len()));
    let from = at.saturating_sub(60);
    let cut = |b: &[u8]| {
        let end = (at + 60).min(b.len());
        String::from_utf8_lossy(&b[from.min(b.len())..end]).into_owned()
    };
    format!(
        "first difference at byte {at} (lengths {} / {}):\n      ours:    …{:?}…\n      Connect: …{:?}…",
        ours.len(),
        theirs.len(),
        cut(ours),
        cut(theirs)
    )
}

/// Checks one case against Connect's output; a list of problems.
fn check(case: &Case, java: &Java) -> Vec<String> {
    let mut problems = Vec::new();
    let key = match &case.partition {
        Some(p) => OffsetKey::new(case.namespace.clone(), field_map(p)),
        None => OffsetKey::null_partition(case.namespace.clone()),
    };
    let ours_key = key.connect_key();
    if ours_key != java.key {
        problems.push(format!("key bytes: {}", show_diff(&ours_key, &java.key)));
    }
    let ours_value = case.offset.as_ref().map(|o| {
        let mut v = Vec::new();
        json::encode_value(&field_map(o), &mut v);
        v
    });
    match (&ours_value, &java.value) {
        (Some(a), Some(b)) if a != b => problems.push(format!("value bytes: {}", show_diff(a, b))),
        (Some(_), None) | (None, Some(_)) => problems.push(format!(
            "value: ours {:?}, Connect's {:?}",
            ours_value.as_deref().map(String::from_utf8_lossy),
            java.value.as_deref().map(String::from_utf8_lossy)
        )),
        _ => {}
    }
    if i64::from(murmur2(&java.key)) != java.murmur2 {
        problems.push(format!(
            "murmur2 of Connect's key: ours {}, Connect's {}",
            murmur2(&java.key),
            java.murmur2
        ));
    }
    let java_p25 = ((java.murmur2 as i32) & 0x7fff_ffff) % 25;
    if partition_for(&ours_key, 25) as i32 != java_p25 {
        problems.push(format!(
            "partition of 25: ours {}, Java's {java_p25}",
            partition_for(&ours_key, 25)
        ));
    }
    // Reading Connect's bytes gives what Connect reads back, and writes the same bytes again.
    match json::decode_key(&java.key) {
        Ok(decoded) => {
            if decoded.connect_key() != java.key {
                problems.push(format!(
                    "decoded key re-encodes differently: {}",
                    show_diff(&decoded.connect_key(), &java.key)
                ));
            }
            let want = case
                .partition
                .as_ref()
                .map(|p| field_map(p).connect_normalized());
            if decoded.partition() != want.as_ref() || decoded.namespace() != case.namespace {
                problems.push(format!(
                    "decoded key: {decoded:?}, expected namespace {:?} partition {want:?}",
                    case.namespace
                ));
            }
        }
        Err(e) => problems.push(format!("our decoder refuses Connect's key: {e}")),
    }
    if let Some(v) = &java.value {
        match json::decode_value(v) {
            Ok(Some(decoded)) => {
                let mut again = Vec::new();
                json::encode_value(&decoded, &mut again);
                if &again != v {
                    problems.push(format!(
                        "decoded value re-encodes differently: {}",
                        show_diff(&again, v)
                    ));
                }
                let want = case
                    .offset
                    .as_ref()
                    .map(|o| field_map(o).connect_normalized());
                if Some(&decoded) != want.as_ref() {
                    problems.push(format!("decoded value: {decoded:?}, expected {want:?}"));
                }
            }
            Ok(None) => problems.push("our decoder reads Connect's value as a tombstone".into()),
            Err(e) => problems.push(format!("our decoder refuses Connect's value: {e}")),
        }
    }
    problems
}

#[test]
fn our_bytes_equal_connects_json_converter_for_generated_maps() {
    let seed = std::env::var("CONNECT_DIFF_SEED")
        .ok()
        .map(|s| s.parse().expect("CONNECT_DIFF_SEED is an integer"))
        .unwrap_or(0x00C0_FFEE_2024_u64);
    let count = std::env::var("CONNECT_DIFF_COUNT")
        .ok()
        .map(|s| s.parse().expect("CONNECT_DIFF_COUNT is an integer"))
        .unwrap_or(1500usize)
        .max(1000);
    let cases = generate(seed, count);

    // The typed JSON Lines input, kept when the test fails.
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("generated.jsonl");
    let mut lines = Vec::with_capacity(cases.len());
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
        for c in &cases {
            let line = format!(
                r#"{{"namespace_b64":"{}","partition":{},"offset":{}}}"#,
                b64(c.namespace.as_bytes()),
                typed(c.partition.as_ref()),
                typed(c.offset.as_ref())
            );
            writeln!(f, "{line}").unwrap();
            lines.push(line);
        }
        f.flush().unwrap();
    }

    let java = scripts::java25();
    let version = scripts::java_version(&java);
    let out = Command::new(&java)
        .args(["-Xmx256m", "-XX:+UseSerialGC", "-cp", &scripts::classpath()])
        .arg("connectoffsets.ConnectJsonEncode")
        .stdin(std::fs::File::open(&input).unwrap())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", java.display()));
    let stdout = String::from_utf8(out.stdout).expect("UTF-8 from ConnectJsonEncode");
    let outputs: Vec<&str> = stdout.lines().collect();
    let keep = |why: &str| -> String {
        let kept = std::env::temp_dir().join(format!(
            "connect-differential-{seed:x}-{}.jsonl",
            std::process::id()
        ));
        std::fs::copy(&input, &kept).unwrap();
        format!(
            "{why}\ninput kept in {} (reproduce: {} -cp \"$(scripts/kafka classpath)\" \
             connectoffsets.ConnectJsonEncode < {})",
            kept.display(),
            java.display(),
            kept.display()
        )
    };
    if outputs.len() != cases.len() {
        panic!(
            "{}",
            keep(&format!(
                "ConnectJsonEncode ({}) wrote {} lines for {} inputs; stderr:\n{}",
                out.status,
                outputs.len(),
                cases.len(),
                String::from_utf8_lossy(&out.stderr)
            ))
        );
    }

    let mut mismatches = Vec::new();
    let (mut doubles, mut tombstones, mut null_partitions, mut bytes_total) = (0, 0, 0, 0usize);
    for (i, (case, java_line)) in cases.iter().zip(&outputs).enumerate() {
        for m in case.partition.iter().chain(case.offset.iter()).flatten() {
            if matches!(m.1, Value::Float(_)) {
                doubles += 1;
            }
        }
        tombstones += usize::from(case.offset.is_none());
        null_partitions += usize::from(case.partition.is_none());
        let problems = match parse_java_line(java_line) {
            Ok(j) => {
                bytes_total += j.key.len() + j.value.as_ref().map_or(0, Vec::len);
                check(case, &j)
            }
            Err(e) => vec![e],
        };
        if !problems.is_empty() {
            let mut shown = lines[i].clone();
            if shown.len() > 400 {
                let mut cut = 400;
                while !shown.is_char_boundary(cut) {
                    cut -= 1;
                }
                shown.truncate(cut);
                shown.push('…');
            }
            mismatches.push(format!(
                "line {}: {shown}\n    {}",
                i + 1,
                problems.join("\n    ")
            ));
        }
    }
    if !mismatches.is_empty() {
        let shown: Vec<&String> = mismatches.iter().take(25).collect();
        panic!(
            "{}",
            keep(&format!(
                "{} of {} generated maps differ from Connect's JsonConverter (Java {version}, seed \
                 {seed:#x}):\n{}",
                mismatches.len(),
                cases.len(),
                shown
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            ))
        );
    }
    assert!(
        out.status.success(),
        "ConnectJsonEncode exited {}",
        out.status
    );
    eprintln!(
        "connect_differential: {} maps (seed {seed:#x}; {doubles} doubles, {tombstones} tombstones, \
         {null_partitions} null partitions, {bytes_total} bytes of records) encode byte for byte \
         as Connect 4.4.0's JsonConverter does on Java {version}",
        cases.len()
    );
}
