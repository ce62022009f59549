//! The eval loop's end-to-end harness (tests/tests/eval_forge.rs, eval_containers.rs): a home, a
//! temp dir of skills and briefs (a clean tie among them), `eval forge` through the built binary
//! (JSON, human, or its arguments to spawn), the HTML report, a home readied for measuring the
//! judge by A/B picks, and readers of the evidence it leaves (verdicts, the ledger).
//!
//! The scripted agent's `scripted:` directives (runners/agent/src/scripted/directive.rs) stand in
//! for the model's choices: the brief's prompt scripts the baseline's answer, the skill's SKILL.md
//! what an agent following the skill answers, and the rubric the judge's preference.

use std::path::{Path, PathBuf};
use std::process::Output;

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

    /// [`Setup::forge`] on the `opencode` runtime (arms and judge) with [`Setup::empty_path`]:
    /// no CLI is found, so the first sample's arms never run and the brief stops.
    pub fn forge_with_no_cli(&self, brief: &Path, skill: &Path) -> (i32, Value, String) {
        let path = self.empty_path();
        self.forge_env(
            brief,
            skill,
            &["--runtime", "opencode", "--judge-runtime", "opencode"],
            &[("PATH", &path)],
        )
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

    /// The arguments of a human (no `--json`) `eval forge --runtime scripted EXTRA... --brief BRIEF
    /// --skill-dir SKILL --install-root <dir>/agents-skills`, for a forge run or spawned by hand.
    ///
    /// # Panics
    /// When a path is not UTF-8 (temp dirs are).
    pub fn forge_args(&self, brief: &Path, skill: &Path, extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = ["eval", "forge", "--runtime", "scripted"]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect();
        for (flag, path) in [
            ("--brief", brief.to_path_buf()),
            ("--skill-dir", skill.to_path_buf()),
            ("--install-root", self.path("agents-skills")),
        ] {
            args.push(flag.to_owned());
            args.push(path.to_str().unwrap().to_owned());
        }
        args
    }

    /// The human `eval forge` of [`Setup::forge_args`] run to completion.
    ///
    /// # Panics
    /// When the binary cannot be run.
    pub fn forge_human(&self, brief: &Path, skill: &Path, extra: &[&str]) -> Output {
        self.home
            .cmd()
            .args(self.forge_args(brief, skill, extra))
            .output()
            .expect("run skillforge")
    }

    /// `eval report --brief ID --html <dir>/report.html`: the page's path and the command's output
    /// (not checked).
    ///
    /// # Panics
    /// When the binary cannot be run.
    pub fn report_html(&self, id: &str) -> (PathBuf, Output) {
        let page = self.path("report.html");
        let out = self.home.run(&[
            "eval",
            "report",
            "--brief",
            id,
            "--html",
            page.to_str().unwrap(),
        ]);
        (page, out)
    }

    /// A skill `tldr` whose agent answers `SHORT tie` and the brief [`BRIEF_ID`] whose judge
    /// answers a tie and whose verify always passes: a clean tie. Returns (skill, brief).
    pub fn tie(&self) -> (PathBuf, PathBuf) {
        let skill = self.skill("tldr", "scripted: reply SHORT tie");
        let brief = self.brief(
            BRIEF_ID,
            "",
            "scripted: judge-reply {\"winner\":\"tie\"}",
            "true",
        );
        (skill, brief)
    }

    /// Readies the home for measuring a judge by A/B picks under the judge gate: the `planner`
    /// template with a candidate to compare (`ab planner`), and `<home>/config.toml` with the
    /// scripted runtime as a reviewer and the gate on (`judge_kappa_floor = 0.2`,
    /// `judge_min_paired_picks = 3`).
    ///
    /// # Panics
    /// When a command fails or the config cannot be written.
    pub fn ab_judge_gate(&self) {
        crate::add_template(&self.home, crate::PLANNER_TEMPLATE, "acme/templates");
        crate::decide::import(&self.home, "Plan in numbered steps.\n", 0.8);
        std::fs::write(
            self.home.path().join("config.toml"),
            "[skillopt]\nreview_runtimes = [\"scripted\"]\njudge_kappa_floor = 0.2\njudge_min_paired_picks = 3\n",
        )
        .unwrap();
    }

    /// Measures the judge `model` of the scripted runtime by four A/B picks of `planner` (after
    /// [`Setup::ab_judge_gate`]): prompts `Plan change N<tag>` (N = 0..3) where the human picks
    /// a, b, a, b and the judge is scripted to agree; asserts each agreement.
    ///
    /// # Panics
    /// When an `ab` command fails or the judge disagrees.
    pub fn agree_by_ab(&self, model: &str, tag: &str) {
        for (round, pick) in ["a", "b", "a", "b"].iter().enumerate() {
            let prompt = format!(
                "Plan change {round}{tag}\nscripted: judge-reply {{\"pick\":\"{pick}\"}}\n"
            );
            let ab = self.home.json(&[
                "ab",
                "planner",
                &prompt,
                "--runtime",
                "scripted-b",
                "--judge",
                "--judge-model",
                model,
                "--pick",
                pick,
                "--seed",
                "3",
            ]);
            assert_eq!(ab["judge_winner"], ab["human_winner"], "{ab}");
        }
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
