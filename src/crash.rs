//! Named crash points and a plan that stops the process at one of them.
//!
//! The commit path calls [`CrashHook::at`] at every step where a real process can die. In production
//! no hook is installed. The test kit (feature `testkit`) installs a `CrashPlan`: it lets the first
//! `skip` occurrences of its target pass and "kills the process" at the next one. From then on every
//! hook call, every `SimFs` operation and every `apply` through the plan's `ApplyFault` fails, as if
//! the process were gone; the test then drops everything, lets the simulated file system forget what
//! was never synced, and reopens.

use crate::Result;

#[cfg(feature = "testkit")]
mod plan;
#[cfg(feature = "testkit")]
pub use plan::CrashPlan;

/// Every step of the commit path where a process can die.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CrashPoint {
    /// A batch is sealed and encoded; nothing of it is written.
    BeforeWalWrite,
    /// Inside the write of a frame: a torn frame of any length may reach the file.
    InsideWalWrite,
    /// The frame is written but not synced: it may vanish.
    AfterWriteBeforeSync,
    /// The frame is synced; no committer has been told.
    AfterSyncBeforeAck,
    /// `Local` committers were told; the store has not seen the batch.
    AfterAckBeforeApply,
    /// Inside the store's `apply`, after some entries were staged.
    InsideApply,
    /// The store applied the batch; the log still holds it.
    AfterApplyBeforeRelease,
    /// Between removing one released log segment and the next.
    InsideRelease,
    /// Inside the writing of a compaction snapshot (memory store) or before its old segments go.
    InsideCompaction,
    /// Between creating a new log segment and making it durable in the directory.
    InsideRotation,
    /// While recovery replays the log into the store.
    InsideRecovery,
}

impl CrashPoint {
    /// Every crash point.
    pub const ALL: [CrashPoint; 11] = [
        CrashPoint::BeforeWalWrite,
        CrashPoint::InsideWalWrite,
        CrashPoint::AfterWriteBeforeSync,
        CrashPoint::AfterSyncBeforeAck,
        CrashPoint::AfterAckBeforeApply,
        CrashPoint::InsideApply,
        CrashPoint::AfterApplyBeforeRelease,
        CrashPoint::InsideRelease,
        CrashPoint::InsideCompaction,
        CrashPoint::InsideRotation,
        CrashPoint::InsideRecovery,
    ];
}

/// Called at every [`CrashPoint`].
pub trait CrashHook: Send + Sync + std::fmt::Debug {
    /// `Err` means the process died here.
    fn at(&self, point: CrashPoint) -> Result<()>;
    /// For a crash inside a write: how many bytes of the write reach the file.
    fn torn_len(&self, write_len: usize) -> usize {
        let _ = write_len;
        0
    }
    /// True once the process has died: every later operation fails.
    fn is_dead(&self) -> bool {
        false
    }
}
