//! Which form of a key wins, and what each form's record key is: the newest record (greatest
//! [`Stamp`](super::Stamp)) is current (the rule and why: `docs/design.md`, section "One
//! structural key, several record keys").

use super::entry::Form;
use super::index::Namespace;
use crate::codec::json;
use crate::model::OffsetKey;

impl Namespace {
    /// Whether `raw` is the canonical spelling of a key whose canonical partition is `canonical`.
    pub(super) fn is_canonical(&self, raw: &[u8], canonical: &[u8]) -> bool {
        is_canonical(&self.json, raw, canonical)
    }

    /// The record key bytes of `form` of the key `canonical`.
    pub(super) fn raw<'a>(&self, form: &Form<'a>, canonical: &[u8]) -> std::borrow::Cow<'a, [u8]> {
        match form.raw {
            Some(r) => std::borrow::Cow::Borrowed(r),
            None => {
                let mut v = Vec::with_capacity(self.json.len() + canonical.len() + 3);
                self.raw_into(form, canonical, &mut v);
                std::borrow::Cow::Owned(v)
            }
        }
    }

    /// Appends [`raw`](Namespace::raw) to `out`.
    pub(super) fn raw_into(&self, form: &Form<'_>, canonical: &[u8], out: &mut Vec<u8>) {
        match form.raw {
            Some(r) => out.extend_from_slice(r),
            None => {
                out.push(b'[');
                out.extend_from_slice(&self.json);
                out.push(b',');
                out.extend_from_slice(canonical);
                out.push(b']');
            }
        }
    }

    /// Whether `form` of the key `canonical` is the record key `raw` in topic partition `partition`.
    pub(super) fn is(&self, form: &Form<'_>, canonical: &[u8], raw: &[u8], partition: i32) -> bool {
        is_form(&self.json, form, canonical, raw, partition)
    }

    /// The key as `form`'s record decodes (its member order). Every form's key decoded once
    /// already, when it was stored.
    pub(super) fn key(&self, form: &Form<'_>, canonical: &[u8]) -> Option<OffsetKey> {
        json::decode_key(&self.raw(form, canonical)).ok()
    }
}

/// [`Namespace::is_canonical`] of the namespace whose name is the JSON string `json`.
pub(super) fn is_canonical(json: &[u8], raw: &[u8], canonical: &[u8]) -> bool {
    let n = json.len();
    raw.len() == n + canonical.len() + 3
        && raw[0] == b'['
        && raw[1..1 + n] == *json
        && raw[1 + n] == b','
        && raw[2 + n..raw.len() - 1] == *canonical
        && raw[raw.len() - 1] == b']'
}

/// [`Namespace::is`] of the namespace whose name is the JSON string `json`.
pub(super) fn is_form(
    json: &[u8],
    form: &Form<'_>,
    canonical: &[u8],
    raw: &[u8],
    partition: i32,
) -> bool {
    form.stamp.partition == partition
        && match form.raw {
            Some(r) => r == raw,
            None => is_canonical(json, raw, canonical),
        }
}

/// Makes the newest form current: of the shadowed ones, the greatest [`Stamp`](super::Stamp) (the last of equal
/// ones) replaces the current one when it is greater.
pub(super) fn settle<'a>(current: &mut Form<'a>, shadowed: &mut [Form<'a>]) {
    let newest = (0..shadowed.len()).max_by_key(|i| shadowed[*i].stamp);
    if let Some(i) = newest
        && shadowed[i].stamp > current.stamp
    {
        std::mem::swap(current, &mut shadowed[i]);
    }
}

/// The canonical partition bytes of `key`: its structural identity without the namespace.
pub(super) fn canonical(key: &OffsetKey) -> &[u8] {
    &key.id()[4 + key.namespace().len()..]
}
