//! `POST /events` of `skillforge serve --listen ADDR`: GitHub webhook deliveries and CI reports,
//! HMAC-SHA256-signed in `X-Hub-Signature-256`, harvested and their legs dispatched (seed:
//! SkillOpt, "Automatic trace-harvested feedback (Mode A, off by default)"; issue 6 item 2).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::{Value, json};
use skillforge_engine::QueueBackend;
use skillforge_store::Store;
use skillforge_skillopt::harvest::webhook::{EVENT_HEADER, SIGNATURE_HEADER, WebhookError, parse_event, verify_signature};
use skillforge_skillopt::harvest::{HarvestConfig, available_reviewers, dispatch_legs, harvest};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// What the endpoint needs: the control plane's store and queue, the harvester's config, the secret.
pub struct EventsState {
    /// The domain store.
    pub store: Store,
    /// The queue legs are dispatched onto.
    pub backend: Arc<dyn QueueBackend>,
    /// The harvester's switches and leg stages.
    pub config: HarvestConfig,
    /// The webhook secret (HMAC key).
    pub secret: Vec<u8>,
    /// Woken when an event wrote feedback rows: new evidence the auto-promote guardrails re-run
    /// on without waiting for their timer (issue 37 item 7).
    pub evidence: Arc<tokio::sync::Notify>,
}

/// Connections served at once; more wait in the listen backlog (no file descriptor of `serve`
/// each), so slow or idle clients cannot use up the fds ingestion and the canary checks need.
pub const MAX_CONNECTIONS: usize = 32;
/// Longest wait for a request's headers (slow-header clients are cut off).
pub const HEADER_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// Longest a connection lives, its body and the answer included (slow-body clients are cut off).
pub const CONNECTION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// Largest request body buffered (a GitHub delivery is far smaller); larger is 413 unread.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// Serves `POST /events` on `listener` until `shutdown` (issue 32 item 10): at most
/// [`MAX_CONNECTIONS`] at once, one request per connection, headers within
/// [`HEADER_READ_TIMEOUT`], the whole exchange within [`CONNECTION_TIMEOUT`], bodies up to
/// [`MAX_BODY_BYTES`]; accept errors (e.g. out of fds) are logged and retried after a pause.
pub async fn serve_events(listener: tokio::net::TcpListener, state: EventsState, shutdown: CancellationToken) {
    if let Ok(addr) = listener.local_addr() {
        eprintln!("listening for events on http://{addr}/events");
    }
    let app = axum::Router::new()
        .route("/events", post(post_events))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(Arc::new(state));
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let connections = tokio_util::task::TaskTracker::new();
    loop {
        // A slot first: while every slot is taken, new connections wait in the kernel's backlog.
        let permit = tokio::select! {
            () = shutdown.cancelled() => break,
            permit = slots.clone().acquire_owned() => match permit { Ok(p) => p, Err(_) => break },
        };
        let (stream, _) = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    warn!(error = %e, "events endpoint: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let stop = shutdown.clone();
        connections.spawn(async move {
            let _permit = permit;
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .keep_alive(false)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            tokio::select! {
                () = stop.cancelled() => {}
                served = tokio::time::timeout(CONNECTION_TIMEOUT, connection) => match served {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tracing::debug!(error = %e, "events connection ended with an error"),
                    Err(_) => tracing::debug!("events connection cut off after the connection timeout"),
                },
            }
        });
    }
    connections.close();
    connections.wait().await;
}

type Reply = (StatusCode, axum::Json<Value>);

fn reply(status: StatusCode, body: Value) -> Reply {
    (status, axum::Json(body))
}

/// `POST /events`: verify, parse, harvest, dispatch legs. 401 bad/missing signature, 400 bad
/// payload, 500 when the harvest could not be written (recorded as `auto_trace_harvest_failed`),
/// 202 when the harvester is off (S-13: the body is not even parsed), else 200 with the rows.
async fn post_events(State(state): State<Arc<EventsState>>, headers: HeaderMap, body: Bytes) -> Reply {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Err(e) = verify_signature(&state.secret, &body, header(SIGNATURE_HEADER)) {
        warn!(error = %e, "refused an unsigned or mis-signed event");
        return reply(StatusCode::UNAUTHORIZED, json!({"error": e.to_string()}));
    }
    let Some(kind) = header(EVENT_HEADER) else {
        return reply(StatusCode::BAD_REQUEST, json!({"error": WebhookError::MissingEvent.to_string()}));
    };
    if !state.config.is_enabled() {
        return reply(StatusCode::ACCEPTED, json!({"harvested": false, "reason": "auto_trace_disabled"}));
    }
    let events = match parse_event(kind, &body) {
        Ok(events) => events,
        Err(e) => return reply(StatusCode::BAD_REQUEST, json!({"error": e.to_string()})),
    };
    let reviewers = available_reviewers(&state.config);
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    let mut legs = Vec::new();
    for event in &events {
        match harvest(&state.store, &state.config, event, &reviewers).await {
            Ok(report) => {
                match dispatch_legs(state.backend.as_ref(), &state.store, &report.legs).await {
                    Ok(enqueued) => legs.extend(enqueued.into_iter().map(|(leg, id)| json!({"leg": leg.name(), "job_id": id}))),
                    Err(e) => warn!(error = %e, "harvest legs not dispatched"),
                }
                rows.extend(report.rows);
                skipped.extend(report.skipped);
            }
            Err(e) => {
                return reply(StatusCode::INTERNAL_SERVER_ERROR, json!({"error": format!("harvest failed: {e}")}));
            }
        }
    }
    info!(event = kind, n_rows = rows.len(), n_legs = legs.len(), "event harvested");
    if !rows.is_empty() {
        state.evidence.notify_one();
    }
    reply(StatusCode::OK, json!({"event": kind, "rows": rows, "skipped": skipped, "legs": legs}))
}
