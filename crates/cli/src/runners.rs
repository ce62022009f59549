//! The runner registry: every runner this binary can execute, in one list.

use std::sync::Arc;

use skillforge_engine::RunnerRegistry;

/// Every runner compiled into this binary. Adding a runner is one line here. A worker calls each
/// one's `on_worker_start` when it starts (the sandbox runner removes dead workers' clones, the
/// process runner starts its orphan sweeper).
pub fn all() -> RunnerRegistry {
    RunnerRegistry::new()
        .with(Arc::new(skillforge_runner_process::ProcessRunner))
        .with(Arc::new(skillforge_runner_sandbox::SandboxRunner))
        .with(Arc::new(skillforge_runner_checker::CheckerRunner))
        .with(Arc::new(skillforge_runner_agent::AgentRunner::default()))
}
