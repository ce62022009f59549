//! `skillforge verify` and `skillforge check` end to end: real git repos, the built binary, embedded queue and a Redis fleet.

use serde_json::Value;
use skillforge_tests::{Home, Reaped, RedisServer, git, two_commit_repo, verify};

// S-36 (fresh clone, sh -c, cwd = sandbox), S-37 (one command per argument, never split on
// commas or operators), S-38 (pass ⇒ hard 1.0): on the embedded default; the sandbox is removed.
#[test]
fn s36_s37_s38_verify_passes_on_the_embedded_default() {
    let (repo, _, head) = two_commit_repo();
    let home = Home::embedded();
    let (code, report, stderr) = verify(
        &home,
        &["--rev", "HEAD"],
        repo.path(),
        &["test -f src/lib.rs", "echo a,b && true"],
    );
    assert_eq!(code, Some(0), "{report:#}\n{stderr}");
    assert_eq!(report["verdict"], "pass");
    assert_eq!(report["hard"], 1.0);
    assert_eq!(report["commit"], head.as_str());
    assert_eq!(report["sandbox_removed"], true);
    assert_eq!(report["commands"].as_array().unwrap().len(), 2);
    assert_eq!(
        report["commands"][1]["command"], "echo a,b && true",
        "commas and operators stay one command"
    );
    let expected = if which("bwrap") { "bwrap" } else { "none" };
    assert_eq!(report["confinement"], expected);
    // The result is durable: `jobs show` has it later.
    let job = home.job(report["job_id"].as_str().unwrap());
    assert_eq!(job["outcome"]["detail"]["verdict"], "pass");
}

// S-38: fail-closed on one failing command among several; later commands do not run.
#[test]
fn s38_one_failing_command_fails_the_run() {
    let (repo, _, _) = two_commit_repo();
    let home = Home::embedded();
    let (code, report, _) = verify(&home, &[], repo.path(), &["true", "exit 4", "true"]);
    assert_eq!(code, Some(1));
    assert_eq!(report["verdict"], "fail");
    assert_eq!(report["hard"], 0.0);
    assert_eq!(report["commands"][1]["exit_code"], 4);
    assert_eq!(report["commands"][2]["status"], "not_run");
    assert_eq!(report["sandbox_removed"], true);
    let job = home.job(report["job_id"].as_str().unwrap());
    assert_eq!(
        job["attempts"], 1,
        "a fail verdict is an answer, not a retry"
    );
    // The human report says each command's status in words (`--json` keeps `not_run`).
    let out = home.run(&[
        "verify",
        "--repo",
        repo.path().to_str().unwrap(),
        "--rev",
        "HEAD",
        "--idempotency-key",
        "words",
        "--",
        "true",
        "exit 4",
        "true",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("[not run, ") && !text.contains("not_run"),
        "{text}"
    );
}

// S-39: a command that cannot run skips the whole run: no verdict (no fabricated 0), exit 3.
#[test]
fn s39_exit_127_skips_the_run() {
    let (repo, _, _) = two_commit_repo();
    let home = Home::embedded();
    let (code, report, _) = verify(
        &home,
        &[],
        repo.path(),
        &["true", "no-such-tool-anywhere --version"],
    );
    assert_eq!(code, Some(3));
    assert_eq!(report["verdict"], "skipped");
    assert_eq!(report["hard"], Value::Null);
    assert!(report["reason"].as_str().is_some_and(|r| !r.is_empty()));
    assert_eq!(report["sandbox_removed"], true);
}

// S-40: a wedged suite is killed at the timeout and fails the run (the process-group reaping
// itself is asserted in the sandbox and process runner tests).
#[test]
fn s40_verify_timeout_fails_the_run() {
    let (repo, _, _) = two_commit_repo();
    let home = Home::embedded();
    let (code, report, _) = verify(
        &home,
        &["--timeout", "2"],
        repo.path(),
        &["sleep 300 & sleep 300"],
    );
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(report["verdict"], "fail");
    assert_eq!(report["commands"][0]["status"], "timed_out");
}

#[test]
fn verify_with_an_idempotency_key_returns_the_recorded_result_without_running_again() {
    let (repo, _, _) = two_commit_repo();
    let counter = tempfile::tempdir().unwrap();
    let count_file = counter.path().join("runs");
    let home = Home::embedded();
    let cmd = format!("echo run >> {}", count_file.display());
    let flags = ["--idempotency-key", "ci-123", "--confinement", "none"];
    let (code1, first, _) = verify(&home, &flags, repo.path(), &[&cmd]);
    let (code2, second, stderr) = verify(&home, &flags, repo.path(), &[&cmd]);
    assert_eq!((code1, code2), (Some(0), Some(0)), "{stderr}");
    assert_eq!(first["job_id"], second["job_id"]);
    assert_eq!(
        std::fs::read_to_string(&count_file)
            .unwrap()
            .lines()
            .count(),
        1,
        "ran once"
    );
}

// A `--repo` that does not exist, or is not a git repository, is the user's mistake: `verify`
// and `check` exit 2 saying so before anything is queued (nothing enqueued, no job to wait for).
#[test]
fn a_repo_that_does_not_exist_or_is_not_git_is_refused_before_anything_is_queued() {
    let home = Home::embedded();
    let plain = home.path().join("plain-dir");
    std::fs::create_dir_all(&plain).unwrap();
    let plain = plain.display().to_string();
    for (repo, said) in [
        ("./nope", "no such directory"),
        (plain.as_str(), "not a git repository"),
    ] {
        for args in [
            vec!["verify", "--repo", repo, "--", "true"],
            vec![
                "check", "--repo", repo, "--base", "HEAD~1", "--head", "HEAD",
            ],
        ] {
            let out = home
                .cmd()
                .current_dir(home.path())
                .args(&args)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(
                stderr.contains(&format!("--repo `{repo}`: {said}")),
                "{args:?}: {stderr}"
            );
            assert!(
                !stderr.contains("class=") && !stderr.contains("on worker"),
                "no library error, no worker: {args:?}: {stderr}"
            );
        }
    }
    assert_eq!(
        home.json(&["jobs", "list"]),
        serde_json::json!([]),
        "nothing enqueued"
    );
}

#[test]
fn verify_runs_on_a_redis_fleet_worker() {
    let redis = RedisServer::start();
    let home = Home::redis(&redis.url());
    let _worker = Reaped(home.spawn_worker("verifier", &[]));
    let (repo, _, _) = two_commit_repo();
    let (code, report, stderr) = verify(&home, &[], repo.path(), &["test -f README.md"]);
    assert_eq!(code, Some(0), "{report:#}\n{stderr}\n{}", home.logs());
    assert_eq!(report["verdict"], "pass");
    let job = home.job(report["job_id"].as_str().unwrap());
    assert!(
        job["history"][0]["worker"]
            .as_str()
            .unwrap()
            .starts_with("verifier-"),
        "ran on the fleet worker"
    );
}

// S-34: diff_size of a real commit range; the default checker list is diff_size.
#[test]
fn s34_check_scores_a_real_commit_range() {
    let (repo, base, head) = two_commit_repo();
    let home = Home::embedded();
    let out = home
        .cmd()
        .args(["--json", "check", "--repo"])
        .arg(repo.path())
        .args(["--base", &base, "--head", &head])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let dims = report["dimensions"].as_array().unwrap();
    assert_eq!(dims.len(), 1);
    assert_eq!(dims[0]["name"], "diff_size");
    assert_eq!(
        dims[0]["score"], 1.0,
        "14 changed lines is under the soft cap: {report:#}"
    );
    assert_eq!(report["mean"], 1.0);
}

// S-35: a missing tool skips only its dimension; all skipped ⇒ no mean.
#[test]
fn s35_check_with_only_unavailable_tools_has_no_mean() {
    let (repo, base, head) = two_commit_repo();
    // Only a Markdown change: no profiled language, so the tool dimension skips with its reason.
    git(repo.path(), &["checkout", "-q", &base]);
    std::fs::write(repo.path().join("NOTES.md"), "notes\n").unwrap();
    git(repo.path(), &["add", "-A"]);
    git(repo.path(), &["commit", "-q", "-m", "notes"]);
    let notes = git(repo.path(), &["rev-parse", "HEAD"]);
    let _ = head;
    let home = Home::embedded();
    let report = home.json(&[
        "check",
        "--repo",
        repo.path().to_str().unwrap(),
        "--base",
        &base,
        "--head",
        &notes,
        "--checkers",
        "lint",
    ]);
    assert_eq!(report["dimensions"][0]["score"], Value::Null);
    assert!(report["dimensions"][0]["skipped"].as_str().is_some());
    assert_eq!(report["mean"], Value::Null, "never a fabricated score");
}

fn which(tool: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn verify_no_wait_prints_the_job_id() {
    let (repo, _, _) = two_commit_repo();
    let home = Home::embedded();
    let out = home
        .cmd()
        .args(["--json", "verify", "--no-wait", "--repo"])
        .arg(repo.path())
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = v["id"].as_str().unwrap();
    assert_eq!(home.job(id)["state"], "queued");
}

// A verifier whose worker is SIGKILLed mid-run is re-run elsewhere, and the dead worker's sandbox
// clone is cleaned by the next worker that starts on this host.
#[test]
fn verify_survives_a_sigkilled_worker_and_its_sandbox_is_cleaned() {
    let (repo, _, _) = two_commit_repo();
    let home = Home::embedded();
    let mut victim = Reaped(home.spawn_worker("victim", &[]));
    let out = home
        .cmd()
        .args([
            "--json",
            "verify",
            "--no-wait",
            "--heartbeat",
            "0.3",
            "--stale-after",
            "1.5",
            "--repo",
        ])
        .arg(repo.path())
        .args(["--", "sleep 2"])
        .output()
        .unwrap();
    let id = serde_json::from_slice::<Value>(&out.stdout).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    home.wait_job(
        &id,
        std::time::Duration::from_secs(60),
        "verify running",
        |j| j["state"] == "running",
    );
    let sandboxes = || -> usize {
        walk(&home.path().join("scratch"))
            .iter()
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("skillforge-sandbox-"))
            })
            .count()
    };
    skillforge_tests::wait_for(
        std::time::Duration::from_secs(30),
        "the sandbox clone to exist",
        || (sandboxes() == 1).then_some(()),
    );
    victim.0.kill().unwrap();
    let _ = victim.0.wait();
    let _survivor = Reaped(home.spawn_worker("survivor", &[]));
    let done = home.wait_job(
        &id,
        std::time::Duration::from_secs(60),
        "verify to finish elsewhere",
        |j| j["state"] == "succeeded",
    );
    assert_eq!(done["outcome"]["detail"]["verdict"], "pass");
    assert_eq!(done["attempts"], 2);
    // The dead worker's sandbox went at the survivor's start; the survivor's own is removed
    // beside the commit of its result, so it may outlive the `succeeded` seen above briefly.
    skillforge_tests::wait_for(
        std::time::Duration::from_secs(30),
        "the dead worker's sandbox and the survivor's to be removed",
        || (sandboxes() == 0).then_some(()),
    );
}

// The sandbox is removed beside the commit of the result, not before it, but is gone when
// `verify` returns (the in-process worker joins its removal before the command ends): after a
// pass, and after a failing command that left a directory the owner cannot write.
#[test]
fn the_sandbox_is_gone_when_verify_returns_after_a_pass_and_after_a_failure() {
    let (repo, _, _) = two_commit_repo();
    let home = Home::embedded();
    let left = || -> Vec<std::path::PathBuf> { walk(&home.path().join("scratch")) };
    let (code, report, stderr) = verify(&home, &[], repo.path(), &["true"]);
    assert_eq!(code, Some(0), "{report:#}\n{stderr}");
    assert_eq!(report["sandbox_removed"], true);
    assert_eq!(
        left(),
        Vec::<std::path::PathBuf>::new(),
        "nothing left under the scratch root after a pass"
    );
    let (code, report, stderr) = verify(
        &home,
        &[],
        repo.path(),
        &["mkdir -p locked/inner && touch locked/inner/f && chmod 500 locked && exit 3"],
    );
    assert_eq!(code, Some(1), "{report:#}\n{stderr}");
    assert_eq!(report["verdict"], "fail");
    assert_eq!(report["sandbox_removed"], true);
    assert_eq!(
        left(),
        Vec::<std::path::PathBuf>::new(),
        "nothing left under the scratch root after a failure"
    );
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.push(p.clone());
                if !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("skillforge-sandbox-"))
                {
                    out.extend(walk(&p));
                }
            }
        }
    }
    out
}

#[test]
fn verify_refuses_an_idempotency_key_reused_for_other_commands() {
    let (repo, _, _) = two_commit_repo();
    let home = Home::embedded();
    let (code, first, _) = verify(
        &home,
        &["--idempotency-key", "ci-7"],
        repo.path(),
        &["true"],
    );
    assert_eq!(code, Some(0));
    let out = home
        .cmd()
        .args(["verify", "--idempotency-key", "ci-7", "--repo"])
        .arg(repo.path())
        .args(["--", "false"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(first["job_id"].as_str().unwrap()),
        "names the job holding the key: {stderr}"
    );
}

/// Waits until the isolated worker `name` holds its presence lock.
fn isolated_ready(home: &Home, name: &str) {
    home.wait(
        std::time::Duration::from_secs(60),
        "the isolated worker",
        || {
            let locks = home.json(&["locks"]);
            locks
                .as_array()?
                .iter()
                .any(|l| {
                    l["name"]
                        .as_str()
                        .is_some_and(|n| n.starts_with(&format!("worker:{name}-")))
                })
                .then_some(())
        },
    );
}

/// `cp -a src/. dst`: a checkout inside the home, which the isolated worker cannot see.
fn copy_into(src: &std::path::Path, dst: &std::path::Path) {
    std::fs::create_dir_all(dst).unwrap();
    assert!(
        std::process::Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", src.display()))
            .arg(dst)
            .status()
            .unwrap()
            .success()
    );
}

// Issue 20: `verify --repo` of a checkout only the control plane sees, on a worker that cannot
// see it: with a remote holding the commit the job carries the remote's URL (nothing pushed);
// without one, a git bundle through the transfer area. Either way the job names no local path.
#[test]
fn verify_on_a_worker_that_cannot_see_the_checkout_with_and_without_a_remote() {
    let redis = RedisServer::start();
    let home = Home::redis(&redis.url());
    let (repo, _, head) = two_commit_repo();
    // A bare remote outside the home (the "forge"), and a clone of it inside the home.
    let forge = tempfile::tempdir().unwrap();
    let remote = forge.path().join("app.git");
    git(
        forge.path(),
        &[
            "clone",
            "-q",
            "--bare",
            repo.path().to_str().unwrap(),
            remote.to_str().unwrap(),
        ],
    );
    let with_remote = home.path().join("with-remote");
    git(
        home.path(),
        &[
            "clone",
            "-q",
            remote.to_str().unwrap(),
            with_remote.to_str().unwrap(),
        ],
    );
    let without_remote = home.path().join("without-remote");
    copy_into(repo.path(), &without_remote);
    drop(repo);
    let _vm = Reaped(skillforge_tests::isolated::spawn_isolated_worker(
        &home,
        "vm",
        &[],
    ));
    isolated_ready(&home, "vm");
    let home_text = home.path().display().to_string();
    for (checkout, travels) in [
        (&with_remote, remote.to_str().unwrap()),
        (&without_remote, "repo.bundle"),
    ] {
        let (code, report, stderr) = verify(&home, &[], checkout, &["test -f README.md"]);
        assert_eq!(code, Some(0), "{report:#}\n{stderr}\n{}", home.logs());
        assert_eq!(
            (report["verdict"].as_str(), report["commit"].as_str()),
            (Some("pass"), Some(head.as_str())),
            "{report:#}"
        );
        let job = home.job(report["job_id"].as_str().unwrap());
        assert!(
            job["history"][0]["worker"]
                .as_str()
                .unwrap()
                .starts_with("vm-"),
            "{job:#}"
        );
        let payload = job["payload"].to_string();
        assert!(
            payload.contains(travels) && !payload.contains(&home_text),
            "{payload}"
        );
    }
    // A commit the remote does not have travels as a bundle: nothing is pushed.
    git(
        &with_remote,
        &["commit", "-q", "--allow-empty", "-m", "local only"],
    );
    let (code, report, stderr) = verify(&home, &[], &with_remote, &["test -f README.md"]);
    assert_eq!(code, Some(0), "{report:#}\n{stderr}");
    let payload = home.job(report["job_id"].as_str().unwrap())["payload"].to_string();
    assert!(payload.contains("repo.bundle"), "{payload}");
    assert_eq!(
        git(&remote, &["rev-parse", "HEAD"]),
        head,
        "the remote is unchanged"
    );
}

// A revision the repository does not have is the user's mistake: exit 2 naming it and how to get
// it, checked before any job is queued (nothing enqueued). A remote-tracking name of a remote the
// repository does not have (`origin/main` with no remote) says so and asks for a local ref; a
// remote it has suggests fetching from it.
#[test]
fn an_unknown_revision_is_refused_before_anything_is_queued() {
    let (repo, _, _) = skillforge_tests::two_commit_repo();
    let home = Home::embedded();
    let path = repo.path().to_str().unwrap();
    let refused = |args: &[&str]| {
        let out = home.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        stderr
    };
    let stderr = refused(&[
        "verify",
        "--repo",
        path,
        "--rev",
        "no-such-rev",
        "--",
        "true",
    ]);
    assert!(
        stderr.contains("--rev `no-such-rev` is not a commit of")
            && stderr.contains("check the name"),
        "{stderr}"
    );
    let check = [
        "check",
        "--repo",
        path,
        "--base",
        "origin/main",
        "--head",
        "HEAD",
    ];
    let stderr = refused(&check);
    assert!(
        stderr.contains("no remote `origin`")
            && stderr.contains("give --base a local ref")
            && !stderr.contains("git fetch"),
        "no fetch from a remote that is not there: {stderr}"
    );
    // with a remote `origin` that lacks the branch: fetch it from there
    let forge = tempfile::tempdir().unwrap();
    git(forge.path(), &["init", "-q", "--bare"]);
    git(
        repo.path(),
        &["remote", "add", "origin", forge.path().to_str().unwrap()],
    );
    let stderr = refused(&check);
    assert!(stderr.contains("git fetch origin main"), "{stderr}");
    assert_eq!(
        home.json(&["jobs", "list"]),
        serde_json::json!([]),
        "nothing enqueued"
    );
}
