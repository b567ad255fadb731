//! Kafka Connect's offsets topic as a store: [`KafkaStore`] (feature `kafka`).
//!
//! Opened by URL, `kafka://host:port[,host:port]/topic?partitions=25&replication=3&<librdkafka
//! property>=...`, or by [`KafkaStoreBuilder`]. Every parameter that is not ours (see
//! [`KafkaStoreBuilder::from_url`]) is a librdkafka property and reaches all clients, security
//! settings included; secret values never appear in `Debug` output, logs or errors. With
//! `fallback.topic=<worker topic>` the URL names a connector's own topic in front of the worker's
//! ([`KafkaPairStore`], opened by [`open`](crate::store::open)).
//!
//! ## Records: exactly Connect's
//! * key = `["connector",{partition}]` ([`OffsetKey::connect_key`]), value = the offset object
//!   ([`json::encode_value`](crate::codec::json::encode_value)), a reset = a tombstone (null value);
//! * the partition is the Java producer's, `murmur2(key) % partitions`: it is computed here
//!   ([`murmur2::partition_for`]) and given explicitly with every record, and the producer is also
//!   configured with `partitioner=murmur2_random`, so a record lands where Connect would put it
//!   whatever librdkafka's default is;
//! * a partition that already has a live record is written under that record's exact key bytes,
//!   in its topic partition (every live one, when several spellings of it are live: another member
//!   order, a JDK 17 worker's digits), never tombstoning them, so the connector that owns the record
//!   finds the new offset; a reset tombstones every live spelling. A partition with no live record
//!   is written in the caller's member order, spelled as JDK 19+ does. Every record carries an
//!   explicit timestamp, the time of the write;
//! * of several live spellings, `get` and `partitions` answer with the newest record: greatest
//!   record timestamp, then topic partition, then offset (the rule and why in the `state` module).
//!
//! ## `applied_seq`: record headers plus a marker per writer
//! Every record of a sequenced batch written in a transaction carries the headers
//! `connect-offsets-writer` and `connect-offsets-seq` (in `write.mode=idempotent`, none: below),
//! and the batch also writes one **marker record** of its own:
//! key `{"connect-offsets-writer":"<writer>"}`, value `{"seq":N}`, on the partition murmur2 gives
//! that key (in `write.mode=idempotent`, a batch whose records share one partition puts it there).
//! On load, `applied_seq(writer)` is the maximum over the markers; the headers are read too once
//! a marker was deleted (below).
//!
//! Why the headers alone would not do: compaction keeps only the latest record per key. A header can
//! only make `applied_seq` *too low*, never too high (each header names a batch that committed, since
//! the reader sees committed records only), but it can be too low: when every record of a writer's
//! last batch is later overwritten by another writer (a Connect worker, an operator's reset), or when
//! that batch only reset keys and its tombstones are removed after `delete.retention.ms`, no header
//! of that batch survives. A too-low `applied_seq` would make recovery replay an old batch from the
//! write-ahead log over newer values. The marker closes that gap: nobody else writes its key, it
//! is never a tombstone, and a later marker of the same writer has a higher seq, so compaction keeps
//! the marker of the writer's latest batch (in each partition that holds one: the maximum is it). It is written in the same transaction as the
//! batch, so it is visible exactly when the batch is. The headers stay as per-record provenance
//! (which batch wrote this record) and as a second witness for a marker someone deleted: a load
//! that meets a marker's tombstone reads the topic again with every record's headers (and keeps
//! reading them). Parsing them on every load was a quarter of a cold load's CPU, for a case
//! only a hand-written tombstone makes; once compaction has removed that tombstone too
//! (`delete.retention.ms` after it), nothing tells the deletion apart and the headers are not read.
//!
//! Kafka Connect tolerates the marker: its reader stores every record's raw bytes and only decodes keys
//! to track a connector's partitions (`OffsetUtils.processPartitionKey`), which logs "Ignoring offset
//! partition key with an unexpected format. Expected type: java.util.List, actual type: …" for a JSON
//! object key and skips it. Its lookups are by exact key bytes, which never match a marker. One such
//! WARN line per surviving marker appears when a worker reads the topic. (Checked against a Kafka
//! Connect 4.4.0 distributed worker: with markers in its offsets topic it starts, runs
//! `FileStreamSourceConnector` from the offset we wrote, returns it from
//! `GET /connectors/{name}/offsets`, and its `DELETE` reset reads back here as a reset.)
//!
//! ## Atomic batches: one transaction per batch
//! Each writer (the `writer` of a [`Batch`]) gets its own transactional producer, `transactional.id`
//! = `<transactional.id.prefix><writer>` (default prefix `connect-offsets-<topic>-`). A batch is
//! encoded and checked entirely (each record, headers included, against the smaller of the
//! producer's `message.max.bytes` and the topic's `max.message.bytes`, which also caps the
//! producer's `batch.size`) *before* the transaction opens; a commit buffer asks the same at each
//! offer ([`CommitHooks::admit`]), so it never logs what could not be written;
//! then its records and the marker are produced in one transaction, which commits or aborts as a
//! whole. The reader uses `isolation.level=read_committed`, so an aborted batch is never loaded.
//! Unsequenced batches (`seq == 0`, from [`OffsetStoreExt`](crate::OffsetStoreExt)) use one more
//! transactional producer whose id is unique to the store handle, so two tools writing at once do not
//! fence each other; they write no marker and no headers. A handle opened with `exclusive.id=<name>`
//! ([`KafkaStoreBuilder::exclusive`]) writes them with `transactional.id` `<prefix>~<name>` instead,
//! initialized before the topic is read: of two handles with one name, the older one's next write
//! is fenced. This is how `--once` applies an override once however many processes race
//! ([`crate::once`]).
//!
//! The first batch of a writer initializes its producer: from then on any older producer with the same
//! `transactional.id` (a zombie: the previous process of that writer, still alive somewhere) is
//! **fenced**, and its open transaction is settled. The store then re-reads the topic before deciding
//! whether the batch is already applied. The zombie's next `apply` fails with [`Error::Fenced`], which
//! is fatal. [`KafkaStoreBuilder::claim_writer`] (URL `writer=`) does the same at open, before the
//! topic is read, which a process running a commit buffer should use
//! ([`open_for_writer`](crate::store::open_for_writer) adds it to a URL).
//!
//! A commit whose outcome is unknown (the broker did not answer within the timeout) gives the producer
//! up: the next batch of that writer makes a new one, whose initialization settles the transaction, and
//! re-reads the topic, so the batch is neither lost nor applied twice.
//!
//! ## Exactly-once source tasks
//! A worker that produces its own records to Kafka commits them with its offsets in one
//! transaction through [`KafkaStore::task_producer`] (URL `exactly.once.group` with
//! `exactly.once.task`, or `exactly.once.id`): see [`task`]. The offsets it writes are unsequenced,
//! Connect's records exactly; a newer instance of the task fences the older one.
//!
//! ## `write.mode=idempotent`: no transactions
//! With [`WriteMode::Idempotent`] one idempotent `acks=all` producer per writer writes a batch's
//! records, waits until every one is acknowledged, then writes the marker and waits for it
//! (`idempotent.rs`); a batch whose records share one partition sends its marker into it right
//! behind them and waits once, since the producer appends in order and without gaps. Its records
//! carry no headers, Connect's records exactly: a seq header would count the batch as applied when
//! only part of it is in, and a writer header alone tells our reader nothing while it cost a third
//! of the throughput at 10,000 offsets a batch (the broker validates every record of a compacted
//! topic). So `applied_seq` names only batches wholly in the topic, and a batch a crash cut short
//! is replayed whole by the commit buffer's recovery. The price: until then every reader may see
//! part of that batch ([`Capabilities::atomic`] is false), and no `transactional.id` fences an
//! older process of the same writer.
//!
//! **What a Connect worker without exactly-once sees.** Such a worker reads the topic with
//! `read_uncommitted`: it sees the records of an *aborted* batch as if they were committed (Kafka has
//! no way to hide them from it), until the same keys are written again. Aborts happen only when a
//! write fails mid-batch (a broker lost, a timeout, the process fenced); encoding and validating the
//! whole batch before the transaction opens keeps invalid data from ever causing one. Workers with
//! `exactly.once.source.support=enabled` read with `read_committed` and never see them.
//!
//! ## Loading and lookups
//! On open the store assigns every partition, reads from the beginning to the end (the last stable
//! offset, as a `read_committed` reader sees it), and repeats until the end offsets stop moving. A
//! transaction still open at that point (a writer at work, or one SIGKILLed mid-write) hides every
//! record after it, committed ones too, so the open waits, reading on, until every partition's last
//! stable offset reaches its high watermark (the brokers abort a dead writer's transaction after its
//! `transaction.timeout.ms`), and fails naming the partition after `timeout.ms` plus our producers'
//! transaction timeout: never a state older than what writers were told is written. After
//! that `get`, `partitions` and `namespaces` are answered from memory, never by re-reading the topic
//! (Connect re-reads on every lookup); [`KafkaStore::refresh`] catches up with what other writers
//! wrote since. The store's own commits update memory directly.
//!
//! A record that does not decode (bad JSON, wrong shape, nested values) is skipped, counted
//! ([`KafkaStore::dead_letters`]) and copied to the dead-letter file (`dead.letter.file`, see
//! [`crate::dead_letter`]) with its topic, partition, offset, key and value bytes and the reason. It
//! stays in the topic, so every open meets it again: the file gets it once, the count and a warning
//! come once per open. With no file configured it is only counted and logged as a warning. With
//! `strict=true` the store refuses to open (or refresh) instead, naming the partition and offset.
//!
//! ## Warm start: `snapshot.dir`
//! With `snapshot.dir=/path` (URL) or [`KafkaStoreBuilder::snapshot_dir`], the store keeps a
//! snapshot of what it loaded in `/path/<topic>.snapshot` (the directory is made if missing). It is
//! written when the store is dropped, after a last catch-up that reads the store's own commits
//! back as far as the brokers show them already (atomically: a temporary file, fsync, rename, directory fsync): a pass over the whole
//! state belongs at close, not on the commit path. A process that dies without dropping the
//! store keeps the snapshot of its previous close. It holds the
//! state, the cluster id, the topic's name, topic id and partition count, each partition's log
//! start offset and next offset to read, and when the reader last caught up, under one CRC-32.
//! The next open loads it and reads only what was written since ([`LoadReport::start`] is
//! [`Start::Warm`]). It reads the whole topic instead, with one warning saying why
//! ([`Start::Fallback`]), when the file is corrupt (checksum, length, magic, version), is of
//! another cluster or topic, the topic was re-created (another topic id) or has another number of
//! partitions, the snapshot is older than the topic's `delete.retention.ms` (compaction may have
//! removed tombstones it never saw), a partition now ends below where the snapshot stopped, or
//! its log start offset moved past what the snapshot saw (deleted records), or when the cluster
//! or topic id cannot be had. Records that did not decode were counted at the read that met
//! them; a warm start does not meet them again.
//!
//! ## Bounded waits
//! `timeout.ms` (default 30 s) bounds reaching the brokers and checking the topic at open, each
//! transaction step, and a read-to-end that makes no progress. Unreachable brokers give
//! [`Error::Timeout`] naming the brokers and librdkafka's last error; refused credentials fail at once
//! with an authentication error.

use std::fmt;

use rdkafka::consumer::Consumer as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

mod client;
mod config;
pub mod connect_configs;
mod dead_letters;
#[allow(unsafe_code)]
mod flush;
pub mod group;
#[allow(unsafe_code)]
mod idempotent;
mod load;
pub mod pair;
mod record;
mod snapshot;
mod state;
pub mod task;
mod topic;
#[allow(unsafe_code)]
mod topic_id;
mod write;

pub use config::{
    DEFAULT_PARTITIONS, DEFAULT_REPLICATION, DEFAULT_TIMEOUT, KafkaStoreBuilder, WriteMode,
};
pub use connect_configs::ConnectConfigs;
pub use group::KafkaGroupStore;
pub use pair::{FALLBACK_TOPIC, KafkaPairStore};
pub use record::{MARKER_FIELD, SEQ_HEADER, WRITER_HEADER, marker_key};
pub use snapshot::Fallback;
pub use task::{TaskId, TaskProducer};

use super::url::StoreUrl;
use super::{ApplyFault, Capabilities, CommitHooks, OffsetStore};
use crate::codec::murmur2;
use crate::model::{Batch, OffsetKey};
use crate::{Error, Offset, Result};
use config::Settings;
use dead_letters::DeadLetters;
use idempotent::IdemProducer;
use load::Reader;
use snapshot::{Identity, Snapshot};
use state::State;
use write::{Failure, Producer, Slot, TxnProducer, Writers};

/// What a load or a [`refresh`](KafkaStore::refresh) read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadReport {
    /// Records read from the topic (offsets, resets, markers, skipped records).
    pub records: u64,
    /// Keys with an offset afterwards.
    pub offsets: usize,
    /// How long it took.
    pub elapsed: Duration,
    /// Where the read started.
    pub start: Start,
}

/// Where a load started: from the beginning of the topic or from a snapshot (`snapshot.dir`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Start {
    /// The whole topic was read: no `snapshot.dir`, or no snapshot in it yet.
    Cold,
    /// The snapshot was loaded and only what was written since was read.
    Warm,
    /// A snapshot was there but could not be trusted (why is in the log too): the whole topic
    /// was read.
    Fallback(Fallback),
    /// A [`refresh`](KafkaStore::refresh): what was written since the last read.
    Refresh,
}

/// Where the store keeps its snapshot and what it stamps it with.
struct SnapshotPlace {
    path: std::path::PathBuf,
    /// `None` when the cluster or topic id could not be had: no snapshot is written then.
    identity: Option<Identity>,
    /// The log start offset of each partition when its records were first read.
    start: Vec<i64>,
}

/// Offsets in a Kafka Connect offsets topic (see the [module documentation](self)).
pub struct KafkaStore {
    settings: Settings,
    partitions: i32,
    /// The reader; its lock also orders our commits against catch-ups (see `apply`).
    reader: Mutex<Reader>,
    state: RwLock<State>,
    /// Bumped by every change of `state` (under its write lock, see `state_mut`).
    generation: AtomicU64,
    /// A batch's records encoded while the commit buffer's log wrote it (see `prepare`).
    prepared: Mutex<Option<Prepared>>,
    writers: Writers,
    dead: DeadLetters,
    fault: Option<Arc<dyn ApplyFault>>,
    loaded: LoadReport,
    snapshot: Option<SnapshotPlace>,
    /// The source task this process runs (URL `exactly.once.*`), for `task_producer`.
    task: Option<TaskId>,
}

impl fmt::Debug for KafkaStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaStore")
            .field("topic", &self.settings.topic)
            .field("partitions", &self.partitions)
            .field("settings", &self.settings)
            .field("loaded", &self.loaded)
            .finish()
    }
}

/// A batch's records, encoded from the state of `generation`: what its apply writes while the
/// state is still that one.
struct Prepared {
    batch: Arc<Batch>,
    generation: u64,
    recs: write::Recs,
}

/// How one transactional write ended badly.
enum TxnError {
    /// The fault seam fired; the transaction was aborted (or the producer lost meanwhile). Boxed: a
    /// fault is rare and two errors side by side make every result of `transact` large.
    Fault(Box<(Error, Option<Failure>)>),
    Failure(Failure),
}

impl From<Failure> for TxnError {
    fn from(f: Failure) -> Self {
        TxnError::Failure(f)
    }
}

impl KafkaStore {
    /// A builder for topic `topic` on brokers `bootstrap` (`host:port[,host:port]`).
    pub fn builder(bootstrap: impl Into<String>, topic: impl Into<String>) -> KafkaStoreBuilder {
        KafkaStoreBuilder::new(bootstrap, topic)
    }

    /// Opens the store a `kafka://` URL names.
    pub fn open(url: &str) -> Result<Self> {
        Self::open_url(&StoreUrl::parse(url)?)
    }

    /// Opens the store a parsed `kafka://` URL names.
    pub fn open_url(url: &StoreUrl) -> Result<Self> {
        KafkaStoreBuilder::from_url(url)?.open()
    }

    pub(crate) fn open_with(builder: KafkaStoreBuilder) -> Result<Self> {
        let mut settings = builder.settings()?;
        if let Some(dir) = &settings.snapshot_dir {
            snapshot::prepare_dir(dir)?;
        }
        // Read and index the snapshot while the brokers answer what it is checked against: the
        // topic's metadata and policy, then its identity and offsets.
        let loading = (settings.snapshot_dir.as_ref())
            .map(|dir| snapshot::Loading::start(snapshot::path(dir, &settings.topic)));
        let mut reader = Reader::new(&settings)?;
        let info = topic::ensure_topic(&settings, reader.consumer())?;
        let partitions = info.partitions;
        // A record must fit the topic as well as the producer.
        if let Some(topic_max) = info.max_message_bytes {
            settings.max_message_bytes = settings.max_message_bytes.min(topic_max);
        }
        let writers = Writers::new(&settings, builder.exclusive.as_deref());
        if let Some(writer) = &builder.claim {
            let (slot, id) = writers.slot_of(&settings, writer);
            *write::lock(&slot) = Slot::Ready(Producer::create(&settings, &id)?);
        }
        // Before the topic is read, as a claimed writer: whatever an older handle with this name
        // committed is read below, and its later writes are fenced (see `exclusive`).
        if builder.exclusive.is_some() {
            let (slot, id) = writers.unsequenced();
            *write::lock(&slot) = Slot::Ready(Producer::create(&settings, &id)?);
        }
        // As Connect fences a task's zombies before the task reads its offsets: a SIGKILLed
        // instance's open transaction is aborted now, not waited for below.
        if let Some(task) = &builder.task {
            drop(TxnProducer::create(&settings, task.as_str())?);
        }
        reader.assign(partitions);
        reader.keep_tombstones(info.delete_retention_ms);
        let watermarks = reader.ask_high_watermarks(&settings)?;
        let dead = DeadLetters::new(&settings);
        let t0 = Instant::now();
        let (mut state, start, place) = match (&settings.snapshot_dir, loading) {
            (Some(dir), Some(loading)) => {
                Self::warm_start(&settings, &mut reader, dir, loading, &info)?
            }
            _ => (State::default(), Start::Cold, None),
        };
        let records = reader.catch_up(&mut state, &dead, &settings)?
            + reader.settle_open_transactions(&mut state, &dead, &settings, watermarks)?;
        let loaded = LoadReport {
            records,
            offsets: state.len(),
            elapsed: t0.elapsed(),
            start,
        };
        tracing::info!(
            topic = %settings.topic,
            partitions,
            records,
            offsets = loaded.offsets,
            dead_letters = dead.count(),
            elapsed = ?loaded.elapsed,
            start = ?loaded.start,
            "loaded the offsets topic"
        );
        Ok(KafkaStore {
            settings,
            partitions,
            reader: Mutex::new(reader),
            state: RwLock::new(state),
            generation: AtomicU64::new(0),
            prepared: Mutex::new(None),
            writers,
            dead,
            fault: builder.fault,
            loaded,
            snapshot: place,
            task: builder.task,
        })
    }

    /// The state and reader positions to start from: the snapshot in `dir` (being read by
    /// `loading`) when it checks out against the topic as it is now, else an empty state from the
    /// beginning (saying why).
    fn warm_start(
        settings: &Settings,
        reader: &mut Reader,
        dir: &std::path::Path,
        loading: snapshot::Loading,
        info: &topic::TopicInfo,
    ) -> Result<(State, Start, Option<SnapshotPlace>)> {
        let path = snapshot::path(dir, &settings.topic);
        let client = reader.consumer().client();
        let identity = match (
            client.fetch_cluster_id(settings.timeout),
            topic_id::topic_id(client, &settings.topic, settings.timeout),
        ) {
            (Some(cluster_id), Ok(topic_id)) => Some(Identity {
                cluster_id,
                topic: settings.topic.clone(),
                topic_id,
                partitions: info.partitions,
            }),
            (cluster, id) => {
                tracing::warn!(
                    topic = %settings.topic,
                    cluster_id = ?cluster,
                    topic_id = ?id.err(),
                    "cannot identify the topic: no warm start, and no snapshot is kept"
                );
                None
            }
        };
        let start_now = reader.start_offsets(settings)?;
        let cold = |why: Option<(Fallback, String)>| {
            if let Some((reason, detail)) = &why {
                tracing::warn!(
                    topic = %settings.topic,
                    snapshot = %path.display(),
                    ?reason,
                    "{detail}; reading the whole topic instead"
                );
            }
            let start = match why {
                Some((reason, _)) => Start::Fallback(reason),
                None => Start::Cold,
            };
            let place = SnapshotPlace {
                path: path.clone(),
                identity: identity.clone(),
                start: start_now.clone(),
            };
            Ok((State::default(), start, Some(place)))
        };
        let decoded = match loading.join() {
            Ok(d) => d,
            // Only a cache: the topic is read whole instead.
            Err(e) => return cold(Some((Fallback::Unreadable, e.to_string()))),
        };
        let Some(decoded) = decoded else {
            tracing::info!(topic = %settings.topic, snapshot = %path.display(), "no snapshot yet: reading the whole topic");
            return cold(None);
        };
        let snap: Snapshot = match decoded {
            Ok(s) => s,
            Err(e) => {
                return cold(Some((
                    Fallback::Corrupt,
                    format!("the snapshot is corrupt: {e}"),
                )));
            }
        };
        let end_now = reader.end_offsets(settings)?;
        let now = snapshot::Now {
            identity: identity.as_ref(),
            delete_retention_ms: info.delete_retention_ms,
            now_ms: load::now_ms(),
            start: &start_now,
            end: &end_now,
        };
        if let Err(why) = snapshot::check(&snap, &now) {
            return cold(Some(why));
        }
        reader.resume(&snap.next, snap.read_at_ms);
        let place = SnapshotPlace {
            path,
            identity,
            start: snap.start,
        };
        Ok((snap.state, Start::Warm, Some(place)))
    }

    /// Catches up, then writes the snapshot. At drop: it costs a pass over the whole state, never
    /// on a hot path. The catch-up reads our own commits back, so the snapshot's positions are past
    /// them and the next open reads only what others wrote after this one closed.
    fn write_snapshot(&self) {
        let Some(place) = &self.snapshot else { return };
        let Some(identity) = &place.identity else {
            return;
        };
        if let Err(e) = self.refresh() {
            // Still right: our unread commits are in the state and are read back at the next open.
            tracing::warn!(topic = %self.settings.topic, error = %e, "cannot catch up before writing the snapshot; it keeps the positions read so far");
        }
        let (Ok(reader), Ok(state)) = (self.reader.lock(), self.state.read()) else {
            return;
        };
        let bytes = snapshot::encode(
            identity,
            reader.read_at_ms(),
            &place.start,
            reader.positions(),
            &state,
        );
        match snapshot::write(&place.path, &bytes) {
            Ok(()) => {
                tracing::debug!(snapshot = %place.path.display(), bytes = bytes.len(), "snapshot written")
            }
            Err(e) => {
                tracing::warn!(snapshot = %place.path.display(), error = %e, "cannot write the snapshot; the next open reads the whole topic")
            }
        }
    }

    /// The same store with a fault seam inside `apply` (tests).
    pub fn with_fault(mut self, fault: Arc<dyn ApplyFault>) -> Self {
        self.fault = Some(fault);
        self
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.settings.topic
    }

    /// The topic's number of partitions.
    pub fn partition_count(&self) -> i32 {
        self.partitions
    }

    /// The topic partition Java's murmur2 places `key` on, spelled as we spell it: where Connect
    /// writes it, and where our record of a key with no live record goes (a key with live records
    /// is written where those are).
    pub fn partition_of(&self, key: &OffsetKey) -> i32 {
        murmur2::partition_for(&key.connect_key(), self.partitions as u32) as i32
    }

    /// The source task configured at open (URL `exactly.once.id`, or `exactly.once.group` with
    /// `exactly.once.task`; [`KafkaStoreBuilder::task`]).
    pub fn task_id(&self) -> Option<&TaskId> {
        self.task.as_ref()
    }

    /// The configured task's transactional producer ([`task_id`](Self::task_id)): records and
    /// offsets in one transaction. Creating it fences any older instance of the task and re-reads
    /// the topic, so read the offsets to resume from after this returns.
    pub fn task_producer(&self) -> Result<TaskProducer<'_>> {
        let id = self.task.clone().ok_or_else(|| {
            Error::Config(format!(
                "kafka store `{}` has no source task: give `exactly.once.id=<transactional id>`, \
                 or `exactly.once.group=<group.id>` with `exactly.once.task=<connector>/<task>`",
                self.settings.topic
            ))
        })?;
        TaskProducer::create(self, id)
    }

    /// The transactional producer of task `id` (a worker running several tasks over one store).
    pub fn task_producer_for(&self, id: TaskId) -> Result<TaskProducer<'_>> {
        TaskProducer::create(self, id)
    }

    /// What the load at open read.
    pub fn loaded(&self) -> LoadReport {
        self.loaded
    }

    /// Records skipped because they do not decode, since the store opened.
    pub fn dead_letters(&self) -> u64 {
        self.dead.count()
    }

    /// Reads what was written to the topic since the last read (by other writers: a Connect worker,
    /// another store) into memory.
    pub fn refresh(&self) -> Result<LoadReport> {
        let mut reader = self.reader()?;
        if self.state.is_poisoned() {
            return Err(Error::store("kafka", "state lock poisoned by a panic"));
        }
        let mut state = self.state_mut();
        let t0 = Instant::now();
        let records = reader.catch_up(&mut state, &self.dead, &self.settings)?;
        Ok(LoadReport {
            records,
            offsets: state.len(),
            elapsed: t0.elapsed(),
            start: Start::Refresh,
        })
    }

    fn reader(&self) -> Result<MutexGuard<'_, Reader>> {
        self.reader
            .lock()
            .map_err(|_| Error::store("kafka", "reader lock poisoned by a panic"))
    }

    /// The state, to change: whatever was encoded from it before is stale from here on.
    fn state_mut(&self) -> RwLockWriteGuard<'_, State> {
        let state = self.state.write().unwrap_or_else(|p| p.into_inner());
        // Under the write lock: a reader holding the read lock sees the count of the state it reads.
        self.generation.fetch_add(1, Ordering::Relaxed);
        state
    }

    /// The records of `batch` encoded by `prepare`, if it was this very batch and `state` (read
    /// locked) is still the one they were encoded from.
    fn take_prepared(&self, batch: &Batch, _state: &State) -> Option<write::Recs> {
        let prepared = self.prepared.lock().ok()?.take()?;
        (std::ptr::eq(&*prepared.batch, batch)
            && prepared.generation == self.generation.load(Ordering::Relaxed))
        .then_some(prepared.recs)
    }

    fn read_state(&self) -> Result<RwLockReadGuard<'_, State>> {
        self.state
            .read()
            .map_err(|_| Error::store("kafka", "state lock poisoned by a panic"))
    }

    fn fenced(&self, writer: &str, id: &str, reason: &str) -> Error {
        Error::Fenced(format!(
            "writer `{writer}` of topic `{}`: another producer with transactional.id `{id}` took \
             over ({reason}); this one must stop",
            self.settings.topic
        ))
    }

    /// Produces `recs` in one transaction and, once committed, applies them to memory.
    fn transact(
        &self,
        producer: &TxnProducer,
        batch: &Batch,
        recs: write::Recs,
    ) -> std::result::Result<(), TxnError> {
        let settings = &self.settings;
        let headers = record::headers(batch);
        let deadline = Instant::now() + settings.timeout;
        producer.begin(settings)?;
        let fault = |r: Result<()>| -> std::result::Result<(), TxnError> {
            match r {
                Ok(()) => Ok(()),
                Err(e) => Err(TxnError::Fault(Box::new((
                    e,
                    producer.abort(settings).err(),
                )))),
            }
        };
        let mut entry = None;
        for rec in recs.iter() {
            if let (Some(f), Some(i)) = (&self.fault, rec.entry)
                && entry != Some(i)
            {
                entry = Some(i);
                fault(f.before_entry(batch, i))?;
            }
            producer.send(&settings.topic, rec, headers.as_ref(), deadline, settings)?;
        }
        if let Some(f) = &self.fault {
            fault(f.before_commit(batch))?;
        }
        // Holding the reader while committing and updating memory keeps a concurrent refresh from
        // reading our records and then newer ones of another writer before we write ours to memory.
        let _reader = self
            .reader()
            .map_err(|e| TxnError::Fault(Box::new((e, producer.abort(settings).err()))))?;
        producer.commit(settings)?;
        let mut state = self.state_mut();
        write::apply_to_state(&mut state, batch, &recs);
        Ok(())
    }
}

impl KafkaStore {
    /// Produces the offset records of `recs`, waits until every one is acknowledged, then produces
    /// the marker and waits for it; then applies them to memory. The reader is held throughout, so
    /// a concurrent refresh never reads our records before memory has them.
    ///
    /// A batch whose records all go to one partition puts its marker in that partition, right
    /// behind them, and waits once: the idempotent producer appends them in order and without gaps
    /// (`enable.gapless.guarantee`), so the marker is in only if all of them are.
    fn produce_acknowledged(
        &self,
        producer: &IdemProducer,
        batch: &Batch,
        mut recs: write::Recs,
    ) -> std::result::Result<(), TxnError> {
        let settings = &self.settings;
        let one_partition = recs.one_partition();
        if let Some(p) = one_partition {
            recs.place_marker(p);
        }
        let deadline = Instant::now() + settings.timeout;
        let failures = producer.failures();
        let _reader = self
            .reader()
            .map_err(|e| TxnError::Fault(Box::new((e, None))))?;
        let mut entry = None;
        for rec in recs.offsets() {
            if let (Some(f), Some(i)) = (&self.fault, rec.entry)
                && entry != Some(i)
            {
                entry = Some(i);
                if let Err(e) = f.before_entry(batch, i) {
                    // What was sent lands anyway: the worst a crash here leaves behind.
                    let _ = producer.wait_acknowledged(failures, deadline, settings);
                    return Err(TxnError::Fault(Box::new((e, None))));
                }
            }
            producer.send(rec, deadline)?;
        }
        if one_partition.is_none() {
            producer.wait_acknowledged(failures, deadline, settings)?;
        }
        if let Some(f) = &self.fault
            && let Err(e) = f.before_commit(batch)
        {
            let _ = producer.wait_acknowledged(failures, deadline, settings);
            return Err(TxnError::Fault(Box::new((e, None))));
        }
        if let Some(marker) = recs.marker() {
            producer.send(marker, deadline)?;
        }
        producer.wait_acknowledged(failures, deadline, settings)?;
        let mut state = self.state_mut();
        write::apply_to_state(&mut state, batch, &recs);
        Ok(())
    }
}

impl Drop for KafkaStore {
    fn drop(&mut self) {
        self.write_snapshot();
    }
}

impl OffsetStore for KafkaStore {
    fn kind(&self) -> &'static str {
        "kafka"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::DEFAULT
            .with_durable(true)
            .with_atomic(self.settings.write_mode == WriteMode::Transaction)
            // Each record's timestamp, which the loader keeps for the current record of every key
            // anyway (and a warm start's snapshot with it): ours carry the time of the write.
            .with_change_times(true)
    }

    fn apply(&self, batch: &Batch) -> Result<()> {
        if self.settings.read_only {
            return Err(Error::State(format!(
                "the offsets topic `{}` was opened to read only",
                self.settings.topic
            )));
        }
        let (slot, id) = self.writers.slot_for(&self.settings, batch);
        let mut guard = write::lock(&slot);
        if let Slot::Fenced(reason) = &*guard {
            return Err(self.fenced(&batch.writer, &id, reason));
        }
        if matches!(*guard, Slot::Empty) {
            let producer = Producer::create(&self.settings, &id)?;
            if let Producer::Transaction(_) = producer {
                // Whatever an older owner of this transactional.id committed is settled now: read
                // it before deciding whether this batch is already in the topic. (If that fails,
                // the producer is dropped and the next batch starts over.)
                self.refresh()?;
            }
            *guard = Slot::Ready(producer);
        }
        let Slot::Ready(producer) = &*guard else {
            return Err(Error::store(
                "kafka",
                format!("producer `{id}` is not ready"),
            ));
        };
        let recs = {
            let state = self.read_state()?;
            if batch.seq != 0 && batch.seq <= state.applied_seq(&batch.writer) {
                return Ok(());
            }
            match self.take_prepared(batch, &state) {
                Some(recs) => recs,
                None => write::encode(batch, &state, self.partitions, &self.settings)?,
            }
        };
        let began = Instant::now();
        let written = match producer {
            Producer::Transaction(p) => self.transact(p, batch, recs),
            Producer::Idempotent(p) => self.produce_acknowledged(p, batch, recs),
        };
        let failure = match written {
            Ok(()) => return Ok(()),
            Err(TxnError::Fault(fault)) => {
                let (e, failure) = *fault;
                if let Some(f) = failure {
                    let _ = self.settle(&mut guard, batch, &id, f);
                }
                return Err(e);
            }
            Err(TxnError::Failure(Failure::Fenced(reason)))
                if began.elapsed().as_millis()
                    >= u128::from(self.settings.transaction_timeout_ms()) =>
            {
                // The coordinator aborts a transaction older than its timeout and bumps the epoch,
                // which the producer cannot tell from a newer producer's fence.
                Failure::Fenced(format!(
                    "{reason}; the transaction ran {} ms, past transaction.timeout.ms = {}, so the \
                     coordinator aborted it (nothing of the batch was written) and this producer \
                     may only have outlived its transaction: a process paused that long is a \
                     zombie to the brokers, so it stops; reopen the store to go on",
                    began.elapsed().as_millis(),
                    self.settings.transaction_timeout_ms()
                ))
            }
            Err(TxnError::Failure(f)) => f,
        };
        Err(self.settle(&mut guard, batch, &id, failure))
    }

    fn applied_seq(&self, writer: &str) -> Result<u64> {
        Ok(self.read_state()?.applied_seq(writer))
    }

    fn writers(&self) -> Result<Vec<(String, u64)>> {
        Ok(self.read_state()?.writers())
    }

    fn get(&self, key: &OffsetKey) -> Result<Option<Offset>> {
        Ok(self.read_state()?.get(key))
    }

    fn get_many(&self, keys: &[OffsetKey]) -> Result<Vec<Option<Offset>>> {
        let state = self.read_state()?;
        Ok(keys.iter().map(|k| state.get(k)).collect())
    }

    fn partitions(&self, namespace: &str) -> Result<Vec<(OffsetKey, Offset)>> {
        Ok(self.read_state()?.partitions(namespace))
    }

    fn namespaces(&self) -> Result<Vec<String>> {
        Ok(self.read_state()?.namespaces())
    }

    /// A committed transaction is already as durable as the topic makes it (`acks=all`, the topic's
    /// replication and `min.insync.replicas`): nothing to do.
    fn persist(&self) -> Result<()> {
        Ok(())
    }

    fn change_times(&self, keys: &[OffsetKey]) -> Result<Vec<Option<u64>>> {
        let state = self.read_state()?;
        Ok(keys.iter().map(|k| state.written_ms(k)).collect())
    }

    fn hooks(&self) -> Option<&dyn CommitHooks> {
        Some(self)
    }
}

impl CommitHooks for KafkaStore {
    fn admit(&self, writer: &str, key: &OffsetKey, offset: Option<&Offset>) -> Result<()> {
        write::admit(writer, key, offset, &self.settings)
    }

    /// Encodes the batch's records while the log writes it: the encoding reads the state (the
    /// live forms of each key), so `apply` uses it only if no change came in between.
    fn prepare(&self, batch: &Arc<Batch>) -> bool {
        let Ok(state) = self.read_state() else {
            return true;
        };
        let generation = self.generation.load(Ordering::Relaxed);
        if batch.seq != 0 && batch.seq <= state.applied_seq(&batch.writer) {
            return true;
        }
        // A batch the brokers would refuse is refused again, with its error, at the apply.
        let recs = write::encode(batch, &state, self.partitions, &self.settings).ok();
        drop(state);
        if let (Some(recs), Ok(mut prepared)) = (recs, self.prepared.lock()) {
            *prepared = Some(Prepared {
                batch: Arc::clone(batch),
                generation,
                recs,
            });
        }
        true
    }
}

impl KafkaStore {
    /// Records what a failure means for the writer's slot and turns it into the error to return.
    fn settle(
        &self,
        slot: &mut MutexGuard<'_, Slot>,
        batch: &Batch,
        id: &str,
        failure: Failure,
    ) -> Error {
        match failure {
            Failure::Fenced(reason) => {
                let e = self.fenced(&batch.writer, id, &reason);
                tracing::error!(writer = %batch.writer, transactional_id = id, "{e}");
                **slot = Slot::Fenced(reason);
                e
            }
            Failure::Lost(e) => {
                tracing::warn!(writer = %batch.writer, seq = batch.seq, error = %e, "producer given up; the next batch makes a new one");
                **slot = Slot::Empty;
                e
            }
            Failure::Aborted(e) => e,
        }
    }
}
