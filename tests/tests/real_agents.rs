//! The agent runner with the real CLIs (Claude Code, Codex, OpenCode, installed by
//! `scripts/test`) against the model API the test serves on loopback (`skillforge_tests::
//! fake_model`), asserting on what the model was sent (issue 31, issue 38): writes allowed in the
//! work dir, an API error is never an answer, a user-level or parent-project skill never reaches
//! the model, tokens and cost read from each transcript.

use std::path::Path;
use std::time::Duration;

use skillforge_runner::{ExitClass, RunContext, RunOutcome, RunSpec, Runner};
use skillforge_runner_agent::{
    Access, AgentPayload, AgentReport, AgentRunner, AgentRunnerConfig, ApiErrorKind,
};
use skillforge_tests::agent_user::{
    AgentUser as User, REAL_RUNTIMES, USER_MARKER, install_project_skill as install_skill, on_path,
};
use skillforge_tests::fake_model::{Api, FakeModel, Reply, Seen, Tokens};

const RUNTIMES: [&str; 3] = REAL_RUNTIMES;

/// Runs `prompt` on `runtime` as a worker whose user is `user` would, with the worker's
/// environment given explicitly (`HOME`, the fake's key and base URL), in `work`.
async fn run(
    runtime: &str,
    user: &User,
    work: &Path,
    prompt: &str,
    access: Access,
) -> (RunOutcome, AgentReport) {
    run_with(runtime, user, work, prompt, access, None).await
}

/// [`run`], with the runtime's program replaced by `program` (a wrapper) when given.
async fn run_with(
    runtime: &str,
    user: &User,
    work: &Path,
    prompt: &str,
    access: Access,
    program: Option<&Path>,
) -> (RunOutcome, AgentReport) {
    run_payload(runtime, user, work, prompt, access, program, &[], |_| {}).await
}

/// [`run_with`], with `adjust` applied to the payload last.
async fn run_payload(
    runtime: &str,
    user: &User,
    work: &Path,
    prompt: &str,
    access: Access,
    program: Option<&Path>,
    worker_extra: &[(&str, &str)],
    adjust: impl FnOnce(&mut AgentPayload),
) -> (RunOutcome, AgentReport) {
    assert!(
        on_path(runtime),
        "`{runtime}` is not on PATH: scripts/test installs it"
    );
    let scratch = tempfile::tempdir().unwrap();
    let mut payload = AgentPayload::new(runtime, prompt);
    payload.workdir = Some(work.to_path_buf());
    payload.access = access;
    payload.project_scope_only = true;
    payload.timeout_secs = Some(120);
    adjust(&mut payload);
    // The worker's own environment, as the runner reads it: its user's home and the credential.
    // (The runner builds a private home from these; it must not pass them on.)
    let program_overrides = program
        .map(|p| (runtime.to_owned(), p.to_path_buf()))
        .into_iter()
        .collect();
    let mut worker_env = user.env();
    worker_env.extend(
        worker_extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    let runner = AgentRunner::new(AgentRunnerConfig {
        worker_env: Some(worker_env),
        program_overrides,
        ..AgentRunnerConfig::default()
    });
    let spec = RunSpec {
        job_id: format!("job-{runtime}"),
        payload: serde_json::to_value(&payload).unwrap(),
        timeout: Duration::from_secs(180),
    };
    let ctx = RunContext::detached(scratch.path().to_path_buf());
    let outcome = runner.run(&spec, &ctx).await.expect("the runner runs");
    let report: AgentReport = serde_json::from_value(outcome.detail.clone()).unwrap();
    (outcome, report)
}

fn api_of(runtime: &str) -> Api {
    match runtime {
        "codex" => Api::Responses,
        "opencode" => Api::Chat,
        _ => Api::Messages,
    }
}

fn agent_turns(fake: &FakeModel) -> Vec<Seen> {
    fake.requests()
        .into_iter()
        .filter(Seen::is_agent_turn)
        .collect()
}

/// A clean work dir outside any project (the system temp dir).
fn work_dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

// Issue 31 items 3, 5, 7 and 9; issue 38 items 1 and 9: each real CLI, in its private home,
// writes the file it was asked to inside its work dir, sees the project skill and none of the
// user's, and its report carries the tokens the fake reported.
#[tokio::test(flavor = "multi_thread")]
async fn each_real_cli_edits_its_work_dir_sees_only_the_project_skill_and_reports_its_tokens() {
    for runtime in RUNTIMES {
        let fake = FakeModel::start();
        let user = User::new(&fake);
        let work = work_dir();
        install_skill(work.path(), runtime, "PROJECT-SKILL-5c1d");
        fake.report_tokens(Tokens {
            input: 1234,
            output: 56,
        });
        fake.respond(|seen: &Seen| match seen.n_tool_results {
            0 => Reply::Write {
                path: "NOTES.md".into(),
                content: "three lines".into(),
            },
            _ => Reply::Text("Wrote NOTES.md.".into()),
        });
        let (outcome, report) = run(
            runtime,
            &user,
            work.path(),
            "Write NOTES.md.\n",
            Access::EditWorkdir,
        )
        .await;
        let turns = agent_turns(&fake);
        assert!(
            !turns.is_empty(),
            "{runtime}: no model request: {outcome:?}"
        );
        assert!(turns.iter().all(|t| t.api == api_of(runtime)), "{runtime}");
        assert!(
            outcome.exit.is_passed(),
            "{runtime}: {:?}\n{}\n{}",
            outcome.exit,
            outcome.stderr_tail,
            report.transcript_tail.clone().unwrap_or_default()
        );
        assert_eq!(
            std::fs::read_to_string(work.path().join("NOTES.md"))
                .ok()
                .as_deref()
                .map(str::trim),
            Some("three lines"),
            "{runtime}: the write reached the work dir: {report:?}"
        );
        assert!(
            report.permission_denials.is_empty(),
            "{runtime}: {:?}",
            report.permission_denials
        );
        assert_eq!(
            report.final_message.as_deref(),
            Some("Wrote NOTES.md."),
            "{runtime}"
        );
        for turn in &turns {
            assert!(
                turn.shows("PROJECT-SKILL-5c1d"),
                "{runtime}: the project skill is listed to the model"
            );
            assert!(
                !turn.shows(USER_MARKER),
                "{runtime}: a user-level skill or instruction reached the model:\n{}",
                turn.everything()
            );
        }
        let usage = report.usage.expect("usage reported");
        assert_eq!(
            usage.output_tokens.map(|o| o >= 56),
            Some(true),
            "{runtime}: {usage:?}"
        );
        assert!(
            usage.total_tokens().unwrap() >= 1234 + 56,
            "{runtime}: {usage:?}"
        );
        match runtime {
            "codex" => assert_eq!(
                usage.cost_usd, None,
                "codex reports no cost: unknown, never 0"
            ),
            _ => assert!(
                usage.cost_usd.is_some_and(|c| c > 0.0),
                "{runtime}: {usage:?}"
            ),
        }
        assert!(
            fake.other_requests().is_empty(),
            "{runtime}: {:?}",
            fake.other_requests()
        );
    }
}

// Issue 31 item 4: an HTTP 400 is never an answer: the run fails, the report names the API error
// and carries no answer; a 401 is an environment problem (not_runnable) at once.
#[tokio::test(flavor = "multi_thread")]
async fn an_api_error_is_never_an_answer_and_a_refused_key_is_not_runnable() {
    for runtime in RUNTIMES {
        let fake = FakeModel::start();
        let user = User::new(&fake);
        let work = work_dir();
        fake.respond(|_: &Seen| Reply::Error(400, "prompt is too long".into()));
        let (outcome, report) = run(
            runtime,
            &user,
            work.path(),
            "Say hi.\n",
            Access::EditWorkdir,
        )
        .await;
        assert!(!outcome.exit.is_passed(), "{runtime}: {outcome:?}");
        let error = report
            .api_error
            .clone()
            .unwrap_or_else(|| panic!("{runtime}: no api error: {report:?}"));
        assert_eq!(
            error.kind,
            ApiErrorKind::Request,
            "{runtime}: {error:?}\n{}",
            report.transcript_tail.clone().unwrap_or_default()
        );
        assert_eq!(report.answer(), None, "{runtime}");

        fake.respond(|_: &Seen| Reply::Error(401, "invalid x-api-key".into()));
        let (outcome, report) = run(
            runtime,
            &user,
            work.path(),
            "Say hi.\n",
            Access::EditWorkdir,
        )
        .await;
        let ExitClass::NotRunnable { reason } = &outcome.exit else {
            panic!(
                "{runtime}: a refused key is not_runnable, got {:?} {report:?}",
                outcome.exit
            )
        };
        assert!(reason.contains("not authenticated"), "{runtime}: {reason}");
    }
}

// Issue 31 item 5: a work dir inside a project (a parent with CLAUDE.md, AGENTS.md, .claude and
// .agents skills) runs in a clean copy: the parent's files never reach the model, and what the
// agent wrote comes back.
#[tokio::test(flavor = "multi_thread")]
async fn a_parent_projects_instructions_and_skills_never_reach_the_model() {
    const PARENT: &str = "PARENT-PROJECT-MARKER-91b2";
    for runtime in RUNTIMES {
        let fake = FakeModel::start();
        let user = User::new(&fake);
        let project = tempfile::tempdir().unwrap();
        for at in ["CLAUDE.md", "AGENTS.md"] {
            skillforge_tests::write(
                &project.path().join(at),
                &format!("{PARENT} instructions\n"),
            );
        }
        for at in [
            ".claude/skills/tldr",
            ".agents/skills/tldr",
            ".opencode/skill/tldr",
        ] {
            skillforge_tests::write(
                &project.path().join(at).join("SKILL.md"),
                &format!("---\nname: tldr\ndescription: {PARENT}\n---\n{PARENT}\n"),
            );
        }
        std::process::Command::new("git")
            .arg("init")
            .arg("-q")
            .arg(project.path())
            .status()
            .unwrap();
        let work = project.path().join("deep/work");
        skillforge_tests::write(&work.join("input.txt"), "some text\n");
        fake.respond(|seen: &Seen| match seen.n_tool_results {
            0 => Reply::Write {
                path: "out.txt".into(),
                content: "done".into(),
            },
            _ => Reply::Text("ok".into()),
        });
        let (outcome, report) = run(
            runtime,
            &user,
            &work,
            "Write out.txt.\n",
            Access::EditWorkdir,
        )
        .await;
        assert!(
            outcome.exit.is_passed(),
            "{runtime}: {:?} {report:?}",
            outcome.exit
        );
        for turn in agent_turns(&fake) {
            assert!(
                !turn.shows(PARENT),
                "{runtime}: the parent project reached the model:\n{}",
                turn.everything()
            );
        }
        assert_eq!(
            std::fs::read_to_string(work.join("out.txt"))
                .unwrap()
                .trim(),
            "done",
            "{runtime}: the agent's write came back"
        );
        assert_eq!(
            std::fs::read_to_string(work.join("input.txt")).unwrap(),
            "some text\n"
        );
    }
}

// Issue 31 item 6: a judge (read-only) cannot write: Claude Code is offered no tool at all;
// OpenCode's acting tools are denied; Codex's sandbox refuses the command and tells the model so
// (Codex 0.171 prints no item for a refused `exec_command` in its `--json` transcript: the runner
// reads the refusal from Codex's session log into the report's `permission_denials`).
#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_run_cannot_write() {
    for runtime in RUNTIMES {
        let fake = FakeModel::start();
        let user = User::new(&fake);
        let work = work_dir();
        fake.respond(|seen: &Seen| match seen.n_tool_results {
            0 if seen.is_agent_turn() => Reply::Shell("echo x > made.txt".into()),
            _ => Reply::Text("{\"winner\":\"A\"}".into()),
        });
        let (outcome, report) =
            run(runtime, &user, work.path(), "Judge.\n", Access::ReadOnly).await;
        assert!(outcome.exit.is_passed(), "{runtime}: {outcome:?}");
        assert_eq!(report.answer(), Some("{\"winner\":\"A\"}"), "{runtime}");
        assert!(
            !work.path().join("made.txt").exists(),
            "{runtime}: a read-only run wrote a file"
        );
        let requests = fake.requests();
        assert!(!requests.is_empty());
        match runtime {
            "claude" => assert!(
                requests.iter().all(|r| r.tools.is_empty()),
                "claude: tools offered to a judge: {:?}",
                requests[0].tools
            ),
            "codex" => {
                assert!(
                    requests
                        .iter()
                        .any(|r| r.messages.contains("Read-only file system")),
                    "codex: the sandbox refused the write"
                );
                // absent from `exec --json`, read from Codex's session log (issue 38 item 8)
                // from the `exec --json` item when Codex prints one, else from its session log
                let names_it = |d: &&skillforge_runner_agent::PermissionDenial| {
                    d.tool == "shell"
                        && (d.path.as_deref().is_some_and(|p| p.ends_with("made.txt"))
                            || d.message.as_deref().is_some_and(|m| m.contains("made.txt")))
                };
                assert!(
                    report.permission_denials.iter().any(|d| names_it(&d)),
                    "codex: the refusal is not in the report: {report:?}"
                );
            }
            _ => {
                let told: Vec<&str> = requests.iter().map(|r| r.messages.as_str()).collect();
                assert!(
                    requests
                        .iter()
                        .all(|r| !r.tools.iter().any(|t| t == "bash"))
                        || told
                            .iter()
                            .any(|m| m.contains("rejected") || m.contains("denied")),
                    "opencode: {told:?} {:?}",
                    requests.last().map(|r| &r.tools)
                );
            }
        }
    }
}

// Issue 38 item 2: OpenCode jobs at a worker's default concurrency: each run has its own data
// dir (database), so none breaks on "database is locked" or a migration race.
#[tokio::test(flavor = "multi_thread")]
async fn concurrent_opencode_runs_each_have_their_own_database() {
    let fake = FakeModel::start();
    let user = User::new(&fake);
    fake.respond(|_: &Seen| Reply::Text("ok".into()));
    let works: Vec<tempfile::TempDir> = (0..4).map(|_| work_dir()).collect();
    let runs = works.iter().map(|w| {
        run(
            "opencode",
            &user,
            w.path(),
            "Say ok.\n",
            Access::EditWorkdir,
        )
    });
    for (outcome, report) in futures::future::join_all(runs).await {
        let transcript = report.transcript_tail.clone().unwrap_or_default();
        assert!(
            outcome.exit.is_passed() && report.answer() == Some("ok"),
            "{:?} {}\n{transcript}",
            outcome.exit,
            outcome.stderr_tail
        );
        assert!(
            !transcript.contains("database is locked")
                && !outcome.stderr_tail.contains("database is locked")
        );
    }
    assert!(
        !user.home().join(".local/share/opencode").exists(),
        "the user's own database was never touched"
    );
}

/// Where `tool` is on `PATH`.
fn which(tool: &str) -> std::path::PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("`{tool}` is not on PATH: scripts/test installs it"))
}

/// Every `connect` in an strace log that leaves loopback or asks a name server (port 53).
fn outside_connects(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains("connect(") && (l.contains("AF_INET") || l.contains("AF_INET6")))
        .filter(|l| {
            l.contains("htons(53)")
                || !(l.contains("inet_addr(\"127.0.0.1\")")
                    || l.contains("\"::1\"")
                    || l.contains("::ffff:127.0.0.1"))
        })
        .map(str::to_owned)
        .collect()
}

// Issue 38 item 9: with the profiles' switches, each real CLI connects to nothing but the model
// API it was given: no DNS lookup, no connection beyond loopback (every connect of the CLI and
// its children, traced with strace). Without them Claude Code looks up api.anthropic.com, Codex
// ab.chatgpt.com, chatgpt.com and github.com, OpenCode models.opencode.ai and the npm registry.
#[tokio::test(flavor = "multi_thread")]
async fn each_real_cli_reaches_nothing_but_its_model_api() {
    let strace = which("strace");
    for runtime in RUNTIMES {
        let fake = FakeModel::start();
        let user = User::new(&fake);
        let work = work_dir();
        let tools = tempfile::tempdir().unwrap();
        let log = tools.path().join("connect.log");
        let wrapper = tools.path().join(runtime);
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\nexec '{}' -f -qq -e trace=connect -o '{}' '{}' \"$@\"\n",
                strace.display(),
                log.display(),
                which(runtime).display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(
            &wrapper,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        fake.respond(|seen: &Seen| match seen.n_tool_results {
            0 if seen.is_agent_turn() => Reply::Write {
                path: "a.txt".into(),
                content: "a".into(),
            },
            _ => Reply::Text("done".into()),
        });
        let (outcome, report) = run_with(
            runtime,
            &user,
            work.path(),
            "Write a.txt.\n",
            Access::EditWorkdir,
            Some(&wrapper),
        )
        .await;
        assert!(
            outcome.exit.is_passed() && report.answer() == Some("done"),
            "{runtime}: {:?} {}",
            outcome.exit,
            outcome.stderr_tail
        );
        let traced = std::fs::read_to_string(&log).unwrap();
        assert!(
            traced.contains("127.0.0.1"),
            "{runtime}: the trace saw the model API connection:\n{traced}"
        );
        let outside = outside_connects(&traced);
        assert!(
            outside.is_empty(),
            "{runtime} reached beyond loopback:\n{}",
            outside.join("\n")
        );
    }
}

// Issue 37 item 8 in a checkout (the work dir is a git repository when the run starts): each real
// CLI, editing its work dir, commits with the user's identity (`user.name`/`user.email` of their
// git config, and nothing else of it: not its credential helper) and the commit carries `Skillforge-Template: planner@v3`. Codex keeps a
// repository's `.git` read-only under `workspace-write` unless it is a writable root (its profile
// names a checkout's `.git`); Claude Code's acceptEdits asks for `git commit` unless allowed by
// name (its profile does).
#[tokio::test(flavor = "multi_thread")]
async fn each_real_cli_commits_in_its_checkout_with_the_template_trailer() {
    const STEPS: [&str; 3] = [
        "git commit --allow-empty -q -m 'Plan the change'",
        "git log -1 --format='%an%n%B'",
        "git config --get credential.helper || echo no-helper",
    ];
    for runtime in RUNTIMES {
        let fake = FakeModel::start();
        let user = User::new(&fake);
        let work = work_dir();
        skillforge_tests::git(work.path(), &["init", "-q", "-b", "main"]);
        fake.respond(|seen: &Seen| match STEPS.get(seen.n_tool_results) {
            _ if !seen.is_agent_turn() => Reply::Text("a title".into()),
            Some(step) => Reply::Shell((*step).into()),
            None => Reply::Text("Committed.".into()),
        });
        let (outcome, _) = run_payload(
            runtime,
            &user,
            work.path(),
            "Commit the plan.\n",
            Access::EditWorkdir,
            None,
            &[],
            |p| p.template_version = Some("planner@v3".into()),
        )
        .await;
        assert!(outcome.exit.is_passed(), "{runtime}: {outcome:?}");
        // Only the identity of the user's git config reached the run, not its credential helper.
        for seen in fake.requests() {
            assert!(
                !seen.messages.contains("USER-CREDENTIALS"),
                "{runtime}: the user's credential helper reached the run:\n{}",
                seen.messages
            );
        }
        assert!(
            fake.requests()
                .iter()
                .any(|r| r.messages.contains("no-helper")),
            "{runtime}: the helper check never ran"
        );
        let message = skillforge_tests::git(work.path(), &["log", "-1", "--format=%an%n%B"]);
        assert!(
            message.starts_with("Agent User\nPlan the change")
                && message.contains("Skillforge-Template: planner@v3"),
            "{runtime}: the commit in the checkout: {message:?}\n{}",
            fake.requests()
                .last()
                .map(|r| r.messages.clone())
                .unwrap_or_default()
        );
    }
}

// Claude Code and OpenCode unpack a native library (`.<hash>.so`, ~5 MB) into their temp dir on
// every start; in the worker's own temp dir that was one file left behind per run. Each run's
// temp dir is its private home's, removed with the attempt's scratch.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_leaves_nothing_in_the_workers_temp_dir() {
    for runtime in RUNTIMES {
        let fake = FakeModel::start();
        fake.respond(|_: &Seen| Reply::Text("done".into()));
        let user = User::new(&fake);
        let work = work_dir();
        let worker_tmp = tempfile::tempdir().unwrap();
        let tmp = worker_tmp.path().display().to_string();
        let (outcome, _) = run_payload(
            runtime,
            &user,
            work.path(),
            "Say done.\n",
            Access::EditWorkdir,
            None,
            &[("TMPDIR", &tmp)],
            |_| {},
        )
        .await;
        assert!(outcome.exit.is_passed(), "{runtime}: {outcome:?}");
        let left: Vec<String> = std::fs::read_dir(worker_tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            left.is_empty(),
            "{runtime} left {left:?} in the worker's TMPDIR"
        );
    }
}

/// The skills `seen` offered, read from the body the fake logged.
fn offered_in(seen: &Seen) -> Option<Vec<String>> {
    use skillforge_runner_agent::offered::{ModelApi, Offered, offered_in_request};
    let api = match seen.api {
        Api::Messages => ModelApi::Messages,
        Api::Responses => ModelApi::Responses,
        Api::Chat => ModelApi::Chat,
    };
    match offered_in_request(api, &seen.body)? {
        Offered::Listed(names) => Some(names),
        Offered::Unreadable => panic!("the fake's request lists no readable skills"),
    }
}

// Issue 31 item 9 (seed: skill-eval-loop, "Read what the agent was offered"): each real CLI runs
// through the run's recording proxy: the skills the report says were offered are the ones the
// request the fake logged lists (every name shown to the model), read from the request
// (`skills_offered_from: request`); the with-arm's request offers the project skill, the
// without-arm's does not, though the user has a skill of the same name at user level; Codex's
// inventory is known, no longer "unknown".
#[tokio::test(flavor = "multi_thread")]
async fn each_real_cli_reports_the_skills_its_model_requests_offered() {
    use skillforge_runner_agent::OfferedFrom;
    for runtime in RUNTIMES {
        for with_skill in [true, false] {
            let fake = FakeModel::start();
            let user = User::new(&fake);
            let work = work_dir();
            if with_skill {
                install_skill(work.path(), runtime, "PROJECT-SKILL-5c1d");
            }
            fake.respond(|_: &Seen| Reply::Text("ok".into()));
            let (outcome, report) = run(
                runtime,
                &user,
                work.path(),
                "Say ok.\n",
                Access::EditWorkdir,
            )
            .await;
            assert!(
                outcome.exit.is_passed() && report.answer() == Some("ok"),
                "{runtime}: {:?} {}",
                outcome.exit,
                outcome.stderr_tail
            );
            let turns = agent_turns(&fake);
            assert!(!turns.is_empty(), "{runtime}: no model request");
            let mut logged: Vec<String> = Vec::new();
            for turn in &turns {
                for name in offered_in(turn).unwrap_or_default() {
                    assert!(turn.shows(&name), "{runtime}: {name}");
                    if !logged.contains(&name) {
                        logged.push(name);
                    }
                }
            }
            assert_eq!(
                report.skills_offered.as_ref(),
                Some(&logged),
                "{runtime}: the report's offered skills are the request's: {report:?}"
            );
            assert_eq!(
                report.skills_offered_from,
                Some(OfferedFrom::Request),
                "{runtime}"
            );
            assert_eq!(
                report.proxied_requests,
                Some(turns.len() as u64),
                "{runtime}: every agent turn went through the proxy"
            );
            let offers_tldr = logged.iter().any(|n| n == "tldr");
            assert_eq!(
                offers_tldr, with_skill,
                "{runtime} (with-arm: {with_skill}): {logged:?}"
            );
            for turn in &turns {
                assert!(
                    !turn.shows(USER_MARKER),
                    "{runtime}: a user-level skill reached the model"
                );
            }
            if runtime == "claude" {
                // Claude Code's init line lists skills its requests do not (and the other way
                // round): both lists are in the report.
                let transcript = report
                    .skills_offered_transcript
                    .clone()
                    .expect("the init line's list differs from the request's");
                assert!(
                    transcript.iter().any(|n| !logged.contains(n))
                        || logged.iter().any(|n| !transcript.contains(n)),
                    "{transcript:?} {logged:?}"
                );
            }
        }
    }
}
