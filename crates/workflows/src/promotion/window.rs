//! The canary's regression window as durable jobs (seed: SkillOpt, "Promotion policy +
//! notifications" › auto_promote_canary (#484); S-61, S-62; resolutions 7, 8).
//!
//! [`check_canaries`] (run by `candidate canary-check` and periodically by `serve`) reads each
//! canary's window and decides it ([`super::canary::decide_window`]). A hold changes nothing. A
//! graduate or roll-back decision is submitted as one job of the promotion family (stage
//! `graduate` or `roll_back`, keyed by the version and the evidence it was decided on, so the
//! same evidence never makes a second job); [`CanaryDecisionHandler`] applies it in the
//! ingestion transaction that acknowledges the job: promote or reject through the candidate
//! machinery, once, and only while the version is still a canary. The notification
//! (`candidate.auto_promoted`, `candidate.rolled_back`) is owed from then on: every check first
//! sends the ones still owed ([`send_owed_events`]), so a crash between apply and send loses none.

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use serde::Serialize;
use skillforge_engine::ingest::{ApplyError, ResultHandler};
use skillforge_engine::{Job, JobSpec, JobState};
use skillforge_runner::PayloadError;
use skillforge_runner_process::ProcessPayload;
use skillforge_store::Store;
use skillforge_store::candidates::{promote_candidate_in, reject_candidate_in};
use skillforge_store::promotion::{CanaryRow, decided_without_event, list_canaries, outcomes_between};
use skillforge_store::templates::{current_version, get_version};
use sqlx::SqliteConnection;

use super::canary::{Outcomes, WindowConfig, WindowDecision, decide_window};
use super::events::{Detail, EVENTS_WORKFLOW, Event, EventKind};
use super::notify::{PromotionEnv, PromotionError, emit};
use super::stages::{GRADUATE_STAGE, PromotionStages, ROLL_BACK_STAGE};
use crate::stage::{Ran, Wait, run_jobs};

/// The candidate decision reason of a graduated canary (and its event's reason).
pub const GRADUATED_REASON: &str = "canary graduated: parity or better";
/// The candidate decision reason of a rolled-back canary (and its event's reason).
pub const ROLLED_BACK_REASON: &str = "canary rolled back: material regression";
const KEY_PREFIX: &str = "promotion:canary";

/// One canary's line of a check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowReport {
    /// The canary version.
    pub version_id: String,
    /// What the window says.
    pub window: WindowDecision,
    /// The decision job, for graduate and roll back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// Whether the decision is applied now (the version is current, or rejected).
    pub applied: bool,
}

/// The decision job of `decision` for canary `version_id`, decided on `canary` and `champion`
/// outcomes: `None` for a hold. Key `promotion:canary:<stage>:<canary total>:<champion total>:<version>`.
///
/// # Errors
/// [`PayloadError`] when the payload does not serialize.
pub fn decision_job(
    stages: &PromotionStages,
    version_id: &str,
    decision: &WindowDecision,
    canary: Outcomes,
    champion: Outcomes,
) -> Result<Option<JobSpec>, PayloadError> {
    let stage = match decision {
        WindowDecision::Hold { .. } => return Ok(None),
        WindowDecision::Graduate => GRADUATE_STAGE,
        WindowDecision::RollBack => ROLL_BACK_STAGE,
    };
    let key = format!("{KEY_PREFIX}:{stage}:{}:{}:{version_id}", canary.total, champion.total);
    stages.stage(stage).job(&ProcessPayload::argv(vec!["true".into()]), Some(key)).map(Some)
}

/// The canary version a decision job's key is about (its last field).
fn version_of(key: &str) -> Option<&str> {
    let rest = key.strip_prefix(KEY_PREFIX)?.strip_prefix(':')?;
    rest.splitn(4, ':').nth(3).filter(|v| !v.is_empty())
}

/// The promotion family's result handler: webhook deliveries have no domain effect; a
/// succeeded canary decision job is applied here (promote or reject, once, while the version is
/// still a canary). A decision job that did not succeed applies nothing: the canary stays, and
/// the next check decides again.
#[derive(Debug, Default, Clone, Copy)]
pub struct CanaryDecisionHandler;

#[async_trait::async_trait]
impl ResultHandler for CanaryDecisionHandler {
    async fn apply(&self, conn: &mut SqliteConnection, job: &Job) -> Result<(), ApplyError> {
        if job.spec.workflow != EVENTS_WORKFLOW || job.state != JobState::Succeeded {
            return Ok(());
        }
        let reason = match job.spec.stage.as_str() {
            GRADUATE_STAGE => GRADUATED_REASON,
            ROLL_BACK_STAGE => ROLLED_BACK_REASON,
            _ => return Ok(()),
        };
        let Some(version_id) = job.spec.idempotency_key.as_deref().and_then(version_of) else {
            return Err(ApplyError::Unusable { job_id: job.id.clone(), reason: "canary decision job without a version in its key".into() });
        };
        let still_canary = get_version(&mut *conn, version_id).await?.is_some_and(|v| v.state == "canary");
        if !still_canary {
            return Ok(());
        }
        if reason == GRADUATED_REASON {
            promote_candidate_in(conn, version_id, reason).await?;
        } else {
            reject_candidate_in(conn, version_id, reason).await?;
        }
        Ok(())
    }
}

/// The window of one canary: its and the champion's auto-trace outcomes since it started (up to
/// the window's end), each `Err` when unreadable.
async fn window_of(store: &Store, canary: &CanaryRow, config: &WindowConfig) -> Result<(WindowDecision, Outcomes, Outcomes), PromotionError> {
    let hold = |reason: &str| (WindowDecision::Hold { reason: reason.to_owned() }, Outcomes::default(), Outcomes::default());
    let Ok(started) = DateTime::parse_from_rfc3339(&canary.canary_started_at).map(|t| t.with_timezone(&Utc)) else {
        return Ok(hold("canary start time unreadable"));
    };
    let Some(champion) = current_version(store.pool(), &canary.template_id).await? else {
        return Ok(hold("no champion baseline"));
    };
    let end = started + Duration::from_std(config.window).unwrap_or_default();
    let until = end.min(Utc::now() + Duration::milliseconds(1));
    let fmt = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
    let (since, until) = (fmt(started - Duration::seconds(1)), fmt(until + Duration::seconds(1)));
    let read = |r: Result<(u64, u64), skillforge_store::StoreError>| {
        r.map(|(positives, total)| Outcomes { positives, total }).map_err(|e| e.to_string())
    };
    let canary_outcomes = read(outcomes_between(store.pool(), &canary.id, &since, &until).await);
    let champion_outcomes = read(outcomes_between(store.pool(), &champion.id, &since, &until).await);
    let decision = decide_window(&canary_outcomes, &champion_outcomes, config);
    Ok((decision, canary_outcomes.unwrap_or_default(), champion_outcomes.unwrap_or_default()))
}

/// Sends the graduation and rollback events owed for decisions already applied (the event log
/// has no row for them yet). Nothing is owed while `[events]` is not configured.
///
/// # Errors
/// [`PromotionError::Store`].
pub async fn send_owed_events(env: &PromotionEnv<'_>) -> Result<usize, PromotionError> {
    if !env.policy.sinks.is_configured() {
        return Ok(0);
    }
    let mut sent = 0;
    for (reason, kind) in [(GRADUATED_REASON, EventKind::AutoPromoted), (ROLLED_BACK_REASON, EventKind::RolledBack)] {
        for (version_id, template_id) in decided_without_event(env.store.pool(), reason, kind.name()).await? {
            let event = Event::new(kind, &version_id, &template_id, Detail::default().with_reason(reason));
            sent += usize::from(emit(env, &event).await?);
        }
    }
    Ok(sent)
}

/// Decides every canary's window once and submits the graduate / roll-back jobs (see the module
/// docs); with [`Wait::Block`] waits for them (the stage port ingests their results) and sends
/// the events. Idempotent: a version no longer a canary is not listed, the same evidence yields
/// the same job, and a decision already applied changes nothing. One entry per canary.
///
/// # Errors
/// [`PromotionError::NoQueue`] without a stage port; the store's or the queue's error.
pub async fn check_canaries(env: &PromotionEnv<'_>, wait: Wait) -> Result<Vec<WindowReport>, PromotionError> {
    let jobs = env.jobs.ok_or(PromotionError::NoQueue("the canary check"))?;
    send_owed_events(env).await?;
    let mut report = Vec::new();
    let mut specs = Vec::new();
    for canary in list_canaries(env.store.pool()).await? {
        let (window, canary_outcomes, champion_outcomes) = window_of(env.store, &canary, &env.policy.window).await?;
        if let Some(spec) = decision_job(env.stages, &canary.id, &window, canary_outcomes, champion_outcomes)? {
            specs.push((report.len(), spec));
        }
        report.push(WindowReport { version_id: canary.id, window, job_id: None, applied: false });
    }
    if specs.is_empty() {
        return Ok(report);
    }
    let only_specs: Vec<JobSpec> = specs.iter().map(|(_, s)| s.clone()).collect();
    let ran = run_jobs(jobs, &only_specs, wait, "canary decisions").await?;
    let ids: Vec<String> = match &ran {
        Ran::Done(done) => done.iter().map(|j| j.id.clone()).collect(),
        Ran::Pending(ids) => ids.clone(),
    };
    for ((index, _), id) in specs.iter().zip(ids) {
        report[*index].job_id = Some(id);
    }
    send_owed_events(env).await?;
    for entry in &mut report {
        let state = get_version(env.store.pool(), &entry.version_id).await?.map(|v| v.state);
        entry.applied = match entry.window {
            WindowDecision::Graduate => state.as_deref() == Some("current"),
            WindowDecision::RollBack => state.as_deref() == Some("rejected"),
            WindowDecision::Hold { .. } => false,
        };
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_job_names_its_version_and_the_evidence_it_was_decided_on() {
        let stages = PromotionStages::default();
        let (c, h) = (Outcomes { positives: 9, total: 10 }, Outcomes { positives: 5, total: 12 });
        let spec = decision_job(&stages, "team:planner@v2", &WindowDecision::Graduate, c, h).unwrap().unwrap();
        assert_eq!((spec.workflow.as_str(), spec.stage.as_str()), (EVENTS_WORKFLOW, GRADUATE_STAGE));
        assert_eq!(spec.idempotency_key.as_deref(), Some("promotion:canary:graduate:10:12:team:planner@v2"));
        assert_eq!(version_of(spec.idempotency_key.as_deref().unwrap()), Some("team:planner@v2"));
        let hold = WindowDecision::Hold { reason: "thin".into() };
        assert!(decision_job(&stages, "t@v2", &hold, c, h).unwrap().is_none(), "S-62: a hold makes no job");
    }
}
