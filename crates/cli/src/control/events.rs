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
use skillforge_workflows::harvest::webhook::{EVENT_HEADER, SIGNATURE_HEADER, WebhookError, parse_event, verify_signature};
use skillforge_workflows::harvest::{HarvestConfig, available_reviewers, dispatch_legs, harvest};
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
}

/// Serves `POST /events` on `listener` until `shutdown`; a server error is logged.
pub async fn serve_events(listener: tokio::net::TcpListener, state: EventsState, shutdown: CancellationToken) {
    if let Ok(addr) = listener.local_addr() {
        eprintln!("listening for events on http://{addr}/events");
    }
    let app = axum::Router::new().route("/events", post(post_events)).with_state(Arc::new(state));
    if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(async move { shutdown.cancelled().await }).await {
        warn!(error = %e, "events endpoint stopped");
    }
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
    reply(StatusCode::OK, json!({"event": kind, "rows": rows, "skipped": skipped, "legs": legs}))
}
