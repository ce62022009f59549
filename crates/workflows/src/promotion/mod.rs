//! Deciding what becomes current on evidence (seed: SkillOpt, "Promotion policy + notifications
//! (off by default)"; facts §7; S-51..S-63; resolutions 6..8).
//!
//! * [`auto_promote`]: the guardrails in the facts' order; fail-safe to notify-only (pure).
//! * [`canary`]: canary routing and the regression window (pure).
//! * [`events`]: typed, redacted events and the JSONL, Redis stream and webhook sinks.
//!
//! **Architecture Invariant:** importing never promotes (S-51): auto-promote runs after an import
//! has returned, and every promotion goes through `skillforge_store::candidates::promote_candidate`.

pub mod auto_promote;
pub mod canary;
pub mod events;
