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
//! (lines per commit, default 100), `--max-line-bytes N` and `--dead-letter PATH` (below),
//! `--exit-when-caught-up` (stop once nothing is left to read, instead of polling for more). It
//! prints `resume <file> <position>` for each stored offset it finds, `committed <file>
//! <position>` for each offset it commits and `caught up` before such an exit; warnings go to
//! stderr. Exit codes: 0 done, 1 an error, 2 usage, 3 fenced (another instance of the same task
//! took over).
//!
//! What a crash costs: at-least-once re-sends the lines produced after the last offset commit
//! (duplicates in the topic, never a gap); exactly-once aborts the open transaction, so a
//! `read_committed` consumer sees every line once.
//!
//! ## Which file an offset belongs to: rotation and truncation
//! As Vector's and Filebeat's file sources do, a file is known by its device and inode plus a
//! fingerprint: an FNV-1a hash of its first `min(256, position)` bytes. The offset keeps them next
//! to Connect's `position`: `{"position": 7310, "dev": 2049, "ino": 1835043,
//! "fingerprint": "9c1f0b3a8d2e4f61", "fingerprint_bytes": 256}`. An offset without them (written
//! by an earlier version of this worker, or by Connect) resumes the file of its name if the file
//! is at least `position` bytes long, and gets them at its next commit.
//!
//! - **Rotated by rename** (`app.log` renamed to `app.log.1`, a new `app.log` created; logrotate's
//!   default, shifts of `app.log.1` to `app.log.2` included), while running or stopped: the old
//!   file is found under its new name by inode and fingerprint, and its rest is read to its end
//!   under its original name (`app.log`); then the new `app.log` is read from byte 0. In the same
//!   commit the old file's offset moves to its new name (`app.log.1` at its end), so nothing of it
//!   is sent again under that name, and lines a late writer still appends to it are sent under it.
//! - **Copied and truncated** (logrotate's `copytruncate`), while running or stopped: a file of
//!   another inode that begins with the bytes the fingerprint of a truncated (or replaced) file
//!   covers is its copy, and its rest is read first, as above. Lines written between the copy and
//!   the truncation are lost, as logrotate says; a file copied and truncated before any of it was
//!   read is read again under its copy's name.
//! - **A copy beside a file being read**: a new file whose first 256 bytes are those of a file
//!   still read under its own name is taken for its copy and not read, and so is a shorter one
//!   all of whose bytes are that file's first (a copy being made), until it differs: Vector and
//!   Filebeat take files of one fingerprint for one file too, and read no file shorter than it.
//! - **Truncated or replaced** (shorter than the stored position, or another fingerprint), with no
//!   copy in the directory: read again from byte 0, with a warning on stderr.
//!
//! Two different files whose first 256 bytes are equal (a long common header) are taken for copies
//! of each other; Vector and Filebeat share this limit.
//!
//! ## Lines
//! A line ends at `\n`; a `\r` before it is dropped too, so `\r\n` files send the same records as
//! `\n` files (Connect's `FileStreamSourceTask` ends a line at `\n`, `\r\n` or a lone `\r`). A
//! lone `\r` does not end a line here: it is rarer as a line end (classic Mac OS) than as content
//! (progress output), and a line ending at a `\r` would depend on a byte not yet written. A line
//! still being written (no `\n` yet) waits for a later pass; the last line of a file that never
//! gets its `\n` is not sent, as in Connect.
//!
//! A line may be up to `--max-line-bytes` (default 1,000,000: librdkafka's default
//! `message.max.bytes`; the producers are given that plus 4 KiB for the key and the record's
//! framing, which fits the broker's default `message.max.bytes` of 1,048,588; a larger value needs
//! the topic's `max.message.bytes` raised to match). A longer line is not sent: stderr names its
//! file, byte position and length, and the position moves past it. With `--dead-letter PATH` it is
//! also appended to that file (synced before the offset moves past it; at least once) as a
//! header line `<filename>\t<position>\t<length>\n`, then its `<length>` bytes, then `\n`.
//!
//! ## File names
//! Every regular file directly under `--dir` is read (not symbolic links, not subdirectories). The
//! partition's `filename`, the records' key and the printed names are the file's name as is when it
//! is UTF-8 (as earlier versions of this worker and Connect have it). A name that is not UTF-8 is
//! written with each byte of an invalid sequence as `\xHH` (two lowercase hex digits) and each `\`
//! as `\\`: the name bytes `caf 0xE9 .log` become the string `caf\xe9.log`. Should a UTF-8 name
//! spell exactly the escaped form of another file's name, the non-UTF-8 one is skipped with a
//! warning.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
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
/// How many leading bytes of a file its fingerprint covers, at most.
const FINGERPRINT_BYTES: u64 = 256;
/// The default longest line: librdkafka's default `message.max.bytes`.
const DEFAULT_MAX_LINE_BYTES: usize = 1_000_000;
/// What a record needs besides its value: the key (a file name) and the record's framing.
const RECORD_ROOM: usize = 4096;
/// Read about this much of a file per pass at most (but always one whole line).
const PASS_BYTES: u64 = 8 << 20;
/// How long an idle worker sleeps before looking at the files again.
const POLL: Duration = Duration::from_millis(50);
/// Bound on producing, committing and opening. Generous: a loaded machine can stall for a minute.
const TIMEOUT: Duration = Duration::from_secs(300);

#[allow(dead_code)] // The tests compile this file as a module and call `run`.
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
    max_line_bytes: usize,
    dead_letter: Option<PathBuf>,
    exit_when_caught_up: bool,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut it = args.iter();
    let (mut dir, mut topic, mut offsets, mut brokers, mut wal) = (None, None, None, None, None);
    let (mut connector, mut batch, mut exit_when_caught_up) =
        ("file-source".to_string(), 100, false);
    let (mut max_line_bytes, mut dead_letter) = (DEFAULT_MAX_LINE_BYTES, None);
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
            "--max-line-bytes" => {
                // librdkafka refuses a `message.max.bytes` over 1,000,000,000.
                max_line_bytes = value()?
                    .parse()
                    .ok()
                    .filter(|&n| n > 0 && n <= 1_000_000_000 - RECORD_ROOM)
                    .ok_or("--max-line-bytes takes a number of bytes from 1 to 999,995,904")?
            }
            "--dead-letter" => dead_letter = Some(PathBuf::from(value()?)),
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
        max_line_bytes,
        dead_letter,
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

/// The producers' `message.max.bytes`: a line of `max_line_bytes` with its key must fit.
fn message_max_bytes(max_line_bytes: usize) -> usize {
    (max_line_bytes + RECORD_ROOM).max(1_000_000)
}

/// Opens the offsets store the URL names and tails the files into the topic.
fn work(args: &Args) -> connect_offsets::Result<()> {
    let mut url = StoreUrl::parse(&args.offsets)?;
    let exactly_once = url.scheme == "kafka"
        && url
            .params
            .iter()
            .any(|(k, _)| k.starts_with("exactly.once."));
    let dead_letter = DeadLetter::open(args.dead_letter.as_deref())?;
    if exactly_once {
        let brokers = url
            .location
            .split_once('/')
            .map_or("", |(hosts, _)| hosts)
            .to_string();
        require_topic(&brokers, &args.topic)?;
        // The store's own transactional producer carries the lines: it must take the longest.
        let needed = message_max_bytes(args.max_line_bytes);
        match url.params.iter().find(|(k, _)| k == "message.max.bytes") {
            None => url
                .params
                .push(("message.max.bytes".into(), needed.to_string())),
            Some((_, v)) if v.parse::<usize>().is_ok_and(|v| v >= needed) => {}
            Some((_, v)) => {
                return Err(Error::Settings(format!(
                    "the offsets URL's message.max.bytes={v} is under {needed}, what a line of \
                     --max-line-bytes {} needs with its key",
                    args.max_line_bytes
                )));
            }
        }
        // The lines commit with the offsets, in the store's transactions.
        let store = KafkaStore::open_url(&url)?;
        // Fences the task's previous instance first: the offsets read below are its last commit.
        let task = store.task_producer()?;
        let mut sink = Sink::ExactlyOnce { task };
        tail(args, &store, &mut sink, dead_letter)
    } else {
        let brokers = args.brokers.as_deref().ok_or_else(|| {
            Error::Settings(
                "at-least-once mode needs --brokers HOST:PORT for the data topic".into(),
            )
        })?;
        let wal = args.wal.as_ref().ok_or_else(|| {
            Error::Settings("at-least-once mode needs --wal DIR for the commit buffer's log".into())
        })?;
        require_topic(brokers, &args.topic)?;
        let store: Arc<dyn OffsetStore> = Arc::from(connect_offsets::open(&args.offsets)?);
        let mut config = CommitBufferConfig::new(wal);
        config.writer = args.connector.clone();
        config.flush_interval = None; // we commit after every batch of lines
        config.flush_timeout = TIMEOUT;
        let buffer = CommitBuffer::open(store, config)?;
        let producer = data_producer(brokers, args.max_line_bytes)?;
        let mut sink = Sink::AtLeastOnce {
            producer,
            buffer: &buffer,
        };
        let read = tail(args, &buffer, &mut sink, dead_letter);
        let closed = buffer.close();
        read.and(closed)
    }
}

/// Where the worker reads its offsets from: the store itself, or the commit buffer over it.
trait ReadOffsets {
    /// The connector's partitions and their offsets.
    fn stored(&self, connector: &str) -> connect_offsets::Result<Vec<(OffsetKey, Offset)>>;
}

impl ReadOffsets for KafkaStore {
    fn stored(&self, connector: &str) -> connect_offsets::Result<Vec<(OffsetKey, Offset)>> {
        self.partitions(connector)
    }
}

impl ReadOffsets for CommitBuffer {
    fn stored(&self, connector: &str) -> connect_offsets::Result<Vec<(OffsetKey, Offset)>> {
        self.partitions(connector)
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
                                format!("produce to `{topic}` a line of `{file}`: {e}"),
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

/// Which file an offset describes: device, inode and a fingerprint of its first bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
struct FileId {
    dev: u64,
    ino: u64,
    /// FNV-1a of the first `fingerprint_bytes` bytes.
    fingerprint: u64,
    /// `min(FINGERPRINT_BYTES, position)` when written.
    fingerprint_bytes: u64,
}

/// How far a file was read, and which file that is.
#[derive(Clone, Debug, PartialEq)]
struct Mark {
    /// The byte after the last line sent (or skipped).
    position: u64,
    /// `None`: an offset of an earlier version, with `position` only.
    id: Option<FileId>,
}

impl Mark {
    fn decode(file: &str, offset: &Offset) -> connect_offsets::Result<Mark> {
        let bad = |what: &str| {
            Error::InvalidData(format!(
                "the offset of `{file}` has {what}: {offset:?}; reset it (connect-offsets reset) \
                 to read the file from its start"
            ))
        };
        let int = |name: &str| match offset.get(name) {
            Some(Value::Int(n)) => Ok(Some(*n)),
            None | Some(Value::Null) => Ok(None),
            Some(_) => Err(bad(&format!("a `{name}` that is not an integer"))),
        };
        let position = match int("position")? {
            Some(p) if p >= 0 => p as u64,
            _ => return Err(bad("no non-negative integer `position`")),
        };
        let fingerprint = match offset.get("fingerprint") {
            Some(Value::String(s)) => Some(
                u64::from_str_radix(s, 16)
                    .map_err(|_| bad("a `fingerprint` that is not 16 hex digits"))?,
            ),
            None | Some(Value::Null) => None,
            Some(_) => return Err(bad("a `fingerprint` that is not a string")),
        };
        let id = match (
            int("dev")?,
            int("ino")?,
            fingerprint,
            int("fingerprint_bytes")?,
        ) {
            (Some(dev), Some(ino), Some(fingerprint), Some(n)) if n >= 0 => Some(FileId {
                dev: dev as u64,
                ino: ino as u64,
                fingerprint,
                fingerprint_bytes: n as u64,
            }),
            // Connect's offsets, and ours before the identity was kept.
            (None, None, None, None) => None,
            _ => {
                return Err(bad(
                    "part of `dev`, `ino`, `fingerprint`, `fingerprint_bytes`",
                ));
            }
        };
        Ok(Mark { position, id })
    }

    fn encode(&self) -> Offset {
        let offset = Offset::new().with("position", self.position as i64);
        match self.id {
            // Inode and device numbers are stored as Connect's INT64, bit for bit.
            Some(id) => offset
                .with("dev", id.dev as i64)
                .with("ino", id.ino as i64)
                .with("fingerprint", format!("{:016x}", id.fingerprint))
                .with("fingerprint_bytes", id.fingerprint_bytes as i64),
            None => offset,
        }
    }
}

/// Whether `e` is a file that was not found: renamed or deleted since the directory was listed.
fn gone(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
}

/// FNV-1a, 64 bits: a fingerprint, not a defence against crafted collisions.
fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_on(0xcbf2_9ce4_8422_2325, bytes)
}

/// FNV-1a of a prefix whose hash is `h`, followed by `bytes`.
fn fnv1a_on(h: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(h, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The first `n` bytes of a file (fewer if it is shorter).
fn head(found: &Found, n: u64) -> connect_offsets::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(n as usize);
    found
        .open()?
        .take(n)
        .read_to_end(&mut head)
        .map_err(|e| Error::io("read", &found.path, e))?;
    Ok(head)
}

/// The fingerprint of the first `n` bytes of a file; `None` if it has fewer.
fn fingerprint(found: &Found, n: u64) -> connect_offsets::Result<Option<u64>> {
    let head = head(found, n)?;
    Ok((head.len() as u64 == n).then(|| fnv1a(&head)))
}

/// A regular file found in the directory.
#[derive(Debug)]
struct Found {
    path: PathBuf,
    dev: u64,
    ino: u64,
    len: u64,
}

impl Found {
    /// Opens the file listed; a file renamed or deleted since (another inode under its name, or
    /// none) is an error that `gone` tells.
    fn open(&self) -> connect_offsets::Result<File> {
        let path = &self.path;
        let f = File::open(path).map_err(|e| Error::io("open", path, e))?;
        let meta = f.metadata().map_err(|e| Error::io("stat", path, e))?;
        if (meta.dev(), meta.ino()) != (self.dev, self.ino) {
            let replaced = std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "replaced since the directory was listed",
            );
            return Err(Error::io("open", path, replaced));
        }
        Ok(f)
    }

    /// This file's identity with a fingerprint of its first `n` bytes (`None`: it has fewer).
    fn id(&self, n: u64) -> connect_offsets::Result<Option<FileId>> {
        Ok(fingerprint(self, n)?.map(|fingerprint| FileId {
            dev: self.dev,
            ino: self.ino,
            fingerprint,
            fingerprint_bytes: n,
        }))
    }

    /// Whether this is the file `mark` describes, read to `mark.position` at most.
    fn is(&self, mark: &Mark) -> connect_offsets::Result<bool> {
        let Some(id) = mark.id else {
            return Ok(false);
        };
        Ok(self.dev == id.dev
            && self.ino == id.ino
            && self.len >= mark.position
            && fingerprint(self, id.fingerprint_bytes)? == Some(id.fingerprint))
    }

    /// Whether this is a copy of the file `mark` describes: another inode with the first bytes
    /// the fingerprint covers (all that was read, up to 256 bytes). It is shorter than
    /// `mark.position` if the original grew after the copy: then its rest is empty.
    fn is_copy_of(&self, mark: &Mark) -> connect_offsets::Result<bool> {
        let Some(id) = mark.id else {
            return Ok(false);
        };
        Ok(id.fingerprint_bytes > 0
            && (self.dev, self.ino) != (id.dev, id.ino)
            && fingerprint(self, id.fingerprint_bytes)? == Some(id.fingerprint))
    }
}

/// The partition's `filename` for a file name: the name itself when it is UTF-8, else each byte
/// of an invalid sequence as `\xHH` and each `\` as `\\` (see the module's documentation).
fn partition_name(name: &OsStr) -> String {
    if let Some(s) = name.to_str() {
        return s.to_string();
    }
    let mut out = String::new();
    for chunk in name.as_bytes().utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                out.push_str("\\\\");
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// The regular files directly under `dir`, by partition name; a non-UTF-8 name whose escaped
/// form is another file's name is left out (and named in `clashes`).
fn list_files(
    dir: &Path,
    clashes: &mut BTreeSet<PathBuf>,
) -> connect_offsets::Result<BTreeMap<String, Found>> {
    let mut files = BTreeMap::new();
    let mut escaped = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io("read directory", dir, e))? {
        let entry = entry.map_err(|e| Error::io("read directory", dir, e))?;
        let Ok(meta) = entry.metadata() else {
            continue; // Deleted since the listing.
        };
        if !meta.file_type().is_file() {
            continue;
        }
        let raw = entry.file_name();
        let found = Found {
            path: entry.path(),
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
        };
        if raw.to_str().is_some() {
            files.insert(partition_name(&raw), found);
        } else {
            escaped.push((partition_name(&raw), found));
        }
    }
    for (name, found) in escaped {
        match files.entry(name) {
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(found);
            }
            std::collections::btree_map::Entry::Occupied(e) => {
                if clashes.insert(found.path.clone()) {
                    eprintln!(
                        "file_source: warning: skipping {}: its name is not UTF-8 and its \
                         escaped form `{}` is the name of another file",
                        found.path.display(),
                        e.key()
                    );
                }
            }
        }
    }
    Ok(files)
}

/// What the worker knows of each file name: the offsets it read and committed.
struct Tail<'a> {
    args: &'a Args,
    /// By partition name: the stored offsets, as this worker moved them.
    marks: BTreeMap<String, Mark>,
    /// Marks changed since the last commit.
    dirty: BTreeSet<String>,
    /// Non-UTF-8 names skipped (warned about once).
    clashes: BTreeSet<PathBuf>,
    /// Copies noted on stderr (each once).
    copies: BTreeSet<String>,
    dead_letter: Option<DeadLetter>,
}

/// One pass's plan: the file each name's mark is found in.
struct Plan {
    /// Partition name → the name of the file its mark describes now.
    located: BTreeMap<String, String>,
}

impl Plan {
    /// The name whose mark claims file `file`.
    fn claimer(&self, file: &str) -> Option<&str> {
        self.located
            .iter()
            .find(|(_, f)| f.as_str() == file)
            .map(|(k, _)| k.as_str())
    }
}

impl Tail<'_> {
    fn key(&self, file: &str) -> OffsetKey {
        OffsetKey::new(
            self.args.connector.as_str(),
            Partition::new().with("filename", file),
        )
    }

    /// Reads the stored offsets of the connector: every file name it committed, present or not
    /// (a file renamed while the worker was stopped is found by its old name's offset).
    fn load(&mut self, offsets: &dyn ReadOffsets) -> connect_offsets::Result<()> {
        for (key, offset) in offsets.stored(&self.args.connector)? {
            let Some(Value::String(name)) = key.partition().and_then(|p| p.get("filename")) else {
                eprintln!(
                    "file_source: warning: ignoring a partition of `{}` without a string \
                     `filename`: {key:?}",
                    self.args.connector
                );
                continue;
            };
            let mark = Mark::decode(name, &offset)?;
            println!("resume {name} {}", mark.position);
            self.marks.insert(name.clone(), mark);
        }
        Ok(())
    }

    /// Finds each mark's file: under its own name, renamed, or copied; resets the marks of files
    /// that were truncated or replaced, and starts marks for new files.
    fn plan(&mut self, files: &BTreeMap<String, Found>) -> connect_offsets::Result<Plan> {
        let mut located: BTreeMap<String, String> = BTreeMap::new();
        // Under its own name: the same inode and fingerprint, or an earlier version's offset
        // (position only) that the file is long enough for, which takes the file's identity.
        for (name, mark) in self.marks.iter_mut() {
            let Some(found) = files.get(name) else {
                continue;
            };
            if mark.id.is_none() && found.len >= mark.position {
                mark.id = found.id(mark.position.min(FINGERPRINT_BYTES))?;
            }
            if found.is(mark)? {
                located.insert(name.clone(), name.clone());
            }
        }
        // Renamed: the same inode and fingerprint under another name.
        for (name, mark) in &self.marks {
            if located.contains_key(name) || mark.id.is_none() {
                continue;
            }
            for (file, found) in files {
                if !located.values().any(|f| f == file) && found.is(mark)? {
                    located.insert(name.clone(), file.clone());
                    break;
                }
            }
        }
        // Copied (and the original truncated or replaced): the same first bytes.
        for (name, mark) in &self.marks {
            if located.contains_key(name) {
                continue;
            }
            for (file, found) in files {
                if !located.values().any(|f| f == file) && found.is_copy_of(mark)? {
                    if self.copies.insert(format!("{name}\0{file}")) {
                        eprintln!(
                            "file_source: `{file}` is a copy of `{name}` (the same first {} \
                             bytes), which was truncated or replaced: reading the copy on from \
                             byte {} as `{name}`",
                            mark.id.map_or(0, |id| id.fingerprint_bytes),
                            mark.position
                        );
                    }
                    located.insert(name.clone(), file.clone());
                    break;
                }
            }
        }
        // The files no mark claims: new, truncated or replaced, or the new file of a rotated name.
        for (file, found) in files {
            if located.values().any(|f| f == file) {
                continue;
            }
            let mark = match self.marks.get(file).cloned() {
                // A rotated name: its old file is read to its end first (see `settle`).
                Some(_) if located.contains_key(file) => continue,
                Some(mark) => {
                    eprintln!(
                        "file_source: warning: `{file}` was truncated or replaced (it is {} bytes, \
                         its offset {}{}): reading it again from byte 0",
                        found.len,
                        mark.position,
                        if found.len >= mark.position {
                            ", with other first bytes or another inode"
                        } else {
                            ""
                        }
                    );
                    Mark {
                        position: 0,
                        id: found.id(0)?,
                    }
                }
                // Nothing to read yet, and it may be a copy being written.
                None if found.len == 0 => continue,
                None if self.is_copy(file, found, files, &located)? => continue,
                None => Mark {
                    position: 0,
                    id: found.id(0)?,
                },
            };
            self.marks.insert(file.clone(), mark);
            self.dirty.insert(file.clone());
            located.insert(file.clone(), file.clone());
        }
        Ok(Plan { located })
    }

    /// Whether a new file is a copy of a file still read under its own name (a hard link to it,
    /// or its first 256 bytes), or may be one being made (shorter than 256 bytes, all of them the
    /// original's first). Its lines are the original's, so it is not read; should the original be
    /// truncated, its rest is read under the original's name.
    fn is_copy(
        &mut self,
        file: &str,
        found: &Found,
        files: &BTreeMap<String, Found>,
        located: &BTreeMap<String, String>,
    ) -> connect_offsets::Result<bool> {
        let n = found.len.min(FINGERPRINT_BYTES);
        let first = head(found, n)?;
        for (name, at) in located {
            let original = &files[at];
            if name != at || original.len < n {
                continue;
            }
            let same_inode = (original.dev, original.ino) == (found.dev, found.ino);
            if same_inode || head(original, n)? == first {
                if n == FINGERPRINT_BYTES && self.copies.insert(file.to_string()) {
                    eprintln!(
                        "file_source: `{file}` begins with the same {n} bytes as `{name}`: taken \
                         for its copy, not read (its lines are sent as `{name}`'s)"
                    );
                }
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Once the old files of rotated names are read to their ends, moves their marks to their
    /// new names and starts each rotated name's new file at byte 0, in one commit.
    fn settle(
        &mut self,
        plan: &Plan,
        files: &BTreeMap<String, Found>,
        drained: &BTreeSet<String>,
    ) -> connect_offsets::Result<()> {
        // Rotated names whose new file exists, and is not a copy being made (copytruncate
        // renames the older copies first: the new `app.log.1` is then `app.log`'s copy).
        let mut rotated: BTreeSet<&String> = BTreeSet::new();
        for (name, file) in &plan.located {
            let Some(found) = files.get(name) else {
                continue;
            };
            if name != file
                && (plan.claimer(name).is_some()
                    || !self.is_copy(name, found, files, &plan.located)?)
            {
                rotated.insert(name);
            }
        }
        // A new file still claimed by a name that cannot settle yet waits with it.
        loop {
            let before = rotated.len();
            let keep: BTreeSet<&String> = rotated
                .iter()
                .filter(|name| {
                    plan.claimer(name)
                        .is_none_or(|c| rotated.iter().any(|r| r.as_str() == c))
                })
                .copied()
                .collect();
            rotated = keep;
            if rotated.len() == before {
                break;
            }
        }
        if rotated.is_empty() || rotated.iter().any(|name| !drained.contains(*name)) {
            return Ok(());
        }
        let mut moved = BTreeMap::new();
        for name in &rotated {
            let file = &plan.located[*name];
            let found = &files[file];
            let mark = &self.marks[*name];
            let id = mark.id.map(|id| FileId {
                dev: found.dev,
                ino: found.ino,
                ..id
            });
            // A copy shorter than the position (made before the original grew further, or still
            // being written) keeps it at its last line end: never inside a line.
            let position = if found.len < mark.position {
                last_line_end(found, found.len)?
            } else {
                mark.position
            };
            moved.insert(file.clone(), Mark { position, id });
        }
        let mut news = Vec::new();
        for name in &rotated {
            if !moved.contains_key(*name) {
                news.push(*name);
                moved.insert(
                    (*name).clone(),
                    Mark {
                        position: 0,
                        id: files[*name].id(0)?,
                    },
                );
            }
        }
        for name in news {
            eprintln!(
                "file_source: `{name}` was rotated (its earlier file, `{}`, is read to its end): \
                 reading the new `{name}` from byte 0",
                plan.located[name]
            );
        }
        for (name, mark) in moved {
            self.dirty.insert(name.clone());
            self.marks.insert(name, mark);
        }
        Ok(())
    }

    /// Copies a skipped line to the dead-letter file, if there is one, and says so.
    fn skip(
        &mut self,
        name: &str,
        src: (&File, &Path),
        at: u64,
        len: u64,
    ) -> connect_offsets::Result<()> {
        let max = self.args.max_line_bytes;
        match &mut self.dead_letter {
            Some(dl) => {
                dl.append(name, src, at, len)?;
                eprintln!(
                    "file_source: error: `{name}` has a line of {len} bytes at byte {at}, over \
                     --max-line-bytes {max}: not sent; written to the dead-letter file {}",
                    dl.path.display()
                );
            }
            None => eprintln!(
                "file_source: error: `{name}` has a line of {len} bytes at byte {at}, over \
                 --max-line-bytes {max}: skipped (not sent); --dead-letter PATH keeps such lines"
            ),
        }
        Ok(())
    }
}

/// Reads new lines, sends them and commits their offsets, batch after batch.
fn tail(
    args: &Args,
    offsets: &dyn ReadOffsets,
    sink: &mut Sink<'_>,
    dead_letter: Option<DeadLetter>,
) -> connect_offsets::Result<()> {
    // The stored offsets are read once at start (after the fence, in exactly-once mode), then
    // kept here.
    let mut t = Tail {
        args,
        marks: BTreeMap::new(),
        dirty: BTreeSet::new(),
        clashes: BTreeSet::new(),
        copies: BTreeSet::new(),
        dead_letter,
    };
    t.load(offsets)?;
    loop {
        let files = list_files(&args.dir, &mut t.clashes)?;
        // A file renamed or deleted since the listing makes the plan stale: plan again.
        let before = (t.marks.clone(), t.dirty.clone());
        let plan = match t.plan(&files) {
            Ok(plan) => plan,
            Err(e) if gone(&e) => {
                (t.marks, t.dirty) = before;
                continue;
            }
            Err(e) => return Err(e),
        };
        let mut sent = 0;
        let mut drained = BTreeSet::new();
        for (name, file) in &plan.located {
            if sent >= args.batch {
                break;
            }
            let found = &files[file];
            let from = t.marks[name].position;
            let chunk = match read_lines(found, from, args.batch - sent, args.max_line_bytes) {
                Ok(chunk) => chunk,
                Err(e) if gone(&e) => continue, // Renamed since the listing: the next pass.
                Err(e) => return Err(e),
            };
            for line in &chunk.lines {
                sink.send(&args.topic, name, line)?;
            }
            for &(at, len) in &chunk.skipped {
                t.skip(name, (&chunk.file, &found.path), at, len)?;
            }
            sent += chunk.lines.len();
            if !chunk.more {
                drained.insert(name.clone());
            }
            if chunk.end > from {
                let mark = t.marks.get_mut(name).expect("a located mark");
                mark.position = chunk.end;
                // The fingerprint grows with the position up to its full length, over the bytes
                // just read (the file may be truncated and rewritten by now).
                if let Some(id) = mark.id
                    && id.fingerprint_bytes == from
                    && from < FINGERPRINT_BYTES
                {
                    mark.id = Some(FileId {
                        fingerprint: fnv1a_on(id.fingerprint, &chunk.head),
                        fingerprint_bytes: from + chunk.head.len() as u64,
                        ..id
                    });
                }
                t.dirty.insert(name.clone());
            }
        }
        match t.settle(&plan, &files, &drained) {
            Err(e) if gone(&e) => {} // Renamed since the listing: the next pass.
            settled => settled?,
        }
        if t.dirty.is_empty() {
            if args.exit_when_caught_up {
                println!("caught up");
                return Ok(());
            }
            std::thread::sleep(POLL);
            continue;
        }
        if let Some(dl) = &mut t.dead_letter {
            dl.sync()?; // A skipped line is kept before the offset moves past it.
        }
        let dirty = std::mem::take(&mut t.dirty);
        let commit = dirty
            .iter()
            .map(|name| (t.key(name), t.marks[name].encode()))
            .collect();
        sink.commit(commit)?;
        for name in dirty {
            println!("committed {name} {}", t.marks[&name].position);
        }
    }
}

/// Complete lines of a file from a byte position.
struct Chunk {
    /// Without their `\n` or `\r\n`.
    lines: Vec<Vec<u8>>,
    /// Lines over the limit, not in `lines`: where each starts and its length (without its end).
    skipped: Vec<(u64, u64)>,
    /// The position after the last complete line (`from` when there is none).
    end: u64,
    /// Whether the read stopped at its line or byte budget rather than at the last complete line.
    more: bool,
    /// The bytes from `from` to `end` that lie in the first `FINGERPRINT_BYTES` of the file.
    head: Vec<u8>,
    /// The file read (the same file if it has been renamed since).
    file: File,
}

/// Up to `max_lines` complete lines of `path` from byte `from`, each of `max_line` bytes at most
/// (longer ones are skipped, in `skipped`). A line still being written (no `\n` yet) is left for
/// a later pass. Memory stays within the budget whatever the length of a line.
fn read_lines(
    found: &Found,
    from: u64,
    max_lines: usize,
    max_line: usize,
) -> connect_offsets::Result<Chunk> {
    let path = &found.path;
    let mut f = found.open()?;
    let file = f.try_clone().map_err(|e| Error::io("open", path, e))?;
    f.seek(SeekFrom::Start(from))
        .map_err(|e| Error::io("seek", path, e))?;
    let mut r = BufReader::with_capacity(64 << 10, f);
    let mut chunk = Chunk {
        lines: Vec::new(),
        skipped: Vec::new(),
        end: from,
        more: false,
        head: Vec::new(),
        file,
    };
    let (mut line, mut line_len, mut last, mut pos, mut bytes) = (Vec::new(), 0u64, 0u8, from, 0);
    loop {
        if chunk.lines.len() >= max_lines || bytes >= PASS_BYTES {
            chunk.more = true;
            break;
        }
        let buf = r.fill_buf().map_err(|e| Error::io("read", path, e))?;
        if buf.is_empty() {
            break; // A line without its `\n` waits.
        }
        let newline = buf.iter().position(|&b| b == b'\n');
        let take = newline.unwrap_or(buf.len());
        // Keep up to the longest line and a `\r`; of a longer one only count the bytes.
        let room = (max_line + 1).saturating_sub(line.len());
        line.extend_from_slice(&buf[..take.min(room)]);
        if take > 0 {
            last = buf[take - 1];
        }
        line_len += take as u64;
        let consumed = take + usize::from(newline.is_some());
        if pos < FINGERPRINT_BYTES {
            let k = ((FINGERPRINT_BYTES - pos) as usize).min(consumed);
            chunk.head.extend_from_slice(&buf[..k]);
        }
        r.consume(consumed);
        pos += consumed as u64;
        if newline.is_some() {
            let len = line_len - u64::from(line_len > 0 && last == b'\r');
            if len > max_line as u64 {
                chunk.skipped.push((chunk.end, len));
            } else {
                line.truncate(len as usize);
                chunk.lines.push(std::mem::take(&mut line));
            }
            bytes += line_len;
            chunk.end = pos;
            line.clear();
            line_len = 0;
        }
    }
    // Only what complete lines cover.
    let covered = chunk.end.min(FINGERPRINT_BYTES).saturating_sub(from);
    chunk.head.truncate(covered as usize);
    Ok(chunk)
}

/// The position after the last `\n` in the first `len` bytes of a file (0 if none in its last
/// MiB: the line before it is then taken for unread).
fn last_line_end(found: &Found, len: u64) -> connect_offsets::Result<u64> {
    let path = &found.path;
    let from = len.saturating_sub(1 << 20);
    let mut f = found.open()?;
    f.seek(SeekFrom::Start(from))
        .map_err(|e| Error::io("seek", path, e))?;
    let mut tail = Vec::new();
    f.take(len - from)
        .read_to_end(&mut tail)
        .map_err(|e| Error::io("read", path, e))?;
    Ok(tail
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| from + i as u64 + 1))
}

/// Where lines over `--max-line-bytes` are kept.
struct DeadLetter {
    path: PathBuf,
    file: File,
}

impl DeadLetter {
    fn open(path: Option<&Path>) -> connect_offsets::Result<Option<DeadLetter>> {
        let Some(path) = path else {
            return Ok(None);
        };
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| Error::io("open the dead-letter file", path, e))?;
        Ok(Some(DeadLetter {
            path: path.to_path_buf(),
            file,
        }))
    }

    /// Appends `<name>\t<at>\t<len>\n`, then the `len` bytes of `src` (at `from`) at `at`, then
    /// `\n`.
    fn append(
        &mut self,
        name: &str,
        (mut src, from): (&File, &Path),
        at: u64,
        len: u64,
    ) -> connect_offsets::Result<()> {
        let dl = &self.path;
        src.seek(SeekFrom::Start(at))
            .map_err(|e| Error::io("seek", from, e))?;
        let mut record = Vec::new();
        writeln!(record, "{name}\t{at}\t{len}").expect("writing to a Vec");
        self.file
            .write_all(&record)
            .map_err(|e| Error::io("write", dl, e))?;
        let copied = std::io::copy(&mut src.take(len), &mut self.file)
            .map_err(|e| Error::io("copy a line to the dead-letter file", dl, e))?;
        if copied != len {
            return Err(Error::Input(format!(
                "{} changed while its line at byte {at} was copied to the dead-letter file {}",
                from.display(),
                dl.display()
            )));
        }
        self.file
            .write_all(b"\n")
            .map_err(|e| Error::io("write", dl, e))
    }

    fn sync(&mut self) -> connect_offsets::Result<()> {
        self.file
            .sync_data()
            .map_err(|e| Error::io("sync", &self.path, e))
    }
}

/// The at-least-once mode's data producer: idempotent (no duplicates from its own retries),
/// `acks=all`, Java's partitioner (the same file's lines land in one partition, in order), and
/// room for the longest line.
fn data_producer(
    brokers: &str,
    max_line_bytes: usize,
) -> connect_offsets::Result<BaseProducer<DeliveryErrors>> {
    ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("partitioner", "murmur2_random")
        .set("linger.ms", "5")
        .set(
            "message.max.bytes",
            message_max_bytes(max_line_bytes).to_string(),
        )
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
        _ => Err(Error::Settings(format!(
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
