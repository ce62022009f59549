//! End-to-end tests of the process runner with real child processes.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use skillforge_runner::{
    CancellationToken, ExitClass, RunContext, RunOutcome, RunSpec, Runner, RunnerError,
};
use skillforge_runner_process::{
    DEFAULT_ENV_ALLOWLIST, DEFAULT_MAX_OUTPUT_BYTES, ProcessPayload, ProcessRunner, RUN_ID_ENV,
    TRUNCATION_MARKER, run_process, truncation_marker,
};
use tokio::time::Instant;

/// The test's own marker variable, so survivor checks do not trust the runner's marker.
const TAG_ENV: &str = "SF_TEST_TAG";
const LONG: Duration = Duration::from_secs(60);

/// A payload tagged with a fresh `SF_TEST_TAG`, plus a guard that kills anything still tagged
/// when the test ends (so a failing test leaves no `sleep 300` behind).
fn tagged(mut payload: ProcessPayload) -> (ProcessPayload, TagGuard) {
    let tag = uuid::Uuid::new_v4().simple().to_string();
    payload.env.insert(TAG_ENV.into(), tag.clone());
    (payload, TagGuard(format!("{TAG_ENV}={tag}")))
}

struct TagGuard(String);

impl Drop for TagGuard {
    fn drop(&mut self) {
        for (pid, _) in live_with_env_entry(&self.0) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// `(pid, comm)` of every live (not zombie) process whose environment holds `entry`.
fn live_with_env_entry(entry: &str) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for dir in fs::read_dir("/proc").expect("read /proc").flatten() {
        let Some(pid) = dir
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(environ) = fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if !environ.split(|&b| b == 0).any(|e| e == entry.as_bytes()) {
            continue;
        }
        if let Some(comm) = live_comm(pid) {
            found.push((pid, comm));
        }
    }
    found
}

/// The command name of `pid` unless it is gone or a zombie.
fn live_comm(pid: u32) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (head, rest) = stat.rsplit_once(')')?;
    let state = rest.trim_start().chars().next()?;
    if matches!(state, 'Z' | 'X' | 'x') {
        return None;
    }
    Some(head.split_once('(')?.1.to_owned())
}

impl TagGuard {
    fn survivors(&self) -> Vec<(u32, String)> {
        live_with_env_entry(&self.0)
    }

    fn count_sleeps(&self) -> usize {
        self.survivors()
            .iter()
            .filter(|(_, comm)| comm == "sleep")
            .count()
    }
}

/// Processes still carrying the runner's own marker for `outcome`'s run.
fn run_marker_survivors(outcome: &RunOutcome) -> Vec<(u32, String)> {
    let run_id = outcome.detail["run_id"].as_str().expect("detail.run_id");
    live_with_env_entry(&format!("{RUN_ID_ENV}={run_id}"))
}

/// Polls `condition` every 10 ms until it holds or `within` passes; returns whether it held.
async fn eventually(within: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn run(payload: &ProcessPayload) -> RunOutcome {
    run_process(payload, LONG, &CancellationToken::new())
        .await
        .expect("run process")
}

async fn run_shell(line: &str) -> RunOutcome {
    run(&ProcessPayload::shell(line)).await
}

fn argv(args: &[&str]) -> ProcessPayload {
    ProcessPayload::argv(args.iter().map(|&arg| arg.to_owned()).collect())
}

fn write_file(path: &Path, text: &str, mode: u32) {
    fs::write(path, text).expect("write file");
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).expect("chmod file");
}

/// A plain background sleep, one that ignores SIGTERM, one that leaves the process group with
/// `setsid`, and one that does both (only the `/proc` sweep's SIGKILL can reach it).
const ESCAPING_TREE: &str = r#"sleep 300 & (trap "" TERM; sleep 300) & setsid sh -c "sleep 300" &
    setsid sh -c 'trap "" TERM; sleep 300' & wait"#;
const N_TREE_SLEEPS: usize = 4;

#[tokio::test]
async fn exit_zero_passes_and_captures_stdout() {
    let outcome = run(&argv(&["sh", "-c", "echo hello; echo oops >&2"])).await;
    assert_eq!(outcome.exit, ExitClass::Passed);
    assert_eq!(outcome.exit_code, Some(0));
    assert_eq!(outcome.stdout_tail, "hello\n");
    assert_eq!(outcome.stderr_tail, "oops\n");
    assert_eq!(outcome.detail["stdout_truncated_bytes"], 0);
}

#[tokio::test]
async fn non_zero_exit_fails_with_its_code() {
    let outcome = run_shell("exit 3").await;
    assert_eq!(outcome.exit, ExitClass::Failed { code: 3 });
    assert_eq!(outcome.exit_code, Some(3));
}

#[tokio::test]
async fn missing_command_in_a_shell_is_not_runnable() {
    let outcome = run_shell("no_such_command_skillforge_xyz").await;
    assert!(
        matches!(outcome.exit, ExitClass::NotRunnable { .. }),
        "{outcome:?}"
    );
    assert_eq!(outcome.exit_code, Some(127));
}

#[tokio::test]
async fn missing_program_or_interpreter_is_not_runnable() {
    let outcome = run(&argv(&["/nonexistent/skillforge-program"])).await;
    let ExitClass::NotRunnable { reason } = &outcome.exit else {
        panic!("{outcome:?}")
    };
    assert!(
        reason.contains("`/nonexistent/skillforge-program`"),
        "{reason}"
    );
    assert_eq!(outcome.exit_code, None);

    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("script");
    write_file(&script, "#!/nonexistent/interpreter\necho hi\n", 0o755);
    let outcome = run(&argv(&[script.to_str().expect("utf-8 path")])).await;
    assert!(
        matches!(outcome.exit, ExitClass::NotRunnable { .. }),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn non_executable_file_is_not_runnable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("script");
    write_file(&script, "#!/bin/sh\necho hi\n", 0o644);
    let path = script.to_str().expect("utf-8 path");

    let outcome = run_shell(path).await;
    assert!(
        matches!(outcome.exit, ExitClass::NotRunnable { .. }),
        "{outcome:?}"
    );
    assert_eq!(outcome.exit_code, Some(126));

    let outcome = run(&argv(&[path])).await;
    let ExitClass::NotRunnable { reason } = &outcome.exit else {
        panic!("{outcome:?}")
    };
    assert!(reason.contains("permission denied"), "{reason}");
}

#[tokio::test]
async fn exit_124_is_timed_out() {
    let outcome = run_shell("exit 124").await;
    assert_eq!(outcome.exit, ExitClass::TimedOut);
    assert_eq!(outcome.exit_code, Some(124));
}

#[tokio::test]
async fn exit_125_is_censored_only_with_the_marker() {
    let check = |line: &'static str, expected: ExitClass| async move {
        let outcome = run_shell(line).await;
        assert_eq!(outcome.exit, expected, "{line}");
    };
    check(
        "echo SKILLFORGE_CENSORED >&2; exit 125",
        ExitClass::Censored,
    )
    .await;
    check(
        "echo CE_OPTIMIZE_CENSORED >&2; exit 125",
        ExitClass::Censored,
    )
    .await;
    // The marker early on, then far more stderr than the cap keeps.
    check(
        "echo 'SKILLFORGE_CENSORED: flaky' >&2; head -c 200000 /dev/zero >&2; exit 125",
        ExitClass::Censored,
    )
    .await;
    check(
        "echo SKILLFORGE_CENSORED; exit 125",
        ExitClass::Failed { code: 125 },
    )
    .await;
    check("exit 125", ExitClass::Failed { code: 125 }).await;
    check(
        "echo SKILLFORGE_CENSORED >&2; exit 1",
        ExitClass::Failed { code: 1 },
    )
    .await;
}

#[tokio::test]
async fn death_by_signal_is_killed() {
    let outcome = run_shell("kill -KILL $$").await;
    assert_eq!(outcome.exit, ExitClass::Killed { signal: 9 });
    assert_eq!(outcome.exit_code, None);

    // A shell reports its child's death by SIGALRM as 128 + 14.
    let outcome = run_shell(r#"sh -c 'kill -ALRM $$'; exit $?"#).await;
    assert_eq!(outcome.exit, ExitClass::Killed { signal: 14 });
    assert_eq!(outcome.exit_code, Some(142));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_kills_the_whole_tree_promptly() {
    let (payload, guard) = tagged(ProcessPayload {
        grace_ms: Some(300),
        ..ProcessPayload::shell(ESCAPING_TREE)
    });
    let timeout = Duration::from_secs(2);
    let started = Instant::now();
    let run =
        tokio::spawn(
            async move { run_process(&payload, timeout, &CancellationToken::new()).await },
        );
    // The test is only meaningful if all three sleeps started before the timeout.
    assert!(
        eventually(timeout, || guard.count_sleeps() == N_TREE_SLEEPS).await,
        "{:?}",
        guard.survivors()
    );

    let outcome = run.await.expect("join run").expect("run process");
    let elapsed = started.elapsed();
    assert_eq!(outcome.exit, ExitClass::TimedOut);
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
    assert_eq!(guard.survivors(), Vec::new());
    assert_eq!(run_marker_survivors(&outcome), Vec::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_kills_the_whole_tree_promptly() {
    let (payload, guard) = tagged(ProcessPayload {
        grace_ms: Some(300),
        ..ProcessPayload::shell(ESCAPING_TREE)
    });
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { run_process(&payload, LONG, &cancel).await }
    });
    assert!(
        eventually(LONG, || guard.count_sleeps() == N_TREE_SLEEPS).await,
        "{:?}",
        guard.survivors()
    );

    let cancelled_at = Instant::now();
    cancel.cancel();
    let outcome = run.await.expect("join run").expect("run process");
    let elapsed = cancelled_at.elapsed();
    // The shell dies of SIGTERM within the grace; the trapped sleep needs the SIGKILL.
    assert_eq!(outcome.exit, ExitClass::Killed { signal: 15 });
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
    assert_eq!(guard.survivors(), Vec::new());
    assert_eq!(run_marker_survivors(&outcome), Vec::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_of_a_child_ignoring_sigterm_ends_with_sigkill() {
    let (payload, guard) = tagged(ProcessPayload {
        grace_ms: Some(200),
        ..ProcessPayload::shell(r#"trap "" TERM; sleep 300; echo not reached"#)
    });
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { run_process(&payload, LONG, &cancel).await }
    });
    assert!(
        eventually(LONG, || guard.count_sleeps() == 1).await,
        "{:?}",
        guard.survivors()
    );
    cancel.cancel();
    let outcome = run.await.expect("join run").expect("run process");
    assert_eq!(outcome.exit, ExitClass::Killed { signal: 9 });
    assert_eq!(guard.survivors(), Vec::new());
}

#[tokio::test]
async fn backgrounded_grandchildren_of_a_passing_command_do_not_survive() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pids = dir.path().join("pids");
    let line = format!(
        "sleep 300 & echo $! > {pids}; \
         setsid sleep 300 & echo $! >> {pids}; \
         nohup sleep 300 >/dev/null 2>&1 & echo $! >> {pids}; \
         echo done",
        pids = pids.display()
    );
    let (payload, guard) = tagged(ProcessPayload::shell(line));
    let started = Instant::now();
    let outcome = run(&payload).await;
    assert_eq!(outcome.exit, ExitClass::Passed);
    // The first sleep holds stdout open; the run must not wait for it.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(outcome.stdout_tail, "done\n");

    let pids = fs::read_to_string(&pids).expect("read pids");
    assert_eq!(pids.lines().count(), 3, "{pids}");
    for pid in pids.lines() {
        let pid: u32 = pid.parse().expect("pid");
        assert_eq!(
            live_comm(pid).as_deref().filter(|&comm| comm == "sleep"),
            None,
            "pid {pid}"
        );
    }
    assert_eq!(guard.survivors(), Vec::new());
    assert_eq!(run_marker_survivors(&outcome), Vec::new());
}

#[tokio::test]
async fn output_is_capped_to_its_tail_with_a_marker() {
    let one_mb = 1024 * 1024;
    let outcome = run_shell(&format!(
        "head -c {one_mb} /dev/zero | tr '\\0' 'a'; printf END; head -c {one_mb} /dev/zero >&2"
    ))
    .await;
    assert_eq!(outcome.exit, ExitClass::Passed);
    let n_truncated = one_mb + 3 - DEFAULT_MAX_OUTPUT_BYTES;
    let marker = truncation_marker(n_truncated as u64);
    assert!(marker.starts_with(TRUNCATION_MARKER));
    let body = outcome
        .stdout_tail
        .strip_prefix(&marker)
        .expect("stdout starts with the marker");
    assert_eq!(body.len(), DEFAULT_MAX_OUTPUT_BYTES);
    assert!(body.ends_with("aaaEND"));
    assert_eq!(outcome.detail["stdout_truncated_bytes"], n_truncated);
    let body = outcome
        .stderr_tail
        .strip_prefix(TRUNCATION_MARKER)
        .expect("stderr marker");
    assert!(body.ends_with(&"\0".repeat(DEFAULT_MAX_OUTPUT_BYTES)));
}

#[tokio::test]
async fn capped_multibyte_output_is_cut_at_a_character_boundary() {
    // About 1 MB of 2-, 3- and 4-byte characters, through stdin and back out of `cat`.
    let text = "é€😀\n".repeat(1024 * 1024 / 10);
    for cap in [1000, 1001, 1002, 1003] {
        let payload = ProcessPayload {
            stdin: Some(text.clone()),
            max_output_bytes: Some(cap),
            ..argv(&["cat"])
        };
        let outcome = run(&payload).await;
        assert_eq!(outcome.exit, ExitClass::Passed);
        let (marker, body) = outcome.stdout_tail.split_once('\n').expect("marker line");
        assert!(marker.starts_with(TRUNCATION_MARKER), "{marker}");
        assert!(!body.contains('\u{FFFD}'), "cap {cap}: {body:?}");
        assert!(
            body.len() <= cap && body.len() + 4 > cap,
            "cap {cap}: {}",
            body.len()
        );
        assert!(text.ends_with(body), "cap {cap}");
    }
}

#[tokio::test]
async fn environment_is_the_allowlist_plus_explicit_env_plus_the_marker() {
    let (hidden_name, _) = std::env::vars()
        .find(|(name, _)| !DEFAULT_ENV_ALLOWLIST.contains(&name.as_str()) && name != TAG_ENV)
        .expect("the test's environment has a variable outside the allowlist");
    let mut payload = argv(&["env"]);
    payload
        .env
        .insert("SKILLFORGE_SECRET".into(), "s3cret".into());
    let outcome = run(&payload).await;
    assert_eq!(outcome.exit, ExitClass::Passed);
    let names: Vec<&str> = outcome
        .stdout_tail
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(n, _)| n)
        .collect();
    assert!(
        !names.contains(&hidden_name.as_str()),
        "{hidden_name} leaked: {names:?}"
    );
    assert!(
        outcome
            .stdout_tail
            .lines()
            .any(|line| line == "SKILLFORGE_SECRET=s3cret")
    );
    let run_id = outcome.detail["run_id"].as_str().expect("run id");
    assert!(
        outcome
            .stdout_tail
            .lines()
            .any(|line| line == format!("{RUN_ID_ENV}={run_id}"))
    );
    if let Ok(path) = std::env::var("PATH") {
        assert!(
            outcome
                .stdout_tail
                .lines()
                .any(|line| line == format!("PATH={path}"))
        );
    }

    // The same variable passes once allowlisted.
    let payload = ProcessPayload {
        env_allowlist: Some(vec![hidden_name.clone()]),
        ..argv(&["env"])
    };
    let outcome = run(&payload).await;
    let prefix = format!("{hidden_name}=");
    assert!(
        outcome
            .stdout_tail
            .lines()
            .any(|line| line.starts_with(&prefix)),
        "{outcome:?}"
    );
    assert!(
        !outcome
            .stdout_tail
            .lines()
            .any(|line| line.starts_with("PATH=")),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn stdin_is_delivered_and_otherwise_empty() {
    let payload = ProcessPayload {
        stdin: Some("line one\nline two\n".into()),
        ..argv(&["cat"])
    };
    assert_eq!(run(&payload).await.stdout_tail, "line one\nline two\n");
    let outcome = run(&argv(&["cat"])).await;
    assert_eq!(
        (outcome.exit, outcome.stdout_tail.as_str()),
        (ExitClass::Passed, "")
    );
}

#[tokio::test]
async fn cwd_is_honoured() {
    let dir = tempfile::tempdir().expect("tempdir");
    let payload = ProcessPayload {
        cwd: Some(dir.path().to_owned()),
        ..ProcessPayload::shell("pwd -P")
    };
    let outcome = run(&payload).await;
    let expected = dir.path().canonicalize().expect("canonical tempdir");
    assert_eq!(
        outcome.stdout_tail.trim_end(),
        expected.to_str().expect("utf-8 path")
    );
}

#[tokio::test]
async fn runner_parses_its_payload() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = RunContext::detached(dir.path().to_owned());
    let spec = |payload: serde_json::Value| RunSpec {
        job_id: "job-1".into(),
        payload,
        timeout: LONG,
    };
    let outcome = ProcessRunner
        .run(
            &spec(serde_json::json!({ "command": { "argv": ["echo", "hi"] } })),
            &ctx,
        )
        .await
        .expect("run");
    assert_eq!(
        (outcome.exit, outcome.stdout_tail.as_str()),
        (ExitClass::Passed, "hi\n")
    );

    let error = ProcessRunner
        .run(&spec(serde_json::json!({ "command": 3 })), &ctx)
        .await;
    assert!(matches!(
        error,
        Err(RunnerError::InvalidPayload {
            runner: "process",
            ..
        })
    ));
}

#[tokio::test]
async fn output_held_open_by_an_unreachable_process_does_not_hang_the_run() {
    // A descendant that leaves the group and drops the marker is beyond the runner's reach
    // (a documented limit); it holds stdout open, and the run must still finish promptly.
    // The fifo makes the shell wait until the escapee has dropped the marker.
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("ready");
    let (payload, guard) = tagged(ProcessPayload::shell(format!(
        "mkfifo {fifo}; setsid env -u {RUN_ID_ENV} sh -c 'echo > {fifo}; exec sleep 300' & \
         read _ < {fifo}; echo started",
        fifo = fifo.display()
    )));
    let started = Instant::now();
    let outcome = run(&payload).await;
    assert_eq!(outcome.exit, ExitClass::Passed);
    assert_eq!(outcome.stdout_tail, "started\n");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    // The escapee really escaped, so the bounded wait on the pipe was what ended the run.
    assert_eq!(guard.count_sleeps(), 1, "{:?}", guard.survivors());
    drop(guard); // kills the escaped sleep
}

/// A leased run's child sees its job id, attempt and fencing token (what the fault soak's
/// effects log records); a payload's own entries cannot override them, and a run without a lease
/// gets none of them.
#[tokio::test]
async fn a_leased_run_sees_its_job_id_attempt_and_fencing_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let line = "echo \"$SKILLFORGE_JOB_ID/$SKILLFORGE_JOB_ATTEMPT/$SKILLFORGE_FENCING_TOKEN\"";
    let mut payload = serde_json::json!({ "command": { "shell": line }, "env": { "SKILLFORGE_FENCING_TOKEN": "99" } });
    let spec = RunSpec {
        job_id: "job-7".into(),
        payload: payload.take(),
        timeout: LONG,
    };
    let mut ctx = RunContext::detached(dir.path().to_owned());
    let unleased = ProcessRunner.run(&spec, &ctx).await.expect("run");
    assert_eq!(unleased.stdout_tail, "//99\n");
    ctx.attempt = 2;
    ctx.fencing_token = 5;
    let leased = ProcessRunner.run(&spec, &ctx).await.expect("run");
    assert_eq!(leased.stdout_tail, "job-7/2/5\n");
}

/// A command that restores SIGPIPE's default action (every printing `skillforge` command, so
/// `… | head` ends quietly) also runs jobs in-process: a child that exits without reading its
/// stdin must end the write with EPIPE, not kill the command running it.
///
/// The scenario runs in a process of its own (this test binary run again, its output to
/// /dev/null): with SIGPIPE at its default, a write by the test harness to a pipe the runner
/// had closed would kill the test process too, which is not what is tested.
#[test]
fn a_child_that_exits_unread_does_not_kill_a_process_with_the_default_sigpipe() {
    if std::env::var_os(SIGPIPE_SCENARIO).is_some() {
        sigpipe_scenario();
        return;
    }
    let status = std::process::Command::new(std::env::current_exe().expect("this test binary"))
        .args([
            "--exact",
            "a_child_that_exits_unread_does_not_kill_a_process_with_the_default_sigpipe",
            "--test-threads",
            "1",
        ])
        .env(SIGPIPE_SCENARIO, "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("run the scenario");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        None,
        "the scenario's process was killed by a signal (13 = SIGPIPE): {status:?}"
    );
    assert!(status.success(), "the scenario failed: {status:?}");
}

/// Set in the environment of the process that runs [`sigpipe_scenario`].
const SIGPIPE_SCENARIO: &str = "SKILLFORGE_TEST_SIGPIPE_SCENARIO";

/// SIGPIPE at its default action, then a job whose child (`true`) exits before reading 1 MiB of
/// stdin: the run passes and the process lives.
fn sigpipe_scenario() {
    // SAFETY: SIG_DFL installs no handler; this process runs only this scenario.
    #[expect(unsafe_code, reason = "setting a signal disposition; see SAFETY")]
    unsafe {
        nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGPIPE,
            nix::sys::signal::SigHandler::SigDfl,
        )
        .expect("restore SIGPIPE's default");
    }
    let payload = ProcessPayload {
        stdin: Some("x".repeat(1024 * 1024)),
        ..argv(&["true"])
    };
    let outcome = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(run(&payload));
    assert_eq!(outcome.exit, ExitClass::Passed, "{outcome:?}");
}
