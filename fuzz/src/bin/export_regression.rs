//! Stores a (minimized) crash input as a regression the main crate's `cargo test` replays:
//!
//! ```text
//! cargo run --manifest-path fuzz/Cargo.toml --bin export_regression -- <target> <input> [<name>]
//! ```
//!
//! writes `fuzz/regressions/<target>/<name>` (default: the input's file name). Inputs of the typed
//! targets (`wal_recovery`, `connect_roundtrip`) are read through `arbitrary` exactly as the fuzz
//! target reads them and stored as canonical cases; other targets' inputs are copied as they are.

use std::path::Path;

use connect_offsets::internal::fuzz_checks::{RoundtripCase, WalCase};

const TARGETS: [&str; 6] = [
    "frame_decode",
    "wal_recovery",
    "connect_decode",
    "connect_roundtrip",
    "crash_replay",
    "url_and_config",
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (target, input) = match &args[..] {
        [t, i] | [t, i, _] if TARGETS.contains(&t.as_str()) => (t.as_str(), Path::new(i)),
        _ => {
            eprintln!(
                "usage: export_regression <{}> <input> [<name>]",
                TARGETS.join("|")
            );
            std::process::exit(2);
        }
    };
    let name = args
        .get(2)
        .cloned()
        .or_else(|| input.file_name().map(|n| n.to_string_lossy().into_owned()))
        .expect("a name");
    let data = std::fs::read(input).unwrap_or_else(|e| panic!("read {}: {e}", input.display()));
    let bytes = match target {
        "wal_recovery" => WalCase::from_canonical(&data)
            .or_else(|| connect_offsets_fuzz::wal_case(&data))
            .expect("arbitrary cannot read this input: the target never ran a check on it")
            .to_canonical(),
        "connect_roundtrip" => RoundtripCase::from_canonical(&data)
            .or_else(|| connect_offsets_fuzz::roundtrip_case(&data))
            .expect("arbitrary cannot read this input: the target never ran a check on it")
            .to_canonical(),
        _ => data,
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("regressions")
        .join(target);
    std::fs::create_dir_all(&dir).expect("create the regressions directory");
    let out = dir.join(&name);
    std::fs::write(&out, bytes).expect("write the regression");
    println!("{}", out.display());
    eprintln!("now add a line for it to fuzz/regressions/README.md saying what it broke");
}
