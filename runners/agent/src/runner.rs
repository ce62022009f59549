//! The `agent` runner: parses an [`AgentPayload`], runs the runtime's program through the process
//! runner and reports the transcript's final message and skills.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use skillforge_runner::{
    ExitClass, RunContext, RunOutcome, RunSpec, Runner, RunnerError, RunnerPayload, parse_payload,
};
use skillforge_runner_process::{
    DEFAULT_MAX_OUTPUT_BYTES, TRUNCATION_MARKER, run_process_with_output, truncation_marker,
};

use crate::AgentError;
use crate::container::{AgentContainerExec, build_container_run};
use crate::invocation::{SKILLFORGE_BIN_ENV, build_invocation, resolve_program};
use crate::payload::{AgentContainer, AgentPayload};
use crate::profile::{RuntimeProfile, find};
use crate::report::AgentReport;
use crate::transcript::parse_transcript;

/// Bytes of transcript kept in the report's `transcript_tail` (and in `RunOutcome::stdout_tail`)
/// when it is not written to a file: the process runner's default cap, 64 KiB.
pub const TRANSCRIPT_TAIL_BYTES: usize = DEFAULT_MAX_OUTPUT_BYTES;

/// Where the agent runner finds programs. The default suits the `skillforge` binary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentRunnerConfig {
    /// What `{skillforge_bin}` (the `scripted` runtime's program) resolves to; when `None`, the
    /// `SKILLFORGE_BIN` environment variable if set and non-empty, else the current executable.
    /// A program given here must accept the `agent-scripted` argument (the `skillforge` binary
    /// and the `skillforge-agent-scripted` binary of this crate both do).
    pub skillforge_bin: Option<PathBuf>,
    /// Program per runtime name, replacing the profile's (e.g. `claude` installed outside
    /// `PATH`); profile arguments are kept.
    pub program_overrides: BTreeMap<String, PathBuf>,
}

impl AgentRunnerConfig {
    /// The path `{skillforge_bin}` resolves to (see [`AgentRunnerConfig::skillforge_bin`]).
    ///
    /// # Errors
    /// The I/O error of `std::env::current_exe` when neither the field nor the variable is set
    /// and the current executable cannot be determined.
    pub fn resolve_skillforge_bin(&self) -> std::io::Result<PathBuf> {
        if let Some(path) = &self.skillforge_bin {
            return Ok(path.clone());
        }
        match std::env::var_os(SKILLFORGE_BIN_ENV) {
            Some(path) if !path.is_empty() => Ok(PathBuf::from(path)),
            _ => skillforge_runner::current_exe(),
        }
    }
}

/// The `agent` runner (kind `"agent"`, DESIGN §5).
///
/// One run: pick the runtime profile, resolve its program, write the prompt to
/// `ctx.scratch_dir/prompt.md` if the profile reads a file, run the program with
/// `skillforge_runner_process::run_process` (own process group, prompt on stdin or in the file,
/// never in argv; credentials only through env) under the smaller of `spec.timeout` and the
/// payload's `timeout_secs`, then parse stdout as the transcript. `RunOutcome::detail` is an
/// [`AgentReport`]; `stdout_tail` is the transcript's last [`TRANSCRIPT_TAIL_BYTES`] bytes.
///
/// A missing program is `Ok` with [`ExitClass::NotRunnable`], its reason naming the runtime, the
/// program and how to install it. On `ctx.cancel` the process group is killed and the run
/// returns `Ok` with [`ExitClass::Killed`] (the report still carries whatever transcript was
/// captured).
///
/// A payload with `container` runs the same invocation in a container through the
/// [`AgentContainerExec`] given to [`AgentRunner::with_containers`] (see [`crate::container`]);
/// a worker without one answers such a payload `not_runnable`, saying so.
#[derive(Debug, Clone, Default)]
pub struct AgentRunner {
    config: AgentRunnerConfig,
    containers: Option<Arc<dyn AgentContainerExec>>,
}

impl AgentRunner {
    /// A runner using `config` to find programs.
    pub fn new(config: AgentRunnerConfig) -> Self {
        Self {
            config,
            containers: None,
        }
    }

    /// This runner, running `container` payloads through `containers`.
    #[must_use]
    pub fn with_containers(mut self, containers: Arc<dyn AgentContainerExec>) -> Self {
        self.containers = Some(containers);
        self
    }

    /// Runs one parsed payload (what [`Runner::run`] does after parsing `spec.payload`).
    ///
    /// # Errors
    /// [`RunnerError::InvalidPayload`] for an unknown runtime or an inconsistent payload;
    /// [`RunnerError::Io`] when the prompt file cannot be written; [`RunnerError::Other`] when
    /// the skillforge binary cannot be located; otherwise as `run_process`.
    pub async fn run_payload(
        &self,
        payload: &AgentPayload,
        timeout: Duration,
        ctx: &RunContext,
    ) -> Result<RunOutcome, RunnerError> {
        let profile = find(&payload.runtime).map_err(invalid_payload)?;
        let program = resolve_program(
            profile,
            self.config
                .program_overrides
                .get(&profile.name)
                .map(PathBuf::as_path),
            || self.config.resolve_skillforge_bin(),
        )
        .map_err(|e| RunnerError::Other(e.to_string()))?;
        // The engine passes the scratch dir as a path only; the prompt file (and, without a
        // payload workdir, the agent's working directory) live in it.
        tokio::fs::create_dir_all(&ctx.scratch_dir)
            .await
            .map_err(|source| RunnerError::Io {
                context: format!("create scratch dir `{}`", ctx.scratch_dir.display()),
                source,
            })?;
        // What the child will see: the payload's env over the worker's inherited names.
        let child_var = |name: &str| payload.env.get(name).cloned().or_else(|| std::env::var(name).ok());
        if let Some(reason) = profile.missing_credential(|n| child_var(n).is_some_and(|v| !v.trim().is_empty()), child_var) {
            tracing::warn!(runtime = %profile.name, %reason, "agent runtime has no credential; not started");
            return Ok(not_started_report(profile, &program, payload, reason));
        }
        let timeout = payload
            .timeout_secs
            .map_or(timeout, |secs| timeout.min(Duration::from_secs(secs)));
        (ctx.heartbeat)(Some(&format!("agent `{}` running", profile.name)));
        let (mut outcome, program, container) = match &payload.container {
            None => {
                let outcome = self
                    .run_local(profile, payload, &program, timeout, ctx)
                    .await?;
                (outcome, program, None)
            }
            Some(container) => {
                self.run_in_container(profile, payload, container, timeout, ctx)
                    .await?
            }
        };
        let transcript = std::mem::take(&mut outcome.stdout_tail);
        let n_truncated = outcome.detail["stdout_truncated_bytes"]
            .as_u64()
            .unwrap_or(0);
        let summary = parse_transcript(&profile.transcript, &transcript);
        if let ExitClass::NotRunnable { reason } = &mut outcome.exit {
            *reason = not_runnable_reason(profile, reason);
        } else if !outcome.exit.is_passed()
            && let Some(reason) = profile.auth_failure(&transcript, summary.final_message.as_deref())
        {
            // Not logged in: every attempt would fail the same way, so it is no attempt at all.
            tracing::warn!(runtime = %profile.name, %reason, "agent runtime is not authenticated");
            outcome.exit = ExitClass::NotRunnable { reason };
        } else if !outcome.exit.is_passed()
            && let Some(reason) = profile.network_failure(&transcript)
        {
            // Offline (or no such host): a retry on this worker meets the same network.
            tracing::warn!(runtime = %profile.name, %reason, "agent runtime could not reach its API");
            outcome.exit = ExitClass::NotRunnable { reason };
        }
        let (body, n_dropped) = strip_marker(&transcript, n_truncated);
        let transcript_path = payload
            .transcript_path
            .as_deref()
            .and_then(|path| save_transcript(path, &transcript));
        outcome.stdout_tail = tail(body, n_dropped, TRANSCRIPT_TAIL_BYTES);
        let report = AgentReport {
            runtime: profile.name.clone(),
            family: profile.family.clone(),
            program,
            final_message: summary.final_message,
            transcript_tail: transcript_path
                .is_none()
                .then(|| outcome.stdout_tail.clone()),
            transcript_path,
            transcript_truncated_bytes: n_truncated,
            skills_handed: payload.skills.clone(),
            skills_offered: summary.skills_offered,
            skills_loaded: summary.skills_loaded,
            model: summary.model,
            exit: outcome.exit.clone(),
            container,
        };
        tracing::info!(runtime = %report.runtime, exit = report.exit.label(), duration_ms = outcome.duration_ms, "agent finished");
        outcome.detail = serde_json::to_value(&report)
            .map_err(|e| RunnerError::Other(format!("serialize agent report: {e}")))?;
        Ok(outcome)
    }
}

impl AgentRunner {
    /// The agent as a child process of the worker.
    async fn run_local(
        &self,
        profile: &RuntimeProfile,
        payload: &AgentPayload,
        program: &str,
        timeout: Duration,
        ctx: &RunContext,
    ) -> Result<RunOutcome, RunnerError> {
        let invocation = build_invocation(profile, payload, &ctx.scratch_dir, program)
            .map_err(invalid_payload)?;
        if let Some(path) = &invocation.prompt_file {
            write_prompt(path, &payload.prompt)?;
        }
        tracing::info!(runtime = %profile.name, program = %program, timeout_secs = timeout.as_secs(), "agent started");
        Ok(run_process_with_output(&invocation.process, timeout, &ctx.cancel, Some(&ctx.output)).await?)
    }

    /// The agent in a container; also returns the program run in it and what the report records
    /// of the container (the engine, the image and its digest, the container's name).
    async fn run_in_container(
        &self,
        profile: &RuntimeProfile,
        payload: &AgentPayload,
        container: &AgentContainer,
        timeout: Duration,
        ctx: &RunContext,
    ) -> Result<(RunOutcome, String, Option<serde_json::Value>), RunnerError> {
        let Some(containers) = &self.containers else {
            let reason = "this worker runs no agents in containers (it has no container engine)";
            return Ok((not_started(reason.to_owned()), profile.program.clone(), None));
        };
        // E-13: the credential rides in the container's environment; an engine that is not on
        // this machine (the payload's or this worker's own `DOCKER_HOST`) never receives it.
        let engine = containers.engine(container.host.as_deref());
        if let Err(reason) = crate::local_engine_only(&engine) {
            tracing::warn!(runtime = %profile.name, %engine, "container engine is not local; agent not started");
            return Ok((not_started(reason), profile.program.clone(), None));
        }
        // The scratch dir is the attempt's own; its name labels the container.
        let label = ctx
            .scratch_dir
            .file_name()
            .map_or_else(|| "agent".to_owned(), |n| n.to_string_lossy().into_owned());
        let (run, prompt_file) = build_container_run(
            profile,
            payload,
            container,
            &label,
            &ctx.scratch_dir,
            || self.config.resolve_skillforge_bin(),
            |name| std::env::var(name).ok().filter(|v| !v.is_empty()),
        )
        .map_err(invalid_payload)?;
        if let Some(path) = &prompt_file {
            write_prompt(path, &payload.prompt)?;
        }
        tracing::info!(runtime = %profile.name, image = %run.image, timeout_secs = timeout.as_secs(), "agent started in a container");
        let outcome = containers.run_agent(&run, timeout, &ctx.cancel).await?;
        let recorded = serde_json::json!({
            "engine": outcome.detail.get("engine"),
            "image": outcome.detail.get("image"),
            "container_name": outcome.detail.get("container_name"),
        });
        let program = run.argv.first().cloned().unwrap_or_default();
        Ok((outcome, program, Some(recorded)))
    }
}

fn write_prompt(path: &Path, prompt: &str) -> Result<(), RunnerError> {
    std::fs::write(path, prompt).map_err(|source| RunnerError::Io {
        context: format!("write prompt file `{}`", path.display()),
        source,
    })
}

/// An outcome for an agent that could not be started at all.
fn not_started(reason: String) -> RunOutcome {
    RunOutcome {
        exit: ExitClass::NotRunnable { reason },
        exit_code: None,
        duration_ms: 0,
        stdout_tail: String::new(),
        stderr_tail: String::new(),
        detail: serde_json::Value::Null,
    }
}

#[async_trait::async_trait]
impl Runner for AgentRunner {
    fn kind(&self) -> &'static str {
        AgentPayload::KIND
    }

    /// # Errors
    /// [`RunnerError::InvalidPayload`] when `spec.payload` is not an [`AgentPayload`]; otherwise
    /// as [`AgentRunner::run_payload`]. On cancel, kills the agent's process group and returns
    /// `Ok` with `Killed`.
    async fn run(&self, spec: &RunSpec, ctx: &RunContext) -> Result<RunOutcome, RunnerError> {
        let payload: AgentPayload = parse_payload(spec)?;
        self.run_payload(&payload, spec.timeout, ctx).await
    }
}

/// The outcome of a run refused before its CLI started (credential preflight).
fn not_started_report(profile: &RuntimeProfile, program: &str, payload: &AgentPayload, reason: String) -> RunOutcome {
    let exit = ExitClass::NotRunnable { reason };
    let report = AgentReport {
        runtime: profile.name.clone(),
        family: profile.family.clone(),
        program: program.to_owned(),
        final_message: None,
        transcript_tail: None,
        transcript_path: None,
        transcript_truncated_bytes: 0,
        skills_handed: payload.skills.clone(),
        skills_offered: None,
        skills_loaded: None,
        model: None,
        exit: exit.clone(),
        container: None,
    };
    RunOutcome {
        exit,
        exit_code: None,
        duration_ms: 0,
        stdout_tail: String::new(),
        stderr_tail: String::new(),
        detail: serde_json::to_value(&report).unwrap_or_default(),
    }
}

fn invalid_payload(error: AgentError) -> RunnerError {
    RunnerError::InvalidPayload {
        runner: AgentPayload::KIND,
        message: error.to_string(),
    }
}

/// The process runner's reason, prefixed with the runtime and followed by the install hint.
fn not_runnable_reason(profile: &RuntimeProfile, reason: &str) -> String {
    match &profile.install_hint {
        Some(hint) => format!("agent runtime `{}`: {reason}; {hint}", profile.name),
        None => format!("agent runtime `{}`: {reason}", profile.name),
    }
}

/// Writes the transcript to `path` (creating parents). A failure is logged, not fatal: the run
/// already happened and the report falls back to the tail.
fn save_transcript(path: &Path, transcript: &str) -> Option<PathBuf> {
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(path, transcript));
    match written {
        Ok(()) => Some(path.to_path_buf()),
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "could not write agent transcript; keeping its tail");
            None
        }
    }
}

/// Splits off the process runner's truncation marker line, if any: `(body, bytes dropped)`.
fn strip_marker(transcript: &str, n_truncated: u64) -> (&str, u64) {
    if n_truncated > 0
        && transcript.starts_with(TRUNCATION_MARKER)
        && let Some((_, body)) = transcript.split_once('\n')
    {
        return (body, n_truncated);
    }
    (transcript, 0)
}

/// The last `cap` bytes of `body` (cut on a character boundary), prefixed with a truncation
/// marker counting `n_dropped` plus what this cut drops, when anything was dropped.
fn tail(body: &str, n_dropped: u64, cap: usize) -> String {
    let mut cut = body.len().saturating_sub(cap);
    while !body.is_char_boundary(cut) {
        cut += 1;
    }
    let n_dropped = n_dropped + cut as u64;
    if n_dropped == 0 {
        return body.to_string();
    }
    format!("{}{}", truncation_marker(n_dropped), &body[cut..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails_keep_the_end_and_count_every_dropped_byte() {
        let check = |body: &str, n_dropped: u64, cap: usize, expected: &str| {
            assert_eq!(
                tail(body, n_dropped, cap),
                expected,
                "{body:?} {n_dropped} {cap}"
            );
        };
        check("abcdef", 0, 10, "abcdef");
        check("abcdef", 0, 2, "[... truncated 4 bytes]\nef");
        check("abcdef", 3, 10, "[... truncated 3 bytes]\nabcdef");
        check("aé", 0, 1, "[... truncated 3 bytes]\n");
        assert_eq!(strip_marker("[... truncated 5 bytes]\nxyz", 5), ("xyz", 5));
        assert_eq!(strip_marker("[... truncated 5 bytes]\nxyz", 0).1, 0);
    }

    #[test]
    fn not_runnable_reason_names_runtime_program_and_hint() {
        let reason = not_runnable_reason(
            find("claude").unwrap(),
            "program `claude` or its interpreter not found",
        );
        assert_eq!(
            reason,
            "agent runtime `claude`: program `claude` or its interpreter not found; \
             install Claude Code (npm install -g @anthropic-ai/claude-code)"
        );
    }

    #[test]
    fn explicit_skillforge_bin_wins() {
        let config = AgentRunnerConfig {
            skillforge_bin: Some("/opt/sf".into()),
            ..AgentRunnerConfig::default()
        };
        assert_eq!(
            config.resolve_skillforge_bin().unwrap(),
            PathBuf::from("/opt/sf")
        );
    }
}
