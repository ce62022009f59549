//! `skillforge optimizer distill`, the built-in reference optimizer: deterministic, no model.
//! It reads a training package (seed: SkillOpt, "Training Package"; facts §1) and writes a
//! candidate package (seed "Candidate Package"; facts §2) with the external optimizer's command
//! line and output layout (facts §9), so it is a drop-in optimizer backend.
//!
//! Pipeline, one module per step:
//! 1. [`evidence`]: required improvements, rejected/useful traits, A/B reasoning, evaluator
//!    optimizer hints and failed checks, BINEVAL `no` verdicts → [`Evidence`] items;
//! 2. [`tier`]: each item weighted by its tier, human gold > verifiable floor > judge;
//! 3. [`guidance`]: items merged per normalised line, support counted, most supported first;
//! 4. [`prior`]: the lines merged with those the template's section already carries (the
//!    evidence of earlier runs, support per tier), contradictions settled by weight;
//! 5. [`section`]: the lines rendered as the `## Guidance from review evidence` section, which
//!    replaces the previous one in the template body (frontmatter untouched);
//! 6. [`run`]: [`plan`] decides candidate vs no candidate, [`distill`] writes the files.
//!
//! **API Boundary**: [`distill`] is what the train workflow calls in-process; the CLI command is
//! a thin wrapper that adds argument parsing and exit codes.

pub mod evidence;
pub mod guidance;
pub mod heldout;
pub mod hint;
pub mod prior;
pub mod run;
pub mod section;
pub mod tier;

pub use evidence::{
    Evidence, EvidenceOrigin, GatheredEvidence, GuidanceKind, SourceCounts, gather_evidence,
};
pub use guidance::{GuidanceLine, Support, rank_guidance};
pub use hint::{LEARNED_FIELDS, no_actionable_hint};
pub use run::{
    CANDIDATE_CONTENT_UNCHANGED, DEFAULT_MAX_GUIDANCE_LINES, DistillConfig, DistillError,
    DistillOutput, DistillPlan, DistillReport, EvidenceCounts, NO_ACTIONABLE_FEEDBACK,
    OPTIMIZER_NAME, distill, load_training_package, plan,
};
pub use section::{GUIDANCE_HEADING, apply_section, render_section};
pub use tier::{EvidenceTier, classify_tier};

#[cfg(test)]
pub(crate) mod fixtures;
