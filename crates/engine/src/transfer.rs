//! The transfer area: how a job's files travel between the control plane and a worker through
//! the queue backend, by content, never by a path on the control plane's disk (issue 20).
//!
//! A job declares its files in [`JobFiles`] (`JobSpec::files`): **inputs** (relative path →
//! sha256 of the content the producer staged with a [`Stager`]) and **output dirs** (a relative
//! dir of the job dir, and where the control plane delivers it). The worker makes a job dir
//! (`<scratch>/job`), materializes the inputs there (each verified by hash), creates the output
//! dirs, fills the payload's placeholders ([`JOB_DIR`], [`WORKER_EXE`]) and runs the runner; when
//! it ends — passed, failed or killed — the output dirs are staged and their manifest is
//! recorded under `outputs/<job id>/<fencing token>` before the result is sent. The control plane
//! verifies and writes them to `deliver_to` at ingestion, before the result handler
//! ([`deliver_outputs`]), for the token being applied only (a fenced-off attempt's outputs are
//! never delivered); writing content-addressed files is idempotent, so a re-delivered result
//! changes nothing.
//!
//! Backends: Redis keeps blobs as chunked keys with a TTL, deduplicated by sha256
//! (`redis/transfer.rs`); the embedded queue's area is the home's blob store
//! ([`LocalTransfer`] on `<queue dir>/blobs`, the `--artifact-root` layout), and its workers
//! share the control plane's disk ([`crate::backend::QueueTransfer::shares_disk`]), so stages there keep
//! passing paths. Every blob is capped ([`TransferLimits::max_bytes`], also the cap of a job's
//! whole input set) with an error naming the file and the config key.

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::error::EngineError;
use crate::job::Job;

/// Placeholder a job's payload may carry in any string: the worker replaces it with the
/// attempt's job dir (absolute) before the runner starts.
pub const JOB_DIR: &str = "@job_dir@";
/// Placeholder for the worker's own executable (`skillforge` on a build machine), so a job
/// never names the control plane's binary path.
pub const WORKER_EXE: &str = "@worker_exe@";
/// Name of the job dir inside an attempt's scratch dir.
pub const JOB_DIR_NAME: &str = "job";
/// Default chunk size of the Redis transfer area (1 MiB).
pub const DEFAULT_CHUNK_BYTES: usize = 1 << 20;
/// Default time to live of staged content (24 h): a job not started by then fails with
/// [`TransferError::Missing`].
pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);
/// Default cap of one blob and of one job's input set (512 MiB).
pub const DEFAULT_MAX_BYTES: u64 = 512 << 20;

/// Limits of a transfer area (`[queue] transfer_ttl_secs`, `transfer_max_mb`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferLimits {
    /// Bytes per Redis key.
    pub chunk_bytes: usize,
    /// Time to live of staged blobs and records (refreshed when the same content is staged again).
    pub ttl: Duration,
    /// Largest blob, and largest input set of one job, in bytes.
    pub max_bytes: u64,
}

impl Default for TransferLimits {
    fn default() -> Self {
        Self {
            chunk_bytes: DEFAULT_CHUNK_BYTES,
            ttl: DEFAULT_TTL,
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

/// Why content could not be staged, fetched or placed.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// The blob is not (or no longer) in the area.
    #[error(
        "transfer blob sha256:{digest} is not in the queue's transfer area: it expired (staged files are kept for \
         `[queue] transfer_ttl_secs` of the control plane that staged them, default 86400 s) or was never staged; \
         re-run the command that submitted the job so it stages its files again"
    )]
    Missing {
        /// Hex sha256.
        digest: String,
    },
    /// What came back does not hash to its name: refused.
    #[error(
        "transfer blob sha256:{digest} is corrupt: its content hashes to sha256:{actual}; refused"
    )]
    Corrupt {
        /// The name asked for.
        digest: String,
        /// What the bytes hash to.
        actual: String,
    },
    /// Over the cap.
    #[error(
        "{what} is {size} bytes, over the transfer area's cap of {cap} bytes (raise [queue] transfer_max_mb)"
    )]
    TooLarge {
        /// The file or set, e.g. ``file `in/training.json` ``.
        what: String,
        /// Its size.
        size: u64,
        /// The cap.
        cap: u64,
    },
    /// A path in a file set that would escape its dir, or is empty.
    #[error("file path `{0}` in a job's file set is not a relative path inside the job dir")]
    BadPath(String),
    /// A job's output dirs as the queue holds them disagree with where the control plane
    /// recorded it asked them to go (someone with queue access rewrote them), or the control
    /// plane recorded none: nothing is written.
    #[error("refused to deliver the outputs of job {job_id}: {reason}")]
    Refused {
        /// The job.
        job_id: String,
        /// What disagrees.
        reason: String,
    },
    /// The attempt ran and uploaded its output dirs, but their manifest is gone from the area
    /// (kept `[queue] transfer_ttl_secs`): the outputs expired before the control plane took them.
    #[error(
        "the outputs of job {job_id} (token {token}) expired before the control plane took them: its manifest is no \
         longer in the transfer area (kept `[queue] transfer_ttl_secs`); run `serve` (or the waiting command) \
         sooner, or raise the TTL"
    )]
    OutputsExpired {
        /// The job.
        job_id: String,
        /// The attempt's fencing token.
        token: u64,
    },
    /// A local file operation.
    #[error("{0}")]
    Io(String),
    /// The queue backend.
    #[error(transparent)]
    Backend(#[from] EngineError),
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> TransferError {
    move |e| TransferError::Io(format!("{what}: {e}"))
}

/// One stored blob: its name and whether this call uploaded it (false: deduplicated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// Hex sha256 of the content.
    pub digest: String,
    /// False when the area already held it (its TTL was refreshed instead).
    pub uploaded: bool,
}

/// A content-addressed store shared by the control plane and workers through the queue.
#[async_trait::async_trait]
pub trait TransferArea: Send + Sync {
    /// Its limits.
    fn limits(&self) -> TransferLimits;

    /// Stores `bytes` under their sha256 (hex). Content already present is not uploaded again.
    ///
    /// # Errors
    /// [`TransferError::TooLarge`] over [`TransferLimits::max_bytes`]; the backend's.
    async fn put(&self, bytes: &[u8]) -> Result<Stored, TransferError>;

    /// The content named `digest`, verified.
    ///
    /// # Errors
    /// [`TransferError::Missing`], [`TransferError::Corrupt`], the backend's.
    async fn get(&self, digest: &str) -> Result<Vec<u8>, TransferError>;

    /// Stores a small named record (an outputs manifest), with the area's TTL.
    ///
    /// # Errors
    /// The backend's.
    async fn put_record(&self, key: &str, bytes: &[u8]) -> Result<(), TransferError>;

    /// A named record, `None` when absent or expired.
    ///
    /// # Errors
    /// The backend's.
    async fn get_record(&self, key: &str) -> Result<Option<Vec<u8>>, TransferError>;

    /// Removes a named record (a stopping worker's labels); absent is not an error.
    ///
    /// # Errors
    /// The backend's.
    async fn remove_record(&self, key: &str) -> Result<(), TransferError>;
}

/// Hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Verifies that `bytes` hash to `digest`.
///
/// # Errors
/// [`TransferError::Corrupt`].
pub fn verify(digest: &str, bytes: &[u8]) -> Result<(), TransferError> {
    let actual = sha256_hex(bytes);
    if actual == digest {
        Ok(())
    } else {
        Err(TransferError::Corrupt {
            digest: digest.to_owned(),
            actual,
        })
    }
}

/// One file of a job's file set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Relative path (`/`-separated) inside the job dir or the output dir.
    pub path: String,
    /// Hex sha256 of its content (the transfer area's name for it).
    pub sha256: String,
    /// Bytes.
    pub size: u64,
    /// Whether it is materialized executable (0700 rather than 0600).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub executable: bool,
}

/// An output dir of a job: uploaded from `<job dir>/<dir>` after the run, written to
/// `deliver_to` (a control-plane path, read only at ingestion) by [`deliver_outputs`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputDir {
    /// Relative dir inside the job dir, e.g. `out`.
    pub dir: String,
    /// Where the control plane puts its files.
    pub deliver_to: PathBuf,
}

/// The files a job carries (`JobSpec::files`); empty for jobs whose inputs ride in the payload.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobFiles {
    /// Files placed in the job dir before the runner starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<FileEntry>,
    /// Dirs uploaded after the run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<OutputDir>,
}

impl JobFiles {
    /// No inputs and no outputs.
    pub fn is_empty(&self) -> bool {
        self.inputs.is_empty() && self.outputs.is_empty()
    }
}

/// The uploaded files of one output dir (the record under `outputs/<job>/<token>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadedDir {
    /// [`OutputDir::dir`].
    pub dir: String,
    /// Its files, relative to it.
    pub files: Vec<FileEntry>,
}

/// Record key of the outputs of attempt `token` of `job_id`.
pub fn outputs_key(job_id: &str, token: u64) -> String {
    format!("outputs/{job_id}/{token}")
}

/// Checks that `rel` is a non-empty relative path without `..`, returning it as a path.
///
/// # Errors
/// [`TransferError::BadPath`].
pub fn checked_rel(rel: &str) -> Result<PathBuf, TransferError> {
    let path = Path::new(rel);
    let ok = !rel.is_empty()
        && path
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if ok {
        Ok(path.to_path_buf())
    } else {
        Err(TransferError::BadPath(rel.to_owned()))
    }
}

/// Builds a job's input set: stages each file's content in the area and keeps the set's
/// total under the cap.
pub struct Stager<'a> {
    area: &'a dyn TransferArea,
    entries: Vec<FileEntry>,
    total: u64,
    /// Blobs uploaded (not deduplicated) so far.
    pub uploaded: usize,
}

impl<'a> Stager<'a> {
    /// An empty set staged into `area`.
    pub fn new(area: &'a dyn TransferArea) -> Self {
        Self {
            area,
            entries: Vec::new(),
            total: 0,
            uploaded: 0,
        }
    }

    /// Stages `bytes` as `rel`.
    ///
    /// # Errors
    /// [`TransferError::BadPath`], [`TransferError::TooLarge`] (the file or the set), the area's.
    pub async fn add_bytes(
        &mut self,
        rel: &str,
        bytes: &[u8],
        executable: bool,
    ) -> Result<(), TransferError> {
        checked_rel(rel)?;
        let size = bytes.len() as u64;
        let cap = self.area.limits().max_bytes;
        if self.total + size > cap {
            return Err(TransferError::TooLarge {
                what: format!("the job's input files (with `{rel}`)"),
                size: self.total + size,
                cap,
            });
        }
        let stored = self.area.put(bytes).await.map_err(|e| match e {
            TransferError::TooLarge { size, cap, .. } => TransferError::TooLarge {
                what: format!("input file `{rel}`"),
                size,
                cap,
            },
            other => other,
        })?;
        self.total += size;
        self.uploaded += usize::from(stored.uploaded);
        self.entries.push(FileEntry {
            path: rel.to_owned(),
            sha256: stored.digest,
            size,
            executable,
        });
        Ok(())
    }

    /// Stages the file at `path` as `rel`.
    ///
    /// # Errors
    /// The file unreadable; as [`Self::add_bytes`].
    pub async fn add_file(&mut self, rel: &str, path: &Path) -> Result<(), TransferError> {
        let bytes = tokio::fs::read(path)
            .await
            .map_err(io(format!("read `{}` to stage it", path.display())))?;
        self.add_bytes(rel, &bytes, is_executable(path)).await
    }

    /// The staged entries.
    pub fn finish(self) -> Vec<FileEntry> {
        self.entries
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}

/// Stages every regular file under `dir` (symlinks are not followed), paths relative to `dir`.
///
/// # Errors
/// A file unreadable; the area's.
pub async fn stage_dir(
    area: &dyn TransferArea,
    dir: &Path,
) -> Result<Vec<FileEntry>, TransferError> {
    let mut files = Vec::new();
    for entry in walkdir::WalkDir::new(dir)
        .follow_links(false)
        .sort_by_file_name()
    {
        let entry =
            entry.map_err(|e| TransferError::Io(format!("walk `{}`: {e}", dir.display())))?;
        if !entry.file_type().is_file() {
            continue;
        }
        let rel = entry.path().strip_prefix(dir).unwrap_or(entry.path());
        let rel = rel.to_string_lossy().into_owned();
        let bytes = tokio::fs::read(entry.path())
            .await
            .map_err(io(format!("read output `{}`", entry.path().display())))?;
        let stored = area.put(&bytes).await.map_err(|e| match e {
            TransferError::TooLarge { size, cap, .. } => TransferError::TooLarge {
                what: format!("output file `{rel}`"),
                size,
                cap,
            },
            other => other,
        })?;
        files.push(FileEntry {
            path: rel,
            sha256: stored.digest,
            size: bytes.len() as u64,
            executable: is_executable(entry.path()),
        });
    }
    Ok(files)
}

/// Writes `entries` under `dest`, each fetched and verified by hash, atomically (temp file +
/// rename); a file already holding the right content is left alone.
///
/// # Errors
/// [`TransferError::BadPath`], [`TransferError::Missing`], [`TransferError::Corrupt`], a write failure.
pub async fn materialize(
    area: &dyn TransferArea,
    entries: &[FileEntry],
    dest: &Path,
) -> Result<(), TransferError> {
    for entry in entries {
        let target = dest.join(checked_rel(&entry.path)?);
        if let Ok(existing) = tokio::fs::read(&target).await
            && sha256_hex(&existing) == entry.sha256
        {
            continue;
        }
        let bytes = area.get(&entry.sha256).await?;
        write_atomic(&target, &bytes, entry.executable).await?;
    }
    Ok(())
}

async fn write_atomic(target: &Path, bytes: &[u8], executable: bool) -> Result<(), TransferError> {
    use std::os::unix::fs::PermissionsExt;
    let parent = target.parent().unwrap_or(Path::new("."));
    tokio::fs::create_dir_all(parent)
        .await
        .map_err(io(format!("create `{}`", parent.display())))?;
    let tmp = parent.join(format!(
        ".{}.part-{}",
        target
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        uuid::Uuid::now_v7()
    ));
    tokio::fs::write(&tmp, bytes)
        .await
        .map_err(io(format!("write `{}`", tmp.display())))?;
    let mode = if executable { 0o700 } else { 0o600 };
    tokio::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))
        .await
        .map_err(io(format!("chmod `{}`", tmp.display())))?;
    tokio::fs::rename(&tmp, target)
        .await
        .map_err(io(format!("rename into `{}`", target.display())))
}

/// Replaces [`JOB_DIR`] and [`WORKER_EXE`] in every string of `payload`.
pub fn fill_placeholders(payload: &mut serde_json::Value, job_dir: &str, worker_exe: &str) {
    match payload {
        serde_json::Value::String(s) if s.contains('@') => {
            *s = s.replace(JOB_DIR, job_dir).replace(WORKER_EXE, worker_exe);
        }
        serde_json::Value::Array(items) => items
            .iter_mut()
            .for_each(|v| fill_placeholders(v, job_dir, worker_exe)),
        serde_json::Value::Object(map) => map
            .values_mut()
            .for_each(|v| fill_placeholders(v, job_dir, worker_exe)),
        _ => {}
    }
}

/// Whether some string of `payload` names [`JOB_DIR`] (the job runs in, or writes to, its job dir).
pub fn names_job_dir(payload: &serde_json::Value) -> bool {
    match payload {
        serde_json::Value::String(s) => s.contains(JOB_DIR),
        serde_json::Value::Array(items) => items.iter().any(names_job_dir),
        serde_json::Value::Object(map) => map.values().any(names_job_dir),
        _ => false,
    }
}

/// Worker side, before the runner: creates `job_dir`, materializes `files.inputs` (verified)
/// and creates each output dir.
///
/// # Errors
/// As [`materialize`]; a dir that cannot be created.
pub async fn prepare_job_dir(
    area: &dyn TransferArea,
    files: &JobFiles,
    job_dir: &Path,
) -> Result<(), TransferError> {
    tokio::fs::create_dir_all(job_dir)
        .await
        .map_err(io(format!("create job dir `{}`", job_dir.display())))?;
    materialize(area, &files.inputs, job_dir).await?;
    for out in &files.outputs {
        let dir = job_dir.join(checked_rel(&out.dir)?);
        tokio::fs::create_dir_all(&dir)
            .await
            .map_err(io(format!("create output dir `{}`", dir.display())))?;
    }
    Ok(())
}

/// Worker side, after the runner: stages each output dir and records the manifest under
/// [`outputs_key`]`(job_id, token)`.
///
/// # Errors
/// A file unreadable, over the cap, or the area's.
pub async fn upload_outputs(
    area: &dyn TransferArea,
    job_id: &str,
    token: u64,
    files: &JobFiles,
    job_dir: &Path,
) -> Result<Vec<UploadedDir>, TransferError> {
    let mut uploaded = Vec::with_capacity(files.outputs.len());
    for out in &files.outputs {
        let dir = job_dir.join(checked_rel(&out.dir)?);
        let entries = if dir.is_dir() {
            stage_dir(area, &dir).await?
        } else {
            Vec::new()
        };
        uploaded.push(UploadedDir {
            dir: out.dir.clone(),
            files: entries,
        });
    }
    let record = serde_json::to_vec(&uploaded)
        .map_err(|e| TransferError::Io(format!("encode the outputs manifest: {e}")))?;
    area.put_record(&outputs_key(job_id, token), &record)
        .await?;
    Ok(uploaded)
}

/// The outputs uploaded by the attempt `token` of `job_id`; `None` when that attempt uploaded
/// none (its runner never ran, or its worker died first).
///
/// # Errors
/// An unreadable record; the area's.
pub async fn uploaded_outputs(
    area: &dyn TransferArea,
    job_id: &str,
    token: u64,
) -> Result<Option<Vec<UploadedDir>>, TransferError> {
    let Some(bytes) = area.get_record(&outputs_key(job_id, token)).await? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes).map(Some).map_err(|e| {
        TransferError::Io(format!(
            "outputs manifest of job {job_id} (token {token}) is unreadable: {e}"
        ))
    })
}

/// Checks `job`'s output dirs as the queue holds them against `recorded`, the control plane's
/// own record of where it asked them to go (never read from the queue): the same dirs, each
/// with the same `deliver_to`. A job without output dirs in the queue passes (nothing to
/// deliver).
///
/// # Errors
/// [`TransferError::Refused`] naming the first disagreement, or saying that nothing was
/// recorded for a job that has output dirs.
pub fn check_recorded_outputs(job: &Job, recorded: &[OutputDir]) -> Result<(), TransferError> {
    let refused = |reason: String| TransferError::Refused {
        job_id: job.id.clone(),
        reason,
    };
    let queued = &job.spec.files.outputs;
    if queued.is_empty() {
        return Ok(());
    }
    if recorded.is_empty() {
        return Err(refused(
            "the job names output dirs, but the control plane recorded none for it (not submitted by this control plane's store?)".to_owned(),
        ));
    }
    for out in queued {
        match recorded.iter().find(|r| r.dir == out.dir) {
            Some(r) if r.deliver_to == out.deliver_to => {}
            Some(r) => {
                return Err(refused(format!(
                    "the queue says output dir `{}` goes to `{}`, the control plane recorded `{}`",
                    out.dir,
                    out.deliver_to.display(),
                    r.deliver_to.display()
                )));
            }
            None => {
                return Err(refused(format!(
                    "output dir `{}` was not recorded by the control plane",
                    out.dir
                )));
            }
        }
    }
    if let Some(missing) = recorded
        .iter()
        .find(|r| !queued.iter().any(|q| q.dir == r.dir))
    {
        return Err(refused(format!(
            "recorded output dir `{}` is missing from the queued job",
            missing.dir
        )));
    }
    Ok(())
}

/// Control-plane side, at ingestion: writes the outputs the job's current attempt uploaded
/// into the control plane's `recorded` dirs (its own record of where it asked them to go; see
/// [`check_recorded_outputs`]: a queued job that disagrees is refused and nothing is written),
/// verified by hash. Returns the number of files written or found in place; 0 when the job
/// declares no outputs or its attempt uploaded none. Idempotent: delivering again rewrites
/// nothing.
///
/// # Errors
/// [`TransferError::Refused`]; [`TransferError::OutputsExpired`] when the attempt ran (it has
/// an outcome) but its manifest is gone, [`TransferError::Missing`] (expired) or
/// [`TransferError::Corrupt`] for a file, a write failure.
pub async fn deliver_outputs(
    area: &dyn TransferArea,
    job: &Job,
    recorded: &[OutputDir],
) -> Result<usize, TransferError> {
    if job.spec.files.outputs.is_empty() {
        return Ok(0);
    }
    check_recorded_outputs(job, recorded)?;
    let Some(uploaded) = uploaded_outputs(area, &job.id, job.fencing_token).await? else {
        // An attempt whose runner ran (it has an outcome) always records its manifest: gone
        // means expired, never "nothing to deliver" (issue 32 item 6).
        if job.outcome.is_some() {
            return Err(TransferError::OutputsExpired {
                job_id: job.id.clone(),
                token: job.fencing_token,
            });
        }
        return Ok(0);
    };
    let mut n = 0;
    for dir in &uploaded {
        let Some(out) = recorded.iter().find(|o| o.dir == dir.dir) else {
            continue;
        };
        materialize(area, &dir.files, &out.deliver_to).await?;
        n += dir.files.len();
    }
    Ok(n)
}

/// The embedded queue's transfer area: a content-addressed dir in the blob store's layout
/// (`<root>/sha256/<hex[:2]>/<hex>`, the `--artifact-root` layout), records under
/// `<root>/transfer-records/`. No TTL: the embedded queue's home outlives its jobs.
#[derive(Debug, Clone)]
pub struct LocalTransfer {
    root: PathBuf,
    limits: TransferLimits,
}

impl LocalTransfer {
    /// The area at `root` (normally `<home>/blobs`).
    pub fn new(root: PathBuf, limits: TransferLimits) -> Self {
        Self { root, limits }
    }

    fn blob_path(&self, digest: &str) -> PathBuf {
        self.root
            .join("sha256")
            .join(digest.get(..2).unwrap_or("00"))
            .join(digest)
    }
}

#[async_trait::async_trait]
impl TransferArea for LocalTransfer {
    fn limits(&self) -> TransferLimits {
        self.limits
    }

    async fn put(&self, bytes: &[u8]) -> Result<Stored, TransferError> {
        let size = bytes.len() as u64;
        if size > self.limits.max_bytes {
            return Err(TransferError::TooLarge {
                what: "a blob".into(),
                size,
                cap: self.limits.max_bytes,
            });
        }
        let digest = sha256_hex(bytes);
        let path = self.blob_path(&digest);
        if let Ok(existing) = tokio::fs::read(&path).await
            && sha256_hex(&existing) == digest
        {
            return Ok(Stored {
                digest,
                uploaded: false,
            });
        }
        write_atomic(&path, bytes, false).await?;
        Ok(Stored {
            digest,
            uploaded: true,
        })
    }

    async fn get(&self, digest: &str) -> Result<Vec<u8>, TransferError> {
        let path = self.blob_path(digest);
        let bytes = match tokio::fs::read(&path).await {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(TransferError::Missing {
                    digest: digest.to_owned(),
                });
            }
            Err(e) => return Err(TransferError::Io(format!("read `{}`: {e}", path.display()))),
        };
        verify(digest, &bytes)?;
        Ok(bytes)
    }

    async fn put_record(&self, key: &str, bytes: &[u8]) -> Result<(), TransferError> {
        write_atomic(
            &self.root.join("transfer-records").join(checked_rel(key)?),
            bytes,
            false,
        )
        .await
    }

    async fn get_record(&self, key: &str) -> Result<Option<Vec<u8>>, TransferError> {
        match tokio::fs::read(self.root.join("transfer-records").join(checked_rel(key)?)).await {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(TransferError::Io(format!(
                "read transfer record `{key}`: {e}"
            ))),
        }
    }

    async fn remove_record(&self, key: &str) -> Result<(), TransferError> {
        match tokio::fs::remove_file(self.root.join("transfer-records").join(checked_rel(key)?))
            .await
        {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(TransferError::Io(format!(
                "remove transfer record `{key}`: {e}"
            ))),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_in_every_string() {
        let mut v = serde_json::json!({"argv": ["@worker_exe@", "--out", "@job_dir@/out"], "cwd": "@job_dir@", "n": 3});
        fill_placeholders(&mut v, "/s/j", "/bin/sf");
        assert_eq!(
            v,
            serde_json::json!({"argv": ["/bin/sf", "--out", "/s/j/out"], "cwd": "/s/j", "n": 3})
        );
        assert!(names_job_dir(&serde_json::json!({"cwd": "@job_dir@"})));
        assert!(!names_job_dir(&v));
    }

    #[test]
    fn paths_that_escape_the_job_dir_are_refused() {
        for bad in ["", "/etc/passwd", "../x", "a/../../x"] {
            assert!(
                matches!(checked_rel(bad), Err(TransferError::BadPath(_))),
                "{bad}"
            );
        }
        assert_eq!(
            checked_rel("in/blobs/sha256/ab/x").unwrap(),
            PathBuf::from("in/blobs/sha256/ab/x")
        );
    }

    #[tokio::test]
    async fn local_area_round_trips_dedups_caps_and_refuses_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let limits = TransferLimits {
            max_bytes: 10,
            ..TransferLimits::default()
        };
        let area = LocalTransfer::new(dir.path().join("blobs"), limits);
        let first = area.put(b"hello").await.unwrap();
        assert!(first.uploaded);
        assert!(
            !area.put(b"hello").await.unwrap().uploaded,
            "the same content is stored once"
        );
        assert_eq!(area.get(&first.digest).await.unwrap(), b"hello");
        assert!(matches!(
            area.put(b"01234567890").await,
            Err(TransferError::TooLarge {
                size: 11,
                cap: 10,
                ..
            })
        ));
        let path = area.blob_path(&first.digest);
        std::fs::write(&path, b"HELLO").unwrap();
        assert!(matches!(
            area.get(&first.digest).await,
            Err(TransferError::Corrupt { .. })
        ));
        assert!(matches!(
            area.get(&sha256_hex(b"never")).await,
            Err(TransferError::Missing { .. })
        ));
    }

    #[tokio::test]
    async fn a_job_dir_round_trip_delivers_outputs_of_the_applied_token_only() {
        let dir = tempfile::tempdir().unwrap();
        let area = LocalTransfer::new(dir.path().join("blobs"), TransferLimits::default());
        let mut stager = Stager::new(&area);
        stager.add_bytes("in/a.txt", b"input", false).await.unwrap();
        let files = JobFiles {
            inputs: stager.finish(),
            outputs: vec![OutputDir {
                dir: "out".into(),
                deliver_to: dir.path().join("delivered"),
            }],
        };
        let job_dir = dir.path().join("scratch/job");
        prepare_job_dir(&area, &files, &job_dir).await.unwrap();
        assert_eq!(std::fs::read(job_dir.join("in/a.txt")).unwrap(), b"input");
        std::fs::create_dir_all(job_dir.join("out/sub")).unwrap();
        std::fs::write(job_dir.join("out/sub/c.json"), b"{}").unwrap();
        upload_outputs(&area, "j1", 2, &files, &job_dir)
            .await
            .unwrap();
        let mut spec = crate::job::JobSpec::new("process", serde_json::json!({}));
        spec.files = files;
        let mut job = Job {
            id: "j1".into(),
            spec,
            state: crate::job::JobState::Failed,
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
        // The control plane's record says the same as the queued job.
        let recorded = job.spec.files.outputs.clone();
        assert_eq!(
            deliver_outputs(&area, &job, &recorded).await.unwrap(),
            0,
            "token 1 uploaded nothing"
        );
        assert!(!dir.path().join("delivered").exists());
        job.fencing_token = 2;
        assert_eq!(deliver_outputs(&area, &job, &recorded).await.unwrap(), 1);
        assert_eq!(
            std::fs::read(dir.path().join("delivered/sub/c.json")).unwrap(),
            b"{}"
        );
        assert_eq!(
            deliver_outputs(&area, &job, &recorded).await.unwrap(),
            1,
            "delivering again is a no-op"
        );
        // A record that disagrees with the queued job refuses, writing nothing.
        let elsewhere = vec![OutputDir {
            dir: "out".into(),
            deliver_to: dir.path().join("elsewhere"),
        }];
        let refused = deliver_outputs(&area, &job, &elsewhere).await.unwrap_err();
        assert!(
            matches!(refused, TransferError::Refused { .. }),
            "{refused}"
        );
        assert!(
            deliver_outputs(&area, &job, &[]).await.is_err(),
            "nothing recorded: refused"
        );
        assert!(!dir.path().join("elsewhere").exists());
    }
}
