//! The log thread: waits for a reason to seal (a commit asked for, the interval due, the pending map
//! full), seals the pending map into the next batch by swapping maps, encodes it once into a reused
//! buffer, appends and syncs it (one sync for every committer waiting at that moment), acks `Local`
//! tickets, builds the store's write of it while the apply thread writes the batch before when the
//! in-flight batches leave no room to log another (and the store builds one: RocksDB), rotates the
//! segment when it is big enough, and queues the batch for the apply thread; with nothing to seal,
//! it empties the maps the apply thread is done with for the next seals. A write that failed merges
//! the batch back under newer offers; a failed sync poisons the buffer; a failed rotation keeps the
//! active segment and tries again after the next batch.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::SyncSender;
use std::time::{Duration, Instant};

use super::apply_thread::Job;
use super::config::{CommitBufferConfig, SealObserver};
use super::hook;
use super::state::{Shared, lock};
use crate::Error;
use crate::crash::{CrashHook, CrashPoint};
use crate::model::{Batch, Entries};
use crate::store::{OffsetStore, hooks};
use crate::wal::{AppendError, WalWriter, frame};

pub(super) struct LogThread {
    shared: Arc<Shared>,
    log: WalWriter,
    tx: SyncSender<Job>,
    seq: u64,
    buf: Vec<u8>,
    hook: Option<Arc<dyn CrashHook>>,
    observer: Option<SealObserver>,
    interval: Option<Duration>,
    segment_bytes: u64,
    store: Arc<dyn OffsetStore>,
}

impl LogThread {
    /// A log thread that appends to `log` after batch `seq` and queues logged batches on `tx`.
    pub(super) fn new(
        shared: Arc<Shared>,
        log: WalWriter,
        tx: SyncSender<Job>,
        seq: u64,
        config: &CommitBufferConfig,
        store: Arc<dyn OffsetStore>,
    ) -> Self {
        LogThread {
            shared,
            log,
            tx,
            seq,
            buf: Vec::new(),
            hook: config.crash_hook.clone(),
            observer: config.observer.clone(),
            interval: config.flush_interval,
            segment_bytes: config.segment_bytes,
            store,
        }
    }

    pub(super) fn run(mut self) {
        let shared = Arc::clone(&self.shared);
        let mut next_auto = self.interval.map(|i| Instant::now() + i);
        loop {
            // Wait for a reason to seal.
            let mut st = lock(&shared);
            let (epoch, entries, oldest) = loop {
                if st.closing {
                    if st.poisoned.is_none() {
                        // Nothing appends any more: the buffer's close may fold the active
                        // segment into a snapshot of a volatile store (see `release_or_compact`).
                        drop(st);
                        self.log.stop();
                    }
                    return;
                }
                let asked = st.requested >= st.open_epoch;
                let full = shared.pending.len() >= shared.max_pending;
                let due = next_auto.is_some_and(|t| Instant::now() >= t);
                // (A stopped apply thread frees no room: seal anyway, the send fails and ends us.)
                let room = st.in_flight_entries < shared.max_pending || st.poisoned.is_some();
                if room && (asked || full || (due && !shared.pending.is_empty())) {
                    let epoch = st.open_epoch;
                    st.open_epoch += 1;
                    // Under the state lock: a commit asking for this epoch sees it sealed whole.
                    let (entries, oldest) = shared.pending.take(st.spare.pop().unwrap_or_default());
                    st.ages.sealed();
                    break (epoch, entries, oldest);
                }
                if !st.used.is_empty() {
                    // Nothing to seal: empty the applied batches' maps now (see `State::used`).
                    let used = std::mem::take(&mut st.used);
                    drop(st);
                    let emptied: Vec<Entries> = used
                        .into_iter()
                        .map(|mut m| {
                            m.clear();
                            m
                        })
                        .collect();
                    st = lock(&shared);
                    st.spare.extend(emptied);
                    continue;
                }
                if due {
                    next_auto = self.interval.map(|i| Instant::now() + i);
                }
                st = match next_auto {
                    Some(t) => {
                        shared
                            .changed
                            .wait_timeout(st, t.saturating_duration_since(Instant::now()))
                            .unwrap_or_else(|p| p.into_inner())
                            .0
                    }
                    None => shared.changed.wait(st).unwrap_or_else(|p| p.into_inner()),
                };
            };
            if entries.is_empty() {
                st.epoch_seq.insert(epoch, self.seq);
                st.durable = epoch;
                st.spare.push(entries);
                drop(st);
                shared.notify();
                if self.tx.send(Job::Mark { epoch }).is_err() {
                    return;
                }
                continue;
            }
            drop(st);
            next_auto = self.interval.map(|i| Instant::now() + i);
            if !self.flush(epoch, entries, oldest) {
                return;
            }
        }
    }

    /// Logs one sealed batch. Returns false when the thread must stop.
    fn flush(&mut self, epoch: u64, entries: Entries, oldest: Option<Instant>) -> bool {
        let shared = Arc::clone(&self.shared);
        let started = Instant::now();
        let seq = self.seq + 1;
        let batch = Arc::new(Batch {
            writer: shared.writer.clone(),
            seq,
            entries,
        });
        if let Some(observe) = &self.observer {
            observe(&batch);
        }
        if shared.prepares.load(Ordering::Relaxed) {
            // A hint: when the apply thread is busy or the queue full, the batch is not prepared.
            let _ = self.tx.try_send(Job::Prepare(Arc::clone(&batch)));
        }
        self.buf.clear();
        if let Err(e) = frame::try_encode(frame::FrameKind::Batch, &batch, &mut self.buf) {
            return self.refuse(epoch, e);
        }
        let result = self.log.append(&self.buf, seq).and_then(|()| {
            hook(&self.hook, CrashPoint::AfterSyncBeforeAck).map_err(AppendError::Poisoned)
        });
        if self.buf.capacity() > (8 << 20) {
            self.buf = Vec::new(); // Do not keep a huge buffer after one huge batch.
        }
        match result {
            Ok(()) => {
                self.seq = seq;
                let elapsed = started.elapsed();
                let wait_for_room = {
                    let mut st = lock(&shared);
                    st.durable = epoch;
                    st.epoch_seq.insert(epoch, seq);
                    st.in_flight.push_back(Arc::clone(&batch));
                    st.in_flight_entries += batch.entries.len();
                    st.stats.logged_seq = seq;
                    st.stats.commits += 1;
                    st.stats.syncs += 1;
                    st.stats.commit_time_total += elapsed;
                    st.stats.commit_time_max = st.stats.commit_time_max.max(elapsed);
                    st.ages.committed();
                    crate::metrics::commit_succeeded(
                        &shared.writer,
                        elapsed,
                        st.stats.commits,
                        st.stats.commit_time_total,
                        st.stats.commit_time_max,
                        st.stats.logged_seq,
                    );
                    // No room to log another until the one batch ahead of this one is written.
                    st.in_flight.len() == 2 && st.in_flight_entries >= shared.max_pending
                };
                shared.notify();
                if let Err(e) = hook(&self.hook, CrashPoint::AfterAckBeforeApply) {
                    self.poison(epoch, e, None);
                    return false;
                }
                // This thread would now wait for the apply thread to write the batch before this
                // one: it builds the store's write of this one meanwhile. With room it logs the
                // next batch instead, which the apply thread may merge with this one.
                let encoded = if wait_for_room && shared.encodes.load(Ordering::Relaxed) {
                    let encoded = hooks(&*self.store).encode_logged(&batch);
                    if encoded.is_none() {
                        shared.encodes.store(false, Ordering::Relaxed);
                    }
                    encoded
                } else {
                    None
                };
                let threshold = if self.store.capabilities().durable {
                    self.segment_bytes
                } else {
                    // Memory: a segment as large as the last snapshot keeps the log within about
                    // twice the live state while compaction costs at most one state write per segment.
                    self.segment_bytes.max(self.log.dir().snapshot_bytes())
                };
                let mut closes = None;
                if self.log.len() >= threshold {
                    match self.log.rotate() {
                        Ok(seg) => closes = Some(seg),
                        Err(e) if e.is_fatal() => {
                            let _ = self.tx.send(Job::Apply {
                                batch,
                                epoch,
                                closes: None,
                                encoded,
                            });
                            self.poison(epoch, e, None);
                            return false;
                        }
                        Err(e) => {
                            // The active segment is intact and synced: keep appending to it and
                            // try again after the next batch (a full disk need not stop commits).
                            tracing::warn!(writer = %shared.writer, error = %e, "could not start a new log segment; the active one grows until one can be made");
                        }
                    }
                }
                shared.active_bytes.store(self.log.len(), Ordering::Relaxed);
                let dir = self.log.dir();
                crate::metrics::wal_state(
                    &shared.writer,
                    dir.held_bytes() + self.log.len(),
                    dir.closed().len() + 1,
                );
                self.tx
                    .send(Job::Apply {
                        batch,
                        epoch,
                        closes,
                        encoded,
                    })
                    .is_ok()
            }
            Err(AppendError::NotWritten(e)) => {
                tracing::warn!(writer = %shared.writer, seq, error = %e, "log write failed; offsets merged back for the next commit");
                let batch = unshared(batch);
                let e = Arc::new(e);
                let mut st = lock(&shared);
                st.failed.insert(epoch, Arc::clone(&e));
                st.durable = epoch;
                st.stats.failures += 1;
                crate::metrics::commit_failed(&shared.writer, "log");
                shared.pending.merge_back(batch.entries, oldest);
                st.ages.merged_back();
                drop(st);
                shared.notify();
                self.tx.send(Job::Mark { epoch }).is_ok()
            }
            Err(AppendError::Poisoned(e)) => {
                self.poison(epoch, e, Some((unshared(batch).entries, oldest)));
                false
            }
        }
    }

    /// A sealed batch no frame can hold fails its commits. Its offers are dropped, not merged
    /// back: merged, they would make every later commit as large.
    fn refuse(&mut self, epoch: u64, too_large: frame::TooLarge) -> bool {
        let shared = Arc::clone(&self.shared);
        let e = Error::InvalidData(format!(
            "commit refused: {too_large}; commit more often, or in smaller groups"
        ));
        tracing::error!(writer = %shared.writer, error = %e, "a sealed batch is too large to log; its offers are dropped");
        let mut st = lock(&shared);
        st.failed.insert(epoch, Arc::new(e));
        st.durable = epoch;
        st.stats.failures += 1;
        crate::metrics::commit_failed(&shared.writer, "log");
        st.ages.committed();
        drop(st);
        shared.notify();
        self.tx.send(Job::Mark { epoch }).is_ok()
    }

    fn poison(&self, epoch: u64, e: Error, merge: Option<(Entries, Option<Instant>)>) {
        if !e.is_simulated_crash() {
            tracing::error!(writer = %self.shared.writer, error = %e, "the write-ahead log failed; reopen the buffer to recover");
        }
        let e = Arc::new(e);
        let mut st = lock(&self.shared);
        if st.durable < epoch {
            st.failed.insert(epoch, Arc::clone(&e));
            st.durable = epoch;
        }
        st.stats.failures += 1;
        crate::metrics::commit_failed(&self.shared.writer, "log");
        st.poisoned = Some(e);
        self.shared.stopping.store(true, Ordering::Release);
        if let Some((entries, oldest)) = merge {
            // Back under any newer pending value: the offers stay visible to a reopened buffer's
            // caller as they were (a poisoned buffer seals nothing more).
            self.shared.pending.merge_back(entries, oldest);
            st.ages.merged_back();
        }
        drop(st);
        self.shared.notify();
    }
}

/// The batch back from its `Arc`: a copy while the store still holds the one it was offered to
/// prepare (only on a failed write).
fn unshared(batch: Arc<Batch>) -> Batch {
    Arc::try_unwrap(batch).unwrap_or_else(|shared| (*shared).clone())
}
