//! The template version an agent job runs, carried into the commits it makes (issue 37 item 8):
//! with [`crate::AgentPayload::template_version`] set, the agent's environment has
//! `SKILLFORGE_TEMPLATE=<id>@v<N>` and git's `core.hooksPath` (through `GIT_CONFIG_COUNT`, so
//! every `git` the agent runs sees it and no file of the repository changes) points at hooks
//! written into the attempt's scratch dir. Their `prepare-commit-msg` adds the trailer
//! `Skillforge-Template: <id>@v<N>` to each commit message (`git interpret-trailers`, replacing
//! one the agent wrote); every hook then runs the repository's own hook of the same name
//! (`core.hooksPath` of the repository's config, else `$GIT_COMMON_DIR/hooks`), so the
//! repository's checks still run. The harvester reads the trailer back from the merged PR's
//! commits (`skillforge_skillopt::harvest::trailer`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The variable naming the template version in the agent's environment (also for scripts the
/// agent runs that open a PR: they can end its body with the trailer line).
pub const TEMPLATE_ENV: &str = "SKILLFORGE_TEMPLATE";
/// The trailer key (the harvester's `Skillforge-Template`).
pub const TEMPLATE_TRAILER: &str = "Skillforge-Template";
/// Directory of the hooks under the attempt's scratch dir.
pub const HOOKS_DIR: &str = "git-hooks";

/// Client-side hooks chained to the repository's own (git's `githooks(5)` names that a working
/// agent can trigger).
const CHAINED_HOOKS: [&str; 12] = [
    "applypatch-msg",
    "pre-applypatch",
    "post-applypatch",
    "pre-commit",
    "pre-merge-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-rebase",
    "post-checkout",
    "post-merge",
    "pre-push",
];

fn hook_script(name: &str) -> String {
    let add = if name == "prepare-commit-msg" {
        format!(
            "if [ -n \"${TEMPLATE_ENV}\" ]; then\n  git interpret-trailers --in-place --if-exists replace --trailer \"{TEMPLATE_TRAILER}: ${TEMPLATE_ENV}\" \"$1\" || true\nfi\n"
        )
    } else {
        String::new()
    };
    format!(
        "#!/bin/sh\n# skillforge: the template version that ran this agent goes into its commits (issue 37 item 8)\n{add}\
         own=$(git config --local core.hooksPath 2>/dev/null) || own=\"$(git rev-parse --git-common-dir)/hooks\"\n\
         if [ -x \"$own/{name}\" ] && [ \"$own\" != \"$(dirname \"$0\")\" ]; then exec \"$own/{name}\" \"$@\"; fi\nexit 0\n"
    )
}

/// Writes the hooks under `scratch` and returns the variables that turn them on for `version`:
/// [`TEMPLATE_ENV`] and the `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n` entry for
/// `core.hooksPath` after any entries already in `env` (which it reads for their count).
///
/// # Errors
/// The I/O error of writing a hook.
pub fn commit_hooks(
    scratch: &Path,
    version: &str,
    env: &BTreeMap<String, String>,
) -> std::io::Result<BTreeMap<String, String>> {
    let dir: PathBuf = scratch.join(HOOKS_DIR);
    std::fs::create_dir_all(&dir)?;
    for name in CHAINED_HOOKS {
        let path = dir.join(name);
        std::fs::write(&path, hook_script(name))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    let n: usize = env
        .get("GIT_CONFIG_COUNT")
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok(BTreeMap::from([
        (TEMPLATE_ENV.to_owned(), version.to_owned()),
        ("GIT_CONFIG_COUNT".to_owned(), (n + 1).to_string()),
        (format!("GIT_CONFIG_KEY_{n}"), "core.hooksPath".to_owned()),
        (format!("GIT_CONFIG_VALUE_{n}"), dir.display().to_string()),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, env: &BTreeMap<String, String>, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .envs(env)
            .env("GIT_AUTHOR_NAME", "a")
            .env("GIT_AUTHOR_EMAIL", "a@x")
            .env("GIT_COMMITTER_NAME", "a")
            .env("GIT_COMMITTER_EMAIL", "a@x")
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    // A real repository and real `git commit`s: the trailer lands in each message, an agent's own
    // trailer is replaced, and the repository's own commit-msg hook still runs.
    #[test]
    fn commits_carry_the_trailer_and_the_repositorys_hooks_still_run() {
        let scratch = tempfile::tempdir().unwrap();
        let repo = tempfile::tempdir().unwrap();
        let none = BTreeMap::new();
        git(repo.path(), &none, &["init", "-q"]);
        let own = repo.path().join(".git/hooks/commit-msg");
        std::fs::write(
            &own,
            "#!/bin/sh\necho ran >> \"$(git rev-parse --git-dir)/own-hook-ran\"\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o755)).unwrap();
        let env = commit_hooks(scratch.path(), "planner@v3", &none).unwrap();
        assert_eq!(env["GIT_CONFIG_COUNT"], "1");
        std::fs::write(repo.path().join("a.txt"), "a").unwrap();
        git(repo.path(), &env, &["add", "a.txt"]);
        git(repo.path(), &env, &["commit", "-q", "-m", "Add a"]);
        std::fs::write(repo.path().join("b.txt"), "b").unwrap();
        git(repo.path(), &env, &["add", "b.txt"]);
        git(
            repo.path(),
            &env,
            &[
                "commit",
                "-q",
                "-m",
                "Add b\n\nSkillforge-Template: planner@v1",
            ],
        );
        let log = git(repo.path(), &none, &["log", "--format=%B%x00"]);
        let messages: Vec<&str> = log
            .split('\0')
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .collect();
        assert_eq!(
            messages,
            [
                "Add b\n\nSkillforge-Template: planner@v3",
                "Add a\n\nSkillforge-Template: planner@v3"
            ]
        );
        let ran = std::fs::read_to_string(repo.path().join(".git/own-hook-ran")).unwrap();
        assert_eq!(
            ran.lines().count(),
            2,
            "the repository's commit-msg hook ran for each commit"
        );
        let more = commit_hooks(
            scratch.path(),
            "planner@v3",
            &BTreeMap::from([("GIT_CONFIG_COUNT".into(), "2".into())]),
        )
        .unwrap();
        assert_eq!(
            (
                more["GIT_CONFIG_COUNT"].as_str(),
                more["GIT_CONFIG_KEY_2"].as_str()
            ),
            ("3", "core.hooksPath")
        );
    }
}
