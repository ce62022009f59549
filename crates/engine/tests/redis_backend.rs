//! Tests of [`RedisBackend`] against a real `redis-server` that each test starts on a free
//! loopback port in a temporary directory and shuts down when it ends.

use std::collections::HashSet;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use skillforge_engine::redis::RedisBackend;
use skillforge_engine::{
    CancelReply, EngineError, ExpiredLease, Finish, FinishReply, HeartbeatReply, JobSpec, JobState,
    LeaseKind, LockAcquire, QueueBackend, ReapAction, WorkerIdentity,
};
use skillforge_runner::{ExitClass, RunOutcome};

mod scenarios;

/// A `redis-server` owned by one test; shut down (and its files removed) on drop.
struct RedisServer {
    port: u16,
    dir: tempfile::TempDir,
    durable: bool,
}

impl RedisServer {
    /// Starts a non-durable server (no RDB, no AOF).
    fn start() -> Self {
        Self::start_with(false)
    }

    /// Starts a server; `durable` turns on `--appendonly yes --appendfsync always`.
    fn start_with(durable: bool) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let server = Self {
            port,
            dir: tempfile::tempdir().expect("temp dir"),
            durable,
        };
        server.launch();
        server
    }

    fn launch(&self) {
        let dir = self.dir.path();
        let mut cmd = Command::new("redis-server");
        cmd.args([
            "--bind",
            "127.0.0.1",
            "--port",
            &self.port.to_string(),
            "--daemonize",
            "yes",
        ])
        .arg("--pidfile")
        .arg(dir.join("redis.pid"))
        .arg("--dir")
        .arg(dir)
        .arg("--logfile")
        .arg(dir.join("redis.log"))
        .args(["--save", ""]);
        if self.durable {
            cmd.args(["--appendonly", "yes", "--appendfsync", "always"]);
        } else {
            cmd.args(["--appendonly", "no"]);
        }
        let status = cmd.status().expect("run redis-server");
        assert!(status.success(), "redis-server failed to start: {status}");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let out = Command::new("redis-cli")
                .args(["-p", &self.port.to_string(), "ping"])
                .output();
            if out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "PONG") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "redis-server on port {} did not come up: {}",
                self.port,
                log(dir)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("run redis-cli");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// SIGKILLs the server (a crash: nothing flushed beyond what fsync already wrote) and waits
    /// until it is gone.
    fn crash(&self) {
        let pid = std::fs::read_to_string(self.dir.path().join("redis.pid")).expect("pid file");
        let pid = pid.trim().to_owned();
        let status = Command::new("kill")
            .args(["-9", &pid])
            .status()
            .expect("kill");
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(10);
        while alive(&pid) {
            assert!(Instant::now() < deadline, "redis-server {pid} did not die");
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = std::fs::remove_file(self.dir.path().join("redis.pid"));
    }
}

/// Whether the process runs (a zombie, already dead but not yet reaped by init, does not).
fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // `pid (comm) STATE ...`: the state follows the last `)`.
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

fn log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default()
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string(), "shutdown", "nosave"])
            .output();
        let stopped = out.is_ok_and(|o| o.status.success());
        if !stopped && let Ok(pid) = std::fs::read_to_string(self.dir.path().join("redis.pid")) {
            let _ = Command::new("kill").args(["-9", pid.trim()]).status();
        }
    }
}

async fn backend(server: &RedisServer) -> RedisBackend {
    RedisBackend::connect(&server.url(), "sftest")
        .await
        .expect("connect")
}

fn spec(queue: &str) -> JobSpec {
    let mut s = JobSpec::new("process", serde_json::json!({"cmd": ["true"]}));
    s.queue = queue.to_owned();
    s
}

fn worker(name: &str) -> WorkerIdentity {
    WorkerIdentity::new(name)
}

fn outcome(exit: ExitClass) -> RunOutcome {
    RunOutcome {
        exit,
        exit_code: Some(0),
        duration_ms: 12,
        stdout_tail: "ok\n".to_owned(),
        stderr_tail: String::new(),
        detail: serde_json::json!({"k": 1}),
    }
}

fn finish(next: JobState, delay_ms: u64, label: &str) -> Finish {
    Finish {
        next,
        retry_delay_ms: delay_ms,
        attempt_result: label.to_owned(),
        outcome: Some(outcome(if next == JobState::Succeeded {
            ExitClass::Passed
        } else {
            ExitClass::Failed { code: 1 }
        })),
        error: None,
    }
}

/// Polls `f` until it returns `Some`, failing the test after `within`.
async fn poll<T, F, Fut>(what: &str, within: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the job with this id shows up in `expired_leases`.
async fn expired(b: &RedisBackend, job_id: &str) -> ExpiredLease {
    poll("an expired lease", Duration::from_secs(10), || async {
        b.expired_leases(100)
            .await
            .unwrap()
            .into_iter()
            .find(|l| l.job_id == job_id)
    })
    .await
}

#[tokio::test]
async fn enqueue_lease_finish_round_trip() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    assert_eq!(b.name(), "redis");
    let w = worker("w");

    let e = b.enqueue(&spec("default")).await.unwrap();
    assert!(e.created);
    let job = b.get(&e.job_id).await.unwrap().expect("stored");
    assert_eq!(job.state, JobState::Queued);
    assert_eq!((job.attempts, job.fencing_token), (0, 0));
    assert!(job.lease.is_none() && job.history.is_empty());
    assert_eq!(job.spec, spec("default"));
    assert!(b.get("no-such-job").await.unwrap().is_none());

    // Another queue does not see it.
    assert!(
        b.lease("other", &w, 10, Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );

    let leased = b.lease("default", &w, 10, Duration::ZERO).await.unwrap();
    assert_eq!(leased.len(), 1);
    let l = &leased[0];
    assert_eq!(l.job.id, e.job_id);
    assert_eq!(l.job.state, JobState::Running);
    assert_eq!(
        (l.job.attempts, l.fencing_token, l.job.fencing_token),
        (1, 1, 1)
    );
    let lease = l.job.lease.as_ref().expect("lease set");
    assert_eq!(lease.owner_worker, w.worker_id);
    assert_eq!(lease.owner_pid, w.pid);
    let now = b.now_ms().await.unwrap();
    assert!(
        (now - lease.acquired_at_ms).abs() < 5_000,
        "server clock stamps the lease"
    );
    assert_eq!(l.job.history.len(), 1);
    assert_eq!(l.job.history[0].attempt, 1);
    assert_eq!(l.job.history[0].fencing_token, 1);
    assert_eq!(l.job.history[0].worker, w.worker_id);
    assert!(l.job.history[0].ended_at_ms.is_none());

    let views = b.leases().await.unwrap();
    assert_eq!(views.len(), 1);
    assert_eq!(
        (views[0].kind, views[0].name.as_str()),
        (LeaseKind::Job, e.job_id.as_str())
    );
    assert_eq!(views[0].stale_after_ms, 15_000);

    assert_eq!(
        b.heartbeat(&e.job_id, 1).await.unwrap(),
        HeartbeatReply::Renewed
    );
    assert!(b.pending_results(10).await.unwrap().is_empty());

    let f = finish(JobState::Succeeded, 0, "passed");
    assert_eq!(
        b.finish(&e.job_id, 1, &f).await.unwrap(),
        FinishReply::Applied(JobState::Succeeded)
    );
    let done = b.get(&e.job_id).await.unwrap().unwrap();
    assert_eq!(done.state, JobState::Succeeded);
    assert!(done.lease.is_none());
    assert_eq!(done.outcome, f.outcome);
    assert_eq!(done.history[0].result.as_deref(), Some("passed"));
    assert!(done.history[0].ended_at_ms.is_some());
    assert!(b.leases().await.unwrap().is_empty());
    // Heartbeat after the end: the lease is gone.
    assert_eq!(
        b.heartbeat(&e.job_id, 1).await.unwrap(),
        HeartbeatReply::LeaseLost
    );

    let pending = b.pending_results(10).await.unwrap();
    assert_eq!(
        pending.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        [e.job_id.as_str()]
    );
    assert!(!b.ack_result(&e.job_id, pending[0].fencing_token + 1).await.unwrap(), "fenced on the token");
    assert_eq!(b.pending_results(10).await.unwrap().len(), 1);
    assert!(b.ack_result(&e.job_id, pending[0].fencing_token).await.unwrap());
    assert!(b.pending_results(10).await.unwrap().is_empty());
    assert!(matches!(b.ack_result("nope", 1).await, Err(EngineError::NotFound(_))));

    let second = b.enqueue(&spec("default")).await.unwrap();
    let all = b.list(None, 10).await.unwrap();
    assert_eq!(all.len(), 2);
    let succeeded = b.list(Some(JobState::Succeeded), 10).await.unwrap();
    assert_eq!(
        succeeded.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        [e.job_id.as_str()]
    );
    let queued = b.list(Some(JobState::Queued), 10).await.unwrap();
    assert_eq!(
        queued.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        [second.job_id.as_str()]
    );
    assert_eq!(b.list(None, 1).await.unwrap().len(), 1);
}

/// `queued` and `succeeded` have no index set (the hot path writes none): listing them walks the
/// job index newest first, across several script calls when the matches lie deeper than one
/// call reads (5 000 entries); the rare states keep theirs. Only those index sets exist.
#[tokio::test]
async fn listing_by_state_walks_the_job_index_for_unindexed_states() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let w = worker("lister");
    let oldest = b.enqueue(&spec("q")).await.unwrap();
    let doomed = b.enqueue(&spec("q")).await.unwrap();
    for (id, next) in [(&oldest.job_id, JobState::Succeeded), (&doomed.job_id, JobState::Dead)] {
        let leased = b.lease("q", &w, 1, Duration::ZERO).await.unwrap();
        assert_eq!(&leased[0].job.id, id);
        assert_eq!(b.finish(id, 1, &finish(next, 0, "passed")).await.unwrap(), FinishReply::Applied(next));
    }
    // 5 100 newer queued jobs: the succeeded one is deeper than one walk call reads.
    let mut queued = Vec::new();
    for _ in 0..5_100 {
        queued.push(b.enqueue(&spec("q")).await.unwrap().job_id);
    }
    let succeeded = b.list(Some(JobState::Succeeded), 10).await.unwrap();
    assert_eq!(succeeded.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(), [oldest.job_id.as_str()]);
    let dead = b.list(Some(JobState::Dead), 10).await.unwrap();
    assert_eq!(dead.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(), [doomed.job_id.as_str()]);
    let newest: Vec<String> = b.list(Some(JobState::Queued), 3).await.unwrap().into_iter().map(|j| j.id).collect();
    assert_eq!(newest, queued.iter().rev().take(3).cloned().collect::<Vec<_>>(), "newest first, up to the limit");
    assert_eq!(b.list(Some(JobState::Queued), 10_000).await.unwrap().len(), 5_100);
    assert!(b.list(Some(JobState::Failed), 10).await.unwrap().is_empty());
    let mut sets: Vec<String> = server.cli(&["--scan", "--pattern", "sftest:state:*"]).lines().map(str::to_owned).collect();
    sets.sort();
    assert_eq!(sets, ["sftest:state:dead"], "no index set for queued or succeeded jobs");
}

#[tokio::test]
async fn leases_are_fifo_and_batched() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(b.enqueue(&spec("q")).await.unwrap().job_id);
    }
    let first = b.lease("q", &worker("w"), 3, Duration::ZERO).await.unwrap();
    let rest = b.lease("q", &worker("w"), 3, Duration::ZERO).await.unwrap();
    let got: Vec<String> = first
        .iter()
        .chain(&rest)
        .map(|l| l.job.id.clone())
        .collect();
    assert_eq!(first.len(), 3);
    assert_eq!(got, ids);
}

#[tokio::test]
async fn idempotency_key_returns_the_same_job() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let mut s = spec("default");
    s.idempotency_key = Some("verify:pr-7:abc".to_owned());
    let a = b.enqueue(&s).await.unwrap();
    let again = b.enqueue(&s).await.unwrap();
    assert!(a.created);
    assert!(!again.created);
    assert_eq!(a.job_id, again.job_id);
    assert_eq!(b.list(None, 10).await.unwrap().len(), 1);
    s.idempotency_key = Some("other".to_owned());
    assert_ne!(b.enqueue(&s).await.unwrap().job_id, a.job_id);
}

#[tokio::test]
async fn fencing_rejects_the_superseded_lease() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let mut s = spec("default");
    s.stale_after_ms = 150;
    let id = b.enqueue(&s).await.unwrap().job_id;
    let old = b
        .lease("default", &worker("old"), 1, Duration::ZERO)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(old.fencing_token, 1);

    let exp = expired(&b, &id).await;
    assert_eq!(
        (exp.fencing_token, exp.attempts, exp.max_attempts),
        (1, 1, 3)
    );
    assert!(exp.idempotent && !exp.cancel_requested);
    assert!(
        b.reap(
            &exp,
            &ReapAction::Requeue {
                delay: Duration::ZERO
            }
        )
        .await
        .unwrap()
    );

    let new = b
        .lease("default", &worker("new"), 1, Duration::ZERO)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(new.job.id, id);
    assert_eq!((new.fencing_token, new.job.attempts), (2, 2));

    let f = finish(JobState::Succeeded, 0, "passed");
    assert_eq!(
        b.finish(&id, 1, &f).await.unwrap(),
        FinishReply::Fenced { current_token: 2 }
    );
    assert_eq!(
        b.heartbeat(&id, 1).await.unwrap(),
        HeartbeatReply::LeaseLost
    );
    assert!(!b.release(&id, 1).await.unwrap());
    assert!(
        !b.reap(&exp, &ReapAction::Dead).await.unwrap(),
        "reap of the old token is fenced"
    );
    let job = b.get(&id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Running);
    assert_eq!(
        job.lease.unwrap().owner_worker,
        new.job.lease.unwrap().owner_worker
    );
    assert_eq!(job.history[0].result.as_deref(), Some("stale"));

    assert_eq!(b.heartbeat(&id, 2).await.unwrap(), HeartbeatReply::Renewed);
    assert_eq!(
        b.finish(&id, 2, &f).await.unwrap(),
        FinishReply::Applied(JobState::Succeeded)
    );
    assert_eq!(
        b.finish(&id, 1, &f).await.unwrap(),
        FinishReply::Fenced { current_token: 2 }
    );
}

#[tokio::test]
async fn delayed_retry_is_not_leased_before_due() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let w = worker("w");
    let id = b.enqueue(&spec("default")).await.unwrap().job_id;
    let l = b
        .lease("default", &w, 1, Duration::ZERO)
        .await
        .unwrap()
        .remove(0);
    let delay_ms = 1_500;
    let reply = b
        .finish(
            &id,
            l.fencing_token,
            &finish(JobState::Queued, delay_ms, "failed"),
        )
        .await;
    assert_eq!(reply.unwrap(), FinishReply::Applied(JobState::Queued));
    let job = b.get(&id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Queued);
    assert_eq!(job.history[0].retry_delay_ms, Some(delay_ms));
    assert_eq!(job.history[0].result.as_deref(), Some("failed"));
    let due_at = job.not_before_ms;
    assert!(due_at >= job.history[0].ended_at_ms.unwrap() + delay_ms as i64);

    assert!(
        b.lease("default", &w, 1, Duration::ZERO)
            .await
            .unwrap()
            .is_empty(),
        "not due yet"
    );
    let again = poll(
        "the retry to become due",
        Duration::from_secs(10),
        || async {
            b.lease("default", &w, 1, Duration::from_millis(200))
                .await
                .unwrap()
                .pop()
        },
    )
    .await;
    let leased_at = again.job.lease.as_ref().unwrap().acquired_at_ms;
    assert!(
        leased_at >= due_at,
        "leased at {leased_at}, due at {due_at}"
    );
    assert_eq!((again.job.attempts, again.fencing_token), (2, 2));
    assert_eq!(again.job.history.len(), 2);
}

#[tokio::test]
async fn delayed_enqueue_wakes_a_waiter_when_due() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let mut s = spec("default");
    let now = b.now_ms().await.unwrap();
    s.not_before_ms = Some(now + 700);
    let id = b.enqueue(&s).await.unwrap().job_id;
    assert!(
        b.lease("default", &worker("w"), 1, Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );
    // One wait, long enough: the waiter must wake for the delayed job once it is due.
    let got = b
        .lease("default", &worker("w"), 1, Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].job.id, id);
    assert!(got[0].job.lease.as_ref().unwrap().acquired_at_ms >= now + 700);
}

#[tokio::test]
async fn reap_applies_each_action() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let mut s = spec("reap");
    s.stale_after_ms = 100;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(b.enqueue(&s).await.unwrap().job_id);
    }
    let leased = b
        .lease("reap", &worker("w"), 5, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(leased.len(), 5);
    b.cancel(&ids[3]).await.unwrap();

    let mut exp = Vec::new();
    for id in &ids {
        exp.push(expired(&b, id).await);
    }
    assert!(exp[3].cancel_requested);

    // A heartbeat that arrives before the reap wins.
    assert_eq!(
        b.heartbeat(&ids[4], 1).await.unwrap(),
        HeartbeatReply::Renewed
    );
    assert!(!b.reap(&exp[4], &ReapAction::Dead).await.unwrap());
    assert_eq!(
        b.get(&ids[4]).await.unwrap().unwrap().state,
        JobState::Running
    );

    assert!(
        b.reap(
            &exp[0],
            &ReapAction::Requeue {
                delay: Duration::ZERO
            }
        )
        .await
        .unwrap()
    );
    assert!(
        b.reap(&exp[1], &ReapAction::RecoveryAvailable)
            .await
            .unwrap()
    );
    assert!(b.reap(&exp[2], &ReapAction::Dead).await.unwrap());
    assert!(b.reap(&exp[3], &ReapAction::Cancelled).await.unwrap());

    let j0 = b.get(&ids[0]).await.unwrap().unwrap();
    assert_eq!(
        (j0.state, j0.attempts),
        (JobState::Queued, 1),
        "the stale attempt stays counted"
    );
    assert!(j0.lease.is_none());
    assert_eq!(j0.history[0].result.as_deref(), Some("stale"));
    let j1 = b.get(&ids[1]).await.unwrap().unwrap();
    assert_eq!(j1.state, JobState::Stale);
    assert!(j1.recovery_available);
    assert_eq!(b.get(&ids[2]).await.unwrap().unwrap().state, JobState::Dead);
    assert_eq!(
        b.get(&ids[3]).await.unwrap().unwrap().state,
        JobState::Cancelled
    );

    let pending: HashSet<String> = b
        .pending_results(10)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(
        pending,
        HashSet::from([ids[1].clone(), ids[2].clone(), ids[3].clone()])
    );
    let views = b.leases().await.unwrap();
    assert_eq!(
        views.iter().map(|v| v.name.clone()).collect::<Vec<_>>(),
        [ids[4].clone()]
    );

    let again = b
        .lease("reap", &worker("w2"), 5, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].job.id, ids[0]);
    assert_eq!((again[0].job.attempts, again[0].fencing_token), (2, 2));

    // Requeue with a delay: not leasable before it is due.
    let exp0 = expired(&b, &ids[0]).await;
    assert!(
        b.reap(
            &exp0,
            &ReapAction::Requeue {
                delay: Duration::from_secs(60)
            }
        )
        .await
        .unwrap()
    );
    let j0 = b.get(&ids[0]).await.unwrap().unwrap();
    assert_eq!(j0.history[1].retry_delay_ms, Some(60_000));
    assert!(
        b.lease("reap", &worker("w2"), 5, Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn cancel_queued_and_running() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let w = worker("w");
    let queued = b.enqueue(&spec("c")).await.unwrap().job_id;
    assert_eq!(b.cancel(&queued).await.unwrap(), CancelReply::Cancelled);
    assert_eq!(
        b.get(&queued).await.unwrap().unwrap().state,
        JobState::Cancelled
    );
    assert!(
        b.lease("c", &w, 10, Duration::ZERO)
            .await
            .unwrap()
            .is_empty(),
        "cancelled job leased"
    );
    assert_eq!(
        b.cancel(&queued).await.unwrap(),
        CancelReply::AlreadyTerminal(JobState::Cancelled)
    );

    let mut delayed = spec("c");
    let delayed_due_ms = b.now_ms().await.unwrap() + 300;
    delayed.not_before_ms = Some(delayed_due_ms);
    let delayed = b.enqueue(&delayed).await.unwrap().job_id;
    assert_eq!(b.cancel(&delayed).await.unwrap(), CancelReply::Cancelled);

    let running = b.enqueue(&spec("c")).await.unwrap().job_id;
    let l = b.lease("c", &w, 10, Duration::ZERO).await.unwrap();
    assert_eq!(
        l.iter().map(|l| l.job.id.as_str()).collect::<Vec<_>>(),
        [running.as_str()]
    );
    assert_eq!(
        b.heartbeat(&running, 1).await.unwrap(),
        HeartbeatReply::Renewed
    );
    assert_eq!(b.cancel(&running).await.unwrap(), CancelReply::Requested);
    assert!(b.get(&running).await.unwrap().unwrap().cancel_requested);
    assert_eq!(
        b.heartbeat(&running, 1).await.unwrap(),
        HeartbeatReply::CancelRequested
    );
    let f = finish(JobState::Cancelled, 0, "cancelled");
    assert_eq!(
        b.finish(&running, 1, &f).await.unwrap(),
        FinishReply::Applied(JobState::Cancelled)
    );
    assert_eq!(
        b.cancel(&running).await.unwrap(),
        CancelReply::AlreadyTerminal(JobState::Cancelled)
    );

    // A cancel request wins over a retry or a hand-back (same rule as the SQLite backend).
    let raced = b.enqueue(&spec("c")).await.unwrap().job_id;
    b.lease("c", &w, 10, Duration::ZERO).await.unwrap();
    assert_eq!(b.cancel(&raced).await.unwrap(), CancelReply::Requested);
    assert_eq!(
        b.finish(&raced, 1, &finish(JobState::Queued, 10, "failed")).await.unwrap(),
        FinishReply::Applied(JobState::Cancelled)
    );
    let handed = b.enqueue(&spec("c")).await.unwrap().job_id;
    b.lease("c", &w, 10, Duration::ZERO).await.unwrap();
    assert_eq!(b.cancel(&handed).await.unwrap(), CancelReply::Requested);
    assert!(b.release(&handed, 1).await.unwrap());
    assert_eq!(b.get(&handed).await.unwrap().unwrap().state, JobState::Cancelled);

    // The delayed one stays cancelled once its time has come (by the server's clock).
    poll("the delayed job's not_before to pass", Duration::from_secs(10), || async {
        (b.now_ms().await.unwrap() > delayed_due_ms).then_some(())
    })
    .await;
    assert_eq!(b.get(&delayed).await.unwrap().unwrap().state, JobState::Cancelled);
    assert!(
        b.lease("c", &w, 10, Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        b.cancel("nope").await,
        Err(EngineError::NotFound(_))
    ));
}

#[tokio::test]
async fn retry_of_a_dead_job_resets_attempts_and_keeps_history() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let w = worker("w");
    let mut s = spec("r");
    s.max_attempts = 1;
    let id = b.enqueue(&s).await.unwrap().job_id;
    let l = b.lease("r", &w, 1, Duration::ZERO).await.unwrap().remove(0);
    b.finish(&id, l.fencing_token, &finish(JobState::Dead, 0, "failed"))
        .await
        .unwrap();
    assert_eq!(b.pending_results(10).await.unwrap().len(), 1);

    b.retry(&id).await.unwrap();
    let job = b.get(&id).await.unwrap().unwrap();
    assert_eq!(
        (job.state, job.attempts, job.history.len()),
        (JobState::Queued, 0, 1)
    );
    assert!(b.pending_results(10).await.unwrap().is_empty());
    match b.retry(&id).await {
        Err(EngineError::InvalidState {
            state: JobState::Queued,
            ..
        }) => {}
        other => panic!("retry of a queued job: {other:?}"),
    }
    assert!(matches!(
        b.retry("nope").await,
        Err(EngineError::NotFound(_))
    ));

    let l = b.lease("r", &w, 1, Duration::ZERO).await.unwrap().remove(0);
    assert_eq!(
        (l.job.attempts, l.fencing_token, l.job.history.len()),
        (1, 2, 2)
    );
    match b.retry(&id).await {
        Err(EngineError::InvalidState {
            state: JobState::Running,
            ..
        }) => {}
        other => panic!("retry of a running job: {other:?}"),
    }
}

#[tokio::test]
async fn release_refunds_the_attempt_and_is_due_now() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let w = worker("w");
    let first = b.enqueue(&spec("rel")).await.unwrap().job_id;
    let second = b.enqueue(&spec("rel")).await.unwrap().job_id;
    let l = b
        .lease("rel", &w, 1, Duration::ZERO)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(l.job.id, first);
    assert!(b.release(&first, 1).await.unwrap());
    let job = b.get(&first).await.unwrap().unwrap();
    assert_eq!((job.state, job.attempts), (JobState::Queued, 0));
    assert_eq!(job.history[0].result.as_deref(), Some("released"));
    assert!(b.leases().await.unwrap().is_empty());
    let again = b
        .lease("rel", &w, 1, Duration::ZERO)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(again.job.id, first, "a released job keeps its place");
    assert_eq!((again.job.attempts, again.fencing_token), (1, 2));
    assert!(!b.release(&first, 1).await.unwrap());
    let _ = second;
}

#[tokio::test]
async fn named_locks() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let (a, other) = (worker("a"), worker("b"));
    let name = "skillopt-train:s1:optimizer";
    let hb = Duration::from_millis(50);
    let stale = Duration::from_millis(200);

    let t1 = match b.acquire_lock(name, &a, hb, stale).await.unwrap() {
        LockAcquire::Acquired { fencing_token } => fencing_token,
        held => panic!("free lock not acquired: {held:?}"),
    };
    match b.acquire_lock(name, &other, hb, stale).await.unwrap() {
        LockAcquire::Held(lease) => {
            assert_eq!(lease.owner_worker, a.worker_id);
            assert_eq!(lease.fencing_token, t1);
        }
        got => panic!("held lock taken: {got:?}"),
    }
    assert!(b.renew_lock(name, t1).await.unwrap());
    let views = b.leases().await.unwrap();
    assert_eq!(views.len(), 1);
    assert_eq!(
        (views[0].kind, views[0].name.as_str()),
        (LeaseKind::Lock, name)
    );
    assert_eq!((views[0].heartbeat_ms, views[0].stale_after_ms), (50, 200));

    // Stale holder: replaced with a higher token.
    let t2 = poll("the lock to go stale", Duration::from_secs(10), || async {
        match b.acquire_lock(name, &other, hb, stale).await.unwrap() {
            LockAcquire::Acquired { fencing_token } => Some(fencing_token),
            LockAcquire::Held(_) => None,
        }
    })
    .await;
    assert!(t2 > t1);
    assert!(!b.renew_lock(name, t1).await.unwrap());
    assert!(!b.release_lock(name, t1).await.unwrap());
    assert!(b.release_lock(name, t2).await.unwrap());
    assert!(!b.release_lock(name, t2).await.unwrap());
    assert!(b.leases().await.unwrap().is_empty());

    // Tokens keep increasing after a release.
    let t3 = match b.acquire_lock(name, &a, hb, stale).await.unwrap() {
        LockAcquire::Acquired { fencing_token } => fencing_token,
        held => panic!("released lock not acquired: {held:?}"),
    };
    assert!(t3 > t2);
    let held_other = b
        .acquire_lock("another", &a, hb, Duration::from_secs(60))
        .await
        .unwrap();
    assert!(matches!(
        held_other,
        LockAcquire::Acquired { fencing_token: 1 }
    ));

    let freed = poll(
        "reap_locks to free the stale lock",
        Duration::from_secs(10),
        || async {
            let freed = b.reap_locks().await.unwrap();
            (!freed.is_empty()).then_some(freed)
        },
    )
    .await;
    assert_eq!(freed, [name.to_owned()]);
    assert!(!b.renew_lock(name, t3).await.unwrap());
    let names: Vec<String> = b
        .leases()
        .await
        .unwrap()
        .into_iter()
        .map(|v| v.name)
        .collect();
    assert_eq!(names, ["another".to_owned()]);
}

#[tokio::test]
async fn idle_lease_wakes_on_enqueue_from_another_connection() {
    let server = RedisServer::start();
    let b = Arc::new(backend(&server).await);
    let producer = backend(&server).await;
    let wait = Duration::from_secs(5);

    let waiter = {
        let b = Arc::clone(&b);
        tokio::spawn(async move {
            let r = b.lease("wake", &worker("idle"), 1, wait).await;
            (r, Instant::now())
        })
    };
    // Enqueue only once the waiter is really blocked on Redis.
    poll("the waiter to block", Duration::from_secs(10), || async {
        let info = server.cli(&["info", "clients"]);
        info.lines()
            .any(|l| l.starts_with("blocked_clients:") && l.trim_end() != "blocked_clients:0")
            .then_some(())
    })
    .await;
    // The blocked waiter does not stall other calls on the same backend.
    let now = tokio::time::timeout(Duration::from_secs(3), b.now_ms()).await;
    assert!(
        now.expect("a call on the same backend stalled behind BLPOP")
            .is_ok()
    );

    let enqueued_at = Instant::now();
    let id = producer.enqueue(&spec("wake")).await.unwrap().job_id;
    let (leased, returned_at) = waiter.await.unwrap();
    let leased = leased.unwrap();
    assert_eq!(leased.len(), 1, "the waiter came back without the job");
    assert_eq!(leased[0].job.id, id);
    // Returned before its wait ran out (without a wake-up it would only retry at the end).
    assert!(
        returned_at.duration_since(enqueued_at) < wait - Duration::from_secs(1),
        "woke only after {:?}",
        returned_at.duration_since(enqueued_at)
    );
}

#[tokio::test]
async fn backlog_of_20000_drains() {
    let server = RedisServer::start();
    let b = Arc::new(backend(&server).await);
    const N: usize = 20_000;
    // Half due now (ready set), half scheduled (delayed set, the path that broke apalis-redis).
    let due_at = b.now_ms().await.unwrap() + 500;
    let mut tasks = Vec::new();
    for chunk in 0..20 {
        let b = Arc::clone(&b);
        tasks.push(tokio::spawn(async move {
            for i in 0..N / 20 {
                let mut s = spec("bulk");
                if (chunk * (N / 20) + i) % 2 == 1 {
                    s.not_before_ms = Some(due_at);
                }
                b.enqueue(&s).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    // Wait until the scheduled half is due, so one lease sees all 10 000 of them due at once.
    poll(
        "the scheduled jobs to be due",
        Duration::from_secs(10),
        || async { (b.now_ms().await.unwrap() > due_at).then_some(()) },
    )
    .await;

    let w = worker("bulk");
    let mut seen = HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let batch = b.lease("bulk", &w, 500, Duration::ZERO).await.unwrap();
        if batch.is_empty() {
            break;
        }
        for l in batch {
            assert!(seen.insert(l.job.id), "job leased twice");
        }
        assert!(
            Instant::now() < deadline,
            "draining took too long: {} leased",
            seen.len()
        );
    }
    assert_eq!(seen.len(), N);
    assert_eq!(
        b.list(Some(JobState::Running), N + 1).await.unwrap().len(),
        N
    );
}

#[tokio::test]
async fn redis_restart_loses_nothing() {
    let server = RedisServer::start_with(true);
    let b = backend(&server).await;
    let mut ids = HashSet::new();
    for _ in 0..50 {
        ids.insert(b.enqueue(&spec("durable")).await.unwrap().job_id);
    }
    let mut s = spec("durable");
    s.idempotency_key = Some("once".to_owned());
    let keyed = b.enqueue(&s).await.unwrap().job_id;
    ids.insert(keyed.clone());

    server.crash();
    server.launch();

    // The same backend object reconnects by itself.
    let mut leased = HashSet::new();
    for _ in 0..100 {
        let batch = b
            .lease("durable", &worker("w"), 10, Duration::ZERO)
            .await
            .unwrap();
        if batch.is_empty() {
            break;
        }
        for l in batch {
            assert_eq!(l.job.attempts, 1);
            leased.insert(l.job.id);
        }
    }
    assert_eq!(leased, ids);
    let again = b.enqueue(&s).await.unwrap();
    assert_eq!(
        (again.job_id.as_str(), again.created),
        (keyed.as_str(), false)
    );
    let fresh = b.enqueue(&spec("durable")).await.unwrap().job_id;
    let l = b
        .lease("durable", &worker("w"), 10, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(
        l.iter().map(|l| l.job.id.clone()).collect::<Vec<_>>(),
        [fresh]
    );

    // A crash while a waiter blocks: it survives and still gets the next job.
    let b = Arc::new(b);
    let waiter = {
        let b = Arc::clone(&b);
        tokio::spawn(async move {
            b.lease("durable", &worker("w"), 1, Duration::from_secs(20))
                .await
        })
    };
    // Crash only once the waiter is blocked on the server (a client in BLPOP).
    poll("the waiter to block in BLPOP", Duration::from_secs(10), || async {
        server.cli(&["client", "list"]).contains("cmd=blpop").then_some(())
    })
    .await;
    server.crash();
    server.launch();
    let late = b.enqueue(&spec("durable")).await.unwrap().job_id;
    let got = waiter.await.unwrap().unwrap();
    assert_eq!(
        got.iter().map(|l| l.job.id.clone()).collect::<Vec<_>>(),
        [late]
    );
}

#[tokio::test]
async fn connect_errors_name_the_problem() {
    let err = RedisBackend::connect("not a url", "ns").await.unwrap_err();
    assert!(matches!(err, EngineError::Config(_)), "{err}");
    let server = RedisServer::start();
    let err = RedisBackend::connect(&server.url(), "").await.unwrap_err();
    assert!(err.to_string().contains("namespace"), "{err}");
    // Two namespaces on one server do not see each other's jobs.
    let a = RedisBackend::connect(&server.url(), "a").await.unwrap();
    let other = RedisBackend::connect(&server.url(), "b").await.unwrap();
    a.enqueue(&spec("default")).await.unwrap();
    assert!(
        other
            .lease("default", &worker("w"), 1, Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        a.lease("default", &worker("w"), 1, Duration::ZERO)
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn finish_and_lease_refills_the_slot_in_one_call() {
    let server = RedisServer::start();
    scenarios::finish_and_lease_refills_the_slot_in_one_call(&backend(&server).await).await;
}

#[tokio::test]
async fn batched_finishes_refill_each_slot_from_its_queue_for_its_worker() {
    let server = RedisServer::start();
    scenarios::batched_finishes_refill_each_slot_from_its_queue_for_its_worker(&backend(&server).await).await;
}

/// Layout 2 (every job this build enqueues): a terminal attempt's record stays in the job hash
/// and only superseded attempts are pushed to the history list; the decoded history is the same.
#[tokio::test]
async fn terminal_attempt_stays_in_the_hash_and_is_listed_once_superseded() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let w = worker("w");
    let id = b.enqueue(&spec("h")).await.unwrap().job_id;
    let hkey = format!("sftest:job:{id}");
    let list = format!("sftest:job:{id}:history");
    assert_eq!(server.cli(&["HGET", &hkey, "layout"]), "2");

    // Attempt 1 fails with an error and is retried: its record goes to the list at once.
    let l = b.lease("h", &w, 1, Duration::ZERO).await.unwrap().remove(0);
    let mut retry = finish(JobState::Queued, 0, "failed");
    retry.error = Some("boom".to_owned());
    assert_eq!(
        b.finish(&id, l.fencing_token, &retry).await.unwrap(),
        FinishReply::Applied(JobState::Queued)
    );
    assert_eq!(server.cli(&["LLEN", &list]), "1");
    let queued = b.get(&id).await.unwrap().unwrap();
    assert!(queued.lease.is_none(), "not running: no lease, whatever fields the hash keeps");
    assert_eq!(queued.error.as_deref(), Some("boom"));
    assert_eq!(queued.history.len(), 1);
    assert_eq!(queued.history[0].retry_delay_ms, Some(0));

    // Attempt 2 fails terminally without outcome or error: no list write, its closed record is
    // the hash.
    let l = b.lease("h", &w, 1, Duration::ZERO).await.unwrap().remove(0);
    assert_eq!((l.job.attempts, l.fencing_token, l.job.history.len()), (2, 2, 2));
    assert_eq!(l.job.error.as_deref(), Some("boom"), "the last attempt's error, as stored");
    let done_finish = Finish {
        next: JobState::Failed,
        retry_delay_ms: 0,
        attempt_result: "not_runnable".to_owned(),
        outcome: None,
        error: None,
    };
    b.finish(&id, 2, &done_finish).await.unwrap();
    assert_eq!(server.cli(&["LLEN", &list]), "1");
    let done = b.get(&id).await.unwrap().unwrap();
    assert_eq!(done.state, JobState::Failed);
    assert!(done.lease.is_none());
    assert_eq!((done.outcome, done.error), (None, None));
    assert_eq!(done.history.len(), 2);
    let last = &done.history[1];
    assert_eq!((last.attempt, last.fencing_token, last.worker.as_str()), (2, 2, w.worker_id.as_str()));
    assert_eq!(last.result.as_deref(), Some("not_runnable"));
    assert_eq!(last.ended_at_ms, Some(done.updated_at_ms));
    assert_eq!(last.started_at_ms, l.job.lease.as_ref().unwrap().acquired_at_ms);
    assert_eq!(last.retry_delay_ms, None);
    // A retried finish of the applied attempt reports the same success; an old token is fenced.
    assert_eq!(
        b.finish(&id, 2, &done_finish).await.unwrap(),
        FinishReply::Applied(JobState::Failed)
    );
    assert_eq!(
        b.finish(&id, 1, &done_finish).await.unwrap(),
        FinishReply::Fenced { current_token: 2 }
    );
    assert_eq!(b.get(&id).await.unwrap().unwrap().history, done.history);

    // Layout 2 marks no finish in the hash: a lease closed by a release under the current
    // token must still fence a late finish of it (not report it applied).
    let other = b.enqueue(&spec("h2")).await.unwrap().job_id;
    let lo = b.lease("h2", &w, 1, Duration::ZERO).await.unwrap().remove(0);
    assert!(b.release(&other, lo.fencing_token).await.unwrap());
    assert_eq!(
        b.finish(&other, lo.fencing_token, &done_finish).await.unwrap(),
        FinishReply::Fenced { current_token: 1 }
    );

    // `jobs retry` supersedes it: the record moves to the list, and the next lease shows all.
    b.retry(&id).await.unwrap();
    assert_eq!(server.cli(&["LLEN", &list]), "2");
    let again = b.get(&id).await.unwrap().unwrap();
    assert_eq!(again.history, done.history);
    let l = b.lease("h", &w, 1, Duration::ZERO).await.unwrap().remove(0);
    assert_eq!((l.job.attempts, l.fencing_token, l.job.history.len()), (1, 3, 3));
    assert_eq!(&l.job.history[..2], &done.history[..]);
}

/// Jobs written by the previous build (layout 1: no `layout` field, every closed attempt in the
/// history list, lease fields deleted at the end) — e.g. in flight in an existing Redis during
/// an upgrade — are leased, finished and shown as before.
#[tokio::test]
async fn layout_1_jobs_from_an_older_build_still_work() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let w = worker("new");
    let now = b.now_ms().await.unwrap();
    let t = now.to_string();
    let spec_json = serde_json::to_string(&spec("old")).unwrap();
    // The old enqueue.lua's hash, as a queued, a running (second attempt) and a succeeded job.
    let old_hash = |id: &str, state: &str, attempts: &str, token: &str| {
        let key = format!("sftest:job:{id}");
        let out = server.cli(&[
            "HSET", &key, "id", id, "queue", "old", "spec", &spec_json, "state", state,
            "attempts", attempts, "max_attempts", "3", "token", token, "seq", "1",
            "heartbeat_ms", "2000", "stale_after", "15000", "idempotent", "1", "created_at", &t,
            "updated_at", &t, "cancel_requested", "0", "recovery_available", "0", "not_before", &t,
        ]);
        assert_ne!(out, "0", "HSET {key}: {out}");
        server.cli(&["ZADD", "sftest:jobs", &t, id]);
    };
    let record = |attempt: u32, result: &str, delay: Option<u64>| {
        let mut r = serde_json::json!({"attempt": attempt, "fencing_token": attempt, "worker": "old-w",
            "host": "old-h", "pid": 42, "started_at_ms": now - 10, "ended_at_ms": now - 5,
            "result": result});
        if let Some(d) = delay {
            r["retry_delay_ms"] = d.into();
        }
        r.to_string()
    };
    old_hash("job-a", "queued", "0", "0");
    server.cli(&["ZADD", "sftest:state:queued", &t, "job-a"]);
    server.cli(&["ZADD", "sftest:ready:old", "1", "job-a"]);
    old_hash("job-b", "running", "2", "2");
    server.cli(&[
        "HSET", "sftest:job:job-b", "owner_worker", "old-w", "owner_host", "old-h", "owner_pid",
        "42", "acquired_at", &t, "heartbeat_at", &t,
    ]);
    server.cli(&["RPUSH", "sftest:job:job-b:history", &record(1, "failed", Some(0))]);
    server.cli(&["ZADD", "sftest:leases", &(now + 15_000).to_string(), "job-b"]);
    old_hash("job-c", "dead", "1", "1");
    let out_json = serde_json::to_string(&outcome(ExitClass::Failed { code: 1 })).unwrap();
    server.cli(&["HSET", "sftest:job:job-c", "outcome", &out_json, "closed_token", "1", "closed_by", "finish"]);
    server.cli(&["RPUSH", "sftest:job:job-c:history", &record(1, "failed", None)]);
    server.cli(&["ZADD", "sftest:state:dead", &t, "job-c"]);
    server.cli(&["SET", "sftest:seq", "10"]);

    // The running job: shown with its lease and open attempt, finished by the new scripts.
    let running = b.get("job-b").await.unwrap().unwrap();
    assert_eq!(running.state, JobState::Running);
    assert_eq!(running.lease.as_ref().unwrap().owner_worker, "old-w");
    assert_eq!(running.history.len(), 2);
    assert!(running.history[1].ended_at_ms.is_none());
    assert_eq!(
        b.finish("job-b", 1, &finish(JobState::Succeeded, 0, "passed")).await.unwrap(),
        FinishReply::Fenced { current_token: 2 }
    );
    assert_eq!(
        b.finish("job-b", 2, &finish(JobState::Succeeded, 0, "passed")).await.unwrap(),
        FinishReply::Applied(JobState::Succeeded)
    );
    let b_done = b.get("job-b").await.unwrap().unwrap();
    assert!(b_done.lease.is_none());
    assert_eq!(b_done.history.len(), 2);
    assert_eq!(b_done.history[0].result.as_deref(), Some("failed"));
    assert_eq!(
        (b_done.history[1].attempt, b_done.history[1].worker.as_str(), b_done.history[1].result.as_deref()),
        (2, "old-w", Some("passed"))
    );
    // Layout 1 stays layout 1: the record went to the list, the lease fields were deleted.
    assert_eq!(server.cli(&["LLEN", "sftest:job:job-b:history"]), "2");
    assert_eq!(server.cli(&["HEXISTS", "sftest:job:job-b", "owner_worker"]), "0");
    assert_eq!(server.cli(&["HEXISTS", "sftest:job:job-b", "layout"]), "0");

    // The queued job: leased (with finish_and_lease's path too), retried, finished.
    let l = b.lease("old", &w, 10, Duration::ZERO).await.unwrap();
    assert_eq!(l.len(), 1);
    assert_eq!((l[0].job.id.as_str(), l[0].fencing_token, l[0].job.history.len()), ("job-a", 1, 1));
    let (reply, next) = b
        .finish_and_lease("job-a", 1, &finish(JobState::Queued, 0, "failed"), "old", &w)
        .await
        .unwrap();
    assert_eq!(reply, FinishReply::Applied(JobState::Queued));
    let next = next.expect("the retried job is due at once");
    assert_eq!((next.job.id.as_str(), next.fencing_token, next.job.history.len()), ("job-a", 2, 2));
    assert_eq!(next.job.history[0].result.as_deref(), Some("failed"));
    b.finish("job-a", 2, &finish(JobState::Succeeded, 0, "passed")).await.unwrap();
    let a_done = b.get("job-a").await.unwrap().unwrap();
    assert_eq!(a_done.state, JobState::Succeeded);
    assert!(a_done.lease.is_none());
    assert_eq!(
        a_done.history.iter().map(|r| (r.attempt, r.result.as_deref())).collect::<Vec<_>>(),
        [(1, Some("failed")), (2, Some("passed"))]
    );
    assert_eq!(server.cli(&["LLEN", "sftest:job:job-a:history"]), "2");

    // The terminal job: shown as stored, retried and leased again with its full history.
    let c = b.get("job-c").await.unwrap().unwrap();
    assert_eq!((c.state, c.history.len()), (JobState::Dead, 1));
    assert!(c.lease.is_none());
    assert_eq!(c.outcome, Some(outcome(ExitClass::Failed { code: 1 })));
    b.retry("job-c").await.unwrap();
    let l = b.lease("old", &w, 1, Duration::ZERO).await.unwrap().remove(0);
    assert_eq!((l.job.id.as_str(), l.fencing_token, l.job.history.len()), ("job-c", 2, 2));
    assert_eq!(l.job.history[0].result.as_deref(), Some("failed"));
    assert_eq!(server.cli(&["LLEN", "sftest:job:job-c:history"]), "1");
    let listed = b.list(Some(JobState::Succeeded), 10).await.unwrap();
    assert_eq!(listed.iter().map(|j| j.id.as_str()).collect::<HashSet<_>>(), HashSet::from(["job-a", "job-b"]));
}

#[tokio::test]
async fn retry_finishing_between_ingestion_read_and_ack_is_not_lost() {
    let server = RedisServer::start();
    scenarios::retry_finishing_between_ingestion_read_and_ack_is_not_lost(&backend(&server).await).await;
}

#[tokio::test]
async fn a_retried_then_cancelled_job_gets_a_new_token_and_its_cancel_is_applied() {
    let server = RedisServer::start();
    scenarios::a_retried_then_cancelled_job_gets_a_new_token_and_its_cancel_is_applied(&backend(&server).await).await;
}

/// Issue 12 item 6: Redis losing its data (here `FLUSHALL`; a restart without persistence is the
/// same) is reported once by the namespace check, and a re-run of the lost job under the same
/// idempotency key is not applied a second time: the store shows the key applied.
#[tokio::test]
async fn a_namespace_that_lost_its_data_is_reported_once_and_applied_work_is_not_applied_again() {
    use skillforge_engine::ingest::{RecordOnly, ingest_once};
    let server = RedisServer::start();
    let b = backend(&server).await;
    let home = tempfile::tempdir().unwrap();
    let store = skillforge_store::Store::open(home.path()).await.unwrap();
    let w = worker("epoch");
    let mut keyed = spec("default");
    keyed.idempotency_key = Some("once".into());
    let run = |id: String| {
        let (b, w) = (&b, &w);
        async move {
            let leased = b.lease("default", w, 1, Duration::ZERO).await.unwrap();
            assert_eq!(leased[0].job.id, id);
            b.finish(&id, leased[0].fencing_token, &finish(JobState::Succeeded, 0, "passed")).await.unwrap();
        }
    };
    let first = b.enqueue(&keyed).await.unwrap().job_id;
    run(first.clone()).await;
    assert_eq!(ingest_once(&b, &store, &RecordOnly).await.unwrap().applied, 1);
    assert_eq!(b.check_namespace().await.unwrap(), None, "nothing lost yet");

    server.cli(&["flushall"]);
    let loss = b.check_namespace().await.unwrap().expect("the loss is reported");
    assert_eq!((loss.namespace.as_str(), loss.jobs_now), ("sftest", 0));
    assert_ne!(loss.previous_epoch, loss.current_epoch);
    assert!(loss.to_string().contains("lost its data"), "{loss}");
    assert_eq!(b.check_namespace().await.unwrap(), None, "reported once");
    // Another process connecting now sees the new epoch, not a loss.
    assert_eq!(backend(&server).await.check_namespace().await.unwrap(), None);

    // The producer submits the key again: the emptied queue makes a new job, which runs...
    let again = b.enqueue(&keyed).await.unwrap();
    assert!(again.created && again.job_id != first);
    run(again.job_id.clone()).await;
    // ...but its result is not applied: the store shows the key applied by the first job.
    let report = ingest_once(&b, &store, &RecordOnly).await.unwrap();
    assert_eq!((report.applied, report.duplicates), (0, 1));
    assert!(b.pending_results(10).await.unwrap().is_empty(), "acknowledged");
    let applied = skillforge_store::applied::applied_for_job(store.pool(), &again.job_id).await.unwrap();
    assert!(applied.is_empty(), "{applied:?}");
}
