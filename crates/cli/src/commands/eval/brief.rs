//! `eval brief --check F` validates a brief; `eval brief --knowledge-gap --draft D --out F`
//! writes a knowledge-gap brief from a drafted theme only when the user's rules appear in
//! neither its prompt nor its fixtures (E-02) and its verify passes the good example and fails
//! the bad one (E-01) — run for real, in a scratch work dir, as an arm's verify is.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::anyhow;
use clap::Args;
use skillforge_runner_process::{ProcessPayload, run_process};
use skillforge_workflows::evalloop::brief::{Brief, FINAL_ENV, KnowledgeGapDraft, check_rules_absent, check_self_test};
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::exit::{CliError, CliResult, OK};

/// Arguments of `eval brief`.
#[derive(Debug, Args)]
pub struct BriefArgs {
    /// Validate this brief and exit.
    #[arg(long, value_name = "FILE", conflicts_with = "knowledge_gap")]
    check: Option<PathBuf>,
    /// Build a knowledge-gap brief from `--draft`.
    #[arg(long = "knowledge-gap", requires_all = ["draft", "out"])]
    knowledge_gap: bool,
    /// The drafted theme: {brief, rules, good_example, bad_example}.
    #[arg(long, value_name = "FILE")]
    draft: Option<PathBuf>,
    /// Where to write the brief.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// Runs the brief's verify on `example` as the deliverable; true when it exits 0.
async fn verify_passes(brief: &Brief, example: &str) -> Result<bool, CliError> {
    let dir = tempfile::tempdir().map_err(|e| CliError::env(anyhow!("scratch dir: {e}")))?;
    for (rel, text) in &brief.setup {
        let p = dir.path().join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| CliError::env(anyhow!(e)))?;
        }
        std::fs::write(&p, text).map_err(|e| CliError::env(anyhow!(e)))?;
    }
    let final_path = dir.path().join(".forge-final.txt");
    std::fs::write(&final_path, example).map_err(|e| CliError::env(anyhow!(e)))?;
    if !brief.is_reply() {
        let out = dir.path().join(&brief.output);
        if let Some(parent) = out.parent() {
            std::fs::create_dir_all(parent).map_err(|e| CliError::env(anyhow!(e)))?;
        }
        std::fs::write(out, example).map_err(|e| CliError::env(anyhow!(e)))?;
    }
    let mut payload = ProcessPayload::shell(brief.verify.clone());
    payload.cwd = Some(dir.path().to_path_buf());
    payload.env.insert(FINAL_ENV.to_owned(), final_path.display().to_string());
    let outcome = run_process(&payload, Duration::from_secs(120), &CancellationToken::new()).await.map_err(|e| CliError::env(anyhow!("run verify: {e}")))?;
    Ok(outcome.exit.is_passed())
}

fn read(path: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(path).map_err(|e| CliError::usage(anyhow!("read `{}`: {e}", path.display())))
}

/// Runs `eval brief`.
pub async fn run(_ctx: &Context, args: BriefArgs) -> CliResult {
    if let Some(path) = &args.check {
        let brief = Brief::parse(&read(path)?, &path.display().to_string()).map_err(CliError::usage)?;
        println!("brief `{}` is valid ({} setup files, output {})", brief.id, brief.setup.len(), brief.output);
        return Ok(OK);
    }
    let (Some(draft_path), Some(out)) = (&args.draft, &args.out) else {
        return Err(CliError::usage(anyhow!("give --check FILE, or --knowledge-gap --draft FILE --out FILE")));
    };
    let file = draft_path.display().to_string();
    let text = read(draft_path)?;
    skillforge_contract::limits::check_json(&text).map_err(|e| CliError::usage(anyhow!("invalid draft `{file}`: the document {e}")))?;
    let draft: KnowledgeGapDraft = serde_json::from_str(&text).map_err(|e| CliError::usage(anyhow!("invalid draft `{file}`: {e}")))?;
    draft.brief.validate(&file).map_err(CliError::usage)?;
    check_rules_absent(&draft).map_err(CliError::usage)?;
    let good = verify_passes(&draft.brief, &draft.good_example).await?;
    let bad = verify_passes(&draft.brief, &draft.bad_example).await?;
    check_self_test(good, bad).map_err(CliError::usage)?;
    let text = serde_json::to_string_pretty(&draft.brief).map_err(|e| CliError::env(anyhow!(e)))?;
    std::fs::write(out, format!("{text}\n")).map_err(|e| CliError::env(anyhow!("write `{}`: {e}", out.display())))?;
    println!("brief `{}` written to {} (verify passes the good example and fails the bad one)", draft.brief.id, out.display());
    Ok(OK)
}
