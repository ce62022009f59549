//! A worker's user for the real agent CLIs (issue 31): a home set up as a real user's would be,
//! with each runtime pointed at the fake model API (`fake_model`) — Codex's `config.toml`,
//! OpenCode's config, the Anthropic base URL and keys in the environment — and user-level copies of
//! a skill named `tldr` and user instructions in every place the three CLIs read them from, each
//! carrying [`USER_MARKER`], which no request to the model may show.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::fake_model::FakeModel;

/// Text in every user-level skill and instruction file of an [`AgentUser`].
pub const USER_MARKER: &str = "USER-LEVEL-MARKER-7f3a";

/// The three real runtimes the tests run.
pub const REAL_RUNTIMES: [&str; 3] = ["claude", "codex", "opencode"];

/// A worker's user (its home is a temp dir).
pub struct AgentUser {
    dir: tempfile::TempDir,
    url: String,
}

impl AgentUser {
    /// A user whose runtimes all talk to `fake`.
    pub fn new(fake: &FakeModel) -> AgentUser {
        let dir = tempfile::tempdir().expect("user home");
        let home = dir.path();
        let skill = format!(
            "---\nname: tldr\ndescription: {USER_MARKER} the user's own tldr\n---\n\n{USER_MARKER}\n"
        );
        for at in [
            ".claude/skills/tldr",
            ".agents/skills/tldr",
            ".codex/skills/tldr",
            ".config/opencode/skill/tldr",
            ".config/opencode/skills/tldr",
        ] {
            crate::write(&home.join(at).join("SKILL.md"), &skill);
        }
        for at in [
            ".claude/CLAUDE.md",
            ".codex/AGENTS.md",
            ".config/opencode/AGENTS.md",
            "AGENTS.md",
            "CLAUDE.md",
        ] {
            crate::write(
                &home.join(at),
                &format!("{USER_MARKER} user instructions\n"),
            );
        }
        crate::write(&home.join(".codex/config.toml"), &fake.codex_config());
        // The user's git config, as a developer's machine has one: its identity reaches an
        // agent's commits, its credential helper must not reach the run.
        crate::write(
            &home.join(".gitconfig"),
            "[user]\n\tname = Agent User\n\temail = agent-user@example.invalid\n\
             [credential]\n\thelper = store --file /nonexistent/USER-CREDENTIALS\n",
        );
        crate::write(
            &home.join(".config/opencode/opencode.json"),
            &fake.opencode_config().to_string(),
        );
        AgentUser {
            dir,
            url: fake.url.clone(),
        }
    }

    /// The user's home.
    pub fn home(&self) -> &Path {
        self.dir.path()
    }

    /// The user's environment as a worker process has it: `HOME`, `PATH`, the Anthropic base URL,
    /// the fake keys, and `CODEX_FORCE_AUTH_JSON=0`.
    pub fn env(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("HOME".to_owned(), self.home().display().to_string()),
            // The CLIs and their tools (`rg`) where this machine has them.
            ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
            ("ANTHROPIC_BASE_URL".to_owned(), self.url.clone()),
            ("ANTHROPIC_API_KEY".to_owned(), "sk-ant-fake".to_owned()),
            ("OPENAI_API_KEY".to_owned(), "sk-fake".to_owned()),
            // This user runs Codex on an API key, deliberately (the eval loop's preflight
            // otherwise insists on a ChatGPT login, E-12).
            ("CODEX_FORCE_AUTH_JSON".to_owned(), "0".to_owned()),
        ])
    }

    /// `command` (a skillforge process) run as this user: its environment, and none of the test
    /// machine's own runtime settings.
    pub fn apply(&self, command: &mut Command) {
        for name in [
            "XDG_CONFIG_HOME",
            "XDG_DATA_HOME",
            "XDG_CACHE_HOME",
            "XDG_STATE_HOME",
            "CLAUDE_CONFIG_DIR",
            "CODEX_HOME",
            "OPENCODE_CONFIG",
            "CODEX_API_KEY",
            "ANTHROPIC_AUTH_TOKEN",
            "CLAUDE_CODE_OAUTH_TOKEN",
        ] {
            command.env_remove(name);
        }
        command.envs(self.env());
    }
}

/// A project skill `tldr` (description carrying `marker`) in `work`'s install root for
/// `runtime`.
pub fn install_project_skill(work: &Path, runtime: &str, marker: &str) {
    let root = match runtime {
        "codex" => ".agents/skills",
        "opencode" => ".opencode/skill",
        _ => ".claude/skills",
    };
    crate::write(
        &work.join(root).join("tldr/SKILL.md"),
        &format!(
            "---\nname: tldr\ndescription: Summarize a text into three lines ({marker}).\n---\n\nWrite three lines.\n"
        ),
    );
}

/// Whether `tool` is on `PATH`.
pub fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}
