//! [`HistoryStore`]: any store, with every applied batch's changes recorded beside its offsets.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};

use super::known::Known;
use super::record::{self, CHANGES_PER_RECORD, Staged};
use super::{HISTORY_NAMESPACE, HistoryConfig};
use crate::codec::json;
use crate::model::{Batch, OffsetKey};
use crate::namespaces::is_reserved_namespace as is_reserved;
use crate::store::{BatchEntry, Capabilities, CommitHooks, OffsetStore, hooks};
use crate::time;
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
    recorder: Mutex<Recorder>,
}

/// What the recorder keeps between batches.
#[derive(Debug, Default)]
struct Recorder {
    index: Index,
    known: Known,
    /// The next batch, staged by [`prepare`](CommitHooks::prepare) ahead of its apply; every
    /// apply takes it, so that a batch staged before another write is staged again.
    prepared: Option<Prepared>,
}

/// A batch staged ahead of its apply.
#[derive(Debug)]
struct Prepared {
    batch: Arc<Batch>,
    stage: Stage,
}

/// A batch's recording but for its time and retention (the apply's): the slots in `known` of the
/// partitions it writes with their new offsets' JSON, and the changes' JSON of each record.
#[derive(Debug, Default)]
struct Stage {
    slots: Vec<usize>,
    to_json: Vec<u8>,
    spans: Vec<Option<Range<usize>>>,
    /// Connector, part and changes' JSON of each record, in order.
    records: Vec<(String, usize, String)>,
}

/// Stages `batch` from what `known` holds (reading `store` for partitions it does not know).
fn stage(known: &mut Known, store: &dyn OffsetStore, batch: &Batch) -> Result<Stage> {
    let offsets: Vec<(&OffsetKey, Option<&Offset>)> = batch
        .entries
        .iter()
        .filter(|(k, _)| !is_reserved(k.namespace()))
        .map(|(k, v)| (k, v.as_ref()))
        .collect();
    if offsets.is_empty() {
        return Ok(Stage::default());
    }
    let keys: Vec<&OffsetKey> = offsets.iter().map(|(k, _)| *k).collect();
    let slots = known.fill(store, &keys)?;
    // Each new offset's JSON once: it goes into the record and is remembered as the next "before".
    let mut to_json = Vec::with_capacity(32 * offsets.len());
    let spans: Vec<_> = offsets
        .iter()
        .map(|(_, to)| {
            to.map(|o| {
                let start = to_json.len();
                json::encode_value(o, &mut to_json);
                start..to_json.len()
            })
        })
        .collect();
    let after: Vec<Option<&[u8]>> = spans
        .iter()
        .map(|s| s.clone().map(|r| &to_json[r]))
        .collect();
    let mut changes: Vec<Staged<'_>> = Vec::with_capacity(offsets.len());
    for ((key, to), slot) in keys.iter().zip(&after).zip(&slots) {
        // Compared as Connect reads them: the same JSON is no move.
        let from = known.get(*slot);
        if from != *to {
            changes.push((key, from, *to));
        }
    }
    // One run of changes per connector, in the batch's order ([`read`](super::read) puts a
    // batch's partitions in key order): most batches are one connector's, and need no sort.
    let first = changes.first().map(|c| c.0.namespace());
    if changes.iter().any(|c| Some(c.0.namespace()) != first) {
        changes.sort_by(|a, b| a.0.namespace().cmp(b.0.namespace()));
    }
    let mut records = Vec::new();
    for changes in changes.chunk_by(|a, b| a.0.namespace() == b.0.namespace()) {
        let connector = changes[0].0.namespace();
        for (part, chunk) in changes.chunks(CHANGES_PER_RECORD).enumerate() {
            records.push((connector.to_string(), part, record::changes_json(chunk)));
        }
    }
    drop(changes);
    Ok(Stage {
        slots,
        to_json,
        spans,
        records,
    })
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
        self.push_record(at_us, key.clone(), record::record_bytes(key, value));
    }

    /// A record of `bytes` applied at `at_us`, newer than every one held.
    fn push_record(&mut self, at_us: i64, key: OffsetKey, bytes: u64) {
        self.bytes += bytes;
        self.last_at = self.last_at.max(at_us);
        self.records.push_back(Kept { at_us, key, bytes });
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
            recorder: Mutex::new(Recorder {
                index,
                ..Recorder::default()
            }),
        })
    }

    /// The retention this store keeps history for.
    pub fn config(&self) -> &HistoryConfig {
        &self.config
    }

    fn lock(&self) -> Result<MutexGuard<'_, Recorder>> {
        self.recorder
            .lock()
            .map_err(|_| Error::store("history", "lock poisoned by a panic in another thread"))
    }

    /// Applies `batch` with its history (`apply` stores a batch and entries to add to it).
    fn apply_with(
        &self,
        batch: &Batch,
        apply: impl Fn(&Batch, &[BatchEntry]) -> Result<()>,
    ) -> Result<()> {
        // A batch the store already holds changes nothing: nothing to record either.
        if batch.seq != 0 && batch.seq <= self.inner.applied_seq(&batch.writer)? {
            return apply(batch, &[]);
        }
        let mut guard = self.lock()?;
        let Recorder {
            index,
            known,
            prepared,
        } = &mut *guard;
        // Staged ahead for this very batch (nothing was written since): used as it is.
        let prepared = prepared.take().filter(|p| std::ptr::eq(&*p.batch, batch));
        if batch
            .entries
            .keys()
            .any(|k| k.namespace() == HISTORY_NAMESPACE)
        {
            // A restore (a compaction snapshot, an import or migrate of a store with history):
            // its records are kept as they are, and its changes were recorded where they happened.
            known.clear();
            apply(batch, &[])?;
            index.restore(
                batch
                    .entries
                    .iter()
                    .filter(|(k, _)| k.namespace() == HISTORY_NAMESPACE)
                    .map(|(k, v)| (k, v.as_ref())),
            );
            return Ok(());
        }
        let stage = match prepared {
            Some(p) => p.stage,
            None => stage(known, &*self.inner, batch)?,
        };
        if stage.slots.is_empty() {
            return apply(batch, &[]);
        }
        let now_us = time::now_us();
        // Records stay in order even when the clock steps back; retention goes by the clock, so
        // that records stamped ahead of it by a clock that jumped and was corrected do not age
        // out every real record behind them.
        let at_us = now_us.max(index.last_at + 1);
        let mut entries: Vec<BatchEntry> = Vec::new();
        let mut added = Vec::new();
        for (connector, part, changes) in stage.records {
            let key = record::record_key(&connector, &batch.writer, batch.seq, part, at_us);
            let value = record::record_value(at_us, changes);
            added.push((key.clone(), record::record_bytes(&key, &value)));
            entries.push((key, Some(value)));
        }
        let mut horizon = index.horizon;
        if horizon.is_none() && !added.is_empty() {
            // History starts just before this batch: its `from` values are what the store held
            // then, so a rewind reaches them; earlier moves were not recorded.
            horizon = Some(at_us - 1);
        }
        let new_bytes: u64 = added.iter().map(|(_, bytes)| bytes).sum();
        let pruned = index.expired(&self.config, now_us, new_bytes);
        for kept in index.records.iter().take(pruned) {
            entries.push((kept.key.clone(), None));
            horizon = horizon.max(Some(kept.at_us));
        }
        if horizon != index.horizon
            && let Some(h) = horizon
        {
            entries.push((record::horizon_key(), Some(record::horizon_value(h))));
        }
        // The batch's keys are a connector's, its additions history's: none is both.
        let applied = apply(batch, &entries);
        if let Err(e) = applied {
            known.clear();
            return Err(e);
        }
        for (slot, span) in stage.slots.iter().zip(&stage.spans) {
            known.wrote(*slot, span.clone().map(|r| &stage.to_json[r]));
        }
        for kept in index.records.drain(..pruned) {
            index.bytes -= kept.bytes;
        }
        for (key, bytes) in added {
            index.push_record(at_us, key, bytes);
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

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn apply(&self, batch: &Batch) -> Result<()> {
        self.apply_with(batch, |b, extra| {
            hooks(&*self.inner).apply_extended(b, extra, false)
        })
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
    fn change_times(&self, keys: &[OffsetKey]) -> Result<Vec<Option<u64>>> {
        self.inner.change_times(keys)
    }

    fn hooks(&self) -> Option<&dyn CommitHooks> {
        Some(self)
    }
}

impl CommitHooks for HistoryStore {
    fn apply_logged(&self, batch: &Batch) -> Result<()> {
        self.apply_with(batch, |b, extra| {
            hooks(&*self.inner).apply_extended(b, extra, true)
        })
    }
    fn prepare(&self, batch: &Arc<Batch>) -> bool {
        // A store others write is read at every batch, at its apply.
        if !self.inner.capabilities().sole_writer {
            return false;
        }
        let Ok(mut guard) = self.lock() else {
            return false;
        };
        let r = &mut *guard;
        let restore = batch
            .entries
            .keys()
            .any(|k| k.namespace() == HISTORY_NAMESPACE);
        // A failed read is left to the apply, which reads again and reports it.
        r.prepared = match restore {
            true => None,
            false => stage(&mut r.known, &*self.inner, batch)
                .ok()
                .map(|stage| Prepared {
                    batch: Arc::clone(batch),
                    stage,
                }),
        };
        true
    }
    fn admit(&self, writer: &str, key: &OffsetKey, offset: Option<&Offset>) -> Result<()> {
        hooks(&*self.inner).admit(writer, key, offset)
    }
    fn as_stored(&self, key: &OffsetKey, offset: &Offset) -> Result<Option<(OffsetKey, Offset)>> {
        hooks(&*self.inner).as_stored(key, offset)
    }
    fn frozen(&self) -> Result<crate::store::FrozenState> {
        hooks(&*self.inner).frozen()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{MemoryStore, OffsetStoreExt};
    use crate::{Partition, history};

    fn key() -> OffsetKey {
        OffsetKey::new("c", Partition::new().with("table", "a"))
    }

    fn batch(seq: u64, lsn: i64) -> Arc<Batch> {
        Arc::new(Batch::new(
            "w",
            seq,
            [(key(), Some(Offset::new().with("lsn", lsn)))],
        ))
    }

    /// The "before" of each of `store`'s changes, oldest first.
    fn froms(store: &HistoryStore) -> Vec<Option<Offset>> {
        let changes = history::read(store, "c").unwrap().changes;
        changes.into_iter().map(|c| c.from).collect()
    }

    fn store() -> HistoryStore {
        let config = HistoryConfig::parse("7d", None).unwrap();
        HistoryStore::open(Box::new(MemoryStore::new()), config).unwrap()
    }

    /// Marks the staged batch's record, so that a history holding the mark was written from it.
    fn mark_prepared(store: &HistoryStore) {
        let mut r = store.lock().unwrap();
        let prepared = r.prepared.as_mut().expect("a prepared batch");
        prepared.stage.records[0].2 = "[[{'table':'a'},{'lsn':-1},{'lsn':2}]]".into();
    }

    #[test]
    fn a_prepared_batch_is_applied_from_its_stage() {
        let store = store();
        store.apply(&batch(1, 1)).unwrap();
        let next = batch(2, 2);
        assert!(store.prepare(&next));
        mark_prepared(&store);
        store.apply(&next).unwrap();
        let marked = Some(Offset::new().with("lsn", -1));
        assert_eq!(froms(&store), vec![None, marked]);
        assert!(store.lock().unwrap().prepared.is_none());
    }

    #[test]
    fn a_stage_is_not_used_for_another_batch_or_after_a_write() {
        let store = store();
        store.apply(&batch(1, 1)).unwrap();
        // Another batch of the same seq and entries: staged again.
        assert!(store.prepare(&batch(2, 2)));
        mark_prepared(&store);
        store.apply(&batch(2, 2)).unwrap();
        // A write between the prepare and the apply: staged again, from what it wrote.
        let next = batch(3, 3);
        assert!(store.prepare(&next));
        mark_prepared(&store);
        store.set(key(), Offset::new().with("lsn", 7)).unwrap();
        store.apply(&next).unwrap();
        let lsn = |n: i64| Some(Offset::new().with("lsn", n));
        assert_eq!(froms(&store), vec![None, lsn(1), lsn(2), lsn(7)]);
    }
}
