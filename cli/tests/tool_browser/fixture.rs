//! What the console's browser tests share: a RocksDB store with history written and read through
//! the CLI, `serve` over it, a browser on its console, and the page's parts by the contract's ids
//! (/work/console-spec.md: `#connectors`, `#partitions`, `#dialog`, `#toast`...).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::browser_util::{Browser, Element};
use crate::cli_util::run;
use crate::http_util::Serve;

/// The Content-Security-Policy the console is served with (the contract's, exactly).
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// `$CARGO_TARGET_TMPDIR/console-screenshots`.
pub fn shots_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots")
}

/// Saves the viewport as `console-screenshots/<name>.png` and prints its path.
pub fn shot(b: &Browser, name: &str) -> PathBuf {
    let path = shots_dir().join(format!("{name}.png"));
    b.screenshot(&path);
    path
}

/// A RocksDB store with `?history=7d` in a temporary directory.
pub struct Store {
    pub dir: tempfile::TempDir,
    pub url: String,
}

impl Store {
    pub fn new() -> Store {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("rocksdb://{}?history=7d", dir.path().join("db").display());
        Store { dir, url }
    }

    /// The RocksDB directory.
    pub fn db(&self) -> PathBuf {
        self.dir.path().join("db")
    }

    /// A file in the store's temporary directory holding `text`.
    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// `connect-offsets ARGS --store URL`, retried while `serve` (which opens the store per
    /// request: the console polls) holds the RocksDB lock; (exit code, stdout, stderr).
    pub fn cli(&self, args: &[&str]) -> (i32, String, String) {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--store", &self.url]);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (code, out, err) = run(&all);
            if code == 1 && err.contains("locked by another process") && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            return (code, out, err);
        }
    }

    /// `connect-offsets ARGS` that must succeed; its stdout.
    pub fn cli_ok(&self, args: &[&str]) -> String {
        let (code, out, err) = self.cli(args);
        assert_eq!(code, 0, "connect-offsets {args:?}: {err}");
        out
    }

    /// `set`: one partition's offset.
    pub fn set(&self, connector: &str, partition: &Value, offset: &Value) {
        self.cli_ok(&[
            "set",
            "--connector",
            connector,
            "--partition",
            &partition.to_string(),
            "--offset",
            &offset.to_string(),
        ]);
    }

    /// `get`: one partition's offset, `None` when it has none (exit code 3).
    pub fn get(&self, connector: &str, partition: &Value) -> Option<Value> {
        let p = partition.to_string();
        let (code, out, err) = self.cli(&["get", "--connector", connector, "--partition", &p]);
        match code {
            0 => {
                let v: Value = serde_json::from_str(&out)
                    .unwrap_or_else(|e| panic!("get printed no JSON ({e}): {out}"));
                assert_eq!(v["partition"], *partition, "{out}");
                Some(v["offset"].clone())
            }
            3 => None,
            _ => panic!("connect-offsets get {connector} {p}: exit {code}: {err}"),
        }
    }

    /// `export --connector`: every (partition, offset) of the connector.
    pub fn offsets(&self, connector: &str) -> Vec<(Value, Value)> {
        let out = self.cli_ok(&["export", "--connector", connector]);
        let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        v["offsets"]
            .as_array()
            .unwrap_or_else(|| panic!("no offsets in {out}"))
            .iter()
            .map(|e| (e["partition"].clone(), e["offset"].clone()))
            .collect()
    }

    /// `export`: every connector's document.
    pub fn export_all(&self) -> Value {
        let out = self.cli_ok(&["export"]);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
    }

    /// `connectors --json`.
    pub fn connectors(&self) -> Vec<String> {
        let out = self.cli_ok(&["connectors", "--json"]);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
    }

    /// `import -i FILE` of `doc`.
    pub fn import(&self, doc: &Value) {
        let f = self.file("seed.json", &doc.to_string());
        self.cli_ok(&["import", "-i", f.to_str().unwrap()]);
    }

    /// `history --json` of a connector.
    pub fn history(&self, connector: &str) -> Value {
        let out = self.cli_ok(&["history", "--connector", connector, "--json"]);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
    }

    /// `connect-offsets serve --store URL ARGS` on a free loopback port.
    pub fn serve(&self, args: &[&str]) -> Serve {
        let mut all = vec!["--store", self.url.as_str()];
        all.extend_from_slice(args);
        Serve::start(&all)
    }
}

/// The offset of `partition` among `offsets`.
pub fn offset_of<'a>(offsets: &'a [(Value, Value)], partition: &Value) -> Option<&'a Value> {
    offsets.iter().find(|(p, _)| p == partition).map(|(_, o)| o)
}

/// Now, as RFC 3339 with microseconds (what `rewind --to` and `#rewind-time` take).
pub fn now_rfc3339() -> String {
    connect_offsets::internal::time::format_rfc3339(connect_offsets::internal::time::now_us())
}

/// A browser whose failed waits save their screenshot among the others.
pub fn browser() -> Browser {
    let mut b = Browser::start();
    b.failure_dir = Some(shots_dir());
    b
}

/// Opens the console at `/` and waits for the connectors table.
pub fn open_console<'b>(b: &'b Browser, s: &Serve) -> Element<'b> {
    b.goto(&s.url("/"));
    b.find("#connectors")
}

/// The row of `connector` in `#connectors`, once it is there.
pub fn connector_row<'b>(b: &'b Browser, connector: &str) -> Element<'b> {
    b.find(&format!("#connectors tr[data-connector=\"{connector}\"]"))
}

/// The rows of `#partitions` now, with the partition each names (`data-partition`, parsed).
pub fn partition_rows<'b>(b: &'b Browser) -> Vec<(Element<'b>, Value)> {
    // In one script: the page re-renders its rows as a whole.
    let rows = b.exec(
        "return Array.from(document.querySelectorAll('#partitions tr[data-partition]'), tr => [tr, tr.dataset.partition])",
        vec![],
    );
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let text = r[1].as_str().unwrap();
            let p: Value = serde_json::from_str(text)
                .unwrap_or_else(|e| panic!("data-partition `{text}` is not JSON: {e}"));
            (b.element(&r[0]), p)
        })
        .collect()
}

/// The row of `partition` in `#partitions`, once it is there.
pub fn partition_row<'b>(b: &'b Browser, partition: &Value) -> Element<'b> {
    b.wait_until(&format!("the row of partition {partition}"), || {
        partition_rows(b)
            .into_iter()
            .find(|(_, p)| p == partition)
            .map(|(r, _)| r)
    })
}

/// Types `text` into `#partition-search` (emptied first) and waits until every row shown matches
/// it and at least `at_least` are shown; returns the partitions shown.
pub fn search(b: &Browser, text: &str, at_least: usize) -> Vec<Value> {
    let input = b.find("#partition-search");
    input.clear();
    input.send_keys(text);
    let needle = text.to_lowercase();
    b.wait_until(&format!("the partitions matching `{text}`"), || {
        let rows = partition_rows(b);
        let ps: Vec<Value> = rows.iter().map(|(_, p)| p.clone()).collect();
        (ps.len() >= at_least
            && ps
                .iter()
                .all(|p| p.to_string().to_lowercase().contains(&needle)))
        .then_some(ps)
    })
}

/// Opens the connector view through its hash route (as a bookmark would) and waits for rows.
pub fn open_connector(b: &Browser, s: &Serve, connector: &str) {
    b.goto(&s.url(&format!("/#/connector/{connector}")));
    b.find("#connector");
}

/// `#dialog`, once it is open.
pub fn dialog_open(b: &Browser) -> Element<'_> {
    let d = b.find("#dialog");
    b.wait_until("#dialog open", || {
        (d.prop("open") == json!(true)).then_some(())
    });
    d
}

/// Whether `#dialog` is closed (or gone).
pub fn dialog_closed(b: &Browser) -> bool {
    b.try_find("#dialog")
        .is_none_or(|d| d.prop("open") != json!(true))
}

/// The texts of the dialog's `.change` rows, once there is at least one.
pub fn dialog_changes(b: &Browser) -> Vec<String> {
    dialog_open(b);
    b.wait_until("the dry run's changes in #dialog-diff", || {
        let rows: Vec<String> = b
            .find_all("#dialog-diff .change")
            .iter()
            .map(|e| e.text())
            .collect();
        (!rows.is_empty()).then_some(rows)
    })
}

/// Clicks `#dialog-confirm`, waits for the dialog to close and for `#toast` to show the server's
/// answer; returns it.
pub fn confirm(b: &Browser) -> String {
    b.exec(
        "const t = document.getElementById('toast'); if (t) t.textContent = ''",
        vec![],
    );
    b.find("#dialog-confirm").click();
    b.wait_until("#dialog closed after confirming", || {
        dialog_closed(b).then_some(())
    });
    toast(b)
}

/// `#toast`'s text once it has one.
pub fn toast(b: &Browser) -> String {
    let t = b.find("#toast");
    b.wait_until("a message in #toast", || {
        let text = t
            .prop("textContent")
            .as_str()
            .unwrap_or("")
            .trim()
            .to_string();
        (!text.is_empty()).then_some(text)
    })
}

/// Panics with every CSP violation and uncaught error the page recorded.
pub fn assert_no_page_problems(b: &Browser, when: &str) {
    let problems = b.page_problems();
    assert!(
        problems.is_empty(),
        "{when}: the page reported problems:\n{}",
        problems.join("\n")
    );
}

/// One source connector with `n` partitions `{"table":"tNNN"}` (`lsn` N, `txid` 10·N) and one
/// file connector: the seed of the walkthrough.
pub fn seed(n: usize) -> Value {
    let mut tables: Vec<Value> = (0..n)
        .map(|i| {
            json!({"partition": {"table": format!("t{i:03}")},
                   "offset": {"lsn": i, "txid": i * 10}})
        })
        .collect();
    tables.push(json!({"partition": {"table": "orders"}, "offset": {"lsn": 100, "txid": 1000}}));
    json!({"connectors": {
        "jdbc-orders": {"offsets": tables},
        "file-src": {"offsets": [
            {"partition": {"filename": "/data/a.txt"}, "offset": {"position": 1234}}
        ]},
    }})
}
