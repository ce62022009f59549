//! Template operations shared by commands: installing a template's content as its new current
//! version (`template add`, `skillforge demo`) and resolving `ID`, `ID@vN`, `ID@latest`
//! (`template show`, `candidate`).

use anyhow::anyhow;
use skillforge_contract::{content_hash, hash_hex, parse_template, to_go_json_compact};
use skillforge_store::Store;
use skillforge_store::templates::{
    NewVersion, VersionRef, VersionRow, VersionState, begin_write, current_version, get_template,
    insert_version, resolve,
};

use crate::exit::CliError;

/// `source_repo` of a template added without `--repo`.
pub const LOCAL_SOURCE_REPO: &str = "local";

/// What [`install`] did: the version holding the content, and whether it was created now.
#[derive(Debug, Clone)]
pub struct Installed {
    /// The current version with this content.
    pub version: VersionRow,
    /// False when the current version already had this content (nothing was written).
    pub is_new: bool,
    /// The skillforge fields the content's frontmatter left out, filled with their defaults
    /// (`skillforge_contract::derive_missing`); empty for a full agent template.
    pub derived: Vec<&'static str>,
    /// A new version whose text an earlier, no longer current version had: that version's id
    /// (adding it again is a roll-back to that text).
    pub same_as: Option<String>,
}

/// A template's source as `template add` reads it: a Markdown file, or a skill directory whose
/// `SKILL.md` is the template.
#[derive(Debug, Clone)]
pub struct TemplateSource {
    /// The file's text, never modified.
    pub content: String,
    /// The file read (`DIR/SKILL.md` for a directory), as recorded in `source_path`.
    pub path: std::path::PathBuf,
    /// The skill directory's name when a directory was given (Agent Skills: `name` equals it).
    pub dir_name: Option<String>,
}

/// Reads a template from `path`: a file, or a directory holding `SKILL.md`.
///
/// # Errors
/// Exit 2 naming the path when it cannot be read or a directory has no `SKILL.md`.
pub fn read_source(path: &std::path::Path) -> Result<TemplateSource, CliError> {
    let (file, dir_name) = if path.is_dir() {
        let file = path.join("SKILL.md");
        if !file.is_file() {
            return Err(CliError::usage(anyhow!(
                "skill directory `{}` has no SKILL.md (give the directory holding SKILL.md, or a template file)",
                path.display()
            )));
        }
        let name = std::fs::canonicalize(path)
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
        (file, name)
    } else {
        (path.to_owned(), None)
    };
    let content = std::fs::read_to_string(&file)
        .map_err(|e| CliError::usage(anyhow!("read template `{}`: {e}", file.display())))?;
    Ok(TemplateSource {
        content,
        path: file,
        dir_name,
    })
}

/// The least frontmatter a SKILL.md needs (the Agent Skills fields; skillforge derives the
/// rest), shown when a file has none.
pub const MINIMAL_FRONTMATTER: &str = "---\nname: my-skill\ndescription: What the skill does and when to use it.\n---\n# My skill\n...";

/// Warnings for the frontmatter keys of `content` neither Agent Skills nor skillforge knows
/// (issue 35 item 4: a misspelled `versoin` is otherwise silently ignored and `version`
/// derived), each naming the nearest known key when one is close.
pub fn unknown_key_warnings(content: &str, file: &std::path::Path) -> Vec<String> {
    skillforge_contract::unknown_frontmatter_keys(content)
        .into_iter()
        .map(|key| {
            let nearest = skillforge_contract::FRONTMATTER_KEYS
                .iter()
                .map(|known| (strsim::damerau_levenshtein(&key, known), *known))
                .min()
                .filter(|(distance, known)| *distance <= (known.len() / 3).max(2));
            let hint = nearest.map_or_else(String::new, |(_, known)| {
                format!("; did you mean `{known}`?")
            });
            format!(
                "`{}`: frontmatter key `{key}` is not one skillforge or Agent Skills knows and is ignored{hint}",
                file.display()
            )
        })
        .collect()
}

/// Every problem of `source` at once: the template's own ([`parse_template`]) and, for a skill
/// directory, a `name` other than the directory's (Agent Skills requires them equal; the eval
/// loop names a skill by its directory).
///
/// # Errors
/// Exit 2 listing every problem, naming the file.
pub fn check_source(
    source: &TemplateSource,
) -> Result<skillforge_contract::ParsedTemplate, CliError> {
    let parsed = parse_template(&source.content);
    let mut problems = match &parsed {
        Ok(_) => Vec::new(),
        Err(e) => e
            .clone()
            .into_problems()
            .into_iter()
            .map(|p| match p {
                // Issue 35 item 4: show the least a template needs.
                skillforge_contract::TemplateError::MissingFrontmatter => format!(
                    "{p} (a `---` line, `key: value` lines, a `---` line, then the body); the least is\n\n{MINIMAL_FRONTMATTER}"
                ),
                p => skillforge_contract::shape::worded_types(&p.to_string()),
            })
            .collect(),
    };
    if let (Some(dir), Some(name)) = (
        &source.dir_name,
        skillforge_contract::frontmatter_name(&source.content),
    ) && name != *dir
    {
        problems.push(format!(
            "skill name {name:?} differs from its directory {dir:?}; Agent Skills requires them equal (rename one)"
        ));
    }
    match (parsed, problems.len()) {
        (Ok(parsed), 0) => Ok(parsed),
        (_, 1) => Err(CliError::usage(anyhow!(
            "invalid template `{}`: {}",
            source.path.display(),
            problems[0]
        ))),
        (_, n) => Err(CliError::usage(anyhow!(
            "invalid template `{}`: {n} problems:\n{}",
            source.path.display(),
            problems
                .iter()
                .map(|p| format!("  - {p}"))
                .collect::<Vec<_>>()
                .join("\n")
        ))),
    }
}

/// Installs template `content` (read from `source_path`, recorded with `repo`, default
/// [`LOCAL_SOURCE_REPO`]) as its id's new current version; content identical to the current
/// version creates nothing. `template add` and `skillforge demo` both install through here.
///
/// # Errors
/// Exit 2 for an invalid template; exit 3 when the store fails.
pub async fn install(
    store: &Store,
    content: &str,
    source_path: &str,
    repo: Option<&str>,
) -> Result<Installed, CliError> {
    let parsed = parse_template(content)
        .map_err(|e| CliError::usage(anyhow!("invalid template `{source_path}`: {e}")))?;
    let derived = parsed.derived;
    let metadata = parsed.metadata;
    let hash = content_hash(content);
    let metadata_json = to_go_json_compact(&metadata).map_err(CliError::usage)?;
    let mut tx = begin_write(store).await?;
    if let Some(current) = current_version(&mut *tx, &metadata.id).await?
        && current.content_hash == hash
    {
        return Ok(Installed {
            version: current,
            is_new: false,
            derived,
            same_as: None,
        });
    }
    let same_as = skillforge_store::templates::list_versions(&mut *tx, &metadata.id)
        .await?
        .into_iter()
        .filter(|v| v.content_hash == hash)
        .max_by_key(|v| v.version)
        .map(|v| v.id);
    let version = insert_version(
        &mut tx,
        &NewVersion {
            template_id: &metadata.id,
            state: VersionState::Current,
            name: &metadata.name,
            description: &metadata.description,
            metadata_json: &metadata_json,
            content,
            content_hash: &hash,
            source_repo: repo.unwrap_or(LOCAL_SOURCE_REPO),
            source_ref: "",
            source_path,
            resolved_commit: hash_hex(&hash),
        },
    )
    .await?;
    tx.commit().await?;
    Ok(Installed {
        version,
        is_new: true,
        derived,
        same_as,
    })
}

/// Resolves `ID`, `ID@vN` or `ID@latest` to a stored version.
///
/// # Errors
/// Exit 2 when the reference is malformed, the template is not installed or no version matches.
pub async fn resolve_reference(
    pool: &sqlx::SqlitePool,
    reference: &str,
) -> Result<VersionRow, CliError> {
    let parsed = VersionRef::parse(reference).ok_or_else(|| {
        CliError::usage(anyhow!(
            "version reference `{reference}` is not ID, ID@vN or ID@latest"
        ))
    })?;
    if get_template(pool, &parsed.template_id).await?.is_none() {
        return Err(CliError::usage(anyhow!(
            "agent template `{}` is not installed (see `skillforge template list`)",
            parsed.template_id
        )));
    }
    if let Some(version) = resolve(pool, &parsed).await? {
        return Ok(version);
    }
    // Every command resolving a reference says which versions there are to choose from.
    let versions = skillforge_store::templates::list_versions(pool, &parsed.template_id).await?;
    let known = if versions.is_empty() {
        "it has no versions".to_owned()
    } else {
        format!(
            "its versions: {}",
            versions
                .iter()
                .map(|v| format!("{} ({})", v.id, v.state))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    Err(CliError::usage(anyhow!(
        "no version of `{}` matches `{reference}`; {known}",
        parsed.template_id
    )))
}
