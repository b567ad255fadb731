//! The Java `OffsetBackingStore` (`java/store`, `connectoffsets.jni.ConnectOffsetsBackingStore`)
//! over the crate's native library, driven by Kafka Connect's own classes in a real JVM
//! (`kafka/src/main/java/connectoffsets/OffsetStoreConformance.java`; `scripts/java classpath`
//! builds the library, the jar that carries it, and Connect's runtime).
//!
//! 1. Connect's `OffsetStorageWriter` and `OffsetStorageReaderImpl` over our store give what they
//!    give over Connect's `MemoryOffsetBackingStore`, for one seeded workload, on memory, RocksDB
//!    and Kafka URLs, with restarts of our store along the way (RocksDB and Kafka keep everything);
//!    `get` returns the very bytes the reference returns, on JDK 17 and on JDK 25.
//! 2. Concurrent `set` calls from several threads, `stop` twice, every call after `stop`.
//! 3. Bad configuration is refused with a `ConnectException` naming what was wrong; a library that
//!    is not ours, or of another version than the jar, is refused before use.
//! 4. SIGKILL of the JVM at random moments: every `set` whose future completed is read back.
#![cfg(feature = "kafka")]

use crate::kafka_util;
use crate::scripts;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kafka_util::{unique_topic, url};

const MAIN: &str = "connectoffsets.OffsetStoreConformance";

fn classpath() -> String {
    static CP: OnceLock<String> = OnceLock::new();
    CP.get_or_init(|| {
        scripts::script("java", &["classpath"], &[])
            .trim()
            .to_string()
    })
    .clone()
}

/// The JVM the tests run on: JDK 17 (what Debezium 3.6 requires at least).
fn java() -> String {
    scripts::java17_home()
        .join("bin/java")
        .display()
        .to_string()
}

/// Runs the conformance program with `args` on `classpath`; its stdout (stderr shown on failure).
fn run_on(classpath: &str, args: &[&str]) -> String {
    run_with(&java(), classpath, args)
}

fn run_with(java: &str, classpath: &str, args: &[&str]) -> String {
    let out = Command::new(java)
        .args(["-cp", classpath, MAIN])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run java (Java 17+ must be installed)");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{MAIN} {args:?} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    print!("{stdout}");
    stdout
}

fn run(args: &[&str]) -> String {
    run_on(&classpath(), args)
}

fn path(dir: &Path, name: &str) -> String {
    dir.join(name).to_str().unwrap().to_string()
}

fn conformance(store_url: &str, seed: u64) {
    conformance_on(&java(), store_url, seed);
}

fn conformance_on(java: &str, store_url: &str, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    println!("{java}: {store_url} seed {seed}");
    let out = run_with(
        java,
        &classpath(),
        &[
            "conformance",
            store_url,
            &path(dir.path(), "log"),
            &seed.to_string(),
            "300",
        ],
    );
    assert!(out.contains("ok conformance: 300 flushes"), "{out}");
}

fn seed() -> u64 {
    std::env::var("JAVA_STORE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                % 1_000_000
        })
}

#[test]
fn connect_writer_and_reader_agree_with_memory_store_on_memory_rocksdb_and_kafka() {
    let seed = seed();
    conformance("memory://", seed);
    let dir = tempfile::tempdir().unwrap();
    conformance(&format!("rocksdb://{}", path(dir.path(), "offsets")), seed);
    conformance(&url(&unique_topic("java-store"), 5, ""), seed);
}

/// The raw bytes `get` returns equal the reference's on a JDK 17 and a JDK 25 alike, though their
/// `Double.toString` differ for ~2% of doubles (the workload's offsets hold random doubles).
#[test]
fn values_come_back_as_each_jvm_wrote_them_on_jdk_25_too() {
    conformance_on(
        &scripts::java25().display().to_string(),
        "memory://",
        seed(),
    );
}

#[test]
fn concurrent_sets_then_stop_twice_and_every_call_after_stop() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&[
        "threads",
        &format!("rocksdb://{}", path(dir.path(), "offsets")),
        &path(dir.path(), "log"),
    ]);
    for line in [
        "ok threads: 4 threads x 50 flushes",
        "ok set of a null key: set() of an offset under a null key",
        "ok get after stop: org.apache.kafka.connect.errors.ConnectException: offset store of rocksdb://",
        "ok set after stop: offset store of rocksdb://",
        "ok start after stop: offset store of rocksdb://",
    ] {
        assert!(out.contains(line), "no `{line}` in:\n{out}");
    }
}

/// `configure` + `start` with `props`: the one line it printed.
fn configured(classpath: &str, props: &[&str]) -> String {
    let mut args = vec!["configure"];
    args.extend_from_slice(props);
    run_on(classpath, &args).trim().to_string()
}

#[test]
fn bad_configuration_is_refused_naming_what_was_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let url_prop = |u: &str| format!("offset.storage.connect-offsets.url={u}");
    let log_prop = |name: &str| {
        format!(
            "offset.storage.connect-offsets.log.dir={}",
            path(dir.path(), name)
        )
    };
    let cp = classpath();
    let exception = "error: org.apache.kafka.connect.errors.ConnectException: ";
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec![], "offset.storage.connect-offsets.url is not set"),
        (
            vec![url_prop("memory://")],
            "offset.storage.connect-offsets.log.dir is not set",
        ),
        (
            vec![url_prop("bogus://x"), log_prop("l1")],
            "opening `bogus://x`: invalid store URL `bogus://x`: unknown scheme `bogus`",
        ),
        // A secret in the URL is masked in the message (it reaches the engine's logs).
        (
            vec![
                url_prop("kafka://127.0.0.1:1/t?sasl.password=hunter2&timeout.ms=1000"),
                log_prop("l6"),
            ],
            "opening `kafka://127.0.0.1:1/t?sasl.password=****&timeout.ms=1000`",
        ),
        (
            vec![
                url_prop("memory://"),
                log_prop("l2"),
                "offset.storage.connect-offsets.offsets.durability=never".into(),
            ],
            "offset.storage.connect-offsets.offsets.durability",
        ),
        (
            vec![
                url_prop("memory://"),
                log_prop("l3"),
                "offset.storage.connect-offsets.offset.flush.interval.ms=10".into(),
            ],
            "the engine's own offset.flush.interval.ms decides when offsets are committed",
        ),
        (
            vec![
                url_prop("memory://"),
                log_prop("l4"),
                "offset.storage.connect-offsets.native.library=/nonexistent/libx.so".into(),
            ],
            "cannot load connect-offsets' native library /nonexistent/libx.so (named by offset.storage.connect-offsets.native.library)",
        ),
        (
            vec![url_prop("memory://"), log_prop("l5"), "--bad-key".into()],
            "offset key `{\"not\":\"a key\"}`: cannot decode offset key: expected a [connector, partition] array",
        ),
    ];
    for (props, expected) in cases {
        let props: Vec<&str> = props.iter().map(String::as_str).collect();
        let line = configured(&cp, &props);
        assert!(
            line.starts_with(exception) && line.contains(expected),
            "{props:?}: expected a ConnectException with `{expected}`, got `{line}`"
        );
        assert!(!line.contains("hunter2"), "a secret shown: {line}");
    }
    // A log directory another open store holds is refused too (one writer per log).
    let held = tempfile::tempdir().unwrap();
    let props = [
        url_prop("memory://"),
        format!(
            "offset.storage.connect-offsets.log.dir={}",
            path(held.path(), "log")
        ),
    ];
    let mut child = Command::new(java())
        .args([
            "-cp",
            &cp,
            MAIN,
            "acked",
            "memory://",
            &path(held.path(), "log"),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("acked"), "{first}");
    let props: Vec<&str> = props.iter().map(String::as_str).collect();
    let line = configured(&cp, &props);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        line.starts_with(exception) && line.contains(&path(held.path(), "log")),
        "a second store on a held log: {line}"
    );
}

#[test]
fn a_library_that_is_not_ours_or_of_another_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let props = |extra: &str| {
        let mut p = vec![
            "offset.storage.connect-offsets.url=memory://".to_string(),
            format!(
                "offset.storage.connect-offsets.log.dir={}",
                path(dir.path(), "log")
            ),
        ];
        if !extra.is_empty() {
            p.push(extra.to_string());
        }
        p
    };
    let cp = classpath();
    // Any loadable shared library without our functions.
    let libz = [
        "/usr/lib/x86_64-linux-gnu/libz.so.1",
        "/lib/x86_64-linux-gnu/libz.so.1",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists())
    .expect("libz.so.1 (zlib1g) is installed");
    let p = props(&format!(
        "offset.storage.connect-offsets.native.library={libz}"
    ));
    let line = configured(&cp, &p.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        line.contains("is not connect-offsets' native library"),
        "{line}"
    );

    // The same jar, told it is version 9.9.9: the library (0.1.0) is refused.
    let jar = cp.split(':').next().unwrap();
    let copy = dir.path().join("other-version.jar");
    std::fs::copy(jar, &copy).unwrap();
    let props_dir = dir.path().join("props");
    std::fs::create_dir_all(props_dir.join("connectoffsets/jni")).unwrap();
    std::fs::write(
        props_dir.join("connectoffsets/jni/connect-offsets.properties"),
        "version=9.9.9\n",
    )
    .unwrap();
    let status = Command::new("jar")
        .args([
            "uf",
            copy.to_str().unwrap(),
            "-C",
            props_dir.to_str().unwrap(),
        ])
        .arg("connectoffsets/jni/connect-offsets.properties")
        .status()
        .expect("run jar (the JDK's)");
    assert!(status.success());
    let other_cp = format!("{}:{}", copy.display(), &cp[jar.len() + 1..]);
    let line = configured(
        &other_cp,
        &props("").iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert!(
        line.contains(&format!(
            "is version {} but this jar is 9.9.9",
            env!("CARGO_PKG_VERSION")
        )),
        "{line}"
    );
    // And the jar as built loads its own library.
    let line = configured(
        &cp,
        &props("").iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert_eq!(line, "started");
}

/// How long a JVM may take to acknowledge its first set, on a machine as busy as any.
const FIRST_ACK_WITHIN: Duration = Duration::from_secs(120);

/// One run of the `acked` loop, SIGKILLed `after` its first acknowledged set: the last `n`
/// acknowledged per partition.
fn acked_then_killed(store: &str, log: &str, after: Duration) -> Vec<(u32, u64)> {
    let mut child = Command::new(java())
        .args(["-cp", &classpath(), MAIN, "acked", store, log])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (first_ack, acked) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut last = vec![0u64; 10];
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap();
            let mut f = line.split(' ');
            if f.next() == Some("acked") {
                let p: usize = f.next().unwrap().parse().unwrap();
                last[p] = f.next().unwrap().parse().unwrap();
                let _ = first_ack.send(());
            }
        }
        last
    });
    // Timed from readiness, not from the start: the kill lands while sets are being acknowledged.
    let started = Instant::now();
    if acked.recv_timeout(FIRST_ACK_WITHIN).is_err() {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "the JVM acknowledged no set within {:?} of its start",
            started.elapsed()
        );
    }
    std::thread::sleep(after);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let last = reader.join().unwrap();
    last.into_iter()
        .enumerate()
        .map(|(p, n)| (p as u32, n))
        .collect()
}

#[test]
fn every_set_acknowledged_before_a_sigkill_is_read_back() {
    let cycles: u32 = std::env::var("JAVA_STORE_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let seed = seed();
    let dir = tempfile::tempdir().unwrap();
    let store = format!("rocksdb://{}", path(dir.path(), "offsets"));
    let log = path(dir.path(), "log");
    let mut total = 0;
    let started = Instant::now();
    println!("seed {seed}, {cycles} cycles");
    for cycle in 0..cycles {
        // 0 to 2.0 s after the first acknowledged set (a busy machine may take many seconds to
        // start the JVM: a kill timed from the start could land before any set).
        let after =
            Duration::from_millis((seed.wrapping_mul(31).wrapping_add(cycle as u64 * 7919)) % 2000);
        let acked = acked_then_killed(&store, &log, after);
        let out = run(&["read", &store, &log]);
        for (p, n) in acked {
            let line = out
                .lines()
                .find(|l| l.starts_with(&format!("read {p} ")))
                .unwrap();
            let read: u64 = if line.ends_with("none") {
                0
            } else {
                let v = line.rsplit(':').next().unwrap().trim_end_matches('}');
                v.parse().unwrap()
            };
            assert!(
                read >= n,
                "cycle {cycle}: partition {p} acknowledged n={n} before the SIGKILL, read back {read}"
            );
            total = total.max(n);
        }
    }
    println!(
        "{cycles} SIGKILLs, {total} sets acknowledged, all read back ({:.0?})",
        started.elapsed()
    );
    assert!(total > 0, "no set was acknowledged at all");
}
