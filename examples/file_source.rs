//! A file-tailing source worker: every line appended to a file under a directory becomes one
//! Kafka record (key = the file's name, value = the line), and how far each file was read is an
//! offset in our store, under Kafka Connect's own names (`FileStreamSourceConnector`'s
//! `{"filename": …}` → `{"position": <byte after the last line sent>}`).
//!
//! The offsets URL picks the delivery guarantee:
//!
//! ```text
//! # at-least-once: produce, wait for the acks, then commit the offsets through the commit buffer
//! file_source --dir /var/log/app --topic lines --brokers 127.0.0.1:9092 \
//!     --offsets rocksdb:///var/lib/file-source/offsets --wal /var/lib/file-source/wal
//!
//! # exactly-once: the lines and their offsets in one Kafka transaction (the data topic is on the
//! # offsets topic's brokers: one transaction spans both)
//! file_source --dir /var/log/app --topic lines \
//!     --offsets 'kafka://127.0.0.1:9092/connect-offsets?exactly.once.group=connect-cluster&exactly.once.task=file-source/0'
//! ```
//!
//! Other options: `--connector NAME` (the offsets' namespace, default `file-source`), `--batch N`
//! (lines per commit, default 100), `--exit-when-caught-up` (stop once nothing is left to read,
//! instead of polling for more). It prints `resume <file> <position>` for each stored offset at
//! start and `committed <file> <position>` for each offset it commits. Exit codes: 0 done, 1 an
//! error, 2 usage, 3 fenced (another instance of the same task took over).
//!
//! What a crash costs: at-least-once re-sends the lines produced after the last offset commit
//! (duplicates in the topic, never a gap); exactly-once aborts the open transaction, so a
//! `read_committed` consumer sees every line once.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig};
use connect_offsets::store::kafka::{KafkaStore, TaskProducer};
use connect_offsets::store::{OffsetStore, StoreUrl};
use connect_offsets::{Error, Offset, OffsetKey, Partition, Value};
use rdkafka::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;

/// Exit code of an instance that was fenced by a newer one.
pub const EXIT_FENCED: i32 = 3;
/// Read at most this much of a file per pass.
const READ_CHUNK: u64 = 64 << 10;
/// How long an idle worker sleeps before looking at the files again.
const POLL: Duration = Duration::from_millis(50);
/// Bound on producing, committing and opening. Generous: a loaded machine can stall for a minute.
const TIMEOUT: Duration = Duration::from_secs(300);

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(run(&args));
}

/// The command line.
struct Args {
    dir: PathBuf,
    topic: String,
    offsets: String,
    brokers: Option<String>,
    wal: Option<PathBuf>,
    connector: String,
    batch: usize,
    exit_when_caught_up: bool,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut it = args.iter();
    let (mut dir, mut topic, mut offsets, mut brokers, mut wal) = (None, None, None, None, None);
    let (mut connector, mut batch, mut exit_when_caught_up) =
        ("file-source".to_string(), 100, false);
    while let Some(flag) = it.next() {
        let mut value = || it.next().cloned().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--dir" => dir = Some(PathBuf::from(value()?)),
            "--topic" => topic = Some(value()?),
            "--offsets" => offsets = Some(value()?),
            "--brokers" => brokers = Some(value()?),
            "--wal" => wal = Some(PathBuf::from(value()?)),
            "--connector" => connector = value()?,
            "--batch" => {
                batch = value()?
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or("--batch takes a positive number of lines")?
            }
            "--exit-when-caught-up" => exit_when_caught_up = true,
            other => return Err(format!("unknown option `{other}`")),
        }
    }
    Ok(Args {
        dir: dir.ok_or("--dir DIR is required")?,
        topic: topic.ok_or("--topic TOPIC is required")?,
        offsets: offsets.ok_or("--offsets URL is required")?,
        brokers,
        wal,
        connector,
        batch,
        exit_when_caught_up,
    })
}

/// Runs the worker with `args` (without the program name) and returns its exit code.
pub fn run(args: &[String]) -> i32 {
    let args = match parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("file_source: {e}");
            return 2;
        }
    };
    match work(&args) {
        Ok(()) => 0,
        Err(e @ Error::Fenced(_)) => {
            eprintln!("file_source: {e}");
            EXIT_FENCED
        }
        Err(e) => {
            eprintln!("file_source: {e}");
            1
        }
    }
}

/// Opens the offsets store the URL names and tails the files into the topic.
fn work(args: &Args) -> connect_offsets::Result<()> {
    let url = StoreUrl::parse(&args.offsets)?;
    let exactly_once = url.scheme == "kafka"
        && url
            .params
            .iter()
            .any(|(k, _)| k.starts_with("exactly.once."));
    if exactly_once {
        let brokers = url.location.split_once('/').map_or("", |(hosts, _)| hosts);
        require_topic(brokers, &args.topic)?;
        // The store's own transactional producer carries the lines, so they commit with the offsets.
        let store = KafkaStore::open_url(&url)?;
        // Fences the task's previous instance first: the offsets read below are its last commit.
        let task = store.task_producer()?;
        let mut sink = Sink::ExactlyOnce { task };
        tail(args, &store, &mut sink)
    } else {
        let brokers = args.brokers.as_deref().ok_or_else(|| {
            Error::Config("at-least-once mode needs --brokers HOST:PORT for the data topic".into())
        })?;
        let wal = args.wal.as_ref().ok_or_else(|| {
            Error::Config("at-least-once mode needs --wal DIR for the commit buffer's log".into())
        })?;
        require_topic(brokers, &args.topic)?;
        let store: Arc<dyn OffsetStore> = Arc::from(connect_offsets::open(&args.offsets)?);
        let mut config = CommitBufferConfig::new(wal);
        config.writer = args.connector.clone();
        config.flush_interval = None; // we commit after every batch of lines
        config.flush_timeout = TIMEOUT;
        let buffer = CommitBuffer::open(store, config)?;
        let producer = data_producer(brokers)?;
        let mut sink = Sink::AtLeastOnce {
            producer,
            buffer: &buffer,
        };
        let read = tail(args, &buffer, &mut sink);
        let closed = buffer.close();
        read.and(closed)
    }
}

/// Where the worker reads its offsets from: the store itself, or the commit buffer over it.
trait ReadOffsets {
    fn offset(&self, key: &OffsetKey) -> connect_offsets::Result<Option<Offset>>;
}

impl ReadOffsets for KafkaStore {
    fn offset(&self, key: &OffsetKey) -> connect_offsets::Result<Option<Offset>> {
        self.get(key)
    }
}

impl ReadOffsets for CommitBuffer {
    fn offset(&self, key: &OffsetKey) -> connect_offsets::Result<Option<Offset>> {
        self.get(key)
    }
}

/// Where lines go, and how their offsets are committed with them.
enum Sink<'a> {
    /// A plain idempotent producer; offsets are committed once every line before them is
    /// acknowledged, so a crash in between re-sends lines (duplicates), never skips one.
    AtLeastOnce {
        producer: BaseProducer<DeliveryErrors>,
        buffer: &'a CommitBuffer,
    },
    /// The task's transactional producer: lines and offsets in one transaction.
    ExactlyOnce { task: TaskProducer<'a> },
}

impl Sink<'_> {
    fn send(&mut self, topic: &str, file: &str, line: &[u8]) -> connect_offsets::Result<()> {
        match self {
            Sink::AtLeastOnce { producer, .. } => {
                let mut record = BaseRecord::to(topic).key(file.as_bytes()).payload(line);
                loop {
                    match producer.send(record) {
                        Ok(()) => return Ok(()),
                        Err((e, r)) if is_queue_full(&e) => {
                            producer.poll(Duration::from_millis(10));
                            record = r;
                        }
                        Err((e, _)) => {
                            return Err(Error::store(
                                "kafka",
                                format!("produce to `{topic}`: {e}"),
                            ));
                        }
                    }
                }
            }
            Sink::ExactlyOnce { task } => task.send(topic, Some(file.as_bytes()), Some(line)),
        }
    }

    fn commit(&mut self, offsets: Vec<(OffsetKey, Offset)>) -> connect_offsets::Result<()> {
        match self {
            Sink::AtLeastOnce { producer, buffer } => {
                // Every line must be in the topic before its offset may be committed.
                producer
                    .flush(TIMEOUT)
                    .map_err(|e| Error::store("kafka", format!("flush the data producer: {e}")))?;
                let failed = producer.context().failed.load(Ordering::SeqCst);
                if failed > 0 {
                    return Err(Error::store(
                        "kafka",
                        format!(
                            "{failed} lines were not delivered; their offsets are not committed"
                        ),
                    ));
                }
                for (key, offset) in offsets {
                    buffer.offer(key, offset)?;
                }
                buffer.commit().wait()?;
                Ok(())
            }
            Sink::ExactlyOnce { task } => {
                task.commit(offsets.into_iter().map(|(k, o)| (k, Some(o))))
            }
        }
    }
}

/// Reads new lines, sends them and commits their offsets, batch after batch.
fn tail(
    args: &Args,
    offsets: &dyn ReadOffsets,
    sink: &mut Sink<'_>,
) -> connect_offsets::Result<()> {
    let key = |file: &str| {
        OffsetKey::new(
            args.connector.as_str(),
            Partition::new().with("filename", file),
        )
    };
    // Where each file's next line starts: its stored offset, read once at start (after the
    // fence, in exactly-once mode), then kept here.
    let mut positions: BTreeMap<String, u64> = BTreeMap::new();
    for file in list_files(&args.dir)? {
        if let Some(offset) = offsets.offset(&key(&file))? {
            let position = match offset.get("position") {
                Some(Value::Int(p)) if *p >= 0 => *p as u64,
                other => {
                    return Err(Error::InvalidData(format!(
                        "the offset of `{file}` has no non-negative integer `position`: {other:?}"
                    )));
                }
            };
            println!("resume {file} {position}");
            positions.insert(file, position);
        }
    }
    loop {
        let mut sent = 0;
        let mut moved = Vec::new();
        for file in list_files(&args.dir)? {
            if sent >= args.batch {
                break;
            }
            let from = positions.get(&file).copied().unwrap_or(0);
            let lines = read_lines(&args.dir.join(&file), from, args.batch - sent)?;
            for line in &lines.lines {
                sink.send(&args.topic, &file, line)?;
            }
            sent += lines.lines.len();
            if lines.end > from {
                moved.push((file, lines.end));
            }
        }
        if moved.is_empty() {
            if args.exit_when_caught_up {
                println!("caught up");
                return Ok(());
            }
            std::thread::sleep(POLL);
            continue;
        }
        let commit = moved
            .iter()
            .map(|(file, end)| (key(file), Offset::new().with("position", *end as i64)))
            .collect();
        sink.commit(commit)?;
        for (file, end) in moved {
            println!("committed {file} {end}");
            positions.insert(file, end);
        }
    }
}

/// The regular files directly under `dir`, by name.
fn list_files(dir: &Path) -> connect_offsets::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io("read directory", dir, e))? {
        let entry = entry.map_err(|e| Error::io("read directory", dir, e))?;
        if entry.file_type().is_ok_and(|t| t.is_file())
            && let Some(name) = entry.file_name().to_str()
        {
            names.push(name.to_string());
        }
    }
    names.sort();
    Ok(names)
}

/// Complete lines of a file from a byte position.
struct Lines {
    /// Without their `\n`.
    lines: Vec<Vec<u8>>,
    /// The position after the last complete line (`from` when there is none).
    end: u64,
}

/// Up to `max` complete lines of `path` from byte `from`. A line still being written (no `\n`
/// yet) is left for a later pass.
fn read_lines(path: &Path, from: u64, max: usize) -> connect_offsets::Result<Lines> {
    let mut f = File::open(path).map_err(|e| Error::io("open", path, e))?;
    let len = f.metadata().map_err(|e| Error::io("stat", path, e))?.len();
    if len < from {
        // Truncated or replaced: reading on from the old position would skip or garble lines.
        return Err(Error::Input(format!(
            "{} is {len} bytes, shorter than its offset {from}: it was truncated or replaced; \
             reset its offset (connect-offsets reset) to read it from the start",
            path.display()
        )));
    }
    f.seek(SeekFrom::Start(from))
        .map_err(|e| Error::io("seek", path, e))?;
    let mut buf = Vec::new();
    f.take(READ_CHUNK)
        .read_to_end(&mut buf)
        .map_err(|e| Error::io("read", path, e))?;
    let mut lines = Vec::new();
    let mut end = 0;
    for (i, b) in buf.iter().enumerate() {
        if lines.len() == max {
            break;
        }
        if *b == b'\n' {
            lines.push(buf[end..i].to_vec());
            end = i + 1;
        }
    }
    if lines.is_empty() && buf.len() as u64 == READ_CHUNK {
        return Err(Error::Input(format!(
            "{} has a line longer than {READ_CHUNK} bytes at byte {from}",
            path.display()
        )));
    }
    Ok(Lines {
        lines,
        end: from + end as u64,
    })
}

/// The at-least-once mode's data producer: idempotent (no duplicates from its own retries),
/// `acks=all`, Java's partitioner (the same file's lines land in one partition, in order).
fn data_producer(brokers: &str) -> connect_offsets::Result<BaseProducer<DeliveryErrors>> {
    ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("partitioner", "murmur2_random")
        .set("linger.ms", "5")
        .set("message.timeout.ms", TIMEOUT.as_millis().to_string())
        .create_with_context(DeliveryErrors::default())
        .map_err(|e| Error::store("kafka", format!("create the data producer: {e}")))
}

/// Fails unless `topic` exists: a record for a missing topic would only fail at its delivery
/// timeout (the brokers need not create topics on demand, and the test broker does not).
fn require_topic(brokers: &str, topic: &str) -> connect_offsets::Result<()> {
    let client: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .map_err(|e| Error::store("kafka", format!("create a metadata client: {e}")))?;
    let metadata = client
        .client()
        .fetch_metadata(Some(topic), TIMEOUT)
        .map_err(|e| {
            Error::store(
                "kafka",
                format!("read the metadata of `{topic}` at {brokers}: {e}"),
            )
        })?;
    match metadata.topics().first() {
        Some(t) if t.error().is_none() && !t.partitions().is_empty() => Ok(()),
        _ => Err(Error::Config(format!(
            "the data topic `{topic}` does not exist at {brokers}: create it first"
        ))),
    }
}

fn is_queue_full(e: &rdkafka::error::KafkaError) -> bool {
    e.rdkafka_error_code() == Some(RDKafkaErrorCode::QueueFull)
}

/// Counts records librdkafka could not deliver.
#[derive(Default)]
struct DeliveryErrors {
    failed: AtomicU64,
}

impl rdkafka::ClientContext for DeliveryErrors {}

impl ProducerContext for DeliveryErrors {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, _)) = result {
            self.failed.fetch_add(1, Ordering::SeqCst);
            // Lines still queued when the worker stops on an error are purged: not news.
            if !matches!(
                e.rdkafka_error_code(),
                Some(RDKafkaErrorCode::PurgeQueue | RDKafkaErrorCode::PurgeInflight)
            ) {
                eprintln!("file_source: a line was not delivered: {e}");
            }
        }
    }
}
