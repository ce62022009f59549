//! Cross-process wake-ups of change waiters (`changed_since`) on Redis: every script that ends a
//! job (a finish batch, cancel, reap, release into `cancelled`) publishes on the channel
//! `{namespace}:changed` in the same atomic call, and one listener task per backend holds a
//! subscription while some waiter of this process waits, turning each message into a
//! [`ChangeSignal::signal`].
//!
//! Messages are lost while nobody subscribes (pub/sub keeps nothing), so a listener that
//! (re)subscribes signals once right after the subscription is confirmed: a waiter that read its
//! jobs before that re-reads them. A subscription is kept for [`LINGER`] after the last waiter
//! left, so a waiter's loop (wake, re-read, wait again) does not resubscribe each round. Redis
//! restarts and pauses only delay a wake-up: the waiter's own timeout is the fallback poll.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use redis::Client;
use tokio_util::sync::CancellationToken;

use crate::changes::ChangeSignal;

/// How long a subscription outlives the last waiter (and how often an idle one checks).
const LINGER: Duration = Duration::from_secs(2);
/// Connecting and subscribing take at most this long (a paused server answers nothing).
const SUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause before trying again after a failed subscription.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// The channel the scripts publish on (`publish_changed` in `common.lua`).
pub(super) fn channel(prefix: &str) -> String {
    format!("{prefix}changed")
}

/// Spawns the listener of `channel` on `client`; it ends when `stop` is cancelled.
pub(super) fn spawn_listener(
    client: Client,
    channel: String,
    signal: Arc<ChangeSignal>,
    stop: CancellationToken,
) {
    tokio::spawn(async move {
        loop {
            if !signal.has_waiters() {
                tokio::select! {
                    () = signal.waiter_arrived() => {}
                    () = stop.cancelled() => return,
                }
                continue;
            }
            let subscribed = tokio::select! {
                s = tokio::time::timeout(SUBSCRIBE_TIMEOUT, subscribe(&client, &channel)) => s,
                () = stop.cancelled() => return,
            };
            let mut messages = match subscribed {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, channel, "redis change listener cannot subscribe");
                    signal.signal();
                    tokio::select! {
                        () = tokio::time::sleep(RETRY_PAUSE) => {}
                        () = stop.cancelled() => return,
                    }
                    continue;
                }
                Err(_) => {
                    tracing::debug!(channel, "redis change listener: subscribing timed out");
                    signal.signal();
                    continue;
                }
            };
            // Messages published before the subscription are lost: let waiters re-read.
            signal.signal();
            loop {
                let next = tokio::select! {
                    m = tokio::time::timeout(LINGER, messages.next()) => m,
                    () = stop.cancelled() => return,
                };
                match next {
                    Ok(Some(_)) => signal.signal(),
                    Ok(None) => {
                        // The connection ended (a Redis restart): resubscribe, and let waiters
                        // re-read meanwhile.
                        tracing::debug!(channel, "redis change listener: subscription ended");
                        signal.signal();
                        break;
                    }
                    Err(_) if !signal.has_waiters() => break,
                    Err(_) => {}
                }
            }
        }
    });
}

async fn subscribe(client: &Client, channel: &str) -> redis::RedisResult<redis::aio::PubSubStream> {
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(channel).await?;
    Ok(pubsub.into_on_message())
}
