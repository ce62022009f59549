//! Evaluator profiles end to end through the built binary (issue 5 item 5; seed "Evaluator
//! profiles and structured failures"; rule S-101): `review evaluate` runs artifact checks first,
//! render adapters second, the LLM judge (scripted runtime, as an engine `agent` job) last; the
//! structured failure packet reaches the training package and `optimizer distill` turns its
//! optimizer hint into guidance.

use serde_json::Value;
use skillforge_contract::validate_training_package_json;
use skillforge_tests::{Home, add_template, ok, path_arg};

const TEMPLATE: &str = "---\nid: notes\nname: Notes\ndescription: Writes release notes\nkind: agent-template\nversion: 1\n\
capabilities: [ask]\nruntime_compatibility: [codex, claude]\ntags: [docs]\ninputs: [diff]\noutputs: [notes]\n---\n# Notes\nDescribe the change.\n";

const HINT: &str = "Include these sections in every output: `## Testing`";

const METADATA: &str = r###"{"evaluator_id":"release_notes_v1","judge_runtime":"scripted",
"judge_prompt_templates":{"generic":"Judge the release notes for a maintainer."},"judge_prompt_version":"rn-1",
"checks":[{"id":"required_sections","type":"artifact_contract","required":true,
           "config":{"required_sections":["## Summary","## Testing"],"max_bytes":100000}},
          {"id":"render_smoke","type":"playwright","when":"checks_pass",
           "config":{"tool":"skillforge-no-such-render-tool","command":["true"]}}]}"###;

/// A home with template `notes` and ranked run `r1` (2 options per item) whose metadata is
/// `metadata`; item `i1` has option `a` without a `## Testing` section and a passing option `b`.
fn setup(metadata: &str) -> Home {
    let home = Home::embedded();
    add_template(&home, TEMPLATE, "owner/repo");
    let input = home.path().join("in");
    ok(
        &home,
        &[
            "review",
            "create",
            "--template",
            "notes",
            "--repo",
            "owner/repo",
            "--run",
            "r1",
            "--mode",
            "explore",
            "--options",
            "2",
            "--metadata-json",
            metadata,
        ],
    );
    std::fs::write(
        input.join("a.md"),
        "# Release notes\n## Summary\nAdds the evaluator.\n",
    )
    .unwrap();
    std::fs::write(
        input.join("b.md"),
        "# Release notes\n## Summary\nAdds the evaluator.\n## Testing\nRan the suite.\n",
    )
    .unwrap();
    ok(
        &home,
        &[
            "review",
            "item",
            "add",
            "--run",
            "r1",
            "--item",
            "i1",
            "--title",
            "Notes for the evaluator change",
            "--option",
            &format!("a={}", path_arg(&input.join("a.md"))),
            "--option",
            &format!("b={}", path_arg(&input.join("b.md"))),
        ],
    );
    home
}

fn stage<'a>(score: &'a Value, name: &str) -> &'a Value {
    score["stage_status"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == name)
        .unwrap_or_else(|| panic!("stage {name}: {score}"))
}

#[test]
fn s101_failed_required_check_skips_the_judge_and_its_packet_reaches_the_package_and_distill() {
    let home = setup(METADATA);
    let report = home.json(&["review", "evaluate", "--run", "r1"]);
    assert_eq!(report["profile_id"], "release_notes_v1", "{report}");
    assert_eq!(
        report["evaluations"].as_array().unwrap().len(),
        2,
        "{report}"
    );

    // The training package carries one score per option in the item's metadata.
    let training = home.path().join("training.json");
    ok(
        &home,
        &["export", "--run", "r1", "--output", path_arg(&training)],
    );
    let bytes = std::fs::read_to_string(&training).unwrap();
    validate_training_package_json(&bytes)
        .expect("the strict external-optimizer rules accept the export");
    let package: Value = serde_json::from_str(&bytes).unwrap();
    assert_eq!(
        package["evaluator_profile"]["profile_id"],
        "release_notes_v1"
    );
    let scores = package["items"][0]["metadata"]["evaluator_scores"]
        .as_array()
        .expect("evaluator_scores")
        .clone();
    assert_eq!(scores.len(), 2);
    let (a, b) = (&scores[0], &scores[1]);
    assert_eq!(a["metadata"]["option"], "a");
    assert_eq!(b["metadata"]["option"], "b");

    // Option a: the required check failed, so render and judge never ran; the packet says why.
    let order: Vec<&str> = a["stage_status"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["artifact_checks", "render", "judge"]);
    assert_eq!(stage(a, "artifact_checks")["status"], "failed");
    assert_eq!(stage(a, "render")["status"], "skipped");
    assert_eq!(stage(a, "judge")["status"], "skipped");
    assert!(
        stage(a, "judge")["details"]["reason"]
            .as_str()
            .unwrap()
            .contains("`required_sections`"),
        "{a}"
    );
    assert_eq!(a["contract_status"], "failed");
    assert_eq!(a["hard"], 0.0);
    assert!(
        a.get("soft").is_none() && a.get("judge_evaluator_id").is_none(),
        "no judge, no judge score: {a}"
    );
    let failure = &a["failure"];
    assert_eq!(failure["primary_reason"], "required_check_failed");
    assert!(
        failure["optimizer_hint"]
            .as_str()
            .unwrap()
            .starts_with(HINT),
        "{failure}"
    );
    assert_eq!(failure["failed_checks"][0]["check"], "required_sections");
    assert_eq!(
        failure["failed_checks"][0]["evidence"][0],
        "missing section `## Testing`"
    );
    assert_eq!(failure["stage_status"], a["stage_status"]);

    // Option b: checks passed, the render tool is absent (skipped with a reason, not a pass), and
    // the scripted judge ran as an agent job whose verdict is the one recorded.
    assert_eq!(stage(b, "artifact_checks")["status"], "passed");
    assert_eq!(stage(b, "render")["status"], "skipped");
    let render_reason = stage(b, "render")["details"]["checks"][0]["reason"]
        .as_str()
        .unwrap();
    assert!(
        render_reason.contains("not found on PATH"),
        "{render_reason}"
    );
    assert_eq!(b["contract_status"], "passed");
    assert_eq!(b["hard"], 1.0);
    let judge = stage(b, "judge");
    assert_eq!(b["judge_evaluator_id"], "scripted");
    assert_eq!(b["judge_prompt_version"], "rn-1");
    let verdict = judge["details"]["verdict"].as_str().unwrap();
    let (status, soft) = match verdict {
        "a" => ("passed", 1.0),
        "b" => ("failed", 0.0),
        "tie" => ("tie", 0.5),
        other => panic!("verdict {other}"),
    };
    assert_eq!(
        (
            judge["status"].as_str().unwrap(),
            b["soft"].as_f64().unwrap()
        ),
        (status, soft),
        "{b}"
    );
    let job_id = judge["details"]["job_id"].as_str().unwrap();
    let job = home.json(&["jobs", "show", job_id]);
    assert_eq!(job["kind"], "agent", "{job}");
    assert_eq!(job["state"], "succeeded", "{job}");
    assert!(
        job.to_string()
            .contains(&format!("\\\"verdict\\\":\\\"{verdict}\\\"")),
        "the job's answer is the recorded verdict: {job}"
    );
    let jobs = home.json(&["jobs", "list"]);
    let n_agent = jobs
        .as_array()
        .or_else(|| jobs["jobs"].as_array())
        .unwrap()
        .iter()
        .filter(|j| j["kind"] == "agent")
        .count();
    assert_eq!(n_agent, 1, "the judge ran once, for option b only: {jobs}");

    // Re-evaluating replaces the scores and reuses the recorded judge job (idempotency key).
    home.json(&["review", "evaluate", "--run", "r1"]);
    let jobs = home.json(&["jobs", "list"]);
    let n_agent = jobs
        .as_array()
        .or_else(|| jobs["jobs"].as_array())
        .unwrap()
        .iter()
        .filter(|j| j["kind"] == "agent")
        .count();
    assert_eq!(n_agent, 1, "no second judge job for an unchanged output");

    // The reference optimizer turns the failure packet's hint into guidance.
    let out_root = home.path().join("skillopt/r1");
    let candidate = home.path().join("candidate.json");
    ok(
        &home,
        &[
            "optimizer",
            "distill",
            "--training-package",
            path_arg(&training),
            "--artifact-root",
            path_arg(&home.path().join("blobs")),
            "--out-root",
            path_arg(&out_root),
            "--candidate-output",
            path_arg(&candidate),
        ],
    );
    let package: Value =
        serde_json::from_str(&std::fs::read_to_string(&candidate).unwrap()).unwrap();
    let content = package["candidate"]["content"]
        .as_str()
        .expect("a candidate");
    assert!(
        content.contains(HINT),
        "guidance carries the optimizer hint:\n{content}"
    );
}

#[test]
fn s101_no_judge_runtime_means_judge_skipped_with_a_reason_and_no_job() {
    let metadata = METADATA.replace(r#""judge_runtime":"scripted","#, "");
    let home = setup(&metadata);
    let report = home.json(&["review", "evaluate", "--run", "r1"]);
    assert!(report["judge_runtime"].is_null(), "{report}");
    let training = home.path().join("training.json");
    ok(
        &home,
        &["export", "--run", "r1", "--output", path_arg(&training)],
    );
    let package: Value =
        serde_json::from_str(&std::fs::read_to_string(&training).unwrap()).unwrap();
    let b = &package["items"][0]["metadata"]["evaluator_scores"][1];
    assert_eq!(stage(b, "judge")["status"], "skipped");
    assert!(
        stage(b, "judge")["details"]["reason"]
            .as_str()
            .unwrap()
            .contains("no judge runtime"),
        "{b}"
    );
    assert!(
        b.get("soft").is_none() && b.get("failure").is_none(),
        "missing evidence stays missing: {b}"
    );
    assert_eq!(b["quality_status"], "skipped");
    let jobs = home.json(&["jobs", "list"]);
    assert!(
        !jobs.to_string().contains("\"agent\""),
        "no judge job: {jobs}"
    );
}

#[test]
fn evaluate_refuses_a_run_that_names_no_evaluator() {
    let home = setup(r#"{"note":"no evaluator"}"#);
    let out = home.run(&["review", "evaluate", "--run", "r1"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("names no evaluator"));
}

#[test]
fn the_readme_line_evaluates_an_ab_run_and_unknown_evaluators_are_refused() {
    let home = setup(r#"{"note":"no evaluator"}"#);
    let input = home.path().join("in");
    ok(
        &home,
        &[
            "review",
            "create",
            "--template",
            "notes",
            "--repo",
            "owner/repo",
            "--run",
            "trial-1",
        ],
    );
    ok(
        &home,
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
    let out = home.run(&[
        "review",
        "evaluate",
        "--run",
        "trial-1",
        "--evaluator",
        "generc",
        "--judge-runtime",
        "scripted",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--evaluator `generc` is not known")
            && stderr.contains("known: landing_page_v1, vue_landing_page_v1, generic"),
        "{stderr}"
    );
    // README: `sf review evaluate --run trial-1 --evaluator generic --judge-runtime scripted`
    ok(
        &home,
        &[
            "review",
            "evaluate",
            "--run",
            "trial-1",
            "--evaluator",
            "generic",
            "--judge-runtime",
            "scripted",
        ],
    );
    // The run's own evaluator id stays accepted.
    let home = setup(METADATA);
    ok(
        &home,
        &[
            "review",
            "evaluate",
            "--run",
            "r1",
            "--evaluator",
            "release_notes_v1",
        ],
    );
}
