//! The storage trait and its backends.
//!
//! [`OffsetStore`] is what every backend implements: small, synchronous and object-safe, so a worker
//! holds a `Box<dyn OffsetStore>` chosen at run time by [`open`](crate::open()) from a URL. Conveniences (set, reset,
//! export) live in the blanket extension trait [`OffsetStoreExt`].
//!
//! | URL | backend | feature |
//! |---|---|---|
//! | `memory://` | [`MemoryStore`] | always |
//! | `rocksdb:///var/lib/offsets` | [`RocksDbStore`](rocksdb::RocksDbStore) | `rocksdb` |
//! | `kafka://127.0.0.1:9092/connect-offsets?partitions=25` | `KafkaStore` | `kafka` |
//! | `kafka://127.0.0.1:9092/my-connector-offsets?fallback.topic=connect-offsets` | `KafkaPairStore` (a connector's topic, the worker's as fallback) | `kafka` |
//! | `kafka://127.0.0.1:9092/connect-offsets?exactly.once.group=connect-cluster&exactly.once.task=files/0` | `KafkaStore` with an exactly-once source task (`TaskProducer`: records and offsets in one transaction; or `exactly.once.id=<transactional id>`) | `kafka` |
//! | `kafka-group://127.0.0.1:9092/?group=connect-{connector}` | `KafkaGroupStore` (sink connectors) | `kafka` |

use std::fmt;
use std::sync::Arc;

use crate::model::{Batch, OffsetKey};
use crate::{Offset, Result};

pub mod fault;
pub mod fence;
#[cfg(feature = "kafka")]
pub mod kafka;
pub mod memory;
#[cfg(feature = "rocksdb")]
pub mod rocksdb;
pub mod url;

pub use fault::ApplyFault;
pub use memory::MemoryStore;
pub use url::StoreUrl;

/// A place offsets live. Implementations must make [`apply`](Self::apply):
///
/// * **atomic**: after a crash, all entries of a batch are visible or none;
/// * **idempotent**: a batch whose `seq` is not above [`applied_seq`](Self::applied_seq) of its writer
///   changes nothing (a batch with `seq == 0` is unsequenced: always applied, nothing recorded);
/// * **ordered with its sequence record**: `applied_seq(writer)` is stored in the same atomic write.
pub trait OffsetStore: Send + Sync + fmt::Debug {
    /// The backend's name: `"memory"`, `"rocksdb"`, `"kafka"` or `"kafka-group"`.
    fn kind(&self) -> &'static str;

    /// Applies every entry of `batch` (`None` resets the key), atomically and idempotently.
    fn apply(&self, batch: &Batch) -> Result<()>;

    /// [`apply`](Self::apply) for a caller that keeps `batch` in a synced log of its own until the
    /// next [`persist`](Self::persist) returns, as the commit buffer does: the store may skip its own
    /// log, since a crash before that `persist` is recovered by replaying the caller's. The same
    /// rules hold; only what survives a crash of the process differs.
    fn apply_logged(&self, batch: &Batch) -> Result<()> {
        self.apply(batch)
    }

    /// Applies `batch` and `extra` (entries for keys that are none of `batch`'s) as one batch, as
    /// [`apply_logged`](Self::apply_logged) does when `logged`, else as [`apply`](Self::apply): for a
    /// wrapper that adds entries of its own (history's records) without copying the batch. The
    /// default makes the one batch.
    fn apply_extended(&self, batch: &Batch, extra: &[BatchEntry], logged: bool) -> Result<()> {
        let whole;
        let batch = if extra.is_empty() {
            batch
        } else {
            whole = extended(batch, extra);
            &whole
        };
        if logged {
            self.apply_logged(batch)
        } else {
            self.apply(batch)
        }
    }

    /// A [`CommitBuffer`](crate::buffer::CommitBuffer)'s batch that is about to be logged and
    /// then applied, offered while its apply thread has nothing else to do: a store may do now
    /// the part of applying it that writes nothing (history's staging of its record), so that
    /// it overlaps the log's write and sync. The batch may never be applied, or only merged with
    /// others: what is prepared must be checked at the apply. False when the store has nothing
    /// to prepare, and the buffer stops offering.
    fn prepare(&self, batch: &Arc<Batch>) -> bool {
        let _ = batch;
        false
    }

    /// A [`CommitBuffer`](crate::buffer::CommitBuffer)'s batch that its log now holds, encoded into
    /// the store's own write on the log thread, which has no room to log more while the apply
    /// thread writes the batch before it: a store whose write depends on the batch alone (RocksDB's
    /// rows) builds it here, so that a commit's work is split between two cores. It must not wait
    /// for the apply thread. The buffer hands the result to [`apply_encoded`](Self::apply_encoded)
    /// with this very batch, or drops it and applies the batch another way (merged with the batches
    /// queued behind it). `None` (the default) when there is nothing to build; the buffer then
    /// stops asking.
    fn encode_logged(&self, batch: &Batch) -> Option<Encoded> {
        let _ = batch;
        None
    }

    /// [`apply_logged`](Self::apply_logged) of `batch` with what
    /// [`encode_logged`](Self::encode_logged) built for it. The default ignores it.
    fn apply_encoded(&self, batch: &Batch, encoded: Encoded) -> Result<()> {
        let _ = encoded;
        self.apply_logged(batch)
    }

    /// Every stored offset as [`all`](OffsetStoreExt::all) reads them, taken now and read when the
    /// closure runs (on another thread, while later batches are applied): a commit buffer writes
    /// a volatile store's log snapshot from it. The default reads now; the memory store copies its
    /// entries' bytes and decodes them when the closure runs.
    fn frozen(&self) -> Result<FrozenState> {
        let all = self.all()?;
        Ok(Box::new(move || Ok(all)))
    }

    /// Refuses an entry no write of `writer`'s could ever store (a Kafka record over the topic's
    /// size limit, say), naming what is wrong: a commit buffer asks at each offer, so that it never
    /// logs a batch the store must refuse. Cheap: most stores take everything.
    fn admit(&self, writer: &str, key: &OffsetKey, offset: Option<&Offset>) -> Result<()> {
        let _ = (writer, key, offset);
        Ok(())
    }

    /// The key and offset [`partitions`](Self::partitions) lists once `(key, offset)` is written,
    /// when they differ from what was given (`None`: as given, in most stores). A consumer group
    /// keeps a sink's topic partition and position as numbers, so `"kafka_partition":"3"` reads
    /// back as `3`. Fails on an entry the store cannot take, naming it.
    fn as_stored(&self, key: &OffsetKey, offset: &Offset) -> Result<Option<(OffsetKey, Offset)>> {
        let _ = (key, offset);
        Ok(None)
    }

    /// The highest `seq` applied for `writer`, 0 when none.
    fn applied_seq(&self, writer: &str) -> Result<u64>;

    /// Every writer with its highest applied `seq`.
    fn writers(&self) -> Result<Vec<(String, u64)>>;

    /// The offset stored for `key`.
    fn get(&self, key: &OffsetKey) -> Result<Option<Offset>>;

    /// The offsets for several keys, in the same order.
    fn get_many(&self, keys: &[OffsetKey]) -> Result<Vec<Option<Offset>>> {
        keys.iter().map(|k| self.get(k)).collect()
    }

    /// Every partition of `namespace` with its offset, in key order.
    fn partitions(&self, namespace: &str) -> Result<Vec<(OffsetKey, Offset)>>;

    /// Every namespace (connector) with at least one offset, sorted.
    fn namespaces(&self) -> Result<Vec<String>>;

    /// Makes every batch applied so far (by either call) survive a power loss. Stores that do not outlive the process
    /// (see [`durable`](Self::durable)) return at once.
    fn persist(&self) -> Result<()>;

    /// True when applied and persisted batches outlive the process.
    fn durable(&self) -> bool;

    /// False for a store that may leave part of a batch visible when `apply` fails midway (Kafka's
    /// `write.mode=idempotent`). Such a store still records a batch's seq only once every entry
    /// is in, so a [`CommitBuffer`](crate::buffer::CommitBuffer)'s recovery replays the batch whole.
    fn atomic(&self) -> bool {
        true
    }

    /// True when, while this handle is open, nothing but this handle writes what it reads (memory;
    /// RocksDB, whose directory lock keeps other processes out): a wrapper may then remember what
    /// it wrote instead of reading it back. False for stores other processes write (Kafka).
    fn sole_writer(&self) -> bool {
        false
    }

    /// True when the store records when each partition's offset was last written, so that
    /// [`change_times`](Self::change_times) answers (memory, RocksDB, Kafka). A store that cannot
    /// tell (a consumer group) keeps the default, and [`crate::expire`] refuses it by name.
    fn keeps_change_times(&self) -> bool {
        false
    }

    /// When the offset of each key was last written, in milliseconds since the Unix epoch, in the
    /// order of `keys`: `None` for a key without an offset or without a recorded time (written by
    /// a version that kept none). Writing the same value again counts as a change.
    fn change_times(&self, keys: &[OffsetKey]) -> Result<Vec<Option<u64>>> {
        Ok(vec![None; keys.len()])
    }
}

macro_rules! forward_store {
    ($($ptr:ty),*) => {$(
        impl<T: OffsetStore + ?Sized> OffsetStore for $ptr {
            fn kind(&self) -> &'static str { (**self).kind() }
            fn apply(&self, batch: &Batch) -> Result<()> { (**self).apply(batch) }
            fn apply_logged(&self, batch: &Batch) -> Result<()> { (**self).apply_logged(batch) }
            fn apply_extended(&self, batch: &Batch, extra: &[BatchEntry], logged: bool) -> Result<()> { (**self).apply_extended(batch, extra, logged) }
            fn prepare(&self, batch: &Arc<Batch>) -> bool { (**self).prepare(batch) }
            fn encode_logged(&self, batch: &Batch) -> Option<Encoded> { (**self).encode_logged(batch) }
            fn apply_encoded(&self, batch: &Batch, encoded: Encoded) -> Result<()> { (**self).apply_encoded(batch, encoded) }
            fn frozen(&self) -> Result<FrozenState> { (**self).frozen() }
            fn admit(&self, writer: &str, key: &OffsetKey, offset: Option<&Offset>) -> Result<()> { (**self).admit(writer, key, offset) }
            fn as_stored(&self, key: &OffsetKey, offset: &Offset) -> Result<Option<(OffsetKey, Offset)>> { (**self).as_stored(key, offset) }
            fn applied_seq(&self, writer: &str) -> Result<u64> { (**self).applied_seq(writer) }
            fn writers(&self) -> Result<Vec<(String, u64)>> { (**self).writers() }
            fn get(&self, key: &OffsetKey) -> Result<Option<Offset>> { (**self).get(key) }
            fn get_many(&self, keys: &[OffsetKey]) -> Result<Vec<Option<Offset>>> { (**self).get_many(keys) }
            fn partitions(&self, namespace: &str) -> Result<Vec<(OffsetKey, Offset)>> { (**self).partitions(namespace) }
            fn namespaces(&self) -> Result<Vec<String>> { (**self).namespaces() }
            fn persist(&self) -> Result<()> { (**self).persist() }
            fn durable(&self) -> bool { (**self).durable() }
            fn atomic(&self) -> bool { (**self).atomic() }
            fn sole_writer(&self) -> bool { (**self).sole_writer() }
            fn keeps_change_times(&self) -> bool { (**self).keeps_change_times() }
            fn change_times(&self, keys: &[OffsetKey]) -> Result<Vec<Option<u64>>> { (**self).change_times(keys) }
        }
    )*};
}
forward_store!(Box<T>, Arc<T>, &T);

/// One entry of a batch: a key and its offset, `None` for a reset.
pub type BatchEntry = (OffsetKey, Option<Offset>);

/// A store's write of one batch as [`OffsetStore::encode_logged`] built it, opaque to the caller.
pub type Encoded = Box<dyn std::any::Any + Send>;

/// A store's state as [`OffsetStore::frozen`] took it: every offset, read when this is called.
pub type FrozenState = Box<dyn FnOnce() -> Result<Vec<(OffsetKey, Offset)>> + Send>;

/// `batch` with `extra` added: what [`OffsetStore::apply_extended`] applies.
pub(crate) fn extended(batch: &Batch, extra: &[BatchEntry]) -> Batch {
    let mut whole = batch.clone();
    whole.entries.extend(extra.iter().cloned());
    whole
}

/// Conveniences over any [`OffsetStore`]. Writes made here are unsequenced (`seq == 0`) and persisted
/// before they return: they are for operators and tools, not for a worker's commit path, which goes
/// through the [`CommitBuffer`](crate::buffer::CommitBuffer).
pub trait OffsetStoreExt: OffsetStore {
    /// Sets one offset.
    fn set(&self, key: OffsetKey, offset: Offset) -> Result<()> {
        self.write(vec![(key, Some(offset))])
    }

    /// Resets one partition (removes its offset).
    fn reset(&self, key: OffsetKey) -> Result<()> {
        self.write(vec![(key, None)])
    }

    /// Resets every partition of `namespace`, atomically. Returns how many were reset. The
    /// connector is fenced whole: a partition only a writer's log knows stays reset too.
    fn reset_namespace(&self, namespace: &str) -> Result<usize> {
        let keys: Vec<_> = self
            .partitions(namespace)?
            .into_iter()
            .map(|(k, _)| (k, None))
            .collect();
        let n = keys.len();
        if n > 0 {
            self.write_replacing(keys, &[namespace])?;
        }
        Ok(n)
    }

    /// Writes several entries in one atomic unsequenced batch and persists it. The batch also
    /// fences each key against the replay of what writers' logs held before it ([`fence`]).
    fn write(&self, entries: Vec<(OffsetKey, Option<Offset>)>) -> Result<()> {
        self.write_replacing(entries, &[])
    }

    /// [`write`](Self::write) of entries that replace every offset of `connectors`: those are
    /// fenced whole, so a writer's log cannot bring back a partition the write left out.
    fn write_replacing(
        &self,
        mut entries: Vec<(OffsetKey, Option<Offset>)>,
        connectors: &[&str],
    ) -> Result<()> {
        let fences = fence::fences(self, &entries, connectors)?;
        if !self.atomic() && !fences.is_empty() {
            // A failed write may leave any part of it: the fences go first. One left without its
            // write changes nothing (a replay checks that the store holds the fenced value).
            self.apply(&Batch::new("", 0, fences))?;
        } else {
            entries.extend(fences);
        }
        self.apply(&Batch::new("", 0, entries))?;
        self.persist()
    }

    /// Every stored offset of every namespace.
    fn all(&self) -> Result<Vec<(OffsetKey, Offset)>> {
        let mut out = Vec::new();
        for ns in self.namespaces()? {
            out.extend(self.partitions(&ns)?);
        }
        Ok(out)
    }
}

impl<T: OffsetStore + ?Sized> OffsetStoreExt for T {}
