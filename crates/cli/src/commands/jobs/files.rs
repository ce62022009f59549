//! `jobs submit --file` and `--cwd`: what an ad-hoc job's working directory is and how its files
//! reach a worker (issue 20). A worker on a Redis fleet may be another machine, so the caller's
//! current directory is never sent as a fleet job's working directory.
//!
//! * `--cwd DIR`: DIR verbatim (on a Redis fleet a directory of the worker, so it must be
//!   absolute; on the embedded queue made absolute against the caller's directory).
//! * `--file PATH` (repeatable): the file is staged by content into the queue's transfer area
//!   (Redis: chunked keys with a TTL; embedded: the home's blob store) and placed as
//!   `<job dir>/<file name>` before the command starts; the job runs in its job dir.
//! * neither: the caller's current directory on the embedded queue (its workers share this
//!   disk); the worker's job dir (an empty dir of the attempt's scratch dir) on a Redis fleet.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use skillforge_engine::QueueBackend;
use skillforge_engine::transfer::{self, FileEntry, Stager, TransferError};

use crate::exit::CliError;

/// Stages each of `paths` as `<file name>` of the job dir; nothing is enqueued by this.
///
/// # Errors
/// Exit 2 for a file that does not exist, is not a regular file, repeats another's name, or is
/// over the transfer area's cap (the message names the file and the cap, `[queue]
/// transfer_max_mb`); exit 3 when the queue fails.
pub(super) async fn stage_files(
    backend: &dyn QueueBackend,
    paths: &[PathBuf],
) -> Result<Vec<FileEntry>, CliError> {
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    let area = backend.transfer_area().ok_or_else(|| {
        CliError::env(anyhow!(
            "the `{}` queue has no transfer area for --file",
            backend.name()
        ))
    })?;
    let mut stager = Stager::new(area.as_ref());
    let mut names = std::collections::BTreeSet::new();
    for path in paths {
        let meta = std::fs::metadata(path)
            .map_err(|e| CliError::usage(anyhow!("--file `{}`: {e}", path.display())))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .filter(|_| meta.is_file());
        let Some(name) = name else {
            return Err(CliError::usage(anyhow!(
                "--file `{}` is not a regular file",
                path.display()
            )));
        };
        if !names.insert(name.clone()) {
            return Err(CliError::usage(anyhow!(
                "--file `{}`: another --file is also named `{name}` in the job dir",
                path.display()
            )));
        }
        stager.add_file(&name, path).await.map_err(|e| match e {
            TransferError::TooLarge { .. } | TransferError::Io(_) | TransferError::BadPath(_) => {
                CliError::usage(anyhow!(
                    "--file `{}`: {e}; nothing was enqueued",
                    path.display()
                ))
            }
            other => CliError::env(anyhow!(
                "--file `{}`: stage it in the queue's transfer area: {other}",
                path.display()
            )),
        })?;
    }
    Ok(stager.finish())
}

/// The job's working directory (see the module docs); `has_files`: `--file` was given.
///
/// # Errors
/// Exit 2 for a relative `--cwd` on a queue whose workers do not share this disk.
pub(super) fn working_dir(
    backend: &dyn QueueBackend,
    cwd: Option<&Path>,
    has_files: bool,
) -> Result<Option<PathBuf>, CliError> {
    let job_dir = || Some(PathBuf::from(transfer::JOB_DIR));
    match cwd {
        Some(dir) if backend.shares_disk() => std::path::absolute(dir)
            .map(Some)
            .map_err(|e| CliError::usage(anyhow!("--cwd `{}`: {e}", dir.display()))),
        Some(dir) if dir.is_relative() => Err(CliError::usage(anyhow!(
            "--cwd `{}` is relative: on a `{}` fleet it names a directory on the worker's machine, so give an absolute path",
            dir.display(),
            backend.name()
        ))),
        Some(dir) => Ok(Some(dir.to_path_buf())),
        None if has_files || !backend.shares_disk() => Ok(job_dir()),
        None => Ok(std::env::current_dir().ok()),
    }
}
