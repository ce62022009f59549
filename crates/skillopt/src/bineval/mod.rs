//! BINEVAL binary evaluation and its lessons (seed: SkillOpt, "Binary evaluation (BINEVAL, off by
//! default)", "Binary-disagreement lessons (#527)"; S-42..S-50).
//!
//! * [`set`]: question sets (YAML or JSON), validated with errors naming file and question.
//! * [`aggregate`]: the deterministic runner, the reviewer prompt and reply, weighted scores.
//! * [`lessons`]: flip / stable no / stable yes across runs, and the synthetic lesson events.
//!
//! **Architecture Invariant:** nothing here runs unless a `binary` command is invoked (S-46).

pub mod aggregate;
pub mod lessons;
pub mod set;

/// What can go wrong reading a question set.
#[derive(Debug, thiserror::Error)]
pub enum BinevalError {
    /// The file could not be read.
    #[error("read question set `{path}`: {message}")]
    Read {
        /// The path given.
        path: String,
        /// The I/O error.
        message: String,
    },
    /// The set does not parse or breaks a rule.
    #[error("invalid question set `{file}`: {message}")]
    Set {
        /// The file.
        file: String,
        /// What is wrong, naming the question or dimension.
        message: String,
    },
}
