//! The example worker `examples/file_source.rs` following files as established tailers do, on the
//! real broker: rotations by rename and by copytruncate, while it runs and while it is stopped,
//! with SIGKILLs around them; a truncated or replaced file; lines over 64 KiB and over
//! `--max-line-bytes`; a file name that is not UTF-8; `\r\n` line ends; an offset of an earlier
//! version. At least once (RocksDB offsets behind the commit buffer's log) no line may be missing;
//! exactly once (the lines and offsets in Kafka transactions) a `read_committed` reader must see
//! each line once.
//!
//! Every wait and kill is timed from the worker's readiness (the commits it prints), never from its
//! start; `FILE_SOURCE_SEED` replays the random delays (printed), `FILE_SOURCE_CYCLES` sets the
//! worker lifetimes per rotation test (default 6). The child is this test binary
//! re-run with `FILE_SOURCE_ARGS` set: it runs the example's own `run` (the example's source is
//! compiled in here as a module), as `tests/kafka/exactly_once.rs` does.

#![cfg(all(feature = "kafka", feature = "rocksdb"))]

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
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

/// Generous: this VM stops for up to 2 minutes at times (CONTRIBUTING.md).
const PATIENCE: Duration = Duration::from_secs(300);
/// Worker lifetimes per rotation test, alternately rotating while it runs and while it is stopped:
/// `FILE_SOURCE_CYCLES`, default 6.
fn cycles() -> u32 {
    std::env::var("FILE_SOURCE_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6)
}

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
                "file_source::child_entry",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("FILE_SOURCE_ARGS", args.join("\u{1f}"))
            .stdout(Stdio::piped())
            .stderr(File::create(&stderr).unwrap())
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
                // What it printed last may still be in the pipe: read it to its end.
                self.join_stdout();
                if done(&self.printed.lock().unwrap()) {
                    return;
                }
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
                self.join_stdout();
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
        self.join_stdout();
    }

    /// Waits for the thread reading the worker's stdout (it ends when the worker has exited).
    fn join_stdout(&mut self) {
        if let Some(thread) = self.stdout.take() {
            thread.join().unwrap();
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn committed(&self) -> Vec<(String, u64)> {
        self.printed.lock().unwrap().committed.clone()
    }
}

impl Drop for Worker {
    /// A test that fails leaves no worker behind.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs a worker to its exit with `--exit-when-caught-up`, which must be 0 after `caught up`.
fn run_to_the_end(args: &[String], stderr: PathBuf) -> Worker {
    let mut w = Worker::start(
        &[args, &["--exit-when-caught-up".to_string()]].concat(),
        stderr,
    );
    let status = w.exit_status();
    assert!(
        status.success(),
        "the worker failed ({status}): {}",
        w.log()
    );
    assert!(w.printed.lock().unwrap().caught_up, "{}", w.log());
    w
}

/// A small xorshift, seeded from `FILE_SOURCE_SEED` or the clock (printed, to replay a run).
struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        let seed = std::env::var("FILE_SOURCE_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        println!("FILE_SOURCE_SEED={seed}");
        Rng(seed)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }

    fn pause(&mut self, up_to_ms: u64) {
        std::thread::sleep(Duration::from_millis(self.below(up_to_ms)));
    }
}

#[derive(Clone, Copy, Debug)]
enum Mode {
    AtLeastOnce,
    ExactlyOnce,
}

/// A data topic of 2 partitions, deleted at the end.
fn data_topic(what: &str) -> TopicGuard {
    let topic = TopicGuard::new(what);
    kafka_util::create_topic(&topic, 2, &[]);
    topic
}

/// A worker's arguments: the files, the data topic and the offsets of `mode` (under `tmp`, or in
/// the topic `offsets`), `extra` last.
fn worker_args(
    tmp: &Path,
    topic: &str,
    mode: Mode,
    offsets: &TopicGuard,
    extra: &[&str],
) -> Vec<String> {
    let mut args = vec![
        "--dir".to_string(),
        tmp.join("files").display().to_string(),
        "--topic".into(),
        topic.into(),
        "--batch".into(),
        "50".into(),
    ];
    match mode {
        Mode::AtLeastOnce => args.extend([
            "--offsets".to_string(),
            format!("rocksdb://{}", tmp.join("db").display()),
            "--wal".into(),
            tmp.join("wal").display().to_string(),
            "--brokers".into(),
            kafka_util::bootstrap(),
        ]),
        Mode::ExactlyOnce => args.extend([
            "--offsets".to_string(),
            kafka_util::url(
                offsets,
                3,
                &format!("&exactly.once.group={offsets}&exactly.once.task=file-source/0"),
            ),
        ]),
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// The data topic's records as a `read_committed` reader sees them: (key, value), in topic order
/// per partition (a file's lines share a key, so a partition).
fn records(topic: &str) -> Vec<(String, Vec<u8>)> {
    let mut seen = kafka_util::read_all(topic, "read_committed");
    seen.sort_by_key(|r| (r.partition, r.offset));
    seen.into_iter()
        .map(|r| {
            let key = String::from_utf8(r.key.expect("a key")).expect("a UTF-8 key");
            (key, r.value.expect("a value"))
        })
        .collect()
}

/// The application writing `app.log`: numbered lines, rotated on demand the way logrotate does.
struct App {
    dir: PathBuf,
    file: File,
    next: u64,
    rotated: u32,
}

impl App {
    fn new(dir: &Path) -> App {
        App {
            dir: dir.to_path_buf(),
            file: Self::open(&dir.join("app.log")),
            next: 0,
            rotated: 0,
        }
    }

    fn open(path: &Path) -> File {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap()
    }

    /// Line `n`: its number first (files begin differently), of varying length.
    fn line(n: u64) -> String {
        format!("{n:07} {}", "=".repeat((n % 37) as usize))
    }

    fn write(&mut self, lines: usize) {
        for _ in 0..lines {
            writeln!(self.file, "{}", Self::line(self.next)).unwrap();
            self.next += 1;
        }
    }

    fn path(&self, k: u32) -> PathBuf {
        match k {
            0 => self.dir.join("app.log"),
            k => self.dir.join(format!("app.log.{k}")),
        }
    }

    fn len(&self) -> u64 {
        std::fs::metadata(self.path(0)).unwrap().len()
    }

    /// logrotate without `rotate N` limits: `app.log.k` becomes `app.log.k+1`, then `app.log` is
    /// renamed (three lines more go to it through the open handle, as from a writer that
    /// reopens late) and a new one created, or copied to `app.log.1` and truncated.
    fn rotate(&mut self, how: Rotation) {
        for k in (1..=self.rotated).rev() {
            std::fs::rename(self.path(k), self.path(k + 1)).unwrap();
        }
        match how {
            Rotation::Rename => {
                std::fs::rename(self.path(0), self.path(1)).unwrap();
                self.write(3);
                self.file = Self::open(&self.path(0));
            }
            Rotation::CopyTruncate => {
                std::fs::copy(self.path(0), self.path(1)).unwrap();
                OpenOptions::new()
                    .write(true)
                    .open(self.path(0))
                    .unwrap()
                    .set_len(0)
                    .unwrap();
            }
        }
        self.rotated += 1;
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Rotation {
    Rename,
    CopyTruncate,
}

/// A thread writing a line to the app's log every 2 ms.
struct Writer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    fn start(app: &Arc<Mutex<App>>) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (app, stop) = (Arc::clone(app), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    app.lock().unwrap().write(1);
                    std::thread::sleep(Duration::from_millis(2));
                }
            })
        };
        Writer {
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap();
    }
}

/// Whether the worker has read a line of the current `app.log` since the last rotation: a
/// rotated name's new file starts at `committed app.log 0` (the same commit moves the old file's
/// offset to its new name), and is read when a commit of `app.log` follows.
#[derive(Clone, Copy, Debug)]
struct Track {
    settled: bool,
    read: bool,
}

impl Track {
    fn after(mut self, committed: &[(String, u64)]) -> Track {
        for (file, position) in committed {
            if file == "app.log" {
                if !self.settled && *position == 0 {
                    self.settled = true;
                } else if self.settled && *position > 0 {
                    self.read = true;
                }
            }
        }
        self
    }
}

/// `cycles()` worker lifetimes over an app's log rotated once per lifetime, alternately while the
/// worker runs (at a random instant after it read the current file, SIGKILLed at another) and
/// while it is stopped (SIGKILLed, rotated, the new file made longer than the old one's offset:
/// read on from there, it would give cut lines);
/// then a last worker catches up. Returns the topic's records and how many lines were written.
fn rotations(tmp: &Path, data: &str, how: Rotation, mode: Mode) -> (Vec<(String, Vec<u8>)>, u64) {
    let dir = tmp.join("files");
    std::fs::create_dir(&dir).unwrap();
    let offsets = TopicGuard::new("fs-rot-offsets");
    let args = worker_args(tmp, data, mode, &offsets, &[]);
    let app = Arc::new(Mutex::new(App::new(&dir)));
    app.lock().unwrap().write(40);
    let writer = Writer::start(&app);
    let mut rng = Rng::new();
    let mut track = Track {
        settled: true,
        read: false,
    };
    let t0 = Instant::now();
    let cycles = cycles();
    // Rotations while running that the running worker itself finished (the others its successor).
    let mut settled_running = 0;
    for cycle in 0..cycles {
        let mut w = Worker::start(&args, tmp.join(format!("stderr.{cycle}")));
        let start = track;
        // Ready: it committed a line of the current file.
        w.wait_for("a commit of the current app.log", |p| {
            start.after(&p.committed).read
        });
        if cycle % 2 == 0 {
            rng.pause(400);
            let seen = w.committed().len();
            app.lock().unwrap().rotate(how);
            if cycle % 4 == 2 {
                // Killed after the running worker finished the rotation (read the old file's
                // rest and started the new file), the other times wherever it is.
                let fresh = Track {
                    settled: false,
                    read: false,
                };
                w.wait_for("the rotation finished", |p| {
                    fresh
                        .after(&p.committed[seen.min(p.committed.len())..])
                        .settled
                });
            }
            rng.pause(800);
            w.kill();
            // Commits before the rotation belong to the file before it.
            let committed = w.committed();
            track = Track {
                settled: false,
                read: false,
            }
            .after(&committed[seen..]);
            settled_running += u32::from(track.settled);
        } else {
            rng.pause(400);
            w.kill();
            // The old file's stored offset: its last commit printed, or one batch more (a kill
            // between a commit and its line).
            let stored = w
                .committed()
                .iter()
                .rev()
                .find(|(file, _)| file == "app.log")
                .map_or(0, |(_, position)| *position);
            let mut app = app.lock().unwrap();
            app.rotate(how);
            while app.len() <= stored + 50 * 46 {
                app.write(50);
            }
            track = Track {
                settled: false,
                read: false,
            };
        }
    }
    writer.finish();
    let written = app.lock().unwrap().next;
    let last = run_to_the_end(&args, tmp.join("stderr.last"));
    let log = last.log();
    println!(
        "{how:?}, {mode:?}: {cycles} SIGKILLs, {written} lines; rotations while running finished \
         by the running worker: {settled_running} of {}; {:.1} s",
        cycles.div_ceil(2),
        t0.elapsed().as_secs_f64()
    );
    for cycle in 0..cycles {
        let log = std::fs::read_to_string(tmp.join(format!("stderr.{cycle}"))).unwrap();
        print!("worker {cycle}'s stderr:\n{log}");
    }
    println!("last worker's stderr:\n{log}");
    (records(data), written)
}

/// Every line `0..written` delivered (once each in exactly-once mode), each record a whole line,
/// every record keyed `app.log` (the rotated files' rests were read under their original name,
/// nothing under the new names), the lines in the order they were written.
fn assert_delivered(records: &[(String, Vec<u8>)], written: u64, mode: Mode) {
    let mut count = vec![0u32; written as usize];
    let mut first = Vec::new();
    for (key, value) in records {
        let value = String::from_utf8_lossy(value);
        let n: u64 = value
            .get(..7)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("`{key}`: a record that is not a line: {value:?}"));
        assert_eq!(value, App::line(n), "`{key}`: a cut or garbled line");
        assert_eq!(key, "app.log", "line {n} was sent under another name");
        assert!(n < written, "line {n} was never written");
        if count[n as usize] == 0 {
            first.push(n);
        }
        count[n as usize] += 1;
    }
    let missing: Vec<usize> = (0..count.len()).filter(|&n| count[n] == 0).collect();
    assert!(
        missing.is_empty(),
        "{} of {written} lines missing, the first {:?}",
        missing.len(),
        &missing[..missing.len().min(20)]
    );
    if let Some(i) = (1..first.len()).find(|&i| first[i] < first[i - 1]) {
        panic!(
            "line {} first sent after line {}: a rotated file's rest was not read first",
            first[i],
            first[i - 1]
        );
    }
    let dups: u32 = count.iter().map(|c| c - 1).sum();
    println!("{mode:?}: {written} lines, {dups} duplicates");
    if let Mode::ExactlyOnce = mode {
        let twice: Vec<usize> = (0..count.len()).filter(|&n| count[n] > 1).collect();
        assert!(
            twice.is_empty(),
            "read_committed sees {} lines more than once, the first {:?}",
            twice.len(),
            &twice[..twice.len().min(20)]
        );
    }
}

#[test]
fn rotation_by_rename_at_least_once() {
    let tmp = tempfile::tempdir().unwrap();
    let data = data_topic("fs-rename-alo");
    let (records, written) = rotations(tmp.path(), &data, Rotation::Rename, Mode::AtLeastOnce);
    assert_delivered(&records, written, Mode::AtLeastOnce);
}

#[test]
fn rotation_by_rename_exactly_once() {
    let tmp = tempfile::tempdir().unwrap();
    let data = data_topic("fs-rename-eos");
    let (records, written) = rotations(tmp.path(), &data, Rotation::Rename, Mode::ExactlyOnce);
    assert_delivered(&records, written, Mode::ExactlyOnce);
}

#[test]
fn rotation_by_copytruncate_at_least_once() {
    let tmp = tempfile::tempdir().unwrap();
    let data = data_topic("fs-copytrunc-alo");
    let (records, written) =
        rotations(tmp.path(), &data, Rotation::CopyTruncate, Mode::AtLeastOnce);
    assert_delivered(&records, written, Mode::AtLeastOnce);
}

#[test]
fn rotation_by_copytruncate_exactly_once() {
    let tmp = tempfile::tempdir().unwrap();
    let data = data_topic("fs-copytrunc-eos");
    let (records, written) =
        rotations(tmp.path(), &data, Rotation::CopyTruncate, Mode::ExactlyOnce);
    assert_delivered(&records, written, Mode::ExactlyOnce);
}

/// One rotation while the worker is stopped, with lines the worker had not read in the old file
/// and a new file longer than the old one's offset: the old file's rest is read first under
/// `app.log`, then the new file from byte 0; each line once, none cut, nothing under `app.log.1`,
/// whose offset is its end.
#[test]
fn rotation_while_stopped_reads_the_rest_of_the_old_file_first() {
    for how in [Rotation::Rename, Rotation::CopyTruncate] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("files");
        std::fs::create_dir(&dir).unwrap();
        let data = data_topic("fs-stopped");
        let offsets = TopicGuard::new("fs-stopped-offsets");
        let args = worker_args(tmp.path(), &data, Mode::ExactlyOnce, &offsets, &[]);
        let mut app = App::new(&dir);
        app.write(100);
        run_to_the_end(&args, tmp.path().join("stderr.0"));
        app.write(20);
        let old = app.len();
        app.rotate(how);
        while app.len() <= old {
            app.write(50);
        }
        let rotated_len = std::fs::metadata(app.path(1)).unwrap().len();
        let w = run_to_the_end(&args, tmp.path().join("stderr.1"));
        assert_delivered(&records(&data), app.next, Mode::ExactlyOnce);
        assert!(
            w.log().contains("`app.log` was rotated"),
            "{how:?}: {}",
            w.log()
        );
        let mut last: BTreeMap<String, u64> = BTreeMap::new();
        last.extend(w.committed());
        assert_eq!(last.get("app.log.1"), Some(&rotated_len), "{how:?}");
        assert_eq!(last.get("app.log"), Some(&app.len()), "{how:?}");
    }
}

/// A file truncated and rewritten while the worker is stopped (the new content longer than the
/// stored position), and again while it runs (shorter): each time read again from byte 0 with a
/// warning, every new line sent once, no cut line.
#[test]
fn a_truncated_or_replaced_file_is_read_again_from_its_start() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("files");
    std::fs::create_dir(&dir).unwrap();
    let data = data_topic("fs-truncated");
    let offsets = TopicGuard::new("fs-truncated-offsets");
    let args = worker_args(tmp.path(), &data, Mode::ExactlyOnce, &offsets, &[]);
    let path = dir.join("app.log");
    let lines =
        |range: std::ops::Range<u64>| -> String { range.map(|n| App::line(n) + "\n").collect() };
    std::fs::write(&path, lines(0..100)).unwrap();
    let first = run_to_the_end(&args, tmp.path().join("stderr.0"));
    let len = std::fs::metadata(&path).unwrap().len();
    assert_eq!(
        first.committed().last(),
        Some(&("app.log".to_string(), len))
    );

    // Stopped: truncated and rewritten, longer than before.
    std::fs::write(&path, lines(1000..1300)).unwrap();
    let mut w = Worker::start(&args, tmp.path().join("stderr.1"));
    let end = std::fs::metadata(&path).unwrap().len();
    w.wait_for("the rewritten file read to its end", |p| {
        p.committed.last() == Some(&("app.log".to_string(), end))
    });
    assert!(
        w.log().contains("was truncated or replaced") && w.log().contains("from byte 0"),
        "no warning: {}",
        w.log()
    );
    // Running: truncated (copytruncate's second half, with no copy) and rewritten, shorter.
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(0).unwrap();
    drop(f);
    std::fs::write(&path, lines(2000..2010)).unwrap();
    let end = std::fs::metadata(&path).unwrap().len();
    w.wait_for("the truncated file read again", |p| {
        p.committed.last() == Some(&("app.log".to_string(), end))
    });
    w.kill();
    run_to_the_end(&args, tmp.path().join("stderr.2"));

    let got: Vec<String> = records(&data)
        .into_iter()
        .map(|(k, v)| {
            assert_eq!(k, "app.log");
            String::from_utf8(v).unwrap()
        })
        .collect();
    let want: Vec<String> = (0..100)
        .chain(1000..1300)
        .chain(2000..2010)
        .map(App::line)
        .collect();
    assert_eq!(got, want);
}

/// A line of 300 KiB (over the old 64 KiB buffer) is sent whole; a line over `--max-line-bytes`
/// is skipped with an error naming it, and kept in the `--dead-letter` file; the worker goes on
/// (exit 0, restarts do not fail), in both modes.
#[test]
fn long_lines_are_sent_up_to_the_limit_and_longer_ones_skipped() {
    let big = vec![b'b'; 300 << 10];
    let huge = vec![b'h'; 1_200_000];
    for mode in [Mode::ExactlyOnce, Mode::AtLeastOnce] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("files");
        std::fs::create_dir(&dir).unwrap();
        let data = data_topic("fs-long");
        let offsets = TopicGuard::new("fs-long-offsets");
        let dead = tmp.path().join("dead-letter");
        let dead_arg = dead.display().to_string();
        let extra: &[&str] = match mode {
            Mode::AtLeastOnce => &["--dead-letter", &dead_arg],
            Mode::ExactlyOnce => &[],
        };
        let args = worker_args(tmp.path(), &data, mode, &offsets, extra);
        let mut content = b"before\n".to_vec();
        content.extend_from_slice(&big);
        content.extend_from_slice(b"\r\nbetween\n");
        let huge_at = content.len() as u64;
        content.extend_from_slice(&huge);
        content.extend_from_slice(b"\nafter\n");
        std::fs::write(dir.join("long.log"), &content).unwrap();

        let w = run_to_the_end(&args, tmp.path().join("stderr.0"));
        let log = w.log();
        assert!(
            log.contains(&format!(
                "`long.log` has a line of 1200000 bytes at byte {huge_at}, over --max-line-bytes 1000000"
            )),
            "{mode:?}: {log}"
        );
        assert_eq!(
            w.committed().last(),
            Some(&("long.log".to_string(), content.len() as u64)),
            "{mode:?}: the position moves past the long line"
        );
        // A restart has nothing to do and does not fail.
        let again = run_to_the_end(&args, tmp.path().join("stderr.1"));
        assert!(again.committed().is_empty(), "{mode:?}");

        let values: Vec<Vec<u8>> = records(&data).into_iter().map(|(_, v)| v).collect();
        let want = vec![
            b"before".to_vec(),
            big.clone(),
            b"between".to_vec(),
            b"after".to_vec(),
        ];
        assert!(
            values == want,
            "{mode:?}: {} records, not the 4 lines",
            values.len()
        );
        if let Mode::AtLeastOnce = mode {
            let mut want = format!("long.log\t{huge_at}\t{}\n", huge.len()).into_bytes();
            want.extend_from_slice(&huge);
            want.push(b'\n');
            assert!(
                std::fs::read(&dead).unwrap() == want,
                "the dead-letter file"
            );
        } else {
            assert!(log.contains("skipped (not sent)"), "{log}");
        }
    }
}

/// A file whose name is not UTF-8 is read, its partition and key the escaped name; `\r\n` line
/// ends are stripped as Connect's `FileStreamSourceTask` does; the positions are the files'
/// lengths.
#[test]
fn odd_names_and_crlf_lines_are_read() {
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("files");
    std::fs::create_dir(&dir).unwrap();
    let data = data_topic("fs-names");
    let offsets = TopicGuard::new("fs-names-offsets");
    let args = worker_args(tmp.path(), &data, Mode::AtLeastOnce, &offsets, &[]);
    let latin1 = dir.join(std::ffi::OsStr::from_bytes(b"caf\xe9\\.log"));
    std::fs::write(&latin1, "un\ndeux\n").unwrap();
    std::fs::write(dir.join("dos.log"), "one\r\ntwo\r\n\r\nthree\n").unwrap();

    let w = run_to_the_end(&args, tmp.path().join("stderr.0"));
    let mut committed: BTreeMap<String, u64> = BTreeMap::new();
    committed.extend(w.committed());
    assert_eq!(committed.get("dos.log"), Some(&18), "{:?}", w.committed());
    assert_eq!(
        committed.get("caf\\xe9\\\\.log"),
        Some(&8),
        "{:?}",
        w.committed()
    );
    let mut got: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (k, v) in records(&data) {
        got.entry(k)
            .or_default()
            .push(String::from_utf8(v).unwrap());
    }
    let want: BTreeMap<String, Vec<String>> = [
        ("caf\\xe9\\\\.log", vec!["un", "deux"]),
        ("dos.log", vec!["one", "two", "", "three"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(got, want);

    // The offset is stored under the escaped name, and a restart resumes it (nothing sent again).
    let again = run_to_the_end(&args, tmp.path().join("stderr.1"));
    assert!(again.committed().is_empty(), "{:?}", again.committed());
    assert_eq!(records(&data).len(), 6);
    let store =
        connect_offsets::open(&format!("rocksdb://{}", tmp.path().join("db").display())).unwrap();
    let key = connect_offsets::OffsetKey::new(
        "file-source",
        connect_offsets::Partition::new().with("filename", "caf\\xe9\\\\.log"),
    );
    let offset = store
        .get(&key)
        .unwrap()
        .expect("an offset under the escaped name");
    assert_eq!(
        offset.get("position"),
        Some(&connect_offsets::Value::Int(8))
    );
}

/// An offset of an earlier version (`{"position": N}` only) resumes its file at N; the next commit
/// adds the file's identity (`dev`, `ino`, `fingerprint`, `fingerprint_bytes`).
#[test]
fn an_offset_without_the_files_identity_resumes() {
    use connect_offsets::{Offset, OffsetKey, OffsetStoreExt, Partition, Value};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("files");
    std::fs::create_dir(&dir).unwrap();
    let data = data_topic("fs-legacy");
    let offsets = TopicGuard::new("fs-legacy-offsets");
    let args = worker_args(tmp.path(), &data, Mode::AtLeastOnce, &offsets, &[]);
    let content: String = (0..40).map(|n| App::line(n) + "\n").collect();
    std::fs::write(dir.join("old.log"), &content).unwrap();
    let at: u64 = (0..30).map(|n| App::line(n).len() as u64 + 1).sum();
    let url = format!("rocksdb://{}", tmp.path().join("db").display());
    let key = OffsetKey::new("file-source", Partition::new().with("filename", "old.log"));
    {
        let store = connect_offsets::open(&url).unwrap();
        store
            .set(key.clone(), Offset::new().with("position", at as i64))
            .unwrap();
    }
    let w = run_to_the_end(&args, tmp.path().join("stderr.0"));
    assert_eq!(w.printed.lock().unwrap().resumed.get("old.log"), Some(&at));
    let values: Vec<String> = records(&data)
        .into_iter()
        .map(|(_, v)| String::from_utf8(v).unwrap())
        .collect();
    assert_eq!(values, (30..40).map(App::line).collect::<Vec<_>>());
    drop(w);
    let store = connect_offsets::open(&url).unwrap();
    let offset = store.get(&key).unwrap().unwrap();
    let meta = std::fs::metadata(dir.join("old.log")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        offset.get("position"),
        Some(&Value::Int(content.len() as i64))
    );
    assert_eq!(offset.get("ino"), Some(&Value::Int(meta.ino() as i64)));
    assert_eq!(offset.get("dev"), Some(&Value::Int(meta.dev() as i64)));
    assert_eq!(offset.get("fingerprint_bytes"), Some(&Value::Int(256)));
    assert!(matches!(offset.get("fingerprint"), Some(Value::String(s)) if s.len() == 16));
}
