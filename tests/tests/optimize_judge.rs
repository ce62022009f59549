//! The optimize loop with a judge primary, end to end: `skillforge optimize init|run|status` on a
//! small real repository whose measured output is a list of clusters (a real file read by an
//! immutable harness), scored by judge batches dispatched as their own `agent` jobs through the
//! real agent runner with the scripted runtime (its plan's `judge` section scores items by
//! content). Covers the cache (O-32), the degenerate gate before any judge (O-30), the
//! re-dispatch of a batch without feedback (O-33), judge independence (O-11), singleton
//! evaluation, judges that cannot run (O-31), the judge model tier resolved by the runtime
//! profile, and a SIGKILL of the orchestrator in the middle of a judge pass (O-66).

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use skillforge_tests::optimize::{
    call, experiment_log, experiments, init, jobs_of, key, log_entry, read_yaml, report_text,
    spawn_run, spawn_worker, try_init, write_plan, write_spec,
};
use skillforge_tests::{Home, git, wait_for};
use tempfile::TempDir;

const MEASURE_SH: &str = "\
#!/bin/sh
# The immutable harness: one cluster per line of src/clusters.txt (`<id> <topics...>`).
n=0; items=''
while read -r id rest; do
  case \"$id\" in ''|'#'*) continue;; esac
  n=$((n+1))
  [ -n \"$items\" ] && items=\"$items,\"
  items=\"$items{\\\"id\\\": \\\"$id\\\", \\\"content\\\": \\\"$rest\\\"}\"
done < src/clusters.txt
singles=''
while read -r id rest; do
  [ -z \"$id\" ] && continue
  [ -n \"$singles\" ] && singles=\"$singles,\"
  singles=\"$singles{\\\"id\\\": \\\"$id\\\", \\\"content\\\": \\\"$rest\\\"}\"
done < src/singletons.txt
echo \"{\\\"metrics\\\": {\\\"clusters\\\": $n}, \\\"items\\\": [$items], \\\"singletons\\\": [$singles]}\"
";

fn project() -> TempDir {
    let dir = tempfile::tempdir().expect("repo dir");
    let p = dir.path();
    git(p, &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(p.join("src")).unwrap();
    std::fs::write(
        p.join("src/clusters.txt"),
        "c-1 login billing\nc-2 search\nc-3 terse\n",
    )
    .unwrap();
    std::fs::write(p.join("src/notes.txt"), "clustering notes\n").unwrap();
    std::fs::write(p.join("src/singletons.txt"), "s-1 refund\ns-2 weather\n").unwrap();
    std::fs::write(p.join("measure.sh"), MEASURE_SH).unwrap();
    git(p, &["add", "-A"]);
    git(p, &["commit", "-q", "-m", "clusters"]);
    dir
}

fn hypothesis(id: &str, description: &str, benefit: f64) -> String {
    format!(
        "  - id: {id}\n    description: \"{description}\"\n    category: algorithm\n    priority: medium\n    opportunity:\n      workload: src/clusters.txt\n      baseline: CP-1 baseline\n      evidence: reading the clusters\n      expected_benefit: \"{benefit} relative\"\n      confidence: medium\n      cost_and_risk: small edit\n      estimate: {{ benefit: {benefit}, confidence: 1.0 }}\n"
    )
}

/// The spec, and the plan: scripted workers' edits and the scripted judges' scoring.
fn spec_and_plan(dir: &Path, hyps: &str, split_adds: &str) -> (String, String) {
    spec_and_plan_with(dir, hyps, split_adds, "", json!({}))
}

/// As [`spec_and_plan`], with `judge_keys` appended to `metric.judge` (`, model: strong`) and
/// `judge_plan` merged into the plan's `judge` section.
fn spec_and_plan_with(
    dir: &Path,
    hyps: &str,
    split_adds: &str,
    judge_keys: &str,
    judge_plan: Value,
) -> (String, String) {
    let spec = format!(
        "name: topics\n\
description: clusters that each hold one topic\n\
metric:\n  primary: {{ name: quality, direction: maximize, type: judge }}\n  degenerate_gates: [\"clusters >= 2\"]\n  \
judge: {{ rubric: \"Score 1-5: does the cluster hold one topic?\", batch_size: 2, sample_size: 10, sample_seed: 7, score_field: score, cost_per_batch_usd: 0.01, singleton_rubric: \"Should the singleton join a cluster?\", singleton_sample: 5{judge_keys} }}\n\
measurement:\n  command: sh measure.sh\n  timeout_seconds: 60\n\
scope:\n  mutable: [src]\n  immutable: [measure.sh]\n\
execution: {{ mode: serial, runtime: scripted }}\n\
stopping: {{ max_iterations: 3 }}\n\
hypotheses:\n{hyps}"
    );
    let spec = write_spec(dir, "topics.yaml", &spec);
    let mut plan = json!({
        "experiments": [
            {"when": "Reword", "edits": [{"path": "src/notes.txt", "write": "clustering notes, reworded\n"}]},
            {"when": "Merge all", "edits": [{"path": "src/clusters.txt", "write": "c-1 login billing search terse\n"}]},
            {"when": "Split", "edits": [{"path": "src/clusters.txt", "replace": "c-1 login billing\n", "with": format!("c-1 login\nc-4 billing{split_adds}\n")}]}
        ],
        "judge": {
            "field": "score",
            "rules": [
                {"when": "login billing", "score": 2, "reason": "two topics", "feedback": "Unrelated topics merged: split login from billing"},
                {"when": "terse", "score": 3, "reason": "too short to tell"}
            ],
            "default": {"score": 5, "reason": "one topic", "feedback": "holds one topic"},
            "fail_when": "unjudgeable",
            "singleton": {"rules": [{"when": "refund", "fields": {"should_cluster": true, "confidence": 4}}], "default": {"should_cluster": false, "confidence": 5}}
        }
    });
    for (k, v) in judge_plan.as_object().cloned().unwrap_or_default() {
        plan["judge"][k] = v;
    }
    (spec, write_plan(dir, &plan))
}

fn judge_jobs(home: &Home) -> Vec<Value> {
    jobs_of(home, "judge")
}

// O-11, O-30, O-32, O-33, O-34
#[test]
fn judge_batches_are_agent_jobs_with_a_cache_a_gate_first_and_one_redispatch() {
    let repo = project();
    let work = tempfile::tempdir().unwrap();
    let hyps = [
        hypothesis("h-reword", "Reword the notes", 0.9),
        hypothesis("h-merge", "Merge all clusters into one", 0.8),
        hypothesis("h-split", "Split the mixed cluster", 0.5),
    ]
    .concat();
    let (spec, plan) = spec_and_plan(work.path(), &hyps, "");
    let home = Home::embedded();
    let init = init(&home, &plan, &spec, repo.path());
    // baseline: (2 + 5 + 3) / 3, every item scored by a judge job, none by the orchestrator
    let baseline = init["baseline"]["quality"]["aggregate"]
        .as_f64()
        .expect("judged baseline");
    assert!((baseline - 10.0 / 3.0).abs() < 1e-9, "{init}");
    // singleton evaluation: its own judge call, its own metrics
    assert_eq!(
        init["baseline"]["singleton_should_cluster"]["aggregate"].as_f64(),
        Some(0.5),
        "{init}"
    );
    assert_eq!(
        init["baseline"]["singleton_confidence"]["aggregate"].as_f64(),
        Some(4.5),
        "{init}"
    );
    let after_init = judge_jobs(&home);
    let singleton_jobs: Vec<&Value> = after_init
        .iter()
        .filter(|j| key(j).contains(":singletons:"))
        .collect();
    assert_eq!(singleton_jobs.len(), 1, "{after_init:#?}");
    assert!(
        singleton_jobs[0]["payload"]["prompt"]
            .as_str()
            .unwrap()
            .contains("<existing-clusters>")
    );
    // two batches of the three items (+ the singleton batch); the one holding the item judged
    // without feedback went twice (O-33)
    assert_eq!(after_init.len(), 4, "{after_init:#?}");
    let retried: Vec<&Value> = after_init
        .iter()
        .filter(|j| key(j).ends_with(":1"))
        .collect();
    assert_eq!(retried.len(), 1, "exactly one re-dispatch: {after_init:#?}");
    let digest = key(retried[0]).rsplit(':').nth(1).unwrap().to_owned();
    assert_eq!(
        after_init
            .iter()
            .filter(|j| key(j).contains(&digest))
            .count(),
        2,
        "that batch was called exactly twice"
    );
    assert!(
        retried[0]["payload"]["prompt"]
            .as_str()
            .unwrap()
            .contains("terse")
    );

    call(&home, &plan, "run", &spec);
    let status = call(&home, &plan, "status", &spec);
    let outcomes: Vec<(&str, &str)> = status["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["hypothesis_id"].as_str().unwrap(),
                e["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        outcomes[..2],
        [("h-reword", "inconclusive"), ("h-merge", "degenerate")],
        "{status:#}"
    );
    assert_eq!(outcomes[2], ("h-split", "kept"), "{status:#}");
    assert_eq!(
        status["best"]["quality"].as_f64(),
        Some(4.5),
        "(5 + 5 + 3 + 5) / 4: {status:#}"
    );

    let jobs = judge_jobs(&home);
    // O-32: identical output is scored once per run: exp-001's items are all cached, no judge job
    assert!(
        !jobs.iter().any(|j| key(j).contains("exp-001")),
        "{jobs:#?}"
    );
    let e1 = log_entry(&home, "topics", 1);
    assert_eq!(
        (
            e1["judge"]["calls"].as_u64(),
            e1["judge"]["cached"].as_u64()
        ),
        (Some(0), Some(5)),
        "three items and two singletons, all cached: {e1:#}"
    );
    // O-30: a failing gate is degenerate before any judge call
    assert!(
        !jobs.iter().any(|j| key(j).contains("exp-002")),
        "{jobs:#?}"
    );
    assert_eq!(log_entry(&home, "topics", 2)["judge"], Value::Null);
    // exp-003: the reference is cached; only the two new items (one batch) were dispatched
    let e3: Vec<&Value> = jobs.iter().filter(|j| key(j).contains("exp-003")).collect();
    assert_eq!(e3.len(), 1, "{e3:#?}");
    assert!(key(e3[0]).contains(":cand:"), "{}", key(e3[0]));
    let entry = log_entry(&home, "topics", 3);
    let items = entry["judge"]["items"].as_array().unwrap();
    assert_eq!(items.len(), 4);
    assert!(
        items
            .iter()
            .all(|i| i["content_hash"].as_str().is_some_and(|h| h.len() == 64)),
        "{items:#?}"
    );
    let terse = items.iter().find(|i| i["item_id"] == "c-3").unwrap();
    assert_eq!(
        (
            terse["scores"]["score"].as_f64(),
            terse["feedback"].as_str()
        ),
        (Some(3.0), Some("")),
        "the second reply is what is stored"
    );
    // O-34: the worst items with their reasons
    assert_eq!(entry["worst_cases"][0]["id"], "c-3");
    assert_eq!(entry["worst_cases"][0]["reason"], "too short to tell");
    let cache =
        std::fs::read_to_string(home.path().join("optimize/topics/judge-cache.yaml")).unwrap();
    for i in items {
        assert!(
            cache.contains(i["content_hash"].as_str().unwrap()),
            "the cache holds every judged item's hash"
        );
    }
    // O-11: each judge is its own agent job, outside any worktree, seeing only its batch's items
    // and the rubric: no score, reason or feedback of any other call
    assert_eq!(jobs.len(), 5, "{jobs:#?}");
    for j in &jobs {
        assert_eq!(j["kind"], "agent");
        assert!(
            j["payload"]["workdir"].is_null(),
            "a judge never runs in the experiment's worktree: {j:#}"
        );
        let prompt = j["payload"]["prompt"].as_str().unwrap();
        let batch = prompt
            .split_once("<items>")
            .or_else(|| prompt.split_once("<singletons>"))
            .map_or("", |(_, rest)| rest.split("</").next().unwrap_or(""));
        let n_items = batch.matches("\"id\":").count();
        assert!(
            (1..=2).contains(&n_items),
            "one batch of at most batch_size items: {prompt}"
        );
        for leaked in [
            "Unrelated topics merged",
            "holds one topic",
            "too short to tell",
            "\"score\":",
            "two topics",
        ] {
            assert!(
                !prompt.contains(leaked),
                "judge prompt leaks {leaked:?}: {prompt}"
            );
        }
        assert!(
            !prompt.contains("Hypothesis:"),
            "a judge does not see the hypothesis or the experiment: {prompt}"
        );
    }
    let spend = experiment_log(&home, "topics");
    // every judge job is booked once at cost_per_batch_usd (the scripted judge reports no cost):
    // the baseline's four at init (two item batches, one re-dispatch, the singletons) and the
    // candidate's one at run time, as many as the jobs above
    assert!(
        (spend["spend"]["judge_usd"].as_f64().unwrap() - 0.05).abs() < 1e-9,
        "each of the 5 judge calls booked once: {:#}",
        spend["spend"]
    );
    assert_eq!(
        (
            spend["spend"]["judges"]["runs"].as_u64(),
            spend["spend"]["judges"]["runs_without_cost"].as_u64()
        ),
        (Some(5), Some(5)),
        "{:#}",
        spend["spend"]
    );
    assert!(
        git(repo.path(), &["show", "optimize/topics:src/clusters.txt"]).contains("c-4 billing")
    );
}

// O-31
#[test]
fn o31_judges_that_cannot_run_make_the_experiment_error_never_scored_inline() {
    let repo = project();
    let work = tempfile::tempdir().unwrap();
    let (spec, plan) = spec_and_plan(
        work.path(),
        &hypothesis("h-split", "Split the mixed cluster", 0.5),
        " unjudgeable",
    );
    let home = Home::embedded();
    init(&home, &plan, &spec, repo.path());
    call(&home, &plan, "run", &spec);
    let status = call(&home, &plan, "status", &spec);
    let e = &status["experiments"][0];
    assert_eq!(e["outcome"], "error", "{status:#}");
    assert_eq!(
        status["best"]["experiment"],
        Value::Null,
        "best unchanged: {status:#}"
    );
    let entry = log_entry(&home, "topics", 1);
    assert!(
        entry["learnings"]
            .to_string()
            .contains("judges undispatchable")
            || entry["measured"]
                .to_string()
                .contains("judges undispatchable"),
        "{entry:#}"
    );
    assert_eq!(
        entry["comparisons"][0]["candidate"]["snapshot"]["metrics"]["quality"],
        Value::Null,
        "no candidate score at all: {entry:#}"
    );
    assert!(
        entry["judge"].is_null()
            || entry["judge"]["items"]
                .as_array()
                .is_none_or(|i| i.is_empty()),
        "{entry:#}"
    );
    let failed: Vec<Value> = judge_jobs(&home)
        .into_iter()
        .filter(|j| key(j).contains("exp-001:sel:0:cand"))
        .collect();
    assert!(
        !failed.is_empty()
            && failed
                .iter()
                .all(|j| j["state"] == "dead" && j["attempts"] == 3),
        "{failed:#?}"
    );
    let report = report_text(&home, &plan, &spec);
    assert!(
        report.contains("judges undispatchable"),
        "the blocker is reported: {report}"
    );
}

// The judge's model tier (`metric.judge.model`) is resolved by the judge runtime's profile
// (`[models]` of runners/agent/runtimes/scripted.toml) and reaches the runtime: every judge job
// carries the model, and the scripted agent's transcript records the model it was given. An
// unknown tier is refused at init naming the key, the spec file and the profile file.
#[test]
fn the_judge_model_tier_is_resolved_by_the_runtime_profile_and_reaches_the_runtime() {
    let repo = project();
    let work = tempfile::tempdir().unwrap();
    let hyps = hypothesis("h-split", "Split the mixed cluster", 0.5);
    let home = Home::embedded();
    let (bad, plan) = spec_and_plan_with(work.path(), &hyps, "", ", model: huge", json!({}));
    let out = try_init(&home, &plan, &bad, repo.path(), true);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    for needle in [
        "`metric.judge.model`",
        "unknown model tier `huge`",
        "runners/agent/runtimes/scripted.toml",
        "cheap, standard, strong",
        "topics.yaml",
    ] {
        assert!(stderr.contains(needle), "{needle:?} missing: {stderr}");
    }
    assert!(
        !home.path().join("optimize/topics").exists(),
        "nothing written for a refused spec"
    );

    let (spec, plan) = spec_and_plan_with(work.path(), &hyps, "", ", model: strong", json!({}));
    init(&home, &plan, &spec, repo.path());
    call(&home, &plan, "run", &spec);
    let jobs = judge_jobs(&home);
    assert!(
        jobs.len() >= 3,
        "baseline, singleton and candidate judges: {jobs:#?}"
    );
    for j in &jobs {
        assert_eq!(
            j["payload"]["model"], "scripted-strong",
            "the tier resolved by the profile: {j:#}"
        );
        assert_eq!(
            j["outcome"]["detail"]["model"], "scripted-strong",
            "the runtime was given it: {j:#}"
        );
    }
    // the default tier is `cheap` (another repository: the first run owns its optimization branch)
    let repo = project();
    let home = Home::embedded();
    let (spec, plan) = spec_and_plan(work.path(), &hyps, "");
    init(&home, &plan, &spec, repo.path());
    let jobs = judge_jobs(&home);
    assert!(
        !jobs.is_empty()
            && jobs
                .iter()
                .all(|j| j["outcome"]["detail"]["model"] == "scripted-cheap"),
        "{jobs:#?}"
    );
}

// O-66, O-32: SIGKILL of the orchestrator while a judge batch job runs (on a separate worker),
// then `resume`: the batch that landed meanwhile is read back, never dispatched or booked again,
// and the run ends as an uninterrupted one does (no lost or repeated experiment)
#[test]
fn o66_sigkill_in_the_middle_of_a_judge_pass_then_resume_scores_the_batch_once() {
    let repo = project();
    let work = tempfile::tempdir().unwrap();
    let hyps = [
        hypothesis("h-reword", "Reword the notes", 0.9),
        hypothesis("h-merge", "Merge all clusters into one", 0.8),
        hypothesis("h-split", "Split the mixed cluster", 0.5),
    ]
    .concat();
    // only exp-003's new item (`c-4`) makes a slow judge batch
    let (spec, plan) = spec_and_plan_with(
        work.path(),
        &hyps,
        "",
        "",
        json!({"sleep_when": "\"c-4\"", "sleep_ms": 4000}),
    );
    let home = Home::embedded();
    let _worker = spawn_worker(&home, &plan, "fleet-1");
    init(&home, &plan, &spec, repo.path());
    let mut child = spawn_run(&home, &plan, &spec);
    let running = wait_for(
        Duration::from_secs(180),
        "exp-003's judge batch running",
        || {
            judge_jobs(&home)
                .into_iter()
                .find(|j| key(j).contains("exp-003") && j["state"] == "running")
        },
    );
    let _ = child.0.kill();
    let _ = child.0.wait();
    // the batch lands while no orchestrator runs
    let id = running["id"].as_str().unwrap().to_owned();
    wait_for(Duration::from_secs(60), "the judge batch to finish", || {
        (home.json(&["jobs", "show", &id])["state"] == "succeeded").then_some(())
    });

    call(&home, &plan, "resume", &spec);
    let status = call(&home, &plan, "status", &spec);
    assert_eq!(
        experiments(&status),
        [
            (1, "h-reword", "inconclusive"),
            (2, "h-merge", "degenerate"),
            (3, "h-split", "kept")
        ],
        "{status:#}"
    );
    assert_eq!(
        status["run_state"]["experiments_run"].as_u64(),
        Some(3),
        "no experiment number used twice: {status:#}"
    );
    assert_eq!(status["best"]["quality"].as_f64(), Some(4.5), "{status:#}");
    let jobs = judge_jobs(&home);
    let e3: Vec<&Value> = jobs.iter().filter(|j| key(j).contains("exp-003")).collect();
    assert_eq!(
        e3.len(),
        1,
        "the batch is one job, never dispatched again: {e3:#?}"
    );
    assert_eq!(
        (e3[0]["id"].as_str(), e3[0]["attempts"].as_u64()),
        (Some(id.as_str()), Some(1)),
        "and ran once: {e3:#?}"
    );
    assert_eq!(
        jobs.len(),
        5,
        "as many judge jobs as an uninterrupted run: {jobs:#?}"
    );
    let entry = log_entry(&home, "topics", 3);
    assert_eq!(entry["judge"]["calls"].as_u64(), Some(1), "{entry:#}");
    let log = experiment_log(&home, "topics");
    assert_eq!(
        log["experiments"].as_array().map(Vec::len),
        Some(3),
        "{log:#}"
    );
    // the baseline's four judge calls and the interrupted batch, booked once
    assert!(
        (log["spend"]["judge_usd"].as_f64().unwrap() - 0.05).abs() < 1e-9,
        "the batch is booked once: {:#}",
        log["spend"]
    );
    assert_eq!(
        log["spend"]["judges"]["runs"].as_u64(),
        Some(jobs.len() as u64),
        "one booking per judge job: {:#}",
        log["spend"]
    );
    let cache = read_yaml(&home.path().join("optimize/topics/judge-cache.yaml"));
    for i in entry["judge"]["items"].as_array().unwrap() {
        assert!(
            cache["items"]
                .get(i["content_hash"].as_str().unwrap())
                .is_some(),
            "every judged item is in the cache: {cache:#}"
        );
    }
}
