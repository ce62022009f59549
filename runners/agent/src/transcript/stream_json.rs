//! Claude Code `--output-format stream-json --verbose` transcripts.
//!
//! * Offered skills: the `skills` array of the `{"type":"system","subtype":"init"}` line
//!   (strings, or objects with a `name`); unknown when the line lacks it or is missing.
//! * Loaded skills: `tool_use` blocks of `assistant` messages whose `name` is the profile's
//!   skill tool (`Skill`), naming the skill in the `skill_tool_arg` input (`skill`); recorded
//!   whenever the transcript holds any Claude event.
//! * Final message: the last `result` line's `result`; else the text blocks of the last
//!   `assistant` message that has text.

use serde_json::Value;

use super::{TranscriptSummary, json_objects, push_unique, str_field};

pub(super) fn parse(text: &str, skill_tool: Option<(&str, &str)>) -> TranscriptSummary {
    let mut has_events = false;
    let mut offered: Option<Vec<String>> = None;
    let mut loaded = Vec::new();
    let mut result: Option<String> = None;
    let mut last_assistant_text: Option<String> = None;
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
                                push_unique(&mut loaded, name);
                            }
                        }
                        _ => {}
                    }
                }
                if !texts.is_empty() {
                    last_assistant_text = Some(texts.join("\n"));
                }
            }
            Some("user") => has_events = true,
            Some("result") => {
                has_events = true;
                if let Some(text) = str_field(&event, "result") {
                    result = Some(text.to_string());
                }
            }
            _ => {}
        }
    }
    TranscriptSummary {
        final_message: result.or(last_assistant_text),
        skills_offered: offered,
        skills_loaded: (has_events && skill_tool.is_some()).then_some(loaded),
        model: None,
    }
}
