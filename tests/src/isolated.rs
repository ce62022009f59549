//! A worker on "another machine": `skillforge worker` in a private mount namespace with an
//! empty tmpfs mounted over the control plane's home, so it shares nothing with the control
//! plane but the queue URL (issue 20). The binary and the system stay visible, as on a build
//! machine with skillforge, git and the runtimes' CLIs installed.
//!
//! `unshare --mount --propagation private` as root (the CI machine and this sandbox); an
//! unprivileged user also gets `--map-root-user`, which needs user namespaces.

use std::process::{Child, Command, Stdio};

use crate::{Home, bin};

/// Starts `skillforge --home HOME --queue URL worker --name NAME EXTRA...` with `HOME` hidden
/// behind an empty tmpfs (the worker's own home is that empty dir); its stderr goes to
/// `<home>/worker-NAME-isolated.log`, opened before the namespace hides the home.
///
/// # Panics
/// When the home has no `--queue` (an isolated worker needs a shared queue) or spawning fails.
pub fn spawn_isolated_worker(home: &Home, name: &str, extra: &[&str]) -> Child {
    spawn_isolated_worker_env(home, name, extra, &[])
}

/// [`spawn_isolated_worker`] with extra environment variables for the worker (e.g. the scripted
/// agent's edit plan).
///
/// # Panics
/// As [`spawn_isolated_worker`].
pub fn spawn_isolated_worker_env(
    home: &Home,
    name: &str,
    extra: &[&str],
    envs: &[(&str, &str)],
) -> Child {
    let queue = home
        .queue
        .as_deref()
        .expect("an isolated worker needs a Redis home");
    let log = std::fs::File::create(home.path().join(format!("worker-{name}-isolated.log")))
        .expect("log file");
    let mut cmd = Command::new("unshare");
    // `/proc/self` belongs to this process's effective user.
    let root =
        std::fs::metadata("/proc/self").is_ok_and(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0);
    if !root {
        cmd.arg("--map-root-user");
    }
    cmd.args([
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        "mount -t tmpfs tmpfs \"$1\" && shift && exec \"$@\"",
        "sh",
    ])
    .arg(home.path())
    .arg(bin())
    .arg("--home")
    .arg(home.path())
    .args(["--queue", queue, "worker", "--name", name])
    .args(extra)
    .env(
        "SKILLFORGE_LOG",
        std::env::var("SKILLFORGE_LOG").unwrap_or_else(|_| "info".into()),
    )
    .envs(envs.iter().copied())
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(log);
    cmd.spawn()
        .expect("spawn an isolated worker (is util-linux's unshare installed?)")
}
