//! `skillforge candidate list|show|promote|reject`: human review of imported candidates (seed
//! "Candidate Package"; S-51, S-92, S-93).
//!
//! `show` prints the candidate's state, source, content hash, base version, optimizer score,
//! preference summary, eval report and a unified diff of its content against the base version.
//! It reads only the candidate's own rows (version, review record); it never reads review-run
//! packets or their hidden `.assignments.json`, so it cannot expose an A/B mapping (S-92).
//! `promote` makes the candidate current (the previous current becomes superseded) and `reject`
//! records the reason, after which `@latest` never selects it (S-93); each is one transaction.

mod gate;
mod promotion;

use anyhow::anyhow;
use clap::Subcommand;
use serde_json::{Value, json};
use similar::TextDiff;
use skillforge_skillopt::promotion::events::{Detail, Event, EventKind};
use skillforge_stage::Wait;
use skillforge_store::candidates::{
    CandidateRow, DecisionOutcome, get_candidate, list_candidates, promote_candidate,
    reject_candidate,
};
use skillforge_store::templates::{get_template, get_version};

use crate::context::Context;
use crate::control::templates::resolve_reference;
use crate::exit::{CliError, CliResult, OK};
use crate::output::print_json;

/// `skillforge candidate ...`.
#[derive(Debug, Subcommand)]
pub enum CandidateCommand {
    /// List imported candidates, newest first per template: every template's, or one
    /// template's with `--template` (`--pending`: every pending or canary candidate across
    /// templates).
    List {
        /// Template id (default: every template).
        #[arg(long)]
        template: Option<String>,
        /// Every pending candidate of every template.
        #[arg(long, conflicts_with = "template")]
        pending: bool,
    },
    /// Put a pending candidate behind the champion as a canary serving a sampled fraction.
    Canary {
        /// Candidate version `ID@vN`.
        id: String,
        /// Fraction of resolutions routed to the canary, in (0,1].
        #[arg(long)]
        sample: f64,
    },
    /// Decide every canary's regression window: graduate, roll back, or hold. Exits 4 while a
    /// window holds or a decision is not applied yet (run it again later).
    CanaryCheck {
        /// Submit the graduate / roll-back jobs and return without waiting for them (a cron on a
        /// shared queue whose workers and `serve` apply them); a later check finds the same jobs.
        #[arg(long)]
        no_wait: bool,
    },
    /// Re-run the notify/auto-promote decision for a pending candidate (e.g. after more A/B picks or
    /// harvested outcomes); the same guardrails as after import. Exits 4 when the candidate stays
    /// pending for a person to promote or reject.
    Decide {
        /// Candidate version `ID@vN`.
        id: String,
    },
    /// Replay a corpus for the champion and the candidate as jobs, score both, and record whether
    /// the candidate is accepted (a strict improvement of the corpus mean, every item scorable).
    /// Exit 1 when not accepted. A candidate without a score takes its corpus mean as its score.
    /// A failing gate is retried once: a candidate of the built-in optimizer has its failing
    /// replays fed to the optimizer, and the new candidate it proposes is gated (attempt 2).
    Gate {
        /// Candidate version `ID@vN`.
        id: String,
        /// Replay corpus (JSON, `skillforge schema replay-corpus`); default `[skillopt] gate_corpus`.
        #[arg(long, value_name = "FILE")]
        corpus: Option<std::path::PathBuf>,
        /// Agent runtime that answers the items of a corpus without a `replay_command`.
        #[arg(long, default_value = "scripted")]
        runtime: String,
        /// On a failing gate, do not retry: by default a candidate of the built-in optimizer
        /// gets one retry, its failing replays fed to the optimizer, whose new candidate is gated.
        #[arg(long)]
        no_retry: bool,
    },
    /// Show a candidate: state, source, hash, base, score, preference summary, eval report, diff.
    Show {
        /// Candidate version (`ID@vN`, or `ID@latest`).
        id: String,
    },
    /// Make a pending candidate the template's current version.
    Promote {
        /// Candidate version `ID@vN`.
        id: String,
        /// Optional note recorded with the decision.
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// Reject a pending candidate; `@latest` never selects it afterwards.
    Reject {
        /// Candidate version `ID@vN`.
        id: String,
        /// Why (recorded as the audit reason).
        #[arg(long)]
        reason: String,
    },
}

/// Dispatches a `candidate` subcommand.
pub async fn run(ctx: &Context, cmd: CandidateCommand) -> CliResult {
    match cmd {
        CandidateCommand::List { pending: true, .. } => promotion::list_pending(ctx).await,
        CandidateCommand::List { template, .. } => list(ctx, template.as_deref()).await,
        CandidateCommand::Canary { id, sample } => promotion::canary(ctx, &id, sample).await,
        CandidateCommand::CanaryCheck { no_wait } => {
            promotion::canary_check(ctx, Wait::from_flag(!no_wait)).await
        }
        CandidateCommand::Decide { id } => promotion::decide_cmd(ctx, &id).await,
        CandidateCommand::Gate {
            id,
            corpus,
            runtime,
            no_retry,
        } => gate::gate_cmd(ctx, &id, corpus, &runtime, !no_retry).await,
        CandidateCommand::Show { id } => show(ctx, &id).await,
        CandidateCommand::Promote { id, reason } => promote(ctx, &id, &reason).await,
        CandidateCommand::Reject { id, reason } => reject(ctx, &id, &reason).await,
    }
}

fn raw_json(text: &str) -> Value {
    if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.into()))
    }
}

fn candidate_json(c: &CandidateRow) -> Value {
    json!({
        "version_id": c.version_id,
        "template_id": c.template_id,
        "version_number": c.version,
        "state": c.version_state,
        "review_state": c.review_state,
        "source_repo": c.source_repo,
        "source_ref": c.source_ref,
        "source_path": c.source_path,
        "content_hash": c.content_hash,
        "base_version_id": c.base_version_id,
        "diff_artifact_id": c.diff_artifact_id,
        "score": c.score,
        "preference_summary": c.preference_summary,
        "decision_reason": c.decision_reason,
        "created_at": c.created_at,
        "decided_at": c.decided_at,
    })
}

/// The candidates of `template`, or of every template (issue 35 item 4), newest first per
/// template.
async fn list(ctx: &Context, template: Option<&str>) -> CliResult {
    let store = ctx.store().await?;
    let templates: Vec<String> = match template {
        Some(template) => {
            if get_template(store.pool(), template).await?.is_none() {
                return Err(CliError::usage(anyhow!(
                    "agent template `{template}` is not installed (see `skillforge template list`)"
                )));
            }
            vec![template.to_owned()]
        }
        None => skillforge_store::templates::list_templates(store.pool())
            .await?
            .into_iter()
            .map(|t| t.id)
            .collect(),
    };
    let mut candidates = Vec::new();
    for t in &templates {
        candidates.extend(list_candidates(store.pool(), t).await?);
    }
    if ctx.json {
        print_json(&candidates.iter().map(candidate_json).collect::<Vec<_>>());
        return Ok(OK);
    }
    if candidates.is_empty() {
        let of = template.map_or_else(String::new, |t| format!(" for `{t}`"));
        eprintln!(
            "no candidates{of} (train one with `skillforge train start`, or import one with `skillforge import --file candidate.json`)"
        );
    }
    if candidates.is_empty() {
        return Ok(OK);
    }
    let rows: Vec<Vec<String>> = candidates
        .iter()
        .map(|c| {
            vec![
                c.version_id.clone(),
                c.version_state.clone(),
                c.score
                    .map_or_else(|| "-".to_owned(), |s| format!("{s:.3}")),
                c.base_version_id.clone(),
                c.created_at.clone(),
            ]
        })
        .collect();
    println!(
        "{}",
        crate::output::table(
            &["CANDIDATE", "STATE", "SCORE", "BASE", "CREATED"],
            &rows,
            &[2]
        )
    );
    Ok(OK)
}

async fn candidate_for(
    ctx: &Context,
    reference: &str,
    deciding: bool,
) -> Result<(skillforge_store::Store, CandidateRow), CliError> {
    let store = ctx.store().await?;
    let version = resolve_reference(store.pool(), reference).await?;
    // A bare id names the current version; the candidate meant is most likely a pending one.
    if deciding && !reference.contains('@') && version.state == "current" {
        let pending: Vec<String> =
            skillforge_store::candidates::list_candidates(store.pool(), &version.template_id)
                .await?
                .into_iter()
                .filter(|c| matches!(c.version_state.as_str(), "pending" | "canary"))
                .map(|c| c.version_id)
                .collect();
        if !pending.is_empty() {
            return Err(CliError::usage(anyhow!(
                "`{reference}` names its current version, {}; its undecided candidate{}: {} (give it as ID@vN)",
                version.id,
                if pending.len() == 1 { " is" } else { "s are" },
                pending.join(", ")
            )));
        }
    }
    let candidate = get_candidate(store.pool(), &version.id)
        .await?
        .ok_or_else(|| {
            CliError::usage(anyhow!(
                "`{}` is not an imported candidate (see `skillforge candidate list --template {}`)",
                version.id,
                version.template_id
            ))
        })?;
    Ok((store, candidate))
}

/// Where a candidate came from, for people: an imported candidate package (every import records
/// the exchange's `source_repo` `gitmoot-skillopt`, kept as is in `--json`) and the optimizer
/// that built it when its eval report names one.
pub(crate) fn source_words(candidate: &CandidateRow) -> String {
    if candidate.source_repo != skillforge_store::candidates::CANDIDATE_SOURCE_REPO {
        return format!(
            "{} {} {}",
            candidate.source_repo, candidate.source_ref, candidate.source_path
        );
    }
    let report = raw_json(&candidate.eval_report_json);
    let by = report["optimizer"]
        .as_str()
        .map(|o| format!(", built by {o}"))
        .unwrap_or_default();
    format!("candidate package {}{by}", candidate.source_path)
}

/// The reviewers of the ranked feedback of the run the candidate's eval report names, with their
/// row counts, in name order; none when the report names no run.
async fn reviewers_of(
    store: &skillforge_store::Store,
    candidate: &CandidateRow,
) -> Result<Vec<(String, usize)>, CliError> {
    let report = raw_json(&candidate.eval_report_json);
    let Some(run_id) = report["run_id"].as_str() else {
        return Ok(Vec::new());
    };
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for event in skillforge_store::feedback::list_ranked_events(store.pool(), run_id).await? {
        *counts.entry(event.reviewer).or_default() += 1;
    }
    Ok(counts.into_iter().collect())
}

async fn show(ctx: &Context, reference: &str) -> CliResult {
    let (store, candidate) = candidate_for(ctx, reference, false).await?;
    let version = get_version(store.pool(), &candidate.version_id)
        .await?
        .ok_or_else(|| {
            CliError::env(anyhow!(
                "candidate `{}` has no version row",
                candidate.version_id
            ))
        })?;
    let base = get_version(store.pool(), &candidate.base_version_id).await?;
    let base_content = base.as_ref().map_or("", |b| b.content.as_str());
    let diff = TextDiff::from_lines(base_content, version.content.as_str())
        .unified_diff()
        .context_radius(3)
        .header(
            &format!("a/{}", candidate.base_version_id),
            &format!("b/{}", candidate.version_id),
        )
        .to_string();
    // Issue 34 item 10: the PACE gate over the candidate's A/B picks, only when it is on.
    let pace = match ctx.config.skillopt.pace() {
        Some(pace) => Some(
            skillforge_skillopt::promotion::seam::pace_of_picks(&store, &candidate, pace)
                .await
                .map_err(|e| CliError::env(anyhow!("read the A/B picks: {e}")))?,
        ),
        None => None,
    };
    // Issue 34 item 11: the replay gate runs with their per-item deltas (none ⇒ nothing shown).
    let gate_runs = skillforge_store::gates::gate_runs(store.pool(), &candidate.version_id).await?;
    // Who reviewed the evidence it was built from (issue 35: the demo's stand-in says it is one).
    let reviewers = reviewers_of(&store, &candidate).await?;
    if ctx.json {
        let mut out = candidate_json(&candidate);
        out["reviewers"] = json!(
            reviewers
                .iter()
                .map(|(name, rows)| json!({
                    "reviewer": name,
                    "rows": rows,
                    "stand_in": name == crate::commands::demo::reviewer::DEMO_REVIEWER,
                }))
                .collect::<Vec<_>>()
        );
        if let Some(pace) = &pace {
            out["pace"] = json!(pace);
        }
        if !gate_runs.is_empty() {
            out["gate_runs"] = json!(gate_runs.iter().map(gate_run_json).collect::<Vec<_>>());
        }
        out["eval_report"] = raw_json(&candidate.eval_report_json);
        out["summary_metadata"] = raw_json(&candidate.summary_metadata_json);
        out["diff"] = Value::String(diff);
        out["content"] = Value::String(version.content);
        print_json(&out);
        return Ok(OK);
    }
    println!(
        "candidate   {} ({}, review {})",
        candidate.version_id, candidate.version_state, candidate.review_state
    );
    println!("source      {}", source_words(&candidate));
    println!("hash        {}", candidate.content_hash);
    println!("base        {}", candidate.base_version_id);
    let summary = raw_json(&candidate.summary_metadata_json);
    let said = |key: &str| summary.get(key).and_then(Value::as_str).map(str::to_owned);
    println!(
        "score       {}",
        match candidate.score {
            Some(score) => match said("score_evidence") {
                Some(from) => format!("{score} ({from})"),
                None => score.to_string(),
            },
            None => format!(
                "none ({})",
                said(skillforge_skillopt::distill::run::SCORE_UNAVAILABLE_KEY)
                    .unwrap_or_else(|| "the optimizer reported no score".to_owned())
            ),
        }
    );
    println!("preference  {}", candidate.preference_summary);
    if !reviewers.is_empty() {
        let words: Vec<String> = reviewers
            .iter()
            .map(|(name, rows)| {
                let what = if name == crate::commands::demo::reviewer::DEMO_REVIEWER {
                    format!(" ({})", crate::commands::demo::reviewer::STAND_IN_WORDS)
                } else {
                    String::new()
                };
                format!(
                    "{name}, {rows} ranked row{}{what}",
                    if *rows == 1 { "" } else { "s" }
                )
            })
            .collect();
        println!("reviewers   {}", words.join("; "));
    }
    if !candidate.decision_reason.is_empty() {
        println!("decision    {}", candidate.decision_reason);
    }
    if let Some(pace) = &pace {
        println!("pace        {}", pace.reason);
    }
    for run in &gate_runs {
        let deltas: Vec<skillforge_skillopt::gate::score::ItemDelta> =
            serde_json::from_str(&run.deltas_json).unwrap_or_default();
        println!(
            "gate        {} against {} (corpus version {}, attempt {}): {}",
            if run.accepted {
                "accepted"
            } else {
                "not accepted"
            },
            run.champion_version_id,
            run.corpus_version,
            run.attempts,
            run.reason
        );
        for line in gate::delta_lines(&deltas) {
            println!("  {line}");
        }
    }
    print_eval_report(&candidate.eval_report_json);
    println!();
    print!("{diff}");
    Ok(OK)
}

/// A stored gate run as JSON, its deltas parsed.
fn gate_run_json(run: &skillforge_store::gates::GateRunRow) -> Value {
    let mut v = serde_json::to_value(run).unwrap_or(Value::Null);
    if let Some(map) = v.as_object_mut() {
        let deltas = map
            .remove("deltas_json")
            .and_then(|d| {
                d.as_str()
                    .and_then(|t| serde_json::from_str::<Value>(t).ok())
            })
            .unwrap_or(Value::Null);
        map.insert("deltas".into(), deltas);
    }
    v
}

fn refused(id: &str, action: &str, outcome: DecisionOutcome) -> CliError {
    match outcome {
        DecisionOutcome::WrongState(state) => CliError::usage(anyhow!(
            "{action} candidate `{id}`: it is {state}, only pending or canary candidates can be decided"
        )),
        _ => CliError::usage(anyhow!(
            "{action} candidate `{id}`: not an imported candidate"
        )),
    }
}

/// The running canary of `template_id` other than `version_id`, which a decision on `version_id`
/// ends (issue 37 item 2).
async fn canary_to_end(
    store: &skillforge_store::Store,
    template_id: &str,
    version_id: &str,
) -> Result<Option<String>, CliError> {
    Ok(
        skillforge_store::promotion::canary_of(store.pool(), template_id)
            .await?
            .map(|c| c.id)
            .filter(|c| c != version_id),
    )
}

/// Says (and sends as `candidate.rolled_back`) that `canary` ended because `version_id` was
/// decided by hand.
async fn canary_ended(
    ctx: &Context,
    store: &skillforge_store::Store,
    template_id: &str,
    canary: &str,
    version_id: &str,
    action: &str,
) -> Result<(), CliError> {
    let reason = format!(
        "canary ended: {version_id} was {action} by hand; {canary} is pending again and is decided against the new state"
    );
    let event = skillforge_skillopt::promotion::events::Event::new(
        skillforge_skillopt::promotion::events::EventKind::RolledBack,
        canary,
        template_id,
        skillforge_skillopt::promotion::events::Detail::default().with_reason(&reason),
    );
    crate::control::promotion::emit(ctx, store, &event).await?;
    if !ctx.json {
        println!("{reason}");
    }
    Ok(())
}

/// Sends `candidate.promoted` / `candidate.rejected` for a decision made by hand (issue 37 item
/// 11), with the candidate's score and the reason given.
pub(crate) async fn decided_by_hand(
    ctx: &Context,
    store: &skillforge_store::Store,
    candidate: &CandidateRow,
    kind: EventKind,
    reason: &str,
) -> Result<(), CliError> {
    let detail = Detail {
        score: candidate.score,
        ..Detail::default()
    }
    .with_reason(reason);
    let event = Event::new(kind, &candidate.version_id, &candidate.template_id, detail);
    crate::control::promotion::emit(ctx, store, &event).await?;
    Ok(())
}

async fn promote(ctx: &Context, reference: &str, reason: &str) -> CliResult {
    let (store, candidate) = candidate_for(ctx, reference, true).await?;
    let id = candidate.version_id.clone();
    let running = canary_to_end(&store, &candidate.template_id, &id).await?;
    match promote_candidate(&store, &id, reason).await? {
        DecisionOutcome::Done { previous } => {
            decided_by_hand(ctx, &store, &candidate, EventKind::Promoted, reason).await?;
            if let Some(canary) = &running {
                canary_ended(ctx, &store, &candidate.template_id, canary, &id, "promoted").await?;
            }
            // Made from an older version than the one it replaces: that version's changes are
            // not in it. Said, not refused (a person chose it; the canary and auto-promotion
            // refuse such a base as "rebase needed").
            let stale_base = previous
                .as_ref()
                .filter(|p| {
                    !candidate.base_version_id.is_empty() && **p != candidate.base_version_id
                })
                .map(|_| candidate.base_version_id.clone());
            if ctx.json {
                print_json(
                    &json!({"version_id": id, "state": "current", "superseded": previous, "stale_base": stale_base}),
                );
            } else {
                match &previous {
                    Some(p) => println!("promoted {id} to current ({p} superseded)"),
                    None => println!("promoted {id} to current"),
                }
                if let (Some(base), Some(p)) = (&stale_base, &previous) {
                    eprintln!(
                        "note: {id} was made from {base}, not from {p}: what {p} changed is not in it \
                         (`skillforge template show {p} --content` shows it)"
                    );
                }
                if let Some(file) = user_file(&store, &candidate.template_id).await? {
                    println!(
                        "your file does not hold it yet; write it back: skillforge template show {} --content > {}",
                        candidate.template_id,
                        crate::output::shell_word(&file)
                    );
                }
            }
            Ok(OK)
        }
        other => Err(refused(&id, "promote", other)),
    }
}

async fn reject(ctx: &Context, reference: &str, reason: &str) -> CliResult {
    if reason.trim().is_empty() {
        return Err(CliError::usage(anyhow!(
            "--reason must say why the candidate is rejected"
        )));
    }
    let (store, candidate) = candidate_for(ctx, reference, true).await?;
    let id = candidate.version_id.clone();
    let running = canary_to_end(&store, &candidate.template_id, &id).await?;
    match reject_candidate(&store, &id, reason.trim()).await? {
        DecisionOutcome::Done { .. } => {
            decided_by_hand(ctx, &store, &candidate, EventKind::Rejected, reason.trim()).await?;
            if let Some(canary) = &running {
                canary_ended(ctx, &store, &candidate.template_id, canary, &id, "rejected").await?;
            }
            if ctx.json {
                print_json(
                    &json!({"version_id": id, "state": "rejected", "reason": reason.trim()}),
                );
            } else {
                println!("rejected {id}: {}", reason.trim());
            }
            Ok(OK)
        }
        other => Err(refused(&id, "reject", other)),
    }
}

/// The candidate's eval report for a person: one `key  value` line per top-level field (its name
/// in words, nested
/// values compact), or `-` when there is none; `--json` carries it whole.
fn print_eval_report(report_json: &str) {
    let report = raw_json(report_json);
    match report.as_object() {
        Some(fields) if !fields.is_empty() => {
            println!("eval report");
            for (key, value) in fields {
                let shown = human_value(value);
                // The field's name in words (`run id`, not `run_id`); `--json` keeps the names.
                let key = key.replace('_', " ");
                println!("  {key:<22} {shown}");
            }
            // The terms of the built-in optimizer's report, once, in words.
            if fields.contains_key("evidence") {
                println!(
                    "  (evidence by source: human gold = a person's review, verifiable floor = a \
                     verifier's or checker's result, judge = a model judge's verdict)"
                );
            }
            if fields.contains_key("held_out_replay") {
                println!(
                    "  (held out replay: each ranking left out in turn, the rules learned from the \
                     others picked an option in `picked` of them and the reviewer's winner in `agreed`)"
                );
            }
        }
        _ if report_json.trim().is_empty() => println!("eval report -"),
        _ => println!("eval report {}", report_json.trim()),
    }
}

/// A JSON value for a person: text as is, an object as `key value` pairs, a list of objects as
/// its count and the first one's fields.
fn human_value(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "-".to_owned(),
        Value::Object(fields) => fields
            .iter()
            .map(|(k, v)| format!("{} {}", k.replace('_', " "), human_value(v)))
            .collect::<Vec<_>>()
            .join(", "),
        Value::Array(items) if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
            items.iter().map(human_value).collect::<Vec<_>>().join(", ")
        }
        Value::Array(items) => format!("{} entries", items.len()),
        other => other.to_string(),
    }
}

/// The file the template's newest hand-added version was read from (`template add PATH`), when it
/// is still there: where a promoted candidate is written back.
async fn user_file(
    store: &skillforge_store::Store,
    template_id: &str,
) -> Result<Option<std::path::PathBuf>, CliError> {
    let versions = skillforge_store::templates::list_versions(store.pool(), template_id).await?;
    Ok(versions
        .iter()
        .filter(|v| v.source_repo != skillforge_store::candidates::CANDIDATE_SOURCE_REPO)
        .max_by_key(|v| v.version)
        .map(|v| std::path::PathBuf::from(&v.source_path))
        .filter(|p| p.is_absolute() && p.is_file()))
}
