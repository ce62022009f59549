//! Claude Code `--output-format stream-json --verbose` transcripts.
//!
//! * Offered skills: the `skills` array of the `{"type":"system","subtype":"init"}` line
//!   (strings, or objects with a `name`); unknown when the line lacks it or is missing.
//! * Loaded skills: `tool_use` blocks of `assistant` messages whose `name` is the profile's
//!   skill tool (`Skill`), naming the skill in the `skill_tool_arg` input (`skill`), unless the
//!   matching `tool_result` is an error (a failed call loads nothing); recorded whenever the
//!   transcript holds any Claude event.
//! * Final message: the last `result` line's `result`; else the text blocks of the last
//!   `assistant` message that has text.
//! * Usage: the `result` line's `usage` (`input_tokens`, `output_tokens`,
//!   `cache_read_input_tokens`, `cache_creation_input_tokens`) and `total_cost_usd`.
//! * API error: a `result` line with `is_error: true` (its `api_error_status`, else the status in
//!   its `result` text, `API Error: 400 …`), or an `assistant` line carrying an `error` field
//!   (`authentication_failed`, `rate_limit`, …) when no result line follows.
//! * Denials: the `result` line's `permission_denials` (`tool_name`, `tool_input.file_path`).

use std::collections::BTreeSet;

use serde_json::Value;

use super::{TranscriptSummary, json_objects, push_unique, str_field, u64_field};
use crate::signals::{ApiError, PermissionDenial, Usage};

pub(super) fn parse(text: &str, skill_tool: Option<(&str, &str)>) -> TranscriptSummary {
    let mut has_events = false;
    let mut offered: Option<Vec<String>> = None;
    let mut skill_calls: Vec<(String, String)> = Vec::new();
    let mut failed_calls = BTreeSet::new();
    let mut result: Option<String> = None;
    let mut last_assistant_text: Option<String> = None;
    let mut usage = None;
    let mut api_error = None;
    let mut assistant_error = None;
    let mut denials = Vec::new();
    for event in json_objects(text) {
        let event = Value::Object(event);
        match str_field(&event, "type") {
            Some("system") => {
                has_events = true;
                if str_field(&event, "subtype") == Some("init")
                    && let Some(skills) = event.get("skills").and_then(Value::as_array)
                {
                    let mut names = offered.take().unwrap_or_default();
                    for skill in skills {
                        if let Some(name) = skill.as_str().or_else(|| str_field(skill, "name")) {
                            push_unique(&mut names, name);
                        }
                    }
                    offered = Some(names);
                }
            }
            Some("assistant") => {
                has_events = true;
                let blocks = event
                    .pointer("/message/content")
                    .and_then(Value::as_array)
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                let mut texts = Vec::new();
                for block in blocks {
                    match str_field(block, "type") {
                        Some("text") => texts.extend(str_field(block, "text")),
                        Some("tool_use") => {
                            if let Some((tool, arg)) = skill_tool
                                && str_field(block, "name") == Some(tool)
                                && let Some(name) =
                                    block.get("input").and_then(|input| str_field(input, arg))
                            {
                                let id = str_field(block, "id").unwrap_or_default().to_owned();
                                skill_calls.push((id, name.to_owned()));
                            }
                        }
                        _ => {}
                    }
                }
                if !texts.is_empty() {
                    last_assistant_text = Some(texts.join("\n"));
                }
                if let Some(kind) = str_field(&event, "error") {
                    let said = texts.join("\n");
                    assistant_error = Some(ApiError::new(
                        status_of_error_kind(kind),
                        if said.is_empty() { kind } else { &said },
                    ));
                }
            }
            Some("user") => {
                has_events = true;
                let blocks = event
                    .pointer("/message/content")
                    .and_then(Value::as_array)
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                for block in blocks {
                    if str_field(block, "type") == Some("tool_result")
                        && block.get("is_error").and_then(Value::as_bool) == Some(true)
                        && let Some(id) = str_field(block, "tool_use_id")
                    {
                        failed_calls.insert(id.to_owned());
                    }
                }
            }
            Some("result") => {
                has_events = true;
                if let Some(text) = str_field(&event, "result") {
                    result = Some(text.to_string());
                }
                usage = Some(result_usage(&event)).filter(|u: &Usage| !u.is_unknown());
                if event.get("is_error").and_then(Value::as_bool) == Some(true) {
                    let status =
                        u64_field(&event, "api_error_status").and_then(|s| u16::try_from(s).ok());
                    let message = str_field(&event, "result")
                        .map(str::to_owned)
                        .or_else(|| {
                            event
                                .get("errors")
                                .and_then(Value::as_array)
                                .and_then(|e| e.first())
                                .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_owned))
                        })
                        .unwrap_or_else(|| {
                            str_field(&event, "subtype").unwrap_or("error").to_owned()
                        });
                    api_error = Some(ApiError::new(status, &message));
                } else {
                    api_error = None;
                    assistant_error = None;
                }
                for denial in event
                    .get("permission_denials")
                    .and_then(Value::as_array)
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                {
                    let input = denial.get("tool_input");
                    let path = input.and_then(|i| {
                        str_field(i, "file_path")
                            .or_else(|| str_field(i, "path"))
                            .or_else(|| str_field(i, "command"))
                    });
                    denials.push(PermissionDenial {
                        tool: str_field(denial, "tool_name").unwrap_or("tool").to_owned(),
                        path: path.map(str::to_owned),
                        message: None,
                    });
                }
            }
            _ => {}
        }
    }
    let mut loaded = Vec::new();
    for (id, name) in &skill_calls {
        if id.is_empty() || !failed_calls.contains(id) {
            push_unique(&mut loaded, name);
        }
    }
    TranscriptSummary {
        final_message: result.or(last_assistant_text),
        skills_offered: offered,
        skills_loaded: (has_events && skill_tool.is_some()).then_some(loaded),
        model: None,
        usage,
        api_error: api_error.or(assistant_error),
        denials,
    }
}

/// Claude Code's assistant-line `error` values, as the statuses they stand for.
fn status_of_error_kind(kind: &str) -> Option<u16> {
    match kind {
        "authentication_failed" => Some(401),
        "billing_error" => Some(402),
        "rate_limit" => Some(429),
        "invalid_request" => Some(400),
        "server_error" => Some(500),
        _ => None,
    }
}

fn result_usage(event: &Value) -> Usage {
    let usage = event.get("usage");
    let field = |key: &str| usage.and_then(|u| u64_field(u, key));
    Usage {
        input_tokens: field("input_tokens"),
        output_tokens: field("output_tokens"),
        cache_read_tokens: field("cache_read_input_tokens"),
        cache_write_tokens: field("cache_creation_input_tokens"),
        cost_usd: event.get("total_cost_usd").and_then(Value::as_f64),
    }
}
