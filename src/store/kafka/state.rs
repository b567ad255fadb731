//! The topic's content in memory: [`State`] keeps, per structural key, every form of it that is
//! live in the topic, answers lookups with the newest one, and tells the writer which key bytes and
//! topic partitions a write of that key must use. The reader ([`super::load`]) fills it from the
//! topic, the writer ([`super::write`]) from its own commits.
//!
//! ## One structural key, several record keys
//! Connect looks offsets up by exact key bytes, so `{"a":1,"b":2}` and `{"b":2,"a":1}` are two
//! records to Kafka (and usually on two different partitions), while to this crate they are one key.
//! [`State`] therefore keeps, per structural key, every *form* that is live in the topic: one exact
//! record key in one topic partition (what compaction keeps one record of). Several forms come from
//! other writers: a connector whose map iterates in another order than Connect's REST API
//! re-encodes it, or a worker on JDK 17, whose `Double.toString` spells some doubles with one digit
//! more than JDK 19+ (`9.999999999999999E22` for `1e23`).
//!
//! **Which form `get` and `partitions` answer with: the newest record.** Forms are ordered by
//! [`Stamp`]: the record timestamp first, then the topic partition, then the offset in it (the
//! tie-break, so that equal timestamps still give one answer). The greatest is current. Records of
//! one topic partition are read in their order, but the partitions arrive interleaved in no fixed
//! order; since the rule does not depend on that order, every read of the same topic gives the
//! same answer. A record without a timestamp counts as `-1`. A tombstone removes its form only;
//! the newest of the others becomes current.
//!
//! **How the writer keeps every reader right** (see [`super::write`]): a key with live forms is
//! written under *each* live form's exact bytes, in the topic partition that holds it, and with an
//! explicit record timestamp; none of them is tombstoned, so whoever looks any of them up (the
//! connector that owns the record, a JDK 17 worker) finds the new offset. A reset tombstones every
//! live form. A key with no live form is written in the caller's member order, spelled as JDK 19+
//! does, on the partition murmur2 gives. Our own committed records enter the state with the
//! timestamp they were produced with and [`Stamp::UNREAD`] as their offset, until the reader reads
//! them back with their real one.

use std::collections::{BTreeMap, HashMap};

use crate::Offset;
use crate::codec::json;
use crate::model::OffsetKey;

/// Where a record sits and when it was written: its record timestamp (milliseconds, `-1` when the
/// record has none), its topic partition and its offset there. Ordered by timestamp, then topic
/// partition, then offset: of several live forms of one key, the greatest is the newest (see the
/// module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Stamp {
    pub timestamp: i64,
    pub partition: i32,
    pub offset: i64,
}

impl Stamp {
    /// The offset of a record we committed ourselves and have not read back yet: after every record
    /// read so far from its partition (the reader reads it back later, with its real offset).
    pub(crate) const UNREAD: i64 = i64::MAX;
}

/// One record form of a structural key: the record's exact key bytes and its offset's JSON in one
/// allocation, decoded only on lookup (a load makes one form per record; decoded keys and values
/// took several allocations each), and where and when the record was written. A form is one key
/// in one topic partition (what compaction keeps one record of).
///
/// ```text
/// u32 LE  record key length
/// ...     record key bytes
/// ...     offset JSON (as the record holds it, or as we encode it for our own commits)
/// ```
pub(crate) struct Form {
    bytes: Box<[u8]>,
    stamp: Stamp,
}

impl Form {
    fn new(raw: &[u8], value: &[u8], stamp: Stamp) -> Form {
        let mut b = Vec::with_capacity(4 + raw.len() + value.len());
        b.extend_from_slice(&(raw.len() as u32).to_le_bytes());
        b.extend_from_slice(raw);
        b.extend_from_slice(value);
        Form {
            bytes: b.into_boxed_slice(),
            stamp,
        }
    }

    /// A form from its one allocation (as [`bytes`](Form::bytes) gave it), or `None` when the
    /// bytes are not one.
    pub(crate) fn from_bytes(bytes: Box<[u8]>, stamp: Stamp) -> Option<Form> {
        let len = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
        (bytes.len() >= 4 + len).then_some(Form { bytes, stamp })
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub(crate) fn stamp(&self) -> Stamp {
        self.stamp
    }

    fn raw_len(&self) -> usize {
        u32::from_le_bytes(self.bytes[..4].try_into().expect("4 bytes")) as usize
    }

    fn raw(&self) -> &[u8] {
        &self.bytes[4..4 + self.raw_len()]
    }

    fn value(&self) -> &[u8] {
        &self.bytes[4 + self.raw_len()..]
    }

    /// The key as this record decodes (its member order). Every form's key decoded once already,
    /// when it was stored.
    fn key(&self) -> Option<OffsetKey> {
        json::decode_key(self.raw()).ok()
    }

    fn offset(&self) -> Option<Offset> {
        json::decode_value(self.value()).ok().flatten()
    }

    /// The record key `raw` in topic partition `partition`.
    fn is(&self, raw: &[u8], partition: i32) -> bool {
        self.stamp.partition == partition && self.raw() == raw
    }
}

/// Every live form of one structural key; `current`, the newest by [`Stamp`], is what lookups
/// return.
pub(crate) struct Stored {
    current: Form,
    shadowed: Vec<Form>,
}

impl Stored {
    /// Makes the newest form current again.
    fn settle(&mut self) {
        let newest = (0..self.shadowed.len()).max_by_key(|i| self.shadowed[*i].stamp);
        if let Some(i) = newest
            && self.shadowed[i].stamp > self.current.stamp
        {
            std::mem::swap(&mut self.current, &mut self.shadowed[i]);
        }
    }

    /// Every live form, the current one first.
    pub(crate) fn forms(&self) -> impl Iterator<Item = &Form> {
        std::iter::once(&self.current).chain(&self.shadowed)
    }

    /// The forms of one key, as [`forms`](Stored::forms) listed them (`None` when there are none).
    pub(crate) fn from_forms(forms: impl IntoIterator<Item = Form>) -> Option<Stored> {
        let mut forms = forms.into_iter();
        let mut stored = Stored {
            current: forms.next()?,
            shadowed: forms.collect(),
        };
        stored.settle();
        Some(stored)
    }
}

/// A live form of a key, as the writer needs it: the exact record key, the topic partition that
/// holds it, and the key as that record decodes (its member order).
pub(crate) struct LiveForm {
    pub raw: Vec<u8>,
    pub partition: i32,
    pub key: OffsetKey,
}

/// One namespace's keys, by their canonical partition bytes (a key's structural identity without
/// the namespace, see [`OffsetKey::id`]), hashed with foldhash: seeded per process like SipHash,
/// but SipHash took 14% of a cold load.
pub(crate) type Keys = HashMap<Box<[u8]>, Stored, foldhash::fast::RandomState>;

/// The canonical partition bytes of `key`.
fn canonical(key: &OffsetKey) -> &[u8] {
    &key.id()[4 + key.namespace().len()..]
}

/// The topic's content as far as it was read (and as our own commits changed it).
#[derive(Default)]
pub(crate) struct State {
    namespaces: BTreeMap<String, Keys>,
    seqs: HashMap<String, u64>,
}

impl State {
    /// A record `raw` → `offset` at `stamp` (read from the topic or just committed by us). A record
    /// of a form already live replaces it (records of one topic partition are read in their order);
    /// the newest form is what lookups return, whatever order the partitions were read in.
    pub(crate) fn put(&mut self, raw: &[u8], key: OffsetKey, offset: Offset, stamp: Stamp) {
        thread_local! {
            static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        SCRATCH.with_borrow_mut(|value| {
            value.clear();
            json::encode_value(&offset, value);
            self.put_raw(raw, &key, value, stamp)
        })
    }

    /// [`put`](State::put) of a record whose offset JSON is `value` (a record as read: it is kept
    /// as it is, and decoded only on lookup).
    pub(crate) fn put_raw(&mut self, raw: &[u8], key: &OffsetKey, value: &[u8], stamp: Stamp) {
        let ns = match self.namespaces.get_mut(key.namespace()) {
            Some(ns) => ns,
            None => self
                .namespaces
                .entry(key.namespace().to_owned())
                .or_default(),
        };
        let partition = stamp.partition;
        match ns.get_mut(canonical(key)) {
            None => {
                ns.insert(
                    canonical(key).into(),
                    Stored {
                        current: Form::new(raw, value, stamp),
                        shadowed: Vec::new(),
                    },
                );
            }
            Some(stored) => {
                if stored.current.is(raw, partition) {
                    stored.current = Form::new(raw, value, stamp);
                } else if let Some(f) = stored.shadowed.iter_mut().find(|f| f.is(raw, partition)) {
                    *f = Form::new(raw, value, stamp);
                } else {
                    stored.shadowed.push(Form::new(raw, value, stamp));
                }
                stored.settle();
            }
        }
    }

    /// A tombstone for the record key `raw` (of structural key `key`) in topic partition
    /// `partition`: that form is gone, the newest of the others (if any) is current.
    pub(crate) fn reset(&mut self, raw: &[u8], key: &OffsetKey, partition: i32) {
        let Some(ns) = self.namespaces.get_mut(key.namespace()) else {
            return;
        };
        let Some(stored) = ns.get_mut(canonical(key)) else {
            return;
        };
        if stored.current.is(raw, partition) {
            match stored.shadowed.pop() {
                Some(next) => {
                    stored.current = next;
                    stored.settle();
                }
                None => {
                    ns.remove(canonical(key));
                    if ns.is_empty() {
                        self.namespaces.remove(key.namespace());
                    }
                }
            }
        } else {
            stored.shadowed.retain(|f| !f.is(raw, partition));
        }
    }

    /// Batch `seq` of `writer` is in the topic.
    pub(crate) fn note_seq(&mut self, writer: &str, seq: u64) {
        match self.seqs.get_mut(writer) {
            Some(s) => *s = (*s).max(seq),
            None => {
                self.seqs.insert(writer.to_owned(), seq);
            }
        }
    }

    fn stored(&self, key: &OffsetKey) -> Option<&Stored> {
        self.namespaces
            .get(key.namespace())
            .and_then(|ns| ns.get(canonical(key)))
    }

    /// Every live form of `key`, the current (newest) one first: what a write must overwrite and a
    /// reset tombstone.
    pub(crate) fn live_forms(&self, key: &OffsetKey) -> Vec<LiveForm> {
        self.stored(key)
            .map(|s| {
                s.forms()
                    .filter_map(|f| {
                        Some(LiveForm {
                            raw: f.raw().to_vec(),
                            partition: f.stamp.partition,
                            key: f.key()?,
                        })
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    pub(crate) fn applied_seq(&self, writer: &str) -> u64 {
        self.seqs.get(writer).copied().unwrap_or(0)
    }

    pub(crate) fn writers(&self) -> Vec<(String, u64)> {
        let mut w: Vec<_> = self.seqs.iter().map(|(k, v)| (k.clone(), *v)).collect();
        w.sort();
        w
    }

    pub(crate) fn get(&self, key: &OffsetKey) -> Option<Offset> {
        self.stored(key).and_then(|s| s.current.offset())
    }

    pub(crate) fn partitions(&self, namespace: &str) -> Vec<(OffsetKey, Offset)> {
        let mut out: Vec<_> = self
            .namespaces
            .get(namespace)
            .map(|ns| {
                ns.values()
                    .filter_map(|s| Some((s.current.key()?, s.current.offset()?)))
                    .collect()
            })
            .unwrap_or_default();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    pub(crate) fn namespaces(&self) -> Vec<String> {
        self.namespaces.keys().cloned().collect()
    }

    /// Every namespace and its keys, as a snapshot keeps them.
    pub(crate) fn namespace_keys(&self) -> impl Iterator<Item = (&str, &Keys)> {
        self.namespaces.iter().map(|(n, k)| (n.as_str(), k))
    }

    /// Adds a namespace's keys (a snapshot's, read back).
    pub(crate) fn insert_namespace(&mut self, namespace: String, keys: Keys) {
        if !keys.is_empty() {
            self.namespaces.insert(namespace, keys);
        }
    }

    /// Number of keys with an offset.
    pub(crate) fn len(&self) -> usize {
        self.namespaces.values().map(|ns| ns.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Partition;

    fn pos(n: i64) -> Offset {
        Offset::new().with("position", n)
    }

    fn at(timestamp: i64, partition: i32, offset: i64) -> Stamp {
        Stamp {
            timestamp,
            partition,
            offset,
        }
    }

    #[test]
    fn spellings_of_one_key_shadow_each_other() {
        let ab = OffsetKey::new("c", Partition::new().with("a", 1).with("b", 2));
        let ba = OffsetKey::new("c", Partition::new().with("b", 2).with("a", 1));
        let spaced = br#"[ "c", {"a": 1, "b": 2} ]"#;
        let mut s = State::default();
        s.put(spaced, ab.clone(), pos(1), at(10, 0, 0));
        s.put(&ba.connect_key(), ba.clone(), pos(2), at(20, 1, 0));
        assert_eq!(s.get(&ab), Some(pos(2)), "the newer form wins");
        assert_eq!(s.live_forms(&ab).len(), 2);
        assert_eq!(s.partitions("c").len(), 1);
        // The newer form is tombstoned: the older one is what the topic still holds.
        s.reset(&ba.connect_key(), &ba, 1);
        assert_eq!(s.get(&ab), Some(pos(1)));
        let live = s.live_forms(&ab);
        assert_eq!(live.len(), 1);
        assert_eq!(
            (live[0].raw.as_slice(), live[0].partition),
            (&spaced[..], 0)
        );
        // A tombstone for a form that is not live changes nothing: not these bytes, or these
        // bytes in another topic partition.
        s.reset(&ab.connect_key(), &ab, 0);
        s.reset(spaced, &ab, 3);
        assert_eq!(s.get(&ab), Some(pos(1)));
        s.reset(spaced, &ab, 0);
        assert_eq!(s.get(&ab), None);
        assert!(s.namespaces().is_empty());
    }

    /// Two live forms in two topic partitions, read in either order, give the
    /// newer record's offset; equal timestamps are decided by topic partition, then offset.
    #[test]
    fn the_newest_form_wins_whatever_order_the_partitions_are_read_in() {
        let ab = OffsetKey::new("c", Partition::new().with("a", 1).with("b", 2));
        let ba = OffsetKey::new("c", Partition::new().with("b", 2).with("a", 1));
        let answer = |records: &[(&OffsetKey, i64, Stamp)]| {
            let mut s = State::default();
            for (k, n, stamp) in records {
                s.put(&k.connect_key(), (*k).clone(), pos(*n), *stamp);
            }
            let listed = s.partitions("c");
            assert_eq!(listed.len(), 1);
            (s.get(&ab), listed[0].0.connect_key())
        };
        for (older, newer, want) in [
            // By timestamp, whatever the partitions.
            (at(100, 7, 50), at(200, 3, 0), 2),
            // Equal timestamps: the higher topic partition.
            (at(100, 3, 50), at(100, 7, 0), 2),
            // Equal timestamps and partitions (two spellings on one partition): the later offset.
            (at(100, 3, 4), at(100, 3, 5), 2),
            // No timestamps (-1): partition, then offset.
            (at(-1, 1, 9), at(-1, 2, 0), 2),
        ] {
            let a = (&ab, 1, older);
            let b = (&ba, want, newer);
            let read_last_older = answer(&[b, a]);
            let read_last_newer = answer(&[a, b]);
            assert_eq!(read_last_older.0, Some(pos(want)), "{older:?} {newer:?}");
            assert_eq!(read_last_older, read_last_newer, "{older:?} {newer:?}");
            assert_eq!(
                read_last_older.1,
                ba.connect_key(),
                "the newer form is listed"
            );
        }
        // An update of the newer form to an older timestamp (a producer with another clock) hands
        // the answer back to the other form; its tombstone too.
        let mut s = State::default();
        s.put(&ab.connect_key(), ab.clone(), pos(1), at(100, 0, 0));
        s.put(&ba.connect_key(), ba.clone(), pos(2), at(200, 1, 0));
        s.put(&ba.connect_key(), ba.clone(), pos(3), at(50, 1, 1));
        assert_eq!(s.get(&ab), Some(pos(1)));
        s.put(&ab.connect_key(), ab.clone(), pos(4), at(300, 0, 1));
        s.put(&ba.connect_key(), ba.clone(), pos(5), at(400, 1, 2));
        assert_eq!(s.get(&ab), Some(pos(5)));
        s.reset(&ba.connect_key(), &ba, 1);
        assert_eq!(s.get(&ab), Some(pos(4)));
    }

    /// Three forms, every read order: the same answer, the newest record's.
    #[test]
    fn three_forms_in_any_read_order_give_one_answer() {
        let p = |order: &[(&str, i64)]| {
            order
                .iter()
                .fold(Partition::new(), |p, (n, v)| p.with(*n, *v))
        };
        let keys = [
            OffsetKey::new("c", p(&[("x", 1), ("y", 2), ("z", 3)])),
            OffsetKey::new("c", p(&[("z", 3), ("y", 2), ("x", 1)])),
            OffsetKey::new("c", p(&[("y", 2), ("x", 1), ("z", 3)])),
        ];
        let stamps = [at(5, 2, 0), at(9, 0, 3), at(9, 1, 0)];
        for order in [
            [0, 1, 2],
            [0, 2, 1],
            [1, 0, 2],
            [1, 2, 0],
            [2, 0, 1],
            [2, 1, 0],
        ] {
            let mut s = State::default();
            for i in order {
                s.put(
                    &keys[i].connect_key(),
                    keys[i].clone(),
                    pos(i as i64),
                    stamps[i],
                );
            }
            assert_eq!(s.get(&keys[0]), Some(pos(2)), "read order {order:?}");
            assert_eq!(s.live_forms(&keys[0]).len(), 3);
            assert_eq!(
                s.live_forms(&keys[0])[0].raw,
                keys[2].connect_key(),
                "newest first"
            );
        }
    }

    #[test]
    fn applied_seq_is_the_highest_seen() {
        let mut s = State::default();
        s.note_seq("w", 3);
        s.note_seq("w", 2);
        s.note_seq("v", 1);
        assert_eq!(s.applied_seq("w"), 3);
        assert_eq!(s.applied_seq("x"), 0);
        assert_eq!(s.writers(), vec![("v".into(), 1), ("w".into(), 3)]);
    }
}
