//! A rewind: the offsets a connector held at a moment, worked back from the offsets it holds now.

use std::collections::HashMap;
use std::str::FromStr;

use super::{Change, HISTORY_NAMESPACE, read};
use crate::model::OffsetKey;
use crate::store::OffsetStore;
use crate::time;
use crate::{Error, Offset, Result};

/// Where a rewind goes: a time, or right after the batch with a seq.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RewindTo {
    /// The offsets held at this time (µs since the epoch).
    Time(i64),
    /// The offsets held right after the batch with this seq was applied.
    Seq(u64),
}

impl FromStr for RewindTo {
    type Err = Error;

    /// `seq:N` or an RFC 3339 time.
    fn from_str(s: &str) -> Result<Self> {
        match s.strip_prefix("seq:") {
            Some(n) => n
                .parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .map(RewindTo::Seq)
                .ok_or_else(|| {
                    Error::Input(format!(
                        "`{s}`: expected seq:N with N a batch seq of at least 1"
                    ))
                }),
            None => time::parse_rfc3339(s).map(RewindTo::Time),
        }
    }
}

/// One partition's move in a rewind.
#[derive(Debug, Clone, PartialEq)]
pub struct Move {
    /// The partition.
    pub key: OffsetKey,
    /// What it holds now (`None`: no offset).
    pub from: Option<Offset>,
    /// What it held then (`None`: no offset, so it is reset).
    pub to: Option<Offset>,
}

/// What a rewind would write.
#[derive(Debug, Clone, PartialEq)]
pub struct RewindPlan {
    /// The moment rewound to (µs since the epoch).
    pub at_us: i64,
    /// The partitions that move, in key order; partitions already where they were are left out.
    pub moves: Vec<Move>,
}

impl RewindPlan {
    /// The entries to write, in one atomic batch.
    pub fn entries(&self) -> Vec<(OffsetKey, Option<Offset>)> {
        self.moves
            .iter()
            .map(|m| (m.key.clone(), m.to.clone()))
            .collect()
    }
}

/// One offset as a store holds it and as history recorded it (bytes as Connect spells them).
fn same(a: Option<&Offset>, b: Option<&Offset>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => x == y || x.to_json() == y.to_json(),
        _ => false,
    }
}

/// Where a rewind cuts history: it undoes every change after the cut.
enum Cut {
    Time(i64),
    /// Right after one batch: (time, writer, seq), the order changes are applied in.
    Batch(i64, String, u64),
}

impl Cut {
    fn undoes(&self, c: &Change) -> bool {
        match self {
            Cut::Time(t) => c.at_us > *t,
            Cut::Batch(at, w, seq) => (c.at_us, c.writer.as_str(), c.seq) > (*at, w.as_str(), *seq),
        }
    }
}

/// The offsets `connector` (or its one `partition`) held at `to`, as moves from what it holds
/// now. Refuses a time in the future (`now_us` is now), one before the retained history (naming
/// the oldest time that can be reached), a seq no retained batch has, and a connector or
/// partition the store knows nothing of.
pub fn plan_rewind(
    store: &dyn OffsetStore,
    connector: &str,
    to: RewindTo,
    partition: Option<&OffsetKey>,
    now_us: i64,
) -> Result<RewindPlan> {
    let history = read(store, connector)?;
    let current = store.partitions(connector)?;
    if current.is_empty() && history.changes.is_empty() {
        return Err(Error::Input(format!(
            "unknown connector `{connector}`: the store holds no offsets and no history for it"
        )));
    }
    let Some(horizon) = history.horizon_us else {
        if let Some(why) = history.unreadable.first() {
            return Err(Error::State(format!(
                "cannot rewind connector `{connector}`: its history cannot be read ({why}); remove the record with `reset --connector {HISTORY_NAMESPACE} --partition ...`, and history starts again from the next commit"
            )));
        }
        if store.kind() == "kafka-group" {
            return Err(Error::State(
                "a sink connector's consumer group keeps no history (only its committed offsets), and none can be turned on for it: there is nothing to rewind by".into(),
            ));
        }
        return Err(Error::State(
            "the store holds no history: open it with `?history=<retention>` (e.g. history=7d) to record how offsets move, then rewinds reach back to that moment".into(),
        ));
    };
    let (at_us, cut) = match to {
        RewindTo::Time(t) => {
            if t > now_us {
                return Err(Error::Input(format!(
                    "cannot rewind to {}: it is in the future (now is {})",
                    time::format_rfc3339(t),
                    time::format_rfc3339(now_us)
                )));
            }
            (t, Cut::Time(t))
        }
        RewindTo::Seq(seq) => {
            let mut writers: Vec<(&str, i64)> = history
                .changes
                .iter()
                .filter(|c| c.seq == seq)
                .map(|c| (c.writer.as_str(), c.at_us))
                .collect();
            writers.dedup();
            let (writer, at) = match writers.as_slice() {
                [one] => (one.0.to_owned(), one.1),
                [] => {
                    let seqs = history.changes.iter().filter(|c| c.seq > 0).map(|c| c.seq);
                    let range = match (seqs.clone().min(), seqs.max()) {
                        (Some(lo), Some(hi)) => format!("seqs {lo} to {hi}"),
                        _ => "no sequenced batch".into(),
                    };
                    return Err(Error::Input(format!(
                        "seq:{seq}: no retained batch of connector `{connector}` has seq {seq} (retained: {range})"
                    )));
                }
                many => {
                    let list: Vec<String> = many
                        .iter()
                        .map(|(w, at)| format!("`{w}` at {}", time::format_rfc3339(*at)))
                        .collect();
                    return Err(Error::Input(format!(
                        "seq:{seq} is ambiguous: batches of several writers have it ({}); rewind to one of their times instead",
                        list.join(", ")
                    )));
                }
            };
            (at, Cut::Batch(at, writer, seq))
        }
    };
    if at_us < horizon {
        return Err(Error::Input(format!(
            "cannot rewind to {}: it is before the retained history; the oldest time that can be reached is {}",
            time::format_rfc3339(at_us),
            time::format_rfc3339(horizon)
        )));
    }
    let mut state: HashMap<OffsetKey, Option<Offset>> = current
        .iter()
        .map(|(k, o)| (k.clone(), Some(o.clone())))
        .collect();
    for c in history.changes.iter().rev().filter(|c| cut.undoes(c)) {
        let before = state.get(&c.key).cloned().flatten();
        // Undone newest first, each change must lead to what the store (or the change after it)
        // holds: a change made without history (a writer opened without `history=`, a restore)
        // breaks the chain, and undoing around the gap would be a wrong answer.
        if partition.is_none_or(|p| p == &c.key) && !same(before.as_ref(), c.to.as_ref()) {
            return Err(Error::State(format!(
                "cannot rewind connector `{connector}` exactly: history records partition {} moving to {} at {}, but {} came after it unrecorded (a write without `history=`, or a restore of other offsets); rewind to a time after that change, or set the offsets directly",
                String::from_utf8_lossy(&c.key.connect_key()),
                c.to.as_ref().map_or_else(|| "none".into(), |o| o.to_json()),
                time::format_rfc3339(c.at_us),
                before
                    .as_ref()
                    .map_or_else(|| "none".into(), |o| format!("offset {}", o.to_json())),
            )));
        }
        state.insert(c.key.clone(), c.from.clone());
    }
    if let Some(p) = partition
        && !state.contains_key(p)
    {
        return Err(Error::Input(format!(
            "connector `{connector}` has no offset and no history for partition {}",
            String::from_utf8_lossy(&p.connect_key())
        )));
    }
    let now: HashMap<&OffsetKey, &Offset> = current.iter().map(|(k, o)| (k, o)).collect();
    let mut moves: Vec<Move> = state
        .into_iter()
        .filter(|(k, _)| partition.is_none_or(|p| p == k))
        .filter_map(|(key, to)| {
            let from = now.get(&key).map(|o| (*o).clone());
            (from != to).then_some(Move { key, from, to })
        })
        .collect();
    moves.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(RewindPlan { at_us, moves })
}
