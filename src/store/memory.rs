//! The in-memory store: a map behind a lock. Volatile alone; under a
//! [`CommitBuffer`](crate::buffer::CommitBuffer) it survives restarts by log replay.
//!
//! Compact by design: each offset is one heap allocation holding the bytes Kafka Connect would write
//! for it (the partition's JSON and the offset's JSON, see `Entry`), in a hash set per connector.
//! A million small offsets take about 1.3 to 1.6 times their Connect key and value bytes
//! (`cargo bench --bench footprint`), where maps of decoded values took 5 to 10 times. Values are
//! decoded on `get`; what comes back is what Connect would read back (bytes as their Base64 string),
//! the same as from every other backend.

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, RwLock};

use super::{ApplyFault, BatchEntry, Capabilities, CommitHooks, OffsetStore};
use crate::codec::json;
use crate::model::{Batch, OffsetKey};
use crate::{Error, Offset, Partition, Result};

/// Offsets in a map in this process's memory.
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Arc<RwLock<State>>,
    fault: Option<Arc<dyn ApplyFault>>,
}

#[derive(Debug, Default)]
struct State {
    namespaces: BTreeMap<String, HashSet<Entry>>,
    seqs: HashMap<String, u64>,
    /// Where each entry is built, kept from apply to apply: a history record's value is tens of
    /// KB, and growing and freeing a buffer that large costs page faults and a heap consolidation.
    scratch: Vec<u8>,
}

/// One stored offset, in one allocation:
///
/// ```text
/// u64 LE  when it was written, milliseconds since the Unix epoch (for `expire`)
/// u32 LE  canonical partition length, top bit set when the caller's member order differs
/// ...     canonical partition JSON (members sorted: the key's structural identity, see OffsetKey::id)
/// [u32 LE length, partition JSON in the caller's member order]   only with the top bit
/// ...     the offset's JSON, as Connect writes it
/// ```
///
/// Hashed and compared by the canonical partition alone, so a lookup hashes the
/// bytes the key already carries and never decodes.
#[derive(Debug, Clone)]
struct Entry(Box<[u8]>);

/// The largest scratch buffer kept between applies (one huge offset need not stay resident).
const MAX_SCRATCH: usize = 1 << 20;

const ORDERED_BIT: u32 = 1 << 31;
/// Where the partition length starts: after the write time.
const AT: usize = 8;

impl Entry {
    fn new(key: &OffsetKey, offset: &Offset, written_ms: u64, scratch: &mut Vec<u8>) -> Entry {
        let canonical = canonical_part(key);
        scratch.clear();
        scratch.extend_from_slice(&written_ms.to_le_bytes());
        let mut header = canonical.len() as u32;
        // The caller's order, when it is not the sorted one (Connect's bytes keep it; so do we).
        // (A partition of one member has one order: only larger ones can differ.)
        let ordered = key.partition().filter(|p| p.len() > 1).and_then(|p| {
            let mut own = Vec::new();
            json::encode_map(p, &mut own);
            (own != canonical).then_some(own)
        });
        if ordered.is_some() {
            header |= ORDERED_BIT;
        }
        scratch.extend_from_slice(&header.to_le_bytes());
        scratch.extend_from_slice(canonical);
        if let Some(own) = &ordered {
            scratch.extend_from_slice(&(own.len() as u32).to_le_bytes());
            scratch.extend_from_slice(own);
        }
        json::encode_value(offset, scratch);
        Entry(scratch.as_slice().into())
    }

    fn header(&self) -> (usize, bool) {
        let h = u32::from_le_bytes(self.0[AT..AT + 4].try_into().expect("4 bytes"));
        ((h & !ORDERED_BIT) as usize, h & ORDERED_BIT != 0)
    }

    fn written_ms(&self) -> u64 {
        u64::from_le_bytes(self.0[..AT].try_into().expect("8 bytes"))
    }

    fn canonical(&self) -> &[u8] {
        let (len, _) = self.header();
        &self.0[AT + 4..AT + 4 + len]
    }

    /// (the partition in the caller's order, the offset) as bytes.
    fn parts(&self) -> (&[u8], &[u8]) {
        let (len, ordered) = self.header();
        let end = AT + 4 + len;
        if ordered {
            let own_len =
                u32::from_le_bytes(self.0[end..end + 4].try_into().expect("4 bytes")) as usize;
            let own = &self.0[end + 4..end + 4 + own_len];
            (own, &self.0[end + 4 + own_len..])
        } else {
            (&self.0[AT + 4..end], &self.0[end..])
        }
    }

    fn offset(&self) -> Result<Offset> {
        json::decode_map(self.parts().1, "offset value")
    }

    fn key(&self, namespace: &str) -> Result<OffsetKey> {
        let partition = self.parts().0;
        if partition == b"null" {
            return Ok(OffsetKey::null_partition(namespace));
        }
        let partition: Partition = json::decode_map(partition, "offset key")?;
        Ok(OffsetKey::new(namespace, partition))
    }
}

/// The canonical partition bytes of a key: its structural identity without the namespace prefix.
fn canonical_part(key: &OffsetKey) -> &[u8] {
    &key.id()[4 + key.namespace().len()..]
}

/// An [`Entry`] is hashed and compared by its canonical partition bytes alone, so a set of entries
/// is looked up by the canonical bytes a key carries.
impl Borrow<[u8]> for Entry {
    fn borrow(&self) -> &[u8] {
        self.canonical()
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.canonical() == other.canonical()
    }
}
impl Eq for Entry {}
impl Hash for Entry {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.canonical().hash(state)
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The same store with a fault seam inside `apply` (tests).
    pub fn with_fault(mut self, fault: Arc<dyn ApplyFault>) -> Self {
        self.fault = Some(fault);
        self
    }

    /// Another handle on the same data, with a fault seam inside its `apply` (tests).
    pub fn shared_with_fault(&self, fault: Arc<dyn ApplyFault>) -> Self {
        MemoryStore {
            state: Arc::clone(&self.state),
            fault: Some(fault),
        }
    }

    fn read(&self) -> Result<std::sync::RwLockReadGuard<'_, State>> {
        self.state
            .read()
            .map_err(|_| Error::store("memory", "lock poisoned by a panic in another thread"))
    }
}

impl State {
    fn get(&self, key: &OffsetKey) -> Result<Option<Offset>> {
        self.namespaces
            .get(key.namespace())
            .and_then(|ns| ns.get(canonical_part(key)))
            .map(Entry::offset)
            .transpose()
    }
}

impl OffsetStore for MemoryStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::DEFAULT
            .with_durable(false)
            // Unless another handle shares the data (`shared_with_fault`).
            .with_sole_writer(Arc::strong_count(&self.state) == 1)
            // The time of the `apply` that wrote each offset: batches replayed from a commit
            // buffer's log at open count as written then.
            .with_change_times(true)
    }

    fn apply(&self, batch: &Batch) -> Result<()> {
        self.apply_extended(batch, &[], false)
    }

    fn applied_seq(&self, writer: &str) -> Result<u64> {
        Ok(self.read()?.seqs.get(writer).copied().unwrap_or(0))
    }

    fn writers(&self) -> Result<Vec<(String, u64)>> {
        let mut w: Vec<_> = self
            .read()?
            .seqs
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        w.sort();
        Ok(w)
    }

    fn get(&self, key: &OffsetKey) -> Result<Option<Offset>> {
        self.read()?.get(key)
    }

    fn get_many(&self, keys: &[OffsetKey]) -> Result<Vec<Option<Offset>>> {
        let state = self.read()?;
        keys.iter().map(|k| state.get(k)).collect()
    }

    fn partitions(&self, namespace: &str) -> Result<Vec<(OffsetKey, Offset)>> {
        let state = self.read()?;
        let mut out = Vec::new();
        if let Some(ns) = state.namespaces.get(namespace) {
            out.reserve(ns.len());
            for e in ns {
                out.push((e.key(namespace)?, e.offset()?));
            }
        }
        drop(state);
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    fn namespaces(&self) -> Result<Vec<String>> {
        Ok(self.read()?.namespaces.keys().cloned().collect())
    }

    fn persist(&self) -> Result<()> {
        Ok(())
    }

    fn change_times(&self, keys: &[OffsetKey]) -> Result<Vec<Option<u64>>> {
        let state = self.read()?;
        Ok(keys
            .iter()
            .map(|k| {
                state
                    .namespaces
                    .get(k.namespace())
                    .and_then(|ns| ns.get(canonical_part(k)))
                    .map(Entry::written_ms)
            })
            .collect())
    }

    fn hooks(&self) -> Option<&dyn CommitHooks> {
        Some(self)
    }
}

impl CommitHooks for MemoryStore {
    fn apply_extended(&self, batch: &Batch, extra: &[BatchEntry], _logged: bool) -> Result<()> {
        if self.fault.is_some() && !extra.is_empty() {
            // The fault seam is shown the whole batch, as it is staged.
            return self.apply(&super::extended(batch, extra));
        }
        if let Some(fault) = &self.fault {
            for i in 0..batch.entries.len() {
                fault.before_entry(batch, i)?;
            }
            fault.before_commit(batch)?;
        }
        let mut state = self
            .state
            .write()
            .map_err(|_| Error::store("memory", "lock poisoned by a panic in another thread"))?;
        if batch.seq != 0 {
            let applied = state.seqs.get(&batch.writer).copied().unwrap_or(0);
            if batch.seq <= applied {
                return Ok(());
            }
            state.seqs.insert(batch.writer.clone(), batch.seq);
        }
        let mut scratch = std::mem::take(&mut state.scratch);
        let now = crate::time::now_ms();
        for (key, offset) in batch
            .entries
            .iter()
            .chain(extra.iter().map(|(k, v)| (k, v)))
        {
            match offset {
                Some(offset) => {
                    let entry = Entry::new(key, offset, now, &mut scratch);
                    let ns = match state.namespaces.get_mut(key.namespace()) {
                        Some(ns) => ns,
                        None => state
                            .namespaces
                            .entry(key.namespace().to_owned())
                            .or_default(),
                    };
                    ns.replace(entry);
                }
                None => {
                    if let Some(ns) = state.namespaces.get_mut(key.namespace()) {
                        ns.remove(canonical_part(key));
                        if ns.is_empty() {
                            state.namespaces.remove(key.namespace());
                        }
                    }
                }
            }
        }
        if scratch.capacity() <= MAX_SCRATCH {
            state.scratch = scratch;
        }
        Ok(())
    }

    /// A copy of each entry's bytes, taken under the lock (a copy, not a decoding); decoded when
    /// read.
    fn frozen(&self) -> Result<super::FrozenState> {
        let state = self.read()?;
        let taken: Vec<(String, Vec<Entry>)> = state
            .namespaces
            .iter()
            .map(|(ns, set)| (ns.clone(), set.iter().cloned().collect()))
            .collect();
        drop(state);
        Ok(Box::new(move || {
            let mut out = Vec::with_capacity(taken.iter().map(|(_, e)| e.len()).sum());
            for (ns, entries) in taken {
                let start = out.len();
                for e in entries {
                    out.push((e.key(&ns)?, e.offset()?));
                }
                out[start..].sort_by(|a, b| a.0.cmp(&b.0));
            }
            Ok(out)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(store: &MemoryStore, seq: u64, entries: Vec<(OffsetKey, Option<Offset>)>) {
        store.apply(&Batch::new("w", seq, entries)).unwrap();
    }

    #[test]
    fn member_order_is_one_key_and_the_last_written_order_is_returned() {
        let store = MemoryStore::new();
        let ab = OffsetKey::new("c", Partition::new().with("a", 1).with("b", "x"));
        let ba = OffsetKey::new("c", Partition::new().with("b", "x").with("a", 1));
        apply(
            &store,
            1,
            vec![(ab.clone(), Some(Offset::new().with("p", 1)))],
        );
        assert_eq!(store.get(&ba).unwrap(), Some(Offset::new().with("p", 1)));
        apply(
            &store,
            2,
            vec![(ba.clone(), Some(Offset::new().with("p", 2)))],
        );
        let all = store.partitions("c").unwrap();
        assert_eq!(all.len(), 1, "{all:?}");
        assert_eq!(all[0].1, Offset::new().with("p", 2));
        // The caller's member order survives (Connect's key bytes keep it).
        assert_eq!(all[0].0.connect_key(), br#"["c",{"b":"x","a":1}]"#.to_vec());
        apply(&store, 3, vec![(ab, None)]);
        assert_eq!(store.get(&ba).unwrap(), None);
        assert!(store.namespaces().unwrap().is_empty());
    }

    #[test]
    fn values_come_back_as_connect_reads_them() {
        let store = MemoryStore::new();
        let key = OffsetKey::new("c", Partition::new().with("bytes", vec![1u8, 2, 255]));
        let null = OffsetKey::null_partition("c");
        let offset = Offset::new()
            .with("b", vec![0u8, 1])
            .with("nan", f64::NAN)
            .with("f", 1e20)
            .with("neg0", -0.0)
            .with("s", "é😀\u{1}")
            .with("t", true)
            .with("n", crate::Value::Null);
        apply(
            &store,
            1,
            vec![
                (key.clone(), Some(offset.clone())),
                (null.clone(), Some(Offset::new().with("i", i64::MIN))),
            ],
        );
        assert_eq!(store.get(&key).unwrap(), Some(offset.connect_normalized()));
        assert_eq!(
            store.get(&null).unwrap(),
            Some(Offset::new().with("i", i64::MIN))
        );
        let listed = store.partitions("c").unwrap();
        assert_eq!(listed.len(), 2);
        assert!(
            listed
                .iter()
                .any(|(k, _)| k == &null && k.partition().is_none())
        );
        // The bytes partition is listed as Connect reads it back (a Base64 string), the same key.
        assert!(listed.iter().any(|(k, _)| k == &key));
        // An old batch is not applied again.
        apply(&store, 1, vec![(key.clone(), None)]);
        assert!(store.get(&key).unwrap().is_some());
    }
}
