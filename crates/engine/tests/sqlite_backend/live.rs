//! Issue 13 items 7 and 8 on the SQLite backend: what a waiting CLI and `jobs logs` rely on.

use std::sync::Arc;

use super::{open, scenarios};

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
async fn a_waiter_wakes_on_another_processs_finish() {
    let dir = tempfile::tempdir().unwrap();
    scenarios::live::a_waiter_wakes_on_another_processs_finish(
        Arc::new(open(&dir).await),
        Arc::new(open(&dir).await),
    )
    .await;
}

#[tokio::test]
async fn live_output_is_fenced_ordered_capped_and_trimmed() {
    let dir = tempfile::tempdir().unwrap();
    scenarios::live::live_output_is_fenced_ordered_capped_and_trimmed(&open(&dir).await).await;
}
