//! Retention on the embedded queue (issue 19): the shared scenarios, plus what pruning leaves in
//! the file (no spec or attempt rows of a pruned job) and a prune interrupted mid-batch.

use super::*;

#[tokio::test]
async fn retention_by_age() {
    let dir = tempfile::tempdir().unwrap();
    scenarios::retention::retention_by_age(&open(&dir).await).await;
}

#[tokio::test]
async fn retention_by_count() {
    let dir = tempfile::tempdir().unwrap();
    scenarios::retention::retention_by_count(&open(&dir).await).await;
}

#[tokio::test]
async fn pruning_never_removes_an_unapplied_result() {
    let dir = tempfile::tempdir().unwrap();
    scenarios::retention::pruning_never_removes_an_unapplied_result(&open(&dir).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pruning_races_ingestion_and_retries_without_losing_a_result() {
    let dir = tempfile::tempdir().unwrap();
    scenarios::retention::pruning_races_ingestion_and_retries_without_losing_a_result(
        &open(&dir).await,
    )
    .await;
}

#[tokio::test]
async fn idempotency_key_outlives_its_job_by_the_retention() {
    let dir = tempfile::tempdir().unwrap();
    scenarios::retention::idempotency_key_outlives_its_job_by_the_retention(&open(&dir).await)
        .await;
}

/// A pruned job leaves no row behind but its tombstone: its `job_specs` row and its superseded
/// attempts in `job_attempts` go with it.
#[tokio::test]
async fn a_pruned_job_leaves_only_its_tombstone_in_the_file() {
    use skillforge_engine::retention::{Bound, PruneRule, RetainClass, prune_pass};
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir).await;
    let w = WorkerIdentity::new("rows");
    let id = q.enqueue(&spec("rows")).await.unwrap().job_id;
    let l = q.lease("rows", &w, 1, Duration::ZERO).await.unwrap();
    q.finish(&id, l[0].fencing_token, &finish(JobState::Queued, 0))
        .await
        .unwrap();
    let l = q.lease("rows", &w, 1, Duration::ZERO).await.unwrap();
    q.finish(&id, l[0].fencing_token, &finish(JobState::Succeeded, 0))
        .await
        .unwrap();
    assert!(q.ack_result(&id, l[0].fencing_token).await.unwrap());
    let all = Bound {
        before_ms: Some(q.now_ms().await.unwrap() + 1_000),
        keep_newest: None,
    };
    let rule = PruneRule {
        class: RetainClass::Succeeded,
        jobs: all,
        tombstones: Bound::default(),
    };
    assert_eq!(prune_pass(&q, &[rule], 10).await.unwrap().jobs, 1);
    drop(q);
    let pool = sqlx::SqlitePool::connect(&format!(
        "sqlite://{}",
        dir.path().join("queue.db").display()
    ))
    .await
    .unwrap();
    for (table, expect) in [
        ("jobs", 0),
        ("job_specs", 0),
        ("job_attempts", 0),
        ("pruned_jobs", 1),
    ] {
        let n: i64 =
            sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {table}")))
                .fetch_one(&pool)
                .await
                .unwrap();
        assert_eq!(n, expect, "rows left in {table}");
    }
}

#[tokio::test]
async fn metrics_counters_move_with_every_transition() {
    let dir = tempfile::tempdir().unwrap();
    scenarios::metrics::counters_move_with_every_transition(&open(&dir).await).await;
}

/// `/metrics` reads the queue in O(label sets): its queries never scan the jobs table (issue 36,
/// "Speed"), whatever the number of jobs.
#[tokio::test]
async fn metrics_queries_never_scan_the_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let backend = open(&dir).await;
    drop(backend);
    let pool = sqlx::SqlitePool::connect(&format!(
        "sqlite://{}",
        dir.path().join("queue.db").display()
    ))
    .await
    .unwrap();
    for sql in [
        skillforge_engine::sqlite::METRICS_SQL,
        skillforge_engine::sqlite::OLDEST_PENDING_RESULT_SQL,
    ] {
        let plan: Vec<(i64, i64, i64, String)> =
            sqlx::query_as(sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {sql}")))
                .fetch_all(&pool)
                .await
                .unwrap();
        let details: Vec<&str> = plan.iter().map(|r| r.3.as_str()).collect();
        // Every step that reads `jobs` goes through an index (a plain `SCAN jobs` or `SEARCH jobs`
        // without one reads every row).
        let on_jobs = |d: &str| d.starts_with("SCAN jobs") || d.starts_with("SEARCH jobs");
        assert!(
            details
                .iter()
                .filter(|d| on_jobs(d))
                .all(|d| d.contains(" USING ")),
            "{sql}: {details:?}"
        );
        assert!(!details.is_empty());
    }
}
