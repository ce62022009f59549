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
            Some(u) if u.starts_with("redis://") || u.starts_with("rediss://") => {
                Ok(QueueUrl::Redis(u.to_owned()))
            }
            Some(u) if u.starts_with("sqlite://") => match u.trim_start_matches("sqlite://") {
                "" => Err(EngineError::Config(format!(
                    "queue url `{u}` names no file (sqlite://PATH)"
                ))),
                path => Ok(QueueUrl::Sqlite(path.into())),
            },
            Some(u) => Err(EngineError::Config(format!(
                "queue url `{u}` is neither redis://HOST:PORT[/DB] (rediss:// for TLS) nor sqlite://PATH"
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
    open_queue_with(url, &QueueOptions::default()).await
}

/// How to open a queue beyond its URL.
#[derive(Clone, Default)]
pub struct QueueOptions {
    /// The transfer area's limits (`[queue] transfer_ttl_secs`, `transfer_max_mb`; they matter
    /// where content is staged: the control plane).
    pub limits: TransferLimits,
    /// The Redis password given apart from the URL (`SKILLFORGE_QUEUE_PASSWORD`, `[queue]
    /// password_file`); ignored by the embedded queue. Never shown by `Debug`.
    pub password: Option<String>,
}

impl std::fmt::Debug for QueueOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueOptions")
            .field("limits", &self.limits)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .finish()
    }
}

/// [`open_queue`] with [`QueueOptions`].
///
/// # Errors
/// As [`open_queue`]; [`EngineError::Config`] also when a Redis URL carries a password and
/// `options.password` gives one too.
pub async fn open_queue_with(
    url: &QueueUrl,
    options: &QueueOptions,
) -> Result<Arc<dyn QueueBackend>, EngineError> {
    Ok(match url {
        QueueUrl::Sqlite(path) => Arc::new(SqliteBackend::open(path).await?),
        QueueUrl::Redis(u) => Arc::new(
            RedisBackend::connect_with_password(u, REDIS_NAMESPACE, options.password.as_deref())
                .await?
                .with_transfer_limits(options.limits),
        ),
    })
}
