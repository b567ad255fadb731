//! The on-disk frame: one sealed batch (or a snapshot of the whole store) in the write-ahead log.
//!
//! ```text
//! byte  size  field (all integers little-endian)
//! 0     4     MAGIC       43 4F 46 21 ("COF!": connect-offsets frame; the u32 0x2146_4F43)
//! 4     1     VERSION     2
//! 5     1     kind        1 = batch, 2 = snapshot (the whole store as of `seq`)
//! 6     2     reserved    0
//! 8     4     length      payload bytes, at most MAX_PAYLOAD
//! 12    4     crc32       crc32fast over bytes 4..12 (version, kind, reserved, length) and the payload
//! 16    4     header crc  crc32fast over bytes 0..16
//! 20    len   payload     bincode 2 (standard config): writer, seq, entries
//! ```
//!
//! The first checksum covers the length, so a rotted length field never passes as a whole frame.
//! The header checksum tells a torn write from rot when a length points past the end of the file:
//! a frame whose header checks out but whose bytes end early was cut by a crash in its write (it was
//! never synced, so never acknowledged) and recovery may cut it; a header that fails its checksum is
//! rot, which recovery refuses as corruption even at the very end of the log, because the frame it
//! belongs to may have been acknowledged. A header itself cut short is a torn write when the bytes
//! present are the start of a header (see `check`). The magic lets a recovery that was told to skip
//! corruption find the next frame.
//!
//! Version 1 frames (16-byte header, no header checksum) are still read: a length of theirs that
//! points past the end is taken for a torn write when no intact frame follows it.
//!
//! Payload: `writer: String`, `seq: u64`, `entries: Vec<Entry>`; an entry is `namespace: String`,
//! `partition: Option<Vec<(String, Value)>>`, `offset: Option<Vec<(String, Value)>>` (`None` = reset);
//! a value is a `u8` tag (0 null, 1 bool, 2 i64, 3 f64, 4 string, 5 bytes) and its bincode body.

use bincode::de::Decoder;
use bincode::de::read::Reader as _;
use bincode::enc::Encoder;
use bincode::error::{DecodeError, EncodeError};
use bincode::{Decode, Encode};

use crate::model::{Batch, FieldMap, OffsetKey, Value};

/// Marks the start of every frame.
pub const MAGIC: u32 = 0x2146_4F43;
/// The frame format version written by this build.
pub const VERSION: u8 = 2;
/// Bytes before the payload of a frame this build writes.
pub const HEADER_LEN: usize = 20;
/// Bytes before the payload of a version 1 frame (no header checksum).
pub const V1_HEADER_LEN: usize = 16;
/// The largest payload a frame may carry (256 MiB).
pub const MAX_PAYLOAD: usize = 256 << 20;

/// What a frame holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// One sealed batch.
    Batch = 1,
    /// The whole store as of `seq` (memory store compaction).
    Snapshot = 2,
}

/// bincode's standard configuration, with no limit of its own: a frame's length is checked against
/// [`MAX_PAYLOAD`], and its payload decoded from a slice of that length (bincode's limit counts
/// every varint as 8 bytes read, so it would refuse frames a quarter full of small values).
const CONFIG: bincode::config::Configuration<
    bincode::config::LittleEndian,
    bincode::config::Varint,
    bincode::config::NoLimit,
> = bincode::config::standard();

/// Appends one framed batch to `out` (which may already hold other frames). Panics when it does
/// not fit a frame: for batches known to be small (tests, tools); the commit path uses
/// [`try_encode`].
pub fn encode(kind: FrameKind, batch: &Batch, out: &mut Vec<u8>) {
    try_encode(kind, batch, out).expect("a batch within the frame limit");
}

/// A batch whose payload would exceed [`MAX_PAYLOAD`]: its entry count and encoded size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge {
    /// Entries of the batch.
    pub entries: usize,
    /// Bytes its payload took.
    pub bytes: usize,
}

impl std::fmt::Display for TooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "a batch of {} offsets takes {} bytes, over the write-ahead log's frame limit of {} MiB",
            self.entries,
            self.bytes,
            MAX_PAYLOAD >> 20
        )
    }
}

/// [`encode`], or [`TooLarge`] with `out` as it was.
pub fn try_encode(kind: FrameKind, batch: &Batch, out: &mut Vec<u8>) -> Result<(), TooLarge> {
    let entries = batch.entries.iter();
    encode_parts(kind, &batch.writer, batch.seq, entries.len(), entries, out)
}

/// Appends a snapshot as frames of its own kind, as many as its size needs (each within the
/// limit, the entries split in order); [`super::reader::read_snapshot`] reads them back as one.
/// Fails only when a single entry is over the limit.
pub fn encode_snapshot(snapshot: &Batch, out: &mut Vec<u8>) -> Result<(), TooLarge> {
    encode_chunk(snapshot, snapshot.entries.as_slice(), out)
}

fn encode_chunk(
    snapshot: &Batch,
    entries: &indexmap::map::Slice<crate::OffsetKey, Option<crate::Offset>>,
    out: &mut Vec<u8>,
) -> Result<(), TooLarge> {
    let all = entries.iter();
    match encode_parts(
        FrameKind::Snapshot,
        &snapshot.writer,
        snapshot.seq,
        all.len(),
        all,
        out,
    ) {
        // Halves until each part fits: only a snapshot over the limit pays for the retries.
        Err(_) if entries.len() > 1 => {
            let (left, right) = entries.split_at(entries.len() / 2);
            encode_chunk(snapshot, left, out)?;
            encode_chunk(snapshot, right, out)
        }
        other => other,
    }
}

fn encode_parts<'a>(
    kind: FrameKind,
    writer: &str,
    seq: u64,
    count: usize,
    entries: impl Iterator<Item = (&'a crate::OffsetKey, &'a Option<crate::Offset>)>,
    out: &mut Vec<u8>,
) -> Result<(), TooLarge> {
    let start = out.len();
    out.extend_from_slice(&[0u8; HEADER_LEN]);
    bincode::encode_into_std_write(
        PartsRef {
            writer,
            seq,
            count,
            entries: std::cell::Cell::new(Some(entries)),
        },
        out,
        CONFIG,
    )
    .expect("writing to a Vec cannot fail");
    let len = out.len() - start - HEADER_LEN;
    if len > MAX_PAYLOAD {
        out.truncate(start);
        return Err(TooLarge {
            entries: count,
            bytes: len,
        });
    }
    let header = &mut out[start..start + HEADER_LEN];
    header[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    header[4] = VERSION;
    header[5] = kind as u8;
    header[6..8].copy_from_slice(&[0, 0]);
    header[8..12].copy_from_slice(&(len as u32).to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&out[start + 4..start + 12]);
    crc.update(&out[start + HEADER_LEN..]);
    let sum = crc.finalize();
    out[start + 12..start + 16].copy_from_slice(&sum.to_le_bytes());
    let head = crc32fast::hash(&out[start..start + 16]);
    out[start + 16..start + 20].copy_from_slice(&head.to_le_bytes());
    Ok(())
}

/// One frame read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// Batch or snapshot.
    pub kind: FrameKind,
    /// The batch it carries.
    pub batch: Batch,
    /// Total bytes of the frame (header and payload).
    pub len: usize,
}

/// Why bytes are not a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// The bytes end before the frame does: a torn write at the end of a log.
    Incomplete {
        /// Bytes the frame would need.
        needed: usize,
        /// Bytes present.
        available: usize,
    },
    /// The frame is whole but wrong: bad magic, version, checksum or payload.
    Corrupt(String),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Incomplete { needed, available } => {
                write!(f, "incomplete frame: {available} of {needed} bytes present")
            }
            FrameError::Corrupt(r) => f.write_str(r),
        }
    }
}

/// Decodes the frame at the start of `bytes`.
pub fn decode(bytes: &[u8]) -> Result<Frame, FrameError> {
    let Checked {
        kind,
        header_len,
        total,
    } = check(bytes)?;
    let payload = &bytes[header_len..total];
    let (owned, used): (BatchOwned, usize) = bincode::decode_from_slice(payload, CONFIG)
        .map_err(|e| FrameError::Corrupt(format!("bad payload: {e}")))?;
    if used != payload.len() {
        return Err(FrameError::Corrupt(format!(
            "{} stray bytes after the payload",
            payload.len() - used
        )));
    }
    Ok(Frame {
        kind,
        batch: owned.0,
        len: total,
    })
}

/// Checks the frame at the start of `bytes` (magic, length, checksum, version, kind) and decodes only
/// the writer and seq at the start of its payload: enough for recovery to skip a batch the store already
/// holds without decoding its entries.
pub fn decode_seq(bytes: &[u8]) -> Result<(FrameKind, String, u64, usize), FrameError> {
    let header = check(bytes)?;
    let payload = &bytes[header.header_len..header.total];
    let prefix = || -> Result<(String, u64), DecodeError> {
        let (Prefix(writer, seq), _) = bincode::decode_from_slice(payload, CONFIG)?;
        Ok((writer, seq))
    };
    let (writer, seq) = prefix().map_err(|e| FrameError::Corrupt(format!("bad payload: {e}")))?;
    Ok((header.kind, writer, seq, header.total))
}

/// Where a checked frame's parts are.
#[derive(Debug, Clone, Copy)]
struct Checked {
    kind: FrameKind,
    header_len: usize,
    total: usize,
}

/// Validates the header and checksums of the frame at the start of `bytes`.
///
/// `Incomplete` means the bytes may be the start of a frame whose write a crash cut short: fewer bytes
/// than a header, each consistent with one (magic, a known version and kind, zero reserved bytes), or
/// a whole header that checks out (for version 2, against its own checksum) whose length runs past the
/// bytes present. Whatever else is not an intact frame is `Corrupt`.
fn check(bytes: &[u8]) -> Result<Checked, FrameError> {
    let magic = MAGIC.to_le_bytes();
    if !bytes.starts_with(&magic[..bytes.len().min(4)]) {
        let mut got = [0u8; 4];
        got[..bytes.len().min(4)].copy_from_slice(&bytes[..bytes.len().min(4)]);
        return Err(FrameError::Corrupt(format!(
            "bad magic 0x{:08x}",
            u32::from_le_bytes(got)
        )));
    }
    let header_len = match bytes.get(4) {
        None | Some(&VERSION) => HEADER_LEN,
        Some(1) => V1_HEADER_LEN,
        Some(v) => return Err(FrameError::Corrupt(format!("unknown frame version {v}"))),
    };
    let kind = match bytes.get(5) {
        None | Some(1) => FrameKind::Batch,
        Some(2) => FrameKind::Snapshot,
        Some(k) => return Err(FrameError::Corrupt(format!("unknown frame kind {k}"))),
    };
    // Only zero is written: anything else would not re-encode to the same bytes.
    if bytes
        .get(6..8.min(bytes.len()))
        .is_some_and(|r| r.iter().any(|b| *b != 0))
    {
        return Err(FrameError::Corrupt(format!(
            "reserved bytes {:02x?} are not zero",
            &bytes[6..8.min(bytes.len())]
        )));
    }
    if bytes.len() < header_len {
        return Err(FrameError::Incomplete {
            needed: header_len,
            available: bytes.len(),
        });
    }
    if header_len == HEADER_LEN {
        let stored = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes"));
        let actual = crc32fast::hash(&bytes[0..16]);
        if actual != stored {
            return Err(FrameError::Corrupt(format!(
                "header checksum mismatch: stored 0x{stored:08x}, computed 0x{actual:08x}"
            )));
        }
    }
    let len = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize;
    if len > MAX_PAYLOAD {
        return Err(FrameError::Corrupt(format!(
            "length {len} exceeds the limit {MAX_PAYLOAD}"
        )));
    }
    let total = header_len + len;
    if bytes.len() < total {
        return Err(FrameError::Incomplete {
            needed: total,
            available: bytes.len(),
        });
    }
    let stored = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes"));
    let mut crc = crc32fast::Hasher::new();
    crc.update(&bytes[4..12]);
    crc.update(&bytes[header_len..total]);
    let actual = crc.finalize();
    if actual != stored {
        return Err(FrameError::Corrupt(format!(
            "checksum mismatch: stored 0x{stored:08x}, computed 0x{actual:08x}"
        )));
    }
    Ok(Checked {
        kind,
        header_len,
        total,
    })
}

/// True when `bytes` can be what a crash left of one frame's write: the start of a header (see
/// `check`), a whole header that checks out with a length past the end, or zeros after at most the
/// start of a header (some file systems leave the unwritten end of a file as zeros). A rotted header
/// of a whole frame is none of these, nor is a whole frame whose payload fails its checksum.
pub fn could_be_torn(bytes: &[u8]) -> bool {
    if matches!(check(bytes), Err(FrameError::Incomplete { .. })) {
        return true;
    }
    let end = bytes.iter().rposition(|b| *b != 0).map_or(0, |p| p + 1);
    let written = &bytes[..end];
    let header_len = if written.get(4) == Some(&1) {
        V1_HEADER_LEN
    } else {
        HEADER_LEN
    };
    // Only a header's start before the zeros: a frame's payload ending in zeros is no torn write.
    written.len() < header_len && matches!(check(written), Err(FrameError::Incomplete { .. }))
}

/// Finds the next position at or after `from` where `MAGIC` appears (for skipping corruption).
pub fn find_magic(bytes: &[u8], from: usize) -> Option<usize> {
    let m = MAGIC.to_le_bytes();
    bytes
        .get(from..)?
        .windows(4)
        .position(|w| w == m)
        .map(|p| p + from)
}

struct BatchOwned(Batch);

impl Encode for Value {
    fn encode<E: Encoder>(&self, e: &mut E) -> Result<(), EncodeError> {
        match self {
            Value::Null => 0u8.encode(e),
            Value::Bool(b) => {
                1u8.encode(e)?;
                b.encode(e)
            }
            Value::Int(i) => {
                2u8.encode(e)?;
                i.encode(e)
            }
            Value::Float(f) => {
                3u8.encode(e)?;
                f.encode(e)
            }
            Value::String(s) => {
                4u8.encode(e)?;
                s.encode(e)
            }
            Value::Bytes(b) => {
                5u8.encode(e)?;
                b.encode(e)
            }
        }
    }
}

/// Reads what bincode writes for a `Vec<u8>` (a varint length, then the bytes), refusing a length
/// longer than the rest of the payload before allocating for it: bincode's own `Vec<u8>` and
/// `String` allocate the claimed length first, so a 20-byte frame could ask for 256 MiB. Frames are
/// decoded from a slice, whose reader can peek; another reader would make this fail, not misread.
fn decode_byte_vec<C, D: Decoder<Context = C>>(d: &mut D) -> Result<Vec<u8>, DecodeError> {
    let len = decode_varint(d)?;
    let len = usize::try_from(len).map_err(|_| DecodeError::OutsideUsizeRange(len))?;
    let bytes = d
        .reader()
        .peek_read(len)
        .ok_or(DecodeError::UnexpectedEnd { additional: len })?
        .to_vec();
    d.reader().consume(len);
    Ok(bytes)
}

/// [`decode_byte_vec`] for a `String`.
fn decode_string<C, D: Decoder<Context = C>>(d: &mut D) -> Result<String, DecodeError> {
    String::from_utf8(decode_byte_vec(d)?).map_err(|e| DecodeError::Utf8 {
        inner: e.utf8_error(),
    })
}

/// bincode's varint `u64` (one byte below 251, else a marker 251/252/253 and a u16/u32/u64),
/// refusing a longer form than the value needs: the encoder always writes the shortest, and a frame
/// must re-encode to the bytes it was read from. bincode's own decoder accepts any form.
fn decode_varint<C, D: Decoder<Context = C>>(d: &mut D) -> Result<u64, DecodeError> {
    let marker = d.reader().peek_read(1).map(|b| b[0]);
    let v = u64::decode(d)?;
    let least = match marker {
        Some(251) => 251,
        Some(252) => 1 << 16,
        Some(253) => 1 << 32,
        _ => 0,
    };
    if v < least {
        return Err(DecodeError::OtherString(format!(
            "varint {v} written in a longer form than it needs"
        )));
    }
    Ok(v)
}

/// bincode's varint `i64` (zigzag), in its shortest form only (see [`decode_varint`]).
fn decode_i64<C, D: Decoder<Context = C>>(d: &mut D) -> Result<i64, DecodeError> {
    let z = decode_varint(d)?;
    Ok(((z >> 1) as i64) ^ -((z & 1) as i64))
}

/// The writer and seq at the start of a payload, read as [`BatchOwned`] reads them.
struct Prefix(String, u64);

impl<C> Decode<C> for Prefix {
    fn decode<D: Decoder<Context = C>>(d: &mut D) -> Result<Self, DecodeError> {
        Ok(Prefix(decode_string(d)?, decode_varint(d)?))
    }
}

impl<C> Decode<C> for Value {
    fn decode<D: Decoder<Context = C>>(d: &mut D) -> Result<Self, DecodeError> {
        Ok(match u8::decode(d)? {
            0 => Value::Null,
            1 => Value::Bool(bool::decode(d)?),
            2 => Value::Int(decode_i64(d)?),
            3 => Value::Float(f64::decode(d)?),
            4 => Value::String(decode_string(d)?),
            5 => Value::Bytes(decode_byte_vec(d)?),
            t => return Err(DecodeError::OtherString(format!("unknown value tag {t}"))),
        })
    }
}

fn encode_map<E: Encoder>(m: &FieldMap, e: &mut E) -> Result<(), EncodeError> {
    (m.len() as u64).encode(e)?;
    for (name, value) in m.iter() {
        name.encode(e)?;
        value.encode(e)?;
    }
    Ok(())
}

fn decode_map<C, D: Decoder<Context = C>>(d: &mut D) -> Result<FieldMap, DecodeError> {
    let n = decode_varint(d)?;
    let mut m = FieldMap::new();
    // A count of more members than bytes runs out of bytes: each member reads at least one.
    for _ in 0..n {
        let name = decode_string(d)?;
        let value = Value::decode(d)?;
        if m.get(&name).is_some() {
            return Err(DecodeError::OtherString(format!(
                "member `{name}` repeated"
            )));
        }
        m.insert(name, value);
    }
    Ok(m)
}

/// A batch as a frame holds it: writer, seq, entry count, then the entries, taken from an iterator (once).
struct PartsRef<'w, I> {
    writer: &'w str,
    seq: u64,
    count: usize,
    entries: std::cell::Cell<Option<I>>,
}

impl<'a, I> Encode for PartsRef<'_, I>
where
    I: Iterator<Item = (&'a crate::OffsetKey, &'a Option<crate::Offset>)>,
{
    fn encode<E: Encoder>(&self, e: &mut E) -> Result<(), EncodeError> {
        self.writer.encode(e)?;
        self.seq.encode(e)?;
        (self.count as u64).encode(e)?;
        let entries = self.entries.take().expect("parts are encoded once");
        encode_entries(entries, e)
    }
}

fn encode_entries<'a, E: Encoder>(
    entries: impl Iterator<Item = (&'a crate::OffsetKey, &'a Option<crate::Offset>)>,
    e: &mut E,
) -> Result<(), EncodeError> {
    for (key, offset) in entries {
        key.namespace().encode(e)?;
        match key.partition() {
            None => 0u8.encode(e)?,
            Some(p) => {
                1u8.encode(e)?;
                encode_map(p, e)?;
            }
        }
        match offset {
            None => 0u8.encode(e)?,
            Some(o) => {
                1u8.encode(e)?;
                encode_map(o, e)?;
            }
        }
    }
    Ok(())
}

impl<C> Decode<C> for BatchOwned {
    fn decode<D: Decoder<Context = C>>(d: &mut D) -> Result<Self, DecodeError> {
        let writer = decode_string(d)?;
        let seq = decode_varint(d)?;
        let n = decode_varint(d)?;
        let mut entries = crate::model::Entries::default();
        for _ in 0..n {
            let namespace = decode_string(d)?;
            let partition = match u8::decode(d)? {
                0 => None,
                1 => Some(decode_map(d)?),
                t => return Err(DecodeError::OtherString(format!("bad partition tag {t}"))),
            };
            let offset = match u8::decode(d)? {
                0 => None,
                1 => Some(decode_map(d)?),
                t => return Err(DecodeError::OtherString(format!("bad offset tag {t}"))),
            };
            let key = OffsetKey::build(namespace, partition);
            if entries.insert(key.clone(), offset).is_some() {
                return Err(DecodeError::OtherString(format!(
                    "key {key:?} repeated in one batch"
                )));
            }
        }
        Ok(BatchOwned(Batch {
            writer,
            seq,
            entries,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Partition;

    fn sample() -> Batch {
        Batch::new(
            "w",
            7,
            [
                (
                    OffsetKey::new("c", Partition::new().with("a", 1).with("b", "x")),
                    Some(FieldMap::new().with("pos", 3.5)),
                ),
                (OffsetKey::null_partition("c"), None),
                (
                    OffsetKey::new("d", Partition::new().with("blob", vec![1u8, 2])),
                    Some(FieldMap::new().with("n", Value::Null)),
                ),
            ],
        )
    }

    #[test]
    fn round_trip_and_every_cut() {
        let mut buf = Vec::new();
        encode(FrameKind::Batch, &sample(), &mut buf);
        let frame = decode(&buf).expect("decodes");
        assert_eq!(frame.batch, sample());
        assert_eq!(frame.len, buf.len());
        for cut in 0..buf.len() {
            assert!(
                matches!(decode(&buf[..cut]), Err(FrameError::Incomplete { .. })),
                "a frame cut at {cut} must read as incomplete"
            );
        }
    }

    #[test]
    fn every_flipped_bit_is_caught() {
        let mut buf = Vec::new();
        encode(FrameKind::Snapshot, &sample(), &mut buf);
        for i in 0..buf.len() * 8 {
            let mut bad = buf.clone();
            bad[i / 8] ^= 1 << (i % 8);
            match decode(&bad) {
                Err(_) => {}
                Ok(f) => panic!("flipping bit {i} went unnoticed: {f:?}"),
            }
        }
    }
    /// A version 1 frame of `batch`, as builds before the header checksum wrote it.
    fn v1_frame(batch: &Batch) -> Vec<u8> {
        let mut v2 = Vec::new();
        encode(FrameKind::Batch, batch, &mut v2);
        let mut out = v2[..V1_HEADER_LEN].to_vec();
        out[4] = 1;
        let mut crc = crc32fast::Hasher::new();
        crc.update(&out[4..12]);
        crc.update(&v2[HEADER_LEN..]);
        out[12..16].copy_from_slice(&crc.finalize().to_le_bytes());
        out.extend_from_slice(&v2[HEADER_LEN..]);
        out
    }

    #[test]
    fn a_rotted_header_is_never_taken_for_a_torn_write() {
        let mut buf = Vec::new();
        encode(FrameKind::Batch, &sample(), &mut buf);
        for i in 0..HEADER_LEN * 8 {
            let mut bad = buf.clone();
            bad[i / 8] ^= 1 << (i % 8);
            assert!(
                matches!(decode(&bad), Err(FrameError::Corrupt(_))),
                "bit {i}: {:?}",
                decode(&bad)
            );
            assert!(!could_be_torn(&bad), "bit {i} of the header looks torn");
        }
    }

    #[test]
    fn what_a_crash_leaves_of_a_write_could_be_torn_and_rot_could_not() {
        let mut buf = Vec::new();
        encode(FrameKind::Batch, &sample(), &mut buf);
        for cut in 0..buf.len() {
            assert!(could_be_torn(&buf[..cut]), "cut at {cut}");
            // The unwritten rest of the file left as zeros, after at most a header's start.
            if cut < HEADER_LEN {
                let mut zeroed = buf.clone();
                zeroed[cut..].fill(0);
                assert!(could_be_torn(&zeroed), "zeros from {cut}");
            }
        }
        assert!(!could_be_torn(&buf), "a whole frame");
        // A payload that ends in zeros after rot is no torn write.
        let mut bad = buf.clone();
        *bad.last_mut().expect("a payload") = 0;
        assert!(!could_be_torn(&bad));
        let mut bad = buf.clone();
        bad[HEADER_LEN + 2] ^= 4;
        assert!(!could_be_torn(&bad));
    }

    #[test]
    fn version_1_frames_still_read() {
        let v1 = v1_frame(&sample());
        let frame = decode(&v1).expect("a version 1 frame decodes");
        assert_eq!(frame.batch, sample());
        assert_eq!(frame.len, v1.len());
        assert_eq!(decode_seq(&v1).expect("and its seq").2, 7);
        for cut in 0..v1.len() {
            assert!(
                matches!(decode(&v1[..cut]), Err(FrameError::Incomplete { .. })),
                "cut at {cut}"
            );
        }
        for i in 0..v1.len() * 8 {
            let mut bad = v1.clone();
            bad[i / 8] ^= 1 << (i % 8);
            assert!(decode(&bad).is_err(), "bit {i} of a version 1 frame");
        }
    }

    /// A batch that fits a frame decodes, however many small values it has: bincode's limit
    /// counts every varint as 8 bytes read, so a frame checked against it would refuse batches a
    /// quarter full of small values (acknowledged, then unreadable at recovery).
    #[test]
    fn a_frame_near_the_limit_of_small_values_decodes() {
        let mut offset = FieldMap::new();
        for m in 0..100 {
            offset.insert(format!("{m:02}"), Value::Int(m));
        }
        let batch = Batch::new(
            "w",
            1,
            (0..150_000i64).map(|i| {
                (
                    OffsetKey::new("c", Partition::new().with("p", i)),
                    Some(offset.clone()),
                )
            }),
        );
        let mut buf = Vec::new();
        try_encode(FrameKind::Batch, &batch, &mut buf).expect("within the limit");
        assert!(buf.len() > MAX_PAYLOAD / 4, "{} bytes", buf.len());
        let frame = decode(&buf).expect("decodes");
        assert_eq!(frame.batch.entries.len(), 150_000);
        let mut snapshot = Vec::new();
        encode_snapshot(&batch, &mut snapshot).expect("within the limit");
        assert_eq!(
            decode(&snapshot).expect("decodes").batch.entries.len(),
            150_000
        );
    }
}
