//! Offset history and rewind: how each offset moved, and putting a connector back where it was.
//!
//! Opt-in per store (`?history=7d` on any store URL, or [`HistoryStore::open`]): every batch the
//! store applies also writes, **in the same batch**, one record per connector it changes (spelled
//! as `docs/format.md` says): each partition's offset before and after, the time the store applied
//! it and the batch's writer and seq. The records are offsets in the reserved namespace
//! [`HISTORY_NAMESPACE`], so every backend keeps them exactly where and as atomically as the
//! offsets: the memory store in memory (and its commit buffer's log and snapshot), RocksDB in the
//! same write batch, Kafka in the same transaction of the same compacted topic (each record's key
//! is unique, so compaction keeps it until retention writes its tombstone). A crash leaves a batch
//! and its record both applied or both not, and a replayed batch writes the same record key again,
//! so history never holds a batch twice.
//!
//! Retention ([`HistoryConfig`]) drops the oldest records, a time bound and an optional size bound,
//! in the batches that come after them. A rewind works back from the current offsets, undoing every
//! change after the target time, so it reaches every time from the *horizon* on: the time history
//! started, or the newest record retention has dropped. [`read`] gives the history, [`plan_rewind`]
//! a rewind's moves. Writes through a store opened without history are not recorded: give every
//! writer of a store the same `history=` setting.

use std::time::Duration;

use crate::model::OffsetKey;
use crate::store::{OffsetStore, StoreUrl};
use crate::{Error, Offset, Result};

mod known;
mod record;
mod rewind;
mod store;

pub use record::Change;
pub use rewind::{Move, RewindPlan, RewindTo, plan_rewind};
pub use store::HistoryStore;

pub use crate::namespaces::HISTORY_NAMESPACE;

/// The store URL parameter that turns history on, with its retention (`history=7d`).
pub const HISTORY_PARAM: &str = "history";
/// The store URL parameter bounding history's size in bytes (`history.max.bytes=1073741824`).
pub const MAX_BYTES_PARAM: &str = "history.max.bytes";

/// How much history a [`HistoryStore`] keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryConfig {
    /// Records older than this are dropped; `None` keeps them all.
    pub retention: Option<Duration>,
    /// The oldest records are dropped while all of them take more bytes than this.
    pub max_bytes: Option<u64>,
}

impl HistoryConfig {
    /// A retention (`7d`, `12h`) and an optional size bound in bytes, checked.
    pub fn parse(retention: &str, max_bytes: Option<&str>) -> Result<Self> {
        let retention = crate::time::parse_positive_duration(retention)
            .map_err(|e| Error::Settings(format!("history={retention}: {e}")))?;
        let max_bytes = max_bytes
            .map(|m| match m.parse::<u64>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(Error::Settings(format!(
                    "{MAX_BYTES_PARAM}={m}: expected a positive number of bytes"
                ))),
            })
            .transpose()?;
        Ok(HistoryConfig {
            retention: Some(retention),
            max_bytes,
        })
    }

    /// No bound: nothing is dropped (what `rewind` records with when its URL names no retention).
    pub fn keep_all() -> Self {
        HistoryConfig {
            retention: None,
            max_bytes: None,
        }
    }

    /// Removes the history parameters from `url`: `Some` when they turn history on.
    pub fn take_from(url: &mut StoreUrl) -> Result<Option<Self>> {
        let config = match (url.param(HISTORY_PARAM), url.param(MAX_BYTES_PARAM)) {
            (Some(r), m) => Some(Self::parse(r, m).map_err(|e| url.error(e.to_string()))?),
            (None, Some(_)) => {
                return Err(url.error(format!(
                    "`{MAX_BYTES_PARAM}` needs `{HISTORY_PARAM}=<retention>` (e.g. history=7d)"
                )));
            }
            (None, None) => None,
        };
        url.params
            .retain(|(k, _)| k != HISTORY_PARAM && k != MAX_BYTES_PARAM);
        Ok(config)
    }

    /// Records applied before this time (µs) are past retention.
    fn cutoff(&self, now_us: i64) -> i64 {
        self.retention.map_or(i64::MIN, |r| {
            now_us.saturating_sub(i64::try_from(r.as_micros()).unwrap_or(i64::MAX))
        })
    }
}

/// What a store holds of one connector's history.
#[derive(Debug, Clone, PartialEq)]
pub struct History {
    /// The oldest time a rewind reaches (µs), `None` when the store holds no history.
    pub horizon_us: Option<i64>,
    /// Every retained change of the connector, oldest first (a batch's in partition order).
    pub changes: Vec<Change>,
    /// Records of the connector (or the horizon) that do not decode, each with why: left out of
    /// `changes`, so a rewind across what they held finds the chain broken and refuses.
    pub unreadable: Vec<String>,
}

impl History {
    /// The changes of one partition, oldest first.
    pub fn of(&self, key: &OffsetKey) -> impl Iterator<Item = &Change> {
        self.changes.iter().filter(move |c| c.key == *key)
    }
}

/// The history `store` holds for `connector` (whether or not it was opened with history on).
pub fn read(store: &dyn OffsetStore, connector: &str) -> Result<History> {
    let mut horizon_us = None;
    let mut records: Vec<(&OffsetKey, &Offset)> = Vec::new();
    let held = store.partitions(HISTORY_NAMESPACE)?;
    for (k, v) in &held {
        match record::connector_of(k) {
            Some(c) if c == connector => records.push((k, v)),
            Some(_) => {}
            None if *k == record::horizon_key() => horizon_us = record::at_us(v),
            None => {}
        }
    }
    let mut unreadable = Vec::new();
    if horizon_us.is_none()
        && let Some((k, v)) = held.iter().find(|(k, _)| *k == record::horizon_key())
    {
        unreadable.push(format!(
            "the horizon record {} holds no integer `at_us`: {}",
            String::from_utf8_lossy(&k.connect_key()),
            v.to_json()
        ));
    }
    let part = |k: &OffsetKey| match k.partition().and_then(|p| p.get("part")) {
        Some(crate::Value::Int(n)) => *n,
        _ => 0,
    };
    let mut changes = Vec::new();
    let mut decoded = Vec::with_capacity(records.len());
    for (k, v) in records {
        match record::decode(k, v, connector) {
            Ok(c) => decoded.push((part(k), c)),
            Err(e) => {
                tracing::warn!(connector, error = %e, "a history record does not decode; it is left out");
                unreadable.push(e.to_string());
            }
        }
    }
    decoded.sort_by(|(pa, a), (pb, b)| {
        let order = |c: &[Change]| c.first().map(|c| (c.at_us, c.writer.clone(), c.seq));
        order(a).cmp(&order(b)).then(pa.cmp(pb))
    });
    for (_, c) in decoded {
        changes.extend(c);
    }
    // A batch's partitions in key order (its records hold them as the batch had them).
    for batch in
        changes.chunk_by_mut(|a, b| (a.at_us, a.seq, &a.writer) == (b.at_us, b.seq, &b.writer))
    {
        batch.sort_by(|a, b| a.key.cmp(&b.key));
    }
    Ok(History {
        horizon_us,
        changes,
        unreadable,
    })
}
