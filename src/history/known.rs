//! What the store holds for each partition a [`HistoryStore`](super::HistoryStore) records, as
//! the Connect JSON of its offset: a batch's "before" values without a read of the store.
//!
//! Only a store that nothing else writes while it is open
//! ([`sole_writer`](crate::store::Capabilities::sole_writer)) is remembered across batches: there
//! what the recorder last wrote or read is what the store holds. Any other store (Kafka, which
//! other processes write) is read again for every batch, as before.

use crate::codec::json;
use indexmap::IndexMap;

use crate::Result;
use crate::model::{BuildKeyHasher, OffsetKey};
use crate::store::OffsetStore;

/// Partitions remembered at most (about 100 bytes each): past this the map starts over, and the
/// partitions it needs again are read from the store.
const MAX_KNOWN: usize = 1_000_000;

/// The offsets a store holds, by partition: its Connect JSON, or `None` when it holds none. A
/// batch looks each partition up once ([`fill`](Known::fill)) and then goes by its slot.
#[derive(Debug, Default)]
pub(super) struct Known {
    offsets: IndexMap<OffsetKey, Option<Vec<u8>>, BuildKeyHasher>,
}

impl Known {
    /// The slot of each of `keys`, reading from `store` the partitions not known yet. What was
    /// known is forgotten first unless `store` is its only writer (or the map is full).
    pub(super) fn fill(
        &mut self,
        store: &dyn OffsetStore,
        keys: &[&OffsetKey],
    ) -> Result<Vec<usize>> {
        if !store.capabilities().sole_writer || self.offsets.len() + keys.len() > MAX_KNOWN {
            self.offsets.clear();
        }
        let mut slots = Vec::with_capacity(keys.len());
        let mut missing = Vec::new();
        for key in keys {
            let (slot, held) = match self.offsets.get_full(*key) {
                Some((slot, _, _)) => (slot, true),
                None => (self.offsets.insert_full((*key).clone(), None).0, false),
            };
            slots.push(slot);
            if !held {
                missing.push((slot, (*key).clone()));
            }
        }
        if missing.is_empty() {
            return Ok(slots);
        }
        let read: Vec<OffsetKey> = missing.iter().map(|(_, k)| k.clone()).collect();
        let offsets = match store.get_many(&read) {
            Ok(offsets) => offsets,
            Err(e) => {
                // Not read, so not known: the slots just made go again (the newest, at the end).
                self.offsets.truncate(self.offsets.len() - missing.len());
                return Err(e);
            }
        };
        for ((slot, _), offset) in missing.iter().zip(offsets) {
            self.offsets[*slot] = offset.map(|o| {
                let mut out = Vec::new();
                json::encode_value(&o, &mut out);
                out
            });
        }
        Ok(slots)
    }

    /// What the store holds in `slot`, as [`fill`](Self::fill) gave it.
    pub(super) fn get(&self, slot: usize) -> Option<&[u8]> {
        self.offsets[slot].as_deref()
    }

    /// The store took a batch that set the partition in `slot` to `json` (`None`: reset it).
    pub(super) fn wrote(&mut self, slot: usize, json: Option<&[u8]>) {
        match (&mut self.offsets[slot], json) {
            // The bytes go where the old ones were: no allocation once a partition is known.
            (Some(held), Some(json)) => {
                held.clear();
                held.extend_from_slice(json);
            }
            (held, json) => *held = json.map(<[u8]>::to_vec),
        }
    }

    /// Forgets everything: after a write that failed, which may have changed any of its
    /// partitions or none (a store that is not atomic), and before a restore, which replaces
    /// offsets wholesale.
    pub(super) fn clear(&mut self) {
        self.offsets.clear();
    }
}
