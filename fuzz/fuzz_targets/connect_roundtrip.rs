//! `connect_roundtrip`: arbitrary keys and offsets through Connect's JSON and back; see
//! `connect_offsets::internal::fuzz_checks::connect_roundtrip_case` for what is checked. Committed seeds and
//! regressions are canonical cases; any other input is read through `arbitrary`.
#![no_main]

use connect_offsets::internal::fuzz_checks::{RoundtripCase, connect_roundtrip_case};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(case) =
        RoundtripCase::from_canonical(data).or_else(|| connect_offsets_fuzz::roundtrip_case(data))
    {
        connect_roundtrip_case(&case);
    }
});
