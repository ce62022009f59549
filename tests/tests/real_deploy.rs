//! `eval deploy` lands a skill where each real runtime reads user-level skills (issue 31 item 8):
//! after the deploy, the user's own Claude Code, Codex and OpenCode — run directly as that user,
//! with `HOME` = the user's home, against the model API the test serves on loopback — list the
//! skill in their request to the model; and an adoption's install (a symlink into the install
//! root) is followed by each CLI when the root is its user-level directory. (skillforge's own agent
//! runs use a private home and deliberately never see deployed user-level skills; the user's CLI
//! is the one to check.)

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use skillforge_tests::Home;
use skillforge_tests::agent_user::{REAL_RUNTIMES, on_path};
use skillforge_tests::fake_model::{FakeModel, Reply, Seen};

const MARKER: &str = "DEPLOYED-TLDR-4e1c";

fn put(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A user's home with each CLI pointed at `fake` and no skill of its own.
fn user_home(fake: &FakeModel) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    put(
        &home.path().join(".codex/config.toml"),
        &format!(
            "{}\n[analytics]\nenabled = false\n\n[features]\nplugins = false\n",
            fake.codex_config()
        ),
    );
    put(
        &home.path().join(".config/opencode/opencode.json"),
        &fake.opencode_config().to_string(),
    );
    home
}

/// Runs `runtime` the way its user would, in an empty dir, as the user whose home is `home`
/// (only `PATH` from the test's environment); returns stdout and stderr.
fn run_cli(runtime: &str, home: &Path, fake: &FakeModel) -> String {
    assert!(
        on_path(runtime),
        "`{runtime}` is not on PATH: scripts/test installs it"
    );
    let work = tempfile::tempdir().unwrap();
    let mut cmd = match runtime {
        "claude" => {
            let mut c = Command::new("claude");
            c.args(["-p", "--output-format", "stream-json", "--verbose"]);
            c
        }
        "codex" => {
            let mut c = Command::new("codex");
            c.args(["exec", "--json", "--skip-git-repo-check", "-"]);
            c
        }
        _ => {
            let mut c = Command::new("opencode");
            c.args(["run", "--format", "json", "--title", "deploy check"]);
            c
        }
    };
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap())
        .env("HOME", home)
        .env("TERM", "dumb")
        .env("ANTHROPIC_BASE_URL", &fake.url)
        .env("ANTHROPIC_API_KEY", "sk-ant-fake")
        .env("OPENAI_API_KEY", "sk-fake")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .env("npm_config_offline", "true")
        .current_dir(work.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("start {runtime}: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"Summarize notes.txt.\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Whether `seen` lists the skill `tldr` the way `runtime` lists skills to the model.
fn lists_tldr(runtime: &str, seen: &Seen) -> bool {
    let text = seen.everything();
    match runtime {
        // a `role: system` entry of messages[]: `- tldr: <description>`
        "claude" => text.contains(&format!(
            "- tldr: Summarize a text into three lines ({MARKER})"
        )),
        // `<skills_instructions>`: `- tldr: <description> (file: rN/tldr/SKILL.md)`
        "codex" => {
            text.contains("<skills_instructions>")
                && text.contains(&format!(
                    "- tldr: Summarize a text into three lines ({MARKER}). (file: "
                ))
        }
        // `<available_skills>`: `<name>tldr</name>`
        _ => text.contains("<name>tldr</name>") && text.contains(MARKER),
    }
}

// Issue 31 item 8: before the deploy no runtime lists the skill; after `eval deploy` (default:
// every runtime's user-level directory) each one does. A deploy for one runtime lands only
// where that runtime reads.
#[test]
fn a_deployed_skill_is_listed_by_each_real_cli_of_the_user() {
    let fake = FakeModel::start();
    fake.respond(|_: &Seen| Reply::Text("done".into()));
    let src = tempfile::tempdir().unwrap();
    let tree = src.path().join("tldr");
    put(
        &tree.join("SKILL.md"),
        &format!(
            "---\nname: tldr\ndescription: Summarize a text into three lines ({MARKER}).\n---\n\nWrite three lines.\n"
        ),
    );
    let sf = Home::embedded();

    let user = user_home(&fake);
    for runtime in REAL_RUNTIMES {
        fake.clear();
        let out = run_cli(runtime, user.path(), &fake);
        let turns: Vec<Seen> = fake
            .requests()
            .into_iter()
            .filter(Seen::is_agent_turn)
            .collect();
        assert!(!turns.is_empty(), "{runtime}: no model request:\n{out}");
        assert!(
            !turns.iter().any(|t| lists_tldr(runtime, t)),
            "{runtime}: listed before the deploy"
        );
    }
    let mut deploy = sf.cmd();
    deploy
        .env("HOME", user.path())
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("XDG_CONFIG_HOME");
    let out = deploy
        .args(["--json", "eval", "deploy"])
        .arg(&tree)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deployed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        deployed.as_array().unwrap().len(),
        3,
        "one install per runtime directory: {deployed:#}"
    );
    for runtime in REAL_RUNTIMES {
        fake.clear();
        let out = run_cli(runtime, user.path(), &fake);
        let turns: Vec<Seen> = fake
            .requests()
            .into_iter()
            .filter(Seen::is_agent_turn)
            .collect();
        assert!(!turns.is_empty(), "{runtime}: no model request:\n{out}");
        assert!(
            turns.iter().any(|t| lists_tldr(runtime, t)),
            "{runtime}: the deployed skill is not listed to the model:\n{}",
            turns[0].everything()
        );
    }

    // `--runtime claude` installs where Claude Code reads, and nowhere else
    let only = user_home(&fake);
    let mut deploy = sf.cmd();
    deploy
        .env("HOME", only.path())
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("XDG_CONFIG_HOME");
    let out = deploy
        .args(["eval", "deploy", "--runtime", "claude"])
        .arg(&tree)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(only.path().join(".claude/skills/tldr/SKILL.md").is_file());
    assert!(
        !only.path().join(".agents/skills/tldr").exists()
            && !only.path().join(".config/opencode/skills/tldr").exists()
    );
    fake.clear();
    run_cli("claude", only.path(), &fake);
    assert!(
        fake.requests()
            .iter()
            .filter(|s| s.is_agent_turn())
            .any(|t| lists_tldr("claude", t)),
        "claude lists the skill"
    );
    let out = sf
        .cmd()
        .env("HOME", only.path())
        .args(["eval", "deploy", "--runtime", "kimi"])
        .arg(&tree)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown runtime is bad input"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("known: claude, codex, opencode"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// Issue 31 item 8, adoption: an adopted skill is installed by symlink (one copy under the
// home's `eval/installed`, a link in the install root); each real CLI follows that link when the
// root is its user-level skill directory (`install::user_skill_root`, the roots
// `InstallTarget::for_runtimes` links into). The forge runs on the scripted runtime (its arms and
// judge are not what is checked here); the user's own CLI is.
#[test]
fn an_adopted_skill_linked_into_a_runtimes_user_directory_is_listed_by_that_cli() {
    use skillforge_tests::eval::{BRIEF_ID, GOOD_SKILL, Setup, VERIFY_SHORT};
    let fake = FakeModel::start();
    fake.respond(|_: &Seen| Reply::Text("done".into()));
    for (runtime, root) in [
        ("claude", ".claude/skills"),
        ("codex", ".agents/skills"),
        ("opencode", ".config/opencode/skills"),
    ] {
        let s = Setup::new();
        let skill = s.path("skills/tldr");
        put(
            &skill.join("SKILL.md"),
            &format!(
                "---\nname: tldr\ndescription: Summarize a text into three lines ({MARKER}).\n---\n{GOOD_SKILL}\n"
            ),
        );
        let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
        let user = user_home(&fake);
        let install_root = user.path().join(root);
        let out = s
            .home
            .cmd()
            .env("HOME", user.path())
            .args([
                "--json",
                "eval",
                "forge",
                "--runtime",
                "scripted",
                "--brief",
            ])
            .arg(&brief)
            .arg("--skill-dir")
            .arg(&skill)
            .arg("--install-root")
            .arg(&install_root)
            .output()
            .unwrap();
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        assert_eq!(
            report["gate"]["decision"],
            "adopt",
            "{runtime}: {}\n{report:#}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            install_root
                .join("tldr")
                .symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink()),
            "{runtime}: installed by symlink"
        );
        fake.clear();
        let said = run_cli(runtime, user.path(), &fake);
        let turns: Vec<Seen> = fake
            .requests()
            .into_iter()
            .filter(Seen::is_agent_turn)
            .collect();
        assert!(!turns.is_empty(), "{runtime}: no model request:\n{said}");
        assert!(
            turns.iter().any(|t| lists_tldr(runtime, t)),
            "{runtime}: the adopted (symlinked) skill is not listed:\n{}",
            turns[0].everything()
        );
    }
}
