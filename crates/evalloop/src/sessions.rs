//! Session corpora in each runtime's real on-disk shape (seed: skill-eval-loop, "recheck.py";
//! E-33): Claude Code project JSONL, OpenCode session exports, Codex rollout JSONL, read into one
//! [`Session`] shape: user/assistant turns and the skills the session loaded.
//!
//! * Claude Code (`~/.claude/projects/<proj>/<session>.jsonl`): `user` / `assistant` lines with
//!   `message.content` (a string or blocks), `timestamp`, `sessionId`; a load is a `tool_use`
//!   block named `Skill` with the name in `input.skill`. User lines that carry only
//!   `tool_result` blocks are tool output, not turns.
//! * OpenCode (`opencode export` JSON): `{info: {id, time: {created: ms}}, messages: [{info:
//!   {role}, parts: [{type: "text", text} | {type: "tool", tool: "skill", state: {input: {name}}}]}]}`.
//! * Codex (`~/.codex/sessions/**/rollout-*.jsonl`): `session_meta` then `response_item`
//!   messages (`input_text` / `output_text`); Codex records no skill calls, so loads are unknown
//!   (`None`), which reads low, never high.

use chrono::{DateTime, TimeZone, Utc};
use serde_json::Value;
use skillforge_contract::limits::LimitError;

/// Which runtime wrote a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Claude Code.
    Claude,
    /// OpenCode.
    Opencode,
    /// Codex.
    Codex,
}

impl Source {
    /// Parses `claude`, `opencode` or `codex`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "claude" => Some(Source::Claude),
            "opencode" => Some(Source::Opencode),
            "codex" => Some(Source::Codex),
            _ => None,
        }
    }
}

/// Who spoke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The human.
    User,
    /// The agent.
    Assistant,
}

/// One turn's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// Who.
    pub role: Role,
    /// What (text blocks joined).
    pub text: String,
}

/// One session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// Session id.
    pub id: String,
    /// Who wrote it.
    pub source: Source,
    /// First timestamp seen.
    pub started_at: DateTime<Utc>,
    /// Turns in order.
    pub turns: Vec<Turn>,
    /// Skill loads in order (a name per load); `None` when the runtime records none.
    pub loads: Option<Vec<String>>,
}

impl Session {
    /// Number of user turns.
    pub fn n_user_turns(&self) -> usize {
        self.turns.iter().filter(|t| t.role == Role::User).count()
    }

    /// Loads of `skill` (0 when unknown).
    pub fn loads_of(&self, skill: &str) -> u32 {
        self.loads
            .as_ref()
            .map_or(0, |l| l.iter().filter(|n| *n == skill).count() as u32)
    }
}

/// A session file over the parser limits (`contract::limits`); the CLI prefixes the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionLimitError {
    /// A whole document (OpenCode's export) is over a limit.
    #[error(transparent)]
    Document(#[from] LimitError),
    /// A JSONL line (Claude Code, Codex) is over a limit.
    #[error("line {line} {source}")]
    Line {
        /// 1-based line.
        line: usize,
        /// The limit crossed.
        #[source]
        source: LimitError,
    },
}

/// The parser limits (`contract::limits`) on a session file's text: per line for the JSONL
/// sources (Claude Code, Codex), on the whole document for OpenCode's export.
///
/// # Errors
/// [`SessionLimitError`]: the limit crossed, with the line for JSONL.
pub fn check_limits(source: Source, text: &str) -> Result<(), SessionLimitError> {
    use skillforge_contract::limits::check_json;
    match source {
        Source::Opencode => Ok(check_json(text)?),
        Source::Claude | Source::Codex => match text
            .lines()
            .enumerate()
            .find_map(|(n, l)| check_json(l).err().map(|e| (n + 1, e)))
        {
            Some((line, source)) => Err(SessionLimitError::Line { line, source }),
            None => Ok(()),
        },
    }
}

/// Parses one session file's text of `source`; `None` when it holds no timestamped turn.
pub fn parse_session(source: Source, text: &str) -> Option<Session> {
    match source {
        Source::Claude => parse_claude(text),
        Source::Opencode => parse_opencode(text),
        Source::Codex => parse_codex(text),
    }
}

fn lines(text: &str) -> impl Iterator<Item = Value> + '_ {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(Value::is_object)
}

fn time(v: Option<&Value>) -> Option<DateTime<Utc>> {
    match v? {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n
            .as_i64()
            .and_then(|ms| Utc.timestamp_millis_opt(ms).single()),
        _ => None,
    }
}

fn push(turns: &mut Vec<Turn>, role: Role, text: String) {
    let text = text.trim().to_owned();
    if !text.is_empty() {
        turns.push(Turn { role, text });
    }
}

fn parse_claude(text: &str) -> Option<Session> {
    let (mut id, mut started, mut turns, mut loads) = (None, None, Vec::new(), Vec::new());
    for v in lines(text) {
        let kind = v.get("type").and_then(Value::as_str);
        if id.is_none() {
            id = v
                .get("sessionId")
                .or_else(|| v.get("session_id"))
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
        if started.is_none() {
            started = time(v.get("timestamp"));
        }
        let role = match kind {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            _ => continue,
        };
        let content = v.pointer("/message/content");
        let mut texts = Vec::new();
        match content {
            Some(Value::String(s)) => texts.push(s.clone()),
            Some(Value::Array(blocks)) => {
                for b in blocks {
                    match b.get("type").and_then(Value::as_str) {
                        Some("text") => {
                            texts.extend(b.get("text").and_then(Value::as_str).map(str::to_owned))
                        }
                        Some("tool_use")
                            if b.get("name").and_then(Value::as_str) == Some("Skill") =>
                        {
                            loads.extend(
                                b.pointer("/input/skill")
                                    .and_then(Value::as_str)
                                    .map(str::to_owned),
                            );
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        push(&mut turns, role, texts.join("\n"));
    }
    Some(Session {
        id: id.unwrap_or_default(),
        source: Source::Claude,
        started_at: started?,
        turns,
        loads: Some(loads),
    })
}

fn parse_opencode(text: &str) -> Option<Session> {
    let v: Value = serde_json::from_str(text).ok()?;
    let info = v.get("info")?;
    let started = time(info.pointer("/time/created"))?;
    let (mut turns, mut loads) = (Vec::new(), Vec::new());
    for m in v
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let role = match m.pointer("/info/role").and_then(Value::as_str) {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            _ => continue,
        };
        let mut texts = Vec::new();
        for p in m
            .get("parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            match p.get("type").and_then(Value::as_str) {
                Some("text") => {
                    texts.extend(p.get("text").and_then(Value::as_str).map(str::to_owned))
                }
                Some("tool") if p.get("tool").and_then(Value::as_str) == Some("skill") => {
                    loads.extend(
                        p.pointer("/state/input/name")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                    );
                }
                _ => {}
            }
        }
        push(&mut turns, role, texts.join("\n"));
    }
    let id = info
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    Some(Session {
        id,
        source: Source::Opencode,
        started_at: started,
        turns,
        loads: Some(loads),
    })
}

fn parse_codex(text: &str) -> Option<Session> {
    let (mut id, mut started, mut turns) = (None, None, Vec::new());
    for v in lines(text) {
        if started.is_none() {
            started = time(v.get("timestamp"));
        }
        let payload = v.get("payload");
        match v.get("type").and_then(Value::as_str) {
            Some("session_meta") => {
                id = payload
                    .and_then(|p| p.get("id"))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            }
            Some("response_item") => {
                let Some(p) =
                    payload.filter(|p| p.get("type").and_then(Value::as_str) == Some("message"))
                else {
                    continue;
                };
                let role = match p.get("role").and_then(Value::as_str) {
                    Some("user") => Role::User,
                    Some("assistant") => Role::Assistant,
                    _ => continue,
                };
                let text: Vec<&str> = p
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c.get("text").and_then(Value::as_str))
                    .collect();
                let text = text.join("\n");
                if role == Role::User
                    && (text.starts_with("<environment_context>")
                        || text.starts_with("<user_instructions>"))
                {
                    continue;
                }
                push(&mut turns, role, text);
            }
            _ => {}
        }
    }
    Some(Session {
        id: id.unwrap_or_default(),
        source: Source::Codex,
        started_at: started?,
        turns,
        loads: None,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) const CLAUDE: &str = include_str!("fixtures/claude_session.jsonl");
    pub(crate) const OPENCODE: &str = include_str!("fixtures/opencode_session.json");
    pub(crate) const CODEX: &str = include_str!("fixtures/codex_rollout.jsonl");

    // E-33
    #[test]
    fn e33_loads_read_per_runtime_spelling_codex_unknown() {
        let claude = parse_session(Source::Claude, CLAUDE).unwrap();
        assert_eq!(claude.loads, Some(vec!["tldr-replies".to_string()]));
        assert_eq!(
            claude.n_user_turns(),
            2,
            "tool_result lines are not user turns"
        );
        let opencode = parse_session(Source::Opencode, OPENCODE).unwrap();
        assert_eq!(opencode.loads, Some(vec!["tldr-replies".to_string()]));
        assert_eq!(opencode.n_user_turns(), 2);
        let codex = parse_session(Source::Codex, CODEX).unwrap();
        assert_eq!(codex.loads, None);
        assert_eq!(codex.loads_of("tldr-replies"), 0);
        assert_eq!(
            codex.n_user_turns(),
            2,
            "injected environment context is not a turn"
        );
        assert_eq!(codex.id, "0199a1b2-codex");
    }

    // Issue 12 item 7: session files over the parser limits are refused with the line.
    #[test]
    fn deeply_nested_session_lines_are_refused_with_the_line() {
        let deep = "[".repeat(100_000);
        assert!(check_limits(Source::Claude, CLAUDE).is_ok());
        let e = check_limits(Source::Claude, &format!("{{}}\n{deep}"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("line 2 ") && e.contains("64 levels"), "{e}");
        assert!(
            check_limits(Source::Opencode, &deep)
                .unwrap_err()
                .to_string()
                .contains("64 levels")
        );
    }
}
