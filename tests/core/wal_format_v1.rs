//! Logs written by a build before the header checksum (frame version 1, kept in
//! `tests/fixtures/wal-v1/`, made by the commit buffer of commit bbfc4d1) still open, replay every
//! batch, and take new (version 2) frames after their own.

use std::path::Path;
use std::sync::Arc;

use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig, Durability};
use connect_offsets::internal::wal::inspect::scan;
use connect_offsets::store::MemoryStore;
use connect_offsets::{Offset, OffsetKey, Partition};

fn copy_fixture(name: &str, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/wal-v1")
        .join(name);
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

fn open(dir: &Path) -> CommitBuffer {
    let mut c = CommitBufferConfig::new(dir);
    c.writer = "fixture-writer".into();
    c.flush_interval = None;
    CommitBuffer::open(Arc::new(MemoryStore::new()), c).unwrap()
}

fn orders(shard: i64) -> OffsetKey {
    OffsetKey::new(
        "orders-source",
        Partition::new()
            .with("table", "public.orders")
            .with("shard", shard),
    )
}

fn file(name: &str) -> OffsetKey {
    OffsetKey::new("files", Partition::new().with("filename", name))
}

/// What the fixture's six batches leave (batch n: orders shard n % 2 at lsn n*1000, ts 1.5n; the
/// file at position 10n; batch 4 also resets a file that never had an offset).
fn check_fixture_state(buf: &CommitBuffer) {
    assert_eq!(buf.stats().applied_seq, 6);
    assert_eq!(
        buf.get(&orders(0)).unwrap(),
        Some(Offset::new().with("lsn", 6000).with("ts", 9.0))
    );
    assert_eq!(
        buf.get(&orders(1)).unwrap(),
        Some(Offset::new().with("lsn", 5000).with("ts", 7.5))
    );
    assert_eq!(
        buf.get(&file("/data/ä.txt")).unwrap(),
        Some(Offset::new().with("position", 60))
    );
    assert_eq!(buf.get(&file("/data/gone.txt")).unwrap(), None);
}

#[test]
fn a_version_1_log_opens_and_takes_new_frames() {
    for fixture in ["segments", "snapshot"] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("wal");
        copy_fixture(fixture, &dir);
        let scanned = scan(&dir).unwrap();
        assert!(
            scanned.corrupt().is_empty() && scanned.torn().is_none(),
            "{fixture}: {scanned:?}"
        );
        {
            let buf = open(&dir);
            check_fixture_state(&buf);
            buf.offer(orders(2), Offset::new().with("lsn", 7000))
                .unwrap();
            assert_eq!(buf.commit_with(Durability::Local).wait().unwrap(), 7);
            drop(buf);
        }
        let buf = open(&dir);
        assert_eq!(buf.stats().applied_seq, 7, "{fixture}");
        assert_eq!(
            buf.get(&orders(2)).unwrap(),
            Some(Offset::new().with("lsn", 7000))
        );
        assert_eq!(
            buf.get(&orders(0)).unwrap(),
            Some(Offset::new().with("lsn", 6000).with("ts", 9.0))
        );
    }
}
