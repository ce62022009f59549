//! GitHub writes as durable jobs (issue 16 item 1: "every call that writes is a durable,
//! retryable job with an idempotency key"): opening a review issue, commenting on an issue or PR.
//!
//! * **The job** — a `process` job running `skillforge feedback github write` with the
//!   [`WriteRequest`] on stdin; it looks for an earlier post carrying the request's marker
//!   (`<!-- skillforge:publish-key=KEY -->`) and posts only when there is none, then prints the
//!   [`WriteResult`] as one JSON line. The engine retries a failed attempt (an unreachable server,
//!   a rate limit past patience) with backoff, and the marker makes a retried attempt that had
//!   already posted return that post instead of posting twice. The job's idempotency key is
//!   `github:<KEY>`, so submitting the same write again returns the same job.
//! * **The token** — never in the payload or on argv: the child inherits
//!   `SKILLFORGE_GITHUB_TOKEN` / `GITHUB_TOKEN` / `GH_TOKEN` from the worker's environment, else
//!   reads `[github] token` of the `--home` it is given. The API base URL travels on argv.
//! * **Applied once** — [`GithubWriteHandler`] (registry line `github` in
//!   `skillforge_stage::Families`) records the result in `github_writes` under the key with `INSERT OR
//!   IGNORE`, so a re-delivered result changes nothing; callers read what was posted from there
//!   ([`write_durably`]).

use std::path::Path;

use serde::{Deserialize, Serialize};
use skillforge_engine::ingest::{ApplyError, ResultHandler};
use skillforge_engine::{Job, JobSpec, JobState};
use skillforge_forge::{Forge, ForgeError, RepoRef};
use skillforge_runner::RunnerPayload;
use skillforge_runner::{ExitClass, PayloadError};
use skillforge_runner_process::{DEFAULT_ENV_ALLOWLIST, ProcessPayload};
use skillforge_store::Store;
use skillforge_store::github::{AppliedWrite, get_write, record_write};
use sqlx::SqliteConnection;

use skillforge_stage::{Ran, StageJobs, Wait, wait_for};

/// Workflow of GitHub write jobs.
pub const GITHUB_WORKFLOW: &str = "github";
/// Stage of GitHub write jobs.
pub const WRITE_STAGE: &str = "write";

/// What to write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum WriteOp {
    /// Open an issue with this title.
    CreateIssue {
        /// Title.
        title: String,
    },
    /// Comment on issue or PR `number`.
    Comment {
        /// Issue or PR number.
        number: u64,
    },
}

/// One write: where, what, and the key its marker carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteRequest {
    /// The operation.
    #[serde(flatten)]
    pub op: WriteOp,
    /// `owner/repo`.
    pub repo: String,
    /// Idempotency key (also the body's marker).
    pub key: String,
    /// Body (Markdown), without the marker.
    pub body: String,
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteResult {
    /// `owner/repo`.
    pub repo: String,
    /// Issue or PR number.
    pub number: u64,
    /// Web URL of the issue or comment.
    pub url: String,
    /// False when an earlier post with the marker was found and returned.
    pub created: bool,
}

/// The marker a write's body carries.
pub fn key_marker(key: &str) -> String {
    format!("<!-- skillforge:publish-key={key} -->")
}

/// Performs `req` on `forge` (what the job's child runs): finds an earlier post with the marker
/// (the repository's issues for an issue, the thread's comments for a comment), else posts.
///
/// # Errors
/// [`ForgeError`]; [`ForgeError::Config`] for a repository that is not `owner/repo`.
pub async fn execute(forge: &dyn Forge, req: &WriteRequest) -> Result<WriteResult, ForgeError> {
    let repo = RepoRef::parse(&req.repo).map_err(ForgeError::Config)?;
    let marker = key_marker(&req.key);
    let body = format!("{marker}\n{}", req.body);
    match &req.op {
        WriteOp::CreateIssue { title } => {
            if let Some(existing) = forge.find_issues(&repo, &marker).await?.into_iter().next() {
                return Ok(WriteResult {
                    repo: req.repo.clone(),
                    number: existing.number,
                    url: existing.html_url,
                    created: false,
                });
            }
            let issue = forge.create_issue(&repo, title, &body).await?;
            Ok(WriteResult {
                repo: req.repo.clone(),
                number: issue.number,
                url: issue.html_url,
                created: true,
            })
        }
        WriteOp::Comment { number } => {
            if let Some(existing) = forge
                .list_comments(&repo, *number)
                .await?
                .into_iter()
                .find(|c| c.body.contains(&marker))
            {
                return Ok(WriteResult {
                    repo: req.repo.clone(),
                    number: *number,
                    url: existing.html_url,
                    created: false,
                });
            }
            let comment = forge.create_comment(&repo, *number, &body).await?;
            Ok(WriteResult {
                repo: req.repo.clone(),
                number: *number,
                url: comment.html_url,
                created: true,
            })
        }
    }
}

/// Where write jobs run: the skillforge binary, the control plane's home (for `[github] token`
/// when the worker's environment has none) and the API base URL.
#[derive(Debug, Clone)]
pub struct WriteJobs<'a> {
    /// The skillforge binary.
    pub skillforge_bin: &'a Path,
    /// The home passed to the child.
    pub home: &'a Path,
    /// REST base URL.
    pub api_url: &'a str,
}

/// Where GitHub writes' stage comes from: `workflows/github.toml`, `<home>/github.toml` overrides.
pub const SOURCE: skillforge_stage::StageSource = skillforge_stage::StageSource {
    family: "github",
    workflow: GITHUB_WORKFLOW,
    shipped: include_str!("../../../workflows/github.toml"),
    stage_names: &[WRITE_STAGE],
};

/// The durable job of `req`, built from the `write` stage of [`SOURCE`] for `at.home`.
///
/// # Errors
/// [`WriteError::Stages`] for an invalid `<home>/github.toml`; [`WriteError::Payload`] when the
/// payload does not serialize.
pub fn write_job(at: &WriteJobs<'_>, req: &WriteRequest) -> Result<JobSpec, WriteError> {
    let mut payload = ProcessPayload::argv(vec![
        at.skillforge_bin.display().to_string(),
        "--home".into(),
        at.home.display().to_string(),
        "feedback".into(),
        "github".into(),
        "write".into(),
        "--api-url".into(),
        at.api_url.to_owned(),
    ]);
    payload.stdin = Some(serde_json::to_string(req).map_err(|source| PayloadError {
        kind: ProcessPayload::KIND,
        source,
    })?);
    let mut allow: Vec<String> = DEFAULT_ENV_ALLOWLIST
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    allow.extend(
        skillforge_forge::github::TOKEN_ENV
            .iter()
            .map(|s| (*s).to_owned()),
    );
    payload.env_allowlist = Some(allow);
    let stages: skillforge_stage::WorkflowDef = SOURCE.for_home(at.home)?;
    Ok(stages
        .stage(WRITE_STAGE)
        .job(&payload, Some(format!("github:{}", req.key)))?)
}

/// Why a durable write did not complete.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The job could not be built.
    #[error(transparent)]
    Payload(#[from] PayloadError),
    /// `<home>/github.toml` is invalid.
    #[error(transparent)]
    Stages(#[from] skillforge_stage::StagesError),
    /// The queue failed.
    #[error(transparent)]
    Engine(#[from] skillforge_engine::EngineError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] skillforge_store::StoreError),
    /// The job ended without a result (every attempt failed, cancelled).
    #[error("GitHub write `{key}` (job {job_id}) ended {state}: {why}")]
    Failed {
        /// The write's key.
        key: String,
        /// The job.
        job_id: String,
        /// Its state.
        state: String,
        /// The last attempt's error (stderr tail).
        why: String,
    },
}

/// Submits `req` as a durable job, waits for it through the stage port (whose ingestion applies
/// the result through [`GithubWriteHandler`]) and returns what was posted, read back from the store.
///
/// # Errors
/// [`WriteError`].
pub async fn write_durably(
    jobs: &dyn StageJobs,
    store: &Store,
    at: &WriteJobs<'_>,
    req: &WriteRequest,
) -> Result<WriteResult, WriteError> {
    if let Some(done) = get_write(store.pool(), &req.key).await? {
        // Written by an earlier call: nothing is submitted, and nothing was created now.
        return Ok(WriteResult {
            created: false,
            ..applied(done)
        });
    }
    let spec = write_job(at, req)?;
    // A write whose job ended without effect (an unreachable API, a missing or wrong token) runs
    // again under the same key with this call's settings and environment: it looks for its own
    // marker before posting, so it cannot post twice; returning the dead job would leave no way
    // on but a new key (issue 35 item 4).
    let enqueued = jobs.submit(&spec).await?;
    if !enqueued.created
        && let Some(job) = jobs.get(&enqueued.job_id).await?
        && matches!(job.state, JobState::Failed | JobState::Dead)
    {
        let why = failure_text(&job);
        jobs.restart(&job.id, &spec, &why).await?;
    }
    let Ran::Done(done) = wait_for(
        jobs,
        vec![enqueued.job_id],
        Wait::Block,
        "writing to GitHub",
    )
    .await?
    else {
        unreachable!("Wait::Block returns finished jobs")
    };
    if let Some(row) = get_write(store.pool(), &req.key).await? {
        return Ok(applied(row));
    }
    let job = done.into_iter().next();
    Err(WriteError::Failed {
        key: req.key.clone(),
        job_id: job.as_ref().map(|j| j.id.clone()).unwrap_or_default(),
        state: job
            .as_ref()
            .map(|j| format!("{:?}", j.state).to_lowercase())
            .unwrap_or_default(),
        why: job.as_ref().map(failure_text).unwrap_or_default(),
    })
}

/// Submits `req` as a durable job without waiting (serve's reminders: its ingestion loop applies
/// the result). Returns the job id.
///
/// # Errors
/// [`WriteError`].
pub async fn submit_write(
    queue: &dyn skillforge_engine::QueueBackend,
    store: &Store,
    at: &WriteJobs<'_>,
    req: &WriteRequest,
) -> Result<String, WriteError> {
    let spec = write_job(at, req)?;
    Ok(skillforge_stage::submit_recorded(queue, store, &spec)
        .await?
        .job_id)
}

fn applied(row: AppliedWrite) -> WriteResult {
    WriteResult {
        repo: row.repo,
        number: u64::try_from(row.number).unwrap_or(0),
        url: row.url,
        created: row.created != 0,
    }
}

fn failure_text(job: &Job) -> String {
    let tail = job
        .outcome
        .as_ref()
        .map(|o| o.stderr_tail.trim().to_owned())
        .unwrap_or_default();
    let text = if tail.is_empty() {
        job.error.clone().unwrap_or_default()
    } else {
        tail
    };
    text.lines().last().unwrap_or("").to_owned()
}

/// The result line of a finished write job: the last stdout line that parses as a [`WriteResult`].
pub fn result_of(job: &Job) -> Option<WriteResult> {
    let outcome = job.outcome.as_ref()?;
    if !matches!(outcome.exit, ExitClass::Passed) {
        return None;
    }
    outcome
        .stdout_tail
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l.trim()).ok())
}

/// Result handler of workflow [`GITHUB_WORKFLOW`]: a succeeded write's result is recorded in
/// `github_writes` under its key (once); a failed or cancelled write has no effect (the caller
/// reports it). A succeeded job whose output carries no result is not acknowledged.
#[derive(Debug, Default, Clone, Copy)]
pub struct GithubWriteHandler;

#[async_trait::async_trait]
impl ResultHandler for GithubWriteHandler {
    async fn apply(&self, conn: &mut SqliteConnection, job: &Job) -> Result<(), ApplyError> {
        if job.state != JobState::Succeeded {
            return Ok(());
        }
        let unusable = |reason: String| ApplyError::Unusable {
            job_id: job.id.clone(),
            reason,
        };
        let key = job
            .spec
            .idempotency_key
            .as_deref()
            .and_then(|k| k.strip_prefix("github:"))
            .ok_or_else(|| {
                unusable("GitHub write job without a `github:` idempotency key".into())
            })?;
        let result = result_of(job)
            .ok_or_else(|| unusable("GitHub write job printed no result line".into()))?;
        let row = AppliedWrite {
            write_key: key.to_owned(),
            repo: result.repo,
            number: i64::try_from(result.number).unwrap_or(i64::MAX),
            url: result.url,
            created: i64::from(result.created),
            job_id: job.id.clone(),
            applied_at: String::new(),
        };
        record_write(conn, &row)
            .await
            .map_err(|e| unusable(format!("record the write: {e}")))?;
        Ok(())
    }
}

#[cfg(test)]
mod stage_tests {
    use super::*;

    #[test]
    fn the_write_job_is_built_from_the_shipped_stage() {
        let home = std::path::Path::new("/nonexistent-home");
        let at = WriteJobs {
            skillforge_bin: std::path::Path::new("/bin/skillforge"),
            home,
            api_url: "http://127.0.0.1:1",
        };
        let stage: skillforge_stage::WorkflowDef = SOURCE.shipped().unwrap();
        let req = WriteRequest {
            op: WriteOp::Comment { number: 1 },
            repo: "a/b".into(),
            key: "k1".into(),
            body: "x".into(),
        };
        let spec = write_job(&at, &req).unwrap();
        let write = stage.stage(WRITE_STAGE);
        assert_eq!(
            (
                spec.workflow.as_str(),
                spec.stage.as_str(),
                spec.kind.as_str()
            ),
            (GITHUB_WORKFLOW, WRITE_STAGE, "process")
        );
        assert_eq!(
            (spec.max_attempts, spec.timeout_ms),
            (write.attempts, write.timeout_secs * 1000)
        );
        assert_eq!(
            (spec.max_attempts, spec.timeout_ms),
            (5, 20 * 60 * 1000),
            "the attempts and budget GitHub writes have always had"
        );
        assert_eq!(spec.idempotency_key.as_deref(), Some("github:k1"));
    }
}
