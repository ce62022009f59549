//! What every command needs: the home directory, configuration, queue URL and output mode.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use skillforge_engine::open::{QueueOptions, QueueUrl, open_queue_with};
use skillforge_engine::{EngineError, QueueBackend};
use skillforge_store::Store;

use crate::config::{Config, resolve_home};
use crate::exit::CliError;

/// For how long `worker` and `serve`, waiting at start for a queue server that does not answer,
/// say so every 10 s; after it, once a minute (they wait until it answers or they are stopped).
pub const SERVICE_QUEUE_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

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
    /// Whether the home directory existed when the command started: a command that creates it
    /// says so once (a mistyped `--home` otherwise starts an empty home silently).
    home_existed: bool,
    /// Set once the note about a new home is printed.
    noted_new_home: std::sync::atomic::AtomicBool,
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
        let home_existed = home.exists();
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
            home_existed,
            noted_new_home: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// For commands whose purpose includes making a home (`demo`): no note when they create it.
    pub fn expect_new_home(&self) {
        self.noted_new_home
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Creates the home directory when missing; the first time a command of this invocation
    /// creates it, says so on stderr with what to check.
    fn ensure_home(&self) -> Result<(), CliError> {
        std::fs::create_dir_all(&self.home)
            .with_context(|| format!("create home `{}`", self.home.display()))
            .map_err(CliError::env)?;
        if !self.home_existed
            && !self
                .noted_new_home
                .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            eprintln!(
                "note: the home `{}` did not exist; starting an empty one there (check --home / SKILLFORGE_HOME; \
                 `skillforge init` writes a commented config and starter files)",
                self.home.display()
            );
        }
        Ok(())
    }

    /// Opens the queue backend.
    ///
    /// # Errors
    /// Exit 3 when the queue cannot be opened or reached.
    pub async fn queue(&self) -> Result<Arc<dyn QueueBackend>, CliError> {
        self.ensure_home()?;
        open_queue_with(&self.queue_url, &self.queue_options)
            .await
            .map_err(|e| self.open_error(e))
    }

    /// The error of a queue that would not open, with each backend's hint.
    fn open_error(&self, e: EngineError) -> CliError {
        match e {
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
        }
    }

    /// Opens the queue backend for a process that writes jobs or runs them (`worker`, `serve`,
    /// `jobs submit`): also refuses a queue server whose settings lose jobs
    /// (`QueueBackend::check_settings`: Redis `maxmemory-policy` other than `noeviction`).
    ///
    /// # Errors
    /// As [`Context::queue`]; exit 3 naming the setting, its value and how to fix it.
    pub async fn queue_checked(&self) -> Result<Arc<dyn QueueBackend>, CliError> {
        let backend = self.queue().await?;
        self.check_settings(backend).await
    }

    /// Opens the queue for a long-running process (`worker`, `serve`), waiting out an outage of
    /// its server: a fleet's worker started while Redis restarts or is paused keeps trying until
    /// the server answers (or the process is stopped), saying so on stderr at once, every 10 s for
    /// [`SERVICE_QUEUE_WAIT`] and then once a minute, instead of exiting at the first refused or
    /// timed-out connection: a supervisor's restart loop would only do the same, and a worker
    /// paused or starved past any fixed deadline must not die of it. A URL that does not parse, a
    /// server that answers and refuses (a wrong password), or one whose settings lose jobs, is
    /// refused at once.
    ///
    /// # Errors
    /// As [`Context::queue_checked`], except a server that does not answer.
    pub async fn queue_for_service(&self) -> Result<Arc<dyn QueueBackend>, CliError> {
        self.ensure_home()?;
        let started = std::time::Instant::now();
        let mut said_at: Option<std::time::Instant> = None;
        let mut delay = std::time::Duration::from_millis(200);
        loop {
            match open_queue_with(&self.queue_url, &self.queue_options).await {
                Ok(backend) => {
                    if said_at.is_some() {
                        eprintln!(
                            "the queue answers again after {:.1} s; starting",
                            started.elapsed().as_secs_f64()
                        );
                    }
                    return self.check_settings(backend).await;
                }
                Err(e) if e.is_transient() => {
                    let every = if started.elapsed() < SERVICE_QUEUE_WAIT {
                        std::time::Duration::from_secs(10)
                    } else {
                        std::time::Duration::from_secs(60)
                    };
                    if said_at.is_none_or(|at| at.elapsed() >= every) {
                        eprintln!(
                            "waiting for the queue ({} s so far; until it answers — check the URL with \
                             `skillforge doctor`, stop with SIGTERM): {e}",
                            started.elapsed().as_secs()
                        );
                        said_at = Some(std::time::Instant::now());
                    }
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(std::time::Duration::from_secs(2));
                }
                Err(e) => return Err(self.open_error(e)),
            }
        }
    }

    async fn check_settings(
        &self,
        backend: Arc<dyn QueueBackend>,
    ) -> Result<Arc<dyn QueueBackend>, CliError> {
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
        self.ensure_home()?;
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
