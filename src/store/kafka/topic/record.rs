//! The record format of the offsets topic, in one place for the reader ([`super::load`]) and the
//! writer ([`super::write`]): the key and value of a writer's marker record, the `(writer, seq)`
//! headers of a sequenced batch's records (built and read back), and [`decode`], which says what
//! one record is (an offset, a reset, a marker) or why it cannot be used. Why markers and headers
//! exist: `docs/design.md`, section "`applied_seq`: record headers plus a marker per writer".

use rdkafka::message::{Header, Headers, OwnedHeaders};

use crate::codec::json::{self, Json};
use crate::model::{Batch, OffsetKey};

/// Record header naming the writer of the batch a record belongs to.
pub const WRITER_HEADER: &str = "connect-offsets-writer";
/// Record header with the batch's `seq` (ASCII decimal).
pub const SEQ_HEADER: &str = "connect-offsets-seq";
/// The one member of a writer marker's key: `{"connect-offsets-writer":"<writer>"}`.
pub const MARKER_FIELD: &str = "connect-offsets-writer";

/// The key of `writer`'s marker record.
pub fn marker_key(writer: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(writer.len() + 32);
    k.push(b'{');
    json::encode_str(MARKER_FIELD, &mut k);
    k.push(b':');
    json::encode_str(writer, &mut k);
    k.push(b'}');
    k
}

/// The value of a marker record for batch `seq`.
pub(super) fn marker_value(seq: u64) -> Vec<u8> {
    format!("{{\"seq\":{seq}}}").into_bytes()
}

/// What one record of the topic is.
pub(super) enum Record {
    /// An offset (`live`: its value is a valid offset object, kept as bytes) or a reset of a
    /// Connect key.
    Offset { key: OffsetKey, live: bool },
    /// A writer's marker; `None` when the marker itself was deleted (tombstoned by an operator).
    Marker { writer: String, seq: Option<u64> },
}

/// Decodes one record, or says why it cannot be used.
pub(super) fn decode(
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> std::result::Result<Record, String> {
    let key = key.ok_or("the record has no key")?;
    if key.first() == Some(&b'{')
        && let Ok(Json::Object(members)) = json::parse(key)
        && let [(field, Json::String(writer))] = members.as_slice()
        && field == MARKER_FIELD
    {
        let seq = match value {
            None => None,
            Some(v) => match json::parse(v) {
                Ok(Json::Object(m)) => match m.as_slice() {
                    [(f, Json::Int(seq))] if f == "seq" && *seq >= 0 => Some(*seq as u64),
                    _ => return Err("writer marker value is not {\"seq\":N}".into()),
                },
                Ok(Json::Null) => None,
                Ok(_) => return Err("writer marker value is not {\"seq\":N}".into()),
                Err(e) => return Err(format!("writer marker value: {e}")),
            },
        };
        return Ok(Record::Marker {
            writer: writer.clone(),
            seq,
        });
    }
    let key = json::decode_key(key).map_err(|e| e.to_string())?;
    let live = match value {
        None => false,
        Some(v) => json::check_value(v).map_err(|e| e.to_string())?,
    };
    Ok(Record::Offset { key, live })
}

/// The `(writer, seq)` headers of a record, when it has both and they parse.
pub(super) fn batch_headers<H: Headers>(headers: &H) -> Option<(&str, u64)> {
    let mut writer = None;
    let mut seq = None;
    for i in 0..headers.count() {
        let h = headers.get(i);
        match (h.key, h.value) {
            (WRITER_HEADER, Some(v)) => writer = std::str::from_utf8(v).ok(),
            (SEQ_HEADER, Some(v)) => {
                seq = std::str::from_utf8(v)
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok())
            }
            _ => {}
        }
    }
    Some((writer?, seq?))
}

/// At most the bytes the headers of a record of `writer`'s batches take (both headers, with
/// their lengths).
pub(super) fn headers_size(writer: &str) -> usize {
    const SEQ_DIGITS: usize = 20;
    WRITER_HEADER.len() + writer.len() + SEQ_HEADER.len() + SEQ_DIGITS + 4 * 5 + 5
}

/// The `(writer, seq)` headers of every record of a sequenced batch.
pub(super) fn headers(batch: &Batch) -> Option<OwnedHeaders> {
    if batch.seq == 0 {
        return None;
    }
    let seq = batch.seq.to_string();
    Some(
        OwnedHeaders::new_with_capacity(2)
            .insert(Header {
                key: WRITER_HEADER,
                value: Some(batch.writer.as_str()),
            })
            .insert(Header {
                key: SEQ_HEADER,
                value: Some(seq.as_str()),
            }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Partition;

    #[test]
    fn markers_decode_and_escape() {
        let k = marker_key("w \"1\"");
        assert_eq!(k, br#"{"connect-offsets-writer":"w \"1\""}"#);
        match decode(Some(&k), Some(&marker_value(42))) {
            Ok(Record::Marker { writer, seq }) => {
                assert_eq!(writer, "w \"1\"");
                assert_eq!(seq, Some(42));
            }
            _ => panic!("not a marker"),
        }
        assert!(matches!(
            decode(Some(&k), None),
            Ok(Record::Marker { seq: None, .. })
        ));
        assert!(decode(Some(&k), Some(b"{\"seq\":-1}")).is_err());
        assert!(decode(Some(&k), Some(b"[1]")).is_err());
        // Another object key is not a marker: it is a bad Connect key.
        let e = decode(Some(b"{\"a\":\"w\"}"), Some(b"{}")).err().unwrap();
        assert!(e.contains("array"), "{e}");
        assert!(decode(None, Some(b"{}")).is_err());
    }

    #[test]
    fn offsets_and_resets_decode() {
        let key = br#"["c",{"p":1}]"#;
        match decode(Some(key), Some(br#"{"position":3}"#)) {
            Ok(Record::Offset { key: k, live }) => {
                assert_eq!(k, OffsetKey::new("c", Partition::new().with("p", 1)));
                assert!(live);
            }
            _ => panic!("not an offset"),
        }
        assert!(matches!(
            decode(Some(key), None),
            Ok(Record::Offset { live: false, .. })
        ));
        assert!(matches!(
            decode(Some(key), Some(b"null")),
            Ok(Record::Offset { live: false, .. })
        ));
        let e = decode(Some(key), Some(br#"{"x":{"y":1}}"#)).err().unwrap();
        assert!(e.contains("field `x`"), "{e}");
        let e = decode(Some(key), Some(b"[1]")).err().unwrap();
        assert!(e.contains("object or null"), "{e}");
    }

    /// What the writer puts on a sequenced batch's records is what the reader takes from them.
    #[test]
    fn batch_headers_round_trip() {
        let batch = Batch::new("w \"1\"", 42, []);
        let built = headers(&batch).expect("a sequenced batch has headers");
        assert_eq!(batch_headers(&built), Some(("w \"1\"", 42)));
        assert!(headers(&Batch::new("w", 0, [])).is_none(), "unsequenced");
        let seq_only = OwnedHeaders::new().insert(Header {
            key: SEQ_HEADER,
            value: Some("7"),
        });
        assert_eq!(batch_headers(&seq_only), None, "both or nothing");
    }
}
