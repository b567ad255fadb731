//! The JSON Kafka Connect writes for offsets, byte for byte.
//!
//! Connect serializes offset keys and values with `JsonConverter` and `schemas.enable=false`, which is
//! Jackson with its default settings:
//! * compact output, members in the map's iteration order;
//! * integers plain; doubles as Java's `Double.toString` (JDK 19+: the shortest digits that read back
//!   to the same double, the closest of them when two are as short (a tie to the even digit), and the
//!   closest two-digit decimal where one digit would do, so `Double.MIN_VALUE` is `4.9E-324`); plain notation for magnitudes in `[1e-3, 1e7)`, else
//!   `d.dddE±n`; NaN and the infinities as the strings `"NaN"`, `"Infinity"`, `"-Infinity"`;
//! * bytes as padded standard Base64 strings;
//! * in strings `"` and `\` escaped, `\b \t \n \f \r` in short form, other controls below 0x20 as
//!   `\u00XX` with uppercase hex, characters above U+FFFF as escaped surrogate pairs (`\uD83D\uDE00`),
//!   everything else raw UTF-8.
//!
//! JDK 17 spells about 2% of doubles with one digit more; decoding is unaffected, but the key bytes
//! differ, so a Connect worker on JDK 17 sees such a float-keyed partition as another partition. We follow
//! JDK 19+.
//!
//! Decoding accepts what Jackson accepts by default (any JSON whitespace, `\/` and lowercase escapes,
//! leading zeros in numbers); integral numbers become `i64` (an integer outside `i64` is refused rather
//! than truncated as Java's `longValue()` would), others `f64` (a number beyond the range of `f64` is
//! refused rather than read as an infinity, which would be written back as a string). Nested objects or
//! arrays in a partition or offset are refused with an error naming the field.

use base64::Engine as _;

use crate::model::{FieldMap, OffsetKey, Value};
use crate::{Error, Result};

/// Nesting deeper than this is refused before it can exhaust the stack.
const MAX_DEPTH: usize = 64;

// ---------------------------------------------------------------------------------------------------
// Encoding

/// Appends the record key Connect writes: `["namespace",{partition}]` or `["namespace",null]`.
pub fn encode_key(key: &OffsetKey, out: &mut Vec<u8>) {
    out.push(b'[');
    encode_str(key.namespace(), out);
    out.push(b',');
    match key.partition() {
        Some(p) => encode_map(p, out),
        None => out.extend_from_slice(b"null"),
    }
    out.push(b']');
}

/// Appends the record value Connect writes for an offset. A reset is a record with no value at all
/// (a Kafka tombstone), not this function's output.
pub fn encode_value(offset: &FieldMap, out: &mut Vec<u8>) {
    encode_map(offset, out);
}

/// Appends `{"name":value,...}` in insertion order.
pub fn encode_map(map: &FieldMap, out: &mut Vec<u8>) {
    out.push(b'{');
    for (i, (name, value)) in map.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        encode_str(name, out);
        out.push(b':');
        encode_value_item(value, out);
    }
    out.push(b'}');
}

/// Appends the map with its members sorted by name: the structural identity of a partition.
pub(crate) fn encode_map_sorted(map: &FieldMap, out: &mut Vec<u8>) {
    let mut members: Vec<(&str, &Value)> = map.iter().collect();
    members.sort_unstable_by(|a, b| a.0.cmp(b.0));
    out.push(b'{');
    for (i, (name, value)) in members.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        encode_str(name, out);
        out.push(b':');
        encode_value_item(value, out);
    }
    out.push(b'}');
}

fn encode_value_item(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Int(i) => push_int(*i, out),
        Value::Float(f) if f.is_finite() => java_double(*f, out),
        Value::Float(f) => {
            out.push(b'"');
            out.extend_from_slice(non_finite_name(*f).as_bytes());
            out.push(b'"');
        }
        Value::String(s) => encode_str(s, out),
        Value::Bytes(b) => {
            out.push(b'"');
            out.extend_from_slice(base64(b).as_bytes());
            out.push(b'"');
        }
    }
}

/// Appends `i` in decimal: by hand, since `write!` through `fmt` was a tenth of encoding an offset.
fn push_int(i: i64, out: &mut Vec<u8>) {
    let mut digits = [0u8; 20];
    let mut n = i.unsigned_abs();
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if i < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&digits[at..]);
}

/// Jackson's spelling of a non-finite double.
pub(crate) fn non_finite_name(f: f64) -> &'static str {
    if f.is_nan() {
        "NaN"
    } else if f > 0.0 {
        "Infinity"
    } else {
        "-Infinity"
    }
}

/// Padded standard Base64, as Jackson writes `byte[]`.
pub(crate) fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

fn push_u_escape(unit: u16, out: &mut Vec<u8>) {
    out.extend_from_slice(b"\\u");
    for shift in [12, 8, 4, 0] {
        out.push(HEX[usize::from((unit >> shift) & 0xf)]);
    }
}

/// Appends a JSON string with Jackson's escaping.
pub fn encode_str(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    let bytes = s.as_bytes();
    // Names and most values are printable ASCII with nothing to escape: one copy, no char decoding.
    // Checked 64 bytes at a time with no early exit inside, which the compiler runs many at once.
    let plain = |b: u8| (0x20..0x7f).contains(&b) & (b != b'"') & (b != b'\\');
    if bytes
        .chunks(64)
        .all(|c| c.iter().fold(true, |all, &b| all & plain(b)))
    {
        out.extend_from_slice(bytes);
        out.push(b'"');
        return;
    }
    // Byte by byte into reserved room: a string of JSON (history's records) has a quote every few
    // bytes, where copying the runs between escapes costs a call each. What needs escaping is ASCII
    // or a character past U+FFFF, whose UTF-8 is the only kind to start with a byte of 0xF0 or
    // more; the characters in between are copied as they are.
    out.reserve(bytes.len() + bytes.len() / 4 + 1);
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        i += 1;
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x20..0xF0 => out.push(b),
            0x08 => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            0x0C => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0..0x20 => push_u_escape(b as u16, out),
            _ => {
                let ch = s[i - 1..]
                    .chars()
                    .next()
                    .expect("a character starts at a byte that is not a continuation");
                i += ch.len_utf8() - 1;
                let mut units = [0u16; 2];
                for unit in ch.encode_utf16(&mut units) {
                    push_u_escape(*unit, out);
                }
            }
        }
    }
    out.push(b'"');
}

/// Appends a finite double as Java 19+'s `Double.toString` spells it.
pub fn java_double(f: f64, out: &mut Vec<u8>) {
    debug_assert!(f.is_finite());
    if f == 0.0 {
        out.extend_from_slice(if f.is_sign_negative() {
            b"-0.0"
        } else {
            b"0.0"
        });
        return;
    }
    if f < 0.0 {
        out.push(b'-');
    }
    let (digits, exp) = java_digits(f.abs());
    let digits = digits.as_bytes();
    if (-3..7).contains(&exp) {
        if exp < 0 {
            out.extend_from_slice(b"0.");
            out.extend(std::iter::repeat_n(b'0', (-exp - 1) as usize));
            out.extend_from_slice(digits);
        } else {
            let int_len = exp as usize + 1;
            if digits.len() > int_len {
                out.extend_from_slice(&digits[..int_len]);
                out.push(b'.');
                out.extend_from_slice(&digits[int_len..]);
            } else {
                out.extend_from_slice(digits);
                out.extend(std::iter::repeat_n(b'0', int_len - digits.len()));
                out.extend_from_slice(b".0");
            }
        }
    } else {
        out.push(digits[0]);
        out.push(b'.');
        if digits.len() > 1 {
            out.extend_from_slice(&digits[1..]);
        } else {
            out.push(b'0');
        }
        out.push(b'E');
        use std::io::Write as _;
        let _ = write!(out, "{exp}");
    }
}

/// The significant digits (no trailing zeros) and the decimal exponent of the decimal Java picks for a
/// positive finite `f`: among the decimals of the shortest length (but at least two digits) that read
/// back to `f`, the closest to `f`, a tie going to the even last digit.
///
/// Rust's shortest digits have the right length but, in a tie, can be the other candidate:
/// 1573133138417423.25 is `1.5731331384174233e15` to Rust and `1.5731331384174232E15` to Java. The
/// correctly rounded decimal of that length (Rust's exact formatting rounds half to even) is Java's
/// whenever it reads back to `f`.
fn java_digits(f: f64) -> (String, i32) {
    let shortest = format!("{f:e}");
    let (digits, exp) = split_sci(&shortest);
    let len = digits.len().max(2);
    let closest = format!("{f:.*e}", len - 1);
    if closest.parse::<f64>().ok() == Some(f) {
        return split_sci(&closest);
    }
    (digits, exp)
}

/// Splits Rust's `{:e}` output (`1.2345e-7`) into digits without trailing zeros and the exponent.
fn split_sci(s: &str) -> (String, i32) {
    let (mantissa, exp) = s.split_once('e').expect("`{:e}` output has an exponent");
    let mut digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    while digits.len() > 1 && digits.ends_with('0') {
        digits.pop();
    }
    (digits, exp.parse().expect("`{:e}` exponent is an integer"))
}

// ---------------------------------------------------------------------------------------------------
// Decoding

/// A parsed JSON document, members in document order.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    /// `null`
    Null,
    /// `true` / `false`
    Bool(bool),
    /// An integral number within `i64`.
    Int(i64),
    /// A number with a fraction or an exponent.
    Float(f64),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Json>),
    /// An object; a repeated name keeps its first position and its last value, as Jackson does.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// What kind of JSON value this is, for error messages ("an array", "null").
    pub fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Int(_) | Json::Float(_) => "a number",
            Json::String(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        }
    }
}

/// Parses one JSON document (whitespace around it allowed, nothing else after it). A member name
/// given twice in one object keeps its last value, as Jackson reads Connect's records.
pub fn parse(bytes: &[u8]) -> std::result::Result<Json, String> {
    parse_with(bytes, false)
}

/// [`parse`], refusing an object with a member name twice: for what a person wrote, where readers
/// differing on which one wins is a mistake to report, not to resolve.
pub fn parse_strict(bytes: &[u8]) -> std::result::Result<Json, String> {
    parse_with(bytes, true)
}

fn parse_with(bytes: &[u8], strict: bool) -> std::result::Result<Json, String> {
    let mut p = Parser {
        b: bytes,
        i: 0,
        depth: 0,
        strict,
    };
    p.ws();
    let v = p.value()?;
    p.ws();
    if p.i != bytes.len() {
        return Err(format!(
            "unexpected `{}` after the JSON value at byte {}",
            p.peek_desc(),
            p.i
        ));
    }
    Ok(v)
}

/// Decodes a record key: `["namespace",{partition}]` or `["namespace",null]`.
pub fn decode_key(bytes: &[u8]) -> Result<OffsetKey> {
    const WHAT: &str = "offset key";
    let json = parse(bytes).map_err(|r| Error::decode(WHAT, r))?;
    let Json::Array(items) = json else {
        return Err(Error::decode(
            WHAT,
            format!(
                "expected a [connector, partition] array, found {}",
                json.kind()
            ),
        ));
    };
    let [ns, partition]: [Json; 2] = items.try_into().map_err(|items: Vec<Json>| {
        Error::decode(
            WHAT,
            format!(
                "expected a [connector, partition] array of 2 items, found {}",
                items.len()
            ),
        )
    })?;
    let Json::String(namespace) = ns else {
        return Err(Error::decode(
            WHAT,
            format!("the connector name must be a string, found {}", ns.kind()),
        ));
    };
    match partition {
        Json::Null => Ok(OffsetKey::null_partition(namespace)),
        Json::Object(members) => Ok(OffsetKey::new(
            namespace,
            to_map(members, "partition").map_err(|r| Error::decode(WHAT, r))?,
        )),
        other => Err(Error::decode(
            WHAT,
            format!(
                "the partition must be an object or null, found {}",
                other.kind()
            ),
        )),
    }
}

/// Decodes a record value: an offset object, or `None` for JSON `null` (a reset).
pub fn decode_value(bytes: &[u8]) -> Result<Option<FieldMap>> {
    const WHAT: &str = "offset value";
    match parse(bytes).map_err(|r| Error::decode(WHAT, r))? {
        Json::Null => Ok(None),
        Json::Object(members) => Ok(Some(
            to_map(members, "offset").map_err(|r| Error::decode(WHAT, r))?,
        )),
        other => Err(Error::decode(
            WHAT,
            format!(
                "an offset must be an object or null, found {}",
                other.kind()
            ),
        )),
    }
}

/// Checks a record value as [`decode_value`] does, without building the offset: true for an
/// offset object, false for `null` (a reset). For readers that keep the bytes.
pub fn check_value(bytes: &[u8]) -> Result<bool> {
    const WHAT: &str = "offset value";
    match parse(bytes).map_err(|r| Error::decode(WHAT, r))? {
        Json::Null => Ok(false),
        Json::Object(members) => match nested_member(&members, "offset") {
            Some(r) => Err(Error::decode(WHAT, r)),
            None => Ok(true),
        },
        other => Err(Error::decode(
            WHAT,
            format!(
                "an offset must be an object or null, found {}",
                other.kind()
            ),
        )),
    }
}

/// Why `members` cannot be a partition or offset, if one of them is nested.
fn nested_member(members: &[(String, Json)], what: &str) -> Option<String> {
    let (name, nested) = members
        .iter()
        .find(|(_, j)| matches!(j, Json::Array(_) | Json::Object(_)))?;
    Some(format!(
        "field `{name}` of the {what} is {}; Kafka Connect offsets allow only null, boolean, number, string or bytes values",
        nested.kind()
    ))
}

/// Decodes a JSON object of primitive values (a partition or offset given by a user).
pub fn decode_map(bytes: &[u8], what: &'static str) -> Result<FieldMap> {
    match parse(bytes).map_err(|r| Error::decode(what, r))? {
        Json::Object(members) => {
            to_map(members, "map").map_err(|r| Error::InvalidData(format!("{what}: {r}")))
        }
        other => Err(Error::decode(
            what,
            format!("expected an object, found {}", other.kind()),
        )),
    }
}

/// Turns parsed object members into a [`FieldMap`], refusing nested values by field name.
pub fn to_map(members: Vec<(String, Json)>, what: &str) -> std::result::Result<FieldMap, String> {
    if let Some(reason) = nested_member(&members, what) {
        return Err(reason);
    }
    let mut map = FieldMap::new();
    for (name, json) in members {
        let value = match json {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(b),
            Json::Int(i) => Value::Int(i),
            Json::Float(f) => Value::Float(f),
            Json::String(s) => Value::String(s),
            Json::Array(_) | Json::Object(_) => unreachable!("refused above"),
        };
        map.insert(name, value);
    }
    Ok(map)
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
    depth: usize,
    /// Refuse a member name given twice in one object.
    strict: bool,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    fn peek_desc(&self) -> String {
        match self.b.get(self.i) {
            None => "end of input".into(),
            Some(c) if c.is_ascii_graphic() => (*c as char).to_string(),
            Some(c) => format!("byte 0x{c:02x}"),
        }
    }

    fn err<T>(&self, what: &str) -> std::result::Result<T, String> {
        Err(format!(
            "{what} at byte {} (found `{}`)",
            self.i,
            self.peek_desc()
        ))
    }

    fn value(&mut self) -> std::result::Result<Json, String> {
        match self.b.get(self.i) {
            Some(b'{') => self.nested(|p| p.object()),
            Some(b'[') => self.nested(|p| p.array()),
            Some(b'"') => self.string().map(Json::String),
            Some(b't') => self.literal(b"true", Json::Bool(true)),
            Some(b'f') => self.literal(b"false", Json::Bool(false)),
            Some(b'n') => self.literal(b"null", Json::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => self.err("expected a JSON value"),
        }
    }

    fn nested(
        &mut self,
        f: impl FnOnce(&mut Self) -> std::result::Result<Json, String>,
    ) -> std::result::Result<Json, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err(&format!("nesting deeper than {MAX_DEPTH}"));
        }
        let v = f(self);
        self.depth -= 1;
        v
    }

    fn literal(&mut self, word: &[u8], v: Json) -> std::result::Result<Json, String> {
        if self.b[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(v)
        } else {
            self.err("expected true, false or null")
        }
    }

    fn object(&mut self) -> std::result::Result<Json, String> {
        self.i += 1;
        let mut members: Vec<(String, Json)> = Vec::new();
        self.ws();
        if self.b.get(self.i) == Some(&b'}') {
            self.i += 1;
            return Ok(Json::Object(members));
        }
        loop {
            self.ws();
            if self.b.get(self.i) != Some(&b'"') {
                return self.err("expected a member name in quotes");
            }
            let at = self.i;
            let name = self.string()?;
            self.ws();
            if self.b.get(self.i) != Some(&b':') {
                return self.err("expected `:` after a member name");
            }
            self.i += 1;
            self.ws();
            let v = self.value()?;
            match members.iter_mut().find(|(n, _)| *n == name) {
                Some(_) if self.strict => {
                    return Err(format!(
                        "member `{name}` is given twice in one object (the second at byte {at})"
                    ));
                }
                Some(slot) => slot.1 = v,
                None => members.push((name, v)),
            }
            self.ws();
            match self.b.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(Json::Object(members));
                }
                _ => return self.err("expected `,` or `}` in an object"),
            }
        }
    }

    fn array(&mut self) -> std::result::Result<Json, String> {
        self.i += 1;
        let mut items = Vec::new();
        self.ws();
        if self.b.get(self.i) == Some(&b']') {
            self.i += 1;
            return Ok(Json::Array(items));
        }
        loop {
            self.ws();
            items.push(self.value()?);
            self.ws();
            match self.b.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(Json::Array(items));
                }
                _ => return self.err("expected `,` or `]` in an array"),
            }
        }
    }

    fn hex4(&mut self) -> std::result::Result<u16, String> {
        let Some(h) = self.b.get(self.i..self.i + 4) else {
            return self.err("expected 4 hex digits after \\u");
        };
        let s = std::str::from_utf8(h).map_err(|_| format!("bad \\u escape at byte {}", self.i))?;
        let v = u16::from_str_radix(s, 16)
            .map_err(|_| format!("bad \\u escape `{s}` at byte {}", self.i))?;
        if !s.bytes().all(|c| c.is_ascii_hexdigit()) {
            return self.err("expected 4 hex digits after \\u");
        }
        self.i += 4;
        Ok(v)
    }

    fn string(&mut self) -> std::result::Result<String, String> {
        let start = self.i;
        self.i += 1;
        // Bytes, checked as UTF-8 once at the end: JSON inside a string (history's records) has
        // an escape every few bytes, and a check per run between them costs a call each.
        let mut out = Vec::new();
        let push = |out: &mut Vec<u8>, c: char| {
            out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes())
        };
        loop {
            // Copy the run of plain bytes up to the next quote, backslash or control byte.
            let run_start = self.i;
            while let Some(&c) = self.b.get(self.i) {
                if c == b'"' || c == b'\\' || c < 0x20 {
                    break;
                }
                self.i += 1;
            }
            out.extend_from_slice(&self.b[run_start..self.i]);
            match self.b.get(self.i) {
                None => return Err(format!("unterminated string starting at byte {start}")),
                Some(b'"') => {
                    self.i += 1;
                    return String::from_utf8(out).map_err(|_| {
                        // Escapes are ASCII: the input's first bad byte is the string's.
                        let at = std::str::from_utf8(&self.b[start..self.i])
                            .err()
                            .map_or(0, |e| e.valid_up_to());
                        format!("invalid UTF-8 at byte {}", start + at)
                    });
                }
                Some(b'\\') => {
                    self.i += 1;
                    let Some(&e) = self.b.get(self.i) else {
                        return Err(format!("unterminated string starting at byte {start}"));
                    };
                    self.i += 1;
                    match e {
                        b'"' => out.push(b'"'),
                        b'\\' => out.push(b'\\'),
                        b'/' => out.push(b'/'),
                        b'b' => out.push(0x08),
                        b'f' => out.push(0x0C),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let at = self.i - 2;
                            let hi = self.hex4()?;
                            let ch = if (0xD800..0xDC00).contains(&hi) {
                                if self.b.get(self.i..self.i + 2) != Some(b"\\u") {
                                    return Err(format!(
                                        "unpaired surrogate \\u{hi:04X} at byte {at}"
                                    ));
                                }
                                self.i += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return Err(format!(
                                        "unpaired surrogate \\u{hi:04X} at byte {at}"
                                    ));
                                }
                                let c = 0x10000
                                    + ((u32::from(hi) - 0xD800) << 10)
                                    + (u32::from(lo) - 0xDC00);
                                char::from_u32(c)
                            } else if (0xDC00..0xE000).contains(&hi) {
                                None
                            } else {
                                char::from_u32(u32::from(hi))
                            };
                            match ch {
                                Some(c) => push(&mut out, c),
                                None => {
                                    return Err(format!(
                                        "unpaired surrogate \\u{hi:04X} at byte {at}"
                                    ));
                                }
                            }
                        }
                        _ => {
                            self.i -= 1;
                            return self.err("unknown escape in a string");
                        }
                    }
                }
                Some(_) => return self.err("unescaped control character in a string"),
            }
        }
    }

    fn number(&mut self) -> std::result::Result<Json, String> {
        let start = self.i;
        if self.b.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        let int_start = self.i;
        while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        if self.i == int_start {
            return self.err("expected a digit");
        }
        // Jackson's ObjectMapper (Connect's REST bodies) refuses `01`; its JsonConverter reading
        // records takes it, so only what a person wrote is held to it.
        if self.strict && self.i - int_start > 1 && self.b[int_start] == b'0' {
            self.i = int_start;
            return self.err("a number with a leading zero");
        }
        let mut integral = true;
        if self.b.get(self.i) == Some(&b'.') {
            integral = false;
            self.i += 1;
            let frac = self.i;
            while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
                self.i += 1;
            }
            if self.i == frac {
                return self.err("expected a digit after the decimal point");
            }
        }
        if let Some(b'e' | b'E') = self.b.get(self.i) {
            integral = false;
            self.i += 1;
            if let Some(b'+' | b'-') = self.b.get(self.i) {
                self.i += 1;
            }
            let exp = self.i;
            while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
                self.i += 1;
            }
            if self.i == exp {
                return self.err("expected a digit in the exponent");
            }
        }
        let text = std::str::from_utf8(&self.b[start..self.i]).expect("digits and signs are ASCII");
        if integral {
            text.parse::<i64>().map(Json::Int).map_err(|_| {
                format!("integer {text} at byte {start} does not fit a 64-bit offset value (Kafka Connect's INT64)")
            })
        } else {
            match text.parse::<f64>() {
                Ok(f) if f.is_finite() => Ok(Json::Float(f)),
                // An infinity would be written back as the string "Infinity": refused, as an
                // integer outside i64 is, rather than changed.
                Ok(_) => Err(format!(
                    "number {text} at byte {start} is beyond the range of a double"
                )),
                Err(_) => Err(format!(
                    "number {text} at byte {start} is not a valid double"
                )),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(f: f64) -> String {
        let mut out = Vec::new();
        java_double(f, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn only_the_strict_parse_refuses_leading_zeros() {
        for text in [&b"01"[..], b"-01", b"00.5", b"{\"p\":007}"] {
            assert!(
                parse_strict(text).is_err(),
                "{}",
                String::from_utf8_lossy(text)
            );
            assert!(parse(text).is_ok(), "{}", String::from_utf8_lossy(text));
        }
        for text in [&b"0"[..], b"-0", b"0.5", b"0e3", b"10", b"-0.01"] {
            assert!(
                parse_strict(text).is_ok(),
                "{}",
                String::from_utf8_lossy(text)
            );
        }
    }

    #[test]
    fn integers_spelled_as_fmt_does() {
        let mut edges = vec![
            0,
            1,
            -1,
            9,
            10,
            -10,
            99,
            100,
            i64::MAX,
            i64::MIN,
            i64::MIN + 1,
        ];
        edges.extend(
            (0..19)
                .map(|p| 10i64.pow(p))
                .flat_map(|n| [n - 1, n, -n, 1 - n]),
        );
        for i in edges {
            let mut out = Vec::new();
            push_int(i, &mut out);
            assert_eq!(String::from_utf8(out).unwrap(), i.to_string());
        }
    }

    #[test]
    #[allow(clippy::excessive_precision)]
    fn java_double_spelling() {
        // Java 19+ Double.toString for each.
        let cases = [
            (0.1, "0.1"),
            (3.0, "3.0"),
            (1e20, "1.0E20"),
            (1e-5, "1.0E-5"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (0.001, "0.001"),
            (0.0001, "1.0E-4"),
            (1234567.0, "1234567.0"),
            (12345678.0, "1.2345678E7"),
            (1e7, "1.0E7"),
            (9999999.0, "9999999.0"),
            (100.0, "100.0"),
            (123.456, "123.456"),
            (-1.5, "-1.5"),
            (f64::MAX, "1.7976931348623157E308"),
            (f64::MIN_POSITIVE, "2.2250738585072014E-308"),
            (5e-324, "4.9E-324"),
            (1e23, "1.0E23"),
            (2e23, "2.0E23"),
            (0.3, "0.3"),
            (1.0 / 3.0, "0.3333333333333333"),
            // Two shortest candidates equally close: Java takes the even last digit.
            (1573133138417423.25, "1.5731331384174232E15"),
            (225525798402858.125, "2.2552579840285812E14"),
        ];
        for (f, want) in cases {
            assert_eq!(d(f), want, "{f:e}");
        }
    }

    #[test]
    fn integer_bounds() {
        for i in [0, -1, 9, 10, -10, i64::MAX, i64::MIN] {
            let mut out = Vec::new();
            push_int(i, &mut out);
            assert_eq!(String::from_utf8(out).unwrap(), i.to_string());
        }
    }

    #[test]
    fn invalid_utf8_is_named_at_its_byte_after_escapes() {
        let e = decode_map(b"{\"k\":\"ab\\\"c\xffd\"}", "offset value").unwrap_err();
        assert!(e.to_string().contains("invalid UTF-8 at byte 11"), "{e}");
        let ok = decode_map("{\"k\":\"a\\\"é\\u00e9\"}".as_bytes(), "offset value").unwrap();
        assert_eq!(
            ok.get("k"),
            Some(&crate::model::Value::String("a\"éé".into()))
        );
    }

    #[test]
    fn string_escapes() {
        let mut out = Vec::new();
        encode_str(
            "a\"b\\c\u{8}\t\n\u{c}\r\u{1}\u{1f}\u{7f}/é\u{2028}😀",
            &mut out,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\"a\\\"b\\\\c\\b\\t\\n\\f\\r\\u0001\\u001F\u{7f}/é\u{2028}\\uD83D\\uDE00\""
        );
    }

    proptest::proptest! {
        #[test]
        fn integers_are_spelled_as_rust_and_java_spell_them(i in proptest::prelude::any::<i64>()) {
            let mut out = Vec::new();
            push_int(i, &mut out);
            proptest::prop_assert_eq!(String::from_utf8(out).unwrap(), i.to_string());
        }

        /// The byte scan escapes exactly what a character-by-character one does.
        #[test]
        fn string_escapes_match_a_scan_by_characters(s in "(\\PC|[\u{0}-\u{1f}\"\\\\]){0,40}") {
            let mut want = vec![b'"'];
            for ch in s.chars() {
                match ch {
                    '"' | '\\' | '\u{8}' | '\t' | '\n' | '\u{c}' | '\r' => {
                        let mut one = Vec::new();
                        encode_str(ch.encode_utf8(&mut [0; 4]), &mut one);
                        want.extend_from_slice(&one[1..one.len() - 1]);
                    }
                    _ if (ch as u32) < 0x20 || (ch as u32) > 0xFFFF => {
                        for unit in ch.encode_utf16(&mut [0; 2]) {
                            push_u_escape(*unit, &mut want);
                        }
                    }
                    _ => want.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes()),
                }
            }
            want.push(b'"');
            let mut got = Vec::new();
            encode_str(&s, &mut got);
            proptest::prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn every_ascii_char_alone_in_plain_text_round_trips() {
        // Plain ASCII takes a shortcut: one char to escape among plain ones must still be escaped.
        for c in (0u8..0x80).map(char::from) {
            let text = format!("plain {c} text");
            let mut out = Vec::new();
            encode_value(&FieldMap::new().with("k", text.as_str()), &mut out);
            let back = decode_value(&out).unwrap().unwrap();
            assert_eq!(back.get("k"), Some(&Value::String(text)), "{c:?}");
        }
        let mut out = Vec::new();
        encode_str("a\"b\\c", &mut out);
        assert_eq!(out, b"\"a\\\"b\\\\c\"");
    }

    #[test]
    fn non_finite_and_bytes() {
        let m = FieldMap::new()
            .with("nan", f64::NAN)
            .with("inf", f64::INFINITY)
            .with("ninf", f64::NEG_INFINITY)
            .with("b", vec![0u8, 255, 7]);
        assert_eq!(
            m.to_json(),
            r#"{"nan":"NaN","inf":"Infinity","ninf":"-Infinity","b":"AP8H"}"#
        );
    }

    #[test]
    fn decoding_tolerates_jackson_variants() {
        let m = decode_map(
            b" { \"a\" : 007 , \"b\":\"\\u00e9\\/\" , \"c\": 1.5e2, \"a\": 8 } ",
            "test",
        )
        .unwrap();
        assert_eq!(
            m.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
        assert_eq!(m.get("a"), Some(&Value::Int(8)));
        assert_eq!(m.get("b"), Some(&Value::String("é/".into())));
        assert_eq!(m.get("c"), Some(&Value::Float(150.0)));
    }

    #[test]
    fn errors_name_the_problem() {
        let e = decode_map(br#"{"pos":{"x":1}}"#, "offset")
            .unwrap_err()
            .to_string();
        assert!(e.contains("field `pos`") && e.contains("an object"), "{e}");
        let e = decode_map(br#"{"pos":[1]}"#, "offset")
            .unwrap_err()
            .to_string();
        assert!(e.contains("field `pos`") && e.contains("an array"), "{e}");
        let e = decode_key(br#"["c",{"a":1}"#).unwrap_err().to_string();
        assert!(e.contains("offset key") && e.contains("byte 12"), "{e}");
        let e = decode_key(br#"["c",{"a":1},3]"#).unwrap_err().to_string();
        assert!(e.contains("2 items"), "{e}");
        let e = decode_key(br#"[1,{"a":1}]"#).unwrap_err().to_string();
        assert!(e.contains("connector name must be a string"), "{e}");
        let e = decode_value(b"{\"a\":99999999999999999999}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not fit"), "{e}");
        let e = decode_value(b"{\"a\":\"\\uD800\"}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unpaired surrogate"), "{e}");
        let e = decode_value(b"{\"a\":\"x\x01\"}").unwrap_err().to_string();
        assert!(e.contains("control character"), "{e}");
        let e = decode_value(b"[").unwrap_err().to_string();
        assert!(
            e.contains("expected a JSON value") || e.contains("end of input"),
            "{e}"
        );
        let deep = "[".repeat(100_000);
        assert!(parse(deep.as_bytes()).unwrap_err().contains("nesting"));
    }

    #[test]
    fn key_shapes() {
        let k = decode_key(br#"["c",null]"#).unwrap();
        assert_eq!(k.partition(), None);
        assert_eq!(k.connect_key(), br#"["c",null]"#);
        let k = decode_key(br#"["local-file-source",{"filename":"/tmp/test.txt"}]"#).unwrap();
        assert_eq!(k.namespace(), "local-file-source");
        assert_eq!(
            k.connect_key(),
            br#"["local-file-source",{"filename":"/tmp/test.txt"}]"#
        );
    }
}
