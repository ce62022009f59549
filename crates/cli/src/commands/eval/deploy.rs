//! `eval deploy [--to HOST] [--root DIR | --runtime R...] [--expect NAME=sha256:HEX]...
//! [SKILL_DIR...]` (seed: skill-eval-loop, "deploy.sh [--to host]"; E-40): copies skill trees —
//! the given ones, or every open adoption of the ledger — to an install root and verifies each
//! copy by digest. Without `--root` the trees go to the user-level skill directory of each
//! runtime (`--runtime`, default claude, codex and opencode: `~/.claude/skills`,
//! `~/.agents/skills`, `~/.config/opencode/skills`, [`user_skill_root`]; issue 31 item 8), so
//! each runtime lists the skill. With
//! `--to HOST` the trees travel through the queue's transfer area to the worker started with
//! `--label host=HOST`, which installs them with its own `eval deploy --expect` and checks the
//! digests there; the control plane then checks the digests it reports. Exit 0 when every tree
//! is installed and verified, 1 when one is refused (the others still install locally; a remote
//! deploy is one job), 2 for bad input, 3 for the environment.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::anyhow;
use clap::Args;
use skillforge_engine::JobState;
use skillforge_evalloop::deploy::{
    Deployed, check_remote_report, deploy_job, deploy_tree, skill_tree_name,
};
use skillforge_evalloop::install::{USER_SKILL_RUNTIMES, user_skill_root};
use skillforge_evalloop::layout::ledger_path;
use skillforge_evalloop::ledger::{open_entries, read_ledger};
use skillforge_evalloop::stages::EvalStages;
use skillforge_evalloop::steps::arm::copy_tree;
use skillforge_stage::StageJobs;

use crate::context::Context;
use crate::control::waiter::CliJobs;
use crate::exit::{CHECK_FAILED, CliError, CliResult, OK};
use crate::output::print_json;

/// Arguments of `eval deploy`.
#[derive(Debug, Args)]
pub struct DeployArgs {
    /// Install on another machine: the worker started with `--label host=HOST` receives the trees through the queue's transfer area, installs them and verifies each copy's digest there.
    #[arg(long, value_name = "HOST")]
    to: Option<String>,
    /// The install root (with `--to`: a path on HOST); default the user-level skill directory of each `--runtime` of the user that installs.
    #[arg(long, value_name = "DIR", conflicts_with = "runtime")]
    root: Option<PathBuf>,
    /// Install where this runtime reads user-level skills (repeatable; `claude`: ~/.claude/skills or $CLAUDE_CONFIG_DIR/skills, `codex`: ~/.agents/skills, `opencode`: ~/.config/opencode/skills or $XDG_CONFIG_HOME/opencode/skills); default all three.
    #[arg(long, value_name = "RUNTIME")]
    runtime: Vec<String>,
    /// The digest a tree must have, `NAME=sha256:HEX` (repeatable): a tree that differs is refused before anything is installed.
    #[arg(long, value_name = "NAME=DIGEST")]
    expect: Vec<String>,
    /// Skill trees (dirs holding SKILL.md); default every open adoption of the ledger (its installed copy).
    #[arg(value_name = "SKILL_DIR")]
    trees: Vec<PathBuf>,
}

/// `~/x` → `$HOME/x` (the install root is the installing user's).
fn expand_home(path: &Path) -> Result<PathBuf, CliError> {
    let home = || {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .ok_or_else(|| CliError::env(anyhow!("HOME is not set; pass --root DIR")))
    };
    match path.strip_prefix("~") {
        Ok(rest) => Ok(home()?.join(rest)),
        Err(_) => Ok(path.to_path_buf()),
    }
}

/// The trees asked for, or the ledger's open adoptions.
fn trees(ctx: &Context, given: &[PathBuf]) -> Result<Vec<PathBuf>, CliError> {
    if !given.is_empty() {
        return Ok(given.to_vec());
    }
    let ledger = ledger_path(&ctx.home);
    let rows = read_ledger(&ledger).map_err(|e| CliError::env(anyhow!(e)))?;
    let open: Vec<PathBuf> = open_entries(&rows)
        .into_iter()
        .filter_map(|r| r.installed.first().cloned())
        .collect();
    if open.is_empty() {
        return Err(CliError::usage(anyhow!(
            "nothing to deploy: no SKILL_DIR given and `{}` records no open adoption",
            ledger.display()
        )));
    }
    Ok(open)
}

/// Runs `eval deploy`.
pub async fn run(ctx: &Context, args: DeployArgs) -> CliResult {
    let trees = trees(ctx, &args.trees)?;
    let mut names = Vec::new();
    for tree in &trees {
        let name = skill_tree_name(tree).map_err(|e| CliError::usage(anyhow!(e)))?;
        if names.contains(&name) {
            return Err(CliError::usage(anyhow!(
                "two trees are named `{name}`: one would overwrite the other"
            )));
        }
        names.push(name);
    }
    let mut expect: BTreeMap<String, String> = BTreeMap::new();
    for e in &args.expect {
        let (name, digest) = e
            .split_once('=')
            .filter(|(_, d)| d.starts_with("sha256:"))
            .ok_or_else(|| CliError::usage(anyhow!("--expect `{e}`: give NAME=sha256:HEX")))?;
        if !names.iter().any(|n| n == name) {
            return Err(CliError::usage(anyhow!(
                "--expect `{e}`: no tree named `{name}` is deployed"
            )));
        }
        expect.insert(name.to_owned(), digest.to_owned());
    }
    match args.to {
        Some(host) => {
            if !expect.is_empty() {
                return Err(CliError::usage(anyhow!(
                    "--expect is for the installing side; with --to the digests are computed here and checked on `{host}`"
                )));
            }
            remote(ctx, &host, args.root.as_deref(), &args.runtime, &trees).await
        }
        None => {
            let roots = match &args.root {
                Some(root) => vec![expand_home(root)?],
                None => runtime_roots(&args.runtime)?,
            };
            local(ctx, &roots, &trees, &names, &expect)
        }
    }
}

/// The user-level skill directories of `runtimes` (all of [`USER_SKILL_RUNTIMES`] when empty)
/// for the user running this command (`HOME`, `CLAUDE_CONFIG_DIR`, `XDG_CONFIG_HOME`).
fn runtime_roots(runtimes: &[String]) -> Result<Vec<PathBuf>, CliError> {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .ok_or_else(|| CliError::env(anyhow!("HOME is not set; pass --root DIR")))?;
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let wanted: Vec<&str> = if runtimes.is_empty() {
        USER_SKILL_RUNTIMES.to_vec()
    } else {
        runtimes.iter().map(String::as_str).collect()
    };
    let mut roots: Vec<PathBuf> = Vec::new();
    for runtime in wanted {
        let root = user_skill_root(runtime, &home, &env)
            .map_err(|e| CliError::usage(anyhow!("--runtime: {e}")))?;
        if !roots.contains(&root) {
            roots.push(root);
        }
    }
    Ok(roots)
}

fn local(
    ctx: &Context,
    roots: &[PathBuf],
    trees: &[PathBuf],
    names: &[String],
    expect: &BTreeMap<String, String>,
) -> CliResult {
    let mut done: Vec<Deployed> = Vec::new();
    let mut failed = false;
    let each = roots.iter().flat_map(|root| {
        trees
            .iter()
            .zip(names)
            .map(move |(tree, name)| (root, tree, name))
    });
    for (root, tree, name) in each {
        match deploy_tree(tree, root, expect.get(name).map(String::as_str), copy_tree) {
            Ok(d) => {
                if !ctx.json {
                    println!("{} → {} {}", tree.display(), d.path.display(), d.digest);
                }
                done.push(d);
            }
            Err(e) => {
                eprintln!("error: {e}");
                failed = true;
            }
        }
    }
    if ctx.json {
        print_json(&done);
    }
    Ok(if failed { CHECK_FAILED } else { OK })
}

async fn remote(
    ctx: &Context,
    host: &str,
    root: Option<&Path>,
    runtimes: &[String],
    trees: &[PathBuf],
) -> CliResult {
    if host.is_empty() || host.contains(['/', '=', ',', ' ']) {
        return Err(CliError::usage(anyhow!(
            "--to `{host}` is not a host name (the `host=` label of a worker); for an install root on this machine use --root DIR"
        )));
    }
    let root = match root {
        Some(r) if !(r.is_absolute() || r.starts_with("~")) => {
            return Err(CliError::usage(anyhow!(
                "--root `{}` with --to must be absolute (or start with ~/) on `{host}`",
                r.display()
            )));
        }
        Some(r) => Some(
            r.to_str()
                .ok_or_else(|| CliError::usage(anyhow!("--root `{}` is not UTF-8", r.display())))?,
        ),
        None => None,
    };
    let queue = ctx.queue().await?;
    let area = queue.transfer_area().ok_or_else(|| {
        CliError::env(anyhow!(
            "the `{}` queue has no transfer area to carry the trees",
            queue.name()
        ))
    })?;
    let stages =
        EvalStages::for_home(&ctx.home).map_err(|e| CliError::usage(anyhow!(e.to_string())))?;
    let (spec, expected) = deploy_job(area.as_ref(), &stages.deploy, trees, host, root, runtimes)
        .await
        .map_err(|e| CliError::env(anyhow!("{e}")))?;
    let store = ctx.store().await?;
    // Never the in-process worker: it is this machine, not `host`.
    let jobs = CliJobs::new(ctx, queue.clone(), store).local_worker(false);
    let job_id = jobs
        .submit(&spec)
        .await
        .map_err(|e| CliError::env(anyhow!(e)))?
        .job_id;
    eprintln!(
        "• deploy job {job_id}: {} tree(s) for the worker labelled host={host}",
        expected.len()
    );
    let job = jobs.wait_one(&job_id).await?;
    let outcome = job.outcome.as_ref();
    if job.state != JobState::Succeeded {
        let why = job
            .error
            .clone()
            .or_else(|| {
                outcome.and_then(|o| {
                    o.stderr_tail
                        .lines()
                        .filter(|l| !l.trim().is_empty())
                        .map(str::to_owned)
                        .reduce(|a, b| format!("{a}\n{b}"))
                })
            })
            .unwrap_or_else(|| format!("job ended {}", job.state));
        eprintln!(
            "error: deploy job {job_id} on `{host}` ended {}: {why}",
            job.state
        );
        return Ok(CHECK_FAILED);
    }
    let report = match check_remote_report(
        outcome.map_or("", |o| o.stdout_tail.as_str()),
        &expected,
        host,
    ) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(CHECK_FAILED);
        }
    };
    if ctx.json {
        print_json(&report);
    } else {
        for d in &report {
            println!("{} → {host}:{} {}", d.skill, d.path.display(), d.digest);
        }
    }
    Ok(OK)
}
