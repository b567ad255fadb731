//! `serve --connect-configs` and a sink connector that names its own consumer group
//! (`consumer.override.group.id`), against a real Kafka Connect 4.4.0 worker running
//! `FileStreamSinkConnector` (issue 43, 4). Connect's worker reads and writes that group, not
//! `connect-<name>`; so must the server: its `GET` equals Connect's, its `PATCH` moves what
//! Connect's `GET` shows, its `DELETE` empties it, and `connect-<name>` is never created.
#![cfg(feature = "kafka")]

use crate::http_util;
use crate::kafka_util;
use crate::scripts;

use std::collections::BTreeSet;
use std::time::Duration;

use connect_offsets::internal::codec::json;
use connect_offsets::internal::connector_offsets::ConnectorOffsets;
use connect_offsets::store::kafka::KafkaGroupStore;
use connect_offsets::{OffsetStore, Value};
use http_util::{Serve, request as http};
use kafka_util::{TopicGuard, bootstrap, create_topic, produce_plain, unique_topic};
use scripts::{ConnectWorker, connector_status, wait_for};

const FILE_SINK: &str = "org.apache.kafka.connect.file.FileStreamSinkConnector";
const WAIT: Duration = Duration::from_secs(120);
const POLL: Duration = Duration::from_millis(250);

/// `(topic, partition, offset)` of every entry.
fn positions(body: &str) -> BTreeSet<(String, i64, i64)> {
    let doc = ConnectorOffsets::parse(body.as_bytes()).unwrap_or_else(|e| panic!("`{body}`: {e}"));
    doc.offsets
        .iter()
        .map(|(p, o)| {
            let (p, o) = (p.as_ref().unwrap(), o.as_ref().unwrap());
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

#[test]
fn serve_reads_and_writes_the_group_a_sink_names() {
    let topic = TopicGuard::new("own-group-data");
    create_topic(&topic, 2, &[]);
    let worker_group = unique_topic("own-group-worker");
    let worker = ConnectWorker::start(
        &bootstrap(),
        &unique_topic("own-group-offsets"),
        &worker_group,
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sink.txt");
    let name = unique_topic("own-group-sink");
    let own_group = unique_topic("custom-sink-group");
    let records: Vec<(i32, Vec<u8>)> = (0..2)
        .flat_map(|p| (0..10).map(move |i| (p, format!("\"p{p}-{i}\"").into_bytes())))
        .collect();
    let plain: Vec<_> = records
        .iter()
        .map(|(p, v)| (Some(*p), None, Some(&v[..])))
        .collect();
    produce_plain(&topic, &plain);
    let mut file_json = Vec::new();
    json::encode_str(file.to_str().unwrap(), &mut file_json);
    let config = format!(
        r#"{{"name":"{name}","config":{{"connector.class":"{FILE_SINK}","tasks.max":"1","topics":"{topic}","file":{},"consumer.override.group.id":"{own_group}"}}}}"#,
        String::from_utf8(file_json).unwrap()
    );
    let base = format!("{}/connectors", worker.base);
    let (st, body) = http("POST", &base, Some(&config));
    assert_eq!(st, 201, "create the sink: {body}");
    let connect_get = || {
        let (st, body) = http("GET", &format!("{base}/{name}/offsets"), None);
        assert_eq!(st, 200, "Connect's GET: {body}");
        positions(&body)
    };
    let ten: BTreeSet<_> = (0..2).map(|p| (topic.to_string(), p, 10)).collect();
    wait_for(
        || {
            format!(
                "Connect's GET to show {ten:?} (log:\n{})",
                ConnectWorker::log_tail(30)
            )
        },
        WAIT,
        POLL,
        || (connect_get() == ten).then_some(()),
    );

    // Stopped, with no member left in its group.
    let (st, body) = http("PUT", &format!("{base}/{name}/stop"), None);
    assert!(matches!(st, 202 | 204), "PUT stop: {st} {body}");
    let store_url = format!("kafka-group://{}/?timeout.ms=300000", bootstrap());
    let own = KafkaGroupStore::open(&format!(
        "kafka-group://{}/?group={own_group}&connector={name}&timeout.ms=300000",
        bootstrap()
    ))
    .unwrap();
    wait_for(
        || format!("{name} STOPPED with group {own_group} empty"),
        WAIT,
        POLL,
        || {
            let (st, body) = http("GET", &format!("{base}/{name}/status"), None);
            let stopped = st == 200 && connector_status(&body)?.0 == "STOPPED";
            (stopped && own.members(&own_group).unwrap().is_empty()).then_some(())
        },
    );

    let configs = format!("kafka://{}/{worker_group}-configs", bootstrap());
    let serve = Serve::start(&["--store", &store_url, "--connect-configs", &configs]);
    let (st, body) = http("GET", &serve.offsets_url(&name), None);
    assert_eq!(st, 200, "{body}");
    assert_eq!(
        positions(&body),
        ten,
        "serve's GET reads the connector's own group"
    );

    let patch = format!(
        r#"{{"offsets":[{{"partition":{{"kafka_topic":"{topic}","kafka_partition":0}},"offset":{{"kafka_offset":4}}}},{{"partition":{{"kafka_topic":"{topic}","kafka_partition":1}},"offset":{{"kafka_offset":7}}}}]}}"#
    );
    let (st, body) = http("PATCH", &serve.offsets_url(&name), Some(&patch));
    assert_eq!(st, 200, "serve's PATCH: {body}");
    let moved: BTreeSet<_> = [(topic.to_string(), 0, 4), (topic.to_string(), 1, 7)].into();
    assert_eq!(connect_get(), moved, "Connect's GET shows serve's PATCH");

    let (st, body) = http("DELETE", &serve.offsets_url(&name), None);
    assert_eq!(st, 200, "serve's DELETE: {body}");
    assert!(
        connect_get().is_empty(),
        "Connect's GET after serve's DELETE"
    );

    // Connect's default group of the connector was never written.
    let default = KafkaGroupStore::open(&store_url).unwrap();
    assert!(
        default
            .committed(&format!("connect-{name}"))
            .unwrap()
            .is_empty(),
        "nothing went to connect-{name}"
    );
    assert!(OffsetStore::partitions(&own, &name).unwrap().is_empty());
}
