//! skillforge's queue backends as apalis 1.0 backends: an apalis application (its
//! `WorkerBuilder`, `Monitor` and layers) consumes skillforge queues with skillforge's guarantees.
//!
//! [`SkillforgeBackend<Args>`] wraps any [`skillforge_engine::QueueBackend`] (the SQLite file or
//! Redis, as [`skillforge_engine::open::open_queue`] opens them) plus a queue name and
//! [`SkillforgeOptions`], and implements apalis-core's `Backend` + `BackendConfig` (and, through
//! apalis's blanket impl over its `Sink`, `TaskSink`).
//!
//! # Arguments and context
//!
//! `Args` is any serde type; it travels as the job's JSON `payload` (`JobSpec::payload`), so a
//! job pushed by another language or by `skillforge jobs submit` with the same JSON shape is
//! consumed the same way. Jobs pushed through the adapter get [`SkillforgeOptions::template`]
//! (runner kind [`APALIS_KIND`]; keep apalis jobs on queues of their own). Each task carries a
//! [`JobLease`] — job id, fencing token, attempt, worker identity — which a handler takes as an
//! argument. A leased job whose payload does not decode as `Args`, or that names `locks`, is
//! failed at once (no retry) with the reason; the worker carries on.
//!
//! # Guarantees (the same as under `skillforge worker`, DESIGN §4)
//!
//! * **Per-job lease, per-job heartbeat.** A job is leased to `<apalis worker name>-<8 hex>`
//!   (unique per process, host and pid recorded); its lease is renewed every `heartbeat_ms` of
//!   its spec by a task of its own from the moment it is leased, whatever the handler does, so a
//!   long handler is never taken for dead and a dead process's job goes stale after
//!   `stale_after_ms` and is recovered by the reaper (each adapter worker runs one by default).
//! * **Fencing.** Every finish carries its lease's fencing token; a superseded lease's result is
//!   rejected by the queue, logged, and counted in [`AdapterReport::fenced`].
//! * **Attempts are the engine's.** `Ok` ⇒ `succeeded`; `Err` (or panic, or `timeout_ms`
//!   elapsed) ⇒ `queued` with the engine's exponential backoff, `dead` after `max_attempts`
//!   (`failed` at once with `retry_failed_runs = false` or an apalis `AbortError`). Do **not** add
//!   apalis's retry layer: it would re-run the handler inside one lease and one attempt.
//! * **Cancellation.** `skillforge jobs cancel ID` reaches the worker at the job's next heartbeat;
//!   the handler's future is dropped (aborted) and the job ends `cancelled`. A lost lease aborts
//!   the handler the same way.
//! * **No busy polling, bounded leasing.** Leasing waits on the queue's own wake-up (an enqueue
//!   wakes an idle worker at once); at most [`SkillforgeOptions::concurrency`] jobs are leased and
//!   unfinished per worker, so jobs held behind an apalis concurrency layer still heartbeat.
//! * **Presence and hand-back.** While polled, a worker holds `worker:<id>` like `skillforge
//!   worker` (visible in `skillforge locks`). When apalis closes the backend, jobs leased but not
//!   started are handed back at once (attempt refunded); a task dropped before it finished (e.g.
//!   the `Monitor`'s shutdown timeout) is handed back too, rather than left to go stale. That
//!   hand-back runs as a task spawned on the tokio runtime when the task is dropped, so await
//!   [`SkillforgeBackend::settle`] after the `Monitor` returns: a process that exits before its
//!   hand-backs reached the queue leaves those jobs `running` until they go stale (then the
//!   reaper recovers them).
//!
//! # Why `skillforge worker` keeps its own loop
//!
//! The adapter gives apalis users the guarantees above, but the engine's own worker stays the
//! fast path of the CLI, for three things apalis's `Backend` shape cannot express:
//!
//! * **Finish and lease in one call.** A finishing worker slot sends its result and takes its next
//!   job in one transaction / one script call (`QueueBackend::finish_and_lease`). In apalis the
//!   backend yields tasks and the middleware sees results, on separate paths, so the adapter pays
//!   a `finish` and, separately, a `lease` per job.
//! * **Group commit.** The backends batch concurrent requests into one transaction (SQLite) or
//!   one script call (Redis); `skillforge worker`'s slots feed those batches with combined
//!   finish-and-lease requests. The adapter's finishes are still batched, but its leases are one
//!   call per poll round, so it gets fewer, smaller batches per job.
//! * **Graceful hand-back.** On SIGTERM the worker stops leasing, lets running jobs finish within a
//!   grace period, then kills their runners' process groups and hands their leases back at once
//!   (attempt refunded). apalis's shutdown waits for in-flight handlers (or drops them after the
//!   `Monitor`'s timeout); the adapter hands back what it can (unstarted and dropped tasks) but
//!   runs closures, not runners, so there is no process group to kill. The worker also owns the
//!   runner registry, named locks (`JobSpec::locks`) and scratch dirs.
//!
//! # Example
//!
//! ```no_run
//! use apalis_core::backend::TaskSink;
//! use apalis_core::error::BoxDynError;
//! use apalis_core::monitor::Monitor;
//! use apalis_core::worker::builder::WorkerBuilder;
//! use skillforge_engine::open::{QueueUrl, open_queue};
//! use skillforge_engine_apalis::{JobLease, SkillforgeBackend, SkillforgeOptions};
//!
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct Email { to: String }
//!
//! async fn send(email: Email, lease: JobLease) -> Result<(), BoxDynError> {
//!     tracing::info!(job_id = %lease.job_id, attempt = lease.attempt, to = %email.to, "sending");
//!     Ok(()) // Err ⇒ retried with the engine's backoff, `dead` after 5 attempts
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let queue = open_queue(&QueueUrl::Redis("redis://127.0.0.1:6379".into())).await?;
//! let options = SkillforgeOptions::new("emails").max_attempts(5).concurrency(8);
//! let backend = SkillforgeBackend::<Email>::new(queue, options);
//! backend.clone().push(Email { to: "ops@example.org".into() }).await?;
//! let worker_backend = backend.clone();
//! Monitor::new()
//!     .register(move |_| WorkerBuilder::new("mailer").backend(worker_backend.clone()).build(send))
//!     .run_with_signal(tokio::signal::ctrl_c())
//!     .await?;
//! backend.settle().await; // hand-backs of tasks the shutdown dropped reach the queue
//! # Ok(())
//! # }
//! ```
//!
//! Polling needs a tokio runtime (the adapter spawns its lease calls and heartbeats on it).

mod backend;
mod error;
mod layer;
mod lease;
mod options;
mod presence;

pub use backend::SkillforgeBackend;
pub use error::AdapterError;
pub use layer::{LeaseLayer, LeaseService};
pub use lease::{AdapterReport, JobLease, MissingLease};
pub use options::{APALIS_KIND, DEFAULT_CONCURRENCY, DEFAULT_POLL_WAIT, SkillforgeOptions};
