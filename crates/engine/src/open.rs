//! Opening a queue backend from a URL: the embedded SQLite default or Redis.

use std::path::Path;
use std::sync::Arc;

use crate::backend::QueueBackend;
use crate::error::EngineError;
use crate::redis::RedisBackend;
use crate::sqlite::SqliteBackend;
use crate::transfer::TransferLimits;

/// File name of the embedded queue inside `$SKILLFORGE_HOME`.
pub const QUEUE_FILE: &str = "queue.db";
/// Key prefix of skillforge's data in Redis.
pub const REDIS_NAMESPACE: &str = "skillforge";

/// Which backend a URL selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueUrl {
    /// `None` or `sqlite://PATH`: a SQLite file (default `<home>/queue.db`).
    Sqlite(std::path::PathBuf),
    /// `redis://HOST:PORT[/DB]`.
    Redis(String),
}

impl QueueUrl {
    /// Parses `url`; `None` is the embedded default under `home`.
    ///
    /// # Errors
    /// [`EngineError::Config`] for any other scheme.
    pub fn parse(url: Option<&str>, home: &Path) -> Result<Self, EngineError> {
        match url {
            None => Ok(QueueUrl::Sqlite(home.join(QUEUE_FILE))),
            Some(u) if u.starts_with("redis://") || u.starts_with("rediss://") => Ok(QueueUrl::Redis(u.to_owned())),
            Some(u) if u.starts_with("sqlite://") => match u.trim_start_matches("sqlite://") {
                "" => Err(EngineError::Config(format!("queue url `{u}` names no file (sqlite://PATH)"))),
                path => Ok(QueueUrl::Sqlite(path.into())),
            },
            Some(u) => Err(EngineError::Config(format!(
                "queue url `{u}` is neither redis://HOST:PORT[/DB] nor sqlite://PATH"
            ))),
        }
    }

    /// True for the embedded SQLite queue.
    pub fn is_embedded(&self) -> bool {
        matches!(self, QueueUrl::Sqlite(_))
    }
}

/// Opens the backend `url` selects.
///
/// # Errors
/// [`EngineError::Config`] for an unknown scheme; the backend's error when it cannot be reached.
pub async fn open_queue(url: &QueueUrl) -> Result<Arc<dyn QueueBackend>, EngineError> {
    open_queue_with(url, TransferLimits::default()).await
}

/// [`open_queue`] with the transfer area's limits (`[queue] transfer_ttl_secs`,
/// `transfer_max_mb`; they matter where content is staged: the control plane).
///
/// # Errors
/// As [`open_queue`].
pub async fn open_queue_with(url: &QueueUrl, limits: TransferLimits) -> Result<Arc<dyn QueueBackend>, EngineError> {
    Ok(match url {
        QueueUrl::Sqlite(path) => Arc::new(SqliteBackend::open(path).await?),
        QueueUrl::Redis(u) => Arc::new(RedisBackend::connect(u, REDIS_NAMESPACE).await?.with_transfer_limits(limits)),
    })
}
