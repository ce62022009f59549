//! Template operations shared by commands: installing a template's content as its new current
//! version (`template add`, `skillforge demo`) and resolving `ID`, `ID@vN`, `ID@latest`
//! (`template show`, `candidate`).

use anyhow::anyhow;
use skillforge_contract::{content_hash, hash_hex, parse_template, to_go_json_compact};
use skillforge_store::Store;
use skillforge_store::templates::{
    NewVersion, VersionRef, VersionRow, VersionState, begin_write, current_version, get_template, insert_version, resolve,
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
}

/// Installs template `content` (read from `source_path`, recorded with `repo`, default
/// [`LOCAL_SOURCE_REPO`]) as its id's new current version; content identical to the current
/// version creates nothing. `template add` and `skillforge demo` both install through here.
///
/// # Errors
/// Exit 2 for an invalid template; exit 3 when the store fails.
pub async fn install(store: &Store, content: &str, source_path: &str, repo: Option<&str>) -> Result<Installed, CliError> {
    let parsed =
        parse_template(content).map_err(|e| CliError::usage(anyhow!("invalid template `{source_path}`: {e}")))?;
    let metadata = parsed.metadata;
    let hash = content_hash(content);
    let metadata_json = to_go_json_compact(&metadata).map_err(CliError::usage)?;
    let mut tx = begin_write(store).await?;
    if let Some(current) = current_version(&mut *tx, &metadata.id).await?
        && current.content_hash == hash
    {
        return Ok(Installed { version: current, is_new: false });
    }
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
    Ok(Installed { version, is_new: true })
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
        CliError::usage(anyhow!("version reference `{reference}` is not ID, ID@vN or ID@latest"))
    })?;
    if get_template(pool, &parsed.template_id).await?.is_none() {
        return Err(CliError::usage(anyhow!(
            "agent template `{}` is not installed (see `skillforge template list`)",
            parsed.template_id
        )));
    }
    resolve(pool, &parsed)
        .await?
        .ok_or_else(|| CliError::usage(anyhow!("no version of `{}` matches `{reference}`", parsed.template_id)))
}
