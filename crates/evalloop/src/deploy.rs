//! Deploy (seed: skill-eval-loop, "deploy.sh [--to host]"; E-40): copies skill trees to an install
//! root and verifies each copied tree by digest, locally or on another machine.
//!
//! Locally, [`deploy_tree`] copies a tree into a hidden sibling of its destination, checks the
//! copy's digest against the source's (and against the digest the caller expects, when it says
//! one), and only then swaps it in: a mismatch leaves the install root as it was. Remotely,
//! [`deploy_job`] stages every file of every tree through the queue's transfer area (each blob
//! verified by sha256 when the worker materializes it) into a `process` job of stage `deploy` that
//! only a worker labelled `host=NAME` leases; that worker runs its own `skillforge --json eval
//! deploy --expect NAME=sha256:… ` on the materialized trees, so the digest is checked again on
//! the copy there, and [`check_remote_report`] compares what it reports with the source's digests.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use skillforge_engine::JobSpec;
use skillforge_engine::transfer::{self, JobFiles, Stager, TransferArea};
use skillforge_runner_process::ProcessPayload;

use super::error::IoError;
use super::inventory::walk;
use super::stages::StageDef;

/// Why a tree could not be deployed or a remote's report is not accepted; each names the tree
/// (and the host, remotely). The install root is unchanged in each case.
#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    /// The dir holds no `SKILL.md`.
    #[error("`{}` is not a skill tree (no SKILL.md)", .0.display())]
    NotSkillTree(PathBuf),
    /// The dir's name is not UTF-8, or is hidden.
    #[error("`{}` has no usable name", .0.display())]
    NoUsableName(PathBuf),
    /// The destination is a symlink: an install the eval ledger records.
    #[error("`{}` is a symlink (an install the eval ledger records); not replacing it — revoke it or deploy to another root", .0.display())]
    Symlink(PathBuf),
    /// The tree received is not the one the sender hashed (`--expect`).
    #[error("digest mismatch for `{name}`: received tree `{}` is {got}, the sender's is {expected}; nothing installed", tree.display())]
    NotSent {
        /// The skill.
        name: String,
        /// The tree received.
        tree: PathBuf,
        /// Its digest, `sha256:<hex>`.
        got: String,
        /// The sender's digest.
        expected: String,
    },
    /// The copy's digest differs from the source's.
    #[error("digest mismatch for `{name}`: source {source_digest}, copy at `{}` {copy_digest}; nothing installed", to.display())]
    BadCopy {
        /// The skill.
        name: String,
        /// The source's digest, `sha256:<hex>`.
        source_digest: String,
        /// Where the copy was going.
        to: PathBuf,
        /// The copy's digest.
        copy_digest: String,
    },
    /// The old tree could not be moved aside.
    #[error("move the old `{}` aside: {source}", path.display())]
    MoveAside {
        /// The installed tree.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file could not be read, a dir created, the copy made, or the copy moved in.
    #[error(transparent)]
    Io(#[from] IoError),
    /// Two trees of one name for one host.
    #[error("two trees are named `{name}`; one would overwrite the other on `{host}`")]
    DuplicateName {
        /// The name.
        name: String,
        /// The host.
        host: String,
    },
    /// A file could not be staged into the transfer area.
    #[error("stage `{}` for `{host}`: {source}", path.display())]
    Stage {
        /// The file.
        path: PathBuf,
        /// The host.
        host: String,
        /// The area's error.
        #[source]
        source: skillforge_engine::transfer::TransferError,
    },
    /// The deploy job could not be built.
    #[error(transparent)]
    Job(#[from] skillforge_runner::PayloadError),
    /// The remote's report is over the parser limits.
    #[error("the report from `{host}` {source}")]
    ReportLimits {
        /// The host.
        host: String,
        /// The limit crossed.
        #[source]
        source: skillforge_contract::limits::LimitError,
    },
    /// The remote's report does not parse.
    #[error("the report from `{host}` does not parse ({source}): {report}")]
    ReportParse {
        /// The host.
        host: String,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
        /// The report, trimmed.
        report: String,
    },
    /// The remote reported no install of a tree sent.
    #[error("`{host}` reported no install of `{name}`")]
    NotReported {
        /// The host.
        host: String,
        /// The skill.
        name: String,
    },
    /// The remote's installed copy has another digest than the one sent.
    #[error("digest mismatch for `{name}` on `{host}`: sent {sent}, installed copy {installed}")]
    RemoteMismatch {
        /// The skill.
        name: String,
        /// The host.
        host: String,
        /// The digest sent.
        sent: String,
        /// The digest reported.
        installed: String,
    },
}

/// What one tree ended as: the line `eval deploy --json` prints per tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deployed {
    /// The skill (the tree's directory name).
    pub skill: String,
    /// `sha256:<hex>` of the installed copy ([`tree_digest`]).
    pub digest: String,
    /// Where it was installed (on the machine that installed it).
    pub path: PathBuf,
}

/// SHA-256 over a tree: every regular file's relative path and bytes, in path order (hex).
///
/// # Errors
/// [`IoError`] naming a file that cannot be read.
pub fn tree_digest(dir: &Path) -> Result<String, IoError> {
    let mut files: Vec<_> = walk(dir)
        .into_iter()
        .filter_map(|f| f.strip_prefix(dir).ok().map(Path::to_path_buf))
        .collect();
    files.sort();
    let mut hasher = Sha256::new();
    for rel in files {
        let bytes = std::fs::read(dir.join(&rel)).map_err(IoError::on("read", dir.join(&rel)))?;
        hasher.update(rel.to_string_lossy().as_bytes());
        hasher.update([0]);
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// The name of a skill tree: its directory name, when it holds a `SKILL.md`.
///
/// # Errors
/// [`DeployError::NotSkillTree`] or [`DeployError::NoUsableName`], naming the path.
pub fn skill_tree_name(tree: &Path) -> Result<String, DeployError> {
    if !tree.join("SKILL.md").is_file() {
        return Err(DeployError::NotSkillTree(tree.to_owned()));
    }
    tree.file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !n.starts_with('.'))
        .map(str::to_owned)
        .ok_or_else(|| DeployError::NoUsableName(tree.to_owned()))
}

/// Installs `tree` as `root/<name>` with `copy`: the copy goes to a hidden sibling first, its
/// digest is checked against the source's and against `expect` (`sha256:<hex>`, the digest the
/// sender computed) and only a verified copy replaces what was there. A destination that is a
/// symlink (an install the ledger records, e.g. an adoption) is refused, never replaced.
///
/// # Errors
/// [`DeployError`]: not a skill tree, a symlinked destination, the copy's error, or a digest
/// mismatch naming the tree and both digests; the install root is unchanged in each case.
pub fn deploy_tree(
    tree: &Path,
    root: &Path,
    expect: Option<&str>,
    copy: impl Fn(&Path, &Path) -> Result<(), IoError>,
) -> Result<Deployed, DeployError> {
    let name = skill_tree_name(tree)?;
    let to = root.join(&name);
    if to
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        return Err(DeployError::Symlink(to));
    }
    let want = format!("sha256:{}", tree_digest(tree)?);
    if let Some(expect) = expect.filter(|e| *e != want) {
        return Err(DeployError::NotSent {
            name,
            tree: tree.to_owned(),
            got: want,
            expected: expect.to_owned(),
        });
    }
    std::fs::create_dir_all(root).map_err(IoError::on("create", root))?;
    let staging = root.join(format!(".{name}.deploying-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    let verified = copy(tree, &staging)
        .and_then(|()| tree_digest(&staging))
        .map_err(DeployError::from)
        .and_then(|got| {
            let got = format!("sha256:{got}");
            if got == want {
                Ok(())
            } else {
                Err(DeployError::BadCopy {
                    name: name.clone(),
                    source_digest: want.clone(),
                    to: to.clone(),
                    copy_digest: got,
                })
            }
        });
    if let Err(e) = verified {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    let old = root.join(format!(".{name}.replaced-{}", std::process::id()));
    if to.exists() {
        std::fs::rename(&to, &old).map_err(|source| DeployError::MoveAside {
            path: to.clone(),
            source,
        })?;
    }
    std::fs::rename(&staging, &to).map_err(IoError::on("install", &to))?;
    let _ = std::fs::remove_dir_all(&old);
    Ok(Deployed {
        skill: name,
        digest: want,
        path: to,
    })
}

/// The `process` job of stage `deploy` that installs `trees` on the worker labelled
/// `host=<host>`: each tree's files staged into `area` under `in/<name>/…`, the worker's own
/// `skillforge --json eval deploy [--root ROOT] --expect NAME=sha256:… … <job dir>/in/NAME …`
/// as the command (`root`: the remote install root; when `None`, the user-level skill directory
/// on that worker of each of `runtimes` (`--runtime R`), or of every runtime when `runtimes` is
/// empty: `super::install::user_skill_root`). Returns the job and every tree's
/// `(name, sha256:<hex>)`.
///
/// # Errors
/// [`DeployError`]: not a skill tree, two trees of one name, a file unreadable or over the area's
/// cap, the area's.
pub async fn deploy_job(
    area: &dyn TransferArea,
    stage: &StageDef,
    trees: &[PathBuf],
    host: &str,
    root: Option<&str>,
    runtimes: &[String],
) -> Result<(JobSpec, Vec<(String, String)>), DeployError> {
    let mut stager = Stager::new(area);
    let mut argv = vec![
        transfer::WORKER_EXE.to_owned(),
        "--json".into(),
        "eval".into(),
        "deploy".into(),
    ];
    match root {
        Some(root) => argv.extend(["--root".to_owned(), root.to_owned()]),
        None => {
            for runtime in runtimes {
                argv.extend(["--runtime".to_owned(), runtime.clone()]);
            }
        }
    }
    let mut expected: Vec<(String, String)> = Vec::new();
    for tree in trees {
        let name = skill_tree_name(tree)?;
        if expected.iter().any(|(n, _)| *n == name) {
            return Err(DeployError::DuplicateName {
                name,
                host: host.to_owned(),
            });
        }
        let digest = format!("sha256:{}", tree_digest(tree)?);
        let mut files = walk(tree);
        files.sort();
        for file in files {
            // `walk(tree)` yields paths under `tree` only.
            let Ok(rel) = file
                .strip_prefix(tree)
                .map(|r| r.to_string_lossy().into_owned())
            else {
                continue;
            };
            stager
                .add_file(&format!("in/{name}/{rel}"), &file)
                .await
                .map_err(|source| DeployError::Stage {
                    path: file.clone(),
                    host: host.to_owned(),
                    source,
                })?;
        }
        argv.extend(["--expect".to_owned(), format!("{name}={digest}")]);
        expected.push((name, digest));
    }
    argv.extend(
        expected
            .iter()
            .map(|(name, _)| format!("{}/in/{name}", transfer::JOB_DIR)),
    );
    let payload = ProcessPayload::argv(argv);
    // No idempotency key: a deploy run again is meant to install again (the remote copy may have
    // changed since), not to return the last run's job.
    let mut spec = stage.job(&payload, None)?;
    spec.requires = skillforge_engine::labels::normalize(&[format!("host={host}")]);
    spec.queue = skillforge_engine::labels::route(&spec.queue, &spec.requires);
    spec.files = JobFiles {
        inputs: stager.finish(),
        outputs: vec![],
    };
    Ok((spec, expected))
}

/// Checks the remote's `eval deploy --json` report (`stdout`) against what was sent: every tree
/// reported, each with the sender's digest.
///
/// # Errors
/// [`DeployError`]: an unreadable report, a tree missing from it, or a digest that differs,
/// naming the tree and the host.
pub fn check_remote_report(
    stdout: &str,
    expected: &[(String, String)],
    host: &str,
) -> Result<Vec<Deployed>, DeployError> {
    skillforge_contract::limits::check_json(stdout).map_err(|source| {
        DeployError::ReportLimits {
            host: host.to_owned(),
            source,
        }
    })?;
    let report: Vec<Deployed> =
        serde_json::from_str(stdout.trim()).map_err(|source| DeployError::ReportParse {
            host: host.to_owned(),
            source,
            report: stdout.trim().to_owned(),
        })?;
    for (name, digest) in expected {
        let got =
            report
                .iter()
                .find(|d| d.skill == *name)
                .ok_or_else(|| DeployError::NotReported {
                    host: host.to_owned(),
                    name: name.clone(),
                })?;
        if got.digest != *digest {
            return Err(DeployError::RemoteMismatch {
                name: name.clone(),
                host: host.to_owned(),
                sent: digest.clone(),
                installed: got.digest.clone(),
            });
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steps::arm::copy_tree;

    fn tree(dir: &Path) -> PathBuf {
        let tree = dir.join("src/tldr");
        std::fs::create_dir_all(tree.join("refs")).unwrap();
        std::fs::write(tree.join("SKILL.md"), "# tldr").unwrap();
        std::fs::write(tree.join("refs/voice.md"), "short").unwrap();
        tree
    }

    // E-40
    #[test]
    fn e40_each_copied_tree_is_verified_by_digest() {
        let dir = tempfile::tempdir().unwrap();
        let tree = tree(dir.path());
        let root = dir.path().join("root");
        let ok = deploy_tree(&tree, &root, None, copy_tree).unwrap();
        assert_eq!(
            ok.digest,
            format!("sha256:{}", tree_digest(&root.join("tldr")).unwrap())
        );
        let corrupting = |from: &Path, to: &Path| {
            copy_tree(from, to)?;
            std::fs::write(to.join("refs/voice.md"), "long")
                .map_err(IoError::on("write", to.join("refs/voice.md")))
        };
        std::fs::write(tree.join("refs/voice.md"), "shorter").unwrap();
        let e = deploy_tree(&tree, &root, None, corrupting)
            .unwrap_err()
            .to_string();
        assert!(e.contains("digest mismatch for `tldr`"), "{e}");
        assert_eq!(
            std::fs::read_to_string(root.join("tldr/refs/voice.md")).unwrap(),
            "short",
            "the installed tree is untouched"
        );
        let e = deploy_tree(&tree, &root, Some("sha256:00"), copy_tree)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("digest mismatch") && e.contains("sha256:00"),
            "{e}"
        );
        assert_eq!(
            std::fs::read_dir(&root).unwrap().count(),
            1,
            "no staging dir is left behind"
        );
        // A verified copy replaces the old tree whole: a file the new tree dropped is gone.
        std::fs::remove_file(tree.join("refs/voice.md")).unwrap();
        deploy_tree(&tree, &root, None, copy_tree).unwrap();
        assert!(!root.join("tldr/refs/voice.md").exists());
    }

    // E-40: the remote's report is checked against the sender's digests.
    #[test]
    fn e40_remote_report_must_carry_the_senders_digest() {
        let expected = vec![("tldr".to_owned(), "sha256:aa".to_owned())];
        let good = r#"[{"skill": "tldr", "digest": "sha256:aa", "path": "/r/tldr"}]"#;
        assert_eq!(
            check_remote_report(good, &expected, "box").unwrap().len(),
            1
        );
        let bad = r#"[{"skill": "tldr", "digest": "sha256:bb", "path": "/r/tldr"}]"#;
        assert!(
            check_remote_report(bad, &expected, "box")
                .unwrap_err()
                .to_string()
                .contains("digest mismatch for `tldr` on `box`")
        );
        assert!(
            check_remote_report("[]", &expected, "box")
                .unwrap_err()
                .to_string()
                .contains("no install of `tldr`")
        );
    }
}
