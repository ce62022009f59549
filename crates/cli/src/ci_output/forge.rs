//! An eval forge as a suite: one case per sample, then one for the gate.
//!
//! A sample the candidate arm won, or a stated tie, passes; one the baseline won fails; an
//! invalid sample (it does not count toward the majority) is an error with its code, annotated
//! as a warning; a sample not judged yet is skipped. The `gate` case carries the decision the
//! exit code follows: adopt and probation pass, reject, undecided and stopped fail. Each
//! sample's output is, per arm, the brief's verify result and the tail of the arm's final
//! message (`s<n>/<arm>.meta/final.txt`); its time is the slower arm's run.

use std::path::Path;

use skillforge_evalloop::arm::{ArmRecord, ArmSide};
use skillforge_evalloop::forge::ForgeReport;
use skillforge_evalloop::gate::Decision;
use skillforge_evalloop::layout::{meta_dir, read_json, sample_dir};
use skillforge_evalloop::sample::{SampleVerdict, Winner};
use skillforge_evalloop::steps::arm::{FINAL_FILE, RUN_FILE};
use skillforge_evalloop::steps::verify::{VERIFY_FILE, VerifyResult};

use super::suite::{Case, Level, Outcome, Suite, last_lines};

const CLASS: &str = "skillforge.eval.forge";
/// Lines of an arm's final message in a sample's output.
const FINAL_LINES: usize = 20;

/// The suite of a forge's `report` (its evidence read from `report.dir`).
pub fn suite(report: &ForgeReport) -> Suite {
    let mut suite = Suite::new(format!(
        "skillforge eval forge {}: {}",
        report.brief_id, report.skill
    ));
    suite.property("brief", report.brief_id.clone());
    suite.property("skill", report.skill.clone());
    suite.property("evidence", report.dir.display().to_string());
    if let Some(gate) = &report.gate {
        suite.property("decision", gate.decision.as_str());
    }
    if let Some(why) = &report.skipped {
        suite.cases.push(Case::new(
            CLASS,
            "forge",
            Outcome::Skipped {
                reason: why.clone(),
            },
        ));
    }
    suite
        .cases
        .extend(report.samples.iter().map(|v| sample_case(&report.dir, v)));
    if let Some(gate) = &report.gate {
        let headline = gate
            .lines
            .first()
            .cloned()
            .unwrap_or_else(|| gate.decision.as_str().to_owned());
        let outcome = match gate.decision {
            Decision::Adopt | Decision::Probation => Outcome::Passed,
            Decision::Reject | Decision::Undecided | Decision::Stopped => Outcome::Failed {
                kind: "gate".into(),
                message: headline,
                detail: gate.lines.join("\n"),
            },
        };
        let mut case = Case::new(CLASS, "gate", outcome);
        case.stdout = gate.lines.join("\n");
        if let Some(a) = &mut case.annotation {
            a.title = format!(
                "eval forge {}: gate {}",
                report.brief_id,
                gate.decision.as_str()
            );
        }
        suite.cases.push(case);
    }
    suite
}

fn sample_case(brief_dir: &Path, v: &SampleVerdict) -> Case {
    let outcome = match (v.invalid_code, v.winner) {
        (Some(code), _) => {
            let arm = v
                .invalid_arm
                .map(|a| format!(", {} arm", a.as_str()))
                .unwrap_or_default();
            Outcome::Errored {
                kind: code.as_str().into(),
                message: format!("invalid ({code}{arm}): {}", v.reason),
                detail: String::new(),
            }
        }
        (None, Some(Winner::With | Winner::Tie)) => Outcome::Passed,
        (None, Some(Winner::Without)) => Outcome::Failed {
            kind: "baseline_won".into(),
            message: format!("the baseline arm won: {}", v.reason),
            detail: String::new(),
        },
        (None, None) => Outcome::Skipped {
            reason: format!("not judged yet: {}", v.reason),
        },
    };
    let mut case = Case::new(CLASS, format!("sample {}", v.sample), outcome);
    let sdir = sample_dir(brief_dir, v.sample);
    let mut out = Vec::new();
    if let Some(w) = v.winner {
        out.push(format!(
            "winner: {} — {}",
            serde_json::to_value(w)
                .ok()
                .and_then(|x| x.as_str().map(str::to_owned))
                .unwrap_or_default(),
            v.reason
        ));
    }
    for side in ArmSide::BOTH {
        let meta = meta_dir(&sdir, side);
        let record: Option<ArmRecord> = read_json(&meta.join(RUN_FILE)).ok().flatten();
        case.time_ms = case
            .time_ms
            .max(record.as_ref().map_or(0, |r| r.duration_ms));
        let verify = match read_json::<VerifyResult>(&meta.join(VERIFY_FILE))
            .ok()
            .flatten()
        {
            None => "verify not run".to_owned(),
            Some(r) if r.passed => "verify passed".to_owned(),
            Some(r) => format!(
                "verify failed ({})",
                r.exit_code.map_or(r.exit, |c| format!("exit {c}"))
            ),
        };
        let final_message = std::fs::read_to_string(meta.join(FINAL_FILE)).unwrap_or_default();
        out.push(format!(
            "{} arm: {verify}\n{}",
            side.as_str(),
            last_lines(&final_message, FINAL_LINES)
        ));
    }
    case.stdout = out.join("\n\n");
    if let Some(a) = &mut case.annotation {
        if matches!(case.outcome, Outcome::Errored { .. }) {
            a.level = Level::Warning;
        }
        a.title = format!("eval forge: sample {}", v.sample);
    }
    case
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use skillforge_evalloop::gate::GateOutcome;

    fn verdict(n: u32, winner: Option<&str>, invalid: Option<&str>) -> SampleVerdict {
        serde_json::from_value(json!({
            "sample": n, "valid": invalid.is_none(), "invalid_code": invalid, "invalid_arm": invalid.map(|_| "with"),
            "reason": "because", "winner": winner, "verify_passed": {"with": true, "without": false},
            "tool_errors": {"with": null, "without": null},
        }))
        .unwrap()
    }

    #[test]
    fn each_sample_and_the_gate_are_cases() {
        let dir = tempfile::tempdir().unwrap();
        let meta = meta_dir(&sample_dir(dir.path(), 1), ArmSide::With);
        std::fs::create_dir_all(&meta).unwrap();
        std::fs::write(meta.join(FINAL_FILE), "SHORT: shipped\n").unwrap();
        std::fs::write(
            meta.join(VERIFY_FILE),
            r#"{"passed": true, "exit": "passed", "exit_code": 0}"#,
        )
        .unwrap();
        let report = ForgeReport {
            brief_id: "b".into(),
            skill: "tldr".into(),
            skipped: None,
            samples: vec![
                verdict(1, Some("with"), None),
                verdict(2, Some("without"), None),
                verdict(3, None, Some("skill_never_loaded")),
            ],
            aggregate: None,
            gate: Some(GateOutcome {
                decision: Decision::Reject,
                lines: vec!["REJECT: the baseline won".into(), "more".into()],
            }),
            ledger_row: None,
            dir: dir.path().to_path_buf(),
        };
        let s = suite(&report);
        let names: Vec<&str> = s.cases.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["sample 1", "sample 2", "sample 3", "gate"]);
        assert_eq!(s.cases[0].outcome, Outcome::Passed);
        assert!(
            s.cases[0]
                .stdout
                .contains("with arm: verify passed\nSHORT: shipped"),
            "{}",
            s.cases[0].stdout
        );
        assert!(
            s.cases[0].stdout.contains("without arm: verify not run"),
            "{}",
            s.cases[0].stdout
        );
        assert!(
            matches!(&s.cases[1].outcome, Outcome::Failed { kind, .. } if kind == "baseline_won")
        );
        assert_eq!(
            s.cases[2].outcome,
            Outcome::Errored {
                kind: "skill_never_loaded".into(),
                message: "invalid (skill_never_loaded, with arm): because".into(),
                detail: String::new()
            }
        );
        assert_eq!(
            s.cases[2].annotation.as_ref().map(|a| a.level),
            Some(Level::Warning)
        );
        assert!(
            matches!(&s.cases[3].outcome, Outcome::Failed { message, .. } if message == "REJECT: the baseline won")
        );
        assert_eq!(
            s.cases[3]
                .annotation
                .as_ref()
                .map(|a| (a.level, a.title.as_str())),
            Some((Level::Error, "eval forge b: gate reject"))
        );
    }
}
