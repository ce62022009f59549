//! Table tests: stage order, when each stage runs, and the failure packet (S-101).

use serde_json::{Value, json};
use skillforge_contract::{
    EvaluatorCheckConfig, EvaluatorProfile, EvaluatorScore, build_evaluator_profile,
};

use super::*;

/// A stage environment that records what ran, in order.
struct Recorder {
    calls: Vec<String>,
    runtime: Option<String>,
    runtime_problem: Option<String>,
    tool_present: bool,
    render_passes: bool,
    judge_answer: Result<&'static str, &'static str>,
}

impl Recorder {
    fn new() -> Self {
        Self {
            calls: Vec::new(),
            runtime: Some("scripted".into()),
            runtime_problem: None,
            tool_present: true,
            render_passes: true,
            judge_answer: Ok(r#"{"verdict":"a","reasoning":"clear and complete"}"#),
        }
    }
}

impl StageEnv for Recorder {
    fn render(&mut self, check: &EvaluatorCheckConfig, _artifact: &Artifact<'_>) -> CheckOutcome {
        self.calls.push(format!("render:{}", check.id));
        if !self.tool_present {
            return CheckOutcome::new(
                check,
                CheckState::Skipped,
                "tool `playwright` not found on PATH",
            );
        }
        if self.render_passes {
            CheckOutcome::new(check, CheckState::Passed, "rendered")
        } else {
            let mut o = CheckOutcome::new(check, CheckState::Failed, "blank page");
            o.optimizer_hint = "Render a visible hero section.".into();
            o
        }
    }
    fn judge_runtime(&self) -> Option<String> {
        self.runtime.clone()
    }
    fn judge_runtime_problem(&self, _runtime: &str) -> Option<String> {
        self.runtime_problem.clone()
    }
    fn judge(&mut self, request: &JudgeRequest) -> JudgeOutcome {
        self.calls.push("judge".into());
        assert!(
            request.prompt.starts_with("task: judge\n"),
            "{}",
            request.prompt
        );
        match self.judge_answer {
            Ok(msg) => match parse_judge_verdict(msg) {
                Ok((verdict, reasoning)) => JudgeOutcome::Verdict {
                    verdict,
                    reasoning,
                    runtime: request.runtime.clone(),
                    family: "scripted".into(),
                    job_id: "job-1".into(),
                },
                Err(e) => JudgeOutcome::Error {
                    reason: e.to_string(),
                    job_id: "job-1".into(),
                },
            },
            Err(reason) => JudgeOutcome::Error {
                reason: reason.into(),
                job_id: String::new(),
            },
        }
    }
}

fn sections_check(required: bool) -> EvaluatorCheckConfig {
    EvaluatorCheckConfig {
        id: "required_sections".into(),
        check_type: "artifact_contract".into(),
        required,
        config: Some(
            json!({"required_sections": ["## Summary", "## Testing"], "max_bytes": 10_000}),
        ),
        ..Default::default()
    }
}

fn render_check() -> EvaluatorCheckConfig {
    EvaluatorCheckConfig {
        id: "render_smoke".into(),
        check_type: "playwright".into(),
        when: "checks_pass".into(),
        ..Default::default()
    }
}

/// A generic profile with the render check listed BEFORE the artifact check, to prove the order
/// comes from the stage, not the list.
fn profile(required: bool) -> EvaluatorProfile {
    let mut p = build_evaluator_profile("notes_v1", "", None).unwrap();
    p.checks = vec![render_check(), sections_check(required)];
    p
}

const GOOD: &str = "# Notes\n## Summary\nDid a thing.\n## Testing\nRan the suite.\n";
const MISSING_TESTING: &str = "# Notes\n## Summary\nDid a thing.\n";

fn run(profile: &EvaluatorProfile, text: &str, env: &mut Recorder) -> EvaluatorScore {
    evaluate(
        profile,
        &Artifact {
            id: "run/item/option-a",
            title: "Release notes",
            bytes: text.as_bytes(),
        },
        env,
    )
}

fn stages(score: &EvaluatorScore) -> Vec<(String, String)> {
    score
        .stage_status
        .iter()
        .map(|s| (s.stage.clone(), s.status.clone()))
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

#[test]
fn s101_stage_order_and_when_each_stage_runs() {
    struct Case {
        name: &'static str,
        text: &'static str,
        required: bool,
        tweak: fn(&mut Recorder),
        calls: &'static [&'static str],
        stages: &'static [(&'static str, &'static str)],
        contract: &'static str,
        quality: &'static str,
    }
    let cases = [
        Case {
            name: "all pass: checks, then render, then judge",
            text: GOOD,
            required: true,
            tweak: |_| {},
            calls: &["render:render_smoke", "judge"],
            stages: &[
                ("artifact_checks", "passed"),
                ("render", "passed"),
                ("judge", "passed"),
            ],
            contract: "passed",
            quality: "passed",
        },
        Case {
            name: "required check fails: neither render nor judge runs",
            text: MISSING_TESTING,
            required: true,
            tweak: |_| {},
            calls: &[],
            stages: &[
                ("artifact_checks", "failed"),
                ("render", "skipped"),
                ("judge", "skipped"),
            ],
            contract: "failed",
            quality: "skipped",
        },
        Case {
            name: "optional check fails: render and judge still run",
            text: MISSING_TESTING,
            required: false,
            tweak: |_| {},
            calls: &["render:render_smoke", "judge"],
            stages: &[
                ("artifact_checks", "passed"),
                ("render", "passed"),
                ("judge", "passed"),
            ],
            contract: "passed",
            quality: "passed",
        },
        Case {
            name: "render tool absent: skipped, never a pass; judge runs",
            text: GOOD,
            required: true,
            tweak: |r| r.tool_present = false,
            calls: &["render:render_smoke", "judge"],
            stages: &[
                ("artifact_checks", "passed"),
                ("render", "skipped"),
                ("judge", "passed"),
            ],
            contract: "passed",
            quality: "passed",
        },
        Case {
            name: "no judge runtime: judge skipped with a reason",
            text: GOOD,
            required: true,
            tweak: |r| r.runtime = None,
            calls: &["render:render_smoke"],
            stages: &[
                ("artifact_checks", "passed"),
                ("render", "passed"),
                ("judge", "skipped"),
            ],
            contract: "passed",
            quality: "skipped",
        },
        Case {
            name: "judge runtime missing on this host: skipped",
            text: GOOD,
            required: true,
            tweak: |r| r.runtime_problem = Some("program `claude` not found on PATH".into()),
            calls: &["render:render_smoke"],
            stages: &[
                ("artifact_checks", "passed"),
                ("render", "passed"),
                ("judge", "skipped"),
            ],
            contract: "passed",
            quality: "skipped",
        },
        Case {
            name: "judge says it falls short",
            text: GOOD,
            required: true,
            tweak: |r| r.judge_answer = Ok(r#"{"verdict":"b","reasoning":"no rollback step"}"#),
            calls: &["render:render_smoke", "judge"],
            stages: &[
                ("artifact_checks", "passed"),
                ("render", "passed"),
                ("judge", "failed"),
            ],
            contract: "passed",
            quality: "failed",
        },
        Case {
            name: "unreadable verdict is an error, never a tie",
            text: GOOD,
            required: true,
            tweak: |r| r.judge_answer = Ok("Run A (with the skill)"),
            calls: &["render:render_smoke", "judge"],
            stages: &[
                ("artifact_checks", "passed"),
                ("render", "passed"),
                ("judge", "error"),
            ],
            contract: "passed",
            quality: "error",
        },
    ];
    for case in cases {
        let mut env = Recorder::new();
        (case.tweak)(&mut env);
        let score = run(&profile(case.required), case.text, &mut env);
        assert_eq!(env.calls, case.calls, "{}: calls", case.name);
        assert_eq!(stages(&score), pairs(case.stages), "{}: stages", case.name);
        assert_eq!(
            score.contract_status, case.contract,
            "{}: contract",
            case.name
        );
        assert_eq!(score.quality_status, case.quality, "{}: quality", case.name);
        if case.quality == "skipped" || case.quality == "error" {
            assert_eq!(score.soft, None, "{}: no judge, no soft", case.name);
            assert!(score.judge_evaluator_id.is_empty(), "{}", case.name);
        }
        for stage in &score.stage_status {
            assert!(
                !stage.started_at.is_empty() && !stage.finished_at.is_empty(),
                "{}: times",
                case.name
            );
            let details = stage.details.as_ref().expect("details");
            if stage.status == "skipped" {
                let reason = details
                    .get("reason")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .or_else(|| {
                        details["checks"]
                            .as_array()
                            .and_then(|c| c.first())
                            .and_then(|c| c["reason"].as_str())
                            .map(str::to_owned)
                    });
                assert!(
                    reason.is_some_and(|r| !r.is_empty()),
                    "{}: a skipped stage says why: {details}",
                    case.name
                );
            }
        }
    }
}

#[test]
fn s101_failure_packet_of_a_failed_required_check() {
    let mut env = Recorder::new();
    let score = run(&profile(true), MISSING_TESTING, &mut env);
    assert_eq!(score.hard, Some(0.0));
    assert_eq!(score.soft, None, "the judge did not run, so no soft score");
    let failure = score.failure.as_ref().expect("a failure packet");
    assert_eq!(failure.primary_reason, "required_check_failed");
    assert!(
        failure.human_reason.contains("required_sections")
            && failure.human_reason.contains("## Testing"),
        "{failure:?}"
    );
    assert_eq!(
        failure.optimizer_hint,
        "Include these sections in every output: `## Testing`."
    );
    assert_eq!(failure.failed_checks.len(), 1);
    assert_eq!(failure.failed_checks[0].check, "required_sections");
    assert_eq!(failure.failed_checks[0].severity, "error");
    assert_eq!(
        failure.failed_checks[0].evidence,
        ["missing section `## Testing`"]
    );
    assert!(
        failure
            .evidence
            .iter()
            .any(|e| e.contains("run/item/option-a")),
        "{:?}",
        failure.evidence
    );
    assert_eq!(failure.stage_status, score.stage_status);
    let judge = score
        .stage_status
        .iter()
        .find(|s| s.stage == "judge")
        .unwrap();
    assert!(
        judge.details.as_ref().unwrap()["reason"]
            .as_str()
            .unwrap()
            .contains("checks pass"),
        "{judge:?}"
    );
}

#[test]
fn failure_packet_table() {
    // (case, text, required, judge answer, primary_reason, hint contains, failed checks)
    type Case = (
        &'static str,
        &'static str,
        bool,
        &'static str,
        Option<&'static str>,
        &'static str,
        usize,
    );
    let cases: &[Case] = &[
        (
            "passing: no packet",
            GOOD,
            true,
            r#"{"verdict":"a","reasoning":"ok"}"#,
            None,
            "",
            0,
        ),
        (
            "tie: no packet",
            GOOD,
            true,
            r#"{"verdict":"tie","reasoning":"unsure"}"#,
            None,
            "",
            0,
        ),
        (
            "judge rejects",
            GOOD,
            true,
            r#"{"verdict":"B","reasoning":"no rollback step"}"#,
            Some("judge_rejected"),
            "Address the judge's concern: no rollback step",
            0,
        ),
        (
            "optional failure + judge rejects: warning listed",
            MISSING_TESTING,
            false,
            r#"{"verdict":"b","reasoning":"thin"}"#,
            Some("judge_rejected"),
            "thin",
            1,
        ),
        (
            "optional failure + judge passes: no packet",
            MISSING_TESTING,
            false,
            r#"{"verdict":"a","reasoning":"ok"}"#,
            None,
            "",
            0,
        ),
        (
            "required failure",
            MISSING_TESTING,
            true,
            r#"{"verdict":"a","reasoning":"ok"}"#,
            Some("required_check_failed"),
            "`## Testing`",
            1,
        ),
    ];
    for (name, text, required, answer, primary, hint, n_failed) in cases.iter().copied() {
        let mut env = Recorder::new();
        env.judge_answer = Ok(answer);
        let score = run(&profile(required), text, &mut env);
        match primary {
            None => assert!(score.failure.is_none(), "{name}: {:?}", score.failure),
            Some(primary) => {
                let f = score
                    .failure
                    .as_ref()
                    .unwrap_or_else(|| panic!("{name}: packet"));
                assert_eq!(f.primary_reason, primary, "{name}");
                assert!(
                    f.optimizer_hint.contains(hint),
                    "{name}: {}",
                    f.optimizer_hint
                );
                assert_eq!(f.failed_checks.len(), n_failed, "{name}");
                assert!(!score.fail_reason.is_empty(), "{name}");
            }
        }
    }
    let mut env = Recorder::new();
    env.render_passes = false;
    let mut p = profile(true);
    p.checks[0].required = true;
    let score = run(&p, GOOD, &mut env);
    assert_eq!(
        env.calls,
        ["render:render_smoke"],
        "a failed required render check blocks the judge"
    );
    let f = score.failure.unwrap();
    assert_eq!(f.failed_checks[0].check, "render_smoke");
    assert_eq!(f.optimizer_hint, "Render a visible hero section.");
}

#[test]
fn artifact_contract_rules_table() {
    let check = |config: Value, text: &str, state: CheckState, evidence: &[&str]| {
        let c = EvaluatorCheckConfig {
            id: "c".into(),
            check_type: "artifact_contract".into(),
            config: Some(config.clone()),
            ..Default::default()
        };
        let got = run_artifact_check(&c, text.as_bytes());
        assert_eq!(got.state, state, "{config} on {text:?}: {got:?}");
        assert_eq!(got.evidence, evidence, "{config} on {text:?}");
    };
    check(json!({}), "x", CheckState::Passed, &[]);
    check(
        json!({}),
        "  \n",
        CheckState::Failed,
        &["the artifact is empty"],
    );
    check(json!({"non_empty": false}), "", CheckState::Passed, &[]);
    check(
        json!({"min_bytes": 5}),
        "abc",
        CheckState::Failed,
        &["the artifact is 3 bytes, below the minimum of 5"],
    );
    check(
        json!({"max_bytes": 2}),
        "abc",
        CheckState::Failed,
        &["the artifact is 3 bytes, above the maximum of 2"],
    );
    check(
        json!({"required_sections": ["## Testing"]}),
        "Testing:\nok",
        CheckState::Passed,
        &[],
    );
    check(
        json!({"required_sections": ["Testing"]}),
        "# testing\nok",
        CheckState::Passed,
        &[],
    );
    check(
        json!({"required_sections": ["## Testing"]}),
        "we did testing",
        CheckState::Failed,
        &["missing section `## Testing`"],
    );
    check(
        json!({"required_files": ["src/App.vue"]}),
        r#"{"files":{"src/App.vue":"<template/>"}}"#,
        CheckState::Passed,
        &[],
    );
    check(
        json!({"required_files": ["index.html"]}),
        r#"{"files":[{"path":"src/App.vue"}]}"#,
        CheckState::Failed,
        &["missing file `index.html`"],
    );
    check(
        json!({"required_files": ["index.html"]}),
        "--- index.html\n<html>",
        CheckState::Passed,
        &[],
    );
    check(
        json!({"required_strings": ["rollback"]}),
        "no",
        CheckState::Failed,
        &["missing required text `rollback`"],
    );
    check(
        json!({"forbidden_strings": ["TODO"]}),
        "TODO",
        CheckState::Failed,
        &["contains forbidden text `TODO`"],
    );
    check(
        json!({"required_sections": "## Testing"}),
        "x",
        CheckState::Error,
        &[],
    );
    let c = EvaluatorCheckConfig {
        id: "c".into(),
        check_type: "artifact_contract".into(),
        config: Some(json!({"required_strings": ["x"], "optimizer_hint": "Say x."})),
        ..Default::default()
    };
    assert_eq!(run_artifact_check(&c, b"y").optimizer_hint, "Say x.");
}

#[test]
fn effective_profile_overlays_the_config() {
    let metadata = json!({
        "mode": "refine",
        "evaluator_id": "landing_page_v1",
        "judge_runtime": "scripted",
        "judge_prompt_templates": {"vue_landing_page": "Is the page usable?"},
        "judge_prompt_version": "jp-3",
        "check_config": {"required_files": {"required_files": ["index.html"]}},
        "checks": [{"id": "no_todo", "type": "artifact_contract", "required": true, "config": {"forbidden_strings": ["TODO"]}}]
    });
    let p = effective_profile(Some(&metadata), None).unwrap();
    let ids: Vec<&str> = p.checks.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["required_files", "render_smoke", "no_todo"]);
    assert_eq!(
        p.checks[0].config,
        Some(json!({"required_files": ["index.html"]}))
    );
    assert_eq!(judge_runtime_of(&p).as_deref(), Some("scripted"));
    let (rubric, version) = judge::judge_rubric(&p);
    assert_eq!(
        (rubric.as_str(), version.as_str()),
        ("Is the page usable?", "jp-3")
    );
    assert_eq!(
        p.metadata.as_ref().unwrap().get("mode"),
        None,
        "the workflow mode is not evaluator config"
    );
    assert!(effective_profile(Some(&json!({"mode": "refine"})), None).is_none());
    assert_eq!(
        effective_profile(None, Some("x_v1")).unwrap().task_kind,
        "generic"
    );
    let generic = effective_profile(Some(&metadata), Some("notes_v1")).unwrap();
    assert_eq!(
        generic.checks.len(),
        1,
        "override id: base has no checks, config adds one"
    );
    let (rubric, version) = judge::judge_rubric(&generic);
    assert_eq!(version, "jp-3");
    assert!(
        rubric.contains("careful human reviewer"),
        "no template for `generic`: the built-in rubric"
    );
}

#[test]
fn judge_prompt_carries_the_template_and_the_output_but_no_label() {
    let mut p = profile(true);
    p.judge.as_mut().unwrap().config =
        Some(json!({"judge_prompt_templates": {"generic": "RUBRIC-XYZ"}}));
    let e = Evaluation::start(
        &p,
        &Artifact {
            id: "run/item/option-b",
            title: "Notes for PR 7",
            bytes: GOOD.as_bytes(),
        },
    );
    let JudgeStep::Run(request) = e.judge_step(Some("scripted"), None) else {
        panic!("judge due")
    };
    assert!(request.prompt.starts_with("task: judge\n"));
    assert!(
        request.prompt.contains("RUBRIC-XYZ")
            && request.prompt.contains("Ran the suite.")
            && request.prompt.contains("Notes for PR 7")
    );
    assert!(
        !request.prompt.contains("option-b"),
        "the blind label stays out of the prompt"
    );
    assert_eq!(request.prompt_hash, judge::prompt_hash("RUBRIC-XYZ"));
    assert_eq!(
        request.prompt_version, "",
        "a configured template without a version records none"
    );
}

#[test]
fn parse_judge_verdict_table() {
    let check = |msg: &str, want: Option<&str>| {
        let got = parse_judge_verdict(msg).ok().map(|(v, _)| v.as_str());
        assert_eq!(got, want, "{msg}");
    };
    check(r#"{"verdict":"a","reasoning":"x"}"#, Some("a"));
    check(r#"Here: {"verdict":"TIE"} done"#, Some("tie"));
    check(r#"{"verdict":"b"}"#, Some("b"));
    check(r#"{"verdict":"maybe"}"#, None);
    check(r#"{"pick":"a"}"#, None);
    check("a", None);
}
