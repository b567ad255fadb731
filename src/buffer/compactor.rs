//! The compactor thread: writes a volatile store's log snapshot, whose state the apply thread took
//! ([`frozen`](crate::store::CommitHooks::frozen)) when a segment closed, so that neither
//! the apply thread nor the commits waiting on it wait for the snapshot to be decoded, encoded,
//! written and synced. One snapshot is written at a time: a segment that closes meanwhile is
//! folded into the next one.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::JoinHandle;

use super::release::compact;
use super::state::Shared;
use crate::store::FrozenState;
use crate::wal::WalDir;
use crate::{Error, Result};

/// A snapshot to write: the store's state after batch `seq`, through closed segment `through_gen`.
struct Job {
    state: FrozenState,
    seq: u64,
    through_gen: u64,
}

pub(super) struct Compactor {
    tx: Option<SyncSender<Job>>,
    thread: Option<JoinHandle<()>>,
    /// A snapshot failed fatally: the buffer is poisoned, and the apply thread stops.
    failed: Arc<AtomicBool>,
    /// A snapshot is being written.
    busy: Arc<AtomicBool>,
}

impl Compactor {
    pub(super) fn spawn(shared: Arc<Shared>, wal: Arc<WalDir>) -> Result<Compactor> {
        let (tx, rx) = sync_channel::<Job>(0);
        let dir = wal.dir().to_path_buf();
        let failed = Arc::new(AtomicBool::new(false));
        let busy = Arc::new(AtomicBool::new(false));
        let (flag, working) = (Arc::clone(&failed), Arc::clone(&busy));
        let thread = std::thread::Builder::new()
            .name(format!("offsets-compact-{}", shared.writer))
            .spawn(move || {
                for job in rx {
                    let written = (job.state)().and_then(|all| {
                        compact(&wal, &shared.writer, job.seq, all, job.through_gen)
                    });
                    working.store(false, Ordering::Release);
                    match written {
                        Ok(()) => {}
                        Err(e) if e.is_fatal() => {
                            flag.store(true, Ordering::Release);
                            shared.poison(e);
                            return;
                        }
                        // The log keeps its segments until the next snapshot: nothing is lost.
                        Err(e) => tracing::warn!(error = %e, "could not compact the log yet"),
                    }
                }
            })
            .map_err(|e| Error::io("spawn compactor thread", dir, e))?;
        Ok(Compactor {
            tx: Some(tx),
            thread: Some(thread),
            failed,
            busy,
        })
    }

    /// True while a snapshot is being written: the log then keeps its closed segments until the
    /// next one (a segment closed meanwhile would only make another snapshot of about the same
    /// state, and cost as much).
    pub(super) fn busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }

    /// Hands `state` over to be written (the thread is idle: see [`busy`](Self::busy)).
    pub(super) fn compact(&self, state: FrozenState, seq: u64, through_gen: u64) {
        self.busy.store(true, Ordering::Release);
        if let Some(tx) = &self.tx {
            let _ = tx.send(Job {
                state,
                seq,
                through_gen,
            });
        }
    }

    pub(super) fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }
}

impl Drop for Compactor {
    /// Lets the snapshot being written finish.
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
