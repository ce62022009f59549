//! The foreground ask: the prompt a template version answers with, and what the template declares
//! about its runtimes (seed: SkillOpt, "Live-traffic A/B interception"; issue 15 item 1).

use serde_json::Value;

/// The prompt of one ask: the user's request first (the scripted runtime quotes the first input
/// line), then the template version's full content as the instructions to follow.
pub fn ask_prompt(template_content: &str, user_prompt: &str) -> String {
    format!(
        "{}\n\nFollow this agent template:\n\n{template_content}\n",
        user_prompt.trim()
    )
}

/// The `runtime_compatibility` list of a version's stored metadata JSON (empty when absent or
/// unreadable).
pub fn declared_runtimes(metadata_json: &str) -> Vec<String> {
    serde_json::from_str::<Value>(metadata_json)
        .ok()
        .and_then(|v| v.get("runtime_compatibility").cloned())
        .and_then(|v| serde_json::from_value::<Vec<String>>(v).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_starts_with_the_request_and_carries_the_template() {
        let prompt = ask_prompt("---\nid: t\n---\nBe brief.\n", "  What changed?  ");
        assert!(prompt.starts_with("What changed?\n"), "{prompt}");
        assert!(prompt.contains("Be brief."));
        assert_eq!(
            declared_runtimes(r#"{"runtime_compatibility":["codex","claude"]}"#),
            ["codex", "claude"]
        );
        assert!(declared_runtimes("").is_empty());
    }
}
