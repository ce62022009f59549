//! A job's repository on a fleet (issue 20): before a `sandbox` or `checker` job is enqueued on
//! a queue whose workers do not share this disk ([`skillforge_engine::backend::QueueTransfer::shares_disk`] false: Redis),
//! its local checkout path becomes something any worker can fetch — the checkout's remote URL
//! when the remote has every commit the job names (nothing is pushed), else a `git bundle` of
//! the checkout sent through the queue's transfer area — and its revs become commit ids. The
//! worker fetches it into its mirror cache (`runners/process/src/mirror.rs`) and clones from
//! there. A path only the control plane sees is never put in such a job.
//!
//! This is the control plane's only git access: the git CLI on a checkout the operator named
//! (`verify --repo`, `harvest attribute --checkout`).

use std::path::{Path, PathBuf};

use serde_json::Value;
use skillforge_engine::transfer::{self, Stager};
use skillforge_engine::{JobSpec, QueueBackend};

use crate::git::git;

/// Why a job's repository could not be made fetchable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RepoError {
    /// The path is not a git checkout, or a rev does not resolve there (bad input).
    #[error("{0}")]
    Invalid(String),
    /// git failed, or the bundle could not be staged (over the cap, the queue down).
    #[error("{0}")]
    Env(String),
}

/// The payload fields naming revisions, per runner kind.
fn rev_fields(kind: &str) -> Option<&'static [&'static str]> {
    match kind {
        "sandbox" => Some(&["rev"]),
        "checker" => Some(&["base", "head"]),
        _ => None,
    }
}

/// The checkout's remote (`origin` first, else the first one) and its URL, a local path made
/// absolute against the checkout.
fn remote_of(checkout: &Path) -> Option<(String, String)> {
    let names = git(checkout, &["remote"]).ok()?;
    let mut names: Vec<&str> = names.lines().collect();
    names.sort_by_key(|n| *n != "origin");
    let name = names.first()?.to_string();
    let url = git(checkout, &["remote", "get-url", &name]).ok()?;
    let local = url.starts_with('/') || url.starts_with('.') || !url.contains(':');
    let url = if local && Path::new(&url).is_relative() {
        checkout.join(&url).display().to_string()
    } else {
        url
    };
    Some((name, url))
}

/// Rewrites `spec` (a `sandbox` or `checker` job with a `repo` path) for `queue`; a no-op when
/// the queue's workers share this disk, for other runners and for payloads already fetching.
///
/// # Errors
/// [`RepoError::Invalid`] for a path that is not a checkout or a rev that does not resolve;
/// [`RepoError::Env`] when git or the transfer area fails.
pub async fn route_repository(
    queue: &dyn QueueBackend,
    spec: &mut JobSpec,
) -> Result<(), RepoError> {
    let Some(fields) = rev_fields(&spec.kind) else {
        return Ok(());
    };
    if queue.shares_disk() || spec.payload.get("fetch").is_some_and(|f| !f.is_null()) {
        return Ok(());
    }
    let Some(repo) = spec
        .payload
        .get("repo")
        .and_then(Value::as_str)
        .map(PathBuf::from)
    else {
        return Ok(());
    };
    let checkout = std::path::absolute(&repo)
        .map_err(|e| RepoError::Invalid(format!("repository path `{}`: {e}", repo.display())))?;
    git(&checkout, &["rev-parse", "--git-dir"]).map_err(|e| {
        RepoError::Invalid(format!(
            "`{}` is not a git checkout: {}",
            checkout.display(),
            e.stderr()
        ))
    })?;
    let mut commits = Vec::new();
    for field in fields {
        let Some(rev) = spec
            .payload
            .get(*field)
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            continue;
        };
        let commit = git(
            &checkout,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("{rev}^{{commit}}"),
            ],
        )
        .map_err(|_| {
            RepoError::Invalid(format!(
                "rev `{rev}` is not a commit of `{}`",
                checkout.display()
            ))
        })?;
        spec.payload[*field] = Value::String(commit.clone());
        commits.push(commit);
    }
    let remote = remote_of(&checkout).filter(|(name, _)| {
        commits.iter().all(|c| {
            git(
                &checkout,
                &[
                    "branch",
                    "-r",
                    "--contains",
                    c,
                    "--list",
                    &format!("{name}/*"),
                ],
            )
            .is_ok_and(|out| !out.is_empty())
        })
    });
    let fetch = match remote {
        Some((_, url)) => serde_json::json!({"url": url, "key": url}),
        None => {
            let bundle = bundle(&checkout)?;
            let area = queue.transfer_area().ok_or_else(|| {
                RepoError::Env(format!(
                    "the `{}` queue has no transfer area for a bundle",
                    queue.name()
                ))
            })?;
            let mut stager = Stager::new(area.as_ref());
            stager
                .add_bytes("in/repo.bundle", &bundle, false)
                .await
                .map_err(|e| {
                    RepoError::Env(format!(
                        "send a bundle of `{}` (it has no remote holding the commits): {e}",
                        checkout.display()
                    ))
                })?;
            spec.files.inputs.extend(stager.finish());
            // The mirror's name: this host and checkout, hashed (not a path the worker could open).
            let host = skillforge_engine::WorkerIdentity::new("cp").host;
            let id = crate::fs::sha256_hex(format!("{host}:{}", checkout.display()).as_bytes());
            serde_json::json!({"url": format!("{}/in/repo.bundle", transfer::JOB_DIR), "key": format!("bundle:{}", &id[..16])})
        }
    };
    spec.payload["repo"] = fetch["url"].clone();
    spec.payload["fetch"] = fetch;
    Ok(())
}

/// `git bundle create` of every ref and `HEAD` of `checkout`, read into memory.
fn bundle(checkout: &Path) -> Result<Vec<u8>, RepoError> {
    let file = std::env::temp_dir().join(format!("skillforge-{}.bundle", uuid::Uuid::now_v7()));
    let shown = file.display().to_string();
    let made = git(
        checkout,
        &["bundle", "create", "--quiet", &shown, "--all", "HEAD"],
    )
    .map_err(|e| RepoError::Env(format!("bundle `{}`: {}", checkout.display(), e.stderr())));
    let bytes = made.and_then(|_| {
        std::fs::read(&file).map_err(|e| RepoError::Env(format!("read bundle `{shown}`: {e}")))
    });
    let _ = std::fs::remove_file(&file);
    bytes
}
