//! `skillforge jobs logs ID [--follow]` (issue 13 item 8) through the built binary, on the
//! embedded queue and on a real Redis: a running job's output is printed as it is written (the
//! first line arrives while the job still runs and waits for the test), the follower ends when
//! the job does, and the finished job's kept output reads back the same.
//!
//! The follower runs with its fallback poll set to 10 minutes (`SKILLFORGE_FOLLOW_FALLBACK_MS`),
//! far beyond the test's deadline: the line written after it started waiting and the job's end
//! reach it only through the queue's wake-ups (on Redis the blocking `XREAD` on the job's
//! output stream and the `changed` message), not through polling.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use skillforge_tests::{Home, Reaped, RedisServer, wait_exit};

const DEADLINE: Duration = Duration::from_secs(60);
/// The follower's fallback poll: ten times the deadline.
const FALLBACK_MS: &str = "600000";

/// Lines of a child's stdout, read on a thread, so the test can wait for each with a deadline.
fn lines(child: &mut Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

fn follow_streams_a_running_job_and_ends_with_it(home: &Home) {
    let _worker = Reaped(home.spawn_worker("w1", &[]));
    let gate = tempfile::tempdir().unwrap();
    let go = gate.path().join("go");
    let script = format!(
        "echo ready; echo warned >&2; while [ ! -e '{}' ]; do sleep 0.02; done; echo done",
        go.display()
    );
    let id = home.submit(&[], &["sh", "-c", &script]);

    let mut follower = home
        .cmd()
        .args(["jobs", "logs", "--follow", &id])
        .env("SKILLFORGE_FOLLOW_FALLBACK_MS", FALLBACK_MS)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn jobs logs --follow");
    let out = lines(&mut follower);
    let first = out
        .recv_timeout(DEADLINE)
        .expect("the first line of a running job arrives");
    assert_eq!(first, "ready");
    // The job cannot have ended: it waits for the file the test has not created yet.
    assert_eq!(
        home.job(&id)["state"],
        "running",
        "output arrived while the job runs"
    );
    std::fs::write(&go, "").unwrap();
    let second = out
        .recv_timeout(DEADLINE)
        .expect("the line written after the gate opened");
    assert_eq!(second, "done");
    let status = wait_exit(&mut follower, DEADLINE);
    assert!(
        status.success(),
        "the follower exits 0 when the job ends: {status}"
    );
    assert!(
        out.recv_timeout(DEADLINE).is_err(),
        "nothing after the job's last line"
    );
    let mut err = String::new();
    std::io::Read::read_to_string(&mut follower.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(err, "warned\n", "stderr chunks go to stderr");
    assert_eq!(home.job(&id)["state"], "succeeded");

    // Read back after the end: the same output, in order; `--json` one object per line.
    let again = home.run(&["jobs", "logs", &id]);
    assert!(again.status.success());
    assert_eq!(String::from_utf8_lossy(&again.stdout), "ready\ndone\n");
    let json = home.run(&["--json", "jobs", "logs", &id]);
    let chunks: Vec<serde_json::Value> = String::from_utf8_lossy(&json.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    let text: String = chunks
        .iter()
        .map(|c| {
            format!(
                "{}:{}",
                c["stream"].as_str().unwrap(),
                c["data"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        text.matches("stdout:").count() + text.matches("stderr:").count(),
        chunks.len()
    );
    assert!(text.contains("stderr:warned\n"), "{text}");
    assert!(chunks.iter().all(|c| c["fencing_token"] == 1), "{chunks:?}");

    let unknown = home.run(&["jobs", "logs", "no-such-job"]);
    assert_eq!(
        unknown.status.code(),
        Some(2),
        "an unknown job is a usage error"
    );
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no-such-job"));
}

#[test]
fn sqlite_follow_streams_a_running_job_and_ends_with_it() {
    follow_streams_a_running_job_and_ends_with_it(&Home::embedded());
}

#[test]
fn redis_follow_streams_a_running_job_and_ends_with_it() {
    let redis = RedisServer::start();
    follow_streams_a_running_job_and_ends_with_it(&Home::redis(&redis.url()));
}

/// `jobs submit --wait` prints the job's output once (the result's tails), and `jobs logs` of
/// that finished job prints the live output it kept; a job whose runner streamed nothing (here:
/// one that printed nothing) prints nothing and exits 0.
#[test]
fn logs_of_a_waited_job_read_back_its_output() {
    let home = Home::embedded();
    let out = home
        .cmd()
        .args([
            "jobs",
            "submit",
            "--wait",
            "--",
            "sh",
            "-c",
            "echo one; echo two",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "one\ntwo\n");
    let id = String::from_utf8_lossy(&out.stderr)
        .lines()
        .find_map(|l| {
            l.strip_prefix("job ")
                .and_then(|r| r.split_whitespace().next())
                .map(str::to_owned)
        })
        .expect("job id on stderr");
    let logs = home.run(&["jobs", "logs", &id]);
    assert!(logs.status.success());
    assert_eq!(String::from_utf8_lossy(&logs.stdout), "one\ntwo\n");

    let quiet = home
        .cmd()
        .args(["jobs", "submit", "--wait", "--", "true"])
        .output()
        .unwrap();
    let quiet_id = String::from_utf8_lossy(&quiet.stderr)
        .lines()
        .find_map(|l| {
            l.strip_prefix("job ")
                .and_then(|r| r.split_whitespace().next())
                .map(str::to_owned)
        })
        .unwrap();
    let logs = home.run(&["jobs", "logs", "--follow", &quiet_id]);
    assert!(logs.status.success());
    assert!(logs.stdout.is_empty());
}
