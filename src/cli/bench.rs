//! `connect-offsets bench`: writes offsets in batches through a store and reports the rate.

use std::time::{Duration, Instant};

use connect_offsets::{Batch, Offset, OffsetKey, OffsetStore, Partition};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// The store to write to. Default: RocksDB in a new temporary directory.
    #[arg(long)]
    store: Option<String>,
    /// How many offsets to write in all.
    #[arg(long, default_value_t = 1_000_000)]
    offsets: u64,
    /// Offsets per batch (one atomic apply and one persist each).
    #[arg(long, default_value_t = 1_000)]
    batch: u64,
    /// Distinct source partitions the offsets cycle over.
    #[arg(long, default_value_t = 10_000)]
    partitions: u64,
    /// Connectors the partitions are spread over.
    #[arg(long, default_value_t = 1)]
    connectors: u64,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

pub fn run(args: BenchArgs) -> connect_offsets::Result<()> {
    for (name, v) in [
        ("--batch", args.batch),
        ("--partitions", args.partitions),
        ("--connectors", args.connectors),
    ] {
        if v == 0 {
            return Err(connect_offsets::Error::Invalid(format!(
                "{name} must be at least 1"
            )));
        }
    }
    let tmp;
    let url = match &args.store {
        Some(u) => u.clone(),
        None => {
            tmp = tempfile::tempdir()
                .map_err(|e| connect_offsets::Error::io("create", std::env::temp_dir(), e))?;
            format!("rocksdb://{}", tmp.path().join("offsets").display())
        }
    };
    let opened = Instant::now();
    let store = connect_offsets::open(&url)?;
    let open_time = opened.elapsed();

    let keys: Vec<OffsetKey> = (0..args.partitions)
        .map(|i| {
            OffsetKey::new(
                format!("bench-{}", i % args.connectors),
                Partition::new().with("partition", i as i64),
            )
        })
        .collect();
    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(args.offsets)
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} {bar:40} {pos}/{len} offsets {per_sec} eta {eta}")
            .expect("a valid template"),
    );
    let writer = format!("bench-{}", std::process::id());
    let mut written = 0u64;
    let mut seq = store.applied_seq(&writer)?;
    let mut latencies = Vec::new();
    let started = Instant::now();
    while written < args.offsets {
        let n = args.batch.min(args.offsets - written);
        seq += 1;
        let batch = Batch::new(
            writer.clone(),
            seq,
            (written..written + n).map(|i| {
                let key = keys[(i % args.partitions) as usize].clone();
                (key, Some(Offset::new().with("position", i as i64)))
            }),
        );
        let t = Instant::now();
        store.apply(&batch)?;
        store.persist()?;
        latencies.push(t.elapsed());
        written += n;
        bar.set_position(written);
    }
    let elapsed = started.elapsed();
    bar.finish_and_clear();
    latencies.sort_unstable();
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    let secs = elapsed.as_secs_f64().max(1e-9);
    println!("store            {}", store.kind());
    println!("url              {url}");
    println!("offsets          {written}");
    println!("batch            {}", args.batch);
    println!("partitions       {}", args.partitions);
    println!("elapsed          {:.3} s", secs);
    println!("offsets/s        {:.0}", written as f64 / secs);
    println!("commits/s        {:.0}", latencies.len() as f64 / secs);
    println!("commit p50       {}", ms(pct(0.50)));
    println!("commit p99       {}", ms(pct(0.99)));
    println!("open             {}", ms(open_time));
    Ok(())
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}
