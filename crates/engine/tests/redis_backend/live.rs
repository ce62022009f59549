//! Issue 13 items 7 and 8 on the Redis backend: what a waiting CLI and `jobs logs` rely on. A
//! change waiter wakes on the namespace's `changed` channel (published by the scripts that end
//! a job), also after a Redis restart cut its subscription.

use std::sync::Arc;
use std::time::{Duration, Instant};

use skillforge_engine::{JobState, QueueBackend, WorkerIdentity};

use super::{RedisServer, backend, scenarios, spec};

const LONG: Duration = Duration::from_secs(3600);
const DEADLINE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn lease_or_stop_ends_an_idle_wait_when_stopped() {
    let server = RedisServer::start();
    scenarios::live::lease_or_stop_ends_an_idle_wait_when_stopped(Arc::new(backend(&server).await)).await;
}

#[tokio::test]
async fn changed_since_wakes_on_a_finish() {
    let server = RedisServer::start();
    scenarios::live::changed_since_wakes_on_a_finish(Arc::new(backend(&server).await)).await;
}

/// Two backends on one server (two connections with their own listeners, as two processes).
#[tokio::test]
async fn a_waiter_wakes_on_another_processs_finish() {
    let server = RedisServer::start();
    scenarios::live::a_waiter_wakes_on_another_processs_finish(Arc::new(backend(&server).await), Arc::new(backend(&server).await)).await;
}

/// Subscribers of the namespace's change channel, as the server counts them.
fn subscribers(server: &RedisServer) -> u64 {
    let out = server.cli(&["pubsub", "numsub", "sftest:changed"]);
    out.lines().nth(1).and_then(|n| n.trim().parse().ok()).unwrap_or(0)
}

async fn until_subscribed(server: &RedisServer, what: &str) {
    let deadline = Instant::now() + DEADLINE;
    while subscribers(server) == 0 {
        assert!(Instant::now() < deadline, "{what}: no subscriber on `sftest:changed`");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A Redis restart (crash, AOF) cuts the waiter's subscription; its listener subscribes again,
/// and another process's finish after the restart still wakes the waiter, which waits with an
/// hour to spare.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_wakes_on_a_finish_after_a_redis_restart() {
    let server = RedisServer::start_with(true);
    let waiting = backend(&server).await;
    let other = backend(&server).await;
    let w = WorkerIdentity::new("elsewhere");
    let job = other.enqueue(&spec("cross")).await.unwrap();
    let leased = other.lease("cross", &w, 1, Duration::ZERO).await.unwrap();
    let id = job.job_id.clone();
    let waiter = tokio::spawn(async move {
        loop {
            let seen = waiting.change_seq();
            let job = waiting.get(&id).await.unwrap().unwrap();
            if job.state.is_terminal() {
                return job;
            }
            waiting.changed_since(seen, LONG).await;
        }
    });
    until_subscribed(&server, "before the restart").await;
    server.crash();
    server.launch();
    until_subscribed(&server, "after the restart").await;
    other.finish(&job.job_id, leased[0].fencing_token, &scenarios::finish(JobState::Succeeded)).await.unwrap();
    let done = tokio::time::timeout(DEADLINE, waiter)
        .await
        .expect("a finish after the restart wakes the waiter")
        .unwrap();
    assert_eq!(done.state, JobState::Succeeded);
}

#[tokio::test]
async fn live_output_is_fenced_ordered_capped_and_trimmed() {
    let server = RedisServer::start();
    scenarios::live::live_output_is_fenced_ordered_capped_and_trimmed(&backend(&server).await).await;
}
