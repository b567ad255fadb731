//! The commit path checked exhaustively for small bounds: every schedule of a bounded space is run
//! through the real `CommitBuffer`, the crash-simulating file system and a real store (memory,
//! RocksDB), and `connect_offsets::scenario` checks the four promises (no loss, atomic prefix, no
//! duplication, no regression) after every recovery. Where `tests/core/crash_props.rs` samples, this
//! enumerates.
//!
//! **Workloads.** Two committers offer to up to three keys and commit in up to three flushes. A
//! flush is what reached the buffer before one commit: one committer's offer, or both committers'
//! offers in either order (the order decides which value wins a key both offered), each a new
//! value or a reset, committed at `Local` or at `Store` durability. The real buffer does not let a
//! caller steer which concurrent commits share a flush, so the test drives both committers from
//! one thread and enumerates those groupings and orders instead (the buffer does not know who
//! offered, only in which order). Workloads are enumerated up to renaming of keys, in families
//! ([`families`]): every one-flush workload over two keys (one or two offers, either
//! durability), and every three-flush workload over three keys of one offer each at `Local`;
//! `MODEL_CHECK_WIDE=1` adds resets and `Store` to the second family and every two-flush
//! workload (hours: for `scripts/deep`). Each commit waits until the store applied its batch
//! (`settle`), so the apply thread does not lag into the next batch and every run of a schedule
//! passes the same crash points in the same order. Segments do not rotate within a lifetime (one
//! large segment): rotation, release and compaction are reached in every reopen, which does all
//! three.
//!
//! **Schedules.** For every workload, every combination of:
//! 1. no crash, or a crash at each occurrence of every crash point the workload's lifetime passes
//!    (a crash inside a write lets the whole write reach the file; the power loss below picks what
//!    survives of it, so every torn length of the last write is one choice);
//! 2. at that crash, every power loss: for each file with unsynced bytes every prefix of them (0
//!    to all, byte by byte), times keeping or dropping each unsynced directory change (creation,
//!    rename, removal), each path on its own;
//! 3. then a reopen with no crash, or a crash at each occurrence of every point that reopen
//!    passes (recovery, its replay into the store, the new segment, release or compaction, close),
//!    with again every power loss;
//! 4. then reopens until one succeeds, a clean close and one more reopen, each recovery checked.
//!
//! A *state* is one distinct crash image: the log's durable files after the power loss, with the
//! seq acknowledged before it and which lifetime crashed. Crash images that recovery turns into
//! the same log before its first crash point (every torn tail it cuts; see [`recovered_image`])
//! share one exploration of the reopen's crashes. The test prints `explored N states in M
//! schedules` per configuration and fails unless every schedule it promised (each alternative of
//! each choice above, counted as it is discovered) ran, its chosen crashes happened where chosen,
//! and every crash point was crashed at.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use connect_offsets::internal::crash::{CrashPlan, CrashPoint};
use connect_offsets::internal::fs::{Keep, SimFs, WalFs};
use connect_offsets::internal::wal::{RecoveryPolicy, WalDir};
use connect_offsets::scenario::{MemoryFactory, Op, Scenario, ScenarioOptions, StoreFactory};

#[cfg(feature = "rocksdb")]
use crate::scenario_util;

/// One offer: which key, a reset instead of a new value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Offer {
    key: u8,
    reset: bool,
}

/// The offers that reached the buffer before one commit, in arrival order: at most one of each
/// committer, so at most two (the buffer does not know who offered, only in which order).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Flush {
    offers: Vec<Offer>,
    store: bool,
}

/// A family of workloads: every sequence of `flushes` flushes over `keys` keys whose flushes
/// hold up to `offers` offers, with resets or not, at `Local` only or at both durabilities.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    flushes: usize,
    keys: u8,
    offers: usize,
    resets: bool,
    store: bool,
}

/// Every workload of `b`, up to renaming of keys.
fn workloads(b: Bounds) -> Vec<Vec<Flush>> {
    let kinds: &[bool] = if b.resets { &[false, true] } else { &[false] };
    let one: Vec<Offer> = (0..b.keys)
        .flat_map(|key| kinds.iter().map(move |&reset| Offer { key, reset }))
        .collect();
    let mut shapes: Vec<Vec<Offer>> = one.iter().map(|o| vec![*o]).collect();
    if b.offers >= 2 {
        for x in &one {
            for y in &one {
                shapes.push(vec![*x, *y]);
            }
        }
    }
    let durabilities: &[bool] = if b.store { &[false, true] } else { &[false] };
    let mut out: Vec<Vec<Flush>> = vec![Vec::new()];
    for _ in 0..b.flushes {
        let mut next = Vec::new();
        for w in &out {
            for offers in &shapes {
                for &store in durabilities {
                    let mut w = w.clone();
                    w.push(Flush {
                        offers: offers.clone(),
                        store,
                    });
                    if w == canonical(&w) {
                        next.push(w);
                    }
                }
            }
        }
        out = next;
    }
    out
}

/// Keys renumbered in the order they first appear.
fn canonical(w: &[Flush]) -> Vec<Flush> {
    let mut keys = HashMap::new();
    w.iter()
        .map(|f| Flush {
            offers: f
                .offers
                .iter()
                .map(|o| {
                    let n = keys.len() as u8;
                    Offer {
                        key: *keys.entry(o.key).or_insert(n),
                        reset: o.reset,
                    }
                })
                .collect(),
            store: f.store,
        })
        .collect()
}

/// The choices of one schedule so far: the given prefix, then the first alternative of each new
/// choice; `taken` records each choice's value and how many alternatives it had.
struct Choices {
    prefix: Vec<usize>,
    taken: Vec<(usize, usize)>,
    /// A replayed choice found fewer alternatives than when it was first made.
    diverged: Option<String>,
}

impl Choices {
    fn choose(&mut self, alternatives: usize, what: &str) -> usize {
        let i = self.taken.len();
        let v = self.prefix.get(i).copied().unwrap_or(0);
        if v >= alternatives {
            self.diverged
                .get_or_insert_with(|| format!("{what}: choice {v} of {alternatives}"));
        }
        self.taken.push((v, alternatives));
        v
    }
}

/// Where a crash goes: occurrence `skip` of `point` in one lifetime.
type Site = (CrashPoint, usize);

/// Every crash site of a lifetime that passed each point `hits[point]` times.
fn sites(hits: &BTreeMap<CrashPoint, u64>) -> Vec<Site> {
    CrashPoint::ALL
        .iter()
        .flat_map(|p| (0..hits.get(p).copied().unwrap_or(0) as usize).map(move |s| (*p, s)))
        .collect()
}

/// How many power losses an `Unsynced` allows, and the `i`-th of them.
fn power_losses(u: &connect_offsets::internal::fs::Unsynced) -> usize {
    u.files.iter().map(|(_, n)| n + 1).product::<usize>() << u.names.len()
}

fn nth_power_loss(u: &connect_offsets::internal::fs::Unsynced, mut i: usize) -> Keep {
    let mut keep = Keep::default();
    for (_, n) in &u.files {
        keep.bytes.push(i % (n + 1));
        i /= n + 1;
    }
    for _ in &u.names {
        keep.names.push(i % 2 == 1);
        i /= 2;
    }
    keep
}

/// The log `image` as recovery leaves it before its first crash point: torn tails cut and its own
/// temporary files removed, by the log's own open (`WalDir::open`) on a copy. Crash images that
/// recovery makes the same lead to the same states from there on. An image it refuses stays as
/// it is.
fn recovered_image(image: &BTreeMap<PathBuf, Vec<u8>>) -> BTreeMap<PathBuf, Vec<u8>> {
    let copy = SimFs::new();
    for (path, bytes) in image {
        copy.put(path, bytes);
    }
    let fs: Arc<dyn WalFs> = Arc::new(copy.clone());
    match WalDir::open(fs, Path::new(WAL_DIR), None, RecoveryPolicy::Fail, None) {
        Ok(_) => copy.durable_image(),
        Err(_) => image.clone(),
    }
}

/// Where `scenario` keeps its log.
const WAL_DIR: &str = "/wal";

/// What one schedule's run learned.
struct Run {
    taken: Vec<(usize, usize)>,
    /// After the first crash: the state recovery starts from (see [`recovered_image`]).
    recovers_from: Option<u64>,
    /// The crash sites found at a site choice made for the first time: its position and sites.
    learned: Vec<(usize, Vec<Site>)>,
}

struct Explorer<'a> {
    name: &'a str,
    make: &'a dyn Fn() -> Box<dyn StoreFactory>,
    /// Crash sites known at each site choice, by the choices before it.
    sites: HashMap<(usize, Vec<usize>), Vec<Site>>,
    /// States after a first crash whose reopen's crashes were explored already.
    recovered: HashSet<u64>,
    states: Rc<RefCell<HashSet<u64>>>,
    crashed: BTreeMap<CrashPoint, u64>,
}

impl Explorer<'_> {
    fn options() -> ScenarioOptions {
        ScenarioOptions {
            keys: 3,
            segment_bytes: 1 << 30,
            settle: true,
            ..ScenarioOptions::default()
        }
    }

    /// Runs workload `w` (number `wi`) under the choices `prefix`.
    fn run(&mut self, wi: usize, w: &[Flush], prefix: &[usize]) -> Result<Run, String> {
        let choices = Rc::new(RefCell::new(Choices {
            prefix: prefix.to_vec(),
            taken: Vec::new(),
            diverged: None,
        }));
        let mut factory = (self.make)();
        let mut s = Scenario::start(factory.as_mut(), Self::options())?;
        let base = s.report().lifetime_log.len();
        let mut learned = Vec::new();
        let recovers_from = Rc::new(RefCell::new(None));

        // Choice 0: the first crash, in the workload's lifetime.
        let first = choices.borrow_mut().choose(usize::MAX, "first crash");
        let first_site = match first {
            0 => None,
            v => Some(self.site(0, prefix, v)?),
        };
        // The second crash's choice comes after the first crash's power loss, if there is one.
        let second_at = if first == 0 { 1 } else { 2 };
        let second = match first {
            0 => choices.borrow_mut().choose(usize::MAX, "second crash"),
            _ => prefix.get(second_at).copied().unwrap_or(0),
        };
        let second_site = match second {
            0 => None,
            v => Some(self.site(second_at, prefix, v)?),
        };
        if let Some((p, skip)) = first_site {
            s.arm(p, skip, CrashPlan::WHOLE_WRITE);
        }
        if let Some((p, skip)) = second_site {
            s.arm_next_open(p, skip, CrashPlan::WHOLE_WRITE);
        }
        let hits_at_start = s.hits_now();
        let at =
            |e: String| format!("crash at {first_site:?}, in the reopen at {second_site:?}: {e}");
        {
            let choices = Rc::clone(&choices);
            let states = Rc::clone(&self.states);
            let recovers_from = Rc::clone(&recovers_from);
            let mut crash_no = 0u8;
            s.set_power_loss(Box::new(move |sim: &SimFs, acked: u64| {
                crash_no += 1;
                let mut c = choices.borrow_mut();
                let u = sim.unsynced();
                let i = c.choose(power_losses(&u), "power loss");
                if crash_no == 1 && first != 0 {
                    c.choose(usize::MAX, "second crash");
                }
                sim.power_loss(&nth_power_loss(&u, i));
                let image = sim.durable_image();
                let mut h = std::collections::hash_map::DefaultHasher::new();
                (wi, crash_no, acked, &image).hash(&mut h);
                states.borrow_mut().insert(h.finish());
                if crash_no == 1 && first != 0 {
                    // What the rest depends on: the workload, the crash (the store's files and
                    // the batches sealed follow from it), what was acknowledged, the log.
                    let mut h = std::collections::hash_map::DefaultHasher::new();
                    (wi, first, acked, recovered_image(&image)).hash(&mut h);
                    *recovers_from.borrow_mut() = Some(h.finish());
                }
            }));
        }
        for f in w {
            for o in &f.offers {
                s.step(&Op::Offer {
                    key: o.key,
                    reset: o.reset,
                })
                .map_err(at)?;
            }
            s.step(&Op::Commit { store: f.store }).map_err(at)?;
            if s.report().lifetime_log.len() > base {
                break; // the first crash happened: what follows is its recovery
            }
        }
        let report = s.finish().map_err(at)?;
        let mut c = choices.borrow_mut();
        if let Some(d) = c.diverged.take() {
            return Err(format!("the schedule did not replay: {d}"));
        }
        let log = &report.lifetime_log;
        // The lifetime of the workload, and the one after it.
        let (l1, l2) = (&log[base], log.get(base + 1));
        let mut after_arming = l1.0.clone();
        for (p, n) in &hits_at_start {
            *after_arming.entry(*p).or_default() -= n;
        }
        let l2 = l2.ok_or("no lifetime after the workload's")?;
        let site_choices = [
            (0, first_site, &after_arming, l1.1),
            (second_at, second_site, &l2.0, l2.1),
        ];
        for (at, site, hits, crashed_at) in site_choices {
            match site {
                Some((p, _)) if crashed_at != Some(p) => {
                    return Err(format!(
                        "crash chosen at {site:?} happened at {crashed_at:?}: not explored"
                    ));
                }
                Some((p, _)) => *self.crashed.entry(p).or_default() += 1,
                None => {
                    if crashed_at.is_some() {
                        return Err(format!("a crash at {crashed_at:?} that was not chosen"));
                    }
                    if at >= prefix.len() {
                        let found = sites(hits);
                        c.taken[at].1 = found.len() + 1;
                        learned.push((at, found));
                    }
                }
            }
        }
        let recovers_from = *recovers_from.borrow();
        Ok(Run {
            taken: c.taken.clone(),
            recovers_from,
            learned,
        })
    }

    fn site(&self, at: usize, prefix: &[usize], v: usize) -> Result<Site, String> {
        self.sites
            .get(&(at, prefix[..at].to_vec()))
            .and_then(|s| s.get(v - 1))
            .copied()
            .ok_or_else(|| format!("no crash site {v} known at choice {at} of {prefix:?}"))
    }

    /// Runs every schedule of workload `w`; returns (promised, explored).
    fn explore(&mut self, wi: usize, w: &[Flush]) -> (u64, u64) {
        let mut stack = vec![Vec::new()];
        let (mut promised, mut explored) = (1u64, 0u64);
        while let Some(prefix) = stack.pop() {
            let run = self.run(wi, w, &prefix).unwrap_or_else(|e| {
                panic!("{}: workload {w:?}, schedule {prefix:?}: {e}", self.name)
            });
            explored += 1;
            // A state the reopen's crashes were explored from already: its subtree is the same.
            let known = run
                .recovers_from
                .is_some_and(|state| !self.recovered.insert(state))
                && prefix.len() <= 2;
            let new_choices = if known { 2 } else { run.taken.len() };
            for (at, found) in run.learned {
                let values: Vec<usize> = run.taken[..at].iter().map(|(v, _)| *v).collect();
                self.sites.insert((at, values), found);
            }
            for i in prefix.len()..new_choices.max(prefix.len()) {
                let values: Vec<usize> = run.taken[..i].iter().map(|(v, _)| *v).collect();
                for alt in 1..run.taken[i].1 {
                    let mut p = values.clone();
                    p.push(alt);
                    stack.push(p);
                    promised += 1;
                }
            }
        }
        (promised, explored)
    }
}

/// Explores every schedule of every workload within `bounds` on the stores `make` opens, prints
/// the counts, and checks that every crash point but `unreachable` was crashed at.
fn check(
    name: &str,
    bounds: Bounds,
    make: &dyn Fn() -> Box<dyn StoreFactory>,
    unreachable: &[CrashPoint],
) {
    let started = std::time::Instant::now();
    let ws = workloads(bounds);
    let mut e = Explorer {
        name,
        make,
        sites: HashMap::new(),
        recovered: HashSet::new(),
        states: Rc::default(),
        crashed: BTreeMap::new(),
    };
    let (mut promised, mut explored) = (0, 0);
    for (wi, w) in ws.iter().enumerate() {
        let (p, x) = e.explore(wi, w);
        promised += p;
        explored += x;
    }
    println!(
        "{name}: {} workloads ({bounds:?}): explored {} states in {explored} schedules ({promised} promised) in {:.0?}; crashes per point: {:?}",
        ws.len(),
        e.states.borrow().len(),
        started.elapsed(),
        e.crashed
    );
    assert_eq!(
        explored, promised,
        "{name}: not every schedule was explored"
    );
    for p in CrashPoint::ALL {
        assert!(
            unreachable.contains(&p) || e.crashed.contains_key(&p),
            "{name}: never crashed at {p:?}: {:?}",
            e.crashed
        );
    }
}

fn wide() -> bool {
    std::env::var("MODEL_CHECK_WIDE").is_ok_and(|v| v != "0" && !v.is_empty())
}

/// The families each store is checked over: every one-flush workload (one or two offers, either
/// durability) and every three-flush workload of one offer each at `Local`; wider with
/// `MODEL_CHECK_WIDE` (resets and `Store` in the three-flush family, and every two-flush workload).
fn families() -> Vec<Bounds> {
    let mut f = vec![
        Bounds {
            flushes: 1,
            keys: 2,
            offers: 2,
            resets: wide(),
            store: true,
        },
        Bounds {
            flushes: 3,
            keys: 3,
            offers: 1,
            resets: wide(),
            store: wide(),
        },
    ];
    if wide() {
        f.push(Bounds {
            flushes: 2,
            keys: 3,
            offers: 2,
            resets: true,
            store: true,
        });
    }
    f
}

#[test]
fn every_schedule_memory_store() {
    for bounds in families() {
        check("memory + log", bounds, &|| Box::new(MemoryFactory), &[]);
    }
}

#[cfg(feature = "rocksdb")]
#[test]
fn every_schedule_rocksdb_store() {
    for bounds in families() {
        // Compaction snapshots exist only for stores that do not outlive the process.
        check(
            "rocksdb + log",
            bounds,
            &|| Box::new(scenario_util::RocksFactory::new()),
            &[CrashPoint::InsideCompaction],
        );
    }
}
