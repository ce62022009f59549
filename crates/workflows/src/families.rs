//! The registry of workflow families: one line per family, naming the job workflow it owns and the
//! [`ResultHandler`] that applies its finished jobs (ARCHITECTURE.md, "Workflow family").
//!
//! Every control-plane caller of [`skillforge_engine::ingest::ingest_once`] (`serve`, every
//! waiting command, `train`, `demo`) ingests through [`Families`], so a job's result is applied by
//! its own family whichever command ingests it next. A job whose workflow no line names is never
//! acknowledged: [`Families`] answers [`ApplyError::NoHandler`], the ingestion transaction rolls
//! back and the result stays pending with an error logged, for a build that knows the family.
//!
//! Adding a family is one line in [`all`] (and its folder, its `workflows/<family>.toml`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use skillforge_engine::Job;
use skillforge_engine::ingest::{ApplyError, RecordOnly, ResultHandler};
use skillforge_store::blobs::BlobStore;
use sqlx::SqliteConnection;

use crate::evaluator::{EVALUATE_WORKFLOW, EvaluatorHandler};
use crate::harvest::HarvestHandler;
use crate::train::TrainResultHandler;
use crate::train::generation::TRAIN_WORKFLOW;

/// Workflow of `skillforge jobs submit` jobs (the engine's default, [`skillforge_engine::JobSpec::new`]).
pub const ADHOC_WORKFLOW: &str = "adhoc";
/// Workflow of `skillforge verify` jobs (one hard-verifier run, read back by the command).
pub const VERIFY_WORKFLOW: &str = "verify";
/// Workflow of `skillforge check` jobs (one checker run, read back by the command).
pub const CHECK_WORKFLOW: &str = "check";
/// Workflow of `skillforge ask` agent jobs (the answer is read back by the command).
pub const ASK_WORKFLOW: &str = "ask";
/// Workflow of `skillforge ab` agent jobs (both arms' answers, read back by the command).
pub const AB_WORKFLOW: &str = "ab";
/// Workflow of `skillforge binary` judge jobs (BINEVAL answers, read back by the command).
pub const BINEVAL_WORKFLOW: &str = "bineval";
/// Workflow of jobs pushed through the apalis adapter (`skillforge-engine-apalis`).
pub const APALIS_WORKFLOW: &str = "apalis";

/// What a family's handler is built from: the control plane's home.
#[derive(Debug, Clone, Copy)]
pub struct HandlerEnv<'a> {
    /// The home directory (`<home>/blobs` for artifacts a handler stores).
    pub home: &'a Path,
}

/// One registry line.
#[derive(Clone, Copy)]
pub struct Family {
    /// The family's name, also its folder (`crates/workflows/src/<name>/`) when it has one.
    pub name: &'static str,
    /// `JobSpec::workflow` of every job the family enqueues; unique across the registry.
    pub workflow: &'static str,
    /// One line for docs and `--help`: what the family's jobs are and what ingestion writes.
    pub summary: &'static str,
    /// Builds the family's handler for a control plane.
    pub handler: fn(HandlerEnv<'_>) -> Arc<dyn ResultHandler>,
}

impl std::fmt::Debug for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Family").field("name", &self.name).field("workflow", &self.workflow).finish_non_exhaustive()
    }
}

fn record_only(_: HandlerEnv<'_>) -> Arc<dyn ResultHandler> {
    Arc::new(RecordOnly)
}

static FAMILIES: [Family; 14] = [
    Family {
        name: "train",
        workflow: TRAIN_WORKFLOW,
        summary: "train mode: option-generation jobs become review options; the optimizer's files are imported by its step",
        handler: |env| Arc::new(TrainResultHandler { blobs: BlobStore::in_home(env.home) }),
    },
    Family {
        name: "harvest",
        workflow: crate::harvest::WORKFLOW,
        summary: "Mode A harvesting: hard-verifier, checker and review leg jobs become their feedback rows",
        handler: |_| Arc::new(HarvestHandler),
    },
    Family {
        name: "github",
        workflow: crate::github_write::GITHUB_WORKFLOW,
        summary: "GitHub writes (review issues, comments): a succeeded write is recorded once under its idempotency key",
        handler: |_| Arc::new(crate::github_write::GithubWriteHandler),
    },
    Family {
        name: "evaluator",
        workflow: EVALUATE_WORKFLOW,
        summary: "evaluator profiles: judge and render jobs, read back by the evaluation that enqueued them",
        handler: |_| Arc::new(EvaluatorHandler),
    },
    Family {
        name: "evalloop",
        workflow: crate::evalloop::stages::EVAL_WORKFLOW,
        summary: "the skill eval loop: arm, verify and judge jobs become their files (run.json, verify.json, verdict.json)",
        handler: |_| Arc::new(crate::evalloop::handler::EvalResultHandler),
    },
    Family {
        name: "optimize",
        workflow: crate::optimize::WORKFLOW,
        summary: "the optimize loop: experiment jobs, read back through its job port by the loop; no effect at ingestion",
        handler: record_only,
    },
    Family {
        name: "promotion",
        workflow: crate::promotion::events::EVENTS_WORKFLOW,
        summary: "promotion: webhook delivery jobs (no domain effect) and canary decision jobs, applied at ingestion (graduate or roll back)",
        handler: |_| Arc::new(crate::promotion::window::CanaryDecisionHandler),
    },
    Family {
        name: "ab",
        workflow: AB_WORKFLOW,
        summary: "`ab`: champion and challenger answers, read back by the command that records the A/B",
        handler: record_only,
    },
    Family {
        name: "ask",
        workflow: ASK_WORKFLOW,
        summary: "`ask`: one answer, read back by the command",
        handler: record_only,
    },
    Family {
        name: "bineval",
        workflow: BINEVAL_WORKFLOW,
        summary: "`binary`: BINEVAL judge answers, read back by the command",
        handler: record_only,
    },
    Family {
        name: "apalis",
        workflow: APALIS_WORKFLOW,
        summary: "jobs of the apalis adapter: their handlers run in the apalis worker; no domain effect",
        handler: record_only,
    },
    Family {
        name: "adhoc",
        workflow: ADHOC_WORKFLOW,
        summary: "`jobs submit`: no domain effect beyond the applied-result record",
        handler: record_only,
    },
    Family {
        name: "verify",
        workflow: VERIFY_WORKFLOW,
        summary: "`verify`: one hard-verifier run read back by the command; no domain effect",
        handler: record_only,
    },
    Family {
        name: "check",
        workflow: CHECK_WORKFLOW,
        summary: "`check`: one checker run read back by the command; no domain effect",
        handler: record_only,
    },
];

/// Every family, in registry order.
pub fn all() -> &'static [Family] {
    &FAMILIES
}

/// The family owning `workflow`, if any.
pub fn by_workflow(workflow: &str) -> Option<&'static Family> {
    FAMILIES.iter().find(|f| f.workflow == workflow)
}

/// The control plane's result handler: every family's handler, dispatched by `job.spec.workflow`.
#[derive(Clone)]
pub struct Families {
    handlers: BTreeMap<&'static str, Arc<dyn ResultHandler>>,
}

impl Families {
    /// Every registered family's handler for the control plane of `home`.
    pub fn for_home(home: &Path) -> Self {
        let env = HandlerEnv { home };
        Self { handlers: FAMILIES.iter().map(|f| (f.workflow, (f.handler)(env))).collect() }
    }

    /// The handler of `workflow`, if a family owns it.
    pub fn handler(&self, workflow: &str) -> Option<&dyn ResultHandler> {
        self.handlers.get(workflow).map(AsRef::as_ref)
    }
}

impl std::fmt::Debug for Families {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Families").field("workflows", &self.handlers.keys().collect::<Vec<_>>()).finish()
    }
}

#[async_trait::async_trait]
impl ResultHandler for Families {
    /// # Errors
    /// [`ApplyError::NoHandler`] for a workflow no family owns; else the family handler's error.
    async fn apply(&self, conn: &mut SqliteConnection, job: &Job) -> Result<(), ApplyError> {
        match self.handler(&job.spec.workflow) {
            Some(handler) => handler.apply(conn, job).await,
            None => Err(ApplyError::NoHandler { workflow: job.spec.workflow.clone(), job_id: job.id.clone() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workflows_are_unique_and_every_job_builder_is_registered() {
        let mut seen = std::collections::BTreeSet::new();
        for family in all() {
            assert!(seen.insert(family.workflow), "workflow `{}` registered twice", family.workflow);
        }
        let engine_default = skillforge_engine::JobSpec::new("process", serde_json::Value::Null).workflow;
        for workflow in [
            TRAIN_WORKFLOW,
            crate::harvest::WORKFLOW,
            EVALUATE_WORKFLOW,
            crate::evalloop::stages::EVAL_WORKFLOW,
            crate::optimize::WORKFLOW,
            crate::promotion::events::EVENTS_WORKFLOW,
            engine_default.as_str(),
        ] {
            assert!(by_workflow(workflow).is_some(), "jobs of workflow `{workflow}` are enqueued but no family owns them");
        }
        let families = Families::for_home(Path::new("/nonexistent"));
        assert!(families.handler("bogus").is_none());
        assert_eq!(by_workflow("harvest").map(|f| f.name), Some("harvest"));
    }
}
