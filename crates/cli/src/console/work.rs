//! The console's Work page: the families' state, read through the store's aggregates and the
//! families' crates as `train status`, `candidate show`, `live-ab show`, `harvest events`,
//! `eval status` and `optimize status` print it: train sessions (state, next action, what
//! blocks them), review runs and their feedback, candidates and canaries (the guardrail
//! decisions logged for them, the bandit's posterior, the canary window), eval briefs and the
//! ledger, optimize runs, harvest events.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::access::Viewer;
use super::html::{esc, page, table};
use super::{ConsoleState, failed};

/// Most rows of each section.
const LIMIT: usize = 50;

/// `GET /work`.
pub async fn work(
    State(state): State<Arc<ConsoleState>>,
    Extension(viewer): Extension<Viewer>,
) -> Response {
    match body(&state).await {
        Ok(body) => page("Work", &viewer, "/work", &body).into_response(),
        Err(e) => failed(&viewer, "read the families' state", e),
    }
}

async fn body(state: &ConsoleState) -> anyhow::Result<String> {
    let pool = state.store.pool();
    let mut out = String::new();

    // Train sessions.
    let sessions =
        skillforge_store::train::list_sessions(pool, u32::try_from(LIMIT).unwrap_or(u32::MAX))
            .await?;
    let mut decided = Vec::with_capacity(sessions.len());
    for s in &sessions {
        decided.push(super::attention::decided_outside(&state.store, s).await?);
    }
    let rows: Vec<Vec<String>> = sessions
        .iter()
        .zip(decided)
        .map(|(s, decided)| {
            let next = decided.unwrap_or_else(|| {
                skillforge_skillopt::train::state::TrainState::parse(&s.state)
                    .map(|st| skillforge_skillopt::train::session::next_action_for(st, &s.id))
                    .unwrap_or_default()
            });
            let blocked = train_blocked(&s.metadata_json);
            vec![
                format!("<span id=\"session-{0}\">{0}</span>", esc(&s.id)),
                esc(&s.template_id),
                esc(&s.state),
                esc(&next),
                esc(&blocked.unwrap_or_default()),
                esc(&s.updated_at),
            ]
        })
        .collect();
    out.push_str("<h2 id=\"train\">Train sessions</h2>");
    out.push_str(&table(
        &[
            "Session",
            "Template",
            "State",
            "Next action",
            "Blocked",
            "Updated",
        ],
        &rows,
        "No train session (`skillforge train start`).",
    ));

    // Review runs and their packets.
    let mut runs = skillforge_store::review::list_runs(pool).await?;
    runs.sort_by(|a, b| b.created_at.cmp(&a.created_at));
    let mut rows = Vec::new();
    for run in runs.iter().take(LIMIT) {
        let items = skillforge_store::review::list_items(pool, &run.id).await?;
        let with = skillforge_store::feedback::items_with_feedback(pool, &run.id).await?;
        rows.push(vec![
            format!("<span id=\"run-{0}\">{0}</span>", esc(&run.id)),
            esc(&run.template_version_id),
            esc(&run.state),
            format!(
                "{} of {}",
                items
                    .iter()
                    .filter(|i| with.contains(&i.item.item_id))
                    .count(),
                items.len()
            ),
            esc(&run.created_at),
        ]);
    }
    out.push_str("<h2 id=\"reviews\">Review runs</h2>");
    out.push_str(&table(
        &["Run", "Version", "State", "Items with feedback", "Created"],
        &rows,
        "No review run.",
    ));

    // Candidates, with the guardrail decisions logged for them and their canary.
    let events = skillforge_store::promotion::list_events(pool).await?;
    let candidates = super::attention::candidates_waiting(&state.store).await?;
    let mut rows = Vec::new();
    for c in &candidates {
        let decisions: Vec<String> = events
            .iter()
            .filter(|e| e.job_id == c.version_id)
            .map(|e| {
                format!(
                    "{} at {}: {}",
                    e.event,
                    e.created_at,
                    decision_steps(&e.detail_json)
                )
            })
            .collect();
        let canary = skillforge_store::promotion::canary_of(pool, &c.template_id)
            .await?
            .filter(|k| k.id == c.version_id);
        let window = canary
            .map(|k| {
                format!(
                    "{:.0}% of traffic since {}",
                    k.canary_sample * 100.0,
                    k.canary_started_at
                )
            })
            .unwrap_or_default();
        let mut row = vec![
            format!("<span id=\"candidate-{0}\">{0}</span>", esc(&c.version_id)),
            esc(&c.version_state),
            c.score
                .map(|s| format!("{s:.3}"))
                .unwrap_or_else(|| "—".to_owned()),
            esc(&c.base_version_id),
            esc(&window),
            if decisions.is_empty() {
                "no guardrail decision yet".to_owned()
            } else {
                decisions
                    .iter()
                    .map(|d| esc(d))
                    .collect::<Vec<_>>()
                    .join("<br>")
            },
        ];
        if let Some(pace) = state.pace {
            row.push(pace_cell(&state.store, c, pace).await);
        }
        rows.push(row);
    }
    out.push_str("<h2 id=\"candidates\">Pending candidates and canaries</h2>");
    let mut headers = vec![
        "Version",
        "State",
        "Score",
        "Base",
        "Canary window",
        "Guardrail decisions",
    ];
    if state.pace.is_some() {
        headers.push("PACE wealth");
    }
    out.push_str(&table(&headers, &rows, "No pending candidate or canary."));

    // The bandit's posterior per arm.
    let arms = skillforge_store::bandit::list_arms(pool).await?;
    let rows: Vec<Vec<String>> = arms
        .iter()
        .map(|a| {
            let mean = a.alpha / (a.alpha + a.beta);
            vec![
                esc(&a.template_version_id),
                format!("Beta({:.0}, {:.0})", a.alpha, a.beta),
                format!("{mean:.3}"),
                a.pulls.to_string(),
                esc(&a.updated_at),
            ]
        })
        .collect();
    out.push_str("<h2 id=\"bandit\">A/B bandit posterior</h2>");
    out.push_str(&table(
        &["Version", "Posterior", "Mean", "Pulls", "Updated"],
        &rows,
        "No A/B pick recorded.",
    ));

    out.push_str(&eval_section(state));
    out.push_str(&optimize_section(state));

    // Harvest events.
    let mut harvest = skillforge_store::harvest::list_events(pool, None).await?;
    harvest.reverse();
    let rows: Vec<Vec<String>> = harvest
        .iter()
        .take(LIMIT)
        .map(|e| {
            let pr = if e.repo.is_empty() {
                String::new()
            } else {
                format!("{}#{}", e.repo, e.pr)
            };
            vec![
                esc(&e.created_at),
                esc(&e.event),
                esc(&pr),
                esc(&e.detail),
                if e.job_id.is_empty() {
                    String::new()
                } else {
                    super::html::job_link(&e.job_id)
                },
            ]
        })
        .collect();
    out.push_str("<h2 id=\"harvest\">Harvest events</h2>");
    out.push_str(&table(
        &["When", "Event", "Pull request", "Detail", "Job"],
        &rows,
        "No harvest event.",
    ));
    Ok(out)
}

/// The PACE cell of a pending candidate (`[skillopt] pace_enabled` on): its wealth against the
/// threshold over the A/B picks against the champion, the verdict and the discordant pairs
/// (facts §7; issue 34 item 10). A store that cannot be read says so instead of a figure.
async fn pace_cell(
    store: &skillforge_store::Store,
    candidate: &skillforge_store::candidates::CandidateRow,
    pace: skillforge_contract::pace::Pace,
) -> String {
    match skillforge_skillopt::promotion::seam::pace_of_picks(store, candidate, pace).await {
        Ok(report) => format!(
            "<span class=\"pace\">wealth {:.3} of {:.1}</span> ({}; {} wins, {} losses of {} pairs)",
            report.wealth,
            report.threshold,
            report.verdict.as_str(),
            report.wins,
            report.losses,
            report.pairs
        ),
        Err(e) => format!(
            "<span class=\"refused\">not read: {}</span>",
            esc(&e.to_string())
        ),
    }
}

/// What blocks a train session, from its metadata (`generation.status`, the optimizer's error).
fn train_blocked(metadata_json: &str) -> Option<String> {
    let meta: serde_json::Value = serde_json::from_str(metadata_json).ok()?;
    if meta
        .pointer("/generation/status")
        .and_then(serde_json::Value::as_str)
        == Some("blocked_config")
    {
        return Some("option generation: configuration".to_owned());
    }
    meta.pointer("/optimizer/error")
        .and_then(serde_json::Value::as_str)
        .filter(|e| !e.is_empty())
        .map(|e| format!("optimizer: {e}"))
}

/// The guardrail's steps of a logged decision, in a line (`step: outcome; …`), or its reason.
fn decision_steps(detail_json: &str) -> String {
    let Ok(detail) = serde_json::from_str::<serde_json::Value>(detail_json) else {
        return String::new();
    };
    let steps: Vec<String> = detail
        .get("steps")
        .and_then(serde_json::Value::as_array)
        .map(|s| {
            s.iter()
                .map(|step| {
                    let name = step
                        .get("name")
                        .or_else(|| step.get("step"))
                        .and_then(serde_json::Value::as_str)
                        .unwrap_or("step");
                    let outcome = step
                        .get("outcome")
                        .or_else(|| step.get("result"))
                        .or_else(|| step.get("passed"))
                        .map(|v| v.to_string())
                        .unwrap_or_default();
                    format!("{name}: {}", outcome.trim_matches('"'))
                })
                .collect()
        })
        .unwrap_or_default();
    if steps.is_empty() {
        detail
            .get("reason")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned()
    } else {
        steps.join("; ")
    }
}

/// Eval briefs on disk and the ledger's rows (newest first).
fn eval_section(state: &ConsoleState) -> String {
    let mut out = String::from("<h2 id=\"eval\">Eval briefs and ledger</h2>");
    let runs = skillforge_evalloop::layout::eval_root(&state.home).join("runs");
    let mut briefs: Vec<String> = std::fs::read_dir(&runs)
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().is_dir())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    briefs.sort();
    let rows: Vec<Vec<String>> = briefs
        .iter()
        .rev()
        .take(LIMIT)
        .map(|b| {
            let forged = runs
                .join(b)
                .join(skillforge_evalloop::forge::FORGE_FILE)
                .exists();
            let report = if forged {
                format!(
                    "<a href=\"/work/eval/{}/report\">HTML report</a>",
                    super::html::url_encode(b)
                )
            } else {
                "not forged yet".to_owned()
            };
            vec![esc(b), report]
        })
        .collect();
    out.push_str(&table(
        &["Brief", "Report"],
        &rows,
        "No eval brief (`skillforge eval brief`).",
    ));
    match skillforge_evalloop::ledger::read_ledger(&skillforge_evalloop::layout::ledger_path(
        &state.home,
    )) {
        Ok(mut rows) => {
            rows.reverse();
            let rows: Vec<Vec<String>> = rows
                .iter()
                .take(LIMIT)
                .map(|r| {
                    vec![
                        esc(&r.at.to_rfc3339()),
                        esc(&r.skill),
                        esc(&r.decision),
                        esc(&r.brief_id),
                        r.recheck_due
                            .map(|d| esc(&d.to_rfc3339()))
                            .unwrap_or_default(),
                    ]
                })
                .collect();
            out.push_str(&table(
                &["When", "Skill", "Decision", "Brief", "Recheck due"],
                &rows,
                "The ledger is empty.",
            ));
        }
        Err(e) => {
            let _ = write!(
                out,
                "<p class=\"refused\">The ledger cannot be read: {}</p>",
                esc(&e.to_string())
            );
        }
    }
    out
}

/// Optimize runs under `<home>/optimize/*`: experiments, keeps, spend.
fn optimize_section(state: &ConsoleState) -> String {
    let mut out = String::from("<h2 id=\"optimize\">Optimize runs</h2>");
    let root = state.home.join("optimize");
    let mut names: Vec<String> = std::fs::read_dir(&root)
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().is_dir())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let rows: Vec<Vec<String>> = names
        .iter()
        .take(LIMIT)
        .map(|name| {
            let state_root = skillforge_optimize::state::StateRoot::new(&state.home, name);
            match skillforge_optimize::log::read(&state_root.root) {
                Ok(log) => {
                    let (n, kept) = optimize_counts(&log);
                    vec![
                        esc(name),
                        n.to_string(),
                        kept.to_string(),
                        esc(&optimize_spend(&log)),
                    ]
                }
                Err(e) => vec![
                    esc(name),
                    String::new(),
                    String::new(),
                    format!("<span class=\"refused\">{}</span>", esc(&e.to_string())),
                ],
            }
        })
        .collect();
    out.push_str(&table(
        &["Run", "Experiments", "Kept", "Spend"],
        &rows,
        "No optimize run (`skillforge optimize run`).",
    ));
    // Each run's experiments, newest first.
    for name in names.iter().take(LIMIT) {
        let state_root = skillforge_optimize::state::StateRoot::new(&state.home, name);
        let Ok(log) = skillforge_optimize::log::read(&state_root.root) else {
            continue;
        };
        if log.experiments.is_empty() {
            continue;
        }
        let _ = write!(
            out,
            "<h3 id=\"optimize-{0}\">Experiments of {0}</h3>",
            esc(name)
        );
        let rows: Vec<Vec<String>> = log
            .experiments
            .iter()
            .rev()
            .take(LIMIT)
            .map(|e| experiment_row(&log, e))
            .collect();
        out.push_str(&table(
            &[
                "Experiment",
                "Hypothesis",
                "Status",
                "Effect",
                "95% interval",
                "Cost",
            ],
            &rows,
            "No experiment yet.",
        ));
    }
    out
}

/// One experiment's row: number, hypothesis, status (its outcome), effect and interval on the
/// noise floor's metric from its standalone pairing (`—` when not measured or without a noise
/// floor; the decision's primary relative gain instead when there is no floor), and its agent
/// runs' tokens and cost as reported (unknown said as such).
fn experiment_row(
    log: &skillforge_optimize::log::ExperimentLog,
    e: &skillforge_optimize::log::Entry,
) -> Vec<String> {
    let outcome = serde_json::to_value(e.outcome)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let effect = log.noise_floor.as_ref().and_then(|floor| {
        let pairing = match e.outcome {
            skillforge_optimize::log::Outcome::Kept
            | skillforge_optimize::log::Outcome::RunnerUpKept => {
                return skillforge_optimize::noise::keep_effect(e, floor)
                    .map(|effect| (floor.metric.clone(), effect));
            }
            _ => e.standalone()?,
        };
        let (r, c) = (
            pairing.reference.snapshot.metrics.get(&floor.metric)?,
            pairing.candidate.snapshot.metrics.get(&floor.metric)?,
        );
        skillforge_optimize::noise::Effect::paired(&r.samples, &c.samples, floor.floor)
            .map(|effect| (floor.metric.clone(), effect))
    });
    let (effect_text, interval_text) = match &effect {
        Some((metric, effect)) => (
            format!(
                "{:+.4} {metric}{}",
                effect.effect,
                effect
                    .relative
                    .map_or(String::new(), |r| format!(" ({:+.1}%)", r * 100.0))
            ),
            effect.interval.map_or_else(
                || "none (1 pair)".to_owned(),
                |(lo, hi)| format!("{lo:+.4} to {hi:+.4}"),
            ),
        ),
        None => match e
            .decision
            .as_ref()
            .and_then(|d| d.objectives.iter().find(|o| o.required))
        {
            Some(o) => (
                format!("{:+.1}% {}", o.relative_gain * 100.0, o.name),
                "—".to_owned(),
            ),
            None => ("—".to_owned(), "—".to_owned()),
        },
    };
    vec![
        format!("exp-{:03}", e.experiment),
        esc(&format!("{} ({})", e.description, e.hypothesis_id)),
        format!("<span class=\"outcome-{0}\">{0}</span>", esc(&outcome)),
        esc(&effect_text),
        esc(&interval_text),
        esc(&e.spend.human()),
    ]
}

/// (experiments, kept) of an optimize run's log.
fn optimize_counts(log: &skillforge_optimize::log::ExperimentLog) -> (usize, usize) {
    use skillforge_optimize::log::Outcome;
    let kept = log
        .experiments
        .iter()
        .filter(|e| matches!(e.outcome, Outcome::Kept | Outcome::RunnerUpKept))
        .count();
    (log.experiments.len(), kept)
}

/// An optimize run's spend, with what of it is estimated or unknown (never a made-up figure).
fn optimize_spend(log: &skillforge_optimize::log::ExperimentLog) -> String {
    let s = &log.spend;
    let mut text = format!(
        "${:.2} (judges ${:.2}); run {}",
        s.run_usd, s.judge_usd, log.run_state.status
    );
    if !s.estimated.is_empty() {
        let _ = write!(text, "; estimated: {}", s.estimated.join(", "));
    }
    if s.unpriced_runs > 0 {
        let _ = write!(text, "; {} agent run(s) of unknown cost", s.unpriced_runs);
    }
    text
}

/// `GET /work/eval/{brief}/report`: the brief's self-contained HTML report (`eval report
/// --html`), with its inline styles allowed and nothing else; secrets redacted.
pub async fn eval_report(
    State(state): State<Arc<ConsoleState>>,
    Extension(viewer): Extension<Viewer>,
    Path(brief): Path<String>,
) -> Response {
    let plain = !brief.is_empty()
        && brief != "."
        && brief != ".."
        && brief
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if !plain {
        return (
            StatusCode::BAD_REQUEST,
            page(
                "Eval report",
                &viewer,
                "/work",
                "<p class=\"refused\">A brief id is letters, digits, `-`, `_` and `.`.</p>",
            ),
        )
            .into_response();
    }
    match crate::commands::eval::report_html(&state.home, &brief) {
        Ok(html) => (
            [
                (header::CONTENT_TYPE, "text/html; charset=utf-8"),
                (
                    header::CONTENT_SECURITY_POLICY,
                    "default-src 'none'; style-src 'unsafe-inline'; img-src data:",
                ),
            ],
            crate::control::redact::redact(&html),
        )
            .into_response(),
        Err(e) => (
            StatusCode::NOT_FOUND,
            page(
                "Eval report",
                &viewer,
                "/work",
                &format!(
                    "<p class=\"refused\">{}</p>",
                    esc(&format!("{:#}", e.error))
                ),
            ),
        )
            .into_response(),
    }
}
