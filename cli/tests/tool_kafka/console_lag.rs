//! The console's connectors view: a sink's `lag` in `GET /connectors?expand=summary` on the real
//! broker (issue 45). Over `kafka-group://` it is the sum over the sink's partitions of log end
//! minus committed `kafka_offset`, the log ends read from the store's brokers (with the store's
//! security settings: a SASL store's lag is read over SASL). It follows a committed offset that
//! moves, a log that grows and a partition reset; it agrees with `connect-offsets lag --json`; a
//! sink at its log ends has lag 0, not null. A source over `kafka://` has lag null, even one whose
//! partitions look like a sink's.
#![cfg(feature = "kafka")]

use crate::http_util;
use crate::kafka_util;

use std::time::Instant;

use http_util::{Serve, request};
use kafka_util::{
    BOUNDS, TopicGuard, bootstrap, cli, create_topic, produce_plain, sasl_bootstrap, unique_topic,
};

fn groups() -> String {
    format!("kafka-group://{}/?timeout.ms=300000", bootstrap())
}

/// Appends `n` records to partition `p` of `topic`.
fn produce(topic: &str, p: i32, n: usize) {
    let values: Vec<Vec<u8>> = (0..n).map(|i| format!("r{i}").into_bytes()).collect();
    let records: Vec<_> = values
        .iter()
        .map(|v| (Some(p), None, Some(&v[..])))
        .collect();
    produce_plain(topic, &records);
}

fn sink_partition(topic: &str, p: i32) -> String {
    format!(r#"{{"kafka_topic":"{topic}","kafka_partition":{p}}}"#)
}

/// `connect-offsets set` of one partition's `kafka_offset` (a sink's committed offset).
fn commit(store: &str, connector: &str, partition: &str, offset: i64) {
    cli(&[
        "set",
        "--store",
        store,
        "--connector",
        connector,
        "--partition",
        partition,
        "--offset",
        &format!(r#"{{"kafka_offset":{offset}}}"#),
    ]);
}

/// The connector's summary in `GET /connectors?expand=summary`.
fn summary(serve: &Serve, connector: &str) -> serde_json::Value {
    let (st, body) = request("GET", &serve.url("/connectors?expand=summary"), None);
    assert_eq!(st, 200, "{body}");
    let v: serde_json::Value =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("`{body}`: {e}"));
    v[connector]["summary"].clone()
}

/// `sink_lag` of `connector` in `connect-offsets lag --json`.
fn cli_lag(store: &str, connector: &str) -> serde_json::Value {
    let out = cli(&["lag", "--store", store, "--json"]);
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("lag --json `{out}`: {e}"));
    v["connectors"]
        .as_array()
        .unwrap_or_else(|| panic!("connectors in `{out}`"))
        .iter()
        .find(|c| c["name"] == connector)
        .unwrap_or_else(|| panic!("{connector} in `{out}`"))["sink_lag"]
        .clone()
}

#[test]
fn a_sinks_lag_in_the_summary_is_log_end_minus_committed() {
    let started = Instant::now();
    // Two partitions of different lengths: 10 and 4 records.
    let t = TopicGuard::new("console-lag");
    create_topic(&t, 2, &[]);
    produce(&t, 0, 10);
    produce(&t, 1, 4);
    let store = groups();
    let name = unique_topic("lag-sink");
    commit(&store, &name, &sink_partition(&t, 0), 3);
    commit(&store, &name, &sink_partition(&t, 1), 1);
    // A second sink, at the log end of its partition: lag 0.
    let done = unique_topic("lag-done");
    commit(&store, &done, &sink_partition(&t, 1), 4);

    let serve = Serve::start(&["--store", &store]);
    let ready = Instant::now();
    let s = summary(&serve, &name);
    assert_eq!(s["type"], "sink", "{s}");
    assert_eq!(s["partitions"], 2, "{s}");
    assert_eq!(s["lag"], (10 - 3) + (4 - 1), "{s}");
    assert_eq!(s["lag"], cli_lag(&store, &name), "as `lag` has it");
    let s = summary(&serve, &done);
    assert_eq!(s["lag"], 0, "at the log end: {s}");
    eprintln!(
        "console_lag: the first summaries and `lag` took {:?} from readiness",
        ready.elapsed()
    );

    // The committed offset moves: the lag follows.
    commit(&store, &name, &sink_partition(&t, 0), 8);
    assert_eq!(summary(&serve, &name)["lag"], (10 - 8) + (4 - 1));
    // The log grows: so does the lag (the other sink falls behind too).
    produce(&t, 1, 5);
    assert_eq!(summary(&serve, &name)["lag"], (10 - 8) + (9 - 1));
    assert_eq!(summary(&serve, &done)["lag"], 9 - 4);
    assert_eq!(summary(&serve, &name)["lag"], cli_lag(&store, &name));
    // One partition reset: only the other one's lag is left.
    cli(&[
        "reset",
        "--store",
        &store,
        "--connector",
        &name,
        "--partition",
        &sink_partition(&t, 1),
    ]);
    let s = summary(&serve, &name);
    assert_eq!((&s["partitions"], &s["lag"]), (&1.into(), &2.into()), "{s}");
    drop(serve);

    // Over SASL: the log ends are read with the store's own security settings.
    let sasl = format!(
        "kafka-group://{}/?timeout.ms=300000&security.protocol=SASL_PLAINTEXT&sasl.mechanism=PLAIN\
         &sasl.username=connect-offsets&sasl.password=connect-offsets-secret",
        sasl_bootstrap()
    );
    let serve = Serve::start(&["--store", &sasl]);
    let s = summary(&serve, &name);
    assert_eq!(s["lag"], 2, "over SASL: {s}");
    drop(serve);

    // A source over an offsets topic has no lag, even with a sink-shaped partition.
    let topic = TopicGuard::new("console-lag-offsets");
    let offsets = format!(
        "kafka://{}/{}?partitions=3&replication=1&{BOUNDS}",
        bootstrap(),
        &*topic
    );
    let source = unique_topic("lag-source");
    commit(&offsets, &source, &sink_partition(&t, 0), 3);
    cli(&[
        "set",
        "--store",
        &offsets,
        "--connector",
        &source,
        "--partition",
        r#"{"filename":"/a"}"#,
        "--offset",
        r#"{"position":7}"#,
    ]);
    let serve = Serve::start(&["--store", &offsets]);
    let s = summary(&serve, &source);
    assert_eq!(
        (&s["type"], &s["partitions"]),
        (&"source".into(), &2.into()),
        "{s}"
    );
    assert!(s["lag"].is_null(), "a source has no lag: {s}");
    eprintln!("console_lag: done in {:?}", started.elapsed());
}
