//! Faults of a failing disk for [`SimFs`](super::SimFs): which operation fails, on which files, how
//! often, and with which errno.

use std::io;
use std::path::Path;

/// A file-system operation a [`Fault`] can make fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimOp {
    /// `WalFile::append` (half of the bytes reach the file, as in a write cut short by a full disk).
    Append,
    /// `WalFs::open_append` of a file that does not exist yet (nothing is created).
    Create,
    /// `WalFile::sync` (`fdatasync`): the dirty bytes are dropped as Linux drops them.
    Sync,
    /// `WalFs::rename` (nothing moves).
    Rename,
    /// `WalFs::remove` (nothing is removed).
    Remove,
    /// `WalFs::sync_dir` (the directory's changes stay undurable).
    SyncDir,
}

/// One injected fault: the next `times` calls of `op` whose path ends with `suffix` fail with `errno`.
#[derive(Debug, Clone)]
pub struct Fault {
    op: SimOp,
    errno: i32,
    suffix: Option<String>,
    times: u32,
}

impl Fault {
    /// `op` fails with `errno` (e.g. `libc`'s `ENOSPC` = 28, `EIO` = 5), once, on any path.
    pub fn new(op: SimOp, errno: i32) -> Self {
        Fault {
            op,
            errno,
            suffix: None,
            times: 1,
        }
    }

    /// `op` fails with ENOSPC ("No space left on device").
    pub fn enospc(op: SimOp) -> Self {
        Self::new(op, 28)
    }

    /// `op` fails with EIO ("Input/output error").
    pub fn eio(op: SimOp) -> Self {
        Self::new(op, 5)
    }

    /// Fires `n` times instead of once (`u32::MAX`: until [`SimFs::heal`](super::SimFs::heal)).
    pub fn times(mut self, n: u32) -> Self {
        self.times = n;
        self
    }

    /// Only on paths ending with `suffix` (`".wal"`, `".snap.tmp"`, the log directory's name).
    pub fn on(mut self, suffix: &str) -> Self {
        self.suffix = Some(suffix.to_string());
        self
    }

    pub(super) fn op(&self) -> SimOp {
        self.op
    }

    pub(super) fn matches(&self, op: SimOp, path: &Path) -> bool {
        self.op == op
            && self.times > 0
            && self
                .suffix
                .as_ref()
                .is_none_or(|s| path.to_string_lossy().ends_with(s.as_str()))
    }

    /// The error this fault gives (the OS's own message for its errno, marked as simulated).
    pub(super) fn error(&self, path: &Path) -> io::Error {
        let os = io::Error::from_raw_os_error(self.errno);
        io::Error::new(os.kind(), format!("{os} (simulated on {})", path.display()))
    }

    /// Uses up one firing; true when none is left.
    pub(super) fn fire(&mut self) -> bool {
        if self.times != u32::MAX {
            self.times -= 1;
        }
        self.times == 0
    }
}
