//! Metrics: what the crate records through the [`metrics`](::metrics) facade, and an opt-in
//! Prometheus text exporter.
//!
//! Everything is recorded through the `metrics` facade, so any recorder works (for example
//! `metrics-exporter-prometheus`). Without a recorder installed the calls cost next to nothing.
//! [`install`] installs this crate's own small recorder and returns a [`PrometheusHandle`] whose
//! [`render`](PrometheusHandle::render) gives the Prometheus text format (version 0.0.4); the
//! `connect-offsets serve` command serves it at `/metrics`.
//!
//! | metric | type | labels | recorded |
//! |---|---|---|---|
//! | `connect_offsets_commits_total` | counter | `writer` | each flush the log synced |
//! | `connect_offsets_commit_failures_total` | counter | `writer`, `stage` (`log`, `store`) | each failed flush or store apply |
//! | `connect_offsets_commit_duration_seconds` | histogram | `writer` | seal to sync, successes only |
//! | `connect_offsets_offset_commit_avg_time_ms` | gauge | `writer` | like Connect's `offset-commit-avg-time-ms`, but since open |
//! | `connect_offsets_offset_commit_max_time_ms` | gauge | `writer` | like Connect's `offset-commit-max-time-ms`, but since open |
//! | `connect_offsets_replayed_batches_total` | counter | `writer` | batches replayed from the log at open |
//! | `connect_offsets_wal_bytes` / `connect_offsets_wal_segments` | gauge | `writer` | after each commit |
//! | `connect_offsets_pending_offsets` | gauge | `writer` | sampled from watched buffers |
//! | `connect_offsets_oldest_pending_age_seconds` | gauge | `writer` | sampled from watched buffers |
//! | `connect_offsets_connector_oldest_pending_age_seconds` | gauge | `writer`, `connector` | age of the oldest uncommitted offer per connector (source-side lag); when tracking is on |
//! | `connect_offsets_dead_letter_records_total` | counter | `source` (`wal`, `kafka`, `policy`) | each record written to a dead-letter file |
//! | `connect_offsets_offset_resets_total` | counter | `connector`, `policy`, `reason` | each use of a [reset policy](crate::policy) |
//!
//! Gauges that would cost something on every offer are pulled instead: [`watch`] a buffer and its
//! pending count and age are sampled by [`sample`] (which [`PrometheusHandle::render`] calls). The
//! per-connector age needs one map lookup per offer, so it is off until [`install`] or
//! [`track_connector_age`] turns it on.
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

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use ::metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};

use crate::buffer::{BufferStats, CommitBuffer};
use crate::wal::WalDir;
use crate::{Error, Result};

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
}

/// Buckets of the duration histograms, in seconds.
pub const DURATION_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Registers the descriptions of every metric with the installed recorder.
pub fn describe() {
    use ::metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        names::COMMITS,
        "Flushes of the commit buffer that the log synced."
    );
    describe_counter!(
        names::COMMIT_FAILURES,
        "Flushes that failed to reach the log (stage=log) or store applies that failed and are retried (stage=store)."
    );
    describe_histogram!(
        names::COMMIT_DURATION,
        Unit::Seconds,
        "Seal-to-sync time of successful flushes."
    );
    describe_gauge!(
        names::COMMIT_AVG_MS,
        Unit::Milliseconds,
        "Mean flush time since the buffer opened (Kafka Connect: offset-commit-avg-time-ms)."
    );
    describe_gauge!(
        names::COMMIT_MAX_MS,
        Unit::Milliseconds,
        "Longest flush since the buffer opened (Kafka Connect: offset-commit-max-time-ms)."
    );
    describe_counter!(
        names::REPLAYED_BATCHES,
        "Batches replayed from the write-ahead log into the store when the buffer opened."
    );
    describe_gauge!(
        names::WAL_BYTES,
        Unit::Bytes,
        "Bytes held by the write-ahead log."
    );
    describe_gauge!(
        names::WAL_SEGMENTS,
        "Segment files held by the write-ahead log, the active one included."
    );
    describe_gauge!(names::PENDING, "Distinct keys offered and not yet sealed.");
    describe_gauge!(
        names::OLDEST_PENDING_AGE,
        Unit::Seconds,
        "Age of the oldest offer not yet sealed into a batch."
    );
    describe_gauge!(
        names::CONNECTOR_PENDING_AGE,
        Unit::Seconds,
        "Age of the oldest uncommitted offer of each connector (source-side offset lag); 0 when none."
    );
    describe_gauge!(names::LOGGED_SEQ, "Highest batch seq synced to the log.");
    describe_gauge!(names::APPLIED_SEQ, "Highest batch seq the store applied.");
    describe_counter!(
        names::DEAD_LETTERS,
        "Records written to a dead-letter file (bytes or offsets that could not be used)."
    );
    describe_counter!(
        names::OFFSET_RESETS,
        "Offsets a worker could not use, handled by a reset policy."
    );
}

// ---------------------------------------------------------------------------------------------
// Hooks called where the commit buffer updates its BufferStats (one line each there).

pub(crate) fn commit_succeeded(writer: &str, elapsed: Duration, stats: &BufferStats) {
    let w = writer.to_string();
    ::metrics::counter!(names::COMMITS, "writer" => w.clone()).increment(1);
    ::metrics::histogram!(names::COMMIT_DURATION, "writer" => w.clone())
        .record(elapsed.as_secs_f64());
    if stats.commits > 0 {
        let avg = stats.commit_time_total.as_secs_f64() * 1000.0 / stats.commits as f64;
        ::metrics::gauge!(names::COMMIT_AVG_MS, "writer" => w.clone()).set(avg);
    }
    ::metrics::gauge!(names::COMMIT_MAX_MS, "writer" => w.clone())
        .set(stats.commit_time_max.as_secs_f64() * 1000.0);
    ::metrics::gauge!(names::LOGGED_SEQ, "writer" => w).set(stats.logged_seq as f64);
    committed(writer);
}

pub(crate) fn commit_failed(writer: &str, stage: &'static str) {
    ::metrics::counter!(names::COMMIT_FAILURES, "writer" => writer.to_string(), "stage" => stage)
        .increment(1);
}

pub(crate) fn replayed(writer: &str, batches: u64) {
    ::metrics::counter!(names::REPLAYED_BATCHES, "writer" => writer.to_string()).increment(batches);
}

pub(crate) fn wal_state(writer: &str, dir: &WalDir, active_len: u64) {
    let segments = dir.closed().len() + 1;
    let bytes = dir.held_bytes() + active_len;
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

// ---------------------------------------------------------------------------------------------
// Per-connector age of the oldest uncommitted offer. The buffer calls `offered` for every offer,
// `sealed` when it seals the pending offers into a batch and `merged_back` when a batch that failed
// to reach the log goes back under the pending offers; all three run under the buffer's state lock,
// so per writer they are ordered.

static TRACK_AGES: AtomicBool = AtomicBool::new(false);

#[derive(Default)]
struct WriterAges {
    pending: HashMap<String, Instant>,
    sealed: HashMap<String, Instant>,
    known: std::collections::BTreeSet<String>,
}

fn ages() -> &'static Mutex<HashMap<String, WriterAges>> {
    static AGES: OnceLock<Mutex<HashMap<String, WriterAges>>> = OnceLock::new();
    AGES.get_or_init(Default::default)
}

/// Turns tracking of the per-connector age of the oldest uncommitted offer on or off (it costs a map
/// lookup per offer; [`install`] turns it on).
pub fn track_connector_age(on: bool) {
    TRACK_AGES.store(on, Ordering::Relaxed);
}

#[inline]
pub(crate) fn offered(writer: &str, connector: &str) {
    if !TRACK_AGES.load(Ordering::Relaxed) {
        return;
    }
    let mut all = ages().lock().unwrap_or_else(|p| p.into_inner());
    let w = match all.get_mut(writer) {
        Some(w) => w,
        None => all.entry(writer.to_string()).or_default(),
    };
    if !w.pending.contains_key(connector) {
        w.pending.insert(connector.to_string(), Instant::now());
        if !w.known.contains(connector) {
            w.known.insert(connector.to_string());
        }
    }
}

#[inline]
pub(crate) fn sealed(writer: &str) {
    if !TRACK_AGES.load(Ordering::Relaxed) {
        return;
    }
    let mut all = ages().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(w) = all.get_mut(writer) {
        w.sealed = std::mem::take(&mut w.pending);
    }
}

fn committed(writer: &str) {
    if !TRACK_AGES.load(Ordering::Relaxed) {
        return;
    }
    let mut all = ages().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(w) = all.get_mut(writer) {
        w.sealed.clear();
    }
}

pub(crate) fn merged_back(writer: &str) {
    let mut all = ages().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(w) = all.get_mut(writer) {
        for (c, t) in std::mem::take(&mut w.sealed) {
            let slot = w.pending.entry(c).or_insert(t);
            *slot = (*slot).min(t);
        }
    }
}

/// The age of the oldest uncommitted offer of every connector seen so far, per writer
/// (`Duration::ZERO` when the connector has nothing pending). Empty unless tracking is on.
pub fn connector_ages() -> Vec<(String, String, Duration)> {
    let all = ages().lock().unwrap_or_else(|p| p.into_inner());
    let mut out = Vec::new();
    for (writer, w) in all.iter() {
        for c in &w.known {
            let age = w
                .pending
                .get(c)
                .into_iter()
                .chain(w.sealed.get(c))
                .min()
                .map_or(Duration::ZERO, |t| t.elapsed());
            out.push((writer.clone(), c.clone(), age));
        }
    }
    out.sort();
    out
}

// ---------------------------------------------------------------------------------------------
// Watched buffers: gauges sampled on demand.

fn watched() -> &'static Mutex<Vec<Weak<CommitBuffer>>> {
    static WATCHED: OnceLock<Mutex<Vec<Weak<CommitBuffer>>>> = OnceLock::new();
    WATCHED.get_or_init(Default::default)
}

/// Samples `buffer`'s pending count, oldest pending age and seqs at every [`sample`] for as long
/// as it lives.
pub fn watch(buffer: &Arc<CommitBuffer>) {
    let mut w = watched().lock().unwrap_or_else(|p| p.into_inner());
    w.retain(|b| b.strong_count() > 0);
    w.push(Arc::downgrade(buffer));
}

/// Records the pulled gauges (watched buffers, per-connector ages) through the facade. Call it
/// before a scrape when using another exporter; [`PrometheusHandle::render`] calls it itself.
pub fn sample() {
    let buffers: Vec<Arc<CommitBuffer>> = {
        let mut w = watched().lock().unwrap_or_else(|p| p.into_inner());
        w.retain(|b| b.strong_count() > 0);
        w.iter().filter_map(Weak::upgrade).collect()
    };
    for b in buffers {
        let s = b.stats();
        let w = b.writer().to_string();
        ::metrics::gauge!(names::PENDING, "writer" => w.clone()).set(s.pending as f64);
        ::metrics::gauge!(names::OLDEST_PENDING_AGE, "writer" => w.clone())
            .set(s.oldest_pending_age.map_or(0.0, |d| d.as_secs_f64()));
        ::metrics::gauge!(names::LOGGED_SEQ, "writer" => w.clone()).set(s.logged_seq as f64);
        ::metrics::gauge!(names::APPLIED_SEQ, "writer" => w.clone()).set(s.applied_seq as f64);
        ::metrics::gauge!(names::WAL_BYTES, "writer" => w).set(s.wal_bytes as f64);
    }
    for (writer, connector, age) in connector_ages() {
        ::metrics::gauge!(names::CONNECTOR_PENDING_AGE, "writer" => writer, "connector" => connector)
            .set(age.as_secs_f64());
    }
}

// ---------------------------------------------------------------------------------------------
// The Prometheus recorder.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// A fixed-bucket histogram.
#[derive(Debug)]
struct Buckets {
    counts: Vec<AtomicU64>,
    count: AtomicU64,
    sum: Mutex<f64>,
}

impl Buckets {
    fn new() -> Self {
        Buckets {
            counts: DURATION_BUCKETS.iter().map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum: Mutex::new(0.0),
        }
    }
}

impl HistogramFn for Buckets {
    fn record(&self, value: f64) {
        if let Some(i) = DURATION_BUCKETS.iter().position(|b| value <= *b) {
            self.counts[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        *self.sum.lock().unwrap_or_else(|p| p.into_inner()) += value;
    }
}

#[derive(Debug, Clone)]
enum Cell {
    Counter(Arc<AtomicU64>),
    Gauge(Arc<AtomicU64>),
    Histogram(Arc<Buckets>),
}

type SeriesKey = (String, Vec<(String, String)>);

#[derive(Debug, Default)]
struct Registry {
    series: Mutex<BTreeMap<SeriesKey, Cell>>,
    help: Mutex<BTreeMap<String, (Kind, String)>>,
}

impl Registry {
    fn cell(&self, key: &Key, make: impl FnOnce() -> Cell) -> Cell {
        let mut labels: Vec<(String, String)> = key
            .labels()
            .map(|l| (l.key().to_string(), l.value().to_string()))
            .collect();
        labels.sort();
        let k = (key.name().to_string(), labels);
        self.series
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(k)
            .or_insert_with(make)
            .clone()
    }

    fn describe(&self, key: KeyName, kind: Kind, description: SharedString) {
        self.help
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.as_str().to_string(), (kind, description.to_string()));
    }

    fn render(&self) -> String {
        let series = self
            .series
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let help = self.help.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut out = String::new();
        let mut last_name: Option<&str> = None;
        // Every described metric gets its HELP and TYPE lines even before a first sample, so a
        // scraper (and a test) sees the full list.
        let mut names: BTreeMap<&str, Option<Kind>> = help
            .iter()
            .map(|(n, (k, _))| (n.as_str(), Some(*k)))
            .collect();
        for ((name, _), cell) in &series {
            let kind = match cell {
                Cell::Counter(_) => Kind::Counter,
                Cell::Gauge(_) => Kind::Gauge,
                Cell::Histogram(_) => Kind::Histogram,
            };
            names.entry(name.as_str()).or_insert(Some(kind));
        }
        for (name, kind) in &names {
            if last_name != Some(name) {
                if let Some((_, text)) = help.get(*name) {
                    let _ = writeln!(out, "# HELP {name} {}", escape_help(text));
                }
                if let Some(k) = kind {
                    let _ = writeln!(out, "# TYPE {name} {}", k.as_str());
                }
                last_name = Some(name);
            }
            for ((n, labels), cell) in series.range((name.to_string(), Vec::new())..) {
                if n != name {
                    break;
                }
                match cell {
                    Cell::Counter(v) => {
                        let _ = writeln!(
                            out,
                            "{name}{} {}",
                            label_text(labels, None),
                            v.load(Ordering::Relaxed)
                        );
                    }
                    Cell::Gauge(v) => {
                        let _ = writeln!(
                            out,
                            "{name}{} {}",
                            label_text(labels, None),
                            number(f64::from_bits(v.load(Ordering::Relaxed)))
                        );
                    }
                    Cell::Histogram(h) => {
                        let mut cumulative = 0;
                        for (b, c) in DURATION_BUCKETS.iter().zip(&h.counts) {
                            cumulative += c.load(Ordering::Relaxed);
                            let _ = writeln!(
                                out,
                                "{name}_bucket{} {cumulative}",
                                label_text(labels, Some(&number(*b)))
                            );
                        }
                        let count = h.count.load(Ordering::Relaxed);
                        let _ = writeln!(
                            out,
                            "{name}_bucket{} {count}",
                            label_text(labels, Some("+Inf"))
                        );
                        let sum = *h.sum.lock().unwrap_or_else(|p| p.into_inner());
                        let _ = writeln!(
                            out,
                            "{name}_sum{} {}",
                            label_text(labels, None),
                            number(sum)
                        );
                        let _ = writeln!(out, "{name}_count{} {count}", label_text(labels, None));
                    }
                }
            }
        }
        out
    }
}

fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        }
    } else {
        format!("{v}")
    }
}

fn escape_help(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

fn label_text(labels: &[(String, String)], le: Option<&str>) -> String {
    if labels.is_empty() && le.is_none() {
        return String::new();
    }
    let mut out = String::from("{");
    let mut first = true;
    let all = labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .chain(le.map(|v| ("le", v)));
    for (k, v) in all {
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(k);
        out.push_str("=\"");
        for c in v.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    out.push('}');
    out
}

/// A `metrics` recorder that keeps every series in memory and renders the Prometheus text format.
/// Use it as the global recorder through [`install`], or locally with
/// [`metrics::with_local_recorder`](::metrics::with_local_recorder).
#[derive(Debug, Clone, Default)]
pub struct PrometheusRecorder {
    registry: Arc<Registry>,
}

impl PrometheusRecorder {
    /// An empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// A handle that renders what this recorder holds.
    pub fn handle(&self) -> PrometheusHandle {
        PrometheusHandle {
            registry: Arc::clone(&self.registry),
        }
    }
}

impl Recorder for PrometheusRecorder {
    fn describe_counter(&self, key: KeyName, _unit: Option<Unit>, description: SharedString) {
        self.registry.describe(key, Kind::Counter, description);
    }
    fn describe_gauge(&self, key: KeyName, _unit: Option<Unit>, description: SharedString) {
        self.registry.describe(key, Kind::Gauge, description);
    }
    fn describe_histogram(&self, key: KeyName, _unit: Option<Unit>, description: SharedString) {
        self.registry.describe(key, Kind::Histogram, description);
    }
    fn register_counter(&self, key: &Key, _metadata: &Metadata<'_>) -> Counter {
        match self
            .registry
            .cell(key, || Cell::Counter(Arc::new(AtomicU64::new(0))))
        {
            Cell::Counter(c) => Counter::from_arc(c),
            _ => Counter::noop(),
        }
    }
    fn register_gauge(&self, key: &Key, _metadata: &Metadata<'_>) -> Gauge {
        match self.registry.cell(key, || {
            Cell::Gauge(Arc::new(AtomicU64::new(0f64.to_bits())))
        }) {
            Cell::Gauge(g) => Gauge::from_arc(g),
            _ => Gauge::noop(),
        }
    }
    fn register_histogram(&self, key: &Key, _metadata: &Metadata<'_>) -> Histogram {
        match self
            .registry
            .cell(key, || Cell::Histogram(Arc::new(Buckets::new())))
        {
            Cell::Histogram(h) => Histogram::from_arc(h),
            _ => Histogram::noop(),
        }
    }
}

/// Renders the series of a [`PrometheusRecorder`].
#[derive(Debug, Clone)]
pub struct PrometheusHandle {
    registry: Arc<Registry>,
}

impl PrometheusHandle {
    /// The Prometheus text format (version 0.0.4) of every series, after a [`sample`].
    pub fn render(&self) -> String {
        sample();
        self.registry.render()
    }
}

/// Installs a [`PrometheusRecorder`] as the global `metrics` recorder (once per process; later calls
/// return the same handle), describes every metric and turns per-connector age tracking on.
/// Fails when another recorder is already installed.
pub fn install() -> Result<PrometheusHandle> {
    static HANDLE: OnceLock<std::result::Result<PrometheusHandle, String>> = OnceLock::new();
    let result = HANDLE.get_or_init(|| {
        let recorder = PrometheusRecorder::new();
        let handle = recorder.handle();
        ::metrics::set_global_recorder(recorder)
            .map_err(|e| format!("cannot install the Prometheus recorder: {e}"))?;
        describe();
        track_connector_age(true);
        Ok(handle)
    });
    result.clone().map_err(Error::Invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_gauges_and_histograms() {
        let recorder = PrometheusRecorder::new();
        let handle = recorder.handle();
        ::metrics::with_local_recorder(&recorder, || {
            describe();
            commit_succeeded(
                "w\"1",
                Duration::from_millis(3),
                &BufferStats {
                    commits: 2,
                    commit_time_total: Duration::from_millis(8),
                    commit_time_max: Duration::from_millis(5),
                    logged_seq: 2,
                    ..Default::default()
                },
            );
            commit_failed("w\"1", "log");
        });
        let text = handle.registry.render();
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
    fn connector_ages_follow_seal_and_merge_back() {
        track_connector_age(true);
        offered("ages-w", "a");
        offered("ages-w", "b");
        std::thread::sleep(Duration::from_millis(5));
        let age = |c: &str| {
            connector_ages()
                .into_iter()
                .find(|(w, n, _)| w == "ages-w" && n == c)
                .map(|(_, _, a)| a)
        };
        assert!(age("a").unwrap() >= Duration::from_millis(5));
        sealed("ages-w");
        // Sealed but not yet logged: still uncommitted.
        assert!(age("a").unwrap() >= Duration::from_millis(5));
        merged_back("ages-w");
        assert!(age("b").unwrap() >= Duration::from_millis(5));
        sealed("ages-w");
        committed("ages-w");
        assert_eq!(age("a"), Some(Duration::ZERO));
    }
}
