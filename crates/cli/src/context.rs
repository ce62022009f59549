//! What every command needs: the home directory, configuration, queue URL and output mode.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use skillforge_engine::open::{QueueOptions, QueueUrl, open_queue_with};
use skillforge_engine::{EngineError, QueueBackend};
use skillforge_store::Store;

use crate::config::{Config, resolve_home};
use crate::exit::CliError;

/// Resolved global settings of one invocation.
#[derive(Debug)]
pub struct Context {
    /// The home directory.
    pub home: PathBuf,
    /// `config.toml` of the home.
    pub config: Config,
    /// Which queue backend.
    pub queue_url: QueueUrl,
    /// `--json`.
    pub json: bool,
    /// The transfer limits and the Redis password given apart from the URL (never shown).
    queue_options: QueueOptions,
    /// The domain store, opened on first use and shared by every later `store()` call of this
    /// invocation: one open (and one migration check), and no checkpoint-and-reopen in between.
    store: tokio::sync::OnceCell<Store>,
}

impl Context {
    /// Resolves home, config and queue URL (`--queue` over `[queue] url` over the embedded default).
    ///
    /// For a Redis queue, the password given apart from the URL is read here
    /// (`SKILLFORGE_QUEUE_PASSWORD`, else `[queue] password_file`) and registered for redaction.
    ///
    /// # Errors
    /// Exit 2 for an invalid config file or queue URL, or an unreadable password file; exit 3 when a relative home cannot be
    /// resolved (no current directory).
    pub fn new(home: Option<PathBuf>, queue: Option<String>, json: bool) -> Result<Self, CliError> {
        let home = resolve_home(home)?;
        let config = Config::load(&home).map_err(CliError::usage)?;
        let url = queue.or_else(|| config.queue.url.clone());
        let queue_url = QueueUrl::parse(url.as_deref(), &home).map_err(CliError::usage)?;
        let password = match &queue_url {
            QueueUrl::Redis(_) => config.queue.password(&home)?,
            QueueUrl::Sqlite(_) => None,
        };
        if let Some(password) = &password {
            crate::control::redact::register_secret(password);
        }
        let queue_options = QueueOptions {
            limits: config.queue.transfer_limits(),
            password,
        };
        crate::runners::configure(&config);
        Ok(Self {
            home,
            config,
            queue_url,
            json,
            queue_options,
            store: tokio::sync::OnceCell::new(),
        })
    }

    /// Opens the queue backend.
    ///
    /// # Errors
    /// Exit 3 when the queue cannot be opened or reached.
    pub async fn queue(&self) -> Result<Arc<dyn QueueBackend>, CliError> {
        std::fs::create_dir_all(&self.home)
            .with_context(|| format!("create home `{}`", self.home.display()))
            .map_err(CliError::env)?;
        open_queue_with(&self.queue_url, &self.queue_options).await.map_err(|e| match e {
            // A URL that does not parse is the user's input (exit 2), not the environment.
            EngineError::Config(_) => CliError::usage(anyhow::Error::new(e).context("open the job queue")),
            // Each backend its own hint: the embedded queue is a file of the home.
            other => CliError::env(anyhow::Error::new(other).context(match &self.queue_url {
                QueueUrl::Redis(_) => "open the job queue (is the Redis URL right and the server up?)".to_owned(),
                QueueUrl::Sqlite(path) => format!(
                    "open the embedded job queue `{}` (is the home writable, the disk not full, the file not damaged?)",
                    path.display()
                ),
            })),
        })
    }

    /// Opens the queue backend for a process that writes jobs or runs them (`worker`, `serve`,
    /// `jobs submit`): also refuses a queue server whose settings lose jobs
    /// (`QueueBackend::check_settings`: Redis `maxmemory-policy` other than `noeviction`).
    ///
    /// # Errors
    /// As [`Context::queue`]; exit 3 naming the setting, its value and how to fix it.
    pub async fn queue_checked(&self) -> Result<Arc<dyn QueueBackend>, CliError> {
        let backend = self.queue().await?;
        if let Some(problem) = backend.check_settings().await.map_err(|e| {
            CliError::env(anyhow::Error::new(e).context("check the queue server's settings"))
        })? {
            return Err(CliError::env(anyhow::anyhow!(
                "refusing to use the queue: {problem}"
            )));
        }
        Ok(backend)
    }

    /// Opens the domain store, once per invocation: later calls return a handle to the same pool
    /// (a failed open is not remembered, so a later call tries again).
    ///
    /// # Errors
    /// Exit 3 when the store cannot be opened.
    pub async fn store(&self) -> Result<Store, CliError> {
        let file = self.home.join(skillforge_store::DB_FILE);
        self.store
            .get_or_try_init(|| Store::open(&self.home))
            .await
            .cloned()
            .with_context(|| format!("open the store `{}`", file.display()))
            .map_err(CliError::env)
    }

    /// Directory under which workers create per-attempt scratch dirs.
    pub fn scratch_root(&self) -> PathBuf {
        self.home.join("scratch")
    }
}
