//! The git operations of the optimize loop, through the `git` CLI: worktrees and branches per
//! experiment, scope inspection, commits, merges and cherry-picks (seed: optimize-loop, loop.md
//! 3.2 "Isolate", 3.4 steps 4–5).
//!
//! The control plane runs these on its own checkout; they are quick and local, so they are not
//! jobs. Every call names the repository and the arguments in its error. They run through the
//! control plane's one wrapper, [`skillforge_stage::git::git`], except [`content_identity`].

use std::path::Path;
use std::process::Command;

use super::OptimizeError;

/// Runs `git -C dir args…` through the control plane's one wrapper ([`skillforge_stage::git::git`])
/// and returns its stdout without the trailing newline(s).
///
/// # Errors
/// [`OptimizeError::Git`]: `git <args> in `<dir>`: <stderr>` (or why git could not start).
pub fn git(dir: &Path, args: &[&str]) -> Result<String, OptimizeError> {
    Ok(skillforge_stage::git::git(dir, args)?)
}

/// The commit `rev` names.
///
/// # Errors
/// As [`git`].
pub fn rev_parse(dir: &Path, rev: &str) -> Result<String, OptimizeError> {
    git(
        dir,
        &["rev-parse", "--verify", &format!("{rev}^{{commit}}")],
    )
}

/// Whether branch `name` exists.
pub fn branch_exists(repo: &Path, name: &str) -> bool {
    git(
        repo,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/heads/{name}"),
        ],
    )
    .is_ok()
}

/// Creates (or reuses, when it already exists there) a worktree at `path` on a new branch
/// `branch` starting at `start`. Idempotent, so a resumed run reuses the experiment's worktree.
///
/// # Errors
/// As [`git`].
pub fn worktree_for_branch(
    repo: &Path,
    path: &Path,
    branch: &str,
    start: &str,
) -> Result<(), OptimizeError> {
    if path.join(".git").exists() {
        return Ok(());
    }
    let p = path.to_string_lossy();
    if branch_exists(repo, branch) {
        git(repo, &["worktree", "add", &p, branch]).map(drop)
    } else {
        git(repo, &["worktree", "add", "-b", branch, &p, start]).map(drop)
    }
}

/// A detached worktree at `path` on commit `sha` (reference checkouts). Idempotent.
///
/// # Errors
/// As [`git`].
pub fn worktree_detached(repo: &Path, path: &Path, sha: &str) -> Result<(), OptimizeError> {
    if path.join(".git").exists() {
        return Ok(());
    }
    git(
        repo,
        &["worktree", "add", "--detach", &path.to_string_lossy(), sha],
    )
    .map(drop)
}

/// Removes a worktree (forced) and prunes; missing ones are fine.
///
/// # Errors
/// As [`git`].
pub fn remove_worktree(repo: &Path, path: &Path) -> Result<(), OptimizeError> {
    if path.exists() {
        git(
            repo,
            &["worktree", "remove", "--force", &path.to_string_lossy()],
        )?;
    }
    git(repo, &["worktree", "prune"]).map(drop)
}

/// Paths (repo-relative) changed in the worktree against HEAD, tracked and untracked,
/// excluding `ignore` (the orchestrator's own marker file).
///
/// # Errors
/// As [`git`].
pub fn changed_paths(worktree: &Path, ignore: &[&str]) -> Result<Vec<String>, OptimizeError> {
    let out = git(
        worktree,
        &["status", "--porcelain=v1", "-z", "--untracked-files=all"],
    )?;
    let mut paths = Vec::new();
    let mut fields = out.split('\0').filter(|s| !s.is_empty());
    while let Some(rec) = fields.next() {
        let (status, path) = rec.split_at(3.min(rec.len()));
        if status.starts_with('R') || status.starts_with('C') {
            fields.next(); // the source path of a rename
        }
        if !ignore.contains(&path) {
            paths.push(path.to_owned());
        }
    }
    paths.sort();
    paths.dedup();
    Ok(paths)
}

/// Reverts `paths` in the worktree to HEAD: tracked files are restored, untracked ones removed.
///
/// # Errors
/// As [`git`].
pub fn revert_paths(worktree: &Path, paths: &[String]) -> Result<(), OptimizeError> {
    for p in paths {
        let tracked = git(worktree, &["ls-files", "--error-unmatch", "--", p]).is_ok();
        if tracked {
            git(worktree, &["checkout", "HEAD", "--", p])?;
        } else {
            let full = worktree.join(p);
            if full.is_dir() {
                std::fs::remove_dir_all(&full)
                    .map_err(|e| OptimizeError::Env(format!("remove `{}`: {e}", full.display())))?;
            } else if full.exists() {
                std::fs::remove_file(&full)
                    .map_err(|e| OptimizeError::Env(format!("remove `{}`: {e}", full.display())))?;
            }
        }
    }
    Ok(())
}

/// The tree hash of the worktree's current bytes (tracked changes and untracked files included,
/// `ignore` left out), without touching the real index: the identity of an uncommitted candidate (O-24).
/// It runs git itself rather than through [`git`]: its commands need `GIT_INDEX_FILE` set to a
/// scratch index, which the shared wrapper does not set.
///
/// # Errors
/// As [`git`].
pub fn content_identity(worktree: &Path, ignore: &[&str]) -> Result<String, OptimizeError> {
    let tmp_index = worktree.join(".git-optimize-index");
    let index_var = tmp_index.to_string_lossy().to_string();
    let run = |args: &[&str]| -> Result<String, OptimizeError> {
        let out = Command::new("git")
            .arg("-C")
            .arg(worktree)
            .args(args)
            .env("GIT_INDEX_FILE", &index_var)
            .output()
            .map_err(|e| OptimizeError::Git(format!("git {}: {e}", args.join(" "))))?;
        if !out.status.success() {
            return Err(OptimizeError::Git(format!(
                "git {} in `{}`: {}",
                args.join(" "),
                worktree.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    run(&["read-tree", "HEAD"])?;
    let mut add: Vec<String> = vec!["add".into(), "-A".into(), "--".into(), ".".into()];
    add.push(":(exclude).git-optimize-index".into());
    for i in ignore {
        add.push(format!(":(exclude){i}"));
    }
    let add_refs: Vec<&str> = add.iter().map(String::as_str).collect();
    run(&add_refs)?;
    let tree = run(&["write-tree"]);
    let _ = std::fs::remove_file(&tmp_index);
    Ok(format!("tree:{}", tree?))
}

/// Commits exactly `paths` in the worktree with `message`, as the optimize committer.
///
/// # Errors
/// As [`git`].
pub fn commit_paths(
    worktree: &Path,
    paths: &[String],
    message: &str,
) -> Result<String, OptimizeError> {
    let mut add = vec!["add", "-A", "--"];
    add.extend(paths.iter().map(String::as_str));
    git(worktree, &add)?;
    git(
        worktree,
        &[
            "-c",
            "user.name=skillforge optimize",
            "-c",
            "user.email=optimize@skillforge.invalid",
            "commit",
            "--no-verify",
            "-m",
            message,
        ],
    )?;
    rev_parse(worktree, "HEAD")
}

/// Files changed between two commits.
///
/// # Errors
/// As [`git`].
pub fn files_between(repo: &Path, from: &str, to: &str) -> Result<Vec<String>, OptimizeError> {
    Ok(
        git(repo, &["diff", "--name-only", "--no-renames", from, to])?
            .lines()
            .map(str::to_owned)
            .filter(|l| !l.is_empty())
            .collect(),
    )
}

/// Whether `ancestor` is an ancestor of (or equal to) `rev`.
pub fn is_ancestor(repo: &Path, ancestor: &str, rev: &str) -> bool {
    git(repo, &["merge-base", "--is-ancestor", ancestor, rev]).is_ok()
}
