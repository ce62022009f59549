//! The `claude` runtime profile against the real Claude Code CLI (issue 13 item 6), installed by
//! `scripts/test` (npm `@anthropic-ai/claude-code`), in the state every CI machine has: no
//! credentials. The real CLI takes the prompt on stdin, prints its `system/init` line and an
//! assistant line `Not logged in · Please run /login` with `"error":"authentication_failed"`, and
//! exits 1. The runner must parse that real transcript (skills offered from the init line, the
//! final message) and classify the run as an environment problem (`not_runnable`, which the
//! engine never retries) whose reason names the runtime and how to log in.

use std::path::PathBuf;
use std::time::Duration;

use skillforge_runner::{ExitClass, RunContext, RunSpec, Runner};
use skillforge_runner_agent::{AgentPayload, AgentReport, AgentRunner, AgentRunnerConfig};

fn on_path(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .and_then(|p| std::env::split_paths(&p).map(|d| d.join(tool)).find(|p| p.is_file()))
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
    payload.env.insert("HOME".into(), home.path().display().to_string());
    payload.env.insert("CLAUDE_CONFIG_DIR".into(), home.path().join(".claude").display().to_string());
    let spec = RunSpec {
        job_id: "job-claude".into(),
        payload: serde_json::to_value(&payload).unwrap(),
        timeout: Duration::from_secs(120),
    };
    let ctx = RunContext::detached(scratch.path().to_path_buf());
    let outcome = AgentRunner::new(AgentRunnerConfig::default()).run(&spec, &ctx).await.expect("the runner runs claude");
    let report: AgentReport = serde_json::from_value(outcome.detail.clone()).unwrap();

    // The real transcript is parsed: the init line's skills and the agent's own final message.
    assert!(!report.skills_offered.as_ref().map_or(true, Vec::is_empty), "skills from the init line: {report:?}");
    assert_eq!(report.final_message.as_deref(), Some("Not logged in · Please run /login"), "{report:?}");
    // Classified as an environment error (never retried), naming the runtime and what to do.
    let ExitClass::NotRunnable { reason } = &outcome.exit else {
        panic!("an authentication failure is not_runnable, got {:?}\n{}", outcome.exit, outcome.stdout_tail);
    };
    assert!(reason.contains("agent runtime `claude` is not authenticated"), "{reason}");
    assert!(reason.contains("Not logged in") && reason.contains("/login") && reason.contains("ANTHROPIC_API_KEY"), "{reason}");
}
