//! The console of `connect-offsets serve` used as a person uses it: Debian's headless Chromium,
//! driven through chromedriver (W3C WebDriver), against the real binary and real stores (RocksDB
//! with `?history=`). After each step the store's state is read back through the CLI; screenshots
//! land in `$CARGO_TARGET_TMPDIR/console-screenshots/` (their paths are printed).
//!
//! Needs `/usr/bin/chromium` and `/usr/bin/chromedriver` (`scripts/setup` installs them): without
//! them every test fails, saying so.

#[path = "../browser_util/mod.rs"]
mod browser_util;
#[path = "../cli_util/mod.rs"]
mod cli_util;
#[path = "../http_util/mod.rs"]
mod http_util;

mod access;
mod client;
mod fixture;
mod refusals;
mod walkthrough;
