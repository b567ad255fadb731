//! Where a commit buffer's log is, recorded in its store, so that a tool acting on the store can
//! tell when that log holds batches the store has not applied (a worker killed between its log and
//! its store) instead of showing older offsets as current.
//!
//! A buffer over a durable store records, after its recovery, one offset in the reserved namespace
//! [`WRITERS_NAMESPACE`]: partition `{"writer":W}`, offset
//! `{"log":"<dir>","host":"<host>","pid":P,"opened_ms":T,"closed":false}`; a clean
//! [`close`](super::CommitBuffer::close) writes it again with `"closed":true` (its `opened_ms`
//! then holds the close's time). The record only informs: what keeps a tool's write from being undone by a
//! replay is its fence ([`crate::store::fence`]), and a record that failed to be written costs a
//! warning, never a commit.

use std::path::{Path, PathBuf};

use crate::Result;
use crate::model::{Batch, Offset, OffsetKey, Partition, Value};
use crate::store::OffsetStore;
use crate::wal::frame::FrameKind;
use crate::wal::inspect;

pub use crate::namespaces::WRITERS_NAMESPACE;

/// One writer's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// The buffer's writer id.
    pub writer: String,
    /// Its log directory, as the buffer saw it.
    pub log: PathBuf,
    /// The machine it ran on.
    pub host: String,
    /// Its process.
    pub pid: u32,
    /// When it opened, in milliseconds since the Unix epoch.
    pub opened_ms: i64,
    /// True once it closed cleanly: its log then holds nothing the store lacks.
    pub closed: bool,
}

fn key(writer: &str) -> OffsetKey {
    OffsetKey::new(WRITERS_NAMESPACE, Partition::new().with("writer", writer))
}

/// This machine's name (Linux's, else `HOSTNAME`, else empty).
pub fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_default()
}

/// Writes `writer`'s record: open (after recovery) or closed (after a clean close).
pub(super) fn record(
    store: &dyn OffsetStore,
    writer: &str,
    log: &Path,
    closed: bool,
) -> Result<()> {
    let log = std::fs::canonicalize(log).unwrap_or_else(|_| log.to_path_buf());
    let now = crate::time::now_ms() as i64;
    let offset = Offset::new()
        .with("log", log.to_string_lossy().into_owned())
        .with("host", host())
        .with("pid", i64::from(std::process::id()))
        .with("opened_ms", now)
        .with("closed", closed);
    store.apply(&Batch::new("", 0, [(key(writer), Some(offset))]))?;
    store.persist()
}

/// Every writer's record the store holds.
pub fn read(store: &dyn OffsetStore) -> Result<Vec<Registration>> {
    let mut out = Vec::new();
    if store.kind() == "kafka-group" {
        // A consumer group holds sink positions only: no buffer writes one.
        return Ok(out);
    }
    for (k, o) in store.partitions(WRITERS_NAMESPACE)? {
        let text = |name: &str| match o.get(name) {
            Some(Value::String(s)) => s.clone(),
            _ => String::new(),
        };
        let Some(Value::String(writer)) = k.partition().and_then(|p| p.get("writer")).cloned()
        else {
            continue;
        };
        out.push(Registration {
            writer,
            log: PathBuf::from(text("log")),
            host: text("host"),
            pid: match o.get("pid") {
                Some(Value::Int(p)) => u32::try_from(*p).unwrap_or(0),
                _ => 0,
            },
            opened_ms: match o.get("opened_ms") {
                Some(Value::Int(t)) => *t,
                _ => 0,
            },
            closed: matches!(o.get("closed"), Some(Value::Bool(true))),
        });
    }
    Ok(out)
}

/// What a tool must say about the logs of `store`'s writers before it shows or changes offsets:
/// one line per writer that did not close cleanly and whose log holds (or, on another machine,
/// may hold) batches the store has not applied. `connector`: only batches touching it count
/// (`None`: any).
pub fn unapplied(store: &dyn OffsetStore, connector: Option<&str>) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    let here = host();
    for r in read(store)? {
        if r.closed {
            continue;
        }
        let applied = store.applied_seq(&r.writer)?;
        let who = format!(
            "writer `{}` (log {} on {}, pid {}, opened at {})",
            r.writer,
            r.log.display(),
            if r.host.is_empty() {
                "an unnamed host"
            } else {
                &r.host
            },
            r.pid,
            crate::time::format_rfc3339(r.opened_ms.saturating_mul(1000))
        );
        if r.host != here || !r.log.is_dir() {
            notes.push(format!(
                "{who} has not closed; this store holds its batches up to seq {applied}, and its \
                 log, which this machine cannot read, may hold later ones it acknowledged: they \
                 are replayed when it starts again"
            ));
            continue;
        }
        let scan = match inspect::scan(&r.log) {
            Ok(s) => s,
            Err(e) => {
                notes.push(format!(
                    "{who} has not closed, and its log cannot be read: {e}"
                ));
                continue;
            }
        };
        let (mut first, mut last, mut entries) = (u64::MAX, 0u64, 0usize);
        for f in scan.frames() {
            let (Some(w), Some(seq), Some(FrameKind::Batch | FrameKind::Snapshot)) =
                (&f.writer, f.seq, f.kind)
            else {
                continue;
            };
            if *w != r.writer || seq <= applied {
                continue;
            }
            let n: usize = f
                .connectors
                .iter()
                .filter(|(c, _)| connector.is_none_or(|want| want == c))
                .map(|(_, n)| n)
                .sum();
            if n > 0 {
                first = first.min(seq);
                last = last.max(seq);
                entries += n;
            }
        }
        if entries == 0 {
            continue;
        }
        let running = Path::new(&format!("/proc/{}", r.pid)).exists();
        notes.push(format!(
            "{who}{} has logged batches {first}..={last} ({entries} entr{} of {}) that this store \
             has not applied (it holds up to seq {applied}): the offsets here are older than \
             what the writer goes on from; its next start replays them, except over what tools \
             write in the meantime",
            if running { ", still running," } else { "" },
            if entries == 1 { "y" } else { "ies" },
            connector.map_or("its connectors".to_string(), |c| format!("connector `{c}`")),
        ));
    }
    Ok(notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    fn registration(store: &MemoryStore, writer: &str, host: &str, closed: bool) {
        let offset = Offset::new()
            .with("log", "/var/lib/worker/wal")
            .with("host", host)
            .with("pid", 4242i64)
            .with("opened_ms", 1_796_000_000_000i64)
            .with("closed", closed);
        store
            .apply(&Batch::new("", 0, [(key(writer), Some(offset))]))
            .unwrap();
    }

    #[test]
    fn a_writer_on_another_machine_may_hold_batches() {
        let store = MemoryStore::new();
        store
            .apply(&Batch::new(
                "w",
                3,
                [(OffsetKey::new("c", Partition::new().with("p", 1)), None)],
            ))
            .unwrap();
        registration(&store, "w", "another-host", false);
        let notes = unapplied(&store, Some("c")).unwrap();
        assert_eq!(notes.len(), 1, "{notes:?}");
        for part in [
            "writer `w` (log /var/lib/worker/wal on another-host, pid 4242",
            "up to seq 3",
            "cannot read",
        ] {
            assert!(notes[0].contains(part), "{part}: {}", notes[0]);
        }
    }

    #[test]
    fn a_closed_writer_holds_nothing_unapplied() {
        let store = MemoryStore::new();
        registration(&store, "w", "another-host", true);
        assert!(unapplied(&store, None).unwrap().is_empty());
        assert_eq!(read(&store).unwrap().len(), 1);
    }
}
