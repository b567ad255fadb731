//! The warm start of `KafkaStore` (`snapshot.dir`) against a real broker: a reopen reads only what
//! was written since its snapshot and answers exactly as a store that read the whole topic; every
//! reason a snapshot may not match the topic any more makes it read the whole topic instead.
#![cfg(feature = "kafka")]

use crate::kafka_util;

use std::path::{Path, PathBuf};
use std::time::Duration;

use connect_offsets::store::OffsetStore;
use connect_offsets::store::kafka::{Fallback, KafkaStore, Start};
use connect_offsets::{Batch, Offset, OffsetKey, OffsetStoreExt, Partition};
use kafka_util::*;
use rdkafka::ClientConfig;
use rdkafka::admin::{
    AdminClient, AdminOptions, AlterConfig, NewPartitions, NewTopic, ResourceSpecifier,
    TopicReplication,
};
use rdkafka::client::DefaultClientContext;

const PARTITIONS: u32 = 3;

fn pos(n: i64) -> Offset {
    Offset::new().with("position", n)
}

fn key(i: i64) -> OffsetKey {
    OffsetKey::new("src", Partition::new().with("file", i))
}

/// A key of two members, so another producer can spell it in the other order (another form).
fn pair() -> OffsetKey {
    OffsetKey::new("src", Partition::new().with("a", 1).with("b", 2))
}
const PAIR_REVERSED: &[u8] = br#"["src",{"b":2,"a":1}]"#;

fn with_dir(topic: &str, dir: &Path) -> String {
    url(
        topic,
        PARTITIONS,
        &format!("&snapshot.dir={}", dir.display()),
    )
}

fn open_warm(topic: &str, dir: &Path) -> KafkaStore {
    KafkaStore::open(&with_dir(topic, dir)).expect("open with a snapshot dir")
}

fn snapshot_file(dir: &Path, topic: &str) -> PathBuf {
    dir.join(format!("{topic}.snapshot"))
}

/// Every namespace's offsets, each with its key bytes; every writer's applied seq.
type Answers = (Vec<(String, Vec<u8>, Offset)>, Vec<(String, u64)>);

/// Everything a store answers: every namespace's offsets (the current form's key spelling
/// included) and every writer's applied seq.
fn answers(store: &KafkaStore) -> Answers {
    let mut all = Vec::new();
    for ns in store.namespaces().unwrap() {
        for (k, o) in store.partitions(&ns).unwrap() {
            all.push((ns.clone(), k.connect_key(), o));
        }
    }
    (all, store.writers().unwrap())
}

/// What a store without a snapshot answers for the same topic.
fn cold_answers(topic: &str) -> Answers {
    cold_answers_of(&url(topic, PARTITIONS, ""))
}

/// What a store without a snapshot opened at `url` answers.
fn cold_answers_of(url: &str) -> Answers {
    let cold = KafkaStore::open(url).unwrap();
    assert_eq!(cold.loaded().start, Start::Cold);
    answers(&cold)
}

/// Writes keys `0..n` at `position = base + i` as batch `seq` of writer `w`.
fn write(store: &KafkaStore, seq: u64, n: i64, base: i64) {
    let entries = (0..n).map(|i| (key(i), Some(pos(base + i))));
    store.apply(&Batch::new("w", seq, entries)).unwrap();
}

/// A topic with offsets, a store that wrote them and dropped (writing its snapshot), and the dir.
fn topic_with_snapshot(what: &str) -> (TopicGuard, tempfile::TempDir) {
    let topic = TopicGuard::new(what);
    let dir = tempfile::tempdir().unwrap();
    let store = open_warm(&topic, dir.path());
    assert_eq!(store.loaded().start, Start::Cold, "no snapshot yet");
    write(&store, 1, 50, 0);
    store.apply(&Batch::new("w", 2, [(key(3), None)])).unwrap();
    drop(store);
    assert!(
        snapshot_file(dir.path(), &topic).exists(),
        "written at drop"
    );
    (topic, dir)
}

/// Reopens with the snapshot, expects a full read for `why`, and the same answers as a cold open.
fn assert_falls_back(topic: &str, dir: &Path, why: Fallback) {
    let store = open_warm(topic, dir);
    let loaded = store.loaded();
    assert_eq!(loaded.start, Start::Fallback(why), "{loaded:?}");
    assert!(loaded.records > 0, "the whole topic was read: {loaded:?}");
    assert_eq!(answers(&store), cold_answers(topic));
}

/// Rewrites the snapshot's body with `edit` and seals it again (length and checksum), as a
/// snapshot of something else would be.
fn reseal(path: &Path, edit: impl FnOnce(&mut Vec<u8>)) {
    let file = std::fs::read(path).unwrap();
    let mut body = file[24..].to_vec();
    edit(&mut body);
    let mut out = file[..12].to_vec();
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    out.extend_from_slice(&body);
    std::fs::write(path, out).unwrap();
}

fn admin() -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .create()
        .expect("admin client")
}

fn set_topic_config(topic: &str, configs: &[(&str, &str)]) {
    let mut c = AlterConfig::new(ResourceSpecifier::Topic(topic));
    for (k, v) in configs {
        c = c.set(k, v);
    }
    for r in block_on(admin().alter_configs([&c], &AdminOptions::new())).unwrap() {
        r.unwrap_or_else(|(_, e)| panic!("alter configs of {topic}: {e}"));
    }
}

/// The happy path: a reopen reads only what others wrote since (updates, a reset, another
/// spelling of a key, a tombstone of one of its forms) and answers as a full read does.
#[test]
fn warm_reopen_reads_only_what_was_written_since() {
    let topic = TopicGuard::new("snap-warm");
    let dir = tempfile::tempdir().unwrap();
    let store = open_warm(&topic, dir.path());
    write(&store, 1, 100, 0);
    store
        .apply(&Batch::new("w", 2, [(pair(), Some(pos(7)))]))
        .unwrap();
    // Another producer's spelling of `pair`, newer: two live forms go into the snapshot.
    produce_plain(
        &topic,
        &[(Some(0), Some(PAIR_REVERSED), Some(br#"{"position":8}"#))],
    );
    store.refresh().unwrap();
    drop(store);

    let again = open_warm(&topic, dir.path());
    assert_eq!(
        (again.loaded().start, again.loaded().records),
        (Start::Warm, 0),
        "nothing new to read"
    );
    assert_eq!(answers(&again), cold_answers(&topic));
    drop(again);

    // Another writer updates 5 keys and resets one (5 + 1 records and its marker), and the
    // newer form of `pair` is tombstoned (1 record): 8 records.
    let other = KafkaStore::open(&url(&topic, PARTITIONS, "")).unwrap();
    let mut entries: Vec<_> = (0..5).map(|i| (key(i), Some(pos(1000 + i)))).collect();
    entries.push((key(50), None));
    other.apply(&Batch::new("other", 1, entries)).unwrap();
    drop(other);
    produce_plain(&topic, &[(Some(0), Some(PAIR_REVERSED), None)]);

    let warm = open_warm(&topic, dir.path());
    let loaded = warm.loaded();
    assert_eq!(
        (loaded.start, loaded.records),
        (Start::Warm, 8),
        "{loaded:?}"
    );
    assert_eq!(warm.get(&key(2)).unwrap(), Some(pos(1002)));
    assert_eq!(warm.get(&key(50)).unwrap(), None);
    assert_eq!(
        warm.get(&pair()).unwrap(),
        Some(pos(7)),
        "the older form again"
    );
    assert_eq!(warm.applied_seq("other").unwrap(), 1);
    assert_eq!(answers(&warm), cold_answers(&topic));
    // Its own writes after a warm start go into the next snapshot.
    write(&warm, 3, 10, 5000);
    drop(warm);
    let last = open_warm(&topic, dir.path());
    assert_eq!(last.loaded().start, Start::Warm);
    // The drop's catch-up reads them back (0 left) once the broker has written the commit's
    // transaction markers, which it does after the commit returns; else all 10 and the marker.
    let records = last.loaded().records;
    assert!(records == 0 || records == 11, "{records} records read");
    assert_eq!(last.get(&key(9)).unwrap(), Some(pos(5009)));
    assert_eq!(answers(&last), cold_answers(&topic));
}

#[test]
fn a_corrupt_snapshot_is_read_around() {
    let (topic, dir) = topic_with_snapshot("snap-corrupt");
    let path = snapshot_file(dir.path(), &topic);
    type Damage = fn(&mut Vec<u8>);
    let damages: [(&str, Damage); 4] = [
        ("a flipped byte", |f| {
            let at = f.len() / 2;
            f[at] ^= 0x40
        }),
        ("truncated", |f| f.truncate(f.len() - 10)),
        ("garbage", |f| {
            *f = b"not a snapshot at all, just text".repeat(3)
        }),
        ("another version", |f| f[8] = 99),
    ];
    for (what, damage) in damages {
        let mut file = std::fs::read(&path).unwrap();
        damage(&mut file);
        std::fs::write(&path, file).unwrap();
        eprintln!("{what}");
        // Each reopen writes a good snapshot again at drop.
        assert_falls_back(&topic, dir.path(), Fallback::Corrupt);
    }
    assert_eq!(open_warm(&topic, dir.path()).loaded().start, Start::Warm);
}

#[test]
fn a_snapshot_of_another_cluster_is_not_used() {
    let (topic, dir) = topic_with_snapshot("snap-cluster");
    reseal(&snapshot_file(dir.path(), &topic), |body| {
        // The cluster id is the body's first field.
        let len = u32::from_le_bytes(body[..4].try_into().unwrap()) as usize;
        let other = b"another-cluster-id";
        body.splice(
            ..4 + len,
            (other.len() as u32).to_le_bytes().into_iter().chain(*other),
        );
    });
    assert_falls_back(&topic, dir.path(), Fallback::OtherCluster);
}

#[test]
fn a_snapshot_of_another_topic_is_not_used() {
    let (a, dir) = topic_with_snapshot("snap-topic-a");
    let b = TopicGuard::new("snap-topic-b");
    let store = open_warm(&b, dir.path());
    write(&store, 1, 10, 900);
    drop(store);
    std::fs::copy(snapshot_file(dir.path(), &a), snapshot_file(dir.path(), &b)).unwrap();
    assert_falls_back(&b, dir.path(), Fallback::OtherTopic);
}

#[test]
fn a_topic_with_more_partitions_is_read_whole() {
    let (topic, dir) = topic_with_snapshot("snap-partitions");
    let more = NewPartitions::new(&topic, PARTITIONS as usize + 1);
    for r in block_on(admin().create_partitions([&more], &AdminOptions::new())).unwrap() {
        r.unwrap_or_else(|(_, e)| panic!("add a partition: {e}"));
    }
    std::thread::sleep(Duration::from_secs(1));
    assert_falls_back(&topic, dir.path(), Fallback::PartitionCount);
}

/// Deleted and re-created under the same name, with as many partitions and more records than the
/// snapshot read: only the topic id tells the two apart.
#[test]
fn a_recreated_topic_is_read_whole() {
    let (topic, dir) = topic_with_snapshot("snap-recreated");
    delete_topics(&[&topic]);
    let created = NewTopic::new(&topic, PARTITIONS as i32, TopicReplication::Fixed(1))
        .set("cleanup.policy", "compact");
    let mut tries = 0;
    loop {
        let res = block_on(admin().create_topics([&created], &AdminOptions::new())).unwrap();
        match res.into_iter().next().unwrap() {
            Ok(_) => break,
            Err((_, e)) if tries < 100 => {
                tries += 1;
                eprintln!("re-create: {e}");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err((_, e)) => panic!("re-create {topic}: {e}"),
        }
    }
    let store = KafkaStore::open(&url(&topic, PARTITIONS, "")).unwrap();
    for seq in 1..=3 {
        write(&store, seq, 40, 100 * seq as i64);
    }
    drop(store);
    assert_falls_back(&topic, dir.path(), Fallback::Recreated);
}

/// A tombstone written after the snapshot may be compacted away before the reopen reads it once
/// the snapshot is older than `delete.retention.ms`.
#[test]
fn a_snapshot_older_than_the_tombstone_retention_is_not_used() {
    let topic = TopicGuard::new("snap-old");
    create_topic(
        &topic,
        PARTITIONS as i32,
        &[
            ("cleanup.policy", "compact"),
            ("delete.retention.ms", "2000"),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let store = open_warm(&topic, dir.path());
    write(&store, 1, 20, 0);
    drop(store);
    assert_eq!(
        open_warm(&topic, dir.path()).loaded().start,
        Start::Warm,
        "young enough"
    );
    std::thread::sleep(Duration::from_millis(2500));
    assert_falls_back(&topic, dir.path(), Fallback::TooOld);
}

/// Records deleted from the start of a partition (DeleteRecords, allowed while the policy
/// includes `delete`) are gone for a full read: the snapshot that holds them is not used.
#[test]
fn records_deleted_from_a_partition_make_a_full_read() {
    let (topic, dir) = topic_with_snapshot("snap-deleted");
    set_topic_config(&topic, &[("cleanup.policy", "compact,delete")]);
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(&topic, 0, rdkafka::Offset::Offset(5))
        .unwrap();
    block_on(admin().delete_records(&tpl, &AdminOptions::new())).expect("delete records");
    set_topic_config(&topic, &[("cleanup.policy", "compact")]);
    assert_falls_back(&topic, dir.path(), Fallback::Truncated);
}

/// A partition that now ends below where the snapshot stopped (a log truncated by an unclean
/// leader election, say): the snapshot says it read further than the topic goes.
#[test]
fn a_partition_ending_below_the_snapshot_makes_a_full_read() {
    let (topic, dir) = topic_with_snapshot("snap-truncated");
    reseal(&snapshot_file(dir.path(), &topic), |body| {
        // Past the cluster id, the topic, the topic id, read_at_ms and the partition count: the
        // first partition's (start, next); move its `next` past the end.
        let mut at = 0;
        for _ in 0..2 {
            let len = u32::from_le_bytes(body[at..at + 4].try_into().unwrap()) as usize;
            at += 4 + len;
        }
        at += 16 + 8 + 4 + 8;
        let next = i64::from_le_bytes(body[at..at + 8].try_into().unwrap());
        body[at..at + 8].copy_from_slice(&(next + 1000).to_le_bytes());
    });
    assert_falls_back(&topic, dir.path(), Fallback::Truncated);
}

#[test]
fn a_bad_snapshot_dir_is_refused_naming_it() {
    let file = tempfile::NamedTempFile::new().unwrap();
    let topic = TopicGuard::new("snap-baddir");
    let e = KafkaStore::open(&with_dir(&topic, file.path()))
        .expect_err("a file is not a directory")
        .to_string();
    assert!(e.contains("snapshot.dir"), "{e}");
    let e = KafkaStore::open(&url(&topic, PARTITIONS, "&snapshot.dir="))
        .expect_err("empty")
        .to_string();
    assert!(e.contains("snapshot.dir"), "{e}");
}

/// A store open longer than `delete.retention.ms` between two catch-ups: a key another writer
/// reset meanwhile may be compacted away whole (its records and the tombstone). Reading on from
/// where it stopped would keep the old offset, live and in the snapshot written at drop; the
/// catch-up reads the topic whole again instead.
#[test]
fn a_catch_up_after_the_tombstone_retention_reads_the_topic_whole() {
    let topic = TopicGuard::new("snap-gap");
    create_topic(
        &topic,
        1,
        &[
            ("cleanup.policy", "compact"),
            ("delete.retention.ms", "3000"),
            ("segment.ms", "100"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let snapshots = url(
        &topic,
        1,
        &format!("&snapshot.dir={}", dir.path().display()),
    );
    let plain = url(&topic, 1, "");
    let with_snapshot = KafkaStore::open(&snapshots).unwrap();
    write(&with_snapshot, 1, 3, 0);
    let live = KafkaStore::open(&plain).unwrap();
    let other = KafkaStore::open(&plain).unwrap();
    other.reset(key(1)).unwrap();
    drop(other);

    // Offsets of another connector roll segments until the cleaner has removed every record of
    // key 1.
    let gone = key(1).connect_key();
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    for i in 0u64.. {
        let filler = format!(r#"["filler",{{"n":{}}}]"#, i % 4);
        produce_plain(
            &topic,
            &[(Some(0), Some(filler.as_bytes()), Some(br#"{"p":1}"#))],
        );
        if i % 10 == 9
            && read_all(&topic, "read_committed")
                .iter()
                .all(|r| r.key.as_deref() != Some(&gone[..]))
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "key 1 is never compacted away"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    let cold = cold_answers_of(&plain);
    assert!(cold.0.iter().all(|(_, k, _)| *k != gone), "reset: {cold:?}");
    live.refresh().unwrap();
    assert_eq!(live.get(&key(1)).unwrap(), None, "the reset is forgotten");
    assert_eq!(answers(&live), cold);
    drop(with_snapshot);
    let warm = KafkaStore::open(&snapshots).unwrap();
    let start = warm.loaded().start;
    // A paused machine may make the snapshot too old by the time it is opened.
    assert!(
        matches!(start, Start::Warm | Start::Fallback(Fallback::TooOld)),
        "{start:?}"
    );
    assert_eq!(answers(&warm), cold, "{start:?}");
}

/// A snapshot stamped after now (the clock moved back, or another machine's clock): how old it
/// is cannot be told, so it is not used.
#[test]
fn a_snapshot_from_the_future_is_not_used() {
    let (topic, dir) = topic_with_snapshot("snap-future");
    reseal(&snapshot_file(dir.path(), &topic), |body| {
        // read_at_ms follows the cluster id, the topic (each u32 length first) and the topic id.
        let cluster = u32::from_le_bytes(body[..4].try_into().unwrap()) as usize;
        let at = 4 + cluster;
        let name = u32::from_le_bytes(body[at..at + 4].try_into().unwrap()) as usize;
        let at = at + 4 + name + 16;
        let stamp = i64::from_le_bytes(body[at..at + 8].try_into().unwrap());
        body[at..at + 8].copy_from_slice(&(stamp + 3_600_000).to_le_bytes());
    });
    assert_falls_back(&topic, dir.path(), Fallback::TooOld);
}

/// A snapshot that cannot be read (here a directory where the file should be) is only a cache
/// missed: the open reads the whole topic, saying why.
#[test]
fn an_unreadable_snapshot_is_read_around() {
    let (topic, dir) = topic_with_snapshot("snap-unreadable");
    let path = snapshot_file(dir.path(), &topic);
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    assert_falls_back(&topic, dir.path(), Fallback::Unreadable);
}
