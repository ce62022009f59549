//! The `agent` runner's payload: which runtime, the prompt, and where and how to run it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use skillforge_runner::RunnerPayload;

use crate::profile::Access;

/// The `agent` runner's payload (JSON in `RunSpec::payload`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentPayload {
    /// Runtime profile name: `claude`, `codex`, `opencode` or `scripted`.
    pub runtime: String,
    /// The full prompt; delivered on stdin or in a file as the profile says, never in argv.
    pub prompt: String,
    /// Model name passed through the profile's `model_args`; the runtime's default when `None`
    /// (and ignored by runtimes without `model_args`; the scripted agent records it in its
    /// transcript). A model tier (`cheap`) becomes a name through
    /// [`crate::RuntimeProfile::model_for_tier`] before it is put here.
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
    /// Settings and skills from the work dir's project scope only (the profile's
    /// `project_scope_args`, e.g. Claude Code's `--setting-sources project,local`): an eval arm
    /// is offered what its work dir holds, not the user's own installs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub project_scope_only: bool,
    /// Run the agent in a container instead of as a child process of the worker (the worker
    /// needs a container engine: [`crate::AgentContainerExec`]). Absent = a local process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<AgentContainer>,
    /// What the agent may touch: edits inside its work dir (the default) or reads only (a
    /// judge). The profile's `[access]` table says how (permission mode, sandbox).
    #[serde(default, skip_serializing_if = "is_default_access")]
    pub access: Access,
    /// The template version `<id>@v<N>` this job answers as (`ask` while harvesting is on): the
    /// agent's commits carry the trailer `Skillforge-Template: <id>@v<N>` and its environment
    /// `SKILLFORGE_TEMPLATE` (the runner's `trailer` module), so the PR it leads to is attributed
    /// to that version (issue 37 item 8). Absent = nothing is added; container runs ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_version: Option<String>,
}

fn is_default_access(access: &Access) -> bool {
    *access == Access::default()
}

/// Where and how an agent runs in a container (payload `container`).
///
/// JSON shape: `{"image": "localhost/agents:claude", "mounts": [{"source": "/host/with.meta/skill/x",
/// "target": "/work/.claude/skills/x"}], "network": true, "host": "unix:///run/podman/podman.sock"}`.
/// The payload's `workdir` is bind-mounted at [`crate::CONTAINER_WORKDIR`] and is the agent's
/// working directory there; `mounts` are read-only (a skill handed to the container never lands
/// in the host work dir, and the agent cannot change the host copy).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentContainer {
    /// Image holding the agent CLI (and `/bin/sh`, which delivers a stdin prompt).
    pub image: String,
    /// Read-only bind mounts: absolute host path → absolute path in the container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<AgentMount>,
    /// The engine's default network (agents reach their model API); `false` = no network.
    #[serde(default = "network_default")]
    pub network: bool,
    /// Engine to use instead of the worker's `DOCKER_HOST` / `[runners.container] host`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// E-13 (seed: skill-eval-loop, "Keep it on local Docker"): whether the container engine at
/// `host` (the address a run would use: `unix://…`, a socket path, `tcp://…`, `ssh://…`, …) is
/// on this machine: a unix socket, or `tcp://`/`http://` on a loopback address. An agent's live
/// credential rides in its container's environment, so an engine elsewhere would receive it.
/// The control plane checks the engine it names and the worker checks the one it resolved.
///
/// # Errors
/// The refusal, naming `host`.
pub fn local_engine_only(host: &str) -> Result<(), String> {
    let host = host.trim();
    if host.starts_with("unix://") || host.starts_with('/') {
        return Ok(());
    }
    if let Some(rest) = host
        .strip_prefix("tcp://")
        .or_else(|| host.strip_prefix("http://"))
    {
        let authority = rest.split('/').next().unwrap_or_default();
        let name = authority
            .rsplit_once(':')
            .map_or(authority, |(name, _)| name)
            .trim_matches(['[', ']']);
        if name == "localhost"
            || name
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
        {
            return Ok(());
        }
    }
    Err(format!(
        "container engine `{host}` is not on this machine: the agent's credential rides in the container's environment \
         and would be shipped to it; agents run on a local engine only (a unix socket or a loopback tcp:// address)"
    ))
}

fn network_default() -> bool {
    true
}

/// One read-only bind mount of an [`AgentContainer`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentMount {
    /// Absolute host path.
    pub source: PathBuf,
    /// Absolute path in the container.
    pub target: String,
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
            project_scope_only: false,
            container: None,
            access: Access::default(),
            template_version: None,
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
