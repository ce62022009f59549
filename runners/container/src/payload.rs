//! The `container` runner's payload: image, command, mounted work dir, environment and limits.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use skillforge_runner::RunnerPayload;
pub use skillforge_runner_process::Command;
use skillforge_runner_process::{DEFAULT_GRACE_MS, DEFAULT_MAX_OUTPUT_BYTES};

use crate::error::ContainerError;

/// Where the job's work dir is mounted inside the container, and the command's working directory.
pub const DEFAULT_MOUNT_PATH: &str = "/work";

/// The network a container gets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    /// The engine's default network (a bridge with outbound access on Docker and rootful podman).
    #[default]
    Default,
    /// No network at all: only a loopback interface (`NetworkMode: none`).
    None,
}

impl Network {
    /// The Docker API `HostConfig.NetworkMode` value.
    pub fn mode(self) -> &'static str {
        match self {
            // podman's compatible API maps "bridge" to its default network; "default" would
            // follow `containers.conf` `netns`, which operators set to "none" on sandboxes.
            Network::Default => "bridge",
            Network::None => "none",
        }
    }
}

/// Whether a missing image is pulled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PullPolicy {
    /// Pull the image when the engine does not have it (the Docker CLI's default).
    #[default]
    Missing,
    /// Never pull: a missing image is `not_runnable` at once.
    Never,
}

/// Resource limits of the container; `None` is the engine's default (unlimited).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// Memory limit in bytes (`HostConfig.Memory`; swap is capped at the same value). A command
    /// killed for exceeding it is `killed` with signal 9.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<i64>,
    /// CPUs, fractional (`HostConfig.NanoCpus` = cpus × 10⁹), e.g. `0.5`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    /// Maximum number of processes (`HostConfig.PidsLimit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<i64>,
}

/// A host path bind-mounted into the container besides the work dir (e.g. a skill handed to an
/// agent, a program the image lacks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    /// Absolute host path (a directory or a file) the engine's host sees.
    pub source: PathBuf,
    /// Absolute path inside the container.
    pub target: String,
    /// Mounted read-only (the default): the container cannot change the host copy.
    #[serde(default = "read_only_default")]
    pub read_only: bool,
}

fn read_only_default() -> bool {
    true
}

/// The `container` runner's payload (DESIGN §5).
///
/// JSON shape: `{"image": "debian:bookworm-slim", "command": {"shell": "make test"},
/// "work_dir": "/host/dir", "mount_path": "/work", "env": {"TOKEN": "…"}, "limits":
/// {"memory_bytes": 536870912, "cpus": 1.0, "pids": 256}, "network": "default"|"none",
/// "pull": "missing"|"never", "user": "1000:1000", "max_output_bytes": 65536, "grace_ms": 2000,
/// "host": "unix:///run/podman/podman.sock", "mounts": [{"source": "/host/skill", "target":
/// "/work/.claude/skills/x", "read_only": true}]}`; only `image` and `command` are required.
///
/// Secrets travel in `env` only: they become the container's environment, never its command
/// line or labels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContainerPayload {
    /// Image reference, e.g. `localhost/skillforge-test-base:busybox` or `debian:bookworm-slim`.
    pub image: String,
    /// What to run: an argv (the image's entrypoint is replaced by `argv[0]`) or a shell line
    /// (run as `/bin/sh -c LINE`).
    pub command: Command,
    /// Host directory bind-mounted read-write at `mount_path` and used as the working directory;
    /// the attempt's scratch dir (created) when `None`. Must be a path the engine's host sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_dir: Option<PathBuf>,
    /// Mount point of `work_dir` inside the container; [`DEFAULT_MOUNT_PATH`] when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_path: Option<String>,
    /// Environment of the command (on top of the image's own).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Names of `env` entries whose values are secrets (`jobs submit --secret-env NAME`): set in
    /// the container like the others, shown as `***` wherever a job is shown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_env: Vec<String>,
    /// Memory, CPU and process limits.
    #[serde(default)]
    pub limits: Limits,
    /// Network of the container; the engine's default network when absent.
    #[serde(default)]
    pub network: Network,
    /// Pull policy for a missing image.
    #[serde(default)]
    pub pull: PullPolicy,
    /// User (`name`, `uid` or `uid:gid`) the command runs as; the image's default when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Cap on captured bytes per stream; the process runner's default (64 KiB) when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_bytes: Option<usize>,
    /// Grace between SIGTERM and SIGKILL on timeout or cancel, ms (default 2000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_ms: Option<u64>,
    /// Engine to use, overriding `DOCKER_HOST` and `[runners.container] host`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Further bind mounts, after the work dir's (so a mount inside `mount_path` shows over it;
    /// the engine creates its mount point in the work dir).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<Mount>,
}

impl RunnerPayload for ContainerPayload {
    const KIND: &'static str = "container";
}

impl ContainerPayload {
    /// A payload running `command` in `image` with every default.
    pub fn new(image: impl Into<String>, command: Command) -> Self {
        Self {
            image: image.into(),
            command,
            work_dir: None,
            mount_path: None,
            env: BTreeMap::new(),
            secret_env: Vec::new(),
            limits: Limits::default(),
            network: Network::Default,
            pull: PullPolicy::Missing,
            user: None,
            max_output_bytes: None,
            grace_ms: None,
            host: None,
            mounts: Vec::new(),
        }
    }

    /// Parses and checks a job payload.
    ///
    /// # Errors
    /// [`ContainerError::InvalidPayload`] when it does not parse, the image is empty, the argv is
    /// empty, the mount path is not absolute, a limit is not positive, or an env name is empty
    /// or contains `=`.
    pub fn from_json(value: &serde_json::Value) -> Result<Self, ContainerError> {
        let payload: Self = serde_json::from_value(value.clone())
            .map_err(|e| ContainerError::InvalidPayload(e.to_string()))?;
        payload.check()?;
        Ok(payload)
    }

    fn check(&self) -> Result<(), ContainerError> {
        let invalid = |message: String| Err(ContainerError::InvalidPayload(message));
        if self.image.trim().is_empty() {
            return invalid("image is empty".into());
        }
        if matches!(&self.command, Command::Argv(argv) if argv.is_empty()) {
            return invalid("command argv is empty".into());
        }
        if !self.effective_mount_path().starts_with('/') {
            return invalid(format!(
                "mount_path `{}` is not absolute",
                self.effective_mount_path()
            ));
        }
        if let Some(mount) = self
            .mounts
            .iter()
            .find(|m| !m.source.is_absolute() || !m.target.starts_with('/'))
        {
            return invalid(format!(
                "mount `{}` → `{}`: both paths must be absolute",
                mount.source.display(),
                mount.target
            ));
        }
        if let Some(name) = self
            .env
            .keys()
            .find(|name| name.is_empty() || name.contains('='))
        {
            return invalid(format!("env name `{name}` is empty or contains `=`"));
        }
        let Limits {
            memory_bytes,
            cpus,
            pids,
        } = self.limits;
        if memory_bytes.is_some_and(|m| m <= 0) || pids.is_some_and(|p| p <= 0) {
            return invalid("limits.memory_bytes and limits.pids must be positive".into());
        }
        if cpus.is_some_and(|c| !(c.is_finite() && c > 0.0)) {
            return invalid("limits.cpus must be a positive number".into());
        }
        Ok(())
    }

    /// The mount point of the work dir, defaulted.
    pub fn effective_mount_path(&self) -> &str {
        self.mount_path.as_deref().unwrap_or(DEFAULT_MOUNT_PATH)
    }

    /// The per-stream capture cap in bytes, defaulted.
    pub fn effective_max_output_bytes(&self) -> usize {
        self.max_output_bytes.unwrap_or(DEFAULT_MAX_OUTPUT_BYTES)
    }

    /// The SIGTERM→SIGKILL grace, defaulted.
    pub fn effective_grace(&self) -> Duration {
        Duration::from_millis(self.grace_ms.unwrap_or(DEFAULT_GRACE_MS))
    }

    /// The container's entrypoint and command: `["/bin/sh", "-c"]` + `[LINE]` for a shell
    /// line, `[argv[0]]` + `argv[1..]` for an argv.
    #[cfg(feature = "exec")]
    pub(crate) fn entrypoint_and_cmd(&self) -> (Vec<String>, Vec<String>) {
        match &self.command {
            Command::Shell(line) => (vec!["/bin/sh".into(), "-c".into()], vec![line.clone()]),
            Command::Argv(argv) => (argv[..1].to_vec(), argv[1..].to_vec()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_parses_with_defaults() {
        let value = serde_json::json!({"image": "img", "command": {"shell": "echo hi"}});
        let payload = ContainerPayload::from_json(&value).expect("parse");
        assert_eq!(
            payload,
            ContainerPayload::new("img", Command::Shell("echo hi".into()))
        );
        assert_eq!(payload.effective_mount_path(), "/work");
        assert_eq!(payload.network, Network::Default);
        assert_eq!(payload.pull, PullPolicy::Missing);
        assert_eq!(
            serde_json::to_value(&payload).unwrap(),
            serde_json::json!({"image": "img", "command": {"shell": "echo hi"}, "limits": {},
                "network": "default", "pull": "missing"})
        );
    }

    #[test]
    fn invalid_payloads_are_rejected_with_what_was_wrong() {
        let check = |value: serde_json::Value, needle: &str| {
            let error = ContainerPayload::from_json(&value)
                .expect_err("invalid")
                .to_string();
            assert!(error.contains(needle), "{value}: {error}");
        };
        check(
            serde_json::json!({"image": " ", "command": {"shell": "x"}}),
            "image is empty",
        );
        check(
            serde_json::json!({"image": "i", "command": {"argv": []}}),
            "argv is empty",
        );
        check(
            serde_json::json!({"image": "i", "command": {"shell": "x"}, "mount_path": "w"}),
            "not absolute",
        );
        check(
            serde_json::json!({"image": "i", "command": {"shell": "x"}, "env": {"A=B": "c"}}),
            "env name",
        );
        check(
            serde_json::json!({"image": "i", "command": {"shell": "x"}, "limits": {"pids": 0}}),
            "positive",
        );
        check(
            serde_json::json!({"image": "i", "command": {"shell": "x"}, "limits": {"cpus": -1.0}}),
            "cpus",
        );
        check(serde_json::json!({"image": "i"}), "command");
        check(
            serde_json::json!({"image": "i", "command": {"shell": "x"},
                "mounts": [{"source": "rel", "target": "/x"}]}),
            "must be absolute",
        );
    }

    #[test]
    fn entrypoint_replaces_the_images_own() {
        let argv = ContainerPayload::new("i", Command::Argv(vec!["ls".into(), "-l".into()]));
        assert_eq!(
            argv.entrypoint_and_cmd(),
            (vec!["ls".into()], vec!["-l".into()])
        );
        let shell = ContainerPayload::new("i", Command::Shell("a; b".into()));
        assert_eq!(
            shell.entrypoint_and_cmd(),
            (vec!["/bin/sh".into(), "-c".into()], vec!["a; b".into()])
        );
    }
}
