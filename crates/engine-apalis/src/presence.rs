//! The worker's background duties while it polls: its presence lock and the stale-lease reaper.

use std::sync::Arc;
use std::time::Duration;

use skillforge_engine::worker::hold_presence;
use skillforge_engine::{QueueBackend, WorkerIdentity};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Presence and reaper tasks of one apalis worker; stopped by [`Self::stop`] or on drop.
#[derive(Debug)]
pub(crate) struct Background {
    stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl Background {
    /// Starts holding `worker:<id>` (as `skillforge worker` does, so `skillforge locks` lists the
    /// apalis worker) and, with `reap_every`, a reaper. Must run inside a tokio runtime.
    pub(crate) fn start(
        backend: Arc<dyn QueueBackend>,
        identity: WorkerIdentity,
        reap_every: Option<Duration>,
    ) -> Self {
        let stop = CancellationToken::new();
        let mut tasks = vec![tokio::spawn(hold_presence(
            backend.clone(),
            identity,
            stop.clone(),
        ))];
        if let Some(every) = reap_every {
            let stop = stop.clone();
            tasks.push(tokio::spawn(async move {
                skillforge_engine::reaper::run_reaper(backend.as_ref(), every, stop).await;
            }));
        }
        Self { stop, tasks }
    }

    /// Stops both and waits for them (the presence lock is released on the way out).
    pub(crate) async fn stop(mut self) {
        self.stop.cancel();
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
