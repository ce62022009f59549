//! The `process` runner's payload: what to run, where, with which environment and limits.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use skillforge_runner::RunnerPayload;

/// Default cap on captured bytes per stream (64 KiB).
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 64 * 1024;
/// Default grace between SIGTERM and SIGKILL to the process group (2 s).
pub const DEFAULT_GRACE_MS: u64 = 2_000;
/// Environment variables a child inherits from the worker by default.
pub const DEFAULT_ENV_ALLOWLIST: &[&str] = &[
    "PATH", "HOME", "LANG", "LC_ALL", "TERM", "TMPDIR", "USER", "SHELL",
];

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Command {
    /// Program and arguments, no shell. The program is looked up on the child's `PATH`
    /// when it contains no `/`.
    Argv(Vec<String>),
    /// A shell command line, run as `/bin/sh -c LINE`.
    Shell(String),
}

impl Command {
    /// True when the command reports its children's endings as a shell does, so exit codes
    /// 129..=192 mean "a child died of signal code−128": a [`Command::Shell`] line, or an argv
    /// whose program's file name is a POSIX-style shell (`sh`, `bash`, `dash`, `zsh`, `ksh`,
    /// `mksh`, `ash`) or `bwrap` (bubblewrap exits with its command's code, or 128+n when the
    /// command died of signal n).
    pub fn is_shell(&self) -> bool {
        const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "bwrap"];
        match self {
            Command::Shell(_) => true,
            Command::Argv(argv) => argv.first().is_some_and(|program| {
                let name = program.rsplit('/').next().unwrap_or(program);
                SHELLS.contains(&name)
            }),
        }
    }

    /// The program that is executed: `/bin/sh` for a shell line, `argv[0]` otherwise
    /// (`None` for an empty argv).
    pub fn program(&self) -> Option<&str> {
        match self {
            Command::Shell(_) => Some(SHELL_PATH),
            Command::Argv(argv) => argv.first().map(String::as_str),
        }
    }
}

/// The shell that runs [`Command::Shell`] lines.
pub(crate) const SHELL_PATH: &str = "/bin/sh";

/// The `process` runner's payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessPayload {
    /// What to run.
    pub command: Command,
    /// Working directory; the worker's own when `None`.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Variables set explicitly (secrets travel only this way, never in argv).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Names of `env` entries whose values are secrets (`jobs submit --secret-env NAME`): the
    /// child gets them like any other entry, but what shows a job (`jobs show`, `jobs list`,
    /// `--json` included) prints `***` for their values. Absent from the JSON when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_env: Vec<String>,
    /// Names inherited from the worker's environment; [`DEFAULT_ENV_ALLOWLIST`] when `None`.
    #[serde(default)]
    pub env_allowlist: Option<Vec<String>>,
    /// Bytes written to the child's stdin, then closed; stdin is empty (`/dev/null`) when `None`.
    #[serde(default)]
    pub stdin: Option<String>,
    /// Cap on captured bytes per stream; [`DEFAULT_MAX_OUTPUT_BYTES`] when `None`.
    #[serde(default)]
    pub max_output_bytes: Option<usize>,
    /// Grace between SIGTERM and SIGKILL, ms; [`DEFAULT_GRACE_MS`] when `None`.
    #[serde(default)]
    pub grace_ms: Option<u64>,
}

impl RunnerPayload for ProcessPayload {
    const KIND: &'static str = "process";
}

impl ProcessPayload {
    /// A payload running `argv` with every default.
    pub fn argv(argv: Vec<String>) -> Self {
        Self {
            command: Command::Argv(argv),
            cwd: None,
            env: BTreeMap::new(),
            secret_env: Vec::new(),
            env_allowlist: None,
            stdin: None,
            max_output_bytes: None,
            grace_ms: None,
        }
    }

    /// A payload running `sh -c line` with every default.
    pub fn shell(line: impl Into<String>) -> Self {
        Self {
            command: Command::Shell(line.into()),
            ..Self::argv(Vec::new())
        }
    }

    /// The per-stream capture cap in bytes, defaulted.
    pub fn effective_max_output_bytes(&self) -> usize {
        self.max_output_bytes.unwrap_or(DEFAULT_MAX_OUTPUT_BYTES)
    }

    /// The SIGTERM→SIGKILL grace, defaulted.
    pub fn effective_grace(&self) -> Duration {
        Duration::from_millis(self.grace_ms.unwrap_or(DEFAULT_GRACE_MS))
    }

    /// Names inherited from the worker's environment, defaulted to [`DEFAULT_ENV_ALLOWLIST`].
    pub fn effective_env_allowlist(&self) -> Vec<&str> {
        match &self.env_allowlist {
            Some(names) => names.iter().map(String::as_str).collect(),
            None => DEFAULT_ENV_ALLOWLIST.to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_shell_recognises_shell_lines_and_shell_programs() {
        let check = |command: Command, expected: bool| {
            assert_eq!(command.is_shell(), expected, "{command:?}");
        };
        check(Command::Shell("true".into()), true);
        check(
            Command::Argv(vec!["sh".into(), "-c".into(), "x".into()]),
            true,
        );
        check(Command::Argv(vec!["/usr/bin/bash".into()]), true);
        check(
            Command::Argv(vec!["bwrap".into(), "--unshare-pid".into()]),
            true,
        );
        check(Command::Argv(vec!["python3".into()]), false);
        check(Command::Argv(vec!["/bin/shx".into()]), false);
        check(Command::Argv(Vec::new()), false);
    }

    #[test]
    fn payload_parses_with_defaults() {
        let payload: ProcessPayload =
            serde_json::from_value(serde_json::json!({ "command": { "shell": "echo hi" } }))
                .expect("parse payload");
        assert_eq!(payload, ProcessPayload::shell("echo hi"));
        assert_eq!(
            payload.effective_max_output_bytes(),
            DEFAULT_MAX_OUTPUT_BYTES
        );
        assert_eq!(payload.effective_grace(), Duration::from_secs(2));
        assert_eq!(payload.effective_env_allowlist(), DEFAULT_ENV_ALLOWLIST);
    }
}
