//! The write-ahead commit buffer shared by every backend.
//!
//! ```text
//! task ── offer(key, offset) ──► its thread's lane     (last write wins per key; its lane's lock, no I/O)
//!                                   │  commit() | every flush interval | when max_pending is reached
//!                                   ▼
//!            log thread:  seal (drain lanes) → encode once → one write + one sync → ack Local tickets
//!                                   │  bounded queue (the next batch is sealed and logged meanwhile)
//!                                   ▼
//!            apply thread: store.apply(batch) → ack Store tickets → release or compact log segments
//! ```
//!
//! Every `commit()` that arrives while the log thread is writing and syncing joins the next batch, so
//! one sync serves every committer waiting at that moment (group commit).
//!
//! Failures: a batch the log could not write is merged back under newer pending values (newer values
//! win) and its tickets get the error; the next commit or interval retries it. A batch the log did
//! write is never merged back: it is durable, and the apply thread retries it in order until the store
//! takes it (merging it back would only write it twice). A failed sync poisons the buffer: the kernel
//! may have dropped the data, so only a reopen (recovery) can tell what the log holds.
//!
//! The files follow the data path: this one takes offers and commits; `log_thread` seals, encodes,
//! appends and syncs; `apply_thread` writes logged batches to the store; `release` frees the log of
//! what the store holds. Beside it: `config` (what the buffer is opened with), `recovery` (what
//! `open` replays first), `state` (what the threads share), `ticket` (what a committer waits on)
//! and `expire_thread` (stale partitions reset on an interval, when `expire_after` is set).

mod activity;
mod apply_thread;
mod compactor;
mod config;
mod expire_thread;
mod log_thread;
mod pending;
mod policy;
mod recovery;
pub(crate) mod register;
mod release;
mod state;
mod ticket;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

pub use config::CommitBufferConfig;
#[cfg(feature = "testkit")]
pub use config::SealObserver;
pub use state::BufferStats;
pub use ticket::CommitTicket;

/// What recovery does with corrupt log bytes ([`CommitBufferConfig::recovery`]).
#[doc(hidden)]
pub use crate::wal::RecoveryPolicy;

use apply_thread::ApplyThread;
use expire_thread::ExpireThread;
use log_thread::LogThread;
use recovery::Recovery;
use release::release_or_compact;
use state::{Shared, State, lock};

use crate::crash::{CrashHook, CrashPoint};
use crate::metrics::{BufferSample, Sampled};
use crate::model::{Batch, BuildKeyHasher};
use crate::once::OnceOverride;
use crate::store::{OffsetStore, hooks};
use crate::{Error, Offset, OffsetKey, Result};

/// When a commit counts as done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// After the write-ahead log is synced: survives a crash, recovery applies it. The default.
    #[default]
    Local,
    /// After the store applied it (visible to other readers of the store, such as Kafka Connect).
    Store,
}

/// What `offer` does when `max_pending` distinct keys are already pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WhenFull {
    /// Start a commit and wait for room. The default.
    #[default]
    Block,
    /// Return [`Error::Full`] at once.
    Reject,
}

/// The write-ahead commit buffer (see the module docs). Share it between tasks with an `Arc`.
pub struct CommitBuffer {
    shared: Arc<Shared>,
    store: Arc<dyn OffsetStore>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Whether it records its log in the store ([`register`]).
    registers: bool,
}

impl std::fmt::Debug for CommitBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommitBuffer")
            .field("writer", &self.shared.writer)
            .field("store", &self.store)
            .finish()
    }
}

/// What [`metrics::watch`](crate::metrics::watch) samples: pending count and age, seqs, log bytes
/// and per-connector ages.
impl Sampled for CommitBuffer {
    fn sample(&self) -> BufferSample {
        self.shared.sample()
    }
}

/// Calls the crash hook, if any, at `point` (an error stops what the caller was doing there).
fn hook(h: &Option<Arc<dyn CrashHook>>, point: CrashPoint) -> Result<()> {
    match h {
        Some(h) => h.at(point),
        None => Ok(()),
    }
}

impl CommitBuffer {
    /// Opens the log in `config.wal_dir`, replays into `store` every batch it holds that the store
    /// has not applied, and starts the log and apply threads.
    pub fn open(store: Arc<dyn OffsetStore>, config: CommitBufferConfig) -> Result<CommitBuffer> {
        config.check_once()?;
        if config.expire_after.is_some() {
            crate::expire::check_store(&*store)?;
        }
        let Recovery {
            wal,
            log,
            applied,
            last_seq,
            replayed,
        } = recovery::recover(&*store, &config)?;
        let writer = &config.writer;
        let registers = registers(&*store, &config);
        if registers {
            note_registration(register::record(&*store, writer, &config.wal_dir, false));
        }
        let activity = match config.stall_after {
            Some(after) => Some(activity::Activity::new(
                writer,
                after,
                crate::time::now_ms(),
                crate::alarms::read(&*store)?,
            )),
            None => None,
        };
        let shared = Arc::new(Shared {
            writer: writer.clone(),
            state: Mutex::new(State {
                open_epoch: 1,
                stats: BufferStats {
                    logged_seq: last_seq,
                    applied_seq: applied,
                    replayed_batches: replayed,
                    ..Default::default()
                },
                activity,
                ..State::default()
            }),
            changed: Condvar::new(),
            wakers: Mutex::new(Vec::new()),
            durability: config.durability,
            timeout: config.flush_timeout,
            max_pending: config.max_pending.max(1),
            when_full: config.when_full,
            active_bytes: AtomicU64::new(0),
            pending: pending::Pending::default(),
            stopping: AtomicBool::new(false),
            prepares: AtomicBool::new(true),
            encodes: AtomicBool::new(true),
            wal: Arc::clone(&wal),
        });
        lock(&shared).epoch_seq.insert(0, last_seq);
        crate::metrics::opened(Arc::downgrade(&shared) as std::sync::Weak<dyn Sampled>);
        let (tx, rx) = sync_channel(config.max_in_flight.max(1));
        let log_thread = LogThread::new(
            Arc::clone(&shared),
            log,
            tx,
            last_seq,
            &config,
            Arc::clone(&store),
        );
        let apply_thread = ApplyThread::new(
            Arc::clone(&shared),
            Arc::clone(&store),
            Arc::clone(&wal),
            config.crash_hook.clone(),
        );
        let (log_shared, apply_shared) = (Arc::clone(&shared), Arc::clone(&shared));
        let mut threads = vec![
            std::thread::Builder::new()
                .name(format!("offsets-log-{writer}"))
                .spawn(move || poison_on_panic(&log_shared, "log", || log_thread.run()))
                .map_err(|e| Error::io("spawn log thread", &config.wal_dir, e))?,
            std::thread::Builder::new()
                .name(format!("offsets-apply-{writer}"))
                .spawn(move || poison_on_panic(&apply_shared, "apply", || apply_thread.run(rx)))
                .map_err(|e| Error::io("spawn apply thread", &config.wal_dir, e))?,
        ];
        if let Some(after) = config.expire_after {
            let expire = ExpireThread {
                shared: Arc::clone(&shared),
                store: Arc::clone(&store),
                after,
                interval: config.expire_interval,
            };
            let expire_shared = Arc::clone(&shared);
            threads.push(
                std::thread::Builder::new()
                    .name(format!("offsets-expire-{writer}"))
                    .spawn(move || poison_on_panic(&expire_shared, "expire", || expire.run()))
                    .map_err(|e| Error::io("spawn expire thread", &config.wal_dir, e))?,
            );
        }
        let buffer = CommitBuffer {
            shared,
            store,
            threads: Mutex::new(threads),
            registers,
        };
        if let Some(once) = &config.once {
            buffer.apply_once(once)?;
        }
        Ok(buffer)
    }

    /// Applies `once` unless the store (recovered by now) holds its marker: its entries and the
    /// marker become the first batch of this lifetime, logged and applied like any other, so a
    /// crash anywhere leaves either nothing of it or a logged batch the next recovery replays
    /// (after which the marker is there). No offer can come in before `open` returns.
    fn apply_once(&self, once: &OnceOverride) -> Result<()> {
        let id = once.id();
        if once.is_applied(&*self.store)? {
            tracing::info!(writer = %self.shared.writer, id, "override already applied; nothing to do");
            return Ok(());
        }
        // Straight into the pending map: the offer path could seal a large override in pieces.
        let entries = once.batch_entries(&self.shared.writer);
        let hooks = hooks(&*self.store);
        for (k, v) in &entries {
            hooks
                .admit(&self.shared.writer, k, v.as_ref())
                .map_err(|e| e.context(format!("override `{id}`")))?;
        }
        for (k, v) in entries {
            self.shared.pending.insert(k, v);
        }
        let seq = self
            .commit_with(Durability::Store)
            .wait()
            .map_err(|e| e.context(format!("applying override `{id}` at open")))?;
        tracing::info!(writer = %self.shared.writer, id, seq, entries = once.entries().len(), "applied override");
        Ok(())
    }

    /// Records `offset` as the newest position of `key`. Cheap: a map insert under a lock.
    pub fn offer(&self, key: OffsetKey, offset: Offset) -> Result<()> {
        self.put(key, Some(offset))
    }

    /// Records that `key`'s offset is to be reset (removed) by the next commit.
    pub fn offer_reset(&self, key: OffsetKey) -> Result<()> {
        self.put(key, None)
    }

    /// Whether the store could ever write `offset` under `key` (an offer asks the same first):
    /// a caller offering several entries as a whole checks them all before offering any.
    pub fn admit(&self, key: &OffsetKey, offset: Option<&Offset>) -> Result<()> {
        self.admit_as(&self.shared.writer, key, offset)
    }

    /// The store's [`CommitHooks::admit`](crate::store::CommitHooks::admit), asked at each offer:
    /// one call more than a store without hooks needs, none allocating.
    fn admit_as(&self, writer: &str, key: &OffsetKey, offset: Option<&Offset>) -> Result<()> {
        match self.store.hooks() {
            Some(hooks) => hooks.admit(writer, key, offset),
            // The default admits everything.
            None => Ok(()),
        }
    }

    fn put(&self, key: OffsetKey, offset: Option<Offset>) -> Result<()> {
        let shared = &*self.shared;
        // What the store could never write is refused now, not logged and retried forever.
        self.admit_as(&shared.writer, &key, offset.as_ref())?;
        let pending = &shared.pending;
        // The common case takes only this thread's lane lock: no state lock, no wait.
        if shared.stopping.load(Ordering::Acquire)
            || (pending.len() >= shared.max_pending && !pending.contains(&key))
        {
            self.wait_for_room(&key)?;
        }
        if crate::metrics::connector_age_tracked() {
            lock(shared).ages.offered(key.namespace());
        }
        pending.insert(key, offset);
        Ok(())
    }

    /// The slow path of an offer: the buffer is stopping (say why), or `max_pending` keys are
    /// pending (refuse, or start a commit and wait for the seal).
    fn wait_for_room(&self, key: &OffsetKey) -> Result<()> {
        let shared = &*self.shared;
        let pending = &shared.pending;
        let mut st = lock(shared);
        loop {
            if st.closed || st.closing {
                return Err(Error::Closed("commit buffer"));
            }
            if let Some(p) = &st.poisoned {
                return Err(Error::CommitFailed(Arc::clone(p)));
            }
            // Checked under the state lock: a seal (which holds it) cannot slip between this check
            // and the wait below.
            if pending.len() < shared.max_pending || pending.contains(key) {
                return Ok(());
            }
            match shared.when_full {
                WhenFull::Reject => {
                    return Err(Error::Full(format!(
                        "commit buffer `{}` holds {} pending offsets (max_pending); commit first or raise offsets.max.pending",
                        shared.writer,
                        pending.len()
                    )));
                }
                WhenFull::Block => {
                    st.requested = st.requested.max(st.open_epoch);
                    shared.changed.notify_all();
                    st = shared.changed.wait(st).unwrap_or_else(|p| p.into_inner());
                }
            }
        }
    }

    /// Seals everything offered so far into a batch and returns a ticket for it, resolving at the
    /// buffer's configured durability.
    pub fn commit(&self) -> CommitTicket {
        self.commit_with(self.shared.durability)
    }

    /// Like [`commit`](Self::commit) with a chosen durability.
    pub fn commit_with(&self, durability: Durability) -> CommitTicket {
        commit_on(&self.shared, durability)
    }

    /// The committed offset of `key`: from a batch logged but not yet applied, else from the store.
    pub fn get(&self, key: &OffsetKey) -> Result<Option<Offset>> {
        {
            let st = lock(&self.shared);
            for b in st.in_flight.iter().rev() {
                if let Some(v) = b.entries.get(key) {
                    return Ok(v.clone());
                }
            }
        }
        self.store.get(key)
    }

    /// The committed partitions of connector `namespace` and their offsets: the store's, with the
    /// batches logged but not yet applied over them.
    pub fn partitions(&self, namespace: &str) -> Result<Vec<(OffsetKey, Offset)>> {
        // A batch applied (and so gone from `in_flight`) while the store is read might be in
        // neither: read again until no batch was applied meanwhile.
        let (stored, in_flight) = loop {
            let before = lock(&self.shared).stats.applied_seq;
            let stored = self.store.partitions(namespace)?;
            let st = lock(&self.shared);
            if st.stats.applied_seq == before {
                break (
                    stored,
                    st.in_flight.iter().cloned().collect::<Vec<Arc<Batch>>>(),
                );
            }
        };
        let mut merged: indexmap::IndexMap<OffsetKey, Offset, BuildKeyHasher> =
            stored.into_iter().collect();
        for batch in &in_flight {
            for (key, offset) in batch.entries.iter() {
                if key.namespace() != namespace {
                    continue;
                }
                match offset {
                    Some(o) => {
                        merged.insert(key.clone(), o.clone());
                    }
                    None => {
                        merged.shift_remove(key);
                    }
                }
            }
        }
        Ok(merged.into_iter().collect())
    }

    /// The store underneath.
    pub fn store(&self) -> &Arc<dyn OffsetStore> {
        &self.store
    }

    /// The writer identity.
    pub fn writer(&self) -> &str {
        &self.shared.writer
    }

    /// Counters and gauges.
    pub fn stats(&self) -> BufferStats {
        let st = lock(&self.shared);
        let mut s = st.stats.clone();
        s.pending = self.shared.pending.len();
        s.oldest_pending_age = self.shared.pending.oldest().map(|t| t.elapsed());
        s.wal_bytes = self.shared.wal_bytes();
        s
    }

    /// Commits what is pending (waiting for the store), stops the threads and releases the log
    /// segments the store holds durably. Offers after this fail with [`Error::Closed`].
    pub fn close(&self) -> Result<()> {
        let result = if lock(&self.shared).poisoned.is_none() {
            self.commit_with(Durability::Store).wait().map(|_| ())
        } else {
            Ok(())
        };
        self.stop();
        let released = if result.is_ok() {
            let applied = lock(&self.shared).stats.applied_seq;
            // No segment named: the log thread has stopped, so a volatile store's whole log, its
            // last segment too, folds into a snapshot (the next open replays nothing).
            release_or_compact(
                &*self.store,
                &self.shared.wal,
                &self.shared.writer,
                applied,
                None,
            )
        } else {
            Ok(())
        };
        if result.is_ok() && released.is_ok() && self.registers {
            note_registration(register::record(
                &*self.store,
                &self.shared.writer,
                self.shared.wal.dir(),
                true,
            ));
        }
        lock(&self.shared).closed = true;
        self.shared.stopping.store(true, Ordering::Release);
        self.shared.notify();
        result.and(released)
    }

    fn stop(&self) {
        {
            let mut st = lock(&self.shared);
            st.closing = true;
            self.shared.stopping.store(true, Ordering::Release);
        }
        self.shared.notify();
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|p| p.into_inner()));
        for t in threads {
            let _ = t.join();
        }
    }
}

impl Drop for CommitBuffer {
    /// Stops the threads without a final commit (call [`close`](CommitBuffer::close) for one).
    fn drop(&mut self) {
        self.stop();
        // A ticket may outlive the buffer; the log it shares is free for the next opener.
        self.shared.wal.unlock();
    }
}

/// Whether the buffer records its log in the store ([`register`]): over a store that outlives the
/// process, with its log on the real file system (a simulated log is no directory to name), and
/// not in a crash test (the record is no part of what recovery guarantees).
fn registers(store: &dyn OffsetStore, config: &CommitBufferConfig) -> bool {
    store.capabilities().durable && config.fs.is_real() && config.crash_hook.is_none()
}

/// The record informs tools; failing to write it costs a warning, not the buffer.
fn note_registration(result: Result<()>) {
    if let Err(e) = result {
        tracing::warn!("could not record this writer's log in the store: {e}");
    }
}

/// Runs a buffer thread's loop; a panic in it poisons the buffer with its message, so that
/// committers get that error at once, not a timeout after it.
fn poison_on_panic(shared: &Shared, thread: &str, run: impl FnOnce()) {
    if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".into());
        shared.poison(Error::State(format!(
            "the commit buffer's {thread} thread of writer `{}` panicked ({message}); commits acknowledged before it are in the log and come back at the next open",
            shared.writer
        )));
    }
}

/// Seals what is pending (through the log thread) and returns a ticket for it.
fn commit_on(shared: &Arc<Shared>, durability: Durability) -> CommitTicket {
    let mut st = lock(shared);
    let ticket = |e| CommitTicket::failed(shared, durability, e);
    if st.closed {
        return ticket(Error::Closed("commit buffer"));
    }
    if let Some(p) = &st.poisoned {
        return ticket(Error::CommitFailed(Arc::clone(p)));
    }
    let epoch = if shared.pending.is_empty() {
        st.open_epoch - 1
    } else {
        st.open_epoch
    };
    if epoch > st.requested {
        st.requested = epoch;
        shared.changed.notify_all();
    }
    CommitTicket::pending(shared, epoch, durability)
}
