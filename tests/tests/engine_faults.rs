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
    std::fs::write(
        home.path().join("skillforge.db"),
        b"not a database, ".repeat(512),
    )
    .unwrap();
    let out = home.run(&["jobs", "submit", "--wait", "--", "true"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("skillforge.db"),
        "names the file: {}",
        stderr(&out)
    );
    let jobs = home.json(&["jobs", "list"]);
    assert_eq!(
        jobs.as_array().map(Vec::len),
        Some(0),
        "nothing enqueued: {jobs:#}"
    );
}

/// Issue 12 item 6: Redis losing its data is said loudly, once, by `serve` and by a worker, and
/// a re-submit of an idempotency key the store shows applied is refused (exit 2) instead of
/// running the work a second time.
#[test]
fn redis_data_loss_is_reported_once_and_applied_keys_are_not_run_again() {
    use skillforge_tests::{Reaped, RedisServer, wait_for};
    let t = std::time::Duration::from_secs(60);
    let redis = RedisServer::start();
    let home = Home::redis(&redis.url());
    let _serve = Reaped(home.spawn_serve());
    let _worker = Reaped(home.spawn_worker("w", &[]));
    let first = home.json(&[
        "jobs",
        "submit",
        "--idempotency-key",
        "deploy-42",
        "--",
        "true",
    ]);
    let id = first["id"].as_str().unwrap().to_owned();
    wait_for(t, "the result applied by serve", || {
        home.job(&id)["applied"]
            .as_array()
            .filter(|a| !a.is_empty())
            .map(|_| ())
    });

    redis.cli(&["flushall"]).expect("flushall");
    home.wait(t, "serve and the worker to report the loss", || {
        let logs = home.logs();
        (logs.matches("lost its data").count() >= 2).then_some(())
    });
    let again = home.run(&[
        "jobs",
        "submit",
        "--idempotency-key",
        "deploy-42",
        "--",
        "true",
    ]);
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("deploy-42") && stderr(&again).contains(&id),
        "{}",
        stderr(&again)
    );
    let jobs = home.json(&["jobs", "list"]);
    assert_eq!(
        jobs.as_array().map(Vec::len),
        Some(0),
        "nothing enqueued: {jobs:#}"
    );
    // Said once per process, not at every check.
    let logs = home.logs();
    assert_eq!(logs.matches("lost its data").count(), 2, "{logs}");
}

/// Issue 12 item 6: when the queue loses its data, `serve` names the store's pending work that
/// went with it: the option-generation jobs a `train continue --no-wait` enqueued (recorded as
/// pending by the stage port) are listed by id, and nothing else is.
#[test]
fn redis_data_loss_names_the_store_work_the_queue_lost() {
    use skillforge_tests::{PLANNER_TEMPLATE, Reaped, RedisServer, add_template, path_arg, write};
    let t = std::time::Duration::from_secs(60);
    let redis = RedisServer::start();
    let home = Home::redis(&redis.url());
    add_template(&home, PLANNER_TEMPLATE, "owner/repo");
    let items = write(
        &home.path().join("in/items.yml"),
        "items:\n  - id: one\n    title: One\n    input: the first change\n",
    );
    let out = home.run(&[
        "train",
        "start",
        "--template",
        "planner",
        "--repo",
        "owner/repo",
        "--request",
        "clearer",
        "--items-file",
        path_arg(&items),
        "--yes",
        "--session",
        "s1",
        "--options",
        "2",
        "--workspace-repo",
        "owner/workspace",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // No worker runs: the option jobs stay queued, pending in the store.
    let out = home.run(&["train", "continue", "--session", "s1", "--no-wait"]);
    // Exit 4: the option jobs are queued, not decided yet.
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let queued = home.json(&["jobs", "list"]);
    let ids: Vec<String> = queued
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(!ids.is_empty(), "{queued:#}");

    let _serve = Reaped(home.spawn_serve());
    // `serve` has read the namespace epoch once it says where it runs.
    home.wait(t, "serve to start", || {
        home.logs().contains("control plane on").then_some(())
    });
    redis.cli(&["flushall"]).expect("flushall");
    let line = home.wait(t, "serve to name the lost work", || {
        home.logs()
            .lines()
            .find(|l| l.contains("the store awaits are gone from the queue"))
            .map(str::to_owned)
    });
    assert!(line.contains(&format!("{} job(s)", ids.len())), "{line}");
    for id in &ids {
        assert!(
            line.contains(id.as_str()) && line.contains("train/option_generation"),
            "{id}: {line}"
        );
    }
}

/// Issue 12 item 9: flags that would store something meaningless are refused with exit 2, and
/// nothing is enqueued: a timeout that rounds to 0 ms, an empty idempotency key (one key shared
/// by every such submit), an environment variable without a name, an empty lock or queue name.
#[test]
fn submit_refuses_meaningless_flags_with_exit_2_and_enqueues_nothing() {
    let home = Home::embedded();
    let cases: [&[&str]; 7] = [
        &["--timeout", "1e-9"],
        &["--heartbeat", "0.0001"],
        &["--idempotency-key", ""],
        &["--env", "=v"],
        &["--lock", ""],
        &["--lock", " "],
        &["--queue-name", ""],
    ];
    for flags in cases {
        let mut args = vec!["jobs", "submit"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--", "true"]);
        let out = home.run(&args);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {}", stderr(&out));
        let name = flags[0].trim_start_matches('-');
        assert!(
            stderr(&out).contains(name),
            "{flags:?} names the flag: {}",
            stderr(&out)
        );
    }
    let jobs = home.json(&["jobs", "list"]);
    assert_eq!(
        jobs.as_array().map(Vec::len),
        Some(0),
        "nothing enqueued: {jobs:#}"
    );
}

/// Issue 12 item 9: reviewer names with control characters or over the length limit are
/// refused (exit 2) before any packet is read.
#[test]
fn reviewer_names_with_control_characters_or_too_long_are_refused() {
    let home = Home::embedded();
    let long = "r".repeat(129);
    for reviewer in ["ann\u{1b}[31m", "ann\nbob", long.as_str(), " "] {
        for cmd in [
            &["feedback", "markdown", "import", "--packet", "/nonexistent"][..],
            &["pairwise", "import", "/nonexistent"][..],
        ] {
            let mut args = cmd.to_vec();
            args.extend_from_slice(&["--reviewer", reviewer]);
            let out = home.run(&args);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
            assert!(
                stderr(&out).contains("reviewer"),
                "{args:?}: {}",
                stderr(&out)
            );
        }
    }
}

/// Issue 12 item 8: an embedded queue that cannot be opened carries the embedded queue's hint
/// and file, not the Redis one.
#[test]
fn an_embedded_queue_error_names_the_file_and_no_redis_hint() {
    let home = Home::embedded();
    std::fs::create_dir_all(home.path().join("queue.db")).unwrap();
    let out = home.run(&["jobs", "list"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let text = stderr(&out);
    assert!(
        text.contains("queue.db") && !text.contains("Redis"),
        "{text}"
    );
}

/// A tmpfs mounted over a directory (needs root, as on the CI machine), unmounted on drop.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    /// `None` when this process may not mount.
    fn mount_over(dir: &std::path::Path, size: &str) -> Option<Self> {
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Self(dir.to_owned()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Issue 12 item 3, through the binary: on a full disk a submit is exit 3 naming the queue file
/// (also with `--wait`, which ends instead of hanging), and once space is freed the same home
/// works again. (The wedge of a long-lived process after a failed commit is the engine test
/// `a_full_disk_fails_writes_naming_the_file_and_the_queue_recovers_when_space_is_freed`.)
#[test]
fn a_full_disk_is_exit_3_naming_the_file_and_the_home_works_once_space_is_freed() {
    use std::io::Write;
    let home = Home::embedded();
    let Some(_fs) = Tmpfs::mount_over(home.path(), "16m") else {
        eprintln!(
            "SKIPPED: cannot mount a tmpfs here (needs root); the disk-full test did not run"
        );
        return;
    };
    let out = home.run(&["jobs", "submit", "--wait", "--", "echo", "before"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    let filler = home.path().join("filler");
    let mut f = std::fs::File::create(&filler).unwrap();
    let chunk = vec![7u8; 64 * 1024];
    while f.write_all(&chunk).and_then(|()| f.flush()).is_ok() {}
    while f.write_all(&chunk[..512]).is_ok() {}
    drop(f);

    // A payload larger than any free page the files still have.
    let pad = "x".repeat(100_000);
    let envs: Vec<String> = (0..5).map(|i| format!("PAD{i}={pad}")).collect();
    for wait in [false, true] {
        let mut args = vec!["jobs", "submit"];
        if wait {
            args.push("--wait");
        }
        for e in &envs {
            args.extend_from_slice(&["--env", e]);
        }
        args.extend_from_slice(&["--", "true"]);
        let mut child = home
            .cmd()
            .args(&args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let status = skillforge_tests::wait_exit(&mut child, std::time::Duration::from_secs(60));
        let mut text = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut text).unwrap();
        assert_eq!(status.code(), Some(3), "wait={wait}: {text}");
        // A fresh process meets the full disk when it opens the queue or, with --wait, the
        // domain store it opens before enqueueing (a shared-memory file cannot grow), or when it
        // commits. Which file is hit first depends on the pages each still has free; either way
        // the error names that file and says it is the disk, never a Redis hint.
        let error = text
            .lines()
            .find(|l| l.starts_with("error:"))
            .unwrap_or_default();
        let names_a_home_file = error.contains("queue.db") || error.contains("skillforge.db");
        assert!(
            names_a_home_file && error.contains("disk") && !error.contains("Redis"),
            "wait={wait}: {text}"
        );
    }

    std::fs::remove_file(&filler).unwrap();
    let out = home.run(&["jobs", "submit", "--wait", "--", "echo", "after"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "after\n");
}

/// Issue 12 item 3: a disk that fills after the enqueue (here the job itself fills it) leaves
/// the in-process worker of `jobs submit --wait` unable to record the result: the command ends
/// with exit 3 saying the result could not be recorded and naming the disk, instead of waiting
/// for a result that will never arrive.
#[test]
fn submit_wait_whose_worker_meets_a_full_disk_is_exit_3() {
    let home = Home::embedded();
    let Some(_fs) = Tmpfs::mount_over(home.path(), "16m") else {
        eprintln!(
            "SKIPPED: cannot mount a tmpfs here (needs root); the disk-full test did not run"
        );
        return;
    };
    let filler = home.path().join("filler");
    // Fill the disk, then print 64 KiB (the output tail the result must store).
    let script = format!(
        "cat /dev/zero > '{}' 2>/dev/null; head -c 65536 /dev/zero | tr '\\0' x",
        filler.display()
    );
    let mut child = home
        .cmd()
        .args(["jobs", "submit", "--wait", "--", "sh", "-c", &script])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = skillforge_tests::wait_exit(&mut child, std::time::Duration::from_secs(60));
    let mut text = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut text).unwrap();
    assert_eq!(status.code(), Some(3), "{text}");
    let error = text
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_default();
    assert!(
        error.contains("could not record its result") && error.contains("disk"),
        "{text}"
    );
    assert!(error.contains("queue.db"), "names the queue file: {text}");

    // Once space is freed the home works again.
    std::fs::remove_file(&filler).unwrap();
    let out = home.run(&["jobs", "submit", "--wait", "--", "echo", "after"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// Issue 12 item 8: on a read-only home (its file system remounted read-only) read commands
/// work, since a current schema needs no migration lock and the files open read-only; a write
/// fails with exit 3 naming the file it could not write.
#[test]
fn read_commands_work_on_a_read_only_home_and_writes_name_the_file() {
    let home = Home::embedded();
    let Some(_fs) = Tmpfs::mount_over(home.path(), "16m") else {
        eprintln!(
            "SKIPPED: cannot mount a tmpfs here (needs root); the read-only home test did not run"
        );
        return;
    };
    let out = home.run(&["jobs", "submit", "--wait", "--", "echo", "stored"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let id = home.json(&["jobs", "list"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let remount = std::process::Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(home.path())
        .status()
        .unwrap();
    assert!(remount.success());

    let shown = home.job(&id);
    assert_eq!(shown["state"], "succeeded");
    assert_eq!(
        shown["applied"].as_array().map(Vec::len),
        Some(1),
        "{shown:#}"
    );
    let listed = home.run(&["template", "list"]);
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    let write = home.run(&["jobs", "submit", "--", "true"]);
    assert_eq!(write.status.code(), Some(3), "{}", stderr(&write));
    assert!(
        stderr(&write).contains("readonly") && stderr(&write).contains("queue.db"),
        "{}",
        stderr(&write)
    );
}

/// Issue 12 item 7: JSON given on the command line (`review create --metadata-json`,
/// `train start --evaluator-config-json`) nested 50 000 levels deep (100 KB: one argument can
/// hold at most 128 KiB on Linux) is refused with exit 2 naming the flag and the nesting limit,
/// and nothing is stored.
#[test]
fn deeply_nested_json_flags_are_refused_naming_the_limit() {
    let home = Home::embedded();
    let deep = format!("{}{}", "[".repeat(50_000), "]".repeat(50_000));
    let items = skillforge_tests::write(
        &home.path().join("items.yml"),
        "items:\n  - id: one\n    title: One\n    input: a change\n",
    );
    let items = items.display().to_string();
    let cases: [(&[&str], &str); 2] = [
        (
            &[
                "review",
                "create",
                "--template",
                "planner",
                "--repo",
                "o/r",
                "--run",
                "r1",
                "--metadata-json",
            ],
            "--metadata-json",
        ),
        (
            &[
                "train",
                "start",
                "--template",
                "planner",
                "--repo",
                "o/r",
                "--request",
                "x",
                "--yes",
                "--items-file",
                &items,
                "--evaluator",
                "commit_notes_v1",
                "--evaluator-config-json",
            ],
            "--evaluator-config-json",
        ),
    ];
    for (args, flag) in cases {
        let mut argv = args.to_vec();
        argv.push(&deep);
        let out = home.run(&argv);
        assert_eq!(out.status.code(), Some(2), "{flag}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(flag) && stderr(&out).contains("64 levels"),
            "{flag}: {}",
            stderr(&out)
        );
    }
    let jobs = home.json(&["jobs", "list"]);
    assert_eq!(
        jobs.as_array().map(Vec::len),
        Some(0),
        "nothing enqueued: {jobs:#}"
    );
}
