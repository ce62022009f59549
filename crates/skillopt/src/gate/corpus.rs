//! The replay corpus file (issue 34 item 11; facts §7 `gate_enabled`, §8 `skillopt_gate_runs`):
//! a versioned JSON file of items (id, prompt, expected) that the replay gate runs for the
//! champion and the candidate. Schema: `docs/schemas/replay-corpus.json`; format:
//! `docs/reference/formats.md` › Replay corpus.

use std::collections::HashSet;
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The `kind` every corpus file declares.
pub const CORPUS_KIND: &str = "skillforge-replay-corpus";
/// Largest corpus file read (bytes).
pub const MAX_CORPUS_BYTES: u64 = 4 * 1024 * 1024;

/// A replay corpus (`skillforge schema replay-corpus`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "skillforge replay corpus")]
pub struct Corpus {
    /// The JSON Schema of this file, for editors; ignored by skillforge.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Always `skillforge-replay-corpus`.
    pub kind: String,
    /// The corpus's own version, a positive integer: bump it when items change. Every gate run
    /// records the version it replayed, so an accepted run names the corpus it passed.
    pub version: u32,
    /// A shell line (`sh -c`) that replays one item for one side, run as a `process` job:
    /// `SKILLFORGE_REPLAY_TEMPLATE` (the side's template), `SKILLFORGE_REPLAY_ITEM`, `SKILLFORGE_REPLAY_PROMPT`,
    /// `SKILLFORGE_REPLAY_EXPECTED`, `SKILLFORGE_REPLAY_VERSION` (the version id) and
    /// `SKILLFORGE_REPLAY_SIDE` (`champion` | `candidate`) in its environment. Exit 0 with
    /// `expected` in its stdout passes the item; another exit code fails it; a command that
    /// cannot run, times out or is killed leaves the item unscorable. Absent: each item is asked
    /// of an agent (the side's template and the prompt) and passes when the answer contains
    /// `expected`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_command: Option<String>,
    /// The items, at least one, ids unique.
    pub items: Vec<CorpusItem>,
}

/// One corpus item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CorpusItem {
    /// Unique within the corpus (letters, digits, `-`, `_`, `.`).
    pub id: String,
    /// The task or question replayed.
    pub prompt: String,
    /// Text a passing output contains (case-sensitive, after trimming). May be empty only with
    /// a `replay_command` (then its exit status alone decides).
    #[serde(default)]
    pub expected: String,
}

/// The JSON Schema of a corpus file (`docs/schemas/replay-corpus.json`).
pub fn schema() -> schemars::Schema {
    schemars::schema_for!(Corpus)
}

/// Why a corpus file was refused: the file and what is wrong, where.
#[derive(Debug, thiserror::Error)]
#[error("replay corpus `{path}`: {message}")]
pub struct CorpusError {
    /// The file.
    pub path: String,
    /// What is wrong, naming the field or item.
    pub message: String,
}

impl Corpus {
    /// Reads and validates `path`.
    ///
    /// # Errors
    /// [`CorpusError`] for an unreadable, oversized or invalid file, naming the field or item.
    pub fn load(path: &Path) -> Result<Self, CorpusError> {
        let err = |message: String| CorpusError {
            path: path.display().to_string(),
            message,
        };
        let size = std::fs::metadata(path)
            .map_err(|e| err(format!("cannot read it: {e}")))?
            .len();
        if size > MAX_CORPUS_BYTES {
            return Err(err(format!(
                "{size} bytes, more than the {MAX_CORPUS_BYTES} a corpus may have"
            )));
        }
        let text =
            std::fs::read_to_string(path).map_err(|e| err(format!("cannot read it: {e}")))?;
        Self::parse(&text).map_err(err)
    }

    /// Parses and validates corpus JSON.
    ///
    /// # Errors
    /// A message naming the field or item that is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let corpus: Corpus = serde_path_to_error::deserialize(de).map_err(|e| {
            let at = e.path().to_string();
            if at == "." {
                e.inner().to_string()
            } else {
                format!("at `{at}`: {}", e.inner())
            }
        })?;
        corpus.validate()?;
        Ok(corpus)
    }

    fn validate(&self) -> Result<(), String> {
        if self.kind != CORPUS_KIND {
            return Err(format!(
                "`kind` is `{}`, expected `{CORPUS_KIND}`",
                self.kind
            ));
        }
        if self.version == 0 {
            return Err(
                "`version` must be a positive integer (bump it when the items change)".to_owned(),
            );
        }
        if self
            .replay_command
            .as_deref()
            .is_some_and(|c| c.trim().is_empty())
        {
            return Err(
                "`replay_command` is empty: remove it to ask an agent, or give a shell line"
                    .to_owned(),
            );
        }
        if self.items.is_empty() {
            return Err("`items` is empty: a corpus needs at least one item".to_owned());
        }
        let mut seen = HashSet::new();
        for (i, item) in self.items.iter().enumerate() {
            let at = format!("items[{i}]");
            if item.id.is_empty()
                || !item
                    .id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                return Err(format!(
                    "{at}: `id` {:?} must be non-empty letters, digits, `-`, `_` or `.`",
                    item.id
                ));
            }
            if !seen.insert(item.id.as_str()) {
                return Err(format!("{at}: `id` `{}` appears twice", item.id));
            }
            if item.prompt.trim().is_empty() {
                return Err(format!("{at} (`{}`): `prompt` is empty", item.id));
            }
            if item.expected.trim().is_empty() && self.replay_command.is_none() {
                return Err(format!(
                    "{at} (`{}`): `expected` is empty; without a `replay_command` an answer is scored by the expected text",
                    item.id
                ));
            }
        }
        Ok(())
    }

    /// The content hash of the corpus (its canonical JSON), so a run names exactly what it replayed.
    pub fn hash(&self) -> String {
        let canonical = Corpus {
            schema: None,
            ..self.clone()
        };
        skillforge_contract::sha256_hex(
            serde_json::to_string(&canonical)
                .unwrap_or_default()
                .as_bytes(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus(items: &str) -> String {
        format!(r#"{{"kind": "skillforge-replay-corpus", "version": 2, "items": {items}}}"#)
    }

    #[test]
    fn a_valid_corpus_parses_with_its_version() {
        let c = Corpus::parse(&corpus(
            r#"[{"id": "a", "prompt": "Add 2+2", "expected": "4"}]"#,
        ))
        .unwrap();
        assert_eq!(
            (c.version, c.items.len(), c.replay_command.as_deref()),
            (2, 1, None)
        );
        assert_eq!(c.hash().len(), 64);
    }

    #[test]
    fn bad_corpora_are_refused_naming_the_field_or_item() {
        let cases = [
            (
                r#"{"kind": "other", "version": 1, "items": []}"#.to_owned(),
                "`kind` is `other`",
            ),
            (
                r#"{"kind": "skillforge-replay-corpus", "version": 0, "items": []}"#.to_owned(),
                "`version`",
            ),
            (corpus("[]"), "`items` is empty"),
            (
                corpus(
                    r#"[{"id": "a", "prompt": "p", "expected": "x"}, {"id": "a", "prompt": "q", "expected": "y"}]"#,
                ),
                "items[1]: `id` `a` appears twice",
            ),
            (
                corpus(r#"[{"id": "a", "prompt": " ", "expected": "x"}]"#),
                "items[0] (`a`): `prompt` is empty",
            ),
            (
                corpus(r#"[{"id": "a", "prompt": "p"}]"#),
                "`expected` is empty",
            ),
            (
                corpus(r#"[{"id": "a b", "prompt": "p", "expected": "x"}]"#),
                "`id` \"a b\"",
            ),
            (
                corpus(r#"[{"id": "a", "prompt": "p", "expected": "x", "extra": 1}]"#),
                "at `items[0].extra`: unknown field",
            ),
        ];
        for (text, needle) in cases {
            let e = Corpus::parse(&text).unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn a_replay_command_lets_expected_be_empty() {
        let text = r#"{"kind": "skillforge-replay-corpus", "version": 1, "replay_command": "make check", "items": [{"id": "a", "prompt": "p"}]}"#;
        assert_eq!(
            Corpus::parse(text).unwrap().replay_command.as_deref(),
            Some("make check")
        );
    }
}
