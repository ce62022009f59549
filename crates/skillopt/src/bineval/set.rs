//! BINEVAL question sets in YAML or JSON (seed: SkillOpt, "Binary evaluation (BINEVAL, off by
//! default)"; S-42): dimensions of small yes/no questions, weights defaulting to 1, question ids
//! unique across the whole set, deterministic assertions compiled up front.

use std::collections::BTreeSet;
use std::path::Path;

use regex::Regex;
use serde::Deserialize;

use super::BinevalError;

/// One string or a list of strings.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
enum OneOrMany {
    #[default]
    None,
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::None => Vec::new(),
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }
}

/// A BINEVAL question set (YAML, or JSON for a `.json` file): dimensions of yes/no questions.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "BINEVAL question set")]
struct RawSet {
    /// Format version; only 1 (default 1).
    version: Option<u32>,
    /// The template or task kind the set is for (free text, optional).
    #[serde(default)]
    template_or_task_kind: String,
    /// Rubric dimensions, at least one.
    #[serde(default)]
    dimensions: Vec<RawDimension>,
}

/// A rubric dimension.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawDimension {
    /// Name, unique in the set.
    #[serde(default)]
    name: String,
    /// Weight in the overall score, a finite number > 0 (default 1).
    weight: Option<f64>,
    /// Its yes/no questions, at least one.
    #[serde(default)]
    questions: Vec<RawQuestion>,
}

/// One yes/no question; "yes" means the output is good. The deterministic assertions, when
/// given, must all hold for a yes; without any, a model answers.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawQuestion {
    /// Id, unique across the whole set.
    #[serde(default)]
    id: String,
    /// The question.
    #[serde(default)]
    text: String,
    /// What a "no" looks like (optional, shown to a model judge).
    #[serde(default)]
    violation_example: String,
    /// Weight inside its dimension, > 0 (default 1).
    weight: Option<f64>,
    /// Substring(s) that must occur.
    #[serde(default)]
    contains: OneOrMany,
    /// Substring(s) that must not occur.
    #[serde(default)]
    not_contains: OneOrMany,
    /// Regular expression(s) that must match.
    #[serde(default)]
    regex: OneOrMany,
    /// Regular expression(s) that must not match.
    #[serde(default)]
    not_regex: OneOrMany,
}

/// The JSON Schema of a question set file (`docs/schemas/bineval-question-set.json`).
pub fn schema() -> schemars::Schema {
    schemars::schema_for!(RawSet)
}

/// The deterministic assertions of a question (all must hold for a yes).
#[derive(Debug, Clone, Default)]
pub struct Assertions {
    /// Substrings that must occur.
    pub contains: Vec<String>,
    /// Substrings that must not occur.
    pub not_contains: Vec<String>,
    /// Patterns that must match.
    pub regex: Vec<Regex>,
    /// Patterns that must not match.
    pub not_regex: Vec<Regex>,
}

impl Assertions {
    /// Whether the question has no assertion at all (the deterministic runner cannot answer it).
    pub fn is_empty(&self) -> bool {
        self.contains.is_empty()
            && self.not_contains.is_empty()
            && self.regex.is_empty()
            && self.not_regex.is_empty()
    }
}

/// One yes/no question.
#[derive(Debug, Clone)]
pub struct Question {
    /// Unique across the set.
    pub id: String,
    /// What is asked.
    pub text: String,
    /// What a "no" looks like ('' when not given).
    pub violation_example: String,
    /// Weight inside its dimension (> 0, default 1).
    pub weight: f64,
    /// Deterministic assertions.
    pub assertions: Assertions,
}

/// A rubric dimension.
#[derive(Debug, Clone)]
pub struct Dimension {
    /// Name, unique in the set.
    pub name: String,
    /// Weight in the overall score (> 0, default 1).
    pub weight: f64,
    /// Its questions (at least one).
    pub questions: Vec<Question>,
}

/// A validated question set.
#[derive(Debug, Clone)]
pub struct QuestionSet {
    /// `template_or_task_kind` ('' when absent).
    pub kind: String,
    /// Dimensions in file order.
    pub dimensions: Vec<Dimension>,
}

impl QuestionSet {
    /// Every `(dimension, question)` in file order.
    pub fn questions(&self) -> impl Iterator<Item = (&Dimension, &Question)> {
        self.dimensions
            .iter()
            .flat_map(|d| d.questions.iter().map(move |q| (d, q)))
    }

    /// The question with id `id`.
    pub fn question(&self, id: &str) -> Option<&Question> {
        self.questions().map(|(_, q)| q).find(|q| q.id == id)
    }
}

/// Reads and validates the question set at `path` (`.json` as JSON, anything else as YAML).
///
/// # Errors
/// [`BinevalError::Read`] when the file cannot be read; [`BinevalError::Set`] naming the file
/// (and the question or dimension) when it does not parse or breaks a rule: version other than 1,
/// no dimensions, a dimension without name or questions, duplicate dimension names, a question
/// without id or text, a duplicate question id anywhere in the set (S-42), a weight that is not a
/// finite number > 0, an invalid regex.
pub fn load(path: &Path) -> Result<QuestionSet, BinevalError> {
    let text = std::fs::read_to_string(path).map_err(|e| BinevalError::Read {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    let is_json = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    parse(&path.display().to_string(), &text, is_json)
}

/// Parses and validates a question set's text; `file` names it in errors.
///
/// # Errors
/// As [`load`].
pub fn parse(file: &str, text: &str, is_json: bool) -> Result<QuestionSet, BinevalError> {
    let invalid = |message: String| BinevalError::Set {
        file: file.to_owned(),
        message,
    };
    // Issue 12 item 7: the size and nesting limits are checked in one linear pass before the
    // parser runs, so a hostile document is refused at once with the limit named.
    let limits = if is_json {
        skillforge_contract::limits::check_json(text)
    } else {
        skillforge_contract::limits::check_yaml(text)
    };
    limits.map_err(|e| invalid(format!("the question set {e}")))?;
    let parsed: Result<RawSet, String> = if is_json {
        serde_json::from_str(text).map_err(|e| e.to_string())
    } else {
        serde_norway::from_str(text).map_err(|e| e.to_string())
    };
    let raw = match parsed {
        Ok(raw) => raw,
        Err(message) => {
            // Every shape problem at once when there are several (unknown keys with the allowed
            // ones, wrong types); one alone keeps the parser's message, which names its line.
            let value: Result<serde_json::Value, String> = if is_json {
                serde_json::from_str(text).map_err(|e| e.to_string())
            } else {
                serde_norway::from_str(text).map_err(|e| e.to_string())
            };
            if let Ok(value) = value {
                let schema = serde_json::to_value(schema()).unwrap_or_default();
                let shape: Vec<String> =
                    skillforge_contract::shape::shape_problems(&schema, &value)
                        .iter()
                        .map(ToString::to_string)
                        .collect();
                if shape.len() > 1 {
                    return Err(several(file, shape));
                }
            }
            return Err(invalid(message));
        }
    };
    let mut problems: Vec<String> = Vec::new();
    if let Some(v) = raw.version.filter(|v| *v != 1) {
        problems.push(format!("version {v} is not supported (expected 1)"));
    }
    if raw.dimensions.is_empty() {
        problems.push("no dimensions".to_owned());
    }
    let weight = |w: Option<f64>, what: String, problems: &mut Vec<String>| match w {
        None => 1.0,
        Some(w) if w.is_finite() && w > 0.0 => w,
        Some(w) => {
            problems.push(format!("{what}: weight {w} is not a number > 0"));
            1.0
        }
    };
    let mut ids = BTreeSet::new();
    let mut names = BTreeSet::new();
    let mut dimensions = Vec::with_capacity(raw.dimensions.len());
    for (d_idx, d) in raw.dimensions.into_iter().enumerate() {
        let name = d.name.trim().to_owned();
        if name.is_empty() {
            problems.push(format!("dimension {} has no name", d_idx + 1));
        } else if !names.insert(name.clone()) {
            problems.push(format!("dimension `{name}` appears twice"));
        }
        if d.questions.is_empty() {
            problems.push(format!("dimension `{name}` has no questions"));
        }
        let d_weight = weight(d.weight, format!("dimension `{name}`"), &mut problems);
        let mut questions = Vec::with_capacity(d.questions.len());
        for (q_idx, q) in d.questions.into_iter().enumerate() {
            let id = q.id.trim().to_owned();
            if id.is_empty() {
                problems.push(format!("dimension `{name}`, question {}: no id", q_idx + 1));
            } else if !ids.insert(id.clone()) {
                problems.push(format!(
                    "question id `{id}` appears twice (ids are unique across the whole set)"
                ));
            }
            if q.text.trim().is_empty() {
                problems.push(format!("question `{id}`: no text"));
            }
            let mut compile = |patterns: Vec<String>| -> Vec<Regex> {
                patterns
                    .iter()
                    .filter_map(|p| match Regex::new(p) {
                        Ok(r) => Some(r),
                        Err(e) => {
                            problems.push(format!("question `{id}`: invalid regex `{p}`: {e}"));
                            None
                        }
                    })
                    .collect()
            };
            let assertions = Assertions {
                contains: q.contains.into_vec(),
                not_contains: q.not_contains.into_vec(),
                regex: compile(q.regex.into_vec()),
                not_regex: compile(q.not_regex.into_vec()),
            };
            questions.push(Question {
                weight: weight(q.weight, format!("question `{id}`"), &mut problems),
                id,
                text: q.text.trim().to_owned(),
                violation_example: q.violation_example.trim().to_owned(),
                assertions,
            });
        }
        dimensions.push(Dimension {
            name,
            weight: d_weight,
            questions,
        });
    }
    match problems.len() {
        0 => Ok(QuestionSet {
            kind: raw.template_or_task_kind,
            dimensions,
        }),
        1 => Err(invalid(problems.remove(0))),
        _ => Err(several(file, problems)),
    }
}

/// Several problems of one set, one line each.
fn several(file: &str, problems: Vec<String>) -> BinevalError {
    BinevalError::Set {
        file: file.to_owned(),
        message: format!(
            "{} problems:\n{}",
            problems.len(),
            problems
                .iter()
                .map(|p| format!("  - {p}"))
                .collect::<Vec<_>>()
                .join("\n")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEED_SET: &str = "\
version: 1
template_or_task_kind: bugfix
dimensions:
  - name: correctness
    weight: 2
    questions:
      - id: has_test
        text: Does the output add a test?
        violation_example: A change with no accompanying test.
        weight: 1
        contains: \"func Test\"
  - name: style
    questions:
      - id: no_todo
        text: Is it free of TODOs?
        not_contains: [TODO, FIXME]
";

    #[test]
    fn a_set_nested_100_000_levels_deep_is_refused_naming_the_limit_before_parsing() {
        let deep = 100_000;
        let yaml = format!(
            "version: 1\ndimensions: {}{}\n",
            "[".repeat(deep),
            "]".repeat(deep)
        );
        let json = format!(
            "{{\"version\":1,\"dimensions\":{}{}}}",
            "[".repeat(deep),
            "]".repeat(deep)
        );
        for (text, is_json) in [(yaml, false), (json, true)] {
            let err = parse("deep.yml", &text, is_json).unwrap_err().to_string();
            assert!(
                err.contains("deep.yml") && err.contains("deeper than the limit of 64 levels"),
                "{err}"
            );
        }
    }

    #[test]
    fn the_seeds_example_parses_with_default_weights() {
        let set = parse("set.yml", SEED_SET, false).unwrap();
        assert_eq!(set.kind, "bugfix");
        assert_eq!(set.dimensions[0].weight, 2.0);
        assert_eq!(
            set.dimensions[1].weight, 1.0,
            "S-42: dimension weight defaults to 1"
        );
        assert_eq!(
            set.question("no_todo").unwrap().weight,
            1.0,
            "S-42: question weight defaults to 1"
        );
        assert_eq!(
            set.question("no_todo").unwrap().assertions.not_contains,
            ["TODO", "FIXME"]
        );
        let json = r#"{"version":1,"dimensions":[{"name":"c","questions":[{"id":"q","text":"t?","regex":"^fn "}]}]}"#;
        assert_eq!(
            parse("set.json", json, true)
                .unwrap()
                .question("q")
                .unwrap()
                .assertions
                .regex
                .len(),
            1
        );
    }

    // S-42
    #[test]
    fn s42_question_set_validation_errors_name_file_and_question() {
        let check = |text: &str, expected: &str| {
            let err = parse("sets/bugfix.yml", text, false)
                .expect_err(text)
                .to_string();
            assert!(err.contains("sets/bugfix.yml"), "{err}");
            assert!(err.contains(expected), "expected `{expected}` in {err}");
        };
        let dup = SEED_SET.replace("id: no_todo", "id: has_test");
        check(&dup, "question id `has_test` appears twice");
        check(
            &SEED_SET.replace("weight: 2", "weight: 0"),
            "dimension `correctness`: weight 0",
        );
        check(
            &SEED_SET.replace("weight: 1\n", "weight: -1\n"),
            "question `has_test`: weight -1",
        );
        check(
            &SEED_SET.replace("contains: \"func Test\"", "regex: \"(\""),
            "question `has_test`: invalid regex",
        );
        check(
            &SEED_SET.replace("text: Is it free of TODOs?", "text: \"\""),
            "question `no_todo`: no text",
        );
        check(&SEED_SET.replace("version: 1", "version: 2"), "version 2");
        check("version: 1\ndimensions: []\n", "no dimensions");
        check(
            &SEED_SET.replace("name: style", "name: correctness"),
            "dimension `correctness` appears twice",
        );
        check(
            &SEED_SET.replace("violation_example:", "violation_exampel:"),
            "unknown field `violation_exampel`",
        );
        check("dimensions: [", "");
    }

    // S-42, issue 35: a set with several problems lists them all, shape problems together and
    // rule problems together, each naming its dimension or question.
    #[test]
    fn s42_every_problem_of_a_question_set_is_reported_at_once() {
        let text = SEED_SET
            .replace("violation_example:", "violation_exampel:")
            .replace("    weight: 2\n", "    weight: heavy\n")
            .replace("template_or_task_kind", "kind");
        let e = parse("sets/b.yml", &text, false).unwrap_err().to_string();
        for want in [
            "invalid question set `sets/b.yml`: 3 problems:",
            "unknown key `kind`; allowed: `version`, `template_or_task_kind`, `dimensions`",
            "`dimensions[0].questions[0]`: unknown key `violation_exampel`",
            "`dimensions[0].weight`: `heavy` is not",
        ] {
            assert!(e.contains(want), "{want:?} missing from {e}");
        }
        let text = SEED_SET
            .replace("id: no_todo", "id: has_test")
            .replace("weight: 2", "weight: 0")
            .replace("contains: \"func Test\"", "regex: \"(\"");
        let e = parse("sets/b.yml", &text, false).unwrap_err().to_string();
        for want in [
            "3 problems:",
            "dimension `correctness`: weight 0",
            "question `has_test`: invalid regex",
            "question id `has_test` appears twice",
        ] {
            assert!(e.contains(want), "{want:?} missing from {e}");
        }
    }
}
