//! The demo's view of a real git repository: where it is, its recent commits and merges, and
//! each commit as a review item (subject, `--stat`, a capped diff). Plain `git` processes; the
//! repository is only read.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::anyhow;
use skillforge_skillopt::train::items::ItemSpec;

use crate::exit::CliError;

/// Most diff bytes an item carries (the rest is cut at a line boundary and said so).
pub const MAX_DIFF_BYTES: usize = 3_000;
/// Most stat bytes an item carries.
const MAX_STAT_BYTES: usize = 1_500;

/// A git work tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    /// Absolute path of the work tree's top level.
    pub root: PathBuf,
    /// `local/<directory name>`: the `owner/repo` name the demo records for it.
    pub slug: String,
}

/// One commit as the demo uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    /// Full SHA.
    pub sha: String,
    /// Parent SHAs (first parent first; none for a root commit).
    pub parents: Vec<String>,
    /// Subject line.
    pub subject: String,
    /// Message body after the subject.
    pub body: String,
}

impl Commit {
    /// The first 12 hex digits of the SHA.
    pub fn short(&self) -> &str {
        &self.sha[..self.sha.len().min(12)]
    }
}

/// Which commits [`recent`] lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// Commits with at most one parent, newest first.
    NonMerges,
    /// Merge commits on the first-parent history, newest first.
    Merges,
    /// Non-merge commits on the first-parent history that have a parent, newest first.
    MainlineCommits,
}

/// Runs `git -C root ARGS`: stdout, or `Err(Ok(stderr))` when git failed, `Err(Err(..))` when
/// it could not run.
fn git_raw(root: &Path, args: &[&str]) -> Result<String, Result<String, CliError>> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .map_err(|e| Err(CliError::env(anyhow!("run git (is it installed?): {e}"))))?;
    if !out.status.success() {
        return Err(Ok(String::from_utf8_lossy(&out.stderr).trim().to_owned()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn git(root: &Path, args: &[&str]) -> Result<String, CliError> {
    git_raw(root, args).map_err(|e| match e {
        Ok(stderr) => CliError::env(anyhow!("git {}: {stderr}", args.join(" "))),
        Err(e) => e,
    })
}

/// The git work tree containing `path`.
///
/// # Errors
/// Exit 2 naming `path` when it does not exist or is not inside a work tree; exit 3 when git
/// cannot run.
pub fn open(path: &Path) -> Result<Repo, CliError> {
    let not_a_repo = |detail: &str| {
        CliError::usage(anyhow!(
            "`{}` is not a git repository ({detail}); give --repo PATH of a git checkout",
            path.display()
        ))
    };
    if !path.is_dir() {
        return Err(not_a_repo("no such directory"));
    }
    let root = match git_raw(path, &["rev-parse", "--show-toplevel"]) {
        Ok(out) => PathBuf::from(out.trim()),
        Err(Ok(stderr)) => {
            return Err(not_a_repo(
                stderr.lines().next().unwrap_or("git rev-parse failed"),
            ));
        }
        Err(Err(e)) => return Err(e),
    };
    let name: String = root
        .file_name()
        .map(|n| {
            n.to_string_lossy()
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                        c
                    } else {
                        '-'
                    }
                })
                .collect()
        })
        .filter(|n: &String| !n.trim_matches('.').is_empty())
        .unwrap_or_else(|| "repo".into());
    Ok(Repo {
        root,
        slug: format!("local/{name}"),
    })
}

/// Parses `git log --format=%H%x1f%P%x1f%s%x1f%b%x1e` output.
fn parse_log(text: &str) -> Vec<Commit> {
    text.split('\x1e')
        .filter_map(|record| {
            let mut fields = record.trim_start_matches('\n').splitn(4, '\x1f');
            let sha = fields.next()?.trim().to_owned();
            if sha.is_empty() {
                return None;
            }
            let parents = fields
                .next()
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_owned)
                .collect();
            let subject = fields.next().unwrap_or_default().trim().to_owned();
            let body = fields.next().unwrap_or_default().trim().to_owned();
            Some(Commit {
                sha,
                parents,
                subject,
                body,
            })
        })
        .collect()
}

/// Up to `n` commits of `HEAD`'s history chosen by `selection`, newest first. An empty
/// repository (no `HEAD` yet) has none.
///
/// # Errors
/// Exit 3 when git fails.
pub fn recent(repo: &Repo, n: usize, selection: Selection) -> Result<Vec<Commit>, CliError> {
    if git(&repo.root, &["rev-parse", "--verify", "-q", "HEAD"]).is_err() {
        return Ok(Vec::new());
    }
    let limit = format!("-n{n}");
    let format = "--format=%H%x1f%P%x1f%s%x1f%b%x1e";
    let mut args = vec!["log", format];
    match selection {
        Selection::NonMerges => args.extend(["--no-merges", &limit]),
        Selection::Merges => args.extend(["--merges", "--first-parent", &limit]),
        // A root commit has no base to diff against; one more is read so `n` remain.
        Selection::MainlineCommits => args.extend(["--no-merges", "--first-parent"]),
    }
    let mut commits = parse_log(&git(&repo.root, &args)?);
    if selection == Selection::MainlineCommits {
        commits.retain(|c| !c.parents.is_empty());
    }
    commits.truncate(n);
    Ok(commits)
}

/// The commit's position on the first-parent history (`git rev-list --count --first-parent`):
/// the stable change number the harvester records for it.
///
/// # Errors
/// Exit 3 when git fails.
pub fn change_number(repo: &Repo, commit: &Commit) -> Result<i64, CliError> {
    let out = git(
        &repo.root,
        &["rev-list", "--count", "--first-parent", &commit.sha],
    )?;
    out.trim()
        .parse()
        .map_err(|e| CliError::env(anyhow!("git rev-list --count {}: {e}", commit.sha)))
}

/// `text` cut to at most `max_bytes` at a line boundary, with a note of what was cut.
pub fn cap(text: &str, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text.to_owned();
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = text[..end].rfind('\n').map_or(end, |i| i + 1);
    format!(
        "{}… ({} more bytes not shown)\n",
        &text[..cut],
        text.len() - cut
    )
}

/// A commit as a review item: id `c-<sha12>`, title `Summarize <sha7>: <subject>`, input the
/// subject, the `--stat` and the diff capped at [`MAX_DIFF_BYTES`].
///
/// # Errors
/// Exit 3 when git fails.
pub fn review_item(repo: &Repo, commit: &Commit) -> Result<ItemSpec, CliError> {
    let stat = git(
        &repo.root,
        &["show", "--no-color", "--stat=100", "--format=", &commit.sha],
    )?;
    let diff = git(
        &repo.root,
        &[
            "show",
            "--no-color",
            "--no-ext-diff",
            "--patch",
            "--format=",
            &commit.sha,
        ],
    )?;
    let subject: String = commit.subject.chars().take(100).collect();
    let input = format!(
        "commit {} — {}\n\n{}\n{}",
        commit.short(),
        commit.subject,
        cap(stat.trim_matches('\n'), MAX_STAT_BYTES),
        cap(diff.trim_start_matches('\n'), MAX_DIFF_BYTES)
    );
    Ok(ItemSpec {
        id: format!("c-{}", commit.short()),
        title: format!(
            "Summarize {}: {subject}",
            &commit.sha[..7.min(commit.sha.len())]
        ),
        input,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_cuts_at_a_line_boundary_and_says_so() {
        let check = |text: &str, max: usize, expected: &str| {
            assert_eq!(cap(text, max), expected, "{text:?} {max}")
        };
        check("short\n", 100, "short\n");
        check(
            "line one\nline two\n",
            12,
            "line one\n… (9 more bytes not shown)\n",
        );
        check("abcdef", 3, "abc… (3 more bytes not shown)\n");
        check("ééé", 3, "é… (4 more bytes not shown)\n");
    }

    #[test]
    fn parse_log_reads_records() {
        let text = "aaa\x1fp1 p2\x1fMerge x\x1fReverts #3\x1e\nbbb\x1f\x1froot\x1f\x1e\n";
        let commits = parse_log(text);
        assert_eq!(commits.len(), 2);
        assert_eq!(
            (
                commits[0].parents.len(),
                commits[0].subject.as_str(),
                commits[0].body.as_str()
            ),
            (2, "Merge x", "Reverts #3")
        );
        assert!(commits[1].parents.is_empty());
    }
}
