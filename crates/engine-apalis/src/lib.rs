//! skillforge's queue backends as apalis 1.0 backends.
//!
//! TODO crate docs
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
