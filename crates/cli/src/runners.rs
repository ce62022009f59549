//! The runner registry: every runner this binary can execute, in one list.

use std::sync::Arc;

use skillforge_engine::RunnerRegistry;

/// Every runner compiled into this binary. Adding a runner is one line here. A worker calls each
/// one's `on_worker_start` when it starts (the sandbox runner removes dead workers' clones, the
/// process runner starts its orphan sweeper, the container runner its leftover-container sweeper).
/// The sandbox runner runs `verify --image` payloads, and the agent runner `container` payloads,
/// through the container runner's engine.
pub fn all() -> RunnerRegistry {
    RunnerRegistry::new()
        .with(Arc::new(skillforge_runner_process::ProcessRunner))
        .with(Arc::new(
            skillforge_runner_sandbox::SandboxRunner::with_containers(Arc::new(
                skillforge_runner_container::ContainerCommands,
            )),
        ))
        .with(Arc::new(skillforge_runner_checker::CheckerRunner))
        .with(Arc::new(
            skillforge_runner_agent::AgentRunner::default()
                .with_containers(Arc::new(skillforge_runner_container::ContainerAgents)),
        ))
        .with(Arc::new(skillforge_runner_container::ContainerRunner))
}

/// Hands runner settings of `config.toml` to the runners that read them (`[runners.container]
/// host`). Called once the configuration is loaded.
pub fn configure(config: &crate::config::Config) {
    if let Some(host) = &config.runners.container.host {
        skillforge_runner_container::set_configured_host(host);
    }
}
