//! `skillforge init [DIR]`: a new home with a commented `config.toml` (every key the config
//! types accept, generated from their schema, so it cannot miss one), the JSON Schemas of the
//! files a user writes (`schemas/`), and one starter file per family, each valid as written and
//! naming its schema. Nothing is overwritten: when any target exists, the command lists them all
//! and writes nothing (exit 2).

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
    let existing: Vec<&str> = files
        .iter()
        .filter(|(rel, _)| home.join(rel).exists())
        .map(|(rel, _)| rel.as_str())
        .collect();
    if !existing.is_empty() {
        return Err(CliError::usage(anyhow!(
            "init `{}`: {} already {}, nothing was written (move them away or pick another DIR): {}",
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
    let home_arg = shell_word(&home);
    println!("next:");
    println!("  skillforge --home {home_arg} doctor");
    println!("  skillforge --home {home_arg} template add {home_arg}/skills/example-skill");
    println!("  {}", guide_pointer());
    Ok(OK)
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

/// `path` quoted for a shell when it needs it.
fn shell_word(path: &Path) -> String {
    let s = path.display().to_string();
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+".contains(c))
    {
        s
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}
