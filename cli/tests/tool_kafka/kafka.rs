//! `KafkaStore` against a real broker (`scripts/kafka start`; `KAFKA_BOOTSTRAP` overrides the address).
//! Every test uses its own topic. With no broker the tests fail, saying how to start one.
#![cfg(feature = "kafka")]

use crate::kafka_util;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use connect_offsets::conformance::ApplyFault;
use connect_offsets::conformance::{Harness, HistoryHarness};
use connect_offsets::conformance_tests;
use connect_offsets::store::kafka::{
    KafkaStore, MARKER_FIELD, SEQ_HEADER, WRITER_HEADER, marker_key,
};
use connect_offsets::store::{CommitHooks, OffsetStore, OffsetStoreExt, StoreUrl};
use connect_offsets::{Batch, Error, Offset, OffsetKey, Partition};
use kafka_util::*;

/// Each conformance test gets a fresh topic (3 partitions, so batches span partitions); `params`
/// choose the write mode.
struct KafkaHarness {
    topic: TopicGuard,
    params: &'static str,
}

impl KafkaHarness {
    fn new(params: &'static str) -> Self {
        KafkaHarness {
            topic: TopicGuard::new("conformance"),
            params,
        }
    }
}

impl Harness for KafkaHarness {
    fn open(
        &mut self,
        fault: Option<Arc<dyn ApplyFault>>,
    ) -> connect_offsets::Result<Box<dyn OffsetStore>> {
        let store = KafkaStore::open(&url(&self.topic, 3, self.params))?;
        Ok(match fault {
            None => Box::new(store),
            Some(f) => Box::new(store.with_fault(f)),
        })
    }
    fn reopen_keeps_data(&self) -> bool {
        true
    }
}

conformance_tests!(kafka, || KafkaHarness::new(""));
conformance_tests!(kafka_idempotent, || KafkaHarness::new(
    "&write.mode=idempotent"
));
// `kafka://…?history=`: history's wrapper over the topic store.
conformance_tests!(history_kafka, || HistoryHarness(KafkaHarness::new("")));

/// A sink connector's consumer group (`kafka-group://`), which takes only unsequenced writes of
/// sink partitions: the suite's checks for such a store, on a fresh topic and connector.
struct GroupHarness;

impl Harness for GroupHarness {
    fn open(
        &mut self,
        fault: Option<Arc<dyn ApplyFault>>,
    ) -> connect_offsets::Result<Box<dyn OffsetStore>> {
        assert!(fault.is_none(), "the sink checks install no fault");
        connect_offsets::open(&format!("kafka-group://{}/?timeout.ms=300000", bootstrap()))
    }
    fn reopen_keeps_data(&self) -> bool {
        true
    }
}

#[test]
fn group_conformance() {
    let topic = TopicGuard::new("group-conformance");
    create_topic(&topic, 3, &[]);
    // Ten records in each partition: a group's committed offset may not pass the log's end.
    let records: Vec<_> = (0..3)
        .flat_map(|p| (0..10).map(move |_| (Some(p), None, Some(&b"line"[..]))))
        .collect();
    produce_plain(&topic, &records);
    let connector = unique_topic("group-conformance");
    connect_offsets::conformance::sink_partitions(&mut GroupHarness, &connector, &topic);
}

fn pos(n: i64) -> Offset {
    Offset::new().with("position", n)
}

fn key(ns: &str, i: i64) -> OffsetKey {
    OffsetKey::new(ns, Partition::new().with("p", i))
}

/// The vectors of the format page: key bytes → partition for 25 / 50 / 3 partitions.
fn vectors() -> Vec<(OffsetKey, &'static str, [i32; 3])> {
    vec![
        (
            OffsetKey::new(
                "local-file-source",
                Partition::new().with("filename", "/tmp/test.txt"),
            ),
            r#"["local-file-source",{"filename":"/tmp/test.txt"}]"#,
            [21, 21, 0],
        ),
        (
            OffsetKey::new("my-conn", Partition::new().with("a", 1)),
            r#"["my-conn",{"a":1}]"#,
            [22, 47, 2],
        ),
        (
            OffsetKey::new("dbz", Partition::new().with("server", "dbserver1")),
            r#"["dbz",{"server":"dbserver1"}]"#,
            [17, 42, 0],
        ),
        (OffsetKey::null_partition("c"), r#"["c",null]"#, [0, 0, 1]),
    ]
}

#[test]
fn records_land_where_java_puts_them() {
    for (i, partitions) in [25u32, 50, 3].into_iter().enumerate() {
        let topic = TopicGuard::new("murmur2");
        let store = KafkaStore::open(&url(&topic, partitions, "")).expect("open");
        assert_eq!(store.partition_count(), partitions as i32);
        for (n, (k, bytes, _)) in vectors().iter().enumerate() {
            assert_eq!(String::from_utf8(k.connect_key()).unwrap(), *bytes);
            store
                .apply(&Batch::new("w", n as u64 + 1, [(k.clone(), Some(pos(7)))]))
                .expect("apply");
        }
        let seen = read_all(&topic, "read_committed");
        for (k, bytes, want) in vectors() {
            let recs: Vec<_> = seen
                .iter()
                .filter(|r| r.key.as_deref() == Some(bytes.as_bytes()))
                .collect();
            assert_eq!(recs.len(), 1, "one record for {bytes}: {seen:?}");
            assert_eq!(
                recs[0].partition, want[i],
                "{bytes} over {partitions} partitions"
            );
            assert_eq!(store.partition_of(&k), want[i]);
            assert_eq!(recs[0].value.as_deref(), Some(&br#"{"position":7}"#[..]));
            // Every record carries its batch's writer and seq.
            assert!(
                recs[0]
                    .headers
                    .iter()
                    .any(|(h, v)| h == WRITER_HEADER && v == b"w")
                    && recs[0].headers.iter().any(|(h, _)| h == SEQ_HEADER),
                "headers of {bytes}: {:?}",
                recs[0].headers
            );
        }
        // One marker per writer, at its murmur2 place, holding the last seq.
        let marker = connect_offsets::store::kafka::marker_key("w");
        let markers: Vec<_> = seen
            .iter()
            .filter(|r| r.key.as_deref() == Some(&marker[..]))
            .collect();
        assert_eq!(markers.len(), 4, "a marker per batch");
        assert!(markers.iter().all(|m| m.partition
            == connect_offsets::codec::murmur2::partition_for(&marker, partitions) as i32));
        assert_eq!(
            markers.last().unwrap().value.as_deref(),
            Some(&b"{\"seq\":4}"[..])
        );
        assert!(String::from_utf8_lossy(&marker).contains(MARKER_FIELD));
    }
}

#[test]
fn resets_are_tombstones() {
    let topic = TopicGuard::new("tombstone");
    let store = KafkaStore::open(&url(&topic, 3, "")).expect("open");
    let k = key("c", 1);
    store.set(k.clone(), pos(1)).expect("set");
    store.reset(k.clone()).expect("reset");
    let seen = read_all(&topic, "read_committed");
    let recs: Vec<_> = seen
        .iter()
        .filter(|r| r.key.as_deref() == Some(&k.connect_key()[..]))
        .collect();
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[1].value, None, "a reset is a record with a null value");
    drop(store);
    let store = KafkaStore::open(&url(&topic, 3, "")).expect("reopen");
    assert_eq!(store.get(&k).unwrap(), None);
}

#[test]
fn refuses_a_topic_that_is_not_only_compacted() {
    for policy in ["compact,delete", "delete"] {
        let topic = TopicGuard::new("policy");
        create_topic(&topic, 3, &[("cleanup.policy", policy)]);
        let err = KafkaStore::open(&url(&topic, 3, ""))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("'cleanup.policy={policy}'"))
                && err.contains("is required to have 'cleanup.policy=compact'")
                && err.contains(&*topic),
            "{err}"
        );
    }
    // An existing compacted topic is used as it is, with its own partition count.
    let topic = TopicGuard::new("policy-ok");
    create_topic(&topic, 4, &[("cleanup.policy", "compact")]);
    let store = KafkaStore::open(&url(&topic, 25, "")).expect("open a compacted topic");
    assert_eq!(store.partition_count(), 4);
}

/// A topic that is not compacted can still be read (to get its offsets off it), with Connect's
/// warning, by a store opened to read only; that store refuses writes, and any other open refuses
/// the topic.
#[test]
fn a_topic_that_is_not_compacted_is_read_only_to_read() {
    let topic = TopicGuard::new("policy-read");
    create_topic(&topic, 3, &[("cleanup.policy", "delete")]);
    let k = key("c", 1);
    let value = br#"{"position":7}"#;
    produce_plain(&topic, &[(None, Some(&k.connect_key()), Some(&value[..]))]);
    let u = url(&topic, 3, "");
    let store = connect_offsets::open_read_only(&u).expect("read a delete-policy topic");
    assert_eq!(
        store.get(&k).unwrap(),
        Some(Offset::new().with("position", 7))
    );
    let e = store.set(k.clone(), pos(8)).unwrap_err().to_string();
    assert!(e.contains("opened to read only"), "{e}");
    for open in [connect_offsets::open, connect_offsets::open_existing] {
        let Err(e) = open(&u) else {
            panic!("opened a delete-policy topic to write")
        };
        let e = e.to_string();
        assert!(e.contains("'cleanup.policy=delete'"), "{e}");
    }
    {
        let out = cli(&["export", "--store", &u, "--connector", "c"]);
        assert!(out.contains(r#""offset":{"position":7}"#), "{out}");
    }
}

#[test]
fn creates_the_topic_compacted() {
    let topic = TopicGuard::new("create");
    let store = KafkaStore::open(&url(&topic, 7, "")).expect("open");
    assert_eq!(store.partition_count(), 7);
    drop(store);
    // A second open finds the topic and checks its policy (it would refuse anything but compact).
    let store = KafkaStore::open(&url(&topic, 3, "")).expect("reopen");
    assert_eq!(store.partition_count(), 7);
}

#[test]
fn replication_minus_one_is_the_broker_default() {
    let topic = TopicGuard::new("rf-default");
    let u = format!(
        "kafka://{}/{topic}?partitions=2&replication=-1&{BOUNDS}",
        bootstrap()
    );
    let store = KafkaStore::open(&u).expect("open with the broker's default replication");
    assert_eq!(store.partition_count(), 2);
    store.set(key("c", 1), pos(1)).expect("set");
    let e = KafkaStore::open(&format!("kafka://{}/{topic}?replication=0", bootstrap()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("replication"), "{e}");
}

#[test]
fn unreachable_broker_fails_within_the_timeout() {
    bootstrap();
    let t = Instant::now();
    let err = KafkaStore::open("kafka://127.0.0.1:1/offsets?timeout.ms=3000")
        .unwrap_err()
        .to_string();
    let took = t.elapsed();
    assert!(
        took < Duration::from_secs(8),
        "took {took:?}, the bound is 3 s"
    );
    assert!(
        took >= Duration::from_millis(2900),
        "gave up early: {took:?}"
    );
    assert!(
        err.contains("127.0.0.1:1") && err.contains("timed out after 3000 ms"),
        "{err}"
    );
}

#[test]
fn sasl_plain_with_the_right_password_works() {
    let topic = TopicGuard::new("sasl");
    let u = format!(
        "kafka://{}/{topic}?partitions=3&replication=1&{BOUNDS}&security.protocol=SASL_PLAINTEXT\
         &sasl.mechanism=PLAIN&sasl.username=connect-offsets&sasl.password=connect-offsets-secret",
        sasl_bootstrap()
    );
    let store = KafkaStore::open(&u).expect("open through SASL");
    store.set(key("c", 1), pos(5)).expect("set");
    drop(store);
    let store = KafkaStore::open(&u).expect("reopen through SASL");
    assert_eq!(store.get(&key("c", 1)).unwrap(), Some(pos(5)));
    let shown = format!("{store:?}");
    assert!(
        !shown.contains("connect-offsets-secret") && shown.contains("sasl.password"),
        "{shown}"
    );
}

#[test]
fn sasl_wrong_password_is_a_clear_error_within_the_bound() {
    let topic = TopicGuard::new("sasl-bad");
    let u = format!(
        "kafka://{}/{topic}?timeout.ms=10000&security.protocol=SASL_PLAINTEXT&sasl.mechanism=PLAIN\
         &sasl.username=connect-offsets&sasl.password=WrongHorseBattery",
        sasl_bootstrap()
    );
    let logs = Capture::default();
    let t = Instant::now();
    let err = tracing::subscriber::with_default(logs.clone(), || KafkaStore::open(&u))
        .unwrap_err()
        .to_string();
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t.elapsed()
    );
    assert!(
        err.to_lowercase().contains("authentication"),
        "not an authentication error: {err}"
    );
    assert!(!err.contains("WrongHorseBattery"), "{err}");
    let logged = logs.text();
    assert!(!logged.is_empty(), "librdkafka's error should be logged");
    assert!(!logged.contains("WrongHorseBattery"), "{logged}");
}

#[test]
fn secrets_stay_out_of_debug_errors_and_logs() {
    let secret = "S3cr3t-Pa55-9f8e7d";
    let topic = TopicGuard::new("secrets");
    // librdkafka's own debug output, to be sure nothing it logs carries the password.
    let raw = format!(
        "kafka://{}/{topic}?timeout.ms=5000&security.protocol=SASL_PLAINTEXT&sasl.mechanism=PLAIN\
         &sasl.username=nobody&sasl.password={secret}&debug=security,broker",
        sasl_bootstrap()
    );
    let inline = StoreUrl::parse(&format!(
        "kafka://h:1/t?ssl.key.pem=-----BEGIN%20PRIVATE%20KEY-----{secret}&sasl.oauthbearer.config=clientSecret%3D{secret}&partitions=x"
    ))
    .unwrap();
    assert!(!inline.to_string().contains(secret), "{inline}");
    let e = KafkaStore::open_url(&inline).unwrap_err().to_string();
    assert!(e.contains("partitions") && !e.contains(secret), "{e}");
    let url = StoreUrl::parse(&raw).unwrap();
    assert!(!url.to_string().contains(secret));
    assert!(!format!("{url:?}").contains(secret));
    let builder = connect_offsets::store::kafka::KafkaStoreBuilder::from_url(&url).unwrap();
    let dbg = format!("{builder:?}");
    assert!(
        !dbg.contains(secret) && dbg.contains("sasl.password"),
        "{dbg}"
    );
    let masked = builder
        .clone()
        .property("ssl.key.password", format!("{secret}-key"))
        .property(
            "ssl.key.pem",
            format!("-----BEGIN PRIVATE KEY-----{secret}"),
        );
    let dbg = format!("{masked:?}");
    assert!(
        !dbg.contains(secret) && dbg.contains("ssl.key.pem"),
        "{dbg}"
    );
    let logs = Capture::default();
    let err = tracing::subscriber::with_default(logs.clone(), || builder.open()).unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(!text.contains(secret), "{text}");
    let logged = logs.text();
    assert!(
        logged.contains("SASL") || logged.contains("sasl"),
        "debug logs expected"
    );
    assert!(!logged.contains(secret), "secret in the logs");
    // A Java-only property is refused by name, without its value.
    let e = KafkaStore::open(&format!(
        "kafka://{}/{topic}?sasl.jaas.config=org.x.PlainLoginModule%20required%20password%3D%22{secret}%22",
        bootstrap()
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("sasl.jaas.config") && !e.contains(secret), "{e}");
}

#[test]
fn a_second_store_with_the_same_writer_fences_the_first() {
    let topic = TopicGuard::new("fence");
    let first = KafkaStore::open(&url(&topic, 3, "")).expect("open first");
    first
        .apply(&Batch::new("w", 1, [(key("c", 1), Some(pos(1)))]))
        .expect("first writes batch 1");
    let second = KafkaStore::open(&url(&topic, 3, "")).expect("open second");
    second
        .apply(&Batch::new("w", 2, [(key("c", 1), Some(pos(2)))]))
        .expect("second writes batch 2");
    let err = first
        .apply(&Batch::new("w", 3, [(key("c", 1), Some(pos(3)))]))
        .unwrap_err();
    assert!(
        matches!(err, Error::Fenced(_)) && err.is_fatal(),
        "zombie got {err:?}"
    );
    assert!(err.to_string().contains("connect-offsets-"), "{err}");
    let again = first
        .apply(&Batch::new("w", 4, [(key("c", 1), Some(pos(4)))]))
        .unwrap_err();
    assert!(matches!(again, Error::Fenced(_)), "{again:?}");
    // Other writers of the fenced store are not affected.
    first
        .apply(&Batch::new("other", 1, [(key("c", 2), Some(pos(9)))]))
        .expect("another writer");
    let third = KafkaStore::open(&url(&topic, 3, "")).expect("open third");
    assert_eq!(third.applied_seq("w").unwrap(), 2);
    assert_eq!(third.get(&key("c", 1)).unwrap(), Some(pos(2)));
    assert_eq!(third.get(&key("c", 2)).unwrap(), Some(pos(9)));
    // Claiming at open fences at once.
    let claimer = KafkaStore::builder(bootstrap(), &*topic)
        .replication(1)
        .claim_writer("w")
        .open()
        .expect("claim");
    let err = second
        .apply(&Batch::new("w", 3, [(key("c", 1), Some(pos(3)))]))
        .unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err:?}");
    claimer
        .apply(&Batch::new("w", 3, [(key("c", 1), Some(pos(3)))]))
        .expect("the claimer writes");
}

#[test]
fn undecodable_records_go_to_the_dead_letter_file() {
    let topic = TopicGuard::new("dead");
    drop(KafkaStore::open(&url(&topic, 3, "")).expect("create the topic"));
    let good = key("good", 1);
    let good_bytes = good.connect_key();
    type Bad<'a> = (&'a [u8], Option<&'a [u8]>, &'a str);
    let bad: Vec<Bad<'_>> = vec![
        (b"not json", Some(b"{\"x\":1}"), "bad JSON key"),
        (b"{\"a\":1}", Some(b"{\"x\":1}"), "object key"),
        (b"[\"c\",{\"p\":1},3]", Some(b"{\"x\":1}"), "three items"),
        (
            b"[\"c\",{\"p\":[1]}]",
            Some(b"{\"x\":1}"),
            "nested partition",
        ),
        (
            b"[\"c\",{\"p\":2}]",
            Some(b"{\"x\":{\"y\":1}}"),
            "nested value",
        ),
        (b"[\"c\",{\"p\":3}]", Some(b"[1,2]"), "array value"),
        (b"[\"c\",{\"p\":4}]", Some(b"{\"x\":"), "truncated value"),
    ];
    let mut recs: Vec<PlainRecord<'_>> = bad.iter().map(|(k, v, _)| (None, Some(*k), *v)).collect();
    recs.push((None, Some(&good_bytes), Some(b"{\"position\":42}")));
    produce_plain(&topic, &recs);
    let n_bad = bad.len() as u64;

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dead.jsonl");
    let store = KafkaStore::open(&url(
        &topic,
        3,
        &format!("&dead.letter.file={}", file.display()),
    ))
    .expect("open skips bad records");
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    assert_eq!(store.dead_letters(), n_bad, "{text}");
    assert_eq!(
        store.get(&good).unwrap(),
        Some(pos(42)),
        "good record loaded"
    );
    let lines: Vec<_> = text.lines().collect();
    assert_eq!(lines.len() as u64, n_bad, "{text}");
    for l in &lines {
        assert!(
            l.contains("\"source\":\"kafka\"")
                && l.contains(&format!("\"topic\":\"{topic}\""))
                && l.contains("\"partition\":")
                && l.contains("\"offset\":")
                && l.contains("\"key_b64\":")
                && l.contains("\"value_b64\":")
                && l.contains("\"reason\":"),
            "{l}"
        );
    }
    assert!(text.contains("nested") || text.contains("array"), "{text}");
    // The records stay in the topic: the next open meets them again, the file keeps one line each.
    drop(store);
    let store = KafkaStore::open(&url(
        &topic,
        3,
        &format!("&dead.letter.file={}", file.display()),
    ))
    .expect("reopen");
    assert_eq!(store.dead_letters(), n_bad);
    let again = std::fs::read_to_string(&file).unwrap();
    assert_eq!(again.lines().count() as u64, n_bad, "{again}");
    // Without a file: counted only.
    let store = KafkaStore::open(&url(&topic, 3, "")).expect("open without a file");
    assert_eq!(store.dead_letters(), n_bad);
    // Strict mode refuses, naming where.
    let err = KafkaStore::open(&url(&topic, 3, "&strict=true"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("strict") && err.contains("partition") && err.contains("offset"),
        "{err}"
    );
}

#[test]
fn refresh_sees_what_others_wrote() {
    let topic = TopicGuard::new("refresh");
    let store = KafkaStore::open(&url(&topic, 3, "")).expect("open");
    let a = key("conn", 1);
    let b = key("conn", 2);
    store.set(a.clone(), pos(1)).expect("set");
    // A Connect worker without exactly-once: plain records, no headers, no transaction.
    produce_plain(
        &topic,
        &[
            (None, Some(&b.connect_key()), Some(br#"{"position":20}"#)),
            (None, Some(&a.connect_key()), Some(br#"{"position":10}"#)),
        ],
    );
    // Another store (another process) too.
    let other = KafkaStore::open(&url(&topic, 3, "")).expect("open other");
    other
        .apply(&Batch::new("x", 5, [(key("conn", 3), Some(pos(30)))]))
        .expect("other writes");
    assert_eq!(
        store.get(&b).unwrap(),
        None,
        "lookups come from memory until a refresh"
    );
    let r = store.refresh().expect("refresh");
    assert!(r.records >= 3, "{r:?}");
    assert_eq!(store.get(&a).unwrap(), Some(pos(10)));
    assert_eq!(store.get(&b).unwrap(), Some(pos(20)));
    assert_eq!(store.get(&key("conn", 3)).unwrap(), Some(pos(30)));
    assert_eq!(store.applied_seq("x").unwrap(), 5);
    // A reset by tombstone.
    produce_plain(&topic, &[(None, Some(&a.connect_key()), None)]);
    store.refresh().expect("refresh");
    assert_eq!(store.get(&a).unwrap(), None);
    assert_eq!(store.partitions("conn").unwrap().len(), 2);
    // Nothing new: a refresh reads nothing.
    assert_eq!(store.refresh().expect("refresh").records, 0);
}

#[test]
fn another_spelling_of_a_key_is_replaced_not_duplicated() {
    let topic = TopicGuard::new("forms");
    let store = KafkaStore::open(&url(&topic, 5, "")).expect("open");
    let ab = OffsetKey::new("c", Partition::new().with("a", 1).with("b", "x"));
    let ba = OffsetKey::new("c", Partition::new().with("b", "x").with("a", 1));
    // A worker wrote one spelling (whitespace too); we write the other.
    produce_plain(
        &topic,
        &[(
            None,
            Some(br#"[ "c" , { "a" : 1 , "b" : "x" } ]"#),
            Some(br#"{"position":1}"#),
        )],
    );
    store.refresh().unwrap();
    assert_eq!(store.get(&ba).unwrap(), Some(pos(1)));
    store.set(ba.clone(), pos(2)).expect("set");
    store.set(ab.clone(), pos(3)).expect("set");
    drop(store);
    let store = KafkaStore::open(&url(&topic, 5, "")).expect("reopen");
    assert_eq!(store.get(&ab).unwrap(), Some(pos(3)));
    assert_eq!(store.partitions("c").unwrap().len(), 1);
    store.reset(ba.clone()).expect("reset");
    drop(store);
    let store = KafkaStore::open(&url(&topic, 5, "")).expect("reopen");
    assert_eq!(
        store.get(&ab).unwrap(),
        None,
        "no older spelling comes back after a reset"
    );
}

/// The offset records of `topic` (markers left out), as a plain `read_committed` reader sees them.
fn offset_records(topic: &str) -> Vec<Seen> {
    read_all(topic, "read_committed")
        .into_iter()
        .filter(|r| r.key.as_deref().is_some_and(|k| k.starts_with(b"[")))
        .collect()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A connector's 9-member partition (unicode names, an astral character, a double, a boolean),
/// in the connector's member order and reversed: one structural key, two record keys.
fn nine_members(ns: &str) -> (OffsetKey, OffsetKey) {
    let mut forward = Partition::new();
    let mut members: Vec<(String, connect_offsets::Value)> = vec![
        ("sërver 😀".into(), "db-ü".into()),
        ("tablé".into(), "ördërs".into()),
        ("shard".into(), 7i64.into()),
        ("ratio".into(), 1e23.into()),
        ("third".into(), (1.0f64 / 3.0).into()),
        ("snapshot".into(), true.into()),
        ("schema".into(), "public".into()),
        ("ключ".into(), (-3i64).into()),
        ("zone".into(), "\u{2028}\"q\"".into()),
    ];
    for (n, v) in &members {
        forward.insert(n.clone(), v.clone());
    }
    members.reverse();
    let reverse = members.into_iter().collect::<Partition>();
    (OffsetKey::new(ns, forward), OffsetKey::new(ns, reverse))
}

/// A connector's record, `set` with its members in reverse order (through the
/// store and the CLI): the new offsets are under the connector's exact key bytes, in the same topic
/// partition, and nothing tombstones them.
#[test]
fn set_with_the_members_reordered_writes_the_connectors_own_key() {
    let topic = TopicGuard::new("reorder");
    let store_url = url(&topic, 25, "");
    let store = KafkaStore::open(&store_url).expect("open");
    let (forward, reverse) = nine_members("cönn");
    assert_eq!(forward, reverse);
    let connect = forward.connect_key();
    assert_ne!(connect, reverse.connect_key());
    produce_plain(
        &topic,
        &[(None, Some(&connect), Some(br#"{"position":1}"#))],
    );
    store.refresh().unwrap();
    store.set(reverse.clone(), pos(2)).expect("set");
    let mut want = vec![pos(1), pos(2)];
    {
        cli(&[
            "set",
            "--store",
            &store_url,
            "--connector",
            "cönn",
            "--partition",
            &reverse.partition().unwrap().to_json(),
            "--offset",
            r#"{"position":3}"#,
        ]);
        want.push(pos(3));
    }
    let recs = offset_records(&topic);
    for r in &recs {
        assert_eq!(
            r.key.as_deref(),
            Some(&connect[..]),
            "a record under another key: {}",
            text(r.key.as_deref().unwrap())
        );
        assert_eq!(
            r.partition,
            store.partition_of(&forward),
            "the same partition"
        );
    }
    let values: Vec<Option<Offset>> = recs
        .iter()
        .map(|r| {
            r.value
                .as_deref()
                .map(|v| Offset::from_json(std::str::from_utf8(v).unwrap()).unwrap())
        })
        .collect();
    assert_eq!(
        values,
        want.iter().cloned().map(Some).collect::<Vec<_>>(),
        "the connector's key holds each new offset, no tombstone"
    );
    let last = want.last().cloned();
    drop(store);
    let store = KafkaStore::open(&store_url).expect("reopen");
    assert_eq!(store.get(&reverse).unwrap(), last);
    let listed = store.partitions("cönn").unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        listed[0].0.connect_key(),
        connect,
        "listed in the connector's order"
    );
}

/// A JDK 17 worker spells 1e23 `9.999999999999999E22`. `set` writes under that
/// key, not ours (`1.0E23`); with both spellings live, under both; a reset tombstones both.
#[test]
fn set_keeps_a_jdk17_workers_spelling_of_a_double() {
    let topic = TopicGuard::new("jdk17");
    let store_url = url(&topic, 25, "");
    let store = KafkaStore::open(&store_url).expect("open");
    // Byte for byte what such a worker writes: `ü` raw, the astral character as an escaped pair.
    let jdk17: &[u8] =
        r#"["c",{"name":"ünï\uD83D\uDE00","ratio":9.999999999999999E22}]"#.as_bytes();
    let key = OffsetKey::new(
        "c",
        Partition::new().with("name", "ünï😀").with("ratio", 1e23),
    );
    let ours = key.connect_key();
    assert_eq!(
        text(&ours),
        r#"["c",{"name":"ünï😀","ratio":1.0E23}]"#.replace('😀', r"\uD83D\uDE00")
    );
    produce_plain(&topic, &[(None, Some(jdk17), Some(br#"{"position":1}"#))]);
    store.refresh().unwrap();
    assert_eq!(store.get(&key).unwrap(), Some(pos(1)));
    store.set(key.clone(), pos(2)).expect("set");
    let recs = offset_records(&topic);
    assert!(
        recs.iter().all(|r| r.key.as_deref() == Some(jdk17)),
        "records under other keys: {:?}",
        recs.iter()
            .map(|r| text(r.key.as_deref().unwrap()))
            .collect::<Vec<_>>()
    );
    assert!(recs.iter().all(|r| r.value.is_some()), "no tombstone");
    assert_eq!(
        recs.last().unwrap().value.as_deref(),
        Some(&br#"{"position":2}"#[..])
    );
    let jdk17_partition = recs[0].partition;
    assert!(recs.iter().all(|r| r.partition == jdk17_partition));

    // A JDK 19+ worker writes its own spelling too: both are live, both get the next offset.
    produce_plain(&topic, &[(None, Some(&ours), Some(br#"{"position":3}"#))]);
    store.refresh().unwrap();
    assert_eq!(store.get(&key).unwrap(), Some(pos(3)), "the newer record");
    let before = offset_records(&topic);
    store.set(key.clone(), pos(4)).expect("set");
    let mut new: Vec<(String, Option<Vec<u8>>)> = written_since(&before, offset_records(&topic))
        .iter()
        .map(|r| (text(r.key.as_deref().unwrap()), r.value.clone()))
        .collect();
    new.sort();
    let four = Some(br#"{"position":4}"#.to_vec());
    let mut want = vec![(text(jdk17), four.clone()), (text(&ours), four)];
    want.sort();
    assert_eq!(new, want, "the new offset under both spellings");
    drop(store);
    let store = KafkaStore::open(&store_url).expect("reopen");
    assert_eq!(store.get(&key).unwrap(), Some(pos(4)));
    let before = offset_records(&topic);
    store.reset(key.clone()).expect("reset");
    let mut tombstones: Vec<String> = written_since(&before, offset_records(&topic))
        .iter()
        .map(|r| {
            assert_eq!(r.value, None, "a reset writes tombstones only");
            text(r.key.as_deref().unwrap())
        })
        .collect();
    tombstones.sort();
    let mut want = vec![text(jdk17), text(&ours)];
    want.sort();
    assert_eq!(tombstones, want, "a reset tombstones every live spelling");
    drop(store);
    let store = KafkaStore::open(&store_url).expect("reopen");
    assert_eq!(store.get(&key).unwrap(), None);
}

/// 20 partitions, each with two live forms in two topic partitions, the newer (by
/// record timestamp) in Connect's order and the older produced last, half of them in a higher topic
/// partition than the newer, half in a lower one. Every fresh open, `get` and `list` give the newer
/// offsets, the same each time; after a `set` the store answers as a reopen does.
#[test]
fn get_and_list_answer_with_the_newest_of_two_forms() {
    let topic = TopicGuard::new("newest");
    let store_url = url(&topic, 25, "");
    drop(KafkaStore::open(&store_url).expect("create the topic"));
    let t0 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        - 600_000;
    let forms: Vec<(OffsetKey, OffsetKey, i32, i32)> = (0..20)
        .map(|i| {
            let newer = OffsetKey::new(
                "c",
                Partition::new()
                    .with("table", format!("t-{i}"))
                    .with("shard", i),
            );
            let older = OffsetKey::new(
                "c",
                Partition::new()
                    .with("shard", i)
                    .with("table", format!("t-{i}")),
            );
            let pn = (2 * i) % 25;
            let po = if i % 2 == 0 {
                (pn + 1) % 25
            } else {
                (pn + 24) % 25
            };
            (newer, older, pn, po)
        })
        .collect();
    // Per partition: the newer key, the older key, and their values.
    type Bytes = (Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>);
    let bytes: Vec<Bytes> = forms
        .iter()
        .enumerate()
        .map(|(i, (n, o, _, _))| {
            (
                n.connect_key(),
                o.connect_key(),
                pos(1000 + i as i64).to_json().into_bytes(),
                pos(i as i64).to_json().into_bytes(),
            )
        })
        .collect();
    let mut records: Vec<TimedRecord<'_>> = Vec::new();
    for (i, (_, _, pn, _)) in forms.iter().enumerate() {
        records.push((*pn, &bytes[i].0, Some(&bytes[i].2), t0 + 1000 + i as i64));
    }
    for (i, (_, _, _, po)) in forms.iter().enumerate() {
        records.push((*po, &bytes[i].1, Some(&bytes[i].3), t0 + i as i64));
    }
    produce_timed(&topic, &records);
    let want: Vec<(Vec<u8>, Offset)> = forms
        .iter()
        .enumerate()
        .map(|(i, (n, _, _, _))| (n.connect_key(), pos(1000 + i as i64)))
        .collect();
    // Per partition, in the order of `forms`: the listed key bytes and offset.
    let answer = |store: &KafkaStore| -> Vec<(Vec<u8>, Offset)> {
        let listed = store.partitions("c").unwrap();
        assert_eq!(listed.len(), 20);
        forms
            .iter()
            .map(|(n, o, _, _)| {
                let (k, v) = listed.iter().find(|(k, _)| k == n).expect("listed");
                assert_eq!(
                    store.get(o).unwrap().as_ref(),
                    Some(v),
                    "get agrees with list"
                );
                (k.connect_key(), v.clone())
            })
            .collect()
    };
    for round in 0..5 {
        let store = KafkaStore::open(&store_url).expect("open");
        let got = answer(&store);
        let wrong: Vec<String> = got
            .iter()
            .zip(&want)
            .filter(|(g, w)| g != w)
            .map(|(g, _)| format!("{} => {}", text(&g.0), g.1.to_json()))
            .collect();
        assert!(
            wrong.is_empty(),
            "open {round}: {} of 20 answered with the older record: {wrong:?}",
            wrong.len()
        );
    }
    {
        let first = cli(&["list", "--store", &store_url, "--connector", "c"]);
        for (_, o) in &want {
            assert!(
                first.contains(&o.to_json()),
                "{first} lacks {}",
                o.to_json()
            );
        }
        assert_eq!(
            cli(&["list", "--store", &store_url, "--connector", "c"]),
            first,
            "the same answer twice"
        );
    }
    // Our write goes under both forms, with an explicit timestamp; the store's answer afterwards
    // is the one a reopen gives.
    let store = KafkaStore::open(&store_url).expect("open");
    let before = offset_records(&topic);
    let t1 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    store.set(forms[3].1.clone(), pos(77)).expect("set");
    let t2 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let ours = written_since(&before, offset_records(&topic));
    assert_eq!(ours.len(), 2, "one record per live form");
    for r in &ours {
        let ts = r.timestamp.expect("a timestamp");
        assert!((t1..=t2).contains(&ts), "timestamp {ts} not in {t1}..={t2}");
        assert_eq!(r.value.as_deref(), Some(pos(77).to_json().as_bytes()));
    }
    let mine = answer(&store);
    drop(store);
    let reopened = KafkaStore::open(&store_url).expect("reopen");
    assert_eq!(answer(&reopened), mine, "the state is what a reload gives");
    assert_eq!(reopened.get(&forms[3].0).unwrap(), Some(pos(77)));
}

#[test]
fn applied_seq_survives_without_the_batch_records() {
    let topic = TopicGuard::new("seq");
    let store = KafkaStore::open(&url(&topic, 3, "")).expect("open");
    let k = key("c", 1);
    store
        .apply(&Batch::new("w", 1, [(k.clone(), Some(pos(1)))]))
        .expect("apply");
    // A batch that only resets: its tombstones go away after delete.retention.ms.
    store
        .apply(&Batch::new("w", 2, [(k.clone(), None)]))
        .expect("reset batch");
    // Somebody else overwrites the key: compaction would drop every record of ours for it.
    produce_plain(
        &topic,
        &[(None, Some(&k.connect_key()), Some(br#"{"position":9}"#))],
    );
    drop(store);
    let store = KafkaStore::open(&url(&topic, 3, "")).expect("reopen");
    assert_eq!(store.applied_seq("w").unwrap(), 2);
    assert_eq!(store.get(&k).unwrap(), Some(pos(9)));
    assert_eq!(store.writers().unwrap(), vec![("w".to_string(), 2)]);
    // Replaying batch 1 or 2 changes nothing.
    store
        .apply(&Batch::new("w", 1, [(k.clone(), Some(pos(1)))]))
        .unwrap();
    assert_eq!(store.get(&k).unwrap(), Some(pos(9)));
}

/// With fast compaction settings, the log cleaner really removes our records and tombstones; the
/// marker keeps `applied_seq`.
#[test]
fn applied_seq_survives_compaction() {
    let topic = TopicGuard::new("compaction");
    create_topic(
        &topic,
        1,
        &[
            ("cleanup.policy", "compact"),
            ("segment.ms", "100"),
            ("min.cleanable.dirty.ratio", "0.001"),
            ("delete.retention.ms", "100"),
            ("min.compaction.lag.ms", "0"),
        ],
    );
    let store = KafkaStore::open(&url(&topic, 1, "")).expect("open");
    let k = key("c", 1);
    store
        .apply(&Batch::new("w", 1, [(k.clone(), Some(pos(1)))]))
        .unwrap();
    store
        .apply(&Batch::new("w", 2, [(k.clone(), None)]))
        .unwrap();
    // Keep writing (unrelated keys, another writer) so segments roll and the cleaner runs. The
    // broker's one cleaner thread serves every compacted topic the suite makes at once: allow it time.
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut n = 0;
    loop {
        n += 1;
        store
            .apply(&Batch::new(
                "filler",
                n,
                [(key("f", n as i64 % 3), Some(pos(n as i64)))],
            ))
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let seen = read_all(&topic, "read_committed");
        let ours = seen
            .iter()
            .filter(|r| r.key.as_deref() == Some(&k.connect_key()[..]))
            .count();
        if ours == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the log cleaner did not remove the records of `w` within 300 s"
        );
    }
    drop(store);
    let store = KafkaStore::open(&url(&topic, 1, "")).expect("reopen");
    assert_eq!(
        store.applied_seq("w").unwrap(),
        2,
        "no record of w's batches is left, the marker keeps its seq"
    );
    assert_eq!(store.get(&k).unwrap(), None);
}

#[test]
fn an_aborted_batch_is_invisible_to_read_committed_but_not_to_read_uncommitted() {
    use connect_offsets::internal::store::fault::FailMidway;
    let topic = TopicGuard::new("abort");
    let fault = Arc::new(FailMidway::new(3));
    let store = KafkaStore::open(&url(&topic, 3, ""))
        .expect("open")
        .with_fault(fault.clone());
    let batch = Batch::new("w", 1, (0..6).map(|i| (key("c", i), Some(pos(i)))));
    let t = Instant::now();
    assert!(store.apply(&batch).is_err());
    assert!(fault.fired());
    // The abort serves the delivery reports of the purged records instead of waiting out the
    // 30 s timeout for them.
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "the abort took {:?}",
        t.elapsed()
    );
    assert_eq!(store.get(&key("c", 0)).unwrap(), None);
    let committed = read_all(&topic, "read_committed");
    assert!(
        committed.is_empty(),
        "read_committed sees nothing: {committed:?}"
    );
    // A worker reading uncommitted sees those of the 3 records produced before the abort that
    // reached the broker (the abort purges what was still queued in the client).
    let uncommitted = read_all(&topic, "read_uncommitted");
    let first3: Vec<Vec<u8>> = (0..3).map(|i| key("c", i).connect_key()).collect();
    assert!(
        uncommitted.len() <= 3
            && uncommitted
                .iter()
                .all(|r| first3.contains(r.key.as_ref().unwrap())),
        "{uncommitted:?}"
    );
    // The retry writes the whole batch.
    store.apply(&batch).expect("retry");
    let store = KafkaStore::open(&url(&topic, 3, "")).expect("reopen");
    assert_eq!(store.partitions("c").unwrap().len(), 6);
    assert_eq!(store.applied_seq("w").unwrap(), 1);
}

/// A writer's wait for its records is a flush, which sends whatever lingers at once: a batch is
/// not held back by `linger.ms` (here 850 s, past the store's 300 s timeout), in either write
/// mode, with its records on one topic partition (the marker right behind them) or on several,
/// nor when librdkafka's queue (here 10 records) fills before a batch is all sent.
#[test]
fn a_commit_does_not_wait_out_linger_ms() {
    for mode in ["transaction", "idempotent"] {
        let topic = TopicGuard::new("linger");
        let lingering = format!(
            "kafka://{}/{}?partitions=3&replication=1&write.mode={mode}&timeout.ms=300000\
             &linger.ms=850000&delivery.timeout.ms=900000&transaction.timeout.ms=900000\
             &queue.buffering.max.messages=10",
            bootstrap(),
            &*topic
        );
        let store = KafkaStore::open(&lingering).expect("open");
        let one = Batch::new("w", 1, [(key("c", 0), Some(pos(1)))]);
        store
            .apply(&one)
            .unwrap_or_else(|e| panic!("{mode}, one record: {e}"));
        let many = Batch::new("w", 2, (0..30).map(|i| (key("c", i), Some(pos(i + 2)))));
        store
            .apply(&many)
            .unwrap_or_else(|e| panic!("{mode}, 30 records: {e}"));
        let reopened = KafkaStore::open(&url(&topic, 3, "")).expect("reopen");
        assert_eq!(reopened.applied_seq("w").unwrap(), 2, "{mode}");
        assert_eq!(
            reopened.get(&key("c", 29)).unwrap(),
            Some(pos(31)),
            "{mode}"
        );
    }
}

/// An unsequenced write (a tool's, seq 0) carries no headers in either write mode: only Connect's
/// bytes, as a Connect worker writes them.
#[test]
fn an_unsequenced_write_carries_no_headers() {
    for mode in ["transaction", "idempotent"] {
        let topic = TopicGuard::new("no-headers");
        let store =
            KafkaStore::open(&url(&topic, 3, &format!("&write.mode={mode}"))).expect("open");
        let batch = Batch::new("w", 0, (0..4).map(|i| (key("c", i), Some(pos(i)))));
        store
            .apply(&batch)
            .unwrap_or_else(|e| panic!("{mode}: {e}"));
        let seen = read_all(&topic, "read_committed");
        assert_eq!(seen.len(), 4, "{mode}: {seen:?}");
        for r in &seen {
            assert!(r.headers.is_empty(), "{mode}: {r:?}");
        }
    }
}

/// `write.mode=idempotent`: a batch that fails midway leaves the records acknowledged before the
/// failure in the topic, without headers and without its marker, so a reopen does not count
/// it as applied; the retry writes it whole, then the marker.
#[test]
fn idempotent_mode_marks_a_batch_applied_only_once_all_of_it_is_in() {
    use connect_offsets::internal::store::fault::FailMidway;
    let topic = TopicGuard::new("idempotent");
    let fault = Arc::new(FailMidway::new(3));
    let store = KafkaStore::open(&url(&topic, 3, "&write.mode=idempotent"))
        .expect("open")
        .with_fault(fault.clone());
    assert!(!store.capabilities().atomic);
    let batch = Batch::new("w", 1, (0..6).map(|i| (key("c", i), Some(pos(i)))));
    assert!(store.apply(&batch).is_err());
    assert!(fault.fired());
    let seen = read_all(&topic, "read_committed");
    let first3: Vec<Vec<u8>> = (0..3).map(|i| key("c", i).connect_key()).collect();
    assert_eq!(seen.len(), 3, "the records sent before the fault: {seen:?}");
    for r in &seen {
        assert!(first3.contains(r.key.as_ref().unwrap()), "{r:?}");
        assert!(r.headers.is_empty(), "no headers, Connect's record: {r:?}");
    }
    let reopened = KafkaStore::open(&url(&topic, 3, "")).expect("reopen");
    assert_eq!(reopened.applied_seq("w").unwrap(), 0, "not applied yet");
    assert_eq!(reopened.get(&key("c", 0)).unwrap(), Some(pos(0)));
    assert_eq!(reopened.get(&key("c", 5)).unwrap(), None);
    // The retry (as recovery replays it) writes the whole batch and then the marker.
    store.apply(&batch).expect("retry");
    let seen = read_all(&topic, "read_committed");
    let marker = marker_key("w");
    assert_eq!(
        seen.iter()
            .filter(|r| r.key.as_deref() == Some(&marker[..]))
            .count(),
        1
    );
    let reopened = KafkaStore::open(&url(&topic, 3, "")).expect("reopen");
    assert_eq!(reopened.applied_seq("w").unwrap(), 1);
    assert_eq!(reopened.partitions("c").unwrap().len(), 6);
    // A replay of the applied batch writes nothing.
    store.apply(&batch).expect("replay");
    assert_eq!(read_all(&topic, "read_committed").len(), seen.len());
}

/// In idempotent mode a batch whose records share one partition sends its marker into that
/// partition right behind them; a reopen takes the highest marker of a writer over all partitions.
#[test]
fn idempotent_one_partition_batches_put_their_marker_behind_their_records() {
    let topic = TopicGuard::new("idem-marker");
    let store = KafkaStore::open(&url(&topic, 5, "&write.mode=idempotent")).expect("open");
    let marker = marker_key("w");
    let marker_home = connect_offsets::codec::partition_for(&marker, 5) as i32;
    // Keys in partitions other than the marker's own, then a batch spread over two partitions.
    let keys: Vec<_> = (0..40)
        .map(|i| key("c", i))
        .filter(|k| {
            connect_offsets::codec::partition_for(&k.connect_key(), 5) as i32 != marker_home
        })
        .take(3)
        .collect();
    let part = |k: &OffsetKey| connect_offsets::codec::partition_for(&k.connect_key(), 5) as i32;
    for (seq, k) in keys.iter().enumerate() {
        store
            .apply(&Batch::new(
                "w",
                seq as u64 + 1,
                [(k.clone(), Some(pos(seq as i64)))],
            ))
            .expect("apply");
    }
    let seen = read_all(&topic, "read_committed");
    for (seq, k) in keys.iter().enumerate() {
        let rec = seen
            .iter()
            .find(|r| r.key.as_deref() == Some(&k.connect_key()[..]))
            .expect("the record");
        let value = format!("{{\"seq\":{}}}", seq + 1);
        let m = seen
            .iter()
            .find(|r| r.value.as_deref() == Some(value.as_bytes()))
            .expect("its marker");
        assert_eq!(m.key.as_deref(), Some(&marker[..]));
        assert_eq!(
            m.partition,
            rec.partition,
            "marker {} beside its record",
            seq + 1
        );
        assert_eq!(
            m.offset,
            rec.offset + 1,
            "marker {} right behind its record",
            seq + 1
        );
    }
    // Two partitions: the marker goes to its own partition, after every record is in.
    let a = keys[0].clone();
    let b = (100..200)
        .map(|i| key("c", i))
        .find(|k| part(k) != part(&a))
        .expect("a key in another partition");
    store
        .apply(&Batch::new(
            "w",
            4,
            [(a, Some(pos(40))), (b, Some(pos(41)))],
        ))
        .expect("apply");
    let seen = read_all(&topic, "read_committed");
    let m = seen
        .iter()
        .find(|r| r.value.as_deref() == Some(&b"{\"seq\":4}"[..]))
        .expect("marker 4");
    assert_eq!(m.partition, marker_home);
    drop(store);
    let reopened = KafkaStore::open(&url(&topic, 5, "")).expect("reopen");
    assert_eq!(reopened.applied_seq("w").unwrap(), 4);
}

#[test]
fn opens_by_url_through_the_generic_opener() {
    let topic = TopicGuard::new("generic");
    let store = connect_offsets::open(&url(&topic, 3, "")).expect("open");
    assert_eq!(store.kind(), "kafka");
    assert!(store.capabilities().durable);
    let e = connect_offsets::open(&format!("kafka://{}/?x=1", bootstrap()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("topic"), "{e}");
    let e = connect_offsets::open(&format!(
        "kafka://{}/{topic}?isolation.level=read_uncommitted",
        bootstrap()
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("isolation.level"), "{e}");
    let e = connect_offsets::open(&format!("kafka://{}/bad/topic", bootstrap()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("topic name"), "{e}");
    let e = connect_offsets::open(&format!(
        "kafka://{}/{topic}?no.such.property=1",
        bootstrap()
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("no.such.property"), "{e}");
}

#[test]
fn loads_100k_offsets() {
    const N: i64 = 100_000;
    let topic = TopicGuard::new("load");
    let store = KafkaStore::open(&url(&topic, 25, "")).expect("open");
    let t = Instant::now();
    for b in 0..10 {
        let batch = Batch::new(
            "loader",
            b as u64 + 1,
            (b * N / 10..(b + 1) * N / 10).map(|i| (key("load", i), Some(pos(i)))),
        );
        store.apply(&batch).expect("apply");
    }
    let wrote = t.elapsed();
    drop(store);
    let store = KafkaStore::open(&url(&topic, 25, "")).expect("reopen");
    let loaded = store.loaded();
    println!(
        "100,000 offsets: written in 10 batches in {wrote:?}; loaded {} records in {:?} ({} build profile)",
        loaded.records,
        loaded.elapsed,
        if cfg!(debug_assertions) {
            "dev"
        } else {
            "release"
        }
    );
    assert_eq!(loaded.offsets, N as usize);
    assert_eq!(
        loaded.records,
        N as u64 + 10,
        "offsets plus one marker per batch"
    );
    assert_eq!(store.partitions("load").unwrap().len(), N as usize);
    assert_eq!(store.get(&key("load", N - 1)).unwrap(), Some(pos(N - 1)));
    assert_eq!(store.applied_seq("loader").unwrap(), 10);
}

/// Captures `tracing` events as text (to check what the store logs).
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<String>>);

impl Capture {
    fn text(&self) -> String {
        self.0.lock().unwrap().clone()
    }
}

struct Visit<'a>(&'a mut String);

impl tracing::field::Visit for Visit<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        use std::fmt::Write;
        let _ = write!(self.0, "{}={:?} ", field.name(), value);
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut s = self.0.lock().unwrap();
        event.record(&mut Visit(&mut s));
        s.push('\n');
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// A writer's marker deleted by someone and compacted down to its tombstone: the reopen sees the
/// tombstone, reads the topic again with every record's batch headers, and `applied_seq` still
/// names the writer's last batch (a too-low one would let recovery replay it over newer values).
#[test]
fn a_deleted_marker_is_made_up_for_by_the_batch_headers() {
    use rdkafka::message::{Header, OwnedHeaders};
    use rdkafka::producer::{BaseRecord, Producer};
    let topic = TopicGuard::new("deleted-marker");
    drop(KafkaStore::open(&url(&topic, 3, "")).expect("create the topic"));
    let producer = plain_producer();
    let records = [(key("c", 1), 5), (key("c", 2), 7), (key("c", 3), 6)];
    for (k, seq) in &records {
        let seq = seq.to_string();
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: WRITER_HEADER,
                value: Some("w"),
            })
            .insert(Header {
                key: SEQ_HEADER,
                value: Some(seq.as_str()),
            });
        let key_bytes = k.connect_key();
        let value = br#"{"position":1}"#;
        producer
            .send(
                BaseRecord::<[u8], [u8]>::to(&topic)
                    .key(&key_bytes[..])
                    .payload(&value[..])
                    .headers(headers),
            )
            .map_err(|(e, _)| e)
            .expect("send");
    }
    producer.flush(Duration::from_secs(30)).expect("flush");
    // A record that does not decode is met by both reads of the open, and counted once.
    let bad_key = key("c", 9).connect_key();
    let marker = marker_key("w");
    produce_plain(
        &topic,
        &[
            (None, Some(&bad_key), Some(b"{not json")),
            (None, Some(&marker), None),
        ],
    );
    let reopened = KafkaStore::open(&url(&topic, 3, "")).expect("reopen");
    assert_eq!(reopened.applied_seq("w").unwrap(), 7, "the highest header");
    assert_eq!(reopened.partitions("c").unwrap().len(), 3);
    assert_eq!(reopened.dead_letters(), 1, "one bad record, read twice");
    // A topic whose markers are intact is read without the headers: they add nothing there.
    let plain = TopicGuard::new("kept-marker");
    let store = KafkaStore::open(&url(&plain, 3, "")).expect("open");
    store
        .apply(&Batch::new("w", 4, [(key("c", 1), Some(pos(1)))]))
        .expect("apply");
    let reopened = KafkaStore::open(&url(&plain, 3, "")).expect("reopen");
    assert_eq!(reopened.applied_seq("w").unwrap(), 4, "from the marker");
}

/// A batch prepared (encoded while the buffer's log writes it) is written as prepared when nothing
/// changed before its apply, and encoded again when a refresh read a connector's form of its key
/// in between: then its offset goes under the connector's bytes, not the form prepared.
#[test]
fn a_prepared_batch_is_encoded_again_when_the_state_changed() {
    for params in ["", "&write.mode=idempotent"] {
        let topic = TopicGuard::new("prepared");
        let store = KafkaStore::open(&url(&topic, 25, params)).expect("open");
        let stamp = |records: &[Seen], key: &[u8]| {
            let r = records.iter().find(|r| r.key.as_deref() == Some(key));
            r.and_then(|r| r.timestamp)
                .expect("the record, with a timestamp")
        };

        // The first batch makes the writer's producer (a transactional one reads the topic first).
        let first = Batch::new("w", 1, [(key("c", 0), Some(pos(0)))]);
        store.apply(&first).expect("apply");
        let k = key("c", 1);
        let unchanged = Arc::new(Batch::new("w", 2, [(k.clone(), Some(pos(1)))]));
        let before = now_millis();
        assert!(store.prepare(&unchanged), "the store prepares batches");
        std::thread::sleep(Duration::from_millis(200));
        let applied_at = now_millis();
        store.apply(&unchanged).expect("apply");
        let at = stamp(&offset_records(&topic), &k.connect_key());
        assert!(
            (before..applied_at).contains(&at),
            "{params}: written as prepared (stamped {at}, prepared from {before}, applied at {applied_at})"
        );

        let (forward, reverse) = nine_members("cönn");
        let changed = Arc::new(Batch::new("w", 3, [(reverse.clone(), Some(pos(2)))]));
        assert!(store.prepare(&changed));
        produce_plain(
            &topic,
            &[(
                None,
                Some(&forward.connect_key()),
                Some(br#"{"position":1}"#),
            )],
        );
        store.refresh().unwrap();
        store.apply(&changed).expect("apply");
        let records = offset_records(&topic);
        let under = |key: Vec<u8>| -> Vec<String> {
            records
                .iter()
                .filter(|r| r.key.as_deref() == Some(&key[..]))
                .map(|r| text(r.value.as_deref().unwrap_or(b"null")))
                .collect()
        };
        assert_eq!(
            under(forward.connect_key()),
            [r#"{"position":1}"#, r#"{"position":2}"#],
            "{params}: the new offset under the connector's bytes"
        );
        assert!(
            under(reverse.connect_key()).is_empty(),
            "{params}: nothing under the form prepared before the refresh"
        );
        assert_eq!(store.get(&reverse).unwrap(), Some(pos(2)));
    }
}

fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A topic that takes records of at most 10,000 bytes (`max.message.bytes`, below the producer's
/// 1 MB): an offset too large for it is refused at once, naming the sizes, by a direct write and by
/// a commit buffer's offer, which never logs it (else its apply would be retried forever, and
/// every reopen would replay it). The writer's headers count: a record that fits only without
/// them is refused too; two that fit one by one but not together go in two record batches.
/// Everything that fits is written, in both write modes.
#[test]
fn an_offset_too_large_for_the_topic_is_refused_before_it_is_logged() {
    use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig, Durability};
    for mode in ["", "&write.mode=idempotent"] {
        let topic = TopicGuard::new("too-large");
        create_topic(
            &topic,
            1,
            &[
                ("cleanup.policy", "compact"),
                ("max.message.bytes", "10000"),
            ],
        );
        let url = url(&topic, 1, mode);
        let store = Arc::new(KafkaStore::open(&url).unwrap());
        let big = |n: usize| Offset::new().with("blob", "x".repeat(n));
        let refused = |e: Error, what: &str| {
            let text = e.to_string();
            assert!(
                matches!(e, Error::InvalidData(_)) && text.contains("10000 bytes"),
                "{mode} {what}: {text}"
            );
        };
        let t0 = Instant::now();
        refused(store.set(key("c", 1), big(20_000)).unwrap_err(), "set");
        // 9,000 bytes of value fit; with a writer name of 2,000 bytes in its headers they do not.
        store.set(key("c", 2), big(9_000)).unwrap();
        let long_writer = "w".repeat(2_000);
        let batch = Batch::new(long_writer.as_str(), 1, [(key("c", 3), Some(big(9_000)))]);
        refused(store.apply(&batch).unwrap_err(), "apply with long headers");
        assert!(t0.elapsed() < Duration::from_secs(30), "refused at once");
        // Two records that fit one by one, not in one record batch: sent in two.
        let two = [
            (key("c", 7), Some(big(6_000))),
            (key("c", 8), Some(big(6_000))),
        ];
        store.apply(&Batch::new("w", 1, two)).unwrap();

        let wal = tempfile::tempdir().unwrap();
        let mut cfg = CommitBufferConfig::new(wal.path().join("wal"));
        cfg.writer = "w".into();
        cfg.durability = Durability::Store;
        let open = |cfg: CommitBufferConfig| {
            CommitBuffer::open(Arc::clone(&store) as Arc<dyn OffsetStore>, cfg).unwrap()
        };
        let buffer = open(cfg.clone());
        refused(buffer.offer(key("c", 4), big(20_000)).unwrap_err(), "offer");
        buffer.offer(key("c", 5), pos(5)).unwrap();
        buffer
            .commit()
            .wait_timeout(Duration::from_secs(60))
            .unwrap();
        drop(buffer);
        // Nothing of the refused offer was logged: a reopen recovers nothing it cannot write.
        let buffer = open(cfg);
        buffer.offer(key("c", 6), pos(6)).unwrap();
        buffer
            .commit()
            .wait_timeout(Duration::from_secs(60))
            .unwrap();
        drop(buffer);
        let fresh = KafkaStore::open(&url).unwrap();
        for (i, want) in [
            (1, None),
            (2, Some(big(9_000))),
            (3, None),
            (4, None),
            (5, Some(pos(5))),
            (6, Some(pos(6))),
            (7, Some(big(6_000))),
            (8, Some(big(6_000))),
        ] {
            assert_eq!(fresh.get(&key("c", i)).unwrap(), want, "{mode} key {i}");
        }
    }
}

/// Sleeps `.0` once before a batch's commit: a stalled process.
#[derive(Debug)]
struct PauseBeforeCommit(Duration, std::sync::atomic::AtomicBool);

impl ApplyFault for PauseBeforeCommit {
    fn before_entry(&self, _: &Batch, _: usize) -> connect_offsets::Result<()> {
        Ok(())
    }
    fn before_commit(&self, _: &Batch) -> connect_offsets::Result<()> {
        if !self.1.swap(true, std::sync::atomic::Ordering::SeqCst) {
            std::thread::sleep(self.0);
        }
        Ok(())
    }
}

/// A transaction that outlives `transaction.timeout.ms` (the process stalled) is aborted by the
/// coordinator, which bumps the producer's epoch: the producer cannot tell that from another
/// producer's fence, so the writer stops, and the error says the transaction timed out and that
/// nothing of the batch was written (the coordinator checks every 10 s: the pause is 12 s).
#[test]
fn a_transaction_past_its_timeout_says_so() {
    let topic = TopicGuard::new("txn-timeout");
    let url = format!(
        "kafka://{}/{topic}?partitions=1&replication=1&timeout.ms=60000&transaction.timeout.ms=1000",
        bootstrap()
    );
    let pause = PauseBeforeCommit(Duration::from_secs(12), Default::default());
    let store = KafkaStore::open(&url).unwrap().with_fault(Arc::new(pause));
    let batch = Batch::new("w", 1, [(key("c", 1), Some(pos(1)))]);
    let e = store.apply(&batch).unwrap_err();
    let text = e.to_string();
    assert!(
        matches!(e, Error::Fenced(_))
            && text.contains("past transaction.timeout.ms = 1000")
            && text.contains("nothing of the batch was written"),
        "{text}"
    );
    drop(store);
    let fresh = KafkaStore::open(&url).unwrap();
    assert_eq!(fresh.get(&key("c", 1)).unwrap(), None);
    assert_eq!(fresh.applied_seq("w").unwrap(), 0);
}

/// A transactional writer that died mid-write (here: never commits, as after a SIGKILL).
fn dead_transaction(topic: &str, timeout_ms: u32) {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let p: BaseProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("transactional.id", format!("dead-{topic}"))
        .set("transaction.timeout.ms", timeout_ms.to_string())
        .create()
        .expect("producer");
    p.init_transactions(Duration::from_secs(60)).expect("init");
    p.begin_transaction().expect("begin");
    p.send(
        BaseRecord::<[u8], [u8]>::to(topic)
            .partition(0)
            .key(&key("dead", 1).connect_key()[..])
            .payload(&br#"{"position":666}"#[..]),
    )
    .map_err(|(e, _)| e)
    .expect("send");
    p.flush(Duration::from_secs(30)).expect("flush");
    // Neither committed nor aborted: the brokers abort it after its timeout.
    std::mem::forget(p);
}

#[test]
fn an_open_transaction_is_waited_for_not_read_past() {
    let topic = TopicGuard::new("open-txn");
    let writer = KafkaStore::open(&url(&topic, 1, "")).expect("open");
    let k = key("conn", 1);
    writer.set(k.clone(), pos(1)).expect("set");
    dead_transaction(&topic, 2_000);
    // Acknowledged, but behind the open transaction for a read_committed reader.
    writer.set(k.clone(), pos(2)).expect("set after");
    let t = Instant::now();
    let reader = KafkaStore::open(&url(&topic, 1, "")).expect("open waits, then reads");
    assert_eq!(reader.get(&k).unwrap(), Some(pos(2)), "read past nothing");
    assert_eq!(reader.get(&key("dead", 1)).unwrap(), None, "aborted");
    assert!(
        t.elapsed() >= Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
    eprintln!("waited {:?} for the dead transaction", t.elapsed());

    // One that stays open past the patience: refused, naming it, not read as an older state.
    let stuck = TopicGuard::new("open-txn-stuck");
    KafkaStore::open(&url(&stuck, 1, ""))
        .expect("create")
        .set(k.clone(), pos(1))
        .expect("set");
    dead_transaction(&stuck, 120_000);
    let impatient = format!(
        "kafka://{}/{}?partitions=1&replication=1&timeout.ms=2000&transaction.timeout.ms=1000",
        bootstrap(),
        &*stuck
    );
    let e = match KafkaStore::open(&impatient) {
        Ok(_) => panic!("an open transaction read past"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("partition 0") && e.contains("holds a transaction open at offset"),
        "{e}"
    );
}
