//! A seam inside `apply` for fault injection.
//!
//! Every backend calls an [`ApplyFault`] (when one is installed) for each entry of a batch, in the
//! order it stages them, and once more before it commits the staged batch (RocksDB stages a batch
//! whole, perhaps ahead on another thread, and shows the seam its entries at the commit). A test's
//! fault can return an error there, which must leave the store exactly as it was: that is how the
//! conformance suite and the crash tests check that `apply` is all-or-nothing on the real backend,
//! not on a model of it.

use crate::Result;
#[cfg(feature = "testkit")]
use crate::crash::{CrashHook, CrashPlan, CrashPoint};
use crate::model::Batch;

/// Called by a backend at each step of `apply`.
pub trait ApplyFault: Send + Sync + std::fmt::Debug {
    /// Before staging entry number `index` (0-based, in the order the backend stages them).
    fn before_entry(&self, batch: &Batch, index: usize) -> Result<()>;
    /// After every entry is staged, before the backend makes the batch visible.
    fn before_commit(&self, batch: &Batch) -> Result<()>;
}

/// Fails `apply` once, after staging `after_entries` entries (or before commit when the batch has no
/// more entries than that).
#[cfg(feature = "testkit")]
#[derive(Debug)]
pub struct FailMidway {
    after_entries: usize,
    armed: std::sync::atomic::AtomicBool,
}

#[cfg(feature = "testkit")]
impl FailMidway {
    /// A fault that fires once, after `after_entries` entries are staged.
    pub fn new(after_entries: usize) -> Self {
        FailMidway {
            after_entries,
            armed: std::sync::atomic::AtomicBool::new(true),
        }
    }

    /// True once the fault has fired.
    pub fn fired(&self) -> bool {
        !self.armed.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn fire(&self, batch: &Batch, at: &str) -> Result<()> {
        if self.armed.swap(false, std::sync::atomic::Ordering::SeqCst) {
            return Err(crate::Error::Crashed(format!(
                "apply of batch {}:{} {at}",
                batch.writer, batch.seq
            )));
        }
        Ok(())
    }
}

#[cfg(feature = "testkit")]
impl ApplyFault for FailMidway {
    fn before_entry(&self, batch: &Batch, index: usize) -> Result<()> {
        if index == self.after_entries {
            self.fire(batch, &format!("before entry {index}"))
        } else {
            Ok(())
        }
    }
    fn before_commit(&self, batch: &Batch) -> Result<()> {
        if batch.entries.len() <= self.after_entries {
            self.fire(batch, "before commit")
        } else {
            Ok(())
        }
    }
}

/// A crash plan is an apply seam too: it crashes the process inside `apply`
/// ([`CrashPoint::InsideApply`]), and fails every apply
/// once the process is dead.
#[cfg(feature = "testkit")]
impl ApplyFault for CrashPlan {
    fn before_entry(&self, _batch: &Batch, index: usize) -> Result<()> {
        // Crash after staging at least one entry when there is one, so "inside" means inside.
        if index == 1 {
            CrashHook::at(self, CrashPoint::InsideApply)
        } else if self.crashed() {
            Err(self.dead())
        } else {
            Ok(())
        }
    }
    fn before_commit(&self, batch: &Batch) -> Result<()> {
        if batch.entries.len() <= 1 {
            CrashHook::at(self, CrashPoint::InsideApply)
        } else if self.crashed() {
            Err(self.dead())
        } else {
            Ok(())
        }
    }
}
