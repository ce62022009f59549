//! The workflow family as a type: a [`Family`] names the job workflow it owns and the
//! [`ResultHandler`] that applies its finished jobs at ingestion; [`Families`] dispatches one
//! ingestion pass to every registered family's handler (ARCHITECTURE.md, "Workflow family").
//!
//! Each product crate exports its lines (`skillforge_skillopt::FAMILIES`,
//! `skillforge_evalloop::FAMILY`, `skillforge_optimize::FAMILY`); the binary concatenates them with
//! [`COMMAND_FAMILIES`] into the one registry. Every control-plane caller of
//! [`skillforge_engine::ingest::ingest_once`] ingests through [`Families`], so a job's result is
//! applied by its own family whichever command ingests it next. A job whose workflow no family
//! names is never acknowledged: [`Families`] answers [`ApplyError::NoHandler`], the ingestion
//! transaction rolls back and the result stays pending with an error logged, for a build that
//! knows the family.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use skillforge_engine::Job;
use skillforge_engine::ingest::{ApplyError, RecordOnly, ResultHandler};
use sqlx::SqliteConnection;

/// Workflow of `skillforge jobs submit` jobs (the engine's default, [`skillforge_engine::JobSpec::new`]).
pub const ADHOC_WORKFLOW: &str = "adhoc";
/// Workflow of `skillforge verify` jobs (one hard-verifier run, read back by the command).
pub const VERIFY_WORKFLOW: &str = "verify";
/// Workflow of `skillforge check` jobs (one checker run, read back by the command).
pub const CHECK_WORKFLOW: &str = "check";
/// Workflow of `skillforge ask` agent jobs (the answer is read back by the command).
pub const ASK_WORKFLOW: &str = "ask";
/// Workflow of jobs pushed through the apalis adapter (`skillforge-engine-apalis`).
pub const APALIS_WORKFLOW: &str = "apalis";

/// `ask`'s stages (`workflows/ask.toml`): `answer`, and `live_ab_challenger` for a live A/B.
pub const ASK_SOURCE: crate::StageSource = crate::StageSource {
    family: "ask",
    workflow: ASK_WORKFLOW,
    shipped: include_str!("../../../workflows/ask.toml"),
    stage_names: &["answer", "live_ab_challenger"],
};
/// `verify`'s stage (`workflows/verify.toml`): `hard_verifier`.
pub const VERIFY_SOURCE: crate::StageSource = crate::StageSource {
    family: "verify",
    workflow: VERIFY_WORKFLOW,
    shipped: include_str!("../../../workflows/verify.toml"),
    stage_names: &["hard_verifier"],
};
/// `check`'s stage (`workflows/check.toml`): `checkers`.
pub const CHECK_SOURCE: crate::StageSource = crate::StageSource {
    family: "check",
    workflow: CHECK_WORKFLOW,
    shipped: include_str!("../../../workflows/check.toml"),
    stage_names: &["checkers"],
};

/// What a family's handler is built from: the control plane's home.
#[derive(Debug, Clone, Copy)]
pub struct HandlerEnv<'a> {
    /// The home directory (`<home>/blobs` for artifacts a handler stores).
    pub home: &'a Path,
}

/// One registry line: a workflow family.
///
/// A family owns every job whose `JobSpec::workflow` is [`Family::workflow`]. Its stages are
/// data (`workflows/<name>.toml`, read through [`crate::StageSource`]) and its jobs are built by
/// [`crate::StageDef::job`] and submitted through the port ([`crate::StageJobs`]), which records
/// them as pending work. Its effects are applied either by [`Family::handler`] inside the
/// ingestion transaction, or by the step that waited for the job, from the applied record, once
/// [`crate::StageJobs::wait`] has returned (the port's `wait` returns only after ingestion).
#[derive(Clone, Copy)]
pub struct Family {
    /// The family's name (its crate or module, and the `workflows/<name>.toml` it reads).
    pub name: &'static str,
    /// `JobSpec::workflow` of every job the family enqueues; unique across the registry.
    pub workflow: &'static str,
    /// One line for docs and `--help`: what the family's jobs are and what ingestion writes.
    pub summary: &'static str,
    /// Where its stages come from (`workflows/<name>.toml`); `None` for a workflow whose jobs
    /// are specified whole by their submitter (`jobs submit`, the apalis adapter).
    pub stages: Option<crate::StageSource>,
    /// Builds the family's handler for a control plane.
    pub handler: fn(HandlerEnv<'_>) -> Arc<dyn ResultHandler>,
}

impl std::fmt::Debug for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Family")
            .field("name", &self.name)
            .field("workflow", &self.workflow)
            .finish_non_exhaustive()
    }
}

/// The handler of a family with no domain effect at ingestion: the engine records the applied
/// result and the command that submitted the job reads it back.
pub fn record_only(_: HandlerEnv<'_>) -> Arc<dyn ResultHandler> {
    Arc::new(RecordOnly)
}

/// The command workflows that belong to no product: their jobs have no domain effect beyond the
/// applied-result record, read back by the command that submitted them.
pub static COMMAND_FAMILIES: [Family; 5] = [
    Family {
        name: "ask",
        workflow: ASK_WORKFLOW,
        summary: "`ask`: one answer, read back by the command",
        stages: Some(ASK_SOURCE),
        handler: record_only,
    },
    Family {
        name: "apalis",
        workflow: APALIS_WORKFLOW,
        summary: "jobs of the apalis adapter: their handlers run in the apalis worker; no domain effect",
        stages: None,
        handler: record_only,
    },
    Family {
        name: "adhoc",
        workflow: ADHOC_WORKFLOW,
        summary: "`jobs submit`: no domain effect beyond the applied-result record",
        stages: None,
        handler: record_only,
    },
    Family {
        name: "verify",
        workflow: VERIFY_WORKFLOW,
        summary: "`verify`: one hard-verifier run read back by the command; no domain effect",
        stages: Some(VERIFY_SOURCE),
        handler: record_only,
    },
    Family {
        name: "check",
        workflow: CHECK_WORKFLOW,
        summary: "`check`: one checker run read back by the command; no domain effect",
        stages: Some(CHECK_SOURCE),
        handler: record_only,
    },
];

/// The control plane's result handler: every family's handler, dispatched by `job.spec.workflow`.
#[derive(Clone)]
pub struct Families {
    handlers: BTreeMap<&'static str, Arc<dyn ResultHandler>>,
}

impl Families {
    /// The handlers of `families` for the control plane of `home`.
    ///
    /// # Panics
    /// When two families name the same workflow (a registry bug, caught by the binary's tests).
    pub fn new<'f>(families: impl IntoIterator<Item = &'f Family>, home: &Path) -> Self {
        let env = HandlerEnv { home };
        let mut handlers = BTreeMap::new();
        for family in families {
            let previous = handlers.insert(family.workflow, (family.handler)(env));
            assert!(
                previous.is_none(),
                "workflow `{}` registered twice",
                family.workflow
            );
        }
        Self { handlers }
    }

    /// The handler of `workflow`, if a family owns it.
    pub fn handler(&self, workflow: &str) -> Option<&dyn ResultHandler> {
        self.handlers.get(workflow).map(AsRef::as_ref)
    }
}

impl std::fmt::Debug for Families {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Families")
            .field("workflows", &self.handlers.keys().collect::<Vec<_>>())
            .finish()
    }
}

#[async_trait::async_trait]
impl ResultHandler for Families {
    /// # Errors
    /// [`ApplyError::NoHandler`] for a workflow no family owns; else the family handler's error.
    async fn apply(&self, conn: &mut SqliteConnection, job: &Job) -> Result<(), ApplyError> {
        match self.handler(&job.spec.workflow) {
            Some(handler) => handler.apply(conn, job).await,
            None => Err(ApplyError::NoHandler {
                workflow: job.spec.workflow.clone(),
                job_id: job.id.clone(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_stage_files_are_valid_and_match_what_the_commands_always_built() {
        for source in [ASK_SOURCE, VERIFY_SOURCE, CHECK_SOURCE] {
            let def: crate::WorkflowDef = source
                .shipped()
                .unwrap_or_else(|e| panic!("{}: {e}", source.shipped_file()));
            for name in source.stage_names {
                assert_eq!(def.stage(name).workflow, source.workflow);
            }
        }
        let ask: crate::WorkflowDef = ASK_SOURCE.shipped().unwrap();
        let answer = ask.stage("answer");
        assert_eq!(
            (
                answer.timeout_secs + answer.setup_secs,
                answer.attempts,
                answer.retry_failed_runs
            ),
            (600, 3, true)
        );
        let verify: crate::WorkflowDef = VERIFY_SOURCE.shipped().unwrap();
        let hv = verify.stage("hard_verifier");
        assert_eq!(
            (
                hv.setup_secs,
                hv.heartbeat_secs,
                hv.stale_after_secs,
                hv.retry_failed_runs
            ),
            (60, 2, 15, false)
        );
        let check: crate::WorkflowDef = CHECK_SOURCE.shipped().unwrap();
        assert!(!check.stage("checkers").retry_failed_runs);
    }
}
