//! OpenTelemetry traces (issue 36 item 3), against a loopback OTLP/HTTP receiver this test starts
//! (axum, decoding the protobuf with `opentelemetry-proto`): real `serve` and `worker`
//! processes on both backends, a process job and an agent job of the scripted runtime. One trace
//! per job across the processes (enqueue in the submitting command, attempt and runner step on
//! the worker, apply in the control plane), parent links, the GenAI attributes of the agent
//! span; with telemetry off, no `traceparent` is stored and nothing is sent; a dead collector is
//! logged once and costs the jobs nothing.

use std::collections::BTreeMap;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::Value;
use skillforge_tests::decide::home_on;
use skillforge_tests::webhook::wait_listening;
use skillforge_tests::{Backend, Home, Reaped, free_port, signal, wait_exit, write};

skillforge_tests::on_both_backends!(one_trace_per_job_from_enqueue_to_apply_and_none_when_off);

const T: Duration = Duration::from_secs(60);

/// The spans a loopback OTLP/HTTP receiver got, and how many export requests reached it.
#[derive(Clone, Default)]
struct Received {
    spans: Arc<Mutex<Vec<Span>>>,
    requests: Arc<Mutex<usize>>,
}

/// Starts the receiver on a free loopback port (`POST /v1/traces`, protobuf) in its own thread;
/// returns its base URL and what it receives.
fn start_receiver() -> (String, Received) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let received = Received::default();
    let state = received.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = axum::Router::new().route(
                "/v1/traces",
                axum::routing::post(move |body: axum::body::Bytes| {
                    let state = state.clone();
                    async move {
                        *state.requests.lock().unwrap() += 1;
                        let Ok(request) = ExportTraceServiceRequest::decode(body) else {
                            return (axum::http::StatusCode::BAD_REQUEST, Vec::new());
                        };
                        let mut spans = state.spans.lock().unwrap();
                        for resource in request.resource_spans {
                            for scope in resource.scope_spans {
                                spans.extend(scope.spans);
                            }
                        }
                        (axum::http::StatusCode::OK, Vec::new())
                    }
                }),
            );
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    (url, received)
}

/// An attribute of `span` as text (strings as they are, numbers and booleans printed).
fn attr(span: &Span, key: &str) -> Option<String> {
    let value = span.attributes.iter().find(|kv| kv.key == key)?;
    match value.value.as_ref()?.value.as_ref()? {
        Any::StringValue(s) => Some(s.clone()),
        Any::IntValue(n) => Some(n.to_string()),
        Any::DoubleValue(x) => Some(x.to_string()),
        Any::BoolValue(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The spans of the trace whose enqueue span names job `job_id`, by span name once every name
/// of `names` is there (polling the receiver).
fn trace_of(
    home: &Home,
    received: &Received,
    job_id: &str,
    names: &[&str],
) -> BTreeMap<String, Vec<Span>> {
    home.wait(T, &format!("the spans {names:?} of job {job_id}"), || {
        let spans = received.spans.lock().unwrap().clone();
        let trace_id = spans
            .iter()
            .find(|s| {
                s.name == "skillforge.enqueue"
                    && attr(s, "skillforge.job_id").as_deref() == Some(job_id)
            })?
            .trace_id
            .clone();
        let mut by_name: BTreeMap<String, Vec<Span>> = BTreeMap::new();
        for span in spans.into_iter().filter(|s| s.trace_id == trace_id) {
            by_name.entry(span.name.clone()).or_default().push(span);
        }
        names
            .iter()
            .all(|n| by_name.contains_key(*n))
            .then_some(by_name)
    })
}

/// `skillforge ARGS` in the background with spans exported every 100 ms, its log in the home.
fn spawn(home: &Home, args: &[&str], log: &str) -> Child {
    let log = std::fs::File::create(home.path().join(format!("{log}.log"))).unwrap();
    home.cmd()
        .args(args)
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

/// `serve --listen` and a worker of `home`, started and ready.
fn start_fleet(home: &Home, tag: &str) -> (Reaped, Reaped) {
    let port = free_port();
    let serve = Reaped(spawn(
        home,
        &["serve", "--listen", &format!("127.0.0.1:{port}")],
        &format!("serve-{tag}"),
    ));
    wait_listening(home, port);
    let worker = Reaped(spawn(
        home,
        &["worker", "--name", &format!("traced-{tag}")],
        &format!("worker-{tag}"),
    ));
    // Live once its presence lock is held (the worker's id is `traced-<tag>-<suffix>`).
    let presence = format!("worker:traced-{tag}");
    home.wait(T, "the worker to be live", || {
        let locks = home.json(&["locks"]);
        locks
            .as_array()?
            .iter()
            .any(|l| l["name"].as_str().is_some_and(|n| n.starts_with(&presence)))
            .then_some(())
    });
    (serve, worker)
}

/// Stops `serve` and the worker with SIGTERM (each flushes its spans on the way out).
fn stop_fleet((mut serve, mut worker): (Reaped, Reaped)) {
    for child in [&mut worker.0, &mut serve.0] {
        signal(child, nix::sys::signal::Signal::SIGTERM);
        wait_exit(child, T);
    }
}

fn state(job: &Value) -> &str {
    job["state"].as_str().unwrap_or_default()
}

/// What the queue stores of every job, as text: the SQLite `job_specs` rows, or every Redis job
/// hash.
fn stored_jobs(b: &Backend, home: &Home) -> String {
    match b {
        Backend::Sqlite => {
            let out = std::process::Command::new("sqlite3")
                .arg(home.path().join("queue.db"))
                .arg("SELECT spec FROM job_specs")
                .output()
                .expect("sqlite3 (Debian package sqlite3) is installed");
            assert!(out.status.success());
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
        Backend::Redis(redis) => {
            let keys = redis.cli(&["--scan", "--pattern", "*job:*"]).unwrap();
            keys.lines()
                .filter_map(|key| redis.cli(&["HGETALL", key]))
                .collect::<Vec<_>>()
                .join("\n")
        }
    }
}

// Issue 36 item 3: one trace per job, enqueue → attempt → runner step → apply; GenAI attributes
// on the agent span; off by default: no traceparent stored, nothing sent.
fn one_trace_per_job_from_enqueue_to_apply_and_none_when_off(b: Backend) {
    let home = home_on(b.home());
    let (url, received) = start_receiver();

    // Off (no `[telemetry]`): jobs run and are applied, no traceparent is stored, nothing is sent.
    let fleet = start_fleet(&home, "off");
    let untraced = home.submit(&[], &["true"]);
    home.wait_job(&untraced, T, "the untraced job to succeed", |j| {
        state(j) == "succeeded"
    });
    stop_fleet(fleet);
    assert!(
        home.job(&untraced).get("traceparent").is_none(),
        "{}",
        home.job(&untraced)
    );
    let stored_off = stored_jobs(&b, &home);
    assert!(!stored_off.is_empty(), "the job is stored");
    assert!(
        !stored_off.contains("traceparent") && !stored_off.contains("\"tp\""),
        "{stored_off}"
    );
    assert_eq!(
        *received.requests.lock().unwrap(),
        0,
        "nothing sent while off"
    );

    // On: the same fleet with `[telemetry] otlp_endpoint`.
    write(
        &home.path().join("config.toml"),
        &format!("[telemetry]\notlp_endpoint = \"{url}\"\n"),
    );
    let fleet = start_fleet(&home, "on");
    let job = home.submit(&[], &["true"]);
    home.wait_job(&job, T, "the traced job to succeed", |j| {
        state(j) == "succeeded"
    });
    let spans = trace_of(
        &home,
        &received,
        &job,
        &[
            "skillforge.enqueue",
            "skillforge.attempt",
            "skillforge.run process",
            "skillforge.apply",
        ],
    );
    let one = |name: &str| -> &Span {
        let found = &spans[name];
        assert_eq!(found.len(), 1, "one {name} span: {found:?}");
        &found[0]
    };
    let (enqueue, attempt, run) = (
        one("skillforge.enqueue"),
        one("skillforge.attempt"),
        one("skillforge.run process"),
    );
    assert!(
        enqueue.parent_span_id.is_empty(),
        "the enqueue span is the root"
    );
    assert_eq!(
        attempt.parent_span_id, enqueue.span_id,
        "attempt under enqueue"
    );
    assert_eq!(
        run.parent_span_id, attempt.span_id,
        "runner step under attempt"
    );
    let applied = spans["skillforge.apply"]
        .iter()
        .find(|s| attr(s, "skillforge.applied").as_deref() == Some("new"))
        .expect("an apply span that applied the result");
    assert_eq!(
        applied.parent_span_id, enqueue.span_id,
        "apply under enqueue"
    );
    assert_eq!(
        attr(attempt, "skillforge.job_id").as_deref(),
        Some(job.as_str())
    );
    assert_eq!(
        attr(attempt, "skillforge.state").as_deref(),
        Some("succeeded")
    );
    assert_eq!(attr(attempt, "skillforge.attempt").as_deref(), Some("1"));
    assert_eq!(attr(run, "skillforge.exit").as_deref(), Some("passed"));
    // The job carries its trace: the `traceparent` names the enqueue span.
    let traceparent = home.job(&job)["traceparent"]
        .as_str()
        .expect("a traceparent on the traced job")
        .to_owned();
    assert_eq!(
        traceparent,
        format!("00-{}-{}-01", hex(&enqueue.trace_id), hex(&enqueue.span_id))
    );
    assert!(stored_jobs(&b, &home).contains(&traceparent));

    // An agent job of the scripted runtime: the GenAI attributes on its `invoke_agent` span.
    let asked = home.json(&[
        "ask",
        "planner",
        "What changed?\nscripted: usage 120 30 0.0042",
        "--model",
        "cheap",
    ]);
    let agent_job = asked["job_id"].as_str().expect("ask's job id").to_owned();
    let spans = trace_of(
        &home,
        &received,
        &agent_job,
        &[
            "skillforge.enqueue",
            "skillforge.attempt",
            "skillforge.run agent",
            "invoke_agent scripted",
            "skillforge.apply",
        ],
    );
    let run = &spans["skillforge.run agent"][0];
    let agent = &spans["invoke_agent scripted"][0];
    assert_eq!(
        agent.parent_span_id, run.span_id,
        "agent span under the runner step"
    );
    assert_eq!(
        spans["skillforge.attempt"][0].parent_span_id,
        spans["skillforge.enqueue"][0].span_id
    );
    for (key, expected) in [
        ("gen_ai.operation.name", "invoke_agent"),
        ("gen_ai.system", "scripted"),
        ("gen_ai.request.model", "scripted-cheap"),
        ("gen_ai.response.model", "scripted-cheap"),
        ("gen_ai.usage.input_tokens", "120"),
        ("gen_ai.usage.output_tokens", "30"),
        ("skillforge.agent.cost_usd", "0.0042"),
    ] {
        assert_eq!(
            attr(agent, key).as_deref(),
            Some(expected),
            "{key}: {agent:?}"
        );
    }

    // Unknown figures are absent, never 0: an ask without usage or model.
    let plain = home.json(&["ask", "planner", "What else?"]);
    let plain_job = plain["job_id"].as_str().unwrap().to_owned();
    let spans = trace_of(&home, &received, &plain_job, &["invoke_agent scripted"]);
    let agent = &spans["invoke_agent scripted"][0];
    for key in [
        "gen_ai.request.model",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "skillforge.agent.cost_usd",
    ] {
        assert!(attr(agent, key).is_none(), "{key} absent: {agent:?}");
    }
    stop_fleet(fleet);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

// A collector that does not answer: jobs run and are applied as ever, the worker logs it once.
#[test]
fn a_dead_collector_is_logged_once_and_costs_jobs_nothing() {
    let home = Home::embedded();
    let dead = free_port();
    write(
        &home.path().join("config.toml"),
        &format!("[telemetry]\notlp_endpoint = \"http://127.0.0.1:{dead}\"\n"),
    );
    let fleet = start_fleet(&home, "dead");
    for _ in 0..3 {
        let id = home.submit(&[], &["true"]);
        home.wait_job(&id, T, "a job to succeed with the collector dead", |j| {
            state(j) == "succeeded"
        });
        assert!(home.job(&id)["traceparent"].is_string());
    }
    stop_fleet(fleet);
    let log = std::fs::read_to_string(home.path().join("worker-dead.log")).unwrap();
    assert_eq!(
        log.matches("does not take traces").count(),
        1,
        "logged once: {log}"
    );
}

// A bad endpoint is refused before anything runs, naming the key.
#[test]
fn a_bad_otlp_endpoint_is_a_usage_error_naming_the_key() {
    let home = Home::embedded();
    write(
        &home.path().join("config.toml"),
        "[telemetry]\notlp_endpoint = \"127.0.0.1:4318\"\n",
    );
    let out = home.run(&["jobs", "submit", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("[telemetry] otlp_endpoint") && stderr.contains("127.0.0.1:4318"),
        "{stderr}"
    );
    assert!(
        !home.path().join("queue.db").exists(),
        "nothing was enqueued"
    );
}
