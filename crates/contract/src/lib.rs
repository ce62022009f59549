//! skillforge wire formats: what crosses a process boundary, with its validation (DESIGN §7).
//!
//! Pure and synchronous: parsing, validation and projection only; the one exception is
//! [`validate_candidate_import`], which reads the candidate's artifact files to verify them.
//!
//! * Training package ([`TrainingPackage`], [`serialize_package`], [`validate_training_package`]).
//! * Candidate package ([`CandidatePackage`], [`validate_candidate_import`]).
//! * Artifact drivers and what the optimizer's data loader refuses ([`driver_for_media_type`], [`loader_warnings`]).
//! * Agent templates ([`parse_template`], [`Metadata`]).
//! * Markdown feedback packet ([`Assignments`], [`FeedbackFile`], [`resolve_feedback`]).
//! * Pairwise review packet ([`PairwiseReviewPacket`], [`unblind_pairwise`]).
//! * Rankings ([`parse_ranking`], [`derive_pairwise`]) and the signal projection ([`project_signal`]).
//! * Parser limits for what users hand in ([`limits`]: size and nesting depth).
//! * The anytime-valid promotion gate PACE ([`pace`]: its e-process and report).
//! * JSON Schemas of the wire types ([`schema::all`]), checked into `docs/schemas/`.

mod candidate;
mod driver;
mod evaluator;
mod feedback_packet;
mod gojson;
mod hash;
mod import;
pub mod limits;
mod omit;
pub mod pace;
mod pairwise_packet;
mod ranking;
mod scalar;
pub mod schema;
pub mod shape;
mod signal;
mod template;
mod training;
mod validate;

pub use candidate::*;
pub use driver::*;
pub use evaluator::*;
pub use feedback_packet::*;
pub use gojson::{serialize_package, to_go_json_compact, to_go_json_pretty};
pub use hash::*;
pub use import::*;
pub use pairwise_packet::*;
pub use ranking::*;
pub use signal::*;
pub use template::*;
pub use training::*;
pub use validate::*;
