//! Tests on the real Kafka broker (`scripts/kafka start`; `KAFKA_BOOTSTRAP`) that kill processes: the
//! warm-start snapshot, exactly-once tasks, the file source example, SIGKILL cycles on every
//! backend and the three-broker failover.

/// The example worker both `exactly_once` and `file_source` run.
#[allow(dead_code)]
#[path = "../../examples/file_source.rs"]
mod example_file_source;
#[path = "../kafka_util/mod.rs"]
mod kafka_util;
#[path = "../kafka_util/scripts.rs"]
mod scripts;

mod exactly_once;
mod file_source;
mod kafka_failover;
mod kafka_snapshot;
mod sigkill;
