//! Faults found by fault injection (issue 12), through the built binary: a submit that cannot
//! finish enqueues nothing, a full disk is exit 3 naming the file, parser limits, and bad flags
//! refused with exit 2 before anything is stored.

use skillforge_tests::Home;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Issue 12 item 5: `jobs submit --wait` with a store it cannot open fails before enqueueing
/// (exit 3, naming the file), so running it again is never a silent second copy of the job.
#[test]
fn submit_wait_with_a_corrupt_store_enqueues_nothing() {
    let home = Home::embedded();
    std::fs::write(home.path().join("skillforge.db"), b"not a database, ".repeat(512)).unwrap();
    let out = home.run(&["jobs", "submit", "--wait", "--", "true"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("skillforge.db"), "names the file: {}", stderr(&out));
    let jobs = home.json(&["jobs", "list"]);
    assert_eq!(jobs.as_array().map(Vec::len), Some(0), "nothing enqueued: {jobs:#}");
}
