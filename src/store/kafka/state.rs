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
use std::hash::BuildHasher;

use hashbrown::HashTable;

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

/// One record form of a structural key, as [`Entry`] holds it: where and when the record was
/// written, its exact key bytes (`None`: the canonical spelling, `["<namespace>",<canonical>]`,
/// not stored again) and its offset's JSON as the record holds it.
#[derive(Clone, Copy)]
struct Form<'a> {
    stamp: Stamp,
    raw: Option<&'a [u8]>,
    value: &'a [u8],
}

/// Every live form of one structural key in one allocation, the current (newest) form first;
/// decoded only on lookup (a load makes one entry per key: decoded keys and values took several
/// allocations each, and a map of them several times their bytes):
///
/// ```text
/// u32 LE  canonical partition length
/// ...     canonical partition JSON (a key's structural identity without the namespace)
/// per form, the current one first (v = LEB128 varint, z = zigzag varint):
///   z record timestamp, z topic partition, z offset in it
///   v record key length + 1, or 0 for the canonical spelling (not stored again)
///   ...    record key bytes
///   v offset JSON length
///   ...    offset JSON
/// ```
///
/// Looked up by the canonical partition alone ([`Keys`]), the bytes an [`OffsetKey`] already
/// carries. Varints: fixed-width stamps and lengths were 28 bytes a
/// form, a quarter of a small offset's entry.
pub(crate) struct Entry(Box<[u8]>);

fn put_varint(mut n: u64, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

fn varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at)?;
        *at += 1;
        n |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(n);
        }
    }
    None
}

fn signed(b: &[u8], at: &mut usize) -> Option<i64> {
    let z = varint(b, at)?;
    Some((z >> 1) as i64 ^ -((z & 1) as i64))
}

fn slice<'a>(b: &'a [u8], at: &mut usize, n: u64) -> Option<&'a [u8]> {
    let end = at.checked_add(usize::try_from(n).ok()?)?;
    let s = b.get(*at..end)?;
    *at = end;
    Some(s)
}

/// The form at `*at` of an entry's bytes `b`; `None` when the bytes do not hold one.
fn parse_form<'a>(b: &'a [u8], at: &mut usize) -> Option<Form<'a>> {
    let stamp = Stamp {
        timestamp: signed(b, at)?,
        partition: i32::try_from(signed(b, at)?).ok()?,
        offset: signed(b, at)?,
    };
    let raw = match varint(b, at)? {
        0 => None,
        n => Some(slice(b, at, n - 1)?),
    };
    let n = varint(b, at)?;
    let value = slice(b, at, n)?;
    Some(Form { stamp, raw, value })
}

impl Entry {
    fn build(canonical: &[u8], current: &Form<'_>, shadowed: &[Form<'_>]) -> Entry {
        thread_local! {
            static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        // Built in a reused buffer and copied once: growing (or shrinking) the entry's own
        // allocation to its size was a realloc a key.
        SCRATCH.with_borrow_mut(|b| {
            b.clear();
            Self::write(canonical, current, shadowed, b);
            Entry(Box::from(&b[..]))
        })
    }

    /// Appends the bytes of the entry [`build`](Entry::build) makes to `b`.
    fn write(canonical: &[u8], current: &Form<'_>, shadowed: &[Form<'_>], b: &mut Vec<u8>) {
        let forms = std::iter::once(current).chain(shadowed);
        b.extend_from_slice(&(canonical.len() as u32).to_le_bytes());
        b.extend_from_slice(canonical);
        for f in forms {
            put_varint(zigzag(f.stamp.timestamp), b);
            put_varint(zigzag(i64::from(f.stamp.partition)), b);
            put_varint(zigzag(f.stamp.offset), b);
            match f.raw {
                None => b.push(0),
                Some(raw) => {
                    put_varint(raw.len() as u64 + 1, b);
                    b.extend_from_slice(raw);
                }
            }
            put_varint(f.value.len() as u64, b);
            b.extend_from_slice(f.value);
        }
    }

    /// An entry from its bytes (as [`View::bytes`] gives them), or `None` when they are not
    /// one: every form is parsed here, so no later access can fail.
    pub(crate) fn from_bytes(bytes: Box<[u8]>) -> Option<Entry> {
        valid(&bytes).then_some(Entry(bytes))
    }

    fn view(&self) -> View<'_> {
        View(&self.0)
    }
}

/// Whether `bytes` are an entry's (a canonical partition and at least one form).
pub(crate) fn valid(bytes: &[u8]) -> bool {
    let Some(len) = bytes.get(..4) else {
        return false;
    };
    let len = u32::from_le_bytes(len.try_into().expect("4 bytes"));
    let mut at = 4;
    if slice(bytes, &mut at, u64::from(len)).is_none() || at == bytes.len() {
        return false;
    }
    while at < bytes.len() {
        if parse_form(bytes, &mut at).is_none() {
            return false;
        }
    }
    true
}

/// An entry's bytes wherever they are: an [`Entry`] of its own, or in a snapshot's body.
#[derive(Clone, Copy)]
pub(crate) struct View<'a>(&'a [u8]);

impl<'a> View<'a> {
    pub(crate) fn bytes(self) -> &'a [u8] {
        self.0
    }

    fn canonical(self) -> &'a [u8] {
        let len = u32::from_le_bytes(self.0[..4].try_into().expect("4 bytes")) as usize;
        &self.0[4..4 + len]
    }

    /// The forms, the current one first.
    fn forms(self) -> impl Iterator<Item = Form<'a>> {
        let b = self.0;
        let mut at = 4 + self.canonical().len();
        // Every entry was built by `build` or checked by `valid`.
        std::iter::from_fn(move || (at < b.len()).then(|| parse_form(b, &mut at).expect("a form")))
    }

    fn current(self) -> Form<'a> {
        self.forms().next().expect("an entry has a form")
    }
}

/// The bytes of the entry whose length prefix is at `at` in a snapshot's bytes `base` (as the
/// file holds it: u32 LE length, then the entry), if they are all there.
fn framed(base: &[u8], at: u32) -> Option<&[u8]> {
    let at = at as usize;
    let len = u32::from_le_bytes(base.get(at..at.checked_add(4)?)?.try_into().ok()?) as usize;
    base.get(at + 4..(at + 4).checked_add(len)?)
}

/// The entry at `at` in `base`, one [`Keys::index`] checked.
fn based(base: &[u8], at: u32) -> View<'_> {
    View(framed(base, at).expect("an indexed entry"))
}

/// One namespace's keys. After a warm start most entries stay where the snapshot's bytes hold
/// them (`base`, offsets into [`State`]'s copy of the file: indexing them is the whole warm
/// start, no allocation a key); an entry changed since moves to `own`, leaving `base`, so a key
/// is in one of the two. Hashed with foldhash under a random seed of the table's own (SipHash
/// took 14% of a cold load); the seed travels in the snapshot, so that the snapshot can hold the
/// entries in the order of the next table's buckets.
pub(crate) struct Keys {
    seed: u64,
    hasher: foldhash::fast::FixedState,
    own: HashTable<Entry>,
    base: HashTable<u32>,
}

impl Default for Keys {
    fn default() -> Keys {
        Keys::with_seed(std::hash::RandomState::new().hash_one(0u64))
    }
}

/// A run of consecutive entries in a snapshot's bytes, each as the file holds it (u32 LE length,
/// then the entry): `keys` of them, from `at` to `end`. One thread checks and hashes a run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Run {
    pub at: u32,
    pub end: u32,
    pub keys: u32,
}

impl Keys {
    /// No keys yet, hashed under `seed` (a snapshot's, so that its bucket order holds).
    pub(crate) fn with_seed(seed: u64) -> Keys {
        Keys {
            seed,
            hasher: foldhash::fast::FixedState::with_seed(seed),
            own: HashTable::new(),
            base: HashTable::new(),
        }
    }

    pub(crate) fn seed(&self) -> u64 {
        self.seed
    }

    fn hash(&self, canonical: &[u8]) -> u64 {
        self.hasher.hash_one(canonical)
    }

    pub(crate) fn len(&self) -> usize {
        self.own.len() + self.base.len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn get<'a>(&'a self, base: &'a [u8], canonical: &[u8]) -> Option<View<'a>> {
        let h = self.hash(canonical);
        if let Some(e) = self.own.find(h, |e| e.view().canonical() == canonical) {
            return Some(e.view());
        }
        let at = self
            .base
            .find(h, |&at| based(base, at).canonical() == canonical)?;
        Some(based(base, *at))
    }

    /// Indexes the entries of `runs` in the snapshot's bytes `base`, or says why not: one is
    /// malformed, a run does not end where its entries do, or a key is there twice (no snapshot
    /// we wrote has any). The runs are walked, checked and hashed on every core, and the keys go
    /// in in file order, which [`in_bucket_order`](Keys::in_bucket_order) made the order of the
    /// table's buckets, so filling it walks its memory once.
    pub(crate) fn index(&mut self, base: &[u8], runs: &[Run]) -> Result<(), &'static str> {
        let total = runs.iter().map(|r| r.keys as usize).sum();
        let mut keyed = vec![(0u64, 0u32); total];
        let mut jobs = Vec::with_capacity(runs.len());
        let mut rest = &mut keyed[..];
        for run in runs {
            let (out, more) = rest.split_at_mut(run.keys as usize);
            jobs.push((*run, out));
            rest = more;
        }
        let hasher = &self.hasher;
        let walk = |jobs: &mut [(Run, &mut [(u64, u32)])]| {
            jobs.iter_mut().all(|(run, out)| {
                let mut at = run.at;
                for slot in out.iter_mut() {
                    match framed(base, at) {
                        Some(bytes) if valid(bytes) => {
                            *slot = (hasher.hash_one(View(bytes).canonical()), at);
                            at += 4 + bytes.len() as u32;
                        }
                        _ => return false,
                    }
                }
                at == run.end
            })
        };
        let threads = std::thread::available_parallelism().map_or(1, usize::from);
        let per_thread = jobs.len().div_ceil(threads).max(1);
        let walked = if total < 1 << 14 || jobs.len() == 1 {
            walk(&mut jobs)
        } else {
            std::thread::scope(|scope| {
                let mut groups = jobs.chunks_mut(per_thread);
                let mine = groups.next().unwrap_or_default();
                let others: Vec<_> = groups.map(|g| scope.spawn(move || walk(g))).collect();
                let ok = walk(mine);
                others.into_iter().fold(ok, |ok, j| {
                    j.join().unwrap_or_else(|p| std::panic::resume_unwind(p)) && ok
                })
            })
        };
        if !walked {
            return Err("a malformed entry");
        }
        let rehash = |&o: &u32| hasher.hash_one(based(base, o).canonical());
        self.base.reserve(total, rehash);
        for (h, at) in keyed {
            // The key's bytes are read only when a hash matches: read for every key they were
            // a cache miss each.
            let same = |&o: &u32| based(base, o).canonical() == based(base, at).canonical();
            match self.base.entry(h, same, rehash) {
                hashbrown::hash_table::Entry::Occupied(_) => return Err("a key twice"),
                hashbrown::hash_table::Entry::Vacant(v) => {
                    v.insert(at);
                }
            }
        }
        Ok(())
    }

    /// Every entry's bytes, in the order of the buckets their table will have when a snapshot of
    /// them is indexed (same seed, same number of keys): in any other order each insert of a
    /// warm start missed the cache.
    pub(crate) fn in_bucket_order<'a>(&'a self, base: &'a [u8]) -> Vec<&'a [u8]> {
        let views: Vec<View<'a>> = self.iter(base).collect();
        let mut keyed: Vec<(u64, u32)> = (views.iter().enumerate())
            .map(|(i, v)| (self.hash(v.canonical()), i as u32))
            .collect();
        sort_by_bucket(&mut keyed, bucket_mask(views.len()));
        keyed
            .into_iter()
            .map(|(_, i)| views[i as usize].bytes())
            .collect()
    }

    fn reserve(&mut self, additional: usize) {
        let hasher = &self.hasher;
        self.own
            .reserve(additional, |e| hasher.hash_one(e.view().canonical()));
    }

    /// Gives back room beyond twice the keys held (see [`State::settle_room`]).
    fn shrink(&mut self) {
        if self.own.capacity() > 2 * self.own.len().max(16) {
            let hasher = &self.hasher;
            self.own
                .shrink_to(self.own.len(), |e| hasher.hash_one(e.view().canonical()));
        }
    }

    /// Sets the entry of `canonical` to what `build` makes of the current one (`None`: no entry),
    /// with one probe of the table: a cold load inserts every key once, and the table is too
    /// large for the cache.
    fn upsert(
        &mut self,
        base: &[u8],
        canonical: &[u8],
        build: impl FnOnce(Option<View<'_>>) -> Entry,
    ) {
        let h = self.hash(canonical);
        let hasher = &self.hasher;
        match self.own.entry(
            h,
            |e| e.view().canonical() == canonical,
            |e| hasher.hash_one(e.view().canonical()),
        ) {
            hashbrown::hash_table::Entry::Occupied(mut o) => {
                let entry = build(Some(o.get().view()));
                *o.get_mut() = entry;
            }
            hashbrown::hash_table::Entry::Vacant(v) => {
                let found = if self.base.is_empty() {
                    None
                } else {
                    self.base
                        .find_entry(h, |&at| based(base, at).canonical() == canonical)
                        .ok()
                };
                let entry = match found {
                    Some(o) => {
                        let (at, _) = o.remove();
                        build(Some(based(base, at)))
                    }
                    None => build(None),
                };
                v.insert(entry);
            }
        }
    }

    /// Replaces the entry of `entry`'s key (wherever it was) with `entry`.
    pub(crate) fn put(&mut self, base: &[u8], entry: Entry) {
        let canonical = entry.view().canonical();
        let h = self.hash(canonical);
        self.unbase(base, h, canonical);
        let hasher = &self.hasher;
        match self.own.entry(
            h,
            |e| e.view().canonical() == canonical,
            |e| hasher.hash_one(e.view().canonical()),
        ) {
            hashbrown::hash_table::Entry::Occupied(mut o) => *o.get_mut() = entry,
            hashbrown::hash_table::Entry::Vacant(v) => {
                v.insert(entry);
            }
        }
    }

    fn remove(&mut self, base: &[u8], canonical: &[u8]) {
        let h = self.hash(canonical);
        self.unbase(base, h, canonical);
        if let Ok(o) = self
            .own
            .find_entry(h, |e| e.view().canonical() == canonical)
        {
            o.remove();
        }
    }

    /// Drops the key from `base` (its snapshot bytes stay, unreferenced).
    fn unbase(&mut self, base: &[u8], h: u64, canonical: &[u8]) {
        if self.base.is_empty() {
            return;
        }
        if let Ok(o) = self
            .base
            .find_entry(h, |&at| based(base, at).canonical() == canonical)
        {
            o.remove();
        }
    }

    fn iter<'a>(&'a self, base: &'a [u8]) -> impl Iterator<Item = View<'a>> {
        self.own
            .iter()
            .map(Entry::view)
            .chain(self.base.iter().map(move |&at| based(base, at)))
    }
}

/// The bucket mask of a hashbrown table made for `n` keys: a power of two of buckets, at least
/// 8/7 of the keys (4 or 8 below 8 keys). Only the speed of a warm start depends on it matching.
fn bucket_mask(n: usize) -> u64 {
    let buckets = match n {
        0..4 => 4,
        4..8 => 8,
        _ => (n.saturating_mul(8) / 7).next_power_of_two(),
    };
    buckets as u64 - 1
}

/// Sorts `(hash, _)` pairs by `hash & mask` (a least-significant-digit radix sort, 11 bits a
/// pass: a comparison sort of a million pairs cost more than the cache misses it saves).
fn sort_by_bucket(v: &mut Vec<(u64, u32)>, mask: u64) {
    const BITS: u32 = 11;
    let mut tmp = vec![(0, 0); v.len()];
    let mut shift = 0;
    while shift < 64 - mask.leading_zeros() {
        let digit = |h: u64| ((h & mask) >> shift) as usize & ((1 << BITS) - 1);
        let mut at = vec![0usize; 1 << BITS];
        for &(h, _) in v.iter() {
            at[digit(h)] += 1;
        }
        let mut sum = 0;
        for a in &mut at {
            (*a, sum) = (sum, sum + *a);
        }
        for &pair in v.iter() {
            let d = digit(pair.0);
            tmp[at[d]] = pair;
            at[d] += 1;
        }
        std::mem::swap(v, &mut tmp);
        shift += BITS;
    }
}

/// One namespace: its keys, and its name as a JSON string (what a canonical spelling starts with).
pub(crate) struct Namespace {
    json: Vec<u8>,
    keys: Keys,
}

impl Namespace {
    fn new(name: &str) -> Namespace {
        let mut json = Vec::with_capacity(name.len() + 2);
        json::encode_str(name, &mut json);
        Namespace {
            json,
            keys: Keys::default(),
        }
    }

    /// Whether `raw` is the canonical spelling of a key whose canonical partition is `canonical`.
    fn is_canonical(&self, raw: &[u8], canonical: &[u8]) -> bool {
        is_canonical(&self.json, raw, canonical)
    }

    /// The record key bytes of `form` of the key `canonical`.
    fn raw<'a>(&self, form: &Form<'a>, canonical: &[u8]) -> std::borrow::Cow<'a, [u8]> {
        match form.raw {
            Some(r) => std::borrow::Cow::Borrowed(r),
            None => {
                let mut v = Vec::with_capacity(self.json.len() + canonical.len() + 3);
                self.raw_into(form, canonical, &mut v);
                std::borrow::Cow::Owned(v)
            }
        }
    }

    /// Appends [`raw`](Namespace::raw) to `out`.
    fn raw_into(&self, form: &Form<'_>, canonical: &[u8], out: &mut Vec<u8>) {
        match form.raw {
            Some(r) => out.extend_from_slice(r),
            None => {
                out.push(b'[');
                out.extend_from_slice(&self.json);
                out.push(b',');
                out.extend_from_slice(canonical);
                out.push(b']');
            }
        }
    }

    /// Whether `form` of the key `canonical` is the record key `raw` in topic partition `partition`.
    fn is(&self, form: &Form<'_>, canonical: &[u8], raw: &[u8], partition: i32) -> bool {
        is_form(&self.json, form, canonical, raw, partition)
    }

    /// The key as `form`'s record decodes (its member order). Every form's key decoded once
    /// already, when it was stored.
    fn key(&self, form: &Form<'_>, canonical: &[u8]) -> Option<OffsetKey> {
        json::decode_key(&self.raw(form, canonical)).ok()
    }
}

/// [`Namespace::is_canonical`] of the namespace whose name is the JSON string `json`.
fn is_canonical(json: &[u8], raw: &[u8], canonical: &[u8]) -> bool {
    let n = json.len();
    raw.len() == n + canonical.len() + 3
        && raw[0] == b'['
        && raw[1..1 + n] == *json
        && raw[1 + n] == b','
        && raw[2 + n..raw.len() - 1] == *canonical
        && raw[raw.len() - 1] == b']'
}

/// [`Namespace::is`] of the namespace whose name is the JSON string `json`.
fn is_form(json: &[u8], form: &Form<'_>, canonical: &[u8], raw: &[u8], partition: i32) -> bool {
    form.stamp.partition == partition
        && match form.raw {
            Some(r) => r == raw,
            None => is_canonical(json, raw, canonical),
        }
}

/// Makes the newest form current: of the shadowed ones, the greatest [`Stamp`] (the last of equal
/// ones) replaces the current one when it is greater.
fn settle<'a>(current: &mut Form<'a>, shadowed: &mut [Form<'a>]) {
    let newest = (0..shadowed.len()).max_by_key(|i| shadowed[*i].stamp);
    if let Some(i) = newest
        && shadowed[i].stamp > current.stamp
    {
        std::mem::swap(current, &mut shadowed[i]);
    }
}

/// The canonical partition bytes of `key`: its structural identity without the namespace.
fn canonical(key: &OffsetKey) -> &[u8] {
    &key.id()[4 + key.namespace().len()..]
}

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
