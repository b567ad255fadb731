//! The log's frames are frozen: one fixture per frame kind (`tests/fixtures/frames/`), written once
//! by this build's encoder. Each must decode to the batch below and that batch must encode to
//! exactly its bytes, so a change of bincode's encoding, of the payload's layout or of the header
//! fails here before a log written by a released build stops opening.

use std::path::PathBuf;

use connect_offsets::internal::wal::frame::{self, FrameKind};
use connect_offsets::{Batch, Offset, OffsetKey, Partition, Value};

/// Every value tag, a reset, names outside ASCII and a seq past one byte of varint.
fn batch() -> Batch {
    let key = |ns: &str, p: Partition| OffsetKey::new(ns, p);
    let entries: Vec<(OffsetKey, Option<Offset>)> = vec![
        (
            key(
                "orders-source",
                Partition::new()
                    .with("table", "public.orders")
                    .with("shard", 3),
            ),
            Some(
                Offset::new()
                    .with("lsn", 1_234_567_890_123_i64)
                    .with("ts", 1.5)
                    .with("snapshot", true)
                    .with("txid", Value::Null)
                    .with("raw", Value::Bytes(vec![0, 1, 254, 255])),
            ),
        ),
        (
            key("files", Partition::new().with("filename", "/data/ä.txt")),
            Some(Offset::new().with("position", -7)),
        ),
        (
            key("files", Partition::new().with("filename", "/data/gone.txt")),
            None,
        ),
    ];
    Batch::new("fixture-writer", 300, entries)
}

fn fixture(kind: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/frames/v2-{kind}.bin"))
}

fn frozen(kind: FrameKind, name: &str) {
    let mut encoded = Vec::new();
    frame::encode(kind, &batch(), &mut encoded);
    let path = fixture(name);
    if std::env::var_os("FRAME_FIXTURES_WRITE").is_some() && !path.exists() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &encoded).unwrap();
    }
    let bytes = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (a new frame kind's fixture is written once with FRAME_FIXTURES_WRITE=1)",
            path.display()
        )
    });
    let read = frame::decode(&bytes).unwrap();
    assert_eq!(
        (read.kind, &read.batch, read.len),
        (kind, &batch(), bytes.len())
    );
    assert_eq!(
        encoded,
        bytes,
        "{name} frames are no longer encoded as {} holds them",
        path.display()
    );
}

#[test]
fn a_batch_frame_is_frozen() {
    frozen(FrameKind::Batch, "batch");
}

#[test]
fn a_snapshot_frame_is_frozen() {
    frozen(FrameKind::Snapshot, "snapshot");
}
