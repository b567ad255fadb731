//! A real crash test: a child process commits continuously through the commit buffer and prints each
//! acknowledged seq; the parent SIGKILLs it at a random moment, recovers the log itself, and checks
//! the four invariants against what the child printed. `CRASH_CYCLES` sets the cycles per backend
//! (default 50; `KAFKA_CRASH_CYCLES` for Kafka, default 30).
//!
//! The child is this same test binary, re-run with `SIGKILL_CHILD` set (see `child_entry`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig, Durability};
use connect_offsets::store::{Capabilities, OffsetStore, OffsetStoreExt};
use connect_offsets::{Batch, Offset, OffsetKey, Partition};

const KEYS: u64 = 500;
const WRITER: &str = "sigkill";
/// How long a child may take to acknowledge its first commit, on a machine as busy as any.
const FIRST_ACK_WITHIN: Duration = Duration::from_secs(120);

fn key(i: u64) -> OffsetKey {
    OffsetKey::new(
        format!("conn-{}", i % 3),
        Partition::new().with("p", i as i64),
    )
}

/// The entries of batch `seq`: a deterministic function of the seq, so the parent can rebuild the
/// state after any prefix of batches without asking the dead child.
fn batch_entries(seq: u64) -> Vec<(OffsetKey, Option<Offset>)> {
    let n = 1 + seq % 40;
    let mut out: Vec<_> = (0..n)
        .map(|j| {
            (
                key((seq * 7 + j * 13) % KEYS),
                Some(Offset::new().with("seq", seq as i64)),
            )
        })
        .collect();
    if seq.is_multiple_of(5) {
        out.push((key((seq * 31) % KEYS), None));
    }
    out
}

/// The connectors' offsets of `all`, without the crate's own records (the buffer's record of its
/// log, in a reserved namespace).
fn offsets(all: &[(OffsetKey, Offset)]) -> BTreeMap<Vec<u8>, Offset> {
    all.iter()
        .filter(|(k, _)| {
            !connect_offsets::internal::namespaces::is_reserved_namespace(k.namespace())
        })
        .map(|(k, v)| (k.id().to_vec(), v.clone()))
        .collect()
}

fn expected_state(upto: u64) -> BTreeMap<Vec<u8>, Offset> {
    let mut state = BTreeMap::new();
    for s in 1..=upto {
        for (k, v) in batch_entries(s) {
            match v {
                Some(v) => state.insert(k.id().to_vec(), v),
                None => state.remove(k.id()),
            };
        }
    }
    state
}

/// As a process running a commit buffer opens its store: claiming its writer.
fn open_store(url: &str) -> Arc<dyn OffsetStore> {
    Arc::from(connect_offsets::open_for_writer(url, WRITER).expect("open store"))
}

fn config(wal: &std::path::Path) -> CommitBufferConfig {
    let mut c = CommitBufferConfig::new(wal);
    c.writer = WRITER.into();
    c.flush_interval = None;
    c.segment_bytes = 32 << 10; // rotate (release / compact) often
    c
}

/// The child: commits batch after batch and prints `ack <seq>` once each is acknowledged.
#[test]
fn child_entry() {
    let (Ok(url), Ok(wal)) = (std::env::var("SIGKILL_CHILD"), std::env::var("SIGKILL_WAL")) else {
        return; // Not a child: nothing to do.
    };
    let store = open_store(&url);
    let mut config = config(std::path::Path::new(&wal));
    if let Some(max) = std::env::var("SIGKILL_MAX_PENDING")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        config.max_pending = max;
    }
    let buffer = CommitBuffer::open(store, config).expect("child open");
    let mut seq = buffer.stats().logged_seq;
    let mut out = std::io::stdout().lock();
    use std::io::Write as _;
    loop {
        seq += 1;
        for (k, v) in batch_entries(seq) {
            match v {
                Some(v) => buffer.offer(k, v).expect("offer"),
                None => buffer.offer_reset(k).expect("offer reset"),
            }
        }
        let d = if seq.is_multiple_of(2) {
            Durability::Store
        } else {
            Durability::Local
        };
        let acked = buffer.commit_with(d).wait().expect("commit");
        assert_eq!(acked, seq, "one commit per batch");
        writeln!(out, "ack {seq}").expect("stdout");
        out.flush().expect("stdout");
    }
}

/// Counts every effective apply, to check that recovery replays each missing batch exactly once.
#[derive(Debug)]
struct Counting {
    inner: Arc<dyn OffsetStore>,
    applied: Mutex<Vec<u64>>,
}

impl OffsetStore for Counting {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::DEFAULT.with_durable(self.inner.capabilities().durable)
    }
    fn apply(&self, b: &Batch) -> connect_offsets::Result<()> {
        if b.seq == 0 {
            // The buffer's record of its log (buffer::register), no batch of the writer's.
            return self.inner.apply(b);
        }
        let before = self.inner.applied_seq(&b.writer)?;
        assert!(
            b.seq > before,
            "recovery sent batch {} though the store already holds {before}",
            b.seq
        );
        self.inner.apply(b)?;
        self.applied.lock().unwrap().push(b.seq);
        Ok(())
    }
    fn applied_seq(&self, w: &str) -> connect_offsets::Result<u64> {
        self.inner.applied_seq(w)
    }
    fn writers(&self) -> connect_offsets::Result<Vec<(String, u64)>> {
        self.inner.writers()
    }
    fn get(&self, k: &OffsetKey) -> connect_offsets::Result<Option<Offset>> {
        self.inner.get(k)
    }
    fn partitions(&self, ns: &str) -> connect_offsets::Result<Vec<(OffsetKey, Offset)>> {
        self.inner.partitions(ns)
    }
    fn namespaces(&self) -> connect_offsets::Result<Vec<String>> {
        self.inner.namespaces()
    }
    fn persist(&self) -> connect_offsets::Result<()> {
        self.inner.persist()
    }
}

fn cycles_for(url: &str) -> u32 {
    let (var, default) = if url.starts_with("kafka://") {
        ("KAFKA_CRASH_CYCLES", 30)
    } else {
        ("CRASH_CYCLES", 50)
    };
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs the kill/recover cycles against the store at `url` (a durable store keeps its data between
/// cycles; the memory store starts empty in each process and is rebuilt from the log alone).
fn kill_cycles(url: &str) {
    kill_cycles_with(url, None);
}

/// [`kill_cycles`] with the child's buffer letting at most `max_pending` entries wait for the store.
fn kill_cycles_with(url: &str, max_pending: Option<usize>) {
    let dir = tempfile::tempdir().unwrap();
    let wal = dir.path().join("wal");
    let exe = std::env::current_exe().unwrap();
    let mut recovered_before = 0u64;
    let mut acked_total = 0u64;
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let started = Instant::now();
    let cycles = cycles_for(url);
    for cycle in 0..cycles {
        let mut child = Command::new(&exe);
        child
            .args([
                "--exact",
                "sigkill::child_entry",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("SIGKILL_CHILD", url)
            .env("SIGKILL_WAL", &wal);
        if let Some(max) = max_pending {
            child.env("SIGKILL_MAX_PENDING", max.to_string());
        }
        let mut child = child
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let acks = Arc::new(Mutex::new(Vec::<u64>::new()));
        let reader = {
            let acks = Arc::clone(&acks);
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if let Some(seq) = line
                        .strip_prefix("ack ")
                        .and_then(|s| s.trim().parse().ok())
                    {
                        acks.lock().unwrap().push(seq);
                    }
                }
            })
        };
        // Let it get going (open, recover, a first commit), then kill it at a random moment: timed
        // from its first acknowledgement, which a busy machine may take far longer to reach.
        let t0 = Instant::now();
        while acks.lock().unwrap().is_empty() && t0.elapsed() < FIRST_ACK_WITHIN {
            std::thread::sleep(Duration::from_millis(2));
        }
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        std::thread::sleep(Duration::from_micros(rng % 150_000));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        reader.join().unwrap();
        let acks = acks.lock().unwrap().clone();
        assert!(
            !acks.is_empty(),
            "cycle {cycle}: the child acknowledged nothing in {FIRST_ACK_WITHIN:?}"
        );
        let acked = *acks.iter().max().unwrap();
        acked_total += acks.len() as u64;

        // Recover as the next process would, and check. On Kafka the open fences the killed
        // process, whose transaction is likely open: waiting for the brokers to abort it would
        // take the URL's transaction.timeout.ms (600 s), far beyond any stall of this machine.
        let opening = Instant::now();
        let inner = open_store(url);
        assert!(
            opening.elapsed() < Duration::from_secs(120),
            "cycle {cycle}: the open took {:?}: it waited for the killed process's transaction \
             instead of fencing it",
            opening.elapsed()
        );
        let before = inner.applied_seq(WRITER).unwrap();
        let store = Arc::new(Counting {
            inner,
            applied: Mutex::new(Vec::new()),
        });
        let buffer = CommitBuffer::open(store.clone(), config(&wal)).unwrap();
        let k = store.applied_seq(WRITER).unwrap();
        assert!(
            k >= acked,
            "cycle {cycle}: no loss broken: seq {acked} was acknowledged, the store recovered to {k}"
        );
        assert!(
            k >= recovered_before,
            "cycle {cycle}: regression: recovered to {k} after {recovered_before}"
        );
        let replayed = store.applied.lock().unwrap().clone();
        let want: Vec<u64> = (before + 1..=k).collect();
        if store.capabilities().durable {
            assert_eq!(
                replayed, want,
                "cycle {cycle}: each missing batch replayed once, in order"
            );
        }
        let state = offsets(&store.all().unwrap());
        assert!(
            state == expected_state(k),
            "cycle {cycle}: the store is not the state after batches 1..={k}"
        );
        recovered_before = k;
        buffer.close().unwrap();
    }
    println!(
        "{url} (max_pending {max_pending:?}): {} SIGKILL cycles survived, {acked_total} acknowledged commits, last seq {recovered_before}, {:.1} s",
        cycles,
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn sigkill_memory_store() {
    kill_cycles("memory://");
}

#[cfg(feature = "rocksdb")]
#[test]
fn sigkill_rocksdb_store() {
    let dir = tempfile::tempdir().unwrap();
    kill_cycles(&format!("rocksdb://{}", dir.path().join("db").display()));
}

/// The same with room for about two batches in flight: the log waits for RocksDB, and builds the
/// write of the batch behind the one being written (`CommitHooks::encode_logged`). (Above the
/// largest batch, 41 entries: a full pending map would be sealed before its commit.)
#[cfg(feature = "rocksdb")]
#[test]
fn sigkill_rocksdb_store_with_little_room() {
    let dir = tempfile::tempdir().unwrap();
    kill_cycles_with(
        &format!("rocksdb://{}", dir.path().join("db").display()),
        Some(48),
    );
}

#[cfg(feature = "kafka")]
use crate::kafka_util;

/// The same cycles over Kafka Connect's offsets topic on the real broker. The URL claims the writer
/// (`writer=`), so each new process fences the killed one and settles its open transaction.
#[cfg(feature = "kafka")]
#[test]
fn sigkill_kafka_store() {
    let topic = kafka_util::TopicGuard::new("sigkill");
    kill_cycles(&kafka_util::url(&topic.0, 3, &format!("&writer={WRITER}")));
}

/// The same over `write.mode=idempotent`: a kill mid-batch leaves part of it in the topic, which
/// the next process's recovery completes.
#[cfg(feature = "kafka")]
#[test]
fn sigkill_kafka_store_idempotent() {
    let topic = kafka_util::TopicGuard::new("sigkill-idem");
    kill_cycles(&kafka_util::url(
        &topic.0,
        3,
        &format!("&writer={WRITER}&write.mode=idempotent"),
    ));
}

/// The same with `snapshot.dir`: every process but the first opens warm, from the snapshot the
/// last checking store wrote at its close, and reads on from there what the killed ones wrote.
/// The URL names no writer: `open_for_writer` claims the buffer's, so that each process fences
/// the killed one at open (else its open would wait for the killed one's transaction until the
/// broker's `transaction.timeout.ms`).
#[cfg(feature = "kafka")]
#[test]
fn sigkill_kafka_store_warm() {
    let topic = kafka_util::TopicGuard::new("sigkill-warm");
    let snapshots = tempfile::tempdir().unwrap();
    let url = kafka_util::url(
        &topic.0,
        3,
        &format!("&snapshot.dir={}", snapshots.path().display()),
    );
    kill_cycles(&url);
    // The cycles' stores opened warm: so does this one, with every batch the last one recovered.
    let store = connect_offsets::store::kafka::KafkaStore::open(&url).unwrap();
    assert_eq!(
        store.loaded().start,
        connect_offsets::store::kafka::Start::Warm,
        "{:?}",
        store.loaded()
    );
    let seq = store.applied_seq(WRITER).unwrap();
    let state = offsets(&store.all().unwrap());
    assert!(
        state == expected_state(seq),
        "the warm state after seq {seq}"
    );
}
