//! Memory footprint of the memory store (the goal: 1,000,000 offsets take at most twice their raw
//! bytes). Not a criterion bench: it counts the heap bytes live before and after filling a
//! `MemoryStore`, through a counting global allocator (which is why it is a binary of its own), and
//! prints them next to the raw bytes of the same offsets: the key and value bytes Kafka Connect writes
//! for them (what its own in-memory map of a `KafkaOffsetBackingStore` holds as `ByteBuffer`s).
//!
//! Each shape runs in a child process of its own, which also reports how much its resident set grew
//! (`/proc/self/statm`): that includes the allocator's per-allocation overhead and free lists.
//!
//! With feature `kafka` and `KAFKA_BOOTSTRAP` set, the same offsets are also written to a topic and
//! the heap of a `KafkaStore` opened over it is counted, cold (reading the topic) and warm (from its
//! snapshot); librdkafka's own buffers are C allocations, outside the count.
//!
//! `cargo bench --bench footprint` (`FOOTPRINT_OFFSETS=N` for another count).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use connect_offsets::codec::{encode_key, encode_value};
use connect_offsets::store::{MemoryStore, OffsetStore};
use connect_offsets::{Batch, Offset, OffsetKey, Partition};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// The shapes of `connect-offsets bench`'s workload (the memory table of docs/benchmarks.md) and of
/// Connect's own connectors: a file source's partition (`filename`) with a `position`, and a
/// database connector's (`server`, `table`) with a log position.
fn entry(shape: &str, i: u64) -> (OffsetKey, Offset) {
    match shape {
        "bench" => (
            OffsetKey::new("bench-0", Partition::new().with("partition", i as i64)),
            Offset::new().with("position", (i * 7) as i64),
        ),
        "file" => (
            OffsetKey::new(
                "local-file-source",
                Partition::new().with("filename", format!("/var/log/app/part-{i:08}.log")),
            ),
            Offset::new().with("position", (i * 4096) as i64),
        ),
        _ => (
            OffsetKey::new(
                "inventory-connector",
                Partition::new()
                    .with("server", "dbserver1")
                    .with("table", format!("inventory.table_{i}")),
            ),
            Offset::new()
                .with("file", "mysql-bin.000003")
                .with("pos", (i * 154) as i64)
                .with("row", 1)
                .with("snapshot", false),
        ),
    }
}

/// Resident set size in bytes (Linux).
fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn main() {
    // `cargo bench` passes `--bench`; criterion-style filters are ignored.
    let n: u64 = std::env::var("FOOTPRINT_OFFSETS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    if let Ok(shape) = std::env::var("FOOTPRINT_SHAPE") {
        return measure(&shape, n);
    }
    println!(
        "footprint: {n} offsets in a MemoryStore; raw = Connect's key + value bytes per offset"
    );
    println!(
        "{:<10} {:>12} {:>12} {:>12} {:>12} {:>11} {:>10} {:>9}",
        "shape",
        "raw bytes",
        "heap bytes",
        "raw/offset",
        "heap/offset",
        "heap/raw",
        "rss/offset",
        "rss/raw"
    );
    let kafka = cfg!(feature = "kafka") && std::env::var("KAFKA_BOOTSTRAP").is_ok();
    for store in ["memory", "kafka"] {
        if store == "kafka" && !kafka {
            continue;
        }
        for shape in ["bench", "file", "debezium"] {
            let status = std::process::Command::new(std::env::current_exe().unwrap())
                .env("FOOTPRINT_SHAPE", shape)
                .env("FOOTPRINT_STORE", store)
                .env("FOOTPRINT_OFFSETS", n.to_string())
                .status()
                .unwrap();
            assert!(status.success(), "{store} {shape}: {status}");
        }
    }
}

#[cfg_attr(not(feature = "kafka"), allow(dead_code))]
fn namespace(shape: &str) -> &'static str {
    match shape {
        "bench" => "bench-0",
        "file" => "local-file-source",
        _ => "inventory-connector",
    }
}

/// Batch `seq` of offsets `from..to` of `shape`, adding their raw bytes (Connect's key + value
/// bytes) to `raw`. Made one at a time, so a measured store's heap holds no other batch.
fn batch(shape: &str, from: u64, to: u64, seq: u64, raw: &mut usize) -> Batch {
    let mut scratch = Vec::new();
    let entries: Vec<(OffsetKey, Option<Offset>)> = (from..to)
        .map(|j| {
            let (k, v) = entry(shape, j);
            scratch.clear();
            encode_key(&k, &mut scratch);
            *raw += scratch.len();
            scratch.clear();
            encode_value(&v, &mut scratch);
            *raw += scratch.len();
            (k, Some(v))
        })
        .collect();
    Batch::new("footprint", seq, entries)
}

/// The batches of `n` offsets of `shape` (10,000 each) and their raw bytes.
#[cfg_attr(not(feature = "kafka"), allow(dead_code))]
fn batches(shape: &str, n: u64) -> (Vec<Batch>, usize) {
    let mut raw = 0usize;
    let out = (0..n.div_ceil(10_000))
        .map(|b| {
            batch(
                shape,
                b * 10_000,
                ((b + 1) * 10_000).min(n),
                b + 1,
                &mut raw,
            )
        })
        .collect();
    (out, raw)
}

fn row(label: &str, n: u64, raw: usize, heap: usize, rss_grew: usize) {
    println!(
        "{:<10} {:>12} {:>12} {:>12.1} {:>12.1} {:>10.2}x {:>10.1} {:>8.2}x",
        label,
        raw,
        heap,
        raw as f64 / n as f64,
        heap as f64 / n as f64,
        heap as f64 / raw as f64,
        rss_grew as f64 / n as f64,
        rss_grew as f64 / raw as f64
    );
}

/// A `KafkaStore` over a topic holding the offsets: its heap after a cold and after a warm open.
#[cfg(feature = "kafka")]
fn measure_kafka(shape: &str, n: u64) {
    use connect_offsets::store::kafka::{KafkaStore, Start};
    let bootstrap = std::env::var("KAFKA_BOOTSTRAP").unwrap();
    let topic = format!("footprint-{shape}-{}", std::process::id());
    let url = format!("kafka://{bootstrap}/{topic}?partitions=25&replication=1");
    let (batches, raw) = batches(shape, n);
    {
        let store = KafkaStore::open(&url).unwrap();
        for b in &batches {
            store.apply(b).unwrap();
        }
    }
    drop(batches);
    let dir = std::env::temp_dir().join(format!("footprint-snapshot-{}", std::process::id()));
    let warm = format!("{url}&snapshot.dir={}", dir.display());
    drop(KafkaStore::open(&warm).unwrap());
    for (how, url, start) in [("cold", &url, Start::Cold), ("warm", &warm, Start::Warm)] {
        let before = LIVE.load(Ordering::Relaxed);
        let rss_before = rss();
        let store = KafkaStore::open(url).unwrap();
        let heap = (LIVE.load(Ordering::Relaxed) - before) as usize;
        let rss_grew = rss().saturating_sub(rss_before);
        assert_eq!(store.loaded().start, start);
        assert_eq!(store.partitions(namespace(shape)).unwrap().len() as u64, n);
        row(&format!("kafka {shape} {how}"), n, raw, heap, rss_grew);
    }
    let _ = std::fs::remove_dir_all(&dir);
    delete_topic(&bootstrap, &topic);
}

/// Deletes the topic (best effort): a million offsets are not left on a shared broker.
#[cfg(feature = "kafka")]
fn delete_topic(bootstrap: &str, topic: &str) {
    use rdkafka::admin::{AdminClient, AdminOptions};
    use rdkafka::client::DefaultClientContext;
    use std::task::{Context, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    let Ok(admin) = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create::<AdminClient<DefaultClientContext>>()
    else {
        return;
    };
    let opts = AdminOptions::new();
    let mut fut = std::pin::pin!(admin.delete_topics(&[topic], &opts));
    let waker = Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while fut
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending()
        && std::time::Instant::now() < deadline
    {
        std::thread::park_timeout(std::time::Duration::from_millis(50));
    }
}

#[cfg(not(feature = "kafka"))]
fn measure_kafka(_: &str, _: u64) {}

fn measure(shape: &str, n: u64) {
    if std::env::var("FOOTPRINT_STORE").as_deref() == Ok("kafka") {
        return measure_kafka(shape, n);
    }
    {
        let store = MemoryStore::new();
        let mut raw = 0usize;
        let before = LIVE.load(Ordering::Relaxed);
        let rss_before = rss();
        for b in 0..n.div_ceil(10_000) {
            let batch = batch(
                shape,
                b * 10_000,
                ((b + 1) * 10_000).min(n),
                b + 1,
                &mut raw,
            );
            store.apply(&batch).unwrap();
        }
        let heap = (LIVE.load(Ordering::Relaxed) - before) as usize;
        let rss_grew = rss().saturating_sub(rss_before);
        assert_eq!(
            store
                .partitions(if shape == "bench" {
                    "bench-0"
                } else if shape == "file" {
                    "local-file-source"
                } else {
                    "inventory-connector"
                })
                .unwrap()
                .len() as u64,
            n
        );
        row(shape, n, raw, heap, rss_grew);
        drop(store);
    }
}
