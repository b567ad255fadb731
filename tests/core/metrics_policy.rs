//! Metrics recorded by a real commit buffer through the Prometheus exporter, and reset policies
//! applied through a buffer.

use std::sync::Arc;
use std::time::Duration;

use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig, Durability};
use connect_offsets::policy::{DeadLetterFile, NoBounds, ResetPolicies, SourceBounds, Unusable};
use connect_offsets::store::{MemoryStore, OffsetStoreExt};
use connect_offsets::{Offset, OffsetKey, OffsetStore, Partition, Result};

/// The value of the first sample line starting with `series` (name and labels).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[test]
fn the_exporter_sees_commits_lag_wal_and_replay() {
    let handle = connect_offsets::metrics::install().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn OffsetStore> = Arc::new(MemoryStore::new());
    let mut cfg = CommitBufferConfig::new(tmp.path().join("wal"));
    cfg.writer = "metrics-w".into();
    cfg.flush_interval = None;
    let buffer = Arc::new(CommitBuffer::open(Arc::clone(&store), cfg.clone()).unwrap());
    connect_offsets::metrics::watch(&buffer);
    for i in 0..10 {
        buffer
            .offer(
                OffsetKey::new("orders", Partition::new().with("p", i)),
                Offset::new().with("pos", i),
            )
            .unwrap();
        buffer.commit_with(Durability::Store).wait().unwrap();
    }
    // Pending, uncommitted offers of one connector: its age grows; the other's is 0.
    buffer
        .offer(
            OffsetKey::new("clicks", Partition::new().with("p", 0)),
            Offset::new().with("pos", 1),
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(30));
    let text = handle.render();
    let w = "writer=\"metrics-w\"";
    assert_eq!(
        sample(&text, &format!("connect_offsets_commits_total{{{w}}}")),
        Some(10.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            &format!("connect_offsets_commit_duration_seconds_count{{{w}}}")
        ),
        Some(10.0)
    );
    let avg = sample(
        &text,
        &format!("connect_offsets_offset_commit_avg_time_ms{{{w}}}"),
    )
    .unwrap();
    let max = sample(
        &text,
        &format!("connect_offsets_offset_commit_max_time_ms{{{w}}}"),
    )
    .unwrap();
    assert!(avg > 0.0 && max >= avg, "avg {avg} max {max}");
    assert_eq!(
        sample(&text, &format!("connect_offsets_pending_offsets{{{w}}}")),
        Some(1.0)
    );
    let age = sample(
        &text,
        &format!(
            "connect_offsets_connector_oldest_pending_age_seconds{{connector=\"clicks\",{w}}}"
        ),
    )
    .unwrap();
    assert!(age >= 0.03, "clicks has waited 30 ms: {age}\n{text}");
    assert_eq!(
        sample(
            &text,
            &format!(
                "connect_offsets_connector_oldest_pending_age_seconds{{connector=\"orders\",{w}}}"
            )
        ),
        Some(0.0)
    );
    assert!(sample(&text, &format!("connect_offsets_wal_bytes{{{w}}}")).unwrap() > 0.0);
    assert!(sample(&text, &format!("connect_offsets_wal_segments{{{w}}}")).unwrap() >= 1.0);

    // Committed: the age drops to 0.
    buffer.commit_with(Durability::Local).wait().unwrap();
    let text = handle.render();
    assert_eq!(
        sample(
            &text,
            &format!(
                "connect_offsets_connector_oldest_pending_age_seconds{{connector=\"clicks\",{w}}}"
            )
        ),
        Some(0.0)
    );
    // A crash (drop without close) and a reopen on a fresh store replays the log.
    drop(buffer);
    let fresh: Arc<dyn OffsetStore> = Arc::new(MemoryStore::new());
    let reopened = CommitBuffer::open(fresh, cfg).unwrap();
    let text = handle.render();
    let replayed = sample(
        &text,
        &format!("connect_offsets_replayed_batches_total{{{w}}}"),
    )
    .unwrap();
    assert!(replayed >= 1.0, "{text}");
    drop(reopened);
}

struct Bounds;
impl SourceBounds for Bounds {
    fn earliest(&self, _: &OffsetKey) -> Result<Option<Offset>> {
        Ok(Some(Offset::new().with("pos", 0)))
    }
    fn latest(&self, _: &OffsetKey) -> Result<Option<Offset>> {
        Ok(Some(Offset::new().with("pos", 1000)))
    }
}

#[test]
fn policies_replace_unusable_offsets_through_the_buffer() {
    let handle = connect_offsets::metrics::install().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn OffsetStore> = Arc::new(MemoryStore::new());
    let key = |c: &str| OffsetKey::new(c, Partition::new().with("file", "/var/log/app.log"));
    // Offsets that the source no longer has (negative positions, say).
    for c in ["a-fail", "a-skip", "a-earliest", "a-latest", "a-good"] {
        let pos = if c == "a-good" { 7 } else { -1 };
        store.set(key(c), Offset::new().with("pos", pos)).unwrap();
    }
    let mut cfg = CommitBufferConfig::new(tmp.path().join("wal"));
    cfg.flush_interval = None;
    let buffer = CommitBuffer::open(Arc::clone(&store), cfg).unwrap();
    let dl = DeadLetterFile::new(tmp.path().join("dead-letter.jsonl"));
    let policies = ResetPolicies::parse("fail,a-skip=skip,a-earliest=earliest,a-latest=latest")
        .unwrap()
        .with_dead_letter(dl.clone());
    let check = |o: &Offset| match o.get("pos") {
        Some(connect_offsets::Value::Int(p)) if *p >= 0 => Ok(()),
        _ => Err((Unusable::Gone, "the file was rotated away".to_string())),
    };
    assert_eq!(
        policies
            .load(&buffer, &key("a-good"), check, &Bounds)
            .unwrap(),
        Some(Offset::new().with("pos", 7))
    );
    let e = policies
        .load(&buffer, &key("a-fail"), check, &Bounds)
        .unwrap_err()
        .to_string();
    assert!(e.contains("a-fail") && e.contains("rotated away"), "{e}");
    assert_eq!(
        policies
            .load(&buffer, &key("a-skip"), check, &Bounds)
            .unwrap(),
        None
    );
    assert_eq!(
        policies
            .load(&buffer, &key("a-earliest"), check, &Bounds)
            .unwrap(),
        Some(Offset::new().with("pos", 0))
    );
    assert_eq!(
        policies
            .load(&buffer, &key("a-latest"), check, &Bounds)
            .unwrap(),
        Some(Offset::new().with("pos", 1000))
    );
    let e = policies
        .load(
            &buffer,
            &key("a-latest"),
            |_| Err((Unusable::Invalid, "x".into())),
            &NoBounds,
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("needs the source's latest position"), "{e}");
    // The replacements are committed like any offer.
    buffer.commit_with(Durability::Store).wait().unwrap();
    assert_eq!(store.get(&key("a-skip")).unwrap(), None);
    assert_eq!(
        store.get(&key("a-latest")).unwrap(),
        Some(Offset::new().with("pos", 1000))
    );
    assert_eq!(
        store.get(&key("a-fail")).unwrap(),
        Some(Offset::new().with("pos", -1)),
        "fail changes nothing"
    );
    let letters = std::fs::read_to_string(dl.path()).unwrap();
    assert_eq!(letters.lines().count(), 1);
    assert!(
        letters.contains("a-skip") && letters.contains("\"policy\""),
        "{letters}"
    );
    let text = handle.render();
    for (c, p) in [
        ("a-fail", "fail"),
        ("a-skip", "skip"),
        ("a-earliest", "earliest"),
    ] {
        let series = format!(
            "connect_offsets_offset_resets_total{{connector=\"{c}\",policy=\"{p}\",reason=\"gone\"}}"
        );
        assert_eq!(sample(&text, &series), Some(1.0), "{series}\n{text}");
    }
    assert!(
        sample(
            &text,
            "connect_offsets_dead_letter_records_total{source=\"policy\"}"
        )
        .unwrap()
            >= 1.0
    );
    buffer.close().unwrap();
}
