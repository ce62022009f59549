//! Adoption's install step (seed: skill-eval-loop, "The loop", "recheck.py"; E-18, E-19): stage
//! the skill into an adopt dir when one is configured, otherwise copy it under
//! `<home>/eval/installed/<name>` and symlink it into the install root; revoking unlinks every
//! symlink and moves the copy to `<home>/eval/revoked/`.

use std::path::{Path, PathBuf};

use super::arm_stage::copy_tree;
use super::layout::eval_root;

/// Where an adoption goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstallTarget {
    /// `--adopt-dir` / `FORGE_ADOPT_DIR`: staged there, nothing installed.
    Stage(PathBuf),
    /// Install by symlink into this root (e.g. `~/.agents/skills`).
    Root(PathBuf),
}

/// Installs or stages `skill_dir`; returns the paths written (the copy first, then the symlink).
///
/// # Errors
/// A message naming the path; an existing target is refused (never overwritten).
pub fn install(home: &Path, skill_dir: &Path, target: &InstallTarget) -> Result<Vec<PathBuf>, String> {
    let name = skill_dir.file_name().ok_or_else(|| format!("skill dir `{}` has no name", skill_dir.display()))?;
    match target {
        InstallTarget::Stage(dir) => {
            let to = dir.join(name);
            refuse_existing(&to)?;
            copy_tree(skill_dir, &to)?;
            Ok(vec![to])
        }
        InstallTarget::Root(root) => {
            let copy = eval_root(home).join("installed").join(name);
            let link = root.join(name);
            refuse_existing(&link)?;
            if !copy.exists() {
                copy_tree(skill_dir, &copy)?;
            }
            std::fs::create_dir_all(root).map_err(|e| format!("create `{}`: {e}", root.display()))?;
            std::os::unix::fs::symlink(&copy, &link).map_err(|e| format!("symlink `{}`: {e}", link.display()))?;
            Ok(vec![copy, link])
        }
    }
}

fn refuse_existing(path: &Path) -> Result<(), String> {
    if path.symlink_metadata().is_ok() {
        return Err(format!("`{}` already exists; not overwriting an installed skill", path.display()));
    }
    Ok(())
}

/// Whether the skill is installed in the paths a ledger row recorded (what [`uninstall`] clears).
pub fn installed(paths: &[PathBuf]) -> bool {
    paths.iter().any(|p| p.symlink_metadata().is_ok())
}

/// Revokes: unlinks every recorded symlink, moves the copy to `<home>/eval/revoked/<name>`
/// (suffixed when taken). Returns where the copy went.
///
/// # Errors
/// A message naming the path that failed.
pub fn uninstall(home: &Path, paths: &[PathBuf]) -> Result<Option<PathBuf>, String> {
    let mut moved = None;
    for path in paths {
        let Ok(meta) = path.symlink_metadata() else { continue };
        if meta.file_type().is_symlink() {
            std::fs::remove_file(path).map_err(|e| format!("unlink `{}`: {e}", path.display()))?;
        }
    }
    for path in paths {
        let Ok(meta) = path.symlink_metadata() else { continue };
        if meta.is_dir() {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let revoked = eval_root(home).join("revoked");
            std::fs::create_dir_all(&revoked).map_err(|e| format!("create `{}`: {e}", revoked.display()))?;
            let mut to = revoked.join(&name);
            let mut n = 1;
            while to.exists() {
                n += 1;
                to = revoked.join(format!("{name}.{n}"));
            }
            std::fs::rename(path, &to).map_err(|e| format!("move `{}` to `{}`: {e}", path.display(), to.display()))?;
            moved = Some(to);
        }
    }
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;

    // E-18
    #[test]
    fn e18_adopt_dir_stages_only() {
        let dir = tempfile::tempdir().unwrap();
        let skill = dir.path().join("tldr");
        std::fs::create_dir_all(&skill).unwrap();
        std::fs::write(skill.join("SKILL.md"), "# tldr").unwrap();
        let root = dir.path().join("agents-skills");
        let paths = install(dir.path(), &skill, &InstallTarget::Stage(dir.path().join("adopt"))).unwrap();
        assert!(paths[0].join("SKILL.md").is_file());
        assert!(!root.exists(), "the install root is untouched when staging");
        let paths = install(dir.path(), &skill, &InstallTarget::Root(root.clone())).unwrap();
        assert!(root.join("tldr").join("SKILL.md").is_file());
        assert!(installed(&paths));
        let moved = uninstall(dir.path(), &paths).unwrap().unwrap();
        assert!(!root.join("tldr").exists() && moved.join("SKILL.md").is_file());
        assert!(!installed(&paths));
    }
}
