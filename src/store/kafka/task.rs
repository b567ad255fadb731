//! Exactly-once source tasks (KIP-618): a task's data records and its offsets committed in one
//! Kafka transaction, or not at all, and a zombie instance of the task fenced.
//!
//! A [`TaskProducer`] is one task's transactional producer, `transactional.id` = its [`TaskId`]
//! (Connect's `<group.id>-<connector>-<task>`, or one the worker names). Creating it fences every
//! older producer with that id (the task's previous instance, dead or a zombie) and aborts the
//! transaction that instance left open; the store then re-reads the offsets topic, so what the
//! worker reads next is the old instance's last commit. The worker sends its records with
//! [`send`](TaskProducer::send) (the first one opens a transaction, as in Connect's
//! `ExactlyOnceWorkerSourceTask`) and ends the transaction with
//! [`commit`](TaskProducer::commit), which adds the offsets records (Connect's bytes, no marker,
//! no headers) to the same transaction before committing it.
//!
//! This path does not go through the commit buffer: the transaction is the log. The store's own
//! batches (a [`CommitBuffer`](crate::buffer::CommitBuffer), `set`, `reset`) keep their writers.

use std::fmt;
use std::time::Instant;

use rdkafka::producer::BaseRecord;

pub use super::config::TaskId;
use super::producer::Failure;
use super::topic::KafkaStore;
use super::topic::write::{self, TxnProducer};
use crate::model::{Batch, OffsetKey};
use crate::{Error, Offset, Result};

/// Where a task's producer stands.
enum Phase {
    /// No transaction open.
    Idle,
    /// A transaction is open: records were sent since the last commit.
    Open,
    /// A newer instance took over; nothing more is written.
    Fenced(String),
    /// The producer failed for good or a commit's outcome is unknown.
    Broken(String),
}

/// One source task's transactional producer over a [`KafkaStore`]; see the
/// [module documentation](self).
///
/// ```no_run
/// use connect_offsets::store::OffsetStore;
/// use connect_offsets::store::kafka::KafkaStore;
/// use connect_offsets::{Offset, OffsetKey, Partition};
///
/// let store = KafkaStore::open(
///     "kafka://127.0.0.1:9092/connect-offsets?exactly.once.group=connect-cluster&exactly.once.task=files/0",
/// )?;
/// let mut task = store.task_producer()?; // fences the task's previous instance
/// let key = OffsetKey::new("files", Partition::new().with("filename", "a.log"));
/// let _from = store.get(&key)?;          // the last commit, of whichever instance made it
/// task.send("lines", Some(b"a.log"), Some(b"first line"))?;
/// task.commit([(key, Some(Offset::new().with("position", 11)))])?;
/// # Ok::<(), connect_offsets::Error>(())
/// ```
pub struct TaskProducer<'s> {
    store: &'s KafkaStore,
    /// The worker topic behind a connector topic ([`KafkaPairStore`](super::KafkaPairStore)):
    /// a reset tombstones it first, as Connect's `ConnectorOffsetBackingStore` does.
    fallback: Option<&'s KafkaStore>,
    producer: TxnProducer,
    id: TaskId,
    phase: Phase,
}

impl fmt::Debug for TaskProducer<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskProducer")
            .field("id", &self.id)
            .field("topic", &self.store.settings.topic)
            .finish()
    }
}

impl KafkaStore {
    /// The configured task's transactional producer ([`task_id`](Self::task_id)): records and
    /// offsets in one transaction. Creating it fences any older instance of the task and re-reads
    /// the topic, so read the offsets to resume from after this returns.
    pub fn task_producer(&self) -> Result<TaskProducer<'_>> {
        let id = self.task.clone().ok_or_else(|| {
            Error::Settings(format!(
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
}

impl<'s> TaskProducer<'s> {
    /// Initializes the producer (fencing older instances, settling their open transaction) and
    /// re-reads the offsets topic.
    pub(super) fn create(store: &'s KafkaStore, id: TaskId) -> Result<TaskProducer<'s>> {
        let producer = TxnProducer::create(&store.settings, id.as_str())?;
        store.refresh()?;
        Ok(TaskProducer {
            store,
            fallback: None,
            producer,
            id,
            phase: Phase::Idle,
        })
    }

    /// Resets go to `fallback` too, before the transaction that carries them.
    pub(super) fn with_fallback(mut self, fallback: &'s KafkaStore) -> Self {
        self.fallback = Some(fallback);
        self
    }

    /// The task's `transactional.id`.
    pub fn id(&self) -> &TaskId {
        &self.id
    }

    /// Sends one data record to `topic` in the task's transaction (opening one if none is open);
    /// the producer's partitioner (Java's murmur2) picks the partition from the key. The record
    /// becomes visible to `read_committed` consumers only with the next [`commit`](Self::commit).
    pub fn send(&mut self, topic: &str, key: Option<&[u8]>, value: Option<&[u8]>) -> Result<()> {
        self.open()?;
        let mut record: BaseRecord<'_, [u8], [u8], ()> = BaseRecord::to(topic);
        if let Some(k) = key {
            record = record.key(k);
        }
        if let Some(v) = value {
            record = record.payload(v);
        }
        let settings = &self.store.settings;
        let deadline = Instant::now() + settings.timeout;
        let sent = self.producer.send_record(record, deadline, settings, || {
            format!("produce to `{topic}`")
        });
        sent.map_err(|f| self.failed(f))
    }

    /// Commits the open transaction with `offsets` (`None` resets a partition): the records sent
    /// since the last commit and these offsets become visible together, or, on an error, none of
    /// them. Offsets alone (nothing sent) are committed in a transaction of their own; nothing at
    /// all commits nothing.
    ///
    /// Offsets that do not encode (a record over `message.max.bytes`) fail before anything is
    /// sent, and the transaction stays open. After [`Error::Fenced`] this producer writes nothing
    /// more; after any other error the records sent since the last commit are not written: read
    /// the offsets again (after a [`Error::Store`] whose outcome is unknown, from a new producer,
    /// [`KafkaStore::task_producer`]) and send again from there.
    pub fn commit(
        &mut self,
        offsets: impl IntoIterator<Item = (OffsetKey, Option<Offset>)>,
    ) -> Result<()> {
        self.usable()?;
        let batch = Batch::new(self.id.as_str(), 0, offsets);
        if batch.entries.is_empty() && matches!(self.phase, Phase::Idle) {
            return Ok(());
        }
        let store = self.store;
        let settings = &store.settings;
        // Unsequenced: Connect's records exactly, no marker, no headers.
        let recs = write::encode(&batch, &*store.read_state()?, store.partitions, settings)?;
        if let Some(fallback) = self.fallback {
            // KAFKA-15018: a tombstone in the connector's topic alone lets the worker topic's
            // older offset show through again. Written first (and not undone if the
            // transaction then fails: the partition is reset in either case a reader sees).
            if let Err(e) = fallback.tombstone_resets(&batch) {
                // As after any failure but an encoding one: nothing sent since the last commit
                // is written.
                return Err(match self.phase {
                    Phase::Open => self.abort_after(e),
                    _ => e,
                });
            }
        }
        self.open()?;
        let deadline = Instant::now() + settings.timeout;
        for rec in recs.iter() {
            let sent = self
                .producer
                .send(&settings.topic, rec, None, deadline, settings);
            sent.map_err(|f| self.failed(f))?;
        }
        // As in the store's own commits: no refresh reads these records before memory has them.
        let reader = match store.reader() {
            Ok(r) => r,
            Err(e) => return Err(self.abort_after(e)),
        };
        self.producer.commit(settings).map_err(|f| self.failed(f))?;
        self.phase = Phase::Idle;
        let mut state = store.state_mut();
        write::apply_to_state(&mut state, &batch, &recs);
        drop(reader);
        Ok(())
    }

    /// Aborts the open transaction: nothing sent since the last commit is written.
    pub fn abort(&mut self) -> Result<()> {
        self.usable()?;
        if !matches!(self.phase, Phase::Open) {
            return Ok(());
        }
        self.producer
            .abort(&self.store.settings)
            .map_err(|f| self.failed(f))?;
        self.phase = Phase::Idle;
        Ok(())
    }

    fn open(&mut self) -> Result<()> {
        self.usable()?;
        if matches!(self.phase, Phase::Idle) {
            self.producer
                .begin(&self.store.settings)
                .map_err(|f| self.failed(f))?;
            self.phase = Phase::Open;
        }
        Ok(())
    }

    fn usable(&self) -> Result<()> {
        match &self.phase {
            Phase::Fenced(reason) => Err(self.fenced(reason)),
            Phase::Broken(why) => Err(Error::State(format!(
                "the producer of task `{}` is unusable ({why}): make a new one and read the \
                 offsets again",
                self.id
            ))),
            Phase::Idle | Phase::Open => Ok(()),
        }
    }

    fn fenced(&self, reason: &str) -> Error {
        Error::Fenced(format!(
            "task `{}`: another instance with the same transactional.id took over ({reason}); \
             this one must stop: nothing it sent since its last commit is written",
            self.id
        ))
    }

    /// Aborts after `e`, which failed the commit before the producer saw it.
    fn abort_after(&mut self, e: Error) -> Error {
        match self.producer.abort(&self.store.settings) {
            Ok(()) => {
                self.phase = Phase::Idle;
                e
            }
            Err(f) => {
                self.failed(f);
                e
            }
        }
    }

    /// What a failed step means for this producer, as the error to return.
    fn failed(&mut self, failure: Failure) -> Error {
        match failure {
            Failure::Fenced(reason) => {
                let e = self.fenced(&reason);
                tracing::error!(transactional_id = %self.id, "{e}");
                self.phase = Phase::Fenced(reason);
                e
            }
            Failure::Lost(e) => {
                self.phase = Phase::Broken(e.to_string());
                e.context(format!(
                    "task `{}`: its transaction may or may not be committed; make a new producer \
                     (which settles it) and read the offsets again",
                    self.id
                ))
            }
            Failure::Aborted(e) => {
                self.phase = Phase::Idle;
                e.context(format!(
                    "task `{}`: the transaction was aborted, nothing sent since the last commit \
                     is written; read the offsets again and send from there",
                    self.id
                ))
            }
        }
    }
}

impl Drop for TaskProducer<'_> {
    /// An open transaction is aborted rather than left to `transaction.timeout.ms`: until it ends,
    /// `read_committed` consumers of its partitions wait.
    fn drop(&mut self) {
        if matches!(self.phase, Phase::Open) {
            let _ = self.producer.abort(&self.store.settings);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_follow_connects_pattern_or_the_workers_name() {
        let id = |i, g, t| TaskId::from_params(i, g, t);
        assert_eq!(id(None, None, None), Ok(None));
        assert_eq!(
            id(None, Some("connect-cluster"), Some("file-source/3"))
                .unwrap()
                .unwrap()
                .as_str(),
            "connect-cluster-file-source-3"
        );
        assert_eq!(
            id(None, Some("g"), Some("a/b/0"))
                .unwrap()
                .unwrap()
                .as_str(),
            "g-a/b-0",
            "the task number is after the last slash"
        );
        assert_eq!(
            id(Some("my-task"), None, None).unwrap().unwrap().as_str(),
            "my-task"
        );
        for (i, g, t, word) in [
            (None, Some("g"), None, "go together"),
            (None, None, Some("c/0"), "go together"),
            (Some("x"), Some("g"), Some("c/0"), "cannot be combined"),
            (None, Some("g"), Some("c"), "<connector>/<task number>"),
            (None, Some("g"), Some("c/-1"), "non-negative"),
            (None, Some("g"), Some("/0"), "connector ``"),
            (None, Some(""), Some("c/0"), "group ``"),
            (Some(" "), None, None, "must not be empty"),
        ] {
            let e = id(i, g, t).unwrap_err();
            assert!(e.contains(word), "{i:?} {g:?} {t:?}: {e}");
        }
    }
}
