//! The recording proxy on real sockets (issue 31 item 9): an upstream served here on loopback
//! over raw HTTP/1.1, a client speaking raw HTTP/1.1 to the proxy, so what crosses each side is
//! exactly what the test reads.

use std::time::Duration;

use skillforge_runner::CancellationToken;
use skillforge_runner_agent::proxy::RecordingProxy;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A generous bound on each socket step, so a broken proxy fails the test instead of hanging it.
const STEP: Duration = Duration::from_secs(30);

/// Reads from `stream` into `buf` until `buf` contains `needle`.
async fn read_until(stream: &mut TcpStream, buf: &mut Vec<u8>, needle: &str) {
    let found = |b: &[u8]| String::from_utf8_lossy(b).contains(needle);
    while !found(buf) {
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(STEP, stream.read(&mut chunk))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "timed out waiting for {needle:?} in {:?}",
                    String::from_utf8_lossy(buf)
                )
            })
            .unwrap();
        assert!(
            n > 0,
            "closed before {needle:?}: {:?}",
            String::from_utf8_lossy(buf)
        );
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn request(path: &str, body: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nx-api-key: sk-ant-secret-1\r\nauthorization: Bearer tok-secret-2\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

// The proxy forwards path, query, body and credentials untouched to the upstream under its base
// path, streams the upstream's server-sent events back as they come (the second event is only
// sent once the client has read the first through the proxy), and records the skills the body
// offered.
#[tokio::test]
async fn the_proxy_streams_events_through_passes_credentials_untouched_and_records_the_offer() {
    let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/base", upstream.local_addr().unwrap());
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let (mut socket, _) = upstream.accept().await.unwrap();
        let mut seen = Vec::new();
        read_until(&mut socket, &mut seen, "\"stream\":true}").await;
        socket
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
            .await
            .unwrap();
        let chunk = |text: &str| format!("{:x}\r\n{text}\r\n", text.len());
        socket
            .write_all(chunk("event: one\ndata: {}\n\n").as_bytes())
            .await
            .unwrap();
        socket.flush().await.unwrap();
        released.await.unwrap();
        socket
            .write_all(format!("{}0\r\n\r\n", chunk("event: two\ndata: {}\n\n")).as_bytes())
            .await
            .unwrap();
        String::from_utf8(seen).unwrap()
    });
    let stop = CancellationToken::new();
    let proxy = RecordingProxy::start(vec![base], stop.clone())
        .await
        .unwrap();
    let url = proxy.url(0);
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let body = serde_json::json!({
        "model": "m",
        "tools": [{"name": "Skill"}, {"name": "Read"}],
        "messages": [{"role": "system", "content": "The following skills are available for use with the Skill tool:\n\n- tldr: three lines\n- review: a review"}],
        "stream": true
    })
    .to_string();
    let mut client = TcpStream::connect(url.trim_start_matches("http://").trim_end_matches("/r0"))
        .await
        .unwrap();
    client
        .write_all(request("/r0/v1/messages?beta=true", &body).as_bytes())
        .await
        .unwrap();
    let mut got = Vec::new();
    read_until(&mut client, &mut got, "event: one").await;
    assert!(
        !String::from_utf8_lossy(&got).contains("event: two"),
        "the second event was not sent yet"
    );
    release.send(()).unwrap();
    read_until(&mut client, &mut got, "event: two").await;
    let got = String::from_utf8_lossy(&got).into_owned();
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    assert!(
        got.to_lowercase()
            .contains("content-type: text/event-stream"),
        "{got}"
    );
    let seen = tokio::time::timeout(STEP, server).await.unwrap().unwrap();
    assert!(
        seen.starts_with("POST /base/v1/messages?beta=true HTTP/1.1\r\n"),
        "{seen}"
    );
    let lower = seen.to_lowercase();
    assert!(lower.contains("x-api-key: sk-ant-secret-1\r\n"), "{seen}");
    assert!(
        lower.contains("authorization: bearer tok-secret-2\r\n"),
        "{seen}"
    );
    assert!(
        seen.ends_with(&body),
        "the body went through unchanged: {seen}"
    );
    let recording = proxy.finish().await;
    assert_eq!(
        recording.offered,
        Some(vec!["tldr".to_owned(), "review".to_owned()])
    );
    assert_eq!(recording.n_model_requests, 1);
    assert_eq!(recording.unreachable, None);
    assert!(!stop.is_cancelled());
    let debug = format!("{recording:?}");
    assert!(!debug.contains("secret"), "no credential is kept: {debug}");
}

// An upstream nothing listens on: the client gets a 502 naming it, the run's token is cancelled
// (the runner stops the CLI and reports the API unreachable), and nothing counts as recorded.
#[tokio::test]
async fn an_unreachable_upstream_is_a_502_that_stops_the_run() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}/v1");
    let stop = CancellationToken::new();
    let proxy = RecordingProxy::start(vec![base.clone()], stop.clone())
        .await
        .unwrap();
    let url = proxy.url(0);
    let addr = url.trim_start_matches("http://").trim_end_matches("/r0");
    // A probe (Claude Code's `HEAD /`) that cannot get through does not stop the run.
    let mut probe = TcpStream::connect(addr).await.unwrap();
    probe
        .write_all(b"HEAD /r0/ HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    read_until(&mut probe, &mut got, "\r\n\r\n").await;
    assert!(
        String::from_utf8_lossy(&got).starts_with("HTTP/1.1 502"),
        "{got:?}"
    );
    assert!(!stop.is_cancelled(), "a probe does not stop the run");
    let mut client = TcpStream::connect(addr).await.unwrap();
    let body = r#"{"model":"m","input":[],"tools":[{"name":"shell"}]}"#;
    client
        .write_all(request("/r0/responses", body).as_bytes())
        .await
        .unwrap();
    let mut got = Vec::new();
    read_until(&mut client, &mut got, "recording proxy").await;
    let got = String::from_utf8_lossy(&got).into_owned();
    assert!(got.starts_with("HTTP/1.1 502"), "{got}");
    assert!(got.contains(&base), "{got}");
    assert!(stop.is_cancelled());
    let recording = proxy.finish().await;
    assert!(
        recording
            .unreachable
            .as_deref()
            .is_some_and(|u| u.starts_with(&base)),
        "{recording:?}"
    );
}

// Bad upstreams are refused before anything listens, naming the URL.
#[tokio::test]
async fn an_upstream_that_is_not_an_http_url_is_refused() {
    for bad in ["ftp://example.com", "not a url", "/v1"] {
        let error = RecordingProxy::start(vec![bad.to_owned()], CancellationToken::new())
            .await
            .err()
            .unwrap_or_else(|| panic!("{bad} accepted"));
        assert!(error.contains(bad), "{error}");
    }
}
