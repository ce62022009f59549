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
    assert!(
        !home.path().join("queue.db").exists(),
        "the queue was not opened"
    );

    write(
        &home.path().join("config.toml"),
        "[worker]\nconcurrency = 0\n",
    );
    let mut child = Reaped(
        home.cmd()
            .arg("worker")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn worker"),
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
    assert!(
        !before.split(',').any(|t| t == "jobs"),
        "the store has no queue table: {before}"
    );
    let url = format!("sqlite://{}", store.display());
    for args in [
        &["jobs", "list"][..],
        &["jobs", "submit", "--", "true"],
        &["worker"],
    ] {
        let mut cmd = home.cmd();
        cmd.arg("--queue")
            .arg(&url)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = Reaped(cmd.spawn().expect("spawn skillforge"));
        let status = wait_exit(&mut child.0, Duration::from_secs(30));
        let mut err = String::new();
        std::io::Read::read_to_string(child.0.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("not a skillforge queue") && err.contains(&store.display().to_string()),
            "{args:?}: {err}"
        );
    }
    assert_eq!(tables(&store), before, "the store's tables are unchanged");
}

/// The password of the test servers; no log line, command line or job environment may show it.
const PASSWORD: &str = "s3cret-Queue-pw-4711";

/// Issue 32 item 8: a Redis URL with a password is shown without it in every log line of
/// `serve` and of a worker (the startup lines included), and in the error of a failed connect.
#[test]
fn redis_url_passwords_are_redacted_in_every_log_line() {
    use skillforge_tests::RedisServer;
    let redis = RedisServer::start_configured(false, Some(PASSWORD), &[]);
    let url = format!("redis://:{PASSWORD}@127.0.0.1:{}", redis.port);
    let home = Home::redis(&url);
    let _serve = Reaped(home.spawn_serve());
    let _worker = Reaped(home.spawn_worker("w", &["-vv"]));
    let id = home.submit(&[], &["true"]);
    home.wait(Duration::from_secs(60), "the result applied", || {
        home.job(&id)["applied"]
            .as_array()
            .filter(|a| !a.is_empty())
            .map(|_| ())
    });
    home.wait(Duration::from_secs(30), "both startup lines", || {
        let logs = home.logs();
        (logs.contains("control plane on") && logs.contains(" labels ")).then_some(())
    });
    let logs = home.logs();
    assert!(!logs.contains(PASSWORD), "{logs}");
    assert!(
        logs.contains(&format!("redis queue redis://***@127.0.0.1:{}", redis.port)),
        "{logs}"
    );

    let wrong = Home::redis(&format!("redis://:wrong-pw-0815@127.0.0.1:{}", redis.port));
    let out = wrong.run(&["jobs", "list"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(!stderr(&out).contains("wrong-pw-0815"), "{}", stderr(&out));
    assert!(stderr(&out).contains("***@127.0.0.1"), "{}", stderr(&out));
}

/// Issue 32 item 8: the password can be given apart from the URL, by `SKILLFORGE_QUEUE_PASSWORD`
/// or `[queue] password_file`; then it is on no command line, the worker's jobs do not see it
/// in their environment or their worker's argv, and no log shows it.
#[test]
fn the_queue_password_comes_from_env_or_file_and_reaches_no_job() {
    use skillforge_tests::RedisServer;
    let redis = RedisServer::start_configured(false, Some(PASSWORD), &[]);
    let home = Home::redis(&redis.url());
    // Without the password the server refuses: exit 3, nothing is guessed.
    let out = home.run(&["jobs", "list"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));

    write(&home.path().join("queue.pass"), &format!("{PASSWORD}\n"));
    write(
        &home.path().join("config.toml"),
        "[queue]\npassword_file = \"queue.pass\"\n",
    );
    let _serve = Reaped(home.spawn_serve());
    // A worker given the password by the environment (and no password file).
    let other_home = tempfile::tempdir().unwrap();
    let log = std::fs::File::create(home.path().join("worker-env.log")).unwrap();
    let _worker = Reaped(
        std::process::Command::new(skillforge_tests::bin())
            .args(["--home"])
            .arg(other_home.path())
            .args(["--queue", &redis.url(), "worker", "--name", "env"])
            .env("SKILLFORGE_QUEUE_PASSWORD", PASSWORD)
            .env("SKILLFORGE_LOG", "debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let id = home.submit(
        &[],
        &[
            "sh",
            "-c",
            "tr '\\0' ' ' </proc/$PPID/cmdline; echo; env; echo end-of-job",
        ],
    );
    let job = home.wait_job(&id, Duration::from_secs(60), "the job to succeed", |j| {
        j["state"] == "succeeded"
    });
    let stdout = job["stdout_tail"].as_str().unwrap();
    assert!(
        stdout.contains("worker --name env") && stdout.contains("end-of-job"),
        "{stdout}"
    );
    assert!(
        !stdout.contains(PASSWORD),
        "the job saw the password: {stdout}"
    );
    assert!(!stdout.contains("SKILLFORGE_QUEUE_PASSWORD"), "{stdout}");
    home.wait(Duration::from_secs(60), "the result applied", || {
        home.job(&id)["applied"]
            .as_array()
            .filter(|a| !a.is_empty())
            .map(|_| ())
    });
    let logs = home.logs();
    assert!(logs.contains("control plane on"), "{logs}");
    assert!(!logs.contains(PASSWORD), "{logs}");

    // A password both in the URL and apart from it is refused (exit 2), naming both sources.
    let both = Home::redis(&format!("redis://:{PASSWORD}@127.0.0.1:{}", redis.port));
    write(&both.path().join("queue.pass"), PASSWORD);
    write(
        &both.path().join("config.toml"),
        "[queue]\npassword_file = \"queue.pass\"\n",
    );
    let out = both.run(&["jobs", "list"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("password_file") && !stderr(&out).contains(PASSWORD),
        "{}",
        stderr(&out)
    );
    // A password file that is missing is exit 2 naming it.
    write(
        &both.path().join("config.toml"),
        "[queue]\npassword_file = \"missing.pass\"\n",
    );
    let out = std::process::Command::new(skillforge_tests::bin())
        .arg("--home")
        .arg(both.path())
        .args(["--queue", &redis.url(), "jobs", "list"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("missing.pass"), "{}", stderr(&out));
}

/// Issue 32 item 8: `jobs submit --secret-env NAME` takes the value from the submitter's
/// environment (no command line shows it), the job gets it, and `jobs show` / `jobs list`
/// (`--json` too) and the logs show `***` instead; a variable that is not set is exit 2.
#[test]
fn secret_env_reaches_the_job_and_is_never_shown() {
    const VALUE: &str = "tok-7f3a-secret-value";
    let home = Home::embedded();
    let out = home
        .cmd()
        .env("DEPLOY_TOKEN", VALUE)
        .args(["-vv", "jobs", "submit", "--wait", "--secret-env", "DEPLOY_TOKEN", "--env", "PLAIN=visible"])
        // The command checks the value without naming it (a command line is shown by `jobs list`).
        .args(["--", "sh", "-c", "case \"$DEPLOY_TOKEN\" in tok-7f3a-*) [ ${#DEPLOY_TOKEN} = 21 ] && echo token-ok;; esac"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("token-ok"));
    assert!(!stderr(&out).contains(VALUE), "{}", stderr(&out));
    let jobs = home.json(&["jobs", "list"]);
    let job = &jobs[0];
    assert_eq!(job["payload"]["env"]["DEPLOY_TOKEN"], "***", "{job:#}");
    assert_eq!(job["payload"]["env"]["PLAIN"], "visible", "{job:#}");
    let id = job["id"].as_str().unwrap();
    for args in [
        &["jobs", "list"][..],
        &["jobs", "show", id],
        &["--json", "jobs", "list"],
        &["--json", "jobs", "show", id],
    ] {
        let out = home.run(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        let shown = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        assert!(!shown.contains(VALUE), "{args:?}: {shown}");
    }

    let out = home
        .cmd()
        .env_remove("NOT_SET_HERE")
        .args([
            "jobs",
            "submit",
            "--secret-env",
            "NOT_SET_HERE",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("NOT_SET_HERE"), "{}", stderr(&out));
    assert_eq!(
        home.json(&["jobs", "list"]).as_array().map(Vec::len),
        Some(1),
        "nothing more enqueued"
    );
}

/// Runs `skillforge ARGS` in `home` with stderr captured, waiting for it to exit (at most 60 s).
fn run_to_exit(home: &Home, args: &[&str]) -> (Option<i32>, String) {
    let mut child = Reaped(
        home.cmd()
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let status = wait_exit(&mut child.0, Duration::from_secs(60));
    let mut err = String::new();
    std::io::Read::read_to_string(child.0.stderr.as_mut().unwrap(), &mut err).unwrap();
    (status.code(), err)
}

/// Issue 32 item 1: on a Redis whose `maxmemory-policy` evicts keys, `worker`, `serve` and
/// `jobs submit` refuse to start (exit 3) naming the setting and the fix, with nothing
/// enqueued; with `CONFIG` disabled the policy is read from `INFO memory`; a policy changed
/// under running processes is logged by each as an error.
#[test]
fn an_evicting_redis_is_refused_and_a_policy_change_is_reported() {
    use skillforge_tests::RedisServer;
    for extra in [
        &["--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"][..],
        &[
            "--maxmemory",
            "64mb",
            "--maxmemory-policy",
            "volatile-lru",
            "--rename-command",
            "CONFIG",
            "",
        ],
    ] {
        let redis = RedisServer::start_configured(false, None, extra);
        let home = Home::redis(&redis.url());
        for args in [
            &["worker"][..],
            &["serve"],
            &["jobs", "submit", "--", "true"],
        ] {
            let (code, err) = run_to_exit(&home, args);
            assert_eq!(code, Some(3), "{extra:?} {args:?}: {err}");
            assert!(
                err.contains("maxmemory-policy")
                    && err.contains("noeviction")
                    && err.contains(extra[3]),
                "{args:?}: {err}"
            );
        }
        let jobs = home.json(&["jobs", "list"]);
        assert_eq!(
            jobs.as_array().map(Vec::len),
            Some(0),
            "nothing enqueued: {jobs:#}"
        );
    }

    let redis = RedisServer::start_configured(
        false,
        None,
        &["--maxmemory", "64mb", "--maxmemory-policy", "noeviction"],
    );
    let home = Home::redis(&redis.url());
    let _serve = Reaped(home.spawn_serve());
    let _worker = Reaped(home.spawn_worker("w", &[]));
    let id = home.submit(&[], &["true"]);
    home.wait_job(&id, Duration::from_secs(60), "the job to succeed", |j| {
        j["state"] == "succeeded"
    });
    redis
        .cli(&["config", "set", "maxmemory-policy", "allkeys-lfu"])
        .expect("config set");
    home.wait(
        Duration::from_secs(60),
        "serve and the worker to report the policy",
        || {
            let logs = home.logs();
            (logs
                .lines()
                .filter(|l| {
                    l.contains("ERROR")
                        && l.contains("maxmemory-policy")
                        && l.contains("allkeys-lfu")
                })
                .count()
                >= 2)
                .then_some(())
        },
    );
}

/// Issue 32 item 2: a job whose payload key is gone (evicted, deleted by hand) does not stop
/// anything: `jobs list` shows the other jobs (exit 0) and counts it, `serve` quarantines its
/// result and logs it once while every other result is applied, `jobs list --state broken`
/// lists it with the reason and `jobs purge ID` removes it (and refuses a readable job).
#[test]
fn an_unreadable_job_record_is_quarantined_and_everything_else_flows() {
    use skillforge_tests::RedisServer;
    let t = Duration::from_secs(60);
    let redis = RedisServer::start();
    let home = Home::redis(&redis.url());
    let mut worker = Reaped(home.spawn_worker("w", &[]));
    // A payload over 64 bytes is kept in its own key, `job:<id>:p`.
    let long_arg = "x".repeat(100);
    let broken = home.submit(&[], &["true", &long_arg]);
    let fine = home.submit(&[], &["true"]);
    for id in [&broken, &fine] {
        home.wait_job(id, t, "the job to succeed", |j| j["state"] == "succeeded");
    }
    let _ = worker.0.kill();
    let keys = redis
        .cli(&["--scan", "--pattern", "skillforge:job:*:p"])
        .unwrap();
    let keys: Vec<&str> = keys.lines().filter(|l| !l.is_empty()).collect();
    let key = keys
        .iter()
        .find(|k| {
            redis
                .cli(&["get", k])
                .is_some_and(|v| v.contains(&long_arg))
        })
        .unwrap_or_else(|| panic!("the long payload's key among {keys:?}"));
    redis.cli(&["del", key]).unwrap();

    let out = home.run(&["--json", "jobs", "list"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [fine.as_str()], "{listed:#}");
    assert!(
        stderr(&out).contains("1 job record(s) could not be read")
            && stderr(&out).contains(&broken),
        "{}",
        stderr(&out)
    );

    let _serve = Reaped(home.spawn_serve());
    home.wait(t, "the readable result applied", || {
        home.job(&fine)["applied"]
            .as_array()
            .filter(|a| !a.is_empty())
            .map(|_| ())
    });
    let quarantined = home.wait(t, "the broken record quarantined", || {
        let list = home.json(&["jobs", "list", "--state", "broken"]);
        (list.as_array().unwrap().len() == 1).then_some(list)
    });
    assert_eq!(quarantined[0]["id"], broken.as_str(), "{quarantined:#}");
    assert!(
        quarantined[0]["reason"].as_str().unwrap().contains("`p`"),
        "{quarantined:#}"
    );
    assert!(
        quarantined[0]["quarantined_at"].is_string(),
        "{quarantined:#}"
    );
    // Further passes do not log it again, and later results still flow.
    let mut worker = Reaped(home.spawn_worker("w2", &[]));
    let later = home.submit(&[], &["true"]);
    home.wait(t, "a later result applied", || {
        home.job(&later)["applied"]
            .as_array()
            .filter(|a| !a.is_empty())
            .map(|_| ())
    });
    let _ = worker.0.kill();
    let logs = home.logs();
    assert_eq!(
        logs.lines()
            .filter(|l| l.contains("quarantined") && l.contains(&broken))
            .count(),
        1,
        "{logs}"
    );

    let out = home.run(&["jobs", "show", &broken]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("jobs purge"),
        "says what to do: {}",
        stderr(&out)
    );
    let (human, _) = skillforge_tests::run_code(&home, &["jobs", "list", "--state", "broken"], 0);
    assert!(
        human.contains(&broken) && human.contains("REASON"),
        "{human}"
    );
    let out = home.run(&["jobs", "purge", &fine]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a readable job is never purged: {}",
        stderr(&out)
    );
    assert_eq!(home.job(&fine)["state"], "succeeded");
    skillforge_tests::ok(&home, &["jobs", "purge", &broken]);
    assert_eq!(
        home.json(&["jobs", "list", "--state", "broken"])
            .as_array()
            .map(Vec::len),
        Some(0)
    );
    let broken_keys = format!("{}*", key.trim_end_matches(":p"));
    let leftovers = redis.cli(&["--scan", "--pattern", &broken_keys]).unwrap();
    assert!(
        leftovers.trim().is_empty(),
        "every key of the purged job is gone: {leftovers}"
    );
}

/// Issue 32 item 2 on the embedded queue, as on Redis: a job row whose outcome does not decode
/// (edited by hand) does not stop anything: `jobs list` shows the other jobs and counts it,
/// `serve` quarantines its result (logged once) while every other result is applied, `jobs list
/// --state broken` lists it with the reason, `jobs purge ID` removes every row of it and refuses
/// a readable job.
#[test]
fn an_unreadable_job_record_on_the_embedded_queue_is_quarantined_and_everything_else_flows() {
    let t = Duration::from_secs(60);
    let home = Home::embedded();
    let mut worker = Reaped(home.spawn_worker("w", &[]));
    let broken = home.submit(&[], &["true"]);
    let fine = home.submit(&[], &["true"]);
    for id in [&broken, &fine] {
        home.wait_job(id, t, "the job to succeed", |j| j["state"] == "succeeded");
    }
    let _ = worker.0.kill();
    let _ = worker.0.wait();
    let queue = home.path().join("queue.db");
    let key = format!("X'{}'", broken.replace('-', ""));
    let sql = |q: &str| {
        let out = std::process::Command::new("sqlite3")
            .arg(&queue)
            .arg(q)
            .stdin(Stdio::null())
            .output()
            .expect("run sqlite3");
        assert!(out.status.success(), "sqlite3 {q}: {}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    sql(&format!(
        "UPDATE jobs SET outcome = '{{not json' WHERE id = {key};"
    ));

    let out = home.run(&["--json", "jobs", "list"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [fine.as_str()], "{listed:#}");
    assert!(
        stderr(&out).contains("1 job record(s) could not be read")
            && stderr(&out).contains(&broken),
        "{}",
        stderr(&out)
    );

    let _serve = Reaped(home.spawn_serve());
    home.wait(t, "the readable result applied", || {
        home.job(&fine)["applied"]
            .as_array()
            .filter(|a| !a.is_empty())
            .map(|_| ())
    });
    let quarantined = home.wait(t, "the broken record quarantined", || {
        let list = home.json(&["jobs", "list", "--state", "broken"]);
        (list.as_array().unwrap().len() == 1).then_some(list)
    });
    assert_eq!(quarantined[0]["id"], broken.as_str(), "{quarantined:#}");
    assert!(
        quarantined[0]["reason"]
            .as_str()
            .unwrap()
            .contains("outcome"),
        "{quarantined:#}"
    );
    assert!(
        quarantined[0]["quarantined_at"].is_string(),
        "{quarantined:#}"
    );
    let mut worker = Reaped(home.spawn_worker("w2", &[]));
    let later = home.submit(&[], &["true"]);
    home.wait(t, "a later result applied", || {
        home.job(&later)["applied"]
            .as_array()
            .filter(|a| !a.is_empty())
            .map(|_| ())
    });
    let _ = worker.0.kill();
    let logs = home.logs();
    assert_eq!(
        logs.lines()
            .filter(|l| l.contains("quarantined") && l.contains(&broken))
            .count(),
        1,
        "{logs}"
    );

    let out = home.run(&["jobs", "show", &broken]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("jobs purge"),
        "says what to do: {}",
        stderr(&out)
    );
    let out = home.run(&["jobs", "purge", &fine]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a readable job is never purged: {}",
        stderr(&out)
    );
    assert_eq!(home.job(&fine)["state"], "succeeded");
    skillforge_tests::ok(&home, &["jobs", "purge", &broken]);
    assert_eq!(
        home.json(&["jobs", "list", "--state", "broken"])
            .as_array()
            .map(Vec::len),
        Some(0)
    );
    let left = sql(&format!(
        "SELECT (SELECT count(*) FROM jobs WHERE id = {key}) + (SELECT count(*) FROM job_attempts WHERE job_id = {key}) \
         + (SELECT count(*) FROM broken_jobs WHERE id = {key});"
    ));
    assert_eq!(left, "0", "every row of the purged job is gone");
    assert_eq!(
        sql("SELECT count(*) FROM job_specs WHERE seq NOT IN (SELECT seq FROM jobs);"),
        "0",
        "its spec too"
    );
}

/// Issue 32 item 4: a finish that Redis refuses with OOM (`maxmemory` reached under
/// `noeviction`) is sent again while the lease is held, never dropped: once memory is back the
/// result arrives, the job ran once and `serve` applies it.
#[test]
fn a_finish_refused_for_oom_is_retried_until_delivered() {
    use skillforge_tests::RedisServer;
    let t = Duration::from_secs(60);
    let redis = RedisServer::start_configured(false, None, &["--maxmemory-policy", "noeviction"]);
    let home = Home::redis(&redis.url());
    let _serve = Reaped(home.spawn_serve());
    // At debug level the worker logs each refused try of its finish.
    let log = std::fs::File::create(home.path().join("worker-debug.log")).unwrap();
    let _worker = Reaped(
        home.cmd()
            .env("SKILLFORGE_LOG", "debug")
            .args(["worker", "--name", "w"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let id = home.submit(
        &["--cwd", dir.path().to_str().unwrap()],
        &[
            "sh",
            "-c",
            "touch started; while [ ! -e release ]; do sleep 0.05; done; echo ran >> runs",
        ],
    );
    home.wait(t, "the job to start", || {
        dir.path().join("started").exists().then_some(())
    });
    // Every write is refused from now on: `used_memory` is above a 1-byte `maxmemory`.
    redis
        .cli(&["config", "set", "maxmemory", "1"])
        .expect("config set maxmemory");
    std::fs::write(dir.path().join("release"), "").unwrap();
    home.wait(t, "the worker to retry the refused finish", || {
        home.logs()
            .lines()
            .any(|l| {
                l.contains("OOM")
                    && l.contains("finish")
                    && (l.contains("retrying") || l.contains("sending it again"))
            })
            .then_some(())
    });
    redis
        .cli(&["config", "set", "maxmemory", "0"])
        .expect("config set maxmemory");
    let job = home.wait_job(&id, t, "the job to succeed", |j| j["state"] == "succeeded");
    assert_eq!(job["attempts"], 1, "ran once: {job:#}\n{}", home.logs());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("runs")).unwrap(),
        "ran\n"
    );
    home.wait(t, "the result applied", || {
        home.job(&id)["applied"]
            .as_array()
            .filter(|a| !a.is_empty())
            .map(|_| ())
    });
    let logs = home.logs();
    assert!(!logs.contains("result not delivered"), "{logs}");
}

/// Issue 32 item 5: Redis losing its data while no skillforge process runs is reported by the
/// next `serve`: the store keeps the namespace epoch it last saw, and `serve` compares it at
/// start and names the store's pending work the queue no longer has.
#[test]
fn a_queue_that_lost_its_data_while_nothing_ran_is_reported_by_the_next_serve() {
    use skillforge_tests::{PLANNER_TEMPLATE, RedisServer, add_template, path_arg};
    let t = Duration::from_secs(60);
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
    let out = home.run(&["train", "continue", "--session", "s1", "--no-wait"]);
    // Exit 4: the option jobs are queued, not decided yet.
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let ids: Vec<String> = home
        .json(&["jobs", "list"])
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(!ids.is_empty());

    // A first serve records the epoch, then stops; the data is lost while nothing runs.
    let mut serve = Reaped(home.spawn_serve());
    home.wait(t, "serve to start", || {
        home.logs().contains("control plane on").then_some(())
    });
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(serve.0.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    wait_exit(&mut serve.0, t);
    redis.cli(&["flushall"]).expect("flushall");
    assert!(
        !home.logs().contains("lost its data"),
        "nothing ran to see it"
    );

    let _serve = Reaped(home.spawn_serve());
    let line = home.wait(t, "the next serve to name the lost work", || {
        home.logs()
            .lines()
            .find(|l| l.contains("the store awaits are gone from the queue"))
            .map(str::to_owned)
    });
    for id in &ids {
        assert!(line.contains(id.as_str()), "{id}: {line}");
    }
    assert_eq!(
        home.logs()
            .matches("lost its data since this control plane last ran")
            .count(),
        1,
        "{}",
        home.logs()
    );
}

/// Issue 32 item 10: clients that open connections to `serve --listen` and send nothing are
/// cut off after the header read timeout, and at most a bounded number are served at once (the
/// rest wait in the listen backlog, not as `serve`'s file descriptors), so a signed delivery
/// behind 60 idle connections is still answered and `serve`'s fds stay bounded.
#[test]
fn serve_listen_cuts_off_idle_clients_and_caps_its_connections() {
    use skillforge_tests::webhook::{post, sign, spawn_serve, wait_listening};
    const SECRET: &str = "webhook-secret-for-tests";
    let home = Home::embedded();
    let port = skillforge_tests::free_port();
    let serve = Reaped(spawn_serve(&home, port, Some(SECRET), &[]));
    wait_listening(&home, port);
    let fds = || {
        std::fs::read_dir(format!("/proc/{}/fd", serve.0.id()))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    let baseline = fds();
    let idle: Vec<std::net::TcpStream> = (0..60)
        .map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect"))
        .collect();
    let (status, body) = post(port, "ping", "{}", Some(&sign(SECRET, "{}")));
    assert!((200..300).contains(&status), "{status} {body}");
    let now = fds();
    assert!(
        now <= baseline + 36,
        "serve holds {now} fds (baseline {baseline}) with 60 idle clients\n{}",
        home.logs()
    );
    // The first idle clients were cut off by the server (EOF), not kept open.
    let mut first = &idle[0];
    first
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut buf = [0u8; 64];
    let n = std::io::Read::read(&mut first, &mut buf).unwrap_or(0);
    assert_eq!(n, 0, "the server closed an idle connection");
}

/// The status of a raw `POST /events` whose headers are sent on `stream` (the body, if any, by
/// the caller): reads the answer with a 10 s timeout; `None` when none came.
fn events_status(stream: &mut std::net::TcpStream) -> Option<u16> {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut response = Vec::new();
    let _ = std::io::Read::read_to_end(stream, &mut response);
    String::from_utf8_lossy(&response)
        .split(' ')
        .nth(1)?
        .parse()
        .ok()
}

/// Opens a connection and sends the headers of a `POST /events` declaring `length` body bytes,
/// signed `signature` (none: no signature header).
fn events_request(port: u16, length: usize, signature: Option<&str>) -> std::net::TcpStream {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let sig = signature
        .map(|s| format!("X-Hub-Signature-256: {s}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "POST /events HTTP/1.1\r\nHost: localhost\r\nX-GitHub-Event: ping\r\n{sig}Content-Length: {length}\r\nConnection: close\r\n\r\n"
    );
    std::io::Write::write_all(&mut stream, head.as_bytes()).unwrap();
    stream
}

/// Issue 32 item 10: `serve --listen` reads no body of a request without a well-formed
/// signature (401 at once, though 1 MiB was announced and nothing sent), and holds at most a
/// bounded total of unverified body bytes across clients: past it a body is refused with 503
/// (a signed one too, until the unverified ones end); once they end, a signed delivery is
/// answered again.
#[test]
fn serve_listen_reads_no_unsigned_body_and_bounds_unverified_ones() {
    use skillforge_tests::webhook::{post, sign, spawn_serve, wait_listening};
    const SECRET: &str = "webhook-secret-for-tests";
    let home = Home::embedded();
    let port = skillforge_tests::free_port();
    let _serve = Reaped(spawn_serve(&home, port, Some(SECRET), &[]));
    wait_listening(&home, port);
    let started = std::time::Instant::now();
    let mut unsigned = events_request(port, 1 << 20, None);
    assert_eq!(
        events_status(&mut unsigned),
        Some(401),
        "refused before its body: {}",
        home.logs()
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered at once, not after the connection timeout"
    );
    let mut malformed = events_request(port, 1 << 20, Some("sha256=not-hex"));
    assert_eq!(events_status(&mut malformed), Some(401));

    // Four clients each send all but the last byte of a 1 MiB body under a signature of the
    // right shape (a wrong one): the unverified budget (4 MiB) is taken.
    let wrong = format!("sha256={}", "0".repeat(64));
    let mut holders: Vec<std::net::TcpStream> = (0..4)
        .map(|_| {
            let mut s = events_request(port, 1 << 20, Some(&wrong));
            std::io::Write::write_all(&mut s, &vec![b'x'; (1 << 20) - 1]).unwrap();
            s
        })
        .collect();
    let body = "{\"zen\": \"x\"}";
    home.wait(
        Duration::from_secs(20),
        "a body over the unverified budget to be refused with 503",
        || {
            let mut probe = events_request(port, body.len(), Some(&wrong));
            std::io::Write::write_all(&mut probe, body.as_bytes()).unwrap();
            (events_status(&mut probe) == Some(503)).then_some(())
        },
    );
    let (status, _) = post(port, "ping", body, Some(&sign(SECRET, body)));
    assert_eq!(
        status, 503,
        "a signed body waits for the unverified ones too"
    );
    for holder in &mut holders {
        std::io::Write::write_all(holder, b"x").unwrap();
        assert_eq!(
            events_status(holder),
            Some(401),
            "verified at its end, and refused"
        );
    }
    home.wait(
        Duration::from_secs(20),
        "a signed delivery answered again",
        || {
            let (status, _) = post(port, "ping", body, Some(&sign(SECRET, body)));
            (200..300).contains(&status).then_some(())
        },
    );
}

/// Issue 32 item 9: `rediss://` works (TLS by rustls, certificates verified against the
/// system's roots, or `SSL_CERT_FILE`): a worker and a submitter reach a `redis-server` that
/// speaks TLS with a CA made here, and a client that does not trust that CA is refused (exit 3).
#[test]
fn rediss_queues_run_jobs_over_verified_tls() {
    use skillforge_tests::RedisServer;
    let certs = tempfile::tempdir().unwrap();
    let dir = certs.path();
    let openssl = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl is installed");
        assert!(out.status.success(), "openssl {args:?}: {}", stderr(&out));
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "1",
        "-subj",
        "/CN=skillforge test CA",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    write(
        &dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
    );
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "1",
        "-extfile",
        "ext.cnf",
    ]);
    let tls_port = skillforge_tests::free_port().to_string();
    let path = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let (cert, key, ca) = (path("server.pem"), path("server.key"), path("ca.pem"));
    // Kept alive to the end of the test (shut down on drop).
    let _redis = RedisServer::start_configured(
        false,
        None,
        &[
            "--tls-port",
            &tls_port,
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "--tls-ca-cert-file",
            &ca,
            "--tls-auth-clients",
            "no",
        ],
    );
    let home = Home::redis(&format!("rediss://127.0.0.1:{tls_port}"));
    let log = std::fs::File::create(home.path().join("worker-tls.log")).unwrap();
    let _worker = Reaped(
        home.cmd()
            .env("SSL_CERT_FILE", &ca)
            .args(["worker", "--name", "tls"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let out = home
        .cmd()
        .env("SSL_CERT_FILE", &ca)
        .args(["jobs", "submit", "--wait", "--", "echo", "over-tls"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        stderr(&out),
        home.logs()
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("over-tls"));
    // A client that does not trust the CA does not connect.
    let out = home
        .cmd()
        .env("SSL_CERT_FILE", dir.join("server.csr"))
        .args(["jobs", "list"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "an untrusted certificate is refused: {}",
        stderr(&out)
    );
}

/// Issue 32 item 12: a Redis at its `maxclients` limit refuses a new client with "max number of
/// clients reached"; the command's error names the `maxclients` setting and what to do (exit 3).
#[test]
fn a_redis_at_maxclients_is_named_in_the_error() {
    use skillforge_tests::RedisServer;
    let redis = RedisServer::start_configured(false, None, &["--maxclients", "1"]);
    // The one client slot is taken (a connection that says nothing still counts).
    let held = std::net::TcpStream::connect(("127.0.0.1", redis.port)).unwrap();
    let home = Home::redis(&redis.url());
    let (code, err) = run_to_exit(&home, &["jobs", "list"]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("maxclients"), "names the setting: {err}");
    drop(held);
}

/// Issue 32 item 1: when the eviction policy changes under a running `serve`, it names the jobs
/// the store awaits, which the server may now evict.
#[test]
fn an_eviction_policy_set_under_serve_names_the_work_at_risk() {
    use skillforge_tests::{PLANNER_TEMPLATE, RedisServer, add_template, path_arg};
    let t = Duration::from_secs(60);
    let redis = RedisServer::start_configured(
        false,
        None,
        &["--maxmemory", "64mb", "--maxmemory-policy", "noeviction"],
    );
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
    let out = home.run(&["train", "continue", "--session", "s1", "--no-wait"]);
    // Exit 4: the option jobs are queued, not decided yet.
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let ids: Vec<String> = home
        .json(&["jobs", "list"])
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(!ids.is_empty());
    let _serve = Reaped(home.spawn_serve());
    home.wait(t, "serve to start", || {
        home.logs().contains("control plane on").then_some(())
    });
    redis
        .cli(&["config", "set", "maxmemory-policy", "allkeys-lru"])
        .expect("config set");
    let line = home.wait(t, "serve to name the work at risk", || {
        home.logs()
            .lines()
            .find(|l| l.contains("may be evicted from the queue"))
            .map(str::to_owned)
    });
    for id in &ids {
        assert!(
            line.contains(id.as_str()) && line.contains("train/option_generation"),
            "{id}: {line}"
        );
    }
}

/// Issue 32 item 10: `serve` raises its soft open-files limit to the hard one at start, so a
/// low default soft limit (1 024 on many systems) is not what its connections run into.
#[test]
fn serve_raises_its_soft_open_files_limit_to_the_hard_one() {
    let home = Home::embedded();
    let log = std::fs::File::create(home.path().join("serve-limits.log")).unwrap();
    let mut cmd = home.cmd();
    cmd.arg("serve");
    // `ulimit -Sn 256; exec skillforge --home … serve` (the program and its arguments as $0 $@).
    let program = cmd.get_program().to_owned();
    let args: Vec<std::ffi::OsString> = cmd.get_args().map(ToOwned::to_owned).collect();
    let serve = Reaped(
        std::process::Command::new("sh")
            .arg("-c")
            .arg("ulimit -Sn 256 && exec \"$0\" \"$@\"")
            .arg(program)
            .args(args)
            .envs(
                cmd.get_envs()
                    .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let limits = home.wait(Duration::from_secs(30), "serve to start", || {
        home.logs()
            .contains("control plane on")
            .then(|| std::fs::read_to_string(format!("/proc/{}/limits", serve.0.id())).unwrap())
    });
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let numbers: Vec<&str> = line.split_whitespace().skip(3).take(2).collect();
    assert_eq!(numbers[0], numbers[1], "soft = hard: {line}");
    assert_ne!(numbers[0], "256", "{line}");
}

/// Issue 32 item 5: a `jobs submit --wait` whose job the queue loses (Redis flushed while it
/// waits) says the job was lost (exit 3), not that it "stays in the queue".
#[test]
fn a_waiting_submit_says_its_job_was_lost_when_the_queue_loses_it() {
    use skillforge_tests::RedisServer;
    let redis = RedisServer::start();
    let home = Home::redis(&redis.url());
    let child = home
        .cmd()
        .args(["jobs", "submit", "--wait", "--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = Reaped(child);
    home.wait(Duration::from_secs(30), "the job to be queued", || {
        home.json(&["jobs", "list"])
            .as_array()
            .filter(|a| !a.is_empty())
            .map(|_| ())
    });
    redis.cli(&["flushall"]).expect("flushall");
    let status = wait_exit(&mut child.0, Duration::from_secs(60));
    let mut err = String::new();
    std::io::Read::read_to_string(child.0.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(3), "{err}");
    assert!(
        err.contains("was lost") && !err.contains("stays in the queue"),
        "{err}"
    );
}

/// Issue 32 item 5, for every waiting command: they all wait through the one waiter, so
/// `verify` and `check`, whose jobs the queue loses while they wait (Redis flushed), end saying
/// the job was lost and how to enqueue it again (the store kept its spec), not "no job" and not
/// that it stays in the queue; nothing is written to the store as a result.
#[test]
fn every_waiting_command_says_its_job_was_lost_when_the_queue_loses_it() {
    use skillforge_tests::RedisServer;
    let redis = RedisServer::start();
    let home = Home::redis(&redis.url());
    let (repo, base, head) = skillforge_tests::two_commit_repo();
    let repo = repo.path().to_str().unwrap().to_owned();
    let commands: [&[&str]; 2] = [
        &["verify", "--repo", &repo, "--", "true"],
        &["check", "--repo", &repo, "--base", &base, "--head", &head],
    ];
    for args in commands {
        let mut child = Reaped(
            home.cmd()
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        home.wait(
            Duration::from_secs(30),
            "the command's job to be queued",
            || {
                home.json(&["jobs", "list", "--state", "queued"])
                    .as_array()
                    .filter(|a| !a.is_empty())
                    .map(|_| ())
            },
        );
        redis.cli(&["flushall"]).expect("flushall");
        let status = wait_exit(&mut child.0, Duration::from_secs(60));
        let mut err = String::new();
        std::io::Read::read_to_string(child.0.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(3), "{args:?}: {err}");
        assert!(
            err.contains("was lost: the queue no longer has it"),
            "{args:?}: {err}"
        );
        assert!(
            err.contains("skillforge jobs resubmit-lost"),
            "{args:?}: {err}"
        );
        assert!(
            !err.contains("no job `") && !err.contains("stays in the queue"),
            "{args:?}: {err}"
        );
    }
}

/// Issue 32 item 11: on the embedded queue a reaper whose clock is 60 s ahead (`serve` under
/// `faketime +60s`, its monotonic clock real) sees every lease and lock past its deadline, but
/// a live worker keeps heartbeating: neither its job's lease nor the job's named lock nor its
/// presence lock is taken away, and the job runs once and succeeds.
#[test]
fn a_forward_clock_step_in_a_reaper_does_not_reap_live_work() {
    let t = Duration::from_secs(60);
    let home = Home::embedded();
    let _worker = Reaped(home.spawn_worker("w", &[]));
    let dir = tempfile::tempdir().unwrap();
    let id = home.submit(
        &[
            "--heartbeat",
            "0.3",
            "--stale-after",
            "2",
            "--lock",
            "clock-step",
            "--cwd",
            dir.path().to_str().unwrap(),
        ],
        &[
            "sh",
            "-c",
            "echo run >> runs; touch started; while [ ! -e release ]; do sleep 0.05; done",
        ],
    );
    home.wait(t, "the job to start", || {
        dir.path().join("started").exists().then_some(())
    });
    let mut cmd = home.cmd();
    cmd.arg("serve");
    let log = std::fs::File::create(home.path().join("serve-ahead.log")).unwrap();
    let _serve = Reaped(
        std::process::Command::new(cmd.get_program())
            .args(cmd.get_args())
            // libfaketime preloaded into the process itself: the `faketime` program would
            // run it as a child, left running when the wrapper is killed.
            .env("LD_PRELOAD", skillforge_tests::faketime_lib())
            .env("FAKETIME", "+60s")
            .envs(
                cmd.get_envs()
                    .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))),
            )
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start a process under libfaketime"),
    );
    home.wait(t, "serve to start", || {
        home.logs().contains("control plane on").then_some(())
    });
    // Long enough for any reaper to act: the lease's heartbeat moved on 3 s (10 beats, well past
    // the 0.9 s confirmation) after serve started, under the same token.
    let first = home.job(&id)["lease"]["heartbeat_at"]
        .as_str()
        .unwrap()
        .to_owned();
    let started = std::time::Instant::now();
    home.wait(
        t,
        "the lease to keep heartbeating for 3 s beside the reaper",
        || {
            let job = home.job(&id);
            assert_eq!(
                job["fencing_token"],
                1,
                "the lease was taken away: {job:#}\n{}",
                home.logs()
            );
            (started.elapsed() >= Duration::from_secs(3)
                && job["lease"]["heartbeat_at"].as_str() != Some(first.as_str()))
            .then_some(())
        },
    );
    std::fs::write(dir.path().join("release"), "").unwrap();
    let job = home.wait_job(&id, t, "the job to succeed", |j| j["state"] == "succeeded");
    assert_eq!(job["attempts"], 1, "{job:#}\n{}", home.logs());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("runs")).unwrap(),
        "run\n",
        "ran once"
    );
    let logs = home.logs();
    assert!(
        !logs.contains("stale lease reaped") && !logs.contains("lock lost"),
        "{logs}"
    );
    assert!(
        !logs.contains("stale named lock freed"),
        "neither the job's lock nor a presence lock: {logs}"
    );
}

/// Issue 32 item 2: an unreadable queued job (a field that does not parse) leased in the same
/// call as a readable one does not cost the readable one its lease (it runs once, attempt 1);
/// the unreadable one is never run, is freed by the reaper until its attempts are spent, and its
/// result is quarantined.
#[test]
fn an_unreadable_queued_job_does_not_take_the_others_leased_with_it() {
    use skillforge_tests::RedisServer;
    let t = Duration::from_secs(60);
    let redis = RedisServer::start();
    let home = Home::redis(&redis.url());
    let long_arg = "y".repeat(100);
    let broken = home.submit(
        &[
            "--attempts",
            "1",
            "--heartbeat",
            "0.5",
            "--stale-after",
            "2",
        ],
        &["true", &long_arg],
    );
    let fine = home.submit(&["--heartbeat", "0.5", "--stale-after", "2"], &["true"]);
    let keys = redis
        .cli(&["--scan", "--pattern", "skillforge:job:*:p"])
        .unwrap();
    let key = keys
        .lines()
        .find(|k| {
            !k.is_empty()
                && redis
                    .cli(&["get", k])
                    .is_some_and(|v| v.contains(&long_arg))
        })
        .unwrap_or_else(|| panic!("the long payload's key among {keys}"))
        .to_owned();
    // Its creation time no longer parses: the lease reply cannot be decoded.
    redis
        .cli(&["hset", key.trim_end_matches(":p"), "c", "not-a-time"])
        .unwrap();
    let _serve = Reaped(home.spawn_serve());
    let _worker = Reaped(home.spawn_worker("w", &["--concurrency", "4"]));
    let job = home.wait_job(&fine, t, "the readable job to succeed", |j| {
        j["state"] == "succeeded"
    });
    assert_eq!(job["attempts"], 1, "leased once: {job:#}\n{}", home.logs());
    home.wait(t, "the unreadable job to be quarantined", || {
        let list = home.json(&["jobs", "list", "--state", "broken"]);
        list.as_array()
            .unwrap()
            .iter()
            .any(|r| r["id"] == broken.as_str())
            .then_some(())
    });
    skillforge_tests::ok(&home, &["jobs", "purge", &broken]);
    assert_eq!(
        home.json(&["jobs", "list", "--state", "broken"])
            .as_array()
            .map(Vec::len),
        Some(0)
    );
    let logs = home.logs();
    assert_eq!(
        logs.lines()
            .filter(|l| l.contains("quarantined") && l.contains(&broken))
            .count(),
        1,
        "logged once: {logs}"
    );
}

/// Issue 32 item 5: `jobs resubmit-lost` enqueues again, from the specs the store recorded,
/// the pending work a queue lost, each under its idempotency key; a second run finds nothing
/// lost.
#[test]
fn resubmit_lost_enqueues_the_lost_work_again_under_its_keys() {
    use skillforge_tests::{PLANNER_TEMPLATE, RedisServer, add_template, path_arg};
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
    let out = home.run(&["train", "continue", "--session", "s1", "--no-wait"]);
    // Exit 4: the option jobs are queued, not decided yet.
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let before = home.json(&["jobs", "list"]);
    let mut keys: Vec<String> = before
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["idempotency_key"].as_str().unwrap().to_owned())
        .collect();
    keys.sort();
    assert!(!keys.is_empty());

    redis.cli(&["flushall"]).expect("flushall");
    assert_eq!(
        home.json(&["jobs", "list"]).as_array().map(Vec::len),
        Some(0)
    );
    let done = home.json(&["jobs", "resubmit-lost"]);
    assert_eq!(
        done["resubmitted"].as_array().map(Vec::len),
        Some(keys.len()),
        "{done:#}"
    );
    assert_eq!(
        done["skipped"].as_array().map(Vec::len),
        Some(0),
        "{done:#}"
    );
    let after = home.json(&["jobs", "list"]);
    let mut again: Vec<String> = after
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["idempotency_key"].as_str().unwrap().to_owned())
        .collect();
    again.sort();
    assert_eq!(again, keys, "the same work under the same keys");
    let second = home.json(&["jobs", "resubmit-lost"]);
    assert_eq!(
        second["resubmitted"].as_array().map(Vec::len),
        Some(0),
        "{second:#}"
    );
}

/// Issue 32 item 11: on the embedded queue a reaper whose clock is 60 s behind (`serve` under
/// `faketime -60s`) still recovers a dead worker's job after `stale_after` (seen on its own
/// monotonic clock), not after the 60 s its wall clock adds.
#[test]
fn a_backward_clock_step_in_a_reaper_does_not_delay_recovery() {
    let home = Home::embedded();
    let mut worker = Reaped(home.spawn_worker("w", &[]));
    let dir = tempfile::tempdir().unwrap();
    let id = home.submit(
        &[
            "--heartbeat",
            "0.3",
            "--stale-after",
            "2",
            "--cwd",
            dir.path().to_str().unwrap(),
        ],
        &[
            "sh",
            "-c",
            "touch started; while [ ! -e release ]; do sleep 0.05; done",
        ],
    );
    home.wait(Duration::from_secs(60), "the job to start", || {
        dir.path().join("started").exists().then_some(())
    });
    let mut cmd = home.cmd();
    cmd.arg("serve");
    let log = std::fs::File::create(home.path().join("serve-behind.log")).unwrap();
    let _serve = Reaped(
        std::process::Command::new(cmd.get_program())
            .args(cmd.get_args())
            // libfaketime preloaded into the process itself: the `faketime` program would
            // run it as a child, left running when the wrapper is killed.
            .env("LD_PRELOAD", skillforge_tests::faketime_lib())
            .env("FAKETIME", "-60s")
            .envs(
                cmd.get_envs()
                    .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))),
            )
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start a process under libfaketime"),
    );
    home.wait(Duration::from_secs(60), "serve to start", || {
        home.logs().contains("control plane on").then_some(())
    });
    worker.0.kill().unwrap();
    let _ = worker.0.wait();
    // Its wall clock puts the deadline 60 s away; 30 s is far more than stale_after.
    let job = home.wait_job(
        &id,
        Duration::from_secs(30),
        "the dead worker's job to be recovered",
        |j| j["state"] != "running",
    );
    assert_eq!(
        job["state"], "queued",
        "requeued for another attempt: {job:#}"
    );
}

/// Issue 32 item 11, named locks: on the embedded queue a reaper whose clock is 60 s behind
/// (`serve` under `faketime -60s`) frees a dead worker's named locks — the job's `--lock` and
/// the worker's presence lock — after their `stale_after` seen on its own monotonic clock, not
/// after the 60 s its wall clock adds.
#[test]
fn a_backward_clock_step_in_a_reaper_does_not_delay_freeing_named_locks() {
    let home = Home::embedded();
    let mut worker = Reaped(home.spawn_worker("w", &[]));
    let dir = tempfile::tempdir().unwrap();
    home.submit(
        &[
            "--heartbeat",
            "0.3",
            "--stale-after",
            "2",
            "--lock",
            "clock-back",
            "--cwd",
            dir.path().to_str().unwrap(),
        ],
        &[
            "sh",
            "-c",
            "touch started; while [ ! -e release ]; do sleep 0.05; done",
        ],
    );
    home.wait(Duration::from_secs(60), "the job to start", || {
        dir.path().join("started").exists().then_some(())
    });
    let held = |name: &str| {
        home.json(&["locks"])
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["name"].as_str().is_some_and(|n| n.starts_with(name)))
    };
    assert!(
        held("clock-back") && held("worker:w-"),
        "{:#}",
        home.json(&["locks"])
    );
    let mut cmd = home.cmd();
    cmd.arg("serve");
    let log = std::fs::File::create(home.path().join("serve-behind.log")).unwrap();
    let _serve = Reaped(
        std::process::Command::new(cmd.get_program())
            .args(cmd.get_args())
            // libfaketime preloaded into the process itself: the `faketime` program would
            // run it as a child, left running when the wrapper is killed.
            .env("LD_PRELOAD", skillforge_tests::faketime_lib())
            .env("FAKETIME", "-60s")
            .envs(
                cmd.get_envs()
                    .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))),
            )
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start a process under libfaketime"),
    );
    home.wait(Duration::from_secs(60), "serve to start", || {
        home.logs().contains("control plane on").then_some(())
    });
    worker.0.kill().unwrap();
    let _ = worker.0.wait();
    // Their wall-clock deadlines are 60 s away for this reaper; 30 s is far more than the
    // locks' stale_after (2 s for the job's lock, 5 s for the presence lock).
    home.wait(
        Duration::from_secs(30),
        "the dead worker's locks to be freed",
        || (!held("clock-back") && !held("worker:w-")).then_some(()),
    );
    assert!(
        home.logs().contains("stale named lock freed"),
        "{}",
        home.logs()
    );
}

/// A fleet's worker started while its Redis does not answer (paused: connections hang) waits
/// for it, saying so, and runs jobs once it answers, instead of exiting at the first timed-out
/// connection; a server that answers and refuses (a wrong password) is not waited for.
#[test]
fn a_worker_started_while_redis_is_paused_waits_for_it_and_a_wrong_password_does_not() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    use skillforge_tests::RedisServer;
    let redis = RedisServer::start();
    let home = Home::redis(&redis.url());
    let pid = Pid::from_raw(redis.pid().expect("redis-server pid"));
    kill(pid, Signal::SIGSTOP).unwrap();
    let mut worker = Reaped(home.spawn_worker("patient", &[]));
    home.wait(
        Duration::from_secs(60),
        "the worker to say it waits for the queue",
        || home.logs().contains("waiting for the queue").then_some(()),
    );
    assert!(
        worker.0.try_wait().unwrap().is_none(),
        "the worker exited while the queue was paused: {}",
        home.logs()
    );
    kill(pid, Signal::SIGCONT).unwrap();
    let id = home.submit(&[], &["sh", "-c", "echo ran"]);
    let job = home.wait_job(&id, Duration::from_secs(90), "the job to succeed", |j| {
        j["state"] == "succeeded"
    });
    assert!(
        job["history"][0]["worker"]
            .as_str()
            .is_some_and(|w| w.starts_with("patient-")),
        "{job}"
    );
    assert!(
        home.logs().contains("the queue answers again"),
        "{}",
        home.logs()
    );

    let locked = RedisServer::start_configured(false, Some("right-password"), &[]);
    let wrong = Home::redis(&locked.url());
    let (code, err) = run_to_exit(&wrong, &["worker", "--name", "refused"]);
    assert_eq!(code, Some(3), "{err}");
    assert!(!err.contains("waiting for the queue"), "{err}");
}
