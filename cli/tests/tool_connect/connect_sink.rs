//! `kafka-group://` and a real Kafka Connect 4.4.0 distributed worker (`scripts/connect start`, on
//! the test broker) running `FileStreamSinkConnector`. Records are produced to a 2-partition topic,
//! the sink consumes part of them (the first 10 of each partition) and is stopped, then:
//! 1. our `list` equals Connect's `GET /connectors/{name}/offsets`, and so does `serve`'s `GET`;
//! 2. our `set` moves both partitions; Connect's `GET` shows the new positions and the resumed sink
//!    writes exactly the records from there on, nothing before them, each once;
//! 3. while the sink runs (its group has members) our `set` is refused with Connect's message,
//!    and nothing changes;
//! 4. stopped again, Connect's `PATCH` (a string offset and a `null`) reads back through our store as
//!    through Connect, our `serve`'s `PATCH` reads back through Connect, and our `reset --all` makes
//!    Connect's `GET` answer `{"offsets":[]}`.
#![cfg(feature = "kafka")]

use crate::http_util;
use crate::kafka_util;
use crate::scripts;

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use connect_offsets::internal::codec::json;
use connect_offsets::internal::connector_offsets::ConnectorOffsets;
use connect_offsets::store::kafka::KafkaGroupStore;
use connect_offsets::{OffsetKey, Value};
use http_util::{Serve, request as http};
use kafka_util::{TopicGuard, bootstrap, cli, create_topic, produce_plain, unique_topic};
use scripts::{ConnectWorker, connector_status, wait_for};

const FILE_SINK: &str = "org.apache.kafka.connect.file.FileStreamSinkConnector";
const WAIT: Duration = Duration::from_secs(120);
const POLL: Duration = Duration::from_millis(250);
const PARTITIONS: i32 = 2;

/// `(topic, partition, offset)` of every entry, for comparing documents whose member and entry
/// order differ (Connect's HashMap order, ours sorted).
fn positions(doc: &ConnectorOffsets) -> BTreeSet<(String, i64, i64)> {
    doc.offsets
        .iter()
        .map(|(p, o)| {
            let p = p.as_ref().expect("a sink partition");
            let o = o.as_ref().expect("an offset");
            match (
                p.get("kafka_topic"),
                p.get("kafka_partition"),
                o.get("kafka_offset"),
            ) {
                (Some(Value::String(t)), Some(Value::Int(n)), Some(Value::Int(off))) => {
                    (t.clone(), *n, *off)
                }
                _ => panic!("not a sink entry: {p:?} {o:?}"),
            }
        })
        .collect()
}

/// Each entry's partition as printed, members in their order: what a diff of two outputs sees.
fn printed_partitions(doc: &ConnectorOffsets) -> BTreeSet<String> {
    doc.offsets
        .iter()
        .map(|(p, _)| p.as_ref().expect("a sink partition").to_json())
        .collect()
}

fn parse(body: &str) -> ConnectorOffsets {
    ConnectorOffsets::parse(body.as_bytes()).unwrap_or_else(|e| panic!("`{body}`: {e}"))
}

/// Produces records `from..to` to each partition: JSON strings `"p<partition>-<n>"`, which the
/// sink writes as lines `p<partition>-<n>`.
fn produce(topic: &str, from: usize, to: usize) {
    let values: Vec<(i32, Vec<u8>)> = (0..PARTITIONS)
        .flat_map(|p| (from..to).map(move |i| (p, format!("\"p{p}-{i}\"").into_bytes())))
        .collect();
    let records: Vec<_> = values
        .iter()
        .map(|(p, v)| (Some(*p), None, Some(&v[..])))
        .collect();
    produce_plain(topic, &records);
}

struct Sink<'a> {
    worker: &'a ConnectWorker,
    name: String,
}

impl Sink<'_> {
    fn url(&self, path: &str) -> String {
        format!("{}/connectors/{}{path}", self.worker.base, self.name)
    }

    fn offsets(&self) -> ConnectorOffsets {
        let (st, body) = http("GET", &self.url("/offsets"), None);
        assert_eq!(st, 200, "GET offsets: {body}");
        parse(&body)
    }

    /// Polls Connect's `GET` until it shows `want`.
    fn wait_offsets(&self, want: &BTreeSet<(String, i64, i64)>) {
        wait_for(
            || {
                format!(
                    "Connect's GET offsets to be {want:?} (last: {:?}; log:\n{})",
                    positions(&self.offsets()),
                    ConnectWorker::log_tail(30)
                )
            },
            WAIT,
            POLL,
            || (positions(&self.offsets()) == *want).then_some(()),
        )
    }

    fn state(&self) -> Option<(String, Vec<String>)> {
        let (st, body) = http("GET", &self.url("/status"), None);
        if st != 200 {
            return None;
        }
        connector_status(&body)
    }

    fn wait_state(&self, connector: &str, tasks: &[&str]) {
        wait_for(
            || {
                format!(
                    "{} {connector} with tasks {tasks:?} (last {:?}; log:\n{})",
                    self.name,
                    self.state(),
                    ConnectWorker::log_tail(30)
                )
            },
            WAIT,
            POLL,
            || {
                let (c, t) = self.state()?;
                (c == connector && t == tasks).then_some(())
            },
        )
    }

    /// Stops the connector and waits until its consumer group has no members left.
    fn stop(&self, store: &KafkaGroupStore) {
        let (st, body) = http("PUT", &self.url("/stop"), None);
        assert!(matches!(st, 202 | 204), "PUT stop: {st} {body}");
        self.wait_state("STOPPED", &[]);
        let group = store.group_of(&self.name).unwrap();
        wait_for(
            || format!("group {group} to have no members"),
            WAIT,
            POLL,
            || store.members(&group).unwrap().is_empty().then_some(()),
        );
    }

    fn resume(&self) {
        let (st, body) = http("PUT", &self.url("/resume"), None);
        assert_eq!(st, 202, "PUT resume: {body}");
        self.wait_state("RUNNING", &["RUNNING"]);
    }
}

/// The file's lines, waiting until there are `n`, and checking no more come within a second.
fn lines(file: &std::path::Path, n: usize) -> Vec<String> {
    let read = || {
        std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect::<Vec<_>>()
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
fn a_real_sink_connector_and_our_kafka_group_store_agree() {
    let topic = TopicGuard::new("sink-data");
    create_topic(&topic, PARTITIONS, &[]);
    let worker = ConnectWorker::start(
        &bootstrap(),
        &unique_topic("sink-offsets"),
        &unique_topic("sink-group"),
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sink.txt");
    let name = unique_topic("file-sink");
    let store_url = format!("kafka-group://{}/?timeout.ms=300000", bootstrap());
    let store = KafkaGroupStore::open(&store_url).unwrap();

    // The sink consumes the first 10 records of each partition, then is stopped; 10 more follow.
    produce(&topic, 0, 10);
    let config = format!(
        r#"{{"name":"{name}","config":{{"connector.class":"{FILE_SINK}","tasks.max":"1","topics":"{topic}","file":{}}}}}"#,
        {
            let mut out = Vec::new();
            json::encode_str(file.to_str().unwrap(), &mut out);
            String::from_utf8(out).unwrap()
        }
    );
    let (st, body) = http(
        "POST",
        &format!("{}/connectors", worker.base),
        Some(&config),
    );
    assert_eq!(st, 201, "create the sink: {body}");
    let sink = Sink {
        worker: &worker,
        name: name.clone(),
    };
    sink.wait_state("RUNNING", &["RUNNING"]);
    assert_eq!(lines(&file, 20).len(), 20);
    let ten: BTreeSet<_> = (0..PARTITIONS as i64)
        .map(|p| (topic.to_string(), p, 10))
        .collect();
    sink.wait_offsets(&ten);
    sink.stop(&store);
    produce(&topic, 10, 20);

    // 1. Our list equals Connect's GET, and so does serve's GET.
    let connects = sink.offsets();
    let ours = parse(&cli(&["list", "--store", &store_url, "--connector", &name]));
    assert_eq!(positions(&ours), positions(&connects));
    assert_eq!(positions(&ours), ten);
    assert_eq!(
        printed_partitions(&ours),
        printed_partitions(&connects),
        "partitions printed with their members in Connect's order, so that the two diff cleanly"
    );
    let serve = Serve::start(&["--store", &store_url]);
    let (st, body) = http("GET", &serve.offsets_url(&name), None);
    assert_eq!(st, 200, "{body}");
    assert_eq!(positions(&parse(&body)), positions(&connects));
    drop(serve);

    // 2. Our set moves both partitions (one back, one forward); Connect shows it and the resumed
    // sink writes exactly the records from there on.
    for (p, at) in [(0, 3), (1, 15)] {
        cli(&[
            "set",
            "--store",
            &store_url,
            "--connector",
            &name,
            "--partition",
            &format!(r#"{{"kafka_topic":"{topic}","kafka_partition":{p}}}"#),
            "--offset",
            &format!(r#"{{"kafka_offset":{at}}}"#),
        ]);
    }
    let moved: BTreeSet<_> = [(topic.to_string(), 0, 3), (topic.to_string(), 1, 15)].into();
    sink.wait_offsets(&moved);
    let before = lines(&file, 20).len();
    sink.resume();
    let want: Vec<String> = (3..20)
        .map(|i| format!("p0-{i}"))
        .chain((15..20).map(|i| format!("p1-{i}")))
        .collect();
    let all = lines(&file, before + want.len());
    let new = &all[before..];
    let mut sorted_new = new.to_vec();
    sorted_new.sort();
    let mut sorted_want = want.clone();
    sorted_want.sort();
    assert_eq!(sorted_new, sorted_want, "the resumed sink's lines: {new:?}");
    for p in 0..PARTITIONS {
        let of_p: Vec<&String> = new
            .iter()
            .filter(|l| l.starts_with(&format!("p{p}-")))
            .collect();
        let in_order: Vec<&String> = want
            .iter()
            .filter(|l| l.starts_with(&format!("p{p}-")))
            .collect();
        assert_eq!(of_p, in_order, "partition {p} in order");
    }
    let twenty: BTreeSet<_> = (0..PARTITIONS as i64)
        .map(|p| (topic.to_string(), p, 20))
        .collect();
    sink.wait_offsets(&twenty);

    // 3. A running sink's group is refused, with Connect's message; nothing changes.
    let out = Command::new(env!("CARGO_BIN_EXE_connect-offsets"))
        .args([
            "set",
            "--store",
            &store_url,
            "--connector",
            &name,
            "--partition",
            &format!(r#"{{"kafka_topic":"{topic}","kafka_partition":0}}"#),
            "--offset",
            r#"{"kafka_offset":0}"#,
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "Failed to alter consumer group offsets for connector {name} either because its tasks haven't stopped completely yet"
        )) && stderr.contains("zombie sink tasks")
            && stderr.contains(&format!("connector-consumer-{name}-0")),
        "{stderr}"
    );
    assert_eq!(positions(&sink.offsets()), twenty);
    let key = OffsetKey::new(
        name.as_str(),
        connect_offsets::Partition::new()
            .with("kafka_topic", topic.to_string())
            .with("kafka_partition", 0),
    );
    assert!(
        connect_offsets::OffsetStore::get(&store, &key)
            .unwrap()
            .is_some()
    );

    // 4. Stopped, Connect's PATCH (a string offset, a null) reads back here as it does there, and
    // our serve's PATCH reads back in Connect; then our reset of everything makes Connect's GET empty.
    sink.stop(&store);
    let body = |p0: &str, p1: &str| {
        format!(
            r#"{{"offsets":[{{"partition":{{"kafka_topic":"{topic}","kafka_partition":0}},"offset":{p0}}},{{"partition":{{"kafka_topic":"{topic}","kafka_partition":1}},"offset":{p1}}}]}}"#
        )
    };
    let (st, text) = http(
        "PATCH",
        &sink.url("/offsets"),
        Some(&body(r#"{"kafka_offset":"5"}"#, "null")),
    );
    assert_eq!(st, 200, "Connect's PATCH: {text}");
    let five: BTreeSet<_> = [(topic.to_string(), 0, 5)].into();
    sink.wait_offsets(&five);
    let ours = parse(&cli(&["list", "--store", &store_url, "--connector", &name]));
    assert_eq!(positions(&ours), five);
    let serve = Serve::start(&["--store", &store_url]);
    let (st, text) = http(
        "PATCH",
        &serve.offsets_url(&name),
        Some(&body(r#"{"kafka_offset":7}"#, r#"{"kafka_offset":12}"#)),
    );
    assert_eq!(st, 200, "our PATCH: {text}");
    drop(serve);
    sink.wait_offsets(&[(topic.to_string(), 0, 7), (topic.to_string(), 1, 12)].into());
    cli(&[
        "reset",
        "--store",
        &store_url,
        "--connector",
        &name,
        "--all",
    ]);
    sink.wait_offsets(&BTreeSet::new());
    let (st, body) = http("GET", &sink.url("/offsets"), None);
    assert_eq!((st, body.as_str()), (200, r#"{"offsets":[]}"#));
    let (st, body) = http("DELETE", &sink.url(""), None);
    assert!(matches!(st, 200 | 204), "delete the connector: {st} {body}");
}
