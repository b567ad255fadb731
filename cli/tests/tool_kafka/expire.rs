//! Retention of stale partitions (`connect_offsets::expire`, `connect-offsets expire`, a buffer's
//! `expire_after`) on memory, RocksDB and Kafka (the real broker): each write's time is recorded
//! and survives a reopen; a plan lists exactly the partitions written before the cut-off and
//! writes nothing; applying it resets exactly those; a buffer expires on its interval without
//! losing an offset offered meanwhile, and counts them in `connect_offsets_expired_total`; bad
//! input is refused by name.

use crate::cli_util;
use cli_util::run;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig, Durability};
use connect_offsets::expire;
use connect_offsets::internal::time::now_ms;
use connect_offsets::store::MemoryStore;
use connect_offsets::store::rocksdb::RocksDbStore;
use connect_offsets::{Offset, OffsetKey, OffsetStore, OffsetStoreExt, Partition};

use crate::kafka_util;

fn key(connector: &str, file: &str) -> OffsetKey {
    OffsetKey::new(connector, Partition::new().with("filename", file))
}

fn pos(n: i64) -> Offset {
    Offset::new().with("position", n)
}

fn kafka(topic: &str, extra: &str) -> Box<dyn OffsetStore> {
    connect_offsets::open(&kafka_util::url(topic, 3, extra)).expect("open the kafka store")
}

/// Two partitions written, then a third at least 50 ms later: times recorded within the wall-clock
/// window of each write; a plan whose cut-off falls between lists exactly the first two (offset
/// and age) and writes nothing; applying it resets exactly those; an unknown connector is refused.
fn stale_ones_exactly(store: &dyn OffsetStore, c: &str) {
    assert!(store.capabilities().keeps_change_times, "{}", store.kind());
    let (a, b, fresh) = (key(c, "/a"), key(c, "/b"), key(c, "/fresh"));
    let before = now_ms();
    store
        .write(vec![(a.clone(), Some(pos(1))), (b.clone(), Some(pos(2)))])
        .unwrap();
    let between = now_ms();
    std::thread::sleep(Duration::from_millis(50));
    store.set(fresh.clone(), pos(3)).unwrap();
    let after = now_ms();
    let times = store
        .change_times(&[a.clone(), b.clone(), fresh.clone(), key(c, "/none")])
        .unwrap();
    let (ta, tf) = (times[0].unwrap(), times[2].unwrap());
    assert_eq!(times[1], Some(ta), "one batch, one time");
    assert_eq!(times[3], None, "no offset, no time");
    assert!(
        (before..=between).contains(&ta),
        "{before} <= {ta} <= {between}"
    );
    assert!(tf > ta && tf <= after, "{ta} < {tf} <= {after}");

    let now = tf + 60_000;
    let plan = expire::plan(store, c, Duration::from_millis(now - ta), now).unwrap();
    let listed: Vec<_> = plan
        .stale
        .iter()
        .map(|s| (s.key.clone(), s.offset.clone(), s.age))
        .collect();
    let age = Duration::from_millis(now - ta);
    assert_eq!(
        listed,
        vec![(a.clone(), pos(1), age), (b.clone(), pos(2), age)],
        "{}",
        store.kind()
    );
    assert_eq!((plan.fresh, plan.untimed), (1, 0));
    assert_eq!(
        store.partitions(c).unwrap().len(),
        3,
        "a plan writes nothing"
    );

    assert_eq!(plan.apply(store).unwrap(), 2);
    assert_eq!(store.partitions(c).unwrap(), vec![(fresh.clone(), pos(3))]);
    assert_eq!(store.change_times(&[a]).unwrap(), vec![None]);

    let e = expire::plan(store, &format!("{c}-nobody"), Duration::ZERO, now).unwrap_err();
    assert!(
        e.to_string()
            .contains(&format!("connector `{c}-nobody` has no offsets")),
        "{e}"
    );
}

#[test]
fn memory_expires_exactly_the_stale_ones() {
    stale_ones_exactly(&MemoryStore::new(), "files-mem");
}

#[test]
fn rocksdb_expires_exactly_the_stale_ones_and_keeps_times_over_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let k = key("files-rdb", "/kept");
    let written = {
        let store = RocksDbStore::open(dir.path()).unwrap();
        stale_ones_exactly(&store, "files-rdb");
        store.set(k.clone(), pos(7)).unwrap();
        store.change_times(std::slice::from_ref(&k)).unwrap()[0].unwrap()
    };
    let store = RocksDbStore::open(dir.path()).unwrap();
    assert_eq!(store.change_times(&[k]).unwrap(), vec![Some(written)]);
}

#[test]
fn kafka_expires_exactly_the_stale_ones_and_keeps_times_over_a_reopen() {
    let topic = kafka_util::TopicGuard::new("expire-times");
    let snapshots = tempfile::tempdir().unwrap();
    let warm = format!("&snapshot.dir={}", snapshots.path().display());
    let k = key("files-kafka", "/kept");
    let written = {
        let store = kafka(&topic, &warm);
        stale_ones_exactly(&*store, "files-kafka");
        store.set(k.clone(), pos(7)).unwrap();
        store.change_times(std::slice::from_ref(&k)).unwrap()[0].unwrap()
    };
    // Cold (the whole topic read again) and warm (from the snapshot the drop wrote).
    for extra in ["", warm.as_str()] {
        let store = kafka(&topic, extra);
        assert_eq!(
            store.change_times(std::slice::from_ref(&k)).unwrap(),
            vec![Some(written)],
            "reopened with `{extra}`"
        );
        assert_eq!(
            store.partitions("files-kafka").unwrap(),
            vec![(key("files-kafka", "/fresh"), pos(3)), (k.clone(), pos(7))]
        );
    }
}

/// Records written by "a worker" 40 days ago with Connect's own bytes and record timestamps, one
/// written by us now: the dry run lists exactly the old one with offset and age and writes
/// nothing; `expire` tombstones exactly it, and a reopened store agrees.
#[test]
fn cli_expires_kafka_records_by_their_timestamps() {
    let topic = kafka_util::TopicGuard::new("expire-cli");
    kafka_util::create_topic(&topic, 3, &[("cleanup.policy", "compact")]);
    let url = kafka_util::url(&topic, 3, "");
    let forty_days = 40 * 86_400_000;
    let old_ts = now_ms() as i64 - forty_days;
    kafka_util::produce_timed(
        &topic,
        &[
            (
                1,
                br#"["files",{"filename":"/var/log/old.log"}]"#,
                Some(br#"{"position":4096}"#),
                old_ts,
            ),
            (
                2,
                br#"["other",{"filename":"/var/log/old.log"}]"#,
                Some(br#"{"position":1}"#),
                old_ts,
            ),
        ],
    );
    let (code, _, err) = run(&[
        "set",
        "--store",
        &url,
        "--connector",
        "files",
        "--partition",
        r#"{"filename":"/var/log/new.log"}"#,
        "--offset",
        r#"{"position":10}"#,
    ]);
    assert_eq!(code, 0, "{err}");

    let expire = |extra: &[&str]| {
        let mut args = vec![
            "expire",
            "--store",
            &url,
            "--connector",
            "files",
            "--older-than",
            "30d",
        ];
        args.extend_from_slice(extra);
        run(&args)
    };
    let (code, out, err) = expire(&["--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(r#"{"partition":{"filename":"/var/log/old.log"},"offset":{"position":4096}}	age 40d"#)
            || out.starts_with(r#"{"partition":{"filename":"/var/log/old.log"},"offset":{"position":4096}}	age 39d 23h"#),
        "{out}"
    );
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(
        err.contains("would reset 1 of 2 partitions of connector `files` (not written for 30d)")
            && err.contains("dry run: nothing written"),
        "{err}"
    );
    let listed = kafka_util::cli(&["list", "--store", &url, "--connector", "files"]);
    assert!(
        listed.contains("old.log") && listed.contains("new.log"),
        "{listed}"
    );

    let (code, out, err) = expire(&["--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(r#"{"connector":"files","older_than_ms":2592000000,"dry_run":false,"expired":[{"partition":{"filename":"/var/log/old.log"},"offset":{"position":4096},"written_ms":"#),
        "{out}"
    );
    assert!(
        out.trim_end().ends_with(r#"],"kept":1,"untimed":0}"#),
        "{out}"
    );
    // A new process reads the topic again: the tombstone is there, the other connector untouched.
    assert_eq!(
        kafka_util::cli(&["list", "--store", &url, "--connector", "files"]).trim(),
        r#"{"offsets":[{"partition":{"filename":"/var/log/new.log"},"offset":{"position":10}}]}"#
    );
    assert!(
        kafka_util::cli(&["list", "--store", &url, "--connector", "other"]).contains("old.log")
    );
}

/// RocksDB from the shell: `/old` written, `/new` at least 2 s later; `--older-than 1s` right
/// after resets `/old` only. A pause of the machine longer than 1 s between writing `/new` and
/// the command makes `/new` stale too (its age is printed): then the round is run again.
#[test]
fn cli_expires_rocksdb_partitions_and_a_dry_run_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("rocksdb://{}", dir.path().join("db").display());
    let set = |file: &str| {
        kafka_util::cli(&[
            "set",
            "--store",
            &url,
            "--connector",
            "files",
            "--partition",
            &format!(r#"{{"filename":"{file}"}}"#),
            "--offset",
            r#"{"position":5}"#,
        ]);
    };
    let expire = |extra: &[&str]| {
        let mut args = vec![
            "expire",
            "--store",
            &url,
            "--connector",
            "files",
            "--older-than",
            "1s",
        ];
        args.extend_from_slice(extra);
        run(&args)
    };
    let list = || kafka_util::cli(&["list", "--store", &url, "--connector", "files"]);
    set("/kept");
    let (code, _, err) = run(&[
        "expire",
        "--store",
        &url,
        "--connector",
        "files",
        "--older-than",
        "0s",
    ]);
    assert_eq!(code, 2, "a zero age is a usage error: {err}");
    assert!(err.contains("would reset every partition"), "{err}");
    assert!(list().contains("/kept"), "nothing reset");
    run(&["reset", "--store", &url, "--connector", "files", "--all"]);
    for round in 1..=5 {
        set("/old");
        std::thread::sleep(Duration::from_millis(2_100));
        set("/new");
        let (code, dry, err) = expire(&["--dry-run"]);
        assert_eq!(code, 0, "{err}");
        assert!(err.contains("dry run: nothing written"), "{err}");
        assert!(dry.contains(r#""/old""#), "{dry}");
        assert!(list().contains("/old"), "a dry run writes nothing");
        let (code, out, err) = expire(&[]);
        assert_eq!(code, 0, "{err}");
        if out.contains(r#""/new""#) || dry.contains(r#""/new""#) {
            eprintln!("round {round}: the machine paused over 1 s after writing /new: {out}");
            continue;
        }
        assert!(
            err.contains("reset 1 of 2 partitions of connector `files`"),
            "{err}"
        );
        assert_eq!(
            list().trim(),
            r#"{"offsets":[{"partition":{"filename":"/new"},"offset":{"position":5}}]}"#
        );
        return;
    }
    panic!("five rounds in a row paused over 1 s");
}

#[test]
fn cli_refuses_bad_durations_unknown_connectors_and_stores_without_times() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("rocksdb://{}", dir.path().join("db").display());
    kafka_util::cli(&[
        "set",
        "--store",
        &url,
        "--connector",
        "files",
        "--partition",
        r#"{"filename":"/a"}"#,
        "--offset",
        r#"{"position":1}"#,
    ]);
    for (bad, says) in [
        ("10y", "unknown unit `y`"),
        ("30", "has no unit"),
        ("soon", "is not a duration"),
    ] {
        let (code, _, err) = run(&[
            "expire",
            "--store",
            &url,
            "--connector",
            "files",
            "--older-than",
            bad,
        ]);
        assert_eq!(code, 2, "{bad}: {err}");
        assert!(
            err.contains("--older-than") && err.contains(says),
            "{bad}: {err}"
        );
    }
    let (code, _, err) = run(&[
        "expire",
        "--store",
        &url,
        "--connector",
        "nobody",
        "--older-than",
        "1d",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("connector `nobody` has no offsets in this rocksdb store (connectors with offsets: files)"),
        "{err}"
    );
    let group = format!(
        "kafka-group://{}/?group=co-test-expire-{{connector}}-{}",
        kafka_util::bootstrap(),
        std::process::id()
    );
    let (code, _, err) = run(&[
        "expire",
        "--store",
        &group,
        "--connector",
        "sink",
        "--older-than",
        "1d",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("the kafka-group store records no write time per partition"),
        "{err}"
    );
    // The buffer's properties refuse the same way, and a buffer refuses such a store.
    let mut config = CommitBufferConfig::new(dir.path().join("wal"));
    let e = config.set("offsets.expire.after", "1.5d").unwrap_err();
    assert!(e.to_string().contains("offsets.expire.after"), "{e}");
    let e = config.set("offsets.expire.interval", "0s").unwrap_err();
    assert!(e.to_string().contains("longer than 0"), "{e}");
}

fn expiring_config(wal: &Path, after: Duration) -> CommitBufferConfig {
    let mut config = CommitBufferConfig::new(wal);
    config.writer = "expiring-worker".into();
    config.flush_interval = None;
    config.flush_timeout = Duration::from_secs(300);
    config.expire_after = Some(after);
    config.expire_interval = Duration::from_millis(200);
    config
}

/// A buffer with `expire_after` = 1 s: a partition nobody offers again is reset on the interval,
/// through the buffer's log (its seq moves on), counted in its stats and the metric; a partition
/// offered and committed all the while ends with its last offset, whatever the expiry did when
/// the machine paused.
fn expires_on_the_interval(store: Arc<dyn OffsetStore>, wal: &Path, c: &str) {
    let handle = connect_offsets::metrics::install().unwrap();
    let buffer = CommitBuffer::open(
        Arc::clone(&store),
        expiring_config(wal, Duration::from_secs(1)),
    )
    .unwrap();
    let (gone, live) = (key(c, "/gone"), key(c, "/live"));
    buffer.offer(gone.clone(), pos(1)).unwrap();
    buffer.offer(live.clone(), pos(0)).unwrap();
    let first = buffer.commit_with(Durability::Store).wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut n = 0;
    while store.get(&gone).unwrap().is_some() {
        assert!(Instant::now() < deadline, "{}: never expired", store.kind());
        n += 1;
        buffer.offer(live.clone(), pos(n)).unwrap();
        buffer.commit_with(Durability::Store).wait().unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
    n += 1;
    buffer.offer(live.clone(), pos(n)).unwrap();
    let last = buffer.commit_with(Durability::Store).wait().unwrap();
    assert!(last > first);
    assert_eq!(store.get(&live).unwrap(), Some(pos(n)), "{}", store.kind());
    assert!(buffer.stats().expired >= 1, "{:?}", buffer.stats());
    assert!(
        store.applied_seq("expiring-worker").unwrap() >= last,
        "the resets went through the buffer's seq"
    );
    let text = handle.render();
    assert!(
        text.contains(&format!(
            "connect_offsets_expired_total{{connector=\"{c}\"}}"
        )),
        "{text}"
    );
    buffer.close().unwrap();
}

#[test]
fn memory_buffer_expires_on_its_interval() {
    let dir = tempfile::tempdir().unwrap();
    expires_on_the_interval(Arc::new(MemoryStore::new()), dir.path(), "auto-mem");
}

#[test]
fn rocksdb_buffer_expires_on_its_interval() {
    let dir = tempfile::tempdir().unwrap();
    let store = RocksDbStore::open(dir.path().join("db")).unwrap();
    expires_on_the_interval(Arc::new(store), &dir.path().join("wal"), "auto-rdb");
}

#[test]
fn kafka_buffer_expires_on_its_interval() {
    let topic = kafka_util::TopicGuard::new("expire-auto");
    let dir = tempfile::tempdir().unwrap();
    expires_on_the_interval(Arc::from(kafka(&topic, "")), dir.path(), "auto-kafka");
}

/// A partition stale in the store but offered again (not yet committed) is not reset over the
/// newer offset: the expiry skips what is pending.
#[test]
fn expiry_never_resets_a_pending_offer() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn OffsetStore> = Arc::new(MemoryStore::new());
    let buffer = CommitBuffer::open(
        Arc::clone(&store),
        expiring_config(dir.path(), Duration::from_millis(300)),
    )
    .unwrap();
    let k = key("pending", "/busy");
    buffer.offer(k.clone(), pos(1)).unwrap();
    buffer.commit_with(Durability::Store).wait().unwrap();
    // Pending from before the stored offset turns stale until the commit below.
    buffer.offer(k.clone(), pos(2)).unwrap();
    let written = store.change_times(std::slice::from_ref(&k)).unwrap()[0].unwrap();
    while now_ms() < written + 400 {
        std::thread::sleep(Duration::from_millis(50));
    }
    // Two whole rounds after it turned stale, each of which found it stale in the store.
    let rounds = buffer.stats().expire_rounds;
    while buffer.stats().expire_rounds < rounds + 2 {
        std::thread::sleep(Duration::from_millis(50));
    }
    buffer.commit_with(Durability::Store).wait().unwrap();
    assert_eq!(store.get(&k).unwrap(), Some(pos(2)));
    assert_eq!(buffer.stats().expired, 0);
    buffer.close().unwrap();
}

#[test]
fn a_buffer_refuses_to_expire_a_store_without_times() {
    let dir = tempfile::tempdir().unwrap();
    let group = format!(
        "kafka-group://{}/?group=co-test-expire-buffer-{{connector}}-{}",
        kafka_util::bootstrap(),
        std::process::id()
    );
    let store: Arc<dyn OffsetStore> = Arc::from(connect_offsets::open(&group).unwrap());
    let e = CommitBuffer::open(store, expiring_config(dir.path(), Duration::from_secs(60)))
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("the kafka-group store records no write time per partition"),
        "{e}"
    );
}

/// Holds every `apply` of its store while closed (the store is slow: batches stay in flight).
#[derive(Debug, Default)]
struct Gate(std::sync::atomic::AtomicBool);

impl connect_offsets::conformance::ApplyFault for Gate {
    fn before_entry(&self, _: &connect_offsets::Batch, _: usize) -> connect_offsets::Result<()> {
        Ok(())
    }
    fn before_commit(&self, _: &connect_offsets::Batch) -> connect_offsets::Result<()> {
        while self.0.load(std::sync::atomic::Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }
}

/// A partition stale in the store whose newer offset is logged but not yet applied (the store
/// holds the batch up) is not reset: the expiry skips what is in flight.
#[test]
fn expiry_never_resets_an_offset_in_flight() {
    use std::sync::atomic::Ordering::Release;
    for round in 1..=3 {
        let dir = tempfile::tempdir().unwrap();
        let data = MemoryStore::new();
        let gate = Arc::new(Gate::default());
        let store: Arc<dyn OffsetStore> = Arc::new(data.shared_with_fault(gate.clone()));
        let buffer =
            CommitBuffer::open(store, expiring_config(dir.path(), Duration::from_secs(2))).unwrap();
        let k = key("in-flight", "/busy");
        buffer.offer(k.clone(), pos(1)).unwrap();
        buffer.commit_with(Durability::Store).wait().unwrap();
        let started = Instant::now();
        gate.0.store(true, Release);
        buffer.offer(k.clone(), pos(2)).unwrap();
        buffer.commit_with(Durability::Local).wait().unwrap();
        if started.elapsed() > Duration::from_millis(1500) || buffer.stats().expired > 0 {
            eprintln!("round {round}: the machine paused before the offset was in flight");
            gate.0.store(false, Release);
            continue;
        }
        let written = data.change_times(std::slice::from_ref(&k)).unwrap()[0].unwrap();
        while now_ms() < written + 2_100 {
            std::thread::sleep(Duration::from_millis(50));
        }
        // Two whole rounds (a round that queued a reset waits for its commit, which the gate
        // holds up: then go on after 30 s and let the offset tell).
        let rounds = buffer.stats().expire_rounds;
        let deadline = Instant::now() + Duration::from_secs(30);
        while buffer.stats().expire_rounds < rounds + 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        gate.0.store(false, Release);
        buffer.commit_with(Durability::Store).wait().unwrap();
        assert_eq!(data.get(&k).unwrap(), Some(pos(2)));
        assert_eq!(buffer.stats().expired, 0);
        buffer.close().unwrap();
        return;
    }
    panic!("three rounds in a row paused");
}

/// A partition stale in the store whose newer offset is sealed but not yet logged (the log
/// thread is held between the seal and the write) is not reset: the expiry waits for the log.
#[test]
fn expiry_never_resets_an_offset_being_logged() {
    use std::sync::atomic::{AtomicBool, Ordering::*};
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn OffsetStore> = Arc::new(MemoryStore::new());
    let (hold, held) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let mut config = expiring_config(dir.path(), Duration::from_millis(300));
    let (h, seen) = (Arc::clone(&hold), Arc::clone(&held));
    config.with_observer(Some(Arc::new(move |_: &connect_offsets::Batch| {
        while h.load(Acquire) {
            seen.store(true, Release);
            std::thread::sleep(Duration::from_millis(5));
        }
    })));
    let buffer = CommitBuffer::open(Arc::clone(&store), config).unwrap();
    let k = key("logging", "/busy");
    buffer.offer(k.clone(), pos(1)).unwrap();
    buffer.commit_with(Durability::Store).wait().unwrap();
    let written = store.change_times(std::slice::from_ref(&k)).unwrap()[0].unwrap();
    // Sealed while fresh (a reset queued by a pause before the offer is replaced by it).
    hold.store(true, Release);
    buffer.offer(k.clone(), pos(2)).unwrap();
    let ticket = buffer.commit_with(Durability::Store);
    while !held.load(Acquire) {
        std::thread::sleep(Duration::from_millis(5));
    }
    // Stale in the store, then two expire intervals more, all while sealed and not logged.
    while now_ms() < written + 300 + 400 {
        std::thread::sleep(Duration::from_millis(50));
    }
    hold.store(false, Release);
    ticket.wait().unwrap();
    buffer.commit_with(Durability::Store).wait().unwrap();
    assert_eq!(store.get(&k).unwrap(), Some(pos(2)));
    buffer.close().unwrap();
}

/// With history on, the buffer's expiry resets stale partitions and records those resets, but
/// never expires the history records themselves (they are the crate's, not a connector's).
#[test]
fn expiry_keeps_the_history_of_what_it_expired() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn OffsetStore> =
        Arc::from(connect_offsets::open("memory://?history=7d").unwrap());
    let buffer = CommitBuffer::open(
        Arc::clone(&store),
        expiring_config(dir.path(), Duration::from_millis(300)),
    )
    .unwrap();
    let gone = key("auto-hist", "/gone");
    buffer.offer(gone.clone(), pos(1)).unwrap();
    buffer.commit_with(Durability::Store).wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    while store.get(&gone).unwrap().is_some() {
        assert!(Instant::now() < deadline, "never expired");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Two more rounds: records older than `expire_after` stay.
    std::thread::sleep(Duration::from_millis(1_000));
    let moves = connect_offsets::history::read(&*store, "auto-hist")
        .unwrap()
        .changes;
    assert_eq!(moves.len(), 2, "set, then expired: {moves:?}");
    assert_eq!(moves[0].to, Some(pos(1)));
    assert_eq!(moves[1].to, None);
    buffer.close().unwrap();
}
