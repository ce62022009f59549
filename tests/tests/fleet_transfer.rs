//! A job's files through the CLI on a Redis fleet (issue 20): `jobs submit --file` over the
//! transfer area's caps (refused naming the file and the cap, nothing enqueued), staged files
//! that expire before a worker starts (a clear failure in `jobs show` and in the waiting command,
//! not a hang), a corrupted chunk refused by hash and replaced by the next submit of the same
//! content, and the working directory of a fleet job (never the caller's directory) — each run
//! by a worker that cannot see the control plane's home (`skillforge_tests::isolated`).

use std::process::Stdio;
use std::time::Duration;

use skillforge_tests::isolated::spawn_isolated_worker;
use skillforge_tests::{Home, Reaped, RedisServer, wait_exit};

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

fn config(home: &Home, queue: &str) {
    std::fs::create_dir_all(home.path()).unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!("[queue]\n{queue}\n"),
    )
    .unwrap();
}

/// Chunk keys of the transfer area (`skillforge:xfer:<hex>:<i>`).
fn chunk_keys(redis: &RedisServer) -> Vec<String> {
    let keys = redis
        .cli(&["--scan", "--pattern", "skillforge:xfer:*:*"])
        .unwrap_or_default();
    let mut keys: Vec<String> = keys
        .lines()
        .filter(|k| !k.contains(":rec:"))
        .map(str::to_owned)
        .collect();
    keys.sort();
    keys
}

fn jobs(home: &Home) -> usize {
    home.json(&["jobs", "list"]).as_array().unwrap().len()
}

#[test]
fn a_file_over_the_cap_is_refused_naming_the_file_and_the_cap_and_nothing_is_enqueued() {
    let redis = RedisServer::start();
    let home = Home::redis(&redis.url());
    config(&home, "transfer_max_mb = 1");
    let data = tempfile::tempdir().unwrap();
    let big = data.path().join("big.bin");
    std::fs::write(&big, vec![7u8; (1 << 20) + 1]).unwrap();
    let out = home.run(&[
        "jobs",
        "submit",
        "--file",
        big.to_str().unwrap(),
        "--",
        "true",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&big.display().to_string()) && stderr.contains("1048577 bytes"),
        "names the file and its size: {stderr}"
    );
    assert!(
        stderr.contains("cap of 1048576 bytes") && stderr.contains("transfer_max_mb"),
        "names the cap and its key: {stderr}"
    );
    assert_eq!(jobs(&home), 0, "nothing enqueued");
    // Each file fits; the job's set does not.
    let (a, b) = (data.path().join("a.bin"), data.path().join("b.bin"));
    std::fs::write(&a, vec![1u8; 600_000]).unwrap();
    std::fs::write(&b, vec![2u8; 600_000]).unwrap();
    let out = home.run(&[
        "jobs",
        "submit",
        "--file",
        a.to_str().unwrap(),
        "--file",
        b.to_str().unwrap(),
        "--",
        "true",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("input files")
            && stderr.contains("b.bin")
            && stderr.contains("1200000 bytes")
            && stderr.contains("cap of 1048576"),
        "{stderr}"
    );
    assert_eq!(jobs(&home), 0, "nothing enqueued");
    let out = home.run(&[
        "jobs",
        "submit",
        "--file",
        data.path().join("missing").to_str().unwrap(),
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing"));
    assert_eq!(jobs(&home), 0);
}

#[test]
fn files_expired_before_the_worker_starts_fail_the_job_clearly_in_jobs_show_and_the_waiting_command()
 {
    let redis = RedisServer::start();
    let home = Home::redis(&redis.url());
    config(&home, "transfer_ttl_secs = 1");
    let data = tempfile::tempdir().unwrap();
    let file = data.path().join("input.txt");
    std::fs::write(&file, "soon gone\n").unwrap();
    let log = home.path().join("waiting.log");
    let mut waiting = Reaped(
        home.cmd()
            .args([
                "jobs",
                "submit",
                "--attempts",
                "1",
                "--file",
                file.to_str().unwrap(),
                "--wait",
                "--",
                "cat",
                "input.txt",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    home.wait(WAIT, "the job to be queued", || {
        std::fs::read_to_string(&log)
            .ok()
            .filter(|t| t.contains("queued"))
    });
    home.wait(WAIT, "the staged file to expire", || {
        chunk_keys(&redis).is_empty().then_some(())
    });
    let _vm = Reaped(spawn_isolated_worker(&home, "vm", &[]));
    let status = wait_exit(&mut waiting.0, WAIT);
    let said = std::fs::read_to_string(&log).unwrap();
    assert_eq!(status.code(), Some(1), "{said}\n{}", home.logs());
    assert!(
        said.contains("failed")
            && said.contains("it expired")
            && said.contains("transfer_ttl_secs"),
        "the waiting command says why: {said}"
    );
    let listed = home.json(&["jobs", "list"]);
    let job = home.job(listed[0]["id"].as_str().unwrap());
    assert_eq!(job["state"], "failed", "{job:#}");
    let error = job["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("it expired")
            && error.contains("the job was queued")
            && error.contains("vm-"),
        "{job:#}"
    );
}

#[test]
fn a_corrupted_chunk_is_refused_by_hash_and_the_next_submit_of_the_same_file_replaces_it() {
    let redis = RedisServer::start();
    let home = Home::redis(&redis.url());
    let data = tempfile::tempdir().unwrap();
    let file = data.path().join("input.txt");
    std::fs::write(&file, "the real content\n").unwrap();
    let id = home.submit(
        &["--attempts", "1", "--file", file.to_str().unwrap()],
        &["cat", "input.txt"],
    );
    let keys = chunk_keys(&redis);
    assert_eq!(keys.len(), 1, "{keys:?}");
    redis
        .cli(&["set", &keys[0], "the fake content\n", "KEEPTTL"])
        .unwrap();
    let _vm = Reaped(spawn_isolated_worker(&home, "vm", &[]));
    let job = home.wait_job(&id, WAIT, "the job to end", |j| {
        j["state"] != "queued" && j["state"] != "running"
    });
    assert_eq!(job["state"], "failed", "{job:#}");
    let error = job["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("is corrupt") && error.contains("refused"),
        "{job:#}"
    );
    let out = home.run(&[
        "jobs",
        "submit",
        "--attempts",
        "1",
        "--file",
        file.to_str().unwrap(),
        "--wait",
        "--",
        "cat",
        "input.txt",
    ]);
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        home.logs()
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "the real content\n",
        "the re-staged chunk verified"
    );
    assert_eq!(
        redis.cli(&["get", &keys[0]]).unwrap(),
        "the real content\n\n",
        "the corrupted chunk was replaced"
    );
}

#[test]
fn a_fleet_job_never_runs_in_the_callers_directory() {
    let redis = RedisServer::start();
    let home = Home::redis(&redis.url());
    let caller = home.path().join("project");
    std::fs::create_dir_all(&caller).unwrap();
    std::fs::write(caller.join("data.txt"), "from the caller\n").unwrap();
    let _vm = Reaped(spawn_isolated_worker(&home, "vm", &[]));
    presence(&home, "vm");
    let submit = |flags: &[&str], cmd: &[&str]| {
        let out = home
            .cmd()
            .current_dir(&caller)
            .args(["jobs", "submit", "--attempts", "1"])
            .args(flags)
            .args(["--wait", "--"])
            .args(cmd)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // No --cwd: the worker's job dir, an empty dir of its scratch dir (the caller's is not there).
    let (code, stdout, stderr) = submit(&[], &["pwd"]);
    assert_eq!(code, Some(0), "{stderr}\n{}", home.logs());
    assert!(
        stdout.trim().ends_with("/job") && !stdout.contains("project"),
        "{stdout}"
    );
    let listed = home.json(&["jobs", "list"]);
    let job = home.job(listed[0]["id"].as_str().unwrap());
    assert_eq!(
        job["payload"]["cwd"], "@job_dir@",
        "no control-plane path in the job: {job:#}"
    );
    // --cwd names a directory of the worker, absolute.
    let (code, stdout, stderr) = submit(&["--cwd", "/tmp"], &["pwd"]);
    assert_eq!((code, stdout.trim()), (Some(0), "/tmp"), "{stderr}");
    let (code, _, stderr) = submit(&["--cwd", "project"], &["pwd"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--cwd `project` is relative") && stderr.contains("absolute"),
        "{stderr}"
    );
    // --file: the file travels; the command runs in the job dir beside it.
    let (code, stdout, stderr) = submit(
        &["--file", caller.join("data.txt").to_str().unwrap()],
        &["cat", "data.txt"],
    );
    assert_eq!(
        (code, stdout.as_str()),
        (Some(0), "from the caller\n"),
        "{stderr}\n{}",
        home.logs()
    );
}
