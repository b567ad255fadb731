//! Model-based crash scenarios: the one reference model and driver behind the crash property tests,
//! the fuzz target `crash_replay` and any backend that wants the same proof.
//!
//! A scenario runs a sequence of [`Op`]s (offers, resets, commits, crash plans, reopens) against a
//! [`CommitBuffer`] logging to a [`SimFs`] over a real store from a [`StoreFactory`]. It records every
//! sealed batch (the reference model: the state after batches `1..=k` is the fold of their entries) and
//! checks after every step, and after every recovery, the four invariants:
//!
//! 1. **No loss**: after recovery the store has applied at least the highest acknowledged seq.
//! 2. **Atomic prefix**: the store's state equals the fold of batches `1..=k`, `k` its applied seq.
//! 3. **No duplication**: the store never receives a batch at or below its applied seq, and no seq is
//!    applied twice (for durable stores, across process lifetimes).
//! 4. **No regression**: `k` never goes down from one recovery to the next.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::buffer::{CommitBuffer, CommitBufferConfig, Durability};
use crate::crash::{CrashHook, CrashPlan, CrashPoint};
use crate::fs::SimFs;
use crate::model::{Batch, Entries};
use crate::once::{OnceOverride, marker_key};
use crate::store::{ApplyFault, Capabilities, CommitHooks, OffsetStore, OffsetStoreExt, hooks};
use crate::{Offset, OffsetKey, Partition, Result};

/// Opens the store under test for each simulated process lifetime.
pub trait StoreFactory {
    /// Opens the store with `fault` as its [`ApplyFault`] seam. Data must carry over between
    /// lifetimes exactly as the backend's real data does when a process dies (memory: none).
    fn open(&mut self, fault: Arc<dyn ApplyFault>) -> Result<Arc<dyn OffsetStore>>;
}

/// One step of a scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Offer a new offset (or a reset) for key number `key`.
    Offer {
        /// Which of the scenario's keys.
        key: u8,
        /// A reset instead of an offset.
        reset: bool,
    },
    /// Commit and wait, at `Store` durability or `Local`.
    Commit {
        /// Wait for the store, not only the log.
        store: bool,
    },
    /// Arm a crash at the `skip`-th next occurrence of `point`; a torn write keeps `torn` bytes.
    Crash {
        /// Where.
        point: CrashPoint,
        /// How many occurrences to let pass first.
        skip: u8,
        /// Bytes of a torn write that reach the file.
        torn: u16,
    },
    /// Close cleanly and open again, from now on with override number `id` in the buffer's
    /// configuration (it resets key `id` and sets key `id + 1`); `crash` is armed in the new
    /// lifetime before its open, so it can stop the override's apply at any point.
    Override {
        /// Which override (its id is `once-<id>`).
        id: u8,
        /// Where, after how many occurrences, and how many bytes of a torn write reach the file.
        crash: Option<(CrashPoint, u8, u16)>,
    },
    /// Close cleanly and open again.
    Reopen,
}

impl Op {
    /// Decodes operations from arbitrary bytes (fuzzing and byte-level shrinking): three bytes an op.
    pub fn decode_all(bytes: &[u8]) -> Vec<Op> {
        bytes
            .chunks(3)
            .map(|c| {
                let a = c[0];
                let b = c.get(1).copied().unwrap_or(0);
                let t = c.get(2).copied().unwrap_or(0);
                match a % 16 {
                    0..=6 => Op::Offer {
                        key: b,
                        reset: false,
                    },
                    7 => Op::Offer {
                        key: b,
                        reset: true,
                    },
                    8..=10 => Op::Commit { store: b % 2 == 0 },
                    11 | 12 => Op::Crash {
                        point: CrashPoint::ALL[usize::from(b) % CrashPoint::ALL.len()],
                        skip: t % 4,
                        torn: u16::from(t) * 7,
                    },
                    13 => Op::Reopen,
                    15 => Op::Override {
                        id: b % 3,
                        // The high bit of `t` arms a crash for the open; the rest picks where.
                        crash: (t & 0x80 != 0).then(|| {
                            let point =
                                CrashPoint::ALL[usize::from(t & 0x7f) % CrashPoint::ALL.len()];
                            (point, (t >> 4) % 3, u16::from(t) * 5)
                        }),
                    },
                    _ => Op::Commit { store: false },
                }
            })
            .collect()
    }
}

/// Settings of a scenario.
#[derive(Debug, Clone)]
pub struct ScenarioOptions {
    /// Distinct keys the offers cycle over.
    pub keys: u8,
    /// Log segment size (small, so rotation, release and compaction happen often).
    pub segment_bytes: u64,
    /// How long a commit may take before the scenario calls it a hang (generous: a loaded 2-core
    /// machine running a real broker can stall a transaction for tens of seconds).
    pub commit_timeout: Duration,
    /// After each `Local` commit, wait until the store has applied it too, so that the apply
    /// thread never lags into the next batch and every run of the same ops passes the same crash
    /// points in the same order (the exhaustive check; with rotation off, see `segment_bytes`).
    pub settle: bool,
    /// The entries the log lets wait for the store (`None`: the buffer's default). A few make the
    /// log wait for room, and RocksDB's writes are then built on the log thread.
    pub max_pending: Option<usize>,
}

impl Default for ScenarioOptions {
    fn default() -> Self {
        ScenarioOptions {
            keys: 6,
            segment_bytes: 256,
            commit_timeout: Duration::from_secs(120),
            settle: false,
            max_pending: None,
        }
    }
}

/// What a scenario (or many) reached.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Crashes made at each point.
    pub crashes: BTreeMap<CrashPoint, u64>,
    /// Times each point was passed.
    pub hits: BTreeMap<CrashPoint, u64>,
    /// Process lifetimes (opens).
    pub lifetimes: u64,
    /// Commits acknowledged.
    pub acked_commits: u64,
    /// Batches recovered from the log across all recoveries.
    pub replayed: u64,
    /// Batches written as the store built them on the log thread ([`CommitHooks::encode_logged`]).
    pub encoded_writes: u64,
    /// Per lifetime, in order: how often it passed each point, and where it crashed.
    pub lifetime_log: Vec<(BTreeMap<CrashPoint, u64>, Option<CrashPoint>)>,
}

impl Report {
    /// Adds another report's counts to this one.
    pub fn merge(&mut self, other: &Report) {
        for (p, n) in &other.crashes {
            *self.crashes.entry(*p).or_default() += n;
        }
        for (p, n) in &other.hits {
            *self.hits.entry(*p).or_default() += n;
        }
        self.lifetimes += other.lifetimes;
        self.acked_commits += other.acked_commits;
        self.replayed += other.replayed;
        self.encoded_writes += other.encoded_writes;
        self.lifetime_log.extend(other.lifetime_log.iter().cloned());
    }
}

const WRITER: &str = "scenario";

/// A store wrapper that checks invariant 3 on every apply.
#[derive(Debug)]
struct Recorder {
    inner: Arc<dyn OffsetStore>,
    applied: Arc<Mutex<BTreeSet<u64>>>,
    violations: Arc<Mutex<Vec<String>>>,
    encoded_writes: Arc<AtomicU64>,
}

impl Recorder {
    /// Applies `batch` through `apply`, noting a batch sent again or applied twice.
    fn record(&self, batch: &Batch, apply: impl FnOnce(&Batch) -> Result<()>) -> Result<()> {
        let before = self.inner.applied_seq(&batch.writer)?;
        if batch.seq != 0 && batch.seq <= before {
            self.violations.lock().expect("violations").push(format!(
                "batch {} sent to the store again (store already at {before})",
                batch.seq
            ));
        }
        apply(batch)?;
        if batch.seq > before && !self.applied.lock().expect("applied").insert(batch.seq) {
            self.violations
                .lock()
                .expect("violations")
                .push(format!("batch {} applied twice", batch.seq));
        }
        Ok(())
    }
}

impl OffsetStore for Recorder {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::DEFAULT.with_durable(self.inner.capabilities().durable)
    }
    fn apply(&self, batch: &Batch) -> Result<()> {
        self.record(batch, |b| self.inner.apply(b))
    }
    fn applied_seq(&self, writer: &str) -> Result<u64> {
        self.inner.applied_seq(writer)
    }
    fn writers(&self) -> Result<Vec<(String, u64)>> {
        self.inner.writers()
    }
    fn get(&self, key: &OffsetKey) -> Result<Option<Offset>> {
        self.inner.get(key)
    }
    fn partitions(&self, namespace: &str) -> Result<Vec<(OffsetKey, Offset)>> {
        self.inner.partitions(namespace)
    }
    fn namespaces(&self) -> Result<Vec<String>> {
        self.inner.namespaces()
    }
    fn persist(&self) -> Result<()> {
        self.inner.persist()
    }

    fn hooks(&self) -> Option<&dyn CommitHooks> {
        Some(self)
    }
}

impl CommitHooks for Recorder {
    fn apply_logged(&self, batch: &Batch) -> Result<()> {
        self.record(batch, |b| hooks(&*self.inner).apply_logged(b))
    }
    fn encode_logged(&self, batch: &Batch) -> Option<crate::store::Encoded> {
        hooks(&*self.inner).encode_logged(batch)
    }
    fn apply_encoded(&self, batch: &Batch, encoded: crate::store::Encoded) -> Result<()> {
        self.encoded_writes.fetch_add(1, Ordering::Relaxed);
        self.record(batch, |b| hooks(&*self.inner).apply_encoded(b, encoded))
    }
    fn admit(&self, writer: &str, key: &OffsetKey, offset: Option<&Offset>) -> Result<()> {
        hooks(&*self.inner).admit(writer, key, offset)
    }
    fn as_stored(&self, key: &OffsetKey, offset: &Offset) -> Result<Option<(OffsetKey, Offset)>> {
        hooks(&*self.inner).as_stored(key, offset)
    }
}

/// Takes the place of [`SimFs::crash`] at every crash of a scenario: it is given the file system
/// and the highest seq acknowledged so far, and must end with [`SimFs::power_loss`] or
/// [`SimFs::crash`].
pub type PowerLoss = Box<dyn FnMut(&SimFs, u64)>;

/// One scenario in progress.
pub struct Scenario<'f> {
    factory: &'f mut dyn StoreFactory,
    options: ScenarioOptions,
    sim: SimFs,
    plan: Arc<CrashPlan>,
    buffer: Option<CommitBuffer>,
    store: Option<Arc<dyn OffsetStore>>,
    sealed: Arc<Mutex<BTreeMap<u64, Entries>>>,
    applied: Arc<Mutex<BTreeSet<u64>>>,
    violations: Arc<Mutex<Vec<String>>>,
    encoded_writes: Arc<AtomicU64>,
    acked: u64,
    recovered: u64,
    counter: i64,
    crash_next_open: Option<u8>,
    /// The override every open carries, and a crash to arm before the next open.
    once: Option<OnceOverride>,
    crash_at_open: Option<(CrashPoint, usize, usize)>,
    power_loss: Option<PowerLoss>,
    report: Report,
}

impl<'f> Scenario<'f> {
    /// Opens the first lifetime.
    pub fn start(
        factory: &'f mut dyn StoreFactory,
        options: ScenarioOptions,
    ) -> std::result::Result<Self, String> {
        let mut s = Scenario {
            factory,
            options,
            sim: SimFs::new(),
            plan: Arc::new(CrashPlan::never()),
            buffer: None,
            store: None,
            sealed: Arc::default(),
            applied: Arc::default(),
            violations: Arc::default(),
            encoded_writes: Arc::default(),
            acked: 0,
            recovered: 0,
            counter: 0,
            crash_next_open: None,
            once: None,
            crash_at_open: None,
            power_loss: None,
            report: Report::default(),
        };
        s.open_lifetime()?;
        Ok(s)
    }

    /// Lets `power_loss` choose what every later crash keeps of what was not synced.
    pub fn set_power_loss(&mut self, power_loss: PowerLoss) {
        self.power_loss = Some(power_loss);
    }

    /// Arms a crash at occurrence `skip` (0-based) of `point` in this lifetime ([`CrashPlan::at`]).
    pub fn arm(&self, point: CrashPoint, skip: usize, torn: usize) {
        self.plan.arm(point, skip, torn);
    }

    /// Arms a crash at occurrence `skip` of `point` in the next lifetime, from its open on.
    pub fn arm_next_open(&mut self, point: CrashPoint, skip: usize, torn: usize) {
        self.crash_at_open = Some((point, skip, torn));
    }

    /// How often this lifetime has passed each point so far.
    pub fn hits_now(&self) -> BTreeMap<CrashPoint, u64> {
        self.plan.hits()
    }

    /// What the scenario reached so far (lifetimes are counted once they end).
    pub fn report(&self) -> &Report {
        &self.report
    }

    fn lose_power(&mut self) {
        match self.power_loss.as_mut() {
            Some(choose) => choose(&self.sim, self.acked),
            None => self.sim.crash(),
        }
    }

    fn key(&self, k: u8) -> OffsetKey {
        let k = k % self.options.keys.max(1);
        OffsetKey::new(
            format!("conn-{}", k % 2),
            Partition::new().with("p", i64::from(k)),
        )
    }

    fn end_lifetime_stats(&mut self) {
        for (p, n) in self.plan.hits() {
            *self.report.hits.entry(p).or_default() += n;
        }
        let crashed_at = self.plan.crashed_at();
        if let Some(p) = crashed_at {
            *self.report.crashes.entry(p).or_default() += 1;
        }
        self.report
            .lifetime_log
            .push((self.plan.hits(), crashed_at));
    }

    fn open_lifetime(&mut self) -> std::result::Result<(), String> {
        for attempt in 0..3 {
            let plan = Arc::new(CrashPlan::never());
            if let Some(skip) = self.crash_next_open.take() {
                plan.arm(CrashPoint::InsideRecovery, usize::from(skip), 0);
            }
            if let Some((point, skip, torn)) = self.crash_at_open.take() {
                plan.arm(point, skip, torn);
            }
            self.plan = Arc::clone(&plan);
            self.sim
                .set_hook(Some(Arc::clone(&plan) as Arc<dyn CrashHook>));
            self.report.lifetimes += 1;
            let inner = self
                .factory
                .open(Arc::clone(&plan) as Arc<dyn ApplyFault>)
                .map_err(|e| format!("open store: {e}"))?;
            // Batches above what the store holds now died with the last lifetime (all of them for
            // a volatile store; those past RocksDB's log since its last flush): replaying them is
            // not a second application.
            let held = inner
                .applied_seq(WRITER)
                .map_err(|e| format!("read the store's seq: {e}"))?;
            self.applied
                .lock()
                .expect("applied")
                .retain(|&seq| seq <= held);
            let store: Arc<dyn OffsetStore> = Arc::new(Recorder {
                inner,
                applied: Arc::clone(&self.applied),
                violations: Arc::clone(&self.violations),
                encoded_writes: Arc::clone(&self.encoded_writes),
            });
            let mut config = CommitBufferConfig::new("/wal");
            config.writer = WRITER.into();
            config.with_fs(Arc::new(self.sim.clone()));
            config.with_crash_hook(Some(Arc::clone(&plan) as Arc<dyn CrashHook>));
            config.flush_interval = None;
            config.flush_timeout = self.options.commit_timeout;
            config.segment_bytes = self.options.segment_bytes;
            config.dead_letter = None;
            config.once = self.once.clone();
            if let Some(max) = self.options.max_pending {
                config.max_pending = max;
            }
            let sealed = Arc::clone(&self.sealed);
            config.observer = Some(Arc::new(move |b: &Batch| {
                sealed
                    .lock()
                    .expect("sealed")
                    .insert(b.seq, b.entries.clone());
            }));
            let opened = CommitBuffer::open(Arc::clone(&store), config);
            if plan.crashed() {
                // The process died at open: inside recovery, or inside the override's apply (even
                // after the open returned, the crash coming past the override's acknowledgement).
                let _ = attempt;
                drop(opened); // joins the buffer's threads, if it got that far
                drop(store);
                self.end_lifetime_stats();
                self.lose_power();
                continue;
            }
            let buffer = opened.map_err(|e| format!("reopen failed: {e}"))?;
            self.report.replayed += buffer.stats().replayed_batches;
            if self.once.is_some() {
                // The override was applied at Store durability before open returned.
                self.acked = self.acked.max(buffer.stats().applied_seq);
            }
            self.buffer = Some(buffer);
            self.store = Some(store);
            self.check_recovered()?;
            return self.check_once();
        }
        Err("recovery crashed three times in a row".into())
    }

    fn fold(&self, upto: u64) -> BTreeMap<Vec<u8>, Offset> {
        let mut state = BTreeMap::new();
        for (_, entries) in self.sealed.lock().expect("sealed").range(..=upto) {
            for (k, v) in entries {
                match v {
                    Some(v) => state.insert(k.id().to_vec(), v.clone()),
                    None => state.remove(k.id()),
                };
            }
        }
        state
    }

    fn store_state(&self) -> std::result::Result<(u64, BTreeMap<Vec<u8>, Offset>), String> {
        let store = self.store.as_ref().ok_or("no store open")?;
        let k = store
            .applied_seq(WRITER)
            .map_err(|e| format!("applied_seq: {e}"))?;
        let all = store.all().map_err(|e| format!("read store: {e}"))?;
        Ok((
            k,
            all.into_iter()
                .map(|(key, v)| (key.id().to_vec(), v))
                .collect(),
        ))
    }

    fn check_prefix(
        &self,
        k: u64,
        state: &BTreeMap<Vec<u8>, Offset>,
    ) -> std::result::Result<(), String> {
        let want = self.fold(k);
        if *state != want {
            return Err(format!(
                "atomic prefix broken: store at seq {k} holds {} offsets that are not the state after batches 1..={k} ({} offsets)",
                state.len(),
                want.len()
            ));
        }
        Ok(())
    }

    /// Every override the scenario gave is in at most one batch the store holds, its marker and its
    /// entries in that same batch; the current one is in exactly one, since an open with it
    /// succeeded.
    fn check_once(&self) -> std::result::Result<(), String> {
        let sealed = self.sealed.lock().expect("sealed");
        for id in 0..=u8::MAX {
            let name = format!("once-{id}");
            let marker = marker_key(&name);
            let value = Some(Offset::new().with("once", i64::from(id)));
            let set = self.key(id.wrapping_add(1));
            let (mut marked, mut set_by_it, mut both) = (0, 0, 0);
            for e in sealed.values() {
                let m = e.contains_key(&marker);
                let s = e.get(&set) == Some(&value);
                marked += usize::from(m);
                set_by_it += usize::from(s);
                both += usize::from(m && s);
            }
            let current = self.once.as_ref().is_some_and(|o| o.id() == name);
            if marked > 1
                || set_by_it > 1
                || marked != both
                || set_by_it != both
                || (current && both != 1)
            {
                return Err(format!(
                    "override {name}: its marker is in {marked} batches the store holds, its offset in {set_by_it}, both in {both} (want one batch with both)"
                ));
            }
        }
        Ok(())
    }

    fn check_violations(&self) -> std::result::Result<(), String> {
        let v = self.violations.lock().expect("violations");
        if v.is_empty() {
            Ok(())
        } else {
            Err(v.join("; "))
        }
    }

    fn check_recovered(&mut self) -> std::result::Result<(), String> {
        let (k, state) = self.store_state()?;
        if k < self.acked {
            return Err(format!(
                "no loss broken: batch {} was acknowledged but the store recovered to {k}",
                self.acked
            ));
        }
        if k < self.recovered {
            return Err(format!(
                "no regression broken: recovered to {k} after an earlier recovery reached {}",
                self.recovered
            ));
        }
        let max_sealed = self
            .sealed
            .lock()
            .expect("sealed")
            .keys()
            .next_back()
            .copied()
            .unwrap_or(0);
        if k > max_sealed {
            return Err(format!(
                "the store is at seq {k} but only {max_sealed} batches were ever sealed"
            ));
        }
        self.check_prefix(k, &state)?;
        // Batches above k were never acknowledged and are gone; their seqs will be used again.
        self.sealed.lock().expect("sealed").retain(|s, _| *s <= k);
        self.recovered = k;
        self.check_violations()
    }

    fn crashed(&mut self) -> std::result::Result<(), String> {
        self.buffer = None; // joins the buffer's threads
        self.store = None;
        self.end_lifetime_stats();
        self.lose_power();
        self.open_lifetime()
    }

    /// Runs one operation and checks the invariants.
    pub fn step(&mut self, op: &Op) -> std::result::Result<(), String> {
        let result = match op {
            Op::Offer { key, reset } => {
                self.counter += 1;
                let key = self.key(*key);
                let buffer = self.buffer.as_ref().ok_or("no buffer")?;
                let r = if *reset {
                    buffer.offer_reset(key)
                } else {
                    buffer.offer(key, Offset::new().with("v", self.counter))
                };
                r.map(|_| ())
            }
            Op::Commit { store } => {
                let buffer = self.buffer.as_ref().ok_or("no buffer")?;
                let d = if *store {
                    Durability::Store
                } else {
                    Durability::Local
                };
                match buffer
                    .commit_with(d)
                    .wait_timeout(self.options.commit_timeout)
                {
                    Ok(seq) => {
                        self.acked = self.acked.max(seq);
                        self.report.acked_commits += 1;
                        if !*store && self.options.settle && !self.plan.crashed() {
                            // An empty commit at `Store` waits for the apply of the last batch.
                            if let Err(e) = buffer
                                .commit_with(Durability::Store)
                                .wait_timeout(self.options.commit_timeout)
                            {
                                if self.plan.crashed() {
                                    return self.crashed();
                                }
                                return Err(format!("settle after {op:?}: {e}"));
                            }
                        }
                        if *store && !self.plan.crashed() {
                            let (k, state) = self.store_state()?;
                            if k < seq {
                                return Err(format!(
                                    "commit acknowledged at Store durability for {seq} but the store is at {k}"
                                ));
                            }
                            self.check_prefix(k, &state)?;
                        }
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            }
            Op::Crash {
                point: CrashPoint::InsideRecovery,
                skip,
                ..
            } => {
                self.crash_next_open = Some(*skip % 3);
                Ok(())
            }
            Op::Crash { point, skip, torn } => {
                self.plan
                    .arm(*point, usize::from(*skip), usize::from(*torn));
                Ok(())
            }
            Op::Override { id, crash } => {
                let (reset, set) = (self.key(*id), self.key(id.wrapping_add(1)));
                let entries = if reset == set {
                    vec![(set, Some(Offset::new().with("once", i64::from(*id))))]
                } else {
                    vec![
                        (reset, None),
                        (set, Some(Offset::new().with("once", i64::from(*id)))),
                    ]
                };
                self.once = Some(
                    OnceOverride::new(format!("once-{id}"), entries)
                        .map_err(|e| format!("override: {e}"))?,
                );
                self.crash_at_open =
                    crash.map(|(p, skip, torn)| (p, usize::from(skip), usize::from(torn)));
                self.step(&Op::Reopen)
                    .map(|_| ())
                    .map_err(crate::Error::State)
            }
            Op::Reopen => {
                let buffer = self.buffer.take().ok_or("no buffer")?;
                let r = buffer.close();
                drop(buffer);
                match r {
                    Ok(()) if !self.plan.crashed() => {
                        self.store = None;
                        self.end_lifetime_stats();
                        return self.open_lifetime();
                    }
                    Ok(()) => Ok(()),
                    Err(e) => Err(e),
                }
            }
        };
        match result {
            Err(_) | Ok(()) if self.plan.crashed() => self.crashed()?,
            Err(e) => return Err(format!("{op:?} failed without a crash: {e}")),
            Ok(()) => {}
        }
        self.check_violations()
    }

    /// Ends the scenario: a clean close and a last recovery check. Returns what it reached.
    pub fn finish(mut self) -> std::result::Result<Report, String> {
        self.step(&Op::Reopen)?;
        if let Some(b) = self.buffer.take() {
            b.close().map_err(|e| format!("final close: {e}"))?;
        }
        self.end_lifetime_stats();
        self.report.encoded_writes = self.encoded_writes.load(Ordering::Relaxed);
        Ok(self.report)
    }
}

/// Runs `ops` from a fresh start and returns what they reached, or the first invariant broken.
pub fn run(
    ops: &[Op],
    factory: &mut dyn StoreFactory,
    options: ScenarioOptions,
) -> std::result::Result<Report, String> {
    let mut s = Scenario::start(factory, options)?;
    for (i, op) in ops.iter().enumerate() {
        s.step(op).map_err(|e| format!("step {i} ({op:?}): {e}"))?;
    }
    s.finish()
}

/// A factory for the memory store: every lifetime starts empty, as a real process would.
#[derive(Debug, Default)]
pub struct MemoryFactory;

impl StoreFactory for MemoryFactory {
    fn open(&mut self, fault: Arc<dyn ApplyFault>) -> Result<Arc<dyn OffsetStore>> {
        Ok(Arc::new(crate::store::MemoryStore::new().with_fault(fault)))
    }
}
