//! Tool errors an arm made, read off its transcript (resolution 20): Claude Code `tool_result`
//! blocks with `is_error: true`, OpenCode tool parts whose state is `error`, the scripted agent's
//! `tool_error` lines; `None` for a runtime that records none (Codex), never 0.

use serde_json::Value;

/// Tool errors in `transcript` of `runtime`; `None` when the runtime records none, the
/// transcript holds no event of it, or it is over the parser limits (`contract::limits`).
pub fn count_tool_errors(runtime: &str, transcript: &str) -> Option<u32> {
    // A transcript line over the parser limits cannot be counted: unknown, never a guess.
    if let Some((n, e)) = transcript.lines().enumerate().find_map(|(n, l)| {
        skillforge_contract::limits::check_json(l)
            .err()
            .map(|e| (n + 1, e))
    }) {
        tracing::warn!(runtime, "tool errors not counted: transcript line {n} {e}");
        return None;
    }
    let events: Vec<Value> = transcript
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .collect();
    if events.is_empty() {
        return None;
    }
    let n = match runtime {
        "claude" => events
            .iter()
            .filter(|e| e.get("type").and_then(Value::as_str) == Some("user"))
            .flat_map(|e| {
                e.pointer("/message/content")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
            })
            .filter(|b| {
                b.get("type").and_then(Value::as_str) == Some("tool_result")
                    && b.get("is_error").and_then(Value::as_bool) == Some(true)
            })
            .count(),
        "opencode" => events
            .iter()
            .filter(|e| e.get("type").and_then(Value::as_str) == Some("tool_use"))
            .filter(|e| e.pointer("/part/state/status").and_then(Value::as_str) == Some("error"))
            .count(),
        "scripted" => events
            .iter()
            .filter(|e| e.get("type").and_then(Value::as_str) == Some("tool_error"))
            .count(),
        _ => return None,
    };
    Some(n as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_errors_per_runtime_unknown_for_codex() {
        let claude = r#"{"type":"user","message":{"content":[{"type":"tool_result","is_error":true},{"type":"tool_result"}]}}"#;
        assert_eq!(count_tool_errors("claude", claude), Some(1));
        let oc = r#"{"type":"tool_use","part":{"tool":"bash","state":{"status":"error"}}}"#;
        assert_eq!(count_tool_errors("opencode", oc), Some(1));
        assert_eq!(
            count_tool_errors(
                "scripted",
                "{\"type\":\"tool_error\"}\n{\"type\":\"final\"}"
            ),
            Some(1)
        );
        assert_eq!(
            count_tool_errors("codex", r#"{"type":"item.completed"}"#),
            None
        );
        assert_eq!(count_tool_errors("claude", ""), None);
    }

    // Issue 12 item 7: a transcript line over the parser limits makes the count unknown, not 0.
    #[test]
    fn deeply_nested_transcript_line_is_an_unknown_count() {
        let line =
            r#"{"type":"user","message":{"content":[{"type":"tool_result","is_error":true}]}}"#;
        assert_eq!(count_tool_errors("claude", line), Some(1));
        assert_eq!(
            count_tool_errors("claude", &format!("{line}\n{}", "[".repeat(100_000))),
            None
        );
    }
}
