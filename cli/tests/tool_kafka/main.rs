//! The tool and the library against the real Kafka broker: alarms, the console's sink lag, expire,
//! history, `--once` races, operations, reset policies, sink groups, tool fences, the Kafka store
//! and pair store, and reads of consumer groups on the three-broker cluster.

#[path = "../cli_util/mod.rs"]
mod cli_util;
#[path = "../http_util/mod.rs"]
mod http_util;
#[path = "../../../tests/kafka_util/mod.rs"]
mod kafka_util;
#[path = "../../../tests/kafka_util/scripts.rs"]
mod scripts;

mod alarms;
mod console_lag;
mod expire;
mod group_coordinator;
mod history;
mod kafka;
mod kafka_pair;
mod once_races;
mod operate_kafka;
mod reset_policy;
mod sink_offsets;
mod tool_fence;
