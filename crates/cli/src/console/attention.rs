//! The console's Attention page: what waits on a person, each with a link to where it is
//! handled: review packets without feedback, pending candidates, canaries, train sessions
//! waiting for a review or a decision, quarantined job records, dead and stale jobs.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use skillforge_engine::JobState;

use super::access::Viewer;
use super::html::{esc, job_link, page, table};
use super::{ConsoleState, failed};
use crate::output::{failure_reason, rfc3339_ms};

/// Most rows of each kind listed.
const LIMIT: usize = 50;

/// Train states that wait on a person, and what they wait for.
fn waits_for(state: &str) -> Option<&'static str> {
    Some(match state {
        "review_published" => "review feedback on the published packet",
        "candidate_created" | "candidate_review_published" => {
            "a decision on the candidate (promote or reject)"
        }
        "optimizer_completed_no_candidate" => "a look at why the optimizer produced no candidate",
        _ => return None,
    })
}

/// What a session in a candidate state has left to do when its candidate was promoted or
/// rejected outside it (by hand, auto-promotion, a canary's graduation or rollback): record it,
/// as `train status` says; `None` while the decision is still a person's.
pub(super) async fn decided_outside(
    store: &skillforge_store::Store,
    s: &skillforge_store::train::SessionRow,
) -> Result<Option<String>, skillforge_store::StoreError> {
    if !matches!(
        s.state.as_str(),
        "candidate_created" | "candidate_review_published"
    ) {
        return Ok(None);
    }
    let Some(it) = skillforge_store::train::list_iterations(store.pool(), &s.id)
        .await?
        .into_iter()
        .last()
        .filter(|it| !it.candidate_version_id.is_empty())
    else {
        return Ok(None);
    };
    let state = skillforge_store::candidates::get_candidate(store.pool(), &it.candidate_version_id)
        .await?
        .map(|c| c.version_state);
    let how = match state.as_deref() {
        Some("current" | "superseded") => "promoted",
        Some("rejected") => "rejected",
        _ => return Ok(None),
    };
    Ok(Some(format!(
        "{} was {how} outside this session: skillforge train continue --session {} records it, then --start-next",
        it.candidate_version_id, s.id
    )))
}

/// A run's items without any feedback yet: (run, missing, total), newest runs first.
pub(super) async fn packets_waiting(
    store: &skillforge_store::Store,
) -> Result<Vec<(skillforge_store::review::EvalRunRow, usize, usize)>, skillforge_store::StoreError>
{
    let mut runs = skillforge_store::review::list_runs(store.pool()).await?;
    runs.sort_by(|a, b| b.created_at.cmp(&a.created_at));
    let mut out = Vec::new();
    for run in runs.into_iter().take(LIMIT) {
        let items = skillforge_store::review::list_items(store.pool(), &run.id).await?;
        if items.is_empty() {
            continue;
        }
        let with = skillforge_store::feedback::items_with_feedback(store.pool(), &run.id).await?;
        let missing = items
            .iter()
            .filter(|i| !with.contains(&i.item.item_id))
            .count();
        if missing > 0 {
            out.push((run, missing, items.len()));
        }
    }
    Ok(out)
}

/// Pending and canary versions of every template: (template, version id, state).
pub(super) async fn candidates_waiting(
    store: &skillforge_store::Store,
) -> Result<Vec<skillforge_store::candidates::CandidateRow>, skillforge_store::StoreError> {
    let mut out = Vec::new();
    for t in skillforge_store::templates::list_templates(store.pool()).await? {
        for c in skillforge_store::candidates::list_candidates(store.pool(), &t.id).await? {
            if c.version_state == "pending" || c.version_state == "canary" {
                out.push(c);
            }
        }
    }
    Ok(out)
}

/// `GET /attention`.
pub async fn attention(
    State(state): State<Arc<ConsoleState>>,
    Extension(viewer): Extension<Viewer>,
) -> Response {
    match body(&state).await {
        Ok(body) => page("Attention", &viewer, "/attention", &body).into_response(),
        Err(e) => failed(&viewer, "read what waits", e),
    }
}

async fn body(state: &ConsoleState) -> anyhow::Result<String> {
    let backend = state.backend.as_ref();
    let store = &state.store;
    let mut out = String::new();
    let mut total = 0usize;

    let packets = packets_waiting(store).await?;
    total += packets.len();
    let rows: Vec<Vec<String>> = packets
        .iter()
        .map(|(run, missing, n)| {
            vec![
                format!("<a href=\"/work#run-{0}\">{0}</a>", esc(&run.id)),
                esc(&run.template_version_id),
                format!("{missing} of {n} item(s)"),
                esc(&run.created_at),
            ]
        })
        .collect();
    out.push_str("<h2 id=\"packets\">Review packets without feedback</h2>");
    out.push_str(&table(
        &["Review run", "Version", "Without feedback", "Created"],
        &rows,
        "Every review packet has feedback.",
    ));

    let candidates = candidates_waiting(store).await?;
    total += candidates.len();
    let rows: Vec<Vec<String>> = candidates
        .iter()
        .map(|c| {
            let what = if c.version_state == "canary" {
                "canary: graduates or rolls back on its window"
            } else {
                "pending: promote or reject (`skillforge candidate decide`)"
            };
            vec![
                format!(
                    "<a href=\"/work#candidate-{0}\">{0}</a>",
                    esc(&c.version_id)
                ),
                esc(&c.version_state),
                esc(what),
                esc(&c.created_at),
            ]
        })
        .collect();
    out.push_str("<h2 id=\"candidates\">Pending candidates and canaries</h2>");
    out.push_str(&table(
        &["Version", "State", "Waits for", "Imported"],
        &rows,
        "No pending candidate.",
    ));

    let sessions = skillforge_store::train::list_sessions(
        store.pool(),
        u32::try_from(LIMIT * 4).unwrap_or(u32::MAX),
    )
    .await?;
    let mut waiting: Vec<(&skillforge_store::train::SessionRow, String)> = Vec::new();
    for s in &sessions {
        let Some(w) = waits_for(&s.state) else {
            continue;
        };
        // A candidate decided outside the session (promoted, rejected, rolled back) waits for no
        // person: the session's next `train continue` records it (as `train status` says).
        if decided_outside(store, s).await?.is_some() {
            continue;
        }
        waiting.push((s, w.to_owned()));
    }
    total += waiting.len();
    let rows: Vec<Vec<String>> = waiting
        .iter()
        .map(|(s, w)| {
            vec![
                format!("<a href=\"/work#session-{0}\">{0}</a>", esc(&s.id)),
                esc(&s.template_id),
                esc(&s.state),
                esc(w),
            ]
        })
        .collect();
    out.push_str("<h2 id=\"sessions\">Train sessions waiting</h2>");
    out.push_str(&table(
        &["Session", "Template", "State", "Waits for"],
        &rows,
        "No train session waits on a person.",
    ));

    let broken = backend.quarantined(LIMIT).await?;
    total += broken.len();
    let rows: Vec<Vec<String>> = broken
        .iter()
        .map(|r| {
            vec![
                format!("<code>{}</code>", esc(&r.job_id)),
                r.quarantined_at_ms.map(rfc3339_ms).unwrap_or_default(),
                esc(&r.reason),
            ]
        })
        .collect();
    out.push_str("<h2 id=\"quarantined\">Quarantined job records</h2>");
    out.push_str(&table(
        &["Record", "Quarantined", "Why"],
        &rows,
        "No quarantined record.",
    ));
    if !broken.is_empty() {
        out.push_str("<p class=\"note\">`skillforge jobs purge ID` removes a record once you have looked at it.</p>");
    }

    let mut stuck = backend.list(Some(JobState::Dead), LIMIT).await?;
    stuck.extend(backend.list(Some(JobState::Stale), LIMIT).await?);
    total += stuck.len();
    let rows: Vec<Vec<String>> = stuck
        .iter()
        .map(|j| {
            vec![
                job_link(&j.id),
                super::html::state_badge(j.state.as_str()),
                esc(&format!("{}/{}", j.spec.workflow, j.spec.stage)),
                esc(&failure_reason(j).unwrap_or_default()),
            ]
        })
        .collect();
    out.push_str("<h2 id=\"dead\">Dead and stale jobs</h2>");
    out.push_str(&table(
        &["Job", "State", "Workflow/stage", "Why"],
        &rows,
        "No dead or stale job.",
    ));
    if !stuck.is_empty() {
        out.push_str("<p class=\"note\">Open a job to retry it, or <a href=\"/jobs?state=dead\">retry several at once</a>.</p>");
    }
    let mut head = String::new();
    let _ = write!(
        head,
        "<p id=\"attention-total\" data-total=\"{total}\">{}</p>",
        if total == 0 {
            "Nothing waits on a person.".to_owned()
        } else {
            format!("{total} thing(s) wait on a person.")
        }
    );
    Ok(head + &out)
}
