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
use crate::signals::ApiErrorKind;
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
    /// The worker's environment as the runner reads it (the user's `HOME`, credential and
    /// config variables); `None` = this process's environment. The runner builds each run's
    /// private home and carries credentials from it; a payload's `env` still wins.
    pub worker_env: Option<BTreeMap<String, String>>,
}

impl AgentRunnerConfig {
    /// The worker's variable `name` ([`AgentRunnerConfig::worker_env`], else the process's),
    /// `None` when unset.
    pub fn worker_var(&self, name: &str) -> Option<String> {
        match &self.worker_env {
            Some(env) => env.get(name).cloned(),
            None => std::env::var(name).ok(),
        }
    }

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
        let child_var = |name: &str| {
            payload
                .env
                .get(name)
                .cloned()
                .or_else(|| self.config.worker_var(name))
        };
        if let Some(reason) = profile.missing_credential(
            |n| child_var(n).is_some_and(|v| !v.trim().is_empty()),
            child_var,
        ) {
            tracing::warn!(runtime = %profile.name, %reason, "agent runtime has no credential; not started");
            return Ok(not_started_report(profile, &program, payload, reason));
        }
        if payload.container.is_none() {
            let path = child_var("PATH").unwrap_or_default();
            let on_path =
                |program: &str| std::env::split_paths(&path).any(|d| d.join(program).is_file());
            if let Some(reason) = profile.missing_requirement(on_path) {
                tracing::warn!(runtime = %profile.name, %reason, "agent runtime is missing a program it needs; not started");
                return Ok(not_started_report(profile, &program, payload, reason));
            }
        }
        let timeout = payload
            .timeout_secs
            .map_or(timeout, |secs| timeout.min(Duration::from_secs(secs)));
        let deadline = tokio::time::Instant::now() + timeout;
        (ctx.heartbeat)(Some(&format!("agent `{}` running", profile.name)));
        // Issue 31 item 4: a transient API error (rate limit, overload, 5xx) the CLI's own retries
        // did not get past is run again here, with backoff, while the budget lasts; every other
        // API error ends the run at once.
        let mut n_retries = 0;
        let (mut outcome, program, container, transcript, summary, recording) = loop {
            let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
            let (mut outcome, program, container, recording) = match &payload.container {
                None => {
                    let (outcome, recording) = self
                        .run_local(profile, payload, &program, remaining, ctx)
                        .await?;
                    (outcome, program.clone(), None, recording)
                }
                Some(container) => {
                    let (outcome, program, container) = self
                        .run_in_container(profile, payload, container, remaining, ctx)
                        .await?;
                    (outcome, program, container, None)
                }
            };
            let transcript = std::mem::take(&mut outcome.stdout_tail);
            let mut summary = parse_transcript(&profile.transcript, &transcript);
            if payload.container.is_none() {
                // what the runtime's own session log records and its stdout leaves out
                let logs = session_logs(
                    profile,
                    &ctx.scratch_dir.join(crate::home::PRIVATE_HOME_DIR),
                );
                let more = crate::transcript::session_log_denials(
                    profile.transcript.format,
                    &logs,
                    &summary.denials,
                );
                summary.denials.extend(more);
            }
            // A model API the proxy could not reach is no transient error: the run ends.
            let unreachable = recording
                .as_ref()
                .is_some_and(|r: &crate::proxy::Recording| r.unreachable.is_some());
            let transient = !unreachable
                && summary
                    .api_error
                    .as_ref()
                    .is_some_and(|e| e.kind.is_transient());
            let backoff = Duration::from_secs(2u64 << (2 * n_retries.min(4)));
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if transient
                && n_retries < profile.transient_retries
                && left > backoff * 2
                && !ctx.cancel.is_cancelled()
            {
                n_retries += 1;
                let error = summary
                    .api_error
                    .as_ref()
                    .map(|e| e.message.clone())
                    .unwrap_or_default();
                tracing::warn!(runtime = %profile.name, %error, retry = n_retries, backoff_secs = backoff.as_secs(), "transient API error; running the agent again");
                (ctx.heartbeat)(Some(&format!(
                    "agent `{}`: transient API error, retry {n_retries} in {}s",
                    profile.name,
                    backoff.as_secs()
                )));
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = ctx.cancel.cancelled() => {}
                }
                continue;
            }
            break (outcome, program, container, transcript, summary, recording);
        };
        let n_truncated = outcome.detail["stdout_truncated_bytes"]
            .as_u64()
            .unwrap_or(0);
        let unreachable = recording
            .as_ref()
            .and_then(|r| r.unreachable.clone())
            .filter(|_| !outcome.exit.is_passed() && !ctx.cancel.is_cancelled());
        if let ExitClass::NotRunnable { reason } = &mut outcome.exit {
            *reason = not_runnable_reason(profile, reason);
        } else if let Some(unreachable) = unreachable {
            // The proxy could not connect to the model API: the run was stopped at once, and a
            // retry on this worker meets the same network.
            let reason = format!(
                "agent runtime `{}` could not reach its model API through skillforge's recording proxy ({unreachable}): check the base URL the runtime is configured with and this worker's network",
                profile.name
            );
            tracing::warn!(runtime = %profile.name, %reason, "agent runtime could not reach its API");
            outcome.exit = ExitClass::NotRunnable { reason };
        } else if let Some(error) = summary
            .api_error
            .as_ref()
            .filter(|e| e.kind == ApiErrorKind::Auth)
        {
            // A key the API refuses: every attempt would fail the same way.
            let hint = profile.login_hint.as_deref().unwrap_or(
                "log the runtime in, or set its credential variables in the worker's environment",
            );
            let reason = format!(
                "agent runtime `{}` is not authenticated ({}): {hint}",
                profile.name, error.message
            );
            tracing::warn!(runtime = %profile.name, %reason, "agent runtime is not authenticated");
            outcome.exit = ExitClass::NotRunnable { reason };
        } else if !outcome.exit.is_passed()
            && let Some(reason) =
                profile.auth_failure(&transcript, summary.final_message.as_deref())
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
        } else if let Some(error) = &summary.api_error {
            // An API error is never an answer, whatever the CLI's exit code said.
            tracing::warn!(runtime = %profile.name, kind = error.kind.label(), status = %error.status.map_or_else(|| "none".to_owned(), |s| s.to_string()), message = %error.message, "agent run ended on an API error");
            if outcome.exit.is_passed() {
                outcome.exit = ExitClass::Failed {
                    code: outcome.exit_code.filter(|c| *c != 0).unwrap_or(1),
                };
            }
            if outcome.stderr_tail.trim().is_empty() {
                outcome.stderr_tail = format!(
                    "agent runtime `{}`: API error: {}\n",
                    profile.name, error.message
                );
            }
        }
        let (body, n_dropped) = strip_marker(&transcript, n_truncated);
        let transcript_path = payload
            .transcript_path
            .as_deref()
            .and_then(|path| save_transcript(path, &transcript));
        outcome.stdout_tail = tail(body, n_dropped, TRANSCRIPT_TAIL_BYTES);
        let mut report = AgentReport {
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
            skills_offered: None,
            skills_offered_from: None,
            skills_offered_transcript: None,
            proxied_requests: recording.as_ref().map(|r| r.n_model_requests as u64),
            skills_loaded: summary.skills_loaded,
            model: summary.model,
            exit: outcome.exit.clone(),
            container,
            usage: summary.usage,
            api_error: summary.api_error,
            permission_denials: summary.denials,
            transient_retries: n_retries,
        };
        report.set_offered(summary.skills_offered, recording.and_then(|r| r.offered));
        tracing::info!(runtime = %report.runtime, exit = report.exit.label(), duration_ms = outcome.duration_ms, "agent finished");
        outcome.detail = serde_json::to_value(&report)
            .map_err(|e| RunnerError::Other(format!("serialize agent report: {e}")))?;
        Ok(outcome)
    }
}

impl AgentRunner {
    /// The agent as a child process of the worker, in its private home (`<scratch>/home`,
    /// [`crate::home`]); a work dir under a project whose instruction or skill files the runtime
    /// would read (`CLAUDE.md`, `.claude/`, `AGENTS.md`, `.agents/` … in a parent) is run in a
    /// clean copy under the system temp dir and mirrored back after the run.
    async fn run_local(
        &self,
        profile: &RuntimeProfile,
        payload: &AgentPayload,
        program: &str,
        timeout: Duration,
        ctx: &RunContext,
    ) -> Result<(RunOutcome, Option<crate::proxy::Recording>), RunnerError> {
        let io = |context: String| {
            move |e: String| RunnerError::Io {
                context,
                source: std::io::Error::other(e),
            }
        };
        let workdir = payload
            .workdir
            .clone()
            .unwrap_or_else(|| ctx.scratch_dir.clone());
        let above = if profile.home.reads_ancestors {
            crate::home::project_files_above(&workdir)
        } else {
            Vec::new()
        };
        let clean = match above.first() {
            None => None,
            Some(first) => {
                let base = std::env::temp_dir();
                if let Some(dirty) = crate::home::project_files_above(&base.join("x")).first() {
                    return Ok((
                        not_started(format!(
                            "agent runtime `{}`: the work dir `{}` lies under project files the agent would read (`{}`), and so does the temp dir `{}` (`{}`): point TMPDIR at a directory outside any project",
                            profile.name,
                            workdir.display(),
                            first.display(),
                            base.display(),
                            dirty.display()
                        )),
                        None,
                    ));
                }
                let dir = tempfile::Builder::new()
                    .prefix("skillforge-agent-")
                    .tempdir_in(&base)
                    .map_err(|source| RunnerError::Io {
                        context: format!("create a clean work dir under `{}`", base.display()),
                        source,
                    })?;
                let copy = dir.path().join("work");
                if workdir.exists() {
                    crate::mirror::mirror(&workdir, &copy).map_err(io(format!(
                        "copy the work dir `{}` to a clean place",
                        workdir.display()
                    )))?;
                } else {
                    std::fs::create_dir_all(&copy).map_err(|source| RunnerError::Io {
                        context: format!("create `{}`", copy.display()),
                        source,
                    })?;
                }
                tracing::info!(runtime = %profile.name, workdir = %workdir.display(), project_file = %first.display(), clean = %copy.display(), "work dir lies under project files; the agent runs in a clean copy");
                Some((dir, copy))
            }
        };
        let mut run_payload = payload.clone();
        if let Some((_, copy)) = &clean {
            run_payload.workdir = Some(copy.clone());
        }
        let mut invocation = build_invocation(profile, &run_payload, &ctx.scratch_dir, program)
            .map_err(invalid_payload)?;
        let home = ctx.scratch_dir.join(crate::home::PRIVATE_HOME_DIR);
        let worker_var = |name: &str| {
            payload
                .env
                .get(name)
                .cloned()
                .or_else(|| self.config.worker_var(name))
        };
        let home_env = crate::home::home_env(profile, &home, &worker_var);
        let run_dir = run_payload
            .workdir
            .clone()
            .unwrap_or_else(|| ctx.scratch_dir.clone());
        crate::home::make_home(profile, &home, &home_env, &run_dir, &worker_var)
            .map_err(io(format!("make the private home `{}`", home.display())))?;
        for (name, value) in home_env {
            invocation.process.env.entry(name).or_insert(value);
        }
        // The private home has no git config: the user's identity alone, for the agent's commits.
        for (name, value) in crate::home::git_identity(&worker_var) {
            invocation.process.env.entry(name).or_insert(value);
        }
        if let Some(version) = &payload.template_version {
            let git =
                crate::trailer::commit_hooks(&ctx.scratch_dir, version, &invocation.process.env)
                    .map_err(|source| RunnerError::Io {
                        context: "write the commit hooks of the template trailer".into(),
                        source,
                    })?;
            invocation.process.env.extend(git);
        }
        if let Some(env) = &self.config.worker_env {
            // The inherited names come from the configured environment, not this process's.
            for name in invocation.process.env_allowlist.clone().unwrap_or_default() {
                if let Some(value) = env.get(&name) {
                    invocation
                        .process
                        .env
                        .entry(name)
                        .or_insert_with(|| value.clone());
                }
            }
        }
        if let Some(path) = &invocation.prompt_file {
            write_prompt(path, &payload.prompt)?;
        }
        // Issue 31 item 9: the CLI talks to the run's recording proxy, which forwards to the
        // model API and records what each request offered. The proxy stops the run (through
        // this child token) when it cannot reach the API.
        let stop_run = ctx.cancel.child_token();
        // A CLI given an HTTP proxy of its own (a payload's `HTTPS_PROXY`) keeps reaching its API
        // that way: the recording proxy does not chain to another, so that run goes without it.
        let own_proxy = invocation.process.env.iter().any(|(name, value)| {
            matches!(
                name.to_ascii_lowercase().as_str(),
                "https_proxy" | "http_proxy" | "all_proxy"
            ) && !value.trim().is_empty()
        });
        if own_proxy && profile.proxy.is_some() {
            tracing::info!(runtime = %profile.name, "the run sets an HTTP proxy of its own; its offered skills come from the transcript");
        }
        let plan = match profile.proxy.filter(|_| !own_proxy) {
            Some(kind) => {
                crate::proxy::ProxyPlan::for_run(kind, &home, &worker_var).map_err(|e| {
                    RunnerError::Other(format!(
                        "agent runtime `{}`: cannot point it at skillforge's recording proxy: {e}",
                        profile.name
                    ))
                })?
            }
            None => None,
        };
        let proxy = match plan {
            Some(plan) => {
                let proxy = crate::proxy::RecordingProxy::start(
                    plan.upstreams.clone(),
                    stop_run.clone(),
                )
                .await
                .map_err(|e| {
                    RunnerError::Other(format!(
                        "agent runtime `{}`: could not start skillforge's recording proxy: {e}",
                        profile.name
                    ))
                })?;
                plan.apply(&proxy, &mut invocation.process);
                Some(proxy)
            }
            None => None,
        };
        tracing::info!(runtime = %profile.name, program = %program, timeout_secs = timeout.as_secs(), proxied = proxy.is_some(), "agent started");
        let outcome =
            run_process_with_output(&invocation.process, timeout, &stop_run, Some(&ctx.output))
                .await;
        let recording = match proxy {
            Some(proxy) => Some(proxy.finish().await),
            None => None,
        };
        let outcome = outcome?;
        if let Some((_dir, copy)) = &clean {
            crate::mirror::mirror(copy, &workdir).map_err(io(format!(
                "copy the agent's work back to `{}`",
                workdir.display()
            )))?;
        }
        Ok((outcome, recording))
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
            return Ok((
                not_started(reason.to_owned()),
                profile.program.clone(),
                None,
            ));
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
            |name| self.config.worker_var(name).filter(|v| !v.is_empty()),
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
        let span = crate::telemetry::start(&payload);
        let result = self.run_payload(&payload, spec.timeout, ctx).await;
        crate::telemetry::end(span, &payload, &result);
        result
    }
}

/// The outcome of a run refused before its CLI started (credential preflight).
fn not_started_report(
    profile: &RuntimeProfile,
    program: &str,
    payload: &AgentPayload,
    reason: String,
) -> RunOutcome {
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
        skills_offered_from: None,
        skills_offered_transcript: None,
        proxied_requests: None,
        skills_loaded: None,
        model: None,
        exit: exit.clone(),
        container: None,
        usage: None,
        api_error: None,
        permission_denials: Vec::new(),
        transient_retries: 0,
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

/// The largest session-log file read ([`session_logs`]), bytes.
const SESSION_LOG_MAX_BYTES: u64 = 16 * 1024 * 1024;

/// The `*.jsonl` files under the profile's `session_log_dir` in the private home `home`, each
/// read whole (files over [`SESSION_LOG_MAX_BYTES`] and unreadable ones skipped); empty when
/// the profile names none.
fn session_logs(profile: &RuntimeProfile, home: &std::path::Path) -> Vec<String> {
    let Some(dir) = profile.transcript.session_log_dir.as_deref() else {
        return Vec::new();
    };
    let mut logs = Vec::new();
    let mut pending = vec![home.join(dir)];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file()
                && path.extension().is_some_and(|e| e == "jsonl")
                && entry
                    .metadata()
                    .is_ok_and(|m| m.len() <= SESSION_LOG_MAX_BYTES)
                && let Ok(text) = std::fs::read_to_string(&path)
            {
                logs.push(text);
            }
        }
    }
    logs
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
