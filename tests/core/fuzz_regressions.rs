//! Replays every committed fuzz input, `fuzz/seeds/<target>/*` and `fuzz/regressions/<target>/*`,
//! through the function its fuzz target calls (`connect_offsets::internal::fuzz_checks`), so a crash the fuzzer
//! once found fails an ordinary `cargo test` if it comes back. See `fuzz/README.md`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::{Path, PathBuf};

use connect_offsets::internal::fuzz_checks;

/// The largest single allocation an input may make, as `scripts/fuzz` runs libFuzzer with
/// `-malloc_limit_mb=64`: without it a regression that once asked for 256 MiB would pass.
const MALLOC_LIMIT: usize = 64 << 20;

thread_local! {
    /// The largest allocation this thread made since the last reset (const-initialized, so reading
    /// it from inside the allocator never allocates).
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

/// The system allocator, noting each thread's largest allocation.
struct Measured;

// SAFETY: every call is passed to `System` unchanged; the bookkeeping only touches a thread-local
// `Cell` that needs no allocation and no destructor.
unsafe impl GlobalAlloc for Measured {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract for `alloc`, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: the caller's contract for `realloc`, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for `dealloc`, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

fn note(size: usize) {
    let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
}

#[global_allocator]
static ALLOCATOR: Measured = Measured;

fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz")
        .join(kind)
        .join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .map(|e| e.expect("read a fuzz input directory").path())
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    paths
}

/// Runs `check` on every seed and regression of `target`; fails naming each input that panics.
fn replay(target: &str, check: fn(&[u8])) {
    let seeds = inputs("seeds", target);
    assert!(
        !seeds.is_empty(),
        "no seeds in fuzz/seeds/{target}: was the target renamed?"
    );
    let mut failed = Vec::new();
    let all: Vec<PathBuf> = seeds
        .into_iter()
        .chain(inputs("regressions", target))
        .collect();
    for path in &all {
        let bytes = std::fs::read(path).expect("read a fuzz input");
        LARGEST.with(|l| l.set(0));
        if std::panic::catch_unwind(|| check(&bytes)).is_err() {
            failed.push(path.display().to_string());
        }
        let largest = LARGEST.with(Cell::get);
        if largest > MALLOC_LIMIT {
            eprintln!(
                "{}: one allocation of {largest} bytes (limit {MALLOC_LIMIT})",
                path.display()
            );
            failed.push(path.display().to_string());
        }
    }
    assert!(
        failed.is_empty(),
        "{target}: {} of {} inputs fail (messages above):\n  {}",
        failed.len(),
        all.len(),
        failed.join("\n  ")
    );
}

#[test]
fn frame_decode() {
    replay("frame_decode", fuzz_checks::frame_decode);
}

#[test]
fn wal_recovery() {
    replay("wal_recovery", fuzz_checks::wal_recovery);
}

#[test]
fn connect_decode() {
    replay("connect_decode", fuzz_checks::connect_decode);
}

#[test]
fn connect_roundtrip() {
    replay("connect_roundtrip", fuzz_checks::connect_roundtrip);
}

#[test]
fn crash_replay() {
    replay("crash_replay", fuzz_checks::crash_replay);
}

#[test]
fn url_and_config() {
    replay("url_and_config", fuzz_checks::url_and_config);
}
