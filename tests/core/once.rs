//! Overrides that apply once (`CommitBufferConfig::once`): the same override given at ten
//! consecutive opens, with commits in between, is applied exactly once, on every backend (Kafka on
//! the real broker, both write modes); a different id applies again; the properties that configure
//! one refuse bad input. Crashes inside the override's apply are in `tests/core/crash_props.rs`.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig, Durability};
use connect_offsets::internal::once::marker_key;
use connect_offsets::once::OnceOverride;
use connect_offsets::{Batch, Offset, OffsetKey, OffsetStore, Partition};

fn key(p: i64) -> OffsetKey {
    OffsetKey::new("orders-source", Partition::new().with("table", p))
}

fn pos(n: i64) -> Offset {
    Offset::new().with("pos", n)
}

/// Sets key 0 to position 0 and resets key 1.
fn reset_override(id: &str) -> OnceOverride {
    OnceOverride::new(id, vec![(key(0), Some(pos(0))), (key(1), None)]).unwrap()
}

/// One lifetime: opens a buffer over `store` with `once`, checks what it finds, commits `lifetime`
/// to both keys and closes. Returns how many sealed batches carried the override's marker.
fn lifetime(
    store: Arc<dyn OffsetStore>,
    wal: &Path,
    once: &OnceOverride,
    lifetime: i64,
    want: (Option<Offset>, Option<Offset>),
) -> usize {
    let marked = Arc::new(AtomicUsize::new(0));
    let mut config = CommitBufferConfig::new(wal);
    config.writer = "orders-worker".into();
    config.flush_interval = None;
    config.flush_timeout = std::time::Duration::from_secs(300);
    config.segment_bytes = 4096;
    config.once = Some(once.clone());
    let (m, marker) = (Arc::clone(&marked), marker_key(once.id()));
    config.with_observer(Some(Arc::new(move |b: &Batch| {
        if b.entries.contains_key(&marker) {
            m.fetch_add(1, Ordering::SeqCst);
        }
    })));
    let buffer = CommitBuffer::open(store, config).unwrap();
    assert!(once.is_applied(&**buffer.store()).unwrap());
    assert_eq!(
        (buffer.get(&key(0)).unwrap(), buffer.get(&key(1)).unwrap()),
        want,
        "{}: lifetime {lifetime}, after open",
        buffer.store().kind()
    );
    buffer.offer(key(0), pos(lifetime * 10 + 1)).unwrap();
    buffer.offer(key(1), pos(lifetime * 10 + 2)).unwrap();
    buffer.commit_with(Durability::Store).wait().unwrap();
    buffer.close().unwrap();
    marked.load(Ordering::SeqCst)
}

/// Ten opens with the same override, then one with another id: the first and the last apply it,
/// every open in between finds the commits of the lifetime before.
fn ten_opens(mut open: impl FnMut() -> Arc<dyn OffsetStore>, wal: &Path) {
    let first = reset_override("reset-after-bad-deploy");
    let mut applied = 0;
    for i in 0..10 {
        // The first open applies the override; every later one finds the last lifetime's commit.
        let want = if i == 0 {
            (Some(pos(0)), None)
        } else {
            (Some(pos((i - 1) * 10 + 1)), Some(pos((i - 1) * 10 + 2)))
        };
        applied += lifetime(open(), wal, &first, i, want);
        assert_eq!(
            applied, 1,
            "open {i}: the override was applied {applied} times"
        );
    }
    let second = reset_override("reset-again");
    let want = (Some(pos(0)), None);
    assert_eq!(
        lifetime(open(), wal, &second, 10, want),
        1,
        "a new id applies"
    );
    let store = open();
    let mut config = CommitBufferConfig::new(wal);
    config.writer = "orders-worker".into();
    config.flush_interval = None;
    let buffer = CommitBuffer::open(store, config).unwrap();
    assert_eq!(buffer.get(&key(0)).unwrap(), Some(pos(101)));
    let markers = buffer
        .store()
        .partitions(connect_offsets::once::ONCE_NAMESPACE)
        .unwrap();
    assert_eq!(markers.len(), 2, "{markers:?}");
    buffer.close().unwrap();
}

/// Between the override and the first commit: the override's values are what the store holds.
#[test]
fn the_override_is_in_before_the_first_commit() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = CommitBufferConfig::new(dir.path().join("wal"));
    config.once = Some(reset_override("x"));
    let store: Arc<dyn OffsetStore> = Arc::new(connect_offsets::store::MemoryStore::new());
    let buffer = CommitBuffer::open(store, config).unwrap();
    assert_eq!(buffer.get(&key(0)).unwrap(), Some(pos(0)));
    assert_eq!(buffer.stats().applied_seq, 1);
    buffer.close().unwrap();
}

#[test]
fn ten_opens_memory_store_over_the_log() {
    let dir = tempfile::tempdir().unwrap();
    // A volatile store starts empty in every lifetime: only the log (and its snapshot) brings the
    // override and its marker back.
    let mut opens = 0;
    ten_opens(
        || {
            opens += 1;
            Arc::new(connect_offsets::store::MemoryStore::new())
        },
        &dir.path().join("wal"),
    );
    assert!(dir.path().join("wal").read_dir().unwrap().count() > 0);
    assert_eq!(opens, 12);
}

#[cfg(feature = "rocksdb")]
#[test]
fn ten_opens_rocksdb_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    ten_opens(
        || Arc::new(connect_offsets::store::rocksdb::RocksDbStore::open(&db).unwrap()),
        &dir.path().join("wal"),
    );
}

#[cfg(feature = "kafka")]
use crate::kafka_util;

#[cfg(feature = "kafka")]
fn ten_opens_kafka(params: &str) {
    let topic = kafka_util::TopicGuard::new("once");
    let dir = tempfile::tempdir().unwrap();
    let url = kafka_util::url(&topic, 3, params);
    ten_opens(
        || Arc::from(connect_offsets::open(&url).unwrap()),
        &dir.path().join("wal"),
    );
}

#[cfg(feature = "kafka")]
#[test]
fn ten_opens_kafka_store_transactions() {
    ten_opens_kafka("");
}

#[cfg(feature = "kafka")]
#[test]
fn ten_opens_kafka_store_idempotent() {
    ten_opens_kafka("&write.mode=idempotent");
}

#[test]
fn properties_configure_an_override_and_refuse_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("reset.json");
    std::fs::write(
        &doc,
        r#"{"connectors":{"orders-source":{"offsets":[{"partition":{"table":0},"offset":{"pos":0}},{"partition":{"table":1},"offset":null}]}}}"#,
    )
    .unwrap();
    let mut config = CommitBufferConfig::new(dir.path().join("wal"));
    config.set("offsets.once.id", "reset-1").unwrap();
    config
        .set("offsets.once.file", doc.to_str().unwrap())
        .unwrap();
    assert_eq!(config.once, Some(reset_override("reset-1")));

    let mut c = CommitBufferConfig::new(dir.path().join("wal"));
    let e = c
        .set("offsets.once.id", "bad\u{7}id")
        .unwrap_err()
        .to_string();
    assert!(e.contains("offsets.once.id") && e.contains("U+0007"), "{e}");
    let e = c.set("offsets.once.id", "").unwrap_err().to_string();
    assert!(e.contains("must not be empty"), "{e}");
    let e = c
        .set("offsets.once.file", "/nonexistent/reset.json")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`offsets.once.file`") && e.contains("/nonexistent/reset.json"),
        "{e}"
    );
    std::fs::write(&doc, r#"{"offsets":[]}"#).unwrap();
    let e = c
        .set("offsets.once.file", doc.to_str().unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(r#"expected export's {"connectors":{...}} document"#),
        "{e}"
    );
    std::fs::write(&doc, "{not json").unwrap();
    let e = c
        .set("offsets.once.file", doc.to_str().unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("offsets.once.file") && e.contains("not valid JSON"),
        "{e}"
    );

    // One half without the other is refused at open, before the log is touched.
    c.set("offsets.once.id", "reset-1").unwrap();
    let store: Arc<dyn OffsetStore> = Arc::new(connect_offsets::store::MemoryStore::new());
    let e = CommitBuffer::open(store, c).unwrap_err().to_string();
    assert!(e.contains("needs `offsets.once.file`"), "{e}");
    assert!(!dir.path().join("wal").exists());
}
