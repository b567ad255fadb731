//! Offset history and rewind (`?history=<retention>`, `connect_offsets::history`): recorded for
//! every batch on memory, RocksDB and Kafka (the real broker), newest first, across reopens, bounded
//! by retention, exactly once per batch after a crash and its replay; rewinds by time and seq, of
//! every partition or one, dry runs and every refusal, from the library, the command line and
//! `serve` (`GET /connectors/{name}/offsets/history`).
#![cfg(feature = "kafka")]

use crate::http_util;
use crate::kafka_util;

use crate::cli_util;
use cli_util::{cli, ok, refused, text};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig, Durability};
use connect_offsets::history::{self, HistoryConfig, HistoryStore, RewindTo};
use connect_offsets::internal::store::hooks;
use connect_offsets::internal::time;
use connect_offsets::store::rocksdb::RocksDbStore;
use connect_offsets::store::{Capabilities, CommitHooks, MemoryStore, OffsetStoreExt};
use connect_offsets::{Batch, Offset, OffsetKey, OffsetStore, Partition};

const C: &str = "orders-source";

fn key(table: &str) -> OffsetKey {
    OffsetKey::new(C, Partition::new().with("table", table))
}

fn pos(n: i64) -> Option<Offset> {
    Some(Offset::new().with("lsn", n))
}

fn week() -> HistoryConfig {
    HistoryConfig::parse("7d", None).unwrap()
}

fn with_history(inner: impl OffsetStore + 'static, config: HistoryConfig) -> HistoryStore {
    HistoryStore::open(Box::new(inner), config).unwrap()
}

/// (partition table, seq, from, to) of every retained change, oldest first.
type Row = (String, u64, Option<Offset>, Option<Offset>);

fn rows(store: &dyn OffsetStore) -> Vec<Row> {
    history::read(store, C)
        .unwrap()
        .changes
        .into_iter()
        .map(|c| {
            let table = match c.key.partition().and_then(|p| p.get("table")) {
                Some(connect_offsets::Value::String(t)) => t.clone(),
                other => panic!("partition {other:?}"),
            };
            (table, c.seq, c.from, c.to)
        })
        .collect()
}

fn row(t: &str, seq: u64, from: Option<Offset>, to: Option<Offset>) -> Row {
    (t.into(), seq, from, to)
}

fn state(store: &dyn OffsetStore) -> Vec<(OffsetKey, Offset)> {
    store.partitions(C).unwrap()
}

/// Three batches of writer `w`: a=1 b=1 | a=2 (b=1 again: not a move) | b reset, c=1.
fn three_batches(store: &dyn OffsetStore) {
    let batches = [
        vec![(key("a"), pos(1)), (key("b"), pos(1))],
        vec![(key("a"), pos(2)), (key("b"), pos(1))],
        vec![(key("b"), None), (key("c"), pos(1))],
    ];
    for (i, entries) in batches.into_iter().enumerate() {
        store
            .apply(&Batch::new("w", i as u64 + 1, entries))
            .unwrap();
        // Distinct commit times, even on a coarse clock.
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn expected_history() -> Vec<Row> {
    vec![
        row("a", 1, None, pos(1)),
        row("b", 1, None, pos(1)),
        row("a", 2, pos(1), pos(2)),
        row("b", 3, pos(1), None),
        row("c", 3, None, pos(1)),
    ]
}

/// The library contract on one backend: `open` gives the same store (with its data) every call.
fn records_and_rewinds(open: &dyn Fn() -> Box<dyn OffsetStore>, durable: bool) {
    let store = open();
    three_batches(&*store);
    assert_eq!(rows(&*store), expected_history(), "{}", store.kind());
    // A batch applied again (a replay) adds nothing.
    store
        .apply(&Batch::new("w", 2, vec![(key("a"), pos(2))]))
        .unwrap();
    assert_eq!(rows(&*store), expected_history(), "replay");
    let store = if durable {
        drop(store);
        let reopened = open();
        assert_eq!(rows(&*reopened), expected_history(), "after reopen");
        reopened
    } else {
        store
    };
    let h = history::read(&*store, C).unwrap();
    let at = |seq: u64| h.changes.iter().find(|c| c.seq == seq).unwrap().at_us;
    let now = time::now_us();

    // To seq 1: a back to 1, b back to 1, c had no offset then: reset.
    let plan = history::plan_rewind(&*store, C, RewindTo::Seq(1), None, now).unwrap();
    assert_eq!(plan.at_us, at(1));
    let moves: Vec<_> = plan
        .moves
        .iter()
        .map(|m| (m.key.clone(), m.from.clone(), m.to.clone()))
        .collect();
    assert_eq!(
        moves,
        vec![
            (key("a"), pos(2), pos(1)),
            (key("b"), None, pos(1)),
            (key("c"), pos(1), None),
        ]
    );
    // To the time of seq 2, one partition only: only b moves.
    let only_b =
        history::plan_rewind(&*store, C, RewindTo::Time(at(2)), Some(&key("b")), now).unwrap();
    assert_eq!(only_b.entries(), vec![(key("b"), pos(1))]);
    store.write(plan.entries()).unwrap();
    assert_eq!(
        state(&*store),
        vec![(key("a"), pos(1).unwrap()), (key("b"), pos(1).unwrap())]
    );
    // The rewind is history too, and a rewind to the time of seq 3 undoes it.
    assert_eq!(rows(&*store).len(), 8, "{:?}", rows(&*store));
    let back = history::plan_rewind(&*store, C, RewindTo::Time(at(3)), None, time::now_us());
    store.write(back.unwrap().entries()).unwrap();
    assert_eq!(
        state(&*store),
        vec![(key("a"), pos(2).unwrap()), (key("c"), pos(1).unwrap())]
    );
}

#[test]
fn memory_records_and_rewinds() {
    let store = std::sync::Mutex::new(Some(MemoryStore::new()));
    records_and_rewinds(
        &|| {
            let inner = store
                .lock()
                .unwrap()
                .take()
                .expect("a memory store opens once");
            Box::new(with_history(inner, week()))
        },
        false,
    );
}

#[test]
fn rocksdb_records_and_rewinds_across_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("rocksdb://{}?history=7d", dir.path().join("db").display());
    records_and_rewinds(&|| connect_offsets::open(&url).unwrap(), true);
}

#[test]
fn kafka_records_and_rewinds_across_reopens() {
    let topic = kafka_util::TopicGuard::new("history");
    let url = kafka_util::url(&topic, 3, "&history=7d");
    records_and_rewinds(&|| connect_offsets::open(&url).unwrap(), true);
    // The command line on the same topic: newest first, and a dry run that writes nothing.
    let before = connect_offsets::open(&url).unwrap().partitions(C).unwrap();
    let out = ok(&cli(&["history", "--store", &url, "--connector", C]));
    let first = out.lines().next().unwrap();
    assert!(
        first.contains(r#"  tool  {"table":"a"}: {"lsn":1} -> {"lsn":2}"#),
        "{out}"
    );
    let out = ok(&cli(&[
        "rewind",
        "--store",
        &url,
        "--connector",
        C,
        "--to",
        "seq:1",
        "--dry-run",
    ]));
    assert_eq!(
        out,
        "{\"table\":\"a\"}: {\"lsn\":2} -> {\"lsn\":1}\n{\"table\":\"b\"}: none -> {\"lsn\":1}\n{\"table\":\"c\"}: {\"lsn\":1} -> reset\n"
    );
    assert_eq!(
        connect_offsets::open(&url).unwrap().partitions(C).unwrap(),
        before
    );
}

/// A batch of two connectors, their partitions given out of order: each connector's record holds
/// its own, and reads back in partition order (records keep the batch's order, `read` sorts).
#[test]
fn a_batch_of_two_connectors_reads_back_per_connector_in_partition_order() {
    let store = with_history(MemoryStore::new(), week());
    let other = |t: &str| OffsetKey::new("other", Partition::new().with("table", t));
    let batch = Batch::new(
        "w",
        1,
        [
            (key("c"), pos(3)),
            (other("z"), pos(9)),
            (key("a"), pos(1)),
            (other("y"), pos(8)),
            (key("b"), pos(2)),
        ],
    );
    store.apply(&batch).unwrap();
    assert_eq!(
        rows(&store),
        vec![
            row("a", 1, None, pos(1)),
            row("b", 1, None, pos(2)),
            row("c", 1, None, pos(3)),
        ]
    );
    let tables: Vec<_> = history::read(&store, "other")
        .unwrap()
        .changes
        .into_iter()
        .map(|c| (c.key, c.to))
        .collect();
    assert_eq!(tables, vec![(other("y"), pos(8)), (other("z"), pos(9))]);
}

/// Retention by time: a record past it goes with the next batch, and the rewind horizon moves to
/// it; times from the horizon on are still reached exactly (worked back from the current offsets).
#[test]
fn retention_drops_old_records_and_moves_the_horizon() {
    let config = HistoryConfig {
        retention: Some(Duration::from_millis(300)),
        max_bytes: None,
    };
    let store = with_history(MemoryStore::new(), config);
    let at = |seq: u64| {
        let h = history::read(&store, C).unwrap();
        h.changes.iter().find(|c| c.seq == seq).unwrap().at_us
    };
    // Each time read at once: a pause of the machine may let seq 2 drop seq 1, never itself.
    store
        .apply(&Batch::new("w", 1, vec![(key("a"), pos(1))]))
        .unwrap();
    let first = at(1);
    std::thread::sleep(Duration::from_millis(5));
    store
        .apply(&Batch::new("w", 2, vec![(key("b"), pos(1))]))
        .unwrap();
    let second = at(2);
    std::thread::sleep(Duration::from_millis(400));
    // One batch after them: a pause of the machine can only make records older, never younger.
    store
        .apply(&Batch::new("w", 3, vec![(key("a"), pos(2))]))
        .unwrap();
    let h = history::read(&store, C).unwrap();
    assert_eq!(
        h.changes.iter().map(|c| c.seq).collect::<Vec<_>>(),
        vec![3],
        "seqs 1 and 2 are past retention"
    );
    assert_eq!(h.horizon_us, Some(second), "the newest record dropped");
    let e = history::plan_rewind(&store, C, RewindTo::Time(first), None, time::now_us())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("before the retained history")
            && e.contains(&format!(
                "oldest time that can be reached is {}",
                time::format_rfc3339(second)
            )),
        "{e}"
    );
    // At the horizon: after seq 2, whose record is gone (a from seq 3's record, b as it is now).
    let plan =
        history::plan_rewind(&store, C, RewindTo::Time(second), None, time::now_us()).unwrap();
    assert_eq!(plan.entries(), vec![(key("a"), pos(1))]);
    let e = history::plan_rewind(&store, C, RewindTo::Seq(1), None, time::now_us())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no retained batch") && e.contains("seqs 3 to 3"),
        "{e}"
    );
}

/// Retention by size, on RocksDB: the bound holds across a reopen (the store's records are read
/// back at open), and only the newest records stay.
#[test]
fn a_size_bound_keeps_only_the_newest_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let store = with_history(RocksDbStore::open(&path).unwrap(), week());
        for seq in 1..=20 {
            store
                .apply(&Batch::new("w", seq, vec![(key("a"), pos(seq as i64))]))
                .unwrap();
        }
        assert_eq!(rows(&store).len(), 20);
    }
    let one = {
        let store = RocksDbStore::open(&path).unwrap();
        let held = store.partitions(history::HISTORY_NAMESPACE).unwrap();
        let (k, _) = held
            .iter()
            .find(|(k, _)| k.partition().unwrap().get("seq").is_some())
            .unwrap();
        k.id().len() as u64 + 100
    };
    let config = HistoryConfig {
        retention: Some(Duration::from_secs(3600)),
        max_bytes: Some(3 * one),
    };
    let store = with_history(RocksDbStore::open(&path).unwrap(), config);
    store
        .apply(&Batch::new("w", 21, vec![(key("a"), pos(21))]))
        .unwrap();
    let seqs: Vec<u64> = rows(&store).iter().map(|r| r.1).collect();
    assert!(
        !seqs.is_empty() && seqs.len() <= 3 && seqs.last() == Some(&21),
        "{seqs:?}"
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

fn buffer_config(wal: &Path) -> CommitBufferConfig {
    let mut config = CommitBufferConfig::new(wal);
    config.writer = "orders-worker".into();
    config.flush_interval = None;
    config.flush_timeout = Duration::from_secs(300);
    config
}

/// A crash image of a RocksDB store behind a commit buffer (RocksDB skips its own log there, so
/// the files hold none of the batches): recovery replays them, and history holds each batch once,
/// each move from where the one before left it, the same as the store that did not crash.
#[test]
fn history_after_a_crash_and_its_replay_holds_each_batch_once() {
    let dir = tempfile::tempdir().unwrap();
    let (db, wal) = (dir.path().join("db"), dir.path().join("wal"));
    let open_store = |p: &Path| -> Arc<dyn OffsetStore> {
        Arc::new(with_history(RocksDbStore::open(p).unwrap(), week()))
    };
    let buffer = CommitBuffer::open(open_store(&db), buffer_config(&wal)).unwrap();
    for n in 1..=3 {
        buffer.offer(key("a"), pos(n).unwrap()).unwrap();
        if n != 2 {
            buffer.offer(key("b"), pos(10 * n).unwrap()).unwrap();
        }
        buffer.commit_with(Durability::Store).wait().unwrap();
    }
    // The crash: what the disk holds now, while the buffer still runs.
    let (crash_db, crash_wal) = (dir.path().join("crash-db"), dir.path().join("crash-wal"));
    copy_dir(&db, &crash_db);
    copy_dir(&wal, &crash_wal);
    buffer.close().unwrap();
    drop(buffer);
    let want = vec![
        row("a", 1, None, pos(1)),
        row("b", 1, None, pos(10)),
        row("a", 2, pos(1), pos(2)),
        row("a", 3, pos(2), pos(3)),
        row("b", 3, pos(10), pos(30)),
    ];
    assert_eq!(rows(&*open_store(&db)), want, "no crash");

    let held = RocksDbStore::open(&crash_db)
        .unwrap()
        .applied_seq("orders-worker")
        .unwrap();
    assert!(
        held < 3,
        "the crash image already holds seq {held}: nothing to replay"
    );
    let buffer = CommitBuffer::open(open_store(&crash_db), buffer_config(&crash_wal)).unwrap();
    assert_eq!(buffer.stats().replayed_batches, 3 - held);
    assert_eq!(rows(&**buffer.store()), want, "after the replay");
    buffer.close().unwrap();
    drop(buffer);
    // A second recovery replays nothing and records nothing.
    let buffer = CommitBuffer::open(open_store(&crash_db), buffer_config(&crash_wal)).unwrap();
    assert_eq!(buffer.stats().replayed_batches, 0);
    assert_eq!(rows(&**buffer.store()), want, "after a second open");
    buffer.close().unwrap();
}

/// A memory store is rebuilt from its log at every open: history comes back with it, once.
#[test]
fn memory_history_comes_back_from_the_log_once() {
    let dir = tempfile::tempdir().unwrap();
    let wal = dir.path().join("wal");
    let open_store =
        || -> Arc<dyn OffsetStore> { Arc::new(with_history(MemoryStore::new(), week())) };
    for n in 1..=3 {
        let buffer = CommitBuffer::open(open_store(), buffer_config(&wal)).unwrap();
        buffer.offer(key("a"), pos(n).unwrap()).unwrap();
        buffer.commit_with(Durability::Store).wait().unwrap();
        buffer.close().unwrap();
    }
    let buffer = CommitBuffer::open(open_store(), buffer_config(&wal)).unwrap();
    assert_eq!(
        rows(&**buffer.store()),
        vec![
            row("a", 1, None, pos(1)),
            row("a", 2, pos(1), pos(2)),
            row("a", 3, pos(2), pos(3)),
        ]
    );
    buffer.close().unwrap();
}

/// A memory store behind its commit buffer, closed cleanly and reopened: history comes back with
/// the times its changes were made (not the reopen's), and a rewind to a moment before the restart,
/// between two of its commits, gives exactly what the store held then.
#[test]
fn memory_history_keeps_its_times_across_a_clean_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let wal = dir.path().join("wal");
    let open_store =
        || -> Arc<dyn OffsetStore> { Arc::new(with_history(MemoryStore::new(), week())) };
    let buffer = CommitBuffer::open(open_store(), buffer_config(&wal)).unwrap();
    let commits: [&[(&str, i64)]; 3] = [&[("a", 1), ("b", 1)], &[("a", 2)], &[("a", 3), ("c", 1)]];
    for offers in commits {
        for (t, n) in offers {
            buffer.offer(key(t), pos(*n).unwrap()).unwrap();
        }
        buffer.commit_with(Durability::Store).wait().unwrap();
        // Distinct commit times, even on a coarse clock.
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = history::read(&**buffer.store(), C).unwrap();
    assert_eq!(before.changes.len(), 5, "{before:?}");
    buffer.close().unwrap();
    drop(buffer);
    // The reopen comes well after every commit: a time stamped at it cannot pass for theirs.
    std::thread::sleep(Duration::from_millis(50));

    let buffer = CommitBuffer::open(open_store(), buffer_config(&wal)).unwrap();
    let after = history::read(&**buffer.store(), C).unwrap();
    assert_eq!(after, before, "history after a clean close and reopen");
    let at = |seq: u64| before.changes.iter().find(|c| c.seq == seq).unwrap().at_us;
    // Between the first commit and the second: a=1, b=1, no c.
    let then = at(1) + (at(2) - at(1)) / 2;
    let plan = history::plan_rewind(
        &**buffer.store(),
        C,
        RewindTo::Time(then),
        None,
        time::now_us(),
    )
    .expect("a rewind to a time before the restart");
    assert_eq!(plan.at_us, then);
    buffer.store().write(plan.entries()).unwrap();
    assert_eq!(
        state(&**buffer.store()),
        vec![(key("a"), pos(1).unwrap()), (key("b"), pos(1).unwrap())]
    );
    buffer.close().unwrap();
}

/// The command line on RocksDB: `history` newest first (text, JSON, one partition, since a time),
/// `rewind` by time and by seq, a dry run that prints the moves and writes nothing.
#[test]
fn cli_history_and_rewind() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let store = format!("rocksdb://{}?history=7d", path.display());
    // Seqs 1..3 from a commit buffer (the worker), then a tool's set.
    {
        let s: Arc<dyn OffsetStore> = Arc::from(connect_offsets::open(&store).unwrap());
        let buffer = CommitBuffer::open(s, buffer_config(&dir.path().join("wal"))).unwrap();
        three_batches_through(&buffer);
        buffer.close().unwrap();
    }
    let set = |t: &str, n: &str| {
        ok(&cli(&[
            "set",
            "--store",
            &store,
            "--connector",
            C,
            "--partition",
            &format!(r#"{{"table":"{t}"}}"#),
            "--offset",
            &format!(r#"{{"lsn":{n}}}"#),
        ]))
    };
    set("a", "9");
    let out = ok(&cli(&["history", "--store", &store, "--connector", C]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 6, "{out}");
    for (line, want) in lines.iter().zip([
        r#"  tool  {"table":"a"}: {"lsn":2} -> {"lsn":9}"#,
        r#"  orders-worker seq 3  {"table":"b"}: {"lsn":1} -> reset"#,
        r#"  orders-worker seq 3  {"table":"c"}: none -> {"lsn":1}"#,
        r#"  orders-worker seq 2  {"table":"a"}: {"lsn":1} -> {"lsn":2}"#,
        r#"  orders-worker seq 1  {"table":"a"}: none -> {"lsn":1}"#,
        r#"  orders-worker seq 1  {"table":"b"}: none -> {"lsn":1}"#,
    ]) {
        assert!(line.ends_with(want), "{line:?} should end with {want:?}");
        time::parse_rfc3339(&line[..line.find(' ').unwrap()]).unwrap();
    }
    let json = ok(&cli(&[
        "history",
        "--store",
        &store,
        "--connector",
        C,
        "--json",
        "--partition",
        r#"{"table":"a"}"#,
    ]));
    assert!(
        json.starts_with(&format!(r#"{{"connector":"{C}","oldest_reachable":"20"#)),
        "{json}"
    );
    assert_eq!(
        json.matches(r#""partition":{"table":"a"}"#).count(),
        3,
        "{json}"
    );
    assert!(json.contains(r#""writer":"orders-worker","seq":2,"partition":{"table":"a"},"from":{"lsn":1},"to":{"lsn":2}"#), "{json}");
    let seq3_at = lines[2].split(' ').next().unwrap();
    let since = ok(&cli(&[
        "history",
        "--store",
        &store,
        "--connector",
        C,
        "--since",
        seq3_at,
    ]));
    assert_eq!(since.lines().count(), 3, "{since}");

    let list = |s: &str| ok(&cli(&["list", "--store", s, "--connector", C]));
    let before = list(&store);
    let dry = cli(&[
        "rewind",
        "--store",
        &store,
        "--connector",
        C,
        "--to",
        "seq:2",
        "--dry-run",
    ]);
    assert_eq!(
        ok(&dry),
        "{\"table\":\"a\"}: {\"lsn\":9} -> {\"lsn\":2}\n{\"table\":\"b\"}: none -> {\"lsn\":1}\n{\"table\":\"c\"}: {\"lsn\":1} -> reset\n"
    );
    assert!(
        text(&dry.stderr).contains("dry run: would rewind 3 partitions"),
        "{}",
        text(&dry.stderr)
    );
    assert_eq!(list(&store), before, "the dry run wrote nothing");
    assert_eq!(
        ok(&cli(&["history", "--store", &store, "--connector", C])),
        out,
        "nor history"
    );

    // By time, one partition: a back to where it was at seq 3's time.
    ok(&cli(&[
        "rewind",
        "--store",
        &store,
        "--connector",
        C,
        "--to",
        seq3_at,
        "--partition",
        r#"{"table":"a"}"#,
    ]));
    assert_eq!(list(&store), r#"{"offsets":[{"partition":{"table":"a"},"offset":{"lsn":2}},{"partition":{"table":"c"},"offset":{"lsn":1}}]}"# .to_string() + "\n");
    // All partitions to seq 1, through a URL without the history parameter: still recorded.
    let plain = format!("rocksdb://{}", path.display());
    ok(&cli(&[
        "rewind",
        "--store",
        &plain,
        "--connector",
        C,
        "--to",
        "seq:1",
    ]));
    assert_eq!(list(&plain), r#"{"offsets":[{"partition":{"table":"a"},"offset":{"lsn":1}},{"partition":{"table":"b"},"offset":{"lsn":1}}]}"# .to_string() + "\n");
    let lag = ok(&cli(&["lag", "--store", &plain]));
    assert!(
        lag.contains(C) && !lag.contains("__connect-offsets-history"),
        "{lag}"
    );
    let connectors = ok(&cli(&["connectors", "--store", &plain]));
    assert_eq!(connectors, format!("{C}\n"));
    let latest = ok(&cli(&["history", "--store", &plain, "--connector", C]));
    assert!(
        latest.lines().next().unwrap().contains("tool  "),
        "{latest}"
    );
    assert_eq!(latest.lines().count(), 10, "{latest}");
}

fn three_batches_through(buffer: &CommitBuffer) {
    let batches = [
        vec![(key("a"), pos(1)), (key("b"), pos(1))],
        vec![(key("a"), pos(2))],
        vec![(key("b"), None), (key("c"), pos(1))],
    ];
    for entries in batches {
        for (k, v) in entries {
            match v {
                Some(v) => buffer.offer(k, v).unwrap(),
                None => buffer.offer_reset(k).unwrap(),
            }
        }
        buffer.commit_with(Durability::Store).wait().unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Every refusal says what was wrong, and writes nothing.
#[test]
fn cli_refusals_name_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let store = format!("rocksdb://{}?history=7d", path.display());
    let rewind = |extra: &[&str]| {
        let mut args = vec!["rewind", "--store", &store];
        args.extend_from_slice(extra);
        cli(&args)
    };
    let set = |n: &str| {
        ok(&cli(&[
            "set",
            "--store",
            &store,
            "--connector",
            C,
            "--partition",
            r#"{"table":"a"}"#,
            "--offset",
            &format!(r#"{{"lsn":{n}}}"#),
        ]))
    };
    set("1");
    set("2");
    let json = ok(&cli(&[
        "history",
        "--store",
        &store,
        "--connector",
        C,
        "--json",
    ]));
    let oldest = json
        .split(r#""oldest_reachable":""#)
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_string();

    refused(
        &rewind(&["--connector", C, "--to", "2999-01-01T00:00:00Z"]),
        "2999-01-01T00:00:00.000000Z: it is in the future",
    );
    let err = refused(
        &rewind(&["--connector", C, "--to", "2020-01-01T00:00:00Z"]),
        "before the retained history",
    );
    assert!(
        err.contains(&format!("the oldest time that can be reached is {oldest}")),
        "{err}"
    );
    refused(
        &rewind(&["--connector", "nobody", "--to", &oldest]),
        "unknown connector `nobody`",
    );
    refused(
        &cli(&["history", "--store", &store, "--connector", "nobody"]),
        "unknown connector `nobody`",
    );
    refused(
        &rewind(&["--connector", C, "--to", "09:40"]),
        "--to: `09:40` is not an RFC 3339 time",
    );
    // A time that starts with `-` is the time's to refuse, not taken for an option.
    refused(
        &rewind(&["--connector", C, "--to", "-5m"]),
        "--to: `-5m` is not an RFC 3339 time",
    );
    refused(
        &cli(&[
            "history",
            "--store",
            &store,
            "--connector",
            C,
            "--since",
            "-5m",
        ]),
        "--since: `-5m` is not an RFC 3339 time",
    );
    refused(
        &rewind(&["--connector", C, "--to", "seq:x"]),
        "expected seq:N",
    );
    refused(
        &rewind(&["--connector", C, "--to", "seq:7"]),
        "no retained batch of connector `orders-source` has seq 7",
    );
    refused(
        &rewind(&[
            "--connector",
            C,
            "--to",
            &oldest,
            "--partition",
            r#"{"table":"zz"}"#,
        ]),
        "no offset and no history for partition",
    );
    refused(
        &cli(&[
            "history",
            "--store",
            &store,
            "--connector",
            C,
            "--since",
            "monday",
        ]),
        "`monday` is not an RFC 3339 time",
    );
    let bad = format!("rocksdb://{}?history=7 days", path.display());
    refused(
        &cli(&["history", "--store", &bad, "--connector", C]),
        "history=7 days: `7 days` is not a duration",
    );
    let bad = format!("rocksdb://{}?history.max.bytes=100", path.display());
    refused(
        &cli(&["history", "--store", &bad, "--connector", C]),
        "`history.max.bytes` needs `history=<retention>`",
    );
    let no_history = format!("rocksdb://{}", dir.path().join("other").display());
    ok(&cli(&[
        "set",
        "--store",
        &no_history,
        "--connector",
        C,
        "--partition",
        r#"{"table":"a"}"#,
        "--offset",
        r#"{"lsn":1}"#,
    ]));
    refused(
        &cli(&[
            "rewind",
            "--store",
            &no_history,
            "--connector",
            C,
            "--to",
            &oldest,
        ]),
        "the store holds no history: open it with `?history=<retention>`",
    );

    // A worker holds the store: refused as `set` is, nothing written.
    let before = ok(&cli(&["list", "--store", &store, "--connector", C]));
    {
        let s: Arc<dyn OffsetStore> = Arc::from(connect_offsets::open(&store).unwrap());
        let buffer = CommitBuffer::open(s, buffer_config(&dir.path().join("wal"))).unwrap();
        refused(
            &rewind(&["--connector", C, "--to", &oldest]),
            "locked by another process",
        );
        refused(
            &rewind(&["--connector", C, "--to", &oldest, "--dry-run"]),
            "locked by another process",
        );
        buffer.close().unwrap();
    }
    assert_eq!(
        ok(&cli(&["list", "--store", &store, "--connector", C])),
        before
    );
}

/// `serve`: what `PATCH` and `DELETE` did, newest first, as `history --json` prints it.
#[test]
fn serve_answers_a_connectors_history() {
    let s = http_util::Serve::start(&["--store", "memory://?history=7d", "--connector", C]);
    let patch = |body: &str| {
        let (st, _, _) = http_util::call("PATCH", &s.offsets_url(C), Some(body));
        assert_eq!(st, 200);
    };
    patch(r#"{"offsets":[{"partition":{"table":"a"},"offset":{"lsn":1}}]}"#);
    patch(r#"{"offsets":[{"partition":{"table":"a"},"offset":{"lsn":2}}]}"#);
    let (st, _, _) = http_util::call("DELETE", &s.offsets_url(C), None);
    assert_eq!(st, 200);
    let url = s.url(&format!("/connectors/{C}/offsets/history"));
    let (st, ctype, body) = http_util::call("GET", &url, None);
    assert_eq!((st, ctype.as_str()), (200, "application/json"), "{body}");
    let moves: Vec<&str> = body.split(r#""partition":"#).skip(1).collect();
    assert_eq!(moves.len(), 3, "{body}");
    assert!(
        moves[0].starts_with(r#"{"table":"a"},"from":{"lsn":2},"to":null"#),
        "{body}"
    );
    assert!(
        moves[1].starts_with(r#"{"table":"a"},"from":{"lsn":1},"to":{"lsn":2}"#),
        "{body}"
    );
    assert!(
        moves[2].starts_with(r#"{"table":"a"},"from":null,"to":{"lsn":1}"#),
        "{body}"
    );
    let (st, _, body) = http_util::call("GET", &s.url("/connectors/nobody/offsets/history"), None);
    assert_eq!(
        (st, body.as_str()),
        (
            404,
            r#"{"error_code":404,"message":"Connector nobody not found"}"#
        )
    );
    let (st, _, _) = http_util::call("DELETE", &url, None);
    assert_eq!(st, 405);
    // The history namespace is not a connector.
    let (_, _, body) = http_util::call("GET", &s.url("/connectors"), None);
    assert_eq!(body, format!(r#"["{C}"]"#));
}

/// Fails, once, the first batch that writes `key("a")`, after every entry is staged.
#[derive(Debug, Default)]
struct FailFirstWriteOfA(std::sync::atomic::AtomicBool);

impl connect_offsets::conformance::ApplyFault for FailFirstWriteOfA {
    fn before_entry(&self, _: &Batch, _: usize) -> connect_offsets::Result<()> {
        Ok(())
    }
    fn before_commit(&self, batch: &Batch) -> connect_offsets::Result<()> {
        if batch.entries.contains_key(&key("a"))
            && !self.0.swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return Err(connect_offsets::Error::State(
                "injected: the disk went away".into(),
            ));
        }
        Ok(())
    }
}

/// An apply that fails (RocksDB's own write batch, stopped by the fault seam once every entry is
/// staged) leaves neither offsets nor history; the retry records the batch once.
#[test]
fn a_failed_apply_leaves_no_history_and_its_retry_records_once() {
    let dir = tempfile::tempdir().unwrap();
    let fault = Arc::new(FailFirstWriteOfA::default());
    let inner = RocksDbStore::open(dir.path().join("db"))
        .unwrap()
        .with_fault(fault.clone());
    let store = with_history(inner, week());
    let batch = Batch::new("w", 1, vec![(key("a"), pos(1)), (key("b"), pos(1))]);
    assert!(store.apply(&batch).is_err());
    assert!(state(&store).is_empty());
    assert!(rows(&store).is_empty());
    assert_eq!(history::read(&store, C).unwrap().horizon_us, None);
    store.apply(&batch).unwrap();
    store.apply(&batch).unwrap();
    assert_eq!(
        rows(&store),
        vec![row("a", 1, None, pos(1)), row("b", 1, None, pos(1))]
    );
}

/// A real store, counting the reads made of it; a sole writer only if `sole` and the store is one.
#[derive(Debug)]
struct CountedReads {
    inner: Box<dyn OffsetStore>,
    sole: bool,
    reads: Arc<std::sync::atomic::AtomicUsize>,
}

impl CountedReads {
    fn new(inner: impl OffsetStore + 'static, sole: bool) -> Self {
        CountedReads {
            inner: Box::new(inner),
            sole,
            reads: Arc::default(),
        }
    }
    fn count(&self, n: usize) {
        self.reads.fetch_add(n, std::sync::atomic::Ordering::SeqCst);
    }
}

impl OffsetStore for CountedReads {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::DEFAULT
            .with_durable(self.inner.capabilities().durable)
            .with_sole_writer(self.sole && self.inner.capabilities().sole_writer)
    }
    fn apply(&self, batch: &Batch) -> connect_offsets::Result<()> {
        self.inner.apply(batch)
    }
    fn applied_seq(&self, writer: &str) -> connect_offsets::Result<u64> {
        self.inner.applied_seq(writer)
    }
    fn writers(&self) -> connect_offsets::Result<Vec<(String, u64)>> {
        self.inner.writers()
    }
    fn get(&self, key: &OffsetKey) -> connect_offsets::Result<Option<Offset>> {
        self.count(1);
        self.inner.get(key)
    }
    fn get_many(&self, keys: &[OffsetKey]) -> connect_offsets::Result<Vec<Option<Offset>>> {
        self.count(keys.len());
        self.inner.get_many(keys)
    }
    fn partitions(&self, namespace: &str) -> connect_offsets::Result<Vec<(OffsetKey, Offset)>> {
        self.inner.partitions(namespace)
    }
    fn namespaces(&self) -> connect_offsets::Result<Vec<String>> {
        self.inner.namespaces()
    }
    fn persist(&self) -> connect_offsets::Result<()> {
        self.inner.persist()
    }

    fn hooks(&self) -> Option<&dyn CommitHooks> {
        Some(self)
    }
}

impl CommitHooks for CountedReads {
    fn apply_logged(&self, batch: &Batch) -> connect_offsets::Result<()> {
        hooks(&*self.inner).apply_logged(batch)
    }
    fn apply_extended(
        &self,
        batch: &Batch,
        extra: &[connect_offsets::store::BatchEntry],
        logged: bool,
    ) -> connect_offsets::Result<()> {
        hooks(&*self.inner).apply_extended(batch, extra, logged)
    }
}

/// One change as (partition, writer, seq, from, to): its time left out.
type Move = (OffsetKey, String, u64, Option<Offset>, Option<Offset>);

/// A connector's whole history, times left out.
fn moves_of(store: &dyn OffsetStore, connector: &str) -> Vec<Move> {
    history::read(store, connector)
        .unwrap()
        .changes
        .into_iter()
        .map(|c| (c.key, c.writer, c.seq, c.from, c.to))
        .collect()
}

/// A store nothing else writes (memory, RocksDB) is not read for the "before" of a partition the
/// recorder already knows, and what it records is what a recorder reading every batch records:
/// the same moves over two connectors, repeated offsets (no move), resets, offsets set again, a
/// tool's write, a replayed batch and a rewind, most batches staged ahead (`prepare`), some
/// before other writes. (Remembering nothing new after a batch, remembering a batch the store
/// refused, or applying a stage made before another write makes the histories differ.)
#[test]
fn remembered_offsets_record_what_reading_them_records() {
    let dir = tempfile::tempdir().unwrap();
    type Open = Box<dyn Fn() -> Box<dyn OffsetStore>>;
    let stores: Vec<(&str, Open)> = vec![
        ("memory", Box::new(|| Box::new(MemoryStore::new()))),
        (
            "rocksdb",
            Box::new({
                let dir = dir.path().to_path_buf();
                let n = std::sync::atomic::AtomicUsize::new(0);
                move || {
                    let i = n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    Box::new(RocksDbStore::open(dir.join(format!("db{i}"))).unwrap())
                }
            }),
        ),
    ];
    for (kind, open) in stores {
        let remembering = CountedReads::new(open(), true);
        let reading = CountedReads::new(open(), false);
        let (remembered_reads, read_reads) = (remembering.reads.clone(), reading.reads.clone());
        let a = with_history(remembering, week());
        let b = with_history(reading, week());
        let other = |t: &str| OffsetKey::new("other-source", Partition::new().with("table", t));
        // A fixed xorshift: the same workload for both, with values from a small range so that
        // offsets repeat.
        let mut rng = 0x2545_F491_4F6C_DD1Du64;
        let mut next = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut batches = Vec::new();
        for seq in 1..=60u64 {
            let mut entries = Vec::new();
            for _ in 0..=next(4) {
                let t = format!("t{}", next(6));
                let k = if next(3) == 0 { other(&t) } else { key(&t) };
                let v = if next(5) == 0 {
                    None
                } else {
                    pos(next(4) as i64)
                };
                entries.push((k, v));
            }
            batches.push(Arc::new(Batch::new("w", seq, entries)));
        }
        for (i, batch) in batches.iter().enumerate() {
            // The remembering recorder stages most batches ahead, as a commit buffer has it do
            // while it logs them (batches 21 and 41 before the writes below).
            if i % 5 != 0 && i != 21 && i != 41 {
                assert!(a.prepare(batch));
            }
            for store in [&a, &b] {
                store.apply(batch).unwrap();
                if (i == 20 || i == 40) && std::ptr::eq(store, &a) {
                    assert!(a.prepare(&batches[i + 1]));
                }
                if i == 20 {
                    // A replay of an earlier batch, and a tool's write of a partition the next
                    // batch moves.
                    store.apply(&batches[5]).unwrap();
                    let next = batches[i + 1].entries.keys().next().unwrap();
                    store
                        .set(next.clone(), Offset::new().with("lsn", 99))
                        .unwrap();
                }
                if i == 40 {
                    let now = time::now_us();
                    let to = history::read(store, C).unwrap().changes[3].at_us;
                    let plan = history::plan_rewind(store, C, RewindTo::Time(to), None, now);
                    store.write(plan.unwrap().entries()).unwrap();
                }
            }
        }
        for connector in [C, "other-source"] {
            let (ma, mb) = (moves_of(&a, connector), moves_of(&b, connector));
            assert!(ma.len() > 20, "{kind}: {ma:?}");
            // The rewind's moves are planned from each store's own history: the same only if
            // the histories before it were.
            assert_eq!(ma, mb, "{kind} {connector}");
        }
        assert_eq!(state(&a), state(&b), "{kind}");
        let remembered = remembered_reads.load(std::sync::atomic::Ordering::SeqCst);
        let read = read_reads.load(std::sync::atomic::Ordering::SeqCst);
        // The remembering recorder reads each of the 12 partitions once (rewind planning reads
        // through `partitions`, which is not counted).
        assert!(remembered <= 12, "{kind}: {remembered} reads");
        assert!(read > 60, "{kind}: {read} reads");
    }
}

#[derive(Debug)]
struct NoFault;

impl connect_offsets::conformance::ApplyFault for NoFault {
    fn before_entry(&self, _: &Batch, _: usize) -> connect_offsets::Result<()> {
        Ok(())
    }
    fn before_commit(&self, _: &Batch) -> connect_offsets::Result<()> {
        Ok(())
    }
}

/// A memory store that another handle shares (and writes) is read again at every batch: the
/// "before" of a move is what the store held, not what the recorder last wrote.
#[test]
fn a_store_another_handle_writes_is_read_again() {
    let data = MemoryStore::new();
    let store = with_history(data.shared_with_fault(Arc::new(NoFault)), week());
    store
        .apply(&Batch::new("w", 1, vec![(key("a"), pos(1))]))
        .unwrap();
    data.apply(&Batch::new("", 0, vec![(key("a"), pos(5))]))
        .unwrap();
    store
        .apply(&Batch::new("w", 2, vec![(key("a"), pos(6))]))
        .unwrap();
    assert_eq!(
        rows(&store),
        vec![row("a", 1, None, pos(1)), row("a", 2, pos(5), pos(6))]
    );
}

/// A migration between two stores with history copies the history as it is (the migration's own
/// writes are not recorded as moves), and the target rewinds as the source would.
#[test]
fn migrate_between_stores_with_history_copies_it_as_it_is() {
    let from = with_history(MemoryStore::new(), week());
    three_batches(&from);
    let to = with_history(MemoryStore::new(), week());
    let report = connect_offsets::migrate::migrate(&from, &to, &Default::default()).unwrap();
    assert!(!report.connectors.is_empty());
    assert_eq!(rows(&to), expected_history());
    assert_eq!(state(&to), state(&from));
    let now = time::now_us();
    let plan = |s: &dyn OffsetStore| history::plan_rewind(s, C, RewindTo::Seq(1), None, now);
    assert_eq!(plan(&to).unwrap().entries(), plan(&from).unwrap().entries());
}

/// A change history never saw (written without `history=`) makes a rewind across it refuse,
/// naming the partition, rather than undo around the gap; a rewind after it still works.
#[test]
fn a_rewind_across_an_unrecorded_change_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let store = with_history(RocksDbStore::open(&path).unwrap(), week());
        three_batches(&store);
    }
    // A tool without history moves `a` from 2 to 7.
    RocksDbStore::open(&path)
        .unwrap()
        .write(vec![(key("a"), pos(7))])
        .unwrap();
    let store = with_history(RocksDbStore::open(&path).unwrap(), week());
    let h = history::read(&store, C).unwrap();
    let at3 = h.changes.iter().find(|c| c.seq == 3).unwrap().at_us;
    let e = history::plan_rewind(&store, C, RewindTo::Seq(1), None, time::now_us())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("exactly") && e.contains(r#"{"table":"a"}"#),
        "{e}"
    );
    assert!(e.contains(r#"offset {"lsn":7}"#), "{e}");
    // Partition c's chain is whole: rewinding it alone works.
    let only_c =
        history::plan_rewind(&store, C, RewindTo::Seq(1), Some(&key("c")), time::now_us()).unwrap();
    assert_eq!(only_c.entries(), vec![(key("c"), None)]);
    // To the last recorded batch: nothing of `a` is undone.
    let plan = history::plan_rewind(&store, C, RewindTo::Time(at3), None, time::now_us()).unwrap();
    assert!(plan.moves.is_empty(), "{:?}", plan.moves);
}

/// A record stamped ahead of the clock (one that jumped forward and was set right) keeps later
/// records in order after it, but retention still goes by the clock: the real records within
/// the retention stay.
#[test]
fn a_record_from_a_clock_that_jumped_ahead_does_not_age_out_the_rest() {
    let store = with_history(MemoryStore::new(), week());
    three_batches(&store);
    let ahead = time::now_us() + 30 * 86_400 * 1_000_000;
    let jumped = OffsetKey::new(
        history::HISTORY_NAMESPACE,
        Partition::new()
            .with("connector", "other")
            .with("writer", "w2")
            .with("seq", 1)
            .with("part", 0),
    );
    store
        .write(vec![(
            jumped,
            Some(Offset::new().with("at_us", ahead).with("changes", "[]")),
        )])
        .unwrap();
    store
        .apply(&Batch::new("w", 4, vec![(key("d"), pos(1))]))
        .unwrap();
    let mut want = expected_history();
    want.push(row("d", 4, None, pos(1)));
    assert_eq!(rows(&store), want);
    let h = history::read(&store, C).unwrap();
    assert!(
        h.changes.last().unwrap().at_us > ahead,
        "kept in order after it"
    );
}

/// A history record that does not decode is left out and named, not a failure of every read; a
/// horizon record that does not decode refuses rewinds, saying which record and how to remove it.
#[test]
fn an_unreadable_history_record_is_left_out_and_named() {
    let store = with_history(MemoryStore::new(), week());
    three_batches(&store);
    let broken = OffsetKey::new(
        history::HISTORY_NAMESPACE,
        Partition::new()
            .with("connector", C)
            .with("writer", "w9")
            .with("seq", 1)
            .with("part", 0),
    );
    store
        .write(vec![(broken, Some(Offset::new().with("changes", "[]")))])
        .unwrap();
    let h = history::read(&store, C).unwrap();
    assert_eq!(rows(&store), expected_history());
    assert_eq!(h.unreadable.len(), 1, "{:?}", h.unreadable);
    assert!(
        h.unreadable[0].contains("no at_us") && h.unreadable[0].contains("w9"),
        "{:?}",
        h.unreadable
    );
    // The rest still rewinds.
    history::plan_rewind(&store, C, RewindTo::Seq(1), None, time::now_us()).unwrap();
    // A horizon that does not decode: rewinds refuse, naming it.
    let horizon = OffsetKey::new(
        history::HISTORY_NAMESPACE,
        Partition::new().with("horizon", "history"),
    );
    store
        .write(vec![(horizon, Some(Offset::new().with("at_us", "soon")))])
        .unwrap();
    let e = history::plan_rewind(&store, C, RewindTo::Seq(1), None, time::now_us())
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot be read") && e.contains("horizon"), "{e}");
}
