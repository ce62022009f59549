//! How far a judge agrees with the humans (issue 34 item 12): over the A/Bs where a human and a
//! judge both picked, the raw agreement and Cohen's κ with a 95% interval, per judge runtime and
//! model; and whether that judge is **measured**: its κ's interval lower bound at or above
//! `[skillopt] judge_kappa_floor` on at least `[skillopt] judge_min_paired_picks` paired picks.
//!
//! **κ.** Two raters (human, judge) put each A/B in one of two classes (champion or challenger
//! wins). With `p_o` the observed agreement and `p_e = Σ_k p_human(k) · p_judge(k)` the agreement
//! expected from the two raters' marginals alone, `κ = (p_o − p_e) / (1 − p_e)` (Cohen 1960).
//! It is undefined (`None`) when either rater named the same one class every time: then `κ` is 0
//! whatever the other did (or `p_e = 1`), and the large-sample interval below collapses to a
//! point, so a judge that always disagreed would look measured at κ 0.00 (0.00 to 0.00). Nothing
//! tells agreement from chance until both raters have named each class.
//!
//! **Interval.** `κ ± 1.96 · SE`, `SE = √(p_o (1 − p_o) / (n (1 − p_e)²))`, Cohen's (1960)
//! large-sample standard error, clipped to [−1, 1]. With few picks it is wide, which is the point:
//! the gate reads its lower bound. It is an interval, not a p-value.

use serde::Serialize;

use super::pick::Role;

/// z for a two-sided 95% interval.
const Z95: f64 = 1.959_963_984_540_054;

/// The measured-judge gate of `[skillopt]` (issue 34 item 12): a judge's verdicts count only
/// when its κ against the humans passes [`JudgeGate::floor`] on at least
/// [`JudgeGate::min_picks`] paired picks ([`Agreement::measured`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JudgeGate {
    /// `judge_kappa_floor`, in [-1, 1].
    pub floor: f64,
    /// `judge_min_paired_picks`, at least 1.
    pub min_picks: u32,
}

/// A judge as the A/B records name it: `codex (model gpt-5)` / `scripted (model not named)`
/// (`model` `""` when its transcript named none).
pub fn judge_name(runtime: &str, model: &str) -> String {
    if model.is_empty() {
        format!("{runtime} (model not named)")
    } else {
        format!("{runtime} (model {model})")
    }
}

/// One A/B both a human and a judge picked: (human's winner, judge's winner).
pub type PairedPick = (Role, Role);

/// Agreement over `n` paired picks.
///
/// JSON: `{"n": 20, "agreements": 17, "raw": 0.85, "kappa": 0.69, "interval": [0.38, 1.0]}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Agreement {
    /// Paired picks.
    pub n: u32,
    /// Picks where both named the same winner.
    pub agreements: u32,
    /// `agreements / n`; `None` when `n` is 0.
    pub raw: Option<f64>,
    /// Cohen's κ; `None` with no picks or when it is undefined (`p_e = 1`).
    pub kappa: Option<f64>,
    /// The 95% interval of κ (see the module docs); `None` with κ.
    pub interval: Option<(f64, f64)>,
}

impl Agreement {
    /// From the 2×2 table of counts: `[[both champion, human champion & judge challenger],
    /// [human challenger & judge champion, both challenger]]`.
    pub fn from_table(t: [[u32; 2]; 2]) -> Agreement {
        let n = t[0][0] + t[0][1] + t[1][0] + t[1][1];
        let agreements = t[0][0] + t[1][1];
        if n == 0 {
            return Agreement {
                n,
                agreements,
                raw: None,
                kappa: None,
                interval: None,
            };
        }
        let nf = f64::from(n);
        let po = f64::from(agreements) / nf;
        let human = [
            f64::from(t[0][0] + t[0][1]) / nf,
            f64::from(t[1][0] + t[1][1]) / nf,
        ];
        let judge = [
            f64::from(t[0][0] + t[1][0]) / nf,
            f64::from(t[0][1] + t[1][1]) / nf,
        ];
        let pe = human[0] * judge[0] + human[1] * judge[1];
        let one_class = |m: [f64; 2]| m.contains(&0.0);
        if one_class(human) || one_class(judge) || (1.0 - pe).abs() < 1e-12 {
            return Agreement {
                n,
                agreements,
                raw: Some(po),
                kappa: None,
                interval: None,
            };
        }
        let kappa = (po - pe) / (1.0 - pe);
        let se = (po * (1.0 - po) / (nf * (1.0 - pe).powi(2))).sqrt();
        let interval = ((kappa - Z95 * se).max(-1.0), (kappa + Z95 * se).min(1.0));
        Agreement {
            n,
            agreements,
            raw: Some(po),
            kappa: Some(kappa),
            interval: Some(interval),
        }
    }

    /// From paired picks.
    pub fn of(picks: &[PairedPick]) -> Agreement {
        let idx = |r: Role| usize::from(r == Role::Challenger);
        let mut t = [[0u32; 2]; 2];
        for (human, judge) in picks {
            t[idx(*human)][idx(*judge)] += 1;
        }
        Agreement::from_table(t)
    }

    /// Whether this is a measured judge under `floor` and `min_picks` (see the module docs), and
    /// why not when it is not, in words.
    pub fn measured(&self, floor: f64, min_picks: u32) -> Result<(), String> {
        if self.n < min_picks {
            return Err(format!(
                "{} paired pick(s) with a human, fewer than judge_min_paired_picks {min_picks}",
                self.n
            ));
        }
        match self.interval {
            None => Err(format!(
                "κ is undefined over {} paired pick(s): the human or the judge named the same winner \
                 every time (measure on A/Bs where each side wins sometimes)",
                self.n
            )),
            Some((lo, _)) if lo < floor => Err(format!(
                "κ's 95% interval lower bound {lo:.2} is below judge_kappa_floor {floor}"
            )),
            Some(_) => Ok(()),
        }
    }

    /// `17 of 20 agree (85%), κ 0.69 (95% interval 0.38 to 1.00)`.
    pub fn human(&self) -> String {
        let raw = self.raw.map_or("no paired picks".to_owned(), |r| {
            format!(
                "{} of {} agree ({:.0}%)",
                self.agreements,
                self.n,
                r * 100.0
            )
        });
        match (self.kappa, self.interval) {
            (Some(k), Some((lo, hi))) => {
                format!("{raw}, κ {k:.2} (95% interval {lo:.2} to {hi:.2})")
            }
            _ if self.n > 0 => format!("{raw}, κ undefined (both always named the same winner)"),
            _ => raw,
        }
    }
}

/// Each judge's agreement with the humans over the store's paired picks
/// ([`skillforge_store::judge_verdicts::paired_picks`]), keyed by (runtime, model), ordered.
pub fn by_judge(
    rows: &[skillforge_store::judge_verdicts::PairedPickRow],
) -> std::collections::BTreeMap<(String, String), Agreement> {
    let role = |s: &str| match s {
        "champion" => Some(Role::Champion),
        "challenger" => Some(Role::Challenger),
        _ => None,
    };
    let mut picks: std::collections::BTreeMap<(String, String), Vec<PairedPick>> =
        std::collections::BTreeMap::new();
    for r in rows {
        if let (Some(h), Some(j)) = (role(&r.human), role(&r.judge)) {
            picks
                .entry((r.judge_runtime.clone(), r.judge_model.clone()))
                .or_default()
                .push((h, j));
        }
    }
    picks
        .into_iter()
        .map(|(judge, p)| (judge, Agreement::of(&p)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 5e-4
    }

    // Published κ examples (Wikipedia, "Cohen's kappa", worked examples): the 2×2 tables and
    // their κ; the intervals by Cohen's (1960) standard error worked by hand.
    #[test]
    fn kappa_matches_published_examples_and_its_interval_the_standard_error() {
        // (table, κ, interval)
        type Case = ([[u32; 2]; 2], f64, Option<(f64, f64)>);
        let cases: [Case; 3] = [
            // 50 readers: yes/yes 20, yes/no 5, no/yes 10, no/no 15: p_o 0.7, p_e 0.5, κ 0.4;
            // SE √(0.21 / (50 · 0.25)) = 0.12961 → 0.4 ± 0.25403
            ([[20, 5], [10, 15]], 0.4, Some((0.14597, 0.65403))),
            // 100 items: 45/15/25/15: p_o 0.6, p_e 0.54, κ 0.1304
            ([[45, 15], [25, 15]], 0.1304, None),
            // 100 items: 25/35/5/35: p_o 0.6, p_e 0.46, κ 0.2593
            ([[25, 35], [5, 35]], 0.2593, None),
        ];
        for (table, kappa, interval) in cases {
            let a = Agreement::from_table(table);
            assert!(close(a.kappa.unwrap(), kappa), "{table:?}: {a:?}");
            if let Some((lo, hi)) = interval {
                let (got_lo, got_hi) = a.interval.unwrap();
                assert!(close(got_lo, lo) && close(got_hi, hi), "{table:?}: {a:?}");
            }
        }
        // perfect agreement over both classes: κ 1, SE 0
        let perfect = Agreement::from_table([[6, 0], [0, 4]]);
        assert_eq!(
            (perfect.kappa, perfect.interval, perfect.raw),
            (Some(1.0), Some((1.0, 1.0)), Some(1.0))
        );
        // worse than chance: negative κ, interval clipped at −1
        let against = Agreement::from_table([[0, 5], [5, 0]]);
        assert_eq!(against.kappa, Some(-1.0));
        assert_eq!(against.interval.unwrap().0, -1.0);
    }

    #[test]
    fn kappa_is_undefined_without_variation_and_absent_without_picks() {
        let same = Agreement::from_table([[8, 0], [0, 0]]);
        assert_eq!(
            (same.raw, same.kappa, same.interval),
            (Some(1.0), None, None)
        );
        assert!(same.human().contains("κ undefined"), "{}", same.human());
        assert!(same.measured(0.0, 1).is_err(), "an undefined κ never gates");
        // A judge that always named the champion while the human always named the challenger:
        // κ would be 0 with a zero-width interval, so a floor of 0 would call it measured.
        let always_wrong = Agreement::from_table([[0, 0], [5, 0]]);
        assert_eq!(
            (always_wrong.raw, always_wrong.kappa, always_wrong.interval),
            (Some(0.0), None, None)
        );
        assert!(always_wrong.measured(0.0, 5).is_err());
        // One rater on one side only: κ is 0 whatever the other does; still undefined.
        let one_sided = Agreement::from_table([[3, 2], [0, 0]]);
        assert_eq!(one_sided.kappa, None);
        let none = Agreement::of(&[]);
        assert_eq!((none.n, none.raw, none.kappa), (0, None, None));
        assert_eq!(none.human(), "no paired picks");
    }

    #[test]
    fn a_judge_is_measured_only_with_enough_picks_and_a_lower_bound_at_the_floor() {
        use Role::{Challenger as X, Champion as C};
        let picks: Vec<PairedPick> = [(C, C); 6]
            .into_iter()
            .chain([(X, X); 5])
            .chain([(C, X)])
            .collect();
        let a = Agreement::of(&picks);
        assert_eq!((a.n, a.agreements), (12, 11));
        let (lo, _) = a.interval.unwrap();
        assert!(a.measured(lo - 0.01, 12).is_ok(), "{a:?}");
        let low = a.measured(lo + 0.01, 12).unwrap_err();
        assert!(
            low.contains("lower bound") && low.contains("judge_kappa_floor"),
            "{low}"
        );
        let few = a.measured(0.0, 13).unwrap_err();
        assert!(
            few.contains("12 paired pick(s)") && few.contains("judge_min_paired_picks 13"),
            "{few}"
        );
        assert!(
            a.human().starts_with("11 of 12 agree (92%), κ "),
            "{}",
            a.human()
        );
        assert!(!a.human().contains("p-value"));
    }
}
