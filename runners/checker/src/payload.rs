//! The `checker` runner's payload: the diff to measure (text, or two commits of a repository)
//! and the checkers to run.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use skillforge_runner::RunnerPayload;

use crate::checker::{Checker, DEFAULT_CHECKERS};
use crate::normalize::DiffSizeConfig;

/// The `checker` runner's payload: either `{repo, base, head}` or `{diff}`, plus `checkers`.
///
/// JSON: `{"repo": "/path", "base": "REV", "head": "REV", "checkers": ["diff_size", "lint"]}`
/// or `{"diff": "<unified diff text>"}`. `checkers` defaults to `["diff_size"]` (rules S-34).
/// With diff text only there is no head checkout, so tool dimensions skip.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckerPayload {
    /// Path of the repository on the worker (a work tree or a bare repository).
    #[serde(default)]
    pub repo: Option<PathBuf>,
    /// Base revision (anything `git rev-parse` accepts that names a commit).
    #[serde(default)]
    pub base: Option<String>,
    /// Head revision; the tool dimensions run on a copy of its tree.
    #[serde(default)]
    pub head: Option<String>,
    /// Unified diff text, instead of `repo`/`base`/`head`.
    #[serde(default)]
    pub diff: Option<String>,
    /// Dimensions to measure, in report order.
    #[serde(default = "default_checkers")]
    pub checkers: Vec<Checker>,
    /// `diff_size` soft cap and zero point; 400/800 changed lines when absent.
    #[serde(default)]
    pub diff_size: Option<DiffSizeConfig>,
    /// Fetch the repository from here into the worker's mirror cache instead of opening `repo`
    /// (then only a label): how a job for a fleet names its repository (issue 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetch: Option<skillforge_runner::RepoFetch>,
}

fn default_checkers() -> Vec<Checker> {
    DEFAULT_CHECKERS.to_vec()
}

impl CheckerPayload {
    /// A payload comparing `base` and `head` of `repo` with `checkers`.
    pub fn commits(
        repo: impl Into<PathBuf>,
        base: impl Into<String>,
        head: impl Into<String>,
        checkers: Vec<Checker>,
    ) -> Self {
        Self {
            repo: Some(repo.into()),
            base: Some(base.into()),
            head: Some(head.into()),
            diff: None,
            checkers,
            diff_size: None,
            fetch: None,
        }
    }

    /// A payload measuring unified diff `text` with `checkers`.
    pub fn diff_text(text: impl Into<String>, checkers: Vec<Checker>) -> Self {
        Self {
            repo: None,
            base: None,
            head: None,
            diff: Some(text.into()),
            checkers,
            diff_size: None,
            fetch: None,
        }
    }

    /// Checks that exactly one source is given and the checker list is non-empty.
    ///
    /// # Errors
    /// A lowercase message naming the missing or conflicting field.
    pub fn validate(&self) -> Result<(), String> {
        match (&self.diff, &self.repo, &self.base, &self.head) {
            (Some(_), None, None, None) => {}
            (Some(_), ..) => {
                return Err("give either `diff` or `repo`/`base`/`head`, not both".into());
            }
            (None, Some(_), Some(_), Some(_)) => {}
            (None, None, ..) => return Err("missing `repo` (or `diff`)".into()),
            (None, Some(_), None, _) => return Err("missing `base`".into()),
            (None, Some(_), _, None) => return Err("missing `head`".into()),
        }
        if self.checkers.is_empty() {
            return Err("`checkers` is empty".into());
        }
        Ok(())
    }
}

impl RunnerPayload for CheckerPayload {
    const KIND: &'static str = "checker";
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn payload_validation_names_the_field() {
        for (payload, expected) in [
            (json!({"diff": ""}), Ok(())),
            (json!({"repo": "/r", "base": "a", "head": "b"}), Ok(())),
            (json!({}), Err("missing `repo` (or `diff`)")),
            (json!({"repo": "/r", "head": "b"}), Err("missing `base`")),
            (json!({"repo": "/r", "base": "a"}), Err("missing `head`")),
            (
                json!({"diff": "", "repo": "/r"}),
                Err("give either `diff` or `repo`/`base`/`head`, not both"),
            ),
            (
                json!({"diff": "", "checkers": []}),
                Err("`checkers` is empty"),
            ),
        ] {
            let parsed: CheckerPayload = serde_json::from_value(payload.clone()).unwrap();
            assert_eq!(
                parsed.validate(),
                expected.map_err(String::from),
                "{payload}"
            );
        }
    }

    // S-34: the default checker list is diff_size only.
    #[test]
    fn s34_payload_checkers_default_to_diff_size() {
        let parsed: CheckerPayload = serde_json::from_value(json!({"diff": ""})).unwrap();
        assert_eq!(parsed.checkers, [Checker::DiffSize]);
        let unknown =
            serde_json::from_value::<CheckerPayload>(json!({"diff": "", "checkers": ["typos"]}));
        assert!(unknown.is_err());
    }
}
