//! The console's queue pages: the overview (counts by state and queue, throughput and latency
//! over the last hour, workers, the prune action), the jobs list (filters, search, paging, bulk
//! retry and cancel), a job's page (spec with secret values redacted, attempts, lease history,
//! live output, outcome) and workers with every lease and lock and its fencing token.
//!
//! Reads go through the engine's `QueueBackend` traits (`counts`, `list_readable`, `get`,
//! `leases`, `read_output`, `quarantined`) and the CLI's job shapes (`jobs show --json`'s
//! [`job_json`](crate::commands::jobs::job_json)); actions through `cancel`, `retry` and the
//! retention's `prune_pass`, as `jobs cancel|retry|prune` do.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use axum::Extension;
use axum::extract::{Form, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde_json::{Value, json};
use skillforge_engine::{CancelReply, Job, JobState, LeaseKind};

use super::access::{Role, Viewer};
use super::html::{action_button, csrf_field, esc, job_link, page, state_badge, table, url_encode};
use super::{ConsoleState, failed};
use crate::output::{age, failure_reason, rfc3339_ms};

/// Jobs per page of the jobs list.
pub const PAGE_SIZE: usize = 50;
/// With a queue, workflow or text filter, the newest this many jobs (of the chosen state) are
/// searched; the page says so. Keeps every page O(window) whatever the queue holds.
pub const SEARCH_WINDOW: usize = 1000;
/// Newest finished jobs per terminal state read for the last hour's throughput and latency.
pub const RECENT_SAMPLE: usize = 200;
/// The last hour, ms.
const HOUR_MS: i64 = 3_600_000;

/// The form fields of an action, in order (repeated names kept).
type Fields = Vec<(String, String)>;

fn field<'a>(form: &'a Fields, name: &str) -> Option<&'a str> {
    form.iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// `?flash=` codes the actions redirect with, and what the page then says.
fn flash_text(code: &str) -> Option<&'static str> {
    Some(match code {
        "cancelled" => "Cancelled.",
        "cancel-requested" => "Cancel requested: the worker stops the job at its next heartbeat.",
        "already-finished" => "The job had already finished: nothing to cancel.",
        "retried" => "Queued again with a fresh attempt budget.",
        "bulk" => "Done; the table shows each job's state now.",
        "pruned" => "Pruned the finished jobs past their retention.",
        _ => return None,
    })
}

fn flash(q: &BTreeMap<String, String>) -> String {
    q.get("flash")
        .and_then(|c| flash_text(c))
        .map(|t| format!("<p class=\"flash\" id=\"flash\">{}</p>", esc(t)))
        .unwrap_or_default()
}

/// The `secret_env` values of `job`'s payload: scrubbed from everything its page shows (its
/// own output may print them).
fn secret_values(job: &Job) -> Vec<String> {
    let p = &job.spec.payload;
    let names: Vec<&str> = p
        .get("secret_env")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut values: Vec<String> = names
        .iter()
        .filter_map(|n| p.get("env").and_then(|e| e.get(*n)).and_then(Value::as_str))
        .filter(|v| v.len() >= 4)
        .map(str::to_owned)
        .collect();
    values.sort_by_key(|v| std::cmp::Reverse(v.len()));
    values
}

fn scrub(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_owned();
    for s in secrets {
        if out.contains(s.as_str()) {
            out = out.replace(s.as_str(), "***");
        }
    }
    out
}

/// What a job runs, in a few words (the jobs list's WHAT column).
fn describe(job: &Job) -> String {
    crate::commands::jobs::describe(job)
}

/// `GET /`: the queue at a glance.
pub async fn overview(
    State(state): State<Arc<ConsoleState>>,
    Extension(viewer): Extension<Viewer>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    match overview_body(&state, &viewer).await {
        Ok(body) => page("Queue", &viewer, "/", &format!("{}{body}", flash(&q))).into_response(),
        Err(e) => failed(&viewer, "read the queue", e),
    }
}

async fn overview_body(
    state: &ConsoleState,
    viewer: &Viewer,
) -> Result<String, skillforge_engine::EngineError> {
    let backend = state.backend.as_ref();
    let counts = backend.counts().await?;
    let now = backend.now_ms().await?;
    let mut out = String::new();
    out.push_str("<div class=\"cards\" id=\"counts\">");
    for (s, n) in &counts.by_state {
        let _ = write!(
            out,
            "<a class=\"card\" href=\"/jobs?state={0}\" data-state=\"{0}\"><div class=\"n\">{n}</div><div class=\"l\">{0}</div></a>",
            s.as_str()
        );
    }
    let _ = write!(
        out,
        "<div class=\"card\"><div class=\"n\">{}</div><div class=\"l\">jobs in the queue ({})</div></div></div>",
        counts.total(),
        backend.name()
    );

    // Running per queue from the running jobs themselves (O(running)).
    let running = backend.list(Some(JobState::Running), usize::MAX).await?;
    let mut by_queue: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (queue, n) in &counts.queued_by_queue {
        by_queue.entry(queue.clone()).or_default().0 = *n;
    }
    for j in &running {
        by_queue.entry(j.spec.queue.clone()).or_default().1 += 1;
    }
    out.push_str("<h2>By queue</h2>");
    let rows: Vec<Vec<String>> = by_queue
        .iter()
        .map(|(queue, (queued, running))| {
            vec![
                esc(queue),
                format!(
                    "<a href=\"/jobs?state=queued&amp;queue={}\">{queued}</a>",
                    url_encode(queue)
                ),
                running.to_string(),
            ]
        })
        .collect();
    out.push_str(&table(
        &["Queue", "Queued", "Running"],
        &rows,
        "Nothing queued or running.",
    ));

    // Throughput and latency: the newest finished jobs of each terminal state, those of the last hour.
    let mut finished: Vec<Job> = Vec::new();
    let mut saturated = false;
    for s in [
        JobState::Succeeded,
        JobState::Failed,
        JobState::Dead,
        JobState::Cancelled,
    ] {
        let jobs = backend.list(Some(s), RECENT_SAMPLE).await?;
        let recent: Vec<Job> = jobs
            .iter()
            .filter(|j| now - j.updated_at_ms <= HOUR_MS)
            .cloned()
            .collect();
        saturated |= recent.len() == RECENT_SAMPLE;
        finished.extend(recent);
    }
    out.push_str("<h2>Last hour</h2>");
    let passed = finished
        .iter()
        .filter(|j| j.state == JobState::Succeeded)
        .count();
    let at_least = if saturated { "at least " } else { "" };
    let mut e2e: Vec<i64> = finished
        .iter()
        .map(|j| j.updated_at_ms - j.created_at_ms)
        .collect();
    let mut run: Vec<i64> = finished
        .iter()
        .filter_map(|j| {
            j.history
                .last()
                .and_then(|a| a.ended_at_ms.map(|e| e - a.started_at_ms))
        })
        .collect();
    let _ = write!(
        out,
        "<dl class=\"kv\" id=\"throughput\"><dt>Finished</dt><dd>{at_least}{} job(s) ({} succeeded, {} did not)</dd>\
         <dt>Enqueue to finish</dt><dd>{}</dd><dt>Last attempt's run time</dt><dd>{}</dd></dl>",
        finished.len(),
        passed,
        finished.len() - passed,
        percentiles(&mut e2e),
        percentiles(&mut run)
    );
    if saturated {
        let _ = write!(
            out,
            "<p class=\"note\">Figures from the newest {RECENT_SAMPLE} finished jobs of each state.</p>"
        );
    }

    let live = skillforge_engine::labels::live_workers(backend).await?;
    let _ = write!(
        out,
        "<h2>Workers</h2><p><a href=\"/workers\">{} live worker(s)</a>, {} job(s) running.</p>",
        live.len(),
        running.len()
    );

    if viewer.role == Role::Admin {
        let _ = write!(
            out,
            "<h2>Prune</h2><form method=\"post\" action=\"/prune\" class=\"filters\">{}\
             <div><label for=\"older_than\">Finished longer ago than (e.g. 7d, 36h; empty: <code>[queue] keep_succeeded</code> / <code>keep_failed</code>)</label>\
             <input id=\"older_than\" name=\"older_than\" size=\"10\"></div><button type=\"submit\" class=\"danger\">Prune finished jobs</button></form>\
             <p class=\"note\">A job whose result is not applied yet is never removed.</p>",
            csrf_field(viewer)
        );
    }
    Ok(out)
}

/// `p50 X, p95 Y (n)` of `values` (ms), or a dash.
fn percentiles(values: &mut [i64]) -> String {
    if values.is_empty() {
        return "none finished".to_owned();
    }
    values.sort_unstable();
    let at = |p: f64| values[(((values.len() - 1) as f64) * p).round() as usize];
    format!(
        "p50 {}, p95 {} (of {})",
        age(at(0.5)),
        age(at(0.95)),
        values.len()
    )
}

/// `GET /jobs?state=&queue=&workflow=&q=&page=`.
pub async fn jobs(
    State(state): State<Arc<ConsoleState>>,
    Extension(viewer): Extension<Viewer>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    match jobs_body(&state, &viewer, &q).await {
        Ok(Ok(body)) => {
            page("Jobs", &viewer, "/jobs", &format!("{}{body}", flash(&q))).into_response()
        }
        Ok(Err(bad)) => (
            StatusCode::BAD_REQUEST,
            page(
                "Jobs",
                &viewer,
                "/jobs",
                &format!("<p class=\"refused\">{}</p>", esc(&bad)),
            ),
        )
            .into_response(),
        Err(e) => failed(&viewer, "list jobs", e),
    }
}

async fn jobs_body(
    state: &ConsoleState,
    viewer: &Viewer,
    q: &BTreeMap<String, String>,
) -> Result<Result<String, String>, skillforge_engine::EngineError> {
    let param = |k: &str| q.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
    let broken = param("state") == Some("broken");
    let job_state = match param("state").filter(|_| !broken) {
        Some(s) => match s.parse::<JobState>() {
            Ok(s) => Some(s),
            Err(e) => return Ok(Err(format!("state `{s}`: {e} (or `broken`)"))),
        },
        None => None,
    };
    let page_no: usize = match param("page").map(str::parse::<usize>) {
        None => 1,
        Some(Ok(n)) if n >= 1 => n,
        Some(_) => return Ok(Err("page: a page number from 1".to_owned())),
    };
    let (queue, workflow, text) = (param("queue"), param("workflow"), param("q"));
    let filtered = queue.is_some() || workflow.is_some() || text.is_some();

    let mut out = String::new();
    let states: String = std::iter::once(("", "any state"))
        .chain(JobState::ALL.iter().map(|s| (s.as_str(), s.as_str())))
        .chain(std::iter::once(("broken", "broken records")))
        .map(|(v, l)| {
            format!(
                "<option value=\"{v}\"{}>{l}</option>",
                if param("state").unwrap_or("") == v {
                    " selected"
                } else {
                    ""
                }
            )
        })
        .collect();
    let _ = write!(
        out,
        "<form method=\"get\" action=\"/jobs\" class=\"filters\" id=\"filters\">\
         <div><label for=\"state\">State</label><select id=\"state\" name=\"state\">{states}</select></div>\
         <div><label for=\"queue\">Queue</label><input id=\"queue\" name=\"queue\" value=\"{}\" size=\"12\"></div>\
         <div><label for=\"workflow\">Workflow</label><input id=\"workflow\" name=\"workflow\" value=\"{}\" size=\"12\"></div>\
         <div><label for=\"q\">Search (id, key, command, stage)</label><input id=\"q\" name=\"q\" value=\"{}\" size=\"24\"></div>\
         <button type=\"submit\">Show</button></form>",
        esc(queue.unwrap_or("")),
        esc(workflow.unwrap_or("")),
        esc(text.unwrap_or(""))
    );

    if broken {
        let records = state.backend.quarantined(PAGE_SIZE * page_no).await?;
        let rows: Vec<Vec<String>> = records
            .iter()
            .skip(PAGE_SIZE * (page_no - 1))
            .map(|r| {
                vec![
                    format!("<code>{}</code>", esc(&r.job_id)),
                    r.quarantined_at_ms.map(rfc3339_ms).unwrap_or_default(),
                    esc(&r.reason),
                ]
            })
            .collect();
        out.push_str(&table(
            &["Record", "Quarantined", "Why it cannot be read"],
            &rows,
            "No broken job records.",
        ));
        out.push_str("<p class=\"note\">`skillforge jobs purge ID` removes one.</p>");
        return Ok(Ok(out));
    }

    let want = PAGE_SIZE * page_no;
    let (jobs, unreadable) = state
        .backend
        .list_readable(job_state, if filtered { SEARCH_WINDOW } else { want + 1 })
        .await?;
    let matches = |j: &Job| {
        queue.is_none_or(|qn| j.spec.queue == qn)
            && workflow.is_none_or(|w| j.spec.workflow == w)
            && text.is_none_or(|t| {
                let t = t.to_lowercase();
                j.id.to_lowercase().contains(&t)
                    || j.spec
                        .idempotency_key
                        .as_deref()
                        .is_some_and(|k| k.to_lowercase().contains(&t))
                    || j.spec.stage.to_lowercase().contains(&t)
                    || describe(j).to_lowercase().contains(&t)
            })
    };
    let hits: Vec<&Job> = jobs.iter().filter(|j| matches(j)).collect();
    let shown: Vec<&Job> = hits
        .iter()
        .skip(PAGE_SIZE * (page_no - 1))
        .take(PAGE_SIZE)
        .copied()
        .collect();
    let more = hits.len() > want;
    if !unreadable.is_empty() {
        let _ = write!(
            out,
            "<p class=\"note\">{} job record(s) could not be read and are not listed; see <a href=\"/jobs?state=broken\">broken records</a>.</p>",
            unreadable.len()
        );
    }
    if filtered && jobs.len() >= SEARCH_WINDOW {
        let _ = write!(
            out,
            "<p class=\"note\">Searched the newest {SEARCH_WINDOW} jobs{}; narrow by state to search older ones.</p>",
            job_state
                .map(|s| format!(" in state {s}"))
                .unwrap_or_default()
        );
    }
    let admin = viewer.role == Role::Admin;
    let now = state.backend.now_ms().await?;
    let rows: Vec<Vec<String>> = shown
        .iter()
        .map(|j| {
            let mut row = Vec::new();
            if admin {
                row.push(format!("<input type=\"checkbox\" name=\"id\" value=\"{0}\" form=\"bulk\" aria-label=\"select {0}\">", esc(&j.id)));
            }
            row.extend([
                job_link(&j.id),
                state_badge(j.state.as_str()),
                esc(&j.spec.queue),
                esc(&format!("{}/{}", j.spec.workflow, j.spec.stage)),
                format!("{}/{}", j.attempts, j.spec.max_attempts),
                format!("{} ago", age(now - j.created_at_ms)),
                esc(&describe(j)),
            ]);
            row
        })
        .collect();
    let mut headers = vec![
        "Job",
        "State",
        "Queue",
        "Workflow/stage",
        "Attempts",
        "Created",
        "What",
    ];
    if admin {
        headers.insert(0, "");
        let _ = write!(
            out,
            "<form method=\"post\" action=\"/jobs/bulk\" id=\"bulk\" class=\"filters\">{}<label><input type=\"checkbox\" id=\"select-all\"> all on this page</label>\
             <button type=\"submit\" name=\"action\" value=\"retry\">Retry selected</button>\
             <button type=\"submit\" name=\"action\" value=\"cancel\" class=\"danger\">Cancel selected</button></form>",
            csrf_field(viewer)
        );
    }
    out.push_str(&table(&headers, &rows, "No jobs match."));
    let link = |n: usize| {
        let mut params: Vec<String> = q
            .iter()
            .filter(|(k, v)| k.as_str() != "page" && k.as_str() != "flash" && !v.is_empty())
            .map(|(k, v)| format!("{}={}", url_encode(k), url_encode(v)))
            .collect();
        params.push(format!("page={n}"));
        format!("/jobs?{}", params.join("&amp;"))
    };
    out.push_str("<p class=\"pager\">");
    if page_no > 1 {
        let _ = write!(
            out,
            "<a href=\"{}\" id=\"prev\">← newer</a> ",
            link(page_no - 1)
        );
    }
    let _ = write!(out, "page {page_no}");
    if more {
        let _ = write!(
            out,
            " <a href=\"{}\" id=\"next\">older →</a>",
            link(page_no + 1)
        );
    }
    out.push_str("</p>");
    Ok(Ok(out))
}

/// `GET /jobs/{id}`: everything about one job.
pub async fn job(
    State(state): State<Arc<ConsoleState>>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    let backend = state.backend.as_ref();
    let job = match backend.get(&id).await {
        Ok(Some(job)) => job,
        Ok(None) => {
            let body = match backend.tombstone(&id).await {
                Ok(Some(t)) => format!("<p>{}</p>", esc(&crate::commands::jobs::pruned_line(&t))),
                _ => format!(
                    "<p class=\"refused\">No job <code>{}</code> in this queue.</p><p><a href=\"/jobs\">All jobs</a></p>",
                    esc(&id)
                ),
            };
            return (StatusCode::NOT_FOUND, page("Job", &viewer, "/jobs", &body)).into_response();
        }
        Err(e) => return failed(&viewer, "read the job", e),
    };
    let now = match backend.now_ms().await {
        Ok(n) => n,
        Err(e) => return failed(&viewer, "read the queue's clock", e),
    };
    let applied = skillforge_store::applied::applied_for_job(state.store.pool(), &id)
        .await
        .unwrap_or_default();
    let note = skillforge_engine::labels::unmet_note(backend, &job)
        .await
        .ok()
        .flatten();
    let secrets = secret_values(&job);
    let mut out = flash(&q);
    let _ = write!(
        out,
        "<dl class=\"kv\" id=\"job\" data-state=\"{}\"><dt>Job</dt><dd class=\"job-id\">{}</dd><dt>State</dt><dd>{}",
        job.state,
        esc(&job.id),
        state_badge(job.state.as_str())
    );
    if job.cancel_requested {
        out.push_str(" (cancel requested)");
    }
    if job.recovery_available {
        out.push_str(" (recovery available: retry it)");
    }
    let _ = write!(
        out,
        "</dd><dt>What</dt><dd>{}</dd><dt>Workflow / stage</dt><dd>{} / {} (runner {})</dd><dt>Queue</dt><dd>{}</dd>\
         <dt>Attempts</dt><dd>{}/{}</dd><dt>Fencing token</dt><dd>{}</dd><dt>Created</dt><dd>{} ({} ago)</dd>",
        esc(&describe(&job)),
        esc(&job.spec.workflow),
        esc(&job.spec.stage),
        esc(&job.spec.kind),
        esc(&job.spec.queue),
        job.attempts,
        job.spec.max_attempts,
        job.fencing_token,
        rfc3339_ms(job.created_at_ms),
        age(now - job.created_at_ms)
    );
    if let Some(k) = &job.spec.idempotency_key {
        let _ = write!(
            out,
            "<dt>Idempotency key</dt><dd><code>{}</code></dd>",
            esc(k)
        );
    }
    if let Some(o) = &job.outcome {
        let _ = write!(
            out,
            "<dt>Outcome</dt><dd>{}{}</dd>",
            esc(o.exit.label()),
            o.exit_code
                .map(|c| format!(", exit {c}"))
                .unwrap_or_default()
        );
    }
    if let Some(why) = failure_reason(&job) {
        let _ = write!(
            out,
            "<dt>Why</dt><dd id=\"failure-reason\">{}</dd>",
            esc(&why)
        );
    }
    if let Some(n) = &note {
        let _ = write!(out, "<dt>Note</dt><dd>{}</dd>", esc(n));
    }
    if let Some(spend) = crate::commands::jobs::agent_spend(&job) {
        let _ = write!(out, "<dt>Spend</dt><dd>{}</dd>", esc(&spend.human()));
    }
    out.push_str("</dl><p>");
    if !job.state.is_terminal() {
        out.push_str(&action_button(
            &viewer,
            &format!("/jobs/{}/cancel", job.id),
            "Cancel",
            "danger",
        ));
    }
    if matches!(
        job.state,
        JobState::Failed | JobState::Dead | JobState::Cancelled | JobState::Stale
    ) {
        out.push_str(&action_button(
            &viewer,
            &format!("/jobs/{}/retry", job.id),
            "Retry",
            "",
        ));
    }
    out.push_str("</p>");

    if let Some(l) = &job.lease {
        let _ = write!(
            out,
            "<h2>Lease</h2><dl class=\"kv\"><dt>Held by</dt><dd>{} on {} (pid {})</dd><dt>Fencing token</dt><dd>{}</dd><dt>Heartbeat</dt><dd>{} ago</dd></dl>",
            esc(&l.owner_worker),
            esc(&l.owner_host),
            l.owner_pid,
            l.fencing_token,
            age(now - l.heartbeat_at_ms)
        );
    }
    out.push_str("<h2>Attempts and leases</h2>");
    let rows: Vec<Vec<String>> = job
        .history
        .iter()
        .map(|a| {
            vec![
                a.attempt.to_string(),
                a.fencing_token.to_string(),
                esc(&format!("{}@{}:{}", a.worker, a.host, a.pid)),
                rfc3339_ms(a.started_at_ms),
                a.ended_at_ms
                    .map(rfc3339_ms)
                    .unwrap_or_else(|| "—".to_owned()),
                esc(a.result.as_deref().unwrap_or("running")),
                a.retry_delay_ms
                    .map(|d| format!("retry in {}", age(i64::try_from(d).unwrap_or(i64::MAX))))
                    .unwrap_or_default(),
            ]
        })
        .collect();
    out.push_str(&table(
        &["#", "Token", "Worker", "Started", "Ended", "Result", ""],
        &rows,
        "Not started yet.",
    ));
    if !applied.is_empty() {
        let rows: Vec<Vec<String>> = applied
            .iter()
            .map(|a| {
                vec![
                    a.fencing_token.to_string(),
                    esc(&a.state),
                    esc(&a.applied_at),
                ]
            })
            .collect();
        out.push_str("<h2>Applied to the store</h2>");
        out.push_str(&table(&["Token", "State", "Applied"], &rows, ""));
    }

    // Live output: what the queue keeps (the running attempt's chunks, or the tail after the end).
    let chunks = backend
        .read_output(&job.id, None, 500)
        .await
        .unwrap_or_default();
    let text: String = chunks
        .iter()
        .map(|c| String::from_utf8_lossy(&c.data).into_owned())
        .collect();
    let cursor = chunks.last().map(|c| c.cursor.clone()).unwrap_or_default();
    let running = job.state == JobState::Running || job.state == JobState::Queued;
    let _ = write!(
        out,
        "<h2>Output</h2><p class=\"note\" id=\"live-status\">{}</p>",
        if running {
            "live: polling for new output"
        } else {
            "kept output of the last attempt"
        }
    );
    if running {
        let _ = write!(
            out,
            "<pre id=\"live-output\" data-url=\"/jobs/{}/output\" data-cursor=\"{}\">{}</pre>",
            esc(&job.id),
            esc(&cursor),
            esc(&scrub(&text, &secrets))
        );
    } else if let Some(o) = &job.outcome {
        let _ = write!(
            out,
            "<h2>stdout (tail)</h2><pre id=\"stdout\">{}</pre><h2>stderr (tail)</h2><pre id=\"stderr\">{}</pre>",
            esc(&scrub(&o.stdout_tail, &secrets)),
            esc(&scrub(&o.stderr_tail, &secrets))
        );
    } else {
        let _ = write!(out, "<pre>{}</pre>", esc(&scrub(&text, &secrets)));
    }

    let spec = crate::commands::jobs::job_json(&job, now);
    let shown = json!({"payload": spec["payload"], "queue": spec["queue"], "workflow": spec["workflow"], "stage": spec["stage"], "kind": spec["kind"],
        "idempotent": spec["idempotent"], "idempotency_key": spec["idempotency_key"], "requires": job.spec.requires, "locks": job.spec.locks,
        "timeout_ms": job.spec.timeout_ms, "heartbeat_ms": job.spec.heartbeat_ms, "stale_after_ms": job.spec.stale_after_ms});
    let _ = write!(
        out,
        "<h2>Spec</h2><pre id=\"spec\">{}</pre>",
        esc(&scrub(
            &serde_json::to_string_pretty(&shown).unwrap_or_default(),
            &secrets
        ))
    );
    page(&format!("Job {}", job.id), &viewer, "/jobs", &out).into_response()
}

/// `GET /jobs/{id}/output?after=CURSOR`: new output chunks as JSON, for the page's poll:
/// `{"chunks": [{"cursor", "stream", "text"}], "state", "running"}` (secret values scrubbed).
pub async fn output(
    State(state): State<Arc<ConsoleState>>,
    Path(id): Path<String>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    let backend = state.backend.as_ref();
    let job = match backend.get(&id).await {
        Ok(Some(j)) => j,
        Ok(None) => {
            return (
                StatusCode::NOT_FOUND,
                axum::Json(json!({"error": format!("no job `{id}`")})),
            )
                .into_response();
        }
        Err(e) => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                axum::Json(json!({"error": crate::control::redact::redact(&e.to_string())})),
            )
                .into_response();
        }
    };
    let secrets = secret_values(&job);
    let after = q.get("after").filter(|a| !a.is_empty());
    let chunks = backend
        .read_output(&id, after.map(String::as_str), 500)
        .await
        .unwrap_or_default();
    let chunks: Vec<Value> = chunks
        .iter()
        .map(|c| json!({"cursor": c.cursor, "stream": c.stream, "text": crate::control::redact::redact(&scrub(&String::from_utf8_lossy(&c.data), &secrets))}))
        .collect();
    let running = matches!(job.state, JobState::Running | JobState::Queued);
    axum::Json(json!({"chunks": chunks, "state": job.state, "running": running})).into_response()
}

/// The result of one cancel as a flash code.
fn cancel_flash(reply: &CancelReply) -> &'static str {
    match reply {
        CancelReply::Cancelled => "cancelled",
        CancelReply::Requested => "cancel-requested",
        CancelReply::AlreadyTerminal(_) => "already-finished",
    }
}

fn action_error(viewer: &Viewer, id: &str, e: &skillforge_engine::EngineError) -> Response {
    let status = match e {
        skillforge_engine::EngineError::NotFound(_) => StatusCode::NOT_FOUND,
        skillforge_engine::EngineError::InvalidState { .. } => StatusCode::CONFLICT,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let body = format!(
        "<p class=\"refused\">{}</p><p><a href=\"/jobs/{}\">Back to the job</a></p>",
        esc(&e.to_string()),
        esc(id)
    );
    (status, page("Not done", viewer, "/jobs", &body)).into_response()
}

/// `POST /jobs/{id}/cancel` (admin, CSRF).
pub async fn cancel(
    State(state): State<Arc<ConsoleState>>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
    Form(form): Form<Fields>,
) -> Response {
    if let Err(refused) = viewer.may_act(field(&form, "csrf")) {
        return *refused;
    }
    match state.backend.cancel(&id).await {
        Ok(reply) => {
            tracing::info!(job = %id, "console: cancel");
            Redirect::to(&format!(
                "/jobs/{}?flash={}",
                url_encode(&id),
                cancel_flash(&reply)
            ))
            .into_response()
        }
        Err(e) => action_error(&viewer, &id, &e),
    }
}

/// `POST /jobs/{id}/retry` (admin, CSRF).
pub async fn retry(
    State(state): State<Arc<ConsoleState>>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
    Form(form): Form<Fields>,
) -> Response {
    if let Err(refused) = viewer.may_act(field(&form, "csrf")) {
        return *refused;
    }
    match state.backend.retry(&id).await {
        Ok(()) => {
            tracing::info!(job = %id, "console: retry");
            Redirect::to(&format!("/jobs/{}?flash=retried", url_encode(&id))).into_response()
        }
        Err(e) => action_error(&viewer, &id, &e),
    }
}

/// `POST /jobs/bulk` with `action` = `retry` | `cancel` and one `id` per selected job (admin,
/// CSRF): each job is acted on alone; what could not be done is listed.
pub async fn bulk(
    State(state): State<Arc<ConsoleState>>,
    Extension(viewer): Extension<Viewer>,
    Form(form): Form<Fields>,
) -> Response {
    if let Err(refused) = viewer.may_act(field(&form, "csrf")) {
        return *refused;
    }
    let action = field(&form, "action").unwrap_or_default();
    if action != "retry" && action != "cancel" {
        return (
            StatusCode::BAD_REQUEST,
            page(
                "Not done",
                &viewer,
                "/jobs",
                "<p class=\"refused\">Choose Retry or Cancel.</p>",
            ),
        )
            .into_response();
    }
    let ids: Vec<&str> = form
        .iter()
        .filter(|(n, _)| n == "id")
        .map(|(_, v)| v.as_str())
        .collect();
    let mut problems = Vec::new();
    for id in &ids {
        let done = if action == "retry" {
            state.backend.retry(id).await.map(|_| ())
        } else {
            state.backend.cancel(id).await.map(|_| ())
        };
        if let Err(e) = done {
            problems.push(format!(
                "<li>{}: {}</li>",
                job_link(id),
                esc(&e.to_string())
            ));
        }
    }
    tracing::info!(
        action,
        jobs = ids.len(),
        failed = problems.len(),
        "console: bulk action"
    );
    if problems.is_empty() {
        return Redirect::to("/jobs?flash=bulk").into_response();
    }
    let body = format!(
        "<p>{} of {} job(s) done; these were not:</p><ul>{}</ul><p><a href=\"/jobs\">Back to the jobs</a></p>",
        ids.len() - problems.len(),
        ids.len(),
        problems.join("")
    );
    (
        StatusCode::CONFLICT,
        page("Partly done", &viewer, "/jobs", &body),
    )
        .into_response()
}

/// `POST /prune` with an optional `older_than` (admin, CSRF): `jobs prune`.
pub async fn prune(
    State(state): State<Arc<ConsoleState>>,
    Extension(viewer): Extension<Viewer>,
    Form(form): Form<Fields>,
) -> Response {
    use skillforge_engine::retention::{parse_age, prune_pass, rules};
    if let Err(refused) = viewer.may_act(field(&form, "csrf")) {
        return *refused;
    }
    let older_than = match field(&form, "older_than")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(parse_age)
        .transpose()
    {
        Ok(d) => d,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                page(
                    "Not done",
                    &viewer,
                    "/",
                    &format!(
                        "<p class=\"refused\">Finished longer ago than: {}</p>",
                        esc(&e.to_string())
                    ),
                ),
            )
                .into_response();
        }
    };
    let backend = state.backend.as_ref();
    let result = async {
        let now = backend.now_ms().await?;
        prune_pass(
            backend,
            &rules(&state.retention, older_than, now),
            usize::MAX,
        )
        .await
    }
    .await;
    match result {
        Ok(report) => {
            tracing::info!(
                jobs = report.jobs,
                tombstones = report.tombstones,
                "console: prune"
            );
            Redirect::to("/?flash=pruned").into_response()
        }
        Err(e) => failed(&viewer, "prune", e),
    }
}

/// `GET /workers`: live workers (labels, host, jobs running, heartbeat age) and every lease and
/// named lock with its fencing token (`skillforge locks`).
pub async fn workers(
    State(state): State<Arc<ConsoleState>>,
    Extension(viewer): Extension<Viewer>,
) -> Response {
    let backend = state.backend.as_ref();
    let read = async {
        let now = backend.now_ms().await?;
        let mut leases = backend.leases().await?;
        leases.sort_by(|a, b| (a.kind as u8, &a.name).cmp(&(b.kind as u8, &b.name)));
        let live = skillforge_engine::labels::live_workers(backend).await?;
        Ok::<_, skillforge_engine::EngineError>((now, leases, live))
    };
    let (now, leases, live) = match read.await {
        Ok(r) => r,
        Err(e) => return failed(&viewer, "read the leases", e),
    };
    let mut out = String::new();
    let rows: Vec<Vec<String>> = live
        .iter()
        .map(|w| {
            let presence = leases.iter().find(|l| {
                l.kind == LeaseKind::Lock
                    && l.name
                        .strip_prefix(skillforge_engine::worker::PRESENCE_LOCK_PREFIX)
                        == Some(w.id.as_str())
            });
            let running = leases
                .iter()
                .filter(|l| l.kind == LeaseKind::Job && l.lease.owner_worker == w.id)
                .count();
            vec![
                esc(&w.id),
                esc(&w
                    .labels
                    .as_ref()
                    .map_or_else(|| "unknown".to_owned(), |l| l.join(", "))),
                presence
                    .map(|p| {
                        esc(&format!(
                            "{} (pid {})",
                            p.lease.owner_host, p.lease.owner_pid
                        ))
                    })
                    .unwrap_or_default(),
                running.to_string(),
                presence
                    .map(|p| format!("{} ago", age(now - p.lease.heartbeat_at_ms)))
                    .unwrap_or_default(),
            ]
        })
        .collect();
    out.push_str("<h2>Live workers</h2>");
    out.push_str(&table(
        &["Worker", "Labels", "Host", "Jobs running", "Heartbeat"],
        &rows,
        "No live worker. Start one with `skillforge worker`.",
    ));
    out.push_str("<h2>Leases and locks</h2>");
    let rows: Vec<Vec<String>> = leases
        .iter()
        .map(|l| {
            let status = serde_json::to_value(l.status(now))
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            vec![
                match l.kind {
                    LeaseKind::Job => "job".to_owned(),
                    LeaseKind::Lock => "lock".to_owned(),
                },
                if l.kind == LeaseKind::Job {
                    job_link(&l.name)
                } else {
                    esc(&l.name)
                },
                esc(&status.replace('_', " ")),
                esc(&format!(
                    "{}@{}:{}",
                    l.lease.owner_worker, l.lease.owner_host, l.lease.owner_pid
                )),
                l.lease.fencing_token.to_string(),
                format!("{} ago", age(now - l.lease.heartbeat_at_ms)),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "Kind",
            "Name",
            "Status",
            "Owner",
            "Fencing token",
            "Heartbeat",
        ],
        &rows,
        "No active leases or locks.",
    ));
    page("Workers & locks", &viewer, "/workers", &out).into_response()
}
