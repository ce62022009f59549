//! `skillforge ab AGENT "PROMPT"`: a champion/challenger A/B with a human pick, an optional
//! cross-family judge or jury, and the Beta-Bernoulli bandit (seed: SkillOpt, "Champion-challenger
//! A/B preferences (Mode B)", "Cross-family LLM-judge auto-pairwise"; S-64..S-82).
//!
//! Both answers run through the `agent` runner as durable jobs, strictly one after the other, and
//! are shown label-shuffled as Option A / Option B. The pick is mapped back through the shuffle
//! and recorded with its bandit update in one transaction (`skillforge_skillopt::ab::record`).
//! No pending challenger is a clean no-op that writes nothing.

use std::sync::Arc;

use anyhow::anyhow;
use clap::Args;
use serde_json::json;
use skillforge_contract::pace::{PaceReport, Pair};
use skillforge_engine::QueueBackend;
use skillforge_skillopt::ab::ask::{ask_prompt, declared_runtimes};
use skillforge_skillopt::ab::bandit::{Arm, Confidence, MC_SEED_XOR};
use skillforge_skillopt::ab::judge::{
    JudgeSelection, Verdict, agent_families, judge_pick, judge_prompt, parse_verdict, select_judges,
};
use skillforge_skillopt::ab::jury::{JuryConfig, aggregate};
use skillforge_skillopt::ab::pick::{ChallengerChoice, Label, Role, Shuffle, choose_challenger};
use skillforge_skillopt::ab::record::{AbRecord, JurorVerdict, record};
use skillforge_store::bandit::get_arm;
use skillforge_store::blobs::BlobStore;
use skillforge_store::promotion::pending_versions;
use skillforge_store::templates::{current_version, get_template, get_version};

use crate::context::Context;
use crate::control::agent::{AgentCall, call_agent};
use crate::control::pick_prompt;
use crate::exit::{CliError, CliResult, OK};
use crate::output::print_json;

/// Arguments of `skillforge ab`.
#[derive(Debug, Args)]
pub struct AbArgs {
    /// The agent: an installed template id.
    pub agent: String,
    /// The prompt both versions answer.
    pub prompt: String,
    /// Challenger version (`ID@vN`); default the sole pending version.
    #[arg(long)]
    pub challenger: Option<String>,
    /// The human pick, `a` or `b`. Without it, on a terminal: both answers are shown and the
    /// pick is prompted for (`a`, `b`, or `s` to skip: nothing recorded for the human, asked again
    /// on anything else); with stdin not a terminal: one line is read from stdin, and anything but
    /// `a` or `b` records nothing and exits 2.
    #[arg(long)]
    pub pick: Option<String>,
    /// Seed of the label shuffle (Monte Carlo uses SEED ^ 0x6a09e667f3bcc908); default time-based.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Also ask a cross-family LLM judge (or `[skillopt] mode_b_judge_enabled`); its runtimes come
    /// from `[skillopt] review_runtimes`, which must be set.
    #[arg(long)]
    pub judge: bool,
    /// Only the judge: no human pick, no bandit update.
    #[arg(long, conflicts_with = "pick")]
    pub judge_only: bool,
    /// The judge's model (a model name its runtime takes, e.g. `haiku`); the judge is measured
    /// and named by it (`skillforge judge agreement`), as `eval forge --judge-model` names its
    /// judge. Default: the runtime's own model, named as its transcript reports it.
    #[arg(long, value_name = "MODEL")]
    pub judge_model: Option<String>,
    /// Agent runtime that answers.
    #[arg(long, default_value = "scripted")]
    pub runtime: String,
    /// Monte Carlo draws of the posterior comparison.
    #[arg(long, default_value_t = skillforge_skillopt::ab::bandit::DEFAULT_DRAWS, value_parser = clap::value_parser!(u32).range(1..))]
    pub draws: u32,
}

struct Arms {
    template: String,
    champion: String,
    challenger: String,
}

/// Resolves champion and challenger (S-64, resolutions 10); `Ok(None)` is the clean no-op.
async fn arms(
    ctx: &Context,
    store: &skillforge_store::Store,
    args: &AbArgs,
) -> Result<Option<Arms>, CliError> {
    let template = &args.agent;
    if get_template(store.pool(), template).await?.is_none() {
        return Err(CliError::usage(anyhow!(
            "agent template `{template}` is not installed (see `skillforge template list`)"
        )));
    }
    let champion = current_version(store.pool(), template)
        .await?
        .ok_or_else(|| {
            CliError::usage(anyhow!(
                "template `{template}` has no current version to defend"
            ))
        })?;
    let pending = pending_versions(store.pool(), template).await?;
    match choose_challenger(&pending, args.challenger.as_deref()) {
        ChallengerChoice::Chosen(challenger) => Ok(Some(Arms {
            template: template.clone(),
            champion: champion.id,
            challenger,
        })),
        ChallengerChoice::NoneToAb => {
            if ctx.json {
                print_json(
                    &json!({"template": template, "ab": false, "reason": "no pending challenger"}),
                );
            } else {
                println!(
                    "nothing to A/B: template `{template}` has no pending challenger (champion {}); a train \
                     session (`skillforge train start`) or `skillforge import` of a candidate package makes one",
                    champion.id
                );
            }
            Ok(None)
        }
        ChallengerChoice::Ambiguous(ids) => Err(CliError::usage(anyhow!(
            "template `{template}` has {} pending versions ({}); choose one with --challenger",
            ids.len(),
            ids.join(", ")
        ))),
        ChallengerChoice::NotPending(id) => Err(CliError::usage(anyhow!(
            "--challenger `{id}` is not a pending version of `{template}` (pending: {})",
            if pending.is_empty() {
                "none".to_owned()
            } else {
                pending.join(", ")
            }
        ))),
    }
}

/// The human pick when `--pick` is absent (see [`AbArgs::pick`]): `Ok(None)` is a skip, asked
/// for on a terminal (`s`, `skip`, or end of input).
fn read_pick() -> Result<Option<Label>, CliError> {
    if pick_prompt::stdin_is_terminal() {
        return pick_prompt::ask_on_terminal();
    }
    let mut line = String::new();
    eprint!("pick the better answer [a/b]: ");
    pick_prompt::read_stdin_line(&mut line)?;
    Label::parse(&line).map(Some).ok_or_else(|| {
        CliError::usage(anyhow!(
            "no pick captured (expected `a` or `b`, got {:?}); nothing recorded (without a terminal, give --pick a|b \
             or pipe the pick on stdin)",
            line.trim()
        ))
    })
}

/// Refuses a judged A/B (`--judge`, `--judge-only`, `[skillopt] mode_b_judge_enabled`) whose
/// judge runtimes are not configured: none is picked from whatever CLIs happen to be on PATH.
///
/// # Errors
/// Exit 2 naming `[skillopt] review_runtimes` and the config file, before anything runs.
fn require_judges_configured(ctx: &Context, args: &AbArgs) -> Result<(), CliError> {
    let judge_on =
        args.judge || args.judge_only || ctx.config.skillopt.mode_b_judge_enabled == Some(true);
    if judge_on && ctx.config.skillopt.review_runtimes.is_none() {
        return Err(CliError::usage(anyhow!(
            "no judge runtime configured: set `[skillopt] review_runtimes = [\"codex\"]` (agent runtimes of a family other than the template's, in preference order) in `{}`; skillforge assumes none, nothing ran",
            ctx.home.join(crate::config::CONFIG_FILE).display()
        )));
    }
    Ok(())
}

/// Runs `skillforge ab`.
pub async fn run(ctx: &Context, args: AbArgs) -> CliResult {
    require_judges_configured(ctx, &args)?;
    let gate = crate::commands::judge::gate(ctx)?;
    let human_pick = match (&args.pick, args.judge_only) {
        (Some(p), _) => Some(
            Label::parse(p)
                .ok_or_else(|| CliError::usage(anyhow!("--pick must be `a` or `b`, got `{p}`")))?,
        ),
        (None, _) => None,
    };
    skillforge_runner_agent::find(&args.runtime)
        .map_err(|e| CliError::usage(anyhow!("--runtime: {e}")))?;
    crate::control::model_api::before_agent_jobs(ctx, &[args.runtime.as_str()], "ab").await?;
    let store = ctx.store().await?;
    let Some(arms) = arms(ctx, &store, &args).await? else {
        return Ok(OK);
    };
    let champion = get_version(store.pool(), &arms.champion)
        .await?
        .ok_or_else(|| CliError::env(anyhow!("champion vanished")))?;
    let challenger = get_version(store.pool(), &arms.challenger)
        .await?
        .ok_or_else(|| CliError::env(anyhow!("challenger vanished")))?;
    let seed = args
        .seed
        .unwrap_or_else(|| chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default() as u64);
    let shuffle = Shuffle::from_seed(seed);
    let backend = ctx.queue().await?;
    let nonce = uuid::Uuid::now_v7().simple().to_string();
    // Serialized: the challenger is asked only after the champion's answer is in (S-65).
    let mut answers = Vec::new();
    for (role, version) in [(Role::Champion, &champion), (Role::Challenger, &challenger)] {
        let call = AgentCall {
            stages: &skillforge_skillopt::AB_SOURCE,
            stage: role.as_str(),
            runtime: &args.runtime,
            prompt: ask_prompt(&version.content, &args.prompt),
            key: format!("ab:{}:{nonce}:{}", arms.challenger, role.as_str()),
            template_version: None,
            model: None,
        };
        answers.push(call_agent(ctx, &backend, call).await?);
    }
    let (champion_answer, challenger_answer) = (answers[0].clone(), answers[1].clone());
    let shown = |label: Label| match shuffle.role_of(label) {
        Role::Champion => &champion_answer.message,
        Role::Challenger => &challenger_answer.message,
    };
    let (option_a, option_b) = (shown(Label::A).clone(), shown(Label::B).clone());
    if ctx.json {
        eprintln!("Option A:\n{option_a}\n\nOption B:\n{option_b}\n");
    } else {
        println!("Option A:\n{option_a}\n\nOption B:\n{option_b}\n");
    }
    // Two answers of the same text: a pick between them is no preference (the `scripted` agent
    // gives both versions one stand-in answer unless a `scripted: reply` line differs).
    if option_a.trim() == option_b.trim() {
        let why = "the two versions answered with the same text: a pick between them says nothing, so nothing was recorded and the bandit is unchanged (on `scripted`, give each version its own `scripted: reply` line, or use a model runtime)";
        if ctx.json {
            print_json(&json!({
                "champion": arms.champion, "challenger": arms.challenger,
                "recorded": false, "same_answers": true, "reason": why,
            }));
        } else {
            println!("{why}");
        }
        return Ok(OK);
    }
    let human = match (args.judge_only, human_pick) {
        (true, _) => None,
        (false, Some(p)) => Some(p),
        (false, None) => read_pick()?,
    };
    let skipped = !args.judge_only && human.is_none();
    let judge_on =
        args.judge || args.judge_only || ctx.config.skillopt.mode_b_judge_enabled == Some(true);
    let mut judge_note = None;
    let mut judge_no_winner: Option<String> = None;
    let mut jurors = Vec::new();
    let mut judge = if judge_on {
        let families = agent_families(&declared_runtimes(&champion.metadata_json), &args.runtime);
        let outcome = run_judges(
            ctx,
            &backend,
            &families,
            &args.prompt,
            &option_a,
            &option_b,
            &nonce,
            args.judge_only,
            args.judge_model.as_deref(),
        )
        .await?;
        match outcome {
            Ok((label, why, votes)) => {
                jurors = votes
                    .into_iter()
                    .map(|(runtime, model, pick)| JurorVerdict {
                        runtime,
                        model,
                        winner: pick.map(|l| shuffle.role_of(l)),
                    })
                    .collect::<Vec<_>>();
                if label.is_none() {
                    judge_no_winner = Some(if why.is_empty() {
                        "no winner (a tie or an unreadable verdict)".to_owned()
                    } else {
                        format!("no winner ({why})")
                    });
                }
                label.map(|l| (shuffle.role_of(l), why))
            }
            // S-76: never a same-family judgement. With `--judge-only` the judge is the whole
            // A/B, so no judge is an error (exit 3, nothing recorded), not a dropped verdict.
            Err(message) if args.judge_only => {
                return Err(CliError::env(anyhow!(
                    "{message}: nothing was recorded. Add a runtime of another family to \
                     `[skillopt] review_runtimes` in config.toml (the agent runtimes: claude, \
                     codex, opencode), or pick yourself without --judge-only"
                )));
            }
            Err(message) => {
                eprintln!("{message}");
                judge_note = Some(message);
                None
            }
        }
    } else {
        None
    };
    // Issue 34 item 12: with the measured-judge gate on, a `--judge-only` pick counts (is written
    // as a judge row) only when every juror that gave it is measured against the humans.
    let mut not_measured = None;
    if args.judge_only
        && judge.is_some()
        && let Some(gate) = gate
    {
        for j in &jurors {
            if let Err(why) =
                crate::commands::judge::measured(ctx, gate, &j.runtime, &j.model).await?
            {
                let name = crate::commands::judge::JudgeAgreement {
                    runtime: j.runtime.clone(),
                    model: j.model.clone(),
                    agreement: skillforge_skillopt::ab::agreement::Agreement::of(&[]),
                }
                .name();
                not_measured = Some(format!(
                    "the judge {name} is not measured ({why}); its pick is not counted"
                ));
                judge = None;
                break;
            }
        }
    }
    let ab = AbRecord {
        pick_id: format!("pick-{}", champion_answer.job_id),
        template_id: arms.template.clone(),
        champion: arms.champion.clone(),
        challenger: arms.challenger.clone(),
        prompt: args.prompt.clone(),
        champion_answer: champion_answer.message.clone(),
        challenger_answer: challenger_answer.message.clone(),
        shuffle,
        human: human.map(|l| shuffle.role_of(l)),
        judge: judge.clone(),
        origin: "manual",
        jurors: if not_measured.is_some() {
            vec![]
        } else {
            jurors
        },
    };
    let recorded = record(&store, &BlobStore::in_home(&ctx.home), &ab)
        .await
        .map_err(|e| CliError::env(anyhow!("record the A/B: {e}")))?;
    let arm = |row: Option<skillforge_store::bandit::ArmRow>| {
        row.map_or(Arm::PRIOR, |r| Arm {
            alpha: r.alpha,
            beta: r.beta,
            pulls: u64::try_from(r.pulls).unwrap_or(0),
        })
    };
    let challenger_arm = arm(get_arm(store.pool(), &arms.template, &arms.challenger).await?);
    let champion_arm = arm(get_arm(store.pool(), &arms.template, &arms.champion).await?);
    let confidence =
        Confidence::compute(challenger_arm, champion_arm, args.draws, seed ^ MC_SEED_XOR);
    // Issue 34 items 10, 13: the PACE wealth beside the posterior, when the gate is on.
    let pace = match ctx.config.skillopt.pace() {
        Some(pace) => {
            let picks = skillforge_store::gates::pick_sequence(
                store.pool(),
                &arms.challenger,
                &arms.champion,
            )
            .await?;
            Some(
                pace.run(
                    picks
                        .into_iter()
                        .map(|won| if won { Pair::Win } else { Pair::Loss }),
                ),
            )
        }
        None => None,
    };
    let notes = Notes {
        judge_skipped: judge_note.as_deref(),
        pick_skipped: skipped,
        pace: pace.as_ref(),
        judge_not_measured: not_measured.as_deref(),
        judge_no_winner: judge_no_winner.as_deref(),
    };
    print_outcome(ctx, &arms, &ab, recorded, &confidence, notes);
    Ok(OK)
}

/// The judge or jury verdict as a blind label (`Ok(None)`: no readable pick), or the
/// self-family skip message. With `judge_only` (no human pick to record) a judge that cannot run
/// for an environment reason (a runtime not logged in) is the command's error, exit 3.
#[expect(
    clippy::too_many_arguments,
    reason = "the A/B's shown options and its nonce, read once"
)]
async fn run_judges(
    ctx: &Context,
    backend: &Arc<dyn QueueBackend>,
    families: &[String],
    prompt: &str,
    option_a: &str,
    option_b: &str,
    nonce: &str,
    judge_only: bool,
    judge_model: Option<&str>,
) -> Result<Result<JudgeOutcome, String>, CliError> {
    let s = &ctx.config.skillopt;
    let jury = JuryConfig {
        size: s.mode_b_jury_size.unwrap_or(1),
        disagreement_tau: s.mode_b_jury_disagreement_tau.unwrap_or(0.0),
        veto_dimensions: s
            .mode_b_jury_veto_dimensions
            .as_deref()
            .map(JuryConfig::parse_dimensions)
            .unwrap_or_default(),
        veto_floor: s.mode_b_jury_veto_floor.unwrap_or(0.0),
    };
    let available = skillforge_skillopt::harvest::available_reviewers(
        &s.harvest_config(&ctx.home).map_err(CliError::usage)?,
    );
    let wanted = if jury.is_jury() {
        jury.size as usize
    } else {
        1
    };
    let judges = match select_judges(families, &available, wanted) {
        JudgeSelection::Judges(j) => j,
        JudgeSelection::SelfFamily(message) => return Ok(Err(message)),
    };
    let mut verdicts: Vec<Verdict> = Vec::new();
    let mut jurors: Vec<(String, String, Option<Label>)> = Vec::new();
    for (idx, (runtime, _)) in judges.iter().enumerate() {
        let call = AgentCall {
            stages: &skillforge_skillopt::AB_SOURCE,
            stage: "judge",
            runtime,
            prompt: judge_prompt(prompt, option_a, option_b),
            key: format!("ab:{nonce}:judge:{idx}:{runtime}"),
            template_version: None,
            model: judge_model.map(str::to_owned),
        };
        // A judge that ran and gave no usable answer is an unreadable verdict, never a failed
        // A/B: the human pick is still recorded (S-78: the judge result is dropped, no error).
        match call_agent(ctx, backend, call).await {
            Ok(answer) => {
                let verdict = parse_verdict(&answer.message);
                // Named by the model asked for, so `eval forge --judge-model` finds its
                // measurement; else by what the transcript reports.
                jurors.push((
                    runtime.clone(),
                    judge_model
                        .map(str::to_owned)
                        .or(answer.model)
                        .unwrap_or_default(),
                    judge_pick(&verdict),
                ));
                verdicts.push(verdict);
            }
            // A judge that cannot run (not installed, not logged in, its API unreachable) is an
            // error, never a dropped verdict (issue 35 item 7): nothing is recorded yet.
            Err(e) if e.code == crate::exit::ENVIRONMENT => {
                return Err(CliError::env(anyhow!(
                    "the judge `{runtime}` cannot run ({:#}); nothing was recorded: fix it \
                     (`skillforge doctor` says what each runtime lacks), or pick without the judge \
                     (drop --judge{})",
                    e.error,
                    if judge_only { "-only" } else { "" }
                )));
            }
            Err(e) => {
                eprintln!(
                    "judge {runtime} gave no answer ({:#}); its verdict is dropped",
                    e.error
                );
                verdicts.push(Verdict::Unreadable);
            }
        }
    }
    // Resolutions 11: fewer than two jurors convened ⇒ the single judge.
    if jury.is_jury() && verdicts.len() >= 2 {
        let outcome = aggregate(&verdicts, &jury);
        let why = format!(
            "jury of {}: votes a {} / b {}, abstained {}{}{}",
            verdicts.len(),
            outcome.votes.0,
            outcome.votes.1,
            outcome.abstained,
            if outcome.disagreement {
                ", disagreement"
            } else {
                ""
            },
            outcome
                .vetoed
                .as_ref()
                .map(|(d, s)| format!(", vetoed on {d} = {s}"))
                .unwrap_or_default()
        );
        return Ok(Ok((outcome.pick, why, jurors)));
    }
    let why = match &verdicts[0] {
        Verdict::Parsed { reasoning, .. } => reasoning.clone(),
        _ => String::new(),
    };
    Ok(Ok((judge_pick(&verdicts[0]), why, jurors)))
}

/// A judge or jury's blind pick (`None`: no readable one), its reasoning, and each juror's own
/// (runtime, model, blind pick).
type JudgeOutcome = (Option<Label>, String, Vec<(String, String, Option<Label>)>);

/// What an A/B did not do, for its output.
struct Notes<'a> {
    /// Why the judge was skipped (no other family).
    judge_skipped: Option<&'a str>,
    /// The human skipped the pick at the prompt.
    pick_skipped: bool,
    /// The PACE gate over the picks so far (`pace_enabled` on).
    pace: Option<&'a PaceReport>,
    /// Why a `--judge-only` pick was not counted (the measured-judge gate).
    judge_not_measured: Option<&'a str>,
    /// The judge (or jury) ran and named no winner: a tie, a split, an unreadable verdict.
    judge_no_winner: Option<&'a str>,
}

fn print_outcome(
    ctx: &Context,
    arms: &Arms,
    ab: &AbRecord,
    recorded: skillforge_skillopt::ab::record::Recorded,
    c: &Confidence,
    notes: Notes<'_>,
) {
    let judge_note = notes.judge_skipped;
    if ctx.json {
        let mut out = json!({
            "template": arms.template,
            "champion": arms.champion,
            "challenger": arms.challenger,
            "pick_id": ab.pick_id,
            "challenger_label": ab.shuffle.label_of(Role::Challenger),
            "human_winner": ab.human,
            "judge_winner": ab.judge.as_ref().map(|(r, _)| r),
            "judge_skipped": judge_note,
            "pick_skipped": notes.pick_skipped,
            "arms_moved": recorded.arms_moved,
            "confidence": c,
            "summary": c.summary(),
        });
        if let Some(pace) = notes.pace {
            out["pace"] = json!(pace);
        }
        // only when a judge ran and named no winner
        if let Some(why) = notes.judge_no_winner {
            out["judge_no_winner"] = json!(why);
        }
        // only with the measured-judge gate on and a judge that did not pass it (issue 34 item 12)
        if let Some(why) = notes.judge_not_measured {
            out["judge_not_measured"] = json!(why);
        }
        print_json(&out);
        return;
    }
    let fmt_ci = |ci: Option<(f64, f64)>| {
        ci.map_or_else(
            || "n/a".to_owned(),
            |(lo, hi)| format!("[{lo:.3}, {hi:.3}]"),
        )
    };
    if notes.pick_skipped {
        println!("skipped: no human pick recorded, the bandit is unchanged");
    }
    if let Some(winner) = ab.human {
        // The winner by role and version, then which option each was (a new user read "champion
        // wins (v4 was Option A)" as v4 winning).
        let version = match winner {
            Role::Champion => &arms.champion,
            Role::Challenger => &arms.challenger,
        };
        let label = |role: Role| ab.shuffle.label_of(role).as_str().to_uppercase();
        println!(
            "recorded: {} wins, {version} (the champion {} was Option {}, the challenger {} was Option {})",
            winner.as_str(),
            arms.champion,
            label(Role::Champion),
            arms.challenger,
            label(Role::Challenger)
        );
    }
    if let Some((winner, _)) = &ab.judge {
        println!(
            "judge: {} wins (evidence only; the bandit is unchanged by it)",
            winner.as_str()
        );
    }
    if let Some(why) = notes.judge_not_measured {
        println!("judge: {why}");
    }
    if let Some(why) = notes.judge_no_winner {
        println!("judge: {why}; nothing recorded for the judge");
    }
    // Issue 34 item 13: the posterior with each arm's credible interval. The anytime-valid gate's
    // wealth (PACE, issue 34 item 10) is printed on its own line right after this one.
    println!(
        "posterior P(challenger > champion): {} (exact {}); challenger Beta({}, {}) 95% credible interval {}, champion Beta({}, {}) 95% credible interval {}",
        c.summary(),
        c.p_exact
            .map_or_else(|| "n/a".to_owned(), |p| format!("{p:.4}")),
        c.challenger.alpha,
        c.challenger.beta,
        fmt_ci(c.challenger_ci95),
        c.champion.alpha,
        c.champion.beta,
        fmt_ci(c.champion_ci95),
    );
    println!("(a posterior probability from the Beta-Bernoulli arms, not a p-value)");
    if let Some(pace) = notes.pace {
        println!(
            "{} (anytime-valid gate over the picks; promotion needs a commit)",
            pace.reason
        );
    }
}
