//! Ownership labels and the leftover sweep: every container the runner creates names the worker
//! process and host that own it, and a worker starting on a host removes the containers of dead
//! workers of that host (a SIGKILLed worker cannot remove its own), as the sandbox runner does
//! with its clones.
//!
//! A container is a leftover when its [`LABEL_HOST`] is this host and its [`LABEL_OWNER`] (the
//! process runner's owner marker, `<pid>:<start time>:<pid namespace>`) names a process that is
//! gone ([`skillforge_runner_process::owner_alive`]). Containers of live workers, of other hosts
//! sharing the engine, and without the labels are never touched.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use skillforge_runner_process::{owner_alive, owner_marker};

use crate::engine::{Engine, engine_configured, resolve_host};
use crate::error::ContainerError;
use crate::run::remove;

/// Label naming the owning worker process (its owner marker).
pub const LABEL_OWNER: &str = "io.skillforge.owner";
/// Label naming the owning worker's host.
pub const LABEL_HOST: &str = "io.skillforge.host";
/// Label naming the job the container runs.
pub const LABEL_JOB: &str = "io.skillforge.job";

/// Pause between two sweeps of [`start_leftover_sweeper`].
pub const SWEEP_EVERY: Duration = Duration::from_secs(5);

/// This host's name as written in [`LABEL_HOST`].
pub fn host_name() -> String {
    hostname::get()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown-host".to_owned())
}

/// The labels of a container run for `job_id` by this process.
pub(crate) fn labels(job_id: &str) -> HashMap<String, String> {
    HashMap::from([
        (LABEL_OWNER.to_owned(), owner_marker().to_owned()),
        (LABEL_HOST.to_owned(), host_name()),
        (LABEL_JOB.to_owned(), job_id.to_owned()),
    ])
}

/// Removes every container on the engine at `host` that a dead worker of this host left;
/// returns the names of the removed containers.
///
/// # Errors
/// [`ContainerError::EngineUnreachable`] or [`ContainerError::Engine`] when the containers
/// cannot be listed; a container that cannot be removed is logged and skipped.
pub async fn sweep_leftovers(host: &str) -> Result<Vec<String>, ContainerError> {
    let engine = Engine::connect(host).await?;
    let listed = engine
        .list_containers(true, &[LABEL_OWNER.to_owned()])
        .await?;
    let this_host = host_name();
    let mut removed = Vec::new();
    for container in listed {
        let labels = container.labels.unwrap_or_default();
        let (Some(owner), Some(owner_host)) = (labels.get(LABEL_OWNER), labels.get(LABEL_HOST))
        else {
            continue;
        };
        if *owner_host != this_host || owner_alive(owner) {
            continue;
        }
        let Some(id) = container.id else { continue };
        let name = container
            .names
            .and_then(|n| n.into_iter().next())
            .unwrap_or_else(|| id.clone());
        if remove(&engine, &id).await {
            tracing::warn!(container = %name, owner, job = labels.get(LABEL_JOB).map_or("unknown", String::as_str),
                "removed a container a dead worker left");
            removed.push(name.trim_start_matches('/').to_owned());
        }
    }
    Ok(removed)
}

/// Starts, once per process, a background task on the current tokio runtime that runs
/// [`sweep_leftovers`] on the engine [`resolve_host`] picks, now and then every [`SWEEP_EVERY`].
/// Does nothing when no engine is configured and no default socket exists; an engine that does
/// not answer is logged once (at debug level) and asked again at the next sweep.
pub fn start_leftover_sweeper() {
    static STARTED: AtomicBool = AtomicBool::new(false);
    if !engine_configured() || STARTED.swap(true, Ordering::SeqCst) {
        return;
    }
    tokio::spawn(async {
        let mut is_logged = false;
        loop {
            let host = resolve_host(None);
            match sweep_leftovers(&host).await {
                Ok(_) => is_logged = false,
                Err(error) if !is_logged => {
                    tracing::debug!(%error, "could not look for leftover containers");
                    is_logged = true;
                }
                Err(_) => {}
            }
            tokio::time::sleep(SWEEP_EVERY).await;
        }
    });
}
