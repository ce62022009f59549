//! `skillforge judge agreement`: how far each A/B judge agrees with the humans (issue 34 item
//! 12). Over the A/Bs where a human and a judge both picked (`ab --judge --pick …`), per judge
//! runtime and model: the paired picks, the raw agreement, Cohen's κ with its 95% interval
//! ([`skillforge_skillopt::ab::agreement`]), and, with `[skillopt] judge_kappa_floor` and
//! `judge_min_paired_picks` set, whether the judge is measured (its verdicts count) or why not.

use anyhow::anyhow;
use clap::Subcommand;
use serde_json::json;
use skillforge_skillopt::ab::agreement::{Agreement, by_judge, judge_name};
use skillforge_store::judge_verdicts::paired_picks;

use crate::config::JudgeGate;
use crate::context::Context;
use crate::exit::{CliError, CliResult, OK};
use crate::output::print_json;

/// `skillforge judge …`.
#[derive(Debug, Subcommand)]
pub enum JudgeCommand {
    /// Each A/B judge's agreement with the human picks: paired picks, raw agreement, Cohen's κ
    /// with its 95% interval, and whether it is measured under `[skillopt] judge_kappa_floor`.
    Agreement,
}

/// One judge: its runtime, its model (`""`: its transcript named none) and its agreement.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeAgreement {
    /// Agent runtime.
    pub runtime: String,
    /// Model (`""` when not named).
    pub model: String,
    /// Agreement with the humans.
    pub agreement: Agreement,
}

impl JudgeAgreement {
    /// `codex (model gpt-5)` / `scripted (model not named)`.
    pub fn name(&self) -> String {
        judge_name(&self.runtime, &self.model)
    }
}

/// Every judge that ever picked beside a human, with its agreement, ordered by runtime and model.
///
/// # Errors
/// Exit 3 when the store cannot be read.
pub async fn agreements(ctx: &Context) -> Result<Vec<JudgeAgreement>, CliError> {
    let store = ctx.store().await?;
    let rows = paired_picks(store.pool()).await?;
    Ok(by_judge(&rows)
        .into_iter()
        .map(|((runtime, model), agreement)| JudgeAgreement {
            runtime,
            model,
            agreement,
        })
        .collect())
}

/// Whether the judge `runtime` / `model` is measured under `gate`: `Err` says why not (a judge
/// that never picked beside a human has 0 paired picks).
///
/// # Errors
/// The reason, in words; exit-code errors reading the store are the outer `Result`'s.
pub async fn measured(
    ctx: &Context,
    gate: JudgeGate,
    runtime: &str,
    model: &str,
) -> Result<Result<(), String>, CliError> {
    let all = agreements(ctx).await?;
    let agreement = all
        .iter()
        .find(|a| a.runtime == runtime && a.model == model)
        .map_or_else(|| Agreement::of(&[]), |a| a.agreement);
    Ok(agreement.measured(gate.floor, gate.min_picks))
}

/// The configured gate.
///
/// # Errors
/// Exit 2 for an invalid `[skillopt] judge_kappa_floor` / `judge_min_paired_picks`.
pub fn gate(ctx: &Context) -> Result<Option<JudgeGate>, CliError> {
    ctx.config.skillopt.judge_gate().map_err(|e| {
        CliError::usage(anyhow!(
            "{e} (in `{}`)",
            ctx.home.join(crate::config::CONFIG_FILE).display()
        ))
    })
}

/// Runs `skillforge judge …`.
pub async fn run(ctx: &Context, cmd: JudgeCommand) -> CliResult {
    let JudgeCommand::Agreement = cmd;
    let gate = gate(ctx)?;
    let judges = agreements(ctx).await?;
    if ctx.json {
        let rows: Vec<_> = judges
            .iter()
            .map(|j| {
                let mut v =
                    json!({"runtime": j.runtime, "model": j.model, "agreement": j.agreement});
                if let Some(g) = gate {
                    let verdict = j.agreement.measured(g.floor, g.min_picks);
                    v["measured"] = json!(verdict.is_ok());
                    if let Err(why) = verdict {
                        v["why_not"] = json!(why);
                    }
                }
                v
            })
            .collect();
        let gate_json = gate
            .map(|g| json!({"judge_kappa_floor": g.floor, "judge_min_paired_picks": g.min_picks}));
        print_json(
            &json!({"judges": rows, "gate": gate_json, "interval": "Cohen's kappa ± 1.96 · Cohen (1960) standard error, 95%"}),
        );
        return Ok(OK);
    }
    if judges.is_empty() {
        println!(
            "no judge has picked beside a human yet: run `skillforge ab AGENT PROMPT --judge --pick a|b` to collect paired picks"
        );
        return Ok(OK);
    }
    for j in &judges {
        let verdict = match gate {
            None => String::new(),
            Some(g) => match j.agreement.measured(g.floor, g.min_picks) {
                Ok(()) => "; measured: its verdicts count".to_owned(),
                Err(why) => format!("; not measured: {why}"),
            },
        };
        println!("{}: {}{verdict}", j.name(), j.agreement.human());
    }
    if gate.is_none() {
        println!(
            "no gate: set `[skillopt] judge_kappa_floor` and `judge_min_paired_picks` to count only measured judges"
        );
    }
    Ok(OK)
}
