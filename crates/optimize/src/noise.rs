//! The measured noise floor and each experiment's effect with its interval (issue 34 item 13).
//!
//! **Noise floor.** With `measurement.noise_floor_samples: N` (N ≥ 2; off by default, and the
//! log, `status` and the report are byte-identical then), `optimize init` measures the unchanged
//! baseline N more times. From those repeated measurements of the same code, of the primary
//! metric: their sample standard deviation `sd`, and the **noise floor** `F = t(0.975, N−1) ·
//! sd · √2`, the half-width of the 95% range of the difference between two measurements of
//! the same code (Student t, since `sd` is itself estimated from N runs). A difference smaller
//! than `F` is what re-measuring unchanged code produces.
//!
//! **Effect.** An experiment's selection pairs (reference, candidate: the same pair index is one
//! paired sample) give differences `d_i = candidate_i − reference_i`; the effect is their mean
//! `d̄` with the 95% **interval** `d̄ ± t(0.975, n−1) · sd(d) / √n` (a paired t interval; none
//! with one pair). It is read against the floor: `beyond the noise floor` when the interval
//! excludes 0 and `|d̄| > F`, `within the noise floor` otherwise, `unknown` with one pair.
//! These are intervals, never p-values.

use serde::{Deserialize, Serialize};

use super::brief::fmt_num;
use super::snapshot::{mean, std_dev};

/// Two-sided 95% quantiles of Student's t, `t(0.975, df)` for df = 1..=30 (published tables,
/// e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2).
const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// `t(0.975, df)`: the table for df ≤ 30; 40, 60, 120 from the same table by step; the normal
/// 1.960 beyond. `None` for df 0.
pub fn t975(df: usize) -> Option<f64> {
    match df {
        0 => None,
        1..=30 => Some(T975[df - 1]),
        31..=40 => Some(2.021),
        41..=60 => Some(2.000),
        61..=120 => Some(1.980),
        _ => Some(1.960),
    }
}

/// The measured noise floor of the primary metric (log key `noise_floor`).
///
/// YAML: `{metric: ops, samples: [26, 26, 26], sd: 0, floor: 0}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NoiseFloor {
    /// The primary metric's name.
    pub metric: String,
    /// The repeated baseline measurements, in order (the metric's unit).
    pub samples: Vec<f64>,
    /// Their sample standard deviation (n − 1).
    pub sd: f64,
    /// `t(0.975, N−1) · sd · √2` (the metric's unit).
    pub floor: f64,
}

impl NoiseFloor {
    /// From N ≥ 2 repeated measurements; `None` for fewer.
    pub fn from_samples(metric: &str, samples: Vec<f64>) -> Option<NoiseFloor> {
        let t = t975(samples.len().checked_sub(1)?)?;
        let sd = std_dev(&samples);
        Some(NoiseFloor {
            metric: metric.to_owned(),
            floor: t * sd * std::f64::consts::SQRT_2,
            sd,
            samples,
        })
    }

    /// `noise floor ±0.4 ops (sd 0.15 over 5 repeated baseline measurements, 95%)`.
    pub fn human(&self) -> String {
        format!(
            "noise floor ±{} {} (sd {} over {} repeated baseline measurements, 95%)",
            fmt_num(self.floor),
            self.metric,
            fmt_num(self.sd),
            self.samples.len()
        )
    }
}

/// How an effect compares with the noise floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VsFloor {
    /// The interval excludes 0 and |effect| exceeds the floor.
    Beyond,
    /// Otherwise.
    Within,
    /// One pair: no interval.
    Unknown,
}

/// One experiment's effect on the primary metric (candidate − reference) with its interval.
///
/// JSON: `{"pairs": 2, "effect": -22.0, "relative": -0.846, "interval": [-22.0, -22.0],
/// "vs_floor": "beyond"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    /// Paired samples.
    pub pairs: usize,
    /// Mean paired difference, candidate − reference (the metric's unit).
    pub effect: f64,
    /// `effect / |mean reference|` (`None` when the reference mean is 0).
    pub relative: Option<f64>,
    /// The 95% paired t interval of `effect`; `None` with one pair.
    pub interval: Option<(f64, f64)>,
    /// Against the noise floor.
    pub vs_floor: VsFloor,
}

impl Effect {
    /// From the paired samples of one comparison (pairs by index; extra samples of one side are
    /// left out) against `floor`. `None` without a pair.
    pub fn paired(reference: &[f64], candidate: &[f64], floor: f64) -> Option<Effect> {
        let n = reference.len().min(candidate.len());
        if n == 0 {
            return None;
        }
        let diffs: Vec<f64> = reference
            .iter()
            .zip(candidate)
            .map(|(r, c)| c - r)
            .collect();
        let effect = mean(&diffs);
        let base = mean(&reference[..n]);
        let interval = t975(n - 1).map(|t| {
            let half = t * std_dev(&diffs) / (n as f64).sqrt();
            (effect - half, effect + half)
        });
        let vs_floor = match interval {
            None => VsFloor::Unknown,
            Some((lo, hi)) if (lo > 0.0 || hi < 0.0) && effect.abs() > floor => VsFloor::Beyond,
            Some(_) => VsFloor::Within,
        };
        Some(Effect {
            pairs: n,
            effect,
            relative: (base != 0.0).then(|| effect / base.abs()),
            interval,
            vs_floor,
        })
    }

    /// `effect -22 ops (-84.6%), 95% interval -22 to -22 over 2 pairs: beyond the noise floor`.
    pub fn human(&self, metric: &str) -> String {
        let rel = self
            .relative
            .map_or(String::new(), |r| format!(" ({:+.1}%)", r * 100.0));
        let interval = match self.interval {
            Some((lo, hi)) => format!(
                "95% interval {} to {} over {} pairs",
                fmt_num(lo),
                fmt_num(hi),
                self.pairs
            ),
            None => "no interval from 1 pair".to_owned(),
        };
        let vs = match self.vs_floor {
            VsFloor::Beyond => "beyond the noise floor",
            VsFloor::Within => "within the noise floor",
            VsFloor::Unknown => "not comparable with the noise floor",
        };
        format!(
            "effect {} {metric}{rel}, {interval}: {vs}",
            fmt_num(self.effect)
        )
    }
}

/// The effect of a keep (`kept`: its selection pairing; `runner_up_kept`: the combination's
/// integrated pairing, which decided it) against `floor`; `None` for any other outcome or without
/// a pair of the floor's metric.
pub fn keep_effect(entry: &super::log::Entry, floor: &NoiseFloor) -> Option<Effect> {
    use super::log::{ComparisonKind, Outcome};
    let comparison = match entry.outcome {
        Outcome::Kept => entry.standalone()?,
        Outcome::RunnerUpKept => entry
            .comparisons
            .iter()
            .find(|c| c.kind == ComparisonKind::Integrated)
            .or_else(|| entry.standalone())?,
        _ => return None,
    };
    let (r, c) = (
        comparison.reference.snapshot.metrics.get(&floor.metric)?,
        comparison.candidate.snapshot.metrics.get(&floor.metric)?,
    );
    Effect::paired(&r.samples, &c.samples, floor.floor)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-3
    }

    #[test]
    fn t_quantiles_match_the_published_table() {
        for (df, want) in [
            (1, 12.706),
            (2, 4.303),
            (4, 2.776),
            (9, 2.262),
            (19, 2.093),
            (29, 2.045),
            (30, 2.042),
            (40, 2.021),
            (60, 2.000),
            (120, 1.980),
            (1000, 1.960),
        ] {
            assert_eq!(t975(df), Some(want), "df {df}");
        }
        assert_eq!(t975(0), None);
    }

    #[test]
    fn the_noise_floor_is_the_95_percent_half_width_of_a_difference_of_two_runs() {
        // samples 10, 12, 11, 13, 9: mean 11, sd √2.5 = 1.5811; t(0.975, 4) = 2.776
        let f = NoiseFloor::from_samples("ms", vec![10.0, 12.0, 11.0, 13.0, 9.0]).unwrap();
        assert!(close(f.sd, 1.5811), "{f:?}");
        assert!(
            close(f.floor, 2.776 * 1.5811 * std::f64::consts::SQRT_2),
            "{f:?}"
        );
        assert!(
            f.human().contains("noise floor ±6.2")
                && f.human().contains("over 5 repeated baseline measurements"),
            "{}",
            f.human()
        );
        assert_eq!(
            NoiseFloor::from_samples("ms", vec![10.0]),
            None,
            "one run says nothing about noise"
        );
        let steady = NoiseFloor::from_samples("ops", vec![26.0, 26.0, 26.0]).unwrap();
        assert_eq!((steady.sd, steady.floor), (0.0, 0.0));
    }

    #[test]
    fn an_effect_carries_a_paired_t_interval_read_against_the_floor() {
        // differences -2, -4, -3: mean -3, sd 1, n 3: half-width t(0.975, 2)·1/√3 = 4.303/1.732 = 2.484
        let e = Effect::paired(&[20.0, 20.0, 20.0], &[18.0, 16.0, 17.0], 0.5).unwrap();
        assert!(close(e.effect, -3.0) && e.pairs == 3, "{e:?}");
        let (lo, hi) = e.interval.unwrap();
        assert!(
            close(lo, -3.0 - 2.4843) && close(hi, -3.0 + 2.4843),
            "{e:?}"
        );
        assert_eq!(e.vs_floor, VsFloor::Beyond);
        assert!(close(e.relative.unwrap(), -0.15));
        // the same effect under a floor larger than it is within the noise
        assert_eq!(
            Effect::paired(&[20.0, 20.0, 20.0], &[18.0, 16.0, 17.0], 3.5)
                .unwrap()
                .vs_floor,
            VsFloor::Within
        );
        // an interval that spans 0 is within the noise whatever the floor
        assert_eq!(
            Effect::paired(&[20.0, 20.0], &[19.0, 22.0], 0.0)
                .unwrap()
                .vs_floor,
            VsFloor::Within
        );
        // one pair: no interval, never called beyond the floor
        let one = Effect::paired(&[20.0], &[10.0], 0.0).unwrap();
        assert_eq!((one.interval, one.vs_floor), (None, VsFloor::Unknown));
        assert!(
            one.human("ms").contains("no interval from 1 pair"),
            "{}",
            one.human("ms")
        );
        assert_eq!(Effect::paired(&[], &[1.0], 0.0), None);
        let text = e.human("ms");
        assert!(
            text.contains("effect -3 ms (-15.0%), 95% interval")
                && text.ends_with("beyond the noise floor"),
            "{text}"
        );
        assert!(!text.contains("p-value") && !text.contains("p ="), "{text}");
    }
}
