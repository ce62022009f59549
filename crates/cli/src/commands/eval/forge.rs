//! `eval forge (--brief F | --mode corrections --theme T) --skill-dir D [--samples N] [--rival P]
//! [--runner local|container [--image IMG] [--environment docker] [--container-host H]
//! [--no-network]] [--dry-run]`.

use std::path::PathBuf;

use anyhow::anyhow;
use clap::Args;
use skillforge_evalloop::arm_runner::{ArmRunner, ContainerArms, check_local_only};
use skillforge_evalloop::brief::Brief;
use skillforge_evalloop::credentials::preflight;
use skillforge_evalloop::forge::{DEFAULT_SAMPLES, ForgeEnv, ForgeError, ForgeRequest, run_forge};
use skillforge_evalloop::gate::Decision;
use skillforge_evalloop::install::InstallTarget;
use skillforge_evalloop::layout::eval_root;
use skillforge_evalloop::ledger::Versions;
use skillforge_evalloop::stages::EvalStages;

use crate::ci_output::{self, Case, CiArgs, CiRun, Finished, Outcome, Suite};
use crate::context::Context;
use crate::control::waiter::CliJobs;
use crate::exit::{CHECK_FAILED, CliError, CliResult, OK};
use crate::output::print_json;

/// Arguments of `eval forge`.
#[derive(Debug, Args)]
#[command(group(
    clap::ArgGroup::new("candidate")
        .required(true)
        .args(["skill_dir", "skill_version"])
))]
pub struct ForgeArgs {
    /// The brief (JSON: id, prompt, setup, verify, rubric, output).
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "theme",
        conflicts_with = "theme"
    )]
    brief: Option<PathBuf>,
    /// `brief` (run `--brief`) or `corrections`: a model drafts a knowledge-gap brief from the correction theme `--theme` (written to `<home>/eval/briefs/<id>.json` only when its verify passes a good example and fails a bad one, and no rule of the theme leaks into its prompt or fixtures), then the forge runs it. `eval theme --skill-dir D --out T` mines that theme from real sessions; its signature rides onto the adoption's ledger row.
    #[arg(long, default_value = "brief", value_parser = ["brief", "corrections"])]
    mode: String,
    /// With `--mode corrections`: the correction theme {name, rules, corrections}.
    #[arg(long, value_name = "FILE")]
    theme: Option<PathBuf>,
    /// The candidate skill's directory (holds SKILL.md).
    #[arg(
        long = "skill-dir",
        value_name = "DIR",
        conflicts_with = "skill_version"
    )]
    skill_dir: Option<PathBuf>,
    /// The candidate as an installed template version instead of a directory (`ID`, `ID@vN`,
    /// `ID@latest`; e.g. a pending candidate a train session made): its SKILL.md is written to
    /// `<home>/eval/versions/ID@vN/NAME/` and forged from there. A version holds the SKILL.md
    /// only: a skill with other files is forged with `--skill-dir`.
    #[arg(long = "skill-version", value_name = "REF")]
    skill_version: Option<String>,
    /// Samples per arm.
    #[arg(long, default_value_t = DEFAULT_SAMPLES)]
    samples: u32,
    /// Install this incumbent skill in the baseline arm (a head-to-head).
    #[arg(long, value_name = "DIR", conflicts_with = "rival_version")]
    rival: Option<PathBuf>,
    /// The incumbent as an installed template version (`ID`, `ID@vN`): e.g. `--skill-version
    /// my-skill@v2 --rival-version my-skill` forges a train candidate against the current version.
    #[arg(long = "rival-version", value_name = "REF")]
    rival_version: Option<String>,
    /// Where arms run: `local` (work dirs on this machine) or `container` (one container per arm on a local engine, the skill handed to the with-arm's container only).
    #[arg(long, default_value = "local", value_parser = ["local", "container"])]
    runner: String,
    /// Container arms: the image holding the agent CLI and /bin/sh.
    #[arg(long, value_name = "IMAGE")]
    image: Option<String>,
    /// Container arms: the environment; only `docker` (a local Docker or podman engine). Cloud providers (daytona, modal, blaxel, …) are refused: the arm's credential would ship to them.
    #[arg(long, default_value = "docker")]
    environment: String,
    /// Container arms: the engine (a unix socket or a loopback tcp:// address); default the worker's DOCKER_HOST.
    #[arg(long = "container-host", value_name = "HOST")]
    container_host: Option<String>,
    /// Container arms: no network (the agent cannot reach a model API; for offline agents).
    #[arg(long = "no-network")]
    no_network: bool,
    /// Agent runtime of the arms (`claude`, `codex`, `opencode`, `scripted`), else `FORGE_AGENT`;
    /// none is assumed.
    #[arg(long, env = "FORGE_AGENT")]
    runtime: Option<String>,
    /// Agent runtime of the blind judge; default the arms' runtime.
    #[arg(long = "judge-runtime")]
    judge_runtime: Option<String>,
    /// Model for the arms (and the judge, when it runs on the arms' runtime and `--judge-model` is not given).
    #[arg(long)]
    model: Option<String>,
    /// Model for the blind judge; default `--model` when the judge runs on the arms' runtime, else the judge runtime's `cheap` tier.
    #[arg(long = "judge-model")]
    judge_model: Option<String>,
    /// Stop before any eval spend: print the plan, run nothing.
    #[arg(long = "dry-run")]
    dry_run: bool,
    /// Forge the brief anew: its earlier forge (samples, verdicts, reports) moves to
    /// `<home>/eval/archive/` and is neither read back nor pooled; its ledger row stays. A forge
    /// that stopped on a setup fault (an arm never ran, an API error) is forged anew without it.
    #[arg(long)]
    fresh: bool,
    /// Stage adoptions here instead of installing them.
    #[arg(long = "adopt-dir", env = "FORGE_ADOPT_DIR", value_name = "DIR")]
    adopt_dir: Option<PathBuf>,
    /// Install root adoptions are symlinked into, e.g. `~/.claude/skills` (Claude Code), `~/.agents/skills` (Codex), `~/.config/opencode/skills` (OpenCode); default `[eval] install_root`, else none: the adoption is kept in the home and `skillforge eval deploy` installs it later.
    #[arg(long = "install-root", value_name = "DIR")]
    install_root: Option<PathBuf>,
    /// Decide with PACE, the anytime-valid betting gate, over every forge of this skill so far
    /// with the same skill content, baseline, arms and judge (with-arm wins against without-arm wins; commit ⇒ ADOPT, 200 discordant samples spent ⇒
    /// REJECT, else UNDECIDED: forge it again on another brief). Off: the majority gate alone.
    #[arg(long)]
    pace: bool,
    /// Allow PROBATION on a clean tie (needs --failure-rate).
    #[arg(long, requires = "failure_rate")]
    probation: bool,
    /// The production failure rate the probation claim rests on, in [0,1].
    #[arg(long = "failure-rate", value_name = "R")]
    failure_rate: Option<f64>,
    #[command(flatten)]
    ci: CiArgs,
}

/// The arms' runner from `--runner` and the container flags (E-13: a local engine only).
fn arm_runner(args: &ForgeArgs) -> Result<ArmRunner, CliError> {
    if args.runner == "local" {
        if args.image.is_some()
            || args.container_host.is_some()
            || args.no_network
            || args.environment != "docker"
        {
            return Err(CliError::usage(anyhow!(
                "--image, --environment, --container-host and --no-network need --runner container"
            )));
        }
        return Ok(ArmRunner::Local);
    }
    let host = args
        .container_host
        .clone()
        .or_else(|| std::env::var("DOCKER_HOST").ok().filter(|h| !h.is_empty()));
    check_local_only(&args.environment, host.as_deref())
        .map_err(|e| CliError::usage(anyhow!("--runner container: {e}")))?;
    let image = args
        .image
        .clone()
        .filter(|i| !i.trim().is_empty())
        .ok_or_else(|| {
            CliError::usage(anyhow!(
                "--runner container needs --image IMAGE: the image holding the agent CLI"
            ))
        })?;
    Ok(ArmRunner::Container(ContainerArms {
        image,
        host: args.container_host.clone(),
        network: !args.no_network,
    }))
}

/// Writes the SKILL.md of the installed version `reference` to
/// `<home>/eval/versions/<ID@vN>/<name>/SKILL.md` (its frontmatter `name`, else the template id:
/// Agent Skills wants the directory named as the skill) and returns that directory and the
/// version's id (`ID@vN`). The file is
/// written once per version (atomically) and left as it is when it already holds the content.
///
/// # Errors
/// Exit 2 for a reference that does not resolve; exit 3 when the file cannot be written.
async fn version_dir(ctx: &Context, reference: &str) -> Result<(PathBuf, String), CliError> {
    let store = ctx.store().await?;
    let version = crate::control::templates::resolve_reference(store.pool(), reference).await?;
    let name = skillforge_contract::frontmatter_name(&version.content)
        .unwrap_or_else(|| version.template_id.clone());
    let dir = eval_root(&ctx.home)
        .join("versions")
        .join(&version.id)
        .join(&name);
    let file = dir.join("SKILL.md");
    if std::fs::read_to_string(&file).ok().as_deref() != Some(version.content.as_str()) {
        skillforge_stage::fs::write_atomic(&file, version.content.as_bytes())
            .map_err(|e| CliError::env(anyhow!("write `{}`: {e}", file.display())))?;
    }
    if !ctx.json {
        eprintln!(
            "• {} ({}): its SKILL.md is at {}",
            version.id,
            version.state,
            file.display()
        );
    }
    Ok((dir, version.id))
}

/// How to install an adoption kept in the home only: `eval deploy` for the arms' runtime when it
/// reads user-level skills, or the flag and the key that install at forge time.
fn deploy_hint(runtime: &str) -> String {
    let deploy = if skillforge_evalloop::install::USER_SKILL_RUNTIMES.contains(&runtime) {
        format!(
            "`skillforge eval deploy --runtime {runtime}` installs it where {runtime} reads your skills"
        )
    } else {
        "`skillforge eval deploy --runtime claude` (or codex, opencode) installs it where that agent reads your skills".to_owned()
    };
    format!(
        "{deploy}; to install at adoption, give --install-root DIR or set `[eval] install_root` in config.toml"
    )
}

/// Runs `eval forge` (one JUnit testcase per sample and one for the gate with `--junit`,
/// annotations with `--format github`).
///
/// # Errors
/// Exit 2 when no arm runtime is given (`--runtime` or `FORGE_AGENT`; none is assumed), for bad
/// flags or a bad brief; exit 3 for the environment (credentials, queue, store).
pub async fn run(ctx: &Context, args: ForgeArgs) -> CliResult {
    let ci = CiRun::start(args.ci.clone(), "eval forge", ctx.json)?;
    ci.finish(forge(ctx, args).await)
}

async fn forge(ctx: &Context, mut args: ForgeArgs) -> Result<Finished, CliError> {
    let runtime = super::brief::require_runtime(
        args.runtime.take(),
        "the arms (and, unless --judge-runtime is given, the judge)",
    )?;
    skillforge_runner_agent::find(&runtime)
        .map_err(|e| CliError::usage(anyhow!("--runtime: {e}")))?;
    let runner = arm_runner(&args)?;
    if args.samples == 0 {
        return Err(CliError::usage(anyhow!("--samples must be at least 1")));
    }
    if let Some(r) = args.failure_rate
        && !(0.0..=1.0).contains(&r)
    {
        return Err(CliError::usage(anyhow!(
            "--failure-rate {r} is not in [0,1]"
        )));
    }
    let brief_file = match (args.mode.as_str(), &args.brief, &args.theme) {
        ("brief", Some(path), None) => Some(path.clone()),
        ("corrections", None, Some(_)) => None,
        ("corrections", _, _) => {
            return Err(CliError::usage(anyhow!(
                "--mode corrections drafts the brief: give --theme FILE, not --brief"
            )));
        }
        _ => return Err(CliError::usage(anyhow!("--theme needs --mode corrections"))),
    };
    let brief = match &brief_file {
        Some(path) => {
            let file = path.display().to_string();
            let text = std::fs::read_to_string(path)
                .map_err(|e| CliError::usage(anyhow!("read brief `{file}`: {e}")))?;
            Some(Brief::parse(&text, &file).map_err(CliError::usage)?)
        }
        None => None,
    };
    let absolute = |p: PathBuf| std::path::absolute(&p).unwrap_or(p);
    let install = match (args.adopt_dir, args.install_root) {
        (Some(dir), _) => InstallTarget::Stage(absolute(dir)),
        (None, Some(root)) => InstallTarget::Root(absolute(root)),
        // Issue 35 item 7: with neither flag, only where `[eval] install_root` says; unset, the
        // adoption is kept in the home and linked nowhere (`eval deploy` installs it later,
        // where each runtime reads the user's skills).
        (None, None) => {
            let user_home = std::env::var_os("HOME").map(PathBuf::from);
            match ctx.config.eval.install_root(user_home.as_deref())? {
                Some(root) => InstallTarget::Root(root),
                None => InstallTarget::Roots(Vec::new()),
            }
        }
    };
    if !args.dry_run {
        let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
        let user_home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default();
        let now_ms = chrono::Utc::now().timestamp_millis();
        for runtime in [&runtime, args.judge_runtime.as_ref().unwrap_or(&runtime)] {
            preflight(runtime, &env, &user_home, now_ms).map_err(|e| {
                CliError::env(anyhow!(
                    "credential check for runtime `{runtime}` (no arm started): {e}"
                ))
            })?;
        }
        // The model APIs, as `doctor` checks them: an unreachable one stops the forge at once
        // (exit 3) rather than each arm after the runtime's own retries.
        let judge = args.judge_runtime.as_deref().unwrap_or(&runtime);
        crate::control::model_api::check_reachable(&[&runtime, judge])
            .await
            .map_err(|e| CliError::env(anyhow!(e)))?;
    } else {
        // A dry run spends nothing but says what would stop the real one.
        let judge = args.judge_runtime.as_deref().unwrap_or(&runtime);
        for problem in crate::control::model_api::readiness_problems(&[&runtime, judge]).await {
            eprintln!("warning: the forge would stop before any arm: {problem}");
        }
    }
    let mut signature = None;
    // Where a drafted brief was written: an undecided forge of it is edited and forged from there.
    let mut drafted_to: Option<PathBuf> = None;
    let brief = match (brief, &args.theme) {
        (Some(brief), _) => brief,
        (None, Some(theme)) if args.dry_run => {
            let why = format!(
                "dry run: would draft a knowledge-gap brief from theme `{}` on runtime `{}`, then run {} samples × 2 arms ({} runner); nothing ran",
                theme.display(),
                runtime,
                args.samples,
                runner.as_str()
            );
            if ctx.json {
                print_json(&serde_json::json!({"skipped": why}));
            } else {
                println!("{why}");
            }
            let mut suite =
                Suite::new(format!("skillforge eval forge --theme {}", theme.display()));
            suite.cases.push(Case::new(
                "skillforge.eval.forge",
                "forge",
                Outcome::Skipped { reason: why },
            ));
            return Ok(Finished { code: OK, suite });
        }
        (None, Some(theme)) => {
            let (draft, file, mined) =
                super::brief::draft_from_theme(ctx, theme, &runtime, args.model.as_deref()).await?;
            signature = mined.signature;
            let out = eval_root(&ctx.home)
                .join("briefs")
                .join(format!("{}.json", draft.brief.id));
            let brief = super::brief::check_and_write(&draft, &file, &out).await?;
            eprintln!(
                "• brief `{}` drafted from `{}` and written to {}",
                brief.id,
                theme.display(),
                out.display()
            );
            drafted_to = Some(out);
            brief
        }
        (None, None) => {
            return Err(CliError::usage(anyhow!(
                "give --brief FILE or --mode corrections --theme FILE"
            )));
        }
    };
    let stages =
        EvalStages::for_home(&ctx.home).map_err(|e| CliError::usage(anyhow!(e.to_string())))?;
    let judge_flag = if args.judge_runtime.is_some() {
        "--judge-runtime"
    } else {
        "--runtime"
    };
    let judge_runtime = args.judge_runtime.unwrap_or_else(|| runtime.clone());
    let judge_model = match (args.judge_model, &args.model) {
        (Some(model), _) => model,
        (None, Some(model)) if judge_runtime == runtime => model.clone(),
        _ => skillforge_runner_agent::find(&judge_runtime)
            .and_then(|p| p.model_for_tier("cheap").map(str::to_owned))
            .map_err(|e| CliError::usage(anyhow!("{judge_flag}: {e}")))?,
    };
    // Issue 34 item 12: with the measured-judge gate on, the forge's verdict counts only from a
    // judge measured against the humans' A/B picks (same runtime and model).
    let judge_unmeasured = match crate::commands::judge::gate(ctx)? {
        Some(gate) => crate::commands::judge::measured(ctx, gate, &judge_runtime, &judge_model)
            .await?
            .err()
            .map(|why| {
                format!(
                    "the judge {} is not measured ({why})",
                    skillforge_skillopt::ab::agreement::judge_name(&judge_runtime, &judge_model)
                )
            }),
        None => None,
    };
    if let Some(why) = &judge_unmeasured
        && !args.dry_run
    {
        eprintln!("• {why}: its verdict will not be applied (`[skillopt] judge_kappa_floor`)");
    }
    let (skill_dir, candidate_version) = match (args.skill_dir, &args.skill_version) {
        (Some(dir), _) => (absolute(dir), None),
        (None, Some(reference)) => {
            let (dir, id) = version_dir(ctx, reference).await?;
            (dir, Some(id))
        }
        (None, None) => {
            return Err(CliError::usage(anyhow!(
                "give --skill-dir DIR or --skill-version ID@vN"
            )));
        }
    };
    let (rival, rival_version) = match (args.rival, &args.rival_version) {
        (Some(dir), _) => (Some(absolute(dir)), None),
        (None, Some(reference)) => {
            let (dir, id) = version_dir(ctx, reference).await?;
            (Some(dir), Some(id))
        }
        (None, None) => (None, None),
    };
    // A forge of versions names them (the candidate's, and the rival's when it is one).
    let versions = candidate_version.map(|candidate| Versions {
        candidate,
        rival: rival_version,
    });
    let req = ForgeRequest {
        judge_unmeasured,
        brief,
        skill_dir,
        samples: args.samples,
        rival,
        judge_runtime,
        judge_model: Some(judge_model),
        runtime,
        runner,
        model: args.model,
        dry_run: args.dry_run,
        fresh: args.fresh,
        install,
        probation_failure_rate: if args.probation {
            args.failure_rate
        } else {
            None
        },
        pace: args.pace.then(skillforge_contract::pace::Pace::default),
        signature,
        versions,
    };
    let store = ctx.store().await?;
    let queue = ctx.queue().await?;
    let jobs = CliJobs::new(ctx, queue.clone(), store.clone());
    let env = ForgeEnv {
        queue: &queue,
        store: &store,
        home: &ctx.home,
        stages: &stages,
        jobs: &jobs,
        reporter: &crate::output::StderrProgress {
            prefix: "• ",
            quiet: false,
        },
    };
    let report = run_forge(&env, &req).await.map_err(|e| match e {
        ForgeError::Refused(m) => CliError::usage(anyhow!(m)),
        ForgeError::Environment(m) => CliError::env(anyhow!(m)),
    })?;
    if ctx.json {
        print_json(&report);
    } else {
        if let Some(why) = &report.skipped {
            println!("{why}");
        }
        if report.reused {
            println!(
                "this brief was already forged: the results below are that forge's, read again (nothing ran); \
                 to forge it anew, add --fresh (the earlier forge is kept in the home's eval/archive) or give the brief a new id"
            );
        }
        for v in &report.samples {
            if let Some(code) = v.invalid_code {
                println!("sample {}: {}", v.sample, code.line(&v.reason));
                continue;
            }
            let what = match (v.invalid_code, v.winner) {
                (Some(code), _) => format!("invalid: {}", code.words()),
                (None, Some(w)) => format!(
                    "winner: {}",
                    serde_json::to_value(w)
                        .ok()
                        .and_then(|x| x.as_str().map(str::to_owned))
                        .unwrap_or_default()
                ),
                (None, None) => "pending".to_owned(),
            };
            println!("sample {}: {what} — {}", v.sample, v.reason);
        }
        if let Some(g) = &report.gate {
            for line in &g.lines {
                println!("{line}");
            }
        }
        if let Some(row) = &report.ledger_row {
            let when = if report.reused {
                format!(" (recorded {})", row.at.format("%Y-%m-%d %H:%M UTC"))
            } else {
                String::new()
            };
            match &row.versions {
                Some(v) => println!("ledger: {} {}{when}", row.decision, v.words()),
                None => println!("ledger: {} {}{when}", row.decision, row.skill),
            }
            if let Some(judge) = &row.judge {
                println!("decided by the judge {}", judge.words());
            }
            // Where the adoption went (the ledger row's record, also for a forge that had
            // already decided: a re-run installs nothing again).
            let installed = if report.reused {
                "installed then"
            } else {
                "installed"
            };
            let home_copies = eval_root(&ctx.home).join("installed");
            match row.installed.as_slice() {
                [] => println!("{installed}: nowhere ({} installs nothing)", row.decision),
                [copy] if copy.starts_with(&home_copies) => {
                    println!("{installed}: {} only (linked for no agent)", copy.display());
                    println!("next: {}", deploy_hint(&req.runtime));
                }
                paths => println!(
                    "{installed}: {}",
                    paths
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        }
        println!("evidence: {}", report.dir.display());
    }
    // A skill skipped as a loser (E-17) keeps its verdict: not a pass for CI.
    let rejected_before = report.skipped.is_some() && !req.dry_run;
    // A PACE gate that holds (more forges of the skill needed) is not decided yet (exit 4); an
    // undecided majority gate (fewer than two valid samples) stays a failure.
    let pace_holds = report
        .pace
        .as_ref()
        .is_some_and(|p| p.verdict == skillforge_contract::pace::Verdict::Continue);
    let code = match report.gate.as_ref().map(|g| g.decision) {
        None if rejected_before => CHECK_FAILED,
        None | Some(Decision::Adopt | Decision::Probation) => OK,
        Some(Decision::Undecided) if pace_holds => crate::exit::WAITING,
        Some(_) => CHECK_FAILED,
    };
    if let (Some(Decision::Undecided), Some(path), false) = (
        report.gate.as_ref().map(|g| g.decision),
        &drafted_to,
        ctx.json,
    ) {
        let path = crate::output::shell_word(path);
        println!(
            "the brief was drafted to {path}: edit it there (for the scripted judge, a `scripted: prefer TEXT` \
             line in its rubric) and forge it with `--brief {path} --fresh`; another `--theme` forge drafts it anew"
        );
    }
    if code == crate::exit::WAITING && !ctx.json {
        println!(
            "not decided yet: the sequential gate needs more evidence; forge this skill on another brief with --pace"
        );
    }
    Ok(Finished {
        code,
        suite: ci_output::forge::suite(&report),
    })
}
