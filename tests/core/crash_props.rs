//! Model-based crash tests: generated sequences of offers, resets, commits, crashes armed at every
//! named crash point (with torn writes of any length) and reopens, run through the commit buffer over
//! the crash-simulating file system and a real store. `connect_offsets::scenario` holds the reference
//! model and checks the four invariants after every step and every recovery.
//!
//! `PROPTEST_CASES` sets the number of cases per backend (default 1,000). Failing inputs are saved
//! to `proptest-regressions/crash_props.txt` and replayed first on every run.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use connect_offsets::internal::crash::CrashPoint;
use connect_offsets::scenario::{self, MemoryFactory, Op, Report, ScenarioOptions, StoreFactory};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestRunner};

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (0u8..6).prop_map(|key| Op::Offer { key, reset: false }),
        2 => (0u8..6).prop_map(|key| Op::Offer { key, reset: true }),
        5 => any::<bool>().prop_map(|store| Op::Commit { store }),
        3 => (prop::sample::select(CrashPoint::ALL.to_vec()), 0u8..3, 0u16..600)
            .prop_map(|(point, skip, torn)| Op::Crash { point, skip, torn }),
        1 => Just(Op::Reopen),
        1 => (0u8..3, prop::option::of((prop::sample::select(CrashPoint::ALL.to_vec()), 0u8..3, 0u16..600)))
            .prop_map(|(id, crash)| Op::Override { id, crash }),
    ]
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

/// Runs the generated scenarios against one backend and checks that every crash point but those in
/// `not_required` (unreachable for the backend, or left to the runs with more cases) was actually
/// crashed at.
fn run_backend(
    name: &str,
    cases: u32,
    make: impl Fn() -> Box<dyn StoreFactory>,
    not_required: &[CrashPoint],
) -> Report {
    run_backend_with(name, cases, make, not_required, ScenarioOptions::default())
}

/// [`run_backend`] with scenario options of its own; returns the cases' report.
fn run_backend_with(
    name: &str,
    cases: u32,
    make: impl Fn() -> Box<dyn StoreFactory>,
    not_required: &[CrashPoint],
    options: ScenarioOptions,
) -> Report {
    let total = Arc::new(Mutex::new(Report::default()));
    let config = Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/crash_props.txt",
        ))),
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let t = Arc::clone(&total);
    let result = runner.run(&prop::collection::vec(op(), 1..60), |ops| {
        let mut factory = make();
        let report = scenario::run(&ops, factory.as_mut(), options.clone())
            .map_err(|e| TestCaseError::fail(format!("{name}: {e}")))?;
        t.lock().unwrap().merge(&report);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
    let total = total.lock().unwrap().clone();
    let crashed: BTreeMap<_, _> = total.crashes.clone();
    println!(
        "{name}: {cases} cases, {} lifetimes, {} acknowledged commits, {} batches replayed, {} written as built on the log thread; crashes per point: {crashed:?}",
        total.lifetimes, total.acked_commits, total.replayed, total.encoded_writes
    );
    for p in CrashPoint::ALL {
        if not_required.contains(&p) {
            continue;
        }
        assert!(
            crashed.get(&p).copied().unwrap_or(0) > 0,
            "{name}: crash point {p:?} was never crashed at: {crashed:?}"
        );
    }
    total
}

#[test]
fn crash_anywhere_memory_store() {
    run_backend("memory + log", cases(), || Box::new(MemoryFactory), &[]);
}

#[cfg(feature = "rocksdb")]
use crate::scenario_util;
#[cfg(feature = "rocksdb")]
use scenario_util::RocksFactory;

#[cfg(feature = "rocksdb")]
#[test]
fn crash_anywhere_rocksdb_store() {
    // Compaction snapshots exist only for stores that do not outlive the process.
    run_backend(
        "rocksdb + log",
        cases(),
        || Box::new(RocksFactory::new()),
        &[CrashPoint::InsideCompaction],
    );
}

/// The same with room for three entries in flight: the log waits for the store, and builds
/// RocksDB's write of a batch while the one before it is written (`CommitHooks::encode_logged`).
#[cfg(feature = "rocksdb")]
#[test]
fn crash_anywhere_rocksdb_store_with_little_room() {
    let report = run_backend_with(
        "rocksdb + log, max_pending 3",
        cases(),
        || Box::new(RocksFactory::new()),
        &[CrashPoint::InsideCompaction],
        ScenarioOptions {
            max_pending: Some(3),
            ..ScenarioOptions::default()
        },
    );
    assert!(
        report.encoded_writes > 0,
        "no batch was written as built on the log thread"
    );
}

#[cfg(feature = "kafka")]
use crate::kafka_util;

/// Each lifetime opens `KafkaStore` again on the case's own topic (deleted when the case ends), in
/// the write mode the URL parameters give.
#[cfg(feature = "kafka")]
struct KafkaFactory(kafka_util::TopicGuard, &'static str);

#[cfg(feature = "kafka")]
impl StoreFactory for KafkaFactory {
    fn open(
        &mut self,
        fault: Arc<dyn connect_offsets::conformance::ApplyFault>,
    ) -> connect_offsets::Result<Arc<dyn connect_offsets::OffsetStore>> {
        Ok(Arc::new(
            connect_offsets::store::kafka::KafkaStore::open(&kafka_util::url(&self.0, 3, self.1))?
                .with_fault(fault),
        ))
    }
}

/// The same scenarios over `KafkaStore` on the real broker (`scripts/kafka start`), a fresh topic per
/// case: a lifetime opens the store again on the topic, as a restarted process would. Fewer cases than
/// the embedded stores (every case creates a topic and each lifetime reads it and initializes a
/// producer): `KAFKA_PROPTEST_CASES`, default 64 per write mode. With that few cases, only the points
/// where the store is involved must each be crashed at; the log-only points are exercised too, and the
/// memory and RocksDB runs (1,000 cases) require them.
#[cfg(feature = "kafka")]
fn crash_anywhere_kafka(name: &'static str, params: &'static str) {
    let cases = std::env::var("KAFKA_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    kafka_util::bootstrap();
    // (A crash inside recovery is rarer; `kafka_crash_inside_recovery` makes one for sure.)
    let store_points = [
        CrashPoint::AfterAckBeforeApply,
        CrashPoint::InsideApply,
        CrashPoint::AfterApplyBeforeRelease,
    ];
    let not_required: Vec<CrashPoint> = CrashPoint::ALL
        .into_iter()
        .filter(|p| !store_points.contains(p))
        .collect();
    run_backend(
        name,
        cases,
        || Box::new(KafkaFactory(kafka_util::TopicGuard::new("crash"), params)),
        &not_required,
    );
}

/// One transaction per batch (the default write mode).
#[cfg(feature = "kafka")]
#[test]
fn crash_anywhere_kafka_store() {
    crash_anywhere_kafka("kafka + log", "");
}

/// `write.mode=idempotent`: a crash inside apply leaves part of a batch in the topic (its records
/// are acknowledged before the fault fires); recovery must still give an atomic prefix.
#[cfg(feature = "kafka")]
#[test]
fn crash_anywhere_kafka_store_idempotent() {
    crash_anywhere_kafka("kafka idempotent + log", "&write.mode=idempotent");
}

/// A batch acknowledged but not applied when the process dies, and a second death while recovery
/// replays it into `KafkaStore`: the third lifetime has it exactly once.
#[cfg(feature = "kafka")]
#[test]
fn kafka_crash_inside_recovery() {
    kafka_util::bootstrap();
    let ops = [
        Op::Offer {
            key: 1,
            reset: false,
        },
        Op::Commit { store: true },
        Op::Offer {
            key: 2,
            reset: false,
        },
        Op::Crash {
            point: CrashPoint::InsideRecovery,
            skip: 0,
            torn: 0,
        },
        Op::Crash {
            point: CrashPoint::AfterAckBeforeApply,
            skip: 0,
            torn: 0,
        },
        Op::Commit { store: false },
        Op::Offer {
            key: 1,
            reset: true,
        },
        Op::Commit { store: true },
    ];
    for params in ["", "&write.mode=idempotent"] {
        let mut factory = KafkaFactory(kafka_util::TopicGuard::new("crash-recovery"), params);
        let report = scenario::run(&ops, &mut factory, ScenarioOptions::default())
            .unwrap_or_else(|e| panic!("{params}: {e}"));
        for p in [CrashPoint::AfterAckBeforeApply, CrashPoint::InsideRecovery] {
            assert_eq!(
                report.crashes.get(&p),
                Some(&1),
                "{params} {p:?}: {report:?}"
            );
        }
        assert!(report.replayed >= 1, "{params}: {report:?}");
    }
}

/// The scenario of the override tests: commits, an override whose open is crashed at `point`
/// (after `skip` occurrences), commits over it, a reopen with it, then a second override crashed
/// the same way.
fn override_ops(point: CrashPoint, skip: u8) -> Vec<Op> {
    vec![
        Op::Offer {
            key: 0,
            reset: false,
        },
        Op::Offer {
            key: 1,
            reset: false,
        },
        Op::Commit { store: false },
        Op::Override {
            id: 0,
            crash: Some((point, skip, 5)),
        },
        Op::Offer {
            key: 1,
            reset: false,
        },
        Op::Commit { store: true },
        Op::Reopen,
        Op::Offer {
            key: 2,
            reset: false,
        },
        Op::Commit { store: false },
        Op::Override {
            id: 1,
            crash: Some((point, skip, 11)),
        },
        Op::Reopen,
    ]
}

/// Runs the override scenario at every `points` × `skips` and checks that each point of the
/// override's own commit path was crashed at (the others need a rotation or compaction).
fn override_crashed_at_every_point(
    name: &str,
    points: &[CrashPoint],
    skips: std::ops::Range<u8>,
    mut make: impl FnMut() -> Box<dyn StoreFactory>,
) {
    let mut total = Report::default();
    for &point in points {
        for skip in skips.clone() {
            let mut factory = make();
            let report = scenario::run(
                &override_ops(point, skip),
                factory.as_mut(),
                ScenarioOptions::default(),
            )
            .unwrap_or_else(|e| panic!("{name} {point:?} skip {skip}: {e}"));
            total.merge(&report);
        }
    }
    for p in points.iter().filter(|p| CrashPoint::ALL[..7].contains(p)) {
        assert!(
            total.crashes.get(p).copied().unwrap_or(0) > 0,
            "{name} {p:?}: {:?}",
            total.crashes
        );
    }
}

/// An override given at every open is applied once, whatever point its apply is stopped at: one
/// scenario per crash point (and occurrence), each crash armed for the open that first carries it.
#[test]
fn override_crashed_at_every_point_applies_once() {
    override_crashed_at_every_point("memory + log", &CrashPoint::ALL, 0..3, || {
        Box::new(MemoryFactory)
    });
}

#[cfg(feature = "rocksdb")]
#[test]
fn override_crashed_at_every_point_rocksdb() {
    override_crashed_at_every_point("rocksdb + log", &CrashPoint::ALL, 0..3, || {
        Box::new(RocksFactory::new())
    });
}

/// The same on the real broker, both write modes (a topic per scenario: the points of the
/// override's commit path, first occurrence).
#[cfg(feature = "kafka")]
#[test]
fn override_crashed_at_every_point_kafka() {
    kafka_util::bootstrap();
    for params in ["", "&write.mode=idempotent"] {
        override_crashed_at_every_point(
            &format!("kafka{params}"),
            &CrashPoint::ALL[..7],
            0..1,
            || {
                Box::new(KafkaFactory(
                    kafka_util::TopicGuard::new("crash-once"),
                    params,
                ))
            },
        );
    }
}

/// Every sequence the fuzz target found interesting stays a test (see fuzz/regressions/crash_replay).
#[test]
fn byte_decoded_scenarios_run() {
    let ops =
        Op::decode_all(b"\x00\x01\x00\x08\x00\x00\x0b\x03\x00\x00\x02\x00\x08\x01\x00\x0d\x00\x00");
    assert!(ops.len() == 6);
    scenario::run(&ops, &mut MemoryFactory, ScenarioOptions::default()).unwrap();
    // The override seed: its open is stopped inside the apply.
    let ops = Op::decode_all(include_bytes!(
        "../../fuzz/seeds/crash_replay/override-crash-inside-apply"
    ));
    assert_eq!(
        ops[2],
        Op::Override {
            id: 0,
            crash: Some((CrashPoint::InsideApply, 0, 720))
        }
    );
    let report = scenario::run(&ops, &mut MemoryFactory, ScenarioOptions::default()).unwrap();
    assert!(
        report.crashes.get(&CrashPoint::InsideApply) >= Some(&1),
        "{report:?}"
    );
}
