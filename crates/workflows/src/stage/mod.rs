//! The stage core every workflow family uses: stage definitions as data ([`def`]:
//! `workflows/<family>.toml` with `<home>` overrides), one job builder ([`StageDef::job`]) and one
//! port to run jobs ([`jobs::StageJobs`], implemented once by the CLI).

pub mod def;
pub mod job;
pub mod jobs;
pub mod lost;

pub use def::{NoSections, Sections, StageDef, StageSource, StagesError, WorkflowDef};
pub use lost::{LostWork, lost_work};
pub use jobs::{Ran, StageJobs, Wait, record_pending, run_jobs, submit_recorded, wait_for};
