//! `/metrics`, `/health` and `/ready` of `serve --listen` and `worker --metrics` (issue 36 item
//! 2): scraped from the real binary on both backends while real jobs run, the figures move with
//! them (counters, depth, histograms, a lease recovery after a worker is SIGKILLed), and a
//! worker's own view counts its leases, results and heartbeats.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;
use skillforge_tests::webhook::{spawn_serve, wait_listening};
use skillforge_tests::{Backend, Home, Reaped, free_port};

skillforge_tests::on_both_backends!(metrics_move_with_real_jobs_on_serve_and_on_a_worker);

const T: Duration = Duration::from_secs(60);

/// `GET path` on `127.0.0.1:port`: (status, content type, body).
fn get(port: u16, path: &str) -> (u16, String, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let content_type = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type:")
                .map(|v| v.trim().to_owned())
        })
        .unwrap_or_default();
    (status, content_type, body.to_owned())
}

/// The samples of a Prometheus text exposition: `name{labels}` exactly as written → value.
fn scrape(port: u16) -> BTreeMap<String, f64> {
    let (status, content_type, body) = get(port, "/metrics");
    assert_eq!(status, 200, "{body}");
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (series, value) = l
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("not a sample line: {l}"));
            (
                series.to_owned(),
                value
                    .parse::<f64>()
                    .unwrap_or_else(|_| panic!("not a value: {l}")),
            )
        })
        .collect()
}

/// The value of the sample of `name` whose labels include every `key="value"` of `labels`
/// (summed over the samples that match), or `None` when none does.
fn value(samples: &BTreeMap<String, f64>, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let matching: Vec<f64> = samples
        .iter()
        .filter(|(series, _)| {
            let (n, rest) = series.split_once('{').unwrap_or((series.as_str(), ""));
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")))
        })
        .map(|(_, v)| *v)
        .collect();
    (!matching.is_empty()).then(|| matching.iter().sum())
}

fn adhoc() -> [(&'static str, &'static str); 3] {
    [
        ("queue", "default"),
        ("workflow", "adhoc"),
        ("stage", "run"),
    ]
}

fn state(job: &Value) -> &str {
    job["state"].as_str().unwrap_or("?")
}

/// Polls `serve`'s (or a worker's) `/metrics` until `pred` holds of the samples.
fn wait_metrics(
    home: &Home,
    port: u16,
    what: &str,
    pred: impl Fn(&BTreeMap<String, f64>) -> bool,
) -> BTreeMap<String, f64> {
    home.wait(T, what, || {
        let samples = scrape(port);
        pred(&samples).then_some(samples)
    })
}

fn metrics_move_with_real_jobs_on_serve_and_on_a_worker(b: Backend) {
    let home = b.home();
    let serve_port = free_port();
    let _serve = Reaped(spawn_serve(&home, serve_port, None, &[]));
    wait_listening(&home, serve_port);
    let worker_port = free_port();
    let mut worker = Reaped(home.spawn_worker(
        "metered",
        &["--metrics", &format!("127.0.0.1:{worker_port}")],
    ));
    wait_listening(&home, worker_port);

    // Liveness and readiness of both processes.
    for port in [serve_port, worker_port] {
        let (status, _, body) = get(port, "/health");
        assert_eq!(status, 200, "{body}");
        let (status, _, body) = get(port, "/ready");
        assert_eq!(status, 200, "{body}");
        let ready: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(ready["checks"]["queue"], "ok", "{ready}");
    }
    let (_, _, body) = get(serve_port, "/ready");
    let ready: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(ready["checks"]["store"], "ok", "{ready}");
    assert_eq!(ready["checks"]["ingestion"], "ok", "{ready}");

    let before = wait_metrics(&home, serve_port, "a worker to show as alive", |s| {
        value(s, "skillforge_workers_alive", &[]).is_some_and(|n| n >= 1.0)
    });
    let enqueued = |s: &BTreeMap<String, f64>| {
        value(s, "skillforge_jobs_enqueued_total", &adhoc()).unwrap_or(0.0)
    };
    let finished = |s: &BTreeMap<String, f64>, outcome: &str| {
        let mut l = adhoc().to_vec();
        l.push(("outcome", outcome));
        value(s, "skillforge_jobs_finished_total", &l).unwrap_or(0.0)
    };
    let run_count = |s: &BTreeMap<String, f64>| {
        value(s, "skillforge_job_run_seconds_count", &adhoc()).unwrap_or(0.0)
    };
    let wait_count = |s: &BTreeMap<String, f64>| {
        value(s, "skillforge_job_wait_seconds_count", &adhoc()).unwrap_or(0.0)
    };
    let retries = |s: &BTreeMap<String, f64>| {
        value(s, "skillforge_job_retries_total", &[("queue", "default")]).unwrap_or(0.0)
    };
    let depth = |s: &BTreeMap<String, f64>, st: &str| {
        value(
            s,
            "skillforge_queue_depth",
            &[("queue", "default"), ("state", st)],
        )
        .unwrap_or(0.0)
    };

    // Two jobs that pass (one long enough to heartbeat) and one that fails twice, then is dead.
    let ok1 = home.submit(&[], &["true"]);
    let ok2 = home.submit(&["--heartbeat", "0.1"], &["sleep", "0.6"]);
    let bad = home.submit(&["--attempts", "2"], &["sh", "-c", "exit 3"]);
    for id in [&ok1, &ok2] {
        home.wait_job(id, T, "a passing job to succeed", |j| {
            state(j) == "succeeded"
        });
    }
    home.wait_job(&bad, T, "the failing job to be dead", |j| {
        state(j) == "dead"
    });
    let after = wait_metrics(&home, serve_port, "the finished jobs in /metrics", |s| {
        finished(s, "dead") >= finished(&before, "dead") + 1.0
            && finished(s, "succeeded") >= finished(&before, "succeeded") + 2.0
    });
    assert_eq!(
        enqueued(&after),
        enqueued(&before) + 3.0,
        "three jobs enqueued"
    );
    assert_eq!(
        finished(&after, "succeeded"),
        finished(&before, "succeeded") + 2.0
    );
    assert_eq!(finished(&after, "dead"), finished(&before, "dead") + 1.0);
    assert_eq!(
        retries(&after),
        retries(&before) + 1.0,
        "the failing job was retried once"
    );
    assert_eq!(
        run_count(&after),
        run_count(&before) + 4.0,
        "four attempts ran"
    );
    assert_eq!(
        wait_count(&after),
        wait_count(&before) + 4.0,
        "four attempts started"
    );
    assert_eq!(
        value(&after, "skillforge_jobs_started_total", &adhoc()).unwrap_or(0.0),
        value(&before, "skillforge_jobs_started_total", &adhoc()).unwrap_or(0.0) + 4.0
    );
    assert!(
        depth(&after, "succeeded") >= depth(&before, "succeeded") + 2.0,
        "{after:?}"
    );
    assert_eq!(depth(&after, "queued"), 0.0, "nothing waits: {after:?}");
    assert!(
        value(&after, "skillforge_ingestion_lag_seconds", &[]).is_some(),
        "{after:?}"
    );
    // The histogram's buckets are cumulative and end in +Inf = count.
    let inf = value(
        &after,
        "skillforge_job_run_seconds_bucket",
        &[("queue", "default"), ("workflow", "adhoc"), ("le", "+Inf")],
    );
    assert_eq!(inf, Some(run_count(&after)), "{after:?}");
    let one_s = value(
        &after,
        "skillforge_job_run_seconds_bucket",
        &[("queue", "default"), ("workflow", "adhoc"), ("le", "1")],
    );
    assert!(
        one_s.is_some_and(|n| n <= run_count(&after)),
        "cumulative buckets never pass the count: {after:?}"
    );
    // The store's counters: the three results applied by this control plane.
    wait_metrics(&home, serve_port, "the applied results in /metrics", |s| {
        value(
            s,
            "skillforge_results_applied_total",
            &[("workflow", "adhoc"), ("state", "succeeded")],
        )
        .unwrap_or(0.0)
            >= 2.0
            && value(
                s,
                "skillforge_results_applied_total",
                &[("workflow", "adhoc"), ("state", "dead")],
            )
            .unwrap_or(0.0)
                >= 1.0
    });

    // The worker's own view: its leases, results and heartbeats.
    let mine = scrape(worker_port);
    let applied = value(
        &mine,
        "skillforge_worker_results_total",
        &[("result", "applied")],
    )
    .unwrap_or(0.0);
    assert_eq!(applied, 4.0, "four attempts' results applied: {mine:?}");
    assert_eq!(
        value(&mine, "skillforge_worker_leases_total", &[]),
        Some(4.0),
        "{mine:?}"
    );
    assert!(
        value(
            &mine,
            "skillforge_worker_heartbeats_total",
            &[("reply", "answered")]
        )
        .unwrap_or(0.0)
            >= 1.0,
        "{mine:?}"
    );
    assert_eq!(
        value(&mine, "skillforge_worker_jobs_running", &[]),
        Some(0.0),
        "{mine:?}"
    );
    assert!(
        value(&mine, "skillforge_jobs_enqueued_total", &adhoc()).is_some(),
        "a worker shows the queue's figures too"
    );
    assert!(
        value(&mine, "skillforge_results_applied_total", &[]).is_none(),
        "a worker has no store figures: {mine:?}"
    );

    // A worker SIGKILLed mid-job: the reaper of `serve` recovers its lease, and the counter moves.
    let recoveries = |s: &BTreeMap<String, f64>| {
        value(
            s,
            "skillforge_lease_recoveries_total",
            &[("queue", "default")],
        )
        .unwrap_or(0.0)
    };
    let before_kill = scrape(serve_port);
    let slow = home.submit(
        &[
            "--heartbeat",
            "0.2",
            "--stale-after",
            "1",
            "--attempts",
            "2",
        ],
        &["sleep", "3"],
    );
    home.wait_job(&slow, T, "the slow job to run", |j| state(j) == "running");
    let running = scrape(worker_port);
    assert_eq!(
        value(&running, "skillforge_worker_jobs_running", &[]),
        Some(1.0),
        "{running:?}"
    );
    assert!(depth(&scrape(serve_port), "running") >= 1.0);
    worker.0.kill().unwrap();
    let _ = worker.0.wait();
    wait_metrics(&home, serve_port, "the lease recovery in /metrics", |s| {
        recoveries(s) >= recoveries(&before_kill) + 1.0
    });
    let _ = home.run(&["jobs", "cancel", &slow]);

    // The queue gone: `/ready` of `serve` says so (503, naming it); `/health` still answers.
    if let Backend::Redis(redis) = &b {
        let pid = redis.pid().expect("redis-server pid");
        let killed = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let (status, _, body) = get(serve_port, "/ready");
        assert_eq!(status, 503, "{body}");
        let ready: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(ready["checks"]["queue"], "unreachable", "{ready}");
        assert!(
            ready["reasons"][0].as_str().unwrap().contains("queue"),
            "{ready}"
        );
        assert_eq!(get(serve_port, "/health").0, 200);
        let samples = scrape(serve_port);
        assert_eq!(
            value(&samples, "skillforge_scrape_errors", &[("source", "queue")]),
            Some(1.0),
            "{samples:?}"
        );
        assert!(
            value(&samples, "skillforge_jobs_enqueued_total", &[]).is_none(),
            "no made-up queue figures: {samples:?}"
        );
    }
}
