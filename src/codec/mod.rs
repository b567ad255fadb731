//! Kafka Connect's record format for offsets.
//!
//! * `json`: the bytes `JsonConverter` (with `schemas.enable=false`) writes for offset keys and values,
//!   and a decoder for what Connect writes.
//! * `scan`: plain keys and values read without building them (a loader's fast path).
//! * `java_map`: the member order of a `java.util.HashMap`, which Connect's REST API writes in.
//! * [`murmur2`](mod@murmur2): the Java producer's default partitioner, which decides the topic partition of a key.

pub(crate) mod java_map;
pub(crate) mod json;
pub mod murmur2;
#[cfg(any(feature = "kafka", feature = "testkit"))]
pub(crate) mod scan;
mod spelling;

pub use json::{decode_key, decode_value, encode_key, encode_value};
pub use murmur2::{murmur2, partition_for};
