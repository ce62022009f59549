//! skillforge's job engine: durable jobs with per-job leases, heartbeats, fencing tokens and stale recovery.
//!
//! * [`job`]: the envelope, states, leases (DESIGN §4).
//! * [`backend`]: the [`QueueBackend`] trait, a small core ([`backend::QueueCore`]) plus capability
//!   traits (control, changes, results, output, recovery, locks, retention, routes, transfer,
//!   integrity); [`sqlite`] (embedded default) and [`redis`] (fleets), opened from a URL by [`open`].
//! * [`policy`]: attempts, backoff with jitter, what a stale lease becomes — one place for both backends.
//! * [`worker`]: the lease → run → heartbeat → fenced result loop; [`reaper`]: stale recovery;
//!   [`ingest`]: exactly-once application of results to the domain store; [`retention`]: how
//!   long finished jobs are kept and the bounded pruning passes; [`output`]: live output of
//!   running jobs (`jobs logs --follow`).
//! * [`labels`]: worker labels, job label requirements and the routes between them;
//!   [`placement`]: the deadline after which a job no live worker can take fails.
//! * [`transfer`]: a job's files by content through the queue (inputs, uploaded outputs).
//! * [`metrics`]: the counters the queue keeps for `/metrics`.
//! * [`redact`]: credentials out of URLs in anything shown or logged.

pub mod backend;
mod changes;
pub mod error;
pub mod health;
pub mod ingest;
pub mod job;
pub mod labels;
pub mod metrics;
pub mod open;
pub mod output;
pub mod placement;
pub mod policy;
pub mod reaper;
pub mod redact;
pub mod redis;
pub mod registry;
pub mod retention;
pub mod sqlite;
pub mod telemetry;
pub mod transfer;
pub mod worker;

pub use backend::{
    JobCounts, NamespaceLoss, QueueBackend, ReapAction, UnreadableRecord, UnsafeSetting,
};
pub use error::EngineError;
pub use job::*;
pub use registry::RunnerRegistry;
