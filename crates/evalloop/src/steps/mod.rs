//! The forge's steps, one per file, in the order a sample takes them: [`arm`] (prepare the
//! sample's work dirs, the two arms' `agent` jobs), [`verify`] (the brief's verify in each arm's
//! work dir), [`judge`] (the pre-judge checks and the blind judge). Each builds its jobs with the
//! stage core's [`skillforge_stage::StageDef::job`] and applies its finished jobs as files
//! ([`crate::handler::EvalResultHandler`] calls the `apply_*` functions at ingestion).

pub mod arm;
pub mod judge;
pub mod verify;
