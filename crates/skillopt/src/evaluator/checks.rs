//! Stage 1: cheap artifact checks over an artifact's bytes, configured by the check's `config`
//! (seed "Evaluator profiles and structured failures": cheap artifact checks first).
//!
//! `artifact_contract` (aliases `required_files`, `required_sections`) reads these optional
//! `config` keys; every configured rule is checked and every violation reported:
//!
//! | key | shape | rule |
//! |---|---|---|
//! | `non_empty` | bool, default true | the text is not blank |
//! | `min_bytes` / `max_bytes` | integer, bytes | size limits |
//! | `required_sections` | [string] | a line whose text, without leading `#`s and a trailing `:`, equals the name (case-insensitive): `## Testing`, `Testing:` and `# testing` all satisfy `## Testing` |
//! | `required_files` | [path] | a JSON bundle `{"files": {path: …}}` or `{"files": [path \| {"path": …}]}` lists it, or (text) a line contains it |
//! | `required_strings` | [string] | the text contains it |
//! | `forbidden_strings` | [string] | the text does not contain it |
//! | `optimizer_hint` | string | replaces the derived hint on failure |
//!
//! A config that does not parse makes the check `error` (it could not judge the artifact), not
//! `failed`.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use skillforge_contract::EvaluatorCheckConfig;

/// How one check ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckState {
    /// Ran and passed.
    Passed,
    /// Ran and found a violation.
    Failed,
    /// Did not run (reason in [`CheckOutcome::reason`]); never counts as a pass.
    Skipped,
    /// Could not run (bad config, tool error).
    Error,
}

impl CheckState {
    /// `passed` | `failed` | `skipped` | `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckState::Passed => "passed",
            CheckState::Failed => "failed",
            CheckState::Skipped => "skipped",
            CheckState::Error => "error",
        }
    }
}

/// The result of one check (artifact or render).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckOutcome {
    /// Check id (the profile's `id`, else its type).
    pub check_id: String,
    /// Check type, e.g. `artifact_contract`, `playwright`.
    pub check_type: String,
    /// Whether a failure blocks (`required`).
    pub required: bool,
    /// How it ended.
    pub state: CheckState,
    /// One-line reason (why it failed, was skipped or errored; what passed otherwise).
    pub reason: String,
    /// Evidence lines (each violation, sizes, tool output excerpts).
    pub evidence: Vec<String>,
    /// What the template should do so the check passes; empty unless failed.
    pub optimizer_hint: String,
}

impl CheckOutcome {
    /// An outcome of `check` with `state` and `reason`, no evidence or hint.
    pub fn new(check: &EvaluatorCheckConfig, state: CheckState, reason: impl Into<String>) -> Self {
        Self {
            check_id: check_id(check),
            check_type: check.check_type.clone(),
            required: check.required,
            state,
            reason: reason.into(),
            evidence: Vec::new(),
            optimizer_hint: String::new(),
        }
    }
}

/// The id a check is reported under: its `id`, else its `type`.
pub fn check_id(check: &EvaluatorCheckConfig) -> String {
    if check.id.trim().is_empty() {
        check.check_type.trim().to_owned()
    } else {
        check.id.trim().to_owned()
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ContractConfig {
    non_empty: Option<bool>,
    min_bytes: Option<u64>,
    max_bytes: Option<u64>,
    required_sections: Vec<String>,
    required_files: Vec<String>,
    required_strings: Vec<String>,
    forbidden_strings: Vec<String>,
    optimizer_hint: Option<String>,
}

/// Runs the artifact contract `check` over `bytes` (see the module docs for the rules). Pure.
/// A failing artifact is `Ok`-shaped: the outcome's state is [`CheckState::Failed`].
pub fn run_artifact_check(check: &EvaluatorCheckConfig, bytes: &[u8]) -> CheckOutcome {
    let config: ContractConfig = match check.config.clone().map(serde_json::from_value).transpose()
    {
        Ok(config) => config.unwrap_or_default(),
        Err(e) => {
            return CheckOutcome::new(
                check,
                CheckState::Error,
                format!("check config does not parse: {e}"),
            );
        }
    };
    let text = String::from_utf8_lossy(bytes);
    let n_bytes = bytes.len() as u64;
    let mut violations: Vec<String> = Vec::new();
    let mut hints: Vec<String> = Vec::new();
    if config.non_empty.unwrap_or(true) && text.trim().is_empty() {
        violations.push("the artifact is empty".into());
        hints.push("Always produce a non-empty output.".into());
    }
    if let Some(min) = config.min_bytes.filter(|min| n_bytes < *min) {
        violations.push(format!(
            "the artifact is {n_bytes} bytes, below the minimum of {min}"
        ));
        hints.push(format!("Write outputs of at least {min} bytes."));
    }
    if let Some(max) = config.max_bytes.filter(|max| n_bytes > *max) {
        violations.push(format!(
            "the artifact is {n_bytes} bytes, above the maximum of {max}"
        ));
        hints.push(format!("Keep outputs under {max} bytes."));
    }
    let missing_sections: Vec<&String> = config
        .required_sections
        .iter()
        .filter(|s| !has_section(&text, s))
        .collect();
    if !missing_sections.is_empty() {
        violations.extend(
            missing_sections
                .iter()
                .map(|s| format!("missing section `{}`", s.trim())),
        );
        hints.push(format!(
            "Include these sections in every output: {}.",
            code_list(&missing_sections)
        ));
    }
    let files = bundle_files(&text);
    let missing_files: Vec<&String> = config
        .required_files
        .iter()
        .filter(|f| match &files {
            Some(listed) => !listed.iter().any(|l| l == f.trim()),
            None => !text.lines().any(|line| line.contains(f.trim())),
        })
        .collect();
    if !missing_files.is_empty() {
        violations.extend(
            missing_files
                .iter()
                .map(|f| format!("missing file `{}`", f.trim())),
        );
        hints.push(format!(
            "Produce every required file: {}.",
            code_list(&missing_files)
        ));
    }
    let missing_strings: Vec<&String> = config
        .required_strings
        .iter()
        .filter(|s| !text.contains(s.as_str()))
        .collect();
    if !missing_strings.is_empty() {
        violations.extend(
            missing_strings
                .iter()
                .map(|s| format!("missing required text `{s}`")),
        );
        hints.push(format!(
            "Include {} in every output.",
            code_list(&missing_strings)
        ));
    }
    let present_forbidden: Vec<&String> = config
        .forbidden_strings
        .iter()
        .filter(|s| !s.is_empty() && text.contains(s.as_str()))
        .collect();
    if !present_forbidden.is_empty() {
        violations.extend(
            present_forbidden
                .iter()
                .map(|s| format!("contains forbidden text `{s}`")),
        );
        hints.push(format!(
            "Never include {} in the output.",
            code_list(&present_forbidden)
        ));
    }
    let mut outcome = if violations.is_empty() {
        CheckOutcome::new(
            check,
            CheckState::Passed,
            format!("artifact contract holds ({n_bytes} bytes)"),
        )
    } else {
        let mut failed = CheckOutcome::new(check, CheckState::Failed, violations.join("; "));
        failed.optimizer_hint = config
            .optimizer_hint
            .filter(|h| !h.trim().is_empty())
            .unwrap_or_else(|| hints.join(" "));
        failed
    };
    outcome.evidence = violations;
    outcome
}

/// Whether some line of `text` names section `name` (see the module docs).
fn has_section(text: &str, name: &str) -> bool {
    let normalize = |s: &str| {
        s.trim()
            .trim_start_matches('#')
            .trim()
            .trim_end_matches(':')
            .trim()
            .to_lowercase()
    };
    let wanted = normalize(name);
    !wanted.is_empty() && text.lines().any(|line| normalize(line) == wanted)
}

/// File paths of a JSON bundle (`{"files": {path: …}}` or `{"files": [path | {"path": …}]}`);
/// `None` when `text` is not such a bundle.
fn bundle_files(text: &str) -> Option<Vec<String>> {
    let value: Value = serde_json::from_str(text.trim()).ok()?;
    match value.get("files")? {
        Value::Object(map) => Some(map.keys().cloned().collect()),
        Value::Array(list) => Some(
            list.iter()
                .filter_map(|v| v.as_str().or_else(|| v.get("path").and_then(Value::as_str)))
                .map(str::to_owned)
                .collect(),
        ),
        _ => None,
    }
}

fn code_list(items: &[&String]) -> String {
    items
        .iter()
        .map(|s| format!("`{}`", s.trim()))
        .collect::<Vec<_>>()
        .join(", ")
}
