//! Live output on Redis ([`crate::output`]): one capped stream per job, `out:{id}` (entries with
//! fields `s` = stream, `t` = fencing token, `d` = bytes), appended by `output_append.lua`
//! (fenced on the running lease), read with `XRANGE`, trimmed with `XTRIM` when the job ends.
//! A follower waits for new entries with `XREAD BLOCK` on a dedicated connection
//! ([`RedisBackend::wait_output_stream`]): pushed by Redis when another process appends, with no
//! change to the append script.
//!
//! An append retried after a lost reply (the connection dropped after Redis applied it) may
//! store its chunks twice: live output is best effort, the result's outcome keeps the tails.

use std::sync::LazyLock;
use std::time::Duration;

use ::redis::Script;
use tokio::time::Instant;

use super::{BLOCK_SLACK, RESPONSE_TIMEOUT, RETRY_BUDGET, RedisBackend, transient};
use crate::error::EngineError;
use crate::output::{NewOutput, OUTPUT_CAP_CHUNKS, OUTPUT_TAIL_CHUNKS, OutputChunk, OutputStream};

static APPEND: LazyLock<Script> =
    LazyLock::new(|| super::scripts::with_prelude(include_str!("output_append.lua")));

/// One `XRANGE` entry: its id and its field/value pairs.
type Entry = (String, Vec<Vec<u8>>);

impl RedisBackend {
    fn output_key(&self, job_id: &str) -> String {
        format!("{}out:{}", self.prefix, super::id::stored(job_id))
    }

    /// See [`crate::backend::QueueOutput::append_output`].
    pub(super) async fn append_output_stream(
        &self,
        job_id: &str,
        fencing_token: u64,
        chunks: &[NewOutput],
    ) -> Result<bool, EngineError> {
        let mut inv = APPEND.prepare_invoke();
        inv.arg(&self.prefix)
            .arg(super::id::stored(job_id).as_ref())
            .arg(fencing_token)
            .arg(OUTPUT_CAP_CHUNKS);
        for c in chunks {
            inv.arg(c.stream.as_str()).arg(c.data.as_slice());
        }
        let what = format!("append output of job `{job_id}`");
        let applied: u8 = with_retry!(self, what, |c| inv.invoke_async(&mut c))?;
        Ok(applied == 1)
    }

    /// See [`crate::backend::QueueOutput::read_output`].
    pub(super) async fn read_output_stream(
        &self,
        job_id: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<OutputChunk>, EngineError> {
        let key = self.output_key(job_id);
        let start = match after {
            None | Some("") => "-".to_owned(),
            Some(c) => format!("({c}"),
        };
        let what = format!("read output of job `{job_id}`");
        let entries: Vec<Entry> = with_retry!(self, what, |c| ::redis::cmd("XRANGE")
            .arg(&key)
            .arg(&start)
            .arg("+")
            .arg("COUNT")
            .arg(limit.max(1))
            .query_async(&mut c))?;
        entries
            .into_iter()
            .map(|(id, fields)| chunk(&what, id, fields))
            .collect()
    }

    /// See [`crate::backend::QueueOutput::output_since`]: `XREAD BLOCK` (at most `timeout`) on
    /// `out:{id}` after `after` (from the start when `None`; a stream not yet created is waited
    /// for too) on a connection of the blocking pool, raced against `changed_since(seen)`.
    /// A connection whose `XREAD` was abandoned (the change came first) is dropped, not pooled;
    /// a failed one (a Redis restart) is dropped after a pause of at most 200 ms, so the next
    /// call connects afresh.
    pub(super) async fn wait_output_stream(
        &self,
        job_id: &str,
        after: Option<&str>,
        seen: u64,
        timeout: Duration,
    ) {
        let key = self.output_key(job_id);
        let start = match after {
            None | Some("") => "0-0".to_owned(),
            Some(c) => c.to_owned(),
        };
        let read = async {
            let mut conn = match self.blocking_conn().await {
                Ok(c) => c,
                Err(e) => {
                    tracing::debug!(error = %e, "redis connection to follow job `{job_id}`'s output failed");
                    tokio::time::sleep(timeout.min(Duration::from_millis(200))).await;
                    return;
                }
            };
            conn.set_response_timeout(timeout + BLOCK_SLACK);
            // BLOCK 0 would wait forever.
            let block_ms = u64::try_from(timeout.as_millis())
                .unwrap_or(u64::MAX)
                .max(1);
            let reply: Result<::redis::Value, ::redis::RedisError> = ::redis::cmd("XREAD")
                .arg("COUNT")
                .arg(1)
                .arg("BLOCK")
                .arg(block_ms)
                .arg("STREAMS")
                .arg(&key)
                .arg(&start)
                .query_async(&mut conn)
                .await;
            match reply {
                Ok(_) => {
                    conn.set_response_timeout(RESPONSE_TIMEOUT);
                    self.return_blocking_conn(conn);
                }
                Err(e) => {
                    tracing::debug!(error = %e, "redis wait on job `{job_id}`'s output failed");
                    tokio::time::sleep(timeout.min(Duration::from_millis(200))).await;
                }
            }
        };
        tokio::select! {
            () = read => {}
            () = self.changes.changed_since(seen, timeout) => {}
        }
    }

    /// See [`crate::backend::QueueOutput::trim_output`].
    pub(super) async fn trim_output_stream(&self, job_id: &str) -> Result<(), EngineError> {
        let key = self.output_key(job_id);
        let what = format!("trim output of job `{job_id}`");
        let _: u64 = with_retry!(self, what, |c| ::redis::cmd("XTRIM")
            .arg(&key)
            .arg("MAXLEN")
            .arg(OUTPUT_TAIL_CHUNKS)
            .query_async(&mut c))?;
        Ok(())
    }
}

fn chunk(what: &str, cursor: String, fields: Vec<Vec<u8>>) -> Result<OutputChunk, EngineError> {
    let (mut stream, mut token, mut data) = (None, None, None);
    let mut it = fields.into_iter();
    while let (Some(name), Some(value)) = (it.next(), it.next()) {
        match name.as_slice() {
            b"s" => stream = Some(value),
            b"t" => {
                token = String::from_utf8(value)
                    .ok()
                    .and_then(|t| t.parse::<u64>().ok())
            }
            b"d" => data = Some(value),
            _ => {}
        }
    }
    let stream = match stream.as_deref() {
        Some(b"stdout") => OutputStream::Stdout,
        Some(b"stderr") => OutputStream::Stderr,
        other => {
            return Err(EngineError::redis(format!(
                "{what}: entry {cursor} has stream {other:?}"
            )));
        }
    };
    let (Some(fencing_token), Some(data)) = (token, data) else {
        return Err(EngineError::redis(format!(
            "{what}: entry {cursor} lacks its token or data"
        )));
    };
    Ok(OutputChunk {
        cursor,
        fencing_token,
        stream,
        data,
    })
}
