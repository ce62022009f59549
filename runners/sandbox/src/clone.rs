//! The git side of a sandbox: open the live repository (never searching parent directories),
//! resolve the rev to a commit, and make an independent local clone checked out at that commit.
//!
//! The clone is `git clone --local` done by libgit2 (`CloneLocal::Local`): the object database
//! is copied with hard links where source and sandbox share a filesystem (plain copies
//! otherwise), and the clone gets its own git directory — config, refs, packed refs, gc state
//! and worktree registry — with no `alternates` pointing back at the live repository. Its
//! `origin` remote is deleted afterwards, so nothing in the clone names the live repository.

use std::path::{Path, PathBuf};

use git2::build::{CheckoutBuilder, CloneLocal, RepoBuilder};
use git2::{Oid, Repository, RepositoryOpenFlags};

use crate::error::{SandboxError, worker_host};

/// The live repository, opened and with the rev resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResolvedRev {
    /// The git directory holding the objects (the common dir for a linked worktree): the
    /// clone's source.
    pub(crate) clone_source: PathBuf,
    /// The commit, 40 hex digits.
    pub(crate) commit: String,
}

/// Opens `repo` (a work-tree root, a `.git` dir or a bare repo; parents are not searched) and
/// resolves `rev` to a commit.
pub(crate) fn resolve_rev(repo: &Path, rev: &str) -> Result<ResolvedRev, SandboxError> {
    if !repo.exists() {
        return Err(SandboxError::RepoMissing {
            path: repo.to_owned(),
            host: worker_host(),
        });
    }
    let live = Repository::open_ext(
        repo,
        RepositoryOpenFlags::NO_SEARCH,
        std::iter::empty::<&str>(),
    )
    .map_err(|e| SandboxError::NotARepo {
        path: repo.to_owned(),
        host: worker_host(),
        message: e.message().to_owned(),
    })?;
    let commit = live
        .revparse_single(rev)
        .and_then(|object| object.peel_to_commit())
        .map_err(|e| SandboxError::RevNotFound {
            rev: rev.to_owned(),
            path: repo.to_owned(),
            message: e.message().to_owned(),
        })?;
    Ok(ResolvedRev {
        clone_source: live.commondir().to_owned(),
        commit: commit.id().to_string(),
    })
}

/// Clones `resolved.clone_source` into `dest` (which must not exist) and checks out
/// `resolved.commit` with a detached HEAD; `repo` only names the repository in errors.
pub(crate) fn clone_at(
    repo: &Path,
    resolved: &ResolvedRev,
    dest: &Path,
) -> Result<(), SandboxError> {
    let provision = |message: String| SandboxError::Provision {
        path: dest.to_owned(),
        repo: repo.to_owned(),
        message,
    };
    let source = resolved
        .clone_source
        .to_str()
        .ok_or_else(|| provision("repository path is not UTF-8".into()))?;
    // Skip the clone's own checkout of the default branch; the commit is checked out below.
    let mut no_checkout = CheckoutBuilder::new();
    no_checkout.dry_run();
    let clone = RepoBuilder::new()
        .clone_local(CloneLocal::Local)
        .with_checkout(no_checkout)
        .clone(source, dest)
        .map_err(|e| provision(format!("clone: {}", e.message())))?;
    let oid = Oid::from_str(&resolved.commit).map_err(|e| provision(e.message().to_owned()))?;
    let commit = clone
        .find_commit(oid)
        .map_err(|e| provision(format!("find commit {oid} in the clone: {}", e.message())))?;
    let mut checkout = CheckoutBuilder::new();
    checkout.force();
    clone
        .checkout_tree(commit.as_object(), Some(&mut checkout))
        .map_err(|e| provision(format!("check out {oid}: {}", e.message())))?;
    clone
        .set_head_detached(oid)
        .map_err(|e| provision(format!("detach HEAD at {oid}: {}", e.message())))?;
    clone
        .remote_delete("origin")
        .map_err(|e| provision(format!("delete remote `origin`: {}", e.message())))?;
    Ok(())
}
