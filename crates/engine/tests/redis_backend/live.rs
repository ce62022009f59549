//! Issue 13 items 7 and 8 on the Redis backend: what a waiting CLI and `jobs logs` rely on. A
//! change waiter wakes on the namespace's `changed` channel (published by the scripts that end
//! a job), also after a Redis restart cut its subscription. A follower of a job's live output
//! (`output_since`) wakes on another process's append, also after a Redis restart cut its
//! blocking read.

use std::sync::Arc;
use std::time::{Duration, Instant};

use skillforge_engine::backend::prelude::*;
use skillforge_engine::output::{NewOutput, OutputStream};
use skillforge_engine::{JobState, WorkerIdentity};

use super::{RedisServer, backend, scenarios, spec};

const LONG: Duration = Duration::from_secs(3600);
const DEADLINE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn lease_or_stop_ends_an_idle_wait_when_stopped() {
    let server = RedisServer::start();
    scenarios::live::lease_or_stop_ends_an_idle_wait_when_stopped(Arc::new(backend(&server).await))
        .await;
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
    scenarios::live::a_waiter_wakes_on_another_processs_finish(
        Arc::new(backend(&server).await),
        Arc::new(backend(&server).await),
    )
    .await;
}

/// Subscribers of the namespace's change channel, as the server counts them.
fn subscribers(server: &RedisServer) -> u64 {
    let out = server.cli(&["pubsub", "numsub", "sftest:changed"]);
    out.lines()
        .nth(1)
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

async fn until_subscribed(server: &RedisServer, what: &str) {
    let deadline = Instant::now() + DEADLINE;
    while subscribers(server) == 0 {
        assert!(
            Instant::now() < deadline,
            "{what}: no subscriber on `sftest:changed`"
        );
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
    other
        .finish(
            &job.job_id,
            leased[0].fencing_token,
            &scenarios::finish(JobState::Succeeded),
        )
        .await
        .unwrap();
    let done = tokio::time::timeout(DEADLINE, waiter)
        .await
        .expect("a finish after the restart wakes the waiter")
        .unwrap();
    assert_eq!(done.state, JobState::Succeeded);
}

#[tokio::test]
async fn live_output_is_fenced_ordered_capped_and_trimmed() {
    let server = RedisServer::start();
    scenarios::live::live_output_is_fenced_ordered_capped_and_trimmed(&backend(&server).await)
        .await;
}

/// Connections of the server blocked in `XREAD` (a follower waiting for output).
fn blocked_readers(server: &RedisServer) -> usize {
    server
        .cli(&["client", "list"])
        .lines()
        .filter(|l| l.contains("cmd=xread"))
        .count()
}

async fn until_reading(server: &RedisServer, what: &str) {
    let deadline = Instant::now() + DEADLINE;
    while blocked_readers(server) == 0 {
        assert!(
            Instant::now() < deadline,
            "{what}: no connection blocked in XREAD"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `jobs logs --follow`'s wait: a follower waiting with an hour to spare wakes on another
/// process's append (not a poll: the hour is the fallback), and again after a Redis restart cut
/// its blocking read (it reads again on a new connection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_wakes_on_another_processs_output_also_after_a_redis_restart() {
    let server = RedisServer::start_with(true);
    let following = backend(&server).await;
    let other = backend(&server).await;
    let w = WorkerIdentity::new("writer");
    let job = other.enqueue(&spec("logs")).await.unwrap();
    let token = other.lease("logs", &w, 1, Duration::ZERO).await.unwrap()[0].fencing_token;
    let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let id = job.job_id.clone();
    let follower = tokio::spawn(async move {
        let mut cursor: Option<String> = None;
        loop {
            let seen = following.change_seq();
            for chunk in following
                .read_output(&id, cursor.as_deref(), 100)
                .await
                .unwrap()
            {
                cursor = Some(chunk.cursor.clone());
                let text = String::from_utf8_lossy(&chunk.data).into_owned();
                let last = text == "second\n";
                seen_tx.send(text).unwrap();
                if last {
                    return;
                }
            }
            following
                .output_since(&id, cursor.as_deref(), seen, LONG)
                .await;
        }
    });
    until_reading(&server, "before the first line").await;
    let line = |text: &str| {
        vec![NewOutput {
            stream: OutputStream::Stdout,
            data: text.as_bytes().to_vec(),
        }]
    };
    assert!(
        other
            .append_output(&job.job_id, token, &line("first\n"))
            .await
            .unwrap()
    );
    let first = tokio::time::timeout(DEADLINE, seen_rx.recv())
        .await
        .expect("the append wakes the follower");
    assert_eq!(first.as_deref(), Some("first\n"));
    until_reading(&server, "after the first line").await;
    server.crash();
    server.launch();
    until_reading(&server, "after the restart").await;
    assert!(
        other
            .append_output(&job.job_id, token, &line("second\n"))
            .await
            .unwrap()
    );
    let second = tokio::time::timeout(DEADLINE, seen_rx.recv())
        .await
        .expect("an append after the restart wakes the follower");
    assert_eq!(second.as_deref(), Some("second\n"));
    tokio::time::timeout(DEADLINE, follower)
        .await
        .expect("the follower ends")
        .unwrap();
}
