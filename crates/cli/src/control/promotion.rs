//! The CLI's side of promotion on evidence (seed: SkillOpt, "Promotion policy + notifications";
//! S-51..S-63): the configured [`Policy`] and the step environment over this home's store and
//! queue. The steps themselves live in `skillforge_skillopt::promotion` (the notify seam
//! [`after_import`], event emission [`emit`] / [`emit_job_event`], the canary's durable decision
//! jobs [`check_canaries`]); `import`, `train`, `demo`, `ask`, `candidate` and `serve` call them here.

use std::sync::Arc;

use anyhow::anyhow;
use serde_json::{Value, json};
use skillforge_engine::QueueBackend;
use skillforge_skillopt::promotion::events::Event;
use skillforge_skillopt::promotion::notify::{self, Policy, PromotionEnv, PromotionError};
use skillforge_skillopt::promotion::reevaluate::{Decided, Redecision};
use skillforge_skillopt::promotion::stages::PromotionStages;
use skillforge_skillopt::promotion::{reevaluate, seam, window};
use skillforge_stage::Wait;
use skillforge_store::Store;

use crate::context::Context;
use crate::control::waiter::CliJobs;
use crate::exit::CliError;

/// The promotion policy of this home's config: `[skillopt]` guardrails, `[events]` sinks, the
/// canary window's defaults (resolutions 8).
pub fn policy(ctx: &Context) -> Policy {
    Policy {
        guardrails: ctx.config.skillopt.guardrails(),
        sinks: ctx.config.events.sinks(&ctx.home),
        window: window_config(ctx),
        pace: ctx.config.skillopt.pace(),
        gate_enabled: ctx.config.skillopt.gate_enabled == Some(true),
    }
}

fn stages(ctx: &Context) -> Result<PromotionStages, CliError> {
    PromotionStages::for_home(&ctx.home).map_err(CliError::usage)
}

fn cli_error(e: PromotionError) -> CliError {
    match e {
        PromotionError::Stages(_) => CliError::usage(anyhow!(e)),
        other => CliError::env(anyhow!(other)),
    }
}

/// Runs `step` in a promotion environment over `store`. The queue is opened only when `queue`
/// says the step needs it (a webhook sink, a canary check), so a command with no sink touches no
/// queue file (off ⇒ byte-identical).
async fn with_env<T>(
    ctx: &Context,
    store: &Store,
    queue: bool,
    step: impl AsyncFnOnce(&PromotionEnv<'_>) -> Result<T, PromotionError>,
) -> Result<T, CliError> {
    let policy = policy(ctx);
    let stages = stages(ctx)?;
    let backend: Option<Arc<dyn QueueBackend>> = if queue || policy.sinks.webhook_url.is_some() {
        Some(ctx.queue().await?)
    } else {
        None
    };
    let jobs = backend.map(|b| CliJobs::new(ctx, b, store.clone()));
    let env = PromotionEnv {
        store,
        policy: &policy,
        stages: &stages,
        jobs: jobs.as_ref().map(|j| j as _),
    };
    step(&env).await.map_err(cli_error)
}

/// Sends `event` to the configured sinks once (see [`notify::emit`]).
///
/// # Errors
/// Exit 3 when the event log cannot be written.
pub async fn emit(ctx: &Context, store: &Store, event: &Event) -> Result<bool, CliError> {
    with_env(ctx, store, false, async |env| {
        notify::emit(env, event).await
    })
    .await
}

/// Logs a job event and sends it when `[events]` is configured (see [`notify::emit_job_event`]).
///
/// # Errors
/// Exit 3 when the event log cannot be written.
pub async fn emit_job_event(ctx: &Context, store: &Store, event: &Event) -> Result<(), CliError> {
    with_env(ctx, store, false, async |env| {
        notify::emit_job_event(env, event).await
    })
    .await
}

/// The canary window's settings: resolutions 8's defaults, `auto_promote_canary_max_outcomes`
/// from the config (never below the minimum outcomes a decision needs).
fn window_config(ctx: &Context) -> skillforge_skillopt::promotion::canary::WindowConfig {
    let mut window = skillforge_skillopt::promotion::canary::WindowConfig::default();
    if let Some(n) = ctx.config.skillopt.auto_promote_canary_max_outcomes {
        window.max_outcomes = n.max(window.min_outcomes);
    }
    window
}

/// The notify seam after an import has returned (see [`seam::after_import`]); a JSON report
/// `{"decision": …, "reason": …, "manual": …, "blocked": …}`.
///
/// # Errors
/// Exit 3 when the store fails while applying a decision.
pub async fn after_import(
    ctx: &Context,
    store: &Store,
    version_id: &str,
) -> Result<Value, CliError> {
    let report = with_env(ctx, store, false, async |env| {
        seam::after_import(env, version_id).await
    })
    .await?;
    Ok(
        json!({"decision": report.decision, "reason": report.reason, "manual": report.is_manual(), "blocked": report.blocked}),
    )
}

/// Decides every canary's window and, for graduate / roll back, runs its durable decision job
/// (`wait`: [`Wait::Block`] waits for it through the one waiter, which serves the embedded queue
/// and ingests). One JSON entry per canary. Called by `candidate canary-check` and by `serve`.
///
/// # Errors
/// Exit 3 when the store or queue fails.
pub async fn check_canaries(
    ctx: &Context,
    store: &Store,
    wait: Wait,
) -> Result<Vec<Value>, CliError> {
    let report = with_env(ctx, store, true, async |env| {
        window::check_canaries(env, wait).await
    })
    .await?;
    Ok(report
        .iter()
        .map(|r| serde_json::to_value(r).unwrap_or(Value::Null))
        .collect())
}

/// Sends the graduation and rollback events owed for canary decisions already applied (see
/// [`window::send_owed_events`]); returns how many were sent. `serve` calls it while a decision
/// it submitted on a shared queue waits to be applied, so the event follows the state change by
/// one ingestion pass rather than one canary check.
///
/// # Errors
/// Exit 3 when the event log cannot be read or written.
pub async fn send_owed_events(ctx: &Context, store: &Store) -> Result<usize, CliError> {
    with_env(ctx, store, false, async |env| {
        window::send_owed_events(env).await
    })
    .await
}

/// Re-runs the guardrails of every pending candidate whose evidence changed since `decided` last
/// saw it (see [`reevaluate::reevaluate_pending`]); nothing with `auto_promote` off. Called by
/// `serve` on a timer.
///
/// # Errors
/// Exit 3 when the store fails while reading evidence or applying a decision.
pub async fn reevaluate_pending(
    ctx: &Context,
    store: &Store,
    decided: &mut Decided,
) -> Result<Vec<Redecision>, CliError> {
    with_env(ctx, store, false, async |env| {
        reevaluate::reevaluate_pending(env, decided).await
    })
    .await
}
