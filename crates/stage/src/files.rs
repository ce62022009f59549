//! A stage's work dirs on a fleet that does not share this disk (issue 20): a job that works in
//! control-plane dirs (an eval arm's work dir, an optimize experiment's worktree) names them in
//! its payload as dirs of the worker's job dir ([`worker_path`]: `@job_dir@/<rel>`); the dirs'
//! files travel by content through the queue's transfer area ([`ship_dirs`]) and come back as
//! the job's output dirs, delivered at ingestion before the family's handler runs. The handler
//! maps the payload's paths back with [`delivered_path`]. On a queue whose workers share this
//! disk ([`skillforge_engine::backend::QueueTransfer::shares_disk`]) none of this is used: the payload names the dirs.
//!
//! What comes back is every file of the dir as the run left it; delivery writes and never
//! removes, so a file the run deleted stays on the control plane unless the step calls
//! [`bring_back`] (the optimize loop's experiments, whose deletions are changes, and the eval
//! forge's arms before their verifies).

use std::path::{Path, PathBuf};

use skillforge_engine::transfer::{self, OutputDir, Stager, TransferError};
use skillforge_engine::{Job, JobSpec, QueueBackend};

/// Why a job's dirs could not be shipped or brought back; every message names the dir, file or
/// job.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// The queue has no transfer area.
    #[error("the `{queue}` queue has no transfer area for a job's dirs")]
    NoTransferArea {
        /// The queue's name.
        queue: String,
    },
    /// A dir's name in the job dir is not a plain relative path.
    #[error(transparent)]
    BadRel(TransferError),
    /// A dir or one of its entries cannot be read.
    #[error("read `{}`: {error}", path.display())]
    Read {
        /// The dir or entry.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A file could not be staged (unreadable, over the cap `[queue] transfer_max_mb`, the queue
    /// failed).
    #[error("send `{}` to the worker: {error}", dir.display())]
    Send {
        /// The control-plane dir.
        dir: PathBuf,
        /// The transfer area's error.
        error: TransferError,
    },
    /// The store cannot be opened for reading the job's record.
    #[error("read where the outputs of job {job_id} go: {error}")]
    RecordPool {
        /// The job.
        job_id: String,
        /// The pool's error.
        error: sqlx::Error,
    },
    /// The job's record cannot be read.
    #[error("read where the outputs of job {job_id} go: {error}")]
    Record {
        /// The job.
        job_id: String,
        /// The engine's error.
        error: skillforge_engine::EngineError,
    },
    /// The job's upload is expired or corrupt, or a file cannot be written.
    #[error("bring back the files of job {job_id}: {error}")]
    BringBack {
        /// The job.
        job_id: String,
        /// The transfer area's error.
        error: TransferError,
    },
    /// A file the run deleted cannot be removed.
    #[error("remove `{}` (job {job_id} deleted it): {error}", file.display())]
    Remove {
        /// The file.
        file: PathBuf,
        /// The job.
        job_id: String,
        /// The I/O error.
        error: std::io::Error,
    },
}

/// A control-plane dir a job works in on a fleet.
#[derive(Debug, Clone, Copy)]
pub struct ShippedDir<'a> {
    /// Its name in the job dir (`work`, `meta`, `out`): one path component.
    pub rel: &'a str,
    /// The control-plane dir it is delivered back to.
    pub local: &'a Path,
    /// Whether its current files are sent to the worker (false: an output dir only, e.g. a dir
    /// whose other files the job must not see).
    pub send: bool,
    /// Whether the worker's copy comes back (false: an input dir only, e.g. a checkout a
    /// measurement reads).
    pub deliver: bool,
    /// Top-level names of `local` never sent (a worktree's `.git` pointer, which names a
    /// control-plane path).
    pub skip: &'a [&'a str],
}

/// `@job_dir@/<rel>`: the worker's path of a shipped dir.
pub fn worker_path(rel: &str) -> PathBuf {
    PathBuf::from(format!("{}/{rel}", transfer::JOB_DIR))
}

/// Whether jobs on `queue` must ship their dirs (its workers may be other machines).
pub fn ships(queue: &dyn QueueBackend) -> bool {
    !queue.shares_disk()
}

/// Adds `dirs` to `spec`'s files: each sent dir's regular files staged as inputs under
/// `<rel>/`, and each dir an output delivered to its `local`.
///
/// # Errors
/// [`FilesError`] naming the dir or file: the queue has no transfer area, a file is unreadable
/// or over the cap (`[queue] transfer_max_mb`), the queue fails.
pub async fn ship_dirs(
    queue: &dyn QueueBackend,
    spec: &mut JobSpec,
    dirs: &[ShippedDir<'_>],
) -> Result<(), FilesError> {
    let area = queue
        .transfer_area()
        .ok_or_else(|| FilesError::NoTransferArea {
            queue: queue.name().to_owned(),
        })?;
    let mut stager = Stager::new(area.as_ref());
    for dir in dirs {
        transfer::checked_rel(dir.rel).map_err(FilesError::BadRel)?;
        if dir.send {
            for file in regular_files(dir.local)? {
                let rel = file
                    .strip_prefix(dir.local)
                    .unwrap_or(&file)
                    .to_string_lossy()
                    .into_owned();
                if is_skipped(&rel, dir.skip) {
                    continue;
                }
                stager
                    .add_file(&format!("{}/{rel}", dir.rel), &file)
                    .await
                    .map_err(|error| FilesError::Send {
                        dir: dir.local.to_path_buf(),
                        error,
                    })?;
            }
        }
        if dir.deliver {
            spec.files.outputs.push(OutputDir {
                dir: dir.rel.to_owned(),
                deliver_to: dir.local.to_path_buf(),
            });
        }
    }
    spec.files.inputs.extend(stager.finish());
    Ok(())
}

fn is_skipped(rel: &str, skip: &[&str]) -> bool {
    let top = rel.split('/').next().unwrap_or(rel);
    skip.contains(&top)
}

/// The control plane's record of where `job_id`'s output dirs go (written when the stage port
/// enqueued it; [`skillforge_store::deliveries`]), the only `deliver_to` a delivery uses.
///
/// # Errors
/// [`FilesError::RecordPool`] or [`FilesError::Record`] naming the job when the store cannot be
/// read.
pub async fn recorded_outputs(
    store: &skillforge_store::Store,
    job_id: &str,
) -> Result<Vec<OutputDir>, FilesError> {
    let mut conn = store
        .pool()
        .acquire()
        .await
        .map_err(|error| FilesError::RecordPool {
            job_id: job_id.to_owned(),
            error,
        })?;
    skillforge_engine::ingest::recorded_outputs(&mut conn, store.home(), job_id)
        .await
        .map_err(|error| FilesError::Record {
            job_id: job_id.to_owned(),
            error,
        })
}

/// Brings `job`'s output dirs back now into the `recorded` dirs (the control plane's own
/// record, [`recorded_outputs`]; a queued job that disagrees is refused) — the delivery
/// ingestion does, for a step that reads them as soon as the job is finished; idempotent — and
/// makes the output dir `rel` the worker's copy:
/// a file of its `deliver_to` the attempt did not upload (the run deleted it) is removed, except
/// under the top-level names of `skip`. Nothing for a job without outputs or whose attempt
/// uploaded none.
///
/// # Errors
/// [`FilesError`] naming the job: an expired or corrupt upload, a file that cannot be written
/// or removed.
pub async fn bring_back(
    queue: &dyn QueueBackend,
    recorded: &[OutputDir],
    job: &Job,
    rel: &str,
    skip: &[&str],
) -> Result<(), FilesError> {
    let Some(area) = queue
        .transfer_area()
        .filter(|_| !job.spec.files.outputs.is_empty())
    else {
        return Ok(());
    };
    let what = |error: TransferError| FilesError::BringBack {
        job_id: job.id.clone(),
        error,
    };
    transfer::deliver_outputs(area.as_ref(), job, recorded)
        .await
        .map_err(what)?;
    let Some(uploaded) = transfer::uploaded_outputs(area.as_ref(), &job.id, job.fencing_token)
        .await
        .map_err(what)?
    else {
        return Ok(());
    };
    let (Some(dir), Some(out)) = (
        uploaded.iter().find(|d| d.dir == rel),
        recorded.iter().find(|o| o.dir == rel),
    ) else {
        return Ok(());
    };
    let kept: std::collections::BTreeSet<&str> =
        dir.files.iter().map(|f| f.path.as_str()).collect();
    for file in regular_files(&out.deliver_to)? {
        let name = file
            .strip_prefix(&out.deliver_to)
            .unwrap_or(&file)
            .to_string_lossy()
            .into_owned();
        if !kept.contains(name.as_str()) && !is_skipped(&name, skip) {
            std::fs::remove_file(&file).map_err(|error| FilesError::Remove {
                file: file.clone(),
                job_id: job.id.clone(),
                error,
            })?;
        }
    }
    Ok(())
}

/// The control-plane path of `path` from `job`'s payload: `@job_dir@/<dir>/<rest>` where `dir`
/// is one of the job's output dirs becomes `<its deliver_to>/<rest>`; any other path is returned
/// as it is (a job that shipped nothing names control-plane paths).
pub fn delivered_path(job: &Job, path: &Path) -> PathBuf {
    let Ok(rest) = path.strip_prefix(transfer::JOB_DIR) else {
        return path.to_path_buf();
    };
    for out in &job.spec.files.outputs {
        if let Ok(tail) = rest.strip_prefix(&out.dir) {
            return out.deliver_to.join(tail);
        }
    }
    path.to_path_buf()
}

/// Regular files under `dir`, recursively, sorted (symlinks are not followed); none when `dir`
/// does not exist.
fn regular_files(dir: &Path) -> Result<Vec<PathBuf>, FilesError> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && d == dir => return Ok(out),
            Err(error) => return Err(FilesError::Read { path: d, error }),
        };
        for entry in entries {
            let entry = entry.map_err(|error| FilesError::Read {
                path: d.clone(),
                error,
            })?;
            let kind = entry.file_type().map_err(|error| FilesError::Read {
                path: entry.path(),
                error,
            })?;
            if kind.is_dir() {
                todo.push(entry.path());
            } else if kind.is_file() {
                out.push(entry.path());
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_paths_in_an_output_dir_map_back_to_the_control_plane() {
        let mut spec = JobSpec::new("agent", serde_json::json!({}));
        spec.files.outputs.push(OutputDir {
            dir: "meta".into(),
            deliver_to: "/cp/s1/with.meta".into(),
        });
        let job = Job {
            id: "j".into(),
            spec,
            state: skillforge_engine::JobState::Succeeded,
            attempts: 1,
            fencing_token: 1,
            lease: None,
            not_before_ms: 0,
            created_at_ms: 0,
            updated_at_ms: 0,
            cancel_requested: false,
            recovery_available: false,
            outcome: None,
            error: None,
            history: Vec::new(),
        };
        assert_eq!(
            delivered_path(&job, &worker_path("meta").join("transcript.jsonl")),
            PathBuf::from("/cp/s1/with.meta/transcript.jsonl")
        );
        assert_eq!(
            delivered_path(&job, &worker_path("meta")),
            PathBuf::from("/cp/s1/with.meta")
        );
        assert_eq!(
            delivered_path(&job, Path::new("/cp/s1/with")),
            PathBuf::from("/cp/s1/with"),
            "a control-plane path stays"
        );
        assert_eq!(
            delivered_path(&job, &worker_path("metadata/x")),
            worker_path("metadata/x"),
            "whole components only"
        );
    }

    #[test]
    fn regular_files_walks_a_tree_and_a_missing_dir_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/.claude/skills/x")).unwrap();
        std::fs::write(dir.path().join("a/.claude/skills/x/SKILL.md"), "s").unwrap();
        std::fs::write(dir.path().join("a/notes.md"), "n").unwrap();
        let files = regular_files(&dir.path().join("a")).unwrap();
        assert_eq!(files.len(), 2);
        assert!(
            regular_files(&dir.path().join("missing"))
                .unwrap()
                .is_empty()
        );
    }
}
