//! A backend in one file: offsets in a `BTreeMap` behind a `Mutex`, checked by the whole
//! conformance suite from `main`.
//!
//! ```text
//! cargo run --release --example custom_backend --features testkit
//! ```
//!
//! A backend implements [`OffsetStore`] and nothing else: the commit buffer's pipeline hooks
//! ([`CommitHooks`](connect_offsets::store::CommitHooks)) all have defaults that are right for any
//! store. What it must get right: `apply` is all-or-nothing and skips a batch its writer already
//! applied, and the writer's seq is stored with the batch.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use connect_offsets::conformance::{self, ApplyFault, Harness};
use connect_offsets::store::{Capabilities, OffsetStore};
use connect_offsets::{Batch, Error, Offset, OffsetKey, Result};

/// Each key's offset with the time it was written; each writer's highest applied seq.
#[derive(Debug, Default)]
struct State {
    offsets: BTreeMap<OffsetKey, (Offset, u64)>,
    seqs: BTreeMap<String, u64>,
}

/// The store. Handles made by [`MapStore::handle`] share its data, as a reopen would.
#[derive(Debug, Default)]
struct MapStore {
    state: Arc<Mutex<State>>,
    /// The test seam the suite's failure check installs ([`ApplyFault`]).
    fault: Option<Arc<dyn ApplyFault>>,
}

impl MapStore {
    fn handle(&self, fault: Option<Arc<dyn ApplyFault>>) -> MapStore {
        let state = Arc::clone(&self.state);
        MapStore { state, fault }
    }

    fn lock(&self) -> Result<MutexGuard<'_, State>> {
        (self.state.lock()).map_err(|_| Error::store("btreemap", "lock poisoned by a panic"))
    }
}

impl OffsetStore for MapStore {
    fn kind(&self) -> &'static str {
        "btreemap"
    }

    fn capabilities(&self) -> Capabilities {
        // Gone with the process; atomic; the time of each write kept.
        Capabilities::DEFAULT.with_change_times(true)
    }

    fn apply(&self, batch: &Batch) -> Result<()> {
        // Every step that may fail comes before the first change: all or nothing.
        if let Some(fault) = &self.fault {
            for i in 0..batch.entries.len() {
                fault.before_entry(batch, i)?;
            }
            fault.before_commit(batch)?;
        }
        let now = SystemTime::now().duration_since(UNIX_EPOCH);
        let now = now.map_or(0, |d| d.as_millis() as u64);
        let mut state = self.lock()?;
        if batch.seq != 0 {
            let applied = state.seqs.entry(batch.writer.clone()).or_default();
            if batch.seq <= *applied {
                return Ok(()); // A replay: already applied.
            }
            *applied = batch.seq;
        }
        for (key, offset) in &batch.entries {
            // Removed first, so that the listing keeps the form this write gave the key.
            state.offsets.remove(key);
            if let Some(offset) = offset {
                let offset = offset.connect_normalized();
                state.offsets.insert(key.clone(), (offset, now));
            }
        }
        Ok(())
    }

    fn persist(&self) -> Result<()> {
        Ok(()) // Nothing outlives the process.
    }

    fn applied_seq(&self, writer: &str) -> Result<u64> {
        Ok(self.lock()?.seqs.get(writer).copied().unwrap_or(0))
    }

    fn writers(&self) -> Result<Vec<(String, u64)>> {
        let state = self.lock()?;
        Ok(state.seqs.iter().map(|(w, s)| (w.clone(), *s)).collect())
    }

    fn get(&self, key: &OffsetKey) -> Result<Option<Offset>> {
        Ok(self.lock()?.offsets.get(key).map(|(o, _)| o.clone()))
    }

    fn partitions(&self, namespace: &str) -> Result<Vec<(OffsetKey, Offset)>> {
        let state = self.lock()?;
        let of_namespace = state
            .offsets
            .iter()
            .filter(|(k, _)| k.namespace() == namespace);
        Ok(of_namespace
            .map(|(k, (o, _))| (k.clone(), o.clone()))
            .collect())
    }

    fn namespaces(&self) -> Result<Vec<String>> {
        let state = self.lock()?;
        let all: BTreeSet<&str> = state.offsets.keys().map(OffsetKey::namespace).collect();
        Ok(all.into_iter().map(str::to_string).collect())
    }

    fn change_times(&self, keys: &[OffsetKey]) -> Result<Vec<Option<u64>>> {
        let state = self.lock()?;
        Ok(keys
            .iter()
            .map(|k| state.offsets.get(k).map(|(_, t)| *t))
            .collect())
    }
}

/// Opens the store for the suite: each open is a handle on the same data.
#[derive(Default)]
struct MapHarness(MapStore);

impl Harness for MapHarness {
    fn open(&mut self, fault: Option<Arc<dyn ApplyFault>>) -> Result<Box<dyn OffsetStore>> {
        Ok(Box::new(self.0.handle(fault)))
    }
    fn reopen_keeps_data(&self) -> bool {
        false
    }
}

/// Runs the suite on the store (`tests/core/conformance.rs` calls this too).
pub fn main() {
    conformance::run_all(MapHarness::default);
    println!("the btreemap store passes the conformance suite");
}
