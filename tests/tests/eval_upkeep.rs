//! The eval loop after the gate, through the built binary: a skill adopted by a real forge, a
//! theme mined from Claude Code project JSONL sessions and applied, the recheck's dry run, usage,
//! confirm and revoke (symlink unlinked, copy moved to revoked/, ledger row), a recheck with no
//! agent CLI anywhere on PATH, the knowledge-gap brief's self-test, backfill's backup, deploy.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use skillforge_tests::Home;

const SKILL: &str = "verbose-replies";
const FAIL: &str = "no, far too verbose - status replies need bullets";

struct World {
    home: Home,
    dir: tempfile::TempDir,
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

impl World {
    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Adopts `SKILL` with a real forge (scripted agent), installed by symlink under `agents-skills`.
    fn adopted() -> Self {
        let w = World {
            home: Home::embedded(),
            dir: tempfile::tempdir().unwrap(),
        };
        let skill = w.path(&format!("skills/{SKILL}"));
        std::fs::create_dir_all(&skill).unwrap();
        std::fs::write(skill.join("SKILL.md"), "---\nname: verbose-replies\ndescription: Keep status replies short\n---\nscripted: reply SHORT: shipped 1.2\n").unwrap();
        let brief = w.path("brief.json");
        std::fs::write(
            &brief,
            json!({"id": "b", "prompt": "Write the status reply.\nscripted: reply LONG status with every detail of the week, one by one",
                   "verify": "test \"$(wc -w < \"$FORGE_FINAL\")\" -le 8", "rubric": "Better?\nscripted: prefer SHORT", "output": "reply"})
            .to_string(),
        )
        .unwrap();
        let out = w.home.run(&[
            "eval",
            "forge",
            "--runtime",
            "scripted",
            "--brief",
            s(&brief),
            "--skill-dir",
            s(&skill),
            "--install-root",
            s(&w.path("agents-skills")),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(w.path(&format!("agents-skills/{SKILL}")).exists());
        w
    }

    fn ledger(&self) -> Vec<Value> {
        std::fs::read_to_string(self.home.path().join("eval/ledger.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Seconds since the epoch of the adoption row.
    fn adopted_at(&self) -> i64 {
        let at = self.ledger()[0]["at"].as_str().unwrap().to_owned();
        let out = std::process::Command::new("date")
            .args(["-u", "-d", &at, "+%s"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    }

    /// Writes Claude Code project sessions: 10 before adoption (8 corrected about the theme), 10
    /// after (`after_fail` corrected, each loading the skill once), 40 older ones corrected about
    /// something else.
    fn corpus(&self, after_fail: usize) -> PathBuf {
        let root = self.path("claude-projects/-home-u-proj");
        std::fs::create_dir_all(&root).unwrap();
        let t = self.adopted_at();
        let mut k = 0;
        let mut session = |start: i64, last: &str, load: bool| {
            k += 1;
            let id = format!("sess-{k}");
            let ts = |d: i64| rfc3339(start + d);
            let mut assistant = vec![json!({"type": "text", "text": "Here is the update."})];
            if load {
                assistant.push(json!({"type": "tool_use", "id": "t1", "name": "Skill", "input": {"skill": SKILL}}));
            }
            let lines = [
                json!({"type": "user", "sessionId": id, "timestamp": ts(0), "message": {"role": "user", "content": "write the weekly status"}}),
                json!({"type": "assistant", "sessionId": id, "timestamp": ts(1), "message": {"role": "assistant", "content": assistant}}),
                json!({"type": "user", "sessionId": id, "timestamp": ts(2), "message": {"role": "user", "content": last}}),
                json!({"type": "assistant", "sessionId": id, "timestamp": ts(3), "message": {"role": "assistant", "content": [{"type": "text", "text": "Fixed."}]}}),
            ];
            std::fs::write(
                root.join(format!("{id}.jsonl")),
                lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
            )
            .unwrap();
        };
        for i in 0..10 {
            session(
                t - 10 * 86400 + i * 3600,
                if i < 8 { FAIL } else { "thanks, ship it" },
                false,
            );
        }
        for i in 0..10 {
            session(
                t + 3600 + i * 3600,
                if (i as usize) < after_fail {
                    FAIL
                } else {
                    "thanks, ship it"
                },
                true,
            );
        }
        for i in 0..40 {
            session(
                t - 30 * 86400 + i * 3600,
                "no, use the other folder for the release notes",
                false,
            );
        }
        self.path("claude-projects")
    }

    fn now_after(&self, days: i64) -> String {
        rfc3339(self.adopted_at() + days * 86400)
    }

    fn run(&self, args: &[&str]) -> (i32, String, String) {
        let out = self.home.run(args);
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

fn rfc3339(secs: i64) -> String {
    let out = std::process::Command::new("date")
        .args(["-u", "-d", &format!("@{secs}"), "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

// Issue 35 item 5: a theme that finds nothing says where it looked (each source's directory and
// how many session files it read) and which flags point elsewhere; `eval recheck` on no sessions
// says the same on stderr.
#[test]
fn a_theme_without_sessions_says_where_it_looked() {
    let w = World::adopted();
    let empty = w.home.path().join("no-sessions");
    std::fs::create_dir_all(&empty).unwrap();
    let missing = w.home.path().join("missing");
    let (code, out, err) = w.run(&[
        "eval",
        "theme",
        "--skill",
        SKILL,
        "--sources",
        "claude,codex",
        "--claude-dir",
        s(&empty),
        "--codex-dir",
        s(&missing),
    ]);
    assert_eq!(code, 1, "{out}{err}");
    let looked = format!(
        "read 0 sessions from claude {} (0 files), codex {} (no such directory)",
        empty.display(),
        missing.display()
    );
    assert!(
        out.contains("no theme") && out.contains(&looked),
        "{out}{err}"
    );
    assert!(out.contains("--claude-dir"), "{out}");
    let (_, out, err) = w.run(&[
        "eval",
        "recheck",
        "--dry-run",
        "--sources",
        "claude",
        "--claude-dir",
        s(&empty),
    ]);
    assert!(
        err.contains(&format!(
            "no agent sessions found in claude {} (0 files)",
            empty.display()
        )),
        "{out}{err}"
    );
}

// E-39, E-21, E-19, E-31: theme applied, dry run decides nothing, then the recheck confirms.
#[test]
fn e21_theme_then_dry_run_then_recheck_confirms() {
    let w = World::adopted();
    let corpus = w.corpus(1);
    let (code, out, err) = w.run(&[
        "eval",
        "theme",
        "--skill",
        SKILL,
        "--apply",
        "--sources",
        "claude",
        "--claude-dir",
        s(&corpus),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let sig = &w.ledger()[0]["signature"];
    assert!(
        sig["derived_from"]
            .as_str()
            .unwrap()
            .starts_with("corrections:"),
        "{sig}"
    );
    assert!(
        sig["words"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x == "verbose"),
        "{sig}"
    );
    let backups = std::fs::read_dir(w.home.path().join("eval"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains(".bak-")
        })
        .count();
    assert_eq!(backups, 1, "the ledger is backed up before it is rewritten");
    let now = w.now_after(15);
    let before = std::fs::read_to_string(w.home.path().join("eval/ledger.jsonl")).unwrap();
    let (code, out, err) = w.run(&[
        "eval",
        "recheck",
        "--dry-run",
        "--now",
        &now,
        "--sources",
        "claude",
        "--claude-dir",
        s(&corpus),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("[dry-run]")
            && out.contains("adopt-confirmed")
            && out.contains("loaded 10 times"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(w.home.path().join("eval/ledger.jsonl")).unwrap(),
        before,
        "--dry-run writes nothing"
    );
    let (_, usage, _) = w.run(&[
        "eval",
        "recheck",
        "--usage",
        "--now",
        &now,
        "--sources",
        "claude",
        "--claude-dir",
        s(&corpus),
    ]);
    assert!(
        usage.contains(&format!("10 loads since")) && usage.contains(SKILL),
        "{usage}"
    );
    let (code, out, err) = w.run(&[
        "eval",
        "recheck",
        "--now",
        &now,
        "--sources",
        "claude",
        "--claude-dir",
        s(&corpus),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("adopt-confirmed"), "{out}");
    let rows = w.ledger();
    assert_eq!(rows.last().unwrap()["decision"], "adopt-confirmed");
    assert_eq!(rows.last().unwrap()["loads"], 10);
    assert!(
        w.path(&format!("agents-skills/{SKILL}/SKILL.md")).is_file(),
        "a confirmed skill stays installed"
    );
}

// E-19, E-22: no drop revokes — symlink unlinked, copy moved to revoked/, ledger row — with no
// agent CLI (nor anything else) on PATH.
#[test]
fn e22_recheck_revokes_without_any_model_or_agent_cli() {
    let w = World::adopted();
    let corpus = w.corpus(3);
    let (code, out, err) = w.run(&[
        "eval",
        "theme",
        "--skill",
        SKILL,
        "--apply",
        "--sources",
        "claude",
        "--claude-dir",
        s(&corpus),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let now = w.now_after(15);
    let out = w
        .home
        .cmd()
        .env("PATH", "")
        .args([
            "eval",
            "recheck",
            "--now",
            &now,
            "--sources",
            "claude",
            "--claude-dir",
            s(&corpus),
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("revoked"), "{stdout}");
    assert!(
        w.path(&format!("agents-skills/{SKILL}"))
            .symlink_metadata()
            .is_err(),
        "symlink unlinked"
    );
    assert!(
        w.home
            .path()
            .join(format!("eval/revoked/{SKILL}/SKILL.md"))
            .is_file(),
        "copy moved to revoked/"
    );
    assert_eq!(w.ledger().last().unwrap()["decision"], "revoked");
}

// E-01, E-02: the knowledge-gap brief is written only when its verify passes good and fails bad.
#[test]
fn e01_knowledge_gap_brief_needs_its_verify_self_test() {
    let w = World {
        home: Home::embedded(),
        dir: tempfile::tempdir().unwrap(),
    };
    let draft = |verify: &str, fixture: &str| {
        json!({"brief": {"id": "kg", "prompt": "Reply to the thread in thread.txt.", "setup": {"thread.txt": fixture},
                         "verify": verify, "rubric": "Better?", "output": "reply"},
               "rules": ["never say synergy"], "good_example": "Thanks, shipping Friday.", "bad_example": "Great synergy, shipping Friday."})
    };
    let write = |name: &str, v: Value| {
        let p = w.path(name);
        std::fs::write(&p, v.to_string()).unwrap();
        p
    };
    let good = write(
        "good.json",
        draft(
            "! grep -qi synergy \"$FORGE_FINAL\"",
            "Ana: can we ship Friday?",
        ),
    );
    let out = w.path("brief.json");
    let (code, _, err) = w.run(&[
        "eval",
        "brief",
        "--knowledge-gap",
        "--draft",
        s(&good),
        "--out",
        s(&out),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.is_file());
    let weak = write("weak.json", draft("true", "Ana: can we ship Friday?"));
    let out2 = w.path("brief2.json");
    let (code, _, err) = w.run(&[
        "eval",
        "brief",
        "--knowledge-gap",
        "--draft",
        s(&weak),
        "--out",
        s(&out2),
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("passes the bad example") && !out2.exists(),
        "{err}"
    );
    let leaky = write(
        "leaky.json",
        draft(
            "! grep -qi synergy \"$FORGE_FINAL\"",
            "Boss: never say synergy",
        ),
    );
    let (code, _, err) = w.run(&[
        "eval",
        "brief",
        "--knowledge-gap",
        "--draft",
        s(&leaky),
        "--out",
        s(&out2),
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("setup file `thread.txt`") && !out2.exists(),
        "{err}"
    );
}

// E-34: backfill --apply backs the ledger up and tags skill_md; the recheck then refuses it on sight.
#[test]
fn e34_backfill_then_recheck_refuses_the_lifted_signature() {
    let w = World::adopted();
    let (code, out, err) = w.run(&["eval", "backfill", "--apply"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        w.ledger()[0]["signature"]["derived_from"]
            .as_str()
            .unwrap()
            .starts_with("skill_md:")
    );
    let corpus = w.corpus(1);
    let (_, out, _) = w.run(&[
        "eval",
        "recheck",
        "--now",
        &w.now_after(15),
        "--sources",
        "claude",
        "--claude-dir",
        s(&corpus),
    ]);
    assert!(
        out.contains("SKIP") && out.contains("refused on sight"),
        "{out}"
    );
}

// E-40
#[test]
fn e40_deploy_copies_and_verifies_by_digest() {
    let w = World {
        home: Home::embedded(),
        dir: tempfile::tempdir().unwrap(),
    };
    let tree = w.path("checkout/tldr");
    std::fs::create_dir_all(tree.join("refs")).unwrap();
    std::fs::write(tree.join("SKILL.md"), "# tldr").unwrap();
    std::fs::write(tree.join("refs/a.md"), "a").unwrap();
    let (code, out, err) = w.run(&["eval", "deploy", "--root", s(&w.path("root")), s(&tree)]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("sha256:") && w.path("root/tldr/refs/a.md").is_file(),
        "{out}"
    );
}

// E-40: with no tree named, deploy ships the ledger's open adoptions (their installed copies),
// and refuses to replace the symlink an adoption installed.
#[test]
fn e40_deploy_without_trees_ships_the_open_adoptions() {
    let w = World::adopted();
    let (code, out, err) = w.run(&["eval", "deploy", "--root", s(&w.path("laptop-skills"))]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        w.path(&format!("laptop-skills/{SKILL}/SKILL.md")).is_file() && out.contains("sha256:"),
        "{out}"
    );
    let (code, _, err) = w.run(&["eval", "deploy", "--root", s(&w.path("agents-skills"))]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("is a symlink")
            && w.path(&format!("agents-skills/{SKILL}"))
                .symlink_metadata()
                .unwrap()
                .file_type()
                .is_symlink(),
        "{err}"
    );
}

// E-01, E-02 for a brief drafted by a model: `eval brief --knowledge-gap --theme` has the
// scripted runtime (through the real agent runner, as an `agent` job) draft from a correction
// theme; the theme's corrections script the model's answer. A draft that puts a rule in a fixture,
// or whose verify passes the bad example, writes nothing; a clean one is written and its prompt
// and fixtures hold none of the theme's rules.
#[test]
fn e02_brief_drafted_by_a_model_from_a_theme_keeps_the_rules_out() {
    let w = World {
        home: Home::embedded(),
        dir: tempfile::tempdir().unwrap(),
    };
    let rules = ["never say synergy", "sign off with the ship date"];
    let theme = |name: &str, verify: &str, fixture: &str| {
        let draft = json!({"brief": {"id": name, "prompt": "Reply to Ana's question in thread.txt.", "setup": {"thread.txt": fixture},
                                     "verify": verify, "rubric": "Which reply would Ana rather get?", "output": "reply"},
                           "rules": [], "good_example": "Thanks Ana, shipping Friday.", "bad_example": "Great synergy, let's align."});
        let p = w.path(&format!("{name}.theme.json"));
        let corrections = [format!("no, drop the buzzwords\nscripted: reply {draft}")];
        std::fs::write(
            &p,
            json!({"name": name, "rules": rules, "corrections": corrections}).to_string(),
        )
        .unwrap();
        p
    };
    let verify = "! grep -qi synergy \"$FORGE_FINAL\" && grep -q Friday \"$FORGE_FINAL\"";
    let brief_out = |name: &str| w.path(&format!("{name}.brief.json"));
    let draft = |theme: &Path, out: &Path| {
        w.run(&[
            "eval",
            "brief",
            "--knowledge-gap",
            "--runtime",
            "scripted",
            "--theme",
            s(theme),
            "--out",
            s(out),
        ])
    };

    let leaky = theme(
        "leaky",
        verify,
        "Ana: can we ship Friday? Boss: never say synergy",
    );
    let (code, _, err) = draft(&leaky, &brief_out("leaky"));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("never say synergy")
            && err.contains("setup file `thread.txt`")
            && !brief_out("leaky").exists(),
        "{err}"
    );

    let weak = theme("weak", "true", "Ana: can we ship Friday?");
    let (code, _, err) = draft(&weak, &brief_out("weak"));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("passes the bad example") && !brief_out("weak").exists(),
        "{err}"
    );

    let clean = theme("clean", verify, "Ana: can we ship Friday?");
    let (code, _, err) = draft(&clean, &brief_out("clean"));
    assert_eq!(code, 0, "{err}");
    let brief: Value =
        serde_json::from_str(&std::fs::read_to_string(brief_out("clean")).unwrap()).unwrap();
    let texts: Vec<String> = std::iter::once(brief["prompt"].as_str().unwrap().to_lowercase())
        .chain(
            brief["setup"]
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_str().unwrap().to_lowercase()),
        )
        .collect();
    for rule in rules {
        assert!(
            texts.iter().all(|t| !t.contains(rule)),
            "rule {rule:?} leaked into {texts:?}"
        );
    }
    let jobs = w.home.json(&["jobs", "list"]);
    let drafts = jobs
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["workflow"] == "evalloop" && j["stage"] == "draft" && j["kind"] == "agent")
        .count();
    assert_eq!(drafts, 3, "one agent job per theme: {jobs:#}");
}

// Issue 12 item 7 through the binary: a brief, a knowledge-gap draft, a theme and a session file
// nested 100 000 levels deep are each refused at once by the parser limits (exit 2, the file
// named, the limit stated), and nothing is written.
#[test]
fn deeply_nested_inputs_are_refused_naming_the_file() {
    let w = World {
        home: Home::embedded(),
        dir: tempfile::tempdir().unwrap(),
    };
    let deep = w.path("deep.json");
    std::fs::write(&deep, "[".repeat(100_000)).unwrap();
    let corpus_root = w.path("corpus");
    let corpus = corpus_root.join("proj");
    std::fs::create_dir_all(&corpus).unwrap();
    let session = corpus.join("s.jsonl");
    std::fs::write(&session, format!("{{}}\n{}\n", "{\"a\":".repeat(100_000))).unwrap();
    let out = w.path("out.json");
    let skill = w.path("skills/x");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(skill.join("SKILL.md"), "# x").unwrap();
    let cases: Vec<(Vec<&str>, &Path)> = vec![
        (vec!["eval", "brief", "--check", s(&deep)], &deep),
        (
            vec![
                "eval",
                "brief",
                "--knowledge-gap",
                "--draft",
                s(&deep),
                "--out",
                s(&out),
            ],
            &deep,
        ),
        (
            vec![
                "eval",
                "brief",
                "--knowledge-gap",
                "--runtime",
                "scripted",
                "--theme",
                s(&deep),
                "--out",
                s(&out),
            ],
            &deep,
        ),
        (
            vec![
                "eval",
                "forge",
                "--runtime",
                "scripted",
                "--brief",
                s(&deep),
                "--skill-dir",
                s(&skill),
                "--install-root",
                s(&out),
            ],
            &deep,
        ),
        (
            vec![
                "eval",
                "recheck",
                "--dry-run",
                "--sources",
                "claude",
                "--claude-dir",
                s(&corpus_root),
            ],
            &session,
        ),
    ];
    for (args, file) in cases {
        let (code, _, err) = w.run(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains(&file.display().to_string()) && err.contains("64 levels"),
            "{args:?}: {err}"
        );
        assert!(!out.exists(), "{args:?} wrote something");
    }
}

/// A Claude Code project session of four turns starting `start` (epoch seconds): a request, an
/// answer, `correction`, an answer.
fn claude_session(root: &Path, id: &str, start: i64, correction: &str) {
    let ts = |d: i64| rfc3339(start + d);
    let lines = [
        json!({"type": "user", "sessionId": id, "timestamp": ts(0), "message": {"role": "user", "content": "write the weekly status"}}),
        json!({"type": "assistant", "sessionId": id, "timestamp": ts(1), "message": {"role": "assistant", "content": [{"type": "text", "text": "Here is the update."}]}}),
        json!({"type": "user", "sessionId": id, "timestamp": ts(2), "message": {"role": "user", "content": correction}}),
        json!({"type": "assistant", "sessionId": id, "timestamp": ts(3), "message": {"role": "assistant", "content": [{"type": "text", "text": "Fixed."}]}}),
    ];
    std::fs::create_dir_all(root).unwrap();
    std::fs::write(
        root.join(format!("{id}.jsonl")),
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap();
}

// E-35..E-39 into the forge: `eval theme --skill-dir` mines a candidate's correction theme from
// Claude Code project sessions (episodes found without a model, words ranked by within-theme
// document frequency, stopwords dropped, the absolute floor keeping one-off words out) and writes
// the theme file `eval forge --mode corrections` reads: the skill's own rule lines the theme
// matches, the corrections it matches, and the signature. The forge drafts the knowledge-gap brief
// from it (the scripted model's answer rides in one real correction, as a model's would come
// from reading them), runs it and adopts; the adoption's ledger row carries the mined signature,
// so its recheck measures the skill by the theme it was forged for.
#[test]
fn e35_theme_mined_from_sessions_feeds_the_forge_and_rides_onto_the_ledger_row() {
    let w = World {
        home: Home::embedded(),
        dir: tempfile::tempdir().unwrap(),
    };
    let skill = w.path("skills/status-bullets");
    std::fs::create_dir_all(&skill).unwrap();
    let rules = [
        "Status replies use bullets, never long paragraphs.",
        "Keep status bullets under eight words.",
    ];
    std::fs::write(
        skill.join("SKILL.md"),
        format!("---\nname: status-bullets\ndescription: Format weekly status updates for the team\n---\n# How\nscripted: reply SHORT: shipped 1.2, fixed login\n- {}\n- {}\n", rules[0], rules[1]),
    )
    .unwrap();
    let draft = json!({"brief": {"id": "status-bullets-kg",
                                 "prompt": "Write the team's status reply from notes.md.\nscripted: reply LONG status: here is every detail of the week, item by item, with context and caveats",
                                 "setup": {"notes.md": "- shipped 1.2\n- fixed login\n"},
                                 "verify": "test \"$(wc -w < \"$FORGE_FINAL\")\" -le 8",
                                 "rubric": "Which reply would the team rather read?\nscripted: prefer SHORT", "output": "reply"},
                       "rules": [], "good_example": "shipped 1.2, fixed login", "bad_example": "here is every detail of the week, item by item, with context and caveats"});
    // One line for the scripted model: JSON newlines as \u000a, which its `\n` unescaping leaves alone.
    let answer = draft.to_string().replace("\\n", "\\u000a");
    let root = w.path("claude-projects/-home-u-proj");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let theme_fix = "no, far too verbose - status replies need bullets, not paragraphs";
    for i in 0..8 {
        let text = if i == 0 {
            format!("{theme_fix}\nscripted: reply {answer}")
        } else {
            theme_fix.to_owned()
        };
        claude_session(
            &root,
            &format!("theme-{i}"),
            now - 20 * 86400 + i * 3600,
            &text,
        );
    }
    for i in 0..30 {
        claude_session(
            &root,
            &format!("other-{i}"),
            now - 30 * 86400 + i * 3600,
            "no, use the other folder for the release notes",
        );
    }
    let theme_file = w.path("status.theme.json");
    let corpus = w.path("claude-projects");
    let (code, out, err) = w.run(&[
        "eval",
        "theme",
        "--skill-dir",
        s(&skill),
        "--out",
        s(&theme_file),
        "--sources",
        "claude",
        "--claude-dir",
        s(&corpus),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let theme: Value =
        serde_json::from_str(&std::fs::read_to_string(&theme_file).unwrap()).unwrap();
    let words: Vec<&str> = theme["signature"]["words"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(
        words,
        [
            "bullets",
            "far",
            "paragraphs",
            "replies",
            "status",
            "verbose"
        ],
        "within-theme document frequency over the floor, no stopword, no one-off word: {theme:#}"
    );
    assert_eq!(theme["signature"]["derived_from"], "corrections:8");
    assert_eq!(
        theme["rules"],
        json!(rules),
        "the skill's own rule lines the theme matches: {theme:#}"
    );
    assert_eq!(
        theme["corrections"].as_array().unwrap().len(),
        2,
        "the matched corrections, verbatim and deduplicated: {theme:#}"
    );
    assert!(
        theme["corrections"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c.as_str().unwrap().starts_with(theme_fix)),
        "{theme:#}"
    );

    let out = w.home.run(&[
        "--json",
        "eval",
        "forge",
        "--mode",
        "corrections",
        "--theme",
        s(&theme_file),
        "--skill-dir",
        s(&skill),
        "--runtime",
        "scripted",
        "--install-root",
        s(&w.path("agents-skills")),
    ]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{report:#}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(report["gate"]["decision"], "adopt", "{report:#}");
    let brief: Value = serde_json::from_str(
        &std::fs::read_to_string(w.home.path().join("eval/briefs/status-bullets-kg.json")).unwrap(),
    )
    .unwrap();
    for rule in rules {
        assert!(
            !brief.to_string().contains(rule),
            "E-02: {rule:?} is in the brief: {brief:#}"
        );
    }
    let rows = w.ledger();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["decision"], "adopt");
    assert_eq!(
        rows[0]["signature"], theme["signature"],
        "the adoption carries the mined theme: {:#}",
        rows[0]
    );
}
