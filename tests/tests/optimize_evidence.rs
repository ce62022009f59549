//! The optimize loop's evidence rules end to end through the binary (issue 34 items 4, 5, 13):
//! the wall-clock deadline wraps the loop up while workers are still out, also on resume (O-58);
//! a locating measurement that cannot be taken stops the run before any implementation (O-14); a
//! worker whose runtime answers at capacity or rate-limited is queued again, never an `error`
//! (O-20); and the measured noise floor with each keep's effect and interval in `status`/`report`.
//!
//! Real parts: a real repository whose metric is a real measured property (the operation count a
//! counting script reports), the scripted agent making real edits through the real `agent`
//! runner (held back on a gate file, or ending on a transcript API error), real `skillforge
//! worker` processes on a real Redis, and the real embedded queue.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use skillforge_tests::optimize::{
    call, init, jobs_of, log_entry, measure_branch, optimize, outcomes, report_text, spawn_run,
    spawn_workers, try_init, write_plan, write_spec,
};
use skillforge_tests::{Home, git, wait_for};
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

const MEASURE_SH: &str = "\
#!/bin/sh
out=$(sh src/count.sh data/input.txt) || exit 1
result=$(echo \"$out\" | sed -n 's/.*result=\\([0-9]*\\).*/\\1/p')
ops=$(echo \"$out\" | sed -n 's/.*ops=\\([0-9]*\\).*/\\1/p')
correct=0
[ \"$result\" = 26 ] && correct=1
echo \"{\\\"metrics\\\": {\\\"ops\\\": $ops, \\\"correct\\\": $correct}}\"
";

/// The edit that adds each value directly (4 operations on the input instead of 26).
const DIRECT: (&str, &str) = (
    "  i=0\n  while [ $i -lt $v ]; do total=$((total+1)); i=$((i+1)); OPS=$((OPS+1)); done\n",
    "  total=$((total+v)); OPS=$((OPS+1))\n",
);

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

/// A hypothesis with a known benefit (`Some`) or an unknown one resolved by `locating`.
fn hypothesis(id: &str, description: &str, benefit: Option<f64>, locating: Option<&str>) -> String {
    let estimate = benefit.map_or(String::new(), |b| {
        format!("      estimate: {{ benefit: {b}, confidence: 1.0 }}\n")
    });
    let expected = benefit.map_or(
        "unknown; cheapest resolve: profile the loop".to_owned(),
        |b| format!("{b} relative"),
    );
    let locating = locating.map_or(String::new(), |c| {
        format!("    locating: {{ command: \"{c}\" }}\n")
    });
    format!(
        "  - id: {id}\n    description: \"{description}\"\n    category: algorithm\n    opportunity:\n      workload: data/input.txt\n      baseline: CP-1 baseline\n      evidence: reading src/\n      expected_benefit: \"{expected}\"\n      confidence: medium\n      cost_and_risk: small edit\n{estimate}{locating}"
    )
}

/// Writes the spec to `<dir>/ops.yaml`: `execution` and `stopping` as given (flow maps' inner
/// text), `extra` lines inside `measurement`, then the hypotheses.
fn spec(dir: &Path, execution: &str, stopping: &str, extra: &str, hyps: &[String]) -> String {
    let text = format!(
        "name: ops\n\
description: reduce the operation count of the counting script without changing its result\n\
metric:\n  primary: {{ name: ops, direction: minimize }}\n  degenerate_gates: [\"correct == 1\"]\n\
measurement:\n  command: sh measure.sh\n  timeout_seconds: 60\n  stability: {{ mode: ladder, repeat_count: 2 }}\n{extra}\
scope:\n  mutable: [src]\n  immutable: [measure.sh, data]\n\
execution: {{ {execution} }}\n\
stopping: {{ {stopping} }}\n\
hypotheses:\n{}",
        hyps.concat()
    );
    write_spec(dir, "ops.yaml", &text)
}

/// The deadline scenario's spec and plan: exp-001's worker is held back on `gate` (never
/// created while the run lives); exp-002's worker edits at once.
fn deadline_setup(work: &Path, max_wall_hours: &str) -> (String, String, std::path::PathBuf) {
    let gate = work.join("gate");
    let plan = write_plan(
        work,
        &serde_json::json!({"experiments": [
            {"when": "held back", "wait_for": gate.display().to_string(), "edits": [{"path": "src/count.sh", "replace": "OPS=0\n", "with": "OPS=0 # slow\n"}]},
            {"when": "directly", "edits": [{"path": "src/count.sh", "replace": DIRECT.0, "with": DIRECT.1}]}
        ]}),
    );
    let hyps = [
        hypothesis(
            "h-slow",
            "A change whose worker is held back",
            Some(0.9),
            None,
        ),
        hypothesis(
            "h-direct",
            "Add each value directly instead of counting up to it",
            Some(0.6),
            None,
        ),
    ];
    let spec = spec(
        work,
        "mode: parallel, max_concurrent: 2",
        &format!("max_iterations: 2, max_wall_hours: {max_wall_hours}"),
        "",
        &hyps,
    );
    (spec, plan, gate)
}

/// What a deadline wrap-up leaves, live or on resume: exp-001 not waited for (`timeout`), exp-002
/// arrived and persisted as a patch but never measured (`inconclusive`), nothing merged.
fn assert_wrapped_up_at_deadline(home: &Home, repo: &Path, plan: &str, spec: &str, gate: &Path) {
    assert!(!gate.exists(), "the held-back worker was never released");
    let status = call(home, plan, "status", spec);
    assert_eq!(
        status["run_state"]["stop_reason"]["reason"], "max_wall_hours",
        "{status:#}"
    );
    assert_eq!(
        outcomes(&status),
        vec![(1, "timeout".to_owned()), (2, "inconclusive".to_owned())],
        "{status:#}\n{}",
        home.logs()
    );
    assert_eq!(
        status["experiments"][1]["samples"],
        Value::Null,
        "exp-002 was never measured: {status:#}"
    );
    // only the baseline's measurements ran: no sample of either experiment
    let measurements = jobs_of(home, "measurement");
    assert_eq!(
        measurements.len(),
        1,
        "the baseline only: {measurements:#?}"
    );
    // no merge: the optimization branch is where it started
    assert_eq!(
        git(repo, &["rev-parse", "optimize/ops"]).trim(),
        git(repo, &["rev-parse", "main"]).trim(),
        "nothing merged after the deadline"
    );
    // what arrived is persisted: exp-002's change as a patch in the state root
    let patch = std::fs::read_to_string(home.path().join("optimize/ops/patches/exp-002.patch"))
        .expect("exp-002's change persisted");
    assert!(
        patch.contains("+  total=$((total+v)); OPS=$((OPS+1))"),
        "{patch}"
    );
    // exp-001's worker was not waited for: its job never succeeded (it was cancelled)
    let slow: Vec<Value> = jobs_of(home, "experiment")
        .into_iter()
        .filter(|j| {
            j["idempotency_key"]
                .as_str()
                .is_some_and(|k| k.ends_with("exp-001:worker"))
        })
        .collect();
    assert_eq!(slow.len(), 1, "{slow:#?}");
    assert_ne!(slow[0]["state"], "succeeded", "{slow:#?}");
    let report = report_text(home, plan, spec);
    for want in [
        "max_wall_hours since phase 3 started reached",
        "had not returned when stopping.max_wall_hours passed",
        "its change is persisted, not measured, not merged",
    ] {
        assert!(report.contains(want), "report lacks {want:?}:\n{report}");
    }
}

// O-58: the wall-clock deadline passes while both workers are out (one held back, one arrived):
// the loop wraps up without waiting for the held-back worker (its job is cancelled), persists the
// arrived change without measuring it, merges nothing, and stops with `max_wall_hours`
#[test]
fn o58_the_deadline_passes_with_workers_out_and_the_loop_wraps_up_without_waiting() {
    let redis = skillforge_tests::RedisServer::start();
    let repo = project();
    let work = tempfile::tempdir().unwrap();
    // 36 s: time to dispatch both and for the quick worker to finish; the held-back one waits
    // for a gate nobody creates (its own bound is 120 s, so a loop that waited would see it fail)
    let (spec, plan, gate) = deadline_setup(work.path(), "0.01");
    let home = Home::redis(&redis.url());
    let _workers = spawn_workers(&home, &plan, &["w1", "w2"]);
    init(&home, &plan, &spec, repo.path());
    let summary = call(&home, &plan, "run", &spec);
    assert_eq!(
        summary["stop_reason"]["reason"], "max_wall_hours",
        "{summary:#}"
    );
    assert_wrapped_up_at_deadline(&home, repo.path(), &plan, &spec, &gate);
}

// O-58 on resume: the orchestrator dies while both workers are out; it is resumed after the
// deadline: the arrived result is persisted, the outstanding worker is not waited for, nothing is
// measured or merged (no wake extends the deadline)
#[test]
fn o58_a_resume_after_the_deadline_persists_what_arrived_and_waits_for_nothing() {
    let redis = skillforge_tests::RedisServer::start();
    let repo = project();
    let work = tempfile::tempdir().unwrap();
    let (spec, plan, gate) = deadline_setup(work.path(), "1");
    let home = Home::redis(&redis.url());
    let _workers = spawn_workers(&home, &plan, &["w1", "w2"]);
    init(&home, &plan, &spec, repo.path());
    let mut child = spawn_run(&home, &plan, &spec);
    // both dispatched, and exp-002's worker has finished: then the orchestrator dies
    wait_for(
        Duration::from_secs(120),
        "exp-002's worker finished",
        || {
            jobs_of(&home, "experiment")
                .iter()
                .any(|j| {
                    j["idempotency_key"]
                        .as_str()
                        .is_some_and(|k| k.ends_with("exp-002:worker"))
                        && j["state"] == "succeeded"
                })
                .then_some(())
        },
    );
    let _ = child.0.kill();
    let _ = child.0.wait();
    // the run started two hours ago as far as its own record says (the crash lasted that long)
    let log_path = home.path().join("optimize/ops/experiment-log.yaml");
    let text = std::fs::read_to_string(&log_path).unwrap();
    let started: i64 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("phase3_started_at: "))
        .expect("phase 3 started")
        .trim()
        .parse()
        .unwrap();
    assert!(
        text.contains("pending_waits:\n  - experiment: 1"),
        "killed with pending waits:\n{text}"
    );
    std::fs::write(
        &log_path,
        text.replace(
            &format!("phase3_started_at: {started}"),
            &format!("phase3_started_at: {}", started - 7200),
        ),
    )
    .unwrap();
    call(&home, &plan, "resume", &spec);
    assert_wrapped_up_at_deadline(&home, repo.path(), &plan, &spec, &gate);
    let workers = jobs_of(&home, "experiment");
    assert_eq!(
        workers.len(),
        2,
        "nothing was dispatched again after the deadline: {workers:#?}"
    );
}

// O-14: a hypothesis whose benefit is unknown has a locating measurement; it cannot be taken (the
// profiler is missing): the run wraps up naming it (exit 3) and never implements anything
#[test]
fn o14_a_locating_measurement_that_cannot_be_taken_wraps_up_naming_it_and_never_implements() {
    let repo = project();
    let work = tempfile::tempdir().unwrap();
    let plan = write_plan(
        work.path(),
        &serde_json::json!({"experiments": [
            {"when": "directly", "edits": [{"path": "src/count.sh", "replace": DIRECT.0, "with": DIRECT.1}]}
        ]}),
    );
    let hyps = [
        hypothesis(
            "h-hot",
            "Add each value directly where the profile says the time goes",
            None,
            Some("sh profile-loop.sh"),
        ),
        hypothesis(
            "h-direct",
            "Add each value directly instead of counting up to it",
            Some(0.6),
            None,
        ),
    ];
    let spec = spec(work.path(), "mode: serial", "max_iterations: 4", "", &hyps);
    let home = Home::embedded();
    init(&home, &plan, &spec, repo.path());
    let out = optimize(&home, &plan, &["run", "--spec", &spec]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(3),
        "a blocker is an environment stop: {stderr}"
    );
    assert!(
        stderr.contains(
            "the locating measurement for h-hot (`sh profile-loop.sh`) could not be taken"
        ) && stderr.contains("implementing without it is not allowed"),
        "{stderr}"
    );
    let status = call(&home, &plan, "status", &spec);
    assert_eq!(
        status["run_state"]["stop_reason"]["reason"], "blocked",
        "{status:#}"
    );
    assert_eq!(
        status["experiments"],
        serde_json::json!([]),
        "nothing was implemented: {status:#}"
    );
    assert!(
        jobs_of(&home, "experiment").is_empty(),
        "no worker was dispatched"
    );
    assert_eq!(
        jobs_of(&home, "locating").len(),
        1,
        "the locating measurement was tried"
    );
    assert!(
        !home.path().join("optimize/ops/briefs").exists(),
        "no brief was written"
    );
    assert_eq!(
        git(repo.path(), &["rev-parse", "optimize/ops"]).trim(),
        git(repo.path(), &["rev-parse", "main"]).trim()
    );
    let report = std::fs::read_to_string(home.path().join("optimize/ops/report.md")).unwrap();
    assert!(
        report.contains("blocked: the locating measurement for h-hot"),
        "{report}"
    );
}

// O-20: the worker's runtime answers at capacity (529 overloaded) past the agent runner's own
// retries and the job's attempts: that is backpressure: the job is queued again and the
// experiment completes (kept), never recorded as `error`
#[test]
fn o20_a_worker_at_capacity_is_queued_again_and_completes_never_an_error() {
    let repo = project();
    let work = tempfile::tempdir().unwrap();
    let over = work.path().join("overloaded.tally");
    // nine runs: the job's three attempts, each the first run and the runner's two retries
    let plan = write_plan(
        work.path(),
        &serde_json::json!({"experiments": [
            {"when": "directly", "api_error": {"status": 529, "message": "API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}", "times": 9, "tally": over.display().to_string()},
             "edits": [{"path": "src/count.sh", "replace": DIRECT.0, "with": DIRECT.1}]}
        ]}),
    );
    let hyps = [hypothesis(
        "h-direct",
        "Add each value directly instead of counting up to it",
        Some(0.6),
        None,
    )];
    let spec = spec(work.path(), "mode: serial", "max_iterations: 1", "", &hyps);
    let home = Home::embedded();
    init(&home, &plan, &spec, repo.path());
    call(&home, &plan, "run", &spec);
    let status = call(&home, &plan, "status", &spec);
    assert_eq!(
        outcomes(&status),
        vec![(1, "kept".to_owned())],
        "a capacity error is never an experiment error: {status:#}\n{}",
        home.logs()
    );
    assert_eq!(
        std::fs::read_to_string(&over).unwrap().lines().count(),
        9,
        "the API error was met nine times"
    );
    let report = report_text(&home, &plan, &spec);
    assert!(report.contains("- exp-001: the worker's runtime answered at capacity (overloaded); queued again in 2s (backpressure 1, not a failure)"), "{report}");
    // one worker job, run again in place (its attempt history kept)
    let workers = jobs_of(&home, "experiment");
    assert_eq!(workers.len(), 1, "{workers:#?}");
    assert_eq!(
        measured(repo.path()),
        4,
        "the kept change is on the optimization branch"
    );
}

/// The harness's `ops` on a fresh clone of the optimization branch.
fn measured(repo: &Path) -> u64 {
    measure_branch(repo, "optimize/ops")["metrics"]["ops"]
        .as_u64()
        .unwrap()
}

// Issue 34 item 13: with `measurement.noise_floor_samples`, init measures the unchanged baseline
// again that many times; `status` (text and JSON) and the report show the noise floor and the
// keep's effect with its 95% interval against it. Without the key neither says anything about it.
#[test]
fn a_measured_noise_floor_and_each_keeps_effect_with_its_interval_in_status_and_report() {
    for noise in [true, false] {
        let repo = project();
        let work = tempfile::tempdir().unwrap();
        let plan = write_plan(
            work.path(),
            &serde_json::json!({"experiments": [
                {"when": "directly", "edits": [{"path": "src/count.sh", "replace": DIRECT.0, "with": DIRECT.1}]}
            ]}),
        );
        let hyps = [hypothesis(
            "h-direct",
            "Add each value directly instead of counting up to it",
            Some(0.6),
            None,
        )];
        let extra = if noise {
            "  noise_floor_samples: 3\n"
        } else {
            ""
        };
        let spec = spec(
            work.path(),
            "mode: serial",
            "max_iterations: 1",
            extra,
            &hyps,
        );
        let home = Home::embedded();
        init(&home, &plan, &spec, repo.path());
        call(&home, &plan, "run", &spec);
        let status = call(&home, &plan, "status", &spec);
        assert_eq!(
            outcomes(&status),
            vec![(1, "kept".to_owned())],
            "{status:#}"
        );
        let text =
            String::from_utf8(optimize(&home, &plan, &["status", "--spec", &spec]).stdout).unwrap();
        let report = report_text(&home, &plan, &spec);
        let measurements = jobs_of(&home, "measurement").len();
        if !noise {
            assert_eq!(status.get("noise_floor"), None, "{status:#}");
            assert_eq!(status["experiments"][0].get("effect"), None, "{status:#}");
            assert!(
                !text.contains("noise floor")
                    && !report.contains("Measurement noise")
                    && !report.contains("95% interval"),
                "{text}\n{report}"
            );
            assert_eq!(measurements, 1 + 4, "the baseline and two pairs");
            continue;
        }
        assert_eq!(
            measurements,
            1 + 3 + 4,
            "the baseline, three repeated baseline measurements and two pairs"
        );
        assert_eq!(
            status["noise_floor"],
            serde_json::json!({"metric": "ops", "samples": [26.0, 26.0, 26.0], "sd": 0.0, "floor": 0.0}),
            "{status:#}"
        );
        assert_eq!(
            status["experiments"][0]["effect"],
            serde_json::json!({"pairs": 2, "effect": -22.0, "relative": -22.0 / 26.0, "interval": [-22.0, -22.0], "vs_floor": "beyond"}),
            "{status:#}"
        );
        let floor = "noise floor ±0 ops (sd 0 over 3 repeated baseline measurements, 95%)";
        let effect =
            "effect -22 ops (-84.6%), 95% interval -22 to -22 over 2 pairs: beyond the noise floor";
        assert!(text.contains(floor) && text.contains(effect), "{text}");
        assert!(
            report.contains(&format!("Measurement noise: {floor}"))
                && report.contains(&format!("- {effect}")),
            "{report}"
        );
        assert!(!report.contains("p-value"), "{report}");
    }
}

// Issue 34 item 13: a noise floor from fewer than two measurements is refused at init, naming
// the key, and nothing is created
#[test]
fn a_noise_floor_of_one_measurement_is_refused_naming_the_key() {
    let repo = project();
    let work = tempfile::tempdir().unwrap();
    let plan = write_plan(work.path(), &serde_json::json!({"experiments": []}));
    let spec = spec(
        work.path(),
        "mode: serial",
        "max_iterations: 1",
        "  noise_floor_samples: 1\n",
        &[hypothesis(
            "h-direct",
            "Add each value directly",
            Some(0.6),
            None,
        )],
    );
    let home = Home::embedded();
    let out = try_init(&home, &plan, &spec, repo.path(), false);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("measurement.noise_floor_samples") && stderr.contains("must be 2 to 100"),
        "{stderr}"
    );
    assert!(
        !home.path().join("optimize/ops").exists(),
        "nothing was created"
    );
    assert!(
        !git(repo.path(), &["branch", "--list", "optimize/ops"]).contains("optimize/ops"),
        "no branch was created"
    );
}

/// A one-experiment serial run of `edit` (replace, with) under `stability` and `stopping`;
/// returns the home (kept alive by the caller) and the status JSON.
fn one_experiment(
    work: &Path,
    repo: &Path,
    edit: (&str, &str),
    stability: &str,
    stopping: &str,
) -> (Home, Value) {
    let plan = write_plan(
        work,
        &serde_json::json!({"experiments": [
            {"when": "directly", "edits": [{"path": "src/count.sh", "replace": edit.0, "with": edit.1}]}
        ]}),
    );
    let hyps = [hypothesis(
        "h-direct",
        "Add each value directly instead of counting up to it",
        Some(0.6),
        None,
    )];
    let spec = spec(work, "mode: serial", stopping, "", &hyps);
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        "stability: { mode: ladder, repeat_count: 2 }",
        &format!("stability: {stability}"),
    );
    std::fs::write(&spec, text).unwrap();
    let home = Home::embedded();
    init(&home, &plan, &spec, repo);
    call(&home, &plan, "run", &spec);
    let status = call(&home, &plan, "status", &spec);
    (home, status)
}

// Issue 34 item 10, end to end: `stability.mode: pace` keeps a change only once the betting
// e-process over its pairs commits: every pair of the direct edit is a win (26 → 4 operations),
// so the loop samples pair after pair until the eighth (wealth 1.5⁸ = 25.6 ≥ 20) and keeps it;
// off (`ladder`) decides on two pairs and records no PACE
#[test]
fn optimize_pace_keeps_once_the_e_process_commits() {
    let repo = project();
    let work = tempfile::tempdir().unwrap();
    let (home, status) = one_experiment(
        work.path(),
        repo.path(),
        DIRECT,
        "{ mode: pace }",
        "max_iterations: 1",
    );
    assert_eq!(
        outcomes(&status),
        vec![(1, "kept".to_owned())],
        "{status:#}"
    );
    assert_eq!(
        jobs_of(&home, "measurement").len(),
        1 + 2 * 8,
        "the baseline and eight pairs"
    );
    let entry = log_entry(&home, "ops", 1);
    let pace = &entry["comparisons"][0]["decision"]["pace"];
    assert_eq!(
        (
            pace["verdict"].as_str(),
            pace["pairs"].as_u64(),
            pace["wins"].as_u64()
        ),
        (Some("commit"), Some(8), Some(8)),
        "{entry:#}"
    );
    assert_eq!(measured(repo.path()), 4, "the kept change is merged");
    // off (ladder): two pairs decide, and no PACE is recorded
    let repo = project();
    let work = tempfile::tempdir().unwrap();
    let (home, status) = one_experiment(
        work.path(),
        repo.path(),
        DIRECT,
        "{ mode: ladder, repeat_count: 2 }",
        "max_iterations: 1",
    );
    assert_eq!(
        outcomes(&status),
        vec![(1, "kept".to_owned())],
        "{status:#}"
    );
    assert_eq!(jobs_of(&home, "measurement").len(), 1 + 2 * 2);
    let entry = log_entry(&home, "ops", 1);
    assert!(
        entry["comparisons"][0]["decision"].get("pace").is_none(),
        "{entry:#}"
    );
}

// Issue 34 item 10: PACE holds a change that does not move the metric: each pair is a tie (no
// bet), so it never commits; the loop samples until the wall-clock deadline wraps it up and
// nothing is kept or merged. A change PACE holds is never kept on its pairs so far.
#[test]
fn optimize_pace_holds_a_change_within_noise_until_the_run_ends() {
    let repo = project();
    let work = tempfile::tempdir().unwrap();
    let (home, status) = one_experiment(
        work.path(),
        repo.path(),
        ("OPS=0\n", "OPS=0 # same work\n"),
        "{ mode: pace }",
        // about 3.6 s of sampling ties
        "max_iterations: 1, max_wall_hours: 0.001",
    );
    let (n, outcome) = outcomes(&status).remove(0);
    assert_eq!(n, 1);
    assert_ne!(outcome, "kept", "{status:#}");
    let entry = log_entry(&home, "ops", 1);
    let pace = &entry["comparisons"][0]["decision"]["pace"];
    assert_eq!(pace["verdict"], "continue", "{entry:#}");
    assert_eq!(pace["pairs"], 0, "ties are no bet: {entry:#}");
    assert!(pace["ties"].as_u64().unwrap() >= 1, "{entry:#}");
    assert_eq!(measured(repo.path()), 26, "nothing merged");
}
