//! The content-addressed blob store: `<home>/blobs/sha256/<hex[:2]>/<hex>`, files 0600, dirs 0700
//! (DESIGN §6; facts §8 "Artifact blobs"; seed "Candidate Package": "verified blobs are stored in
//! the content-addressed artifact store").
//!
//! The layout under `blobs/` is the one the external optimizer reads with `--artifact-root`
//! (facts §1: `<root>/sha256/<hex[:2]>/<hex>`). A blob is written to a temp file in its final
//! directory, fsynced, renamed into place and read back; a write is idempotent: an existing blob
//! with the right content is left alone, a corrupt one is replaced.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use skillforge_contract::{SHA256_PREFIX, content_hash, normalize_hash};

/// Directory of the blob store inside `$SKILLFORGE_HOME`.
pub const BLOBS_DIR: &str = "blobs";

/// Why a blob could not be stored or read.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    /// The hash is not `sha256:<64 hex>` (or bare hex).
    #[error("blob hash `{0}` is not a sha256 hash")]
    BadHash(String),
    /// A file operation failed.
    #[error("{op} blob `{path}`: {source}")]
    Io {
        /// What was being done (`create dir`, `write`, `rename`, `read`).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The bytes on disk do not hash to the blob's name.
    #[error("blob `{path}` is corrupt: content hashes to {actual}")]
    Corrupt {
        /// The blob file.
        path: PathBuf,
        /// `sha256:<hex>` of what is on disk.
        actual: String,
    },
}

/// A blob store rooted at a directory (normally `<home>/blobs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobStore {
    root: PathBuf,
}

static TMP_SEQ: AtomicU64 = AtomicU64::new(0);

impl BlobStore {
    /// The store at `<home>/blobs`. Creates nothing until the first [`BlobStore::put`].
    pub fn in_home(home: &Path) -> Self {
        Self {
            root: home.join(BLOBS_DIR),
        }
    }

    /// The store rooted at `root` (the directory that contains `sha256/`).
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The root directory (what an external optimizer gets as `--artifact-root`).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Path of the blob with `hash` (`sha256:<hex>` or bare hex, any case).
    ///
    /// # Errors
    /// [`BlobError::BadHash`] when `hash` is not a sha256 hash.
    pub fn path_of(&self, hash: &str) -> Result<PathBuf, BlobError> {
        let normalized = normalize_hash(hash).map_err(|_| BlobError::BadHash(hash.to_owned()))?;
        let hex = &normalized[SHA256_PREFIX.len()..];
        Ok(self.root.join("sha256").join(&hex[..2]).join(hex))
    }

    /// Whether a blob named `hash` exists (its content is not checked; see [`BlobStore::get`]).
    pub fn contains(&self, hash: &str) -> bool {
        self.path_of(hash).is_ok_and(|p| p.is_file())
    }

    /// Stores `bytes` and returns their hash `sha256:<hex>`. Idempotent: when a blob with that
    /// hash exists and verifies, nothing is written; a corrupt one is replaced. The new file is
    /// 0600, written to a temp file beside it, fsynced, renamed into place and read back.
    ///
    /// # Errors
    /// [`BlobError::Io`] on any file-system failure, [`BlobError::Corrupt`] when the file read
    /// back after the rename does not match (the corrupt file is left for inspection).
    pub fn put(&self, bytes: &[u8]) -> Result<String, BlobError> {
        let hash = content_hash(bytes);
        let path = self.path_of(&hash)?;
        if self.verify(&path, &hash).is_ok() {
            return Ok(hash);
        }
        let dir = path.parent().unwrap_or(&self.root).to_path_buf();
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|source| BlobError::Io {
                op: "create dir",
                path: dir.clone(),
                source,
            })?;
        let tmp = dir.join(format!(
            ".{}.tmp.{}.{}",
            &hash[SHA256_PREFIX.len()..],
            std::process::id(),
            TMP_SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let written = write_new(&tmp, bytes).and_then(|()| fs::rename(&tmp, &path));
        if let Err(source) = written {
            let _ = fs::remove_file(&tmp);
            return Err(BlobError::Io {
                op: "write",
                path,
                source,
            });
        }
        self.verify(&path, &hash)?;
        Ok(hash)
    }

    /// Reads the blob named `hash` and checks that its content hashes to that name.
    ///
    /// # Errors
    /// [`BlobError::BadHash`], [`BlobError::Io`] (missing or unreadable), [`BlobError::Corrupt`].
    pub fn get(&self, hash: &str) -> Result<Vec<u8>, BlobError> {
        let path = self.path_of(hash)?;
        let bytes = fs::read(&path).map_err(|source| BlobError::Io {
            op: "read",
            path: path.clone(),
            source,
        })?;
        let actual = content_hash(&bytes);
        if Some(actual.as_str()) != normalize_hash(hash).ok().as_deref() {
            return Err(BlobError::Corrupt { path, actual });
        }
        Ok(bytes)
    }

    fn verify(&self, path: &Path, hash: &str) -> Result<(), BlobError> {
        let bytes = fs::read(path).map_err(|source| BlobError::Io {
            op: "read",
            path: path.to_owned(),
            source,
        })?;
        let actual = content_hash(&bytes);
        if actual != hash {
            return Err(BlobError::Corrupt {
                path: path.to_owned(),
                actual,
            });
        }
        Ok(())
    }
}

fn write_new(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file: File = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    // The umask can only clear bits; make the mode exact anyway.
    file.set_permissions(fs::Permissions::from_mode(0o600))?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn put_addresses_by_sha256_with_the_optimizer_layout() {
        let home = tempfile::tempdir().unwrap();
        let store = BlobStore::in_home(home.path());
        let hash = store.put(b"hello").unwrap();
        assert_eq!(
            hash,
            "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        let path = home.path().join(
            "blobs/sha256/2c/2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
        );
        assert_eq!(fs::read(&path).unwrap(), b"hello");
        assert_eq!(store.path_of(&hash).unwrap(), path);
        assert_eq!(
            store.path_of(&hash.to_uppercase()[7..]).unwrap(),
            path,
            "bare upper-case hex names the same blob"
        );
        assert_eq!(store.get(&hash).unwrap(), b"hello");
        assert!(store.contains(&hash));
        assert!(!store.contains(&content_hash(b"other")));
    }

    #[test]
    fn blob_files_are_0600_and_dirs_0700() {
        let home = tempfile::tempdir().unwrap();
        let store = BlobStore::in_home(home.path());
        let path = store.path_of(&store.put(b"secret").unwrap()).unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert_eq!(mode(&home.path().join("blobs/sha256")), 0o700);
    }

    #[test]
    fn put_is_idempotent_and_leaves_no_temp_files() {
        let home = tempfile::tempdir().unwrap();
        let store = BlobStore::in_home(home.path());
        let first = store.put(b"same").unwrap();
        let path = store.path_of(&first).unwrap();
        let written_at = fs::metadata(&path).unwrap().modified().unwrap();
        assert_eq!(store.put(b"same").unwrap(), first);
        assert_eq!(
            fs::metadata(&path).unwrap().modified().unwrap(),
            written_at,
            "an intact blob is not rewritten"
        );
        let entries: Vec<_> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(entries.len(), 1, "only the blob itself: {entries:?}");
    }

    #[test]
    fn corrupt_blob_is_detected_on_get_and_replaced_on_put() {
        let home = tempfile::tempdir().unwrap();
        let store = BlobStore::in_home(home.path());
        let hash = store.put(b"original").unwrap();
        let path = store.path_of(&hash).unwrap();
        fs::write(&path, b"tampered").unwrap();
        assert!(matches!(store.get(&hash), Err(BlobError::Corrupt { .. })));
        assert_eq!(store.put(b"original").unwrap(), hash);
        assert_eq!(store.get(&hash).unwrap(), b"original");
    }

    #[test]
    fn malformed_hash_is_refused() {
        let store = BlobStore::at("/nonexistent");
        assert!(matches!(
            store.path_of("sha256:abc"),
            Err(BlobError::BadHash(_))
        ));
        assert!(matches!(store.get("zz"), Err(BlobError::BadHash(_))));
    }
}
