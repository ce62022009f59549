//! One module per command group.

pub mod ab;
pub mod ask;
pub mod binary;
pub mod candidate;
pub mod check;
pub mod demo;
pub mod doctor;
pub mod eval;
pub mod export;
pub mod feedback;
pub mod harvest;
pub mod import;
pub mod init;
pub mod jobs;
pub mod live_ab;
pub mod locks;
pub mod optimize;
pub mod optimizer;
pub mod pairwise;
pub mod review;
pub mod schema;
pub mod serve;
pub mod template;
pub mod train;
pub mod verify;
pub mod worker;
