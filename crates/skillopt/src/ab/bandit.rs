//! The Beta-Bernoulli bandit of Mode B (seed: SkillOpt, "Champion-challenger A/B preferences"
//! › The bandit; facts §6; S-68, S-69).
//!
//! Each `(template_id, version_id)` is one arm with a uniform Beta(1,1) prior; a win adds 1 to
//! `alpha`, a loss 1 to `beta`, `pulls = wins + losses`. The posterior probability that the
//! challenger's rate beats the champion's, P(challenger > champion), is computed two ways:
//!
//! * [`p_exact`]: the closed form for integer parameters (Evan Miller's sum,
//!   Σ_{i<α_c} B(α_h+i, β_h+β_c) / ((β_c+i) B(1+i, β_c) B(α_h, β_h)), in log space);
//! * [`p_monte_carlo`]: K draws from both posteriors (Gamma by Marsaglia–Tsang, Beta as
//!   X/(X+Y)), counting strict `>` (a tie does not beat), deterministic given the seed.
//!
//! Both are posterior probabilities, never p-values. [`credible_interval`] gives an arm's
//! equal-tailed 95% interval from the exact Beta CDF (integer parameters).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

/// Monte Carlo draws when none are asked for (facts §6 `DefaultProbDraws`).
pub const DEFAULT_DRAWS: u32 = 20_000;
/// `bandit_min_samples` default (facts §6): pulls before live A/B may intercept (S-69, S-71).
pub const DEFAULT_MIN_SAMPLES: u64 = 30;
/// Fixed seed of the candidate notify seam (facts §6, `cli/candidate_notify.go`).
pub const NOTIFY_SEED: u64 = 473;
/// `ab --seed N` draws Monte Carlo with `N ^ MC_SEED_XOR` (facts §6); N itself seeds the shuffle.
pub const MC_SEED_XOR: u64 = 0x6a09_e667_f3bc_c908;

/// One arm's sufficient statistic (`skillopt_bandit_arms`: alpha, beta REAL default 1, pulls).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Arm {
    /// 1 + wins.
    pub alpha: f64,
    /// 1 + losses.
    pub beta: f64,
    /// wins + losses.
    pub pulls: u64,
}

impl Default for Arm {
    fn default() -> Self {
        Self::PRIOR
    }
}

impl Arm {
    /// The uniform Beta(1,1) prior, no pulls.
    pub const PRIOR: Arm = Arm {
        alpha: 1.0,
        beta: 1.0,
        pulls: 0,
    };

    /// The arm after one more win (`alpha + 1`) or loss (`beta + 1`).
    pub fn updated(self, won: bool) -> Arm {
        let (alpha, beta) = if won {
            (self.alpha + 1.0, self.beta)
        } else {
            (self.alpha, self.beta + 1.0)
        };
        Arm {
            alpha,
            beta,
            pulls: self.pulls + 1,
        }
    }

    /// Posterior mean `alpha / (alpha + beta)`.
    pub fn mean(self) -> f64 {
        self.alpha / (self.alpha + self.beta)
    }

    /// `(alpha, beta)` as integers ≥ 1 when both are whole numbers (every arm this store writes).
    fn integer_params(self) -> Option<(u64, u64)> {
        let whole =
            |x: f64| (x.is_finite() && x >= 1.0 && x.fract() == 0.0 && x < 1e9).then_some(x as u64);
        Some((whole(self.alpha)?, whole(self.beta)?))
    }
}

/// ln(n!) for n in 0..=max, by summation (exact to f64 rounding; O(max)).
fn ln_factorials(max: u64) -> Vec<f64> {
    let mut table = Vec::with_capacity(max as usize + 1);
    let mut acc = 0.0;
    table.push(0.0);
    for k in 1..=max {
        acc += (k as f64).ln();
        table.push(acc);
    }
    table
}

/// ln B(a, b) = ln((a-1)! (b-1)! / (a+b-1)!) for integers a, b ≥ 1.
fn ln_beta(lf: &[f64], a: u64, b: u64) -> f64 {
    lf[(a - 1) as usize] + lf[(b - 1) as usize] - lf[(a + b - 1) as usize]
}

/// Exact P(challenger > champion) for integer Beta parameters (module docs); `None` when a
/// parameter is not a whole number ≥ 1 (missing, never approximated). In [0, 1].
pub fn p_exact(challenger: Arm, champion: Arm) -> Option<f64> {
    let (ac, bc) = challenger.integer_params()?;
    let (ah, bh) = champion.integer_params()?;
    let lf = ln_factorials(ac + bc + ah + bh);
    let base = ln_beta(&lf, ah, bh);
    let total: f64 = (0..ac)
        .map(|i| {
            (ln_beta(&lf, ah + i, bh + bc)
                - ((bc + i) as f64).ln()
                - ln_beta(&lf, 1 + i, bc)
                - base)
                .exp()
        })
        .sum();
    Some(total.clamp(0.0, 1.0))
}

/// A standard normal draw (Marsaglia's polar method).
fn standard_normal(rng: &mut StdRng) -> f64 {
    loop {
        let u: f64 = rng.random::<f64>() * 2.0 - 1.0;
        let v: f64 = rng.random::<f64>() * 2.0 - 1.0;
        let s = u * u + v * v;
        if s > 0.0 && s < 1.0 {
            return u * (-2.0 * s.ln() / s).sqrt();
        }
    }
}

/// A Gamma(shape, 1) draw by Marsaglia–Tsang; shape < 1 is boosted as G(shape+1)·U^(1/shape)
/// (facts §6). `shape` > 0.
fn gamma(rng: &mut StdRng, shape: f64) -> f64 {
    if shape < 1.0 {
        let u: f64 = rng.random::<f64>();
        return gamma(rng, shape + 1.0) * u.powf(1.0 / shape);
    }
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = standard_normal(rng);
        let v = (1.0 + c * x).powi(3);
        if v <= 0.0 {
            continue;
        }
        let u: f64 = rng.random::<f64>();
        if u < 1.0 - 0.0331 * x.powi(4) || u.ln() < 0.5 * x * x + d * (1.0 - v + v.ln()) {
            return d * v;
        }
    }
}

fn beta_draw(rng: &mut StdRng, arm: Arm) -> f64 {
    let x = gamma(rng, arm.alpha);
    let y = gamma(rng, arm.beta);
    x / (x + y)
}

/// Monte Carlo P(challenger > champion): `draws` paired posterior draws (0 ⇒ [`DEFAULT_DRAWS`]),
/// strict `>`; the same seed gives the same value (S-68). In [0, 1].
pub fn p_monte_carlo(challenger: Arm, champion: Arm, draws: u32, seed: u64) -> f64 {
    let draws = if draws == 0 { DEFAULT_DRAWS } else { draws };
    let mut rng = StdRng::seed_from_u64(seed);
    let wins = (0..draws)
        .filter(|_| beta_draw(&mut rng, challenger) > beta_draw(&mut rng, champion))
        .count();
    wins as f64 / f64::from(draws)
}

/// Regularized incomplete beta I_x(a, b) for integers: P(Binomial(a+b-1, x) ≥ a).
fn beta_cdf(lf: &[f64], a: u64, b: u64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let n = a + b - 1;
    let (lx, l1x) = (x.ln(), (1.0 - x).ln());
    (a..=n)
        .map(|k| {
            (lf[n as usize] - lf[k as usize] - lf[(n - k) as usize]
                + k as f64 * lx
                + (n - k) as f64 * l1x)
                .exp()
        })
        .sum::<f64>()
        .clamp(0.0, 1.0)
}

/// The equal-tailed credible interval of `arm` with mass `level` (e.g. 0.95): the
/// `(1-level)/2` and `(1+level)/2` quantiles of Beta(alpha, beta), by bisection on the exact CDF
/// to 1e-9. `None` for non-integer parameters.
pub fn credible_interval(arm: Arm, level: f64) -> Option<(f64, f64)> {
    let (a, b) = arm.integer_params()?;
    let lf = ln_factorials(a + b);
    let quantile = |q: f64| {
        let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
        while hi - lo > 1e-9 {
            let mid = 0.5 * (lo + hi);
            if beta_cdf(&lf, a, b, mid) < q {
                lo = mid
            } else {
                hi = mid
            }
        }
        0.5 * (lo + hi)
    };
    Some((quantile((1.0 - level) / 2.0), quantile((1.0 + level) / 2.0)))
}

/// P(challenger > champion) both ways, with each arm's 95% credible interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Confidence {
    /// Closed form; `None` when an arm has non-integer parameters.
    pub p_exact: Option<f64>,
    /// Monte Carlo estimate.
    pub p_monte_carlo: f64,
    /// Draws used (K).
    pub draws: u32,
    /// Seed of the draws.
    pub seed: u64,
    /// The challenger's arm.
    pub challenger: Arm,
    /// The champion's arm.
    pub champion: Arm,
    /// Challenger 95% interval of its win rate.
    pub challenger_ci95: Option<(f64, f64)>,
    /// Champion 95% interval of its win rate.
    pub champion_ci95: Option<(f64, f64)>,
}

impl Confidence {
    /// Computes both estimates and both intervals.
    pub fn compute(challenger: Arm, champion: Arm, draws: u32, seed: u64) -> Self {
        let draws = if draws == 0 { DEFAULT_DRAWS } else { draws };
        Self {
            p_exact: p_exact(challenger, champion),
            p_monte_carlo: p_monte_carlo(challenger, champion, draws, seed),
            draws,
            seed,
            challenger,
            champion,
            challenger_ci95: credible_interval(challenger, 0.95),
            champion_ci95: credible_interval(champion, 0.95),
        }
    }

    /// The seed's summary line, from the Monte Carlo estimate: `"NN% likely better over K samples"`
    /// (facts §6: `"%.0f%% likely better over %d samples"`).
    pub fn summary(&self) -> String {
        format!(
            "{:.0}% likely better over {} samples",
            self.p_monte_carlo * 100.0,
            self.draws
        )
    }

    /// The probability the guardrails read (exact when available, else Monte Carlo).
    pub fn probability(&self) -> f64 {
        self.p_exact.unwrap_or(self.p_monte_carlo)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arm(alpha: f64, beta: f64) -> Arm {
        Arm {
            alpha,
            beta,
            pulls: (alpha + beta - 2.0) as u64,
        }
    }

    // S-68
    #[test]
    fn s68_a_win_bumps_alpha_a_loss_bumps_beta() {
        let challenger = Arm::PRIOR.updated(true);
        let champion = Arm::PRIOR.updated(false);
        assert_eq!(
            challenger,
            Arm {
                alpha: 2.0,
                beta: 1.0,
                pulls: 1
            }
        );
        assert_eq!(
            champion,
            Arm {
                alpha: 1.0,
                beta: 2.0,
                pulls: 1
            }
        );
    }

    #[test]
    fn exact_matches_hand_computed_values() {
        let check = |c: Arm, h: Arm, expected: f64| {
            let got = p_exact(c, h).unwrap();
            assert!(
                (got - expected).abs() < 1e-12,
                "{c:?} vs {h:?}: {got} != {expected}"
            );
        };
        check(Arm::PRIOR, Arm::PRIOR, 0.5);
        // ∫∫_{x>y} 2x · 2(1-y) = 5/6
        check(arm(2.0, 1.0), arm(1.0, 2.0), 5.0 / 6.0);
        check(arm(1.0, 2.0), arm(2.0, 1.0), 1.0 / 6.0);
        // Beta(2,1) vs the uniform prior: ∫ 2x · x dx = 2/3
        check(arm(2.0, 1.0), Arm::PRIOR, 2.0 / 3.0);
        assert_eq!(
            p_exact(arm(1.5, 1.0), Arm::PRIOR),
            None,
            "non-integer ⇒ missing, not approximated"
        );
    }

    #[test]
    fn exact_is_complementary_and_symmetric() {
        for (c, h) in [
            ((3.0, 7.0), (5.0, 2.0)),
            ((12.0, 4.0), (9.0, 9.0)),
            ((40.0, 31.0), (38.0, 35.0)),
        ] {
            let (c, h) = (arm(c.0, c.1), arm(h.0, h.1));
            let sum = p_exact(c, h).unwrap() + p_exact(h, c).unwrap();
            assert!((sum - 1.0).abs() < 1e-9, "P(c>h) + P(h>c) = {sum}");
        }
    }

    /// Exact and Monte Carlo agree within 3 standard errors over a grid of (α, β).
    #[test]
    fn exact_and_monte_carlo_agree_within_three_standard_errors() {
        let grid = [1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 30.0];
        let mut seed = 1;
        for &ac in &grid {
            for &bc in &grid {
                for &(ah, bh) in &[(1.0, 1.0), (4.0, 2.0), (10.0, 12.0), (31.0, 2.0)] {
                    let (c, h) = (arm(ac, bc), arm(ah, bh));
                    let exact = p_exact(c, h).unwrap();
                    let mc = p_monte_carlo(c, h, DEFAULT_DRAWS, seed);
                    seed += 1;
                    let se = (exact * (1.0 - exact) / f64::from(DEFAULT_DRAWS))
                        .sqrt()
                        .max(1.0 / f64::from(DEFAULT_DRAWS));
                    assert!(
                        (mc - exact).abs() <= 3.0 * se,
                        "{c:?} vs {h:?}: mc {mc} exact {exact} se {se}"
                    );
                }
            }
        }
    }

    // S-68
    #[test]
    fn s68_seeded_monte_carlo_reproduces() {
        let (c, h) = (arm(2.0, 1.0), arm(1.0, 2.0));
        let first = Confidence::compute(c, h, 0, 42 ^ MC_SEED_XOR);
        let second = Confidence::compute(c, h, 0, 42 ^ MC_SEED_XOR);
        assert_eq!(first, second);
        assert_eq!(first.draws, DEFAULT_DRAWS);
        assert_eq!(first.summary(), second.summary());
        assert!(
            first
                .summary()
                .ends_with("% likely better over 20000 samples"),
            "{}",
            first.summary()
        );
        let other = p_monte_carlo(c, h, 0, 43);
        assert_ne!(
            first.p_monte_carlo, other,
            "another seed draws another stream"
        );
    }

    #[test]
    fn ties_do_not_beat() {
        // Identical degenerate-looking arms: strict ">" gives about half, never more by ties.
        let p = p_monte_carlo(Arm::PRIOR, Arm::PRIOR, 10_000, 7);
        assert!((p - 0.5).abs() < 0.03, "{p}");
    }

    #[test]
    fn credible_intervals_are_the_beta_quantiles() {
        // Beta(1,1): uniform ⇒ [0.025, 0.975].
        let (lo, hi) = credible_interval(Arm::PRIOR, 0.95).unwrap();
        assert!(
            (lo - 0.025).abs() < 1e-6 && (hi - 0.975).abs() < 1e-6,
            "{lo} {hi}"
        );
        // Beta(2,1): CDF x² ⇒ quantiles sqrt(0.025), sqrt(0.975).
        let (lo, hi) = credible_interval(arm(2.0, 1.0), 0.95).unwrap();
        assert!(
            (lo - 0.025_f64.sqrt()).abs() < 1e-6 && (hi - 0.975_f64.sqrt()).abs() < 1e-6,
            "{lo} {hi}"
        );
        // More pulls ⇒ a narrower interval around the mean.
        let (lo_w, hi_w) = credible_interval(arm(11.0, 11.0), 0.95).unwrap();
        let (lo_n, hi_n) = credible_interval(arm(101.0, 101.0), 0.95).unwrap();
        assert!(hi_n - lo_n < hi_w - lo_w && lo_n < 0.5 && hi_n > 0.5);
        assert_eq!(credible_interval(arm(1.5, 2.0), 0.95), None);
    }
}
