//! Confinement with bubblewrap: a once-per-process probe whether `bwrap` works here, and the
//! wrapping of one command line.
//!
//! Under bwrap a command sees the whole filesystem read-only except its checkout (bound
//! read-write at the same path) and a private `/tmp`; it runs in its own PID namespace (so no
//! descendant outlives the run: when the namespace's init dies, the kernel kills the rest) and,
//! unless the payload allows the network, in its own empty network namespace.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use skillforge_runner_process::ProcessPayload;
use tokio::sync::OnceCell;

use crate::payload::{SANDBOX_ENV_ALLOWLIST, TAIL_BYTES};
use crate::report::Confinement;

/// The bubblewrap program, looked up on `PATH`.
const BWRAP: &str = "bwrap";
/// How long the probe may take before bwrap is declared unusable.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

static PROBE: OnceCell<Result<(), String>> = OnceCell::const_new();

/// Whether bwrap works on this worker, probed once per process by running `true` under the
/// same namespace and mount flags the commands get. `Err` carries why not.
pub async fn bwrap_probe() -> Result<(), String> {
    PROBE.get_or_init(run_probe).await.clone()
}

async fn run_probe() -> Result<(), String> {
    let mut probe = tokio::process::Command::new(BWRAP);
    probe
        .args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
        ])
        .args([
            "--unshare-pid",
            "--unshare-net",
            "--die-with-parent",
            "true",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let result = match tokio::time::timeout(PROBE_TIMEOUT, probe.output()).await {
        Err(_) => Err(format!(
            "bwrap probe did not finish within {PROBE_TIMEOUT:?}"
        )),
        Ok(Err(error)) if error.kind() == std::io::ErrorKind::NotFound => {
            Err("bwrap not found on PATH".to_owned())
        }
        Ok(Err(error)) => Err(format!("run bwrap probe: {error}")),
        Ok(Ok(output)) if output.status.success() => Ok(()),
        Ok(Ok(output)) => Err(format!(
            "bwrap probe exited with {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )),
    };
    match &result {
        Ok(()) => tracing::info!(runner = "sandbox", "bwrap works; commands run confined"),
        Err(reason) => {
            tracing::warn!(runner = "sandbox", %reason, "bwrap unusable; commands run unconfined")
        }
    }
    result
}

/// The process payload for one command line with `checkout` as working directory.
///
/// Unconfined: `sh -c LINE`. Under bwrap:
/// `sh -c 'exec "$@"' sh bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp
/// --ro-bind SANDBOX_ROOT SANDBOX_ROOT --bind CHECKOUT CHECKOUT --unshare-pid --die-with-parent [--unshare-net] --chdir CHECKOUT
/// /bin/sh -c LINE` — the outer `sh` only `exec`s bwrap with its arguments passed positionally
/// (no quoting), and keeps the process runner's shell classification (128+n ⇒ killed by n).
/// `TMPDIR` is set to the private `/tmp` under bwrap unless `env` sets it.
pub(crate) fn command_payload(
    confinement: Confinement,
    checkout: &Path,
    network: bool,
    env: &std::collections::BTreeMap<String, String>,
    line: &str,
) -> ProcessPayload {
    let mut payload = match confinement {
        Confinement::None | Confinement::Container => ProcessPayload::shell(line),
        Confinement::Bwrap => {
            let dir = checkout.to_string_lossy().into_owned();
            let mut argv: Vec<String> = ["/bin/sh", "-c", "exec \"$@\"", "sh", BWRAP]
                .map(String::from)
                .to_vec();
            argv.extend(
                [
                    "--ro-bind",
                    "/",
                    "/",
                    "--dev",
                    "/dev",
                    "--proc",
                    "/proc",
                    "--tmpfs",
                    "/tmp",
                ]
                .map(String::from),
            );
            // The sandbox root (the checkout's parent) read-only from the real filesystem, so
            // `../x` fails even when the scratch dir lies under /tmp (where the private tmpfs
            // would otherwise make the checkout's parent a writable, if private, directory).
            if let Some(parent) = checkout.parent() {
                let parent = parent.to_string_lossy().into_owned();
                argv.extend(["--ro-bind".into(), parent.clone(), parent]);
            }
            argv.extend(["--bind".into(), dir.clone(), dir.clone()]);
            argv.extend(["--unshare-pid", "--die-with-parent"].map(String::from));
            if !network {
                argv.push("--unshare-net".into());
            }
            argv.extend(["--chdir".into(), dir]);
            argv.extend(["/bin/sh", "-c", line].map(String::from));
            ProcessPayload::argv(argv)
        }
    };
    payload.cwd = Some(checkout.to_owned());
    payload.env = env.clone();
    if confinement == Confinement::Bwrap {
        payload
            .env
            .entry("TMPDIR".into())
            .or_insert_with(|| "/tmp".into());
    }
    payload.env_allowlist = Some(
        SANDBOX_ENV_ALLOWLIST
            .iter()
            .map(|name| (*name).to_owned())
            .collect(),
    );
    payload.max_output_bytes = Some(TAIL_BYTES);
    payload
}

#[cfg(test)]
mod tests {
    use skillforge_runner_process::Command;

    use super::*;

    #[test]
    fn bwrap_payload_keeps_the_line_intact_and_is_a_shell() {
        let env = std::collections::BTreeMap::new();
        let line = "echo a,b && echo 'q' \"$HOME\"";
        let payload = command_payload(Confinement::Bwrap, Path::new("/s/c"), false, &env, line);
        let Command::Argv(argv) = &payload.command else {
            panic!("expected argv")
        };
        assert_eq!(argv.last().map(String::as_str), Some(line));
        assert!(argv.contains(&"--unshare-net".to_owned()));
        assert!(payload.command.is_shell());
        assert_eq!(payload.env.get("TMPDIR").map(String::as_str), Some("/tmp"));

        let online = command_payload(Confinement::Bwrap, Path::new("/s/c"), true, &env, line);
        let Command::Argv(argv) = &online.command else {
            panic!("expected argv")
        };
        assert!(!argv.contains(&"--unshare-net".to_owned()));

        let bare = command_payload(Confinement::None, Path::new("/s/c"), false, &env, line);
        assert_eq!(bare.command, Command::Shell(line.to_owned()));
        assert!(!bare.env.contains_key("TMPDIR"));
    }
}
