//! `eval report --brief ID [--html FILE]`: each sample's two arms side by side — de-blinded only
//! where a verdict exists — with its code and reason, the aggregate, the gate and the ledger row.
//! The HTML is one self-contained file (inline CSS, no scripts, no external resources).

use std::fmt::Write;
use std::path::PathBuf;

use anyhow::anyhow;
use clap::Args;
use skillforge_evalloop::aggregate::{AGGREGATE_FILE, Aggregate};
use skillforge_evalloop::arm::{ArmRecord, ArmSide};
use skillforge_evalloop::forge::{FORGE_FILE, ForgeState};
use skillforge_evalloop::layout::{brief_dir, ledger_path, meta_dir, read_json, sample_dir};
use skillforge_evalloop::ledger::read_ledger;
use skillforge_evalloop::sample::{SampleVerdict, VERDICT_FILE};
use skillforge_evalloop::spend::brief_spend;
use skillforge_evalloop::stats::VerdictStats;
use skillforge_evalloop::steps::arm::{FINAL_FILE, RUN_FILE};
use skillforge_evalloop::steps::verify::{VERIFY_FILE, VerifyResult};
use skillforge_runner_agent::Spend;

use crate::context::Context;
use crate::exit::{CliError, CliResult, OK};

/// Arguments of `eval report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The brief id.
    #[arg(long)]
    brief: String,
    /// Write a self-contained HTML page here.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

struct ArmView {
    record: Option<ArmRecord>,
    final_message: String,
    /// The brief's verify in this arm's work dir (`verify.json`), once run.
    verify: Option<VerifyResult>,
}

struct SampleView {
    n: u32,
    verdict: Option<SampleVerdict>,
    arms: [ArmView; 2],
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// What a report shows of one brief's forge.
struct Loaded {
    state: ForgeState,
    samples: Vec<SampleView>,
    agg: Option<Aggregate>,
    gate_line: String,
    spend: skillforge_evalloop::spend::BriefSpend,
    stats: VerdictStats,
}

/// The self-contained HTML report of brief `brief` under `home` (`eval report --html`, and the
/// web console's link from its Work page).
///
/// # Errors
/// Exit 2 for a brief without a forge; exit 3 for unreadable files.
pub fn report_html(home: &std::path::Path, brief: &str) -> Result<String, CliError> {
    let l = load(home, brief)?;
    Ok(html(
        &l.state,
        &l.samples,
        l.agg.as_ref(),
        &l.gate_line,
        &l.spend.total,
        &l.stats,
    ))
}

/// Reads what the report of brief `brief` shows.
fn load(home: &std::path::Path, brief: &str) -> Result<Loaded, CliError> {
    let dir = brief_dir(home, brief);
    let state: ForgeState = read_json(&dir.join(FORGE_FILE))
        .map_err(|e| CliError::env(anyhow!("{e}")))?
        .ok_or_else(|| super::no_forge(home, brief))?;
    let samples: Vec<SampleView> = (1..=state.samples)
        .filter(|n| state.prepared.contains(n))
        .map(|n| {
            let sdir = sample_dir(&dir, n);
            let arm = |side: ArmSide| ArmView {
                record: read_json(&meta_dir(&sdir, side).join(RUN_FILE))
                    .ok()
                    .flatten(),
                final_message: std::fs::read_to_string(meta_dir(&sdir, side).join(FINAL_FILE))
                    .unwrap_or_default(),
                verify: read_json(&meta_dir(&sdir, side).join(VERIFY_FILE))
                    .ok()
                    .flatten(),
            };
            SampleView {
                n,
                verdict: read_json(&sdir.join(VERDICT_FILE)).ok().flatten(),
                arms: [arm(ArmSide::With), arm(ArmSide::Without)],
            }
        })
        .collect();
    let agg: Option<Aggregate> =
        read_json(&dir.join(AGGREGATE_FILE)).map_err(|e| CliError::env(anyhow!("{e}")))?;
    let rows = read_ledger(&ledger_path(home)).map_err(|e| CliError::env(anyhow!(e)))?;
    let tag = format!("forge:{}", state.forge_id);
    let row = rows.iter().find(|r| r.reason.ends_with(&tag));
    let gate_line = row
        .map(|r| r.reason.clone())
        .unwrap_or_else(|| "no ledger verdict".to_owned());
    let spend = brief_spend(&dir, state.samples);
    let verdicts: Vec<SampleVerdict> = samples.iter().filter_map(|s| s.verdict.clone()).collect();
    let stats = VerdictStats::of(&verdicts);
    Ok(Loaded {
        state,
        samples,
        agg,
        gate_line,
        spend,
        stats,
    })
}

/// Runs `eval report`.
pub fn run(ctx: &Context, args: ReportArgs) -> CliResult {
    let Loaded {
        state,
        samples,
        agg,
        gate_line,
        spend,
        stats,
    } = load(&ctx.home, &args.brief)?;
    // Issue 34 item 10: a forge run with `--pace` kept its PACE report beside the aggregate.
    let pace: Option<skillforge_contract::pace::PaceReport> =
        read_json(&brief_dir(&ctx.home, &args.brief).join(skillforge_evalloop::pace::PACE_FILE))
            .ok()
            .flatten();
    if ctx.json && args.html.is_none() {
        let samples: Vec<serde_json::Value> = samples
            .iter()
            .map(|s| {
                serde_json::json!({
                    "sample": s.n,
                    "verdict": s.verdict,
                    "arms": s.arms.iter().enumerate().map(|(idx, a)| serde_json::json!({"arm": side_label(s, idx), "version": s.verdict.as_ref().and(version_of(&state, idx)), "run": a.record, "verify": a.verify, "final_message": a.final_message})).collect::<Vec<_>>(),
                    "spend": spend.samples.iter().find(|x| x.sample == s.n),
                })
            })
            .collect();
        let mut out = serde_json::json!({"forge": state, "samples": samples, "aggregate": agg, "stats": stats, "gate": gate_line, "spend": spend.total});
        if let Some(pace) = &pace {
            out["pace"] = serde_json::json!(pace);
        }
        crate::output::print_json(&out);
        return Ok(OK);
    }
    match &args.html {
        Some(path) => {
            let page = html(
                &state,
                &samples,
                agg.as_ref(),
                &gate_line,
                &spend.total,
                &stats,
            );
            std::fs::write(path, page)
                .map_err(|e| CliError::env(anyhow!("write `{}`: {e}", path.display())))?;
            eprintln!("report written to {}", path.display());
        }
        None => {
            println!(
                "brief `{}` · skill {} · forge {}",
                state.brief_id,
                super::forged_words(&state),
                state.forge_id
            );
            let [with, without] = super::side_names(&state);
            for s in &samples {
                match s
                    .verdict
                    .as_ref()
                    .and_then(|v| v.invalid_code.map(|c| (c, v)))
                {
                    Some((code, v)) => println!("sample {}: {}", s.n, code.line(&v.reason)),
                    None => {
                        let (label, reason) = verdict_text(s.verdict.as_ref(), &state);
                        println!("sample {}: {label} — {reason}", s.n);
                    }
                }
                for (idx, a) in s.arms.iter().enumerate() {
                    println!(
                        "  [{}] {} ({}; {})",
                        arm_label(s, idx, &state),
                        a.final_message.lines().next().unwrap_or_default(),
                        verify_text(a),
                        arm_spend(a)
                    );
                }
            }
            if let Some(a) = &agg {
                println!(
                    "aggregate: {} valid of {}: {with} {} / {without} {} / tie {}",
                    a.n_valid, a.n_samples, a.wins_with, a.wins_without, a.ties
                );
            }
            for line in stats.human() {
                println!("{line}");
            }
            println!("spend: {}", spend.total.human());
            if let Some(pace) = &pace {
                println!("pace (across forges of `{}`): {}", state.skill, pace.reason);
            }
            println!("gate: {}", super::untagged(&gate_line, &state.forge_id));
        }
    }
    Ok(OK)
}

/// An arm's verify result: `verify passed`, `verify failed (exit 1)`, `verify not run`
/// (issue 34 item 9: the run's own exit said nothing about the deliverable).
fn verify_text(a: &ArmView) -> String {
    match &a.verify {
        None => "verify not run".to_owned(),
        Some(v) if v.passed => "verify passed".to_owned(),
        Some(v) => format!(
            "verify failed ({})",
            v.exit_code
                .map_or_else(|| v.exit.clone(), |c| format!("exit {c}"))
        ),
    }
}

/// An arm's tokens and cost, as its transcript reported them.
fn arm_spend(a: &ArmView) -> String {
    let mut spend = Spend::default();
    match &a.record {
        Some(r) => spend.add_run(r.usage.as_ref()),
        None => return "not run".to_owned(),
    }
    spend.human()
}

/// An arm's label: its side (with the version it ran, for a forge of versions) once the sample
/// has a verdict, otherwise only its slot-free index.
fn arm_label(s: &SampleView, idx: usize, state: &ForgeState) -> String {
    match &s.verdict {
        Some(_) => super::side_names(state)[idx].clone(),
        None => format!("arm {}", idx + 1),
    }
}

/// An arm's side (`with`, `without`) once the sample has a verdict, else `arm N` (`--json`).
fn side_label(s: &SampleView, idx: usize) -> String {
    match &s.verdict {
        Some(_) => ["with", "without"][idx].to_owned(),
        None => format!("arm {}", idx + 1),
    }
}

/// The template version arm `idx` (0 with, 1 without) ran, for a forge of versions.
fn version_of(state: &ForgeState, idx: usize) -> Option<&str> {
    let versions = state.versions.as_ref()?;
    match idx {
        0 => Some(versions.candidate.as_str()),
        _ => versions.rival.as_deref(),
    }
}

fn verdict_text(v: Option<&SampleVerdict>, state: &ForgeState) -> (String, String) {
    let [with, without] = super::side_names(state);
    match v {
        None => ("pending".to_owned(), "not judged yet".to_owned()),
        Some(v) => match (v.invalid_code, v.winner) {
            (Some(code), _) => (format!("invalid ({code})"), v.reason.clone()),
            (None, Some(w)) => (
                format!(
                    "winner: {}",
                    match w {
                        skillforge_evalloop::sample::Winner::With => with,
                        skillforge_evalloop::sample::Winner::Without => without,
                        other => serde_json::to_value(other)
                            .ok()
                            .and_then(|x| x.as_str().map(str::to_owned))
                            .unwrap_or_default(),
                    }
                ),
                v.reason.clone(),
            ),
            _ => ("—".to_owned(), v.reason.clone()),
        },
    }
}

fn html(
    state: &ForgeState,
    samples: &[SampleView],
    agg: Option<&Aggregate>,
    gate_line: &str,
    spend: &Spend,
    stats: &VerdictStats,
) -> String {
    let mut body = String::new();
    for s in samples {
        let (label, reason) = verdict_text(s.verdict.as_ref(), state);
        let class = match s.verdict.as_ref().map(|v| v.valid) {
            Some(true) => "verdict",
            Some(false) => "verdict invalid",
            None => "verdict pending",
        };
        let _ = write!(
            body,
            "<section class=\"sample\"><h2>Sample {} · <span class=\"{class}\">{}</span></h2><p class=\"reason\">{}</p><div class=\"arms\">",
            s.n,
            esc(&label),
            esc(&reason)
        );
        for (idx, a) in s.arms.iter().enumerate() {
            let meta = a
                .record
                .as_ref()
                .map(|r| {
                    format!(
                        "{} · exit {} · {} ms · loaded {} · {}",
                        verify_text(a),
                        r.exit,
                        r.duration_ms,
                        r.skills_loaded.as_ref().map_or("unknown".to_owned(), |l| {
                            if l.is_empty() {
                                "none".to_owned()
                            } else {
                                l.join(", ")
                            }
                        }),
                        arm_spend(a)
                    )
                })
                .unwrap_or_default();
            let _ = write!(
                body,
                "<article class=\"arm\"><h3>{}</h3><p class=\"meta\">{}</p><pre>{}</pre></article>",
                esc(&arm_label(s, idx, state)),
                esc(&meta),
                esc(&a.final_message)
            );
        }
        body.push_str("</div></section>");
    }
    let [with, without] = super::side_names(state);
    let agg_line = agg
        .map(|a| {
            format!(
                "{} valid of {} samples: {with} {} / {without} {} / tie {}",
                a.n_valid, a.n_samples, a.wins_with, a.wins_without, a.ties
            )
        })
        .unwrap_or_else(|| "no aggregate yet".to_owned());
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>eval report: {brief}</title><style>\
body{{font:15px/1.45 system-ui,sans-serif;margin:2rem;color:#111;background:#fafafa}}h1{{font-size:1.4rem}}\
.arms{{display:grid;grid-template-columns:1fr 1fr;gap:1rem}}.arm{{background:#fff;border:1px solid #ccc;border-radius:6px;padding:.75rem}}\
pre{{white-space:pre-wrap;font:13px/1.4 ui-monospace,monospace}}.meta,.reason{{color:#555}}.verdict{{color:#0a5}}.verdict.invalid{{color:#b00}}.verdict.pending{{color:#777}}\
.gate{{font-weight:600;padding:.75rem;background:#eef;border-radius:6px}}</style></head><body>\
<h1>Eval report · brief <code>{brief}</code> · skill <code>{skill}</code></h1>{body}\
<p>Aggregate: {agg}</p><ul class=\"stats\">{stats}</ul><p class=\"spend\">Spend: {spend}</p><p class=\"gate\">Gate: {gate}</p></body></html>\n",
        brief = esc(&state.brief_id),
        skill = esc(&super::forged_words(state)).replace('`', ""),
        agg = esc(&agg_line),
        gate = esc(super::untagged(gate_line, &state.forge_id)),
        spend = esc(&spend.human()),
        stats = stats
            .human()
            .iter()
            .map(|l| format!("<li>{}</li>", esc(l)))
            .collect::<String>(),
    )
}
