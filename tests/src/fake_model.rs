//! A model API on loopback for the real agent CLIs (issue 31): the one stand-in the brief allows
//! for what cannot run here. It speaks what the three CLIs speak, with payloads shaped like the
//! real APIs' (checked against the CLIs themselves, see `runs_each_real_cli` in
//! `tests/tests/real_agents.rs`):
//!
//! * Anthropic Messages for Claude Code (`ANTHROPIC_BASE_URL`): `POST /v1/messages` (SSE when
//!   `stream: true`, JSON otherwise), `POST /v1/messages/count_tokens`, `GET /v1/models`,
//!   `HEAD /`;
//! * OpenAI Responses for Codex (a `model_provider` with this `base_url` + `/v1`, `wire_api =
//!   "responses"`): `POST /v1/responses` (SSE);
//! * OpenAI Chat Completions for OpenCode (`@ai-sdk/openai-compatible`): `POST
//!   /v1/chat/completions` (SSE), `GET /v1/models`.
//!
//! Replies are scripted per test by a responder: a function from the request (as [`Seen`]: the
//! system prompt, every message's text, the tools offered) to a [`Reply`]: text, a tool call
//! expressed once for every CLI ([`Reply::Write`], [`Reply::Shell`], [`Reply::Skill`]), an HTTP
//! error, or a stall. Every request is logged, so a test asserts on what the model was sent.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// Which API a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// Anthropic Messages (Claude Code).
    Messages,
    /// OpenAI Responses (Codex).
    Responses,
    /// OpenAI Chat Completions (OpenCode).
    Chat,
}

/// One model request as the fake saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The API.
    pub api: Api,
    /// The model named.
    pub model: String,
    /// The system prompt / instructions, joined.
    pub system: String,
    /// Every message's text (user, assistant, tool results), in order, joined by newlines.
    pub messages: String,
    /// The text of the first user message (the prompt as the CLI passed it on).
    pub first_user: String,
    /// Names of the tools offered.
    pub tools: Vec<String>,
    /// The tool definitions as sent (name → the whole definition), to read a tool's description.
    pub tool_defs: Vec<Value>,
    /// Tool results in the conversation so far.
    pub n_tool_results: usize,
    /// The request body as sent.
    pub body: Value,
}

impl Seen {
    /// Everything the model was shown as one string: system, tool definitions, messages.
    pub fn everything(&self) -> String {
        format!(
            "{}\n{}\n{}",
            self.system,
            serde_json::to_string(&self.tool_defs).unwrap_or_default(),
            self.messages
        )
    }

    /// Whether `text` appears anywhere the model was shown.
    pub fn shows(&self, text: &str) -> bool {
        self.everything().contains(text)
    }

    /// Whether this is a main agent turn (tools offered) rather than a side request such as a
    /// title or a quota probe.
    pub fn is_agent_turn(&self) -> bool {
        !self.tools.is_empty()
    }
}

/// Tokens the fake reports for one reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tokens {
    /// Input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
}

/// What the fake answers.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A final text answer.
    Text(String),
    /// Write a file (relative to the agent's work dir) with this content: Claude Code's `Write`,
    /// OpenCode's `write`, Codex's shell with a here-document.
    Write {
        /// Path relative to the work dir.
        path: String,
        /// Content.
        content: String,
    },
    /// Run a shell command: Claude Code's `Bash`, OpenCode's `bash`, Codex's shell tool.
    Shell(String),
    /// Load a skill: Claude Code's `Skill`, OpenCode's `skill`; Codex reads its `SKILL.md`.
    Skill(String),
    /// An HTTP error with an API-shaped body.
    Error(u16, String),
    /// Hold the request open this long, then answer the text.
    Stall(Duration, String),
}

type Responder = dyn Fn(&Seen) -> Reply + Send + Sync;

struct Inner {
    log: Mutex<Vec<Seen>>,
    responder: Mutex<Arc<Responder>>,
    tokens: Mutex<Tokens>,
    other: Mutex<Vec<String>>,
}

/// A running fake model API, served from a thread of its own (so a test may start it inside an
/// async runtime or outside one); stops when dropped.
pub struct FakeModel {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    inner: Arc<Inner>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl FakeModel {
    /// Starts the fake on a free loopback port; until [`FakeModel::respond`] is called every agent
    /// turn is answered `done`.
    pub fn start() -> FakeModel {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        listener.set_nonblocking(true).expect("nonblocking");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let inner = Arc::new(Inner {
            log: Mutex::new(Vec::new()),
            responder: Mutex::new(Arc::new(|_: &Seen| Reply::Text("done".into()))),
            tokens: Mutex::new(Tokens {
                input: 1200,
                output: 80,
            }),
            other: Mutex::new(Vec::new()),
        });
        let app = Router::new().fallback(handle).with_state(inner.clone());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async move {
                        let _ = stopped.await;
                    })
                    .await;
            });
        });
        FakeModel {
            url,
            inner,
            stop: Some(stop),
        }
    }

    /// Answers every request with `responder`.
    pub fn respond(&self, responder: impl Fn(&Seen) -> Reply + Send + Sync + 'static) {
        *self.inner.responder.lock().unwrap() = Arc::new(responder);
    }

    /// The tokens reported for every reply from now on.
    pub fn report_tokens(&self, tokens: Tokens) {
        *self.inner.tokens.lock().unwrap() = tokens;
    }

    /// Every model request so far.
    pub fn requests(&self) -> Vec<Seen> {
        self.inner.log.lock().unwrap().clone()
    }

    /// Requests to paths the fake does not serve as a model call (`METHOD /path`).
    pub fn other_requests(&self) -> Vec<String> {
        self.inner.other.lock().unwrap().clone()
    }

    /// Forgets the requests seen so far.
    pub fn clear(&self) {
        self.inner.log.lock().unwrap().clear();
    }

    /// `$CODEX_HOME/config.toml` text pointing Codex at this fake (provider `fake`, key from
    /// `OPENAI_API_KEY`), with no retries and nothing reached outside loopback.
    pub fn codex_config(&self) -> String {
        format!(
            "model = \"gpt-5.5\"\nmodel_provider = \"fake\"\n\n[model_providers.fake]\nname = \"fake\"\nbase_url = \"{}/v1\"\nenv_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\n",
            self.url
        )
    }

    /// An OpenCode config (JSON) whose only provider is this fake (`fake/test`).
    pub fn opencode_config(&self) -> Value {
        json!({
            "$schema": "https://opencode.ai/config.json",
            "model": "fake/test",
            "small_model": "fake/test",
            "share": "disabled",
            "autoupdate": false,
            "provider": {"fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "fake",
                "options": {"baseURL": format!("{}/v1", self.url), "apiKey": "sk-fake"},
                "models": {"test": {"name": "test", "cost": {"input": 3, "output": 15}, "limit": {"context": 200000, "output": 8192}}}
            }}
        })
    }
}

async fn handle(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    _headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let api = match (method.as_str(), path.as_str()) {
        ("POST", "/v1/messages") => Api::Messages,
        ("POST", "/v1/responses") => Api::Responses,
        ("POST", "/v1/chat/completions") => Api::Chat,
        ("POST", "/v1/messages/count_tokens") => {
            return axum::Json(json!({"input_tokens": 1000})).into_response();
        }
        ("GET", "/v1/models") => {
            return axum::Json(json!({"object": "list", "data": [
                {"type": "model", "id": "claude-sonnet-4-5", "display_name": "Claude Sonnet 4.5", "created_at": "2025-09-29T00:00:00Z", "object": "model", "owned_by": "fake"},
                {"type": "model", "id": "test", "display_name": "test", "created_at": "2025-09-29T00:00:00Z", "object": "model", "owned_by": "fake"}
            ], "has_more": false, "first_id": "claude-sonnet-4-5", "last_id": "test"}))
            .into_response();
        }
        ("HEAD" | "GET", "/") => return StatusCode::OK.into_response(),
        _ => {
            inner.other.lock().unwrap().push(format!("{method} {uri}"));
            return (StatusCode::NOT_FOUND, axum::Json(json!({"type": "error", "error": {"type": "not_found_error", "message": format!("no route {path}")}}))).into_response();
        }
    };
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let seen = read_request(api, body);
    let responder = inner.responder.lock().unwrap().clone();
    let reply = responder(&seen);
    let tokens = *inner.tokens.lock().unwrap();
    let stream = seen
        .body
        .get("stream")
        .and_then(Value::as_bool)
        .unwrap_or(api != Api::Messages);
    inner.log.lock().unwrap().push(seen.clone());
    let reply = match reply {
        Reply::Stall(wait, text) => {
            tokio::time::sleep(wait).await;
            Reply::Text(text)
        }
        other => other,
    };
    if let Reply::Error(status, message) = &reply {
        return error_response(api, *status, message);
    }
    let call = tool_call(api, &seen, &reply);
    match api {
        Api::Messages => messages_reply(&seen, &reply, call, tokens, stream),
        Api::Responses => responses_reply(&seen, &reply, call, tokens),
        Api::Chat => chat_reply(&seen, &reply, call, tokens),
    }
}

/// Text of a content value: a string, or the `text` of each block (tool results included).
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match b.get("type").and_then(Value::as_str) {
                Some("tool_result") => content_text(b.get("content").unwrap_or(&Value::Null)),
                Some("tool_use") => b.get("input").map(Value::to_string).unwrap_or_default(),
                _ => b
                    .get("text")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .unwrap_or_default(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn read_request(api: Api, body: Value) -> Seen {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let tool_defs: Vec<Value> = body
        .get("tools")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let tools = tool_defs
        .iter()
        .filter_map(|t| {
            t.get("name")
                .or_else(|| t.pointer("/function/name"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .collect();
    let mut system = String::new();
    let mut texts = Vec::new();
    let mut first_user = None;
    let mut n_tool_results = 0;
    match api {
        Api::Messages => {
            system = content_text(body.get("system").unwrap_or(&Value::Null));
            for m in body
                .get("messages")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let content = m.get("content").unwrap_or(&Value::Null);
                if let Some(blocks) = content.as_array() {
                    n_tool_results += blocks
                        .iter()
                        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
                        .count();
                }
                let text = content_text(content);
                if m.get("role").and_then(Value::as_str) == Some("user") && first_user.is_none() {
                    first_user = Some(text.clone());
                }
                texts.push(text);
            }
        }
        Api::Responses => {
            system = body
                .get("instructions")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            for item in body
                .get("input")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                match item.get("type").and_then(Value::as_str) {
                    Some("function_call_output" | "custom_tool_call_output") => {
                        n_tool_results += 1;
                        texts.push(
                            item.get("output")
                                .map(|o| o.as_str().map_or_else(|| o.to_string(), str::to_owned))
                                .unwrap_or_default(),
                        );
                    }
                    Some("function_call" | "custom_tool_call") => texts.push(item.to_string()),
                    _ => {
                        let text = item
                            .get("content")
                            .and_then(Value::as_array)
                            .map(|parts| {
                                parts
                                    .iter()
                                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                                    .collect::<Vec<_>>()
                                    .join("\n")
                            })
                            .unwrap_or_default();
                        let role = item.get("role").and_then(Value::as_str);
                        if role == Some("developer") || role == Some("system") {
                            system.push('\n');
                            system.push_str(&text);
                        } else {
                            if role == Some("user") {
                                // Codex sends its environment context and AGENTS.md as user
                                // messages first; the prompt is the last user message before
                                // any tool output.
                                if n_tool_results == 0 {
                                    first_user = Some(text.clone());
                                }
                            }
                            texts.push(text);
                        }
                    }
                }
            }
        }
        Api::Chat => {
            for m in body
                .get("messages")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let text = content_text(m.get("content").unwrap_or(&Value::Null));
                match m.get("role").and_then(Value::as_str) {
                    Some("system") => {
                        system.push_str(&text);
                        system.push('\n');
                    }
                    Some("tool") => {
                        n_tool_results += 1;
                        texts.push(text);
                    }
                    role => {
                        if role == Some("user") && first_user.is_none() {
                            first_user = Some(text.clone());
                        }
                        if let Some(calls) = m.get("tool_calls") {
                            texts.push(calls.to_string());
                        }
                        texts.push(text);
                    }
                }
            }
        }
    }
    Seen {
        api,
        model,
        system,
        messages: texts.join("\n"),
        first_user: first_user.unwrap_or_default(),
        tools,
        tool_defs,
        n_tool_results,
        body,
    }
}

/// `(tool name, arguments)` of a tool-call reply, in the shape the API's CLI expects.
fn tool_call(api: Api, seen: &Seen, reply: &Reply) -> Option<(String, Value)> {
    let has = |name: &str| seen.tools.iter().any(|t| t == name);
    let codex_shell = |command: String| {
        // Codex 0.171 offers `shell_command` (a string) or `shell` (an argv).
        if has("shell_command") {
            ("shell_command".to_owned(), json!({"command": command}))
        } else if has("exec_command") {
            ("exec_command".to_owned(), json!({"cmd": command}))
        } else {
            (
                "shell".to_owned(),
                json!({"command": ["bash", "-lc", command]}),
            )
        }
    };
    let heredoc = |path: &str, content: &str| {
        format!(
            "mkdir -p \"$(dirname '{path}')\" && cat > '{path}' <<'SKILLFORGE_EOF'\n{content}\nSKILLFORGE_EOF"
        )
    };
    match (api, reply) {
        (_, Reply::Text(_) | Reply::Error(..) | Reply::Stall(..)) => None,
        (Api::Messages, Reply::Write { path, content }) => Some((
            "Write".into(),
            json!({"file_path": path, "content": content}),
        )),
        (Api::Messages, Reply::Shell(command)) => Some((
            "Bash".into(),
            json!({"command": command, "description": "run a command"}),
        )),
        (Api::Messages, Reply::Skill(name)) => Some(("Skill".into(), json!({"skill": name}))),
        (Api::Chat, Reply::Write { path, content }) => Some((
            "write".into(),
            json!({"filePath": path, "content": content}),
        )),
        (Api::Chat, Reply::Shell(command)) => Some((
            "bash".into(),
            json!({"command": command, "description": "run a command"}),
        )),
        (Api::Chat, Reply::Skill(name)) => Some(("skill".into(), json!({"name": name}))),
        (Api::Responses, Reply::Write { path, content }) => {
            Some(codex_shell(heredoc(path, content)))
        }
        (Api::Responses, Reply::Shell(command)) => Some(codex_shell(command.clone())),
        (Api::Responses, Reply::Skill(name)) => {
            Some(codex_shell(format!("cat .agents/skills/{name}/SKILL.md")))
        }
    }
}

fn error_response(api: Api, status: u16, message: &str) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = match api {
        Api::Messages => {
            let kind = match status {
                400 => "invalid_request_error",
                401 => "authentication_error",
                403 => "permission_error",
                404 => "not_found_error",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                _ => "api_error",
            };
            json!({"type": "error", "error": {"type": kind, "message": message}})
        }
        Api::Responses | Api::Chat => {
            let kind = match status {
                401 => "invalid_api_key",
                429 => "rate_limit_exceeded",
                400 => "invalid_request_error",
                _ => "server_error",
            };
            json!({"error": {"message": message, "type": kind, "param": null, "code": kind}})
        }
    };
    let mut response = (code, axum::Json(body)).into_response();
    if status == 429 || status >= 500 {
        // OpenCode honours `retry-after-ms` (it retries 429 and 5xx five times, ~70 s otherwise).
        response
            .headers_mut()
            .insert("retry-after", "0".parse().expect("header"));
        response
            .headers_mut()
            .insert("retry-after-ms", "50".parse().expect("header"));
    }
    if status == 429 {
        // A rate limit the client should not retry itself (the Anthropic clients, Claude Code's
        // included, honour it): the CLI ends on the error at once, so a test meets its runner's
        // and queue's handling of it (O-20) without waiting out the CLI's own retries.
        response
            .headers_mut()
            .insert("x-should-retry", "false".parse().expect("header"));
    }
    response
}

fn sse(events: Vec<(Option<&str>, Value)>, done: bool) -> Response {
    let mut text = String::new();
    for (event, data) in events {
        if let Some(event) = event {
            text.push_str(&format!("event: {event}\n"));
        }
        text.push_str(&format!("data: {data}\n\n"));
    }
    if done {
        text.push_str("data: [DONE]\n\n");
    }
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Body::from(text))
        .expect("response")
}

fn next_id(prefix: &str) -> String {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    format!(
        "{prefix}_{:024}",
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

fn messages_reply(
    seen: &Seen,
    reply: &Reply,
    call: Option<(String, Value)>,
    tokens: Tokens,
    stream: bool,
) -> Response {
    let id = next_id("msg");
    let model = if seen.model.is_empty() {
        "claude-sonnet-4-5".to_owned()
    } else {
        seen.model.clone()
    };
    let usage = json!({"input_tokens": tokens.input, "output_tokens": tokens.output, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0});
    let (block, stop) = match (&call, reply) {
        (Some((name, input)), _) => (
            json!({"type": "tool_use", "id": next_id("toolu"), "name": name, "input": input}),
            "tool_use",
        ),
        (None, Reply::Text(text)) => (json!({"type": "text", "text": text}), "end_turn"),
        (None, _) => (json!({"type": "text", "text": ""}), "end_turn"),
    };
    if !stream {
        return axum::Json(json!({"id": id, "type": "message", "role": "assistant", "model": model, "content": [block], "stop_reason": stop, "stop_sequence": null, "usage": usage})).into_response();
    }
    let start_block = match block.get("type").and_then(Value::as_str) {
        Some("tool_use") => {
            json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}})
        }
        _ => json!({"type": "text", "text": ""}),
    };
    let delta = match block.get("type").and_then(Value::as_str) {
        Some("tool_use") => {
            json!({"type": "input_json_delta", "partial_json": block["input"].to_string()})
        }
        _ => json!({"type": "text_delta", "text": block["text"]}),
    };
    sse(
        vec![
            (
                Some("message_start"),
                json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant", "model": model, "content": [], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": tokens.input, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}}),
            ),
            (
                Some("content_block_start"),
                json!({"type": "content_block_start", "index": 0, "content_block": start_block}),
            ),
            (
                Some("content_block_delta"),
                json!({"type": "content_block_delta", "index": 0, "delta": delta}),
            ),
            (
                Some("content_block_stop"),
                json!({"type": "content_block_stop", "index": 0}),
            ),
            (
                Some("message_delta"),
                json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": tokens.output}}),
            ),
            (Some("message_stop"), json!({"type": "message_stop"})),
        ],
        false,
    )
}

fn responses_reply(
    seen: &Seen,
    reply: &Reply,
    call: Option<(String, Value)>,
    tokens: Tokens,
) -> Response {
    let response_id = next_id("resp");
    let model = seen.model.clone();
    let item = match (&call, reply) {
        (Some((name, args)), _) => {
            json!({"type": "function_call", "id": next_id("fc"), "call_id": next_id("call"), "name": name, "arguments": args.to_string(), "status": "completed"})
        }
        (None, Reply::Text(text)) => {
            json!({"type": "message", "id": next_id("msg"), "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": text, "annotations": []}]})
        }
        (None, _) => {
            json!({"type": "message", "id": next_id("msg"), "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": "", "annotations": []}]})
        }
    };
    let usage = json!({"input_tokens": tokens.input, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": tokens.output, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": tokens.input + tokens.output});
    let base = json!({"id": response_id, "object": "response", "created_at": 1_767_000_000, "model": model});
    let mut created = base.clone();
    created["status"] = json!("in_progress");
    created["output"] = json!([]);
    let mut completed = base;
    completed["status"] = json!("completed");
    completed["output"] = json!([item.clone()]);
    completed["usage"] = usage;
    let mut events = vec![
        (
            Some("response.created"),
            json!({"type": "response.created", "sequence_number": 0, "response": created}),
        ),
        (
            Some("response.output_item.added"),
            json!({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": item}),
        ),
    ];
    if let (None, Reply::Text(text)) = (&call, reply) {
        events.push((Some("response.output_text.delta"), json!({"type": "response.output_text.delta", "sequence_number": 2, "item_id": item["id"], "output_index": 0, "content_index": 0, "delta": text})));
    }
    events.push((Some("response.output_item.done"), json!({"type": "response.output_item.done", "sequence_number": 3, "output_index": 0, "item": item})));
    events.push((
        Some("response.completed"),
        json!({"type": "response.completed", "sequence_number": 4, "response": completed}),
    ));
    sse(events, false)
}

fn chat_reply(
    seen: &Seen,
    reply: &Reply,
    call: Option<(String, Value)>,
    tokens: Tokens,
) -> Response {
    let id = next_id("chatcmpl");
    let model = seen.model.clone();
    let chunk = |delta: Value, finish: Value| json!({"id": id, "object": "chat.completion.chunk", "created": 1_767_000_000, "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    let mut events = vec![(
        None,
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
    )];
    let finish = match (&call, reply) {
        (Some((name, args)), _) => {
            events.push((None, chunk(json!({"tool_calls": [{"index": 0, "id": next_id("call"), "type": "function", "function": {"name": name, "arguments": args.to_string()}}]}), Value::Null)));
            "tool_calls"
        }
        (None, Reply::Text(text)) => {
            events.push((None, chunk(json!({"content": text}), Value::Null)));
            "stop"
        }
        (None, _) => "stop",
    };
    events.push((None, chunk(json!({}), json!(finish))));
    events.push((None, json!({"id": id, "object": "chat.completion.chunk", "created": 1_767_000_000, "model": model, "choices": [], "usage": {"prompt_tokens": tokens.input, "completion_tokens": tokens.output, "total_tokens": tokens.input + tokens.output}})));
    sse(events, true)
}
