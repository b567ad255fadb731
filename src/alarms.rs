//! Stall and gap alarms: a connector whose worker keeps committing while its offsets stay where
//! they are ("is it stuck?"), and an offset that moved backwards outside a reset (a misconfigured
//! connector, or two workers writing one connector).
//!
//! **Where they are observed.** A [`CommitBuffer`](crate::buffer::CommitBuffer) with
//! [`stall_after`](crate::buffer::CommitBufferConfig::stall_after) set reads, before each store
//! write, the offsets the store holds for the batch's keys and compares them with the batch's
//! ([`compare`]); the store is what any other writer of the connector wrote too, so a second
//! worker's commits show up as moves backwards in either's buffer. Per connector it keeps when the
//! connector last committed and last moved, and how many moves went backwards. The worker's own
//! metrics give them live; the buffer also records them in the store, in the reserved namespace
//! [`ALARMS_NAMESPACE`] (one [`AlarmRecord`] per connector and writer, committed right after the
//! store write in which a flag changed, and at least every half `stall_after` while the connector
//! commits), which is where `connect-offsets lag` and `serve`'s `/metrics` read them from
//! ([`read`]): what they judge is at most half a `stall_after` behind the worker.
//!
//! **Moved backwards** is judged on Connect's opaque offset maps like this: the old and the new
//! offset have the same members, the non-numeric ones (a file name, a GTID set) equal, and of the
//! numeric ones none rose and at least one fell. Anything else that differs (a new binlog file
//! with a lower position, a member added) is a move, not judged backwards. A reset (`null`) is
//! never backwards, nor is the first offset after it; neither is an override that applies once
//! (its batch carries the override's marker), nor a rewind or `set` made with the worker stopped
//! (the buffer only judges its own commits against what the store holds).
//!
//! **Stalled**: the connector committed within the last `stall_after` and none of its offsets
//! moved for at least `stall_after` (since the buffer opened, at most: it cannot know how long
//! before that the offsets stood still). A connector that commits nothing is idle, not stalled.

use std::time::Duration;

use crate::Result;
use crate::model::{Offset, OffsetKey, Partition, Value};
use crate::store::OffsetStore;

pub use crate::namespaces::ALARMS_NAMESPACE;

/// How a committed offset compares with the one the store held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Movement {
    /// The same offset again.
    Unchanged,
    /// A different offset (forwards, or not comparable: see the module docs).
    Moved,
    /// Same members, non-numeric ones equal, no number rose and one fell.
    Backwards,
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) if f.is_finite() => Some(*f),
        _ => None,
    }
}

/// `new` against `old` (what the store held; `None` when it held nothing). A reset (`new` is
/// `None`) is a move.
pub fn compare(old: Option<&Offset>, new: Option<&Offset>) -> Movement {
    let (Some(old), Some(new)) = (old, new) else {
        return if old.is_none() && new.is_none() {
            Movement::Unchanged
        } else {
            Movement::Moved
        };
    };
    // What the store gives back is normalized (bytes as Base64): compare like with like.
    let normalized;
    let new = if new.needs_normalizing() {
        normalized = new.connect_normalized();
        &normalized
    } else {
        new
    };
    if old == new {
        return Movement::Unchanged;
    }
    if old.len() != new.len() {
        return Movement::Moved;
    }
    let mut fell = false;
    for (name, was) in old.iter() {
        let Some(now) = new.get(name) else {
            return Movement::Moved;
        };
        match (number(was), number(now)) {
            (Some(a), Some(b)) if b > a => return Movement::Moved,
            (Some(a), Some(b)) => fell |= b < a,
            _ if was != now => return Movement::Moved,
            _ => {}
        }
    }
    if fell {
        Movement::Backwards
    } else {
        Movement::Moved
    }
}

/// One connector's alarms as one writer's buffer recorded them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlarmRecord {
    /// The connector.
    pub connector: String,
    /// The writer (commit buffer) that observed it.
    pub writer: String,
    /// The buffer's `stall_after`, milliseconds.
    pub stall_after_ms: u64,
    /// When the connector last committed (milliseconds since the Unix epoch).
    pub last_commit_ms: u64,
    /// When one of its offsets last moved (or the buffer opened, if none has since).
    pub last_moved_ms: u64,
    /// Commits whose offset moved backwards, over the writer's lifetimes.
    pub backwards: u64,
    /// When the last of them was seen.
    pub last_backwards_ms: Option<u64>,
}

impl AlarmRecord {
    /// Stalled at `now_ms`: committed within `stall_after`, unmoved for at least as long.
    pub fn stalled(&self, now_ms: u64) -> bool {
        now_ms.saturating_sub(self.last_commit_ms) < self.stall_after_ms
            && now_ms.saturating_sub(self.last_moved_ms) >= self.stall_after_ms
    }

    /// How long its offsets have not moved, at `now_ms`.
    pub fn unmoved_for(&self, now_ms: u64) -> Duration {
        Duration::from_millis(now_ms.saturating_sub(self.last_moved_ms))
    }

    /// The key the record is stored under.
    pub fn key(connector: &str, writer: &str) -> OffsetKey {
        OffsetKey::new(
            ALARMS_NAMESPACE,
            Partition::new()
                .with("connector", connector)
                .with("writer", writer),
        )
    }

    /// The record as an offset (flat, as Connect's offsets are).
    pub fn to_offset(&self) -> Offset {
        let ms = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let mut o = Offset::new()
            .with("stall_after_ms", ms(self.stall_after_ms))
            .with("last_commit_ms", ms(self.last_commit_ms))
            .with("last_moved_ms", ms(self.last_moved_ms))
            .with("backwards", ms(self.backwards));
        if let Some(t) = self.last_backwards_ms {
            o.insert("last_backwards_ms", ms(t));
        }
        o
    }

    /// A record read back; `None` for one that is not (someone else's offset in the namespace).
    pub fn from_stored(key: &OffsetKey, offset: &Offset) -> Option<AlarmRecord> {
        let text = |p: &Partition, n: &str| match p.get(n) {
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        };
        let ms = |n: &str| match offset.get(n) {
            Some(Value::Int(i)) => u64::try_from(*i).ok(),
            _ => None,
        };
        let p = key.partition()?;
        Some(AlarmRecord {
            connector: text(p, "connector")?,
            writer: text(p, "writer")?,
            stall_after_ms: ms("stall_after_ms")?,
            last_commit_ms: ms("last_commit_ms")?,
            last_moved_ms: ms("last_moved_ms")?,
            backwards: ms("backwards")?,
            last_backwards_ms: ms("last_backwards_ms"),
        })
    }
}

/// Every alarm record in `store`, by connector then writer.
pub fn read(store: &dyn OffsetStore) -> Result<Vec<AlarmRecord>> {
    // A store without write times holds no buffer's records (a consumer group, which is not
    // asked for a namespace it has no group for).
    if !store.capabilities().keeps_change_times {
        return Ok(Vec::new());
    }
    let mut out: Vec<AlarmRecord> = store
        .partitions(ALARMS_NAMESPACE)?
        .iter()
        .filter_map(|(k, o)| AlarmRecord::from_stored(k, o))
        .collect();
    out.sort_by(|a, b| (&a.connector, &a.writer).cmp(&(&b.connector, &b.writer)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(members: &[(&str, Value)]) -> Offset {
        members.iter().cloned().collect()
    }

    #[test]
    fn backwards_only_when_no_number_rose_and_one_fell_with_the_rest_equal() {
        use Movement::*;
        let pos = |n: i64| o(&[("position", Value::Int(n))]);
        assert_eq!(compare(Some(&pos(5)), Some(&pos(5))), Unchanged);
        assert_eq!(compare(Some(&pos(5)), Some(&pos(6))), Moved);
        assert_eq!(compare(Some(&pos(5)), Some(&pos(4))), Backwards);
        assert_eq!(compare(None, Some(&pos(4))), Moved);
        assert_eq!(compare(Some(&pos(5)), None), Moved);
        let bin = |f: &str, p: i64| o(&[("file", Value::String(f.into())), ("pos", Value::Int(p))]);
        assert_eq!(compare(Some(&bin("b.1", 900)), Some(&bin("b.2", 4))), Moved);
        assert_eq!(
            compare(Some(&bin("b.2", 900)), Some(&bin("b.2", 4))),
            Backwards
        );
        let two = |a: i64, b: f64| o(&[("ts", Value::Int(a)), ("row", Value::Float(b))]);
        assert_eq!(compare(Some(&two(9, 1.0)), Some(&two(10, 0.0))), Moved);
        assert_eq!(compare(Some(&two(9, 1.0)), Some(&two(9, 0.5))), Backwards);
        assert_eq!(compare(Some(&pos(5)), Some(&two(1, 0.0))), Moved);
    }

    #[test]
    fn records_round_trip_and_judge_stalls_at_a_time() {
        let r = AlarmRecord {
            connector: "c".into(),
            writer: "w".into(),
            stall_after_ms: 1_000,
            last_commit_ms: 10_000,
            last_moved_ms: 8_000,
            backwards: 2,
            last_backwards_ms: Some(9_000),
        };
        let key = AlarmRecord::key("c", "w");
        assert_eq!(
            AlarmRecord::from_stored(&key, &r.to_offset()),
            Some(r.clone())
        );
        assert!(r.stalled(10_500));
        assert!(!r.stalled(11_000), "no commit for stall_after: idle");
        assert!(
            !AlarmRecord {
                last_moved_ms: 9_600,
                ..r
            }
            .stalled(10_500)
        );
    }
}
