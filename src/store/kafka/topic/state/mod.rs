//! The topic's content in memory: `State` keeps every live form (record key and topic partition)
//! of each structural key, answers lookups with the newest (by `Stamp`) and tells the writer which
//! key bytes and partitions a write must use; `super::load` and `super::write` fill it. Parts:
//! `entry` (one key's forms), `index` (a namespace's keys), `forms` (which form wins). The rule
//! and why: `docs/design.md`, section "One structural key, several record keys".

use std::collections::{BTreeMap, HashMap};

use crate::Offset;
use crate::codec::json;
use crate::model::OffsetKey;

mod entry;
mod forms;
mod index;

use entry::Form;
pub(crate) use entry::{Entry, Stamp, View};
use forms::{canonical, is_form, settle};
use index::Namespace;
pub(crate) use index::{Keys, Run};

/// The topic's content as far as it was read (and as our own commits changed it).
#[derive(Default)]
pub(crate) struct State {
    namespaces: BTreeMap<String, Namespace>,
    seqs: HashMap<String, u64>,
    /// The snapshot file this state was read from (empty after a cold load): the entries
    /// [`Keys`] index in it stay there.
    base: Vec<u8>,
    /// Keys the next new namespace makes room for at once ([`State::expect`]).
    expected: usize,
    /// The writer and seq `note_seq` saw last: every record of a batch names the same.
    last_seq: Option<(String, u64)>,
    /// A writer's marker was read as a tombstone since [`State::take_deleted_marker`] last asked.
    deleted_marker: bool,
}

impl State {
    /// A record `raw` → `offset` at `stamp` (read from the topic or just committed by us). A record
    /// of a form already live replaces it (records of one topic partition are read in their order);
    /// the newest form is what lookups return, whatever order the partitions were read in.
    #[cfg(test)]
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
        self.put_parts(raw, key.namespace(), canonical(key), value, stamp)
    }

    /// [`put_raw`](State::put_raw) of the key whose connector is `namespace` and whose canonical
    /// partition bytes are `canonical` (a loader that never builds the [`OffsetKey`]).
    pub(crate) fn put_parts(
        &mut self,
        raw: &[u8],
        namespace: &str,
        canonical: &[u8],
        value: &[u8],
        stamp: Stamp,
    ) {
        let base = &self.base[..];
        let ns = match self.namespaces.get_mut(namespace) {
            Some(ns) => ns,
            None => {
                let mut ns = Namespace::new(namespace);
                ns.keys.reserve(std::mem::take(&mut self.expected));
                self.namespaces.entry(namespace.to_owned()).or_insert(ns)
            }
        };
        let new = Form {
            stamp,
            raw: (!ns.is_canonical(raw, canonical)).then_some(raw),
            value,
        };
        let partition = stamp.partition;
        let json = &ns.json;
        ns.keys.upsert(base, canonical, |old| match old {
            None => Entry::build(canonical, &new, &[]),
            Some(old) => {
                let mut forms = old.forms();
                let mut current = forms.next().expect("an entry has a form");
                let mut shadowed: Vec<Form<'_>> = forms.collect();
                if is_form(json, &current, canonical, raw, partition) {
                    current = new;
                } else if let Some(f) = shadowed
                    .iter_mut()
                    .find(|f| is_form(json, f, canonical, raw, partition))
                {
                    *f = new;
                } else {
                    shadowed.push(new);
                }
                settle(&mut current, &mut shadowed);
                Entry::build(canonical, &current, &shadowed)
            }
        });
    }

    /// [`put_raw`](State::put_raw) of a record we just committed. Its key usually has one live
    /// form, the one this record replaces: then the entry changes in place, without a table
    /// insert, and without an allocation when its bytes keep their length (an entry rebuilt a
    /// key, and freed, was most of the allocator's share of a 10,000-offset commit).
    pub(crate) fn put_written(&mut self, raw: &[u8], key: &OffsetKey, value: &[u8], stamp: Stamp) {
        thread_local! {
            static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let canonical = canonical(key);
        if let Some(ns) = self.namespaces.get_mut(key.namespace()) {
            let h = ns.keys.hash(canonical);
            let json = &ns.json;
            if let Some(entry) = ns
                .keys
                .own
                .find_mut(h, |e| e.view().canonical() == canonical)
            {
                // Whether this record replaces the only form, and whether that form has a
                // spelling of its own (it stays: `raw` is those bytes).
                let replaced = {
                    let mut forms = entry.view().forms();
                    let only = forms.next().expect("an entry has a form");
                    (forms.next().is_none()
                        && is_form(json, &only, canonical, raw, stamp.partition))
                    .then_some(only.raw.is_some())
                };
                if let Some(spelled) = replaced {
                    let new = Form {
                        stamp,
                        raw: spelled.then_some(raw),
                        value,
                    };
                    SCRATCH.with_borrow_mut(|b| {
                        b.clear();
                        Entry::write(canonical, &new, &[], b);
                        if b.len() == entry.0.len() {
                            entry.0.copy_from_slice(b);
                        } else {
                            *entry = Entry(b[..].into());
                        }
                    });
                    return;
                }
            }
        }
        self.put_raw(raw, key, value, stamp)
    }

    /// A tombstone for the record key `raw` (of structural key `key`) in topic partition
    /// `partition`: that form is gone, the newest of the others (if any) is current.
    pub(crate) fn reset(&mut self, raw: &[u8], key: &OffsetKey, partition: i32) {
        self.reset_parts(raw, key.namespace(), canonical(key), partition)
    }

    /// [`reset`](State::reset) of a key given as in [`put_parts`](State::put_parts).
    pub(crate) fn reset_parts(
        &mut self,
        raw: &[u8],
        namespace: &str,
        canonical: &[u8],
        partition: i32,
    ) {
        let base = &self.base[..];
        let Some(ns) = self.namespaces.get_mut(namespace) else {
            return;
        };
        let Some(old) = ns.keys.get(base, canonical) else {
            return;
        };
        let mut forms = old.forms();
        let mut current = forms.next().expect("an entry has a form");
        let mut shadowed: Vec<Form<'_>> = forms.collect();
        let entry = if ns.is(&current, canonical, raw, partition) {
            match shadowed.pop() {
                Some(next) => {
                    current = next;
                    settle(&mut current, &mut shadowed);
                    Some(Entry::build(canonical, &current, &shadowed))
                }
                None => None,
            }
        } else {
            let before = shadowed.len();
            shadowed.retain(|f| !ns.is(f, canonical, raw, partition));
            if shadowed.len() == before {
                return;
            }
            Some(Entry::build(canonical, &current, &shadowed))
        };
        match entry {
            Some(e) => ns.keys.put(base, e),
            None => {
                ns.keys.remove(base, canonical);
                if ns.keys.is_empty() {
                    self.namespaces.remove(namespace);
                }
            }
        }
    }

    /// Becomes `fresh`, a read of the whole topic to where this state was read, but for what only
    /// this one knows: our own commits the read could not see yet (beyond the last stable offset,
    /// say). A form we committed and never read back stays when it was written after
    /// `unseen_after_ms` (older ones were compacted away after a tombstone); a key `fresh` has and
    /// this state does not was reset by us; a writer's greater seq is ours.
    pub(crate) fn adopt(&mut self, mut fresh: State, unseen_after_ms: i64) {
        let base = &self.base[..];
        let State {
            namespaces,
            seqs,
            base: fresh_base,
            ..
        } = &mut fresh;
        for (name, ns) in &self.namespaces {
            for view in ns.keys.iter(base) {
                let current = view.current();
                if current.stamp.offset == Stamp::UNREAD
                    && current.stamp.timestamp > unseen_after_ms
                {
                    let entry = Entry(Box::from(view.bytes()));
                    let into = namespaces
                        .entry(name.clone())
                        .or_insert_with(|| Namespace::new(name));
                    into.keys.put(fresh_base, entry);
                }
            }
        }
        for (name, ns) in namespaces.iter_mut() {
            let mine = self.namespaces.get(name);
            let reset: Vec<Vec<u8>> = ns
                .keys
                .iter(fresh_base)
                .map(View::canonical)
                .filter(|c| mine.is_none_or(|m| m.keys.get(base, c).is_none()))
                .map(<[u8]>::to_vec)
                .collect();
            for c in reset {
                ns.keys.remove(fresh_base, &c);
            }
        }
        namespaces.retain(|_, ns| !ns.keys.is_empty());
        for (writer, seq) in &self.seqs {
            let at = seqs.entry(writer.clone()).or_insert(0);
            *at = (*at).max(*seq);
        }
        *self = fresh;
    }

    /// A read of about `records` records begins: the first namespace it creates makes room for
    /// them all (growing a table of a million keys step by step was 7% of a cold load), and
    /// [`State::settle_room`] gives back what was not needed.
    pub(crate) fn expect(&mut self, records: usize) {
        self.expected = records;
    }

    /// Ends what [`State::expect`] began: a table more than twice as large as its keys (the
    /// first of several connectors, or records that overwrote each other) shrinks.
    pub(crate) fn settle_room(&mut self) {
        self.expected = 0;
        for ns in self.namespaces.values_mut() {
            ns.keys.shrink();
        }
    }

    /// A writer's marker record was deleted (read as a tombstone).
    pub(crate) fn note_deleted_marker(&mut self) {
        self.deleted_marker = true;
    }

    /// Whether a marker was deleted since the last call.
    pub(crate) fn take_deleted_marker(&mut self) -> bool {
        std::mem::take(&mut self.deleted_marker)
    }

    /// Batch `seq` of `writer` is in the topic.
    pub(crate) fn note_seq(&mut self, writer: &str, seq: u64) {
        if let Some((w, s)) = &mut self.last_seq
            && w == writer
            && *s >= seq
        {
            return;
        }
        match &mut self.last_seq {
            Some((w, s)) if w == writer => *s = seq,
            last => *last = Some((writer.to_owned(), seq)),
        }
        match self.seqs.get_mut(writer) {
            Some(s) => *s = (*s).max(seq),
            None => {
                self.seqs.insert(writer.to_owned(), seq);
            }
        }
    }

    fn entry(&self, key: &OffsetKey) -> Option<(&Namespace, View<'_>)> {
        let ns = self.namespaces.get(key.namespace())?;
        Some((ns, ns.keys.get(&self.base, canonical(key))?))
    }

    /// Appends the exact record key of every live form of `key` to `out`, the current one first,
    /// and gives `each` where its bytes are in `out` and its topic partition: what a write must
    /// overwrite and a reset tombstone. Returns how many there are.
    pub(crate) fn live_records_into(
        &self,
        key: &OffsetKey,
        out: &mut Vec<u8>,
        mut each: impl FnMut(std::ops::Range<usize>, i32),
    ) -> usize {
        let Some((ns, entry)) = self.entry(key) else {
            return 0;
        };
        let canonical = entry.canonical();
        let mut n = 0;
        for f in entry.forms() {
            let start = out.len();
            ns.raw_into(&f, canonical, out);
            each(start..out.len(), f.stamp.partition);
            n += 1;
        }
        n
    }

    /// [`live_records_into`](State::live_records_into), each record key in a `Vec` of its own.
    #[cfg(test)]
    pub(crate) fn live_records(&self, key: &OffsetKey) -> Vec<(Vec<u8>, i32)> {
        let mut out = Vec::new();
        let mut found = Vec::new();
        self.live_records_into(key, &mut out, |r, p| found.push((r, p)));
        found
            .into_iter()
            .map(|(r, p)| (out[r].to_vec(), p))
            .collect()
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
        let (_, entry) = self.entry(key)?;
        json::decode_value(entry.current().value).ok().flatten()
    }

    /// The record timestamp of `key`'s current form: when its offset was last written (`None`
    /// without an offset, or for a record without a timestamp).
    pub(crate) fn written_ms(&self, key: &OffsetKey) -> Option<u64> {
        let (_, entry) = self.entry(key)?;
        u64::try_from(entry.current().stamp.timestamp).ok()
    }

    pub(crate) fn partitions(&self, namespace: &str) -> Vec<(OffsetKey, Offset)> {
        let mut out: Vec<_> = self
            .namespaces
            .get(namespace)
            .map(|ns| {
                ns.keys
                    .iter(&self.base)
                    .filter_map(|e| {
                        let current = e.current();
                        let offset = json::decode_value(current.value).ok().flatten()?;
                        Some((ns.key(&current, e.canonical())?, offset))
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    pub(crate) fn namespaces(&self) -> Vec<String> {
        self.namespaces.keys().cloned().collect()
    }

    /// Every namespace, its keys' seed and their entries' bytes in the order a snapshot keeps
    /// them ([`Keys::in_bucket_order`]).
    pub(crate) fn namespace_entries(&self) -> impl Iterator<Item = (&str, u64, Vec<&[u8]>)> {
        self.namespaces.iter().map(|(n, ns)| {
            let entries = ns.keys.in_bucket_order(&self.base);
            (n.as_str(), ns.keys.seed(), entries)
        })
    }

    /// A state whose keys will index the snapshot file `base` ([`Keys::index`]).
    pub(crate) fn with_base(base: Vec<u8>) -> State {
        State {
            base,
            ..State::default()
        }
    }

    /// Adds a namespace's keys (a snapshot's, read back).
    pub(crate) fn insert_namespace(&mut self, name: String, keys: Keys) {
        if !keys.is_empty() {
            let mut ns = Namespace::new(&name);
            ns.keys = keys;
            self.namespaces.insert(name, ns);
        }
    }

    /// Number of keys with an offset.
    pub(crate) fn len(&self) -> usize {
        self.namespaces.values().map(|ns| ns.keys.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::entry::*;
    use super::index::*;
    use super::*;
    use crate::Partition;
    use hashbrown::HashTable;

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
        assert_eq!(s.live_records(&ab).len(), 2);
        assert_eq!(s.partitions("c").len(), 1);
        // The newer form is tombstoned: the older one is what the topic still holds.
        s.reset(&ba.connect_key(), &ba, 1);
        assert_eq!(s.get(&ab), Some(pos(1)));
        let live = s.live_records(&ab);
        assert_eq!(live.len(), 1);
        assert_eq!((live[0].0.as_slice(), live[0].1), (&spaced[..], 0));
        // A tombstone for a form that is not live changes nothing: not these bytes, or these
        // bytes in another topic partition.
        s.reset(&ab.connect_key(), &ab, 0);
        s.reset(spaced, &ab, 3);
        assert_eq!(s.get(&ab), Some(pos(1)));
        s.reset(spaced, &ab, 0);
        assert_eq!(s.get(&ab), None);
        assert!(s.namespaces().is_empty());
    }

    /// A whole read again replaces what was read before, but keeps our commits it could not see:
    /// a recent unread write and a reset (the key it still has); an unread write older than a
    /// tombstone is kept is not ours to keep; a newer seq of ours stays.
    #[test]
    fn adopting_a_whole_read_keeps_only_our_unseen_commits() {
        let k = |i: i64| OffsetKey::new("c", Partition::new().with("f", i));
        let unread = |ms| at(ms, 0, Stamp::UNREAD);
        let mut mine = State::default();
        mine.put(&k(1).connect_key(), k(1), pos(1), at(10, 0, 0)); // compacted away since
        mine.put(&k(2).connect_key(), k(2), pos(22), unread(1000)); // ours, not visible yet
        mine.put(&k(3).connect_key(), k(3), pos(3), unread(10)); // ours, compacted away since
        mine.put(&k(5).connect_key(), k(5), pos(5), at(10, 0, 2));
        mine.note_seq("w", 7);
        let mut fresh = State::default();
        fresh.put(&k(2).connect_key(), k(2), pos(2), at(10, 0, 1));
        fresh.put(&k(4).connect_key(), k(4), pos(4), at(10, 0, 3)); // we reset it
        fresh.put(&k(5).connect_key(), k(5), pos(5), at(10, 0, 2));
        fresh.note_seq("w", 6);
        fresh.note_seq("v", 1);
        mine.adopt(fresh, 500);
        let got: Vec<_> = mine.partitions("c");
        assert_eq!(got, vec![(k(2), pos(22)), (k(5), pos(5))]);
        assert_eq!(mine.writers(), vec![("v".into(), 1), ("w".into(), 7)]);
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
            assert_eq!(s.live_records(&keys[0]).len(), 3);
            assert_eq!(
                s.live_records(&keys[0])[0].0,
                keys[2].connect_key(),
                "newest first"
            );
        }
    }

    /// A record key in the canonical spelling is not stored twice, another spelling is kept as
    /// it is; both come back exactly, and an entry's bytes read back as the same entry.
    #[test]
    fn entries_keep_exact_record_keys_in_one_allocation() {
        let ab = OffsetKey::new("c\"q", Partition::new().with("a", 1).with("b", 2));
        let spaced = br#"[ "c\"q", {"a": 1, "b": 2} ]"#;
        let mut s = State::default();
        s.put(&ab.connect_key(), ab.clone(), pos(1), at(10, 0, 0));
        let first = |s: &State| -> Vec<u8> {
            let (_, _, entries) = s.namespace_entries().next().unwrap();
            assert_eq!(entries.len(), 1);
            entries[0].to_vec()
        };
        let one = first(&s).len();
        s.put(spaced, ab.clone(), pos(2), at(5, 1, 0));
        let bytes = first(&s);
        assert!(
            bytes.len() > one + spaced.len(),
            "the other spelling is stored"
        );
        let raws: Vec<_> = s.live_records(&ab).into_iter().map(|f| f.0).collect();
        assert_eq!(raws, vec![ab.connect_key(), spaced.to_vec()]);
        // The entry as a snapshot file holds it (after 3 other bytes, length-prefixed) reads back
        // as the same entry, indexed in place.
        let mut file = b"xyz".to_vec();
        file.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        file.extend_from_slice(&bytes);
        let mut back = State::with_base(file);
        let end = 3 + 4 + bytes.len() as u32;
        let run = |at, end| Run { at, end, keys: 1 };
        let mut keys = Keys::default();
        assert_eq!(
            keys.index(&back.base, &[run(3, end), run(3, end)]),
            Err("a key twice")
        );
        for bad in [
            run(2, end),
            run(3, end - 1),
            Run {
                keys: 2,
                ..run(3, end)
            },
        ] {
            assert_eq!(
                Keys::default().index(&back.base, &[bad]),
                Err("a malformed entry"),
                "{bad:?}"
            );
        }
        let mut keys = Keys::default();
        assert_eq!(keys.index(&back.base, &[run(3, end)]), Ok(()));
        back.insert_namespace("c\"q".to_owned(), keys);
        assert_eq!(back.get(&ab), Some(pos(1)));
        assert_eq!(back.live_records(&ab).len(), 2);
        // A change moves the key out of the snapshot's bytes: it is listed once, with the new
        // answer, and a tombstone of each form removes it.
        back.put(spaced, ab.clone(), pos(3), at(20, 1, 1));
        assert_eq!(back.get(&ab), Some(pos(3)));
        assert_eq!(back.partitions("c\"q").len(), 1);
        assert_eq!(back.len(), 1);
        back.reset(spaced, &ab, 1);
        assert_eq!(back.get(&ab), Some(pos(1)));
        back.reset(&ab.connect_key(), &ab, 0);
        assert_eq!(back.get(&ab), None);
        assert!(back.namespaces().is_empty());
        for cut in [3, 10, bytes.len() - 1] {
            assert!(
                Entry::from_bytes(bytes[..cut].into()).is_none(),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn stamps_and_lengths_survive_their_varints() {
        let stamps = [
            at(-1, 0, Stamp::UNREAD),
            at(i64::MIN, i32::MAX, 0),
            at(1_764_000_000_000, -7, 127),
        ];
        let raw = vec![b'x'; 300];
        let forms: Vec<Form<'_>> = stamps
            .iter()
            .map(|&stamp| Form {
                stamp,
                raw: Some(&raw),
                value: b"{}",
            })
            .collect();
        let e = Entry::build(b"{}", &forms[0], &forms[1..]);
        let back: Vec<_> = e
            .view()
            .forms()
            .map(|f| (f.stamp, f.raw, f.value))
            .collect();
        let want: Vec<_> = forms.iter().map(|f| (f.stamp, f.raw, f.value)).collect();
        assert_eq!(back, want);
        assert!(Entry::from_bytes(e.view().bytes().into()).is_some());
    }

    #[test]
    fn pairs_are_sorted_by_their_bucket() {
        let mut v: Vec<(u64, u32)> = (0..10_000u32)
            .map(|i| (u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15), i))
            .collect();
        let mut want = v.clone();
        let mask = (1 << 21) - 1;
        sort_by_bucket(&mut v, mask);
        want.sort_by_key(|&(h, i)| (h & mask, i));
        assert_eq!(v, want);
    }

    /// Our own commits change an entry in place when they can; the state is the one `put_raw`
    /// makes, entry bytes and all: same and other lengths, another spelling, a key with two
    /// forms, a record in another topic partition, a key still in a snapshot's bytes.
    #[test]
    fn a_written_record_changes_the_state_as_put_raw_does() {
        let ab = OffsetKey::new("c", Partition::new().with("a", 1).with("b", 2));
        let ba = OffsetKey::new("c", Partition::new().with("b", 2).with("a", 1));
        let spaced = br#"[ "c", {"a": 1, "b": 2} ]"#;
        let value = |n: i64| format!(r#"{{"position":{n}}}"#).into_bytes();
        let writes: Vec<(Vec<u8>, &OffsetKey, Vec<u8>, Stamp)> = vec![
            (ab.connect_key(), &ab, value(1), at(10, 3, Stamp::UNREAD)),
            (ab.connect_key(), &ab, value(2), at(11, 3, Stamp::UNREAD)),
            (
                ab.connect_key(),
                &ab,
                value(1_000_000),
                at(12, 3, Stamp::UNREAD),
            ),
            (ab.connect_key(), &ab, value(3), at(-1, 3, Stamp::UNREAD)),
            (ab.connect_key(), &ab, value(4), at(13, 5, Stamp::UNREAD)),
            (spaced.to_vec(), &ab, value(5), at(14, 1, Stamp::UNREAD)),
            (spaced.to_vec(), &ab, value(6), at(15, 1, Stamp::UNREAD)),
            (ba.connect_key(), &ba, value(7), at(16, 2, Stamp::UNREAD)),
            (ba.connect_key(), &ba, value(8), at(17, 2, Stamp::UNREAD)),
        ];
        let bytes = |s: &State| -> Vec<Vec<u8>> {
            let mut all: Vec<Vec<u8>> = s
                .namespace_entries()
                .flat_map(|(_, _, e)| e.into_iter().map(<[u8]>::to_vec).collect::<Vec<_>>())
                .collect();
            all.sort();
            all
        };
        let mut written = State::default();
        let mut put = State::default();
        for (raw, key, value, stamp) in &writes {
            written.put_written(raw, key, value, *stamp);
            put.put_raw(raw, key, value, *stamp);
            assert_eq!(bytes(&written), bytes(&put), "after {stamp:?}");
        }
        assert_eq!(written.get(&ab), Some(pos(8)));
        assert_eq!(
            written.live_records(&ab).len(),
            4,
            "ab in partitions 3 and 5, spaced, ba"
        );
        // A key still in a snapshot's bytes leaves them.
        let entry = bytes(&put).remove(0);
        let mut file = (entry.len() as u32).to_le_bytes().to_vec();
        file.extend_from_slice(&entry);
        let mut warm = State::with_base(file);
        let mut keys = Keys::default();
        let run = Run {
            at: 0,
            end: warm.base.len() as u32,
            keys: 1,
        };
        keys.index(&warm.base, &[run]).unwrap();
        warm.insert_namespace("c".to_owned(), keys);
        warm.put_written(&ba.connect_key(), &ba, &value(9), at(18, 2, Stamp::UNREAD));
        put.put_raw(&ba.connect_key(), &ba, &value(9), at(18, 2, Stamp::UNREAD));
        assert_eq!(bytes(&warm), bytes(&put));
        assert_eq!(warm.len(), 1);
    }

    /// A snapshot is written in the bucket order of the table its load will fill: if hashbrown
    /// sized tables otherwise, warm starts would be slower (not wrong).
    #[test]
    fn bucket_mask_is_hashbrowns() {
        for n in [
            1,
            3,
            4,
            7,
            8,
            13,
            14,
            100,
            1000,
            114_688,
            114_689,
            1 << 20,
            1_000_000,
        ] {
            let table = HashTable::<u32>::with_capacity(n);
            assert_eq!(
                bucket_mask(n) + 1,
                table.capacity().next_power_of_two() as u64,
                "{n} keys"
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
