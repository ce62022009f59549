//! The web console of `serve --listen` (issue 36 item 1) in a real headless Chromium, against a
//! real home with real jobs run by a real worker, on the embedded SQLite queue and on a real
//! `redis-server`: every page loads and shows the jobs; retrying a dead job and cancelling a
//! running one from the browser change their state (as `jobs show --json` sees it); a missing,
//! wrong or read-only token and a form without its CSRF token are refused with the store
//! unchanged; no secret env value and no token ever appears in a page. Screenshots of the main
//! pages go to `<target>/console-screenshots/`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use skillforge_tests::browser::Browser;
use skillforge_tests::webhook::wait_listening;
use skillforge_tests::{Backend, Home, Reaped, free_port, on_both_backends};

const ADMIN: &str = "console-admin-token-0123456789";
const READ: &str = "console-read-token-0123456789";
const SECRET: &str = "hunter2-console-secret-value";

/// An HTTP/1.1 answer: status, headers (lowercase names), body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One raw request to the console (the server closes each connection after its answer).
fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_owned()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_owned(),
    }
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// `<target>/console-screenshots/<backend>-<name>.png`.
fn screenshot_path(backend: &str, name: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            skillforge_tests::bin()
                .parent()
                .and_then(|d| d.parent())
                .unwrap()
                .to_path_buf()
        });
    target
        .join("console-screenshots")
        .join(format!("{backend}-{name}.png"))
}

/// `serve --listen` with both console tokens and no webhook secret (the console alone).
fn spawn_console(home: &Home, port: u16) -> std::process::Child {
    skillforge_tests::webhook::spawn_serve(
        home,
        port,
        None,
        &[
            ("SKILLFORGE_SERVER_TOKEN", ADMIN),
            ("SKILLFORGE_SERVER_READ_TOKEN", READ),
        ],
    )
}

fn state_of(job: &Value) -> &str {
    job["state"].as_str().unwrap_or_default()
}

fn attempts_of(job: &Value) -> usize {
    job["history"].as_array().map_or(0, Vec::len)
}

/// Asserts `html` shows neither the secret env value nor a token.
fn no_secret(html: &str, page: &str) {
    assert!(!html.contains(SECRET), "{page} shows the secret env value");
    assert!(
        !html.contains(ADMIN) && !html.contains(READ),
        "{page} shows a console token"
    );
}

/// The jobs the pages show: one succeeded, one dead, one running (to cancel), one that printed
/// its secret env value.
struct Jobs {
    dead: String,
    running: String,
    secret: String,
    done: String,
}

fn make_jobs(home: &Home) -> Jobs {
    let done = home.submit(&[], &["sh", "-c", "echo all good"]);
    let dead = home.submit(
        &["--attempts", "1"],
        &["sh", "-c", "echo failing on purpose >&2; exit 3"],
    );
    let out = home
        .cmd()
        .env("CONSOLE_SECRET", SECRET)
        .args([
            "--json",
            "jobs",
            "submit",
            "--secret-env",
            "CONSOLE_SECRET",
            "--",
            "sh",
            "-c",
            "echo \"the value is $CONSOLE_SECRET\"",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let secret = serde_json::from_slice::<Value>(&out.stdout).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let running = home.submit(
        &["--heartbeat", "0.5", "--stale-after", "10"],
        &["sh", "-c", "echo started; sleep 600"],
    );
    let t = Duration::from_secs(60);
    home.wait_job(&done, t, "the first job to succeed", |j| {
        state_of(j) == "succeeded"
    });
    home.wait_job(&dead, t, "the failing job to die", |j| {
        state_of(j) == "dead"
    });
    home.wait_job(&secret, t, "the secret job to succeed", |j| {
        state_of(j) == "succeeded"
    });
    home.wait_job(&running, t, "the long job to run", |j| {
        state_of(j) == "running"
    });
    Jobs {
        dead,
        running,
        secret,
        done,
    }
}

/// Access: no token, a wrong one, the read-only one, a session form without its CSRF token.
fn access_is_refused(home: &Home, port: u16, jobs: &Jobs) {
    // No token: pages go to the login form, actions are 401.
    let a = http(port, "GET", "/jobs", &[], "");
    assert_eq!(a.status, 303, "a page without a token");
    assert!(
        a.header("location")
            .is_some_and(|l| l.starts_with("/login")),
        "{:?}",
        a.headers
    );
    let retry = format!("/jobs/{}/retry", jobs.dead);
    let form = [("Content-Type", "application/x-www-form-urlencoded")];
    assert_eq!(
        http(port, "POST", &retry, &form, "").status,
        401,
        "an action without a token"
    );
    let wrong = bearer("not-the-console-token-at-all");
    assert_eq!(
        http(
            port,
            "POST",
            &retry,
            &[form[0], ("Authorization", &wrong)],
            ""
        )
        .status,
        401,
        "an action with a wrong token"
    );
    assert_eq!(
        http(port, "GET", "/", &[("Authorization", &wrong)], "").status,
        303,
        "a page with a wrong token"
    );
    // Read-only: pages yes, actions 403, no action button.
    let read = bearer(READ);
    let page = http(
        port,
        "GET",
        &format!("/jobs/{}", jobs.dead),
        &[("Authorization", &read)],
        "",
    );
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains(&jobs.dead) && page.body.contains("dead"),
        "{}",
        page.body
    );
    assert!(
        !page.body.contains("/retry\""),
        "a read-only page offers no retry button"
    );
    assert_eq!(
        http(
            port,
            "POST",
            &retry,
            &[form[0], ("Authorization", &read)],
            ""
        )
        .status,
        403,
        "a read-only action"
    );
    assert_eq!(
        http(
            port,
            "POST",
            &format!("/jobs/{}/cancel", jobs.running),
            &[form[0], ("Authorization", &read)],
            ""
        )
        .status,
        403
    );
    assert_eq!(
        http(
            port,
            "POST",
            "/prune",
            &[form[0], ("Authorization", &read)],
            "older_than=0s"
        )
        .status,
        403
    );
    // A wrong sign-in is 401 and sets no cookie; a right one sets an HttpOnly SameSite=Strict cookie.
    let bad = http(port, "POST", "/login", &form, "token=nope&next=/");
    assert_eq!(bad.status, 401);
    assert!(bad.header("set-cookie").is_none());
    let good = http(
        port,
        "POST",
        "/login",
        &form,
        &format!("token={ADMIN}&next=/"),
    );
    assert_eq!(good.status, 303);
    let cookie = good
        .header("set-cookie")
        .expect("a session cookie")
        .to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let session = cookie.split(';').next().unwrap().to_owned();
    // CSRF: a session's action without the form's token, or with a wrong one, is 403.
    assert_eq!(
        http(port, "POST", &retry, &[form[0], ("Cookie", &session)], "").status,
        403,
        "no CSRF token"
    );
    assert_eq!(
        http(
            port,
            "POST",
            &retry,
            &[form[0], ("Cookie", &session)],
            "csrf=0000"
        )
        .status,
        403,
        "a wrong CSRF token"
    );
    // Nothing changed.
    let job = home.job(&jobs.dead);
    assert_eq!(
        (state_of(&job), attempts_of(&job)),
        ("dead", 1),
        "a refused retry left the job as it was: {job:#}"
    );
    assert_eq!(state_of(&home.job(&jobs.running)), "running");
    // The secret job's page and output show `***`, never the value.
    let page = http(
        port,
        "GET",
        &format!("/jobs/{}", jobs.secret),
        &[("Authorization", &read)],
        "",
    );
    assert_eq!(page.status, 200);
    no_secret(&page.body, "the secret job's page");
    assert!(
        page.body.contains("***"),
        "the secret shown as ***: {}",
        page.body
    );
    let out = http(
        port,
        "GET",
        &format!("/jobs/{}/output", jobs.secret),
        &[("Authorization", &read)],
        "",
    );
    no_secret(&out.body, "the secret job's output");
}

fn console_pages_and_actions(b: Backend) {
    let backend = match b {
        Backend::Sqlite => "sqlite",
        Backend::Redis(_) => "redis",
    };
    let home = b.home();
    let _worker = Reaped(home.spawn_worker("console-w", &["--concurrency", "4"]));
    let jobs = make_jobs(&home);
    let port = free_port();
    let _serve = Reaped(spawn_console(&home, port));
    wait_listening(&home, port);
    access_is_refused(&home, port, &jobs);

    let base = format!("http://127.0.0.1:{port}");
    let mut browser = Browser::start(1280, 900);
    let mut pages = Vec::new();
    // Sign in through the form; the next page is the one asked for.
    browser.open(&format!("{base}/"));
    assert!(
        browser.location().contains("/login"),
        "sent to the login form: {}",
        browser.location()
    );
    browser.eval(&format!(
        "document.getElementById('token').value = {}",
        serde_json::to_string(ADMIN).unwrap()
    ));
    browser.click_to("#sign-in", "/");

    // Queue: counts by state, queues, throughput, workers.
    browser.wait_until(
        "!!document.querySelector('#counts [data-state=dead]')",
        Duration::from_secs(10),
        "the counts",
    );
    let dead_count =
        browser.eval("document.querySelector('#counts [data-state=dead] .n').textContent");
    assert_eq!(dead_count.as_str(), Some("1"), "one dead job counted");
    let html = browser.html();
    assert!(
        html.contains("Last hour") && html.contains("live worker"),
        "{html}"
    );
    browser.screenshot(&screenshot_path(backend, "queue"));
    pages.push(("queue", html));

    // Jobs: the list with a state filter, and a search.
    browser.open(&format!("{base}/jobs?state=dead"));
    let html = browser.html();
    assert!(
        html.contains(&jobs.dead) && !html.contains(&jobs.done),
        "only the dead job: {html}"
    );
    browser.screenshot(&screenshot_path(backend, "jobs"));
    pages.push(("jobs", html));
    browser.open(&format!("{base}/jobs?q=all+good"));
    let html = browser.html();
    assert!(
        html.contains(&jobs.done) && !html.contains(&jobs.dead),
        "the search finds the job by its command: {html}"
    );
    pages.push(("search", html));

    // A dead job's page, then Retry clicked: a new attempt runs (and dies again).
    browser.open(&format!("{base}/jobs/{}", jobs.dead));
    let html = browser.html();
    assert!(
        html.contains("failing on purpose") && html.contains("data-state=\"dead\""),
        "{html}"
    );
    browser.screenshot(&screenshot_path(backend, "job-dead"));
    pages.push(("dead job", html));
    browser.click_to(
        &format!("form[action='/jobs/{}/retry'] button", jobs.dead),
        &format!("/jobs/{}", jobs.dead),
    );
    assert!(
        browser.html().contains("id=\"flash\""),
        "the page says what happened"
    );
    home.wait_job(
        &jobs.dead,
        Duration::from_secs(60),
        "the retried job's second attempt",
        |j| attempts_of(j) >= 2,
    );

    // A running job's page with its live output, then Cancel clicked.
    browser.open(&format!("{base}/jobs/{}", jobs.running));
    browser.wait_until(
        "(document.getElementById('live-output') || {}).textContent.includes('started')",
        Duration::from_secs(30),
        "the live output",
    );
    browser.screenshot(&screenshot_path(backend, "job-running"));
    pages.push(("running job", browser.html()));
    browser.click_to(
        &format!("form[action='/jobs/{}/cancel'] button", jobs.running),
        &format!("/jobs/{}", jobs.running),
    );
    home.wait_job(
        &jobs.running,
        Duration::from_secs(60),
        "the cancelled job to end",
        |j| state_of(j) == "cancelled",
    );

    // The secret job's page.
    browser.open(&format!("{base}/jobs/{}", jobs.secret));
    let html = browser.html();
    assert!(
        html.contains("the value is ***"),
        "its output with the value redacted: {html}"
    );
    pages.push(("secret job", html));

    // Workers and locks: the worker, its presence lock with its fencing token.
    browser.open(&format!("{base}/workers"));
    let html = browser.html();
    assert!(
        html.contains("console-w") && html.contains("Fencing token"),
        "{html}"
    );
    browser.screenshot(&screenshot_path(backend, "workers"));
    pages.push(("workers", html));

    // Attention and Work.
    browser.open(&format!("{base}/attention"));
    let html = browser.html();
    assert!(
        html.contains("Dead and stale jobs") && html.contains("attention-total"),
        "{html}"
    );
    browser.screenshot(&screenshot_path(backend, "attention"));
    pages.push(("attention", html));
    browser.open(&format!("{base}/work"));
    let html = browser.html();
    assert!(
        html.contains("Train sessions") && html.contains("Harvest events"),
        "{html}"
    );
    browser.screenshot(&screenshot_path(backend, "work"));
    pages.push(("work", html));

    for (name, html) in &pages {
        no_secret(html, name);
    }

    // Sign out, sign in read-only: the pages load, no action is offered.
    browser.open(&format!("{base}/jobs/{}", jobs.dead));
    browser.click_to("form[action='/logout'] button", "/login");
    browser.eval(&format!(
        "document.getElementById('token').value = {}",
        serde_json::to_string(READ).unwrap()
    ));
    browser.click_to("#sign-in", "/");
    browser.open(&format!("{base}/jobs/{}", jobs.dead));
    let html = browser.html();
    assert!(
        html.contains(&jobs.dead) && html.contains("read-only"),
        "{html}"
    );
    assert!(
        !html.contains("/retry\""),
        "no retry button for a read-only viewer"
    );

    // Bulk retry of the selected jobs and prune, as an admin client with a bearer token.
    let admin = bearer(ADMIN);
    let form = ("Content-Type", "application/x-www-form-urlencoded");
    home.wait_job(
        &jobs.dead,
        Duration::from_secs(60),
        "the retried job to die again",
        |j| state_of(j) == "dead" && attempts_of(j) >= 2,
    );
    let bulk = http(
        port,
        "POST",
        "/jobs/bulk",
        &[form, ("Authorization", &admin)],
        &format!("action=retry&id={}", jobs.dead),
    );
    assert_eq!(bulk.status, 303, "{}", bulk.body);
    home.wait_job(
        &jobs.dead,
        Duration::from_secs(60),
        "the bulk-retried job's third attempt",
        |j| attempts_of(j) >= 3,
    );
    home.wait_job(
        &jobs.dead,
        Duration::from_secs(60),
        "the job to die a third time",
        |j| state_of(j) == "dead",
    );
    home.wait(
        Duration::from_secs(60),
        "prune to remove the succeeded job",
        || {
            let pruned = http(
                port,
                "POST",
                "/prune",
                &[form, ("Authorization", &admin)],
                "older_than=0s",
            );
            assert_eq!(pruned.status, 303, "{}", pruned.body);
            (home.job(&jobs.done)["pruned"] == Value::Bool(true)).then_some(())
        },
    );
}

on_both_backends!(console_pages_and_actions);

// S-52: the console's Attention page lists a pending candidate with [events] off, and no longer
// once it is decided.
#[test]
fn s52_the_attention_page_lists_a_pending_candidate_with_events_off() {
    let home = skillforge_tests::decide::home();
    skillforge_tests::decide::import(&home, "Plan in steps.\n", 0.8);
    let port = free_port();
    let _serve = Reaped(spawn_console(&home, port));
    wait_listening(&home, port);
    let read = bearer(READ);
    let page = http(port, "GET", "/attention", &[("Authorization", &read)], "");
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("planner@v2") && page.body.contains("pending"),
        "the pending candidate is listed: {}",
        page.body
    );
    let work = http(port, "GET", "/work", &[("Authorization", &read)], "");
    assert!(
        work.body.contains("id=\"candidate-planner@v2\""),
        "and on the Work page: {}",
        work.body
    );
    let out = home.run(&[
        "candidate",
        "reject",
        "planner@v2",
        "--reason",
        "not better",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = http(port, "GET", "/attention", &[("Authorization", &read)], "");
    assert!(
        !page.body.contains("planner@v2"),
        "a rejected candidate waits on nobody: {}",
        page.body
    );
}

// facts §7 (the PACE gate, issue 34 item 10): with `[skillopt] pace_enabled` the Work page shows
// each pending candidate's PACE wealth against its threshold beside the bandit posterior; off (the
// default), no PACE column at all.
#[test]
fn the_work_page_shows_pace_wealth_only_when_pace_is_on() {
    let home = skillforge_tests::decide::home();
    skillforge_tests::decide::import(&home, "Plan in steps.\n", 0.8);
    let read = bearer(READ);
    let work_page = || {
        let port = free_port();
        let mut serve = Reaped(spawn_console(&home, port));
        wait_listening(&home, port);
        let work = http(port, "GET", "/work", &[("Authorization", &read)], "");
        let _ = serve.0.kill();
        let _ = serve.0.wait();
        assert_eq!(work.status, 200, "{}", work.body);
        work.body
    };
    let off = work_page();
    assert!(off.contains("id=\"candidate-planner@v2\""), "{off}");
    assert!(!off.contains("PACE"), "no PACE column while off: {off}");
    skillforge_tests::decide::config(&home, "[skillopt]\npace_enabled = true\n");
    let on = work_page();
    let at = on
        .find("id=\"candidate-planner@v2\"")
        .expect("the candidate row");
    let row = &on[at..at + on[at..].find("</tr>").unwrap()];
    assert!(on.contains("<th>PACE wealth</th>"), "{on}");
    assert!(
        row.contains("wealth 1.000 of 20.0")
            && row.contains("continue; 0 wins, 0 losses of 0 pairs"),
        "no A/B pick yet: the starting wealth against 1/alpha: {row}"
    );
}

/// `serve` refuses a console token it cannot use, naming where it came from; a token file works.
#[test]
fn console_tokens_are_checked_and_read_from_a_file() {
    let home = Home::embedded();
    let serve = |env: &[(&str, &str)]| {
        let mut cmd = home.cmd();
        cmd.args(["serve", "--listen", &format!("127.0.0.1:{}", free_port())])
            .env_remove("SKILLFORGE_WEBHOOK_SECRET");
        cmd.env_remove("SKILLFORGE_SERVER_TOKEN")
            .env_remove("SKILLFORGE_SERVER_READ_TOKEN");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    };
    let short = serve(&[("SKILLFORGE_SERVER_TOKEN", "short")]);
    assert_eq!(short.status.code(), Some(2));
    let err = String::from_utf8_lossy(&short.stderr);
    assert!(
        err.contains("SKILLFORGE_SERVER_TOKEN is 5 characters") && !err.contains("short\n"),
        "{err}"
    );
    let same = serve(&[
        ("SKILLFORGE_SERVER_TOKEN", ADMIN),
        ("SKILLFORGE_SERVER_READ_TOKEN", ADMIN),
    ]);
    assert_eq!(same.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&same.stderr).contains("are the same"),
        "{}",
        String::from_utf8_lossy(&same.stderr)
    );
    // Neither a webhook secret nor a console token: `serve --listen` still serves `/metrics`,
    // `/health` and `/ready` (and `/events` answers 503, tested with the harvest); no console.

    // The admin token from `[server] token_file` (relative to the home).
    skillforge_tests::write(&home.path().join("console.token"), &format!("{ADMIN}\n"));
    skillforge_tests::write(
        &home.path().join("config.toml"),
        "[server]\ntoken_file = \"console.token\"\n",
    );
    let port = free_port();
    let mut cmd = home.cmd();
    cmd.args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .env_remove("SKILLFORGE_WEBHOOK_SECRET")
        .env_remove("SKILLFORGE_SERVER_TOKEN");
    let _serve = Reaped(
        cmd.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_listening(&home, port);
    let admin = bearer(ADMIN);
    let page = http(port, "GET", "/", &[("Authorization", &admin)], "");
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("admin"), "{}", page.body);
    // No webhook secret: /events answers 503 naming the secret, never a harvest.
    let events = http(
        port,
        "POST",
        "/events",
        &[("Content-Type", "application/json")],
        "{}",
    );
    assert_eq!(events.status, 503, "{}", events.body);
}

// A train session whose candidate was decided outside it (a rejection, a canary's rollback)
// waits on nobody: the Attention page lists it only while the decision is a person's to make,
// as `train status` says.
#[test]
fn a_session_whose_candidate_was_rejected_outside_it_leaves_the_attention_page() {
    let repo = tempfile::tempdir().unwrap();
    skillforge_tests::git(repo.path(), &["init", "-q", "-b", "main"]);
    for n in 0..3 {
        skillforge_tests::write(&repo.path().join("lib.rs"), &format!("fn f{n}() {{}}\n"));
        skillforge_tests::git(repo.path(), &["add", "-A"]);
        skillforge_tests::git(repo.path(), &["commit", "-q", "-m", &format!("step {n}")]);
    }
    let home = Home::embedded();
    let demo = home.run(&["demo", "--repo", repo.path().to_str().unwrap()]);
    assert!(
        demo.status.success(),
        "{}",
        String::from_utf8_lossy(&demo.stderr)
    );
    let port = free_port();
    let _serve = Reaped(spawn_console(&home, port));
    wait_listening(&home, port);
    let read = bearer(READ);
    let sessions = |body: &str| {
        let at = body.find("id=\"sessions\"").expect("the sessions table");
        body[at..]
            .split("<h2")
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    let page = http(port, "GET", "/attention", &[("Authorization", &read)], "");
    assert!(
        sessions(&page.body).contains("a decision on the candidate"),
        "{}",
        page.body
    );
    let out = home.run(&[
        "candidate",
        "reject",
        "change-summarizer@v2",
        "--reason",
        "worse",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = http(port, "GET", "/attention", &[("Authorization", &read)], "");
    assert!(
        sessions(&page.body).contains("No train session waits on a person."),
        "{}",
        page.body
    );
    let work = http(port, "GET", "/work", &[("Authorization", &read)], "");
    assert!(
        work.body
            .contains("change-summarizer@v2 was rejected outside this session"),
        "the Work page's next action says what train status says: {}",
        work.body
    );
}
