//! A sink connector's offsets in Connect's shape, checked: partition
//! `{"kafka_topic":"orders","kafka_partition":3}`, offset `{"kafka_offset":1000}`. As in Connect
//! (`SinkUtils.parseSinkConnectorOffsets`), a partition number or offset given as a string of digits
//! (`"3"`, `"1000"`) is accepted as the number. Stricter than Connect: other members are refused
//! rather than dropped, and a negative offset is refused here instead of by the broker.

use crate::model::{Offset, OffsetKey, Partition, Value};
use crate::{Error, Result};

/// The partition member naming the topic.
pub const TOPIC: &str = "kafka_topic";
/// The partition member naming the topic partition.
pub const PARTITION: &str = "kafka_partition";
/// The offset member holding the consumer position.
pub const OFFSET: &str = "kafka_offset";

/// One topic partition of a sink connector's consumer group.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// The topic.
    pub topic: String,
    /// The partition number.
    pub partition: i32,
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

impl TopicPartition {
    /// The store key of this topic partition for `connector`, members in the order Connect's
    /// `GET /connectors/{name}/offsets` prints them: `SinkUtils.consumerGroupOffsetsToConnectorOffsets`
    /// puts them in a `java.util.HashMap`, whose iteration gives `kafka_partition` (bucket 4 of 16)
    /// before `kafka_topic` (bucket 10), so that our output and the worker's diff cleanly.
    pub fn key(&self, connector: &str) -> OffsetKey {
        OffsetKey::new(
            connector,
            Partition::new()
                .with(PARTITION, i64::from(self.partition))
                .with(TOPIC, self.topic.as_str()),
        )
    }
}

/// The offset document of a committed position.
pub fn offset_of(position: i64) -> Offset {
    Offset::new().with(OFFSET, position)
}

fn bad(key: &OffsetKey, reason: impl std::fmt::Display) -> Error {
    let shown = key
        .partition()
        .map_or_else(|| "null".to_string(), |p| p.to_json());
    Error::InvalidData(format!(
        "sink connector `{}`, partition {shown}: {reason}",
        key.namespace()
    ))
}

/// An integer member, or a string of one (Connect's `Long.parseLong(String.valueOf(v))`).
fn integer(v: &Value) -> Option<i64> {
    match v {
        Value::Int(n) => Some(*n),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// `v` as it looks in JSON, for error messages.
fn shown(v: &Value) -> String {
    let mut out = Vec::new();
    match v {
        Value::String(s) => crate::codec::json::encode_str(s, &mut out),
        Value::Float(f) => crate::codec::json::java_double(*f, &mut out),
        Value::Int(n) => return n.to_string(),
        Value::Bool(b) => return b.to_string(),
        Value::Null => return "null".into(),
        Value::Bytes(_) => return "bytes".into(),
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The topic partition a sink connector's key names.
pub fn parse_key(key: &OffsetKey) -> Result<TopicPartition> {
    let Some(p) = key.partition() else {
        return Err(bad(
            key,
            format!(
                "a sink connector's partition must be {{\"{TOPIC}\":...,\"{PARTITION}\":...}}, not null"
            ),
        ));
    };
    if let Some((name, _)) = p.iter().find(|(n, _)| *n != TOPIC && *n != PARTITION) {
        return Err(bad(
            key,
            format!(
                "unknown member `{name}`: a sink connector's partition has only `{TOPIC}` and `{PARTITION}`"
            ),
        ));
    }
    let topic = match p.get(TOPIC) {
        Some(Value::String(t)) if !t.is_empty() => t.clone(),
        Some(v) => {
            return Err(bad(
                key,
                format!(
                    "`{TOPIC}` must be a topic name (a non-empty string), not {}",
                    shown(v)
                ),
            ));
        }
        None => {
            return Err(bad(
                key,
                format!(
                    "the partition must contain the keys `{TOPIC}` and `{PARTITION}` (`{TOPIC}` is missing)"
                ),
            ));
        }
    };
    let partition = match p.get(PARTITION) {
        None => {
            return Err(bad(
                key,
                format!(
                    "the partition must contain the keys `{TOPIC}` and `{PARTITION}` (`{PARTITION}` is missing)"
                ),
            ));
        }
        Some(v) => integer(v)
            .and_then(|n| i32::try_from(n).ok())
            .filter(|n| *n >= 0)
            .ok_or_else(|| {
                bad(
                    key,
                    format!(
                        "`{PARTITION}` must be a partition number (an integer from 0), not {}",
                        shown(v)
                    ),
                )
            })?,
    };
    Ok(TopicPartition { topic, partition })
}

/// The consumer position an offset document gives.
pub fn parse_offset(key: &OffsetKey, offset: &Offset) -> Result<i64> {
    if let Some((name, _)) = offset.iter().find(|(n, _)| *n != OFFSET) {
        return Err(bad(
            key,
            format!(
                "unknown offset member `{name}`: a sink connector's offset is {{\"{OFFSET}\":N}}"
            ),
        ));
    }
    let Some(v) = offset.get(OFFSET) else {
        return Err(bad(
            key,
            format!("the offset must be null (a reset) or contain the key `{OFFSET}`"),
        ));
    };
    match integer(v) {
        Some(n) if n >= 0 => Ok(n),
        Some(n) => Err(bad(
            key,
            format!("`{OFFSET}` must not be negative, not {n}"),
        )),
        None => Err(bad(
            key,
            format!(
                "`{OFFSET}` must be an integer (or a string of one), not {}",
                shown(v)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(p: &str) -> OffsetKey {
        OffsetKey::new("sink", Partition::from_json(p).unwrap())
    }

    #[test]
    fn accepts_connects_shape_and_strings_of_digits() {
        let tp = parse_key(&key(r#"{"kafka_topic":"orders","kafka_partition":3}"#)).unwrap();
        assert_eq!(
            tp,
            TopicPartition {
                topic: "orders".into(),
                partition: 3
            }
        );
        let tp = parse_key(&key(r#"{"kafka_partition":"3","kafka_topic":"orders"}"#)).unwrap();
        assert_eq!(tp.partition, 3);
        let k = tp.key("sink");
        assert_eq!(
            parse_offset(&k, &Offset::new().with(OFFSET, "1000")).unwrap(),
            1000
        );
        assert_eq!(parse_offset(&k, &offset_of(0)).unwrap(), 0);
    }

    #[test]
    fn names_what_is_wrong() {
        for (p, want) in [
            (r#"{"filename":"/tmp/x"}"#, "unknown member `filename`"),
            (r#"{"kafka_topic":"t"}"#, "`kafka_partition` is missing"),
            (r#"{"kafka_partition":1}"#, "`kafka_topic` is missing"),
            (
                r#"{"kafka_topic":5,"kafka_partition":1}"#,
                "`kafka_topic` must be a topic name",
            ),
            (
                r#"{"kafka_topic":"t","kafka_partition":-1}"#,
                "`kafka_partition` must be a partition number",
            ),
            (r#"{"kafka_topic":"t","kafka_partition":1.5}"#, "not 1.5"),
        ] {
            let e = parse_key(&key(p)).unwrap_err().to_string();
            assert!(
                e.contains(want) && e.contains("sink connector `sink`"),
                "{p}: {e}"
            );
        }
        let e = parse_key(&OffsetKey::null_partition("sink"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not null"), "{e}");
        let k = key(r#"{"kafka_topic":"t","kafka_partition":0}"#);
        for (o, want) in [
            (
                Offset::new().with(OFFSET, -5),
                "must not be negative, not -5",
            ),
            (Offset::new().with(OFFSET, 1.5), "must be an integer"),
            (Offset::new().with(OFFSET, "ten"), "not \"ten\""),
            (
                Offset::new().with("position", 5),
                "unknown offset member `position`",
            ),
            (Offset::new(), "contain the key `kafka_offset`"),
        ] {
            let e = parse_offset(&k, &o).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
    }
}
