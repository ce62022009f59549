//! Issue 13 items 7 and 8 on the SQLite backend: what a waiting CLI and `jobs logs` rely on.

use std::sync::Arc;
use std::time::Duration;

use skillforge_engine::{JobState, QueueBackend, WorkerIdentity};

use super::{open, scenarios, spec};

#[tokio::test]
async fn lease_or_stop_ends_an_idle_wait_when_stopped() {
    let dir = tempfile::tempdir().unwrap();
    scenarios::live::lease_or_stop_ends_an_idle_wait_when_stopped(Arc::new(open(&dir).await)).await;
}

#[tokio::test]
async fn changed_since_wakes_on_a_finish() {
    let dir = tempfile::tempdir().unwrap();
    scenarios::live::changed_since_wakes_on_a_finish(Arc::new(open(&dir).await)).await;
}

/// Another process's finish (here: another backend on the same file, with its own wake-ups, so
/// only `data_version` can tell this one) wakes a change waiter.
#[tokio::test]
async fn changed_since_wakes_on_another_connections_finish() {
    let dir = tempfile::tempdir().unwrap();
    let waiting = open(&dir).await;
    let other = open(&dir).await;
    let w = WorkerIdentity::new("other");
    let job = other.enqueue(&spec("x")).await.unwrap();
    let leased = other.lease("x", &w, 1, Duration::ZERO).await.unwrap();
    let seen = waiting.change_seq();
    let waiter = tokio::spawn(async move { waiting.changed_since(seen, Duration::from_secs(3600)).await });
    tokio::task::yield_now().await;
    other
        .finish(&job.job_id, leased[0].fencing_token, &scenarios::finish(JobState::Succeeded))
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(30), waiter)
        .await
        .expect("another connection's commit wakes the change waiter")
        .unwrap();
}

#[tokio::test]
async fn live_output_is_fenced_ordered_capped_and_trimmed() {
    let dir = tempfile::tempdir().unwrap();
    scenarios::live::live_output_is_fenced_ordered_capped_and_trimmed(&open(&dir).await).await;
}
