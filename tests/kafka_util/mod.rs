//! What the Kafka test binaries share: the broker address (one helper, env `KAFKA_BOOTSTRAP`), a check
//! that fails (never skips) when no broker answers, unique topic names, and plain librdkafka clients
//! for looking at the topic from outside the store.
#![allow(dead_code)]

use std::future::Future;
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::Message;
use rdkafka::TopicPartitionList;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Headers;
use rdkafka::topic_partition_list::Offset;

/// The broker the tests use: `KAFKA_BOOTSTRAP`, default `127.0.0.1:9092`. Panics (the test fails) when
/// nothing answers there, saying how to start one.
pub fn bootstrap() -> String {
    checked_bootstrap().unwrap_or_else(|msg| panic!("{msg}"))
}

fn checked_bootstrap() -> Result<String, String> {
    static CHECKED: OnceLock<Result<String, String>> = OnceLock::new();
    CHECKED
        .get_or_init(|| {
            let b = std::env::var("KAFKA_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:9092".into());
            reachable(&b).map(|()| b.clone()).map_err(|e| {
                format!(
                    "no Kafka broker answers at {b} ({e}): run `scripts/kafka start` (or set \
                     KAFKA_BOOTSTRAP to a running broker)"
                )
            })
        })
        .clone()
}

/// The SASL_PLAINTEXT (PLAIN) listener of the test broker: `KAFKA_SASL_BOOTSTRAP`, default
/// `127.0.0.1:9094`.
pub fn sasl_bootstrap() -> String {
    bootstrap();
    let b = std::env::var("KAFKA_SASL_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:9094".into());
    reachable(&b).unwrap_or_else(|e| {
        panic!("the SASL listener {b} does not answer ({e}): run `scripts/kafka start`")
    });
    b
}

fn reachable(bootstrap: &str) -> Result<(), String> {
    let first = bootstrap.split(',').next().unwrap_or_default();
    let addr = first
        .to_socket_addrs()
        .map_err(|e| e.to_string())?
        .next()
        .ok_or("no address")?;
    TcpStream::connect_timeout(&addr, Duration::from_secs(3))
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// A topic name no other test (or earlier run) uses.
pub fn unique_topic(what: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "co-test-{what}-{}-{:x}-{}",
        std::process::id(),
        nanos,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The bounds the tests give the Kafka clients, as URL parameters: 5 minutes for one operation
/// (`timeout.ms`; the store's default is 30 s) and 10 minutes before the broker aborts an open
/// transaction (`transaction.timeout.ms`; default 60 s). This VM at times stops as a whole, for
/// up to 2 minutes seen (CONTRIBUTING.md): the broker went silent and transactions timed out or
/// were aborted by their coordinator at those moments. Tests of a bound pass their own.
pub const BOUNDS: &str = "timeout.ms=300000&transaction.timeout.ms=600000";

/// A `kafka://` URL for `topic` on the test broker, replication 1, with `extra` parameters.
pub fn url(topic: &str, partitions: u32, extra: &str) -> String {
    format!(
        "kafka://{}/{topic}?partitions={partitions}&replication=1&{BOUNDS}{extra}",
        bootstrap()
    )
}

struct ThreadWaker(std::thread::Thread);
impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Waits for an admin-client future (completed by the client's own thread); `None` after `timeout`.
pub fn try_block_on<F: Future>(fut: F, timeout: Duration) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let deadline = Instant::now() + timeout;
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::park_timeout(Duration::from_millis(50));
    }
}

/// Waits for an admin-client future; fails the test when it takes over a minute.
pub fn block_on<F: Future>(fut: F) -> F::Output {
    try_block_on(fut, Duration::from_secs(60)).expect("admin operation hangs")
}

/// Creates `topic` with the given configs (replication 1).
pub fn create_topic(topic: &str, partitions: i32, configs: &[(&str, &str)]) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .create()
        .expect("admin client");
    let mut t = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    for (k, v) in configs {
        t = t.set(k, v);
    }
    let res = block_on(admin.create_topics([&t], &AdminOptions::new())).expect("create topics");
    for r in res {
        r.unwrap_or_else(|(t, e)| panic!("create topic {t}: {e}"));
    }
}

/// Collects delivery failures of the plain producer.
#[derive(Default)]
pub struct Deliveries(std::sync::Mutex<Vec<String>>);

impl rdkafka::client::ClientContext for Deliveries {}

impl rdkafka::producer::ProducerContext for Deliveries {
    type DeliveryOpaque = ();
    fn delivery(&self, r: &rdkafka::producer::DeliveryResult<'_>, _: ()) {
        if let Err((e, m)) = r {
            self.0
                .lock()
                .unwrap()
                .push(format!("partition {}: {e}", m.partition()));
        }
    }
}

/// Deletes topics (best effort): tests share one small broker, so they remove what they created.
pub fn delete_topics(topics: &[&str]) {
    // Never panics: it runs in destructors, also while a failed test unwinds.
    let Ok(bootstrap) = checked_bootstrap() else {
        return;
    };
    let Ok(admin) = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create::<AdminClient<DefaultClientContext>>()
    else {
        return;
    };
    let opts = AdminOptions::new()
        .request_timeout(Some(Duration::from_secs(10)))
        .operation_timeout(Some(Duration::from_secs(10)));
    let _ = try_block_on(admin.delete_topics(topics, &opts), Duration::from_secs(15));
}

/// Deletes its topic when dropped (at the end of a test, passed or failed).
pub struct TopicGuard(pub String);

impl TopicGuard {
    /// A new unique topic, deleted when the guard drops.
    pub fn new(what: &str) -> Self {
        TopicGuard(unique_topic(what))
    }
}

impl std::ops::Deref for TopicGuard {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for TopicGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Drop for TopicGuard {
    fn drop(&mut self) {
        delete_topics(&[&self.0]);
    }
}

/// A plain (non-transactional) producer, as a Connect worker without exactly-once uses.
pub fn plain_producer() -> rdkafka::producer::BaseProducer<Deliveries> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("acks", "all")
        .set("partitioner", "murmur2_random")
        .create_with_context(Deliveries::default())
        .expect("producer")
}

/// A record for [`produce_plain`]: an explicit partition (else murmur2), the key and the value
/// (`None` = tombstone).
pub type PlainRecord<'a> = (Option<i32>, Option<&'a [u8]>, Option<&'a [u8]>);

/// Produces records with a plain producer and waits for them.
pub fn produce_plain(topic: &str, records: &[PlainRecord<'_>]) {
    use rdkafka::producer::{BaseRecord, Producer};
    let p = plain_producer();
    for (partition, key, value) in records {
        let mut r: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(topic);
        if let Some(k) = key {
            r = r.key(k);
        }
        if let Some(v) = value {
            r = r.payload(v);
        }
        if let Some(part) = partition {
            r = r.partition(*part);
        }
        p.send(r).map_err(|(e, _)| e).expect("send");
    }
    p.flush(Duration::from_secs(30)).expect("flush");
    p.poll(Duration::from_millis(10));
    let failed = p.context().0.lock().unwrap().clone();
    assert!(failed.is_empty(), "plain records not delivered: {failed:?}");
}

/// A record for [`produce_timed`]: the topic partition, the key, the value (`None` = tombstone) and
/// the record timestamp (milliseconds since the epoch).
pub type TimedRecord<'a> = (i32, &'a [u8], Option<&'a [u8]>, i64);

/// Produces records with a plain producer, each with its own partition and timestamp, in the order
/// given, and waits for them.
pub fn produce_timed(topic: &str, records: &[TimedRecord<'_>]) {
    use rdkafka::producer::{BaseRecord, Producer};
    // One record in flight: the order given is the order written, also within a partition.
    let p: rdkafka::producer::BaseProducer<Deliveries> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("acks", "all")
        .set("max.in.flight.requests.per.connection", "1")
        .create_with_context(Deliveries::default())
        .expect("producer");
    for (partition, key, value, timestamp) in records {
        let mut r: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(topic)
            .key(*key)
            .partition(*partition)
            .timestamp(*timestamp);
        if let Some(v) = value {
            r = r.payload(*v);
        }
        p.send(r).map_err(|(e, _)| e).expect("send");
        p.flush(Duration::from_secs(30)).expect("flush");
    }
    p.poll(Duration::from_millis(10));
    let failed = p.context().0.lock().unwrap().clone();
    assert!(failed.is_empty(), "timed records not delivered: {failed:?}");
}

/// One record as read back from the topic.
#[derive(Debug, Clone)]
pub struct Seen {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Vec<u8>)>,
    /// The record timestamp (milliseconds), when it has one.
    pub timestamp: Option<i64>,
}

/// The records of `after` that are not in `before` (by topic partition and offset): what was
/// written between two [`read_all`]s, whose records come partition by partition in no fixed order.
pub fn written_since(before: &[Seen], after: Vec<Seen>) -> Vec<Seen> {
    let old: std::collections::HashSet<(i32, i64)> =
        before.iter().map(|r| (r.partition, r.offset)).collect();
    let mut new: Vec<Seen> = after
        .into_iter()
        .filter(|r| !old.contains(&(r.partition, r.offset)))
        .collect();
    new.sort_by_key(|r| (r.partition, r.offset));
    new
}

/// Every record of `topic`, read with a plain consumer at `isolation` (`read_committed` or
/// `read_uncommitted`) up to the end offsets as that consumer sees them.
pub fn read_all(topic: &str, isolation: &str) -> Vec<Seen> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("group.id", unique_topic("reader"))
        .set("enable.auto.commit", "false")
        .set("isolation.level", isolation)
        .create()
        .expect("consumer");
    let md = c
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .expect("metadata");
    let n = md.topics()[0].partitions().len() as i32;
    let mut ends = Vec::new();
    let mut tpl = TopicPartitionList::new();
    for p in 0..n {
        let (_, high) = c
            .fetch_watermarks(topic, p, Duration::from_secs(10))
            .expect("watermarks");
        ends.push(high);
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    c.assign(&tpl).expect("assign");
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let pos = c.position().expect("position");
        let done = pos.elements().iter().all(|e| {
            let end = ends[e.partition() as usize];
            end == 0 || matches!(e.offset(), Offset::Offset(o) if o >= end)
        });
        if done {
            break;
        }
        assert!(Instant::now() < deadline, "reading {topic} back hangs");
        if let Some(m) = c.poll(Duration::from_millis(100)) {
            let m = m.expect("consume");
            let headers = m
                .headers()
                .map(|h| {
                    (0..h.count())
                        .map(|i| {
                            let x = h.get(i);
                            (x.key.to_string(), x.value.unwrap_or_default().to_vec())
                        })
                        .collect()
                })
                .unwrap_or_default();
            out.push(Seen {
                partition: m.partition(),
                offset: m.offset(),
                key: m.key().map(<[u8]>::to_vec),
                value: m.payload().map(<[u8]>::to_vec),
                headers,
                timestamp: m.timestamp().to_millis(),
            });
        }
    }
    out
}

/// `connect-offsets ARGS` (the binary of the test's build: the tool's tests in `cli/` have one);
/// panics when it fails.
pub fn cli(args: &[&str]) -> String {
    let Some(bin) = option_env!("CARGO_BIN_EXE_connect-offsets") else {
        panic!("only the tool's tests (cli/tests) run the connect-offsets binary");
    };
    let out = std::process::Command::new(bin)
        .args(args)
        .env_remove("CONNECT_OFFSETS_STORE")
        .output()
        .expect("run connect-offsets");
    assert!(
        out.status.success(),
        "connect-offsets {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
