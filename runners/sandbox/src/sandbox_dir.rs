//! The throwaway sandbox directory: `<scratch>/skillforge-sandbox-<uuid>/` holding a marker file
//! naming its owner process and the `checkout/` the commands run in; its removal; and the
//! clean-up of sandboxes a dead worker left behind.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{SandboxError, worker_host};

/// Name prefix of every sandbox directory.
pub const SANDBOX_DIR_PREFIX: &str = "skillforge-sandbox-";
/// Marker file inside a sandbox directory (next to `checkout/`, not in it).
pub const MARKER_FILE: &str = ".skillforge-sandbox";
/// The checkout's name inside a sandbox directory.
const CHECKOUT_DIR: &str = "checkout";

/// Who owns a sandbox: written to [`MARKER_FILE`] when it is created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Marker {
    /// Owning worker's pid.
    pid: u32,
    /// That process's start time in clock ticks since boot (`/proc/<pid>/stat` field 22), so a
    /// reused pid is not taken for the owner.
    start_ticks: Option<u64>,
    /// Host the owner ran on.
    host: String,
}

/// A created sandbox directory; remove it with [`SandboxDir::remove`].
#[derive(Debug)]
pub(crate) struct SandboxDir {
    root: PathBuf,
}

impl SandboxDir {
    /// Creates `<scratch_dir>/skillforge-sandbox-<uuid>/` with its marker file.
    pub(crate) fn create(scratch_dir: &Path) -> Result<Self, SandboxError> {
        let name = format!("{SANDBOX_DIR_PREFIX}{}", uuid::Uuid::new_v4().simple());
        let root = scratch_dir.join(name);
        fs::create_dir_all(&root).map_err(|source| SandboxError::Io {
            context: format!("create sandbox dir `{}`", root.display()),
            source,
        })?;
        let dir = Self { root };
        let marker = Marker {
            pid: std::process::id(),
            start_ticks: start_ticks(std::process::id()),
            host: worker_host(),
        };
        let marker_path = dir.root.join(MARKER_FILE);
        let bytes = serde_json::to_vec(&marker).unwrap_or_default();
        if let Err(source) = fs::write(&marker_path, bytes) {
            let _ = dir.remove();
            return Err(SandboxError::Io {
                context: format!("write sandbox marker `{}`", marker_path.display()),
                source,
            });
        }
        Ok(dir)
    }

    /// The checkout path (not yet created).
    pub(crate) fn checkout(&self) -> PathBuf {
        self.root.join(CHECKOUT_DIR)
    }

    /// Removes the whole sandbox directory. Returns whether it is gone.
    pub(crate) fn remove(&self) -> bool {
        match remove_tree(&self.root) {
            Ok(()) => true,
            Err(error) => {
                tracing::warn!(path = %self.root.display(), %error, "remove sandbox dir failed");
                false
            }
        }
    }
}

/// Removes `path` recursively; if that fails (a command made a directory read-only), makes
/// every directory under it owner-writable and tries again. Only directories are chmod-ed:
/// files may be hard links shared with the live repository's objects.
fn remove_tree(path: &Path) -> io::Result<()> {
    match fs::remove_dir_all(path) {
        Ok(()) => return Ok(()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(_) => {}
    }
    make_dirs_writable(path);
    match fs::remove_dir_all(path) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

fn make_dirs_writable(path: &Path) {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    let mut perms = meta.permissions();
    perms.set_mode(perms.mode() | 0o700);
    let _ = fs::set_permissions(path, perms);
    if let Ok(entries) = fs::read_dir(path) {
        for entry in entries.flatten() {
            make_dirs_writable(&entry.path());
        }
    }
}

/// Start time of process `pid` in clock ticks since boot, from `/proc/<pid>/stat`.
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may contain spaces.
    let rest = &stat[stat.rfind(')')? + 1..];
    // rest starts at field 3 (state); start time is field 22.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the marker's owner is still running on this host.
fn is_owner_alive(marker: &Marker) -> bool {
    if marker.host != worker_host() {
        // Another host's sandbox on shared storage: we cannot tell, so keep it.
        return true;
    }
    match start_ticks(marker.pid) {
        None => false,
        Some(ticks) => marker.start_ticks.is_none_or(|recorded| recorded == ticks),
    }
}

/// What [`clean_leftovers`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanReport {
    /// Stale sandbox directories removed.
    pub removed: Vec<PathBuf>,
    /// Sandbox directories kept because their owner is alive (or on another host).
    pub kept: Vec<PathBuf>,
    /// Stale sandbox directories whose removal failed, with the error.
    pub failed: Vec<(PathBuf, String)>,
}

/// Removes sandbox directories left behind by a dead worker (seed: SkillOpt, "Deterministic
/// hard-verifier tier": the sandbox is removed also on worker death; call this when a worker
/// starts, or from the reaper).
///
/// Looks at `scratch_root`'s children and grandchildren (the engine puts each attempt's scratch
/// dir under its scratch root, and sandboxes go inside that) for directories named
/// `skillforge-sandbox-*` holding a [`MARKER_FILE`]. One is stale when its owner pid is not
/// running on this host any more (or the pid now belongs to a process started at another time);
/// a directory with the prefix but an unreadable or missing marker is stale too (its creator
/// died before writing it). Sandboxes of a live process, this one included, are kept.
///
/// # Errors
/// [`SandboxError::Io`] when `scratch_root` cannot be read (a missing root is not an error: there
/// is nothing to clean). Failures to remove a single sandbox are reported in
/// [`CleanReport::failed`].
pub fn clean_leftovers(scratch_root: &Path) -> Result<CleanReport, SandboxError> {
    let mut report = CleanReport::default();
    let children = match fs::read_dir(scratch_root) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(report),
        Err(source) => {
            return Err(SandboxError::Io {
                context: format!("read scratch root `{}`", scratch_root.display()),
                source,
            });
        }
    };
    for child in children.flatten() {
        let path = child.path();
        if !child.file_type().is_ok_and(|kind| kind.is_dir()) {
            continue;
        }
        if is_sandbox_name(&path) {
            clean_one(&path, &mut report);
            continue;
        }
        let Ok(grandchildren) = fs::read_dir(&path) else {
            continue;
        };
        for grandchild in grandchildren.flatten() {
            let path = grandchild.path();
            if grandchild.file_type().is_ok_and(|kind| kind.is_dir()) && is_sandbox_name(&path) {
                clean_one(&path, &mut report);
            }
        }
    }
    Ok(report)
}

fn is_sandbox_name(path: &Path) -> bool {
    path.file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| name.starts_with(SANDBOX_DIR_PREFIX))
}

fn clean_one(path: &Path, report: &mut CleanReport) {
    let marker = fs::read(path.join(MARKER_FILE))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Marker>(&bytes).ok());
    if marker.as_ref().is_some_and(is_owner_alive) {
        report.kept.push(path.to_owned());
        return;
    }
    match remove_tree(path) {
        Ok(()) => {
            tracing::info!(path = %path.display(), "removed stale sandbox dir");
            report.removed.push(path.to_owned());
        }
        Err(error) => report.failed.push((path.to_owned(), error.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_start_ticks_are_readable() {
        assert!(start_ticks(std::process::id()).is_some());
    }

    #[test]
    fn remove_handles_read_only_directories() {
        let scratch = tempfile::tempdir().expect("tempdir");
        let dir = SandboxDir::create(scratch.path()).expect("create");
        let locked = dir.checkout().join("locked");
        fs::create_dir_all(locked.join("inner")).expect("mkdir");
        fs::write(locked.join("inner/file"), "x").expect("write");
        fs::set_permissions(&locked, fs::Permissions::from_mode(0o500)).expect("chmod");
        assert!(dir.remove());
        assert!(!dir.root.exists());
    }

    #[test]
    fn clean_leftovers_removes_dead_owners_and_keeps_live_ones() {
        let scratch = tempfile::tempdir().expect("tempdir");
        let live = SandboxDir::create(&scratch.path().join("job-1")).expect("create live");
        let dead_root = scratch.path().join(format!("{SANDBOX_DIR_PREFIX}dead"));
        fs::create_dir_all(dead_root.join(CHECKOUT_DIR)).expect("mkdir dead");
        // A pid that cannot be running: above the kernel's pid_max limit (2^22).
        let marker = Marker {
            pid: 4_194_305,
            start_ticks: Some(1),
            host: worker_host(),
        };
        fs::write(
            dead_root.join(MARKER_FILE),
            serde_json::to_vec(&marker).expect("json"),
        )
        .expect("write marker");
        let unmarked = scratch.path().join(format!("{SANDBOX_DIR_PREFIX}unmarked"));
        fs::create_dir_all(&unmarked).expect("mkdir unmarked");
        let unrelated = scratch.path().join("not-a-sandbox");
        fs::create_dir_all(&unrelated).expect("mkdir unrelated");

        let report = clean_leftovers(scratch.path()).expect("clean");

        assert!(!dead_root.exists() && !unmarked.exists());
        assert!(live.root.exists() && unrelated.exists());
        assert_eq!(report.removed.len(), 2, "{report:?}");
        assert_eq!(report.kept, vec![live.root.clone()]);
        assert!(live.remove());
    }
}
