//! Concurrency: several threads offer and commit through one buffer at once for `STRESS_SECS`
//! (default 30) seconds over RocksDB (memory without the feature) and the real file system, while a
//! reader checks that no acknowledged offset is missing or older than acknowledged. At the end the
//! buffer is closed and reopened and every thread's last offsets must be there.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig, Durability};
use connect_offsets::store::OffsetStore;
use connect_offsets::{Offset, OffsetKey, Partition, Value};

const THREADS: usize = 6;
const KEYS_PER_THREAD: usize = 200;

fn key(t: usize, i: usize) -> OffsetKey {
    OffsetKey::new(format!("task-{t}"), Partition::new().with("p", i as i64))
}

fn version(o: &Option<Offset>) -> i64 {
    match o.as_ref().and_then(|o| o.get("v")) {
        Some(Value::Int(v)) => *v,
        None => -1,
        other => panic!("unexpected offset value {other:?}"),
    }
}

fn store(dir: &std::path::Path) -> Arc<dyn OffsetStore> {
    #[cfg(feature = "rocksdb")]
    let url = format!("rocksdb://{}", dir.join("db").display());
    #[cfg(not(feature = "rocksdb"))]
    let url = {
        let _ = dir;
        "memory://".to_string()
    };
    Arc::from(connect_offsets::open(&url).unwrap())
}

#[test]
fn many_threads_offer_and_commit() {
    let secs: u64 = std::env::var("STRESS_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let dir = tempfile::tempdir().unwrap();
    let mut config = CommitBufferConfig::new(dir.path().join("wal"));
    config.set("offset.flush.interval.ms", "20").unwrap();
    config.segment_bytes = 256 << 10;
    config.max_pending = 500;
    let buffer = Arc::new(CommitBuffer::open(store(dir.path()), config.clone()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    // Per key: the highest version acknowledged by a commit (readers check against it).
    let acked: Arc<Vec<AtomicI64>> = Arc::new(
        (0..THREADS * KEYS_PER_THREAD)
            .map(|_| AtomicI64::new(-1))
            .collect(),
    );
    let deadline = Instant::now() + Duration::from_secs(secs);

    let writers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (buffer, stop, acked) =
                (Arc::clone(&buffer), Arc::clone(&stop), Arc::clone(&acked));
            std::thread::spawn(move || {
                let mut v = 0i64;
                let mut last = vec![-1i64; KEYS_PER_THREAD];
                let mut commits = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for j in 0..20 {
                        let i = (v as usize * 7 + j) % KEYS_PER_THREAD;
                        v += 1;
                        buffer.offer(key(t, i), Offset::new().with("v", v)).unwrap();
                        last[i] = v;
                    }
                    if v % 60 == 0 {
                        let d = if commits.is_multiple_of(2) {
                            Durability::Local
                        } else {
                            Durability::Store
                        };
                        buffer.commit_with(d).wait().unwrap();
                        commits += 1;
                        for (i, l) in last.iter().enumerate() {
                            acked[t * KEYS_PER_THREAD + i].fetch_max(*l, Ordering::SeqCst);
                        }
                    }
                }
                (last, commits)
            })
        })
        .collect();

    // A reader: committed values (buffer.get sees logged batches before the store does) never fall
    // behind what was acknowledged, and never go backwards.
    let mut seen = vec![-1i64; THREADS * KEYS_PER_THREAD];
    let mut checks = 0u64;
    while Instant::now() < deadline {
        for t in 0..THREADS {
            for i in (0..KEYS_PER_THREAD).step_by(17) {
                let idx = t * KEYS_PER_THREAD + i;
                let floor = acked[idx].load(Ordering::SeqCst);
                let got = version(&buffer.get(&key(t, i)).unwrap());
                assert!(
                    got >= floor,
                    "{t}/{i}: committed value {got} is behind the acknowledged {floor}"
                );
                assert!(
                    got >= seen[idx],
                    "{t}/{i}: went backwards from {} to {got}",
                    seen[idx]
                );
                seen[idx] = got;
                checks += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    let lasts: Vec<_> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    let stats = buffer.stats();
    buffer.close().unwrap();
    drop(buffer);

    let reopened = CommitBuffer::open(store(dir.path()), config).unwrap();
    let mut total_commits = 0;
    for (t, (last, commits)) in lasts.iter().enumerate() {
        total_commits += commits;
        for (i, l) in last.iter().enumerate() {
            let got = version(&reopened.store().get(&key(t, i)).unwrap());
            assert_eq!(
                got, *l,
                "after close and reopen, {t}/{i} holds {got}, last offered {l}"
            );
        }
    }
    println!(
        "stress: {secs} s, {THREADS} threads, {total_commits} waited commits, {} batches logged with {} syncs, {checks} reader checks",
        stats.logged_seq, stats.syncs
    );
    assert!(total_commits > 0 && stats.syncs <= stats.logged_seq);
}
