//! The GitHub side of `skillforge serve` (issue 16 item 5): every `[github] watch_every_secs`
//! (default 60 s), the ETag-conditional pull-request watcher over `[github] watch_repos` (only
//! while the harvester is on: its events feed nothing else), and one pass over the review watches
//! (sync; the stale reminder is a durable write job, run by a worker and applied by ingestion). With no watched repository and no review watch, nothing is requested.

use std::sync::Arc;
use std::time::Duration;

use skillforge_engine::QueueBackend;
use skillforge_forge::RepoRef;
use skillforge_forge::github::GitHub;
use skillforge_skillopt::github_review::review_watch_pass;
use skillforge_skillopt::github_write::WriteJobs;
use skillforge_skillopt::harvest::HarvestConfig;
use skillforge_skillopt::harvest::watcher::poll_repo;
use skillforge_store::Store;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Default seconds between passes.
pub const DEFAULT_WATCH_EVERY_SECS: u64 = 60;

/// What the loop needs.
pub struct GithubWatch {
    /// The client.
    pub forge: GitHub,
    /// Repositories whose PRs are polled.
    pub repos: Vec<RepoRef>,
    /// Seconds between passes.
    pub every: Duration,
    /// The control plane's home (passed to write jobs for `[github] token`).
    pub home: std::path::PathBuf,
}

/// Runs passes until `shutdown`.
pub async fn run_github_watch(
    watch: GithubWatch,
    store: &Store,
    backend: &Arc<dyn QueueBackend>,
    config: &HarvestConfig,
    shutdown: CancellationToken,
) {
    let poll_pulls = !watch.repos.is_empty() && config.is_enabled();
    if !watch.repos.is_empty() && !config.is_enabled() {
        warn!(
            "[github] watch_repos is set but the harvester is off ([skillopt] auto_trace_enabled): pull requests are not polled"
        );
    }
    loop {
        if poll_pulls {
            for repo in &watch.repos {
                match poll_repo(store, backend.as_ref(), &watch.forge, config, repo).await {
                    Ok(r) if r.not_modified => {}
                    Ok(r) => {
                        info!(repo = %repo, pulls = r.pulls_harvested, events = r.events, rows = r.rows, "pull requests harvested")
                    }
                    Err(e) => {
                        warn!(repo = %repo, error = %e, "pull-request poll failed; retried next pass")
                    }
                }
            }
        }
        let bin = crate::control::args::skillforge_bin();
        let at = WriteJobs {
            skillforge_bin: &bin,
            home: &watch.home,
            api_url: watch.forge.api_url(),
        };
        match review_watch_pass(
            store,
            &watch.forge,
            (backend.as_ref(), &at),
            chrono::Utc::now(),
        )
        .await
        {
            Ok(passes) => {
                for pass in passes.iter().filter(|p| p.reminded.is_some()) {
                    info!(issue = %pass.issue, job_id = pass.reminded.as_deref().unwrap_or(""), "stale review reminder submitted");
                }
            }
            Err(e) => warn!(error = %e, "review watch pass failed"),
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(watch.every) => {}
        }
    }
}
