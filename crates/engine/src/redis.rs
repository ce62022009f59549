//! The Redis queue backend (skillforge's own, on the `redis` crate), for fleets of workers.
//!
//! Every state transition is one Lua script (see `redis/*.lua`), run atomically by Redis and
//! fenced on the job's fencing token where the [`QueueBackend`](crate::QueueBackend) contract says so. Every
//! timestamp is taken from the server clock (`TIME`) inside the script, so all workers share
//! one clock and [`RedisBackend::now_ms`](crate::backend::QueueCore::now_ms) returns that clock.
//!
//! # Key layout (all under the prefix `{namespace}:`)
//!
//! `{id}` below, in keys and in set members alike, is a job's *stored* id (`redis/id.rs`): a
//! UUID job id (every id the engine makes) as the 22-character base64 text of its 16 bytes (an
//! alphabet in ASCII order, so stored ids sort as the UUIDs do), any other id as it is. For `redis-cli HGETALL ns:job:ID`, [`id::stored`] gives a job's key id,
//! [`id::public`] the way back.
//!
//! | key | type | content |
//! |-----|------|---------|
//! | `job:{id}` | hash | the job, layout 4 (below): short fields, every value ≤ 64 bytes, none at its default |
//! | `job:{id}:{p,x,o,e}` | string | a payload, spec extra, outcome or error longer than 64 bytes (the hash field holds '@'); only when needed |
//! | `job:{id}:history` | list | one JSON [`AttemptRecord`](crate::job::AttemptRecord) per *superseded* closed attempt, at most 100 (the oldest dropped); created only when needed |
//! | `ready:{queue}` | list | due jobs, FIFO (pushed at the tail, popped from the head; a job handed back goes to the head); lazy: a cancelled job's entry stays until popped, counted in its `sr` |
//! | `delayed:{queue}` | sorted set | not yet due jobs, score = `not_before` (ms) |
//! | `queues` | set | every queue name a job was enqueued on (for `list` of queued jobs) |
//! | `wake:{queue}` | list | wake tokens for idle `lease` waiters (`BLPOP`), capped at 16 |
//! | `leases` | sorted set | running jobs, score = heartbeat deadline (`heartbeat_at + stale_after`) |
//! | `idem` | hash | idempotency key → job id (kept while the job or its tombstone is) |
//! | `done:{class}` | list | acknowledged terminal jobs of a retention class (`succeeded`; `failed` = failed, dead, cancelled) in acknowledgement order: what `prune.lua` may remove, oldest first (`crate::retention`); lazy: a retried job's entry stays until pruning reaches it, counted in its `sd` |
//! | `done:failed:stale` | string | how many entries of `done:failed` are stale (retried jobs), so a count bound counts live jobs only |
//! | `done:backfill` | string | cursor (a creation time in `jobs`) of the one-time walk that files the acknowledged jobs of a namespace written before retention into `done:*` (part of the rewrite into layout 4); `done` when finished (set at once for a new namespace) |
//! | `layout`, `layout:cursor` | strings | `4` once the namespace is in layout 4; the cursor (a creation time in `jobs`) of the rewrite of layouts 1 and 2 at connect (`redis/migrate.rs`) |
//! | `layout:step`, `layout:scan`, `layout:done` | string, string, set | while a layout-3 namespace is rewritten (`migrate4.lua`): its step, its SCAN / HSCAN cursor, the sets rewritten so far; gone once `layout` is `4` |
//! | `pruned`, `pruned:{class}` | hash, sorted set | tombstones of pruned jobs: id → `state⇥finished_at⇥pruned_at⇥idem_key`; per class by prune time |
//! | `results` | sorted set | terminal/stale jobs not yet acknowledged, score = sequence |
//! | `jobs`, `state:{state}` | sorted sets | job index by creation time: all jobs / per state, for `failed`, `dead`, `cancelled` and `stale` only. The other states are listed from the sets their jobs are in, O(page): `running` from `leases`, `queued` from `ready:*` / `delayed:*`, `succeeded` from `done:succeeded` and `results` |
//! | `lock:{name}`, `locks`, `locktoken` | hash, sorted set, string | named locks while held (deleted when released or reaped); held locks by heartbeat deadline; the lock token counter |
//! | `seq` | string | the sequence counter |
//! | `leasereq:{uuid}` | list | jobs leased by one lease request, so a retried request is idempotent; deleted by the client's next call once the reply arrived, else after 2 min |
//! | `out:{id}` | stream | the job's live output ([`crate::output`]): entries `s` (stream), `t` (fencing token), `d` (bytes); at most `OUTPUT_CAP_CHUNKS`, trimmed to `OUTPUT_TAIL_CHUNKS` when the job ends |
//! | `changed` | pub/sub channel | not a key: a message (`1`) from every script that ends a job (finish, cancel, reap, release into `cancelled`), so a waiter of another process wakes at once (`redis/changes.rs`) |
//! | `epoch` | string | the namespace epoch: a random id written once into an empty namespace (`epoch.lua`); gone or changed = the data was lost ([`QueueIntegrity::check_namespace`](crate::backend::QueueIntegrity::check_namespace)) |
//!
//! ## The job hash (layout 4)
//!
//! Redis keeps a hash as a compact listpack only while every value is at most
//! `hash-max-listpack-value` (64 bytes by default) and it has at most 512 fields; one longer
//! value turns it into a hashtable of ~60 bytes per field for good. So the fields have short
//! names and short values (times in ms since the Unix epoch, numbers as decimal text), and a
//! field at its default is not stored at all (`redis/defaults.rs`: one frozen table, rendered
//! into every script and applied by the decoder; `u` and `nb` default to `c`, `hh` to `la`, `ct`
//! to `t`). A default no-op job stores `c` and `kd` only; `c` is always stored, so its absence
//! means no such job. Scripts read job fields through `hmget` and write them through `hset`
//! (`common.lua`); only the lease and the finish write with one raw `HSET` of values known not
//! to be defaults. A lease row carries the spec fields as stored, and the client fills in their
//! defaults:
//!
//! | field | content |
//! |---|---|
//! | `q`, `w`, `g`, `kd` | queue, workflow, stage, runner kind |
//! | `p` | payload JSON ('@' = in `job:{id}:p`) |
//! | `x` | the other spec fields that differ from their defaults, JSON (`redis/spec.rs`); absent for most jobs ('@' = in `job:{id}:x`) |
//! | `k` | idempotency key (absent = none) |
//! | `m`, `to`, `hb`, `sa`, `i` | max attempts, timeout ms, heartbeat ms, stale after ms, idempotent (0/1) |
//! | `s`, `a`, `t` | state, attempts, fencing token (0 before the first lease) |
//! | `sr`, `sd` | stale entries of the job in its ready list / in `done:failed` (lazy removal, see the key table) |
//! | `c`, `u`, `nb` | created, updated, not before |
//! | `cr`, `ra` | cancel requested, recovery available ('1' = set; absent or '0' = not) |
//! | `ow`, `oh`, `op`, `la`, `hh` | the last attempt's lease: worker, host, pid, acquired at, heartbeat at |
//! | `ct`, `cb` | which call (`finish`, `reap`, `release`) closed which token, so a retried call after a lost reply is recognized |
//! | `o` | outcome JSON ('' = none, '@' = in `job:{id}:o`) |
//! | `e` | error: '' = none, else '=' + text ('@' = in `job:{id}:e`) |
//! | `r` | the result label of a terminally finished last attempt ('' = none) |
//!
//! The lease fields are those of the *last* attempt and stay after it ends (whether they
//! describe a live lease is decided by `s` = `running`, never by their presence). A terminal
//! finish keeps the attempt's closed record in the hash: `r` = its result label, the record
//! being `a`, `t`, the lease fields and `u` as its end (nothing writes a terminal job's hash
//! again until `retry.lua`). The record is pushed to the history list only when the attempt is
//! superseded: at a non-terminal finish (retry, with its `retry_delay_ms`), a reap or a
//! release, or when `retry.lua` requeues a terminal job (it moves the hash's record to the list
//! and sets `r` to ''). The decoded history is the list plus that record (plus the open attempt
//! of a running job, from its lease fields). Fields that may be longer than 64 bytes in practice
//! (queue, idempotency key, worker, host) are kept in the hash: a long one costs memory, never
//! correctness.
//!
//! **Older layouts.** Layout 3 (the build before this one) stored every field, kept `n`, the
//! enqueue sequence, keyed jobs by their 36-character UUID text and had ready and done sorted
//! sets; its hashes read the same in layout 4, and its keys, set members and hash entries are
//! renamed to stored ids and its sets turned into lists when a backend connects
//! (`migrate4.lua`, resumable: cursors `layout:step`, `layout:scan`). Layouts 1 and 2
//! (one `spec` JSON field, long field names; layout 1 also pushed every closed attempt to the
//! list and deleted the lease fields) are first rewritten into layout 3 (`redis/migrate.rs`).
//! An older build cannot read layout 4: stop its processes before upgrading, and do not roll
//! back against a rewritten namespace.
//!
//! Every operation touches O(1) keys per job (O(log n) sorted-set updates), whatever the
//! backlog: a lease promotes at most [`PROMOTE_LIMIT`] due delayed jobs and pops at most
//! [`MAX_LEASE_BATCH`] ready ones (plus at most 1 000 stale entries it skips); a cancel or a
//! retry never searches a list (the entry it leaves is skipped later, O(1)). Keys are computed inside the scripts, so this backend needs
//! a standalone Redis (or a single-shard deployment), not Redis Cluster.
//!
//! # Connections and failures
//!
//! Ordinary calls share one multiplexed [`ConnectionManager`] (which reconnects after a
//! Redis restart) with a [`RESPONSE_TIMEOUT`] response timeout. A call that fails with a
//! connection-level error (I/O, refused, dropped, timeout, `LOADING`) is retried for up to
//! [`RETRY_BUDGET`]; the scripts are written so that a retry after a lost reply is harmless
//! (enqueue is keyed by the client-made job id, a lease request by a client-made request id,
//! finish/release/reap remember the token they closed). Blocking waits (`BLPOP` on the wake
//! list) run on separate pooled connections, so a waiting worker never stalls other calls; a
//! change waiter's subscription to `changed` has its own connection, held only while some
//! `changed_since` call of this process waits (and a short linger after it, `redis/changes.rs`).

mod batch;
mod changes;
mod decode;
mod defaults;
pub mod id;
mod outcome_json;
mod routes;
mod scripts;
mod spec;
pub mod transfer;

use std::sync::Mutex;
use std::time::Duration;

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use ::redis::{AsyncConnectionConfig, Client, ErrorKind, RedisError, ServerErrorKind};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::backend::ReapAction;
use crate::error::EngineError;
use crate::job::{Finish, Job, JobState, LeasedJob, WorkerIdentity};
use decode::RawJob;
use scripts::Scripts;

/// Response timeout of ordinary (non-blocking) calls. Generous on purpose: redis-rs's default
/// (500 ms) can end long scripts or a busy server's replies silently.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);
/// Timeout for establishing a connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a call keeps retrying connection-level failures (e.g. a Redis restart) before it
/// returns [`EngineError::Backend`].
pub const RETRY_BUDGET: Duration = Duration::from_secs(30);
/// At most this many due delayed jobs are promoted to the ready set per lease call.
pub const PROMOTE_LIMIT: usize = 1000;
/// A single lease call takes at most this many jobs (larger `max` values are clamped).
pub const MAX_LEASE_BATCH: usize = 1000;
/// Extra response-timeout slack of a blocking `BLPOP` beyond its own block time.
const BLOCK_SLACK: Duration = Duration::from_secs(5);
/// Idle blocking connections kept for reuse.
const BLOCKING_POOL: usize = 8;
/// The states with an index set `state:{state}` (must match `INDEXED` in `common.lua`); the
/// others are listed from the sets their jobs are in: `queued` from `ready:*` / `delayed:*`,
/// `succeeded` from `done:succeeded` and `results`, `running` from `leases`.
const STATE_INDEXED: [JobState; 4] = [
    JobState::Failed,
    JobState::Dead,
    JobState::Cancelled,
    JobState::Stale,
];
/// Most pending results `list(Some(Succeeded), limit)` looks at (`pick.lua`), or 4 × `limit`.
const LIST_WALK_BUDGET: usize = 5000;
/// Batch size of `reap_locks` and the page size of internal scans.
const SCAN_BATCH: usize = 1000;

/// The Redis [`QueueBackend`](crate::QueueBackend).
///
/// Cheap to share behind an `Arc`; every method takes `&self`. Create it with
/// [`RedisBackend::connect`].
pub struct RedisBackend {
    client: Client,
    conn: ConnectionManager,
    /// Key prefix, `{namespace}:`.
    prefix: String,
    scripts: Scripts,
    /// Idle dedicated connections for blocking `BLPOP`s.
    blocking: Mutex<Vec<MultiplexedConnection>>,
    /// Blocking waits that failed in a row (see [`BLOCKING_RETRY_MAX`]).
    blocking_failures: std::sync::atomic::AtomicU32,
    /// Queue of the group-commit finish task (`redis/batch.rs`).
    finisher: tokio::sync::mpsc::UnboundedSender<batch::Item>,
    /// Lease requests whose replies arrived, shared with the finish task (`redis/batch.rs`).
    answered: std::sync::Arc<batch::Answered>,
    /// The namespace epoch this backend last saw (set at connect).
    epoch: Mutex<String>,
    /// The namespace's transfer area (`redis/transfer.rs`).
    transfer: transfer::RedisTransfer,
    /// The change signal of `changed_since`, moved by the `changed` listener (`redis/changes.rs`).
    changes: std::sync::Arc<crate::changes::ChangeSignal>,
    /// Stops the listener when the backend is dropped.
    _listener: tokio_util::sync::DropGuard,
}

impl std::fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBackend")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// `redis://user:secret@host` → `redis://***@host`, for error messages.
fn redact(url: &str) -> String {
    crate::redact::redact_urls(url)
}

/// `e` as text, with what to do when the server refused a new client at its `maxclients`
/// limit (its own words, `max number of clients reached`, do not name the setting).
fn explain(e: &RedisError) -> String {
    explain_text(&e.to_string())
}

/// What a plain-TCP Redis at `addr` says on its own right after accepting a connection (a
/// server at `maxclients` writes `-ERR max number of clients reached` and closes), read for at
/// most 500 ms; `None` when it says nothing or cannot be reached.
async fn first_words(addr: &(String, u16)) -> Option<String> {
    use tokio::io::AsyncReadExt as _;
    let wait = Duration::from_millis(500);
    let mut stream = tokio::time::timeout(
        wait,
        tokio::net::TcpStream::connect((addr.0.as_str(), addr.1)),
    )
    .await
    .ok()?
    .ok()?;
    let mut buf = [0u8; 256];
    let n = tokio::time::timeout(wait, stream.read(&mut buf))
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&buf[..n])
        .trim()
        .trim_start_matches('-')
        .to_owned();
    (!text.is_empty()).then_some(text)
}

/// [`explain`] of an error's text.
fn explain_text(text: &str) -> String {
    let text = text.to_owned();
    if text.contains("max number of clients reached") {
        format!(
            "{text} (the server's `maxclients` limit is reached: raise `maxclients` in redis.conf or with \
             `CONFIG SET maxclients N`, or run fewer workers; each worker holds a few connections)"
        )
    } else {
        text
    }
}

/// Longest pause between two tries of a blocking connection that keeps failing (an idle
/// worker's wait for work when the server refuses clients): it doubles from 200 ms per failure
/// in a row, so idle workers back off instead of reconnecting several times a second.
const BLOCKING_RETRY_MAX: Duration = Duration::from_secs(5);

/// Whether a failed call may succeed if tried again on a (re)connected connection, or once the
/// server recovers: `OOM` (at `maxmemory` under `noeviction`: writes are refused until memory is
/// freed) and `BUSY` (a script runs too long) pass like `LOADING` does.
fn transient(e: &RedisError) -> bool {
    matches!(e.code(), Some("OOM" | "BUSY"))
        || e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || e.is_unrecoverable_error()
        || matches!(
            e.kind(),
            ErrorKind::Server(
                ServerErrorKind::BusyLoading
                    | ServerErrorKind::TryAgain
                    | ServerErrorKind::MasterDown
            )
        )
}

/// Runs `$body` (an expression using the connection `$conn`, yielding a future of a
/// `RedisResult`) with retries of transient failures for up to [`RETRY_BUDGET`]; maps the final
/// error to [`EngineError::Backend`] prefixed with `$what`.
macro_rules! with_retry {
    ($self:expr, $what:expr, |$conn:ident| $body:expr) => {{
        let started = Instant::now();
        let mut pause = Duration::from_millis(50);
        loop {
            let mut $conn = $self.conn.clone();
            match $body.await {
                Ok(v) => break Ok(v),
                Err(e) if transient(&e) && started.elapsed() < RETRY_BUDGET => {
                    tracing::debug!(error = %e, "redis {} failed, retrying", $what);
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
                Err(e) if transient(&e) => break Err(EngineError::redis_unavailable(format!("{}: {}", $what, crate::redis::explain(&e)))),
                Err(e) => break Err(EngineError::redis(format!("{}: {}", $what, crate::redis::explain(&e)))),
            }
        }
    }};
}

// After `with_retry!`, which they use.
mod broken;
mod migrate;
mod output;
mod queue;
mod retention;
mod settings;

/// Stable lowercase wire name of a reap action.
fn reap_action_name(action: &ReapAction) -> (&'static str, u64) {
    match action {
        ReapAction::Requeue { delay } => ("requeue", delay.as_millis() as u64),
        ReapAction::RecoveryAvailable => ("recovery", 0),
        ReapAction::Dead => ("dead", 0),
        ReapAction::Cancelled => ("cancelled", 0),
    }
}

fn parse_state(job_id: &str, raw: &str) -> Result<JobState, EngineError> {
    raw.parse().map_err(|e: String| EngineError::Corrupt {
        job_id: job_id.to_owned(),
        message: e,
    })
}

fn unexpected(what: &str, reply: &[String]) -> EngineError {
    EngineError::redis(format!(
        "unexpected reply from the {what} script: {reply:?}"
    ))
}

impl RedisBackend {
    /// Connects to `url` (`redis://HOST:PORT[/DB]`, optionally with `user:password@`) and uses
    /// keys prefixed `{namespace}:`.
    ///
    /// Errors: [`EngineError::Config`] for an unparsable URL or an empty namespace;
    /// [`EngineError::Backend`] when the server cannot be reached within the connection
    /// manager's retries.
    pub async fn connect(url: &str, namespace: &str) -> Result<Self, EngineError> {
        Self::connect_with_password(url, namespace, None).await
    }

    /// [`RedisBackend::connect`] with the password (of the URL's user, else the `default` user)
    /// given apart from the URL, e.g. read from `SKILLFORGE_QUEUE_PASSWORD` or a file, so it
    /// never shows in a command line or a config file's URL.
    ///
    /// Errors: as [`RedisBackend::connect`]; [`EngineError::Config`] when the URL carries a
    /// password too (one source, so which one is in use is never a guess).
    pub async fn connect_with_password(
        url: &str,
        namespace: &str,
        password: Option<&str>,
    ) -> Result<Self, EngineError> {
        use ::redis::IntoConnectionInfo as _;
        if namespace.is_empty() {
            return Err(EngineError::Config(
                "redis namespace must not be empty".to_owned(),
            ));
        }
        let mut info = url
            .into_connection_info()
            .map_err(|e| EngineError::Config(format!("redis url `{}`: {e}", redact(url))))?;
        if let Some(password) = password {
            if info.redis_settings().password().is_some() {
                return Err(EngineError::Config(format!(
                    "redis url `{}` carries a password and one is given apart from it too \
                     (SKILLFORGE_QUEUE_PASSWORD or [queue] password_file): give it once, apart from the URL",
                    redact(url)
                )));
            }
            let settings = info.redis_settings().clone().set_password(password);
            info = info.set_redis_settings(settings);
        }
        let plain_addr = match info.addr() {
            ::redis::ConnectionAddr::Tcp(host, port) => Some((host.clone(), *port)),
            _ => None,
        };
        let client = Client::open(info)
            .map_err(|e| EngineError::Config(format!("redis url `{}`: {e}", redact(url))))?;
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_max_delay(Duration::from_secs(2))
            .set_number_of_retries(6);
        let conn = match client.get_connection_manager_with_config(config).await {
            Ok(conn) => conn,
            Err(e) => {
                // A server at `maxclients` says so and closes at once: the client sees only a
                // reset connection. Ask it once more, reading what it says first.
                let refusal = match &plain_addr {
                    Some(addr) if e.is_io_error() || e.is_connection_dropped() => {
                        first_words(addr).await
                    }
                    _ => None,
                };
                let said = refusal
                    .map(|r| format!(" (the server said: {})", explain_text(&r)))
                    .unwrap_or_default();
                let message = format!("connect to `{}`: {}{said}", redact(url), explain(&e));
                // No answer (refused, reset, timed out) may pass: a restart, a pause. A server
                // that answers and refuses (a wrong password, a bad database) does not.
                return Err(
                    if e.is_io_error()
                        || e.is_timeout()
                        || e.is_connection_refusal()
                        || e.is_connection_dropped()
                    {
                        EngineError::redis_unavailable(message)
                    } else {
                        EngineError::redis(message)
                    },
                );
            }
        };
        let prefix = format!("{namespace}:");
        let scripts = Scripts::new();
        let answered = std::sync::Arc::new(batch::Answered::default());
        let finisher = batch::spawn(
            conn.clone(),
            prefix.clone(),
            scripts.finish_batch.clone(),
            answered.clone(),
        );
        let changes = std::sync::Arc::new(crate::changes::ChangeSignal::default());
        let listener = CancellationToken::new();
        changes::spawn_listener(
            client.clone(),
            changes::channel(&prefix),
            changes.clone(),
            listener.clone(),
        );
        let backend = Self {
            client,
            conn: conn.clone(),
            prefix: prefix.clone(),
            scripts,
            blocking: Mutex::new(Vec::new()),
            blocking_failures: std::sync::atomic::AtomicU32::new(0),
            finisher,
            answered,
            epoch: Mutex::new(String::new()),
            transfer: transfer::RedisTransfer::new(
                conn.clone(),
                prefix.clone(),
                crate::transfer::TransferLimits::default(),
            ),
            changes,
            _listener: listener.drop_guard(),
        };
        let (epoch, _, _) = backend.read_epoch().await?;
        *backend
            .epoch
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = epoch;
        let rewritten = backend.migrate_layout().await?;
        if rewritten > 0 {
            tracing::info!(
                jobs = rewritten,
                namespace,
                "rewrote the namespace's layout-1/2 job hashes"
            );
        }
        backend.seed_metrics().await?;
        Ok(backend)
    }

    /// Counts the depth of a namespace written before the `/metrics` counters existed, once
    /// (`metrics_seed.lua`; a no-op on every later open).
    async fn seed_metrics(&self) -> Result<(), EngineError> {
        let mut inv = self.scripts.metrics_seed.prepare_invoke();
        inv.arg(&self.prefix);
        let counted: u64 = with_retry!(self, "seed the queue's metrics", |c| inv
            .invoke_async(&mut c))?;
        if counted > 0 {
            tracing::info!(
                jobs = counted,
                "counted the namespace's jobs by state for /metrics"
            );
        }
        Ok(())
    }

    /// The namespace's epoch (created when missing), whether this call created it, and the
    /// number of jobs in the namespace.
    async fn read_epoch(&self) -> Result<(String, bool, u64), EngineError> {
        let mut inv = self.scripts.epoch.prepare_invoke();
        inv.arg(&self.prefix).arg(uuid::Uuid::now_v7().to_string());
        let (epoch, created, jobs): (String, i64, u64) =
            with_retry!(self, "read the namespace epoch", |c| inv
                .invoke_async(&mut c))?;
        Ok((epoch, created == 1, jobs))
    }

    /// This backend with the transfer area's limits set (`[queue] transfer_*` keys).
    #[must_use]
    pub fn with_transfer_limits(mut self, limits: crate::transfer::TransferLimits) -> Self {
        self.transfer =
            transfer::RedisTransfer::new(self.conn.clone(), self.prefix.clone(), limits);
        self
    }

    /// The key prefix in use, `{namespace}:`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// A dedicated connection for one blocking command (from the pool or new).
    async fn blocking_conn(&self) -> Result<MultiplexedConnection, RedisError> {
        let pooled = self.blocking.lock().map(|mut p| p.pop()).unwrap_or(None);
        if let Some(c) = pooled {
            return Ok(c);
        }
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT));
        self.client
            .get_multiplexed_async_connection_with_config(&config)
            .await
    }

    /// Counts a failed blocking wait; returns the pause before the next try (200 ms doubling per
    /// failure in a row, at most [`BLOCKING_RETRY_MAX`]).
    fn blocking_failed(&self) -> Duration {
        let n = self
            .blocking_failures
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .min(16);
        if n == 4 {
            tracing::warn!(
                "redis keeps refusing this process's blocking connections; backing off up to 5 s between tries"
            );
        }
        Duration::from_millis(200)
            .saturating_mul(1 << n)
            .min(BLOCKING_RETRY_MAX)
    }

    fn return_blocking_conn(&self, c: MultiplexedConnection) {
        if let Ok(mut pool) = self.blocking.lock()
            && pool.len() < BLOCKING_POOL
        {
            pool.push(c);
        }
    }

    /// `lease`, whose wait for work (never a lease in progress) ends, empty, when `stop` fires.
    async fn lease_waiting(
        &self,
        queue: &str,
        worker: &WorkerIdentity,
        max: usize,
        wait: Duration,
        stop: Option<&CancellationToken>,
    ) -> Result<Vec<LeasedJob>, EngineError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let deadline = Instant::now() + wait;
        loop {
            let (jobs, next_due, server_now) = self.lease_once(queue, worker, max).await?;
            if !jobs.is_empty() {
                return Ok(jobs);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(jobs);
            }
            let mut block = deadline - now;
            if let Some(due) = next_due {
                let until_due = Duration::from_millis(due.saturating_sub(server_now).max(0) as u64);
                block = block.min(until_due);
            }
            if !block.is_zero() {
                // Cut short by `stop`, a BLPOP in flight is dropped with its connection (a wake
                // token it had already popped is lost: another idle waiter then re-checks at the
                // end of its own block instead of at once).
                tokio::select! {
                    _ = self.wait_for_wake(queue, block) => {}
                    () = crate::backend::until_stopped(stop) => return Ok(Vec::new()),
                }
            }
        }
    }

    /// Blocks up to `block` on the queue's wake list. Returns whether a wake token arrived;
    /// connection failures are logged and reported as "no token" after a short pause, so the
    /// caller simply tries to lease again.
    async fn wait_for_wake(&self, queue: &str, block: Duration) -> bool {
        let key = format!("{}wake:{queue}", self.prefix);
        let mut conn = match self.blocking_conn().await {
            Ok(c) => c,
            Err(e) => {
                let pause = self.blocking_failed();
                tracing::debug!(error = %explain(&e), retry_in_ms = pause.as_millis() as u64, "redis blocking connection for queue `{queue}` failed");
                tokio::time::sleep(pause).await;
                return false;
            }
        };
        conn.set_response_timeout(block + BLOCK_SLACK);
        // BLPOP's timeout is in (fractional) seconds; 0 would block forever.
        let secs = block.as_secs_f64().max(0.001);
        let reply: Result<Option<(String, String)>, RedisError> = ::redis::cmd("BLPOP")
            .arg(&key)
            .arg(format!("{secs:.3}"))
            .query_async(&mut conn)
            .await;
        match reply {
            Ok(token) => {
                self.blocking_failures
                    .store(0, std::sync::atomic::Ordering::Relaxed);
                conn.set_response_timeout(RESPONSE_TIMEOUT);
                self.return_blocking_conn(conn);
                token.is_some()
            }
            Err(e) => {
                let pause = self.blocking_failed();
                tracing::debug!(error = %explain(&e), retry_in_ms = pause.as_millis() as u64, "redis wait on queue `{queue}` failed");
                tokio::time::sleep(pause).await;
                false
            }
        }
    }

    /// One run of the lease script: the leased jobs, the earliest delayed due time (ms, `None`
    /// when no delayed job) and the server time.
    async fn lease_once(
        &self,
        queue: &str,
        worker: &WorkerIdentity,
        max: usize,
    ) -> Result<(Vec<LeasedJob>, Option<i64>, i64), EngineError> {
        let request_id = uuid::Uuid::new_v4().to_string();
        let mut inv = self.scripts.lease.prepare_invoke();
        inv.arg(&self.prefix)
            .arg(queue)
            .arg(max.clamp(1, MAX_LEASE_BATCH))
            .arg(&worker.worker_id)
            .arg(&worker.host)
            .arg(worker.pid)
            .arg(&request_id)
            .arg(PROMOTE_LIMIT);
        batch::forget_args(&mut inv, &self.answered.take());
        let what = format!("lease from queue `{queue}`");
        let (rows, next_due, now): (Vec<Vec<Option<String>>>, i64, i64) =
            with_retry!(self, what, |c| inv.invoke_async(&mut c))?;
        if !rows.is_empty() {
            self.answered.push(request_id);
        }
        let mut jobs = Vec::with_capacity(rows.len());
        for row in rows {
            match decode::leased(row, worker, now) {
                Ok((_, job)) => jobs.push(job),
                // One unreadable record must not cost the others of the call their lease
                // (issue 32 item 2): it stays leased to nobody who runs it, the reaper frees it
                // after `stale_after` until its attempts are spent, and ingestion quarantines
                // its result.
                Err(e) => tracing::error!(error = %e,
                    "a leased job's record cannot be read: not run; the reaper frees it and ingestion quarantines it once it is dead"),
            }
        }
        Ok((jobs, (next_due >= 0).then_some(next_due), now))
    }

    /// Fetches jobs by stored id (`redis/id.rs`: as the sets hold them) in one pipeline,
    /// skipping ids that no longer exist; each job carries its public id.
    async fn fetch_jobs(&self, ids: &[String]) -> Result<Vec<Job>, EngineError> {
        let fetched = self.fetch_jobs_lenient(ids).await?;
        match fetched.unreadable.into_iter().next() {
            Some(bad) => Err(EngineError::Corrupt {
                job_id: bad.job_id,
                message: bad.reason,
            }),
            None => Ok(fetched.jobs),
        }
    }

    /// Reads the jobs `ids` (stored ids) in one round trip, keeping apart those whose record
    /// cannot be decoded (with the reason) and the ids with no record at all.
    async fn fetch_jobs_lenient(&self, ids: &[String]) -> Result<broken::Fetched, EngineError> {
        let mut fetched = broken::Fetched::default();
        if ids.is_empty() {
            return Ok(fetched);
        }
        let mut pipe = ::redis::pipe();
        for id in ids {
            let key = format!("{}job:{id}", self.prefix);
            pipe.cmd("HGETALL").arg(&key);
            pipe.cmd("LRANGE")
                .arg(format!("{key}:history"))
                .arg(0)
                .arg(-1);
            let mget = pipe.cmd("MGET");
            for field in decode::SPILLED {
                mget.arg(format!("{key}:{field}"));
            }
        }
        let flat: Vec<::redis::Value> =
            with_retry!(self, "read jobs", |c| pipe.query_async(&mut c))?;
        let mut it = flat.into_iter();
        let mut asked = ids.iter();
        while let (Some(h), Some(hist), Some(side), Some(id)) =
            (it.next(), it.next(), it.next(), asked.next())
        {
            let public = id::public(id);
            let raw: Result<RawJob, String> = (|| {
                Ok((
                    ::redis::from_redis_value(h).map_err(|e| format!("job hash: {e}"))?,
                    ::redis::from_redis_value(hist).map_err(|e| format!("job history: {e}"))?,
                    ::redis::from_redis_value(side).map_err(|e| format!("job long values: {e}"))?,
                ))
            })();
            let decoded = raw
                .map_err(|reason| EngineError::Corrupt {
                    job_id: public.clone(),
                    message: reason,
                })
                .and_then(|raw| decode::job(&public, raw));
            match decoded {
                Ok(Some(job)) => fetched.jobs.push(job),
                Ok(None) => fetched.missing.push(id.clone()),
                Err(EngineError::Corrupt { message, .. }) => {
                    fetched.unreadable.push(crate::backend::UnreadableRecord {
                        job_id: public,
                        reason: message,
                        quarantined_at_ms: None,
                    });
                }
                Err(e) => fetched.unreadable.push(crate::backend::UnreadableRecord {
                    job_id: public,
                    reason: e.to_string(),
                    quarantined_at_ms: None,
                }),
            }
        }
        Ok(fetched)
    }

    /// Validates and encodes a finish and hands it to the group-commit task.
    async fn send_finish(
        &self,
        job_id: &str,
        fencing_token: u64,
        finish: &Finish,
        lease: Option<(String, WorkerIdentity)>,
    ) -> batch::Reply {
        if matches!(finish.next, JobState::Running | JobState::Stale) {
            return Err(EngineError::InvalidState {
                job_id: job_id.to_owned(),
                state: JobState::Running,
                message: format!(
                    "a finished attempt cannot move the job to `{}`",
                    finish.next
                ),
            });
        }
        let outcome = match &finish.outcome {
            Some(o) => outcome_json::encode(job_id, o)?,
            None => String::new(),
        };
        let (reply, answer) = tokio::sync::oneshot::channel();
        let item = batch::Item {
            job_id: job_id.to_owned(),
            token: fencing_token,
            next: finish.next.as_str(),
            delay_ms: finish.retry_delay_ms,
            result: finish.attempt_result.clone(),
            outcome,
            error: finish.error.clone(),
            lease,
            reply,
        };
        let stopped =
            || EngineError::redis(format!("finish of job `{job_id}`: the finish task stopped"));
        self.finisher.send(item).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// Candidate ids for listing the newest `limit` jobs of any state: the newest `limit` of
    /// each set a job is in by its state (`ready:*`, `delayed:*`, `leases`, `results`,
    /// `done:*`, `state:stale`, and the `jobs` index of jobs an older build wrote), one pipeline,
    /// O(limit) per set. The caller sorts them by creation time.
    async fn ids_in_any_state(&self, limit: usize) -> Result<Vec<String>, EngineError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut cmd = ::redis::cmd("SMEMBERS");
        cmd.arg(format!("{}queues", self.prefix));
        let queues: Vec<String> =
            with_retry!(self, "read the queue names", |c| cmd.query_async(&mut c))?;
        let mut keys: Vec<(String, bool)> = [
            ("leases", false),
            ("results", false),
            ("done:succeeded", true),
            ("done:failed", true),
            ("state:stale", false),
            ("jobs", false),
        ]
        .iter()
        .map(|(k, list)| (format!("{}{k}", self.prefix), *list))
        .collect();
        for q in &queues {
            keys.push((format!("{}ready:{q}", self.prefix), true));
            keys.push((format!("{}delayed:{q}", self.prefix), false));
        }
        let mut pipe = ::redis::pipe();
        for (k, list) in &keys {
            newest(&mut pipe, k, *list, limit);
        }
        let lists: Vec<Vec<String>> = with_retry!(self, "list jobs", |c| pipe.query_async(&mut c))?;
        Ok(lists.into_iter().flatten().collect())
    }

    /// Candidate ids for listing up to `limit` jobs in `state` (`queued` or `succeeded`, the
    /// states without a `state:*` set), read from the sets those jobs are in, O(limit) per set:
    /// queued jobs from the newest `limit` of every queue's `ready:*` and `delayed:*` sets;
    /// succeeded ones from the newest `limit` of `done:succeeded` (acknowledged) and the
    /// succeeded among the newest [`LIST_WALK_BUDGET`] (or 4 × `limit`) pending results. The
    /// caller keeps the
    /// jobs really in `state`, newest first.
    async fn ids_in_unindexed_state(
        &self,
        state: JobState,
        limit: usize,
    ) -> Result<Vec<String>, EngineError> {
        let mut ids = Vec::new();
        if limit == 0 {
            return Ok(ids);
        }
        match state {
            JobState::Queued => {
                let mut cmd = ::redis::cmd("SMEMBERS");
                cmd.arg(format!("{}queues", self.prefix));
                let queues: Vec<String> =
                    with_retry!(self, "read the queue names", |c| cmd.query_async(&mut c))?;
                // No queue yet: nothing queued (an empty pipeline is refused by the client).
                if queues.is_empty() {
                    return Ok(ids);
                }
                let mut pipe = ::redis::pipe();
                for q in &queues {
                    newest(&mut pipe, &format!("{}ready:{q}", self.prefix), true, limit);
                    newest(
                        &mut pipe,
                        &format!("{}delayed:{q}", self.prefix),
                        false,
                        limit,
                    );
                }
                let lists: Vec<Vec<String>> =
                    with_retry!(self, "list queued jobs", |c| pipe.query_async(&mut c))?;
                ids.extend(lists.into_iter().flatten());
            }
            JobState::Succeeded => {
                let mut pipe = ::redis::pipe();
                newest(
                    &mut pipe,
                    &format!("{}done:succeeded", self.prefix),
                    true,
                    limit,
                );
                let (acked,): (Vec<String>,) =
                    with_retry!(self, "list succeeded jobs", |c| pipe.query_async(&mut c))?;
                ids.extend(acked);
                let mut inv = self.scripts.pick.prepare_invoke();
                inv.arg(&self.prefix)
                    .arg("results")
                    .arg(state.as_str())
                    .arg(limit)
                    .arg(LIST_WALK_BUDGET.max(limit.saturating_mul(4)));
                let pending: Vec<String> =
                    with_retry!(self, "list succeeded jobs with a pending result", |c| inv
                        .invoke_async(&mut c))?;
                ids.extend(pending);
            }
            _ => {}
        }
        Ok(ids)
    }
}

/// Adds to `pipe` the read of the newest `limit` members of `key`: a list's last (`list`: ready
/// and done lists, newest at the tail) or a sorted set's highest-scored, newest first either way.
fn newest(pipe: &mut ::redis::Pipeline, key: &str, list: bool, limit: usize) {
    let n = limit.clamp(1, isize::MAX as usize) as isize;
    if list {
        // LRANGE has no reverse form: the caller sorts by creation time anyway.
        pipe.cmd("LRANGE").arg(key).arg(-n).arg(-1);
    } else {
        pipe.cmd("ZREVRANGE").arg(key).arg(0).arg(n - 1);
    }
}

impl RedisBackend {
    async fn zrange(&self, key: &str, rev: bool, limit: usize) -> Result<Vec<String>, EngineError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let stop = limit.min(isize::MAX as usize) as isize - 1;
        let cmd_name = if rev { "ZREVRANGE" } else { "ZRANGE" };
        let mut cmd = ::redis::cmd(cmd_name);
        cmd.arg(key).arg(0).arg(stop);
        let what = format!("read index `{key}`");
        with_retry!(self, what, |c| cmd.query_async(&mut c))
    }
}
