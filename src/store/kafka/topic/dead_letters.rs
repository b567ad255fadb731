//! Where records of the offsets topic that do not decode go: [`DeadLetters`] counts them, logs a
//! warning and copies each one once to the dead-letter file ([`crate::dead_letter`]) with its topic,
//! partition, offset, key and value bytes and the reason. The store's reset policy decides the rest
//! (skip the record, reset its partition, or refuse to open: see `KafkaStoreBuilder::reset_policy`).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::codec::json::{self, Json};
use crate::dead_letter::{DeadLetter, DeadLetterFile};
use crate::policy::ResetPolicy;
use crate::store::kafka::config::Settings;
use crate::{Error, OffsetKey, Result};

/// Where records that do not decode go. A bad record stays in the topic, so every open meets it
/// again: the file gets it once (records already in it, by topic, partition and offset, are not
/// written again), the count and the warning come once per open (a read of the topic again within
/// one, after a deleted marker, counts nothing twice).
pub(crate) struct DeadLetters {
    file: Option<DeadLetterFile>,
    count: AtomicU64,
    /// `(partition, offset)` of the records counted since the store opened.
    counted: std::sync::Mutex<std::collections::HashSet<(i32, i64)>>,
    /// `(topic, partition, offset)` of the Kafka records already in the file.
    in_file: std::sync::Mutex<std::collections::HashSet<(String, i32, i64)>>,
}

/// The `(topic, partition, offset)` of every Kafka record in a dead-letter file (lines that do not
/// parse are someone else's business: the file is append-only JSON lines).
fn kafka_letters(path: &std::path::Path) -> std::collections::HashSet<(String, i32, i64)> {
    let Ok(text) = std::fs::read(path) else {
        return Default::default();
    };
    let field = |members: &[(String, Json)], name: &str| -> Option<String> {
        members
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| match v {
                Json::String(s) => Some(s.clone()),
                _ => None,
            })
    };
    text.split(|b| *b == b'\n')
        .filter_map(|line| match json::parse(line) {
            Ok(Json::Object(members)) if field(&members, "source").as_deref() == Some("kafka") => {
                let location = members.iter().find(|(n, _)| n == "location")?;
                let Json::Object(loc) = &location.1 else {
                    return None;
                };
                Some((
                    field(loc, "topic")?,
                    field(loc, "partition")?.parse().ok()?,
                    field(loc, "offset")?.parse().ok()?,
                ))
            }
            _ => None,
        })
        .collect()
}

impl DeadLetters {
    pub(crate) fn new(settings: &Settings) -> Self {
        let file = settings.dead_letter.as_ref().map(DeadLetterFile::new);
        let in_file = file
            .as_ref()
            .map(|f| kafka_letters(f.path()))
            .unwrap_or_default();
        DeadLetters {
            file,
            count: AtomicU64::new(0),
            counted: Default::default(),
            in_file: std::sync::Mutex::new(in_file),
        }
    }

    pub(crate) fn count(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }

    /// Deals with a record that does not decode (`key`: its partition, when the key decoded and
    /// the value did not) under the store's reset policy, and says what the loader does with it.
    /// The record reaches the dead-letter file first, so a refusal can point at it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn bad(
        &self,
        settings: &Settings,
        partition: i32,
        offset: i64,
        raw_key: Option<&[u8]>,
        value: Option<&[u8]>,
        reason: &str,
        key: Option<&OffsetKey>,
    ) -> Result<Verdict> {
        let topic = &settings.topic;
        let policy = match &settings.reset_policies {
            None if settings.strict => Some(ResetPolicy::Fail),
            None => None,
            Some(p) => Some(key.map_or(p.default_policy(), |k| p.policy_for(k.namespace()))),
        };
        let new = self
            .in_file
            .lock()
            .map(|mut seen| seen.insert((topic.clone(), partition, offset)))
            .unwrap_or(true);
        if let Some(file) = self.file.as_ref().filter(|_| new) {
            file.write(&DeadLetter {
                source: "kafka",
                location: vec![
                    ("topic", topic.clone()),
                    ("partition", partition.to_string()),
                    ("offset", offset.to_string()),
                ],
                reason: reason.to_string(),
                blobs: vec![("key", raw_key), ("value", value)],
            })?;
        }
        let whose = key.map_or(String::new(), |k| {
            format!(
                " (connector `{}` partition {})",
                k.namespace(),
                k.partition().map_or("null".into(), |p| p.to_json())
            )
        });
        let kept = match &self.file {
            Some(f) => format!(
                "the record is in the dead-letter file {}",
                f.path().display()
            ),
            None => "no dead-letter file keeps it: set `dead.letter.file` (--dead-letter)".into(),
        };
        let refuse = |why: String| {
            Error::store(
                "kafka",
                format!(
                    "topic `{topic}` partition {partition} offset {offset}{whose}: {reason}; {why}; {kept}"
                ),
            )
        };
        let first = self
            .counted
            .lock()
            .map(|mut seen| seen.insert((partition, offset)))
            .unwrap_or(true);
        if let (Some(k), Some(p), true) = (key, policy, first) {
            crate::metrics::offset_reset(k.namespace(), p.as_str(), "corrupt");
        }
        let verdict = match (policy, key) {
            (Some(ResetPolicy::Fail), _) if settings.reset_policies.is_none() => {
                return Err(refuse(
                    "strict mode refuses such records (without `strict` they are skipped)".into(),
                ));
            }
            (Some(ResetPolicy::Fail), _) => {
                return Err(refuse(
                    "reset policy fail refuses to open (`reset.policy=skip` resets the partition \
                     instead; `reset.policy=fail,<connector>=skip` does so for one connector)"
                        .into(),
                ));
            }
            (Some(p @ (ResetPolicy::Earliest | ResetPolicy::Latest)), Some(k)) => {
                return Err(refuse(format!(
                    "reset policy {p} of connector `{}` needs the source's {p} position, which \
                     only the connector knows: use fail or skip for it in the store (a worker \
                     resolves {p} with `ResetPolicies::load` and its source's bounds)",
                    k.namespace()
                )));
            }
            // With no policy too: Connect's reader answers no offset for a partition whose latest
            // record does not decode, and the value before it is older than the connector's last.
            (_, Some(_)) => Verdict::Reset,
            // A key that does not decode names no partition: there is nothing to reset.
            _ => Verdict::Skip,
        };
        if !first {
            return Ok(verdict);
        }
        let n = self.count.fetch_add(1, Ordering::SeqCst) + 1;
        if self.file.is_none() {
            // (DeadLetterFile::write counts the ones it writes.)
            crate::metrics::dead_lettered("kafka");
        }
        let what = match verdict {
            Verdict::Reset if policy.is_some() => "reset its partition (reset policy skip)",
            Verdict::Reset => "its partition has no offset, as Connect's reader answers",
            Verdict::Skip => "skipped it",
        };
        match &self.file {
            Some(f) if !new => tracing::warn!(
                topic = %topic, partition, offset, reason, dead_letters = n,
                file = %f.path().display(),
                "an offsets record does not decode{whose}: {what}; it was put in the dead-letter file before"
            ),
            Some(f) => tracing::warn!(
                topic = %topic, partition, offset, reason, dead_letters = n,
                file = %f.path().display(),
                "an offsets record does not decode{whose}: {what}; it is in the dead-letter file"
            ),
            None => tracing::warn!(
                topic = %topic, partition, offset, reason, dead_letters = n,
                "an offsets record does not decode{whose}: {what} (no dead-letter file configured: \
                 set `dead.letter.file` to keep such records)"
            ),
        }
        Ok(verdict)
    }
}

/// What the loader does with a record that does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Nothing: the partition keeps what it held before the record (no policy, or no partition).
    Skip,
    /// The partition has no offset from here on, as after a tombstone (reset policy `skip`).
    Reset,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::kafka::KafkaStoreBuilder;

    /// Every bad record is counted once per open (met again in the same open, not again); the
    /// file gets each one once, also across opens.
    #[test]
    fn each_bad_record_reaches_the_file_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dead.jsonl");
        let settings = KafkaStoreBuilder::new("h:1", "t")
            .dead_letter_file(&path)
            .settings()
            .unwrap();
        let lines = || std::fs::read_to_string(&path).unwrap().lines().count();
        let first = DeadLetters::new(&settings);
        first
            .bad(&settings, 3, 7, Some(b"k"), None, "bad", None)
            .unwrap();
        first
            .bad(&settings, 3, 7, Some(b"k"), None, "bad", None)
            .unwrap();
        assert_eq!((first.count(), lines()), (1, 1));
        let reopened = DeadLetters::new(&settings);
        reopened
            .bad(&settings, 3, 7, Some(b"k"), None, "bad", None)
            .unwrap();
        reopened
            .bad(&settings, 3, 8, None, Some(b"v"), "bad", None)
            .unwrap();
        assert_eq!((reopened.count(), lines()), (2, 2));
    }

    #[test]
    fn strict_refuses_naming_partition_and_offset() {
        let settings = KafkaStoreBuilder::new("h:1", "t")
            .strict(true)
            .settings()
            .unwrap();
        let dead = DeadLetters::new(&settings);
        let e = dead
            .bad(&settings, 3, 9, None, None, "bad", None)
            .unwrap_err();
        assert!(e.to_string().contains("partition 3 offset 9"), "{e}");
        assert_eq!(dead.count(), 0);
    }
}
