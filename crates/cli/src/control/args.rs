//! Argument helpers shared by commands: durations from flags, the skillforge binary backends run,
//! the queue's label.

use std::path::PathBuf;

use anyhow::anyhow;

use crate::context::Context;
use crate::exit::CliError;

/// Seconds from a flag to milliseconds; exit 2 unless positive and finite.
///
/// # Errors
/// Exit 2 naming `--{name}` and the value.
pub fn secs(name: &str, v: f64) -> Result<u64, CliError> {
    if !(v.is_finite() && v > 0.0) {
        return Err(CliError::usage(anyhow!("--{name} must be a positive number of seconds, got {v}")));
    }
    Ok((v * 1000.0).round() as u64)
}

/// The skillforge binary backend commands run as `{skillforge_bin}`: `$SKILLFORGE_BIN`, else
/// this executable, else `skillforge` on PATH.
pub fn skillforge_bin() -> PathBuf {
    std::env::var_os("SKILLFORGE_BIN")
        .map(PathBuf::from)
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| PathBuf::from("skillforge"))
}

/// A human label of the queue backend in use.
pub fn queue_label(ctx: &Context) -> String {
    match &ctx.queue_url {
        skillforge_engine::open::QueueUrl::Sqlite(p) => format!("embedded queue {}", p.display()),
        skillforge_engine::open::QueueUrl::Redis(u) => format!("redis queue {u}"),
    }
}
