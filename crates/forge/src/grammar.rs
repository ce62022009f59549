//! The review-comment grammar: what a reviewer's GitHub comment says, as a `feedback.yml`
//! response (facts §4 "GitHub comments"; seed "GitHub Feedback Collector").
//!
//! Pure: text in, [`CommentFeedback`] out. The order is the facts' order:
//! 1. a packet body (the [`PACKET_MARKER`] or the [`PACKET_TITLE_PREFIX`]) is ours, never feedback;
//! 2. fenced blocks are tried as YAML when they hold `items:` or `run_id:`;
//! 3. then the whole body, when it has no fences and no `>` quote lines;
//! 4. then the short form, line by line (`item-001: b - reason`, `hero-001 ranking: C > A > D > B`,
//!    `hero-001: C > A`, `ID quality|continue_mode|promote: value`, `run_id:`/`reviewer:` lines,
//!    `best traits:` / `useful traits:` and `reject:` / `rejected traits:` headers followed by
//!    `- LABEL: trait` lines). Lines starting `#`, `` ``` `` or `>` are ignored.
//!
//! A comment with none of these is [`CommentFeedback::Unrelated`]. A comment that looks like
//! feedback but cannot be read (YAML that does not parse, a trait line before any item) is
//! [`CommentFeedback::Malformed`] with the reason; the caller reports it with the comment's URL and
//! skips the whole comment, so nothing of it is half-imported.

use std::sync::LazyLock;

use regex::Regex;
use skillforge_contract::{FeedbackEntry, FeedbackFile, RankingText, parse_feedback_yml};

/// Marks a body as a published packet (facts §4; gitmoot's marker, kept so both tools skip each
/// other's packets).
pub const PACKET_MARKER: &str = "<!-- gitmoot:skillopt-feedback-packet -->";
/// A body starting with this is a packet too (facts §4).
pub const PACKET_TITLE_PREFIX: &str = "# Gitmoot SkillOpt Feedback:";

/// What one comment says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommentFeedback {
    /// A published packet body (ours or gitmoot's): skipped.
    Packet,
    /// Nothing that reads as feedback: skipped silently.
    Unrelated,
    /// Feedback, as a `feedback.yml` response. `run_id` and `reviewer` are empty when the comment
    /// does not name them (the caller fills in the issue's run and the comment's author).
    Feedback(FeedbackFile),
    /// Looks like feedback but cannot be read: reported and skipped.
    Malformed(String),
}

/// Whether `body` is a published packet.
pub fn is_packet_body(body: &str) -> bool {
    body.contains(PACKET_MARKER) || body.trim_start().starts_with(PACKET_TITLE_PREFIX)
}

/// Reads one comment body (see the module docs for the order).
pub fn parse_comment(body: &str) -> CommentFeedback {
    if is_packet_body(body) {
        return CommentFeedback::Packet;
    }
    let blocks = fenced_blocks(body);
    for block in &blocks {
        if has_yaml_keys(block) {
            return yaml_feedback(block);
        }
    }
    let has_quotes = body.lines().any(|l| l.trim_start().starts_with('>'));
    if blocks.is_empty()
        && !has_quotes
        && has_yaml_keys(body)
        && let Some(parsed) = whole_body_yaml(body)
    {
        return parsed;
    }
    short_form(body)
}

/// The contents of every fenced block (```` ``` ```` or `~~~`, any info string).
fn fenced_blocks(body: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<(String, Vec<&str>)> = None;
    for line in body.lines() {
        let trimmed = line.trim_start();
        match &mut current {
            None => {
                let fence: String = trimmed
                    .chars()
                    .take_while(|c| *c == '`' || *c == '~')
                    .collect();
                if fence.len() >= 3
                    && fence
                        .chars()
                        .all(|c| c == fence.chars().next().unwrap_or('`'))
                {
                    current = Some((fence, Vec::new()));
                }
            }
            Some((fence, lines)) => {
                if trimmed.starts_with(fence.as_str())
                    && trimmed
                        .trim_start_matches(fence.chars().next().unwrap_or('`'))
                        .trim()
                        .is_empty()
                {
                    blocks.push(lines.join("\n"));
                    current = None;
                } else {
                    lines.push(line);
                }
            }
        }
    }
    blocks
}

fn has_yaml_keys(text: &str) -> bool {
    text.lines().any(|l| {
        let l = l.trim_start();
        l.starts_with("items:") || l.starts_with("run_id:")
    })
}

/// A fenced block that names `items:` or `run_id:` must be a whole `feedback.yml`.
fn yaml_feedback(text: &str) -> CommentFeedback {
    match parse_yaml(text) {
        Ok(file) => CommentFeedback::Feedback(file),
        Err(e) => CommentFeedback::Malformed(e),
    }
}

/// The whole body as YAML: used only when it parses as a mapping with `items`; a body that is
/// short-form lines (`run_id: x` then `item-001: b`) falls through to the short form.
fn whole_body_yaml(body: &str) -> Option<CommentFeedback> {
    if let Err(e) = skillforge_contract::limits::check_yaml(body) {
        return Some(CommentFeedback::Malformed(format!("the comment {e}")));
    }
    let value: serde_norway::Value = serde_norway::from_str(body).ok()?;
    value.as_mapping()?.get("items")?;
    Some(yaml_feedback(body))
}

/// `feedback.yml` text → a response; `run_id` may be absent in a comment (the issue names the run).
fn parse_yaml(text: &str) -> Result<FeedbackFile, String> {
    // Issue 12 item 7: the parser limits run before the YAML parser sees the text.
    skillforge_contract::limits::check_yaml(text).map_err(|e| format!("the YAML block {e}"))?;
    let value: serde_norway::Value =
        serde_norway::from_str(text).map_err(|e| format!("YAML does not parse: {e}"))?;
    let has_run = value
        .as_mapping()
        .and_then(|m| m.get("run_id"))
        .is_some_and(|v| !matches!(v, serde_norway::Value::Null));
    // `parse_feedback_yml` requires `run_id` and checks every key; give it a placeholder when absent.
    let text = if has_run {
        text.to_owned()
    } else {
        format!("run_id: __comment__\n{text}")
    };
    let mut file = parse_feedback_yml(&text).map_err(|e| e.to_string())?;
    if !has_run {
        file.run_id.clear();
    }
    if file.items.is_empty() {
        return Err("the YAML block has no items".into());
    }
    Ok(file)
}

const ID: &str = r"[A-Za-z0-9][A-Za-z0-9._/-]*";
const LABEL: &str = r"[A-Za-z0-9]+";

static META: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(run_id|reviewer)\s*:\s*(.+)$").expect("static regex"));
static SIGNAL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"^({ID})\s+(quality|continue_mode|promote)\s*:\s*(.+)$"
    ))
    .expect("static regex")
});
static RANKING: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!(r"^({ID})\s+ranking\s*:\s*(.+)$")).expect("static regex"));
static DIRECT_RANKING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"^({ID})\s*:\s*({LABEL}(?:\s*(?:>|=|,|\|)\s*{LABEL})+)(?:\s+-\s*(.*))?$"
    ))
    .expect("static regex")
});
static CHOICE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r"^({ID})\s*:\s*([A-Za-z]+)(?:\s*-\s*(.*))?$")).expect("static regex")
});
static TRAIT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!(r"^[-*]\s*({LABEL})\s*:\s*(.+)$")).expect("static regex"));

#[derive(Clone, Copy, PartialEq, Eq)]
enum TraitList {
    Useful,
    Rejected,
}

fn trait_header(line: &str) -> Option<TraitList> {
    match line.to_lowercase().trim_end_matches(':').trim() {
        "best traits" | "useful traits" => Some(TraitList::Useful),
        "reject" | "rejected traits" => Some(TraitList::Rejected),
        _ => None,
    }
}

/// The short form, line by line. The first item line after a header is where traits go: trait
/// lines attach to the item named last.
fn short_form(body: &str) -> CommentFeedback {
    let mut file = FeedbackFile::default();
    let mut traits: Option<TraitList> = None;
    let mut saw_feedback_line = false;
    for raw in body.lines() {
        let line = raw.trim();
        if line.is_empty()
            || line.starts_with('#')
            || line.starts_with("```")
            || line.starts_with('>')
        {
            continue;
        }
        if line.ends_with(':')
            && let Some(list) = trait_header(line)
        {
            traits = Some(list);
            continue;
        }
        if let (Some(list), Some(caps)) = (traits, TRAIT.captures(line)) {
            let Some(entry) = file.items.last_mut() else {
                return CommentFeedback::Malformed(format!(
                    "trait line `{line}` comes before any item line"
                ));
            };
            let map = if list == TraitList::Useful {
                &mut entry.useful_traits
            } else {
                &mut entry.rejected_traits
            };
            map.entry(caps[1].to_lowercase())
                .or_default()
                .push(caps[2].trim().to_owned());
            continue;
        }
        traits = None;
        if let Some(caps) = META.captures(line) {
            let value = caps[2].trim().to_owned();
            if &caps[1] == "run_id" {
                file.run_id = value
            } else {
                file.reviewer = value
            }
            continue;
        }
        if let Some(caps) = SIGNAL.captures(line) {
            let entry = entry_for(&mut file, &caps[1]);
            let value = caps[3].trim().to_owned();
            match &caps[2] {
                "quality" => entry.quality = value,
                "continue_mode" => entry.continue_mode = value,
                _ => entry.promote = value,
            }
            saw_feedback_line = true;
            continue;
        }
        if let Some(caps) = RANKING.captures(line) {
            let (ranking, reason) = split_reason(caps[2].trim());
            let entry = entry_for(&mut file, &caps[1]);
            entry.ranking = Some(RankingText::One(ranking));
            if let Some(reason) = reason {
                entry.reasoning = reason;
            }
            saw_feedback_line = true;
            continue;
        }
        if let Some(caps) = DIRECT_RANKING.captures(line) {
            let entry = entry_for(&mut file, &caps[1]);
            entry.ranking = Some(RankingText::One(caps[2].trim().to_owned()));
            if let Some(reason) = caps.get(3) {
                entry.reasoning = reason.as_str().trim().to_owned();
            }
            saw_feedback_line = true;
            continue;
        }
        if let Some(caps) = CHOICE.captures(line) {
            let entry = entry_for(&mut file, &caps[1]);
            entry.choice = caps[2].to_lowercase();
            if let Some(reason) = caps.get(3) {
                entry.reasoning = reason.as_str().trim().to_owned();
            }
            saw_feedback_line = true;
        }
    }
    if saw_feedback_line {
        CommentFeedback::Feedback(file)
    } else {
        CommentFeedback::Unrelated
    }
}

/// `C > A > D > B - reason` → (`C > A > D > B`, `reason`): a ` - ` after the ranking starts the reason.
fn split_reason(text: &str) -> (String, Option<String>) {
    match text.split_once(" - ") {
        Some((ranking, reason)) => (ranking.trim().to_owned(), Some(reason.trim().to_owned())),
        None => (text.to_owned(), None),
    }
}

/// The entry of `item_id`, created at the end when new (so "the item named last" is `last_mut`).
fn entry_for<'a>(file: &'a mut FeedbackFile, item_id: &str) -> &'a mut FeedbackEntry {
    if let Some(pos) = file.items.iter().position(|e| e.item_id == item_id) {
        let entry = file.items.remove(pos);
        file.items.push(entry);
    } else {
        file.items.push(FeedbackEntry {
            item_id: item_id.to_owned(),
            ..Default::default()
        });
    }
    file.items.last_mut().expect("just pushed")
}

#[cfg(test)]
mod tests;

/// What one comment contributes to a sync of run `run_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommentImport {
    /// Not for this run (a packet, unrelated text, or feedback naming another run): skipped.
    Skipped,
    /// Validated, de-blinded feedback for the items the comment answers; write it whole.
    Resolved(skillforge_contract::ResolvedFeedback),
    /// Refused with the reason; the caller reports it with the comment's URL and writes nothing of it.
    Malformed(String),
}

/// Reads a comment and validates it against the run's blind assignments (facts §4): the reviewer
/// is the comment's author, else the comment's `reviewer:`, else `github`; only the items the
/// comment answers are required (a reviewer may answer some items per comment), and every answer
/// is validated and de-blinded exactly as a `feedback.yml` (S-94, S-95), so a comment is either
/// imported whole or not at all.
pub fn resolve_comment(
    body: &str,
    author: Option<&str>,
    run_id: &str,
    assignments: &skillforge_contract::Assignments,
) -> CommentImport {
    let mut file = match parse_comment(body) {
        CommentFeedback::Packet | CommentFeedback::Unrelated => return CommentImport::Skipped,
        CommentFeedback::Malformed(reason) => return CommentImport::Malformed(reason),
        CommentFeedback::Feedback(file) => file,
    };
    if !file.run_id.is_empty() && file.run_id != run_id {
        return CommentImport::Skipped;
    }
    file.run_id = run_id.to_owned();
    let reviewer = author
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_owned)
        .unwrap_or_else(|| {
            if file.reviewer.trim().is_empty() {
                "github".to_owned()
            } else {
                file.reviewer.trim().to_owned()
            }
        });
    let answered: Vec<&str> = file.items.iter().map(|e| e.item_id.trim()).collect();
    if let Some(unknown) = answered
        .iter()
        .find(|id| !assignments.items.iter().any(|a| a.item_id == **id))
    {
        return CommentImport::Malformed(format!(
            "item `{unknown}` is not in review run `{run_id}`"
        ));
    }
    let subset = skillforge_contract::Assignments {
        run_id: run_id.to_owned(),
        items: assignments
            .items
            .iter()
            .filter(|a| answered.contains(&a.item_id.as_str()))
            .cloned()
            .collect(),
    };
    match skillforge_contract::resolve_feedback(&subset, &file, Some(&reviewer)) {
        Ok(resolved) => CommentImport::Resolved(resolved),
        Err(e) => CommentImport::Malformed(e.to_string()),
    }
}
