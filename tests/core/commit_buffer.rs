//! Behaviour of the commit buffer over the crash-simulating file system and over the real one.

use std::sync::Arc;
use std::time::Duration;

use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig, Durability, WhenFull};
use connect_offsets::internal::fs::SimFs;
use connect_offsets::store::{Capabilities, MemoryStore, OffsetStore};
use connect_offsets::{Error, Offset, OffsetKey, Partition};

fn key(i: i64) -> OffsetKey {
    OffsetKey::new("c", Partition::new().with("p", i))
}

fn pos(n: i64) -> Offset {
    Offset::new().with("pos", n)
}

fn sim_config(sim: &SimFs) -> CommitBufferConfig {
    let mut c = CommitBufferConfig::new("/wal");
    c.with_fs(Arc::new(sim.clone()));
    c.flush_interval = None;
    c.dead_letter = None;
    c
}

#[test]
fn offer_commit_get_and_reopen() {
    let sim = SimFs::new();
    let buf = CommitBuffer::open(Arc::new(MemoryStore::new()), sim_config(&sim)).unwrap();
    buf.offer(key(1), pos(1)).unwrap();
    buf.offer(key(1), pos(2)).unwrap();
    buf.offer(key(2), pos(7)).unwrap();
    let seq = buf.commit().wait().unwrap();
    assert_eq!(seq, 1);
    assert_eq!(buf.get(&key(1)).unwrap(), Some(pos(2)), "last write wins");
    buf.offer_reset(key(2)).unwrap();
    assert_eq!(buf.commit_with(Durability::Store).wait().unwrap(), 2);
    assert_eq!(buf.store().get(&key(2)).unwrap(), None);
    assert_eq!(
        buf.commit().wait().unwrap(),
        2,
        "nothing pending: the last batch"
    );
    buf.close().unwrap();
    assert!(matches!(buf.offer(key(3), pos(1)), Err(Error::Closed(_))));
    drop(buf);
    // A memory store forgets; the log brings it back.
    let buf = CommitBuffer::open(Arc::new(MemoryStore::new()), sim_config(&sim)).unwrap();
    assert_eq!(buf.store().get(&key(1)).unwrap(), Some(pos(2)));
    assert_eq!(buf.store().get(&key(2)).unwrap(), None);
    assert_eq!(buf.store().applied_seq("connect-offsets").unwrap(), 2);
    buf.offer(key(3), pos(3)).unwrap();
    assert_eq!(
        buf.commit().wait().unwrap(),
        3,
        "seq continues after recovery"
    );
}

#[test]
fn a_second_opener_is_refused() {
    let sim = SimFs::new();
    let _a = CommitBuffer::open(Arc::new(MemoryStore::new()), sim_config(&sim)).unwrap();
    let e = CommitBuffer::open(Arc::new(MemoryStore::new()), sim_config(&sim)).unwrap_err();
    assert!(matches!(e, Error::Locked { .. }), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let real = CommitBufferConfig::new(dir.path().join("wal"));
    let _b = CommitBuffer::open(Arc::new(MemoryStore::new()), real.clone()).unwrap();
    let e = CommitBuffer::open(Arc::new(MemoryStore::new()), real).unwrap_err();
    assert!(e.to_string().contains("locked"), "{e}");
}

#[test]
fn a_ticket_kept_past_its_buffer_does_not_lock_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let config = CommitBufferConfig::new(dir.path().join("wal"));
    let buf = CommitBuffer::open(Arc::new(MemoryStore::new()), config.clone()).unwrap();
    buf.offer(key(1), pos(1)).unwrap();
    let ticket = buf.commit();
    buf.close().unwrap();
    drop(buf);
    let again = CommitBuffer::open(Arc::new(MemoryStore::new()), config).unwrap();
    assert_eq!(again.store().get(&key(1)).unwrap(), Some(pos(1)));
    assert_eq!(
        ticket.wait().unwrap(),
        1,
        "the ticket still tells its commit"
    );
}

#[test]
fn a_failed_write_merges_back_under_newer_values() {
    let sim = SimFs::new();
    let buf = CommitBuffer::open(Arc::new(MemoryStore::new()), sim_config(&sim)).unwrap();
    buf.offer(key(1), pos(1)).unwrap();
    buf.offer(key(2), pos(1)).unwrap();
    sim.fail_appends(1);
    let e = buf.commit().wait().unwrap_err();
    assert!(e.to_string().contains("No space left"), "{e}");
    // A newer offer for key 1 arrives before the retry: it must win over the merged-back value.
    buf.offer(key(1), pos(5)).unwrap();
    assert_eq!(buf.stats().pending, 2, "both keys pending again");
    let seq = buf.commit_with(Durability::Store).wait().unwrap();
    assert_eq!(
        seq, 1,
        "the failed batch's seq is reused: nothing of it reached the log"
    );
    assert_eq!(buf.store().get(&key(1)).unwrap(), Some(pos(5)));
    assert_eq!(buf.store().get(&key(2)).unwrap(), Some(pos(1)));
    drop(buf);
    let buf = CommitBuffer::open(Arc::new(MemoryStore::new()), sim_config(&sim)).unwrap();
    assert_eq!(
        buf.store().get(&key(1)).unwrap(),
        Some(pos(5)),
        "the torn half-write was cut from the log"
    );
}

#[test]
fn group_commit_one_sync_for_many_committers() {
    let sim = SimFs::new();
    let buf = Arc::new(CommitBuffer::open(Arc::new(MemoryStore::new()), sim_config(&sim)).unwrap());
    let (_, syncs_before) = sim.counts();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let buf = Arc::clone(&buf);
            std::thread::spawn(move || {
                for i in 0..50 {
                    buf.offer(key(t * 1000 + i), pos(i)).unwrap();
                    buf.commit().wait().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let (_, syncs_after) = sim.counts();
    let stats = buf.stats();
    assert_eq!(
        stats.syncs,
        syncs_after - syncs_before,
        "one sync per logged batch, no more"
    );
    assert!(
        stats.syncs <= 400,
        "at most one sync per commit call: {}",
        stats.syncs
    );
    // Every commit's offers are there.
    buf.commit_with(Durability::Store).wait().unwrap();
    assert_eq!(buf.store().partitions("c").unwrap().len(), 400);
}

#[test]
fn full_buffer_rejects_or_blocks() {
    let sim = SimFs::new();
    let mut c = sim_config(&sim);
    c.max_pending = 3;
    c.when_full = WhenFull::Reject;
    let buf = CommitBuffer::open(Arc::new(MemoryStore::new()), c).unwrap();
    for i in 0..3 {
        buf.offer(key(i), pos(i)).unwrap();
    }
    buf.offer(key(0), pos(9)).unwrap(); // an existing key always fits
    let e = buf.offer(key(3), pos(3)).unwrap_err();
    assert!(
        matches!(e, Error::Full(_)) && e.to_string().contains("max_pending"),
        "{e}"
    );
    drop(buf);

    let sim = SimFs::new();
    let mut c = sim_config(&sim);
    c.max_pending = 3;
    let buf = CommitBuffer::open(Arc::new(MemoryStore::new()), c).unwrap();
    for i in 0..100 {
        buf.offer(key(i), pos(i)).unwrap(); // blocks until the log thread seals, never drops
    }
    buf.commit_with(Durability::Store).wait().unwrap();
    assert_eq!(buf.store().partitions("c").unwrap().len(), 100);
}

#[test]
fn automatic_commit_on_the_interval() {
    let sim = SimFs::new();
    let mut c = sim_config(&sim);
    c.set("offset.flush.interval.ms", "50").unwrap();
    let buf = CommitBuffer::open(Arc::new(MemoryStore::new()), c).unwrap();
    buf.offer(key(1), pos(1)).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while buf.store().get(&key(1)).unwrap().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "no automatic commit within 10 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(buf.stats().oldest_pending_age.is_none());
}

#[test]
fn config_properties_by_connect_names() {
    let mut c = CommitBufferConfig::new("/x");
    assert_eq!(
        c.flush_interval,
        Some(Duration::from_secs(60)),
        "Connect's default"
    );
    assert_eq!(c.flush_timeout, Duration::from_secs(5), "Connect's default");
    c.set("offset.flush.timeout.ms", "1234").unwrap();
    assert_eq!(c.flush_timeout, Duration::from_millis(1234));
    let e = c.set("offset.flush.interval.ms", "soon").unwrap_err();
    assert!(
        e.to_string().contains("offset.flush.interval.ms") && e.to_string().contains("integer"),
        "{e}"
    );
    let e = c.set("offset.flush.nope", "1").unwrap_err();
    assert!(e.to_string().contains("unknown property"), "{e}");
}

#[test]
fn async_ticket() {
    let sim = SimFs::new();
    let buf = CommitBuffer::open(Arc::new(MemoryStore::new()), sim_config(&sim)).unwrap();
    buf.offer(key(1), pos(1)).unwrap();
    let ticket = buf.commit_with(Durability::Store);
    // A minimal executor: poll with a thread-unparking waker.
    let seq = block_on(ticket).unwrap();
    assert_eq!(seq, 1);
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park_timeout(Duration::from_millis(100));
    }
}

#[test]
fn memory_log_stays_bounded_under_endless_commits() {
    let sim = SimFs::new();
    let mut c = sim_config(&sim);
    c.segment_bytes = 64 << 10;
    let buf = CommitBuffer::open(Arc::new(MemoryStore::new()), c).unwrap();
    let mut worst = 0f64;
    for round in 0..400 {
        for i in 0..200 {
            buf.offer(key(i), pos(round * 1000 + i)).unwrap();
        }
        buf.commit_with(Durability::Store).wait().unwrap();
        let live: usize = buf
            .store()
            .partitions("c")
            .unwrap()
            .iter()
            .map(|(k, v)| k.connect_key().len() + v.to_json().len())
            .sum();
        let bound = 2 * live as u64 + (64 << 10) + 16 * 1024;
        // The compactor thread writes the snapshot after the commit returns: the log comes
        // back within the bound once it has.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let held = loop {
            let held = sim.dir_bytes(std::path::Path::new("/wal"));
            if held <= bound || std::time::Instant::now() > deadline {
                break held;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        worst = worst.max(held as f64 / bound as f64);
        assert!(
            held <= bound,
            "round {round}: log holds {held} bytes, bound {bound} (live {live})"
        );
    }
    assert!(
        worst > 0.1,
        "the check must be near its bound at some point: {worst}"
    );
}

/// A simulated disk holding a log of three committed batches (offsets 1, 2, 3), all in segment 1.
fn three_commits() -> SimFs {
    let sim = SimFs::new();
    let buf = CommitBuffer::open(Arc::new(MemoryStore::new()), sim_config(&sim)).unwrap();
    for i in 1..=3 {
        buf.offer(key(i), pos(i)).unwrap();
        buf.commit().wait().unwrap();
    }
    sim
}

#[test]
fn corruption_before_the_end_is_refused_or_skipped_to_the_dead_letter_file() {
    use connect_offsets::buffer::RecoveryPolicy;
    let sim = three_commits();
    // Flip a byte inside the payload of the first of the three frames.
    let seg = std::path::Path::new("/wal/00000000000000000001.wal");
    let mut bytes = sim.contents(seg).expect("the first segment");
    bytes[20] ^= 0xFF;
    sim.put(seg, &bytes);
    let e = CommitBuffer::open(Arc::new(MemoryStore::new()), sim_config(&sim)).unwrap_err();
    match &e {
        Error::Corrupted { file, offset, .. } => {
            assert_eq!(file, seg);
            assert_eq!(*offset, 0, "the first frame is the bad one");
        }
        other => panic!("expected Corrupted, got {other}"),
    }
    assert!(e.to_string().contains("checksum"), "{e}");

    // With the skip policy the bad frame goes to the dead-letter file and the rest is replayed.
    let dir = tempfile::tempdir().unwrap();
    let mut c = sim_config(&sim);
    c.recovery = RecoveryPolicy::Skip;
    c.dead_letter = Some(dir.path().join("dead-letter.jsonl"));
    let buf = CommitBuffer::open(Arc::new(MemoryStore::new()), c).unwrap();
    assert_eq!(
        buf.store().get(&key(1)).unwrap(),
        None,
        "the corrupt batch is not applied"
    );
    assert_eq!(buf.store().get(&key(2)).unwrap(), Some(pos(2)));
    assert_eq!(buf.store().get(&key(3)).unwrap(), Some(pos(3)));
    // The dead-letter file goes through the log's file system (here the simulated one).
    let letters = sim.contents(&dir.path().join("dead-letter.jsonl")).unwrap();
    let letters = String::from_utf8(letters).unwrap();
    assert_eq!(letters.lines().count(), 1, "{letters}");
    assert!(
        letters.contains("\"source\":\"wal\"")
            && letters.contains("checksum")
            && letters.contains("bytes_b64"),
        "{letters}"
    );
}

/// A store fault that holds every write, a fixed time (a slow store, as a Kafka transaction is) or
/// until the test opens the gate, and records what each write held: `(seq, entries)`.
#[derive(Debug, Default)]
struct HeldWrites {
    delay: Duration,
    gated: bool,
    open: std::sync::Mutex<bool>,
    opened: std::sync::Condvar,
    writes: std::sync::Mutex<Vec<(u64, usize)>>,
}

impl HeldWrites {
    fn slow(delay: Duration) -> Self {
        HeldWrites {
            delay,
            ..Default::default()
        }
    }

    fn gated() -> Self {
        HeldWrites {
            gated: true,
            ..Default::default()
        }
    }

    fn open_gate(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }

    fn writes(&self) -> Vec<(u64, usize)> {
        self.writes.lock().unwrap().clone()
    }
}

impl connect_offsets::conformance::ApplyFault for HeldWrites {
    fn before_entry(&self, _: &connect_offsets::Batch, _: usize) -> connect_offsets::Result<()> {
        Ok(())
    }
    fn before_commit(&self, batch: &connect_offsets::Batch) -> connect_offsets::Result<()> {
        std::thread::sleep(self.delay);
        if self.gated {
            let open = self.open.lock().unwrap();
            drop(self.opened.wait_while(open, |open| !*open).unwrap());
        }
        self.writes
            .lock()
            .unwrap()
            .push((batch.seq, batch.entries.len()));
        Ok(())
    }
}

#[test]
fn batches_queued_behind_a_slow_store_are_written_together() {
    let sim = SimFs::new();
    let slow = Arc::new(HeldWrites::slow(Duration::from_millis(20)));
    let store = Arc::new(MemoryStore::new().with_fault(slow.clone()));
    let buf = CommitBuffer::open(store.clone(), sim_config(&sim)).unwrap();
    // 60 one-offset commits, acknowledged once logged; key 0 gets every value, so a merged write
    // must carry the newest; key i its own.
    for i in 1..=60 {
        buf.offer(key(0), pos(i)).unwrap();
        buf.offer(key(i), pos(i)).unwrap();
        assert_eq!(buf.commit_with(Durability::Local).wait().unwrap(), i as u64);
    }
    assert_eq!(buf.commit_with(Durability::Store).wait().unwrap(), 60);
    let writes = slow.writes();
    let stats = buf.stats();
    assert_eq!(stats.applied_seq, 60);
    assert_eq!(stats.store_writes as usize, writes.len());
    assert!(
        writes.len() < 60,
        "60 batches queued behind 20 ms writes took {} store writes: {writes:?}",
        writes.len()
    );
    // Seqs strictly increase, and each write holds key 0 plus one key per batch it covers.
    let mut last = 0;
    for &(seq, n) in &writes {
        assert!(seq > last, "{writes:?}");
        assert_eq!(n as u64, 1 + (seq - last), "{writes:?}");
        last = seq;
    }
    assert_eq!(last, 60);
    assert_eq!(store.get(&key(0)).unwrap(), Some(pos(60)));
    for i in 1..=60 {
        assert_eq!(store.get(&key(i)).unwrap(), Some(pos(i)));
    }
    assert_eq!(store.applied_seq(buf.writer()).unwrap(), 60);
    buf.close().unwrap();
}

/// Big commits of the same keys queued behind a store are written once, with their newest values;
/// a commit that would grow the write past the larger of 10,000 keys and its first batch's size
/// waits for a write of its own.
#[test]
fn big_commits_of_the_same_keys_queued_behind_a_store_are_written_once() {
    const N: i64 = 12_000;
    let sim = SimFs::new();
    let gate = Arc::new(HeldWrites::gated());
    let store = Arc::new(MemoryStore::new().with_fault(gate.clone()));
    let buf = CommitBuffer::open(store.clone(), sim_config(&sim)).unwrap();
    // Six commits of every key in 0..N, acknowledged once logged while the store holds the first...
    for round in 1..=6 {
        for i in 0..N {
            buf.offer(key(i), pos(round * N + i)).unwrap();
        }
        assert_eq!(
            buf.commit_with(Durability::Local).wait().unwrap(),
            round as u64
        );
    }
    // ... and one of N other keys, which would double the write.
    for i in N..2 * N {
        buf.offer(key(i), pos(i)).unwrap();
    }
    assert_eq!(buf.commit_with(Durability::Local).wait().unwrap(), 7);
    gate.open_gate();
    assert_eq!(buf.commit_with(Durability::Store).wait().unwrap(), 7);
    let writes = gate.writes();
    let n = N as usize;
    assert_eq!(writes, vec![(1, n), (6, n), (7, n)]);
    assert_eq!(buf.stats().store_writes, 3);
    for i in 0..N {
        assert_eq!(store.get(&key(i)).unwrap(), Some(pos(6 * N + i)), "key {i}");
    }
    for i in N..2 * N {
        assert_eq!(store.get(&key(i)).unwrap(), Some(pos(i)), "key {i}");
    }
    assert_eq!(store.applied_seq(buf.writer()).unwrap(), 7);
    buf.close().unwrap();
}

/// Opening a log removes only its own temporary files (an unfinished snapshot or repair), never an
/// operator's `backup.tmp` that happens to sit in the directory.
#[test]
fn open_removes_only_the_logs_own_temporary_files() {
    let dir = tempfile::tempdir().unwrap();
    let wal = dir.path().join("wal");
    std::fs::create_dir_all(&wal).unwrap();
    let theirs = ["backup.tmp", "offsets.json.tmp", "1.snap.tmp"];
    let ours = [
        "00000000000000000003.snap.tmp",
        "00000000000000000002.wal.repair.tmp",
    ];
    for name in theirs.iter().chain(&ours) {
        std::fs::write(wal.join(name), b"not the log's").unwrap();
    }
    let mut c = CommitBufferConfig::new(&wal);
    c.flush_interval = None;
    let buf = CommitBuffer::open(Arc::new(MemoryStore::new()), c).unwrap();
    buf.close().unwrap();
    for name in theirs {
        assert!(wal.join(name).exists(), "{name} was removed");
    }
    for name in ours {
        assert!(!wal.join(name).exists(), "{name} was left");
    }
}

/// `wal repair` and its dead-letter file go through the log's file system: a power loss right after
/// the repair returns keeps the repaired segment and the quarantined bytes (a repair that skipped a
/// sync would bring the corrupt frame back, and the reopen would refuse it).
#[test]
fn a_repair_survives_a_power_loss_right_after_it() {
    use connect_offsets::internal::dead_letter::DeadLetterFile;
    use connect_offsets::internal::wal::inspect::repair_with;
    let sim = three_commits();
    let seg = std::path::Path::new("/wal/00000000000000000001.wal");
    let mut bytes = sim.contents(seg).expect("the first segment");
    let first = connect_offsets::internal::wal::frame::decode(&bytes)
        .unwrap()
        .len;
    let third = first
        + connect_offsets::internal::wal::frame::decode(&bytes[first..])
            .unwrap()
            .len;
    bytes[third + 24] ^= 0x10; // inside the last frame's payload: rot, not a torn write
    sim.put(seg, &bytes);

    let letters = std::path::Path::new("/wal/dead-letter.jsonl");
    let dl = DeadLetterFile::new(letters).with_fs(Arc::new(sim.clone()));
    let report = repair_with(&sim, std::path::Path::new("/wal"), Some(&dl)).unwrap();
    assert_eq!(report.quarantined.len(), 1, "{report:?}");
    sim.crash();

    let buf = CommitBuffer::open(Arc::new(MemoryStore::new()), sim_config(&sim)).unwrap();
    assert_eq!(buf.get(&key(1)).unwrap(), Some(pos(1)));
    assert_eq!(buf.get(&key(2)).unwrap(), Some(pos(2)));
    assert_eq!(buf.get(&key(3)).unwrap(), None, "the quarantined batch");
    let kept = String::from_utf8(sim.contents(letters).expect("the dead-letter file")).unwrap();
    assert!(kept.contains("removed by wal repair"), "{kept}");
}

/// An offset of `mib` MiB (a string value): a few of them make batches past a log frame's limit.
fn big(mib: usize, n: i64) -> Offset {
    Offset::new().with("blob", format!("{n:08}").repeat(mib << 17))
}

/// A config for batches of hundreds of MiB: on a busy 2-core machine their encoding and checksums
/// can outlast Connect's 5 s flush timeout, and time is not what these tests are about.
fn big_config(sim: &SimFs) -> CommitBufferConfig {
    let mut c = sim_config(sim);
    c.flush_timeout = Duration::from_secs(300);
    c
}

/// A commit whose batch no log frame can hold (over 256 MiB) is refused with an error saying so;
/// nothing acknowledged before it is lost, and later commits go on.
#[test]
fn a_commit_too_large_for_a_log_frame_is_refused_clearly() {
    let sim = SimFs::new();
    let buf = CommitBuffer::open(Arc::new(MemoryStore::new()), big_config(&sim)).unwrap();
    buf.offer(key(0), pos(1)).unwrap();
    buf.commit().wait().unwrap();
    for i in 1..=270 {
        buf.offer(key(i), big(1, i)).unwrap();
    }
    let e = buf.commit().wait().expect_err("a 270 MiB batch");
    let m = e.to_string();
    assert!(
        m.contains("frame limit of 256 MiB") && m.contains("270 offsets"),
        "{m}"
    );
    buf.offer(key(0), pos(2)).unwrap();
    assert_eq!(buf.commit().wait().unwrap(), 2, "the log goes on");
    drop(buf);
    let buf = CommitBuffer::open(Arc::new(MemoryStore::new()), big_config(&sim)).unwrap();
    assert_eq!(buf.store().get(&key(0)).unwrap(), Some(pos(2)));
    assert_eq!(
        buf.store().get(&key(1)).unwrap(),
        None,
        "never acknowledged"
    );
}

/// A compaction stopped by a crash after its snapshot was durable leaves the files the snapshot
/// supersedes; the next open removes them (and reads none of them).
#[test]
fn open_removes_what_a_snapshot_superseded() {
    let dir = tempfile::tempdir().unwrap();
    let wal = dir.path().join("wal");
    let config = || {
        let mut c = CommitBufferConfig::new(&wal);
        c.flush_interval = None;
        c.segment_bytes = 4 << 10;
        c
    };
    let names = |ext: &str| -> Vec<u64> {
        let mut v: Vec<u64> = std::fs::read_dir(&wal)
            .unwrap()
            .filter_map(|e| {
                let name = e.unwrap().file_name().into_string().unwrap();
                name.strip_suffix(ext)?.parse().ok()
            })
            .collect();
        v.sort_unstable();
        v
    };
    let buf = CommitBuffer::open(Arc::new(MemoryStore::new()), config()).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut round = 0;
    // The compactor writes its snapshot after the commit returns.
    while names(".snap").last().is_none_or(|g| *g < 3) {
        assert!(
            std::time::Instant::now() < deadline,
            "no snapshot past segment 3"
        );
        for i in 0..50 {
            buf.offer(key(i), pos(round * 100 + i)).unwrap();
        }
        buf.commit_with(Durability::Store).wait().unwrap();
        round += 1;
        std::thread::sleep(Duration::from_millis(1));
    }
    // A segment's bytes, taken while the buffer runs: a clean close may fold the whole log of a
    // memory store into its snapshot and leave no segment.
    let newest_segment = *names(".wal").last().unwrap();
    let seg_bytes = std::fs::read(wal.join(format!("{newest_segment:020}.wal"))).unwrap();
    buf.close().unwrap();
    drop(buf);
    let snap = *names(".snap").last().unwrap();
    let snap_bytes = std::fs::read(wal.join(format!("{snap:020}.snap"))).unwrap();
    // What the interrupted compaction had not removed yet: an older snapshot and older segments.
    let left = [
        format!("{:020}.snap", snap - 1),
        format!("{:020}.wal", snap - 1),
        format!("{snap:020}.wal"),
    ];
    std::fs::write(wal.join(&left[0]), &snap_bytes).unwrap();
    std::fs::write(wal.join(&left[1]), &seg_bytes).unwrap();
    std::fs::write(wal.join(&left[2]), &seg_bytes).unwrap();
    let buf = CommitBuffer::open(Arc::new(MemoryStore::new()), config()).unwrap();
    for name in &left {
        assert!(!wal.join(name).exists(), "{name} was left");
    }
    // The snapshot read (or one the reopen wrote after it) stays.
    let snaps = names(".snap");
    assert!(
        !snaps.is_empty() && snaps.iter().all(|g| *g >= snap),
        "{snaps:?}"
    );
    assert_eq!(
        buf.store().get(&key(49)).unwrap(),
        Some(pos((round - 1) * 100 + 49))
    );
    assert_eq!(buf.store().partitions("c").unwrap().len(), 50);
}

/// A memory store's state past a frame's limit compacts into a snapshot of several frames, which
/// a reopen reads whole.
#[test]
fn a_memory_state_larger_than_a_frame_compacts_and_reopens() {
    let sim = SimFs::new();
    let config = || {
        let mut c = big_config(&sim);
        c.segment_bytes = 64 << 20;
        c
    };
    let buf = CommitBuffer::open(Arc::new(MemoryStore::new()), config()).unwrap();
    for round in 0..4i64 {
        for i in 0..80 {
            buf.offer(key(round * 100 + i), big(1, i)).unwrap();
        }
        buf.commit_with(Durability::Store).wait().unwrap();
    }
    drop(buf);
    let buf = CommitBuffer::open(Arc::new(MemoryStore::new()), config()).unwrap();
    assert_eq!(buf.store().get(&key(379)).unwrap(), Some(big(1, 79)));
    assert_eq!(buf.store().get(&key(0)).unwrap(), Some(big(1, 0)));
    assert_eq!(buf.store().applied_seq("connect-offsets").unwrap(), 4);
    drop(buf);
    // Reopened once more, from the snapshot the reopen may have written.
    let buf = CommitBuffer::open(Arc::new(MemoryStore::new()), config()).unwrap();
    assert_eq!(buf.store().partitions("c").unwrap().len(), 320);
}

/// RocksDB behind a buffer, with what the buffer asked of it recorded: which batches it encoded
/// ahead (and on which thread), and how each batch was written.
#[cfg(feature = "rocksdb")]
mod encoded_ahead {
    use super::*;
    use connect_offsets::store::rocksdb::RocksDbStore;
    use connect_offsets::store::{CommitHooks, Encoded};
    use connect_offsets::{Batch, Result};
    use std::sync::Mutex;

    #[derive(Debug)]
    struct Recorded {
        inner: RocksDbStore,
        /// `(seq, thread name)` of each `encode_logged`, once it returned.
        encoded: Mutex<Vec<(u64, String)>>,
        /// `(seq, how)` of each write: "encoded" or "entries".
        writes: Mutex<Vec<(u64, &'static str)>>,
    }

    impl Recorded {
        fn new(inner: RocksDbStore) -> Self {
            Recorded {
                inner,
                encoded: Mutex::default(),
                writes: Mutex::default(),
            }
        }
    }

    impl OffsetStore for Recorded {
        fn kind(&self) -> &'static str {
            self.inner.kind()
        }

        fn capabilities(&self) -> Capabilities {
            Capabilities::DEFAULT
                .with_durable(self.inner.capabilities().durable)
                .with_sole_writer(self.inner.capabilities().sole_writer)
        }
        fn apply(&self, batch: &Batch) -> Result<()> {
            self.inner.apply(batch)
        }
        fn applied_seq(&self, writer: &str) -> Result<u64> {
            self.inner.applied_seq(writer)
        }
        fn writers(&self) -> Result<Vec<(String, u64)>> {
            self.inner.writers()
        }
        fn get(&self, key: &OffsetKey) -> Result<Option<Offset>> {
            self.inner.get(key)
        }
        fn partitions(&self, namespace: &str) -> Result<Vec<(OffsetKey, Offset)>> {
            self.inner.partitions(namespace)
        }
        fn namespaces(&self) -> Result<Vec<String>> {
            self.inner.namespaces()
        }
        fn persist(&self) -> Result<()> {
            self.inner.persist()
        }

        fn hooks(&self) -> Option<&dyn CommitHooks> {
            Some(self)
        }
    }

    impl CommitHooks for Recorded {
        fn apply_logged(&self, batch: &Batch) -> Result<()> {
            self.writes.lock().unwrap().push((batch.seq, "entries"));
            self.inner.apply_logged(batch)
        }
        fn encode_logged(&self, batch: &Batch) -> Option<Encoded> {
            let encoded = self.inner.encode_logged(batch);
            let thread = std::thread::current().name().unwrap_or("").to_string();
            self.encoded.lock().unwrap().push((batch.seq, thread));
            encoded
        }
        fn apply_encoded(&self, batch: &Batch, encoded: Encoded) -> Result<()> {
            self.writes.lock().unwrap().push((batch.seq, "encoded"));
            self.inner.apply_encoded(batch, encoded)
        }
    }

    /// Holds every write until the gate opens; with `fail`, fails the first try of batch 2's write
    /// at its fourth entry: with a store error (retried) or, if `fail` is true, a simulated crash.
    #[derive(Debug, Default)]
    struct GateThenFail {
        fail: Option<bool>,
        open: Mutex<bool>,
        opened: std::sync::Condvar,
        failed: std::sync::atomic::AtomicBool,
    }

    impl connect_offsets::conformance::ApplyFault for GateThenFail {
        fn before_entry(&self, batch: &Batch, index: usize) -> Result<()> {
            use std::sync::atomic::Ordering;
            let Some(crash) = self.fail else {
                return Ok(());
            };
            if batch.seq == 2 && index == 3 && !self.failed.swap(true, Ordering::SeqCst) {
                let what = "batch 2's write, at its fourth entry".to_string();
                return Err(if crash {
                    Error::Crashed(what)
                } else {
                    Error::store("rocksdb", what)
                });
            }
            Ok(())
        }
        fn before_commit(&self, _: &Batch) -> Result<()> {
            let open = self.open.lock().unwrap();
            drop(self.opened.wait_while(open, |open| !*open).unwrap());
            Ok(())
        }
    }

    impl GateThenFail {
        fn open_gate(&self) {
            *self.open.lock().unwrap() = true;
            self.opened.notify_all();
        }
    }

    const N: i64 = 500;

    /// Round `r`'s offsets: keys of its own, `(r-1)*N..r*N`, so a batch's write is the only one of
    /// its keys.
    fn round(r: i64) -> impl Iterator<Item = (OffsetKey, Offset)> {
        ((r - 1) * N..r * N).map(move |i| (key(i), pos(r * 10_000 + i)))
    }

    fn holds_rounds(store: &dyn OffsetStore, rounds: std::ops::RangeInclusive<i64>) {
        for r in rounds {
            for (k, v) in round(r) {
                assert_eq!(store.get(&k).unwrap(), Some(v), "round {r}, {k:?}");
            }
        }
    }

    /// Waits up to 120 s (this VM stops for tens of seconds at times) for `done`.
    fn wait_until(what: &str, done: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        while !done() {
            assert!(
                std::time::Instant::now() < deadline,
                "waited 120 s for {what}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    struct Rig {
        fault: Arc<GateThenFail>,
        store: Arc<Recorded>,
        buf: CommitBuffer,
        dir: tempfile::TempDir,
        sim: SimFs,
    }

    /// `rounds` `local` commits while the store holds the first's write; `max_pending`, the
    /// entries the log lets wait for the store.
    fn commits_behind_a_held_write(fail: Option<bool>, rounds: i64, max_pending: usize) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let sim = SimFs::new();
        let fault = Arc::new(GateThenFail {
            fail,
            ..Default::default()
        });
        let rocks = RocksDbStore::open(dir.path())
            .unwrap()
            .with_fault(fault.clone());
        let store = Arc::new(Recorded::new(rocks));
        let mut config = sim_config(&sim);
        config.max_pending = max_pending;
        let buf = CommitBuffer::open(store.clone(), config).unwrap();
        for r in 1..=rounds {
            for (k, v) in round(r) {
                buf.offer(k, v).unwrap();
            }
            assert_eq!(buf.commit_with(Durability::Local).wait().unwrap(), r as u64);
            if r == 1 {
                // The apply thread has taken batch 1 alone, and its write waits at the gate.
                wait_until("batch 1's write to start", || {
                    !store.writes.lock().unwrap().is_empty()
                });
            }
        }
        Rig {
            fault,
            store,
            buf,
            dir,
            sim,
        }
    }

    /// Two commits with room for no third: the second is encoded on the log thread (after its
    /// ack, so this waits for it).
    fn second_encoded_behind_a_held_write(fail: Option<bool>) -> Rig {
        let rig = commits_behind_a_held_write(fail, 2, 2 * N as usize);
        wait_until("batch 2 to be encoded", || {
            !rig.store.encoded.lock().unwrap().is_empty()
        });
        let encoded = rig.store.encoded.lock().unwrap().clone();
        assert_eq!(encoded.len(), 1, "{encoded:?}");
        assert_eq!(encoded[0].0, 2);
        assert!(encoded[0].1.starts_with("offsets-log-"), "{encoded:?}");
        rig
    }

    /// The log thread, with no room to log another batch while the store writes the first, builds
    /// the second's write, and the apply thread writes it as built.
    #[test]
    fn a_batch_logged_with_no_room_left_is_encoded_on_the_log_thread() {
        let rig = second_encoded_behind_a_held_write(None);
        // Rows built from the entries at the write would carry a write time from after the gate.
        std::thread::sleep(Duration::from_millis(100));
        let opened_ms = connect_offsets::internal::time::now_ms();
        rig.fault.open_gate();
        assert_eq!(rig.buf.commit_with(Durability::Store).wait().unwrap(), 2);
        assert_eq!(
            *rig.store.writes.lock().unwrap(),
            vec![(1, "entries"), (2, "encoded")]
        );
        holds_rounds(&*rig.store, 1..=2);
        let keys: Vec<OffsetKey> = round(2).map(|(k, _)| k).collect();
        for (k, t) in keys
            .iter()
            .zip(rig.store.inner.change_times(&keys).unwrap())
        {
            assert!(
                t.unwrap() < opened_ms,
                "{k:?} written at {t:?}, gate at {opened_ms}"
            );
        }
        assert_eq!(rig.store.applied_seq(rig.buf.writer()).unwrap(), 2);
        rig.buf.close().unwrap();
        drop(rig.buf);
        drop(rig.store);
        holds_rounds(&RocksDbStore::open(rig.dir.path()).unwrap(), 1..=2);
    }

    /// With room to log more, no batch is encoded ahead: batches queued behind a write are merged
    /// and written together.
    #[test]
    fn with_room_left_queued_batches_are_merged_not_encoded() {
        let rig = commits_behind_a_held_write(None, 3, 1_000_000);
        // The log thread acks a batch, then hands it to the apply thread: give batch 3's hand-off
        // time to land (a CI run once opened the gate between the two).
        std::thread::sleep(Duration::from_millis(500));
        rig.fault.open_gate();
        assert_eq!(rig.buf.commit_with(Durability::Store).wait().unwrap(), 3);
        assert!(rig.store.encoded.lock().unwrap().is_empty());
        assert_eq!(
            *rig.store.writes.lock().unwrap(),
            vec![(1, "entries"), (3, "entries")]
        );
        holds_rounds(&*rig.store, 1..=3);
        rig.buf.close().unwrap();
    }

    /// A write of an encoded batch that fails is made again from the batch's entries.
    #[test]
    fn a_failed_encoded_write_is_retried_from_the_entries() {
        let rig = second_encoded_behind_a_held_write(Some(false));
        rig.fault.open_gate();
        assert_eq!(rig.buf.commit_with(Durability::Store).wait().unwrap(), 2);
        assert_eq!(
            *rig.store.writes.lock().unwrap(),
            vec![(1, "entries"), (2, "encoded"), (2, "entries")]
        );
        holds_rounds(&*rig.store, 1..=2);
        assert_eq!(rig.store.applied_seq(rig.buf.writer()).unwrap(), 2);
        rig.buf.close().unwrap();
    }

    /// A crash inside the write of an encoded batch leaves none of it in the store, and the
    /// reopened buffer replays it.
    #[test]
    fn a_crash_inside_an_encoded_write_is_recovered_by_the_log() {
        let rig = second_encoded_behind_a_held_write(Some(true));
        rig.fault.open_gate();
        assert!(rig.buf.commit_with(Durability::Store).wait().is_err());
        assert_eq!(
            *rig.store.writes.lock().unwrap(),
            vec![(1, "entries"), (2, "encoded")]
        );
        assert_eq!(rig.store.applied_seq(rig.buf.writer()).unwrap(), 1);
        holds_rounds(&*rig.store, 1..=1);
        for (k, _) in round(2) {
            assert_eq!(rig.store.get(&k).unwrap(), None, "{k:?}");
        }
        drop(rig.buf);
        drop(rig.store);
        let reopened = Arc::new(RocksDbStore::open(rig.dir.path()).unwrap());
        let buf = CommitBuffer::open(reopened.clone(), sim_config(&rig.sim)).unwrap();
        assert_eq!(reopened.applied_seq(buf.writer()).unwrap(), 2);
        holds_rounds(&*reopened, 1..=2);
        buf.close().unwrap();
    }
}

/// A store whose `apply` panics at one seq.
#[derive(Debug)]
struct PanicsAt {
    inner: MemoryStore,
    seq: u64,
}

impl OffsetStore for PanicsAt {
    fn kind(&self) -> &'static str {
        "panics-at"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::DEFAULT.with_durable(false)
    }
    fn apply(&self, batch: &connect_offsets::Batch) -> connect_offsets::Result<()> {
        assert!(batch.seq != self.seq, "the store broke at seq {}", self.seq);
        self.inner.apply(batch)
    }
    fn applied_seq(&self, writer: &str) -> connect_offsets::Result<u64> {
        self.inner.applied_seq(writer)
    }
    fn writers(&self) -> connect_offsets::Result<Vec<(String, u64)>> {
        self.inner.writers()
    }
    fn get(&self, key: &OffsetKey) -> connect_offsets::Result<Option<Offset>> {
        self.inner.get(key)
    }
    fn partitions(&self, namespace: &str) -> connect_offsets::Result<Vec<(OffsetKey, Offset)>> {
        self.inner.partitions(namespace)
    }
    fn namespaces(&self) -> connect_offsets::Result<Vec<String>> {
        self.inner.namespaces()
    }
    fn persist(&self) -> connect_offsets::Result<()> {
        Ok(())
    }
}

/// A panic in a buffer thread fails the commits waiting on it at once, with its message, and the
/// commits the log acknowledged come back at the next open.
#[test]
fn a_panic_in_the_apply_thread_fails_commits_with_its_message() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = CommitBufferConfig::new(dir.path().join("wal"));
    config.flush_interval = None;
    config.flush_timeout = Duration::from_secs(60);
    let store = PanicsAt {
        inner: MemoryStore::new(),
        seq: 2,
    };
    let buf = CommitBuffer::open(Arc::new(store), config.clone()).unwrap();
    buf.offer(key(1), pos(1)).unwrap();
    assert_eq!(buf.commit_with(Durability::Store).wait().unwrap(), 1);
    buf.offer(key(2), pos(2)).unwrap();
    let started = std::time::Instant::now();
    let e = buf
        .commit_with(Durability::Store)
        .wait()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("apply thread") && e.contains("the store broke at seq 2"),
        "{e}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "waited for the timeout"
    );
    assert!(
        buf.offer(key(3), pos(3)).is_err(),
        "offers after it are refused"
    );
    drop(buf);
    let buf = CommitBuffer::open(Arc::new(MemoryStore::new()), config).unwrap();
    assert_eq!(
        buf.store().get(&key(2)).unwrap(),
        Some(pos(2)),
        "logged, so replayed"
    );
}
