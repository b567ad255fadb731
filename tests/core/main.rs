//! The library's own tests: codecs and vectors, the commit buffer, the conformance suite, crash
//! properties and the exhaustive model check, disk faults, fuzz regressions, metrics,
//! once-overrides, stress, the log's bit flips and its frozen v1 format. With the default features
//! they need nothing but the machine; built with `kafka`, the conformance suite, crash properties
//! and once-overrides also run over the real broker (`scripts/kafka start`).

#[cfg(feature = "kafka")]
#[path = "../kafka_util/mod.rs"]
mod kafka_util;
#[path = "../scenario_util/mod.rs"]
mod scenario_util;

mod codec_vectors;
mod commit_buffer;
mod configuration_reference;
mod conformance;
mod crash_props;
mod disk_faults;
mod frame_fixtures;
mod fuzz_regressions;
mod metrics_policy;
mod model_check;
mod once;
mod stress;
mod wal_bitflip;
mod wal_format_v1;
