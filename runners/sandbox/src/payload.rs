//! The `sandbox` runner's payload: which repository and rev to verify, the commands, limits,
//! network and confinement choices.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use skillforge_runner::RunnerPayload;

use crate::error::SandboxError;

/// The hard-verifier leg's default budget for a whole run: 15 minutes
/// (skillopt-facts.md §5, "Leg timeouts: … hard verifier 15 min"). The runner itself uses
/// `RunSpec::timeout`; callers that build a `RunSpec` use this when the operator gives none.
pub const DEFAULT_RUN_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// Bytes of each command's stdout and stderr kept in the report (the last 16 KiB).
pub const TAIL_BYTES: usize = 16 * 1024;

/// How commands are confined.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfinementMode {
    /// Use `bwrap` when it is on `PATH` and its probe works, else run unconfined and say so.
    #[default]
    Auto,
    /// Run unconfined even when `bwrap` works (reported as `confinement: "none"`).
    None,
    /// Require `bwrap`; the run errors when it does not work on this worker.
    Bwrap,
}

/// The `sandbox` runner's payload (seed: SkillOpt, "Deterministic hard-verifier tier").
///
/// JSON shape: `{"repo": "/path", "rev": "HEAD", "commands": ["cargo test"], "timeout_secs": 900,
/// "command_timeout_secs": null, "network": false, "env": {}, "confinement": "auto"}`; only
/// `repo` and `commands` are required.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxPayload {
    /// The live repository on this worker: its work-tree root, a `.git` dir or a bare repo.
    /// Parent directories are never searched, so a path inside some other repository fails
    /// instead of verifying that repository.
    pub repo: PathBuf,
    /// What to verify: any rev git understands (`HEAD`, a branch, a tag, a hex id), resolved to
    /// a commit in the live repository before cloning. Default `HEAD`.
    #[serde(default = "default_rev")]
    pub rev: String,
    /// Command lines, each run as `sh -c LINE` in order; never split on commas or shell
    /// operators (S-37). An empty list skips the run (S-39).
    pub commands: Vec<String>,
    /// Budget for the whole run (clone, checkout and every command), seconds; the job's
    /// `RunSpec::timeout` when `None`, and never more than it.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// Optional extra cap on each single command, seconds (each command also gets at most the
    /// time left of the whole-run budget).
    #[serde(default)]
    pub command_timeout_secs: Option<u64>,
    /// Whether commands may use the network. `true` by default, since verifiers may fetch
    /// dependencies (issue 3; `skillforge verify --network none` turns it off). `false` adds
    /// `--unshare-net` under bwrap; without bwrap the network cannot be taken away and stays reachable.
    #[serde(default = "default_network")]
    pub network: bool,
    /// Variables set for every command (on top of the inherited allowlist, see
    /// [`SANDBOX_ENV_ALLOWLIST`]).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Confinement choice; `auto` by default. Ignored when `image` is set.
    #[serde(default)]
    pub confinement: ConfinementMode,
    /// Run each command in a container from this image instead (confinement `container`); the
    /// worker needs a container engine ([`crate::ContainerExec`]). Absent = no container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Fetch the repository from here into the worker's mirror cache instead of opening
    /// `repo` (then only a label in logs): how a job for a fleet names its repository
    /// (issue 20). Absent = `repo` is a path on the worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetch: Option<skillforge_runner::RepoFetch>,
}

/// Worker variables a sandbox command inherits: the process runner's default allowlist plus
/// toolchain homes, so self-provisioning commands find their caches.
pub const SANDBOX_ENV_ALLOWLIST: &[&str] = &[
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TERM",
    "TMPDIR",
    "USER",
    "SHELL",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "GOPATH",
    "GOROOT",
    "GOMODCACHE",
    "GOCACHE",
];

fn default_network() -> bool {
    true
}

fn default_rev() -> String {
    "HEAD".to_owned()
}

impl RunnerPayload for SandboxPayload {
    const KIND: &'static str = "sandbox";
}

impl SandboxPayload {
    /// A payload verifying `rev` of `repo` with `commands` and every default.
    pub fn new(repo: impl Into<PathBuf>, rev: impl Into<String>, commands: Vec<String>) -> Self {
        Self {
            repo: repo.into(),
            rev: rev.into(),
            commands,
            timeout_secs: None,
            command_timeout_secs: None,
            network: true,
            env: BTreeMap::new(),
            confinement: ConfinementMode::Auto,
            image: None,
            fetch: None,
        }
    }

    /// Parses a job payload.
    ///
    /// # Errors
    /// [`SandboxError::InvalidPayload`] when it does not parse or `rev` is empty.
    pub fn from_json(value: &serde_json::Value) -> Result<Self, SandboxError> {
        let payload: Self = serde_json::from_value(value.clone())
            .map_err(|e| SandboxError::InvalidPayload(e.to_string()))?;
        if payload.rev.trim().is_empty() {
            return Err(SandboxError::InvalidPayload("rev is empty".into()));
        }
        if payload
            .image
            .as_deref()
            .is_some_and(|i| i.trim().is_empty())
        {
            return Err(SandboxError::InvalidPayload("image is empty".into()));
        }
        Ok(payload)
    }

    /// The whole-run budget: `timeout_secs` capped by `spec_timeout`.
    pub fn run_budget(&self, spec_timeout: Duration) -> Duration {
        match self.timeout_secs {
            Some(secs) => Duration::from_secs(secs).min(spec_timeout),
            None => spec_timeout,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_parses_with_defaults() {
        let value = serde_json::json!({ "repo": "/r", "commands": ["echo a,b && true"] });
        let payload = SandboxPayload::from_json(&value).expect("parse payload");
        assert_eq!(
            payload,
            SandboxPayload::new("/r", "HEAD", vec!["echo a,b && true".into()])
        );
        assert!(payload.network, "network is on by default (issue 3)");
        assert_eq!(payload.confinement, ConfinementMode::Auto);
    }

    #[test]
    fn run_budget_is_capped_by_the_spec() {
        let check = |timeout_secs: Option<u64>, spec_secs: u64, expected_secs: u64| {
            let mut payload = SandboxPayload::new("/r", "HEAD", Vec::new());
            payload.timeout_secs = timeout_secs;
            let budget = payload.run_budget(Duration::from_secs(spec_secs));
            assert_eq!(
                budget,
                Duration::from_secs(expected_secs),
                "{timeout_secs:?} {spec_secs}"
            );
        };
        check(None, 900, 900);
        check(Some(10), 900, 10);
        check(Some(1000), 900, 900);
    }

    #[test]
    fn empty_rev_is_rejected() {
        let value = serde_json::json!({ "repo": "/r", "rev": " ", "commands": [] });
        assert!(SandboxPayload::from_json(&value).is_err());
    }
}
