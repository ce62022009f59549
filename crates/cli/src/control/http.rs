//! The one HTTP server of `serve --listen ADDR` and `worker --metrics ADDR`: an accept loop over
//! a [`axum::Router`] composed of parts ([`router`]), with the connection limits every part
//! shares (issue 32 item 10): at most [`MAX_CONNECTIONS`] at once, one request per connection,
//! headers within [`HEADER_READ_TIMEOUT`], the whole exchange within [`CONNECTION_TIMEOUT`].
//!
//! Parts: `POST /events` ([`super::events::router`], `serve` only, with a webhook secret) and
//! `GET /metrics`, `/health`, `/ready` ([`super::metrics::router`]). A new part is one more
//! router passed to [`router`] where `serve` (or `worker`) builds its list.

use std::net::SocketAddr;

use tokio_util::sync::CancellationToken;
use tracing::warn;

/// Connections served at once; more wait in the listen backlog (no file descriptor of the
/// process each), so slow or idle clients cannot use up the fds ingestion and the jobs need.
pub const MAX_CONNECTIONS: usize = 32;
/// Longest wait for a request's headers (slow-header clients are cut off).
pub const HEADER_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// Longest a connection lives, its body and the answer included (slow-body clients are cut off).
pub const CONNECTION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The server's router: every part merged, in order (their paths must not overlap; each part
/// keeps its own state and layers, e.g. the events endpoint's body limit).
pub fn router(parts: impl IntoIterator<Item = axum::Router>) -> axum::Router {
    parts
        .into_iter()
        .fold(axum::Router::new(), axum::Router::merge)
}

/// Parses `addr` (`HOST:PORT`) and binds it. `flag` names the option in errors.
///
/// # Errors
/// A usage error (exit 2) for an address that is not `HOST:PORT`; an environment error (exit 3)
/// when it cannot be bound (in use, not a local address, no permission).
pub async fn bind(
    flag: &str,
    addr: &str,
) -> Result<tokio::net::TcpListener, crate::exit::CliError> {
    let parsed: SocketAddr = addr.parse().map_err(|e| {
        crate::exit::CliError::usage(anyhow::anyhow!(
            "{flag} `{addr}` is not HOST:PORT (e.g. 127.0.0.1:8787): {e}"
        ))
    })?;
    tokio::net::TcpListener::bind(parsed).await.map_err(|e| {
        crate::exit::CliError::env(anyhow::anyhow!("listen on `{addr}` ({flag}): {e}"))
    })
}

/// Serves `app` on `listener` until `shutdown`, within the limits of the module docs; accept
/// errors (e.g. out of fds) are logged and retried after a pause.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    shutdown: CancellationToken,
) {
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let connections = tokio_util::task::TaskTracker::new();
    loop {
        // A slot first: while every slot is taken, new connections wait in the kernel's backlog.
        let permit = tokio::select! {
            () = shutdown.cancelled() => break,
            permit = slots.clone().acquire_owned() => match permit { Ok(p) => p, Err(_) => break },
        };
        let (stream, _) = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    warn!(error = %e, "http: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let stop = shutdown.clone();
        connections.spawn(async move {
            let _permit = permit;
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .keep_alive(false)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            tokio::select! {
                () = stop.cancelled() => {}
                served = tokio::time::timeout(CONNECTION_TIMEOUT, connection) => match served {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tracing::debug!(error = %e, "http connection ended with an error"),
                    Err(_) => tracing::debug!("http connection cut off after the connection timeout"),
                },
            }
        });
    }
    connections.close();
    connections.wait().await;
}
