//! skillforge's job engine: durable jobs with per-job leases, heartbeats, fencing tokens and stale recovery.
//!
//! * [`job`]: the envelope, states, leases (DESIGN §4).
//! * [`backend`]: the [`QueueBackend`] trait; [`sqlite`] (embedded default) and [`redis`] (fleets).
//! * [`policy`]: attempts, backoff with jitter, what a stale lease becomes — one place for both backends.

pub mod backend;
pub mod error;
pub mod job;
pub mod policy;
pub mod redis;
pub mod sqlite;

pub use backend::{QueueBackend, ReapAction};
pub use error::EngineError;
pub use job::*;
