//! What an arm was given and what the judge may see of its files (seed: skill-eval-loop, "The
//! blind is enforced, not assumed"; E-05, E-49).
//!
//! A skill is found by its `SKILL.md` inside any dot-directory of the arm's work dir, whatever the
//! runner's install path (`.claude/skills`, `.agents/skills`, `.opencode/skill`, a fourth one);
//! its whole subtree is dropped from the judge's manifest. A `SKILL.md` the agent wrote as its
//! deliverable is not under a dot-directory and stays listed. What the runner handed over
//! outside the work dir (`<arm>.meta/skill/<name>`, a container's mount) counts as installed too;
//! the work dir copy wins where both exist.

use std::path::{Path, PathBuf};

/// Directory under `<arm>.meta` holding skills a runner handed over outside the work dir.
pub const HANDED_SKILL_DIR: &str = "skill";

/// Skill names installed for an arm: the parent directory names of every `SKILL.md` under a
/// dot-directory of `workdir`, then those under `meta/skill/<name>/SKILL.md` not already found;
/// sorted, deduplicated.
pub fn installed_skills(workdir: &Path, meta: &Path) -> Vec<String> {
    let mut names: Vec<String> = skill_roots(workdir)
        .iter()
        .filter_map(|dir| dir.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    if let Ok(entries) = std::fs::read_dir(meta.join(HANDED_SKILL_DIR)) {
        for entry in entries.filter_map(Result::ok) {
            if entry.path().join("SKILL.md").is_file() {
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

/// Directories (absolute) of skills installed under dot-directories of `workdir`.
pub fn skill_roots(workdir: &Path) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    for file in walk(workdir) {
        let Ok(rel) = file.strip_prefix(workdir) else {
            continue;
        };
        let in_dot_dir = rel.parent().is_some_and(|p| {
            p.components()
                .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
        });
        if file.file_name().is_some_and(|n| n == "SKILL.md") && in_dot_dir {
            if let Some(dir) = file.parent() {
                roots.push(dir.to_path_buf());
            }
        }
    }
    roots.sort();
    roots.dedup();
    roots
}

/// Files a runtime writes into its own project directory for itself, never a deliverable:
/// OpenCode's `.opencode/.gitignore` (written into the with-arm only, beside the installed
/// skill, so listing it would break the blind; issue 38 item 6) and its plugin install files.
pub const RUNTIME_OWN_FILES: [&str; 5] = [
    ".opencode/.gitignore",
    ".opencode/package.json",
    ".opencode/bun.lock",
    ".opencode/node_modules",
    ".claude/settings.local.json",
];

/// The arm's file list as the judge sees it: relative paths of every file under `workdir`,
/// sorted, without the subtree of any installed skill (E-05) and without the files a runtime
/// wrote for itself ([`RUNTIME_OWN_FILES`]).
pub fn judge_manifest(workdir: &Path) -> Vec<String> {
    let roots = skill_roots(workdir);
    let own: Vec<std::path::PathBuf> = RUNTIME_OWN_FILES.iter().map(|f| workdir.join(f)).collect();
    let mut files: Vec<String> = walk(workdir)
        .into_iter()
        .filter(|f| !roots.iter().any(|r| f.starts_with(r)))
        .filter(|f| !own.iter().any(|o| f.starts_with(o)))
        .filter_map(|f| {
            f.strip_prefix(workdir)
                .ok()
                .map(|p| p.to_string_lossy().into_owned())
        })
        .collect();
    files.sort();
    files
}

/// Every regular file under `dir` (symlinks not followed), depth-first.
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                out.push(entry.path());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    // E-05
    #[test]
    fn e05_skill_subtrees_dropped_in_every_layout_deliverable_kept() {
        for layout in [
            ".claude/skills",
            ".agents/skills",
            ".opencode/skill",
            ".foo/skills",
        ] {
            let dir = tempfile::tempdir().unwrap();
            put(
                dir.path(),
                &format!("{layout}/li-post/SKILL.md"),
                "# li-post",
            );
            put(dir.path(), &format!("{layout}/li-post/refs/voice.md"), "v");
            put(dir.path(), "SKILL.md", "the agent's deliverable");
            put(dir.path(), "out/post.md", "post");
            // E-05 with issue 38 item 6: what a runtime writes for itself is no deliverable either.
            put(dir.path(), ".opencode/.gitignore", "node_modules");
            let manifest = judge_manifest(dir.path());
            assert_eq!(manifest, ["SKILL.md", "out/post.md"], "{layout}");
            assert!(manifest.iter().all(|f| !f.contains("li-post")), "{layout}");
            assert_eq!(
                installed_skills(dir.path(), &dir.path().join("x.meta")),
                ["li-post"],
                "{layout}"
            );
        }
    }

    // E-49
    #[test]
    fn e49_skill_handed_to_the_runner_counts_as_installed() {
        let dir = tempfile::tempdir().unwrap();
        let (work, meta) = (dir.path().join("with"), dir.path().join("with.meta"));
        std::fs::create_dir_all(&work).unwrap();
        put(&meta, "skill/li-post/SKILL.md", "# li-post");
        assert_eq!(installed_skills(&work, &meta), ["li-post"]);
        put(&work, ".claude/skills/li-post/SKILL.md", "# li-post");
        assert_eq!(
            installed_skills(&work, &meta),
            ["li-post"],
            "the work dir copy and the handed copy are one skill"
        );
        assert!(installed_skills(&work, &dir.path().join("none")).contains(&"li-post".to_string()));
    }
}
