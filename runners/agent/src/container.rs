//! Agents in containers: the port through which the agent runner runs an agent CLI in a
//! container instead of as a child process (payload `container`; seed: skill-eval-loop,
//! "Optional: run the arms in containers").
//!
//! The agent runner does not talk to a container engine itself; the `container` runner crate
//! implements [`AgentContainerExec`] and the binary hands it to
//! [`crate::AgentRunner::with_containers`]. The profile, the prompt delivery, the transcript
//! parsing, the authentication check and the report stay the agent runner's; only where the
//! program runs changes. Paths the agent sees are the container's: its work dir is mounted at
//! [`CONTAINER_WORKDIR`], the attempt's scratch dir at [`CONTAINER_SCRATCH`], and the scripted
//! runtime's program (the skillforge binary) at [`CONTAINER_SKILLFORGE_BIN`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use skillforge_runner::{CancellationToken, RunOutcome, RunnerError};
use skillforge_runner_process::Command;

use crate::AgentError;
use crate::invocation::{PROMPT_FILE_NAME, build_invocation};
use crate::payload::{AgentContainer, AgentPayload};
use crate::profile::{RuntimeProfile, SKILLFORGE_BIN_PLACEHOLDER};

/// The agent's working directory inside the container (the payload's `workdir`, mounted).
pub const CONTAINER_WORKDIR: &str = "/work";
/// The attempt's scratch dir inside the container (prompt file, stdin file).
pub const CONTAINER_SCRATCH: &str = "/skillforge/scratch";
/// Where the skillforge binary is mounted for the scripted runtime.
pub const CONTAINER_SKILLFORGE_BIN: &str = "/skillforge/bin/skillforge";

/// One agent run in a container, in the container's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerAgentRun {
    /// The job id (labels the container so a dead worker's leftovers are swept).
    pub job_id: String,
    /// Image holding the agent CLI.
    pub image: String,
    /// argv inside the container (paths are the container's).
    pub argv: Vec<String>,
    /// The container's environment: the payload's `env` plus the profile's `credential_env` /
    /// `pass_env` names set in the worker's environment. Credentials travel only here, never in
    /// argv or labels.
    pub env: BTreeMap<String, String>,
    /// Text for the agent's stdin (the prompt, for stdin-delivery runtimes).
    pub stdin: Option<String>,
    /// Host work dir, mounted read-write at [`CONTAINER_WORKDIR`].
    pub workdir: PathBuf,
    /// Host scratch dir, mounted read-write at [`CONTAINER_SCRATCH`].
    pub scratch_dir: PathBuf,
    /// Read-only mounts: host path → container path (handed skills, the scripted binary).
    pub mounts: Vec<(PathBuf, String)>,
    /// The engine's default network when true, none otherwise.
    pub network: bool,
    /// Engine override.
    pub host: Option<String>,
    /// Cap on captured transcript (stdout) bytes.
    pub max_output_bytes: usize,
}

/// Runs an agent CLI in a container.
#[async_trait::async_trait]
pub trait AgentContainerExec: Send + Sync + std::fmt::Debug {
    /// The engine address [`AgentContainerExec::run_agent`] uses for a run whose payload names
    /// `explicit` (`None`: this worker's own, e.g. its `DOCKER_HOST`). The agent runner checks it
    /// with [`crate::local_engine_only`] before anything runs (E-13): a worker whose engine is
    /// elsewhere refuses the run instead of shipping the credential there.
    fn engine(&self, explicit: Option<&str>) -> String;

    /// Runs `run` under `timeout` and `cancel`: stdout is the transcript (capped at
    /// `max_output_bytes`, `detail.stdout_truncated_bytes` counting what was dropped), the exit is
    /// classified like the process runner's, the container is removed afterwards. `detail` holds
    /// the engine and image (digest) that ran it.
    ///
    /// # Errors
    /// [`RunnerError`] when no engine answers (its message says how to start one) or the engine
    /// fails for reasons not the agent's.
    async fn run_agent(
        &self,
        run: &ContainerAgentRun,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, RunnerError>;
}

/// Plans the container run of `payload` on `profile`: argv as [`build_invocation`] builds it but
/// with the container's paths, the program the image's (`profile.program` on its `PATH`) or, for
/// `{skillforge_bin}`, `skillforge_bin` mounted at [`CONTAINER_SKILLFORGE_BIN`]; the environment
/// from the payload plus the profile's credential and pass names read from `worker_env`. Returns
/// the run and the host path the prompt file must be written to (file delivery only).
///
/// # Errors
/// [`AgentError::InvalidPayload`] for a payload without an absolute `workdir`, an empty image,
/// a relative mount, or what [`build_invocation`] refuses.
pub fn build_container_run(
    profile: &RuntimeProfile,
    payload: &AgentPayload,
    container: &AgentContainer,
    job_id: &str,
    scratch_dir: &Path,
    skillforge_bin: impl FnOnce() -> std::io::Result<PathBuf>,
    worker_env: impl Fn(&str) -> Option<String>,
) -> Result<(ContainerAgentRun, Option<PathBuf>), AgentError> {
    let invalid = |message: String| AgentError::InvalidPayload {
        runtime: profile.name.clone(),
        message,
    };
    let workdir = match &payload.workdir {
        Some(dir) if dir.is_absolute() => dir.clone(),
        _ => {
            return Err(invalid(
                "a container run needs an absolute `workdir` (mounted at /work)".into(),
            ));
        }
    };
    if container.image.trim().is_empty() {
        return Err(invalid("container `image` is empty".into()));
    }
    let mut mounts = Vec::new();
    for mount in &container.mounts {
        if !mount.source.is_absolute() || !mount.target.starts_with('/') {
            return Err(invalid(format!(
                "container mount `{}` → `{}`: both paths must be absolute",
                mount.source.display(),
                mount.target
            )));
        }
        mounts.push((mount.source.clone(), mount.target.clone()));
    }
    let program = if profile.program == SKILLFORGE_BIN_PLACEHOLDER {
        let bin = skillforge_bin().map_err(|source| AgentError::SkillforgeBin {
            runtime: profile.name.clone(),
            source,
        })?;
        mounts.push((bin, CONTAINER_SKILLFORGE_BIN.to_owned()));
        CONTAINER_SKILLFORGE_BIN.to_owned()
    } else {
        profile.program.clone()
    };
    let mut inside = payload.clone();
    inside.workdir = Some(PathBuf::from(CONTAINER_WORKDIR));
    let invocation = build_invocation(profile, &inside, Path::new(CONTAINER_SCRATCH), &program)?;
    let argv = match invocation.process.command {
        Command::Argv(argv) => argv,
        Command::Shell(line) => {
            return Err(invalid(format!(
                "agent runs never go through a shell: {line}"
            )));
        }
    };
    let mut env = BTreeMap::new();
    for name in profile.credential_env.iter().chain(&profile.pass_env) {
        if let Some(value) = worker_env(name) {
            env.insert(name.clone(), value);
        }
    }
    // The payload's variables and the access mode's (`[access]`), as a local run gets them.
    env.extend(invocation.process.env.clone());
    let prompt_file = invocation
        .prompt_file
        .is_some()
        .then(|| scratch_dir.join(PROMPT_FILE_NAME));
    let run = ContainerAgentRun {
        job_id: job_id.to_owned(),
        image: container.image.clone(),
        argv,
        env,
        stdin: invocation.process.stdin,
        workdir,
        scratch_dir: scratch_dir.to_path_buf(),
        mounts,
        network: container.network,
        host: container.host.clone(),
        max_output_bytes: crate::TRANSCRIPT_MAX_BYTES,
    };
    Ok((run, prompt_file))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::AgentMount;
    use crate::profile::{all, find};

    const TOKEN: &str = "sk-ant-oat-secret-token";
    const PROMPT: &str = "Write the reply.\nSECRET-PROMPT-LINE\n";

    fn container() -> AgentContainer {
        AgentContainer {
            image: "img".into(),
            mounts: vec![AgentMount {
                source: "/h/with.meta/skill/tldr".into(),
                target: "/work/.claude/skills/tldr".into(),
            }],
            network: true,
            host: None,
        }
    }

    fn worker_env(name: &str) -> Option<String> {
        matches!(
            name,
            "CLAUDE_CODE_OAUTH_TOKEN" | "OPENAI_API_KEY" | "OPENROUTER_API_KEY"
        )
        .then(|| TOKEN.to_owned())
    }

    // E-11: in a container the token rides in the container's environment, read from the worker's
    // by name; no argv of any runtime carries it or the prompt.
    #[test]
    fn e11_container_runs_carry_credentials_in_env_never_argv() {
        for profile in all() {
            let mut payload = AgentPayload::new(profile.name.clone(), PROMPT);
            payload.workdir = Some("/h/s1/with".into());
            let (run, _) = build_container_run(
                profile,
                &payload,
                &container(),
                "job-1",
                Path::new("/scratch/job-1"),
                || Ok("/opt/skillforge".into()),
                worker_env,
            )
            .unwrap();
            for arg in &run.argv {
                assert!(
                    !arg.contains(TOKEN),
                    "{}: token in argv {arg}",
                    profile.name
                );
                assert!(
                    !arg.contains("SECRET-PROMPT-LINE"),
                    "{}: prompt in argv",
                    profile.name
                );
                assert!(
                    !arg.starts_with("/h/") && !arg.starts_with("/scratch"),
                    "{}: host path {arg}",
                    profile.name
                );
            }
            let crosses = profile
                .credential_env
                .iter()
                .any(|n| worker_env(n).is_some());
            assert_eq!(
                run.env.values().any(|v| v == TOKEN),
                crosses,
                "{}: {:?}",
                profile.name,
                run.env
            );
            assert!(
                !run.env.contains_key("PATH"),
                "{}: the image keeps its own PATH",
                profile.name
            );
        }
    }

    #[test]
    fn container_paths_and_the_scripted_binary_mount() {
        let mut payload = AgentPayload::new("scripted", "p");
        payload.workdir = Some("/h/s1/with".into());
        payload.env.insert("FORGE_SAMPLE".into(), "2".into());
        let (run, prompt_file) = build_container_run(
            find("scripted").unwrap(),
            &payload,
            &container(),
            "job-1",
            Path::new("/scratch/job-1"),
            || Ok("/opt/skillforge".into()),
            |_| None,
        )
        .unwrap();
        assert_eq!(run.argv, [CONTAINER_SKILLFORGE_BIN, "agent-scripted"]);
        assert_eq!(run.stdin.as_deref(), Some("p"));
        assert_eq!(prompt_file, None);
        assert!(
            run.mounts
                .contains(&("/opt/skillforge".into(), CONTAINER_SKILLFORGE_BIN.into()))
        );
        assert_eq!(run.env.get("FORGE_SAMPLE").map(String::as_str), Some("2"));
        // A runtime that reads its prompt from a file (no shipped one does since OpenCode reads
        // stdin whole): the file is the container's scratch path.
        let filed = crate::profile::RuntimeProfile::parse(
            "filed.toml",
            "name = \"filed\"\nfamily = \"f\"\ndescription = \"d\"\nprogram = \"filed\"\nargs = [\"--file\", \"{prompt_file}\"]\nprompt = \"file\"\n[transcript]\nformat = \"plain\"\n",
        )
        .unwrap();
        let mut opencode = AgentPayload::new("filed", "p");
        opencode.workdir = Some("/h/w".into());
        let (run, prompt_file) = build_container_run(
            &filed,
            &opencode,
            &container(),
            "j",
            Path::new("/scratch/j"),
            || Ok("/x".into()),
            |_| None,
        )
        .unwrap();
        assert!(
            run.argv.contains(&format!("{CONTAINER_SCRATCH}/prompt.md")),
            "{:?}",
            run.argv
        );
        assert_eq!(prompt_file, Some(PathBuf::from("/scratch/j/prompt.md")));
        let no_workdir = AgentPayload::new("scripted", "p");
        let e = build_container_run(
            find("scripted").unwrap(),
            &no_workdir,
            &container(),
            "j",
            Path::new("/s"),
            || Ok("/x".into()),
            |_| None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("absolute `workdir`"), "{e}");
    }
}
