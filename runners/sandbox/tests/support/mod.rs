//! Shared helpers for the sandbox runner's end-to-end tests: real git repositories in temp dirs,
//! byte-for-byte snapshots of their git state, running the runner, and `/proc` scans.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sha2::{Digest, Sha256};
use skillforge_runner::{RunContext, RunOutcome, RunSpec, Runner, RunnerError};
use skillforge_runner_sandbox::{SandboxPayload, SandboxRunner, VerifyReport};

/// A temp dir outside `/tmp` (under cargo's target dir), so bwrap's private `/tmp` does not hide
/// it: inside the sandbox it is visible and read-only, which is what the escape tests need.
pub(crate) fn target_tempdir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("create temp dir in target")
}

/// Runs git in `dir` with a fixed identity; panics with its stderr on failure.
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("run git");
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// A live repository at `<root>/live` with two commits, a branch, an annotated tag, packed refs
/// and a linked worktree at `<root>/live-wt` (so the worktree registry is not empty).
/// Returns the repo path and the two commit ids (first, second).
pub(crate) fn make_live_repo(root: &Path) -> (PathBuf, String, String) {
    let repo = root.join("live");
    std::fs::create_dir_all(&repo).expect("mkdir live");
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("first.txt"), "first\n").expect("write first");
    git(&repo, &["add", "first.txt"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    let first = git(&repo, &["rev-parse", "HEAD"]);
    std::fs::write(repo.join("second.txt"), "second\n").expect("write second");
    git(&repo, &["add", "second.txt"]);
    git(&repo, &["commit", "-q", "-m", "second"]);
    let second = git(&repo, &["rev-parse", "HEAD"]);
    git(&repo, &["branch", "feature", &first]);
    git(&repo, &["tag", "-a", "v1", "-m", "v1"]);
    git(&repo, &["pack-refs", "--all"]);
    git(&repo, &["worktree", "add", "-q", "../live-wt", "feature"]);
    (repo, first, second)
}

/// Every file under the repository's git dir with its SHA-256 (objects, refs, packed-refs,
/// config, HEAD, worktree registry, logs, index …), plus `git worktree list --porcelain` and
/// `git for-each-ref` output.
pub(crate) fn snapshot(repo: &Path) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    hash_tree(&repo.join(".git"), Path::new(".git"), &mut files);
    files.insert(
        "<worktree list>".into(),
        git(repo, &["worktree", "list", "--porcelain"]),
    );
    files.insert("<refs>".into(), git(repo, &["for-each-ref"]));
    files
}

fn hash_tree(dir: &Path, rel: &Path, files: &mut BTreeMap<String, String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("dir entry"))
        .collect();
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let path = entry.path();
        let rel = rel.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            hash_tree(&path, &rel, files);
        } else {
            let bytes = std::fs::read(&path).expect("read file");
            files.insert(
                rel.display().to_string(),
                hex::encode(Sha256::digest(&bytes)),
            );
        }
    }
}

/// Asserts two snapshots are equal, naming the first differing entry.
pub(crate) fn assert_unchanged(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
) {
    for (path, hash) in before {
        assert_eq!(
            after.get(path),
            Some(hash),
            "live repo entry `{path}` changed or vanished"
        );
    }
    for path in after.keys() {
        assert!(before.contains_key(path), "live repo gained entry `{path}`");
    }
}

/// A payload for `repo` at `rev` running `commands`.
pub(crate) fn payload(repo: &Path, rev: &str, commands: &[&str]) -> SandboxPayload {
    SandboxPayload::new(
        repo,
        rev,
        commands.iter().map(|c| (*c).to_owned()).collect(),
    )
}

/// Runs the sandbox runner with `scratch` as scratch dir and a 60 s job timeout.
pub(crate) async fn run(
    payload: &SandboxPayload,
    scratch: &Path,
) -> Result<RunOutcome, RunnerError> {
    run_with(payload, RunContext::detached(scratch.to_owned())).await
}

/// Runs the sandbox runner with the given context and a 60 s job timeout.
pub(crate) async fn run_with(
    payload: &SandboxPayload,
    ctx: RunContext,
) -> Result<RunOutcome, RunnerError> {
    let spec = RunSpec {
        job_id: "job-test".into(),
        payload: serde_json::to_value(payload).expect("payload json"),
        timeout: Duration::from_secs(60),
    };
    SandboxRunner::default().run(&spec, &ctx).await
}

/// The report in an outcome's detail.
pub(crate) fn report(outcome: &RunOutcome) -> VerifyReport {
    VerifyReport::from_json(&outcome.detail).expect("detail is a VerifyReport")
}

/// Asserts the scratch dir holds nothing (the sandbox was removed).
pub(crate) fn assert_scratch_empty(scratch: &Path) {
    let left: Vec<_> = std::fs::read_dir(scratch)
        .expect("read scratch")
        .map(|e| e.expect("entry").path())
        .collect();
    assert!(left.is_empty(), "sandbox leftovers in scratch: {left:?}");
}

/// Pids of live (non-zombie) processes whose environment contains `VAR=value`.
pub(crate) fn live_processes_with_env(var: &str, value: &str) -> Vec<u32> {
    let needle = format!("{var}={value}");
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("read /proc").flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if !environ.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let state = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next());
        if state != Some("Z") && state != Some("X") {
            pids.push(pid);
        }
    }
    pids
}

/// Polls until no live process carries `VAR=value` or `deadline` passes; returns the survivors.
pub(crate) async fn wait_no_processes_with_env(
    var: &str,
    value: &str,
    deadline: Duration,
) -> Vec<u32> {
    let until = tokio::time::Instant::now() + deadline;
    loop {
        let left = live_processes_with_env(var, value);
        if left.is_empty() || tokio::time::Instant::now() >= until {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs `future` while watching `/proc`; returns its output and the most processes carrying
/// `VAR=value` seen alive at once during it (proves the scan sees the run's processes).
pub(crate) async fn run_watching<T>(
    var: &str,
    value: &str,
    future: impl std::future::Future<Output = T>,
) -> (T, usize) {
    let done = skillforge_runner::CancellationToken::new();
    let watcher = {
        let (var, value, done) = (var.to_owned(), value.to_owned(), done.clone());
        tokio::spawn(async move {
            let mut n_max = 0;
            while !done.is_cancelled() {
                n_max = n_max.max(live_processes_with_env(&var, &value).len());
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            n_max
        })
    };
    let output = future.await;
    done.cancel();
    (output, watcher.await.expect("watcher"))
}
