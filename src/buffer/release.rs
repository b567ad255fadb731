//! The last step of the data path: once the store holds every batch through a seq, the log no longer
//! needs the closed segments holding them. A durable store is persisted first and those segments are
//! then removed; a volatile store (memory) survives a restart only by replay, so its whole state is
//! written as a snapshot that replaces the closed segments instead (while the buffer runs, by the
//! compactor thread).

use crate::model::Batch;
use crate::store::{OffsetStore, OffsetStoreExt};
use crate::wal::WalDir;
use crate::{Offset, OffsetKey, Result};

/// Frees the log of batches through `seq`, which `store` has applied. Durable store: persist it, then
/// release every closed segment at or below `seq`. Volatile store: write its state as the snapshot of
/// `writer` at `seq` through closed segment `through_gen`; with no `through_gen` (the buffer's close:
/// its log thread has stopped, so its last segment counts as closed too), through the newest closed
/// segment that holds, with every one before it, no batch above `seq`, so that the next open starts
/// from the store's state as it was (history's records with their times) instead of replaying its
/// batches; with none such the log stays as it is.
pub(super) fn release_or_compact(
    store: &dyn OffsetStore,
    wal: &WalDir,
    writer: &str,
    seq: u64,
    through_gen: Option<u64>,
) -> Result<()> {
    if store.capabilities().durable {
        store.persist()?;
        wal.release(seq)?;
    } else if let Some(through_gen) = through_gen.or_else(|| {
        wal.close_stopped();
        held_through(wal, seq)
    }) {
        compact(wal, writer, seq, store.all()?, through_gen)?;
    }
    Ok(())
}

/// The newest closed segment of `wal` that, with every closed segment before it, holds no batch
/// above `seq`: a snapshot of the store at `seq` can replace them all.
fn held_through(wal: &WalDir, seq: u64) -> Option<u64> {
    let mut closed = wal.closed();
    closed.sort_by_key(|s| s.generation);
    closed
        .iter()
        .take_while(|s| s.last_seq <= seq)
        .map(|s| s.generation)
        .last()
}

/// Writes `all`, a volatile store's state after `writer`'s batch `seq`, as the log's snapshot
/// through closed segment `through_gen`.
pub(super) fn compact(
    wal: &WalDir,
    writer: &str,
    seq: u64,
    all: Vec<(OffsetKey, Offset)>,
    through_gen: u64,
) -> Result<()> {
    let snapshot = Batch::new(writer, seq, all.into_iter().map(|(k, v)| (k, Some(v))));
    wal.compact(&snapshot, through_gen)
}
