//! The harvester's control-plane side: events → rows in the caller's transaction, leg dispatch
//! onto the queue, and [`HarvestHandler`], which turns a finished leg job into its row at
//! ingestion (seed: SkillOpt, "Automatic trace-harvested feedback (Mode A, off by default)" and
//! its legs; S-14..S-33; DESIGN §3: the control plane is the only writer).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::json;
use skillforge_contract::FeedbackEvent;
use skillforge_engine::ingest::{ApplyError, ResultHandler};
use skillforge_engine::{EngineError, Job, JobSpec, QueueBackend};
use skillforge_runner_agent::AgentReport;
use skillforge_runner_checker::{CheckReport, parse_checker_list};
use skillforge_runner_sandbox::VerifyReport;
use skillforge_store::feedback::{Upserted, event_created_at_now, upsert_feedback_event};
use skillforge_store::harvest::{
    ATTRIBUTION_TRAILER, Attribution, AutoTraceRun, LegJob, ci_at, get_attribution, get_leg_job,
    item_outcome, list_events, record_ci, record_event, record_leg_job, record_review_round,
    set_leg_job_id, upsert_attribution, upsert_auto_trace_run, upsert_item,
};
use skillforge_store::{Store, StoreError};
use sqlx::SqliteConnection;
use tracing::{info, warn};

use super::config::HarvestConfig;
use super::kind::JobKind;
use super::legs::{
    Leg, checker_row, checkers_spec, dispatch_key, hard_row, hard_verifier_spec, review_row,
    review_spec,
};
use super::outcome::{CiEvidence, HarvestEvent, Outcome, RowPlan, floor_row};
use super::revert::reverted_pr;
use super::review::{Reviewer, pick_reviewer, review_prompt};
use super::trailer::{
    TEMPLATE_TRAILER, TRAILER_DISAGREES_EVENT, TRAILER_UNKNOWN_EVENT, TemplateTrailer,
};
use super::{AUTO_TRACE_RUN_STATE, AUTO_TRACE_SOURCE, AUTOMATIC_TRACE, WORKFLOW, run_id};
use skillforge_store::templates::{VersionRef, resolve};

/// Job event of a harvest that could not be written (S-24).
pub const HARVEST_FAILED_EVENT: &str = "auto_trace_harvest_failed";
/// Job event of the review leg's same-family fallback (S-29).
pub const SAMEFAMILY_FALLBACK_EVENT: &str = "cross_family_review_samefamily_fallback";
/// The testable implement kind (S-16); see [`super::kind`] for every harvested kind.
pub use super::kind::IMPLEMENT_KIND;

/// Errors of the harvester's writes.
#[derive(Debug, thiserror::Error)]
pub enum HarvestError {
    /// The store refused a read or write.
    #[error("harvest store write: {0}")]
    Store(#[from] StoreError),
    /// The queue refused a leg job.
    #[error("enqueue harvest leg: {0}")]
    Queue(#[from] EngineError),
}

/// A row the harvest wrote.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WrittenRow {
    /// `auto-trace:<version>`.
    pub run_id: String,
    /// Item id.
    pub item_id: String,
    /// Reviewer sentinel.
    pub reviewer: String,
    /// `a` or `b`.
    pub choice: String,
    /// Projected score in `[0,1]`, `None` when `has_score` is false.
    pub score: Option<f64>,
    /// True when the feedback row was created, false when rewritten in place.
    pub inserted: bool,
}

/// A leg job to enqueue once the transaction that recorded it has committed.
#[derive(Debug, Clone, PartialEq)]
pub struct LegDispatch {
    /// Which leg.
    pub leg: Leg,
    /// The job (its idempotency key is the dispatch key).
    pub spec: JobSpec,
    /// `owner/repo`.
    pub repo: String,
    /// PR number.
    pub pr: i64,
}

/// What one event did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HarvestReport {
    /// Rows written (upserted).
    pub rows: Vec<WrittenRow>,
    /// Why parts of the event wrote nothing (not attributed, not an implement job, …).
    pub skipped: Vec<String>,
    /// Legs to enqueue.
    #[serde(skip)]
    pub legs: Vec<LegDispatch>,
    /// Attributions written from a `Skillforge-Template` trailer (`owner/repo#N → id@vN (from …)`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attributed: Vec<String>,
}

/// What the review leg needs beyond the config: reviewer runtimes available, as
/// `(runtime, family)` in preference order.
pub type AvailableReviewers = [(String, String)];

/// Reviewer runtimes for the review leg: `[skillopt] review_runtimes` when set (the fleet may
/// have programs this host lacks), else the shipped model runtimes whose program is on this
/// host's PATH. Each with its family from the runtime profile (an unknown name is its own family).
pub fn available_reviewers(config: &HarvestConfig) -> Vec<(String, String)> {
    let family = |runtime: &str| {
        skillforge_runner_agent::find(runtime)
            .map(|p| p.family.clone())
            .unwrap_or_else(|_| runtime.to_owned())
    };
    match &config.review_runtimes {
        Some(list) => list.iter().map(|r| (r.clone(), family(r))).collect(),
        None => skillforge_runner_agent::all()
            .iter()
            .filter(|p| p.name != "scripted" && on_path(&p.program))
            .map(|p| (p.name.clone(), p.family.clone()))
            .collect(),
    }
}

fn on_path(program: &str) -> bool {
    if program.contains('/') {
        return std::path::Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// Applies one event in the caller's transaction (S-15..S-23, S-26):
///
/// * `Ci`: records the observation; no row.
/// * `ChangesRequested`: counts the round (once per review id) and, for an attributed implement
///   change, upserts the floor row with the new round count.
/// * `Outcome`: for an attributed implement change, upserts the floor row; on a merge, also
///   flips the row of the PR a `Reverts …` body names (same repository, revert detection on) and
///   plans the enabled legs (recorded here, enqueued by [`dispatch_legs`] after commit).
///
/// With the harvester off ([`HarvestConfig::is_enabled`] false) it reads and writes nothing
/// (S-13); callers should not even call it.
///
/// # Errors
/// [`HarvestError::Store`]; the caller rolls back and records [`HARVEST_FAILED_EVENT`].
pub async fn apply_event(
    conn: &mut SqliteConnection,
    config: &HarvestConfig,
    event: &HarvestEvent,
    reviewers: &AvailableReviewers,
) -> Result<HarvestReport, HarvestError> {
    let mut report = HarvestReport::default();
    if !config.is_enabled() {
        report
            .skipped
            .push("auto-trace harvesting is off ([skillopt] auto_trace_enabled)".into());
        return Ok(report);
    }
    match event {
        HarvestEvent::Ci {
            repo,
            sha,
            context,
            state,
            description,
        } => {
            record_ci(conn, repo, sha, context, state, description).await?;
        }
        HarvestEvent::Attributed { repo, pr, trailer } => {
            attribute_by_trailer(conn, repo, *pr, trailer, &mut report).await?;
        }
        HarvestEvent::ChangesRequested {
            repo,
            pr,
            review_id,
        } => {
            let rounds = record_review_round(conn, repo, *pr, review_id).await?;
            let outcome = Outcome::ChangesRequested {
                rounds: u32::try_from(rounds).unwrap_or(u32::MAX),
            };
            if let Some(attribution) = attributed(conn, repo, *pr, &mut report).await? {
                let row = floor_row(repo, *pr, &outcome, None, None);
                report.rows.push(write_row(conn, &attribution, &row).await?);
            }
        }
        HarvestEvent::Outcome {
            repo,
            pr,
            outcome,
            head,
            ci_shas,
            body,
        } => {
            if matches!(outcome, Outcome::Merged { .. })
                && config.revert_detection()
                && let Some(original) = body.as_deref().and_then(|b| reverted_pr(b, repo))
            {
                flip_reverted(conn, repo, original, *pr, &mut report).await?;
            }
            let Some(attribution) = attributed(conn, repo, *pr, &mut report).await? else {
                return Ok(report);
            };
            let ci = match outcome {
                Outcome::Merged { ci: Some(ci) } => Some(ci.clone()),
                Outcome::Merged { ci: None } => {
                    let mut observations = Vec::new();
                    for sha in ci_shas.iter().chain(head.iter()) {
                        observations.extend(ci_at(&mut *conn, repo, sha).await?);
                    }
                    Some(CiEvidence::classify(observations.iter().map(|o| {
                        (o.context.as_str(), o.state.as_str(), o.description.as_str())
                    })))
                }
                _ => None,
            };
            let row = floor_row(repo, *pr, outcome, ci.as_ref(), head.as_deref());
            // A revert is the last word on a PR: a later (or re-delivered) merge, block or review
            // event must not flip the corrective negative back (seed: "Reverted → corrective negative").
            let run = run_id(&attribution.template_version_id);
            if !matches!(outcome, Outcome::Reverted { .. })
                && item_outcome(&mut *conn, &run, &row.item_id)
                    .await?
                    .as_deref()
                    == Some("reverted")
            {
                report.skipped.push(format!(
                    "{repo}#{pr} was reverted; a later `{}` outcome does not undo the revert",
                    outcome.name()
                ));
                return Ok(report);
            }
            report.rows.push(write_row(conn, &attribution, &row).await?);
            if matches!(outcome, Outcome::Merged { .. }) {
                plan_legs(
                    conn,
                    config,
                    &attribution,
                    head.as_deref(),
                    reviewers,
                    &mut report,
                )
                .await?;
            }
        }
    }
    Ok(report)
}

/// Attributes `repo#pr` from its trailer ([`super::trailer`]): a manual attribution is kept (a
/// trailer naming another version records [`TRAILER_DISAGREES_EVENT`]); a version this store does
/// not hold records [`TRAILER_UNKNOWN_EVENT`] and attributes nothing; otherwise the attribution is
/// written (or rewritten) with source `trailer` and the version's resolved commit.
async fn attribute_by_trailer(
    conn: &mut SqliteConnection,
    repo: &str,
    pr: i64,
    trailer: &TemplateTrailer,
    report: &mut HarvestReport,
) -> Result<(), HarvestError> {
    let found = match VersionRef::parse(&trailer.version) {
        Some(reference) => resolve(&mut *conn, &reference)
            .await?
            .filter(|v| v.id == trailer.version),
        None => None,
    };
    let Some(version) = found else {
        let why = format!(
            "{TEMPLATE_TRAILER}: {} in {} names no installed template version",
            trailer.version, trailer.place
        );
        record_event_once(conn, repo, pr, TRAILER_UNKNOWN_EVENT, &why).await?;
        report
            .skipped
            .push(format!("{repo}#{pr}: {why}; not attributed"));
        return Ok(());
    };
    let existing = get_attribution(&mut *conn, repo, pr).await?;
    if let Some(a) = &existing
        && a.source != ATTRIBUTION_TRAILER
    {
        if a.template_version_id != version.id {
            let why = format!(
                "{TEMPLATE_TRAILER}: {} in {} disagrees with the manual attribution to {}; the manual attribution is kept",
                version.id, trailer.place, a.template_version_id
            );
            warn!(repo, pr, "{why}");
            record_event_once(conn, repo, pr, TRAILER_DISAGREES_EVENT, &why).await?;
            report.skipped.push(format!("{repo}#{pr}: {why}"));
        }
        return Ok(());
    }
    let runtime = trailer.runtime.clone().unwrap_or_default();
    if let Some(a) = &existing
        && (
            a.template_version_id.as_str(),
            a.kind.as_str(),
            a.implementer_runtime.as_str(),
        ) == (version.id.as_str(), trailer.kind.as_str(), runtime.as_str())
    {
        return Ok(());
    }
    let attribution = Attribution {
        repo: repo.to_owned(),
        pr,
        template_id: version.template_id.clone(),
        template_version_id: version.id.clone(),
        resolved_commit: version.resolved_commit.clone(),
        kind: trailer.kind.clone(),
        implementer_runtime: runtime,
        source: ATTRIBUTION_TRAILER.to_owned(),
        ..existing.unwrap_or_default()
    };
    upsert_attribution(conn, &attribution).await?;
    info!(repo, pr, version = %version.id, from = %trailer.place, "attributed by trailer");
    report.attributed.push(format!(
        "{repo}#{pr} → {} (from {})",
        version.id, trailer.place
    ));
    Ok(())
}

/// Records a PR's event unless the same event with the same detail is already recorded (a
/// webhook re-delivered, or seen again by the watcher, says it once).
async fn record_event_once(
    conn: &mut SqliteConnection,
    repo: &str,
    pr: i64,
    event: &str,
    detail: &str,
) -> Result<(), HarvestError> {
    let seen = list_events(&mut *conn, Some((repo, pr)))
        .await?
        .iter()
        .any(|e| e.event == event && e.detail == detail);
    if !seen {
        record_event(conn, "", repo, pr, event, detail).await?;
    }
    Ok(())
}

/// The attribution of `repo#pr` when it is an implement-family change (S-16); else a skip note.
async fn attributed(
    conn: &mut SqliteConnection,
    repo: &str,
    pr: i64,
    report: &mut HarvestReport,
) -> Result<Option<Attribution>, HarvestError> {
    match get_attribution(&mut *conn, repo, pr).await? {
        None => {
            report.skipped.push(format!(
                "{repo}#{pr} has no template attribution; not harvested"
            ));
            Ok(None)
        }
        Some(a) if JobKind::parse(&a.kind).is_none() => {
            report.skipped.push(format!(
                "{repo}#{pr} is a `{}` job, not an implement job; not harvested",
                a.kind
            ));
            Ok(None)
        }
        Some(a) => Ok(Some(a)),
    }
}

async fn flip_reverted(
    conn: &mut SqliteConnection,
    repo: &str,
    original: i64,
    by_pr: i64,
    report: &mut HarvestReport,
) -> Result<(), HarvestError> {
    if original == by_pr {
        return Ok(());
    }
    if let Some(attribution) = attributed(conn, repo, original, report).await? {
        let row = floor_row(
            repo,
            original,
            &Outcome::Reverted { by_pr: Some(by_pr) },
            None,
            None,
        );
        report.rows.push(write_row(conn, &attribution, &row).await?);
    }
    Ok(())
}

/// Upserts the auto-trace run of the attributed version, the row's item and its feedback event
/// under the five-column key (source `auto-trace`, source_url `''`), so a re-harvest rewrites the
/// same rows in place (S-15, S-22, S-27).
async fn write_row(
    conn: &mut SqliteConnection,
    a: &Attribution,
    row: &RowPlan,
) -> Result<WrittenRow, HarvestError> {
    write_row_for(conn, &a.template_id, &a.template_version_id, &a.repo, row).await
}

async fn write_row_for(
    conn: &mut SqliteConnection,
    template_id: &str,
    template_version_id: &str,
    repo: &str,
    row: &RowPlan,
) -> Result<WrittenRow, HarvestError> {
    let run = run_id(template_version_id);
    let metadata = json!({ "feedback_source": AUTOMATIC_TRACE }).to_string();
    upsert_auto_trace_run(
        conn,
        &AutoTraceRun {
            id: &run,
            template_id,
            template_version_id,
            target_repo: repo,
            state: AUTO_TRACE_RUN_STATE,
            metadata_json: &metadata,
        },
    )
    .await?;
    upsert_item(
        conn,
        &run,
        &row.item_id,
        &row.title,
        &row.item_metadata.to_string(),
    )
    .await?;
    let event = FeedbackEvent {
        run_id: run.clone(),
        item_id: row.item_id.clone(),
        choice: row.choice.to_owned(),
        reasoning: row.signal.feedback.clone(),
        reviewer: row.reviewer.to_owned(),
        source: AUTO_TRACE_SOURCE.to_owned(),
        source_url: String::new(),
        created_at: event_created_at_now(),
    };
    let upserted = upsert_feedback_event(conn, &event).await?;
    info!(run_id = %run, item_id = %row.item_id, reviewer = row.reviewer, choice = row.choice, "harvested row");
    Ok(WrittenRow {
        run_id: run,
        item_id: row.item_id.clone(),
        reviewer: row.reviewer.to_owned(),
        choice: row.choice.to_owned(),
        score: row.signal.has_score.then_some(row.signal.score),
        inserted: upserted == Upserted::Inserted,
    })
}

/// Context of a review-leg dispatch, kept with the dispatch record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ReviewContext {
    runtime: String,
    family: String,
    self_family: bool,
}

/// Plans each enabled leg for a merged, attributed change: records the dispatch (so ingestion can
/// route the result) and queues a [`LegDispatch`]. A leg that cannot be dispatched (no checkout
/// or merged head, a bad checker list) records its `*_failed` event and writes no row (S-33).
async fn plan_legs(
    conn: &mut SqliteConnection,
    config: &HarvestConfig,
    a: &Attribution,
    head: Option<&str>,
    reviewers: &AvailableReviewers,
    report: &mut HarvestReport,
) -> Result<(), HarvestError> {
    let hard_commands = config.hard_verifier_commands();
    let enabled = |leg: Leg| match leg {
        Leg::HardVerifier => hard_commands.is_some(),
        Leg::Checkers => config.checkers_leg(),
        Leg::Review => config.review_leg(),
    };
    let run = run_id(&a.template_version_id);
    let kind = JobKind::parse(&a.kind).unwrap_or(JobKind::Testable);
    for leg in Leg::ALL.into_iter().filter(|l| enabled(*l)) {
        if !kind.has_leg(leg) {
            // S-41: a review-quality kind keeps only the soft cross-family signal.
            report.skipped.push(format!(
                "{} leg skipped: `{}` is a review-quality kind (only the cross-family review signal counts for it)",
                leg.name(),
                a.kind
            ));
            continue;
        }
        let (Some(head), false) = (head, a.checkout.is_empty()) else {
            let why = "no merged head SHA or no checkout recorded for the change (harvest attribute --checkout)";
            record_event(conn, "", &a.repo, a.pr, leg.failed_event(), why).await?;
            warn!(repo = %a.repo, pr = a.pr, leg = leg.name(), "harvest leg not dispatched: {why}");
            continue;
        };
        let checkout = PathBuf::from(&a.checkout);
        let base = if a.base.is_empty() {
            format!("{head}^")
        } else {
            a.base.clone()
        };
        let (spec, context) = match leg {
            Leg::HardVerifier => {
                let key = dispatch_key(leg, &run, &a.repo, a.pr, head, None);
                let (commands, image) = (
                    hard_commands.clone().unwrap_or_default(),
                    config.hard_verifier_image.clone(),
                );
                (
                    hard_verifier_spec(&config.stages, checkout, head, commands, image, key),
                    json!({}),
                )
            }
            Leg::Checkers => {
                let list = config
                    .deterministic_checkers
                    .as_deref()
                    .unwrap_or("diff_size");
                match parse_checker_list(list) {
                    Ok(checkers) => {
                        let key = dispatch_key(leg, &run, &a.repo, a.pr, head, None);
                        (
                            checkers_spec(&config.stages, checkout, &base, head, checkers, key),
                            json!({}),
                        )
                    }
                    Err(e) => {
                        record_event(
                            conn,
                            "",
                            &a.repo,
                            a.pr,
                            leg.failed_event(),
                            &format!("deterministic_checkers: {e}"),
                        )
                        .await?;
                        continue;
                    }
                }
            }
            Leg::Review => {
                let implementer_family = skillforge_runner_agent::find(&a.implementer_runtime)
                    .map(|p| p.family.clone())
                    .unwrap_or_else(|_| a.implementer_runtime.clone());
                let Some(reviewer) = pick_reviewer(&implementer_family, reviewers) else {
                    report.skipped.push(
                        "no review-capable runtime is available; review skipped (no row)".into(),
                    );
                    continue;
                };
                if reviewer.self_family {
                    warn!(repo = %a.repo, pr = a.pr, runtime = %reviewer.runtime, family = %reviewer.family,
                        "no reviewer of another family; same-family review fallback (self-preference bias applies)");
                    let detail = format!(
                        "reviewer {} shares the implementer's family {}",
                        reviewer.runtime, reviewer.family
                    );
                    record_event(conn, "", &a.repo, a.pr, SAMEFAMILY_FALLBACK_EVENT, &detail)
                        .await?;
                }
                let key = dispatch_key(leg, &run, &a.repo, a.pr, head, Some(&reviewer.runtime));
                let prompt = review_prompt(&a.repo, a.pr, head, &base, &a.title, &a.instructions);
                let context = ReviewContext {
                    runtime: reviewer.runtime.clone(),
                    family: reviewer.family.clone(),
                    self_family: reviewer.self_family,
                };
                (
                    review_spec(
                        &config.stages,
                        &reviewer.runtime,
                        prompt,
                        Some(checkout),
                        key,
                    ),
                    json!(context),
                )
            }
        };
        let spec = match spec {
            Ok(spec) => spec,
            Err(e) => {
                // S-33: a leg that cannot be built records its event; the harvest goes on.
                record_event(conn, "", &a.repo, a.pr, leg.failed_event(), &e.to_string()).await?;
                warn!(repo = %a.repo, pr = a.pr, leg = leg.name(), error = %e, "harvest leg not dispatched");
                continue;
            }
        };
        let key = spec.idempotency_key.clone().unwrap_or_default();
        record_leg_job(
            conn,
            &LegJob {
                dispatch_key: key,
                leg: leg.name().to_owned(),
                repo: a.repo.clone(),
                pr: a.pr,
                template_id: a.template_id.clone(),
                template_version_id: a.template_version_id.clone(),
                head: head.to_owned(),
                context_json: context.to_string(),
                ..LegJob::default()
            },
        )
        .await?;
        report.legs.push(LegDispatch {
            leg,
            spec,
            repo: a.repo.clone(),
            pr: a.pr,
        });
    }
    Ok(())
}

/// Enqueues the planned legs (after the transaction that recorded them committed) and records
/// their job ids. A leg the queue refuses records its `*_failed` event and is otherwise
/// swallowed (S-33). Returns `(leg, job id)` of each enqueued leg.
///
/// # Errors
/// [`HarvestError::Store`] when even the failure event cannot be written.
pub async fn dispatch_legs(
    backend: &dyn QueueBackend,
    store: &Store,
    legs: &[LegDispatch],
) -> Result<Vec<(Leg, String)>, HarvestError> {
    let mut out = Vec::new();
    for dispatch in legs {
        let key = dispatch.spec.idempotency_key.clone().unwrap_or_default();
        // On a fleet the checkout travels as a URL or a bundle, never as this host's path.
        let mut spec = dispatch.spec.clone();
        if dispatch.leg == Leg::Review
            && !backend.shares_disk()
            && let Some(workdir) = spec.payload.get_mut("workdir")
        {
            // The reviewer reads the diff in its prompt; this host's checkout is not its workdir there.
            *workdir = serde_json::Value::Null;
        }
        let enqueued = match skillforge_stage::repo::route_repository(backend, &mut spec).await {
            Ok(()) => skillforge_stage::submit_recorded(backend, store, &spec).await,
            Err(e) => Err(skillforge_engine::EngineError::Config(format!(
                "repository of the {} leg: {e}",
                dispatch.leg.name()
            ))),
        };
        let mut tx = store.begin().await?;
        match enqueued {
            Ok(e) => {
                set_leg_job_id(&mut tx, &key, &e.job_id).await?;
                info!(job_id = %e.job_id, leg = dispatch.leg.name(), created = e.created, "harvest leg enqueued");
                out.push((dispatch.leg, e.job_id));
            }
            Err(e) => {
                warn!(leg = dispatch.leg.name(), error = %e, "harvest leg could not be enqueued");
                record_event(
                    &mut tx,
                    "",
                    &dispatch.repo,
                    dispatch.pr,
                    dispatch.leg.failed_event(),
                    &e.to_string(),
                )
                .await?;
            }
        }
        tx.commit().await.map_err(StoreError::from)?;
    }
    Ok(out)
}

/// The engine result handler of harvest leg jobs: finds the dispatch by the job's idempotency
/// key and writes the leg's row in the ingestion transaction (exactly once per job, so a leg
/// re-run after a SIGKILLed worker still writes one row). A leg that produced no report records
/// its `*_failed` event; a skipped verdict, an all-skipped check or an empty rubric writes no
/// row (S-26, S-30, S-33). Jobs that are not harvest dispatches are left alone.
#[derive(Debug, Default, Clone, Copy)]
pub struct HarvestHandler;

#[async_trait::async_trait]
impl ResultHandler for HarvestHandler {
    async fn apply(&self, conn: &mut SqliteConnection, job: &Job) -> Result<(), ApplyError> {
        apply_leg_result(conn, job).await.map_err(|e| match e {
            HarvestError::Store(s) => ApplyError::Store(s),
            HarvestError::Queue(q) => ApplyError::Unusable {
                job_id: job.id.clone(),
                reason: q.to_string(),
            },
        })
    }
}

async fn apply_leg_result(conn: &mut SqliteConnection, job: &Job) -> Result<(), HarvestError> {
    if job.spec.workflow != WORKFLOW {
        return Ok(());
    }
    let Some(key) = job.spec.idempotency_key.as_deref() else {
        return Ok(());
    };
    let Some(dispatch) = get_leg_job(&mut *conn, key).await? else {
        return Ok(());
    };
    let Some(leg) = Leg::from_name(&dispatch.leg) else {
        return Ok(());
    };
    let detail = job
        .outcome
        .as_ref()
        .map(|o| &o.detail)
        .filter(|d| !d.is_null());
    let (repo, pr) = (dispatch.repo.as_str(), dispatch.pr);
    let failed = |why: String| (leg.failed_event(), why);
    let row: Result<Option<RowPlan>, (&str, String)> = match (leg, detail) {
        (_, None) => {
            Err(failed(job.error.clone().unwrap_or_else(|| {
                format!("job ended {} without a report", job.state)
            })))
        }
        (Leg::HardVerifier, Some(d)) => match VerifyReport::from_json(d) {
            Ok(report) => Ok(hard_row(repo, pr, &report)),
            Err(e) => Err(failed(format!("unreadable verifier report: {e}"))),
        },
        (Leg::Checkers, Some(d)) => match serde_json::from_value::<CheckReport>(d.clone()) {
            Ok(report) => Ok(checker_row(repo, pr, &report)),
            Err(e) => Err(failed(format!("unreadable checker report: {e}"))),
        },
        (Leg::Review, Some(d)) => {
            let context: Option<ReviewContext> = serde_json::from_str(&dispatch.context_json).ok();
            match (serde_json::from_value::<AgentReport>(d.clone()), context) {
                (Ok(report), Some(c)) if report.exit == skillforge_runner::ExitClass::Passed => {
                    let reviewer = Reviewer {
                        runtime: c.runtime,
                        family: c.family,
                        self_family: c.self_family,
                    };
                    Ok(review_row(
                        repo,
                        pr,
                        &reviewer,
                        report.final_message.as_deref().unwrap_or(""),
                    ))
                }
                (Ok(report), _) => Err(failed(match &report.exit {
                    skillforge_runner::ExitClass::NotRunnable { reason } => {
                        format!("reviewer run ended not_runnable: {reason}")
                    }
                    other => format!("reviewer run ended {}", other.label()),
                })),
                (Err(e), _) => Err(failed(format!("unreadable agent report: {e}"))),
            }
        }
    };
    match row {
        Ok(Some(row)) => {
            write_row_for(
                conn,
                &dispatch.template_id,
                &dispatch.template_version_id,
                repo,
                &row,
            )
            .await?;
        }
        Ok(None) => {
            info!(job_id = %job.id, leg = leg.name(), "harvest leg produced no score; no row written");
            record_event(
                conn,
                &job.id,
                repo,
                pr,
                &format!("{}_no_row", leg.name()),
                "no score: skipped or empty",
            )
            .await?;
        }
        Err((event, why)) => {
            warn!(job_id = %job.id, leg = leg.name(), error = %why, "harvest leg failed; no row written");
            record_event(conn, &job.id, repo, pr, event, &why).await?;
        }
    }
    Ok(())
}

/// Runs `apply_event` in its own transaction; on a store error rolls back and records
/// [`HARVEST_FAILED_EVENT`] (S-24), returning the error for the caller to report.
///
/// # Errors
/// [`HarvestError`] when the harvest (and so its rows) could not be written.
pub async fn harvest(
    store: &Store,
    config: &HarvestConfig,
    event: &HarvestEvent,
    reviewers: &AvailableReviewers,
) -> Result<HarvestReport, HarvestError> {
    let mut tx = skillforge_store::templates::begin_write(store).await?;
    match apply_event(&mut tx, config, event, reviewers).await {
        Ok(report) => {
            tx.commit().await.map_err(StoreError::from)?;
            Ok(report)
        }
        Err(e) => {
            let _ = tx.rollback().await;
            let (repo, pr) = match event {
                HarvestEvent::Outcome { repo, pr, .. }
                | HarvestEvent::ChangesRequested { repo, pr, .. }
                | HarvestEvent::Attributed { repo, pr, .. } => (repo.as_str(), *pr),
                HarvestEvent::Ci { repo, .. } => (repo.as_str(), 0),
            };
            warn!(repo, pr, error = %e, "harvest failed; recorded auto_trace_harvest_failed");
            if let Ok(mut tx) = store.begin().await
                && record_event(&mut tx, "", repo, pr, HARVEST_FAILED_EVENT, &e.to_string())
                    .await
                    .is_ok()
            {
                let _ = tx.commit().await;
            }
            Err(e)
        }
    }
}
