//! The storage trait and its backends.
//!
//! [`OffsetStore`] is what every backend implements: small, synchronous and object-safe, so a worker
//! holds a `Box<dyn OffsetStore>` chosen at run time by [`open`](crate::open()) from a URL. Conveniences (set, reset,
//! export) live in the blanket extension trait [`OffsetStoreExt`].
//!
//! # Writing a backend
//!
//! Implement [`OffsetStore`]: `kind`, `capabilities`, `apply`, `persist`, `applied_seq`, `writers`,
//! `get`, `partitions` and `namespaces`; `get_many` and `change_times` have defaults. The contract
//! is the three rules on [`OffsetStore`] (`apply` is all-or-nothing, skips a batch its writer already
//! applied, and stores the writer's seq in the same write) and what the store's [`Capabilities`] say
//! it promises. Methods take `&self` and may be called from several threads at once; a lock around
//! the state is enough. That is all a worker's [`CommitBuffer`](crate::buffer::CommitBuffer) needs:
//! it applies batches it has logged itself and replays them after a crash, which the rules make safe.
//! `examples/custom_backend.rs` is a whole backend in under 150 lines.
//!
//! Check it with the conformance suite (feature `testkit`): implement
//! `conformance::Harness` to open it, then call
//! `conformance_tests!` in a test file (one `#[test]` per check) or
//! `conformance::run_all` from a `main`.
//!
//! # Pipeline hooks (optional)
//!
//! [`CommitHooks`] gathers what a store may add to make the commit buffer's path cheaper or safer:
//! skip its own log for a batch the buffer logged (`apply_logged`), build its write early
//! (`encode_logged`, `apply_encoded`), stage work ahead (`prepare`), take a snapshot to be read later
//! (`frozen`), refuse an entry when it is offered (`admit`), say how an entry reads back
//! (`as_stored`), or add entries of its own (`apply_extended`). Every hook has a default that is
//! right for any store. A store that overrides some implements the trait and returns `Some(self)`
//! from [`OffsetStore::hooks`]; callers, and wrappers forwarding to their inner store, reach a
//! store's hooks through [`hooks()`].
//!
//! | URL | backend | feature |
//! |---|---|---|
//! | `memory://` | [`MemoryStore`] | always |
//! | `rocksdb:///var/lib/offsets` | `RocksDbStore` | `rocksdb` |
//! | `kafka://127.0.0.1:9092/connect-offsets?partitions=25` | `KafkaStore` | `kafka` |
//! | `kafka://127.0.0.1:9092/my-connector-offsets?fallback.topic=connect-offsets` | `KafkaPairStore` (a connector's topic, the worker's as fallback) | `kafka` |
//! | `kafka://127.0.0.1:9092/connect-offsets?exactly.once.group=connect-cluster&exactly.once.task=files/0` | `KafkaStore` with an exactly-once source task (`TaskProducer`: records and offsets in one transaction; or `exactly.once.id=<transactional id>`) | `kafka` |
//! | `kafka-group://127.0.0.1:9092/?group=connect-{connector}` | `KafkaGroupStore` (sink connectors) | `kafka` |

use std::fmt;
use std::sync::Arc;

use crate::model::{Batch, OffsetKey};
use crate::{Offset, Result};

pub(crate) mod fault;
pub(crate) mod fence;
pub(crate) mod hooks;
#[cfg(feature = "kafka")]
pub mod kafka;
mod memory;
#[cfg(feature = "rocksdb")]
pub mod rocksdb;
pub(crate) mod url;

/// The fault seam the stores' `with_fault` take (tests; the test kit's is
/// `conformance::ApplyFault`).
#[doc(hidden)]
pub use fault::ApplyFault;
pub(crate) use hooks::extended;
pub(crate) use hooks::hooks;
pub use hooks::{BatchEntry, CommitHooks, Encoded, FrozenState};
pub use memory::MemoryStore;
/// Parsed store URLs: taken by `HistoryConfig::take_from` and the Kafka stores' `open_url`, so
/// public, but not part of the documented API.
#[doc(hidden)]
pub use url::StoreUrl;

/// A place offsets live. Implementations must make [`apply`](Self::apply):
///
/// * **atomic**: after a crash, all entries of a batch are visible or none (a store whose
///   [`Capabilities::atomic`] is false may leave part of a failed batch, never its seq);
/// * **idempotent**: a batch whose `seq` is not above [`applied_seq`](Self::applied_seq) of its writer
///   changes nothing (a batch with `seq == 0` is unsequenced: always applied, nothing recorded);
/// * **ordered with its sequence record**: `applied_seq(writer)` is stored in the same atomic write.
pub trait OffsetStore: Send + Sync + fmt::Debug {
    /// The backend's name: `"memory"`, `"rocksdb"`, `"kafka"` or `"kafka-group"`.
    fn kind(&self) -> &'static str;

    /// What the store promises beyond the rules above: durability, atomicity, sole writer, change
    /// times. Constant for the life of a handle, except [`sole_writer`](Capabilities::sole_writer),
    /// which turns false when another handle comes to share the data.
    fn capabilities(&self) -> Capabilities;

    /// Applies every entry of `batch` (`None` resets the key), atomically and idempotently.
    fn apply(&self, batch: &Batch) -> Result<()>;

    /// Makes every batch applied so far survive a power loss. Stores that do not outlive the
    /// process (see [`Capabilities::durable`]) return at once.
    fn persist(&self) -> Result<()>;

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

    /// When the offset of each key was last written, in milliseconds since the Unix epoch, in the
    /// order of `keys`: `None` for a key without an offset or without a recorded time (written by
    /// a version that kept none). Writing the same value again counts as a change. A store that
    /// answers says so in [`Capabilities::keeps_change_times`]; the default knows no time.
    fn change_times(&self, keys: &[OffsetKey]) -> Result<Vec<Option<u64>>> {
        Ok(vec![None; keys.len()])
    }

    /// The commit buffer's pipeline hooks ([`CommitHooks`]) when this store overrides any:
    /// `Some(self)` in a store that implements that trait. `None` (the default) gives every hook
    /// its default, which is right for any store. Callers reach the hooks through `store::hooks`.
    fn hooks(&self) -> Option<&dyn CommitHooks> {
        None
    }
}

/// What a store promises beyond [`OffsetStore`]'s rules, as [`OffsetStore::capabilities`] says.
/// Built from [`Capabilities::DEFAULT`] with the `with_*` methods: more fields may come.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Capabilities {
    /// Applied and persisted batches outlive the process.
    pub durable: bool,
    /// False for a store that may leave part of a batch visible when `apply` fails midway (Kafka's
    /// `write.mode=idempotent`). Such a store still records a batch's seq only once every entry is
    /// in, so a [`CommitBuffer`](crate::buffer::CommitBuffer)'s recovery replays the batch whole.
    pub atomic: bool,
    /// While this handle is open, nothing but this handle writes what it reads (memory; RocksDB,
    /// whose directory lock keeps other processes out): a wrapper may then remember what it wrote
    /// instead of reading it back. False for stores other processes write (Kafka).
    pub sole_writer: bool,
    /// The store records when each partition's offset was last written, so that
    /// [`change_times`](OffsetStore::change_times) answers (memory, RocksDB, Kafka). A store that
    /// cannot tell (a consumer group) leaves it false, and [`crate::expire`] refuses it by name.
    pub keeps_change_times: bool,
}

impl Capabilities {
    /// Not durable, atomic, not the sole writer, no change times.
    pub const DEFAULT: Capabilities = Capabilities {
        durable: false,
        atomic: true,
        sole_writer: false,
        keeps_change_times: false,
    };

    /// With [`durable`](Self::durable) set to `yes`.
    #[must_use]
    pub const fn with_durable(mut self, yes: bool) -> Self {
        self.durable = yes;
        self
    }

    /// With [`atomic`](Self::atomic) set to `yes`.
    #[must_use]
    pub const fn with_atomic(mut self, yes: bool) -> Self {
        self.atomic = yes;
        self
    }

    /// With [`sole_writer`](Self::sole_writer) set to `yes`.
    #[must_use]
    pub const fn with_sole_writer(mut self, yes: bool) -> Self {
        self.sole_writer = yes;
        self
    }

    /// With [`keeps_change_times`](Self::keeps_change_times) set to `yes`.
    #[must_use]
    pub const fn with_change_times(mut self, yes: bool) -> Self {
        self.keeps_change_times = yes;
        self
    }
}

impl Default for Capabilities {
    fn default() -> Self {
        Capabilities::DEFAULT
    }
}

macro_rules! forward_store {
    ($($ptr:ty),*) => {$(
        impl<T: OffsetStore + ?Sized> OffsetStore for $ptr {
            fn kind(&self) -> &'static str { (**self).kind() }
            fn capabilities(&self) -> Capabilities { (**self).capabilities() }
            fn apply(&self, batch: &Batch) -> Result<()> { (**self).apply(batch) }
            fn persist(&self) -> Result<()> { (**self).persist() }
            fn applied_seq(&self, writer: &str) -> Result<u64> { (**self).applied_seq(writer) }
            fn writers(&self) -> Result<Vec<(String, u64)>> { (**self).writers() }
            fn get(&self, key: &OffsetKey) -> Result<Option<Offset>> { (**self).get(key) }
            fn get_many(&self, keys: &[OffsetKey]) -> Result<Vec<Option<Offset>>> { (**self).get_many(keys) }
            fn partitions(&self, namespace: &str) -> Result<Vec<(OffsetKey, Offset)>> { (**self).partitions(namespace) }
            fn namespaces(&self) -> Result<Vec<String>> { (**self).namespaces() }
            fn change_times(&self, keys: &[OffsetKey]) -> Result<Vec<Option<u64>>> { (**self).change_times(keys) }
            fn hooks(&self) -> Option<&dyn CommitHooks> { (**self).hooks() }
        }

        impl<T: CommitHooks + ?Sized> CommitHooks for $ptr {
            fn apply_logged(&self, batch: &Batch) -> Result<()> { (**self).apply_logged(batch) }
            fn apply_extended(&self, batch: &Batch, extra: &[BatchEntry], logged: bool) -> Result<()> { (**self).apply_extended(batch, extra, logged) }
            fn prepare(&self, batch: &Arc<Batch>) -> bool { (**self).prepare(batch) }
            fn encode_logged(&self, batch: &Batch) -> Option<Encoded> { (**self).encode_logged(batch) }
            fn apply_encoded(&self, batch: &Batch, encoded: Encoded) -> Result<()> { (**self).apply_encoded(batch, encoded) }
            fn frozen(&self) -> Result<FrozenState> { (**self).frozen() }
            fn admit(&self, writer: &str, key: &OffsetKey, offset: Option<&Offset>) -> Result<()> { (**self).admit(writer, key, offset) }
            fn as_stored(&self, key: &OffsetKey, offset: &Offset) -> Result<Option<(OffsetKey, Offset)>> { (**self).as_stored(key, offset) }
        }
    )*};
}
forward_store!(Box<T>, Arc<T>, &T);

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
    /// fences each key against the replay of what writers' logs held before it.
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
        if !self.capabilities().atomic && !fences.is_empty() {
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

#[cfg(test)]
mod tests {
    use super::Capabilities;

    #[test]
    fn capabilities_default_and_builders() {
        let d = Capabilities::default();
        assert_eq!(d, Capabilities::DEFAULT);
        assert!(!d.durable && d.atomic && !d.sole_writer && !d.keeps_change_times);
        let all = d
            .with_durable(true)
            .with_atomic(false)
            .with_sole_writer(true)
            .with_change_times(true);
        assert!(all.durable && !all.atomic && all.sole_writer && all.keeps_change_times);
    }
}
