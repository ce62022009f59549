//! `skillforge jobs submit|list|show|logs|cancel|retry|purge|prune`: durable ad-hoc jobs through the `process` runner.

mod files;
mod logs;
mod prune;

pub(crate) use prune::pruned_line;

use std::collections::BTreeMap;

use anyhow::anyhow;
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use skillforge_engine::{CancelReply, EngineError, Job, JobSpec, JobState};
use skillforge_runner::RunnerPayload;
use skillforge_runner_container::{Command, ContainerPayload};
use skillforge_runner_process::ProcessPayload;

use crate::context::Context;
use crate::control::args::{check_name, secs};
use crate::control::waiter::{await_job, submit_checked};
use crate::exit::{CHECK_FAILED, CliError, CliResult, OK};
use crate::output::{age, print_json, rfc3339_ms};

/// `skillforge jobs ...`.
#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// Run a command through the `process` runner as a durable job.
    Submit(SubmitArgs),
    /// List jobs, newest first.
    List(ListArgs),
    /// Show one job: attempts, lease, outcome, output tails.
    Show {
        /// Job id, or a unique prefix of it (at least 8 characters).
        id: String,
    },
    /// Print a job's output as its runner writes it (`--follow`: until the job ends).
    Logs(logs::LogsArgs),
    /// Cancel a job (a running one is killed within one heartbeat).
    Cancel {
        /// Job id, or a unique prefix of it (at least 8 characters).
        id: String,
    },
    /// Re-queue a failed, dead, cancelled or stale job with a fresh attempt budget.
    Retry {
        /// Job id, or a unique prefix of it (at least 8 characters).
        id: String,
        /// Set an environment variable of the command for the new attempts, replacing its
        /// value (`NAME=VALUE`, repeatable); e.g. a token the first attempts lacked.
        #[arg(long = "env", value_name = "NAME=VALUE")]
        env: Vec<String>,
    },
    /// Delete one quarantined job record (listed by `jobs list --state broken`): a record
    /// that cannot be read, with everything of its job. A readable job is never purged.
    Purge {
        /// Job id.
        id: String,
    },
    /// Enqueue again, from the specs the store recorded, the pending work a queue lost (its
    /// data gone: a restart without persistence, a flush): each job gets its idempotency key
    /// back, so the workflow step waiting for it finds it.
    ResubmitLost,
    /// Remove finished jobs past their retention (`[queue] keep_succeeded` / `keep_failed`, or
    /// `--older-than`); a job whose result is not applied yet is never removed.
    Prune(prune::PruneArgs),
}

/// Arguments of `jobs submit`.
#[derive(Debug, Args)]
pub struct SubmitArgs {
    /// Wall-clock budget per attempt, seconds.
    #[arg(long, value_name = "SECS", default_value_t = 3600.0)]
    timeout: f64,
    /// Heartbeat period, seconds.
    #[arg(long, value_name = "SECS", default_value_t = 2.0)]
    heartbeat: f64,
    /// A lease with no heartbeat for this long is stale, seconds.
    #[arg(long = "stale-after", value_name = "SECS", default_value_t = 15.0)]
    stale_after: f64,
    /// Attempts allowed, the first included.
    #[arg(long, default_value_t = 3)]
    attempts: u32,
    /// A second submit with the same key returns the first job instead of a new one.
    #[arg(long = "idempotency-key")]
    idempotency_key: Option<String>,
    /// Queue name.
    #[arg(long = "queue-name", default_value = skillforge_engine::DEFAULT_QUEUE)]
    queue_name: String,
    /// The command is not safe to re-run after its worker died: park it as `stale` instead.
    #[arg(long = "non-idempotent")]
    non_idempotent: bool,
    /// A named resource lock the job holds while it runs (repeatable); jobs sharing a lock never overlap.
    #[arg(long = "lock", value_name = "NAME")]
    locks: Vec<String>,
    /// A label the worker must advertise (`KEY=VALUE` or `KEY`, repeatable; `skillforge worker
    /// --label`): the job waits, saying so, until such a worker is live.
    #[arg(long = "require", value_name = "LABEL")]
    requires: Vec<String>,
    /// Environment for the command, `NAME=VALUE` (repeatable); how secrets reach it, never argv.
    #[arg(long = "env", value_name = "NAME=VALUE")]
    env: Vec<String>,
    /// A secret environment variable for the command (repeatable): its value is taken from this
    /// command's own environment, so it is on no command line, and it is shown as `***` by
    /// `jobs show` and `jobs list` (`--json` too) and in every log line.
    #[arg(long = "secret-env", value_name = "NAME")]
    secret_env: Vec<String>,
    /// The command's working directory. Default: the current directory on the embedded queue;
    /// on a Redis fleet (whose workers may be other machines) the worker's job dir, an empty dir
    /// of the attempt's scratch dir — there `--cwd` names a directory on the worker (absolute).
    #[arg(long, value_name = "DIR")]
    cwd: Option<std::path::PathBuf>,
    /// A file the command needs (repeatable): sent by content through the queue's transfer area
    /// (capped by `[queue] transfer_max_mb`, kept `[queue] transfer_ttl_secs` on Redis) and placed
    /// in the job dir under its file name; the command then runs in the job dir.
    #[arg(long = "file", value_name = "PATH")]
    files: Vec<std::path::PathBuf>,
    /// Run the command in a container from this image (the `container` runner, work dir = the
    /// attempt's scratch dir) instead of as a process.
    #[arg(long, value_name = "IMAGE")]
    image: Option<String>,
    /// Wait for a terminal state; exit 0 when it passed, 1 otherwise.
    #[arg(long)]
    wait: bool,
    /// With `--wait` on the embedded queue, do not start an in-process worker when none is live.
    #[arg(long = "no-local-worker")]
    no_local_worker: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

/// Arguments of `jobs list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only jobs in this state (queued, running, succeeded, failed, dead, cancelled, stale), or
    /// `broken`: the quarantined records that could not be read (with the reason).
    #[arg(long)]
    state: Option<String>,
    /// At most this many.
    #[arg(long, default_value_t = 50)]
    limit: usize,
}

/// Dispatches a `jobs` subcommand.
pub async fn run(ctx: &Context, cmd: JobsCommand) -> CliResult {
    match cmd {
        JobsCommand::Submit(args) => submit(ctx, args).await,
        JobsCommand::List(args) => list(ctx, args).await,
        JobsCommand::Show { id } => show(ctx, &full_id(ctx, &id).await?).await,
        JobsCommand::Logs(mut args) => {
            args.id = full_id(ctx, &args.id).await?;
            logs::logs(ctx, args).await
        }
        JobsCommand::Cancel { id } => cancel(ctx, &full_id(ctx, &id).await?).await,
        JobsCommand::Retry { id, env } => retry(ctx, &full_id(ctx, &id).await?, &env).await,
        JobsCommand::Purge { id } => purge(ctx, &id).await,
        JobsCommand::ResubmitLost => resubmit_lost(ctx).await,
        JobsCommand::Prune(args) => prune::prune(ctx, args).await,
    }
}

/// The shortest prefix of a job id that `jobs show|logs|cancel|retry` accept in its place.
pub const MIN_ID_PREFIX: usize = 8;

/// The job id `given` stands for: itself when the queue has that job (or its pruned record),
/// else the one job whose id starts with it when it has at least [`MIN_ID_PREFIX`] characters.
///
/// # Errors
/// Exit 2: no job starts with it, or several do (their ids listed), or it is too short a
/// prefix; exit 3 when the queue cannot be read.
async fn full_id(ctx: &Context, given: &str) -> Result<String, CliError> {
    let backend = ctx.queue().await?;
    // a record that cannot be read is the command's to report, by its full id
    if !backend.get(given).await.is_ok_and(|j| j.is_none())
        || backend.tombstone(given).await.is_ok_and(|t| t.is_some())
    {
        return Ok(given.to_owned());
    }
    let (jobs, _) = backend.list_readable(None, usize::MAX).await?;
    let mut matching: Vec<&str> = jobs
        .iter()
        .map(|j| j.id.as_str())
        .filter(|id| !given.is_empty() && id.starts_with(given))
        .collect();
    matching.sort_unstable();
    matching.dedup();
    let listed = |ids: &[&str]| {
        let shown: Vec<&str> = ids.iter().take(10).copied().collect();
        let more = ids.len() - shown.len();
        let more = if more > 0 {
            format!(", and {more} more")
        } else {
            String::new()
        };
        format!("{}{more}", shown.join(", "))
    };
    match matching.as_slice() {
        [] => Err(CliError::usage(anyhow!(
            "no job `{given}` (and no job id starts with it): `skillforge jobs list` shows the ids"
        ))),
        some if given.chars().count() < MIN_ID_PREFIX => Err(CliError::usage(anyhow!(
            "no job `{given}`: a job id prefix needs at least {MIN_ID_PREFIX} characters (the id{} starting with it: {}); give the full id",
            if some.len() == 1 { "" } else { "s" },
            listed(some)
        ))),
        [one] => Ok((*one).to_owned()),
        many => Err(CliError::usage(anyhow!(
            "job id prefix `{given}` is ambiguous: {} jobs start with it ({}); give more characters or the full id",
            many.len(),
            listed(many)
        ))),
    }
}

async fn submit(ctx: &Context, args: SubmitArgs) -> CliResult {
    if args.attempts == 0 {
        return Err(CliError::usage(anyhow!("--attempts must be at least 1")));
    }
    check_name("queue-name", &args.queue_name)?;
    if let Some(key) = &args.idempotency_key {
        check_name("idempotency-key", key)?;
    }
    for lock in &args.locks {
        check_name("lock", lock)?;
    }
    let mut env = parse_env(&args.env)?;
    add_secret_env(&mut env, &args.secret_env)?;
    if args.image.is_some() && (args.cwd.is_some() || !args.files.is_empty()) {
        return Err(CliError::usage(anyhow!(
            "--cwd and --file are for process jobs; a container job (--image) runs in the attempt's scratch dir"
        )));
    }
    let (timeout_ms, heartbeat_ms) = (
        secs("timeout", args.timeout)?,
        secs("heartbeat", args.heartbeat)?,
    );
    let stale_after_ms = secs("stale-after", args.stale_after)?;
    if stale_after_ms <= heartbeat_ms {
        return Err(CliError::usage(anyhow!(
            "--stale-after ({}s) must be longer than --heartbeat ({}s)",
            args.stale_after,
            args.heartbeat
        )));
    }
    if args
        .requires
        .iter()
        .any(|r| r.trim().is_empty() || r.contains([',', '@']))
    {
        return Err(CliError::usage(anyhow!(
            "--require: a label is `KEY` or `KEY=VALUE`, without `,` or `@`"
        )));
    }
    // Every check of the arguments is above: files are staged only for a job that is enqueued.
    let backend = ctx.queue_checked().await?;
    let cwd = files::working_dir(
        backend.as_ref(),
        args.cwd.as_deref(),
        !args.files.is_empty(),
    )?;
    let inputs = files::stage_files(backend.as_ref(), &args.files).await?;
    let mut spec = match &args.image {
        Some(image) => {
            let mut payload = ContainerPayload::new(image, Command::Argv(args.command.clone()));
            payload.env = env;
            payload.secret_env = args.secret_env.clone();
            JobSpec::for_payload(&payload)
        }
        None => {
            let mut payload = ProcessPayload::argv(args.command.clone());
            payload.env = env;
            payload.secret_env = args.secret_env.clone();
            payload.cwd = cwd;
            JobSpec::for_payload(&payload)
        }
    }
    .map_err(CliError::usage)?;
    spec.files.inputs = inputs;
    spec.idempotency_key = args.idempotency_key.clone();
    spec.max_attempts = args.attempts;
    (spec.timeout_ms, spec.heartbeat_ms, spec.stale_after_ms) =
        (timeout_ms, heartbeat_ms, stale_after_ms);
    spec.idempotent = !args.non_idempotent;
    spec.locks = args.locks.clone();
    spec.requires = skillforge_engine::labels::normalize(&args.requires);
    spec.queue = skillforge_engine::labels::route(&args.queue_name, &spec.requires);

    if args.wait && ctx.queue_url.is_embedded() {
        // `--wait` on the embedded queue applies the result to the store: a store that cannot be
        // opened fails the command before anything is enqueued, not after.
        ctx.store().await?;
    }
    let submitted = submit_checked(ctx, backend.as_ref(), &spec).await?;
    let enqueued = submitted.enqueued;
    // The idempotency key's job finished and was pruned since: its tombstone is all there is.
    if !enqueued.created
        && let Some(t) = prune::pruned(backend.as_ref(), &enqueued.job_id).await?
    {
        if ctx.json {
            print_json(
                &json!({"id": enqueued.job_id, "created": false, "pruned": prune::pruned_json(&t)}),
            );
        } else {
            println!("{}", enqueued.job_id);
            eprintln!(
                "(existing job for idempotency key `{}`) {}",
                args.idempotency_key.unwrap_or_default(),
                prune::pruned_line(&t)
            );
        }
        let passed = t.state == JobState::Succeeded;
        return Ok(if !args.wait || passed {
            OK
        } else {
            CHECK_FAILED
        });
    }
    let restarted = submitted.restarted;
    if !args.wait {
        if ctx.json {
            print_json(
                &json!({"id": enqueued.job_id, "created": enqueued.created, "restarted": restarted}),
            );
        } else {
            println!("{}", enqueued.job_id);
            if !enqueued.created && restarted.is_none() {
                eprintln!(
                    "(existing job for idempotency key `{}`)",
                    args.idempotency_key.unwrap_or_default()
                );
            }
            // Nothing runs a queued job until a worker does: say so when none is live.
            if matches!(
                crate::control::waiter::has_live_worker(backend.as_ref()).await,
                Ok(false)
            ) {
                eprintln!(
                    "queued; no worker is running on this queue: start one with `skillforge worker`, or submit with \
                     --wait to run it in this process (see it with `skillforge jobs show {}`)",
                    enqueued.job_id
                );
            }
        }
        return Ok(OK);
    }
    if !ctx.json {
        eprintln!("job {} queued", enqueued.job_id);
    }

    let job = match await_job(ctx, &backend, &enqueued.job_id, !args.no_local_worker).await {
        Ok(job) => job,
        Err(e) => {
            // Gone without a tombstone: the queue lost it (issue 32 item 5), it does not "stay
            // in the queue".
            let id = &enqueued.job_id;
            if matches!(backend.get(id).await, Ok(None))
                && matches!(backend.tombstone(id).await, Ok(None))
            {
                return Err(CliError::env(anyhow!(
                    "job {id} was lost: the queue no longer has it (did it lose its data: a restart without \
                     persistence, a flush?); nothing of it stays queued, and submitting again runs the work again"
                )));
            }
            return Err(left_behind(e, id, args.idempotency_key.as_deref()));
        }
    };
    if ctx.json {
        print_json(&job_json(&job, backend.now_ms().await?));
    } else {
        if let Some(o) = &job.outcome {
            print!("{}", o.stdout_tail);
            eprint!("{}", o.stderr_tail);
        }
        eprintln!("job {} {}{}", job.id, job.state, outcome_suffix(&job));
        if job.state == JobState::Dead && job.attempts > 1 {
            eprintln!(
                "it ran {} times: a command that exits non-zero is retried up to --attempts (default 3); \
                 give --attempts 1 to run it once",
                job.attempts
            );
        }
    }
    Ok(if job.state == JobState::Succeeded {
        OK
    } else {
        CHECK_FAILED
    })
}

/// `--env NAME=VALUE` pairs.
///
/// # Errors
/// Exit 2 for a pair without `=`, an empty or invalid name, or a NUL byte in a value.
fn parse_env(pairs: &[String]) -> Result<BTreeMap<String, String>, CliError> {
    let mut env = BTreeMap::new();
    for kv in pairs {
        let Some((k, v)) = kv.split_once('=') else {
            return Err(CliError::usage(anyhow!("--env `{kv}` is not NAME=VALUE")));
        };
        if k.is_empty() || k.contains(['\0', '=']) {
            return Err(CliError::usage(anyhow!(
                "--env `{kv}`: the variable name is empty or invalid (NAME=VALUE)"
            )));
        }
        if v.contains('\0') {
            return Err(CliError::usage(anyhow!(
                "--env `{k}`: the value holds a NUL byte"
            )));
        }
        env.insert(k.to_owned(), v.to_owned());
    }
    Ok(env)
}

/// Adds each `--secret-env NAME` to `env` with its value from this process's environment, and
/// registers the value for redaction (so no log line of this process shows it).
///
/// # Errors
/// Exit 2 for an invalid name, a name also given by `--env`, or a variable that is not set
/// (or not UTF-8) here.
fn add_secret_env(env: &mut BTreeMap<String, String>, names: &[String]) -> Result<(), CliError> {
    for name in names {
        if name.is_empty() || name.contains(['\0', '=']) {
            return Err(CliError::usage(anyhow!(
                "--secret-env `{name}`: the variable name is empty or invalid"
            )));
        }
        if env.contains_key(name) {
            return Err(CliError::usage(anyhow!(
                "--secret-env `{name}` is also given by --env: give it once"
            )));
        }
        let value = std::env::var(name).map_err(|_| {
            CliError::usage(anyhow!(
                "--secret-env `{name}`: no such variable in this environment (its value is taken from there)"
            ))
        })?;
        if value.contains('\0') {
            return Err(CliError::usage(anyhow!(
                "--secret-env `{name}`: the value holds a NUL byte"
            )));
        }
        crate::control::redact::register_secret(&value);
        env.insert(name.clone(), value);
    }
    Ok(())
}

/// `payload` with the values of its `secret_env` names in `env` replaced by `***`: what every
/// command shows of a job's payload.
fn shown_payload(payload: &Value) -> Value {
    let mut shown = payload.clone();
    let names: Vec<String> = payload
        .get("secret_env")
        .and_then(Value::as_array)
        .map(|names| {
            names
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    if let Some(env) = shown.get_mut("env").and_then(Value::as_object_mut) {
        for name in &names {
            if let Some(value) = env.get_mut(name) {
                *value = json!("***");
            }
        }
    }
    shown
}

/// The error of a `--wait` that failed after its job was enqueued, saying that the job is still
/// in the queue and how to find or cancel it, so that running the command again is never the
/// silent second copy of it.
fn left_behind(e: CliError, id: &str, key: Option<&str>) -> CliError {
    let again = match key {
        Some(k) => format!("submitting again with --idempotency-key `{k}` returns it"),
        None => "submitting again adds a second job (pass --idempotency-key to make a retry return this one)".to_owned(),
    };
    CliError {
        code: e.code,
        error: e.error.context(format!(
            "job {id} was queued and stays in the queue (`skillforge jobs show {id}`, `skillforge jobs cancel {id}`); {again}"
        )),
    }
}

fn outcome_suffix(job: &Job) -> String {
    let mut s = String::new();
    if job.state == JobState::Dead {
        s.push_str(&format!(
            " after {} of {} attempts",
            job.attempts, job.spec.max_attempts
        ));
    }
    if let Some(o) = &job.outcome {
        // In words (`not runnable`, `timed out`); `--json` keeps the label.
        s.push_str(&format!(" ({}", o.exit.label().replace('_', " ")));
        if let Some(c) = o.exit_code {
            s.push_str(&format!(", exit {c}"));
        }
        s.push(')');
    }
    if let Some(why) = crate::output::failure_reason(job) {
        s.push_str(&format!(": {why}"));
    }
    if job.recovery_available {
        s.push_str(" — recovery available (`skillforge jobs retry`)");
    }
    s
}

/// The JSON shape of one job (`jobs show --json`, `jobs submit --wait --json`).
pub fn job_json(job: &Job, now_ms: i64) -> Value {
    let lease = job.lease.as_ref().map(|l| {
        json!({
            "owner_worker": l.owner_worker,
            "owner_host": l.owner_host,
            "owner_pid": l.owner_pid,
            "fencing_token": l.fencing_token,
            "acquired_at": rfc3339_ms(l.acquired_at_ms),
            "heartbeat_at": rfc3339_ms(l.heartbeat_at_ms),
            "heartbeat_age_ms": now_ms - l.heartbeat_at_ms,
        })
    });
    let history: Vec<Value> = job
        .history
        .iter()
        .map(|a| {
            json!({
                "attempt": a.attempt,
                "fencing_token": a.fencing_token,
                "worker": a.worker,
                "host": a.host,
                "pid": a.pid,
                "started_at": rfc3339_ms(a.started_at_ms),
                "ended_at": a.ended_at_ms.map(rfc3339_ms),
                "result": a.result,
                "retry_delay_ms": a.retry_delay_ms,
            })
        })
        .collect();
    let mut shown = json!({
        "id": job.id,
        "state": job.state,
        "queue": job.spec.queue,
        "workflow": job.spec.workflow,
        "stage": job.spec.stage,
        "kind": job.spec.kind,
        "attempts": job.attempts,
        "max_attempts": job.spec.max_attempts,
        "fencing_token": job.fencing_token,
        "idempotency_key": job.spec.idempotency_key,
        "idempotent": job.spec.idempotent,
        "cancel_requested": job.cancel_requested,
        "recovery_available": job.recovery_available,
        "created_at": rfc3339_ms(job.created_at_ms),
        "updated_at": rfc3339_ms(job.updated_at_ms),
        "not_before": rfc3339_ms(job.not_before_ms),
        "lease": lease,
        "outcome": job.outcome,
        "error": job.error,
        "stdout_tail": job.outcome.as_ref().map(|o| o.stdout_tail.as_str()),
        "stderr_tail": job.outcome.as_ref().map(|o| o.stderr_tail.as_str()),
        "payload": shown_payload(&job.spec.payload),
        "history": history,
        "spend": agent_spend(job).map(|s| json!({"runs": s.runs, "usage": s.usage, "runs_without_tokens": s.runs_without_tokens, "runs_without_cost": s.runs_without_cost, "human": s.human()})),
    });
    // The job's trace (`[telemetry]` on): absent otherwise, so the output is unchanged.
    if let (Some(traceparent), Some(obj)) = (&job.spec.traceparent, shown.as_object_mut()) {
        obj.insert("traceparent".into(), json!(traceparent));
    }
    shown
}

/// The tokens and cost an `agent` job's run reported (issue 31 item 7), as a one-run
/// [`Spend`](skillforge_runner_agent::Spend): a figure the transcript did not report is counted
/// in `runs_without_tokens`/`runs_without_cost` ("unknown", never 0). `None` for other runners
/// and for a job without an outcome yet.
pub fn agent_spend(job: &Job) -> Option<skillforge_runner_agent::Spend> {
    if job.spec.kind != "agent" {
        return None;
    }
    let outcome = job.outcome.as_ref()?;
    let usage: Option<skillforge_runner_agent::Usage> = outcome
        .detail
        .get("usage")
        .and_then(|u| serde_json::from_value(u.clone()).ok());
    let mut spend = skillforge_runner_agent::Spend::default();
    spend.add_run(usage.as_ref());
    Some(spend)
}

async fn list(ctx: &Context, args: ListArgs) -> CliResult {
    if args.state.as_deref() == Some(BROKEN) {
        return list_broken(ctx, args.limit).await;
    }
    let state = args
        .state
        .as_deref()
        .map(str::parse::<JobState>)
        .transpose()
        .map_err(|e| CliError::usage(anyhow!("--state: {e} (or `{BROKEN}`)")))?;
    let backend = ctx.queue().await?;
    let (jobs, unreadable) = backend.list_readable(state, args.limit).await?;
    // The rows that can be read are shown; the others are counted (issue 32 item 2).
    if !unreadable.is_empty() {
        let ids: Vec<&str> = unreadable.iter().map(|u| u.job_id.as_str()).collect();
        eprintln!(
            "note: {} job record(s) could not be read and are not listed ({}); ingestion quarantines a pending one \
             (`skillforge jobs list --state {BROKEN}`), `skillforge jobs purge ID` removes one",
            unreadable.len(),
            ids.join(", ")
        );
    }
    if ctx.json {
        let now = backend.now_ms().await?;
        print_json(&jobs.iter().map(|j| job_json(j, now)).collect::<Vec<_>>());
        return Ok(OK);
    }
    if jobs.is_empty() {
        println!("no jobs");
        return Ok(OK);
    }
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .map(|j| {
            vec![
                j.id.clone(),
                j.state.to_string(),
                j.spec.kind.clone(),
                format!("{}/{}", j.attempts, j.spec.max_attempts),
                rfc3339_ms(j.created_at_ms),
                describe(j),
            ]
        })
        .collect();
    println!(
        "{}",
        crate::output::table(
            &["ID", "STATE", "KIND", "ATTEMPTS", "CREATED", "WHAT"],
            &rows,
            &[3]
        )
    );
    Ok(OK)
}

/// The `--state` value that lists the quarantined records.
const BROKEN: &str = "broken";

/// `jobs list --state broken`: the records ingestion quarantined because it could not read them.
async fn list_broken(ctx: &Context, limit: usize) -> CliResult {
    let backend = ctx.queue().await?;
    let records = backend.quarantined(limit).await?;
    if ctx.json {
        print_json(
            &records
                .iter()
                .map(|r| json!({"id": r.job_id, "reason": r.reason, "quarantined_at": r.quarantined_at_ms.map(rfc3339_ms)}))
                .collect::<Vec<_>>(),
        );
        return Ok(OK);
    }
    if records.is_empty() {
        println!("no broken job records");
        return Ok(OK);
    }
    println!("{:<36} {:<24} REASON", "ID", "QUARANTINED");
    for r in &records {
        println!(
            "{:<36} {:<24} {}",
            r.job_id,
            r.quarantined_at_ms.map(rfc3339_ms).unwrap_or_default(),
            r.reason
        );
    }
    Ok(OK)
}

/// `jobs resubmit-lost`: the store's pending work the queue lost, enqueued again (issue 32
/// item 5). Exit 0 whatever was skipped (each skip is named with its reason).
async fn resubmit_lost(ctx: &Context) -> CliResult {
    use skillforge_stage::Resubmitted;
    let backend = ctx.queue_checked().await?;
    let store = ctx.store().await?;
    let done = skillforge_stage::resubmit_lost(backend.as_ref(), &store).await?;
    if ctx.json {
        let (mut again, mut skipped) = (Vec::new(), Vec::new());
        for r in &done {
            match r {
                Resubmitted::Again { lost, new_id } => again.push(json!({
                    "lost": lost.job_id, "id": new_id, "workflow": lost.workflow, "stage": lost.stage, "idempotency_key": lost.idempotency_key,
                })),
                Resubmitted::Skipped { lost, reason } => skipped.push(json!({"lost": lost.job_id, "reason": reason})),
            }
        }
        print_json(&json!({"resubmitted": again, "skipped": skipped}));
        return Ok(OK);
    }
    if done.is_empty() {
        println!("no lost work: every job the store awaits is still in the queue");
    }
    for r in &done {
        match r {
            Resubmitted::Again { lost, new_id } => {
                println!(
                    "job {} ({}/{}) was lost; enqueued again as {new_id}",
                    lost.job_id, lost.workflow, lost.stage
                );
            }
            Resubmitted::Skipped { lost, reason } => println!(
                "job {} ({}/{}) was lost; not enqueued again: {reason}",
                lost.job_id, lost.workflow, lost.stage
            ),
        }
    }
    Ok(OK)
}

/// `jobs purge ID`: deletes one quarantined record.
async fn purge(ctx: &Context, id: &str) -> CliResult {
    let backend = ctx.queue().await?;
    if !backend.purge(id).await? {
        return Err(CliError::usage(anyhow!(
            "no quarantined job record `{id}` (`skillforge jobs list --state {BROKEN}` lists them; a readable job is never purged)"
        )));
    }
    if ctx.json {
        print_json(&json!({"id": id, "result": "purged"}));
    } else {
        println!("job record {id}: purged");
    }
    Ok(OK)
}

/// What a job runs, in a few words: its command line, else `workflow/stage` (at most 60
/// characters). A job whose command does nothing (`true`: a canary decision, whose effect is its
/// applied result) is named by its `workflow/stage` and key.
pub(crate) fn describe(job: &Job) -> String {
    let p = &job.spec.payload;
    let argv = p.pointer("/command/argv").and_then(Value::as_array);
    // A workflow's placeholder step runs `true`: it is named by its workflow and stage. A job a
    // person submitted (`jobs submit -- true`) is named by its command, like any other
    // (issue 35 item 4).
    let no_op = argv.is_some_and(|a| a.len() == 1 && a[0] == "true")
        && job.spec.workflow != skillforge_stage::family::ADHOC_WORKFLOW;
    let what = if no_op {
        match &job.spec.idempotency_key {
            Some(key) => format!("{}/{} {key}", job.spec.workflow, job.spec.stage),
            None => format!("{}/{}", job.spec.workflow, job.spec.stage),
        }
    } else if let Some(argv) = argv {
        argv.iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" ")
    } else if let Some(sh) = p.pointer("/command/shell").and_then(Value::as_str) {
        sh.to_owned()
    } else {
        format!("{}/{}", job.spec.workflow, job.spec.stage)
    };
    if what.chars().count() > 60 {
        format!("{}…", what.chars().take(59).collect::<String>())
    } else {
        what
    }
}

async fn show(ctx: &Context, id: &str) -> CliResult {
    let backend = ctx.queue().await?;
    let job = backend.get(id).await.map_err(|e| match e {
        // One bad record (issue 32 item 2): say what can be done about it.
        EngineError::Corrupt { .. } => CliError::env(anyhow::Error::new(e).context(format!(
            "job {id}'s record cannot be read; ingestion quarantines it (`skillforge jobs list --state {BROKEN}`) and \
             `skillforge jobs purge {id}` then removes it"
        ))),
        other => CliError::env(other),
    })?;
    let Some(job) = job else {
        let Some(t) = backend.tombstone(id).await? else {
            return Err(CliError::usage(anyhow!("no job `{id}`")));
        };
        let store = ctx.store().await?;
        let applied = skillforge_store::applied::applied_for_job(store.pool(), id)
            .await
            .map_err(CliError::env)?;
        if ctx.json {
            let mut value = prune::pruned_json(&t);
            value["applied"] = applied_json(&applied);
            print_json(&value);
        } else {
            println!("{}", prune::pruned_line(&t));
            for a in &applied {
                println!(
                    "applied    result of token {} ({}) at {}",
                    a.fencing_token, a.state, a.applied_at
                );
            }
        }
        return Ok(OK);
    };
    let now = backend.now_ms().await?;
    let store = ctx.store().await?;
    let applied = skillforge_store::applied::applied_for_job(store.pool(), id)
        .await
        .map_err(CliError::env)?;
    let note = skillforge_engine::labels::unmet_note(backend.as_ref(), &job).await?;
    if ctx.json {
        let mut value = job_json(&job, now);
        value["applied"] = applied_json(&applied);
        if let Some(n) = &note {
            value["routing_note"] = json!(n);
        }
        print_json(&value);
        return Ok(OK);
    }
    println!("job        {}", job.id);
    if let Some(n) = &note {
        println!("note       {n}");
    }
    println!("state      {}{}", job.state, outcome_suffix(&job));
    println!(
        "what       {} ({}/{}, runner {})",
        describe(&job),
        job.spec.workflow,
        job.spec.stage,
        job.spec.kind
    );
    println!("queue      {}", job.spec.queue);
    println!("attempts   {}/{}", job.attempts, job.spec.max_attempts);
    println!("token      {}", job.fencing_token);
    if let Some(k) = &job.spec.idempotency_key {
        println!("idem key   {k}");
    }
    if let Some(l) = &job.lease {
        println!(
            "lease      {} on {} pid {}, heartbeat {} ago",
            l.owner_worker,
            l.owner_host,
            l.owner_pid,
            age(now - l.heartbeat_at_ms)
        );
    }
    if !job.history.is_empty() {
        println!("history");
        for a in &job.history {
            println!(
                "  #{} token {} {}@{}:{} started {} → {}{}",
                a.attempt,
                a.fencing_token,
                a.worker,
                a.host,
                a.pid,
                rfc3339_ms(a.started_at_ms),
                a.result.as_deref().unwrap_or("running"),
                a.retry_delay_ms
                    .map(|d| format!(" (retry in {})", age(d as i64)))
                    .unwrap_or_default()
            );
        }
    }
    for a in &applied {
        println!(
            "applied    result of token {} ({}) at {}",
            a.fencing_token, a.state, a.applied_at
        );
    }
    if let Some(spend) = agent_spend(&job) {
        println!("spend      {}", spend.human());
    }
    if let Some(o) = &job.outcome {
        if !o.stdout_tail.is_empty() {
            println!("stdout (tail)\n{}", o.stdout_tail.trim_end());
        }
        if !o.stderr_tail.is_empty() {
            println!("stderr (tail)\n{}", o.stderr_tail.trim_end());
        }
    }
    Ok(OK)
}

fn applied_json(applied: &[skillforge_store::applied::AppliedResult]) -> Value {
    applied
        .iter()
        .map(|a| json!({"fencing_token": a.fencing_token, "state": a.state, "applied_at": a.applied_at}))
        .collect()
}

async fn cancel(ctx: &Context, id: &str) -> CliResult {
    let backend = ctx.queue().await?;
    let reply = backend.cancel(id).await.map_err(not_found_is_usage)?;
    let (text, state) = match reply {
        CancelReply::Cancelled => ("cancelled".to_owned(), "cancelled"),
        CancelReply::Requested => (
            "cancel requested; the worker stops it at its next heartbeat".to_owned(),
            "cancel_requested",
        ),
        CancelReply::AlreadyTerminal(s) => (format!("already {s}; nothing to cancel"), s.as_str()),
    };
    if ctx.json {
        print_json(&json!({"id": id, "result": state}));
    } else {
        println!("job {id}: {text}");
    }
    Ok(OK)
}

async fn retry(ctx: &Context, id: &str, env: &[String]) -> CliResult {
    let env = parse_env(env)?;
    let backend = ctx.queue().await?;
    if env.is_empty() {
        backend.retry(id).await.map_err(not_found_is_usage)?;
    } else {
        let job = backend
            .get(id)
            .await?
            .ok_or_else(|| CliError::usage(anyhow!("no job `{id}`")))?;
        let takes_env =
            job.spec.kind == ProcessPayload::KIND || job.spec.kind == ContainerPayload::KIND;
        let payload = with_env(&job.spec.payload, &env)
            .filter(|_| takes_env)
            .ok_or_else(|| {
                CliError::usage(anyhow!(
                    "job {id} is a `{}` job: only process and container jobs take --env",
                    job.spec.kind
                ))
            })?;
        backend
            .retry_with_payload(id, &payload)
            .await
            .map_err(not_found_is_usage)?;
    }
    // Values may be secrets: only the names are printed.
    let names: Vec<&str> = env.keys().map(String::as_str).collect();
    if ctx.json {
        print_json(&json!({"id": id, "result": "queued", "env_replaced": names}));
    } else if names.is_empty() {
        println!("job {id}: queued again");
    } else {
        println!("job {id}: queued again with {} replaced", names.join(", "));
    }
    Ok(OK)
}

/// `payload` (a process or container payload, which carry `env`) with each of `env` set,
/// replacing a value it had; `None` for a payload without an `env` map.
fn with_env(payload: &Value, env: &BTreeMap<String, String>) -> Option<Value> {
    let mut payload = payload.clone();
    let obj = payload.as_object_mut()?;
    let map = obj
        .entry("env")
        .or_insert_with(|| json!({}))
        .as_object_mut()?;
    for (k, v) in env {
        map.insert(k.clone(), Value::String(v.clone()));
    }
    Some(payload)
}

fn not_found_is_usage(e: EngineError) -> CliError {
    match e {
        EngineError::NotFound(_) | EngineError::InvalidState { .. } => CliError::usage(e),
        other => CliError::env(other),
    }
}
