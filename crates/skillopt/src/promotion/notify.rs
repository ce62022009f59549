//! What every promotion step runs with ([`PromotionEnv`]: the store, the configured [`Policy`],
//! the family's stages and the stage port) and event emission to the `[events]` sinks ([`emit`],
//! [`emit_job_event`]; seed: SkillOpt, "Promotion policy + notifications"; S-52, S-73).

use skillforge_engine::EngineError;
use skillforge_runner::PayloadError;
use skillforge_store::{Store, StoreError};
use tracing::warn;

use super::auto_promote::Guardrails;
use super::canary::WindowConfig;
use super::events::{Event, Sinks, append_jsonl, webhook_job, xadd};
use super::stages::{PromotionStages, WEBHOOK_STAGE};
use skillforge_stage::StageJobs;

/// The configured promotion policy: `[skillopt]`'s guardrails, the `[events]` sinks and the
/// canary's regression window (resolutions 8 defaults).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Policy {
    /// The auto-promote guardrails (facts §7).
    pub guardrails: Guardrails,
    /// The `[events]` sinks (none configured ⇒ no notification at all, S-52).
    pub sinks: Sinks,
    /// The canary's regression window.
    pub window: WindowConfig,
    /// The PACE gate (`[skillopt] pace_enabled`; `None` = off, the default): a promotion the
    /// guardrails pass must also be committed by PACE over the A/B picks (`pace_blocked`), and a
    /// canary window that holds is decided by PACE over its paired outcomes (issue 34 item 10).
    pub pace: Option<skillforge_contract::pace::Pace>,
    /// The replay gate (`[skillopt] gate_enabled`, default false): a promotion the guardrails
    /// pass needs an accepted gate run against the current champion, else `gate_blocked`
    /// (issue 34 item 11).
    pub gate_enabled: bool,
}

/// What a promotion step runs with.
#[derive(Clone, Copy)]
pub struct PromotionEnv<'a> {
    /// The domain store.
    pub store: &'a Store,
    /// The policy.
    pub policy: &'a Policy,
    /// The family's stages (`workflows/promotion.toml`).
    pub stages: &'a PromotionStages,
    /// The stage port for webhook deliveries and canary decision jobs; `None` where the caller
    /// has no queue open (a webhook delivery is then logged as not sent; a canary check refuses).
    pub jobs: Option<&'a dyn StageJobs>,
}

impl std::fmt::Debug for PromotionEnv<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromotionEnv")
            .field("policy", self.policy)
            .field("has_jobs", &self.jobs.is_some())
            .finish_non_exhaustive()
    }
}

/// Why a promotion step failed (the decision is then not applied; the candidate stays as it was).
#[derive(Debug, thiserror::Error)]
pub enum PromotionError {
    /// The domain store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The job queue failed.
    #[error("job queue: {0}")]
    Queue(#[from] EngineError),
    /// A job payload did not serialize.
    #[error(transparent)]
    Payload(#[from] PayloadError),
    /// `workflows/promotion.toml` or its override is invalid.
    #[error("{0}")]
    Stages(String),
    /// The step needs the stage port and the caller gave none.
    #[error("{0} needs the job queue")]
    NoQueue(&'static str),
    /// A canary's decision jobs keep ending without succeeding (see `window::DecisionKey`).
    #[error("canary decision: {0}")]
    Decision(String),
}

/// Sends `event` to every configured sink, once per (event, job id): the store's event log is
/// written first, and an event already logged is not sent again. A sink that fails is logged and
/// skipped (notifications never fail the command). No sink configured ⇒ nothing at all (S-52).
/// Returns whether it was sent now.
///
/// # Errors
/// [`PromotionError::Store`] when the event log cannot be written.
pub async fn emit(env: &PromotionEnv<'_>, event: &Event) -> Result<bool, PromotionError> {
    if !env.policy.sinks.is_configured() || !log_event(env.store, event).await? {
        return Ok(false);
    }
    send(env, event).await;
    Ok(true)
}

/// Sends `event` to every configured sink when `what` differs from what the last logged
/// `event` of the same job id said (issue 37 item 11: `candidate.awaiting_promotion` again when
/// the guardrail that blocks the candidate changes, not once per candidate forever); the same
/// `what` again sends nothing. No sink configured ⇒ nothing at all (S-52). Returns whether it was
/// sent now.
///
/// # Errors
/// [`PromotionError::Store`] when the event log cannot be written.
pub async fn emit_on_change(
    env: &PromotionEnv<'_>,
    event: &Event,
    what: &str,
) -> Result<bool, PromotionError> {
    if !env.policy.sinks.is_configured() {
        return Ok(false);
    }
    let detail = serde_json::to_string(&event.detail).unwrap_or_else(|_| "{}".to_owned());
    let mut conn = env.store.pool().acquire().await.map_err(StoreError::from)?;
    let logged = skillforge_store::promotion::record_event_on_change(
        &mut conn,
        event.event.name(),
        &event.job_id,
        &event.root_id,
        &detail,
        what,
    )
    .await?;
    drop(conn);
    if logged {
        send(env, event).await;
    }
    Ok(logged)
}

/// A job event (`live_ab_skipped`): always logged in the store (the job's record of what
/// happened), and sent to the sinks when `[events]` is configured.
///
/// # Errors
/// [`PromotionError::Store`] when the event log cannot be written.
pub async fn emit_job_event(env: &PromotionEnv<'_>, event: &Event) -> Result<(), PromotionError> {
    if log_event(env.store, event).await? && env.policy.sinks.is_configured() {
        send(env, event).await;
    }
    Ok(())
}

async fn log_event(store: &Store, event: &Event) -> Result<bool, StoreError> {
    let detail = serde_json::to_string(&event.detail).unwrap_or_else(|_| "{}".to_owned());
    let mut conn = store.pool().acquire().await?;
    skillforge_store::promotion::record_event(
        &mut conn,
        event.event.name(),
        &event.job_id,
        &event.root_id,
        &detail,
    )
    .await
}

async fn send(env: &PromotionEnv<'_>, event: &Event) {
    let sinks = &env.policy.sinks;
    if let Some(path) = &sinks.jsonl
        && let Err(e) = append_jsonl(path, event)
    {
        warn!(error = %e, event = event.event.name(), "event not written to the JSONL sink");
    }
    if let Some(url) = &sinks.redis_url
        && let Err(e) = xadd(url, &sinks.redis_stream, event).await
    {
        warn!(error = %e, event = event.event.name(), "event not added to the Redis stream");
    }
    if let (Some(url), Some(secret)) = (&sinks.webhook_url, &sinks.webhook_secret) {
        let enqueued = match (
            webhook_job(env.stages.stage(WEBHOOK_STAGE), url, secret, event),
            env.jobs,
        ) {
            (Ok(spec), Some(jobs)) => jobs
                .submit(&spec)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
            (Ok(_), None) => Err("no job queue open".to_owned()),
            (Err(e), _) => Err(e.to_string()),
        };
        if let Err(e) = enqueued {
            warn!(error = %e, event = event.event.name(), "webhook delivery job not enqueued");
        }
    }
}
