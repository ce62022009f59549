//! `candidate gate V [--corpus FILE] [--runtime R]`: the replay gate (issue 34 item 11; facts §7
//! `gate_enabled` → `gate_blocked`): replays a corpus for the champion and the candidate as
//! durable jobs, scores them, records the run with its per-item deltas, and says whether the
//! candidate is accepted. A candidate without a score takes its corpus mean as the score
//! (issue 37 item 6). Exit 0 accepted, 1 not accepted, 2 bad input (nothing recorded).

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
    if ctx.json {
        let mut out = outcome_json(&outcome);
        out["failing_log"] = json!(log);
        print_json(&out);
    } else {
        print_outcome(&outcome);
        if let Some(log) = &log {
            println!("the candidate's failing replays: {}", log.display());
        }
    }
    Ok(if outcome.verdict.accepted {
        OK
    } else {
        CHECK_FAILED
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
