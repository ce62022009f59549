//! Sending signed forge events to `skillforge serve --listen`: the HMAC signature a GitHub webhook
//! carries (computed by the real `openssl` CLI, not by our own code), a raw HTTP/1.1 `POST /events`,
//! and `serve` started with a secret, shared by the harvest and PR-watcher tests.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::Home;

/// `sha256=<hex>` of HMAC-SHA256(`secret`, `body`), as GitHub puts in `X-Hub-Signature-256`.
///
/// # Panics
/// When `openssl` is not installed.
pub fn sign(secret: &str, body: &str) -> String {
    let mut child = std::process::Command::new("openssl")
        .args(["dgst", "-sha256", "-hmac", secret])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("openssl is installed");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    format!("sha256={}", text.trim().rsplit(' ').next().unwrap())
}

/// A raw HTTP/1.1 `POST /events` of type `event`; returns (status, body JSON).
///
/// # Panics
/// When nothing listens on `port` or the answer is not HTTP.
pub fn post(port: u16, event: &str, body: &str, signature: Option<&str>) -> (u16, Value) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let sig = signature
        .map(|s| format!("X-Hub-Signature-256: {s}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "POST /events HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nX-GitHub-Event: {event}\r\n{sig}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status: u16 = response.split(' ').nth(1).unwrap().parse().unwrap();
    let body = response.split("\r\n\r\n").nth(1).unwrap_or("");
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// `skillforge serve --listen 127.0.0.1:PORT` with `secret` (none: the variable removed), its log
/// in the home; `extra_env` is set on it.
///
/// # Panics
/// When the process cannot start.
pub fn spawn_serve(
    home: &Home,
    port: u16,
    secret: Option<&str>,
    extra_env: &[(&str, &str)],
) -> Child {
    let log = std::fs::File::create(home.path().join(format!("serve-{port}.log"))).unwrap();
    let mut cmd = home.cmd();
    cmd.args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    cmd.env_remove("SKILLFORGE_WEBHOOK_SECRET");
    if let Some(s) = secret {
        cmd.env("SKILLFORGE_WEBHOOK_SECRET", s);
    }
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// Waits (polling, 30 s deadline) until something accepts connections on `port`.
pub fn wait_listening(home: &Home, port: u16) {
    home.wait(Duration::from_secs(30), "serve to listen", || {
        TcpStream::connect(("127.0.0.1", port)).ok().map(|_| ())
    });
}
