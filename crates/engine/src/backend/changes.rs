//! [`QueueChanges`]: waiting for job states to change without polling the queue (the port's
//! `wait`, `jobs logs --follow`, a worker's idle lease).

use std::time::Duration;

use super::QueueCore;

/// A change signal over the whole queue: a counter to read before reading the jobs waited for,
/// and a wait for it to move. Every default is correct for a backend that cannot tell (the
/// counter stays `0` and the wait sleeps its timeout: the caller polls); both backends signal.
///
/// Nothing here fails: a lost notification only costs the wait its `timeout`.
#[async_trait::async_trait]
pub trait QueueChanges: QueueCore {
    /// A counter that moves whenever some job's state may have changed (a finish, cancel, reap,
    /// enqueue; on the embedded queue also any other process's commit to the file; on Redis any
    /// process's finish, cancel or reap). Read it
    /// *before* reading the jobs you wait for, then pass it to [`Self::changed_since`], so a
    /// change between the read and the wait is not missed. The default is a constant `0`.
    fn change_seq(&self) -> u64 {
        0
    }

    /// Returns once [`Self::change_seq`] moved past `seen`, or after `timeout`, whichever is
    /// first. Spurious returns are allowed (callers re-read what they wait for). The embedded
    /// queue wakes at once for a change of this process and within its `data_version` poll
    /// (1–2 ms) for another process's commit; Redis wakes on a message on the namespace's
    /// `changed` channel, which every script ending a job publishes (any process's finish,
    /// cancel, reap), within a round trip. A lost notification (Redis restarted, a subscription
    /// being set up) costs at most `timeout`: pass a bounded one and re-read. The default, for a
    /// backend that cannot tell, sleeps `timeout`: the caller polls.
    async fn changed_since(&self, seen: u64, timeout: Duration) {
        let _ = seen;
        tokio::time::sleep(timeout).await;
    }

    /// [`Self::changed_since`] for a caller that needs only this process's changes at once: a
    /// waiter whose jobs all run in its own in-process worker, that worker's idle leases while
    /// no other process relies on it. The embedded queue then does not run its `data_version`
    /// poll (every 1–2 ms) for this wait: this process's changes wake it at once, another
    /// process's only while some other wait keeps the poll running, else at `timeout` (pass a
    /// short one and re-read). The default is [`Self::changed_since`].
    async fn changed_here_since(&self, seen: u64, timeout: Duration) {
        self.changed_since(seen, timeout).await;
    }
}
