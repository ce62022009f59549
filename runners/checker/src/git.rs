//! Reading a repository with libgit2: the unified diff between two commits, and a plain copy of
//! a commit's tree for the tool-backed dimensions.
//!
//! Read-only towards the repository: no refs, config, index or worktree are touched.

use std::path::Path;

use git2::{DiffFormat, DiffOptions, ObjectType, Oid, Repository, TreeWalkMode, TreeWalkResult};

use crate::CheckerError;
use crate::diff::{DiffStats, parse_unified_diff};

fn git_err(context: String) -> impl FnOnce(git2::Error) -> CheckerError {
    move |source| CheckerError::Git { context, source }
}

fn open(repo: &Path) -> Result<Repository, CheckerError> {
    Repository::open(repo).map_err(git_err(format!("open repository `{}`", repo.display())))
}

fn resolve_tree<'r>(
    repo: &'r Repository,
    path: &Path,
    rev: &str,
) -> Result<git2::Tree<'r>, CheckerError> {
    repo.revparse_single(rev)
        .and_then(|o| o.peel_to_commit())
        .and_then(|c| c.tree())
        .map_err(git_err(format!(
            "resolve revision `{rev}` to a commit in `{}`",
            path.display()
        )))
}

/// The unified diff (`git diff base head` format, no rename detection, 3 context lines) between
/// the trees of commits `base` and `head` of the repository at `repo`. It is a plain two-tree
/// diff: pass the merge base as `base` for a pull request's own changes.
///
/// # Errors
/// [`CheckerError::Git`] when the repository does not open, a revision does not resolve to a
/// commit, or the diff cannot be computed.
pub fn diff_text_between(repo: &Path, base: &str, head: &str) -> Result<String, CheckerError> {
    let repository = open(repo)?;
    let base_tree = resolve_tree(&repository, repo, base)?;
    let head_tree = resolve_tree(&repository, repo, head)?;
    let mut options = DiffOptions::new();
    options.context_lines(3);
    let diff = repository
        .diff_tree_to_tree(Some(&base_tree), Some(&head_tree), Some(&mut options))
        .map_err(git_err(format!(
            "diff `{base}`..`{head}` in `{}`",
            repo.display()
        )))?;
    let mut text = String::new();
    diff.print(DiffFormat::Patch, |_delta, _hunk, line| {
        if matches!(line.origin(), '+' | '-' | ' ') {
            text.push(line.origin());
        }
        text.push_str(&String::from_utf8_lossy(line.content()));
        true
    })
    .map_err(git_err(format!(
        "render diff `{base}`..`{head}` in `{}`",
        repo.display()
    )))?;
    Ok(text)
}

/// [`DiffStats`] between commits `base` and `head` of the repository at `repo`.
///
/// # Errors
/// As [`diff_text_between`], plus [`CheckerError::Diff`] if libgit2's patch does not parse.
pub fn diff_between(repo: &Path, base: &str, head: &str) -> Result<DiffStats, CheckerError> {
    parse_unified_diff(&diff_text_between(repo, base, head)?)
}

/// Writes the files of commit `rev`'s tree under `dest` (created if missing): regular files with
/// their executable bit. Symlinks and submodules are left out (a link could point outside
/// `dest`), as are entries named `.git`, `.` or `..`. Returns the number of files written.
///
/// # Errors
/// [`CheckerError::Git`] when the repository or revision cannot be read;
/// [`CheckerError::Io`] naming the path when a directory or file cannot be written.
pub fn export_tree(repo: &Path, rev: &str, dest: &Path) -> Result<usize, CheckerError> {
    let repository = open(repo)?;
    let tree = resolve_tree(&repository, repo, rev)?;
    let io_err = |context: String| move |source| CheckerError::Io { context, source };
    std::fs::create_dir_all(dest)
        .map_err(io_err(format!("create checkout dir `{}`", dest.display())))?;
    let mut blobs: Vec<(String, Oid, i32)> = Vec::new();
    let mut skipped_unsafe = false;
    tree.walk(TreeWalkMode::PreOrder, |root, entry| {
        let name = entry.name().unwrap_or("");
        if matches!(name, "" | "." | ".." | ".git") || name.contains('/') || name.contains('\\') {
            skipped_unsafe = true;
            return TreeWalkResult::Skip;
        }
        if entry.kind() == Some(ObjectType::Blob) && entry.filemode() != 0o120000 {
            blobs.push((format!("{root}{name}"), entry.id(), entry.filemode()));
        }
        TreeWalkResult::Ok
    })
    .map_err(git_err(format!(
        "walk tree of `{rev}` in `{}`",
        repo.display()
    )))?;
    if skipped_unsafe {
        tracing::warn!(repo = %repo.display(), rev, "tree entries with unsafe names left out of the checkout");
    }
    for (relative, oid, mode) in &blobs {
        let blob = repository.find_blob(*oid).map_err(git_err(format!(
            "read blob `{relative}` of `{rev}` in `{}`",
            repo.display()
        )))?;
        let path = dest.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io_err(format!(
                "create checkout dir `{}`",
                parent.display()
            )))?;
        }
        std::fs::write(&path, blob.content())
            .map_err(io_err(format!("write checkout file `{}`", path.display())))?;
        if *mode == 0o100755 {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).map_err(
                io_err(format!(
                    "make checkout file `{}` executable",
                    path.display()
                )),
            )?;
        }
    }
    Ok(blobs.len())
}
