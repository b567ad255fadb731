//! `connect-offsets wal inspect` and `wal repair` on logs written by a real commit buffer.

use crate::cli_util;
use crate::http_util;
use cli_util::{cli, text};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig, Durability};
use connect_offsets::internal::codec::json::{self, Json};
use connect_offsets::store::MemoryStore;
use connect_offsets::{Offset, OffsetKey, OffsetStore, Partition};

fn member<'a>(j: &'a Json, name: &str) -> &'a Json {
    let Json::Object(m) = j else {
        panic!("not an object: {j:?}")
    };
    &m.iter()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("no `{name}` in {j:?}"))
        .1
}

/// Writes `batches` commits of 3 offsets each through a commit buffer, and leaves the log with
/// every batch in it (the buffer is dropped without closing, as a crash would leave it).
fn write_log(dir: &Path, batches: u64) -> Arc<dyn OffsetStore> {
    let store: Arc<dyn OffsetStore> = Arc::new(MemoryStore::new());
    let mut cfg = CommitBufferConfig::new(dir);
    cfg.writer = "w1".into();
    cfg.flush_interval = None;
    let buffer = CommitBuffer::open(Arc::clone(&store), cfg).unwrap();
    for seq in 1..=batches {
        for p in 0..3 {
            let key = OffsetKey::new(
                if p == 2 { "other" } else { "files" },
                Partition::new().with("file", format!("/data/{p}.txt")),
            );
            buffer
                .offer(key, Offset::new().with("position", (seq * 100 + p) as i64))
                .unwrap();
        }
        buffer.commit_with(Durability::Local).wait().unwrap();
    }
    drop(buffer);
    store
}

fn segment(dir: &Path) -> PathBuf {
    let mut segs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal") && p.metadata().unwrap().len() > 0)
        .collect();
    segs.sort();
    segs.pop().expect("a non-empty segment")
}

fn inspect_json(dir: &Path) -> (Option<i32>, Json) {
    let out = cli(&["wal", "inspect", "--dir", dir.to_str().unwrap(), "--json"]);
    let j = json::parse(text(&out.stdout).trim().as_bytes())
        .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)));
    (out.status.code(), j)
}

#[test]
fn inspect_lists_every_frame() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("wal");
    write_log(&dir, 3);
    let (code, j) = inspect_json(&dir);
    assert_eq!(code, Some(0));
    assert_eq!(member(&j, "intact"), &Json::Int(3));
    assert_eq!(member(&j, "corrupt"), &Json::Int(0));
    assert_eq!(member(&j, "torn"), &Json::Bool(false));
    let Json::Array(frames) = member(&j, "frames") else {
        panic!()
    };
    let seqs: Vec<&Json> = frames.iter().map(|f| member(f, "seq")).collect();
    assert_eq!(seqs, [&Json::Int(1), &Json::Int(2), &Json::Int(3)]);
    for f in frames {
        assert_eq!(member(f, "writer"), &Json::String("w1".into()));
        assert_eq!(member(f, "entries"), &Json::Int(3));
        assert_eq!(member(f, "crc_ok"), &Json::Bool(true));
        assert_eq!(member(f, "kind"), &Json::String("batch".into()));
        assert_eq!(
            member(f, "connectors"),
            &Json::Array(vec![
                Json::String("files".into()),
                Json::String("other".into())
            ])
        );
    }
    // The table form names the same frames.
    let out = cli(&["wal", "inspect", "--dir", dir.to_str().unwrap()]);
    let table = text(&out.stdout);
    assert!(
        table.starts_with("FILE\tOFFSET\tLENGTH\tKIND\tCRC"),
        "{table}"
    );
    assert_eq!(table.lines().count(), 4, "{table}");
    assert!(
        text(&out.stderr).contains("writer w1 seqs 1..3"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_torn_tail_is_reported_and_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("wal");
    write_log(&dir, 2);
    let seg = segment(&dir);
    let len = seg.metadata().unwrap().len();
    // Half of a third frame: what a crash in the middle of a write leaves.
    let bytes = std::fs::read(&seg).unwrap();
    let mut torn = bytes.clone();
    torn.extend_from_slice(&bytes[..bytes.len() / 4]);
    std::fs::write(&seg, &torn).unwrap();
    let (code, j) = inspect_json(&dir);
    assert_eq!(code, Some(0), "a torn tail alone is not corruption");
    assert_eq!(member(&j, "torn"), &Json::Bool(true));
    let out = cli(&["wal", "repair", "--dir", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains(&format!("cut torn tail: {} at byte {len}", seg.display())),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(seg.metadata().unwrap().len(), len);
    let out = cli(&["wal", "repair", "--dir", dir.to_str().unwrap()]);
    assert!(text(&out.stdout).contains("nothing to repair"));
}

#[test]
fn corruption_needs_quarantine_and_then_the_buffer_opens() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("wal");
    write_log(&dir, 3);
    let seg = segment(&dir);
    let mut bytes = std::fs::read(&seg).unwrap();
    let scan = connect_offsets::internal::wal::inspect::scan(&dir).unwrap();
    let second = scan.frames().nth(1).unwrap().offset as usize;
    bytes[second + 20] ^= 0x55; // inside the second frame's payload
    std::fs::write(&seg, &bytes).unwrap();

    let (code, j) = inspect_json(&dir);
    assert_eq!(code, Some(4), "corruption exits 4");
    assert_eq!(member(&j, "corrupt"), &Json::Int(1));
    let Json::Array(frames) = member(&j, "frames") else {
        panic!()
    };
    assert_eq!(
        member(&frames[1], "status"),
        &Json::String("corrupt".into())
    );
    assert_eq!(member(&frames[1], "crc_ok"), &Json::Bool(false));
    assert_eq!(member(&frames[1], "offset"), &Json::Int(second as i64));

    // Without --quarantine: refused, naming the file and offset, nothing changed.
    let out = cli(&["wal", "repair", "--dir", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(4));
    let err = text(&out.stderr);
    assert!(
        err.contains(&seg.display().to_string())
            && err.contains(&format!("at byte {second}"))
            && err.contains("--quarantine"),
        "{err}"
    );
    assert_eq!(std::fs::read(&seg).unwrap(), bytes);

    // What reads the log beside a store says so, instead of going by the intact frames alone
    // (the corrupt one may be a batch the store lacks).
    let db = tmp.path().join("db");
    let db_url = format!("rocksdb://{}", db.display());
    let set = cli(&[
        "set",
        "--store",
        &db_url,
        "--connector",
        "files",
        "--partition",
        "null",
        "--offset",
        r#"{"p":1}"#,
    ]);
    assert!(set.status.success(), "{}", text(&set.stderr));
    let out = cli(&[
        "lag",
        "--store",
        &db_url,
        "--wal-dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("corrupt region"),
        "{}",
        text(&out.stderr)
    );
    let serve = http_util::Serve::start(&["--store", &db_url, "--wal-dir", dir.to_str().unwrap()]);
    let (st, body) = http_util::request("DELETE", &serve.url("/connectors/files/offsets"), None);
    assert_eq!(st, 409, "{body}");
    assert!(
        body.contains("corrupt region") && body.contains("wal repair"),
        "{body}"
    );
    drop(serve);

    // A running writer holds the log (its LOCK): repair refuses.
    let copy = tmp.path().join("copy");
    std::fs::create_dir_all(&copy).unwrap();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, copy.join(p.file_name().unwrap())).unwrap();
    }
    let fs = connect_offsets::internal::fs::RealFs;
    let lock = connect_offsets::internal::fs::WalFs::lock(&fs, &copy).unwrap();
    let out = cli(&[
        "wal",
        "repair",
        "--dir",
        copy.to_str().unwrap(),
        "--quarantine",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("locked by another process"),
        "{}",
        text(&out.stderr)
    );
    drop(lock);

    // A dead-letter file that is one of the log's own files would be replaced with it: refused.
    let own = copy.join(seg.file_name().unwrap());
    let before = std::fs::read(&own).unwrap();
    let out = cli(&[
        "wal",
        "repair",
        "--dir",
        copy.to_str().unwrap(),
        "--quarantine",
        "--dead-letter",
        own.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("one of the log's own files"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read(&own).unwrap(),
        before,
        "the refused repair changed the log"
    );

    // With --quarantine: the bad frame goes to the dead-letter file and out of the log.
    let out = cli(&[
        "wal",
        "repair",
        "--dir",
        copy.to_str().unwrap(),
        "--quarantine",
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("batches 2..2 of writer `w1` are missing from the log"),
        "repair says what a writer will refuse: {}",
        text(&out.stderr)
    );
    let j = json::parse(text(&out.stdout).trim().as_bytes()).unwrap();
    let Json::Array(q) = member(&j, "quarantined") else {
        panic!()
    };
    assert_eq!(q.len(), 1);
    let letters = std::fs::read_to_string(copy.join("dead-letter.jsonl")).unwrap();
    assert_eq!(letters.lines().count(), 1);
    assert!(
        letters.contains("\"source\":\"wal\"") && letters.contains("checksum mismatch"),
        "{letters}"
    );
    // Inspect no longer calls the log whole: seq 2 is missing from the chain (exit 4).
    let (code, j) = inspect_json(&copy);
    assert_eq!(code, Some(4));
    assert_eq!(member(&j, "intact"), &Json::Int(2));
    assert_eq!(member(&j, "corrupt"), &Json::Int(0));
    let Json::Array(gaps) = member(&j, "gaps") else {
        panic!()
    };
    assert_eq!(gaps.len(), 1, "{gaps:?}");
    assert_eq!(member(&gaps[0], "first"), &Json::Int(2));
    assert_eq!(member(&gaps[0], "last"), &Json::Int(2));

    // The log now lacks seq 2: a buffer on a store that holds seq 1..3 opens fine; one whose store
    // lacks them refuses with the default policy (recovery names the gap).
    let store: Arc<dyn OffsetStore> = Arc::new(MemoryStore::new());
    let mut cfg = CommitBufferConfig::new(&copy);
    cfg.writer = "w1".into();
    let e = CommitBuffer::open(store, cfg).unwrap_err().to_string();
    assert!(e.contains("in neither the store nor the log"), "{e}");
}

/// A length field that rot made point past the end of the newest segment is corruption, not a torn
/// tail: for a frame in the middle (intact frames follow) and for the last frame (nothing follows,
/// but its header fails its checksum). Inspect exits 4, repair refuses, nothing is cut.
#[test]
fn a_rotted_length_in_the_newest_segment_is_corruption() {
    for victim in [1, 2] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("wal");
        write_log(&dir, 3);
        let seg = segment(&dir);
        let scan = connect_offsets::internal::wal::inspect::scan(&dir).unwrap();
        let at = scan.frames().nth(victim).unwrap().offset as usize;
        let mut bytes = std::fs::read(&seg).unwrap();
        bytes[at + 10] ^= 0x08; // the length's third byte: +512 KiB
        std::fs::write(&seg, &bytes).unwrap();

        let (code, j) = inspect_json(&dir);
        assert_eq!(code, Some(4), "frame {victim}: {j:?}");
        assert_eq!(member(&j, "torn"), &Json::Bool(false), "frame {victim}");
        assert_eq!(member(&j, "corrupt"), &Json::Int(1), "frame {victim}");
        let out = cli(&["wal", "repair", "--dir", dir.to_str().unwrap()]);
        assert_eq!(
            out.status.code(),
            Some(4),
            "frame {victim}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains(&format!("{}", seg.display())),
            "{}",
            text(&out.stderr)
        );
        assert_eq!(
            std::fs::read(&seg).unwrap(),
            bytes,
            "frame {victim}: nothing changed"
        );
    }
}

/// A segment linked into the log directory is read, not left out as if the log were empty.
#[test]
fn a_linked_segment_is_part_of_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real");
    write_log(&real, 3);
    let seg = segment(&real);
    let dir = tmp.path().join("wal");
    std::fs::create_dir(&dir).unwrap();
    std::os::unix::fs::symlink(&seg, dir.join(seg.file_name().unwrap())).unwrap();
    let (code, j) = inspect_json(&dir);
    assert_eq!(code, Some(0));
    assert_eq!(member(&j, "intact"), &Json::Int(3));
}

/// `lag --wal-dir` counts each connector's own entries of a batch the store has not applied, not
/// the whole batch once per connector it touches.
#[test]
fn lag_counts_each_connectors_unapplied_entries() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("wal");
    write_log(&dir, 4); // per batch: 2 entries of `files`, 1 of `other`
    let out = cli(&[
        "lag",
        "--store",
        "memory://",
        "--wal-dir",
        dir.to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let got = text(&out.stdout);
    for (name, n) in [("files", 8), ("other", 4)] {
        assert!(
            got.contains(&format!(r#""name":"{name}","#))
                && got.contains(&format!(
                    r#""name":"{name}","partitions":0,"sink_partitions":0,"commit_age_s":"#
                )),
            "{got}"
        );
        let at = got.find(&format!(r#""name":"{name}""#)).unwrap();
        assert!(
            got[at..].contains(&format!(r#""unapplied_entries":{n},"#)),
            "{name}: {got}"
        );
    }
}
