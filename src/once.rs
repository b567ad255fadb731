//! Overrides that apply once: offsets to set or reset, carrying an id, that a worker's configuration
//! (or an operator's `import --once` / `reset --once`) may give again and again without applying
//! them twice.
//!
//! The id is recorded as an offset of its own, the **marker**, in the reserved namespace
//! [`ONCE_NAMESPACE`]: partition `{"id":"<id>"}`, offset
//! `{"by":"<writer>","entries":N,"at_ms":T,"digest":"<hex>"}`. The digest (of the entries)
//! tells whether a later run with the same id brings the same offsets: one that brings others is
//! told so rather than told that they are in (a marker written before digests says nothing).
//! It travels in the same [`Batch`](crate::Batch) as the override's entries, so every backend's
//! atomic `apply` records it with them, and it survives wherever offsets survive: a memory store's
//! write-ahead log and its compaction snapshot, RocksDB, a compacted Kafka topic (nobody else writes
//! its key and it is never a tombstone), `export`, `import` and `migrate`. Resetting the marker
//! (`reset --connector __connect-offsets-once --partition '{"id":"X"}'`) lets id X apply again.
//!
//! ## Processes that race
//! "Check the marker, then write" is safe where one process at a time holds the store (RocksDB's
//! directory lock; a worker's commit buffer over its own store). Kafka has no compare-and-set, so
//! a tool (the crate's does) opens the topic with `exclusive.id=once-<digest of the id>` added:
//! the handle's writes go through a transactional producer whose `transactional.id` derives from
//! the override id, initialized *before* the topic is read. Of two processes with one id, the one
//! initialized later fences the other; the fenced one's transaction is aborted (nothing of it is
//! written) and its next step fails with [`Error::Fenced`]. So a write commits only if no other
//! process of the id initialized between this one's initialization and its commit, and a process
//! that initializes after a commit reads that commit's marker: whatever the interleaving, one
//! process applies the override and every other finds the marker or is fenced (the CLI then reads
//! the topic again, from new handles, until the winner's marker is in).
//! With `write.mode=idempotent` there are no transactions and nothing is fenced: run such
//! overrides one at a time.

use crate::store::{OffsetStore, OffsetStoreExt};
use crate::{Error, Offset, OffsetKey, Result};

pub use crate::namespaces::ONCE_NAMESPACE;

pub(crate) mod marker;

pub(crate) use marker::{entries_digest, marker_key, validate_id};

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
    digest: String,
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
    /// An override with a valid id (not empty, at most 200 characters, no control characters, no
    /// leading or trailing whitespace). Refuses entries in [`ONCE_NAMESPACE`] (an override must not
    /// forge or erase markers) and a key named twice (which value would win?).
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
        let digest = entries_digest(&entries);
        Ok(OnceOverride {
            id,
            entries,
            digest,
        })
    }

    /// The same override with `digest` recorded in its marker instead of its entries' digest: for
    /// an override whose entries depend on what the store holds (`reset --all`, `import
    /// --replace`), record a digest of what was asked so that asking again compares equal.
    pub fn with_digest(mut self, digest: impl Into<String>) -> Self {
        self.digest = digest.into();
        self
    }

    /// The digest its marker records: its entries' (whatever their order) unless
    /// [`with_digest`](Self::with_digest) gave another.
    pub fn digest(&self) -> &str {
        &self.digest
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

    /// The marker entry: who applied the override, how many offsets it named, when, and the digest.
    fn marker(&self, by: &str) -> (OffsetKey, Option<Offset>) {
        let at_ms = crate::time::now_ms() as i64;
        let marker = Offset::new()
            .with("by", by)
            .with("entries", self.entries.len() as i64)
            .with("at_ms", at_ms)
            .with("digest", self.digest.as_str());
        (marker_key(&self.id), Some(marker))
    }

    /// Writes the override and its marker in one unsequenced atomic batch, unless `store` already
    /// holds the marker (for tools; a worker's override goes through its commit buffer). On a store
    /// that is not [atomic](crate::store::Capabilities), the marker is written after the entries.
    ///
    /// Safe against other processes applying the same id when `store` was opened with the id's
    /// `exclusive.id` (see [Processes that race](self#processes-that-race)): then the write of a
    /// process that lost the race fails with [`Error::Fenced`] and writes nothing; read the store
    /// again (a new handle) to find the winner's marker.
    pub fn apply_to(&self, store: &dyn OffsetStore, by: &str) -> Result<OnceOutcome> {
        if self.is_applied(store)? {
            return Ok(OnceOutcome::AlreadyApplied);
        }
        if store.capabilities().atomic {
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
    use super::marker::{MAX_ID_CHARS, digest_matches, digest_of, store_url};
    use super::*;
    use crate::Partition;
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
    fn the_digest_is_of_the_offsets_not_their_spelling_and_the_marker_records_it() {
        let k = |a: i64, b: i64| OffsetKey::new("c", Partition::new().with("a", a).with("b", b));
        let reordered = OffsetKey::new("c", Partition::new().with("b", 2).with("a", 1));
        let o = |x: i64| Offset::new().with("x", x).with("y", "z");
        let swapped = Offset::new().with("y", "z").with("x", 1);
        let one = vec![(k(1, 2), Some(o(1))), (k(3, 4), None)];
        let same = vec![(k(3, 4), None), (reordered, Some(swapped))];
        assert_eq!(entries_digest(&one), entries_digest(&same));
        for other in [
            vec![(k(1, 2), Some(o(2))), (k(3, 4), None)],
            vec![(k(1, 2), Some(o(1))), (k(3, 4), Some(o(0)))],
            vec![(k(1, 2), Some(o(1)))],
        ] {
            assert_ne!(entries_digest(&one), entries_digest(&other), "{other:?}");
        }
        assert_eq!(entries_digest(&one).len(), 32);
        // Frozen: a marker written today must compare equal after any upgrade.
        assert_eq!(digest_of(b""), "6c62272e07bb014262b821756295c58d");

        let store = MemoryStore::new();
        let once = OnceOverride::new("d", one.clone()).unwrap();
        once.apply_to(&store, "t").unwrap();
        let marker = store.get(&marker_key("d")).unwrap().unwrap();
        assert_eq!(digest_matches(&marker, &entries_digest(&same)), Some(true));
        assert_eq!(digest_matches(&marker, &digest_of(b"x")), Some(false));
        let old = Offset::new()
            .with("by", "t")
            .with("entries", 2)
            .with("at_ms", 1);
        assert_eq!(digest_matches(&old, &entries_digest(&one)), None);
        let asked = once.with_digest(digest_of(b"reset --all c"));
        assert_eq!(asked.digest(), digest_of(b"reset --all c"));
    }

    #[test]
    fn a_kafka_url_gets_an_exclusive_id_of_the_override() {
        let url = store_url("kafka://h:1/t", "reset-1").unwrap();
        let want = format!("kafka://h:1/t?exclusive.id=once-{}", digest_of(b"reset-1"));
        assert_eq!(url, want);
        let url = store_url("kafka://h:1/t?timeout.ms=5", "reset-1").unwrap();
        assert!(url.ends_with(&format!("&exclusive.id=once-{}", digest_of(b"reset-1"))));
        for kept in ["rocksdb:///tmp/x", "kafka://h:1/t?exclusive.id=mine"] {
            assert_eq!(store_url(kept, "reset-1").unwrap(), kept);
        }
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
