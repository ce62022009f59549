//! Scripted behaviours: `scripted:` directive lines that make the scripted agent act like an agent
//! CLI in a work directory (skills found on disk, loaded or passed over, files written, a chosen
//! exit code, silence, a slow answer), so eval-loop tests can produce every arm behaviour through
//! the real agent runner.
//!
//! A directive is a line `scripted: KEY [VALUE]`, or `scripted@N: KEY [VALUE]` which applies only
//! when the environment variable [`SAMPLE_ENV`] is `N`. Directives are read from the prompt and
//! from the `SKILL.md` of every skill the agent loads (a skill's directives are what "following
//! the skill" does; they win over the prompt's). Keys:
//!
//! | key | value | effect |
//! |---|---|---|
//! | `reply` | text (`\n` escapes) | the final message |
//! | `write` | `PATH TEXT` | writes TEXT (`\n` escapes) to PATH under the work dir |
//! | `delete` | `PATH` | removes the file PATH under the work dir (after the writes; a missing file is no error) |
//! | `exit` | code | exit code after the transcript is written |
//! | `stderr` | text | a line on stderr (the runner's recorded error), written before any `sleep` |
//! | `silent` | — | no transcript at all (nothing on stdout) |
//! | `sleep` | milliseconds | sleep before answering |
//! | `no-load` | — | offered skills are not loaded (in a `SKILL.md`: that skill is passed over) |
//! | `tool-errors` | n | n `tool_error` lines in the transcript |
//! | `usage` | `INPUT OUTPUT [COST_USD]` | a `usage` line in the transcript: tokens (and cost) the run reports, as a real CLI's transcript does |
//! | `offer` | name | the harness also advertises this skill (an ambient install: offered, not on disk, not loaded) |
//! | `prefer` | text | judge: pick the slot (`### A` / `### B` sections) whose text contains it; a tie when both or neither do; no assessment (`"assessed": false`) when both slots hold the same text |
//! | `judge-reply` | text | judge: the reply, verbatim (a judge task ignores `reply`, which the arms' task text carries) |
//! | `effects` | `PATH LABEL` | appends `start LABEL PID` when the run starts and `end LABEL PID` when it ends to the file at the absolute PATH (a test's record of which runs overlapped) |
//! | `wait-for` | path | waits, after `start` is written, until the absolute path exists (at most [`WAIT_FOR_BOUND`]; then exit 1) |
//!
//! Skills are discovered, when the prompt has no `skills:` header, as the directories holding a
//! `SKILL.md` under the work dir's [`SKILL_ROOTS`]: what Claude Code, Codex and OpenCode read.

use std::path::{Path, PathBuf};

/// Environment variable naming the sample number a `scripted@N:` directive is tied to.
pub const SAMPLE_ENV: &str = "FORGE_SAMPLE";

/// Skill install roots under a work dir, in discovery order.
pub const SKILL_ROOTS: [&str; 4] = [
    ".claude/skills",
    ".agents/skills",
    ".opencode/skill",
    ".opencode/skills",
];

/// The longest a `wait-for` directive waits for its file.
pub const WAIT_FOR_BOUND: std::time::Duration = std::time::Duration::from_secs(120);

/// The directives in effect for one run (later sources override earlier ones, key by key).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Directives {
    /// `reply`.
    pub reply: Option<String>,
    /// `write` entries: (relative path, text).
    pub writes: Vec<(String, String)>,
    /// `delete` entries: relative paths.
    pub deletes: Vec<String>,
    /// `exit`.
    pub exit_code: Option<u8>,
    /// `stderr`.
    pub stderr: Option<String>,
    /// `silent`.
    pub silent: bool,
    /// `sleep`, milliseconds.
    pub sleep_ms: Option<u64>,
    /// `no-load`.
    pub no_load: bool,
    /// `tool-errors`.
    pub tool_errors: u32,
    /// `usage`: (input tokens, output tokens, cost in US dollars if given, as written: a
    /// number).
    pub usage: Option<(u64, u64, Option<String>)>,
    /// `prefer`.
    pub prefer: Option<String>,
    /// `judge-reply`.
    pub judge_reply: Option<String>,
    /// `options-reply`: the verbatim answer of an option-generation task.
    pub options_reply: Option<String>,
    /// `offer` names.
    pub offers: Vec<String>,
    /// `effects`: (absolute path, label).
    pub effects: Option<(String, String)>,
    /// `wait-for`: an absolute path.
    pub wait_for: Option<String>,
}

impl Directives {
    /// Reads the directives of `text` that apply to `sample` and merges them over `self`.
    pub fn merge_from(&mut self, text: &str, sample: Option<&str>) {
        for line in text.lines().map(str::trim) {
            let Some((head, rest)) = line.split_once(':') else {
                continue;
            };
            let applies = match head.strip_prefix("scripted") {
                Some("") => true,
                Some(tail) => tail
                    .strip_prefix('@')
                    .is_some_and(|n| Some(n.trim()) == sample),
                None => false,
            };
            if !applies {
                continue;
            }
            let rest = rest.trim();
            let (key, value) = rest
                .split_once(' ')
                .map_or((rest, ""), |(k, v)| (k, v.trim()));
            let unescape = |v: &str| v.replace("\\n", "\n");
            match key {
                "reply" => self.reply = Some(unescape(value)),
                "write" => {
                    if let Some((path, text)) = value.split_once(' ') {
                        self.writes.push((path.to_string(), unescape(text)));
                    }
                }
                "delete" if !value.is_empty() => self.deletes.push(value.to_string()),
                "exit" => self.exit_code = value.parse().ok(),
                "stderr" => self.stderr = Some(unescape(value)),
                "silent" => self.silent = true,
                "sleep" => self.sleep_ms = value.parse().ok(),
                "no-load" => self.no_load = true,
                "tool-errors" => self.tool_errors = value.parse().unwrap_or(0),
                "usage" => {
                    let mut parts = value.split_whitespace();
                    let input = parts.next().and_then(|n| n.parse().ok());
                    let output = parts.next().and_then(|n| n.parse().ok());
                    let cost = parts
                        .next()
                        .filter(|n| n.parse::<f64>().is_ok_and(f64::is_finite))
                        .map(str::to_owned);
                    self.usage = input.zip(output).map(|(i, o)| (i, o, cost));
                }
                "prefer" => self.prefer = Some(value.to_string()),
                "judge-reply" => self.judge_reply = Some(unescape(value)),
                "options-reply" => self.options_reply = Some(unescape(value)),
                "offer" => self.offers.push(value.to_string()),
                "effects" => {
                    self.effects = value
                        .split_once(' ')
                        .map(|(p, l)| (p.to_owned(), l.trim().to_owned()))
                }
                "wait-for" => self.wait_for = Some(value.to_string()),
                _ => {}
            }
        }
    }

    /// Whether `text` holds a `no-load` directive for `sample`.
    pub fn says_no_load(text: &str, sample: Option<&str>) -> bool {
        let mut d = Directives::default();
        d.merge_from(text, sample);
        d.no_load
    }
}

/// A skill found in a work dir: its name (directory name) and its `SKILL.md` text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundSkill {
    /// Directory name.
    pub name: String,
    /// Path of its `SKILL.md`.
    pub path: PathBuf,
    /// Its text (empty when unreadable).
    pub text: String,
}

/// Skills under `workdir`'s [`SKILL_ROOTS`], deduplicated by name in discovery order.
pub fn discover_skills(workdir: &Path) -> Vec<FoundSkill> {
    let mut found: Vec<FoundSkill> = Vec::new();
    for root in SKILL_ROOTS {
        let Ok(entries) = std::fs::read_dir(workdir.join(root)) else {
            continue;
        };
        let mut names: Vec<(String, PathBuf)> = entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let path = e.path().join("SKILL.md");
                path.is_file()
                    .then(|| (e.file_name().to_string_lossy().into_owned(), path))
            })
            .collect();
        names.sort();
        for (name, path) in names {
            if !found.iter().any(|s| s.name == name) {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                found.push(FoundSkill { name, path, text });
            }
        }
    }
    found
}

/// How a `prefer` needle reads the two slots of a judge prompt ([`judge_preference`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preference {
    /// Only this slot (`"a"` or `"b"`) contains the needle.
    Slot(&'static str),
    /// Both slots contain it, and their texts differ: a tie.
    Both,
    /// Neither slot contains it: a tie.
    Neither,
    /// Both slots hold the same text: there is nothing to prefer (an assessment is impossible).
    SameText,
}

/// The text of each slot (`### A` / `### B` sections) of a judge prompt, `None` for a slot the
/// prompt lacks. Only a slot header starts a section: a `###` heading inside an answer (a Markdown
/// answer's `### Fixed`) or inside a `~~~~` fence is the answer's text. The last slot ends at an
/// unfenced `Reply as …` line (the answer-format instruction the prompt closes with).
pub fn slot_texts(prompt: &str) -> [Option<String>; 2] {
    let mut current: Option<usize> = None;
    let mut texts: [Option<String>; 2] = [None, None];
    let mut fenced = false;
    for line in prompt.lines() {
        if line.trim_start().starts_with("~~~~") {
            fenced = !fenced;
        }
        let head = line.trim().to_ascii_lowercase();
        if !fenced {
            if let Some(rest) = head.strip_prefix("###") {
                let slot = match rest.trim().trim_start_matches("slot").trim() {
                    "a" => Some(0),
                    "b" => Some(1),
                    _ => None,
                };
                if let Some(idx) = slot {
                    current = Some(idx);
                    texts[idx] = Some(String::new());
                    continue;
                }
            }
            if current == Some(1) && head.starts_with("reply as ") {
                current = None;
            }
        }
        if let Some(idx) = current
            && let Some(text) = texts[idx].as_mut()
        {
            text.push_str(line);
            text.push('\n');
        }
    }
    texts
}

/// How `needle` reads the slots of `prompt` ([`slot_texts`]): two slots of the same text are
/// [`Preference::SameText`] whatever the needle.
pub fn judge_preference(prompt: &str, needle: &str) -> Preference {
    let [a, b] = slot_texts(prompt);
    let (a, b) = (a.unwrap_or_default(), b.unwrap_or_default());
    if a.trim() == b.trim() && !a.trim().is_empty() {
        return Preference::SameText;
    }
    match (a.contains(needle), b.contains(needle)) {
        (true, false) => Preference::Slot("a"),
        (false, true) => Preference::Slot("b"),
        (true, true) => Preference::Both,
        (false, false) => Preference::Neither,
    }
}

/// The slot (`"a"` or `"b"`) whose `### A` / `### B` section of `prompt` contains `needle`;
/// `None` when both or neither do, or both hold the same text ([`judge_preference`]).
pub fn preferred_slot(prompt: &str, needle: &str) -> Option<&'static str> {
    match judge_preference(prompt, needle) {
        Preference::Slot(slot) => Some(slot),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_apply_by_sample_and_override_in_order() {
        let mut d = Directives::default();
        d.merge_from(
            "scripted: reply one\nscripted@2: reply two\nscripted@3: exit 124\nplain: x",
            Some("2"),
        );
        assert_eq!(d.reply.as_deref(), Some("two"));
        assert_eq!(d.exit_code, None);
        d.merge_from(
            "scripted: write out/a.txt line1\\nline2\nscripted: no-load",
            None,
        );
        assert_eq!(
            d.writes,
            vec![("out/a.txt".to_string(), "line1\nline2".to_string())]
        );
        assert!(d.no_load);
        d.merge_from("scripted: delete notes.md\nscripted: delete", None);
        assert_eq!(
            d.deletes,
            vec!["notes.md".to_string()],
            "a `delete` without a path is ignored"
        );
        assert!(!Directives::says_no_load("scripted@1: no-load", Some("2")));
    }

    #[test]
    fn preferred_slot_reads_sections() {
        let markdown = "### A\n### Fixed\n- GOOD login\n### B\n### Fixed\n- meh\n";
        assert_eq!(
            preferred_slot(markdown, "GOOD"),
            Some("a"),
            "a heading inside an answer is the answer's text"
        );
        let prompt = "rubric\nscripted: prefer GOOD\n### A\nmeh\n### B\nthis is GOOD\n";
        assert_eq!(preferred_slot(prompt, "GOOD"), Some("b"));
        assert_eq!(
            preferred_slot("### Slot A\nGOOD\n### Slot B\nGOOD", "GOOD"),
            None
        );
        for (prompt, expected) in [
            ("### A\nGOOD one\n### B\nGOOD two\n", Preference::Both),
            ("### A\none\n### B\ntwo\n", Preference::Neither),
            (
                "### A\nsame GOOD\n### B\nsame GOOD\nReply as one JSON object only\n",
                Preference::SameText,
            ),
            (
                "### A\n~~~~\nsame\n~~~~\n### B\n~~~~\nsame\n~~~~\n\nReply as JSON\n",
                Preference::SameText,
            ),
            (
                "### A\nGOOD\n### B\nbad\nReply as GOOD\n",
                Preference::Slot("a"),
            ),
        ] {
            assert_eq!(judge_preference(prompt, "GOOD"), expected, "{prompt:?}");
        }
    }

    #[test]
    fn skills_are_discovered_in_every_root() {
        let dir = tempfile::tempdir().unwrap();
        for (root, name) in [
            (".claude/skills", "x"),
            (".agents/skills", "y"),
            (".opencode/skill", "x"),
        ] {
            let skill = dir.path().join(root).join(name);
            std::fs::create_dir_all(&skill).unwrap();
            std::fs::write(skill.join("SKILL.md"), format!("# {name}")).unwrap();
        }
        std::fs::create_dir_all(dir.path().join(".claude/skills/empty")).unwrap();
        let names: Vec<String> = discover_skills(dir.path())
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names, ["x", "y"]);
    }
}
