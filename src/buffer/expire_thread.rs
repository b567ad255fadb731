//! The expire thread (`expire_after` set): every `expire_interval` it finds the partitions the
//! store last wrote more than `expire_after` ago and resets them through the buffer's own path, as
//! pending resets that the next batch carries (logged, sequenced, applied atomically like any
//! commit).
//!
//! It never resets a partition over a newer offset. Under the state lock, which every seal and
//! every apply's bookkeeping takes, and once no sealed batch is still being logged, a candidate is
//! dropped when a logged batch not yet applied holds it, or when the store (read again there) has
//! written it since; the reset then goes in only where nothing is pending for the key, and an
//! offer that comes later replaces it. The crate's reserved namespaces are never expired: the
//! markers of [`crate::once`] keep overrides from applying again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::state::{Shared, lock};
use super::{Durability, commit_on};
use crate::Result;
use crate::model::OffsetKey;
use crate::store::OffsetStore;

pub(super) struct ExpireThread {
    pub(super) shared: Arc<Shared>,
    pub(super) store: Arc<dyn OffsetStore>,
    pub(super) after: Duration,
    pub(super) interval: Duration,
}

impl ExpireThread {
    pub(super) fn run(self) {
        let mut next = Instant::now() + self.interval;
        loop {
            {
                let mut st = lock(&self.shared);
                loop {
                    if st.closing || st.closed || st.poisoned.is_some() {
                        return;
                    }
                    let now = Instant::now();
                    if now >= next {
                        break;
                    }
                    st = self
                        .shared
                        .changed
                        .wait_timeout(st, next - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
            }
            if let Err(e) = self.round() {
                tracing::warn!(writer = %self.shared.writer, error = %e, "expiring stale partitions failed; trying again at the next interval");
            }
            lock(&self.shared).stats.expire_rounds += 1;
            next = Instant::now() + self.interval;
        }
    }

    /// One look for stale partitions, and their reset.
    fn round(&self) -> Result<()> {
        let cutoff = crate::time::now_ms().saturating_sub(self.after.as_millis() as u64);
        let mut queued: Vec<(String, u64)> = Vec::new();
        for ns in self.store.namespaces()? {
            if crate::namespaces::is_reserved_namespace(&ns) {
                continue;
            }
            let keys: Vec<OffsetKey> = self
                .store
                .partitions(&ns)?
                .into_iter()
                .map(|(k, _)| k)
                .collect();
            let times = self.store.change_times(&keys)?;
            let stale: Vec<OffsetKey> = keys
                .into_iter()
                .zip(times)
                .filter_map(|(k, t)| t.is_some_and(|t| t <= cutoff).then_some(k))
                .collect();
            if stale.is_empty() {
                continue;
            }
            let n = self.queue_resets(stale, cutoff)?;
            if n > 0 {
                queued.push((ns, n));
            }
        }
        if queued.is_empty() {
            return Ok(());
        }
        let seq = commit_on(&self.shared, Durability::Store).wait()?;
        let total: u64 = queued.iter().map(|(_, n)| n).sum();
        for (ns, n) in &queued {
            crate::metrics::expired(ns, *n);
            tracing::info!(writer = %self.shared.writer, connector = %ns, partitions = n, seq, "reset stale partitions");
        }
        lock(&self.shared).stats.expired += total;
        Ok(())
    }

    /// Queues a reset of each of `stale` that is still stale with nothing newer in the buffer
    /// (see the module docs). Returns how many were queued.
    fn queue_resets(&self, stale: Vec<OffsetKey>, cutoff: u64) -> Result<u64> {
        let mut st = lock(&self.shared);
        // A batch sealed but not yet logged is neither pending nor in flight: wait until it is.
        while st.durable + 1 < st.open_epoch {
            if st.closing || st.closed || st.poisoned.is_some() {
                return Ok(0);
            }
            st = self
                .shared
                .changed
                .wait_timeout(st, Duration::from_secs(1))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        let candidates: Vec<OffsetKey> = stale
            .into_iter()
            .filter(|k| !st.in_flight.iter().any(|b| b.entries.contains_key(k)))
            .collect();
        // Read again under the lock: a batch applied since the first read is out of `in_flight`
        // now, and its write time is in the store.
        let times = self.store.change_times(&candidates)?;
        let mut n = 0;
        for (k, t) in candidates.into_iter().zip(times) {
            if t.is_some_and(|t| t <= cutoff) && self.shared.pending.insert_if_absent(k, None) {
                n += 1;
            }
        }
        drop(st);
        Ok(n)
    }
}
