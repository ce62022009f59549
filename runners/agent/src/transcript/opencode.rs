//! OpenCode `run --format json` transcripts.
//!
//! Lines are `{"type": "step_start" | "text" | "tool_use" | "step_finish" | "error",
//! "timestamp": ms, "sessionID": ..., "part": {...}}`.
//!
//! * Final message: the last `text` event's `part.text`.
//! * Loaded skills: `tool_use` events whose `part.tool` is the profile's skill tool (`skill`),
//!   naming the skill at `part.state.input.<skill_tool_arg>` (`name`), whose `part.state.status`
//!   is not `error` (a failed call, such as a skill load without ripgrep, loads nothing);
//!   recorded whenever the transcript holds any OpenCode event.
//! * Offered skills: not recorded by OpenCode, so unknown.
//! * Usage: each `step_finish`'s `part.tokens` (`input`, `output`, `reasoning`, `cache.read`,
//!   `cache.write`) and `part.cost`, summed.
//! * API error: an `error` event: `error.data.statusCode` / `error.data.message` (an `APIError`),
//!   else `error.message` / `error.name`.
//! * Denials: a tool call that ended in `error` with a permission refusal in its `state.error`.

use serde_json::Value;

use super::{TranscriptSummary, json_objects, push_unique, str_field};
use crate::signals::{ApiError, PermissionDenial, Usage};

pub(super) fn parse(text: &str, skill_tool: Option<(&str, &str)>) -> TranscriptSummary {
    let mut has_events = false;
    let mut final_message = None;
    let mut loaded = Vec::new();
    let mut usage: Option<Usage> = None;
    let mut api_error = None;
    let mut denials = Vec::new();
    for event in json_objects(text) {
        let event = Value::Object(event);
        let part = event.get("part");
        match str_field(&event, "type") {
            Some("text") => {
                has_events = true;
                if let Some(text) = part.and_then(|p| str_field(p, "text")) {
                    final_message = Some(text.to_string());
                }
            }
            Some("tool_use") => {
                has_events = true;
                let Some(part) = part else { continue };
                let failed = part.pointer("/state/status").and_then(Value::as_str) == Some("error");
                if failed {
                    let said = part
                        .pointer("/state/error")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    let lower = said.to_ascii_lowercase();
                    if lower.contains("permission")
                        || lower.contains("denied")
                        || lower.contains("rejected")
                    {
                        let input = part.pointer("/state/input");
                        denials.push(PermissionDenial {
                            tool: str_field(part, "tool").unwrap_or("tool").to_owned(),
                            path: input
                                .and_then(|i| {
                                    str_field(i, "filePath").or_else(|| str_field(i, "command"))
                                })
                                .map(str::to_owned),
                            message: Some(said.chars().take(300).collect()),
                        });
                    }
                } else if let Some((tool, arg)) = skill_tool
                    && str_field(part, "tool") == Some(tool)
                    && let Some(name) = part
                        .pointer("/state/input")
                        .and_then(|input| str_field(input, arg))
                {
                    push_unique(&mut loaded, name);
                }
            }
            Some("step_finish") => {
                has_events = true;
                if let Some(part) = part {
                    let tokens = part.get("tokens");
                    let field =
                        |path: &str| tokens.and_then(|t| t.pointer(path)).and_then(Value::as_u64);
                    let output = match (field("/output"), field("/reasoning")) {
                        (Some(o), r) => Some(o + r.unwrap_or(0)),
                        (None, r) => r,
                    };
                    let step = Usage {
                        input_tokens: field("/input"),
                        output_tokens: output,
                        cache_read_tokens: field("/cache/read"),
                        cache_write_tokens: field("/cache/write"),
                        cost_usd: part.get("cost").and_then(Value::as_f64),
                    };
                    if !step.is_unknown() {
                        usage.get_or_insert_with(Usage::default).add(&step);
                    }
                }
            }
            Some("error") => {
                has_events = true;
                let error = event.get("error").unwrap_or(&Value::Null);
                let status = error
                    .pointer("/data/statusCode")
                    .and_then(Value::as_u64)
                    .and_then(|s| u16::try_from(s).ok());
                let message = error
                    .pointer("/data/message")
                    .and_then(Value::as_str)
                    .or_else(|| str_field(error, "message"))
                    .or_else(|| str_field(error, "name"))
                    .map_or_else(|| error.to_string(), str::to_owned);
                let mut e = ApiError::new(status, &message);
                if e.kind == crate::signals::ApiErrorKind::Other {
                    // No status (a `ContextOverflowError`, say): the API's own body tells.
                    let body = error
                        .pointer("/data/responseBody")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    e.kind = ApiError::new(status, body).kind;
                }
                api_error = Some(e);
            }
            Some("step_start") => has_events = true,
            _ => {}
        }
    }
    TranscriptSummary {
        final_message,
        skills_offered: None,
        skills_loaded: (has_events && skill_tool.is_some()).then_some(loaded),
        model: None,
        usage,
        api_error,
        denials,
    }
}
