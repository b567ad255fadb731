//! The operator's commands and the REST API on the Kafka store, against the real broker
//! (`KAFKA_BOOTSTRAP`, default 127.0.0.1:9092, started by `scripts/kafka start`); every test uses
//! its own random topic.
#![cfg(feature = "kafka")]

use crate::http_util;
use crate::kafka_util;

use crate::cli_util;
use cli_util::{cli, ok, text};
use std::process::{Command, Output};
use std::time::Instant;

use connect_offsets::migrate::{MigrateOptions, migrate};
use connect_offsets::model::Batch;
use connect_offsets::store::kafka::KafkaStore;
use connect_offsets::store::rocksdb::RocksDbStore;
use connect_offsets::store::{MemoryStore, OffsetStoreExt};
use connect_offsets::{Offset, OffsetKey, OffsetStore, Partition};
use http_util::{Serve, request as call};

fn keys(n: usize) -> Vec<(OffsetKey, Option<Offset>)> {
    (0..n)
        .map(|i| {
            (
                OffsetKey::new(
                    format!("connector-{}", i % 10),
                    Partition::new()
                        .with("table", format!("schema.table_{i}"))
                        .with("shard", (i % 7) as i64),
                ),
                Some(
                    Offset::new()
                        .with("lsn", (i as i64) * 1_000_003)
                        .with("txid", format!("tx-{i}"))
                        .with("ratio", i as f64 / 3.0),
                ),
            )
        })
        .collect()
}

/// RocksDB → Kafka → memory → RocksDB with 100,000 partitions: identical offsets at the end, and
/// a fresh reader of the topic sees exactly the source's offsets.
#[test]
fn migrate_round_trip_100k_partitions_through_kafka() {
    let n: usize = std::env::var("MIGRATE_PARTITIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let tmp = tempfile::tempdir().unwrap();
    let topic = kafka_util::unique_topic("migrate");
    let kafka_url = kafka_util::url(&topic, 25, "");
    let first = RocksDbStore::open(tmp.path().join("first")).unwrap();
    first.write(keys(n)).unwrap();
    first.apply(&Batch::new("worker-1", 7, [])).unwrap();
    let kafka = KafkaStore::open(&kafka_url).unwrap();
    let memory = MemoryStore::new();
    let last = RocksDbStore::open(tmp.path().join("last")).unwrap();
    let mut timings = Vec::new();
    for (name, from, to) in [
        (
            "rocksdb -> kafka",
            &first as &dyn OffsetStore,
            &kafka as &dyn OffsetStore,
        ),
        ("kafka -> memory", &kafka, &memory),
        ("memory -> rocksdb", &memory, &last),
    ] {
        let started = Instant::now();
        let report = migrate(from, to, &MigrateOptions::default()).unwrap();
        timings.push((name, started.elapsed()));
        assert_eq!(
            report.connectors.iter().map(|c| c.added).sum::<usize>(),
            n,
            "{name}"
        );
    }
    let a = first.all().unwrap();
    let b = last.all().unwrap();
    assert_eq!(a.len(), n);
    assert!(a == b, "the round trip changed offsets");
    for ((ka, va), (kb, vb)) in a.iter().zip(&b) {
        assert_eq!(ka.connect_key(), kb.connect_key());
        assert_eq!(va.to_json(), vb.to_json());
    }
    assert_eq!(last.applied_seq("worker-1").unwrap(), 7);
    // What another reader of the topic (a Connect worker, say) loads.
    let started = Instant::now();
    let fresh = KafkaStore::open(&kafka_url).unwrap();
    let reload = started.elapsed();
    assert!(
        fresh.all().unwrap() == a,
        "a fresh reader of {topic} differs"
    );
    for (name, t) in timings {
        eprintln!("migrate {name}: {n} partitions in {:.3} s", t.as_secs_f64());
    }
    eprintln!(
        "a fresh KafkaStore loaded {n} offsets in {:.3} s",
        reload.as_secs_f64()
    );
}

#[test]
fn cli_commands_on_kafka() {
    let tmp = tempfile::tempdir().unwrap();
    let topic = kafka_util::unique_topic("cli");
    let kafka = kafka_util::url(&topic, 5, "");
    let db = format!("rocksdb://{}", tmp.path().join("db").display());
    {
        let s = RocksDbStore::open(tmp.path().join("db")).unwrap();
        s.write(keys(50)).unwrap();
    }
    let out = ok(&cli(&["migrate", "--from", &db, "--to", &kafka]));
    assert!(
        out.contains("migrated 10 connectors (50 partitions written) from rocksdb to kafka"),
        "{out}"
    );
    assert_eq!(
        ok(&cli(&["export", "--store", &kafka])),
        ok(&cli(&["export", "--store", &db]))
    );
    let names = ok(&cli(&["connectors", "--store", &kafka]));
    assert_eq!(names.lines().count(), 10, "{names}");
    ok(&cli(&[
        "reset",
        "--store",
        &kafka,
        "--connector",
        "connector-3",
        "--all",
    ]));
    assert_eq!(
        ok(&cli(&[
            "list",
            "--store",
            &kafka,
            "--connector",
            "connector-3"
        ]))
        .trim(),
        r#"{"offsets":[]}"#
    );
    let out = ok(&cli(&[
        "migrate",
        "--from",
        &db,
        "--to",
        &kafka,
        "--dry-run",
    ]));
    assert!(
        out.contains("connector connector-3: would add 5, change 0, remove 0; 0 unchanged"),
        "{out}"
    );
    // Import Connect's GET shape for one connector.
    let doc = tmp.path().join("doc.json");
    std::fs::write(
        &doc,
        r#"{"offsets":[{"partition":{"kafka_topic":"t","kafka_partition":0},"offset":{"kafka_offset":5}}]}"#,
    )
    .unwrap();
    ok(&cli(&[
        "import",
        "--store",
        &kafka,
        "--connector",
        "sink-x",
        "--input",
        doc.to_str().unwrap(),
    ]));
    assert_eq!(
        ok(&cli(&[
            "export",
            "--store",
            &kafka,
            "--connector",
            "sink-x"
        ]))
        .trim(),
        r#"{"offsets":[{"partition":{"kafka_topic":"t","kafka_partition":0},"offset":{"kafka_offset":5}}]}"#
    );
    // A mistyped topic is refused by the commands that read, and not created by them.
    let typo = kafka_util::url(&format!("{topic}-typo"), 5, "");
    let before = ok(&cli(&["export", "--store", &db]));
    for args in [
        vec!["export", "--store", &typo],
        vec!["migrate", "--from", &typo, "--to", &db],
    ] {
        let out = cli(&args);
        let err = text(&out.stderr);
        assert!(
            !out.status.success() && err.contains("does not exist") && err.contains("-typo"),
            "{args:?}: {err}"
        );
    }
    let out = cli(&["connectors", "--store", &typo]);
    assert!(!out.status.success(), "the first refusal created the topic");
    assert_eq!(
        ok(&cli(&["export", "--store", &db])),
        before,
        "the refused migration changed its destination"
    );
}

#[test]
fn lag_of_sink_partitions_is_log_end_minus_committed() {
    let topic = kafka_util::unique_topic("lag-store");
    let data = kafka_util::unique_topic("lag-data");
    kafka_util::create_topic(&data, 2, &[]);
    let records: Vec<kafka_util::PlainRecord<'_>> = (0..10)
        .map(|i| (Some(if i < 7 { 0 } else { 1 }), None, Some(&b"x"[..])))
        .collect();
    kafka_util::produce_plain(&data, &records);
    let kafka = kafka_util::url(&topic, 3, "");
    let store = KafkaStore::open(&kafka).unwrap();
    let part = |p: i64| {
        OffsetKey::new(
            "my-sink",
            Partition::new()
                .with("kafka_topic", data.as_str())
                .with("kafka_partition", p),
        )
    };
    store
        .write(vec![
            (part(0), Some(Offset::new().with("kafka_offset", 4))),
            (part(1), Some(Offset::new().with("kafka_offset", 3))),
        ])
        .unwrap();
    drop(store);
    // Partition 0: 7 records, committed 4 → 3 behind; partition 1: 3 records, committed 3 → 0.
    let out = ok(&cli(&["lag", "--store", &kafka, "--json"]));
    assert!(
        out.contains(&format!(r#"{{"name":"my-sink","partitions":2,"sink_partitions":2,"commit_age_s":null,"unapplied_entries":0,"sink_lag":3,"sink_partition_lag":[{{"kafka_topic":"{data}","kafka_partition":0,"committed":4,"log_end":7,"lag":3}},{{"kafka_topic":"{data}","kafka_partition":1,"committed":3,"log_end":3,"lag":0}}]}}"#)),
        "{out}"
    );
    let table = ok(&cli(&["lag", "--store", &kafka]));
    assert!(table.contains("my-sink\t2\t2\t3\t"), "{table}");
    assert!(
        table.contains(&format!("my-sink\t{data}\t0\t4\t7\t3\n")),
        "{table}"
    );
}

#[test]
fn rest_api_over_kafka() {
    let topic = kafka_util::unique_topic("rest");
    let kafka = kafka_util::url(&topic, 5, "");
    let s = Serve::start(&["--store", &kafka, "--connector", "sink"]);
    let o = format!("{}/connectors/sink/offsets", s.base);
    let body = r#"{"offsets":[{"partition":{"kafka_topic":"orders","kafka_partition":0},"offset":{"kafka_offset":5}},{"partition":{"kafka_topic":"orders","kafka_partition":1},"offset":{"kafka_offset":17}}]}"#;
    assert_eq!(call("GET", &o, None), (200, r#"{"offsets":[]}"#.into()));
    let (st, msg) = call("PATCH", &o, Some(body));
    assert_eq!(st, 200, "{msg}");
    assert!(msg.contains("have been altered successfully"), "{msg}");
    // Written to the topic: a separate reader sees it.
    let store = KafkaStore::open(&kafka).unwrap();
    assert_eq!(store.partitions("sink").unwrap().len(), 2);
    drop(store);
    let (st, got) = call("GET", &o, None);
    assert_eq!(st, 200);
    // Under the key bytes Connect's PATCH gives a new partition (its HashMap's member order).
    assert!(
        got.contains(r#"{"partition":{"kafka_partition":1,"kafka_topic":"orders"},"offset":{"kafka_offset":17}}"#),
        "{got}"
    );
    assert_eq!(call("PATCH", &o, None).0, 400);
    assert_eq!(call("PATCH", &o, Some("{\"offsets\":[")).0, 400);
    assert_eq!(
        call("GET", &format!("{}/connectors/other/offsets", s.base), None).0,
        404
    );
    let (st, msg) = call("DELETE", &o, None);
    assert_eq!(st, 200, "{msg}");
    assert!(msg.contains("have been reset successfully"), "{msg}");
    assert_eq!(call("GET", &o, None), (200, r#"{"offsets":[]}"#.into()));
}

/// `connect-offsets set` with the tool's default log level, stderr a pipe as in a script.
fn quiet_set(store: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_connect-offsets"))
        .args([
            "set",
            "--store",
            store,
            "--connector",
            "orders-source",
            "--partition",
            r#"{"table":"orders"}"#,
            "--offset",
            r#"{"lsn":42}"#,
        ])
        .env_remove("CONNECT_OFFSETS_STORE")
        .env_remove("CONNECT_OFFSETS_LOG")
        .env_remove("NO_COLOR")
        .output()
        .unwrap()
}

/// The first `set` on a fresh topic keeps librdkafka's own retries off the operator's stderr: on a
/// fresh broker the transaction coordinator is still loading ("Coordinator load in progress:
/// retrying", or "Not coordinator"), and dead brokers beside the live one in the bootstrap list
/// refuse connections that librdkafka retries. Nothing in a pipe carries colour codes.
#[test]
fn first_set_keeps_transient_retries_and_colour_off_stderr() {
    let live = kafka_util::bootstrap();
    // Each of the store's three clients starts at a random bootstrap address: with six dead ones
    // (nothing listens on ports 1-6) all three pick the live one first in 1 run of 343.
    let dead: Vec<String> = (1..=6).map(|port| format!("127.0.0.1:{port}")).collect();
    for bootstrap in [live.clone(), format!("{},{live}", dead.join(","))] {
        let topic = kafka_util::unique_topic("quiet-set");
        let store = format!(
            "kafka://{bootstrap}/{topic}?partitions=25&replication=1&{}",
            kafka_util::BOUNDS
        );
        let out = quiet_set(&store);
        let err = text(&out.stderr);
        ok(&out);
        assert!(
            !out.stderr.contains(&0x1b),
            "{bootstrap}: colour codes in a pipe: {err:?}"
        );
        for noise in [
            "retrying",
            "Not coordinator",
            "Coordinator load",
            "Connection refused",
        ] {
            assert!(
                !err.contains(noise),
                "{bootstrap}: `{noise}` on stderr: {err}"
            );
        }
        assert_eq!(
            ok(&cli(&[
                "get",
                "--store",
                &store,
                "--connector",
                "orders-source",
                "--partition",
                r#"{"table":"orders"}"#,
            ]))
            .trim(),
            r#"{"partition":{"table":"orders"},"offset":{"lsn":42}}"#
        );
    }
}

/// No broker at all is not transient: the command fails naming the brokers and librdkafka's last
/// error, though the refused connections themselves were logged at debug (and nothing in a pipe
/// carries colour codes).
#[test]
fn set_without_any_broker_says_so() {
    let topic = kafka_util::unique_topic("no-broker");
    let out = quiet_set(&format!(
        "kafka://127.0.0.1:1/{topic}?partitions=1&replication=1&timeout.ms=2000"
    ));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        !out.stderr.contains(&0x1b),
        "colour codes in a pipe: {err:?}"
    );
    assert!(
        err.contains("error: reaching the Kafka brokers 127.0.0.1:1"),
        "{err}"
    );
    assert!(err.contains("Broker transport failure"), "{err}");
}

/// `import --once` and `reset --once` on a Kafka store: the id is recorded in the same transaction
/// as the offsets; a second run with it writes nothing and exits 0, also from a fresh process.
#[test]
fn cli_once_on_kafka() {
    // Idempotent mode writes the marker after the offsets (a write may land in part there).
    for params in ["", "&write.mode=idempotent"] {
        cli_once_on_kafka_with(params);
    }
}

fn cli_once_on_kafka_with(params: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let topic = kafka_util::unique_topic("cli-once");
    let kafka = kafka_util::url(&topic, 5, params);
    let doc = tmp.path().join("doc.json");
    std::fs::write(
        &doc,
        r#"{"offsets":[{"partition":{"f":1},"offset":{"pos":10}},{"partition":{"f":2},"offset":{"pos":20}}]}"#,
    )
    .unwrap();
    let import = || {
        cli(&[
            "import",
            "--store",
            &kafka,
            "--connector",
            "a",
            "--input",
            doc.to_str().unwrap(),
            "--once",
            "seed-1",
        ])
    };
    let first = import();
    ok(&first);
    assert!(
        text(&first.stderr).contains("recorded override `seed-1`"),
        "{}",
        text(&first.stderr)
    );
    ok(&cli(&[
        "set",
        "--store",
        &kafka,
        "--connector",
        "a",
        "--partition",
        r#"{"f":1}"#,
        "--offset",
        r#"{"pos":11}"#,
    ]));
    let again = import();
    ok(&again);
    assert!(
        text(&again.stderr).contains("override `seed-1` was already applied"),
        "{}",
        text(&again.stderr)
    );
    let list = ok(&cli(&["list", "--store", &kafka, "--connector", "a"]));
    assert!(
        list.contains(r#"{"partition":{"f":1},"offset":{"pos":11}}"#),
        "{list}"
    );
    let reset = || {
        cli(&[
            "reset",
            "--store",
            &kafka,
            "--connector",
            "a",
            "--all",
            "--once",
            "wipe-1",
        ])
    };
    let r = reset();
    ok(&r);
    assert!(
        text(&r.stderr).contains("reset 2 partitions of connector `a`; recorded override `wipe-1`"),
        "{}",
        text(&r.stderr)
    );
    ok(&cli(&[
        "set",
        "--store",
        &kafka,
        "--connector",
        "a",
        "--partition",
        r#"{"f":2}"#,
        "--offset",
        r#"{"pos":21}"#,
    ]));
    let r = reset();
    ok(&r);
    assert!(
        text(&r.stderr).contains("already applied"),
        "{}",
        text(&r.stderr)
    );
    let list = ok(&cli(&["list", "--store", &kafka, "--connector", "a"]));
    assert_eq!(
        list.trim(),
        r#"{"offsets":[{"partition":{"f":2},"offset":{"pos":21}}]}"#
    );
    let bad = cli(&[
        "reset",
        "--store",
        &kafka,
        "--connector",
        "a",
        "--all",
        "--once",
        "tab\tid",
    ]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        text(&bad.stderr).contains("control character U+0009"),
        "{}",
        text(&bad.stderr)
    );
    kafka_util::delete_topics(&[&topic]);
}

/// `import` of several connectors is one batch: when a later connector's offset cannot be written
/// (here too large for the topic's `max.message.bytes`), nothing of the earlier ones is either.
#[test]
fn import_writes_every_connector_or_none() {
    let topic = kafka_util::TopicGuard::new("import-all");
    kafka_util::create_topic(
        &topic,
        1,
        &[
            ("cleanup.policy", "compact"),
            ("max.message.bytes", "10000"),
        ],
    );
    let url = kafka_util::url(&topic, 1, "");
    let doc = format!(
        r#"{{"connectors":{{"a":{{"offsets":[{{"partition":{{"f":1}},"offset":{{"p":1}}}}]}},"b":{{"offsets":[{{"partition":{{"f":2}},"offset":{{"p":"{}"}}}}]}}}}}}"#,
        "x".repeat(20_000)
    );
    let out = cli_util::cli_stdin(&["import", "--store", &url], doc.as_bytes());
    assert!(!out.status.success(), "refused");
    let err = text(&out.stderr);
    assert!(
        err.contains("nothing of it was written") && err.contains("10000 bytes"),
        "{err}"
    );
    let store = KafkaStore::open(&url).unwrap();
    assert_eq!(
        store.namespaces().unwrap(),
        Vec::<String>::new(),
        "connector a was not written"
    );
}

/// With the cluster's config topic, `serve` knows a sink from a source by its class and refuses
/// to answer for one whose offsets its store does not hold (Connect routes by type).
#[test]
fn serve_refuses_a_connector_whose_offsets_are_elsewhere() {
    let configs = kafka_util::TopicGuard::new("configs");
    drop(KafkaStore::open(&kafka_util::url(&configs, 1, "")).unwrap());
    kafka_util::produce_plain(
        &configs,
        &[
            (
                Some(0),
                Some(b"connector-snk"),
                Some(br#"{"properties":{"connector.class":"org.apache.kafka.connect.file.FileStreamSinkConnector","topics":"t"}}"#),
            ),
            (
                Some(0),
                Some(b"connector-src"),
                Some(br#"{"properties":{"connector.class":"org.apache.kafka.connect.file.FileStreamSourceConnector"}}"#),
            ),
            (
                Some(0),
                Some(b"connector-mm"),
                Some(br#"{"properties":{"connector.class":"org.apache.kafka.connect.mirror.MirrorSourceConnector"}}"#),
            ),
            (
                Some(0),
                Some(b"target-state-mm"),
                Some(br#"{"state":"STOPPED","state.v2":"STOPPED"}"#),
            ),
        ],
    );
    let configs_url = format!("kafka://{}/{}", kafka_util::bootstrap(), &*configs);
    let offsets = kafka_util::TopicGuard::new("offsets");
    let over_topic = Serve::start(&[
        "--store",
        &kafka_util::url(&offsets, 1, ""),
        "--connect-configs",
        &configs_url,
    ]);
    let (st, body) = call("GET", &over_topic.url("/connectors/snk/offsets"), None);
    assert_eq!(st, 400, "{body}");
    assert!(
        body.contains("is a sink connector") && body.contains("kafka-group://"),
        "{body}"
    );
    let (st, body) = call("DELETE", &over_topic.url("/connectors/snk/offsets"), None);
    assert_eq!(st, 400, "{body}");
    assert_eq!(
        call("GET", &over_topic.url("/connectors/src/offsets"), None),
        (200, r#"{"offsets":[]}"#.into())
    );
    // MirrorMaker 2's connectors check offsets themselves (Connect's 500 with their message) and
    // answer for them (Connect's other success message).
    let mm = over_topic.url("/connectors/mm/offsets");
    let bad = r#"{"offsets":[{"partition":{"cluster":"a","topic":"t","partition":0},"offset":{"offset":"5"}}]}"#;
    let (st, body) = call("PATCH", &mm, Some(bad));
    assert_eq!(st, 500, "{body}");
    assert!(
        body.contains("Source offset {offset=5} for source partition {cluster=a, partition=0, topic=t} has an invalid value 5 for the 'offset' key, which must be an integer"),
        "{body}"
    );
    assert_eq!(
        call("GET", &mm, None),
        (200, r#"{"offsets":[]}"#.into()),
        "written anyway"
    );
    let good = r#"{"offsets":[{"partition":{"cluster":"a","topic":"t","partition":0},"offset":{"offset":5}}]}"#;
    let (st, body) = call("PATCH", &mm, Some(good));
    assert_eq!(st, 200, "{body}");
    assert!(
        body.contains("The offsets for this connector have been altered successfully"),
        "{body}"
    );
    let (st, body) = call("DELETE", &mm, None);
    assert_eq!(st, 200, "{body}");
    assert!(
        body.contains("The offsets for this connector have been reset successfully"),
        "{body}"
    );

    let group = format!(
        "kafka-group://{}/?group=connect-{{connector}}",
        kafka_util::bootstrap()
    );
    let over_groups = Serve::start(&["--store", &group, "--connect-configs", &configs_url]);
    let (st, body) = call("GET", &over_groups.url("/connectors/src/offsets"), None);
    assert_eq!(st, 400, "{body}");
    assert!(body.contains("is a source connector"), "{body}");
    assert_eq!(
        call("GET", &over_groups.url("/connectors/snk/offsets"), None),
        (200, r#"{"offsets":[]}"#.into())
    );
}

/// `DELETE /orphans/{name}` resets a connector without a config, and refuses, as `orphans --reset`
/// does, the namespaces the crate keeps its own records in (here history's), writing nothing.
#[test]
fn serve_resets_an_orphan_but_never_a_reserved_namespace() {
    let configs = kafka_util::TopicGuard::new("orphan-configs");
    drop(KafkaStore::open(&kafka_util::url(&configs, 1, "")).unwrap());
    kafka_util::produce_plain(
        &configs,
        &[(
            Some(0),
            Some(b"connector-kept"),
            Some(br#"{"properties":{"connector.class":"org.apache.kafka.connect.file.FileStreamSourceConnector"}}"#),
        )],
    );
    let configs_url = format!("kafka://{}/{}", kafka_util::bootstrap(), &*configs);
    let offsets = kafka_util::TopicGuard::new("orphan-offsets");
    let store = kafka_util::url(&offsets, 1, "&history=7d");
    // The records as they are in the topic, history's included (no history wrapper).
    let plain = || KafkaStore::open(&kafka_util::url(&offsets, 1, "")).unwrap();
    for name in ["kept", "gone"] {
        ok(&cli(&[
            "set",
            "--store",
            &store,
            "--connector",
            name,
            "--partition",
            r#"{"f":1}"#,
            "--offset",
            r#"{"p":7}"#,
        ]));
    }
    let history = "__connect-offsets-history";
    let before = plain().partitions(history).unwrap().len();
    assert!(before > 0, "history recorded the two sets");
    let serve = Serve::start(&["--store", &store, "--connect-configs", &configs_url]);
    let (st, body) = call("GET", &serve.url("/orphans"), None);
    assert_eq!(st, 200, "{body}");
    assert!(
        body.contains(r#""gone""#) && !body.contains("kept") && !body.contains(history),
        "{body}"
    );
    let (st, body) = call("DELETE", &serve.url(&format!("/orphans/{history}")), None);
    assert_eq!(st, 400, "{body}");
    assert!(body.contains("keeps its own records in"), "{body}");
    let (st, body) = call("DELETE", &serve.url("/orphans/kept"), None);
    assert_eq!(st, 400, "{body}");
    let (st, body) = call("DELETE", &serve.url("/orphans/gone"), None);
    assert_eq!(st, 200, "{body}");
    drop(serve);
    let after = plain();
    assert!(
        after.partitions("gone").unwrap().is_empty(),
        "the orphan reset"
    );
    assert_eq!(after.partitions("kept").unwrap().len(), 1);
    assert!(
        after.partitions(history).unwrap().len() > before,
        "history kept, and the reset recorded in it"
    );
}
