//! The demo's stand-in for the human reviewer: a documented, deterministic rule applied to the
//! blind review packet exactly as a person would see it.
//!
//! It reads only what a human reads — `feedback.yml` (the unfilled template) and
//! `items/*.md` (each item's context and its blind options) — and never `.assignments.json`, so
//! it cannot know which artifact stands behind a label.
//!
//! **The rule.** For every item, the changed files are the paths of the `diff --git a/P b/P`
//! lines in the item's context (else the paths of its `--stat` lines). Each option is scored by
//!
//! 1. how many changed files it names (a file counts when the option contains its path or its
//!    file name) — more is better;
//! 2. its length in characters — shorter is better;
//! 3. its label — alphabetical, to break the remaining ties.
//!
//! The ranking is strict (`b > a > c`). Traits follow from the same rule: the best option is
//! `useful` for naming the changed files (when it names any) and for being the shortest (when
//! it is); the worst option is `rejected` for naming none of them (when so) and for being the
//! longest (when so); when neither applies the option gets no trait (the ranking alone is the
//! evidence: a trait is a line the optimizer may learn, so it must say something about the
//! option, never name the rule that ranked it).
//! `required_improvements` ask for what even the best option lacks: every changed file named,
//! and a summary under [`MAX_SUMMARY_CHARS`] characters.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::path::Path;

use skillforge_contract::{
    FEEDBACK_FILE, FeedbackEntry, RankingText, parse_feedback_yml, render_feedback_yml,
};

/// Reviewer name the demo writes into `feedback.yml`: it says it is a stand-in wherever a
/// feedback row shows its reviewer (the rows, the training package, the console,
/// `candidate show`).
pub const DEMO_REVIEWER: &str = "demo-stand-in";
/// What `candidate show` says of the demo's reviewer.
pub const STAND_IN_WORDS: &str =
    "the demo's stand-in reviewer: a fixed rule, not a person; its rows count as human review";
/// Longest summary the rule accepts without asking for a shorter one, in characters.
pub const MAX_SUMMARY_CHARS: usize = 240;
/// Directory of the per-item files inside a packet.
const ITEMS_DIR: &str = "items";

/// Useful trait: the option names changed files.
pub const NAMES_FILES: &str = "names the files the change touches";
/// Useful trait: the option is the shortest.
pub const SHORTEST: &str = "short and to the point";
/// Rejected trait: the option names none of the changed files.
pub const NAMES_NO_FILE: &str = "does not name any file the change touches";
/// Rejected trait: the option is the longest.
pub const LONGEST: &str = "longer than it needs to be";
/// Required improvement: name every changed file.
pub const NAME_EVERY_FILE: &str = "name every file the change touches";

/// One item as the packet shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemView {
    /// Item id (`Item id: `…`` line).
    pub item_id: String,
    /// Changed files named by the item's context, in order, without duplicates.
    pub files: Vec<String>,
    /// Blind options `(label lowercased, text)` in the packet's order.
    pub options: Vec<(String, String)>,
}

/// How the rule scored one option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionScore {
    /// Blind label, lowercase.
    pub label: String,
    /// Changed files the option names.
    pub n_files_named: usize,
    /// Length of the option text in characters.
    pub n_chars: usize,
}

/// What the reviewer wrote for a packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewDone {
    /// Items answered.
    pub n_items: usize,
    /// `(item id, ranking)` per item.
    pub rankings: Vec<(String, String)>,
}

/// Paths of the changed files in a commit's text: `diff --git a/P b/P` lines (the `b/` side),
/// else `git show --stat` lines (` P | 12 ++--`). In order, without duplicates.
pub fn diff_files(input: &str) -> Vec<String> {
    let mut files: Vec<String> = Vec::new();
    let mut push = |path: &str| {
        let path = path.trim();
        if !path.is_empty() && !files.iter().any(|f| f == path) {
            files.push(path.to_owned());
        }
    };
    let mut has_diff_header = false;
    for line in input.lines() {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            has_diff_header = true;
            if let Some((_, b)) = rest.split_once(" b/") {
                push(b);
            }
        }
    }
    if !has_diff_header {
        for line in input.lines() {
            if let Some((path, count)) = line.split_once(" | ")
                && count
                    .trim_start()
                    .starts_with(|c: char| c.is_ascii_digit() || c == 'B')
            {
                push(path);
            }
        }
    }
    files
}

/// Whether `text` names `file`: its path, or its file name (the part after the last `/`).
fn names_file(text: &str, file: &str) -> bool {
    let name = file.rsplit('/').next().unwrap_or(file);
    text.contains(file) || (!name.is_empty() && text.contains(name))
}

/// Scores every option of `item` and orders them best first (see the module docs).
pub fn rank(item: &ItemView) -> Vec<OptionScore> {
    let mut scores: Vec<OptionScore> = item
        .options
        .iter()
        .map(|(label, text)| OptionScore {
            label: label.clone(),
            n_files_named: item.files.iter().filter(|f| names_file(text, f)).count(),
            n_chars: text.chars().count(),
        })
        .collect();
    scores.sort_by(|x, y| {
        (Reverse(x.n_files_named), x.n_chars, &x.label).cmp(&(
            Reverse(y.n_files_named),
            y.n_chars,
            &y.label,
        ))
    });
    scores
}

/// The feedback entry for one item: its strict ranking, traits and required improvements.
pub fn review_item(item: &ItemView) -> FeedbackEntry {
    let ranked = rank(item);
    let mut entry = FeedbackEntry {
        item_id: item.item_id.clone(),
        ..FeedbackEntry::default()
    };
    let (Some(best), Some(worst)) = (ranked.first(), ranked.last()) else {
        entry.choice = "skip".into();
        return entry;
    };
    let ranking: Vec<String> = ranked.iter().map(|s| s.label.to_uppercase()).collect();
    entry.ranking = Some(RankingText::One(ranking.join(" > ")));
    let shortest = ranked.iter().map(|s| s.n_chars).min().unwrap_or(0);
    let longest = ranked.iter().map(|s| s.n_chars).max().unwrap_or(0);
    let mut useful = Vec::new();
    if best.n_files_named > 0 {
        useful.push(NAMES_FILES.to_owned());
    }
    if best.n_chars == shortest && shortest < longest {
        useful.push(SHORTEST.to_owned());
    }
    if ranked.len() > 1 {
        if !useful.is_empty() {
            entry.useful_traits.insert(best.label.clone(), useful);
        }
        let mut rejected = Vec::new();
        if !item.files.is_empty() && worst.n_files_named == 0 {
            rejected.push(NAMES_NO_FILE.to_owned());
        }
        if worst.n_chars == longest && shortest < longest {
            rejected.push(LONGEST.to_owned());
        }
        if !rejected.is_empty() {
            entry.rejected_traits.insert(worst.label.clone(), rejected);
        }
    }
    if best.n_files_named < item.files.len() {
        entry.required_improvements.push(NAME_EVERY_FILE.to_owned());
    }
    if best.n_chars > MAX_SUMMARY_CHARS {
        entry.required_improvements.push(format!(
            "keep the summary under {MAX_SUMMARY_CHARS} characters"
        ));
    }
    entry.reasoning = format!(
        "demo rule: named files {} of {}, {} chars (best); ranked by files named, then length, then label",
        best.n_files_named,
        item.files.len(),
        best.n_chars
    );
    entry
}

/// Splits a packet item file into `## ` sections: `(heading, first fenced block)`.
fn sections(text: &str) -> Vec<(String, Option<String>)> {
    let mut out: Vec<(String, Option<String>)> = Vec::new();
    let mut fence: Option<(String, Vec<&str>)> = None;
    for line in text.lines() {
        if let Some((close, body)) = &mut fence {
            if line == close {
                if let Some(last) = out.last_mut()
                    && last.1.is_none()
                {
                    last.1 = Some(body.join("\n"));
                }
                fence = None;
            } else {
                body.push(line);
            }
            continue;
        }
        if let Some(heading) = line.strip_prefix("## ") {
            out.push((heading.trim().to_owned(), None));
        } else if line.len() >= 3 && line.chars().all(|c| c == '`') && !out.is_empty() {
            fence = Some((line.to_owned(), Vec::new()));
        }
    }
    out
}

/// Parses one `items/NNN-<id>.md` file of a blind packet.
///
/// # Errors
/// A message when the file has no `Item id:` line.
pub fn parse_item_file(text: &str) -> Result<ItemView, String> {
    let item_id = text
        .lines()
        .find_map(|l| l.strip_prefix("Item id: "))
        .map(|id| id.trim().trim_matches('`').to_owned())
        .filter(|id| !id.is_empty())
        .ok_or("no `Item id:` line")?;
    let mut files = Vec::new();
    let mut options = Vec::new();
    for (heading, block) in sections(text) {
        if heading == "Context" {
            let input = block
                .as_deref()
                .and_then(|b| serde_json::from_str::<serde_json::Value>(b).ok())
                .and_then(|v| v.get("input").and_then(|i| i.as_str()).map(str::to_owned))
                .unwrap_or_default();
            files = diff_files(&input);
        } else if let Some(label) = heading.strip_prefix("Option ") {
            options.push((label.trim().to_lowercase(), block.unwrap_or_default()));
        }
    }
    Ok(ItemView {
        item_id,
        files,
        options,
    })
}

/// Fills `<packet>/feedback.yml` by the rule: reads the template and every `items/*.md`, writes
/// reviewer [`DEMO_REVIEWER`] and one entry per item. Never opens `.assignments.json`.
///
/// # Errors
/// A message naming the file that could not be read, parsed or written, or an item of
/// `feedback.yml` without a file.
pub fn fill_packet(dir: &Path) -> Result<ReviewDone, String> {
    let feedback_path = dir.join(FEEDBACK_FILE);
    let text = std::fs::read_to_string(&feedback_path)
        .map_err(|e| format!("read `{}`: {e}", feedback_path.display()))?;
    let mut feedback =
        parse_feedback_yml(&text).map_err(|e| format!("`{}`: {e}", feedback_path.display()))?;
    let items_dir = dir.join(ITEMS_DIR);
    let mut views = BTreeMap::new();
    let entries = std::fs::read_dir(&items_dir)
        .map_err(|e| format!("read `{}`: {e}", items_dir.display()))?;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "md") {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("read `{}`: {e}", path.display()))?;
            let view = parse_item_file(&text).map_err(|e| format!("`{}`: {e}", path.display()))?;
            views.insert(view.item_id.clone(), view);
        }
    }
    feedback.reviewer = DEMO_REVIEWER.to_owned();
    let mut rankings = Vec::new();
    for entry in &mut feedback.items {
        let view = views.get(&entry.item_id).ok_or_else(|| {
            format!(
                "item `{}` has no file in `{}`",
                entry.item_id,
                items_dir.display()
            )
        })?;
        *entry = review_item(view);
        let ranking = entry
            .ranking
            .as_ref()
            .map(|r| r.parts().join(" "))
            .unwrap_or_else(|| "skip".into());
        rankings.push((entry.item_id.clone(), ranking));
    }
    let out = render_feedback_yml(&feedback).map_err(|e| format!("render feedback.yml: {e}"))?;
    std::fs::write(&feedback_path, out)
        .map_err(|e| format!("write `{}`: {e}", feedback_path.display()))?;
    Ok(ReviewDone {
        n_items: feedback.items.len(),
        rankings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory removed on drop (the CLI crate has no tempfile dependency).
    struct TempDir(std::path::PathBuf);

    impl TempDir {
        fn new(name: &str) -> Self {
            let dir =
                std::env::temp_dir().join(format!("skillforge-demo-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Self(dir)
        }

        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn item(files: &[&str], options: &[(&str, &str)]) -> ItemView {
        ItemView {
            item_id: "c-1".into(),
            files: files.iter().map(|f| (*f).to_owned()).collect(),
            options: options
                .iter()
                .map(|(l, t)| ((*l).to_owned(), (*t).to_owned()))
                .collect(),
        }
    }

    fn ranking(entry: &FeedbackEntry) -> String {
        entry
            .ranking
            .as_ref()
            .map(|r| r.parts().join("").replace(' ', ""))
            .unwrap_or_default()
    }

    #[test]
    fn diff_files_reads_diff_headers_else_stat_lines() {
        let check =
            |input: &str, expected: &[&str]| assert_eq!(diff_files(input), expected, "{input}");
        check(
            "diff --git a/src/lib.rs b/src/lib.rs\n+x\ndiff --git a/README.md b/README.md\n",
            &["src/lib.rs", "README.md"],
        );
        check("diff --git a/old.rs b/new.rs\n", &["new.rs"]);
        check(
            " src/a.rs | 12 ++++--\n docs/b.md | 3 +\n 2 files changed\n",
            &["src/a.rs", "docs/b.md"],
        );
        check(" logo.png | Bin 0 -> 12 bytes\n", &["logo.png"]);
        check(
            "diff --git a/a.rs b/a.rs\n a.rs | 1 +\n b.rs | 2 +\n",
            &["a.rs"],
        );
        check("just words | and a pipe\n", &[]);
        check("", &[]);
    }

    #[test]
    fn rank_prefers_named_files_then_shorter_then_label() {
        let check = |files: &[&str], options: &[(&str, &str)], expected: &str| {
            assert_eq!(
                ranking(&review_item(&item(files, options))),
                expected,
                "{options:?}"
            );
        };
        // Files named beat length.
        check(
            &["src/lib.rs"],
            &[("a", "short"), ("b", "a much longer text about src/lib.rs")],
            "B>A",
        );
        // The file name alone counts.
        check(
            &["src/parser.rs"],
            &[("a", "fixes parser.rs"), ("b", "fix")],
            "A>B",
        );
        // Same files named: shorter first.
        check(
            &["x.rs"],
            &[
                ("a", "x.rs and more words"),
                ("b", "x.rs"),
                ("c", "nothing"),
            ],
            "B>A>C",
        );
        // Full ties: label order.
        check(&[], &[("c", "same"), ("a", "same"), ("b", "same")], "A>B>C");
    }

    #[test]
    fn traits_and_improvements_follow_the_rule() {
        let entry = review_item(&item(
            &["src/a.rs", "src/b.rs"],
            &[
                ("a", "touches src/a.rs"),
                ("b", "a long option that names nothing at all"),
            ],
        ));
        assert_eq!(entry.useful_traits["a"], [NAMES_FILES, SHORTEST]);
        assert_eq!(entry.rejected_traits["b"], [NAMES_NO_FILE, LONGEST]);
        assert_eq!(
            entry.required_improvements,
            [NAME_EVERY_FILE],
            "the best names one file of two"
        );
        let long = "word ".repeat(60);
        let entry = review_item(&item(&[], &[("a", &long), ("b", &long)]));
        assert!(
            entry.useful_traits.is_empty() && entry.rejected_traits.is_empty(),
            "no trait applies to equal options, and none names the rule: {entry:?}"
        );
        assert_eq!(
            entry.required_improvements,
            [format!(
                "keep the summary under {MAX_SUMMARY_CHARS} characters"
            )]
        );
        let entry = review_item(&item(&["a.rs"], &[("a", "a.rs")]));
        assert!(
            entry.useful_traits.is_empty()
                && entry.rejected_traits.is_empty()
                && entry.required_improvements.is_empty()
        );
        assert_eq!(review_item(&item(&[], &[])).choice, "skip");
    }

    const ITEM_FILE: &str = "# Item 1: Summarize abc\n\nItem id: `c-abc`\n\n## Context\n\n```\n{\n  \"request\": \"r\",\n  \"input\": \"subject\\n\\ndiff --git a/src/x.rs b/src/x.rs\\n+```\\n\"\n}\n```\n\n\
## Option A\n\n````\nmentions x.rs\n```\nstill option a\n````\n\n## Option B\n\n```\nnothing\n```\n";

    #[test]
    fn parses_a_packet_item_file_with_nested_fences() {
        let view = parse_item_file(ITEM_FILE).unwrap();
        assert_eq!(view.item_id, "c-abc");
        assert_eq!(view.files, ["src/x.rs"]);
        assert_eq!(
            view.options,
            [
                (
                    "a".to_owned(),
                    "mentions x.rs\n```\nstill option a".to_owned()
                ),
                ("b".to_owned(), "nothing".to_owned())
            ]
        );
        assert!(parse_item_file("# no id\n").is_err());
    }

    #[test]
    fn fill_packet_writes_ranked_feedback_without_reading_assignments() {
        let dir = TempDir::new("fill-packet");
        std::fs::create_dir_all(dir.path().join("items")).unwrap();
        std::fs::write(dir.path().join("items/001-c-abc.md"), ITEM_FILE).unwrap();
        std::fs::write(
            dir.path().join(FEEDBACK_FILE),
            "run_id: r1\nreviewer: ''\nitems:\n- item_id: c-abc\n  choice: ''\n  ranking: ''\n",
        )
        .unwrap();
        // A corrupt assignments file proves it is never read.
        std::fs::write(dir.path().join(".assignments.json"), "not json").unwrap();
        let done = fill_packet(dir.path()).unwrap();
        assert_eq!(done.rankings, [("c-abc".to_owned(), "A > B".to_owned())]);
        let written =
            parse_feedback_yml(&std::fs::read_to_string(dir.path().join(FEEDBACK_FILE)).unwrap())
                .unwrap();
        assert_eq!(written.reviewer, DEMO_REVIEWER);
        assert_eq!(written.items[0].useful_traits["a"], [NAMES_FILES]);
        std::fs::write(
            dir.path().join(FEEDBACK_FILE),
            "run_id: r1\nitems:\n- item_id: missing\n",
        )
        .unwrap();
        assert!(fill_packet(dir.path()).unwrap_err().contains("missing"));
    }
}
