//! The checker names (dimensions) and the checker-list syntax.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::CheckerError;

/// One deterministic quality dimension (seed: SkillOpt, "Deterministic checker objective signal").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Checker {
    /// Changed `+`/`-` hunk lines and files, pure Rust, always available.
    DiffSize,
    /// Code-clone count (dupl, else jscpd).
    Duplication,
    /// Lint issue count (clippy, ruff, golangci-lint, eslint).
    Lint,
    /// Over-threshold function count (gocyclo, radon, lizard).
    Complexity,
}

/// Every checker, in report order.
pub const ALL_CHECKERS: &[Checker] = &[
    Checker::DiffSize,
    Checker::Duplication,
    Checker::Lint,
    Checker::Complexity,
];

/// The default checker list: `diff_size` only (rules S-34; seed: "default: diff_size only").
pub const DEFAULT_CHECKERS: &[Checker] = &[Checker::DiffSize];

impl Checker {
    /// The stable name: `diff_size`, `duplication`, `lint`, `complexity`.
    pub fn name(self) -> &'static str {
        match self {
            Checker::DiffSize => "diff_size",
            Checker::Duplication => "duplication",
            Checker::Lint => "lint",
            Checker::Complexity => "complexity",
        }
    }

    /// True for the dimensions measured by external tools from a language profile.
    pub fn is_tool_backed(self) -> bool {
        !matches!(self, Checker::DiffSize)
    }
}

impl fmt::Display for Checker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Checker {
    type Err = CheckerError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ALL_CHECKERS
            .iter()
            .copied()
            .find(|c| c.name() == s)
            .ok_or_else(|| CheckerError::UnknownChecker(s.to_string()))
    }
}

/// Parses a comma list such as `diff_size,lint` (the `--checkers` / `deterministic_checkers`
/// syntax). Whitespace around names is ignored, duplicates are dropped keeping first order, and
/// an empty list means [`DEFAULT_CHECKERS`].
///
/// # Errors
/// [`CheckerError::UnknownChecker`] for a name not in [`ALL_CHECKERS`].
pub fn parse_checker_list(list: &str) -> Result<Vec<Checker>, CheckerError> {
    let mut checkers = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let checker: Checker = name.parse()?;
        if !checkers.contains(&checker) {
            checkers.push(checker);
        }
    }
    if checkers.is_empty() {
        checkers.extend_from_slice(DEFAULT_CHECKERS);
    }
    Ok(checkers)
}

#[cfg(test)]
mod tests {
    use super::*;

    // S-34: the default checker list is diff_size only.
    #[test]
    fn s34_checker_list_defaults_to_diff_size() {
        for (list, expected) in [
            ("", vec![Checker::DiffSize]),
            (" , ", vec![Checker::DiffSize]),
            ("lint", vec![Checker::Lint]),
            (
                "diff_size, lint,lint,complexity",
                vec![Checker::DiffSize, Checker::Lint, Checker::Complexity],
            ),
            (
                "duplication,diff_size",
                vec![Checker::Duplication, Checker::DiffSize],
            ),
        ] {
            assert_eq!(parse_checker_list(list).unwrap(), expected, "{list:?}");
        }
    }

    #[test]
    fn unknown_checker_is_named() {
        let err = parse_checker_list("diff_size,typos").unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown checker `typos` (known: diff_size, duplication, lint, complexity)"
        );
    }

    #[test]
    fn names_round_trip_through_serde() {
        for checker in ALL_CHECKERS {
            let json = serde_json::to_value(checker).unwrap();
            assert_eq!(json, serde_json::Value::String(checker.name().into()));
            assert_eq!(checker.name().parse::<Checker>().unwrap(), *checker);
        }
    }
}
