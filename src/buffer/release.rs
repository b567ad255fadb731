//! The last step of the data path: once the store holds every batch through a seq, the log no longer
//! needs the closed segments holding them. A durable store is persisted first and those segments are
//! then removed; a volatile store (memory) survives a restart only by replay, so its whole state is
//! written as a snapshot that replaces the closed segments instead.

use crate::store::OffsetStore;
use crate::wal::WalDir;
use crate::wal::frame::{JsonSnapshotWriter, TooLarge};
use crate::{Error, Result};

/// Frees the log of batches through `seq`, which `store` has applied. Durable store: persist it, then
/// release every closed segment at or below `seq`. Volatile store: write its state as the snapshot of
/// `writer` at `seq` through closed segment `through_gen`; with no `through_gen` nothing is closed
/// that a snapshot could replace, and the log stays as it is.
pub(super) fn release_or_compact(
    store: &dyn OffsetStore,
    wal: &WalDir,
    writer: &str,
    seq: u64,
    through_gen: Option<u64>,
) -> Result<()> {
    if store.durable() {
        store.persist()?;
        wal.release(seq)?;
    } else if let Some(through_gen) = through_gen {
        // The store's JSON as it holds it, not decoded and encoded again: a memory store's state
        // (history included) can be hundreds of MiB.
        let mut frames = Vec::new();
        let mut snapshot = JsonSnapshotWriter::new(writer, seq, &mut frames);
        let too_large = |e: TooLarge| Error::InvalidData(format!("cannot compact the log: {e}"));
        store.each_json(&mut |ns, partition, offset| {
            snapshot.push(ns, partition, offset).map_err(too_large)
        })?;
        snapshot.finish().map_err(too_large)?;
        wal.compact(&frames, through_gen)?;
    }
    Ok(())
}
