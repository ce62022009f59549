//! The tail of a workflow's running stage, shown under `train status --watch` and `eval status`:
//! the newest running job of the workflow whose idempotency key starts with the session's (or
//! forge's) prefix, and the last lines of its live output (`skillforge jobs logs`).

use skillforge_engine::output::OUTPUT_CAP_CHUNKS;
use skillforge_engine::{EngineError, JobState, QueueBackend};

/// Running jobs looked at.
const RUNNING_LIMIT: usize = 500;

/// A running stage's job and the last lines of its output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningTail {
    /// The job.
    pub job_id: String,
    /// Its stage (`JobSpec::stage`).
    pub stage: String,
    /// At most the asked number of lines, oldest first (stdout and stderr interleaved as
    /// written, lossy UTF-8).
    pub lines: Vec<String>,
}

/// The newest running job of `workflow` keyed under `key_prefix` and its last `n_lines` lines;
/// `None` when no such job runs.
///
/// # Errors
/// The queue's.
pub async fn running_tail(
    queue: &dyn QueueBackend,
    workflow: &str,
    key_prefix: &str,
    n_lines: usize,
) -> Result<Option<RunningTail>, EngineError> {
    let running = queue.list(Some(JobState::Running), RUNNING_LIMIT).await?;
    let Some(job) = running.into_iter().find(|j| {
        j.spec.workflow == workflow
            && j.spec
                .idempotency_key
                .as_deref()
                .is_some_and(|k| k.starts_with(key_prefix))
    }) else {
        return Ok(None);
    };
    let chunks = queue.read_output(&job.id, None, OUTPUT_CAP_CHUNKS).await?;
    let bytes: Vec<u8> = chunks
        .into_iter()
        .filter(|c| c.fencing_token == job.fencing_token)
        .flat_map(|c| c.data)
        .collect();
    let text = String::from_utf8_lossy(&bytes);
    let all: Vec<&str> = text.lines().collect();
    let lines = all[all.len().saturating_sub(n_lines)..]
        .iter()
        .map(|l| (*l).to_owned())
        .collect();
    Ok(Some(RunningTail {
        job_id: job.id,
        stage: job.spec.stage,
        lines,
    }))
}

/// Prints `tail` under a status: `running: <stage> job <id>` and its lines, indented.
pub fn print_tail(tail: &RunningTail) {
    println!(
        "running: {} job {} (`skillforge jobs logs --follow {}`)",
        tail.stage, tail.job_id, tail.job_id
    );
    for line in &tail.lines {
        println!("  │ {line}");
    }
}
