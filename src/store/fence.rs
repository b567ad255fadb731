//! Fences: what a tool writes is never undone by the replay of a writer's log.
//!
//! A commit buffer may acknowledge a batch once its log holds it and apply it to the store later;
//! a crash in between leaves batches only the log holds, replayed at the writer's next open. A
//! tool that writes the store in the meantime (set, reset, import, rewind, expire, `serve`) wrote
//! after those batches were logged, so its write must win over them. Every unsequenced write
//! ([`OffsetStoreExt::write`](super::OffsetStoreExt::write)) therefore records, in the same
//! atomic batch and for each writer the store knows, a **fence** per key it writes: the value it
//! wrote. A writer's recovery skips a logged entry whose key carries one of its fences while the
//! store still holds the fenced value (nothing wrote the key since), and drops its fences once its
//! log is replayed. A reset of a whole connector (`reset --all`, `import --replace`) fences the
//! connector too, so a partition that only the log knows stays reset.
//!
//! Fences live in the reserved namespace [`FENCES_NAMESPACE`]: partition
//! `{"writer":W,"key":"<Connect's key>"}` or `{"writer":W,"connector":C}`, offset
//! `{"value":"<the offset's JSON, or null>","applied":N,"at_ms":T}` (`applied`: the writer's
//! applied seq when the tool wrote). See docs/design.md, "A tool's write and a writer's log".

use std::collections::{HashMap, HashSet};

use super::{BatchEntry, OffsetStore};
use crate::codec::json;
use crate::model::{Batch, Offset, OffsetKey, Partition, Value};
use crate::{Error, Result};

pub use crate::namespaces::FENCES_NAMESPACE;

fn key_text(key: &OffsetKey) -> String {
    String::from_utf8_lossy(&key.connect_key()).into_owned()
}

fn key_fence(writer: &str, key: &OffsetKey) -> OffsetKey {
    OffsetKey::new(
        FENCES_NAMESPACE,
        Partition::new()
            .with("writer", writer)
            .with("key", key_text(key)),
    )
}

fn connector_fence(writer: &str, connector: &str) -> OffsetKey {
    OffsetKey::new(
        FENCES_NAMESPACE,
        Partition::new()
            .with("writer", writer)
            .with("connector", connector),
    )
}

fn fence_value(value: Option<&Offset>, applied: u64, at_ms: i64) -> Offset {
    let mut json = Vec::new();
    match value {
        Some(o) => json::encode_value(o, &mut json),
        None => json.extend_from_slice(b"null"),
    }
    Offset::new()
        .with("value", String::from_utf8_lossy(&json).into_owned())
        .with("applied", applied as i64)
        .with("at_ms", at_ms)
}

/// The fences an unsequenced write of `entries` records: one per key and writer the store knows
/// (`connectors`: whole connectors the write resets, fenced as such). Empty when the store has
/// no sequenced writer.
pub(crate) fn fences<S: OffsetStore + ?Sized>(
    store: &S,
    entries: &[BatchEntry],
    connectors: &[&str],
) -> Result<Vec<BatchEntry>> {
    let writers = store.writers()?;
    if writers.is_empty() {
        return Ok(Vec::new());
    }
    let at_ms = crate::time::now_ms() as i64;
    let mut out = Vec::new();
    for (writer, applied) in &writers {
        for (k, v) in entries {
            if crate::namespaces::is_reserved_namespace(k.namespace()) {
                continue;
            }
            let fence = fence_value(v.as_ref(), *applied, at_ms);
            out.push((key_fence(writer, k), Some(fence)));
        }
        for c in connectors {
            out.push((
                connector_fence(writer, c),
                Some(fence_value(None, *applied, at_ms)),
            ));
        }
    }
    Ok(out)
}

/// One writer's fences, as its recovery reads them.
#[derive(Debug, Default)]
pub(crate) struct Fences {
    /// Connect's key → the value the tool wrote.
    keys: HashMap<String, Option<Offset>>,
    /// Connectors a tool reset whole.
    connectors: HashSet<String>,
    /// Every fence's own key, for [`Fences::clear`].
    all: Vec<OffsetKey>,
}

impl Fences {
    /// The fences tools left for `writer`.
    pub(crate) fn read(store: &dyn OffsetStore, writer: &str) -> Result<Fences> {
        let mut fences = Fences::default();
        if store.writers()?.is_empty() {
            // No sequenced writer, so no tool wrote a fence (and a consumer group holds none).
            return Ok(fences);
        }
        for (k, v) in store.partitions(FENCES_NAMESPACE)? {
            let Some(p) = k.partition() else { continue };
            if p.get("writer") != Some(&Value::from(writer)) {
                continue;
            }
            if let Some(Value::String(key)) = p.get("key") {
                let value = match v.get("value") {
                    Some(Value::String(json)) => json::decode_value(json.as_bytes())
                        .map_err(|e| e.context(format!("fence of writer `{writer}` on {key}")))?,
                    _ => {
                        return Err(Error::InvalidData(format!(
                            "fence of writer `{writer}` on {key} has no value"
                        )));
                    }
                };
                fences.keys.insert(key.clone(), value);
            } else if let Some(Value::String(c)) = p.get("connector") {
                fences.connectors.insert(c.clone());
            }
            fences.all.push(k);
        }
        Ok(fences)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.all.is_empty()
    }

    /// `batch` without the entries a tool's write still fences: those of a fenced key while the
    /// store holds the fenced value. `None` when nothing is fenced.
    pub(crate) fn filter(&self, store: &dyn OffsetStore, batch: &Batch) -> Result<Option<Batch>> {
        if self.is_empty() {
            return Ok(None);
        }
        let (mut candidates, mut keys) = (Vec::new(), Vec::new());
        for (i, (k, _)) in batch.entries.iter().enumerate() {
            let fenced = match self.keys.get(&key_text(k)) {
                Some(value) => Some(value.clone()),
                None if self.connectors.contains(k.namespace()) => Some(None),
                None => None,
            };
            if let Some(value) = fenced {
                candidates.push((i, value));
                keys.push(k.clone());
            }
        }
        if candidates.is_empty() {
            return Ok(None);
        }
        let held = store.get_many(&keys)?;
        let skip: HashSet<usize> = candidates
            .iter()
            .zip(held)
            .filter(|((_, fenced), held)| fenced == held)
            .map(|((i, _), _)| *i)
            .collect();
        if skip.is_empty() {
            return Ok(None);
        }
        tracing::warn!(
            writer = %batch.writer,
            seq = batch.seq,
            skipped = skip.len(),
            "the log's batch holds offsets a tool replaced since it was logged; keeping the tool's"
        );
        let entries = batch
            .entries
            .iter()
            .enumerate()
            .filter(|(i, _)| !skip.contains(i))
            .map(|(_, (k, v))| (k.clone(), v.clone()));
        Ok(Some(Batch::new(batch.writer.clone(), batch.seq, entries)))
    }

    /// Removes these fences: the writer's log holds nothing logged before them any more.
    pub(crate) fn clear(self, store: &dyn OffsetStore) -> Result<()> {
        if self.all.is_empty() {
            return Ok(());
        }
        store.apply(&Batch::new("", 0, self.all.into_iter().map(|k| (k, None))))?;
        store.persist()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{MemoryStore, OffsetStoreExt};

    fn key(p: &str) -> OffsetKey {
        OffsetKey::new("c", Partition::new().with("p", p))
    }

    fn pos(n: i64) -> Option<Offset> {
        Some(Offset::new().with("pos", n))
    }

    /// A store writer `w` applied batch 1 to, and a batch 2 its log still holds.
    fn store_and_logged() -> (MemoryStore, Batch) {
        let store = MemoryStore::new();
        store
            .apply(&Batch::new(
                "w",
                1,
                [(key("a"), pos(1)), (key("b"), pos(1))],
            ))
            .unwrap();
        let logged = Batch::new(
            "w",
            2,
            [(key("a"), pos(2)), (key("b"), pos(2)), (key("new"), pos(2))],
        );
        (store, logged)
    }

    fn kept(store: &MemoryStore, logged: &Batch) -> Vec<OffsetKey> {
        let fences = Fences::read(store, "w").unwrap();
        let b = fences.filter(store, logged).unwrap();
        b.unwrap_or_else(|| logged.clone())
            .entries
            .keys()
            .cloned()
            .collect()
    }

    #[test]
    fn a_tool_write_keeps_its_keys_out_of_the_replay() {
        let (store, logged) = store_and_logged();
        store.write(vec![(key("a"), None)]).unwrap();
        assert_eq!(kept(&store, &logged), vec![key("b"), key("new")]);
        store.write(vec![(key("b"), pos(9))]).unwrap();
        assert_eq!(kept(&store, &logged), vec![key("new")]);
    }

    #[test]
    fn a_fence_the_key_moved_past_keeps_nothing_out() {
        let (store, logged) = store_and_logged();
        store.write(vec![(key("a"), pos(7))]).unwrap();
        // The writer, still running, applied a later batch over the tool's value.
        store
            .apply(&Batch::new("w", 2, [(key("a"), pos(8))]))
            .unwrap();
        let logged = Batch::new("w", 3, logged.entries.clone());
        assert_eq!(kept(&store, &logged), vec![key("a"), key("b"), key("new")]);
    }

    #[test]
    fn a_whole_reset_keeps_out_a_partition_only_the_log_knows() {
        let (store, logged) = store_and_logged();
        assert_eq!(store.reset_namespace("c").unwrap(), 2);
        assert!(kept(&store, &logged).is_empty());
    }

    #[test]
    fn clear_removes_the_writers_fences_only() {
        let (store, _) = store_and_logged();
        store
            .apply(&Batch::new("v", 1, [(key("z"), pos(1))]))
            .unwrap();
        store.write(vec![(key("a"), None)]).unwrap();
        Fences::read(&store, "w").unwrap().clear(&store).unwrap();
        assert!(Fences::read(&store, "w").unwrap().is_empty());
        assert!(!Fences::read(&store, "v").unwrap().is_empty());
    }

    #[test]
    fn no_writer_no_fence() {
        let store = MemoryStore::new();
        store.write(vec![(key("a"), pos(1))]).unwrap();
        assert!(store.partitions(FENCES_NAMESPACE).unwrap().is_empty());
    }
}
