//! The checks behind the fuzz targets in `fuzz/`, here so that ordinary `cargo test` replays every
//! committed seed and regression (`tests/core/fuzz_regressions.rs`) through the very function the fuzz
//! target calls. Not part of the public API.
//!
//! Every function panics when the property it checks is broken; that panic is the fuzzer's finding.
//!
//! Targets whose input is structured (`wal_recovery`, `connect_roundtrip`) take a case type. The fuzz
//! targets build cases from raw bytes with `arbitrary`; committed seeds and regressions are stored in
//! the canonical encoding of this module ([`WalCase::to_canonical`], [`RoundtripCase::to_canonical`]),
//! which starts with a tag and which the fuzz targets also accept, so this crate can read them without
//! depending on `arbitrary`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::buffer::CommitBufferConfig;
use crate::codec::json::{decode_key, decode_value, encode_key, encode_value};
use crate::fs::SimFs;
use crate::model::{FieldMap, OffsetKey, Value};
use crate::open;
use crate::scenario::{self, MemoryFactory, Op, ScenarioOptions};
use crate::store::OffsetStoreExt;
use crate::store::url::{StoreUrl, is_secret};
use crate::wal::frame::{
    self, FrameError, FrameKind, HEADER_LEN, MAGIC, MAX_PAYLOAD, V1_HEADER_LEN,
};
use crate::wal::{RecoveryPolicy, WalDir};
use crate::{Error, Offset};

// ---------------------------------------------------------------------------------------------------
// frame_decode

/// `frame_decode`: the frame decoder on arbitrary bytes, and again on the same bytes with the magic,
/// length and checksum made to fit (mutations rarely keep a CRC right, and the payload decoder behind
/// it is what most needs the fuzzing).
pub fn frame_decode(data: &[u8]) {
    check_frame_bytes(data);
    for from in [
        0,
        1,
        usize::from(data.first().copied().unwrap_or(0)),
        data.len(),
        data.len() + 1,
    ] {
        check_find_magic(data, from);
    }
    if data.len() >= HEADER_LEN {
        check_frame_bytes(&with_valid_checksum(data));
    }
}

/// `bytes` (at least a header long) with the magic set, the length cut to what is present and the
/// checksums recomputed: the decoder then gets as far as the payload. A version byte of 1 keeps the
/// version 1 layout (no header checksum); anything else becomes the current version.
pub fn with_valid_checksum(bytes: &[u8]) -> Vec<u8> {
    let mut b = bytes.to_vec();
    b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    let header_len = if b[4] == 1 {
        V1_HEADER_LEN
    } else {
        b[4] = frame::VERSION;
        HEADER_LEN
    };
    let claimed = u32::from_le_bytes(b[8..12].try_into().expect("4 bytes")) as usize;
    let len = claimed.min(b.len() - header_len);
    b[8..12].copy_from_slice(&(len as u32).to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&b[4..12]);
    crc.update(&b[header_len..header_len + len]);
    let sum = crc.finalize();
    b[12..16].copy_from_slice(&sum.to_le_bytes());
    if header_len == HEADER_LEN {
        let head = crc32fast::hash(&b[0..16]);
        b[16..20].copy_from_slice(&head.to_le_bytes());
    }
    b
}

/// The frame `bytes` as this build writes it: version 1 frames get the current header.
fn as_current_version(bytes: &[u8]) -> Vec<u8> {
    if bytes.get(4) != Some(&1) {
        return bytes.to_vec();
    }
    let mut b = bytes[..V1_HEADER_LEN].to_vec();
    b[4] = frame::VERSION;
    let payload = &bytes[V1_HEADER_LEN..];
    let mut crc = crc32fast::Hasher::new();
    crc.update(&b[4..12]);
    crc.update(payload);
    b[12..16].copy_from_slice(&crc.finalize().to_le_bytes());
    let head = crc32fast::hash(&b[0..16]);
    b.extend_from_slice(&head.to_le_bytes());
    b.extend_from_slice(payload);
    b
}

fn check_frame_bytes(bytes: &[u8]) {
    let decoded = frame::decode(bytes);
    // The header-and-seq decoder recovery uses to skip applied batches agrees with the full one.
    let seq = frame::decode_seq(bytes);
    match (&decoded, &seq) {
        (Ok(f), Ok(s)) => assert_eq!(
            (f.kind, &f.batch.writer[..], f.batch.seq, f.len),
            (s.0, &s.1[..], s.2, s.3),
            "decode_seq disagrees with decode"
        ),
        (Ok(f), Err(e)) => panic!("decode_seq refuses a frame decode accepts ({e}): {f:?}"),
        (Err(FrameError::Incomplete { .. }), Ok(s)) => {
            panic!("decode_seq accepts a frame decode calls incomplete: {s:?}")
        }
        (Err(FrameError::Incomplete { .. }), Err(e)) => assert!(
            matches!(e, FrameError::Incomplete { .. }),
            "decode says incomplete, decode_seq {e}"
        ),
        (Err(_), _) => {}
    }
    match decoded {
        Ok(f) => {
            assert!(
                f.len >= V1_HEADER_LEN && f.len <= bytes.len(),
                "frame length {} outside the {} bytes given",
                f.len,
                bytes.len()
            );
            let mut again = Vec::new();
            frame::encode(f.kind, &f.batch, &mut again);
            assert!(
                again == as_current_version(&bytes[..f.len]),
                "an accepted frame does not re-encode to its bytes:\n  read    {:?}\n  written {:?}\n  batch {:?}",
                &bytes[..f.len],
                again,
                f.batch
            );
            // What recovery relies on to call a frame cut short a torn write.
            assert!(
                matches!(
                    frame::decode(&bytes[..f.len - 1]),
                    Err(FrameError::Incomplete { .. })
                ),
                "a frame cut one byte short is not `Incomplete`"
            );
        }
        Err(FrameError::Incomplete { needed, available }) => {
            assert_eq!(
                available,
                bytes.len(),
                "`Incomplete` misstates the bytes present"
            );
            assert!(
                needed > available && needed <= HEADER_LEN + MAX_PAYLOAD,
                "`Incomplete` needs {needed} bytes with {available} present"
            );
        }
        Err(FrameError::Corrupt(reason)) => assert!(!reason.is_empty(), "empty corruption reason"),
    }
}

fn check_find_magic(bytes: &[u8], from: usize) {
    let m = MAGIC.to_le_bytes();
    let found = frame::find_magic(bytes, from);
    let want = (from..bytes.len().saturating_sub(3)).find(|&p| bytes[p..p + 4] == m);
    assert_eq!(found, want, "find_magic from {from}");
}

// ---------------------------------------------------------------------------------------------------
// wal_recovery

/// The log directory of the `wal_recovery` cases.
pub const WAL_DIR: &str = "/wal";

/// What kind of file a [`CaseFile`] is (it decides the file name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CaseFileKind {
    /// `{generation:020}.wal`
    Segment,
    /// `{generation:020}.snap`
    Snapshot,
    /// `{generation:020}.snap.tmp`: an unfinished snapshot, which recovery removes.
    Unfinished,
    /// `{generation:021}.wal` (one digit too many) for an even generation, `backup-{generation}.tmp`
    /// for an odd one: names recovery must leave alone.
    Other,
}

/// One file of a `wal_recovery` case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseFile {
    /// What kind of file.
    pub kind: CaseFileKind,
    /// The generation in its name.
    pub generation: u64,
    /// Its durable contents.
    pub bytes: Vec<u8>,
}

impl CaseFile {
    /// The file name in the log directory.
    pub fn name(&self) -> String {
        let g = self.generation;
        match self.kind {
            CaseFileKind::Segment => format!("{g:020}.wal"),
            CaseFileKind::Snapshot => format!("{g:020}.snap"),
            CaseFileKind::Unfinished => format!("{g:020}.snap.tmp"),
            CaseFileKind::Other if g.is_multiple_of(2) => format!("{g:021}.wal"),
            CaseFileKind::Other => format!("backup-{g}.tmp"),
        }
    }
}

/// The input of `wal_recovery`: the files in the log directory (a later file of the same name wins)
/// and what the store already holds (recovery checks those batches without decoding them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WalCase {
    /// The files.
    pub files: Vec<CaseFile>,
    /// For [`WalDir::open_skipping`]: a writer and the seq through which the store holds its batches.
    pub skip: Option<(String, u64)>,
}

const WAL_TAG: &[u8] = b"\0case:wal_recovery\n";
const ROUNDTRIP_TAG: &[u8] = b"\0case:connect_roundtrip\n";

impl WalCase {
    /// The canonical encoding: the tag; the skip (0, or 1, the writer's length (u32 LE) and bytes,
    /// and the seq (u64 LE)); then per file its kind (u8), generation (u64 LE), length (u32 LE) and
    /// bytes.
    pub fn to_canonical(&self) -> Vec<u8> {
        let mut out = WAL_TAG.to_vec();
        match &self.skip {
            None => out.push(0),
            Some((writer, seq)) => {
                out.push(1);
                put_bytes(writer.as_bytes(), &mut out);
                out.extend_from_slice(&seq.to_le_bytes());
            }
        }
        for f in &self.files {
            out.push(f.kind as u8);
            out.extend_from_slice(&f.generation.to_le_bytes());
            put_bytes(&f.bytes, &mut out);
        }
        out
    }

    /// Reads the canonical encoding; `None` when `bytes` do not start with its tag or are malformed.
    pub fn from_canonical(bytes: &[u8]) -> Option<WalCase> {
        let mut r = CaseReader(bytes.strip_prefix(WAL_TAG)?);
        let skip = match r.u8()? {
            0 => None,
            1 => Some((r.string()?, u64::from_le_bytes(r.take(8)?.try_into().ok()?))),
            _ => return None,
        };
        let mut files = Vec::new();
        while !r.0.is_empty() {
            let kind = match r.u8()? {
                0 => CaseFileKind::Segment,
                1 => CaseFileKind::Snapshot,
                2 => CaseFileKind::Unfinished,
                3 => CaseFileKind::Other,
                _ => return None,
            };
            let generation = u64::from_le_bytes(r.take(8)?.try_into().ok()?);
            let bytes = r.bytes()?.to_vec();
            files.push(CaseFile {
                kind,
                generation,
                bytes,
            });
        }
        Some(WalCase { files, skip })
    }
}

/// `wal_recovery` on canonical bytes (the regression replay). Panics if they are not a canonical case.
pub fn wal_recovery(bytes: &[u8]) {
    let case = WalCase::from_canonical(bytes)
        .expect("not a canonical wal_recovery case (see fuzz/README.md: export_regression)");
    wal_recovery_case(&case);
}

/// `wal_recovery`: puts the files into a [`SimFs`] log directory and opens it with
/// [`RecoveryPolicy::Fail`] ([`WalDir::open_skipping`] with the case's skip). Recovery must return
/// exactly the whole, intact batch frames of the live segments in log order, less those it may skip
/// (a torn frame may be cut off the end of the log, nothing else may be dropped), or
/// [`Error::Corrupted`] naming a file and an offset where a bad frame really starts.
pub fn wal_recovery_case(case: &WalCase) {
    let dir = Path::new(WAL_DIR);
    let mut files: BTreeMap<String, &CaseFile> = BTreeMap::new();
    for f in &case.files {
        files.insert(f.name(), f);
    }
    let fs = SimFs::new();
    for (name, f) in &files {
        fs.put(&dir.join(name), &f.bytes);
    }
    let of_kind = |kind| -> Vec<&CaseFile> {
        // `files` is sorted by name, and names of one kind sort by generation.
        files.values().copied().filter(|f| f.kind == kind).collect()
    };
    let newest_snapshot = of_kind(CaseFileKind::Snapshot).last().copied();
    let live: Vec<&CaseFile> = of_kind(CaseFileKind::Segment)
        .into_iter()
        .filter(|f| newest_snapshot.is_none_or(|s| f.generation > s.generation))
        .collect();
    // Only the newest segment, even an empty one, can end torn (see `WalDir::open`).
    let newest = live.len().checked_sub(1);
    // A frame whose header, checksum, writer and seq check out, of a batch the store holds:
    // recovery may pass over it without decoding its entries. Its seq and length, if so.
    let skippable = |bytes: &[u8], kind: FrameKind| -> Option<(u64, usize)> {
        let (k, writer, seq, len) = frame::decode_seq(bytes).ok()?;
        let (w, through) = case.skip.as_ref()?;
        (k == kind && writer == *w && seq <= *through).then_some((seq, len))
    };

    // The rule, restated: what a crash may have left of a write, with no intact frame starting
    // anywhere after it (looked for at every byte, not only where a magic is).
    let intact_at = |bytes: &[u8]| {
        matches!(frame::decode(bytes), Ok(fr) if fr.kind == FrameKind::Batch)
            || skippable(bytes, FrameKind::Batch).is_some()
    };
    let is_torn =
        |rest: &[u8]| frame::could_be_torn(rest) && !(1..rest.len()).any(|i| intact_at(&rest[i..]));

    let result = WalDir::open_skipping(
        Arc::new(fs.clone()),
        dir,
        None,
        RecoveryPolicy::Fail,
        None,
        case.skip.as_ref().map(|(w, s)| (w.as_str(), *s)),
    );

    for f in files.values() {
        let left = fs.contents(&dir.join(f.name()));
        match f.kind {
            CaseFileKind::Unfinished => {
                assert!(left.is_none(), "{} was not removed", f.name())
            }
            // A snapshot older than the newest one, which recovery read (or failed on), is
            // superseded: an open may remove it, as the compaction a crash stopped would have.
            CaseFileKind::Snapshot
                if newest_snapshot.is_some_and(|s| f.generation < s.generation) =>
            {
                assert!(
                    left.is_none() || left.as_deref() == Some(&f.bytes[..]),
                    "{} was changed",
                    f.name()
                )
            }
            CaseFileKind::Other | CaseFileKind::Snapshot => assert_eq!(
                left.as_deref(),
                Some(&f.bytes[..]),
                "{} was changed",
                f.name()
            ),
            CaseFileKind::Segment => {}
        }
    }

    match result {
        Ok((wal, recovered)) => {
            assert!(recovered.skipped.is_empty(), "policy Fail skipped bytes");
            let mut last_seq = 0;
            let mut skipped_applied = 0;
            let whole_skippable_snapshot = |s: &CaseFile| {
                skippable(&s.bytes, FrameKind::Snapshot).filter(|(_, len)| *len == s.bytes.len())
            };
            match (newest_snapshot, &recovered.snapshot) {
                (None, None) => {}
                (Some(s), None) if whole_skippable_snapshot(s).is_some() => {
                    last_seq = whole_skippable_snapshot(s).map_or(0, |(q, _)| q);
                }
                (Some(s), Some(snap)) => {
                    last_seq = snap.seq;
                    let parts = snapshot_frames(&s.bytes);
                    if parts.len() == 1 {
                        let mut bytes = Vec::new();
                        frame::encode(FrameKind::Snapshot, snap, &mut bytes);
                        assert!(
                            bytes == as_current_version(&s.bytes),
                            "the recovered snapshot is not the whole newest snapshot file {}",
                            s.name()
                        );
                    } else {
                        // A snapshot over a frame's limit: frames of one writer and seq, whose
                        // entries together are the recovered ones.
                        let mut merged = crate::model::Entries::default();
                        for f in &parts {
                            assert!(
                                f.kind == FrameKind::Snapshot
                                    && f.batch.writer == snap.writer
                                    && f.batch.seq == snap.seq,
                                "{} holds a frame of another snapshot",
                                s.name()
                            );
                            merged.extend(f.batch.entries.clone());
                        }
                        assert!(
                            merged == snap.entries,
                            "the recovered snapshot is not the frames of {}",
                            s.name()
                        );
                    }
                }
                (s, r) => panic!(
                    "newest snapshot file {:?}, recovered snapshot {r:?}",
                    s.map(|s| s.name())
                ),
            }
            // Match the recovered batches, in order, against the frames of the live segments.
            // Recovered batches are re-encoded as the current version: compare with the file's
            // frames made current too (a version 1 frame differs only in its header).
            let frames: Vec<Vec<u8>> = recovered
                .batches
                .iter()
                .map(|b| {
                    let mut out = Vec::new();
                    frame::encode(FrameKind::Batch, b, &mut out);
                    out
                })
                .collect();
            let frame_at = |bytes: &[u8]| -> Option<(Vec<u8>, usize)> {
                let len = frame::decode(bytes).ok()?.len;
                Some((as_current_version(&bytes[..len]), len))
            };
            let mut next = 0;
            let mut cut = Vec::new();
            let closed = wal.closed();
            assert_eq!(
                closed.len(),
                live.len(),
                "closed segments {closed:?} are not the live segments"
            );
            for (i, f) in live.iter().enumerate() {
                let mut pos = 0;
                while pos < f.bytes.len() {
                    if let Some((seq, len)) = skippable(&f.bytes[pos..], FrameKind::Batch) {
                        last_seq = last_seq.max(seq);
                        skipped_applied += 1;
                        pos += len;
                    } else if let Some((current, len)) = frame_at(&f.bytes[pos..])
                        && next < frames.len()
                        && current == frames[next]
                    {
                        last_seq = last_seq.max(recovered.batches[next].seq);
                        pos += len;
                        next += 1;
                    } else {
                        break;
                    }
                }
                if pos < f.bytes.len() {
                    assert_eq!(
                        Some(i),
                        newest,
                        "recovery left bytes {}.. of {} unread, which is not the end of the log",
                        pos,
                        f.name()
                    );
                    assert!(
                        is_torn(&f.bytes[pos..]),
                        "recovery dropped bytes {pos}.. of {} that are not a torn frame",
                        f.name()
                    );
                    let path = dir.join(f.name());
                    assert_eq!(
                        fs.contents(&path).as_deref(),
                        Some(&f.bytes[..pos]),
                        "the torn tail of {} was not cut at {pos}",
                        f.name()
                    );
                    cut.push((path, pos as u64));
                }
                assert_eq!(
                    (closed[i].generation, closed[i].bytes),
                    (f.generation, pos as u64),
                    "closed segment {i}"
                );
            }
            assert_eq!(
                next,
                frames.len(),
                "recovered batch {next} is not a frame of the live segments in log order: {:?}",
                recovered.batches.get(next)
            );
            assert_eq!(recovered.cut, cut, "reported cuts");
            assert_eq!(recovered.last_seq, last_seq, "the highest seq in the log");
            assert_eq!(
                recovered.skipped_applied, skipped_applied,
                "batches passed over as applied"
            );
        }
        Err(Error::Corrupted {
            file,
            offset,
            reason,
        }) => {
            assert!(!reason.is_empty(), "Corrupted without a reason");
            let f = file
                .strip_prefix(dir)
                .ok()
                .and_then(|n| files.get(n.to_str()?))
                .unwrap_or_else(|| {
                    panic!("Corrupted names {} which is not a log file", file.display())
                });
            let offset = usize::try_from(offset).expect("offset fits");
            match f.kind {
                CaseFileKind::Snapshot => {
                    assert_eq!(offset, 0, "a snapshot is bad from byte 0");
                    assert_eq!(
                        Some(f.generation),
                        newest_snapshot.map(|s| s.generation),
                        "policy Fail must stop at the newest snapshot"
                    );
                    assert!(
                        !matches!(frame::decode(&f.bytes), Ok(fr) if fr.kind == FrameKind::Snapshot && fr.len == f.bytes.len())
                            && skippable(&f.bytes, FrameKind::Snapshot)
                                .is_none_or(|(_, len)| len != f.bytes.len()),
                        "{} is a whole snapshot frame but was called corrupt: {reason}",
                        f.name()
                    );
                }
                CaseFileKind::Segment => {
                    let i = live
                        .iter()
                        .position(|l| l.generation == f.generation)
                        .unwrap_or_else(|| {
                            panic!("Corrupted names {}, not a live segment", f.name())
                        });
                    assert!(
                        offset < f.bytes.len(),
                        "offset {offset} is outside {} ({} bytes)",
                        f.name(),
                        f.bytes.len()
                    );
                    let mut pos = 0;
                    while pos < offset {
                        if let Some((_, len)) = skippable(&f.bytes[pos..], FrameKind::Batch) {
                            pos += len;
                            continue;
                        }
                        match frame::decode(&f.bytes[pos..]) {
                            Ok(fr) if fr.kind == FrameKind::Batch => pos += fr.len,
                            other => panic!(
                                "Corrupted at {offset} of {}, but the frame at {pos} is already bad: {other:?}",
                                f.name()
                            ),
                        }
                    }
                    assert_eq!(pos, offset, "offset {offset} is not where a frame starts");
                    let rest = &f.bytes[offset..];
                    assert!(
                        !matches!(frame::decode(rest), Ok(fr) if fr.kind == FrameKind::Batch)
                            && skippable(rest, FrameKind::Batch).is_none(),
                        "{} at {offset} holds an intact batch but was called corrupt: {reason}",
                        f.name()
                    );
                    assert!(
                        Some(i) != newest || !is_torn(rest),
                        "a torn tail at the end of the log was called corrupt: {reason}"
                    );
                }
                _ => panic!("Corrupted names {}, not a segment or snapshot", f.name()),
            }
        }
        Err(e) => panic!("recovery failed with neither batches nor Corrupted: {e}"),
    }
}

/// The frames of a snapshot file back to back, as far as they decode.
fn snapshot_frames(bytes: &[u8]) -> Vec<frame::Frame> {
    let mut frames = Vec::new();
    let mut at = 0;
    while at < bytes.len()
        && let Ok(f) = frame::decode(&bytes[at..])
    {
        at += f.len;
        frames.push(f);
    }
    frames
}

// ---------------------------------------------------------------------------------------------------
// connect_decode

/// `connect_decode`: the bytes before the first 0xFF (never valid in UTF-8 JSON) as a record key and
/// those after it as a record value, or all of them as both when there is no 0xFF. Decoding never
/// panics; what decodes re-encodes to bytes that decode to an equal key or value, and re-encoding
/// that gives the same bytes again.
pub fn connect_decode(data: &[u8]) {
    let (key, value) = match data.iter().position(|b| *b == 0xFF) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, data),
    };
    check_key_bytes(key);
    check_value_bytes(value);
}

fn check_key_bytes(bytes: &[u8]) {
    let plain = crate::codec::scan::key(bytes);
    let key = match decode_key(bytes) {
        Ok(key) => key,
        Err(e) => {
            assert!(
                plain.is_none(),
                "a key the decoder refuses ({e}) read as plain"
            );
            return assert!(!e.to_string().is_empty(), "empty error");
        }
    };
    if let Some((namespace, canonical)) = plain {
        assert_eq!(namespace, key.namespace(), "a plain key's connector");
        assert_eq!(
            canonical,
            &key.id()[4 + namespace.len()..],
            "a plain key's canonical partition bytes"
        );
    }
    let mut encoded = Vec::new();
    encode_key(&key, &mut encoded);
    let again = decode_key(&encoded).unwrap_or_else(|e| {
        panic!(
            "key {key:?} decoded from {:?} re-encodes to {:?}, which does not decode: {e}",
            String::from_utf8_lossy(bytes),
            String::from_utf8_lossy(&encoded)
        )
    });
    assert_eq!(again, key, "a key re-encoded and decoded is another key");
    assert_eq!(
        again.connect_key(),
        encoded,
        "re-encoding a key is not stable"
    );
}

fn check_value_bytes(bytes: &[u8]) {
    if let Some(live) = crate::codec::scan::value(bytes) {
        assert_eq!(
            crate::codec::json::check_value(bytes).ok(),
            Some(live),
            "a plain value the full check reads otherwise"
        );
    }
    let offset = match decode_value(bytes) {
        Ok(Some(offset)) => offset,
        Ok(None) => return,
        Err(e) => return assert!(!e.to_string().is_empty(), "empty error"),
    };
    let mut encoded = Vec::new();
    encode_value(&offset, &mut encoded);
    let again = decode_value(&encoded).unwrap_or_else(|e| {
        panic!(
            "offset {offset:?} decoded from {:?} re-encodes to {:?}, which does not decode: {e}",
            String::from_utf8_lossy(bytes),
            String::from_utf8_lossy(&encoded)
        )
    });
    let again = again.expect("an object re-encodes to an object, not null");
    assert_same_map(&again, &offset, "an offset re-encoded and decoded");
    let mut twice = Vec::new();
    encode_value(&again, &mut twice);
    assert_eq!(twice, encoded, "re-encoding an offset is not stable");
}

/// Equal members in the same order.
fn assert_same_map(got: &FieldMap, want: &FieldMap, what: &str) {
    assert!(
        got == want && got.iter().map(|(n, _)| n).eq(want.iter().map(|(n, _)| n)),
        "{what}: got {got:?}, want {want:?}"
    );
}

// ---------------------------------------------------------------------------------------------------
// connect_roundtrip

/// The input of `connect_roundtrip`: keys and their offsets (`None`: only the key is checked).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoundtripCase {
    /// Keys and offsets.
    pub entries: Vec<(OffsetKey, Option<FieldMap>)>,
}

impl RoundtripCase {
    /// The canonical encoding: the tag, then per entry the namespace, the partition (0, or 1 and a
    /// map) and the offset (likewise); a map is a member count (u8) and per member a name and a value
    /// tag (0 null, 1 bool, 2 i64 LE, 3 f64 bits LE, 4 string, 5 bytes); strings and bytes are a
    /// u32 LE length and the bytes.
    pub fn to_canonical(&self) -> Vec<u8> {
        let mut out = ROUNDTRIP_TAG.to_vec();
        let put_map = |m: Option<&FieldMap>, out: &mut Vec<u8>| match m {
            None => out.push(0),
            Some(m) => {
                out.push(1);
                out.push(u8::try_from(m.len()).expect("at most 255 members"));
                for (name, value) in m.iter() {
                    put_bytes(name.as_bytes(), out);
                    match value {
                        Value::Null => out.push(0),
                        Value::Bool(b) => out.extend_from_slice(&[1, u8::from(*b)]),
                        Value::Int(i) => {
                            out.push(2);
                            out.extend_from_slice(&i.to_le_bytes());
                        }
                        Value::Float(f) => {
                            out.push(3);
                            out.extend_from_slice(&f.to_bits().to_le_bytes());
                        }
                        Value::String(s) => {
                            out.push(4);
                            put_bytes(s.as_bytes(), out);
                        }
                        Value::Bytes(b) => {
                            out.push(5);
                            put_bytes(b, out);
                        }
                    }
                }
            }
        };
        for (key, offset) in &self.entries {
            put_bytes(key.namespace().as_bytes(), &mut out);
            put_map(key.partition(), &mut out);
            put_map(offset.as_ref(), &mut out);
        }
        out
    }

    /// Reads the canonical encoding; `None` when `bytes` do not start with its tag or are malformed.
    pub fn from_canonical(bytes: &[u8]) -> Option<RoundtripCase> {
        fn map(r: &mut CaseReader<'_>) -> Option<Option<FieldMap>> {
            if r.u8()? == 0 {
                return Some(None);
            }
            let mut m = FieldMap::new();
            for _ in 0..r.u8()? {
                let name = r.string()?;
                let value = match r.u8()? {
                    0 => Value::Null,
                    1 => Value::Bool(r.u8()? != 0),
                    2 => Value::Int(i64::from_le_bytes(r.take(8)?.try_into().ok()?)),
                    3 => Value::Float(f64::from_bits(u64::from_le_bytes(
                        r.take(8)?.try_into().ok()?,
                    ))),
                    4 => Value::String(r.string()?),
                    5 => Value::Bytes(r.bytes()?.to_vec()),
                    _ => return None,
                };
                m.insert(name, value);
            }
            Some(Some(m))
        }
        let mut r = CaseReader(bytes.strip_prefix(ROUNDTRIP_TAG)?);
        let mut entries = Vec::new();
        while !r.0.is_empty() {
            let namespace = r.string()?;
            let key = match map(&mut r)? {
                Some(p) => OffsetKey::new(namespace, p),
                None => OffsetKey::null_partition(namespace),
            };
            entries.push((key, map(&mut r)?));
        }
        Some(RoundtripCase { entries })
    }
}

/// `connect_roundtrip` on canonical bytes (the regression replay). Panics if they are not a
/// canonical case.
pub fn connect_roundtrip(bytes: &[u8]) {
    let case = RoundtripCase::from_canonical(bytes)
        .expect("not a canonical connect_roundtrip case (see fuzz/README.md: export_regression)");
    connect_roundtrip_case(&case);
}

/// `connect_roundtrip`: every key and offset encodes to bytes that decode to what Connect reads back
/// ([`FieldMap::connect_normalized`], members in the same order), and those re-encode to the same
/// bytes.
pub fn connect_roundtrip_case(case: &RoundtripCase) {
    for (key, offset) in &case.entries {
        let bytes = key.connect_key();
        let back = decode_key(&bytes).unwrap_or_else(|e| {
            panic!(
                "key {key:?} encodes to {:?}, which does not decode: {e}",
                String::from_utf8_lossy(&bytes)
            )
        });
        assert_eq!(back.namespace(), key.namespace(), "namespace");
        match (back.partition(), key.partition()) {
            (None, None) => {}
            (Some(got), Some(sent)) => {
                assert_same_map(got, &sent.connect_normalized(), "a partition read back")
            }
            (got, sent) => panic!("partition {sent:?} read back as {got:?}"),
        }
        assert_eq!(back, *key, "a key read back is another key");
        assert_eq!(back.connect_key(), bytes, "re-encoding a key is not stable");
        if let Some(offset) = offset {
            let mut bytes = Vec::new();
            encode_value(offset, &mut bytes);
            let back = decode_value(&bytes)
                .unwrap_or_else(|e| {
                    panic!(
                        "offset {offset:?} encodes to {:?}, which does not decode: {e}",
                        String::from_utf8_lossy(&bytes)
                    )
                })
                .expect("an offset object reads back as an object");
            assert_same_map(&back, &offset.connect_normalized(), "an offset read back");
            let mut again = Vec::new();
            encode_value(&back, &mut again);
            assert_eq!(again, bytes, "re-encoding an offset is not stable");
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// crash_replay

/// At most this many operations per `crash_replay` run, so one run stays fast.
pub const MAX_CRASH_OPS: usize = 64;

/// `crash_replay`: bytes decoded as scenario operations ([`Op::decode_all`], at most
/// [`MAX_CRASH_OPS`]) run through the one reference model, [`scenario::run`], over the memory store
/// and the crash-simulating file system. An error is an invariant broken.
pub fn crash_replay(data: &[u8]) {
    let ops = Op::decode_all(&data[..data.len().min(3 * MAX_CRASH_OPS)]);
    if let Err(e) = scenario::run(&ops, &mut MemoryFactory, ScenarioOptions::default()) {
        panic!("crash scenario broke an invariant: {e}\noperations: {ops:?}");
    }
}

// ---------------------------------------------------------------------------------------------------
// url_and_config

/// `url_and_config`: the bytes split at 0xFF into a store URL, a property name and a value (each
/// read as lossy UTF-8); see [`url_and_config_case`].
pub fn url_and_config(data: &[u8]) {
    let mut parts = data.splitn(3, |b| *b == 0xFF);
    let mut next = || String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let (url, name, value) = (next(), next(), next());
    url_and_config_case(&url, &name, &value);
}

/// Properties [`CommitBufferConfig::set`] knows: an error for one of them must not call it unknown.
pub const CONFIG_PROPERTIES: [&str; 15] = [
    "offset.flush.interval.ms",
    "offset.flush.timeout.ms",
    "offsets.writer",
    "offsets.durability",
    "offsets.max.pending",
    "offsets.when.full",
    "offsets.segment.bytes",
    "offsets.recovery",
    "offsets.reset.policy",
    "offsets.dead.letter.file",
    "offsets.once.id",
    "offsets.once.file",
    "offsets.expire.after",
    "offsets.expire.interval",
    "offsets.stall.after",
];

/// `url_and_config`: [`open()`] gives a store or an error with a message, never a panic, and so does
/// [`CommitBufferConfig::set`]. URLs whose backend could touch the disk or the network (anything but
/// `memory`) are only parsed, and opened with their scheme renamed to one no backend has.
pub fn url_and_config_case(url: &str, name: &str, value: &str) {
    check_url(url);
    check_config(name, value);
}

fn check_url(raw: &str) {
    let url = match StoreUrl::parse(raw) {
        Ok(url) => url,
        Err(e) => {
            let msg = e.to_string();
            assert!(!msg.is_empty(), "empty error");
            let again = open(raw).err().map(|e| e.to_string());
            assert_eq!(
                again.as_deref(),
                Some(&msg[..]),
                "open() and StoreUrl::parse disagree"
            );
            return;
        }
    };
    assert!(
        !url.scheme.is_empty() && url.scheme == url.scheme.to_ascii_lowercase(),
        "scheme `{}`",
        url.scheme
    );
    // Display masks secrets.
    let shown = url.to_string();
    for (name, value) in &url.params {
        if is_secret(name) && !value.is_empty() {
            assert!(
                shown.contains(&format!("{name}=****")),
                "`{name}` not masked in {shown}"
            );
        }
    }
    // What the rocksdb backend asks of its URL, without opening anything.
    let _ = url.only_params(&["sync"]);
    let _ = url.bool_param("sync", false);
    if url.scheme == "memory" {
        match open(raw) {
            Ok(store) => {
                assert_eq!(store.kind(), "memory");
                let key = OffsetKey::null_partition("fuzz");
                store
                    .set(key.clone(), Offset::new().with("n", 1))
                    .expect("a new memory store takes an offset");
                assert_eq!(
                    store.get(&key).expect("memory get"),
                    Some(Offset::new().with("n", 1))
                );
            }
            Err(e) => assert!(!e.to_string().is_empty(), "empty error"),
        }
    } else {
        let harmless = format!("x-{raw}");
        let e = match open(&harmless) {
            Ok(store) => panic!("{harmless} opened a {} store", store.kind()),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains("unknown scheme"),
            "{harmless} was refused for another reason: {e}"
        );
    }
}

fn check_config(name: &str, value: &str) {
    let mut config = CommitBufferConfig::new("/wal");
    match config.set(name, value) {
        Ok(_) => {
            let _ = format!("{config:?}");
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.contains(&format!("`{name}`")),
                "the error does not name the property: {msg}"
            );
            assert!(
                !(CONFIG_PROPERTIES.contains(&name) && msg.contains("unknown property")),
                "a known property was called unknown: {msg}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// Canonical case encoding

fn put_bytes(b: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&u32::try_from(b.len()).expect("under 4 GiB").to_le_bytes());
    out.extend_from_slice(b);
}

struct CaseReader<'a>(&'a [u8]);

impl<'a> CaseReader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = u32::from_le_bytes(self.take(4)?.try_into().ok()?);
        self.take(usize::try_from(n).ok()?)
    }
    fn string(&mut self) -> Option<String> {
        String::from_utf8(self.bytes()?.to_vec()).ok()
    }
}
