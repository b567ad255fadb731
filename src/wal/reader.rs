//! One reader of log segments: recovery, `wal inspect`, `wal repair` and the fuzz oracle all fold
//! over [`SegmentReader`], so they cannot disagree on which bytes are intact, torn or corrupt.
//!
//! The rule: bytes that are not an intact frame are a **torn tail** only when they sit at the end of
//! the newest non-empty segment, [could be what a crash left of a write](frame::could_be_torn), and no
//! intact frame starts anywhere after them. Anything else is **corrupt**, from where it starts to the
//! next position where an intact frame starts (or the end of the segment).

use super::frame::{self, FrameError, FrameKind};
use crate::model::Batch;

/// An intact batch frame.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameAt {
    /// Byte offset in the segment.
    pub offset: usize,
    /// Bytes of the frame, header included.
    pub len: usize,
    /// The batch's writer.
    pub writer: String,
    /// The batch's seq.
    pub seq: u64,
    /// The decoded batch; `None` when it was checked but passed over as already applied.
    pub batch: Option<Batch>,
}

/// A region of bytes that is not an intact frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Region {
    /// Byte offset in the segment.
    pub offset: usize,
    /// Bytes in the region.
    pub len: usize,
    /// Why the bytes at `offset` are not a frame.
    pub reason: String,
    /// `Some(true)` when the frame's checksums held, `Some(false)` when one did not, `None` when none
    /// could be checked (bad magic, incomplete frame).
    pub crc_ok: Option<bool>,
}

/// What a segment holds, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// An intact batch frame.
    Frame(FrameAt),
    /// The end of the newest segment: a write cut short by a crash (never synced, so never
    /// acknowledged). Recovery cuts it.
    Torn(Region),
    /// Bytes that fail their checks and are not a torn tail.
    Corrupt(Region),
}

/// Reads one segment's bytes as [`Item`]s.
pub struct SegmentReader<'a, S> {
    bytes: &'a [u8],
    pos: usize,
    is_last: bool,
    skip: S,
}

impl<'a, S: Fn(&str, u64) -> bool> SegmentReader<'a, S> {
    /// `is_last`: the newest non-empty segment of the log (only there can a tail be torn).
    /// `skip(writer, seq)`: batches the store already holds, whose frames are checked (framing and
    /// checksums, writer and seq) but whose entries are not decoded.
    pub fn new(bytes: &'a [u8], is_last: bool, skip: S) -> Self {
        SegmentReader {
            bytes,
            pos: 0,
            is_last,
            skip,
        }
    }

    /// The one definition of an intact batch frame at `pos`.
    fn intact_at(&self, pos: usize) -> Result<FrameAt, FrameError> {
        let rest = &self.bytes[pos..];
        if let Ok((FrameKind::Batch, writer, seq, len)) = frame::decode_seq(rest)
            && (self.skip)(&writer, seq)
        {
            return Ok(FrameAt {
                offset: pos,
                len,
                writer,
                seq,
                batch: None,
            });
        }
        match frame::decode(rest) {
            Ok(f) if f.kind == FrameKind::Batch => Ok(FrameAt {
                offset: pos,
                len: f.len,
                writer: f.batch.writer.clone(),
                seq: f.batch.seq,
                batch: Some(f.batch),
            }),
            Ok(_) => Err(FrameError::Corrupt(
                "a snapshot frame inside a segment".into(),
            )),
            Err(e) => Err(e),
        }
    }

    /// The next position after `pos` where an intact frame starts.
    fn next_intact(&self, pos: usize) -> Option<usize> {
        let mut from = pos + 1;
        while let Some(m) = frame::find_magic(self.bytes, from) {
            if self.intact_at(m).is_ok() {
                return Some(m);
            }
            from = m + 1;
        }
        None
    }
}

impl<S: Fn(&str, u64) -> bool> Iterator for SegmentReader<'_, S> {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        let pos = self.pos;
        if pos >= self.bytes.len() {
            return None;
        }
        let err = match self.intact_at(pos) {
            Ok(f) => {
                self.pos += f.len;
                return Some(Item::Frame(f));
            }
            Err(e) => e,
        };
        let next = self.next_intact(pos);
        let rest = &self.bytes[pos..];
        let crc_ok = crc_state(&err);
        let reason = err.to_string();
        if self.is_last && next.is_none() && frame::could_be_torn(rest) {
            self.pos = self.bytes.len();
            return Some(Item::Torn(Region {
                offset: pos,
                len: rest.len(),
                reason,
                crc_ok,
            }));
        }
        let end = next.unwrap_or(self.bytes.len());
        self.pos = end;
        Some(Item::Corrupt(Region {
            offset: pos,
            len: end - pos,
            reason,
            crc_ok,
        }))
    }
}

fn crc_state(e: &FrameError) -> Option<bool> {
    match e {
        FrameError::Corrupt(r) if r.contains("checksum mismatch") => Some(false),
        FrameError::Corrupt(r)
            if r.starts_with("bad magic")
                || r.starts_with("length")
                || r.starts_with("unknown frame version") =>
        {
            None
        }
        FrameError::Corrupt(_) => Some(true),
        FrameError::Incomplete { .. } => None,
    }
}

/// How a snapshot file reads: whole snapshot frames of one writer and seq back to back (one,
/// unless the snapshot is over a frame's limit: see [`frame::encode_snapshot`]) as one frame, or
/// corrupt from byte 0.
pub fn read_snapshot(bytes: &[u8]) -> Result<frame::Frame, Region> {
    let bad = |reason: String, crc_ok: Option<bool>| Region {
        offset: 0,
        len: bytes.len(),
        reason,
        crc_ok,
    };
    let mut whole: Option<frame::Frame> = None;
    let mut at = 0;
    while at < bytes.len() || whole.is_none() {
        let f = frame::decode(&bytes[at..]).map_err(|e| bad(e.to_string(), crc_state(&e)))?;
        if f.kind != FrameKind::Snapshot {
            return Err(bad("not a snapshot frame".to_string(), Some(true)));
        }
        at += f.len;
        match &mut whole {
            None => whole = Some(f),
            Some(w) if w.batch.writer == f.batch.writer && w.batch.seq == f.batch.seq => {
                w.batch.entries.extend(f.batch.entries);
            }
            Some(_) => {
                return Err(bad(
                    "snapshot frames of different batches".to_string(),
                    Some(true),
                ));
            }
        }
    }
    let mut whole = whole.expect("at least one frame was read");
    whole.len = bytes.len();
    Ok(whole)
}
