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
                let Some(item) = event.get("item") else {
                    continue;
                };
                match str_field(item, "type") {
                    Some("agent_message") => {
                        final_message = str_field(item, "text").map(str::to_owned)
                    }
                    Some("command_execution") => {
                        let command = str_field(item, "command").unwrap_or_default();
                        let output = str_field(item, "aggregated_output").unwrap_or_default();
                        let exit = item.get("exit_code").and_then(Value::as_i64);
                        if let Some(said) = refused(output) {
                            denials.push(PermissionDenial {
                                tool: "shell".into(),
                                path: None,
                                message: Some(format!("{command}: {said}")),
                            });
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
                        input_tokens: u64_field(u, "input_tokens")
                            .map(|i| i.saturating_sub(cached.unwrap_or(0))),
                        output_tokens: u64_field(u, "output_tokens"),
                        cache_read_tokens: cached,
                        cache_write_tokens: None,
                        cost_usd: None,
                    };
                    usage.get_or_insert_with(Usage::default).add(&turn);
                }
            }
            Some("turn.failed") => {
                let message = event
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("turn failed");
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
        let name: String = before
            .chars()
            .rev()
            .take_while(|c| !matches!(c, '/' | ' ' | '\'' | '"' | '='))
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        if !name.is_empty() && name != "." {
            names.push(name);
        }
        rest = &rest[at + "/SKILL.md".len()..];
    }
    names
}

/// Refusals in a Codex session log (`$CODEX_HOME/sessions/…/rollout-*.jsonl`): each
/// `response_item` `function_call_output` / `custom_tool_call_output` whose output shows the
/// sandbox's refusal, named by its call (`exec_command`'s `cmd`, a shell's `command`, or
/// `apply_patch`) and the refused path when the shell's message names one
/// (`/bin/bash: line 1: /tmp/x: Read-only file system`). `exec --json` prints no item for such a
/// command (0.171.0), so this is the only record of it.
pub(super) fn rollout_denials(text: &str) -> Vec<PermissionDenial> {
    let mut calls: std::collections::BTreeMap<String, (String, String)> =
        std::collections::BTreeMap::new();
    let mut denials = Vec::new();
    for line in json_objects(text) {
        let line = Value::Object(line);
        let Some(item) = line
            .get("payload")
            .filter(|_| str_field(&line, "type") == Some("response_item"))
        else {
            continue;
        };
        let call_id = str_field(item, "call_id").unwrap_or_default().to_owned();
        match str_field(item, "type") {
            Some("function_call") => {
                let name = str_field(item, "name").unwrap_or("shell").to_owned();
                let args: Value = str_field(item, "arguments")
                    .and_then(|a| serde_json::from_str(a).ok())
                    .unwrap_or(Value::Null);
                let command = match args.get("cmd").or_else(|| args.get("command")) {
                    Some(Value::String(c)) => c.clone(),
                    Some(Value::Array(argv)) => argv
                        .iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(" "),
                    _ => String::new(),
                };
                calls.insert(call_id, (name, command));
            }
            Some("custom_tool_call") => {
                calls.insert(
                    call_id,
                    (
                        str_field(item, "name").unwrap_or("apply_patch").to_owned(),
                        String::new(),
                    ),
                );
            }
            Some("function_call_output" | "custom_tool_call_output") => {
                let output = match item.get("output") {
                    Some(Value::String(o)) => o.clone(),
                    Some(other) => other.to_string(),
                    None => continue,
                };
                let said = refused(&output).or_else(|| {
                    output
                        .lines()
                        .find(|l| l.contains("patch rejected"))
                        .map(|l| l.trim().chars().take(300).collect())
                });
                let Some(said) = said else { continue };
                let (name, command) = calls
                    .get(&call_id)
                    .cloned()
                    .unwrap_or_else(|| ("shell".to_owned(), String::new()));
                let tool = if name == "apply_patch" {
                    "apply_patch"
                } else {
                    "shell"
                };
                let message = if command.is_empty() {
                    said.clone()
                } else {
                    format!("{command}: {said}")
                };
                denials.push(PermissionDenial {
                    tool: tool.into(),
                    path: refused_path(&said),
                    message: Some(message),
                });
            }
            _ => {}
        }
    }
    denials
}

/// The path a shell's refusal names: `…: <path>: Read-only file system` (or `Permission
/// denied`, `Operation not permitted`).
fn refused_path(line: &str) -> Option<String> {
    let before = [
        "Read-only file system",
        "Permission denied",
        "Operation not permitted",
    ]
    .iter()
    .find_map(|m| line.find(m).map(|at| &line[..at]))?;
    let path = before
        .trim_end()
        .trim_end_matches(':')
        .rsplit(": ")
        .next()?
        .trim();
    (!path.is_empty() && !path.contains(char::is_whitespace)).then(|| path.to_owned())
}

/// The sandbox's refusal in a failed command's output, if that is why it failed.
fn refused(output: &str) -> Option<String> {
    output
        .lines()
        .find(|l| {
            l.contains("Read-only file system")
                || l.contains("Permission denied")
                || l.contains("Operation not permitted")
        })
        .map(|l| l.trim().chars().take(300).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    // issue 38 item 8: a refused command, absent from `exec --json`, read from the session log
    #[test]
    fn the_session_log_names_a_refused_write() {
        let log = concat!(
            r#"{"timestamp":"t","type":"session_meta","payload":{"id":"x"}}"#,
            "\n",
            r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\": \"echo x > /tmp/out/count.sh\"}","call_id":"c1"}}"#,
            "\n",
            r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"Process exited with code 1\nOutput:\n/bin/bash: line 1: /tmp/out/count.sh: Read-only file system\n"}}"#,
            "\n",
            r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\": \"ls\"}","call_id":"c2"}}"#,
            "\n",
            r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call_output","call_id":"c2","output":"a\nb\n"}}"#,
            "\n",
            r#"{"timestamp":"t","type":"response_item","payload":{"type":"custom_tool_call","name":"apply_patch","input":"*** Begin Patch","call_id":"c3"}}"#,
            "\n",
            r#"{"timestamp":"t","type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"c3","output":"patch rejected: writing is blocked by read-only sandbox; rejected by user approval settings"}}"#,
            "\n",
        );
        let denials = rollout_denials(log);
        assert_eq!(denials.len(), 2, "{denials:?}");
        assert_eq!(
            (denials[0].tool.as_str(), denials[0].path.as_deref()),
            ("shell", Some("/tmp/out/count.sh"))
        );
        assert!(
            denials[0]
                .message
                .as_deref()
                .unwrap()
                .starts_with("echo x > /tmp/out/count.sh: /bin/bash"),
            "{denials:?}"
        );
        assert_eq!(denials[0].human(), "shell of `/tmp/out/count.sh` refused");
        assert_eq!(
            refused_path("/bin/bash: line 1: made.txt: Read-only file system").as_deref(),
            Some("made.txt")
        );
        assert_eq!(
            refused_path("touch: cannot touch 'x': Permission denied"),
            None,
            "no path where the message does not end in one"
        );
        assert_eq!(refused_path("Read-only file system"), None);
        assert_eq!(
            (denials[1].tool.as_str(), denials[1].path.as_deref()),
            ("apply_patch", None)
        );
        let seen = vec![denials[0].clone()];
        let fresh = super::super::session_log_denials(
            crate::profile::TranscriptFormat::CodexJsonl,
            &[log.to_owned()],
            &seen,
        );
        assert_eq!(fresh.len(), 1, "one already in the transcript: {fresh:?}");
        assert!(
            super::super::session_log_denials(
                crate::profile::TranscriptFormat::StreamJson,
                &[log.to_owned()],
                &[]
            )
            .is_empty()
        );
    }

    #[test]
    fn a_skill_read_names_its_dir() {
        assert_eq!(
            skill_reads("bash -lc 'cat /w/.agents/skills/tldr/SKILL.md'"),
            ["tldr"]
        );
        assert_eq!(
            skill_reads("sed -n 1,200p .agents/skills/a/SKILL.md && cat \"x/b/SKILL.md\""),
            ["a", "b"]
        );
        assert!(skill_reads("ls -la").is_empty());
    }
}
