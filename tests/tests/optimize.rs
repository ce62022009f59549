//! The optimize loop end to end: `skillforge optimize init|run|resume|status|report` on a small
//! real repository whose metric is a real measured property (the operation count a counting
//! script reports, checked for correctness by an immutable harness), with the scripted agent
//! making real edits through the real `agent` runner: good ones, one outside the scope, one
//! degenerate. Then the same run killed with SIGKILL mid-tick and resumed, and a remote run killed
//! while it waits to collect a worker's result.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use skillforge_tests::optimize::{
    call, experiment_log, experiments, init, jobs_of, log_entry, measure_branch, optimize,
    read_yaml, report_text, spawn_run, spawn_worker, spawn_workers, try_init, write_plan,
    write_spec,
};
use skillforge_tests::{Home, Reaped, git, wait_for};
use tempfile::TempDir;

const PARSE_SH: &str = "\
# parse FILE: reads the numbers of FILE into NUMS, one op per value read.
parse() {
  NUMS=\"\"
  for v in $(cat \"$1\"); do OPS=$((OPS+1)); done # validation pass
  for v in $(cat \"$1\"); do NUMS=\"$NUMS $v\"; OPS=$((OPS+1)); done
}
";

const COUNT_SH: &str = "\
#!/bin/sh
# count FILE: prints the sum of the numbers in FILE and the operations it took.
OPS=0
. \"$(dirname \"$0\")/parse.sh\"
parse \"$1\"
total=0
for v in $NUMS; do
  i=0
  while [ $i -lt $v ]; do total=$((total+1)); i=$((i+1)); OPS=$((OPS+1)); done
done
echo \"result=$total ops=$OPS\"
";

const MEASURE_SH: &str = "\
#!/bin/sh
# The immutable harness: runs the counter on an input, checks its result, prints metrics JSON.
input=\"${1:-data/input.txt}\"
out=$(sh src/count.sh \"$input\") || exit 1
result=$(echo \"$out\" | sed -n 's/.*result=\\([0-9]*\\).*/\\1/p')
ops=$(echo \"$out\" | sed -n 's/.*ops=\\([0-9]*\\).*/\\1/p')
expected=0
for v in $(cat \"$input\"); do expected=$((expected+v)); done
correct=0
[ \"$result\" = \"$expected\" ] && correct=1
echo \"{\\\"metrics\\\": {\\\"ops\\\": $ops, \\\"correct\\\": $correct}}\"
";

/// The project: `src/` mutable, the harness and its data immutable.
fn project() -> TempDir {
    let dir = tempfile::tempdir().expect("repo dir");
    let p = dir.path();
    git(p, &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(p.join("src")).unwrap();
    std::fs::create_dir_all(p.join("data")).unwrap();
    std::fs::write(p.join("src/parse.sh"), PARSE_SH).unwrap();
    std::fs::write(p.join("src/count.sh"), COUNT_SH).unwrap();
    std::fs::write(p.join("measure.sh"), MEASURE_SH).unwrap();
    std::fs::write(p.join("data/input.txt"), "3\n5\n7\n11\n").unwrap();
    std::fs::write(p.join("data/holdout.txt"), "2\n4\n6\n9\n").unwrap();
    git(p, &["add", "-A"]);
    git(p, &["commit", "-q", "-m", "counter"]);
    dir
}

fn hypothesis(id: &str, description: &str, category: &str, priority: &str, benefit: f64) -> String {
    format!(
        "  - id: {id}\n    description: \"{description}\"\n    category: {category}\n    priority: {priority}\n    opportunity:\n      workload: data/input.txt\n      baseline: CP-1 baseline\n      evidence: reading src/\n      expected_benefit: \"{benefit} relative\"\n      confidence: medium\n      cost_and_risk: small edit\n      estimate: {{ benefit: {benefit}, confidence: 1.0 }}\n"
    )
}

/// The spec (outside the repository) and the scripted workers' edit plan.
fn spec_and_plan(dir: &Path, mode: &str, sleep_ms: u64) -> (String, String) {
    spec_and_plan_with(dir, mode, sleep_ms, 4, false)
}

/// As [`spec_and_plan`], with `max_concurrent` and, with `alt`, a sixth hypothesis that also
/// improves `src/count.sh` (overlapping the best one's file).
fn spec_and_plan_with(
    dir: &Path,
    mode: &str,
    sleep_ms: u64,
    max_concurrent: u32,
    alt: bool,
) -> (String, String) {
    let alt_hyp = if alt {
        hypothesis(
            "h-alt",
            "Count loop operations in pairs",
            "parameter-tuning",
            "high",
            0.5,
        )
    } else {
        String::new()
    };
    let hyps = [
        hypothesis(
            "h-game",
            "Report fewer operations from the harness",
            "measurement",
            "high",
            0.9,
        ),
        hypothesis(
            "h-degen",
            "Print a constant result",
            "algorithm",
            "high",
            0.8,
        ),
        hypothesis(
            "h-dep",
            "Rewrite the counter in awk",
            "architecture",
            "medium",
            0.7,
        ),
        hypothesis(
            "h-direct",
            "Add each value directly instead of counting up to it",
            "algorithm",
            "low",
            0.6,
        ),
        hypothesis(
            "h-parse",
            "Drop the separate validation pass while parsing",
            "preprocessing",
            "low",
            0.3,
        ),
        alt_hyp,
    ]
    .concat();
    let spec = format!(
        "name: ops\n\
description: reduce the operation count of the counting script without changing its result\n\
metric:\n  primary: {{ name: ops, direction: minimize }}\n  degenerate_gates: [\"correct == 1\"]\n\
measurement:\n  command: sh measure.sh\n  timeout_seconds: 60\n  stability: {{ mode: ladder, repeat_count: 2 }}\n  holdout: {{ command: sh measure.sh data/holdout.txt }}\n\
scope:\n  mutable: [src]\n  immutable: [measure.sh, data]\n\
constraints: [\"the printed result stays the sum of the input\"]\n\
execution: {{ mode: {mode}, backend: remote, max_concurrent: {max_concurrent} }}\n\
stopping: {{ max_iterations: 10 }}\n\
hypotheses:\n{hyps}"
    );
    let spec = write_spec(dir, "ops.yaml", &spec);
    let plan = serde_json::json!({"experiments": [
        {"when": "fewer operations", "sleep_ms": sleep_ms, "message": "hard-coded the harness",
         "edits": [{"path": "measure.sh", "write": "#!/bin/sh\necho '{\"metrics\": {\"ops\": 1, \"correct\": 1}}'\n"},
                   {"path": "src/count.sh", "replace": "OPS=0\n", "with": "OPS=0 # tuned\n"}]},
        {"when": "constant result", "sleep_ms": sleep_ms,
         "edits": [{"path": "src/count.sh", "replace": "echo \"result=$total ops=$OPS\"", "with": "echo \"result=0 ops=1\""}]},
        {"when": "in awk", "sleep_ms": sleep_ms, "message": "The awk rewrite needs a newer awk.\nneeds_dependency: gawk",
         "edits": [{"path": "src/count.sh", "replace": "OPS=0\n", "with": "OPS=0 # awk soon\n"}]},
        {"when": "directly", "sleep_ms": sleep_ms,
         "edits": [{"path": "src/count.sh", "replace": "  i=0\n  while [ $i -lt $v ]; do total=$((total+1)); i=$((i+1)); OPS=$((OPS+1)); done\n", "with": "  total=$((total+v)); OPS=$((OPS+1))\n"}]},
        {"when": "in pairs", "sleep_ms": sleep_ms,
         "edits": [{"path": "src/count.sh", "replace": "OPS=$((OPS+1)); done\ndone", "with": "[ $((i % 2)) -eq 0 ] && OPS=$((OPS+1)); done\ndone"}]},
        {"when": "validation pass", "sleep_ms": sleep_ms,
         "edits": [{"path": "src/parse.sh", "replace": "  for v in $(cat \"$1\"); do OPS=$((OPS+1)); done # validation pass\n", "with": ""}]}
    ]});
    (spec, write_plan(dir, &plan))
}

/// Measures the harness on a fresh clone of `branch`: the metric the loop claims, measured again.
fn measured_ops(repo: &Path, branch: &str) -> (u64, u64) {
    let v = measure_branch(repo, branch);
    (
        v["metrics"]["ops"].as_u64().unwrap(),
        v["metrics"]["correct"].as_u64().unwrap(),
    )
}

fn assert_final_state(repo: &Path, status: &Value, report: &str) {
    let got = experiments(status);
    let want = [
        (1, "h-game", "inconclusive"),
        (2, "h-degen", "degenerate"),
        (3, "h-dep", "deferred_needs_approval"),
        (4, "h-direct", "kept"),
        (5, "h-parse", "kept"),
    ];
    assert_eq!(got, want, "{status:#}");
    // O-01: the out-of-scope edit was reverted and recorded, never measured or kept
    let game = &status["experiments"][0];
    assert_eq!(game["scope_violations"], serde_json::json!(["measure.sh"]));
    assert_eq!(
        (game["reference"].as_f64(), game["candidate"].as_f64()),
        (Some(34.0), Some(34.0)),
        "the real harness measured it"
    );
    assert_eq!(status["baseline"].as_f64(), Some(34.0));
    assert_eq!(status["best"]["ops"].as_f64(), Some(8.0));
    assert_eq!(
        status["run_state"]["stop_reason"]["reason"],
        "nothing_runnable"
    );
    // O-02, O-15: the deferred hypothesis stays in the backlog waiting for approval; nothing it did is kept
    let backlog = status["backlog"].as_array().unwrap();
    assert_eq!(backlog.len(), 1, "{backlog:?}");
    assert_eq!(
        (backlog[0]["id"].as_str(), backlog[0]["dep_status"].as_str()),
        (Some("h-dep"), Some("needs_approval"))
    );
    // the optimization branch really improved, measured again from a clean clone; the harness is untouched
    assert_eq!(measured_ops(repo, "optimize/ops"), (8, 1));
    assert_eq!(measured_ops(repo, "main"), (34, 1), "main is never touched");
    assert_eq!(
        git(repo, &["show", "optimize/ops:measure.sh"]).trim(),
        MEASURE_SH.trim()
    );
    let log = git(repo, &["log", "--format=%s", "optimize/ops"]);
    assert!(
        log.contains("optimize(ops): Add each value directly instead of counting up to it"),
        "{log}"
    );
    assert!(
        log.contains("optimize(ops): Drop the separate validation pass while parsing"),
        "{log}"
    );
    assert!(
        !log.contains("constant result") && !log.contains("fewer operations"),
        "{log}"
    );
    // worktrees and experiment branches are cleaned up
    let branches = git(repo, &["branch", "--list", "optimize-exp/*"]);
    assert!(branches.is_empty(), "{branches}");
    let worktrees = git(repo, &["worktree", "list", "--porcelain"]);
    assert_eq!(
        worktrees.matches("worktree ").count(),
        2,
        "main checkout + integration: {worktrees}"
    );
    // the report explains every keep and revert with its numbers
    for want in [
        "### exp-001: inconclusive",
        "out-of-scope changes reverted: measure.sh",
        "### exp-002: degenerate",
        "degenerate gate `correct == 1` failed",
        "### exp-003: deferred_needs_approval",
        "needs unapproved dependencies: gawk",
        "### exp-004: kept",
        "standalone: ops 34 -> 12 over 2 pair(s)",
        "holdout: ops",
        "### exp-005: kept",
        "standalone: ops 12 -> 8",
        "Best ops: 8 vs baseline 34",
        "## Waiting for dependency approval",
        // O-22: no detached-worker capability here, so the whole run uses worktrees, logged once
        "execution.backend remote: no detached-worker capability on this control plane (no execution.remote); using the worktree backend for the whole run",
        "- h-dep Rewrite the counter in awk (needs: gawk)",
    ] {
        assert!(report.contains(want), "report lacks {want:?}:\n{report}");
    }
}

/// What the state root holds after the run: briefs, comparisons with byte identities, the digest.
fn assert_state_files(state: &Path) {
    // O-18: serial selection happens after the previous entry is on disk (it is in the next brief)
    let brief2 = std::fs::read_to_string(state.join("briefs/exp-002.md")).unwrap();
    assert!(
        brief2.contains("- exp-001 [measurement] Report fewer operations from the harness"),
        "{brief2}"
    );
    assert!(
        brief2.contains("none recorded"),
        "O-04: no invented failure cases"
    );
    let log = std::fs::read_to_string(state.join("experiment-log.yaml")).unwrap();
    // O-24: standalone and holdout pairings side by side, each side identified by the bytes measured
    assert!(
        log.contains("kind: standalone") && log.contains("kind: holdout"),
        "{log}"
    );
    assert!(log.matches("identity: tree:").count() >= 8, "{log}");
    // O-19: the forecast is the backlog opportunity as of dispatch
    assert!(
        log.contains("forecast:\n    workload: data/input.txt"),
        "{log}"
    );
    // O-53: the digest was written and read back at CP-4
    let digest = std::fs::read_to_string(state.join("strategy-digest.md")).unwrap();
    assert!(
        digest.contains("## Failure themes") && digest.contains("- ops: 8 (baseline 34"),
        "{digest}"
    );
}

// O-01, O-02, O-03, O-15, O-18, O-22, O-24, O-29, O-41, O-47, O-48, O-52, O-53
#[test]
fn optimize_loop_improves_a_real_metric_and_keeps_only_measured_gains() {
    let repo = project();
    let work = tempfile::tempdir().unwrap();
    let (spec, plan) = spec_and_plan(work.path(), "serial", 0);
    let home = Home::embedded();
    let init = init(&home, &plan, &spec, repo.path());
    assert_eq!(
        init["baseline"]["ops"]["aggregate"].as_f64(),
        Some(34.0),
        "{init}"
    );
    // init twice is refused and changes nothing
    let again = try_init(&home, &plan, &spec, repo.path(), false);
    assert_eq!(
        again.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    call(&home, &plan, "run", &spec);
    let status = call(&home, &plan, "status", &spec);
    let report = report_text(&home, &plan, &spec);
    assert_final_state(repo.path(), &status, &report);
    assert_state_files(&home.path().join("optimize/ops"));
    // Issue 35: the human status says each outcome in words (`--json` keeps the names).
    let human = optimize(&home, &plan, &["status", "--spec", &spec]);
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(
        human.contains("exp-003 deferred needs approval")
            && !human.contains("deferred_needs_approval"),
        "{human}"
    );
    // a resumed finished run changes nothing
    call(&home, &plan, "resume", &spec);
    assert_eq!(
        call(&home, &plan, "status", &spec)["experiments"],
        status["experiments"]
    );

    // `serve`'s /metrics counts the run's kept and reverted experiments apart, and the console's
    // Work page shows a row per experiment (status, effect, interval, cost) (issue 36).
    let outcomes = experiments(&status);
    let count = |names: &[&str]| {
        outcomes
            .iter()
            .filter(|(_, _, o)| names.contains(o))
            .count() as f64
    };
    let (kept, reverted) = (
        count(&["kept", "runner_up_kept"]),
        count(&["reverted", "runner_up_reverted"]),
    );
    // Inconclusive, degenerate and deferred experiments are neither.
    assert!(kept >= 1.0, "{outcomes:?}");
    let port = skillforge_tests::free_port();
    let token = "an-admin-token-of-the-console-0001";
    let _serve = Reaped(skillforge_tests::webhook::spawn_serve(
        &home,
        port,
        None,
        &[("SKILLFORGE_SERVER_TOKEN", token)],
    ));
    skillforge_tests::webhook::wait_listening(&home, port);
    let metrics = http_get(port, "/metrics", None);
    let sample = |name: &str| {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}{{spec=\"ops\"}} ")))
            .and_then(|v| v.trim().parse::<f64>().ok())
    };
    assert_eq!(
        sample("skillforge_optimize_experiments_kept_total"),
        Some(kept),
        "{metrics}"
    );
    assert_eq!(
        sample("skillforge_optimize_experiments_reverted_total"),
        Some(reverted),
        "{metrics}"
    );
    let work = http_get(port, "/work", Some(token));
    assert!(work.contains("Experiments of ops"), "{work}");
    for (n, hypothesis, outcome) in &outcomes {
        let row = format!("exp-{n:03}");
        let at = work
            .find(&row)
            .unwrap_or_else(|| panic!("{row} listed: {work}"));
        let row_html = &work[at..work[at..].find("</tr>").map_or(work.len(), |e| at + e)];
        assert!(
            row_html.contains(*hypothesis) && row_html.contains(&format!("outcome-{outcome}")),
            "{row_html}"
        );
        if *outcome == "kept" {
            assert!(
                row_html.contains("% ops") || row_html.contains(" ops ("),
                "a keep's effect on the primary metric: {row_html}"
            );
        }
    }
}

/// The body of `GET path` on `127.0.0.1:port` (with a bearer token when given).
fn http_get(port: u16, path: &str, token: Option<&str>) -> String {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    assert!(
        head.starts_with("HTTP/1.1 200"),
        "GET {path}: {head}\n{body}"
    );
    body.to_owned()
}

#[test]
fn optimize_spec_errors_name_the_key_and_change_nothing() {
    let repo = project();
    let work = tempfile::tempdir().unwrap();
    let (spec, plan) = spec_and_plan(work.path(), "serial", 0);
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("max_concurrent: 4", "max_concurent: 4");
    std::fs::write(&spec, text).unwrap();
    let home = Home::embedded();
    let out = try_init(&home, &plan, &spec, repo.path(), false);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("execution") && err.contains("max_concurent") && err.contains("ops.yaml"),
        "{err}"
    );
    assert!(!home.path().join("optimize").exists());
    assert!(git(repo.path(), &["branch", "--list", "optimize/*"]).is_empty());
}

// A value the spec's key does not take names the key once (it read
// "`metric.primary.direction`: metric.primary.direction: unknown variant").
#[test]
fn a_bad_spec_value_names_its_key_once() {
    let repo = project();
    let work = tempfile::tempdir().unwrap();
    let (spec, plan) = spec_and_plan(work.path(), "serial", 0);
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("direction: minimize", "direction: smaller");
    assert!(text.contains("direction: smaller"));
    std::fs::write(&spec, text).unwrap();
    let home = Home::embedded();
    let out = try_init(&home, &plan, &spec, repo.path(), false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err.matches("metric.primary.direction").count(),
        1,
        "the key once: {err}"
    );
    assert!(
        err.contains("`metric.primary.direction`: unknown variant `smaller`")
            && err.contains("minimize"),
        "{err}"
    );
    assert!(!home.path().join("optimize").exists());
}

#[test]
fn optimize_init_on_a_repository_without_a_commit_says_to_commit_first_and_changes_nothing() {
    let repo = tempfile::tempdir().unwrap();
    git(repo.path(), &["init", "-q", "-b", "main"]);
    let work = tempfile::tempdir().unwrap();
    let (spec, plan) = spec_and_plan(work.path(), "serial", 0);
    let home = Home::embedded();
    let out = try_init(&home, &plan, &spec, repo.path(), false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("has no commit yet") && err.contains("git commit"),
        "{err}"
    );
    assert!(!err.contains("fatal:"), "{err}");
    assert!(!home.path().join("optimize").exists());
}

// O-66, O-29, O-62, O-23: SIGKILL of the orchestrator mid-tick, then resume: no lost or repeated experiment
#[test]
fn o66_sigkill_mid_tick_then_resume_loses_and_repeats_nothing() {
    let repo = project();
    let work = tempfile::tempdir().unwrap();
    let (spec, plan) = spec_and_plan(work.path(), "serial", 1500);
    let home = Home::embedded();
    init(&home, &plan, &spec, repo.path());
    let mut child = spawn_run(&home, &plan, &spec);
    let state = home.path().join("optimize/ops");
    // kill while exp-003's worker runs: exp-001 and exp-002 are done, exp-003 is a pending wait
    wait_for(Duration::from_secs(120), "exp-003 dispatched", || {
        state.join("briefs/exp-003.md").exists().then_some(())
    });
    let _ = child.0.kill();
    let _ = child.0.wait();
    let log = std::fs::read_to_string(state.join("experiment-log.yaml")).unwrap();
    assert!(
        log.contains("pending_waits:\n  - experiment: 3"),
        "killed mid-tick with a pending wait:\n{log}"
    );
    assert!(
        log.contains("  tick: 2\n"),
        "two ticks done, the third interrupted:\n{log}"
    );
    call(&home, &plan, "resume", &spec);
    let status = call(&home, &plan, "status", &spec);
    let report = report_text(&home, &plan, &spec);
    assert_final_state(repo.path(), &status, &report);
    assert_state_files(&state);
    assert_eq!(
        status["run_state"]["experiments_run"].as_u64(),
        Some(5),
        "no experiment number was used twice"
    );
    let jobs = home.json(&["jobs", "list"]);
    let workers = jobs
        .as_array()
        .map(|a| a.iter().filter(|j| j["stage"] == "experiment").count());
    assert_eq!(workers, Some(5), "one worker job per experiment: {jobs:#}");
}

// O-61: a manual stop saves state and writes the report (exit 4); running again continues the same
// batch; while the first run holds the spec, a second control plane is refused (exit 3)
#[test]
fn o61_manual_stop_saves_state_reports_and_continues() {
    let repo = project();
    let work = tempfile::tempdir().unwrap();
    let (spec, plan) = spec_and_plan(work.path(), "serial", 1500);
    let home = Home::embedded();
    init(&home, &plan, &spec, repo.path());
    let mut child = spawn_run(&home, &plan, &spec);
    let state = home.path().join("optimize/ops");
    wait_for(Duration::from_secs(120), "exp-002 dispatched", || {
        state.join("briefs/exp-002.md").exists().then_some(())
    });
    // a second control plane on the same spec is refused, naming the holder
    for second in ["run", "resume"] {
        let out = optimize(&home, &plan, &[second, "--spec", &spec]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{second}: {err}");
        assert!(
            err.contains("already driven by")
                && err.contains(&format!("pid {}", child.0.id()))
                && err.contains("optimize run")
                && err.contains("control.lock"),
            "{second}: {err}"
        );
    }
    skillforge_tests::signal(&child.0, nix::sys::signal::Signal::SIGINT);
    let exit = skillforge_tests::wait_exit(&mut child.0, Duration::from_secs(60));
    // exit 4: paused by the operator, `run` again continues
    assert_eq!(exit.code(), Some(4), "{exit}");
    let status = call(&home, &plan, "status", &spec);
    assert_eq!(
        status["run_state"]["stop_reason"]["reason"], "manual_stop",
        "{status:#}"
    );
    let report = std::fs::read_to_string(state.join("report.md")).unwrap();
    assert!(report.contains("stopped by the operator"), "{report}");
    call(&home, &plan, "run", &spec); // run again
    let status = call(&home, &plan, "status", &spec);
    let report = report_text(&home, &plan, &spec);
    assert_final_state(repo.path(), &status, &report);
}

// O-20, O-49, O-50, O-52: parallel experiments on a 2-worker Redis fleet; the winner is merged,
// a file-disjoint runner-up is kept on fresh samples of the combination, an overlapping one is not
#[test]
fn parallel_experiments_on_a_two_worker_redis_fleet() {
    let redis = skillforge_tests::RedisServer::start();
    let repo = project();
    let work = tempfile::tempdir().unwrap();
    let (spec, plan) = spec_and_plan_with(work.path(), "parallel", 300, 6, true);
    let home = Home::redis(&redis.url());
    let _workers = spawn_workers(&home, &plan, &["w1", "w2"]);
    init(&home, &plan, &spec, repo.path());
    call(&home, &plan, "run", &spec);
    let status = call(&home, &plan, "status", &spec);
    let got = experiments(&status);
    let want = [
        (1, "h-game", "inconclusive"),
        (2, "h-degen", "degenerate"),
        (3, "h-dep", "deferred_needs_approval"),
        (4, "h-direct", "kept"),
        (5, "h-alt", "not_selected"),
        (6, "h-parse", "runner_up_kept"),
    ];
    assert_eq!(got, want, "{status:#}\n{}", home.logs());
    assert_eq!(
        status["run_state"]["tick"].as_u64(),
        Some(1),
        "one batch of six"
    );
    assert_eq!(status["best"]["ops"].as_f64(), Some(8.0));
    assert_eq!(measured_ops(repo.path(), "optimize/ops"), (8, 1));
    let report = report_text(&home, &plan, &spec);
    for want in [
        "not file-disjoint with the kept change (src/count.sh)",
        "integrated: ops 12 -> 8",
        "standalone: ops 34 -> 30",
        "runner-up kept in combination",
    ] {
        assert!(report.contains(want), "report lacks {want:?}:\n{report}");
    }
    let log = git(repo.path(), &["log", "--format=%s", "optimize/ops"]);
    assert!(
        log.contains("Drop the separate validation pass") && !log.contains("in pairs"),
        "{log}"
    );
}

/// A project of three independent levers: `ops = A_OPS + B_OPS + C_OPS`, each set in its own
/// file under `src/` and read by the immutable harness.
fn levers_project() -> TempDir {
    let dir = tempfile::tempdir().expect("repo dir");
    let p = dir.path();
    git(p, &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(p.join("src")).unwrap();
    for (f, v) in [("a", "A_OPS=10"), ("b", "B_OPS=10"), ("c", "C_OPS=10")] {
        std::fs::write(p.join(format!("src/{f}.sh")), format!("{v}\n")).unwrap();
    }
    std::fs::write(p.join("measure.sh"), "#!/bin/sh\n. ./src/a.sh\n. ./src/b.sh\n. ./src/c.sh\necho \"{\\\"metrics\\\": {\\\"ops\\\": $((A_OPS+B_OPS+C_OPS))}}\"\n").unwrap();
    git(p, &["add", "-A"]);
    git(p, &["commit", "-q", "-m", "levers"]);
    dir
}

// O-51: the winner is merged; the first file-disjoint runner-up fails in combination, so the
// second (also disjoint, also eligible) is never tried
#[test]
fn o51_runner_up_merging_stops_after_the_first_failed_combination() {
    let repo = levers_project();
    let work = tempfile::tempdir().unwrap();
    let hyps = [
        hypothesis("h-a", "Lower lever A", "algorithm", "low", 0.3),
        hypothesis(
            "h-b",
            "Lower lever B while A is untouched",
            "caching",
            "low",
            0.2,
        ),
        hypothesis("h-c", "Lower lever C", "preprocessing", "low", 0.1),
    ]
    .concat();
    let spec = format!(
        "name: levers\ndescription: fewer operations\nmetric:\n  primary: {{ name: ops, direction: minimize }}\n\
measurement:\n  command: sh measure.sh\n  timeout_seconds: 60\nscope:\n  mutable: [src]\n  immutable: [measure.sh]\n\
execution: {{ mode: parallel, max_concurrent: 3 }}\nstopping: {{ max_iterations: 3 }}\nhypotheses:\n{hyps}"
    );
    let spec = write_spec(work.path(), "levers.yaml", &spec);
    let plan = write_plan(
        work.path(),
        &serde_json::json!({"experiments": [
            {"when": "lever A", "edits": [{"path": "src/a.sh", "write": "A_OPS=2\n"}]},
            {"when": "lever B", "edits": [{"path": "src/b.sh", "write": "B_OPS=$(( A_OPS == 10 ? 5 : 50 ))\n"}]},
            {"when": "lever C", "edits": [{"path": "src/c.sh", "write": "C_OPS=8\n"}]}
        ]}),
    );
    let home = Home::embedded();
    init(&home, &plan, &spec, repo.path());
    call(&home, &plan, "run", &spec);
    let status = call(&home, &plan, "status", &spec);
    let got = experiments(&status);
    assert_eq!(
        got,
        [
            (1, "h-a", "kept"),
            (2, "h-b", "runner_up_reverted"),
            (3, "h-c", "not_selected")
        ],
        "{status:#}"
    );
    let report = report_text(&home, &plan, &spec);
    assert!(
        report.contains("runner-up merging stopped after the first failed combination"),
        "{report}"
    );
    // exp-003 was never measured in combination: no integrated measurement job exists for it
    let jobs = home.json(&["jobs", "list", "--limit", "1000"]);
    let keys: Vec<&str> = jobs
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|j| j["idempotency_key"].as_str())
        .collect();
    assert!(
        keys.iter().any(|k| k.contains("exp-002:int:")),
        "the first runner-up was measured in combination: {keys:?}"
    );
    assert!(
        !keys.iter().any(|k| k.contains("exp-003:int")),
        "the second was not tried: {keys:?}"
    );
    // the optimization branch holds only the winner
    assert_eq!(
        git(repo.path(), &["show", "optimize/levers:src/b.sh"]).trim(),
        "B_OPS=10"
    );
    assert_eq!(
        git(repo.path(), &["show", "optimize/levers:src/c.sh"]).trim(),
        "C_OPS=10"
    );
    assert_eq!(
        git(repo.path(), &["show", "optimize/levers:src/a.sh"]).trim(),
        "A_OPS=2"
    );
}

// O-06, O-07, O-25, O-26, O-46, O-48: the remote backend. Workers are `agent` jobs on a fleet
// worker, each making its own clone of a local bare repository, measuring paired there and
// pushing result.yaml on its result ref; the control plane accepts a result only under every
// check, confirms a would-be keep on its own checkout, and merges head_sha
#[test]
fn remote_workers_push_results_that_are_checked_confirmed_and_merged_by_head_sha() {
    let (repo, work, origin) = project_with_bare_origin();
    let hyps = [
        hypothesis(
            "h-direct",
            "Add each value directly instead of counting up to it",
            "algorithm",
            "low",
            0.9,
        ),
        hypothesis(
            "h-stale",
            "Tune the parser from the old main",
            "parameter-tuning",
            "low",
            0.8,
        ),
        hypothesis(
            "h-claim",
            "Tidy the parser comments",
            "preprocessing",
            "low",
            0.7,
        ),
        hypothesis(
            "h-game",
            "Report fewer operations from the harness",
            "measurement",
            "low",
            0.6,
        ),
        hypothesis(
            "h-blocked",
            "Rework the counter on a missing base",
            "architecture",
            "low",
            0.5,
        ),
    ]
    .concat();
    let spec = remote_spec(work.path(), &origin, "", &hyps, 5);
    let direct = "  total=$((total+v)); OPS=$((OPS+1))\n";
    let plan = serde_json::json!({"experiments": [
        {"when": "directly", "edits": [{"path": "src/count.sh", "replace": "  i=0\n  while [ $i -lt $v ]; do total=$((total+1)); i=$((i+1)); OPS=$((OPS+1)); done\n", "with": direct}]},
        {"when": "old main", "remote_base": "main", "edits": [{"path": "src/parse.sh", "replace": "# parse FILE", "with": "# parse FILE (tuned)"}]},
        {"when": "comments", "claim": {"ops": 5}, "edits": [{"path": "src/parse.sh", "replace": "# parse FILE", "with": "# parse FILE (tidy)"}]},
        {"when": "fewer operations", "edits": [{"path": "measure.sh", "write": "#!/bin/sh\necho '{\"metrics\": {\"ops\": 1, \"correct\": 1}}'\n"}, {"path": "src/count.sh", "replace": "OPS=0\n", "with": "OPS=0 # tuned\n"}]},
        {"when": "missing base", "remote_base": "0123456789abcdef0123456789abcdef01234567", "edits": []}
    ]});
    let plan = write_plan(work.path(), &plan);
    let home = Home::embedded();
    let _worker = spawn_worker(&home, &plan, "fleet-1");
    init(&home, &plan, &spec, repo.path());
    call(&home, &plan, "run", &spec);
    let status = call(&home, &plan, "status", &spec);
    let got = experiments(&status);
    let want = [
        (1, "h-direct", "kept"),
        (2, "h-stale", "error"),
        (3, "h-claim", "inconclusive"),
        (4, "h-game", "error"),
        (5, "h-blocked", "error"),
    ];
    assert_eq!(got, want, "{status:#}\n{}", home.logs());
    let log = experiment_log(&home, "ops");
    let entry = |n: usize| log["experiments"][n - 1].clone();
    let state = home.path().join("optimize/ops");

    // O-26: the accepted result.yaml is copied into the state root; the worker's pairing carries its machine
    let copy: Value = read_yaml(&state.join("exp-001-result.yaml"));
    let head = copy["head_sha"].as_str().unwrap().to_owned();
    let e1 = entry(1);
    let comps = e1["comparisons"].as_array().unwrap();
    let worker = comps
        .iter()
        .find(|c| c["measured_by"] == "worker")
        .expect("the worker's pairing");
    assert_eq!(
        (
            worker["kind"].as_str(),
            worker["candidate"]["identity"].as_str()
        ),
        (Some("standalone"), Some(format!("commit:{head}").as_str()))
    );
    assert!(
        worker["machine"]
            .as_str()
            .unwrap()
            .starts_with("scripted-worker@"),
        "{worker:#}"
    );
    assert_eq!(
        worker["candidate"]["snapshot"]["metrics"]["ops"]["aggregate"].as_f64(),
        Some(12.0)
    );
    // O-46: a pairing its author did not produce decided the keep, and the holdout ran on it too
    let ours = comps
        .iter()
        .find(|c| c["kind"] == "standalone" && c["measured_by"] == "orchestrator")
        .expect("independent confirmation");
    assert_eq!(
        ours["candidate"]["snapshot"]["metrics"]["ops"]["aggregate"].as_f64(),
        Some(12.0)
    );
    assert!(
        comps
            .iter()
            .any(|c| c["kind"] == "holdout" && c["measured_by"] == "orchestrator"),
        "{comps:#?}"
    );
    // O-48: the optimization branch contains head_sha and never the result ref's result.yaml
    git(
        repo.path(),
        &["merge-base", "--is-ancestor", &head, "optimize/ops"],
    );
    let files = git(
        repo.path(),
        &["ls-tree", "-r", "--name-only", "optimize/ops"],
    );
    assert!(!files.lines().any(|f| f == "result.yaml"), "{files}");
    assert_eq!(measured_ops(repo.path(), "optimize/ops"), (12, 1));
    assert_eq!(
        measured_ops(repo.path(), "main"),
        (34, 1),
        "main is never touched"
    );

    // O-07: the pushed ref's tip adds only result.yaml on top of head_sha; the worker never pushed the optimization branch
    let tip_files = git(
        &origin,
        &[
            "diff-tree",
            "--no-commit-id",
            "--name-only",
            "-r",
            "optimize-exp/ops/exp-001",
        ],
    );
    assert_eq!(tip_files.trim(), "result.yaml");
    assert_eq!(
        git(&origin, &["rev-parse", "optimize-exp/ops/exp-001^"]).trim(),
        head
    );
    assert_eq!(
        git(&origin, &["rev-parse", "optimize/ops"]).trim(),
        git(repo.path(), &["rev-parse", "optimize/ops"]).trim(),
        "the remote's optimization branch is only what the control plane published"
    );

    // O-25: a result whose base does not match, and one touching the immutable scope, are errors with the reason
    assert!(
        entry(2)["learnings"]
            .to_string()
            .contains("does not match the dispatched base"),
        "{:#}",
        entry(2)
    );
    assert!(
        entry(4)["learnings"]
            .to_string()
            .contains("outside scope.mutable: measure.sh"),
        "{:#}",
        entry(4)
    );
    assert!(
        !state.join("exp-002-result.yaml").exists() && !state.join("exp-004-result.yaml").exists(),
        "rejected results are not copied"
    );
    // O-46: the worker claimed 12 -> 5; measured independently it is 12 -> 12: not kept, the claim recorded unconfirmed
    let e3 = entry(3);
    let c3 = e3["comparisons"].as_array().unwrap();
    assert_eq!(c3.iter().find(|c| c["measured_by"] == "worker").unwrap()["candidate"]["snapshot"]["metrics"]["ops"]["aggregate"].as_f64(), Some(5.0));
    assert_eq!(
        c3.iter()
            .find(|c| c["measured_by"] == "orchestrator")
            .unwrap()["candidate"]["snapshot"]["metrics"]["ops"]["aggregate"]
            .as_f64(),
        Some(12.0)
    );
    assert!(
        e3["learnings"]
            .to_string()
            .contains("worker claim unconfirmed"),
        "{e3:#}"
    );
    // O-06: a base the worker cannot get is a blocker report: no measurement recorded
    let e5 = entry(5);
    assert_eq!(
        e5["comparisons"].as_array().map(Vec::len),
        Some(0),
        "{e5:#}"
    );
    assert!(
        e5["learnings"].to_string().contains("worker blocker"),
        "{e5:#}"
    );
    assert!(
        log["notes"].to_string().contains("reported a blocker"),
        "{:#}",
        log["notes"]
    );
    let report = report_text(&home, &plan, &spec);
    assert!(
        report.contains("worker claim unconfirmed") && report.contains("remote result rejected"),
        "{report}"
    );
}

// O-26, O-05: in ladder mode the worker's first pair asks for more selection samples: the same
// worker job is re-dispatched from the same head_sha, its samples are appended to the same
// entry (one experiment), each accepted result.yaml is copied into the state root
#[test]
fn o26_extra_remote_samples_are_re_dispatched_from_head_sha_and_stay_one_experiment() {
    let (repo, work, origin) = project_with_bare_origin();
    let spec = remote_spec(
        work.path(),
        &origin,
        "  stability: { mode: ladder, repeat_count: 2 }\n",
        &hypothesis(
            "h-direct",
            "Add each value directly instead of counting up to it",
            "algorithm",
            "low",
            0.9,
        ),
        1,
    );
    let plan = serde_json::json!({"experiments": [
        {"when": "directly", "edits": [{"path": "src/count.sh", "replace": "  i=0\n  while [ $i -lt $v ]; do total=$((total+1)); i=$((i+1)); OPS=$((OPS+1)); done\n", "with": "  total=$((total+v)); OPS=$((OPS+1))\n"}]}
    ]});
    let plan = write_plan(work.path(), &plan);
    let home = Home::embedded();
    init(&home, &plan, &spec, repo.path());
    call(&home, &plan, "run", &spec);
    let status = call(&home, &plan, "status", &spec);
    assert_eq!(
        experiments(&status),
        [(1, "h-direct", "kept")],
        "{status:#}"
    );
    assert_eq!(
        status["run_state"]["experiments_run"].as_u64(),
        Some(1),
        "one experiment"
    );
    let log = experiment_log(&home, "ops");
    let comps = log["experiments"][0]["comparisons"]
        .as_array()
        .unwrap()
        .clone();
    let worker = comps.iter().find(|c| c["measured_by"] == "worker").unwrap();
    assert_eq!(
        worker["candidate"]["snapshot"]["metrics"]["ops"]["samples"],
        serde_json::json!([12.0, 12.0]),
        "the re-dispatch's sample is appended: {worker:#}"
    );
    assert_eq!(
        worker["reference"]["snapshot"]["metrics"]["ops"]["samples"],
        serde_json::json!([34.0, 34.0])
    );
    let state = home.path().join("optimize/ops");
    let first = read_yaml(&state.join("exp-001-result.yaml"));
    let second = read_yaml(&state.join("exp-001-result-1.yaml"));
    assert_eq!(first["head_sha"], second["head_sha"], "the same head_sha");
    let jobs = jobs_of(&home, "experiment");
    let workers: Vec<&str> = jobs
        .iter()
        .filter_map(|j| j["idempotency_key"].as_str())
        .collect();
    assert_eq!(
        workers.len(),
        2,
        "the first dispatch and one re-dispatch: {workers:?}"
    );
    assert!(
        workers.iter().any(|k| k.ends_with("exp-001:worker:more-1")),
        "{workers:?}"
    );
    // the keep was still decided on the independent pairing, at the full protocol, with the holdout
    let ours = comps
        .iter()
        .find(|c| c["kind"] == "standalone" && c["measured_by"] == "orchestrator")
        .unwrap();
    assert_eq!(
        ours["candidate"]["snapshot"]["metrics"]["ops"]["samples"],
        serde_json::json!([12.0, 12.0])
    );
    assert!(comps.iter().any(|c| c["kind"] == "holdout"), "{comps:#?}");
    git(
        repo.path(),
        &[
            "merge-base",
            "--is-ancestor",
            first["head_sha"].as_str().unwrap(),
            "optimize/ops",
        ],
    );
}

// O-28: CE_OPTIMIZE_CENSOR_AFTER reaches the candidate's measurement only when elapsed time alone
// proves it hopeless (every required objective is an elapsed one); with another required
// objective that could still win, the measurement runs without it
#[test]
fn o28_the_censor_bound_is_passed_only_when_every_required_objective_is_elapsed_time() {
    let run = |objectives: &str| -> Value {
        let repo = levers_project();
        // the harness reports `seconds` (lever A stands for the run's wall time), `ops` (lever B) and
        // the censor bound it was given, 0 when none
        std::fs::write(repo.path().join("measure.sh"), "#!/bin/sh\n. ./src/a.sh\n. ./src/b.sh\necho \"{\\\"metrics\\\": {\\\"seconds\\\": $A_OPS, \\\"ops\\\": $B_OPS, \\\"censor_after\\\": ${CE_OPTIMIZE_CENSOR_AFTER:-0}}}\"\n").unwrap();
        git(
            repo.path(),
            &["commit", "-qam", "harness with a censor probe"],
        );
        let work = tempfile::tempdir().unwrap();
        let spec = format!(
            "name: censor\ndescription: faster\nmetric:\n  primary: {{ name: seconds, direction: minimize, elapsed: true }}\n{objectives}\
measurement:\n  command: sh measure.sh\n  timeout_seconds: 60\nscope:\n  mutable: [src]\n  immutable: [measure.sh]\n\
stopping: {{ max_iterations: 1 }}\nhypotheses:\n{}",
            hypothesis("h-a", "Lower lever A", "algorithm", "low", 0.3)
        );
        let spec = write_spec(work.path(), "censor.yaml", &spec);
        let plan = write_plan(
            work.path(),
            &serde_json::json!({"experiments": [{"when": "lever A", "edits": [{"path": "src/a.sh", "write": "A_OPS=2\n"}]}]}),
        );
        let home = Home::embedded();
        init(&home, &plan, &spec, repo.path());
        call(&home, &plan, "run", &spec);
        let log = experiment_log(&home, "censor");
        log["experiments"][0]["comparisons"][0].clone()
    };
    let only_elapsed = run("");
    assert_eq!(
        only_elapsed["candidate"]["snapshot"]["metrics"]["censor_after"]["samples"],
        serde_json::json!([10.0]),
        "hopeless past 10 s x (1 - 1 %): {only_elapsed:#}"
    );
    assert_eq!(
        only_elapsed["reference"]["snapshot"]["metrics"]["censor_after"]["samples"],
        serde_json::json!([0.0]),
        "the reference is never censored"
    );
    let with_ops = run(
        "  objectives:\n    - { name: seconds, direction: minimize, elapsed: true }\n    - { name: ops, direction: minimize }\n",
    );
    assert_eq!(
        with_ops["candidate"]["snapshot"]["metrics"]["censor_after"]["samples"],
        serde_json::json!([0.0]),
        "ops could still win: no censor bound: {with_ops:#}"
    );
}

// O-66, O-62: SIGKILL of the orchestrator while it waits to collect a remote worker's result (the
// worker, a separate fleet process, goes on and pushes its result.yaml meanwhile), then
// `resume`: the arrived result is collected from the same job, never dispatched again, and the
// experiment is decided and merged once, as in an uninterrupted run
#[test]
fn o66_sigkill_while_a_remote_result_is_collected_then_resume_collects_it_once() {
    let (repo, work, origin) = project_with_bare_origin();
    let hyps = [
        hypothesis(
            "h-direct",
            "Add each value directly instead of counting up to it",
            "algorithm",
            "low",
            0.9,
        ),
        hypothesis(
            "h-claim",
            "Tidy the parser comments",
            "preprocessing",
            "low",
            0.7,
        ),
    ]
    .concat();
    let spec = remote_spec(work.path(), &origin, "", &hyps, 2);
    let plan = serde_json::json!({"experiments": [
        {"when": "directly", "sleep_ms": 4000, "edits": [{"path": "src/count.sh", "replace": "  i=0\n  while [ $i -lt $v ]; do total=$((total+1)); i=$((i+1)); OPS=$((OPS+1)); done\n", "with": "  total=$((total+v)); OPS=$((OPS+1))\n"}]},
        {"when": "comments", "claim": {"ops": 5}, "edits": [{"path": "src/parse.sh", "replace": "# parse FILE", "with": "# parse FILE (tidy)"}]}
    ]});
    let plan = write_plan(work.path(), &plan);
    let home = Home::embedded();
    let _worker = spawn_worker(&home, &plan, "fleet-1");
    init(&home, &plan, &spec, repo.path());
    let mut child = spawn_run(&home, &plan, &spec);
    let running = wait_for(
        Duration::from_secs(120),
        "exp-001's remote worker running",
        || {
            jobs_of(&home, "experiment").into_iter().find(|j| {
                j["idempotency_key"]
                    .as_str()
                    .is_some_and(|k| k.contains("exp-001"))
                    && j["state"] == "running"
            })
        },
    );
    let _ = child.0.kill();
    let _ = child.0.wait();
    let state = home.path().join("optimize/ops");
    let killed = std::fs::read_to_string(state.join("experiment-log.yaml")).unwrap();
    assert!(
        killed.contains("pending_waits:\n  - experiment: 1"),
        "killed with exp-001 a pending wait:\n{killed}"
    );
    // the worker finishes and pushes its result while no orchestrator runs
    let id = running["id"].as_str().unwrap().to_owned();
    wait_for(
        Duration::from_secs(60),
        "the remote worker to finish",
        || (home.json(&["jobs", "show", &id])["state"] == "succeeded").then_some(()),
    );
    assert!(
        git(&origin, &["branch", "--list", "optimize-exp/ops/exp-001"]).contains("exp-001"),
        "the result ref was pushed"
    );
    assert!(
        !state.join("exp-001-result.yaml").exists(),
        "not collected yet"
    );

    call(&home, &plan, "resume", &spec);
    let status = call(&home, &plan, "status", &spec);
    let got = experiments(&status);
    assert_eq!(
        got,
        [(1, "h-direct", "kept"), (2, "h-claim", "inconclusive")],
        "{status:#}\n{}",
        home.logs()
    );
    assert_eq!(
        status["run_state"]["experiments_run"].as_u64(),
        Some(2),
        "no experiment number used twice: {status:#}"
    );
    let workers = jobs_of(&home, "experiment");
    assert_eq!(
        workers.len(),
        2,
        "one worker job per experiment: {workers:#?}"
    );
    let first = workers
        .iter()
        .find(|j| j["id"] == id.as_str())
        .expect("exp-001's job is the one dispatched before the kill");
    assert_eq!(
        first["attempts"].as_u64(),
        Some(1),
        "and it ran once: {first:#}"
    );
    let log = experiment_log(&home, "ops");
    assert_eq!(
        log["experiments"].as_array().map(Vec::len),
        Some(2),
        "{log:#}"
    );
    let comps = log["experiments"][0]["comparisons"].as_array().unwrap();
    assert_eq!(
        comps
            .iter()
            .filter(|c| c["measured_by"] == "worker")
            .count(),
        1,
        "the worker's pairing is collected once: {comps:#?}"
    );
    assert!(
        comps
            .iter()
            .any(|c| c["kind"] == "standalone" && c["measured_by"] == "orchestrator"),
        "the keep confirmed independently: {comps:#?}"
    );
    let copy: Value = read_yaml(&state.join("exp-001-result.yaml"));
    git(
        repo.path(),
        &[
            "merge-base",
            "--is-ancestor",
            copy["head_sha"].as_str().unwrap(),
            "optimize/ops",
        ],
    );
    assert_eq!(measured_ops(repo.path(), "optimize/ops"), (12, 1));
}

// Issue 20 item 4: the same loop on a worker that shares nothing with the control plane but the
// queue URL (the repository, its worktrees and the state root all in the hidden home): each
// experiment's worktree travels to the job dir and back, each measurement gets a copy of its
// checkout, no job names a control-plane path, and the outcome is the one-machine run's.
#[test]
fn optimize_loop_on_a_worker_that_cannot_see_the_home() {
    let redis = skillforge_tests::RedisServer::start();
    let home = Home::redis(&redis.url());
    let origin = project();
    let repo = home.path().join("project");
    std::fs::create_dir_all(home.path()).unwrap();
    git(
        home.path(),
        &[
            "clone",
            "-q",
            origin.path().to_str().unwrap(),
            repo.to_str().unwrap(),
        ],
    );
    let work = tempfile::tempdir().unwrap();
    let (spec, plan) = spec_and_plan(work.path(), "serial", 0);
    let _vm = Reaped(skillforge_tests::isolated::spawn_isolated_worker_env(
        &home,
        "vm",
        &[],
        &[("SKILLFORGE_SCRIPTED_EDITS", &plan)],
    ));
    let hidden = home.run(&[
        "jobs",
        "submit",
        "--wait",
        "--",
        "test",
        "!",
        "-e",
        repo.join("measure.sh").to_str().unwrap(),
    ]);
    assert!(
        hidden.status.success(),
        "the worker cannot see the home: {}",
        String::from_utf8_lossy(&hidden.stderr)
    );
    init(&home, &plan, &spec, &repo);
    call(&home, &plan, "run", &spec);
    let status = call(&home, &plan, "status", &spec);
    let report = report_text(&home, &plan, &spec);
    assert_final_state(&repo, &status, &report);
    let home_text = home.path().display().to_string();
    let jobs = home.json(&["jobs", "list", "--limit", "500"]);
    let ours: Vec<&Value> = jobs
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["workflow"] == "optimize")
        .collect();
    assert!(
        ours.iter().any(|j| j["stage"] == "experiment")
            && ours.iter().any(|j| j["stage"] == "measurement"),
        "{jobs:#}"
    );
    for listed in ours {
        let job = home.job(listed["id"].as_str().unwrap());
        assert!(
            job["history"][0]["worker"]
                .as_str()
                .unwrap()
                .starts_with("vm-"),
            "run by the isolated worker: {job:#}"
        );
        let payload = job["payload"].to_string();
        assert!(
            !payload.contains(&home_text),
            "no control-plane path in the {} job: {payload}",
            job["stage"]
        );
    }
}

/// The `ops` spec on the remote backend (`origin`, a bare clone), serial, with `stability` (a
/// `measurement` line, or `""`), `hyps` and `max_iterations`, written to `<work>/ops.yaml`;
/// returns its path.
fn remote_spec(
    work: &std::path::Path,
    origin: &std::path::Path,
    stability: &str,
    hyps: &str,
    max_iterations: u32,
) -> String {
    let spec = format!(
        "name: ops\ndescription: fewer operations, same result\nmetric:\n  primary: {{ name: ops, direction: minimize }}\n  degenerate_gates: [\"correct == 1\"]\n\
measurement:\n  command: sh measure.sh\n  timeout_seconds: 60\n{stability}  holdout: {{ command: sh measure.sh data/holdout.txt }}\n\
scope:\n  mutable: [src]\n  immutable: [measure.sh, data]\n\
execution: {{ mode: serial, backend: remote, remote: \"{}\" }}\nstopping: {{ max_iterations: {max_iterations} }}\nhypotheses:\n{hyps}",
        origin.display()
    );
    write_spec(work, "ops.yaml", &spec)
}

/// The project, a work dir, and `<work>/origin.git`: a bare clone of it, the remote backend's
/// repository.
fn project_with_bare_origin() -> (tempfile::TempDir, tempfile::TempDir, std::path::PathBuf) {
    let repo = project();
    let work = tempfile::tempdir().unwrap();
    let origin = work.path().join("origin.git");
    git(
        work.path(),
        &[
            "clone",
            "-q",
            "--bare",
            &repo.path().display().to_string(),
            &origin.display().to_string(),
        ],
    );
    (repo, work, origin)
}

// Issue 35 item 7: a spec that names no `execution.runtime` runs its experiments on the `scripted`
// stand-in, and says so: `init` and `run` name the key to set, and an experiment the stand-in
// left unedited is reverted saying why (it read "no change inside scope.mutable remained").
#[test]
fn a_spec_without_a_runtime_says_its_experiments_run_on_the_scripted_stand_in() {
    let repo = project();
    let work = tempfile::tempdir().unwrap();
    let spec = write_spec(
        work.path(),
        "plain.yaml",
        &format!(
            "name: plain\ndescription: fewer operations\n\
metric:\n  primary: {{ name: ops, direction: minimize }}\n\
measurement:\n  command: sh measure.sh\n  timeout_seconds: 60\n\
scope:\n  mutable: [src]\n  immutable: [measure.sh, data]\n\
stopping: {{ max_iterations: 1 }}\n\
hypotheses:\n{}",
            hypothesis(
                "h-direct",
                "Add each value directly",
                "algorithm",
                "high",
                0.6
            )
        ),
    );
    let plan = write_plan(work.path(), &serde_json::json!({"experiments": []}));
    let home = Home::embedded();
    let out = try_init(&home, &plan, &spec, repo.path(), false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("the spec sets no `execution.runtime`")
            && err.contains("claude, codex or opencode"),
        "{err}"
    );
    let run = optimize(&home, &plan, &["run", "--spec", &spec]);
    let said = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{said}");
    assert!(
        said.contains("the spec sets no `execution.runtime`"),
        "{said}"
    );
    let entry = log_entry(&home, "plain", 1);
    let text = serde_json::to_string(&entry).unwrap();
    assert!(
        text.contains("the worker is the `scripted` stand-in"),
        "{entry:#}"
    );
}

/// A spec whose experiments run on Claude Code (`execution.runtime: claude`), one hypothesis.
fn claude_spec(dir: &Path) -> String {
    write_spec(
        dir,
        "faster3.yml",
        &format!(
            "name: faster3\ndescription: fewer operations\n\
metric:\n  primary: {{ name: ops, direction: minimize }}\n\
measurement:\n  command: sh measure.sh\n  timeout_seconds: 60\n\
scope:\n  mutable: [src]\n  immutable: [measure.sh, data]\n\
execution: {{ mode: serial, runtime: claude }}\n\
stopping: {{ max_iterations: 1 }}\n\
hypotheses:\n{}",
            hypothesis(
                "h-direct",
                "Add each value directly",
                "algorithm",
                "high",
                0.6
            )
        ),
    )
}

/// `skillforge optimize ARGS` as a user whose Claude Code is installed but not logged in: an
/// empty `CLAUDE_CONFIG_DIR` and `HOME`, no Anthropic credential variable.
fn optimize_logged_out(
    home: &Home,
    plan: &str,
    user: &Path,
    args: &[&str],
) -> std::process::Output {
    let mut cmd = home.cmd();
    skillforge_tests::logged_out_claude(&mut cmd, user)
        .env("SKILLFORGE_SCRIPTED_EDITS", plan)
        .env_remove("ANTHROPIC_BASE_URL")
        .arg("optimize")
        .args(args)
        .output()
        .expect("run skillforge optimize")
}

// A runtime that cannot run here (Claude Code installed, not logged in; or its model API not
// accepting a connection) is refused before any experiment with the embedded queue, which runs
// the experiments on this machine: `init` exits 3 and writes nothing; `run` and `resume` of a run
// initialised where it could exit 3, queue no experiment and spend no hypothesis.
#[test]
fn a_runtime_that_cannot_run_here_is_refused_before_any_experiment() {
    assert!(
        skillforge_tests::agent_user::on_path("claude"),
        "`claude` is not on PATH: scripts/test installs it"
    );
    let repo = project();
    let work = tempfile::tempdir().unwrap();
    let user = tempfile::tempdir().unwrap();
    let spec = claude_spec(work.path());
    let plan = write_plan(work.path(), &serde_json::json!({"experiments": []}));
    let home = Home::embedded();
    let repo_arg = repo.path().display().to_string();
    let init_args = ["init", "--spec", spec.as_str(), "--repo", repo_arg.as_str()];
    let out = optimize_logged_out(&home, &plan, user.path(), &init_args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("runtime `claude`")
            && err.contains("no Claude credential")
            && err.contains("ANTHROPIC_API_KEY")
            && err.contains("nothing was written"),
        "the problem in words and what to do:\n{err}"
    );
    assert!(
        !home.path().join("optimize/faster3").exists(),
        "nothing written"
    );
    assert!(git(repo.path(), &["branch", "--list", "optimize/*"]).is_empty());
    // A key set and a model API that accepts connections: init goes ahead.
    let api = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let api_url = format!("http://{}", api.local_addr().unwrap());
    let ready = |cmd: &mut std::process::Command| {
        cmd.env("HOME", user.path())
            .env("ANTHROPIC_API_KEY", "sk-test")
            .env("ANTHROPIC_BASE_URL", &api_url);
    };
    let mut cmd = home.cmd();
    ready(&mut cmd);
    let out = cmd
        .env("SKILLFORGE_SCRIPTED_EDITS", &plan)
        .arg("optimize")
        .args(init_args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Then logged out: run and resume refuse before any experiment.
    for verb in ["run", "resume"] {
        let out = optimize_logged_out(&home, &plan, user.path(), &[verb, "--spec", &spec]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{verb}: {err}");
        assert!(
            err.contains(&format!(
                "`optimize {verb}` cannot run the experiments on this machine"
            )) && err.contains("no Claude credential")
                && err.contains("no hypothesis was spent"),
            "{verb}: {err}"
        );
    }
    // A model API that refuses connections is refused the same way, naming the URL.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let mut cmd = home.cmd();
    ready(&mut cmd);
    let out = cmd
        .env("ANTHROPIC_BASE_URL", &closed)
        .args(["optimize", "run", "--spec", &spec])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("does not accept a connection") && err.contains(&closed),
        "{err}"
    );
    let status = call(&home, &plan, "status", &spec);
    assert_eq!(status["experiments"], serde_json::json!([]), "{status:#}");
    assert_eq!(
        status["backlog"][0]["id"], "h-direct",
        "the hypothesis is not spent: {status:#}"
    );
    assert!(
        jobs_of(&home, "experiment").is_empty(),
        "no experiment queued"
    );
    drop(api);
}
