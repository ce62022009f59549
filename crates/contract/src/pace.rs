//! PACE, the anytime-valid promotion gate (issue 34 item 10; facts §7 `pace_enabled` →
//! `pace_blocked`): a testing-by-betting e-process over paired candidate-vs-champion outcomes.
//!
//! Each pair is a win (the candidate's side is better), a loss (the champion's is) or a tie.
//! Ties are discarded. Starting from wealth 1, a win multiplies the wealth by (1 + λ) and a loss
//! by (1 − λ); the gate **commits** (the candidate is better) as soon as the wealth reaches
//! 1/α, and **rejects** once `max_pairs` discordant pairs (wins + losses) were spent without
//! committing. Until then it **continues** (not enough evidence yet). Defaults: α 0.05 (threshold
//! 20), λ 0.5, 200 pairs. By Ville's inequality the chance that a candidate no better than the
//! champion ever reaches the threshold is at most α, however often the gate is looked at.
//!
//! When only aggregate counts exist ([`Pace::from_counts`]) the losses are fed first, so a count
//! summary never manufactures an early commit that the real order might not have had.
//!
//! Pure: callers read the pairs (A/B picks, canary outcomes, repeated forges, optimize
//! measurements) and record the [`PaceReport`] in their events and reports.

use serde::{Deserialize, Serialize};

/// Default α: commit when the wealth reaches 1/α = 20.
pub const DEFAULT_ALPHA: f64 = 0.05;
/// Default bet fraction λ.
pub const DEFAULT_LAMBDA: f64 = 0.5;
/// Default budget of discordant pairs, after which an uncommitted gate rejects.
pub const DEFAULT_MAX_PAIRS: u64 = 200;
/// The name a blocked promotion is recorded under (facts §7).
pub const PACE_BLOCKED: &str = "pace_blocked";

/// The gate's settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Pace {
    /// Type-I error bound α in (0, 1); the commit threshold is 1/α.
    pub alpha: f64,
    /// Bet fraction λ in (0, 1).
    pub lambda: f64,
    /// Discordant pairs after which an uncommitted gate rejects (≥ 1).
    pub max_pairs: u64,
}

impl Default for Pace {
    fn default() -> Self {
        Self {
            alpha: DEFAULT_ALPHA,
            lambda: DEFAULT_LAMBDA,
            max_pairs: DEFAULT_MAX_PAIRS,
        }
    }
}

/// One paired outcome, from the candidate's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pair {
    /// The candidate's side was better.
    Win,
    /// The champion's side was better.
    Loss,
    /// Neither (discarded).
    Tie,
}

impl Pair {
    /// The pair of two binary outcomes (candidate's, champion's): positive against negative is a
    /// win, the reverse a loss, equal a tie.
    pub fn of(candidate: bool, champion: bool) -> Self {
        match (candidate, champion) {
            (true, false) => Pair::Win,
            (false, true) => Pair::Loss,
            _ => Pair::Tie,
        }
    }
}

/// What the gate says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The wealth reached 1/α: the candidate is better.
    Commit,
    /// The budget of discordant pairs was spent without committing.
    Reject,
    /// Not decided yet: more pairs are needed.
    Continue,
}

impl Verdict {
    /// `commit`, `reject` or `continue`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Commit => "commit",
            Verdict::Reject => "reject",
            Verdict::Continue => "continue",
        }
    }
}

/// The gate's state after the pairs it read: recorded in events and reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PaceReport {
    /// The verdict.
    pub verdict: Verdict,
    /// The wealth when the gate stopped (at the commit, at the budget, or after the last pair).
    pub wealth: f64,
    /// The commit threshold 1/α.
    pub threshold: f64,
    /// Discordant pairs read (wins + losses, at most `max_pairs`).
    pub pairs: u64,
    /// Wins among them.
    pub wins: u64,
    /// Losses among them.
    pub losses: u64,
    /// Ties seen (discarded) before the gate stopped.
    pub ties: u64,
    /// The budget of discordant pairs.
    pub max_pairs: u64,
    /// One line for a person: what was decided, on what.
    pub reason: String,
}

impl PaceReport {
    /// Whether the gate committed.
    pub fn committed(&self) -> bool {
        self.verdict == Verdict::Commit
    }
}

impl Pace {
    /// Whether the settings are usable: α and λ in (0, 1), a budget of at least one pair.
    pub fn is_valid(&self) -> bool {
        self.alpha > 0.0
            && self.alpha < 1.0
            && self.lambda > 0.0
            && self.lambda < 1.0
            && self.max_pairs >= 1
    }

    /// The commit threshold 1/α.
    pub fn threshold(&self) -> f64 {
        1.0 / self.alpha
    }

    /// Runs the e-process over `pairs` in their order, stopping at the first commit or when the
    /// budget is spent.
    pub fn run(&self, pairs: impl IntoIterator<Item = Pair>) -> PaceReport {
        let threshold = self.threshold();
        let (mut wealth, mut wins, mut losses, mut ties) = (1.0_f64, 0_u64, 0_u64, 0_u64);
        let mut verdict = Verdict::Continue;
        for pair in pairs {
            match pair {
                Pair::Tie => {
                    ties += 1;
                    continue;
                }
                Pair::Win => {
                    wins += 1;
                    wealth *= 1.0 + self.lambda;
                }
                Pair::Loss => {
                    losses += 1;
                    wealth *= 1.0 - self.lambda;
                }
            }
            if wealth >= threshold {
                verdict = Verdict::Commit;
                break;
            }
            if wins + losses >= self.max_pairs {
                verdict = Verdict::Reject;
                break;
            }
        }
        let pairs = wins + losses;
        let reason = match verdict {
            Verdict::Commit => format!(
                "PACE commits: wealth {wealth:.2} reached {threshold:.0} after {pairs} discordant pairs ({wins} won, {losses} lost)"
            ),
            Verdict::Reject => format!(
                "PACE rejects: {pairs} discordant pairs spent ({wins} won, {losses} lost) and the wealth {wealth:.2} never reached {threshold:.0}"
            ),
            Verdict::Continue => format!(
                "PACE continues: wealth {wealth:.2} of {threshold:.0} after {pairs} of {} discordant pairs ({wins} won, {losses} lost); more paired outcomes are needed",
                self.max_pairs
            ),
        };
        PaceReport {
            verdict,
            wealth,
            threshold,
            pairs,
            wins,
            losses,
            ties,
            max_pairs: self.max_pairs,
            reason,
        }
    }

    /// Runs the e-process over aggregate counts: the losses first, then the wins (ties carry no
    /// bet), so a count summary never commits earlier than any real order of the same pairs could.
    pub fn from_counts(&self, wins: u64, losses: u64, ties: u64) -> PaceReport {
        let mut report = self.run(
            std::iter::repeat_n(Pair::Loss, usize::try_from(losses).unwrap_or(usize::MAX)).chain(
                std::iter::repeat_n(Pair::Win, usize::try_from(wins).unwrap_or(usize::MAX)),
            ),
        );
        report.ties = ties;
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use Pair::{Loss as L, Tie as T, Win as W};

    // Table-driven arithmetic: (pairs, verdict, wealth, discordant pairs read).
    #[test]
    fn pace_wealth_moves_by_lambda_and_commits_at_one_over_alpha() {
        let pace = Pace::default();
        assert_eq!(pace.threshold(), 20.0);
        let cases: &[(&[Pair], Verdict, f64, u64)] = &[
            (&[], Verdict::Continue, 1.0, 0),
            (&[T, T, T], Verdict::Continue, 1.0, 0),
            (&[W], Verdict::Continue, 1.5, 1),
            (&[L], Verdict::Continue, 0.5, 1),
            (&[W, L], Verdict::Continue, 0.75, 2),
            // 1.5^7 = 17.09 < 20, 1.5^8 = 25.63 ≥ 20.
            (&[W, W, W, W, W, W, W], Verdict::Continue, 17.0859375, 7),
            (&[W, W, W, W, W, W, W, W], Verdict::Commit, 25.62890625, 8),
            // Ties between are discarded: the same eight wins commit.
            (
                &[W, T, W, W, T, W, W, W, W, T, W],
                Verdict::Commit,
                25.62890625,
                8,
            ),
            // The gate stops at the commit: the loss after it is not read.
            (
                &[W, W, W, W, W, W, W, W, L],
                Verdict::Commit,
                25.62890625,
                8,
            ),
        ];
        for (pairs, verdict, wealth, read) in cases {
            let r = pace.run(pairs.iter().copied());
            assert_eq!(r.verdict, *verdict, "{pairs:?}: {}", r.reason);
            assert!(
                (r.wealth - wealth).abs() < 1e-9,
                "{pairs:?}: wealth {} != {wealth}",
                r.wealth
            );
            assert_eq!(r.pairs, *read, "{pairs:?}");
        }
    }

    #[test]
    fn pace_rejects_when_the_budget_of_discordant_pairs_is_spent() {
        let pace = Pace {
            max_pairs: 4,
            ..Pace::default()
        };
        let r = pace.run([W, L, T, W, L, W, W, W, W, W, W]);
        assert_eq!(r.verdict, Verdict::Reject, "{}", r.reason);
        assert_eq!((r.pairs, r.wins, r.losses, r.ties), (4, 2, 2, 1));
        // The default budget: 200 alternating pairs never commit.
        let r = Pace::default().run((0..400).map(|i| if i % 2 == 0 { W } else { L }));
        assert_eq!((r.verdict, r.pairs), (Verdict::Reject, 200));
        assert!(r.reason.starts_with("PACE rejects"), "{}", r.reason);
    }

    // From aggregate counts the losses are fed first: 9 wins then 1 loss would commit in that
    // order (1.5^8 ≥ 20 before the loss), but the count summary (9 wins, 1 loss) does not
    // (0.5 · 1.5^9 = 19.2), so a summary never manufactures an early commit.
    #[test]
    fn pace_from_counts_feeds_the_losses_first() {
        let pace = Pace::default();
        assert_eq!(
            pace.run([W, W, W, W, W, W, W, W, W, L]).verdict,
            Verdict::Commit
        );
        let r = pace.from_counts(9, 1, 3);
        assert_eq!(r.verdict, Verdict::Continue, "{}", r.reason);
        assert!((r.wealth - 0.5 * 1.5f64.powi(9)).abs() < 1e-9);
        assert_eq!((r.wins, r.losses, r.ties), (9, 1, 3));
        let r = pace.from_counts(10, 1, 0);
        assert_eq!(
            r.verdict,
            Verdict::Commit,
            "0.5 · 1.5^10 = 28.8: {}",
            r.reason
        );
        // A budget spent on losses rejects before any win is read.
        let r = Pace {
            max_pairs: 5,
            ..pace
        }
        .from_counts(50, 5, 0);
        assert_eq!((r.verdict, r.wins, r.losses), (Verdict::Reject, 0, 5));
    }

    #[test]
    fn pace_pairs_of_binary_outcomes() {
        assert_eq!(Pair::of(true, false), W);
        assert_eq!(Pair::of(false, true), L);
        assert_eq!(Pair::of(true, true), T);
        assert_eq!(Pair::of(false, false), T);
    }

    #[test]
    fn pace_settings_are_validated() {
        assert!(Pace::default().is_valid());
        for bad in [
            Pace {
                alpha: 0.0,
                ..Pace::default()
            },
            Pace {
                lambda: 1.0,
                ..Pace::default()
            },
            Pace {
                max_pairs: 0,
                ..Pace::default()
            },
        ] {
            assert!(!bad.is_valid(), "{bad:?}");
        }
    }
}
