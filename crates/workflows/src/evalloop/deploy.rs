//! Deploy (seed: skill-eval-loop, "deploy.sh"; E-40): copies skill trees from a checkout to an
//! install root and verifies each copied tree by digest; a mismatch fails the deploy naming the
//! tree.

use std::path::Path;

use sha2::{Digest, Sha256};

use super::inventory::walk;

/// SHA-256 over a tree: every regular file's relative path and bytes, in path order (hex).
///
/// # Errors
/// A file that cannot be read.
pub fn tree_digest(dir: &Path) -> Result<String, String> {
    let mut files: Vec<_> = walk(dir).into_iter().filter_map(|f| f.strip_prefix(dir).ok().map(Path::to_path_buf)).collect();
    files.sort();
    let mut hasher = Sha256::new();
    for rel in files {
        let bytes = std::fs::read(dir.join(&rel)).map_err(|e| format!("read `{}`: {e}", dir.join(&rel).display()))?;
        hasher.update(rel.to_string_lossy().as_bytes());
        hasher.update([0]);
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Copies `tree` to `root/<name>` with `copy` and checks the copy's digest against the source's.
/// Returns the digest.
///
/// # Errors
/// The copy's error, or `digest mismatch` naming the tree and both digests.
pub fn deploy_tree(tree: &Path, root: &Path, copy: impl Fn(&Path, &Path) -> Result<(), String>) -> Result<String, String> {
    let name = tree.file_name().ok_or_else(|| format!("`{}` has no name", tree.display()))?;
    let to = root.join(name);
    let want = tree_digest(tree)?;
    copy(tree, &to)?;
    let got = tree_digest(&to)?;
    if got != want {
        return Err(format!("digest mismatch for `{}`: source {want}, copy at `{}` {got}", name.to_string_lossy(), to.display()));
    }
    Ok(want)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evalloop::arm_stage::copy_tree;

    // E-40
    #[test]
    fn e40_each_copied_tree_is_verified_by_digest() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("src/tldr");
        std::fs::create_dir_all(tree.join("refs")).unwrap();
        std::fs::write(tree.join("SKILL.md"), "# tldr").unwrap();
        std::fs::write(tree.join("refs/voice.md"), "short").unwrap();
        let root = dir.path().join("root");
        let ok = deploy_tree(&tree, &root, copy_tree).unwrap();
        assert_eq!(ok, tree_digest(&root.join("tldr")).unwrap());
        let corrupting = |from: &Path, to: &Path| {
            copy_tree(from, to)?;
            std::fs::write(to.join("refs/voice.md"), "long").map_err(|e| e.to_string())
        };
        let e = deploy_tree(&tree, &dir.path().join("root2"), corrupting).unwrap_err();
        assert!(e.contains("digest mismatch for `tldr`"), "{e}");
    }
}
