//! The transfer area on a real `redis-server` (issue 20): dedup by hash, the size cap, TTL
//! expiry before a worker starts, a corrupted chunk refused by hash, and a job's files through a
//! real worker and ingestion (inputs materialized in its job dir, outputs delivered at ingestion).

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use skillforge_engine::backend::prelude::*;
use skillforge_engine::ingest::{RecordOnly, ingest_once};
use skillforge_engine::redis::RedisBackend;
use skillforge_engine::transfer::{
    self, JobFiles, OutputDir, Stager, TransferError, TransferLimits,
};
use skillforge_engine::worker::{Worker, WorkerConfig};
use skillforge_engine::{Job, JobSpec, JobState, QueueBackend, RunnerRegistry};
use skillforge_runner::{ExitClass, RunContext, RunOutcome, RunSpec, Runner, RunnerError};
use tokio_util::sync::CancellationToken;

/// A `redis-server` on a free loopback port, shut down on drop.
struct RedisServer {
    port: u16,
    _dir: tempfile::TempDir,
}

impl RedisServer {
    fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let dir = tempfile::tempdir().expect("temp dir");
        let status = Command::new("redis-server")
            .args([
                "--bind",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--daemonize",
                "yes",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(dir.path())
            .status()
            .expect("run redis-server");
        assert!(status.success());
        let server = Self { port, _dir: dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while server.cli(&["ping"]) != "PONG" {
            assert!(
                Instant::now() < deadline,
                "redis-server on port {port} did not come up"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Keys of the transfer area's blobs (chunks and metas).
    fn blob_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self
            .cli(&["--scan", "--pattern", "sftest:xfer:*"])
            .lines()
            .filter(|k| !k.contains(":rec:"))
            .map(str::to_owned)
            .collect();
        keys.sort();
        keys
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = Command::new("redis-cli")
            .args(["-p", &self.port.to_string(), "shutdown", "nosave"])
            .output();
    }
}

async fn backend(server: &RedisServer, limits: TransferLimits) -> Arc<RedisBackend> {
    Arc::new(
        RedisBackend::connect(&server.url(), "sftest")
            .await
            .expect("connect")
            .with_transfer_limits(limits),
    )
}

fn limits(chunk_bytes: usize, ttl_secs: u64, max_bytes: u64) -> TransferLimits {
    TransferLimits {
        chunk_bytes,
        ttl: Duration::from_secs(ttl_secs),
        max_bytes,
    }
}

#[tokio::test]
async fn the_same_content_is_stored_once_in_chunks_with_a_ttl() {
    let server = RedisServer::start();
    let queue = backend(&server, limits(1000, 3600, 1 << 20)).await;
    let area = queue.transfer_area().unwrap();
    let bytes: Vec<u8> = (0..2500u32).map(|i| (i % 251) as u8).collect();
    let first = area.put(&bytes).await.unwrap();
    assert!(first.uploaded);
    let keys = server.blob_keys();
    assert_eq!(
        keys.len(),
        4,
        "one meta key and three 1000-byte chunks: {keys:?}"
    );
    let second = area.put(&bytes).await.unwrap();
    assert_eq!(
        (second.digest.as_str(), second.uploaded),
        (first.digest.as_str(), false),
        "deduplicated by sha256"
    );
    assert_eq!(server.blob_keys(), keys, "nothing new written");
    for key in &keys {
        let ttl: i64 = server.cli(&["ttl", key]).parse().unwrap();
        assert!(ttl > 0 && ttl <= 3600, "{key} has the area's TTL: {ttl}");
    }
    assert_eq!(area.get(&first.digest).await.unwrap(), bytes);
    // Three files of which two are the same content: two blobs.
    let mut stager = Stager::new(area.as_ref());
    stager.add_bytes("a", b"x", false).await.unwrap();
    stager.add_bytes("b", b"x", false).await.unwrap();
    stager.add_bytes("c", b"y", false).await.unwrap();
    assert_eq!(stager.uploaded, 2);
    let entries = stager.finish();
    assert_eq!(entries[0].sha256, entries[1].sha256);
}

#[tokio::test]
async fn content_over_the_cap_is_refused_naming_the_file_and_the_config_key() {
    let server = RedisServer::start();
    let queue = backend(&server, limits(1000, 3600, 3000)).await;
    let area = queue.transfer_area().unwrap();
    let err = area.put(&[0u8; 3001]).await.unwrap_err();
    assert!(
        matches!(
            err,
            TransferError::TooLarge {
                size: 3001,
                cap: 3000,
                ..
            }
        ),
        "{err}"
    );
    let mut stager = Stager::new(area.as_ref());
    let err = stager
        .add_bytes("in/big.bin", &[1u8; 3001], false)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("in/big.bin") && err.contains("transfer_max_mb") && err.contains("3000"),
        "{err}"
    );
    // The set's total is capped too: two files that fit alone do not fit together.
    stager
        .add_bytes("in/a.bin", &[2u8; 2000], false)
        .await
        .unwrap();
    let err = stager
        .add_bytes("in/b.bin", &[3u8; 2000], false)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("input files") && err.contains("4000"), "{err}");
    assert!(
        server.blob_keys().iter().all(|k| !k.is_empty()),
        "only what fit was stored"
    );
    assert_eq!(server.blob_keys().len(), 3, "{:?}", server.blob_keys());
}

/// Reads `payload.input` (a path under the job dir) and writes its text reversed, plus a
/// marker, into `payload.out_dir`.
struct CopyRunner;

#[async_trait::async_trait]
impl Runner for CopyRunner {
    fn kind(&self) -> &'static str {
        "copy"
    }

    async fn run(&self, spec: &RunSpec, _ctx: &RunContext) -> Result<RunOutcome, RunnerError> {
        let input = spec.payload["input"].as_str().unwrap_or_default();
        let out_dir = spec.payload["out_dir"].as_str().unwrap_or_default();
        let text = std::fs::read_to_string(input).map_err(|e| RunnerError::Io {
            context: format!("read `{input}`"),
            source: e,
        })?;
        std::fs::create_dir_all(format!("{out_dir}/nested")).map_err(|e| RunnerError::Io {
            context: "mkdir".into(),
            source: e,
        })?;
        std::fs::write(
            format!("{out_dir}/nested/result.txt"),
            text.chars().rev().collect::<String>(),
        )
        .map_err(|e| RunnerError::Io {
            context: "write".into(),
            source: e,
        })?;
        let exit = if spec.payload["fail"].as_bool() == Some(true) {
            ExitClass::Failed { code: 1 }
        } else {
            ExitClass::Passed
        };
        Ok(RunOutcome {
            exit_code: Some(0),
            exit,
            duration_ms: 0,
            stdout_tail: input.to_owned(),
            stderr_tail: String::new(),
            detail: serde_json::Value::Null,
        })
    }
}

async fn copy_job(
    queue: &dyn QueueBackend,
    input: &[u8],
    deliver_to: &std::path::Path,
    fail: bool,
) -> String {
    copy_job_with(queue, input, deliver_to, fail, |_| {}).await
}

/// [`copy_job`] with `tweak` applied to the spec before the enqueue.
async fn copy_job_with(
    queue: &dyn QueueBackend,
    input: &[u8],
    deliver_to: &std::path::Path,
    fail: bool,
    tweak: impl Fn(&mut JobSpec),
) -> String {
    let area = queue.transfer_area().unwrap();
    let mut stager = Stager::new(area.as_ref());
    stager
        .add_bytes("in/input.txt", input, false)
        .await
        .unwrap();
    let mut spec = JobSpec::new(
        "copy",
        serde_json::json!({"input": format!("{}/in/input.txt", transfer::JOB_DIR), "out_dir": format!("{}/out", transfer::JOB_DIR), "fail": fail}),
    );
    spec.max_attempts = 1;
    spec.retry_failed_runs = false;
    spec.files = JobFiles {
        inputs: stager.finish(),
        outputs: vec![OutputDir {
            dir: "out".into(),
            deliver_to: deliver_to.to_path_buf(),
        }],
    };
    tweak(&mut spec);
    queue.enqueue(&spec).await.unwrap().job_id
}

/// Records, as the control plane does when it enqueues, that `job_id`'s `out` dir goes to `to`.
async fn record(store: &skillforge_store::Store, job_id: &str, to: &std::path::Path) {
    let delivery = skillforge_store::deliveries::Delivery {
        dir: "out".into(),
        deliver_to: to.to_path_buf(),
    };
    skillforge_store::deliveries::record_deliveries(store.pool(), job_id, &[delivery])
        .await
        .unwrap();
}

/// Runs one worker until every job in `ids` is finished.
async fn run_worker(
    queue: Arc<dyn QueueBackend>,
    scratch: std::path::PathBuf,
    ids: &[String],
) -> Vec<Job> {
    let mut config = WorkerConfig::new("vm", scratch);
    config.reap_every = None;
    let worker = Worker::new(
        config,
        queue.clone(),
        RunnerRegistry::new().with(Arc::new(CopyRunner)),
    );
    let stop = CancellationToken::new();
    let running = tokio::spawn(worker.run(stop.clone()));
    let deadline = Instant::now() + Duration::from_secs(30);
    let jobs = loop {
        let mut jobs = Vec::new();
        for id in ids {
            jobs.push(queue.get(id).await.unwrap().unwrap());
        }
        if jobs.iter().all(|j| j.state.is_terminal()) {
            break jobs;
        }
        assert!(Instant::now() < deadline, "jobs never finished: {jobs:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    stop.cancel();
    running.await.unwrap();
    jobs
}

#[tokio::test]
async fn a_jobs_inputs_reach_its_job_dir_and_its_outputs_are_delivered_at_ingestion_even_when_it_failed()
 {
    let server = RedisServer::start();
    let queue: Arc<dyn QueueBackend> = backend(&server, TransferLimits::default()).await;
    let home = tempfile::tempdir().unwrap();
    let store = skillforge_store::Store::open(home.path()).await.unwrap();
    let (passed_to, failed_to) = (
        home.path().join("train/delivered-ok"),
        home.path().join("train/delivered-failed"),
    );
    let ok = copy_job(queue.as_ref(), b"abc", &passed_to, false).await;
    let failed = copy_job(queue.as_ref(), b"xyz", &failed_to, true).await;
    record(&store, &ok, &passed_to).await;
    record(&store, &failed, &failed_to).await;
    let jobs = run_worker(
        queue.clone(),
        home.path().join("scratch"),
        &[ok.clone(), failed.clone()],
    )
    .await;
    assert_eq!(jobs[0].state, JobState::Succeeded, "{:?}", jobs[0]);
    assert_eq!(jobs[1].state, JobState::Failed, "{:?}", jobs[1]);
    let seen = &jobs[0].outcome.as_ref().unwrap().stdout_tail;
    assert!(
        seen.ends_with("/job/in/input.txt") && !seen.contains(transfer::JOB_DIR),
        "the runner got a worker-local path: {seen}"
    );
    assert!(!passed_to.exists(), "nothing is delivered before ingestion");
    let report = ingest_once(queue.as_ref(), &store, &RecordOnly)
        .await
        .unwrap();
    assert_eq!(report.applied, 2);
    assert_eq!(
        std::fs::read_to_string(passed_to.join("nested/result.txt")).unwrap(),
        "cba"
    );
    assert_eq!(
        std::fs::read_to_string(failed_to.join("nested/result.txt")).unwrap(),
        "zyx",
        "a failed run's files come back too"
    );
    assert!(
        !home.path().join("scratch").join(format!("{ok}-1")).exists(),
        "the worker's job dir is removed"
    );
}

/// Issue 32 item 7: where outputs land is the control plane's record, never the queue's. A
/// queued job whose `deliver_to` was rewritten (here: pointing at `~/.ssh` of the control plane),
/// or one the control plane recorded nothing for, is refused at ingestion: nothing is written
/// anywhere, the result stays pending, and the other jobs' outputs are delivered.
#[tokio::test]
async fn outputs_go_where_the_store_recorded_and_a_rewritten_deliver_to_is_refused() {
    let server = RedisServer::start();
    let queue: Arc<dyn QueueBackend> = backend(&server, TransferLimits::default()).await;
    let home = tempfile::tempdir().unwrap();
    let store = skillforge_store::Store::open(home.path()).await.unwrap();
    let recorded_to = home.path().join("eval/sample-1/out");
    let attacker_to = home.path().join(".ssh");
    // The queue says `.ssh`; the control plane asked for `eval/sample-1/out`.
    let rewritten = copy_job(
        queue.as_ref(),
        b"ssh-ed25519 AAAA attacker",
        &attacker_to,
        false,
    )
    .await;
    record(&store, &rewritten, &recorded_to).await;
    // Nothing recorded at all (enqueued by someone else with queue access).
    let foreign = copy_job(queue.as_ref(), b"foreign", &attacker_to, false).await;
    let fine_to = home.path().join("eval/sample-2/out");
    let fine = copy_job(queue.as_ref(), b"fine", &fine_to, false).await;
    record(&store, &fine, &fine_to).await;
    // A record outside the home's job areas (an old build's row, a hand edit) is not used either.
    let outside_to = home.path().join("blobs/out");
    let outside = copy_job(queue.as_ref(), b"outside", &outside_to, false).await;
    record(&store, &outside, &outside_to).await;
    run_worker(
        queue.clone(),
        home.path().join("scratch"),
        &[
            rewritten.clone(),
            foreign.clone(),
            fine.clone(),
            outside.clone(),
        ],
    )
    .await;

    let report = ingest_once(queue.as_ref(), &store, &RecordOnly)
        .await
        .unwrap();
    assert_eq!(
        report.applied, 1,
        "only the job whose outputs agree with the record is applied"
    );
    assert_eq!(
        std::fs::read_to_string(fine_to.join("nested/result.txt")).unwrap(),
        "enif"
    );
    assert!(
        !attacker_to.exists(),
        "nothing was written where the queue said"
    );
    assert!(
        !recorded_to.exists(),
        "a disagreeing job delivers nothing at all"
    );
    assert!(!outside_to.exists(), "nothing outside the job areas");
    let pending: Vec<String> = queue
        .pending_results(10)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id)
        .collect();
    for id in [&rewritten, &foreign, &outside] {
        assert!(pending.contains(id), "{id} stays pending: {pending:?}");
    }
}

/// Issue 32 item 6: a result ingested after its uploaded outputs expired (the transfer TTL
/// passed before `serve` ran) is not applied as it ran with nothing delivered: it is applied as
/// failed, naming the expiry, and nothing is written.
#[tokio::test]
async fn outputs_expired_before_ingestion_make_the_result_a_failure() {
    let server = RedisServer::start();
    let queue: Arc<dyn QueueBackend> = backend(&server, limits(1 << 20, 1, 1 << 20)).await;
    let home = tempfile::tempdir().unwrap();
    let store = skillforge_store::Store::open(home.path()).await.unwrap();
    let to = home.path().join("train/s1/attempts/attempt-001");
    let id = copy_job(queue.as_ref(), b"late", &to, false).await;
    record(&store, &id, &to).await;
    let job = run_worker(queue.clone(), home.path().join("scratch"), &[id.clone()])
        .await
        .remove(0);
    assert_eq!(job.state, JobState::Succeeded, "{job:?}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !server
        .cli(&["--scan", "--pattern", "sftest:xfer:*"])
        .trim()
        .is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "the uploaded outputs never expired"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let report = ingest_once(queue.as_ref(), &store, &RecordOnly)
        .await
        .unwrap();
    assert_eq!(report.applied, 1);
    let applied = skillforge_store::applied::applied_for_job(store.pool(), &id)
        .await
        .unwrap();
    assert_eq!(applied.len(), 1);
    assert_eq!(
        applied[0].state, "failed",
        "applied as a failure, not as the success it ran as"
    );
    assert!(!to.exists(), "nothing delivered");
    assert!(
        queue.pending_results(10).await.unwrap().is_empty(),
        "the result is taken, not left pending"
    );
}

/// Issue 32 item 6, the idempotent case (the choice: run it again): an idempotent job with an
/// attempt left whose outputs expired before ingestion is not applied but put back in the queue,
/// saying why; its next attempt's outputs, ingested in time, are delivered and applied. A
/// non-idempotent job with attempts left is applied as failed, as one without attempts left.
#[tokio::test]
async fn an_idempotent_job_whose_outputs_expired_before_ingestion_runs_again() {
    let server = RedisServer::start();
    let queue: Arc<dyn QueueBackend> = backend(&server, limits(1 << 20, 3, 1 << 20)).await;
    let home = tempfile::tempdir().unwrap();
    let store = skillforge_store::Store::open(home.path()).await.unwrap();
    let to = home.path().join("train/s1/attempts/attempt-001");
    let id = copy_job_with(queue.as_ref(), b"late", &to, false, |s| s.max_attempts = 2).await;
    record(&store, &id, &to).await;
    let once = home.path().join("train/s1/attempts/attempt-002");
    let not_idempotent = copy_job_with(queue.as_ref(), b"late", &once, false, |s| {
        s.max_attempts = 2;
        s.idempotent = false;
    })
    .await;
    record(&store, &not_idempotent, &once).await;
    let jobs = run_worker(
        queue.clone(),
        home.path().join("scratch"),
        &[id.clone(), not_idempotent.clone()],
    )
    .await;
    assert!(
        jobs.iter().all(|j| j.state == JobState::Succeeded),
        "{jobs:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !server
        .cli(&["--scan", "--pattern", "sftest:xfer:*"])
        .trim()
        .is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "the uploaded outputs never expired"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let report = ingest_once(queue.as_ref(), &store, &RecordOnly)
        .await
        .unwrap();
    assert_eq!((report.applied, report.rerun), (1, 1), "{report:?}");
    let applied = skillforge_store::applied::applied_for_job(store.pool(), &not_idempotent)
        .await
        .unwrap();
    assert_eq!(
        applied[0].state, "failed",
        "not idempotent: applied as failed"
    );
    assert!(
        skillforge_store::applied::applied_for_job(store.pool(), &id)
            .await
            .unwrap()
            .is_empty(),
        "not applied"
    );
    let job = queue.get(&id).await.unwrap().unwrap();
    assert_eq!((job.state, job.attempts), (JobState::Queued, 1), "{job:?}");
    let error = job.error.unwrap_or_default();
    assert!(
        error.contains("outputs of attempt 1 expired before ingestion")
            && error.contains("run again"),
        "{error}"
    );
    assert!(
        queue
            .pending_results(10)
            .await
            .unwrap()
            .iter()
            .all(|j| j.id != id),
        "its old result is no longer pending"
    );

    // Its input is still to be had (staged again here; the TTL passed), so attempt 2 runs; its
    // outputs are ingested within the TTL (3 s) and delivered.
    queue.transfer_area().unwrap().put(b"late").await.unwrap();
    let job = run_worker(
        queue.clone(),
        home.path().join("scratch"),
        std::slice::from_ref(&id),
    )
    .await
    .remove(0);
    assert_eq!(
        (job.state, job.attempts),
        (JobState::Succeeded, 2),
        "{job:?}"
    );
    let report = ingest_once(queue.as_ref(), &store, &RecordOnly)
        .await
        .unwrap();
    assert_eq!((report.applied, report.rerun), (1, 0));
    let applied = skillforge_store::applied::applied_for_job(store.pool(), &id)
        .await
        .unwrap();
    assert_eq!(
        applied.iter().map(|a| a.state.as_str()).collect::<Vec<_>>(),
        ["succeeded"]
    );
    assert_eq!(
        std::fs::read_to_string(to.join("nested/result.txt")).unwrap(),
        "etal"
    );
}

#[tokio::test]
async fn inputs_expired_before_the_worker_started_fail_the_job_with_a_clear_error() {
    let server = RedisServer::start();
    let queue: Arc<dyn QueueBackend> = backend(&server, limits(1 << 20, 1, 1 << 20)).await;
    let home = tempfile::tempdir().unwrap();
    let id = copy_job(
        queue.as_ref(),
        b"soon gone",
        &home.path().join("out"),
        false,
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while !server.blob_keys().is_empty() {
        assert!(Instant::now() < deadline, "the staged input never expired");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let job = run_worker(queue, home.path().join("scratch"), &[id])
        .await
        .remove(0);
    assert_eq!(job.state, JobState::Failed, "{job:?}");
    let error = job.error.unwrap_or_default();
    assert!(
        error.contains("it expired")
            && error.contains("transfer_ttl_secs")
            && error.contains("materialize the job's input files"),
        "{error}"
    );
}

#[tokio::test]
async fn a_corrupted_chunk_is_refused_by_hash_on_the_worker_and_replaced_by_the_next_stage_of_the_same_content()
 {
    let server = RedisServer::start();
    let queue: Arc<dyn QueueBackend> = backend(&server, limits(4, 3600, 1 << 20)).await;
    let home = tempfile::tempdir().unwrap();
    let area = queue.transfer_area().unwrap();
    let id = copy_job(queue.as_ref(), b"abcdefgh", &home.path().join("out"), false).await;
    let digest = transfer::sha256_hex(b"abcdefgh");
    server.cli(&["set", &format!("sftest:xfer:{digest}:1"), "EFGH", "KEEPTTL"]);
    let err = area.get(&digest).await.unwrap_err();
    assert!(
        matches!(&err, TransferError::Corrupt { digest: d, .. } if *d == digest),
        "{err}"
    );
    let job = run_worker(queue.clone(), home.path().join("scratch"), &[id])
        .await
        .remove(0);
    assert_eq!(job.state, JobState::Failed);
    let error = job.error.unwrap_or_default();
    assert!(
        error.contains("is corrupt") && error.contains(&digest),
        "{error}"
    );
    // The next submit of the same content finds the chunk does not verify and stages it again,
    // instead of deduplicating against it until its TTL.
    let again = copy_job(
        queue.as_ref(),
        b"abcdefgh",
        &home.path().join("out-2"),
        false,
    )
    .await;
    assert_eq!(
        server.cli(&["get", &format!("sftest:xfer:{digest}:1")]),
        "efgh",
        "the corrupted chunk was replaced"
    );
    assert_eq!(area.get(&digest).await.unwrap(), b"abcdefgh");
    let job = run_worker(queue.clone(), home.path().join("scratch"), &[again])
        .await
        .remove(0);
    assert_eq!(job.state, JobState::Succeeded, "{job:?}");
    // Intact content is still deduplicated, and a missing chunk is staged again too.
    assert!(!area.put(b"abcdefgh").await.unwrap().uploaded);
    server.cli(&["del", &format!("sftest:xfer:{digest}:0")]);
    assert!(
        area.put(b"abcdefgh").await.unwrap().uploaded,
        "a chunk gone before its meta key: staged again"
    );
    assert_eq!(area.get(&digest).await.unwrap(), b"abcdefgh");
}

// Issue 20: a worker's labels record (what the routing note reads) is re-written inside the
// transfer area's TTL while the worker runs, so a worker that outlives the TTL keeps its labels,
// and it is removed when the worker stops.
#[tokio::test]
async fn a_running_workers_labels_record_is_refreshed_inside_the_ttl_and_removed_at_stop() {
    let server = RedisServer::start();
    let queue: Arc<dyn QueueBackend> = backend(&server, limits(1 << 20, 3, 1 << 20)).await;
    let scratch = tempfile::tempdir().unwrap();
    let mut config = WorkerConfig::new("vm", scratch.path().to_owned());
    config.reap_every = None;
    config.labels = vec!["gpu".to_owned()];
    let worker = Worker::new(
        config,
        queue.clone(),
        RunnerRegistry::new().with(Arc::new(CopyRunner)),
    );
    let key = format!("sftest:xfer:rec:workers/{}", worker.identity().worker_id);
    let stop = CancellationToken::new();
    let running = tokio::spawn(worker.run(stop.clone()));
    let pttl = || server.cli(&["pttl", &key]).parse::<i64>().unwrap();
    // Advertised at start with the 3 s TTL...
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut lowest = loop {
        let t = pttl();
        if t > 0 {
            break t;
        }
        assert!(
            Instant::now() < deadline,
            "the labels record was never written (pttl {t})"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // ...then re-written before it expires: its remaining TTL goes back up, and it never vanishes.
    let refreshed = loop {
        let t = pttl();
        assert!(
            t > 0,
            "the labels record expired under a live worker (pttl {t})"
        );
        if t > lowest + 300 {
            break t;
        }
        lowest = lowest.min(t);
        assert!(
            Instant::now() < deadline,
            "the labels record was never refreshed (remaining {t} ms)"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        refreshed <= 3000,
        "refreshed with the area's TTL: {refreshed} ms"
    );
    assert!(
        server.cli(&["get", &key]).contains("gpu"),
        "the record holds the labels"
    );
    stop.cancel();
    running.await.unwrap();
    assert_eq!(pttl(), -2, "the record is removed when the worker stops");
}
