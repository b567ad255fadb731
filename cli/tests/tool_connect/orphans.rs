//! `orphans` against a real Kafka Connect 4.4.0 worker (issue 45, "Offsets that outlive their
//! connector"): Connect keeps a deleted connector's offsets, and a new connector of the same name
//! resumes from them. With the worker's config topic the tool tells those orphans apart.
//! 1. A `FileStreamSourceConnector` reads a 5-line file and commits its position; while it is
//!    configured, `orphans` does not list it and `--reset` refuses it by name.
//! 2. Deleted through Connect's REST API, it is listed with its one partition and last write;
//!    `--reset` of an unknown name is refused; `--reset NAME --dry-run` prints the partition and
//!    writes nothing (not one record on the offsets topic; `export` unchanged).
//! 3. Two lines are appended and a connector of the same name re-created, without a reset: it
//!    resumes from the old position and sends the 2 new lines only (the bug users hit).
//! 4. Deleted again and reset through `orphans --reset`: `get` finds no offset, and the connector
//!    re-created once more starts from scratch, sending all 7 lines.
//! 5. Deleted a third time, `--reset-all` resets it; nothing is orphaned afterwards.
//! 6. A `FileStreamSinkConnector` over `kafka-group://`: deleted, its `connect-<name>` group is
//!    listed as a sink orphan; the dry run leaves the group's committed offsets; the reset empties
//!    them, and the sink re-created writes every record again.
//!
//! `serve --reset-orphans-after 3s` over the worker's offsets topic with `?history=7d`:
//! 1. An orphan from before (offsets the tool wrote, no config) is reset by serve's own thread
//!    after the grace period, while a running source connector's offsets, older than the grace
//!    period, stay untouched: configured, it is no orphan.
//! 2. The source deleted through Connect's REST API, serve resets its offsets by itself, no
//!    sooner than the grace period after the deletion; `history` (the CLI and serve's
//!    `GET /connectors/{name}/offsets/history`) shows the reset, with the position it removed.
//! 3. Re-created stopped (`initial_state`), Connect sees no offsets; `rewind --to` a time between
//!    the deletion and the reset puts them back (Connect's `GET offsets` shows them); resumed, the
//!    connector goes on from there and sends the 2 lines appended meanwhile, only them.
#![cfg(feature = "kafka")]

use crate::http_util;
use crate::kafka_util;
use crate::scripts;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use connect_offsets::OffsetStore;
use connect_offsets::internal::codec::json;
use connect_offsets::internal::connector_offsets::ConnectorOffsets;
use connect_offsets::internal::time;
use connect_offsets::store::kafka::KafkaGroupStore;
use connect_offsets::{Offset, Partition};
use http_util::Serve;
use http_util::request as http;
use kafka_util::{
    BOUNDS, TopicGuard, bootstrap, cli, create_topic, produce_plain, read_all, unique_topic,
};
use scripts::{ConnectWorker, connector_status, wait_for};

const FILE_SOURCE: &str = "org.apache.kafka.connect.file.FileStreamSourceConnector";
const FILE_SINK: &str = "org.apache.kafka.connect.file.FileStreamSinkConnector";
/// Generous: a loaded machine takes seconds to start a connector's task.
const WAIT: Duration = Duration::from_secs(180);
const POLL: Duration = Duration::from_millis(250);

fn js(s: &str) -> String {
    let mut out = Vec::new();
    json::encode_str(s, &mut out);
    String::from_utf8(out).unwrap()
}

/// `connect-offsets ARGS`, whatever its exit code.
fn tool(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_connect-offsets"))
        .args(args)
        .env_remove("CONNECT_OFFSETS_STORE")
        .output()
        .expect("run connect-offsets")
}

/// `orphans --json` of `store`: name -> (partitions, last_write, sink).
fn orphans(
    store: &str,
    configs: &str,
) -> std::collections::BTreeMap<String, (u64, serde_json::Value, bool)> {
    let out = cli(&[
        "orphans",
        "--store",
        store,
        "--connect-configs",
        configs,
        "--json",
    ]);
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("orphans --json `{out}`: {e}"));
    v.as_array()
        .unwrap_or_else(|| panic!("an array: {out}"))
        .iter()
        .map(|o| {
            (
                o["name"].as_str().unwrap().to_string(),
                (
                    o["partitions"].as_u64().unwrap(),
                    o["last_write"].clone(),
                    o["sink"].as_bool().unwrap(),
                ),
            )
        })
        .collect()
}

struct Worker<'a> {
    worker: &'a ConnectWorker,
}

impl Worker<'_> {
    fn url(&self, name: &str, path: &str) -> String {
        format!("{}/connectors/{name}{path}", self.worker.base)
    }

    fn create(&self, name: &str, config: &str) {
        let body = format!(r#"{{"name":{},"config":{config}}}"#, js(name));
        let (st, text) = http(
            "POST",
            &format!("{}/connectors", self.worker.base),
            Some(&body),
        );
        assert_eq!(st, 201, "create {name}: {text}");
        wait_for(
            || {
                format!(
                    "{name} RUNNING with its task (log:\n{})",
                    ConnectWorker::log_tail(30)
                )
            },
            WAIT,
            POLL,
            || {
                let (st, body) = http("GET", &self.url(name, "/status"), None);
                let (c, t) = (st == 200).then(|| connector_status(&body)).flatten()?;
                (c == "RUNNING" && t == ["RUNNING"]).then_some(())
            },
        );
    }

    fn source(&self, name: &str, file: &Path, topic: &str) {
        self.create(
            name,
            &format!(
                r#"{{"connector.class":"{FILE_SOURCE}","tasks.max":"1","file":{},"topic":{}}}"#,
                js(file.to_str().unwrap()),
                js(topic)
            ),
        );
    }

    fn sink(&self, name: &str, file: &Path, topic: &str) {
        self.create(
            name,
            &format!(
                r#"{{"connector.class":"{FILE_SINK}","tasks.max":"1","file":{},"topics":{}}}"#,
                js(file.to_str().unwrap()),
                js(topic)
            ),
        );
    }

    fn offsets(&self, name: &str) -> ConnectorOffsets {
        let (st, body) = http("GET", &self.url(name, "/offsets"), None);
        assert_eq!(st, 200, "GET {name}/offsets: {body}");
        ConnectorOffsets::parse(body.as_bytes()).unwrap_or_else(|e| panic!("`{body}`: {e}"))
    }

    /// Waits until Connect's `GET offsets` shows `offset` for `partition` (what its task committed).
    fn wait_offset(&self, name: &str, partition: &Partition, offset: &Offset) {
        wait_for(
            || {
                format!(
                    "{name}'s offset {} for {} (last: {}; log:\n{})",
                    offset.to_json(),
                    partition.to_json(),
                    self.offsets(name).to_json(),
                    ConnectWorker::log_tail(30)
                )
            },
            WAIT,
            POLL,
            || {
                self.offsets(name)
                    .offsets
                    .iter()
                    .any(|(p, o)| p.as_ref() == Some(partition) && o.as_ref() == Some(offset))
                    .then_some(())
            },
        );
    }

    /// Creates `name` in the STOPPED state (`initial_state`, KIP-980): configured, no task runs.
    fn create_stopped(&self, name: &str, config: &str) {
        let body = format!(
            r#"{{"name":{},"config":{config},"initial_state":"STOPPED"}}"#,
            js(name)
        );
        let (st, text) = http(
            "POST",
            &format!("{}/connectors", self.worker.base),
            Some(&body),
        );
        assert_eq!(st, 201, "create {name} stopped: {text}");
        self.wait_state(name, "STOPPED", &[]);
    }

    /// Resumes a stopped or paused `name` and waits for it and its task to run.
    fn resume(&self, name: &str) {
        let (st, body) = http("PUT", &self.url(name, "/resume"), None);
        assert_eq!(st, 202, "resume {name}: {body}");
        self.wait_state(name, "RUNNING", &["RUNNING"]);
    }

    fn wait_state(&self, name: &str, connector: &str, tasks: &[&str]) {
        wait_for(
            || {
                format!(
                    "{name} {connector} with tasks {tasks:?} (log:\n{})",
                    ConnectWorker::log_tail(30)
                )
            },
            WAIT,
            POLL,
            || {
                let (st, body) = http("GET", &self.url(name, "/status"), None);
                let (c, t) = (st == 200).then(|| connector_status(&body)).flatten()?;
                (c == connector && t == tasks).then_some(())
            },
        );
    }

    /// Deletes `name` and waits until the worker no longer knows it.
    fn delete(&self, name: &str) {
        let (st, body) = http("DELETE", &self.url(name, ""), None);
        assert!(matches!(st, 200 | 204), "DELETE {name}: {st} {body}");
        wait_for(
            || format!("{name} gone from the worker"),
            WAIT,
            POLL,
            || (http("GET", &self.url(name, "/status"), None).0 == 404).then_some(()),
        );
    }
}

/// The values of `topic`'s records, once it holds `n`, checking that no more come within 2 s.
fn records(topic: &str, n: usize) -> Vec<String> {
    let read = || -> Vec<String> {
        read_all(topic, "read_uncommitted")
            .into_iter()
            .map(|r| String::from_utf8_lossy(&r.value.unwrap_or_default()).into_owned())
            .collect()
    };
    wait_for(
        || format!("{n} records in {topic} (has {:?})", read()),
        WAIT,
        POLL,
        || (read().len() >= n).then_some(()),
    );
    std::thread::sleep(Duration::from_secs(2));
    read()
}

/// The file's lines, once it has `n`, checking that no more come within 2 s.
fn lines(file: &Path, n: usize) -> Vec<String> {
    let read = || -> Vec<String> {
        std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    };
    wait_for(
        || format!("{n} lines in {} (has {:?})", file.display(), read()),
        WAIT,
        POLL,
        || (read().len() >= n).then_some(()),
    );
    std::thread::sleep(Duration::from_secs(2));
    read()
}

#[test]
fn a_deleted_connectors_offsets_are_found_and_reset_before_it_comes_back() {
    let started = Instant::now();
    let bootstrap = bootstrap();
    let offsets_topic = unique_topic("orphans-offsets");
    let worker_group = unique_topic("orphans-worker");
    let worker = ConnectWorker::start(&bootstrap, &offsets_topic, &worker_group);
    let w = Worker { worker: &worker };
    eprintln!("orphans: worker up after {:?}", started.elapsed());
    let configs = format!("kafka://{bootstrap}/{worker_group}-configs?{BOUNDS}");
    let store = format!("kafka://{bootstrap}/{offsets_topic}?partitions=25&replication=1&{BOUNDS}");
    let orphans_of = |store: &str| orphans(store, &configs);

    // 1. A source connector reads 5 lines and commits its position.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lines.txt");
    let first: String = (1..=5).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&file, &first).unwrap();
    let partition = Partition::new().with("filename", file.to_str().unwrap());
    let at = |n: usize| Offset::new().with("position", n as i64);
    let name = unique_topic("orphan-source");
    let topic1 = TopicGuard::new("orphans-lines-1");
    create_topic(&topic1, 1, &[]);
    w.source(&name, &file, &topic1);
    w.wait_offset(&name, &partition, &at(first.len()));
    assert_eq!(records(&topic1, 5).len(), 5);
    assert!(
        !orphans_of(&store).contains_key(&name),
        "a configured connector is no orphan"
    );
    let out = tool(&[
        "orphans",
        "--store",
        &store,
        "--connect-configs",
        &configs,
        "--reset",
        &name,
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&name) && err.contains("has a config in the Connect cluster"),
        "{err}"
    );

    // 2. Deleted, its offsets stay: an orphan.
    w.delete(&name);
    let found = orphans_of(&store);
    let (partitions, last_write, sink) = found
        .get(&name)
        .unwrap_or_else(|| panic!("{name} among the orphans: {found:?}"));
    assert_eq!((*partitions, *sink), (1, false));
    assert!(
        last_write.as_str().is_some_and(|t| t.ends_with('Z')),
        "an RFC 3339 last write: {last_write}"
    );
    let text = cli(&["orphans", "--store", &store, "--connect-configs", &configs]);
    assert!(
        text.lines()
            .any(|l| l.starts_with(&format!("{name}\t1\t")) && l.ends_with("\tsource")),
        "{text}"
    );
    let out = tool(&[
        "orphans",
        "--store",
        &store,
        "--connect-configs",
        &configs,
        "--reset",
        "no-such-connector",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("unknown connector \"no-such-connector\""),
        "{err}"
    );

    let export = || cli(&["export", "--store", &store, "--connector", &name]);
    let exported = export();
    let records_before = read_all(&offsets_topic, "read_uncommitted").len();
    let dry = cli(&[
        "orphans",
        "--store",
        &store,
        "--connect-configs",
        &configs,
        "--reset",
        &name,
        "--dry-run",
    ]);
    assert_eq!(
        dry.trim_end(),
        format!(
            "{name}\t{}: {} -> reset",
            partition.to_json(),
            at(first.len()).to_json()
        ),
        "the dry run prints the partition it would reset"
    );
    assert_eq!(export(), exported, "the dry run wrote nothing");
    assert_eq!(
        read_all(&offsets_topic, "read_uncommitted").len(),
        records_before,
        "not one record on the offsets topic"
    );

    // 3. Re-created without a reset, it resumes from the old offsets: only the new lines go out.
    let more = "line 6\nline 7\n";
    std::fs::write(&file, format!("{first}{more}")).unwrap();
    let all = first.len() + more.len();
    let topic2 = TopicGuard::new("orphans-lines-2");
    create_topic(&topic2, 1, &[]);
    w.source(&name, &file, &topic2);
    w.wait_offset(&name, &partition, &at(all));
    assert_eq!(
        records(&topic2, 2),
        ["line 6", "line 7"].map(js),
        "without a reset the re-created connector resumes where the deleted one was"
    );

    // 4. Deleted and reset: the connector re-created starts from scratch.
    w.delete(&name);
    assert_eq!(orphans_of(&store).get(&name).map(|o| o.0), Some(1));
    let reset = cli(&[
        "orphans",
        "--store",
        &store,
        "--connect-configs",
        &configs,
        "--reset",
        &name,
    ]);
    assert_eq!(
        reset.trim_end(),
        format!(
            "{name}\t{}: {} -> reset",
            partition.to_json(),
            at(all).to_json()
        )
    );
    let got = tool(&[
        "get",
        "--store",
        &store,
        "--connector",
        &name,
        "--partition",
        &partition.to_json(),
    ]);
    assert_eq!(got.status.code(), Some(3), "no offset after the reset");
    assert!(
        !orphans_of(&store).contains_key(&name),
        "no longer orphaned"
    );
    let topic3 = TopicGuard::new("orphans-lines-3");
    create_topic(&topic3, 1, &[]);
    w.source(&name, &file, &topic3);
    w.wait_offset(&name, &partition, &at(all));
    let want: Vec<String> = (1..=7).map(|i| js(&format!("line {i}"))).collect();
    assert_eq!(
        records(&topic3, 7),
        want,
        "after the reset the re-created connector reads the file from its start"
    );

    // 5. `--reset-all`.
    w.delete(&name);
    let out = cli(&[
        "orphans",
        "--store",
        &store,
        "--connect-configs",
        &configs,
        "--reset-all",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["dry_run"], false, "{out}");
    let reset: Vec<&str> = v["reset"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(reset, [name.as_str()], "{out}");
    assert_eq!(v["reset"][0]["changes"][0]["to"], serde_json::Value::Null);
    assert!(orphans_of(&store).is_empty(), "nothing orphaned");
    eprintln!("orphans: source part done after {:?}", started.elapsed());

    // 6. A sink connector's consumer group over kafka-group://.
    let sink_topic = TopicGuard::new("orphans-sink-data");
    create_topic(&sink_topic, 1, &[]);
    let values: Vec<Vec<u8>> = (0..6).map(|i| js(&format!("r{i}")).into_bytes()).collect();
    let plain: Vec<_> = values
        .iter()
        .map(|v| (Some(0), None, Some(&v[..])))
        .collect();
    produce_plain(&sink_topic, &plain);
    let groups = format!("kafka-group://{bootstrap}/?timeout.ms=300000");
    let group_store = KafkaGroupStore::open(&groups).unwrap();
    let sink = unique_topic("orphan-sink");
    let sink_partition = Partition::new()
        .with("kafka_topic", &*sink_topic)
        .with("kafka_partition", 0i64);
    let sink_at = Offset::new().with("kafka_offset", 6);
    let out1 = dir.path().join("sink-1.txt");
    w.sink(&sink, &out1, &sink_topic);
    w.wait_offset(&sink, &sink_partition, &sink_at);
    assert_eq!(lines(&out1, 6).len(), 6);
    w.delete(&sink);
    let group = group_store.group_of(&sink).unwrap();
    wait_for(
        || format!("group {group} to have no members"),
        WAIT,
        POLL,
        || {
            group_store
                .members(&group)
                .unwrap()
                .is_empty()
                .then_some(())
        },
    );
    let found = orphans_of(&groups);
    let (partitions, last_write, is_sink) = found
        .get(&sink)
        .unwrap_or_else(|| panic!("{sink} among the orphans: {found:?}"));
    assert_eq!(
        (*partitions, last_write, *is_sink),
        (1, &serde_json::Value::Null, true)
    );
    let committed = || OffsetStore::partitions(&group_store, &sink).unwrap();
    let before = committed();
    assert_eq!(before.len(), 1);
    let dry = cli(&[
        "orphans",
        "--store",
        &groups,
        "--connect-configs",
        &configs,
        "--reset",
        &sink,
        "--dry-run",
    ]);
    assert!(dry.contains(r#""kafka_offset":6"#), "{dry}");
    assert_eq!(committed(), before, "the dry run left the group");
    cli(&[
        "orphans",
        "--store",
        &groups,
        "--connect-configs",
        &configs,
        "--reset",
        &sink,
    ]);
    assert!(committed().is_empty(), "the reset emptied the group");
    assert!(!orphans_of(&groups).contains_key(&sink));
    let out2 = dir.path().join("sink-2.txt");
    w.sink(&sink, &out2, &sink_topic);
    let want: Vec<String> = (0..6).map(|i| format!("r{i}")).collect();
    assert_eq!(
        lines(&out2, 6),
        want,
        "the re-created sink consumes from the start"
    );
    w.wait_offset(&sink, &sink_partition, &sink_at);
    w.delete(&sink);
    eprintln!("orphans: done in {:?}", started.elapsed());
}

/// `get` of one partition: its offset's JSON, `None` when the store holds none (exit code 3).
fn get(store: &str, name: &str, partition: &Partition) -> Option<String> {
    let out = tool(&[
        "get",
        "--store",
        store,
        "--connector",
        name,
        "--partition",
        &partition.to_json(),
    ]);
    match out.status.code() {
        Some(0) => {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            Some(v["offset"].to_string())
        }
        Some(3) => None,
        _ => panic!(
            "get {name}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

#[test]
fn serve_resets_a_deleted_connectors_offsets_after_the_grace_period_and_a_rewind_brings_them_back()
{
    let started = Instant::now();
    let bootstrap = bootstrap();
    let offsets_topic = unique_topic("auto-reset-offsets");
    let worker_group = unique_topic("auto-reset-worker");
    let worker = ConnectWorker::start(&bootstrap, &offsets_topic, &worker_group);
    let w = Worker { worker: &worker };
    eprintln!("auto reset: worker up after {:?}", started.elapsed());
    // Read at every round of serve's thread: a consumer's setting only.
    let configs = format!("kafka://{bootstrap}/{worker_group}-configs?timeout.ms=300000");
    let store = format!(
        "kafka://{bootstrap}/{offsets_topic}?partitions=25&replication=1&{BOUNDS}&history=7d"
    );
    let grace = Duration::from_secs(3);

    // A source connector reads 5 lines and commits its position.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lines.txt");
    let first: String = (1..=5).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&file, &first).unwrap();
    let partition = Partition::new().with("filename", file.to_str().unwrap());
    let at = |n: usize| Offset::new().with("position", n as i64);
    let name = unique_topic("auto-reset-source");
    let config = |topic: &str| {
        format!(
            r#"{{"connector.class":"{FILE_SOURCE}","tasks.max":"1","file":{},"topic":{}}}"#,
            js(file.to_str().unwrap()),
            js(topic)
        )
    };
    let topic1 = TopicGuard::new("auto-reset-lines-1");
    create_topic(&topic1, 1, &[]);
    w.create(&name, &config(&topic1));
    w.wait_offset(&name, &partition, &at(first.len()));
    assert_eq!(records(&topic1, 5).len(), 5);
    let position = Some(at(first.len()).to_json());
    assert_eq!(get(&store, &name, &partition), position);

    // An orphan from before: offsets the tool wrote for a connector the cluster has no config
    // for. History starts with this write: it is the oldest time a rewind reaches, and a reset
    // that was history's first record could not be rewound (the worker's own commits are not
    // recorded).
    let before = unique_topic("auto-reset-before");
    let before_partition = Partition::new().with("filename", "/gone");
    cli(&[
        "set",
        "--store",
        &store,
        "--connector",
        &before,
        "--partition",
        &before_partition.to_json(),
        "--offset",
        r#"{"position":1}"#,
    ]);

    // 1. serve resets the orphan after the grace period, and leaves the configured connector.
    let serve = Serve::start(&[
        "--store",
        &store,
        "--connect-configs",
        &configs,
        "--reset-orphans-after",
        "3s",
    ]);
    let ready = Instant::now();
    wait_for(
        || format!("serve to reset orphan {before}"),
        Duration::from_secs(120),
        POLL,
        || {
            get(&store, &before, &before_partition)
                .is_none()
                .then_some(())
        },
    );
    let took = ready.elapsed();
    assert!(
        took >= grace,
        "reset after {took:?}, before the grace period"
    );
    eprintln!("auto reset: the orphan from before reset {took:?} after readiness");
    // Past the grace period and then some: the configured connector's offsets, unchanged for
    // longer than that, are still there.
    std::thread::sleep((grace + Duration::from_secs(2)).saturating_sub(ready.elapsed()));
    assert_eq!(
        get(&store, &name, &partition),
        position,
        "a configured connector's offsets are not reset"
    );
    let history = |name: &str| -> serde_json::Value {
        let out = cli(&["history", "--store", &store, "--connector", name, "--json"]);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("history --json `{out}`: {e}"))
    };
    assert_eq!(
        history(&before)["changes"][0]["to"],
        serde_json::Value::Null,
        "serve's reset is recorded"
    );

    // 2. Deleted, the source's offsets are reset by serve, no sooner than the grace period.
    // Timed from before the request: serve may see the config gone before the worker's
    // status answers 404.
    let deleting = Instant::now();
    let deleting_us = time::now_us();
    w.delete(&name);
    let deleted_us = time::now_us();
    wait_for(
        || format!("serve to reset the offsets of deleted connector {name}"),
        Duration::from_secs(120),
        POLL,
        || get(&store, &name, &partition).is_none().then_some(()),
    );
    let took = deleting.elapsed();
    assert!(took >= grace, "reset {took:?} after the deletion");
    eprintln!("auto reset: {name} reset {took:?} after its deletion");
    assert!(
        !orphans(&store, &configs).contains_key(&name),
        "no longer orphaned"
    );
    let h = history(&name);
    let changes = h["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "one change, the reset: {h}");
    let reset = &changes[0];
    assert_eq!(
        (
            reset["partition"].to_string(),
            Some(reset["from"].to_string()),
            &reset["to"]
        ),
        (
            partition.to_json(),
            position.clone(),
            &serde_json::Value::Null
        ),
        "{h}"
    );
    let reset_us = time::parse_rfc3339(reset["at"].as_str().unwrap()).unwrap();
    assert!(
        reset_us >= deleting_us + grace.as_micros() as i64 && reset_us > deleted_us,
        "the reset at {} comes a grace period after the deletion at {}",
        time::format_rfc3339(reset_us),
        time::format_rfc3339(deleting_us)
    );
    let text = cli(&["history", "--store", &store, "--connector", &name]);
    assert!(
        text.contains(&format!(
            "{}: {} -> reset",
            partition.to_json(),
            at(first.len()).to_json()
        )),
        "{text}"
    );
    let (st, body) = http(
        "GET",
        &serve.url(&format!("/connectors/{name}/offsets/history")),
        None,
    );
    assert_eq!(st, 200, "{body}");
    let served: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        served["changes"], h["changes"],
        "serve's history is the CLI's"
    );

    // 3. Re-created stopped: Connect sees no offsets. A rewind to between the deletion and the
    //    reset brings them back; resumed, the connector goes on from there.
    let more = "line 6\nline 7\n";
    std::fs::write(&file, format!("{first}{more}")).unwrap();
    let topic2 = TopicGuard::new("auto-reset-lines-2");
    create_topic(&topic2, 1, &[]);
    w.create_stopped(&name, &config(&topic2));
    assert!(
        w.offsets(&name).offsets.is_empty(),
        "Connect sees the reset: {}",
        w.offsets(&name).to_json()
    );
    let target = time::format_rfc3339(deleted_us);
    let out = cli(&[
        "rewind",
        "--store",
        &store,
        "--connector",
        &name,
        "--to",
        &target,
    ]);
    assert_eq!(
        out.trim_end(),
        format!(
            "{}: none -> {}",
            partition.to_json(),
            at(first.len()).to_json()
        ),
        "the rewind puts back the position the reset removed"
    );
    assert_eq!(get(&store, &name, &partition), position);
    let seen = w.offsets(&name);
    assert!(
        seen.offsets
            .iter()
            .any(|(p, o)| p.as_ref() == Some(&partition) && o.as_ref() == Some(&at(first.len()))),
        "Connect sees the rewound offset: {}",
        seen.to_json()
    );
    // Configured again, serve leaves it be: past another grace period, it is still there.
    std::thread::sleep(grace + Duration::from_secs(2));
    assert_eq!(get(&store, &name, &partition), position);
    w.resume(&name);
    w.wait_offset(&name, &partition, &at(first.len() + more.len()));
    assert_eq!(
        records(&topic2, 2),
        ["line 6", "line 7"].map(js),
        "after the rewind the connector resumes where the deleted one was"
    );
    drop(serve);
    w.delete(&name);
    eprintln!("auto reset: done in {:?}", started.elapsed());
}
