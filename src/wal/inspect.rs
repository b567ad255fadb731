//! Reading a log directory without opening it for writing (`connect-offsets wal inspect`), and
//! repairing it (`connect-offsets wal repair`).
//!
//! [`scan`] reads every segment and snapshot and reports each frame with its file, byte offset,
//! length, kind, checksum state, writer, seq and entry count. It classifies bytes with the reader
//! recovery uses ([`super::reader`]): a **torn tail** is what recovery cuts by itself; anything else
//! that fails its checks is **corrupt**, which recovery refuses unless its policy is `Skip`. A corrupt
//! region runs to the next position where an intact frame starts, as recovery's skip does.
//!
//! [`repair`] takes the directory's lock (so no commit buffer is using it), cuts a torn tail, and,
//! only when given a dead-letter file, copies each corrupt region there and removes it from its
//! segment (a corrupt snapshot file is removed whole). Without one it refuses, naming the first
//! corrupt file and offset.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::frame::FrameKind;
use super::reader::{self, Item, SegmentReader};
use super::{parse_gen, segment_name, snapshot_name};
use crate::dead_letter::{DeadLetter, DeadLetterFile};
use crate::fs::{RealFs, WalFs};
use crate::model::Batch;
use crate::{Error, Result};

/// Which kind of log file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFileKind {
    /// `{generation}.wal`: frames of batches.
    Segment,
    /// `{generation}.snap`: one snapshot frame.
    Snapshot,
}

/// The state of one frame (or of a region of bytes that is not one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameStatus {
    /// Intact: magic, checksum and payload all good.
    Ok,
    /// An incomplete frame at the end of the log: recovery cuts it.
    Torn(String),
    /// Bytes that fail their checks before the end of the log.
    Corrupt(String),
}

/// One frame, or one region of bad bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameInfo {
    /// The file it is in.
    pub file: PathBuf,
    /// Byte offset within the file.
    pub offset: u64,
    /// Bytes (the whole region for bad bytes).
    pub len: u64,
    /// Batch or snapshot, when the frame decoded.
    pub kind: Option<FrameKind>,
    /// Intact, torn or corrupt.
    pub status: FrameStatus,
    /// `Some(true)` when the checksum matched, `Some(false)` when it did not, `None` when it could
    /// not be checked (bad magic, incomplete frame).
    pub crc_ok: Option<bool>,
    /// The batch's writer.
    pub writer: Option<String>,
    /// The batch's seq.
    pub seq: Option<u64>,
    /// Entries in the batch.
    pub entries: Option<usize>,
    /// Connectors (namespaces) the batch touches, sorted, each with its entries in the batch.
    pub connectors: Vec<(String, usize)>,
}

/// One file of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFile {
    /// Its path.
    pub path: PathBuf,
    /// Segment or snapshot.
    pub kind: LogFileKind,
    /// Its generation (from the name).
    pub generation: u64,
    /// Its size.
    pub bytes: u64,
    /// Its frames in order.
    pub frames: Vec<FrameInfo>,
}

/// Everything [`scan`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogScan {
    /// The directory.
    pub dir: PathBuf,
    /// Snapshots and segments in generation order (a snapshot before the segment of the same
    /// generation's successors).
    pub files: Vec<LogFile>,
}

impl LogScan {
    /// Every frame of every file, in order.
    pub fn frames(&self) -> impl Iterator<Item = &FrameInfo> {
        self.files.iter().flat_map(|f| &f.frames)
    }

    /// Frames that are intact.
    pub fn intact(&self) -> usize {
        self.frames()
            .filter(|f| f.status == FrameStatus::Ok)
            .count()
    }

    /// The torn tail, if any.
    pub fn torn(&self) -> Option<&FrameInfo> {
        self.frames()
            .find(|f| matches!(f.status, FrameStatus::Torn(_)))
    }

    /// Corrupt regions.
    pub fn corrupt(&self) -> Vec<&FrameInfo> {
        self.frames()
            .filter(|f| matches!(f.status, FrameStatus::Corrupt(_)))
            .collect()
    }

    /// Fails on the first corrupt region, if any, naming it and how many there are (`what`: what
    /// cannot be told because of them). Recovery refuses such a log: what the intact frames say
    /// about it is not the whole story.
    pub fn refuse_corrupt(&self, what: &str) -> Result<()> {
        let corrupt = self.corrupt();
        let Some(first) = corrupt.first() else {
            return Ok(());
        };
        let FrameStatus::Corrupt(reason) = &first.status else {
            unreachable!("corrupt() returns corrupt frames")
        };
        Err(Error::Corrupted {
            file: first.file.clone(),
            offset: first.offset,
            reason: format!(
                "{reason} ({} corrupt region(s) in the log {}: {what}; a writer refuses to open it \
                 until `connect-offsets wal repair` deals with them)",
                corrupt.len(),
                self.dir.display()
            ),
        })
    }

    /// Batches missing from the log's chain, as `(writer, first, last)`: read as recovery reads
    /// (the newest intact snapshot, then the segments after it), each batch must follow the one
    /// before. A writer refuses to open the log over such a gap unless its store holds the missing
    /// batches already; only repair's quarantine or a hand leaves one.
    pub fn gaps(&self) -> Vec<(String, u64, u64)> {
        let intact = |f: &&LogFile| f.frames.iter().all(|fr| fr.status == FrameStatus::Ok);
        let snapshot = self
            .files
            .iter()
            .rev()
            .find(|f| f.kind == LogFileKind::Snapshot && intact(f));
        let mut last: BTreeMap<&str, u64> = BTreeMap::new();
        if let Some(snap) = snapshot {
            for fr in &snap.frames {
                if let (Some(w), Some(s)) = (&fr.writer, fr.seq) {
                    last.insert(w, s);
                }
            }
        }
        let after = snapshot.map(|f| f.generation);
        let mut gaps = Vec::new();
        for file in self
            .files
            .iter()
            .filter(|f| f.kind == LogFileKind::Segment && after.is_none_or(|g| f.generation > g))
        {
            for fr in &file.frames {
                if let (Some(w), Some(s), Some(FrameKind::Batch)) = (&fr.writer, fr.seq, fr.kind) {
                    let prev = last.entry(w).or_insert(s);
                    if s > *prev + 1 {
                        gaps.push((w.clone(), *prev + 1, s - 1));
                    }
                    *prev = (*prev).max(s);
                }
            }
        }
        gaps
    }

    /// Per writer, the seqs of intact batch frames as ranges `(first, last)` with no gap.
    pub fn seq_ranges(&self) -> Vec<(String, Vec<(u64, u64)>)> {
        let mut by_writer: BTreeMap<String, BTreeSet<u64>> = Default::default();
        for f in self.frames() {
            if let (Some(w), Some(s), Some(FrameKind::Batch)) = (&f.writer, f.seq, f.kind) {
                by_writer.entry(w.clone()).or_default().insert(s);
            }
        }
        by_writer
            .into_iter()
            .map(|(w, seqs)| {
                let mut ranges: Vec<(u64, u64)> = Vec::new();
                for s in seqs {
                    match ranges.last_mut() {
                        Some((_, last)) if *last + 1 == s => *last = s,
                        _ => ranges.push((s, s)),
                    }
                }
                (w, ranges)
            })
            .collect()
    }
}

fn decoded(file: &Path, offset: usize, kind: FrameKind, len: usize, batch: &Batch) -> FrameInfo {
    let mut connectors: BTreeMap<&str, usize> = BTreeMap::new();
    for k in batch.entries.keys() {
        *connectors.entry(k.namespace()).or_default() += 1;
    }
    FrameInfo {
        file: file.to_path_buf(),
        offset: offset as u64,
        len: len as u64,
        kind: Some(kind),
        status: FrameStatus::Ok,
        crc_ok: Some(true),
        writer: Some(batch.writer.clone()),
        seq: Some(batch.seq),
        entries: Some(batch.entries.len()),
        connectors: connectors
            .into_iter()
            .map(|(c, n)| (c.to_string(), n))
            .collect(),
    }
}

fn bad(file: &Path, region: reader::Region, status: fn(String) -> FrameStatus) -> FrameInfo {
    FrameInfo {
        file: file.to_path_buf(),
        offset: region.offset as u64,
        len: region.len as u64,
        kind: None,
        status: status(region.reason),
        crc_ok: region.crc_ok,
        writer: None,
        seq: None,
        entries: None,
        connectors: Vec::new(),
    }
}

/// The frames of one segment's bytes. `is_last` says whether it is the newest segment
/// (only there can a tail be torn).
pub fn scan_segment(path: &Path, bytes: &[u8], is_last: bool) -> Vec<FrameInfo> {
    SegmentReader::new(bytes, is_last, |_, _| false)
        .map(|item| match item {
            Item::Frame(f) => {
                let batch = f.batch.as_ref().expect("nothing is passed over unread");
                decoded(path, f.offset, FrameKind::Batch, f.len, batch)
            }
            Item::Torn(r) => bad(path, r, FrameStatus::Torn),
            Item::Corrupt(r) => bad(path, r, FrameStatus::Corrupt),
        })
        .collect()
}

/// Reads the log directory `dir` without locking or changing it. (A writer appending meanwhile
/// may show as a torn tail.)
pub fn scan(dir: &Path) -> Result<LogScan> {
    scan_with(&RealFs, dir)
}

/// [`scan`] through the file system `fs`.
pub fn scan_with(fs: &dyn WalFs, dir: &Path) -> Result<LogScan> {
    let names = fs
        .list(dir)
        .map_err(|e| Error::io("list log directory", dir, e))?;
    let mut files: Vec<(u64, LogFileKind)> = Vec::new();
    for name in &names {
        if let Some(g) = parse_gen(name, ".wal") {
            files.push((g, LogFileKind::Segment));
        } else if let Some(g) = parse_gen(name, ".snap") {
            files.push((g, LogFileKind::Snapshot));
        }
    }
    // A snapshot of generation g covers segments up to g: list it after them.
    files.sort_by_key(|(g, k)| (*g, matches!(k, LogFileKind::Snapshot)));
    let mut contents = Vec::with_capacity(files.len());
    for (g, kind) in files {
        let path = dir.join(match kind {
            LogFileKind::Segment => segment_name(g),
            LogFileKind::Snapshot => snapshot_name(g),
        });
        let bytes = fs
            .read(&path)
            .map_err(|e| Error::io("read log file", &path, e))?;
        contents.push((g, kind, path, bytes));
    }
    // Only the newest segment, empty or not, can end in a torn write (see `WalDir::open`).
    let newest = contents
        .iter()
        .rposition(|(_, k, _, _)| *k == LogFileKind::Segment);
    let mut out = LogScan {
        dir: dir.to_path_buf(),
        files: Vec::new(),
    };
    for (i, (generation, kind, path, bytes)) in contents.into_iter().enumerate() {
        let frames = match kind {
            LogFileKind::Segment => scan_segment(&path, &bytes, Some(i) == newest),
            LogFileKind::Snapshot => match reader::read_snapshot(&bytes) {
                Ok(f) => vec![decoded(&path, 0, f.kind, f.len, &f.batch)],
                Err(r) => vec![bad(&path, r, FrameStatus::Corrupt)],
            },
        };
        out.files.push(LogFile {
            path,
            kind,
            generation,
            bytes: bytes.len() as u64,
            frames,
        });
    }
    Ok(out)
}

/// What [`repair`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// Torn tails cut: file, the length it was cut to, bytes removed.
    pub cut: Vec<(PathBuf, u64, u64)>,
    /// Corrupt regions moved to the dead-letter file: file, offset, length.
    pub quarantined: Vec<(PathBuf, u64, u64)>,
    /// Corrupt snapshot files removed.
    pub removed_files: Vec<PathBuf>,
}

impl RepairReport {
    /// True when nothing needed doing.
    pub fn is_empty(&self) -> bool {
        self.cut.is_empty() && self.quarantined.is_empty() && self.removed_files.is_empty()
    }
}

/// Refuses a dead-letter file that is one of the log's own files: the repair replaces or removes
/// those, and the bytes quarantined into it would go with it.
fn refuse_log_file(dir: &Path, dead_letter: &Path) -> Result<()> {
    let name = dead_letter
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("");
    let parent = match dead_letter.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let same_dir = match (parent.canonicalize(), dir.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if same_dir && super::is_log_file(name) {
        return Err(Error::Settings(format!(
            "the dead-letter file {} is one of the log's own files: the repair replaces or removes \
             it, and the quarantined bytes would be lost; name a file of another name",
            dead_letter.display()
        )));
    }
    Ok(())
}

/// Repairs the log in `dir` (see the module docs). Fails with [`Error::Locked`] when a commit
/// buffer holds the directory, and with [`Error::Corrupted`] naming the first corrupt region when
/// there is one and no `quarantine` file was given (nothing is changed then, not even a torn tail).
pub fn repair(dir: &Path, quarantine: Option<&DeadLetterFile>) -> Result<RepairReport> {
    repair_with(&RealFs, dir, quarantine)
}

/// [`repair`] through the file system `fs` (every write, sync and rename goes through it).
pub fn repair_with(
    fs: &dyn WalFs,
    dir: &Path,
    quarantine: Option<&DeadLetterFile>,
) -> Result<RepairReport> {
    if let Err(e) = fs.list(dir) {
        return Err(Error::io(
            "open log directory",
            dir,
            match e.kind() {
                std::io::ErrorKind::NotFound => {
                    std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory")
                }
                _ => e,
            },
        ));
    }
    if let Some(dl) = quarantine {
        refuse_log_file(dir, dl.path())?;
    }
    let _lock = fs.lock(dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::WouldBlock => Error::Locked {
            path: dir.to_path_buf(),
            reason: e.to_string(),
        },
        _ => Error::io("lock log directory", dir, e),
    })?;
    let scan = scan_with(fs, dir)?;
    let corrupt = scan.corrupt();
    if let (Some(first), None) = (corrupt.first(), quarantine) {
        let FrameStatus::Corrupt(reason) = &first.status else {
            unreachable!("corrupt() returns corrupt frames")
        };
        return Err(Error::Corrupted {
            file: first.file.clone(),
            offset: first.offset,
            reason: format!(
                "{reason} ({} corrupt region(s) in the log; rerun with --quarantine to move them to the dead-letter file)",
                corrupt.len()
            ),
        });
    }
    let mut report = RepairReport::default();
    for file in &scan.files {
        let bad_frames: Vec<&FrameInfo> = file
            .frames
            .iter()
            .filter(|f| f.status != FrameStatus::Ok)
            .collect();
        if bad_frames.is_empty() {
            continue;
        }
        let bytes = fs
            .read(&file.path)
            .map_err(|e| Error::io("read log file", &file.path, e))?;
        for f in &bad_frames {
            if let (FrameStatus::Corrupt(reason), Some(dl)) = (&f.status, quarantine) {
                let region = &bytes[f.offset as usize..(f.offset + f.len) as usize];
                dl.write(&DeadLetter {
                    source: "wal",
                    location: vec![
                        ("file", f.file.display().to_string()),
                        ("offset", f.offset.to_string()),
                    ],
                    reason: format!("removed by wal repair --quarantine: {reason}"),
                    blobs: vec![("bytes", Some(region))],
                })?;
                report.quarantined.push((f.file.clone(), f.offset, f.len));
            }
        }
        if file.kind == LogFileKind::Snapshot {
            fs.remove(&file.path)
                .map_err(|e| Error::io("remove corrupt snapshot", &file.path, e))?;
            report.removed_files.push(file.path.clone());
            continue;
        }
        let only_torn_tail =
            bad_frames.len() == 1 && matches!(bad_frames[0].status, FrameStatus::Torn(_));
        if only_torn_tail {
            let at = bad_frames[0].offset;
            let mut f = fs
                .open_append(&file.path)
                .map_err(|e| Error::io("open segment", &file.path, e))?;
            f.truncate(at)
                .map_err(|e| Error::io("truncate segment", &file.path, e))?;
            f.sync()
                .map_err(|e| Error::io("sync segment", &file.path, e))?;
            report
                .cut
                .push((file.path.clone(), at, bytes.len() as u64 - at));
            continue;
        }
        // Rewrite the segment with its intact frames only: temp file, sync, rename, sync dir.
        let mut kept = Vec::with_capacity(bytes.len());
        for f in &file.frames {
            match &f.status {
                FrameStatus::Ok => {
                    kept.extend_from_slice(&bytes[f.offset as usize..(f.offset + f.len) as usize])
                }
                FrameStatus::Torn(_) => {
                    report
                        .cut
                        .push((file.path.clone(), kept.len() as u64, f.len))
                }
                FrameStatus::Corrupt(_) => {}
            }
        }
        let tmp = file.path.with_extension("wal.repair.tmp");
        {
            let mut out = fs
                .open_append(&tmp)
                .map_err(|e| Error::io("create", &tmp, e))?;
            out.truncate(0)
                .and_then(|_| out.append(&kept))
                .and_then(|_| out.sync())
                .map_err(|e| Error::io("write", &tmp, e))?;
        }
        fs.rename(&tmp, &file.path)
            .map_err(|e| Error::io("rename repaired segment", &tmp, e))?;
    }
    if !report.is_empty() {
        fs.sync_dir(dir)
            .map_err(|e| Error::io("sync log directory", dir, e))?;
        tracing::warn!(dir = %dir.display(), cut = report.cut.len(), quarantined = report.quarantined.len(),
            removed = report.removed_files.len(), "repaired the write-ahead log");
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::frame;
    use crate::{Offset, OffsetKey, Partition};

    fn batch(seq: u64) -> Vec<u8> {
        let mut out = Vec::new();
        let b = Batch::new(
            "w",
            seq,
            [(
                OffsetKey::new("c", Partition::new().with("p", seq as i64)),
                Some(Offset::new().with("pos", 1)),
            )],
        );
        frame::encode(FrameKind::Batch, &b, &mut out);
        out
    }

    #[test]
    fn classifies_like_recovery() {
        let p = Path::new("x.wal");
        let mut bytes = batch(1);
        let second = bytes.len();
        bytes.extend(batch(2));
        bytes[second + 20] ^= 0xff; // corrupt the second frame's payload
        let third = bytes.len();
        bytes.extend(batch(3));
        let tail = batch(4);
        bytes.extend(&tail[..tail.len() - 3]);
        let frames = scan_segment(p, &bytes, true);
        assert_eq!(frames.len(), 4, "{frames:?}");
        assert_eq!(frames[0].seq, Some(1));
        assert!(matches!(frames[1].status, FrameStatus::Corrupt(_)));
        assert_eq!(frames[1].crc_ok, Some(false));
        assert_eq!(frames[1].len as usize, third - second);
        assert_eq!(frames[2].seq, Some(3));
        assert!(matches!(frames[3].status, FrameStatus::Torn(_)));
        // Not the last segment: the incomplete frame is corruption.
        let frames = scan_segment(p, &bytes, false);
        assert!(matches!(frames[3].status, FrameStatus::Corrupt(_)));
    }
}
