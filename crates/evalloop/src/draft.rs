//! A knowledge-gap brief drafted from a correction theme by a model (seed: skill-eval-loop,
//! "Knowledge-gap briefs (where skills win)"; E-01, E-02): the theme becomes a drafting prompt, an
//! `agent` job of stage `draft` answers with one JSON object (a [`KnowledgeGapDraft`]), and the
//! draft goes through the same checks as a hand-written one before any brief is written.
//!
//! Theme file (JSON; the miner's cluster, one theme): `{"name": "status-replies", "rules":
//! ["replies stay under 120 words", …], "corrections": ["no, shorter — nobody reads the whole
//! thing", …]}`. `rules` are the user's own rules the theme is about; `corrections` are what the
//! user said in the correction episodes (real session text). `eval theme --out` writes one mined
//! from real sessions (with its `signature`; [`super::theme::forge_theme`]).

use serde::{Deserialize, Serialize};
use skillforge_contract::limits::LimitError;
use skillforge_engine::JobSpec;
use skillforge_runner::PayloadError;
use skillforge_runner_agent::AgentPayload;

use super::brief::KnowledgeGapDraft;
use super::ledger::Signature;
use super::stages::StageDef;
use super::verdict::first_json_object;

/// A correction theme to draft a brief from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DraftTheme {
    /// The theme's name (becomes the brief id's stem).
    pub name: String,
    /// The user's rules: they decide quality and must never reach the prompt or fixtures.
    pub rules: Vec<String>,
    /// What the user said when correcting the agent, verbatim.
    #[serde(default)]
    pub corrections: Vec<String>,
    /// The theme's signature when it was mined from sessions (`eval theme --out`, tagged
    /// `corrections:<n>`): an adoption forged from it carries it on its ledger row, so the
    /// recheck measures the skill by the theme it was forged for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<Signature>,
}

/// Why a theme file or a drafting model's reply cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DraftError {
    /// The theme file is over the parser limits.
    #[error("invalid theme `{file}`: the document {source}")]
    ThemeLimits {
        /// The theme file, as named.
        file: String,
        /// The limit crossed.
        #[source]
        source: LimitError,
    },
    /// The theme file is not a theme.
    #[error("invalid theme `{file}`: {source}")]
    ThemeParse {
        /// The theme file, as named.
        file: String,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// Several shape problems at once (unknown or missing keys, wrong types), one line each.
    #[error("invalid theme `{file}`: {} problems:\n{}", problems.len(), problems.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
    ThemeProblems {
        /// The theme file, as named.
        file: String,
        /// One line per problem, with its key path and what is allowed.
        problems: Vec<String>,
    },
    /// The theme has no rule.
    #[error(
        "invalid theme `{file}`: `rules` is empty (a knowledge-gap brief is about the user's own rules)"
    )]
    NoRules {
        /// The theme file, as named.
        file: String,
    },
    /// The model's reply is over the parser limits.
    #[error("the drafting model's reply {0}")]
    ReplyLimits(#[source] LimitError),
    /// The model's reply holds no JSON object.
    #[error("the drafting model's reply holds no JSON object")]
    NoObject,
    /// The reply's first JSON object is not a draft.
    #[error("the drafting model's draft does not parse: {0}")]
    DraftParse(#[source] serde_json::Error),
}

impl DraftTheme {
    /// Parses a theme file's text; `file` names it in messages.
    ///
    /// # Errors
    /// [`DraftError::ThemeLimits`], [`DraftError::ThemeParse`] (one shape problem),
    /// [`DraftError::ThemeProblems`] (several, each with its key path) or [`DraftError::NoRules`],
    /// naming the file.
    pub fn parse(text: &str, file: &str) -> Result<Self, DraftError> {
        skillforge_contract::limits::check_json(text).map_err(|source| {
            DraftError::ThemeLimits {
                file: file.to_owned(),
                source,
            }
        })?;
        let theme: Self = serde_json::from_str(text).map_err(|source| {
            // Several shape problems are listed at once; one keeps the parser's message.
            let problems: Vec<String> = serde_json::from_str::<serde_json::Value>(text)
                .ok()
                .map(|value| {
                    let schema =
                        serde_json::to_value(schemars::schema_for!(DraftTheme)).unwrap_or_default();
                    skillforge_contract::shape::shape_problems(&schema, &value)
                        .iter()
                        .map(ToString::to_string)
                        .collect()
                })
                .unwrap_or_default();
            if problems.len() > 1 {
                DraftError::ThemeProblems {
                    file: file.to_owned(),
                    problems,
                }
            } else {
                DraftError::ThemeParse {
                    file: file.to_owned(),
                    source,
                }
            }
        })?;
        if theme.rules.iter().all(|r| r.trim().is_empty()) {
            return Err(DraftError::NoRules {
                file: file.to_owned(),
            });
        }
        Ok(theme)
    }
}

/// The drafting prompt: the theme's rules and corrections, and the shape of the answer. It tells
/// the model to keep the rules out of the prompt and fixtures it writes (E-02) and to give a good
/// and a bad example for the verify's self-test (E-01).
pub fn draft_prompt(theme: &DraftTheme) -> String {
    // `task: draft_brief` tells the scripted runtime what to answer (a model reads it as a label).
    let mut p = String::from(
        "task: draft_brief\n\
         Draft a knowledge-gap eval brief for the theme below: a realistic task where the user's OWN rules decide quality.\n\
         - Write realistic fixtures (a thread, notes, logs) as `setup` files and a prompt in the user's style.\n\
         - Neither the prompt nor any fixture may state or quote a rule: only a skill can carry them.\n\
         - `verify` is a shell command run in the work dir that exits 0 on acceptable output and checks objective rule properties (length caps, forbidden phrases, numbers not in the notes); when the deliverable is the final reply (`output: \"reply\"`) it reads it from $FORGE_FINAL.\n\
         - Give a `good_example` that follows every rule and a `bad_example` that breaks them: the verify must pass the first and fail the second.\n\
         Answer with one JSON object and nothing else: {\"brief\": {\"id\", \"prompt\", \"setup\": {path: text}, \"verify\", \"rubric\", \"output\"}, \"rules\": [..], \"good_example\", \"bad_example\"}.\n\n",
    );
    p.push_str(&format!(
        "## Theme: {}\n\n### The user's rules\n",
        theme.name
    ));
    for rule in &theme.rules {
        p.push_str(&format!("- {rule}\n"));
    }
    if !theme.corrections.is_empty() {
        p.push_str("\n### What the user said when correcting the agent\n");
        for c in &theme.corrections {
            p.push_str(&format!("{c}\n"));
        }
    }
    p
}

/// The drafting job on `runtime` (stage `draft`), key `eval:draft:<theme>:<digest of the prompt>`
/// so the same theme drafted twice is one job.
///
/// # Errors
/// [`PayloadError`] when the payload does not serialize.
pub fn draft_job(
    stage: &StageDef,
    theme: &DraftTheme,
    runtime: &str,
    model: Option<&str>,
) -> Result<JobSpec, PayloadError> {
    let prompt = draft_prompt(theme);
    let digest = &skillforge_stage::fs::sha256_hex(prompt.as_bytes())[..16];
    let mut payload = AgentPayload::new(runtime, prompt);
    payload.model = model.map(str::to_owned);
    payload.timeout_secs = Some(stage.timeout_secs);
    stage.job(
        &payload,
        Some(format!("eval:draft:{}:{digest}", theme.name)),
    )
}

/// The model's draft from its reply, read to the end of the first JSON object (E-08). The rules
/// checked later are the theme's, whatever the model listed: a model cannot drop a rule to pass
/// the leak check.
///
/// # Errors
/// [`DraftError::ReplyLimits`], [`DraftError::NoObject`] or [`DraftError::DraftParse`]: what is
/// wrong with the reply.
pub fn parse_draft(reply: &str, theme: &DraftTheme) -> Result<KnowledgeGapDraft, DraftError> {
    skillforge_contract::limits::check_json(reply).map_err(DraftError::ReplyLimits)?;
    let object = first_json_object(reply).ok_or(DraftError::NoObject)?;
    let mut draft: KnowledgeGapDraft =
        serde_json::from_str(object).map_err(DraftError::DraftParse)?;
    for rule in &theme.rules {
        if !draft.rules.contains(rule) {
            draft.rules.push(rule.clone());
        }
    }
    Ok(draft)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue 35: a theme file with several problems lists them all, each with its key path.
    #[test]
    fn every_problem_of_a_theme_is_reported_at_once() {
        let e = DraftTheme::parse(r#"{"name": 3, "rule": ["x"]}"#, "t.json")
            .unwrap_err()
            .to_string();
        for want in [
            "invalid theme `t.json`: 3 problems:",
            "unknown key `rule` (did you mean `rules`?); allowed: `name`, `rules`, `corrections`, `signature`",
            "`rules`: is required but missing",
            "`name`: 3 is not a string",
        ] {
            assert!(e.contains(want), "{want:?} missing from {e}");
        }
    }

    fn theme() -> DraftTheme {
        DraftTheme::parse(r#"{"name": "status", "rules": ["never say synergy"], "corrections": ["no, drop the buzzwords"]}"#, "t.json").unwrap()
    }

    #[test]
    fn the_prompt_carries_rules_and_corrections_and_the_answer_shape() {
        let p = draft_prompt(&theme());
        assert!(
            p.contains("- never say synergy")
                && p.contains("no, drop the buzzwords")
                && p.contains("good_example"),
            "{p}"
        );
        assert!(
            DraftTheme::parse(r#"{"name": "x", "rules": []}"#, "t.json")
                .unwrap_err()
                .to_string()
                .contains("`rules` is empty")
        );
        assert!(
            DraftTheme::parse(&"[".repeat(100_000), "deep.json")
                .unwrap_err()
                .to_string()
                .contains("deep.json")
        );
    }

    // E-02: the theme's rules are checked whatever the model's draft lists.
    #[test]
    fn e02_the_drafts_rules_always_include_the_themes() {
        let reply = r#"Here it is: {"brief": {"id": "b", "prompt": "Reply to the thread.", "verify": "true", "rubric": "r", "output": "reply"}, "rules": [], "good_example": "ok", "bad_example": "synergy"} done"#;
        let draft = parse_draft(reply, &theme()).unwrap();
        assert_eq!(draft.rules, ["never say synergy"]);
        assert!(
            parse_draft("I could not do it", &theme())
                .unwrap_err()
                .to_string()
                .contains("no JSON object")
        );
    }
}
