//! The example worker `examples/file_source.rs` on the real broker, SIGKILLed at random points
//! while a writer thread appends lines to its files, and restarted each time. At the end a
//! `read_committed` consumer of the data topic holds every line exactly once, in order per file,
//! when the offsets are a Kafka store in exactly-once mode; every line at least once, in order of
//! first appearance, with the duplicates counted, when they are RocksDB behind the commit buffer.
//! A second instance of the same task fences the first, which stops and writes nothing more.
//!
//! `EOS_CYCLES` sets the kills per mode (default 20); `EOS_SEED` the random kill points (printed).
//! The child is this test binary re-run with `FILE_SOURCE_ARGS` set: it runs the example's own
//! `run` (the example's source is compiled in here as a module).

#![cfg(feature = "kafka")]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::kafka_util;

use crate::example_file_source as file_source;

use kafka_util::TopicGuard;

const FILES: [&str; 3] = ["a.log", "b.log", "c.log"];
/// Generous: this VM stops for up to 2 minutes at times (CONTRIBUTING.md).
const PATIENCE: Duration = Duration::from_secs(300);

/// The child: the example worker with the arguments the parent gave.
#[test]
fn child_entry() {
    let Ok(args) = std::env::var("FILE_SOURCE_ARGS") else {
        return; // Not a child.
    };
    let args: Vec<String> = args.split('\u{1f}').map(String::from).collect();
    // libtest printed `test child_entry ... ` with no newline: end that line before the worker's.
    println!();
    std::process::exit(file_source::run(&args));
}

/// What a running worker printed so far.
#[derive(Default, Debug)]
struct Printed {
    resumed: BTreeMap<String, u64>,
    /// Every `committed <file> <position>`, in order.
    committed: Vec<(String, u64)>,
    caught_up: bool,
}

/// One worker process.
struct Worker {
    child: Child,
    printed: Arc<Mutex<Printed>>,
    stdout: Option<JoinHandle<()>>,
    stderr: PathBuf,
}

impl Worker {
    fn start(args: &[String], stderr: PathBuf) -> Worker {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "exactly_once::child_entry",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("FILE_SOURCE_ARGS", args.join("\u{1f}"))
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let printed = Arc::new(Mutex::new(Printed::default()));
        let out = child.stdout.take().unwrap();
        let stdout = {
            let printed = Arc::clone(&printed);
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    let mut p = printed.lock().unwrap();
                    let words: Vec<&str> = line.split(' ').collect();
                    match words.as_slice() {
                        ["resume", file, pos] => {
                            p.resumed.insert(file.to_string(), pos.parse().unwrap());
                        }
                        ["committed", file, pos] => {
                            p.committed.push((file.to_string(), pos.parse().unwrap()))
                        }
                        ["caught", "up"] => p.caught_up = true,
                        _ => {}
                    }
                }
            })
        };
        Worker {
            child,
            printed,
            stdout: Some(stdout),
            stderr,
        }
    }

    /// Waits until `done` holds for what it printed, failing the test if the worker exits first.
    fn wait_for(&mut self, what: &str, done: impl Fn(&Printed) -> bool) {
        let t0 = Instant::now();
        while !done(&self.printed.lock().unwrap()) {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("the worker exited ({status}) before {what}: {}", self.log());
            }
            assert!(
                t0.elapsed() < PATIENCE,
                "no {what} in {PATIENCE:?}: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits for the worker to exit by itself.
    fn exit_status(&mut self) -> ExitStatus {
        let t0 = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                self.stdout.take().unwrap().join().unwrap();
                return status;
            }
            assert!(
                t0.elapsed() < PATIENCE,
                "the worker did not exit: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGKILLs the worker; it must not have exited by itself before.
    fn kill(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!("the worker exited by itself ({status}): {}", self.log());
        }
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        self.stdout.take().unwrap().join().unwrap();
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Where each file stands after this worker: its last commit, else where it resumed.
    fn positions(&self) -> BTreeMap<String, u64> {
        let p = self.printed.lock().unwrap();
        let mut at = p.resumed.clone();
        at.extend(p.committed.iter().cloned());
        at
    }
}

impl Drop for Worker {
    /// A test that fails leaves no worker behind.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A thread appending numbered lines to the files, now and then one line in two writes (the
/// worker must leave a line without its `\n` for later).
struct Appender {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<BTreeMap<String, u64>>>,
}

impl Appender {
    fn start(dir: &Path, pause: Duration) -> Appender {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (dir, stop) = (dir.to_path_buf(), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut files: Vec<_> = FILES
                    .iter()
                    .map(|name| {
                        let f = std::fs::OpenOptions::new()
                            .create(true)
                            .append(true)
                            .open(dir.join(name))
                            .unwrap();
                        (name.to_string(), f, 0u64)
                    })
                    .collect();
                let mut n = 0usize;
                while !stop.load(Ordering::SeqCst) {
                    let (name, f, count) = &mut files[n % FILES.len()];
                    let line = format!("{name} line {count}\n");
                    if n.is_multiple_of(7) {
                        let (head, tail) = line.as_bytes().split_at(line.len() / 2);
                        f.write_all(head).unwrap();
                        std::thread::sleep(Duration::from_millis(1));
                        f.write_all(tail).unwrap();
                    } else {
                        f.write_all(line.as_bytes()).unwrap();
                    }
                    *count += 1;
                    n += 1;
                    std::thread::sleep(pause);
                }
                files.into_iter().map(|(name, _, n)| (name, n)).collect()
            })
        };
        Appender {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops and returns how many lines each file got.
    fn finish(mut self) -> BTreeMap<String, u64> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap()
    }
}

/// A small xorshift, seeded from `EOS_SEED` or the clock (printed, to replay a run).
struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        let seed = std::env::var("EOS_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        println!("EOS_SEED={seed}");
        Rng(seed)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn cycles() -> u32 {
    std::env::var("EOS_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
}

/// A data topic of 2 partitions, deleted at the end.
fn data_topic(what: &str) -> TopicGuard {
    let topic = TopicGuard::new(what);
    kafka_util::create_topic(&topic, 2, &[]);
    topic
}

/// The worker's arguments: the files, the data topic and the offsets `mode` arguments.
fn worker_args(dir: &Path, topic: &str, mode: &[String]) -> Vec<String> {
    let mut args = vec![
        "--dir".to_string(),
        dir.display().to_string(),
        "--topic".into(),
        topic.into(),
        "--batch".into(),
        "50".into(),
    ];
    args.extend_from_slice(mode);
    args
}

/// Kills the worker `cycles()` times at random points, then lets one more run catch up with the
/// files; returns how many lines each file got and where the last worker left each file.
fn kill_cycles(tmp: &Path, args: &[String]) -> (BTreeMap<String, u64>, BTreeMap<String, u64>, u32) {
    let appender = Appender::start(&tmp.join("files"), Duration::from_millis(2));
    let mut rng = Rng::new();
    let cycles = cycles();
    let mut positions = BTreeMap::new();
    for cycle in 0..cycles {
        let mut worker = Worker::start(args, tmp.join(format!("stderr.{cycle}")));
        // A quarter of the kills land anywhere from the start (opening, fencing, reading the
        // offsets); the others after the worker committed, mid-stream.
        if rng.below(4) != 0 {
            worker.wait_for("a commit", |p| !p.committed.is_empty());
            std::thread::sleep(Duration::from_millis(rng.below(400)));
        } else {
            std::thread::sleep(Duration::from_millis(rng.below(1500)));
        }
        worker.kill();
        positions.extend(worker.positions());
    }
    let lines = appender.finish();
    let mut last = Worker::start(
        &[args, &["--exit-when-caught-up".to_string()]].concat(),
        tmp.join("stderr.last"),
    );
    let status = last.exit_status();
    assert!(
        status.success(),
        "the last run failed ({status}): {}",
        last.log()
    );
    assert!(last.printed.lock().unwrap().caught_up);
    positions.extend(last.positions());
    (lines, positions, cycles)
}

/// The data topic's values per file (the key), in topic order, at `isolation`.
fn lines_per_file(topic: &str, isolation: &str) -> BTreeMap<String, Vec<String>> {
    let mut records = kafka_util::read_all(topic, isolation);
    records.sort_by_key(|r| (r.partition, r.offset));
    let mut files: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in records {
        let key = String::from_utf8(r.key.expect("a key")).unwrap();
        let value = String::from_utf8(r.value.expect("a value")).unwrap();
        files.entry(key).or_default().push(value);
    }
    files
}

fn expected(file: &str, n: u64) -> Vec<String> {
    (0..n).map(|i| format!("{file} line {i}")).collect()
}

/// Each file's final offset is its whole length.
fn assert_read_to_the_end(dir: &Path, positions: &BTreeMap<String, u64>) {
    for file in FILES {
        let len = std::fs::metadata(dir.join(file)).unwrap().len();
        assert_eq!(positions.get(file), Some(&len), "{file}: final offset");
    }
}

/// Duplicates in `got` (lines seen before), after checking that the first appearances are
/// exactly `want`, in order: no line lost, none out of order, nothing else.
fn duplicates(file: &str, got: &[String], want: &[String]) -> usize {
    let mut seen = std::collections::HashSet::new();
    let first: Vec<&String> = got.iter().filter(|l| seen.insert(l.as_str())).collect();
    let want: Vec<&String> = want.iter().collect();
    if let Some(i) = (0..first.len().max(want.len())).find(|&i| first.get(i) != want.get(i)) {
        panic!(
            "{file}: first appearances differ from the lines written at line {i}: {:?} != {:?}",
            first.get(i),
            want.get(i)
        );
    }
    got.len() - first.len()
}

#[test]
fn exactly_once_survives_sigkills() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("files")).unwrap();
    let data = data_topic("eos-data");
    let offsets = TopicGuard::new("eos-offsets");
    let url = kafka_util::url(
        &offsets,
        3,
        &format!("&exactly.once.group={offsets}&exactly.once.task=file-source/0"),
    );
    let args = worker_args(&tmp.path().join("files"), &data, &["--offsets".into(), url]);
    let t0 = Instant::now();
    let (written, positions, cycles) = kill_cycles(tmp.path(), &args);
    assert_read_to_the_end(&tmp.path().join("files"), &positions);

    let committed = lines_per_file(&data, "read_committed");
    let mut total = 0;
    for file in FILES {
        let want = expected(file, written[file]);
        let got = committed.get(file).cloned().unwrap_or_default();
        let dups = duplicates(file, &got, &want);
        assert_eq!(dups, 0, "{file}: read_committed sees {dups} duplicates");
        total += want.len();
    }
    let uncommitted: usize = lines_per_file(&data, "read_uncommitted")
        .values()
        .map(Vec::len)
        .sum();
    println!(
        "exactly-once: {cycles} SIGKILLs, {total} lines; read_committed: 0 duplicates; \
         read_uncommitted: {} records of aborted transactions; {:.1} s",
        uncommitted - total,
        t0.elapsed().as_secs_f64()
    );
}

#[cfg(feature = "rocksdb")]
#[test]
fn at_least_once_survives_sigkills_with_duplicates() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("files")).unwrap();
    let data = data_topic("alo-data");
    let mode = [
        "--offsets".to_string(),
        format!("rocksdb://{}", tmp.path().join("db").display()),
        "--wal".into(),
        tmp.path().join("wal").display().to_string(),
        "--brokers".into(),
        kafka_util::bootstrap(),
    ];
    let args = worker_args(&tmp.path().join("files"), &data, &mode);
    let t0 = Instant::now();
    let (written, positions, cycles) = kill_cycles(tmp.path(), &args);
    assert_read_to_the_end(&tmp.path().join("files"), &positions);

    let committed = lines_per_file(&data, "read_committed");
    let (mut total, mut dups) = (0, 0);
    for file in FILES {
        let want = expected(file, written[file]);
        let got = committed.get(file).cloned().unwrap_or_default();
        dups += duplicates(file, &got, &want);
        total += want.len();
    }
    println!(
        "at-least-once: {cycles} SIGKILLs, {total} lines, {dups} duplicates; {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

/// A second instance of the same task fences the first: the first exits with `Error::Fenced`,
/// the second resumes exactly where the first last committed, and the topic holds every line
/// once (a write of the first after the fence would be a line twice).
#[test]
fn a_second_instance_fences_the_first() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("files");
    std::fs::create_dir(&dir).unwrap();
    let data = data_topic("eos-fence-data");
    let offsets = TopicGuard::new("eos-fence-offsets");
    let url = kafka_util::url(&offsets, 3, &format!("&exactly.once.id={offsets}-task"));
    let args = worker_args(&dir, &data, &["--offsets".into(), url]);
    let appender = Appender::start(&dir, Duration::from_millis(5));

    let mut first = Worker::start(&args, tmp.path().join("stderr.first"));
    first.wait_for("three commits", |p| p.committed.len() >= 3);
    let mut second = Worker::start(&args, tmp.path().join("stderr.second"));
    let status = first.exit_status();
    assert_eq!(
        status.code(),
        Some(file_source::EXIT_FENCED),
        "the first instance was not fenced ({status}): {}",
        first.log()
    );
    assert!(first.log().contains("fenced: task"), "{}", first.log());
    let commits_of_first = first.printed.lock().unwrap().committed.clone();
    let mut last_of_first = BTreeMap::new();
    last_of_first.extend(commits_of_first.iter().cloned());
    second.wait_for("two commits", |p| p.committed.len() >= 2);
    assert_eq!(
        second.printed.lock().unwrap().resumed,
        last_of_first,
        "the second resumes where the first last committed"
    );
    second.kill();
    let written = appender.finish();
    let mut last = Worker::start(
        &[args.as_slice(), &["--exit-when-caught-up".to_string()]].concat(),
        tmp.path().join("stderr.last"),
    );
    let status = last.exit_status();
    assert!(status.success(), "{status}: {}", last.log());

    let committed = lines_per_file(&data, "read_committed");
    for file in FILES {
        let want = expected(file, written[file]);
        let got = committed.get(file).cloned().unwrap_or_default();
        assert_eq!(duplicates(file, &got, &want), 0, "{file}: a line twice");
    }
}

/// The API itself: a transaction's data records and offsets appear together; the offsets are
/// Connect's records exactly (key, value, murmur2 partition, no header of ours); an abort and a
/// refused offset show nothing; a fenced producer refuses everything after.
#[test]
fn a_task_commits_records_and_connects_offset_records_together() {
    use connect_offsets::store::OffsetStore;
    use connect_offsets::store::kafka::{KafkaStore, TaskId};
    use connect_offsets::{Error, Offset, OffsetKey, Partition};

    let data = data_topic("eos-api-data");
    let offsets = TopicGuard::new("eos-api-offsets");
    let store = KafkaStore::open(&kafka_util::url(
        &offsets,
        3,
        &format!("&exactly.once.group={offsets}&exactly.once.task=files/0"),
    ))
    .unwrap();
    assert_eq!(
        store.task_id().unwrap().as_str(),
        format!("{offsets}-files-0"),
        "Connect's <group>-<connector>-<task>"
    );
    let key = OffsetKey::new("files", Partition::new().with("filename", "a.log"));
    let mut task = store.task_producer().unwrap();
    task.send(&data, Some(b"a.log"), Some(b"one")).unwrap();
    task.commit([(key.clone(), Some(Offset::new().with("position", 4)))])
        .unwrap();
    assert_eq!(
        store.get(&key).unwrap(),
        Some(Offset::new().with("position", 4))
    );

    // Aborted, and refused before anything is sent: neither shows.
    task.send(&data, Some(b"a.log"), Some(b"aborted")).unwrap();
    task.abort().unwrap();
    task.send(&data, Some(b"a.log"), Some(b"too big")).unwrap();
    let huge = Offset::new().with("position", "x".repeat(2_000_000));
    let e = task.commit([(key.clone(), Some(huge))]).unwrap_err();
    assert!(matches!(e, Error::InvalidData(_)), "{e:?}");
    task.abort().unwrap();

    let seen = kafka_util::read_all(&offsets, "read_committed");
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        seen[0].key.as_deref(),
        Some(&br#"["files",{"filename":"a.log"}]"#[..])
    );
    assert_eq!(seen[0].value.as_deref(), Some(&br#"{"position":4}"#[..]));
    assert_eq!(seen[0].partition, store.partition_of(&key));
    assert!(seen[0].headers.is_empty(), "{:?}", seen[0].headers);
    let values: Vec<_> = kafka_util::read_all(&data, "read_committed")
        .into_iter()
        .map(|r| r.value.unwrap())
        .collect();
    assert_eq!(values, vec![b"one".to_vec()]);

    // A second producer of the task fences this one, which then refuses every call.
    let other = KafkaStore::open(&kafka_util::url(&offsets, 3, "")).unwrap();
    let id = TaskId::connect(&offsets, "files", 0).unwrap();
    let mut newer = other.task_producer_for(id).unwrap();
    let e = task
        .send(&data, Some(b"a.log"), Some(b"zombie"))
        .and_then(|()| task.commit([(key.clone(), Some(Offset::new().with("position", 9)))]))
        .unwrap_err();
    assert!(matches!(e, Error::Fenced(_)) && e.is_fatal(), "{e:?}");
    assert!(e.to_string().contains(&format!("{offsets}-files-0")), "{e}");
    for e in [
        task.send(&data, None, Some(b"x")).unwrap_err(),
        task.commit([]).unwrap_err(),
        task.abort().unwrap_err(),
    ] {
        assert!(matches!(e, Error::Fenced(_)), "{e:?}");
    }
    newer
        .commit([(key.clone(), Some(Offset::new().with("position", 5)))])
        .unwrap();
    assert_eq!(
        other.get(&key).unwrap(),
        Some(Offset::new().with("position", 5))
    );
    let values: Vec<_> = kafka_util::read_all(&data, "read_committed")
        .into_iter()
        .map(|r| r.value.unwrap())
        .collect();
    assert_eq!(values, vec![b"one".to_vec()], "nothing of the zombie");

    let e = KafkaStore::open(&kafka_util::url(&offsets, 3, ""))
        .unwrap()
        .task_producer()
        .unwrap_err();
    assert!(e.to_string().contains("exactly.once.id"), "{e}");
}
