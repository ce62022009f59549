//! Making one directory tree a copy of another: files whose bytes differ are rewritten,
//! entries missing from the source are removed, symlinks are copied as links. Used to run an
//! agent in a clean copy of its work dir and to bring its changes back.

use std::path::Path;

/// Makes `to` hold exactly what `from` holds (regular files, directories, symlinks); files
/// whose bytes are equal are left untouched.
///
/// # Errors
/// A message naming the path that failed.
pub(crate) fn mirror(from: &Path, to: &Path) -> Result<(), String> {
    let meta = std::fs::symlink_metadata(to);
    if meta.as_ref().is_ok_and(|m| !m.is_dir()) {
        std::fs::remove_file(to).map_err(|e| format!("remove `{}`: {e}", to.display()))?;
    }
    std::fs::create_dir_all(to).map_err(|e| format!("create `{}`: {e}", to.display()))?;
    let mut names = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(from).map_err(|e| format!("read `{}`: {e}", from.display()))? {
        let entry = entry.map_err(|e| format!("read `{}`: {e}", from.display()))?;
        let kind = entry.file_type().map_err(|e| e.to_string())?;
        let source = entry.path();
        let target = to.join(entry.file_name());
        names.insert(entry.file_name());
        if kind.is_dir() {
            mirror(&source, &target)?;
        } else if kind.is_symlink() {
            let link = std::fs::read_link(&source)
                .map_err(|e| format!("read link `{}`: {e}", source.display()))?;
            if std::fs::read_link(&target).ok().as_ref() != Some(&link) {
                remove(&target)?;
                std::os::unix::fs::symlink(&link, &target)
                    .map_err(|e| format!("link `{}`: {e}", target.display()))?;
            }
        } else if kind.is_file() {
            let bytes =
                std::fs::read(&source).map_err(|e| format!("read `{}`: {e}", source.display()))?;
            let same = std::fs::symlink_metadata(&target).is_ok_and(|m| m.is_file())
                && std::fs::read(&target).is_ok_and(|b| b == bytes);
            if !same {
                remove(&target)?;
                std::fs::write(&target, &bytes)
                    .map_err(|e| format!("write `{}`: {e}", target.display()))?;
                let mode = entry.metadata().map_err(|e| e.to_string())?.permissions();
                std::fs::set_permissions(&target, mode)
                    .map_err(|e| format!("chmod `{}`: {e}", target.display()))?;
            }
        }
    }
    for entry in std::fs::read_dir(to).map_err(|e| format!("read `{}`: {e}", to.display()))? {
        let entry = entry.map_err(|e| format!("read `{}`: {e}", to.display()))?;
        if !names.contains(&entry.file_name()) {
            remove(&entry.path())?;
        }
    }
    Ok(())
}

fn remove(path: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(path) {
        Err(_) => Ok(()),
        Ok(m) if m.is_dir() => {
            std::fs::remove_dir_all(path).map_err(|e| format!("remove `{}`: {e}", path.display()))
        }
        Ok(_) => {
            std::fs::remove_file(path).map_err(|e| format!("remove `{}`: {e}", path.display()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_ends_equal_to_the_source_and_unchanged_files_are_kept() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(a.path().join("d")).unwrap();
        std::fs::write(a.path().join("d/x"), "new").unwrap();
        std::fs::write(a.path().join("same"), "1").unwrap();
        std::os::unix::fs::symlink("d/x", a.path().join("link")).unwrap();
        std::fs::write(b.path().join("same"), "1").unwrap();
        std::fs::write(b.path().join("gone"), "deleted by the agent").unwrap();
        std::fs::create_dir_all(b.path().join("d")).unwrap();
        std::fs::write(b.path().join("d/x"), "old").unwrap();
        let before = std::fs::metadata(b.path().join("same"))
            .unwrap()
            .modified()
            .unwrap();
        mirror(a.path(), b.path()).unwrap();
        assert_eq!(
            std::fs::read_to_string(b.path().join("d/x")).unwrap(),
            "new"
        );
        assert!(!b.path().join("gone").exists());
        assert_eq!(
            std::fs::read_link(b.path().join("link")).unwrap(),
            Path::new("d/x")
        );
        assert_eq!(
            std::fs::metadata(b.path().join("same"))
                .unwrap()
                .modified()
                .unwrap(),
            before
        );
    }
}
