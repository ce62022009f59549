//! Eval briefs (seed: skill-eval-loop, "Knowledge-gap briefs (where skills win)"): the task both
//! arms get, `{id, prompt, setup, verify, rubric, output}`, validated with errors that name the
//! field; and the knowledge-gap checks a generated brief must pass before it is written.

use std::collections::BTreeMap;
use std::path::{Component, Path};

use serde::{Deserialize, Serialize};

/// Environment variable through which `verify` reads the arm's final reply (a file path).
pub const FINAL_ENV: &str = "FORGE_FINAL";
/// A brief's optional top-level key naming its JSON Schema for editors; ignored when a string.
pub const SCHEMA_KEY: &str = "$schema";
/// `output` value saying the deliverable is the agent's final chat reply.
pub const OUTPUT_REPLY: &str = "reply";

/// One eval brief (E-03).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "skill eval brief")]
pub struct Brief {
    /// Stable id: `[a-z0-9._-]`, 1..=80 characters; names the run directory and ledger rows.
    pub id: String,
    /// The task, given to both arms verbatim.
    pub prompt: String,
    /// Fixture files written into each arm's work dir before it runs: relative path → text.
    #[serde(default)]
    pub setup: BTreeMap<String, String>,
    /// Shell command run (`sh -c`) in the arm's work dir after the arm; exit 0 = acceptable
    /// output. Reads the final reply from the file named by `$FORGE_FINAL`.
    pub verify: String,
    /// What the blind judge is asked to weigh.
    pub rubric: String,
    /// `reply` when the deliverable is the final chat reply, else the deliverable's relative path.
    pub output: String,
}

/// Why a brief was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BriefError {
    /// Not JSON of the brief's shape (the parser's message names the field).
    #[error("invalid brief `{file}`: {message}")]
    Parse {
        /// Where the brief came from.
        file: String,
        /// The parser's message.
        message: String,
    },
    /// A field is present but unusable.
    #[error("invalid brief `{file}`: field `{field}` {message}")]
    Field {
        /// Where the brief came from.
        file: String,
        /// The field.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// Several problems at once, each naming its field.
    #[error("invalid brief `{file}`: {} problems:\n{}", problems.len(), problems.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
    Problems {
        /// Where the brief came from.
        file: String,
        /// One line per problem (`field `x` …`, `unknown field `y``…).
        problems: Vec<String>,
    },
    /// E-02: a rule of the theme appears in the fixtures or the prompt.
    #[error(
        "knowledge-gap brief refused: rule {rule:?} appears in the {place}; only a skill may carry the user's rules"
    )]
    RuleLeaked {
        /// The rule text.
        rule: String,
        /// `prompt` or `setup file <path>`.
        place: String,
    },
    /// E-01: the verify did not pass the good example and fail the bad one.
    #[error("knowledge-gap brief refused: its verify {what}; the brief was not written")]
    SelfTest {
        /// What the self-test saw.
        what: String,
    },
}

impl Brief {
    /// Parses and validates a brief read from `file` (used in messages), reporting every problem
    /// at once: unknown and missing fields, fields of the wrong type, and bad values.
    ///
    /// # Errors
    /// [`BriefError::Parse`] for a document over the parser limits (`contract::limits`: 16 MiB,
    /// 64 levels), text that is not JSON or not an object; with one problem, [`BriefError::Parse`]
    /// for an unknown/missing/mistyped field (a string `"$schema"` is not one) or
    /// [`BriefError::Field`] for a bad id, an empty prompt, verify or rubric, a setup path or
    /// output that is not relative and inside the work dir; with several,
    /// [`BriefError::Problems`] listing each.
    pub fn parse(text: &str, file: &str) -> Result<Self, BriefError> {
        skillforge_contract::limits::check_json(text).map_err(|e| BriefError::Parse {
            file: file.to_owned(),
            message: format!("the document {e}"),
        })?;
        let parse_err = |message: String| BriefError::Parse {
            file: file.to_owned(),
            message,
        };
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| parse_err(e.to_string()))?;
        let serde_json::Value::Object(mut map) = value else {
            return Err(parse_err(
                "expected a JSON object with fields id, prompt, setup, verify, rubric, output"
                    .to_owned(),
            ));
        };
        // An editor's `"$schema"` key (`skillforge init` writes one) is not a field of the brief.
        if map
            .get(SCHEMA_KEY)
            .is_some_and(serde_json::Value::is_string)
        {
            map.remove(SCHEMA_KEY);
        }
        let mut problems: Vec<Problem> = shape_problems(&map);
        if problems.is_empty() {
            let brief: Brief = serde_json::from_value(serde_json::Value::Object(map))
                .map_err(|e| parse_err(e.to_string()))?;
            problems = brief.value_problems();
            if problems.is_empty() {
                return Ok(brief);
            }
        } else {
            // The values that are there are checked too, so one run lists everything to fix.
            problems.extend(PartialBrief::from_map(&map).value_problems());
        }
        Err(Problem::into_error(problems, file))
    }

    /// Checks every field (see [`Brief::parse`]).
    ///
    /// # Errors
    /// [`BriefError::Field`] naming the bad field, or [`BriefError::Problems`] when several are.
    pub fn validate(&self, file: &str) -> Result<(), BriefError> {
        let problems = self.value_problems();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Problem::into_error(problems, file))
        }
    }

    fn value_problems(&self) -> Vec<Problem> {
        PartialBrief {
            id: Some(self.id.clone()),
            prompt: Some(self.prompt.clone()),
            setup: Some(self.setup.clone()),
            verify: Some(self.verify.clone()),
            rubric: Some(self.rubric.clone()),
            output: Some(self.output.clone()),
        }
        .value_problems()
    }

    /// Whether the deliverable is the final reply.
    pub fn is_reply(&self) -> bool {
        self.output == OUTPUT_REPLY
    }
}

/// Fields of a brief, in the order problems are reported.
const FIELDS: [&str; 6] = ["id", "prompt", "setup", "verify", "rubric", "output"];
/// Fields a brief must have (`setup` defaults to none).
const REQUIRED: [&str; 5] = ["id", "prompt", "verify", "rubric", "output"];

/// One thing wrong with a brief.
enum Problem {
    /// Not of the brief's shape: unknown, missing or mistyped field.
    Shape(String),
    /// A present field whose value is unusable.
    Field(&'static str, String),
}

impl Problem {
    fn line(&self) -> String {
        match self {
            Problem::Shape(m) => m.clone(),
            Problem::Field(field, m) => format!("field `{field}` {m}"),
        }
    }

    /// One problem keeps the single-problem error of its kind; several become one list.
    fn into_error(mut problems: Vec<Problem>, file: &str) -> BriefError {
        if problems.len() == 1 {
            return match problems.remove(0) {
                Problem::Shape(message) => BriefError::Parse {
                    file: file.to_owned(),
                    message,
                },
                Problem::Field(field, message) => BriefError::Field {
                    file: file.to_owned(),
                    field,
                    message,
                },
            };
        }
        BriefError::Problems {
            file: file.to_owned(),
            problems: problems.iter().map(Problem::line).collect(),
        }
    }
}

/// The brief's fields as far as they have the right type (for checking values when the shape
/// has problems too).
struct PartialBrief {
    id: Option<String>,
    prompt: Option<String>,
    setup: Option<BTreeMap<String, String>>,
    verify: Option<String>,
    rubric: Option<String>,
    output: Option<String>,
}

impl PartialBrief {
    /// The well-typed fields of `map`; a missing or mistyped one is `None`.
    fn from_map(map: &serde_json::Map<String, serde_json::Value>) -> Self {
        let text = |field: &str| {
            map.get(field)
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        };
        PartialBrief {
            id: text("id"),
            prompt: text("prompt"),
            setup: map
                .get("setup")
                .and_then(|v| serde_json::from_value(v.clone()).ok()),
            verify: text("verify"),
            rubric: text("rubric"),
            output: text("output"),
        }
    }

    fn value_problems(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        if let Some(id) = &self.id {
            let id_ok = !id.is_empty()
                && id.len() <= 80
                && id
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
                && !id.starts_with('.');
            if !id_ok {
                problems.push(Problem::Field(
                    "id",
                    format!("`{id}` must be 1-80 characters of a-z, 0-9, `.`, `_`, `-`"),
                ));
            }
        }
        for (field, value) in [
            ("prompt", &self.prompt),
            ("verify", &self.verify),
            ("rubric", &self.rubric),
        ] {
            if value.as_ref().is_some_and(|v| v.trim().is_empty()) {
                problems.push(Problem::Field(field, "is empty".to_owned()));
            }
        }
        for path in self.setup.iter().flat_map(BTreeMap::keys) {
            if !is_inside(path) {
                problems.push(Problem::Field(
                    "setup",
                    format!("path `{path}` must be relative and stay inside the work dir"),
                ));
            }
        }
        if let Some(output) = &self.output
            && output != OUTPUT_REPLY
            && !is_inside(output)
        {
            problems.push(Problem::Field(
                "output",
                format!("`{output}` must be `reply` or a relative path inside the work dir"),
            ));
        }
        problems
    }
}

/// Unknown, missing and mistyped fields of a brief's top-level object, all of them.
fn shape_problems(map: &serde_json::Map<String, serde_json::Value>) -> Vec<Problem> {
    let mut problems = Vec::new();
    for key in map.keys().filter(|k| !FIELDS.contains(&k.as_str())) {
        problems.push(Problem::Shape(format!(
            "unknown field `{key}`, expected one of `{}`",
            FIELDS.join("`, `")
        )));
    }
    for field in REQUIRED.iter().filter(|f| !map.contains_key(**f)) {
        problems.push(Problem::Shape(format!("missing field `{field}`")));
    }
    for field in FIELDS {
        let Some(value) = map.get(field) else {
            continue;
        };
        let typed = match field {
            "setup" => value
                .as_object()
                .is_some_and(|m| m.values().all(serde_json::Value::is_string)),
            _ => value.is_string(),
        };
        if !typed {
            let expected = if field == "setup" {
                "an object of relative path → file text"
            } else {
                "a string"
            };
            problems.push(Problem::Shape(format!(
                "field `{field}` must be {expected}"
            )));
        }
    }
    problems
}

fn is_inside(path: &str) -> bool {
    let p = Path::new(path);
    !path.is_empty() && p.components().all(|c| matches!(c, Component::Normal(_)))
}

/// A knowledge-gap brief as drafted from a correction theme (by a model or by hand), before
/// the checks of [`check_knowledge_gap`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KnowledgeGapDraft {
    /// The brief to write when every check passes.
    pub brief: Brief,
    /// The user's own rules the theme is about (must stay out of prompt and fixtures).
    pub rules: Vec<String>,
    /// A reply (or deliverable) that follows the rules: the verify must pass it.
    pub good_example: String,
    /// One that breaks them: the verify must fail it.
    pub bad_example: String,
}

/// E-02: no rule text appears (case-insensitively) in the prompt or a setup file.
///
/// # Errors
/// [`BriefError::RuleLeaked`] naming the rule and where it appeared.
pub fn check_rules_absent(draft: &KnowledgeGapDraft) -> Result<(), BriefError> {
    for rule in draft
        .rules
        .iter()
        .map(|r| r.trim())
        .filter(|r| !r.is_empty())
    {
        let needle = rule.to_lowercase();
        if draft.brief.prompt.to_lowercase().contains(&needle) {
            return Err(BriefError::RuleLeaked {
                rule: rule.to_owned(),
                place: "prompt".to_owned(),
            });
        }
        for (path, text) in &draft.brief.setup {
            if text.to_lowercase().contains(&needle) {
                return Err(BriefError::RuleLeaked {
                    rule: rule.to_owned(),
                    place: format!("setup file `{path}`"),
                });
            }
        }
    }
    Ok(())
}

/// E-01: the self-test outcome of the verify on the good and the bad example.
///
/// # Errors
/// [`BriefError::SelfTest`] unless the good example passed and the bad one failed.
pub fn check_self_test(good_passed: bool, bad_passed: bool) -> Result<(), BriefError> {
    let what = match (good_passed, bad_passed) {
        (true, false) => return Ok(()),
        (true, true) => "passes the bad example as well as the good one",
        (false, false) => "fails the good example as well as the bad one",
        (false, true) => "fails the good example and passes the bad one",
    };
    Err(BriefError::SelfTest {
        what: what.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn brief_json() -> serde_json::Value {
        serde_json::json!({
            "id": "short-replies", "prompt": "Summarise notes.md for the team.",
            "setup": {"notes.md": "- shipped 1.2\n- fixed login"},
            "verify": "test $(wc -w < \"$FORGE_FINAL\") -le 40", "rubric": "Which summary is more useful?",
            "output": "reply"
        })
    }

    // E-03
    #[test]
    fn e03_brief_fields_are_validated_by_name() {
        let check = |patch: serde_json::Value, want: Option<&str>| {
            let mut value = brief_json();
            for (k, v) in patch.as_object().unwrap() {
                value[k] = v.clone();
            }
            let got = Brief::parse(&value.to_string(), "b.json");
            match want {
                None => assert!(got.is_ok(), "{got:?}"),
                Some(w) => {
                    let e = got.expect_err(w).to_string();
                    assert!(e.contains(w) && e.contains("b.json"), "{e} should name {w}");
                }
            }
        };
        check(serde_json::json!({}), None);
        check(serde_json::json!({"id": "Bad Id"}), Some("field `id`"));
        check(serde_json::json!({"verify": " "}), Some("field `verify`"));
        check(
            serde_json::json!({"setup": {"../x": "y"}}),
            Some("field `setup`"),
        );
        check(
            serde_json::json!({"output": "/etc/passwd"}),
            Some("field `output`"),
        );
        check(serde_json::json!({"output": "out/report.md"}), None);
        check(
            serde_json::json!({"extra": 1}),
            Some("unknown field `extra`"),
        );
        let e = Brief::parse("{\"id\":\"x\"}", "b.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing field"), "{e}");
    }

    // E-03: one check lists every problem, shape and values together, each naming its field.
    #[test]
    fn e03_every_problem_of_a_brief_is_reported_at_once() {
        let text =
            r#"{"id": "Bad Id", "prompt": " ", "verify": 3, "output": "/etc/x", "extra": 1}"#;
        let e = Brief::parse(text, "b.json").unwrap_err();
        let BriefError::Problems { file, problems } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(file, "b.json");
        let want = [
            "unknown field `extra`",
            "missing field `rubric`",
            "field `verify` must be a string",
            "field `id` `Bad Id`",
            "field `prompt` is empty",
            "field `output` `/etc/x`",
        ];
        for w in want {
            assert!(
                problems.iter().any(|p| p.starts_with(w)),
                "{w} missing from {problems:#?}"
            );
        }
        assert_eq!(problems.len(), want.len(), "{problems:#?}");
        assert!(
            e.to_string()
                .starts_with("invalid brief `b.json`: 6 problems:\n  - "),
            "{e}"
        );
    }

    // E-02
    #[test]
    fn e02_rules_never_in_prompt_or_fixtures() {
        let brief: Brief = serde_json::from_value(brief_json()).unwrap();
        let mut draft = KnowledgeGapDraft {
            brief,
            rules: vec!["never say synergy".into()],
            good_example: "ok".into(),
            bad_example: "synergy".into(),
        };
        assert!(check_rules_absent(&draft).is_ok());
        draft
            .brief
            .setup
            .insert("thread.txt".into(), "Boss: NEVER say synergy".into());
        let e = check_rules_absent(&draft).unwrap_err().to_string();
        assert!(e.contains("setup file `thread.txt`"), "{e}");
        draft.brief.setup.remove("thread.txt");
        draft.brief.prompt.push_str(" Never say synergy.");
        assert!(
            check_rules_absent(&draft)
                .unwrap_err()
                .to_string()
                .contains("prompt")
        );
    }

    // E-01
    #[test]
    fn e01_self_test_must_pass_good_and_fail_bad() {
        assert!(check_self_test(true, false).is_ok());
        for (good, bad, want) in [
            (true, true, "passes the bad"),
            (false, false, "fails the good"),
            (false, true, "fails the good"),
        ] {
            let e = check_self_test(good, bad).unwrap_err().to_string();
            assert!(e.contains(want) && e.contains("not written"), "{e}");
        }
    }

    // Issue 12 item 7: a 100 000-level document is refused by the parser limits, naming the file.
    #[test]
    fn deeply_nested_brief_is_refused_naming_the_file() {
        let e = Brief::parse(&"[".repeat(100_000), "briefs/deep.json")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("briefs/deep.json") && e.contains("64 levels"),
            "{e}"
        );
    }
}
