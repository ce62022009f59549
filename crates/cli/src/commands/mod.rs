//! One module per command group.

pub mod jobs;
pub mod locks;
pub mod serve;
pub mod signals;
pub mod worker;
