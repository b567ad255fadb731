//! [`CommitTicket`]: what `commit()` returns. It names the epoch the commit sealed and resolves once
//! the log (durability `Local`) or the store (durability `Store`) has reached that epoch, or with the
//! error that stopped it; `wait` blocks on the shared condition variable, `.await` registers a waker.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::Durability;
use super::state::{Shared, State, lock};
use crate::{Error, Result};

/// A commit in progress. `wait()` blocks; `.await` suspends.
#[must_use = "a commit is acknowledged only when its ticket's `wait` returns Ok"]
pub struct CommitTicket {
    shared: Arc<Shared>,
    epoch: u64,
    durability: Durability,
    immediate: Option<Error>,
}

impl std::fmt::Debug for CommitTicket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommitTicket")
            .field("epoch", &self.epoch)
            .field("durability", &self.durability)
            .finish()
    }
}

/// The result of the commit of `epoch` at `durability`, if it is decided.
fn outcome(st: &State, epoch: u64, durability: Durability) -> Option<Result<u64>> {
    if let Some(e) = st.failed.get(&epoch) {
        return Some(Err(Error::CommitFailed(Arc::clone(e))));
    }
    let done = match durability {
        Durability::Local => st.durable >= epoch,
        Durability::Store => st.applied >= epoch,
    };
    if done {
        let seq = st
            .epoch_seq
            .range(..=epoch)
            .next_back()
            .map_or(0, |(_, s)| *s);
        return Some(Ok(seq));
    }
    st.poisoned
        .as_ref()
        .map(|p| Err(Error::CommitFailed(Arc::clone(p))))
}

impl CommitTicket {
    /// A ticket for the commit of `epoch`.
    pub(super) fn pending(shared: &Arc<Shared>, epoch: u64, durability: Durability) -> Self {
        CommitTicket {
            shared: Arc::clone(shared),
            epoch,
            durability,
            immediate: None,
        }
    }

    /// A ticket that resolves to `error` at once.
    pub(super) fn failed(shared: &Arc<Shared>, durability: Durability, error: Error) -> Self {
        CommitTicket {
            shared: Arc::clone(shared),
            epoch: 0,
            durability,
            immediate: Some(error),
        }
    }

    /// Waits up to the buffer's flush timeout; returns the seq of the batch that holds the commit.
    pub fn wait(self) -> Result<u64> {
        let timeout = self.shared.timeout;
        self.wait_timeout(timeout)
    }

    /// Waits up to `timeout`. A timeout does not cancel the commit: it stays in the pipeline.
    pub fn wait_timeout(mut self, timeout: Duration) -> Result<u64> {
        if let Some(e) = self.immediate.take() {
            return Err(e);
        }
        let deadline = Instant::now() + timeout;
        let mut st = lock(&self.shared);
        loop {
            if let Some(r) = outcome(&st, self.epoch, self.durability) {
                return r;
            }
            let now = Instant::now();
            if now >= deadline {
                let last = st
                    .last_store_error
                    .as_ref()
                    .map(|e| format!(" (last store error: {e})"))
                    .unwrap_or_default();
                return Err(Error::Timeout {
                    op: format!(
                        "commit of writer `{}` at {:?} durability{last}",
                        self.shared.writer, self.durability
                    ),
                    after: timeout,
                });
            }
            st = self
                .shared
                .changed
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// The result if the commit is already decided.
    pub fn try_result(&mut self) -> Option<Result<u64>> {
        if let Some(e) = self.immediate.take() {
            return Some(Err(e));
        }
        let st = lock(&self.shared);
        outcome(&st, self.epoch, self.durability)
    }
}

impl Future for CommitTicket {
    type Output = Result<u64>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some(r) = self.try_result() {
            return Poll::Ready(r);
        }
        self.shared
            .wakers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(cx.waker().clone());
        // Re-check: progress may have been made between the check and the registration.
        match self.try_result() {
            Some(r) => Poll::Ready(r),
            None => Poll::Pending,
        }
    }
}
