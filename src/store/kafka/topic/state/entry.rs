//! The entry codec: every live form of one structural key in one allocation ([`Entry`]), read
//! in place wherever its bytes are ([`View`]: its own allocation, or a snapshot's body).

/// Where a record sits and when it was written: its record timestamp (milliseconds, `-1` when the
/// record has none), its topic partition and its offset there. Ordered by timestamp, then topic
/// partition, then offset: of several live forms of one key, the greatest is the newest (why:
/// `docs/design.md`, section "One structural key, several record keys").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Stamp {
    pub timestamp: i64,
    pub partition: i32,
    pub offset: i64,
}

impl Stamp {
    /// The offset of a record we committed ourselves and have not read back yet: after every record
    /// read so far from its partition (the reader reads it back later, with its real offset).
    pub(crate) const UNREAD: i64 = i64::MAX;
}

/// One record form of a structural key, as [`Entry`] holds it: where and when the record was
/// written, its exact key bytes (`None`: the canonical spelling, `["<namespace>",<canonical>]`,
/// not stored again) and its offset's JSON as the record holds it.
#[derive(Clone, Copy)]
pub(super) struct Form<'a> {
    pub(super) stamp: Stamp,
    pub(super) raw: Option<&'a [u8]>,
    pub(super) value: &'a [u8],
}

/// Every live form of one structural key in one allocation, the current (newest) form first;
/// decoded only on lookup (a load makes one entry per key: decoded keys and values took several
/// allocations each, and a map of them several times their bytes):
///
/// ```text
/// u32 LE  canonical partition length
/// ...     canonical partition JSON (a key's structural identity without the namespace)
/// per form, the current one first (v = LEB128 varint, z = zigzag varint):
///   z record timestamp, z topic partition, z offset in it
///   v record key length + 1, or 0 for the canonical spelling (not stored again)
///   ...    record key bytes
///   v offset JSON length
///   ...    offset JSON
/// ```
///
/// Looked up by the canonical partition alone ([`Keys`](super::Keys)), the bytes an [`OffsetKey`](crate::OffsetKey) already
/// carries. Varints: fixed-width stamps and lengths were 28 bytes a
/// form, a quarter of a small offset's entry.
pub(crate) struct Entry(pub(super) Box<[u8]>);

pub(super) fn put_varint(mut n: u64, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

pub(super) fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

pub(super) fn varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at)?;
        *at += 1;
        n |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(n);
        }
    }
    None
}

pub(super) fn signed(b: &[u8], at: &mut usize) -> Option<i64> {
    let z = varint(b, at)?;
    Some((z >> 1) as i64 ^ -((z & 1) as i64))
}

pub(super) fn slice<'a>(b: &'a [u8], at: &mut usize, n: u64) -> Option<&'a [u8]> {
    let end = at.checked_add(usize::try_from(n).ok()?)?;
    let s = b.get(*at..end)?;
    *at = end;
    Some(s)
}

/// The form at `*at` of an entry's bytes `b`; `None` when the bytes do not hold one.
pub(super) fn parse_form<'a>(b: &'a [u8], at: &mut usize) -> Option<Form<'a>> {
    let stamp = Stamp {
        timestamp: signed(b, at)?,
        partition: i32::try_from(signed(b, at)?).ok()?,
        offset: signed(b, at)?,
    };
    let raw = match varint(b, at)? {
        0 => None,
        n => Some(slice(b, at, n - 1)?),
    };
    let n = varint(b, at)?;
    let value = slice(b, at, n)?;
    Some(Form { stamp, raw, value })
}

impl Entry {
    pub(super) fn build(canonical: &[u8], current: &Form<'_>, shadowed: &[Form<'_>]) -> Entry {
        thread_local! {
            static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        // Built in a reused buffer and copied once: growing (or shrinking) the entry's own
        // allocation to its size was a realloc a key.
        SCRATCH.with_borrow_mut(|b| {
            b.clear();
            Self::write(canonical, current, shadowed, b);
            Entry(Box::from(&b[..]))
        })
    }

    /// Appends the bytes of the entry [`build`](Entry::build) makes to `b`.
    pub(super) fn write(
        canonical: &[u8],
        current: &Form<'_>,
        shadowed: &[Form<'_>],
        b: &mut Vec<u8>,
    ) {
        let forms = std::iter::once(current).chain(shadowed);
        b.extend_from_slice(&(canonical.len() as u32).to_le_bytes());
        b.extend_from_slice(canonical);
        for f in forms {
            put_varint(zigzag(f.stamp.timestamp), b);
            put_varint(zigzag(i64::from(f.stamp.partition)), b);
            put_varint(zigzag(f.stamp.offset), b);
            match f.raw {
                None => b.push(0),
                Some(raw) => {
                    put_varint(raw.len() as u64 + 1, b);
                    b.extend_from_slice(raw);
                }
            }
            put_varint(f.value.len() as u64, b);
            b.extend_from_slice(f.value);
        }
    }

    /// An entry from its bytes (as [`View::bytes`] gives them), or `None` when they are not
    /// one: every form is parsed here, so no later access can fail.
    pub(crate) fn from_bytes(bytes: Box<[u8]>) -> Option<Entry> {
        valid(&bytes).then_some(Entry(bytes))
    }

    pub(super) fn view(&self) -> View<'_> {
        View(&self.0)
    }
}

/// Whether `bytes` are an entry's (a canonical partition and at least one form).
pub(crate) fn valid(bytes: &[u8]) -> bool {
    let Some(len) = bytes.get(..4) else {
        return false;
    };
    let len = u32::from_le_bytes(len.try_into().expect("4 bytes"));
    let mut at = 4;
    if slice(bytes, &mut at, u64::from(len)).is_none() || at == bytes.len() {
        return false;
    }
    while at < bytes.len() {
        if parse_form(bytes, &mut at).is_none() {
            return false;
        }
    }
    true
}

/// An entry's bytes wherever they are: an [`Entry`] of its own, or in a snapshot's body.
#[derive(Clone, Copy)]
pub(crate) struct View<'a>(pub(super) &'a [u8]);

impl<'a> View<'a> {
    pub(crate) fn bytes(self) -> &'a [u8] {
        self.0
    }

    pub(super) fn canonical(self) -> &'a [u8] {
        let len = u32::from_le_bytes(self.0[..4].try_into().expect("4 bytes")) as usize;
        &self.0[4..4 + len]
    }

    /// The forms, the current one first.
    pub(super) fn forms(self) -> impl Iterator<Item = Form<'a>> {
        let b = self.0;
        let mut at = 4 + self.canonical().len();
        // Every entry was built by `build` or checked by `valid`.
        std::iter::from_fn(move || (at < b.len()).then(|| parse_form(b, &mut at).expect("a form")))
    }

    pub(super) fn current(self) -> Form<'a> {
        self.forms().next().expect("an entry has a form")
    }
}

/// The bytes of the entry whose length prefix is at `at` in a snapshot's bytes `base` (as the
/// file holds it: u32 LE length, then the entry), if they are all there.
pub(super) fn framed(base: &[u8], at: u32) -> Option<&[u8]> {
    let at = at as usize;
    let len = u32::from_le_bytes(base.get(at..at.checked_add(4)?)?.try_into().ok()?) as usize;
    base.get(at + 4..(at + 4).checked_add(len)?)
}

/// The entry at `at` in `base`, one [`Keys::index`](super::Keys::index) checked.
pub(super) fn based(base: &[u8], at: u32) -> View<'_> {
    View(framed(base, at).expect("an indexed entry"))
}
