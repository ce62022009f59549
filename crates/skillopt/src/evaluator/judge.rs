//! Stage 3: the LLM judge, run last through the `agent` runner (seed "Evaluator profiles and
//! structured failures": LLM judges last; S-101).
//!
//! The judge is pointwise: it reads one output and answers in the shape every skillforge judge
//! (and the scripted runtime) uses, `{"verdict":"a"|"b"|"tie","reasoning":"..."}`, where `a` =
//! the output meets the bar, `b` = it falls short, `tie` = it cannot tell. The prompt carries the
//! profile's `judge.config.judge_prompt_templates[task_kind]` (else `["_global"]`, else a built-in
//! rubric) and never the option's blind label. A verdict the judge did not state readably is
//! refused by name (stage `error`), never read as a tie.

use serde_json::Value;
use skillforge_contract::EvaluatorProfile;
use skillforge_engine::JobSpec;
use skillforge_runner::PayloadError;
use skillforge_runner_agent::AgentPayload;

use skillforge_stage::StageDef;

/// Workflow name of evaluator jobs.
pub const EVALUATE_WORKFLOW: &str = "evaluate";
/// Stage name of judge jobs.
pub const JUDGE_STAGE: &str = "judge";
/// `judge_prompt_version` of the built-in rubric.
pub const DEFAULT_JUDGE_PROMPT_VERSION: &str = "skillforge-judge-v1";
/// Longest artifact excerpt put in a judge prompt, in bytes (cut at a char boundary).
pub const MAX_JUDGE_ARTIFACT_BYTES: usize = 64 * 1024;

const DEFAULT_RUBRIC: &str = "Judge whether the output below does its job for a careful human reviewer: it is \
correct, complete for the item, follows the agent template's instructions, and is clear.";

/// The judge's reading of one output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JudgeVerdict {
    /// `a`: meets the bar (soft 1.0).
    Meets,
    /// `b`: falls short (soft 0.0; a failure packet).
    FallsShort,
    /// `tie`: cannot tell (soft 0.5).
    Tie,
}

impl JudgeVerdict {
    /// The wire verdict: `a` | `b` | `tie`.
    pub fn as_str(self) -> &'static str {
        match self {
            JudgeVerdict::Meets => "a",
            JudgeVerdict::FallsShort => "b",
            JudgeVerdict::Tie => "tie",
        }
    }

    /// Soft score in [0,1]: 1.0, 0.0, 0.5.
    pub fn soft(self) -> f64 {
        match self {
            JudgeVerdict::Meets => 1.0,
            JudgeVerdict::FallsShort => 0.0,
            JudgeVerdict::Tie => 0.5,
        }
    }

    /// `quality_status`: `passed` | `failed` | `tie`.
    pub fn quality_status(self) -> &'static str {
        match self {
            JudgeVerdict::Meets => "passed",
            JudgeVerdict::FallsShort => "failed",
            JudgeVerdict::Tie => "tie",
        }
    }
}

/// What the caller must run for the judge stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JudgeRequest {
    /// Agent runtime profile name, e.g. `scripted`, `claude`.
    pub runtime: String,
    /// Judge model (`judge.model`), `None` for the runtime's default.
    pub model: Option<String>,
    /// The full prompt (header line `task: judge` first).
    pub prompt: String,
    /// `judge_prompt_version` to record (configured, or [`DEFAULT_JUDGE_PROMPT_VERSION`] for the
    /// built-in rubric; empty when a configured template has no version).
    pub prompt_version: String,
    /// `sha256:<hex>` of the rubric text (the template, without the artifact).
    pub prompt_hash: String,
}

/// What the judge stage produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JudgeOutcome {
    /// The judge answered readably.
    Verdict {
        /// The verdict.
        verdict: JudgeVerdict,
        /// Its reasoning.
        reasoning: String,
        /// Runtime that judged.
        runtime: String,
        /// The runtime's model family (from the agent report), `""` when unknown.
        family: String,
        /// Engine job id, `""` when the judge did not run as a job.
        job_id: String,
    },
    /// The judge could not run or did not answer readably.
    Error {
        /// Why, e.g. `judge verdict unreadable: …`, `judge job failed: …`.
        reason: String,
        /// Engine job id, `""` when none.
        job_id: String,
    },
}

/// The rubric for `profile`: `(text, prompt_version)`.
pub fn judge_rubric(profile: &EvaluatorProfile) -> (String, String) {
    let config = profile.judge.as_ref().and_then(|j| j.config.as_ref());
    let version = config
        .and_then(|c| c.get("judge_prompt_version"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim()
        .to_owned();
    let templates = config.and_then(|c| c.get("judge_prompt_templates"));
    let configured = templates
        .and_then(|t| {
            t.get(profile.task_kind.as_str())
                .or_else(|| t.get("_global"))
        })
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty());
    match configured {
        Some(text) => (text.to_owned(), version),
        None => (
            DEFAULT_RUBRIC.to_owned(),
            if version.is_empty() {
                DEFAULT_JUDGE_PROMPT_VERSION.to_owned()
            } else {
                version
            },
        ),
    }
}

/// The judge prompt for one artifact. `title` describes the item (may be empty); `text` is the
/// artifact, cut at [`MAX_JUDGE_ARTIFACT_BYTES`].
pub fn judge_prompt(profile: &EvaluatorProfile, rubric: &str, title: &str, text: &str) -> String {
    let mut cut = text.len().min(MAX_JUDGE_ARTIFACT_BYTES);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let note = if cut < text.len() {
        format!("\n[… cut: {} more bytes]", text.len() - cut)
    } else {
        String::new()
    };
    let task_kind = if profile.task_kind.is_empty() {
        "generic"
    } else {
        profile.task_kind.as_str()
    };
    format!(
        "task: judge\n\nYou are the last stage of the evaluator `{profile_id}` (task kind `{task_kind}`); its cheap \
         checks already ran.\n{rubric}\n\nAnswer with JSON only: {{\"verdict\":\"a\"|\"b\"|\"tie\",\"reasoning\":\"...\"}} \
         where a = the output meets the bar, b = it falls short (say what to change), tie = you cannot tell.\n\n\
         Item — {title}\n\nOutput:\n<<<\n{body}{note}\n>>>\n",
        profile_id = profile.profile_id,
        body = &text[..cut],
    )
}

/// `sha256:<hex>` of `text`.
pub fn prompt_hash(text: &str) -> String {
    skillforge_stage::fs::content_hash(text)
}

/// Why a judge's final message holds no usable verdict; the caller records it as a stage error,
/// never as a tie.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerdictError {
    /// No JSON object in the message (the parser's error text).
    #[error("judge verdict unreadable: the final message is not a JSON object: {0}")]
    NotJson(String),
    /// The object has no `verdict` field.
    #[error("judge verdict unreadable: no `verdict` field")]
    NoVerdict,
    /// A verdict other than a, b or tie (lowercased).
    #[error("judge verdict unreadable: `{0}` is not a, b or tie")]
    Unknown(String),
}

/// Reads `{"verdict": "a"|"b"|"tie", "reasoning": …}` from a judge's final message (a JSON object
/// embedded in prose — first `{` to last `}` — is accepted; the verdict is case-insensitive).
/// Returns the verdict and the trimmed reasoning ('' when absent).
///
/// # Errors
/// [`VerdictError`] naming what was wrong (no JSON object, no verdict, a verdict other than
/// a/b/tie).
pub fn parse_judge_verdict(final_message: &str) -> Result<(JudgeVerdict, String), VerdictError> {
    let text = final_message.trim();
    let value: Value = serde_json::from_str(text)
        .or_else(|e| match (text.find('{'), text.rfind('}')) {
            (Some(a), Some(b)) if a < b => serde_json::from_str(&text[a..=b]),
            _ => Err(e),
        })
        .map_err(|e| VerdictError::NotJson(e.to_string()))?;
    let verdict = value
        .get("verdict")
        .and_then(Value::as_str)
        .map(|v| v.trim().to_ascii_lowercase());
    let verdict = match verdict.as_deref() {
        Some("a") => JudgeVerdict::Meets,
        Some("b") => JudgeVerdict::FallsShort,
        Some("tie") => JudgeVerdict::Tie,
        Some(other) => return Err(VerdictError::Unknown(other.to_owned())),
        None => return Err(VerdictError::NoVerdict),
    };
    let reasoning = value
        .get("reasoning")
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim()
        .to_owned();
    Ok((verdict, reasoning))
}

/// Why `runtime` cannot judge on this host, or `None` when it can: an unknown runtime profile,
/// or a program that is neither skillforge itself (`{skillforge_bin}`) nor found on `PATH`.
/// (A fleet worker may have a program this host lacks; the evaluator then skips rather than
/// enqueue a job that may never run.)
pub fn judge_runtime_problem(runtime: &str) -> Option<String> {
    let profile = match skillforge_runner_agent::find(runtime) {
        Ok(profile) => profile,
        Err(e) => return Some(format!("judge runtime `{runtime}` is unknown: {e}")),
    };
    if profile.program == skillforge_runner_agent::SKILLFORGE_BIN_PLACEHOLDER
        || program_on_path(&profile.program)
    {
        return None;
    }
    Some(format!(
        "judge runtime `{runtime}`: program `{}` not found on PATH",
        profile.program
    ))
}

fn program_on_path(program: &str) -> bool {
    if program.contains('/') {
        return std::path::Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// The engine job of one judge run: the `judge` stage of `workflows/evaluator.toml` (runner
/// `agent`, workflow [`EVALUATE_WORKFLOW`], budget 600 s shipped, a failed or unreadable run is an
/// answer, not a retry), idempotency key `key` (so re-evaluating returns the recorded verdict).
///
/// # Errors
/// [`PayloadError`] when the payload does not serialize.
pub fn judge_job(
    stage: &StageDef,
    request: &JudgeRequest,
    key: String,
) -> Result<JobSpec, PayloadError> {
    let mut payload = AgentPayload::new(request.runtime.clone(), request.prompt.clone());
    payload.model = request.model.clone();
    payload.timeout_secs = Some(stage.timeout_secs);
    stage.job(&payload, Some(key))
}
