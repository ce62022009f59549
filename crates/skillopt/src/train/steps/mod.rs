//! The train steps, one per file; each moves the current iteration one stage (or applies a
//! decision) and reports what it did. [`super::control::continue_session`] maps the iteration's
//! state to its step.

pub mod decide;
pub mod evaluate;
pub mod generate;
pub mod github;
pub mod optimize;
pub mod recover;
pub mod review;
pub mod start;
