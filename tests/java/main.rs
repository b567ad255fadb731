//! Tests that run Java: Kafka Connect's own stores side by side, a real Debezium engine over
//! PostgreSQL, and the Java `OffsetBackingStore` on the native library.

#[path = "../kafka_util/mod.rs"]
mod kafka_util;
#[path = "../kafka_util/scripts.rs"]
mod scripts;

mod connect_differential;
mod debezium;
mod java_store;
