//! The family registry at ingestion, on a real SQLite queue and domain store: a job whose
//! workflow no family owns stays pending (never acknowledged, no applied-result record), while
//! the other results of the same pass are applied (issue 11, item 1).

use std::sync::Arc;
use std::time::Duration;

use skillforge_engine::ingest::ingest_once;
use skillforge_engine::sqlite::SqliteBackend;
use skillforge_engine::{Finish, FinishReply, JobSpec, JobState, QueueBackend, WorkerIdentity};
use skillforge_stage::family::{ADHOC_WORKFLOW, COMMAND_FAMILIES, Families};
use skillforge_store::Store;
use skillforge_store::applied::applied_for_job;

/// Enqueues a job of `workflow`, leases it and finishes it `succeeded` through the queue's own
/// fenced protocol (what a worker does); returns its id.
async fn finished_job(queue: &dyn QueueBackend, workflow: &str) -> String {
    let mut spec = JobSpec::new("process", serde_json::json!({"argv": ["true"]}));
    spec.workflow = workflow.to_owned();
    let id = queue.enqueue(&spec).await.unwrap().job_id;
    let worker = WorkerIdentity::new("families-test");
    let leased = queue
        .lease(&spec.queue, &worker, 1, Duration::from_secs(5))
        .await
        .unwrap();
    let leased = leased
        .into_iter()
        .find(|l| l.job.id == id)
        .expect("the job is leased");
    let finish = Finish {
        next: JobState::Succeeded,
        retry_delay_ms: 0,
        attempt_result: "succeeded".into(),
        outcome: None,
        error: None,
    };
    let reply = queue
        .finish(&id, leased.fencing_token, &finish)
        .await
        .unwrap();
    assert_eq!(reply, FinishReply::Applied(JobState::Succeeded));
    id
}

#[tokio::test]
async fn unknown_workflows_result_stays_pending_and_is_never_recorded_as_applied() {
    let home = tempfile::tempdir().unwrap();
    let store = Store::open(home.path()).await.unwrap();
    let queue: Arc<dyn QueueBackend> = Arc::new(
        SqliteBackend::open(&home.path().join("queue.db"))
            .await
            .unwrap(),
    );
    let unknown = finished_job(queue.as_ref(), "from-a-newer-build").await;
    let known = finished_job(queue.as_ref(), ADHOC_WORKFLOW).await;
    let families = Families::new(&COMMAND_FAMILIES, home.path());

    let report = ingest_once(queue.as_ref(), &store, &families)
        .await
        .unwrap();
    assert_eq!(
        (report.applied, report.duplicates),
        (1, 0),
        "only the registered family's result is applied"
    );
    let pending: Vec<String> = queue
        .pending_results(500)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(
        pending,
        vec![unknown.clone()],
        "the unknown workflow's result is still pending, the other acknowledged"
    );
    assert!(
        applied_for_job(store.pool(), &unknown)
            .await
            .unwrap()
            .is_empty(),
        "no applied-result record"
    );
    assert_eq!(
        applied_for_job(store.pool(), &known).await.unwrap().len(),
        1
    );

    // A second pass (another control plane, later) still does not acknowledge it.
    let again = ingest_once(queue.as_ref(), &store, &families)
        .await
        .unwrap();
    assert_eq!((again.applied, again.duplicates), (0, 0));
    assert_eq!(queue.pending_results(500).await.unwrap().len(), 1);
    assert!(
        applied_for_job(store.pool(), &unknown)
            .await
            .unwrap()
            .is_empty()
    );
}
