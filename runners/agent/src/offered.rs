//! The skills a model request offers the model (issue 31 item 9; seed: skill-eval-loop, "Read
//! what the agent was offered"), read from the request body the agent CLI sent, in the three
//! shapes the shipped runtimes send (checked against Claude Code 2.1.197, Codex CLI 0.171.0 and
//! OpenCode 1.18.33; the bodies are in `tests/fixtures/requests/`):
//!
//! * Anthropic Messages (Claude Code): a system-reminder or system text "The following skills are
//!   available for use with the Skill tool:" followed by `- name: description` lines;
//! * OpenAI Responses (Codex): a developer message `<skills_instructions>` whose
//!   "### Available skills" section lists `- name: description (file: …)`;
//! * OpenAI Chat Completions (OpenCode): the system prompt's `<available_skills>` block of
//!   `<skill><name>…</name>…</skill>`.

use serde_json::Value;

/// The model API a request was sent to, from its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelApi {
    /// Anthropic Messages: a path ending `/messages`.
    Messages,
    /// OpenAI Responses: a path ending `/responses`.
    Responses,
    /// OpenAI Chat Completions: a path ending `/chat/completions`.
    Chat,
}

impl ModelApi {
    /// The API of a request to `path` (query ignored); `None` for every other request (model
    /// lists, token counts, health probes).
    pub fn of_path(path: &str) -> Option<ModelApi> {
        let path = path
            .split('?')
            .next()
            .unwrap_or_default()
            .trim_end_matches('/');
        if path.ends_with("/chat/completions") {
            Some(ModelApi::Chat)
        } else if path.ends_with("/responses") {
            Some(ModelApi::Responses)
        } else if path.ends_with("/messages") {
            Some(ModelApi::Messages)
        } else {
            None
        }
    }
}

/// What one model request offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Offered {
    /// The request lists these skills, in the order listed (an empty list: it offers no skill
    /// tool and lists none).
    Listed(Vec<String>),
    /// The request offers a skill tool (or a skill section) whose list could not be read: the
    /// inventory is unknown, never empty.
    Unreadable,
}

/// The Claude Code heading of its skill list.
const MESSAGES_HEADING: &str = "The following skills are available for use with the Skill tool:";
/// The Codex section of its skill list.
const RESPONSES_SECTION: &str = "### Available skills";

/// The skills the request body `body` sent to `api` offers the model; `None` for a side request
/// (no tools and no skill list: a title, a quota probe), which says nothing of what the agent
/// was offered.
pub fn offered_in_request(api: ModelApi, body: &Value) -> Option<Offered> {
    let tools: Vec<&str> = body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| {
            t.get("name")
                .or_else(|| t.pointer("/function/name"))
                .and_then(Value::as_str)
        })
        .collect();
    let side = tools.is_empty();
    let offered = match api {
        ModelApi::Messages => {
            let mut texts = Vec::new();
            collect_texts(body.get("system").unwrap_or(&Value::Null), &mut texts);
            for message in body
                .get("messages")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                collect_texts(message.get("content").unwrap_or(&Value::Null), &mut texts);
            }
            match texts
                .iter()
                .find_map(|t| dash_list_after(t, MESSAGES_HEADING))
            {
                Some(names) => Offered::Listed(names),
                None if tools.contains(&"Skill") => Offered::Unreadable,
                None if side => return None,
                None => Offered::Listed(Vec::new()),
            }
        }
        ModelApi::Responses => {
            let mut texts = Vec::new();
            if let Some(instructions) = body.get("instructions").and_then(Value::as_str) {
                texts.push(instructions.to_owned());
            }
            for item in body
                .get("input")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                collect_texts(item.get("content").unwrap_or(&Value::Null), &mut texts);
            }
            match texts
                .iter()
                .find_map(|t| dash_list_after(t, RESPONSES_SECTION))
            {
                Some(names) => Offered::Listed(names),
                None if texts.iter().any(|t| t.contains("<skills_instructions>")) => {
                    Offered::Unreadable
                }
                None if side => return None,
                None => Offered::Listed(Vec::new()),
            }
        }
        ModelApi::Chat => {
            let mut texts = Vec::new();
            for message in body
                .get("messages")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|m| m.get("role").and_then(Value::as_str) == Some("system"))
            {
                collect_texts(message.get("content").unwrap_or(&Value::Null), &mut texts);
            }
            match texts.iter().find_map(|t| xml_skill_names(t)) {
                Some(names) => Offered::Listed(names),
                None if tools.contains(&"skill") => Offered::Unreadable,
                None if side => return None,
                None => Offered::Listed(Vec::new()),
            }
        }
    };
    Some(offered)
}

/// Every text of a content value: a string, or the `text` of each block.
fn collect_texts(content: &Value, out: &mut Vec<String>) {
    match content {
        Value::String(text) => out.push(text.clone()),
        Value::Array(blocks) => {
            for block in blocks {
                match block.get("text").and_then(Value::as_str) {
                    Some(text) => out.push(text.to_owned()),
                    None => collect_texts(block.get("content").unwrap_or(&Value::Null), out),
                }
            }
        }
        _ => {}
    }
}

/// The names of the `- name: description` lines after `heading` in `text`: the list ends at the
/// first `#` heading line; lines that do not start with `- ` (a description's further lines)
/// are skipped. `None` when `text` has no such heading.
fn dash_list_after(text: &str, heading: &str) -> Option<Vec<String>> {
    let start = text.find(heading)? + heading.len();
    let mut names = Vec::new();
    for line in text[start..].lines() {
        if line.starts_with('#') || line.starts_with("</") {
            break;
        }
        let Some(entry) = line.strip_prefix("- ") else {
            continue;
        };
        let Some((name, _)) = entry.split_once(':') else {
            continue;
        };
        if is_skill_name(name) && !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    }
    Some(names)
}

/// Whether `name` can be a skill name (a plugin's `plugin:skill` and a scoped `dir:skill` come
/// through as their prefix, which is no loss: the list is compared by name).
fn is_skill_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

/// The `<name>` of each `<skill>` in the `<available_skills>` block of `text`; `None` when
/// `text` has no such block.
fn xml_skill_names(text: &str) -> Option<Vec<String>> {
    let start = text.find("<available_skills>")?;
    let block = &text[start..];
    let block = &block[..block.find("</available_skills>").unwrap_or(block.len())];
    let mut names = Vec::new();
    for part in block.split("<skill>").skip(1) {
        let Some(rest) = part.split_once("<name>").map(|(_, r)| r) else {
            continue;
        };
        let Some((name, _)) = rest.split_once("</name>") else {
            continue;
        };
        let name = unescape_xml(name.trim());
        if !name.is_empty() && !names.contains(&name) {
            names.push(name);
        }
    }
    Some(names)
}

fn unescape_xml(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// The skills offered over a run's model requests: every listed name in first-listed order;
/// `None` (unknown) when no request was a model request or any was [`Offered::Unreadable`].
pub fn offered_over_run(requests: &[Offered]) -> Option<Vec<String>> {
    if requests.is_empty() {
        return None;
    }
    let mut names: Vec<String> = Vec::new();
    for request in requests {
        match request {
            Offered::Unreadable => return None,
            Offered::Listed(listed) => {
                for name in listed {
                    if !names.contains(name) {
                        names.push(name.clone());
                    }
                }
            }
        }
    }
    Some(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Value {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/requests")
            .join(name);
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    }

    // Bodies captured from Claude Code 2.1.197 against a loopback model API, with a project
    // skill `tldr`: the request lists the bundled skills too, some of which its init line
    // leaves out (`keybindings-help`, `init`, `review`, `security-review`).
    #[test]
    fn claude_code_messages_list_the_project_skill_and_the_bundled_ones() {
        let body = fixture("claude_messages.json");
        let Some(Offered::Listed(names)) = offered_in_request(ModelApi::Messages, &body) else {
            panic!("unreadable")
        };
        assert_eq!(names.first().map(String::as_str), Some("tldr"));
        for bundled in ["keybindings-help", "claude-api", "init", "security-review"] {
            assert!(names.iter().any(|n| n == bundled), "{bundled}: {names:?}");
        }
        // a description's further lines ("TRIGGER — …", "SKIP only …") are no skills
        assert!(
            !names
                .iter()
                .any(|n| n.starts_with("TRIGGER") || n.starts_with("SKIP")),
            "{names:?}"
        );
        assert_eq!(names.len(), 14, "{names:?}");
        // what the same run's init line listed and the request did not
        for init_only in ["debug", "batch", "run-skill-generator"] {
            assert!(!names.iter().any(|n| n == init_only), "{init_only}");
        }
    }

    #[test]
    fn codex_responses_list_the_system_and_project_skills() {
        let body = fixture("codex_responses.json");
        assert_eq!(
            offered_in_request(ModelApi::Responses, &body),
            Some(Offered::Listed(
                [
                    "imagegen",
                    "openai-docs",
                    "skill-creator",
                    "skill-installer",
                    "tldr"
                ]
                .map(String::from)
                .to_vec()
            ))
        );
    }

    #[test]
    fn opencode_chat_lists_the_builtin_and_project_skills() {
        let body = fixture("opencode_chat.json");
        assert_eq!(
            offered_in_request(ModelApi::Chat, &body),
            Some(Offered::Listed(vec![
                "customize-opencode".into(),
                "tldr".into()
            ]))
        );
    }

    #[test]
    fn a_skill_tool_without_a_readable_list_is_unknown_never_empty() {
        let mut body = fixture("claude_messages.json");
        body["messages"] = serde_json::json!([{"role": "user", "content": "hi"}]);
        assert_eq!(
            offered_in_request(ModelApi::Messages, &body),
            Some(Offered::Unreadable)
        );
        body["tools"] = serde_json::json!([{"name": "Read"}]);
        assert_eq!(
            offered_in_request(ModelApi::Messages, &body),
            Some(Offered::Listed(Vec::new())),
            "no skill tool, no list: nothing offered"
        );
        body["tools"] = serde_json::json!([]);
        assert_eq!(
            offered_in_request(ModelApi::Messages, &body),
            None,
            "no tools, no list: a side request"
        );
        let mut body = fixture("opencode_chat.json");
        body["messages"] = serde_json::json!([{"role": "system", "content": "be brief"}]);
        assert_eq!(
            offered_in_request(ModelApi::Chat, &body),
            Some(Offered::Unreadable)
        );
        let body = serde_json::json!({"input": [{"type": "message", "role": "developer",
            "content": [{"type": "input_text", "text": "<skills_instructions>\n## Skills\nnew shape\n</skills_instructions>"}]}]});
        assert_eq!(
            offered_in_request(ModelApi::Responses, &body),
            Some(Offered::Unreadable)
        );
        assert_eq!(
            offered_over_run(&[Offered::Listed(vec!["a".into()]), Offered::Unreadable]),
            None
        );
        assert_eq!(offered_over_run(&[]), None);
        assert_eq!(
            offered_over_run(&[
                Offered::Listed(vec!["a".into(), "b".into()]),
                Offered::Listed(vec!["b".into(), "c".into()])
            ]),
            Some(vec!["a".into(), "b".into(), "c".into()])
        );
    }

    #[test]
    fn paths_name_their_api() {
        assert_eq!(
            ModelApi::of_path("/p0/v1/messages?beta=true"),
            Some(ModelApi::Messages)
        );
        assert_eq!(ModelApi::of_path("/v1/messages/count_tokens"), None);
        assert_eq!(
            ModelApi::of_path("/v1/responses"),
            Some(ModelApi::Responses)
        );
        assert_eq!(
            ModelApi::of_path("/v1/chat/completions"),
            Some(ModelApi::Chat)
        );
        assert_eq!(ModelApi::of_path("/v1/models"), None);
    }
}
