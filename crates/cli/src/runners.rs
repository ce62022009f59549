//! The runner registry: every runner this binary can execute, in one list.

use std::sync::Arc;

use skillforge_engine::RunnerRegistry;

/// Every runner compiled into this binary. Adding a runner is one line here.
pub fn all() -> RunnerRegistry {
    RunnerRegistry::new()
        .with(Arc::new(skillforge_runner_process::ProcessRunner))
        .with(Arc::new(skillforge_runner_sandbox::SandboxRunner))
        .with(Arc::new(skillforge_runner_checker::CheckerRunner))
}
