//! `wal_recovery`: log directories (segments, snapshots, unfinished and foreign files) opened by
//! recovery; see `connect_offsets::internal::fuzz_checks::wal_recovery_case` for what is checked. Committed
//! seeds and regressions are canonical cases; any other input is read through `arbitrary`.
#![no_main]

use connect_offsets::internal::fuzz_checks::{WalCase, wal_recovery_case};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(case) =
        WalCase::from_canonical(data).or_else(|| connect_offsets_fuzz::wal_case(data))
    {
        wal_recovery_case(&case);
    }
});
