//! Confinement with bubblewrap: a once-per-process probe whether `bwrap` works here (a success
//! remembered for the rest of the boot in the scratch root, [`set_probe_cache`]), and the
//! wrapping of one command line.
//!
//! Under bwrap a command sees the whole filesystem read-only except its checkout (bound
//! read-write at the same path) and a private `/tmp`; it runs in its own PID namespace (so no
//! descendant outlives the run: when the namespace's init dies, the kernel kills the rest) and,
//! unless the payload allows the network, in its own empty network namespace.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
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
/// Where a successful probe is remembered ([`set_probe_cache`]).
static PROBE_CACHE: OnceLock<PathBuf> = OnceLock::new();

/// File name of the remembered probe inside a worker's scratch root.
pub const PROBE_CACHE_FILE: &str = ".bwrap-probe";

/// Whether bwrap works on this worker, probed once per process by running `true` under the
/// same namespace and mount flags the commands get. `Err` carries why not. With a cache file
/// set ([`set_probe_cache`]), a success is remembered there and a later process of the same
/// boot skips the probe while nothing it depends on changed ([`probe_key`]).
pub async fn bwrap_probe() -> Result<(), String> {
    PROBE
        .get_or_init(|| async {
            let result = probe_cached(Path::new(BWRAP), PROBE_CACHE.get().map(PathBuf::as_path)).await;
            match &result {
                Ok(()) => tracing::info!(runner = "sandbox", "bwrap works; commands run confined"),
                Err(reason) => {
                    tracing::warn!(runner = "sandbox", %reason, "bwrap unusable; commands run unconfined")
                }
            }
            result
        })
        .await
        .clone()
}

/// Remembers successful probes of this process in `scratch_root/.bwrap-probe` (the first call
/// wins; the worker calls it at start with its scratch root).
pub fn set_probe_cache(scratch_root: &Path) {
    let _ = PROBE_CACHE.set(scratch_root.join(PROBE_CACHE_FILE));
}

/// What a remembered success depends on, one `name=value` per line: the boot
/// (`/proc/sys/kernel/random/boot_id`), this user, the program found on `PATH` (path, inode,
/// size, modification time) and the kernel's namespace switches. `None` (never cached) when the
/// boot id or the program cannot be read.
pub fn probe_key(program: &Path) -> Option<String> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let found = find_program(program)?;
    let meta = std::fs::metadata(&found).ok()?;
    let uid = std::fs::metadata("/proc/self").ok()?.uid();
    let mut key = format!(
        "boot={}\nuid={uid}\nprogram={}\nino={}\nsize={}\nmtime={}.{}\n",
        boot.trim(),
        found.display(),
        meta.ino(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec()
    );
    for switch in [
        "/proc/sys/user/max_user_namespaces",
        "/proc/sys/user/max_pid_namespaces",
        "/proc/sys/user/max_net_namespaces",
        "/proc/sys/user/max_mnt_namespaces",
        "/proc/sys/kernel/unprivileged_userns_clone",
        "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
    ] {
        let value = std::fs::read_to_string(switch)
            .map(|v| v.trim().to_owned())
            .unwrap_or_else(|_| "-".into());
        key.push_str(&format!("{switch}={value}\n"));
    }
    Some(key)
}

/// `program` itself when it has a directory part, else the first executable file of that name
/// on `PATH`.
fn find_program(program: &Path) -> Option<PathBuf> {
    let is_executable =
        |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0);
    if program.components().count() > 1 {
        return is_executable(program).then(|| program.to_owned());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|p| is_executable(p))
}

/// The probe of `program`, skipped when `cache` holds the current [`probe_key`]; a success is
/// written there (atomically; a failure to write is only logged), a failure is not remembered
/// (the next process probes again).
pub async fn probe_cached(program: &Path, cache: Option<&Path>) -> Result<(), String> {
    let key = cache.and_then(|_| probe_key(program));
    if let (Some(cache), Some(key)) = (cache, &key)
        && std::fs::read_to_string(cache).is_ok_and(|kept| &kept == key)
    {
        tracing::debug!(runner = "sandbox", cache = %cache.display(), "bwrap probe remembered from earlier this boot");
        return Ok(());
    }
    let result = run_probe(program).await;
    if let (Ok(()), Some(cache), Some(key)) = (&result, cache, key) {
        let tmp = cache.with_extension(format!("tmp-{}", std::process::id()));
        let written = cache
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&tmp, key))
            .and_then(|()| std::fs::rename(&tmp, cache));
        if let Err(error) = written {
            let _ = std::fs::remove_file(&tmp);
            tracing::debug!(runner = "sandbox", %error, cache = %cache.display(), "could not remember the bwrap probe");
        }
    }
    result
}

async fn run_probe(program: &Path) -> Result<(), String> {
    let mut probe = tokio::process::Command::new(program);
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
    match tokio::time::timeout(PROBE_TIMEOUT, probe.output()).await {
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
    }
}

/// The process payload for one command line with `checkout` as working directory.
///
/// Unconfined: `sh -c LINE`. Under bwrap:
/// `bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp
/// --ro-bind SANDBOX_ROOT SANDBOX_ROOT --bind CHECKOUT CHECKOUT --unshare-pid --die-with-parent [--unshare-net] --chdir CHECKOUT
/// /bin/sh -c LINE`, the line one argument (no quoting); bwrap passes on the inner shell's
/// exit code (128+n when it died of signal n), so the process runner classifies it as a shell
/// ([`skillforge_runner_process::Command::is_shell`]).
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
            let mut argv: Vec<String> = vec![BWRAP.to_owned()];
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
