//! The scripted agent: a deterministic stand-in for an agent CLI, so tests and the demo need no
//! model.
//!
//! It reads the whole prompt, recognises header lines anywhere in it (first occurrence wins):
//!
//! ```text
//! task: generate_options     # generate_options | answer | judge | draft_brief; answer when absent
//! options: 4                 # option count for generate_options, 1..=26, default 4
//! skills: commit-message, code-review   # skills offered to the agent
//! load: commit-message       # which offered skills it loads; all offered when absent, none when empty
//! ```
//!
//! and treats every other non-empty line as input. Output is derived from the SHA-256 of the
//! prompt only, so the same prompt gives the same bytes:
//!
//! * `generate_options`: `{"options":[{"label":"a","content":"..."}, ...]}`; when the prompt
//!   holds a unified diff (`diff --git` lines), each option is a different summary of that diff
//!   (its subject, the files it touches with their added and removed lines, [`DiffSummary`]);
//!   otherwise each content is a different style quoting different input lines;
//! * `judge`: `{"verdict":"a"|"b"|"tie","reasoning":"..."}`;
//! * `answer`: one line of text quoting the first input line;
//! * `draft_brief`: a knowledge-gap draft `{"brief", "rules", "good_example", "bad_example"}` for
//!   the theme of an `eval forge --mode corrections` drafting prompt (see [`draft_brief`]).
//!
//! [`scripted_transcript`] wraps that in the `scripted_jsonl` transcript the runner parses.
//! [`scripted_run`] adds the behaviours of an agent in a work directory ([`directive`]): skills
//! discovered on disk, loaded or passed over, `scripted:` directives for the reply, files, exit
//! code, silence and delay.
//! [`scripted_main`] is the program: the crate's `skillforge-agent-scripted` binary, and the
//! hidden `skillforge agent-scripted` subcommand of the CLI.

pub mod directive;
pub mod edits;
pub mod item_judge;
mod program;
pub mod remote_worker;

use std::path::Path;

use sha2::{Digest, Sha256};

pub use directive::{
    Directives, Preference, SAMPLE_ENV, SKILL_ROOTS, discover_skills, judge_preference,
    preferred_slot, slot_texts,
};
pub use program::{SCRIPTED_DELAY_ENV, SCRIPTED_SUBCOMMAND, scripted_main};

use crate::AgentError;

/// Default option count for `generate_options`.
pub const DEFAULT_N_OPTIONS: usize = 4;
/// Largest option count (labels `a`..=`z`).
pub const MAX_N_OPTIONS: usize = 26;

/// What the scripted agent is asked to do, from the prompt's `task:` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScriptedTask {
    /// Write `n_options` labelled review options (labels `a`, `b`, ...).
    GenerateOptions {
        /// How many options, 1..=26.
        n_options: usize,
    },
    /// Answer the prompt with a short text.
    Answer,
    /// Pick the better of options `a` and `b`, or `tie`.
    Judge,
    /// Draft a knowledge-gap brief for the theme of a drafting prompt ([`draft_brief`]).
    DraftBrief,
}

/// A prompt as the scripted agent reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptedPrompt<'a> {
    /// The task from the `task:` (and `options:`) lines.
    pub task: ScriptedTask,
    /// Skills from the `skills:` line, in order, deduplicated.
    pub skills_offered: Vec<String>,
    /// Offered skills it loads: those on the `load:` line (all offered when absent).
    pub skills_loaded: Vec<String>,
    /// Non-empty, non-header lines, trimmed.
    pub input_lines: Vec<&'a str>,
}

/// Whether `line` is a directive line (`scripted: …`, `scripted@N: …`, `scripted%NAME: …`).
fn is_directive(line: &str) -> bool {
    line.split_once(':').is_some_and(|(head, _)| {
        head.strip_prefix("scripted")
            .is_some_and(|tail| tail.is_empty() || tail.starts_with(['@', '%']))
    })
}

/// Reads the header lines and input lines of `prompt` (see module docs).
///
/// # Errors
/// [`AgentError::Scripted`] for an unknown `task:` value or an `options:` value that is not a
/// number in 1..=26.
pub fn parse_scripted_prompt(prompt: &str) -> Result<ScriptedPrompt<'_>, AgentError> {
    let mut task = None;
    let mut options = None;
    let mut skills = None;
    let mut load = None;
    let mut input_lines = Vec::new();
    for line in prompt.lines().map(str::trim) {
        let header = line.split_once(':').and_then(|(key, value)| {
            let slot = match key {
                "task" => &mut task,
                "options" => &mut options,
                "skills" => &mut skills,
                "load" => &mut load,
                _ => return None,
            };
            Some((slot, value.trim()))
        });
        match header {
            Some((slot, value)) => {
                slot.get_or_insert(value);
            }
            // Directive lines steer the stand-in; they are not its input (an option never
            // quotes a skill's `scripted: reply` line).
            None if line.is_empty() || is_directive(line) => {}
            None => input_lines.push(line),
        }
    }
    let n_options = match options {
        None => DEFAULT_N_OPTIONS,
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_N_OPTIONS).contains(n))
            .ok_or_else(|| {
                AgentError::Scripted(format!("`options: {text}` is not a number in 1..=26"))
            })?,
    };
    let task = match task {
        None | Some("answer") => ScriptedTask::Answer,
        Some("generate_options") => ScriptedTask::GenerateOptions { n_options },
        Some("judge") => ScriptedTask::Judge,
        Some("draft_brief") => ScriptedTask::DraftBrief,
        Some(other) => {
            return Err(AgentError::Scripted(format!(
                "unknown task `{other}` (expected generate_options, answer, judge or draft_brief)"
            )));
        }
    };
    let skills_offered = name_list(skills.unwrap_or_default());
    let skills_loaded = match load {
        None => skills_offered.clone(),
        Some(names) => name_list(names)
            .into_iter()
            .filter(|name| skills_offered.contains(name))
            .collect(),
    };
    Ok(ScriptedPrompt {
        task,
        skills_offered,
        skills_loaded,
        input_lines,
    })
}

/// Comma-separated names, trimmed, empty ones dropped, deduplicated in order.
fn name_list(text: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }
    names
}

/// Key of a judge verdict set to `false` when the pick was not made by reading the answers (the
/// scripted judge's digest pick, with no `prefer` directive).
pub const ASSESSED_KEY: &str = "assessed";

/// The scripted judge's verdict under a `scripted: prefer NEEDLE` line (a JSON object): the slot
/// only one of whose texts contains the needle, else a tie saying both or neither do; two slots of
/// the same text are no assessment (`"assessed": false`, the reasoning says why and what gives an
/// arm its own answer).
pub fn prefer_verdict(prompt: &str, needle: &str) -> String {
    let (verdict, reasoning) = match judge_preference(prompt, needle) {
        Preference::Slot(slot) => (
            slot,
            format!("scripted judge: preferred the slot containing `{needle}`"),
        ),
        Preference::Both => (
            "tie",
            format!("scripted judge: both contain `{needle}`: tie"),
        ),
        Preference::Neither => (
            "tie",
            format!("scripted judge: neither contains `{needle}`: tie"),
        ),
        Preference::SameText => {
            return serde_json::json!({
                "verdict": "tie",
                "reasoning": "scripted judge: both answers are the same text, nothing to prefer; a scripted \
                    arm follows no instruction but its `scripted:` lines: it answers what a `scripted: reply TEXT` \
                    line in the skill's SKILL.md or in the prompt says, else a stand-in, so two skills with the \
                    same `reply` line (a trained version and its predecessor) or none answer alike; give the \
                    skill its own `reply` line, or forge with a model runtime",
                ASSESSED_KEY: false,
            })
            .to_string();
        }
    };
    serde_json::json!({ "verdict": verdict, "reasoning": reasoning }).to_string()
}

/// The scripted agent's final message for `prompt` under `task`: deterministic in the prompt's
/// bytes (see module docs for the shapes). Pure; never fails.
pub fn run_scripted(prompt: &str, task: ScriptedTask) -> String {
    let digest: [u8; 32] = Sha256::digest(prompt.as_bytes()).into();
    let tag = hex::encode(&digest[..4]);
    let input_lines = parse_scripted_prompt(prompt)
        .map(|p| p.input_lines)
        .unwrap_or_else(|_| {
            prompt
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect()
        });
    match task {
        ScriptedTask::GenerateOptions { n_options } => {
            let n_options = n_options.clamp(1, MAX_N_OPTIONS);
            match DiffSummary::read(prompt) {
                Some(diff) => diff.options(&digest, n_options),
                None => generate_options(&digest, &input_lines, n_options),
            }
        }
        ScriptedTask::Judge => {
            let verdict = ["a", "b", "tie"][usize::from(digest[1]) % 3];
            let reasoning = format!(
                "scripted judge {tag}: read {} input lines and picked `{verdict}` from the prompt \
                 digest; it does not assess quality: give the rubric a `scripted: prefer TEXT` line \
                 (it decides by content), or judge with a model runtime",
                input_lines.len()
            );
            // `assessed: false`: consumers that must not count a placeholder pick as evidence
            // (the eval forge's gate) read it; the others take the verdict as before.
            serde_json::json!({ "verdict": verdict, "reasoning": reasoning, ASSESSED_KEY: false })
                .to_string()
        }
        ScriptedTask::DraftBrief => draft_brief(prompt),
        ScriptedTask::Answer => match input_lines.first() {
            Some(first) => format!(
                "scripted answer {tag}: {} ({} input lines)",
                excerpt(first),
                input_lines.len()
            ),
            None => format!("scripted answer {tag}: the prompt is empty"),
        },
    }
}

/// Most words a reply may have under the scripted draft's verify.
pub const DRAFT_WORD_CAP: usize = 40;

/// The scripted stand-in's knowledge-gap draft for a drafting prompt (`task: draft_brief`): the
/// theme's name from its `## Theme: NAME` line and its rules from the `- RULE` lines under `###
/// The user's rules`, echoed as the draft's `rules`. It cannot read the rules, so its brief is a
/// fixed short-status task whose verify is a word cap ([`DRAFT_WORD_CAP`]) with a good example
/// under it and a bad one over it, and its rubric says it is the scripted stand-in's; the forge's
/// own checks (rules kept out, the self-test) run on it as on a model's. A `scripted: reply`
/// directive (in a correction) still wins. Deterministic in the prompt.
pub fn draft_brief(prompt: &str) -> String {
    let mut name = "theme";
    let mut rules: Vec<&str> = Vec::new();
    let mut in_rules = false;
    for line in prompt.lines().map(str::trim) {
        if let Some(n) = line.strip_prefix("## Theme:") {
            name = n.trim();
        } else if line.starts_with("###") {
            in_rules = line == "### The user's rules";
        } else if in_rules && let Some(rule) = line.strip_prefix("- ") {
            rules.push(rule.trim());
        }
    }
    let slug: String = name
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect::<String>()
        .split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    let slug = if slug.is_empty() {
        "theme".to_owned()
    } else {
        slug
    };
    let id: String = format!("kg-{slug}").chars().take(80).collect();
    let bad = "Here is everything that happened this week, item by item and with the full \
               context for each: we shipped the release after two rounds of review, we fixed the \
               login bug that some users reported, and we started the cache work that is still \
               under review today.";
    serde_json::json!({
        "brief": {
            "id": id,
            "prompt": "Read notes.md and write the team's status update for this week.",
            "setup": {"notes.md": "- shipped release 1.2\n- fixed the login bug\n- started the user cache\n"},
            "verify": format!("test \"$(wc -w < \"$FORGE_FINAL\")\" -le {DRAFT_WORD_CAP}"),
            "rubric": format!("Which reply would the user accept without correcting it (theme `{name}`; drafted by the scripted stand-in, which cannot read rules: a word cap only)?"),
            "output": "reply",
        },
        "rules": rules,
        "good_example": "Shipped 1.2, fixed login, cache started.",
        "bad_example": bad,
    })
    .to_string()
}

/// A unified diff in a prompt, as the scripted agent summarises it: the change's subject (a
/// `commit SHA — SUBJECT` line, else an `Item ID — TITLE` line) and the files it touches with
/// their line counts. A diff region starts at a `diff --git a/P b/P` line and ends at the first
/// empty line. When the prompt also holds a `git show --stat` block, its per-file counts and its
/// `N files changed, X insertions(+), Y deletions(-)` line are used (they cover a diff cut short);
/// otherwise the `+`/`-` lines of the diff are counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffSummary {
    /// What the change is, in the author's words.
    pub subject: String,
    /// `(path, counts as words)` in order: `+A -R` from the diff, `N lines` from a stat line.
    pub files: Vec<(String, String)>,
    /// `(lines added, lines removed)` of the whole change.
    pub totals: (usize, usize),
}

impl DiffSummary {
    /// The diff of `prompt`, when it holds one.
    pub fn read(prompt: &str) -> Option<Self> {
        let mut subject = None;
        let mut title = None;
        let mut diff: Vec<(String, usize, usize)> = Vec::new();
        let mut stat: Vec<(String, usize)> = Vec::new();
        let mut stat_totals = None;
        let mut in_diff = false;
        for line in prompt.lines() {
            if let Some(rest) = line.strip_prefix("diff --git a/") {
                in_diff = true;
                let path = rest.split(" b/").next().unwrap_or(rest).to_owned();
                diff.push((path, 0, 0));
                continue;
            }
            if line.is_empty() {
                in_diff = false;
                continue;
            }
            if in_diff {
                if let Some(last) = diff.last_mut() {
                    if line.starts_with('+') && !line.starts_with("+++") {
                        last.1 += 1;
                    } else if line.starts_with('-') && !line.starts_with("---") {
                        last.2 += 1;
                    }
                }
                continue;
            }
            let line = line.trim();
            if let Some((path, rest)) = line.split_once(" | ")
                && let Some(n) = rest.split_whitespace().next().and_then(|n| n.parse().ok())
            {
                stat.push((path.trim().to_owned(), n));
            } else if line.contains(" changed") && line.contains("file") {
                let count = |word: &str| {
                    line.split(", ")
                        .find(|part| part.contains(word))
                        .and_then(|part| part.split_whitespace().next())
                        .and_then(|n| n.parse::<usize>().ok())
                        .unwrap_or(0)
                };
                stat_totals = Some((count("insertion"), count("deletion")));
            } else if subject.is_none()
                && let Some(rest) = line.strip_prefix("commit ")
                && let Some((_, s)) = rest.split_once(" — ")
            {
                subject = Some(s.trim().to_owned());
            } else if title.is_none()
                && let Some(rest) = line.strip_prefix("Item ")
                && let Some((_, t)) = rest.split_once(" — ")
            {
                title = Some(t.trim().to_owned());
            }
        }
        if diff.is_empty() {
            return None;
        }
        let (files, totals) = match stat_totals {
            Some(totals) if !stat.is_empty() => {
                // `--stat` shortens long paths to `.../tail`: the diff's header names them whole.
                let files = stat
                    .into_iter()
                    .map(|(path, n)| {
                        let tail = path.trim_start_matches("...");
                        let whole = diff
                            .iter()
                            .map(|(p, _, _)| p)
                            .find(|p| p.ends_with(tail))
                            .cloned()
                            .unwrap_or(path);
                        (whole, format!("{n} line{}", if n == 1 { "" } else { "s" }))
                    })
                    .collect();
                (files, totals)
            }
            _ => {
                let totals = diff
                    .iter()
                    .fold((0, 0), |(a, r), (_, fa, fr)| (a + fa, r + fr));
                let files = diff
                    .into_iter()
                    .map(|(p, a, r)| (p, format!("+{a} -{r}")))
                    .collect();
                (files, totals)
            }
        };
        let subject = subject
            .or(title)
            .unwrap_or_else(|| "Change the code".to_owned());
        Some(Self {
            subject: sentence(&subject),
            files,
            totals,
        })
    }

    /// `n_options` different summaries, the first style chosen by the prompt's digest.
    pub fn options(&self, digest: &[u8; 32], n_options: usize) -> String {
        let styles: [fn(&Self) -> String; 6] = [
            Self::one_line,
            Self::with_files,
            Self::detailed,
            Self::bulleted,
            Self::main_file,
            Self::what_to_check,
        ];
        let base = usize::from(digest[0]);
        let options: Vec<serde_json::Value> = (0..n_options)
            .map(|i| {
                let label = char::from(b'a' + u8::try_from(i).unwrap_or(25)).to_string();
                let content = styles[(base + i) % styles.len()](self);
                serde_json::json!({ "label": label, "content": content })
            })
            .collect();
        serde_json::json!({ "options": options }).to_string()
    }

    fn file_list(&self, max: usize) -> String {
        let named: Vec<String> = self
            .files
            .iter()
            .take(max)
            .map(|(p, counts)| format!("{p} ({counts})"))
            .collect();
        let rest = self.files.len().saturating_sub(max);
        match rest {
            0 => named.join(", "),
            n => format!(
                "{} and {n} more file{}",
                named.join(", "),
                if n == 1 { "" } else { "s" }
            ),
        }
    }

    fn one_line(&self) -> String {
        format!("{}.", self.subject)
    }

    fn with_files(&self) -> String {
        format!("{}: changes {}.", self.subject, self.file_list(3))
    }

    fn detailed(&self) -> String {
        let (added, removed) = self.totals;
        let n = self.files.len();
        format!(
            "{}. The change touches {n} file{} ({added} lines added, {removed} removed): {}.",
            self.subject,
            if n == 1 { "" } else { "s" },
            self.file_list(usize::MAX)
        )
    }

    fn bulleted(&self) -> String {
        let mut text = format!("{}:", self.subject);
        for (p, counts) in &self.files {
            text.push_str(&format!("\n- {p}: {counts}"));
        }
        text
    }

    fn main_file(&self) -> String {
        let size = |counts: &str| -> usize {
            counts
                .split(|c: char| !c.is_ascii_digit())
                .filter_map(|n| n.parse::<usize>().ok())
                .sum()
        };
        let (path, counts) = self
            .files
            .iter()
            .max_by_key(|(_, counts)| size(counts))
            .cloned()
            .unwrap_or_default();
        format!(
            "Mostly {path} ({counts}): {}.",
            lowercase_first(&self.subject)
        )
    }

    fn what_to_check(&self) -> String {
        let (_, removed) = self.totals;
        if removed == 0 {
            format!(
                "{}. It only adds lines; check the new code in {}.",
                self.subject,
                self.file_list(2)
            )
        } else {
            format!(
                "{}. It removes {removed} line{}; check nothing still needs them in {}.",
                self.subject,
                if removed == 1 { "" } else { "s" },
                self.file_list(2)
            )
        }
    }
}

/// `text` as a sentence start: its first letter upper-case, a trailing period dropped.
fn sentence(text: &str) -> String {
    let text = text.trim().trim_end_matches('.');
    let mut chars = text.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// `text` with its first letter lower-case (for a subject inside a sentence).
fn lowercase_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Styles options are written in; option `i` takes style `(digest[0] + i) % len`, so options of
/// one prompt differ by style as well as by the lines they quote.
const STYLES: &[(&str, &str)] = &[
    ("concise", "state the change in one short sentence"),
    ("detailed", "explain what changed and why, step by step"),
    ("bulleted", "list each change as its own bullet"),
    ("imperative", "lead with the action, in the imperative mood"),
    ("reader-first", "open with what a reader needs to know"),
    ("cautious", "flag risks and what to check before merging"),
];

fn generate_options(digest: &[u8; 32], input_lines: &[&str], n_options: usize) -> String {
    let base = usize::from(digest[0]);
    let quote = |idx: usize| -> String {
        if input_lines.is_empty() {
            "the request".to_string()
        } else {
            format!("`{}`", excerpt(input_lines[idx % input_lines.len()]))
        }
    };
    let options: Vec<serde_json::Value> = (0..n_options)
        .map(|option_idx| {
            let label = char::from(b'a' + u8::try_from(option_idx).unwrap_or(25)).to_string();
            let (style, how) = STYLES[(base + option_idx) % STYLES.len()];
            let content = format!(
                "Option {label} ({style}): {how}, starting from {}; also cover {}.",
                quote(base + option_idx),
                quote(base + 2 * option_idx + 1),
            );
            serde_json::json!({ "label": label, "content": content })
        })
        .collect();
    serde_json::json!({ "options": options }).to_string()
}

/// `line` cut to at most 80 characters (with `...` when cut).
fn excerpt(line: &str) -> String {
    const MAX_CHARS: usize = 80;
    if line.chars().count() <= MAX_CHARS {
        return line.to_string();
    }
    let cut: String = line.chars().take(MAX_CHARS - 3).collect();
    format!("{cut}...")
}

/// The full `scripted_jsonl` transcript for `prompt`: a `start` line (task and prompt SHA-256),
/// `skill_offered` and `skill_loaded` lines, and the `final` line holding [`run_scripted`]'s
/// output; each line newline-terminated. (= [`scripted_run`] without a work dir or sample.)
///
/// # Errors
/// As [`parse_scripted_prompt`].
pub fn scripted_transcript(prompt: &str) -> Result<String, AgentError> {
    scripted_run(prompt, None, None).map(|run| run.stdout)
}

/// What one scripted run does: its stdout (the transcript), stderr line, exit code, delay and the
/// files it writes (relative to the work dir).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptedRun {
    /// The `scripted_jsonl` transcript; empty under `scripted: silent`.
    pub stdout: String,
    /// A line for stderr (`scripted: stderr`).
    pub stderr: Option<String>,
    /// Exit code (`scripted: exit`, default 0).
    pub exit_code: u8,
    /// Milliseconds to sleep before answering (`scripted: sleep`).
    pub sleep_ms: Option<u64>,
    /// Files to write: (path relative to the work dir, text).
    pub writes: Vec<(String, String)>,
    /// Files to remove after the writes (paths relative to the work dir).
    pub deletes: Vec<String>,
}

/// The scripted agent's run for `prompt` in `workdir` (skills discovered there when the prompt has
/// no `skills:` header) for sample `sample` (see [`directive`]). Deterministic in its inputs.
///
/// # Errors
/// As [`parse_scripted_prompt`].
pub fn scripted_run(
    prompt: &str,
    workdir: Option<&Path>,
    sample: Option<&str>,
) -> Result<ScriptedRun, AgentError> {
    let parsed = parse_scripted_prompt(prompt)?;
    let mut directives = Directives::default();
    directives.merge_from(prompt, sample);
    let has_skills_header = prompt
        .lines()
        .any(|l| l.trim_start().starts_with("skills:"));
    let (offered, loaded) = match workdir {
        Some(dir) if !has_skills_header => {
            let found = discover_skills(dir);
            let offered: Vec<String> = found.iter().map(|s| s.name.clone()).collect();
            let mut loaded = Vec::new();
            if !directives.no_load {
                for skill in found
                    .iter()
                    .filter(|s| !Directives::says_no_load(&s.text, sample))
                {
                    loaded.push(skill.name.clone());
                    directives.merge_from(&skill.text, sample);
                }
            }
            (offered, loaded)
        }
        _ => {
            let loaded = if directives.no_load {
                Vec::new()
            } else {
                parsed.skills_loaded.clone()
            };
            (parsed.skills_offered.clone(), loaded)
        }
    };
    let task_name = match parsed.task {
        ScriptedTask::GenerateOptions { .. } => "generate_options",
        ScriptedTask::Answer => "answer",
        ScriptedTask::Judge => "judge",
        ScriptedTask::DraftBrief => "draft_brief",
    };
    let mut offered = offered;
    for name in &directives.offers {
        if !offered.contains(name) {
            offered.push(name.clone());
        }
    }
    // Each task reads its own reply directive: `reply` is an answer's (and a draft's), so a skill
    // scripted for the eval loop's arms still generates options when a train session uses it.
    let scripted_reply = match parsed.task {
        ScriptedTask::Judge => directives.judge_reply.clone().or_else(|| {
            directives
                .prefer
                .as_ref()
                .map(|needle| prefer_verdict(prompt, needle))
        }),
        ScriptedTask::GenerateOptions { .. } => directives.options_reply.clone(),
        ScriptedTask::Answer | ScriptedTask::DraftBrief => directives.reply.clone(),
    };
    let text = scripted_reply.unwrap_or_else(|| run_scripted(prompt, parsed.task));
    let mut lines = vec![serde_json::json!({
        "type": "start",
        "task": task_name,
        "prompt_sha256": hex::encode(Sha256::digest(prompt.as_bytes())),
    })];
    for name in &offered {
        lines.push(serde_json::json!({ "type": "skill_offered", "name": name }));
    }
    for name in &loaded {
        lines.push(serde_json::json!({ "type": "skill_loaded", "name": name }));
    }
    for idx in 0..directives.tool_errors {
        lines.push(serde_json::json!({ "type": "tool_error", "text": format!("scripted tool error {}", idx + 1) }));
    }
    if let Some((input, output, cost)) = directives.usage {
        let mut usage =
            serde_json::json!({ "type": "usage", "input_tokens": input, "output_tokens": output });
        if let Some(cost) = cost.and_then(|c| c.parse::<f64>().ok()) {
            usage["cost_usd"] = cost.into();
        }
        lines.push(usage);
    }
    lines.push(serde_json::json!({ "type": "final", "text": text }));
    let stdout = if directives.silent {
        String::new()
    } else {
        lines.iter().map(|line| format!("{line}\n")).collect()
    };
    Ok(ScriptedRun {
        stdout,
        stderr: directives.stderr,
        exit_code: directives.exit_code.unwrap_or(0),
        sleep_ms: directives.sleep_ms,
        writes: directives.writes,
        deletes: directives.deletes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROMPT: &str = "task: generate_options\noptions: 3\nskills: commit-message, review\n\
                          load: review, unknown\n\nfix: handle empty diff\nrefactor: split parser\n";

    // Issue 35 item 10: options for an item holding a diff are summaries of that diff.
    #[test]
    fn options_for_a_diff_summarise_it() {
        let prompt = "task: generate_options\noptions: 6\n\nItem c-1 — Summarize 1a2b3c4: add parse\n\
                      commit 1a2b3c4 — add a number parser\n\n src/parse.rs | 3 +++\n\
                      diff --git a/src/parse.rs b/src/parse.rs\n--- /dev/null\n+++ b/src/parse.rs\n\
                      +pub fn parse() {}\n+// two\ndiff --git a/src/lib.rs b/src/lib.rs\n-mod old;\n+mod parse;\n\n\
                      Template t@v1:\n- a bullet of the template\n";
        let diff = DiffSummary::read(prompt).expect("a diff");
        assert_eq!(diff.subject, "Add a number parser");
        assert_eq!(
            diff.files,
            [
                ("src/parse.rs".to_owned(), "+2 -0".to_owned()),
                ("src/lib.rs".to_owned(), "+1 -1".to_owned())
            ]
        );
        assert_eq!(diff.totals, (3, 1));
        let output = run_scripted(prompt, ScriptedTask::GenerateOptions { n_options: 6 });
        let value: serde_json::Value = serde_json::from_str(&output).unwrap();
        let contents: Vec<&str> = value["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["content"].as_str().unwrap())
            .collect();
        assert_eq!(contents.len(), 6);
        assert!(contents.contains(&"Add a number parser."), "{contents:#?}");
        assert!(
            contents
                .iter()
                .any(|c| c.contains("src/parse.rs (+2 -0), src/lib.rs (+1 -1)")),
            "{contents:#?}"
        );
        for c in &contents {
            assert!(
                c.contains("number parser"),
                "every option says what changed: {c}"
            );
            assert!(!c.contains("Option "), "no placeholder: {c}");
        }
        assert!(DiffSummary::read("task: generate_options\nno diff here\n").is_none());
        // A `--stat` block gives the counts of a diff cut short, and whole paths come from it.
        let cut = "commit 1a2 — big change\n\n .../deep/file.rs | 12 ++++----\n other.rs | 1 +\n \
                   2 files changed, 9 insertions(+), 4 deletions(-)\n\
                   diff --git a/very/long/deep/file.rs b/very/long/deep/file.rs\n+x\n… (900 more bytes not shown)\n";
        let diff = DiffSummary::read(cut).unwrap();
        assert_eq!(
            diff.files,
            [
                ("very/long/deep/file.rs".to_owned(), "12 lines".to_owned()),
                ("other.rs".to_owned(), "1 line".to_owned())
            ]
        );
        assert_eq!(diff.totals, (9, 4));
    }

    #[test]
    fn header_lines_are_read_and_input_lines_kept() {
        let parsed = parse_scripted_prompt(PROMPT).expect("parse");
        assert_eq!(parsed.task, ScriptedTask::GenerateOptions { n_options: 3 });
        assert_eq!(parsed.skills_offered, ["commit-message", "review"]);
        assert_eq!(parsed.skills_loaded, ["review"]);
        assert_eq!(
            parsed.input_lines,
            ["fix: handle empty diff", "refactor: split parser"]
        );
    }

    #[test]
    fn tasks_and_errors() {
        let check = |prompt: &str, expected: Result<ScriptedTask, &str>| {
            let got = parse_scripted_prompt(prompt)
                .map(|p| p.task)
                .map_err(|e| e.to_string());
            match expected {
                Ok(task) => assert_eq!(got.expect(prompt), task),
                Err(message) => assert!(got.expect_err(prompt).contains(message), "{prompt}"),
            }
        };
        check("just a question", Ok(ScriptedTask::Answer));
        check("task: judge\nOption A\nOption B", Ok(ScriptedTask::Judge));
        check(
            "task: generate_options",
            Ok(ScriptedTask::GenerateOptions { n_options: 4 }),
        );
        check(
            "task: draft_brief\n## Theme: x",
            Ok(ScriptedTask::DraftBrief),
        );
        check("task: dance", Err("unknown task `dance`"));
        check(
            "task: generate_options\noptions: 0",
            Err("`options: 0` is not a number in 1..=26"),
        );
        check("task: generate_options\noptions: x", Err("`options: x`"));
    }

    #[test]
    fn options_are_labelled_distinct_and_quote_the_input() {
        let output = run_scripted(PROMPT, ScriptedTask::GenerateOptions { n_options: 3 });
        let value: serde_json::Value = serde_json::from_str(&output).expect("options json");
        let options = value["options"].as_array().expect("options array");
        let labels: Vec<_> = options
            .iter()
            .map(|o| o["label"].as_str().unwrap())
            .collect();
        assert_eq!(labels, ["a", "b", "c"]);
        let contents: Vec<_> = options
            .iter()
            .map(|o| o["content"].as_str().unwrap())
            .collect();
        for (idx, content) in contents.iter().enumerate() {
            assert!(
                content.contains("handle empty diff") || content.contains("split parser"),
                "{content}"
            );
            assert!(
                !contents[..idx].contains(content),
                "duplicate option {content}"
            );
        }
    }

    #[test]
    fn output_is_deterministic_and_depends_on_the_prompt() {
        let task = ScriptedTask::GenerateOptions { n_options: 4 };
        assert_eq!(run_scripted(PROMPT, task), run_scripted(PROMPT, task));
        assert_ne!(
            run_scripted(PROMPT, task),
            run_scripted(&format!("{PROMPT}x\n"), task)
        );
        assert_eq!(
            scripted_transcript(PROMPT).unwrap(),
            scripted_transcript(PROMPT).unwrap()
        );
    }

    #[test]
    fn judge_gives_a_verdict_for_many_prompts() {
        let mut seen = std::collections::BTreeSet::new();
        for idx in 0..40 {
            let output = run_scripted(&format!("task: judge\ncase {idx}"), ScriptedTask::Judge);
            let value: serde_json::Value = serde_json::from_str(&output).expect("verdict json");
            let verdict = value["verdict"].as_str().expect("verdict").to_string();
            assert!(["a", "b", "tie"].contains(&verdict.as_str()), "{verdict}");
            assert!(value["reasoning"].as_str().is_some_and(|r| !r.is_empty()));
            seen.insert(verdict);
        }
        assert_eq!(
            seen.len(),
            3,
            "every verdict occurs across prompts: {seen:?}"
        );
    }

    #[test]
    fn answer_quotes_the_first_input_line() {
        let output = run_scripted("What does `open` do?\nmore", ScriptedTask::Answer);
        assert!(output.starts_with("scripted answer "), "{output}");
        assert!(
            output.contains("What does `open` do? (2 input lines)"),
            "{output}"
        );
    }

    #[test]
    fn transcript_records_offers_loads_and_final() {
        let transcript = scripted_transcript(PROMPT).expect("transcript");
        let types: Vec<String> = transcript
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["type"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(
            types,
            [
                "start",
                "skill_offered",
                "skill_offered",
                "skill_loaded",
                "final"
            ]
        );
        let no_load = scripted_transcript("skills: a\nload:\nhi").unwrap();
        assert!(!no_load.contains("skill_loaded"), "{no_load}");
    }

    /// Skills in the work dir are offered; a SKILL.md's directives apply only when it is loaded.
    #[test]
    fn work_dir_skills_are_offered_loaded_and_followed() {
        let dir = tempfile::tempdir().unwrap();
        let skill = dir.path().join(".claude/skills/tidy");
        std::fs::create_dir_all(&skill).unwrap();
        std::fs::write(
            skill.join("SKILL.md"),
            "# tidy\nscripted: reply tidy reply\nscripted@2: no-load\n",
        )
        .unwrap();
        let run = |sample: &str| {
            scripted_run(
                "scripted: reply plain\nscripted: exit 3\nwrite it",
                Some(dir.path()),
                Some(sample),
            )
            .unwrap()
        };
        let loaded = run("1");
        assert!(
            loaded
                .stdout
                .contains(r#""type":"skill_loaded","name":"tidy""#),
            "{}",
            loaded.stdout
        );
        assert!(loaded.stdout.contains("tidy reply"), "{}", loaded.stdout);
        assert_eq!(loaded.exit_code, 3);
        let passed_over = run("2");
        assert!(
            passed_over
                .stdout
                .contains(r#""type":"skill_offered","name":"tidy""#)
        );
        assert!(
            !passed_over.stdout.contains("skill_loaded"),
            "{}",
            passed_over.stdout
        );
        assert!(passed_over.stdout.contains("plain"));
        let silent = scripted_run("scripted: silent\nscripted: exit 1", None, None).unwrap();
        assert_eq!((silent.stdout.as_str(), silent.exit_code), ("", 1));
    }

    /// `reply` answers an answer task only: option generation keeps generating options (one skill
    /// scripted for the eval loop also trains) unless an `options-reply` line answers it.
    #[test]
    fn reply_answers_answers_and_options_reply_answers_option_generation() {
        let final_text = |prompt: &str| {
            let run = scripted_run(prompt, None, None).unwrap();
            let last = run.stdout.lines().last().unwrap().to_owned();
            let v: serde_json::Value = serde_json::from_str(&last).unwrap();
            v["text"].as_str().unwrap().to_owned()
        };
        let skill_lines = "scripted: reply SHORT\n";
        assert_eq!(final_text(&format!("{skill_lines}write it")), "SHORT");
        let options = final_text(&format!(
            "task: generate_options\noptions: 2\n{skill_lines}fix: x"
        ));
        let parsed: serde_json::Value = serde_json::from_str(&options).expect(&options);
        assert_eq!(
            parsed["options"].as_array().map(Vec::len),
            Some(2),
            "{options}"
        );
        assert!(!options.contains("SHORT"), "{options}");
        assert_eq!(
            final_text(
                "task: generate_options\nscripted: reply SHORT\nscripted: options-reply not options"
            ),
            "not options"
        );
        let verdict = final_text("task: judge\nscripted: reply SHORT\n### A\nx\n### B\ny");
        assert!(!verdict.contains("SHORT"), "{verdict}");
    }

    #[test]
    fn judge_on_two_same_answers_assesses_nothing_and_says_why() {
        let same = prefer_verdict(
            "task: judge\n### A\n~~~~\nscripted answer 1f: x #42\n~~~~\n### B\n~~~~\nscripted answer 1f: x #42\n~~~~\nReply as one JSON object only\n",
            "#42",
        );
        let v: serde_json::Value = serde_json::from_str(&same).unwrap();
        assert_eq!(v[ASSESSED_KEY], false, "{v}");
        let why = v["reasoning"].as_str().unwrap();
        assert!(
            why.contains("same text") && why.contains("scripted: reply"),
            "{why}"
        );
        let both: serde_json::Value = serde_json::from_str(&prefer_verdict(
            "### A\nfix #42 now\n### B\n#42 fixed\n",
            "#42",
        ))
        .unwrap();
        assert_eq!(both["verdict"], "tie");
        assert!(
            both["reasoning"]
                .as_str()
                .unwrap()
                .contains("both contain `#42`: tie"),
            "{both}"
        );
        assert!(both.get(ASSESSED_KEY).is_none());
    }

    #[test]
    fn judge_prefers_the_marked_slot() {
        let run = scripted_run(
            "task: judge\nscripted: prefer GOOD\n### A\nbad\n### B\nGOOD here\n",
            None,
            None,
        )
        .unwrap();
        assert!(
            run.stdout.contains(r#"\"verdict\":\"b\""#),
            "{}",
            run.stdout
        );
    }
}
