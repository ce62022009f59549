//! The agent runtime profiles against their real CLIs (issue 13 item 6), installed by
//! `scripts/test` (npm `@anthropic-ai/claude-code`, `@openai/codex`, `opencode-ai`), in the state
//! every CI machine has: no credentials, and (for Codex and OpenCode, pointed at a dead loopback
//! port) no reachable API.
//!
//! Claude Code: The real CLI takes the prompt on stdin, prints its `system/init` line and an
//! assistant line `Not logged in · Please run /login` with `"error":"authentication_failed"`, and
//! exits 1. The runner must parse that real transcript (skills offered from the init line, the
//! final message) and classify the run as an environment problem (`not_runnable`, which the
//! engine never retries) whose reason names the runtime and how to log in.

use std::path::PathBuf;
use std::time::Duration;

use skillforge_runner::{ExitClass, RunContext, RunSpec, Runner};
use skillforge_runner_agent::{AgentPayload, AgentReport, AgentRunner, AgentRunnerConfig};

fn on_path(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(tool))
            .find(|p| p.is_file())
    })
}

#[tokio::test]
async fn a_not_logged_in_claude_code_is_an_environment_error_naming_the_login() {
    assert!(
        on_path("claude").is_some(),
        "`claude` is not on PATH: scripts/test installs it (npm install -g @anthropic-ai/claude-code)"
    );
    // A config dir and home of its own: no login state, whatever the machine's user has.
    let home = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let mut payload = AgentPayload::new("claude", "Say hello.\n");
    payload
        .env
        .insert("HOME".into(), home.path().display().to_string());
    payload.env.insert(
        "CLAUDE_CONFIG_DIR".into(),
        home.path().join(".claude").display().to_string(),
    );
    // No telemetry or update checks: the test machine talks to nothing but loopback.
    payload.env.insert(
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(),
        "1".into(),
    );
    payload.env.insert("DISABLE_TELEMETRY".into(), "1".into());
    let spec = RunSpec {
        job_id: "job-claude".into(),
        payload: serde_json::to_value(&payload).unwrap(),
        timeout: Duration::from_secs(120),
    };
    let ctx = RunContext::detached(scratch.path().to_path_buf());
    let outcome = AgentRunner::new(AgentRunnerConfig::default())
        .run(&spec, &ctx)
        .await
        .expect("the runner runs claude");
    let report: AgentReport = serde_json::from_value(outcome.detail.clone()).unwrap();

    // The real transcript is parsed: the init line's skills and the agent's own final message.
    assert!(
        report
            .skills_offered
            .as_ref()
            .is_some_and(|s| !s.is_empty()),
        "skills from the init line: {report:?}"
    );
    assert_eq!(
        report.final_message.as_deref(),
        Some("Not logged in · Please run /login"),
        "{report:?}"
    );
    // Classified as an environment error (never retried), naming the runtime and what to do.
    let ExitClass::NotRunnable { reason } = &outcome.exit else {
        panic!(
            "an authentication failure is not_runnable, got {:?}\n{}",
            outcome.exit, outcome.stdout_tail
        );
    };
    assert!(
        reason.contains("agent runtime `claude` is not authenticated"),
        "{reason}"
    );
    assert!(
        reason.contains("Not logged in")
            && reason.contains("/login")
            && reason.contains("ANTHROPIC_API_KEY"),
        "{reason}"
    );
}

/// A Codex home whose only provider is a loopback port nothing listens on, so the run cannot
/// reach any API whatever the machine's network (the real CLI ignores `OPENAI_BASE_URL`).
fn codex_home_on_a_dead_port() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::write(
        home.path().join("config.toml"),
        format!("model_provider = \"loopback\"\n[model_providers.loopback]\nname = \"loopback\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\nenv_key = \"OPENAI_API_KEY\"\n"),
    )
    .unwrap();
    home
}

fn codex_payload(home: &std::path::Path, key: Option<&str>) -> AgentPayload {
    let mut payload = AgentPayload::new("codex", "Say hello.\n");
    payload
        .env
        .insert("HOME".into(), home.display().to_string());
    payload
        .env
        .insert("CODEX_HOME".into(), home.display().to_string());
    // Whatever the machine's environment: no key unless the test gives one.
    payload
        .env
        .insert("OPENAI_API_KEY".into(), key.unwrap_or("").into());
    payload.env.insert("CODEX_API_KEY".into(), String::new());
    payload
}

async fn run_agent(
    payload: &AgentPayload,
    timeout: Duration,
) -> (skillforge_runner::RunOutcome, AgentReport) {
    let scratch = tempfile::tempdir().unwrap();
    let spec = RunSpec {
        job_id: "job-real".into(),
        payload: serde_json::to_value(payload).unwrap(),
        timeout,
    };
    let ctx = RunContext::detached(scratch.path().to_path_buf());
    let outcome = AgentRunner::new(AgentRunnerConfig::default())
        .run(&spec, &ctx)
        .await
        .expect("the runner runs");
    let report: AgentReport = serde_json::from_value(outcome.detail.clone()).unwrap();
    (outcome, report)
}

// Issue 13 item 6: Codex without a credential does not say so (it retries its network until
// killed), so its profile's preflight refuses the run before the CLI starts: not_runnable,
// naming the runtime, the variables and login file looked for, and `codex login`.
#[tokio::test]
async fn codex_without_a_credential_is_refused_before_it_starts() {
    assert!(
        on_path("codex").is_some(),
        "`codex` is not on PATH: scripts/test installs it (npm install -g @openai/codex)"
    );
    let home = codex_home_on_a_dead_port();
    let (outcome, report) =
        run_agent(&codex_payload(home.path(), None), Duration::from_secs(120)).await;
    let ExitClass::NotRunnable { reason } = &outcome.exit else {
        panic!("not_runnable, got {:?}", outcome.exit)
    };
    assert!(
        reason.contains("agent runtime `codex` is not authenticated"),
        "{reason}"
    );
    assert!(
        reason.contains("OPENAI_API_KEY")
            && reason.contains("auth.json")
            && reason.contains("codex login"),
        "{reason}"
    );
    assert!(
        outcome.stdout_tail.is_empty() && report.transcript_tail.is_none(),
        "the CLI never started: {outcome:?}"
    );
    // A login file is a credential: the preflight lets the run start (it then meets the dead port).
    std::fs::write(home.path().join("auth.json"), "{}").unwrap();
    let (outcome, _) = run_agent(&codex_payload(home.path(), None), Duration::from_secs(15)).await;
    assert!(
        !matches!(&outcome.exit, ExitClass::NotRunnable { reason } if reason.contains("not authenticated")),
        "{:?}",
        outcome.exit
    );
}

// Issue 13 item 6: the real Codex with a key but no reachable API: its argv and stdin are
// accepted (`thread.started`, `turn.started`); its first model request reaches the run's
// recording proxy (issue 31 item 9), which cannot connect to the provider's base URL, so the
// runner stops Codex at once (it would retry "waiting for network" until the timeout) and the
// run is classified not_runnable naming the base URL.
#[tokio::test]
async fn codex_that_cannot_reach_its_api_is_stopped_and_classified() {
    assert!(
        on_path("codex").is_some(),
        "`codex` is not on PATH: scripts/test installs it (npm install -g @openai/codex)"
    );
    let home = codex_home_on_a_dead_port();
    let mut payload = codex_payload(home.path(), Some("sk-test-not-a-key"));
    payload.timeout_secs = Some(15);
    let (outcome, report) = run_agent(&payload, Duration::from_secs(600)).await;
    let transcript = report.transcript_tail.clone().unwrap_or_default();
    assert!(
        transcript.contains(r#""type":"thread.started""#)
            && transcript.contains(r#""type":"turn.started""#),
        "{transcript}"
    );
    assert!(
        report.final_message.is_none(),
        "no agent message: {report:?}"
    );
    let ExitClass::NotRunnable { reason } = &outcome.exit else {
        panic!("not_runnable, got {:?}\n{transcript}", outcome.exit)
    };
    assert!(
        reason.contains("agent runtime `codex` could not reach its model API")
            && reason.contains("http://127.0.0.1:")
            && reason.contains("recording proxy"),
        "{reason}"
    );
    assert_eq!(outcome.exit_code, None, "stopped, never exited on its own");
}

// Issue 13 item 6: the real OpenCode (it needs no credential: its own free provider) with only a
// loopback provider nothing listens on: it takes the prompt; its model request reaches the run's
// recording proxy (issue 31 item 9), which cannot connect to the provider's `baseURL`, so the run
// is stopped and not_runnable naming that URL (without the proxy OpenCode retries for about
// 90 s and prints "Cannot connect to API", which `network_failure_markers` still reads).
#[tokio::test]
async fn opencode_that_cannot_reach_its_api_is_an_environment_error() {
    assert!(
        on_path("opencode").is_some(),
        "`opencode` is not on PATH: scripts/test installs it (npm install -g opencode-ai)"
    );
    let home = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = home.path().join("opencode.json");
    std::fs::write(
        &config,
        serde_json::json!({"model": "loopback/test", "share": "disabled", "autoupdate": false,
            "provider": {"loopback": {"npm": "@ai-sdk/openai-compatible", "name": "loopback",
                "options": {"baseURL": format!("http://127.0.0.1:{port}/v1"), "apiKey": "x"}, "models": {"test": {"name": "test"}}}}})
        .to_string(),
    )
    .unwrap();
    let mut payload = AgentPayload::new("opencode", "Say hello.\n");
    payload
        .env
        .insert("HOME".into(), home.path().display().to_string());
    payload.env.insert(
        "XDG_CONFIG_HOME".into(),
        home.path().join("config").display().to_string(),
    );
    payload.env.insert(
        "XDG_DATA_HOME".into(),
        home.path().join("data").display().to_string(),
    );
    payload
        .env
        .insert("OPENCODE_CONFIG".into(), config.display().to_string());
    payload.timeout_secs = Some(300);
    let (outcome, report) = run_agent(&payload, Duration::from_secs(600)).await;
    let transcript = report.transcript_tail.clone().unwrap_or_default();
    let ExitClass::NotRunnable { reason } = &outcome.exit else {
        panic!("not_runnable, got {:?}\n{transcript}", outcome.exit)
    };
    assert!(
        reason.contains("agent runtime `opencode` could not reach its model API")
            && reason.contains(&format!("http://127.0.0.1:{port}/v1")),
        "{reason}\n{transcript}"
    );
}
