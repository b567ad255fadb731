//! The index: one namespace's keys ([`Keys`]), hashed by their canonical partition, whether the
//! entry is its own allocation or still in the snapshot's bytes a warm start read; and
//! [`Namespace`], its keys and its name.

use std::hash::BuildHasher;

use hashbrown::HashTable;

use super::entry::{Entry, View, based, framed, valid};
use crate::codec::json;

/// One namespace's keys. After a warm start most entries stay where the snapshot's bytes hold
/// them (`base`, offsets into [`State`](super::State)'s copy of the file: indexing them is the whole warm
/// start, no allocation a key); an entry changed since moves to `own`, leaving `base`, so a key
/// is in one of the two. Hashed with foldhash under a random seed of the table's own (SipHash
/// took 14% of a cold load); the seed travels in the snapshot, so that the snapshot can hold the
/// entries in the order of the next table's buckets.
pub(crate) struct Keys {
    pub(super) seed: u64,
    pub(super) hasher: foldhash::fast::FixedState,
    pub(super) own: HashTable<Entry>,
    pub(super) base: HashTable<u32>,
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

    pub(super) fn hash(&self, canonical: &[u8]) -> u64 {
        self.hasher.hash_one(canonical)
    }

    pub(crate) fn len(&self) -> usize {
        self.own.len() + self.base.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(super) fn get<'a>(&'a self, base: &'a [u8], canonical: &[u8]) -> Option<View<'a>> {
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

    pub(super) fn reserve(&mut self, additional: usize) {
        let hasher = &self.hasher;
        self.own
            .reserve(additional, |e| hasher.hash_one(e.view().canonical()));
    }

    /// Gives back room beyond twice the keys held (see [`State::settle_room`](super::State::settle_room)).
    pub(super) fn shrink(&mut self) {
        if self.own.capacity() > 2 * self.own.len().max(16) {
            let hasher = &self.hasher;
            self.own
                .shrink_to(self.own.len(), |e| hasher.hash_one(e.view().canonical()));
        }
    }

    /// Sets the entry of `canonical` to what `build` makes of the current one (`None`: no entry),
    /// with one probe of the table: a cold load inserts every key once, and the table is too
    /// large for the cache.
    pub(super) fn upsert(
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

    pub(super) fn remove(&mut self, base: &[u8], canonical: &[u8]) {
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
    pub(super) fn unbase(&mut self, base: &[u8], h: u64, canonical: &[u8]) {
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

    pub(super) fn iter<'a>(&'a self, base: &'a [u8]) -> impl Iterator<Item = View<'a>> {
        self.own
            .iter()
            .map(Entry::view)
            .chain(self.base.iter().map(move |&at| based(base, at)))
    }
}

/// The bucket mask of a hashbrown table made for `n` keys: a power of two of buckets, at least
/// 8/7 of the keys (4 or 8 below 8 keys). Only the speed of a warm start depends on it matching.
pub(super) fn bucket_mask(n: usize) -> u64 {
    let buckets = match n {
        0..4 => 4,
        4..8 => 8,
        _ => (n.saturating_mul(8) / 7).next_power_of_two(),
    };
    buckets as u64 - 1
}

/// Sorts `(hash, _)` pairs by `hash & mask` (a least-significant-digit radix sort, 11 bits a
/// pass: a comparison sort of a million pairs cost more than the cache misses it saves).
pub(super) fn sort_by_bucket(v: &mut Vec<(u64, u32)>, mask: u64) {
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
    pub(super) json: Vec<u8>,
    pub(super) keys: Keys,
}
impl Namespace {
    pub(super) fn new(name: &str) -> Namespace {
        let mut json = Vec::with_capacity(name.len() + 2);
        json::encode_str(name, &mut json);
        Namespace {
            json,
            keys: Keys::default(),
        }
    }
}
