//! The statements of `QueueControl::list` on SQLite, each reading through an index that holds
//! only its jobs, so a page costs O(page) or O(active) whatever the number of retained jobs
//! (issue 19): queued through `jobs_due`, running through `jobs_stale`, the rare states through
//! `jobs_rare_state`, succeeded through `jobs_retained_succeeded` (acknowledged) and
//! `jobs_pending` (result pending), all jobs by `seq` (the primary key). The unit test checks
//! every plan (and those of the lease and routes statements) with `EXPLAIN QUERY PLAN` on a queue file with a backlog.

use super::rows::job_columns;

/// `?1` = limit. Queued jobs, newest first (O(queued)).
pub(super) const QUEUED: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM jobs INDEXED BY jobs_due WHERE state = 'queued' ORDER BY seq DESC LIMIT ?1 + 0"
);

/// `?1` = queue name, `?2` = limit. The jobs queued on one queue or route, oldest due first
/// (O(page), a range of `jobs_due`).
pub(super) const QUEUED_ON: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM jobs INDEXED BY jobs_due WHERE state = 'queued' AND queue = ?1 ORDER BY not_before_ms, seq LIMIT ?2 + 0"
);

/// `?1` = limit. Running jobs, newest first (O(running)).
pub(super) const RUNNING: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM jobs INDEXED BY jobs_stale WHERE state = 'running' ORDER BY seq DESC LIMIT ?1 + 0"
);

/// `?1` = limit. Succeeded jobs, newest first among the `limit` most recently finished of the
/// acknowledged ones and of those whose result is pending (O(page) + O(pending)): a scan of
/// `jobs` by `seq` would read every newer queued job first.
pub(super) const SUCCEEDED: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM jobs WHERE seq IN (\
       SELECT seq FROM (SELECT seq FROM jobs INDEXED BY jobs_retained_succeeded \
         WHERE result_pending = 0 AND state = 'succeeded' ORDER BY updated_at_ms DESC LIMIT ?1 + 0) \
       UNION ALL \
       SELECT seq FROM (SELECT seq FROM jobs INDEXED BY jobs_pending \
         WHERE result_pending = 1 AND state = 'succeeded' ORDER BY updated_at_ms DESC, seq DESC LIMIT ?1 + 0)) \
     ORDER BY seq DESC LIMIT ?1 + 0"
);

/// `?1` = state (failed, dead, cancelled or stale), `?2` = limit (O(page)).
pub(super) const RARE: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM jobs INDEXED BY jobs_rare_state WHERE state = ?1 \
     AND state IN ('failed', 'dead', 'cancelled', 'stale') ORDER BY seq DESC LIMIT ?2 + 0"
);

/// Queued jobs per queue name, counted on `jobs_due` (O(queued) index entries, no row read).
pub(super) const COUNT_QUEUED: &str =
    "SELECT queue, count(*) FROM jobs INDEXED BY jobs_due WHERE state = 'queued' GROUP BY queue";

/// Running jobs, counted on `jobs_stale` (O(running)).
pub(super) const COUNT_RUNNING: &str =
    "SELECT count(*) FROM jobs INDEXED BY jobs_stale WHERE state = 'running'";

/// Succeeded jobs: the acknowledged ones counted on `jobs_retained_succeeded` (index entries
/// only), those whose result is pending through `jobs_pending` (O(pending)).
pub(super) const COUNT_SUCCEEDED: &str = "SELECT \
       (SELECT count(*) FROM jobs INDEXED BY jobs_retained_succeeded WHERE result_pending = 0 AND state = 'succeeded') + \
       (SELECT count(*) FROM jobs INDEXED BY jobs_pending WHERE result_pending = 1 AND state = 'succeeded')";

/// Failed, dead, cancelled and stale jobs per state, counted on `jobs_rare_state`.
pub(super) const COUNT_RARE: &str = "SELECT state, count(*) FROM jobs INDEXED BY jobs_rare_state \
     WHERE state IN ('failed', 'dead', 'cancelled', 'stale') GROUP BY state";

/// `?1` = limit. All jobs, newest first (O(page)).
pub(super) const ALL: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM jobs ORDER BY seq DESC LIMIT ?1 + 0"
);

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sqlx::{Connection, Row};

    use super::*;
    use crate::backend::prelude::*;
    use crate::job::{Finish, JobSpec, JobState, WorkerIdentity};
    use crate::sqlite::SqliteBackend;

    /// The `EXPLAIN QUERY PLAN` lines of `sql` (parameters bound to `binds`).
    async fn plan(c: &mut sqlx::SqliteConnection, sql: &str, binds: &[&str]) -> Vec<String> {
        let text = format!("EXPLAIN QUERY PLAN {sql}");
        let mut q = sqlx::query(sqlx::AssertSqlSafe(text));
        for b in binds {
            q = q.bind(*b);
        }
        q.fetch_all(c)
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<String, _>("detail"))
            .collect()
    }

    /// Every list statement and the lease statement read through an index, never a scan of
    /// `jobs` (a full scan reads every retained job), with a backlog of queued and finished jobs
    /// and the planner's statistics (`ANALYZE`).
    #[tokio::test]
    async fn list_and_lease_statements_search_an_index_with_a_backlog() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("queue.db");
        let b = SqliteBackend::open(&path).await.unwrap();
        let w = WorkerIdentity::new("w");
        let done = Finish {
            next: JobState::Succeeded,
            retry_delay_ms: 0,
            attempt_result: "passed".into(),
            outcome: None,
            error: None,
        };
        for i in 0..300 {
            let id = b
                .enqueue(&JobSpec::new("noop", serde_json::json!({})))
                .await
                .unwrap()
                .job_id;
            if i < 200 {
                let l = b
                    .lease("default", &w, 1, Duration::ZERO)
                    .await
                    .unwrap()
                    .remove(0);
                b.finish(&id, l.fencing_token, &done).await.unwrap();
                if i < 150 {
                    b.ack_result(&id, l.fencing_token).await.unwrap();
                }
            }
        }
        for queue in ["gpu@cuda", "a@x", "gpu@cuda", "zeta"] {
            let mut spec = JobSpec::new("noop", serde_json::json!({}));
            spec.queue = queue.into();
            b.enqueue(&spec).await.unwrap();
        }
        assert_eq!(
            b.routes().await.unwrap(),
            ["a@x", "gpu@cuda"],
            "routed queue names, each once, in order"
        );
        let on_route = b.queued_on("gpu@cuda", 10).await.unwrap();
        assert_eq!(on_route.len(), 2, "the jobs queued on that route only");
        assert!(
            on_route
                .iter()
                .all(|j| j.spec.queue == "gpu@cuda" && j.state == JobState::Queued)
        );
        let listed = b.list(Some(JobState::Succeeded), 60).await.unwrap();
        assert_eq!(listed.len(), 60);
        assert!(
            listed
                .windows(2)
                .all(|p| p[0].created_at_ms >= p[1].created_at_ms),
            "newest first"
        );
        assert!(listed.iter().all(|j| j.state == JobState::Succeeded));
        // The counts agree with the jobs made above, by state and per queue.
        let counts = b.counts().await.unwrap();
        assert_eq!(
            (
                counts.of(JobState::Queued),
                counts.of(JobState::Succeeded),
                counts.of(JobState::Running)
            ),
            (104, 200, 0)
        );
        assert_eq!(
            counts.queued_by_queue,
            [
                ("a@x".to_owned(), 1),
                ("default".to_owned(), 100),
                ("gpu@cuda".to_owned(), 2),
                ("zeta".to_owned(), 1)
            ]
        );

        let url = format!("sqlite://{}", path.display());
        let mut c = sqlx::SqliteConnection::connect(&url).await.unwrap();
        sqlx::query("ANALYZE").execute(&mut c).await.unwrap();
        let lease = &*crate::sqlite::lease::LEASE_STATEMENT;
        for (name, sql, binds) in [
            ("queued", QUEUED, &["50"][..]),
            ("queued on a route", QUEUED_ON, &["gpu@cuda", "50"]),
            ("running", RUNNING, &["50"]),
            ("succeeded", SUCCEEDED, &["50"]),
            ("rare", RARE, &["dead", "50"]),
            ("all", ALL, &["50"]),
            ("count queued", COUNT_QUEUED, &[]),
            ("count running", COUNT_RUNNING, &[]),
            ("count succeeded", COUNT_SUCCEEDED, &[]),
            ("count rare", COUNT_RARE, &[]),
            (
                "lease",
                lease.as_str(),
                &["0", "default", "10", "w", "h", "1"],
            ),
            ("routes", crate::sqlite::routes::ROUTES, &[]),
            ("reaper", crate::sqlite::queue::EXPIRED_LEASES, &["0", "50"]),
        ] {
            let lines = plan(&mut c, sql, binds).await;
            let scans: Vec<&String> = lines
                .iter()
                .filter(|l| l.starts_with("SCAN jobs") && !l.contains("INDEX"))
                .collect();
            let all_by_seq = name == "all" && lines.iter().any(|l| l == "SCAN jobs");
            assert!(
                scans.is_empty() || all_by_seq,
                "{name} scans `jobs`: {lines:?}"
            );
            // The routes skip-scan seeks one queue name at a time: even a walk of an index
            // would read every queued job (the `SELECT DISTINCT` it replaced did).
            if name == "routes" {
                assert!(
                    !lines.iter().any(|l| l.starts_with("SCAN jobs")),
                    "routes walks `jobs`: {lines:?}"
                );
            }
            if name == "reaper" {
                assert!(
                    lines.iter().any(|l| l.contains("INDEX jobs_stale")),
                    "{lines:?}"
                );
            }
            if name == "lease" {
                assert!(
                    lines.iter().any(|l| l.contains("INDEX jobs_due")),
                    "{lines:?}"
                );
            }
        }
    }
}
