//! The canary: routing a sampled fraction of resolutions to it, and its regression window
//! (seed: SkillOpt, "Promotion policy + notifications" › auto_promote_canary (#484); S-60..S-62;
//! resolutions 7, 8).
//!
//! [`route`] is the one place a template version is resolved for a job when a canary exists.
//! [`decide_window`] compares the canary's auto-trace outcomes with the champion's: parity or
//! better graduates, a material regression rolls back, anything thinner or unread holds.

use std::time::Duration;

use serde::Serialize;

/// Outcomes on each side before any decision (resolutions 8).
pub const DEFAULT_MIN_OUTCOMES: u64 = 10;
/// Canary positive rate below the champion's by more than this ⇒ material regression (resolutions 8).
pub const DEFAULT_MATERIAL_REGRESSION: f64 = 0.10;
/// Length of the regression window (resolutions 8).
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(7 * 24 * 3600);
/// Outcomes on each side after which a window still holding ends inconclusive (issue 37 item 3).
pub const DEFAULT_MAX_OUTCOMES: u64 = 100;

/// The window's settings (resolutions 8 defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WindowConfig {
    /// Least outcomes on each side.
    pub min_outcomes: u64,
    /// Material-regression margin on the positive rate, in [0,1].
    pub material_regression: f64,
    /// How long the window stays open after the canary starts; a window still holding when it
    /// closes ends inconclusive.
    pub window: Duration,
    /// Outcomes on each side after which a window still holding ends inconclusive
    /// (`[skillopt] auto_promote_canary_max_outcomes`).
    pub max_outcomes: u64,
}

impl Default for WindowConfig {
    fn default() -> Self {
        Self {
            min_outcomes: DEFAULT_MIN_OUTCOMES,
            material_regression: DEFAULT_MATERIAL_REGRESSION,
            window: DEFAULT_WINDOW,
            max_outcomes: DEFAULT_MAX_OUTCOMES,
        }
    }
}

/// Outcomes of one version inside the window: positive = choice `a` of an auto-trace event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Outcomes {
    /// Positive outcomes.
    pub positives: u64,
    /// All outcomes.
    pub total: u64,
}

impl Outcomes {
    /// positives / total; `None` with no outcomes.
    pub fn rate(self) -> Option<f64> {
        (self.total > 0).then(|| self.positives as f64 / self.total as f64)
    }
}

/// What the window says now.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum WindowDecision {
    /// Parity or better: the canary becomes current (`candidate.auto_promoted`).
    Graduate,
    /// Material regression: the canary is rejected, the champion stays current (`candidate.rolled_back`).
    RollBack,
    /// The window is spent (its time closed, or both sides reached `max_outcomes`) and still
    /// holds: fail-safe, the champion stays and the canary is rolled back as inconclusive
    /// (`candidate.rolled_back`, reason `inconclusive`; issue 37 item 3).
    Inconclusive {
        /// What the window said when it was spent.
        reason: String,
    },
    /// Keep sampling; no state change, no event.
    Hold {
        /// Why.
        reason: String,
    },
}

fn hold(reason: impl Into<String>) -> WindowDecision {
    WindowDecision::Hold {
        reason: reason.into(),
    }
}

/// Decides the window (S-61, S-62): unreadable evidence, too few canary outcomes or no champion
/// baseline ⇒ hold; canary rate ≥ champion rate ⇒ graduate; canary rate < champion rate −
/// margin ⇒ roll back; in between ⇒ hold (not confirmed non-regression, not material). The
/// window's end changes nothing: a thin window keeps holding (never graduate unconfirmed, never
/// roll back unread) — until the window is spent (`closed`: its time is over; or both sides
/// reached `max_outcomes`): a readable window still holding then ends [`WindowDecision::Inconclusive`],
/// fail-safe (the champion stays). Unreadable evidence holds whatever the time.
pub fn decide_window(
    canary: &Result<Outcomes, String>,
    champion: &Result<Outcomes, String>,
    config: &WindowConfig,
    closed: bool,
) -> WindowDecision {
    let decision = decide_open_window(canary, champion, config);
    let (Ok(c), Ok(h)) = (canary, champion) else {
        return decision;
    };
    let spent = closed || (c.total >= config.max_outcomes && h.total >= config.max_outcomes);
    match decision {
        WindowDecision::Hold { reason } if spent => WindowDecision::Inconclusive {
            reason: format!(
                "inconclusive: {reason} when the window was spent ({}); the champion stays",
                if closed {
                    "its time closed".to_owned()
                } else {
                    format!("{} outcomes on each side", config.max_outcomes)
                }
            ),
        },
        other => other,
    }
}

fn decide_open_window(
    canary: &Result<Outcomes, String>,
    champion: &Result<Outcomes, String>,
    config: &WindowConfig,
) -> WindowDecision {
    let (canary, champion) = match (canary, champion) {
        (Err(why), _) | (_, Err(why)) => return hold(format!("feedback unreadable: {why}")),
        (Ok(c), Ok(h)) => (*c, *h),
    };
    if champion.total == 0 {
        return hold("no champion baseline in the window");
    }
    if canary.total < config.min_outcomes || champion.total < config.min_outcomes {
        return hold(format!(
            "too few outcomes: canary {}, champion {} (need {} each)",
            canary.total, champion.total, config.min_outcomes
        ));
    }
    let (c, h) = (canary.rate().unwrap_or(0.0), champion.rate().unwrap_or(0.0));
    if c >= h {
        WindowDecision::Graduate
    } else if c < h - config.material_regression {
        WindowDecision::RollBack
    } else {
        hold(format!(
            "canary rate {c:.3} slightly below champion {h:.3}, within the {} margin",
            config.material_regression
        ))
    }
}

/// Which version a resolution routes to: the canary when one exists and the uniform draw `u` in
/// [0,1) is below its sample, else the current version (S-60: non-sampled resolutions are
/// byte-identical).
pub fn route<'a>(current: &'a str, canary: Option<(&'a str, f64)>, u: f64) -> &'a str {
    match canary {
        Some((version, sample)) if u < sample => version,
        _ => current,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(positives: u64, total: u64) -> Result<Outcomes, String> {
        Ok(Outcomes { positives, total })
    }

    // S-61
    #[test]
    fn s61_parity_or_better_graduates_material_regression_rolls_back() {
        let config = WindowConfig::default();
        assert_eq!(
            decide_window(&o(8, 10), &o(8, 10), &config, false),
            WindowDecision::Graduate,
            "parity"
        );
        assert_eq!(
            decide_window(&o(10, 10), &o(5, 10), &config, false),
            WindowDecision::Graduate
        );
        assert_eq!(
            decide_window(&o(2, 10), &o(9, 10), &config, false),
            WindowDecision::RollBack
        );
        assert!(
            matches!(
                decide_window(&o(74, 99), &o(79, 99), &config, false),
                WindowDecision::Hold { .. }
            ),
            "within the margin"
        );
        assert_eq!(
            decide_window(&o(69, 100), &o(80, 100), &config, false),
            WindowDecision::RollBack,
            "0.11 below"
        );
    }

    // Issue 37 item 3: 0.90 against 1.00 over 100 outcomes each held forever; a spent window
    // ends inconclusive (the champion stays), a closed one too; unread evidence keeps holding.
    #[test]
    fn a_spent_window_still_holding_ends_inconclusive() {
        let config = WindowConfig::default();
        assert!(
            matches!(
                decide_window(&o(90, 99), &o(99, 99), &config, false),
                WindowDecision::Hold { .. }
            ),
            "not spent yet"
        );
        let spent = decide_window(&o(90, 100), &o(100, 100), &config, false);
        let WindowDecision::Inconclusive { reason } = &spent else {
            panic!("{spent:?}")
        };
        assert!(
            reason.contains("inconclusive") && reason.contains("100 outcomes on each side"),
            "{reason}"
        );
        assert!(
            matches!(
                decide_window(&o(3, 5), &o(4, 5), &config, true),
                WindowDecision::Inconclusive { .. }
            ),
            "a thin window at its close"
        );
        assert!(
            matches!(
                decide_window(&Err("locked".into()), &o(4, 5), &config, true),
                WindowDecision::Hold { .. }
            ),
            "never decided unread"
        );
        assert_eq!(
            decide_window(&o(100, 100), &o(90, 100), &config, true),
            WindowDecision::Graduate,
            "a decision stands"
        );
    }

    // S-62
    #[test]
    fn s62_thin_or_unread_evidence_holds() {
        let config = WindowConfig::default();
        let check =
            |canary: Result<Outcomes, String>, champion: Result<Outcomes, String>, needle: &str| {
                match decide_window(&canary, &champion, &config, false) {
                    WindowDecision::Hold { reason } => assert!(reason.contains(needle), "{reason}"),
                    other => panic!("expected hold, got {other:?}"),
                }
            };
        check(o(1, 1), o(10, 20), "too few");
        check(o(0, 30), o(5, 9), "too few");
        check(o(0, 30), o(0, 0), "no champion baseline");
        check(Err("database is locked".into()), o(9, 10), "unreadable");
        check(o(0, 30), Err("no run".into()), "unreadable");
    }

    // S-60
    #[test]
    fn s60_sampled_fraction_routes_to_the_canary() {
        assert_eq!(route("t@v1", None, 0.0), "t@v1");
        let hits = (0..1000)
            .filter(|i| route("t@v1", Some(("t@v2", 0.1)), f64::from(*i) / 1000.0) == "t@v2")
            .count();
        assert_eq!(hits, 100);
        assert_eq!(route("t@v1", Some(("t@v2", 1.0)), 0.999), "t@v2");
    }
}
