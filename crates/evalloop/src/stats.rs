//! The uncertainty of a forge's verdict (issue 34 item 13): each arm's verify pass rate with its
//! Wilson 95% interval, the exact two-sided sign test on the samples the judge decided (ties
//! dropped), and the verdict's margin. Bare rates say nothing about how sure they are; three
//! samples are three samples.

use serde::Serialize;

use super::arm::ArmPair;
use super::sample::{SampleVerdict, Winner};

/// z for a two-sided 95% interval.
const Z95: f64 = 1.959_963_984_540_054;

/// A proportion with its Wilson score 95% interval; all `None` when `n` is 0.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rate {
    /// Successes.
    pub k: u32,
    /// Trials.
    pub n: u32,
    /// k / n.
    pub rate: Option<f64>,
    /// Wilson 95% interval `[low, high]`.
    pub interval: Option<(f64, f64)>,
}

impl Rate {
    /// `k` of `n` with its Wilson score interval (z = 1.96).
    pub fn wilson(k: u32, n: u32) -> Rate {
        if n == 0 {
            return Rate {
                k,
                n,
                rate: None,
                interval: None,
            };
        }
        let (k_f, n_f) = (f64::from(k), f64::from(n));
        let p = k_f / n_f;
        let z2 = Z95 * Z95;
        let denom = 1.0 + z2 / n_f;
        let centre = (p + z2 / (2.0 * n_f)) / denom;
        let half = Z95 * (p * (1.0 - p) / n_f + z2 / (4.0 * n_f * n_f)).sqrt() / denom;
        Rate {
            k,
            n,
            rate: Some(p),
            interval: Some(((centre - half).max(0.0), (centre + half).min(1.0))),
        }
    }

    /// `2 of 3 (67%, 95% interval 21–94%)`, or `none measured`.
    pub fn human(&self) -> String {
        match (self.rate, self.interval) {
            (Some(p), Some((lo, hi))) => format!(
                "{} of {} ({:.0}%, 95% interval {:.0}–{:.0}%)",
                self.k,
                self.n,
                p * 100.0,
                lo * 100.0,
                hi * 100.0
            ),
            _ => "none measured".to_owned(),
        }
    }
}

/// The exact two-sided sign test of `wins` against `losses` (ties dropped): the probability,
/// under "neither arm is better" (each decided sample a fair coin), of a split at least this
/// uneven. `None` with no decided sample.
pub fn sign_test(wins: u32, losses: u32) -> Option<f64> {
    let n = wins + losses;
    if n == 0 {
        return None;
    }
    let k = wins.min(losses);
    // P(X ≤ k) for X ~ Binomial(n, 1/2), doubled, capped at 1.
    let mut tail = 0.0;
    let mut choose = 1.0_f64;
    for i in 0..=k {
        if i > 0 {
            choose = choose * f64::from(n - i + 1) / f64::from(i);
        }
        tail += choose;
    }
    Some((2.0 * tail / 2f64.powi(n as i32)).min(1.0))
}

/// A forge's verdict with its uncertainty.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerdictStats {
    /// Each arm's verify pass rate over the samples whose verify ran.
    pub verify: ArmPair<Rate>,
    /// The candidate's wins among the valid samples the judge decided (ties dropped).
    pub decided: Rate,
    /// Wins with − wins without, over the valid samples.
    pub margin: i64,
    /// The exact two-sided sign test on the decided samples.
    pub sign_test_p: Option<f64>,
}

impl VerdictStats {
    /// From the written sample verdicts (`verdict.json`, valid or not: a verdict is written only
    /// once both arms' verify ran, so every one carries both verify results).
    pub fn of(samples: &[SampleVerdict]) -> VerdictStats {
        let passes = |with: bool| {
            samples
                .iter()
                .filter(|v| {
                    if with {
                        v.verify_passed.with
                    } else {
                        v.verify_passed.without
                    }
                })
                .count() as u32
        };
        let n = samples.len() as u32;
        let valid: Vec<&SampleVerdict> = samples.iter().filter(|v| v.valid).collect();
        let wins = valid
            .iter()
            .filter(|v| v.winner == Some(Winner::With))
            .count() as u32;
        let losses = valid
            .iter()
            .filter(|v| v.winner == Some(Winner::Without))
            .count() as u32;
        VerdictStats {
            verify: ArmPair {
                with: Rate::wilson(passes(true), n),
                without: Rate::wilson(passes(false), n),
            },
            decided: Rate::wilson(wins, wins + losses),
            margin: i64::from(wins) - i64::from(losses),
            sign_test_p: sign_test(wins, losses),
        }
    }

    /// Lines for people.
    pub fn human(&self) -> Vec<String> {
        let mut lines = vec![
            format!(
                "verify passed: with {}; without {}",
                self.verify.with.human(),
                self.verify.without.human()
            ),
            format!(
                "candidate won {} of the decided samples (margin {:+})",
                self.decided.human(),
                self.margin
            ),
        ];
        if let Some(p) = self.sign_test_p {
            lines.push(format!("sign test on the decided samples: p = {p:.3} (two-sided; small samples rarely reach p < 0.05)"));
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_intervals_match_the_published_values() {
        // Table: (k, n) → interval, as computed by the Wilson score formula (z = 1.96).
        let check = |k: u32, n: u32, lo: f64, hi: f64| {
            let (l, h) = Rate::wilson(k, n).interval.unwrap();
            assert!(
                (l - lo).abs() < 5e-4 && (h - hi).abs() < 5e-4,
                "{k}/{n}: {l:.4}–{h:.4}, want {lo}–{hi}"
            );
        };
        check(3, 3, 0.4385, 1.0);
        check(2, 3, 0.2077, 0.9385);
        check(0, 3, 0.0, 0.5615);
        check(50, 100, 0.4038, 0.5962);
        assert_eq!(Rate::wilson(0, 0).interval, None);
        assert_eq!(
            Rate::wilson(2, 3).human(),
            "2 of 3 (67%, 95% interval 21–94%)"
        );
    }

    #[test]
    fn the_sign_test_is_the_exact_binomial_tail() {
        let check = |w: u32, l: u32, p: f64| {
            assert!(
                (sign_test(w, l).unwrap() - p).abs() < 1e-9,
                "{w}-{l}: {:?}",
                sign_test(w, l)
            )
        };
        check(3, 0, 0.25);
        check(2, 1, 1.0);
        check(5, 0, 0.0625);
        check(10, 0, 2.0 / 1024.0);
        check(8, 2, 2.0 * 56.0 / 1024.0);
        assert_eq!(sign_test(0, 0), None);
    }
}
