//! Adoption's install step (seed: skill-eval-loop, "The loop", "recheck.py"; E-18, E-19): stage
//! the skill into an adopt dir when one is configured, otherwise copy it under
//! `<home>/eval/installed/<name>` and symlink it into the install root(s); revoking unlinks every
//! symlink and moves the copy to `<home>/eval/revoked/`.
//!
//! Each runtime reads user-level skills from its own directory ([`user_skill_root`], issue 31
//! item 8): Claude Code from `$CLAUDE_CONFIG_DIR/skills` (default `~/.claude/skills`; it does not
//! read `~/.agents/skills`), Codex from `~/.agents/skills`, OpenCode from
//! `$XDG_CONFIG_HOME/opencode/skills` (default `~/.config/opencode/skills`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::error::IoError;
use super::layout::eval_root;
use super::steps::arm::copy_tree;

/// Why an install, or its revocation, could not be done; each names the path or runtime.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// The runtime has no user-level skill directory [`user_skill_root`] knows.
    #[error("runtime `{0}` has no user-level skill directory (known: {known})", known = USER_SKILL_RUNTIMES.join(", "))]
    UnknownRuntime(String),
    /// A skill dir ends in `..` or `/`.
    #[error("skill dir `{}` has no name", .0.display())]
    NoName(PathBuf),
    /// The target is taken: an installed skill is never overwritten.
    #[error(
        "`{}` already exists and is not this home's install of the skill; not overwriting it: move it away, \
         or install elsewhere with --install-root DIR",
        .0.display()
    )]
    Exists(PathBuf),
    /// A revoked copy could not be moved to `<home>/eval/revoked/`.
    #[error("move `{}` to `{}`: {source}", from.display(), to.display())]
    Move {
        /// The installed copy.
        from: PathBuf,
        /// Where it was going.
        to: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A dir, copy, symlink or unlink failed.
    #[error(transparent)]
    Io(#[from] IoError),
}

/// Where an adoption goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstallTarget {
    /// `--adopt-dir` / `FORGE_ADOPT_DIR`: staged there, nothing installed.
    Stage(PathBuf),
    /// Install by symlink into this root (e.g. `~/.agents/skills`).
    Root(PathBuf),
    /// Install by symlink into each of these roots (one copy, one symlink per root): what
    /// [`InstallTarget::for_runtimes`] builds, so each runtime finds the skill where it reads.
    Roots(Vec<PathBuf>),
}

/// The runtimes whose user-level skill directory [`user_skill_root`] knows.
pub const USER_SKILL_RUNTIMES: [&str; 3] = ["claude", "codex", "opencode"];

/// Where `runtime` reads a user's skills, for the user whose home is `user_home` and whose
/// environment is `env` (`CLAUDE_CONFIG_DIR`, `XDG_CONFIG_HOME` are honoured when set and
/// absolute): `claude` → `$CLAUDE_CONFIG_DIR/skills` or `~/.claude/skills`; `codex` →
/// `~/.agents/skills`; `opencode` → `$XDG_CONFIG_HOME/opencode/skills` or
/// `~/.config/opencode/skills`. Verified against Claude Code 2.1.197, Codex 0.171.0 and OpenCode
/// 1.18.33 (`tests/tests/real_deploy.rs`).
///
/// # Errors
/// [`InstallError::UnknownRuntime`] for a runtime without a user-level skill directory, naming
/// the ones there are.
pub fn user_skill_root(
    runtime: &str,
    user_home: &Path,
    env: &BTreeMap<String, String>,
) -> Result<PathBuf, InstallError> {
    let dir_from = |name: &str| env.get(name).map(PathBuf::from).filter(|p| p.is_absolute());
    match runtime {
        "claude" => Ok(dir_from("CLAUDE_CONFIG_DIR")
            .unwrap_or_else(|| user_home.join(".claude"))
            .join("skills")),
        "codex" => Ok(user_home.join(".agents/skills")),
        "opencode" => Ok(dir_from("XDG_CONFIG_HOME")
            .unwrap_or_else(|| user_home.join(".config"))
            .join("opencode/skills")),
        other => Err(InstallError::UnknownRuntime(other.to_owned())),
    }
}

impl InstallTarget {
    /// Symlinks into the user-level skill directory of each of `runtimes` ([`user_skill_root`];
    /// duplicates dropped, order kept).
    ///
    /// # Errors
    /// As [`user_skill_root`].
    pub fn for_runtimes(
        runtimes: &[&str],
        user_home: &Path,
        env: &BTreeMap<String, String>,
    ) -> Result<InstallTarget, InstallError> {
        let mut roots: Vec<PathBuf> = Vec::new();
        for runtime in runtimes {
            let root = user_skill_root(runtime, user_home, env)?;
            if !roots.contains(&root) {
                roots.push(root);
            }
        }
        Ok(InstallTarget::Roots(roots))
    }
}

/// Installs or stages `skill_dir`; returns the paths written (the copy first, then the symlink).
///
/// # Errors
/// [`InstallError`] naming the path; an existing target is refused ([`InstallError::Exists`],
/// never overwritten).
pub fn install(
    home: &Path,
    skill_dir: &Path,
    target: &InstallTarget,
) -> Result<Vec<PathBuf>, InstallError> {
    let name = skill_dir
        .file_name()
        .ok_or_else(|| InstallError::NoName(skill_dir.to_owned()))?;
    match target {
        InstallTarget::Stage(dir) => {
            let to = dir.join(name);
            refuse_existing(&to)?;
            copy_tree(skill_dir, &to)?;
            Ok(vec![to])
        }
        InstallTarget::Root(root) => link_into(home, skill_dir, std::slice::from_ref(root)),
        InstallTarget::Roots(roots) => link_into(home, skill_dir, roots),
    }
}

/// One copy under `<home>/eval/installed/<name>`, symlinked into every root; every link is
/// checked before anything is written, so a taken name leaves every root as it was.
fn link_into(
    home: &Path,
    skill_dir: &Path,
    roots: &[PathBuf],
) -> Result<Vec<PathBuf>, InstallError> {
    let name = skill_dir
        .file_name()
        .ok_or_else(|| InstallError::NoName(skill_dir.to_owned()))?;
    let copy = eval_root(home).join("installed").join(name);
    let links: Vec<PathBuf> = roots.iter().map(|root| root.join(name)).collect();
    // A link that already points at this home's copy is an earlier adoption of the same skill:
    // kept, and the copy below brought up to the content adopted now.
    let ours = |link: &Path| std::fs::read_link(link).is_ok_and(|target| target == copy);
    for link in links.iter().filter(|l| !ours(l)) {
        refuse_existing(link)?;
    }
    refresh_copy(skill_dir, &copy)?;
    let mut written = vec![copy.clone()];
    for (root, link) in roots.iter().zip(links) {
        if !ours(&link) {
            std::fs::create_dir_all(root).map_err(IoError::on("create", root))?;
            std::os::unix::fs::symlink(&copy, &link).map_err(IoError::on("symlink", &link))?;
        }
        written.push(link);
    }
    Ok(written)
}

/// Makes `copy` hold exactly `skill_dir`'s files: written when missing; when it holds other
/// content (an earlier adoption of an edited skill), the new tree is copied next to it and
/// swapped in by renames, so the links never point at a half-written copy.
fn refresh_copy(skill_dir: &Path, copy: &Path) -> Result<(), InstallError> {
    if !copy.exists() {
        return Ok(copy_tree(skill_dir, copy)?);
    }
    if crate::deploy::tree_digest(copy)? == crate::deploy::tree_digest(skill_dir)? {
        return Ok(());
    }
    let file = |suffix: &str| {
        copy.with_file_name(format!(
            ".{}.{suffix}-{}",
            copy.file_name().unwrap_or_default().to_string_lossy(),
            std::process::id()
        ))
    };
    let (fresh, old) = (file("new"), file("old"));
    let _ = std::fs::remove_dir_all(&fresh);
    copy_tree(skill_dir, &fresh)?;
    std::fs::rename(copy, &old).map_err(IoError::on("rename", copy))?;
    std::fs::rename(&fresh, copy).map_err(IoError::on("rename", &fresh))?;
    let _ = std::fs::remove_dir_all(&old);
    Ok(())
}

fn refuse_existing(path: &Path) -> Result<(), InstallError> {
    if path.symlink_metadata().is_ok() {
        return Err(InstallError::Exists(path.to_owned()));
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
/// [`InstallError`] naming the path that failed.
pub fn uninstall(home: &Path, paths: &[PathBuf]) -> Result<Option<PathBuf>, InstallError> {
    let mut moved = None;
    for path in paths {
        let Ok(meta) = path.symlink_metadata() else {
            continue;
        };
        if meta.file_type().is_symlink() {
            std::fs::remove_file(path).map_err(IoError::on("unlink", path))?;
        }
    }
    for path in paths {
        let Ok(meta) = path.symlink_metadata() else {
            continue;
        };
        if meta.is_dir() {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let revoked = eval_root(home).join("revoked");
            std::fs::create_dir_all(&revoked).map_err(IoError::on("create", &revoked))?;
            let mut to = revoked.join(&name);
            let mut n = 1;
            while to.exists() {
                n += 1;
                to = revoked.join(format!("{name}.{n}"));
            }
            std::fs::rename(path, &to).map_err(|source| InstallError::Move {
                from: path.clone(),
                to: to.clone(),
                source,
            })?;
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
        let paths = install(
            dir.path(),
            &skill,
            &InstallTarget::Stage(dir.path().join("adopt")),
        )
        .unwrap();
        assert!(paths[0].join("SKILL.md").is_file());
        assert!(!root.exists(), "the install root is untouched when staging");
        let paths = install(dir.path(), &skill, &InstallTarget::Root(root.clone())).unwrap();
        assert!(root.join("tldr").join("SKILL.md").is_file());
        assert!(installed(&paths));
        let moved = uninstall(dir.path(), &paths).unwrap().unwrap();
        assert!(!root.join("tldr").exists() && moved.join("SKILL.md").is_file());
        assert!(!installed(&paths));
    }

    // issue 31 item 8: each runtime's user-level skill directory; one copy linked into each
    #[test]
    fn an_adoption_lands_where_each_runtime_reads_user_skills() {
        let home = Path::new("/home/u");
        let none = BTreeMap::new();
        let check = |runtime: &str, env: &BTreeMap<String, String>, want: &str| {
            assert_eq!(
                user_skill_root(runtime, home, env).unwrap(),
                PathBuf::from(want),
                "{runtime}"
            )
        };
        check("claude", &none, "/home/u/.claude/skills");
        check("codex", &none, "/home/u/.agents/skills");
        check("opencode", &none, "/home/u/.config/opencode/skills");
        let env = BTreeMap::from([
            ("CLAUDE_CONFIG_DIR".to_owned(), "/cfg/claude".to_owned()),
            ("XDG_CONFIG_HOME".to_owned(), "/xdg".to_owned()),
        ]);
        check("claude", &env, "/cfg/claude/skills");
        check("opencode", &env, "/xdg/opencode/skills");
        check("codex", &env, "/home/u/.agents/skills");
        let relative = BTreeMap::from([("XDG_CONFIG_HOME".to_owned(), "rel".to_owned())]);
        check("opencode", &relative, "/home/u/.config/opencode/skills");
        assert!(
            user_skill_root("kimi", home, &none)
                .unwrap_err()
                .to_string()
                .contains("known: claude, codex, opencode")
        );

        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user");
        let skill = dir.path().join("tldr");
        std::fs::create_dir_all(&skill).unwrap();
        std::fs::write(skill.join("SKILL.md"), "# tldr").unwrap();
        let target =
            InstallTarget::for_runtimes(&["claude", "codex", "opencode", "codex"], &user, &none)
                .unwrap();
        let InstallTarget::Roots(roots) = &target else {
            panic!("{target:?}")
        };
        assert_eq!(roots.len(), 3, "duplicates dropped");
        // a taken name in one root refuses the whole install, nothing written
        std::fs::create_dir_all(user.join(".config/opencode/skills/tldr")).unwrap();
        assert!(
            install(dir.path(), &skill, &target)
                .unwrap_err()
                .to_string()
                .contains("already exists")
        );
        assert!(!user.join(".claude/skills/tldr").exists());
        std::fs::remove_dir(user.join(".config/opencode/skills/tldr")).unwrap();
        let paths = install(dir.path(), &skill, &target).unwrap();
        for at in [
            ".claude/skills/tldr",
            ".agents/skills/tldr",
            ".config/opencode/skills/tldr",
        ] {
            assert!(user.join(at).join("SKILL.md").is_file(), "{at}");
        }
        uninstall(dir.path(), &paths).unwrap();
        assert!(!installed(&paths));
    }
}
