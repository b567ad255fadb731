//! Reset policies in the loaders: what the Kafka store does with offsets records that do not decode
//! (`reset.policy`, `--reset-policy`, against the real broker: `scripts/kafka start`), and what a
//! commit buffer's recovery does with corrupt log bytes (`offsets.reset.policy`).
#![cfg(feature = "kafka")]

use crate::kafka_util;

use std::process::{Command, Output};
use std::sync::Arc;

use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig};
use connect_offsets::policy::{NoBounds, ResetPolicy, Unusable};
use connect_offsets::store::MemoryStore;
use connect_offsets::store::OffsetStore;
use connect_offsets::store::kafka::KafkaStore;
use connect_offsets::{Error, Offset, OffsetKey, Partition};
use kafka_util::*;

fn key(ns: &str, file: &str) -> OffsetKey {
    OffsetKey::new(ns, Partition::new().with("file", file))
}

fn pos(n: i64) -> Offset {
    Offset::new().with("position", n)
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_connect-offsets"))
        .args(args)
        .env_remove("CONNECT_OFFSETS_STORE")
        .output()
        .expect("run connect-offsets")
}

/// A topic where connector `c`'s partition `a` was at 1, then got a value that does not decode;
/// `c`'s `b` got a bad value and then a good one (3); connector `d` has a good offset (4) and a
/// bad one after it in `e`; and one record's key does not decode at all.
fn poisoned_topic(name: &str) -> TopicGuard {
    let topic = TopicGuard::new(name);
    drop(KafkaStore::open(&url(&topic, 3, "")).expect("create the topic"));
    let (a, b, d, e) = (
        key("c", "a").connect_key(),
        key("c", "b").connect_key(),
        key("d", "d").connect_key(),
        key("d", "e").connect_key(),
    );
    produce_plain(
        &topic,
        &[
            (None, Some(&a), Some(br#"{"position":1}"#)),
            (None, Some(&a), Some(br#"{"position":{"nested":2}}"#)),
            (None, Some(&b), Some(b"[1,2]")),
            (None, Some(&b), Some(br#"{"position":3}"#)),
            (None, Some(&d), Some(br#"{"position":4}"#)),
            (None, Some(&e), Some(br#"{"position":"#)),
            (None, Some(b"not a key"), Some(br#"{"position":5}"#)),
        ],
    );
    topic
}

#[test]
fn the_kafka_loader_applies_each_connectors_policy() {
    let topic = poisoned_topic("policy");
    let dir = tempfile::tempdir().unwrap();
    let letters = dir.path().join("dead.jsonl");
    let open = |extra: &str| {
        KafkaStore::open(&url(
            &topic,
            3,
            &format!("&dead.letter.file={}{extra}", letters.display()),
        ))
    };

    // No policy: as Connect's reader, no offset for `a`, whose latest record is bad (the value
    // before it is older than what the connector last committed).
    let store = open("").expect("open without a policy");
    assert_eq!(store.get(&key("c", "a")).unwrap(), None);
    assert_eq!(store.get(&key("c", "b")).unwrap(), Some(pos(3)));
    assert_eq!(store.dead_letters(), 4);
    drop(store);

    // skip: the partition whose latest record is bad has no offset; a bad record followed by a
    // good one costs nothing; other connectors are untouched.
    let store = open("&reset.policy=skip").expect("open with skip");
    assert_eq!(store.get(&key("c", "a")).unwrap(), None);
    assert_eq!(store.get(&key("c", "b")).unwrap(), Some(pos(3)));
    assert_eq!(store.get(&key("d", "d")).unwrap(), Some(pos(4)));
    assert_eq!(store.get(&key("d", "e")).unwrap(), None);
    assert_eq!(
        store.partitions("c").unwrap(),
        vec![(key("c", "b"), pos(3))]
    );
    drop(store);
    let text = std::fs::read_to_string(&letters).unwrap();
    assert_eq!(text.lines().count(), 4, "each bad record once: {text}");

    // fail for one connector: refused, naming the connector, the record and the dead-letter file.
    let err = open("&reset.policy=skip,d=fail").unwrap_err().to_string();
    for part in [
        "connector `d`",
        r#"{"file":"e"}"#,
        &format!("topic `{}`", topic.0),
        "offset",
        "reset policy fail",
        &letters.display().to_string(),
    ] {
        assert!(err.contains(part), "`{part}` missing from: {err}");
    }
    // A default of fail refuses the record whose key names no connector, even when every
    // connector's own policy is skip.
    let err = open("&reset.policy=fail,c=skip,d=skip")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("reset policy fail") && !err.contains("connector `"),
        "{err}"
    );
    // earliest/latest need the source's bounds, which only the connector knows.
    let err = open("&reset.policy=skip,c=earliest")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("connector `c`") && err.contains("needs the source's earliest position"),
        "{err}"
    );
    // Contradictions and typos are refused before anything is read.
    let err = open("&reset.policy=skip&strict=true")
        .unwrap_err()
        .to_string();
    assert!(err.contains("strict") && err.contains("skip"), "{err}");
    let err = open("&reset.policy=sometimes").unwrap_err().to_string();
    assert!(
        err.contains("reset.policy") && err.contains("unknown reset policy `sometimes`"),
        "{err}"
    );
}

#[test]
fn the_cli_and_serve_take_the_policy_as_a_flag() {
    let topic = poisoned_topic("policy-cli");
    let dir = tempfile::tempdir().unwrap();
    let letters = dir.path().join("dl.jsonl");
    let store = url(&topic, 3, "");
    let letters_arg = letters.display().to_string();

    let out = run(&[
        "list",
        "--store",
        &store,
        "--connector",
        "c",
        "--reset-policy",
        "fail",
        "--dead-letter",
        &letters_arg,
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("reset policy fail") && stderr.contains(&letters_arg),
        "{stderr}"
    );
    assert!(
        std::fs::read_to_string(&letters)
            .unwrap()
            .contains("\"source\":\"kafka\""),
        "the refused record is in the dead-letter file the error names"
    );

    let listed = cli(&[
        "list",
        "--store",
        &store,
        "--connector",
        "c",
        "--reset-policy",
        "skip",
    ]);
    assert_eq!(
        listed.trim(),
        r#"{"offsets":[{"partition":{"file":"b"},"offset":{"position":3}}]}"#
    );

    // A store that loads nothing others wrote says so instead of ignoring the flag.
    let rocks = format!("rocksdb://{}", dir.path().join("db").display());
    let out = run(&[
        "list",
        "--store",
        &rocks,
        "--connector",
        "c",
        "--reset-policy",
        "skip",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("reset.policy") && stderr.contains("kafka://"),
        "{stderr}"
    );

    // serve: the policy reaches the store it serves (here: refused at start, naming the record).
    let out = run(&[
        "serve",
        "--store",
        &store,
        "--listen",
        "127.0.0.1:0",
        "--reset-policy",
        "fail",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("reset policy fail"), "{stderr}");
}

/// The log's policy comes from `offsets.reset.policy`'s default; per-connector choices are kept
/// for the worker's lookups; a default that cannot apply to log bytes is refused.
#[test]
fn the_log_takes_its_policy_from_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = CommitBufferConfig::new(dir.path());
    config
        .set("offsets.reset.policy", "skip,orders=earliest")
        .unwrap();
    assert_eq!(
        config.recovery,
        connect_offsets::buffer::RecoveryPolicy::Skip
    );
    assert_eq!(
        config.reset_policies.policy_for("orders"),
        ResetPolicy::Earliest
    );
    // A worker's lookup under skip keeps what it drops in the log's dead-letter file.
    let buffer = CommitBuffer::open(Arc::new(MemoryStore::new()), config.clone()).unwrap();
    buffer.offer(key("c", "a"), pos(-1)).unwrap();
    buffer.commit().wait().unwrap();
    let check = |o: &Offset| match o.get("position") {
        Some(connect_offsets::Value::Int(n)) if *n >= 0 => Ok(()),
        _ => Err((Unusable::Invalid, "a negative position".to_string())),
    };
    let got = config
        .reset_policies
        .load(&buffer, &key("c", "a"), check, &NoBounds)
        .unwrap();
    assert_eq!(got, None, "skip starts the partition afresh");
    let letters = std::fs::read_to_string(dir.path().join("dead-letter.jsonl")).unwrap();
    assert!(letters.contains("a negative position"), "{letters}");
    drop(buffer);
    let err = config
        .set("offsets.reset.policy", "latest")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("offsets.reset.policy") && err.contains("fail or skip, not latest"),
        "{err}"
    );

    // Under fail, the refusal names the dead-letter file skip would use.
    let dir = tempfile::tempdir().unwrap();
    let mut config = CommitBufferConfig::new(dir.path());
    config.set("offsets.reset.policy", "fail").unwrap();
    let buffer = CommitBuffer::open(Arc::new(MemoryStore::new()), config.clone()).unwrap();
    buffer.offer(key("c", "a"), pos(1)).unwrap();
    buffer.commit().wait().unwrap();
    buffer.offer(key("c", "a"), pos(2)).unwrap();
    buffer.commit().wait().unwrap();
    drop(buffer);
    let segment = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .max()
        .expect("a log segment");
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes[12] ^= 0x40;
    std::fs::write(&segment, &bytes).unwrap();
    match CommitBuffer::open(Arc::new(MemoryStore::new()), config) {
        Err(Error::Corrupted { reason, .. }) => assert!(
            reason.contains("recovery policy fail")
                && reason.contains(&dir.path().join("dead-letter.jsonl").display().to_string()),
            "{reason}"
        ),
        other => panic!("expected a corruption error, got {other:?}"),
    }
}
