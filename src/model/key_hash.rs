//! The hasher of maps keyed by [`OffsetKey`]: keys carry their own precomputed hash
//! (`crate::internal::model` for the tool and the benches).

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

use super::OffsetKey;

/// A hasher for [`OffsetKey`]: keys carry their own precomputed hash, so the map only passes it on.
#[derive(Clone, Copy, Default, Debug)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only reached if something other than an OffsetKey is hashed with it: fold the bytes in.
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Builds [`KeyHasher`]s.
#[derive(Clone, Copy, Default, Debug)]
pub struct BuildKeyHasher;

impl BuildHasher for BuildKeyHasher {
    type Hasher = KeyHasher;
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher(0)
    }
}

/// A map keyed by [`OffsetKey`] using its precomputed hash.
pub type KeyMap<V> = HashMap<OffsetKey, V, BuildKeyHasher>;
