//! Faults the soak does not inject (issue 32), through the built binary against a real
//! `redis-server` or the embedded queue: odd configurations refused before anything is written.

use std::process::{Output, Stdio};
use std::time::Duration;

use skillforge_tests::{Home, Reaped, wait_exit, write};

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The tables of the SQLite file `path`, read with `sqlite3`.
fn tables(path: &std::path::Path) -> String {
    let out = std::process::Command::new("sqlite3")
        .arg(path)
        .arg("SELECT group_concat(name, ',') FROM (SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name);")
        .stdin(Stdio::null())
        .output()
        .expect("run sqlite3");
    assert!(out.status.success(), "sqlite3: {}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Issue 32 item 12: `worker --concurrency 0` (or `[worker] concurrency = 0`) would idle forever
/// holding a presence lock: refused with exit 2 naming the setting, before the queue is opened.
#[test]
fn worker_with_concurrency_0_is_refused() {
    let home = Home::embedded();
    let mut child = Reaped(
        home.cmd()
            .args(["worker", "--concurrency", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn worker"),
    );
    let status = wait_exit(&mut child.0, Duration::from_secs(30));
    let mut err = String::new();
    std::io::Read::read_to_string(child.0.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("--concurrency 0"), "{err}");
    assert!(!home.path().join("queue.db").exists(), "the queue was not opened");

    write(&home.path().join("config.toml"), "[worker]\nconcurrency = 0\n");
    let mut child = Reaped(
        home.cmd().arg("worker").stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("spawn worker"),
    );
    let status = wait_exit(&mut child.0, Duration::from_secs(30));
    let mut err = String::new();
    std::io::Read::read_to_string(child.0.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("[worker] concurrency = 0"), "{err}");
}

/// Issue 32 item 12: a SQLite file with tables but no queue schema version given as the queue
/// (here the home's own domain store) is refused with exit 2 naming the file, by a reading
/// command and by a worker, and gets no queue tables.
#[test]
fn another_sqlite_database_given_as_the_queue_is_refused_and_left_untouched() {
    let home = Home::embedded();
    let out = home.run(&["jobs", "submit", "--wait", "--", "true"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let store = home.path().join("skillforge.db");
    let before = tables(&store);
    assert!(!before.split(',').any(|t| t == "jobs"), "the store has no queue table: {before}");
    let url = format!("sqlite://{}", store.display());
    for args in [&["jobs", "list"][..], &["jobs", "submit", "--", "true"], &["worker"]] {
        let mut cmd = home.cmd();
        cmd.arg("--queue").arg(&url).args(args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = Reaped(cmd.spawn().expect("spawn skillforge"));
        let status = wait_exit(&mut child.0, Duration::from_secs(30));
        let mut err = String::new();
        std::io::Read::read_to_string(child.0.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("not a skillforge queue") && err.contains(&store.display().to_string()), "{args:?}: {err}");
    }
    assert_eq!(tables(&store), before, "the store's tables are unchanged");
}

