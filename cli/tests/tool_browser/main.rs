//! The console of `connect-offsets serve` used as a person uses it: Debian's headless Chromium,
//! driven through chromedriver (W3C WebDriver), against the real binary and real stores (RocksDB
//! with `?history=`). After each step the store's state is read back through the CLI; screenshots
//! land in `$CARGO_TARGET_TMPDIR/console-screenshots/` (their paths are printed).
//!
//! Needs `/usr/bin/chromium` and `/usr/bin/chromedriver` (`scripts/setup` installs them): without
//! them every test fails, saying so. `connect` (feature `kafka`) also needs the test broker
//! (`scripts/kafka start`) and starts a Kafka Connect worker (`scripts/connect`); the others need
//! no broker.

#[path = "../browser_util/mod.rs"]
mod browser_util;
#[path = "../cli_util/mod.rs"]
mod cli_util;
#[path = "../http_util/mod.rs"]
mod http_util;
#[cfg(feature = "kafka")]
#[path = "../../../tests/kafka_util/mod.rs"]
mod kafka_util;
#[cfg(feature = "kafka")]
#[path = "../../../tests/kafka_util/scripts.rs"]
mod scripts;

mod access;
mod client;
mod connect;
mod fixture;
mod refusals;
mod secrets;
mod walkthrough;
