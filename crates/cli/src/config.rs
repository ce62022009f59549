//! `$SKILLFORGE_HOME/config.toml`: queue, worker and server settings; unknown keys are an error.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Deserialize;

/// File name of the configuration inside the home directory.
pub const CONFIG_FILE: &str = "config.toml";

/// The whole configuration file (DESIGN §9). Every section is optional.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `[queue]`.
    #[serde(default)]
    pub queue: QueueConfig,
    /// `[worker]`.
    #[serde(default)]
    pub worker: WorkerSection,
}

/// `[queue]`: which backend.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueConfig {
    /// `redis://HOST:PORT[/DB]`; absent = the embedded SQLite queue.
    pub url: Option<String>,
}

/// `[worker]`: defaults for `skillforge worker`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerSection {
    /// Jobs run at once (default 4).
    pub concurrency: Option<usize>,
    /// Worker name before the random suffix (default `worker`).
    pub name: Option<String>,
    /// Shutdown grace period in seconds (default 10).
    pub grace_secs: Option<u64>,
}

impl Config {
    /// Reads `<home>/config.toml`; a missing file is the default configuration.
    ///
    /// # Errors
    /// Unreadable file, invalid TOML, or an unknown key (the message names key and file).
    pub fn load(home: &Path) -> anyhow::Result<Self> {
        let path = home.join(CONFIG_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text).with_context(|| format!("invalid config `{}`", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(e).with_context(|| format!("read config `{}`", path.display())),
        }
    }
}

/// `--home`, else `$SKILLFORGE_HOME`, else `~/.skillforge`.
pub fn resolve_home(flag: Option<PathBuf>) -> PathBuf {
    flag.or_else(|| std::env::var_os("SKILLFORGE_HOME").map(PathBuf::from))
        .unwrap_or_else(|| {
            std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(".")).join(".skillforge")
        })
}
