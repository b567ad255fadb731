//! The `connect-offsets` tool run as a user runs it, on stores that need no broker: commands, exit
//! codes, operations, the REST API of `serve`, the `wal` commands.

#[path = "../cli_util/mod.rs"]
mod cli_util;
#[path = "../http_util/mod.rs"]
mod http_util;

mod cli;
mod console_api;
mod operate;
mod rest;
mod wal_cli;
