//! The in-memory store: a map behind a lock. Volatile alone; under a
//! [`CommitBuffer`](crate::buffer::CommitBuffer) it survives restarts by log replay.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use super::{ApplyFault, OffsetStore};
use crate::model::{Batch, KeyMap, OffsetKey};
use crate::{Error, Offset, Result};

/// Offsets in a map in this process's memory.
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Arc<RwLock<State>>,
    fault: Option<Arc<dyn ApplyFault>>,
}

#[derive(Debug, Default)]
struct State {
    namespaces: BTreeMap<String, KeyMap<Offset>>,
    seqs: HashMap<String, u64>,
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

impl OffsetStore for MemoryStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    fn apply(&self, batch: &Batch) -> Result<()> {
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
        for (key, offset) in &batch.entries {
            match offset {
                Some(offset) => {
                    let ns = match state.namespaces.get_mut(key.namespace()) {
                        Some(ns) => ns,
                        None => state
                            .namespaces
                            .entry(key.namespace().to_owned())
                            .or_default(),
                    };
                    // Store what Connect would read back, so every backend returns the same values.
                    let offset = if offset.needs_normalizing() {
                        offset.connect_normalized()
                    } else {
                        offset.clone()
                    };
                    ns.insert(key.clone(), offset);
                }
                None => {
                    if let Some(ns) = state.namespaces.get_mut(key.namespace()) {
                        ns.remove(key);
                        if ns.is_empty() {
                            state.namespaces.remove(key.namespace());
                        }
                    }
                }
            }
        }
        Ok(())
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
        Ok(self
            .read()?
            .namespaces
            .get(key.namespace())
            .and_then(|ns| ns.get(key))
            .cloned())
    }

    fn get_many(&self, keys: &[OffsetKey]) -> Result<Vec<Option<Offset>>> {
        let state = self.read()?;
        Ok(keys
            .iter()
            .map(|k| {
                state
                    .namespaces
                    .get(k.namespace())
                    .and_then(|ns| ns.get(k))
                    .cloned()
            })
            .collect())
    }

    fn partitions(&self, namespace: &str) -> Result<Vec<(OffsetKey, Offset)>> {
        let mut out: Vec<_> = self
            .read()?
            .namespaces
            .get(namespace)
            .map(|ns| ns.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    fn namespaces(&self) -> Result<Vec<String>> {
        Ok(self.read()?.namespaces.keys().cloned().collect())
    }

    fn persist(&self) -> Result<()> {
        Ok(())
    }

    fn durable(&self) -> bool {
        false
    }
}
