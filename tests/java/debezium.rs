//! Real parts only: a PostgreSQL 15 from Debian's package (`scripts/postgres`), a Debezium 3.6.1
//! embedded engine with the PostgreSQL connector (`java/it`, built by `scripts/debezium-it`), rows
//! inserted continuously while the engine's JVM is SIGKILLed at random moments and restarted.
//!
//! [`offsets_survive_sigkill`] runs one schedule (seeded: `DEBEZIUM_SEED`, printed) against each
//! offset store in turn (`DEBEZIUM_STORES`, default `file,native,native-kafka`):
//! - `file`: Kafka's `FileOffsetBackingStore`, the usual choice: the comparison. What it lost is
//!   reported, not asserted.
//! - `native`: our `connectoffsets.jni.ConnectOffsetsBackingStore` on `rocksdb://` (its jar from
//!   `scripts/java jar`): every check must hold.
//! - `native-kafka`: the same class on a new Kafka Connect offsets topic of the test broker
//!   (`KAFKA_BOOTSTRAP`, default 127.0.0.1:9092; a missing broker fails the test): every check
//!   must hold.
//! - `memory`: Kafka's `MemoryOffsetBackingStore`, never by default: it forgets everything at a
//!   kill, and the checks fail for it (`DEBEZIUM_STORES=memory` shows that they bite).
//!
//! Each store gets its own database, replication slot and publication. The runner appends one line
//! per delivered change event (`E <id> <op>`) to an output file before marking it processed, and
//! the offset-store wrapper `RecordingOffsetStore` appends `C <n>` once the store acknowledged a
//! `set` made when n events of that run had been written. The checks, per store:
//! - every inserted id was delivered at least once;
//! - no restart began from scratch (a restart with snapshot events, `r`) or found no offsets (its
//!   log says Debezium's "No previous offset found");
//! - each restart re-delivered at most the events written after the last `C` line before it (what
//!   was uncommitted at the kill).
//!
//! `DEBEZIUM_CYCLES` kills per store (default 12); each run lives 1–6 s from its task's start.
//! [`file_store_torn_by_a_kill`] SIGKILLs a JVM while `FileOffsetBackingStore` rewrites a file of
//! `DEBEZIUM_TEAR_OFFSETS` offsets (default 200,000) and shows what a fresh store reads back.
//!
//! PostgreSQL (`/usr/lib/postgresql/15/bin`), Java 17+ (`JAVA`, default `java`) and Maven are needed;
//! a missing one fails the test, never skips it. One JVM runs at a time.

#![cfg(all(feature = "kafka", feature = "rocksdb"))]

use crate::scripts;

use std::collections::HashSet;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use connect_offsets::{OffsetKey, Partition};
use scripts::{repo, script, script_output};

/// Generous: this VM stops as a whole for up to 2 minutes at times (CONTRIBUTING.md).
const PATIENCE: Duration = Duration::from_secs(300);
/// Rows in the table before the first run: its snapshot.
const SEED_ROWS: u64 = 20;

/// One JVM at a time on this 2-core machine: the tests of this file take turns.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v} is not a number")),
        Err(_) => default,
    }
}

fn java() -> String {
    std::env::var("JAVA").unwrap_or_else(|_| "java".into())
}

/// `scripts/debezium-it classpath` (builds java/it when needed), checked once for a working Java.
fn it_classpath() -> String {
    static CP: OnceLock<String> = OnceLock::new();
    CP.get_or_init(|| {
        let out = Command::new(java())
            .arg("-version")
            .output()
            .unwrap_or_else(|e| panic!("cannot run {} (Java 17+ is needed): {e}", java()));
        assert!(out.status.success(), "{} -version failed", java());
        script("debezium-it", &["classpath"], &[])
            .trim()
            .to_string()
    })
    .clone()
}

fn work_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("connect-offsets-debezium-{name}"))
}

/// A directory of this test's, emptied first; kept when the test fails (its path is printed).
fn work_dir(name: &str) -> PathBuf {
    let dir = work_path(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A small xorshift, seeded from `DEBEZIUM_SEED` or the clock (printed, to replay a run).
struct Rng(u64);

impl Rng {
    fn from_env() -> Rng {
        let seed = std::env::var("DEBEZIUM_SEED")
            .ok()
            .map(|s| s.parse().expect("DEBEZIUM_SEED is a number"))
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        println!("DEBEZIUM_SEED={seed}");
        Rng(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL
// ---------------------------------------------------------------------------------------------

/// The cluster of `scripts/postgres start`; `Drop` stops it and removes its directory, also when
/// the test fails.
struct Postgres;

impl Postgres {
    fn start() -> Postgres {
        let pg = Postgres;
        script("postgres", &["start"], &[]);
        pg
    }

    /// Runs `sql` in `db` (psql -At: unaligned, tuples only); its output.
    fn sql(&self, db: &str, sql: &str) -> String {
        script("postgres", &["psql", "-d", db, "-At", "-c", sql], &[])
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let out = script_output("postgres", &["stop"], &[]);
        if !out.status.success() {
            eprintln!(
                "scripts/postgres stop failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// One long-lived `psql` fed an `INSERT` (its own transaction) every `every`, ids from `first` up.
struct Inserter {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<u64>>,
}

impl Inserter {
    fn start(db: &str, first: u64, every: Duration, log: &Path) -> Inserter {
        let mut child = Command::new(repo().join("scripts/postgres"))
            .args(["psql", "-d", db])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("scripts/postgres psql");
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let log = log.to_path_buf();
        let thread = std::thread::spawn(move || {
            let mut stdin = child.stdin.take().unwrap();
            let mut next = first;
            while !flag.load(Ordering::Relaxed) {
                if writeln!(stdin, "INSERT INTO events VALUES ({next}, 'row {next}');")
                    .and_then(|_| stdin.flush())
                    .is_err()
                {
                    break; // psql died: the status below says why
                }
                next += 1;
                std::thread::sleep(every);
            }
            drop(stdin);
            let status = child.wait().expect("psql");
            assert!(
                status.success(),
                "the inserting psql failed ({status}): {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            next - 1
        });
        Inserter {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops inserting; the last id sent.
    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().expect("the inserter")
    }
}

impl Drop for Inserter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The offset stores
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Store {
    /// Kafka's `FileOffsetBackingStore`: the comparison.
    File,
    /// `connectoffsets.jni.ConnectOffsetsBackingStore` over `rocksdb://`.
    Native,
    /// The same class over a Kafka Connect offsets topic on the test broker (`kafka://`).
    NativeKafka,
    /// Kafka's `MemoryOffsetBackingStore`: loses everything at a kill (shows the checks bite).
    Memory,
}

impl Store {
    fn parse(name: &str) -> Store {
        match name.trim() {
            "file" => Store::File,
            "native" => Store::Native,
            "native-kafka" => Store::NativeKafka,
            "memory" => Store::Memory,
            other => panic!(
                "DEBEZIUM_STORES: unknown store {other:?} (file, native, native-kafka, memory)"
            ),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Store::File => "file",
            Store::Native => "native",
            Store::NativeKafka => "native-kafka",
            Store::Memory => "memory",
        }
    }

    /// The class the wrapper delegates to.
    fn class(self) -> &'static str {
        match self {
            Store::File => "org.apache.kafka.connect.storage.FileOffsetBackingStore",
            Store::Native | Store::NativeKafka => "connectoffsets.jni.ConnectOffsetsBackingStore",
            Store::Memory => "org.apache.kafka.connect.storage.MemoryOffsetBackingStore",
        }
    }

    /// Whether every check must hold (the comparison's losses are only reported).
    fn must_pass(self) -> bool {
        !matches!(self, Store::File)
    }

    /// The store's own properties, its files under `dir`.
    fn properties(self, dir: &Path) -> Vec<(String, String)> {
        match self {
            Store::File => vec![(
                "offset.storage.file.filename".into(),
                dir.join("offsets.dat").display().to_string(),
            )],
            Store::Native => vec![
                (
                    "offset.storage.connect-offsets.url".into(),
                    format!("rocksdb://{}", dir.join("offsets").display()),
                ),
                (
                    "offset.storage.connect-offsets.log.dir".into(),
                    dir.join("log").display().to_string(),
                ),
            ],
            Store::NativeKafka => vec![
                ("offset.storage.connect-offsets.url".into(), kafka_url()),
                (
                    "offset.storage.connect-offsets.log.dir".into(),
                    dir.join("log").display().to_string(),
                ),
            ],
            Store::Memory => vec![],
        }
    }

    /// The JVM's classpath: the harness's (Debezium, Kafka Connect 4.4.0), and for ours the jar
    /// of `scripts/java jar` (the class and the native library inside it).
    fn classpath(self) -> String {
        let it = it_classpath();
        match self {
            Store::Native | Store::NativeKafka => {
                let java = repo().join("scripts/java");
                assert!(
                    java.is_file(),
                    "{} is missing: the native store's jar comes from `scripts/java jar`",
                    java.display()
                );
                let jar = script("java", &["jar"], &[]).trim().to_string();
                assert!(
                    Path::new(&jar).is_file(),
                    "scripts/java jar printed {jar:?}"
                );
                format!("{it}:{jar}")
            }
            Store::File | Store::Memory => it,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The runner JVM and its output
// ---------------------------------------------------------------------------------------------

/// One run of `connectoffsets.it.DebeziumRunner`; `Drop` SIGKILLs it if it still runs.
struct Runner {
    child: Child,
    log: PathBuf,
}

impl Runner {
    fn spawn(cp: &str, dir: &Path, out: &Path, props: &Path, n: usize) -> Runner {
        let log = dir.join(format!("runner-{n}.log"));
        let stdout = std::fs::File::create(dir.join(format!("runner-{n}.stdout"))).unwrap();
        let child = Command::new(java())
            .args([
                "-Xmx384m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-XX:+PerfDisableSharedMem",
                "-Djava.awt.headless=true",
                &format!("-Dorg.slf4j.simpleLogger.logFile={}", log.display()),
                "-Dorg.slf4j.simpleLogger.showDateTime=true",
                "-cp",
                cp,
                "connectoffsets.it.DebeziumRunner",
            ])
            .arg(out)
            .arg(props)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(stdout.try_clone().unwrap())
            .stderr(stdout)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", java()));
        Runner { child, log }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `Some(status)` when it has exited.
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().expect("try_wait")
    }

    fn sigkill(&mut self) {
        let _ = self.child.kill(); // SIGKILL
        let _ = self.child.wait();
    }

    /// SIGTERM (the engine closes, the store stops), then SIGKILL after `grace`.
    fn stop(&mut self, grace: Duration) -> bool {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status();
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if self.exited().is_some() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.sigkill();
        false
    }

    /// The last lines of its log and stdout, for failure messages.
    fn tail(&self) -> String {
        let mut s = String::new();
        for path in [self.log.clone(), self.log.with_extension("stdout")] {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let _ = writeln!(s, "---- {} ----", path.display());
            for l in &lines[lines.len().saturating_sub(25)..] {
                let _ = writeln!(s, "{l}");
            }
        }
        s
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        if self.exited().is_none() {
            self.sigkill();
        }
    }
}

/// One JVM's lines of the output file.
#[derive(Debug, Default, Clone)]
struct Run {
    pid: u32,
    task_started: bool,
    /// `(id, op)` in delivery order.
    events: Vec<(u64, char)>,
    /// Every `C n`, in order.
    commits: Vec<u64>,
}

/// Parses the output file (a last line without its newline is being written: left out).
fn parse(text: &str) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    for line in complete.lines() {
        let mut f = line.split(' ');
        match f.next() {
            Some("S") => runs.push(Run {
                pid: f.next().and_then(|p| p.parse().ok()).expect("S <pid>"),
                ..Run::default()
            }),
            Some("T") => runs.last_mut().expect("T after S").task_started = true,
            Some("E") => {
                let id = f.next().and_then(|v| v.parse().ok());
                let op = f.next().and_then(|o| o.chars().next());
                let (Some(id), Some(op)) = (id, op) else {
                    panic!("bad output line {line:?}");
                };
                runs.last_mut().expect("E after S").events.push((id, op));
            }
            Some("C") => {
                let n = f.next().and_then(|v| v.parse().ok()).expect("C <n>");
                runs.last_mut().expect("C after S").commits.push(n);
            }
            _ => panic!("bad output line {line:?}"),
        }
    }
    runs
}

fn current_run(out: &Path, pid: u32) -> Option<Run> {
    let text = std::fs::read_to_string(out).unwrap_or_default();
    parse(&text).into_iter().rev().find(|r| r.pid == pid)
}

// ---------------------------------------------------------------------------------------------
// The checks
// ---------------------------------------------------------------------------------------------

/// What one restart did.
#[derive(Debug)]
struct Restart {
    run: usize,
    events: usize,
    snapshot_events: usize,
    duplicates: usize,
    /// Events written after the last acknowledged commit before this run: the most it may re-deliver.
    bound: usize,
    /// Its log says "No previous offset found": the store gave the connector nothing.
    no_offsets: bool,
}

#[derive(Debug)]
struct Report {
    store: Store,
    runs: usize,
    inserted: u64,
    delivered: usize,
    missing: Vec<u64>,
    restarts: Vec<Restart>,
    first_run_commits: usize,
    /// Runs that died on their own at start (a store that cannot read its own file); the file was
    /// then removed so the schedule could go on.
    failed_starts: Vec<String>,
    /// The output contradicting itself (a commit of more events than the run wrote): the harness
    /// is wrong, whatever the store.
    inconsistent: Vec<String>,
}

impl Report {
    fn from_runs(store: Store, runs: &[Run], inserted: u64, failed_starts: Vec<String>) -> Report {
        let mut seen: HashSet<u64> = HashSet::new();
        let mut restarts = Vec::new();
        // Events written after the last acknowledged commit, across runs.
        let mut uncommitted = 0usize;
        let mut delivered = 0;
        let mut inconsistent = Vec::new();
        for (i, run) in runs.iter().enumerate() {
            let bound = uncommitted;
            let mut dups = 0;
            let mut snaps = 0;
            for &(id, op) in &run.events {
                delivered += 1;
                if !seen.insert(id) {
                    dups += 1;
                }
                if op == 'r' {
                    snaps += 1;
                }
            }
            if i > 0 {
                restarts.push(Restart {
                    run: i,
                    events: run.events.len(),
                    snapshot_events: snaps,
                    duplicates: dups,
                    bound,
                    no_offsets: false,
                });
            }
            if let Some(&c) = run.commits.iter().find(|&&c| c as usize > run.events.len()) {
                inconsistent.push(format!(
                    "run {i}: a C {c} line, but the run wrote {} events",
                    run.events.len()
                ));
            }
            uncommitted = match run.commits.iter().max() {
                Some(&c) => run.events.len().saturating_sub(c as usize),
                None => uncommitted + run.events.len(),
            };
        }
        let missing = (1..=inserted).filter(|id| !seen.contains(id)).collect();
        Report {
            store,
            runs: runs.len(),
            inserted,
            delivered,
            missing,
            restarts,
            first_run_commits: runs.first().map_or(0, |r| r.commits.len()),
            failed_starts,
            inconsistent,
        }
    }

    fn restarts_from_scratch(&self) -> Vec<&Restart> {
        self.restarts
            .iter()
            .filter(|r| r.snapshot_events > 0)
            .collect()
    }

    fn without_offsets(&self) -> Vec<&Restart> {
        self.restarts.iter().filter(|r| r.no_offsets).collect()
    }

    fn over_bound(&self) -> Vec<&Restart> {
        self.restarts
            .iter()
            .filter(|r| r.duplicates > r.bound)
            .collect()
    }

    fn duplicates(&self) -> usize {
        self.restarts.iter().map(|r| r.duplicates).sum()
    }

    fn print(&self) {
        println!(
            "[{}] {}: {} runs ({} kills and a last run), {} rows inserted, {} events delivered \
             ({} duplicates), {} missing, {} restarts from scratch ({} found no offsets), \
             {} restarts over their bound, {} failed starts",
            self.store.name(),
            self.store.class(),
            self.runs,
            self.runs.saturating_sub(1),
            self.inserted,
            self.delivered,
            self.duplicates(),
            self.missing.len(),
            self.restarts_from_scratch().len(),
            self.without_offsets().len(),
            self.over_bound().len(),
            self.failed_starts.len()
        );
        println!(
            "[{}]   run  events  snapshot  duplicates  bound  offsets",
            self.store.name()
        );
        for r in &self.restarts {
            println!(
                "[{}]   {:>3}  {:>6}  {:>8}  {:>10}  {:>5}  {:>7}{}",
                self.store.name(),
                r.run,
                r.events,
                r.snapshot_events,
                r.duplicates,
                r.bound,
                if r.no_offsets { "none" } else { "found" },
                if r.duplicates > r.bound { "  OVER" } else { "" }
            );
        }
        for f in &self.failed_starts {
            println!("[{}]   failed start: {f}", self.store.name());
        }
        if !self.missing.is_empty() {
            println!(
                "[{}]   missing ids (first 20): {:?}",
                self.store.name(),
                &self.missing[..self.missing.len().min(20)]
            );
        }
    }

    /// The checks a store of ours must pass; the failures, empty when all hold.
    fn failures(&self) -> Vec<String> {
        let mut f = Vec::new();
        if !self.missing.is_empty() {
            f.push(format!(
                "{} inserted ids never delivered (first: {:?})",
                self.missing.len(),
                &self.missing[..self.missing.len().min(10)]
            ));
        }
        for r in self.restarts_from_scratch() {
            f.push(format!(
                "run {} began from scratch ({} snapshot events)",
                r.run, r.snapshot_events
            ));
        }
        for r in self.without_offsets() {
            f.push(format!("run {} found no offsets in the store", r.run));
        }
        for r in self.over_bound() {
            f.push(format!(
                "run {} re-delivered {} events, more than the {} written after the last commit",
                r.run, r.duplicates, r.bound
            ));
        }
        for s in &self.failed_starts {
            f.push(format!("a run failed to start: {s}"));
        }
        f
    }
}

// ---------------------------------------------------------------------------------------------
// One store through the schedule
// ---------------------------------------------------------------------------------------------

fn run_store(
    pg: &Postgres,
    store: Store,
    lifetimes: &[Duration],
    insert_every: Duration,
) -> Report {
    let name = store.name();
    let dir = work_dir(name);
    let cp = store.classpath();
    // Also the slot's and the publication's name: lower case, digits and `_` only.
    let db = format!("dbz_{}", name.replace('-', "_"));
    pg.sql("postgres", &format!("CREATE DATABASE {db}"));
    pg.sql(
        &db,
        &format!(
            "CREATE TABLE events (id bigint PRIMARY KEY, payload text); \
             INSERT INTO events SELECT g, 'seed ' || g FROM generate_series(1, {SEED_ROWS}) g"
        ),
    );
    let out = dir.join("events.out");
    let props = dir.join("runner.properties");
    let mut text = format!(
        "database.port={}\ndatabase.dbname={db}\nslot.name={db}\npublication.name={db}\n\
         offset.storage=connectoffsets.it.RecordingOffsetStore\nrecording.delegate={}\n",
        std::env::var("PG_PORT").unwrap_or_else(|_| "55432".into()),
        store.class()
    );
    for (k, v) in store.properties(&dir) {
        let _ = writeln!(text, "{k}={v}");
    }
    std::fs::write(&props, text).unwrap();
    println!("[{name}] work dir {}", dir.display());

    let inserter = Inserter::start(&db, SEED_ROWS + 1, insert_every, &dir.join("psql.log"));
    let mut failed_starts = Vec::new();
    let t0 = Instant::now();
    for (n, life) in lifetimes.iter().enumerate() {
        let mut runner = Runner::spawn(&cp, &dir, &out, &props, n);
        let pid = runner.pid();
        // Its task started (and, the first time, its snapshot is done: one insert seen).
        let deadline = Instant::now() + PATIENCE;
        let started = loop {
            let run = current_run(&out, pid);
            let ready = run.as_ref().is_some_and(|r| {
                r.task_started && (n > 0 || r.events.iter().any(|&(_, op)| op == 'c'))
            });
            if ready {
                break true;
            }
            if let Some(status) = runner.exited() {
                let why = format!("run {n} exited on its own ({status}):\n{}", runner.tail());
                assert!(!store.must_pass(), "[{name}] {why}");
                println!("[{name}] {why}");
                failed_starts.push(format!("run {n} ({status})"));
                // What an operator does: remove the store's file and start again (from scratch).
                for (_, v) in store.properties(&dir) {
                    let _ = std::fs::remove_file(&v);
                }
                break false;
            }
            assert!(
                Instant::now() < deadline,
                "[{name}] run {n} not started after {PATIENCE:?}:\n{}",
                runner.tail()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        if started {
            std::thread::sleep(*life);
            runner.sigkill();
        }
        let run = current_run(&out, pid).unwrap_or_default();
        // FileOffsetBackingStore's file as the kill left it (a few hundred bytes when whole).
        let file = match store {
            Store::File => match std::fs::metadata(dir.join("offsets.dat")) {
                Ok(m) => format!("; offsets.dat {} bytes", m.len()),
                Err(_) => "; no offsets.dat".into(),
            },
            _ => String::new(),
        };
        println!(
            "[{name}] run {n}: killed {} ms after its task started; {} events, {} commits{file} \
             ({:.0} s in)",
            life.as_millis(),
            run.events.len(),
            run.commits.len(),
            t0.elapsed().as_secs_f64()
        );
    }
    let inserted = inserter.finish();
    let count = pg.sql(&db, "SELECT count(*) || ' ' || max(id) FROM events");
    assert_eq!(
        count.trim(),
        format!("{inserted} {inserted}"),
        "[{name}] the table should hold ids 1..={inserted}"
    );

    // The last run: until every id was delivered.
    let n = lifetimes.len();
    let mut runner = Runner::spawn(&cp, &dir, &out, &props, n);
    let deadline = Instant::now() + PATIENCE;
    let mut last_print = Instant::now();
    loop {
        let runs = parse(&std::fs::read_to_string(&out).unwrap_or_default());
        let seen: HashSet<u64> = runs
            .iter()
            .flat_map(|r| r.events.iter().map(|&(id, _)| id))
            .collect();
        let have = (1..=inserted).filter(|id| seen.contains(id)).count() as u64;
        if have == inserted {
            break;
        }
        if let Some(status) = runner.exited() {
            panic!(
                "[{name}] the last run exited on its own ({status}) with {have} of {inserted} \
                 ids delivered:\n{}",
                runner.tail()
            );
        }
        if last_print.elapsed() >= Duration::from_secs(10) {
            println!("[{name}] last run: {have} of {inserted} ids delivered");
            last_print = Instant::now();
        }
        if Instant::now() >= deadline {
            panic!(
                "[{name}] after {PATIENCE:?} the last run has delivered {have} of {inserted} ids:\n{}",
                runner.tail()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // A commit after the last event, then a clean stop (the store's stop()).
    std::thread::sleep(Duration::from_millis(500));
    let clean = runner.stop(Duration::from_secs(60));
    println!(
        "[{name}] last run: all {inserted} ids delivered; {} ({:.0} s in all)",
        if clean {
            "stopped cleanly on SIGTERM"
        } else {
            "did not stop on SIGTERM within 60 s: SIGKILLed"
        },
        t0.elapsed().as_secs_f64()
    );

    let runs = parse(&std::fs::read_to_string(&out).unwrap());
    assert_eq!(runs.len(), n + 1, "[{name}] one S line per run");
    let mut report = Report::from_runs(store, &runs, inserted, failed_starts);
    // Debezium's PostgresConnectorTask says so when the store gave it no offset.
    for r in &mut report.restarts {
        let log = std::fs::read_to_string(dir.join(format!("runner-{}.log", r.run)))
            .unwrap_or_else(|e| panic!("[{name}] runner-{}.log: {e}", r.run));
        r.no_offsets = log.contains("No previous offset found");
    }
    assert!(
        report.inconsistent.is_empty(),
        "[{name}] the output contradicts itself:\n{}",
        report.inconsistent.join("\n")
    );
    // The harness itself worked: the first run committed, kills landed on streaming runs.
    assert!(
        report.first_run_commits > 0,
        "[{name}] the first run acknowledged no commit: the wrapper's C lines are missing"
    );
    let with_events = runs[1..n].iter().filter(|r| !r.events.is_empty()).count();
    assert!(
        n < 4 || with_events * 2 >= n - 1,
        "[{name}] only {with_events} of {} restarts delivered events before their kill",
        n - 1
    );
    report
}

/// The offsets topic of the `native-kafka` store: new for each test run, on the test broker
/// (`KAFKA_BOOTSTRAP`), with the client bounds of the other Kafka tests (this VM stops at times).
fn kafka_url() -> String {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        let bootstrap =
            std::env::var("KAFKA_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:9092".into());
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        format!(
            "kafka://{bootstrap}/debezium-offsets-{}-{nanos}?partitions=5&replication=1&\
             timeout.ms=300000&transaction.timeout.ms=600000",
            std::process::id()
        )
    })
    .clone()
}

/// Kafka's `FileOffsetBackingStore` beside ours, the same schedule, rows inserted throughout.
#[test]
fn offsets_survive_sigkill() {
    let _turn = one_at_a_time();
    let stores: Vec<Store> = std::env::var("DEBEZIUM_STORES")
        .unwrap_or_else(|_| "file,native,native-kafka".into())
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(Store::parse)
        .collect();
    let cycles = env_u64("DEBEZIUM_CYCLES", 12) as usize;
    let insert_every = Duration::from_millis(env_u64("DEBEZIUM_INSERT_MS", 10));
    let mut rng = Rng::from_env();
    let lifetimes: Vec<Duration> = (0..cycles)
        .map(|_| Duration::from_millis(1000 + rng.next() % 5001))
        .collect();
    println!(
        "{cycles} kills per store, each run {:?} ms after its task started; a row every {:?}; \
         stores {:?}",
        lifetimes.iter().map(|d| d.as_millis()).collect::<Vec<_>>(),
        insert_every,
        stores
    );
    // Build (or fail) before the database starts.
    for &s in &stores {
        s.classpath();
    }
    let pg = Postgres::start();
    let mut reports = Vec::new();
    for &store in &stores {
        let report = run_store(&pg, store, &lifetimes, insert_every);
        report.print();
        reports.push(report);
    }
    println!("side by side:");
    println!(
        "  store         runs  inserted  delivered  duplicates  missing  from-scratch  no-offsets  \
         over-bound  failed-starts"
    );
    for r in &reports {
        println!(
            "  {:<12}  {:>4}  {:>8}  {:>9}  {:>10}  {:>7}  {:>12}  {:>10}  {:>10}  {:>13}",
            r.store.name(),
            r.runs,
            r.inserted,
            r.delivered,
            r.duplicates(),
            r.missing.len(),
            r.restarts_from_scratch().len(),
            r.without_offsets().len(),
            r.over_bound().len(),
            r.failed_starts.len()
        );
    }
    if stores.contains(&Store::NativeKafka) {
        // What a Kafka Connect worker reading that topic finds: Debezium's offset under its key.
        let topic = connect_offsets::open(&kafka_url()).expect("open the offsets topic");
        let key = OffsetKey::new("dbz-it", Partition::new().with("server", "dbz"));
        let offset = topic
            .get(&key)
            .expect("read the offsets topic")
            .unwrap_or_else(|| panic!("no offset under {key:?} in the offsets topic"));
        assert!(offset.get("lsn").is_some(), "{key:?} = {offset}");
        println!("[native-kafka] the offsets topic holds {key:?} = {offset}");
    }
    let mut failed = Vec::new();
    for r in &reports {
        if r.store.must_pass() {
            failed.extend(
                r.failures()
                    .into_iter()
                    .map(|f| format!("[{}] {f}", r.store.name())),
            );
        }
    }
    assert!(failed.is_empty(), "checks failed:\n{}", failed.join("\n"));
    for r in &reports {
        let _ = std::fs::remove_dir_all(work_path(r.store.name()));
    }
}

// ---------------------------------------------------------------------------------------------
// A kill while FileOffsetBackingStore writes its file
// ---------------------------------------------------------------------------------------------

fn tear_helper(cp: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(java());
    cmd.args([
        "-Xmx1g",
        "-XX:+UseSerialGC",
        "-XX:+PerfDisableSharedMem",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp",
        cp,
        "connectoffsets.it.FileStoreTear",
    ])
    .args(args);
    cmd
}

/// `FileOffsetBackingStore.save()` truncates its file and rewrites the whole map in place: a SIGKILL
/// during the write leaves a torn file, and a fresh store reads it as no offsets at all (or fails).
#[test]
fn file_store_torn_by_a_kill() {
    let _turn = one_at_a_time();
    let offsets = env_u64("DEBEZIUM_TEAR_OFFSETS", 200_000);
    let cp = it_classpath();
    let dir = work_dir("tear");
    let file = dir.join("offsets.dat");
    let file_s = file.display().to_string();

    let out = tear_helper(&cp, &["fill", &file_s, &offsets.to_string()])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", java()));
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && printed.starts_with("FILLED"),
        "fill failed ({}): {printed}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let full = std::fs::metadata(&file).unwrap().len();
    println!("FileOffsetBackingStore file of {offsets} offsets: {full} bytes");

    // Rewrite it again and again; SIGKILL once it is being written, well short of full.
    let mut child = tear_helper(&cp, &["rewrite", &file_s])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let reader = {
        let lines = lines.clone();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(l);
            }
        })
    };
    let deadline = Instant::now() + PATIENCE;
    let loaded = loop {
        if let Some(l) = lines
            .lock()
            .unwrap()
            .iter()
            .find(|l| l.starts_with("LOADED"))
        {
            break l.clone();
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the rewriting JVM exited ({status}) before it loaded the file");
        }
        assert!(
            Instant::now() < deadline,
            "the rewriting JVM did not load the file"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(loaded, format!("LOADED {offsets}"));
    // Let a few whole saves pass first (their times are printed), then kill mid-write.
    while lines
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.starts_with("SAVE"))
        .count()
        < 2
    {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the rewriting JVM exited"
        );
        assert!(Instant::now() < deadline, "no save finished");
        std::thread::sleep(Duration::from_millis(5));
    }
    let (lo, hi) = (full / 4, full * 3 / 4);
    let at = loop {
        let len = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
        if (lo..hi).contains(&len) {
            let _ = child.kill();
            break len;
        }
        assert!(Instant::now() < deadline, "never saw the file mid-write");
        std::thread::sleep(Duration::from_micros(200));
    };
    let _ = child.wait();
    reader.join().unwrap();
    let torn = std::fs::metadata(&file).unwrap().len();
    let saves: Vec<String> = lines
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.starts_with("SAVE"))
        .cloned()
        .collect();
    println!(
        "saves before the kill (\"SAVE i ms\"): {saves:?}; SIGKILLed when the file had {at} bytes; \
         after the kill it has {torn} of {full} bytes"
    );

    let out = tear_helper(&cp, &["read", &file_s]).output().unwrap();
    let read = String::from_utf8_lossy(&out.stdout).trim().to_string();
    println!("a fresh FileOffsetBackingStore over the torn file: {read}");
    assert!(
        torn < full,
        "the kill should have landed mid-write: {torn} of {full} bytes"
    );
    assert!(
        read.starts_with("READ ") || read.starts_with("ERROR "),
        "the read helper printed {read:?} ({})",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
