//! The command-line tool.
//!
//! Exit codes: 0 success, 1 an error (bad input, a store that fails), 2 a usage error (from clap),
//! 3 not found (no offset for the partition asked for).

use std::io::Write as _;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use connect_offsets::codec::json;
use connect_offsets::store::OffsetStoreExt;
use connect_offsets::{Error, Offset, OffsetKey, OffsetStore};

mod bench;

/// Exit code for "no such offset".
const NOT_FOUND: u8 = 3;

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
struct StoreArg {
    /// The store: memory://, rocksdb:///path or kafka://host:port/topic?...
    #[arg(long, env = "CONNECT_OFFSETS_STORE")]
    store: String,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Prints every offset of a connector as {"offsets":[{"partition":...,"offset":...}]}.
    List {
        #[command(flatten)]
        store: StoreArg,
        /// The connector (namespace).
        #[arg(long)]
        connector: String,
    },
    /// Prints the offset of one partition as {"partition":...,"offset":...}; exit code 3 if none.
    Get {
        #[command(flatten)]
        store: StoreArg,
        /// The connector (namespace).
        #[arg(long)]
        connector: String,
        /// The partition as a JSON object (or null).
        #[arg(long)]
        partition: String,
    },
    /// Sets the offset of one partition.
    Set {
        #[command(flatten)]
        store: StoreArg,
        /// The connector (namespace).
        #[arg(long)]
        connector: String,
        /// The partition as a JSON object (or null).
        #[arg(long)]
        partition: String,
        /// The offset as a JSON object.
        #[arg(long)]
        offset: String,
    },
    /// Resets one partition (--partition), or every partition of the connector (--all).
    Reset {
        #[command(flatten)]
        store: StoreArg,
        /// The connector (namespace).
        #[arg(long)]
        connector: String,
        /// The partition as a JSON object (or null).
        #[arg(long, conflicts_with = "all", required_unless_present = "all")]
        partition: Option<String>,
        /// Reset every partition of the connector.
        #[arg(long)]
        all: bool,
    },
    /// Writes offsets through a store and prints how fast.
    Bench(bench::BenchArgs),
}

pub fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CONNECT_OFFSETS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                eprintln!("  caused by: {s}");
                source = s.source();
            }
            ExitCode::FAILURE
        }
    }
}

fn open(store: &StoreArg) -> connect_offsets::Result<Box<dyn OffsetStore>> {
    connect_offsets::open(&store.store)
}

/// Parses a `--partition` argument: a JSON object or `null`.
pub(crate) fn parse_key(connector: &str, partition: &str) -> connect_offsets::Result<OffsetKey> {
    match json::parse(partition.as_bytes()) {
        Ok(json::Json::Null) => Ok(OffsetKey::null_partition(connector)),
        Ok(json::Json::Object(members)) => json::to_map(members, "partition")
            .map(|p| OffsetKey::new(connector, p))
            .map_err(|r| Error::InvalidData(format!("--partition: {r}"))),
        Ok(other) => Err(Error::InvalidData(format!(
            "--partition must be a JSON object or null, not {other:?}"
        ))),
        Err(r) => Err(Error::InvalidData(format!(
            "--partition is not valid JSON: {r}"
        ))),
    }
}

pub(crate) fn parse_offset(offset: &str) -> connect_offsets::Result<Offset> {
    match json::parse(offset.as_bytes()) {
        Ok(json::Json::Object(members)) => json::to_map(members, "offset")
            .map_err(|r| Error::InvalidData(format!("--offset: {r}"))),
        Ok(other) => Err(Error::InvalidData(format!(
            "--offset must be a JSON object (use `reset` to remove an offset), not {other:?}"
        ))),
        Err(r) => Err(Error::InvalidData(format!(
            "--offset is not valid JSON: {r}"
        ))),
    }
}

/// `{"partition":...,"offset":...}` in Connect's REST shape.
pub(crate) fn entry_json(key: &OffsetKey, offset: Option<&Offset>, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"partition\":");
    match key.partition() {
        Some(p) => json::encode_map(p, out),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"offset\":");
    match offset {
        Some(o) => json::encode_map(o, out),
        None => out.extend_from_slice(b"null"),
    }
    out.push(b'}');
}

fn print(bytes: &[u8]) -> connect_offsets::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(bytes)
        .and_then(|_| stdout.write_all(b"\n"))
        .and_then(|_| stdout.flush())
        .map_err(|e| Error::io("write", "stdout", e))
}

fn run(command: Command) -> connect_offsets::Result<ExitCode> {
    match command {
        Command::List { store, connector } => {
            let store = open(&store)?;
            let mut out = b"{\"offsets\":[".to_vec();
            for (i, (key, offset)) in store.partitions(&connector)?.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                entry_json(key, Some(offset), &mut out);
            }
            out.extend_from_slice(b"]}");
            print(&out)?;
        }
        Command::Get {
            store,
            connector,
            partition,
        } => {
            let key = parse_key(&connector, &partition)?;
            let store = open(&store)?;
            let offset = store.get(&key)?;
            let mut out = Vec::new();
            entry_json(&key, offset.as_ref(), &mut out);
            print(&out)?;
            if offset.is_none() {
                eprintln!("no offset stored for partition {partition} of connector `{connector}`");
                return Ok(ExitCode::from(NOT_FOUND));
            }
        }
        Command::Set {
            store,
            connector,
            partition,
            offset,
        } => {
            let key = parse_key(&connector, &partition)?;
            let offset = parse_offset(&offset)?;
            let store = open(&store)?;
            store.set(key, offset)?;
        }
        Command::Reset {
            store,
            connector,
            partition,
            all,
        } => {
            let store = open(&store)?;
            match partition {
                Some(p) => {
                    let key = parse_key(&connector, &p)?;
                    if store.get(&key)?.is_none() {
                        eprintln!("no offset stored for partition {p} of connector `{connector}`");
                        return Ok(ExitCode::from(NOT_FOUND));
                    }
                    store.reset(key)?;
                }
                None => {
                    debug_assert!(all);
                    let n = store.reset_namespace(&connector)?;
                    eprintln!("reset {n} partitions of connector `{connector}`");
                }
            }
        }
        Command::Bench(args) => bench::run(args)?,
    }
    Ok(ExitCode::SUCCESS)
}
