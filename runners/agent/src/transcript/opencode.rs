//! OpenCode `run --format json` transcripts.
//!
//! Lines are `{"type": "step_start" | "text" | "tool_use" | "step_finish" | "error",
//! "timestamp": ms, "sessionID": ..., "part": {...}}`.
//!
//! * Final message: the last `text` event's `part.text`.
//! * Loaded skills: `tool_use` events whose `part.tool` is the profile's skill tool (`skill`),
//!   naming the skill at `part.state.input.<skill_tool_arg>` (`name`); recorded whenever the
//!   transcript holds any OpenCode event.
//! * Offered skills: not recorded by OpenCode, so unknown.

use serde_json::Value;

use super::{TranscriptSummary, json_objects, push_unique, str_field};

pub(super) fn parse(text: &str, skill_tool: Option<(&str, &str)>) -> TranscriptSummary {
    let mut has_events = false;
    let mut final_message = None;
    let mut loaded = Vec::new();
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
                if let Some((tool, arg)) = skill_tool
                    && let Some(part) = part
                    && str_field(part, "tool") == Some(tool)
                    && let Some(name) = part
                        .pointer("/state/input")
                        .and_then(|input| str_field(input, arg))
                {
                    push_unique(&mut loaded, name);
                }
            }
            Some("step_start" | "step_finish" | "error") => has_events = true,
            _ => {}
        }
    }
    TranscriptSummary {
        final_message,
        skills_offered: None,
        skills_loaded: (has_events && skill_tool.is_some()).then_some(loaded),
        model: None,
    }
}
