//! What the caller's tasks, the log thread and the apply thread share: one [`State`] under one lock
//! (the pending map, the epochs committers wait on, the batches logged but not yet applied, the
//! counters) and the condition variable and wakers that tell waiters it changed.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::Waker;
use std::time::{Duration, Instant};

use super::activity::Activity;
use super::pending::Pending;
use super::{Durability, WhenFull};
use crate::Error;
use crate::metrics::{BufferSample, Sampled};
use crate::model::{Batch, Entries};
use crate::wal::WalDir;

/// Counters and gauges of a buffer (also exported as metrics).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BufferStats {
    /// Distinct keys offered and not yet sealed.
    pub pending: usize,
    /// Age of the oldest offer not yet sealed (source-side lag).
    pub oldest_pending_age: Option<Duration>,
    /// Highest seq written and synced to the log.
    pub logged_seq: u64,
    /// Highest seq the store applied.
    pub applied_seq: u64,
    /// Batches replayed from the log when the buffer opened.
    pub replayed_batches: u64,
    /// Flushes that reached the log.
    pub commits: u64,
    /// Flushes that failed.
    pub failures: u64,
    /// Sum and maximum of flush latency (seal to sync).
    pub commit_time_total: Duration,
    /// Longest flush.
    pub commit_time_max: Duration,
    /// Syncs of the log.
    pub syncs: u64,
    /// Writes to the store (fewer than the batches applied when queued batches were written together).
    pub store_writes: u64,
    /// Bytes the log holds.
    pub wal_bytes: u64,
    /// Resets of stale partitions the buffer's automatic expiry (`expire_after`) committed; one
    /// that an offer for its partition replaced before the seal counts too.
    pub expired: u64,
    /// Rounds of the automatic expiry finished (whether they found stale partitions or not).
    pub expire_rounds: u64,
}

pub(super) struct Shared {
    pub(super) writer: String,
    pub(super) state: Mutex<State>,
    pub(super) changed: Condvar,
    pub(super) wakers: Mutex<Vec<Waker>>,
    pub(super) durability: Durability,
    pub(super) timeout: Duration,
    pub(super) max_pending: usize,
    pub(super) when_full: WhenFull,
    pub(super) active_bytes: AtomicU64,
    pub(super) wal: Arc<WalDir>,
    /// The offers not yet sealed.
    pub(super) pending: Pending,
    /// Set with `closing`, `closed` or `poisoned`: offers take the state lock to see which.
    pub(super) stopping: AtomicBool,
    /// The store prepares batches ([`prepare`](crate::store::CommitHooks::prepare)): the
    /// log thread offers each one as it seals it. Cleared by the first refusal.
    pub(super) prepares: AtomicBool,
    /// The store encodes logged batches on the log thread
    /// ([`encode_logged`](crate::store::CommitHooks::encode_logged)). Cleared by the first
    /// `None`.
    pub(super) encodes: AtomicBool,
}

#[derive(Default)]
pub(super) struct State {
    /// Emptied maps for the next seals to reuse.
    pub(super) spare: Vec<Entries>,
    /// Maps of applied batches still holding their entries, which the log thread empties into
    /// `spare`: freeing each key and offset cost the apply thread, the slowest stage of a big
    /// commit, a cache miss per key (its count last written on the offering thread's core).
    pub(super) used: Vec<Entries>,
    /// The epoch offers go into; sealing closes it and opens the next.
    pub(super) open_epoch: u64,
    /// Highest epoch a committer asked for.
    pub(super) requested: u64,
    /// Highest epoch logged (or failed) and applied (or failed).
    pub(super) durable: u64,
    pub(super) applied: u64,
    /// The batch seq each recent epoch became.
    pub(super) epoch_seq: BTreeMap<u64, u64>,
    pub(super) failed: BTreeMap<u64, Arc<Error>>,
    pub(super) last_store_error: Option<Arc<Error>>,
    pub(super) poisoned: Option<Arc<Error>>,
    pub(super) closing: bool,
    pub(super) closed: bool,
    pub(super) in_flight: VecDeque<Arc<Batch>>,
    /// Entries of the `in_flight` batches: the log thread seals no more while it is at
    /// `max_pending`, so a slow store bounds the memory they hold.
    pub(super) in_flight_entries: usize,
    pub(super) stats: BufferStats,
    pub(super) ages: ConnectorAges,
    /// The stall and gap alarms' observations, when `stall_after` is set.
    pub(super) activity: Option<Activity>,
}

/// Per connector, when its oldest uncommitted offer arrived (source-side lag), recorded while
/// [`metrics::track_connector_age`](crate::metrics::track_connector_age) is on. Offers wait in
/// `pending`; sealing moves them to `sealed`, which the log syncing the batch clears and a failed
/// write merges back. The log thread seals and logs one batch at a time, so `sealed` is that batch.
#[derive(Default)]
pub(super) struct ConnectorAges {
    pending: HashMap<String, Instant>,
    sealed: HashMap<String, Instant>,
    /// Every connector seen since open: its age reads 0 once it has nothing uncommitted.
    known: BTreeSet<String>,
}

impl ConnectorAges {
    pub(super) fn offered(&mut self, connector: &str) {
        if !self.pending.contains_key(connector) {
            self.pending.insert(connector.to_string(), Instant::now());
            if !self.known.contains(connector) {
                self.known.insert(connector.to_string());
            }
        }
    }

    pub(super) fn sealed(&mut self) {
        // Swapped, not replaced, so both maps keep their tables.
        std::mem::swap(&mut self.sealed, &mut self.pending);
        self.pending.clear();
    }

    pub(super) fn committed(&mut self) {
        self.sealed.clear();
    }

    pub(super) fn merged_back(&mut self) {
        for (c, t) in self.sealed.drain() {
            let slot = self.pending.entry(c).or_insert(t);
            *slot = (*slot).min(t);
        }
    }

    /// Every known connector with the age of its oldest uncommitted offer (0 when none).
    fn ages(&self) -> Vec<(String, Duration)> {
        self.known
            .iter()
            .map(|c| {
                let age = self
                    .pending
                    .get(c)
                    .into_iter()
                    .chain(self.sealed.get(c))
                    .min()
                    .map_or(Duration::ZERO, |t| t.elapsed());
                (c.clone(), age)
            })
            .collect()
    }
}

pub(super) fn lock(shared: &Shared) -> MutexGuard<'_, State> {
    // A panic while holding the lock leaves counters, not offsets, half-updated: go on.
    shared.state.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    /// Bytes the log holds: closed segments, the snapshot and the active segment.
    pub(super) fn wal_bytes(&self) -> u64 {
        self.wal.held_bytes() + self.active_bytes.load(Ordering::Relaxed)
    }

    /// Poisons the buffer with `e` (the first error wins): commits fail, offers are refused.
    pub(super) fn poison(&self, e: crate::Error) {
        let mut st = lock(self);
        if st.poisoned.is_none() {
            st.poisoned = Some(std::sync::Arc::new(e));
            self.stopping.store(true, Ordering::Release);
        }
        drop(st);
        self.notify();
    }

    pub(super) fn notify(&self) {
        self.changed.notify_all();
        let wakers = std::mem::take(&mut *self.wakers.lock().unwrap_or_else(|p| p.into_inner()));
        for w in wakers {
            w.wake();
        }
    }
}

/// Every open buffer reports its per-connector ages to the metrics sampler through its shared part.
impl Sampled for Shared {
    fn sample(&self) -> BufferSample {
        let st = lock(self);
        BufferSample {
            writer: self.writer.clone(),
            pending: self.pending.len(),
            oldest_pending_age: self.pending.oldest().map(|t| t.elapsed()),
            logged_seq: st.stats.logged_seq,
            applied_seq: st.stats.applied_seq,
            wal_bytes: self.wal_bytes(),
            connector_ages: st.ages.ages(),
            connector_alarms: st
                .activity
                .as_ref()
                .map(|a| {
                    let now = crate::time::now_ms();
                    a.records()
                        .into_iter()
                        .map(|r| crate::metrics::ConnectorAlarm {
                            stalled: r.stalled(now),
                            unmoved: r.unmoved_for(now),
                            backwards: r.backwards,
                            connector: r.connector,
                        })
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connector_ages_follow_seal_and_merge_back() {
        let mut ages = ConnectorAges::default();
        ages.offered("a");
        ages.offered("b");
        std::thread::sleep(Duration::from_millis(5));
        let age = |ages: &ConnectorAges, c: &str| {
            ages.ages()
                .into_iter()
                .find(|(n, _)| n == c)
                .map(|(_, a)| a)
        };
        assert!(age(&ages, "a").unwrap() >= Duration::from_millis(5));
        ages.sealed();
        // Sealed but not yet logged: still uncommitted.
        assert!(age(&ages, "a").unwrap() >= Duration::from_millis(5));
        ages.merged_back();
        assert!(age(&ages, "b").unwrap() >= Duration::from_millis(5));
        ages.sealed();
        ages.committed();
        assert_eq!(age(&ages, "a"), Some(Duration::ZERO));
    }
}
