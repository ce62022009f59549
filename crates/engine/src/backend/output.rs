//! [`QueueOutput`]: live output of running attempts kept in the queue ([`crate::output`]), what
//! `jobs logs --follow` reads while the job runs on another machine.

use std::time::Duration;

use crate::error::EngineError;
use crate::output::{NewOutput, OutputChunk};

use super::QueueChanges;

/// Per-job output chunks: appended by the worker running the attempt (fenced), read by cursor,
/// trimmed to a tail when the job ends.
///
/// # Errors
/// Every call that returns a `Result` returns [`EngineError::Backend`] when the queue cannot be
/// read or written.
#[async_trait::async_trait]
pub trait QueueOutput: QueueChanges {
    /// Appends live output of a running attempt ([`crate::output`]), fenced: nothing is written
    /// (and the reply is `false`) unless the job is `running` under `fencing_token`. A job keeps
    /// at most [`crate::output::OUTPUT_CAP_CHUNKS`] chunks, the oldest dropped first.
    async fn append_output(
        &self,
        job_id: &str,
        fencing_token: u64,
        chunks: &[NewOutput],
    ) -> Result<bool, EngineError>;

    /// A job's kept output chunks after the chunk whose cursor is `after` (`None`: from the
    /// oldest kept), oldest first, at most `limit`. Empty for an unknown job or one that wrote
    /// nothing (or whose output was trimmed away).
    async fn read_output(
        &self,
        job_id: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<OutputChunk>, EngineError>;

    /// Returns once job `job_id` may have output after the chunk whose cursor is `after`
    /// (`None`: any output), or [`QueueChanges::change_seq`] moved past `seen` (e.g. the job
    /// ended), or after `timeout`, whichever is first; spurious returns are allowed (callers
    /// re-read). For `jobs logs --follow`. Redis blocks on the job's output stream (`XREAD
    /// BLOCK`, on a dedicated connection) beside the `changed` wait, so another process's append
    /// wakes it within a round trip; a connection lost to a Redis restart costs one short pause
    /// and is replaced on the next call. The default is [`QueueChanges::changed_since`]: the
    /// embedded queue signals every append (of this process at once, of another within its
    /// `data_version` poll).
    async fn output_since(&self, job_id: &str, after: Option<&str>, seen: u64, timeout: Duration) {
        let _ = (job_id, after);
        self.changed_since(seen, timeout).await;
    }

    /// The job ended: keeps only its last [`crate::output::OUTPUT_TAIL_CHUNKS`] chunks.
    async fn trim_output(&self, job_id: &str) -> Result<(), EngineError>;
}
