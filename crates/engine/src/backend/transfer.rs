//! [`QueueTransfer`]: how a job's files reach a worker, by path on a shared disk or by content
//! through the queue's transfer area ([`crate::transfer`]).

use std::sync::Arc;

use crate::transfer::TransferArea;

use super::QueueCore;

/// Where a stage puts a job's input files and a worker its uploaded outputs. Nothing here
/// fails: the area's own calls return the errors.
pub trait QueueTransfer: QueueCore {
    /// The queue's transfer area (see [`crate::transfer`]): where a job's input files and
    /// uploaded outputs live by content. Redis: chunked keys with a TTL; the embedded queue: the
    /// blob store next to its file. `None` for a backend that has none (then a job with files
    /// fails on the worker with a message saying so).
    fn transfer_area(&self) -> Option<Arc<dyn TransferArea>> {
        None
    }

    /// Whether every worker of this queue sees the control plane's disk (the embedded queue:
    /// its workers run on the home's host), so a stage may pass paths. False for Redis: a
    /// fleet worker may be another machine, and a stage sends its files through
    /// [`Self::transfer_area`] instead.
    fn shares_disk(&self) -> bool {
        true
    }
}
