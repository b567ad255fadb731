//! [`HistoryStore`]: any store, with every applied batch's changes recorded beside its offsets.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use indexmap::IndexMap;

use super::record::{self, CHANGES_PER_RECORD, Staged};
use super::{HISTORY_NAMESPACE, HistoryConfig, time};
use crate::is_reserved_namespace as is_reserved;
use crate::model::{Batch, OffsetKey};
use crate::store::OffsetStore;
use crate::{Error, Offset, Result};

/// Records pruned in one batch at most, so a store reopened after a long pause does not put all
/// of its expired history into one write; the rest goes with the next batches.
const MAX_PRUNED_PER_BATCH: usize = 1_000;

/// A store that records, in the same atomic batch as the offsets, how each offset moved
/// (see [the module](super)). Reads and everything else go to the inner store.
///
/// ```
/// use connect_offsets::history::{self, HistoryConfig, HistoryStore};
/// use connect_offsets::store::{MemoryStore, OffsetStoreExt};
/// use connect_offsets::{Offset, OffsetKey, Partition};
///
/// let store = HistoryStore::open(Box::new(MemoryStore::new()), HistoryConfig::parse("7d", None)?)?;
/// let key = OffsetKey::new("orders", Partition::new().with("table", "orders"));
/// store.set(key.clone(), Offset::new().with("lsn", 1))?;
/// store.set(key.clone(), Offset::new().with("lsn", 2))?;
/// let changes = history::read(&store, "orders")?.changes;
/// assert_eq!(changes.len(), 2);
/// assert_eq!(changes[1].from, Some(Offset::new().with("lsn", 1)));
/// # Ok::<(), connect_offsets::Error>(())
/// ```
#[derive(Debug)]
pub struct HistoryStore {
    inner: Box<dyn OffsetStore>,
    config: HistoryConfig,
    index: Mutex<Index>,
}

/// The records the store holds, oldest first: what retention drops next.
#[derive(Debug, Default)]
struct Index {
    records: VecDeque<Kept>,
    bytes: u64,
    horizon: Option<i64>,
    last_at: i64,
}

/// One record the store holds: when it was applied, its key, about how many bytes it takes.
#[derive(Debug)]
struct Kept {
    at_us: i64,
    key: OffsetKey,
    bytes: u64,
}

impl Index {
    /// A record newer than every one held (the recorder's, and the store's at open, oldest first).
    fn push(&mut self, key: &OffsetKey, value: &Offset) {
        let Some(at_us) = record::at_us(value) else {
            return;
        };
        if *key == record::horizon_key() {
            self.horizon = Some(at_us);
            return;
        }
        let bytes = record::record_bytes(key, value);
        self.bytes += bytes;
        self.last_at = self.last_at.max(at_us);
        self.records.push_back(Kept {
            at_us,
            key: key.clone(),
            bytes,
        });
    }

    /// How many of the oldest records retention drops at `now_us`, once `incoming` more bytes are in.
    fn expired(&self, config: &HistoryConfig, now_us: i64, incoming: u64) -> usize {
        let cutoff = config.cutoff(now_us);
        let mut bytes = self.bytes + incoming;
        self.records
            .iter()
            .take(MAX_PRUNED_PER_BATCH)
            .take_while(|kept| {
                let drop = kept.at_us < cutoff || config.max_bytes.is_some_and(|max| bytes > max);
                if drop {
                    bytes -= kept.bytes;
                }
                drop
            })
            .count()
    }

    /// The history records of a restore: they may replace records held, and be of any age.
    fn restore<'a>(&mut self, entries: impl Iterator<Item = (&'a OffsetKey, Option<&'a Offset>)>) {
        let entries: Vec<_> = entries.collect();
        let named: std::collections::HashSet<&OffsetKey> =
            entries.iter().map(|(k, _)| *k).collect();
        let mut gone = 0;
        self.records.retain(|k| {
            let keep = !named.contains(&k.key);
            if !keep {
                gone += k.bytes;
            }
            keep
        });
        self.bytes -= gone;
        for (k, v) in entries {
            match v {
                Some(v) => self.push(k, v),
                None if *k == record::horizon_key() => self.horizon = None,
                None => {}
            }
        }
        self.records.make_contiguous().sort_by_key(|k| k.at_us);
    }
}

impl HistoryStore {
    /// Wraps `inner`, reading the history it already holds (to know what retention drops next).
    pub fn open(inner: Box<dyn OffsetStore>, config: HistoryConfig) -> Result<Self> {
        let mut index = Index::default();
        let mut held = inner.partitions(HISTORY_NAMESPACE)?;
        held.sort_by_key(|(_, v)| record::at_us(v));
        for (k, v) in &held {
            index.push(k, v);
        }
        Ok(HistoryStore {
            inner,
            config,
            index: Mutex::new(index),
        })
    }

    /// The retention this store keeps history for.
    pub fn config(&self) -> &HistoryConfig {
        &self.config
    }

    fn lock(&self) -> Result<MutexGuard<'_, Index>> {
        self.index
            .lock()
            .map_err(|_| Error::store("history", "lock poisoned by a panic in another thread"))
    }

    fn apply_with(&self, batch: &Batch, apply: impl Fn(&Batch) -> Result<()>) -> Result<()> {
        // A batch the store already holds changes nothing: nothing to record either.
        if batch.seq != 0 && batch.seq <= self.inner.applied_seq(&batch.writer)? {
            return apply(batch);
        }
        let mut guard = self.lock()?;
        let index = &mut *guard;
        if batch
            .entries
            .keys()
            .any(|k| k.namespace() == HISTORY_NAMESPACE)
        {
            // A restore (a compaction snapshot, an import or migrate of a store with history):
            // its records are kept as they are, and its changes were recorded where they happened.
            apply(batch)?;
            index.restore(
                batch
                    .entries
                    .iter()
                    .filter(|(k, _)| k.namespace() == HISTORY_NAMESPACE)
                    .map(|(k, v)| (k, v.as_ref())),
            );
            return Ok(());
        }
        let keys: Vec<OffsetKey> = batch
            .entries
            .keys()
            .filter(|k| !is_reserved(k.namespace()))
            .cloned()
            .collect();
        if keys.is_empty() {
            return apply(batch);
        }
        let before = self.inner.get_many(&keys)?;
        let mut by_connector: IndexMap<&str, Vec<Staged<'_>>> = IndexMap::new();
        for (key, from) in keys.iter().zip(&before) {
            let to = batch.entries[key].as_ref();
            if from.as_ref() != to {
                by_connector
                    .entry(key.namespace())
                    .or_default()
                    .push((key, from.as_ref(), to));
            }
        }
        for changes in by_connector.values_mut() {
            changes.sort_by(|a, b| a.0.cmp(b.0));
        }
        let at_us = time::now_us().max(index.last_at + 1);
        let mut entries = batch.entries.clone();
        let mut added = Vec::new();
        for (connector, changes) in &by_connector {
            for (part, chunk) in changes.chunks(CHANGES_PER_RECORD).enumerate() {
                let key = record::record_key(connector, &batch.writer, batch.seq, part, at_us);
                let value = record::record_value(at_us, chunk);
                added.push((key.clone(), value.clone()));
                entries.insert(key, Some(value));
            }
        }
        let mut horizon = index.horizon;
        if horizon.is_none() && !added.is_empty() {
            // History starts here: earlier moves were not recorded, so no rewind reaches before.
            horizon = Some(at_us);
        }
        let new_bytes: u64 = added.iter().map(|(k, v)| record::record_bytes(k, v)).sum();
        let pruned = index.expired(&self.config, at_us, new_bytes);
        for kept in index.records.iter().take(pruned) {
            entries.insert(kept.key.clone(), None);
            horizon = horizon.max(Some(kept.at_us));
        }
        if horizon != index.horizon
            && let Some(h) = horizon
        {
            entries.insert(record::horizon_key(), Some(record::horizon_value(h)));
        }
        apply(&Batch {
            writer: batch.writer.clone(),
            seq: batch.seq,
            entries,
        })?;
        for kept in index.records.drain(..pruned) {
            index.bytes -= kept.bytes;
        }
        for (k, v) in &added {
            index.push(k, v);
        }
        index.horizon = horizon;
        index.last_at = at_us;
        Ok(())
    }
}

impl OffsetStore for HistoryStore {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
    fn apply(&self, batch: &Batch) -> Result<()> {
        self.apply_with(batch, |b| self.inner.apply(b))
    }
    fn apply_logged(&self, batch: &Batch) -> Result<()> {
        self.apply_with(batch, |b| self.inner.apply_logged(b))
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
    fn get_many(&self, keys: &[OffsetKey]) -> Result<Vec<Option<Offset>>> {
        self.inner.get_many(keys)
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
    fn durable(&self) -> bool {
        self.inner.durable()
    }
    fn atomic(&self) -> bool {
        self.inner.atomic()
    }
    fn keeps_change_times(&self) -> bool {
        self.inner.keeps_change_times()
    }
    fn change_times(&self, keys: &[OffsetKey]) -> Result<Vec<Option<u64>>> {
        self.inner.change_times(keys)
    }
}
