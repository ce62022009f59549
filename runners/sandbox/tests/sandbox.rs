//! End-to-end tests of the sandbox runner against real git repositories in temp dirs
//! (rules S-36..S-40 of `shared/reference/rules.md`; DESIGN §5).

mod support;

use std::time::Duration;

use skillforge_runner::{ExitClass, RunContext};
use skillforge_runner_sandbox::{
    CommandStatus, Confinement, ConfinementMode, SandboxPayload, Verdict,
};
use support::*;

/// Every git mutation the brief lists, in one command line.
const GIT_MUTATIONS: &str = "git config user.name evil && git update-ref refs/heads/evil HEAD \
    && git gc --prune=now -q && git tag t1 && git remote add evil /tmp/x";
/// Proves the mutations took effect inside the clone (so an unchanged live repo means contained,
/// not "never ran").
const MUTATIONS_TOOK_EFFECT: &str = "test \"$(git config user.name)\" = evil \
    && git rev-parse -q --verify refs/heads/evil && git rev-parse -q --verify refs/tags/t1 \
    && test \"$(git remote get-url evil)\" = /tmp/x";

fn with_mode(mut payload: SandboxPayload, mode: ConfinementMode) -> SandboxPayload {
    payload.confinement = mode;
    payload
}

// S-36: git state changes in an unconfined sandbox stay in the clone.
#[tokio::test]
async fn s36_git_mutations_unconfined_leave_live_repo_unchanged() {
    let root = target_tempdir();
    let (repo, _, second) = make_live_repo(root.path());
    let scratch = target_tempdir();
    let before = snapshot(&repo);
    let worktree =
        "git worktree add -q ../wt && git worktree prune && git worktree list | grep -q /wt";
    let commands = [GIT_MUTATIONS, worktree, MUTATIONS_TOOK_EFFECT];
    let payload = with_mode(payload(&repo, "HEAD", &commands), ConfinementMode::None);

    let outcome = run(&payload, scratch.path()).await.expect("run");

    let report = report(&outcome);
    assert_eq!(report.verdict, Verdict::Pass, "{report:#?}");
    assert_eq!(report.confinement, Confinement::None);
    assert_eq!(report.commit, second);
    assert_unchanged(&before, &snapshot(&repo));
    assert!(report.sandbox_removed);
    assert_scratch_empty(scratch.path());
}

// S-36: the same under bwrap (the worktree goes inside the checkout: `..` is read-only there).
#[tokio::test]
async fn s36_git_mutations_under_bwrap_leave_live_repo_unchanged() {
    let root = target_tempdir();
    let (repo, _, _) = make_live_repo(root.path());
    let scratch = target_tempdir();
    let before = snapshot(&repo);
    let worktree = "git worktree add -q wt-inside && git worktree prune && git worktree list | grep -q wt-inside";
    let commands = [GIT_MUTATIONS, worktree, MUTATIONS_TOOK_EFFECT];
    let payload = with_mode(payload(&repo, "HEAD", &commands), ConfinementMode::Bwrap);

    let outcome = run(&payload, scratch.path()).await.expect("run");

    let report = report(&outcome);
    assert_eq!(report.verdict, Verdict::Pass, "{report:#?}");
    assert_eq!(report.confinement, Confinement::Bwrap);
    assert_unchanged(&before, &snapshot(&repo));
    assert_scratch_empty(scratch.path());
}

// S-36: under bwrap, writes outside the checkout fail and leave nothing behind, wherever the
// repository and scratch dir live (under the target dir, and under /tmp where the private tmpfs
// of the sandbox would otherwise hide the real parent directories).
#[tokio::test]
async fn s36_escapes_fail_under_bwrap() {
    escapes_fail_under_bwrap(target_tempdir(), target_tempdir()).await;
}

#[tokio::test]
async fn s36_escapes_fail_under_bwrap_with_everything_under_tmp() {
    let under_tmp = || {
        tempfile::Builder::new()
            .prefix("sf-escape")
            .tempdir_in("/tmp")
            .expect("temp dir under /tmp")
    };
    escapes_fail_under_bwrap(under_tmp(), under_tmp()).await;
}

async fn escapes_fail_under_bwrap(root: tempfile::TempDir, scratch: tempfile::TempDir) {
    let (repo, _, _) = make_live_repo(root.path());
    let before = snapshot(&repo);
    let live = repo.display().to_string();
    let attempts = [
        "! touch ../escape 2>/dev/null".to_owned(),
        format!("! sh -c 'echo x > {live}/pwned' 2>/dev/null"),
        format!("! git -C {live} tag evil 2>/dev/null"),
        format!("! git -C {live} config user.name evil 2>/dev/null"),
        format!("! git push -q {live} HEAD:refs/heads/pushed 2>/dev/null"),
    ];
    let commands: Vec<&str> = attempts.iter().map(String::as_str).collect();
    let payload = with_mode(payload(&repo, "HEAD", &commands), ConfinementMode::Bwrap);

    let outcome = run(&payload, scratch.path()).await.expect("run");

    let report = report(&outcome);
    assert_eq!(
        report.verdict,
        Verdict::Pass,
        "an escape succeeded: {report:#?}"
    );
    assert!(!repo.join("pwned").exists());
    assert_unchanged(&before, &snapshot(&repo));
    assert_scratch_empty(scratch.path());
}

// The `none` path says so, and there `..` is writable (what bwrap prevents above).
#[tokio::test]
async fn confinement_none_is_reported_and_unconfined() {
    let root = target_tempdir();
    let (repo, _, _) = make_live_repo(root.path());
    let scratch = target_tempdir();
    let payload = with_mode(
        payload(&repo, "HEAD", &["touch ../escape"]),
        ConfinementMode::None,
    );

    let outcome = run(&payload, scratch.path()).await.expect("run");

    let report = report(&outcome);
    assert_eq!(report.confinement, Confinement::None);
    assert_eq!(outcome.detail["confinement"], "none");
    assert_eq!(report.verdict, Verdict::Pass, "{report:#?}");
    assert_scratch_empty(scratch.path());
}

// Under bwrap the network is off when the payload says so (`--network none`) and on by default; a scratch dir
// under /tmp (hidden by the private /tmp) still gets its checkout bound in.
#[tokio::test]
async fn bwrap_network_flag_and_scratch_under_tmp() {
    let root = target_tempdir();
    let (repo, _, _) = make_live_repo(root.path());
    let scratch = tempfile::tempdir().expect("tempdir under /tmp");
    let only_loopback = "test \"$(grep -c : /proc/net/dev)\" -eq 1";
    let mut offline = with_mode(
        payload(
            &repo,
            "HEAD",
            &[only_loopback, "echo ok > f && test -f first.txt"],
        ),
        ConfinementMode::Bwrap,
    );
    offline.network = false;
    let report_offline = report(&run(&offline, scratch.path()).await.expect("run offline"));
    assert_eq!(report_offline.verdict, Verdict::Pass, "{report_offline:#?}");
    assert!(!report_offline.network);

    let online = with_mode(
        payload(&repo, "HEAD", &[only_loopback]),
        ConfinementMode::Bwrap,
    );
    assert!(online.network, "network is on by default");
    let report_online = report(&run(&online, scratch.path()).await.expect("run online"));
    let host_has_more_than_loopback = std::fs::read_to_string("/proc/net/dev")
        .expect("read net dev")
        .matches(':')
        .count()
        > 1;
    let expected = if host_has_more_than_loopback {
        Verdict::Fail
    } else {
        Verdict::Pass
    };
    assert_eq!(report_online.verdict, expected, "{report_online:#?}");
    assert_scratch_empty(scratch.path());
}

// S-38: fail-closed — one failing command among several fails the run and stops it.
#[tokio::test]
async fn s38_one_failing_command_fails_the_run() {
    let root = target_tempdir();
    let (repo, _, _) = make_live_repo(root.path());
    let scratch = target_tempdir();
    let commands = ["true", "echo out; echo err >&2; exit 3", "touch ran-anyway"];

    let outcome = run(&payload(&repo, "HEAD", &commands), scratch.path())
        .await
        .expect("run");

    let report = report(&outcome);
    assert_eq!(report.verdict, Verdict::Fail);
    assert_eq!(report.hard, Some(0.0));
    assert_eq!(outcome.exit, ExitClass::Failed { code: 3 });
    assert_eq!(outcome.exit_code, Some(3));
    let statuses: Vec<_> = report.commands.iter().map(|c| c.status).collect();
    assert_eq!(
        statuses,
        [
            CommandStatus::Passed,
            CommandStatus::Failed,
            CommandStatus::NotRun
        ]
    );
    assert_eq!(report.commands[1].exit_code, Some(3));
    assert_eq!(report.commands[1].stdout_tail, "out\n");
    assert_eq!(report.commands[1].stderr_tail, "err\n");
    assert!(
        report
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("exited with code 3"))
    );
    assert_scratch_empty(scratch.path());
}

// S-38: a command that dies of a signal fails the run as killed by that signal, both
// unconfined (the shell reports 128+n) and under bwrap (bwrap passes on its shell's 128+n).
#[tokio::test]
async fn s38_a_command_killed_by_a_signal_fails_as_killed_in_each_confinement() {
    let root = target_tempdir();
    let (repo, _, _) = make_live_repo(root.path());
    for mode in [ConfinementMode::None, ConfinementMode::Bwrap] {
        let scratch = target_tempdir();
        let payload = with_mode(
            payload(&repo, "HEAD", &["kill -USR1 $$", "touch not-run"]),
            mode,
        );
        let outcome = run(&payload, scratch.path()).await.expect("run");
        let report = report(&outcome);
        assert_eq!(report.verdict, Verdict::Fail, "{mode:?}: {report:#?}");
        assert_eq!(outcome.exit, ExitClass::Killed { signal: 10 }, "{mode:?}");
        assert_eq!(report.commands[0].status, CommandStatus::Killed, "{mode:?}");
        assert_eq!(report.commands[1].status, CommandStatus::NotRun, "{mode:?}");
        assert_scratch_empty(scratch.path());
    }
}

// S-38 / S-37: all passing ⇒ hard 1.0; a line with commas and operators runs intact.
#[tokio::test]
async fn s37_s38_all_passing_commands_pass_with_lines_intact() {
    let root = target_tempdir();
    let (repo, _, _) = make_live_repo(root.path());
    let scratch = target_tempdir();
    let commands = ["echo a,b && true", "test -f second.txt"];

    let outcome = run(&payload(&repo, "HEAD", &commands), scratch.path())
        .await
        .expect("run");

    let report = report(&outcome);
    assert_eq!(report.verdict, Verdict::Pass);
    assert_eq!(report.hard, Some(1.0));
    assert_eq!(outcome.exit, ExitClass::Passed);
    assert_eq!(report.commands.len(), 2);
    assert_eq!(report.commands[0].stdout_tail, "a,b\n");
    assert!(report.reason.is_none());
    assert_scratch_empty(scratch.path());
}

// The sandbox is at the resolved commit, detached, with no alternates and no remote.
#[tokio::test]
async fn s36_checkout_is_an_independent_clone_at_the_commit() {
    let root = target_tempdir();
    let (repo, first, _) = make_live_repo(root.path());
    let scratch = target_tempdir();
    let at_first = format!(
        "test \"$(git rev-parse HEAD)\" = {first} && ! git symbolic-ref -q HEAD && test ! -e second.txt \
         && test ! -e .git/objects/info/alternates && test -z \"$(git remote)\" && test -z \"$(git status --porcelain)\""
    );
    let payload = payload(&repo, "feature", &[at_first.as_str()]);

    let outcome = run(&payload, scratch.path()).await.expect("run");

    let report = report(&outcome);
    assert_eq!(report.verdict, Verdict::Pass, "{report:#?}");
    assert_eq!(report.rev, "feature");
    assert_eq!(report.commit, first);
    assert_scratch_empty(scratch.path());
}

// S-39: a command that cannot run (exit 127) skips the whole run, no hard score.
#[tokio::test]
async fn s39_exit_127_skips_the_whole_run() {
    let root = target_tempdir();
    let (repo, _, _) = make_live_repo(root.path());
    let scratch = target_tempdir();
    let commands = ["true", "skillforge-no-such-tool --version", "true"];

    let outcome = run(&payload(&repo, "HEAD", &commands), scratch.path())
        .await
        .expect("run");

    let report = report(&outcome);
    assert_eq!(report.verdict, Verdict::Skipped);
    assert_eq!(report.hard, None);
    assert!(outcome.detail["hard"].is_null());
    assert!(
        matches!(outcome.exit, ExitClass::NotRunnable { .. }),
        "{:?}",
        outcome.exit
    );
    assert!(
        report
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("could not run")),
        "{report:#?}"
    );
    let statuses: Vec<_> = report.commands.iter().map(|c| c.status).collect();
    assert_eq!(
        statuses,
        [
            CommandStatus::Passed,
            CommandStatus::NotRunnable,
            CommandStatus::NotRun
        ]
    );
    assert_scratch_empty(scratch.path());
}

// S-39: an honest non-zero exit is a failure, not a skip.
#[tokio::test]
async fn s39_command_failing_for_missing_deps_is_an_honest_zero() {
    let root = target_tempdir();
    let (repo, _, _) = make_live_repo(root.path());
    let scratch = target_tempdir();
    let outcome = run(
        &payload(&repo, "HEAD", &["test -d node_modules"]),
        scratch.path(),
    )
    .await
    .expect("run");
    assert_eq!(report(&outcome).hard, Some(0.0));
    assert_scratch_empty(scratch.path());
}

// S-39: an empty command list skips.
#[tokio::test]
async fn s39_empty_command_list_skips() {
    let root = target_tempdir();
    let (repo, _, _) = make_live_repo(root.path());
    let scratch = target_tempdir();

    let outcome = run(&payload(&repo, "HEAD", &[]), scratch.path())
        .await
        .expect("run");

    let report = report(&outcome);
    assert_eq!(report.verdict, Verdict::Skipped);
    assert_eq!(report.hard, None);
    assert!(report.sandbox_removed);
    assert_scratch_empty(scratch.path());
}

/// A suite that wedges: background sleeps and a grandchild that ignores SIGTERM.
const WEDGED_SUITE: &str = "sleep 300 & (trap '' TERM; sleep 301) & \
    sh -c 'trap \"\" TERM; while :; do sleep 1; done' & wait";

async fn check_wedged_suite_is_reaped(mode: ConfinementMode) {
    let root = target_tempdir();
    let (repo, _, _) = make_live_repo(root.path());
    let scratch = target_tempdir();
    let mark = uuid_like();
    let mut payload = with_mode(payload(&repo, "HEAD", &[WEDGED_SUITE, "true"]), mode);
    payload.timeout_secs = Some(2);
    payload
        .env
        .insert("SKILLFORGE_TEST_MARK".into(), mark.clone());

    let (outcome, n_seen) =
        run_watching("SKILLFORGE_TEST_MARK", &mark, run(&payload, scratch.path())).await;
    let outcome = outcome.expect("run");
    // sh, three background jobs and their sleeps: the scan must have seen them to mean anything.
    assert!(n_seen >= 4, "saw only {n_seen} suite processes");

    let report = report(&outcome);
    assert_eq!(report.verdict, Verdict::Fail, "{report:#?}");
    assert_eq!(report.hard, Some(0.0));
    assert_eq!(outcome.exit, ExitClass::TimedOut);
    assert_eq!(report.commands[0].status, CommandStatus::TimedOut);
    assert_eq!(report.commands[1].status, CommandStatus::NotRun);
    let left =
        wait_no_processes_with_env("SKILLFORGE_TEST_MARK", &mark, Duration::from_secs(5)).await;
    assert!(left.is_empty(), "processes survived the timeout: {left:?}");
    assert_scratch_empty(scratch.path());
}

// S-40: a wedged suite is reaped on timeout and fails the run (unconfined).
#[tokio::test]
async fn s40_wedged_suite_is_reaped_on_timeout_unconfined() {
    check_wedged_suite_is_reaped(ConfinementMode::None).await;
}

// S-40: the same under bwrap (own PID namespace).
#[tokio::test]
async fn s40_wedged_suite_is_reaped_on_timeout_under_bwrap() {
    check_wedged_suite_is_reaped(ConfinementMode::Bwrap).await;
}

/// A descendant that leaves the process group and drops the process runner's run marker.
const DETACHED_DESCENDANT: &str = "env -u SKILLFORGE_RUN_ID setsid sleep 302 & sleep 303";

// S-40: under bwrap even a descendant that escaped the process group and the run marker is
// reaped, because the PID namespace dies with the run.
#[tokio::test]
async fn s40_detached_descendant_is_reaped_under_bwrap() {
    check_detached_descendant_is_reaped(ConfinementMode::Bwrap).await;
}

async fn check_detached_descendant_is_reaped(mode: ConfinementMode) {
    let root = target_tempdir();
    let (repo, _, _) = make_live_repo(root.path());
    let scratch = target_tempdir();
    let mark = uuid_like();
    let mut payload = with_mode(payload(&repo, "HEAD", &[DETACHED_DESCENDANT]), mode);
    payload.timeout_secs = Some(2);
    payload
        .env
        .insert("SKILLFORGE_TEST_MARK".into(), mark.clone());

    let (outcome, n_seen) =
        run_watching("SKILLFORGE_TEST_MARK", &mark, run(&payload, scratch.path())).await;

    assert_eq!(outcome.expect("run").exit, ExitClass::TimedOut);
    assert!(n_seen >= 2, "saw only {n_seen} suite processes");
    let left =
        wait_no_processes_with_env("SKILLFORGE_TEST_MARK", &mark, Duration::from_secs(5)).await;
    assert!(left.is_empty(), "processes survived the timeout: {left:?}");
    assert_scratch_empty(scratch.path());
}

// Cancel: the running command is killed, reported as such, no verdict, sandbox removed.
#[tokio::test]
async fn cancel_kills_the_command_and_skips() {
    let root = target_tempdir();
    let (repo, _, _) = make_live_repo(root.path());
    let scratch = target_tempdir();
    let mark = uuid_like();
    let mut payload = payload(&repo, "HEAD", &["sleep 300", "true"]);
    payload
        .env
        .insert("SKILLFORGE_TEST_MARK".into(), mark.clone());
    let ctx = RunContext::detached(scratch.path().to_owned());
    let cancel = ctx.cancel.clone();
    let canceller = tokio::spawn(async move {
        // Cancel once the command is running (its process is visible), not after a fixed sleep.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while live_processes_with_env("SKILLFORGE_TEST_MARK", &mark).is_empty()
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let is_seen = !live_processes_with_env("SKILLFORGE_TEST_MARK", &mark).is_empty();
        cancel.cancel();
        (mark, is_seen)
    });

    let outcome = run_with(&payload, ctx).await.expect("run");
    let (mark, is_seen) = canceller.await.expect("canceller");
    assert!(is_seen, "the command never showed up in /proc");

    let report = report(&outcome);
    assert!(
        matches!(outcome.exit, ExitClass::Killed { .. }),
        "{:?}",
        outcome.exit
    );
    assert_eq!(report.verdict, Verdict::Skipped);
    assert_eq!(report.reason.as_deref(), Some("cancelled"));
    assert_eq!(report.commands[0].status, CommandStatus::Killed);
    assert_eq!(report.commands[1].status, CommandStatus::NotRun);
    let left =
        wait_no_processes_with_env("SKILLFORGE_TEST_MARK", &mark, Duration::from_secs(5)).await;
    assert!(left.is_empty(), "processes survived the cancel: {left:?}");
    assert_scratch_empty(scratch.path());
}

// A repository path this worker cannot see fails clearly, naming the path and the host.
#[tokio::test]
async fn missing_repo_fails_clearly_naming_path_and_host() {
    let scratch = target_tempdir();
    let missing = scratch.path().join("no-such-repo");

    let error = run(&payload(&missing, "HEAD", &["true"]), scratch.path())
        .await
        .expect_err("must fail");

    let message = error.to_string();
    assert!(
        message.contains(&missing.display().to_string()),
        "{message}"
    );
    assert!(message.contains("on worker `"), "{message}");
    assert!(message.contains("does not exist"), "{message}");
    assert_scratch_empty(scratch.path());
}

// A path that is not a repository root — a plain dir, or a subdir of some repository — fails
// instead of verifying a parent repository; so does a rev that does not resolve.
#[tokio::test]
async fn non_repo_paths_and_bad_revs_fail_clearly() {
    let root = target_tempdir();
    let (repo, _, _) = make_live_repo(root.path());
    let scratch = target_tempdir();
    let plain = root.path().join("plain");
    std::fs::create_dir_all(&plain).expect("mkdir plain");
    let subdir = repo.join("sub");
    std::fs::create_dir_all(&subdir).expect("mkdir sub");

    for path in [&plain, &subdir] {
        let error = run(&payload(path, "HEAD", &["true"]), scratch.path())
            .await
            .expect_err("must fail");
        let message = error.to_string();
        assert!(message.contains("not a git repository"), "{message}");
        assert!(message.contains(&path.display().to_string()), "{message}");
    }
    let error = run(&payload(&repo, "no-such-rev", &["true"]), scratch.path())
        .await
        .expect_err("bad rev");
    assert!(
        error.to_string().contains("resolve rev `no-such-rev`"),
        "{error}"
    );
    assert_scratch_empty(scratch.path());
}

fn uuid_like() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("mark-{}-{nanos}", std::process::id())
}
