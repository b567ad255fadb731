//! connect-offsets
#![forbid(unsafe_code)]
pub mod buffer;
pub mod codec;
pub mod conformance;
pub mod crash;
pub mod dead_letter;
pub mod error;
pub mod model;
pub mod scenario;
pub mod store;
pub mod wal;
pub use error::{Error, Result};
pub use model::{Batch, Entries, FieldMap, Offset, OffsetKey, Partition, Value};
pub use store::{OffsetStore, OffsetStoreExt, open};
