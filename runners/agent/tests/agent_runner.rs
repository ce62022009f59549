//! End-to-end tests of the agent runner: real processes through `skillforge-runner-process`,
//! the scripted agent binary of this crate, and fake agent CLIs written as shell scripts.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use skillforge_runner::{ExitClass, RunContext, RunOutcome, RunSpec, Runner, RunnerError};
use skillforge_runner_agent::{AgentPayload, AgentReport, AgentRunner, AgentRunnerConfig};

const SCRIPTED_BIN: &str = env!("CARGO_BIN_EXE_skillforge-agent-scripted");
const TIMEOUT: Duration = Duration::from_secs(60);

const OPTIONS_PROMPT: &str = "task: generate_options\noptions: 3\nskills: commit-message, review\n\
     load: review\n\nDescribe commit 1a2b3c: fix off-by-one in pager\nsrc/pager.rs | 2 +-\n";

fn runner(overrides: &[(&str, &Path)]) -> AgentRunner {
    AgentRunner::new(AgentRunnerConfig {
        skillforge_bin: Some(PathBuf::from(SCRIPTED_BIN)),
        program_overrides: overrides
            .iter()
            .map(|(name, path)| (name.to_string(), path.to_path_buf()))
            .collect(),
        ..AgentRunnerConfig::default()
    })
}

async fn run_with(
    runner: &AgentRunner,
    payload: &AgentPayload,
    ctx: &RunContext,
) -> Result<RunOutcome, RunnerError> {
    let spec = RunSpec {
        job_id: "job-1".into(),
        payload: serde_json::to_value(payload).expect("payload json"),
        timeout: TIMEOUT,
    };
    runner.run(&spec, ctx).await
}

async fn run(runner: &AgentRunner, payload: &AgentPayload) -> (RunOutcome, AgentReport) {
    let scratch = tempfile::tempdir().expect("scratch dir");
    let ctx = RunContext::detached(scratch.path().to_path_buf());
    let outcome = run_with(runner, payload, &ctx).await.expect("run");
    let report: AgentReport =
        serde_json::from_value(outcome.detail.clone()).expect("detail is an AgentReport");
    (outcome, report)
}

/// Writes an executable `#!/bin/sh` script into `dir`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).expect("write script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

#[tokio::test]
async fn scripted_agent_runs_end_to_end_and_reports_skills() {
    let mut payload = AgentPayload::new("scripted", OPTIONS_PROMPT);
    payload.skills = vec!["commit-message".into(), "review".into()];
    let (outcome, report) = run(&runner(&[]), &payload).await;
    assert_eq!(
        outcome.exit,
        ExitClass::Passed,
        "stderr: {}",
        outcome.stderr_tail
    );
    assert_eq!(
        (report.runtime.as_str(), report.family.as_str()),
        ("scripted", "scripted")
    );
    assert_eq!(report.program, SCRIPTED_BIN);
    assert_eq!(report.skills_handed, ["commit-message", "review"]);
    assert_eq!(
        report.skills_offered,
        Some(vec!["commit-message".to_string(), "review".to_string()])
    );
    assert_eq!(report.skills_loaded, Some(vec!["review".to_string()]));
    let final_message = report.final_message.expect("final message");
    let options: serde_json::Value = serde_json::from_str(&final_message).expect("options json");
    let labels: Vec<&str> = options["options"]
        .as_array()
        .expect("options")
        .iter()
        .map(|o| o["label"].as_str().expect("label"))
        .collect();
    assert_eq!(labels, ["a", "b", "c"]);
    assert!(
        final_message.contains("pager"),
        "options quote the input: {final_message}"
    );
    let tail = report.transcript_tail.expect("transcript tail");
    assert!(
        tail.contains(r#"{"type":"skill_loaded","name":"review"}"#),
        "{tail}"
    );
    assert_eq!(outcome.stdout_tail, tail);
}

#[tokio::test]
async fn scripted_output_is_deterministic() {
    let runner = runner(&[]);
    let judge = "task: judge\nOption A: short\nOption B: long\n";
    let (first, first_report) = run(&runner, &AgentPayload::new("scripted", judge)).await;
    let (second, second_report) = run(&runner, &AgentPayload::new("scripted", judge)).await;
    assert_eq!(
        first.stdout_tail, second.stdout_tail,
        "same prompt, same bytes"
    );
    assert_eq!(first_report.final_message, second_report.final_message);
    let verdict: serde_json::Value =
        serde_json::from_str(first_report.final_message.as_deref().expect("final")).expect("json");
    assert!(["a", "b", "tie"].contains(&verdict["verdict"].as_str().expect("verdict")));
    let (other, _) = run(
        &runner,
        &AgentPayload::new("scripted", format!("{judge}x\n")),
    )
    .await;
    assert_ne!(
        first.stdout_tail, other.stdout_tail,
        "output depends on the prompt"
    );
}

#[tokio::test]
async fn scripted_prompt_without_skills_records_an_empty_list_not_unknown() {
    let (_, report) = run(&runner(&[]), &AgentPayload::new("scripted", "What is 2+2?")).await;
    assert_eq!(report.skills_offered, Some(Vec::new()));
    assert_eq!(report.skills_loaded, Some(Vec::new()));
    assert!(
        report
            .final_message
            .expect("answer")
            .starts_with("scripted answer ")
    );
}

#[tokio::test]
async fn scripted_bad_task_fails_with_its_reason() {
    let (outcome, report) = run(
        &runner(&[]),
        &AgentPayload::new("scripted", "task: dance\n"),
    )
    .await;
    assert_eq!(outcome.exit, ExitClass::Failed { code: 2 });
    assert!(
        outcome.stderr_tail.contains("unknown task `dance`"),
        "{}",
        outcome.stderr_tail
    );
    assert_eq!(report.final_message, None);
    assert_eq!(report.skills_loaded, None, "no transcript: unknown");
}

#[tokio::test]
async fn missing_program_is_not_runnable_naming_runtime_and_program() {
    let missing = Path::new("/nonexistent/skillforge-test/claude");
    let (outcome, report) = run(
        &runner(&[("claude", missing)]),
        &AgentPayload::new("claude", "hi"),
    )
    .await;
    let ExitClass::NotRunnable { reason } = &outcome.exit else {
        panic!("expected not_runnable, got {:?}", outcome.exit);
    };
    assert!(reason.starts_with("agent runtime `claude`: "), "{reason}");
    assert!(
        reason.contains("/nonexistent/skillforge-test/claude"),
        "{reason}"
    );
    assert!(reason.contains("install Claude Code"), "{reason}");
    assert_eq!(report.exit, outcome.exit);
    assert_eq!((report.skills_offered, report.skills_loaded), (None, None));
}

#[tokio::test]
async fn missing_program_on_path_is_not_runnable() {
    let name = Path::new("skillforge-test-no-such-codex");
    // A credential, so the runtime's credential preflight passes and the program is what fails.
    let mut payload = AgentPayload::new("codex", "hi");
    payload
        .env
        .insert("OPENAI_API_KEY".into(), "sk-test".into());
    let (outcome, _) = run(&runner(&[("codex", name)]), &payload).await;
    assert!(
        matches!(&outcome.exit, ExitClass::NotRunnable { reason } if reason.contains("`codex`") && reason.contains("skillforge-test-no-such-codex")),
        "{:?}",
        outcome.exit
    );
}

/// A fake `claude`: records its argv and stdin, checks the credential arrived through env, and
/// prints a stream-json transcript.
#[tokio::test]
async fn claude_profile_gets_prompt_on_stdin_and_credentials_in_env() {
    let dir = tempfile::tempdir().expect("tempdir");
    let record = dir.path().join("record");
    std::fs::create_dir(&record).expect("record dir");
    let fake = script(
        dir.path(),
        "claude",
        &format!(
            r#"rec={rec}
printf '%s\n' "$@" > "$rec/argv"
cat > "$rec/stdin"
if [ "$ANTHROPIC_API_KEY" = "sk-test-123" ]; then key=present; else key=absent; fi
echo '{{"type":"system","subtype":"init","session_id":"s","tools":["Skill"],"skills":["commit-message"]}}'
echo '{{"type":"assistant","message":{{"content":[{{"type":"tool_use","id":"t1","name":"Skill","input":{{"skill":"commit-message"}}}}]}}}}'
echo "{{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"key $key\"}}"
"#,
            rec = record.display()
        ),
    );
    let prompt = "PROMPT-LINE-ONE describe the diff\nPROMPT-LINE-TWO be brief\n";
    let mut payload = AgentPayload::new("claude", prompt);
    payload.model = Some("sonnet".into());
    payload
        .env
        .insert("ANTHROPIC_API_KEY".into(), "sk-test-123".into());
    let (outcome, report) = run(&runner(&[("claude", &fake)]), &payload).await;
    assert_eq!(
        outcome.exit,
        ExitClass::Passed,
        "stderr: {}",
        outcome.stderr_tail
    );
    let argv = std::fs::read_to_string(record.join("argv")).expect("argv record");
    assert_eq!(
        argv,
        "-p\n--output-format\nstream-json\n--verbose\n--model\nsonnet\n--permission-mode\nacceptEdits\n\
         --allowedTools\nBash(git init:*) Bash(git add:*) Bash(git commit:*) Bash(git status:*) Bash(git diff:*) Bash(git log:*) Bash(git show:*)\n"
    );
    assert_eq!(
        std::fs::read_to_string(record.join("stdin")).expect("stdin"),
        prompt
    );
    assert_eq!(report.final_message.as_deref(), Some("key present"));
    assert_eq!(
        report.skills_offered,
        Some(vec!["commit-message".to_string()])
    );
    assert_eq!(
        report.skills_loaded,
        Some(vec!["commit-message".to_string()])
    );
    assert_eq!(report.family, "claude");
}

/// A fake `opencode`: the prompt arrives whole on stdin, never in argv (issue 38 item 5: an
/// attached `--file` was cut at 2 000 characters a line and 50 KB, so a judge never saw the end
/// of a long answer); 60 KB with a 5 000-character line arrive byte for byte.
#[tokio::test]
async fn opencode_profile_gets_its_whole_prompt_on_stdin() {
    let dir = tempfile::tempdir().expect("tempdir");
    let record = dir.path().join("record");
    std::fs::create_dir(&record).expect("record dir");
    let fake = script(
        dir.path(),
        "opencode",
        &format!(
            r#"rec={rec}
printf '%s\n' "$@" > "$rec/argv"
cat > "$rec/stdin"
echo '{{"type":"tool_use","part":{{"tool":"skill","state":{{"status":"completed","input":{{"name":"release-notes"}}}}}}}}'
echo '{{"type":"tool_use","part":{{"tool":"skill","state":{{"status":"error","input":{{"name":"other"}},"error":"ripgrep execution failed"}}}}}}'
echo '{{"type":"text","part":{{"type":"text","text":"read the prompt"}}}}'
"#,
            rec = record.display()
        ),
    );
    let long_line = "x".repeat(5_000);
    let prompt = format!(
        "SECRET-PROMPT write release notes\n{long_line}\n{}END-OF-PROMPT\n",
        "a line of the answer\n".repeat(2_800)
    );
    assert!(prompt.len() > 60_000);
    let (outcome, report) = run(
        &runner(&[("opencode", &fake)]),
        &AgentPayload::new("opencode", prompt.clone()),
    )
    .await;
    assert_eq!(
        outcome.exit,
        ExitClass::Passed,
        "stderr: {}",
        outcome.stderr_tail
    );
    assert_eq!(
        std::fs::read_to_string(record.join("stdin")).expect("stdin"),
        prompt
    );
    let argv = std::fs::read_to_string(record.join("argv")).expect("argv");
    assert!(
        !argv.contains("SECRET-PROMPT") && !argv.contains("--file"),
        "{argv}"
    );
    assert_eq!(report.final_message.as_deref(), Some("read the prompt"));
    assert_eq!(report.skills_offered, None, "opencode records no offers");
    // issue 38 item 4: a skill call that failed is no load
    assert_eq!(
        report.skills_loaded,
        Some(vec!["release-notes".to_string()])
    );
}

#[tokio::test]
async fn transcript_is_written_where_asked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("nested/transcript.jsonl");
    let mut payload = AgentPayload::new("scripted", OPTIONS_PROMPT);
    payload.transcript_path = Some(path.clone());
    let (outcome, report) = run(&runner(&[]), &payload).await;
    assert_eq!(report.transcript_path.as_deref(), Some(path.as_path()));
    assert_eq!(report.transcript_tail, None);
    let written = std::fs::read_to_string(&path).expect("transcript file");
    assert!(
        written.starts_with(r#"{"type":"start","task":"generate_options""#),
        "{written}"
    );
    assert_eq!(written, outcome.stdout_tail);
}

#[tokio::test]
async fn cancel_kills_the_agent() {
    let mut payload = AgentPayload::new("scripted", OPTIONS_PROMPT);
    payload
        .env
        .insert("SKILLFORGE_SCRIPTED_DELAY_MS".into(), "60000".into());
    let scratch = tempfile::tempdir().expect("scratch");
    let ctx = RunContext::detached(scratch.path().to_path_buf());
    ctx.cancel.cancel();
    let outcome = run_with(&runner(&[]), &payload, &ctx).await.expect("run");
    assert!(
        matches!(outcome.exit, ExitClass::Killed { .. }),
        "{:?}",
        outcome.exit
    );
    assert!(
        outcome.duration_ms < 30_000,
        "killed, not waited for: {}",
        outcome.duration_ms
    );
    let report: AgentReport = serde_json::from_value(outcome.detail).expect("report");
    assert_eq!(report.final_message, None);
}

#[tokio::test]
async fn payload_timeout_applies() {
    let mut payload = AgentPayload::new("scripted", OPTIONS_PROMPT);
    payload
        .env
        .insert("SKILLFORGE_SCRIPTED_DELAY_MS".into(), "60000".into());
    payload.timeout_secs = Some(1);
    let (outcome, _) = run(&runner(&[]), &payload).await;
    assert_eq!(outcome.exit, ExitClass::TimedOut);
}

#[tokio::test]
async fn unknown_runtime_and_bad_payload_are_errors() {
    let scratch = tempfile::tempdir().expect("scratch");
    let ctx = RunContext::detached(scratch.path().to_path_buf());
    let error = run_with(&runner(&[]), &AgentPayload::new("gemini", "hi"), &ctx)
        .await
        .expect_err("unknown runtime");
    assert!(
        error.to_string().contains("unknown agent runtime `gemini`"),
        "{error}"
    );
    let spec = RunSpec {
        job_id: "job-2".into(),
        payload: serde_json::json!({"runtime": "scripted"}),
        timeout: TIMEOUT,
    };
    let error = runner(&[]).run(&spec, &ctx).await.expect_err("no prompt");
    assert!(
        matches!(
            error,
            RunnerError::InvalidPayload {
                runner: "agent",
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(runner(&[]).kind(), "agent");
}

// Issue 31 item 9: a local Claude Code run is pointed at its recording proxy (a loopback
// `ANTHROPIC_BASE_URL`, never the configured one), its key passed as given; a run whose job sets
// an HTTP proxy of its own keeps the configured base URL and has no recording proxy. A run that
// sent no model request keeps the transcript's list.
#[tokio::test]
async fn a_claude_run_talks_to_its_recording_proxy_unless_it_has_an_http_proxy_of_its_own() {
    let dir = tempfile::tempdir().expect("tempdir");
    let record = dir.path().join("record");
    std::fs::create_dir(&record).expect("record dir");
    let fake = script(
        dir.path(),
        "claude",
        &format!(
            r#"printf '%s %s' "$ANTHROPIC_BASE_URL" "$ANTHROPIC_API_KEY" > {rec}/base
echo '{{"type":"system","subtype":"init","session_id":"s","tools":["Skill"],"skills":["a"]}}'
echo '{{"type":"result","subtype":"success","is_error":false,"result":"ok"}}'
"#,
            rec = record.display()
        ),
    );
    let mut payload = AgentPayload::new("claude", "hi\n");
    payload
        .env
        .insert("ANTHROPIC_API_KEY".into(), "sk-test-9".into());
    payload.env.insert(
        "ANTHROPIC_BASE_URL".into(),
        "https://gateway.example/anthropic".into(),
    );
    let (outcome, report) = run(&runner(&[("claude", &fake)]), &payload).await;
    assert_eq!(outcome.exit, ExitClass::Passed, "{}", outcome.stderr_tail);
    let seen = std::fs::read_to_string(record.join("base")).expect("base");
    let (base, key) = seen.split_once(' ').expect("two words");
    assert!(
        base.starts_with("http://127.0.0.1:") && base.ends_with("/r0"),
        "{base}"
    );
    assert_eq!(key, "sk-test-9");
    assert_eq!(report.proxied_requests, Some(0));
    assert_eq!(report.skills_offered, Some(vec!["a".to_owned()]));
    assert_eq!(
        report.skills_offered_from,
        Some(skillforge_runner_agent::OfferedFrom::Transcript)
    );

    payload
        .env
        .insert("HTTPS_PROXY".into(), "http://proxy.example:3128".into());
    let (outcome, report) = run(&runner(&[("claude", &fake)]), &payload).await;
    assert_eq!(outcome.exit, ExitClass::Passed, "{}", outcome.stderr_tail);
    let seen = std::fs::read_to_string(record.join("base")).expect("base");
    assert_eq!(seen, "https://gateway.example/anthropic sk-test-9");
    assert_eq!(report.proxied_requests, None);
}
