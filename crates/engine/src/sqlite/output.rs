//! Live output on the embedded queue ([`crate::output`]): table `job_output` (schema v3), written
//! through the process's one write connection, read through the read pool. An append wakes this
//! process's change waiters at once; other processes' see it through `data_version`.

use sqlx::Row;

use super::SqliteBackend;
use super::key::Key;
use crate::error::EngineError;
use crate::output::{NewOutput, OUTPUT_CAP_CHUNKS, OUTPUT_TAIL_CHUNKS, OutputChunk, OutputStream};

impl SqliteBackend {
    /// See [`crate::backend::QueueOutput::append_output`].
    pub(super) async fn append_output_rows(
        &self,
        job_id: &str,
        fencing_token: u64,
        chunks: &[NewOutput],
    ) -> Result<bool, EngineError> {
        let what = format!("append output of job `{job_id}`");
        let mut tx = self.begin(&what).await?;
        let running: Option<i64> = sqlx::query_scalar(
            "SELECT 1 FROM jobs WHERE id = ?1 AND fencing_token = ?2 AND state = 'running'",
        )
        .bind(Key::of(job_id))
        .bind(super::to_i64(fencing_token))
        .fetch_optional(&mut *tx)
        .await
        .map_err(self.db(&what))?;
        if running.is_none() {
            return Ok(false);
        }
        for chunk in chunks {
            sqlx::query("INSERT INTO job_output (job_id, fencing_token, stream, data) VALUES (?1, ?2, ?3, ?4)")
                .bind(Key::of(job_id))
                .bind(super::to_i64(fencing_token))
                .bind(chunk.stream.as_str())
                .bind(&chunk.data)
                .execute(&mut *tx)
                .await
                .map_err(self.db(&what))?;
        }
        keep_last(&mut tx, job_id, OUTPUT_CAP_CHUNKS)
            .await
            .map_err(self.db(&what))?;
        tx.commit()
            .await
            .map_err(self.db(format!("{what}: commit")))?;
        self.inner.wake.jobs_changed();
        Ok(true)
    }

    /// See [`crate::backend::QueueOutput::read_output`].
    pub(super) async fn read_output_rows(
        &self,
        job_id: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<OutputChunk>, EngineError> {
        let after: i64 = match after {
            None | Some("") => 0,
            Some(c) => c.parse().map_err(|_| {
                EngineError::sqlite(format!(
                    "output cursor `{c}` of job `{job_id}` is not one of the embedded queue's"
                ))
            })?,
        };
        let what = format!("read output of job `{job_id}`");
        let rows = sqlx::query(
            "SELECT id, fencing_token, stream, data FROM job_output WHERE job_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3",
        )
        .bind(Key::of(job_id))
        .bind(after)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.inner.reader)
        .await
        .map_err(self.db(&what))?;
        rows.iter()
            .map(|r| {
                let stream: String = r.get("stream");
                Ok(OutputChunk {
                    cursor: r.get::<i64, _>("id").to_string(),
                    fencing_token: u64::try_from(r.get::<i64, _>("fencing_token"))
                        .unwrap_or_default(),
                    stream: match stream.as_str() {
                        "stdout" => OutputStream::Stdout,
                        "stderr" => OutputStream::Stderr,
                        other => {
                            return Err(EngineError::sqlite(format!(
                                "{what}: unknown stream `{other}`"
                            )));
                        }
                    },
                    data: r.get("data"),
                })
            })
            .collect()
    }

    /// See [`crate::backend::QueueOutput::trim_output`].
    pub(super) async fn trim_output_rows(&self, job_id: &str) -> Result<(), EngineError> {
        let what = format!("trim output of job `{job_id}`");
        let mut tx = self.begin(&what).await?;
        keep_last(&mut tx, job_id, OUTPUT_TAIL_CHUNKS)
            .await
            .map_err(self.db(&what))?;
        tx.commit()
            .await
            .map_err(self.db(format!("{what}: commit")))?;
        Ok(())
    }
}

/// Deletes all but the newest `keep` chunks of `job_id`.
async fn keep_last(
    tx: &mut sqlx::SqliteConnection,
    job_id: &str,
    keep: usize,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "DELETE FROM job_output WHERE job_id = ?1 AND id <= \
         (SELECT id FROM job_output WHERE job_id = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)",
    )
    .bind(Key::of(job_id))
    .bind(i64::try_from(keep).unwrap_or(i64::MAX))
    .execute(tx)
    .await?;
    Ok(())
}
