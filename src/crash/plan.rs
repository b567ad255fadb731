//! A plan that stops the simulated process at one named crash point (the test kit).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use super::{CrashHook, CrashPoint};
use crate::{Error, Result};

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
    /// The `torn` of a crash inside a write whose every byte reaches the file (a power loss may
    /// still drop any suffix of them: [`SimFs::power_loss`](crate::fs::SimFs::power_loss)).
    pub const WHOLE_WRITE: usize = usize::MAX;

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

    /// The error of every step after the crash.
    pub(crate) fn dead(&self) -> Error {
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
        match self.lock().torn {
            Self::WHOLE_WRITE => write_len,
            torn => torn % (write_len + 1),
        }
    }

    fn is_dead(&self) -> bool {
        self.crashed()
    }
}
