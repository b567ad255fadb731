//! Writes the committed seed corpus, `fuzz/seeds/<target>/`, from the library's own encoders:
//! `cargo run --manifest-path fuzz/Cargo.toml --bin make_seeds`. Typed targets get canonical cases
//! (which the main crate's tests can replay), the others raw bytes.

use std::path::{Path, PathBuf};

use connect_offsets::internal::codec::json;
use connect_offsets::internal::fuzz_checks::{CaseFile, CaseFileKind, RoundtripCase, WalCase};
use connect_offsets::internal::wal::frame::{self, FrameKind};
use connect_offsets::{Batch, FieldMap, OffsetKey, Partition, Value};

fn main() -> std::io::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds");
    let write = |target: &str, name: &str, bytes: &[u8]| -> std::io::Result<()> {
        let dir: PathBuf = root.join(target);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(name), bytes)
    };

    // frame_decode
    let frames: Vec<Vec<u8>> = (1..=3)
        .map(|seq| frame(&batch(seq), FrameKind::Batch))
        .collect();
    write("frame_decode", "batch", &frames[0])?;
    write(
        "frame_decode",
        "snapshot",
        &frame(&batch(9), FrameKind::Snapshot),
    )?;
    write(
        "frame_decode",
        "empty-batch",
        &frame(&Batch::new("w", 1, []), FrameKind::Batch),
    )?;
    write(
        "frame_decode",
        "two-frames",
        &[&frames[0][..], &frames[1]].concat(),
    )?;
    write("frame_decode", "torn", &frames[0][..frames[0].len() / 2])?;
    let mut flipped = frames[0].clone();
    flipped[20] ^= 4;
    write("frame_decode", "flipped", &flipped)?;

    // wal_recovery
    let seg = |generation, bytes: Vec<u8>| CaseFile {
        kind: CaseFileKind::Segment,
        generation,
        bytes,
    };
    let file = |kind, generation, bytes: Vec<u8>| CaseFile {
        kind,
        generation,
        bytes,
    };
    let all = frames.concat();
    let wal = |name: &str, files: Vec<CaseFile>| {
        write(
            "wal_recovery",
            name,
            &WalCase { files, skip: None }.to_canonical(),
        )
    };
    wal("empty-dir", vec![])?;
    wal("one-segment", vec![seg(1, all.clone())])?;
    wal(
        "snapshot-and-segments",
        vec![
            seg(1, frames[0].clone()),
            file(
                CaseFileKind::Snapshot,
                2,
                frame(&batch(1), FrameKind::Snapshot),
            ),
            seg(3, frames[1].clone()),
            seg(4, frames[2].clone()),
        ],
    )?;
    wal(
        "torn-tail",
        vec![
            seg(1, frames[0].clone()),
            seg(2, [&frames[1][..], &frames[2][..10]].concat()),
            seg(3, vec![]),
        ],
    )?;
    // The store holds batches 1 and 2 of worker-1: recovery checks them without decoding them.
    write(
        "wal_recovery",
        "skip-applied",
        &WalCase {
            files: vec![
                file(
                    CaseFileKind::Snapshot,
                    1,
                    frame(&batch(1), FrameKind::Snapshot),
                ),
                seg(2, all.clone()),
            ],
            skip: Some(("worker-1".into(), 2)),
        }
        .to_canonical(),
    )?;
    wal(
        "zero-tail",
        vec![seg(1, [&all[..], &[0u8; 64][..]].concat())],
    )?;
    let mut bad = all.clone();
    bad[frames[0].len() + 20] ^= 1;
    wal("corrupt-middle", vec![seg(1, bad)])?;
    wal(
        "unfinished-and-foreign",
        vec![
            file(CaseFileKind::Unfinished, 5, frames[0][..7].to_vec()),
            file(CaseFileKind::Other, 6, b"not a log".to_vec()),
            seg(7, all.clone()),
        ],
    )?;

    // connect_decode: key, 0xFF, value.
    let kv = |k: &[u8], v: &[u8]| [k, &[0xFF][..], v].concat();
    let mut decode_seeds = vec![
        (
            "file-source",
            kv(
                br#"["local-file-source",{"filename":"/tmp/test.txt"}]"#,
                br#"{"position":1234}"#,
            ),
        ),
        ("null-partition-reset", kv(br#"["c",null]"#, b"null")),
        (
            "jackson-variants",
            kv(
                b" [ \"c\\/\\u00e9\" , { \"a\" : 007 , \"b\":true } ] ",
                b" { \"a\" : -0.0 , \"b\":\"\\uD83D\\uDE00\\n\" , \"c\": 1.5e2, \"a\": 8 } ",
            ),
        ),
        (
            "nested-refused",
            kv(br#"["c",{"a":[1]}]"#, br#"{"o":{"x":1}}"#),
        ),
    ];
    // Real Connect bytes: the first vectors of tests/vectors/connect-json.jsonl.
    let vectors = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors/connect-json.jsonl"),
    )?;
    for (i, line) in vectors.lines().take(3).enumerate() {
        let json::Json::Object(members) = json::parse(line.as_bytes()).expect("a vector line")
        else {
            panic!("a vector line is an object")
        };
        let b64 = |name: &str| {
            members
                .iter()
                .find_map(|(n, v)| match v {
                    json::Json::String(s) if n == name => Some(unbase64(s)),
                    _ => None,
                })
                .expect("the field is there")
        };
        decode_seeds.push((
            ["vector-1", "vector-2", "vector-3"][i],
            kv(&b64("key_b64"), &b64("value_b64")),
        ));
    }
    for (name, bytes) in decode_seeds {
        write("connect_decode", name, &bytes)?;
    }

    // connect_roundtrip
    let rt = |name: &str, entries: Vec<(OffsetKey, Option<FieldMap>)>| {
        write(
            "connect_roundtrip",
            name,
            &RoundtripCase { entries }.to_canonical(),
        )
    };
    rt("batch", batch(1).entries.into_iter().collect())?;
    rt(
        "every-value",
        vec![(
            OffsetKey::new(
                "every-value",
                Partition::new()
                    .with("null", Value::Null)
                    .with("bool", true)
                    .with("int", i64::MIN)
                    .with("float", 1e-3)
                    .with("big", 1e7)
                    .with("bytes", vec![0u8, 255, 7]),
            ),
            Some(
                FieldMap::new()
                    .with("nan", f64::NAN)
                    .with("inf", f64::NEG_INFINITY)
                    .with("zero", -0.0)
                    .with("tiny", 5e-324)
                    .with("s", "a\"b\\c\u{1}\u{7f}\u{2028}😀"),
            ),
        )],
    )?;
    rt(
        "null-partition",
        vec![(OffsetKey::null_partition(""), Some(FieldMap::new()))],
    )?;

    // crash_replay: three bytes an operation (see scenario::Op::decode_all). 0..=6 offer key b,
    // 7 reset key b, 8..=10 commit (b even: store durability), 11 crash at point b (skip and torn
    // from the third byte), 13 reopen, 15 override b % 3 (third byte's high bit: crash its open).
    let ops: [(&str, &[u8]); 7] = [
        (
            "offer-commit-reopen",
            &[0, 0, 0, 0, 1, 0, 8, 0, 0, 0, 2, 0, 8, 1, 0, 13, 0, 0],
        ),
        (
            "torn-write",
            &[0, 0, 0, 11, 1, 20, 8, 1, 0, 0, 1, 0, 8, 0, 0],
        ),
        (
            "crash-after-sync",
            &[0, 3, 0, 11, 3, 0, 8, 1, 0, 0, 4, 0, 8, 0, 0],
        ),
        (
            "crash-inside-apply",
            &[0, 0, 0, 0, 5, 0, 11, 5, 0, 8, 0, 0, 7, 0, 0, 8, 0, 0],
        ),
        (
            "crash-in-recovery",
            &[0, 1, 0, 8, 0, 0, 11, 10, 1, 13, 0, 0, 0, 2, 0, 8, 0, 0],
        ),
        (
            "rotation-and-compaction",
            &[
                0, 0, 0, 0, 1, 0, 0, 2, 0, 8, 0, 0, 0, 3, 0, 0, 4, 0, 0, 5, 0, 8, 1, 0, 11, 8, 1,
                0, 0, 0, 8, 0, 0, 0, 1, 0, 0, 2, 0, 8, 0, 0, 11, 9, 0, 0, 3, 0, 8, 1, 0, 13, 0, 0,
            ],
        ),
        (
            "override-crash-inside-apply",
            &[
                0, 1, 0, 8, 0, 0, 15, 0, 0x90, 0, 2, 0, 8, 0, 0, 15, 0, 0x90, 13, 0, 0, 15, 1, 0, 0,
                3, 0, 8, 1, 0,
            ],
        ),
    ];
    for (name, bytes) in ops {
        write("crash_replay", name, bytes)?;
    }

    // url_and_config: URL, 0xFF, property name, 0xFF, value.
    let uc = |u: &str, n: &str, v: &str| {
        [u.as_bytes(), &[0xFF], n.as_bytes(), &[0xFF], v.as_bytes()].concat()
    };
    let url_seeds = [
        ("memory", uc("memory://", "offsets.durability", "store")),
        (
            "rocksdb",
            uc(
                "rocksdb:///var/lib/offsets?sync=true",
                "offset.flush.interval.ms",
                "500",
            ),
        ),
        (
            "kafka-secret",
            uc(
                "kafka://h1:9092,h2:9092/connect-offsets?partitions=25&sasl.password=hunter2&x=%20y",
                "offsets.when.full",
                "reject",
            ),
        ),
        (
            "bad-escape",
            uc("memory://?a=%zz", "offsets.segment.bytes", "4096"),
        ),
        ("no-scheme", uc("/tmp/offsets", "offsets.recovery", "skip")),
        ("writer", uc("MEMORY://", "offsets.writer", "worker-1")),
    ];
    for (name, bytes) in url_seeds {
        write("url_and_config", name, &bytes)?;
    }
    println!("seeds written under {}", root.display());
    Ok(())
}

fn batch(seq: u64) -> Batch {
    Batch::new(
        "worker-1",
        seq,
        [
            (
                OffsetKey::new(
                    "file-source",
                    Partition::new().with("filename", "/tmp/a.txt"),
                ),
                Some(FieldMap::new().with("position", 1000 * seq as i64)),
            ),
            (
                OffsetKey::new(
                    "jdbc",
                    Partition::new().with("table", "orders").with("shard", 3),
                ),
                Some(FieldMap::new().with("lsn", 2.5).with("ts", "2024-01-01")),
            ),
            (OffsetKey::null_partition("gone"), None),
        ],
    )
}

fn frame(batch: &Batch, kind: FrameKind) -> Vec<u8> {
    let mut out = Vec::new();
    frame::encode(kind, batch, &mut out);
    out
}

/// Standard padded Base64 (the vectors file), without another dependency.
fn unbase64(s: &str) -> Vec<u8> {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes().filter(|c| *c != b'=') {
        let v = A.iter().position(|a| *a == c).expect("base64") as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}
