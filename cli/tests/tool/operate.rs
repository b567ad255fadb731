//! The operator's commands on real RocksDB stores, run as a user would run them: connectors,
//! export, reset, import, migrate, lag; and the 100,000-partition migration round trip.

use crate::cli_util;
use cli_util::{cli, cli_stdin, ok, text};
use std::path::Path;
use std::time::Instant;

use connect_offsets::migrate::{MigrateOptions, migrate};
use connect_offsets::model::Batch;
use connect_offsets::store::rocksdb::RocksDbStore;
use connect_offsets::store::{MemoryStore, OffsetStoreExt};
use connect_offsets::{Offset, OffsetKey, OffsetStore, Partition};

fn url(dir: &Path, name: &str) -> String {
    format!("rocksdb://{}", dir.join(name).display())
}

fn seed(path: &Path) {
    let store = RocksDbStore::open(path).unwrap();
    store
        .write(vec![
            (
                OffsetKey::new(
                    "file-source",
                    Partition::new().with("filename", "/var/log/a.log"),
                ),
                Some(Offset::new().with("position", 1234)),
            ),
            (
                OffsetKey::new(
                    "file-source",
                    Partition::new().with("filename", "/var/log/b.log"),
                ),
                Some(Offset::new().with("position", 99)),
            ),
            (
                OffsetKey::new(
                    "orders-sink",
                    Partition::new()
                        .with("kafka_topic", "orders")
                        .with("kafka_partition", 0),
                ),
                Some(Offset::new().with("kafka_offset", 5000)),
            ),
        ])
        .unwrap();
    store.apply(&Batch::new("worker-1", 42, [])).unwrap();
    store.persist().unwrap();
}

const FILE_SOURCE: &str = r#"{"offsets":[{"partition":{"filename":"/var/log/a.log"},"offset":{"position":1234}},{"partition":{"filename":"/var/log/b.log"},"offset":{"position":99}}]}"#;

#[test]
fn export_reset_import_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    seed(&tmp.path().join("db"));
    let db = url(tmp.path(), "db");

    assert_eq!(
        ok(&cli(&["connectors", "--store", &db])),
        "file-source\norders-sink\n"
    );
    assert_eq!(
        ok(&cli(&["connectors", "--store", &db, "--json"])).trim(),
        r#"["file-source","orders-sink"]"#
    );
    let one = ok(&cli(&[
        "export",
        "--store",
        &db,
        "--connector",
        "file-source",
    ]));
    assert_eq!(one.trim(), FILE_SOURCE);
    let all_file = tmp.path().join("all.json");
    ok(&cli(&[
        "export",
        "--store",
        &db,
        "--output",
        all_file.to_str().unwrap(),
    ]));
    let all = std::fs::read_to_string(&all_file).unwrap();
    assert_eq!(
        all.trim(),
        format!(
            r#"{{"connectors":{{"file-source":{FILE_SOURCE},"orders-sink":{{"offsets":[{{"partition":{{"kafka_topic":"orders","kafka_partition":0}},"offset":{{"kafka_offset":5000}}}}]}}}}}}"#
        )
    );

    // Reset one partition, then all of a connector.
    let out = cli(&[
        "reset",
        "--store",
        &db,
        "--connector",
        "file-source",
        "--partition",
        r#"{"filename":"/var/log/b.log"}"#,
    ]);
    ok(&out);
    let out = cli(&[
        "reset",
        "--store",
        &db,
        "--connector",
        "file-source",
        "--partition",
        r#"{"filename":"/var/log/b.log"}"#,
    ]);
    assert_eq!(out.status.code(), Some(3), "a second reset finds nothing");
    let out = cli(&[
        "reset",
        "--store",
        &db,
        "--connector",
        "file-source",
        "--all",
    ]);
    ok(&out);
    assert!(text(&out.stderr).contains("reset 1 partition of connector `file-source`"));
    // A connector with nothing to reset is most likely a typo: exit 3, and no override recorded.
    for once in [&[][..], &["--once", "wipe-typo"][..]] {
        let mut args = vec![
            "reset",
            "--store",
            &db,
            "--connector",
            "file-sourse",
            "--all",
        ];
        args.extend_from_slice(once);
        let out = cli(&args);
        assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("connector `file-sourse` has no offsets in this store"),
            "{}",
            text(&out.stderr)
        );
    }
    assert_eq!(ok(&cli(&["connectors", "--store", &db])), "orders-sink\n");

    // Import the export back (from stdin): everything returns.
    let out = cli_stdin(&["import", "--store", &db, "--json"], all.as_bytes());
    assert_eq!(
        ok(&out).trim(),
        r#"{"dry_run":false,"connectors":[{"name":"file-source","set":2,"reset":0},{"name":"orders-sink","set":1,"reset":0}]}"#
    );
    assert_eq!(ok(&cli(&["export", "--store", &db])).trim(), all.trim());

    // One connector's document (Connect's GET shape) with --replace: exactly the document.
    let doc = tmp.path().join("one.json");
    std::fs::write(
        &doc,
        r#"{"offsets":[{"partition":{"filename":"/var/log/c.log"},"offset":{"position":1}},{"partition":{"filename":"/var/log/a.log"},"offset":null}]}"#,
    )
    .unwrap();
    let out = cli(&[
        "import",
        "--store",
        &db,
        "--connector",
        "file-source",
        "--input",
        doc.to_str().unwrap(),
        "--replace",
        "--dry-run",
    ]);
    ok(&out);
    assert!(
        text(&out.stderr).contains("would import connector `file-source`: 1 set, 2 reset"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        ok(&cli(&["export", "--store", &db])).trim(),
        all.trim(),
        "dry run"
    );
    ok(&cli(&[
        "import",
        "--store",
        &db,
        "--connector",
        "file-source",
        "--input",
        doc.to_str().unwrap(),
        "--replace",
    ]));
    assert_eq!(
        ok(&cli(&[
            "list",
            "--store",
            &db,
            "--connector",
            "file-source"
        ]))
        .trim(),
        r#"{"offsets":[{"partition":{"filename":"/var/log/c.log"},"offset":{"position":1}}]}"#
    );

    // Bad documents: exit 1 naming the problem, nothing written.
    for (input, want) in [
        (&b"{\"offsets\":[]}"[..], "--connector"),
        (b"{\"connectors\":", "not valid JSON"),
        (
            b"{\"connectors\":{\"x\":{\"offsets\":[{\"partition\":{\"a\":[1]},\"offset\":null}]}}}",
            "field `a`",
        ),
    ] {
        let out = cli_stdin(&["import", "--store", &db], input);
        assert_eq!(out.status.code(), Some(1));
        assert!(text(&out.stderr).contains(want), "{}", text(&out.stderr));
    }
}

/// A bad entry deep in a big document: the error names the connector as well as the entry, in both
/// shapes `import` reads, and nothing of the document is written, not even the connectors before
/// the bad one.
#[test]
fn import_error_names_connector_and_entry_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    seed(&tmp.path().join("db"));
    let db = url(tmp.path(), "db");
    let before = ok(&cli(&["export", "--store", &db]));

    let mut entries: Vec<String> = (0..6999)
        .map(|i| format!(r#"{{"partition":{{"table":"t{i}"}},"offset":{{"lsn":{i}}}}}"#))
        .collect();
    entries.push(r#"{"partition":{"table":"t6999"},"offset":6999}"#.into());
    let orders = format!(r#"{{"offsets":[{}]}}"#, entries.join(","));
    // A valid connector first: an import writing connector by connector as it parsed would have
    // written it before reaching the bad entry.
    let all = format!(
        r#"{{"connectors":{{"file-source":{{"offsets":[{{"partition":{{"filename":"/var/log/a.log"}},"offset":{{"position":1}}}}]}},"orders-source":{orders}}}}}"#
    );
    for (args, input) in [
        (&["import", "--store", &db][..], &all),
        (
            &["import", "--store", &db, "--connector", "orders-source"],
            &all,
        ),
        (
            &["import", "--store", &db, "--connector", "orders-source"],
            &orders,
        ),
    ] {
        let out = cli_stdin(args, input.as_bytes());
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("connector `orders-source`: offsets[6999]: the offset must be"),
            "{args:?}: {err}"
        );
        assert_eq!(ok(&cli(&["export", "--store", &db])), before, "{args:?}");
    }
}

#[test]
fn migrate_dry_run_then_for_real_then_nothing_left() {
    let tmp = tempfile::tempdir().unwrap();
    seed(&tmp.path().join("a"));
    {
        // The destination has a stale partition and a different offset.
        let b = RocksDbStore::open(tmp.path().join("b")).unwrap();
        b.write(vec![
            (
                OffsetKey::new(
                    "file-source",
                    Partition::new().with("filename", "/var/log/a.log"),
                ),
                Some(Offset::new().with("position", 1)),
            ),
            (
                OffsetKey::new(
                    "file-source",
                    Partition::new().with("filename", "/var/log/old.log"),
                ),
                Some(Offset::new().with("position", 1)),
            ),
        ])
        .unwrap();
    }
    let (a, b) = (url(tmp.path(), "a"), url(tmp.path(), "b"));
    let dry = ok(&cli(&["migrate", "--from", &a, "--to", &b, "--dry-run"]));
    assert_eq!(
        dry,
        "connector file-source: would add 1, change 1, remove 1; 0 unchanged\n\
         connector orders-sink: would add 1, change 0, remove 0; 0 unchanged\n\
         writer worker-1: would raise applied seq 0 -> 42\n\
         dry run: 4 partitions of 2 connectors would be written; nothing written\n"
    );
    let out = ok(&cli(&["migrate", "--from", &a, "--to", &b, "--json"]));
    assert!(
        out.starts_with(
            r#"{"dry_run":false,"verified":true,"connectors":[{"name":"file-source","added":1,"changed":1,"removed":1,"unchanged":0},{"name":"orders-sink","added":1,"changed":0,"removed":0,"unchanged":0}],"writers":[{"writer":"worker-1","from_seq":0,"to_seq":42}],"writers_skipped":null,"elapsed_s":"#
        ),
        "{out}"
    );
    assert_eq!(
        ok(&cli(&["export", "--store", &a])),
        ok(&cli(&["export", "--store", &b]))
    );
    let again = ok(&cli(&["migrate", "--from", &a, "--to", &b]));
    assert!(
        again.contains("did add 0, change 0, remove 0; 2 unchanged"),
        "{again}"
    );
    // One connector only.
    let out = ok(&cli(&[
        "migrate",
        "--from",
        &a,
        "--to",
        "memory://",
        "--connector",
        "orders-sink",
    ]));
    assert!(out.starts_with("connector orders-sink: did add 1"), "{out}");
    // Mistakes: same store, a store in use.
    let out = cli(&["migrate", "--from", &a, "--to", &a]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("same store"));
    let held = RocksDbStore::open(tmp.path().join("b")).unwrap();
    let out = cli(&["migrate", "--from", &a, "--to", &b]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("locked by another process"),
        "{}",
        text(&out.stderr)
    );
    drop(held);
}

#[test]
fn lag_reports_what_it_knows() {
    let tmp = tempfile::tempdir().unwrap();
    seed(&tmp.path().join("db"));
    let db = url(tmp.path(), "db");
    let out = cli(&["lag", "--store", &db]);
    let table = ok(&out);
    assert_eq!(
        table,
        "CONNECTOR\tPARTITIONS\tSINK\tSINK_LAG\tCOMMIT_AGE\tUNAPPLIED\nfile-source\t2\t0\t-\tunknown\t0\norders-sink\t1\t1\t-\tunknown\t0\n\nCONNECTOR\tKAFKA_TOPIC\tKAFKA_PARTITION\tCOMMITTED\tLOG_END\tLAG\norders-sink\torders\t0\t5000\t-\t-\n"
    );
    let err = text(&out.stderr);
    assert!(
        err.contains("keeps no commit times") && err.contains("needs the brokers"),
        "{err}"
    );
    let json = ok(&cli(&["lag", "--store", &db, "--json"]));
    assert!(
        json.contains(r#"{"name":"orders-sink","partitions":1,"sink_partitions":1,"commit_age_s":null,"unapplied_entries":0,"sink_lag":null,"sink_partition_lag":[{"kafka_topic":"orders","kafka_partition":0,"committed":5000,"log_end":null,"lag":null}]}"#),
        "{json}"
    );
}

fn keys(n: usize) -> Vec<(OffsetKey, Option<Offset>)> {
    (0..n)
        .map(|i| {
            let conn = format!("connector-{}", i % 10);
            (
                OffsetKey::new(
                    conn,
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

/// RocksDB → memory → RocksDB with 100,000 partitions over 10 connectors; identical afterwards.
/// (Kafka joins the chain once the Kafka store lands.)
#[test]
fn migrate_round_trip_100k_partitions() {
    let n: usize = std::env::var("MIGRATE_PARTITIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let tmp = tempfile::tempdir().unwrap();
    let first = RocksDbStore::open(tmp.path().join("first")).unwrap();
    first.write(keys(n)).unwrap();
    first.apply(&Batch::new("worker-1", 7, [])).unwrap();
    let memory = MemoryStore::new();
    let last = RocksDbStore::open(tmp.path().join("last")).unwrap();
    let mut timings = Vec::new();
    for (name, from, to) in [
        (
            "rocksdb -> memory",
            &first as &dyn OffsetStore,
            &memory as &dyn OffsetStore,
        ),
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
    // Byte-exact: the Connect record keys and values are the same.
    for ((ka, va), (kb, vb)) in a.iter().zip(&b) {
        assert_eq!(ka.connect_key(), kb.connect_key());
        assert_eq!(va.to_json(), vb.to_json());
    }
    assert_eq!(last.applied_seq("worker-1").unwrap(), 7);
    for (name, t) in timings {
        eprintln!("migrate {name}: {n} partitions in {:.3} s", t.as_secs_f64());
    }
}
