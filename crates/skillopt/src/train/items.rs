//! The `--items-file` of `train start` (seed "Complete train-mode path" step 1): the review items
//! every iteration of a session generates options for.
//!
//! ```yaml
//! items:
//!   - id: fix-login          # required; letters, digits, `.`, `_`, `-`
//!     title: Describe the login fix
//!     input: |               # what the agent works from (a diff, a task, a page brief)
//!       ...
//! ```
//!
//! A bare list of items is accepted too. Unknown keys are refused.

use serde::{Deserialize, Serialize};

/// One review item of a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ItemSpec {
    /// Item id, unique in the file: ASCII letters, digits, `.`, `_`, `-`.
    pub id: String,
    /// Title shown to reviewers ('' ⇒ the id).
    #[serde(default)]
    pub title: String,
    /// Input the agent writes its options from.
    #[serde(default)]
    pub input: String,
}

/// A train items file (`train start --items-file`): `items:` with a list of review items, or a
/// bare list of them.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
#[schemars(title = "train items file")]
enum ItemsFile {
    Wrapped(Wrapped),
    Bare(Vec<ItemSpec>),
}

/// `items:` with the review items.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Wrapped {
    /// The review items, at least one; ids unique.
    items: Vec<ItemSpec>,
}

/// The JSON Schema of an items file (`docs/schemas/train-items.json`).
pub fn schema() -> schemars::Schema {
    schemars::schema_for!(ItemsFile)
}

/// Why an items file is refused; every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum ItemsError {
    /// Over the document limits.
    #[error("items file `{file}` {error}")]
    Limit {
        /// The file.
        file: String,
        /// The limit it breaks.
        error: skillforge_contract::limits::LimitError,
    },
    /// Bad YAML or keys.
    #[error(
        "invalid items file `{file}`: {error} (expected `items:` with a list of {{id, title, input}}; no other keys)"
    )]
    Invalid {
        /// The file.
        file: String,
        /// The parser's error.
        error: serde_norway::Error,
    },
    /// No items.
    #[error("items file `{file}` has no items")]
    Empty {
        /// The file.
        file: String,
    },
    /// An empty or unsafe id.
    #[error(
        "items file `{file}`: item id {id:?} must be non-empty ASCII letters, digits, `.`, `_` or `-`"
    )]
    BadId {
        /// The file.
        file: String,
        /// The id.
        id: String,
    },
    /// An id twice.
    #[error("items file `{file}`: item id `{id}` appears twice")]
    Duplicate {
        /// The file.
        file: String,
        /// The id.
        id: String,
    },
    /// Several problems at once, one line each (position, key and what is allowed).
    #[error("invalid items file `{file}`: {} problems:\n{}", problems.len(), problems.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
    Problems {
        /// The file.
        file: String,
        /// One line per problem.
        problems: Vec<String>,
    },
}

/// Parses an items file (`file` names it in errors) into its items, in file order, reporting
/// every problem at once: the shape problems (unknown or missing keys, wrong types, each with its
/// position such as `items[2].titel` and the allowed keys), then every bad or duplicate id.
///
/// # Errors
/// [`ItemsError`] naming the file: bad YAML, no items; with one problem its own variant (a bad
/// key, an empty, duplicate or unsafe id), with several [`ItemsError::Problems`] listing each.
pub fn parse_items(text: &str, file: &str) -> Result<Vec<ItemSpec>, ItemsError> {
    let file_name = || file.to_owned();
    skillforge_contract::limits::check_yaml(text).map_err(|error| ItemsError::Limit {
        file: file_name(),
        error,
    })?;
    let invalid = |error| ItemsError::Invalid {
        file: file_name(),
        error,
    };
    let value: serde_json::Value = serde_norway::from_str(text).map_err(invalid)?;
    // The shape the document has is parsed alone (the untagged enum's own error says only that
    // no shape matched), so serde's message names the item and key.
    let parsed: Result<ItemsFile, serde_norway::Error> = match &value {
        serde_json::Value::Array(_) => {
            serde_norway::from_str::<Vec<ItemSpec>>(text).map(ItemsFile::Bare)
        }
        serde_json::Value::Object(m) if m.contains_key("items") => {
            serde_norway::from_str::<Wrapped>(text).map(ItemsFile::Wrapped)
        }
        _ => serde_norway::from_str(text),
    };
    let parsed = match parsed {
        Ok(parsed) => parsed,
        Err(error) => {
            // Several shape problems are listed at once, against that shape's schema (generated
            // from these types, so it refuses what they refuse); one keeps serde's message.
            let schema = match &value {
                serde_json::Value::Array(_) => Some(schemars::schema_for!(Vec<ItemSpec>)),
                serde_json::Value::Object(m) if m.contains_key("items") => {
                    Some(schemars::schema_for!(Wrapped))
                }
                _ => None,
            };
            let problems: Vec<String> = schema
                .map(|schema| {
                    skillforge_contract::shape::shape_problems(
                        &serde_json::to_value(schema).unwrap_or_default(),
                        &value,
                    )
                    .iter()
                    .map(ToString::to_string)
                    .collect()
                })
                .unwrap_or_default();
            if problems.len() > 1 {
                return Err(ItemsError::Problems {
                    file: file_name(),
                    problems,
                });
            }
            return Err(invalid(error));
        }
    };
    let items = match parsed {
        ItemsFile::Wrapped(w) => w.items,
        ItemsFile::Bare(items) => items,
    };
    if items.is_empty() {
        return Err(ItemsError::Empty { file: file_name() });
    }
    let mut problems: Vec<String> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut single = None;
    for item in &items {
        let id = item.id.as_str();
        let error = if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
            || id.starts_with('.')
        {
            ItemsError::BadId {
                file: file_name(),
                id: id.to_owned(),
            }
        } else if !seen.insert(id) {
            ItemsError::Duplicate {
                file: file_name(),
                id: id.to_owned(),
            }
        } else {
            continue;
        };
        problems.push(error.problem());
        single.get_or_insert(error);
    }
    match (problems.len(), single) {
        (0, _) => Ok(items),
        (1, Some(error)) => Err(error),
        _ => Err(ItemsError::Problems {
            file: file_name(),
            problems,
        }),
    }
}

impl ItemsError {
    /// The problem without the file (a line of [`ItemsError::Problems`]).
    fn problem(&self) -> String {
        match self {
            ItemsError::BadId { id, .. } => {
                format!("item id {id:?} must be non-empty ASCII letters, digits, `.`, `_` or `-`")
            }
            ItemsError::Duplicate { id, .. } => format!("item id `{id}` appears twice"),
            other => other.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_with_a_bad_key_is_named_with_its_position() {
        let e = parse_items("items:\n  - id: a\n    titel: x\n", "f.yml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("items[0]")
                && e.contains("unknown field `titel`")
                && !e.contains("untagged"),
            "{e}"
        );
        let e = parse_items("- id: a\n  input: [i]\n", "f.yml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("[0].input") && !e.contains("untagged"), "{e}");
    }

    // Issue 35: an items file with several problems lists them all, each with its position.
    #[test]
    fn every_problem_of_an_items_file_is_reported_at_once() {
        let text = "items:\n  - id: a\n    titel: x\n  - title: no id\n  - id: a/b\n  - id: a\n";
        let e = parse_items(text, "f.yml").unwrap_err().to_string();
        for want in [
            "invalid items file `f.yml`: 2 problems:",
            "  - `items[0]`: unknown key `titel` (did you mean `title`?); allowed: `id`, `title`, `input`",
            "  - `items[1].id`: is required but missing",
        ] {
            assert!(e.contains(want), "{want:?} missing from {e}");
        }
        let e = parse_items("- id: a/b\n- id: a\n- id: a\n", "f.yml")
            .unwrap_err()
            .to_string();
        for want in [
            "2 problems:",
            "item id \"a/b\" must be",
            "item id `a` appears twice",
        ] {
            assert!(e.contains(want), "{want:?} missing from {e}");
        }
    }

    #[test]
    fn items_files_table() {
        let ok = parse_items(
            "items:\n  - id: a\n    title: A\n    input: x\n  - id: b\n",
            "f",
        )
        .unwrap();
        assert_eq!(ok.len(), 2);
        assert_eq!(ok[1].title, "");
        assert_eq!(parse_items("- id: a\n", "f").unwrap()[0].id, "a");
        for (text, want) in [
            ("items: []\n", "no items"),
            ("items:\n  - id: a\n  - id: a\n", "twice"),
            ("items:\n  - id: a/b\n", "must be"),
            ("items:\n  - id: a\n    prompt: x\n", "invalid items file"),
        ] {
            let err = parse_items(text, "f.yml").unwrap_err().to_string();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }
}
