//! `crash_replay`: see `connect_offsets::internal::fuzz_checks::crash_replay` for what is checked.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| connect_offsets::internal::fuzz_checks::crash_replay(data));
