//! One agent call as a durable job, from the CLI: enqueue an `agent` job, wait for it (an
//! in-process worker on the embedded queue), and read its final message. Used by `ab`, `ask`
//! and `binary run --reviewer`.

use std::sync::Arc;

use anyhow::anyhow;
use skillforge_engine::{JobState, QueueBackend};
use skillforge_runner::ExitClass;
use skillforge_runner_agent::{AgentPayload, AgentReport};

use crate::context::Context;
use crate::control::waiter::{await_job, submit_checked};
use crate::exit::CliError;

/// An agent call to make.
#[derive(Debug, Clone)]
pub struct AgentCall<'a> {
    /// The command's stages (`workflows/{ab,ask,bineval}.toml`, `<home>` overrides applied).
    pub stages: &'a skillforge_stage::StageSource,
    /// The stage the job runs (`champion`, `challenger`, `judge`, `question`, `answer`): one of
    /// `stages.stage_names`.
    pub stage: &'a str,
    /// Runtime profile name.
    pub runtime: &'a str,
    /// The full prompt.
    pub prompt: String,
    /// Idempotency key: the same key is the same job (a retry, never a second call).
    pub key: String,
    /// The template version the agent answers as (`ask`): its commits carry the
    /// `Skillforge-Template` trailer (issue 37 item 8). `None` for judges and reviewers.
    pub template_version: Option<String>,
    /// The model the runtime runs (a name: `ask --model`, `ab --judge-model`); `None` = the
    /// runtime's own default.
    pub model: Option<String>,
}

/// The answer of a finished call.
#[derive(Debug, Clone)]
pub struct AgentAnswer {
    /// The job's id.
    pub job_id: String,
    /// The agent's final message ('' when it had none).
    pub message: String,
    /// The model its transcript named, when it named one.
    pub model: Option<String>,
}

/// Runs `call` as a durable `agent` job and waits for it.
///
/// # Errors
/// Exit 3 when the queue is unreachable or the job did not succeed (its state and error named).
pub async fn call_agent(
    ctx: &Context,
    backend: &Arc<dyn QueueBackend>,
    call: AgentCall<'_>,
) -> Result<AgentAnswer, CliError> {
    let mut payload = AgentPayload::new(call.runtime, call.prompt);
    payload.template_version = call.template_version;
    payload.model = call.model;
    let stages: skillforge_stage::WorkflowDef =
        call.stages.for_home(&ctx.home).map_err(CliError::usage)?;
    let spec = stages
        .stage(call.stage)
        .job(&payload, Some(call.key))
        .map_err(CliError::usage)?;
    let enqueued = submit_checked(ctx, backend.as_ref(), &spec).await?.enqueued;
    let job = await_job(ctx, backend, &enqueued.job_id, true).await?;
    let report: Option<AgentReport> = job
        .outcome
        .as_ref()
        .and_then(|o| serde_json::from_value(o.detail.clone()).ok());
    match (&job.state, report) {
        (JobState::Succeeded, Some(report)) if report.exit == ExitClass::Passed => {
            Ok(AgentAnswer {
                job_id: job.id.clone(),
                message: report.final_message.unwrap_or_default(),
                model: report.model,
            })
        }
        (state, _) => Err(CliError::env(anyhow!(
            "agent job {} ({} {}, runtime {}) ended {state}: {}",
            job.id,
            call.stages.workflow,
            call.stage,
            call.runtime,
            job.error
                .clone()
                .or_else(|| failure_text(&job))
                .unwrap_or_else(|| "no answer".to_owned())
        ))),
    }
}

/// Why an agent job gave no answer: the not-runnable reason (a missing or not-logged-in
/// runtime), else the agent's own final message.
fn failure_text(job: &skillforge_engine::Job) -> Option<String> {
    let outcome = job.outcome.as_ref()?;
    if let ExitClass::NotRunnable { reason } = &outcome.exit {
        return Some(reason.clone());
    }
    let report: AgentReport = serde_json::from_value(outcome.detail.clone()).ok()?;
    report
        .final_message
        .filter(|m| !m.trim().is_empty())
        .map(|m| format!("{}: {m}", outcome.exit.label()))
}
