//! `skillforge template add|list|show`: install agent templates and inspect their versions
//! (DESIGN §8; seed "Human Feedback Trial Happy Path" uses an installed `planner`).
//!
//! `template add FILE` parses and validates the frontmatter. A new id installs version 1 as
//! `current`. The seed does not say what adding an installed id does; we treat `template add` as
//! the operator's explicit install, so new content becomes the next version in state `current`
//! (the previous current is `superseded`), and content identical to the current version creates
//! nothing and says so. Candidates from an optimizer go through `import` and stay `pending` (S-51).

use std::path::PathBuf;

use anyhow::anyhow;
use clap::Subcommand;
use serde_json::{Value, json};
use skillforge_store::templates::{TemplateRow, VersionRow, list_templates, list_versions};

use crate::context::Context;
use crate::control::templates::{install, resolve_reference};
use crate::exit::{CliError, CliResult, OK};
use crate::output::print_json;

/// `skillforge template ...`.
#[derive(Debug, Subcommand)]
pub enum TemplateCommand {
    /// Install an agent template (Markdown with YAML frontmatter) or add a new current version of it.
    Add {
        /// The template file.
        file: PathBuf,
        /// Source repository to record (`owner/repo`); default `local`.
        #[arg(long)]
        repo: Option<String>,
    },
    /// List installed templates with their current and latest versions.
    List,
    /// Show one version: `ID` (current), `ID@vN`, or `ID@latest` (highest version not rejected).
    Show {
        /// `ID`, `ID@vN` or `ID@latest`.
        reference: String,
    },
}

/// Dispatches a `template` subcommand.
pub async fn run(ctx: &Context, cmd: TemplateCommand) -> CliResult {
    match cmd {
        TemplateCommand::Add { file, repo } => add(ctx, &file, repo.as_deref()).await,
        TemplateCommand::List => list(ctx).await,
        TemplateCommand::Show { reference } => show(ctx, &reference).await,
    }
}

async fn add(ctx: &Context, file: &std::path::Path, repo: Option<&str>) -> CliResult {
    let content = std::fs::read_to_string(file)
        .map_err(|e| CliError::usage(anyhow!("read template `{}`: {e}", file.display())))?;
    let store = ctx.store().await?;
    let installed = install(&store, &content, &file.display().to_string(), repo).await?;
    let version = &installed.version;
    if ctx.json {
        print_json(&json!({"template_id": version.template_id, "version_id": version.id, "created": installed.is_new}));
    } else if installed.is_new {
        println!("added {} (current)", version.id);
    } else {
        println!("{} unchanged: its current version {} has this content", version.template_id, version.id);
    }
    Ok(OK)
}

fn template_json(t: &TemplateRow, versions: &[VersionRow]) -> Value {
    json!({
        "id": t.id,
        "name": t.name,
        "description": t.description,
        "source_repo": t.source_repo,
        "current_version_id": t.current_version_id,
        "latest_version_id": t.latest_version_id,
        "versions": versions.iter().map(|v| json!({"id": v.id, "version": v.version, "state": v.state})).collect::<Vec<_>>(),
    })
}

async fn list(ctx: &Context) -> CliResult {
    let store = ctx.store().await?;
    let mut out = Vec::new();
    for t in list_templates(store.pool()).await? {
        let versions = list_versions(store.pool(), &t.id).await?;
        out.push((t, versions));
    }
    if ctx.json {
        print_json(&out.iter().map(|(t, v)| template_json(t, v)).collect::<Vec<_>>());
        return Ok(OK);
    }
    if out.is_empty() {
        eprintln!("no templates installed (add one with `skillforge template add FILE`)");
    }
    for (t, versions) in &out {
        println!(
            "{:<24} current {:<16} versions {:<3} {}",
            t.id,
            t.current_version_id.as_deref().unwrap_or("-"),
            versions.len(),
            t.name
        );
    }
    Ok(OK)
}

/// The training package's `TemplateSnapshot` shape (facts §1) plus times.
pub fn version_json(v: &VersionRow) -> Value {
    let metadata: Value = serde_json::from_str(&v.metadata_json).unwrap_or(Value::Null);
    json!({
        "id": v.template_id,
        "version_id": v.id,
        "version_number": v.version,
        "version_state": v.state,
        "content_hash": v.content_hash,
        "source_repo": v.source_repo,
        "source_ref": v.source_ref,
        "source_path": v.source_path,
        "resolved_commit": v.resolved_commit,
        "metadata": metadata,
        "content": v.content,
        "created_at": v.created_at,
        "promoted_at": v.promoted_at,
    })
}

async fn show(ctx: &Context, reference: &str) -> CliResult {
    let store = ctx.store().await?;
    let version = resolve_reference(store.pool(), reference).await?;
    if ctx.json {
        print_json(&version_json(&version));
        return Ok(OK);
    }
    println!("version   {} ({})", version.id, version.state);
    println!("name      {}", version.name);
    println!("hash      {}", version.content_hash);
    println!("source    {} {} {}", version.source_repo, version.source_ref, version.source_path);
    println!("created   {}", version.created_at);
    println!();
    print!("{}", version.content);
    Ok(OK)
}
