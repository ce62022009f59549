//! The runner registry: runner kind → runner, as the worker dispatches jobs.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use skillforge_runner::Runner;

/// Runners a worker can execute, keyed by [`Runner::kind`].
#[derive(Clone, Default)]
pub struct RunnerRegistry {
    runners: BTreeMap<&'static str, Arc<dyn Runner>>,
}

impl RunnerRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a runner under its own kind, replacing any previous one of that kind.
    pub fn with(mut self, runner: Arc<dyn Runner>) -> Self {
        self.runners.insert(runner.kind(), runner);
        self
    }

    /// The runner for `kind`, if registered.
    pub fn get(&self, kind: &str) -> Option<Arc<dyn Runner>> {
        self.runners.get(kind).cloned()
    }

    /// Calls every runner's [`Runner::on_worker_start`] with `scratch_root`, in kind order.
    pub fn on_worker_start(&self, scratch_root: &Path) {
        for runner in self.runners.values() {
            runner.on_worker_start(scratch_root);
        }
    }

    /// Registered kinds, sorted.
    pub fn kinds(&self) -> Vec<&'static str> {
        self.runners.keys().copied().collect()
    }
}

impl std::fmt::Debug for RunnerRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunnerRegistry")
            .field("kinds", &self.kinds())
            .finish()
    }
}
