//! `eval status [--brief ID]`: where a forge stands, read off its files; a running forge also
//! shows the tail of its running stage's output from the queue (text output only). Without
//! `--brief`, one line per brief forged in this home.

use anyhow::anyhow;
use clap::Args;
use serde_json::json;
use skillforge_evalloop::aggregate::{AGGREGATE_FILE, Aggregate};
use skillforge_evalloop::arm::{ArmRecord, ArmSide};
use skillforge_evalloop::forge::{FORGE_FILE, ForgeState};
use skillforge_evalloop::layout::{brief_dir, ledger_path, meta_dir, read_json, sample_dir};
use skillforge_evalloop::ledger::read_ledger;
use skillforge_evalloop::sample::{SampleVerdict, VERDICT_FILE};
use skillforge_evalloop::spend::{SampleSpend, brief_spend};
use skillforge_evalloop::stages::EVAL_WORKFLOW;
use skillforge_evalloop::steps::arm::RUN_FILE;
use skillforge_evalloop::steps::verify::{VERIFY_FILE, VerifyResult};

use crate::context::Context;
use crate::control::tail::{print_tail, running_tail};
use crate::exit::{CliError, CliResult, OK};
use crate::output::print_json;

/// Arguments of `eval status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The brief id; without it, every brief forged in this home, one line each.
    #[arg(long)]
    brief: Option<String>,
}

/// Lines of the running stage's output shown under a running forge.
const TAIL_LINES: usize = 5;

/// Runs `eval status`.
pub async fn run(ctx: &Context, args: StatusArgs) -> CliResult {
    let Some(brief) = args.brief else {
        return list(ctx);
    };
    let dir = brief_dir(&ctx.home, &brief);
    let state: ForgeState = read_json(&dir.join(FORGE_FILE))
        .map_err(|e| CliError::env(anyhow!("{e}")))?
        .ok_or_else(|| super::no_forge(&ctx.home, &brief))?;
    let mut samples = Vec::new();
    for n in 1..=state.samples {
        let sdir = sample_dir(&dir, n);
        let arm = |side: ArmSide| -> Option<ArmRecord> {
            read_json(&meta_dir(&sdir, side).join(RUN_FILE))
                .ok()
                .flatten()
        };
        let verdict: Option<SampleVerdict> = read_json(&sdir.join(VERDICT_FILE)).ok().flatten();
        let verify = |side: ArmSide| -> Option<VerifyResult> {
            read_json(&meta_dir(&sdir, side).join(VERIFY_FILE))
                .ok()
                .flatten()
        };
        let stage = match (
            state.prepared.contains(&n),
            arm(ArmSide::With),
            arm(ArmSide::Without),
            &verdict,
        ) {
            (false, ..) => "not started",
            (true, _, _, Some(_)) => "judged",
            (true, Some(_), Some(_), None) => "judging",
            (true, ..) => "arms running",
        };
        samples.push(json!({
            "sample": n,
            "stage": stage,
            "with": arm(ArmSide::With).map(|r| json!({"exit": r.exit, "duration_ms": r.duration_ms, "skills_loaded": r.skills_loaded, "verify": verify(ArmSide::With)})),
            "without": arm(ArmSide::Without).map(|r| json!({"exit": r.exit, "duration_ms": r.duration_ms, "skills_loaded": r.skills_loaded, "verify": verify(ArmSide::Without)})),
            "invalid_code": verdict.as_ref().and_then(|v| v.invalid_code),
            "winner": verdict.as_ref().and_then(|v| v.winner),
        }));
    }
    let agg: Option<Aggregate> =
        read_json(&dir.join(AGGREGATE_FILE)).map_err(|e| CliError::env(anyhow!("{e}")))?;
    let rows = read_ledger(&ledger_path(&ctx.home)).map_err(|e| CliError::env(anyhow!(e)))?;
    let tag = format!("forge:{}", state.forge_id);
    let row = rows.iter().find(|r| r.reason.ends_with(&tag));
    let spend = brief_spend(&dir, state.samples);
    for s in &mut samples {
        let n = s["sample"].as_u64().unwrap_or_default();
        s["spend"] = json!(
            spend
                .samples
                .iter()
                .find(|x| u64::from(x.sample) == n)
                .map(SampleSpend::total)
        );
    }
    if ctx.json {
        print_json(
            &json!({"forge": state, "samples": samples, "aggregate": agg, "ledger_row": row, "spend": spend.total}),
        );
        return Ok(OK);
    }
    println!(
        "forge {} of `{}` with {}: {}",
        state.forge_id,
        state.brief_id,
        super::forged_words(&state),
        state.status
    );
    let [with, without] = super::side_names(&state);
    if let Some(arms) = &state.arms {
        println!("  arms: {}", arms.words());
    }
    if let Some(judge) = &state.judge {
        println!("  judge: {}", judge.words());
    }
    for s in &samples {
        println!(
            "  sample {}: {}{}{}",
            s["sample"],
            s["stage"].as_str().unwrap_or_default(),
            s["invalid_code"]
                .as_str()
                .map(|c| format!(" · invalid: {}", c.replace('_', " ")))
                .unwrap_or_default(),
            s["winner"]
                .as_str()
                .map(|w| format!(
                    " · winner {}",
                    match w {
                        "with" => &with,
                        "without" => &without,
                        other => other,
                    }
                ))
                .unwrap_or_default()
        );
        let verified = |side: &str| match s[side]["verify"]["passed"].as_bool() {
            Some(true) => "passed",
            Some(false) => "failed",
            None => "not run",
        };
        if s["with"].is_object() || s["without"].is_object() {
            println!(
                "    verify: {with} {} · {without} {}",
                verified("with"),
                verified("without")
            );
        }
    }
    println!("  spend: {}", spend.total.human());
    if let Some(a) = agg {
        println!(
            "  aggregate: {} valid of {} ({with} {} / {without} {} / tie {})",
            a.n_valid, a.n_samples, a.wins_with, a.wins_without, a.ties
        );
    }
    if let Some(r) = row {
        println!(
            "  ledger: {} — {}",
            r.decision,
            super::untagged(&r.reason, &state.forge_id)
        );
    }
    if state.status == "running" {
        // Best effort: the files above are the status; a queue that cannot be opened only
        // loses the tail.
        if let Ok(queue) = ctx.queue().await {
            let prefix = format!("eval:{}:{}:", state.brief_id, state.forge_id);
            if let Ok(Some(tail)) =
                running_tail(queue.as_ref(), EVAL_WORKFLOW, &prefix, TAIL_LINES).await
            {
                print_tail(&tail);
            }
        }
    }
    Ok(OK)
}

/// `eval status` without `--brief`: every brief with a forge in this home (its run dir holds a
/// `forge.json`), by brief id: skill, status, samples judged of asked, the ledger's decision,
/// the judge.
fn list(ctx: &Context) -> CliResult {
    let runs = skillforge_evalloop::layout::eval_root(&ctx.home).join("runs");
    let mut ids: Vec<String> = std::fs::read_dir(&runs)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    let ledger = read_ledger(&ledger_path(&ctx.home)).map_err(|e| CliError::env(anyhow!(e)))?;
    let mut rows = Vec::new();
    for id in ids {
        let dir = brief_dir(&ctx.home, &id);
        let Some(state) = read_json::<ForgeState>(&dir.join(FORGE_FILE))
            .map_err(|e| CliError::env(anyhow!("{e}")))?
        else {
            continue;
        };
        let judged = (1..=state.samples)
            .filter(|n| sample_dir(&dir, *n).join(VERDICT_FILE).is_file())
            .count();
        let tag = format!("forge:{}", state.forge_id);
        let decision = ledger
            .iter()
            .find(|r| r.reason.ends_with(&tag))
            .map(|r| r.decision.to_string());
        let mut row = json!({
            "brief": state.brief_id,
            "skill": state.skill,
            "status": state.status,
            "samples": state.samples,
            "judged": judged,
            "decision": decision,
            "judge": state.judge,
        });
        // A forge of versions: the versions it compared.
        if let Some(versions) = &state.versions {
            row["versions"] = json!(versions);
        }
        rows.push(row);
    }
    if ctx.json {
        print_json(&rows);
        return Ok(OK);
    }
    if rows.is_empty() {
        println!(
            "no brief has been forged in this home yet: `skillforge eval forge --brief FILE --skill-dir DIR --runtime R` runs one"
        );
        return Ok(OK);
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let text = |k: &str| r[k].as_str().unwrap_or("").to_owned();
            let skill = match r["versions"]["candidate"].as_str() {
                Some(candidate) => match r["versions"]["rival"].as_str() {
                    Some(rival) => format!("{candidate} vs {rival}"),
                    None => candidate.to_owned(),
                },
                None => text("skill"),
            };
            vec![
                text("brief"),
                skill,
                text("status"),
                format!("{}/{}", r["judged"], r["samples"]),
                r["decision"].as_str().unwrap_or("none yet").to_owned(),
                r["judge"]["runtime"]
                    .as_str()
                    .map(|rt| match r["judge"]["model"].as_str() {
                        Some(m) => format!("{rt} ({m})"),
                        None => rt.to_owned(),
                    })
                    .unwrap_or_else(|| "unknown".to_owned()),
            ]
        })
        .collect();
    println!(
        "{}",
        crate::output::table(
            &["BRIEF", "SKILL", "STATUS", "JUDGED", "DECISION", "JUDGE"],
            &cells,
            &[3]
        )
    );
    println!(
        "details: skillforge eval status --brief ID; side by side: skillforge eval report --brief ID"
    );
    Ok(OK)
}
