//! Routing by worker labels on a Redis fleet (issue 20 item 3): a job that requires a label no
//! live worker advertises says so in `jobs show` and in the waiting command's note, waits
//! instead of failing on the first worker, and runs once a worker with that label starts.

use std::process::Stdio;
use std::time::Duration;

use skillforge_tests::{Home, Reaped, RedisServer};

const WAIT: Duration = Duration::from_secs(60);

fn presence(home: &Home, name: &str) {
    home.wait(WAIT, &format!("worker {name}'s presence lock"), || {
        let locks = home.json(&["locks"]);
        locks
            .as_array()?
            .iter()
            .any(|l| {
                l["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with(&format!("worker:{name}-")))
            })
            .then_some(())
    });
}

#[test]
fn a_job_requiring_a_label_no_worker_has_waits_with_a_note_then_runs_when_one_starts() {
    let redis = RedisServer::start();
    let home = Home::redis(&redis.url());
    let _plain = Reaped(home.spawn_worker("plain", &["--label", "os=linux"]));
    presence(&home, "plain");
    let id = home.submit(
        &[
            "--require",
            "gpu",
            "--attempts",
            "1",
            "--idempotency-key",
            "needs-gpu",
        ],
        &["true"],
    );
    let shown = home.wait_job(&id, WAIT, "the routing note", |j| {
        j["routing_note"].is_string()
    });
    assert_eq!(
        shown["state"], "queued",
        "it waits instead of failing on the worker that cannot take it: {shown:#}"
    );
    let note = shown["routing_note"].as_str().unwrap();
    assert!(
        note.contains("requires gpu") && note.contains("plain-") && note.contains("--label gpu"),
        "{note}"
    );
    let human = String::from_utf8(home.run(&["jobs", "show", &id]).stdout).unwrap();
    assert!(human.contains("no live worker can take job"), "{human}");
    // The waiting command says the same, then returns once a gpu worker ran the job.
    let log = home.path().join("waiting.log");
    let mut waiting = spawn_waiting_gpu_job(&home, &log);
    home.wait(WAIT, "the waiting command's note", || {
        std::fs::read_to_string(&log)
            .ok()
            .filter(|t| t.contains("no live worker can take job"))
    });
    assert_eq!(home.job(&id)["state"], "queued");
    let _gpu = Reaped(home.spawn_worker("gpu", &["--label", "gpu"]));
    let status = skillforge_tests::wait_exit(&mut waiting.0, WAIT);
    assert!(
        status.success(),
        "{}\n{}",
        std::fs::read_to_string(&log).unwrap_or_default(),
        home.logs()
    );
    let job = home.job(&id);
    assert_eq!(job["state"], "succeeded");
    let history = job["history"].as_array().unwrap();
    assert!(
        history
            .iter()
            .all(|a| a["worker"].as_str().unwrap().starts_with("gpu-")),
        "only the gpu worker ran it: {job:#}"
    );
    assert!(
        job.get("routing_note").is_none_or(|n| n.is_null()),
        "{job:#}"
    );
}

// Issue 20 item 5: the embedded queue's in-process worker carries the labels this machine offers
// (os=, arch=, tool:<name>), so it runs a job they satisfy, but a job requiring one it lacks
// waits with the routing note (waiter and `jobs show`) until a worker with that label starts.
#[test]
fn the_embedded_in_process_worker_has_the_detected_labels_and_notes_a_job_it_cannot_take() {
    let home = Home::embedded();
    let os = format!("os={}", std::env::consts::OS);
    let out = home.run(&[
        "jobs",
        "submit",
        "--require",
        &os,
        "--attempts",
        "1",
        "--wait",
        "--",
        "true",
    ]);
    assert!(
        out.status.success(),
        "the in-process worker satisfies {os}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = home.path().join("waiting.log");
    let mut waiting = spawn_waiting_gpu_job(&home, &log);
    let said = home.wait(WAIT, "the waiting command's note", || {
        std::fs::read_to_string(&log)
            .ok()
            .filter(|t| t.contains("no live worker can take job"))
    });
    assert!(
        said.contains("requires gpu") && said.contains("local-") && said.contains(&os),
        "names the in-process worker and its labels: {said}"
    );
    let id = home
        .json(&["jobs", "list"])
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["state"] == "queued")
        .expect("the gpu job is queued")["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let shown = home.job(&id);
    assert_eq!(
        shown["state"], "queued",
        "the in-process worker did not take it: {shown:#}"
    );
    assert!(
        shown["routing_note"]
            .as_str()
            .is_some_and(|n| n.contains("--label gpu")),
        "{shown:#}"
    );
    let _gpu = Reaped(home.spawn_worker("gpu", &["--label", "gpu"]));
    let status = skillforge_tests::wait_exit(&mut waiting.0, WAIT);
    assert!(
        status.success(),
        "{}\n{}",
        std::fs::read_to_string(&log).unwrap_or_default(),
        home.logs()
    );
    let job = home.job(&id);
    assert_eq!(job["state"], "succeeded");
    assert!(
        job["history"][0]["worker"]
            .as_str()
            .unwrap()
            .starts_with("gpu-"),
        "{job:#}"
    );
}

/// `jobs submit --require gpu --idempotency-key needs-gpu --wait -- true` in the background,
/// its stderr (the waiter's notes) to `log`.
fn spawn_waiting_gpu_job(home: &Home, log: &std::path::Path) -> Reaped {
    Reaped(
        home.cmd()
            .args([
                "jobs",
                "submit",
                "--require",
                "gpu",
                "--attempts",
                "1",
                "--idempotency-key",
                "needs-gpu",
                "--wait",
                "--",
                "true",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap(),
    )
}
