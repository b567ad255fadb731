//! The embedded default store: RocksDB.
//!
//! Layout (one column family):
//! * `o` + [`OffsetKey::id`] → `u32` LE length of the Connect key (top bit set: a `u64` LE write
//!   time follows, for [`crate::expire`]), the Connect key bytes, the Connect value bytes (see
//!   `Header`). The id sorts by namespace first, so a namespace is one prefix scan; the stored bytes
//!   are exactly Connect's, so export needs no re-encoding and keeps the caller's member order. The
//!   time lives in the value, not a key of its own: a second key per offset cost a fifth of the
//!   commit throughput.
//! * `s` + writer → `u64` BE: the writer's applied `seq`, in the same write batch as its entries.
//!
//! Durability: each batch is one RocksDB write batch (atomic). A batch from a
//! [`CommitBuffer`](crate::buffer::CommitBuffer) ([`CommitHooks::apply_logged`]) skips
//! RocksDB's own log: the buffer's log is synced already and keeps the batch until
//! [`persist`](OffsetStore::persist) has flushed RocksDB's memtable to its tables, so a crash in
//! between loses only batches the buffer's recovery replays. Any other batch goes through RocksDB's
//! log, unsynced (a crash of the process keeps it, a power loss may not) unless `?sync=true`.
//!
//! The directory is created 0700 and RocksDB's files in it are set to 0600 when the store opens,
//! persists and closes (RocksDB itself creates them with the process umask; the 0700 directory keeps
//! other users out in between).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rocksdb::{DB, Direction, IteratorMode, Options, WriteBatch, WriteOptions};

use super::{ApplyFault, BatchEntry, Capabilities, CommitHooks, Encoded, OffsetStore};
use crate::codec::json;
use crate::model::{Batch, OffsetKey};
use crate::{Error, Offset, Result};

const OFFSET: u8 = b'o';
const SEQ: u8 = b's';
/// Set in a value's key length when the value carries its write time (see [`Header`]).
const TIMED: u32 = 1 << 31;

/// Options for [`RocksDbStore::open_with`].
#[derive(Debug, Clone, Default)]
pub struct RocksDbOptions {
    /// Sync RocksDB's log on every batch (for use without the commit buffer's own log).
    pub sync: bool,
}

/// Offsets in a RocksDB database directory.
pub struct RocksDbStore {
    db: DB,
    /// Held until `db` has closed (fields drop in order): see [`lock_dir`].
    _dir_lock: std::fs::File,
    path: PathBuf,
    sync: bool,
    /// Batches are in the memtable that RocksDB's log does not hold: `persist` flushes it.
    unlogged: AtomicBool,
    fault: Option<Arc<dyn ApplyFault>>,
}

impl std::fmt::Debug for RocksDbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RocksDbStore")
            .field("path", &self.path)
            .field("sync", &self.sync)
            .finish()
    }
}

fn err(path: &Path, what: &str, e: rocksdb::Error) -> Error {
    Error::store_caused("rocksdb", format!("{what} {}", path.display()), e)
}

impl RocksDbStore {
    /// Opens (creating if missing) the store in directory `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, RocksDbOptions::default())
    }

    /// Opens with options.
    pub fn open_with(path: impl AsRef<Path>, options: RocksDbOptions) -> Result<Self> {
        Self::open_tuned(path.as_ref(), options, |_| {})
    }

    fn open_tuned(
        path: &Path,
        options: RocksDbOptions,
        tune: impl FnOnce(&mut Options),
    ) -> Result<Self> {
        let path = path.to_path_buf();
        if !path.is_dir() {
            create_private(&path)?;
        }
        let dir_lock = lock_dir(&path)?;
        private_dir(&path)?;
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.set_compression_type(rocksdb::DBCompressionType::None);
        // A lookup probes every level-0 file until compaction merges them (right after a big run,
        // several): a bloom filter per file answers "not here" without reading its blocks.
        let mut table = rocksdb::BlockBasedOptions::default();
        table.set_bloom_filter(10.0, false);
        opts.set_block_based_table_factory(&table);
        opts.set_keep_log_file_num(2);
        opts.set_max_log_file_size(1 << 20);
        tune(&mut opts);
        let db = DB::open(&opts, &path).map_err(|e| {
            let msg = e.to_string();
            if msg.contains("lock") || msg.contains("LOCK") {
                Error::Locked {
                    path: path.clone(),
                    reason: msg,
                }
            } else {
                err(&path, "open", e)
            }
        })?;
        let store = RocksDbStore {
            db,
            _dir_lock: dir_lock,
            path,
            sync: options.sync,
            unlogged: AtomicBool::new(false),
            fault: None,
        };
        store.tighten_files()?;
        Ok(store)
    }

    /// Opens for the crash tests: no compaction runs in the background, so that once every user of
    /// the store is gone the directory holds still for [`crash_image`](Self::crash_image).
    #[cfg(feature = "testkit")]
    pub fn open_for_crash_tests(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_tuned(path.as_ref(), RocksDbOptions::default(), |o| {
            o.set_disable_auto_compactions(true)
        })
    }

    /// Copies into the new directory `to` what this store's directory holds now, the files a killed
    /// process would leave: what is only in the memtable (batches written past RocksDB's log since
    /// the last `persist`) is not in them. Call it when nothing writes to the store.
    #[cfg(feature = "testkit")]
    pub fn crash_image(&self, to: &Path) -> Result<()> {
        private_dir(to)?;
        self.db
            .disable_file_deletions()
            .map_err(|e| err(&self.path, "hold the files of", e))?;
        let entries =
            std::fs::read_dir(&self.path).map_err(|e| Error::io("list", &self.path, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("list", &self.path, e))?;
            if entry.file_type().is_ok_and(|t| t.is_file()) {
                let dest = to.join(entry.file_name());
                std::fs::copy(entry.path(), &dest).map_err(|e| Error::io("copy to", &dest, e))?;
            }
        }
        Ok(())
    }

    /// The same store with a fault seam inside `apply` (tests).
    pub fn with_fault(mut self, fault: Arc<dyn ApplyFault>) -> Self {
        self.fault = Some(fault);
        self
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn tighten_files(&self) -> Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let entries =
            std::fs::read_dir(&self.path).map_err(|e| Error::io("list", &self.path, e))?;
        for entry in entries.flatten() {
            let p = entry.path();
            if let Ok(meta) = entry.metadata()
                && meta.is_file()
                && meta.permissions().mode() & 0o077 != 0
            {
                // A file RocksDB deleted in between is fine to miss.
                let _ = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600));
            }
        }
        Ok(())
    }

    /// One batch (and `extra`, keys none of its) as one write batch, through RocksDB's log or past it.
    fn write(&self, batch: &Batch, extra: &[BatchEntry], through_log: bool) -> Result<()> {
        if self.fault.is_some() && !extra.is_empty() {
            // The fault seam is shown the whole batch, as it is staged.
            return self.write(&super::extended(batch, extra), &[], through_log);
        }
        if self.holds(batch)? {
            return Ok(());
        }
        let rows = self.rows(batch, extra);
        self.commit(batch, rows, through_log)
    }

    /// True when `batch` is applied already (its seq is not above its writer's).
    fn holds(&self, batch: &Batch) -> Result<bool> {
        Ok(batch.seq != 0 && batch.seq <= self.applied_seq(&batch.writer)?)
    }

    /// The write batch of `batch` and `extra`: each entry's row and the writer's seq.
    fn rows(&self, batch: &Batch, extra: &[BatchEntry]) -> Rows {
        // Room for typical entries up front: grown entry by entry, the batch's buffer was copied at
        // every doubling.
        let mut wb = WriteBatch::with_capacity_bytes((batch.entries.len() + extra.len()) * 128);
        let (mut buf, mut k) = (Vec::new(), Vec::new());
        // In key order: the memtable's skip list then finds each insert next to the last one instead
        // of searching from the top (random order costs about half the apply time at 10,000 entries).
        // Each id is looked up once, not at every comparison of the sort.
        let mut order: Vec<(&[u8], usize, &OffsetKey, &Option<Offset>)> = batch
            .entries
            .iter()
            .chain(extra.iter().map(|(k, v)| (k, v)))
            .enumerate()
            .map(|(i, (key, offset))| (key.id(), i, key, offset))
            .collect();
        order.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let shown = self
            .fault
            .as_ref()
            .map(|_| order.iter().map(|e| e.1).collect());
        let now = crate::time::now_ms().to_le_bytes();
        for (id, _, key, offset) in order {
            k.clear();
            k.push(OFFSET);
            k.extend_from_slice(id);
            match offset {
                Some(offset) => {
                    buf.clear();
                    buf.extend_from_slice(&[0; 4]);
                    buf.extend_from_slice(&now);
                    json::encode_key(key, &mut buf);
                    let key_len = (buf.len() - 12) as u32;
                    buf[..4].copy_from_slice(&(key_len | TIMED).to_le_bytes());
                    json::encode_value(offset, &mut buf);
                    wb.put(&k, &buf);
                }
                None => wb.delete(&k),
            }
        }
        if batch.seq != 0 {
            wb.put(seq_key(&batch.writer), batch.seq.to_be_bytes());
        }
        Rows {
            wb,
            seq: batch.seq,
            shown,
        }
    }

    /// Writes `rows`, the write batch of `batch`, through RocksDB's log or past it.
    fn commit(&self, batch: &Batch, rows: Rows, through_log: bool) -> Result<()> {
        if through_log && self.unlogged.load(Ordering::Acquire) {
            // RocksDB's recovery would replay this batch onto tables that miss the unlogged ones
            // before it: flush those first.
            self.persist()?;
        }
        if let Some(fault) = &self.fault {
            for &i in rows.shown.iter().flatten() {
                fault.before_entry(batch, i)?;
            }
            fault.before_commit(batch)?;
        }
        let mut wo = WriteOptions::default();
        wo.set_sync(self.sync && through_log);
        wo.disable_wal(!through_log);
        if !through_log {
            self.unlogged.store(true, Ordering::Release);
        }
        self.db.write_opt(rows.wb, &wo).map_err(|e| {
            err(
                &self.path,
                &format!("write batch {}:{} to", batch.writer, batch.seq),
                e,
            )
        })
    }

    fn decode_entry(&self, raw_key: &[u8], value: &[u8]) -> Result<(OffsetKey, Offset)> {
        let bad = |reason: &str| {
            Error::store(
                "rocksdb",
                format!(
                    "{}: bad record at key {:?}: {reason}",
                    self.path.display(),
                    String::from_utf8_lossy(raw_key)
                ),
            )
        };
        let h = Header::parse(value).ok_or_else(|| bad("value shorter than its header"))?;
        let key = json::decode_key(&value[h.key.clone()]).map_err(|e| bad(&e.to_string()))?;
        let offset = json::decode_value(&value[h.key.end..])
            .map_err(|e| bad(&e.to_string()))?
            .ok_or_else(|| bad("null offset stored"))?;
        Ok((key, offset))
    }

    fn decode_offset(&self, value: &[u8]) -> Result<Offset> {
        let body = Header::parse(value).map(|h| &value[h.key.end..]);
        let body = body.ok_or_else(|| {
            Error::store(
                "rocksdb",
                format!("{}: truncated record", self.path.display()),
            )
        })?;
        json::decode_value(body)?.ok_or_else(|| {
            Error::store(
                "rocksdb",
                format!("{}: null offset stored", self.path.display()),
            )
        })
    }
}

/// A batch's write, built before it is written (see [`CommitHooks::encode_logged`]); its rows carry
/// the time they were built as their write time (built ahead, the time the batch was logged).
struct Rows {
    wb: WriteBatch,
    /// The batch's seq: rows are written only for the batch they were built from.
    seq: u64,
    /// With a fault seam: each row's entry index in the batch, in write order, to show the seam.
    shown: Option<Vec<usize>>,
}

/// An exclusive `flock` on the store's directory, taken before anything in it is looked at and held
/// while the store is open. RocksDB takes its own LOCK only after rotating its info log, so two
/// processes opening one directory at once failed there with unrelated errors, and it tells a second
/// open in one process only by the path's spelling.
fn lock_dir(path: &Path) -> Result<std::fs::File> {
    let dir = std::fs::File::open(path).map_err(|e| Error::io("open directory", path, e))?;
    match dir.try_lock() {
        Ok(()) => Ok(dir),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked {
            path: path.to_path_buf(),
            reason: "the store is open in another process or handle".into(),
        }),
        Err(std::fs::TryLockError::Error(e)) => Err(Error::io("lock directory", path, e)),
    }
}

/// Names RocksDB gives the files of a store: a directory holding only these is a store a crash
/// stopped while it was being created, not someone else's directory.
fn is_rocksdb_file(name: &str) -> bool {
    matches!(name, "CURRENT" | "IDENTITY" | "LOCK" | "LOG")
        || ["LOG.old.", "OPTIONS-", "MANIFEST-"]
            .iter()
            .any(|p| name.starts_with(p))
        || [".log", ".sst", ".blob", ".dbtmp"]
            .iter()
            .any(|s| name.ends_with(s))
}

fn create_private(path: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| Error::io("create directory", path, e))
}

/// Creates `path` (and parents) with mode 0700, or tightens an existing directory to 0700: one
/// that is empty or holds a store. Any other is refused: a store takes a directory of its own
/// (`rocksdb:///` would have made `/` unreadable to every other user).
pub(crate) fn private_dir(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if path.is_dir() {
        let entries = std::fs::read_dir(path).map_err(|e| Error::io("list", path, e))?;
        let foreign = entries
            .filter_map(|e| e.ok())
            .any(|e| !is_rocksdb_file(&e.file_name().to_string_lossy()));
        if !path.join("CURRENT").is_file() && foreign {
            return Err(Error::Settings(format!(
                "{} is not empty and holds no RocksDB store: a store takes a directory of its own \
                 (a new or empty one), whose permissions it sets to 0700 and which it fills with \
                 its files",
                path.display()
            )));
        }
        let mode = std::fs::metadata(path)
            .map_err(|e| Error::io("stat", path, e))?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| Error::io("chmod 0700", path, e))?;
        }
        return Ok(());
    }
    create_private(path)
}

fn offset_key(id: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + id.len());
    k.push(OFFSET);
    k.extend_from_slice(id);
    k
}

/// The front of a stored offset: `u32` LE key length, with [`TIMED`] set when a `u64` LE write
/// time (milliseconds since the Unix epoch, for [`crate::expire`]) follows it; then the key's
/// JSON, then the offset's. Offsets written before times were kept have no time.
struct Header {
    written: Option<u64>,
    key: std::ops::Range<usize>,
}

impl Header {
    /// `None` when `value` is shorter than the header says.
    fn parse(value: &[u8]) -> Option<Header> {
        let len = u32::from_le_bytes(value.get(..4)?.try_into().ok()?);
        let (written, start) = if len & TIMED != 0 {
            let t = u64::from_le_bytes(value.get(4..12)?.try_into().ok()?);
            (Some(t), 12)
        } else {
            (None, 4)
        };
        let end = start + (len & !TIMED) as usize;
        (end <= value.len()).then_some(Header {
            written,
            key: start..end,
        })
    }
}

fn seq_key(writer: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + writer.len());
    k.push(SEQ);
    k.extend_from_slice(writer.as_bytes());
    k
}

impl OffsetStore for RocksDbStore {
    fn kind(&self) -> &'static str {
        "rocksdb"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::DEFAULT
            .with_durable(true)
            .with_sole_writer(true)
            .with_change_times(true)
    }

    fn apply(&self, batch: &Batch) -> Result<()> {
        self.write(batch, &[], true)
    }

    fn applied_seq(&self, writer: &str) -> Result<u64> {
        match self
            .db
            .get_pinned(seq_key(writer))
            .map_err(|e| err(&self.path, "read seq from", e))?
        {
            None => Ok(0),
            Some(v) => {
                let bytes: [u8; 8] = v.as_ref().try_into().map_err(|_| {
                    Error::store(
                        "rocksdb",
                        format!(
                            "{}: seq record of writer `{writer}` is not 8 bytes",
                            self.path.display()
                        ),
                    )
                })?;
                Ok(u64::from_be_bytes(bytes))
            }
        }
    }

    fn writers(&self) -> Result<Vec<(String, u64)>> {
        let mut out = Vec::new();
        for item in self
            .db
            .iterator(IteratorMode::From(&[SEQ], Direction::Forward))
        {
            let (k, v) = item.map_err(|e| err(&self.path, "scan", e))?;
            if k.first() != Some(&SEQ) {
                break;
            }
            let writer = String::from_utf8_lossy(&k[1..]).into_owned();
            let seq = v.as_ref().try_into().map(u64::from_be_bytes).unwrap_or(0);
            out.push((writer, seq));
        }
        Ok(out)
    }

    fn get(&self, key: &OffsetKey) -> Result<Option<Offset>> {
        match self
            .db
            .get_pinned(offset_key(key.id()))
            .map_err(|e| err(&self.path, "read from", e))?
        {
            None => Ok(None),
            Some(v) => self.decode_offset(&v).map(Some),
        }
    }

    fn get_many(&self, keys: &[OffsetKey]) -> Result<Vec<Option<Offset>>> {
        let raw: Vec<Vec<u8>> = keys.iter().map(|k| offset_key(k.id())).collect();
        self.db
            .multi_get(&raw)
            .into_iter()
            .map(|r| match r.map_err(|e| err(&self.path, "read from", e))? {
                None => Ok(None),
                Some(v) => self.decode_offset(&v).map(Some),
            })
            .collect()
    }

    fn partitions(&self, namespace: &str) -> Result<Vec<(OffsetKey, Offset)>> {
        let prefix = offset_key(&OffsetKey::namespace_prefix(namespace));
        let mut out = Vec::new();
        for item in self
            .db
            .iterator(IteratorMode::From(&prefix, Direction::Forward))
        {
            let (k, v) = item.map_err(|e| err(&self.path, "scan", e))?;
            if !k.starts_with(&prefix) {
                break;
            }
            out.push(self.decode_entry(&k, &v)?);
        }
        Ok(out)
    }

    fn namespaces(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        let mut from = vec![OFFSET];
        loop {
            let mut iter = self
                .db
                .iterator(IteratorMode::From(&from, Direction::Forward));
            let Some(item) = iter.next() else { break };
            let (k, _) = item.map_err(|e| err(&self.path, "scan", e))?;
            if k.first() != Some(&OFFSET) {
                break;
            }
            let corrupt = || {
                Error::store(
                    "rocksdb",
                    format!("{}: malformed offset key", self.path.display()),
                )
            };
            let len = k.get(1..5).ok_or_else(corrupt)?;
            let len = u32::from_be_bytes(len.try_into().expect("4 bytes")) as usize;
            let ns = k.get(5..5 + len).ok_or_else(corrupt)?;
            out.push(String::from_utf8(ns.to_vec()).map_err(|_| corrupt())?);
            // Every id of this namespace continues with `{` or `n`: skip past all of them.
            from = k[..5 + len].to_vec();
            from.push(0xFF);
        }
        // Ids sort by name length first (the length prefix); callers want names in order.
        out.sort_unstable();
        Ok(out)
    }

    fn persist(&self) -> Result<()> {
        // Cleared first: a batch written during the flush sets it again for the next persist.
        if self.unlogged.swap(false, Ordering::AcqRel) {
            self.db
                .flush()
                .map_err(|e| err(&self.path, "flush memtable of", e))?;
        }
        self.db
            .flush_wal(true)
            .map_err(|e| err(&self.path, "sync log of", e))?;
        self.tighten_files()
    }

    fn change_times(&self, keys: &[OffsetKey]) -> Result<Vec<Option<u64>>> {
        let raw: Vec<Vec<u8>> = keys.iter().map(|k| offset_key(k.id())).collect();
        self.db
            .multi_get(&raw)
            .into_iter()
            .map(|r| {
                let v = r.map_err(|e| err(&self.path, "read write times from", e))?;
                Ok(v.and_then(|v| Header::parse(&v)?.written))
            })
            .collect()
    }

    fn hooks(&self) -> Option<&dyn CommitHooks> {
        Some(self)
    }
}

impl CommitHooks for RocksDbStore {
    fn apply_logged(&self, batch: &Batch) -> Result<()> {
        self.write(batch, &[], false)
    }

    fn apply_extended(&self, batch: &Batch, extra: &[BatchEntry], logged: bool) -> Result<()> {
        self.write(batch, extra, !logged)
    }

    fn encode_logged(&self, batch: &Batch) -> Option<Encoded> {
        Some(Box::new(self.rows(batch, &[])))
    }

    fn apply_encoded(&self, batch: &Batch, encoded: Encoded) -> Result<()> {
        match encoded.downcast::<Rows>() {
            Ok(rows) if rows.seq == batch.seq => {
                if self.holds(batch)? {
                    return Ok(());
                }
                self.commit(batch, *rows, false)
            }
            // Built for another batch: not this one's write.
            _ => self.apply_logged(batch),
        }
    }
}

impl Drop for RocksDbStore {
    fn drop(&mut self) {
        // Flushing the memtable makes the next open cheap: RocksDB need not replay its own log.
        let _ = self.db.flush();
        let _ = self.db.flush_wal(true);
        let _ = self.tighten_files();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::OffsetStoreExt;
    use crate::{OffsetKey, Partition};

    /// One store directory is open once: a second open, however the path is spelled, is refused as
    /// locked; a directory a crash left with only RocksDB's first files opens as a new store.
    #[test]
    fn a_directory_is_open_once_and_a_half_made_one_opens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let first = RocksDbStore::open(&path).unwrap();
        let spelled = format!("{}/./", path.display());
        match RocksDbStore::open(&spelled) {
            Err(Error::Locked { .. }) => {}
            Err(e) => panic!("expected Locked, got {e}"),
            Ok(_) => panic!("opened twice"),
        }
        drop(first);
        RocksDbStore::open(&spelled).expect("open again once closed");

        let half = dir.path().join("half");
        std::fs::create_dir(&half).unwrap();
        std::fs::write(half.join("LOCK"), b"").unwrap();
        std::fs::write(half.join("LOG"), b"started\n").unwrap();
        RocksDbStore::open(&half).expect("a store a crash stopped while it was made");
        let other = dir.path().join("other");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join("LOG"), b"").unwrap();
        std::fs::write(other.join("notes.txt"), b"mine").unwrap();
        assert!(RocksDbStore::open(&other).is_err(), "someone else's files");
    }

    /// An offset stored before write times were kept (no time in its header) still reads, and has
    /// no time; one written now has one.
    #[test]
    fn values_without_a_write_time_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = RocksDbStore::open(dir.path()).unwrap();
        let old = OffsetKey::new("c", Partition::new().with("file", "old"));
        let mut value = Vec::new();
        value.extend_from_slice(&[0; 4]);
        json::encode_key(&old, &mut value);
        let key_len = (value.len() - 4) as u32;
        value[..4].copy_from_slice(&key_len.to_le_bytes());
        value.extend_from_slice(br#"{"position":7}"#);
        store.db.put(offset_key(old.id()), &value).unwrap();
        let new = OffsetKey::new("c", Partition::new().with("file", "new"));
        store
            .set(new.clone(), Offset::new().with("position", 8))
            .unwrap();

        assert_eq!(
            store.get(&old).unwrap(),
            Some(Offset::new().with("position", 7))
        );
        let listed: Vec<_> = store
            .partitions("c")
            .unwrap()
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(listed, vec![new.clone(), old.clone()]);
        let times = store.change_times(&[old, new]).unwrap();
        assert_eq!(times[0], None);
        let now = crate::time::now_ms();
        assert!(
            times[1].is_some_and(|t| t <= now && t + 60_000 > now),
            "{times:?}"
        );
    }

    #[test]
    fn a_header_longer_than_its_value_is_refused() {
        assert!(Header::parse(&[1, 0, 0]).is_none());
        assert!(Header::parse(&[9, 0, 0, 0, b'x']).is_none());
        assert!(Header::parse(&(3 | TIMED).to_le_bytes()).is_none());
        let h = Header::parse(&[1, 0, 0, 0, b'x', b'{', b'}']).unwrap();
        assert_eq!((h.written, h.key), (None, 4..5));
    }
}
