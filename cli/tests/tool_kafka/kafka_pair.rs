//! `kafka://…/<connector topic>?fallback.topic=<worker topic>` (`KafkaPairStore`) on the real
//! broker: Connect's per-connector offsets topic read in front of the worker-wide one, writes to
//! the connector's topic, resets tombstoned in both (KAFKA-15018).
#![cfg(feature = "kafka")]

use crate::http_util;
use crate::kafka_util;

use std::sync::Arc;

use connect_offsets::conformance::ApplyFault;
use connect_offsets::conformance::{Harness, HistoryHarness};
use connect_offsets::conformance_tests;
use connect_offsets::open;
use connect_offsets::store::kafka::{KafkaPairStore, KafkaStore, KafkaStoreBuilder};
use connect_offsets::store::{OffsetStoreExt, StoreUrl};
use connect_offsets::{Batch, Offset, OffsetKey, OffsetStore, Partition};
use kafka_util::*;

/// The conformance suite over a pair: a fresh connector topic and worker topic per test, the
/// fault seam in the connector topic's store (where a batch commits).
struct PairHarness {
    primary: TopicGuard,
    global: TopicGuard,
    params: &'static str,
}

impl PairHarness {
    fn new(params: &'static str) -> Self {
        let global = TopicGuard::new("pair-conf-global");
        drop(KafkaStore::open(&url(&global, 3, "")).unwrap());
        PairHarness {
            primary: TopicGuard::new("pair-conf-primary"),
            global,
            params,
        }
    }
}

impl Harness for PairHarness {
    fn open(
        &mut self,
        fault: Option<Arc<dyn ApplyFault>>,
    ) -> connect_offsets::Result<Box<dyn OffsetStore>> {
        let params = self.params;
        let builder = |topic: &str| {
            KafkaStoreBuilder::from_url(&StoreUrl::parse(&url(topic, 3, params)).unwrap()).unwrap()
        };
        let primary = match fault {
            None => builder(&self.primary),
            Some(f) => builder(&self.primary).fault(f),
        };
        Ok(Box::new(KafkaPairStore::open(
            primary,
            builder(&self.global),
        )?))
    }
    fn reopen_keeps_data(&self) -> bool {
        true
    }
}

conformance_tests!(pair, || PairHarness::new(""));
conformance_tests!(pair_idempotent, || PairHarness::new(
    "&write.mode=idempotent"
));
// `kafka://…?fallback.topic=…&history=`: history's wrapper over the pair.
conformance_tests!(history_pair, || HistoryHarness(PairHarness::new("")));

fn key(connector: &str, file: &str) -> OffsetKey {
    OffsetKey::new(connector, Partition::new().with("filename", file))
}

fn pos(n: i64) -> Offset {
    Offset::new().with("position", n)
}

/// The pair URL: `primary` in front of `global`, with the test bounds.
fn pair_url(primary: &str, global: &str, extra: &str) -> String {
    url(primary, 3, &format!("&fallback.topic={global}{extra}"))
}

/// The worker-wide topic alone, as a worker without the connector's topic reads it.
fn global_alone(global: &str) -> KafkaStore {
    KafkaStore::open(&url(global, 5, "")).unwrap()
}

/// A worker-wide topic holding `entries`, written as Connect writes it (same records).
fn global_with(entries: &[(OffsetKey, Offset)]) -> TopicGuard {
    let global = TopicGuard::new("pair-global");
    let store = global_alone(&global);
    store
        .write(
            entries
                .iter()
                .map(|(k, o)| (k.clone(), Some(o.clone())))
                .collect(),
        )
        .unwrap();
    global
}

#[test]
fn offsets_only_in_the_global_topic_read_through_the_pair() {
    let (a, b) = (key("src", "/a"), key("src", "/b"));
    let global = global_with(&[(a.clone(), pos(1)), (b.clone(), pos(2))]);
    let primary = TopicGuard::new("pair-primary");
    let pair = open(&pair_url(&primary, &global, "")).unwrap();
    assert_eq!(pair.get(&a).unwrap(), Some(pos(1)));
    assert_eq!(
        pair.get_many(&[b.clone(), key("src", "/none")]).unwrap(),
        vec![Some(pos(2)), None]
    );
    assert_eq!(
        pair.partitions("src").unwrap(),
        vec![(a, pos(1)), (b, pos(2))]
    );
    assert_eq!(pair.namespaces().unwrap(), vec!["src".to_string()]);
    assert!(
        read_all(&primary, "read_committed").is_empty(),
        "reading wrote nothing"
    );
}

#[test]
fn a_primary_offset_shadows_the_global_one_and_set_writes_only_the_primary() {
    let (a, b) = (key("src", "/a"), key("src", "/b"));
    let global = global_with(&[(a.clone(), pos(1)), (b.clone(), pos(2))]);
    let primary = TopicGuard::new("pair-primary");
    let global_before = read_all(&global, "read_uncommitted");
    {
        let pair = open(&pair_url(&primary, &global, "")).unwrap();
        pair.set(a.clone(), pos(50)).unwrap();
        pair.set(key("other", "/c"), pos(7)).unwrap();
        assert_eq!(pair.get(&a).unwrap(), Some(pos(50)));
        assert_eq!(
            pair.partitions("src").unwrap(),
            vec![(a.clone(), pos(50)), (b.clone(), pos(2))]
        );
        assert_eq!(pair.namespaces().unwrap(), vec!["other", "src"]);
    }
    assert_eq!(
        read_all(&global, "read_uncommitted").len(),
        global_before.len(),
        "nothing written to the global topic"
    );
    assert_eq!(global_alone(&global).get(&a).unwrap(), Some(pos(1)));
    let primary_alone = KafkaStore::open(&url(&primary, 3, "")).unwrap();
    assert_eq!(primary_alone.get(&a).unwrap(), Some(pos(50)));
    assert_eq!(primary_alone.get(&b).unwrap(), None);
    // Reopened, the pair reads the same merged view.
    let pair = open(&pair_url(&primary, &global, "")).unwrap();
    assert_eq!(pair.get(&a).unwrap(), Some(pos(50)));
    assert_eq!(pair.get(&b).unwrap(), Some(pos(2)));
}

/// KAFKA-15018: a reset through the pair must tombstone the global topic too, or the global
/// offset shows through the primary's tombstone (to Connect and to a reopened pair alike).
#[test]
fn a_reset_through_the_pair_tombstones_both_topics() {
    let (a, b, c) = (key("src", "/a"), key("src", "/b"), key("src", "/c"));
    let global = global_with(&[
        (a.clone(), pos(1)),
        (b.clone(), pos(2)),
        (c.clone(), pos(3)),
    ]);
    let primary = TopicGuard::new("pair-primary");
    {
        let pair = open(&pair_url(&primary, &global, "")).unwrap();
        pair.set(a.clone(), pos(50)).unwrap();
        // One partition in both topics, one in the global topic only.
        pair.reset(a.clone()).unwrap();
        pair.reset(b.clone()).unwrap();
        assert_eq!(pair.get(&a).unwrap(), None);
        assert_eq!(pair.get(&b).unwrap(), None);
        assert_eq!(pair.partitions("src").unwrap(), vec![(c.clone(), pos(3))]);
    }
    let alone = global_alone(&global);
    assert_eq!(alone.get(&a).unwrap(), None, "global topic still holds /a");
    assert_eq!(alone.get(&b).unwrap(), None, "global topic still holds /b");
    assert_eq!(alone.get(&c).unwrap(), Some(pos(3)));
    let pair = open(&pair_url(&primary, &global, "")).unwrap();
    assert_eq!(pair.get(&a).unwrap(), None, "reopened pair shows /a again");
    assert_eq!(pair.partitions("src").unwrap(), vec![(c.clone(), pos(3))]);

    // Every partition at once, as `reset --all` does.
    pair.set(b.clone(), pos(9)).unwrap();
    assert_eq!(pair.reset_namespace("src").unwrap(), 2);
    drop(pair);
    assert!(global_alone(&global).partitions("src").unwrap().is_empty());
    let pair = open(&pair_url(&primary, &global, "")).unwrap();
    assert!(pair.partitions("src").unwrap().is_empty());
    assert!(pair.namespaces().unwrap().is_empty());
}

/// Sequence markers live in the primary: the fallback gets unsequenced tombstones only, and a
/// batch the primary has applied is skipped whole (the global topic untouched by the replay).
#[test]
fn applied_seq_is_the_primarys_and_a_replay_changes_nothing() {
    let (a, b) = (key("src", "/a"), key("src", "/b"));
    let global = global_with(&[(a.clone(), pos(1))]);
    let primary = TopicGuard::new("pair-primary");
    let pair = open(&pair_url(&primary, &global, "")).unwrap();
    let batch = Batch::new(
        "task-0",
        1,
        vec![(a.clone(), None), (b.clone(), Some(pos(2)))],
    );
    pair.apply(&batch).unwrap();
    assert_eq!(pair.applied_seq("task-0").unwrap(), 1);
    assert_eq!(pair.writers().unwrap(), vec![("task-0".to_string(), 1)]);
    assert!(!pair.capabilities().atomic, "two topics, two writes");
    let global_records = read_all(&global, "read_uncommitted").len();
    pair.apply(&batch).unwrap();
    assert_eq!(read_all(&global, "read_uncommitted").len(), global_records);
    let alone = global_alone(&global);
    assert_eq!(
        alone.applied_seq("task-0").unwrap(),
        0,
        "no marker in the global topic"
    );
    assert_eq!(alone.get(&a).unwrap(), None);
    assert_eq!(alone.get(&b).unwrap(), None);
    assert_eq!(pair.get(&b).unwrap(), Some(pos(2)));
}

#[test]
fn bad_pairs_are_refused_by_name() {
    let primary = unique_topic("pair-primary");
    let missing = unique_topic("pair-missing");
    let e = open(&pair_url(&primary, &missing, ""))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("topic `{missing}` does not exist")),
        "{e}"
    );
    let e = open(&pair_url(&primary, &primary, ""))
        .unwrap_err()
        .to_string();
    assert!(e.contains("a pair needs two topics"), "{e}");
    let e = KafkaStore::open(&pair_url(&primary, &missing, ""))
        .unwrap_err()
        .to_string();
    assert!(e.contains("KafkaPairStore"), "{e}");
}

#[test]
fn the_cli_works_on_the_pair() {
    let a = key("src", "/a");
    let global = global_with(&[(a.clone(), pos(1)), (key("src", "/b"), pos(2))]);
    let primary = TopicGuard::new("pair-primary");
    let store = pair_url(&primary, &global, "");
    let part_a = r#"{"filename":"/a"}"#;
    let part_b = r#"{"filename":"/b"}"#;
    let get = |p: &str| {
        cli(&[
            "get",
            "--store",
            &store,
            "--connector",
            "src",
            "--partition",
            p,
        ])
    };
    assert_eq!(
        get(part_a).trim(),
        r#"{"partition":{"filename":"/a"},"offset":{"position":1}}"#
    );
    cli(&[
        "set",
        "--store",
        &store,
        "--connector",
        "src",
        "--partition",
        part_a,
        "--offset",
        r#"{"position":77}"#,
    ]);
    assert_eq!(
        cli(&["list", "--store", &store, "--connector", "src"]).trim(),
        r#"{"offsets":[{"partition":{"filename":"/a"},"offset":{"position":77}},{"partition":{"filename":"/b"},"offset":{"position":2}}]}"#
    );
    assert_eq!(global_alone(&global).get(&a).unwrap(), Some(pos(1)));
    cli(&[
        "reset",
        "--store",
        &store,
        "--connector",
        "src",
        "--partition",
        part_b,
    ]);
    assert_eq!(
        cli(&["list", "--store", &store, "--connector", "src"]).trim(),
        r#"{"offsets":[{"partition":{"filename":"/a"},"offset":{"position":77}}]}"#
    );
    cli(&["reset", "--store", &store, "--connector", "src", "--all"]);
    assert_eq!(
        cli(&["list", "--store", &store, "--connector", "src"]).trim(),
        r#"{"offsets":[]}"#
    );
    assert!(global_alone(&global).partitions("src").unwrap().is_empty());
    assert_eq!(
        cli(&["export", "--store", &store]).trim(),
        cli(&["export", "--store", &url(&primary, 3, "")]).trim()
    );
}

/// A reset whose tombstone cannot reach the global topic fails before the primary is written:
/// nothing of the batch shows, and the retry goes through.
#[test]
fn a_failed_global_write_leaves_the_primary_untouched() {
    use connect_offsets::internal::store::fault::FailMidway;

    let (a, c) = (key("src", "/a"), key("src", "/c"));
    let global = global_with(&[(a.clone(), pos(1))]);
    let primary = TopicGuard::new("pair-primary");
    let builder = |topic: &str| {
        KafkaStoreBuilder::from_url(&StoreUrl::parse(&url(topic, 3, "")).unwrap()).unwrap()
    };
    let fault = Arc::new(FailMidway::new(0));
    let pair =
        KafkaPairStore::open(builder(&primary), builder(&global).fault(fault.clone())).unwrap();
    let entries = vec![(a.clone(), None), (c.clone(), Some(pos(5)))];
    assert!(pair.write(entries.clone()).is_err());
    assert!(fault.fired());
    assert_eq!(pair.get(&a).unwrap(), Some(pos(1)));
    assert_eq!(pair.get(&c).unwrap(), None);
    assert!(
        read_all(&primary, "read_uncommitted").is_empty(),
        "the primary was written"
    );
    pair.write(entries).unwrap();
    assert_eq!(pair.get(&a).unwrap(), None);
    assert_eq!(pair.get(&c).unwrap(), Some(pos(5)));
    assert_eq!(global_alone(&global).get(&a).unwrap(), None);
}

/// A commit buffer over the pair: its seq is recorded in the primary, its resets reach both.
#[test]
fn a_commit_buffer_commits_through_the_pair() {
    use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig};

    let (a, b) = (key("src", "/a"), key("src", "/b"));
    let global = global_with(&[(a.clone(), pos(1)), (b.clone(), pos(2))]);
    let primary = TopicGuard::new("pair-primary");
    let dir = tempfile::tempdir().unwrap();
    let mut config = CommitBufferConfig::new(dir.path().join("wal"));
    config.writer = "task-0".into();
    let store: Arc<dyn OffsetStore> = Arc::from(open(&pair_url(&primary, &global, "")).unwrap());
    let buf = CommitBuffer::open(store.clone(), config).unwrap();
    buf.offer(a.clone(), pos(10)).unwrap();
    buf.offer_reset(b.clone()).unwrap();
    let seq = buf.commit().wait().unwrap();
    buf.close().unwrap();
    assert_eq!(store.applied_seq("task-0").unwrap(), seq);
    assert_eq!(store.get(&a).unwrap(), Some(pos(10)));
    assert_eq!(store.get(&b).unwrap(), None);
    drop(store);
    let alone = global_alone(&global);
    assert_eq!(
        alone.get(&a).unwrap(),
        Some(pos(1)),
        "offsets stay in the primary"
    );
    assert_eq!(
        alone.get(&b).unwrap(),
        None,
        "resets reach the global topic"
    );
    assert_eq!(alone.applied_seq("task-0").unwrap(), 0);
}

/// `serve` over the pair: Connect's REST shapes on the merged view, `DELETE` resetting both topics.
#[test]
fn serve_answers_over_the_pair() {
    use http_util::{Serve, request as call};

    let (a, b) = (key("src", "/a"), key("src", "/b"));
    let global = global_with(&[(a.clone(), pos(1)), (b.clone(), pos(2))]);
    let primary = TopicGuard::new("pair-primary");
    let store = pair_url(&primary, &global, "");
    let s = Serve::start(&["--store", &store]);
    let o = format!("{}/connectors/src/offsets", s.base);
    assert_eq!(
        call("GET", &o, None),
        (
            200,
            r#"{"offsets":[{"partition":{"filename":"/a"},"offset":{"position":1}},{"partition":{"filename":"/b"},"offset":{"position":2}}]}"#.into()
        )
    );
    let patch = r#"{"offsets":[{"partition":{"filename":"/a"},"offset":{"position":5}},{"partition":{"filename":"/b"},"offset":null}]}"#;
    let (st, msg) = call("PATCH", &o, Some(patch));
    assert_eq!(st, 200, "{msg}");
    assert_eq!(
        call("GET", &o, None),
        (
            200,
            r#"{"offsets":[{"partition":{"filename":"/a"},"offset":{"position":5}}]}"#.into()
        )
    );
    let alone = global_alone(&global);
    assert_eq!(alone.get(&a).unwrap(), Some(pos(1)));
    assert_eq!(alone.get(&b).unwrap(), None);
    drop(alone);
    let (st, msg) = call("DELETE", &o, None);
    assert_eq!(st, 200, "{msg}");
    assert_eq!(call("GET", &o, None), (200, r#"{"offsets":[]}"#.into()));
    assert!(global_alone(&global).partitions("src").unwrap().is_empty());
}

/// `snapshot.dir` over the pair: one snapshot per topic, both warm on the next open.
#[test]
fn both_topics_start_warm_from_their_snapshots() {
    use connect_offsets::store::kafka::Start;

    let (a, b) = (key("src", "/a"), key("src", "/b"));
    let global = global_with(&[(a.clone(), pos(1)), (b.clone(), pos(2))]);
    let primary = TopicGuard::new("pair-primary");
    let dir = tempfile::tempdir().unwrap();
    let store = pair_url(
        &primary,
        &global,
        &format!("&snapshot.dir={}", dir.path().display()),
    );
    let open_pair = || KafkaPairStore::open_url(&StoreUrl::parse(&store).unwrap()).unwrap();
    let pair = open_pair();
    assert_eq!(pair.primary().loaded().start, Start::Cold);
    pair.set(a.clone(), pos(10)).unwrap();
    pair.reset(b.clone()).unwrap();
    drop(pair);
    for topic in [&*primary, &*global] {
        assert!(
            dir.path().join(format!("{topic}.snapshot")).exists(),
            "{topic}"
        );
    }
    let pair = open_pair();
    assert_eq!(pair.primary().loaded().start, Start::Warm);
    assert_eq!(pair.fallback().loaded().start, Start::Warm);
    assert_eq!(pair.get(&a).unwrap(), Some(pos(10)));
    assert_eq!(pair.get(&b).unwrap(), None);
}

/// The same topic twice through the builders is refused before anything is opened.
#[test]
fn the_same_topic_twice_is_refused_through_the_builders() {
    let topic = unique_topic("pair-same");
    let builder =
        || KafkaStoreBuilder::from_url(&StoreUrl::parse(&url(&topic, 3, "")).unwrap()).unwrap();
    let e = KafkaPairStore::open(builder(), builder())
        .unwrap_err()
        .to_string();
    assert!(e.contains(&format!("both `{topic}`")), "{e}");
}

/// A source task on a pair commits its records' offsets to the connector's topic, in its
/// transaction; the worker topic is only read.
#[test]
fn a_task_on_a_pair_commits_to_the_connectors_topic() {
    let global = global_with(&[(key("files", "old.log"), pos(7))]);
    let primary = TopicGuard::new("pair-task");
    let data = TopicGuard::new("pair-task-data");
    drop(KafkaStore::open(&url(&data, 1, "")).unwrap());
    let pair = KafkaPairStore::open_url(
        &StoreUrl::parse(&pair_url(&primary, &global, "&exactly.once.id=pair-task-0")).unwrap(),
    )
    .unwrap();
    assert_eq!(pair.primary().task_id().unwrap().as_str(), "pair-task-0");
    assert!(
        pair.fallback().task_id().is_none(),
        "the task is the connector topic's"
    );
    let mut task = pair.task_producer().unwrap();
    task.send(&data, Some(b"new.log"), Some(b"line")).unwrap();
    task.commit([(key("files", "new.log"), Some(pos(5)))])
        .unwrap();
    assert_eq!(pair.get(&key("files", "new.log")).unwrap(), Some(pos(5)));
    assert_eq!(pair.get(&key("files", "old.log")).unwrap(), Some(pos(7)));
    let in_primary = read_all(&primary, "read_committed");
    assert_eq!(in_primary.len(), 1, "{in_primary:?}");
    assert_eq!(
        global_alone(&global).get(&key("files", "new.log")).unwrap(),
        None,
        "the worker topic is not written"
    );
    // A data record and its offset are visible together.
    assert_eq!(read_all(&data, "read_committed").len(), 1);

    // A reset in the task's transaction tombstones the worker topic first (KAFKA-15018): the
    // worker topic's older offset does not show through the pair again.
    task.commit([(key("files", "old.log"), None)]).unwrap();
    assert_eq!(pair.get(&key("files", "old.log")).unwrap(), None);
    assert_eq!(
        global_alone(&global).get(&key("files", "old.log")).unwrap(),
        None,
        "the worker topic still holds the reset partition"
    );
    drop(task);
    drop(pair);
    let reopened =
        KafkaPairStore::open_url(&StoreUrl::parse(&pair_url(&primary, &global, "")).unwrap())
            .unwrap();
    assert_eq!(reopened.get(&key("files", "old.log")).unwrap(), None);
    assert_eq!(
        reopened.get(&key("files", "new.log")).unwrap(),
        Some(pos(5))
    );
}

/// A task's commit whose reset cannot reach the worker topic fails whole: the records it sent in
/// the open transaction are aborted, not committed by the next commit.
#[test]
fn a_task_commit_whose_worker_topic_tombstone_fails_writes_nothing() {
    use connect_offsets::internal::store::fault::FailMidway;

    let global = global_with(&[(key("files", "old.log"), pos(7))]);
    let primary = TopicGuard::new("pair-task-fail");
    let data = TopicGuard::new("pair-task-fail-data");
    drop(KafkaStore::open(&url(&data, 1, "")).unwrap());
    let builder = |u: &str| KafkaStoreBuilder::from_url(&StoreUrl::parse(u).unwrap()).unwrap();
    let fault = Arc::new(FailMidway::new(0));
    let pair = KafkaPairStore::open(
        builder(&url(&primary, 3, "&exactly.once.id=pair-task-fail-0")),
        builder(&url(&global, 5, "")).fault(fault.clone()),
    )
    .unwrap();
    let mut task = pair.task_producer().unwrap();
    task.send(&data, Some(b"a"), Some(b"lost line")).unwrap();
    assert!(task.commit([(key("files", "old.log"), None)]).is_err());
    assert!(fault.fired());
    task.send(&data, Some(b"a"), Some(b"kept line")).unwrap();
    task.commit([(key("files", "new.log"), Some(pos(1)))])
        .unwrap();
    let lines: Vec<Vec<u8>> = read_all(&data, "read_committed")
        .into_iter()
        .filter_map(|r| r.value)
        .collect();
    assert_eq!(
        lines,
        vec![b"kept line".to_vec()],
        "the failed commit's record was written"
    );
    assert_eq!(pair.get(&key("files", "old.log")).unwrap(), Some(pos(7)));
}
