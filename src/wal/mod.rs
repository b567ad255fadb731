//! The write-ahead log: segment files of framed batches in a directory owned by one process.
//!
//! Files in the directory:
//! * `LOCK`: held (advisory lock) by the one process using the log;
//! * `{generation:020}.wal`: segments of [frames](frame), written in generation order;
//! * `{generation:020}.snap`: a snapshot of the whole store as of the end of segment `generation` (only for stores
//!   that do not outlive the process, such as memory); segments up to `generation` are then obsolete;
//! * `{generation:020}.snap.tmp`: a snapshot being written, and `{generation:020}.wal.repair.tmp`: a
//!   segment being rewritten by `wal repair`; both removed at open. Other files are left alone.
//!
//! Recovery reads the newest intact snapshot and every later segment in order, through the one
//! [`reader::SegmentReader`]. What a crash left of a write at the very end of the log is a torn tail:
//! it is cut off (and logged). Anything else that fails its checks is [`Error::Corrupted`] with the
//! file and byte offset, unless the [`RecoveryPolicy`] is `Skip`, in which case the bad bytes are
//! first copied to the dead-letter file.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub mod frame;
pub mod inspect;
pub mod reader;

use crate::crash::{CrashHook, CrashPoint};
use crate::dead_letter::{DeadLetter, DeadLetterFile};
use crate::fs::{WalFile, WalFs};
use crate::model::Batch;
use crate::{Error, Result};
use frame::FrameKind;
use reader::{Item, SegmentReader};

/// What recovery does with bytes that fail their checks before the end of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryPolicy {
    /// Refuse to open: [`Error::Corrupted`] names the file and offset. The default.
    #[default]
    Fail,
    /// Copy the bad bytes to the dead-letter file, log it, and go on with the next intact frame.
    Skip,
}

/// A segment that is no longer written to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClosedSegment {
    /// Its generation (file name).
    pub generation: u64,
    /// The highest batch seq it holds (0 if none).
    pub last_seq: u64,
    /// Its size.
    pub bytes: u64,
}

/// What recovery found in the directory.
#[derive(Debug, Default)]
pub struct Recovered {
    /// The newest intact snapshot.
    pub snapshot: Option<Batch>,
    /// Every intact batch after it, in log order.
    pub batches: Vec<Batch>,
    /// Torn tails cut off: file and the length it was cut to.
    pub cut: Vec<(PathBuf, u64)>,
    /// Corrupt regions skipped (policy `Skip`): file, offset, length.
    pub skipped: Vec<(PathBuf, u64, u64)>,
    /// The highest seq found in the log, decoded or not.
    pub last_seq: u64,
    /// Batches checked but not decoded because the store already held them.
    pub skipped_applied: u64,
}

/// The directory side of the log, shared by the writer and the thread that releases segments.
#[derive(Debug)]
pub struct WalDir {
    fs: Arc<dyn WalFs>,
    dir: PathBuf,
    hook: Option<Arc<dyn CrashHook>>,
    /// Held until [`unlock`](WalDir::unlock): another opener is refused while it is.
    lock: Mutex<Option<Box<dyn std::any::Any + Send + Sync>>>,
    state: Mutex<DirState>,
}

#[derive(Debug, Default)]
struct DirState {
    closed: Vec<ClosedSegment>,
    snapshot: Option<(u64, u64)>,
    max_gen: u64,
    /// The active segment as its writer left it at a clean stop ([`WalWriter::stop`]): nothing
    /// appends to it any more, so [`WalDir::close_stopped`] may count it as closed.
    stopped: Option<ClosedSegment>,
}

fn segment_name(generation: u64) -> String {
    format!("{generation:020}.wal")
}

fn snapshot_name(generation: u64) -> String {
    format!("{generation:020}.snap")
}

/// Whether `name` is a file the log itself writes, replaces or removes: its lock, segments,
/// snapshots and their temporary files.
pub(crate) fn is_log_file(name: &str) -> bool {
    name == "LOCK"
        || parse_gen(name, ".wal").is_some()
        || parse_gen(name, ".snap").is_some()
        || is_own_temp(name)
}

/// Whether `name` is a temporary file of the log's own (an unfinished snapshot or repair).
fn is_own_temp(name: &str) -> bool {
    [".snap.tmp", ".wal.repair.tmp"]
        .iter()
        .any(|suffix| parse_gen(name, suffix).is_some())
}

fn parse_gen(name: &str, suffix: &str) -> Option<u64> {
    let stem = name.strip_suffix(suffix)?;
    (stem.len() == 20 && stem.bytes().all(|c| c.is_ascii_digit()))
        .then(|| stem.parse().ok())
        .flatten()
}

impl WalDir {
    fn io(&self, op: &'static str, path: &Path, e: std::io::Error) -> Error {
        Error::io(op, path, e)
    }

    fn hook(&self, point: CrashPoint) -> Result<()> {
        match &self.hook {
            Some(h) => h.at(point),
            None => Ok(()),
        }
    }

    /// The log directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Lets another opener in. Call it only once nothing writes to the directory any more: a
    /// handle kept alive past its writer (a commit ticket) must not keep a reopen out.
    pub fn unlock(&self) {
        self.lock.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// Locks `dir` (creating it) and reads everything in it.
    pub fn open(
        fs: Arc<dyn WalFs>,
        dir: &Path,
        hook: Option<Arc<dyn CrashHook>>,
        policy: RecoveryPolicy,
        dead_letter: Option<&DeadLetterFile>,
    ) -> Result<(Arc<WalDir>, Recovered)> {
        Self::open_skipping(fs, dir, hook, policy, dead_letter, None)
    }

    /// Like [`open`](Self::open), but batches of `skip.0` with a seq at or below `skip.1` (the store
    /// holds them) are checked (framing and checksum) without decoding their entries, and left out of
    /// [`Recovered::batches`]; [`Recovered::last_seq`] still counts them.
    pub fn open_skipping(
        fs: Arc<dyn WalFs>,
        dir: &Path,
        hook: Option<Arc<dyn CrashHook>>,
        policy: RecoveryPolicy,
        dead_letter: Option<&DeadLetterFile>,
        skip: Option<(&str, u64)>,
    ) -> Result<(Arc<WalDir>, Recovered)> {
        fs.create_dir_all(dir)
            .map_err(|e| Error::io("create log directory", dir, e))?;
        let lock = fs.lock(dir).map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock => Error::Locked {
                path: dir.to_path_buf(),
                reason: e.to_string(),
            },
            _ => Error::io("lock log directory", dir, e),
        })?;
        let wal = WalDir {
            fs,
            dir: dir.to_path_buf(),
            hook,
            lock: Mutex::new(Some(lock)),
            state: Mutex::new(DirState::default()),
        };
        let recovered = wal.recover(policy, dead_letter, skip)?;
        Ok((Arc::new(wal), recovered))
    }

    fn recover(
        &self,
        policy: RecoveryPolicy,
        dead_letter: Option<&DeadLetterFile>,
        skip: Option<(&str, u64)>,
    ) -> Result<Recovered> {
        let skippable =
            |writer: &str, seq: u64| skip.is_some_and(|(w, through)| w == writer && seq <= through);
        let names = self
            .fs
            .list(&self.dir)
            .map_err(|e| self.io("list log directory", &self.dir, e))?;
        let mut segments = Vec::new();
        let mut snapshots = Vec::new();
        for name in &names {
            if is_own_temp(name) {
                let p = self.dir.join(name);
                self.fs
                    .remove(&p)
                    .map_err(|e| self.io("remove unfinished temporary file", &p, e))?;
            } else if let Some(g) = parse_gen(name, ".wal") {
                segments.push(g);
            } else if let Some(g) = parse_gen(name, ".snap") {
                snapshots.push(g);
            }
        }
        segments.sort_unstable();
        snapshots.sort_unstable();
        let mut out = Recovered::default();
        let mut st = self.state.lock().expect("wal state");
        st.max_gen = segments
            .iter()
            .chain(&snapshots)
            .copied()
            .max()
            .unwrap_or(0);

        // The newest intact snapshot.
        let mut snap_gen = None;
        for &g in snapshots.iter().rev() {
            let path = self.dir.join(snapshot_name(g));
            let bytes = self
                .fs
                .read(&path)
                .map_err(|e| self.io("read snapshot", &path, e))?;
            if let Ok((FrameKind::Snapshot, writer, seq, len)) = frame::decode_seq(&bytes)
                && len == bytes.len()
                && skippable(&writer, seq)
            {
                st.snapshot = Some((g, bytes.len() as u64));
                out.last_seq = out.last_seq.max(seq);
                snap_gen = Some(g);
                break;
            }
            match reader::read_snapshot(&bytes) {
                Ok(f) => {
                    st.snapshot = Some((g, bytes.len() as u64));
                    out.last_seq = out.last_seq.max(f.batch.seq);
                    out.snapshot = Some(f.batch);
                    snap_gen = Some(g);
                    break;
                }
                Err(bad) => {
                    if policy == RecoveryPolicy::Fail {
                        return Err(Error::Corrupted {
                            file: path,
                            offset: 0,
                            reason: refusal(&bad.reason, dead_letter),
                        });
                    }
                    self.quarantine(dead_letter, &path, 0, &bytes, &bad.reason)?;
                    out.skipped.push((path, 0, bytes.len() as u64));
                }
            }
        }
        if let Some(s) = snap_gen {
            self.remove_superseded(&segments, &snapshots, s)?;
        }
        let live: Vec<u64> = segments
            .into_iter()
            .filter(|g| snap_gen.is_none_or(|s| *g > s))
            .collect();
        let mut contents = Vec::with_capacity(live.len());
        for &g in &live {
            let path = self.dir.join(segment_name(g));
            contents.push((
                g,
                path.clone(),
                self.fs
                    .read(&path)
                    .map_err(|e| self.io("read segment", &path, e))?,
            ));
        }
        // Only the newest segment can end in a torn write, even when it is empty: a segment is
        // created (at open, after this cut, or on rotation, after a synced append) only once every
        // older one is whole.
        let newest = contents.len().checked_sub(1);
        for (i, (g, path, bytes)) in contents.iter().enumerate() {
            let is_last = Some(i) == newest;
            let mut end = 0usize;
            let mut last_seq = 0;
            for item in SegmentReader::new(bytes, is_last, skippable) {
                match item {
                    Item::Frame(f) => {
                        last_seq = f.seq;
                        out.last_seq = out.last_seq.max(f.seq);
                        match f.batch {
                            Some(batch) => out.batches.push(batch),
                            None => out.skipped_applied += 1,
                        }
                        end = f.offset + f.len;
                    }
                    Item::Torn(t) => {
                        tracing::warn!(file = %path.display(), offset = t.offset, len = t.len, reason = %t.reason,
                            "cutting an incomplete frame at the end of the log (a write torn by a crash)");
                        let mut f = self
                            .fs
                            .open_append(path)
                            .map_err(|e| self.io("open segment", path, e))?;
                        f.truncate(t.offset as u64)
                            .map_err(|e| self.io("truncate segment", path, e))?;
                        f.sync().map_err(|e| self.io("sync segment", path, e))?;
                        out.cut.push((path.clone(), t.offset as u64));
                        end = t.offset;
                    }
                    Item::Corrupt(bad) => {
                        if policy == RecoveryPolicy::Fail {
                            return Err(Error::Corrupted {
                                file: path.clone(),
                                offset: bad.offset as u64,
                                reason: refusal(&bad.reason, dead_letter),
                            });
                        }
                        tracing::error!(file = %path.display(), offset = bad.offset, len = bad.len, reason = %bad.reason,
                            "skipping corrupt log bytes (recovery policy skip); they are in the dead-letter file");
                        let region = &bytes[bad.offset..bad.offset + bad.len];
                        self.quarantine(dead_letter, path, bad.offset as u64, region, &bad.reason)?;
                        out.skipped
                            .push((path.clone(), bad.offset as u64, bad.len as u64));
                        end = bad.offset + bad.len;
                    }
                }
            }
            st.closed.push(ClosedSegment {
                generation: *g,
                last_seq,
                bytes: end as u64,
            });
        }
        Ok(out)
    }

    /// Removes what the snapshot of `snap_gen` supersedes: a compaction that a crash stopped
    /// after its snapshot was durable leaves them (recovery would never read them again).
    fn remove_superseded(&self, segments: &[u64], snapshots: &[u64], snap_gen: u64) -> Result<()> {
        let old_segments = segments.iter().filter(|g| **g <= snap_gen);
        let old_snapshots = snapshots.iter().filter(|g| **g < snap_gen);
        let doomed: Vec<PathBuf> = old_segments
            .map(|g| self.dir.join(segment_name(*g)))
            .chain(old_snapshots.map(|g| self.dir.join(snapshot_name(*g))))
            .collect();
        for p in &doomed {
            tracing::info!(file = %p.display(), snapshot = snap_gen, "removing a log file a snapshot supersedes (left by an interrupted compaction)");
            self.fs
                .remove(p)
                .map_err(|e| self.io("remove superseded log file", p, e))?;
        }
        Ok(())
    }

    fn quarantine(
        &self,
        dl: Option<&DeadLetterFile>,
        path: &Path,
        offset: u64,
        bytes: &[u8],
        reason: &str,
    ) -> Result<()> {
        let dl = dl.ok_or_else(|| {
            Error::Settings(format!(
                "recovery policy skip needs a dead-letter file to keep the corrupt bytes of {} at {offset}",
                path.display()
            ))
        })?;
        dl.write(&DeadLetter {
            source: "wal",
            location: vec![
                ("file", path.display().to_string()),
                ("offset", offset.to_string()),
            ],
            reason: reason.to_string(),
            blobs: vec![("bytes", Some(bytes))],
        })
    }

    /// Starts a new, empty segment after every existing file and makes it durable in the directory.
    pub fn new_segment(self: &Arc<Self>) -> Result<WalWriter> {
        let generation = {
            let mut st = self.state.lock().expect("wal state");
            st.max_gen += 1;
            st.max_gen
        };
        let path = self.dir.join(segment_name(generation));
        let file = self
            .fs
            .open_append(&path)
            .map_err(|e| self.io("create segment", &path, e))?;
        self.hook(CrashPoint::InsideRotation)?;
        if let Err(e) = self.fs.sync_dir(&self.dir) {
            // Take the unused file back, so that a rotation retried after every batch does not
            // leave an empty segment per try (one that comes back after a crash is harmless).
            let _ = self.fs.remove(&path);
            return Err(self.io("sync log directory", &self.dir, e));
        }
        Ok(WalWriter {
            dir: Arc::clone(self),
            file,
            generation,
            path,
            last_seq: 0,
        })
    }

    /// Counts the segment its writer left at a clean stop ([`WalWriter::stop`]) as closed, when it
    /// holds any batch, so that a snapshot can replace it. Returns it, `None` when there is none.
    pub fn close_stopped(&self) -> Option<ClosedSegment> {
        let mut st = self.state.lock().expect("wal state");
        let seg = st.stopped.take().filter(|s| s.bytes > 0)?;
        st.closed.push(seg.clone());
        Some(seg)
    }

    /// Segments that are closed and not yet released.
    pub fn closed(&self) -> Vec<ClosedSegment> {
        self.state.lock().expect("wal state").closed.clone()
    }

    /// Size of the newest snapshot, 0 when none.
    pub fn snapshot_bytes(&self) -> u64 {
        self.state
            .lock()
            .expect("wal state")
            .snapshot
            .map_or(0, |(_, b)| b)
    }

    /// Removes closed segments whose batches are all at or below `durable_seq` (the store holds them
    /// durably). Returns how many were removed.
    pub fn release(&self, durable_seq: u64) -> Result<usize> {
        let doomed: Vec<ClosedSegment> = {
            let st = self.state.lock().expect("wal state");
            st.closed
                .iter()
                .filter(|s| s.last_seq <= durable_seq)
                .cloned()
                .collect()
        };
        for seg in &doomed {
            self.hook(CrashPoint::InsideRelease)?;
            let path = self.dir.join(segment_name(seg.generation));
            self.fs
                .remove(&path)
                .map_err(|e| self.io("remove released segment", &path, e))?;
            self.state
                .lock()
                .expect("wal state")
                .closed
                .retain(|s| s.generation != seg.generation);
        }
        if !doomed.is_empty() {
            self.fs
                .sync_dir(&self.dir)
                .map_err(|e| self.io("sync log directory", &self.dir, e))?;
        }
        Ok(doomed.len())
    }

    /// Writes `snapshot` (the whole store as of the end of closed segment `through_gen`) and removes
    /// every older segment and snapshot.
    pub fn compact(&self, snapshot: &Batch, through_gen: u64) -> Result<()> {
        let mut bytes = Vec::new();
        frame::encode_snapshot(snapshot, &mut bytes)
            .map_err(|e| Error::InvalidData(format!("cannot compact the log: {e}")))?;
        let name = snapshot_name(through_gen);
        let tmp = self.dir.join(format!("{name}.tmp"));
        let path = self.dir.join(&name);
        {
            let mut f = self
                .fs
                .open_append(&tmp)
                .map_err(|e| self.io("create snapshot", &tmp, e))?;
            f.truncate(0)
                .map_err(|e| self.io("truncate snapshot", &tmp, e))?;
            f.append(&bytes)
                .map_err(|e| self.io("write snapshot", &tmp, e))?;
            self.hook(CrashPoint::InsideCompaction)?;
            f.sync().map_err(|e| self.io("sync snapshot", &tmp, e))?;
        }
        self.fs
            .rename(&tmp, &path)
            .map_err(|e| self.io("rename snapshot", &tmp, e))?;
        self.fs
            .sync_dir(&self.dir)
            .map_err(|e| self.io("sync log directory", &self.dir, e))?;
        let (old_snap, doomed) = {
            let mut st = self.state.lock().expect("wal state");
            let old = st.snapshot.replace((through_gen, bytes.len() as u64));
            let doomed: Vec<u64> = st
                .closed
                .iter()
                .filter(|s| s.generation <= through_gen)
                .map(|s| s.generation)
                .collect();
            (old, doomed)
        };
        if let Some((g, _)) = old_snap.filter(|(g, _)| *g != through_gen) {
            self.hook(CrashPoint::InsideCompaction)?;
            let p = self.dir.join(snapshot_name(g));
            self.fs
                .remove(&p)
                .map_err(|e| self.io("remove old snapshot", &p, e))?;
        }
        for g in doomed {
            self.hook(CrashPoint::InsideRelease)?;
            let p = self.dir.join(segment_name(g));
            self.fs
                .remove(&p)
                .map_err(|e| self.io("remove compacted segment", &p, e))?;
            self.state
                .lock()
                .expect("wal state")
                .closed
                .retain(|s| s.generation != g);
        }
        self.fs
            .sync_dir(&self.dir)
            .map_err(|e| self.io("sync log directory", &self.dir, e))
    }

    /// Bytes held by the log: closed segments and the snapshot (the writer adds its active segment).
    pub fn held_bytes(&self) -> u64 {
        let st = self.state.lock().expect("wal state");
        st.closed.iter().map(|s| s.bytes).sum::<u64>() + st.snapshot.map_or(0, |(_, b)| b)
    }
}

/// The segment being appended to (owned by the one thread that writes the log).
#[derive(Debug)]
pub struct WalWriter {
    dir: Arc<WalDir>,
    file: Box<dyn WalFile>,
    generation: u64,
    path: PathBuf,
    last_seq: u64,
}

/// How an append failed.
#[derive(Debug)]
pub enum AppendError {
    /// Nothing of the frame remains in the log: the batch may be retried.
    NotWritten(Error),
    /// The log's state is unknown (a failed sync, or a failed cleanup): no more writes until reopened.
    Poisoned(Error),
}

impl WalWriter {
    /// Appends `frames` (already encoded, one or more frames whose last batch is `last_seq`) with one
    /// write and one sync.
    pub fn append(&mut self, frames: &[u8], last_seq: u64) -> Result<(), AppendError> {
        let before = self.file.len();
        self.dir
            .hook(CrashPoint::BeforeWalWrite)
            .map_err(AppendError::Poisoned)?;
        if let Err(e) = self.file.append(frames) {
            let err = Error::io("write log segment", &self.path, e);
            // Take back whatever part of the frame reached the file so the log stays a clean prefix.
            return match self.file.truncate(before) {
                Ok(()) => Err(AppendError::NotWritten(err)),
                Err(_) => Err(AppendError::Poisoned(err)),
            };
        }
        self.dir
            .hook(CrashPoint::AfterWriteBeforeSync)
            .map_err(AppendError::Poisoned)?;
        // After a failed fsync the kernel may have dropped the dirty pages: the log's contents are
        // unknown, so the only safe course is to stop and let recovery read what is really there.
        self.file
            .sync()
            .map_err(|e| AppendError::Poisoned(Error::io("sync log segment", &self.path, e)))?;
        self.last_seq = last_seq;
        Ok(())
    }

    /// The active segment's size.
    pub fn len(&self) -> u64 {
        self.file.len()
    }

    /// True when the active segment is empty.
    pub fn is_empty(&self) -> bool {
        self.file.len() == 0
    }

    /// Ends the writing of the active segment (the writer of a log that stops cleanly): its
    /// directory may then count it as closed ([`WalDir::close_stopped`]), and no new segment is made.
    pub fn stop(self) {
        let stopped = ClosedSegment {
            generation: self.generation,
            last_seq: self.last_seq,
            bytes: self.file.len(),
        };
        self.dir.state.lock().expect("wal state").stopped = Some(stopped);
    }

    /// Closes the active segment and starts a new one. Returns the closed segment.
    pub fn rotate(&mut self) -> Result<ClosedSegment> {
        let next = self.dir.new_segment()?;
        let closed = ClosedSegment {
            generation: self.generation,
            last_seq: self.last_seq,
            bytes: self.file.len(),
        };
        self.dir
            .state
            .lock()
            .expect("wal state")
            .closed
            .push(closed.clone());
        *self = next;
        Ok(closed)
    }

    /// The shared directory side.
    pub fn dir(&self) -> &Arc<WalDir> {
        &self.dir
    }
}

/// Why recovery under policy `fail` refuses corrupt bytes, and where `skip` would keep them.
fn refusal(reason: &str, dead_letter: Option<&DeadLetterFile>) -> String {
    let kept = dead_letter.map_or("the dead-letter file (none is configured)".into(), |d| {
        format!("the dead-letter file {}", d.path().display())
    });
    format!(
        "{reason} (recovery policy fail; `connect-offsets wal inspect` shows the frames, and the \
         policy skip (`offsets.reset.policy=skip`) moves the bad bytes to {kept} and goes on, \
         losing the batches they held)"
    )
}
