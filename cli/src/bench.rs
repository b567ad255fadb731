//! `connect-offsets bench`: the main job. Runs a commit workload through the write-ahead commit buffer
//! on one or more stores and reports offsets/s, commits/s, commit latency and open time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig, Durability};
use connect_offsets::{Error, Offset, OffsetKey, OffsetStore, Partition, Result};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// The store to write to. Default: RocksDB in a new temporary directory.
    #[arg(long)]
    store: Option<String>,
    /// Run the same workload on each of these stores too and print them side by side
    /// (`default` names the temporary RocksDB store).
    #[arg(long, num_args = 1..)]
    compare: Vec<String>,
    /// Connectors the partitions are spread over.
    #[arg(long, default_value_t = 1)]
    connectors: u64,
    /// Distinct source partitions the offers cycle over.
    #[arg(long, default_value_t = 10_000)]
    partitions: u64,
    /// Offsets offered per commit (per committer).
    #[arg(long, default_value_t = 1_000)]
    batch: u64,
    /// Threads each offering and committing on their own (they share the buffer: group commit).
    #[arg(long, default_value_t = 1)]
    committers: u64,
    /// How long to run each store, in seconds.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Run the workload this many seconds first, unmeasured (as Connect's bench does): the first
    /// batches pay for a new topic's leaders and a cold broker's code paths.
    #[arg(long, default_value_t = 0.0)]
    warmup: f64,
    /// Stop after this many offsets instead (per store, all committers together).
    #[arg(long)]
    offsets: Option<u64>,
    /// When a commit counts as done: `local` (log synced) or `store` (applied by the store).
    #[arg(long, default_value = "local", value_parser = ["local", "store"])]
    durability: String,
    /// After the reopen, look up this many offsets of partitions the run wrote (random, through the
    /// commit buffer's `get`, as a restarted task asks for its offsets) and report lookups/s and latency.
    #[arg(long, default_value_t = 0)]
    lookups: u64,
    /// Record history on every store run, with this retention (adds `history=RETENTION` to each
    /// URL), to compare commit throughput with history on and off.
    #[arg(long, value_name = "RETENTION")]
    history: Option<String>,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

/// What one store did.
#[derive(Debug, Clone)]
struct Outcome {
    kind: &'static str,
    url: String,
    offsets: u64,
    commits: u64,
    batches: u64,
    syncs: u64,
    /// Store writes (fewer than batches when queued batches were written together).
    writes: u64,
    elapsed: Duration,
    p50: Duration,
    p99: Duration,
    max: Duration,
    open: Duration,
    reopen: Duration,
    /// The process's CPU time (user and system) during the run, where the system tells it.
    cpu: Option<Duration>,
    lookups: Option<Lookups>,
}

/// The lookups after the reopen (`--lookups`).
#[derive(Debug, Clone)]
struct Lookups {
    count: u64,
    elapsed: Duration,
    p50: Duration,
    p99: Duration,
}

pub fn run(args: BenchArgs) -> Result<()> {
    for (name, v) in [
        ("--batch", args.batch),
        ("--partitions", args.partitions),
        ("--connectors", args.connectors),
        ("--committers", args.committers),
    ] {
        if v == 0 {
            return Err(Error::Settings(format!("{name} must be at least 1")));
        }
    }
    if args.duration.is_nan() || (args.duration <= 0.0 && args.offsets.is_none()) {
        return Err(Error::Settings("--duration must be positive".into()));
    }
    if !(args.warmup >= 0.0 && args.warmup.is_finite()) {
        return Err(Error::Settings(format!(
            "--warmup must be a number of seconds, 0 or more (got {})",
            args.warmup
        )));
    }
    let mut urls = vec![args.store.clone().unwrap_or_else(|| "default".into())];
    urls.extend(args.compare.iter().cloned());
    let mut outcomes = Vec::new();
    for url in &urls {
        outcomes.push(run_one(&args, url)?);
    }
    if args.json {
        super::print(to_json(&args, &outcomes).as_bytes())?;
    } else {
        super::print(table(&args, &outcomes).as_bytes())?;
    }
    Ok(())
}

fn run_one(args: &BenchArgs, url: &str) -> Result<Outcome> {
    let tmp = tempfile::tempdir().map_err(|e| Error::io("create", std::env::temp_dir(), e))?;
    let url = if url == "default" {
        format!("rocksdb://{}", tmp.path().join("offsets").display())
    } else {
        url.to_string()
    };
    let url = match &args.history {
        Some(retention) => {
            let sep = if url.contains('?') { '&' } else { '?' };
            format!(
                "{url}{sep}{}={retention}",
                connect_offsets::history::HISTORY_PARAM
            )
        }
        None => url,
    };
    let wal = tmp.path().join("wal");
    let mut config = CommitBufferConfig::new(&wal);
    config.writer = format!("bench-{}", std::process::id());
    config.flush_interval = None;
    config.max_pending = (args.batch * args.committers).max(1_000_000) as usize;
    config.durability = if args.durability == "store" {
        Durability::Store
    } else {
        Durability::Local
    };
    config.flush_timeout = Duration::from_secs(60);

    let opened = Instant::now();
    let store: Arc<dyn OffsetStore> = Arc::from(connect_offsets::open(&url)?);
    let buffer = Arc::new(CommitBuffer::open(Arc::clone(&store), config.clone())?);
    let open = opened.elapsed();
    let kind = store.kind();

    let keys: Arc<Vec<OffsetKey>> = Arc::new(
        (0..args.partitions)
            .map(|i| {
                OffsetKey::new(
                    format!("bench-{}", i % args.connectors),
                    Partition::new().with("partition", i as i64),
                )
            })
            .collect(),
    );
    let limit = args.offsets;
    let duration = Duration::from_secs_f64(args.duration.max(0.0));
    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(limit.unwrap_or(duration.as_millis() as u64))
    };
    bar.set_style(
        ProgressStyle::with_template(if limit.is_some() {
            "{spinner} {msg:>8} {bar:40} {pos}/{len} offsets ({per_sec})"
        } else {
            "{spinner} {msg:>8} {bar:40} {elapsed} of the run"
        })
        .expect("a valid template"),
    );
    bar.set_message(kind);
    warm_up(
        &buffer,
        &keys,
        args.batch,
        Duration::from_secs_f64(args.warmup),
    )?;
    let stats_before = buffer.stats();
    let written = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let cpu_before = process_cpu();
    let started = Instant::now();
    let per_thread = limit.map(|n| n.div_ceil(args.committers));
    let threads: Vec<_> = (0..args.committers)
        .map(|t| {
            let (buffer, keys, written) =
                (Arc::clone(&buffer), Arc::clone(&keys), Arc::clone(&written));
            let batch = args.batch;
            std::thread::spawn(move || -> Result<(Vec<Duration>, u64)> {
                let mut latencies = Vec::new();
                let mut i = t * 7919;
                let mut done = 0u64;
                loop {
                    if per_thread.map_or(started.elapsed() >= duration, |n| done >= n) {
                        return Ok((latencies, done));
                    }
                    let n = per_thread.map_or(batch, |lim| batch.min(lim - done));
                    for _ in 0..n {
                        let key = keys[(i % keys.len() as u64) as usize].clone();
                        buffer.offer(key, Offset::new().with("position", i as i64))?;
                        i += 1;
                    }
                    let t0 = Instant::now();
                    buffer.commit().wait()?;
                    latencies.push(t0.elapsed());
                    done += n;
                    written.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                }
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let mut handles = threads;
    while !handles.iter().all(|h| h.is_finished()) {
        std::thread::sleep(Duration::from_millis(50));
        bar.set_position(match limit {
            Some(_) => written.load(std::sync::atomic::Ordering::Relaxed),
            None => (started.elapsed().as_millis() as u64).min(duration.as_millis() as u64),
        });
    }
    // Committer 0 offers keys 0, 1, 2, ... in order: the first `first_done` keys (capped at the key
    // count) hold an offset for sure, whatever the other committers did.
    let mut first_done = 0;
    for (t, h) in handles.drain(..).enumerate() {
        let (lat, done) = h
            .join()
            .map_err(|_| Error::State("a committer thread panicked".into()))??;
        if t == 0 {
            first_done = done;
        }
        latencies.extend(lat);
    }
    let elapsed = started.elapsed();
    let cpu = process_cpu()
        .zip(cpu_before)
        .map(|(after, before)| after.saturating_sub(before));
    bar.finish_and_clear();
    let stats = buffer.stats();
    buffer.close()?;
    drop(buffer);
    drop(store);

    // Open again with everything written: what a restarted worker pays.
    let reopened = Instant::now();
    let store: Arc<dyn OffsetStore> = Arc::from(connect_offsets::open(&url)?);
    let buffer = CommitBuffer::open(store, config)?;
    let reopen = reopened.elapsed();
    let lookups = if args.lookups > 0 {
        let known = first_done.min(keys.len() as u64);
        if known == 0 {
            return Err(Error::State(
                "--lookups: the run committed no offset to look up".into(),
            ));
        }
        Some(look_up(&buffer, &keys[..known as usize], args.lookups)?)
    } else {
        None
    };
    buffer.close()?;

    latencies.sort_unstable();
    let pct = |p: f64| percentile(&latencies, p);
    Ok(Outcome {
        kind,
        url: connect_offsets::internal::store::url::StoreUrl::parse(&url)
            .map(|u| u.to_string())
            .unwrap_or(url),
        offsets: written.load(std::sync::atomic::Ordering::Relaxed),
        commits: latencies.len() as u64,
        batches: stats.logged_seq - stats_before.logged_seq,
        syncs: stats.syncs - stats_before.syncs,
        writes: stats.store_writes - stats_before.store_writes,
        elapsed,
        p50: pct(0.50),
        p99: pct(0.99),
        max: latencies.last().copied().unwrap_or_default(),
        open,
        reopen,
        cpu,
        lookups,
    })
}

/// Commits of `batch` offsets, cycling over `keys`, until `time` has passed.
fn warm_up(buffer: &CommitBuffer, keys: &[OffsetKey], batch: u64, time: Duration) -> Result<()> {
    let started = Instant::now();
    let mut i = 0u64;
    while started.elapsed() < time {
        for _ in 0..batch {
            let key = &keys[(i % keys.len() as u64) as usize];
            buffer.offer(key.clone(), Offset::new().with("position", i as i64))?;
            i += 1;
        }
        buffer.commit().wait()?;
    }
    Ok(())
}

/// This process's CPU time so far, user and system, from `/proc/self/stat` (in Linux's fixed
/// 100 ticks a second): on a shared machine, what a run costs when its wall time is not telling.
fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name (which may hold spaces), from the third: utime is the 14th.
    let fields: Vec<&str> = stat
        .get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    let ticks = |i: usize| fields.get(i)?.parse::<u64>().ok();
    Some(Duration::from_millis((ticks(11)? + ticks(12)?) * 10))
}

/// CPU microseconds per offset of the run, `-` where unknown.
fn cpu_per_offset(o: &Outcome) -> String {
    match o.cpu {
        Some(cpu) if o.offsets > 0 => format!("{:.3}", cpu.as_secs_f64() * 1e6 / o.offsets as f64),
        _ => "-".into(),
    }
}

/// `count` lookups of keys drawn at random (a fixed-seed xorshift: the same keys every run) from
/// `keys`, each of which the run committed; a missing offset is an error, not a fast answer.
fn look_up(buffer: &CommitBuffer, keys: &[OffsetKey], count: u64) -> Result<Lookups> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let picks: Vec<&OffsetKey> = (0..count)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            &keys[(state % keys.len() as u64) as usize]
        })
        .collect();
    let mut latencies = Vec::with_capacity(picks.len());
    let started = Instant::now();
    for key in picks {
        let t0 = Instant::now();
        let got = buffer.get(key)?;
        latencies.push(t0.elapsed());
        if got.is_none() {
            return Err(Error::State(format!(
                "--lookups: no offset for {key:?}, which the run committed"
            )));
        }
    }
    let elapsed = started.elapsed();
    latencies.sort_unstable();
    Ok(Lookups {
        count,
        elapsed,
        p50: percentile(&latencies, 0.50),
        p99: percentile(&latencies, 0.99),
    })
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted
        .get(((sorted.len() as f64 * p) as usize).min(sorted.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

/// The human-readable results, one row per measure and a column per store.
fn table(args: &BenchArgs, outs: &[Outcome]) -> String {
    use std::fmt::Write as _;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "workload: {} connector(s), {} partitions, {} offsets per commit, {} committer(s), durability {}",
        args.connectors, args.partitions, args.batch, args.committers, args.durability
    );
    type Column = Box<dyn Fn(&Outcome) -> String>;
    let rows: Vec<(&str, Column)> = vec![
        ("store", Box::new(|o: &Outcome| o.kind.to_string())),
        (
            "offsets/s",
            Box::new(|o: &Outcome| format!("{:.0}", o.offsets as f64 / o.elapsed.as_secs_f64())),
        ),
        (
            "commits/s",
            Box::new(|o: &Outcome| format!("{:.0}", o.commits as f64 / o.elapsed.as_secs_f64())),
        ),
        ("commit p50 ms", Box::new(|o: &Outcome| ms(o.p50))),
        ("commit p99 ms", Box::new(|o: &Outcome| ms(o.p99))),
        ("commit max ms", Box::new(|o: &Outcome| ms(o.max))),
        ("offsets", Box::new(|o: &Outcome| o.offsets.to_string())),
        ("commits", Box::new(|o: &Outcome| o.commits.to_string())),
        ("log batches", Box::new(|o: &Outcome| o.batches.to_string())),
        ("log syncs", Box::new(|o: &Outcome| o.syncs.to_string())),
        ("store writes", Box::new(|o: &Outcome| o.writes.to_string())),
        (
            "seconds",
            Box::new(|o: &Outcome| format!("{:.2}", o.elapsed.as_secs_f64())),
        ),
        ("cpu µs/offset", Box::new(cpu_per_offset)),
        ("open ms", Box::new(|o: &Outcome| ms(o.open))),
        ("reopen ms", Box::new(|o: &Outcome| ms(o.reopen))),
    ];
    let mut rows = rows;
    if args.lookups > 0 {
        let col = |f: fn(&Lookups) -> String| -> Column {
            Box::new(move |o: &Outcome| o.lookups.as_ref().map_or("-".into(), f))
        };
        rows.push((
            "lookups/s",
            col(|l| format!("{:.0}", l.count as f64 / l.elapsed.as_secs_f64())),
        ));
        rows.push((
            "lookup p50 ms",
            col(|l| format!("{:.4}", l.p50.as_secs_f64() * 1e3)),
        ));
        rows.push((
            "lookup p99 ms",
            col(|l| format!("{:.4}", l.p99.as_secs_f64() * 1e3)),
        ));
    }
    for (name, f) in &rows {
        let _ = write!(t, "{name:<15}");
        for o in outs {
            let _ = write!(t, " {:>16}", f(o));
        }
        t.push('\n');
    }
    let urls: Vec<String> = outs
        .iter()
        .map(|o| format!("{:<15} {}", format!("url ({})", o.kind), o.url))
        .collect();
    t.push_str(&urls.join("\n"));
    t
}

fn to_json(args: &BenchArgs, outs: &[Outcome]) -> String {
    let items: Vec<String> = outs
        .iter()
        .map(|o| {
            let secs = o.elapsed.as_secs_f64();
            let mut url = Vec::new();
            connect_offsets::internal::codec::json::encode_str(&o.url, &mut url);
            format!(
                "{{\"store\":\"{}\",\"url\":{},\"offsets\":{},\"commits\":{},\"log_batches\":{},\"log_syncs\":{},\"store_writes\":{},\"seconds\":{:.6},\
                 \"offsets_per_sec\":{:.1},\"commits_per_sec\":{:.1},\"commit_p50_ms\":{},\"commit_p99_ms\":{},\"commit_max_ms\":{},\
                 \"cpu_us_per_offset\":{},\"open_ms\":{},\"reopen_ms\":{}{}}}",
                o.kind,
                String::from_utf8_lossy(&url),
                o.offsets,
                o.commits,
                o.batches,
                o.syncs,
                o.writes,
                secs,
                o.offsets as f64 / secs,
                o.commits as f64 / secs,
                ms(o.p50),
                ms(o.p99),
                ms(o.max),
                match cpu_per_offset(o).as_str() {
                    "-" => "null".to_string(),
                    n => n.to_string(),
                },
                ms(o.open),
                ms(o.reopen),
                o.lookups.as_ref().map_or(String::new(), |l| format!(
                    ",\"lookups\":{},\"lookup_seconds\":{:.6},\"lookups_per_sec\":{:.1},\"lookup_p50_ms\":{:.6},\"lookup_p99_ms\":{:.6}",
                    l.count,
                    l.elapsed.as_secs_f64(),
                    l.count as f64 / l.elapsed.as_secs_f64(),
                    l.p50.as_secs_f64() * 1e3,
                    l.p99.as_secs_f64() * 1e3
                ))
            )
        })
        .collect();
    format!(
        "{{\"workload\":{{\"connectors\":{},\"partitions\":{},\"batch\":{},\"committers\":{},\"durability\":\"{}\",\"warmup_seconds\":{}}},\"results\":[{}]}}",
        args.connectors,
        args.partitions,
        args.batch,
        args.committers,
        args.durability,
        args.warmup,
        items.join(",")
    )
}
