//! The offers not yet sealed, in lanes: each offering thread writes to a lane of its own, so a
//! task overwriting its own keys touches no cache line another thread writes. A key is pending in
//! one lane at most, the lane of the thread that offered it first since the last seal; an offer of
//! it on another thread replaces it there, under both lanes' locks (moving it instead would move a
//! key offered by two threads at every offer). Sealing (under the buffer's state lock) holds every
//! lane at once and drains them into one batch.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use crate::Offset;
use crate::model::{Entries, OffsetKey};

/// Threads take lanes in turn; more offering threads than lanes share them (safely, as shards).
const LANES: usize = 16;

/// One lane, on a cache line of its own.
#[repr(align(128))]
#[derive(Default)]
struct Lane(Mutex<Entries>);

/// A counter on a cache line of its own (it is written by offers of new keys; the flags read by
/// every offer must not share its line).
#[repr(align(128))]
#[derive(Default)]
struct Count(AtomicUsize);

/// Bit `i` is set while lane `i` may hold entries. It is set and cleared only under lane `i`'s
/// lock, and set before the offer that sets it reads the other bits: of two offers of one new key
/// in two lanes, at least one sees the other's lane and locks it.
#[repr(align(128))]
#[derive(Default)]
struct Occupied(AtomicU32);

#[derive(Default)]
pub(super) struct Pending {
    lanes: [Lane; LANES],
    occupied: Occupied,
    /// Distinct keys in all lanes (updated under a lane's lock).
    len: Count,
    /// Set once the oldest unsealed offer's time is noted; cleared by a seal.
    dated: AtomicBool,
    oldest: Mutex<Option<Instant>>,
}

type Guards<'a> = [Option<MutexGuard<'a, Entries>>; LANES];

fn lock(m: &Mutex<Entries>) -> MutexGuard<'_, Entries> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// This thread's lane.
fn own_lane() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local!(static LANE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % LANES);
    LANE.with(|l| *l)
}

fn bits(mask: u32) -> impl Iterator<Item = usize> {
    (0..LANES).filter(move |i| mask & (1 << i) != 0)
}

impl Pending {
    /// Distinct keys pending.
    pub(super) fn len(&self) -> usize {
        self.len.0.load(Ordering::Acquire)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `key` is pending (marks this thread's lane occupied, as an offer would).
    pub(super) fn contains(&self, key: &OffsetKey) -> bool {
        let g = self.lock_lanes(own_lane());
        g.iter().flatten().any(|l| l.contains_key(key))
    }

    /// Marks `own` (whose lock the caller holds) occupied and returns the other lanes that may hold
    /// entries.
    fn others(&self, own: usize) -> u32 {
        let bit = 1 << own;
        // SeqCst, store before load: see `Occupied`.
        if self.occupied.0.load(Ordering::SeqCst) & bit == 0 {
            self.occupied.0.fetch_or(bit, Ordering::SeqCst);
        }
        self.occupied.0.load(Ordering::SeqCst) & !bit
    }

    /// Locks `own` and every lane that may hold entries, in index order (so two offers never
    /// deadlock), with `own` marked occupied.
    fn lock_lanes(&self, own: usize) -> Guards<'_> {
        let mut want = 1 << own;
        loop {
            let mut g: Guards = std::array::from_fn(|_| None);
            for i in bits(want) {
                g[i] = Some(lock(&self.lanes[i].0));
            }
            let now = self.others(own);
            if now & !want == 0 {
                return g;
            }
            want |= now;
        }
    }

    /// Puts `key` → `value` over its pending value (in whichever lane) when `replace`, or not at
    /// all when the key is pending; a key not pending goes to this thread's lane. Returns whether
    /// it was put, with the value it replaced.
    fn put(&self, key: OffsetKey, value: Option<Offset>, replace: bool) -> (bool, Option<Offset>) {
        let own = own_lane();
        let mut lane = lock(&self.lanes[own].0);
        if let Some(slot) = lane.get_mut(&key) {
            return match replace {
                true => (true, std::mem::replace(slot, value)),
                false => (false, None),
            };
        }
        let others = self.others(own);
        if others == 0 {
            lane.insert(key, value);
            self.len.0.fetch_add(1, Ordering::AcqRel);
            return (true, None);
        }
        // The key may be pending in another lane, or be offered there now: lock those too. Taken
        // out of order only if free at once; otherwise all again, in order.
        let mut g: Guards = std::array::from_fn(|_| None);
        let free = bits(others).all(|i| match self.lanes[i].0.try_lock() {
            Ok(l) => g[i].replace(l).is_none(),
            Err(std::sync::TryLockError::Poisoned(p)) => g[i].replace(p.into_inner()).is_none(),
            Err(std::sync::TryLockError::WouldBlock) => false,
        });
        g[own] = Some(lane);
        if !free || self.others(own) & !others != 0 {
            drop(g);
            g = self.lock_lanes(own);
        }
        let holder = (0..LANES).find(|&i| g[i].as_ref().is_some_and(|l| l.contains_key(&key)));
        fn at<'a>(g: &'a mut Guards<'_>, i: usize) -> &'a mut Entries {
            g[i].as_mut().expect("a locked lane")
        }
        match holder {
            Some(_) if !replace => (false, None),
            Some(i) => {
                let slot = at(&mut g, i)
                    .get_mut(&key)
                    .expect("the key is in this lane");
                (true, std::mem::replace(slot, value))
            }
            None => {
                at(&mut g, own).insert(key, value);
                self.len.0.fetch_add(1, Ordering::AcqRel);
                (true, None)
            }
        }
    }

    /// The newest value of `key` replaces any pending one.
    pub(super) fn insert(&self, key: OffsetKey, value: Option<Offset>) {
        let (_, old) = self.put(key, value, true);
        // Freed outside every lock.
        drop(old);
        self.date();
    }

    /// Inserts `key` → `value` unless `key` is pending; true when it was inserted. An offer
    /// that comes later replaces it, as any newer value does.
    pub(super) fn insert_if_absent(&self, key: OffsetKey, value: Option<Offset>) -> bool {
        let (put, _) = self.put(key, value, false);
        if put {
            self.date();
        }
        put
    }

    /// Notes the time of the oldest unsealed offer. After the insert: a seal racing with it may
    /// take this offer and leave its date behind (the oldest pending age then reads a little high
    /// until the next seal), never leave it undated.
    fn date(&self) {
        if !self.dated.load(Ordering::Acquire) {
            let mut oldest = self.oldest.lock().unwrap_or_else(|p| p.into_inner());
            oldest.get_or_insert_with(Instant::now);
            self.dated.store(true, Ordering::Release);
        }
    }

    /// Puts back a batch that could not be written, under any newer pending value.
    pub(super) fn merge_back(&self, entries: Entries, oldest: Option<Instant>) {
        for (k, v) in entries {
            self.put(k, v, false);
        }
        if let Some(t) = oldest {
            let mut o = self.oldest.lock().unwrap_or_else(|p| p.into_inner());
            *o = Some(o.map_or(t, |x| x.min(t)));
            self.dated.store(true, Ordering::Release);
        }
    }

    /// Drains every lane into `into` (a cleared map to reuse) and returns it, with the time of the
    /// oldest offer in it.
    pub(super) fn take(&self, mut into: Entries) -> (Entries, Option<Instant>) {
        let oldest = {
            let mut o = self.oldest.lock().unwrap_or_else(|p| p.into_inner());
            self.dated.store(false, Ordering::Release);
            o.take()
        };
        // Every lane at once: one cut through all of them, after which every occupied bit clears.
        let mut lanes: [_; LANES] = std::array::from_fn(|i| lock(&self.lanes[i].0));
        // Room for every key at once: a batch grown lane by lane was rehashed at each doubling.
        into.reserve(self.len());
        for lane in &mut lanes {
            if !lane.is_empty() {
                self.len.0.fetch_sub(lane.len(), Ordering::AcqRel);
                into.extend(lane.drain(..));
            }
        }
        // Under every lane's lock: each lane is empty now.
        self.occupied.0.store(0, Ordering::SeqCst);
        (into, oldest)
    }

    /// When the oldest offer not yet sealed arrived.
    pub(super) fn oldest(&self) -> Option<Instant> {
        *self.oldest.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::{Partition, Value};

    fn key(i: u64) -> OffsetKey {
        OffsetKey::new("c", Partition::new().with("p", i as i64))
    }

    fn pos(n: u64) -> Option<Offset> {
        Some(Offset::new().with("position", n as i64))
    }

    /// Each thread offers on a lane of its own (the first threads of a process get distinct ones).
    fn on_new_thread<T: Send>(f: impl FnOnce() -> T + Send) -> T {
        std::thread::scope(|s| s.spawn(f).join().unwrap())
    }

    #[test]
    fn a_later_offer_on_another_thread_wins_and_is_counted_once() {
        let p = Pending::default();
        on_new_thread(|| p.insert(key(1), pos(1)));
        on_new_thread(|| p.insert(key(1), pos(2)));
        on_new_thread(|| p.insert(key(1), pos(3)));
        assert_eq!(p.len(), 1);
        assert!(on_new_thread(|| p.contains(&key(1))));
        let (batch, oldest) = p.take(Entries::default());
        assert_eq!(batch.len(), 1);
        assert_eq!(batch.get(&key(1)), Some(&pos(3)));
        assert!(oldest.is_some());
        assert!(p.is_empty() && !p.contains(&key(1)));
    }

    #[test]
    fn a_pending_key_on_another_lane_is_not_replaced_by_insert_if_absent_or_merge_back() {
        let p = Pending::default();
        on_new_thread(|| p.insert(key(1), pos(5)));
        assert!(!on_new_thread(|| p.insert_if_absent(key(1), None)));
        on_new_thread(|| {
            let older: Entries = [(key(1), pos(4)), (key(2), pos(4))].into_iter().collect();
            p.merge_back(older, Some(Instant::now()));
        });
        let (batch, _) = p.take(Entries::default());
        assert_eq!(batch.get(&key(1)), Some(&pos(5)));
        assert_eq!(batch.get(&key(2)), Some(&pos(4)));
        assert_eq!(batch.len(), 2);
        assert_eq!(p.len(), 0);
    }

    /// Threads offer the same keys, each offer of a key ordered after the one before it (a lock
    /// per key), while another thread seals: every key's values come out of the seals in the order
    /// they were offered, the last one last, and none is lost between lanes.
    #[test]
    fn racing_offers_and_seals_keep_every_key_newest_last() {
        const KEYS: u64 = 64;
        const OFFERS: u64 = 100_000;
        let p = Arc::new(Pending::default());
        let order: Arc<Vec<Mutex<u64>>> = Arc::new((0..KEYS).map(|_| Mutex::new(0)).collect());
        let done = Arc::new(AtomicBool::new(false));
        let sealer = {
            let (p, done, order) = (Arc::clone(&p), Arc::clone(&done), Arc::clone(&order));
            std::thread::spawn(move || {
                let mut seen = vec![0u64; KEYS as usize];
                let seal = |seen: &mut Vec<u64>| {
                    // Offered before the seal: sealed now or before.
                    let before: Vec<u64> = order.iter().map(|o| *o.lock().unwrap()).collect();
                    let (batch, _) = p.take(Entries::default());
                    for (k, v) in batch {
                        let int = |v: Option<&Value>| match v {
                            Some(Value::Int(n)) => *n as u64,
                            other => panic!("not an int: {other:?}"),
                        };
                        let i = int(k.partition().unwrap().get("p")) as usize;
                        let n = int(v.unwrap().get("position"));
                        assert!(n > seen[i], "key {i}: {n} sealed after {}", seen[i]);
                        seen[i] = n;
                    }
                    for (i, b) in before.iter().enumerate() {
                        assert!(seen[i] >= *b, "key {i}: {b} offered, {} sealed", seen[i]);
                    }
                };
                while !done.load(Ordering::Acquire) {
                    seal(&mut seen);
                    std::thread::yield_now();
                }
                seal(&mut seen);
                seen
            })
        };
        let start = std::sync::Barrier::new(3);
        std::thread::scope(|s| {
            for t in 0..3u64 {
                let (p, order, start) = (&p, &order, &start);
                s.spawn(move || {
                    start.wait();
                    for j in 0..OFFERS {
                        let i = (j * 7 + t * 13) % KEYS;
                        let mut last = order[i as usize].lock().unwrap();
                        *last += 1;
                        if j % 5 == 0 {
                            p.insert_if_absent(key(i), pos(*last));
                            // Absent or not, the next offer must be newer than anything pending.
                            p.insert(key(i), pos(*last + 1));
                            *last += 1;
                        } else {
                            p.insert(key(i), pos(*last));
                        }
                    }
                });
            }
        });
        done.store(true, Ordering::Release);
        let seen = sealer.join().unwrap();
        for (i, last) in order.iter().enumerate() {
            assert_eq!(seen[i], *last.lock().unwrap(), "key {i}");
        }
        assert!(p.is_empty());
    }
}
