//! Codex `exec --json` transcripts.
//!
//! * Final message: the last completed `agent_message` item's `text`
//!   (`{"type":"item.completed","item":{"type":"agent_message","text":...}}`), or in the older
//!   event shape the last `{"msg":{"type":"agent_message","message":...}}`.
//! * Skills: Codex records neither the skills offered nor any skill call, so both are unknown
//!   (seed: skill-eval-loop, "Codex transcripts record no skill call at all").

use serde_json::Value;

use super::{TranscriptSummary, json_objects, str_field};

pub(super) fn parse(text: &str) -> TranscriptSummary {
    let mut final_message = None;
    for event in json_objects(text) {
        let event = Value::Object(event);
        let message = match str_field(&event, "type") {
            Some("item.completed") => event
                .get("item")
                .filter(|item| str_field(item, "type") == Some("agent_message"))
                .and_then(|item| str_field(item, "text")),
            _ => event
                .get("msg")
                .filter(|msg| str_field(msg, "type") == Some("agent_message"))
                .and_then(|msg| str_field(msg, "message")),
        };
        if let Some(message) = message {
            final_message = Some(message.to_string());
        }
    }
    TranscriptSummary {
        final_message,
        skills_offered: None,
        skills_loaded: None,
        model: None,
    }
}
