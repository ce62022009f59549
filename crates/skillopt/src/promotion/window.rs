//! The canary's regression window as durable jobs (seed: SkillOpt, "Promotion policy +
//! notifications" › auto_promote_canary (#484); S-61, S-62; resolutions 7, 8).
//!
//! [`check_canaries`] (run by `candidate canary-check` and periodically by `serve`) reads each
//! canary's window and decides it ([`super::canary::decide_window`]). A hold changes nothing. A
//! graduate or roll-back decision is submitted as one job of the promotion family (stage
//! `graduate` or `roll_back`, keyed by the canary, the champion it was decided against and the
//! outcome ([`DecisionKey`]), so later checks that see more evidence for the same outcome find
//! that job instead of making another); [`CanaryDecisionHandler`] applies it in the ingestion
//! transaction that acknowledges the job: promote or reject through the candidate machinery,
//! once, and only while the version is still that canary and that champion is still current. A
//! decision job that ended without succeeding applies nothing and is followed by the next round's
//! job at the next check. The notification
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
use skillforge_store::promotion::{
    CanaryRow, canary_of, decided_without_event, event_detail, list_canaries, outcomes_after_seq,
    outcomes_between, record_window_evidence, window_evidence,
};
use skillforge_store::templates::{current_version, get_version};
use sqlx::SqliteConnection;

use super::canary::{Outcomes, WindowConfig, WindowDecision, decide_window};
use super::events::{Detail, EVENTS_WORKFLOW, Event, EventKind, HAND_STARTED_REASON, WindowCounts};
use super::notify::{PromotionEnv, PromotionError, emit};
use super::stages::{GRADUATE_STAGE, INCONCLUSIVE_STAGE, PromotionStages, ROLL_BACK_STAGE};
use skillforge_contract::pace::{Pace, PaceReport, Pair, Verdict};
use skillforge_stage::{StageJobs, Wait, wait_for};
use skillforge_store::gates::outcome_sequence;

/// The candidate decision reason of a graduated canary (and its event's reason).
pub const GRADUATED_REASON: &str = "canary graduated: parity or better";
/// The candidate decision reason of a rolled-back canary (and its event's reason).
pub const ROLLED_BACK_REASON: &str = "canary rolled back: material regression";
/// The candidate decision reason of a canary whose spent window never decided (and its event's
/// reason): the champion stays (issue 37 item 3).
pub const INCONCLUSIVE_REASON: &str = "canary rolled back: inconclusive (the window was spent without a decision; the champion stays)";
const KEY_PREFIX: &str = "promotion:canary";
/// Decision jobs of one (canary, champion, outcome) that may end unsucceeded before a check gives up.
pub const MAX_ROUNDS: u32 = 20;

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
    /// The PACE gate over the window's paired outcomes, when `pace_enabled` is on and the window
    /// held (issue 34 item 10, issue 37 item 3).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pace: Option<PaceReport>,
}

/// What a canary decision job is about, written into its idempotency key
/// `promotion:canary:<stage>:<canary started, unix ms>:v<champion N>:r<round>:<version>`: one job
/// per (canary, champion, window outcome), whatever evidence later checks add, so a second check
/// or `serve` pass on a shared queue finds the job already submitted instead of making another.
/// `round` counts decision jobs of that outcome that ended without succeeding (failed, dead,
/// cancelled, pruned): the next check submits round + 1, so a failed decision is decided again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionKey {
    /// [`GRADUATE_STAGE`], [`ROLL_BACK_STAGE`] or [`INCONCLUSIVE_STAGE`].
    pub stage: &'static str,
    /// When the canary started (its `canary_started_at`), unix milliseconds.
    pub started_ms: i64,
    /// The champion's version number N (`<template>@vN`) the window was decided against.
    pub champion: i64,
    /// 1 for the first job of this outcome, + 1 after each one that did not succeed.
    pub round: u32,
    /// The canary version (`<template>@vN`, last: template ids may hold `:`).
    pub version_id: String,
}

impl DecisionKey {
    /// The idempotency key.
    pub fn render(&self) -> String {
        format!(
            "{KEY_PREFIX}:{}:{}:v{}:r{}:{}",
            self.stage, self.started_ms, self.champion, self.round, self.version_id
        )
    }

    /// Reads a key written by [`Self::render`]; `None` for anything else.
    pub fn parse(key: &str) -> Option<Self> {
        let rest = key.strip_prefix(KEY_PREFIX)?.strip_prefix(':')?;
        let mut fields = rest.splitn(5, ':');
        let stage = match fields.next()? {
            GRADUATE_STAGE => GRADUATE_STAGE,
            ROLL_BACK_STAGE => ROLL_BACK_STAGE,
            INCONCLUSIVE_STAGE => INCONCLUSIVE_STAGE,
            _ => return None,
        };
        let started_ms = fields.next()?.parse().ok()?;
        let champion = fields.next()?.strip_prefix('v')?.parse().ok()?;
        let round = fields.next()?.strip_prefix('r')?.parse().ok()?;
        let version_id = fields.next().filter(|v| !v.is_empty())?.to_owned();
        Some(Self {
            stage,
            started_ms,
            champion,
            round,
            version_id,
        })
    }
}

/// The stage of a window decision: `None` for a hold (S-62: a hold makes no job).
pub fn decision_stage(decision: &WindowDecision) -> Option<&'static str> {
    match decision {
        WindowDecision::Hold { .. } => None,
        WindowDecision::Graduate => Some(GRADUATE_STAGE),
        WindowDecision::RollBack => Some(ROLL_BACK_STAGE),
        WindowDecision::Inconclusive { .. } => Some(INCONCLUSIVE_STAGE),
    }
}

/// The decision job named by `key` (its run does nothing: the handler applies the decision).
///
/// # Errors
/// [`PayloadError`] when the payload does not serialize.
pub fn decision_job(stages: &PromotionStages, key: &DecisionKey) -> Result<JobSpec, PayloadError> {
    stages.stage(key.stage).job(
        &ProcessPayload::argv(vec!["true".into()]),
        Some(key.render()),
    )
}

/// Whether a decision job of `key` may still be applied: the version is the template's canary of
/// the same start, and the champion it was decided against is still current. Anything else
/// (graduated, rolled back, decided by hand, the champion replaced) changes nothing.
async fn still_decidable(
    conn: &mut SqliteConnection,
    key: &DecisionKey,
) -> Result<bool, ApplyError> {
    let Some(version) = get_version(&mut *conn, &key.version_id).await? else {
        return Ok(false);
    };
    if version.state != "canary" {
        return Ok(false);
    }
    let Some(canary) = canary_of(&mut *conn, &version.template_id).await? else {
        return Ok(false);
    };
    if canary.id != key.version_id || started_ms(&canary.canary_started_at) != Some(key.started_ms)
    {
        return Ok(false);
    }
    Ok(current_version(&mut *conn, &version.template_id)
        .await?
        .is_some_and(|c| c.version == key.champion))
}

/// An RFC 3339 time as unix milliseconds.
fn started_ms(rfc3339: &str) -> Option<i64> {
    DateTime::parse_from_rfc3339(rfc3339)
        .ok()
        .map(|t| t.timestamp_millis())
}

/// The promotion family's result handler: webhook deliveries have no domain effect; a
/// succeeded canary decision job is applied here (promote or reject, once, while the version is
/// still the canary it was decided on, against the same champion). A decision job that did not
/// succeed applies nothing: the canary stays, and the next check decides again (next round).
#[derive(Debug, Default, Clone, Copy)]
pub struct CanaryDecisionHandler;

#[async_trait::async_trait]
impl ResultHandler for CanaryDecisionHandler {
    async fn apply(&self, conn: &mut SqliteConnection, job: &Job) -> Result<(), ApplyError> {
        if job.spec.workflow != EVENTS_WORKFLOW
            || ![GRADUATE_STAGE, ROLL_BACK_STAGE, INCONCLUSIVE_STAGE]
                .contains(&job.spec.stage.as_str())
        {
            return Ok(());
        }
        if job.state != JobState::Succeeded {
            return Ok(());
        }
        let Some(key) = job
            .spec
            .idempotency_key
            .as_deref()
            .and_then(DecisionKey::parse)
            .filter(|k| k.stage == job.spec.stage)
        else {
            tracing::warn!(job_id = %job.id, key = job.spec.idempotency_key.as_deref().unwrap_or("none"), "a canary decision job whose key names no decision: nothing applied");
            return Ok(());
        };
        if !still_decidable(conn, &key).await? {
            tracing::info!(job_id = %job.id, version = %key.version_id, "the canary decision arrived after the canary changed: nothing applied");
            return Ok(());
        }
        match key.stage {
            GRADUATE_STAGE => promote_candidate_in(conn, &key.version_id, GRADUATED_REASON).await?,
            INCONCLUSIVE_STAGE => {
                reject_candidate_in(conn, &key.version_id, INCONCLUSIVE_REASON).await?
            }
            _ => reject_candidate_in(conn, &key.version_id, ROLLED_BACK_REASON).await?,
        };
        Ok(())
    }
}

/// Submits the decision job of `stage` for `canary` decided against `champion`: the first round
/// whose job is new or has not ended unsucceeded (see [`DecisionKey`]). Returns its id.
async fn submit_decision(
    env: &PromotionEnv<'_>,
    jobs: &dyn StageJobs,
    stage: &'static str,
    canary: &CanaryRow,
    champion: i64,
) -> Result<Option<String>, PromotionError> {
    let Some(started_ms) = started_ms(&canary.canary_started_at) else {
        return Ok(None);
    };
    for round in 1..=MAX_ROUNDS {
        let key = DecisionKey {
            stage,
            started_ms,
            champion,
            round,
            version_id: canary.id.clone(),
        };
        let enqueued = jobs.submit(&decision_job(env.stages, &key)?).await?;
        if enqueued.created {
            return Ok(Some(enqueued.job_id));
        }
        match jobs.get(&enqueued.job_id).await? {
            Some(job) if !job.state.is_terminal() || job.state == JobState::Succeeded => {
                return Ok(Some(enqueued.job_id));
            }
            _ => continue,
        }
    }
    Err(PromotionError::Decision(format!(
        "canary `{}`: {MAX_ROUNDS} {stage} jobs in a row ended without succeeding",
        canary.id
    )))
}

/// One canary's window as decided now: the decision and the champion's version number it was
/// decided against (`None` when there is no champion).
struct Window {
    decision: WindowDecision,
    champion: Option<i64>,
    /// The canary's and the champion's outcomes it was decided on (issue 37 item 11), when read.
    counts: WindowEvidence,
}

/// The canary's and the champion's outcomes a window was decided on, as its decision event
/// carries them (issue 37 item 11); kept in the store from the check that submitted the decision
/// until the event is sent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct WindowEvidence {
    /// The canary's outcomes since it started.
    pub canary: Option<WindowCounts>,
    /// The champion's outcomes over the same window.
    pub champion: Option<WindowCounts>,
    /// The PACE gate that decided a holding window (only when `pace_enabled` is on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pace: Option<PaceReport>,
}

/// The window of one canary: its and the champion's auto-trace outcomes since it started (up to
/// the window's end), each `Err` when unreadable.
async fn window_of(
    store: &Store,
    canary: &CanaryRow,
    config: &WindowConfig,
    pace: Option<Pace>,
) -> Result<Window, PromotionError> {
    let hold = |reason: &str| Window {
        decision: WindowDecision::Hold {
            reason: reason.to_owned(),
        },
        champion: None,
        counts: WindowEvidence::default(),
    };
    let Ok(started) =
        DateTime::parse_from_rfc3339(&canary.canary_started_at).map(|t| t.with_timezone(&Utc))
    else {
        return Ok(hold("canary start time unreadable"));
    };
    let Some(champion) = current_version(store.pool(), &canary.template_id).await? else {
        return Ok(hold("no champion baseline"));
    };
    let end = started + Duration::from_std(config.window).unwrap_or_default();
    let until = end.min(Utc::now() + Duration::milliseconds(1));
    let fmt = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
    let (since, until) = (
        fmt(started - Duration::seconds(1)),
        fmt(until + Duration::seconds(1)),
    );
    let read = |r: Result<(u64, u64), skillforge_store::StoreError>| {
        r.map(|(positives, total)| Outcomes { positives, total })
            .map_err(|e| e.to_string())
    };
    // Issue 37 item 1: only outcomes written after the canary started (by the feedback events'
    // own order; their `created_at` has one-second resolution), so the guardrails' evidence is
    // never served again as the canary's. A canary started before the order was recorded reads
    // by time, as it always did.
    let (canary_outcomes, champion_outcomes) = match canary.canary_started_seq {
        Some(seq) => (
            read(outcomes_after_seq(store.pool(), &canary.id, seq, &until).await),
            read(outcomes_after_seq(store.pool(), &champion.id, seq, &until).await),
        ),
        None => (
            read(outcomes_between(store.pool(), &canary.id, &since, &until).await),
            read(outcomes_between(store.pool(), &champion.id, &since, &until).await),
        ),
    };
    let closed = Utc::now() >= end;
    let counts = |o: &Result<Outcomes, String>| {
        o.as_ref()
            .ok()
            .map(|o| WindowCounts::new(o.positives, o.total))
    };
    let mut counts = WindowEvidence {
        canary: counts(&canary_outcomes),
        champion: counts(&champion_outcomes),
        pace: None,
    };
    let mut decision = decide_window(&canary_outcomes, &champion_outcomes, config, closed);
    // Issue 34 item 10, issue 37 item 3: with PACE on, a readable window that holds (or was spent
    // holding) is decided by PACE over its paired outcomes (the i-th of each side, in order):
    // commit graduates, a spent budget rolls back fail-safe, continuing changes nothing.
    if let (Some(pace), Some(seq), Ok(_), Ok(_)) = (
        pace,
        canary.canary_started_seq,
        &canary_outcomes,
        &champion_outcomes,
    ) && matches!(
        decision,
        WindowDecision::Hold { .. } | WindowDecision::Inconclusive { .. }
    ) {
        let canary_seq = outcome_sequence(store.pool(), &canary.id, seq, &until).await?;
        let champion_seq = outcome_sequence(store.pool(), &champion.id, seq, &until).await?;
        let report = pace.run(
            canary_seq
                .into_iter()
                .zip(champion_seq)
                .map(|(c, h)| Pair::of(c, h)),
        );
        decision = match report.verdict {
            Verdict::Commit => WindowDecision::Graduate,
            Verdict::Reject => WindowDecision::Inconclusive {
                reason: format!("inconclusive: {}; the champion stays", report.reason),
            },
            Verdict::Continue => decision,
        };
        counts.pace = Some(report);
    }
    Ok(Window {
        decision,
        champion: Some(champion.version),
        counts,
    })
}

/// Sends the graduation and rollback events owed for decisions already applied (the event log
/// has no row for them yet). Nothing is owed while `[events]` is not configured. A graduation of
/// a canary started by hand is `candidate.canary_graduated`, not `candidate.auto_promoted`; each
/// event carries the window counts its decision was made on, as the submitting check recorded
/// them (issue 37 item 11).
///
/// # Errors
/// [`PromotionError::Store`].
pub async fn send_owed_events(env: &PromotionEnv<'_>) -> Result<usize, PromotionError> {
    if !env.policy.sinks.is_configured() {
        return Ok(0);
    }
    let mut sent = 0;
    let owed = [
        (GRADUATED_REASON, GRADUATE_STAGE, EventKind::AutoPromoted),
        (ROLLED_BACK_REASON, ROLL_BACK_STAGE, EventKind::RolledBack),
        (
            INCONCLUSIVE_REASON,
            INCONCLUSIVE_STAGE,
            EventKind::RolledBack,
        ),
    ];
    for (reason, stage, kind) in owed {
        for (version_id, template_id) in
            decided_without_event(env.store.pool(), reason, kind.name()).await?
        {
            let kind = if kind == EventKind::AutoPromoted
                && is_hand_started(env.store, &version_id).await?
            {
                EventKind::CanaryGraduated
            } else {
                kind
            };
            let evidence: WindowEvidence = window_evidence(env.store.pool(), &version_id, stage)
                .await?
                .and_then(|json| serde_json::from_str(&json).ok())
                .unwrap_or_default();
            let detail = Detail {
                canary_outcomes: evidence.canary,
                champion_outcomes: evidence.champion,
                pace: evidence.pace,
                ..Detail::default()
            };
            let event = Event::new(kind, &version_id, &template_id, detail.with_reason(reason));
            sent += usize::from(emit(env, &event).await?);
        }
    }
    Ok(sent)
}

/// Whether `version_id`'s canary was started by hand (its `candidate.canary_started` says
/// [`HAND_STARTED_REASON`]).
async fn is_hand_started(store: &Store, version_id: &str) -> Result<bool, PromotionError> {
    let detail = event_detail(store.pool(), EventKind::CanaryStarted.name(), version_id).await?;
    let reason = detail
        .and_then(|d| serde_json::from_str::<serde_json::Value>(&d).ok())
        .and_then(|d| d["reason"].as_str().map(str::to_owned));
    Ok(reason.as_deref() == Some(HAND_STARTED_REASON))
}

/// Decides every canary's window once and submits the graduate / roll-back jobs (see the module
/// docs); with [`Wait::Block`] waits for them (the stage port ingests their results) and sends
/// the events. Idempotent: a version no longer a canary is not listed, the same (canary,
/// champion, outcome) yields the same job whatever evidence was added since ([`DecisionKey`]),
/// and a decision already applied changes nothing. One entry per canary.
///
/// # Errors
/// [`PromotionError::NoQueue`] without a stage port; [`PromotionError::Decision`] when a canary's
/// decision jobs of one outcome ended unsucceeded [`MAX_ROUNDS`] times; the store's or the queue's error.
pub async fn check_canaries(
    env: &PromotionEnv<'_>,
    wait: Wait,
) -> Result<Vec<WindowReport>, PromotionError> {
    let jobs = env
        .jobs
        .ok_or(PromotionError::NoQueue("the canary check"))?;
    send_owed_events(env).await?;
    let mut report = Vec::new();
    let mut submitted = Vec::new();
    for canary in list_canaries(env.store.pool()).await? {
        let window = window_of(env.store, &canary, &env.policy.window, env.policy.pace).await?;
        let mut entry = WindowReport {
            version_id: canary.id.clone(),
            window: window.decision,
            job_id: None,
            applied: false,
            pace: window.counts.pace.clone(),
        };
        if let (Some(stage), Some(champion)) = (decision_stage(&entry.window), window.champion) {
            // The counts its event will carry, whichever process sends it (issue 37 item 11).
            if env.policy.sinks.is_configured() {
                let counts =
                    serde_json::to_string(&window.counts).unwrap_or_else(|_| "{}".to_owned());
                record_window_evidence(env.store.pool(), &canary.id, stage, &counts).await?;
            }
            entry.job_id = submit_decision(env, jobs, stage, &canary, champion).await?;
            submitted.extend(entry.job_id.clone());
        }
        report.push(entry);
    }
    if submitted.is_empty() {
        return Ok(report);
    }
    wait_for(jobs, submitted, wait, "canary decisions").await?;
    send_owed_events(env).await?;
    for entry in &mut report {
        let state = get_version(env.store.pool(), &entry.version_id)
            .await?
            .map(|v| v.state);
        entry.applied = match entry.window {
            WindowDecision::Graduate => state.as_deref() == Some("current"),
            WindowDecision::RollBack | WindowDecision::Inconclusive { .. } => {
                state.as_deref() == Some("rejected")
            }
            WindowDecision::Hold { .. } => false,
        };
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_job_names_its_canary_champion_outcome_and_round() {
        let stages = PromotionStages::default();
        let key = DecisionKey {
            stage: GRADUATE_STAGE,
            started_ms: 1_764_648_000_123,
            champion: 1,
            round: 2,
            version_id: "team:planner@v2".into(),
        };
        let spec = decision_job(&stages, &key).unwrap();
        assert_eq!(
            (spec.workflow.as_str(), spec.stage.as_str()),
            (EVENTS_WORKFLOW, GRADUATE_STAGE)
        );
        assert_eq!(
            spec.idempotency_key.as_deref(),
            Some("promotion:canary:graduate:1764648000123:v1:r2:team:planner@v2")
        );
        assert_eq!(
            DecisionKey::parse(spec.idempotency_key.as_deref().unwrap()),
            Some(key)
        );
        // No evidence counts in the key: more outcomes of the same window make the same job.
        for bad in [
            "promotion:canary:graduate:10:10:planner@v2",
            "promotion:canary:promote:1:v1:r1:p@v2",
            "promotion:canary:roll_back:1:v1:r1:",
            "webhook:x",
        ] {
            assert_eq!(DecisionKey::parse(bad), None, "{bad}");
        }
        assert_eq!(
            decision_stage(&WindowDecision::Hold {
                reason: "thin".into()
            }),
            None,
            "S-62: a hold makes no job"
        );
        assert_eq!(
            decision_stage(&WindowDecision::RollBack),
            Some(ROLL_BACK_STAGE)
        );
    }
}
