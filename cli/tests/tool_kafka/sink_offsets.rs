//! `kafka-group://`: sink connectors' offsets as their consumer groups' committed offsets, on the
//! real broker (`KAFKA_BOOTSTRAP`, default 127.0.0.1:9092). A plain librdkafka consumer plays the
//! sink task: it commits offsets in group `connect-<name>` and, subscribed, is the member whose
//! presence refuses every change. What Connect's own worker sees is in `cli/tests/tool_connect/connect_sink.rs`.
#![cfg(feature = "kafka")]

use crate::http_util;
use crate::kafka_util;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig};
use connect_offsets::store::OffsetStoreExt;
use connect_offsets::store::kafka::KafkaGroupStore;
use connect_offsets::{Error, Offset, OffsetKey, OffsetStore, Partition};
use http_util::{Serve, request};
use kafka_util::{
    TopicGuard, bootstrap, cli, create_topic, produce_plain, sasl_bootstrap, unique_topic,
};
use rdkafka::ClientConfig;
use rdkafka::TopicPartitionList;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::topic_partition_list::Offset as RdOffset;

const RECORDS: usize = 10;

fn url() -> String {
    format!("kafka-group://{}/?timeout.ms=300000", bootstrap())
}

/// A topic of `partitions` partitions holding `RECORDS` records in each.
fn topic(partitions: i32) -> TopicGuard {
    let t = TopicGuard::new("sink");
    create_topic(&t, partitions, &[]);
    let values: Vec<Vec<u8>> = (0..RECORDS)
        .map(|i| format!("line {i}").into_bytes())
        .collect();
    let mut records = Vec::new();
    for p in 0..partitions {
        for v in &values {
            records.push((Some(p), None, Some(&v[..])));
        }
    }
    produce_plain(&t, &records);
    t
}

fn connector() -> String {
    unique_topic("conn")
}

fn client(group: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer")
}

/// Commits offsets for `group` the way a sink task's consumer does.
fn commit(group: &str, topic: &str, offsets: &[(i32, i64)]) {
    let mut tpl = TopicPartitionList::new();
    for (p, o) in offsets {
        tpl.add_partition_offset(topic, *p, RdOffset::Offset(*o))
            .unwrap();
    }
    client(group)
        .commit(&tpl, CommitMode::Sync)
        .expect("commit");
}

/// The group's committed offsets of `topic`'s partitions, read from outside the store.
fn committed(group: &str, topic: &str, partitions: i32) -> BTreeMap<i32, i64> {
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    let got = client(group)
        .committed_offsets(tpl, Duration::from_secs(60))
        .expect("committed offsets");
    got.elements()
        .iter()
        .filter_map(|e| match e.offset() {
            RdOffset::Offset(n) => Some((e.partition(), n)),
            _ => None,
        })
        .collect()
}

fn key(connector: &str, topic: &str, p: i64) -> OffsetKey {
    OffsetKey::new(
        connector,
        Partition::new()
            .with("kafka_topic", topic)
            .with("kafka_partition", p),
    )
}

fn at(n: i64) -> Offset {
    Offset::new().with("kafka_offset", n)
}

/// A member of `group` subscribed to `topic` (a running sink task), once it has its assignment.
fn member(group: &str, topic: &str) -> BaseConsumer {
    member_of(group, topic, "classic")
}

/// [`member`] with `group.protocol` `classic` (Connect's default) or `consumer` (KIP-848).
fn member_of(group: &str, topic: &str, protocol: &str) -> BaseConsumer {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("group.id", group)
        .set("group.protocol", protocol)
        .set("client.id", "sink-task-0")
        .set("enable.auto.commit", "false")
        .create()
        .expect("member");
    c.subscribe(&[topic]).expect("subscribe");
    let deadline = Instant::now() + Duration::from_secs(120);
    while c.assignment().map(|a| a.count()).unwrap_or(0) == 0 {
        assert!(Instant::now() < deadline, "no assignment for {group}");
        let _ = c.poll(Duration::from_millis(100));
    }
    c
}

#[test]
fn a_sink_connectors_offsets_are_its_groups_committed_offsets() {
    let t = topic(3);
    let name = connector();
    let group = format!("connect-{name}");
    commit(&group, &t, &[(0, 4), (1, 7)]);
    let store = KafkaGroupStore::open(&url()).unwrap();

    let listed = store.partitions(&name).unwrap();
    assert_eq!(
        listed,
        vec![(key(&name, &t, 0), at(4)), (key(&name, &t, 1), at(7))],
        "the group's offsets, in Connect's shape"
    );
    assert!(store.namespaces().unwrap().contains(&name));
    assert_eq!(store.get(&key(&name, &t, 1)).unwrap(), Some(at(7)));
    assert_eq!(store.get(&key(&name, &t, 2)).unwrap(), None);

    // Set: up to the log end; a string of digits is the number, as in Connect.
    store.set(key(&name, &t, 2), at(RECORDS as i64)).unwrap();
    store
        .set(key(&name, &t, 0), Offset::new().with("kafka_offset", "2"))
        .unwrap();
    assert_eq!(
        committed(&group, &t, 3),
        BTreeMap::from([(0, 2), (1, 7), (2, RECORDS as i64)])
    );

    // One partition reset: its committed offset is deleted, the others stay.
    store.reset(key(&name, &t, 1)).unwrap();
    assert_eq!(committed(&group, &t, 3), BTreeMap::from([(0, 2), (2, 10)]));

    // The CLI over the same URL: list, get, lag per partition.
    let out = cli(&["list", "--store", &url(), "--connector", &name]);
    assert_eq!(
        out.trim(),
        format!(
            r#"{{"offsets":[{{"partition":{{"kafka_partition":0,"kafka_topic":"{t}"}},"offset":{{"kafka_offset":2}}}},{{"partition":{{"kafka_partition":2,"kafka_topic":"{t}"}},"offset":{{"kafka_offset":10}}}}]}}"#
        ),
        "members in the order Connect's GET prints them (its HashMap's), so the two diff cleanly"
    );
    let lag = cli(&["lag", "--store", &url(), "--json"]);
    assert!(
        lag.contains(&format!(
            r#"{{"kafka_topic":"{t}","kafka_partition":0,"committed":2,"log_end":10,"lag":8}}"#
        )),
        "{lag}"
    );

    // Reset all: the group is deleted, as Connect's DELETE does; again is fine (unknown = reset).
    assert_eq!(store.reset_namespace(&name).unwrap(), 2);
    assert!(committed(&group, &t, 3).is_empty());
    let groups = client("any")
        .fetch_group_list(Some(&group), Duration::from_secs(60))
        .unwrap();
    assert!(
        groups
            .groups()
            .iter()
            .all(|g| g.state() == "Dead" || g.name() != group),
        "the group is gone: {:?}",
        groups
            .groups()
            .iter()
            .map(|g| g.state().to_string())
            .collect::<Vec<_>>()
    );
    assert_eq!(store.reset_namespace(&name).unwrap(), 0);
    assert!(store.partitions(&name).unwrap().is_empty());
    assert!(!store.namespaces().unwrap().contains(&name));
    // The command line agrees (Connect's DELETE answers 200 again): exit 0, 0 partitions.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_connect-offsets"))
        .args(["reset", "--store", &url(), "--connector", &name, "--all"])
        .env_remove("CONNECT_OFFSETS_STORE")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!("reset 0 partitions of connector `{name}`")),
        "{err}"
    );
}

#[test]
fn bad_input_is_refused_naming_what_was_wrong_and_nothing_changes() {
    let t = topic(2);
    let name = connector();
    let group = format!("connect-{name}");
    commit(&group, &t, &[(0, 3)]);
    let store = KafkaGroupStore::open(&url()).unwrap();
    let before = committed(&group, &t, 2);
    let sink = |p: &str| OffsetKey::new(name.as_str(), Partition::from_json(p).unwrap());
    let good = (key(&name, &t, 1), Some(at(5)));
    let cases: Vec<(OffsetKey, Option<Offset>, String)> = vec![
        (
            sink(r#"{"filename":"/tmp/x"}"#),
            Some(at(1)),
            "unknown member `filename`".into(),
        ),
        (
            OffsetKey::null_partition(name.as_str()),
            Some(at(1)),
            "not null".into(),
        ),
        (
            sink(&format!(r#"{{"kafka_topic":"{t}"}}"#)),
            Some(at(1)),
            "`kafka_partition` is missing".into(),
        ),
        (
            key(&name, &t, 0),
            Some(at(-1)),
            "must not be negative, not -1".into(),
        ),
        (
            key(&name, &t, 0),
            Some(Offset::new().with("kafka_offset", 2.5)),
            "must be an integer".into(),
        ),
        (
            key(&name, &t, 0),
            Some(Offset::new().with("kafka_offset", "ten")),
            "not \"ten\"".into(),
        ),
        (
            key(&name, "co-test-no-such-topic-ever", 0),
            Some(at(1)),
            "topic `co-test-no-such-topic-ever` does not exist".into(),
        ),
        (
            key(&name, &t, 2),
            Some(at(1)),
            format!("topic `{t}` has no partition 2 (it has 2: 0 to 1)"),
        ),
        (
            key(&name, &t, 0),
            Some(at(RECORDS as i64 + 1)),
            format!("offset 11 is beyond the log end of {t}-0 (10)"),
        ),
        // Connect takes the number as a string too: a second key of partition 1, whose reset
        // would otherwise undo the good entry (or delete the whole group).
        (
            sink(&format!(r#"{{"kafka_topic":"{t}","kafka_partition":"1"}}"#)),
            None,
            format!("both name topic partition {t}-1"),
        ),
        (
            key(&name, &t, 0),
            Some(Offset::new().with("kafka_offset", " 4")),
            "not \" 4\"".into(),
        ),
    ];
    for (k, o, want) in cases {
        // With a good entry beside it: the whole write is refused.
        let e = store
            .write(vec![good.clone(), (k.clone(), o.clone())])
            .unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, Error::InvalidData(_)), "{text}");
        assert!(
            text.contains(&want),
            "{k:?} {o:?}: want `{want}` in: {text}"
        );
        assert!(text.contains(&format!("sink connector `{name}`")), "{text}");
        assert_eq!(committed(&group, &t, 2), before, "after {text}");
    }

    // Another connector's bad entry in the same write: this connector's group is not changed either.
    let other = connector();
    let e = store
        .write(vec![
            good.clone(),
            (key(&other, "co-test-no-such-topic-ever", 0), Some(at(1))),
        ])
        .unwrap_err()
        .to_string();
    assert!(e.contains(&format!("sink connector `{other}`")), "{e}");
    assert_eq!(committed(&group, &t, 2), before);

    // The REST API answers 400 with the same reason (Connect: BadRequestException).
    let serve = Serve::start(&["--store", &url(), "--connector", &name]);
    let (st, body) = request(
        "PATCH",
        &serve.offsets_url(&name),
        Some(&format!(
            r#"{{"offsets":[{{"partition":{{"kafka_topic":"{t}","kafka_partition":0}},"offset":{{"kafka_offset":-4}}}}]}}"#
        )),
    );
    assert_eq!(st, 400, "{body}");
    assert!(body.contains("must not be negative, not -4"), "{body}");
    assert_eq!(committed(&group, &t, 2), before);

    // A URL that cannot work says why.
    for (u, want) in [
        (
            format!("kafka-group://{}/topic", bootstrap()),
            "has no path",
        ),
        (
            format!("kafka-group://{}/?group=fixed", bootstrap()),
            "connector=NAME",
        ),
        (
            format!("kafka-group://{}/?group.id=x", bootstrap()),
            "name the group with `group=`",
        ),
    ] {
        let e = KafkaGroupStore::open(&u).unwrap_err().to_string();
        assert!(e.contains(want), "{u}: {e}");
    }
}

#[test]
fn a_group_with_members_is_refused_with_connects_message() {
    let t = topic(2);
    let name = connector();
    let group = format!("connect-{name}");
    commit(&group, &t, &[(0, 3), (1, 4)]);
    let task = member(&group, &t);
    let store = KafkaGroupStore::open(&url()).unwrap();
    let before = committed(&group, &t, 2);

    let e = store.set(key(&name, &t, 0), at(1)).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "Failed to alter consumer group offsets for connector {name} either because its tasks haven't stopped completely yet"
        )) && e.contains("zombie sink tasks")
            && e.contains("sink-task-0")
            && e.contains("nothing was changed"),
        "{e}"
    );
    let e = store.reset(key(&name, &t, 1)).unwrap_err().to_string();
    assert!(
        e.starts_with("Failed to alter consumer group offsets"),
        "{e}"
    );
    let e = store.reset_namespace(&name).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "Failed to reset consumer group offsets for connector {name}"
        )),
        "{e}"
    );
    assert_eq!(committed(&group, &t, 2), before);

    // Through the REST API: Connect answers these with 500 (a ConnectException), so do we.
    let serve = Serve::start(&["--store", &url()]);
    let (st, body) = request("GET", &serve.offsets_url(&name), None);
    assert_eq!(st, 200, "reads are fine while it runs: {body}");
    let patch = format!(
        r#"{{"offsets":[{{"partition":{{"kafka_topic":"{t}","kafka_partition":0}},"offset":{{"kafka_offset":"1"}}}}]}}"#
    );
    let (st, body) = request("PATCH", &serve.offsets_url(&name), Some(&patch));
    assert_eq!(st, 500, "{body}");
    assert!(
        body.contains(r#""error_code":500"#) && body.contains("zombie sink tasks"),
        "{body}"
    );
    let (st, body) = request("DELETE", &serve.offsets_url(&name), None);
    assert_eq!(st, 500, "{body}");
    assert!(
        body.contains("Failed to reset consumer group offsets"),
        "{body}"
    );
    assert_eq!(committed(&group, &t, 2), before);

    // Stopped, the same PATCH goes through.
    drop(task);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (st, body) = request("PATCH", &serve.offsets_url(&name), Some(&patch));
        if st == 200 {
            assert!(body.contains("have been altered successfully"), "{body}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still refused after the member left: {body}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(committed(&group, &t, 2), BTreeMap::from([(0, 1), (1, 4)]));
    let (st, body) = request("DELETE", &serve.offsets_url(&name), None);
    assert_eq!(st, 200, "{body}");
    assert!(committed(&group, &t, 2).is_empty());
}

#[test]
fn export_import_and_migrate_between_groups_and_a_commit_buffer_is_refused() {
    let t = topic(2);
    let name = connector();
    commit(&format!("connect-{name}"), &t, &[(0, 6), (1, 9)]);
    // Another cluster's naming stands in for another cluster: the same broker, another group.
    let other = format!(
        "kafka-group://{}/?group=copy-{{connector}}&timeout.ms=300000",
        bootstrap()
    );
    let doc = cli(&["export", "--store", &url(), "--connector", &name]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sink.json");
    std::fs::write(&file, &doc).unwrap();
    cli(&[
        "import",
        "--store",
        &other,
        "--connector",
        &name,
        "--input",
        file.to_str().unwrap(),
    ]);
    assert_eq!(
        committed(&format!("copy-{name}"), &t, 2),
        BTreeMap::from([(0, 6), (1, 9)])
    );
    // migrate makes a third group equal, and verifies it.
    let third = format!(
        "kafka-group://{}/?group=third-{{connector}}&timeout.ms=300000",
        bootstrap()
    );
    let out = cli(&[
        "migrate",
        "--from",
        &url(),
        "--to",
        &third,
        "--connector",
        &name,
    ]);
    assert!(out.contains("verified: both sides equal"), "{out}");
    assert_eq!(
        committed(&format!("third-{name}"), &t, 2),
        BTreeMap::from([(0, 6), (1, 9)])
    );
    // A fixed group (consumer.override.group.id) with its connector named.
    let fixed = format!(
        "kafka-group://{}/?group=third-{name}&connector=renamed&timeout.ms=300000",
        bootstrap()
    );
    let listed = cli(&["list", "--store", &fixed, "--connector", "renamed"]);
    assert!(listed.contains(r#""kafka_offset":9"#), "{listed}");

    // A whole store a commit buffer wrote (a writer seq beside the offsets) migrates into groups
    // without the seq, which a group cannot keep: said, not failed after the groups were written.
    let db = dir.path().join("buffered");
    {
        let src = connect_offsets::store::rocksdb::RocksDbStore::open(&db).unwrap();
        src.apply(&connect_offsets::Batch::new(
            "w",
            3,
            vec![(key(&name, &t, 0), Some(at(4)))],
        ))
        .unwrap();
    }
    let fourth = format!(
        "kafka-group://{}/?group=fourth-{{connector}}&timeout.ms=300000",
        bootstrap()
    );
    let out = cli(&[
        "migrate",
        "--from",
        &format!("rocksdb://{}", db.display()),
        "--to",
        &fourth,
    ]);
    assert!(out.contains("verified: both sides equal"), "{out}");
    assert!(
        out.contains("writer seqs not carried") && out.contains("keeps no applied seq"),
        "{out}"
    );
    assert_eq!(
        committed(&format!("fourth-{name}"), &t, 2),
        BTreeMap::from([(0, 4)])
    );

    // Partition numbers and positions spelled as strings (Connect takes them) are matched as the
    // group keeps them: the migration verifies, and running it again changes nothing.
    let spelled = dir.path().join("spelled");
    {
        let src = connect_offsets::store::rocksdb::RocksDbStore::open(&spelled).unwrap();
        let k = OffsetKey::new(
            &name,
            Partition::new()
                .with("kafka_topic", &*t)
                .with("kafka_partition", "1"),
        );
        src.set(k, Offset::new().with("kafka_offset", "7")).unwrap();
    }
    let fifth = format!(
        "kafka-group://{}/?group=fifth-{{connector}}&timeout.ms=300000",
        bootstrap()
    );
    let from = format!("rocksdb://{}", spelled.display());
    let out = cli(&["migrate", "--from", &from, "--to", &fifth, "--json"]);
    assert!(out.contains(r#""added":1"#), "{out}");
    assert_eq!(
        committed(&format!("fifth-{name}"), &t, 2),
        BTreeMap::from([(1, 7)])
    );
    let again = cli(&["migrate", "--from", &from, "--to", &fifth, "--json"]);
    assert!(
        again.contains(r#""unchanged":1"#) && again.contains(r#""added":0"#),
        "{again}"
    );
    assert_eq!(
        committed(&format!("fifth-{name}"), &t, 2),
        BTreeMap::from([(1, 7)])
    );

    // A commit buffer needs a writer seq the group cannot keep: refused at open, saying so.
    let store: std::sync::Arc<dyn OffsetStore> =
        std::sync::Arc::new(KafkaGroupStore::open(&url()).unwrap());
    let e = match CommitBuffer::open(store, CommitBufferConfig::new(dir.path().join("wal"))) {
        Ok(_) => panic!("a commit buffer opened over kafka-group://"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("keeps no applied seq") && e.contains("commit buffer cannot run"),
        "{e}"
    );

    for g in [
        format!("copy-{name}"),
        format!("third-{name}"),
        format!("fourth-{name}"),
        format!("connect-{name}"),
    ] {
        KafkaGroupStore::open(&format!(
            "kafka-group://{}/?group={g}&connector=x",
            bootstrap()
        ))
        .unwrap()
        .reset_namespace("x")
        .unwrap();
    }
}

#[test]
fn sasl_settings_reach_every_client_and_the_password_never_shows() {
    let t = topic(1);
    let name = connector();
    commit(&format!("connect-{name}"), &t, &[(0, 2)]);
    let sasl = |password: &str, timeout: u32| {
        format!(
            "kafka-group://{}/?timeout.ms={timeout}&security.protocol=SASL_PLAINTEXT&sasl.mechanism=PLAIN\
             &sasl.username=connect-offsets&sasl.password={password}",
            sasl_bootstrap()
        )
    };
    let store = KafkaGroupStore::open(&sasl("connect-offsets-secret", 300_000)).unwrap();
    assert_eq!(
        store.partitions(&name).unwrap(),
        vec![(key(&name, &t, 0), at(2))]
    );
    store.set(key(&name, &t, 0), at(5)).unwrap();
    assert_eq!(store.get(&key(&name, &t, 0)).unwrap(), Some(at(5)));
    // `lag` reaches the log ends with the store's SASL settings too.
    let lag = cli(&[
        "lag",
        "--store",
        &sasl("connect-offsets-secret", 300_000),
        "--json",
    ]);
    assert!(
        lag.contains(&format!(
            r#"{{"kafka_topic":"{t}","kafka_partition":0,"committed":5,"log_end":10,"lag":5}}"#
        )),
        "{lag}"
    );
    store.reset_namespace(&name).unwrap();
    let shown = format!("{store:?}");
    assert!(!shown.contains("connect-offsets-secret"), "{shown}");
    // Refused credentials end the wait at once, well within the bound.
    let started = Instant::now();
    let e = KafkaGroupStore::open(&sasl("WrongHorseBattery", 60_000))
        .unwrap_err()
        .to_string();
    assert!(
        !e.contains("WrongHorseBattery") && e.contains("authentication failed"),
        "{e}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_group_of_the_new_consumer_protocol_with_a_member_is_refused_too() {
    let t = topic(2);
    let name = connector();
    let group = format!("connect-{name}");
    commit(&group, &t, &[(0, 3), (1, 4)]);
    let task = member_of(&group, &t, "consumer");
    let store = KafkaGroupStore::open(&url()).unwrap();
    let before = committed(&group, &t, 2);
    for e in [
        store.set(key(&name, &t, 0), at(1)).unwrap_err(),
        store.reset(key(&name, &t, 1)).unwrap_err(),
        store.reset_namespace(&name).unwrap_err(),
    ] {
        let e = e.to_string();
        assert!(
            e.contains("zombie sink tasks") && e.contains("nothing was changed"),
            "{e}"
        );
    }
    assert_eq!(committed(&group, &t, 2), before);
    drop(task);
}

/// `history` and `rewind` on a sink connector's group say that consumer groups keep no history,
/// instead of advising `?history=`, which a kafka-group:// URL refuses.
#[test]
fn history_and_rewind_say_that_sink_groups_keep_no_history() {
    let t = topic(1);
    let name = connector();
    commit(&format!("connect-{name}"), &t, &[(0, 3)]);
    for args in [
        vec!["history", "--store", &url(), "--connector", &name],
        vec![
            "rewind",
            "--store",
            &url(),
            "--connector",
            &name,
            "--to",
            "seq:1",
        ],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_connect-offsets"))
            .args(&args)
            .env_remove("CONNECT_OFFSETS_STORE")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("sink connectors' consumer groups keep no history"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("?history="), "{args:?}: {err}");
    }
}

/// A migration the destination refuses before changing anything (a sink group's checks: here a
/// topic that does not exist) says that nothing was written.
#[test]
fn a_migration_refused_by_the_sink_groups_checks_says_nothing_was_written() {
    let name = connector();
    let absent = unique_topic("absent");
    let from = connect_offsets::store::MemoryStore::new();
    from.set(
        key(&name, &absent, 0),
        Offset::new().with("kafka_offset", 1),
    )
    .unwrap();
    let to = KafkaGroupStore::open(&url()).unwrap();
    let options = connect_offsets::migrate::MigrateOptions {
        connector: Some(name.clone()),
        ..Default::default()
    };
    let e = connect_offsets::migrate::migrate(&from, &to, &options)
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not exist"), "{e}");
    assert!(e.contains("nothing of it was written"), "{e}");
    assert!(!e.contains("may be written"), "{e}");
    assert!(to.partitions(&name).unwrap().is_empty());
}
