//! Metrics: what the crate records through the [`metrics`] facade, and a Prometheus text
//! exporter.
//!
//! Everything is recorded through the `metrics` facade, so any recorder works. Without a recorder
//! installed the calls cost next to nothing. `install` (feature `prometheus`) installs
//! `metrics-exporter-prometheus`'s recorder (without its HTTP
//! listener) and returns a `PrometheusHandle` whose `render` gives the
//! Prometheus text format (version 0.0.4); the `connect-offsets serve` command serves it at
//! `/metrics`.
//!
//! This module is a leaf: it takes plain numbers and knows nothing of the buffer, the log or the
//! stores. They call its functions, and a buffer reports its gauges through [`Sampled`].
//!
//! | metric | type | labels | recorded |
//! |---|---|---|---|
//! | `connect_offsets_commits_total` | counter | `writer` | each flush the log synced |
//! | `connect_offsets_commit_failures_total` | counter | `stage` (`log`, `store`), `writer` | each failed flush or store apply |
//! | `connect_offsets_commit_duration_seconds` | histogram | `writer` | seal to sync, successes only |
//! | `connect_offsets_offset_commit_avg_time_ms` | gauge | `writer` | like Connect's `offset-commit-avg-time-ms`, but since open |
//! | `connect_offsets_offset_commit_max_time_ms` | gauge | `writer` | like Connect's `offset-commit-max-time-ms`, but since open |
//! | `connect_offsets_replayed_batches_total` | counter | `writer` | batches replayed from the log at open |
//! | `connect_offsets_wal_bytes` / `connect_offsets_wal_segments` | gauge | `writer` | after each commit |
//! | `connect_offsets_pending_offsets` | gauge | `writer` | sampled from watched buffers |
//! | `connect_offsets_oldest_pending_age_seconds` | gauge | `writer` | sampled from watched buffers |
//! | `connect_offsets_connector_oldest_pending_age_seconds` | gauge | `connector`, `writer` | age of the oldest uncommitted offer per connector (source-side lag), sampled from every open buffer; when tracking is on |
//! | `connect_offsets_dead_letter_records_total` | counter | `source` (`wal`, `kafka`, `policy`) | each record written to a dead-letter file |
//! | `connect_offsets_offset_resets_total` | counter | `connector`, `policy`, `reason` | each use of a [reset policy](crate::policy) |
//! | `connect_offsets_connector_stalled` | gauge | `connector`, `writer` | 1 while the connector commits but its offsets have not moved for `offsets.stall.after` ([`crate::alarms`]) |
//! | `connect_offsets_connector_unmoved_seconds` | gauge | `connector`, `writer` | time since one of its offsets last moved |
//! | `connect_offsets_backward_moves_total` | counter | `connector`, `writer` | commits that moved an offset backwards outside a reset |
//! | `connect_offsets_expired_total` | counter | `connector` | each partition reset because it was stale ([`crate::expire`]: the CLI's or a buffer's automatic expiry) |
//!
//! Gauges that would cost something on every offer are pulled instead: [`watch`] a buffer and its
//! pending count and age are sampled by [`sample`] (which `PrometheusHandle::render` calls). The
//! per-connector age needs one map lookup per offer (in the buffer's own state, under the lock the
//! offer takes anyway), so it is off until `install` or [`track_connector_age`] turns it on.
//!
//! Connect's `offset-commit-*-time-ms` are averaged over a sliding window; ours are since the buffer
//! opened (the histogram gives windows to anyone who wants them, with `rate()`).
//!
//! ```
//! let handle = connect_offsets::metrics::install()?;
//! let text = handle.render();
//! assert!(text.contains("# TYPE connect_offsets_commits_total counter"));
//! # Ok::<(), connect_offsets::Error>(())
//! ```

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use ::metrics::Unit;

use recorded::record_alarms;

#[cfg(feature = "prometheus")]
mod prometheus;
pub(crate) mod recorded;
#[cfg(feature = "prometheus")]
pub use prometheus::{PrometheusHandle, install};

/// Metric names.
pub mod names {
    /// Flushes the log synced.
    pub const COMMITS: &str = "connect_offsets_commits_total";
    /// Flushes or store applies that failed.
    pub const COMMIT_FAILURES: &str = "connect_offsets_commit_failures_total";
    /// Seal-to-sync time of successful flushes.
    pub const COMMIT_DURATION: &str = "connect_offsets_commit_duration_seconds";
    /// Mean flush time since open, milliseconds (Connect: `offset-commit-avg-time-ms`).
    pub const COMMIT_AVG_MS: &str = "connect_offsets_offset_commit_avg_time_ms";
    /// Longest flush since open, milliseconds (Connect: `offset-commit-max-time-ms`).
    pub const COMMIT_MAX_MS: &str = "connect_offsets_offset_commit_max_time_ms";
    /// Batches replayed from the write-ahead log when a buffer opened.
    pub const REPLAYED_BATCHES: &str = "connect_offsets_replayed_batches_total";
    /// Bytes the write-ahead log holds.
    pub const WAL_BYTES: &str = "connect_offsets_wal_bytes";
    /// Segment files the write-ahead log holds (including the active one).
    pub const WAL_SEGMENTS: &str = "connect_offsets_wal_segments";
    /// Distinct keys offered and not yet sealed.
    pub const PENDING: &str = "connect_offsets_pending_offsets";
    /// Age of the oldest offer not yet sealed, per buffer.
    pub const OLDEST_PENDING_AGE: &str = "connect_offsets_oldest_pending_age_seconds";
    /// Age of the oldest uncommitted offer, per connector: source-side lag.
    pub const CONNECTOR_PENDING_AGE: &str = "connect_offsets_connector_oldest_pending_age_seconds";
    /// Highest seq synced to the log.
    pub const LOGGED_SEQ: &str = "connect_offsets_logged_seq";
    /// Highest seq the store applied.
    pub const APPLIED_SEQ: &str = "connect_offsets_applied_seq";
    /// Records written to a dead-letter file.
    pub const DEAD_LETTERS: &str = "connect_offsets_dead_letter_records_total";
    /// Uses of a reset policy.
    pub const OFFSET_RESETS: &str = "connect_offsets_offset_resets_total";
    /// Partitions reset because they were stale.
    pub const EXPIRED: &str = "connect_offsets_expired_total";
    /// 1 while a connector commits but its offsets have not moved for `stall_after`.
    pub const CONNECTOR_STALLED: &str = "connect_offsets_connector_stalled";
    /// How long a connector's offsets have not moved.
    pub const CONNECTOR_UNMOVED: &str = "connect_offsets_connector_unmoved_seconds";
    /// Commits that moved one of a connector's offsets backwards.
    pub const BACKWARD_MOVES: &str = "connect_offsets_backward_moves_total";
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    #[cfg_attr(not(feature = "prometheus"), allow(dead_code))]
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// Every metric of the crate: name, type, unit and help text.
const DESCRIPTIONS: &[(&str, Kind, Option<Unit>, &str)] = &[
    (
        names::COMMITS,
        Kind::Counter,
        None,
        "Flushes of the commit buffer that the log synced.",
    ),
    (
        names::COMMIT_FAILURES,
        Kind::Counter,
        None,
        "Flushes that failed to reach the log (stage=log) or store applies that failed and are retried (stage=store).",
    ),
    (
        names::COMMIT_DURATION,
        Kind::Histogram,
        Some(Unit::Seconds),
        "Seal-to-sync time of successful flushes.",
    ),
    (
        names::COMMIT_AVG_MS,
        Kind::Gauge,
        Some(Unit::Milliseconds),
        "Mean flush time since the buffer opened (Kafka Connect: offset-commit-avg-time-ms).",
    ),
    (
        names::COMMIT_MAX_MS,
        Kind::Gauge,
        Some(Unit::Milliseconds),
        "Longest flush since the buffer opened (Kafka Connect: offset-commit-max-time-ms).",
    ),
    (
        names::REPLAYED_BATCHES,
        Kind::Counter,
        None,
        "Batches replayed from the write-ahead log into the store when the buffer opened.",
    ),
    (
        names::WAL_BYTES,
        Kind::Gauge,
        Some(Unit::Bytes),
        "Bytes held by the write-ahead log.",
    ),
    (
        names::WAL_SEGMENTS,
        Kind::Gauge,
        None,
        "Segment files held by the write-ahead log, the active one included.",
    ),
    (
        names::PENDING,
        Kind::Gauge,
        None,
        "Distinct keys offered and not yet sealed.",
    ),
    (
        names::OLDEST_PENDING_AGE,
        Kind::Gauge,
        Some(Unit::Seconds),
        "Age of the oldest offer not yet sealed into a batch.",
    ),
    (
        names::CONNECTOR_PENDING_AGE,
        Kind::Gauge,
        Some(Unit::Seconds),
        "Age of the oldest uncommitted offer of each connector (source-side offset lag); 0 when none.",
    ),
    (
        names::LOGGED_SEQ,
        Kind::Gauge,
        None,
        "Highest batch seq synced to the log.",
    ),
    (
        names::APPLIED_SEQ,
        Kind::Gauge,
        None,
        "Highest batch seq the store applied.",
    ),
    (
        names::DEAD_LETTERS,
        Kind::Counter,
        None,
        "Records written to a dead-letter file (bytes or offsets that could not be used).",
    ),
    (
        names::OFFSET_RESETS,
        Kind::Counter,
        None,
        "Offsets a worker could not use, handled by a reset policy.",
    ),
    (
        names::EXPIRED,
        Kind::Counter,
        None,
        "Partitions reset because their offset had not been written for the configured time.",
    ),
    (
        names::CONNECTOR_STALLED,
        Kind::Gauge,
        None,
        "1 while the connector commits but none of its offsets moved for offsets.stall.after.",
    ),
    (
        names::CONNECTOR_UNMOVED,
        Kind::Gauge,
        Some(Unit::Seconds),
        "Time since one of the connector's offsets last moved (at most since its buffer opened).",
    ),
    (
        names::BACKWARD_MOVES,
        Kind::Counter,
        None,
        "Commits that moved one of the connector's offsets backwards outside a reset.",
    ),
];

/// Registers the descriptions of every metric with the installed recorder.
pub fn describe() {
    use ::metrics::{describe_counter, describe_gauge, describe_histogram};
    for &(name, kind, unit, help) in DESCRIPTIONS {
        match (kind, unit) {
            (Kind::Counter, None) => describe_counter!(name, help),
            (Kind::Counter, Some(u)) => describe_counter!(name, u, help),
            (Kind::Gauge, None) => describe_gauge!(name, help),
            (Kind::Gauge, Some(u)) => describe_gauge!(name, u, help),
            (Kind::Histogram, None) => describe_histogram!(name, help),
            (Kind::Histogram, Some(u)) => describe_histogram!(name, u, help),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Hooks called with plain numbers where the commit buffer, the log, the dead-letter file and the
// reset policies count (one line each there). Labels are written in name order: the exporter keeps
// the order given, and a series should read the same wherever it is recorded.

/// A flush the log synced: its time, the buffer's totals since open and its highest logged seq.
pub(crate) fn commit_succeeded(
    writer: &str,
    elapsed: Duration,
    commits: u64,
    commit_time_total: Duration,
    commit_time_max: Duration,
    logged_seq: u64,
) {
    let w = writer.to_string();
    ::metrics::counter!(names::COMMITS, "writer" => w.clone()).increment(1);
    ::metrics::histogram!(names::COMMIT_DURATION, "writer" => w.clone())
        .record(elapsed.as_secs_f64());
    if commits > 0 {
        let avg = commit_time_total.as_secs_f64() * 1000.0 / commits as f64;
        ::metrics::gauge!(names::COMMIT_AVG_MS, "writer" => w.clone()).set(avg);
    }
    ::metrics::gauge!(names::COMMIT_MAX_MS, "writer" => w.clone())
        .set(commit_time_max.as_secs_f64() * 1000.0);
    ::metrics::gauge!(names::LOGGED_SEQ, "writer" => w).set(logged_seq as f64);
}

pub(crate) fn commit_failed(writer: &str, stage: &'static str) {
    ::metrics::counter!(names::COMMIT_FAILURES, "stage" => stage, "writer" => writer.to_string())
        .increment(1);
}

pub(crate) fn replayed(writer: &str, batches: u64) {
    ::metrics::counter!(names::REPLAYED_BATCHES, "writer" => writer.to_string()).increment(batches);
}

/// The log's size after a commit: bytes held (closed segments, snapshot and the active segment)
/// and segment files (the active one included).
pub(crate) fn wal_state(writer: &str, bytes: u64, segments: usize) {
    ::metrics::gauge!(names::WAL_BYTES, "writer" => writer.to_string()).set(bytes as f64);
    ::metrics::gauge!(names::WAL_SEGMENTS, "writer" => writer.to_string()).set(segments as f64);
}

pub(crate) fn dead_lettered(source: &'static str) {
    ::metrics::counter!(names::DEAD_LETTERS, "source" => source).increment(1);
}

pub(crate) fn offset_reset(connector: &str, policy: &'static str, reason: &'static str) {
    ::metrics::counter!(names::OFFSET_RESETS, "connector" => connector.to_string(),
        "policy" => policy, "reason" => reason)
    .increment(1);
}

/// `n` partitions of `connector` reset as stale.
pub(crate) fn expired(connector: &str, n: u64) {
    ::metrics::counter!(names::EXPIRED, "connector" => connector.to_string()).increment(n);
}

// ---------------------------------------------------------------------------------------------
// Per-connector age of the oldest uncommitted offer. The buffer keeps the ages in its own state
// (under the lock its offer path takes anyway) while tracking is on; this module only holds the
// switch and samples the numbers.

static TRACK_AGES: AtomicBool = AtomicBool::new(false);

/// Turns tracking of the per-connector age of the oldest uncommitted offer on or off (it costs a map
/// lookup per offer; `install` turns it on).
pub fn track_connector_age(on: bool) {
    TRACK_AGES.store(on, Ordering::Relaxed);
}

/// Whether buffers record per-connector ages on offer.
#[inline]
pub(crate) fn connector_age_tracked() -> bool {
    TRACK_AGES.load(Ordering::Relaxed)
}

// ---------------------------------------------------------------------------------------------
// Sampled sources: gauges read on demand.

/// What one source (a commit buffer) reports when sampled: plain numbers.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
#[doc(hidden)]
pub struct BufferSample {
    /// The writer identity (the `writer` label).
    pub writer: String,
    /// Distinct keys offered and not yet sealed.
    pub pending: usize,
    /// Age of the oldest offer not yet sealed.
    pub oldest_pending_age: Option<Duration>,
    /// Highest seq synced to the log.
    pub logged_seq: u64,
    /// Highest seq the store applied.
    pub applied_seq: u64,
    /// Bytes the log holds.
    pub wal_bytes: u64,
    /// Every connector seen since open with the age of its oldest uncommitted offer
    /// (`Duration::ZERO` when it has nothing uncommitted); empty unless tracking is on.
    pub connector_ages: Vec<(String, Duration)>,
    /// Every connector the stall and gap alarms watch (empty unless they are on).
    pub connector_alarms: Vec<ConnectorAlarm>,
}

/// One connector's stall and gap alarms ([`crate::alarms`]), as a buffer or a store's records
/// give them.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectorAlarm {
    /// The connector.
    pub connector: String,
    /// Committing while its offsets have not moved for the configured time.
    pub stalled: bool,
    /// How long its offsets have not moved.
    pub unmoved: Duration,
    /// Commits that moved an offset backwards.
    pub backwards: u64,
}

/// A source of gauges that [`sample`] reads: [`CommitBuffer`](crate::buffer::CommitBuffer)
/// implements it, and [`watch`] registers one.
#[doc(hidden)]
pub trait Sampled: Send + Sync {
    /// The source's numbers now.
    fn sample(&self) -> BufferSample;
}

type Sources = Mutex<Vec<Weak<dyn Sampled>>>;

/// Sources whose every gauge is sampled ([`watch`]).
fn watched() -> &'static Sources {
    static WATCHED: OnceLock<Sources> = OnceLock::new();
    WATCHED.get_or_init(Default::default)
}

/// Every open buffer, for the per-connector ages (they need no [`watch`]).
fn open_buffers() -> &'static Sources {
    static OPEN: OnceLock<Sources> = OnceLock::new();
    OPEN.get_or_init(Default::default)
}

fn add(sources: &Sources, source: Weak<dyn Sampled>) {
    let mut w = sources.lock().unwrap_or_else(|p| p.into_inner());
    w.retain(|b| b.strong_count() > 0);
    w.push(source);
}

fn live(sources: &Sources) -> Vec<Arc<dyn Sampled>> {
    let mut w = sources.lock().unwrap_or_else(|p| p.into_inner());
    w.retain(|b| b.strong_count() > 0);
    w.iter().filter_map(Weak::upgrade).collect()
}

/// Samples `source`'s pending count, oldest pending age and seqs at every [`sample`] for as long
/// as it lives.
#[doc(hidden)]
pub fn watch<S: Sampled + 'static>(source: &Arc<S>) {
    let weak: Weak<dyn Sampled> = Arc::downgrade(source) as Weak<dyn Sampled>;
    add(watched(), weak);
}

/// Called by every buffer when it opens: its per-connector ages are sampled while it lives.
pub(crate) fn opened(source: Weak<dyn Sampled>) {
    add(open_buffers(), source);
}

/// The age of the oldest uncommitted offer of every connector seen so far, per writer
/// (`Duration::ZERO` when the connector has nothing pending), sorted. Empty unless tracking is on.
#[cfg(test)]
fn connector_ages() -> Vec<(String, String, Duration)> {
    connector_ages_of(live(open_buffers()).iter().chain(&live(watched())))
}

fn connector_ages_of<'a>(
    sources: impl Iterator<Item = &'a Arc<dyn Sampled>>,
) -> Vec<(String, String, Duration)> {
    // A watched buffer is also an open one: one entry per (writer, connector).
    let mut all = BTreeMap::new();
    for s in sources {
        let s = s.sample();
        for (c, age) in s.connector_ages {
            all.entry((s.writer.clone(), c)).or_insert(age);
        }
    }
    all.into_iter().map(|((w, c), age)| (w, c, age)).collect()
}

/// Records the pulled gauges (watched buffers, per-connector ages) through the facade. Call it
/// before a scrape when using another exporter; `PrometheusHandle::render` calls it itself.
pub fn sample() {
    let watched = live(watched());
    for b in &watched {
        record_gauges(&b.sample());
    }
    let open = live(open_buffers());
    for b in open.iter().chain(&watched) {
        let s = b.sample();
        record_alarms(&s.writer, &s.connector_alarms);
    }
    for (writer, connector, age) in connector_ages_of(open.iter().chain(&watched)) {
        ::metrics::gauge!(names::CONNECTOR_PENDING_AGE, "connector" => connector, "writer" => writer)
            .set(age.as_secs_f64());
    }
}

fn record_gauges(s: &BufferSample) {
    let w = s.writer.clone();
    ::metrics::gauge!(names::PENDING, "writer" => w.clone()).set(s.pending as f64);
    ::metrics::gauge!(names::OLDEST_PENDING_AGE, "writer" => w.clone())
        .set(s.oldest_pending_age.map_or(0.0, |d| d.as_secs_f64()));
    ::metrics::gauge!(names::LOGGED_SEQ, "writer" => w.clone()).set(s.logged_seq as f64);
    ::metrics::gauge!(names::APPLIED_SEQ, "writer" => w.clone()).set(s.applied_seq as f64);
    ::metrics::gauge!(names::WAL_BYTES, "writer" => w).set(s.wal_bytes as f64);
}

#[cfg(all(test, feature = "prometheus"))]
mod tests {
    use super::prometheus::recorder;
    use super::*;

    #[test]
    fn renders_counters_gauges_and_histograms() {
        let (recorder, handle) = recorder();
        ::metrics::with_local_recorder(&recorder, || {
            describe();
            commit_succeeded(
                "w\"1",
                Duration::from_millis(3),
                2,
                Duration::from_millis(8),
                Duration::from_millis(5),
                2,
            );
            commit_failed("w\"1", "log");
        });
        let text = handle.render_sampled();
        assert!(
            text.contains("# TYPE connect_offsets_commits_total counter"),
            "{text}"
        );
        assert!(
            text.contains("connect_offsets_commits_total{writer=\"w\\\"1\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("connect_offsets_offset_commit_avg_time_ms{writer=\"w\\\"1\"} 4"),
            "{text}"
        );
        assert!(
            text.contains("connect_offsets_offset_commit_max_time_ms{writer=\"w\\\"1\"} 5"),
            "{text}"
        );
        assert!(
            text.contains(
                "connect_offsets_commit_duration_seconds_bucket{writer=\"w\\\"1\",le=\"0.005\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "connect_offsets_commit_duration_seconds_bucket{writer=\"w\\\"1\",le=\"0.001\"} 0"
            ),
            "{text}"
        );
        assert!(
            text.contains("connect_offsets_commit_duration_seconds_count{writer=\"w\\\"1\"} 1"),
            "{text}"
        );
        assert!(
            text.contains(
                "connect_offsets_commit_failures_total{stage=\"log\",writer=\"w\\\"1\"} 1"
            ),
            "{text}"
        );
    }

    #[test]
    fn families_without_series_still_have_help_and_type() {
        let (recorder, handle) = recorder();
        ::metrics::with_local_recorder(&recorder, || {
            describe();
            replayed("w", 3);
        });
        let text = handle.render_sampled();
        for &(name, kind, _, help) in DESCRIPTIONS {
            let family = format!("# HELP {name} {help}\n# TYPE {name} {}\n", kind.as_str());
            assert_eq!(text.matches(&family).count(), 1, "{name} in\n{text}");
        }
        assert!(
            text.contains("connect_offsets_replayed_batches_total{writer=\"w\"} 3"),
            "{text}"
        );
    }

    /// A source that reports fixed numbers.
    struct Fixed(BufferSample);
    impl Sampled for Fixed {
        fn sample(&self) -> BufferSample {
            self.0.clone()
        }
    }

    #[test]
    fn sample_reads_watched_and_open_sources_until_they_are_dropped() {
        let (recorder, handle) = recorder();
        let watched = Arc::new(Fixed(BufferSample {
            writer: "sampled-w".into(),
            pending: 7,
            oldest_pending_age: Some(Duration::from_millis(1500)),
            logged_seq: 9,
            applied_seq: 8,
            wal_bytes: 4096,
            connector_ages: vec![("a".into(), Duration::from_millis(250))],
            connector_alarms: Vec::new(),
        }));
        let open = Arc::new(Fixed(BufferSample {
            writer: "open-w".into(),
            pending: 1,
            connector_ages: vec![("b".into(), Duration::ZERO)],
            ..Default::default()
        }));
        watch(&watched);
        opened(Arc::downgrade(&watched) as Weak<dyn Sampled>);
        opened(Arc::downgrade(&open) as Weak<dyn Sampled>);
        let ages = connector_ages();
        let mine: Vec<_> = ages
            .iter()
            .filter(|(w, ..)| w == "sampled-w" || w == "open-w")
            .cloned()
            .collect();
        assert_eq!(
            mine,
            vec![
                ("open-w".into(), "b".into(), Duration::ZERO),
                ("sampled-w".into(), "a".into(), Duration::from_millis(250)),
            ]
        );
        ::metrics::with_local_recorder(&recorder, sample);
        let text = handle.render_sampled();
        for want in [
            "connect_offsets_pending_offsets{writer=\"sampled-w\"} 7",
            "connect_offsets_oldest_pending_age_seconds{writer=\"sampled-w\"} 1.5",
            "connect_offsets_logged_seq{writer=\"sampled-w\"} 9",
            "connect_offsets_applied_seq{writer=\"sampled-w\"} 8",
            "connect_offsets_wal_bytes{writer=\"sampled-w\"} 4096",
            "connect_offsets_connector_oldest_pending_age_seconds{connector=\"a\",writer=\"sampled-w\"} 0.25",
            "connect_offsets_connector_oldest_pending_age_seconds{connector=\"b\",writer=\"open-w\"} 0",
        ] {
            assert_eq!(text.matches(want).count(), 1, "`{want}` in\n{text}");
        }
        // Only watched sources give the buffer gauges.
        assert!(
            !text.contains("pending_offsets{writer=\"open-w\"}"),
            "{text}"
        );
        drop(watched);
        drop(open);
        assert!(
            connector_ages()
                .iter()
                .all(|(w, ..)| w != "sampled-w" && w != "open-w")
        );
    }
}
