//! The embedded SQLite queue backend (on sqlx): [`SqliteBackend`].
//!
//! One SQLite file in WAL mode holds the queue (`jobs`, `job_specs`, `job_attempts`, `locks`;
//! see `sqlite/migrations/`; schema version 3; `pruned_jobs` holds the tombstones of pruned jobs, `sqlite/retention.rs`). A job's spec JSON is written once, to
//! `job_specs`, out of the `jobs` row that every transition rewrites. A job's latest attempt
//! lives in its own row (`attempt_no`, the owner columns, `acquired_at_ms`,
//! `attempt_ended_at_ms`, `attempt_result`, `attempt_retry_delay_ms`): a lease or finish writes
//! only that row and its partial indexes, and an attempt moves to `job_attempts` only when a new lease supersedes it (a trigger). A
//! job's history is its `job_attempts` rows plus the attempt in its row; a job holds a lease
//! only while `running` (the owner columns then describe it). Several processes (CLI, workers, `serve`) may open the same file at
//! once: every transition is one `BEGIN IMMEDIATE` transaction (or one single-statement write),
//! fenced on the job's fencing token where the trait says so, so two workers can never lease
//! the same job.
//!
//! Inside one process all writes go through a single connection (a pool of one), so writers
//! queue on a cheap async semaphore instead of spinning in SQLite's busy handler; reads use a
//! small separate pool. `lease` and `finish` are group-committed: concurrent calls are served
//! by one task each, many per `BEGIN IMMEDIATE` transaction with a constant number of
//! statements (`UPDATE … FROM json_each(…)` for the finishes, one `UPDATE … WHERE seq IN
//! (SELECT … LIMIT n) RETURNING …` per worker identity for the leases). A finishing slot's next
//! lease rides in its finish's transaction, and a round of finishes without a fenced one is a
//! single command to the connection's thread (`sqlite/finish.rs`): each command is a
//! cross-thread hand-off, which cost more than the SQL itself. A `lease` call dropped while its batch is being applied may
//! leave its jobs leased to nobody; the reaper recovers them after `stale_after`. Idle [`QueueCore::lease`](crate::backend::QueueCore::lease) calls are woken by this backend's own
//! enqueue/retry/release/requeue at once and by other processes' commits through a
//! `PRAGMA data_version` poll every 1–2 ms (only while someone waits). WAL checkpoints run in a
//! background task, not inside transitions.
//!
//! Every bound `LIMIT` is written `LIMIT ?n + 0`: the bundled SQLite (3.51, STAT4) re-prepares
//! a statement whose `LIMIT` is a bare parameter at every execution (its plan may depend on the
//! bound value), which cost the lease statement a full parse and plan per batch; an expression
//! keeps the cached plan.
//!
//! One rule beyond the trait: a job whose cancellation was requested never goes back to
//! `queued`. A finish, release or reap that would re-queue it makes it `cancelled` instead.

mod broken;
mod compact;
mod conn;
mod finish;
mod key;
mod lease;
mod list;
mod output;
mod queue;
mod retention;
mod routes;
mod rows;
mod schema;
mod watch;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqlitePool, Transaction};
use tokio_util::sync::CancellationToken;

use crate::error::EngineError;
use crate::job::{
    Enqueued, Finish, Job, JobSpec, JobState, LeasedJob, WorkerIdentity, new_job_id, now_ms,
};
use conn::{
    begin_immediate, connect_retrying_busy, connect_writer, describe, is_busy, is_not_writable,
};
use rows::{attach_history, job_from_row};
use watch::Wake;

/// SQLite's busy timeout: how long a write waits for another process's transaction.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections in the read pool (`get`, `list`, due checks, …).
const READ_CONNECTIONS: u32 = 4;

/// Longest an idle `lease` sleeps between re-checks even when nothing signalled a change
/// (a safety net under the in-process notify and the `data_version` watcher).
const MAX_IDLE_RECHECK: Duration = Duration::from_secs(1);

/// The embedded queue backend: a SQLite file shared by every process of one skillforge home.
///
/// Cheap to clone (clones share connections and wake-ups). Must be opened and used inside a
/// Tokio runtime; dropping the last clone stops its `data_version` watcher task.
#[derive(Clone)]
pub struct SqliteBackend {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    /// Exactly one connection: every write of this process goes through it.
    writer: SqlitePool,
    /// Reads.
    reader: SqlitePool,
    wake: Arc<Wake>,
    /// Queue of the group-commit finish task.
    finisher: tokio::sync::mpsc::UnboundedSender<finish::FinishRequest>,
    /// Queue of the group-commit lease task.
    leaser: tokio::sync::mpsc::UnboundedSender<lease::LeaseRequest>,
    /// Set while the finish task's one-command script runs on `writer` (its release hook rolls
    /// back a script that was dropped before it ended).
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "the finish task and the pool hook hold clones; tests reach it here"
        )
    )]
    script_open: Arc<AtomicBool>,
    stop: CancellationToken,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl std::fmt::Debug for SqliteBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteBackend")
            .field("path", &self.inner.path)
            .finish()
    }
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Lease columns reset when a job stops running. The owner columns stay: from schema v2 on they
/// describe the latest attempt (see `migrations/0002_last_attempt_in_row.sql`), and a job holds
/// a lease only while `running`.
pub(super) const CLEAR_LEASE: &str = "stale_deadline_ms = NULL";

impl SqliteBackend {
    /// Opens (creating the file and its parent directory when missing) the queue database at
    /// `path`: WAL journal, `synchronous = NORMAL`, [`BUSY_TIMEOUT`], foreign keys on, schema
    /// migrated to the current version.
    ///
    /// An existing file that cannot be opened for writing (a read-only home) is opened
    /// read-only: reads work, every write fails naming the file.
    ///
    /// Errors with [`EngineError::Backend`] when the directory or file cannot be created or
    /// opened, or the schema cannot be migrated (including a file written by a newer build);
    /// with [`EngineError::Config`] for a file that is another SQLite database (tables but no
    /// queue schema version, e.g. the domain store), which is left untouched.
    pub async fn open(path: &Path) -> Result<Self, EngineError> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                EngineError::sqlite(format!(
                    "create queue directory `{}`: {e}",
                    parent.display()
                ))
            })?;
        }
        schema::refuse_foreign_file(path).await?;
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true)
            .statement_cache_capacity(256)
            // No connection checkpoints on commit (that runs the checkpoint, with its fsyncs,
            // inside whichever lease/finish/enqueue crosses the threshold): a background task
            // of every open backend checkpoints instead (`watch::spawn_checkpointer`).
            .pragma("wal_autocheckpoint", "0")
            .pragma(
                "journal_size_limit",
                skillforge_store::wal_files::JOURNAL_SIZE_LIMIT,
            );
        let open_err = |e: sqlx::Error| {
            EngineError::sqlite(format!("open queue database `{}`: {e}", path.display()))
        };
        // Set while `finish` runs its one-command script on the write connection: if that future
        // is dropped mid-script (runtime shutdown), the script's transaction may still be open
        // when the connection goes back to the pool, and is rolled back there.
        let script_open = Arc::new(AtomicBool::new(false));
        let (options, writer, read_only) = match connect_writer(&options, &script_open).await {
            Ok(writer) => (options, writer, false),
            // A home on a read-only file system: SQLite cannot open a WAL database for writing
            // (nor create its shared-memory file). Reads still work on the file as it is; every
            // write fails naming the file.
            Err(e) if is_not_writable(&e) && path.is_file() => {
                tracing::info!(path = %path.display(), error = %e, "queue file not writable: opened read-only");
                let read_only = SqliteConnectOptions::new()
                    .filename(path)
                    .read_only(true)
                    .immutable(true)
                    .busy_timeout(BUSY_TIMEOUT)
                    .foreign_keys(true)
                    .statement_cache_capacity(256);
                let writer = connect_writer(&read_only, &script_open)
                    .await
                    .map_err(open_err)?;
                (read_only, writer, true)
            }
            Err(e) => return Err(open_err(e)),
        };
        schema::migrate(&writer).await?;
        let reader = connect_retrying_busy(|| {
            SqlitePoolOptions::new()
                .after_connect(skillforge_store::wal_files::after_connect)
                .max_connections(READ_CONNECTIONS)
                .min_connections(1)
                .test_before_acquire(false)
                .acquire_timeout(BUSY_TIMEOUT * 6)
                .idle_timeout(None)
                .max_lifetime(None)
                .connect_with(options.clone())
        })
        .await
        .map_err(open_err)?;
        let wake = Arc::new(Wake::default());
        let stop = CancellationToken::new();
        if !read_only {
            watch::spawn_checkpointer(options.clone(), stop.clone());
        }
        watch::spawn_watcher(options, wake.clone(), stop.clone());
        let finisher = finish::spawn(
            writer.clone(),
            wake.clone(),
            script_open.clone(),
            path.to_owned(),
        );
        let leaser = lease::spawn(writer.clone(), path.to_owned());
        Ok(Self {
            inner: Arc::new(Inner {
                path: path.to_owned(),
                writer,
                reader,
                wake,
                finisher,
                leaser,
                script_open,
                stop,
            }),
        })
    }

    /// The database file this backend was opened on.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The schema version this build writes (`PRAGMA user_version` of an up-to-date file).
    pub fn schema_version() -> i64 {
        schema::SCHEMA_VERSION
    }

    /// Wraps a sqlx error with what was being done (`"lease from queue `q`"`), naming the
    /// file when the error is about it ([`describe`]).
    fn db<'a>(
        &'a self,
        what: impl std::fmt::Display + 'a,
    ) -> impl FnOnce(sqlx::Error) -> EngineError + 'a {
        move |e| EngineError::sqlite(describe(&self.inner.path, what, &e))
    }

    /// Starts a write transaction with `BEGIN IMMEDIATE` on the process's write connection.
    async fn begin(&self, what: &str) -> Result<Transaction<'static, Sqlite>, EngineError> {
        begin_immediate(&self.inner.writer)
            .await
            .map_err(self.db(format!("{what}: begin")))
    }

    /// Enqueues every spec in one transaction (each with the same semantics as
    /// [`QueueCore::enqueue`](crate::backend::QueueCore::enqueue), idempotency keys included), returning one [`Enqueued`] per
    /// spec in order. Errors with [`EngineError::Backend`]; then nothing was stored.
    pub async fn enqueue_batch(&self, specs: &[JobSpec]) -> Result<Vec<Enqueued>, EngineError> {
        if specs.is_empty() {
            return Ok(Vec::new());
        }
        let now = now_ms();
        let mut tx = self.begin("enqueue").await?;
        let mut out = Vec::with_capacity(specs.len());
        for spec in specs {
            out.push(self.insert_job(&mut tx, spec, now).await?);
        }
        tx.commit().await.map_err(self.db("enqueue: commit"))?;
        if out.iter().any(|e| e.created) {
            self.inner.wake.wake_all();
        }
        Ok(out)
    }

    /// `lease`, whose wait for work (never a lease in progress) ends, empty, when `stop` fires.
    async fn lease_waiting(
        &self,
        queue: &str,
        worker: &WorkerIdentity,
        max: usize,
        wait: Duration,
        stop: Option<&CancellationToken>,
    ) -> Result<Vec<LeasedJob>, EngineError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let deadline = tokio::time::Instant::now() + wait;
        let mut _waiting = None;
        loop {
            // Registered before the check, so a signal between check and sleep is not lost.
            let notified = self.inner.wake.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (leased, next_due) = self.try_lease(queue, worker, max).await?;
            let now = tokio::time::Instant::now();
            if !leased.is_empty() || now >= deadline {
                return Ok(leased);
            }
            if _waiting.is_none() {
                _waiting = Some(self.inner.wake.waiting());
            }
            let mut until = deadline.min(now + MAX_IDLE_RECHECK);
            if let Some(due) = next_due {
                let in_ms = (due - now_ms()).max(0) as u64;
                until = until.min(now + Duration::from_millis(in_ms));
            }
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep_until(until) => {}
                () = crate::backend::until_stopped(stop) => return Ok(Vec::new()),
            }
        }
    }

    /// One attempt at leasing (no waiting). Returns the leased jobs and, when none was due,
    /// the earliest `not_before_ms` of a queued job in `queue` (if any).
    async fn try_lease(
        &self,
        queue: &str,
        worker: &WorkerIdentity,
        max: usize,
    ) -> Result<(Vec<LeasedJob>, Option<i64>), EngineError> {
        let what = format!("lease from queue `{queue}`");
        // Cheap read first: spurious wake-ups never take the write lock.
        let next: Option<i64> = sqlx::query_scalar(
            "SELECT not_before_ms FROM jobs WHERE queue = ?1 AND state = 'queued' \
             ORDER BY not_before_ms, seq LIMIT 1",
        )
        .bind(queue)
        .fetch_optional(&self.inner.reader)
        .await
        .map_err(self.db(&what))?;
        let now = now_ms();
        match next {
            None => return Ok((Vec::new(), None)),
            Some(due) if due > now => return Ok((Vec::new(), Some(due))),
            Some(_) => {}
        }
        let (reply, answer) = tokio::sync::oneshot::channel();
        let request = lease::LeaseRequest {
            queue: queue.to_owned(),
            worker: worker.clone(),
            max,
            reply,
        };
        let stopped = || EngineError::sqlite(format!("{what}: the lease task stopped"));
        self.inner.leaser.send(request).map_err(|_| stopped())?;
        Ok((answer.await.map_err(|_| stopped())??, None))
    }

    /// Validates and encodes a finish and hands it to the group-commit task.
    async fn send_finish(
        &self,
        job_id: &str,
        fencing_token: u64,
        finish: &Finish,
        lease: Option<(String, WorkerIdentity)>,
    ) -> finish::Reply {
        let what = format!("finish job `{job_id}`");
        if finish.next == JobState::Running {
            return Err(EngineError::InvalidState {
                job_id: job_id.to_owned(),
                state: JobState::Running,
                message: "a finish cannot move a job to running".to_owned(),
            });
        }
        let outcome = match &finish.outcome {
            Some(o) => Some(
                compact::encode(compact::Doc::Outcome, o)
                    .map_err(|e| EngineError::sqlite(format!("{what}: encode outcome: {e}")))?,
            ),
            None => None,
        };
        let (reply, answer) = tokio::sync::oneshot::channel();
        let request = finish::FinishRequest {
            job_id: job_id.to_owned(),
            fencing_token: to_i64(fencing_token),
            next: finish.next,
            retry_delay_ms: to_i64(finish.retry_delay_ms),
            attempt_result: finish.attempt_result.clone(),
            outcome,
            error: finish.error.clone(),
            lease,
            reply,
        };
        let stopped = || EngineError::sqlite(format!("{what}: the finish task stopped"));
        self.inner.finisher.send(request).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// Runs `query` (which selects [`job_columns`]) on the read pool and attaches each job's history.
    async fn read_jobs(
        &self,
        query: sqlx::query::Query<'_, Sqlite, sqlx::sqlite::SqliteArguments>,
        what: &str,
    ) -> Result<Vec<Job>, EngineError> {
        let mut conn = self.inner.reader.acquire().await.map_err(self.db(what))?;
        let rows = query.fetch_all(&mut *conn).await.map_err(self.db(what))?;
        let mut jobs = Vec::with_capacity(rows.len());
        for row in &rows {
            jobs.push(job_from_row(row)?.0);
        }
        let mut refs: Vec<&mut Job> = jobs.iter_mut().collect();
        attach_history(&mut conn, &mut refs).await?;
        Ok(jobs)
    }

    /// The job's state inside `tx`, or [`EngineError::NotFound`].
    async fn state_of(
        &self,
        tx: &mut Transaction<'static, Sqlite>,
        job_id: &str,
        what: &str,
    ) -> Result<JobState, EngineError> {
        let state: Option<String> = sqlx::query_scalar("SELECT state FROM jobs WHERE id = ?1")
            .bind(key::Key::of(job_id))
            .fetch_optional(&mut **tx)
            .await
            .map_err(self.db(what))?;
        let state = state.ok_or_else(|| EngineError::NotFound(job_id.to_owned()))?;
        state.parse().map_err(|e: String| EngineError::Corrupt {
            job_id: job_id.to_owned(),
            message: e,
        })
    }

    /// Inserts one job (or finds the one with the same idempotency key) inside `tx`.
    async fn insert_job(
        &self,
        tx: &mut Transaction<'static, Sqlite>,
        spec: &JobSpec,
        now: i64,
    ) -> Result<Enqueued, EngineError> {
        let what = format!("enqueue on queue `{}`", spec.queue);
        let spec_json = compact::encode(compact::Doc::Spec, spec)
            .map_err(|e| EngineError::sqlite(format!("{what}: encode spec: {e}")))?;
        // A job pruned under its retention keeps its idempotency key in its tombstone.
        if let Some(key) = spec.idempotency_key.as_deref()
            && let Some(pruned) = self.pruned_with_key(tx, key, &what).await?
        {
            return Ok(Enqueued {
                job_id: pruned,
                created: false,
            });
        }
        let id = new_job_id();
        let inserted: Option<i64> = sqlx::query_scalar(
            "INSERT INTO jobs (id, queue, idempotency_key, state, max_attempts, idempotent, \
             heartbeat_ms, stale_after_ms, not_before_ms, created_at_ms, updated_at_ms) \
             VALUES (?1, ?2, ?3, 'queued', ?4, ?5, ?6, ?7, ?8, ?9, ?9) \
             ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING RETURNING seq",
        )
        .bind(key::Key::of(&id))
        .bind(&spec.queue)
        .bind(spec.idempotency_key.as_deref())
        .bind(i64::from(spec.max_attempts))
        .bind(spec.idempotent)
        .bind(to_i64(spec.heartbeat_ms))
        .bind(to_i64(spec.stale_after_ms))
        .bind(spec.not_before_ms.unwrap_or(now))
        .bind(now)
        .fetch_optional(&mut **tx)
        .await
        .map_err(self.db(&what))?;
        if let Some(seq) = inserted {
            sqlx::query("INSERT INTO job_specs (seq, spec) VALUES (?1, ?2)")
                .bind(seq)
                .bind(spec_json)
                .execute(&mut **tx)
                .await
                .map_err(self.db(&what))?;
            return Ok(Enqueued {
                job_id: id,
                created: true,
            });
        }
        let key = spec.idempotency_key.as_deref().unwrap_or_default();
        let existing: key::Key =
            sqlx::query_scalar("SELECT id FROM jobs WHERE idempotency_key = ?1")
                .bind(key)
                .fetch_one(&mut **tx)
                .await
                .map_err(self.db(format!("{what}: find job with idempotency key `{key}`")))?;
        Ok(Enqueued {
            job_id: existing.into_id(),
            created: false,
        })
    }
}
