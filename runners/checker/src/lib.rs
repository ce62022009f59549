//! The checker runner: deterministic quality dimensions normalized to [0,1].
//!
//! Seed: SkillOpt, "Deterministic checker objective signal"; facts §5; resolutions §8–§9.
//! `diff_size` counts changed `+`/`-` hunk lines and files of a unified diff (pure Rust, always
//! available); `duplication`, `lint` and `complexity` run external tools chosen by per-language
//! profiles (`runners/checker/tools/*.toml`) on a copy of the head commit's tree. Each dimension
//! is normalized to [0,1] (higher is better) or skipped with its reason; the report's `mean` is
//! over the scored dimensions and `None` when all are skipped.
//!
//! Entry points: [`CheckerRunner`] (job kind `checker`), [`check`] (one check in-process),
//! [`run_checks`] (over an already parsed diff), [`parse_unified_diff`], [`diff_between`].
//!
//! Everything that reads repositories or runs tools sits behind the default feature `exec`;
//! without it the crate is [`CheckerPayload`] (a [`skillforge_runner::RunnerPayload`]), the
//! checker names, diff parsing, profiles and [`CheckReport`] (no git2).

#[cfg(feature = "exec")]
mod check;
mod checker;
mod count;
mod diff;
mod error;
#[cfg(feature = "exec")]
mod git;
mod normalize;
mod payload;
mod profile;
mod report;
#[cfg(feature = "exec")]
mod runner;

#[cfg(feature = "exec")]
pub use check::{
    CheckConfig, TOOL_MAX_OUTPUT_BYTES, Workspace, detect_languages, diff_size_dimension,
    run_checks,
};
pub use checker::{ALL_CHECKERS, Checker, DEFAULT_CHECKERS, parse_checker_list};
pub use count::{CountSpec, Filter, FilterOp};
pub use diff::{ChangedFile, DiffStats, parse_unified_diff};
pub use error::CheckerError;
#[cfg(feature = "exec")]
pub use git::{diff_between, diff_text_between, export_tree};
pub use normalize::{DIFF_SIZE_SOFT_CAP_LINES, DIFF_SIZE_ZERO_AT_LINES, DiffSizeConfig, Normalize};
pub use payload::CheckerPayload;
pub use profile::{DimensionProfile, LanguageProfile, PROFILE_SOURCES, ToolSpec, shipped_profiles};
pub use report::{CheckReport, DimensionResult};
#[cfg(feature = "exec")]
pub use runner::{CANCEL_SIGNAL, CheckerRunner, check};
