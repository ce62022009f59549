//! Shared helpers of the container runner's tests: the engine and image the harness started
//! (`scripts/containers-env`), and runs of payloads against them.

#![allow(dead_code, unreachable_pub)]

use std::path::Path;
use std::time::Duration;

use skillforge_runner::{CancellationToken, RunOutcome};
use skillforge_runner_container::{
    Command, ContainerPayload, Engine, LABEL_JOB, resolve_host, run_container,
};

/// The test image, when an engine is there; `None` (after a loud message) outside CI without one.
///
/// # Panics
/// When `CI` or `SKILLFORGE_REQUIRE_CONTAINERS` is set but `DOCKER_HOST` or
/// `SKILLFORGE_TEST_IMAGE` is not: in CI the container tests must run.
pub fn test_image() -> Option<String> {
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
                "container tests must run here but DOCKER_HOST / SKILLFORGE_TEST_IMAGE are unset: \
                 run them through scripts/test, which starts a podman engine"
            )
        }
        _ => {
            eprintln!(
                "\n*** SKIPPED: container test needs an engine. DOCKER_HOST / SKILLFORGE_TEST_IMAGE \
                 are unset; run `source scripts/containers-env && sf_containers_up` first (or \
                 scripts/test). ***\n"
            );
            None
        }
    }
}

/// A shell-line payload in `image`.
pub fn shell(image: &str, line: &str) -> ContainerPayload {
    ContainerPayload::new(image, Command::Shell(line.to_owned()))
}

/// A fresh job id, so a test finds its own containers by label.
pub fn job_id() -> String {
    format!("test-{}", uuid::Uuid::new_v4().simple())
}

/// Runs `payload` with a fresh work dir and `timeout`.
pub async fn run(payload: &ContainerPayload, timeout: Duration) -> RunOutcome {
    let dir = tempfile::tempdir().expect("work dir");
    run_in(
        payload,
        &job_id(),
        dir.path(),
        timeout,
        &CancellationToken::new(),
    )
    .await
}

/// Runs `payload` as `job_id` in `work_dir`.
pub async fn run_in(
    payload: &ContainerPayload,
    job_id: &str,
    work_dir: &Path,
    timeout: Duration,
    cancel: &CancellationToken,
) -> RunOutcome {
    run_container(payload, job_id, work_dir, timeout, cancel)
        .await
        .expect("the engine runs the container")
}

/// The engine the tests use.
pub async fn engine() -> Engine {
    Engine::connect(&resolve_host(None)).await.expect("engine")
}

/// Names of every container (running or not) labelled with `job_id`.
pub async fn containers_of(job_id: &str) -> Vec<String> {
    engine()
        .await
        .list_containers(true, &[format!("{LABEL_JOB}={job_id}")])
        .await
        .expect("list containers")
        .into_iter()
        .flat_map(|c| c.names.unwrap_or_default())
        .collect()
}

/// Polls until a container of `job_id` is running, or panics after `timeout`.
pub async fn wait_running(job_id: &str, timeout: Duration) {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let running = engine()
            .await
            .list_containers(false, &[format!("{LABEL_JOB}={job_id}")])
            .await
            .expect("list");
        if !running.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no running container of job {job_id} within {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
