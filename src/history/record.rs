//! How one history record is spelled: an offset in [`HISTORY_NAMESPACE`].
//!
//! ```text
//! key    {"connector":C,"writer":W,"seq":S,"part":P}            a sequenced batch (a commit buffer's)
//!        {"connector":C,"writer":"","seq":0,"part":P,"at_us":T}  an unsequenced write (a tool's)
//! value  {"at_us":T,"changes":"[[partition,from,to],...]"}      from/to: offset JSON or null (reset)
//! key    {"horizon":"history"}  value {"at_us":H}               the oldest time a rewind can reach
//! ```
//!
//! A sequenced batch's key is the same whenever it is applied, so a replay overwrites its record
//! instead of adding one. `part` splits a batch of many changes into records of at most
//! 2,000 changes (a Kafka record must stay under the broker's size limit).

use super::HISTORY_NAMESPACE;
use crate::codec::json::{self, Json};
use crate::{Error, Offset, OffsetKey, Partition, Result, Value};

/// Changes per record at most.
pub(crate) const CHANGES_PER_RECORD: usize = 2_000;

/// One move of one partition's offset.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// When the store applied it, in microseconds since the epoch.
    pub at_us: i64,
    /// The commit buffer that wrote it (empty for a tool's write).
    pub writer: String,
    /// The batch's seq (0 for a tool's write).
    pub seq: u64,
    /// The partition.
    pub key: OffsetKey,
    /// The offset before, `None` when there was none.
    pub from: Option<Offset>,
    /// The offset after, `None` for a reset.
    pub to: Option<Offset>,
}

/// A change as the recorder stages it: the partition, and the Connect JSON of its offset before
/// and after (`None`: none, a reset).
pub(crate) type Staged<'a> = (&'a OffsetKey, Option<&'a [u8]>, Option<&'a [u8]>);

pub(crate) fn record_key(
    connector: &str,
    writer: &str,
    seq: u64,
    part: usize,
    at_us: i64,
) -> OffsetKey {
    let mut p = Partition::new()
        .with("connector", connector)
        .with("writer", writer)
        .with("seq", seq as i64)
        .with("part", part as i64);
    if seq == 0 {
        p.insert("at_us", at_us);
    }
    OffsetKey::new(HISTORY_NAMESPACE, p)
}

pub(crate) fn horizon_key() -> OffsetKey {
    OffsetKey::new(
        HISTORY_NAMESPACE,
        Partition::new().with("horizon", "history"),
    )
}

pub(crate) fn horizon_value(at_us: i64) -> Offset {
    Offset::new().with("at_us", at_us)
}

/// The record of `changes`, applied at `at_us`: their JSON is copied in as it is, in one pass.
pub(crate) fn record_value(at_us: i64, changes: &[Staged<'_>]) -> Offset {
    let len: usize = changes
        .iter()
        .map(|(_, from, to)| 48 + from.map_or(4, <[u8]>::len) + to.map_or(4, <[u8]>::len))
        .sum();
    let mut out = Vec::with_capacity(len + 2);
    out.push(b'[');
    for (i, (key, from, to)) in changes.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'[');
        match key.partition() {
            Some(p) => json::encode_map(p, &mut out),
            None => out.extend_from_slice(b"null"),
        }
        for o in [from, to] {
            out.push(b',');
            out.extend_from_slice(o.unwrap_or(b"null"));
        }
        out.push(b']');
    }
    out.push(b']');
    let changes = String::from_utf8(out).expect("the encoder writes UTF-8, and so did the store");
    Offset::new().with("at_us", at_us).with("changes", changes)
}

/// The record's time, or `None` for a key that is not a record's (the horizon).
pub(crate) fn at_us(value: &Offset) -> Option<i64> {
    match value.get("at_us") {
        Some(Value::Int(t)) => Some(*t),
        _ => None,
    }
}

/// How many bytes a record takes, about: what the size bound counts.
pub(crate) fn record_bytes(key: &OffsetKey, value: &Offset) -> u64 {
    let changes = match value.get("changes") {
        Some(Value::String(s)) => s.len(),
        _ => 0,
    };
    (key.id().len() + changes + 24) as u64
}

/// The connector a record key belongs to, `None` for the horizon.
pub(crate) fn connector_of(key: &OffsetKey) -> Option<&str> {
    match key.partition()?.get("connector") {
        Some(Value::String(c)) => Some(c),
        _ => None,
    }
}

/// Decodes a record of `connector` into its changes, in the order they were staged.
pub(crate) fn decode(key: &OffsetKey, value: &Offset, connector: &str) -> Result<Vec<Change>> {
    let bad = |why: String| {
        Error::decode(
            "history record",
            format!("{}: {why}", String::from_utf8_lossy(&key.connect_key())),
        )
    };
    let p = key.partition().ok_or_else(|| bad("no partition".into()))?;
    let writer = match p.get("writer") {
        Some(Value::String(w)) => w.clone(),
        _ => return Err(bad("no writer".into())),
    };
    let seq = match p.get("seq") {
        Some(Value::Int(s)) if *s >= 0 => *s as u64,
        _ => return Err(bad("no seq".into())),
    };
    let at_us = at_us(value).ok_or_else(|| bad("no at_us".into()))?;
    let Some(Value::String(text)) = value.get("changes") else {
        return Err(bad("no changes".into()));
    };
    let Json::Array(items) = json::parse(text.as_bytes()).map_err(bad)? else {
        return Err(bad("changes are not an array".into()));
    };
    let map = |j: Json, what: &str| -> Result<Option<Offset>> {
        match j {
            Json::Null => Ok(None),
            Json::Object(m) => json::to_map(m, what).map(Some).map_err(bad),
            other => Err(bad(format!("{what} is {other:?}"))),
        }
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let Json::Array(parts) = item else {
            return Err(bad("a change is not an array".into()));
        };
        let [partition, from, to]: [Json; 3] = parts
            .try_into()
            .map_err(|_| bad("a change does not have three members".into()))?;
        let key = match map(partition, "partition")? {
            Some(p) => OffsetKey::new(connector, p),
            None => OffsetKey::null_partition(connector),
        };
        out.push(Change {
            at_us,
            writer: writer.clone(),
            seq,
            key,
            from: map(from, "from")?,
            to: map(to, "to")?,
        });
    }
    Ok(out)
}
