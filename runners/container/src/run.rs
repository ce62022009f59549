//! One run of a container: create it from the image with the work dir mounted, start it, wait
//! under a timeout and cancellation (SIGTERM, grace, SIGKILL), read its log into capped tails,
//! classify the exit like the process runner, and remove the container whatever happened.

use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, KillContainerOptionsBuilder, LogsOptionsBuilder,
    RemoveContainerOptionsBuilder,
};
use futures::{Future, StreamExt};
use serde_json::json;
use skillforge_runner::{CancellationToken, RunOutcome};
use skillforge_runner_process::{CensorScanner, Ending, TailBuffer, classify};
use tokio::time::Instant;

use crate::engine::{Engine, ImageInfo, resolve_host};
use crate::error::ContainerError;
use crate::payload::ContainerPayload;
use crate::sweep::labels;

/// How long reading an exited container's log may take; then the tails keep what they have.
const LOG_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `payload` in a container with `work_dir` (an existing host directory) mounted.
///
/// The container is named `skillforge-<run id>`, labelled with the owning worker, this host and
/// `job_id` (see [`crate::LABEL_OWNER`]), gets `payload.env` as its environment and the limits and
/// network of the payload. Once it has exited, its stdout and stderr are read from the engine's
/// log into tails of `max_output_bytes` each (same truncation marker as the process runner).
/// The log is read whole after the exit, not followed while it runs: podman's follow of a
/// container that exits loses the end of a long log (podman issue #21914), a plain read does not.
///
/// On `timeout` (wall clock from start) or `cancel`: SIGTERM, up to `grace_ms` for it to exit,
/// then SIGKILL. The exit is classified by [`skillforge_runner_process::classify`] as a shell's
/// (the engine reports a signal death as 128+n): `passed`, `failed{code}`, `timed_out`,
/// `not_runnable` (exit 126/127, a command the runtime cannot execute, a missing image),
/// `killed{signal}` (including an out-of-memory kill, 9), `censored`. The container is removed
/// (forced) in every case, also when the future is dropped (best effort, in the background);
/// `detail.container_removed` says whether that worked.
///
/// `detail`: `{"engine": EngineInfo, "image": ImageInfo|null, "container_id", "container_name",
/// "container_removed", "network": "default"|"none", "stdout_truncated_bytes",
/// "stderr_truncated_bytes"}`.
///
/// # Errors
/// [`ContainerError::EngineUnreachable`] when no engine answers (the message says how to start
/// one); [`ContainerError::Engine`] when the engine fails an operation for reasons not the job's.
pub async fn run_container(
    payload: &ContainerPayload,
    job_id: &str,
    work_dir: &Path,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<RunOutcome, ContainerError> {
    let engine = Engine::connect(&resolve_host(payload.host.as_deref())).await?;
    let started = Instant::now();
    let mut run = Run::new(&engine, payload);
    let image = match engine.image(&payload.image, payload.pull).await? {
        Ok(image) => image,
        Err(reason) => return Ok(run.not_runnable(started, reason, None)),
    };
    run.image = Some(image);
    let created = create(&engine, payload, job_id, work_dir, &run.name).await?;
    let container = Container::new(&engine, created);
    let outcome = start_and_wait(&mut run, &container, timeout, cancel, started).await;
    let is_removed = container.remove().await;
    let mut outcome = outcome?;
    outcome.detail["container_removed"] = json!(is_removed);
    Ok(outcome)
}

/// Starts the container, waits for it (or kills it), reads its log and classifies the end.
async fn start_and_wait(
    run: &mut Run<'_>,
    container: &Container,
    timeout: Duration,
    cancel: &CancellationToken,
    started: Instant,
) -> Result<RunOutcome, ContainerError> {
    run.container_id = container.id.clone();
    if cancel.is_cancelled() {
        return Ok(run.finish(
            started,
            Ending::Cancelled { signal: 15 },
            None,
            Logs::empty(),
        ));
    }
    let engine = run.engine;
    if let Err(error) = engine.docker.start_container(&container.id, None).await {
        let message = error.to_string();
        if let Some(reason) = not_executable(&message) {
            return Ok(run.not_runnable(started, reason, Some(container.id.clone())));
        }
        return Err(engine.error(format!("start container `{}`", run.name), error));
    }
    tracing::debug!(container = %run.name, image = %run.payload.image, "container started");
    let cap = run.payload.effective_max_output_bytes();
    let mut exited = wait_exit(engine, &container.id);
    let is_timeout = tokio::select! {
        biased;
        code = &mut exited => {
            let code = code?;
            let logs = read_logs(engine, &container.id, cap).await;
            return Ok(run.finish(started, natural_ending(code), Some(code), logs));
        }
        () = cancel.cancelled() => false,
        () = tokio::time::sleep(timeout) => true,
    };
    tracing::debug!(container = %run.name, is_timeout, "stopping container");
    let (code, signal) =
        terminate(engine, &container.id, run.payload.effective_grace(), exited).await?;
    let ending = if is_timeout {
        Ending::TimedOut
    } else {
        Ending::Cancelled { signal }
    };
    let logs = read_logs(engine, &container.id, cap).await;
    Ok(run.finish(started, ending, code, logs))
}

/// SIGTERM, up to `grace` for the container to exit, then SIGKILL. Returns the exit code (when
/// the engine reported one) and the signal that ended it: 15 within the grace, else 9.
async fn terminate(
    engine: &Engine,
    id: &str,
    grace: Duration,
    mut exited: Pin<Box<dyn Future<Output = Result<i32, ContainerError>> + Send + '_>>,
) -> Result<(Option<i32>, i32), ContainerError> {
    kill(engine, id, "SIGTERM").await;
    if let Ok(code) = tokio::time::timeout(grace, &mut exited).await {
        return Ok((code.ok(), 15));
    }
    kill(engine, id, "SIGKILL").await;
    let code = exited.await.ok();
    Ok((code, 9))
}

/// Sends `signal` to the container; an engine error (it already exited) is only logged.
async fn kill(engine: &Engine, id: &str, signal: &str) {
    let options = KillContainerOptionsBuilder::new().signal(signal).build();
    if let Err(error) = engine.docker.kill_container(id, Some(options)).await {
        tracing::debug!(container = id, signal, %error, "kill container");
    }
}

/// Resolves when the container exited, with its exit code.
fn wait_exit<'a>(
    engine: &'a Engine,
    id: &'a str,
) -> Pin<Box<dyn Future<Output = Result<i32, ContainerError>> + Send + 'a>> {
    Box::pin(async move {
        let mut stream = engine.docker.wait_container(id, None);
        let code = match stream.next().await {
            Some(Ok(response)) => response.status_code,
            Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => code,
            Some(Err(error)) => {
                return Err(engine.error(format!("wait for container `{id}`"), error));
            }
            None => {
                return Err(ContainerError::Engine {
                    host: engine.info.host.clone(),
                    action: format!("wait for container `{id}`"),
                    message: "the engine closed the wait without an exit code".into(),
                });
            }
        };
        Ok(i32::try_from(code).unwrap_or(-1))
    })
}

async fn create(
    engine: &Engine,
    payload: &ContainerPayload,
    job_id: &str,
    work_dir: &Path,
    name: &str,
) -> Result<String, ContainerError> {
    let (entrypoint, cmd) = payload.entrypoint_and_cmd();
    let mount_path = payload.effective_mount_path();
    let limits = payload.limits;
    let host_config = HostConfig {
        binds: Some(binds(payload, work_dir)),
        memory: limits.memory_bytes,
        memory_swap: limits.memory_bytes,
        nano_cpus: limits.cpus.map(|c| (c * 1e9).round() as i64),
        pids_limit: limits.pids,
        network_mode: Some(payload.network.mode().to_owned()),
        ..Default::default()
    };
    let body = ContainerCreateBody {
        image: Some(payload.image.clone()),
        entrypoint: Some(entrypoint),
        cmd: Some(cmd),
        env: Some(
            payload
                .env
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect(),
        ),
        working_dir: Some(mount_path.to_owned()),
        user: payload.user.clone(),
        labels: Some(labels(job_id)),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        host_config: Some(host_config),
        ..Default::default()
    };
    let options = CreateContainerOptionsBuilder::new().name(name).build();
    let created = engine
        .docker
        .create_container(Some(options), body)
        .await
        .map_err(|e| engine.error(format!("create container from `{}`", payload.image), e))?;
    Ok(created.id)
}

/// The work dir's bind, then the payload's further mounts (`ro` unless asked otherwise).
fn binds(payload: &ContainerPayload, work_dir: &Path) -> Vec<String> {
    let mut binds = vec![format!(
        "{}:{}:rw",
        work_dir.display(),
        payload.effective_mount_path()
    )];
    binds.extend(payload.mounts.iter().map(|m| {
        let mode = if m.read_only { "ro" } else { "rw" };
        format!("{}:{}:{mode}", m.source.display(), m.target)
    }));
    binds
}

/// The reason when a start error says the command cannot be executed, else `None`.
fn not_executable(message: &str) -> Option<String> {
    const MARKERS: &[&str] = &[
        "executable file not found",
        "no such file or directory",
        "permission denied",
        "not a directory",
    ];
    let lower = message.to_lowercase();
    MARKERS
        .iter()
        .any(|m| lower.contains(m))
        .then(|| format!("command could not be executed in the container: {message}"))
}

fn natural_ending(code: i32) -> Ending {
    Ending::Exited { code }
}

/// A created container, removed (forced) by [`Container::remove`] or, in the background, on drop.
struct Container {
    engine: Engine,
    id: String,
    is_removed: bool,
}

impl Container {
    fn new(engine: &Engine, id: String) -> Self {
        Self {
            engine: engine.clone(),
            id,
            is_removed: false,
        }
    }

    /// Removes the container and its anonymous volumes; true when it is gone.
    async fn remove(mut self) -> bool {
        self.is_removed = true;
        remove(&self.engine, &self.id).await
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if self.is_removed {
            return;
        }
        let (engine, id) = (self.engine.clone(), self.id.clone());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { remove(&engine, &id).await });
        }
    }
}

/// Force-removes container `id`; true when it is gone afterwards (also when it already was).
pub(crate) async fn remove(engine: &Engine, id: &str) -> bool {
    let options = RemoveContainerOptionsBuilder::new()
        .force(true)
        .v(true)
        .build();
    match engine.docker.remove_container(id, Some(options)).await {
        Ok(()) => true,
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => true,
        Err(error) => {
            tracing::warn!(container = id, %error, "could not remove container");
            false
        }
    }
}

/// The captured streams of one container.
struct Logs {
    stdout: TailBuffer,
    stderr: TailBuffer,
    has_censor_marker: bool,
}

impl Logs {
    fn empty() -> Self {
        Self {
            stdout: TailBuffer::new(0),
            stderr: TailBuffer::new(0),
            has_censor_marker: false,
        }
    }
}

/// Reads the whole log of the exited container `id` into tails of `cap` bytes per stream.
///
/// Gives up after [`LOG_READ_TIMEOUT`] or at a stream error, keeping what was read (logged).
async fn read_logs(engine: &Engine, id: &str, cap: usize) -> Logs {
    let options = LogsOptionsBuilder::new()
        .follow(false)
        .stdout(true)
        .stderr(true)
        .build();
    let mut stream = engine.docker.logs(id, Some(options));
    let mut logs = Logs {
        stdout: TailBuffer::new(cap),
        stderr: TailBuffer::new(cap),
        has_censor_marker: false,
    };
    let mut censor = CensorScanner::default();
    let deadline = Instant::now() + LOG_READ_TIMEOUT;
    loop {
        let item = match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(item) => item,
            Err(_) => {
                tracing::warn!(
                    container = id,
                    "reading the container's log timed out; output cut"
                );
                break;
            }
        };
        match item {
            Some(Ok(bollard::container::LogOutput::StdErr { message })) => {
                logs.stderr.push(&message);
                censor.feed(&message);
            }
            Some(Ok(output)) => logs.stdout.push(&output.into_bytes()),
            Some(Err(error)) => {
                tracing::warn!(container = id, %error, "reading the container's log failed; output cut");
                break;
            }
            None => break,
        }
    }
    logs.has_censor_marker = censor.finish();
    logs
}

/// What is known about one run while it goes, for its outcome.
struct Run<'a> {
    engine: &'a Engine,
    payload: &'a ContainerPayload,
    name: String,
    image: Option<ImageInfo>,
    container_id: String,
}

impl<'a> Run<'a> {
    fn new(engine: &'a Engine, payload: &'a ContainerPayload) -> Self {
        let run_id = uuid::Uuid::new_v4().simple().to_string();
        Self {
            engine,
            payload,
            name: format!("skillforge-{run_id}"),
            image: None,
            container_id: String::new(),
        }
    }

    fn not_runnable(&self, started: Instant, reason: String, id: Option<String>) -> RunOutcome {
        tracing::debug!(container = %self.name, %reason, "container not runnable");
        let mut outcome = self.finish(started, Ending::NotStarted { reason }, None, Logs::empty());
        if let Some(id) = id {
            outcome.detail["container_id"] = json!(id);
        }
        outcome
    }

    fn finish(
        &self,
        started: Instant,
        ending: Ending,
        code: Option<i32>,
        logs: Logs,
    ) -> RunOutcome {
        let exit = classify(&ending, true, logs.has_censor_marker);
        let (stdout_tail, n_stdout) = logs.stdout.into_text();
        let (stderr_tail, n_stderr) = logs.stderr.into_text();
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        tracing::debug!(container = %self.name, exit = exit.label(), duration_ms, "container finished");
        RunOutcome {
            exit,
            exit_code: code.filter(|_| matches!(ending, Ending::Exited { .. })),
            duration_ms,
            stdout_tail,
            stderr_tail,
            detail: json!({
                "engine": self.engine.info,
                "image": self.image,
                "container_id": self.container_id,
                "container_name": self.name,
                "container_removed": self.container_id.is_empty(),
                "network": self.payload.network,
                "stdout_truncated_bytes": n_stdout,
                "stderr_truncated_bytes": n_stderr,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_errors_naming_a_missing_program_are_not_runnable() {
        let runc = "runc: runc create failed: unable to start container process: exec: \"nope\": \
                    executable file not found in $PATH: OCI runtime attempted to invoke a command \
                    that was not found";
        assert!(not_executable(runc).is_some_and(|r| r.contains("nope")));
        assert!(not_executable("Docker responded with status code 500: cgroup error").is_none());
    }
}
