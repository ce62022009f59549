//! Where an arm runs (seed: skill-eval-loop, "Optional: run the arms in containers"): in a work
//! dir on the worker's machine (`local`), or in a container per arm on a local engine
//! (`container`), the candidate handed to the with-arm's container read-only and nothing at all
//! handed to a baseline that has no rival (E-09). The gate stays on the host either way: the
//! brief's verify runs in the arm's work dir as a `process` job (E-10).

use std::path::Path;

use serde::{Deserialize, Serialize};
use skillforge_runner_agent::{AgentContainer, AgentMount};

use super::inventory::HANDED_SKILL_DIR;
use super::steps::arm::install_root;

/// The agent's working directory in an arm's container (the agent runner mounts the arm's work
/// dir there).
pub const CONTAINER_WORKDIR: &str = "/work";

/// Container environments that would ship the arm's live credential to a third party (E-13).
pub const CLOUD_ENVIRONMENTS: [&str; 5] = ["daytona", "modal", "blaxel", "e2b", "runloop"];

/// Where a forge's arms run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ArmRunner {
    /// Separate work dirs on the worker's machine, the skill copied into the runtime's project
    /// install root of the with-arm's dir.
    #[default]
    Local,
    /// One container per arm.
    Container(ContainerArms),
}

/// The container arms' settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerArms {
    /// Image holding the agent CLI and `/bin/sh`.
    pub image: String,
    /// Engine (`unix://…` or a loopback `tcp://`); the worker's own when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The engine's default network (agents reach their model API); `false` = none.
    pub network: bool,
}

impl ArmRunner {
    /// `local` or `container`.
    pub fn as_str(&self) -> &'static str {
        match self {
            ArmRunner::Local => "local",
            ArmRunner::Container(_) => "container",
        }
    }

    /// Whether a skill is handed over outside the work dir (`<arm>.meta/skill/<name>`) rather
    /// than copied into it.
    pub fn hands_skills_over(&self) -> bool {
        matches!(self, ArmRunner::Container(_))
    }

    /// The `container` part of an arm's agent payload: every skill handed to the arm (the
    /// `SKILL.md`-holding dirs under `meta/skill/`) mounted read-only at the runtime's project
    /// install root in the container. `None` on the local runner. A baseline handed nothing gets
    /// no mount at all, so its container holds no skills directory (E-09).
    pub fn container_for(&self, meta: &Path, runtime: &str) -> Option<AgentContainer> {
        let ArmRunner::Container(arms) = self else {
            return None;
        };
        let mut mounts = Vec::new();
        let handed = meta.join(HANDED_SKILL_DIR);
        let mut names: Vec<_> = std::fs::read_dir(&handed)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter(|e| e.path().join("SKILL.md").is_file())
                    .map(|e| e.file_name())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        for name in names {
            mounts.push(AgentMount {
                source: handed.join(&name),
                target: format!(
                    "{CONTAINER_WORKDIR}/{}/{}",
                    install_root(runtime),
                    name.to_string_lossy()
                ),
            });
        }
        Some(AgentContainer {
            image: arms.image.clone(),
            mounts,
            network: arms.network,
            host: arms.host.clone(),
        })
    }
}

/// Why container arms may not run where asked (E-13); each names the value refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocalOnlyError {
    /// A cloud environment: its provider would receive the arm's live credential.
    #[error(
        "container environment `{0}` is a cloud provider: the arm's credential rides in the container's environment and would be shipped to a third party; arms run on the local engine only (`--environment docker`)"
    )]
    Cloud(String),
    /// An environment that is neither a cloud provider nor `docker`.
    #[error(
        "container environment `{0}` is unknown; arms run on the local engine only (`docker`, podman's Docker API included)"
    )]
    Unknown(String),
    /// An engine host that is not this machine's ([`skillforge_runner_agent::local_engine_only`]'s
    /// message).
    #[error("{0}")]
    RemoteEngine(String),
}

/// E-13: container arms run on a local engine only. Refuses a cloud environment (its provider
/// would receive the arm's live credential, which rides in the container's environment) and an
/// engine host that is not this machine's ([`skillforge_runner_agent::local_engine_only`], the
/// same predicate the worker's agent runner applies to the engine it resolves).
///
/// # Errors
/// [`LocalOnlyError`]: what was refused and why, naming the value.
pub fn check_local_only(environment: &str, host: Option<&str>) -> Result<(), LocalOnlyError> {
    let environment = environment.trim().to_ascii_lowercase();
    if CLOUD_ENVIRONMENTS.contains(&environment.as_str()) {
        return Err(LocalOnlyError::Cloud(environment));
    }
    if environment != "docker" {
        return Err(LocalOnlyError::Unknown(environment));
    }
    let Some(host) = host.map(str::trim).filter(|h| !h.is_empty()) else {
        return Ok(());
    };
    skillforge_runner_agent::local_engine_only(host).map_err(LocalOnlyError::RemoteEngine)
}

#[cfg(test)]
mod tests {
    use super::*;

    // E-13
    #[test]
    fn e13_cloud_environments_and_remote_engines_are_refused() {
        for cloud in ["daytona", "Modal", "blaxel"] {
            let e = check_local_only(cloud, None).unwrap_err().to_string();
            assert!(
                e.contains("cloud provider") && e.contains(&cloud.to_ascii_lowercase()),
                "{e}"
            );
        }
        assert!(
            check_local_only("kubernetes", None)
                .unwrap_err()
                .to_string()
                .contains("unknown")
        );
        for remote in [
            "tcp://10.0.0.5:2375",
            "ssh://user@box",
            "tcp://docker.example.com:2376",
            "https://x",
        ] {
            let e = check_local_only("docker", Some(remote))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(remote) && e.contains("not on this machine"),
                "{e}"
            );
        }
        for local in [
            None,
            Some("unix:///run/podman/podman.sock"),
            Some("tcp://127.0.0.1:2375"),
            Some("tcp://localhost:2375"),
            Some("tcp://[::1]:2375"),
        ] {
            assert_eq!(check_local_only("docker", local), Ok(()), "{local:?}");
        }
    }

    // E-09: a baseline handed no skill gets no mount (no skills directory in its container); the
    // with-arm's handed skill is mounted at the runtime's project install root.
    #[test]
    fn e09_without_arm_container_gets_no_skill_mount() {
        let dir = tempfile::tempdir().unwrap();
        let (with, without) = (
            dir.path().join("with.meta"),
            dir.path().join("without.meta"),
        );
        std::fs::create_dir_all(with.join("skill/tldr")).unwrap();
        std::fs::write(with.join("skill/tldr/SKILL.md"), "# tldr").unwrap();
        std::fs::create_dir_all(&without).unwrap();
        let runner = ArmRunner::Container(ContainerArms {
            image: "img".into(),
            host: None,
            network: true,
        });
        let c = runner.container_for(&without, "claude").unwrap();
        assert!(c.mounts.is_empty(), "{c:?}");
        let c = runner.container_for(&with, "claude").unwrap();
        assert_eq!(
            c.mounts,
            [AgentMount {
                source: with.join("skill/tldr"),
                target: "/work/.claude/skills/tldr".into()
            }]
        );
        assert_eq!(ArmRunner::Local.container_for(&with, "claude"), None);
    }
}
