//! The three harvest legs as durable jobs, and their reports → rows (seed: SkillOpt,
//! "Deterministic hard-verifier tier", "Deterministic checker objective signal", "Cross-family
//! review soft signal"; facts §5; S-26, S-27, S-30, S-33).
//!
//! Each leg is a job of workflow [`super::WORKFLOW`] on the fleet (runner `sandbox`, `checker` or
//! `agent`), timeout-bounded, off the merge path. Its row is written by the control plane when the
//! result is ingested ([`super::HarvestHandler`]); a leg that fails writes no row and records its
//! `*_failed` job event.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::json;
use skillforge_contract::EvaluatorScore;
use skillforge_engine::JobSpec;
use skillforge_runner::PayloadError;
use skillforge_runner_agent::AgentPayload;
use skillforge_runner_checker::{CheckReport, Checker, CheckerPayload};
use skillforge_runner_sandbox::{SandboxPayload, Verdict, VerifyReport};

use super::outcome::{RowPlan, project};
use super::review::{Reviewer, parse_rubric};
use super::stages::HarvestStages;
use super::tier::EvidenceTier;
use super::{CHECKER_REVIEWER, REVIEW_REVIEWER, VERIFIER_REVIEWER};

/// Score at or above which a leg row is choice `a` (facts §5; a mean of exactly 0.5 is `a`,
/// resolutions §8).
pub const CHOICE_THRESHOLD: f64 = 0.5;

/// A harvest leg.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Leg {
    /// Operator commands in a sandboxed clone at the merged head (runner `sandbox`).
    HardVerifier,
    /// Deterministic checker dimensions of the change (runner `checker`).
    Checkers,
    /// A read-only rubric review by another model family (runner `agent`).
    Review,
}

impl Leg {
    /// Every leg, in dispatch order.
    pub const ALL: [Leg; 3] = [Leg::HardVerifier, Leg::Checkers, Leg::Review];

    /// Stable name, also the job stage: `hard_verifier`, `checkers`, `review`.
    pub fn name(self) -> &'static str {
        match self {
            Leg::HardVerifier => "hard_verifier",
            Leg::Checkers => "checkers",
            Leg::Review => "review",
        }
    }

    /// The leg named `name`.
    pub fn from_name(name: &str) -> Option<Leg> {
        Leg::ALL.into_iter().find(|l| l.name() == name)
    }

    /// The job event a failure of this leg records (S-33).
    pub fn failed_event(self) -> &'static str {
        match self {
            Leg::HardVerifier => "hard_verifiers_failed",
            Leg::Checkers => "deterministic_checkers_failed",
            Leg::Review => "cross_family_review_failed",
        }
    }

    /// Item id of this leg's row: `hard#<repo>#<pr>`, `checker#…`, `review#…` (S-27).
    pub fn item_id(self, repo: &str, pr: i64) -> String {
        let prefix = match self {
            Leg::HardVerifier => "hard",
            Leg::Checkers => "checker",
            Leg::Review => "review",
        };
        format!("{prefix}#{repo}#{pr}")
    }
}

/// The idempotency key of a leg job: one job per (leg, PR, merged head[, reviewer]); the result
/// handler finds the harvest context by it.
pub fn dispatch_key(
    leg: Leg,
    run_id: &str,
    repo: &str,
    pr: i64,
    head: &str,
    reviewer: Option<&str>,
) -> String {
    let by = reviewer.map(|r| format!(":{r}")).unwrap_or_default();
    format!("harvest:{}:{run_id}:{repo}#{pr}@{head}{by}", leg.name())
}

/// The hard-verifier job: `commands` via `sh -c` in a `git clone --local` of `checkout` at `head`,
/// within the `hard_verifier` stage's budget (`workflows/harvest.toml`, facts §5: 15 min); in
/// containers from `image` when given (`[skillopt] hard_verifier_image`).
///
/// # Errors
/// [`PayloadError`] when the payload does not serialize (a `checkout` path that is not UTF-8).
pub fn hard_verifier_spec(
    stages: &HarvestStages,
    checkout: PathBuf,
    head: &str,
    commands: Vec<String>,
    image: Option<String>,
    key: String,
) -> Result<JobSpec, PayloadError> {
    let stage = stages.0.stage(Leg::HardVerifier.name());
    let mut payload = SandboxPayload::new(checkout, head.to_owned(), commands);
    payload.timeout_secs = Some(stage.timeout_secs);
    payload.image = image;
    stage.job(&payload, Some(key))
}

/// The checker job over `base..head` of `checkout`, within the `checkers` stage's budget.
///
/// # Errors
/// [`PayloadError`] when the payload does not serialize.
pub fn checkers_spec(
    stages: &HarvestStages,
    checkout: PathBuf,
    base: &str,
    head: &str,
    checkers: Vec<Checker>,
    key: String,
) -> Result<JobSpec, PayloadError> {
    let payload = CheckerPayload::commits(checkout, base.to_owned(), head.to_owned(), checkers);
    stages
        .0
        .stage(Leg::Checkers.name())
        .job(&payload, Some(key))
}

/// The review job: `prompt` to runtime `runtime`, working in `workdir` (read-only by
/// instruction), within the `review` stage's budget.
///
/// # Errors
/// [`PayloadError`] when the payload does not serialize.
pub fn review_spec(
    stages: &HarvestStages,
    runtime: &str,
    prompt: String,
    workdir: Option<PathBuf>,
    key: String,
) -> Result<JobSpec, PayloadError> {
    let stage = stages.0.stage(Leg::Review.name());
    let mut payload = AgentPayload::new(runtime, prompt);
    payload.workdir = workdir;
    payload.timeout_secs = Some(stage.timeout_secs);
    stage.job(&payload, Some(key))
}

fn choice_for(score: f64) -> &'static str {
    if score >= CHOICE_THRESHOLD { "a" } else { "b" }
}

/// Item metadata key of a checker or verifier row's findings: what the tools said, one concrete
/// rule per entry, which `optimizer distill` writes into the template as guidance (issue 37
/// item 10). Each entry is `{"dimension", "rule", "message"}`: `rule` is the instruction, keyed on
/// the tool's message without its location so one finding across PRs adds support.
pub const FINDINGS_KEY: &str = "findings";
/// Most findings kept per dimension or command.
pub const MAX_FINDINGS: usize = 5;

/// The last non-empty line of `text`, cut to 200 characters.
fn last_line(text: &str) -> Option<String> {
    let line = text
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !l.starts_with("…"))?;
    Some(line.chars().take(200).collect())
}

/// Findings of a failed verification: each command that failed, with the last line it printed
/// (stderr, else stdout).
pub fn verifier_findings(report: &VerifyReport) -> Vec<serde_json::Value> {
    report
        .commands
        .iter()
        .filter(|c| c.exit_code.is_some_and(|code| code != 0))
        .take(MAX_FINDINGS)
        .map(|c| {
            let said = last_line(&c.stderr_tail).or_else(|| last_line(&c.stdout_tail));
            let code = c.exit_code.unwrap_or_default();
            let rule = match &said {
                Some(line) => format!(
                    "Make `{}` pass before finishing (it exited {code}: {line})",
                    c.command
                ),
                None => format!(
                    "Make `{}` pass before finishing (it exited {code})",
                    c.command
                ),
            };
            json!({"dimension": "hard_verifier", "rule": rule, "message": said.unwrap_or_default()})
        })
        .collect()
}

/// Findings of a checker report: `diff_size` over its soft cap, and each located tool finding of a
/// dimension that scored below 1 (the tool's message; up to [`MAX_FINDINGS`] per dimension).
pub fn checker_findings(report: &CheckReport) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for d in report
        .dimensions
        .iter()
        .filter(|d| d.score.is_some_and(|s| s < 1.0))
    {
        if d.name == Checker::DiffSize.name() {
            let (changed, cap) = (
                d.raw["changed_lines"].as_u64(),
                d.raw["soft_cap_lines"].as_u64(),
            );
            if let (Some(changed), Some(cap)) = (changed, cap)
                && changed > cap
            {
                let rule = format!(
                    "Keep a change under {cap} changed lines: split larger work into smaller pull requests"
                );
                out.push(json!({"dimension": d.name, "rule": rule, "message": format!("{changed} changed lines")}));
            }
            continue;
        }
        let Some(languages) = d.raw["languages"].as_object() else {
            continue;
        };
        let mut n = 0;
        for entry in languages.values() {
            let tool = entry["tool"].as_str().unwrap_or(&d.name);
            for location in entry["locations"].as_array().into_iter().flatten() {
                let message = location["message"].as_str().unwrap_or("").trim();
                if message.is_empty() || n >= MAX_FINDINGS {
                    continue;
                }
                n += 1;
                let rule = format!("Leave no {} finding from {tool} such as: {message}", d.name);
                let at = format!(
                    "{}:{}",
                    location["file"].as_str().unwrap_or(""),
                    location["line"].as_u64().unwrap_or(0)
                );
                out.push(json!({"dimension": d.name, "rule": rule, "message": format!("{at}: {message}")}));
            }
        }
    }
    out
}

/// The hard row (`hard#<repo>#<pr>`, `gitmoot-verifier`): pass → hard 1.0 / a, fail → hard 0.0 /
/// b; a skipped verdict (not runnable, no commands) → `None`, no row (S-38, S-39). Item tags:
/// `hard_verifier`, `hard_passed`, `hard_score`, `command_results`, tier `verifiable_floor` (S-31).
pub fn hard_row(repo: &str, pr: i64, report: &VerifyReport) -> Option<RowPlan> {
    let hard = report.verdict.hard()?;
    let passed = report.verdict == Verdict::Pass;
    let reason = report
        .reason
        .as_deref()
        .map(|r| format!(" ({r})"))
        .unwrap_or_default();
    let text = if passed {
        format!(
            "Hard verifier passed at {}: every command exited 0.",
            report.commit
        )
    } else {
        format!("Hard verifier failed at {}{reason}.", report.commit)
    };
    let signal = project(
        &EvaluatorScore {
            hard: Some(hard),
            ..EvaluatorScore::default()
        },
        &text,
    );
    let command_results: Vec<serde_json::Value> = report
        .commands
        .iter()
        .map(|c| json!({"command": c.command, "status": c.status, "exit_code": c.exit_code, "duration_ms": c.duration_ms}))
        .collect();
    let mut metadata = json!({
        "hard_verifier": true,
        "hard_passed": passed,
        "hard_score": signal.score,
        "command_results": command_results,
        "head": report.commit,
    });
    let findings = verifier_findings(report);
    if !findings.is_empty() {
        metadata[FINDINGS_KEY] = json!(findings);
    }
    EvidenceTier::VerifiableFloor.tag(&mut metadata);
    Some(RowPlan {
        item_id: Leg::HardVerifier.item_id(repo, pr),
        title: format!("hard verifier {repo}#{pr}"),
        item_metadata: metadata,
        reviewer: VERIFIER_REVIEWER,
        choice: choice_for(signal.score),
        signal,
    })
}

/// The checker row (`checker#<repo>#<pr>`, `gitmoot-checker`): the scored dimensions as
/// `dimension_scores`, fused by their mean; mean < 0.5 → b. Every dimension skipped → `None`
/// (resolutions §9: a re-run replaces the row with the new dimension set). Item tags:
/// `objective`, `checker_score`, `dimension_scores`, tier `objective_checker` (S-31).
pub fn checker_row(repo: &str, pr: i64, report: &CheckReport) -> Option<RowPlan> {
    let dimensions: BTreeMap<String, f64> = report
        .dimensions
        .iter()
        .filter_map(|d| d.score.map(|s| (d.name.clone(), s)))
        .collect();
    if dimensions.is_empty() {
        return None;
    }
    let skipped: Vec<String> = report
        .dimensions
        .iter()
        .filter_map(|d| {
            d.skipped
                .as_ref()
                .map(|why| format!("{} skipped: {why}", d.name))
        })
        .collect();
    let mut text = format!(
        "Deterministic checkers over {} dimension(s).",
        dimensions.len()
    );
    if !skipped.is_empty() {
        text.push(' ');
        text.push_str(&skipped.join("; "));
    }
    let score = EvaluatorScore {
        dimension_scores: dimensions.clone(),
        ..EvaluatorScore::default()
    };
    let signal = project(&score, &text);
    let mut metadata =
        json!({"objective": true, "checker_score": signal.score, "dimension_scores": dimensions});
    let findings = checker_findings(report);
    if !findings.is_empty() {
        metadata[FINDINGS_KEY] = json!(findings);
    }
    EvidenceTier::ObjectiveChecker.tag(&mut metadata);
    Some(RowPlan {
        item_id: Leg::Checkers.item_id(repo, pr),
        title: format!("checkers {repo}#{pr}"),
        item_metadata: metadata,
        reviewer: CHECKER_REVIEWER,
        choice: choice_for(signal.score),
        signal,
    })
}

/// The review row (`review#<repo>#<pr>`, `gitmoot-review`) from the reviewer's final message: the
/// rubric as `dimension_scores`, fused by the mean; mean < 0.5 → b (S-30). No rubric → `None`.
/// Item tags: `judge_derived`, `reviewer_runtime` (the family), `rubric_score`,
/// `dimension_scores`, and `self_family = true` on the same-family fallback (S-29); tier
/// `cross_family_judge`, or `same_family_judge` on the fallback (S-31).
pub fn review_row(repo: &str, pr: i64, reviewer: &Reviewer, message: &str) -> Option<RowPlan> {
    let (dimensions, notes) = parse_rubric(message);
    if dimensions.is_empty() {
        return None;
    }
    let tag = if reviewer.self_family {
        "same-family (fallback)"
    } else {
        "cross-family"
    };
    let mut text = format!(
        "{tag} review by {} ({}).",
        reviewer.runtime, reviewer.family
    );
    if !notes.trim().is_empty() {
        text.push(' ');
        text.push_str(notes.trim());
    }
    let score = EvaluatorScore {
        dimension_scores: dimensions.clone(),
        ..EvaluatorScore::default()
    };
    let signal = project(&score, &text);
    let mut metadata = json!({
        "judge_derived": true,
        "reviewer_runtime": reviewer.family,
        "rubric_score": signal.score,
        "dimension_scores": dimensions,
    });
    if reviewer.self_family {
        metadata["self_family"] = json!(true);
        EvidenceTier::SameFamilyJudge.tag(&mut metadata);
    } else {
        EvidenceTier::CrossFamilyJudge.tag(&mut metadata);
    }
    Some(RowPlan {
        item_id: Leg::Review.item_id(repo, pr),
        title: format!("review {repo}#{pr}"),
        item_metadata: metadata,
        reviewer: REVIEW_REVIEWER,
        choice: choice_for(signal.score),
        signal,
    })
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    use skillforge_runner_checker::DimensionResult;

    use super::*;

    #[test]
    fn leg_jobs_name_their_runner_and_a_payload_that_does_not_serialize_is_an_error_not_null() {
        let stages = HarvestStages::default();
        let checkout = PathBuf::from("/srv/app");
        let hard = hard_verifier_spec(
            &stages,
            checkout.clone(),
            "h1",
            vec!["true".into()],
            None,
            "k1".into(),
        )
        .unwrap();
        let checkers = checkers_spec(
            &stages,
            checkout.clone(),
            "b1",
            "h1",
            vec![Checker::DiffSize],
            "k2".into(),
        )
        .unwrap();
        let review = review_spec(
            &stages,
            "scripted",
            "review it".into(),
            Some(checkout),
            "k3".into(),
        )
        .unwrap();
        for (spec, kind, leg) in [
            (&hard, "sandbox", Leg::HardVerifier),
            (&checkers, "checker", Leg::Checkers),
            (&review, "agent", Leg::Review),
        ] {
            assert_eq!(
                (spec.kind.as_str(), spec.stage.as_str()),
                (kind, leg.name())
            );
            assert!(spec.payload.is_object(), "{kind}: {}", spec.payload);
        }
        assert_eq!(hard.payload["repo"], "/srv/app");
        assert!(
            hard.payload.get("image").is_none(),
            "no image key unless one is configured"
        );
        let boxed = hard_verifier_spec(
            &stages,
            "/srv/app".into(),
            "h1",
            vec!["true".into()],
            Some("img:1".into()),
            "k1".into(),
        );
        assert_eq!(
            boxed.unwrap().payload["image"],
            "img:1",
            "[skillopt] hard_verifier_image reaches the job"
        );

        let not_utf8 = PathBuf::from(OsStr::from_bytes(b"/srv/app-\xff"));
        let errors = [
            hard_verifier_spec(
                &stages,
                not_utf8.clone(),
                "h1",
                vec!["true".into()],
                None,
                "k1".into(),
            )
            .unwrap_err(),
            checkers_spec(
                &stages,
                not_utf8.clone(),
                "b1",
                "h1",
                vec![Checker::DiffSize],
                "k2".into(),
            )
            .unwrap_err(),
            review_spec(
                &stages,
                "scripted",
                "review it".into(),
                Some(not_utf8),
                "k3".into(),
            )
            .unwrap_err(),
        ];
        let kinds: Vec<&str> = errors.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, ["sandbox", "checker", "agent"]);
        for error in &errors {
            assert!(error.to_string().contains("invalid UTF-8"), "{error}");
        }
    }

    fn reviewer(self_family: bool) -> Reviewer {
        Reviewer {
            runtime: "claude".into(),
            family: "claude".into(),
            self_family,
        }
    }

    #[test]
    fn s30_review_mean_drives_the_choice() {
        let low = review_row(
            "a/b",
            1,
            &reviewer(false),
            r#"{"coverage":0.2,"fidelity":0.4}"#,
        )
        .unwrap();
        assert_eq!(
            (low.choice, low.item_id.as_str(), low.reviewer),
            ("b", "review#a/b#1", "gitmoot-review")
        );
        assert!((low.signal.score - 0.3).abs() < 1e-9);
        let high = review_row(
            "a/b",
            1,
            &reviewer(false),
            r#"{"coverage":0.6,"fidelity":0.8}"#,
        )
        .unwrap();
        assert_eq!(high.choice, "a");
        let half = review_row("a/b", 1, &reviewer(false), r#"{"coverage":0.5}"#).unwrap();
        assert_eq!(
            half.choice, "a",
            "a mean of exactly 0.5 is a (resolutions §8)"
        );
        assert!(review_row("a/b", 1, &reviewer(false), r#"{"verdict":"a"}"#).is_none());
        assert!(high.item_metadata.get("self_family").is_none());
        let fallback = review_row("a/b", 1, &reviewer(true), r#"{"coverage":0.6}"#).unwrap();
        assert_eq!(fallback.item_metadata["self_family"], true);
        assert_eq!(fallback.item_metadata["judge_derived"], true);
    }

    #[test]
    fn checker_all_skipped_writes_no_row() {
        let skipped = DimensionResult {
            name: "lint".into(),
            score: None,
            skipped: Some("no tool".into()),
            raw: json!(null),
        };
        let report = CheckReport::from_dimensions(vec![skipped.clone()]);
        assert!(checker_row("a/b", 1, &report).is_none());
        let scored = DimensionResult {
            name: "diff_size".into(),
            score: Some(0.2),
            skipped: None,
            raw: json!(null),
        };
        let row = checker_row(
            "a/b",
            1,
            &CheckReport::from_dimensions(vec![scored, skipped]),
        )
        .unwrap();
        assert_eq!(
            (row.choice, row.reviewer, row.item_id.as_str()),
            ("b", "gitmoot-checker", "checker#a/b#1")
        );
        assert_eq!(
            row.item_metadata["dimension_scores"],
            json!({"diff_size": 0.2})
        );
    }

    #[test]
    fn leg_names_round_trip_and_events_are_the_seeds() {
        for leg in Leg::ALL {
            assert_eq!(Leg::from_name(leg.name()), Some(leg));
        }
        assert_eq!(Leg::HardVerifier.failed_event(), "hard_verifiers_failed");
        assert_eq!(
            Leg::Checkers.failed_event(),
            "deterministic_checkers_failed"
        );
        assert_eq!(Leg::Review.failed_event(), "cross_family_review_failed");
    }
}
