//! The apply thread: offers the store each batch the log thread is about to log when it has nothing
//! else to do, so that the store's preparation overlaps the log's sync; takes the batches the log
//! thread logged, in log order, writes the ones queued behind each other to the store in one write
//! (within [`COALESCE_ENTRIES`] distinct keys, or the first batch's size; a batch whose write the
//! log thread built is written with it when nothing is queued behind it to merge), retries a store
//! that fails until it takes the batch, acks `Store` tickets, hands the applied maps to the log
//! thread to empty and reuse, and when a logged batch closed a segment, releases or compacts the
//! log through it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use super::activity::Activity;
use super::compactor::Compactor;
use super::hook;
use super::release::release_or_compact;
use super::state::{Shared, lock};
use crate::alarms::{Movement, compare};
use crate::crash::{CrashHook, CrashPoint};
use crate::model::{Batch, Entries, Offset, OffsetKey};
use crate::store::{Encoded, OffsetStore, hooks};
use crate::wal::{ClosedSegment, WalDir};
use crate::{Error, Result};

/// What the log thread sends the apply thread, in log order.
pub(super) enum Job {
    /// A logged batch to apply; `closes` is the segment its append closed, if it did; `encoded`,
    /// the store's write of it, when the log thread built it ([`encode_logged`](crate::store::CommitHooks::encode_logged)).
    Apply {
        batch: Arc<Batch>,
        epoch: u64,
        closes: Option<ClosedSegment>,
        encoded: Option<Encoded>,
    },
    /// An epoch with nothing to apply (empty, or its write failed): decided once the batches
    /// before it are applied.
    Mark { epoch: u64 },
    /// A batch just sealed, before its log write: the store may prepare it
    /// ([`CommitHooks::prepare`](crate::store::CommitHooks::prepare)) if nothing else is queued.
    Prepare(Arc<Batch>),
}

pub(super) struct ApplyThread {
    shared: Arc<Shared>,
    store: Arc<dyn OffsetStore>,
    wal: Arc<WalDir>,
    hook: Option<Arc<dyn CrashHook>>,
}

/// The apply thread writes the logged batches queued behind the one it takes in the same store
/// write while the write's distinct keys stay within the larger of this and that first batch's
/// size: a store with a high cost per write (a Kafka transaction) keeps up with many small commits,
/// and a store that fell behind the log writes commits of the same keys (a source's partitions,
/// committed again) once, with their newest values, instead of once per commit.
const COALESCE_ENTRIES: usize = 10_000;

/// Entries of the batches one write coalesces, at most (each is a hash lookup, and the group's
/// tickets wait for its write).
const COALESCE_SCAN: usize = 8 * COALESCE_ENTRIES;

impl ApplyThread {
    pub(super) fn new(
        shared: Arc<Shared>,
        store: Arc<dyn OffsetStore>,
        wal: Arc<WalDir>,
        hook: Option<Arc<dyn CrashHook>>,
    ) -> Self {
        ApplyThread {
            shared,
            store,
            wal,
            hook,
        }
    }

    pub(super) fn run(self, rx: Receiver<Job>) {
        let mut next: Option<Job> = None;
        // Dropped (the snapshot being written finished) when the thread ends.
        let mut compactor: Option<Compactor> = None;
        loop {
            let job = match next.take() {
                Some(job) => job,
                None => match rx.recv() {
                    Ok(job) => job,
                    Err(_) => return,
                },
            };
            match job {
                Job::Prepare(batch) => {
                    // Only while idle: a queued job means the store lags, and a batch behind it
                    // may be merged with others before it is applied.
                    match rx.try_recv() {
                        Ok(job) => next = Some(job),
                        Err(_) => {
                            if !hooks(&*self.store).prepare(&batch) {
                                self.shared.prepares.store(false, Ordering::Relaxed);
                            }
                        }
                    }
                }
                Job::Mark { epoch } => {
                    lock(&self.shared).applied = epoch;
                    self.shared.notify();
                }
                Job::Apply {
                    batch,
                    epoch,
                    closes,
                    mut encoded,
                } => {
                    // Batches logged meanwhile, in log order; a Mark ends the group (it must be
                    // seen after the batches before it), and so does a batch encoded ahead. A
                    // group that grows past its first batch is written from the merged entries:
                    // writing each key once beats the first batch's ready-made write.
                    let mut group = vec![batch];
                    let mut epoch = epoch;
                    let mut closes = closes;
                    let cap = COALESCE_ENTRIES.max(group[0].entries.len());
                    let mut scanned = group[0].entries.len();
                    // The group's distinct keys, once a second batch is considered.
                    let mut keys: Option<KeySet> = None;
                    while scanned < COALESCE_SCAN {
                        let job = match rx.try_recv() {
                            Ok(Job::Prepare(_)) => continue,
                            Ok(job) => job,
                            Err(_) => break,
                        };
                        let Job::Apply {
                            batch,
                            epoch: e,
                            closes: c,
                            encoded: None,
                        } = job
                        else {
                            next = Some(job);
                            break;
                        };
                        let held =
                            keys.get_or_insert_with(|| group[0].entries.keys().cloned().collect());
                        let new = batch.entries.keys().filter(|k| !held.contains(*k)).count();
                        if held.len() + new > cap || scanned + batch.entries.len() > COALESCE_SCAN {
                            next = Some(Job::Apply {
                                batch,
                                epoch: e,
                                closes: c,
                                encoded: None,
                            });
                            break;
                        }
                        if new > 0 {
                            held.extend(batch.entries.keys().cloned());
                        }
                        scanned += batch.entries.len();
                        group.push(batch);
                        encoded = None;
                        epoch = e;
                        // The newest closed segment: releasing through it releases the older.
                        closes = c.or(closes);
                    }
                    drop(keys);
                    let merged = merge(&group);
                    if !self.apply(&merged, encoded.take(), &group, epoch) {
                        return;
                    }
                    let release = closes.map(|seg| (seg, merged.seq));
                    drop(merged);
                    // Give the maps to the log thread, which empties them for its next seals;
                    // those beyond two are freed here, outside the lock.
                    let mut extra = Vec::new();
                    let handed = {
                        let mut st = lock(&self.shared);
                        let before = st.used.len();
                        for done in group.into_iter().filter_map(|b| Arc::try_unwrap(b).ok()) {
                            if st.spare.len() + st.used.len() < 2 {
                                st.used.push(done.entries);
                            } else {
                                extra.push(done);
                            }
                        }
                        st.used.len() > before
                    };
                    drop(extra);
                    if handed {
                        self.shared.changed.notify_all();
                    }
                    if let Some((seg, seq)) = release
                        && let Err(e) = self.release(&mut compactor, seq, seg.generation)
                    {
                        if e.is_fatal() {
                            self.stop(e);
                            return;
                        }
                        // Release is retried at the next segment; nothing is lost by waiting.
                        tracing::warn!(error = %e, "could not release log segments yet");
                    }
                    if compactor.as_ref().is_some_and(Compactor::failed) {
                        return;
                    }
                }
            }
        }
    }

    fn stop(&self, e: Error) {
        self.shared.poison(e);
    }

    /// Frees the log through closed segment `through_gen`, whose batches through `seq` the store
    /// holds: a durable store's segments go once it is persisted, a volatile store's state goes to
    /// the compactor (started at the first) unless it is still writing the last one.
    fn release(&self, compactor: &mut Option<Compactor>, seq: u64, through_gen: u64) -> Result<()> {
        if self.store.capabilities().durable {
            return release_or_compact(&*self.store, &self.wal, &self.shared.writer, seq, None);
        }
        if compactor.as_ref().is_some_and(Compactor::busy) {
            return Ok(());
        }
        let state = hooks(&*self.store).frozen()?;
        let compactor = match compactor {
            Some(c) => c,
            None => compactor.insert(Compactor::spawn(
                Arc::clone(&self.shared),
                Arc::clone(&self.wal),
            )?),
        };
        compactor.compact(state, seq, through_gen);
        Ok(())
    }

    /// Applies `batch` (one logged batch with the store's write of it if `encoded`, or the `group`
    /// of them merged), retrying until the store takes it. False when the thread must stop.
    fn apply(
        &self,
        batch: &Arc<Batch>,
        mut encoded: Option<Encoded>,
        group: &[Arc<Batch>],
        epoch: u64,
    ) -> bool {
        let before = self.stored_before(batch);
        let mut backoff = Duration::from_millis(50);
        loop {
            // A retry writes the batch again from its entries.
            let hooks = hooks(&*self.store);
            let result = match encoded.take() {
                Some(encoded) => hooks.apply_encoded(batch, encoded),
                None => hooks.apply_logged(batch),
            };
            match result {
                Ok(()) => break,
                Err(e) if e.is_fatal() => {
                    self.stop(e);
                    return false;
                }
                Err(e) => {
                    tracing::warn!(writer = %self.shared.writer, seq = batch.seq, error = %e, "store apply failed; retrying");
                    let mut st = lock(&self.shared);
                    st.last_store_error = Some(Arc::new(e));
                    st.stats.failures += 1;
                    crate::metrics::commit_failed(&self.shared.writer, "store");
                    if st.closing {
                        return false;
                    }
                    let _ = self.shared.changed.wait_timeout(st, backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
        if let Err(e) = hook(&self.hook, CrashPoint::AfterApplyBeforeRelease) {
            self.stop(e);
            return false;
        }
        let mut st = lock(&self.shared);
        if let (Some(before), Some(activity)) = (before, st.activity.as_mut()) {
            observe(activity, batch, before);
            let due = activity.due(crate::time::now_ms());
            if !due.is_empty() {
                for (k, v) in due {
                    self.shared.pending.insert(k, v);
                }
                // Their own commit, at once (nobody waits on it): lag reads them from the store.
                st.requested = st.requested.max(st.open_epoch);
            }
        }
        st.applied = epoch;
        st.stats.applied_seq = batch.seq;
        st.last_store_error = None;
        st.stats.store_writes += 1;
        for logged in group {
            if let Some(pos) = st.in_flight.iter().position(|b| Arc::ptr_eq(b, logged)) {
                st.in_flight.remove(pos);
                st.in_flight_entries -= logged.entries.len();
            }
        }
        // Forget decided epochs that no ticket can still be waiting on without having seen them.
        // (A ticket waiting on a pruned epoch gets the seq of an earlier one: a lower bound.)
        if st.epoch_seq.len() > 4096 {
            let keep_from = epoch.saturating_sub(2048);
            st.epoch_seq = st.epoch_seq.split_off(&keep_from);
        }
        drop(st);
        self.shared.notify();
        true
    }

    /// With the alarms on: what the store holds for `batch`'s connector keys before it is written
    /// (`None` when they are off, or when the read fails: that batch is then not judged).
    fn stored_before(&self, batch: &Batch) -> Option<Vec<Option<Offset>>> {
        let on = lock(&self.shared).activity.is_some();
        if !on {
            return None;
        }
        let keys: Vec<OffsetKey> = watched(batch).map(|(k, _)| k.clone()).collect();
        match self.store.get_many(&keys) {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::warn!(writer = %self.shared.writer, seq = batch.seq, error = %e, "could not read the offsets a batch replaces; its moves are not judged");
                None
            }
        }
    }
}

/// Distinct keys of a group being coalesced.
type KeySet = std::collections::HashSet<OffsetKey, crate::model::BuildKeyHasher>;

/// One batch as it is; several as one with the last seq, each key's newest value taken (from the
/// newest batch back, so each key is copied once): the store goes from the state before the first
/// to the state after the last in one atomic write, which is a prefix of the log either way.
fn merge(group: &[Arc<Batch>]) -> Arc<Batch> {
    let last = group.last().expect("a group");
    if group.len() == 1 {
        return Arc::clone(last);
    }
    let mut all = Entries::default();
    all.reserve(last.entries.len().max(group[0].entries.len()));
    for b in group.iter().rev() {
        for (k, v) in &b.entries {
            if let indexmap::map::Entry::Vacant(e) = all.entry(k.clone()) {
                e.insert(v.clone());
            }
        }
    }
    Arc::new(Batch {
        writer: last.writer.clone(),
        seq: last.seq,
        entries: all,
    })
}

/// The entries the alarms judge: every connector's, not the crate's own records.
fn watched(batch: &Batch) -> impl Iterator<Item = (&OffsetKey, &Option<Offset>)> {
    batch
        .entries
        .iter()
        .filter(|(k, _)| !crate::namespaces::is_reserved_namespace(k.namespace()))
}

/// Feeds `activity` each connector entry of `batch` against what the store held. A batch that
/// applies an override once is a deliberate rewind: it moves, never backwards.
fn observe(activity: &mut Activity, batch: &Batch, before: Vec<Option<Offset>>) {
    let rewind = batch
        .entries
        .keys()
        .any(|k| k.namespace() == crate::once::ONCE_NAMESPACE);
    let now = crate::time::now_ms();
    for ((k, new), old) in watched(batch).zip(before) {
        let mut m = compare(old.as_ref(), new.as_ref());
        if rewind && m == Movement::Backwards {
            m = Movement::Moved;
        }
        activity.observe(k.namespace(), m, now);
    }
}
