//! The change signal behind [`QueueChanges::change_seq`] and
//! [`QueueChanges::changed_since`], shared by both backends:
//! a generation counter, a [`Notify`] for the waiters of this process, and a count of waiters, so
//! the backend's watcher (SQLite: the `data_version` poll; Redis: the `changed` subscription)
//! only works while someone waits.
//!
//! [`QueueChanges::change_seq`]: crate::backend::QueueChanges::change_seq
//! [`QueueChanges::changed_since`]: crate::backend::QueueChanges::changed_since

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// One backend's change signal (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct ChangeSignal {
    /// Signalled (to every current waiter) when some job's state may have changed.
    changed: Notify,
    /// Moves with every signal.
    generation: AtomicU64,
    /// How many waiters are waiting (on SQLite also the idle `lease` calls: its watcher serves both).
    waiters: AtomicUsize,
    /// Tells an idle watcher that a waiter arrived.
    waiter_arrived: Notify,
}

/// Counts one waiter while alive.
pub(crate) struct WaiterGuard<'a>(&'a ChangeSignal);

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        self.0.waiters.fetch_sub(1, Ordering::SeqCst);
    }
}

impl ChangeSignal {
    /// Registers a waiter until the guard is dropped, and tells an idle watcher.
    pub(crate) fn waiting(&self) -> WaiterGuard<'_> {
        self.waiters.fetch_add(1, Ordering::SeqCst);
        self.waiter_arrived.notify_one();
        WaiterGuard(self)
    }

    /// Whether some waiter is registered.
    pub(crate) fn has_waiters(&self) -> bool {
        self.waiters.load(Ordering::SeqCst) > 0
    }

    /// Returns once a waiter registered (at once when one did since the last call: the permit
    /// is kept).
    pub(crate) async fn waiter_arrived(&self) {
        self.waiter_arrived.notified().await;
    }

    /// Moves the generation and wakes every current waiter of this process.
    pub(crate) fn signal(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    /// See `QueueChanges::change_seq`.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// See `QueueChanges::changed_since`. While it waits, it counts as a waiter, so the watcher
    /// runs and another process's change wakes it too. A watcher that was idle re-baselines when
    /// it starts and signals then (a change made before the registration is not missed: the
    /// caller's return is spurious and it re-reads).
    pub(crate) async fn changed_since(&self, seen: u64, timeout: Duration) {
        let notified = self.changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let _waiting = self.waiting();
        if self.generation() != seen {
            return;
        }
        tokio::select! {
            () = &mut notified => {}
            () = tokio::time::sleep(timeout) => {}
        }
    }
}

impl ChangeSignal {
    /// [`Self::changed_since`] without counting as a waiter: the watcher does not run for it, so
    /// this process's signals wake it at once and another process's change only while some
    /// other waiter keeps the watcher running (else at `timeout`).
    pub(crate) async fn changed_here_since(&self, seen: u64, timeout: Duration) {
        let notified = self.changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.generation() != seen {
            return;
        }
        tokio::select! {
            () = &mut notified => {}
            () = tokio::time::sleep(timeout) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const LONG: Duration = Duration::from_secs(3600);
    const DEADLINE: Duration = Duration::from_secs(30);

    #[tokio::test]
    async fn a_signal_wakes_a_waiter_and_a_past_signal_answers_at_once() {
        let s = Arc::new(ChangeSignal::default());
        let seen = s.generation();
        let waiter = tokio::spawn({
            let s = s.clone();
            async move { s.changed_since(seen, LONG).await }
        });
        // The waiter registers before it sleeps: wait for that, then signal.
        tokio::time::timeout(DEADLINE, async {
            while !s.has_waiters() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the waiter registers");
        s.signal();
        tokio::time::timeout(DEADLINE, waiter)
            .await
            .expect("a signal wakes the waiter")
            .unwrap();
        assert!(!s.has_waiters(), "a woken waiter unregisters");
        tokio::time::timeout(DEADLINE, s.changed_since(seen, LONG))
            .await
            .expect("a past signal answers at once");
    }

    #[tokio::test]
    async fn a_wait_for_this_processs_changes_is_woken_by_a_signal_without_counting_as_a_waiter() {
        let s = Arc::new(ChangeSignal::default());
        let seen = s.generation();
        let waiter = tokio::spawn({
            let s = s.clone();
            async move { s.changed_here_since(seen, LONG).await }
        });
        tokio::task::yield_now().await;
        assert!(!s.has_waiters(), "the watcher is not asked to run for it");
        s.signal();
        tokio::time::timeout(DEADLINE, waiter)
            .await
            .expect("a signal wakes it")
            .unwrap();
        tokio::time::timeout(DEADLINE, s.changed_here_since(seen, LONG))
            .await
            .expect("a past signal answers at once");
    }
}
