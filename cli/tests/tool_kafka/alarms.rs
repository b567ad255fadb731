//! Stall and gap alarms (`connect_offsets::alarms`, a buffer's `stall_after`): a connector that
//! keeps committing the same offsets is flagged stalled and unflagged when they move again; an
//! offset moved backwards is counted (also when a second writer does it), a reset and an override
//! that applies once are not; all of it in the buffer's Prometheus series, in the store's records,
//! and from another process in `lag --json`, `lag` and `serve`'s `/metrics` (Kafka, the real
//! broker).

use crate::cli_util;
use cli_util::run;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use connect_offsets::alarms::{self, AlarmRecord};
use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig, Durability};
use connect_offsets::internal::time::now_ms;
use connect_offsets::once::OnceOverride;
use connect_offsets::store::MemoryStore;
use connect_offsets::{Offset, OffsetKey, OffsetStore, Partition};

use crate::http_util;
use crate::kafka_util;

fn key(connector: &str, table: &str) -> OffsetKey {
    OffsetKey::new(connector, Partition::new().with("table", table))
}

fn lsn(n: i64) -> Offset {
    Offset::new().with("lsn", n)
}

fn config(wal: &Path, writer: &str, stall_after: Duration) -> CommitBufferConfig {
    let mut config = CommitBufferConfig::new(wal);
    config.writer = writer.into();
    config.flush_interval = None;
    config.flush_timeout = Duration::from_secs(300);
    config.stall_after = Some(stall_after);
    config
}

fn commit(buffer: &CommitBuffer, k: &OffsetKey, o: Offset) {
    buffer.offer(k.clone(), o).unwrap();
    buffer.commit_with(Durability::Store).wait().unwrap();
}

fn record(store: &dyn OffsetStore, connector: &str, writer: &str) -> Option<AlarmRecord> {
    alarms::read(store)
        .unwrap()
        .into_iter()
        .find(|r| r.connector == connector && r.writer == writer)
}

/// Commits `o` to `k` every 100 ms until `done` says yes (at most 5 minutes).
fn commit_until(buffer: &CommitBuffer, k: &OffsetKey, o: &Offset, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while !done() {
        assert!(Instant::now() < deadline, "not reached in 5 minutes");
        commit(buffer, k, o.clone());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Polls `check` (at most 5 minutes, every 250 ms) until it gives `Some`.
fn poll<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not seen in 5 minutes");
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn a_connector_committing_the_same_offsets_is_stalled_until_they_move() {
    let handle = connect_offsets::metrics::install().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn OffsetStore> = Arc::new(MemoryStore::new());
    let buffer = CommitBuffer::open(
        Arc::clone(&store),
        config(dir.path(), "stall-w", Duration::from_secs(1)),
    )
    .unwrap();
    let k = key("stuck-source", "orders");
    commit(&buffer, &k, lsn(7));
    let stalled =
        || record(&*store, "stuck-source", "stall-w").is_some_and(|r| r.stalled(now_ms()));
    commit_until(&buffer, &k, &lsn(7), stalled);
    let series = "connect_offsets_connector_stalled{connector=\"stuck-source\",writer=\"stall-w\"}";
    assert!(
        handle.render().contains(&format!("{series} 1")),
        "{}",
        handle.render()
    );
    // It moves: unflagged in the store's record and in the series.
    commit(&buffer, &k, lsn(8));
    assert!(
        handle.render().contains(&format!("{series} 0")),
        "{}",
        handle.render()
    );
    let r = poll("unflagged in the store", || {
        record(&*store, "stuck-source", "stall-w").filter(|r| !r.stalled(now_ms()))
    });
    assert_eq!(r.backwards, 0);
    buffer.close().unwrap();
}

#[test]
fn offsets_moved_backwards_are_counted_but_resets_and_overrides_are_not() {
    let handle = connect_offsets::metrics::install().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn OffsetStore> = Arc::new(MemoryStore::new());
    let k = key("gap-source", "orders");
    let other = key("gap-source", "lines");
    let a_hour = Duration::from_secs(3600);
    {
        let buffer = CommitBuffer::open(
            Arc::clone(&store),
            config(&dir.path().join("a"), "gap-w", a_hour),
        )
        .unwrap();
        commit(&buffer, &k, lsn(100));
        commit(&buffer, &k, lsn(150));
        commit(&buffer, &k, lsn(90));
        // A reset, then a lower offset: a fresh start, not backwards.
        buffer.offer_reset(k.clone()).unwrap();
        buffer.commit_with(Durability::Store).wait().unwrap();
        commit(&buffer, &k, lsn(1));
        // Other members changed with it (a new file): a move, not judged backwards.
        commit(
            &buffer,
            &other,
            Offset::new().with("file", "b.1").with("pos", 900),
        );
        commit(
            &buffer,
            &other,
            Offset::new().with("file", "b.2").with("pos", 4),
        );
        commit(
            &buffer,
            &other,
            Offset::new().with("file", "b.2").with("pos", 3),
        );
        let r = poll("two moves backwards recorded", || {
            record(&*store, "gap-source", "gap-w").filter(|r| r.backwards >= 2)
        });
        assert_eq!(r.backwards, 2, "{r:?}");
        assert!(r.last_backwards_ms.is_some());
        let text = handle.render();
        assert!(
            text.contains(
                "connect_offsets_backward_moves_total{connector=\"gap-source\",writer=\"gap-w\"} 2"
            ),
            "{text}"
        );
        buffer.close().unwrap();
    }
    // The next lifetime continues the count; an override that sets the offset lower at open is
    // a deliberate rewind.
    let mut cfg = config(&dir.path().join("a"), "gap-w", a_hour);
    cfg.once = Some(OnceOverride::new("rewind-1", vec![(k.clone(), Some(lsn(0)))]).unwrap());
    let buffer = CommitBuffer::open(Arc::clone(&store), cfg).unwrap();
    commit(&buffer, &k, lsn(5));
    // Its first batch after open is recorded (a record for every connector it commits).
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(record(&*store, "gap-source", "gap-w").unwrap().backwards, 2);

    // A second writer of the same connector commits an older position: its buffer sees it.
    let second = CommitBuffer::open(
        Arc::clone(&store),
        config(&dir.path().join("b"), "gap-w2", a_hour),
    )
    .unwrap();
    commit(&buffer, &k, lsn(500));
    commit(&second, &k, lsn(20));
    poll("the second writer's move backwards", || {
        record(&*store, "gap-source", "gap-w2").filter(|r| r.backwards == 1)
    });
    second.close().unwrap();
    buffer.close().unwrap();
    // Not a connector: `connectors` leaves the records out.
    assert!(
        store
            .namespaces()
            .unwrap()
            .contains(&alarms::ALARMS_NAMESPACE.to_string())
    );
}

/// A worker's buffer over Kafka commits the same offset every 100 ms from a thread; another
/// process's `lag --json`, `lag` and `serve`'s `/metrics` flag the connector stalled, then, once
/// the offsets move on, not; a move backwards shows in both.
#[test]
fn lag_and_serve_show_the_alarms_from_the_kafka_store() {
    let topic = kafka_util::TopicGuard::new("alarms");
    let url = kafka_util::url(&topic, 3, "");
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn OffsetStore> = Arc::from(connect_offsets::open(&url).unwrap());
    let buffer = Arc::new(
        CommitBuffer::open(store, config(dir.path(), "kafka-w", Duration::from_secs(2))).unwrap(),
    );
    let k = key("cdc", "orders");
    // The worker commits `position`, rising by one per commit while `moving`.
    let position = Arc::new(AtomicI64::new(40));
    let moving = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let (buffer, k) = (Arc::clone(&buffer), k.clone());
        let (position, moving, stop) = (
            Arc::clone(&position),
            Arc::clone(&moving),
            Arc::clone(&stop),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::Acquire) {
                if moving.load(Ordering::Acquire) {
                    position.fetch_add(1, Ordering::AcqRel);
                }
                commit(&buffer, &k, lsn(position.load(Ordering::Acquire)));
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let lag_json = || {
        let (code, out, err) = run(&["lag", "--store", &url, "--json"]);
        assert_eq!(code, 0, "{err}");
        out
    };
    let flagged = poll("stalled in lag --json", || {
        let out = lag_json();
        out.contains(r#""alarms":[{"connector":"cdc","writer":"kafka-w","stalled":true"#)
            .then_some(out)
    });
    assert!(flagged.contains(r#""stall_after_s":2.000"#), "{flagged}");
    let (code, text, err) = run(&["lag", "--store", &url]);
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains("CONNECTOR\tWRITER\tSTALLED\tUNMOVED\tBACKWARDS\n"),
        "{text}"
    );
    let serve = http_util::Serve::start(&["--store", &url]);
    let series = "connect_offsets_connector_stalled{connector=\"cdc\",writer=\"kafka-w\"}";
    poll("stalled in /metrics", || {
        let (status, body) = http_util::request("GET", &serve.url("/metrics"), None);
        assert_eq!(status, 200);
        body.contains(&format!("{series} 1")).then_some(())
    });
    // The console's summary shows the same alarms.
    let summary = |want: &str| {
        poll(want, || {
            let (status, body) =
                http_util::request("GET", &serve.url("/connectors?expand=summary"), None);
            assert_eq!(status, 200, "{body}");
            body.contains(want).then_some(())
        })
    };
    summary(r#""alarms":{"stalled":true,"backwards":false}"#);

    // Moving again: unflagged. Then one step back, counted.
    moving.store(true, Ordering::Release);
    poll("unflagged in lag --json", || {
        lag_json()
            .contains(r#""alarms":[{"connector":"cdc","writer":"kafka-w","stalled":false"#)
            .then_some(())
    });
    moving.store(false, Ordering::Release);
    position.store(30, Ordering::Release);
    poll("backwards in lag --json", || {
        lag_json().contains(r#""moved_backwards":1,"#).then_some(())
    });
    poll("backwards in /metrics", || {
        let (_, body) = http_util::request("GET", &serve.url("/metrics"), None);
        body.contains(
            "connect_offsets_backward_moves_total{connector=\"cdc\",writer=\"kafka-w\"} 1",
        )
        .then_some(())
    });
    summary(r#""alarms":{"stalled":false,"backwards":true}"#);
    stop.store(true, Ordering::Release);
    worker.join().unwrap();
    buffer.close().unwrap();
    let (_, names, _) = run(&["connectors", "--store", &url]);
    assert_eq!(names.trim(), "cdc", "the alarm records are no connector");
}
