//! The control plane's file helpers, one of each: an atomic write (temp file in the same dir,
//! then a rename, so a reader sees the old file or the new one, never half of one) and the
//! content hash every product uses.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

pub use skillforge_contract::{content_hash, sha256_hex};

/// Why an atomic write failed: the path and the step that failed.
#[derive(Debug, thiserror::Error)]
#[error("write `{path}`: {step}: {source}")]
pub struct WriteError {
    /// The file that was being written.
    pub path: PathBuf,
    /// What failed (`create its dir`, `write the temp file`, `rename into place`).
    pub step: &'static str,
    /// The I/O error.
    #[source]
    pub source: std::io::Error,
}

/// Writes `bytes` to `path` atomically: its parent dirs are created, the bytes go to a temp file
/// beside it (unique per process and call, so two writers never share one) which is flushed to
/// disk and renamed over `path`. On error the temp file is removed and `path` is unchanged.
///
/// # Errors
/// [`WriteError`] naming `path` and the failed step.
pub fn write_atomic(path: &Path, bytes: impl AsRef<[u8]>) -> Result<(), WriteError> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let fail = |step, source| WriteError {
        path: path.to_owned(),
        step,
        source,
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(|e| fail("create its dir", e))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.{}-{}.tmp",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let written = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(bytes.as_ref())?;
        f.sync_all()
    });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail("write the temp file", e));
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail("rename into place", e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_atomic_write_replaces_the_file_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/state.json");
        write_atomic(&path, "one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("state.json")]);
    }

    #[test]
    fn a_failed_atomic_write_names_the_file_and_keeps_the_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write_atomic(&path, "old").unwrap();
        // A directory where the file should be renamed: the rename fails.
        let blocked = dir.path().join("blocked");
        std::fs::create_dir_all(blocked.join("x")).unwrap();
        let err = write_atomic(&blocked, "new").unwrap_err();
        assert!(
            err.to_string().contains("blocked") && err.step == "rename into place",
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            2,
            "no temp file left"
        );
    }
}
