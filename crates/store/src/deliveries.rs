//! Where the control plane delivers each job's output dirs (issue 32 item 7): its own record,
//! written when it enqueues the job ([`record_deliveries`]) and read when the outputs come back
//! ([`deliveries_for`]), so a `deliver_to` read back from the queue (which anyone with queue
//! access can rewrite) never decides where the control plane writes.
//!
//! Every recorded dir must lie inside one of the home's job areas ([`JOB_AREAS`]):
//! [`check_delivery_path`] says whether a path does.

use std::path::{Component, Path, PathBuf};

use sqlx::{SqliteConnection, SqlitePool};

use crate::StoreError;
use crate::templates::now_rfc3339;

/// The home's dirs that jobs' output dirs may be delivered into: train attempts
/// (`train/<session>/…`), eval samples (`eval/…`), optimize worktrees (`optimize/<spec>/…`) and
/// the demo's sessions (`demo/…`). Never the home itself, its databases, config or blob store.
pub const JOB_AREAS: &[&str] = &["train", "eval", "optimize", "demo"];

/// One output dir of a job as the control plane recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The dir's name in the job dir (`out`, `work`, `meta`).
    pub dir: String,
    /// The control-plane dir its files are written to.
    pub deliver_to: PathBuf,
}

/// Whether `path` may receive a job's outputs: absolute, without `.` or `..` components, and
/// strictly inside `<home>/<area>` for one of [`JOB_AREAS`].
///
/// # Errors
/// A message naming the path and the rule it breaks.
pub fn check_delivery_path(home: &Path, path: &Path) -> Result<(), String> {
    if !path.is_absolute()
        || path
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return Err(format!(
            "`{}` is not an absolute path without `.` or `..`",
            path.display()
        ));
    }
    let inside = JOB_AREAS.iter().any(|area| {
        let root = home.join(area);
        path.strip_prefix(&root)
            .is_ok_and(|rest| rest.components().next().is_some())
    });
    if inside {
        Ok(())
    } else {
        Err(format!(
            "`{}` is outside the home's job areas ({} under `{}`)",
            path.display(),
            JOB_AREAS.join(", "),
            home.display()
        ))
    }
}

/// Records where job `job_id`'s output dirs go. A dir already recorded for the job keeps its
/// first record (a re-submit of an idempotency key returns the same job, whose outputs were
/// recorded by the first submit).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn record_deliveries(
    pool: &SqlitePool,
    job_id: &str,
    deliveries: &[Delivery],
) -> Result<(), StoreError> {
    let mut tx = pool.begin().await?;
    for d in deliveries {
        sqlx::query(
            "INSERT INTO job_deliveries (job_id, dir, deliver_to, recorded_at) VALUES (?, ?, ?, ?)
             ON CONFLICT (job_id, dir) DO NOTHING",
        )
        .bind(job_id)
        .bind(&d.dir)
        .bind(d.deliver_to.to_string_lossy())
        .bind(now_rfc3339())
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// The recorded output dirs of `job_id`, by dir name; empty when none were recorded.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn deliveries_for(
    conn: &mut SqliteConnection,
    job_id: &str,
) -> Result<Vec<Delivery>, StoreError> {
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT dir, deliver_to FROM job_deliveries WHERE job_id = ? ORDER BY dir")
            .bind(job_id)
            .fetch_all(&mut *conn)
            .await?;
    Ok(rows
        .into_iter()
        .map(|(dir, to)| Delivery {
            dir,
            deliver_to: PathBuf::from(to),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::check_delivery_path;

    #[test]
    fn only_paths_inside_a_job_area_of_the_home_receive_outputs() {
        let home = Path::new("/h");
        let check = |p: &str, ok: bool| {
            assert_eq!(check_delivery_path(home, Path::new(p)).is_ok(), ok, "{p}")
        };
        check("/h/train/s1/attempts/attempt-001", true);
        check("/h/eval/b/samples/1/out", true);
        check("/h/optimize/spec/worktrees/exp-001", true);
        check("/h/train", false);
        check("/h", false);
        check("/h/blobs/sha256", false);
        check("/h/config.toml", false);
        check("/h/train/../.ssh", false);
        check("/root/.ssh", false);
        check("train/s1", false);
        check("/h/trainx/s1", false);
    }
}
