//! A worker's lookup of its offsets under its reset policies: [`ResetPolicies::load`] (the
//! policies themselves, which know nothing of the buffer, are in [`policy`](crate::policy)).

use super::CommitBuffer;
use crate::policy::{ResetPolicies, Resolution, SourceBounds, Unusable, UnusableOffset};
use crate::{Error, Offset, OffsetKey, Result};

impl ResetPolicies {
    /// A worker's lookup: the committed offset of `key` from `buffer`, checked by `check` (the
    /// connector's own validation, returning why an offset is unusable). An unusable or undecodable
    /// offset is resolved by the policy, and the replacement is offered to the buffer so the next
    /// commit records it (a `skip` offers a reset). Returns the offset to start from.
    pub fn load(
        &self,
        buffer: &CommitBuffer,
        key: &OffsetKey,
        check: impl Fn(&Offset) -> std::result::Result<(), (Unusable, String)>,
        bounds: &dyn SourceBounds,
    ) -> Result<Option<Offset>> {
        let resolution = match buffer.get(key) {
            Ok(None) => return Ok(None),
            Ok(Some(offset)) => match check(&offset) {
                Ok(()) => return Ok(Some(offset)),
                Err((reason, detail)) => self.resolve(
                    &UnusableOffset::new(key, reason, detail).with_offset(&offset),
                    bounds,
                )?,
            },
            Err(e @ (Error::Decode { .. } | Error::InvalidData(_))) => self.resolve(
                &UnusableOffset::new(key, Unusable::Corrupt, e.to_string()),
                bounds,
            )?,
            Err(e) => return Err(e),
        };
        match resolution {
            Resolution::NoOffset => {
                buffer.offer_reset(key.clone())?;
                Ok(None)
            }
            Resolution::Use(o) => {
                buffer.offer(key.clone(), o.clone())?;
                Ok(Some(o))
            }
        }
    }
}
