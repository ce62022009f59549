//! The runtime-session lock of a foreground ask (seed: SkillOpt, "Live-traffic A/B interception
//! (off by default, #482)": the challenger runs "strictly serialized under the one runtime-session
//! lock already held by the foreground ask — never a second lock, so it can never self-deadlock on
//! session is busy"; S-72).
//!
//! A [`SessionLock`] is one named lock of the job queue (`agent-session:<template>:<runtime>`,
//! listed by `skillforge locks`), heartbeated while held and released when the ask ends; a holder
//! that died leaves it to go stale like any lease. An ask that may be intercepted takes it once
//! and hands `&SessionLock` to the challenger's call, which therefore cannot run without it and
//! never takes it again. Asking for a session this process already holds is refused at once with
//! "session is busy" ([`SessionError::Reentrant`]) instead of waiting for itself; another holder
//! is waited for up to a bound ([`SessionError::Busy`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use skillforge_engine::{EngineError, LockAcquire, QueueBackend, WorkerIdentity};

/// Prefix of every runtime-session lock name.
pub const SESSION_LOCK_PREFIX: &str = "agent-session:";
/// Heartbeat period of a held session lock.
pub const SESSION_HEARTBEAT: Duration = Duration::from_secs(2);
/// A session lock with no heartbeat for this long is stale (its holder died).
pub const SESSION_STALE_AFTER: Duration = Duration::from_secs(15);
const POLL: Duration = Duration::from_millis(100);

/// The session lock name of `template_id` on `runtime`.
pub fn session_lock_name(template_id: &str, runtime: &str) -> String {
    format!("{SESSION_LOCK_PREFIX}{template_id}:{runtime}")
}

/// Why a session could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// This process already holds the session: a second lock would wait for itself.
    #[error(
        "session is busy: `{name}` is already held by this ask (a second lock on it would self-deadlock)"
    )]
    Reentrant {
        /// The lock.
        name: String,
    },
    /// Another holder kept it for longer than the wait.
    #[error("session is busy: `{name}` is held by {holder} (waited {waited_secs} s)")]
    Busy {
        /// The lock.
        name: String,
        /// `worker@host:pid` of the holder.
        holder: String,
        /// How long this ask waited.
        waited_secs: u64,
    },
    /// The queue failed.
    #[error("job queue: {0}")]
    Queue(#[from] EngineError),
}

/// A held runtime-session lock (see the module docs). Dropping it without [`SessionLock::release`]
/// stops its heartbeat, so the lock goes stale after [`SESSION_STALE_AFTER`].
pub struct SessionLock {
    backend: Arc<dyn QueueBackend>,
    name: String,
    fencing_token: u64,
    renewer: tokio::task::JoinHandle<()>,
}

impl SessionLock {
    /// Takes session `name` for `owner`, waiting up to `wait` while another owner holds it;
    /// `on_busy` is called once, with the holder (`worker@host:pid`), when the wait begins.
    ///
    /// # Errors
    /// [`SessionError::Reentrant`] at once when `owner` already holds it; [`SessionError::Busy`]
    /// after `wait`; [`SessionError::Queue`].
    pub async fn acquire(
        backend: Arc<dyn QueueBackend>,
        owner: &WorkerIdentity,
        name: &str,
        wait: Duration,
        on_busy: impl FnOnce(&str),
    ) -> Result<Self, SessionError> {
        let started = Instant::now();
        let mut on_busy = Some(on_busy);
        loop {
            match backend
                .acquire_lock(name, owner, SESSION_HEARTBEAT, SESSION_STALE_AFTER)
                .await?
            {
                LockAcquire::Acquired { fencing_token } => {
                    let renewer =
                        tokio::spawn(renew(backend.clone(), name.to_owned(), fencing_token));
                    return Ok(Self {
                        backend,
                        name: name.to_owned(),
                        fencing_token,
                        renewer,
                    });
                }
                LockAcquire::Held(lease) if lease.owner_worker == owner.worker_id => {
                    return Err(SessionError::Reentrant {
                        name: name.to_owned(),
                    });
                }
                LockAcquire::Held(lease) if started.elapsed() >= wait => {
                    return Err(SessionError::Busy {
                        name: name.to_owned(),
                        holder: format!(
                            "{}@{}:{}",
                            lease.owner_worker, lease.owner_host, lease.owner_pid
                        ),
                        waited_secs: started.elapsed().as_secs(),
                    });
                }
                LockAcquire::Held(lease) => {
                    if let Some(tell) = on_busy.take() {
                        tell(&format!(
                            "{}@{}:{}",
                            lease.owner_worker, lease.owner_host, lease.owner_pid
                        ));
                    }
                    tokio::time::sleep(POLL).await;
                }
            }
        }
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The fencing token it is held under.
    pub fn fencing_token(&self) -> u64 {
        self.fencing_token
    }

    /// Releases the lock; false when it was no longer ours (it went stale and was taken).
    ///
    /// # Errors
    /// [`SessionError::Queue`].
    pub async fn release(self) -> Result<bool, SessionError> {
        self.renewer.abort();
        Ok(self
            .backend
            .release_lock(&self.name, self.fencing_token)
            .await?)
    }
}

impl std::fmt::Debug for SessionLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionLock")
            .field("name", &self.name)
            .field("fencing_token", &self.fencing_token)
            .finish_non_exhaustive()
    }
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        self.renewer.abort();
    }
}

async fn renew(backend: Arc<dyn QueueBackend>, name: String, token: u64) {
    loop {
        tokio::time::sleep(SESSION_HEARTBEAT).await;
        match backend.renew_lock(&name, token).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(lock = %name, "the session lock is no longer ours");
                return;
            }
            Err(e) => {
                tracing::warn!(lock = %name, error = %e, "session lock heartbeat failed; retrying")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use skillforge_engine::sqlite::SqliteBackend;

    use super::*;

    // S-72
    #[tokio::test]
    async fn s72_a_held_session_is_never_locked_twice_and_others_wait_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let queue: Arc<dyn QueueBackend> = Arc::new(
            SqliteBackend::open(&dir.path().join("queue.db"))
                .await
                .unwrap(),
        );
        let (ask, other) = (WorkerIdentity::new("ask"), WorkerIdentity::new("other-ask"));
        let name = session_lock_name("planner", "scripted");
        let held = SessionLock::acquire(queue.clone(), &ask, &name, Duration::from_secs(5), |_| {
            panic!("free")
        })
        .await
        .unwrap();
        // A second lock by the holder is refused at once, never a wait on itself.
        let again = SessionLock::acquire(
            queue.clone(),
            &ask,
            &name,
            Duration::from_secs(3600),
            |_| {},
        )
        .await
        .unwrap_err();
        assert!(
            matches!(again, SessionError::Reentrant { .. })
                && again.to_string().contains("session is busy"),
            "{again}"
        );
        // Another ask announces its wait, waits its bound, then is told who holds it.
        let mut told = None;
        let busy = SessionLock::acquire(
            queue.clone(),
            &other,
            &name,
            Duration::from_millis(250),
            |h| told = Some(h.to_owned()),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&busy, SessionError::Busy { holder, .. } if holder.starts_with(&ask.worker_id)),
            "{busy}"
        );
        assert!(
            told.is_some_and(|h| h.starts_with(&ask.worker_id)),
            "the wait is announced with its holder"
        );
        assert!(
            queue.leases().await.unwrap().iter().any(|l| l.name == name),
            "listed by `skillforge locks`"
        );
        assert!(held.release().await.unwrap());
        let next = SessionLock::acquire(queue.clone(), &other, &name, Duration::ZERO, |_| {
            panic!("released")
        })
        .await
        .unwrap();
        assert!(next.release().await.unwrap());
    }
}
