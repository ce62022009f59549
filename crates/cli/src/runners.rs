//! The runner registry: every runner this binary can execute, in one list.

use std::sync::Arc;

use skillforge_engine::RunnerRegistry;

/// Every runner compiled into this binary. Adding a runner is one line here.
pub fn all() -> RunnerRegistry {
    RunnerRegistry::new()
        .with(Arc::new(skillforge_runner_process::ProcessRunner))
        .with(Arc::new(skillforge_runner_sandbox::SandboxRunner::with_containers(Arc::new(
            skillforge_runner_container::ContainerCommands,
        ))))
        .with(Arc::new(skillforge_runner_checker::CheckerRunner))
        .with(Arc::new(skillforge_runner_agent::AgentRunner::default()))
        .with(Arc::new(skillforge_runner_container::ContainerRunner))
}

/// Hands runner settings of `config.toml` to the runners that read them (`[runners.container]
/// host`). Called once the configuration is loaded.
pub fn configure(config: &crate::config::Config) {
    if let Some(host) = &config.runners.container.host {
        skillforge_runner_container::set_configured_host(host);
    }
}

/// Removes what runners of dead workers on this host left under `scratch_root` (sandbox clones of
/// a worker that was SIGKILLed mid-verification), and starts this process's orphan sweeper,
/// which kills job processes a dead worker left running on this host, now and every second
/// (`skillforge_runner_process::sweep_orphans`), and its container sweeper, which removes the
/// containers of dead workers of this host, now and every 5 s when an engine is configured
/// (`skillforge_runner_container::sweep_leftovers`). Called when a worker starts, on a tokio runtime.
pub fn clean_leftovers(scratch_root: &std::path::Path) {
    skillforge_runner_process::start_orphan_sweeper();
    skillforge_runner_container::start_leftover_sweeper();
    match skillforge_runner_sandbox::clean_leftovers(scratch_root) {
        Ok(report) => {
            for path in &report.removed {
                tracing::info!(path = %path.display(), "removed a dead worker's sandbox");
            }
            for (path, error) in &report.failed {
                tracing::warn!(path = %path.display(), error = %error, "could not remove a dead worker's sandbox");
            }
        }
        Err(e) => tracing::warn!(error = %e, "could not look for leftover sandboxes"),
    }
}
