//! The queue backend traits: a fenced job state machine that both the SQLite and Redis backends
//! implement, as a small core and capability traits.
//!
//! Backends are deliberately dumb: they store jobs and apply transitions atomically, fenced on
//! the lease's token. Every policy (attempt counting, backoff with jitter, what a stale lease
//! becomes) is decided once in the engine (`policy`), so both backends behave identically.
//!
//! | trait | for | methods |
//! |---|---|---|
//! | [`QueueCore`] | submitters and workers: run a job once | `name`, `enqueue`, `lease`, `lease_or_stop`, `heartbeat`, `finish`, `finish_and_lease`, `release`, `get`, `now_ms` |
//! | [`QueueControl`] | operators: `jobs cancel/retry/list`, `locks` | `cancel`, `retry`, `retry_with_payload`, `fail_queued`, `list`, `leases`, `counts` |
//! | [`QueueChanges`] | waiters: wake on a change instead of polling | `change_seq`, `changed_since`, `changed_here_since` |
//! | [`QueueResults`] | ingestion: results to apply exactly once | `pending_results`, `pending_results_skipping`, `ack_result` |
//! | [`QueueOutput`] | live output (`jobs logs --follow`) | `append_output`, `read_output`, `output_since`, `trim_output` |
//! | [`QueueRecovery`] | the reaper: expired job leases | `expired_leases`, `reap`, `reap_unchanged`, `clock_is_shared` |
//! | [`QueueLocks`] | named locks (presence, lock-holding jobs, sessions) | `acquire_lock`, `renew_lock`, `release_lock`, `reap_locks`, `reap_lock` |
//! | [`QueueRetention`] | pruning finished jobs, tombstones | `prune`, `prune_count`, `tombstone` |
//! | [`QueueRoutes`] | labelled queues a worker leases from | `routes`, `queued_on` |
//! | [`QueueTransfer`] | a job's files: shared disk or transfer area | `transfer_area`, `shares_disk` |
//! | [`QueueIntegrity`] | data loss, unsafe settings, unreadable records | `check_namespace`, `namespace_epoch`, `check_settings`, `list_readable`, `quarantined`, `quarantine`, `purge` |
//! | [`QueueMetrics`] | `/metrics`: counters kept as jobs change state | `metrics` |
//!
//! Every capability has [`QueueCore`] as a supertrait; [`QueueBackend`] is all of them at once,
//! implemented for every type that implements each, and is what the engine's parts hold
//! (`Arc<dyn QueueBackend>`). Calling a method on a `dyn QueueBackend` (or through a generic
//! `B: QueueBackend`) needs no import; calling one on a concrete backend (`SqliteBackend`,
//! `RedisBackend`) needs its trait in scope: `use skillforge_engine::backend::prelude::*;`.
//! A capability's defaults are the answers of a backend without it (most are those of the
//! embedded queue), so a backend implements only what it has.

mod batch;
mod changes;
mod control;
mod core;
mod integrity;
mod locks;
mod metrics;
mod output;
mod recovery;
mod results;
mod retention;
mod routes;
mod transfer;

pub(crate) use self::batch::{collect_batch, until_stopped};
pub use self::changes::QueueChanges;
pub use self::control::{JobCounts, QueueControl};
pub use self::core::QueueCore;
pub use self::integrity::{NamespaceLoss, QueueIntegrity, UnreadableRecord, UnsafeSetting};
pub use self::locks::QueueLocks;
pub use self::metrics::QueueMetrics;
pub use self::output::QueueOutput;
pub use self::recovery::{QueueRecovery, ReapAction};
pub use self::results::QueueResults;
pub use self::retention::QueueRetention;
pub use self::routes::QueueRoutes;
pub use self::transfer::QueueTransfer;

/// A complete job queue: the [`QueueCore`] with every capability. This is the type the engine's
/// parts (worker, reaper, ingestion, retention) and the control plane hold, as
/// `Arc<dyn QueueBackend>`; it has no methods of its own and is implemented for every type that
/// implements all its supertraits, so a backend implements the traits one by one and never this.
pub trait QueueBackend:
    QueueCore
    + QueueControl
    + QueueChanges
    + QueueResults
    + QueueOutput
    + QueueRecovery
    + QueueLocks
    + QueueRetention
    + QueueRoutes
    + QueueTransfer
    + QueueIntegrity
    + QueueMetrics
{
}

impl<T> QueueBackend for T where
    T: QueueCore
        + QueueControl
        + QueueChanges
        + QueueResults
        + QueueOutput
        + QueueRecovery
        + QueueLocks
        + QueueRetention
        + QueueRoutes
        + QueueTransfer
        + QueueIntegrity
        + QueueMetrics
{
}

/// Every queue trait, for code that calls queue methods on a concrete backend or implements
/// one: `use skillforge_engine::backend::prelude::*;`.
pub mod prelude {
    pub use super::{
        QueueBackend, QueueChanges, QueueControl, QueueCore, QueueIntegrity, QueueLocks,
        QueueMetrics, QueueOutput, QueueRecovery, QueueResults, QueueRetention, QueueRoutes,
        QueueTransfer,
    };
}
