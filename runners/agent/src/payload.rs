//! The `agent` runner's payload: which runtime, the prompt, and where and how to run it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use skillforge_runner::RunnerPayload;

/// The `agent` runner's payload (JSON in `RunSpec::payload`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentPayload {
    /// Runtime profile name: `claude`, `codex`, `opencode` or `scripted`.
    pub runtime: String,
    /// The full prompt; delivered on stdin or in a file as the profile says, never in argv.
    pub prompt: String,
    /// Model name passed through the profile's `model_args`; the runtime's default when `None`
    /// (and ignored by runtimes without `model_args`, such as `scripted`).
    #[serde(default)]
    pub model: Option<String>,
    /// Absolute working directory for the agent; the attempt's scratch dir when `None`.
    #[serde(default)]
    pub workdir: Option<PathBuf>,
    /// Skills the caller installed for or handed to the agent (recorded in the report as
    /// `skills_handed`; what the agent was offered and loaded is read from its transcript).
    #[serde(default)]
    pub skills: Vec<String>,
    /// Variables set explicitly in the child's environment (e.g. a credential the worker does
    /// not have in its own environment). Never placed in argv.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Wall-clock budget in seconds; the smaller of this and the job's timeout applies.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// Where to write the full transcript (stdout) after the run; the report then carries
    /// `transcript_path` instead of `transcript_tail`. Parent directories are created.
    #[serde(default)]
    pub transcript_path: Option<PathBuf>,
}

impl RunnerPayload for AgentPayload {
    const KIND: &'static str = "agent";
}

impl AgentPayload {
    /// A payload running `prompt` on `runtime` with every default.
    pub fn new(runtime: impl Into<String>, prompt: impl Into<String>) -> Self {
        Self {
            runtime: runtime.into(),
            prompt: prompt.into(),
            model: None,
            workdir: None,
            skills: Vec::new(),
            env: BTreeMap::new(),
            timeout_secs: None,
            transcript_path: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_parses_with_defaults_and_rejects_unknown_fields() {
        let payload: AgentPayload =
            serde_json::from_value(serde_json::json!({"runtime": "scripted", "prompt": "hi"}))
                .expect("parse payload");
        assert_eq!(payload, AgentPayload::new("scripted", "hi"));
        let error = serde_json::from_value::<AgentPayload>(
            serde_json::json!({"runtime": "scripted", "prompt": "hi", "argv": ["x"]}),
        )
        .expect_err("unknown field");
        assert!(
            error.to_string().contains("unknown field `argv`"),
            "{error}"
        );
    }
}
