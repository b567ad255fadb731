//! `url_and_config`: see `connect_offsets::internal::fuzz_checks::url_and_config` for what is checked.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| connect_offsets::internal::fuzz_checks::url_and_config(data));
