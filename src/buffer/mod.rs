//! The write-ahead commit buffer shared by every backend.
//!
//! ```text
//! task ── offer(key, offset) ──► active map            (last write wins per key; one lock, no I/O)
//!                                   │  commit() | every flush interval | when max_pending is reached
//!                                   ▼
//!            log thread:  seal (swap maps) → encode once → one write + one sync → ack Local tickets
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

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::crash::{CrashHook, CrashPoint};
use crate::dead_letter::DeadLetterFile;
use crate::metrics::{BufferSample, Sampled};
use crate::model::{Batch, Entries};
use crate::store::{OffsetStore, OffsetStoreExt};
use crate::wal::fs::{RealFs, WalFs};
use crate::wal::{AppendError, ClosedSegment, RecoveryPolicy, WalDir, WalWriter, frame};
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

/// Observes every sealed batch before it is written (tests build their reference model from it).
#[cfg(feature = "testkit")]
pub type SealObserver = Arc<dyn Fn(&Batch) + Send + Sync>;
#[cfg(not(feature = "testkit"))]
pub(crate) type SealObserver = Arc<dyn Fn(&Batch) + Send + Sync>;

/// Configuration of a [`CommitBuffer`].
#[derive(Clone)]
pub struct CommitBufferConfig {
    /// The writer identity: one per log directory; batches carry it and stores record its seq.
    pub writer: String,
    /// The log directory (owned by one process at a time).
    pub wal_dir: PathBuf,
    /// When `commit()` tickets resolve, unless asked otherwise.
    pub durability: Durability,
    /// `offset.flush.interval.ms`: automatic commit interval (default 60 s); `None` commits only when
    /// asked or full.
    pub flush_interval: Option<Duration>,
    /// `offset.flush.timeout.ms`: how long a ticket's `wait` waits (default 5 s).
    pub flush_timeout: Duration,
    /// Distinct keys pending before `offer` applies back-pressure (default 1,000,000).
    pub max_pending: usize,
    /// Block or refuse when full.
    pub when_full: WhenFull,
    /// Start a new log segment after this many bytes (default 16 MiB).
    pub segment_bytes: u64,
    /// Batches logged but not yet applied before the log thread waits (default 8).
    pub max_in_flight: usize,
    /// What recovery does with corrupt log bytes.
    pub recovery: RecoveryPolicy,
    /// Where recovery puts bytes it skips (default `<wal_dir>/dead-letter.jsonl`).
    pub dead_letter: Option<PathBuf>,
    // The test kit's seams: set through the `testkit` feature's setters below.
    pub(crate) fs: Arc<dyn WalFs>,
    pub(crate) crash_hook: Option<Arc<dyn CrashHook>>,
    pub(crate) observer: Option<SealObserver>,
}

impl std::fmt::Debug for CommitBufferConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommitBufferConfig")
            .field("writer", &self.writer)
            .field("wal_dir", &self.wal_dir)
            .field("durability", &self.durability)
            .field("flush_interval", &self.flush_interval)
            .field("flush_timeout", &self.flush_timeout)
            .field("max_pending", &self.max_pending)
            .field("when_full", &self.when_full)
            .field("segment_bytes", &self.segment_bytes)
            .field("recovery", &self.recovery)
            .finish_non_exhaustive()
    }
}

impl CommitBufferConfig {
    /// Defaults (Kafka Connect's where it has one), logging to `wal_dir`.
    pub fn new(wal_dir: impl Into<PathBuf>) -> Self {
        let wal_dir = wal_dir.into();
        CommitBufferConfig {
            writer: "connect-offsets".into(),
            dead_letter: Some(wal_dir.join("dead-letter.jsonl")),
            wal_dir,
            durability: Durability::Local,
            flush_interval: Some(Duration::from_millis(60_000)),
            flush_timeout: Duration::from_millis(5_000),
            max_pending: 1_000_000,
            when_full: WhenFull::Block,
            segment_bytes: 16 << 20,
            max_in_flight: 8,
            recovery: RecoveryPolicy::Fail,
            fs: Arc::new(RealFs),
            crash_hook: None,
            observer: None,
        }
    }

    /// The log's file system (the real one unless set).
    #[cfg(feature = "testkit")]
    pub fn with_fs(&mut self, fs: Arc<dyn WalFs>) -> &mut Self {
        self.fs = fs;
        self
    }

    /// A hook called at every crash point.
    #[cfg(feature = "testkit")]
    pub fn with_crash_hook(&mut self, hook: Option<Arc<dyn CrashHook>>) -> &mut Self {
        self.crash_hook = hook;
        self
    }

    /// A function that sees every sealed batch before it is written.
    #[cfg(feature = "testkit")]
    pub fn with_observer(&mut self, observer: Option<SealObserver>) -> &mut Self {
        self.observer = observer;
        self
    }

    /// Sets one property by Kafka Connect's name (`offset.flush.interval.ms`,
    /// `offset.flush.timeout.ms`) or ours (`offsets.writer`, `offsets.durability` = local|store,
    /// `offsets.max.pending`, `offsets.when.full` = block|reject, `offsets.segment.bytes`,
    /// `offsets.recovery` = fail|skip, `offsets.dead.letter.file`).
    pub fn set(&mut self, name: &str, value: &str) -> Result<&mut Self> {
        let bad = |why: &str| Error::Invalid(format!("property `{name}` = `{value}`: {why}"));
        let num = || {
            value
                .trim()
                .parse::<u64>()
                .map_err(|_| bad("expected a non-negative integer"))
        };
        match name {
            "offset.flush.interval.ms" => {
                let ms = num()?;
                self.flush_interval = (ms > 0).then(|| Duration::from_millis(ms));
            }
            "offset.flush.timeout.ms" => self.flush_timeout = Duration::from_millis(num()?.max(1)),
            "offsets.writer" if value.is_empty() => {
                return Err(bad("a writer name must not be empty"));
            }
            "offsets.writer" => self.writer = value.to_string(),
            "offsets.durability" => {
                self.durability = match value {
                    "local" => Durability::Local,
                    "store" => Durability::Store,
                    _ => return Err(bad("expected local or store")),
                }
            }
            "offsets.max.pending" => self.max_pending = (num()? as usize).max(1),
            "offsets.when.full" => {
                self.when_full = match value {
                    "block" => WhenFull::Block,
                    "reject" => WhenFull::Reject,
                    _ => return Err(bad("expected block or reject")),
                }
            }
            "offsets.segment.bytes" => self.segment_bytes = num()?.max(4096),
            "offsets.recovery" => {
                self.recovery = match value {
                    "fail" => RecoveryPolicy::Fail,
                    "skip" => RecoveryPolicy::Skip,
                    _ => return Err(bad("expected fail or skip")),
                }
            }
            "offsets.dead.letter.file" => self.dead_letter = Some(PathBuf::from(value)),
            _ => return Err(bad("unknown property")),
        }
        Ok(self)
    }
}

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
}

struct Shared {
    writer: String,
    state: Mutex<State>,
    changed: Condvar,
    wakers: Mutex<Vec<Waker>>,
    durability: Durability,
    timeout: Duration,
    max_pending: usize,
    when_full: WhenFull,
    active_bytes: AtomicU64,
    wal: Arc<WalDir>,
}

#[derive(Default)]
struct State {
    active: Entries,
    spare: Vec<Entries>,
    oldest_pending: Option<Instant>,
    /// The epoch offers go into; sealing closes it and opens the next.
    open_epoch: u64,
    /// Highest epoch a committer asked for.
    requested: u64,
    /// Highest epoch logged (or failed) and applied (or failed).
    durable: u64,
    applied: u64,
    /// The batch seq each recent epoch became.
    epoch_seq: BTreeMap<u64, u64>,
    failed: BTreeMap<u64, Arc<Error>>,
    last_store_error: Option<Arc<Error>>,
    poisoned: Option<Arc<Error>>,
    closing: bool,
    closed: bool,
    in_flight: VecDeque<Arc<Batch>>,
    stats: BufferStats,
    ages: ConnectorAges,
}

/// Per connector, when its oldest uncommitted offer arrived (source-side lag), recorded while
/// [`metrics::track_connector_age`](crate::metrics::track_connector_age) is on. Offers wait in
/// `pending`; sealing moves them to `sealed`, which the log syncing the batch clears and a failed
/// write merges back. The log thread seals and logs one batch at a time, so `sealed` is that batch.
#[derive(Default)]
struct ConnectorAges {
    pending: HashMap<String, Instant>,
    sealed: HashMap<String, Instant>,
    /// Every connector seen since open: its age reads 0 once it has nothing uncommitted.
    known: BTreeSet<String>,
}

impl ConnectorAges {
    fn offered(&mut self, connector: &str) {
        if !self.pending.contains_key(connector) {
            self.pending.insert(connector.to_string(), Instant::now());
            if !self.known.contains(connector) {
                self.known.insert(connector.to_string());
            }
        }
    }

    fn sealed(&mut self) {
        // Swapped, not replaced, so both maps keep their tables.
        std::mem::swap(&mut self.sealed, &mut self.pending);
        self.pending.clear();
    }

    fn committed(&mut self) {
        self.sealed.clear();
    }

    fn merged_back(&mut self) {
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

enum Job {
    Apply {
        batch: Arc<Batch>,
        epoch: u64,
        closes: Option<ClosedSegment>,
    },
    Mark {
        epoch: u64,
    },
}

/// The write-ahead commit buffer (see the module docs). Share it between tasks with an `Arc`.
pub struct CommitBuffer {
    shared: Arc<Shared>,
    store: Arc<dyn OffsetStore>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for CommitBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommitBuffer")
            .field("writer", &self.shared.writer)
            .field("store", &self.store)
            .finish()
    }
}

fn lock(shared: &Shared) -> MutexGuard<'_, State> {
    // A panic while holding the lock leaves counters, not offsets, half-updated: go on.
    shared.state.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    /// Bytes the log holds: closed segments, the snapshot and the active segment.
    fn wal_bytes(&self) -> u64 {
        self.wal.held_bytes() + self.active_bytes.load(Ordering::Relaxed)
    }

    fn notify(&self) {
        self.changed.notify_all();
        let wakers = std::mem::take(&mut *self.wakers.lock().unwrap_or_else(|p| p.into_inner()));
        for w in wakers {
            w.wake();
        }
    }

    fn outcome(&self, st: &State, epoch: u64, durability: Durability) -> Option<Result<u64>> {
        if let Some(e) = st.failed.get(&epoch) {
            return Some(Err(Error::CommitFailed(Arc::clone(e))));
        }
        let done = match durability {
            Durability::Local => st.durable >= epoch,
            Durability::Store => st.applied >= epoch,
        };
        if done {
            let seq = st
                .epoch_seq
                .range(..=epoch)
                .next_back()
                .map_or(0, |(_, s)| *s);
            return Some(Ok(seq));
        }
        st.poisoned
            .as_ref()
            .map(|p| Err(Error::CommitFailed(Arc::clone(p))))
    }
}

/// Every open buffer reports its per-connector ages to the metrics sampler through its shared part.
impl Sampled for Shared {
    fn sample(&self) -> BufferSample {
        let st = lock(self);
        BufferSample {
            writer: self.writer.clone(),
            pending: st.active.len(),
            oldest_pending_age: st.oldest_pending.map(|t| t.elapsed()),
            logged_seq: st.stats.logged_seq,
            applied_seq: st.stats.applied_seq,
            wal_bytes: self.wal_bytes(),
            connector_ages: st.ages.ages(),
        }
    }
}

/// What [`metrics::watch`](crate::metrics::watch) samples: pending count and age, seqs, log bytes
/// and per-connector ages.
impl Sampled for CommitBuffer {
    fn sample(&self) -> BufferSample {
        self.shared.sample()
    }
}

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
        let dead_letter = config
            .dead_letter
            .as_ref()
            .map(|p| DeadLetterFile::new(p).with_fs(Arc::clone(&config.fs)));
        // Batches the store already holds are checked in the log but not decoded.
        let applied_before = store.applied_seq(&config.writer)?;
        let (wal, recovered) = WalDir::open_skipping(
            Arc::clone(&config.fs),
            &config.wal_dir,
            config.crash_hook.clone(),
            config.recovery,
            dead_letter.as_ref(),
            Some((config.writer.as_str(), applied_before)),
        )?;
        let writer = &config.writer;
        for b in recovered.snapshot.iter().chain(&recovered.batches) {
            if b.writer != *writer {
                return Err(Error::Invalid(format!(
                    "the log in {} belongs to writer `{}`, not `{writer}`",
                    config.wal_dir.display(),
                    b.writer
                )));
            }
        }
        let mut applied = store.applied_seq(writer)?;
        let mut replayed = 0u64;
        if let Some(snap) = &recovered.snapshot
            && snap.seq > applied
        {
            hook(&config.crash_hook, CrashPoint::InsideRecovery)?;
            store.apply(snap)?;
            applied = snap.seq;
            replayed += 1;
        }
        let mut last_seq = applied.max(recovered.last_seq);
        for b in &recovered.batches {
            last_seq = last_seq.max(b.seq);
            if b.seq <= applied {
                continue;
            }
            if b.seq != applied + 1 {
                let msg = format!(
                    "batches {}..{} of writer `{writer}` are in neither the store nor the log {} \
                     (was the store replaced or restored from an older copy?)",
                    applied + 1,
                    b.seq - 1,
                    config.wal_dir.display()
                );
                if config.recovery == RecoveryPolicy::Fail {
                    return Err(Error::Corrupted {
                        file: config.wal_dir.clone(),
                        offset: 0,
                        reason: msg,
                    });
                }
                tracing::error!("{msg}; going on (recovery policy skip)");
            }
            hook(&config.crash_hook, CrashPoint::InsideRecovery)?;
            store.apply(b)?;
            applied = b.seq;
            replayed += 1;
        }
        if replayed > 0 {
            tracing::info!(
                writer,
                replayed,
                applied,
                "replayed the write-ahead log into the store"
            );
        }
        crate::metrics::replayed(writer, replayed);
        store.persist()?;
        let log = wal.new_segment()?;
        // Everything older is applied now: release it (durable store) or fold it into a snapshot.
        if let Some(newest) = wal.closed().iter().map(|s| s.generation).max() {
            if store.durable() {
                wal.release(applied)?;
            } else {
                let snapshot = Batch::new(
                    writer.clone(),
                    applied,
                    store.all()?.into_iter().map(|(k, v)| (k, Some(v))),
                );
                wal.compact(&snapshot, newest)?;
            }
        }

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
                ..State::default()
            }),
            changed: Condvar::new(),
            wakers: Mutex::new(Vec::new()),
            durability: config.durability,
            timeout: config.flush_timeout,
            max_pending: config.max_pending.max(1),
            when_full: config.when_full,
            active_bytes: AtomicU64::new(0),
            wal: Arc::clone(&wal),
        });
        lock(&shared).epoch_seq.insert(0, last_seq);
        crate::metrics::opened(Arc::downgrade(&shared) as std::sync::Weak<dyn Sampled>);
        let (tx, rx) = sync_channel(config.max_in_flight.max(1));
        let log_thread = LogThread {
            shared: Arc::clone(&shared),
            log,
            tx,
            seq: last_seq,
            buf: Vec::new(),
            hook: config.crash_hook.clone(),
            observer: config.observer.clone(),
            interval: config.flush_interval,
            segment_bytes: config.segment_bytes,
            durable_store: store.durable(),
        };
        let apply_thread = ApplyThread {
            shared: Arc::clone(&shared),
            store: Arc::clone(&store),
            wal: Arc::clone(&wal),
            hook: config.crash_hook.clone(),
        };
        let threads = vec![
            std::thread::Builder::new()
                .name(format!("offsets-log-{writer}"))
                .spawn(move || log_thread.run())
                .map_err(|e| Error::io("spawn log thread", &config.wal_dir, e))?,
            std::thread::Builder::new()
                .name(format!("offsets-apply-{writer}"))
                .spawn(move || apply_thread.run(rx))
                .map_err(|e| Error::io("spawn apply thread", &config.wal_dir, e))?,
        ];
        Ok(CommitBuffer {
            shared,
            store,
            threads: Mutex::new(threads),
        })
    }

    /// Records `offset` as the newest position of `key`. Cheap: a map insert under a lock.
    pub fn offer(&self, key: OffsetKey, offset: Offset) -> Result<()> {
        self.put(key, Some(offset))
    }

    /// Records that `key`'s offset is to be reset (removed) by the next commit.
    pub fn offer_reset(&self, key: OffsetKey) -> Result<()> {
        self.put(key, None)
    }

    fn put(&self, key: OffsetKey, offset: Option<Offset>) -> Result<()> {
        let shared = &*self.shared;
        let mut st = lock(shared);
        loop {
            if st.closed || st.closing {
                return Err(Error::Closed("commit buffer"));
            }
            if let Some(p) = &st.poisoned {
                return Err(Error::CommitFailed(Arc::clone(p)));
            }
            if st.active.len() < shared.max_pending || st.active.contains_key(&key) {
                break;
            }
            match shared.when_full {
                WhenFull::Reject => {
                    return Err(Error::Full(format!(
                        "commit buffer `{}` holds {} pending offsets (max_pending); commit first or raise offsets.max.pending",
                        shared.writer,
                        st.active.len()
                    )));
                }
                WhenFull::Block => {
                    st.requested = st.requested.max(st.open_epoch);
                    shared.changed.notify_all();
                    st = shared.changed.wait(st).unwrap_or_else(|p| p.into_inner());
                }
            }
        }
        if st.oldest_pending.is_none() {
            st.oldest_pending = Some(Instant::now());
        }
        if crate::metrics::connector_age_tracked() {
            st.ages.offered(key.namespace());
        }
        st.active.insert(key, offset);
        Ok(())
    }

    /// Seals everything offered so far into a batch and returns a ticket for it, resolving at the
    /// buffer's configured durability.
    pub fn commit(&self) -> CommitTicket {
        self.commit_with(self.shared.durability)
    }

    /// Like [`commit`](Self::commit) with a chosen durability.
    pub fn commit_with(&self, durability: Durability) -> CommitTicket {
        let shared = &self.shared;
        let mut st = lock(shared);
        let ticket = |immediate| CommitTicket {
            shared: Arc::clone(shared),
            epoch: 0,
            durability,
            immediate,
        };
        if st.closed {
            return ticket(Some(Error::Closed("commit buffer")));
        }
        if let Some(p) = &st.poisoned {
            return ticket(Some(Error::CommitFailed(Arc::clone(p))));
        }
        let epoch = if st.active.is_empty() {
            st.open_epoch - 1
        } else {
            st.open_epoch
        };
        if epoch > st.requested {
            st.requested = epoch;
            shared.changed.notify_all();
        }
        CommitTicket {
            shared: Arc::clone(shared),
            epoch,
            durability,
            immediate: None,
        }
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
        s.pending = st.active.len();
        s.oldest_pending_age = st.oldest_pending.map(|t| t.elapsed());
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
        let released = if result.is_ok() && self.store.durable() {
            let applied = lock(&self.shared).stats.applied_seq;
            self.store
                .persist()
                .and_then(|_| self.shared.wal.release(applied))
                .map(|_| ())
        } else {
            Ok(())
        };
        lock(&self.shared).closed = true;
        self.shared.notify();
        result.and(released)
    }

    fn stop(&self) {
        {
            let mut st = lock(&self.shared);
            st.closing = true;
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
    }
}

/// A commit in progress. `wait()` blocks; `.await` suspends.
pub struct CommitTicket {
    shared: Arc<Shared>,
    epoch: u64,
    durability: Durability,
    immediate: Option<Error>,
}

impl std::fmt::Debug for CommitTicket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommitTicket")
            .field("epoch", &self.epoch)
            .field("durability", &self.durability)
            .finish()
    }
}

impl CommitTicket {
    /// Waits up to the buffer's flush timeout; returns the seq of the batch that holds the commit.
    pub fn wait(self) -> Result<u64> {
        let timeout = self.shared.timeout;
        self.wait_timeout(timeout)
    }

    /// Waits up to `timeout`. A timeout does not cancel the commit: it stays in the pipeline.
    pub fn wait_timeout(mut self, timeout: Duration) -> Result<u64> {
        if let Some(e) = self.immediate.take() {
            return Err(e);
        }
        let deadline = Instant::now() + timeout;
        let mut st = lock(&self.shared);
        loop {
            if let Some(r) = self.shared.outcome(&st, self.epoch, self.durability) {
                return r;
            }
            let now = Instant::now();
            if now >= deadline {
                let last = st
                    .last_store_error
                    .as_ref()
                    .map(|e| format!(" (last store error: {e})"))
                    .unwrap_or_default();
                return Err(Error::Timeout {
                    op: format!(
                        "commit of writer `{}` at {:?} durability{last}",
                        self.shared.writer, self.durability
                    ),
                    millis: timeout.as_millis() as u64,
                });
            }
            st = self
                .shared
                .changed
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// The result if the commit is already decided.
    pub fn try_result(&mut self) -> Option<Result<u64>> {
        if let Some(e) = self.immediate.take() {
            return Some(Err(e));
        }
        let st = lock(&self.shared);
        self.shared.outcome(&st, self.epoch, self.durability)
    }
}

impl Future for CommitTicket {
    type Output = Result<u64>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some(r) = self.try_result() {
            return Poll::Ready(r);
        }
        self.shared
            .wakers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(cx.waker().clone());
        // Re-check: progress may have been made between the check and the registration.
        match self.try_result() {
            Some(r) => Poll::Ready(r),
            None => Poll::Pending,
        }
    }
}

struct LogThread {
    shared: Arc<Shared>,
    log: WalWriter,
    tx: SyncSender<Job>,
    seq: u64,
    buf: Vec<u8>,
    hook: Option<Arc<dyn CrashHook>>,
    observer: Option<SealObserver>,
    interval: Option<Duration>,
    segment_bytes: u64,
    durable_store: bool,
}

impl LogThread {
    fn run(mut self) {
        let shared = Arc::clone(&self.shared);
        let mut next_auto = self.interval.map(|i| Instant::now() + i);
        loop {
            // Wait for a reason to seal.
            let mut st = lock(&shared);
            let (epoch, entries, oldest) = loop {
                if st.closing {
                    return;
                }
                let asked = st.requested >= st.open_epoch;
                let full = st.active.len() >= shared.max_pending;
                let due = next_auto.is_some_and(|t| Instant::now() >= t);
                if asked || full || (due && !st.active.is_empty()) {
                    let epoch = st.open_epoch;
                    st.open_epoch += 1;
                    let fresh = st.spare.pop().unwrap_or_default();
                    let entries = std::mem::replace(&mut st.active, fresh);
                    st.ages.sealed();
                    break (epoch, entries, st.oldest_pending.take());
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
        let batch = Batch {
            writer: shared.writer.clone(),
            seq,
            entries,
        };
        if let Some(observe) = &self.observer {
            observe(&batch);
        }
        self.buf.clear();
        frame::encode(frame::FrameKind::Batch, &batch, &mut self.buf);
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
                let batch = Arc::new(batch);
                {
                    let mut st = lock(&shared);
                    st.durable = epoch;
                    st.epoch_seq.insert(epoch, seq);
                    st.in_flight.push_back(Arc::clone(&batch));
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
                }
                shared.notify();
                if let Err(e) = hook(&self.hook, CrashPoint::AfterAckBeforeApply) {
                    self.poison(epoch, e, None);
                    return false;
                }
                let threshold = if self.durable_store {
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
                        Err(e) => {
                            // The batch is logged and acked; without a new segment nothing more can be.
                            let _ = self.tx.send(Job::Apply {
                                batch,
                                epoch,
                                closes: None,
                            });
                            self.poison(epoch, e, None);
                            return false;
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
                    })
                    .is_ok()
            }
            Err(AppendError::NotWritten(e)) => {
                tracing::warn!(writer = %shared.writer, seq, error = %e, "log write failed; offsets merged back for the next commit");
                let e = Arc::new(e);
                let mut st = lock(&shared);
                st.failed.insert(epoch, Arc::clone(&e));
                st.durable = epoch;
                st.stats.failures += 1;
                crate::metrics::commit_failed(&shared.writer, "log");
                merge_back(&mut st, batch.entries, oldest);
                st.ages.merged_back();
                drop(st);
                shared.notify();
                self.tx.send(Job::Mark { epoch }).is_ok()
            }
            Err(AppendError::Poisoned(e)) => {
                self.poison(epoch, e, Some((batch.entries, oldest)));
                false
            }
        }
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
        if let Some((entries, oldest)) = merge {
            merge_back(&mut st, entries, oldest);
            st.ages.merged_back();
        }
        drop(st);
        self.shared.notify();
    }
}

/// Puts a failed batch back under the pending offers: a newer pending value for a key wins.
fn merge_back(st: &mut State, entries: Entries, oldest: Option<Instant>) {
    for (k, v) in entries {
        st.active.entry(k).or_insert(v);
    }
    st.oldest_pending = match (st.oldest_pending, oldest) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
}

struct ApplyThread {
    shared: Arc<Shared>,
    store: Arc<dyn OffsetStore>,
    wal: Arc<WalDir>,
    hook: Option<Arc<dyn CrashHook>>,
}

/// The apply thread writes the logged batches queued behind the one it takes in the same store write,
/// while their entries together stay within this many: a store with a high cost per write (a Kafka
/// transaction) then keeps up with many small commits, and big batches are left as they are.
const COALESCE_ENTRIES: usize = 10_000;

impl ApplyThread {
    fn run(self, rx: Receiver<Job>) {
        let mut next: Option<Job> = None;
        loop {
            let job = match next.take() {
                Some(job) => job,
                None => match rx.recv() {
                    Ok(job) => job,
                    Err(_) => return,
                },
            };
            match job {
                Job::Mark { epoch } => {
                    lock(&self.shared).applied = epoch;
                    self.shared.notify();
                }
                Job::Apply {
                    batch,
                    epoch,
                    closes,
                } => {
                    // Batches logged meanwhile, in log order; a Mark ends the group (it must be
                    // seen after the batches before it).
                    let mut group = vec![batch];
                    let mut epoch = epoch;
                    let mut closes = closes;
                    let mut entries = group[0].entries.len();
                    while entries < COALESCE_ENTRIES {
                        match rx.try_recv() {
                            Ok(Job::Apply {
                                batch,
                                epoch: e,
                                closes: c,
                            }) if entries + batch.entries.len() <= COALESCE_ENTRIES => {
                                entries += batch.entries.len();
                                group.push(batch);
                                epoch = e;
                                // The newest closed segment: releasing through it releases the older.
                                closes = c.or(closes);
                            }
                            Ok(other) => {
                                next = Some(other);
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                    // One batch as it is; several as one with the last seq (later values win):
                    // the store goes from the state before the first to the state after the last in
                    // one atomic write, which is a prefix of the log either way.
                    let merged = if group.len() == 1 {
                        Arc::clone(&group[0])
                    } else {
                        let last = group.last().expect("a group");
                        let mut all = Entries::default();
                        all.reserve(entries);
                        for b in &group {
                            for (k, v) in &b.entries {
                                all.insert(k.clone(), v.clone());
                            }
                        }
                        Arc::new(Batch {
                            writer: last.writer.clone(),
                            seq: last.seq,
                            entries: all,
                        })
                    };
                    if !self.apply(&merged, &group, epoch) {
                        return;
                    }
                    let release = closes.map(|seg| (seg, merged.writer.clone(), merged.seq));
                    drop(merged);
                    // Give emptied maps back to the log thread: the next seal reuses their tables.
                    for batch in group {
                        if let Ok(done) = Arc::try_unwrap(batch) {
                            let mut entries = done.entries;
                            entries.clear();
                            let mut st = lock(&self.shared);
                            if st.spare.len() < 2 {
                                st.spare.push(entries);
                            }
                        }
                    }
                    if let Some((seg, writer, seq)) = release
                        && let Err(e) = self.release(&writer, seq, &seg)
                    {
                        if e.is_fatal() {
                            self.stop(e);
                            return;
                        }
                        // Release is retried at the next segment; nothing is lost by waiting.
                        tracing::warn!(error = %e, "could not release log segments yet");
                    }
                }
            }
        }
    }

    fn stop(&self, e: Error) {
        let mut st = lock(&self.shared);
        if st.poisoned.is_none() {
            st.poisoned = Some(Arc::new(e));
        }
        drop(st);
        self.shared.notify();
    }

    /// Applies `batch` (one logged batch, or the `group` of them merged), retrying until the store
    /// takes it. False when the thread must stop.
    fn apply(&self, batch: &Arc<Batch>, group: &[Arc<Batch>], epoch: u64) -> bool {
        let mut backoff = Duration::from_millis(50);
        loop {
            match self.store.apply(batch) {
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
        st.applied = epoch;
        st.stats.applied_seq = batch.seq;
        st.last_store_error = None;
        st.stats.store_writes += 1;
        for logged in group {
            if let Some(pos) = st.in_flight.iter().position(|b| Arc::ptr_eq(b, logged)) {
                st.in_flight.remove(pos);
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

    fn release(&self, writer: &str, seq: u64, seg: &ClosedSegment) -> Result<()> {
        if self.store.durable() {
            self.store.persist()?;
            self.wal.release(seq)?;
        } else {
            let all = self.store.all()?;
            let snapshot = Batch::new(writer, seq, all.into_iter().map(|(k, v)| (k, Some(v))));
            self.wal.compact(&snapshot, seg.generation)?;
        }
        Ok(())
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
