//! `import --once ID` from several processes started at one instant, on `kafka://` (the real broker,
//! `scripts/kafka start`) and `rocksdb://`: 20 races of 2 processes and 20 of 4 per backend, each
//! process with a file of its own under the one id. In every race exactly one process applies the
//! override (it alone says `recorded override`, and the connector then holds exactly its file's
//! offsets); every other says the id was already applied (with another file: that its file differs,
//! exit 1) or fails cleanly, telling to run it again. Also: `reset --once` races (one partition
//! reset), races with history on (one import in it), a RocksDB store another process holds open
//! (waited for, then refused saying to run again); the same id with another file is refused as
//! such, with the same file it is a no-op, and a marker from before digests says it cannot be
//! compared.
#![cfg(feature = "kafka")]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use connect_offsets::{Offset, OffsetKey, OffsetStore, Partition};

use crate::cli_util;
use cli_util::{cli, text};

use crate::kafka_util;

/// What one process of a race said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Said {
    /// Exit 0, `recorded override`.
    Applied,
    /// `was already applied`: exit 0 with the same file, exit 1 saying the file differs.
    AlreadyApplied,
    /// Exit 1 telling to run it again, nothing written.
    Retry,
    /// Already applied, found after another process fenced this one's write (counted apart).
    Fenced,
}

/// Process `i`'s file in race `race`: connector `race-<race>`, partition `common` and one of its
/// own, both at offset `{"by":i}`. Two applied files leave two `own` partitions.
fn doc(race: usize, i: usize) -> String {
    format!(
        r#"{{"connectors":{{"race-{race}":{{"offsets":[{{"partition":{{"f":"common"}},"offset":{{"by":{i}}}}},{{"partition":{{"f":"own-{i}"}},"offset":{{"by":{i}}}}}]}}}}}}"#
    )
}

/// The offsets file `i` of race `race` leaves, sorted.
fn offsets_of(race: usize, i: usize) -> Vec<(OffsetKey, Offset)> {
    let c = format!("race-{race}");
    let mut v = vec![
        (
            OffsetKey::new(&c, Partition::new().with("f", "common")),
            Offset::new().with("by", i as i64),
        ),
        (
            OffsetKey::new(&c, Partition::new().with("f", format!("own-{i}"))),
            Offset::new().with("by", i as i64),
        ),
    ];
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// `connect-offsets ARGS`, started as soon as `barrier` exists: every process of a race is spawned
/// (and waits) first, then the barrier is made, so they all start within a few milliseconds.
fn spawn_at(barrier: &Path, args: &[String]) -> Child {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(r#"while [ ! -e "$0" ]; do sleep 0.002; done; exec "$@""#)
        .arg(barrier)
        .arg(env!("CARGO_BIN_EXE_connect-offsets"))
        .args(args)
        .env_remove("CONNECT_OFFSETS_STORE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.spawn().expect("spawn connect-offsets")
}

/// Classifies what a process of a race said; panics on anything that is not one of the three.
fn said(id: &str, out: &std::process::Output) -> Said {
    let err = text(&out.stderr);
    let code = out.status.code();
    if code == Some(0) && err.contains(&format!("recorded override `{id}`")) {
        assert!(!err.contains("already applied"), "{err}");
        return Said::Applied;
    }
    assert!(
        !err.contains("recorded override"),
        "exit {code:?} yet says it recorded: {err}"
    );
    if err.contains(&format!("override `{id}` was already applied")) {
        match code {
            Some(0) => {}
            Some(1) => assert!(err.contains("differs from what the id applied"), "{err}"),
            _ => panic!("exit {code:?}: {err}"),
        }
        if err.contains("at the same time took over") {
            return Said::Fenced;
        }
        return Said::AlreadyApplied;
    }
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("run it again")
            && (err.contains("nothing written")
                || err.contains("nothing of this run was written")
                || err.contains("nothing of it was written")),
        "a failure must say nothing was written and to run it again: {err}"
    );
    Said::Retry
}

/// Races `n` processes importing their own file under one id, `races` times (race numbers from
/// `first`), into the store `url`; returns each race's winner and the tally of what was said.
fn races(
    url: &str,
    dir: &Path,
    first: usize,
    races: usize,
    n: usize,
) -> (Vec<(usize, usize)>, [usize; 4]) {
    let mut winners = Vec::new();
    let mut tally = [0; 4];
    for race in first..first + races {
        let id = format!("race-{race}-once");
        let barrier = dir.join(format!("go-{race}"));
        let children: Vec<Child> = (0..n)
            .map(|i| {
                let file: PathBuf = dir.join(format!("race-{race}-{i}.json"));
                std::fs::write(&file, doc(race, i)).unwrap();
                let args = [
                    "import",
                    "--store",
                    url,
                    "--input",
                    file.to_str().unwrap(),
                    "--once",
                    &id,
                ];
                spawn_at(&barrier, &args.map(String::from))
            })
            .collect();
        std::fs::write(&barrier, b"").unwrap();
        let outs: Vec<_> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        let saids: Vec<Said> = outs.iter().map(|o| said(&id, o)).collect();
        for s in &saids {
            tally[*s as usize] += 1;
        }
        let applied: Vec<usize> = (0..n).filter(|&i| saids[i] == Said::Applied).collect();
        assert_eq!(
            applied.len(),
            1,
            "race {race} of {n}: {saids:?}\n{}",
            outs.iter()
                .map(|o| text(&o.stderr))
                .collect::<Vec<_>>()
                .join("\n---\n")
        );
        winners.push((race, applied[0]));
    }
    (winners, tally)
}

/// Every race's connector holds exactly its winner's offsets.
fn check_winners(url: &str, winners: &[(usize, usize)]) {
    let store = connect_offsets::open_existing(url).unwrap();
    for &(race, i) in winners {
        let mut got = store.partitions(&format!("race-{race}")).unwrap();
        got.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            got,
            offsets_of(race, i),
            "race {race}: the store must hold the file of process {i} only"
        );
    }
}

fn race_both_sizes(url: &str, dir: &Path, backend: &str) {
    let t0 = Instant::now();
    let (mut winners, two) = races(url, dir, 0, 20, 2);
    let (more, four) = races(url, dir, 100, 20, 4);
    winners.extend(more);
    check_winners(url, &winners);
    eprintln!(
        "{backend}: 20 races of 2 [applied, already applied, retry, fenced then already applied] \
         = {two:?}, 20 races of 4 = {four:?}, in {:?}",
        t0.elapsed()
    );
}

#[test]
fn once_applies_once_when_processes_race_on_kafka() {
    let topic = kafka_util::TopicGuard::new("once-races");
    let url = kafka_util::url(&topic, 3, "");
    let dir = tempfile::tempdir().unwrap();
    // The topic first, so that no race is one of creating it.
    let set = [
        "set",
        "--store",
        &url,
        "--connector",
        "other",
        "--partition",
        "{}",
        "--offset",
        r#"{"p":1}"#,
    ];
    assert!(cli(&set).status.success());
    race_both_sizes(&url, dir.path(), "kafka");
}

#[test]
fn once_applies_once_when_processes_race_on_rocksdb() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("rocksdb://{}", dir.path().join("db").display());
    let set = [
        "set",
        "--store",
        &url,
        "--connector",
        "other",
        "--partition",
        "{}",
        "--offset",
        r#"{"p":1}"#,
    ];
    assert!(cli(&set).status.success());
    race_both_sizes(&url, dir.path(), "rocksdb");
}

/// `reset --once ID` racing too: each process resets another partition under one id; one
/// partition only is reset.
fn reset_races(url: &str, races: usize, n: usize) {
    let dir = tempfile::tempdir().unwrap();
    for race in 0..races {
        let connector = format!("resets-{race}");
        let mut doc = String::from(r#"{"offsets":["#);
        for i in 0..n {
            let sep = if i == 0 { "" } else { "," };
            doc.push_str(&format!(
                r#"{sep}{{"partition":{{"p":{i}}},"offset":{{"pos":{i}}}}}"#
            ));
        }
        doc.push_str("]}");
        let seed = dir.path().join(format!("seed-{race}.json"));
        std::fs::write(&seed, doc).unwrap();
        let import = [
            "import",
            "--store",
            url,
            "--connector",
            &connector,
            "--input",
            seed.to_str().unwrap(),
        ];
        let out = cli(&import);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let id = format!("reset-race-{race}");
        let barrier = dir.path().join(format!("go-{race}"));
        let children: Vec<Child> = (0..n)
            .map(|i| {
                let partition = format!(r#"{{"p":{i}}}"#);
                let args = [
                    "reset",
                    "--store",
                    url,
                    "--connector",
                    &connector,
                    "--partition",
                    &partition,
                    "--once",
                    &id,
                ];
                spawn_at(&barrier, &args.map(String::from))
            })
            .collect();
        std::fs::write(&barrier, b"").unwrap();
        let outs: Vec<_> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        let applied: Vec<usize> = (0..n)
            .filter(|&i| {
                let err = text(&outs[i].stderr);
                let ok = outs[i].status.success() && err.contains("recorded override");
                if !ok {
                    assert!(
                        err.contains("already applied") || err.contains("run it again"),
                        "{err}"
                    );
                }
                ok
            })
            .collect();
        assert_eq!(applied.len(), 1, "race {race}: {applied:?}");
        let store = connect_offsets::open_existing(url).unwrap();
        let left: Vec<_> = store
            .partitions(&connector)
            .unwrap()
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        let want: Vec<_> = (0..n)
            .filter(|&i| i != applied[0])
            .map(|i| OffsetKey::new(&connector, Partition::new().with("p", i as i64)))
            .collect();
        assert_eq!(left.len(), want.len(), "race {race}: {left:?}");
        assert!(
            want.iter().all(|k| left.contains(k)),
            "race {race}: {left:?}"
        );
    }
}

#[test]
fn reset_once_resets_one_partition_when_processes_race() {
    let topic = kafka_util::TopicGuard::new("once-reset-races");
    reset_races(&kafka_util::url(&topic, 3, ""), 5, 3);
    let dir = tempfile::tempdir().unwrap();
    reset_races(
        &format!("rocksdb://{}", dir.path().join("db").display()),
        5,
        3,
    );
}

/// The same id again: with the same file (in another order), a no-op that says so, exit 0; with
/// another file, or as a reset of something else, refused as differing, exit 1, nothing written; a
/// marker without a digest (an older version's) says it cannot be compared.
fn same_id_other_file(url: &str) {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, doc: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, doc).unwrap();
        p.to_str().unwrap().to_string()
    };
    let a = write(
        "a.json",
        r#"{"connectors":{"c":{"offsets":[{"partition":{"f":1},"offset":{"pos":10,"n":"x"}},{"partition":{"f":2},"offset":{"pos":20}}]}}}"#,
    );
    let a_reordered = write(
        "a2.json",
        r#"{"connectors":{"c":{"offsets":[{"partition":{"f":2},"offset":{"pos":20}},{"partition":{"f":1},"offset":{"n":"x","pos":10}}]}}}"#,
    );
    let b = write(
        "b.json",
        r#"{"connectors":{"c":{"offsets":[{"partition":{"f":1},"offset":{"pos":11,"n":"x"}},{"partition":{"f":2},"offset":{"pos":20}}]}}}"#,
    );
    let import =
        |file: &str, id: &str| cli(&["import", "--store", url, "--input", file, "--once", id]);
    let first = import(&a, "seed");
    assert!(first.status.success(), "{}", text(&first.stderr));
    assert!(text(&first.stderr).contains("recorded override `seed`"));
    let list = || {
        text(&cli(&["list", "--store", url, "--connector", "c"]).stdout)
            .trim()
            .to_string()
    };
    let before = list();
    let same = import(&a_reordered, "seed");
    assert_eq!(same.status.code(), Some(0), "{}", text(&same.stderr));
    let err = text(&same.stderr);
    assert!(
        err.contains("override `seed` was already applied") && err.contains("nothing written"),
        "{err}"
    );
    let other = import(&b, "seed");
    assert_eq!(other.status.code(), Some(1), "{}", text(&other.stderr));
    let err = text(&other.stderr);
    assert!(
        err.contains("override `seed` was already applied")
            && err.contains("differs from what the id applied")
            && err.contains("nothing written"),
        "{err}"
    );
    let reset = cli(&[
        "reset",
        "--store",
        url,
        "--connector",
        "c",
        "--partition",
        r#"{"f":1}"#,
        "--once",
        "seed",
    ]);
    assert_eq!(reset.status.code(), Some(1), "{}", text(&reset.stderr));
    assert!(
        text(&reset.stderr).contains("differs from what the id applied"),
        "{}",
        text(&reset.stderr)
    );
    assert_eq!(list(), before, "nothing written");

    // A marker as versions before digests wrote it.
    let old = cli(&[
        "set",
        "--store",
        url,
        "--connector",
        "__connect-offsets-once",
        "--partition",
        r#"{"id":"old"}"#,
        "--offset",
        r#"{"by":"cli","entries":2,"at_ms":1}"#,
    ]);
    assert!(old.status.success(), "{}", text(&old.stderr));
    let again = import(&b, "old");
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    assert!(
        text(&again.stderr).contains("cannot be compared"),
        "{}",
        text(&again.stderr)
    );
    assert_eq!(list(), before, "nothing written");
}

#[test]
fn the_same_id_with_another_file_says_it_differs_on_rocksdb() {
    let dir = tempfile::tempdir().unwrap();
    same_id_other_file(&format!("rocksdb://{}", dir.path().join("db").display()));
}

#[test]
fn the_same_id_with_another_file_says_it_differs_on_kafka() {
    let topic = kafka_util::TopicGuard::new("once-differs");
    same_id_other_file(&kafka_util::url(&topic, 3, ""));
}

/// A RocksDB store another process keeps open (a worker) is waited for, then refused with what to
/// do; nothing is written, and run again once it is free, the override applies.
#[test]
fn a_rocksdb_store_held_open_is_refused_saying_to_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let url = format!("rocksdb://{}", db.display());
    let file = dir.path().join("a.json");
    std::fs::write(&file, doc(0, 0)).unwrap();
    let import = || {
        cli(&[
            "import",
            "--store",
            &url,
            "--input",
            file.to_str().unwrap(),
            "--once",
            "held",
        ])
    };
    let held = connect_offsets::store::rocksdb::RocksDbStore::open(&db).unwrap();
    let out = import();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("override `held` was not applied by this run (nothing written): run it again")
            && err.contains("is locked by another process"),
        "{err}"
    );
    assert!(held.partitions("race-0").unwrap().is_empty());
    drop(held);
    let out = import();
    assert!(
        text(&out.stderr).contains("recorded override `held`"),
        "{}",
        text(&out.stderr)
    );
}

/// With history on (`?history=7d`), the history of a race's connector shows one import: the
/// winner's two offsets, nothing of the others.
fn history_shows_one_import(url: &str) {
    let dir = tempfile::tempdir().unwrap();
    let set = [
        "set",
        "--store",
        url,
        "--connector",
        "other",
        "--partition",
        "{}",
        "--offset",
        r#"{"p":1}"#,
    ];
    assert!(cli(&set).status.success());
    let (winners, tally) = races(url, dir.path(), 200, 5, 3);
    check_winners(url, &winners);
    for (race, i) in winners {
        let out = cli(&[
            "history",
            "--store",
            url,
            "--connector",
            &format!("race-{race}"),
        ]);
        let changes = text(&out.stdout);
        let lines: Vec<&str> = changes.lines().collect();
        assert_eq!(lines.len(), 2, "race {race}: {changes}");
        for own in ["common".to_string(), format!("own-{i}")] {
            let change = format!(r#"{{"f":"{own}"}}: none -> {{"by":{i}}}"#);
            assert!(changes.contains(&change), "race {race}: {changes}");
        }
    }
    eprintln!("{url}: 5 races of 3 with history: {tally:?}");
}

#[test]
fn history_shows_one_import_when_processes_race() {
    let topic = kafka_util::TopicGuard::new("once-history-races");
    history_shows_one_import(&kafka_util::url(&topic, 3, "&history=7d"));
    let dir = tempfile::tempdir().unwrap();
    history_shows_one_import(&format!(
        "rocksdb://{}?history=7d",
        dir.path().join("db").display()
    ));
}
