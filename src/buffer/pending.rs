//! The offers not yet sealed, in shards by key hash, each under its own lock: tasks offering on
//! several threads rarely wait for each other, and none waits for the buffer's state lock. Sealing
//! (under that state lock) drains every shard into one batch.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use crate::Offset;
use crate::model::{Entries, OffsetKey};

/// Enough shards that two offering threads seldom meet, few enough that a seal of one offset
/// takes few locks.
const SHARDS: usize = 16;

/// One shard, on a cache line of its own.
#[repr(align(128))]
#[derive(Default)]
struct Shard(Mutex<Entries>);

/// A counter on a cache line of its own (it is written by offers of new keys; the flags read by
/// every offer must not share its line).
#[repr(align(128))]
#[derive(Default)]
struct Count(AtomicUsize);

#[derive(Default)]
pub(super) struct Pending {
    shards: [Shard; SHARDS],
    /// Distinct keys in all shards (updated under the shard's lock).
    len: Count,
    /// Set once the oldest unsealed offer's time is noted; cleared by a seal.
    dated: AtomicBool,
    oldest: Mutex<Option<Instant>>,
}

fn lock(m: &Mutex<Entries>) -> MutexGuard<'_, Entries> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Pending {
    fn shard(&self, key: &OffsetKey) -> &Mutex<Entries> {
        use std::hash::BuildHasher;
        let h = crate::model::BuildKeyHasher.hash_one(key);
        // The high bits: the maps' own buckets use the low ones.
        &self.shards[(h >> 59) as usize % SHARDS].0
    }

    /// Distinct keys pending.
    pub(super) fn len(&self) -> usize {
        self.len.0.load(Ordering::Acquire)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(super) fn contains(&self, key: &OffsetKey) -> bool {
        lock(self.shard(key)).contains_key(key)
    }

    /// The newest value of `key` replaces any pending one.
    pub(super) fn insert(&self, key: OffsetKey, value: Option<Offset>) {
        let mut shard = lock(self.shard(&key));
        let old = match shard.entry(key) {
            indexmap::map::Entry::Occupied(mut e) => Some(e.insert(value)),
            indexmap::map::Entry::Vacant(e) => {
                e.insert(value);
                self.len.0.fetch_add(1, Ordering::AcqRel);
                None
            }
        };
        drop(shard);
        drop(old);
        // After the insert: a seal racing with it may leave this offer dated twice (an age a
        // little too high), never undated.
        if !self.dated.load(Ordering::Acquire) {
            let mut oldest = self.oldest.lock().unwrap_or_else(|p| p.into_inner());
            oldest.get_or_insert_with(Instant::now);
            self.dated.store(true, Ordering::Release);
        }
    }

    /// Inserts `key` → `value` unless `key` is pending; true when it was inserted. An offer
    /// that comes later replaces it, as any newer value does.
    pub(super) fn insert_if_absent(&self, key: OffsetKey, value: Option<Offset>) -> bool {
        let mut shard = lock(self.shard(&key));
        let indexmap::map::Entry::Vacant(e) = shard.entry(key) else {
            return false;
        };
        e.insert(value);
        self.len.0.fetch_add(1, Ordering::AcqRel);
        drop(shard);
        if !self.dated.load(Ordering::Acquire) {
            let mut oldest = self.oldest.lock().unwrap_or_else(|p| p.into_inner());
            oldest.get_or_insert_with(Instant::now);
            self.dated.store(true, Ordering::Release);
        }
        true
    }

    /// Puts back a batch that could not be written, under any newer pending value.
    pub(super) fn merge_back(&self, entries: Entries, oldest: Option<Instant>) {
        for (k, v) in entries {
            let mut shard = lock(self.shard(&k));
            if let indexmap::map::Entry::Vacant(e) = shard.entry(k) {
                e.insert(v);
                self.len.0.fetch_add(1, Ordering::AcqRel);
            }
        }
        if let Some(t) = oldest {
            let mut o = self.oldest.lock().unwrap_or_else(|p| p.into_inner());
            *o = Some(o.map_or(t, |x| x.min(t)));
            self.dated.store(true, Ordering::Release);
        }
    }

    /// Drains every shard into `into` (a cleared map to reuse) and returns it, with the time of the
    /// oldest offer in it.
    pub(super) fn take(&self, mut into: Entries) -> (Entries, Option<Instant>) {
        let oldest = {
            let mut o = self.oldest.lock().unwrap_or_else(|p| p.into_inner());
            self.dated.store(false, Ordering::Release);
            o.take()
        };
        // Room for every key at once: a batch grown shard by shard was rehashed at each doubling.
        into.reserve(self.len());
        for shard in &self.shards {
            let mut s = lock(&shard.0);
            if s.is_empty() {
                continue;
            }
            self.len.0.fetch_sub(s.len(), Ordering::AcqRel);
            into.extend(s.drain(..));
        }
        (into, oldest)
    }

    /// When the oldest offer not yet sealed arrived.
    pub(super) fn oldest(&self) -> Option<Instant> {
        *self.oldest.lock().unwrap_or_else(|p| p.into_inner())
    }
}
