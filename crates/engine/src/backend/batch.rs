//! What both backends' implementations share below the traits: collecting a group-commit batch
//! of finishes, and the wait of a lease that a stop token may cut short.

use tokio_util::sync::CancellationToken;

/// Most times a group-commit task yields to the runtime while collecting one batch.
const BATCH_YIELDS: usize = 8;

/// Collects one group-commit batch (used by both backends' finish tasks): `first`, then
/// whatever else is queued, up to `max`. Between drains it yields to the runtime (up to
/// [`BATCH_YIELDS`] times, and only while a yield brought more requests), so that the slots just
/// woken by the previous batch's replies, which finish again within microseconds when their
/// jobs are short, join this batch instead of forming the next one: fewer, fuller transactions
/// or script calls for the same work. An isolated request costs one extra yield.
pub(crate) async fn collect_batch<T>(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<T>,
    first: T,
    max: usize,
) -> Vec<T> {
    let mut batch = vec![first];
    let drain = |rx: &mut tokio::sync::mpsc::UnboundedReceiver<T>, batch: &mut Vec<T>| {
        while batch.len() < max {
            match rx.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
    };
    drain(rx, &mut batch);
    for _ in 0..BATCH_YIELDS {
        if batch.len() >= max {
            break;
        }
        let before = batch.len();
        tokio::task::yield_now().await;
        drain(rx, &mut batch);
        if batch.len() == before {
            break;
        }
    }
    batch
}

/// Resolves when `stop` fires; never without one (the wait of a plain `lease`).
pub(crate) async fn until_stopped(stop: Option<&CancellationToken>) {
    match stop {
        Some(stop) => stop.cancelled().await,
        None => std::future::pending().await,
    }
}
