//! `skillforge template add|list|show`: install agent templates and inspect their versions
//! (DESIGN §8; seed "Human Feedback Trial Happy Path" uses an installed `planner`).
//!
//! `template add PATH` reads a template file or a skill directory's `SKILL.md` and reports every
//! problem at once. A `SKILL.md` with only the Agent Skills frontmatter (`name`, `description`)
//! is a template: the skillforge fields it leaves out are derived with the defaults of
//! `skillforge_contract::derive_missing`, listed by `add` and marked by `show`; the file itself
//! is only read, and the stored content is its text byte for byte. A new id installs version 1 as
//! `current`. The seed does not say what adding an installed id does; we treat `template add` as
//! the operator's explicit install, so new content becomes the next version in state `current`
//! (the previous current is `superseded`), and content identical to the current version creates
//! nothing and says so. Candidates from an optimizer go through `import` and stay `pending` (S-51).

use std::path::PathBuf;

use anyhow::anyhow;
use clap::Subcommand;
use serde_json::{Value, json};
use skillforge_store::templates::{
    TemplateRow, VersionRow, current_version, list_templates, list_versions,
};

use crate::context::Context;
use crate::control::templates::{check_source, install, read_source, resolve_reference};
use crate::exit::{CliError, CliResult, OK};
use crate::output::print_json;

/// `skillforge template ...`.
#[derive(Debug, Subcommand)]
pub enum TemplateCommand {
    /// Install a skill or agent template, or add a new current version of it.
    ///
    /// PATH is a skill directory holding SKILL.md, or a Markdown file with YAML frontmatter. The
    /// Agent Skills frontmatter (`name`, `description`) is enough: the id is derived from `name`,
    /// and every other field left out gets its default (kind agent-template, version 1,
    /// capabilities [ask, review, implement], runtime_compatibility [claude, codex], tags [skill],
    /// inputs [task], outputs [result]); `template show` marks them. Your file is never modified.
    /// Schema of the full frontmatter: `skillforge schema agent-template-metadata`.
    Add {
        /// A skill directory (holding SKILL.md) or a template file.
        #[arg(value_name = "PATH")]
        file: PathBuf,
        /// Source repository to record (`owner/repo`); default `local`.
        #[arg(long)]
        repo: Option<String>,
        /// Replace a current version that is a promoted candidate even though the file lacks
        /// its changes (without it, that is refused).
        #[arg(long)]
        force: bool,
    },
    /// List installed templates with their current and latest versions.
    List,
    /// Show one version: `ID` (current), `ID@vN`, or `ID@latest` (highest version not rejected).
    Show {
        /// `ID`, `ID@vN` or `ID@latest`.
        reference: String,
        /// Print only the version's content (the SKILL.md / template file, byte for byte), e.g.
        /// to write a promoted version back to your file (`--json` does not apply).
        #[arg(long)]
        content: bool,
    },
}

/// Dispatches a `template` subcommand.
pub async fn run(ctx: &Context, cmd: TemplateCommand) -> CliResult {
    match cmd {
        TemplateCommand::Add { file, repo, force } => add(ctx, &file, repo.as_deref(), force).await,
        TemplateCommand::List => list(ctx).await,
        TemplateCommand::Show { reference, content } => show(ctx, &reference, content).await,
    }
}

async fn add(ctx: &Context, path: &std::path::Path, repo: Option<&str>, force: bool) -> CliResult {
    let source = read_source(path)?;
    let parsed = check_source(&source)?;
    for warning in crate::control::templates::unknown_key_warnings(&source.content, &source.path) {
        eprintln!("warning: {warning}");
    }
    let store = ctx.store().await?;
    // A promoted candidate's guidance lives only in the store until written back to the file:
    // adding the older file would silently replace it.
    if let Some(current) = current_version(store.pool(), &parsed.metadata.id).await?
        && current.source_repo == skillforge_store::candidates::CANDIDATE_SOURCE_REPO
        && current.content != source.content
        && !force
    {
        return Err(CliError::usage(anyhow!(
            "`{}` is a promoted candidate and is current; `{}` does not hold its changes, so adding it would replace \
             them. The lines of `{}` your file lacks:\n{}\nMerge them into your file (your own edits stay) and add it \
             again; or start from the promoted version (`skillforge template show {} --content > {}`, which drops \
             edits made since), or pass --force to replace it",
            current.id,
            source.path.display(),
            current.id,
            missing_lines(&current.content, &source.content),
            current.id,
            source.path.display()
        )));
    }
    // Recorded absolute: where `candidate promote` tells the user to write a new version back.
    let recorded = std::fs::canonicalize(&source.path).unwrap_or_else(|_| source.path.clone());
    let installed = install(
        &store,
        &source.content,
        &recorded.display().to_string(),
        repo,
    )
    .await?;
    let version = &installed.version;
    let mut metadata: Value = serde_json::from_str(&version.metadata_json).unwrap_or(Value::Null);
    shown_version(&mut metadata, &installed.derived, version.version);
    if ctx.json {
        print_json(&json!({
            "template_id": version.template_id, "version_id": version.id, "created": installed.is_new,
            "same_as": installed.same_as,
            "derived": installed.derived, "metadata": metadata,
        }));
        return Ok(OK);
    }
    if installed.is_new {
        println!(
            "added {} (current) from {}{}",
            version.id,
            source.path.display(),
            installed
                .same_as
                .as_deref()
                .map(|earlier| format!(": the same text as {earlier} (a roll-back to it)"))
                .unwrap_or_default()
        );
    } else {
        println!(
            "{} unchanged: its current version {} has this content",
            version.template_id, version.id
        );
    }
    if !installed.derived.is_empty() {
        println!("derived (not in the file, defaults):");
        for field in &installed.derived {
            println!("  {field:<22} {}", shown_value(&metadata[*field]));
        }
        println!(
            "set any of them in the frontmatter to override; `skillforge template show {}` shows all",
            version.template_id
        );
    }
    Ok(OK)
}

/// A `version` the file does not set is shown as the version it is, the store's `N` of `ID@vN`
/// (issue 35 item 4), not the default the parser filled in: a skill added again after an edit
/// is `@v2`, and a derived `version 1` beside it would contradict it. A `version` the file sets
/// is shown as written.
fn shown_version(metadata: &mut Value, derived: &[&str], store_version: i64) {
    if derived.contains(&"version")
        && let Some(fields) = metadata.as_object_mut()
    {
        fields.insert("version".to_owned(), json!(store_version));
    }
}

/// A metadata value as one line: lists as `a, b`, strings bare.
fn shown_value(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(shown_value).collect::<Vec<_>>().join(", "),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
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
        print_json(
            &out.iter()
                .map(|(t, v)| template_json(t, v))
                .collect::<Vec<_>>(),
        );
        return Ok(OK);
    }
    if out.is_empty() {
        eprintln!("no templates installed (add one with `skillforge template add FILE`)");
    }
    if out.is_empty() {
        return Ok(OK);
    }
    let rows: Vec<Vec<String>> = out
        .iter()
        .map(|(t, versions)| {
            vec![
                t.id.clone(),
                t.current_version_id
                    .clone()
                    .unwrap_or_else(|| "-".to_owned()),
                t.latest_version_id
                    .clone()
                    .unwrap_or_else(|| "-".to_owned()),
                versions.len().to_string(),
                t.name.clone(),
            ]
        })
        .collect();
    println!(
        "{}",
        crate::output::table(
            &["TEMPLATE", "CURRENT", "LATEST", "VERSIONS", "NAME"],
            &rows,
            &[3]
        )
    );
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

async fn show(ctx: &Context, reference: &str, content_only: bool) -> CliResult {
    let store = ctx.store().await?;
    let version = resolve_reference(store.pool(), reference).await?;
    if content_only {
        print!("{}", version.content);
        return Ok(OK);
    }
    let derived = skillforge_contract::parse_template(&version.content)
        .map(|p| p.derived)
        .unwrap_or_default();
    if ctx.json {
        let mut shown = version_json(&version);
        shown["derived"] = json!(derived);
        shown_version(&mut shown["metadata"], &derived, version.version);
        print_json(&shown);
        return Ok(OK);
    }
    println!("version   {} ({})", version.id, version.state);
    println!("name      {}", version.name);
    println!("hash      {}", version.content_hash);
    let candidate = if version.source_repo == skillforge_store::candidates::CANDIDATE_SOURCE_REPO {
        skillforge_store::candidates::get_candidate(store.pool(), &version.id).await?
    } else {
        None
    };
    match &candidate {
        // Said as `candidate show` says it: the package and the optimizer that built it.
        Some(candidate) => println!(
            "source    {}",
            crate::commands::candidate::source_words(candidate)
        ),
        None => println!(
            "source    {} {} {}",
            version.source_repo, version.source_ref, version.source_path
        ),
    }
    println!("created   {}", version.created_at);
    let mut metadata: Value = serde_json::from_str(&version.metadata_json).unwrap_or(Value::Null);
    shown_version(&mut metadata, &derived, version.version);
    println!(
        "metadata{}",
        if derived.is_empty() {
            ""
        } else {
            " (* derived default, not in the file)"
        }
    );
    if let Value::Object(fields) = &metadata {
        for (field, value) in fields {
            let mark = if derived.contains(&field.as_str()) {
                "*"
            } else {
                " "
            };
            println!("  {mark} {field:<22} {}", shown_value(value));
        }
    }
    println!();
    print!("{}", version.content);
    Ok(OK)
}

/// The lines of `current` that `file` does not have (a line diff's deletions), indented, at most
/// [`MISSING_LINES_SHOWN`] of them and a count of the rest.
fn missing_lines(current: &str, file: &str) -> String {
    let missing: Vec<&str> = similar::TextDiff::from_lines(current, file)
        .iter_all_changes()
        .filter(|c| c.tag() == similar::ChangeTag::Delete)
        .map(|c| c.value().trim_end_matches('\n'))
        .collect();
    let mut out: Vec<String> = missing
        .iter()
        .take(MISSING_LINES_SHOWN)
        .map(|l| format!("  | {l}"))
        .collect();
    if missing.len() > MISSING_LINES_SHOWN {
        out.push(format!(
            "  … and {} more (`skillforge template show ID --content` prints it all)",
            missing.len() - MISSING_LINES_SHOWN
        ));
    }
    out.join("\n")
}

/// How many missing lines the promoted-candidate refusal lists.
const MISSING_LINES_SHOWN: usize = 15;
