//! Promotion on evidence, shared by the commands (seed: SkillOpt, "Promotion policy +
//! notifications"; S-51..S-63): the notify seam that runs after an import has returned
//! ([`after_import`], used by `import` and `candidate decide`), event emission to the `[events]`
//! sinks ([`emit`], [`emit_job_event`], used by `ask` and the canary), and the canary window check
//! ([`check_canaries`], used by `candidate canary-check` and `serve`).

use serde_json::{Value, json};
use skillforge_store::Store;
use skillforge_store::bandit::get_arm;
use skillforge_store::candidates::{DecisionOutcome, get_candidate, promote_candidate, reject_candidate};
use skillforge_store::promotion::{CanaryStart, auto_trace_counts, list_canaries, outcomes_between, record_event, start_canary};
use skillforge_store::templates::{begin_write, current_version};
use skillforge_workflows::ab::bandit::{Arm, Confidence, NOTIFY_SEED};
use skillforge_workflows::harvest::outcome::EXTERNAL_CI_PHRASE;
use skillforge_workflows::promotion::auto_promote::{AutoTraceEvidence, BanditEvidence, Decision, Evidence, decide};
use skillforge_workflows::promotion::canary::{Outcomes, WindowConfig, WindowDecision, decide_window};
use skillforge_workflows::promotion::events::{Detail, Event, EventKind, append_jsonl, webhook_job, xadd};
use tracing::warn;

use crate::context::Context;
use crate::exit::CliError;

/// Sends `event` to every configured sink, once per (event, job id): the store's event log is
/// written first, and an event already logged is not sent again. A sink that fails is logged and
/// skipped (notifications never fail the command). No sink configured ⇒ nothing at all (S-52).
pub async fn emit(ctx: &Context, store: &Store, event: &Event) -> Result<bool, CliError> {
    let sinks = ctx.config.events.sinks(&ctx.home);
    if !sinks.is_configured() {
        return Ok(false);
    }
    if !log_event(store, event).await? {
        return Ok(false);
    }
    send(ctx, &sinks, event).await?;
    Ok(true)
}

/// A job event (`live_ab_skipped`): always logged in the store (the job's record of what
/// happened), and sent to the sinks when `[events]` is configured.
pub async fn emit_job_event(ctx: &Context, store: &Store, event: &Event) -> Result<(), CliError> {
    if log_event(store, event).await? {
        let sinks = ctx.config.events.sinks(&ctx.home);
        if sinks.is_configured() {
            send(ctx, &sinks, event).await?;
        }
    }
    Ok(())
}

async fn log_event(store: &Store, event: &Event) -> Result<bool, CliError> {
    let detail = serde_json::to_string(&event.detail).unwrap_or_else(|_| "{}".to_owned());
    let mut conn = store.pool().acquire().await?;
    Ok(record_event(&mut conn, event.event.name(), &event.job_id, &event.root_id, &detail).await?)
}

async fn send(ctx: &Context, sinks: &skillforge_workflows::promotion::events::Sinks, event: &Event) -> Result<(), CliError> {
    if let Some(path) = &sinks.jsonl {
        if let Err(e) = append_jsonl(path, event) {
            warn!(error = %e, event = event.event.name(), "event not written to the JSONL sink");
        }
    }
    if let Some(url) = &sinks.redis_url {
        if let Err(e) = xadd(url, &sinks.redis_stream, event).await {
            warn!(error = %e, event = event.event.name(), "event not added to the Redis stream");
        }
    }
    if let (Some(url), Some(secret)) = (&sinks.webhook_url, &sinks.webhook_secret) {
        let backend = ctx.queue().await?;
        let enqueued = match webhook_job(url, secret, event) {
            Ok(spec) => backend.enqueue(&spec).await.map(|_| ()).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = enqueued {
            warn!(error = %e, event = event.event.name(), "webhook delivery job not enqueued");
        }
    }
    Ok(())
}

/// The evidence the guardrails read for candidate `version_id` (S-54, S-63): the auto-trace run
/// only (a read error ⇒ unavailable), the candidate's score, and the bandit confidence when the
/// challenger arm exists (Monte Carlo at the notify seam's fixed seed 473; exact when possible).
async fn evidence(store: &Store, template_id: &str, version_id: &str, score: Option<f64>) -> Result<Evidence, CliError> {
    let feedback = match auto_trace_counts(store.pool(), version_id, EXTERNAL_CI_PHRASE).await {
        Ok(c) if c.run_exists => Ok(AutoTraceEvidence { samples: c.samples, has_real_ci_positive: c.real_ci_positives > 0 }),
        Ok(_) => Ok(AutoTraceEvidence::default()),
        Err(e) => Err(e.to_string()),
    };
    let champion = current_version(store.pool(), template_id).await?;
    let arm = |r: skillforge_store::bandit::ArmRow| Arm { alpha: r.alpha, beta: r.beta, pulls: u64::try_from(r.pulls).unwrap_or(0) };
    let confidence = match (get_arm(store.pool(), template_id, version_id).await?, champion) {
        (Some(challenger), Some(champion)) => {
            let champion_arm = get_arm(store.pool(), template_id, &champion.id).await?.map_or(Arm::PRIOR, arm);
            let challenger_arm = arm(challenger);
            let c = Confidence::compute(challenger_arm, champion_arm, 0, NOTIFY_SEED);
            Some(BanditEvidence { probability: c.probability(), pulls: challenger_arm.pulls })
        }
        _ => None,
    };
    Ok(Evidence { feedback, score, confidence })
}

/// The notify seam (S-51, S-52, facts §7): runs after an import has returned. Emits
/// `candidate.awaiting_promotion` (when `[events]` is configured), decides, and on a guardrails
/// pass promotes through the normal path (direct, `candidate.auto_promoted`) or starts a canary
/// (`candidate.canary_started`). Returns a JSON report of what it did.
///
/// # Errors
/// Exit 3 when the store fails while applying a decision.
pub async fn after_import(ctx: &Context, store: &Store, version_id: &str) -> Result<Value, CliError> {
    let Some(candidate) = get_candidate(store.pool(), version_id).await? else {
        return Ok(json!({"decision": "none", "reason": "not an imported candidate"}));
    };
    let guardrails = ctx.config.skillopt.guardrails();
    let evidence = evidence(store, &candidate.template_id, version_id, candidate.score).await?;
    let decision = decide(&guardrails, &evidence);
    let base = Detail {
        score: candidate.score,
        samples: evidence.feedback.as_ref().ok().map(|f| f.samples),
        confidence: evidence.confidence.map(|c| c.probability),
        external_ci: evidence.feedback.as_ref().ok().map(|f| f.has_real_ci_positive),
        ..Detail::default()
    };
    let reason = match &decision {
        Decision::Notify(stop) => format!("notify only (step {}): {}", stop.step, stop.reason),
        Decision::Promote { canary_sample: Some(s) } => format!("guardrails pass: canary at {s}"),
        Decision::Promote { canary_sample: None } => "guardrails pass: promote".to_owned(),
    };
    let awaiting = Event::new(EventKind::AwaitingPromotion, version_id, &candidate.template_id, base.clone().with_reason(&reason));
    emit(ctx, store, &awaiting).await?;
    match &decision {
        Decision::Notify(_) => {}
        Decision::Promote { canary_sample: Some(sample) } => {
            let mut tx = begin_write(store).await?;
            let started = start_canary(&mut tx, version_id, *sample).await?;
            tx.commit().await?;
            if started == CanaryStart::Started {
                let detail = Detail { canary_sample: Some(*sample), ..base.clone() }.with_reason(&reason);
                emit(ctx, store, &Event::new(EventKind::CanaryStarted, version_id, &candidate.template_id, detail)).await?;
            }
        }
        Decision::Promote { canary_sample: None } => {
            if let DecisionOutcome::Done { .. } = promote_candidate(store, version_id, &format!("auto-promote: {reason}")).await? {
                emit(ctx, store, &Event::new(EventKind::AutoPromoted, version_id, &candidate.template_id, base.with_reason(&reason)))
                    .await?;
            }
        }
    }
    Ok(json!({"decision": decision, "reason": reason}))
}

/// Decides and applies every canary's window once: graduate (promote, `candidate.auto_promoted`),
/// roll back (reject, `candidate.rolled_back`) or hold (nothing). Idempotent: a version that is no
/// longer a canary is not listed, and a decision already applied changes nothing. Called by
/// `candidate canary-check` and periodically by `serve`. Returns one JSON entry per canary.
///
/// # Errors
/// Exit 3 when the store fails.
pub async fn check_canaries(ctx: &Context, store: &Store) -> Result<Vec<Value>, CliError> {
    let config = WindowConfig::default();
    let mut report = Vec::new();
    for canary in list_canaries(store.pool()).await? {
        let started = chrono::DateTime::parse_from_rfc3339(&canary.canary_started_at).map(|t| t.with_timezone(&chrono::Utc));
        let champion = current_version(store.pool(), &canary.template_id).await?;
        let decision = match (started, &champion) {
            (Ok(started), Some(champion)) => {
                let end = started + chrono::Duration::from_std(config.window).unwrap_or_default();
                let until = end.min(chrono::Utc::now() + chrono::Duration::milliseconds(1));
                let fmt = |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
                let (since, until) = (fmt(started - chrono::Duration::seconds(1)), fmt(until + chrono::Duration::seconds(1)));
                let read = |r: Result<(u64, u64), skillforge_store::StoreError>| {
                    r.map(|(positives, total)| Outcomes { positives, total }).map_err(|e| e.to_string())
                };
                let canary_outcomes = read(outcomes_between(store.pool(), &canary.id, &since, &until).await);
                let champion_outcomes = read(outcomes_between(store.pool(), &champion.id, &since, &until).await);
                decide_window(&canary_outcomes, &champion_outcomes, &config)
            }
            (Err(_), _) => WindowDecision::Hold { reason: "canary start time unreadable".to_owned() },
            (_, None) => WindowDecision::Hold { reason: "no champion baseline".to_owned() },
        };
        let applied = apply_window(ctx, store, &canary.id, &canary.template_id, &decision).await?;
        report.push(json!({"version_id": canary.id, "window": decision, "applied": applied}));
    }
    Ok(report)
}

async fn apply_window(ctx: &Context, store: &Store, version_id: &str, template_id: &str, decision: &WindowDecision) -> Result<bool, CliError> {
    let (outcome, kind, reason) = match decision {
        WindowDecision::Hold { .. } => return Ok(false),
        WindowDecision::Graduate => {
            (promote_candidate(store, version_id, "canary graduated: parity or better").await?, EventKind::AutoPromoted, "canary graduated")
        }
        WindowDecision::RollBack => (
            reject_candidate(store, version_id, "canary rolled back: material regression").await?,
            EventKind::RolledBack,
            "canary rolled back: material regression",
        ),
    };
    if !matches!(outcome, DecisionOutcome::Done { .. }) {
        return Ok(false);
    }
    emit(ctx, store, &Event::new(kind, version_id, template_id, Detail::default().with_reason(reason))).await?;
    Ok(true)
}
