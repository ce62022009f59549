//! Issue 32 item 7 on both backends: at ingestion a job with output dirs is checked against the
//! spec the control plane recorded when it enqueued it. A queued job whose payload was rewritten
//! on the queue (a transcript path pointing out of the home) is refused before anything is
//! written, and stays pending; one whose `env` alone changed (a control plane's retry with the
//! current environment) is applied, and the handler sees the recorded payload and files.

use std::sync::Mutex;
use std::time::Duration;

use skillforge_engine::ingest::{ApplyError, ResultHandler, ingest_once};
use skillforge_engine::transfer::OutputDir;
use skillforge_engine::{Finish, Job, JobSpec, JobState, QueueBackend, WorkerIdentity};
use skillforge_store::Store;

/// Records the payload each applied job showed its handler.
#[derive(Default)]
pub(crate) struct Seen(pub(crate) Mutex<Vec<(String, serde_json::Value)>>);

#[async_trait::async_trait]
impl ResultHandler for Seen {
    async fn apply(&self, _conn: &mut sqlx::SqliteConnection, job: &Job) -> Result<(), ApplyError> {
        self.0
            .lock()
            .unwrap()
            .push((job.id.clone(), job.spec.payload.clone()));
        Ok(())
    }
}

/// A failed attempt without an outcome (nothing uploaded, nothing to deliver).
fn failed() -> Finish {
    Finish {
        next: JobState::Failed,
        retry_delay_ms: 0,
        attempt_result: "failed".into(),
        outcome: None,
        error: Some("boom".into()),
    }
}

/// Enqueues an arm-like job whose `meta` dir is delivered into `home`'s eval area, recording it
/// as the stage port does (deliveries, pending work, spec); returns its id and spec.
pub(crate) async fn submit(
    b: &dyn QueueBackend,
    store: &Store,
    home: &std::path::Path,
    key: &str,
) -> (String, JobSpec) {
    let mut spec = JobSpec::new(
        "agent",
        serde_json::json!({"transcript_path": "@job_dir@/meta/transcript.jsonl", "env": {"TOKEN": "old"}}),
    );
    spec.workflow = "evalloop".into();
    spec.stage = "arm".into();
    spec.idempotency_key = Some(key.to_owned());
    spec.files.outputs.push(OutputDir {
        dir: "meta".into(),
        deliver_to: home.join("eval/b1/samples/1/with.meta"),
    });
    let id = b.enqueue(&spec).await.unwrap().job_id;
    let delivery = skillforge_store::deliveries::Delivery {
        dir: "meta".into(),
        deliver_to: spec.files.outputs[0].deliver_to.clone(),
    };
    skillforge_store::deliveries::record_deliveries(store.pool(), &id, &[delivery])
        .await
        .unwrap();
    skillforge_store::submitted::record_submitted(store.pool(), &id, "evalloop", "arm", Some(key))
        .await
        .unwrap();
    skillforge_store::submitted::record_spec(
        store.pool(),
        &id,
        &serde_json::to_string(&spec).unwrap(),
    )
    .await
    .unwrap();
    (id, spec)
}

/// Runs `id` once to a failure under a new attempt.
pub(crate) async fn run_and_fail(b: &dyn QueueBackend, id: &str) {
    let w = WorkerIdentity::new("trusted");
    let leased = b
        .lease(
            &b.get(id).await.unwrap().unwrap().spec.queue,
            &w,
            1,
            Duration::ZERO,
        )
        .await
        .unwrap();
    assert_eq!(leased[0].job.id, id);
    b.finish(id, leased[0].fencing_token, &failed())
        .await
        .unwrap();
}

pub(crate) async fn a_job_rewritten_on_the_queue_is_refused_at_ingestion(b: &dyn QueueBackend) {
    let home = tempfile::tempdir().unwrap();
    let store = Store::open(home.path()).await.unwrap();
    let seen = Seen::default();

    // As recorded: applied, the handler sees the recorded payload.
    let (plain, spec) = submit(b, &store, home.path(), "arm:1:with").await;
    run_and_fail(b, &plain).await;
    assert_eq!(ingest_once(b, &store, &seen).await.unwrap().applied, 1);

    // Retried with another env only (what `jobs retry --env` does): applied, with the recorded
    // payload (its env included) shown to the handler.
    let mut new_env = spec.payload.clone();
    new_env["env"]["TOKEN"] = "new".into();
    b.retry_with_payload(&plain, &new_env).await.unwrap();
    run_and_fail(b, &plain).await;
    assert_eq!(
        ingest_once(b, &store, &seen).await.unwrap().applied,
        1,
        "an env-only change is the control plane's"
    );
    assert_eq!(
        seen.0.lock().unwrap().last().unwrap(),
        &(plain.clone(), spec.payload.clone())
    );

    // Rewritten on the queue (here through a retry with another payload; on Redis also by a
    // direct write of the hash, see the Redis test): refused, nothing applied, still pending.
    let (rewritten, spec) = submit(b, &store, home.path(), "arm:2:with").await;
    let mut evil = spec.payload.clone();
    evil["transcript_path"] = "/root/.ssh/transcript.jsonl".into();
    run_and_fail(b, &rewritten).await;
    b.retry_with_payload(&rewritten, &evil).await.unwrap();
    run_and_fail(b, &rewritten).await;
    let before = seen.0.lock().unwrap().len();
    assert_eq!(
        ingest_once(b, &store, &seen).await.unwrap().applied,
        0,
        "refused"
    );
    assert_eq!(
        seen.0.lock().unwrap().len(),
        before,
        "the handler never ran"
    );
    let applied = skillforge_store::applied::applied_for_job(store.pool(), &rewritten)
        .await
        .unwrap();
    assert!(applied.is_empty(), "nothing recorded applied: {applied:?}");
    assert!(
        b.pending_results(10)
            .await
            .unwrap()
            .iter()
            .any(|j| j.id == rewritten),
        "its result stays pending"
    );
}
