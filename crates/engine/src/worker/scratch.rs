//! Each attempt's scratch dir (`<scratch_root>/<job>-<token>`): found cheaply and removed after its run.

use std::path::{Path, PathBuf};

use tracing::debug;

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

/// Removes an attempt's scratch dir (a child of `root`, which `opened` is when given) if its
/// runner created one, off the async threads.
pub(super) async fn remove_scratch(opened: Option<&std::fs::File>, root: &Path, dir: PathBuf) {
    // Most runners create no scratch dir. A `stat` of the (cached) root usually proves that;
    // else one `lstat` of the attempt's unique path, which the kernel cannot answer from its
    // name cache. Neither is blocking work worth a thread hop.
    if no_scratch_dirs(opened, root) || std::fs::symlink_metadata(&dir).is_err() {
        return;
    }
    let shown = dir.display().to_string();
    match tokio::task::spawn_blocking(move || std::fs::remove_dir_all(&dir)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => debug!(dir = %shown, error = %e, "scratch dir not removed"),
        Err(e) => debug!(dir = %shown, error = %e, "scratch dir removal task failed"),
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
        if cfg!(target_os = "linux") && std::fs::metadata(root.path()).map(|m| {
            use std::os::unix::fs::MetadataExt;
            m.nlink()
        }).unwrap_or(0) == 2 {
            assert!(no_scratch_dirs(None, root.path()));
            assert!(no_scratch_dirs(Some(&opened), root.path()));
        }
        std::fs::create_dir_all(mine.join("deep")).unwrap();
        assert!(!no_scratch_dirs(None, root.path()), "a subdirectory is never missed");
        assert!(!no_scratch_dirs(Some(&opened), root.path()), "seen through the open directory too");
        remove_scratch(Some(&opened), root.path(), mine.clone()).await;
        assert!(!mine.exists());
        assert!(!no_scratch_dirs(None, &root.path().join("missing")), "an unreadable root means maybe");
        // Another attempt's dir does not stop this one's (absent) from being skipped correctly.
        let other = root.path().join("job-2");
        std::fs::create_dir(&other).unwrap();
        remove_scratch(None, root.path(), mine.clone()).await;
        assert!(other.exists());
    }
}
