//! Issue 13 items 7 and 8 on the Redis backend: what a waiting CLI and `jobs logs` rely on (Redis
//! has no change signal: its `changed_since` is the trait's polling default, so that scenario is
//! SQLite's).

use std::sync::Arc;

use super::{RedisServer, backend, scenarios};

#[tokio::test]
async fn lease_or_stop_ends_an_idle_wait_when_stopped() {
    let server = RedisServer::start();
    scenarios::live::lease_or_stop_ends_an_idle_wait_when_stopped(Arc::new(backend(&server).await)).await;
}

#[tokio::test]
async fn live_output_is_fenced_ordered_capped_and_trimmed() {
    let server = RedisServer::start();
    scenarios::live::live_output_is_fenced_ordered_capped_and_trimmed(&backend(&server).await).await;
}
