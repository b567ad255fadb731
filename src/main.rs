//! `connect-offsets`: the command-line tool. See `connect-offsets --help`.

mod cli;

/// A worker offers from its own threads and the commit buffer frees each batch on its log thread:
/// with glibc's allocator, whose slow path those cross-thread frees feed, offering 10,000 offsets
/// took 4.5 ms of a `bench` commit cycle; with mimalloc's per-thread heaps, 1.2 ms.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    keep_freed_heap();
    cli::main()
}

/// Keeps up to 64 MiB of freed memory at the top of each glibc arena (what librdkafka and RocksDB
/// allocate from) instead of handing it back at every free. librdkafka allocates each record it is
/// given and frees it once acknowledged, so a 10,000-offset batch freed its megabytes and the next
/// one faulted them in again, zeroed page by page: a twentieth of the process. Setting the trim
/// threshold ends glibc's sliding mmap threshold, so that one is set to the sliding one's ceiling.
fn keep_freed_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
    }
}
