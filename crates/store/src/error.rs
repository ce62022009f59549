//! The store's error type.

use std::path::PathBuf;

/// Errors of the domain store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database file could not be opened or created.
    #[error("open store `{path}`: {message}")]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// A migration failed.
    #[error("migrate store: {0}")]
    Migrate(String),
    /// A query failed.
    #[error("store query: {0}")]
    Sql(#[from] sqlx::Error),
}
