//! `candidate gate V [--corpus FILE] [--runtime R]`: the replay gate (issue 34 item 11; facts §7
//! `gate_enabled` → `gate_blocked`): replays a corpus for the champion and the candidate as
//! durable jobs, scores them, records the run with its per-item deltas, and says whether the
//! candidate is accepted. A candidate without a score takes its corpus mean as the score
//! (issue 37 item 6). On a failing gate, one retry (issue 34 item 11; facts §7): for a candidate
//! of the built-in optimizer, its eval run is exported again with the failing replays in
//! `eval_run.metadata.replay_gate_failures`, the optimizer proposes a new candidate from it, which
//! is imported and gated (attempt 2); any other candidate is said to have no optimizer here.
//! Exit 0 accepted (the retry's candidate, after a retry), 1 not accepted, 2 bad input (nothing
//! recorded).

use std::path::PathBuf;

use anyhow::anyhow;
use serde_json::{Value, json};
use skillforge_skillopt::gate::corpus::Corpus;
use skillforge_skillopt::gate::run::{GateOutcome, GateRequest, GateRunError, run_gate};
use skillforge_skillopt::gate::score::ItemDelta;
use skillforge_store::candidates::get_candidate;

use crate::context::Context;
use crate::control::waiter::CliJobs;
use crate::exit::{CHECK_FAILED, CliError, CliResult, OK};
use crate::output::print_json;

/// `candidate gate`.
pub async fn gate_cmd(
    ctx: &Context,
    version_id: &str,
    corpus: Option<PathBuf>,
    runtime: &str,
    retry: bool,
) -> CliResult {
    let path = match (corpus, ctx.config.skillopt.gate_corpus.as_deref()) {
        (Some(p), _) => p,
        (None, Some(p)) => ctx.home.join(p),
        (None, None) => {
            return Err(CliError::usage(anyhow!(
                "no replay corpus: pass `--corpus FILE` or set `[skillopt] gate_corpus` in {} (see `skillforge schema replay-corpus`)",
                ctx.home.join(crate::config::CONFIG_FILE).display()
            )));
        }
    };
    let corpus = Corpus::load(&path).map_err(CliError::usage)?;
    if corpus.replay_command.is_none() {
        skillforge_runner_agent::find(runtime)
            .map_err(|e| CliError::usage(anyhow!("--runtime: {e}")))?;
    }
    let store = ctx.store().await?;
    let candidate = get_candidate(store.pool(), version_id).await?.ok_or_else(|| {
        CliError::usage(anyhow!("`{version_id}` is not an imported candidate (see `skillforge candidate list --pending`)"))
    })?;
    if candidate.version_state != "pending" && candidate.version_state != "canary" {
        return Err(CliError::usage(anyhow!(
            "`{version_id}` is {}: only a pending or canary candidate is gated",
            candidate.version_state
        )));
    }
    let stages: skillforge_stage::WorkflowDef = skillforge_skillopt::gate::SOURCE
        .for_home(&ctx.home)
        .map_err(CliError::usage)?;
    let jobs = CliJobs::new(ctx, ctx.queue().await?, store.clone());
    let path_text = path.display().to_string();
    let request = GateRequest {
        corpus: &corpus,
        corpus_path: &path_text,
        candidate: &candidate,
        runtime,
        attempt: 1,
    };
    let outcome = run_gate(&store, &jobs, &stages, &request)
        .await
        .map_err(|e| match e {
            GateRunError::NoChampion(_) | GateRunError::IsChampion(_) => {
                CliError::usage(anyhow!(e))
            }
            other => CliError::env(anyhow!(other)),
        })?;
    // The replays the candidate did not pass, kept beside the store for the optimizer's next round.
    let log = (!outcome.failing_log.is_empty()).then(|| {
        ctx.home
            .join("gate")
            .join(format!("{}.log", outcome.row.id))
    });
    if let Some(log) = &log {
        std::fs::create_dir_all(ctx.home.join("gate"))
            .and_then(|()| std::fs::write(log, &outcome.failing_log))
            .map_err(|e| CliError::env(anyhow!("write `{}`: {e}", log.display())))?;
    }
    // Issue 34 item 11: one retry that feeds the failing replays to the optimizer.
    let retried = if retry && !outcome.verdict.accepted {
        Some(retry_gate(ctx, &store, &jobs, &stages, &request, &outcome).await?)
    } else {
        None
    };
    let accepted = match &retried {
        Some(Retry::Gated { outcome, .. }) => outcome.verdict.accepted,
        _ => outcome.verdict.accepted,
    };
    if ctx.json {
        let mut out = outcome_json(&outcome);
        out["failing_log"] = json!(log);
        if let Some(r) = &retried {
            out["retry"] = r.json();
        }
        print_json(&out);
    } else {
        print_outcome(&outcome);
        if let Some(log) = &log {
            println!("the candidate's failing replays: {}", log.display());
        }
        if let Some(r) = &retried {
            r.print();
        }
    }
    Ok(if accepted { OK } else { CHECK_FAILED })
}

/// In the run id of a retry's training package: `<eval run>+gate-retry-of-<candidate>`.
const RETRY_RUN_MARK: &str = "+gate-retry-of-";

/// What the retry of a failing gate did.
enum Retry {
    /// No retry could be made, and why.
    Skipped(String),
    /// The optimizer proposed no new candidate, and why.
    NoCandidate(String),
    /// The optimizer's new candidate and its gate run (attempt 2).
    Gated {
        /// The new candidate version.
        version_id: String,
        /// Its gate run.
        outcome: Box<GateOutcome>,
    },
}

impl Retry {
    fn json(&self) -> Value {
        match self {
            Retry::Skipped(why) => json!({"retried": false, "why": why}),
            Retry::NoCandidate(why) => {
                json!({"retried": true, "candidate": null, "why": why})
            }
            Retry::Gated {
                version_id,
                outcome,
            } => json!({"retried": true, "candidate": version_id, "run": outcome_json(outcome)}),
        }
    }

    fn print(&self) {
        match self {
            Retry::Skipped(why) => println!("no retry: {why}"),
            Retry::NoCandidate(why) => println!(
                "retry: the failing replays were fed to the optimizer, which proposed no new candidate ({why})"
            ),
            Retry::Gated {
                version_id,
                outcome,
            } => {
                println!(
                    "retry: the failing replays were fed to the optimizer, which proposed {version_id}; gating it (attempt 2)"
                );
                print_outcome(outcome);
                if !outcome.verdict.accepted {
                    println!(
                        "no further retry: the gate retries once; see `skillforge candidate show {version_id}`"
                    );
                }
            }
        }
    }
}

/// The retry (see the module docs): export the candidate's eval run with the failing replays,
/// distill a new candidate from it into `<home>/gate/<candidate>-retry/`, import it (once per
/// file: a repeated retry finds the version it imported), run the notify seam, and gate it.
async fn retry_gate(
    ctx: &Context,
    store: &skillforge_store::Store,
    jobs: &CliJobs<'_>,
    stages: &skillforge_stage::WorkflowDef,
    first: &GateRequest<'_>,
    failed: &GateOutcome,
) -> Result<Retry, CliError> {
    use skillforge_skillopt::distill::evidence::REPLAY_GATE_FAILURES_KEY;
    use skillforge_skillopt::distill::run::OPTIMIZER_NAME;
    let candidate = first.candidate;
    let report: Value = serde_json::from_str(&candidate.eval_report_json).unwrap_or(Value::Null);
    if report["optimizer"] != OPTIMIZER_NAME {
        return Ok(Retry::Skipped(format!(
            "{} was not made by the built-in optimizer (`skillforge optimizer distill`); give the failing replays to the optimizer that made it",
            candidate.version_id
        )));
    }
    if failed.failures.is_empty() {
        return Ok(Retry::Skipped(
            "the candidate passed every item it was scored on (the champion's side decided): there is nothing to feed the optimizer".to_owned(),
        ));
    }
    let Some(run_id) = report["run_id"].as_str() else {
        return Ok(Retry::Skipped(format!(
            "the eval report of {} names no eval run to optimize again",
            candidate.version_id
        )));
    };
    if run_id.contains(RETRY_RUN_MARK) {
        return Ok(Retry::Skipped(format!(
            "{} is itself the retry of a failed gate, and the gate retries once",
            candidate.version_id
        )));
    }
    let mut package =
        match skillforge_store::review::package::training_package(store.pool(), run_id).await {
            Ok(p) => p,
            Err(skillforge_store::review::package::PackageError::Store(e)) => return Err(e.into()),
            Err(other) => {
                return Ok(Retry::Skipped(format!(
                    "its eval run `{run_id}` cannot be exported from this store ({other})"
                )));
            }
        };
    let mut metadata = match package.eval_run.metadata.take() {
        Some(Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    metadata.insert(
        REPLAY_GATE_FAILURES_KEY.to_owned(),
        Value::Array(failed.failures.clone()),
    );
    package.eval_run.metadata = Some(Value::Object(metadata));
    // The retry's candidate names its own run, so its artifacts do not collide with the first
    // candidate's (`<run>/candidate-diff`), and says it is a retry.
    package.eval_run.id = format!("{run_id}{RETRY_RUN_MARK}{}", candidate.version_id);
    let dir = ctx.home.join("gate").join(format!(
        "{}-retry",
        candidate.version_id.replace(['@', '/'], "-")
    ));
    let out = skillforge_skillopt::distill::DistillOutput::new(&dir, dir.join("candidate.json"));
    let distilled = skillforge_skillopt::distill::distill(
        &package,
        &ctx.home.join("blobs"),
        &out,
        &skillforge_skillopt::distill::DistillConfig::default(),
    )
    .map_err(|e| CliError::env(anyhow!("the gate's retry: {e}")))?;
    if !distilled.promotable {
        return Ok(Retry::NoCandidate(
            distilled.no_candidate_reason.unwrap_or_default(),
        ));
    }
    let blobs = skillforge_store::blobs::BlobStore::in_home(&ctx.home);
    let imported = skillforge_skillopt::train::optimizer::import_gate(
        store,
        &blobs,
        &dir,
        &out.candidate_output,
    )
    .await
    .map_err(|e| CliError::env(anyhow!("the gate's retry: {e}")))?;
    let version_id = match imported {
        skillforge_skillopt::train::optimizer::GateResult::Candidate { version_id, .. } => {
            version_id
        }
        skillforge_skillopt::train::optimizer::GateResult::NoCandidate { reason, .. } => {
            return Ok(Retry::NoCandidate(reason));
        }
    };
    crate::control::promotion::after_import(ctx, store, &version_id).await?;
    let retried = get_candidate(store.pool(), &version_id)
        .await?
        .ok_or_else(|| CliError::env(anyhow!("the retry's candidate {version_id} vanished")))?;
    let request = GateRequest {
        candidate: &retried,
        attempt: 2,
        ..first.clone()
    };
    let outcome = run_gate(store, jobs, stages, &request)
        .await
        .map_err(|e| CliError::env(anyhow!("the gate's retry: {e}")))?;
    Ok(Retry::Gated {
        version_id,
        outcome: Box::new(outcome),
    })
}

/// A gate run as JSON: the stored row with its deltas parsed.
pub fn outcome_json(outcome: &GateOutcome) -> Value {
    let mut row = serde_json::to_value(&outcome.row).unwrap_or(Value::Null);
    if let Some(map) = row.as_object_mut() {
        map.remove("deltas_json");
        map.insert("deltas".into(), json!(outcome.deltas));
        map.insert("candidate_scored".into(), json!(outcome.scored_candidate));
    }
    row
}

fn mean_text(mean: Option<f64>) -> String {
    mean.map_or_else(
        || "none (an item was unscorable)".to_owned(),
        |m| format!("{m:.3}"),
    )
}

/// The per-item lines of a gate run, for `candidate gate` and `candidate show`.
pub fn delta_lines(deltas: &[ItemDelta]) -> Vec<String> {
    let side = |s: &skillforge_skillopt::gate::score::ItemScore| match s.score() {
        Some(v) => format!("{v:.0} ({})", s.note()),
        None => format!("unscorable ({})", s.note()),
    };
    deltas
        .iter()
        .map(|d| {
            let delta = d
                .delta
                .map_or_else(|| "n/a".to_owned(), |v| format!("{v:+.0}"));
            format!(
                "  {:<16} delta {delta:<4} champion {}; candidate {}",
                d.id,
                side(&d.champion),
                side(&d.candidate)
            )
        })
        .collect()
}

fn print_outcome(outcome: &GateOutcome) {
    let row = &outcome.row;
    println!(
        "replay gate {}: {} against {} over {} items of corpus version {}",
        if row.accepted {
            "accepted"
        } else {
            "not accepted"
        },
        row.candidate_version_id,
        row.champion_version_id,
        row.corpus_items,
        row.corpus_version
    );
    println!(
        "  corpus mean: candidate {}, champion {}",
        mean_text(row.candidate_mean),
        mean_text(row.champion_mean)
    );
    for line in delta_lines(&outcome.deltas) {
        println!("{line}");
    }
    println!("{}", row.reason);
    if outcome.scored_candidate {
        println!(
            "the candidate had no score: its corpus mean is now its score (the guardrails read it)"
        );
    }
    if !row.accepted {
        println!(
            "next: improve the candidate (the failing replays are above) and run `skillforge candidate gate` again"
        );
    }
}
