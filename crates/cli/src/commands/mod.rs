//! One module per command group.

pub mod check;
pub mod jobs;
pub mod locks;
pub mod serve;
pub mod signals;
pub mod verify;
pub mod wait;
pub mod worker;
