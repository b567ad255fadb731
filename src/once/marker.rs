//! The override's id and its marker: what an id may be, the digests a marker records, the marker's
//! key, and the URL a tool opens to apply an override (`crate::internal::once` for the tool).

use crate::{Error, Offset, OffsetKey, Partition, Result};

use super::ONCE_NAMESPACE;

/// The longest id accepted, in characters (it becomes part of a record key).
pub const MAX_ID_CHARS: usize = 200;

/// Checks an override id: non-empty, at most [`MAX_ID_CHARS`] characters, no control characters,
/// no leading or trailing whitespace (both invisible in a configuration file).
pub fn validate_id(id: &str) -> Result<()> {
    let bad = |why: &str| Error::Input(format!("override id {id:?}: {why}"));
    if id.is_empty() {
        return Err(bad("must not be empty"));
    }
    let chars = id.chars().count();
    if chars > MAX_ID_CHARS {
        return Err(bad(&format!(
            "is {chars} characters long, at most {MAX_ID_CHARS} are allowed"
        )));
    }
    if let Some((i, c)) = id.chars().enumerate().find(|(_, c)| c.is_control()) {
        return Err(bad(&format!(
            "holds the control character U+{:04X} at position {i}",
            u32::from(c)
        )));
    }
    if id.trim() != id {
        return Err(bad("must not begin or end with whitespace"));
    }
    Ok(())
}

/// FNV-1a, 128 bits: stable across versions and platforms (unlike the std and foldhash hashers),
/// and plenty to tell two override files apart (this is no defence against forgery: anyone who
/// may write the store may write the marker).
fn fnv1a_128(bytes: &[u8]) -> u128 {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    bytes
        .iter()
        .fold(OFFSET, |h, &b| (h ^ u128::from(b)).wrapping_mul(PRIME))
}

/// The digest of `bytes` as 32 hex digits: what a marker's `digest` holds.
pub fn digest_of(bytes: &[u8]) -> String {
    format!("{:032x}", fnv1a_128(bytes))
}

/// The digest of an override's entries: the same for the same offsets whatever their order, the
/// member order of their partitions and offsets ([`OffsetKey::id`] and sorted members).
pub fn entries_digest(entries: &[(OffsetKey, Option<Offset>)]) -> String {
    let mut sorted: Vec<&(OffsetKey, Option<Offset>)> = entries.iter().collect();
    sorted.sort_by(|a, b| a.0.id().cmp(b.0.id()));
    let mut bytes = Vec::new();
    for (k, v) in sorted {
        bytes.extend_from_slice(&(k.id().len() as u64).to_be_bytes());
        bytes.extend_from_slice(k.id());
        match v {
            None => bytes.push(0),
            Some(o) => {
                bytes.push(1);
                let mut members: Vec<(&str, &crate::Value)> = o.iter().collect();
                members.sort_by(|a, b| a.0.cmp(b.0));
                let sorted: Offset = members.into_iter().map(|(n, v)| (n, v.clone())).collect();
                let mut json = Vec::new();
                crate::codec::json::encode_value(&sorted, &mut json);
                bytes.extend_from_slice(&(json.len() as u64).to_be_bytes());
                bytes.extend_from_slice(&json);
            }
        }
    }
    digest_of(&bytes)
}

/// Whether `marker` records `digest`: `None` when it records none (written before digests).
pub fn digest_matches(marker: &Offset, digest: &str) -> Option<bool> {
    match marker.get("digest") {
        Some(crate::Value::String(d)) => Some(d == digest),
        _ => None,
    }
}

/// The URL a tool opens to apply override `id` to the store `url` names: on `kafka://`, with
/// `exclusive.id=once-<digest of the id>` (unless the URL names one), so that processes applying
/// the same id fence each other (see [Processes that race](super#processes-that-race)); any
/// other URL as it is. Open it only to write: a dry run must not fence a real one.
pub fn store_url(url: &str, id: &str) -> Result<String> {
    let parsed = crate::store::StoreUrl::parse(url)?;
    if parsed.scheme != "kafka" || parsed.param("exclusive.id").is_some() {
        return Ok(url.to_string());
    }
    let sep = if url.contains('?') { '&' } else { '?' };
    Ok(format!(
        "{url}{sep}exclusive.id=once-{}",
        digest_of(id.as_bytes())
    ))
}

/// The key of the marker that records override `id` as applied.
pub fn marker_key(id: &str) -> OffsetKey {
    OffsetKey::new(ONCE_NAMESPACE, Partition::new().with("id", id))
}
