//! A broker lost in the middle of a stream of commits.
//!
//! The test starts the three-broker cluster (`scripts/kafka start --cluster`: nodes 1-3 on
//! 127.0.0.1:19092-19094, replication factor 3, `min.insync.replicas=2`), runs a commit buffer with
//! `Durability::Store` over a `KafkaStore` there (6 partitions, replication 3), commits from a thread,
//! SIGKILLs node 2 half-way and keeps committing. Commits must resume within a bound (`FAILOVER_BOUND`,
//! 60 s: the longest gap between two acknowledged commits), and afterwards a fresh store, opened
//! while node 2 is still dead, must hold every acknowledged batch. The cluster is stopped at the end
//! (also when the test fails) if the test started it; a cluster already running is left running, with
//! node 2 started again.
#![cfg(feature = "kafka")]

use crate::kafka_util;
use crate::scripts;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig, Durability};
use connect_offsets::store::kafka::KafkaStore;
use connect_offsets::{Offset, OffsetKey, OffsetStore, Partition};
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use scripts::Cluster;

const WRITER: &str = "failover-writer";
/// Keys every batch updates (besides a key of its own).
const SLOTS: i64 = 8;
/// The node killed.
const VICTIM: u32 = 2;

/// The longest acceptable gap between two acknowledged commits.
fn failover_bound() -> Duration {
    Duration::from_secs(
        std::env::var("FAILOVER_BOUND_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(60),
    )
}

fn slot(k: i64) -> OffsetKey {
    OffsetKey::new("failover", Partition::new().with("slot", k))
}

fn own(i: i64) -> OffsetKey {
    OffsetKey::new("failover-batches", Partition::new().with("batch", i))
}

fn value(i: i64) -> Offset {
    Offset::new().with("i", i).with("ratio", i as f64 / 7.0)
}

/// One acknowledged commit: the iteration, the batch seq it ended in, when.
#[derive(Debug, Clone, Copy)]
struct Ack {
    i: i64,
    seq: u64,
    at: Instant,
}

#[derive(Default)]
struct Progress {
    acks: Vec<Ack>,
    /// Waits that ended without an acknowledgement (timeout or error), with the error.
    failed: Vec<(i64, Instant, String)>,
    /// The last iteration offered.
    last_offered: i64,
}

/// The progress, also after a panic elsewhere.
fn lock(p: &Mutex<Progress>) -> std::sync::MutexGuard<'_, Progress> {
    p.lock().unwrap_or_else(|e| e.into_inner())
}

/// The topic's replication and `min.insync.replicas`, from the brokers.
fn topic_facts(topic: &str) -> (usize, String) {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", Cluster::BOOTSTRAP)
        .create()
        .expect("consumer");
    let md = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(30))
        .expect("metadata");
    let replicas = md.topics()[0]
        .partitions()
        .iter()
        .map(|p| p.replicas().len())
        .min()
        .expect("partitions");
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", Cluster::BOOTSTRAP)
        .create()
        .expect("admin client");
    let res = kafka_util::block_on(admin.describe_configs(
        [&ResourceSpecifier::Topic(topic)],
        &AdminOptions::new().request_timeout(Some(Duration::from_secs(30))),
    ))
    .expect("describe configs");
    let resource = res.into_iter().next().unwrap().expect("topic config");
    let min_isr = resource
        .get("min.insync.replicas")
        .and_then(|e| e.value.clone())
        .unwrap_or_default();
    (replicas, min_isr)
}

/// Both write modes, one after the other, each on a cluster of its own (two at once would
/// overload the machine).
#[test]
fn commits_survive_a_broker_sigkill_and_resume_within_the_bound() {
    for params in ["", "&write.mode=idempotent"] {
        eprintln!("kafka_failover: write mode parameters `{params}`");
        failover(params);
    }
}

fn failover(params: &str) {
    // RUST_LOG=info shows the store's and librdkafka's view of the failover.
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .try_init();
    }
    let bound = failover_bound();
    let mut cluster = Cluster::start();
    let topic = kafka_util::unique_topic("failover");
    let url = format!(
        "kafka://{}/{topic}?partitions=6&replication=3&timeout.ms=15000&writer={WRITER}{params}",
        Cluster::BOOTSTRAP
    );
    let store: Arc<dyn OffsetStore> =
        Arc::new(KafkaStore::open(&url).expect("open on the cluster"));
    let (replicas, min_isr) = topic_facts(&topic);
    assert_eq!(replicas, 3, "every partition has 3 replicas");
    assert_eq!(min_isr, "2", "min.insync.replicas of the topic");

    let wal = tempfile::tempdir().unwrap();
    let mut cfg = CommitBufferConfig::new(wal.path().join("wal"));
    cfg.writer = WRITER.into();
    cfg.durability = Durability::Store;
    cfg.flush_interval = None;
    let buffer = Arc::new(CommitBuffer::open(Arc::clone(&store), cfg).expect("buffer"));

    // The committer: offers, commits, waits for the store; never gives up on its own.
    let progress = Arc::new(Mutex::new(Progress::default()));
    // `stop`: finish after the next acknowledged commit; `abort`: finish now.
    let stop = Arc::new(AtomicBool::new(false));
    let abort = Arc::new(AtomicBool::new(false));
    let committer = {
        let (buffer, progress) = (Arc::clone(&buffer), Arc::clone(&progress));
        let (stop, abort) = (Arc::clone(&stop), Arc::clone(&abort));
        std::thread::spawn(move || {
            let mut i = 0i64;
            let mut last_ok = true;
            // Stop only right after an acknowledged commit, so the last offered batch is acked.
            loop {
                let done = stop.load(Ordering::Relaxed) && last_ok;
                if done || abort.load(Ordering::Relaxed) {
                    break;
                }
                i += 1;
                for k in 0..SLOTS {
                    buffer.offer(slot(k), value(i)).expect("offer");
                }
                buffer.offer(own(i), value(i)).expect("offer");
                lock(&progress).last_offered = i;
                let r = buffer
                    .commit_with(Durability::Store)
                    .wait_timeout(Duration::from_secs(5));
                let mut p = lock(&progress);
                match r {
                    Ok(seq) => {
                        p.acks.push(Ack {
                            i,
                            seq,
                            at: Instant::now(),
                        });
                        last_ok = true;
                    }
                    Err(e) if e.is_fatal() => {
                        p.failed.push((i, Instant::now(), e.to_string()));
                        return Err(format!("commit {i}: fatal: {e}"));
                    }
                    Err(e) => {
                        p.failed.push((i, Instant::now(), e.to_string()));
                        last_ok = false;
                    }
                }
            }
            Ok(i)
        })
    };
    let acks = |p: &Progress| p.acks.len();

    // Commits flow on three brokers: 15 acknowledged, the last 10 without a failed wait between
    // them (a fresh cluster on a busy machine can take a while to settle).
    let t0 = Instant::now();
    loop {
        let (streak, failed) = {
            let p = lock(&progress);
            let last_failure = p.failed.iter().map(|f| f.1).max();
            let streak = p
                .acks
                .iter()
                .filter(|a| last_failure.is_none_or(|t| a.at > t))
                .count();
            (streak, p.failed.clone())
        };
        if acks(&lock(&progress)) >= 15 && streak >= 10 && t0.elapsed() >= Duration::from_secs(4) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120) && !committer.is_finished(),
            "commits do not flow on the healthy cluster within 120 s (an overloaded machine?); \
             waits without an acknowledgement: {:?}",
            &failed[failed.len().saturating_sub(5)..]
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let before = acks(&lock(&progress));
    let killed_pid = cluster.kill(VICTIM);
    let killed_at = Instant::now();
    eprintln!(
        "kafka_failover: {before} commits acknowledged, then node {VICTIM} (pid {killed_pid}) SIGKILLed"
    );

    // Keep committing until commits came back and flowed for a while (10 acknowledged and 5 s
    // since the last failed wait), or long after the bound.
    let deadline = killed_at + bound + Duration::from_secs(30);
    let healthy = loop {
        std::thread::sleep(Duration::from_millis(100));
        let p = lock(&progress);
        let last_failure = p.failed.iter().map(|f| f.1).max();
        let since: Vec<&Ack> = p
            .acks
            .iter()
            .filter(|a| a.at > killed_at && last_failure.is_none_or(|t| a.at > t))
            .collect();
        let after_kill = p.acks.iter().filter(|a| a.at > killed_at).count();
        if after_kill >= 10 && since.len() >= 10 && since[0].at.elapsed() >= Duration::from_secs(5)
        {
            break true;
        }
        if committer.is_finished() || Instant::now() > deadline {
            break false;
        }
    };
    if healthy {
        stop.store(true, Ordering::Relaxed);
    } else {
        abort.store(true, Ordering::Relaxed);
    }
    let ended_at = Instant::now();
    let committer_result = committer
        .join()
        .expect("the committer thread does not panic");
    let p = std::mem::take(&mut *lock(&progress));

    // The longest gap between two acknowledged commits (counting from the kill too).
    let mut gap = Duration::ZERO;
    let mut gap_at = (0, 0);
    for w in p.acks.windows(2) {
        let d = w[1].at.duration_since(w[0].at);
        if d > gap {
            gap = d;
            gap_at = (w[0].i, w[1].i);
        }
    }
    if !healthy {
        // A stall that never ended counts up to now.
        let last_ack = p.acks.last().map_or(killed_at, |a| a.at);
        if ended_at.duration_since(last_ack) > gap {
            gap = ended_at.duration_since(last_ack);
            gap_at = (p.acks.last().map_or(0, |a| a.i), -1);
        }
    }
    let first_after = p.acks.iter().find(|a| a.at > killed_at).copied();
    let last_failure = p
        .failed
        .iter()
        .map(|f| f.1)
        .filter(|t| *t > killed_at)
        .max();
    let resumed_at = p
        .acks
        .iter()
        .find(|a| a.at > killed_at && last_failure.is_none_or(|t| a.at > t))
        .map(|a| a.at);
    eprintln!(
        "kafka_failover: longest gap between acknowledged commits {gap:.2?} (between commits {} and \
         {}); first acknowledged {:.2?} after the kill, acknowledged without a failed wait since {:.2?} after it; \
         {} waits without an acknowledgement ({} before the kill); {} commits acknowledged in all, \
         last seq {}",
        gap_at.0,
        gap_at.1,
        first_after.map(|a| a.at.duration_since(killed_at)),
        resumed_at.map(|t| t.duration_since(killed_at)),
        p.failed.len(),
        p.failed.iter().filter(|f| f.1 < killed_at).count(),
        p.acks.len(),
        p.acks.last().map_or(0, |a| a.seq)
    );
    let last_i = committer_result.unwrap_or_else(|e| {
        panic!(
            "{e}; waits without an acknowledgement: {:?}",
            &p.failed[p.failed.len().saturating_sub(5)..]
        )
    });
    let after_kill = p.acks.iter().filter(|a| a.at > killed_at).count();
    assert!(
        after_kill >= 10,
        "commits did not resume after node {VICTIM} was killed: {after_kill} acknowledged since; \
         last failures: {:?}",
        &p.failed[p.failed.len().saturating_sub(5)..]
    );
    assert!(
        gap <= bound,
        "commits stalled for {gap:?} (bound {bound:?}) after node {VICTIM} was killed"
    );
    let last = *p.acks.last().expect("acknowledged commits");
    assert_eq!(
        last.i, last_i,
        "the committer stopped after an acknowledged commit"
    );

    // Everything pending is committed by close; then a fresh store reads the topic on the two
    // brokers left.
    buffer.close().expect("close the buffer");
    drop(buffer);
    drop(store);
    let fresh = KafkaStore::open(&format!(
        "kafka://{}/{topic}?partitions=6&replication=3&{}",
        Cluster::BOOTSTRAP,
        kafka_util::BOUNDS
    ))
    .expect("a fresh store on the surviving brokers");
    let applied = fresh.applied_seq(WRITER).unwrap();
    assert!(
        applied >= last.seq,
        "applied_seq {applied} < last acknowledged seq {}",
        last.seq
    );
    for k in 0..SLOTS {
        assert_eq!(
            fresh.get(&slot(k)).unwrap(),
            Some(value(last.i)),
            "slot {k}: the values of the last acknowledged batch"
        );
    }
    let mut missing = Vec::new();
    for a in &p.acks {
        if fresh.get(&own(a.i)).unwrap() != Some(value(a.i)) {
            missing.push(a.i);
        }
    }
    assert!(
        missing.is_empty(),
        "acknowledged batches missing after the failover: {missing:?}"
    );
    // Batches whose wait timed out were logged and retried: they are there too.
    let unacked_missing: Vec<i64> = (1..=last_i)
        .filter(|i| fresh.get(&own(*i)).unwrap() != Some(value(*i)))
        .collect();
    assert!(
        unacked_missing.is_empty(),
        "logged batches never applied: {unacked_missing:?}"
    );
    eprintln!(
        "kafka_failover: a fresh store on the 2 surviving brokers holds all {} acknowledged \
         batches ({} offered; applied_seq {applied} >= last acknowledged seq {}); loaded {:?}",
        p.acks.len(),
        last_i,
        last.seq,
        fresh.loaded()
    );
}
