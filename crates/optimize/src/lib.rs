//! The optimize loop (seed: optimize-loop, all of it; DESIGN §1): a spec, a hypothesis backlog
//! with opportunity records, experiments in git worktrees as `agent` jobs, measurements as
//! `process` jobs, degenerate gates, judge batches with a cache, the decide step with noise and
//! held-out confirmation, integration of the winner and file-disjoint runners-up, checkpointed
//! persistence with crash recovery, and stopping criteria.
//!
//! The product's skeleton: [`FAMILY`] (its line in the family registry), [`stages`] (its stage
//! definitions, job builder and the one way it runs jobs through the stage core's
//! [`skillforge_stage::StageJobs`] port), [`handler`] (ingestion records only), [`steps`] (the
//! loop's steps, one per file), and the pure decision files.
//!
//! Pure logic, one concept per file: [`spec`], [`backlog`], [`decide`], [`gates`], [`measure`],
//! [`judge`], [`remote`], [`stopping`], [`brief`], [`digest`], [`snapshot`], [`delegation`].
//! Persistence: [`log`] (the experiment log and its verified checkpoints), [`state`] (state root,
//! markers, recovery scan), [`lock`] (one control plane per run), [`fleet`] (a job's checkout
//! sent by content to a fleet that does not share this disk), [`report`] (the wrap-up report).
//! The loop: [`run`] (init, ticks, resume, stop), [`ctx`] (the context and events every step
//! shares), [`git`] (worktrees, commits, merges).
//!
//! **Architecture Invariant:** the experiment log on disk is the source of truth; every
//! checkpoint (CP-2, CP-3, CP-4) is written and read back before the loop goes on, and every
//! job is keyed by an idempotency key derived from the spec and experiment number, so a resumed
//! run finds the jobs it already dispatched instead of dispatching them again.

pub mod backlog;
pub mod brief;
pub mod ctx;
pub mod decide;
pub mod delegation;
pub mod digest;
pub mod fleet;
pub mod gates;
pub mod git;
pub mod handler;
pub mod judge;
pub mod lock;
pub mod log;
pub mod measure;
pub mod noise;
pub mod remote;
pub mod report;
pub mod run;
pub mod snapshot;
pub mod spec;
pub mod stages;
pub mod state;
pub mod steps;
pub mod stopping;

/// Refuses YAML past the contract's size and nesting limits before any parser sees it (issue 12
/// item 7: a 100 000-level document must be a clear error, never a stack overflow); `what` names
/// the file (or ref) in the message.
///
/// # Errors
/// [`OptimizeError::Invalid`] naming `what` and the limit crossed.
pub fn check_yaml(text: &str, what: &str) -> Result<(), OptimizeError> {
    skillforge_contract::limits::check_yaml(text)
        .map_err(|e| OptimizeError::Invalid(format!("{what} {e}")))
}

/// The workflow name jobs carry (defined with the stages).
pub use stages::WORKFLOW;

/// Why an optimize command could not do what was asked. The CLI maps `Invalid` to exit 2 and the
/// rest (`Busy` included) to exit 3.
#[derive(Debug, thiserror::Error)]
pub enum OptimizeError {
    /// Bad input: an invalid spec, backlog or state file, or a request the state refuses.
    #[error("{0}")]
    Invalid(String),
    /// A file could not be read or written.
    #[error("{0}")]
    Env(String),
    /// A git operation failed.
    #[error("{0}")]
    Git(String),
    /// The queue failed or a job could not be submitted or awaited.
    #[error("{0}")]
    Queue(String),
    /// Another control plane drives this run ([`lock::RunLock`]); the message names it.
    #[error("{0}")]
    Busy(String),
    /// Experiment `experiment`'s worker job could not run here (`not_runnable`: its runtime not
    /// logged in, its model API out of reach, its program missing): an environment fault, not a
    /// verdict on the hypothesis; the loop stops with [`stopping::StopReason::NotRunnable`] and
    /// keeps the experiment's receipt, so a resumed run starts the job again.
    #[error("exp-{experiment:03}'s worker could not run: {reason}")]
    NotRunnable {
        /// The experiment number.
        experiment: u32,
        /// The job's not-runnable reason, one line.
        reason: String,
    },
}

/// A failed atomic write is an [`OptimizeError::Env`] naming the file and the step.
impl From<skillforge_stage::fs::WriteError> for OptimizeError {
    fn from(e: skillforge_stage::fs::WriteError) -> Self {
        OptimizeError::Env(e.to_string())
    }
}

/// A failed git command is an [`OptimizeError::Git`]: `git <args> in `<dir>`: <stderr>`.
impl From<skillforge_stage::git::GitError> for OptimizeError {
    fn from(e: skillforge_stage::git::GitError) -> Self {
        OptimizeError::Git(e.to_string())
    }
}

/// The optimize loop's line in the family registry. Its decisions are applied where they are
/// made, by the loop, from each job's applied result; ingestion records the result only.
pub static FAMILY: skillforge_stage::Family = skillforge_stage::Family {
    name: "optimize",
    workflow: WORKFLOW,
    summary: "the optimize loop: experiment jobs, read back through its job port by the loop; no effect at ingestion",
    stages: Some(stages::SOURCE),
    handler: handler::handler,
};

#[cfg(test)]
mod limits_tests {
    use super::state::StateRoot;

    /// 100 000 nested flow sequences: far past the contract's nesting limit.
    fn deep() -> String {
        format!("{}{}", "[".repeat(100_000), "]".repeat(100_000))
    }

    fn refused(err: super::OptimizeError, file: &str) {
        let msg = err.to_string();
        assert!(matches!(err, super::OptimizeError::Invalid(_)), "{msg}");
        assert!(
            msg.contains(file) && msg.contains("nests collections deeper than the limit"),
            "{msg}"
        );
    }

    #[test]
    fn every_optimize_reader_refuses_100k_nesting_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = StateRoot::new(dir.path(), "ops");
        std::fs::create_dir_all(&root.root).unwrap();
        std::fs::write(super::log::log_path(&root.root), deep()).unwrap();
        refused(
            super::log::read(&root.root).unwrap_err(),
            "experiment-log.yaml",
        );
        std::fs::write(root.run_file(), deep()).unwrap();
        refused(super::run::read_run_file(&root).unwrap_err(), "run.yaml");
        std::fs::write(root.root.join(super::state::MARKER_FILE), deep()).unwrap();
        refused(
            super::state::read_marker(&root.root).unwrap_err(),
            "result.yaml",
        );
        std::fs::write(root.judge_cache(), deep()).unwrap();
        refused(
            super::steps::judging::read_cache(&root).unwrap_err(),
            "judge-cache.yaml",
        );
        refused(
            super::spec::Spec::parse(&deep(), "deep-spec.yaml").unwrap_err(),
            "deep-spec.yaml",
        );
        let err = super::measure::parse_output(&deep())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("measurement output") && err.contains("nests"),
            "{err}"
        );
    }
}
