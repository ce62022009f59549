//! `skillforge serve`: the control plane — reaper, the placement deadline (`[queue]
//! unplaceable_after_secs`), pruning of finished jobs past their retention
//! (`[queue] keep_succeeded` / `keep_failed`), result ingestion, the GitHub watchers (`[github]
//! watch_repos` pull requests, review watches) and, with `--listen ADDR`, one HTTP server
//! ([`crate::control::http`]) with `GET /metrics`, `/health`, `/ready` and `POST /events` for CI
//! pipelines and forge webhooks — until SIGTERM/SIGINT.
//!
//! One `serve` per home: it holds `<home>/serve.lock` (`flock`) and a second one refuses to start
//! naming it. On a shared queue it also holds the queue lock [`SERVE_QUEUE_LOCK`]; a `serve` of
//! another home on the same queue says so at start and runs (docs/fleet.md).
//!
//! `POST /events` takes GitHub webhook deliveries (`X-GitHub-Event`: `pull_request`, `status`,
//! `check_suite`, `pull_request_review`, `ping`) and CI reports (`skillforge_outcome`), each signed
//! with HMAC-SHA256 in `X-Hub-Signature-256` under `SKILLFORGE_WEBHOOK_SECRET` or
//! `[server] webhook_secret`. With no secret configured `/events` answers 503 naming the setting
//! (`serve` says so when it starts); a missing or wrong signature is 401 and a bad payload 400,
//! with nothing written (seed: SkillOpt, "Automatic trace-harvested feedback (Mode A, off by
//! default)"; issue 6 item 2). `/metrics`, `/health` and `/ready`: [`crate::control::metrics`]
//! (issue 36 item 2).

use std::time::Duration;

use crate::families;
use anyhow::anyhow;
use clap::Args;
use skillforge_engine::ingest::run_ingestion;
use skillforge_engine::placement::{PLACEMENT_CHECK_EVERY, run_placement_deadline};
use skillforge_engine::reaper::{DEFAULT_REAP_EVERY, run_reaper_reporting};
use skillforge_engine::retention::{DEFAULT_PRUNE_EVERY, run_pruner};
use skillforge_stage::Wait;

use crate::context::Context;
use crate::control::args::queue_label;
use crate::control::events::EventsState;
use crate::control::github_watch::{DEFAULT_WATCH_EVERY_SECS, GithubWatch, run_github_watch};
use crate::control::signals::shutdown_on_signal;
use crate::exit::{CliError, CliResult, OK};
use skillforge_forge::github::GitHub;

/// Environment variable holding the webhook secret (wins over `[server] webhook_secret`).
pub const WEBHOOK_SECRET_ENV: &str = "SKILLFORGE_WEBHOOK_SECRET";

/// Arguments of `skillforge serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Milliseconds between result-ingestion passes.
    #[arg(long, default_value_t = 200)]
    ingest_every_ms: u64,
    /// Serve HTTP on this address (e.g. `127.0.0.1:8787`): `GET /metrics`, `/health`, `/ready`,
    /// `POST /events` (which needs a webhook secret) and, with a console token set, the web
    /// console; default `[server] listen`, else off.
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// Seconds between canary regression-window checks (graduate / roll back / hold); 0 = off.
    #[arg(long, default_value_t = 60)]
    canary_check_every_secs: u64,
    /// Milliseconds between re-runs of the auto-promote guardrails for pending candidates whose
    /// evidence changed (harvested outcomes, webhooks, A/B picks); only with `auto_promote` on; 0 = off.
    #[arg(long, default_value_t = 1000)]
    decide_every_ms: u64,
}

/// Runs the reaper, the ingestion loop and, with `--listen`, the HTTP server until a signal.
pub async fn run(ctx: &Context, args: ServeArgs) -> CliResult {
    raise_fd_limit();
    let listen = args
        .listen
        .clone()
        .or_else(|| ctx.config.server.listen.clone());
    let secret = webhook_secret(ctx);
    let harvest_config = ctx
        .config
        .skillopt
        .harvest_config(&ctx.home)
        .map_err(CliError::usage)?;
    // The web console (issue 36 item 1): served with `--listen` when a console token is set.
    let tokens = crate::console::access::Tokens::load(&ctx.config.server, &ctx.home)
        .map_err(|e| CliError::usage(anyhow!(e)))?;
    let github = &ctx.config.github;
    let watch_repos = github
        .watch_repos()
        .map_err(|e| CliError::usage(anyhow!(e)))?;
    let forge = GitHub::new(&github.client_config()).map_err(|e| CliError::usage(anyhow!(e)))?;
    // A webhook's PR commits are read for a `Skillforge-Template` trailer only with a token: an
    // anonymous `serve` makes no GitHub call on a delivery (issue 37 item 8).
    let commits_forge: Option<std::sync::Arc<dyn skillforge_forge::Forge>> =
        github.client_config().token.is_some().then(|| {
            std::sync::Arc::new(forge.clone()) as std::sync::Arc<dyn skillforge_forge::Forge>
        });
    let every = Duration::from_secs(
        github
            .watch_every_secs
            .unwrap_or(DEFAULT_WATCH_EVERY_SECS)
            .max(1),
    );
    let retention = ctx.config.queue.retention()?;
    let console_retention = retention.clone();
    let backend = ctx.queue_for_service().await?;
    let store = ctx.store().await?;
    // One control plane per home: a second `serve` would run every loop twice over one store.
    let _serve_lock = hold_serve_lock(&ctx.home)?;
    let shutdown = shutdown_on_signal();
    let listener = match &listen {
        // A malformed address is the user's input (exit 2); a bind failure is the environment's.
        Some(addr) => Some(crate::control::http::bind("--listen", addr).await?),
        None => None,
    };
    // A queue that lost its data while no process watched it (issue 32 item 5); before the
    // line below, which says the epoch is read and recorded.
    check_epoch(ctx, backend.as_ref(), &store).await;
    eprintln!(
        "control plane on {} with store {}",
        queue_label(ctx),
        ctx.home.display()
    );
    let handlers = families::for_home(&ctx.home);
    let pruner = run_pruner(
        backend.as_ref(),
        retention,
        DEFAULT_PRUNE_EVERY,
        shutdown.clone(),
    );
    let (loss_tx, mut losses) = tokio::sync::mpsc::unbounded_channel();
    let reaper = run_reaper_reporting(
        backend.as_ref(),
        DEFAULT_REAP_EVERY,
        shutdown.clone(),
        Some(loss_tx),
    );
    // Jobs no live worker can take fail after `[queue] unplaceable_after_secs` (issue 35 item 6).
    let placement = run_placement_deadline(
        backend.as_ref(),
        ctx.config.queue.unplaceable_after(),
        PLACEMENT_CHECK_EVERY,
        shutdown.clone(),
    );
    // A lost queue namespace: say which of the store's pending work went with it (item 6).
    let lost = async {
        while let Some(loss) = losses.recv().await {
            record_epoch(ctx, &store, &loss.current_epoch).await;
            match skillforge_stage::lost_work(backend.as_ref(), &store).await {
                Ok(work) => {
                    tracing::error!(namespace = %loss.namespace, missing = work.missing.len(), "{work}")
                }
                Err(e) => {
                    tracing::error!(error = %e, "could not list the store's pending work the queue lost")
                }
            }
        }
    };
    let ingest_every = Duration::from_millis(args.ingest_every_ms.max(10));
    let ingestion = run_ingestion(
        backend.as_ref(),
        &store,
        &handlers,
        ingest_every,
        shutdown.clone(),
    );
    // Woken by the events endpoint when a webhook wrote feedback: the guardrails re-run at once.
    let evidence = std::sync::Arc::new(tokio::sync::Notify::new());
    let http = async {
        let Some(listener) = listener else { return };
        // The server's parts, composed in this one place: each is a router with its own state.
        let metrics = crate::control::metrics::MetricsState {
            backend: backend.clone(),
            store: Some(store.clone()),
            worker: None,
            optimize_home: Some(ctx.home.clone()),
        };
        let mut parts = vec![crate::control::metrics::router(metrics)];
        match secret {
            Some(secret) => parts.push(crate::control::events::router(EventsState {
                store: store.clone(),
                backend: backend.clone(),
                config: harvest_config.clone(),
                secret,
                forge: commits_forge,
                evidence: evidence.clone(),
            })),
            None => {
                eprintln!(
                    "POST /events answers 503: set {WEBHOOK_SECRET_ENV} or [server] webhook_secret to receive webhooks and CI reports"
                );
                parts.push(crate::control::events::router_off(WEBHOOK_SECRET_ENV));
            }
        }
        let console = tokens.any();
        if console {
            let mut state = crate::console::ConsoleState::new(
                backend.clone(),
                store.clone(),
                ctx.home.clone(),
                console_retention,
                tokens.clone(),
            );
            state.pace = ctx.config.skillopt.pace();
            parts.push(crate::console::router(std::sync::Arc::new(state)));
        }
        if let Ok(addr) = listener.local_addr() {
            let console = if console {
                " and the web console at /"
            } else {
                ""
            };
            eprintln!("listening on http://{addr}: /metrics, /health, /ready, /events{console}");
        }
        crate::control::http::serve(
            listener,
            crate::control::http::router(parts),
            shutdown.clone(),
        )
        .await;
    };
    let canaries = async {
        if args.canary_check_every_secs == 0 {
            return;
        }
        let every = Duration::from_secs(args.canary_check_every_secs);
        // The decision jobs: on the embedded queue waited for (an in-process worker runs them when
        // none is live); on a shared queue submitted only — a fleet worker runs them, this
        // ingestion applies them, and the next check finds them by key.
        let wait = if ctx.queue_url.is_embedded() {
            Wait::Block
        } else {
            Wait::Return
        };
        // What each canary's window said last, so a verdict is logged when it changes (a hold
        // and its reason, a graduation, a rollback), not on every check.
        let mut said: std::collections::HashMap<String, String> = std::collections::HashMap::new();
        let mut outstanding = 0;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                checked = crate::control::promotion::check_canaries(ctx, &store, wait) => {
                    match checked {
                        Ok(reports) => {
                            log_canary_verdicts(&reports, &mut said);
                            outstanding = reports
                                .iter()
                                .filter(|r| r["job_id"].is_string() && r["applied"] == false)
                                .count();
                        }
                        Err(e) => tracing::warn!(error = %e.error, "canary check failed"),
                    }
                }
            }
            // A decision submitted to a shared queue is applied by this process's ingestion
            // once a worker ran it: send its event as soon as it is, not at the next check (an
            // event owed when serve stops is sent by the next check of any process).
            let next_check = tokio::time::Instant::now() + every;
            let sinks = crate::control::promotion::policy(ctx).sinks.is_configured();
            while sinks && outstanding > 0 && tokio::time::Instant::now() < next_check {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(ingest_every.min(every)) => {}
                }
                match crate::control::promotion::send_owed_events(ctx, &store).await {
                    Ok(sent) => outstanding = outstanding.saturating_sub(sent),
                    Err(e) => {
                        tracing::warn!(error = %e.error, "sending a canary decision's event failed");
                        break;
                    }
                }
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep_until(next_check) => {}
            }
        }
    };
    let guardrails = async {
        if args.decide_every_ms == 0 || ctx.config.skillopt.auto_promote != Some(true) {
            return;
        }
        redecide_on_evidence(
            ctx,
            &store,
            Duration::from_millis(args.decide_every_ms.max(10)),
            &evidence,
            shutdown.clone(),
        )
        .await;
    };
    let settings = watch_settings(backend.as_ref(), &store, shutdown.clone());
    // Another `serve` over this shared queue from another home: said once, both run
    // (docs/fleet.md). The embedded queue is the home's own: the home's lock above covers it.
    let presence = async {
        if !ctx.queue_url.is_embedded() {
            hold_queue_presence(backend.clone(), shutdown.clone()).await;
        }
    };
    let github_watch = run_github_watch(
        GithubWatch {
            forge,
            repos: watch_repos,
            every,
            home: ctx.home.clone(),
        },
        &store,
        &backend,
        &harvest_config,
        shutdown.clone(),
    );
    tokio::join!(
        reaper,
        placement,
        pruner,
        ingestion,
        http,
        canaries,
        guardrails,
        lost,
        settings,
        github_watch,
        presence
    );
    Ok(OK)
}

/// Re-runs the auto-promote guardrails every `every` for each pending candidate whose evidence
/// changed since it was last decided (issue 37 item 7): outcomes harvested by `harvest outcome`
/// or a webhook, A/B picks, a new champion; at once when `evidence` is woken (a webhook to this
/// process wrote feedback). Once per new evidence: the marks each candidate was
/// decided on are kept for the life of this process, and a restart decides each pending candidate
/// once more (idempotent: the seam sends an event once and starts a canary once). One log line
/// per decision; a failed pass is logged and retried on the next tick.
async fn redecide_on_evidence(
    ctx: &Context,
    store: &skillforge_store::Store,
    every: Duration,
    evidence: &tokio::sync::Notify,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let mut decided = skillforge_skillopt::promotion::reevaluate::Decided::default();
    loop {
        match crate::control::promotion::reevaluate_pending(ctx, store, &mut decided).await {
            Ok(redecided) => {
                for r in redecided {
                    let samples = r
                        .samples
                        .map_or_else(|| "unreadable".to_owned(), |n| n.to_string());
                    tracing::info!(version = %r.version_id, samples = %samples, "guardrails re-run on new evidence: {}", r.report.reason);
                }
            }
            Err(e) => tracing::warn!(error = %e.error, "guardrails re-run failed"),
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(every) => {}
            () = evidence.notified() => {}
        }
    }
}

/// File in the home that the running `serve` holds locked; its text names the holder as JSON
/// (`{"pid": N, "host": "H", "started_at_ms": T}`, ms since the Unix epoch) for the message of a
/// second `serve`. A file from an older build holds the bare pid, which is read as well.
pub const SERVE_LOCK_FILE: &str = "serve.lock";

/// Named lock in the queue that the running `serve` holds while it runs (shown by `skillforge
/// locks`): another `serve` over the same queue from another home finds it and says so at start.
pub const SERVE_QUEUE_LOCK: &str = "control-plane:serve";

/// Heartbeat period of [`SERVE_QUEUE_LOCK`].
const SERVE_QUEUE_HEARTBEAT: Duration = Duration::from_secs(1);
/// Stale threshold of [`SERVE_QUEUE_LOCK`]: a `serve` killed without releasing it stops counting
/// after this long (the next `serve` takes it over).
const SERVE_QUEUE_STALE_AFTER: Duration = Duration::from_secs(10);

/// Who holds a home's [`SERVE_LOCK_FILE`], as written into it.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct ServeHolder {
    pid: u32,
    #[serde(default)]
    host: String,
    #[serde(default)]
    started_at_ms: i64,
}

impl ServeHolder {
    /// Reads the lock file's text: the JSON above, or a bare pid (older builds).
    fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        serde_json::from_str(text).ok().or_else(|| {
            text.parse().ok().map(|pid| Self {
                pid,
                host: String::new(),
                started_at_ms: 0,
            })
        })
    }

    /// `pid N on host H, running for 4m05s` (the parts the file holds).
    fn describe(&self) -> String {
        let mut s = format!("pid {}", self.pid);
        if !self.host.is_empty() {
            s.push_str(&format!(" on host {}", self.host));
        }
        if self.started_at_ms > 0 {
            let ms = skillforge_engine::job::now_ms() - self.started_at_ms;
            s.push_str(&format!(", running for {}", crate::output::age(ms)));
        }
        s
    }
}

/// Locks `<home>/serve.lock` for the life of the returned file, so a second `serve` on the same
/// home refuses to start (exit 2) naming the process that holds it (pid, host, how long it has
/// run) and what to do. The lock is the kernel's (`flock`): it ends with the process however it
/// ends, so a killed `serve` never leaves a stale lock behind (the file's text is only read for
/// the message). Errors: another process holds the lock (usage), the file cannot be opened (env).
fn hold_serve_lock(home: &std::path::Path) -> Result<std::fs::File, CliError> {
    use std::io::{Read, Seek, Write};
    let path = home.join(SERVE_LOCK_FILE);
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| CliError::env(anyhow!("open {}: {e}", path.display())))?;
    match file.try_lock() {
        Ok(()) => {
            // Best effort: the holder is for the message of a second `serve`, the lock is the guard.
            let me = ServeHolder {
                pid: std::process::id(),
                host: skillforge_engine::job::WorkerIdentity::new("serve").host,
                started_at_ms: skillforge_engine::job::now_ms(),
            };
            let text = serde_json::to_string(&me).unwrap_or_default();
            let _ = file
                .set_len(0)
                .and_then(|()| file.rewind())
                .and_then(|()| file.write_all(text.as_bytes()));
            Ok(file)
        }
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            let (holder, stop) = match ServeHolder::parse(&text) {
                Some(h) => (h.describe(), format!("stop it (`kill {}`)", h.pid)),
                None => ("another process".to_owned(), "stop it".to_owned()),
            };
            Err(CliError::usage(anyhow!(
                "another `skillforge serve` ({holder}) is already running on the home {}: one control plane \
                 per home; {stop} first, or give this one its own home with --home",
                home.display()
            )))
        }
        Err(std::fs::TryLockError::Error(e)) => {
            Err(CliError::env(anyhow!("lock {}: {e}", path.display())))
        }
    }
}

/// Takes [`SERVE_QUEUE_LOCK`] in the queue and holds it until `stop` fires, then releases it.
/// When another `serve` (of another home: one home has one `serve`) holds it, says so once on
/// stderr — both run, and a result is ingested by whichever applies it first (docs/fleet.md) —
/// and keeps trying, so this one takes over when that one stops or dies (its heartbeat goes stale
/// after [`SERVE_QUEUE_STALE_AFTER`]). Queue errors are logged at debug and retried each beat.
async fn hold_queue_presence(
    backend: std::sync::Arc<dyn skillforge_engine::backend::QueueBackend>,
    stop: tokio_util::sync::CancellationToken,
) {
    use skillforge_engine::job::{LockAcquire, WorkerIdentity};
    let identity = WorkerIdentity::new("serve");
    let mut token = None;
    let mut said = false;
    loop {
        // A queue that does not answer retries each call for a long while: a stop never waits
        // for it (the lock then goes stale on its own).
        enum Beat<A, R> {
            Acquire(A),
            Renew(R),
        }
        let beat = async {
            match token {
                None => Beat::Acquire(
                    backend
                        .acquire_lock(
                            SERVE_QUEUE_LOCK,
                            &identity,
                            SERVE_QUEUE_HEARTBEAT,
                            SERVE_QUEUE_STALE_AFTER,
                        )
                        .await,
                ),
                Some(t) => Beat::Renew(backend.renew_lock(SERVE_QUEUE_LOCK, t).await),
            }
        };
        let answer = tokio::select! {
            () = stop.cancelled() => break,
            answer = beat => answer,
        };
        match answer {
            Beat::Acquire(acquired) => match acquired {
                Ok(LockAcquire::Acquired { fencing_token }) => token = Some(fencing_token),
                // A holder on this host whose process is gone (killed before its lock went
                // stale) is not another serve: its lock is taken over once stale.
                Ok(LockAcquire::Held(lease)) if !said && !dead_here(&lease, &identity) => {
                    said = true;
                    let now = skillforge_engine::job::now_ms();
                    eprintln!(
                        "another serve (pid {} on host {}, running for {}, last heartbeat {} ago) is running on this queue; \
                         results are ingested by whichever applies first (see docs/fleet.md: one serve per queue \
                         unless you mean it)",
                        lease.owner_pid,
                        lease.owner_host,
                        crate::output::age(now - lease.acquired_at_ms),
                        crate::output::age(now - lease.heartbeat_at_ms)
                    );
                }
                Ok(LockAcquire::Held(_)) => {}
                Err(e) => tracing::debug!(error = %e, "serve's queue lock not taken"),
            },
            Beat::Renew(renewed) => match renewed {
                Ok(true) => {}
                Ok(false) => token = None,
                Err(e) => tracing::debug!(error = %e, "serve's queue lock not renewed"),
            },
        }
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(SERVE_QUEUE_HEARTBEAT) => {}
        }
    }
    if let Some(t) = token {
        let _ = tokio::time::timeout(
            SERVE_QUEUE_HEARTBEAT * 2,
            backend.release_lock(SERVE_QUEUE_LOCK, t),
        )
        .await;
    }
}

/// Whether `lease`'s holder ran on this host (as `me` names it) and its process no longer exists.
fn dead_here(
    lease: &skillforge_engine::job::Lease,
    me: &skillforge_engine::job::WorkerIdentity,
) -> bool {
    lease.owner_host == me.host
        && i32::try_from(lease.owner_pid).is_ok_and(|pid| {
            matches!(
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
                Err(nix::errno::Errno::ESRCH)
            )
        })
}

/// Raises the soft limit of open files to the hard one (issue 32 item 10): `serve` holds the
/// store, the queue's connections, the events endpoint's clients (capped) and the canary
/// checks' processes at once, and a soft limit of 1 024 (a common default) is reached long
/// before the hard one. A failure is logged; `serve` runs on with the limit it has.
fn raise_fd_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return;
    };
    if soft >= hard {
        return;
    }
    match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
        Ok(()) => tracing::info!(from = soft, to = hard, "raised the open-files limit"),
        Err(e) => tracing::warn!(error = %e, soft, hard, "could not raise the open-files limit"),
    }
}

/// Re-checks the queue server's settings every `SETTINGS_CHECK_EVERY` (issue 32 item 1): when
/// one turns unsafe under the running fleet (Redis `maxmemory-policy` changed to an evicting
/// one), names the store's pending work it puts at risk (the reaper logs the setting itself).
async fn watch_settings(
    backend: &dyn skillforge_engine::QueueBackend,
    store: &skillforge_store::Store,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let mut was_unsafe = false;
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(skillforge_engine::reaper::SETTINGS_CHECK_EVERY) => {}
        }
        let Ok(now) = backend.check_settings().await else {
            continue;
        };
        let is_unsafe = now.is_some();
        if let Some(problem) = now.filter(|_| !was_unsafe) {
            match skillforge_store::submitted::pending(
                store.pool(),
                skillforge_stage::lost::LOST_WORK_CHECK_LIMIT,
            )
            .await
            {
                Ok((rows, total)) if total > 0 => {
                    let ids: Vec<String> = rows
                        .iter()
                        .map(|r| format!("{} ({}/{})", r.job_id, r.workflow, r.stage))
                        .collect();
                    tracing::error!(setting = %problem.setting, value = %problem.value, pending = total,
                        "{total} job(s) the store awaits may be evicted from the queue: {}", ids.join(", "));
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "could not list the store's pending work"),
            }
        }
        was_unsafe = is_unsafe;
    }
}

/// The queue's identity in the store's `queue_epochs`: its URL without credentials.
fn queue_key(ctx: &Context) -> String {
    match &ctx.queue_url {
        skillforge_engine::open::QueueUrl::Redis(u) => skillforge_engine::redact::redact_urls(u),
        skillforge_engine::open::QueueUrl::Sqlite(p) => format!("sqlite://{}", p.display()),
    }
}

/// Compares the queue's namespace epoch with the one the store recorded when a control plane
/// last ran, and records the current one. A different epoch means the queue lost its data while
/// nothing watched it: logged as an error with the store's pending work the queue no longer has.
async fn check_epoch(
    ctx: &Context,
    backend: &dyn skillforge_engine::QueueBackend,
    store: &skillforge_store::Store,
) {
    let Some(epoch) = backend.namespace_epoch() else {
        return;
    };
    match skillforge_store::queue_epochs::check_and_record(store.pool(), &queue_key(ctx), &epoch)
        .await
    {
        Ok(None) => {}
        Ok(Some(previous)) => {
            tracing::error!(previous_epoch = %previous, current_epoch = %epoch,
                "the queue lost its data since this control plane last ran: epoch `{previous}` recorded by the store is gone \
                 (now `{epoch}`); every job enqueued before is missing. Was redis-server restarted without persistence or flushed?");
            match skillforge_stage::lost_work(backend, store).await {
                Ok(work) => tracing::error!(missing = work.missing.len(), "{work}"),
                Err(e) => {
                    tracing::error!(error = %e, "could not list the store's pending work the queue lost")
                }
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not compare the queue's epoch with the store's")
        }
    }
}

/// Records `epoch` as the queue's current one in the store (after a loss seen while running).
async fn record_epoch(ctx: &Context, store: &skillforge_store::Store, epoch: &str) {
    if let Err(e) =
        skillforge_store::queue_epochs::check_and_record(store.pool(), &queue_key(ctx), epoch).await
    {
        tracing::warn!(error = %e, "could not record the queue's new epoch in the store");
    }
}

fn webhook_secret(ctx: &Context) -> Option<Vec<u8>> {
    std::env::var(WEBHOOK_SECRET_ENV)
        .ok()
        .or_else(|| ctx.config.server.webhook_secret.clone())
        .filter(|s| !s.is_empty())
        .map(String::into_bytes)
}

/// Logs each canary's window verdict when it differs from what that canary's window said at the
/// previous check: `canary window of planner@v2: hold (3 canary outcomes < 10)`.
fn log_canary_verdicts(
    reports: &[serde_json::Value],
    said: &mut std::collections::HashMap<String, String>,
) {
    for report in reports {
        let (Some(version), Some(window)) = (report["version_id"].as_str(), report.get("window"))
        else {
            continue;
        };
        let decision = window["decision"].as_str().unwrap_or("unknown");
        let verdict = match window["reason"].as_str() {
            Some(reason) => format!("{decision} ({reason})"),
            None => decision.to_owned(),
        };
        if said.get(version) != Some(&verdict) {
            tracing::info!("canary window of {version}: {verdict}");
            said.insert(version.to_owned(), verdict);
        }
    }
}
