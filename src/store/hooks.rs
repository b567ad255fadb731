//! The commit buffer's pipeline hooks: what a store may do, beyond [`OffsetStore`], to take part in
//! a [`CommitBuffer`](crate::buffer::CommitBuffer)'s commit path. Every hook has a default that is
//! right for any store; a backend overrides one only to make the path faster (RocksDB skips its own
//! log and builds its write early), to refuse at the offer what it would refuse at the apply
//! (Kafka's record size), or because it is a wrapper that adds entries of its own (history).
//!
//! A store with hooks implements [`CommitHooks`] and returns `Some(self)` from
//! [`OffsetStore::hooks`]. A caller reaches them through [`hooks`], which gives the defaults for a
//! store that has none; a wrapper forwards to its inner store's the same way.

use std::ops::Deref;
use std::sync::Arc;

use super::{Capabilities, OffsetStore, OffsetStoreExt};
use crate::model::{Batch, OffsetKey};
use crate::{Offset, Result};

/// One entry of a batch: a key and its offset, `None` for a reset.
pub type BatchEntry = (OffsetKey, Option<Offset>);

/// A store's write of one batch as [`CommitHooks::encode_logged`] built it, opaque to the caller.
pub type Encoded = Box<dyn std::any::Any + Send>;

/// A store's state as [`CommitHooks::frozen`] took it: every offset, read when this is called.
pub type FrozenState = Box<dyn FnOnce() -> Result<Vec<(OffsetKey, Offset)>> + Send>;

/// The pipeline hooks a [`CommitBuffer`](crate::buffer::CommitBuffer) calls on its store, each
/// with a default that keeps [`OffsetStore`]'s rules. Like the storage methods, each may be called
/// from any thread while others run; what a store may assume is what each method says.
pub trait CommitHooks: OffsetStore {
    /// [`apply`](OffsetStore::apply) for a caller that keeps `batch` in a synced log of its own
    /// until the next [`persist`](OffsetStore::persist) returns, as the commit buffer does: the
    /// store may skip its own log, since a crash before that `persist` is recovered by replaying
    /// the caller's. The same rules hold; only what survives a crash of the process differs.
    fn apply_logged(&self, batch: &Batch) -> Result<()> {
        self.apply(batch)
    }

    /// Applies `batch` and `extra` (entries for keys that are none of `batch`'s) as one batch, as
    /// [`apply_logged`](Self::apply_logged) does when `logged`, else as
    /// [`apply`](OffsetStore::apply): for a wrapper that adds entries of its own (history's
    /// records) without copying the batch. The default makes the one batch.
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

    /// A batch that is about to be logged and then applied, offered while the buffer has nothing
    /// else to do: a store may do now the part of applying it that writes nothing (history's
    /// staging of its record), so that it overlaps the log's write and sync. The batch may never
    /// be applied, or only merged with others: what is prepared must be checked at the apply.
    /// False when the store has nothing to prepare, and the buffer stops offering.
    fn prepare(&self, batch: &Arc<Batch>) -> bool {
        let _ = batch;
        false
    }

    /// A batch that the buffer's log now holds, encoded into the store's own write while the
    /// batch before it is applied: a store whose write depends on the batch alone (RocksDB's rows)
    /// builds it here, so that a commit's work is split between two cores. It must not wait for
    /// an apply. The buffer hands the result to [`apply_encoded`](Self::apply_encoded) with this
    /// very batch, or drops it and applies the batch another way (merged with the batches queued
    /// behind it). `None` (the default) when there is nothing to build; the buffer then stops
    /// asking.
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

    /// The key and offset [`partitions`](OffsetStore::partitions) lists once `(key, offset)` is
    /// written, when they differ from what was given (`None`: as given, in most stores). A
    /// consumer group keeps a sink's topic partition and position as numbers, so
    /// `"kafka_partition":"3"` reads back as `3`. Fails on an entry the store cannot take, naming
    /// it.
    fn as_stored(&self, key: &OffsetKey, offset: &Offset) -> Result<Option<(OffsetKey, Offset)>> {
        let _ = (key, offset);
        Ok(None)
    }
}

/// `batch` with `extra` added: what [`CommitHooks::apply_extended`] applies.
pub(crate) fn extended(batch: &Batch, extra: &[BatchEntry]) -> Batch {
    let mut whole = batch.clone();
    whole.entries.extend(extra.iter().cloned());
    whole
}

/// The hooks of `store`: its own ([`OffsetStore::hooks`]) or, for a store that has none, every
/// default. One call per batch, not per entry: keep the result while offering a batch's entries.
pub fn hooks<'a>(store: &'a (dyn OffsetStore + 'a)) -> Hooks<'a> {
    Hooks(match store.hooks() {
        Some(own) => Of::Own(own),
        None => Of::Defaults(Defaults(store)),
    })
}

/// A store's [`CommitHooks`] as [`hooks`] found them; dereferences to the trait.
#[derive(Debug)]
pub struct Hooks<'a>(Of<'a>);

#[derive(Debug)]
enum Of<'a> {
    Own(&'a dyn CommitHooks),
    Defaults(Defaults<'a>),
}

impl<'a> Deref for Hooks<'a> {
    type Target = dyn CommitHooks + 'a;
    fn deref(&self) -> &Self::Target {
        match &self.0 {
            Of::Own(own) => *own,
            Of::Defaults(defaults) => defaults,
        }
    }
}

/// A store that has no hooks of its own, with every default.
#[derive(Debug)]
struct Defaults<'a>(&'a (dyn OffsetStore + 'a));

impl OffsetStore for Defaults<'_> {
    fn kind(&self) -> &'static str {
        self.0.kind()
    }
    fn capabilities(&self) -> Capabilities {
        self.0.capabilities()
    }
    fn apply(&self, batch: &Batch) -> Result<()> {
        self.0.apply(batch)
    }
    fn persist(&self) -> Result<()> {
        self.0.persist()
    }
    fn applied_seq(&self, writer: &str) -> Result<u64> {
        self.0.applied_seq(writer)
    }
    fn writers(&self) -> Result<Vec<(String, u64)>> {
        self.0.writers()
    }
    fn get(&self, key: &OffsetKey) -> Result<Option<Offset>> {
        self.0.get(key)
    }
    fn get_many(&self, keys: &[OffsetKey]) -> Result<Vec<Option<Offset>>> {
        self.0.get_many(keys)
    }
    fn partitions(&self, namespace: &str) -> Result<Vec<(OffsetKey, Offset)>> {
        self.0.partitions(namespace)
    }
    fn namespaces(&self) -> Result<Vec<String>> {
        self.0.namespaces()
    }
    fn change_times(&self, keys: &[OffsetKey]) -> Result<Vec<Option<u64>>> {
        self.0.change_times(keys)
    }
}

impl CommitHooks for Defaults<'_> {}
