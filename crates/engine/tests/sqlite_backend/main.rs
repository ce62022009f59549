//! Behaviour of the SQLite queue backend on real temp files: transitions, fencing, reaping,
//! locks, cross-instance leasing and wake-up, and a 100 000-job drain.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use skillforge_engine::backend::prelude::*;
use skillforge_engine::sqlite::SqliteBackend;
use skillforge_engine::{
    CancelReply, EngineError, ExpiredLease, Finish, FinishReply, HeartbeatReply, JobSpec, JobState,
    LeaseKind, LockAcquire, QueueBackend, ReapAction, WorkerIdentity,
};
use skillforge_runner::{ExitClass, RunOutcome};

#[path = "../scenarios/mod.rs"]
mod scenarios;

mod concurrency;
mod live;
mod lost_reply;
mod recovery;
mod retention;
mod transitions;
mod upgrade;

async fn open(dir: &tempfile::TempDir) -> SqliteBackend {
    SqliteBackend::open(&dir.path().join("queue.db"))
        .await
        .expect("open queue")
}

fn spec(queue: &str) -> JobSpec {
    let mut s = JobSpec::new("noop", serde_json::json!({"n": 1}));
    s.queue = queue.to_owned();
    s
}

fn outcome(exit: ExitClass) -> RunOutcome {
    RunOutcome {
        exit,
        exit_code: Some(0),
        duration_ms: 3,
        stdout_tail: "ok".into(),
        stderr_tail: String::new(),
        detail: serde_json::Value::Null,
    }
}

fn finish(next: JobState, delay_ms: u64) -> Finish {
    Finish {
        next,
        retry_delay_ms: delay_ms,
        attempt_result: if next == JobState::Succeeded {
            "passed".into()
        } else {
            "failed".into()
        },
        outcome: Some(outcome(if next == JobState::Succeeded {
            ExitClass::Passed
        } else {
            ExitClass::Failed { code: 1 }
        })),
        error: None,
    }
}

/// Polls `cond` until it returns `Some`, failing the test after `within`.
async fn eventually<T, F, Fut>(within: Duration, what: &str, mut cond: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = cond().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until the job's lease shows up in `expired_leases`.
async fn wait_expired(q: &SqliteBackend, job_id: &str) -> ExpiredLease {
    eventually(Duration::from_secs(5), "lease to expire", || async {
        q.expired_leases(100)
            .await
            .unwrap()
            .into_iter()
            .find(|l| l.job_id == job_id)
    })
    .await
}
