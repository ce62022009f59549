//! Normalization of raw measurements to scores in [0,1] (facts §5, resolutions §8).
//!
//! `diff_size`: full score up to the soft cap, then linear down to 0 at the zero point
//! (defaults 400 and 800 changed lines, resolutions §8). Tool dimensions: a linear penalty per
//! counted item, floored at 0, with the per-item penalty taken from the language profile
//! (facts §5: dupl/jscpd −0.1 per clone, golangci-lint −0.05 per issue, gocyclo `-over 15`
//! −0.1 per function).

use serde::{Deserialize, Serialize};

/// Default `diff_size` soft cap: up to this many changed lines score 1.0 (resolutions §8).
pub const DIFF_SIZE_SOFT_CAP_LINES: u64 = 400;
/// Default `diff_size` zero point: this many changed lines or more score 0.0 (resolutions §8).
pub const DIFF_SIZE_ZERO_AT_LINES: u64 = 800;

/// `diff_size` normalization parameters, in changed lines (`+` plus `-` hunk lines).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffSizeConfig {
    /// At or below this many changed lines the score is 1.0; default 400.
    pub soft_cap_lines: u64,
    /// At or above this many changed lines the score is 0.0; default 800. Must exceed
    /// `soft_cap_lines`; if it does not, the score drops straight from 1.0 to 0.0 past the cap.
    pub zero_at_lines: u64,
}

impl Default for DiffSizeConfig {
    fn default() -> Self {
        Self {
            soft_cap_lines: DIFF_SIZE_SOFT_CAP_LINES,
            zero_at_lines: DIFF_SIZE_ZERO_AT_LINES,
        }
    }
}

impl DiffSizeConfig {
    /// Score in [0,1] for `changed_lines`: 1.0 up to the soft cap, linear to 0.0 at the zero
    /// point, 0.0 beyond (seed: SkillOpt, "Deterministic checker objective signal": "a tight diff
    /// scores ~1.0 and a larger-than-budget one scores lower").
    pub fn score(&self, changed_lines: u64) -> f64 {
        if changed_lines <= self.soft_cap_lines {
            return 1.0;
        }
        if changed_lines >= self.zero_at_lines {
            return 0.0;
        }
        let span = (self.zero_at_lines - self.soft_cap_lines) as f64;
        let over = (changed_lines - self.soft_cap_lines) as f64;
        (1.0 - over / span).clamp(0.0, 1.0)
    }
}

/// How a tool dimension turns its item count into a score; set per dimension in a profile as
/// `normalize = { formula = "linear_penalty", per_item = 0.05 }`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "formula", rename_all = "snake_case", deny_unknown_fields)]
pub enum Normalize {
    /// `max(0, 1 − per_item · count)`: fewer issues ⇒ higher (rules S-34).
    LinearPenalty {
        /// Penalty per counted item (clone, issue, over-threshold function), > 0.
        per_item: f64,
    },
}

impl Normalize {
    /// Score in [0,1] for `count` items.
    pub fn score(&self, count: u64) -> f64 {
        match *self {
            Normalize::LinearPenalty { per_item } => {
                (1.0 - per_item * count as f64).clamp(0.0, 1.0)
            }
        }
    }

    /// Checks the parameters; `Err` names what is wrong.
    pub(crate) fn validate(&self) -> Result<(), String> {
        match *self {
            Normalize::LinearPenalty { per_item } if per_item.is_finite() && per_item > 0.0 => {
                Ok(())
            }
            Normalize::LinearPenalty { per_item } => Err(format!(
                "linear_penalty per_item must be a positive number, got {per_item}"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    // S-34: a tight diff scores 1.0, a larger-than-budget one lower; resolutions §8 numbers.
    #[test]
    fn s34_diff_size_soft_cap_400_linear_to_zero_at_800() {
        let config = DiffSizeConfig::default();
        for (changed_lines, expected) in [
            (0, 1.0),
            (10, 1.0),
            (400, 1.0),
            (401, 1.0 - 1.0 / 400.0),
            (500, 0.75),
            (600, 0.5),
            (700, 0.25),
            (799, 1.0 / 400.0),
            (800, 0.0),
            (5_000, 0.0),
        ] {
            let score = config.score(changed_lines);
            assert!(
                close(score, expected),
                "{changed_lines} lines: {score} != {expected}"
            );
        }
        assert!(config.score(10) > config.score(5_000));
    }

    #[test]
    fn diff_size_config_is_configurable_and_degenerate_span_is_a_step() {
        let config = DiffSizeConfig {
            soft_cap_lines: 100,
            zero_at_lines: 300,
        };
        assert!(close(config.score(200), 0.5));
        let step = DiffSizeConfig {
            soft_cap_lines: 100,
            zero_at_lines: 100,
        };
        assert!(close(step.score(100), 1.0));
        assert!(close(step.score(101), 0.0));
    }

    // S-34: tool dimensions, fewer issues ⇒ higher; facts §5 per-item penalties.
    #[test]
    fn s34_linear_penalty_per_item_from_facts() {
        let lint = Normalize::LinearPenalty { per_item: 0.05 }; // golangci-lint −0.05 per issue
        let clones = Normalize::LinearPenalty { per_item: 0.1 }; // dupl/jscpd −0.1 per clone
        for (normalize, count, expected) in [
            (lint, 0, 1.0),
            (lint, 1, 0.95),
            (lint, 10, 0.5),
            (lint, 20, 0.0),
            (lint, 25, 0.0),
            (clones, 0, 1.0),
            (clones, 3, 0.7),
            (clones, 10, 0.0),
            (clones, 11, 0.0),
        ] {
            let score = normalize.score(count);
            assert!(
                close(score, expected),
                "{normalize:?} {count}: {score} != {expected}"
            );
        }
        assert!(lint.score(0) > lint.score(20));
    }

    #[test]
    fn penalty_must_be_positive() {
        assert!(
            Normalize::LinearPenalty { per_item: 0.1 }
                .validate()
                .is_ok()
        );
        for bad in [0.0, -0.1, f64::NAN, f64::INFINITY] {
            assert!(
                Normalize::LinearPenalty { per_item: bad }
                    .validate()
                    .is_err(),
                "{bad}"
            );
        }
    }
}
