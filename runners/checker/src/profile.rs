//! Per-language tool profiles: which tools measure `duplication`, `lint` and `complexity`, how
//! they are invoked, how their output is counted and how the count is normalized.
//!
//! Profiles are data, one TOML file per language under `runners/checker/tools/`, compiled in
//! with `include_str!` and listed in [`PROFILE_SOURCES`]. Shape of a file:
//!
//! ```toml
//! language = "go"
//! extensions = ["go"]
//! [dimensions.lint]
//! normalize = { formula = "linear_penalty", per_item = 0.05 }
//! [[dimensions.lint.tools]]          # ordered alternatives: the first that yields a count wins
//! name = "golangci-lint"
//! argv = ["golangci-lint", "run", "--output.json.path=stdout", "./..."]
//! ok_exit_codes = [0, 1]             # exit codes whose output is read; others are tool errors
//! count = { format = "json", select = ["Issues", "*"] }
//! ```
//!
//! In `argv`, the element `{files}` expands to the changed files of that language (paths
//! relative to the head checkout, which is the working directory) and `{out_dir}` inside any
//! element is replaced by a fresh per-tool report directory; `report_file` (if set) is read
//! instead of stdout, with the same `{out_dir}` substitution.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::CheckerError;
use crate::checker::Checker;
use crate::count::CountSpec;
use crate::normalize::Normalize;

/// The shipped profiles as `(file name, TOML text)`, one per language.
pub const PROFILE_SOURCES: &[(&str, &str)] = &[
    ("rust.toml", include_str!("../tools/rust.toml")),
    ("python.toml", include_str!("../tools/python.toml")),
    ("go.toml", include_str!("../tools/go.toml")),
    ("javascript.toml", include_str!("../tools/javascript.toml")),
];

/// One language's tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LanguageProfile {
    /// Language name, e.g. `python`; used in skip reasons and raw output.
    pub language: String,
    /// File extensions without the dot (`py`, `pyi`); a changed file with one of them makes the
    /// language present in the diff.
    pub extensions: Vec<String>,
    /// Tool dimensions this language can measure, keyed `duplication`, `lint`, `complexity`.
    #[serde(default)]
    pub dimensions: BTreeMap<Checker, DimensionProfile>,
}

/// How one dimension is measured for one language.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DimensionProfile {
    /// How the item count becomes a score in [0,1].
    pub normalize: Normalize,
    /// Ordered alternatives; the first one that yields a count is used (seed: "dupl (else
    /// jscpd)"). A timeout stops the search: the budget is spent.
    pub tools: Vec<ToolSpec>,
}

/// One external tool invocation and how to count its output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    /// Tool name for reasons and raw output, e.g. `ruff`.
    pub name: String,
    /// Program and arguments, with `{files}` and `{out_dir}` placeholders (see module docs).
    pub argv: Vec<String>,
    /// Exit codes whose output is counted; default `[0]`. Any other exit is a tool error.
    #[serde(default = "default_ok_exit_codes")]
    pub ok_exit_codes: Vec<i32>,
    /// Report file to read instead of stdout (e.g. `{out_dir}/jscpd-report.json`).
    #[serde(default)]
    pub report_file: Option<String>,
    /// Extra environment variable names inherited from the worker on top of the process
    /// runner's default allowlist (e.g. `CARGO_HOME`).
    #[serde(default)]
    pub inherit_env: Vec<String>,
    /// How to count items in the output.
    pub count: CountSpec,
    /// Where each counted item is (file and line), for annotations; `None` for tools whose
    /// items have no location (clone counts, number summaries).
    #[serde(default)]
    pub locate: Option<crate::count::Locate>,
}

fn default_ok_exit_codes() -> Vec<i32> {
    vec![0]
}

impl LanguageProfile {
    /// Parses and validates one profile file's text; `file` names it in errors.
    ///
    /// # Errors
    /// [`CheckerError::Profile`] on invalid TOML, unknown fields, a `diff_size` dimension, an
    /// empty extension or tool list, an empty argv, or a non-positive penalty.
    pub fn parse(file: &str, text: &str) -> Result<Self, CheckerError> {
        let profile_err = |message: String| CheckerError::Profile {
            file: file.to_string(),
            message,
        };
        let profile: LanguageProfile =
            toml::from_str(text).map_err(|e| profile_err(e.to_string()))?;
        if profile.language.trim().is_empty() {
            return Err(profile_err("`language` is empty".into()));
        }
        if profile.extensions.is_empty()
            || profile
                .extensions
                .iter()
                .any(|e| e.is_empty() || e.starts_with('.'))
        {
            return Err(profile_err(
                "`extensions` must be non-empty names without a leading dot".into(),
            ));
        }
        for (checker, dimension) in &profile.dimensions {
            if !checker.is_tool_backed() {
                return Err(profile_err(format!(
                    "dimension `{checker}` is not tool-backed"
                )));
            }
            dimension
                .normalize
                .validate()
                .map_err(|m| profile_err(format!("dimension `{checker}`: {m}")))?;
            if dimension.tools.is_empty() {
                return Err(profile_err(format!("dimension `{checker}` lists no tools")));
            }
            for tool in &dimension.tools {
                if tool
                    .argv
                    .first()
                    .is_none_or(|p| p.is_empty() || p.contains('{'))
                {
                    return Err(profile_err(format!(
                        "tool `{}` of dimension `{checker}` needs a program as argv[0]",
                        tool.name
                    )));
                }
                tool.count
                    .validate()
                    .map_err(|m| profile_err(format!("tool `{}`: {m}", tool.name)))?;
            }
        }
        Ok(profile)
    }

    /// True when `path`'s extension is one of this profile's extensions.
    pub fn matches_path(&self, path: &str) -> bool {
        let name = path.rsplit('/').next().unwrap_or(path);
        match name.rsplit_once('.') {
            Some((stem, ext)) if !stem.is_empty() => self.extensions.iter().any(|e| e == ext),
            _ => false,
        }
    }
}

/// The shipped profiles, parsed once.
///
/// # Panics
/// If a shipped profile does not parse; the `shipped_profiles_parse` test guards this.
pub fn shipped_profiles() -> &'static [LanguageProfile] {
    static PROFILES: OnceLock<Vec<LanguageProfile>> = OnceLock::new();
    PROFILES.get_or_init(|| {
        PROFILE_SOURCES
            .iter()
            .map(|(file, text)| {
                LanguageProfile::parse(file, text).unwrap_or_else(|e| panic!("{e}"))
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_profiles_parse() {
        for (file, text) in PROFILE_SOURCES {
            let profile = LanguageProfile::parse(file, text).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(format!("{}.toml", profile.language), *file);
            assert!(!profile.dimensions.is_empty(), "{file} measures nothing");
        }
        let languages: Vec<_> = shipped_profiles()
            .iter()
            .map(|p| p.language.as_str())
            .collect();
        assert_eq!(languages, ["rust", "python", "go", "javascript"]);
    }

    /// The tools the issue asks for are in the profiles, in the dimension it names.
    #[test]
    fn shipped_profiles_name_the_issue_tools() {
        let tools = |language: &str, checker: Checker| -> Vec<String> {
            let profile = shipped_profiles()
                .iter()
                .find(|p| p.language == language)
                .unwrap();
            profile.dimensions[&checker]
                .tools
                .iter()
                .map(|t| t.name.clone())
                .collect()
        };
        assert_eq!(tools("rust", Checker::Lint), ["clippy"]);
        assert_eq!(tools("python", Checker::Lint), ["ruff"]);
        assert_eq!(tools("python", Checker::Complexity), ["radon", "lizard"]);
        assert_eq!(
            tools("go", Checker::Lint),
            ["golangci-lint", "golangci-lint-v1"]
        );
        assert_eq!(tools("go", Checker::Complexity)[0], "gocyclo");
        assert_eq!(tools("go", Checker::Duplication), ["dupl", "jscpd"]);
        assert_eq!(tools("javascript", Checker::Lint), ["eslint"]);
        assert_eq!(tools("javascript", Checker::Duplication), ["jscpd"]);
    }

    /// Facts §5 penalties: golangci-lint −0.05 per issue, dupl/jscpd −0.1 per clone, gocyclo
    /// −0.1 per function over 15.
    #[test]
    fn shipped_penalties_follow_facts() {
        for profile in shipped_profiles() {
            for (checker, dimension) in &profile.dimensions {
                let expected = match checker {
                    Checker::Lint => 0.05,
                    Checker::Duplication | Checker::Complexity => 0.1,
                    Checker::DiffSize => unreachable!("validated"),
                };
                assert_eq!(
                    dimension.normalize,
                    Normalize::LinearPenalty { per_item: expected },
                    "{} {checker}",
                    profile.language
                );
            }
        }
        let go = shipped_profiles()
            .iter()
            .find(|p| p.language == "go")
            .unwrap();
        assert!(
            go.dimensions[&Checker::Complexity].tools[0]
                .argv
                .windows(2)
                .any(|w| w == ["-over", "15"])
        );
    }

    #[test]
    fn language_detection_by_extension() {
        let python = shipped_profiles()
            .iter()
            .find(|p| p.language == "python")
            .unwrap();
        let javascript = shipped_profiles()
            .iter()
            .find(|p| p.language == "javascript")
            .unwrap();
        for (profile, path, expected) in [
            (python, "src/app.py", true),
            (python, "stubs/app.pyi", true),
            (python, "README.md", false),
            (python, ".py", false),
            (python, "py", false),
            (javascript, "web/a.tsx", true),
            (javascript, "web/a.mjs", true),
            (javascript, "web/a.json", false),
        ] {
            assert_eq!(
                profile.matches_path(path),
                expected,
                "{} {path}",
                profile.language
            );
        }
    }

    #[test]
    fn invalid_profiles_are_rejected_naming_the_file() {
        let tool = r#"[[dimensions.lint.tools]]
name = "t"
argv = ["t"]
count = { format = "lines" }
"#;
        for text in [
            "language = \"x\"\nextensions = []\n".to_string(),
            "language = \"x\"\nextensions = [\".x\"]\n".to_string(),
            "language = \"x\"\nextensions = [\"x\"]\nbogus = 1\n".to_string(),
            format!("language = \"x\"\nextensions = [\"x\"]\n[dimensions.lint]\nnormalize = {{ formula = \"linear_penalty\", per_item = 0 }}\n{tool}"),
            format!("language = \"x\"\nextensions = [\"x\"]\n[dimensions.diff_size]\nnormalize = {{ formula = \"linear_penalty\", per_item = 1 }}\n{}", tool.replace("lint", "diff_size")),
            "language = \"x\"\nextensions = [\"x\"]\n[dimensions.lint]\nnormalize = { formula = \"linear_penalty\", per_item = 1 }\ntools = []\n".to_string(),
            format!("language = \"x\"\nextensions = [\"x\"]\n[dimensions.lint]\nnormalize = {{ formula = \"linear_penalty\", per_item = 1 }}\n{}", tool.replace("argv = [\"t\"]", "argv = [\"{files}\"]")),
            format!("language = \"x\"\nextensions = [\"x\"]\n[dimensions.lint]\nnormalize = {{ formula = \"linear_penalty\", per_item = 1 }}\n{}", tool.replace("format = \"lines\"", "format = \"lines\", bogus = 1")),
            format!("language = \"x\"\nextensions = [\"x\"]\n[dimensions.lint]\nnormalize = {{ formula = \"linear_penalty\", per_item = 1 }}\n{}", tool.replace("format = \"lines\"", "format = \"xml\"")),
        ] {
            let err = LanguageProfile::parse("x.toml", &text).unwrap_err();
            assert!(err.to_string().starts_with("load checker profile `x.toml`: "), "{err}");
        }
    }
}
