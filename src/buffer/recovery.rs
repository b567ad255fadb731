//! Recovery, the first thing [`CommitBuffer::open`](super::CommitBuffer::open) does: open the log
//! (cutting a torn last frame, and skipping corrupt bytes into the dead-letter file when the policy
//! says so), check that it belongs to this writer, replay into the store every batch it holds above
//! the store's applied seq, in order, refuse a gap of batches in neither store nor log (unless the
//! policy skips), then start a fresh segment and release or compact everything older.

use std::sync::Arc;

use super::config::CommitBufferConfig;
use super::hook;
use super::release::release_or_compact;
use crate::crash::CrashPoint;
use crate::dead_letter::DeadLetterFile;
use crate::store::fence::Fences;
use crate::store::{OffsetStore, hooks};
use crate::wal::{RecoveryPolicy, WalDir, WalWriter};
use crate::{Error, Result};

/// What the buffer starts from once the log is replayed.
pub(super) struct Recovery {
    pub(super) wal: Arc<WalDir>,
    /// The fresh segment the log thread appends to.
    pub(super) log: WalWriter,
    /// The highest seq the store holds: everything the log held.
    pub(super) applied: u64,
    /// The highest seq ever logged: the next batch gets the one after.
    pub(super) last_seq: u64,
    /// Batches replayed into the store.
    pub(super) replayed: u64,
}

/// Opens the log in `config.wal_dir` and replays it into `store`.
pub(super) fn recover(store: &dyn OffsetStore, config: &CommitBufferConfig) -> Result<Recovery> {
    let dead_letter = config
        .dead_letter
        .as_ref()
        .map(|p| DeadLetterFile::new(p).with_fs(Arc::clone(&config.fs)));
    // Batches the store already holds are checked in the log but not decoded.
    let applied_before = store.applied_seq(&config.writer)?;
    let (wal, recovered) = WalDir::open_skipping(
        Arc::clone(&config.fs),
        &config.wal_dir,
        config.crash_hook.clone(),
        config.recovery,
        dead_letter.as_ref(),
        Some((config.writer.as_str(), applied_before)),
    )?;
    let writer = &config.writer;
    for b in recovered.snapshot.iter().chain(&recovered.batches) {
        if b.writer != *writer {
            return Err(Error::State(format!(
                "the log in {} belongs to writer `{}`, not `{writer}`",
                config.wal_dir.display(),
                b.writer
            )));
        }
    }
    let mut applied = store.applied_seq(writer)?;
    let mut replayed = 0u64;
    // What tools wrote since these batches were logged stays (store::fence).
    let fences = Fences::read(store, writer)?;
    let hooks = hooks(store);
    let replay = |b: &crate::Batch| -> Result<()> {
        match fences.filter(store, b)? {
            Some(kept) => hooks.apply_logged(&kept),
            None => hooks.apply_logged(b),
        }
    };
    if let Some(snap) = &recovered.snapshot
        && snap.seq > applied
    {
        hook(&config.crash_hook, CrashPoint::InsideRecovery)?;
        replay(snap)?;
        applied = snap.seq;
        replayed += 1;
    }
    let mut last_seq = applied.max(recovered.last_seq);
    for b in &recovered.batches {
        last_seq = last_seq.max(b.seq);
        if b.seq <= applied {
            continue;
        }
        if b.seq != applied + 1 {
            let msg = format!(
                "batches {}..{} of writer `{writer}` are in neither the store nor the log {} \
                 (was the store replaced or restored from an older copy?)",
                applied + 1,
                b.seq - 1,
                config.wal_dir.display()
            );
            if config.recovery == RecoveryPolicy::Fail {
                return Err(Error::Corrupted {
                    file: config.wal_dir.clone(),
                    offset: 0,
                    reason: msg,
                });
            }
            tracing::error!("{msg}; going on (recovery policy skip)");
        }
        hook(&config.crash_hook, CrashPoint::InsideRecovery)?;
        replay(b)?;
        applied = b.seq;
        replayed += 1;
    }
    if replayed > 0 {
        tracing::info!(
            writer,
            replayed,
            applied,
            "replayed the write-ahead log into the store"
        );
    }
    crate::metrics::replayed(writer, replayed);
    if !fences.is_empty() {
        // Persisted first: a fence may go only once what it kept out of the replay is durable.
        store.persist()?;
        fences.clear(store)?;
    }
    let log = wal.new_segment()?;
    // Everything older is applied now: persist and release it (durable store) or fold it into a
    // snapshot (volatile store).
    let newest = wal.closed().iter().map(|s| s.generation).max();
    release_or_compact(store, &wal, writer, applied, newest)?;
    Ok(Recovery {
        wal,
        log,
        applied,
        last_seq,
        replayed,
    })
}
