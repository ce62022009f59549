//! The private home of one agent run (issue 31 item 5; seed: skill-eval-loop, "Read what the
//! agent was offered", credentials): `<scratch>/home` with the XDG base directories and the
//! profile's `[home]` variables pointed into it, the worker's login files carried over by copy
//! (the originals are only read), so what the model sees differs only by what the job hands it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::profile::RuntimeProfile;

/// The private home's directory name in the attempt's scratch dir.
pub const PRIVATE_HOME_DIR: &str = "home";

/// The variables of the private home at `home` for `profile`: `HOME`, the four XDG base
/// directories (the cache the worker's own with `shared_cache`), the profile's `home.env`.
/// `worker_var` reads the environment the child would otherwise inherit.
pub fn home_env(
    profile: &RuntimeProfile,
    home: &Path,
    worker_var: &dyn Fn(&str) -> Option<String>,
) -> BTreeMap<String, String> {
    let at = |rel: &str| home.join(rel).display().to_string();
    let mut env = BTreeMap::from([
        ("HOME".to_owned(), home.display().to_string()),
        ("XDG_CONFIG_HOME".to_owned(), at(".config")),
        ("XDG_DATA_HOME".to_owned(), at(".local/share")),
        ("XDG_STATE_HOME".to_owned(), at(".local/state")),
        ("XDG_CACHE_HOME".to_owned(), at(".cache")),
    ]);
    if profile.home.shared_cache
        && let Some(cache) = worker_var("XDG_CACHE_HOME")
            .filter(|v| !v.trim().is_empty())
            .or_else(|| {
                worker_var("HOME")
                    .filter(|h| !h.trim().is_empty())
                    .map(|h| format!("{h}/.cache"))
            })
    {
        env.insert("XDG_CACHE_HOME".to_owned(), cache);
    }
    for (name, rel) in &profile.home.env {
        env.insert(name.clone(), at(rel));
    }
    env
}

/// Makes the private home on disk: its directories, the carried files (first existing source,
/// copied with mode 0600; the source is only read) and the profile's written files (`{home}`,
/// `{workdir}` filled in). Returns the carried files as `(source, destination)`.
///
/// # Errors
/// An I/O error naming the path.
pub fn make_home(
    profile: &RuntimeProfile,
    home: &Path,
    env: &BTreeMap<String, String>,
    workdir: &Path,
    worker_var: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<(PathBuf, PathBuf)>, String> {
    let mkdir = |dir: &Path| {
        std::fs::create_dir_all(dir).map_err(|e| format!("create `{}`: {e}", dir.display()))
    };
    mkdir(home)?;
    for value in env.values() {
        let path = Path::new(value);
        if path.starts_with(home) {
            mkdir(path)?;
        }
    }
    let mut carried = Vec::new();
    for carry in &profile.home.carry {
        let Some(source) = carry
            .from
            .iter()
            .filter_map(|f| crate::profile::expand(f, &worker_var))
            .find(|p| p.is_file())
        else {
            continue;
        };
        let target = home.join(&carry.to);
        if let Some(parent) = target.parent() {
            mkdir(parent)?;
        }
        let bytes =
            std::fs::read(&source).map_err(|e| format!("read `{}`: {e}", source.display()))?;
        write_private(&target, &bytes)?;
        carried.push((source, target));
    }
    for file in &profile.home.files {
        let target = home.join(&file.path);
        if let Some(parent) = target.parent() {
            mkdir(parent)?;
        }
        let text = file
            .text
            .replace("{home}", &home.display().to_string())
            .replace("{workdir}", &workdir.display().to_string());
        write_private(&target, text.as_bytes())?;
    }
    Ok(carried)
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("create `{}`: {e}", path.display()))?;
    file.write_all(bytes)
        .map_err(|e| format!("write `{}`: {e}", path.display()))
}

/// Files and directories above `workdir` that a runtime would read as project instructions or
/// skills (`CLAUDE.md`, `AGENTS.md`, `.claude/`, `.agents/`, `.opencode/`, `.codex/`): the
/// nearest first. An agent run in such a work dir is moved to a clean copy
/// ([`crate::AgentRunner`]).
pub fn project_files_above(workdir: &Path) -> Vec<PathBuf> {
    const MARKERS: [&str; 7] = [
        "CLAUDE.md",
        "CLAUDE.local.md",
        "AGENTS.md",
        ".claude",
        ".agents",
        ".opencode",
        ".codex",
    ];
    let mut found = Vec::new();
    let mut dir = workdir.parent();
    while let Some(d) = dir {
        for marker in MARKERS {
            let path = d.join(marker);
            if path.exists() {
                found.push(path);
            }
        }
        dir = d.parent();
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::find;

    #[test]
    fn the_private_home_points_every_base_dir_inside_and_carries_only_named_files() {
        let user = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(user.path().join(".claude/skills/tldr")).unwrap();
        std::fs::write(
            user.path().join(".claude/skills/tldr/SKILL.md"),
            "user copy",
        )
        .unwrap();
        std::fs::write(
            user.path().join(".claude/.credentials.json"),
            "{\"token\":1}",
        )
        .unwrap();
        std::fs::write(user.path().join(".claude/CLAUDE.md"), "user instructions").unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let home = scratch.path().join(PRIVATE_HOME_DIR);
        let user_home = user.path().display().to_string();
        let var = move |n: &str| (n == "HOME").then(|| user_home.clone());
        let profile = find("claude").unwrap();
        let env = home_env(profile, &home, &var);
        assert_eq!(env["HOME"], home.display().to_string());
        for name in [
            "XDG_CONFIG_HOME",
            "XDG_DATA_HOME",
            "XDG_STATE_HOME",
            "XDG_CACHE_HOME",
            "CLAUDE_CONFIG_DIR",
        ] {
            assert!(
                Path::new(&env[name]).starts_with(&home),
                "{name} = {}",
                env[name]
            );
        }
        let carried = make_home(profile, &home, &env, Path::new("/w"), &var).unwrap();
        assert_eq!(carried.len(), 1, "{carried:?}");
        assert_eq!(
            std::fs::read_to_string(home.join(".claude/.credentials.json")).unwrap(),
            "{\"token\":1}"
        );
        assert!(!home.join(".claude/skills").exists() && !home.join(".claude/CLAUDE.md").exists());
    }

    #[test]
    fn project_files_above_a_work_dir_are_found_nearest_first() {
        let root = tempfile::tempdir().unwrap();
        let work = root.path().join("proj/sub/work");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::write(root.path().join("proj/CLAUDE.md"), "x").unwrap();
        std::fs::create_dir_all(root.path().join("proj/sub/.agents/skills")).unwrap();
        std::fs::write(
            work.join("AGENTS.md"),
            "inside the work dir is the brief's own",
        )
        .unwrap();
        let found = project_files_above(&work);
        assert_eq!(
            found[..2],
            [
                root.path().join("proj/sub/.agents"),
                root.path().join("proj/CLAUDE.md")
            ]
        );
    }
}

/// The worker user's git identity for the agent's commits: `user.name` and `user.email` from
/// their global git config, as `GIT_AUTHOR_*` / `GIT_COMMITTER_*` variables. Nothing else of that
/// config reaches the run (no credential helper, no aliases, no hooks). Empty when git or the
/// identity is missing.
pub fn git_identity(worker_var: &dyn Fn(&str) -> Option<String>) -> Vec<(String, String)> {
    let read = |key: &str| {
        let mut cmd = std::process::Command::new("git");
        cmd.args(["config", "--global", "--get", key]).env_clear();
        for name in ["HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "PATH"] {
            if let Some(value) = worker_var(name) {
                cmd.env(name, value);
            }
        }
        cmd.stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let mut out = Vec::new();
    if let Some(name) = read("user.name") {
        out.push(("GIT_AUTHOR_NAME".to_owned(), name.clone()));
        out.push(("GIT_COMMITTER_NAME".to_owned(), name));
    }
    if let Some(email) = read("user.email") {
        out.push(("GIT_AUTHOR_EMAIL".to_owned(), email.clone()));
        out.push(("GIT_COMMITTER_EMAIL".to_owned(), email));
    }
    out
}
