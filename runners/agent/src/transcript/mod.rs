//! Transcript parsers: the final message and the skills offered and loaded, per format.
//!
//! Each parser reads the agent's stdout as captured (JSON lines for every format but
//! [`TranscriptFormat::Plain`]); lines that are not JSON objects (a truncation marker, stray
//! log text) are skipped. "Not recorded" is `None`, never an empty list: an empty list means
//! the transcript records skills and this run had none.

mod codex;
mod opencode;
mod scripted;
mod stream_json;

use serde_json::Value;

use crate::profile::{TranscriptFormat, TranscriptSpec};
use crate::signals::{ApiError, PermissionDenial, Usage};

/// What a transcript says about a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TranscriptSummary {
    /// The agent's last answer, when the transcript has one.
    pub final_message: Option<String>,
    /// Skills offered to the agent, in recorded order; `None` when the transcript does not
    /// record offers (or is empty / cut before them).
    pub skills_offered: Option<Vec<String>>,
    /// Skills loaded, deduplicated in first-load order; `None` when the transcript does not
    /// record skill calls (or holds no event of the runtime at all).
    pub skills_loaded: Option<Vec<String>>,
    /// The model the transcript says the run used (`scripted_jsonl`: its `model` line, the name
    /// the profile's `model_args` gave it); `None` when the format does not record one.
    pub model: Option<String>,
    /// Tokens and cost the transcript reports, summed over its turns; `None` when it reports
    /// none.
    pub usage: Option<Usage>,
    /// The API error that ended the run, when the transcript reports one (the run then gave no
    /// answer, whatever its final message says).
    pub api_error: Option<ApiError>,
    /// Tool calls the runtime's permission rules refused, in order.
    pub denials: Vec<PermissionDenial>,
}

/// Parses `text` (an agent's stdout) as `spec` says.
pub fn parse_transcript(spec: &TranscriptSpec, text: &str) -> TranscriptSummary {
    let skill_tool = spec
        .skill_tool
        .as_deref()
        .zip(spec.skill_tool_arg.as_deref());
    match spec.format {
        TranscriptFormat::StreamJson => stream_json::parse(text, skill_tool),
        TranscriptFormat::CodexJsonl => codex::parse(text),
        TranscriptFormat::OpencodeJson => opencode::parse(text, skill_tool),
        TranscriptFormat::ScriptedJsonl => scripted::parse(text),
        TranscriptFormat::Plain => TranscriptSummary {
            final_message: Some(text.trim())
                .filter(|t| !t.is_empty())
                .map(str::to_string),
            skills_offered: None,
            skills_loaded: None,
            ..TranscriptSummary::default()
        },
    }
}

/// The refused writes and commands a runtime's own session log records (the files under the
/// profile's `session_log_dir`, each file's text in `logs`) that its stdout transcript leaves
/// out: Codex's `rollout-*.jsonl` (`format` `codex_jsonl`); no other format has one. Returned
/// without those already in `seen`.
pub fn session_log_denials(
    format: TranscriptFormat,
    logs: &[String],
    seen: &[PermissionDenial],
) -> Vec<PermissionDenial> {
    let mut found: Vec<PermissionDenial> = Vec::new();
    if format != TranscriptFormat::CodexJsonl {
        return found;
    }
    for log in logs {
        for denial in codex::rollout_denials(log) {
            let known = |d: &PermissionDenial| {
                d.message == denial.message || (d.path.is_some() && d.path == denial.path)
            };
            if !seen.iter().any(known) && !found.iter().any(known) {
                found.push(denial);
            }
        }
    }
    found
}

/// `value[key]` as an unsigned integer, if it is one.
fn u64_field(value: &Value, key: &str) -> Option<u64> {
    value.get(key).and_then(Value::as_u64)
}

/// The JSON objects among `text`'s lines, in order.
fn json_objects(text: &str) -> impl Iterator<Item = serde_json::Map<String, Value>> + '_ {
    text.lines().filter_map(|line| {
        let line = line.trim();
        if !line.starts_with('{') {
            return None;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(map)) => Some(map),
            _ => None,
        }
    })
}

/// The string at `value[key]`, if it is one.
fn str_field<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

/// Appends `name` to `names` unless it is empty or already there.
fn push_unique(names: &mut Vec<String>, name: &str) {
    let name = name.trim();
    if !name.is_empty() && !names.iter().any(|n| n == name) {
        names.push(name.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::find;

    const CLAUDE: &str = include_str!("../../tests/fixtures/claude_stream.jsonl");
    const CLAUDE_NO_SKILLS: &str =
        include_str!("../../tests/fixtures/claude_stream_no_skill_list.jsonl");
    const CODEX: &str = include_str!("../../tests/fixtures/codex_exec.jsonl");
    const CODEX_LEGACY: &str = include_str!("../../tests/fixtures/codex_exec_legacy.jsonl");
    const OPENCODE: &str = include_str!("../../tests/fixtures/opencode_run.jsonl");
    const SCRIPTED: &str = include_str!("../../tests/fixtures/scripted.jsonl");

    fn names(list: &[&str]) -> Option<Vec<String>> {
        Some(list.iter().map(|s| s.to_string()).collect())
    }

    /// Table: (runtime, transcript, final message, offered, loaded).
    #[test]
    fn shipped_runtimes_read_their_captured_samples() {
        let check = |runtime: &str,
                     text: &str,
                     final_message: Option<&str>,
                     offered: Option<Vec<String>>,
                     loaded: Option<Vec<String>>| {
            let spec = &find(runtime).expect("runtime").transcript;
            let summary = parse_transcript(spec, text);
            assert_eq!(
                summary,
                TranscriptSummary {
                    final_message: final_message.map(str::to_string),
                    skills_offered: offered,
                    skills_loaded: loaded,
                    model: None,
                    ..summary.clone()
                },
                "{runtime}"
            );
        };
        check(
            "claude",
            CLAUDE,
            Some("Option a: tighten the subject line to 50 characters."),
            names(&["commit-message", "code-review"]),
            names(&["commit-message"]),
        );
        check("claude", CLAUDE_NO_SKILLS, Some("Done."), None, names(&[]));
        check(
            "codex",
            CODEX,
            Some("The diff renames `load` to `open`."),
            None,
            None,
        );
        check(
            "codex",
            CODEX_LEGACY,
            Some("Legacy final answer."),
            None,
            None,
        );
        check(
            "opencode",
            OPENCODE,
            Some("Summary written to NOTES.md."),
            None,
            names(&["release-notes"]),
        );
        check(
            "scripted",
            SCRIPTED,
            Some("{\"verdict\":\"a\",\"reasoning\":\"r\"}"),
            names(&["judge-rubric", "style"]),
            names(&["judge-rubric"]),
        );
    }

    /// Empty or foreign output records nothing: unknown, never "none".
    #[test]
    fn empty_or_foreign_output_is_unknown() {
        for runtime in ["claude", "codex", "opencode", "scripted"] {
            let spec = &find(runtime).unwrap().transcript;
            for text in ["", "Error: not logged in\n", "[... truncated 10 bytes]\n"] {
                let summary = parse_transcript(spec, text);
                assert_eq!(summary.skills_offered, None, "{runtime} {text:?}");
                assert_eq!(summary.skills_loaded, None, "{runtime} {text:?}");
                assert_eq!(summary.final_message, None, "{runtime} {text:?}");
            }
        }
    }

    #[test]
    fn plain_text_is_its_own_final_message() {
        let spec = TranscriptSpec {
            format: TranscriptFormat::Plain,
            skill_tool: None,
            skill_tool_arg: None,
            session_log_dir: None,
        };
        let check = |text: &str, expected: Option<&str>| {
            let summary = parse_transcript(&spec, text);
            assert_eq!(summary.final_message.as_deref(), expected);
            assert_eq!(
                (summary.skills_offered, summary.skills_loaded),
                (None, None)
            );
        };
        check("  hello\nworld\n", Some("hello\nworld"));
        check("\n \n", None);
    }
}
