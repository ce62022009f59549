//! The forge's PACE gate across repeated forges of one skill (issue 34 item 10; facts §7's
//! anytime-valid gate, offered to the eval loop): with `eval forge --pace`, the valid samples of
//! every finished forge of the same skill (oldest forge first, samples in order) and of this one
//! are the paired outcomes — a with-arm win is a win, a without-arm win a loss, a tie bets
//! nothing — and the gate's decision is PACE's: commit ⇒ ADOPT, a spent budget ⇒ REJECT, still
//! betting ⇒ UNDECIDED (no ledger verdict; forge the skill again on another brief). A STOPPED
//! forge stays stopped. The report is kept beside the aggregate (`pace.json`).

use std::path::Path;

use skillforge_contract::pace::{Pace, PaceReport, Pair, Verdict};

use super::forge::{FORGE_FILE, ForgeState, read_verdicts};
use super::gate::{Decision, GateOutcome};
use super::layout::{eval_root, read_json};
use super::sample::{SampleVerdict, Winner};

/// The file beside `aggregate.json` holding a forge's PACE report.
pub const PACE_FILE: &str = "pace.json";

/// The pair of one sample: valid samples only (an invalid pair is no evidence either way).
fn pair_of(v: &SampleVerdict) -> Option<Pair> {
    if !v.valid {
        return None;
    }
    Some(match v.winner? {
        Winner::With => Pair::Win,
        Winner::Without => Pair::Loss,
        Winner::Tie => Pair::Tie,
    })
}

/// The samples of the finished forges of `skill` other than `forge_id`, oldest forge first
/// (forge ids are time-ordered), and how many forges they came from. Unreadable forge dirs are
/// skipped (their evidence cannot be read, so it is not counted).
fn earlier_samples(home: &Path, skill: &str, forge_id: &str) -> (Vec<SampleVerdict>, u32) {
    let Ok(entries) = std::fs::read_dir(eval_root(home).join("runs")) else {
        return (Vec::new(), 0);
    };
    let mut forges: Vec<(String, std::path::PathBuf, u32)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let dir = e.path();
            let state: ForgeState = read_json(&dir.join(FORGE_FILE)).ok().flatten()?;
            (state.skill == skill && state.status == "done" && state.forge_id != forge_id)
                .then_some((state.forge_id, dir, state.samples))
        })
        .collect();
    forges.sort();
    let n = u32::try_from(forges.len()).unwrap_or(u32::MAX);
    let samples = forges
        .into_iter()
        .flat_map(|(_, dir, k)| read_verdicts(&dir, k).unwrap_or_default())
        .collect();
    (samples, n)
}

/// PACE over every forge of `skill` so far and this forge's `samples`; returns the report and the
/// number of forges it read (this one included).
pub fn pace_over_forges(
    pace: Pace,
    home: &Path,
    skill: &str,
    forge_id: &str,
    samples: &[SampleVerdict],
) -> (PaceReport, u32) {
    let (mut all, earlier) = earlier_samples(home, skill, forge_id);
    all.extend_from_slice(samples);
    (pace.run(all.iter().filter_map(pair_of)), earlier + 1)
}

/// The gate's outcome with PACE deciding (see the module docs); the majority gate's own lines
/// follow as context.
pub fn pace_gate(
    skill: &str,
    majority: &GateOutcome,
    report: &PaceReport,
    forges: u32,
) -> GateOutcome {
    if majority.decision == Decision::Stopped {
        return majority.clone();
    }
    let over = format!(
        "over {forges} forge{} of `{skill}`",
        if forges == 1 { "" } else { "s" }
    );
    let (decision, headline) = match report.verdict {
        Verdict::Commit => (
            Decision::Adopt,
            format!("ADOPT `{skill}` (PACE): {} {over}", report.reason),
        ),
        Verdict::Reject => (
            Decision::Reject,
            format!("REJECT `{skill}` (PACE): {} {over}", report.reason),
        ),
        Verdict::Continue => (
            Decision::Undecided,
            format!(
                "UNDECIDED (PACE): {} {over}; forge `{skill}` again on another brief",
                report.reason
            ),
        ),
    };
    let mut lines = vec![headline];
    lines.extend(
        majority
            .lines
            .iter()
            .map(|l| format!("this forge alone: {l}")),
    );
    GateOutcome { decision, lines }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(decision: Decision) -> GateOutcome {
        GateOutcome {
            decision,
            lines: vec!["ADOPT `s`: 3 valid of 3 samples".into()],
        }
    }

    #[test]
    fn pace_decides_the_forge_gate_commit_reject_or_undecided() {
        let pace = Pace::default();
        let commit = pace.from_counts(8, 0, 0);
        let g = pace_gate("s", &outcome(Decision::Reject), &commit, 3);
        assert_eq!(g.decision, Decision::Adopt);
        assert!(
            g.lines[0].starts_with("ADOPT `s` (PACE): PACE commits")
                && g.lines[0].ends_with("over 3 forges of `s`"),
            "{:?}",
            g.lines
        );
        assert!(
            g.lines[1].starts_with("this forge alone: "),
            "{:?}",
            g.lines
        );
        let going = pace.from_counts(3, 0, 1);
        assert_eq!(
            pace_gate("s", &outcome(Decision::Adopt), &going, 1).decision,
            Decision::Undecided,
            "a majority of three is not enough for PACE"
        );
        let spent = Pace {
            max_pairs: 2,
            ..pace
        }
        .from_counts(0, 2, 0);
        assert_eq!(
            pace_gate("s", &outcome(Decision::Adopt), &spent, 1).decision,
            Decision::Reject
        );
        assert_eq!(
            pace_gate("s", &outcome(Decision::Stopped), &commit, 1).decision,
            Decision::Stopped
        );
    }
}
