//! Per connector, what the apply thread saw of its commits when `stall_after` is set: when it last
//! committed and last moved, and how many commits moved an offset backwards (see
//! [`crate::alarms`]). The apply thread feeds it each store write's comparisons and commits the
//! records that changed as a batch of their own right after.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::alarms::{AlarmRecord, Movement};
use crate::model::{Offset, OffsetKey};

#[derive(Debug, Clone)]
struct Tracked {
    record: AlarmRecord,
    /// What the store was last given for this connector (stalled, backwards count, when):
    /// `None` before the first record.
    recorded: Option<(bool, u64, u64)>,
    committed_now: bool,
}

pub(super) struct Activity {
    writer: String,
    stall_after: Duration,
    opened_ms: u64,
    connectors: BTreeMap<String, Tracked>,
}

impl Activity {
    /// Tracking from `opened_ms` on, continuing the backwards counts of `earlier` (this writer's
    /// records in the store).
    pub(super) fn new(
        writer: &str,
        stall_after: Duration,
        opened_ms: u64,
        earlier: Vec<AlarmRecord>,
    ) -> Activity {
        let mut connectors = BTreeMap::new();
        for mut r in earlier.into_iter().filter(|r| r.writer == writer) {
            // Nothing committed in this lifetime yet: not stalled until it commits again.
            r.last_moved_ms = opened_ms;
            r.stall_after_ms = stall_after.as_millis() as u64;
            let recorded = Some((false, r.backwards, opened_ms));
            connectors.insert(
                r.connector.clone(),
                Tracked {
                    record: r,
                    recorded,
                    committed_now: false,
                },
            );
        }
        Activity {
            writer: writer.to_string(),
            stall_after,
            opened_ms,
            connectors,
        }
    }

    /// One committed entry of `connector`, compared with what the store held.
    pub(super) fn observe(&mut self, connector: &str, movement: Movement, now_ms: u64) {
        let opened_ms = self.opened_ms;
        let t = self
            .connectors
            .entry(connector.to_string())
            .or_insert_with(|| Tracked {
                record: AlarmRecord {
                    connector: connector.to_string(),
                    writer: self.writer.clone(),
                    stall_after_ms: self.stall_after.as_millis() as u64,
                    last_commit_ms: now_ms,
                    last_moved_ms: opened_ms,
                    backwards: 0,
                    last_backwards_ms: None,
                },
                recorded: None,
                committed_now: false,
            });
        t.record.last_commit_ms = now_ms;
        t.committed_now = true;
        match movement {
            Movement::Unchanged => {}
            Movement::Moved => t.record.last_moved_ms = now_ms,
            Movement::Backwards => {
                t.record.last_moved_ms = now_ms;
                t.record.backwards += 1;
                t.record.last_backwards_ms = Some(now_ms);
            }
        }
    }

    /// The records to commit now: a connector seen for the first time, one whose stall flag or
    /// backwards count changed, and one whose record is half a `stall_after` old (so that what
    /// a reader of the store judges from it is at most that much behind).
    pub(super) fn due(&mut self, now_ms: u64) -> Vec<(OffsetKey, Option<Offset>)> {
        let refresh = self.stall_after.as_millis() as u64 / 2;
        let mut out = Vec::new();
        for t in self.connectors.values_mut() {
            if !std::mem::take(&mut t.committed_now) {
                continue;
            }
            let stalled = t.record.stalled(now_ms);
            let changed = t
                .recorded
                .is_none_or(|(s, b, _)| (s, b) != (stalled, t.record.backwards));
            let stale = t
                .recorded
                .is_some_and(|(_, _, at)| now_ms.saturating_sub(at) >= refresh);
            if changed || stale {
                t.recorded = Some((stalled, t.record.backwards, now_ms));
                out.push((
                    AlarmRecord::key(&t.record.connector, &t.record.writer),
                    Some(t.record.to_offset()),
                ));
            }
        }
        out
    }

    /// Every tracked connector's record (for the metrics).
    pub(super) fn records(&self) -> Vec<AlarmRecord> {
        self.connectors.values().map(|t| t.record.clone()).collect()
    }
}
