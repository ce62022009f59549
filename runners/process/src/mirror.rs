//! The worker's cache of repository mirrors (issue 20): a job that names its repository by
//! URL ([`RepoFetch`]) is fetched into a bare mirror here (`git fetch`, keyed by
//! [`RepoFetch::key`]), and the sandbox and checker runners then read or `git clone --local` the
//! mirror, keeping their hard-link clone and isolation.
//!
//! Layout: `<root>/<sha256(key)[..16]>.git` (bare), with `<name>.lock` taken (`flock`) for the
//! whole fetch, so concurrent jobs of one worker host never fetch into one mirror at once. The
//! root is `<home>/mirrors` next to the worker's scratch root ([`mirror_root`]).

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};
use skillforge_runner::RepoFetch;

/// The mirror cache of the worker running an attempt in `scratch_dir`
/// (`<home>/scratch/<job>-<token>`): `<home>/mirrors`.
pub fn mirror_root(scratch_dir: &Path) -> PathBuf {
    match scratch_dir.parent().and_then(Path::parent) {
        Some(home) => home.join("mirrors"),
        None => std::env::temp_dir().join("skillforge-mirrors"),
    }
}

fn git(dir: Option<&Path>, args: &[&str]) -> Result<String, String> {
    let mut cmd = Command::new("git");
    if let Some(d) = dir {
        cmd.arg("-C").arg(d);
    }
    cmd.args(args).env("GIT_TERMINAL_PROMPT", "0");
    let out = cmd.output().map_err(|e| {
        format!(
            "run `git {}`: {e} (is git installed on this worker?)",
            args.join(" ")
        )
    })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(format!(
            "`git {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Fetches `fetch.url` into its mirror under `root` and checks that every one of `commits` is
/// there; returns the mirror (a bare repository). A commit the refs do not bring is fetched by
/// id, which servers that allow it (and local and bundle URLs) answer.
///
/// # Errors
/// A message naming the URL and the git error, or the commit the URL does not have.
pub fn ensure_mirror(root: &Path, fetch: &RepoFetch, commits: &[&str]) -> Result<PathBuf, String> {
    std::fs::create_dir_all(root)
        .map_err(|e| format!("create mirror cache `{}`: {e}", root.display()))?;
    let name = hex::encode(Sha256::digest(fetch.key.as_bytes()))[..16].to_owned();
    let lock_path = root.join(format!("{name}.lock"));
    let lock = std::fs::File::create(&lock_path)
        .map_err(|e| format!("create `{}`: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("lock `{}`: {e}", lock_path.display()))?;
    let mirror = root.join(format!("{name}.git"));
    if !mirror.join("HEAD").is_file() {
        let shown = mirror.display().to_string();
        git(None, &["init", "--quiet", "--bare", &shown])?;
    }
    let have = |c: &str| {
        git(
            Some(&mirror),
            &["cat-file", "-e", &format!("{c}^{{commit}}")],
        )
        .is_ok()
    };
    if !commits.iter().all(|c| have(c)) {
        git(
            Some(&mirror),
            &[
                "fetch",
                "--quiet",
                "--force",
                "--prune",
                "--tags",
                &fetch.url,
                "+refs/heads/*:refs/heads/*",
            ],
        )
        .map_err(|e| format!("fetch `{}` into the mirror cache: {e}", fetch.url))?;
    }
    for commit in commits {
        if !have(commit) {
            let fetched = git(Some(&mirror), &["fetch", "--quiet", &fetch.url, commit]);
            if fetched.is_err() || !have(commit) {
                return Err(format!(
                    "commit `{commit}` is not in `{}` (push it, or verify a checkout without that remote)",
                    fetch.url
                ));
            }
        }
    }
    drop(lock);
    Ok(mirror)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    #[test]
    fn a_url_and_a_bundle_are_fetched_into_one_cached_mirror_each() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir(&src).unwrap();
        run(&src, &["init", "-q", "-b", "main"]);
        std::fs::write(src.join("a"), "1").unwrap();
        run(&src, &["add", "a"]);
        run(&src, &["commit", "-qm", "one"]);
        let first = run(&src, &["rev-parse", "HEAD"]);
        let root = dir.path().join("mirrors");
        let by_url = RepoFetch {
            url: src.display().to_string(),
            key: src.display().to_string(),
        };
        let mirror = ensure_mirror(&root, &by_url, &[&first]).unwrap();
        assert!(mirror.join("HEAD").is_file());
        std::fs::write(src.join("a"), "2").unwrap();
        run(&src, &["commit", "-qam", "two"]);
        let second = run(&src, &["rev-parse", "HEAD"]);
        assert_eq!(
            ensure_mirror(&root, &by_url, &[&second]).unwrap(),
            mirror,
            "the same key reuses its mirror"
        );
        let err = ensure_mirror(
            &root,
            &by_url,
            &["0123456789012345678901234567890123456789"],
        )
        .unwrap_err();
        assert!(err.contains("is not in"), "{err}");
        let bundle = dir.path().join("repo.bundle");
        run(
            &src,
            &["bundle", "create", &bundle.display().to_string(), "--all"],
        );
        let by_bundle = RepoFetch {
            url: bundle.display().to_string(),
            key: "bundle:h:/src".into(),
        };
        let other = ensure_mirror(&root, &by_bundle, &[&second]).unwrap();
        assert_ne!(other, mirror);
    }
}
