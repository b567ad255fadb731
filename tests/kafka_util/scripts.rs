//! The project's own scripts (`scripts/kafka`, `scripts/connect`) driven from tests, Java 25 for the
//! Java-side comparisons, and guards whose `Drop` stops what a test started, also when it fails.
//!
//! Included with `#[path = "kafka_util/scripts.rs"] mod scripts;` (needs no rdkafka).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// The repository root (where `scripts/` is): the package's directory or, for the tool's tests
/// (`cli/`), its parent.
pub fn repo() -> PathBuf {
    let package = Path::new(env!("CARGO_MANIFEST_DIR"));
    package
        .ancestors()
        .find(|d| d.join("scripts/kafka").is_file())
        .unwrap_or(package)
        .to_path_buf()
}

/// Runs `scripts/<script> args...` with extra environment; the output whatever the exit status.
pub fn script_output(script: &str, args: &[&str], envs: &[(&str, &str)]) -> Output {
    let path = repo().join("scripts").join(script);
    let mut cmd = Command::new(&path);
    cmd.args(args)
        .current_dir(repo())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", path.display()))
}

/// Runs a script and returns its stdout; panics with its stderr when it fails.
pub fn script(script: &str, args: &[&str], envs: &[(&str, &str)]) -> String {
    let out = script_output(script, args, envs);
    assert!(
        out.status.success(),
        "scripts/{script} {} failed ({}):\n{}{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("script output is UTF-8")
}

/// The Java classpath of the Kafka / Connect jars and the project's helpers (`scripts/kafka
/// classpath`, which fetches and builds them when needed).
pub fn classpath() -> String {
    static CP: OnceLock<String> = OnceLock::new();
    CP.get_or_init(|| script("kafka", &["classpath"], &[]).trim().to_string())
        .clone()
}

/// `JAVA_HOME` of a JDK 19 or newer: `JAVA25_HOME`, default `/usr/lib/jvm/temurin-25-jdk-amd64`.
/// Connect writes doubles with `Double.toString`, whose digits changed in JDK 19 (JDK 17 gives one
/// digit more for ~2% of doubles); the crate follows JDK 19+, so comparisons run on Java 25.
pub fn java25_home() -> PathBuf {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    HOME.get_or_init(|| {
        let home = PathBuf::from(
            std::env::var("JAVA25_HOME")
                .unwrap_or_else(|_| "/usr/lib/jvm/temurin-25-jdk-amd64".into()),
        );
        let java = home.join("bin/java");
        assert!(
            java.is_file(),
            "no Java 25 at {} (install a JDK 19 or newer and set JAVA25_HOME to it)",
            java.display()
        );
        let v = java_version(&java);
        assert!(
            v >= 19,
            "{} is Java {v}; Connect's double spelling needs JDK 19 or newer (JAVA25_HOME)",
            java.display()
        );
        home
    })
    .clone()
}

/// `JAVA_HOME` of a JDK 17: `JAVA17_HOME`, default `/usr/lib/jvm/java-17-openjdk-amd64`. Its
/// `Double.toString` gives one digit more than JDK 19+ for ~2% of doubles (`9.999999999999999E22`
/// for 1e23): a Connect worker on it writes such keys with those digits.
pub fn java17_home() -> PathBuf {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    HOME.get_or_init(|| {
        let home = PathBuf::from(
            std::env::var("JAVA17_HOME")
                .unwrap_or_else(|_| "/usr/lib/jvm/java-17-openjdk-amd64".into()),
        );
        let java = home.join("bin/java");
        assert!(
            java.is_file(),
            "no Java 17 at {} (install a JDK 17 and set JAVA17_HOME to it)",
            java.display()
        );
        let v = java_version(&java);
        assert_eq!(
            v,
            17,
            "{} is Java {v}, not 17 (JAVA17_HOME)",
            java.display()
        );
        home
    })
    .clone()
}

/// The `java` binary of [`java25_home`].
pub fn java25() -> PathBuf {
    java25_home().join("bin/java")
}

/// The feature version of `java` (17, 25, ...).
pub fn java_version(java: &Path) -> u32 {
    let out = Command::new(java)
        .arg("-version")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", java.display()));
    let text = String::from_utf8_lossy(&out.stderr);
    // `openjdk version "25.0.1" 2025-10-21` / `openjdk version "17.0.16"`
    text.split('"')
        .nth(1)
        .and_then(|v| v.split(['.', '-', '+']).next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("cannot read the version of {}: {text}", java.display()))
}

/// Polls `f` every `every` until it returns `Some`, or panics after `timeout` with the message
/// `what()` gives then.
pub fn wait_for<T>(
    what: impl FnOnce() -> String,
    timeout: Duration,
    every: Duration,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?}: {}", what());
        }
        std::thread::sleep(every);
    }
}

/// The connector's state and its tasks' states from the body of Connect's
/// `GET /connectors/{name}/status`.
pub fn connector_status(body: &str) -> Option<(String, Vec<String>)> {
    use connect_offsets::internal::codec::json::{self, Json};
    let Ok(Json::Object(obj)) = json::parse(body.as_bytes()) else {
        return None;
    };
    let state = |v: &Json| match v {
        Json::Object(m) => m
            .iter()
            .find(|(n, _)| n == "state")
            .and_then(|(_, s)| match s {
                Json::String(s) => Some(s.clone()),
                _ => None,
            }),
        _ => None,
    };
    let connector = obj
        .iter()
        .find(|(n, _)| n == "connector")
        .and_then(|(_, v)| state(v))?;
    let tasks = match obj.iter().find(|(n, _)| n == "tasks") {
        Some((_, Json::Array(ts))) => ts.iter().filter_map(state).collect(),
        _ => Vec::new(),
    };
    Some((connector, tasks))
}

/// A Kafka Connect distributed worker started by `scripts/connect start` (on Java 25 unless
/// [`ConnectWorker::start_on`] names another JDK); stopped by
/// `scripts/connect stop` when dropped.
pub struct ConnectWorker {
    /// `http://127.0.0.1:8083`.
    pub base: String,
    /// The worker's `offset.storage.topic`.
    pub offsets_topic: String,
    /// The worker's `group.id` (its config and status topics are `<group>-configs`, `<group>-status`).
    pub group_id: String,
    /// One worker at a time in a test executable: every test starts its own on the same port.
    _one: MutexGuard<'static, ()>,
}

static ONE_WORKER: Mutex<()> = Mutex::new(());

impl ConnectWorker {
    /// Starts a worker against `bootstrap` with its own offsets topic and group (so its config and
    /// status topics are new too). Panics when a worker already answers on the port: a worker keeps
    /// its offsets topic, so one started by somebody else cannot be used.
    pub fn start(bootstrap: &str, offsets_topic: &str, group_id: &str) -> ConnectWorker {
        Self::start_on(&java25_home(), bootstrap, offsets_topic, group_id)
    }

    /// [`ConnectWorker::start`] on the JDK at `java_home` (`scripts/connect` runs `$JAVA_HOME/bin/java`).
    pub fn start_on(
        java_home: &Path,
        bootstrap: &str,
        offsets_topic: &str,
        group_id: &str,
    ) -> ConnectWorker {
        Self::start_with(java_home, bootstrap, offsets_topic, group_id, "")
    }

    /// [`ConnectWorker::start_on`] with `extra` lines appended to the worker's properties.
    pub fn start_with(
        java_home: &Path,
        bootstrap: &str,
        offsets_topic: &str,
        group_id: &str,
        extra: &str,
    ) -> ConnectWorker {
        let one = ONE_WORKER.lock().unwrap_or_else(|p| p.into_inner());
        let port = std::env::var("CONNECT_PORT").unwrap_or_else(|_| "8083".into());
        let status = script_output("connect", &["status"], &[]);
        assert!(
            !status.status.success(),
            "a Kafka Connect worker already answers on 127.0.0.1:{port} ({}); this test needs its \
             own worker with a fresh offsets topic: stop that one first (scripts/connect stop)",
            String::from_utf8_lossy(&status.stdout).trim()
        );
        let worker = ConnectWorker {
            base: format!("http://127.0.0.1:{port}"),
            offsets_topic: offsets_topic.to_string(),
            group_id: group_id.to_string(),
            _one: one,
        };
        // From here on Drop stops whatever `start` got running.
        let java = java_home.join("bin/java");
        script(
            "connect",
            &["start"],
            &[
                ("JAVA_HOME", java_home.to_str().unwrap()),
                ("JAVA", java.to_str().unwrap()),
                ("CONNECT_BOOTSTRAP", bootstrap),
                ("CONNECT_OFFSETS_TOPIC", offsets_topic),
                ("CONNECT_GROUP_ID", group_id),
                ("CONNECT_EXTRA_PROPERTIES", extra),
            ],
        );
        // The worker that answers must be ours, with our topic.
        let props = std::fs::read_to_string(Self::dir().join("worker.properties"))
            .expect("the worker's properties");
        assert!(
            props
                .lines()
                .any(|l| l == format!("offset.storage.topic={offsets_topic}")),
            "the running worker does not use offset.storage.topic={offsets_topic}:\n{props}"
        );
        worker
    }

    /// The worker's data dir (`<run>/connect`, next to the brokers), with `connect.log`.
    pub fn dir() -> PathBuf {
        let paths = script("kafka", &["paths"], &[]);
        let run = paths
            .lines()
            .find_map(|l| l.strip_prefix("run="))
            .expect("scripts/kafka paths prints run=");
        PathBuf::from(run).join("connect")
    }

    /// The last `n` lines of the worker's log (for failure messages).
    pub fn log_tail(n: usize) -> String {
        let text = std::fs::read_to_string(Self::dir().join("connect.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

impl Drop for ConnectWorker {
    fn drop(&mut self) {
        let out = script_output("connect", &["stop"], &[]);
        if !out.status.success() {
            eprintln!(
                "scripts/connect stop failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// The three-broker cluster of `scripts/kafka start --cluster`. Dropping it stops the cluster if
/// this guard started it; a cluster that was already running is left running, with every node this
/// guard killed started again.
pub struct Cluster {
    started: bool,
    killed: Vec<u32>,
}

impl Cluster {
    /// The cluster's bootstrap servers.
    pub const BOOTSTRAP: &'static str = "127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094";

    /// Starts the cluster (or takes the one running).
    pub fn start() -> Cluster {
        let running = script_output("kafka", &["status", "--cluster"], &[])
            .status
            .success();
        let cluster = Cluster {
            started: !running,
            killed: Vec::new(),
        };
        // Drop stops it even when start fails half-way.
        script("kafka", &["start", "--cluster"], &[]);
        cluster
    }

    /// The pid of node `n`.
    pub fn pid(&self, n: u32) -> u32 {
        script("kafka", &["pid", "--cluster", &n.to_string()], &[])
            .trim()
            .parse()
            .expect("a pid")
    }

    /// SIGKILLs node `n`; returns its pid.
    pub fn kill(&mut self, n: u32) -> u32 {
        let pid = self.pid(n);
        let st = Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .expect("kill");
        assert!(st.success(), "kill -9 {pid} failed");
        self.killed.push(n);
        pid
    }

    /// Starts killed node `n` again on its data; returns its new pid.
    pub fn restart(&mut self, n: u32) -> u32 {
        let pid = script("kafka", &["restart-node", &n.to_string()], &[])
            .trim()
            .parse()
            .expect("a pid");
        self.killed.retain(|k| *k != n);
        pid
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.started {
            let out = script_output("kafka", &["stop", "--cluster"], &[]);
            if !out.status.success() {
                eprintln!(
                    "scripts/kafka stop --cluster failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        } else {
            for n in std::mem::take(&mut self.killed) {
                let out = script_output("kafka", &["restart-node", &n.to_string()], &[]);
                if !out.status.success() {
                    eprintln!(
                        "scripts/kafka restart-node {n} failed: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
            }
        }
    }
}
