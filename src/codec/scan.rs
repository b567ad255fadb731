//! Reading plain offset records without building them, for loaders that keep the bytes.
//!
//! Almost every record of an offsets topic is plain: compact JSON, printable ASCII, no escapes, no
//! floats, members already in the order [`OffsetKey::id`](crate::OffsetKey::id) sorts them. For
//! such a key the canonical partition bytes *are* the record's bytes, so a cold load needs no
//! allocation a record (decoding into an [`OffsetKey`](crate::OffsetKey) and dropping it again was
//! a fifth of its time). Anything else answers `None`, and the caller decodes in full: these
//! functions accept a subset of what [`super::json`] accepts and never disagree with it (the
//! `connect_decode` fuzz target checks that).

/// A plain record key `["<connector>",{...}]` or `["<connector>",null]`: the connector name and
/// the canonical partition bytes (members strictly in byte order, each value plain), both slices
/// of `key`. `None` when the key is not plain (not necessarily invalid).
pub(crate) fn key(key: &[u8]) -> Option<(&str, &[u8])> {
    let rest = key.strip_prefix(b"[")?.strip_suffix(b"]")?;
    let ns_len = string_len(rest)?;
    let namespace = &rest[1..ns_len - 1];
    let partition = rest[ns_len..].strip_prefix(b",")?;
    if partition != b"null" && !members(partition, true)? {
        return None;
    }
    // Printable ASCII throughout, so the name is UTF-8.
    Some((std::str::from_utf8(namespace).ok()?, partition))
}

/// A plain record value: `Some(true)` for a flat object of plain values, `Some(false)` for `null`
/// (a reset), `None` when the value is not plain (decode it in full).
pub(crate) fn value(value: &[u8]) -> Option<bool> {
    if value == b"null" {
        return Some(false);
    }
    members(value, false).map(|_| true)
}

/// The length of the plain string `b` starts with, quotes included: printable ASCII, no `"` or
/// `\` inside.
fn string_len(b: &[u8]) -> Option<usize> {
    if b.first() != Some(&b'"') {
        return None;
    }
    let end = 1 + b[1..].iter().position(|&c| c == b'"')?;
    b[1..end]
        .iter()
        .all(|&c| (0x20..0x7f).contains(&c) && c != b'\\')
        .then_some(end + 1)
}

/// Whether `b` is exactly a flat object of plain members `{"name":value,...}`: `None` when it is
/// not; `Some(sorted)` says whether the names are strictly increasing. A key's partition
/// (`in_key`) must be sorted and canonical (`None` at once otherwise); a value may have its members
/// in any order, repeated, and decimals.
fn members(b: &[u8], in_key: bool) -> Option<bool> {
    let inner = b.strip_prefix(b"{")?.strip_suffix(b"}")?;
    if inner.is_empty() {
        return Some(true);
    }
    let mut sorted = true;
    let mut previous: &[u8] = &[];
    let mut at = 0;
    loop {
        let name_len = string_len(&inner[at..])?;
        let name = &inner[at + 1..at + name_len - 1];
        if at > 0 && name <= previous {
            if in_key {
                return None;
            }
            sorted = false;
        }
        previous = name;
        at += name_len;
        if inner.get(at) != Some(&b':') {
            return None;
        }
        at += 1;
        at += plain_value_len(&inner[at..], in_key)?;
        match inner.get(at) {
            None => return Some(sorted),
            Some(b',') => at += 1,
            Some(_) => return None,
        }
    }
}

/// The length of the plain value `b` starts with: a plain string, `true`, `false`, `null`, an
/// integer of at most 18 digits with no leading zero (it fits `i64` and re-encodes to the same
/// digits) or, outside a key (`in_key`), such an integer with up to 17 decimals (always a finite
/// double; a value is kept as it is, so its spelling need not be canonical). Followed by `,` or
/// the end.
fn plain_value_len(b: &[u8], in_key: bool) -> Option<usize> {
    let first = *b.first()?;
    let len = match first {
        b'"' => string_len(b)?,
        b't' if b.starts_with(b"true") => 4,
        b'f' if b.starts_with(b"false") => 5,
        b'n' if b.starts_with(b"null") => 4,
        b'-' | b'0'..=b'9' => {
            let int = integer_len(b)?;
            match b.get(int) {
                Some(b'.') if !in_key => {
                    let frac = b[int + 1..]
                        .iter()
                        .take_while(|c| c.is_ascii_digit())
                        .count();
                    if !(1..=17).contains(&frac) {
                        return None;
                    }
                    int + 1 + frac
                }
                _ => int,
            }
        }
        _ => return None,
    };
    match b.get(len) {
        None | Some(b',') => Some(len),
        _ => None,
    }
}

/// An integer in its canonical spelling: `0`, or an optional `-` and 1 to 18 digits not starting
/// with `0` (`-0` is not canonical: it re-encodes as `0`).
fn integer_len(b: &[u8]) -> Option<usize> {
    let sign = usize::from(b[0] == b'-');
    let digits = b[sign..].iter().take_while(|c| c.is_ascii_digit()).count();
    let lead_zero = b.get(sign) == Some(&b'0');
    let ok = match digits {
        1 if lead_zero => sign == 0,
        1..=18 => !lead_zero,
        _ => false,
    };
    ok.then_some(sign + digits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::json;

    /// What `key` answers, checked against the full decoder.
    fn agree(k: &[u8]) -> Option<(String, Vec<u8>)> {
        let fast = key(k);
        if let Some((ns, canonical)) = fast {
            let full = json::decode_key(k).expect("a plain key decodes");
            assert_eq!(full.namespace(), ns);
            assert_eq!(&full.id()[4 + ns.len()..], canonical);
        }
        fast.map(|(n, c)| (n.to_owned(), c.to_vec()))
    }

    #[test]
    fn plain_keys_are_their_own_canonical_bytes() {
        let (ns, c) = agree(br#"["file-src",{"filename":"/var/log/a.log"}]"#).unwrap();
        assert_eq!(
            (ns.as_str(), &c[..]),
            ("file-src", &br#"{"filename":"/var/log/a.log"}"#[..])
        );
        assert_eq!(agree(br#"["c",null]"#).unwrap().1, b"null");
        assert_eq!(agree(br#"["c",{}]"#).unwrap().1, b"{}");
        assert!(agree(br#"["c",{"a":-5,"b":true,"c":null,"d":"x","e":0}]"#).is_some());
        assert!(agree(br#"["",{"a":999999999999999999}]"#).is_some());
    }

    #[test]
    fn anything_else_is_left_to_the_full_decoder() {
        for k in [
            &br#"["c",{"b":1,"a":2}]"#[..],         // not sorted
            br#"["c",{"a":1,"a":2}]"#,              // a repeated name
            br#"["c",{"a":1.5}]"#,                  // a float: its canonical spelling is Java's
            br#"["c",{"a":01}]"#,                   // a leading zero
            br#"["c",{"a":-0}]"#,                   // re-encodes as 0
            br#"["c",{"a":1234567890123456789}]"#,  // 19 digits: may not fit
            br#"["c", {"a":1}]"#,                   // whitespace
            br#"["c\"",{"a":1}]"#,                  // an escape
            "[\"caf\u{e9}\",{\"a\":1}]".as_bytes(), // not ASCII
            br#"["c",{"a":{"b":1}}]"#,              // nested: refused by the full decoder
            br#"["c",{"a":1},3]"#,
            br#"["c",{"a":1}"#,
            br#"["c",[1]]"#,
            br#"{"connect-offsets-writer":"w"}"#,
            b"",
        ] {
            assert_eq!(agree(k), None, "{}", String::from_utf8_lossy(k));
        }
    }

    /// Keys as any writer may spell them (member order, escapes, floats, big and negative
    /// numbers): whatever the scan reads as plain, the full decoder reads the same.
    #[test]
    fn scan_agrees_with_the_decoder() {
        use proptest::prelude::*;
        let name = prop::sample::select(vec!["a", "b", "pos", "A", "a\"b", "caf\u{e9}", "", "\n"]);
        let value = prop_oneof![
            any::<i64>().prop_map(crate::Value::Int),
            (-1000i64..1000).prop_map(crate::Value::Int),
            any::<bool>().prop_map(crate::Value::Bool),
            Just(crate::Value::Null),
            (-1e9f64..1e9).prop_map(crate::Value::Float),
            "[ -~]{0,6}".prop_map(crate::Value::String),
        ];
        let members = prop::collection::vec((name, value), 0..4);
        let mut runner = proptest::test_runner::TestRunner::default();
        runner
            .run(
                &("[ -~]{0,4}", members, any::<bool>()),
                |(ns, members, spaced)| {
                    let mut p = crate::Partition::new();
                    for (n, v) in members {
                        p = p.with(n, v);
                    }
                    let mut k = Vec::new();
                    json::encode_key(&crate::OffsetKey::new(ns, p), &mut k);
                    if spaced {
                        k.insert(1, b' ');
                    }
                    agree(&k);
                    Ok(())
                },
            )
            .unwrap();
    }

    #[test]
    fn values() {
        assert_eq!(value(b"null"), Some(false));
        for v in [
            &br#"{"position":12}"#[..],
            br#"{"z":1.25,"a":"x","z":2}"#,
            b"{}",
        ] {
            assert_eq!(value(v), Some(true), "{}", String::from_utf8_lossy(v));
            assert_eq!(json::check_value(v).ok(), Some(true));
        }
        for v in [
            &br#"{"a":1e5}"#[..],
            br#"{"a":[1]}"#,
            br#" {"a":1}"#,
            b"[1]",
            b"nul",
            br#"{"a":1,}"#,
        ] {
            assert_eq!(value(v), None, "{}", String::from_utf8_lossy(v));
        }
    }
}
