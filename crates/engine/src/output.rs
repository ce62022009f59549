//! Live output of running jobs: what a worker forwards from [`RunContext::output`] to the queue
//! while the runner writes it, and what `skillforge jobs logs [--follow]` reads back, on either
//! backend (SQLite: table `job_output`; Redis: one capped stream per job).
//!
//! The worker buffers what the runner reports and sends it every [`OUTPUT_FLUSH_EVERY`] (and
//! once more before the job's result), fenced on the lease's token, so a superseded attempt
//! writes nothing. A running job keeps at most [`OUTPUT_CAP_CHUNKS`] chunks; when it ends, the
//! worker trims them to the last [`OUTPUT_TAIL_CHUNKS`] (the result's outcome keeps its own
//! capped stdout/stderr tails as well).
//!
//! [`RunContext::output`]: skillforge_runner::RunContext

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use skillforge_runner::OutputFn;
pub use skillforge_runner::OutputStream;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::backend::QueueBackend;

/// Most chunks a running job keeps on the queue; older ones are dropped (a reader that fell
/// this far behind misses them).
pub const OUTPUT_CAP_CHUNKS: usize = 512;
/// Chunks kept once the job ended.
pub const OUTPUT_TAIL_CHUNKS: usize = 64;
/// Most bytes the worker buffers between two sends; beyond it the oldest buffered bytes are
/// dropped and a `[... N bytes of live output dropped]` line says so.
pub const OUTPUT_BUFFER_MAX_BYTES: usize = 256 * 1024;
/// How often the worker sends buffered output.
pub const OUTPUT_FLUSH_EVERY: Duration = Duration::from_millis(100);

/// One piece of output to append: bytes of one stream, in the order written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewOutput {
    /// stdout or stderr.
    pub stream: OutputStream,
    /// The bytes (not necessarily UTF-8, not necessarily whole lines).
    pub data: Vec<u8>,
}

/// One stored chunk, as read back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputChunk {
    /// Opaque position of this chunk: pass it as `after` to read what follows.
    pub cursor: String,
    /// The lease (attempt) that wrote it.
    pub fencing_token: u64,
    /// stdout or stderr.
    pub stream: OutputStream,
    /// The bytes.
    #[serde(with = "lossy")]
    pub data: Vec<u8>,
}

mod lossy {
    //! `data` as text in JSON (lossy UTF-8): what `jobs logs --json` prints.
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(data: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&String::from_utf8_lossy(data))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        Ok(String::deserialize(d)?.into_bytes())
    }
}

/// What the runner reported and the worker has not sent yet.
#[derive(Debug, Default)]
struct Pending {
    chunks: Vec<NewOutput>,
    bytes: usize,
    dropped: u64,
}

impl Pending {
    fn push(&mut self, stream: OutputStream, data: &[u8]) {
        match self.chunks.last_mut() {
            Some(last) if last.stream == stream => last.data.extend_from_slice(data),
            _ => self.chunks.push(NewOutput {
                stream,
                data: data.to_vec(),
            }),
        }
        self.bytes += data.len();
        while self.bytes > OUTPUT_BUFFER_MAX_BYTES && !self.chunks.is_empty() {
            let over = self.bytes - OUTPUT_BUFFER_MAX_BYTES;
            let first = &mut self.chunks[0];
            let cut = over.min(first.data.len());
            first.data.drain(..cut);
            self.bytes -= cut;
            self.dropped += cut as u64;
            if first.data.is_empty() {
                self.chunks.remove(0);
            }
        }
    }

    fn take(&mut self) -> Vec<NewOutput> {
        let mut chunks = std::mem::take(&mut self.chunks);
        self.bytes = 0;
        if self.dropped > 0 {
            let line = format!(
                "[... {} bytes of live output dropped]\n",
                std::mem::take(&mut self.dropped)
            );
            chunks.insert(
                0,
                NewOutput {
                    stream: OutputStream::Stderr,
                    data: line.into_bytes(),
                },
            );
        }
        chunks
    }
}

/// The worker's side of one attempt's live output: the [`OutputFn`] for its `RunContext` and
/// the task that sends what it buffers, started by the first output (a job that writes nothing
/// costs no task, timer or queue write).
pub(crate) struct OutputForwarder {
    shared: Arc<Shared>,
}

struct Shared {
    pending: Mutex<Pending>,
    /// The sending task, once the first output started it.
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    stop: CancellationToken,
    backend: Arc<dyn QueueBackend>,
    job_id: String,
    fencing_token: u64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl OutputForwarder {
    /// Forwarding for the attempt of `job_id` under `fencing_token`.
    pub(crate) fn start(backend: Arc<dyn QueueBackend>, job_id: &str, fencing_token: u64) -> Self {
        Self {
            shared: Arc::new(Shared {
                pending: Mutex::new(Pending::default()),
                task: Mutex::new(None),
                stop: CancellationToken::new(),
                backend,
                job_id: job_id.to_owned(),
                fencing_token,
            }),
        }
    }

    /// The callback for the runner's `RunContext::output`: buffers, and starts the sending
    /// task at the first output.
    pub(crate) fn output_fn(&self) -> OutputFn {
        let shared = self.shared.clone();
        Arc::new(move |stream, data: &[u8]| {
            if data.is_empty() {
                return;
            }
            lock(&shared.pending).push(stream, data);
            let mut task = lock(&shared.task);
            if task.is_none()
                && !shared.stop.is_cancelled()
                && let Ok(runtime) = tokio::runtime::Handle::try_current()
            {
                let s = shared.clone();
                *task = Some(runtime.spawn(async move {
                    loop {
                        tokio::select! {
                            () = s.stop.cancelled() => return,
                            () = tokio::time::sleep(OUTPUT_FLUSH_EVERY) => {}
                        }
                        send(&s).await;
                    }
                }));
            }
        })
    }

    /// The run ended: stops the periodic sends and sends what is left (before the result, so a
    /// reader that sees the job finished has seen all of its output). Returns whether the
    /// attempt wrote any output.
    pub(crate) async fn finish(self) -> bool {
        self.shared.stop.cancel();
        let task = lock(&self.shared.task).take();
        let wrote = task.is_some() || !lock(&self.shared.pending).chunks.is_empty();
        if let Some(task) = task {
            let _ = task.await;
        }
        send(&self.shared).await;
        wrote
    }
}

async fn send(s: &Shared) {
    let chunks = lock(&s.pending).take();
    if chunks.is_empty() {
        return;
    }
    match s
        .backend
        .append_output(&s.job_id, s.fencing_token, &chunks)
        .await
    {
        Ok(true) => {}
        Ok(false) => {
            debug!(job_id = %s.job_id, fencing_token = s.fencing_token, "live output refused: the lease was superseded")
        }
        // Live output is best effort: the result's outcome keeps the capped tails either way.
        Err(e) => debug!(job_id = %s.job_id, error = %e, "live output not sent"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_output_merges_a_stream_and_marks_what_it_dropped() {
        let mut p = Pending::default();
        p.push(OutputStream::Stdout, b"a");
        p.push(OutputStream::Stdout, b"b");
        p.push(OutputStream::Stderr, b"c");
        let taken = p.take();
        assert_eq!(taken.len(), 2);
        assert_eq!(
            taken[0],
            NewOutput {
                stream: OutputStream::Stdout,
                data: b"ab".to_vec()
            }
        );
        assert!(p.take().is_empty());

        p.push(OutputStream::Stdout, &vec![b'x'; OUTPUT_BUFFER_MAX_BYTES]);
        p.push(OutputStream::Stdout, b"yz");
        let taken = p.take();
        assert_eq!(taken[0].data, b"[... 2 bytes of live output dropped]\n");
        assert_eq!(taken[1].data.len(), OUTPUT_BUFFER_MAX_BYTES);
        assert!(taken[1].data.ends_with(b"yz"));
    }
}
