//! Kafka Connect's offsets topic as a store: [`KafkaStore`] (feature `kafka`).
//!
//! Opened by URL, `kafka://host:port[,host:port]/topic?partitions=25&replication=3&<librdkafka
//! property>=...`, or by [`KafkaStoreBuilder`]. Every parameter that is not ours (see
//! [`KafkaStoreBuilder::from_url`]) is a librdkafka property and reaches all clients, security
//! settings included; secret values never appear in `Debug` output, logs or errors. With
//! `fallback.topic=<worker topic>` the URL names a connector's own topic in front of the worker's
//! ([`KafkaPairStore`], opened by [`open`](crate::open())).
//!
//! The modules, by job:
//! * `topic`: the offsets-topic store ([`KafkaStore`]), configured by `config`
//!   ([`KafkaStoreBuilder`]);
//! * [`pair`]: a connector's topic in front of the worker's ([`KafkaPairStore`]);
//! * [`task`]: an exactly-once source task's producer ([`TaskProducer`]);
//! * [`group`]: sink connectors' consumer groups ([`KafkaGroupStore`]);
//! * `client` and `producer`: the clients' context and the producer plumbing both writers share;
//! * `ffi`: every librdkafka call rdkafka's safe API lacks (the only unsafe code), with its
//!   safety notes.
//!
//! The Connect cluster's config topic is read by [`connect`](crate::connect), above the stores.
//!
//! How it works (Connect's records exactly, `applied_seq` from headers and a marker per writer,
//! one transaction per batch, fencing, `write.mode=idempotent`, loading, warm starts from
//! `snapshot.dir`, bounded waits) is written down in `docs/design.md`, section "The Kafka
//! offsets-topic store".

mod client;
mod config;
// The one module that may use `unsafe`: librdkafka calls rdkafka's safe API lacks.
#[allow(unsafe_code)]
mod ffi;
pub mod group;
pub mod pair;
mod producer;
pub mod task;
mod topic;

pub use config::{
    DEFAULT_PARTITIONS, DEFAULT_REPLICATION, DEFAULT_TIMEOUT, KafkaStoreBuilder, WriteMode,
};
pub use group::KafkaGroupStore;
pub use pair::{FALLBACK_TOPIC, KafkaPairStore};
pub use task::{TaskId, TaskProducer};
pub use topic::{
    Fallback, KafkaStore, LoadReport, MARKER_FIELD, SEQ_HEADER, Start, WRITER_HEADER, marker_key,
};
