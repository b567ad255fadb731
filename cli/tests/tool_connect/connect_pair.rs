//! A real Kafka Connect 4.4.0 worker with exactly-once source support and a
//! `FileStreamSourceConnector` whose offsets live in a topic of its own (`offsets.storage.topic`),
//! beside the worker-wide topic; our store opens the same pair
//! (`kafka://…/<connector topic>?fallback.topic=<worker topic>`):
//! 1. a partition only in the worker topic: our pair reads the worker topic's offset, as
//!    `ConnectorOffsetBackingStore` documents; the 4.4 worker does not (its `GET` shows the
//!    partition with `"offset": null`, and the task starts the file over), because the connector
//!    store's lookup answers every key asked, absent ones as null, and that null replaces the
//!    worker store's value in the merge. The test pins that difference;
//! 2. what we `set` through the pair is where Connect's `GET` and the resumed connector go on from;
//! 3. what the connector commits to its own topic reads back through our pair, and Connect copies
//!    it to the worker topic too;
//! 4. our `reset` through the pair empties Connect's `GET` (the partition is in neither topic) and
//!    the resumed connector starts the file over (KAFKA-15018).
#![cfg(feature = "kafka")]

use crate::http_util;
use crate::kafka_util;
use crate::scripts;

use std::time::Duration;

use connect_offsets::internal::connector_offsets::ConnectorOffsets;
use connect_offsets::store::OffsetStoreExt;
use connect_offsets::store::kafka::KafkaStore;
use connect_offsets::{Offset, OffsetKey, OffsetStore, Partition};
use http_util::request as http;
use kafka_util::{BOUNDS, TopicGuard, bootstrap, cli, create_topic, read_all, unique_topic};
use scripts::{ConnectWorker, java25_home, wait_for};

const FILE_SOURCE: &str = "org.apache.kafka.connect.file.FileStreamSourceConnector";
const WAIT: Duration = Duration::from_secs(120);
const POLL: Duration = Duration::from_millis(250);

fn pos(n: i64) -> Offset {
    Offset::new().with("position", n)
}

/// The lines the data topic holds, in order (values as the JSON converter wrote them).
fn data_lines(topic: &str) -> Vec<String> {
    read_all(topic, "read_committed")
        .into_iter()
        .filter_map(|r| r.value)
        .map(|v| String::from_utf8_lossy(&v).into_owned())
        .collect()
}

fn wait_lines(topic: &str, n: usize) -> Vec<String> {
    wait_for(
        || {
            format!(
                "{n} records in {topic} (have {:?}; worker log:\n{})",
                data_lines(topic),
                ConnectWorker::log_tail(30)
            )
        },
        WAIT,
        POLL,
        || {
            let l = data_lines(topic);
            (l.len() >= n).then_some(l)
        },
    )
}

struct Connector<'a> {
    worker: &'a ConnectWorker,
    name: &'a str,
}

impl Connector<'_> {
    fn url(&self, path: &str) -> String {
        format!("{}/connectors/{}{path}", self.worker.base, self.name)
    }

    fn offsets(&self) -> ConnectorOffsets {
        let (st, body) = http("GET", &self.url("/offsets"), None);
        assert_eq!(st, 200, "GET offsets: {body}");
        ConnectorOffsets::parse(body.as_bytes()).unwrap()
    }

    /// Polls Connect's `GET offsets` until its one partition has `offset`.
    fn wait_offset(&self, offset: Option<Offset>) {
        wait_for(
            || format!("Connect's GET at {offset:?}: {:?}", self.offsets().offsets),
            WAIT,
            POLL,
            || {
                let o = self.offsets().offsets;
                (o.len() == 1 && o[0].1 == offset).then_some(())
            },
        )
    }

    /// Polls `GET /connectors/{name}/status` until the connector and its tasks are in `state`
    /// (`tasks` of them).
    fn wait_state(&self, state: &str, tasks: usize) {
        wait_for(
            || {
                format!(
                    "connector {} {state}: {:?}\n{}",
                    self.name,
                    http("GET", &self.url("/status"), None),
                    ConnectWorker::log_tail(30)
                )
            },
            WAIT,
            POLL,
            || {
                let (st, body) = http("GET", &self.url("/status"), None);
                let quoted = format!(r#""state":"{state}""#);
                (st == 200 && body.matches(&quoted).count() == 1 + tasks).then_some(())
            },
        )
    }
}

#[test]
fn an_exactly_once_worker_and_our_pair_read_and_reset_alike() {
    let bootstrap = bootstrap();
    // Guards declared before the worker: dropped after it stops, they delete its topics.
    let global = TopicGuard::new("connect-offsets");
    let own = TopicGuard::new("connector-offsets");
    let group = unique_topic("connect-group");
    let _worker_topics = [
        TopicGuard(format!("{group}-configs")),
        TopicGuard(format!("{group}-status")),
    ];
    let data = TopicGuard::new("file-lines");
    create_topic(&data, 1, &[]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lines.txt");
    let file_name = file.to_str().unwrap().to_string();
    // 24 bytes: "one" ends at 4, "two" at 8, "three" at 14.
    std::fs::write(&file, "one\ntwo\nthree\nfour\nfive\n").unwrap();
    let worker = ConnectWorker::start_with(
        &java25_home(),
        &bootstrap,
        &global,
        &group,
        "exactly.once.source.support=enabled",
    );
    let name = "pair-src";
    let key = OffsetKey::new(name, Partition::new().with("filename", file_name.as_str()));
    let global_url = format!("kafka://{bootstrap}/{global}?{BOUNDS}");
    KafkaStore::open(&global_url)
        .unwrap()
        .set(key.clone(), pos(8))
        .unwrap();

    let config = format!(
        r#"{{"name":"{name}","initial_state":"STOPPED","config":{{"connector.class":"{FILE_SOURCE}","tasks.max":"1","file":{},"topic":"{data}","offsets.storage.topic":"{own}","exactly.once.support":"requested"}}}}"#,
        serde_json_str(&file_name)
    );
    let (st, body) = http(
        "POST",
        &format!("{}/connectors", worker.base),
        Some(&config),
    );
    assert_eq!(st, 201, "create the connector: {body}");
    let c = Connector {
        worker: &worker,
        name,
    };
    c.wait_state("STOPPED", 0);
    let pair = format!(
        "kafka://{bootstrap}/{own}?fallback.topic={global}&partitions=25&replication=1&{BOUNDS}"
    );
    let partition = format!(r#"{{"filename":{}}}"#, serde_json_str(&file_name));
    let get = || {
        cli(&[
            "get",
            "--store",
            &pair,
            "--connector",
            name,
            "--partition",
            &partition,
        ])
    };

    // 1. Only the worker topic has it: our pair falls back, Connect 4.4 does not.
    assert!(get().contains(r#""offset":{"position":8}"#), "{}", get());
    let seen = c.offsets().offsets;
    assert_eq!(
        seen,
        vec![(key.partition().cloned(), None)],
        "Connect 4.4 reads a partition only in the worker topic as null"
    );

    // 2. Our set through the pair: Connect's GET and the resumed task go on from it.
    cli(&[
        "set",
        "--store",
        &pair,
        "--connector",
        name,
        "--partition",
        &partition,
        "--offset",
        r#"{"position":14}"#,
    ]);
    c.wait_offset(Some(pos(14)));
    let (st, body) = http("PUT", &c.url("/resume"), None);
    assert_eq!(st, 202, "PUT resume: {body}");
    c.wait_state("RUNNING", 1);
    let lines = wait_lines(&data, 2);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].contains("four") && lines[1].contains("five"),
        "{lines:?}"
    );

    // 3. The connector's commit reads back through the pair; Connect copied it to the worker topic.
    c.wait_offset(Some(pos(24)));
    let (st, body) = http("PUT", &c.url("/stop"), None);
    assert!(matches!(st, 202 | 204), "PUT stop: {st} {body}");
    c.wait_state("STOPPED", 0);
    assert!(get().contains(r#""offset":{"position":24}"#), "{}", get());
    let global_alone = KafkaStore::open(&global_url).unwrap();
    wait_for(
        || "Connect's copy of position 24 in the worker topic".to_string(),
        WAIT,
        POLL,
        || {
            global_alone.refresh().unwrap();
            (global_alone.get(&key).unwrap() == Some(pos(24))).then_some(())
        },
    );
    drop(global_alone);

    // 4. Our reset through the pair: the partition is in neither topic, for Connect too.
    cli(&[
        "reset",
        "--store",
        &pair,
        "--connector",
        name,
        "--partition",
        &partition,
    ]);
    assert_eq!(
        KafkaStore::open(&global_url).unwrap().get(&key).unwrap(),
        None
    );
    wait_for(
        || format!("Connect's GET empty: {:?}", c.offsets().offsets),
        WAIT,
        POLL,
        || c.offsets().offsets.is_empty().then_some(()),
    );
    let (st, body) = http("PUT", &c.url("/resume"), None);
    assert_eq!(st, 202, "PUT resume: {body}");
    c.wait_state("RUNNING", 1);
    let lines = wait_lines(&data, 7);
    assert!(
        lines[2].contains("one") && lines[6].contains("five"),
        "the resumed connector did not start the file over: {lines:?}"
    );
}

/// `s` as a JSON string.
fn serde_json_str(s: &str) -> String {
    let mut out = Vec::new();
    connect_offsets::internal::codec::json::encode_str(s, &mut out);
    String::from_utf8(out).unwrap()
}
