//! [`CommitBufferConfig`]: where the log lives, when commits count as done, how often the buffer
//! commits by itself, how much may wait, and what recovery does with corrupt bytes; settable field by
//! field or by Kafka Connect's property names. The `testkit` feature adds setters for the seams the
//! crash tests use (the log's file system, a crash hook, an observer of sealed batches).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::{Durability, WhenFull};
use crate::connector_offsets::OffsetsExport;
use crate::crash::CrashHook;
use crate::dead_letter::DeadLetterFile;
use crate::fs::{RealFs, WalFs};
use crate::model::Batch;
use crate::once::{OnceOverride, validate_id};
use crate::policy::{ResetPolicies, ResetPolicy};
use crate::wal::RecoveryPolicy;
use crate::{Error, Offset, OffsetKey, Result};

/// Observes every sealed batch before it is written (tests build their reference model from it).
#[cfg(feature = "testkit")]
pub type SealObserver = Arc<dyn Fn(&Batch) + Send + Sync>;
#[cfg(not(feature = "testkit"))]
pub(crate) type SealObserver = Arc<dyn Fn(&Batch) + Send + Sync>;

/// Offsets to set (`Some`) or reset (`None`).
type OnceEntries = Vec<(OffsetKey, Option<Offset>)>;

/// Configuration of a [`CommitBuffer`](super::CommitBuffer).
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
    /// Distinct keys pending before `offer` applies back-pressure (default 1,000,000). Offers
    /// racing on many threads may each pass the check: it can be exceeded by up to one key per offering thread.
    pub max_pending: usize,
    /// Block or refuse when full.
    pub when_full: WhenFull,
    /// Start a new log segment after this many bytes (default 16 MiB).
    pub segment_bytes: u64,
    /// Batches logged but not yet applied before the log thread waits (default 1,024; it also waits
    /// while their entries reach `max_pending`). Many small batches queue behind a store with a high
    /// cost per write (a Kafka transaction), which then takes them in one write.
    pub max_in_flight: usize,
    /// What recovery does with corrupt log bytes.
    pub recovery: RecoveryPolicy,
    /// What the worker's lookups do with offsets they cannot use, per connector
    /// ([`ResetPolicies::load`]; `skip` writes to `dead_letter`); `offsets.reset.policy` sets it
    /// and, from its default, `recovery`.
    pub reset_policies: ResetPolicies,
    /// Where recovery puts bytes it skips (default `<wal_dir>/dead-letter.jsonl`).
    pub dead_letter: Option<PathBuf>,
    /// Offsets applied once at open, after recovery and before any new commit, as one batch of
    /// this writer that also records the override's id (see [`crate::once`]); an open that finds
    /// the id recorded changes nothing. Its commit waits at `Store` durability up to
    /// `flush_timeout`; an open that times out fails, and the override, logged by then, is
    /// applied by the next open's recovery.
    pub once: Option<OnceOverride>,
    /// `offsets.expire.after`: reset every partition not written for this long (see
    /// [`crate::expire`]), checked every `expire_interval` by a thread of the buffer; the resets
    /// go through the log like a commit, and a partition pending or in flight is never reset.
    /// `None` (the default) expires nothing.
    pub expire_after: Option<Duration>,
    /// `offsets.expire.interval`: how often to look for stale partitions (default 1 h).
    pub expire_interval: Duration,
    /// `offsets.stall.after`: turns on the stall and gap alarms ([`crate::alarms`]): a connector
    /// that commits while none of its offsets moved for this long is stalled, and every commit
    /// that moves an offset backwards is counted. Costs one read of the batch's keys from the
    /// store before each store write. `None` (the default): off.
    pub stall_after: Option<Duration>,
    /// `offsets.once.id` and `offsets.once.file` as set, until both are there to make `once`.
    pub(super) once_id: Option<String>,
    pub(super) once_entries: Option<OnceEntries>,
    // The test kit's seams: set through the `testkit` feature's setters below.
    pub(super) fs: Arc<dyn WalFs>,
    pub(super) crash_hook: Option<Arc<dyn CrashHook>>,
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
            .field("reset_policies", &self.reset_policies)
            .field("once", &self.once.as_ref().map(|o| o.id()))
            .field("expire_after", &self.expire_after)
            .field("expire_interval", &self.expire_interval)
            .field("stall_after", &self.stall_after)
            .finish_non_exhaustive()
    }
}

impl CommitBufferConfig {
    /// Defaults (Kafka Connect's where it has one), logging to `wal_dir`.
    pub fn new(wal_dir: impl Into<PathBuf>) -> Self {
        let wal_dir = wal_dir.into();
        let dead_letter = wal_dir.join("dead-letter.jsonl");
        CommitBufferConfig {
            writer: "connect-offsets".into(),
            reset_policies: ResetPolicies::default()
                .with_dead_letter(DeadLetterFile::new(&dead_letter)),
            dead_letter: Some(dead_letter),
            wal_dir,
            durability: Durability::Local,
            flush_interval: Some(Duration::from_millis(60_000)),
            flush_timeout: Duration::from_millis(5_000),
            max_pending: 1_000_000,
            when_full: WhenFull::Block,
            segment_bytes: 16 << 20,
            max_in_flight: 1024,
            recovery: RecoveryPolicy::Fail,
            once: None,
            expire_after: None,
            expire_interval: Duration::from_secs(3600),
            stall_after: None,
            once_id: None,
            once_entries: None,
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
    /// `offsets.recovery` = fail|skip, `offsets.reset.policy` (a [`ResetPolicies`] spec such as
    /// `fail,orders=skip`; its default is also the recovery policy, so only fail or skip),
    /// `offsets.dead.letter.file`, and an override that applies once:
    /// `offsets.once.id` with `offsets.once.file`, a JSON document in `export`'s format whose null
    /// offsets are resets, read when set; `offsets.expire.after`, `offsets.expire.interval` and
    /// `offsets.stall.after`, durations such as `30d` or `1h`).
    pub fn set(&mut self, name: &str, value: &str) -> Result<&mut Self> {
        let bad = |why: &str| Error::Config {
            name: name.to_string(),
            value: value.to_string(),
            reason: why.to_string(),
        };
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
            "offsets.reset.policy" => {
                let policies = ResetPolicies::parse(value).map_err(|e| bad(&e.to_string()))?;
                self.recovery = match policies.default_policy() {
                    ResetPolicy::Fail => RecoveryPolicy::Fail,
                    ResetPolicy::Skip => RecoveryPolicy::Skip,
                    p => {
                        return Err(bad(&format!(
                            "the default policy is also what recovery does with corrupt log \
                             bytes, which belong to no partition: it must be fail or skip, not \
                             {p} (name connectors for {p}, as in `fail,orders={p}`)"
                        )));
                    }
                };
                self.reset_policies = match &self.dead_letter {
                    Some(path) => policies.with_dead_letter(DeadLetterFile::new(path)),
                    None => policies,
                };
            }
            "offsets.dead.letter.file" => {
                self.dead_letter = Some(PathBuf::from(value));
                self.reset_policies = std::mem::take(&mut self.reset_policies)
                    .with_dead_letter(DeadLetterFile::new(value));
            }
            "offsets.once.id" => {
                validate_id(value).map_err(|e| bad(&e.to_string()))?;
                self.once_id = Some(value.to_string());
                self.assemble_once()?;
            }
            "offsets.once.file" => {
                let bytes =
                    std::fs::read(value).map_err(|e| bad(&format!("cannot read the file: {e}")))?;
                let doc = OffsetsExport::parse(&bytes, None).map_err(|e| {
                    bad(&format!(
                        "expected export's {{\"connectors\":{{...}}}} document: {e}"
                    ))
                })?;
                let entries = doc
                    .connectors
                    .into_iter()
                    .flat_map(|(c, o)| o.into_entries(&c))
                    .collect();
                self.once_entries = Some(entries);
                self.assemble_once()?;
            }
            "offsets.expire.after" | "offsets.expire.interval" | "offsets.stall.after" => {
                let d = crate::time::parse_duration(value).map_err(|e| bad(&e))?;
                if d.is_zero() {
                    return Err(bad("must be longer than 0"));
                }
                match name {
                    "offsets.expire.after" => self.expire_after = Some(d),
                    "offsets.stall.after" => self.stall_after = Some(d),
                    _ => self.expire_interval = d,
                }
            }
            _ => return Err(bad("unknown property")),
        }
        Ok(self)
    }

    /// Makes `once` from `offsets.once.id` and `offsets.once.file` once both are set.
    fn assemble_once(&mut self) -> Result<()> {
        if let (Some(id), Some(entries)) = (&self.once_id, &self.once_entries) {
            self.once = Some(OnceOverride::new(id.clone(), entries.clone())?);
        }
        Ok(())
    }

    /// Refuses a half-given override: one of `offsets.once.id` and `offsets.once.file` without
    /// the other.
    pub(super) fn check_once(&self) -> Result<()> {
        match (&self.once_id, &self.once_entries, &self.once) {
            (Some(id), None, None) => Err(Error::Settings(format!(
                "property `offsets.once.id` = `{id}` needs `offsets.once.file` (the offsets to apply)"
            ))),
            (None, Some(_), None) => Err(Error::Settings(
                "property `offsets.once.file` needs `offsets.once.id` (what makes it apply once)"
                    .into(),
            )),
            _ => Ok(()),
        }
    }
}
