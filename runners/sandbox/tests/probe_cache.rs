//! The bwrap probe remembered per boot (`probe_cached`): a success is written to the cache file
//! and a later call with the same key skips the probe; a changed program (or a stale file) is
//! probed again; a failure is not remembered. The probed program is a real executable script
//! standing in for bwrap, which counts its runs in a file.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use skillforge_runner_sandbox::{probe_cached, probe_key};

/// Writes an executable `prog` that appends a line to `runs` and exits `code` (a failing one is
/// longer, so its size differs even within one tick of the file-time clock).
fn program(prog: &Path, runs: &Path, code: i32) {
    let note = if code == 0 { "" } else { "# failing\n" };
    std::fs::write(
        prog,
        format!(
            "#!/bin/sh\necho run >> '{}'\n{note}exit {code}\n",
            runs.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(prog, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn runs(runs: &Path) -> usize {
    std::fs::read_to_string(runs)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_success_is_remembered_for_the_boot_and_a_changed_program_is_probed_again() {
    let dir = tempfile::tempdir().unwrap();
    let (prog, count, cache) = (
        dir.path().join("fake-bwrap"),
        dir.path().join("runs"),
        dir.path().join("scratch/.bwrap-probe"),
    );
    program(&prog, &count, 0);

    assert_eq!(probe_cached(&prog, Some(&cache)).await, Ok(()));
    assert_eq!(runs(&count), 1, "the first call probes");
    let key = probe_key(&prog).expect("a key on Linux");
    assert!(key.contains("boot="), "{key}");
    assert_eq!(
        std::fs::read_to_string(&cache).unwrap(),
        key,
        "the success is remembered under its key"
    );

    assert_eq!(probe_cached(&prog, Some(&cache)).await, Ok(()));
    assert_eq!(
        runs(&count),
        1,
        "a second call of the same boot does not probe again"
    );

    // Without a cache every call probes.
    assert_eq!(probe_cached(&prog, None).await, Ok(()));
    assert_eq!(runs(&count), 2);

    // The program changed (size and modification time): the remembered success does not apply.
    program(&prog, &count, 1);
    let failed = probe_cached(&prog, Some(&cache)).await;
    assert!(
        failed.is_err(),
        "a changed program is probed again: {failed:?}"
    );
    assert_eq!(runs(&count), 3);
    assert!(
        failed.unwrap_err().contains("exited"),
        "the failure says why"
    );
    assert_ne!(
        std::fs::read_to_string(&cache).unwrap(),
        probe_key(&prog).unwrap(),
        "a failure is not remembered"
    );
    assert!(probe_cached(&prog, Some(&cache)).await.is_err());
    assert_eq!(runs(&count), 4, "a failing program is probed each time");

    // A file left by another boot (any other key) is not trusted.
    program(&prog, &count, 0);
    std::fs::write(&cache, "boot=another\n").unwrap();
    assert_eq!(probe_cached(&prog, Some(&cache)).await, Ok(()));
    assert_eq!(runs(&count), 5, "a stale file is probed over");
    assert_eq!(
        std::fs::read_to_string(&cache).unwrap(),
        probe_key(&prog).unwrap()
    );
}
