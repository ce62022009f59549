//! Every agent path outside the eval loop and optimize, run with the real Claude Code, Codex and
//! OpenCode against the model API the test serves on loopback (issue 31 "What to build" item 2,
//! issue 38): train option generation (`train start` / `continue`, and `train status` showing
//! the tokens and cost the runs reported), `ask`, `ab --judge`, `review evaluate`'s judge,
//! `binary run --reviewer`, a jury of the three as jurors, a live A/B and harvest's review leg. Each asserts on what the model was sent: the command's prompt reached
//! it, and nothing of the user's own skills or instructions (`USER_MARKER`) did. The tests
//! setting these paths up with the scripted runtime are `train.rs`, `decide.rs`,
//! `decide_ask.rs` and `evaluator.rs`.

use std::process::Command;

use serde_json::Value;
use skillforge_tests::agent_user::{AgentUser, REAL_RUNTIMES, USER_MARKER, on_path};
use skillforge_tests::fake_model::{FakeModel, Reply, Seen, Tokens};
use skillforge_tests::train::start_args;
use skillforge_tests::{Home, PLANNER_TEMPLATE, add_template, path_arg, write};

/// The `planner` template declaring a runtime that is none of the three (`shell`), so each real
/// runtime may judge or review it (a judge of the template's own family is refused, S-76).
fn shell_planner() -> String {
    PLANNER_TEMPLATE.replace(
        "runtime_compatibility: [codex, claude]",
        "runtime_compatibility: [shell]",
    )
}

/// The fake's answers, by what each command asks: options JSON for option generation, a pick
/// for `ab`'s judge, a verdict for the evaluator's judge, a yes for a binary question, else a
/// plain answer naming what it answered.
fn answer(seen: &Seen) -> Reply {
    if !seen.is_agent_turn() && !seen.first_user.contains("task: ") {
        return Reply::Text("a title".into());
    }
    let prompt = &seen.first_user;
    if prompt.contains("task: generate_options") {
        let n: usize = prompt
            .lines()
            .find_map(|l| l.strip_prefix("options: "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(3);
        let options: Vec<Value> = (0..n).map(|i| serde_json::json!({"label": ((b'a' + i as u8) as char).to_string(), "content": format!("Option {i}: describe the change in {} lines.", i + 2)})).collect();
        return Reply::Text(serde_json::json!({ "options": options }).to_string());
    }
    if prompt.contains("You compare two answers") {
        return Reply::Text("{\"pick\": \"a\", \"reasoning\": \"A names the steps.\"}".into());
    }
    if prompt.contains("You are the last stage of the evaluator") {
        return Reply::Text(
            "{\"verdict\": \"a\", \"reasoning\": \"The notes meet the bar.\"}".into(),
        );
    }
    if prompt.contains("Answer one yes/no question") {
        return Reply::Text(
            "{\"verdict\": \"yes\", \"explanation\": \"It has numbered steps.\"}".into(),
        );
    }
    // The challenger's body (`import_challenger`) asks for numbered steps: its answer differs
    // from the champion's, as two versions' answers do (`ab` records nothing between identical
    // answers).
    if prompt.contains("Plan in numbered steps") {
        return Reply::Text("1. Read the change.\n2. Number each step of the plan.".into());
    }
    Reply::Text("1. Read the change.\n2. Write the plan.".into())
}

/// A fake answering with [`answer`], and a user pointed at it.
fn fake_and_user() -> (FakeModel, AgentUser) {
    let fake = FakeModel::start();
    fake.report_tokens(Tokens {
        input: 1500,
        output: 60,
    });
    fake.respond(answer);
    let user = AgentUser::new(&fake);
    (fake, user)
}

/// `skillforge ARGS` in `home` as the worker's user `user`.
fn cmd(home: &Home, user: &AgentUser, args: &[&str]) -> Command {
    let mut c = home.cmd();
    user.apply(&mut c);
    c.args(args);
    c
}

/// Runs `skillforge --json ARGS` as `user`, asserts exit 0, parses stdout.
fn json(home: &Home, user: &AgentUser, runtime: &str, args: &[&str]) -> Value {
    let out = cmd(home, user, &[&["--json"], args].concat())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{runtime}: skillforge {args:?} failed: {}\n{stderr}",
        out.status
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{runtime}: {args:?}: stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The agent turns the fake saw since the last clear; asserts there were some, that `wanted`
/// reached one of them, and that no request showed the user's own skills or instructions.
fn assert_sent(fake: &FakeModel, runtime: &str, what: &str, wanted: &str) -> Vec<Seen> {
    let turns: Vec<Seen> = fake
        .requests()
        .into_iter()
        .filter(Seen::is_agent_turn)
        .collect();
    assert!(!turns.is_empty(), "{runtime}: {what}: no model request");
    assert!(
        turns.iter().any(|t| t.first_user.contains(wanted)),
        "{runtime}: {what}: `{wanted}` did not reach the model:\n{}",
        turns[0].first_user
    );
    for seen in fake.requests() {
        assert!(
            !seen.shows(USER_MARKER),
            "{runtime}: {what}: a user-level skill or instruction reached the model:\n{}",
            seen.everything()
        );
    }
    turns
}

const ITEMS: &str = "items:\n  - id: fix-login\n    title: Describe the login fix LOGIN-ITEM-31\n    input: |\n      -    check(password)\n      +    check_hashed(password)\n  - id: add-cache\n    title: Describe the cache CACHE-ITEM-31\n    input: adds an LRU cache in front of the user lookup\n";

// Train option generation with each real CLI: `train start` then `train continue` generate the
// options from the model's answers, and `train status` shows the tokens and cost the runs
// reported (Codex's cost "unknown", never $0).
#[test]
fn train_option_generation_runs_on_each_real_cli_and_status_shows_its_spend() {
    for runtime in REAL_RUNTIMES {
        assert!(
            on_path(runtime),
            "`{runtime}` is not on PATH: scripts/test installs it"
        );
        let (fake, user) = fake_and_user();
        let home = Home::embedded();
        add_template(&home, PLANNER_TEMPLATE, "owner/repo");
        let items = write(&home.path().join("in/items.yml"), ITEMS);
        json(
            &home,
            &user,
            runtime,
            &start_args(
                &items,
                &["--workspace-repo", "owner/workspace", "--runtime", runtime],
            ),
        );
        let out = cmd(&home, &user, &["train", "continue", "--session", "s1"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        // Exit 4: the review packet is published and waits for a person.
        assert_eq!(
            out.status.code(),
            Some(4),
            "{runtime}: train continue: {}\n{stderr}",
            out.status
        );
        let turns = assert_sent(&fake, runtime, "option generation", "LOGIN-ITEM-31");
        assert!(
            turns.iter().any(|t| t.first_user.contains("CACHE-ITEM-31")),
            "{runtime}: both items reached the model"
        );
        assert!(
            turns[0].first_user.contains("clearer commit messages"),
            "{runtime}: the request reached the model"
        );
        let status = json(
            &home,
            &user,
            runtime,
            &["train", "status", "--session", "s1"],
        );
        assert_eq!(
            status["progress"]["generated_options"], 6,
            "{runtime}: {status:#}"
        );
        let spend = &status["option_generation_spend"];
        assert_eq!(spend["runs"], 2, "{runtime}: {spend:#}");
        assert_eq!(spend["runs_without_tokens"], 0, "{runtime}: {spend:#}");
        assert!(
            spend["usage"]["input_tokens"]
                .as_u64()
                .is_some_and(|t| t >= 2 * 1500),
            "{runtime}: {spend:#}"
        );
        let human = String::from_utf8_lossy(
            &cmd(&home, &user, &["train", "status", "--session", "s1"])
                .output()
                .unwrap()
                .stdout,
        )
        .to_string();
        let line = human
            .lines()
            .find(|l| l.starts_with("option generation:"))
            .unwrap_or_else(|| panic!("{runtime}: no spend line:\n{human}"));
        match runtime {
            "codex" => {
                assert_eq!(spend["runs_without_cost"], 2, "{spend:#}");
                assert!(
                    line.contains("cost unknown") && !line.contains('$'),
                    "{line}"
                );
            }
            _ => {
                let cost = spend["usage"]["cost_usd"]
                    .as_f64()
                    .unwrap_or_else(|| panic!("{runtime}: {spend:#}"));
                assert!(
                    cost > 0.0 && line.contains(&format!("${cost:.4}")),
                    "{runtime}: {line}"
                );
            }
        }
    }
}

// `ask` with each real CLI: the prompt reaches the model and its answer is the ask's answer.
#[test]
fn ask_runs_on_each_real_cli() {
    for runtime in REAL_RUNTIMES {
        let (fake, user) = fake_and_user();
        let home = Home::embedded();
        add_template(&home, PLANNER_TEMPLATE, "owner/repo");
        let asked = json(
            &home,
            &user,
            runtime,
            &[
                "ask",
                "planner",
                "What changed in ASK-PROMPT-31?",
                "--runtime",
                runtime,
            ],
        );
        assert_eq!(
            asked["answer"].as_str().map(str::trim),
            Some("1. Read the change.\n2. Write the plan."),
            "{runtime}: {asked:#}"
        );
        let turns = assert_sent(&fake, runtime, "ask", "ASK-PROMPT-31");
        assert!(
            turns[0].everything().contains("Do it."),
            "{runtime}: the template reached the model"
        );
    }
}

/// Imports a challenger of the `shell` planner (body `body`).
fn import_challenger(home: &Home, body: &str) {
    let package = serde_json::json!({
        "kind": "gitmoot-skillopt-candidate-package",
        "contract_version": 1,
        "template_id": "planner",
        "candidate": {"content": shell_planner().replace("# Plan\nDo it.\n", body), "metadata": {
            "id": "planner", "name": "Planner", "description": "Plans work", "kind": "agent-template", "version": 1,
            "capabilities": ["ask"], "runtime_compatibility": ["shell"], "tags": ["planning"],
            "inputs": ["task"], "outputs": ["plan"]}},
        "summary": {"score": 0.8},
    });
    let file = write(&home.path().join("in/candidate.json"), &package.to_string());
    let out = home.run(&["import", "--file", path_arg(&file)]);
    assert!(
        out.status.success(),
        "import: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// `ab --judge` with each real CLI answering and the next one judging (a judge of another family
// than the answering runtime): both answers and the judge's request reach the model, and the
// judge's pick is recorded.
#[test]
fn ab_judge_runs_on_each_real_cli() {
    for (i, runtime) in REAL_RUNTIMES.iter().enumerate() {
        let judge = REAL_RUNTIMES[(i + 1) % REAL_RUNTIMES.len()];
        let (fake, user) = fake_and_user();
        let home = Home::embedded();
        add_template(&home, &shell_planner(), "owner/repo");
        import_challenger(&home, "Plan in numbered steps.\n");
        write(
            &home.path().join("config.toml"),
            &format!("[skillopt]\nreview_runtimes = [\"{judge}\"]\n"),
        );
        let out = json(
            &home,
            &user,
            runtime,
            &[
                "ab",
                "planner",
                "Plan the AB-PROMPT-31 release",
                "--judge",
                "--pick",
                "a",
                "--seed",
                "3",
                "--runtime",
                runtime,
            ],
        );
        assert!(
            out["judge_winner"].is_string(),
            "{runtime} answering, {judge} judging: {out:#}"
        );
        let turns = assert_sent(&fake, runtime, "ab", "AB-PROMPT-31");
        let judged: Vec<&Seen> = turns
            .iter()
            .filter(|t| t.first_user.contains("You compare two answers"))
            .collect();
        assert_eq!(judged.len(), 1, "{runtime}/{judge}: one judge request");
        assert!(
            judged[0].first_user.contains("AB-PROMPT-31")
                && judged[0].first_user.contains("1. Read the change."),
            "{judge}: the judge saw the request and the answers"
        );
        assert!(
            turns
                .iter()
                .filter(|t| !t.first_user.contains("You compare two answers"))
                .count()
                >= 2,
            "{runtime}: both versions answered"
        );
    }
}

// `review evaluate --judge-runtime R` with each real CLI: the judge sees the candidate's content
// (a baseline/candidate item judges the candidate only) and its verdict is the judge stage's
// result.
#[test]
fn review_evaluate_judge_runs_on_each_real_cli() {
    for runtime in REAL_RUNTIMES {
        let (fake, user) = fake_and_user();
        let home = Home::embedded();
        add_template(&home, &shell_planner(), "owner/repo");
        let input = home.path().join("in");
        write(&input.join("a.md"), "# Plan\n1. Ship BASELINE-31.\n");
        write(
            &input.join("b.md"),
            "# Plan\n1. Test CANDIDATE-31.\n2. Ship it.\n",
        );
        json(
            &home,
            &user,
            runtime,
            &[
                "review",
                "create",
                "--template",
                "planner",
                "--repo",
                "owner/repo",
                "--run",
                "trial-1",
            ],
        );
        json(
            &home,
            &user,
            runtime,
            &[
                "review",
                "item",
                "add",
                "--run",
                "trial-1",
                "--item",
                "i1",
                "--baseline",
                path_arg(&input.join("a.md")),
                "--candidate",
                path_arg(&input.join("b.md")),
            ],
        );
        let report = json(
            &home,
            &user,
            runtime,
            &[
                "review",
                "evaluate",
                "--run",
                "trial-1",
                "--evaluator",
                "generic",
                "--judge-runtime",
                runtime,
            ],
        );
        let turns = assert_sent(&fake, runtime, "review evaluate", "CANDIDATE-31");
        assert!(
            !turns.iter().any(|t| t.first_user.contains("BASELINE-31")),
            "{runtime}: only the candidate is judged"
        );
        let evaluation = &report["evaluations"][0];
        assert_eq!(
            (
                evaluation["option"].as_str(),
                evaluation["stages"]["judge"].as_str()
            ),
            (Some("candidate"), Some("passed")),
            "{runtime}: {report:#}"
        );
        assert_eq!(
            evaluation["soft"].as_f64(),
            Some(1.0),
            "{runtime}: the judge's `a` (meets the bar) is the soft score: {report:#}"
        );
    }
}

const SET: &str = "version: 1\ntemplate_or_task_kind: planning\ndimensions:\n  - name: correctness\n    questions:\n      - id: has_steps\n        text: Does the plan have numbered steps QUESTION-31?\n";

// `binary run --reviewer R` with each real CLI: the question and the output reach the model and
// the reviewer's yes is the stored verdict.
#[test]
fn binary_run_reviewer_runs_on_each_real_cli() {
    for runtime in REAL_RUNTIMES {
        let (fake, user) = fake_and_user();
        let home = Home::embedded();
        add_template(&home, &shell_planner(), "owner/repo");
        json(
            &home,
            &user,
            runtime,
            &[
                "review",
                "create",
                "--template",
                "planner",
                "--repo",
                "acme/app",
                "--run",
                "r1",
            ],
        );
        let set = write(&home.path().join("in/set.yml"), SET);
        let src = write(&home.path().join("in/src.txt"), "1. test it OUTPUT-31\n");
        let run = json(
            &home,
            &user,
            runtime,
            &[
                "binary",
                "run",
                "--set",
                path_arg(&set),
                "--run",
                "r1",
                "--source",
                path_arg(&src),
                "--reviewer",
                runtime,
            ],
        );
        let turns = assert_sent(&fake, runtime, "binary run", "QUESTION-31");
        assert!(
            turns[0].first_user.contains("OUTPUT-31"),
            "{runtime}: the output reached the reviewer"
        );
        let verdicts = run["verdicts"]
            .as_array()
            .unwrap_or_else(|| panic!("{runtime}: {run:#}"));
        assert_eq!(verdicts.len(), 1, "{runtime}: {run:#}");
        assert!(
            verdicts[0].to_string().contains("It has numbered steps."),
            "{runtime}: {run:#}"
        );
    }
}

// The jury (S-81) with the three real CLIs as its three jurors of three families: each juror's
// request carries both answers, and the jury's majority is the judge's pick.
#[test]
fn a_jury_of_the_three_real_clis_takes_the_majority() {
    let (fake, user) = fake_and_user();
    let home = Home::embedded();
    add_template(&home, &shell_planner(), "owner/repo");
    import_challenger(&home, "Plan in numbered steps.\n");
    write(
        &home.path().join("config.toml"),
        "[skillopt]\nreview_runtimes = [\"claude\", \"codex\", \"opencode\"]\nmode_b_jury_size = 3\n",
    );
    let out = json(
        &home,
        &user,
        "jury",
        &[
            "ab",
            "planner",
            "Plan the JURY-PROMPT-31 release",
            "--judge-only",
            "--seed",
            "7",
        ],
    );
    let shown_as_a = if out["challenger_label"] == "a" {
        "challenger"
    } else {
        "champion"
    };
    assert_eq!(
        out["judge_winner"], shown_as_a,
        "every juror picked a: {out:#}"
    );
    let judged: Vec<Seen> = fake
        .requests()
        .into_iter()
        .filter(|s| s.is_agent_turn() && s.first_user.contains("You compare two answers"))
        .collect();
    let apis: std::collections::BTreeSet<String> =
        judged.iter().map(|s| format!("{:?}", s.api)).collect();
    assert_eq!(apis.len(), 3, "one juror on each real CLI: {apis:?}");
    for seen in &judged {
        assert!(
            seen.first_user.contains("JURY-PROMPT-31") && seen.first_user.contains("Option B"),
            "{:?}: the juror saw the request and both answers",
            seen.api
        );
    }
    for seen in fake.requests() {
        assert!(
            !seen.shows(USER_MARKER),
            "a user-level skill or instruction reached the model:\n{}",
            seen.everything()
        );
    }
}

// A live A/B (an `ask` intercepted at `live_ab_sample_rate = 1.0`) with each real CLI answering:
// the champion's answer is returned, the challenger answered the same prompt, the pick recorded.
#[test]
fn a_live_ab_runs_on_each_real_cli() {
    for runtime in REAL_RUNTIMES {
        let (fake, user) = fake_and_user();
        let home = Home::embedded();
        add_template(&home, &shell_planner(), "owner/repo");
        import_challenger(&home, "Plan in numbered steps LIVE-CHALLENGER-31.\n");
        write(
            &home.path().join("config.toml"),
            "[skillopt]\nlive_ab_sample_rate = 1.0\nbandit_min_samples = 2\nreview_runtimes = []\n",
        );
        for seed in ["1", "2"] {
            json(
                &home,
                &user,
                runtime,
                &[
                    "ab",
                    "planner",
                    &format!("Warm-up {seed}"),
                    "--pick",
                    "a",
                    "--seed",
                    seed,
                    "--runtime",
                    runtime,
                ],
            );
        }
        fake.clear();
        let live = json(
            &home,
            &user,
            runtime,
            &[
                "ask",
                "planner",
                "What changed in LIVE-PROMPT-31?",
                "--pick",
                "b",
                "--runtime",
                runtime,
            ],
        );
        assert_eq!(live["live_ab"]["intercepted"], true, "{runtime}: {live:#}");
        assert_eq!(
            live["version"], "planner@v1",
            "{runtime}: the champion's answer is returned: {live:#}"
        );
        let turns = assert_sent(&fake, runtime, "live A/B", "LIVE-PROMPT-31");
        assert!(
            turns
                .iter()
                .any(|t| t.everything().contains("LIVE-CHALLENGER-31")),
            "{runtime}: the challenger answered the same prompt"
        );
        assert!(
            turns
                .iter()
                .any(|t| !t.everything().contains("LIVE-CHALLENGER-31")),
            "{runtime}: the champion answered"
        );
    }
}

// Harvest's review leg (S-27..S-30) with each real CLI as the reviewer: the reviewer is asked
// about the merged PR's change and scope, and its rubric becomes the review row of the export.
#[test]
fn harvest_review_leg_runs_on_each_real_cli() {
    for runtime in REAL_RUNTIMES {
        let fake = FakeModel::start();
        fake.respond(|seen: &Seen| {
            if seen.first_user.contains("You are a read-only reviewer") {
                return Reply::Text("{\"coverage\": 0.9, \"containment\": 0.8, \"fidelity\": 0.7, \"notes\": \"covers the ask REVIEW-NOTES-31\"}".into());
            }
            Reply::Text("a title".into())
        });
        let user = AgentUser::new(&fake);
        let (repo, base, head) = skillforge_tests::two_commit_repo();
        let home = Home::embedded();
        add_template(&home, skillforge_tests::CODER_TEMPLATE, "acme/templates");
        // auto-trace on first: `attribute` writes nothing while it is off
        write(
            &home.path().join("config.toml"),
            &format!(
                "[skillopt]\nauto_trace_enabled = true\ncross_family_review_enabled = true\nreview_runtimes = [\"{runtime}\"]\n"
            ),
        );
        json(
            &home,
            &user,
            runtime,
            &[
                "harvest",
                "attribute",
                "--repo",
                "acme/app",
                "--pr",
                "3",
                "--template",
                "coder@v1",
                "--resolved-commit",
                "c0ffee",
                "--checkout",
                path_arg(repo.path()),
                "--base",
                &base,
                "--runtime",
                "scripted",
                "--instructions",
                "add HARVEST-SCOPE-31",
            ],
        );
        json(
            &home,
            &user,
            runtime,
            &[
                "harvest",
                "outcome",
                "--repo",
                "acme/app",
                "--pr",
                "3",
                "--outcome",
                "merged",
                "--ci",
                "external",
                "--head",
                &head,
                "--wait",
            ],
        );
        let turns = assert_sent(&fake, runtime, "harvest review leg", "HARVEST-SCOPE-31");
        assert!(
            turns[0].first_user.contains("acme/app#3") && turns[0].first_user.contains(&head),
            "{runtime}: the PR reached the reviewer"
        );
        let out = home.path().join("out/export.json");
        json(
            &home,
            &user,
            runtime,
            &[
                "export",
                "--run",
                "auto-trace:coder@v1",
                "--output",
                path_arg(&out),
            ],
        );
        let package: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        let review: Vec<&Value> = package["feedback_events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["item_id"] == "review#acme/app#3")
            .collect();
        assert_eq!(
            (
                review.len(),
                review.first().and_then(|r| r["choice"].as_str())
            ),
            (1, Some("a")),
            "{runtime}: mean 0.8 ⇒ a: {package:#}"
        );
        let meta = &package["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["id"] == "review#acme/app#3")
            .unwrap()["metadata"];
        assert_eq!(meta["reviewer_runtime"], runtime, "{runtime}: {meta:#}");
    }
}

// Issue 37 item 8 through a real agent's commit: with harvesting on, the commit an `ask`'s agent
// makes (the CLI's own shell tool running `git commit`) carries `Skillforge-Template:
// planner@v1`, added by the hooks set through git's environment; the model is shown it in the
// tool's output (`git log`).
#[test]
fn an_asks_agent_commit_carries_the_template_trailer_on_claude_and_opencode() {
    // One command a tool call: Claude Code asks before a compound command that makes git's
    // files and runs git. The identity is the user's own (`user.name`/`user.email` of their git
    // config).
    const STEPS: [&str; 3] = [
        "git init -q .",
        "git commit --allow-empty -q -m 'Plan the change'",
        "git log -1 --format='%an%n%B'",
    ];
    // Codex keeps a `.git` made during the run read-only (a repository's `.git` is writable only
    // when it exists as the run starts): its commit in a checkout is tested in real_agents.rs.
    for runtime in ["claude", "opencode"] {
        let fake = FakeModel::start();
        fake.respond(|seen: &Seen| match STEPS.get(seen.n_tool_results) {
            _ if !seen.is_agent_turn() => Reply::Text("a title".into()),
            Some(step) => Reply::Shell((*step).into()),
            None => Reply::Text("Committed the plan.".into()),
        });
        let user = AgentUser::new(&fake);
        let home = Home::embedded();
        add_template(&home, PLANNER_TEMPLATE, "owner/repo");
        write(
            &home.path().join("config.toml"),
            "[skillopt]\nauto_trace_enabled = true\n",
        );
        let asked = json(
            &home,
            &user,
            runtime,
            &[
                "ask",
                "planner",
                "Commit the plan TRAILER-31",
                "--runtime",
                runtime,
            ],
        );
        assert_eq!(asked["version"], "planner@v1", "{runtime}: {asked:#}");
        let turns = assert_sent(&fake, runtime, "ask", "TRAILER-31");
        let after = turns
            .iter()
            .find(|t| t.n_tool_results == STEPS.len())
            .unwrap_or_else(|| panic!("{runtime}: `git log`'s output never reached the model"));
        assert!(
            after.messages.contains("Agent User\nPlan the change")
                && after.messages.contains("Skillforge-Template: planner@v1"),
            "{runtime}: the commit message the model was shown:\n{}",
            after.messages
        );
    }
}
