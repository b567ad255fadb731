//! One bit flipped anywhere in a log never loses an acknowledged batch silently: recovery through the
//! real `CommitBuffer` either keeps every batch or refuses with `Corrupted { file, offset }` naming the
//! damaged frame, and `wal inspect` classifies the bytes the same way. Every bit of every frame
//! header and a sample of payload bits, over logs of several segments, on the memory store (nothing
//! applied yet) and on RocksDB (the first batches applied, the rest only logged).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig};
use connect_offsets::internal::fs::SimFs;
use connect_offsets::internal::wal::frame::{self, FrameKind, HEADER_LEN};
use connect_offsets::internal::wal::inspect::{FrameStatus, scan_segment};
use connect_offsets::internal::wal::{RecoveryPolicy, WalDir};
use connect_offsets::store::{MemoryStore, OffsetStore};
use connect_offsets::{Batch, Error, Offset, OffsetKey, Partition};

const WRITER: &str = "connect-offsets";
const BATCHES: u64 = 9;
const PER_SEGMENT: u64 = 3;

/// A log written by the log writer: its files and where each frame is.
struct Log {
    files: Vec<(PathBuf, Vec<u8>)>,
    /// `(file index, offset, length)` of every frame, in log order.
    frames: Vec<(usize, usize, usize)>,
    batches: Vec<Batch>,
}

fn key(i: u64) -> OffsetKey {
    OffsetKey::new(
        "orders",
        Partition::new()
            .with("table", format!("t{}", i % 4))
            .with("shard", (i % 2) as i64),
    )
}

fn batch(seq: u64) -> Batch {
    Batch::new(
        WRITER,
        seq,
        [
            (
                key(seq),
                Some(
                    Offset::new()
                        .with("lsn", (seq * 1000) as i64)
                        .with("ok", true),
                ),
            ),
            (
                key(seq + 1),
                Some(Offset::new().with("lsn", (seq * 1000 + 1) as i64)),
            ),
        ],
    )
}

/// Nine batches, three to a segment, then (when `trailing_empty`) the empty segment a reopen leaves.
fn write_log(trailing_empty: bool) -> Log {
    let sim = SimFs::new();
    let dir = Path::new("/wal");
    let batches: Vec<Batch> = (1..=BATCHES).map(batch).collect();
    {
        let (wal, _) = WalDir::open(Arc::new(sim.clone()), dir, None, RecoveryPolicy::Fail, None)
            .expect("a new log");
        let mut w = wal.new_segment().expect("a segment");
        for b in &batches {
            let mut bytes = Vec::new();
            frame::encode(FrameKind::Batch, b, &mut bytes);
            w.append(&bytes, b.seq).expect("append");
            if b.seq.is_multiple_of(PER_SEGMENT) && (b.seq < BATCHES || trailing_empty) {
                w.rotate().expect("rotate");
            }
        }
    }
    let mut files = Vec::new();
    let mut frames = Vec::new();
    for g in 1..=(BATCHES / PER_SEGMENT + u64::from(trailing_empty)) {
        let path = dir.join(format!("{g:020}.wal"));
        let bytes = sim.contents(&path).expect("a segment file");
        let mut pos = 0;
        while pos < bytes.len() {
            let f = frame::decode(&bytes[pos..]).expect("an intact frame");
            frames.push((files.len(), pos, f.len));
            pos += f.len;
        }
        files.push((path, bytes));
    }
    assert_eq!(frames.len() as u64, BATCHES);
    Log {
        files,
        frames,
        batches,
    }
}

fn config(sim: &SimFs) -> CommitBufferConfig {
    let mut c = CommitBufferConfig::new("/wal");
    c.with_fs(Arc::new(sim.clone()));
    c.flush_interval = None;
    c.dead_letter = None;
    c
}

/// The store's content after every batch.
fn expected(log: &Log) -> Vec<(OffsetKey, Option<Offset>)> {
    let mut model = std::collections::BTreeMap::new();
    for b in &log.batches {
        for (k, v) in &b.entries {
            model.insert(k.clone(), v.clone());
        }
    }
    model.into_iter().collect()
}

/// Flips each chosen bit of the log in turn and reopens it over a store made by `store` (which holds
/// batches `1..=applied`). Returns how many flips were refused.
fn sweep(log: &Log, applied: u64, store: &dyn Fn() -> Arc<dyn OffsetStore>) -> usize {
    let want = expected(log);
    let newest = log.files.len() - 1;
    let mut shared = store();
    let mut refused = 0;
    let mut flips = 0;
    for (n, &(fi, start, len)) in log.frames.iter().enumerate() {
        // Every header bit; in the payload one bit of every fifth byte, the bit moving along.
        let header = (0..HEADER_LEN * 8).map(|bit| (start + bit / 8, bit % 8));
        let payload = (start + HEADER_LEN..start + len)
            .step_by(5)
            .map(|at| (at, at % 8));
        for (at, bit) in header.chain(payload) {
            flips += 1;
            let sim = SimFs::new();
            for (i, (path, bytes)) in log.files.iter().enumerate() {
                let mut bytes = bytes.clone();
                if i == fi {
                    bytes[at] ^= 1 << bit;
                }
                sim.put(path, &bytes);
            }
            let path = &log.files[fi].0;
            let flipped = sim.contents(path).expect("the flipped file");
            let inspected = scan_segment(path, &flipped, fi == newest);
            let what = format!("frame {n} (seq {}), byte {} bit {bit}", n + 1, at - start);
            match CommitBuffer::open(Arc::clone(&shared), config(&sim)) {
                Ok(buf) => {
                    // Kept: then every batch must be there.
                    assert_eq!(buf.stats().applied_seq, BATCHES, "{what}: reopened short");
                    for (k, v) in &want {
                        assert_eq!(&buf.get(k).unwrap(), v, "{what}: {k:?}");
                    }
                    buf.close().unwrap();
                    shared = store();
                }
                Err(Error::Corrupted {
                    file,
                    offset,
                    reason,
                }) => {
                    refused += 1;
                    assert_eq!(&file, path, "{what}: {reason}");
                    assert_eq!(offset as usize, start, "{what}: {reason}");
                    assert!(
                        inspected.iter().any(|f| f.offset as usize == start
                            && matches!(f.status, FrameStatus::Corrupt(_))),
                        "{what}: recovery refused, inspect says {inspected:?}"
                    );
                    assert!(
                        !inspected
                            .iter()
                            .any(|f| matches!(f.status, FrameStatus::Torn(_))),
                        "{what}: inspect calls rot torn: {inspected:?}"
                    );
                    assert_eq!(
                        shared.applied_seq(WRITER).unwrap(),
                        applied,
                        "{what}: a refused recovery changed the store"
                    );
                }
                Err(e) => panic!("{what}: neither kept nor Corrupted: {e}"),
            }
        }
    }
    assert!(flips > BATCHES as usize * HEADER_LEN * 8);
    refused
}

fn memory() -> Arc<dyn OffsetStore> {
    Arc::new(MemoryStore::new())
}

#[test]
fn every_header_bit_and_sampled_payload_bits_on_memory() {
    for trailing_empty in [false, true] {
        let log = write_log(trailing_empty);
        let refused = sweep(&log, 0, &memory);
        assert!(refused > 0);
    }
}

#[cfg(feature = "rocksdb")]
#[test]
fn every_header_bit_and_sampled_payload_bits_on_rocksdb() {
    use connect_offsets::store::rocksdb::RocksDbStore;
    let log = write_log(false);
    let applied = 4;
    let dirs = std::cell::RefCell::new(Vec::new());
    let store = || -> Arc<dyn OffsetStore> {
        let dir = tempfile::tempdir().unwrap();
        let s = RocksDbStore::open(dir.path()).unwrap();
        for b in &log.batches[..applied as usize] {
            s.apply(b).unwrap();
        }
        dirs.borrow_mut().push(dir);
        Arc::new(s)
    };
    sweep(&log, applied, &store);
}

/// The torn writes recovery must still cut: every cut of the last frame reopens with the batches
/// before it (the cut one was never synced, so never acknowledged).
#[test]
fn every_cut_of_the_last_frame_is_a_torn_tail() {
    let log = write_log(false);
    let &(fi, start, len) = log.frames.last().unwrap();
    for cut in start + 1..start + len {
        let sim = SimFs::new();
        for (i, (path, bytes)) in log.files.iter().enumerate() {
            sim.put(path, if i == fi { &bytes[..cut] } else { bytes });
        }
        let buf = CommitBuffer::open(memory(), config(&sim))
            .unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        assert_eq!(buf.stats().applied_seq, BATCHES - 1, "cut at {cut}");
        drop(buf);
        let again = CommitBuffer::open(memory(), config(&sim)).unwrap();
        assert_eq!(
            again.stats().applied_seq,
            BATCHES - 1,
            "cut at {cut}, reopened"
        );
    }
}

/// A segment followed by another, even an empty one (every open and rotation starts one), was
/// synced whole before it: a cut in it is rot, refused, not a torn write to cut.
#[test]
fn a_cut_segment_before_an_empty_newest_one_is_refused() {
    let log = write_log(true);
    let &(fi, start, len) = log.frames.last().unwrap();
    assert!(log.files[fi + 1].1.is_empty(), "an empty newest segment");
    for cut in [start + 1, start + 10, start + len / 2, start + len - 1] {
        let sim = SimFs::new();
        for (i, (path, bytes)) in log.files.iter().enumerate() {
            sim.put(path, if i == fi { &bytes[..cut] } else { bytes });
        }
        match CommitBuffer::open(memory(), config(&sim)) {
            Err(Error::Corrupted { file, offset, .. }) => {
                assert_eq!(file, log.files[fi].0, "cut at {cut}");
                assert_eq!(offset as usize, start, "cut at {cut}");
            }
            Ok(buf) => panic!(
                "cut at {cut}: reopened with applied_seq {}",
                buf.stats().applied_seq
            ),
            Err(e) => panic!("cut at {cut}: expected Corrupted, got {e}"),
        }
        let inspected = scan_segment(&log.files[fi].0, &log.files[fi].1[..cut], false);
        assert!(
            matches!(inspected.last().unwrap().status, FrameStatus::Corrupt(_)),
            "cut at {cut}: {inspected:?}"
        );
    }
}

/// The report that found the defect: 11 acknowledged commits on `memory://` with real files, one bit
/// of the length field of frame 6 flipped so that it points past the end of the segment. The reopen
/// used to cut frames 6..11 as a torn tail and come back with `applied_seq = 5`.
#[test]
fn a_rotted_length_in_the_newest_segment_is_refused_not_cut() {
    let dir = tempfile::tempdir().unwrap();
    let wal = dir.path().join("wal");
    let conf = || {
        let mut c = CommitBufferConfig::new(&wal);
        c.flush_interval = None;
        c
    };
    {
        let buf = CommitBuffer::open(memory(), conf()).unwrap();
        for i in 1..=11u64 {
            buf.offer(key(i), Offset::new().with("lsn", i as i64))
                .unwrap();
            assert_eq!(buf.commit().wait().unwrap(), i);
        }
        // Dropped, not closed, as the report's process ended: a clean close folds a memory
        // store's log into a snapshot, and the segment under test would be gone.
        drop(buf);
    }
    let seg = wal.join(format!("{:020}.wal", 1));
    let mut bytes = std::fs::read(&seg).unwrap();
    let mut starts = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        starts.push(pos);
        pos += frame::decode(&bytes[pos..]).unwrap().len;
    }
    assert_eq!(starts.len(), 11);
    let sixth = starts[5];
    bytes[sixth + 10] ^= 1 << 3; // the length's third byte: +512 KiB, past the end
    std::fs::write(&seg, &bytes).unwrap();
    match CommitBuffer::open(memory(), conf()) {
        Err(Error::Corrupted { file, offset, .. }) => {
            assert_eq!(file, seg);
            assert_eq!(offset as usize, sixth);
        }
        Ok(buf) => panic!(
            "reopened with applied_seq {} instead of refusing",
            buf.stats().applied_seq
        ),
        Err(e) => panic!("expected Corrupted, got {e}"),
    }
    assert_eq!(
        std::fs::read(&seg).unwrap(),
        bytes,
        "a refused recovery cut nothing"
    );
}

/// The same promise for the memory store's snapshot (the whole store as of a segment): every header
/// bit and sampled payload bits of a snapshot written by the commit buffer's compaction.
#[test]
fn every_header_bit_and_sampled_payload_bits_of_a_snapshot() {
    let sim = SimFs::new();
    let mut c = config(&sim);
    c.segment_bytes = 200;
    let mut want = Vec::new();
    {
        let buf = CommitBuffer::open(memory(), c.clone()).unwrap();
        for seq in 1..=12u64 {
            let b = batch(seq);
            for (k, v) in &b.entries {
                buf.offer(k.clone(), v.clone().unwrap()).unwrap();
            }
            buf.commit_with(connect_offsets::buffer::Durability::Store)
                .wait()
                .unwrap();
        }
        for i in 0..16 {
            want.push((key(i), buf.get(&key(i)).unwrap()));
        }
        buf.close().unwrap();
    }
    let dir = Path::new("/wal");
    let names = connect_offsets::internal::fs::WalFs::list(&sim, dir).unwrap();
    let snap = names
        .iter()
        .find(|n| n.ends_with(".snap"))
        .map(|n| dir.join(n))
        .expect("compaction wrote a snapshot");
    let pristine = sim.contents(&snap).unwrap();
    let header = (0..HEADER_LEN * 8).map(|bit| (bit / 8, bit % 8));
    let payload = (HEADER_LEN..pristine.len())
        .step_by(3)
        .map(|at| (at, at % 8));
    let mut refused = 0;
    for (at, bit) in header.chain(payload) {
        let mut bytes = pristine.clone();
        bytes[at] ^= 1 << bit;
        sim.put(&snap, &bytes);
        match CommitBuffer::open(memory(), c.clone()) {
            Ok(buf) => {
                for (k, v) in &want {
                    assert_eq!(&buf.get(k).unwrap(), v, "byte {at} bit {bit}: {k:?}");
                }
                buf.close().unwrap();
            }
            Err(Error::Corrupted { file, offset, .. }) => {
                refused += 1;
                assert_eq!((file, offset), (snap.clone(), 0), "byte {at} bit {bit}");
            }
            Err(e) => panic!("byte {at} bit {bit}: neither kept nor Corrupted: {e}"),
        }
    }
    sim.put(&snap, &pristine);
    assert!(refused > HEADER_LEN * 8);
}
