//! Containers end to end on the engine `scripts/test` starts (podman's Docker-compatible API):
//! `skillforge verify --image` against plain `verify`, `jobs submit --image` on a worker, and a
//! SIGKILLed worker's container removed by the next worker.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use skillforge_tests::{Home, two_commit_repo, verify, wait_exit};

/// The image of the harness's engine; `None` (loudly) outside CI when there is no engine.
fn test_image() -> Option<String> {
    let host = std::env::var("DOCKER_HOST").ok().filter(|h| !h.is_empty());
    let image = std::env::var("SKILLFORGE_TEST_IMAGE")
        .ok()
        .filter(|i| !i.is_empty());
    match (host, image) {
        (Some(_), Some(image)) => Some(image),
        _ if std::env::var_os("CI").is_some()
            || std::env::var_os("SKILLFORGE_REQUIRE_CONTAINERS").is_some() =>
        {
            panic!(
                "container tests must run here but DOCKER_HOST / SKILLFORGE_TEST_IMAGE are unset: run scripts/test"
            )
        }
        _ => {
            eprintln!(
                "\n*** SKIPPED: container test needs an engine; run `source scripts/containers-env && sf_containers_up` (or scripts/test). ***\n"
            );
            None
        }
    }
}

/// What a verdict comparison looks at: exit code, verdict, hard, per-command status and exit code.
fn verdict_of(code: Option<i32>, report: &Value) -> Value {
    let commands: Vec<Value> = report["commands"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| serde_json::json!([c["status"], c["exit_code"]]))
                .collect()
        })
        .unwrap_or_default();
    serde_json::json!({"code": code, "verdict": report["verdict"], "hard": report["hard"], "commands": commands})
}

/// Names of the engine's containers (all states) labelled `label`.
fn containers_labelled(label: &str) -> Vec<String> {
    let host = std::env::var("DOCKER_HOST").expect("DOCKER_HOST");
    let out = Command::new("podman")
        .args([
            "--url",
            &host,
            "ps",
            "-a",
            "--filter",
            &format!("label={label}"),
            "--format",
            "{{.Names}}",
        ])
        .output()
        .expect("run podman ps");
    assert!(
        out.status.success(),
        "podman ps: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .filter(|l| !l.is_empty())
        .collect()
}

// S-38 in a container: the same commands give the same verdicts with `--image` as without, and the
// report says the container ran them (engine, image digest).
#[test]
fn s38_verify_image_passes_and_fails_like_verify() {
    let Some(image) = test_image() else { return };
    let (repo, _, head) = two_commit_repo();
    let home = Home::embedded();
    let cases: [&[&str]; 3] = [
        &[
            "test -f src/lib.rs",
            "grep -q 'pub fn f3' src/lib.rs",
            "echo a,b && true",
        ],
        &["true", "exit 4", "true"],
        &["test -f no-such-file"],
    ];
    for commands in cases {
        let (code, plain, stderr) = verify(&home, &[], repo.path(), commands);
        let (image_code, boxed, image_stderr) =
            verify(&home, &["--image", &image], repo.path(), commands);
        assert_eq!(
            verdict_of(image_code, &boxed),
            verdict_of(code, &plain),
            "{commands:?}\n{stderr}\n{image_stderr}"
        );
        assert_eq!(boxed["confinement"], "container", "{boxed:#}");
        assert_eq!(boxed["commit"], head.as_str());
        assert_eq!(boxed["sandbox_removed"], true);
        let digest = boxed["container"]["image"]["digest"]
            .as_str()
            .unwrap_or_default();
        assert!(digest.starts_with("sha256:"), "{boxed:#}");
        assert!(
            plain.get("container").is_none(),
            "no container key without --image: {plain:#}"
        );
    }
    let (code, report, _) = verify(&home, &["--image", &image], repo.path(), &["exit 4"]);
    assert_eq!(
        (code, &report["verdict"], &report["hard"]),
        (Some(1), &Value::from("fail"), &Value::from(0.0))
    );
}

// S-39 in a container: a missing image is no verdict (skipped, exit 3), never a fabricated fail.
#[test]
fn s39_verify_image_with_a_missing_image_is_skipped() {
    let Some(_) = test_image() else { return };
    let (repo, _, _) = two_commit_repo();
    let home = Home::embedded();
    let (code, report, stderr) = verify(
        &home,
        &["--image", "localhost/skillforge-no-such-image:none"],
        repo.path(),
        &["true"],
    );
    assert_eq!(code, Some(3), "{report:#}\n{stderr}");
    assert_eq!(report["verdict"], "skipped");
    assert!(report["hard"].is_null());
    assert!(
        report["reason"]
            .as_str()
            .is_some_and(|r| r.contains("no-such-image")),
        "{report:#}"
    );
}

#[test]
fn verify_image_without_an_engine_is_exit_3_saying_how_to_start_one() {
    let (repo, _, _) = two_commit_repo();
    let home = Home::embedded();
    let out = home
        .cmd()
        .env("DOCKER_HOST", "unix:///nonexistent/skillforge.sock")
        .args(["verify", "--repo"])
        .arg(repo.path())
        .args(["--image", "any", "--", "true"])
        .output()
        .expect("run verify");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("/nonexistent/skillforge.sock") && stderr.contains("podman system service"),
        "{stderr}"
    );
}

#[test]
fn jobs_submit_image_runs_the_command_in_a_container() {
    let Some(image) = test_image() else { return };
    let home = Home::embedded();
    let out = home
        .cmd()
        .args([
            "--json",
            "jobs",
            "submit",
            "--wait",
            "--image",
            &image,
            "--env",
            "GREETING=hello",
            "--",
        ])
        .args([
            "sh",
            "-c",
            "echo $GREETING from $(hostname -s 2>/dev/null || echo c) in $(pwd)",
        ])
        .output()
        .expect("submit");
    let job: Value = serde_json::from_slice(&out.stdout).expect("job JSON");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{job:#}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(job["kind"], "container", "{job:#}");
    let stdout = job["outcome"]["stdout_tail"].as_str().unwrap_or_default();
    assert!(
        stdout.starts_with("hello from ") && stdout.ends_with(" in /work\n"),
        "{job:#}"
    );
    assert_eq!(job["outcome"]["detail"]["container_removed"], true);
}

/// A worker of `home` on a host of its own: a private UTS namespace whose hostname is `host`
/// (the harness runs as root, as `scripts/test` does). Leftover sweepers skip containers of
/// other hosts, so the workers of every other test running meanwhile (all on this machine's
/// hostname) leave this worker's containers alone, as sweepers on other machines would.
fn spawn_worker_on_host(home: &Home, name: &str, host: &str) -> std::process::Child {
    let log =
        std::fs::File::create(home.path().join(format!("worker-{name}.log"))).expect("log file");
    Command::new("unshare")
        .args(["--uts", "sh", "-c", "hostname \"$0\" && exec \"$@\"", host])
        .arg(skillforge_tests::bin())
        .arg("--home")
        .arg(home.path())
        .args(["worker", "--name", name])
        .env("SKILLFORGE_LOG", "info")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn a worker in its own UTS namespace")
}

#[test]
fn a_sigkilled_workers_container_is_removed_by_the_next_worker() {
    let Some(image) = test_image() else { return };
    let home = Home::embedded();
    // Both workers on one host of their own: a sweeper of any other test's worker would remove
    // the dead worker's container before this test could see that it outlived its worker.
    let host = format!("sf-sweep-{}", std::process::id());
    let mut first = spawn_worker_on_host(&home, "first", &host);
    let id = home.submit(&["--image", &image, "--attempts", "1"], &["sleep", "600"]);
    let label = format!("io.skillforge.job={id}");
    let name = home.wait(Duration::from_secs(60), "the job's container", || {
        containers_labelled(&label).into_iter().next()
    });
    skillforge_tests::signal(&first, nix::sys::signal::Signal::SIGKILL);
    wait_exit(&mut first, Duration::from_secs(10));
    assert_eq!(
        containers_labelled(&label),
        vec![name.clone()],
        "the dead worker's container outlives it"
    );

    let mut next = spawn_worker_on_host(&home, "next", &host);
    home.wait(
        Duration::from_secs(60),
        "the next worker to remove the leftover container",
        || (!containers_labelled(&label).contains(&name)).then_some(()),
    );
    skillforge_tests::signal(&next, nix::sys::signal::Signal::SIGTERM);
    wait_exit(&mut next, Duration::from_secs(30));
}
