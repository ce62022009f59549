//! The checker crate's one error enum.
//!
//! A skipped dimension is not an error: a missing tool, a tool error or a timeout becomes a
//! [`crate::DimensionResult`] with `skipped` set. `Err` means the check could not run at all
//! (bad diff input, unreadable repository, unknown checker name, broken profile).

/// Errors from parsing diffs, reading repositories, loading profiles or running a check.
#[derive(Debug, thiserror::Error)]
pub enum CheckerError {
    /// The unified diff text could not be parsed.
    #[error("parse unified diff at line {line}: {message}")]
    Diff {
        /// 1-based line number in the diff text.
        line: usize,
        /// What was wrong.
        message: String,
    },
    /// A git operation on the repository failed (feature `exec`).
    #[cfg(feature = "exec")]
    #[error("{context}: {source}")]
    Git {
        /// What was being done, e.g. ``resolve revision `main` in `/repo` ``.
        context: String,
        /// The underlying libgit2 error.
        #[source]
        source: git2::Error,
    },
    /// Writing the head checkout or reading a tool report failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, e.g. ``write checkout file `/tmp/x/src/lib.rs` ``.
        context: String,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A language profile under `runners/checker/tools/` did not parse or is inconsistent.
    #[error("load checker profile `{file}`: {message}")]
    Profile {
        /// The profile file name, e.g. `python.toml`.
        file: String,
        /// What was wrong.
        message: String,
    },
    /// The check request is incomplete or contradictory.
    #[error("invalid check request: {0}")]
    InvalidRequest(String),
    /// A checker name in the request is not one of [`crate::ALL_CHECKERS`].
    #[error("unknown checker `{0}` (known: diff_size, duplication, lint, complexity)")]
    UnknownChecker(String),
}
