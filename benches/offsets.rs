//! Criterion benches for connect-offsets. Groups:
//!
//! * `offer`: offers per second into the commit buffer (one thread, and all cores), next to a bare
//!   hash-map update of the same keys and values;
//! * `commit`: offsets and commits per second per backend (Kafka in both write modes: `kafka` with
//!   a transaction per batch, `kafka_idempotent`), batch sizes 1 / 100 / 10,000, `Local` and `Store`
//!   durability; `group_commit`: 8 concurrent committers of one offset each;
//! * `flush_latency`: 1-offset commits (the run also prints p50 / p99 / max);
//! * `recovery`: opening a store holding 10k / 100k / 1M offsets (RocksDB; Kafka: loading the topic to
//!   its high watermark) and replaying as many pending offsets from the log;
//! * `growth`: one 100-entry commit with 1,000 vs 1,000,000 keys already stored;
//! * `floor`: the raw cost on the same disk of appending the same framed bytes with one `fdatasync`
//!   per batch, so local figures can be read as a fraction of it.
//!
//! Kafka runs join with `KAFKA_BOOTSTRAP` set (a broker from `scripts/kafka start`) and feature `kafka`.
//! Run one group: `cargo bench --features full --bench offsets -- commit`.

use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig, Durability};
use connect_offsets::internal::model::KeyMap;
use connect_offsets::internal::wal::frame::{self, FrameKind};
use connect_offsets::store::{MemoryStore, OffsetStore};
use connect_offsets::{Batch, Offset, OffsetKey, Partition};
use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};

// The tool's allocator (see `cli/src/main.rs`), so these figures are the tool's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn keys(n: usize) -> Vec<OffsetKey> {
    (0..n)
        .map(|i| OffsetKey::new("bench", Partition::new().with("partition", i as i64)))
        .collect()
}

fn offset(i: u64) -> Offset {
    Offset::new().with("position", i as i64)
}

struct Rig {
    _dir: tempfile::TempDir,
    buffer: Arc<CommitBuffer>,
}

fn store_for(kind: &str, dir: &std::path::Path) -> Arc<dyn OffsetStore> {
    match kind {
        "memory" => Arc::new(MemoryStore::new()),
        "rocksdb" => Arc::new(
            connect_offsets::store::rocksdb::RocksDbStore::open(dir.join("db")).expect("rocksdb"),
        ),
        #[cfg(feature = "kafka")]
        "kafka" | "kafka_idempotent" => {
            let bootstrap = std::env::var("KAFKA_BOOTSTRAP").expect("KAFKA_BOOTSTRAP");
            let mode = if kind == "kafka" {
                "transaction"
            } else {
                "idempotent"
            };
            let topic = format!(
                "bench-{}-{}",
                std::process::id(),
                dir.file_name().unwrap().to_string_lossy()
            );
            Arc::from(
                connect_offsets::open(&format!(
                    "kafka://{bootstrap}/{topic}?partitions=25&replication=1&write.mode={mode}"
                ))
                .expect("kafka"),
            )
        }
        other => panic!("unknown store {other}"),
    }
}

fn rig(kind: &str) -> Rig {
    rig_with(kind, 2_000_000)
}

/// A rig whose log thread seals no batch while `max_pending` entries wait for the store.
fn rig_with(kind: &str, max_pending: usize) -> Rig {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = CommitBufferConfig::new(dir.path().join("wal"));
    config.flush_interval = None;
    config.max_pending = max_pending;
    config.flush_timeout = Duration::from_secs(120);
    let store = store_for(kind, dir.path());
    let buffer = Arc::new(CommitBuffer::open(store, config).expect("buffer"));
    Rig { _dir: dir, buffer }
}

fn backends() -> Vec<&'static str> {
    let mut b = vec!["memory", "rocksdb"];
    if cfg!(feature = "kafka") && std::env::var("KAFKA_BOOTSTRAP").is_ok() {
        b.extend(["kafka", "kafka_idempotent"]);
    }
    b
}

fn offer(c: &mut Criterion) {
    let mut g = c.benchmark_group("offer");
    g.throughput(Throughput::Elements(1));
    for n in [10_000usize, 1_000_000] {
        let ks = keys(n);
        let value = offset(7);
        let r = rig("memory");
        // Fill once so the measured offers overwrite, as a steady-state worker does.
        for k in &ks {
            r.buffer.offer(k.clone(), value.clone()).unwrap();
        }
        let mut i = 0usize;
        g.bench_with_input(BenchmarkId::new("buffer_one_thread", n), &n, |b, _| {
            b.iter(|| {
                i = (i + 1) % n;
                r.buffer.offer(ks[i].clone(), value.clone()).unwrap();
            })
        });
        let mut map: KeyMap<Option<Offset>> = KeyMap::default();
        for k in &ks {
            map.insert(k.clone(), Some(value.clone()));
        }
        g.bench_with_input(BenchmarkId::new("bare_hashmap", n), &n, |b, _| {
            b.iter(|| {
                i = (i + 1) % n;
                map.insert(ks[i].clone(), Some(value.clone()));
            })
        });
        let threads = std::thread::available_parallelism().map_or(2, |p| p.get());
        // Every thread over all the keys (a key offered by several tasks), and each thread over keys
        // of its own (Connect's case: a source partition belongs to one task).
        for (name, own_keys) in [("threads", false), ("threads_own_keys", true)] {
            // A buffer of their own, which they fill: a key is pending in the lane of the thread
            // that offered it first since the last commit.
            let r = rig("memory");
            let tasks = Tasks::start(&r.buffer, n, threads, own_keys);
            g.bench_with_input(
                BenchmarkId::new(format!("buffer_{threads}_{name}"), n),
                &n,
                // `iters` offers in all, spread over the threads: the wall time is theirs.
                |b, _| b.iter_custom(|iters| tasks.run(iters)),
            );
        }
    }
    g.finish();
}

/// Offering threads that live as long as a worker's tasks (across Criterion's samples), each with
/// the keys and values it made itself, as a task makes its own.
struct Tasks {
    go: Vec<std::sync::mpsc::Sender<u64>>,
    done: Arc<std::sync::Barrier>,
    joins: Vec<std::thread::JoinHandle<()>>,
}

impl Tasks {
    fn start(buffer: &Arc<CommitBuffer>, n: usize, threads: usize, own_keys: bool) -> Tasks {
        let done = Arc::new(std::sync::Barrier::new(threads + 1));
        let (mut go, mut joins) = (Vec::new(), Vec::new());
        for t in 0..threads {
            let (tx, rx) = std::sync::mpsc::channel::<u64>();
            let (buffer, done) = (Arc::clone(buffer), Arc::clone(&done));
            joins.push(std::thread::spawn(move || {
                let ks = keys(n);
                let value = offset(7);
                let (step, mut i) = if own_keys {
                    (threads, t)
                } else {
                    (1, t * 7919)
                };
                for _ in 0..n / step {
                    i = (i + step) % n;
                    buffer.offer(ks[i].clone(), value.clone()).unwrap();
                }
                done.wait();
                while let Ok(per) = rx.recv() {
                    for _ in 0..per {
                        i = (i + step) % n;
                        buffer.offer(ks[i].clone(), value.clone()).unwrap();
                    }
                    done.wait();
                }
            }));
            go.push(tx);
        }
        // Keys made and offered once before the first sample's clock starts.
        done.wait();
        Tasks { go, done, joins }
    }

    fn run(&self, iters: u64) -> Duration {
        let per = iters.div_ceil(self.go.len() as u64);
        let start = Instant::now();
        for tx in &self.go {
            tx.send(per).unwrap();
        }
        self.done.wait();
        start.elapsed()
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        self.go.clear();
        for j in self.joins.drain(..) {
            j.join().unwrap();
        }
    }
}

fn commit_batch(
    buffer: &CommitBuffer,
    ks: &[OffsetKey],
    batch: usize,
    d: Durability,
    next: &mut u64,
) {
    for _ in 0..batch {
        let i = (*next as usize) % ks.len();
        buffer.offer(ks[i].clone(), offset(*next)).unwrap();
        *next += 1;
    }
    buffer.commit_with(d).wait().unwrap();
}

/// `batch` offers of the next keys in turn, each with an offset of its own.
fn offers(ks: &[OffsetKey], batch: usize, next: &mut u64) -> Vec<(OffsetKey, Offset)> {
    (0..batch)
        .map(|_| {
            *next += 1;
            (ks[*next as usize % ks.len()].clone(), offset(*next))
        })
        .collect()
}

fn commit(c: &mut Criterion) {
    let ks = keys(10_000);
    let mut g = c.benchmark_group("commit");
    g.sample_size(20).measurement_time(Duration::from_secs(4));
    for kind in backends() {
        // Two 10,000-entry batches at most wait for the store: `local` commits run at the pace the
        // store takes them, as a worker's do once its backlog is full, not ahead of it on credit.
        let r = rig_with(kind, 20_000);
        let mut next = 0u64;
        for batch in [1usize, 100, 10_000] {
            for (dname, d) in [("local", Durability::Local), ("store", Durability::Store)] {
                g.throughput(Throughput::Elements(batch as u64));
                g.bench_with_input(
                    BenchmarkId::new(format!("{kind}/{dname}"), batch),
                    &batch,
                    |b, &batch| {
                        b.iter_custom(|iters| {
                            // The keys and offsets are made before the clock starts, as raw
                            // RocksDB's rows in `floor` are: timed are our offers, commits and
                            // applies. The clock stops once the store holds the last batch, so no
                            // apply is left over for after the measurement.
                            let inputs: Vec<_> =
                                (0..iters).map(|_| offers(&ks, batch, &mut next)).collect();
                            let start = Instant::now();
                            for input in inputs {
                                for (k, v) in input {
                                    r.buffer.offer(k, v).unwrap();
                                }
                                r.buffer.commit_with(d).wait().unwrap();
                            }
                            r.buffer.commit_with(Durability::Store).wait().unwrap();
                            start.elapsed()
                        })
                    },
                );
            }
        }
    }
    g.finish();

    // Group commit: 8 threads, one offset per commit each. Elements = commits.
    let mut g = c.benchmark_group("group_commit");
    g.sample_size(20)
        .measurement_time(Duration::from_secs(4))
        .throughput(Throughput::Elements(1));
    for kind in ["rocksdb"] {
        let r = rig(kind);
        let ks = Arc::new(ks.clone());
        for committers in [1usize, 8] {
            g.bench_with_input(
                BenchmarkId::new(kind, format!("{committers}_committers")),
                &committers,
                |b, &n| {
                    b.iter_custom(|iters| {
                        let per = iters.div_ceil(n as u64);
                        let start = Instant::now();
                        std::thread::scope(|s| {
                            for t in 0..n {
                                let (buffer, ks) = (Arc::clone(&r.buffer), Arc::clone(&ks));
                                s.spawn(move || {
                                    for j in 0..per {
                                        buffer
                                            .offer(
                                                ks[t * 1000 + (j as usize % 1000)].clone(),
                                                offset(j),
                                            )
                                            .unwrap();
                                        buffer.commit().wait().unwrap();
                                    }
                                });
                            }
                        });
                        // `iters` commits in all, spread over the committers.
                        start.elapsed()
                    })
                },
            );
        }
    }
    g.finish();
}

fn flush_latency(c: &mut Criterion) {
    let ks = keys(10_000);
    for kind in ["memory", "rocksdb"] {
        let r = rig(kind);
        let mut next = 0u64;
        let mut lat: Vec<Duration> = (0..3000)
            .map(|_| {
                let t = Instant::now();
                commit_batch(&r.buffer, &ks, 1, Durability::Local, &mut next);
                t.elapsed()
            })
            .collect();
        lat.sort_unstable();
        let p = |q: f64| lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)];
        println!(
            "flush_latency/{kind}/local 1-offset commits: p50 {:?} p99 {:?} max {:?} (3000 commits)",
            p(0.5),
            p(0.99),
            lat[lat.len() - 1]
        );
        let mut g = c.benchmark_group("flush_latency");
        g.sample_size(30).throughput(Throughput::Elements(1));
        g.bench_function(BenchmarkId::new(kind, "1_offset_local"), |b| {
            b.iter(|| commit_batch(&r.buffer, &ks, 1, Durability::Local, &mut next))
        });
        g.finish();
    }
}

/// Writes `n` offsets into `store` in 10,000-entry batches of writer `fill`.
fn fill_store(store: &dyn OffsetStore, n: usize) {
    let ks = keys(n);
    for (i, chunk) in ks.chunks(10_000).enumerate() {
        store
            .apply(&Batch::new(
                "fill",
                i as u64 + 1,
                chunk.iter().map(|k| (k.clone(), Some(offset(7)))),
            ))
            .expect("fill the store");
    }
    store.persist().expect("persist the store");
}

/// Writes `n` offsets into a RocksDB store in 10,000-entry batches.
fn fill_rocksdb(path: &std::path::Path, n: usize) {
    fill_store(
        &connect_offsets::store::rocksdb::RocksDbStore::open(path).unwrap(),
        n,
    );
}

/// Writes a log holding `n` offsets in 10,000-entry batches that no durable store has applied.
fn fill_log(wal: &std::path::Path, n: usize) {
    let mut config = CommitBufferConfig::new(wal);
    config.flush_interval = None;
    config.max_pending = 2_000_000;
    config.segment_bytes = 1 << 40; // one segment: nothing compacted away before the measurement
    let buffer = CommitBuffer::open(Arc::new(MemoryStore::new()), config).unwrap();
    let ks = keys(n);
    for chunk in ks.chunks(10_000) {
        for k in chunk {
            buffer.offer(k.clone(), offset(7)).unwrap();
        }
        buffer.commit().wait().unwrap();
    }
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() && e.file_name() != "LOCK" {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

fn recovery(c: &mut Criterion) {
    let mut g = c.benchmark_group("recovery");
    // Flat sampling: 10 samples of the same iteration count, not 1 + 2 + ... + 10 iterations of a
    // seconds-long open.
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .measurement_time(Duration::from_secs(10));
    for n in [10_000usize, 100_000, 1_000_000] {
        g.throughput(Throughput::Elements(n as u64));
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db");
        fill_rocksdb(&db, n);
        g.bench_with_input(BenchmarkId::new("rocksdb_open", n), &n, |b, _| {
            b.iter(|| {
                let s = connect_offsets::store::rocksdb::RocksDbStore::open(&db).unwrap();
                assert_eq!(s.applied_seq("fill").unwrap(), n.div_ceil(10_000) as u64);
            })
        });
        let wal = dir.path().join("wal");
        fill_log(&wal, n);
        g.bench_with_input(
            BenchmarkId::new("log_replay_into_rocksdb", n),
            &n,
            |b, _| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for i in 0..iters {
                        let work = dir.path().join(format!("replay-{i}"));
                        copy_dir(&wal, &work.join("wal"));
                        let store = Arc::new(
                            connect_offsets::store::rocksdb::RocksDbStore::open(work.join("db"))
                                .unwrap(),
                        );
                        let mut config = CommitBufferConfig::new(work.join("wal"));
                        config.flush_interval = None;
                        let t = Instant::now();
                        let buffer = CommitBuffer::open(store, config).unwrap();
                        total += t.elapsed();
                        assert_eq!(buffer.stats().applied_seq, n.div_ceil(10_000) as u64);
                        drop(buffer);
                        std::fs::remove_dir_all(&work).unwrap();
                    }
                    total
                })
            },
        );
    }
    g.finish();
}

/// Kafka: the time to open a `KafkaStore` over a topic holding `n` offsets, i.e. to read every partition
/// to its high watermark (`read_committed`) into memory. With `KAFKA_BOOTSTRAP` and feature `kafka`.
#[cfg(feature = "kafka")]
fn recovery_kafka(c: &mut Criterion) {
    let Ok(bootstrap) = std::env::var("KAFKA_BOOTSTRAP") else {
        return;
    };
    let mut g = c.benchmark_group("recovery");
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .measurement_time(Duration::from_secs(20));
    for n in [10_000usize, 100_000, 1_000_000] {
        g.throughput(Throughput::Elements(n as u64));
        let url = format!(
            "kafka://{bootstrap}/bench-recovery-{}-{n}?partitions=25&replication=1",
            std::process::id()
        );
        fill_store(&*connect_offsets::open(&url).expect("kafka"), n);
        g.bench_with_input(BenchmarkId::new("kafka_load", n), &n, |b, _| {
            b.iter(|| {
                let s = connect_offsets::open(&url).expect("kafka");
                assert_eq!(s.applied_seq("fill").unwrap(), n.div_ceil(10_000) as u64);
                assert!(s.get(&keys(1)[0]).unwrap().is_some());
            })
        });
    }
    g.finish();
}

/// Kafka: opening a `KafkaStore` over a topic of `n` offsets cold (reading the whole topic) and warm
/// (from its `snapshot.dir` snapshot, nothing written since). The drop, which writes the snapshot,
/// is not timed. With `KAFKA_BOOTSTRAP` and feature `kafka`.
#[cfg(feature = "kafka")]
fn kafka_load(c: &mut Criterion) {
    let Ok(bootstrap) = std::env::var("KAFKA_BOOTSTRAP") else {
        return;
    };
    let mut g = c.benchmark_group("kafka_load");
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .measurement_time(Duration::from_secs(10));
    let dir = tempfile::tempdir().expect("snapshot dir");
    for n in [10_000usize, 100_000] {
        g.throughput(Throughput::Elements(n as u64));
        let url = format!(
            "kafka://{bootstrap}/bench-kafka-load-{}-{n}?partitions=25&replication=1",
            std::process::id()
        );
        fill_store(&*connect_offsets::open(&url).expect("kafka"), n);
        let warm = format!("{url}&snapshot.dir={}", dir.path().display());
        for (how, url) in [("cold", &url), ("warm", &warm)] {
            drop(connect_offsets::open(url).expect("kafka"));
            g.bench_with_input(BenchmarkId::new(how, n), &n, |b, _| {
                b.iter_with_large_drop(|| {
                    let s = connect_offsets::open(url).expect("kafka");
                    assert_eq!(s.applied_seq("fill").unwrap(), n.div_ceil(10_000) as u64);
                    s
                })
            });
        }
    }
    g.finish();
}

#[cfg(not(feature = "kafka"))]
fn recovery_kafka(_: &mut Criterion) {}

#[cfg(not(feature = "kafka"))]
fn kafka_load(_: &mut Criterion) {}

fn growth(c: &mut Criterion) {
    let mut g = c.benchmark_group("growth");
    g.sample_size(30).throughput(Throughput::Elements(100));
    for stored in [1_000usize, 1_000_000] {
        for kind in ["memory", "rocksdb"] {
            let r = rig(kind);
            let ks = keys(stored);
            for chunk in ks.chunks(10_000) {
                for k in chunk {
                    r.buffer.offer(k.clone(), offset(1)).unwrap();
                }
                r.buffer.commit_with(Durability::Store).wait().unwrap();
            }
            let mut next = 0u64;
            g.bench_with_input(
                BenchmarkId::new(format!("{kind}_100_entry_commit"), stored),
                &stored,
                |b, _| b.iter(|| commit_batch(&r.buffer, &ks, 100, Durability::Store, &mut next)),
            );
        }
    }
    g.finish();
}

fn floor(c: &mut Criterion) {
    let mut g = c.benchmark_group("floor");
    g.sample_size(20).measurement_time(Duration::from_secs(4));
    let ks = keys(10_000);
    for batch in [1usize, 100, 10_000] {
        let b_ = Batch::new(
            "w",
            1,
            ks.iter()
                .take(batch)
                .map(|k| (k.clone(), Some(offset(123_456)))),
        );
        let mut bytes = Vec::new();
        frame::encode(FrameKind::Batch, &b_, &mut bytes);
        let dir = tempfile::tempdir().unwrap();
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.path().join("floor.log"))
            .unwrap();
        g.throughput(Throughput::Elements(batch as u64));
        g.bench_with_input(
            BenchmarkId::new("append_fdatasync", batch),
            &batch,
            |b, _| {
                b.iter(|| {
                    f.write_all(&bytes).unwrap();
                    f.sync_data().unwrap();
                })
            },
        );
    }
    rocksdb_floor(&mut g, &ks);
    g.finish();
}

/// RocksDB alone taking the same rows (our key and value bytes) in one write batch per commit, with
/// its own log (unsynced, as our store writes without the buffer) and without it (as behind the buffer).
#[cfg(feature = "rocksdb")]
fn rocksdb_floor(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    ks: &[OffsetKey],
) {
    use connect_offsets::codec;
    let rows: Vec<(Vec<u8>, Vec<u8>)> = ks
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let mut key = vec![b'o'];
            key.extend_from_slice(k.id());
            // The store's header: the key's length with the top bit set, then a write time.
            let mut value = vec![0; 4];
            value.extend_from_slice(&1_764_000_000_000u64.to_le_bytes());
            codec::encode_key(k, &mut value);
            let len = (value.len() - 12) as u32 | 1 << 31;
            value[..4].copy_from_slice(&len.to_le_bytes());
            codec::encode_value(&offset(i as u64), &mut value);
            (key, value)
        })
        .collect();
    for (name, disable_wal) in [
        ("rocksdb_write_batch", false),
        ("rocksdb_write_batch_no_wal", true),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = rocksdb::Options::default();
        opts.create_if_missing(true);
        opts.set_compression_type(rocksdb::DBCompressionType::None);
        let db = rocksdb::DB::open(&opts, dir.path()).unwrap();
        let mut wo = rocksdb::WriteOptions::default();
        wo.disable_wal(disable_wal);
        for batch in [1usize, 100, 10_000] {
            let mut at = 0usize;
            g.throughput(Throughput::Elements(batch as u64));
            g.bench_with_input(BenchmarkId::new(name, batch), &batch, |b, &batch| {
                b.iter(|| {
                    let mut wb = rocksdb::WriteBatch::default();
                    for _ in 0..batch {
                        let (k, v) = &rows[at % rows.len()];
                        wb.put(k, v);
                        at += 1;
                    }
                    db.write_opt(wb, &wo).unwrap();
                })
            });
        }
    }
}

#[cfg(not(feature = "rocksdb"))]
fn rocksdb_floor(
    _: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    _: &[OffsetKey],
) {
}

criterion_group!(
    benches,
    offer,
    commit,
    flush_latency,
    recovery,
    recovery_kafka,
    kafka_load,
    growth,
    floor
);
criterion_main!(benches);
