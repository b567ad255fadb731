//! `connect-offsets`: the command-line tool (`connect-offsets --help`), the dispatcher and what the
//! commands share.
//!
//! Exit codes (a script can rely on them):
//! * 0: success (for `migrate --dry-run` and `import --dry-run` also when changes are pending);
//! * 1: an error: bad input, a store that fails, a store or log in use by a running writer
//!   (the message then says "locked by another process"), a migration whose verification failed;
//! * 2: a usage error (from clap);
//! * 3: not found: no offset for the partition asked for (`get`, `reset --partition`);
//! * 4: corruption: `wal inspect` found corrupt frames, `wal repair` refused to touch them without
//!   `--quarantine`.
//!
//! Results go to stdout (JSON where a script would read them, or with `--json`); messages go to
//! stderr. Commands per concern: [`ops`] (offsets), [`expire`] (stale partitions), [`wal`] (the write-ahead log), [`serve`]
//! (Kafka Connect's offsets REST API), [`bench`].

use std::io::{IsTerminal as _, Write as _};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use connect_offsets::internal::codec::json;
use connect_offsets::{Error, Offset, OffsetKey, OffsetStore};

/// `eprintln!` that never panics: a closed stderr (a pipe whose reader left) loses the message,
/// not the command's result or exit code. Control characters of the names it shows are escaped
/// ([`escape_controls`]).
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($arg)*);
        let _ = writeln!(std::io::stderr(), "{}", $crate::escape_controls(&text, true));
    }};
}

mod bench;
mod expire;
mod history;
mod http;
mod ops;
mod orphans;
mod serve;
mod wal;

/// Exit code for "no such offset".
pub(crate) const NOT_FOUND: u8 = 3;
/// Exit code for "the log holds corrupt frames".
pub(crate) const CORRUPT: u8 = 4;

#[derive(Parser, Debug)]
#[command(
    name = "connect-offsets",
    version,
    about = "Stream-connector offsets in memory, RocksDB or Kafka Connect's offsets topic"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct StoreArg {
    /// The store: memory://, rocksdb:///path, kafka://host:port/topic?... or
    /// kafka-group://host:port/?group=connect-{connector} (sink connectors' consumer groups)
    #[arg(long, env = "CONNECT_OFFSETS_STORE")]
    pub(crate) store: String,
    /// What to do with offsets records that do not decode (kafka:// stores): fail, skip, or per
    /// connector as in `skip,orders=fail` (the URL's `reset.policy`)
    #[arg(long, value_name = "POLICY")]
    pub(crate) reset_policy: Option<String>,
    /// Where records that do not decode are copied (the URL's `dead.letter.file`)
    #[arg(long, value_name = "FILE")]
    pub(crate) dead_letter: Option<std::path::PathBuf>,
}

impl StoreArg {
    /// The store's URL with the flags above as its parameters.
    pub(crate) fn url(&self) -> String {
        let mut url = self.store.clone();
        let flags = [
            ("reset.policy", self.reset_policy.clone()),
            (
                "dead.letter.file",
                self.dead_letter.as_ref().map(|p| p.display().to_string()),
            ),
        ];
        for (name, value) in flags {
            if let Some(v) = value {
                let sep = if url.contains('?') { '&' } else { '?' };
                let v =
                    percent_encoding::utf8_percent_encode(&v, percent_encoding::NON_ALPHANUMERIC);
                url.push_str(&format!("{sep}{name}={v}"));
            }
        }
        url
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Lists the connectors (namespaces) that have offsets, one per line (--json: a JSON array).
    Connectors(ops::ConnectorsArgs),
    /// Prints every offset of a connector as {"offsets":[{"partition":...,"offset":...}]}.
    List(ops::ListArgs),
    /// Prints the offset of one partition as {"partition":...,"offset":...}; exit code 3 if none.
    Get(ops::GetArgs),
    /// Sets the offset of one partition.
    Set(ops::SetArgs),
    /// Resets one partition (--partition), or every partition of the connector (--all).
    Reset(ops::ResetArgs),
    /// Writes offsets as Kafka Connect's JSON: one connector's {"offsets":[...]} with --connector,
    /// else {"connectors":{"name":{"offsets":[...]}}}.
    Export(ops::ExportArgs),
    /// Reads offsets written by `export` (or Kafka Connect's GET .../offsets) into a store, every
    /// connector of the file in one atomic batch. "offset": null resets a partition.
    Import(ops::ImportArgs),
    /// Makes the destination's offsets equal to the source's, one atomic batch per connector, and
    /// verifies both sides afterwards.
    Migrate(ops::MigrateArgs),
    /// Resets every partition of a connector not written for --older-than (--dry-run: lists
    /// them with offset and age, writes nothing).
    Expire(expire::ExpireArgs),
    /// Per-connector commit age and lag, where the store can tell.
    Lag(ops::LagArgs),
    /// How a connector's offsets moved, newest first (a store with `?history=<retention>`).
    History(history::HistoryArgs),
    /// Sets a connector's offsets (all, or one partition) to what they were at a time or seq, in
    /// one atomic batch; partitions that had no offset then are reset. --dry-run prints the moves.
    Rewind(history::RewindArgs),
    /// Connectors that hold offsets but have no config in the Connect cluster (deleted: a new one
    /// of the same name would resume from them), with partitions and last write; --reset NAME or
    /// --reset-all resets them (--dry-run prints each partition and writes nothing).
    Orphans(orphans::OrphansArgs),
    /// The write-ahead log: inspect its frames, repair it.
    Wal {
        #[command(subcommand)]
        command: wal::WalCommand,
    },
    /// Serves Kafka Connect's offsets REST API (GET/PATCH/DELETE /connectors/{name}/offsets,
    /// GET /connectors) and Prometheus metrics (/metrics) over a store.
    Serve(serve::ServeArgs),
    /// Writes offsets through a store and prints how fast.
    Bench(bench::BenchArgs),
}

/// Whether log lines on stderr get colour codes: only for a terminal, and not when `NO_COLOR` is set
/// to anything but the empty string (<https://no-color.org>). A file or pipe (a script, a CI log)
/// gets plain text.
fn use_colour(stderr_is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

/// Runs the tool: logging, the command line, the command, its exit code.
fn run_tool() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CONNECT_OFFSETS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let ansi = use_colour(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        // Its report of a failed write is an `eprintln!`, which panics on a closed stderr (inside
        // librdkafka's log callback: an abort).
        .log_internal_errors(false)
        .init();
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            // Errors name their cause in their own text too: print a cause only when it adds to it.
            // Control characters of names are escaped (a raw one prints as nothing, or moves
            // the cursor); the message's own line breaks stay.
            let mut shown = escape_controls(&e.to_string(), true).into_owned();
            note!("error: {shown}");
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                let text = escape_controls(&s.to_string(), true).into_owned();
                if !shown.contains(&text) {
                    note!("  caused by: {text}");
                    shown.push_str(&text);
                }
                source = s.source();
            }
            match e {
                Error::Corrupted { .. } => ExitCode::from(CORRUPT),
                _ => ExitCode::FAILURE,
            }
        }
    }
}

fn run(command: Command) -> connect_offsets::Result<ExitCode> {
    match command {
        Command::Connectors(a) => ops::connectors(a),
        Command::List(a) => ops::list(a),
        Command::Get(a) => ops::get(a),
        Command::Set(a) => ops::set(a),
        Command::Reset(a) => ops::reset(a),
        Command::Export(a) => ops::export(a),
        Command::Import(a) => ops::import(a),
        Command::Migrate(a) => ops::migrate(a),
        Command::Expire(a) => expire::run(a),
        Command::Lag(a) => ops::lag(a),
        Command::History(a) => history::show(a),
        Command::Rewind(a) => history::rewind(a),
        Command::Orphans(a) => orphans::run(a),
        Command::Wal { command } => wal::run(command),
        Command::Serve(a) => serve::run(a),
        Command::Bench(args) => bench::run(args).map(|()| ExitCode::SUCCESS),
    }
}

pub(crate) fn open(store: &StoreArg) -> connect_offsets::Result<Box<dyn OffsetStore>> {
    connect_offsets::open(&store.url())
}

/// The store a command writes to, or with `dry_run` the one it plans against: a dry run creates
/// nothing, so a store not there yet is planned against as empty.
pub(crate) fn open_target(
    url: &str,
    dry_run: bool,
) -> connect_offsets::Result<Box<dyn OffsetStore>> {
    if !dry_run {
        return connect_offsets::open(url);
    }
    match connect_offsets::open_existing(url) {
        Err(Error::NoStore(why)) => {
            note!("{why}; the dry run plans against an empty store");
            Ok(Box::new(connect_offsets::store::MemoryStore::new()))
        }
        other => other,
    }
}

/// Refuses a write to `memory://` from a command: the store ends with the process, so the change
/// would be acknowledged and then lost (`serve` and `bench` keep theirs while they run).
pub(crate) fn refuse_volatile(store: &StoreArg, command: &str) -> connect_offsets::Result<()> {
    if connect_offsets::internal::store::url::StoreUrl::parse(&store.url())?.scheme == "memory" {
        return Err(Error::Input(format!(
            "`{command}` into memory:// would be lost when the command exits (a memory store lives \
             as long as its process): name a store that keeps it, e.g. rocksdb:///path or \
             kafka://host:port/topic"
        )));
    }
    Ok(())
}

/// The store of a command that reads or changes what is there: one that does not exist (a
/// mistyped path or topic) is refused, not created empty.
pub(crate) fn open_existing(store: &StoreArg) -> connect_offsets::Result<Box<dyn OffsetStore>> {
    connect_offsets::open_existing(&store.url())
}

/// The store of a command that only reads: as [`open_existing`], and a Kafka topic that is not
/// compacted is read with a warning (its offsets can still be exported off it).
pub(crate) fn open_read_only(store: &StoreArg) -> connect_offsets::Result<Box<dyn OffsetStore>> {
    connect_offsets::open_read_only(&store.url())
}

/// Parses a `--partition` argument: a JSON object or `null`.
/// What a command tells before it shows (`writing: false`) or changes offsets of `connector`
/// (`None`: of any): each writer whose log holds batches the store has not applied
/// (`buffer::register`). A writer's replay never undoes a tool's write (`store::fence`), which a
/// write says.
pub(crate) fn warn_unapplied(store: &dyn OffsetStore, connector: Option<&str>, writing: bool) {
    match connect_offsets::internal::buffer::register::unapplied(store, connector) {
        Ok(notes) => {
            for n in notes {
                if writing {
                    note!("warning: {n}; what this command writes is kept when they are replayed");
                } else {
                    note!("warning: {n}");
                }
            }
        }
        Err(e) => note!("warning: cannot tell whether writers' logs hold unapplied batches: {e}"),
    }
}

pub(crate) fn parse_key(connector: &str, partition: &str) -> connect_offsets::Result<OffsetKey> {
    match json::parse_strict(partition.as_bytes()) {
        Ok(json::Json::Null) => Ok(OffsetKey::null_partition(connector)),
        Ok(json::Json::Object(members)) => json::to_map(members, "partition")
            .map(|p| OffsetKey::new(connector, p))
            .map_err(|r| Error::InvalidData(format!("--partition: {r}"))),
        Ok(other) => Err(Error::InvalidData(format!(
            "--partition must be a JSON object or null, not {}",
            other.kind()
        ))),
        Err(r) => Err(Error::InvalidData(format!(
            "--partition is not valid JSON: {r}"
        ))),
    }
}

pub(crate) fn parse_offset(offset: &str) -> connect_offsets::Result<Offset> {
    match json::parse_strict(offset.as_bytes()) {
        Ok(json::Json::Object(members)) => json::to_map(members, "offset")
            .map_err(|r| Error::InvalidData(format!("--offset: {r}"))),
        Ok(other) => Err(Error::InvalidData(format!(
            "--offset must be a JSON object (use `reset` to remove an offset), not {}",
            other.kind()
        ))),
        Err(r) => Err(Error::InvalidData(format!(
            "--offset is not valid JSON: {r}"
        ))),
    }
}

/// Writes `bytes` and a newline to stdout.
pub(crate) fn print(bytes: &[u8]) -> connect_offsets::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(bytes)
        .and_then(|_| stdout.write_all(b"\n"))
        .and_then(|_| stdout.flush())
        .map_err(|e| Error::io("write", "stdout", e))
}

/// A JSON string literal, every control character escaped: the encoder leaves DEL and the C1
/// controls (U+007F to U+009F) as they are, as Connect's does, but a terminal shows them as nothing,
/// so a name holding one would look clean.
pub(crate) fn quoted(s: &str) -> String {
    let mut out = Vec::with_capacity(s.len() + 2);
    json::encode_str(s, &mut out);
    let json = String::from_utf8(out).expect("the encoder writes UTF-8");
    escape_controls(&json, false).into_owned()
}

/// `text` with every control character spelled as a JSON escape (`\u0085`), but for line breaks
/// and tabs when `keep_c0` (an error message's own).
pub(crate) fn escape_controls(text: &str, keep_c0: bool) -> std::borrow::Cow<'_, str> {
    let escaped = |c: char| c.is_control() && !(keep_c0 && (c == '\n' || c == '\t'));
    if !text.chars().any(escaped) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if escaped(c) {
            out.push_str(&format!("\\u{:04X}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out.into()
}

/// A worker offers from its own threads and the commit buffer frees each batch on its log thread:
/// with glibc's allocator, whose slow path those cross-thread frees feed, offering 10,000 offsets
/// took 4.5 ms of a `bench` commit cycle; with mimalloc's per-thread heaps, 1.2 ms.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    keep_freed_heap();
    run_tool()
}

/// Keeps up to 64 MiB of freed memory at the top of each glibc arena (what librdkafka and RocksDB
/// allocate from) instead of handing it back at every free. librdkafka allocates each record it is
/// given and frees it once acknowledged, so a 10,000-offset batch freed its megabytes and the next
/// one faulted them in again, zeroed page by page: a twentieth of the process. Setting the trim
/// threshold ends glibc's sliding mmap threshold, so that one is set to the sliding one's ceiling.
fn keep_freed_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
    }
}

#[cfg(test)]
mod tests {
    use super::use_colour;
    use std::ffi::OsStr;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(use_colour(true, None));
        assert!(use_colour(true, Some(OsStr::new(""))));
        assert!(!use_colour(true, Some(OsStr::new("1"))));
        assert!(!use_colour(false, None));
        assert!(!use_colour(false, Some(OsStr::new(""))));
    }
}
