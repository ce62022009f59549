//! The stage core every workflow family uses: stage definitions as data ([`def`]:
//! `workflows/<family>.toml` with `<home>` overrides), one job builder ([`StageDef::job`]) and one
//! port to run jobs ([`jobs::StageJobs`], implemented once by the CLI); [`repo`]: a job's repository
//! as a fetchable URL or a bundle for a fleet that does not share this disk; [`files`]: a job's
//! work dirs sent by content and delivered back on such a fleet; [`family`]: the workflow family
//! as a type and the ingestion dispatcher; [`progress`]: the one progress trait; [`judge_reply`]:
//! the verdict object of a judge's free-text reply; [`fs`] and [`git`]: the control plane's one
//! atomic write, content hash and git wrapper.

pub mod def;
pub mod family;
pub mod files;
pub mod fs;
pub mod git;
pub mod job;
pub mod jobs;
pub mod judge_reply;
pub mod lost;
pub mod progress;
pub mod repo;

pub use def::{NoSections, Sections, StageDef, StageSource, StagesError, WorkflowDef};
pub use family::{Families, Family, HandlerEnv};
pub use jobs::{Ran, StageJobs, Wait, record_pending, run_jobs, submit_recorded, wait_for};
pub use lost::{LostWork, Resubmitted, lost_work, resubmit_lost};
pub use progress::Progress;
