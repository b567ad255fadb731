//! Retention of stale partitions: resetting every partition of a connector whose offset has not
//! been written for a while (file and table sources leave offsets of files and tables that are
//! gone, and a worker reads them all at every start).
//!
//! Every backend that can ([`keeps_change_times`](crate::store::Capabilities)) records when each offset was last
//! written, in the same atomic write as the offset: the memory store in its entry, RocksDB in the
//! value's header, Kafka as the record timestamp (which the loader keeps for
//! every key anyway). Writing the same value again counts as a write: a partition a worker still
//! commits is not stale, however still its offset stands.
//!
//! [`plan`] finds the stale partitions (a dry run prints it), [`ExpirePlan::apply`] resets them in
//! one atomic batch; a [`CommitBuffer`](crate::buffer::CommitBuffer) with
//! [`expire_after`](crate::buffer::CommitBufferConfig::expire_after) does the same on an interval,
//! through its own log, so that it never races one of its commits.
//!
//! ```
//! use std::time::{Duration, SystemTime, UNIX_EPOCH};
//! use connect_offsets::{expire, Offset, OffsetKey, OffsetStore, OffsetStoreExt, Partition};
//!
//! let store = connect_offsets::store::MemoryStore::new();
//! let key = OffsetKey::new("files", Partition::new().with("filename", "/gone.log"));
//! store.set(key.clone(), Offset::new().with("position", 10))?;
//! // An hour later:
//! let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970");
//! let later = now.as_millis() as u64 + 3_600_000;
//! let plan = expire::plan(&store, "files", Duration::from_secs(1800), later)?;
//! assert_eq!(plan.stale.len(), 1);
//! assert_eq!(plan.apply(&store)?, 1);
//! assert_eq!(store.get(&key)?, None);
//! # Ok::<(), connect_offsets::Error>(())
//! ```

use std::time::Duration;

use crate::store::OffsetStore;
use crate::store::OffsetStoreExt as _;
use crate::{Error, Offset, OffsetKey, Result};

/// A partition whose offset was last written before the cut-off.
#[derive(Debug, Clone, PartialEq)]
pub struct StalePartition {
    /// The partition.
    pub key: OffsetKey,
    /// Its offset now.
    pub offset: Offset,
    /// When it was last written (milliseconds since the Unix epoch).
    pub written_ms: u64,
    /// How long ago that was, from the plan's `now`.
    pub age: Duration,
}

/// What [`plan`] found for one connector.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpirePlan {
    /// The connector (namespace).
    pub connector: String,
    /// The cut-off: partitions not written for at least this long are stale.
    pub older_than: Duration,
    /// The partitions to reset, oldest first.
    pub stale: Vec<StalePartition>,
    /// Partitions written more recently (kept).
    pub fresh: usize,
    /// Partitions without a recorded write time (written before the store kept them): kept.
    pub untimed: usize,
}

/// Refuses a store that records no write times, naming it.
pub fn check_store(store: &dyn OffsetStore) -> Result<()> {
    if store.capabilities().keeps_change_times {
        return Ok(());
    }
    Err(Error::State(format!(
        "the {} store records no write time per partition, so it cannot tell which offsets are stale; expire works on memory, rocksdb and kafka stores",
        store.kind()
    )))
}

/// The partitions of `connector` not written for `older_than` as of `now_ms`. Refuses a store
/// without write times and a connector with no offsets in the store.
pub fn plan(
    store: &dyn OffsetStore,
    connector: &str,
    older_than: Duration,
    now_ms: u64,
) -> Result<ExpirePlan> {
    check_store(store)?;
    if crate::namespaces::is_reserved_namespace(connector) {
        return Err(Error::Input(format!(
            "`{connector}` holds the crate's own records, not a connector's offsets: it does not expire"
        )));
    }
    let parts = store.partitions(connector)?;
    if parts.is_empty() {
        let mut known = store.namespaces()?;
        known.retain(|n| !crate::namespaces::is_reserved_namespace(n));
        return Err(Error::Input(format!(
            "connector `{connector}` has no offsets in this {} store (connectors with offsets: {})",
            store.kind(),
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        )));
    }
    let keys: Vec<OffsetKey> = parts.iter().map(|(k, _)| k.clone()).collect();
    let times = store.change_times(&keys)?;
    let cutoff = now_ms.saturating_sub(older_than.as_millis() as u64);
    let (mut fresh, mut untimed) = (0, 0);
    let mut stale = Vec::new();
    for ((key, offset), written) in parts.into_iter().zip(times) {
        match written {
            None => untimed += 1,
            Some(w) if w <= cutoff => stale.push(StalePartition {
                key,
                offset,
                written_ms: w,
                age: Duration::from_millis(now_ms.saturating_sub(w)),
            }),
            Some(_) => fresh += 1,
        }
    }
    stale.sort_by(|a, b| a.written_ms.cmp(&b.written_ms).then(a.key.cmp(&b.key)));
    Ok(ExpirePlan {
        connector: connector.to_string(),
        older_than,
        stale,
        fresh,
        untimed,
    })
}

impl ExpirePlan {
    /// Resets the stale partitions in one atomic, unsequenced batch (as `reset` does) and counts
    /// them in the `connect_offsets_expired_total` metric. Returns how many were reset. Meant for
    /// a connector whose worker is stopped: a running worker expires through its own buffer.
    pub fn apply(&self, store: &dyn OffsetStore) -> Result<usize> {
        if self.stale.is_empty() {
            return Ok(0);
        }
        store.write(self.stale.iter().map(|s| (s.key.clone(), None)).collect())?;
        crate::metrics::expired(&self.connector, self.stale.len() as u64);
        Ok(self.stale.len())
    }
}
