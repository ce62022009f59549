//! The optimize loop with the real Claude Code, Codex and OpenCode as its experiment worker,
//! against the model API the test serves on loopback (issue 31 items 3 and 7, issue 38 item 8):
//! the worker edits the mutable file in its worktree, the edit is measured and kept, and
//! `optimize status`/`report` show the tokens and cost the fake reported (Codex's cost
//! "unknown"). A refused write is named in the revert reason, and a cost cap that cannot be
//! enforced (a runtime that reports no cost) stops the run with a message saying so.

use std::path::Path;

use serde_json::Value;
use skillforge_tests::agent_user::{AgentUser, REAL_RUNTIMES, USER_MARKER, on_path};
use skillforge_tests::fake_model::{FakeModel, Reply, Seen, Tokens};
use skillforge_tests::{Home, git};
use tempfile::TempDir;

const COUNT_SH: &str = "\
#!/bin/sh
# count FILE: prints the sum of the numbers in FILE and the operations it took.
OPS=0
total=0
for v in $(cat \"$1\"); do
  i=0
  while [ $i -lt $v ]; do total=$((total+1)); i=$((i+1)); OPS=$((OPS+1)); done
done
echo \"result=$total ops=$OPS\"
";

/// The worker's edit: add each value directly (4 operations on the input instead of 26).
const COUNT_SH_DIRECT: &str = "\
#!/bin/sh
# count FILE: prints the sum of the numbers in FILE and the operations it took.
OPS=0
total=0
for v in $(cat \"$1\"); do
  total=$((total+v)); OPS=$((OPS+1))
done
echo \"result=$total ops=$OPS\"
";

const MEASURE_SH: &str = "\
#!/bin/sh
out=$(sh src/count.sh data/input.txt) || exit 1
result=$(echo \"$out\" | sed -n 's/.*result=\\([0-9]*\\).*/\\1/p')
ops=$(echo \"$out\" | sed -n 's/.*ops=\\([0-9]*\\).*/\\1/p')
correct=0
[ \"$result\" = 26 ] && correct=1
echo \"{\\\"metrics\\\": {\\\"ops\\\": $ops, \\\"correct\\\": $correct}}\"
";

/// The project: `src/` mutable, the harness and its data immutable; baseline 26 operations.
fn project() -> TempDir {
    let dir = tempfile::tempdir().expect("repo dir");
    let p = dir.path();
    git(p, &["init", "-q", "-b", "main"]);
    for (path, text) in [
        ("src/count.sh", COUNT_SH),
        ("measure.sh", MEASURE_SH),
        ("data/input.txt", "3\n5\n7\n11\n"),
    ] {
        std::fs::create_dir_all(p.join(path).parent().unwrap()).unwrap();
        std::fs::write(p.join(path), text).unwrap();
    }
    git(p, &["add", "-A"]);
    git(p, &["commit", "-q", "-m", "counter"]);
    dir
}

fn hypothesis(id: &str, description: &str, category: &str, priority: &str, benefit: f64) -> String {
    format!(
        "  - id: {id}\n    description: \"{description}\"\n    category: {category}\n    priority: {priority}\n    opportunity:\n      workload: data/input.txt\n      baseline: CP-1 baseline\n      evidence: reading src/\n      expected_benefit: \"{benefit} relative\"\n      confidence: medium\n      cost_and_risk: small edit\n      estimate: {{ benefit: {benefit}, confidence: 1.0 }}\n"
    )
}

/// A spec running one experiment on `runtime`; `extra_stopping` is added to `stopping`.
fn spec(dir: &Path, runtime: &str, extra_stopping: &str) -> String {
    let text = format!(
        "name: ops\n\
description: reduce the operation count of the counting script without changing its result\n\
metric:\n  primary: {{ name: ops, direction: minimize }}\n  degenerate_gates: [\"correct == 1\"]\n\
measurement:\n  command: sh measure.sh\n  timeout_seconds: 60\n  stability: {{ mode: ladder, repeat_count: 2 }}\n\
scope:\n  mutable: [src]\n  immutable: [measure.sh, data]\n\
execution: {{ mode: serial, runtime: {runtime}, worker_timeout_seconds: 240 }}\n\
stopping: {{ max_iterations: 1{extra_stopping} }}\n\
hypotheses:\n{}",
        hypothesis(
            "h-direct",
            "Add each value directly instead of counting up to it",
            "algorithm",
            "high",
            0.8
        )
    );
    let path = dir.join("ops.yaml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn optimize(home: &Home, user: &AgentUser, args: &[&str]) -> std::process::Output {
    let mut cmd = home.cmd();
    user.apply(&mut cmd);
    cmd.env_remove("CODEX_SANDBOX")
        .env_remove("CODEX_SESSION_ID");
    cmd.arg("optimize")
        .args(args)
        .output()
        .expect("run skillforge optimize")
}

fn ok(out: &std::process::Output, what: &str) -> Value {
    assert!(
        out.status.success(),
        "{what} failed: {}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// The worker answers with an edit of `src/count.sh` (its whole new text, by a shell command:
/// Claude Code's `Write` refuses to overwrite a file the session has not read), then a summary.
fn edit_then_summary(fake: &FakeModel) {
    fake.respond(|seen: &Seen| {
        if !seen.is_agent_turn() {
            return Reply::Text("title".into());
        }
        match seen.n_tool_results {
            0 => Reply::Shell(format!(
                "cat > src/count.sh <<'SKILLFORGE_EOF'\n{COUNT_SH_DIRECT}SKILLFORGE_EOF"
            )),
            _ => Reply::Text("Added each value directly.".into()),
        }
    });
}

// Issue 31 items 3 and 7, issue 38 item 8: each real CLI's experiment worker edits the mutable
// file, the edit is measured (26 -> 5) and kept, and status/report show the worker's tokens and
// cost as the fake reported them (Codex reports no cost: "unknown", never $0).
#[test]
fn each_real_cli_worker_edit_is_kept_and_its_tokens_and_cost_are_reported() {
    for runtime in REAL_RUNTIMES {
        assert!(
            on_path(runtime),
            "`{runtime}` is not on PATH: scripts/test installs it"
        );
        let fake = FakeModel::start();
        let user = AgentUser::new(&fake);
        fake.report_tokens(Tokens {
            input: 2000,
            output: 100,
        });
        edit_then_summary(&fake);
        let repo = project();
        let work = tempfile::tempdir().unwrap();
        let spec = spec(work.path(), runtime, "");
        let home = Home::embedded();
        let repo_arg = repo.path().display().to_string();
        ok(
            &optimize(
                &home,
                &user,
                &["--json", "init", "--spec", &spec, "--repo", &repo_arg],
            ),
            "init",
        );
        let run = optimize(&home, &user, &["--json", "run", "--spec", &spec]);
        let stderr = String::from_utf8_lossy(&run.stderr).to_string();
        ok(&run, &format!("{runtime}: run"));
        let status = ok(
            &optimize(&home, &user, &["--json", "status", "--spec", &spec]),
            "status",
        );
        let exp = &status["experiments"][0];
        let transcript =
            std::fs::read_to_string(home.path().join("optimize/ops/transcripts/exp-001.jsonl"))
                .unwrap_or_default();
        let report = ok(
            &optimize(&home, &user, &["--json", "report", "--spec", &spec]),
            "report",
        );
        assert_eq!(
            exp["outcome"],
            "kept",
            "{runtime}: {}\n{stderr}\ntranscript:\n{transcript}",
            report["text"].as_str().unwrap_or_default()
        );
        assert_eq!(
            (exp["reference"].as_f64(), exp["candidate"].as_f64()),
            (Some(26.0), Some(4.0)),
            "{runtime}: {exp:#}"
        );
        assert_eq!(
            git(repo.path(), &["show", "optimize/ops:src/count.sh"]).trim(),
            COUNT_SH_DIRECT.trim(),
            "{runtime}: the worker's edit is on the optimization branch"
        );

        // what the model was sent: the brief, and nothing of the user's own setup
        let turns: Vec<Seen> = fake
            .requests()
            .into_iter()
            .filter(Seen::is_agent_turn)
            .collect();
        assert!(!turns.is_empty(), "{runtime}: no model request");
        assert!(
            turns[0]
                .first_user
                .contains("Add each value directly instead of counting up to it"),
            "{runtime}: the brief reached the model:\n{}",
            turns[0].first_user
        );
        for turn in &turns {
            assert!(
                !turn.shows(USER_MARKER),
                "{runtime}: a user-level skill or instruction reached the worker:\n{}",
                turn.everything()
            );
        }

        // tokens and cost, per experiment and for the run
        let n_turns = turns.len() as u64;
        let worker = &exp["spend"];
        assert_eq!(worker["runs"], 1, "{runtime}: {exp:#}");
        assert!(
            worker["usage"]["input_tokens"]
                .as_u64()
                .is_some_and(|t| t >= 2000),
            "{runtime}: {worker:#}"
        );
        assert!(
            worker["usage"]["output_tokens"]
                .as_u64()
                .is_some_and(|t| t >= 100 && t <= 100 * n_turns + 100),
            "{runtime}: {worker:#}"
        );
        let run_spend = &status["spend"]["agents"];
        assert_eq!(
            run_spend["usage"]["input_tokens"], worker["usage"]["input_tokens"],
            "{runtime}: {status:#}"
        );
        let text = report["text"].as_str().unwrap();
        match runtime {
            "codex" => {
                assert!(
                    worker["usage"]["cost_usd"].is_null(),
                    "codex reports no cost: {worker:#}"
                );
                assert_eq!(worker["runs_without_cost"], 1);
                assert!(text.contains("cost unknown"), "{runtime}: {text}");
                assert!(
                    !text.contains("$0.00"),
                    "an unknown cost is never shown as $0: {text}"
                );
            }
            _ => {
                let cost = worker["usage"]["cost_usd"]
                    .as_f64()
                    .unwrap_or_else(|| panic!("{runtime}: no cost: {worker:#}"));
                assert!(cost > 0.0, "{runtime}: {cost}");
                assert!(
                    text.contains(&format!("${cost:.4}")),
                    "{runtime}: the report shows the reported cost ${cost:.4}:\n{text}"
                );
            }
        }
        assert!(text.contains(" tokens (in "), "{runtime}: {text}");
        // `optimize status` for people: the run's and the experiment's spend
        let human =
            String::from_utf8_lossy(&optimize(&home, &user, &["status", "--spec", &spec]).stdout)
                .to_string();
        let spend_line = human
            .lines()
            .find(|l| l.starts_with("spend: "))
            .unwrap_or_else(|| panic!("{runtime}: no spend line:\n{human}"));
        let exp_line = human
            .lines()
            .find(|l| l.contains("exp-001"))
            .unwrap_or_else(|| panic!("{runtime}:\n{human}"));
        assert!(exp_line.contains(" tokens (in "), "{runtime}: {exp_line}");
        match runtime {
            "codex" => assert!(
                spend_line.contains("unknown") && !spend_line.contains("$0.00"),
                "{spend_line}"
            ),
            _ => assert!(
                spend_line.contains(&format!(
                    "${:.4}",
                    worker["usage"]["cost_usd"].as_f64().unwrap()
                )),
                "{spend_line}"
            ),
        }

        // `jobs show` of the worker's agent job: its tokens and cost, --json and human
        let jobs = home.json(&["jobs", "list"]);
        let worker_job = jobs
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["kind"] == "agent" && j["stage"] == "experiment")
            .unwrap_or_else(|| panic!("{runtime}: no worker job: {jobs:#}"));
        let id = worker_job["id"].as_str().unwrap();
        let shown = home.job(id);
        assert_eq!(
            shown["spend"]["usage"], worker["usage"],
            "{runtime}: {shown:#}"
        );
        let human = String::from_utf8_lossy(&home.run(&["jobs", "show", id]).stdout).to_string();
        let line = human
            .lines()
            .find(|l| l.starts_with("spend"))
            .unwrap_or_else(|| panic!("{runtime}: no spend line:\n{human}"));
        match runtime {
            "codex" => assert!(
                line.contains("cost unknown") && line.contains(" tokens"),
                "{line}"
            ),
            _ => assert!(
                line.contains(&format!(
                    "${:.4}",
                    worker["usage"]["cost_usd"].as_f64().unwrap()
                )),
                "{line}"
            ),
        }
        let measure = jobs
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["kind"] == "process")
            .expect("a measurement job");
        assert!(
            home.job(measure["id"].as_str().unwrap())["spend"].is_null(),
            "a process job has no agent spend"
        );
    }
}

// Issue 38 item 8, issue 31 item 7: a cost cap that cannot be enforced (Codex reports no cost
// and no estimate is configured) stops the run before the next dispatch, saying why and what to
// do; a tokens cap holds with the tokens Codex does report.
#[test]
fn a_cost_cap_with_an_unknown_cost_stops_the_run_and_a_tokens_cap_holds() {
    let fake = FakeModel::start();
    let user = AgentUser::new(&fake);
    fake.report_tokens(Tokens {
        input: 2000,
        output: 100,
    });
    edit_then_summary(&fake);
    let repo = project();
    let work = tempfile::tempdir().unwrap();
    let spec_path = spec(work.path(), "codex", ", max_total_cost_usd: 5.0");
    std::fs::write(
        &spec_path,
        std::fs::read_to_string(&spec_path)
            .unwrap()
            .replace("max_iterations: 1", "max_iterations: 3")
            + &hypothesis("h-two", "Count in pairs", "tuning", "low", 0.1),
    )
    .unwrap();
    let home = Home::embedded();
    let repo_arg = repo.path().display().to_string();
    ok(
        &optimize(
            &home,
            &user,
            &["--json", "init", "--spec", &spec_path, "--repo", &repo_arg],
        ),
        "init",
    );
    let run = optimize(&home, &user, &["--json", "run", "--spec", &spec_path]);
    assert_eq!(
        run.status.code(),
        Some(3),
        "an unenforceable cap is an environment stop: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let run: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(run["stop_reason"]["reason"], "spend_unknown", "{run:#}");
    let status = ok(
        &optimize(&home, &user, &["--json", "status", "--spec", &spec_path]),
        "status",
    );
    assert_eq!(
        status["experiments"].as_array().unwrap().len(),
        1,
        "one experiment ran, then the cap stopped the run: {status:#}"
    );
    let report = ok(
        &optimize(&home, &user, &["--json", "report", "--spec", &spec_path]),
        "report",
    );
    let text = report["text"].as_str().unwrap();
    assert!(
        text.contains("stopping.max_total_cost_usd cannot be enforced"),
        "{text}"
    );
    assert!(text.contains("reported no cost"), "{text}");
    assert!(
        text.contains("stopping.max_total_tokens"),
        "the message says what to do: {text}"
    );

    // a tokens cap: the first experiment's tokens already pass 1000, so the run stops after it
    let repo = project();
    let work = tempfile::tempdir().unwrap();
    let spec_path = spec(work.path(), "codex", ", max_total_tokens: 1000");
    std::fs::write(
        &spec_path,
        std::fs::read_to_string(&spec_path)
            .unwrap()
            .replace("max_iterations: 1", "max_iterations: 3")
            + &hypothesis("h-two", "Count in pairs", "tuning", "low", 0.1),
    )
    .unwrap();
    let home = Home::embedded();
    let repo_arg = repo.path().display().to_string();
    ok(
        &optimize(
            &home,
            &user,
            &["--json", "init", "--spec", &spec_path, "--repo", &repo_arg],
        ),
        "init",
    );
    let run = ok(
        &optimize(&home, &user, &["--json", "run", "--spec", &spec_path]),
        "run",
    );
    assert_eq!(run["stop_reason"]["reason"], "spend_cap", "{run:#}");
    let report = ok(
        &optimize(&home, &user, &["--json", "report", "--spec", &spec_path]),
        "report",
    );
    assert!(
        report["text"]
            .as_str()
            .unwrap()
            .contains("stopping.max_total_tokens"),
        "{}",
        report["text"]
    );
}

// Issue 38 item 8: inside a Codex sandbox the run falls back from Codex and says so when it
// starts (stderr, not only in the report), and the fallback runtime is the one that ran.
#[test]
fn inside_a_codex_sandbox_the_fallback_is_announced_when_the_run_starts() {
    let fake = FakeModel::start();
    let user = AgentUser::new(&fake);
    edit_then_summary(&fake);
    let repo = project();
    let work = tempfile::tempdir().unwrap();
    let spec_path = spec(work.path(), "codex", "");
    std::fs::write(
        &spec_path,
        std::fs::read_to_string(&spec_path).unwrap().replace(
            "runtime: codex,",
            "runtime: codex, fallback_runtime: opencode,",
        ),
    )
    .unwrap();
    let home = Home::embedded();
    let repo_arg = repo.path().display().to_string();
    ok(
        &optimize(
            &home,
            &user,
            &["--json", "init", "--spec", &spec_path, "--repo", &repo_arg],
        ),
        "init",
    );
    let mut cmd = home.cmd();
    user.apply(&mut cmd);
    let out = cmd
        .env("CODEX_SANDBOX", "seccomp")
        .args(["optimize", "run", "--spec", &spec_path])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let first = stderr
        .lines()
        .position(|l| l.contains("inside a Codex sandbox") && l.contains("`opencode`"))
        .unwrap_or_else(|| panic!("the fallback is not announced:\n{stderr}"));
    let summary = stderr
        .lines()
        .position(|l| l.contains("experiment(s), kept"))
        .expect("summary line");
    assert!(first < summary, "announced when the run starts:\n{stderr}");
    let turns: Vec<Seen> = fake
        .requests()
        .into_iter()
        .filter(Seen::is_agent_turn)
        .collect();
    assert!(
        !turns.is_empty()
            && turns
                .iter()
                .all(|t| t.api == skillforge_tests::fake_model::Api::Chat),
        "the fallback (OpenCode) ran the worker"
    );
}

// Issue 31 item 1, issue 38 item 8: a write the runtime refused is named in the revert reason
// (each runtime refuses a write outside the experiment's work dir: Claude Code's permission mode,
// Codex's workspace-write sandbox, OpenCode's `external_directory`).
#[test]
fn a_refused_write_is_named_in_the_revert_reason() {
    for runtime in REAL_RUNTIMES {
        let fake = FakeModel::start();
        let user = AgentUser::new(&fake);
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("count.sh");
        let target_text = target.display().to_string();
        fake.respond(move |seen: &Seen| {
            if !seen.is_agent_turn() {
                return Reply::Text("title".into());
            }
            match seen.n_tool_results {
                0 => Reply::Write {
                    path: target_text.clone(),
                    content: "x".into(),
                },
                _ => Reply::Text("Edited count.sh.".into()),
            }
        });
        let repo = project();
        let work = tempfile::tempdir().unwrap();
        let spec = spec(work.path(), runtime, "");
        let home = Home::embedded();
        let repo_arg = repo.path().display().to_string();
        ok(
            &optimize(
                &home,
                &user,
                &["--json", "init", "--spec", &spec, "--repo", &repo_arg],
            ),
            "init",
        );
        ok(
            &optimize(&home, &user, &["--json", "run", "--spec", &spec]),
            "run",
        );
        let status = ok(
            &optimize(&home, &user, &["--json", "status", "--spec", &spec]),
            "status",
        );
        assert_eq!(
            status["experiments"][0]["outcome"], "reverted",
            "{runtime}: {status:#}"
        );
        assert!(
            !target.exists(),
            "{runtime}: the write outside the work dir happened"
        );
        let report = ok(
            &optimize(&home, &user, &["--json", "report", "--spec", &spec]),
            "report",
        );
        let text = report["text"].as_str().unwrap();
        let transcript =
            std::fs::read_to_string(home.path().join("optimize/ops/transcripts/exp-001.jsonl"))
                .unwrap_or_default();
        assert!(
            text.contains("the runtime refused") && text.contains("count.sh"),
            "{runtime}: {text}\ntranscript:\n{transcript}"
        );
        assert!(
            !text.contains("no change inside scope.mutable remained"),
            "{runtime}: {text}"
        );
    }
}

const CLUSTERS_MEASURE_SH: &str = "\
#!/bin/sh
# One cluster per line of src/clusters.txt (`<id> <topics...>`), as judge items.
n=0; items=''
while read -r id rest; do
  [ -z \"$id\" ] && continue
  n=$((n+1))
  [ -n \"$items\" ] && items=\"$items,\"
  items=\"$items{\\\"id\\\": \\\"$id\\\", \\\"content\\\": \\\"$rest\\\"}\"
done < src/clusters.txt
echo \"{\\\"metrics\\\": {\\\"clusters\\\": $n}, \\\"items\\\": [$items]}\"
";

/// The judge's reply to a batch prompt: every item of `<items>` scored 2 when it mixes login and
/// billing, else 5, with feedback.
fn judge_reply(prompt: &str) -> Option<Reply> {
    let items = prompt.split("<items>").nth(1)?.split("</items>").next()?;
    let items: Vec<serde_json::Value> = serde_json::from_str(items.trim()).ok()?;
    let scored: Vec<serde_json::Value> = items
        .iter()
        .map(|item| {
            let mixed = item["content"].as_str().unwrap_or_default().contains("login billing");
            serde_json::json!({"item_id": item["id"], "score": if mixed { 2 } else { 5 }, "reason": if mixed { "two topics" } else { "one topic" }, "feedback": if mixed { "Split login from billing." } else { "Holds one topic." }, "ambiguous": false})
        })
        .collect();
    Some(Reply::Text(serde_json::Value::Array(scored).to_string()))
}

// Issue 31 "What to build" item 2: the optimize loop's judges on each real CLI (a judge primary:
// every batch its own agent job): the judges see the items, their scores decide the keep, and
// the report shows the judges' reported tokens.
#[test]
fn each_real_cli_judges_an_optimize_run() {
    for runtime in REAL_RUNTIMES {
        let fake = FakeModel::start();
        let user = AgentUser::new(&fake);
        fake.respond(|seen: &Seen| {
            if !seen.is_agent_turn() && !seen.first_user.contains("<items>") {
                return Reply::Text("title".into());
            }
            if let Some(reply) = judge_reply(&seen.first_user) {
                return reply;
            }
            match seen.n_tool_results {
                0 => Reply::Shell(
                    "printf 'c-1 login\\nc-4 billing\\nc-2 search\\n' > src/clusters.txt".into(),
                ),
                _ => Reply::Text("Split login from billing.".into()),
            }
        });
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        git(p, &["init", "-q", "-b", "main"]);
        std::fs::create_dir_all(p.join("src")).unwrap();
        std::fs::write(
            p.join("src/clusters.txt"),
            "c-1 login billing\nc-2 search\n",
        )
        .unwrap();
        std::fs::write(p.join("measure.sh"), CLUSTERS_MEASURE_SH).unwrap();
        git(p, &["add", "-A"]);
        git(p, &["commit", "-q", "-m", "clusters"]);
        let work = tempfile::tempdir().unwrap();
        let spec_path = work.path().join("topics.yaml");
        std::fs::write(&spec_path, format!(
            "name: topics\ndescription: clusters that each hold one topic\n\
metric:\n  primary: {{ name: quality, direction: maximize, type: judge }}\n  degenerate_gates: [\"clusters >= 2\"]\n  \
judge: {{ rubric: \"Score 1-5: does the cluster hold one topic?\", batch_size: 2, sample_size: 10, sample_seed: 7, score_field: score }}\n\
measurement:\n  command: sh measure.sh\n  timeout_seconds: 60\n\
scope:\n  mutable: [src]\n  immutable: [measure.sh]\n\
execution: {{ mode: serial, runtime: {runtime}, worker_timeout_seconds: 240 }}\n\
stopping: {{ max_iterations: 1 }}\n\
hypotheses:\n{}", hypothesis("h-split", "Split the login and billing cluster", "algorithm", "high", 0.5))).unwrap();
        let spec = spec_path.display().to_string();
        let home = Home::embedded();
        ok(
            &optimize(
                &home,
                &user,
                &[
                    "--json",
                    "init",
                    "--spec",
                    &spec,
                    "--repo",
                    &p.display().to_string(),
                ],
            ),
            &format!("{runtime}: init"),
        );
        ok(
            &optimize(&home, &user, &["--json", "run", "--spec", &spec]),
            &format!("{runtime}: run"),
        );
        let status = ok(
            &optimize(&home, &user, &["--json", "status", "--spec", &spec]),
            "status",
        );
        let exp = &status["experiments"][0];
        assert_eq!(exp["outcome"], "kept", "{runtime}: {status:#}");
        let judged: Vec<Seen> = fake
            .requests()
            .into_iter()
            .filter(|s| s.first_user.contains("<rubric>"))
            .collect();
        assert!(
            judged
                .iter()
                .any(|s| s.first_user.contains("login billing")),
            "{runtime}: the judges saw the items"
        );
        for seen in fake.requests() {
            assert!(
                !seen.shows(USER_MARKER),
                "{runtime}: a user-level skill or instruction reached the model"
            );
        }
        // the baseline's judge batch at init and the candidate's (the reference's items are cached)
        assert_eq!(
            status["spend"]["judges"]["runs"], 2,
            "{runtime}: {:#}",
            status["spend"]
        );
        assert_eq!(
            exp["spend"]["runs"], 2,
            "{runtime}: the worker and the candidate's judge: {exp:#}"
        );
        assert_eq!(
            status["spend"]["judges"]["runs_without_tokens"], 0,
            "{runtime}: {:#}",
            status["spend"]
        );
    }
}

// O-20 with a real CLI: Claude Code, the experiment worker, meets HTTP 429 from the model API on
// its first nine runs (the job's three attempts, each the first run and the agent runner's two
// retries); the rate limit is backpressure: the experiment's job is queued again, its next run
// edits, and the experiment is kept, never recorded as an `error`.
#[test]
fn o20_a_real_cli_worker_rate_limited_is_queued_again_and_kept() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    assert!(
        on_path("claude"),
        "`claude` is not on PATH: scripts/test installs it"
    );
    let fake = FakeModel::start();
    let user = AgentUser::new(&fake);
    let limited = Arc::new(AtomicUsize::new(0));
    let seen = limited.clone();
    fake.respond(move |s: &Seen| {
        if !s.is_agent_turn() {
            return Reply::Text("title".into());
        }
        if s.n_tool_results == 0 && seen.fetch_add(1, Ordering::SeqCst) < 9 {
            return Reply::Error(
                429,
                "Number of request tokens has exceeded your per-minute rate limit".into(),
            );
        }
        match s.n_tool_results {
            0 => Reply::Shell(format!(
                "cat > src/count.sh <<'SKILLFORGE_EOF'\n{COUNT_SH_DIRECT}SKILLFORGE_EOF"
            )),
            _ => Reply::Text("Added each value directly.".into()),
        }
    });
    let repo = project();
    let work = tempfile::tempdir().unwrap();
    let spec = spec(work.path(), "claude", "");
    let home = Home::embedded();
    let repo_arg = repo.path().display().to_string();
    ok(
        &optimize(
            &home,
            &user,
            &["--json", "init", "--spec", &spec, "--repo", &repo_arg],
        ),
        "init",
    );
    let run = optimize(&home, &user, &["--json", "run", "--spec", &spec]);
    let stderr = String::from_utf8_lossy(&run.stderr).to_string();
    ok(&run, "run");
    let status = ok(
        &optimize(&home, &user, &["--json", "status", "--spec", &spec]),
        "status",
    );
    let report = ok(
        &optimize(&home, &user, &["--json", "report", "--spec", &spec]),
        "report",
    )["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        status["experiments"][0]["outcome"],
        "kept",
        "a rate limit is never an experiment error:\n{report}\n{stderr}\n{}",
        home.logs()
    );
    assert!(
        limited.load(Ordering::SeqCst) >= 10,
        "nine rate-limited runs, then the one that edits"
    );
    assert!(
        report.contains(
            "- exp-001: the worker's runtime answered at capacity (rate_limit); queued again in 2s (backpressure 1, not a failure)"
        ),
        "{report}"
    );
    assert_eq!(
        git(repo.path(), &["show", "optimize/ops:src/count.sh"]).trim(),
        COUNT_SH_DIRECT.trim(),
        "the edit of the run after the backpressure is kept"
    );
}

// A worker whose runtime turns out unable to run (Claude Code refused by its model API: HTTP 401,
// a key the API does not accept, after the readiness check passed) is an environment fault, not a
// verdict: `optimize run` stops with exit 3 saying why in words, records no experiment, spends
// no hypothesis (status still lists it, the report has no blank reason); after the fix,
// `optimize resume` starts the same experiment's job again and keeps its edit.
#[test]
fn a_worker_that_cannot_run_stops_the_run_and_resume_after_the_fix_runs_it() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    assert!(
        on_path("claude"),
        "`claude` is not on PATH: scripts/test installs it"
    );
    let fake = FakeModel::start();
    let user = AgentUser::new(&fake);
    let refused = Arc::new(AtomicBool::new(true));
    let refusing = refused.clone();
    fake.respond(move |s: &Seen| {
        if refusing.load(Ordering::SeqCst) {
            return Reply::Error(401, "invalid x-api-key".into());
        }
        if !s.is_agent_turn() {
            return Reply::Text("title".into());
        }
        match s.n_tool_results {
            0 => Reply::Shell(format!(
                "cat > src/count.sh <<'SKILLFORGE_EOF'\n{COUNT_SH_DIRECT}SKILLFORGE_EOF"
            )),
            _ => Reply::Text("Added each value directly.".into()),
        }
    });
    let repo = project();
    let work = tempfile::tempdir().unwrap();
    let spec = spec(work.path(), "claude", "");
    let home = Home::embedded();
    let repo_arg = repo.path().display().to_string();
    ok(
        &optimize(
            &home,
            &user,
            &["--json", "init", "--spec", &spec, "--repo", &repo_arg],
        ),
        "init",
    );
    let run = optimize(&home, &user, &["run", "--spec", &spec]);
    let stderr = String::from_utf8_lossy(&run.stderr).to_string();
    assert_eq!(run.status.code(), Some(3), "{stderr}\n{}", home.logs());
    assert!(
        stderr.contains("the worker of exp-001 could not run")
            && stderr.contains("agent runtime `claude` is not authenticated")
            && stderr.contains("optimize resume"),
        "why, in words, and what to do:\n{stderr}"
    );
    assert!(!stderr.contains("no runnable hypothesis left"), "{stderr}");
    let status = ok(
        &optimize(&home, &user, &["--json", "status", "--spec", &spec]),
        "status",
    );
    assert_eq!(status["experiments"], serde_json::json!([]), "{status:#}");
    assert_eq!(
        status["backlog"][0]["id"], "h-direct",
        "the hypothesis stays runnable: {status:#}"
    );
    let report = ok(
        &optimize(&home, &user, &["--json", "report", "--spec", &spec]),
        "report",
    )["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        report.contains("not authenticated") && !report.contains("not_runnable"),
        "the report says why in words:\n{report}"
    );
    // The fix: the model API accepts the key now. Resume runs the same experiment.
    refused.store(false, Ordering::SeqCst);
    let resume = optimize(&home, &user, &["--json", "resume", "--spec", &spec]);
    let stderr = String::from_utf8_lossy(&resume.stderr).to_string();
    ok(&resume, "resume");
    let status = ok(
        &optimize(&home, &user, &["--json", "status", "--spec", &spec]),
        "status",
    );
    assert_eq!(
        (
            status["experiments"][0]["experiment"].as_u64(),
            status["experiments"][0]["outcome"].as_str()
        ),
        (Some(1), Some("kept")),
        "{status:#}\n{stderr}\n{}",
        home.logs()
    );
    assert_eq!(
        git(repo.path(), &["show", "optimize/ops:src/count.sh"]).trim(),
        COUNT_SH_DIRECT.trim(),
        "the edit of the resumed experiment is kept"
    );
}
