//! Deciding what becomes current on evidence (seed: SkillOpt, "Promotion policy + notifications
//! (off by default)"; facts §7; S-51..S-63; resolutions 6..8).
//!
//! * [`auto_promote`]: the guardrails in the facts' order; fail-safe to notify-only (pure).
//! * [`canary`]: canary routing and the regression window (pure).
//! * [`resolve`]: the one function deciding which version a job runs (canary routing).
//! * [`seam`]: the notify / auto-promote step every candidate import goes through.
//! * [`reevaluate`]: the seam again for every pending candidate whose evidence changed (`serve`).
//! * [`window`]: the canary's graduate / roll-back decisions as durable jobs and their handler.
//! * [`notify`]: the step environment and event emission; [`events`]: typed, redacted events and
//!   the JSONL, Redis stream and webhook sinks; [`stages`]: `workflows/promotion.toml`.
//!
//! **Architecture Invariant:** importing never promotes (S-51): auto-promote runs after an import
//! has returned, and every promotion goes through the candidate machinery of
//! `skillforge_store::candidates` (`promote_candidate`, or `promote_candidate_in` inside a canary
//! decision job's ingestion).

pub mod auto_promote;
pub mod canary;
pub mod events;
pub mod notify;
pub mod reevaluate;
pub mod resolve;
pub mod seam;
pub mod stages;
pub mod window;
