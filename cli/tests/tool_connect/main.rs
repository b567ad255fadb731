//! The tool beside a real Kafka Connect worker (one at a time, on port 8083): Connect reads what we
//! write and we read what it writes, for source, pair and sink connectors.

#[path = "../http_util/mod.rs"]
mod http_util;
#[path = "../../../tests/kafka_util/mod.rs"]
mod kafka_util;
#[path = "../../../tests/kafka_util/scripts.rs"]
mod scripts;

mod connect_interop;
mod connect_pair;
mod connect_sink;
mod connect_sink_group;
mod orphans;
