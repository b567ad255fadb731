//! The command-line tool, run as a user would run it.

use crate::cli_util;
use cli_util::{cli, ok, text};

#[test]
fn set_then_get_round_trips_through_rocksdb() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("rocksdb://{}", dir.path().join("db").display());
    let p = r#"{"filename":"/tmp/test.txt","ünï":"😀"}"#;
    let out = cli(&[
        "set",
        "--store",
        &url,
        "--connector",
        "local-file-source",
        "--partition",
        p,
        "--offset",
        r#"{"position":1234}"#,
    ]);
    assert!(out.status.success(), "set failed: {}", text(&out.stderr));
    let out = cli(&[
        "get",
        "--store",
        &url,
        "--connector",
        "local-file-source",
        "--partition",
        r#"{"ünï":"😀","filename":"/tmp/test.txt"}"#,
    ]);
    assert!(out.status.success(), "get failed: {}", text(&out.stderr));
    // Member order given to `get` does not matter: the same partition is found (printed as asked).
    assert_eq!(
        text(&out.stdout).trim(),
        r#"{"partition":{"ünï":"\uD83D\uDE00","filename":"/tmp/test.txt"},"offset":{"position":1234}}"#
    );
    let out = cli(&["list", "--store", &url, "--connector", "local-file-source"]);
    assert_eq!(
        text(&out.stdout).trim(),
        r#"{"offsets":[{"partition":{"filename":"/tmp/test.txt","ünï":"\uD83D\uDE00"},"offset":{"position":1234}}]}"#
    );
    let out = cli(&[
        "reset",
        "--store",
        &url,
        "--connector",
        "local-file-source",
        "--partition",
        p,
    ]);
    assert!(out.status.success(), "reset failed: {}", text(&out.stderr));
    let out = cli(&[
        "get",
        "--store",
        &url,
        "--connector",
        "local-file-source",
        "--partition",
        p,
    ]);
    assert_eq!(out.status.code(), Some(3), "a missing offset exits 3");
    assert!(
        text(&out.stderr).contains("no offset stored"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn bad_input_exits_non_zero_naming_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("rocksdb://{}", dir.path().join("db").display());
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "set",
                "--store",
                &url,
                "--connector",
                "c",
                "--partition",
                "{\"a\":",
                "--offset",
                "{}",
            ],
            "--partition is not valid JSON",
        ),
        (
            vec![
                "set",
                "--store",
                &url,
                "--connector",
                "c",
                "--partition",
                "{\"a\":1}",
                "--offset",
                "{\"p\":7,\"p\":8}",
            ],
            "--offset is not valid JSON: member `p` is given twice",
        ),
        (
            vec![
                "set",
                "--store",
                &url,
                "--connector",
                "c",
                "--partition",
                "{\"a\":1}",
                "--offset",
                "{\"p\":01}",
            ],
            "--offset is not valid JSON: a number with a leading zero at byte 5",
        ),
        (
            vec![
                "set",
                "--store",
                &url,
                "--connector",
                " ",
                "--partition",
                "null",
                "--offset",
                "{}",
            ],
            "is empty or blank",
        ),
        (
            vec![
                "set",
                "--store",
                &url,
                "--connector",
                "a\nb",
                "--partition",
                "null",
                "--offset",
                "{}",
            ],
            "holds control characters",
        ),
        (
            vec![
                "set",
                "--store",
                &url,
                "--connector",
                "c",
                "--partition",
                r#"{"a":{"b":1}}"#,
                "--offset",
                "{}",
            ],
            "field `a`",
        ),
        (
            vec![
                "set",
                "--store",
                &url,
                "--connector",
                "c",
                "--partition",
                "{}",
                "--offset",
                r#"{"pos":[1,2]}"#,
            ],
            "field `pos`",
        ),
        (
            vec![
                "set",
                "--store",
                &url,
                "--connector",
                "c",
                "--partition",
                "{}",
                "--offset",
                "null",
            ],
            "--offset must be a JSON object (use `reset` to remove an offset), not null",
        ),
        (
            vec![
                "get",
                "--store",
                &url,
                "--connector",
                "c",
                "--partition",
                "[1, \"a\"]",
            ],
            "--partition must be a JSON object or null, not an array",
        ),
        (
            vec![
                "get",
                "--store",
                "postgres://db/x",
                "--connector",
                "c",
                "--partition",
                "{}",
            ],
            "unknown scheme `postgres`",
        ),
        (
            vec![
                "get",
                "--store",
                "/var/lib/offsets",
                "--connector",
                "c",
                "--partition",
                "{}",
            ],
            "scheme://",
        ),
    ];
    for (args, want) in cases {
        let out = cli(&args);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{args:?} should fail with exit code 1"
        );
        assert!(
            text(&out.stderr).contains(want),
            "{args:?}: stderr `{}` should name `{want}`",
            text(&out.stderr)
        );
    }
    let out = cli(&["reset", "--store", &url, "--connector", "c"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "reset needs --partition or --all (usage error)"
    );
}

/// Control characters in what an error message names are escaped, the C1 ones (U+0080 to U+009F,
/// which a terminal shows as nothing) as the C0 ones are: a name holding one does not look clean.
#[test]
fn error_messages_escape_c1_control_characters() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("rocksdb://{}", dir.path().join("db").display());
    for (name, shown) in [
        ("a\u{85}b", r#""a\u0085b""#),
        ("a\u{9b}b", r#""a\u009Bb""#),
        ("a\u{1}b", r#""a\u0001b""#),
    ] {
        let out = cli(&[
            "set",
            "--store",
            &url,
            "--connector",
            name,
            "--partition",
            "null",
            "--offset",
            "{}",
        ]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains(&format!(
                "the connector name {shown} holds control characters"
            )),
            "{err:?}"
        );
        assert!(!err.chars().any(|c| c.is_control() && c != '\n'), "{err:?}");
    }
    // A name in backticks too (a connector the store does not hold).
    let out = cli(&[
        "set",
        "--store",
        &url,
        "--connector",
        "c",
        "--partition",
        "null",
        "--offset",
        r#"{"p":1}"#,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = cli(&["reset", "--store", &url, "--connector", "x\u{85}y", "--all"]);
    let err = text(&out.stderr);
    assert!(
        err.contains("connector `x\\u0085y` has no offsets"),
        "{err:?}"
    );
    assert!(!err.chars().any(|c| c.is_control() && c != '\n'), "{err:?}");
}

#[test]
fn a_locked_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let url = format!("rocksdb://{}", path.display());
    let _held = connect_offsets::store::rocksdb::RocksDbStore::open(&path).unwrap();
    // Another process opening the same directory gets a clear error, not a corrupted store.
    let out = cli(&[
        "get",
        "--store",
        &url,
        "--connector",
        "c",
        "--partition",
        "{}",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("locked by another process") && err.contains(&path.display().to_string()),
        "{err}"
    );
}

#[test]
fn files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let url = format!("rocksdb://{}", path.display());
    let out = cli(&[
        "set",
        "--store",
        &url,
        "--connector",
        "c",
        "--partition",
        "{}",
        "--offset",
        "{\"p\":1}",
    ]);
    assert!(out.status.success());
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "store directory mode {mode:o}");
    for entry in std::fs::read_dir(&path).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            let mode = entry.metadata().unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{} has mode {mode:o}", entry.path().display());
        }
    }
}

#[test]
fn bench_runs_and_reports() {
    let out = cli(&[
        "bench",
        "--store",
        "memory://",
        "--offsets",
        "5000",
        "--batch",
        "500",
        "--quiet",
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let o = text(&out.stdout);
    let json = connect_offsets::internal::codec::json::parse(o.trim().as_bytes())
        .expect("bench --json prints JSON");
    let connect_offsets::internal::codec::json::Json::Object(top) = json else {
        panic!("{o}")
    };
    let results = &top.iter().find(|(k, _)| k == "results").expect("results").1;
    let connect_offsets::internal::codec::json::Json::Array(rows) = results else {
        panic!("{o}")
    };
    let connect_offsets::internal::codec::json::Json::Object(row) = &rows[0] else {
        panic!("{o}")
    };
    let get = |k: &str| {
        row.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .unwrap()
    };
    assert_eq!(
        get("store"),
        connect_offsets::internal::codec::json::Json::String("memory".into())
    );
    assert_eq!(
        get("offsets"),
        connect_offsets::internal::codec::json::Json::Int(5000),
        "{o}"
    );
    assert_eq!(
        get("commits"),
        connect_offsets::internal::codec::json::Json::Int(10),
        "{o}"
    );
}

#[test]
fn bench_warmup_is_not_measured() {
    // 0.3 s of warm-up commits, then exactly 2,000 measured offsets in 4 commits: the counts
    // (offsets, commits, log batches, syncs, store writes) are the measured run's alone.
    let out = cli(&[
        "bench",
        "--store",
        "memory://",
        "--warmup",
        "0.3",
        "--offsets",
        "2000",
        "--batch",
        "500",
        "--durability",
        "store",
        "--quiet",
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let o = text(&out.stdout);
    for field in [
        "\"warmup_seconds\":0.3",
        "\"offsets\":2000,",
        "\"commits\":4,",
        "\"log_batches\":4,",
        "\"log_syncs\":4,",
        "\"store_writes\":4,",
    ] {
        assert!(o.contains(field), "no {field} in {o}");
    }
    for bad in ["-1", "NaN", "inf"] {
        let out = cli(&[
            "bench",
            "--store",
            "memory://",
            &format!("--warmup={bad}"),
            "--offsets",
            "10",
            "--quiet",
        ]);
        assert!(!out.status.success());
        let err = text(&out.stderr);
        assert!(
            err.contains("--warmup must be a number of seconds"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn bench_lookups_read_back_what_the_run_committed() {
    // On the default RocksDB store and on memory (whose reopen rebuilds from the log's snapshot):
    // every lookup must find an offset, or bench fails.
    for store in ["default", "memory://"] {
        let out = cli(&[
            "bench",
            "--store",
            store,
            "--offsets",
            "3000",
            "--partitions",
            "3000",
            "--batch",
            "1000",
            "--lookups",
            "250",
            "--quiet",
            "--json",
        ]);
        assert!(out.status.success(), "{store}: {}", text(&out.stderr));
        let o = text(&out.stdout);
        for field in [
            "\"lookups\":250,",
            "\"lookup_seconds\":",
            "\"lookups_per_sec\":",
            "\"lookup_p50_ms\":",
            "\"lookup_p99_ms\":",
        ] {
            assert!(o.contains(field), "{store}: no {field} in {o}");
        }
    }
    // Without --lookups, no lookup fields; with --lookups but nothing committed, a clear error.
    let out = cli(&[
        "bench",
        "--store",
        "memory://",
        "--offsets",
        "10",
        "--quiet",
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!text(&out.stdout).contains("lookups"));
    let out = cli(&[
        "bench",
        "--store",
        "memory://",
        "--offsets",
        "0",
        "--lookups",
        "5",
        "--quiet",
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--lookups"),
        "{}",
        text(&out.stderr)
    );
}

/// `import --once ID` and `reset --once ID` on RocksDB: the first run writes and records the id,
/// a second run with the same id says so, writes nothing and exits 0; a new id applies again.
#[test]
fn import_and_reset_once() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("rocksdb://{}", dir.path().join("db").display());
    let doc = dir.path().join("doc.json");
    std::fs::write(
        &doc,
        r#"{"connectors":{"a":{"offsets":[{"partition":{"f":1},"offset":{"pos":10}}]},"b":{"offsets":[{"partition":{"f":2},"offset":{"pos":20}}]}}}"#,
    )
    .unwrap();
    let import = |id: &str| {
        cli(&[
            "import",
            "--store",
            &url,
            "--input",
            doc.to_str().unwrap(),
            "--once",
            id,
        ])
    };
    let set_a = |pos: &str| {
        let out = cli(&[
            "set",
            "--store",
            &url,
            "--connector",
            "a",
            "--partition",
            r#"{"f":1}"#,
            "--offset",
            pos,
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    };
    let get_a = || {
        text(
            &cli(&[
                "get",
                "--store",
                &url,
                "--connector",
                "a",
                "--partition",
                r#"{"f":1}"#,
            ])
            .stdout,
        )
        .trim()
        .to_string()
    };
    let out = import("import-1");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("recorded override `import-1`"),
        "{}",
        text(&out.stderr)
    );
    set_a(r#"{"pos":11}"#);
    let out = import("import-1");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("override `import-1` was already applied (")
            && err.contains("nothing written"),
        "{err}"
    );
    assert!(get_a().ends_with(r#""offset":{"pos":11}}"#), "{}", get_a());
    // The marker is an offset like any other, in the reserved namespace.
    let markers = text(
        &cli(&[
            "list",
            "--store",
            &url,
            "--connector",
            "__connect-offsets-once",
        ])
        .stdout,
    );
    assert!(
        markers.contains(r#"{"partition":{"id":"import-1"},"offset":{"by":"cli","entries":2,"#),
        "{markers}"
    );
    let names = text(&cli(&["connectors", "--store", &url]).stdout);
    assert_eq!(names, "a\nb\n", "the markers are not a connector");

    let reset = |id: &str| {
        cli(&[
            "reset",
            "--store",
            &url,
            "--connector",
            "a",
            "--all",
            "--once",
            id,
        ])
    };
    let out = reset("reset-1");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr)
            .contains("reset 1 partition of connector `a`; recorded override `reset-1`"),
        "{}",
        text(&out.stderr)
    );
    set_a(r#"{"pos":12}"#);
    let out = reset("reset-1");
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stderr).contains("already applied"),
        "{}",
        text(&out.stderr)
    );
    assert!(get_a().ends_with(r#""offset":{"pos":12}}"#), "{}", get_a());
    assert!(reset("reset-2").status.success());
    assert!(get_a().ends_with(r#""offset":null}"#), "{}", get_a());
    // A dry run with a new id writes nothing, not even the id.
    let out = cli(&[
        "import",
        "--store",
        &url,
        "--input",
        doc.to_str().unwrap(),
        "--once",
        "import-2",
        "--dry-run",
    ]);
    assert!(
        text(&out.stderr).contains("would record override `import-2`"),
        "{}",
        text(&out.stderr)
    );
    assert!(get_a().ends_with(r#""offset":null}"#), "{}", get_a());
    assert!(import("import-2").status.success());
    assert!(get_a().ends_with(r#""offset":{"pos":10}}"#), "{}", get_a());
}

#[test]
fn bad_once_ids_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("rocksdb://{}", dir.path().join("db").display());
    let long = "x".repeat(201);
    for (id, why) in [
        ("", "must not be empty"),
        ("a\nb", "control character U+000A at position 1"),
        (" padded", "must not begin or end with whitespace"),
        (long.as_str(), "is 201 characters long, at most 200"),
    ] {
        let out = cli(&[
            "reset",
            "--store",
            &url,
            "--connector",
            "a",
            "--all",
            "--once",
            id,
        ]);
        assert_eq!(out.status.code(), Some(1), "{id:?}");
        let err = text(&out.stderr);
        assert!(
            err.contains("override id") && err.contains(why),
            "{id:?}: {err}"
        );
        let out = cli(&[
            "import",
            "--store",
            &url,
            "--input",
            "/nonexistent",
            "--once",
            id,
        ]);
        assert_eq!(out.status.code(), Some(1), "{id:?}");
        assert!(
            text(&out.stderr).contains(why),
            "{id:?}: {}",
            text(&out.stderr)
        );
    }
    assert!(
        !dir.path().join("db").exists(),
        "a refused id opened the store"
    );
}

#[test]
fn a_store_that_is_not_there_is_refused_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("typo");
    let typo_url = format!("rocksdb://{}", typo.display());
    let part = r#"{"f":"a"}"#;
    let reads: [&[&str]; 6] = [
        &["connectors", "--store", &typo_url],
        &["list", "--store", &typo_url, "--connector", "c"],
        &[
            "get",
            "--store",
            &typo_url,
            "--connector",
            "c",
            "--partition",
            part,
        ],
        &["export", "--store", &typo_url],
        &["reset", "--store", &typo_url, "--connector", "c", "--all"],
        &[
            "expire",
            "--store",
            &typo_url,
            "--connector",
            "c",
            "--older-than",
            "1d",
        ],
    ];
    for args in reads {
        let out = cli(args);
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(
            err.contains("no store at")
                && err.contains("does not exist")
                && err.contains(&typo_url),
            "{args:?}: {err}"
        );
        assert!(!typo.exists(), "{args:?} created {}", typo.display());
    }
    // A directory that holds no store is not made one.
    let plain = dir.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    let out = cli(&[
        "list",
        "--store",
        &format!("rocksdb://{}", plain.display()),
        "--connector",
        "c",
    ]);
    assert!(
        text(&out.stderr).contains("holds no RocksDB store"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_dir(&plain).unwrap().count(),
        0,
        "files written into it"
    );

    // A mistyped source does not empty the destination through `migrate`, nor does an empty one
    // unless asked to.
    let real = format!("rocksdb://{}", dir.path().join("real").display());
    let set = cli(&[
        "set",
        "--store",
        &real,
        "--connector",
        "c",
        "--partition",
        part,
        "--offset",
        r#"{"p":1}"#,
    ]);
    assert!(set.status.success(), "{}", text(&set.stderr));
    let out = cli(&["migrate", "--from", &typo_url, "--to", &real]);
    assert!(
        !out.status.success() && text(&out.stderr).contains("no store at"),
        "{}",
        text(&out.stderr)
    );
    let empty = dir.path().join("empty");
    drop(connect_offsets::store::rocksdb::RocksDbStore::open(&empty).unwrap());
    let empty_url = format!("rocksdb://{}", empty.display());
    let out = cli(&["migrate", "--from", &empty_url, "--to", &real]);
    let err = text(&out.stderr);
    assert!(
        !out.status.success() && err.contains("holds no offsets at all") && err.contains("`c`"),
        "{err}"
    );
    let kept = cli(&[
        "get",
        "--store",
        &real,
        "--connector",
        "c",
        "--partition",
        part,
    ]);
    assert!(
        text(&kept.stdout).contains(r#""p":1"#),
        "{}",
        text(&kept.stderr)
    );
    let out = cli(&[
        "migrate",
        "--from",
        &empty_url,
        "--to",
        &real,
        "--allow-empty-source",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let gone = cli(&[
        "get",
        "--store",
        &real,
        "--connector",
        "c",
        "--partition",
        part,
    ]);
    assert_eq!(gone.status.code(), Some(3));
}

/// A reader of stderr that left (`... 2>&1 | head -1`) loses the messages, not the exit code: the
/// command neither panics (101) nor aborts (134).
#[test]
fn a_closed_stderr_keeps_the_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let code = dir.path().join("code");
    let db = format!("rocksdb://{}", dir.path().join("db").display());
    for (args, want) in [
        ("connectors --store foo://x".to_string(), "1"),
        (
            format!("set --store {db} --connector c --partition null --offset '{{\"p\":1}}'"),
            "0",
        ),
        (
            format!("get --store {db} --connector c --partition '{{\"q\":1}}'"),
            "3",
        ),
    ] {
        // The pipe's reader (`:`) is gone by the time the command writes to it.
        let script = format!(
            "{{ sleep 0.3; {} {args} 2>&1 >/dev/null; echo $? >{}; }} | :",
            env!("CARGO_BIN_EXE_connect-offsets"),
            code.display()
        );
        let status = std::process::Command::new("sh")
            .args(["-c", &script])
            .status()
            .unwrap();
        assert!(status.success());
        assert_eq!(
            std::fs::read_to_string(&code).unwrap().trim(),
            want,
            "{args}"
        );
    }
}

/// A backup restored into the store it came from, which records history, is one more move: the
/// store's history says so, instead of taking the backup's history records as they are.
#[test]
fn an_import_into_a_store_with_history_is_recorded_as_a_change() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("rocksdb://{}?history=7d", dir.path().join("db").display());
    let set = |p: i64| {
        let out = cli(&[
            "set",
            "--store",
            &url,
            "--connector",
            "c",
            "--partition",
            r#"{"f":"a"}"#,
            "--offset",
            &format!(r#"{{"p":{p}}}"#),
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    };
    set(50);
    let backup = dir.path().join("backup.json");
    let out = cli(&[
        "export",
        "--store",
        &url,
        "--output",
        backup.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        std::fs::read_to_string(&backup)
            .unwrap()
            .contains("__connect-offsets-history")
    );
    set(99);
    let out = cli(&[
        "import",
        "--store",
        &url,
        "--input",
        backup.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("left out `__connect-offsets-history`"),
        "{}",
        text(&out.stderr)
    );
    let out = cli(&["history", "--store", &url, "--connector", "c", "--json"]);
    let h = text(&out.stdout);
    // Newest first: the import's move back from 99 to 50.
    let newest = h.find(r#""from":{"p":99},"to":{"p":50}"#);
    assert!(newest.is_some(), "{h}");
    assert!(newest < h.find(r#""from":{"p":50},"to":{"p":99}"#), "{h}");
}

/// A store takes a directory of its own: one that holds other files is refused, and left as it was
/// (its permissions were set to 0700 before: `rocksdb:///` locked every other user out of `/`).
#[test]
fn a_directory_with_other_files_is_not_made_a_store() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::write(shared.join("notes.txt"), "mine").unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
    let url = format!("rocksdb://{}", shared.display());
    let out = cli(&[
        "set",
        "--store",
        &url,
        "--connector",
        "c",
        "--partition",
        "null",
        "--offset",
        r#"{"p":1}"#,
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("is not empty and holds no RocksDB store"),
        "{}",
        text(&out.stderr)
    );
    let mode = std::fs::metadata(&shared).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755);
    assert_eq!(
        std::fs::read_dir(&shared).unwrap().count(),
        1,
        "files written into it"
    );
    // An empty one is fine, and made private.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let url = format!("rocksdb://{}", empty.display());
    let out = cli(&[
        "set",
        "--store",
        &url,
        "--connector",
        "c",
        "--partition",
        "null",
        "--offset",
        r#"{"p":1}"#,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::metadata(&empty).unwrap().permissions().mode() & 0o777,
        0o700
    );
}

/// `history` of a store that records none is an error naming the parameter, not an empty answer.
#[test]
fn history_of_a_store_without_history_says_how_to_keep_it() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("rocksdb://{}", dir.path().join("s").display());
    let set = cli(&[
        "set",
        "--store",
        &url,
        "--connector",
        "c",
        "--partition",
        r#"{"p":0}"#,
        "--offset",
        r#"{"o":1}"#,
    ]);
    assert!(set.status.success(), "{}", text(&set.stderr));
    let out = cli(&["history", "--store", &url, "--connector", "c"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("holds no history for connector `c`") && err.contains("?history=<retention>"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

/// History that starts with a tool's reset (over a Connect worker's store, whose own commits are
/// not recorded, the usual case) can undo that reset: the horizon is just before it.
#[test]
fn a_rewind_reaches_what_the_first_recorded_change_moved_from() {
    let dir = tempfile::tempdir().unwrap();
    let plain = format!("rocksdb://{}", dir.path().join("s").display());
    let recorded = format!("{plain}?history=7d");
    let p = r#"{"file":"a"}"#;
    let set = [
        "set",
        "--store",
        &plain,
        "--connector",
        "c",
        "--partition",
        p,
    ];
    ok(&cli(
        &[&set[..], &["--offset", r#"{"position":35}"#]].concat()
    ));
    ok(&cli(&[
        "reset",
        "--store",
        &recorded,
        "--connector",
        "c",
        "--partition",
        p,
    ]));
    let json = ok(&cli(&[
        "history",
        "--store",
        &recorded,
        "--connector",
        "c",
        "--json",
    ]));
    let field = |name: &str| {
        let at = json.find(&format!(r#""{name}":""#)).unwrap() + name.len() + 4;
        json[at..at + json[at..].find('"').unwrap()].to_string()
    };
    let (oldest, reset_at) = (field("oldest_reachable"), field("at"));
    assert!(
        oldest < reset_at,
        "the horizon is before the first record: {json}"
    );
    let out = ok(&cli(&[
        "rewind",
        "--store",
        &recorded,
        "--connector",
        "c",
        "--to",
        &oldest,
    ]));
    assert!(out.contains(r#"none -> {"position":35}"#), "{out}");
    let got = ok(&cli(&[
        "get",
        "--store",
        &plain,
        "--connector",
        "c",
        "--partition",
        p,
    ]));
    assert_eq!(
        got.trim(),
        r#"{"partition":{"file":"a"},"offset":{"position":35}}"#
    );
}

/// A write into memory:// from a command would be acknowledged and lost at exit: refused.
#[test]
fn set_and_import_into_memory_are_refused() {
    let doc = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        doc.path(),
        r#"{"offsets":[{"partition":{"f":1},"offset":{"p":1}}]}"#,
    )
    .unwrap();
    let input = doc.path().to_str().unwrap();
    for args in [
        &[
            "set",
            "--store",
            "memory://",
            "--connector",
            "c",
            "--partition",
            r#"{"f":1}"#,
            "--offset",
            r#"{"p":1}"#,
        ][..],
        &[
            "import",
            "--store",
            "memory://",
            "--connector",
            "c",
            "--input",
            input,
        ][..],
    ] {
        let out = cli(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            text(&out.stderr).contains("into memory:// would be lost when the command exits"),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    let dry = cli(&[
        "import",
        "--store",
        "memory://",
        "--connector",
        "c",
        "--input",
        input,
        "--dry-run",
    ]);
    assert!(
        dry.status.success(),
        "a dry run writes nothing: {}",
        text(&dry.stderr)
    );
}

/// Commands racing to open one new RocksDB store: each either writes or is refused as locked (the
/// error scripts retry on), never with another error, and every write that succeeded is there.
#[test]
fn racing_opens_of_one_rocksdb_store_are_refused_as_locked() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("rocksdb://{}", dir.path().join("db").display());
    let children: Vec<_> = (0..12)
        .map(|i| {
            std::process::Command::new(env!("CARGO_BIN_EXE_connect-offsets"))
                .args(["set", "--store", &url, "--connector", "c"])
                .args([
                    "--partition",
                    &format!(r#"{{"k":{i}}}"#),
                    "--offset",
                    r#"{"v":1}"#,
                ])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect::<Vec<_>>();
    let mut written = Vec::new();
    for (i, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        if out.status.success() {
            written.push(i);
        } else {
            let err = text(&out.stderr);
            assert!(err.contains("locked by another process"), "{i}: {err}");
        }
    }
    assert!(!written.is_empty());
    let list = text(&cli(&["list", "--store", &url, "--connector", "c"]).stdout);
    for i in written {
        assert!(list.contains(&format!(r#"{{"k":{i}}}"#)), "{i}: {list}");
    }
}

/// A dry run creates nothing: an import or a migration into a store not there yet is planned
/// against an empty one, and the store is still not there afterwards.
#[test]
fn dry_runs_into_a_new_store_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("doc.json");
    std::fs::write(
        &doc,
        r#"{"offsets":[{"partition":{"f":1},"offset":{"p":1}}]}"#,
    )
    .unwrap();
    let from = format!("rocksdb://{}", dir.path().join("from").display());
    let new = dir.path().join("new");
    let to = format!("rocksdb://{}", new.display());
    let import = |store: &str, dry: bool| {
        let mut args = vec!["import", "--store", store, "--connector", "c"];
        args.extend(["--input", doc.to_str().unwrap()]);
        if dry {
            args.push("--dry-run");
        }
        cli(&args)
    };
    assert!(import(&from, false).status.success());
    let out = import(&to, true);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("would import connector `c`: 1 set"),
        "{}",
        text(&out.stderr)
    );
    assert!(!new.exists(), "the dry import created the store");
    let out = cli(&["migrate", "--from", &from, "--to", &to, "--dry-run"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!new.exists(), "the dry migration created the store");
}
