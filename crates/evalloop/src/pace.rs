//! The forge's PACE gate across repeated forges of one skill (issue 34 item 10; facts §7's
//! anytime-valid gate, offered to the eval loop): with `eval forge --pace`, the valid samples of
//! every finished forge of the same comparison — the same skill content, baseline, arms and
//! judge; others are left out and counted — (oldest forge first, samples in order) and of this one
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

/// Why an earlier forge of the same skill is not the same comparison as `this` (its samples
/// would bet on another question): another version of the skill, another baseline, other arms or
/// another judge; unrecorded counts as different (missing evidence is not assumed equal).
fn differs(this: &ForgeState, earlier: &ForgeState) -> Option<&'static str> {
    let rival = |s: &ForgeState| {
        s.rival
            .as_ref()
            .and_then(|p| p.file_name())
            .map(|n| n.to_owned())
    };
    if earlier.skill_digest.is_none() || earlier.skill_digest != this.skill_digest {
        return Some("another version of the skill");
    }
    if rival(earlier) != rival(this) {
        return Some("another baseline");
    }
    if earlier.arms.is_none() || earlier.arms != this.arms {
        return Some("other arms (runtime or model)");
    }
    if earlier.judge.is_none() || earlier.judge != this.judge {
        return Some("another judge");
    }
    None
}

/// Which forges PACE read: how many (this one included) and the earlier forges of the skill left
/// out, counted by why.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pooled {
    /// Forges whose samples were pooled, this one included.
    pub forges: u32,
    /// Earlier finished forges of the skill not pooled: (why, how many), in a stable order.
    pub left_out: std::collections::BTreeMap<&'static str, u32>,
}

impl Pooled {
    /// `over 2 forges of `s`; 1 earlier forge left out (another judge)`.
    fn words(&self, skill: &str) -> String {
        let plural = |n: u32| if n == 1 { "" } else { "s" };
        let mut out = format!(
            "over {} forge{} of `{skill}`",
            self.forges,
            plural(self.forges)
        );
        let n: u32 = self.left_out.values().sum();
        if n > 0 {
            let why: Vec<String> = self
                .left_out
                .iter()
                .map(|(why, k)| format!("{k}: {why}"))
                .collect();
            out.push_str(&format!(
                "; {n} earlier forge{} left out ({})",
                plural(n),
                why.join(", ")
            ));
        }
        out
    }
}

/// The samples of the finished forges of `this` forge's skill that ran the same comparison
/// ([`differs`]), oldest forge first (forge ids are time-ordered), and what was pooled or left
/// out. Unreadable forge dirs are skipped (their evidence cannot be read, so it is not counted).
fn earlier_samples(home: &Path, this: &ForgeState) -> (Vec<SampleVerdict>, Pooled) {
    let mut pooled = Pooled::default();
    let Ok(entries) = std::fs::read_dir(eval_root(home).join("runs")) else {
        return (Vec::new(), pooled);
    };
    let mut forges: Vec<(String, std::path::PathBuf, u32)> = Vec::new();
    for e in entries.filter_map(Result::ok) {
        let dir = e.path();
        let Some(state) = read_json::<ForgeState>(&dir.join(FORGE_FILE))
            .ok()
            .flatten()
        else {
            continue;
        };
        if state.skill != this.skill || state.status != "done" || state.forge_id == this.forge_id {
            continue;
        }
        match differs(this, &state) {
            Some(why) => *pooled.left_out.entry(why).or_default() += 1,
            None => forges.push((state.forge_id, dir, state.samples)),
        }
    }
    forges.sort();
    pooled.forges = u32::try_from(forges.len()).unwrap_or(u32::MAX);
    let samples = forges
        .into_iter()
        .flat_map(|(_, dir, k)| read_verdicts(&dir, k).unwrap_or_default())
        .collect();
    (samples, pooled)
}

/// PACE over every earlier forge of `this` forge's skill that ran the same comparison (same
/// skill content, baseline, arms and judge) and this forge's `samples`; returns the report and
/// what was pooled (this forge included) or left out.
pub fn pace_over_forges(
    pace: Pace,
    home: &Path,
    this: &ForgeState,
    samples: &[SampleVerdict],
) -> (PaceReport, Pooled) {
    let (mut all, mut pooled) = earlier_samples(home, this);
    all.extend_from_slice(samples);
    pooled.forges += 1;
    (pace.run(all.iter().filter_map(pair_of)), pooled)
}

/// The gate's outcome with PACE deciding (see the module docs); the majority gate's own lines
/// follow as context.
pub fn pace_gate(
    skill: &str,
    majority: &GateOutcome,
    report: &PaceReport,
    pooled: &Pooled,
) -> GateOutcome {
    if majority.decision == Decision::Stopped {
        return majority.clone();
    }
    let over = pooled.words(skill);
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

    fn over(forges: u32) -> Pooled {
        Pooled {
            forges,
            ..Pooled::default()
        }
    }

    #[test]
    fn pace_decides_the_forge_gate_commit_reject_or_undecided() {
        let pace = Pace::default();
        let commit = pace.from_counts(8, 0, 0);
        let g = pace_gate("s", &outcome(Decision::Reject), &commit, &over(3));
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
            pace_gate("s", &outcome(Decision::Adopt), &going, &over(1)).decision,
            Decision::Undecided,
            "a majority of three is not enough for PACE"
        );
        let spent = Pace {
            max_pairs: 2,
            ..pace
        }
        .from_counts(0, 2, 0);
        assert_eq!(
            pace_gate("s", &outcome(Decision::Adopt), &spent, &over(1)).decision,
            Decision::Reject
        );
        assert_eq!(
            pace_gate("s", &outcome(Decision::Stopped), &commit, &over(1)).decision,
            Decision::Stopped
        );
    }
}
