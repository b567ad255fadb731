//! Moving offsets from one store to another.
//!
//! [`migrate`] makes every connector's offsets in the destination equal to the source's: partitions
//! missing or different are written, partitions the source lacks are reset. Each connector is one
//! atomic, unsequenced batch (all of its changes land or none), then both sides are read again and
//! compared: any difference is an error naming the connector and partition.
//!
//! When every connector is migrated, the writers' applied seqs are copied too (one empty sequenced
//! batch per writer), so a [`CommitBuffer`](crate::buffer::CommitBuffer) whose log moves with the
//! offsets replays only what the destination lacks instead of refusing to open for a gap.

use std::collections::HashMap;

use crate::model::{Batch, BuildKeyHasher, OffsetKey};
use crate::store::{OffsetStore, OffsetStoreExt, hooks};
use crate::{Error, Offset, Result};

/// One entry of a batch: a key and its offset, `None` for a reset.
pub type Entry = (OffsetKey, Option<Offset>);

/// What to migrate.
#[derive(Debug, Clone, Default)]
pub struct MigrateOptions {
    /// Only this connector (writer seqs are then left alone).
    pub connector: Option<String>,
    /// Compute and report the changes without writing anything.
    pub dry_run: bool,
    /// Migrate even when the source holds no offsets (of the connector, or at all) while the
    /// destination does: that resets them there, which a mistyped source must not do unasked.
    pub allow_empty_source: bool,
}

/// The changes one connector needs (or got).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectorChanges {
    /// The connector.
    pub connector: String,
    /// Partitions the source has and the destination lacks.
    pub added: usize,
    /// Partitions whose offsets differ.
    pub changed: usize,
    /// Partitions the destination has and the source lacks (reset in the destination).
    pub removed: usize,
    /// Partitions already equal.
    pub unchanged: usize,
}

impl ConnectorChanges {
    /// True when nothing is to be written.
    pub fn is_empty(&self) -> bool {
        self.added + self.changed + self.removed == 0
    }
}

/// What [`migrate`] did (or would do, in a dry run).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigrateReport {
    /// Per connector, in name order.
    pub connectors: Vec<ConnectorChanges>,
    /// Writers whose applied seq was (or would be) raised in the destination: name, old, new.
    pub writers: Vec<(String, u64, u64)>,
    /// Why the writers' seqs were not carried: the destination keeps none (a consumer group).
    pub writers_skipped: Option<String>,
    /// True when nothing was written.
    pub dry_run: bool,
}

/// The difference between one connector's offsets in two stores: the entries that make the
/// destination equal to the source, and the counts.
pub fn plan(
    from: &dyn OffsetStore,
    to: &dyn OffsetStore,
    connector: &str,
) -> Result<(ConnectorChanges, Vec<Entry>)> {
    let source = from.partitions(connector)?;
    let dest = to.partitions(connector)?;
    let mut dest_by_key: HashMap<&OffsetKey, &Offset, BuildKeyHasher> =
        HashMap::with_capacity_and_hasher(dest.len(), BuildKeyHasher);
    for (k, o) in &dest {
        dest_by_key.insert(k, o);
    }
    let mut changes = ConnectorChanges {
        connector: connector.to_string(),
        ..Default::default()
    };
    let mut entries = Vec::new();
    let to_hooks = hooks(to);
    for (k, o) in &source {
        // Matched as the destination will list it (a consumer group's partition numbers).
        let stored = to_hooks.as_stored(k, o)?;
        let (sk, so) = stored.as_ref().map_or((k, o), |(k, o)| (k, o));
        match dest_by_key.remove(sk) {
            None => {
                changes.added += 1;
                entries.push((k.clone(), Some(o.clone())));
            }
            Some(d) if !same_offset(so, d) => {
                changes.changed += 1;
                entries.push((k.clone(), Some(o.clone())));
            }
            Some(_) => changes.unchanged += 1,
        }
    }
    let mut extra: Vec<&OffsetKey> = dest_by_key.into_keys().collect();
    extra.sort();
    for k in extra {
        changes.removed += 1;
        entries.push((k.clone(), None));
    }
    Ok((changes, entries))
}

/// Offsets are equal when Kafka Connect would read back the same values (so `1` and `1.0` differ,
/// bytes equal their Base64 string, member order does not matter).
fn same_offset(a: &Offset, b: &Offset) -> bool {
    if a.needs_normalizing() || b.needs_normalizing() {
        a.connect_normalized() == b.connect_normalized()
    } else {
        a == b
    }
}

/// Compares one connector's offsets in both stores; returns a description of each difference
/// (at most `limit`) and how many there are.
pub fn compare(
    from: &dyn OffsetStore,
    to: &dyn OffsetStore,
    connector: &str,
    limit: usize,
) -> Result<(usize, Vec<String>)> {
    let (changes, entries) = plan(from, to, connector)?;
    let n = changes.added + changes.changed + changes.removed;
    let shown = entries
        .iter()
        .take(limit)
        .map(|(k, o)| match o {
            Some(o) => format!("{k:?} should be {o}"),
            None => format!("{k:?} should not exist"),
        })
        .collect();
    Ok((n, shown))
}

/// Migrates offsets from `from` to `to` (see the module docs).
pub fn migrate(
    from: &dyn OffsetStore,
    to: &dyn OffsetStore,
    options: &MigrateOptions,
) -> Result<MigrateReport> {
    let connectors = match &options.connector {
        Some(c) => vec![c.clone()],
        None => {
            let mut all = from.namespaces()?;
            for c in to.namespaces()? {
                if !all.contains(&c) {
                    all.push(c);
                }
            }
            // Fences and writers' records belong to the store they were written in.
            all.retain(|c| !crate::namespaces::is_store_local_namespace(c));
            all.sort();
            // History last: written after the connectors, the source's records replace those a
            // target with history makes of the migration's own writes (a batch carrying history
            // records is a restore, kept as it is).
            all.sort_by_key(|c| c == crate::history::HISTORY_NAMESPACE);
            all
        }
    };
    if !options.allow_empty_source {
        refuse_empty_source(from, to, options, &connectors)?;
    }
    let mut report = MigrateReport {
        dry_run: options.dry_run,
        ..Default::default()
    };
    let writers: Vec<(String, u64)> = match &options.connector {
        Some(_) => Vec::new(),
        None => from
            .writers()?
            .into_iter()
            .filter(|(w, _)| !w.is_empty())
            .collect(),
    };
    // Asked before anything is written: a destination that keeps no writer sequence (a consumer
    // group) takes the offsets without them, rather than failing once they are written. Any
    // other error of the question fails the migration.
    if let Some((w, _)) = writers.first()
        && let Err(e) = to.applied_seq(w)
    {
        if to.kind() != "kafka-group" {
            return Err(e.context(format!(
                "reading writer `{w}`'s applied seq in the {} store (nothing was written)",
                to.kind()
            )));
        }
        report.writers_skipped = Some(e.to_string());
    }
    let mut written: Vec<&str> = Vec::new();
    for c in &connectors {
        let (changes, entries) = plan(from, to, c)?;
        if !options.dry_run && !entries.is_empty() {
            // A store that may write part of a batch is read again after a failure: a write
            // refused before any change (a sink group's checks) left it as it was.
            let kept = (!to.capabilities().atomic).then(|| entries.clone());
            if let Err(e) = to.write(entries) {
                let untouched = to.capabilities().atomic
                    || kept.is_some_and(|kept| plan(from, to, c).is_ok_and(|(_, now)| now == kept));
                let what = if untouched {
                    "nothing of it was written"
                } else {
                    "part of it may be written: run the migration again"
                };
                let before = match written.as_slice() {
                    [] => String::new(),
                    done => format!(
                        "; the connectors before it were written ({})",
                        done.iter()
                            .map(|c| format!("`{c}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                };
                return Err(e.context(format!(
                    "writing connector `{c}` to the {} store failed ({what}{before})",
                    to.kind()
                )));
            }
            written.push(c);
        }
        report.connectors.push(changes);
    }
    if report.writers_skipped.is_none() {
        for (writer, seq) in writers {
            let have = to.applied_seq(&writer)?;
            if have < seq {
                if !options.dry_run {
                    to.apply(&Batch::new(writer.clone(), seq, []))?;
                }
                report.writers.push((writer, have, seq));
            }
        }
        if !options.dry_run && !report.writers.is_empty() {
            to.persist()?;
        }
    }
    if !options.dry_run {
        for c in &connectors {
            let (n, shown) = compare(from, to, c, 3)?;
            if n > 0 {
                return Err(Error::State(format!(
                    "verification failed: connector `{c}` differs in {n} partitions after migrating, e.g. {}",
                    shown.join("; ")
                )));
            }
        }
        for (writer, _, seq) in &report.writers {
            let have = to.applied_seq(writer)?;
            if have < *seq {
                return Err(Error::State(format!(
                    "verification failed: writer `{writer}` has applied seq {have} in the destination, expected {seq}"
                )));
            }
        }
    }
    Ok(report)
}

/// Fails when the source holds no offsets (of `options.connector`, or none at all) and the
/// destination holds some of `connectors`, which the migration would reset.
fn refuse_empty_source(
    from: &dyn OffsetStore,
    to: &dyn OffsetStore,
    options: &MigrateOptions,
    connectors: &[String],
) -> Result<()> {
    let empty = match &options.connector {
        Some(c) => from.partitions(c)?.is_empty(),
        None => from
            .namespaces()?
            .iter()
            .all(|c| c == crate::history::HISTORY_NAMESPACE),
    };
    if !empty {
        return Ok(());
    }
    let mut held = Vec::new();
    for c in connectors {
        if c != crate::history::HISTORY_NAMESPACE && !to.partitions(c)?.is_empty() {
            held.push(format!("`{c}`"));
        }
    }
    if held.is_empty() {
        return Ok(());
    }
    let what = match &options.connector {
        Some(c) => format!("no offsets of connector `{c}`"),
        None => "no offsets at all".to_string(),
    };
    Err(Error::Settings(format!(
        "the source ({} store) holds {what}: migrating would reset {} in the destination ({} \
         store), so nothing was written. Check the source; to empty the destination, allow an \
         empty source (--allow-empty-source)",
        from.kind(),
        if held.len() == 1 {
            format!("connector {}", held[0])
        } else {
            format!("{} connectors ({})", held.len(), held.join(", "))
        },
        to.kind()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;
    use crate::{Partition, Value};

    fn key(c: &str, i: i64) -> OffsetKey {
        OffsetKey::new(c, Partition::new().with("p", i))
    }

    #[test]
    fn makes_the_destination_equal_and_verifies() {
        let from = MemoryStore::new();
        let to = MemoryStore::new();
        from.write(vec![
            (key("a", 1), Some(Offset::new().with("pos", 1))),
            (key("a", 2), Some(Offset::new().with("pos", 2))),
            (key("b", 1), Some(Offset::new().with("pos", 1.5))),
        ])
        .unwrap();
        from.apply(&Batch::new("w", 7, [])).unwrap();
        to.write(vec![
            (key("a", 2), Some(Offset::new().with("pos", 2))),
            (key("a", 3), Some(Offset::new().with("pos", 3))),
            (key("b", 1), Some(Offset::new().with("pos", Value::Int(1)))),
        ])
        .unwrap();
        let dry = migrate(
            &from,
            &to,
            &MigrateOptions {
                dry_run: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(dry.connectors[0].added, 1);
        assert_eq!(dry.connectors[0].removed, 1);
        assert_eq!(dry.connectors[0].unchanged, 1);
        assert_eq!(dry.connectors[1].changed, 1);
        assert!(to.get(&key("a", 3)).unwrap().is_some(), "a dry run wrote");
        let done = migrate(&from, &to, &MigrateOptions::default()).unwrap();
        assert_eq!(done.writers, vec![("w".to_string(), 0, 7)]);
        assert_eq!(to.all().unwrap(), from.all().unwrap());
        assert_eq!(to.applied_seq("w").unwrap(), 7);
        let again = migrate(&from, &to, &MigrateOptions::default()).unwrap();
        assert!(again.connectors.iter().all(ConnectorChanges::is_empty));
    }

    #[test]
    fn an_empty_source_resets_nothing_unless_allowed() {
        let from = MemoryStore::new();
        let to = MemoryStore::new();
        to.write(vec![(key("a", 1), Some(Offset::new().with("pos", 1)))])
            .unwrap();
        for connector in [None, Some("a".to_string())] {
            let options = MigrateOptions {
                connector,
                ..Default::default()
            };
            let e = migrate(&from, &to, &options).unwrap_err().to_string();
            assert!(
                e.contains("holds no offsets")
                    && e.contains("`a`")
                    && e.contains("--allow-empty-source"),
                "{e}"
            );
            assert_eq!(to.all().unwrap().len(), 1, "written despite the refusal");
        }
        // Another connector of the source does not count as empty for this one.
        from.write(vec![(key("b", 1), Some(Offset::new().with("pos", 1)))])
            .unwrap();
        let only_a = MigrateOptions {
            connector: Some("a".into()),
            ..Default::default()
        };
        assert!(migrate(&from, &to, &only_a).is_err());
        let allowed = MigrateOptions {
            connector: Some("a".into()),
            allow_empty_source: true,
            ..Default::default()
        };
        let done = migrate(&from, &to, &allowed).unwrap();
        assert_eq!(done.connectors[0].removed, 1);
        assert!(to.partitions("a").unwrap().is_empty());
    }

    #[test]
    fn offsets_compare_by_value_not_member_order() {
        let a = Offset::new().with("x", 1).with("y", "s");
        let b = Offset::new().with("y", "s").with("x", 1);
        assert!(same_offset(&a, &b));
        assert!(!same_offset(
            &a,
            &Offset::new().with("x", 1.0).with("y", "s")
        ));
        let bytes = Offset::new().with("b", vec![1u8, 2]);
        assert!(same_offset(&bytes, &bytes.connect_normalized()));
    }
}
