//! The eval loop's shared error types: [`IoError`] (a file-system step that failed on a path) and
//! [`StepError`] (why a forge step could not prepare or apply a job's evidence). The forge maps
//! both into [`super::forge::ForgeError`]; the result handler into `ApplyError::Unusable`.
//! Messages are lowercase fragments that name the path or the job.

use std::path::PathBuf;

use skillforge_runner::PayloadError;

use super::layout::FileError;

/// A file-system step that failed on `path`: `<action> `<path>`: <io error>`.
#[derive(Debug, thiserror::Error)]
#[error("{action} `{}`: {source}", path.display())]
pub struct IoError {
    /// What was being done (`create`, `read`, `copy`, `symlink`, `unlink`).
    pub action: &'static str,
    /// The path it was done to.
    pub path: PathBuf,
    /// The I/O error.
    #[source]
    pub source: std::io::Error,
}

impl IoError {
    /// A closure for `map_err` that wraps an [`std::io::Error`] as `action` on `path`.
    pub fn on(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> IoError {
        let path = path.into();
        move |source| IoError {
            action,
            path,
            source,
        }
    }
}

/// Why a forge step (arm, verify, judge) could not prepare or apply a job's evidence files.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// The job carries no idempotency key of its stage's shape (`<prefix>:<n>:<with|without>`,
    /// `<prefix>:<n>:judge`).
    #[error("{stage} job {job_id} has no {stage} key ({key:?})")]
    NoKey {
        /// `arm` or `judge`.
        stage: &'static str,
        /// The job.
        job_id: String,
        /// The key it carries (empty when none).
        key: String,
    },
    /// The job's payload is not its runner's.
    #[error("{stage} job {job_id}: payload: {source}")]
    Payload {
        /// `arm`, `verify` or `judge`.
        stage: &'static str,
        /// The job.
        job_id: String,
        /// The decoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// The job's payload lacks the path its evidence is found by.
    #[error("{stage} job {job_id} has no {what}")]
    NoPath {
        /// `arm`, `verify` or `judge`.
        stage: &'static str,
        /// The job.
        job_id: String,
        /// What is missing (`transcript path`, the `FORGE_FINAL` variable).
        what: &'static str,
    },
    /// An evidence file the step reads is missing.
    #[error("`{}` is missing", .0.display())]
    Missing(PathBuf),
    /// A judged sample has no stored mapping.
    #[error("sample {sample}: {file} is missing")]
    NoMapping {
        /// The sample number.
        sample: u32,
        /// The mapping's file name.
        file: &'static str,
    },
    /// An evidence file could not be read or written.
    #[error(transparent)]
    File(#[from] FileError),
    /// A text file (`final.txt`, the judge's prompt) could not be written.
    #[error("write {what}: {}", .source.source)]
    Write {
        /// Which file.
        what: &'static str,
        /// The atomic write's error (its I/O error is the message).
        #[source]
        source: skillforge_stage::fs::WriteError,
    },
    /// The job could not be built.
    #[error(transparent)]
    Job(#[from] PayloadError),
}
