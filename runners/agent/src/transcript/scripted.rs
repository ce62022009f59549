//! The scripted agent's transcripts (see [`crate::scripted`]).
//!
//! Lines: `{"type":"start","task":...,"prompt_sha256":...}`, then one
//! `{"type":"skill_offered","name":...}` per offered skill, one
//! `{"type":"skill_loaded","name":...}` per loaded skill, and `{"type":"final","text":...}`;
//! a run given a model (`--model NAME`) starts with `{"type":"model","model":NAME}`; an
//! optimize worker whose edit plan says so ends on `{"type":"error","status":529,"message":...}`
//! (an API error, [`crate::ApiError`]); a run whose prompt has a `usage` directive has a
//! `{"type":"usage","input_tokens":N,"output_tokens":N,"cost_usd":X}` line (cost optional).
//! The scripted agent always records offers and loads, so both are known (possibly empty)
//! once the `start` line is seen.

use serde_json::Value;

use super::{TranscriptSummary, json_objects, push_unique, str_field};

pub(super) fn parse(text: &str) -> TranscriptSummary {
    let mut has_start = false;
    let mut offered = Vec::new();
    let mut loaded = Vec::new();
    let mut final_message = None;
    let mut model = None;
    let mut api_error = None;
    let mut usage = None;
    for event in json_objects(text) {
        let event = Value::Object(event);
        let name = str_field(&event, "name");
        match str_field(&event, "type") {
            Some("start") => has_start = true,
            Some("skill_offered") => name.into_iter().for_each(|n| push_unique(&mut offered, n)),
            Some("skill_loaded") => name.into_iter().for_each(|n| push_unique(&mut loaded, n)),
            Some("final") => final_message = str_field(&event, "text").map(str::to_string),
            Some("model") => model = str_field(&event, "model").map(str::to_string),
            Some("usage") => {
                let count = |name: &str| event.get(name).and_then(Value::as_u64);
                usage = Some(crate::Usage {
                    input_tokens: count("input_tokens"),
                    output_tokens: count("output_tokens"),
                    cost_usd: event.get("cost_usd").and_then(Value::as_f64),
                    ..crate::Usage::default()
                });
            }
            Some("error") => {
                let status = event
                    .get("status")
                    .and_then(serde_json::Value::as_u64)
                    .and_then(|s| u16::try_from(s).ok());
                api_error = Some(crate::ApiError::new(
                    status,
                    str_field(&event, "message").unwrap_or(""),
                ));
            }
            _ => {}
        }
    }
    TranscriptSummary {
        final_message,
        skills_offered: has_start.then_some(offered),
        skills_loaded: has_start.then_some(loaded),
        model,
        api_error,
        usage,
        ..TranscriptSummary::default()
    }
}
