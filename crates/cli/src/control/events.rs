//! `POST /events` of `skillforge serve --listen ADDR`: GitHub webhook deliveries and CI reports,
//! HMAC-SHA256-signed in `X-Hub-Signature-256`, harvested and their legs dispatched; a merged PR is
//! attributed by its `Skillforge-Template` trailer (body, else its commits when a GitHub token is
//! configured; issue 37 item 8) (seed:
//! SkillOpt, "Automatic trace-harvested feedback (Mode A, off by default)"; issue 6 item 2).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::{Value, json};
use skillforge_engine::QueueBackend;
use skillforge_skillopt::harvest::webhook::{
    EVENT_HEADER, SIGNATURE_HEADER, WebhookError, needs_commit_trailer, parse_event,
    verify_signature,
};
use skillforge_skillopt::harvest::{
    HarvestConfig, HarvestEvent, available_reviewers, dispatch_legs, harvest, trailer,
};
use skillforge_store::Store;
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
    /// GitHub, when a token is configured: a merged PR whose body has no `Skillforge-Template`
    /// trailer has its commits read for one (issue 37 item 8). `None`: the body only.
    pub forge: Option<Arc<dyn skillforge_forge::Forge>>,
    /// Woken when an event wrote feedback rows: new evidence the auto-promote guardrails re-run
    /// on without waiting for their timer (issue 37 item 7).
    pub evidence: Arc<tokio::sync::Notify>,
}

/// Largest request body buffered (a GitHub delivery is far smaller); larger is 413 unread.
pub const MAX_BODY_BYTES: usize = 1 << 20;
/// Bytes of request bodies read but not yet verified, across every connection: a body that
/// would take more is 503 at once (its client may try again). An HMAC over the whole body can
/// only be checked once the body is read, so this bounds what unauthenticated clients can make
/// `serve` hold ([`super::http::MAX_CONNECTIONS`] connections × 1 MiB before), while a delivery of
/// up to [`MAX_BODY_BYTES`] always fits when nobody else is sending.
pub const UNVERIFIED_BODY_BUDGET_BYTES: usize = 4 << 20;

/// The router's state: the endpoint's [`EventsState`] and its budget of unverified body bytes.
struct Endpoint {
    state: EventsState,
    unverified: Arc<tokio::sync::Semaphore>,
}

/// The `POST /events` part of the server's router ([`super::http::router`]): bodies up to
/// [`MAX_BODY_BYTES`], at most [`UNVERIFIED_BODY_BUDGET_BYTES`] read unverified at once; the
/// connection limits are the server's ([`super::http`]).
pub fn router(state: EventsState) -> axum::Router {
    axum::Router::new()
        .route("/events", post(post_events))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(Arc::new(Endpoint {
            state,
            unverified: Arc::new(tokio::sync::Semaphore::new(UNVERIFIED_BODY_BUDGET_BYTES)),
        }))
}

/// The `POST /events` part when no webhook secret is configured: every request is 503 with the
/// reason, its body unread and nothing written (an unsigned event is never accepted).
pub fn router_off(secret_env: &'static str) -> axum::Router {
    axum::Router::new().route(
        "/events",
        post(move || async move {
            reply(
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"error": format!("POST /events is off: no webhook secret is configured; set {secret_env} or [server] webhook_secret and restart serve")}),
            )
        }),
    )
}

type Reply = (StatusCode, axum::Json<Value>);

fn reply(status: StatusCode, body: Value) -> Reply {
    (status, axum::Json(body))
}

/// Whether `header` has the shape of a signature (`sha256=` and 64 hex digits): a request
/// without one is refused before its body is read.
fn is_signature_shaped(header: Option<&str>) -> bool {
    header
        .and_then(|h| h.trim().strip_prefix("sha256="))
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Reads `body` up to [`MAX_BODY_BYTES`], each chunk first taking its size from the endpoint's
/// budget of unverified bytes (held until the caller verifies the body and drops the permit).
/// A declared or actual size over the cap is 413, a budget used up by other clients 503.
async fn read_body(
    endpoint: &Endpoint,
    headers: &HeaderMap,
    body: axum::body::Body,
) -> Result<(Bytes, tokio::sync::OwnedSemaphorePermit), Reply> {
    use futures::StreamExt;
    let too_large = || {
        reply(
            StatusCode::PAYLOAD_TOO_LARGE,
            json!({"error": format!("the body is over {MAX_BODY_BYTES} bytes")}),
        )
    };
    let busy = || {
        warn!("refused an event body: too many unverified bodies are being read");
        reply(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"error": "too many event bodies are being read at once; try again"}),
        )
    };
    let declared = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES) {
        return Err(too_large());
    }
    let mut held = endpoint
        .unverified
        .clone()
        .try_acquire_many_owned(0)
        .map_err(|_| busy())?;
    let mut buf = Vec::with_capacity(declared.unwrap_or(0));
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            reply(
                StatusCode::BAD_REQUEST,
                json!({"error": format!("read the body: {e}")}),
            )
        })?;
        if buf.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(too_large());
        }
        let n = u32::try_from(chunk.len()).map_err(|_| too_large())?;
        held.merge(
            endpoint
                .unverified
                .clone()
                .try_acquire_many_owned(n)
                .map_err(|_| busy())?,
        );
        buf.extend_from_slice(&chunk);
    }
    Ok((Bytes::from(buf), held))
}

/// `POST /events`: verify, parse, harvest, dispatch legs. 401 bad/missing signature (a missing
/// or malformed one before the body is read), 413 a body over [`MAX_BODY_BYTES`], 503 when
/// [`UNVERIFIED_BODY_BUDGET_BYTES`] are being read unverified, 400 bad payload, 500 when the
/// harvest could not be written (recorded as `auto_trace_harvest_failed`), 202 when the
/// harvester is off (S-13: the body is not even parsed), else 200 with the rows and, in
/// `skipped`, why a delivery (an event type not read, a PR closed without merging, …) or part
/// of it wrote nothing.
async fn post_events(
    State(endpoint): State<Arc<Endpoint>>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Reply {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if !is_signature_shaped(header(SIGNATURE_HEADER)) {
        let e = if header(SIGNATURE_HEADER).is_none() {
            WebhookError::MissingSignature
        } else {
            WebhookError::BadSignature
        };
        warn!(error = %e, "refused an unsigned or mis-signed event");
        return reply(StatusCode::UNAUTHORIZED, json!({"error": e.to_string()}));
    }
    let (body, unverified) = match read_body(&endpoint, &headers, body).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };
    let state = &endpoint.state;
    let verified = verify_signature(&state.secret, &body, header(SIGNATURE_HEADER));
    drop(unverified);
    if let Err(e) = verified {
        warn!(error = %e, "refused an unsigned or mis-signed event");
        return reply(StatusCode::UNAUTHORIZED, json!({"error": e.to_string()}));
    }
    let Some(kind) = header(EVENT_HEADER) else {
        return reply(
            StatusCode::BAD_REQUEST,
            json!({"error": WebhookError::MissingEvent.to_string()}),
        );
    };
    if !state.config.is_enabled() {
        return reply(
            StatusCode::ACCEPTED,
            json!({"harvested": false, "reason": "auto_trace_disabled"}),
        );
    }
    let (mut events, mut skipped) = match parse_event(kind, &body) {
        Ok(delivery) => (delivery.events, delivery.skipped),
        Err(e) => return reply(StatusCode::BAD_REQUEST, json!({"error": e.to_string()})),
    };
    if let (Some(forge), Some((repo, pr))) = (&state.forge, needs_commit_trailer(&events)) {
        commit_trailer(forge.as_ref(), &repo, pr, &mut events).await;
    }
    let reviewers = available_reviewers(&state.config);
    let mut rows = Vec::new();
    let mut attributed = Vec::new();
    let mut legs = Vec::new();
    for event in &events {
        match harvest(&state.store, &state.config, event, &reviewers).await {
            Ok(report) => {
                match dispatch_legs(state.backend.as_ref(), &state.store, &report.legs).await {
                    Ok(enqueued) => legs.extend(
                        enqueued
                            .into_iter()
                            .map(|(leg, id)| json!({"leg": leg.name(), "job_id": id})),
                    ),
                    Err(e) => warn!(error = %e, "harvest legs not dispatched"),
                }
                rows.extend(report.rows);
                skipped.extend(report.skipped);
                attributed.extend(report.attributed);
            }
            Err(e) => {
                return reply(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    json!({"error": format!("harvest failed: {e}")}),
                );
            }
        }
    }
    info!(
        event = kind,
        n_rows = rows.len(),
        n_legs = legs.len(),
        "event harvested"
    );
    if !rows.is_empty() {
        state.evidence.notify_one();
    }
    let mut answer = json!({"event": kind, "rows": rows, "skipped": skipped, "legs": legs});
    if !attributed.is_empty() {
        answer["attributed"] = json!(attributed);
    }
    reply(StatusCode::OK, answer)
}

/// Reads the commits of merged or change-requested `repo#pr` (`GET
/// /repos/{o}/{r}/pulls/{n}/commits`) and, when one carries a `Skillforge-Template` trailer (the
/// newest that does), puts its attribution before the PR's outcome or fix round in `events`. A failed read is logged and the delivery goes on unattributed
/// (the PR watcher, or `harvest attribute`, can still attribute it).
async fn commit_trailer(
    forge: &dyn skillforge_forge::Forge,
    repo: &str,
    pr: i64,
    events: &mut Vec<HarvestEvent>,
) {
    let (Ok(reference), Ok(number)) = (skillforge_forge::RepoRef::parse(repo), u64::try_from(pr))
    else {
        return;
    };
    let commits = match forge.list_pull_commits(&reference, number).await {
        Ok(commits) => commits
            .into_iter()
            .map(|c| (c.sha, c.commit.message))
            .collect::<Vec<_>>(),
        Err(e) => {
            warn!(repo, pr, error = %e, "could not read the PR's commits for a Skillforge-Template trailer");
            return;
        }
    };
    if let Some(trailer) = trailer::find(None, &commits) {
        let at = events
            .iter()
            .position(|e| {
                matches!(
                    e,
                    HarvestEvent::Outcome { .. } | HarvestEvent::ChangesRequested { .. }
                )
            })
            .unwrap_or(0);
        events.insert(
            at,
            HarvestEvent::Attributed {
                repo: repo.to_owned(),
                pr,
                trailer,
            },
        );
    }
}
