//! Upgrading a schema v4 file written by main's build before issue 19's size work
//! (`fixtures/queue_v4.db`: made with that build's `skillforge jobs submit --wait`, `serve` and
//! `jobs prune`): job ids become 16-byte keys everywhere (schema v6), old full-JSON specs and
//! outcomes read unchanged (v5), released lock rows go (v7), and the queue goes on as before.

use super::*;

/// The fixture's jobs as main wrote them: (seq, id, state, idempotency key).
async fn old_jobs(pool: &sqlx::SqlitePool) -> Vec<(i64, String, String, Option<String>)> {
    sqlx::query_as("SELECT seq, id, state, idempotency_key FROM jobs ORDER BY seq")
        .fetch_all(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_v4_file_written_by_main_upgrades_to_binary_ids_and_reads_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("queue.db");
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/sqlite_backend/fixtures/queue_v4.db"
        ),
        &path,
    )
    .unwrap();
    let url = format!("sqlite://{}", path.display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    let version: i64 = sqlx::query_scalar("PRAGMA user_version")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(version, 4, "the fixture is a v4 file");
    // The newest job goes as a pruned one does (retention's DELETE), so the AUTOINCREMENT counter
    // is past every remaining seq and the rebuilt table must carry it over.
    sqlx::query("DELETE FROM jobs WHERE seq = (SELECT MAX(seq) FROM jobs)")
        .execute(&pool)
        .await
        .unwrap();
    let jobs = old_jobs(&pool).await;
    assert_eq!(jobs.len(), 3);
    let (pruned_id, pruned_key): (String, String) =
        sqlx::query_as("SELECT id, idempotency_key FROM pruned_jobs")
            .fetch_one(&pool)
            .await
            .unwrap();
    let output: Vec<(String, String)> =
        sqlx::query_as("SELECT job_id, CAST(data AS TEXT) FROM job_output ORDER BY id")
            .fetch_all(&pool)
            .await
            .unwrap();
    let sequence: i64 = sqlx::query_scalar("SELECT seq FROM sqlite_sequence WHERE name = 'jobs'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(sequence > jobs.last().unwrap().0);
    // Released locks (each worker's presence lock) kept their rows before schema v7.
    let released: Vec<(String, i64)> =
        sqlx::query_as("SELECT name, fencing_token FROM locks WHERE held = 0")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert!(!released.is_empty());
    pool.close().await;

    let q = SqliteBackend::open(&path).await.unwrap();
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    let version: i64 = sqlx::query_scalar("PRAGMA user_version")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(version, SqliteBackend::schema_version());
    for (table, column) in [
        ("jobs", "id"),
        ("job_attempts", "job_id"),
        ("job_output", "job_id"),
        ("pruned_jobs", "id"),
    ] {
        let text: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT COUNT(*) FROM {table} WHERE typeof({column}) <> 'blob' OR length({column}) <> 16"
        )))
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(text, 0, "every {table}.{column} is a 16-byte key");
    }

    // Released lock rows are gone; a name's next token is past its old one (schema v7).
    let locks: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM locks")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(locks, 0, "released lock rows are deleted");
    let (name, old) = &released[0];
    match q
        .acquire_lock(
            name,
            &WorkerIdentity::new("w"),
            Duration::from_secs(1),
            Duration::from_secs(5),
        )
        .await
        .unwrap()
    {
        LockAcquire::Acquired { fencing_token } => assert!(fencing_token as i64 > *old),
        held => panic!("{held:?}"),
    }

    // Every job reads back under its id, with its state and its whole history.
    for (_, id, state, key) in &jobs {
        let job = q
            .get(id)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("job {id} after the upgrade"));
        assert_eq!(
            (&job.id, job.state.as_str(), &job.spec.idempotency_key),
            (id, state.as_str(), key)
        );
        assert_eq!(job.history.len(), job.attempts as usize, "history of {id}");
        assert_eq!(job.spec.kind, "process");
    }
    let dead = jobs.iter().find(|j| j.2 == "dead").unwrap();
    let dead = q.get(&dead.1).await.unwrap().unwrap();
    assert_eq!(
        dead.history
            .iter()
            .map(|h| h.fencing_token)
            .collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert!(dead.outcome.is_some(), "the full-JSON outcome reads");
    for (id, data) in &output {
        let chunks = q.read_output(id, None, 100).await.unwrap();
        assert!(
            chunks
                .iter()
                .any(|c| String::from_utf8_lossy(&c.data) == *data),
            "output of {id}"
        );
    }
    assert_eq!(q.list(None, 10).await.unwrap().len(), 3);
    assert_eq!(q.list(Some(JobState::Queued), 10).await.unwrap().len(), 1);

    // Idempotency keys: a live job's, and a pruned job's (its tombstone).
    let tomb = q
        .tombstone(&pruned_id)
        .await
        .unwrap()
        .expect("the tombstone reads");
    assert_eq!(tomb.idempotency_key.as_deref(), Some(pruned_key.as_str()));
    let mut again = spec("default");
    again.idempotency_key = Some(pruned_key);
    let e = q.enqueue(&again).await.unwrap();
    assert_eq!((e.job_id.as_str(), e.created), (pruned_id.as_str(), false));
    let (_, ok_id, _, ok_key) = jobs.iter().find(|j| j.2 == "succeeded").unwrap();
    again.idempotency_key = ok_key.clone();
    let e = q.enqueue(&again).await.unwrap();
    assert_eq!((&e.job_id, e.created), (ok_id, false));

    // The old queued jobs run; a new job gets a seq past the old counter (never reused).
    let w = WorkerIdentity::new("after-upgrade");
    let leased = q.lease("default", &w, 8, Duration::ZERO).await.unwrap();
    assert_eq!(leased.len(), 1);
    assert_eq!(
        leased[0].job.spec.idempotency_key.as_deref(),
        Some("fixture-queued")
    );
    let done = q
        .finish(
            &leased[0].job.id,
            leased[0].fencing_token,
            &finish(JobState::Succeeded, 0),
        )
        .await
        .unwrap();
    assert_eq!(done, FinishReply::Applied(JobState::Succeeded));
    assert!(
        q.ack_result(&leased[0].job.id, leased[0].fencing_token)
            .await
            .unwrap()
    );
    let new = q.enqueue(&spec("default")).await.unwrap();
    assert!(new.created);
    let seq: i64 =
        sqlx::query_scalar("SELECT seq FROM jobs WHERE id = unhex(replace(?1, '-', ''))")
            .bind(&new.job_id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(seq > sequence, "seq {seq} after the old counter {sequence}");
    assert_eq!(
        q.get(&new.job_id).await.unwrap().unwrap().spec,
        spec("default")
    );
}

/// The upgrade to schema v9 counts the depth of the jobs already in the file (by queue and
/// state), so `/metrics` is exact from the first scrape on an upgraded queue.
#[tokio::test]
async fn the_upgrade_to_v9_counts_the_jobs_already_there() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("queue.db");
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/sqlite_backend/fixtures/queue_v4.db"
        ),
        &path,
    )
    .unwrap();
    let url = format!("sqlite://{}", path.display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    let want: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT queue, state, count(*) FROM jobs GROUP BY queue, state ORDER BY queue, state",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(!want.is_empty());
    pool.close().await;
    let q = SqliteBackend::open(&path).await.unwrap();
    let m = q.metrics().await.unwrap().expect("kept");
    let mut got: Vec<(String, String, i64)> = m
        .rows
        .iter()
        .filter(|r| r.name == "depth" && r.value != 0)
        .map(|r| (r.queue.clone(), r.outcome.clone(), r.value))
        .collect();
    got.sort();
    assert_eq!(got, want);
}
