//! Stream-connector offsets behind one pluggable, crash-safe interface.
//!
//! A connector worker must remember how far it got in every source partition (a table, a file, a
//! shard) so that after a crash it resumes with no data lost and nothing processed twice. This crate
//! stores those offsets in memory, in RocksDB (the embedded default) or in Kafka Connect's own offsets
//! topic, byte-compatible with the records Kafka Connect writes.
//!
//! * [`OffsetStore`]: one small, synchronous, object-safe trait; [`open()`] picks a backend from a URL.
//! * [`buffer::CommitBuffer`]: the write-ahead commit buffer every backend shares. Tasks
//!   [`offer`](buffer::CommitBuffer::offer) offsets cheaply; a commit seals them into a batch, appends
//!   one framed record to a local log, syncs it once for every committer waiting (group commit), applies
//!   the batch to the store atomically, and recovery replays exactly what the store is missing.
//! * [`once::OnceOverride`]: offsets to set or reset once per id, at a buffer's open
//!   ([`buffer::CommitBufferConfig::once`]) or from a tool; the id is recorded with them atomically.
//! * [`history`]: opt-in per store (`?history=7d`): how each offset moved, recorded in the same
//!   atomic batch, and [`history::plan_rewind`] to put a connector back where it was at a time.
//! * [`expire`]: resets the partitions of a connector whose offsets have not been written for a
//!   while, from a tool or on an interval in a buffer ([`buffer::CommitBufferConfig::expire_after`]).
//! * [`alarms`]: a connector that commits without moving (stalled), an offset that moved
//!   backwards; seen by a buffer ([`buffer::CommitBufferConfig::stall_after`]), kept in the store.
//! * [`codec`]: Kafka Connect's record bytes (`JsonConverter`, schemas off) and its murmur2 partitioner.
//!
//! # Guarantees
//!
//! Whatever instant the process dies at, reopening gives: no acknowledged batch lost; the store equal to
//! batches `1..k` applied in order for some `k` at least the last acknowledged; no batch applied twice;
//! no offset moving backwards. The crash points name every step where a process can die; the
//! crate's test kit (feature `testkit`, not a stable API) checks these four invariants at each of them
//! in the property tests and the fuzz targets.
//!
//! # Backends
//!
//! | URL | backend | Cargo feature |
//! |---|---|---|
//! | `memory://` | [`store::MemoryStore`] | always |
//! | `rocksdb:///var/lib/offsets` | `store::rocksdb::RocksDbStore` | `rocksdb` (default) |
//! | `kafka://127.0.0.1:9092/connect-offsets?partitions=25` | `store::kafka::KafkaStore` | `kafka` |
//! | `kafka://127.0.0.1:9092/my-connector-offsets?fallback.topic=connect-offsets` (a connector's topic, the worker's as fallback) | `store::kafka::KafkaPairStore` | `kafka` |
//! | `kafka-group://127.0.0.1:9092/?group=connect-{connector}` (sink connectors) | `store::kafka::KafkaGroupStore` | `kafka` |
//!
//! A URL naming a backend whose feature is off fails with [`Error::FeatureDisabled`] naming the feature.
//!
//! # Features
//!
//! | feature | adds | default |
//! |---|---|---|
//! | `rocksdb` | `rocksdb://`: the embedded store (RocksDB's C++, built without compression) | yes |
//! | `kafka` | `kafka://` and `kafka-group://`: Connect's offsets topic, topic pairs, exactly-once task producers and sink connectors' consumer groups (librdkafka) | no |
//! | `prometheus` | `metrics::install`: what the crate records, rendered as Prometheus text (`metrics-exporter-prometheus`) | no |
//! | `testkit` | the conformance suite, the crash model and the fault seams, for testing a backend of your own; not a stable API | no |
//! | `full` | all of the above | no |
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use connect_offsets::buffer::{CommitBuffer, CommitBufferConfig, Durability};
//! use connect_offsets::{Offset, OffsetKey, Partition};
//!
//! let dir = tempfile::tempdir()?;
//! let store = Arc::from(connect_offsets::open("memory://")?);
//! let buffer = CommitBuffer::open(store, CommitBufferConfig::new(dir.path().join("wal")))?;
//!
//! let key = OffsetKey::new("inventory-source", Partition::new().with("table", "orders"));
//! buffer.offer(key.clone(), Offset::new().with("lsn", 4711))?;
//! let seq = buffer.commit_with(Durability::Store).wait()?;
//! assert_eq!(seq, 1);
//! assert_eq!(buffer.get(&key)?, Some(Offset::new().with("lsn", 4711)));
//! // The bytes Kafka Connect writes for this key:
//! assert_eq!(key.connect_key(), br#"["inventory-source",{"table":"orders"}]"#);
//! buffer.close()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
// Denied, not forbidden: one module may allow it, store::kafka::ffi (librdkafka calls rdkafka's
// safe API lacks, each behind a safe function, with its safety notes).
#![deny(unsafe_code)]
#![warn(missing_docs)]
// docs.rs (`--cfg docsrs`, nightly) marks each item with the feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]
// The public API is what the docs show, plus a few `#[doc(hidden)]` items that documented items
// take or tell users to call, left where those are: `policy`'s `SourceBounds` and its kin,
// `metrics::watch` (and `Sampled`, `BufferSample`), `store::StoreUrl`, `store::ApplyFault`,
// `buffer::RecoveryPolicy` and `policy::DeadLetterFile`. The rest is the crate's own: the log, the
// file-system seam, crash points, clocks, the export document, dead letters (the modules below
// without `pub`) and the other internals are reached from outside only through `internal`, which
// re-exports them for the tool (`cli/`), the JNI library, the tests and the fuzz targets: not a
// stable API.
pub mod alarms;
pub mod buffer;
pub mod codec;
#[cfg(feature = "testkit")]
pub mod conformance;
pub mod connect;
mod connector_offsets;
mod crash;
mod dead_letter;
pub mod error;
pub mod expire;
mod fs;
#[cfg(feature = "testkit")]
mod fuzz_checks;
pub mod history;
#[doc(hidden)]
pub mod internal;
pub mod metrics;
pub mod migrate;
pub mod model;
mod namespaces;
pub mod once;
mod open;
pub mod policy;
#[cfg(feature = "testkit")]
pub mod scenario;
pub mod store;
mod time;
mod wal;
pub use error::{Error, Result};
pub use model::{Batch, Entries, FieldMap, Offset, OffsetKey, Partition, Value};
pub use open::{open, open_existing, open_for_writer, open_read_only};
pub use store::{Capabilities, CommitHooks, OffsetStore, OffsetStoreExt};
