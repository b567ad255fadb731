//! Typed fuzz inputs: mirror types that derive [`Arbitrary`] and turn into the case types of
//! `connect_offsets::internal::fuzz_checks`, which hold every check. The targets in `fuzz_targets/` call
//! [`wal_case`] and [`roundtrip_case`] on the bytes libFuzzer gives them; `export_regression` calls
//! the same functions to store a crash as a canonical case the main crate's tests can replay.

use arbitrary::{Arbitrary, Unstructured};
use connect_offsets::internal::fuzz_checks::{CaseFile, CaseFileKind, RoundtripCase, WalCase};
use connect_offsets::internal::wal::frame::{self, FrameKind};
use connect_offsets::{Batch, FieldMap, OffsetKey, Value};

/// At most this many files in a log directory.
const MAX_FILES: usize = 6;
/// At most this many frames in a file built from frames.
const MAX_FRAMES: usize = 8;
/// At most this many entries in a batch or a roundtrip case.
const MAX_ENTRIES: usize = 8;
/// At most this many members in a partition or offset.
const MAX_MEMBERS: usize = 8;
/// At most this many edits of a file built from frames.
const MAX_EDITS: usize = 4;

/// Reads a `wal_recovery` case from libFuzzer's bytes (`None` when `arbitrary` cannot).
pub fn wal_case(data: &[u8]) -> Option<WalCase> {
    WalInput::arbitrary_take_rest(Unstructured::new(data))
        .ok()
        .map(|i| i.case())
}

/// Reads a `connect_roundtrip` case from libFuzzer's bytes (`None` when `arbitrary` cannot).
pub fn roundtrip_case(data: &[u8]) -> Option<RoundtripCase> {
    RoundtripInput::arbitrary_take_rest(Unstructured::new(data))
        .ok()
        .map(|i| i.case())
}

// ---------------------------------------------------------------------------------------------------
// Values, maps, keys

/// A member name: mostly from a small set, so names repeat (replacement, sorting, collisions).
#[derive(Arbitrary, Debug, Clone)]
pub enum NameSpec {
    /// One of a few common names.
    Common(u8),
    /// Any string.
    Any(String),
}

const COMMON_NAMES: [&str; 8] = ["", "a", "b", "pos", "file", "offset", "\u{0}", "é\"\\😀"];

impl NameSpec {
    fn name(&self) -> String {
        match self {
            NameSpec::Common(i) => COMMON_NAMES[usize::from(*i) % COMMON_NAMES.len()].to_string(),
            NameSpec::Any(s) => s.clone(),
        }
    }
}

/// A double chosen to reach every spelling Java's `Double.toString` has.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum FloatSpec {
    /// Any bits.
    Bits(u64),
    /// `mantissa × 10^exp`: around the switch between plain and E notation.
    Decimal {
        /// Digits.
        mantissa: i32,
        /// Decimal exponent.
        exp: i8,
    },
    /// NaN, the infinities, ±0, the extremes, subnormals.
    Special(u8),
}

impl FloatSpec {
    fn value(self) -> f64 {
        match self {
            FloatSpec::Bits(b) => f64::from_bits(b),
            FloatSpec::Decimal { mantissa, exp } => {
                f64::from(mantissa) * 10f64.powi(i32::from(exp) % 40)
            }
            FloatSpec::Special(i) => [
                f64::NAN,
                f64::INFINITY,
                f64::NEG_INFINITY,
                0.0,
                -0.0,
                f64::MAX,
                f64::MIN,
                f64::MIN_POSITIVE,
                5e-324,
                1e-3,
                1e7,
                9_999_999.999_999_998,
                0.1,
                1e23,
                -1.0,
                2f64.powi(53),
            ][usize::from(i) % 16],
        }
    }
}

/// A value of a partition or offset.
#[derive(Arbitrary, Debug, Clone)]
pub enum ValueSpec {
    /// `null`
    Null,
    /// A boolean.
    Bool(bool),
    /// Any `i64`.
    Int(i64),
    /// A small integer (small numbers are the common case).
    Small(i8),
    /// A double.
    Float(FloatSpec),
    /// A string.
    String(String),
    /// Raw bytes.
    Bytes(Vec<u8>),
}

impl ValueSpec {
    fn value(&self) -> Value {
        match self {
            ValueSpec::Null => Value::Null,
            ValueSpec::Bool(b) => Value::Bool(*b),
            ValueSpec::Int(i) => Value::Int(*i),
            ValueSpec::Small(i) => Value::Int(i64::from(*i)),
            ValueSpec::Float(f) => Value::Float(f.value()),
            ValueSpec::String(s) => Value::String(s.clone()),
            ValueSpec::Bytes(b) => Value::Bytes(b.clone()),
        }
    }
}

/// A partition or offset map (a repeated name replaces the earlier value).
#[derive(Arbitrary, Debug, Clone)]
pub struct MapSpec(pub Vec<(NameSpec, ValueSpec)>);

impl MapSpec {
    fn map(&self) -> FieldMap {
        let mut m = FieldMap::new();
        for (n, v) in self.0.iter().take(MAX_MEMBERS) {
            m.insert(n.name(), v.value());
        }
        m
    }
}

/// A key and its offset (`None`: a reset).
#[derive(Arbitrary, Debug, Clone)]
pub struct EntrySpec {
    /// The connector name.
    pub namespace: NameSpec,
    /// The partition (`None`: Connect's null partition).
    pub partition: Option<MapSpec>,
    /// The offset.
    pub offset: Option<MapSpec>,
}

impl EntrySpec {
    fn entry(&self) -> (OffsetKey, Option<FieldMap>) {
        let ns = self.namespace.name();
        let key = match &self.partition {
            Some(p) => OffsetKey::new(ns, p.map()),
            None => OffsetKey::null_partition(ns),
        };
        (key, self.offset.as_ref().map(MapSpec::map))
    }
}

// ---------------------------------------------------------------------------------------------------
// connect_roundtrip

/// The `connect_roundtrip` input.
#[derive(Arbitrary, Debug, Clone)]
pub struct RoundtripInput {
    /// Keys and offsets.
    pub entries: Vec<EntrySpec>,
}

impl RoundtripInput {
    /// The case it stands for.
    pub fn case(&self) -> RoundtripCase {
        RoundtripCase {
            entries: self
                .entries
                .iter()
                .take(MAX_ENTRIES)
                .map(EntrySpec::entry)
                .collect(),
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// wal_recovery

/// The `wal_recovery` input: the files of a log directory.
#[derive(Arbitrary, Debug, Clone)]
pub struct WalInput {
    /// A writer and the seq through which the store holds its batches.
    pub skip: Option<(NameSpec, SeqSpec)>,
    /// The files (at most six are used).
    pub files: Vec<FileSpec>,
}

/// A batch seq: mostly small, so skips and batches meet.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum SeqSpec {
    /// 0..=15
    Small(u8),
    /// Any.
    Any(u64),
}

impl SeqSpec {
    fn seq(self) -> u64 {
        match self {
            SeqSpec::Small(s) => u64::from(s % 16),
            SeqSpec::Any(s) => s,
        }
    }
}

/// What kind of file.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum KindSpec {
    /// A log segment.
    Segment,
    /// A snapshot.
    Snapshot,
    /// An unfinished snapshot (`.tmp`).
    Unfinished,
    /// A name recovery ignores.
    Other,
}

/// A generation: mostly small, so files sort among each other and names collide.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum GenSpec {
    /// 0..=7
    Small(u8),
    /// Any.
    Any(u64),
}

/// One file.
#[derive(Arbitrary, Debug, Clone)]
pub struct FileSpec {
    /// Its kind.
    pub kind: KindSpec,
    /// Its generation.
    pub generation: GenSpec,
    /// Its contents.
    pub content: ContentSpec,
}

/// The contents of a file.
#[derive(Arbitrary, Debug, Clone)]
pub enum ContentSpec {
    /// Any bytes.
    Raw(Vec<u8>),
    /// Valid frames, concatenated, then edited.
    Frames {
        /// The frames.
        frames: Vec<FrameSpec>,
        /// Cuts, bit flips and the like, applied in order.
        edits: Vec<EditSpec>,
    },
}

/// One frame.
#[derive(Arbitrary, Debug, Clone)]
pub struct FrameSpec {
    /// One in eight is of the other kind than its file holds (a snapshot frame in a segment, a
    /// batch frame as a snapshot).
    pub other_kind: u8,
    /// The writer.
    pub writer: NameSpec,
    /// The batch seq.
    pub seq: SeqSpec,
    /// The entries.
    pub entries: Vec<EntrySpec>,
}

/// A change to a file's bytes (positions wrap around the length).
#[derive(Arbitrary, Debug, Clone)]
pub enum EditSpec {
    /// Keep only the first `n` bytes (a torn write).
    Cut(u16),
    /// Flip one bit.
    Flip {
        /// Byte.
        at: u16,
        /// Bit.
        bit: u8,
    },
    /// Zero some bytes (a preallocated or rotted region).
    Zero {
        /// First byte.
        at: u16,
        /// How many.
        len: u8,
    },
    /// Insert bytes.
    Insert {
        /// Where.
        at: u16,
        /// What.
        bytes: Vec<u8>,
    },
    /// Append a copy of a range of the file itself (a frame written twice, a stale tail).
    Repeat {
        /// First byte.
        at: u16,
        /// How many.
        len: u16,
    },
    /// Append the bytes of the previous file (the same frames in two segments).
    AppendPrevious,
}

impl WalInput {
    /// The case it stands for.
    pub fn case(&self) -> WalCase {
        let mut files: Vec<CaseFile> = Vec::new();
        for spec in self.files.iter().take(MAX_FILES) {
            let bytes = match &spec.content {
                ContentSpec::Raw(b) => b.clone(),
                ContentSpec::Frames { frames, edits } => {
                    let mut b = Vec::new();
                    for f in frames.iter().take(MAX_FRAMES) {
                        let batch = Batch::new(
                            f.writer.name(),
                            f.seq.seq(),
                            f.entries.iter().take(MAX_ENTRIES).map(EntrySpec::entry),
                        );
                        let snapshot =
                            matches!(spec.kind, KindSpec::Snapshot | KindSpec::Unfinished);
                        let kind = if snapshot == (f.other_kind % 8 != 0) {
                            FrameKind::Snapshot
                        } else {
                            FrameKind::Batch
                        };
                        frame::encode(kind, &batch, &mut b);
                    }
                    for e in edits.iter().take(MAX_EDITS) {
                        edit(&mut b, e, files.last().map(|f| &f.bytes[..]));
                    }
                    b
                }
            };
            files.push(CaseFile {
                kind: match spec.kind {
                    KindSpec::Segment => CaseFileKind::Segment,
                    KindSpec::Snapshot => CaseFileKind::Snapshot,
                    KindSpec::Unfinished => CaseFileKind::Unfinished,
                    KindSpec::Other => CaseFileKind::Other,
                },
                generation: match spec.generation {
                    GenSpec::Small(g) => u64::from(g % 8),
                    GenSpec::Any(g) => g,
                },
                bytes,
            });
        }
        WalCase {
            files,
            skip: self.skip.as_ref().map(|(w, s)| (w.name(), s.seq())),
        }
    }
}

fn edit(b: &mut Vec<u8>, e: &EditSpec, previous: Option<&[u8]>) {
    let at = |p: u16, len: usize| usize::from(p) % (len + 1);
    match e {
        EditSpec::Cut(n) => {
            let n = at(*n, b.len());
            b.truncate(n);
        }
        EditSpec::Flip { at: p, bit } => {
            if !b.is_empty() {
                let i = usize::from(*p) % b.len();
                b[i] ^= 1 << (bit % 8);
            }
        }
        EditSpec::Zero { at: p, len } => {
            let start = at(*p, b.len());
            let end = (start + usize::from(*len)).min(b.len());
            b[start..end].fill(0);
        }
        EditSpec::Insert { at: p, bytes } => {
            let i = at(*p, b.len());
            b.splice(i..i, bytes.iter().copied().take(64));
        }
        EditSpec::Repeat { at: p, len } => {
            let start = at(*p, b.len());
            let end = (start + usize::from(*len)).min(b.len());
            let copy = b[start..end].to_vec();
            b.extend_from_slice(&copy);
        }
        EditSpec::AppendPrevious => {
            if let Some(p) = previous {
                b.extend_from_slice(p);
            }
        }
    }
}
