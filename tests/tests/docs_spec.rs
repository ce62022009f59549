//! Every rule the code cites resolves inside the repository, and ARCHITECTURE.md stays a map.
//!
//! Code comments, docs, stage definitions, migrations and test names cite the project's spec
//! (`docs/spec/`, see its README): rule ids (`S-07`, `E-41`, `O-25`) resolve to a bold label or
//! heading in a `docs/spec/rules-*.md` file, `facts §N` to section N of `docs/spec/facts.md`,
//! `resolutions N` (also `resolution N`, `resolutions §N`, lists `12, 13` and ranges `16–18`)
//! to entry N of `docs/spec/resolutions.md`, and `DESIGN §N` to its row in
//! `docs/spec/README.md`. A citation that does not resolve fails the test with its file and line.
//!
//! ARCHITECTURE.md is held to at most 30 000 bytes and carries no issue numbers.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use regex::Regex;

const ARCHITECTURE_MAX_BYTES: usize = 30_000;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Extensions of the files whose comments may cite the spec.
const CITING: [&str; 6] = ["rs", "toml", "sql", "lua", "md", "sh"];

/// Every file under `dir` with one of the [`CITING`] extensions (and, with `bare`, files without
/// an extension, e.g. `scripts/test`), skipping build output and hidden directories.
fn citing_files(dir: &Path, bare: bool, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                citing_files(&path, bare, out);
            }
        } else {
            match path.extension().and_then(|e| e.to_str()) {
                Some(ext) if CITING.contains(&ext) => out.push(path),
                None if bare => out.push(path),
                _ => {}
            }
        }
    }
}

/// What `docs/spec/` defines.
#[derive(Debug, Default)]
struct Spec {
    /// Rule ids with a bold label (`**S-07**`) or a heading in a `rules-*.md` file.
    rules: BTreeSet<String>,
    /// Section numbers of `facts.md` (`## N.` headings).
    facts: BTreeSet<u32>,
    /// Entry numbers of `resolutions.md` (`### N.` headings).
    resolutions: BTreeSet<u32>,
    /// `DESIGN §N` rows of the README.
    design: BTreeSet<u32>,
}

impl Spec {
    fn read(dir: &Path) -> Self {
        let read = |name: &str| {
            std::fs::read_to_string(dir.join(name))
                .unwrap_or_else(|e| panic!("read docs/spec/{name}: {e}"))
        };
        let mut rules_text = String::new();
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("read docs/spec")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .collect();
        entries.sort();
        for path in entries {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_owned();
            if name.starts_with("rules-") && name.ends_with(".md") {
                rules_text.push_str(&read(&name));
                rules_text.push('\n');
            }
        }
        Self::parse(
            &rules_text,
            &read("facts.md"),
            &read("resolutions.md"),
            &read("README.md"),
        )
    }

    fn parse(rules: &str, facts: &str, resolutions: &str, readme: &str) -> Self {
        let bold = Regex::new(r"\*\*([SEO]-\d+)\*\*").unwrap();
        let heading = Regex::new(r"(?m)^#+\s+([SEO]-\d+)\b").unwrap();
        let fact = Regex::new(r"(?m)^##\s+§?(\d+)\.").unwrap();
        let resolution = Regex::new(r"(?m)^###\s+(\d+)\.").unwrap();
        let design = Regex::new(r"DESIGN §(\d+)").unwrap();
        let numbers = |re: &Regex, text: &str| -> BTreeSet<u32> {
            re.captures_iter(text)
                .filter_map(|c| c[1].parse().ok())
                .collect()
        };
        Self {
            rules: bold
                .captures_iter(rules)
                .chain(heading.captures_iter(rules))
                .map(|c| c[1].to_owned())
                .collect(),
            facts: numbers(&fact, facts),
            resolutions: numbers(&resolution, resolutions),
            design: numbers(&design, readme),
        }
    }
}

/// The citations of one source text that `spec` does not define, as `<label>:<line>: <what>`.
struct Citations {
    rule: Regex,
    facts: Regex,
    resolutions: Regex,
    design: Regex,
    number: Regex,
}

impl Citations {
    fn new() -> Self {
        // A list or range continues with `, N`, `and N`, `–N`, `..N` (a `§` optional for
        // resolutions, required for facts, where a bare number after a comma is prose).
        Self {
            rule: Regex::new(r"\b([SEO]-\d+)\b").unwrap(),
            facts: Regex::new(r"facts(?:\.md)?\s+§\s?\d+(?:\s*(?:,|;|and|–|-|\.\.)\s*§\s?\d+)*")
                .unwrap(),
            resolutions: Regex::new(
                r"\bresolutions?(?:\.md)?\s+§?\d+(?:(?:\s*(?:,|and)\s*|\s*(?:–|\.\.)\s*)§?\d+\b)*",
            )
            .unwrap(),
            design: Regex::new(r"\bDESIGN(?:\.md)?\s+§\s?(\d+)").unwrap(),
            number: Regex::new(r"(–|\.\.|-)?\s*§?(\d+)").unwrap(),
        }
    }

    /// The numbers a list or range citation names: `16–18` → 16, 17, 18; `12, 13` → 12, 13.
    fn numbers(&self, citation: &str) -> Vec<u32> {
        let mut out: Vec<u32> = Vec::new();
        for c in self.number.captures_iter(citation) {
            let Ok(n) = c[2].parse::<u32>() else { continue };
            match (c.get(1), out.last().copied()) {
                (Some(_), Some(from)) if from < n && n - from <= 20 => out.extend(from + 1..=n),
                _ => out.push(n),
            }
        }
        out
    }

    fn unresolved(&self, label: &str, text: &str, spec: &Spec) -> Vec<String> {
        let mut out = Vec::new();
        for (idx, line) in text.lines().enumerate() {
            let at = format!("{label}:{}", idx + 1);
            for c in self.rule.captures_iter(line) {
                if !spec.rules.contains(&c[1]) {
                    out.push(format!(
                        "{at}: rule `{}` is not in docs/spec/rules-*.md",
                        &c[1]
                    ));
                }
            }
            for m in self.facts.find_iter(line) {
                for n in self.numbers(m.as_str()) {
                    if !spec.facts.contains(&n) {
                        out.push(format!(
                            "{at}: `{}`: no section {n} in docs/spec/facts.md",
                            m.as_str()
                        ));
                    }
                }
            }
            for m in self.resolutions.find_iter(line) {
                for n in self.numbers(m.as_str()) {
                    if !spec.resolutions.contains(&n) {
                        out.push(format!(
                            "{at}: `{}`: no entry {n} in docs/spec/resolutions.md",
                            m.as_str()
                        ));
                    }
                }
            }
            for c in self.design.captures_iter(line) {
                let n: u32 = c[1].parse().unwrap_or(0);
                if !spec.design.contains(&n) {
                    out.push(format!(
                        "{at}: `{}`: no `DESIGN §{n}` row in docs/spec/README.md",
                        &c[0]
                    ));
                }
            }
        }
        out
    }
}

#[test]
fn every_cited_rule_resolves_in_docs_spec() {
    let root = repo_root();
    let spec = Spec::read(&root.join("docs/spec"));
    // The spec was read: all three rule files, the facts' nine sections.
    for id in ["S-01", "S-101", "E-01", "E-56", "O-01", "O-66"] {
        assert!(spec.rules.contains(id), "docs/spec defines no `{id}`");
    }
    assert!(
        (1..=9).all(|n| spec.facts.contains(&n)),
        "facts.md sections: {:?}",
        spec.facts
    );

    // The code (`.rs`) and what ships beside it: stage definitions, runtime and tool profiles,
    // migrations, Lua scripts, scripts, the docs (the spec itself included).
    let mut files = Vec::new();
    for dir in ["crates", "runners", "tests", "workflows", "docs"] {
        citing_files(&root.join(dir), false, &mut files);
    }
    citing_files(&root.join("scripts"), true, &mut files);
    files.extend(["README.md", "ARCHITECTURE.md", "Cargo.toml"].map(|f| root.join(f)));
    let n_rs = files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "rs"))
        .count();
    assert!(n_rs > 200, "found only {n_rs} .rs files");
    let citations = Citations::new();
    let mut unresolved = Vec::new();
    let mut n_rules = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        n_rules += citations.rule.find_iter(&text).count();
        let label = file
            .strip_prefix(&root)
            .unwrap_or(file)
            .display()
            .to_string();
        unresolved.extend(citations.unresolved(&label, &text, &spec));
    }
    assert!(
        n_rules > 500,
        "found only {n_rules} rule citations: is the scan reading the code?"
    );
    assert!(
        unresolved.is_empty(),
        "{} citations do not resolve in docs/spec:\n{}",
        unresolved.len(),
        unresolved.join("\n")
    );
}

#[test]
fn an_unknown_citation_is_named_with_its_line() {
    let spec = Spec::parse(
        "- **S-07** hard 0 is a failed gate.\n#### E-41 both arms failed verify\n",
        "## 1. Training package\n## 3. Train sessions\n",
        "### 1. Exit classification\n### 16. Counting\n### 17. A judge reply missing an item\n",
        "| DESIGN §4 | engine |\n",
    );
    let c = Citations::new();
    // Ids assembled at run time, so this file's own text cites nothing unknown.
    let unknown_rule = format!("{}-{}", "O", 99);
    let text = format!(
        "// S-07, E-41; facts §1, §3; resolutions 1, 16–17; DESIGN §4\n// {unknown_rule}\n\
         // facts §{}\n// resolutions 16–{}\n// resolution {}\n// DESIGN §{}\n",
        2, 18, 5, 9
    );
    let found = c.unresolved("x.rs", &text, &spec);
    assert_eq!(found.len(), 5, "{found:#?}");
    assert!(
        found[0].starts_with(&format!("x.rs:2: rule `{unknown_rule}`")),
        "{found:#?}"
    );
    assert!(
        found[1].starts_with("x.rs:3:") && found[1].contains("no section 2"),
        "{found:#?}"
    );
    assert!(
        found[2].starts_with("x.rs:4:") && found[2].contains("no entry 18"),
        "{found:#?}"
    );
    assert!(
        found[3].starts_with("x.rs:5:") && found[3].contains("no entry 5"),
        "{found:#?}"
    );
    assert!(
        found[4].starts_with("x.rs:6:") && found[4].contains("DESIGN §9"),
        "{found:#?}"
    );
    // Prose that merely mentions resolutions, or a number after a facts citation, is no citation.
    let prose = "// a sampled fraction of resolutions to it; facts §3, 600 s; UTF-8; ISO-8601\n";
    assert!(c.unresolved("y.rs", prose, &spec).is_empty());
    assert_eq!(c.numbers("resolutions 16–18"), [16, 17, 18]);
    assert_eq!(c.numbers("resolutions §8–§9"), [8, 9]);
    assert_eq!(c.numbers("resolutions 6..8"), [6, 7, 8]);
    assert_eq!(c.numbers("resolutions 12, 13, 20"), [12, 13, 20]);
}

#[test]
fn architecture_md_is_a_short_map_without_issue_numbers() {
    let path = repo_root().join("ARCHITECTURE.md");
    let text = std::fs::read_to_string(&path).expect("read ARCHITECTURE.md");
    assert!(
        text.len() <= ARCHITECTURE_MAX_BYTES,
        "ARCHITECTURE.md is {} bytes, over the {ARCHITECTURE_MAX_BYTES}-byte budget: move detail into the rustdoc of the code it describes",
        text.len()
    );
    let issue = Regex::new(r"(?i)\b(issues?|PR)\s*#?\d+|(?:^|[\s(])#\d+").unwrap();
    let found: Vec<String> = text
        .lines()
        .enumerate()
        .filter(|(_, line)| issue.is_match(line))
        .map(|(idx, line)| format!("ARCHITECTURE.md:{}: {line}", idx + 1))
        .collect();
    assert!(
        found.is_empty(),
        "ARCHITECTURE.md names issues; say what the code does instead:\n{}",
        found.join("\n")
    );
}
