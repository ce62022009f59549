//! `skillforge jobs logs ID [--follow]`: a job's live output ([`skillforge_engine::output`]) as
//! its runner writes it, on either backend; with `--follow`, until the job ends.

use std::io::Write;
use std::time::Duration;

use anyhow::anyhow;
use clap::Args;
use skillforge_engine::output::{OutputChunk, OutputStream};
use skillforge_engine::{Job, QueueBackend};
use skillforge_stage::jobs::is_finished;

use crate::context::Context;
use crate::exit::{CliError, CliResult, OK};

/// Chunks read per call.
const PAGE: usize = 256;
/// Longest `--follow` waits between two reads when neither new output nor a change of the job
/// is signalled: the fallback for a lost wake-up (a Redis restart). New output wakes the
/// follower at once on both backends ([`skillforge_engine::backend::QueueOutput::output_since`]: the embedded queue's
/// change signal; on Redis a blocking `XREAD` on the job's output stream), the job's end on
/// the queue's change signal. `SKILLFORGE_FOLLOW_FALLBACK_MS` overrides it (tests set it long
/// to show that the wake-ups, not this poll, deliver the output).
const FOLLOW_FALLBACK: Duration = Duration::from_secs(1);

fn follow_fallback() -> Duration {
    std::env::var("SKILLFORGE_FOLLOW_FALLBACK_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(FOLLOW_FALLBACK, Duration::from_millis)
}

/// Arguments of `jobs logs`.
#[derive(Debug, Args)]
pub struct LogsArgs {
    /// Job id, or a unique prefix of it (at least 8 characters).
    pub id: String,
    /// Keep printing output as it is written until the job ends (terminal or `stale`); a job
    /// re-queued for another attempt is followed into it.
    #[arg(long, short = 'f')]
    pub follow: bool,
}

/// Prints the job's kept output chunks in order: stdout chunks on stdout, stderr chunks on
/// stderr (with `--json`: one JSON object per line per chunk on stdout, `{"cursor",
/// "fencing_token", "stream", "data"}`, `data` as lossy UTF-8). A finished job whose live output is gone (trimmed away, or written by
/// a runner that streams nothing) prints its result's stdout/stderr tails instead. Exit 0; 2
/// for an unknown job; 3 when the queue fails.
pub async fn logs(ctx: &Context, args: LogsArgs) -> CliResult {
    let backend = ctx.queue().await?;
    let mut cursor: Option<String> = None;
    let mut printed_any = false;
    let fallback = follow_fallback();
    loop {
        let seen = backend.change_seq();
        // The job's state is read before its output: output read after seeing it finished is
        // complete (the worker sends all of it before the result).
        let job = job(backend.as_ref(), &args.id).await?;
        let n = print_new(ctx, backend.as_ref(), &args.id, &mut cursor).await?;
        printed_any |= n > 0;
        if !args.follow || is_finished(&job) {
            if !printed_any && is_finished(&job) {
                print_result_tails(ctx, &job);
            }
            return Ok(OK);
        }
        if n == 0 {
            backend
                .output_since(&args.id, cursor.as_deref(), seen, fallback)
                .await;
        }
    }
}

async fn job(backend: &dyn QueueBackend, id: &str) -> Result<Job, CliError> {
    backend
        .get(id)
        .await?
        .ok_or_else(|| CliError::usage(anyhow!("no job `{id}`")))
}

/// Prints every chunk after `cursor`, advancing it; returns how many.
async fn print_new(
    ctx: &Context,
    backend: &dyn QueueBackend,
    id: &str,
    cursor: &mut Option<String>,
) -> Result<usize, CliError> {
    let mut n = 0;
    loop {
        let page = backend.read_output(id, cursor.as_deref(), PAGE).await?;
        for chunk in &page {
            print_chunk(ctx, chunk);
        }
        n += page.len();
        match page.last() {
            Some(last) => *cursor = Some(last.cursor.clone()),
            None => return Ok(n),
        }
        if page.len() < PAGE {
            return Ok(n);
        }
    }
}

fn print_chunk(ctx: &Context, chunk: &OutputChunk) {
    if ctx.json {
        // One object per line (JSON Lines), so a follower can parse each as it arrives.
        if let Ok(line) = serde_json::to_string(chunk) {
            println!("{line}");
        }
        return;
    }
    // A closed stdout (`| head`) ends a printing command quietly (default SIGPIPE, main.rs).
    let _ = match chunk.stream {
        OutputStream::Stdout => std::io::stdout()
            .lock()
            .write_all(&chunk.data)
            .and_then(|()| std::io::stdout().flush()),
        OutputStream::Stderr => std::io::stderr().lock().write_all(&chunk.data),
    };
}

fn print_result_tails(ctx: &Context, job: &Job) {
    let Some(o) = &job.outcome else { return };
    for (stream, tail) in [
        (OutputStream::Stdout, &o.stdout_tail),
        (OutputStream::Stderr, &o.stderr_tail),
    ] {
        if !tail.is_empty() {
            let chunk = OutputChunk {
                cursor: String::new(),
                fencing_token: job.fencing_token,
                stream,
                data: tail.clone().into_bytes(),
            };
            print_chunk(ctx, &chunk);
        }
    }
}
