//! Named crash points and a plan that stops the process at one of them.
//!
//! The commit path calls [`CrashHook::at`] at every step where a real process can die. In production
//! no hook is installed. Tests install a [`CrashPlan`]: it lets the first `skip` occurrences of its
//! target pass and "kills the process" at the next one. From then on every hook call, every
//! [`SimFs`](crate::wal::fs::SimFs) operation and every `apply` through the plan's
//! [`ApplyFault`] fails, as if the process were gone; the test then drops everything, lets the
//! simulated file system forget what was never synced, and reopens.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::model::Batch;
use crate::store::ApplyFault;
use crate::{Error, Result};

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

/// A plan to crash at the `skip`-th next occurrence of a target point (0 = the first). It counts
/// every point reached, and can be (re-)armed at any time.
#[derive(Debug, Default)]
pub struct CrashPlan {
    state: Mutex<PlanState>,
    crashed: AtomicBool,
}

#[derive(Debug, Default)]
struct PlanState {
    target: Option<CrashPoint>,
    skip: usize,
    torn: usize,
    hits: std::collections::BTreeMap<CrashPoint, u64>,
    crashed_at: Option<CrashPoint>,
}

impl CrashPlan {
    /// A plan that never crashes but counts every point reached.
    pub fn never() -> Self {
        Self::default()
    }

    /// Crash at occurrence `skip` (0-based) of `target`; a crash inside a write keeps `torn` bytes of it
    /// (modulo the write's length plus one, so any length from none to all is reachable).
    pub fn at(target: CrashPoint, skip: usize, torn: usize) -> Self {
        let plan = Self::never();
        plan.arm(target, skip, torn);
        plan
    }

    /// Arms (or re-arms) the plan.
    pub fn arm(&self, target: CrashPoint, skip: usize, torn: usize) {
        let mut st = self.lock();
        st.target = Some(target);
        st.skip = skip;
        st.torn = torn;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PlanState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True once the plan has crashed the process.
    pub fn crashed(&self) -> bool {
        self.crashed.load(Ordering::SeqCst)
    }

    /// Where it crashed.
    pub fn crashed_at(&self) -> Option<CrashPoint> {
        self.lock().crashed_at
    }

    /// How often each point was reached (the crash itself included).
    pub fn hits(&self) -> std::collections::BTreeMap<CrashPoint, u64> {
        self.lock().hits.clone()
    }

    fn dead(&self) -> Error {
        Error::Crashed(format!("{:?} (process is dead)", self.crashed_at()))
    }
}

impl CrashHook for CrashPlan {
    fn at(&self, point: CrashPoint) -> Result<()> {
        if self.crashed() {
            return Err(self.dead());
        }
        let mut st = self.lock();
        *st.hits.entry(point).or_default() += 1;
        if st.target == Some(point) {
            if st.skip == 0 {
                st.crashed_at = Some(point);
                st.target = None;
                self.crashed.store(true, Ordering::SeqCst);
                return Err(Error::Crashed(format!("{point:?}")));
            }
            st.skip -= 1;
        }
        Ok(())
    }

    fn torn_len(&self, write_len: usize) -> usize {
        self.lock().torn % (write_len + 1)
    }

    fn is_dead(&self) -> bool {
        self.crashed()
    }
}

impl ApplyFault for CrashPlan {
    fn before_entry(&self, _batch: &Batch, index: usize) -> Result<()> {
        // Crash after staging at least one entry when there is one, so "inside" means inside.
        if index == 1 {
            self.at(CrashPoint::InsideApply)
        } else if self.crashed() {
            Err(self.dead())
        } else {
            Ok(())
        }
    }
    fn before_commit(&self, batch: &Batch) -> Result<()> {
        if batch.entries.len() <= 1 {
            self.at(CrashPoint::InsideApply)
        } else if self.crashed() {
            Err(self.dead())
        } else {
            Ok(())
        }
    }
}
