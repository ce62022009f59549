//! Tests of [`RedisBackend`] against a real `redis-server` that each test starts on a free
//! loopback port in a temporary directory and shuts down when it ends.

use std::collections::HashSet;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use skillforge_engine::backend::prelude::*;
use skillforge_engine::redis::RedisBackend;
use skillforge_engine::{
    CancelReply, EngineError, ExpiredLease, Finish, FinishReply, HeartbeatReply, JobSpec, JobState,
    LeaseKind, LockAcquire, QueueBackend, ReapAction, WorkerIdentity,
};
use skillforge_runner::{ExitClass, RunOutcome};

#[path = "../scenarios/mod.rs"]
mod scenarios;

mod layouts;
mod lifecycle;
mod live;
mod resilience;
mod retention;
mod transitions;

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
        // The leader is a zombie while its other threads still exit holding the shared file
        // table: the port is free only once the last one has gone (a launch before that fails
        // to bind).
        while std::net::TcpListener::bind(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "port {} still bound after redis-server {pid} died",
                self.port
            );
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
