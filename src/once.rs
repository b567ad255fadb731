//! Overrides that apply once: offsets to set or reset, carrying an id, that a worker's configuration
//! (or an operator's `import --once` / `reset --once`) may give again and again without applying
//! them twice.
//!
//! The id is recorded as an offset of its own, the **marker**, in the reserved namespace
//! [`ONCE_NAMESPACE`]: partition `{"id":"<id>"}`, offset `{"by":"<writer>","entries":N,"at_ms":T}`.
//! It travels in the same [`Batch`](crate::Batch) as the override's entries, so every backend's
//! atomic `apply` records it with them, and it survives wherever offsets survive: a memory store's
//! write-ahead log and its compaction snapshot, RocksDB, a compacted Kafka topic (nobody else writes
//! its key and it is never a tombstone), `export`, `import` and `migrate`. Resetting the marker
//! (`reset --connector __connect-offsets-once --partition '{"id":"X"}'`) lets id X apply again.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::store::{OffsetStore, OffsetStoreExt};
use crate::{Error, Offset, OffsetKey, Partition, Result};

/// The namespace the markers of applied overrides live in; no connector may use it.
pub const ONCE_NAMESPACE: &str = "__connect-offsets-once";

/// The longest id accepted, in characters (it becomes part of a record key).
pub const MAX_ID_CHARS: usize = 200;

/// Checks an override id: non-empty, at most [`MAX_ID_CHARS`] characters, no control characters,
/// no leading or trailing whitespace (both invisible in a configuration file).
pub fn validate_id(id: &str) -> Result<()> {
    let bad = |why: &str| Error::Input(format!("override id {id:?}: {why}"));
    if id.is_empty() {
        return Err(bad("must not be empty"));
    }
    let chars = id.chars().count();
    if chars > MAX_ID_CHARS {
        return Err(bad(&format!(
            "is {chars} characters long, at most {MAX_ID_CHARS} are allowed"
        )));
    }
    if let Some((i, c)) = id.chars().enumerate().find(|(_, c)| c.is_control()) {
        return Err(bad(&format!(
            "holds the control character U+{:04X} at position {i}",
            u32::from(c)
        )));
    }
    if id.trim() != id {
        return Err(bad("must not begin or end with whitespace"));
    }
    Ok(())
}

/// The key of the marker that records override `id` as applied.
pub fn marker_key(id: &str) -> OffsetKey {
    OffsetKey::new(ONCE_NAMESPACE, Partition::new().with("id", id))
}

/// Offsets to set (`Some`) or reset (`None`), applied once per id.
///
/// ```
/// use std::sync::Arc;
/// use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig};
/// use connect_offsets::once::OnceOverride;
/// use connect_offsets::{Offset, OffsetKey, OffsetStore, Partition};
///
/// let dir = tempfile::tempdir()?;
/// let key = OffsetKey::new("orders-source", Partition::new().with("table", "orders"));
/// let rewind = OnceOverride::new("rewind-1", vec![(key.clone(), Some(Offset::new().with("lsn", 0)))])?;
/// let mut config = CommitBufferConfig::new(dir.path().join("wal"));
/// config.once = Some(rewind);
/// let store: Arc<dyn OffsetStore> = Arc::new(connect_offsets::store::MemoryStore::new());
///
/// let buffer = CommitBuffer::open(Arc::clone(&store), config.clone())?; // applies it
/// assert_eq!(buffer.get(&key)?, Some(Offset::new().with("lsn", 0)));
/// buffer.offer(key.clone(), Offset::new().with("lsn", 7))?;
/// buffer.close()?;
/// drop(buffer); // lets go of the log directory
///
/// let buffer = CommitBuffer::open(store, config)?; // same id: changes nothing
/// assert_eq!(buffer.get(&key)?, Some(Offset::new().with("lsn", 7)));
/// buffer.close()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct OnceOverride {
    id: String,
    entries: Vec<(OffsetKey, Option<Offset>)>,
}

/// What [`OnceOverride::apply_to`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnceOutcome {
    /// The override was written now, with its marker.
    Applied,
    /// The store already held the marker: nothing written.
    AlreadyApplied,
}

impl OnceOverride {
    /// An override with a [valid](validate_id) id. Refuses entries in [`ONCE_NAMESPACE`] (an
    /// override must not forge or erase markers) and a key named twice (which value would win?).
    pub fn new(id: impl Into<String>, entries: Vec<(OffsetKey, Option<Offset>)>) -> Result<Self> {
        let id = id.into();
        validate_id(&id)?;
        let mut seen = std::collections::HashSet::new();
        for (k, _) in &entries {
            if k.namespace() == ONCE_NAMESPACE {
                return Err(Error::Input(format!(
                    "override `{id}` names the reserved namespace `{ONCE_NAMESPACE}`"
                )));
            }
            if !seen.insert(k.clone()) {
                return Err(Error::Input(format!(
                    "override `{id}` names partition {} of connector `{}` twice",
                    String::from_utf8_lossy(&k.connect_key()),
                    k.namespace()
                )));
            }
        }
        Ok(OnceOverride { id, entries })
    }

    /// The id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The offsets it sets or resets.
    pub fn entries(&self) -> &[(OffsetKey, Option<Offset>)] {
        &self.entries
    }

    /// True when `store` holds this override's marker.
    pub fn is_applied(&self, store: &dyn OffsetStore) -> Result<bool> {
        Ok(store.get(&marker_key(&self.id))?.is_some())
    }

    /// The entries plus the marker (written by `by`): what one atomic batch carries.
    pub fn batch_entries(&self, by: &str) -> Vec<(OffsetKey, Option<Offset>)> {
        let mut all = self.entries.clone();
        all.push(self.marker(by));
        all
    }

    /// The marker entry: who applied the override, how many offsets it named, and when.
    fn marker(&self, by: &str) -> (OffsetKey, Option<Offset>) {
        let at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let marker = Offset::new()
            .with("by", by)
            .with("entries", self.entries.len() as i64)
            .with("at_ms", at_ms);
        (marker_key(&self.id), Some(marker))
    }

    /// Writes the override and its marker in one unsequenced atomic batch, unless `store` already
    /// holds the marker (for tools; a worker's override goes through its commit buffer). On a store
    /// that is not [atomic](OffsetStore::atomic), the marker is written after the entries.
    pub fn apply_to(&self, store: &dyn OffsetStore, by: &str) -> Result<OnceOutcome> {
        if self.is_applied(store)? {
            return Ok(OnceOutcome::AlreadyApplied);
        }
        if store.atomic() {
            store.write(self.batch_entries(by))?;
        } else {
            // A failed write may leave any part of it (Kafka's idempotent mode): the marker goes
            // only once every entry is in, so a marker never stands for a partial override.
            if !self.entries.is_empty() {
                store.write(self.entries.clone())?;
            }
            store.write(vec![self.marker(by)])?;
        }
        Ok(OnceOutcome::Applied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    #[test]
    fn bad_ids_are_refused_with_the_reason() {
        for (id, why) in [
            ("", "must not be empty"),
            ("a\nb", "control character U+000A at position 1"),
            (" x", "whitespace"),
            ("x\t", "control character"),
        ] {
            let e = validate_id(id).unwrap_err().to_string();
            assert!(e.contains(why), "{id:?}: {e}");
        }
        let long = "x".repeat(MAX_ID_CHARS + 1);
        assert!(validate_id(&long).unwrap_err().to_string().contains("201"));
        validate_id("reset-2026-12-01 after bad deploy").unwrap();
        validate_id(&"é".repeat(MAX_ID_CHARS)).unwrap();
    }

    #[test]
    fn applies_once_per_id() {
        let store = MemoryStore::new();
        let key = OffsetKey::new("c", Partition::new().with("p", 1));
        let o = OnceOverride::new("one", vec![(key.clone(), Some(Offset::new().with("v", 1)))])
            .unwrap();
        assert_eq!(o.apply_to(&store, "t").unwrap(), OnceOutcome::Applied);
        store.set(key.clone(), Offset::new().with("v", 2)).unwrap();
        assert_eq!(
            o.apply_to(&store, "t").unwrap(),
            OnceOutcome::AlreadyApplied
        );
        assert_eq!(store.get(&key).unwrap(), Some(Offset::new().with("v", 2)));
        let two = OnceOverride::new("two", vec![(key.clone(), None)]).unwrap();
        assert_eq!(two.apply_to(&store, "t").unwrap(), OnceOutcome::Applied);
        assert_eq!(store.get(&key).unwrap(), None);
    }

    #[test]
    fn an_override_may_not_touch_markers_or_name_a_key_twice() {
        let m = marker_key("x");
        let e = OnceOverride::new("y", vec![(m, None)]).unwrap_err();
        assert!(e.to_string().contains(ONCE_NAMESPACE), "{e}");
        let k = OffsetKey::new("c", Partition::new().with("p", 1));
        let e = OnceOverride::new("y", vec![(k.clone(), None), (k, None)]).unwrap_err();
        assert!(e.to_string().contains("twice"), "{e}");
    }
}
