//! A verification as a suite: one case per command, in order, with its output tails.
//!
//! A command that exited 0 passes; one that exited non-zero, timed out, was killed or censored
//! fails; one that could not run (126/127) is an error; one never started is skipped (without
//! an annotation: the command before it carries the news). A verdict no command explains (a
//! clone that failed, an empty command list, a cancelled run) adds a `verdict` case with its
//! reason, so the suite never passes where the exit code does not.

use skillforge_runner_sandbox::{CommandReport, CommandStatus, Verdict, VerifyReport};

use super::suite::{Annotation, Case, Level, Outcome, Suite, last_lines};

const CLASS: &str = "skillforge.verify";
/// Lines of a failing command's output in its failure body and annotation.
const DETAIL_LINES: usize = 20;
const ANNOTATION_LINES: usize = 10;

/// The suite of a finished verification job `job_id` with `report`.
pub fn suite(job_id: &str, report: &VerifyReport) -> Suite {
    let mut suite = Suite::new(format!(
        "skillforge verify {} @ {}",
        report.repo.display(),
        report.rev
    ));
    suite.property("job_id", job_id);
    suite.property("repo", report.repo.display().to_string());
    suite.property("rev", report.rev.clone());
    suite.property("commit", report.commit.clone());
    suite.property("verdict", label(report.verdict));
    suite.property("reason", report.reason.clone().unwrap_or_default());
    suite.property(
        "confinement",
        serde_json::to_value(report.confinement)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
    );
    suite.cases = report.commands.iter().map(command_case).collect();
    let explained = suite
        .cases
        .iter()
        .any(|c| matches!(c.outcome, Outcome::Failed { .. } | Outcome::Errored { .. }));
    if report.verdict != Verdict::Pass && !explained {
        let message = report
            .reason
            .clone()
            .unwrap_or_else(|| format!("verdict {}", label(report.verdict)));
        let outcome = match report.verdict {
            Verdict::Fail => Outcome::Failed {
                kind: "verdict".into(),
                message,
                detail: String::new(),
            },
            _ => Outcome::Errored {
                kind: "skipped".into(),
                message,
                detail: String::new(),
            },
        };
        suite.cases.push(Case::new(CLASS, "verdict", outcome));
    }
    suite
}

/// The suite of a verification job `job_id` that ended without a report, with why.
pub fn no_report(job_id: &str, why: &str) -> Suite {
    let mut suite = Suite::new("skillforge verify");
    suite.property("job_id", job_id);
    let message = format!("verification job {job_id} could not run: {why}");
    suite.cases.push(Case::new(
        CLASS,
        "verification job",
        Outcome::Errored {
            kind: "environment".into(),
            message,
            detail: String::new(),
        },
    ));
    suite
}

fn command_case(c: &CommandReport) -> Case {
    let output = if c.stderr_tail.trim().is_empty() {
        &c.stdout_tail
    } else {
        &c.stderr_tail
    };
    let failed = |kind: &str, message: String| Outcome::Failed {
        kind: kind.into(),
        message,
        detail: last_lines(output, DETAIL_LINES),
    };
    let outcome = match c.status {
        CommandStatus::Passed => Outcome::Passed,
        CommandStatus::Failed => failed(
            "failed",
            format!(
                "exit {}",
                c.exit_code
                    .map_or_else(|| "?".to_owned(), |code| code.to_string())
            ),
        ),
        CommandStatus::TimedOut => failed(
            "timed_out",
            "timed out (its process group was killed)".into(),
        ),
        CommandStatus::Killed => failed("killed", "killed by a signal".into()),
        CommandStatus::Censored => failed("censored", "censored its own result (exit 125)".into()),
        CommandStatus::NotRunnable => Outcome::Errored {
            kind: "not_runnable".into(),
            message: format!(
                "could not run{}",
                c.exit_code
                    .map(|code| format!(" (exit {code})"))
                    .unwrap_or_default()
            ),
            detail: last_lines(output, DETAIL_LINES),
        },
        CommandStatus::NotRun => Outcome::Skipped {
            reason: "not run: an earlier command failed or the run stopped".into(),
        },
    };
    let mut case = Case::new(CLASS, c.command.clone(), outcome);
    case.time_ms = c.duration_ms;
    case.stdout = c.stdout_tail.clone();
    case.stderr = c.stderr_tail.clone();
    case.annotation = match &case.outcome {
        Outcome::Failed { message, .. } | Outcome::Errored { message, .. } => {
            let tail = last_lines(output, ANNOTATION_LINES);
            let message = if tail.is_empty() {
                format!("`{}`: {message}", c.command)
            } else {
                format!("`{}`: {message}\n{tail}", c.command)
            };
            Some(Annotation {
                level: Level::Error,
                title: format!("verify: {}", c.command),
                message,
                file: None,
                line: None,
            })
        }
        Outcome::Passed | Outcome::Skipped { .. } => None,
    };
    case
}

fn label(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "pass",
        Verdict::Fail => "fail",
        Verdict::Skipped => "skipped",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(
        line: &str,
        status: CommandStatus,
        exit_code: Option<i32>,
        stderr: &str,
    ) -> CommandReport {
        CommandReport {
            command: line.into(),
            status,
            exit_code,
            duration_ms: 12,
            stdout_tail: "out\n".into(),
            stderr_tail: stderr.into(),
        }
    }

    fn report(
        verdict: Verdict,
        reason: Option<&str>,
        commands: Vec<CommandReport>,
    ) -> VerifyReport {
        serde_json::from_value(serde_json::json!({
            "verdict": verdict, "hard": null, "reason": reason, "commands": commands, "repo": "/r", "rev": "HEAD",
            "commit": "c0ffee", "confinement": "none", "network": true, "sandbox_removed": true, "duration_ms": 40,
        }))
        .unwrap()
    }

    #[test]
    fn each_command_is_a_case_as_it_ended() {
        let r = report(
            Verdict::Fail,
            Some("`exit 4` exited 4"),
            vec![
                command("true", CommandStatus::Passed, Some(0), ""),
                command("exit 4", CommandStatus::Failed, Some(4), "boom\n"),
                command("true", CommandStatus::NotRun, None, ""),
            ],
        );
        let s = suite("j1", &r);
        let kinds: Vec<&str> = s
            .cases
            .iter()
            .map(|c| match &c.outcome {
                Outcome::Passed => "passed",
                Outcome::Failed { kind, .. } | Outcome::Errored { kind, .. } => kind,
                Outcome::Skipped { .. } => "skipped",
            })
            .collect();
        assert_eq!(kinds, ["passed", "failed", "skipped"]);
        assert_eq!(
            s.cases[1].outcome,
            Outcome::Failed {
                kind: "failed".into(),
                message: "exit 4".into(),
                detail: "boom".into()
            }
        );
        let a = s.cases[1].annotation.as_ref().unwrap();
        assert_eq!(
            (a.title.as_str(), a.message.as_str()),
            ("verify: exit 4", "`exit 4`: exit 4\nboom")
        );
        assert_eq!(
            s.cases[2].annotation, None,
            "a command never started is not annotated"
        );
        assert_eq!(s.cases[1].stdout, "out\n");
        assert!(s.properties.contains(&("verdict".into(), "fail".into())));
    }

    #[test]
    fn a_verdict_no_command_explains_gets_its_own_case() {
        for (verdict, commands, expected) in [
            (
                Verdict::Pass,
                vec![command("true", CommandStatus::Passed, Some(0), "")],
                None,
            ),
            (Verdict::Skipped, vec![], Some("skipped")),
            (
                Verdict::Fail,
                vec![command("true", CommandStatus::NotRun, None, "")],
                Some("verdict"),
            ),
            (
                Verdict::Fail,
                vec![command("x", CommandStatus::TimedOut, None, "")],
                None,
            ),
        ] {
            let s = suite("j", &report(verdict, Some("why"), commands));
            let extra = s
                .cases
                .iter()
                .find(|c| c.name == "verdict")
                .map(|c| match &c.outcome {
                    Outcome::Failed { kind, .. } | Outcome::Errored { kind, .. } => kind.clone(),
                    _ => "other".into(),
                });
            assert_eq!(extra.as_deref(), expected, "{verdict:?}");
        }
    }
}
