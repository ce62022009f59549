//! `GET /metrics`, `/health` and `/ready` of `serve --listen ADDR` and `worker --metrics ADDR`
//! (issue 36 item 2), a part of the server's router ([`super::http::router`]).
//!
//! `/metrics` is the Prometheus text format (0.0.4), encoded by `prometheus-client` from figures
//! read at each scrape: the queue's counters, depth and histograms (kept by the queue as jobs
//! change state: one read of O(label sets), never a scan of jobs), the store's counters (kept by
//! triggers as results are applied; `serve` only), and a worker's own counts (`worker` only). A
//! figure the process cannot read is absent from the answer, never reported as 0; a failed read
//! is named in `skillforge_scrape_errors` and the log.
//!
//! `/health` answers 200 while the process serves requests (liveness). `/ready` answers 200 when
//! the queue answers, the store answers (`serve`), ingestion is not stalled (`serve`: no result
//! has waited longer than [`INGESTION_STALL_AFTER`] to be applied) and the worker's lease calls
//! are not failing (`worker`); otherwise 503 with the reasons, as JSON.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use serde_json::json;
use skillforge_engine::QueueBackend;
use skillforge_engine::health::{WorkerFigures, WorkerHealth};
use skillforge_engine::metrics::{MetricRow, MetricsSnapshot};
use skillforge_store::Store;
use skillforge_store::metrics::StoreCounter;

/// `/ready` of `serve` fails when the oldest result not yet applied has waited longer than
/// this: `serve` applies results every `--ingest-every-ms` (200 ms by default), so a result that
/// waits two minutes means ingestion is stuck (a handler failing, the store locked).
pub const INGESTION_STALL_AFTER: Duration = Duration::from_secs(120);

/// Longest a `/ready` check or a `/metrics` read waits for the queue or the store: one that does
/// not answer in time counts as unreachable (a Redis client retries a lost server for longer).
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// `fut`'s answer, or an error saying it did not come within [`CHECK_TIMEOUT`].
async fn bounded<T, E: std::fmt::Display>(
    fut: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(CHECK_TIMEOUT, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {} s", CHECK_TIMEOUT.as_secs())),
    }
}

/// Content type of the Prometheus text format the answer is in.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A worker process's identity and counts, for `worker --metrics`.
pub struct WorkerView {
    /// The worker's id (`name-suffix`), a label on its own figures.
    pub worker_id: String,
    /// Its counts and lease-call health, shared with the running worker.
    pub health: Arc<WorkerHealth>,
}

/// What the endpoints read: the queue always, the store in `serve`, the worker in `worker`.
pub struct MetricsState {
    /// The queue whose kept figures are read at each scrape.
    pub backend: Arc<dyn QueueBackend>,
    /// The domain store (`serve`): its counters, and its reachability for `/ready`.
    pub store: Option<Store>,
    /// The worker of this process (`worker --metrics`).
    pub worker: Option<WorkerView>,
    /// The home whose optimize runs (`<home>/optimize/*`) are counted (`serve`), else `None`.
    pub optimize_home: Option<std::path::PathBuf>,
}

/// The `/metrics`, `/health` and `/ready` part of the server's router.
pub fn router(state: MetricsState) -> axum::Router {
    axum::Router::new()
        .route("/metrics", get(metrics))
        .route("/health", get(health))
        .route("/ready", get(ready))
        .with_state(Arc::new(state))
}

async fn health() -> Response {
    (StatusCode::OK, axum::Json(json!({"status": "ok"}))).into_response()
}

async fn ready(State(state): State<Arc<MetricsState>>) -> Response {
    let mut problems: Vec<String> = Vec::new();
    let mut checks = serde_json::Map::new();
    // One read of the queue's kept figures: proves it answers (on SQLite too, where the clock is
    // local) and gives the ingestion lag.
    let snapshot = bounded(state.backend.metrics()).await;
    match &snapshot {
        Ok(_) => {
            checks.insert("queue".into(), json!("ok"));
        }
        Err(e) => {
            checks.insert("queue".into(), json!("unreachable"));
            problems.push(format!("the queue does not answer: {e}"));
        }
    }
    if let Some(store) = &state.store {
        match bounded(sqlx::query_scalar::<_, i64>("SELECT 1").fetch_one(store.pool())).await {
            Ok(_) => {
                checks.insert("store".into(), json!("ok"));
            }
            Err(e) => {
                checks.insert("store".into(), json!("unreachable"));
                problems.push(format!("the store does not answer: {e}"));
            }
        }
        // Ingestion: only a control plane applies results, so only `serve` is judged on it.
        let lag = match &snapshot {
            Ok(Some(s)) => Some(s.oldest_pending_result_ms),
            _ => None,
        };
        match lag {
            Some(Some(age)) if age > INGESTION_STALL_AFTER.as_millis() as i64 => {
                checks.insert("ingestion".into(), json!("stalled"));
                problems.push(format!(
                    "ingestion is stalled: the oldest result not yet applied has waited {} s (more than {} s); the log says why it is not applied",
                    age / 1000,
                    INGESTION_STALL_AFTER.as_secs()
                ));
            }
            Some(_) => {
                checks.insert("ingestion".into(), json!("ok"));
            }
            None => {
                checks.insert("ingestion".into(), json!("unknown"));
            }
        }
    }
    if let Some(worker) = &state.worker {
        match worker.health.lease_failing() {
            Some((n, error)) => {
                checks.insert("leases".into(), json!("failing"));
                problems.push(format!(
                    "the worker's last {n} lease call(s) failed: {error}"
                ));
            }
            None => {
                checks.insert("leases".into(), json!("ok"));
            }
        }
    }
    if problems.is_empty() {
        (
            StatusCode::OK,
            axum::Json(json!({"ready": true, "checks": checks})),
        )
            .into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({"ready": false, "reasons": problems, "checks": checks})),
        )
            .into_response()
    }
}

async fn metrics(State(state): State<Arc<MetricsState>>) -> Response {
    let mut figures = Figures::default();
    match bounded(state.backend.metrics()).await {
        Ok(snapshot) => figures.queue = snapshot,
        Err(e) => {
            tracing::warn!(error = %e, "/metrics: the queue's figures could not be read");
            figures.errors.push("queue");
        }
    }
    if let Some(store) = &state.store {
        match bounded(skillforge_store::metrics::counters(store.pool())).await {
            Ok(counters) => figures.store = Some(counters),
            Err(e) => {
                tracing::warn!(error = %e, "/metrics: the store's figures could not be read");
                figures.errors.push("store");
            }
        }
    }
    if let Some(home) = state.optimize_home.clone() {
        match tokio::task::spawn_blocking(move || optimize_counts(&home)).await {
            Ok(Ok(counts)) => figures.optimize = Some(counts),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "/metrics: the optimize runs could not be read");
                figures.errors.push("optimize");
            }
            Err(e) => {
                tracing::warn!(error = %e, "/metrics: the optimize runs could not be read");
                figures.errors.push("optimize");
            }
        }
    }
    if let Some(worker) = &state.worker {
        figures.worker = Some((worker.worker_id.clone(), worker.health.figures()));
    }
    let mut registry = Registry::with_prefix("skillforge");
    registry.register_collector(Box::new(figures));
    let mut text = String::new();
    if let Err(e) = prometheus_client::encoding::prometheus_text::encode(&mut text, &registry) {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("encode the metrics: {e}\n"),
        )
            .into_response();
    }
    ([(header::CONTENT_TYPE, PROMETHEUS_TEXT)], text).into_response()
}

/// Experiments kept and reverted of one optimize run.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct OptimizeCounts {
    /// `kept` and `runner_up_kept`: changes integrated.
    kept: u64,
    /// `reverted` (not eligible) and `runner_up_reverted` (harmful in combination): changes
    /// measured and taken out.
    reverted: u64,
}

/// Kept and reverted experiments of every optimize run under `<home>/optimize/`, by spec name,
/// from each run's experiment log (a run whose log does not exist yet counts nothing).
///
/// # Errors
/// A log that exists and cannot be read, naming it.
fn optimize_counts(home: &std::path::Path) -> Result<Vec<(String, OptimizeCounts)>, String> {
    use skillforge_optimize::log::Outcome;
    let Ok(dir) = std::fs::read_dir(home.join("optimize")) else {
        return Ok(Vec::new());
    };
    let mut names: Vec<String> = dir
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut out = Vec::new();
    for name in names {
        let root = skillforge_optimize::state::StateRoot::new(home, &name).root;
        if !root.join(skillforge_optimize::log::LOG_FILE).exists() {
            continue;
        }
        let log = skillforge_optimize::log::read(&root)
            .map_err(|e| format!("optimize run `{name}`: {e}"))?;
        let mut counts = OptimizeCounts::default();
        for entry in &log.experiments {
            match entry.outcome {
                Outcome::Kept | Outcome::RunnerUpKept => counts.kept += 1,
                Outcome::Reverted | Outcome::RunnerUpReverted => counts.reverted += 1,
                _ => {}
            }
        }
        out.push((name, counts));
    }
    Ok(out)
}

/// The figures of one scrape; encoded by [`Collector::encode`].
#[derive(Debug, Default)]
struct Figures {
    queue: Option<MetricsSnapshot>,
    store: Option<Vec<StoreCounter>>,
    /// Kept and reverted experiments per optimize run (`serve`).
    optimize: Option<Vec<(String, OptimizeCounts)>>,
    worker: Option<(String, WorkerFigures)>,
    /// Sources that could not be read this time (`queue`, `store`).
    errors: Vec<&'static str>,
}

type Labels = Vec<(&'static str, String)>;

/// A counter family (`_total` is added by the encoder) from its label sets and values; nothing
/// when it has no series.
fn counters<V: prometheus_client::encoding::EncodeCounterValue + std::fmt::Debug>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (Labels, V)>,
) -> Result<(), std::fmt::Error> {
    let series: Vec<(Labels, V)> = series.into_iter().collect();
    if series.is_empty() {
        return Ok(());
    }
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, value) in series {
        ConstCounter::new(value).encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

/// A gauge family from its label sets and values; nothing when it has no series.
fn gauges<V: prometheus_client::encoding::EncodeGaugeValue + std::fmt::Debug>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (Labels, V)>,
) -> Result<(), std::fmt::Error> {
    let series: Vec<(Labels, V)> = series.into_iter().collect();
    if series.is_empty() {
        return Ok(());
    }
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in series {
        ConstGauge::new(value).encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

fn rows<'a>(
    snapshot: &'a MetricsSnapshot,
    name: &'a str,
) -> impl Iterator<Item = &'a MetricRow> + 'a {
    snapshot.rows.iter().filter(move |r| r.name == name)
}

fn job_labels(r: &MetricRow, outcome: Option<&'static str>) -> Labels {
    let mut l = vec![
        ("queue", r.queue.clone()),
        ("workflow", r.workflow.clone()),
        ("stage", r.stage.clone()),
    ];
    if let Some(key) = outcome {
        l.push((key, r.outcome.clone()));
    }
    l
}

/// A histogram's buckets by bound (ms, −1 = `+Inf`): (count, sum of ms).
type Cells = std::collections::BTreeMap<i64, (u64, i64)>;

/// A histogram family from the queue's per-bucket rows of `name`.
fn histogram(
    encoder: &mut DescriptorEncoder,
    snapshot: &MetricsSnapshot,
    name: &str,
    metric: &str,
    help: &str,
) -> Result<(), std::fmt::Error> {
    use std::collections::BTreeMap;
    let mut series: BTreeMap<(String, String, String), Cells> = BTreeMap::new();
    for r in rows(snapshot, name) {
        let b = series
            .entry((r.queue.clone(), r.workflow.clone(), r.stage.clone()))
            .or_default();
        let cell = b.entry(r.le_ms).or_default();
        cell.0 += u64::try_from(r.value).unwrap_or(0);
        cell.1 += r.sum_ms;
    }
    if series.is_empty() {
        return Ok(());
    }
    let mut m = encoder.encode_descriptor(metric, help, None, MetricType::Histogram)?;
    for ((queue, workflow, stage), cells) in &series {
        // Each bucket's own count: the encoder writes them cumulative, and `+Inf` as `count`.
        let buckets: Vec<(f64, u64)> = skillforge_engine::metrics::BUCKETS_MS
            .iter()
            .map(|bound| (*bound as f64 / 1000.0, cells.get(bound).map_or(0, |c| c.0)))
            .collect();
        let count = cells.values().map(|c| c.0).sum::<u64>();
        let sum_s = cells.values().map(|c| c.1).sum::<i64>() as f64 / 1000.0;
        let labels: Labels = vec![
            ("queue", queue.clone()),
            ("workflow", workflow.clone()),
            ("stage", stage.clone()),
        ];
        m.encode_family(&labels)?
            .encode_histogram::<NoLabelSet>(sum_s, count, &buckets, None)?;
    }
    Ok(())
}

impl Collector for Figures {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let e = &mut encoder;
        if let Some(q) = &self.queue {
            let as_u = |v: i64| u64::try_from(v).unwrap_or(0);
            counters(
                e,
                "jobs_enqueued",
                "Jobs created, by queue, workflow and stage.",
                rows(q, "enqueued").map(|r| (job_labels(r, None), as_u(r.value))),
            )?;
            counters(
                e,
                "jobs_started",
                "Attempts started (leases taken), by queue, workflow and stage.",
                rows(q, "started").map(|r| (job_labels(r, None), as_u(r.value))),
            )?;
            counters(
                e,
                "jobs_finished",
                "Jobs that reached a final state, by queue, workflow, stage and outcome (the final state).",
                rows(q, "finished").map(|r| (job_labels(r, Some("outcome")), as_u(r.value))),
            )?;
            gauges(
                e,
                "queue_depth",
                "Jobs in each state now, by queue.",
                rows(q, "depth").map(|r| {
                    (
                        vec![("queue", r.queue.clone()), ("state", r.outcome.clone())],
                        r.value,
                    )
                }),
            )?;
            counters(
                e,
                "job_retries",
                "Attempts that ended and put their job back in the queue for another attempt, by queue.",
                rows(q, "retries").map(|r| (vec![("queue", r.queue.clone())], as_u(r.value))),
            )?;
            counters(
                e,
                "lease_recoveries",
                "Leases the reaper found expired (worker dead or hung) and recovered, by queue.",
                rows(q, "lease_recoveries")
                    .map(|r| (vec![("queue", r.queue.clone())], as_u(r.value))),
            )?;
            let fenced: u64 = rows(q, "fencing_rejections").map(|r| as_u(r.value)).sum();
            counters(
                e,
                "fencing_rejections",
                "Results refused because a newer lease had superseded theirs.",
                [(Labels::new(), fenced)],
            )?;
            histogram(
                e,
                q,
                "wait_ms",
                "job_wait_seconds",
                "Seconds from a job being due to an attempt starting (enqueue to start).",
            )?;
            histogram(
                e,
                q,
                "run_ms",
                "job_run_seconds",
                "Seconds each attempt ran, from its lease to its end.",
            )?;
            gauges(
                e,
                "workers_alive",
                "Workers whose presence lock is held and fresh.",
                [(Labels::new(), q.workers_alive as i64)],
            )?;
            let lag = q
                .oldest_pending_result_ms
                .map_or(0.0, |ms| ms as f64 / 1000.0);
            gauges(
                e,
                "ingestion_lag_seconds",
                "Age of the oldest result not yet applied by a control plane (0 when none waits).",
                [(Labels::new(), lag)],
            )?;
        }
        if let Some(kept) = &self.store {
            let of = |name: &'static str| kept.iter().filter(move |c| c.name == name);
            counters(
                e,
                "results_applied",
                "Job results applied to the store exactly once, by workflow, stage and state.",
                of("results_applied").map(|c| {
                    (
                        vec![
                            ("workflow", c.a.clone()),
                            ("stage", c.b.clone()),
                            ("state", c.c.clone()),
                        ],
                        c.value as u64,
                    )
                }),
            )?;
            counters(
                e,
                "bineval_verdicts",
                "BINEVAL answers written, by verdict.",
                of("bineval_verdicts").map(|c| (vec![("verdict", c.a.clone())], c.value as u64)),
            )?;
            counters(
                e,
                "promotion_events",
                "Promotion log entries (promotions, canary graduations, rollbacks, …), by event.",
                of("promotion_events").map(|c| (vec![("event", c.a.clone())], c.value as u64)),
            )?;
            let by_model =
                |c: &StoreCounter| vec![("runtime", c.a.clone()), ("model", c.b.clone())];
            counters(
                e,
                "agent_input_tokens",
                "Input tokens agent runs reported, by runtime and model (runs that reported none add nothing).",
                of("agent_input_tokens").map(|c| (by_model(c), c.value as u64)),
            )?;
            counters(
                e,
                "agent_output_tokens",
                "Output tokens agent runs reported, by runtime and model.",
                of("agent_output_tokens").map(|c| (by_model(c), c.value as u64)),
            )?;
            counters(
                e,
                "agent_cost_usd",
                "Cost in US dollars agent runtimes reported, by runtime and model.",
                of("agent_cost_usd").map(|c| (by_model(c), c.value)),
            )?;
        }
        if let Some(runs) = &self.optimize {
            counters(
                e,
                "optimize_experiments_kept",
                "Optimize experiments whose change was kept (kept, runner_up_kept), by spec.",
                runs.iter()
                    .map(|(spec, c)| (vec![("spec", spec.clone())], c.kept)),
            )?;
            counters(
                e,
                "optimize_experiments_reverted",
                "Optimize experiments whose change was measured and reverted (reverted, runner_up_reverted), by spec.",
                runs.iter()
                    .map(|(spec, c)| (vec![("spec", spec.clone())], c.reverted)),
            )?;
        }
        if let Some((id, w)) = &self.worker {
            let me = || vec![("worker", id.clone())];
            counters(
                e,
                "worker_leases",
                "Leases this worker took.",
                [(me(), w.leased)],
            )?;
            gauges(
                e,
                "worker_jobs_running",
                "Leases this worker holds now.",
                [(me(), w.running as i64)],
            )?;
            counters(
                e,
                "worker_results",
                "Results this worker delivered, by reply (applied, fenced), handed back or not delivered.",
                [
                    (
                        {
                            let mut l = me();
                            l.push(("result", "applied".into()));
                            l
                        },
                        w.finished,
                    ),
                    (
                        {
                            let mut l = me();
                            l.push(("result", "fenced".into()));
                            l
                        },
                        w.fenced,
                    ),
                    (
                        {
                            let mut l = me();
                            l.push(("result", "handed_back".into()));
                            l
                        },
                        w.released,
                    ),
                    (
                        {
                            let mut l = me();
                            l.push(("result", "undelivered".into()));
                            l
                        },
                        w.undelivered,
                    ),
                ],
            )?;
            counters(
                e,
                "worker_heartbeats",
                "Lease heartbeats this worker sent, by reply (answered, error).",
                [
                    (
                        {
                            let mut l = me();
                            l.push(("reply", "answered".into()));
                            l
                        },
                        w.heartbeats,
                    ),
                    (
                        {
                            let mut l = me();
                            l.push(("reply", "error".into()));
                            l
                        },
                        w.heartbeat_errors,
                    ),
                ],
            )?;
            counters(
                e,
                "worker_leases_lost",
                "Leases this worker's heartbeats found lost (reaped or a lock taken over).",
                [(me(), w.leases_lost)],
            )?;
        }
        gauges(
            e,
            "scrape_errors",
            "Sources this scrape could not read (their figures are absent).",
            self.errors
                .iter()
                .map(|s| (vec![("source", (*s).to_owned())], 1i64)),
        )?;
        Ok(())
    }
}
