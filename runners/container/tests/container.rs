//! The container runner against a real engine (podman's Docker-compatible API, started by
//! `scripts/containers-env`): exit classes, timeouts, cancel, output caps, limits, network,
//! leftovers of a SIGKILLed worker.

mod support;

use std::process::Stdio;
use std::time::Duration;

use skillforge_runner::{CancellationToken, ExitClass};
use skillforge_runner_container::{
    Command, ContainerError, ContainerPayload, LABEL_OWNER, Limits, Network, PullPolicy,
    resolve_host, run_container, sweep_leftovers,
};
use support::{containers_of, job_id, run, run_in, shell, test_image, wait_running};

const LONG: Duration = Duration::from_secs(60);

#[tokio::test]
async fn each_exit_class() {
    let Some(image) = test_image() else { return };
    let check = |line: &'static str, expected: ExitClass| {
        let image = image.clone();
        async move {
            let outcome = run(&shell(&image, line), LONG).await;
            assert_eq!(outcome.exit, expected, "`{line}`: {outcome:?}");
            outcome
        }
    };
    let passed = check("echo out; echo err >&2", ExitClass::Passed).await;
    assert_eq!(
        (passed.stdout_tail.as_str(), passed.stderr_tail.as_str()),
        ("out\n", "err\n")
    );
    assert_eq!(passed.exit_code, Some(0));
    let failed = check("exit 3", ExitClass::Failed { code: 3 }).await;
    assert_eq!(failed.exit_code, Some(3));
    check("exit 124", ExitClass::TimedOut).await;
    // PID 1 cannot SIGKILL itself: a child shell dies of it and the engine reports 128+9.
    check(
        "sh -c 'kill -KILL $$'; exit $?",
        ExitClass::Killed { signal: 9 },
    )
    .await;
    check(
        "echo SKILLFORGE_CENSORED >&2; exit 125",
        ExitClass::Censored,
    )
    .await;
    check("exit 125", ExitClass::Failed { code: 125 }).await;
    let not_found = run(&shell(&image, "no-such-program"), LONG).await;
    assert_eq!(not_found.exit.label(), "not_runnable", "{not_found:?}");

    let argv = ContainerPayload::new(&image, Command::Argv(vec!["/no/such/program".into()]));
    let outcome = run(&argv, LONG).await;
    assert!(
        matches!(&outcome.exit, ExitClass::NotRunnable { reason } if reason.contains("/no/such/program")),
        "{outcome:?}"
    );

    let mut missing = shell("localhost/skillforge-no-such-image:none", "true");
    missing.pull = PullPolicy::Never;
    let outcome = run(&missing, LONG).await;
    assert!(
        matches!(&outcome.exit, ExitClass::NotRunnable { reason } if reason.contains("no-such-image")),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn the_outcome_reports_engine_image_digest_and_removal() {
    let Some(image) = test_image() else { return };
    let outcome = run(&shell(&image, "true"), LONG).await;
    let detail = &outcome.detail;
    assert!(
        detail["engine"]["name"]
            .as_str()
            .is_some_and(|n| n.contains("Podman")),
        "{detail}"
    );
    assert!(
        detail["engine"]["api_version"]
            .as_str()
            .is_some_and(|v| v.starts_with("1.")),
        "{detail}"
    );
    let digest = detail["image"]["digest"].as_str().expect("digest");
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{detail}"
    );
    assert_eq!(detail["container_removed"], true, "{detail}");
    let name = detail["container_name"].as_str().expect("name");
    let inspected = support::engine()
        .await
        .docker
        .inspect_container(name, None)
        .await;
    assert!(
        matches!(
            inspected,
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404,
                ..
            })
        ),
        "container {name} still exists: {inspected:?}"
    );
}

#[tokio::test]
async fn env_reaches_the_command_and_the_work_dir_is_mounted() {
    let Some(image) = test_image() else { return };
    let dir = tempfile::tempdir().expect("work dir");
    std::fs::write(dir.path().join("input.txt"), "from the host\n").expect("write input");
    let mut payload = shell(
        &image,
        "cat input.txt; pwd; echo \"$SECRET_TOKEN\" > out.txt",
    );
    payload.env.insert("SECRET_TOKEN".into(), "s3cret".into());
    let id = job_id();
    let outcome = run_in(&payload, &id, dir.path(), LONG, &CancellationToken::new()).await;
    assert_eq!(outcome.exit, ExitClass::Passed, "{outcome:?}");
    assert_eq!(outcome.stdout_tail, "from the host\n/work\n");
    let written = std::fs::read_to_string(dir.path().join("out.txt")).expect("out.txt on the host");
    assert_eq!(written, "s3cret\n");
}

#[tokio::test]
async fn further_mounts_show_read_only_over_the_work_dir() {
    let Some(image) = test_image() else { return };
    let dir = tempfile::tempdir().expect("work dir");
    let handed = tempfile::tempdir().expect("handed dir");
    std::fs::write(handed.path().join("SKILL.md"), "# handed\n").expect("write skill");
    let mut payload = shell(
        &image,
        "cat .skills/x/SKILL.md; echo change > .skills/x/SKILL.md 2>/dev/null || echo read-only",
    );
    payload.mounts.push(skillforge_runner_container::Mount {
        source: handed.path().to_path_buf(),
        target: "/work/.skills/x".into(),
        read_only: true,
    });
    let outcome = run_in(
        &payload,
        &job_id(),
        dir.path(),
        LONG,
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(outcome.exit, ExitClass::Passed, "{outcome:?}");
    assert_eq!(outcome.stdout_tail, "# handed\nread-only\n");
    assert_eq!(
        std::fs::read_to_string(handed.path().join("SKILL.md")).unwrap(),
        "# handed\n"
    );
    assert!(
        !dir.path().join(".skills/x/SKILL.md").exists(),
        "the handed file stays out of the host work dir"
    );
}

#[tokio::test]
async fn a_timeout_kills_a_term_ignoring_container_and_removes_it() {
    let Some(image) = test_image() else { return };
    let mut payload = shell(
        &image,
        "trap '' TERM; echo started; while :; do sleep 1; done",
    );
    payload.grace_ms = Some(300);
    let id = job_id();
    let dir = tempfile::tempdir().expect("work dir");
    let outcome = run_in(
        &payload,
        &id,
        dir.path(),
        Duration::from_secs(2),
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(outcome.exit, ExitClass::TimedOut, "{outcome:?}");
    assert_eq!(outcome.exit_code, None);
    assert_eq!(outcome.stdout_tail, "started\n");
    assert_eq!(outcome.detail["container_removed"], true);
    assert_eq!(
        containers_of(&id).await,
        Vec::<String>::new(),
        "the container is gone"
    );
}

#[tokio::test]
async fn cancel_kills_the_container_that_ignores_sigterm() {
    let Some(image) = test_image() else { return };
    // The worker notices a cancel on its next heartbeat (DESIGN §4) and cancels the token; from
    // there the runner stops the container (SIGTERM, then SIGKILL after the grace period, since
    // the script ignores TERM) and removes it. No wall-clock bound is asserted: how long podman
    // takes depends on the host's load; the kill signal and the removal are what is checked.
    let mut payload = shell(&image, "trap '' TERM; while :; do sleep 1; done");
    payload.grace_ms = Some(200);
    let id = job_id();
    let dir = tempfile::tempdir().expect("work dir");
    let cancel = CancellationToken::new();
    let run = {
        let (payload, id, path, cancel) = (
            payload.clone(),
            id.clone(),
            dir.path().to_owned(),
            cancel.clone(),
        );
        tokio::spawn(async move { run_in(&payload, &id, &path, LONG, &cancel).await })
    };
    wait_running(&id, LONG).await;
    cancel.cancel();
    let outcome = tokio::time::timeout(LONG, run)
        .await
        .expect("the cancelled run ends")
        .expect("run task");
    assert_eq!(outcome.exit, ExitClass::Killed { signal: 9 }, "{outcome:?}");
    assert_eq!(
        containers_of(&id).await,
        Vec::<String>::new(),
        "the container is gone"
    );
}

#[tokio::test]
async fn output_is_capped_per_stream_with_the_truncation_marker() {
    let Some(image) = test_image() else { return };
    let mut payload = shell(
        &image,
        "head -c 100000 /dev/zero | tr '\\0' a; printf END; head -c 5000 /dev/zero | tr '\\0' b >&2",
    );
    payload.max_output_bytes = Some(1000);
    let outcome = run(&payload, LONG).await;
    assert_eq!(outcome.exit, ExitClass::Passed, "{outcome:?}");
    let stdout = outcome
        .stdout_tail
        .strip_prefix("[... truncated 99003 bytes]\n")
        .unwrap_or_else(|| panic!("stdout marker: {:?}", head(&outcome.stdout_tail)));
    assert_eq!(stdout, format!("{}END", "a".repeat(997)));
    let stderr = outcome
        .stderr_tail
        .strip_prefix("[... truncated 4000 bytes]\n")
        .unwrap_or_else(|| panic!("stderr marker: {:?}", head(&outcome.stderr_tail)));
    assert_eq!(stderr, "b".repeat(1000));
    assert_eq!(outcome.detail["stdout_truncated_bytes"], 99003);
    assert_eq!(outcome.detail["stderr_truncated_bytes"], 4000);
}

/// A long log, many lines, from a container that exits at once: all of it is kept (podman's
/// follow of an exiting container drops the end of such a log, podman#21914).
#[tokio::test]
async fn a_long_log_of_a_container_that_exits_at_once_is_read_to_its_end() {
    let Some(image) = test_image() else { return };
    let mut payload = shell(&image, "seq 1 400000; echo LAST");
    payload.max_output_bytes = Some(64);
    let outcome = run(&payload, LONG).await;
    assert_eq!(outcome.exit, ExitClass::Passed, "{outcome:?}");
    // `seq 1 400000` prints 2 688 895 bytes; "LAST\n" 5 more.
    assert_eq!(
        outcome.detail["stdout_truncated_bytes"],
        2_688_900 - 64,
        "{outcome:?}"
    );
    assert!(
        outcome.stdout_tail.ends_with("399999\n400000\nLAST\n"),
        "{:?}",
        outcome.stdout_tail
    );
}

/// The first 80 characters of `text`, for a failure message.
fn head(text: &str) -> String {
    text.chars().take(80).collect()
}

#[tokio::test]
async fn network_none_has_no_network() {
    let Some(image) = test_image() else { return };
    let listener = std::net::TcpListener::bind("0.0.0.0:0").expect("listen");
    let port = listener.local_addr().expect("addr").port();
    // Accept and close at once, so a connected `nc` ends.
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            drop(stream);
        }
    });
    // Reach the host through the container's default gateway.
    let line = format!(
        "ls /sys/class/net | tr '\\n' ' '; echo; \
         gw=$(ip route | awk '/^default/ {{print $3}}'); \
         if [ -n \"$gw\" ] && nc -w 3 \"$gw\" {port} </dev/null; then echo reached; else echo unreachable; fi"
    );
    let mut none = shell(&image, &line);
    none.network = Network::None;
    let outcome = run(&none, LONG).await;
    assert_eq!(outcome.stdout_tail, "lo \nunreachable\n", "{outcome:?}");

    // The same probe does reach the host on the default network, so the check above can fail.
    let mut default = shell(&image, &line);
    default.network = Network::Default;
    let outcome = run(&default, LONG).await;
    assert!(
        outcome.stdout_tail.ends_with("reached\n") && !outcome.stdout_tail.contains("unreachable"),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn memory_and_pids_limits_hold() {
    let Some(image) = test_image() else { return };
    // The shell holds a 100 MB string against a 32 MiB limit: the kernel kills it (SIGKILL).
    let hog = "x=$(head -c 100000000 /dev/zero | tr '\\0' a); echo ${#x}";
    let mut memory = shell(&image, hog);
    memory.limits = Limits {
        memory_bytes: Some(32 * 1024 * 1024),
        ..Limits::default()
    };
    let outcome = run(&memory, LONG).await;
    assert_eq!(outcome.exit, ExitClass::Killed { signal: 9 }, "{outcome:?}");

    let forks = "for i in $(seq 40); do sleep 30 & done; echo started";
    let mut pids = shell(&image, forks);
    pids.limits = Limits {
        pids: Some(10),
        cpus: Some(0.5),
        ..Limits::default()
    };
    let outcome = run(&pids, LONG).await;
    assert_eq!(outcome.exit, ExitClass::Failed { code: 2 }, "{outcome:?}");
    assert!(outcome.stderr_tail.contains("can't fork"), "{outcome:?}");

    // Without the limits both commands pass, so the checks above can fail.
    for line in [hog, forks] {
        let outcome = run(&shell(&image, line), LONG).await;
        assert_eq!(
            outcome.exit,
            ExitClass::Passed,
            "`{line}` unlimited: {outcome:?}"
        );
    }
}

#[tokio::test]
async fn an_unreachable_engine_is_an_environment_error_saying_how_to_start_one() {
    let payload = ContainerPayload {
        host: Some("unix:///nonexistent/skillforge-test.sock".into()),
        ..shell("any", "true")
    };
    let dir = tempfile::tempdir().expect("work dir");
    let error = run_container(&payload, "job", dir.path(), LONG, &CancellationToken::new())
        .await
        .expect_err("no engine there");
    assert!(error.is_environment(), "{error}");
    let message = error.to_string();
    assert!(matches!(error, ContainerError::EngineUnreachable { .. }));
    assert!(
        message.contains("/nonexistent/skillforge-test.sock"),
        "{message}"
    );
    assert!(
        message.contains("podman system service") && message.contains("DOCKER_HOST"),
        "{message}"
    );
}

/// Not a test on its own: the "worker" that `a_sigkilled_workers_container_is_removed_by_the_next`
/// starts and SIGKILLs (a separate process, so its owner marker dies with it).
#[tokio::test]
#[ignore = "run as a child process by a_sigkilled_workers_container_is_removed_by_the_next"]
async fn child_worker_runs_a_long_container() {
    let (Ok(image), Ok(id)) = (
        std::env::var("SKILLFORGE_TEST_IMAGE"),
        std::env::var("SF_CHILD_JOB"),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().expect("work dir");
    run_in(
        &shell(&image, "sleep 600"),
        &id,
        dir.path(),
        LONG * 10,
        &CancellationToken::new(),
    )
    .await;
}

#[tokio::test]
async fn a_sigkilled_workers_container_is_removed_by_the_next() {
    let Some(_) = test_image() else { return };
    let id = job_id();
    let mut child = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "child_worker_runs_a_long_container",
            "--ignored",
            "--nocapture",
        ])
        .env("SF_CHILD_JOB", &id)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the child worker");
    wait_running(&id, LONG).await;
    child.kill().expect("SIGKILL the child worker");
    child.wait().expect("reap the child worker");
    // Every worker on this host sweeps every few seconds, and other tests run workers (and this
    // binary's other sweeping test) at the same time: one of those sweeps may remove the
    // container before this one does. Either way it is gone after this sweep, which could only
    // fail to see it because another sweep removed it first (printed).
    let left = containers_of(&id).await;
    assert!(left.len() <= 1, "one container per run: {left:?}");
    let removed = sweep_leftovers(&resolve_host(None)).await.expect("sweep");
    assert_eq!(
        containers_of(&id).await,
        Vec::<String>::new(),
        "the dead worker's container is gone"
    );
    if let [name] = left.as_slice() {
        let name = name.trim_start_matches('/');
        if !removed.iter().any(|n| n == name) {
            eprintln!("{name} was removed by another process's sweep before this one listed it");
        }
    }
}

#[tokio::test]
async fn a_live_workers_container_is_not_swept() {
    let Some(image) = test_image() else { return };
    let id = job_id();
    let cancel = CancellationToken::new();
    let run = {
        let (image, id, cancel) = (image.clone(), id.clone(), cancel.clone());
        tokio::spawn(async move {
            let dir = tempfile::tempdir().expect("work dir");
            run_in(&shell(&image, "sleep 600"), &id, dir.path(), LONG, &cancel).await
        })
    };
    wait_running(&id, LONG).await;
    sweep_leftovers(&resolve_host(None)).await.expect("sweep");
    assert_eq!(
        containers_of(&id).await.len(),
        1,
        "this live process owns it"
    );
    cancel.cancel();
    let outcome = run.await.expect("run task");
    assert_eq!(outcome.exit.label(), "killed");
}

/// Listing containers while others exit and are removed: podman 4.3 lists an exited container
/// that is not yet cleaned up as `stopped`, which the Docker API does not have; the listing is
/// asked again until it parses (bollard#701), so it never fails for it.
#[tokio::test]
async fn listing_while_containers_exit_never_fails_on_a_transient_state() {
    let Some(image) = test_image() else { return };
    let runs: Vec<_> = (0..6)
        .map(|_| {
            let image = image.clone();
            tokio::spawn(async move {
                for _ in 0..4 {
                    let outcome = run(&shell(&image, "true"), LONG).await;
                    assert_eq!(outcome.exit, ExitClass::Passed, "{outcome:?}");
                }
            })
        })
        .collect();
    let engine = support::engine().await;
    let mut listings = 0;
    while !runs.iter().all(tokio::task::JoinHandle::is_finished) {
        engine
            .list_containers(true, &[LABEL_OWNER.to_owned()])
            .await
            .unwrap_or_else(|error| panic!("listing {listings} failed: {error}"));
        listings += 1;
    }
    for joined in runs {
        joined.await.expect("run task");
    }
    assert!(listings > 0, "the engine was listed while containers ran");
}
