//! Each attempt's scratch dir (`<scratch_root>/<job>-<token>`): found cheaply and removed after its run, beside the hand-over of its result.

use std::path::{Path, PathBuf};

use tracing::warn;

/// Whether `root` (the parent of every scratch dir; `opened`: the same directory opened
/// earlier) certainly has no subdirectory, from one `fstat` (or `stat`) of it: a directory's
/// link count is 2 plus its subdirectories on Linux file systems that count them (ext4, xfs,
/// tmpfs); others (btrfs: 1), a removed directory (0) and errors answer "maybe".
fn no_scratch_dirs(opened: Option<&std::fs::File>, root: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = match opened {
            Some(dir) => dir.metadata(),
            None => std::fs::metadata(root),
        };
        meta.is_ok_and(|m| m.is_dir() && m.nlink() == 2)
    }
    #[cfg(not(unix))]
    {
        let _ = (opened, root);
        false
    }
}

/// The removal of an attempt's scratch dir, under way on a blocking thread (or nothing to
/// remove); [`ScratchRemoval::join`] waits for it.
#[must_use = "join the removal, so a stopping worker waits for it"]
pub(super) struct ScratchRemoval(Option<(String, tokio::task::JoinHandle<std::io::Result<()>>)>);

/// Starts removing an attempt's scratch dir (a child of `root`, which `opened` is when given)
/// if its runner created one, off the async threads: recursively, read-only directories
/// included (see [`remove_tree`]).
pub(super) fn start_removal(
    opened: Option<&std::fs::File>,
    root: &Path,
    dir: PathBuf,
) -> ScratchRemoval {
    // Most runners create no scratch dir. A `stat` of the (cached) root usually proves that;
    // else one `lstat` of the attempt's unique path, which the kernel cannot answer from its
    // name cache. Neither is blocking work worth a thread hop.
    if no_scratch_dirs(opened, root) || std::fs::symlink_metadata(&dir).is_err() {
        return ScratchRemoval(None);
    }
    let shown = dir.display().to_string();
    ScratchRemoval(Some((
        shown,
        tokio::task::spawn_blocking(move || remove_tree(&dir)),
    )))
}

impl ScratchRemoval {
    /// Waits for the removal to end; a failure is logged (the dir stays, and the sandbox
    /// runner's leftover sweep removes what a later worker finds of it).
    pub(super) async fn join(self) {
        let Some((shown, task)) = self.0 else { return };
        match task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => warn!(dir = %shown, error = %e, "scratch dir not removed"),
            Err(e) => warn!(dir = %shown, error = %e, "scratch dir removal task failed"),
        }
    }
}

/// Removes `path` recursively; if that fails (a command made a directory read-only), makes
/// every directory under it owner-writable and tries again. Only directories are chmod-ed:
/// files may be hard links shared with a live repository's objects. A missing `path` is
/// removed already.
fn remove_tree(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(_) => {}
    }
    make_dirs_writable(path);
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

fn make_dirs_writable(path: &Path) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mut perms = meta.permissions();
        perms.set_mode(perms.mode() | 0o700);
        let _ = std::fs::set_permissions(path, perms);
    }
    if let Ok(entries) = std::fs::read_dir(path) {
        for entry in entries.flatten() {
            make_dirs_writable(&entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[tokio::test]
    async fn scratch_dirs_are_found_and_removed() {
        let root = tempfile::tempdir().unwrap();
        let mine = root.path().join("job-1");
        let opened = std::fs::File::open(root.path()).unwrap();
        // Nothing created: the root's own stat proves it (where link counts are kept).
        if cfg!(target_os = "linux")
            && std::fs::metadata(root.path())
                .map(|m| {
                    use std::os::unix::fs::MetadataExt;
                    m.nlink()
                })
                .unwrap_or(0)
                == 2
        {
            assert!(no_scratch_dirs(None, root.path()));
            assert!(no_scratch_dirs(Some(&opened), root.path()));
        }
        std::fs::create_dir_all(mine.join("deep")).unwrap();
        assert!(
            !no_scratch_dirs(None, root.path()),
            "a subdirectory is never missed"
        );
        assert!(
            !no_scratch_dirs(Some(&opened), root.path()),
            "seen through the open directory too"
        );
        start_removal(Some(&opened), root.path(), mine.clone())
            .join()
            .await;
        assert!(!mine.exists());
        assert!(
            !no_scratch_dirs(None, &root.path().join("missing")),
            "an unreadable root means maybe"
        );
        // Another attempt's dir does not stop this one's (absent) from being skipped correctly.
        let other = root.path().join("job-2");
        std::fs::create_dir(&other).unwrap();
        start_removal(None, root.path(), mine.clone()).join().await;
        assert!(other.exists());
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_scratch_dir_with_a_read_only_directory_is_removed() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let mine = root.path().join("job-1");
        let locked = mine.join("sandbox/locked");
        std::fs::create_dir_all(locked.join("inner")).unwrap();
        std::fs::write(locked.join("inner/file"), "x").unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o500)).unwrap();
        start_removal(None, root.path(), mine.clone()).join().await;
        assert!(!mine.exists());
    }
}
