//! A tool's write after a worker's crash is never undone by the replay of the worker's log
//! (issue 43, 1; `store::fence`).
//!
//! A worker process (this test binary re-run with `FENCE_CHILD` set) commits through a commit
//! buffer with `Durability::Local` over a real store (RocksDB, Kafka's offsets topic) whose
//! applies stall after a few batches (a wrapper on top of the real store): the later batches are
//! acknowledged and only in its log. Once it has printed its last acknowledgement it is
//! SIGKILLed. The operator's tools then write the store: `reset`, `set`, `import`, `import
//! --replace`, `rewind`, `expire`, and `serve`'s `PATCH` and `DELETE`. The worker starts again (plain store): its
//! recovery must keep every tool write, replay what no tool touched (nothing acknowledged is
//! lost), and what it commits after the tools' writes must land.

use crate::cli_util;
use crate::http_util;
use crate::kafka_util;

use std::io::{BufRead, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig, Durability};
use connect_offsets::store::{Capabilities, OffsetStore};
use connect_offsets::{Batch, Offset, OffsetKey, Partition};

const WRITER: &str = "fence-worker";
const CONNECTOR: &str = "files";
/// The worker's batches applied before its store stalls; the rest stay in its log.
const APPLIED: u64 = 3;
/// The batches it acknowledges in all.
const ACKED: u64 = 8;
/// The partitions every batch moves: `a` .. `f`.
const FILES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];
/// A partition only the worker's log knows (first offered after the stall).
const LATE: &str = "late";

fn key(file: &str) -> OffsetKey {
    OffsetKey::new(CONNECTOR, Partition::new().with("filename", file))
}

fn pos(n: i64) -> Offset {
    Offset::new().with("position", n)
}

/// Applies the first [`APPLIED`] batches, then blocks every apply: the worker's later batches
/// are acknowledged from its log alone.
#[derive(Debug)]
struct Stalling {
    inner: Arc<dyn OffsetStore>,
    applies: AtomicU64,
}

impl OffsetStore for Stalling {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::DEFAULT.with_durable(self.inner.capabilities().durable)
    }
    fn apply(&self, b: &Batch) -> connect_offsets::Result<()> {
        if b.seq > 0 && self.applies.fetch_add(1, Ordering::SeqCst) >= APPLIED {
            loop {
                std::thread::park();
            }
        }
        self.inner.apply(b)
    }
    fn applied_seq(&self, w: &str) -> connect_offsets::Result<u64> {
        self.inner.applied_seq(w)
    }
    fn writers(&self) -> connect_offsets::Result<Vec<(String, u64)>> {
        self.inner.writers()
    }
    fn get(&self, k: &OffsetKey) -> connect_offsets::Result<Option<Offset>> {
        self.inner.get(k)
    }
    fn partitions(&self, ns: &str) -> connect_offsets::Result<Vec<(OffsetKey, Offset)>> {
        self.inner.partitions(ns)
    }
    fn namespaces(&self) -> connect_offsets::Result<Vec<String>> {
        self.inner.namespaces()
    }
    fn persist(&self) -> connect_offsets::Result<()> {
        self.inner.persist()
    }
}

fn config(wal: &Path) -> CommitBufferConfig {
    let mut c = CommitBufferConfig::new(wal);
    c.writer = WRITER.into();
    c.flush_interval = None;
    c
}

/// The worker. `FENCE_MODE=crash`: commits [`ACKED`] batches (batch `i` moves every file to
/// `i`; from batch `APPLIED + 1` on also [`LATE`]), printing `acked i`, then waits to be killed.
/// `FENCE_MODE=recover`: opens the buffer (recovery replays the log), prints `state <file>
/// <position or null>` per file, commits `a` at 100 and prints `acked-after`, closes.
#[test]
fn child_entry() {
    let (Ok(url), Ok(wal), Ok(mode)) = (
        std::env::var("FENCE_CHILD"),
        std::env::var("FENCE_WAL"),
        std::env::var("FENCE_MODE"),
    ) else {
        return; // Not a child.
    };
    let store: Arc<dyn OffsetStore> =
        Arc::from(connect_offsets::open_for_writer(&url, WRITER).expect("open store"));
    let mut out = std::io::stdout().lock();
    // The test harness has written `test child_entry ... ` with no line end.
    writeln!(out).unwrap();
    if mode == "crash" {
        let store: Arc<dyn OffsetStore> = Arc::new(Stalling {
            inner: store,
            applies: AtomicU64::new(0),
        });
        let buffer = CommitBuffer::open(store, config(Path::new(&wal))).expect("open buffer");
        for i in 1..=ACKED {
            for f in FILES {
                buffer.offer(key(f), pos(i as i64)).expect("offer");
            }
            if i > APPLIED {
                buffer.offer(key(LATE), pos(i as i64)).expect("offer");
            }
            // The applied batches are acknowledged once applied, so `rewind --to seq:N` finds
            // each in the history; the rest once logged.
            let durability = if i <= APPLIED {
                Durability::Store
            } else {
                Durability::Local
            };
            buffer.commit_with(durability).wait().expect("commit");
            writeln!(out, "acked {i}").unwrap();
            out.flush().unwrap();
        }
        loop {
            std::thread::park();
        }
    }
    let buffer = CommitBuffer::open(store, config(Path::new(&wal))).expect("recover");
    for f in FILES.iter().chain([&LATE]) {
        let v = buffer.get(&key(f)).expect("get");
        let shown = v.map_or("null".to_string(), |o| match o.get("position") {
            Some(connect_offsets::Value::Int(n)) => n.to_string(),
            other => format!("{other:?}"),
        });
        writeln!(out, "state {f} {shown}").unwrap();
    }
    buffer.offer(key("a"), pos(100)).expect("offer");
    buffer.commit().wait().expect("commit after the tools");
    writeln!(out, "acked-after").unwrap();
    buffer.close().expect("close");
}

fn spawn_child(url: &str, wal: &Path, mode: &str) -> (Child, mpsc::Receiver<String>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "tool_fence::child_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("FENCE_CHILD", url)
        .env("FENCE_WAL", wal)
        .env("FENCE_MODE", mode)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the worker");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// Waits (bounded generously: the VM may stall) for the line `want`; panics with what came.
fn wait_for(rx: &mpsc::Receiver<String>, want: &str, seen: &mut Vec<String>) {
    loop {
        match rx.recv_timeout(Duration::from_secs(300)) {
            Ok(line) => {
                let done = line == want;
                seen.push(line);
                if done {
                    return;
                }
            }
            Err(e) => panic!("no `{want}` from the worker ({e}); it printed {seen:?}"),
        }
    }
}

fn cli_ok(args: &[&str]) -> String {
    cli_util::ok(&cli_util::cli(args))
}

fn get(url: &str, file: &str) -> String {
    let partition = format!(r#"{{"filename":"{file}"}}"#);
    cli_ok(&[
        "get",
        "--store",
        url,
        "--connector",
        CONNECTOR,
        "--partition",
        &partition,
    ])
    .trim()
    .to_string()
}

fn crash_tools_recover(url: &str, serve: bool) {
    let dir = tempfile::tempdir().unwrap();
    let wal = dir.path().join("wal");

    let (mut worker, rx) = spawn_child(url, &wal, "crash");
    let mut seen = Vec::new();
    // Killed only once its last batch is acknowledged: timed from readiness, not from start.
    wait_for(&rx, &format!("acked {ACKED}"), &mut seen);
    worker.kill().unwrap();
    worker.wait().unwrap();
    assert!(
        get(url, "a").contains(&format!("\"position\":{APPLIED}")),
        "the store shows the last applied batch, not the logged ones"
    );
    // A read says that the worker's log holds more than the store shows.
    let out = cli_util::cli(&["list", "--store", url, "--connector", CONNECTOR]);
    let stderr = cli_util::text(&out.stderr);
    let batches = format!("has logged batches {}..={ACKED}", APPLIED + 1);
    assert!(
        out.status.success()
            && stderr.contains(&format!("writer `{WRITER}`"))
            && stderr.contains(&batches),
        "list warns of the unapplied batches: {stderr}"
    );
    // So do `history` and `migrate`, which read the store as it is.
    for args in [
        &["history", "--store", url, "--connector", CONNECTOR][..],
        &["migrate", "--from", url, "--to", "memory://", "--dry-run"][..],
    ] {
        let out = cli_util::cli(args);
        let stderr = cli_util::text(&out.stderr);
        assert!(
            out.status.success() && stderr.contains(&batches),
            "{} warns of the unapplied batches: {stderr}",
            args[0]
        );
    }

    let p = |f: &str| format!(r#"{{"filename":"{f}"}}"#);
    // reset, set and import by the CLI.
    cli_ok(&[
        "reset",
        "--store",
        url,
        "--connector",
        CONNECTOR,
        "--partition",
        &p("a"),
    ]);
    cli_ok(&[
        "set",
        "--store",
        url,
        "--connector",
        CONNECTOR,
        "--partition",
        &p("b"),
        "--offset",
        r#"{"position":999}"#,
    ]);
    let file = dir.path().join("import.json");
    std::fs::write(
        &file,
        format!(
            r#"{{"connectors":{{"{CONNECTOR}":{{"offsets":[{{"partition":{{"filename":"c"}},"offset":{{"position":777}}}}]}}}}}}"#
        ),
    )
    .unwrap();
    cli_ok(&["import", "--store", url, "--input", file.to_str().unwrap()]);
    cli_ok(&[
        "rewind",
        "--store",
        url,
        "--connector",
        CONNECTOR,
        "--partition",
        &p("f"),
        "--to",
        "seq:1",
    ]);
    if serve {
        // serve's PATCH resets one partition and sets another.
        rest_patch(url, &p("d"), &p("e"));
    }

    let (mut worker, rx) = spawn_child(url, &wal, "recover");
    let mut seen = Vec::new();
    wait_for(&rx, "acked-after", &mut seen);
    assert!(worker.wait().unwrap().success(), "the worker recovered");
    let state = |f: &str| {
        seen.iter()
            .find_map(|l| l.strip_prefix(&format!("state {f} ")))
            .unwrap_or_else(|| panic!("no state of {f} in {seen:?}"))
            .to_string()
    };
    assert_eq!(state("a"), "null", "the CLI's reset held: {seen:?}");
    assert_eq!(state("b"), "999", "the CLI's set held: {seen:?}");
    assert_eq!(state("c"), "777", "the CLI's import held: {seen:?}");
    if serve {
        assert_eq!(state("d"), "null", "serve's reset held: {seen:?}");
        assert_eq!(state("e"), "555", "serve's alter held: {seen:?}");
    } else {
        assert_eq!(
            state("d"),
            ACKED.to_string(),
            "acknowledged, untouched: {seen:?}"
        );
        assert_eq!(
            state("e"),
            ACKED.to_string(),
            "acknowledged, untouched: {seen:?}"
        );
    }
    assert_eq!(state("f"), "1", "the CLI's rewind held: {seen:?}");
    assert_eq!(state(LATE), ACKED.to_string(), "only in the log: {seen:?}");
    // What the worker acknowledged after the tools' writes stands.
    assert!(
        get(url, "a").contains("\"position\":100"),
        "{}",
        get(url, "a")
    );

    // A whole connector replaced (`import --replace`), or reset by serve's `DELETE`, keeps a
    // partition only a log knew out.
    let (mut worker, rx) = spawn_child(url, &wal, "crash");
    let mut seen = Vec::new();
    wait_for(&rx, &format!("acked {ACKED}"), &mut seen);
    worker.kill().unwrap();
    worker.wait().unwrap();
    if serve {
        let serve = http_util::Serve::start(&["--store", url]);
        let (status, answer) = http_util::request("DELETE", &serve.offsets_url(CONNECTOR), None);
        assert_eq!(status, 200, "{answer}");
    } else {
        cli_ok(&[
            "import",
            "--replace",
            "--store",
            url,
            "--input",
            file.to_str().unwrap(),
        ]);
    }
    let (mut worker, rx) = spawn_child(url, &wal, "recover");
    let mut seen = Vec::new();
    wait_for(&rx, "acked-after", &mut seen);
    assert!(worker.wait().unwrap().success());
    for f in ["a", "b", "d", "e", "f", LATE] {
        assert!(
            seen.contains(&format!("state {f} null")),
            "the connector's reset held for {f} over the replay: {seen:?}"
        );
    }
    let c = if serve { "null" } else { "777" };
    assert!(seen.contains(&format!("state c {c}")), "{seen:?}");

    // `expire` resets what the store holds unwritten for a second; the log's partition stays.
    let (mut worker, rx) = spawn_child(url, &wal, "crash");
    let mut seen = Vec::new();
    wait_for(&rx, &format!("acked {ACKED}"), &mut seen);
    worker.kill().unwrap();
    worker.wait().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    cli_ok(&[
        "expire",
        "--store",
        url,
        "--connector",
        CONNECTOR,
        "--older-than",
        "1s",
    ]);
    let (mut worker, rx) = spawn_child(url, &wal, "recover");
    let mut seen = Vec::new();
    wait_for(&rx, "acked-after", &mut seen);
    assert!(worker.wait().unwrap().success());
    for f in FILES {
        assert!(
            seen.contains(&format!("state {f} null")),
            "expire reset {f}, and the replay left it reset: {seen:?}"
        );
    }
    assert!(
        seen.contains(&format!("state {LATE} {ACKED}")),
        "only in the log, never expired: {seen:?}"
    );
}

/// `serve` on `url`: resets partition `reset` and sets `alter` to 555 through Connect's `PATCH`
/// (no Connect cluster behind it: the store is the truth).
fn rest_patch(url: &str, reset: &str, alter: &str) {
    let serve = http_util::Serve::start(&["--store", url]);
    let body = format!(
        r#"{{"offsets":[{{"partition":{reset},"offset":null}},{{"partition":{alter},"offset":{{"position":555}}}}]}}"#
    );
    let (status, answer) = http_util::request("PATCH", &serve.offsets_url(CONNECTOR), Some(&body));
    assert_eq!(status, 200, "{answer}");
}

#[test]
fn tool_writes_hold_over_a_rocksdb_workers_replay() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!(
        "rocksdb://{}?history=7d",
        dir.path().join("offsets").display()
    );
    crash_tools_recover(&url, false);
}

#[test]
fn serve_writes_hold_over_a_rocksdb_workers_replay() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!(
        "rocksdb://{}?history=7d",
        dir.path().join("offsets").display()
    );
    crash_tools_recover(&url, true);
}

#[test]
fn tool_writes_hold_over_a_kafka_workers_replay() {
    let topic = kafka_util::unique_topic("fence");
    crash_tools_recover(&kafka_util::url(&topic, 5, "&history=7d"), false);
}

#[test]
fn serve_writes_hold_over_a_kafka_workers_replay() {
    let topic = kafka_util::unique_topic("fence-serve");
    crash_tools_recover(&kafka_util::url(&topic, 5, "&history=7d"), true);
}
