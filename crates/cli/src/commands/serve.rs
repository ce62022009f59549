//! `skillforge serve`: the control plane — reaper, result ingestion and, with `--listen ADDR`,
//! `POST /events` for CI pipelines and forge webhooks — until SIGTERM/SIGINT.
//!
//! `POST /events` takes GitHub webhook deliveries (`X-GitHub-Event`: `pull_request`, `status`,
//! `check_suite`, `pull_request_review`, `ping`) and CI reports (`skillforge_outcome`), each signed
//! with HMAC-SHA256 in `X-Hub-Signature-256` under `SKILLFORGE_WEBHOOK_SECRET` or
//! `[server] webhook_secret`. With no secret configured `--listen` refuses to start; a missing or
//! wrong signature is 401 and a bad payload 400, with nothing written (seed: SkillOpt, "Automatic
//! trace-harvested feedback (Mode A, off by default)"; issue 6 item 2).

use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use clap::Args;
use serde_json::{Value, json};
use skillforge_engine::ingest::{RecordOnly, ResultHandler, run_ingestion};
use skillforge_engine::reaper::{DEFAULT_REAP_EVERY, run_reaper};
use skillforge_engine::{Job, QueueBackend};
use skillforge_store::Store;
use skillforge_store::blobs::BlobStore;
use skillforge_workflows::train::TrainResultHandler;
use skillforge_workflows::train::generation::TRAIN_WORKFLOW;
use skillforge_workflows::harvest::webhook::{EVENT_HEADER, SIGNATURE_HEADER, WebhookError, parse_event, verify_signature};
use skillforge_workflows::harvest::{HarvestConfig, HarvestHandler, available_reviewers, dispatch_legs, harvest};
use sqlx::SqliteConnection;
use tracing::{info, warn};

use crate::commands::signals::shutdown_on_signal;
use crate::commands::worker::queue_label;
use crate::context::Context;
use crate::exit::{CliError, CliResult, OK};

/// Environment variable holding the webhook secret (wins over `[server] webhook_secret`).
pub const WEBHOOK_SECRET_ENV: &str = "SKILLFORGE_WEBHOOK_SECRET";

/// Arguments of `skillforge serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Milliseconds between result-ingestion passes.
    #[arg(long, default_value_t = 200)]
    ingest_every_ms: u64,
    /// Serve `POST /events` on this address (e.g. `127.0.0.1:8787`); default `[server] listen`, else off.
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// Seconds between canary regression-window checks (graduate / roll back / hold); 0 = off.
    #[arg(long, default_value_t = 60)]
    canary_check_every_secs: u64,
}

/// The control plane's result handler: dispatches a finished job to its workflow's handler by
/// `job.spec.workflow` (`harvest` → [`HarvestHandler`], `train` → [`TrainResultHandler`]),
/// falling back to [`RecordOnly`].
#[derive(Debug, Clone)]
pub struct WorkflowHandlers {
    train: TrainResultHandler,
}

impl WorkflowHandlers {
    /// The handlers of the home `home` (train results store blobs there).
    pub fn new(home: &std::path::Path) -> Self {
        Self { train: TrainResultHandler { blobs: BlobStore::in_home(home) } }
    }
}

#[async_trait::async_trait]
impl ResultHandler for WorkflowHandlers {
    async fn apply(&self, conn: &mut SqliteConnection, job: &Job) -> Result<(), String> {
        match job.spec.workflow.as_str() {
            skillforge_workflows::harvest::WORKFLOW => HarvestHandler.apply(conn, job).await,
            TRAIN_WORKFLOW => self.train.apply(conn, job).await,
            skillforge_workflows::evalloop::stages::EVAL_WORKFLOW => skillforge_workflows::evalloop::handler::EvalResultHandler.apply(conn, job).await,
            _ => RecordOnly.apply(conn, job).await,
        }
    }
}

/// Runs the reaper, the ingestion loop and, with `--listen`, the events endpoint until a signal.
pub async fn run(ctx: &Context, args: ServeArgs) -> CliResult {
    let listen = args.listen.clone().or_else(|| ctx.config.server.listen.clone());
    let secret = webhook_secret(ctx);
    if listen.is_some() && secret.is_none() {
        return Err(CliError::usage(anyhow!(
            "refusing to serve /events without a webhook secret: set {WEBHOOK_SECRET_ENV} or [server] webhook_secret"
        )));
    }
    let backend = ctx.queue().await?;
    let store = ctx.store().await?;
    let shutdown = shutdown_on_signal();
    let listener = match &listen {
        Some(addr) => {
            // A malformed address is the user's input (exit 2); a bind failure is the environment's.
            let parsed: std::net::SocketAddr = addr
                .parse()
                .map_err(|e| CliError::usage(anyhow!("--listen `{addr}` is not HOST:PORT (e.g. 127.0.0.1:8787): {e}")))?;
            Some(
                tokio::net::TcpListener::bind(parsed)
                    .await
                    .map_err(|e| CliError::env(anyhow!("listen on `{addr}`: {e}")))?,
            )
        }
        None => None,
    };
    eprintln!("control plane on {} with store {}", queue_label(ctx), ctx.home.display());
    let handlers = WorkflowHandlers::new(&ctx.home);
    let reaper = run_reaper(backend.as_ref(), DEFAULT_REAP_EVERY, shutdown.clone());
    let ingestion = run_ingestion(
        backend.as_ref(),
        &store,
        &handlers,
        Duration::from_millis(args.ingest_every_ms.max(10)),
        shutdown.clone(),
    );
    let events = async {
        let (Some(listener), Some(secret)) = (listener, secret) else { return };
        if let Ok(addr) = listener.local_addr() {
            eprintln!("listening for events on http://{addr}/events");
        }
        let state = Arc::new(EventsState {
            store: store.clone(),
            backend: backend.clone(),
            config: ctx.config.skillopt.harvest_config(),
            secret,
        });
        let app = axum::Router::new().route("/events", post(post_events)).with_state(state);
        let stop = shutdown.clone();
        if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(async move { stop.cancelled().await }).await {
            warn!(error = %e, "events endpoint stopped");
        }
    };
    let canaries = async {
        if args.canary_check_every_secs == 0 {
            return;
        }
        let every = Duration::from_secs(args.canary_check_every_secs);
        loop {
            if let Err(e) = crate::commands::canary::check_canaries(ctx, &store).await {
                warn!(error = %e.error, "canary check failed");
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
        }
    };
    tokio::join!(reaper, ingestion, events, canaries);
    Ok(OK)
}

fn webhook_secret(ctx: &Context) -> Option<Vec<u8>> {
    std::env::var(WEBHOOK_SECRET_ENV)
        .ok()
        .or_else(|| ctx.config.server.webhook_secret.clone())
        .filter(|s| !s.is_empty())
        .map(String::into_bytes)
}

struct EventsState {
    store: Store,
    backend: Arc<dyn QueueBackend>,
    config: HarvestConfig,
    secret: Vec<u8>,
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
