//! The offsets-topic store: [`KafkaStore`], its open, load, commit and refresh, and its parts:
//! `admin` (the topic made and checked), `load` (reading the topic), `record` (its records and
//! headers), `state` (the topic's content in memory), `write` and `idempotent` (the two writers),
//! `snapshot` (warm starts), `dead_letters` (records that do not decode). How it works is in
//! `docs/design.md`, section "The Kafka offsets-topic store".

use std::fmt;

use rdkafka::consumer::Consumer as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

mod admin;
mod dead_letters;
mod idempotent;
mod load;
pub(super) mod record;
mod snapshot;
mod state;
pub(super) mod write;

pub use record::{MARKER_FIELD, SEQ_HEADER, WRITER_HEADER, marker_key};
pub use snapshot::Fallback;

use super::config::{KafkaStoreBuilder, Settings, TaskId, WriteMode};
use super::ffi;
use super::producer::Failure;
use crate::codec::murmur2;
use crate::model::{Batch, OffsetKey};
use crate::store::url::StoreUrl;
use crate::store::{ApplyFault, Capabilities, CommitHooks, OffsetStore};
use crate::{Error, Offset, Result};
use dead_letters::DeadLetters;
use idempotent::IdemProducer;
use load::Reader;
use snapshot::{Identity, Snapshot};
use state::State;
use write::{Producer, Slot, TxnProducer, Writers};

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

/// Offsets in a Kafka Connect offsets topic (see the [module documentation](super)).
pub struct KafkaStore {
    pub(super) settings: Settings,
    pub(super) partitions: i32,
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
    pub(super) task: Option<TaskId>,
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
        let info = admin::ensure_topic(&settings, reader.consumer())?;
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
        info: &admin::TopicInfo,
    ) -> Result<(State, Start, Option<SnapshotPlace>)> {
        let path = snapshot::path(dir, &settings.topic);
        let client = reader.consumer().client();
        let identity = match (
            client.fetch_cluster_id(settings.timeout),
            ffi::topic_id(client, &settings.topic, settings.timeout),
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

    /// Tombstones `batch`'s resets in this topic, a pair's worker topic (unsequenced: nobody
    /// claims a writer there), before they go to the connector's topic (KAFKA-15018).
    pub(super) fn tombstone_resets(&self, batch: &Batch) -> Result<()> {
        let resets: Vec<_> = batch
            .entries
            .iter()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| (k.clone(), None))
            .collect();
        if resets.is_empty() {
            return Ok(());
        }
        self.apply(&Batch::new("", 0, resets))
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

    pub(super) fn reader(&self) -> Result<MutexGuard<'_, Reader>> {
        self.reader
            .lock()
            .map_err(|_| Error::store("kafka", "reader lock poisoned by a panic"))
    }

    /// The state, to change: whatever was encoded from it before is stale from here on.
    pub(super) fn state_mut(&self) -> RwLockWriteGuard<'_, State> {
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

    pub(super) fn read_state(&self) -> Result<RwLockReadGuard<'_, State>> {
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

impl KafkaStoreBuilder {
    /// Connects, makes sure the topic exists and is compacted, and reads it into memory.
    pub fn open(self) -> Result<KafkaStore> {
        KafkaStore::open_with(self)
    }
}
