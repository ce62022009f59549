//! `skillforge init [DIR]`: a new home with a commented `config.toml` (every key the config
//! types accept, generated from their schema, so it cannot miss one), the JSON Schemas of the
//! files a user writes (`schemas/`), and one starter file per family, each valid as written and
//! naming its schema. Nothing is overwritten: when any target exists, the command lists them all
//! and writes nothing (exit 2). `--update` brings an existing home up to this build: it rewrites
//! the generated schemas, writes the files that are missing and keeps every other file as it is.

mod config_toml;
mod starters;

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use clap::Args;
use serde_json::json;

use crate::exit::{CliError, CliResult, OK};
use crate::output::print_json;

pub use config_toml::commented_config;
pub use starters::STARTERS;

/// `skillforge init [DIR]`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// The home to create (default: `--home`, else `$SKILLFORGE_HOME`, else `~/.skillforge`).
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// On an existing home (e.g. after upgrading skillforge): rewrite `schemas/*.json` for this
    /// build and write the files that are missing; your `config.toml` and starter files are kept
    /// as they are.
    #[arg(long)]
    pub update: bool,
}

/// Every file `init` writes, relative to the home, with its text.
pub fn files() -> Vec<(String, String)> {
    let mut out = vec![(crate::config::CONFIG_FILE.to_owned(), commented_config())];
    for entry in crate::commands::schema::all() {
        let text = skillforge_contract::schema::render_schema(&(entry.schema)());
        out.push((
            format!("schemas/{}", crate::commands::schema::file_name(entry.name)),
            text,
        ));
    }
    out.extend(
        STARTERS
            .iter()
            .map(|s| (s.path.to_owned(), s.text.to_owned())),
    );
    out
}

/// Creates the home `dir` (resolved like `--home`) with [`files`].
///
/// # Errors
/// Exit 2 listing every file that already exists (nothing written); exit 3 when a file cannot
/// be written.
pub fn run(home_flag: Option<PathBuf>, json_out: bool, args: InitArgs) -> CliResult {
    let home = crate::config::resolve_home(args.dir.or(home_flag))?;
    let files = files();
    if args.update {
        return update(&home, &files, json_out);
    }
    let existing: Vec<&str> = files
        .iter()
        .filter(|(rel, _)| home.join(rel).exists())
        .map(|(rel, _)| rel.as_str())
        .collect();
    if !existing.is_empty() {
        return Err(CliError::usage(anyhow!(
            "init `{}`: {} already {}, nothing was written (move them away, pick another DIR, or \
             bring this home up to date with `skillforge init --update`): {}",
            home.display(),
            existing.len(),
            if existing.len() == 1 {
                "exists"
            } else {
                "exist"
            },
            existing.join(", ")
        )));
    }
    for (rel, text) in &files {
        write_new(&home.join(rel), text)?;
    }
    if json_out {
        print_json(
            &json!({"home": home, "files": files.iter().map(|(rel, _)| rel).collect::<Vec<_>>()}),
        );
        return Ok(OK);
    }
    println!("created {}", home.display());
    for s in STARTERS {
        println!("  {:<34} {}", s.path, s.what);
    }
    println!(
        "  {:<34} every key, commented, with its default",
        crate::config::CONFIG_FILE
    );
    println!(
        "  {:<34} JSON Schemas of these files (`skillforge schema NAME`)",
        "schemas/"
    );
    let home_arg = crate::output::shell_word(&home);
    println!("next:");
    println!("  skillforge --home {home_arg} doctor");
    println!("  skillforge --home {home_arg} template add {home_arg}/skills/example-skill");
    println!("  {}", guide_pointer());
    Ok(OK)
}

/// `init --update`: schemas rewritten (each written whole to a temporary file, then renamed over
/// the old one), missing files written, every other existing file kept.
fn update(home: &Path, files: &[(String, String)], json_out: bool) -> CliResult {
    let mut written = Vec::new();
    let mut refreshed = Vec::new();
    let mut kept = Vec::new();
    for (rel, text) in files {
        let path = home.join(rel);
        if !path.exists() {
            write_new(&path, text)?;
            written.push(rel.as_str());
        } else if rel.starts_with("schemas/") {
            if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
                replace(&path, text)?;
                refreshed.push(rel.as_str());
            }
        } else {
            kept.push(rel.as_str());
        }
    }
    if json_out {
        print_json(
            &json!({"home": home, "written": written, "refreshed": refreshed, "kept": kept}),
        );
        return Ok(OK);
    }
    println!("updated {}", home.display());
    let list = |files: &[&str]| {
        if files.is_empty() {
            "none".to_owned()
        } else {
            files.join(", ")
        }
    };
    println!(
        "  schemas refreshed for this build: {}",
        if refreshed.is_empty() {
            "none (all current)".to_owned()
        } else {
            refreshed.join(", ")
        }
    );
    println!("  files that were missing, written: {}", list(&written));
    println!("  kept as they are (yours): {}", list(&kept));
    if kept.iter().any(|rel| *rel == crate::config::CONFIG_FILE) {
        println!(
            "every configuration key this build reads, with its default: skillforge schema config"
        );
    }
    Ok(OK)
}

/// Writes `text` over `path` whole: a temporary file beside it, then a rename.
fn replace(path: &Path, text: &str) -> Result<(), CliError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| CliError::env(anyhow!("create a file in `{}`: {e}", dir.display())))?;
    std::fs::write(tmp.path(), text)
        .map_err(|e| CliError::env(anyhow!("write `{}`: {e}", tmp.path().display())))?;
    tmp.persist(path)
        .map_err(|e| CliError::env(anyhow!("replace `{}`: {e}", path.display())))?;
    Ok(())
}

/// Where the getting-started guide is, for a person (issue 35 item 4): its absolute path in the
/// checkout this binary was built from when that file is still there, else the built-in help
/// (a `cargo install`ed binary has no `docs/` beside it).
fn guide_pointer() -> String {
    let guide = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/getting-started.md");
    match std::fs::canonicalize(&guide) {
        Ok(path) if path.is_file() => format!("the guide: {}", path.display()),
        _ => "`skillforge --help` lists every command, `skillforge COMMAND --help` explains one; the guide is docs/getting-started.md in skillforge's source".to_owned(),
    }
}

/// Writes `text` to `path`, creating parents; fails when `path` appeared meanwhile.
fn write_new(path: &Path, text: &str) -> Result<(), CliError> {
    use std::io::Write as _;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| CliError::env(anyhow!("create `{}`: {e}", parent.display())))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| CliError::env(anyhow!("create `{}`: {e}", path.display())))?;
    file.write_all(text.as_bytes())
        .map_err(|e| CliError::env(anyhow!("write `{}`: {e}", path.display())))
}
