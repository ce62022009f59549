//! Codex `exec --json` transcripts.
//!
//! * Final message: the last completed `agent_message` item's `text`
//!   (`{"type":"item.completed","item":{"type":"agent_message","text":...}}`), or in the older
//!   event shape the last `{"msg":{"type":"agent_message","message":...}}`.
//! * Skills offered: Codex records none, so they stay unknown (seed: skill-eval-loop, "Codex
//!   transcripts record no skill call at all").
//! * Skills loaded: Codex has no skill tool; it reads a skill's `SKILL.md` with a shell command.
//!   A completed `command_execution` whose command names `<dir>/<name>/SKILL.md` and exited 0 is
//!   a load of `<name>`. Only such positive evidence is recorded: with none, loads stay unknown
//!   (a run may have used the skill another way, so "none" would be a claim the transcript
//!   cannot back).
//! * Usage: `turn.completed`'s `usage` (`input_tokens` includes `cached_input_tokens`), summed
//!   over turns; Codex reports no cost.
//! * API error: `turn.failed`'s `error.message`, else (no answer came) the last `error` event's
//!   `message` (Codex's own reconnect notices are `error` events too, so one alone is not
//!   enough when an answer followed).
//! * Denials: a command whose output shows "Read-only file system" or "Permission denied"
//!   (whatever its exit code: a chained command may exit 0), and a `file_change` item whose
//!   status is `failed`.

use serde_json::Value;

use super::{TranscriptSummary, json_objects, push_unique, str_field, u64_field};
use crate::signals::{ApiError, PermissionDenial, Usage};

pub(super) fn parse(text: &str) -> TranscriptSummary {
    let mut final_message = None;
    let mut loaded: Vec<String> = Vec::new();
    let mut usage: Option<Usage> = None;
    let mut turn_failed = None;
    let mut last_error: Option<String> = None;
    let mut denials = Vec::new();
    for event in json_objects(text) {
        let event = Value::Object(event);
        let kind = str_field(&event, "type");
        match kind {
            Some("item.completed") => {
                let Some(item) = event.get("item") else { continue };
                match str_field(item, "type") {
                    Some("agent_message") => final_message = str_field(item, "text").map(str::to_owned),
                    Some("command_execution") => {
                        let command = str_field(item, "command").unwrap_or_default();
                        let output = str_field(item, "aggregated_output").unwrap_or_default();
                        let exit = item.get("exit_code").and_then(Value::as_i64);
                        if let Some(said) = refused(output) {
                            denials.push(PermissionDenial { tool: "shell".into(), path: None, message: Some(format!("{command}: {said}")) });
                        } else if exit == Some(0) {
                            for name in skill_reads(command) {
                                push_unique(&mut loaded, &name);
                            }
                        }
                    }
                    Some("file_change") if str_field(item, "status") == Some("failed") => {
                        let paths: Vec<&str> = item
                            .get("changes")
                            .and_then(Value::as_array)
                            .map(|c| c.iter().filter_map(|c| str_field(c, "path")).collect())
                            .unwrap_or_default();
                        denials.push(PermissionDenial {
                            tool: "apply_patch".into(),
                            path: (!paths.is_empty()).then(|| paths.join(", ")),
                            message: None,
                        });
                    }
                    _ => {}
                }
            }
            Some("turn.completed") => {
                if let Some(u) = event.get("usage") {
                    let cached = u64_field(u, "cached_input_tokens");
                    let turn = Usage {
                        input_tokens: u64_field(u, "input_tokens").map(|i| i.saturating_sub(cached.unwrap_or(0))),
                        output_tokens: u64_field(u, "output_tokens"),
                        cache_read_tokens: cached,
                        cache_write_tokens: None,
                        cost_usd: None,
                    };
                    usage.get_or_insert_with(Usage::default).add(&turn);
                }
            }
            Some("turn.failed") => {
                let message = event.pointer("/error/message").and_then(Value::as_str).unwrap_or("turn failed");
                turn_failed = Some(ApiError::new(None, message));
            }
            Some("error") => last_error = str_field(&event, "message").map(str::to_owned),
            _ => {
                if let Some(message) = event
                    .get("msg")
                    .filter(|msg| str_field(msg, "type") == Some("agent_message"))
                    .and_then(|msg| str_field(msg, "message"))
                {
                    final_message = Some(message.to_string());
                }
            }
        }
    }
    let api_error = turn_failed.or_else(|| match (&final_message, last_error) {
        (None, Some(message)) => Some(ApiError::new(None, &message)),
        _ => None,
    });
    TranscriptSummary {
        final_message,
        skills_offered: None,
        skills_loaded: (!loaded.is_empty()).then_some(loaded),
        model: None,
        usage,
        api_error,
        denials,
    }
}

/// The skills whose `SKILL.md` a shell command reads: the directory name before each
/// `/SKILL.md` in `command`.
fn skill_reads(command: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = command;
    while let Some(at) = rest.find("/SKILL.md") {
        let before = &rest[..at];
        let name: String = before.chars().rev().take_while(|c| !matches!(c, '/' | ' ' | '\'' | '"' | '=')).collect::<Vec<_>>().into_iter().rev().collect();
        if !name.is_empty() && name != "." {
            names.push(name);
        }
        rest = &rest[at + "/SKILL.md".len()..];
    }
    names
}

/// The sandbox's refusal in a failed command's output, if that is why it failed.
fn refused(output: &str) -> Option<String> {
    output
        .lines()
        .find(|l| l.contains("Read-only file system") || l.contains("Permission denied") || l.contains("Operation not permitted"))
        .map(|l| l.trim().chars().take(300).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skill_read_names_its_dir() {
        assert_eq!(skill_reads("bash -lc 'cat /w/.agents/skills/tldr/SKILL.md'"), ["tldr"]);
        assert_eq!(skill_reads("sed -n 1,200p .agents/skills/a/SKILL.md && cat \"x/b/SKILL.md\""), ["a", "b"]);
        assert!(skill_reads("ls -la").is_empty());
    }
}
