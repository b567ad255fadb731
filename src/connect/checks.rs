//! What Kafka Connect's own source connectors check before Connect alters their offsets
//! (`SourceConnector.alterOffsets`): MirrorMaker 2's three connectors refuse partitions and offsets
//! their tasks could not use, with these messages (Connect answers them with 500), and answer for
//! their offsets themselves, which changes Connect's success message. Other connectors keep
//! Connect's defaults: anything is taken, and the offsets are "framework-managed".

use crate::codec::java_map::hash_order;
use crate::codec::json::java_double;
use crate::model::{FieldMap, Offset, OffsetKey, Value};

/// Who answers for a connector's offsets once Connect altered them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Managed {
    /// Connect alone (`alterOffsets` left as the default): the "framework-managed" message.
    Framework,
    /// The connector too (its `alterOffsets` returned true).
    Connector,
}

/// The members one of MirrorMaker 2's connectors requires of a source partition, and whether
/// its offsets may only be 0.
struct Shape {
    strings: &'static [&'static str],
    partition: bool,
    only_zero: bool,
}

fn shape(class: &str) -> Option<Shape> {
    let name = class.rsplit('.').next().unwrap_or(class);
    Some(match name {
        "MirrorSourceConnector" => Shape {
            strings: &["cluster", "topic"],
            partition: true,
            only_zero: false,
        },
        "MirrorCheckpointConnector" => Shape {
            strings: &["group", "topic"],
            partition: true,
            only_zero: true,
        },
        "MirrorHeartbeatConnector" => Shape {
            strings: &["sourceClusterAlias", "targetClusterAlias"],
            partition: false,
            only_zero: true,
        },
        _ => return None,
    })
}

/// Checks `entries` (an alteration; `None` resets) as the connector of class `class` does.
/// `Err` holds the connector's message.
pub fn check_alter(
    class: &str,
    entries: &[(OffsetKey, Option<Offset>)],
) -> Result<Managed, String> {
    let Some(shape) = shape(class) else {
        return Ok(Managed::Framework);
    };
    for (key, offset) in entries {
        // Resets are taken for anything, so that garbage can be cleaned up.
        let Some(offset) = offset else { continue };
        let Some(partition) = key.partition() else {
            return Err("Source partitions may not be null".into());
        };
        let shown = java_map(partition);
        for name in shape.strings {
            match partition.get(name) {
                None => return Err(missing(&shown, name)),
                Some(Value::String(_)) => {}
                Some(v) => return Err(invalid(&shown, v, name, "which must be a string")),
            }
        }
        if shape.partition {
            match partition.get("partition") {
                None => return Err(missing(&shown, "partition")),
                Some(Value::Int(n)) if *n > i64::from(i32::MAX) => {
                    return Err(invalid(
                        &shown,
                        &Value::Int(*n),
                        "partition",
                        "which must be an integer",
                    ));
                }
                Some(Value::Int(n)) if *n < 0 => {
                    return Err(invalid(
                        &shown,
                        &Value::Int(*n),
                        "partition",
                        "which cannot be negative",
                    ));
                }
                Some(Value::Int(_)) => {}
                Some(v) => return Err(invalid(&shown, v, "partition", "which must be an integer")),
            }
        }
        let offset_shown = java_map(offset);
        let bad = |value: &Value, why: &str| {
            format!(
                "Source offset {offset_shown} for source partition {shown} has an invalid value {} for the 'offset' key{why}",
                java_value(value)
            )
        };
        match offset.get("offset") {
            None => {
                return Err(format!(
                    "Source offset {offset_shown} for source partition {shown} is missing the 'offset' key, which is required"
                ));
            }
            Some(Value::Int(n)) if shape.only_zero && *n != 0 => {
                return Err(bad(&Value::Int(*n), "; the only accepted value is 0"));
            }
            Some(Value::Int(n)) if *n < 0 => {
                return Err(bad(&Value::Int(*n), ", which cannot be negative"));
            }
            Some(Value::Int(_)) => {}
            Some(v) => return Err(bad(v, ", which must be an integer")),
        }
    }
    Ok(Managed::Connector)
}

fn missing(partition: &str, key: &str) -> String {
    format!("Source partition {partition} is missing the '{key}' key, which is required")
}

fn invalid(partition: &str, value: &Value, key: &str, why: &str) -> String {
    format!(
        "Source partition {partition} has an invalid value {} for the '{key}' key, {why}",
        java_value(value)
    )
}

/// `map.toString()` of the `HashMap` Connect holds the members in.
fn java_map(map: &FieldMap) -> String {
    let members: Vec<(&str, &Value)> = map.iter().collect();
    let order = hash_order(members.iter().map(|(n, _)| *n));
    let shown: Vec<String> = order
        .into_iter()
        .map(|i| format!("{}={}", members[i].0, java_value(members[i].1)))
        .collect();
    format!("{{{}}}", shown.join(", "))
}

/// `String.valueOf(value)`.
fn java_value(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Int(n) => n.to_string(),
        Value::Float(f) if f.is_nan() => "NaN".into(),
        Value::Float(f) if f.is_infinite() => {
            if *f > 0.0 { "Infinity" } else { "-Infinity" }.into()
        }
        Value::Float(f) => {
            let mut out = Vec::new();
            java_double(*f, &mut out);
            String::from_utf8_lossy(&out).into_owned()
        }
        Value::String(s) => s.clone(),
        Value::Bytes(b) => format!("{b:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Partition;

    const SOURCE: &str = "org.apache.kafka.connect.mirror.MirrorSourceConnector";

    fn entry(p: Partition, o: Option<Offset>) -> Vec<(OffsetKey, Option<Offset>)> {
        vec![(OffsetKey::new("m", p), o)]
    }

    fn mirror(cluster: Value, partition: Value) -> Partition {
        Partition::new()
            .with("cluster", cluster)
            .with("topic", "t")
            .with("partition", partition)
    }

    #[test]
    fn other_connectors_take_anything() {
        let e = entry(
            Partition::new().with("x", 1),
            Some(Offset::new().with("y", "z")),
        );
        assert_eq!(
            check_alter("io.debezium.connector.postgresql.PostgresConnector", &e),
            Ok(Managed::Framework)
        );
    }

    #[test]
    fn mirror_source_checks_as_mirror_utils_does() {
        let ok = entry(
            mirror("a".into(), 3.into()),
            Some(Offset::new().with("offset", 9)),
        );
        assert_eq!(check_alter(SOURCE, &ok), Ok(Managed::Connector));
        // Resets are taken whatever they reset.
        let reset = entry(Partition::new().with("junk", 1), None);
        assert_eq!(check_alter(SOURCE, &reset), Ok(Managed::Connector));
        for (e, want) in [
            (
                entry(
                    mirror("a".into(), 3.into()),
                    Some(Offset::new().with("offset", "5")),
                ),
                "Source offset {offset=5} for source partition {cluster=a, partition=3, topic=t} has an invalid value 5 for the 'offset' key, which must be an integer",
            ),
            (
                entry(
                    mirror("a".into(), 3.into()),
                    Some(Offset::new().with("offset", -1)),
                ),
                "has an invalid value -1 for the 'offset' key, which cannot be negative",
            ),
            (
                entry(
                    mirror("a".into(), 3.into()),
                    Some(Offset::new().with("foo", 29)),
                ),
                "Source offset {foo=29} for source partition {cluster=a, partition=3, topic=t} is missing the 'offset' key, which is required",
            ),
            (
                entry(
                    Partition::new().with("topic", "t").with("partition", 1),
                    Some(Offset::new().with("offset", 1)),
                ),
                "Source partition {partition=1, topic=t} is missing the 'cluster' key, which is required",
            ),
            (
                entry(
                    mirror(5.into(), 3.into()),
                    Some(Offset::new().with("offset", 1)),
                ),
                "has an invalid value 5 for the 'cluster' key, which must be a string",
            ),
            (
                entry(
                    mirror("a".into(), (-2).into()),
                    Some(Offset::new().with("offset", 1)),
                ),
                "has an invalid value -2 for the 'partition' key, which cannot be negative",
            ),
            (
                entry(
                    mirror("a".into(), 1.5.into()),
                    Some(Offset::new().with("offset", 1)),
                ),
                "has an invalid value 1.5 for the 'partition' key, which must be an integer",
            ),
        ] {
            let got = check_alter(SOURCE, &e).unwrap_err();
            assert!(got.contains(want), "{got}");
        }
    }

    #[test]
    fn checkpoints_and_heartbeats_take_offset_zero_only() {
        let heartbeat = entry(
            Partition::new()
                .with("sourceClusterAlias", "a")
                .with("targetClusterAlias", "b"),
            Some(Offset::new().with("offset", 1)),
        );
        let e = check_alter(
            "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector",
            &heartbeat,
        )
        .unwrap_err();
        assert!(e.ends_with("the only accepted value is 0"), "{e}");
        let checkpoint = entry(
            Partition::new()
                .with("group", "g")
                .with("topic", "t")
                .with("partition", 0),
            Some(Offset::new().with("offset", 0)),
        );
        assert_eq!(
            check_alter(
                "org.apache.kafka.connect.mirror.MirrorCheckpointConnector",
                &checkpoint
            ),
            Ok(Managed::Connector)
        );
    }
}
