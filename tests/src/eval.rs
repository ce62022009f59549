//! The eval loop's end-to-end harness (tests/tests/eval_forge.rs, eval_containers.rs): a home, a
//! temp dir of skills and briefs, `eval forge` through the built binary, and readers of the
//! evidence it leaves (verdicts, the ledger).
//!
//! The scripted agent's `scripted:` directives (runners/agent/src/scripted/directive.rs) stand in
//! for the model's choices: the brief's prompt scripts the baseline's answer, the skill's SKILL.md
//! what an agent following the skill answers, and the rubric the judge's preference.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::Home;

/// The brief id of the tests.
pub const BRIEF_ID: &str = "status-reply";

/// A home and a temp dir.
pub struct Setup {
    /// The home the forge runs in.
    pub home: Home,
    /// Skills, briefs and install roots.
    pub dir: tempfile::TempDir,
}

impl Default for Setup {
    fn default() -> Self {
        Self::new()
    }
}

impl Setup {
    /// An embedded home.
    pub fn new() -> Self {
        Self {
            home: Home::embedded(),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// On `home` (e.g. a Redis one).
    pub fn on(home: Home) -> Self {
        Self {
            home,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// A path under the temp dir.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Writes a skill dir `name` with `body` after its front matter.
    pub fn skill(&self, name: &str, body: &str) -> PathBuf {
        let dir = self.path(&format!("skills/{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: Keep status replies short\n---\n{body}\n"),
        )
        .unwrap();
        dir
    }

    /// Writes the brief with extra prompt/rubric lines and a verify.
    pub fn brief(&self, id: &str, prompt_extra: &str, rubric_extra: &str, verify: &str) -> PathBuf {
        let brief = json!({
            "id": id,
            "prompt": format!("Write the team's status reply from notes.md.\nscripted: reply LONG status: here is every detail of the week, item by item, with context and caveats\n{prompt_extra}"),
            "setup": {"notes.md": "- shipped 1.2\n- fixed login\n"},
            "verify": verify,
            "rubric": format!("Which reply would the team rather read?\nscripted: prefer SHORT\n{rubric_extra}"),
            "output": "reply"
        });
        let path = self.path(&format!("{id}.json"));
        std::fs::write(&path, serde_json::to_string_pretty(&brief).unwrap()).unwrap();
        path
    }

    /// `eval forge --json` (scripted runtime unless `extra` names one; no `--brief` when `brief` is
    /// empty): (exit code, report, stderr).
    pub fn forge(&self, brief: &Path, skill: &Path, extra: &[&str]) -> (i32, Value, String) {
        self.forge_env(brief, skill, extra, &[])
    }

    /// A `PATH` holding no program at all: a runtime profile (`codex`, `opencode`) finds no CLI
    /// whatever this machine has installed, so its arms never run.
    pub fn empty_path(&self) -> String {
        let dir = self.path("empty-path");
        std::fs::create_dir_all(&dir).unwrap();
        dir.display().to_string()
    }

    /// [`Setup::forge`] with extra environment variables.
    pub fn forge_env(
        &self,
        brief: &Path,
        skill: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> (i32, Value, String) {
        let mut args: Vec<String> = ["--json", "eval", "forge", "--brief"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        if !extra.contains(&"--runtime") {
            args.splice(3..3, ["--runtime".to_owned(), "scripted".to_owned()]);
        }
        if brief.as_os_str().is_empty() {
            args.pop();
        } else {
            args.push(brief.display().to_string());
        }
        args.push("--skill-dir".into());
        args.push(skill.display().to_string());
        args.push("--install-root".into());
        args.push(self.path("agents-skills").display().to_string());
        args.extend(extra.iter().map(|s| s.to_string()));
        let out = self
            .home
            .cmd()
            .envs(env.iter().copied())
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (out.status.code().unwrap_or(-1), value, stderr)
    }

    /// The brief's run dir in the home.
    pub fn run_dir(&self, id: &str) -> PathBuf {
        self.home.path().join("eval/runs").join(id)
    }

    /// Sample `n`'s verdict, if written.
    pub fn verdict(&self, id: &str, n: u32) -> Option<Value> {
        std::fs::read_to_string(self.run_dir(id).join(format!("s{n}/verdict.json")))
            .ok()
            .map(|t| serde_json::from_str(&t).unwrap())
    }

    /// The ledger's rows.
    pub fn ledger(&self) -> Vec<Value> {
        std::fs::read_to_string(self.home.path().join("eval/ledger.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// Words in the reply ≤ 8: the short reply passes, the long one fails.
pub const VERIFY_SHORT: &str = "test \"$(wc -w < \"$FORGE_FINAL\")\" -le 8";
/// A skill whose agent answers SHORT.
pub const GOOD_SKILL: &str = "scripted: reply SHORT: shipped 1.2, fixed login";

/// Each sample's invalid code, in order.
pub fn codes(report: &Value) -> Vec<Option<String>> {
    report["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["invalid_code"].as_str().map(str::to_owned))
        .collect()
}
