//! How one history record is spelled: an offset in [`HISTORY_NAMESPACE`].
//!
//! ```text
//! key    {"connector":C,"writer":W,"seq":S,"part":P}            a sequenced batch (a commit buffer's)
//!        {"connector":C,"writer":"","seq":0,"part":P,"at_us":T}  an unsequenced write (a tool's)
//! value  {"at_us":T,"changes":"[[partition,from,to],...]"}      from/to: offset JSON or null (reset)
//!        (the changes' JSON spelled with `'` for `"` when it holds no `'` or `\`: see quote_free)
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

/// The record of `changes` (their [`changes_json`]), applied at `at_us`.
pub(crate) fn record_value(at_us: i64, changes: String) -> Offset {
    Offset::new().with("at_us", at_us).with("changes", changes)
}

/// The JSON of a record's `changes`: theirs copied in as it is, in one pass.
pub(crate) fn changes_json(changes: &[Staged<'_>]) -> String {
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
        key.encode_partition(&mut out);
        for o in [from, to] {
            out.push(b',');
            out.extend_from_slice(o.unwrap_or(b"null"));
        }
        out.push(b']');
    }
    out.push(b']');
    quote_free(&mut out);
    String::from_utf8(out).expect("the encoder writes UTF-8, and so did the store")
}

/// Respells `json` with `'` for `"` when it holds neither `'` nor `\`: the store then writes the
/// record's changes as a JSON string with nothing to escape (a quote every few bytes cost an escape
/// each, on every write and every read). Anything else stays as it is, which [`plain`] tells apart:
/// only this spelling is free of `"`.
fn quote_free(json: &mut [u8]) {
    // Folds without an early exit, so that both passes run many bytes at a time.
    if json
        .iter()
        .fold(true, |free, &b| free & (b != b'\'') & (b != b'\\'))
    {
        for b in json.iter_mut() {
            *b = if *b == b'"' { b'\'' } else { *b };
        }
    }
}

/// The JSON of a record's changes, in either spelling of [`quote_free`]. One with no `"` has no
/// JSON string in the plain spelling, so no `'` either: respelling it back is right in both cases.
fn plain(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains('"') {
        text.into()
    } else {
        text.replace('\'', "\"").into()
    }
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
    let Json::Array(items) = json::parse(plain(text).as_bytes()).map_err(bad)? else {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn json_of(offset: &Offset) -> Vec<u8> {
        let mut out = Vec::new();
        json::encode_value(offset, &mut out);
        out
    }

    fn round_trip(partition: Partition, offset: Offset) -> (String, Vec<Change>) {
        let key = OffsetKey::new("c", partition);
        let to = json_of(&offset);
        let value = record_value(7, changes_json(&[(&key, None, Some(&to))]));
        let Some(Value::String(text)) = value.get("changes") else {
            panic!("no changes in {value:?}");
        };
        let rkey = record_key("c", "w", 1, 0, 7);
        let changes = decode(&rkey, &value, "c").unwrap();
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].key, key);
        assert_eq!(changes[0].to.as_ref(), Some(&offset));
        (text.clone(), changes)
    }

    #[test]
    fn changes_without_quote_or_backslash_are_spelled_quote_free() {
        let (text, _) = round_trip(
            Partition::new().with("file", "/a/é b"),
            Offset::new().with("pos", 3).with("name", "x y"),
        );
        assert!(!text.contains('"'), "{text}");
        let mut outer = Vec::new();
        json::encode_str(&text, &mut outer);
        assert_eq!(outer.iter().filter(|&&b| b == b'\\').count(), 0);
    }

    #[test]
    fn changes_holding_a_quote_an_apostrophe_or_a_backslash_stay_plain() {
        for s in ["it's", "a\"b", "c:\\d"] {
            let (text, _) = round_trip(
                Partition::new().with("file", s),
                Offset::new().with("pos", 1),
            );
            assert!(text.contains('"'), "{text}");
        }
    }

    #[test]
    fn records_in_the_plain_spelling_still_decode() {
        let value = Offset::new().with("at_us", 9).with(
            "changes",
            r#"[[{"t":"it's"},null,{"p":2}],[null,{"p":1},null]]"#,
        );
        let changes = decode(&record_key("c", "w", 3, 0, 9), &value, "c").unwrap();
        assert_eq!(changes.len(), 2);
        assert_eq!(
            changes[0].key,
            OffsetKey::new("c", Partition::new().with("t", "it's"))
        );
        assert_eq!(changes[0].to, Some(Offset::new().with("p", 2)));
        assert_eq!(changes[1].key, OffsetKey::null_partition("c"));
        assert_eq!(changes[1].to, None);
    }
}
