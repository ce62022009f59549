//! Runtime profiles: how to run one agent CLI, deliver its prompt, pass its credentials and read
//! its transcript.
//!
//! Profiles are data, one TOML file per runtime under `runners/agent/runtimes/`, compiled in with
//! `include_str!` and listed in [`RUNTIME_SOURCES`]; [`all`] is the registry. Shape of a file:
//!
//! ```toml
//! name = "claude"                    # must equal the file stem
//! family = "claude"                  # model family, for cross-family judge selection
//! description = "Claude Code (`claude -p`), stream-json transcript"
//! program = "claude"                 # name on PATH, absolute path, or "{skillforge_bin}"
//! args = ["-p", "--output-format", "stream-json", "--verbose"]
//! model_args = ["--model", "{model}"] # appended only when the payload names a model
//! project_scope_args = ["--setting-sources", "project,local"] # with payload `project_scope_only`
//! prompt = "stdin"                   # "stdin" | "file"; never argv
//! credential_env = ["ANTHROPIC_API_KEY"] # inherited from the worker env when set; never argv
//! pass_env = ["XDG_CONFIG_HOME"]     # other inherited names
//! install_hint = "install Claude Code (...)"
//! [models]                           # model tiers (`metric.judge.model: cheap`) → the model
//! cheap = "haiku"                    # passed through `model_args`
//! [transcript]
//! format = "stream_json"             # stream_json | codex_jsonl | opencode_json | scripted_jsonl | plain
//! skill_tool = "Skill"               # tool whose calls load a skill; absent: loads unknown
//! skill_tool_arg = "skill"           # the tool argument naming the skill
//! session_log_dir = ".codex/sessions" # the runtime's own session log in the private home
//! ```
//!
//! `[access.edit_workdir]` / `[access.read_only]`: `args` (placeholders `{workdir}`,
//! `{scratch_dir}`), `env`, and `checkout_args`, appended only when the work dir holds a `.git`
//! directory as the run starts.
//!
//! Placeholders in `args`: `{prompt_file}` (the file the prompt was written to; only with
//! `prompt = "file"`, and then required), `{workdir}` (the agent's working directory),
//! `{scratch_dir}` (the attempt's scratch directory); `{model}` only in `model_args`. There is no
//! placeholder for the prompt text, so the prompt cannot reach argv.
//!
//! `[models]` maps a model tier to the runtime's model name ([`RuntimeProfile::model_for_tier`]).
//! Every shipped profile defines the tiers of [`MODEL_TIERS`] (`cheap`, `standard`, `strong`);
//! a tier the profile does not define is an error naming the tier, the profile file and the
//! tiers it has (seed: optimize-loop, judge-prompt-template.md: "the harness resolves the tier
//! to a concrete model").

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::AgentError;

/// The shipped runtime profiles as `(file name, TOML text)`.
pub const RUNTIME_SOURCES: &[(&str, &str)] = &[
    ("claude.toml", include_str!("../runtimes/claude.toml")),
    ("codex.toml", include_str!("../runtimes/codex.toml")),
    ("opencode.toml", include_str!("../runtimes/opencode.toml")),
    ("scripted.toml", include_str!("../runtimes/scripted.toml")),
    (
        "scripted-b.toml",
        include_str!("../runtimes/scripted-b.toml"),
    ),
    (
        "scripted-c.toml",
        include_str!("../runtimes/scripted-c.toml"),
    ),
];

/// The program placeholder that resolves to the running skillforge binary (see
/// [`crate::AgentRunnerConfig::skillforge_bin`]).
pub const SKILLFORGE_BIN_PLACEHOLDER: &str = "{skillforge_bin}";

/// The model tiers every shipped profile defines in its `[models]` table.
pub const MODEL_TIERS: &[&str] = &["cheap", "standard", "strong"];

/// A `[models]` value (and so a payload `model`) meaning "the model the runtime's user
/// configured": the runner passes no `model_args` for it. OpenCode's tiers use it: its model
/// names are `provider/model` of the providers each user configured, so no name fits every user.
pub const CONFIGURED_MODEL: &str = "{configured}";

/// Placeholders allowed in `args`.
const ARG_PLACEHOLDERS: &[&str] = &["{prompt_file}", "{workdir}", "{scratch_dir}"];

/// How one agent CLI is run and read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeProfile {
    /// Runtime name used in payloads, e.g. `claude`; equals the profile's file stem.
    pub name: String,
    /// Model family, e.g. `claude`, `codex`; two runtimes of one family judge each other as
    /// same-family (seed: SkillOpt, "Cross-family LLM-judge").
    pub family: String,
    /// One line for help text.
    pub description: String,
    /// Program: a name looked up on the child's `PATH`, an absolute path, or
    /// [`SKILLFORGE_BIN_PLACEHOLDER`].
    pub program: String,
    /// Arguments after the program, with placeholders (see module docs).
    #[serde(default)]
    pub args: Vec<String>,
    /// Arguments appended when the payload names a model; must contain `{model}` if non-empty.
    #[serde(default)]
    pub model_args: Vec<String>,
    /// Arguments appended when the payload sets `project_scope_only`: settings (and so skills)
    /// come from the work dir's project scope only, never the user's own (Claude Code:
    /// `--setting-sources project,local`; seed: skill-eval-loop, "Read what the agent was
    /// offered"). Empty for runtimes without such a switch. No placeholders.
    #[serde(default)]
    pub project_scope_args: Vec<String>,
    /// How the prompt reaches the agent.
    pub prompt: PromptDelivery,
    /// Credential variable names inherited from the worker's environment (when set there), on
    /// top of the process runner's default allowlist. Credentials travel only this way (or as
    /// explicit payload env), never in argv.
    #[serde(default)]
    pub credential_env: Vec<String>,
    /// Other variable names inherited from the worker's environment (config dirs, test knobs).
    #[serde(default)]
    pub pass_env: Vec<String>,
    /// Variables set in every run unless the payload sets them: the CLI's own switches that keep
    /// a run on its configured API (no telemetry, update checks or other traffic) and bound its
    /// retries (issue 38 item 9).
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// How to install the program; appended to the `not_runnable` reason when it is missing.
    #[serde(default)]
    pub install_hint: Option<String>,
    /// Other programs the runtime needs on the worker's `PATH` (`[[requires]]`: `program`,
    /// `why`, `install`). A local run on a worker without one is refused before the CLI starts
    /// (`not_runnable`, naming the program, why and how to install it): OpenCode's skill tool
    /// runs ripgrep, and without it every skill load fails while the run goes on (issue 38 item 4).
    #[serde(default)]
    pub requires: Vec<Requirement>,
    /// Text the runtime writes to its transcript when it is not logged in (Claude Code's
    /// `"error":"authentication_failed"`). A run that does not pass and shows one is an
    /// environment problem, not a failed attempt: `not_runnable` (never retried), with
    /// [`RuntimeProfile::login_hint`].
    #[serde(default)]
    pub auth_failure_markers: Vec<String>,
    /// What to do about an authentication failure (log in, or set a credential variable).
    #[serde(default)]
    pub login_hint: Option<String>,
    /// Credential preflight, for a runtime whose profile can tell where its login lives: the
    /// files a login writes (`~/` = the child's `HOME`, `$VAR/` = that variable's value, an
    /// entry whose variable is unset is skipped). With any listed, a run where none exists and
    /// none of [`RuntimeProfile::login_env`] is set is refused before the CLI starts
    /// (`not_runnable`, never retried). Empty: no preflight (the runtime may log in some other
    /// way, or need no credential).
    #[serde(default)]
    pub credential_files: Vec<String>,
    /// The variables that carry a credential for the preflight (default: `credential_env`).
    #[serde(default)]
    pub login_env: Option<Vec<String>>,
    /// Text the runtime writes when it cannot reach its model API (DNS, refused, offline). A run
    /// that does not pass (failed or timed out while retrying) and shows one is an environment
    /// problem: `not_runnable`, naming the runtime and the runtime's own last error line.
    #[serde(default)]
    pub network_failure_markers: Vec<String>,
    /// Model tier → model name passed through `model_args` (`[models]`, e.g. `cheap = "haiku"`).
    #[serde(default)]
    pub models: std::collections::BTreeMap<String, String>,
    /// The private home every run gets (issue 31 item 5): what points into it and what of the
    /// worker's own login is carried over.
    #[serde(default)]
    pub home: HomeSpec,
    /// What a run may touch: arguments and variables per [`Access`] mode (issue 31 items 3, 6).
    #[serde(default)]
    pub access: AccessSpec,
    /// Transient API errors (rate limit, overload, 5xx) the runner retries itself, after the
    /// CLI's own retries gave up: how many more runs, at most (default 2).
    #[serde(default = "default_transient_retries")]
    pub transient_retries: u32,
    /// How the runner points the CLI at the run's recording proxy, which records the skills
    /// each model request offers (issue 31 item 9, [`crate::proxy`]); absent: no proxy, the
    /// offered skills come from the transcript alone.
    #[serde(default)]
    pub proxy: Option<ProxyKind>,
    /// How to read the transcript (stdout).
    pub transcript: TranscriptSpec,
}

fn default_transient_retries() -> u32 {
    2
}

impl Default for HomeSpec {
    fn default() -> Self {
        Self {
            env: Default::default(),
            carry: Vec::new(),
            files: Vec::new(),
            shared_cache: false,
            reads_ancestors: true,
        }
    }
}

/// A program a runtime needs beside its own (`[[requires]]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requirement {
    /// The program's name on `PATH`, e.g. `rg`.
    pub program: String,
    /// What the runtime uses it for.
    pub why: String,
    /// How to install it.
    pub install: String,
}

impl RuntimeProfile {
    /// The `not_runnable` reason for the first of [`RuntimeProfile::requires`] that `on_path`
    /// does not find; `None` when all are there.
    pub fn missing_requirement(&self, on_path: impl Fn(&str) -> bool) -> Option<String> {
        let missing = self.requires.iter().find(|r| !on_path(&r.program))?;
        Some(format!(
            "agent runtime `{}` needs `{}` on the worker's PATH ({}); install it: {}",
            self.name, missing.program, missing.why, missing.install
        ))
    }
}

/// The private home of a run (`[home]`): the runner makes `<scratch>/home`, sets `HOME` and the
/// XDG base directories (`XDG_CONFIG_HOME` = `<home>/.config`, `XDG_DATA_HOME` =
/// `<home>/.local/share`, `XDG_STATE_HOME` = `<home>/.local/state`, `XDG_CACHE_HOME` =
/// `<home>/.cache`) to it, plus `env`, so no user-level skill, instruction file or setting of the
/// worker's user reaches the agent; only the files `carry` names are copied in (read-only). A
/// variable the payload sets explicitly is left as the payload says.
///
/// ```toml
/// [home]
/// env = { CLAUDE_CONFIG_DIR = ".claude" }     # variable → path inside the private home
/// carry = [{ from = ["$CLAUDE_CONFIG_DIR/.credentials.json", "~/.claude/.credentials.json"], to = ".claude/.credentials.json" }]
/// shared_cache = true                          # keep the worker's XDG_CACHE_HOME (downloaded packages)
/// [[home.files]]                               # written into the private home
/// path = ".config/opencode/opencode.json"
/// text = "{ ... }"                             # `{home}` and `{workdir}` are filled in
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HomeSpec {
    /// Variables set to a path inside the private home (relative, no `..`).
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// Files carried over from the worker's own setup: the first existing `from` (`~/` = the
    /// worker's `HOME`, `$VAR/` = that variable, as the child would have seen it) is copied to
    /// `to` inside the private home, mode 0400.
    #[serde(default)]
    pub carry: Vec<Carry>,
    /// Files written into the private home before the run.
    #[serde(default)]
    pub files: Vec<HomeFile>,
    /// Keep the worker's cache dir (`XDG_CACHE_HOME`, else `~/.cache`) instead of a private one:
    /// for a runtime that downloads packages into it on first use (OpenCode's providers).
    #[serde(default)]
    pub shared_cache: bool,
    /// Whether the runtime reads instruction or skill files from the work dir's parents (every
    /// real CLI does; the scripted agent does not). When it does, a work dir under such files
    /// runs in a clean copy ([`crate::AgentRunner`]).
    #[serde(default = "yes")]
    pub reads_ancestors: bool,
}

fn yes() -> bool {
    true
}

/// One file carried into the private home (`[[home.carry]]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Carry {
    /// Candidate sources, first existing wins.
    pub from: Vec<String>,
    /// Destination inside the private home (relative).
    pub to: String,
}

/// One file written into the private home (`[[home.files]]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HomeFile {
    /// Destination inside the private home (relative).
    pub path: String,
    /// Its text; `{home}` and `{workdir}` are filled in.
    pub text: String,
}

/// What a run may touch (payload `access`; seed: skill-eval-loop, arms edit their work dir, the
/// judge only reads what it is shown).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// Edits inside the work dir, nowhere else (the default: arms, option generation,
    /// experiments).
    #[default]
    EditWorkdir,
    /// Reads only (judges).
    ReadOnly,
}

/// Per-[`Access`] arguments and variables (`[access.edit_workdir]`, `[access.read_only]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessSpec {
    /// For [`Access::EditWorkdir`].
    #[serde(default)]
    pub edit_workdir: AccessArgs,
    /// For [`Access::ReadOnly`].
    #[serde(default)]
    pub read_only: AccessArgs,
}

impl AccessSpec {
    /// The arguments and variables of `access`.
    pub fn of(&self, access: Access) -> &AccessArgs {
        match access {
            Access::EditWorkdir => &self.edit_workdir,
            Access::ReadOnly => &self.read_only,
        }
    }
}

/// Arguments appended and variables set for one access mode; `{workdir}` is filled in both.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessArgs {
    /// Appended after `args`.
    #[serde(default)]
    pub args: Vec<String>,
    /// Set in the child's environment (unless the payload sets the name).
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// Appended after `args` when the work dir is a repository's root (it holds a `.git`
    /// directory as the run starts), so an agent can commit there (Codex keeps `.git`
    /// read-only unless it is a writable root). `{workdir}` is filled in.
    #[serde(default)]
    pub checkout_args: Vec<String>,
}

impl RuntimeProfile {
    /// The model the profile's `[models]` table gives model tier `tier` (e.g. `cheap`); it may be
    /// [`CONFIGURED_MODEL`] where no model name fits every user (OpenCode: its names are the
    /// user's own providers'), which the runner turns into no model argument at all.
    ///
    /// # Errors
    /// [`AgentError::UnknownModelTier`] naming the tier, the profile file
    /// (`runners/agent/runtimes/<name>.toml`) and the tiers it defines.
    pub fn model_for_tier(&self, tier: &str) -> Result<&str, AgentError> {
        self.models
            .get(tier)
            .map(String::as_str)
            .ok_or_else(|| AgentError::UnknownModelTier {
                tier: tier.to_owned(),
                file: format!("runners/agent/runtimes/{}.toml", self.name),
                known: self.models.keys().cloned().collect::<Vec<_>>().join(", "),
            })
    }
}

/// How to give the runtime `name` credentials: every route it accepts, in one order (its
/// profile's `login_hint`), the one wording every message about a missing or refused credential
/// uses (`eval forge`'s preflight, a job's `not_runnable` reason, `doctor`).
pub fn credential_help(name: &str) -> String {
    match find(name) {
        Ok(profile) => profile.credential_help(),
        Err(_) => GENERIC_CREDENTIAL_HELP.to_owned(),
    }
}

/// [`credential_help`] for a profile without a `login_hint`.
const GENERIC_CREDENTIAL_HELP: &str =
    "log the runtime in, or set its credential variables in the worker's environment";

impl RuntimeProfile {
    /// How to give this runtime credentials ([`credential_help`]).
    pub fn credential_help(&self) -> String {
        self.login_hint
            .clone()
            .unwrap_or_else(|| GENERIC_CREDENTIAL_HELP.to_owned())
    }

    /// The `not_runnable` reason when a run that did not pass shows an authentication failure in
    /// `transcript`: names the runtime, the agent's own message and what to do; `None` otherwise.
    pub fn auth_failure(&self, transcript: &str, final_message: Option<&str>) -> Option<String> {
        let marker = self
            .auth_failure_markers
            .iter()
            .find(|m| !m.is_empty() && transcript.contains(m.as_str()))?;
        let said = final_message
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .unwrap_or(marker.as_str());
        let hint = self.credential_help();
        Some(format!(
            "agent runtime `{}` is not authenticated ({said}): {hint}",
            self.name
        ))
    }
}

impl RuntimeProfile {
    /// The credential preflight's refusal: `None` when the profile cannot tell
    /// (`credential_files` empty), a credential variable is set (`is_set`) or a login file exists
    /// (`var` reads the child's environment, for `HOME` and `$VAR/` entries); else the
    /// `not_runnable` reason naming the runtime, what was looked for and what to do.
    pub fn missing_credential(
        &self,
        is_set: impl Fn(&str) -> bool,
        var: impl Fn(&str) -> Option<String>,
    ) -> Option<String> {
        if self.credential_files.is_empty() {
            return None;
        }
        let names = self.login_env.as_ref().unwrap_or(&self.credential_env);
        if names.iter().any(|n| is_set(n)) {
            return None;
        }
        let files: Vec<std::path::PathBuf> = self
            .credential_files
            .iter()
            .filter_map(|f| expand(f, &var))
            .collect();
        if files.iter().any(|f| f.is_file()) {
            return None;
        }
        let hint = self.credential_help();
        let shown: Vec<String> = files.iter().map(|f| format!("`{}`", f.display())).collect();
        Some(format!(
            "agent runtime `{}` is not authenticated: none of {} is set and no login file exists ({}): {hint}",
            self.name,
            names.join(", "),
            if shown.is_empty() {
                "none to look at".to_owned()
            } else {
                shown.join(", ")
            }
        ))
    }

    /// The `not_runnable` reason when a run that did not pass shows that the runtime could not
    /// reach its model API: names the runtime and its last line holding a marker; `None` otherwise.
    pub fn network_failure(&self, transcript: &str) -> Option<String> {
        let markers: Vec<&str> = self
            .network_failure_markers
            .iter()
            .map(String::as_str)
            .filter(|m| !m.is_empty())
            .collect();
        let line = transcript
            .lines()
            .rev()
            .find(|l| markers.iter().any(|m| l.contains(m)))?;
        let said: String = line_in_words(line, &markers).chars().take(300).collect();
        Some(format!(
            "agent runtime `{}` could not reach its model API ({said}): check the worker's network, proxy and the runtime's base URL",
            self.name
        ))
    }
}

/// A transcript line in words: for a JSON event, its first string field named `message` that
/// holds one of `markers` (else its first `message` at all), not the raw event; any other line
/// trimmed as it is.
fn line_in_words(line: &str, markers: &[&str]) -> String {
    fn messages<'a>(value: &'a serde_json::Value, out: &mut Vec<&'a str>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, v) in map {
                    match v {
                        serde_json::Value::String(text) if key == "message" => out.push(text),
                        _ => messages(v, out),
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| messages(v, out)),
            _ => {}
        }
    }
    let Ok(value) = serde_json::from_str::<serde_json::Value>(line.trim()) else {
        return line.trim().to_owned();
    };
    let mut found = Vec::new();
    messages(&value, &mut found);
    found
        .iter()
        .find(|m| markers.iter().any(|k| m.contains(k)))
        .or(found.first())
        .map_or_else(|| line.trim().to_owned(), |m| m.trim().to_owned())
}

/// `~/rest` under `HOME`, `$VAR/rest` under `VAR`, anything else as is; `None` when the variable
/// is unset or empty.
pub(crate) fn expand(
    entry: &str,
    var: &impl Fn(&str) -> Option<String>,
) -> Option<std::path::PathBuf> {
    let non_empty = |name: &str| var(name).filter(|v| !v.trim().is_empty());
    if let Some(rest) = entry.strip_prefix("~/") {
        return non_empty("HOME").map(|h| std::path::Path::new(&h).join(rest));
    }
    if let Some(stripped) = entry.strip_prefix('$') {
        let (name, rest) = stripped.split_once('/').unwrap_or((stripped, ""));
        return non_empty(name).map(|v| std::path::Path::new(&v).join(rest));
    }
    Some(std::path::PathBuf::from(entry))
}

/// How the prompt reaches the agent. There is deliberately no argv variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptDelivery {
    /// Written to the child's stdin, which is then closed.
    Stdin,
    /// Written to `prompt.md` in the attempt's scratch dir, passed as `{prompt_file}`.
    File,
}

/// Where a runtime's transcript records the final message and skills.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TranscriptSpec {
    /// The transcript's format, which fixes where the final message and the offered skills are.
    pub format: TranscriptFormat,
    /// The tool whose calls load a skill (`Skill` for Claude Code, `skill` for OpenCode);
    /// `None` when the runtime records no skill calls, so loads are unknown.
    #[serde(default)]
    pub skill_tool: Option<String>,
    /// The argument of `skill_tool` that names the skill; required with `skill_tool`.
    #[serde(default)]
    pub skill_tool_arg: Option<String>,
    /// A directory under the private home where the runtime writes its own session log
    /// (relative; Codex: `.codex/sessions`, `rollout-*.jsonl`), read after a local run for the
    /// refused writes its stdout leaves out ([`crate::transcript::session_log_denials`]).
    #[serde(default)]
    pub session_log_dir: Option<String>,
}

/// How a CLI is pointed at the recording proxy (`proxy = "…"` in a runtime profile): each
/// names where the CLI reads its model API's base URL, which is also the upstream the proxy
/// forwards to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProxyKind {
    /// `ANTHROPIC_BASE_URL` (upstream: its worker value, else `https://api.anthropic.com`).
    AnthropicBaseUrl,
    /// Codex's model provider in `$CODEX_HOME/config.toml`: a `[model_providers.ID]` with a
    /// `base_url` is overridden with `-c model_providers.ID.base_url=…`; the built-in `openai`
    /// provider with `-c openai_base_url=…` (upstream: the config's `openai_base_url`, else
    /// `OPENAI_BASE_URL`, else `https://api.openai.com/v1`, or ChatGPT's backend for a ChatGPT
    /// login).
    CodexProvider,
    /// Every OpenCode provider with an `options.baseURL` in the user's config, overridden through
    /// `OPENCODE_CONFIG_CONTENT`.
    OpencodeProvider,
}

/// Transcript formats [`crate::parse_transcript`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TranscriptFormat {
    /// Claude Code `--output-format stream-json`: `system`/`init`, `assistant`, `user`, `result`
    /// lines.
    StreamJson,
    /// Codex `exec --json`: `thread.started`, `item.completed`, `turn.completed` lines (and the
    /// older `{"msg": {...}}` lines).
    CodexJsonl,
    /// OpenCode `run --format json`: `step_start`, `text`, `tool_use`, `step_finish` lines.
    OpencodeJson,
    /// The scripted agent's lines: `start`, `skill_offered`, `skill_loaded`, `final`.
    ScriptedJsonl,
    /// Free text: the whole stdout is the final message; skills unknown.
    Plain,
}

impl TranscriptFormat {
    /// True when the format has tool calls, so a `skill_tool` makes sense.
    pub fn has_tool_calls(self) -> bool {
        matches!(
            self,
            TranscriptFormat::StreamJson | TranscriptFormat::OpencodeJson
        )
    }
}

impl RuntimeProfile {
    /// Parses and validates one profile file's text; `file` names it in errors.
    ///
    /// # Errors
    /// [`AgentError::Profile`] on invalid TOML, unknown fields, an empty name, family or
    /// program, a name that is not the file stem, an unknown placeholder, `{model}` outside
    /// `model_args` (or missing from non-empty `model_args`), `{prompt_file}` missing with file
    /// delivery or present with stdin delivery, an invalid env name, or a `skill_tool` without
    /// its argument or on a format without tool calls.
    pub fn parse(file: &str, text: &str) -> Result<Self, AgentError> {
        let err = |message: String| AgentError::Profile {
            file: file.to_string(),
            message,
        };
        let profile: RuntimeProfile = toml::from_str(text).map_err(|e| err(e.to_string()))?;
        for (field, value) in [
            ("name", &profile.name),
            ("family", &profile.family),
            ("program", &profile.program),
        ] {
            if value.trim().is_empty() {
                return Err(err(format!("`{field}` is empty")));
            }
        }
        if file.strip_suffix(".toml") != Some(profile.name.as_str()) {
            return Err(err(format!(
                "`name` `{}` does not match the file name",
                profile.name
            )));
        }
        if profile.program.contains('{') && profile.program != SKILLFORGE_BIN_PLACEHOLDER {
            return Err(err(format!(
                "`program` `{}` may only be a name, a path or `{SKILLFORGE_BIN_PLACEHOLDER}`",
                profile.program
            )));
        }
        for arg in &profile.args {
            check_placeholders(arg, ARG_PLACEHOLDERS).map_err(|m| err(format!("`args`: {m}")))?;
        }
        for arg in &profile.model_args {
            check_placeholders(arg, &["{model}"]).map_err(|m| err(format!("`model_args`: {m}")))?;
        }
        for arg in &profile.project_scope_args {
            check_placeholders(arg, &[]).map_err(|m| err(format!("`project_scope_args`: {m}")))?;
        }
        if !profile.model_args.is_empty()
            && !profile.model_args.iter().any(|a| a.contains("{model}"))
        {
            return Err(err("`model_args` does not use `{model}`".into()));
        }
        let has_prompt_file = profile.args.iter().any(|a| a.contains("{prompt_file}"));
        match (profile.prompt, has_prompt_file) {
            (PromptDelivery::File, false) => {
                return Err(err(
                    "`prompt = \"file\"` needs `{prompt_file}` in `args`".into()
                ));
            }
            (PromptDelivery::Stdin, true) => {
                return Err(err(
                    "`{prompt_file}` is only available with `prompt = \"file\"`".into(),
                ));
            }
            _ => {}
        }
        for (tier, model) in &profile.models {
            if tier.trim().is_empty() || model.trim().is_empty() || model.contains('\n') {
                return Err(err(format!(
                    "`models.{tier}`: a tier and its model must be non-empty single-line names"
                )));
            }
        }
        if !profile.models.is_empty() && profile.model_args.is_empty() {
            return Err(err(
                "`models` without `model_args`: the model would never reach the runtime".into(),
            ));
        }
        for arg in profile
            .access
            .edit_workdir
            .args
            .iter()
            .chain(&profile.access.read_only.args)
            .chain(&profile.access.edit_workdir.checkout_args)
            .chain(&profile.access.read_only.checkout_args)
        {
            check_placeholders(arg, &["{workdir}", "{scratch_dir}"])
                .map_err(|m| err(format!("`access` args: {m}")))?;
        }
        let relative = |path: &str| {
            !path.is_empty() && !path.starts_with('/') && !path.split('/').any(|c| c == "..")
        };
        for (name, path) in &profile.home.env {
            if !relative(path) {
                return Err(err(format!(
                    "`home.env.{name}`: `{path}` must be a relative path inside the private home"
                )));
            }
        }
        for path in profile
            .home
            .carry
            .iter()
            .map(|c| &c.to)
            .chain(profile.home.files.iter().map(|f| &f.path))
        {
            if !relative(path) {
                return Err(err(format!(
                    "`home`: `{path}` must be a relative path inside the private home"
                )));
            }
        }
        for name in profile
            .credential_env
            .iter()
            .chain(&profile.pass_env)
            .chain(profile.home.env.keys())
            .chain(profile.env.keys())
        {
            if name.is_empty() || name.contains('=') || name.contains('\0') {
                return Err(err(format!("invalid environment variable name `{name}`")));
            }
        }
        let spec = &profile.transcript;
        match (&spec.skill_tool, &spec.skill_tool_arg) {
            (Some(tool), None) => {
                return Err(err(format!("`skill_tool` `{tool}` needs `skill_tool_arg`")));
            }
            (None, Some(_)) => return Err(err("`skill_tool_arg` without `skill_tool`".into())),
            (Some(tool), Some(_)) if !spec.format.has_tool_calls() => {
                return Err(err(format!(
                    "`skill_tool` `{tool}` on a transcript format without tool calls"
                )));
            }
            _ => {}
        }
        Ok(profile)
    }
}

/// Checks that every `{...}` in `arg` is one of `allowed`.
fn check_placeholders(arg: &str, allowed: &[&str]) -> Result<(), String> {
    let mut rest = arg;
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start..].find('}') else {
            return Err(format!("unclosed `{{` in `{arg}`"));
        };
        let placeholder = &rest[start..=start + len];
        if !allowed.contains(&placeholder) {
            return Err(format!("unknown placeholder `{placeholder}` in `{arg}`"));
        }
        rest = &rest[start + len + 1..];
    }
    Ok(())
}

/// Every shipped runtime profile, parsed once, in [`RUNTIME_SOURCES`] order: the registry.
///
/// # Panics
/// When a shipped profile is invalid; the `shipped_profiles_parse` test keeps that from
/// reaching a build.
pub fn all() -> &'static [RuntimeProfile] {
    static PROFILES: OnceLock<Vec<RuntimeProfile>> = OnceLock::new();
    PROFILES.get_or_init(|| {
        RUNTIME_SOURCES
            .iter()
            .map(|(file, text)| RuntimeProfile::parse(file, text).unwrap_or_else(|e| panic!("{e}")))
            .collect()
    })
}

/// The shipped profile named `name`.
///
/// # Errors
/// [`AgentError::UnknownRuntime`] listing the known names.
pub fn find(name: &str) -> Result<&'static RuntimeProfile, AgentError> {
    all()
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| AgentError::UnknownRuntime {
            name: name.to_string(),
            known: all()
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_preflight_accepts_a_key_or_a_login_file_and_names_both_when_missing() {
        let codex = find("codex").unwrap();
        let home = tempfile::tempdir().unwrap();
        let home_s = home.path().display().to_string();
        let env = |pairs: Vec<(&'static str, String)>| {
            move |n: &str| pairs.iter().find(|(k, _)| *k == n).map(|(_, v)| v.clone())
        };
        let var = env(vec![("HOME", home_s.clone())]);
        let reason = codex
            .missing_credential(|_| false, &var)
            .expect("no key, no file");
        assert!(
            reason.contains("OPENAI_API_KEY, CODEX_API_KEY")
                && reason.contains(".codex/auth.json")
                && reason.contains("codex login"),
            "{reason}"
        );
        assert!(
            codex
                .missing_credential(|n| n == "CODEX_API_KEY", &var)
                .is_none(),
            "a key is a credential"
        );
        assert!(
            codex
                .missing_credential(|n| n == "OPENAI_BASE_URL", &var)
                .is_some(),
            "a base URL is not"
        );
        std::fs::create_dir_all(home.path().join(".codex")).unwrap();
        std::fs::write(home.path().join(".codex/auth.json"), "{}").unwrap();
        assert!(
            codex.missing_credential(|_| false, &var).is_none(),
            "~/.codex/auth.json is a login"
        );
        let elsewhere = tempfile::tempdir().unwrap();
        let var = env(vec![
            ("HOME", elsewhere.path().display().to_string()),
            ("CODEX_HOME", home_s.clone() + "/.codex"),
        ]);
        assert!(
            codex.missing_credential(|_| false, &var).is_none(),
            "$CODEX_HOME/auth.json is a login"
        );
        // Runtimes whose profile cannot tell are never refused.
        for name in ["claude", "opencode", "scripted"] {
            assert!(
                find(name)
                    .unwrap()
                    .missing_credential(|_| false, |_| None)
                    .is_none(),
                "{name}"
            );
        }
    }

    #[test]
    fn network_failures_are_named_by_the_runtimes_last_error_line() {
        let codex = find("codex").unwrap();
        let transcript = "{\"type\":\"thread.started\"}\n{\"type\":\"error\",\"message\":\"Reconnecting... 2/5 (failed to lookup address information)\"}\n\
                          {\"type\":\"error\",\"message\":\"Reconnecting... waiting for network (Connection failed)\"}\n";
        let reason = codex.network_failure(transcript).unwrap();
        assert!(
            reason.starts_with("agent runtime `codex` could not reach its model API")
                && reason.contains("waiting for network"),
            "{reason}"
        );
        assert!(
            !reason.contains("\"type\""),
            "the runtime's words, not its raw event: {reason}"
        );
        let opencode = find("opencode").unwrap();
        let event = r#"{"type":"error","error":{"name":"APIError","data":{"message":"Cannot connect to API: Unable to connect","isRetryable":true}}}"#;
        assert_eq!(
            opencode.network_failure(event).unwrap(),
            "agent runtime `opencode` could not reach its model API (Cannot connect to API: Unable to connect): \
             check the worker's network, proxy and the runtime's base URL"
        );
        assert!(
            codex
                .network_failure("{\"type\":\"turn.completed\"}")
                .is_none()
        );
        assert!(
            find("claude")
                .unwrap()
                .network_failure(transcript)
                .is_none(),
            "claude lists no markers"
        );
    }

    // Issue 38 item 4: OpenCode without ripgrep is refused before it starts, saying why and how
    // to install it.
    #[test]
    fn a_missing_required_program_is_named_with_why_and_how_to_install() {
        let opencode = find("opencode").unwrap();
        let reason = opencode
            .missing_requirement(|p| p != "rg")
            .expect("rg missing");
        assert!(
            reason.contains("agent runtime `opencode` needs `rg`")
                && reason.contains("skill tool")
                && reason.contains("apt-get install ripgrep"),
            "{reason}"
        );
        assert_eq!(opencode.missing_requirement(|_| true), None);
        assert_eq!(
            find("claude").unwrap().missing_requirement(|_| false),
            None,
            "claude requires nothing else"
        );
    }

    #[test]
    fn shipped_profiles_parse() {
        for (file, text) in RUNTIME_SOURCES {
            RuntimeProfile::parse(file, text).unwrap_or_else(|e| panic!("{e}"));
        }
        let names: Vec<_> = all().iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "claude",
                "codex",
                "opencode",
                "scripted",
                "scripted-b",
                "scripted-c"
            ]
        );
        // The scripted agent's other families are personas of the same program.
        for (name, persona) in [("scripted-b", "b"), ("scripted-c", "c")] {
            let p = find(name).unwrap();
            assert_eq!(
                (p.family.as_str(), p.args.as_slice()),
                (
                    name,
                    ["agent-scripted", "--persona", persona]
                        .map(String::from)
                        .as_slice()
                )
            );
        }
    }

    #[test]
    fn every_shipped_profile_maps_every_model_tier_and_an_unknown_tier_names_the_file() {
        for profile in all() {
            for tier in MODEL_TIERS {
                let model = profile
                    .model_for_tier(tier)
                    .unwrap_or_else(|e| panic!("{e}"));
                assert!(!model.trim().is_empty(), "{} {tier}", profile.name);
                // only where no name fits every user: the model its user configured
                assert_eq!(
                    model == CONFIGURED_MODEL,
                    profile.name == "opencode",
                    "{} {tier}",
                    profile.name
                );
            }
        }
        assert_eq!(
            find("claude").unwrap().model_for_tier("cheap").unwrap(),
            "haiku"
        );
        assert_eq!(
            find("scripted").unwrap().model_for_tier("strong").unwrap(),
            "scripted-strong"
        );
        let e = find("scripted")
            .unwrap()
            .model_for_tier("huge")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "unknown model tier `huge` in `runners/agent/runtimes/scripted.toml` [models] (it defines: cheap, standard, strong)"
        );
        let base = "name = \"x\"\nfamily = \"x\"\ndescription = \"\"\nprogram = \"x\"\nprompt = \"stdin\"\n";
        let no_args = format!("{base}[models]\ncheap = \"m\"\n[transcript]\nformat = \"plain\"\n");
        let e = RuntimeProfile::parse("x.toml", &no_args)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`models` without `model_args`"), "{e}");
        let empty = format!(
            "{base}model_args = [\"-m\", \"{{model}}\"]\n[models]\ncheap = \"\"\n[transcript]\nformat = \"plain\"\n"
        );
        let e = RuntimeProfile::parse("x.toml", &empty)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`models.cheap`"), "{e}");
    }

    #[test]
    fn families_and_formats_are_as_documented() {
        let check = |name: &str, family: &str, prompt: PromptDelivery, format: TranscriptFormat| {
            let profile = find(name).expect("shipped runtime");
            assert_eq!(profile.family, family, "{name}");
            assert_eq!(profile.prompt, prompt, "{name}");
            assert_eq!(profile.transcript.format, format, "{name}");
        };
        check(
            "claude",
            "claude",
            PromptDelivery::Stdin,
            TranscriptFormat::StreamJson,
        );
        check(
            "codex",
            "codex",
            PromptDelivery::Stdin,
            TranscriptFormat::CodexJsonl,
        );
        check(
            "opencode",
            "opencode",
            PromptDelivery::Stdin,
            TranscriptFormat::OpencodeJson,
        );
        check(
            "scripted",
            "scripted",
            PromptDelivery::Stdin,
            TranscriptFormat::ScriptedJsonl,
        );
        assert_eq!(
            find("claude").unwrap().credential_env[0],
            "ANTHROPIC_API_KEY"
        );
        assert!(
            find("codex")
                .unwrap()
                .credential_env
                .contains(&"OPENAI_API_KEY".to_string())
        );
        assert_eq!(
            find("scripted").unwrap().program,
            SKILLFORGE_BIN_PLACEHOLDER
        );
    }

    #[test]
    fn unknown_runtime_lists_the_known_ones() {
        let error = find("gemini").expect_err("no such runtime");
        assert_eq!(
            error.to_string(),
            "unknown agent runtime `gemini` (known: claude, codex, opencode, scripted, scripted-b, scripted-c)"
        );
    }

    #[test]
    fn invalid_profiles_are_rejected_with_the_reason() {
        let base = |extra: &str, prompt: &str, args: &str| {
            format!(
                "name = \"x\"\nfamily = \"x\"\ndescription = \"d\"\nprogram = \"x\"\nargs = {args}\n\
                 prompt = \"{prompt}\"\n{extra}\n[transcript]\nformat = \"plain\"\n"
            )
        };
        let check = |text: String, expected: &str| {
            let error = RuntimeProfile::parse("x.toml", &text).expect_err(expected);
            assert!(
                error.to_string().contains(expected),
                "{error} !~ {expected}"
            );
        };
        RuntimeProfile::parse("x.toml", &base("", "stdin", "[]")).expect("minimal profile");
        check(
            base("", "stdin", "[\"{prompt}\"]"),
            "unknown placeholder `{prompt}`",
        );
        check(
            base("", "stdin", "[\"{model}\"]"),
            "unknown placeholder `{model}`",
        );
        check(base("", "file", "[]"), "needs `{prompt_file}`");
        check(
            base("", "stdin", "[\"{prompt_file}\"]"),
            "only available with",
        );
        check(
            base("model_args = [\"--model\"]", "stdin", "[]"),
            "does not use `{model}`",
        );
        check(
            base("credential_env = [\"A=B\"]", "stdin", "[]"),
            "invalid environment",
        );
        check(base("bogus = 1", "stdin", "[]"), "unknown field");
        check(base("", "argv", "[]"), "unknown variant");
        let renamed = base("", "stdin", "[]");
        let error = RuntimeProfile::parse("y.toml", &renamed).expect_err("name mismatch");
        assert!(error.to_string().contains("does not match"), "{error}");
        let tool_on_plain =
            base("", "stdin", "[]") + "skill_tool = \"Skill\"\nskill_tool_arg = \"skill\"\n";
        check(tool_on_plain, "without tool calls");
    }
}
