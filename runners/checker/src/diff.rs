//! Unified-diff parsing for the `diff_size` dimension: changed `+`/`-` hunk lines and changed files.
//!
//! Pure Rust, no tool and no checkout (seed: SkillOpt, "Deterministic checker objective signal":
//! "parses the PR file patches, counts changed +/- hunk lines + changed files"). Hunk bodies are
//! consumed by the line counts in their `@@ -a,b +c,d @@` headers, so a removed line whose text
//! starts with `-- ` is counted as a change, never mistaken for a `---` file header.

use serde::{Deserialize, Serialize};

use crate::CheckerError;

/// One file touched by a diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangedFile {
    /// Path relative to the repository root: the new path, or the old one for a deleted file
    /// (`a/`/`b/` prefixes and trailing timestamps stripped).
    pub path: String,
    /// True when the file does not exist after the change (`+++ /dev/null` or `deleted file mode`).
    pub is_deleted: bool,
    /// True for `Binary files … differ` / `GIT binary patch` entries (no countable lines).
    pub is_binary: bool,
    /// `+` lines in this file's hunks.
    pub added_lines: u64,
    /// `-` lines in this file's hunks.
    pub removed_lines: u64,
}

/// Line and file counts of a unified diff.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffStats {
    /// Every changed file, in diff order.
    pub files: Vec<ChangedFile>,
}

impl DiffStats {
    /// Sum of `+` hunk lines over all files (headers `+++` excluded).
    pub fn added_lines(&self) -> u64 {
        self.files.iter().map(|f| f.added_lines).sum()
    }

    /// Sum of `-` hunk lines over all files (headers `---` excluded).
    pub fn removed_lines(&self) -> u64 {
        self.files.iter().map(|f| f.removed_lines).sum()
    }

    /// Changed lines = added + removed; the quantity `diff_size` normalizes.
    pub fn changed_lines(&self) -> u64 {
        self.added_lines() + self.removed_lines()
    }

    /// Number of changed files (including binary, renamed, mode-only and deleted files).
    pub fn changed_files(&self) -> usize {
        self.files.len()
    }

    /// Paths that exist after the change (deleted files left out), for language detection.
    pub fn head_paths(&self) -> impl Iterator<Item = &str> {
        self.files
            .iter()
            .filter(|f| !f.is_deleted)
            .map(|f| f.path.as_str())
    }
}

/// Parses unified diff text (`git diff`, `git format-patch`, `diff -u`/`diff -ru`) into counts.
///
/// Text outside file sections (commit messages, `index` lines, `similarity` lines) is ignored.
///
/// # Errors
/// [`CheckerError::Diff`] when a hunk header is malformed, appears before any file header, or a
/// hunk body holds more `+`/`-` lines than its header announces.
pub fn parse_unified_diff(text: &str) -> Result<DiffStats, CheckerError> {
    let mut parser = Parser::default();
    for (idx, line) in text.lines().enumerate() {
        parser.line(idx + 1, line)?;
    }
    parser.finish();
    Ok(parser.stats)
}

#[derive(Default)]
struct Parser {
    stats: DiffStats,
    current: Option<FileState>,
    old_remaining: u64,
    new_remaining: u64,
}

struct FileState {
    file: ChangedFile,
    has_git_header: bool,
    has_minus_header: bool,
    has_hunks: bool,
}

impl Parser {
    fn line(&mut self, line_no: usize, line: &str) -> Result<(), CheckerError> {
        if self.old_remaining > 0 || self.new_remaining > 0 {
            if self.hunk_line(line_no, line)? {
                return Ok(());
            }
            // A line that cannot be part of a hunk ends it early (truncated hunk): read as a header.
            self.old_remaining = 0;
            self.new_remaining = 0;
        }
        if let Some(rest) = line.strip_prefix("diff --git ") {
            self.start_file(git_header_path(rest), true);
        } else if let Some(rest) = line.strip_prefix("--- ") {
            let path = header_path(rest);
            let continues_git_header = self
                .current
                .as_ref()
                .is_some_and(|c| c.has_git_header && !c.has_minus_header && !c.has_hunks);
            if !continues_git_header {
                self.start_file(path.clone().unwrap_or_default(), false);
            }
            let current = self.current.as_mut().expect("file started above");
            current.has_minus_header = true;
            if let Some(path) = path {
                current.file.path = path;
            }
        } else if let Some(rest) = line.strip_prefix("+++ ") {
            if let Some(current) = self.current.as_mut() {
                match header_path(rest) {
                    Some(path) => current.file.path = path,
                    None => current.file.is_deleted = true,
                }
            }
        } else if line.starts_with("@@") {
            let (old_len, new_len) = parse_hunk_header(line).ok_or_else(|| CheckerError::Diff {
                line: line_no,
                message: format!("malformed hunk header `{line}`"),
            })?;
            let Some(current) = self.current.as_mut() else {
                return Err(CheckerError::Diff {
                    line: line_no,
                    message: "hunk header before any file header".into(),
                });
            };
            current.has_hunks = true;
            self.old_remaining = old_len;
            self.new_remaining = new_len;
        } else if let Some(current) = self.current.as_mut() {
            if line.starts_with("deleted file mode") {
                current.file.is_deleted = true;
            } else if let Some(path) = line.strip_prefix("rename to ") {
                current.file.path = path.to_string();
            } else if line.starts_with("GIT binary patch")
                || (line.starts_with("Binary files ") && line.ends_with(" differ"))
            {
                current.file.is_binary = true;
            }
        }
        Ok(())
    }

    /// Consumes one hunk body line; `Ok(false)` when the line cannot belong to a hunk.
    fn hunk_line(&mut self, line_no: usize, line: &str) -> Result<bool, CheckerError> {
        let current = self
            .current
            .as_mut()
            .expect("hunks only start inside a file");
        let over = |what: &str| CheckerError::Diff {
            line: line_no,
            message: format!("hunk has more {what} lines than its header announces"),
        };
        match line.as_bytes().first() {
            Some(b'+') => {
                self.new_remaining = self
                    .new_remaining
                    .checked_sub(1)
                    .ok_or_else(|| over("added"))?;
                current.file.added_lines += 1;
            }
            Some(b'-') => {
                self.old_remaining = self
                    .old_remaining
                    .checked_sub(1)
                    .ok_or_else(|| over("removed"))?;
                current.file.removed_lines += 1;
            }
            // An empty line is a context line whose trailing space an editor or mailer stripped.
            Some(b' ') | None => {
                self.old_remaining = self.old_remaining.saturating_sub(1);
                self.new_remaining = self.new_remaining.saturating_sub(1);
            }
            Some(b'\\') => {}
            Some(_) => return Ok(false),
        }
        Ok(true)
    }

    fn start_file(&mut self, path: String, has_git_header: bool) {
        self.finish();
        self.current = Some(FileState {
            file: ChangedFile {
                path,
                is_deleted: false,
                is_binary: false,
                added_lines: 0,
                removed_lines: 0,
            },
            has_git_header,
            has_minus_header: false,
            has_hunks: false,
        });
    }

    fn finish(&mut self) {
        if let Some(state) = self.current.take() {
            self.stats.files.push(state.file);
        }
    }
}

/// Path from a `---`/`+++` header; `None` for `/dev/null`.
fn header_path(rest: &str) -> Option<String> {
    let path = rest.split('\t').next().unwrap_or(rest).trim_end();
    let path = path.trim_matches('"');
    if path == "/dev/null" {
        return None;
    }
    Some(strip_side_prefix(path).to_string())
}

/// New-side path from the rest of a `diff --git a/x b/y` line (the text after the last ` b/`).
fn git_header_path(rest: &str) -> String {
    let rest = rest.trim_end();
    match rest.rfind(" b/").or_else(|| rest.rfind(" \"b/")) {
        Some(idx) => strip_side_prefix(rest[idx + 1..].trim_matches('"')).to_string(),
        None => rest.to_string(),
    }
}

fn strip_side_prefix(path: &str) -> &str {
    path.strip_prefix("a/")
        .or_else(|| path.strip_prefix("b/"))
        .unwrap_or(path)
}

/// `(old_len, new_len)` from `@@ -a[,b] +c[,d] @@ …`; a missing length means 1.
fn parse_hunk_header(line: &str) -> Option<(u64, u64)> {
    let mut parts = line.strip_prefix("@@ ")?.split(' ');
    let old = parts.next()?.strip_prefix('-')?;
    let new = parts.next()?.strip_prefix('+')?;
    if parts.next()? != "@@" {
        return None;
    }
    Some((range_len(old)?, range_len(new)?))
}

fn range_len(range: &str) -> Option<u64> {
    match range.split_once(',') {
        Some((start, len)) => {
            start.parse::<u64>().ok()?;
            len.parse().ok()
        }
        None => {
            range.parse::<u64>().ok()?;
            Some(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(files, added, removed)` for `text`.
    fn check(text: &str, expected: (usize, u64, u64)) {
        let stats = parse_unified_diff(text).unwrap();
        assert_eq!(
            (
                stats.changed_files(),
                stats.added_lines(),
                stats.removed_lines()
            ),
            expected,
            "{text}\n{stats:#?}"
        );
    }

    #[test]
    fn counts_hunk_lines_not_headers() {
        check(
            "diff --git a/src/lib.rs b/src/lib.rs\nindex 1..2 100644\n--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,3 +1,3 @@\n fn a() {}\n-fn b() {}\n+fn c() {}\n fn d() {}\n",
            (1, 1, 1),
        );
    }

    #[test]
    fn removed_line_starting_with_dashes_is_a_change() {
        // The removed line's text is `-- sql comment`, so it reads `--- sql comment`.
        check(
            "--- a/q.sql\n+++ b/q.sql\n@@ -1,2 +1,1 @@\n--- sql comment\n select 1;\n",
            (1, 0, 1),
        );
        check(
            "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+++ counter\n",
            (1, 1, 1),
        );
    }

    #[test]
    fn several_files_new_deleted_binary_and_mode_only() {
        let text = "\
commit message line that mentions --- and +++ and @@
diff --git a/new.py b/new.py
new file mode 100644
--- /dev/null
+++ b/new.py
@@ -0,0 +1,2 @@
+a = 1
+b = 2
diff --git a/old.go b/old.go
deleted file mode 100644
--- a/old.go
+++ /dev/null
@@ -1,3 +0,0 @@
-package x
-
-func f() {}
diff --git a/logo.png b/logo.png
Binary files a/logo.png and b/logo.png differ
diff --git a/run.sh b/run.sh
old mode 100644
new mode 100755
";
        check(text, (4, 2, 3));
        let stats = parse_unified_diff(text).unwrap();
        let paths: Vec<_> = stats.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["new.py", "old.go", "logo.png", "run.sh"]);
        assert!(stats.files[1].is_deleted);
        assert!(stats.files[2].is_binary);
        assert_eq!(
            stats.head_paths().collect::<Vec<_>>(),
            ["new.py", "logo.png", "run.sh"]
        );
    }

    #[test]
    fn plain_diff_u_with_timestamps_and_no_newline_marker() {
        check(
            "--- a/x.txt\t2024-01-01 00:00:00\n+++ b/x.txt\t2024-01-02 00:00:00\n@@ -1 +1,2 @@\n-x\n\\ No newline at end of file\n+x\n+y\n--- a/y.txt\n+++ b/y.txt\n@@ -5,0 +6 @@\n+z\n",
            (2, 3, 1),
        );
        let stats =
            parse_unified_diff("--- a/x.txt\t2024\n+++ b/x.txt\t2024\n@@ -1 +1 @@\n-x\n+y\n")
                .unwrap();
        assert_eq!(stats.files[0].path, "x.txt");
    }

    #[test]
    fn rename_takes_new_path() {
        let stats = parse_unified_diff(
            "diff --git a/old name.rs b/new name.rs\nsimilarity index 90%\nrename from old name.rs\nrename to new name.rs\n--- a/old name.rs\n+++ b/new name.rs\n@@ -1 +1 @@\n-a\n+b\n",
        )
        .unwrap();
        assert_eq!(stats.files.len(), 1);
        assert_eq!(stats.files[0].path, "new name.rs");
        assert_eq!(stats.changed_lines(), 2);
    }

    #[test]
    fn empty_diff_has_nothing() {
        check("", (0, 0, 0));
    }

    #[test]
    fn malformed_input_is_an_error() {
        for text in [
            "@@ -1 +1 @@\n-a\n+b\n",
            "--- a/x\n+++ b/x\n@@ -x +1 @@\n",
            "--- a/x\n+++ b/x\n@@ -1,1 +1,1 @@\n-a\n-b\n",
        ] {
            let err = parse_unified_diff(text).unwrap_err();
            assert!(matches!(err, CheckerError::Diff { .. }), "{text}: {err}");
        }
    }
}
