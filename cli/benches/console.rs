//! The console's connector view over 100,000 partitions: how long from navigation start until the
//! page marks `partitions-rendered` (`performance.mark`), in Debian's headless Chromium driven
//! through chromedriver, against `connect-offsets serve` over a RocksDB store with history. Prints
//! the median (and min, max) of several loads, and beside it the partitions request alone (the
//! server's share) and a page change; asserts nothing about time.
//!
//! `cargo bench -p connect-offsets-cli --features full --bench console` (the bench profile is the release one);
//! `CONSOLE_BENCH_PARTITIONS=N`, `CONSOLE_BENCH_LOADS=N` change the size and the number of loads.
//! Run without `--bench` (`cargo test --benches`), it checks itself on 1,000 partitions, once.
//! Needs /usr/bin/chromium and /usr/bin/chromedriver (`scripts/setup` installs them).

#[path = "../tests/browser_util/mod.rs"]
mod browser_util;
#[path = "../tests/cli_util/mod.rs"]
mod cli_util;
#[path = "../tests/http_util/mod.rs"]
mod http_util;

use std::io::Write as _;
use std::time::{Duration, Instant};

use browser_util::Browser;
use http_util::Serve;
use serde_json::{Value, json};

const CONNECTOR: &str = "big";

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v}: not a number"))
        })
        .unwrap_or(default)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn summary(name: &str, v: &mut [f64]) {
    let m = median(v);
    println!(
        "{name}: median {m:.0} ms (min {:.0}, max {:.0}, {} runs: {:?})",
        v[0],
        v[v.len() - 1],
        v.len(),
        v.iter().map(|x| x.round() as i64).collect::<Vec<_>>()
    );
}

/// The `partitions-rendered` marks of the current document (their start times, ms since
/// navigation start).
fn marks(b: &Browser) -> Vec<f64> {
    b.exec(
        "return performance.getEntriesByName('partitions-rendered', 'mark').map(m => m.startTime)",
        vec![],
    )
    .as_array()
    .unwrap()
    .iter()
    .map(|v| v.as_f64().unwrap())
    .collect()
}

fn main() {
    let real = std::env::args().any(|a| a == "--bench");
    let partitions = env_usize(
        "CONSOLE_BENCH_PARTITIONS",
        if real { 100_000 } else { 1_000 },
    );
    let loads = env_usize("CONSOLE_BENCH_LOADS", if real { 7 } else { 1 }).max(1);
    browser_util::require_chromium();

    let dir = tempfile::tempdir().unwrap();
    let url = format!("rocksdb://{}?history=7d", dir.path().join("db").display());
    // The document: `{"offsets":[...]}` of `partitions` source partitions (a table and a shard
    // per partition, a log position and a transaction id per offset), written in one import.
    let file = dir.path().join("big.json");
    {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&file).unwrap());
        write!(w, "{{\"offsets\":[").unwrap();
        for i in 0..partitions {
            if i > 0 {
                write!(w, ",").unwrap();
            }
            let e = json!({
                "partition": {"server": "db1", "table": format!("table_{:06}", i / 4), "shard": i % 4},
                "offset": {"lsn": 1_000_000 + i as u64 * 17, "txid": i as u64 * 3, "snapshot": false},
            });
            write!(w, "{e}").unwrap();
        }
        write!(w, "]}}").unwrap();
    }
    let t = Instant::now();
    let out = cli_util::cli(&[
        "import",
        "--store",
        &url,
        "--connector",
        CONNECTOR,
        "-i",
        file.to_str().unwrap(),
    ]);
    cli_util::ok(&out);
    println!(
        "imported {partitions} partitions into {url} in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    let serve = Serve::start(&["--store", &url]);
    // The server's share: the first page of the view, as the page asks for it.
    let api = serve.url(&format!(
        "/connectors/{CONNECTOR}/offsets/partitions?page=0&size=50&sort=last_write&order=desc"
    ));
    let mut api_ms = Vec::new();
    for _ in 0..loads {
        let t = Instant::now();
        let (st, body) = http_util::request("GET", &api, None);
        api_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(st, 200, "GET {api}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            v["total"],
            json!(partitions),
            "{}",
            &body[..body.len().min(300)]
        );
    }

    let b = Browser::start();
    let view = serve.url(&format!("/#/connector/{CONNECTOR}"));
    let mut load_ms = Vec::new();
    // One load to warm the browser's caches, then the measured ones.
    for i in 0..=loads {
        b.goto("about:blank");
        b.goto(&view);
        let at = b.wait_for(
            "performance.mark('partitions-rendered')",
            Duration::from_secs(300),
            || marks(&b).first().copied(),
        );
        let rows = b.find_all("#partitions tr[data-partition]").len();
        assert!(rows > 0, "partitions-rendered marked with no row shown");
        let info = b.find("#page-info").text();
        assert!(
            info.replace([',', ' ', '\u{202f}', '\u{a0}', '.'], "")
                .contains(&partitions.to_string()),
            "#page-info `{info}` does not count {partitions}"
        );
        if i > 0 {
            load_ms.push(at);
        } else {
            println!("warm-up load: {at:.0} ms ({rows} rows, {info})");
        }
    }
    let shots = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
    b.screenshot(&shots.join(format!("bench-{partitions}-partitions.png")));

    // A page change: from the click on #page-next to the next mark, if the page marks it.
    let mut next_ms = Vec::new();
    for _ in 0..loads {
        let before = marks(&b).len();
        let clicked = b.exec("return performance.now()", vec![]).as_f64().unwrap();
        b.find("#page-next").click();
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut got = None;
        while Instant::now() < deadline {
            let m = marks(&b);
            if m.len() > before {
                got = Some(m[m.len() - 1] - clicked);
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        match got {
            Some(ms) => next_ms.push(ms),
            None => {
                println!("#page-next: no new partitions-rendered mark within 30 s (not measured)");
                break;
            }
        }
    }

    println!(
        "console, connector view of {partitions} partitions (RocksDB with history, headless Chromium, {} cores):",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    summary("  navigation start -> partitions-rendered", &mut load_ms);
    summary(
        "  GET .../offsets/partitions (first page, alone)",
        &mut api_ms,
    );
    if !next_ms.is_empty() {
        summary("  #page-next click -> partitions-rendered", &mut next_ms);
    }
}
