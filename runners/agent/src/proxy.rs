//! The recording proxy of one agent run (issue 31 item 9; seed: skill-eval-loop, "Read what the
//! agent was offered"): a loopback HTTP listener the agent CLI is pointed at instead of its model
//! API. Every request is forwarded to the real upstream (the base URL the user configured) with
//! its headers, credentials included, untouched and never logged or stored; every response comes
//! back unchanged and unbuffered (server-sent events stream through as they arrive). From each
//! model request body it records the skills the model was offered ([`crate::offered`]).
//!
//! Routes: the proxy serves one route per upstream, `http://127.0.0.1:PORT/rN`; a request to
//! `/rN/REST` goes to `UPSTREAM_N/REST`. It binds 127.0.0.1 on an ephemeral port and stops when
//! [`RecordingProxy::finish`] is called or it is dropped, so it lives as long as the run. An
//! upstream it cannot connect to is answered 502; when that was a model request it is reported
//! ([`Recording::unreachable`]) and the token given to [`RecordingProxy::start`] is cancelled so
//! the run ends at once.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use skillforge_runner::CancellationToken;

use crate::offered::{ModelApi, Offered, offered_in_request, offered_over_run};

/// How long [`RecordingProxy::finish`] lets open connections end before it drops them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<axum::body::Bytes>>;

/// What the proxy recorded over a run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Recording {
    /// The skills offered over the run's model requests ([`offered_over_run`]): `None` when no
    /// model request went through or one offered a list that could not be read.
    pub offered: Option<Vec<String>>,
    /// Agent turns (model requests offering tools or skills) forwarded.
    pub n_model_requests: usize,
    /// The first upstream a model request could not connect to, with the error (`URL: error`).
    pub unreachable: Option<String>,
}

struct Shared {
    client: HttpsClient,
    upstreams: Vec<String>,
    offers: Mutex<Vec<Offered>>,
    unreachable: Mutex<Option<String>>,
    on_unreachable: CancellationToken,
}

/// A running recording proxy (see the module docs).
pub struct RecordingProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for RecordingProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl RecordingProxy {
    /// Starts a proxy on `127.0.0.1:0` forwarding route `N` to `upstreams[N]` (an `http://` or
    /// `https://` base URL; a trailing `/` is dropped). `on_unreachable` is cancelled the first
    /// time a model request's upstream refuses the connection or cannot be resolved.
    ///
    /// # Errors
    /// A message naming what failed: an upstream that is not an http(s) URL, the TLS set-up, or
    /// the bind.
    pub async fn start(
        upstreams: Vec<String>,
        on_unreachable: CancellationToken,
    ) -> Result<RecordingProxy, String> {
        let mut bases = Vec::new();
        for upstream in upstreams {
            let base = upstream.trim_end_matches('/').to_owned();
            let uri: Uri = base
                .parse()
                .map_err(|e| format!("model API base URL `{upstream}` is not a URL: {e}"))?;
            if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
                return Err(format!(
                    "model API base URL `{upstream}` is not an http:// or https:// URL"
                ));
            }
            bases.push(base);
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = hyper_rustls::HttpsConnectorBuilder::new();
        let https = match builder.with_provider_and_native_roots(provider.clone()) {
            Ok(builder) => builder.https_or_http().enable_http1().build(),
            // No system certificates: loopback http upstreams still work; an https one fails
            // its handshake with a message naming the certificate.
            Err(_) => {
                let tls = rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| format!("set up TLS for the recording proxy: {e}"))?
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth();
                hyper_rustls::HttpsConnectorBuilder::new()
                    .with_tls_config(tls)
                    .https_or_http()
                    .enable_http1()
                    .build()
            }
        };
        let client = Client::builder(hyper_util::rt::TokioExecutor::new()).build(https);
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| format!("bind the recording proxy on 127.0.0.1: {e}"))?;
        let addr = listener
            .local_addr()
            .map_err(|e| format!("read the recording proxy's address: {e}"))?;
        let shared = Arc::new(Shared {
            client,
            upstreams: bases,
            offers: Mutex::new(Vec::new()),
            unreachable: Mutex::new(None),
            on_unreachable,
        });
        let app = axum::Router::new()
            .fallback(forward)
            .with_state(shared.clone());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
            if let Err(error) = served {
                tracing::warn!(%error, "the recording proxy stopped serving");
            }
        });
        Ok(RecordingProxy {
            addr,
            shared,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The base URL the CLI is given for upstream `route`: `http://127.0.0.1:PORT/rN`.
    pub fn url(&self, route: usize) -> String {
        format!("http://{}/r{route}", self.addr)
    }

    /// Stops the proxy (open connections get [`SHUTDOWN_GRACE`] to end) and returns what it
    /// recorded.
    pub async fn finish(mut self) -> Recording {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(SHUTDOWN_GRACE, &mut task)
                .await
                .is_err()
        {
            task.abort();
        }
        let offers = self
            .shared
            .offers
            .lock()
            .map(|o| o.clone())
            .unwrap_or_default();
        Recording {
            offered: offered_over_run(&offers),
            n_model_requests: offers.len(),
            unreachable: self.shared.unreachable.lock().ok().and_then(|u| u.clone()),
        }
    }
}

/// Hop-by-hop headers, never forwarded (RFC 9110 §7.6.1), and `host`/`content-length`, which
/// the client sets for the upstream request.
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
];

fn is_hop_by_hop(name: &HeaderName) -> bool {
    HOP_BY_HOP.contains(&name.as_str()) || name == header::CONTENT_LENGTH
}

async fn forward(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path().to_owned(), |p| p.as_str().to_owned());
    let route = path_and_query
        .strip_prefix("/r")
        .and_then(|rest| {
            let end = rest.find(['/', '?']).unwrap_or(rest.len());
            let n: usize = rest[..end].parse().ok()?;
            Some((n, rest[end..].to_owned()))
        })
        .and_then(|(n, rest)| shared.upstreams.get(n).map(|u| (u.clone(), rest)));
    let Some((upstream, rest)) = route else {
        return (
            StatusCode::NOT_FOUND,
            "skillforge recording proxy: no such route\n",
        )
            .into_response();
    };
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(error) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("skillforge recording proxy: reading the request body: {error}\n"),
            )
                .into_response();
        }
    };
    let path = rest.split('?').next().unwrap_or_default();
    let model_request =
        parts.method == axum::http::Method::POST && ModelApi::of_path(path).is_some();
    if model_request && let Some(api) = ModelApi::of_path(path) {
        // A body that is not JSON (compressed, say) is a model request whose offer is unknown.
        let offered = serde_json::from_slice(&bytes).map_or(Some(Offered::Unreadable), |body| {
            offered_in_request(api, &body)
        });
        if let Some(offered) = offered
            && let Ok(mut offers) = shared.offers.lock()
        {
            offers.push(offered);
        }
    }
    let target = format!("{upstream}{rest}");
    let mut outgoing = hyper::Request::builder()
        .method(parts.method.clone())
        .uri(&target);
    for (name, value) in &parts.headers {
        if !is_hop_by_hop(name) {
            outgoing = outgoing.header(name, value);
        }
    }
    let outgoing = match outgoing
        .header(header::CONTENT_LENGTH, bytes.len())
        .body(Full::new(bytes))
    {
        Ok(request) => request,
        Err(error) => {
            return (
                StatusCode::BAD_GATEWAY,
                format!("skillforge recording proxy: bad upstream request to {target}: {error}\n"),
            )
                .into_response();
        }
    };
    match shared.client.request(outgoing).await {
        Ok(response) => {
            let (parts, body) = response.into_parts();
            let mut response = Response::new(Body::new(body));
            *response.status_mut() = parts.status;
            for (name, value) in &parts.headers {
                if !HOP_BY_HOP.contains(&name.as_str()) {
                    response.headers_mut().append(name, value.clone());
                }
            }
            response
        }
        Err(error) => {
            let cause = std::error::Error::source(&error)
                .map_or_else(|| error.to_string(), |s| format!("{error}: {s}"));
            let message = format!("could not reach the model API at {upstream}: {cause}");
            tracing::warn!(%upstream, error = %cause, "the recording proxy could not reach the model API");
            // Only a model request that cannot get through stops the run: a probe (Claude Code's
            // `HEAD /`) that fails changes nothing the CLI would not have met without the proxy.
            if error.is_connect() && model_request {
                if let Ok(mut unreachable) = shared.unreachable.lock()
                    && unreachable.is_none()
                {
                    *unreachable = Some(format!("{upstream}: {cause}"));
                }
                shared.on_unreachable.cancel();
            }
            let body = serde_json::json!({
                "type": "error",
                "error": {"type": "api_error", "message": format!("skillforge recording proxy: {message}")},
            });
            (StatusCode::BAD_GATEWAY, axum::Json(body)).into_response()
        }
    }
}

/// Where one run's CLI is pointed at its proxy: the upstreams (route `N` is `upstreams[N]`) and
/// what of the invocation names each route.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProxyPlan {
    /// The real base URLs, one per route.
    pub upstreams: Vec<String>,
    /// Variables set to a route's URL (`ANTHROPIC_BASE_URL`).
    pub env: Vec<(String, usize)>,
    /// Codex `-c KEY="URL"` overrides: the config key and the route.
    pub codex_overrides: Vec<(String, usize)>,
    /// OpenCode providers whose `options.baseURL` becomes a route's URL.
    pub opencode_providers: Vec<(String, usize)>,
}

/// Anthropic's API when `ANTHROPIC_BASE_URL` is not set.
pub const ANTHROPIC_DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// OpenAI's API, Codex's built-in `openai` provider with an API key.
pub const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// ChatGPT's Codex backend, the built-in `openai` provider with a ChatGPT login.
pub const CHATGPT_BASE_URL: &str = "https://chatgpt.com/backend-api/codex";

impl ProxyPlan {
    /// The plan for `kind` in the private home `home` (its carried config files), with the
    /// child's variables read through `var`. `Ok(None)` when the configured model API cannot be
    /// pointed at a proxy (a Codex provider built in other than `openai`, an OpenCode config
    /// with no provider `baseURL`): the run goes ahead without one and its offered skills come
    /// from the transcript.
    ///
    /// # Errors
    /// A config file that exists and cannot be read or parsed, named.
    pub fn for_run(
        kind: crate::profile::ProxyKind,
        home: &std::path::Path,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<ProxyPlan>, String> {
        use crate::profile::ProxyKind;
        let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        match kind {
            ProxyKind::AnthropicBaseUrl => Ok(Some(ProxyPlan {
                upstreams: vec![
                    set("ANTHROPIC_BASE_URL")
                        .unwrap_or_else(|| ANTHROPIC_DEFAULT_BASE_URL.to_owned()),
                ],
                env: vec![("ANTHROPIC_BASE_URL".to_owned(), 0)],
                ..ProxyPlan::default()
            })),
            ProxyKind::CodexProvider => {
                let path = home.join(".codex/config.toml");
                let config: toml::Table = match std::fs::read_to_string(&path) {
                    Ok(text) => text
                        .parse()
                        .map_err(|e| format!("read Codex's config `{}`: {e}", path.display()))?,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => toml::Table::new(),
                    Err(e) => return Err(format!("read `{}`: {e}", path.display())),
                };
                let provider = config
                    .get("model_provider")
                    .and_then(toml::Value::as_str)
                    .unwrap_or("openai");
                let defined = config
                    .get("model_providers")
                    .and_then(|p| p.get(provider))
                    .and_then(|p| p.get("base_url"))
                    .and_then(toml::Value::as_str);
                let (upstream, key) = match (defined, provider) {
                    (Some(base), _) => (
                        base.to_owned(),
                        format!("model_providers.{provider}.base_url"),
                    ),
                    (None, "openai") => {
                        let base = config
                            .get("openai_base_url")
                            .and_then(toml::Value::as_str)
                            .map(str::to_owned)
                            .or_else(|| set("OPENAI_BASE_URL"))
                            .unwrap_or_else(|| {
                                if chatgpt_login(home, &set) {
                                    CHATGPT_BASE_URL.to_owned()
                                } else {
                                    OPENAI_DEFAULT_BASE_URL.to_owned()
                                }
                            });
                        (base, "openai_base_url".to_owned())
                    }
                    (None, _) => return Ok(None),
                };
                Ok(Some(ProxyPlan {
                    upstreams: vec![upstream],
                    codex_overrides: vec![(key, 0)],
                    ..ProxyPlan::default()
                }))
            }
            ProxyKind::OpencodeProvider => {
                let mut files = vec![
                    home.join(".config/opencode/opencode.json"),
                    home.join(".config/opencode/opencode.jsonc"),
                ];
                if let Some(explicit) = set("OPENCODE_CONFIG") {
                    files.push(explicit.into());
                }
                let mut providers: Vec<(String, String)> = Vec::new();
                for path in files {
                    let text = match std::fs::read_to_string(&path) {
                        Ok(text) => text,
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                        Err(e) => return Err(format!("read `{}`: {e}", path.display())),
                    };
                    // A `.jsonc` with comments is not JSON: its providers are not proxied.
                    let Ok(config) = serde_json::from_str::<serde_json::Value>(&text) else {
                        continue;
                    };
                    for (id, provider) in config
                        .get("provider")
                        .and_then(serde_json::Value::as_object)
                        .into_iter()
                        .flatten()
                    {
                        if let Some(base) = provider
                            .pointer("/options/baseURL")
                            .and_then(serde_json::Value::as_str)
                        {
                            providers.retain(|(known, _)| known != id);
                            providers.push((id.clone(), base.to_owned()));
                        }
                    }
                }
                if providers.is_empty() {
                    return Ok(None);
                }
                Ok(Some(ProxyPlan {
                    upstreams: providers.iter().map(|(_, base)| base.clone()).collect(),
                    opencode_providers: providers
                        .into_iter()
                        .enumerate()
                        .map(|(n, (id, _))| (id, n))
                        .collect(),
                    ..ProxyPlan::default()
                }))
            }
        }
    }

    /// Points `process` at `proxy`: sets the variables, appends the `-c` overrides, writes
    /// `OPENCODE_CONFIG_CONTENT`.
    pub fn apply(
        &self,
        proxy: &RecordingProxy,
        process: &mut skillforge_runner_process::ProcessPayload,
    ) {
        for (name, route) in &self.env {
            process.env.insert(name.clone(), proxy.url(*route));
        }
        if let skillforge_runner_process::Command::Argv(argv) = &mut process.command {
            for (key, route) in &self.codex_overrides {
                argv.push("-c".to_owned());
                argv.push(format!("{key}=\"{}\"", proxy.url(*route)));
            }
        }
        if !self.opencode_providers.is_empty() {
            let providers: serde_json::Map<String, serde_json::Value> = self
                .opencode_providers
                .iter()
                .map(|(id, route)| {
                    (
                        id.clone(),
                        serde_json::json!({"options": {"baseURL": proxy.url(*route)}}),
                    )
                })
                .collect();
            process.env.insert(
                "OPENCODE_CONFIG_CONTENT".to_owned(),
                serde_json::json!({ "provider": providers }).to_string(),
            );
        }
    }
}

/// Whether Codex runs on a ChatGPT login: `auth.json` holds tokens and no API key, and no key
/// variable is set.
fn chatgpt_login(home: &std::path::Path, set: &dyn Fn(&str) -> Option<String>) -> bool {
    if set("OPENAI_API_KEY").is_some() || set("CODEX_API_KEY").is_some() {
        return false;
    }
    let Ok(text) = std::fs::read_to_string(home.join(".codex/auth.json")) else {
        return false;
    };
    let Ok(auth) = serde_json::from_str::<serde_json::Value>(&text) else {
        return false;
    };
    auth.get("tokens").is_some_and(|t| !t.is_null())
        && auth
            .get("OPENAI_API_KEY")
            .is_none_or(|k| k.is_null() || k.as_str() == Some(""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::ProxyKind;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn claude_forwards_to_its_configured_base_url_or_anthropics() {
        let home = tempfile::tempdir().unwrap();
        let plan = ProxyPlan::for_run(
            ProxyKind::AnthropicBaseUrl,
            home.path(),
            &vars(&[("ANTHROPIC_BASE_URL", "https://gw.example/anthropic")]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(plan.upstreams, ["https://gw.example/anthropic"]);
        assert_eq!(plan.env, [("ANTHROPIC_BASE_URL".to_owned(), 0)]);
        let plan = ProxyPlan::for_run(ProxyKind::AnthropicBaseUrl, home.path(), &vars(&[]))
            .unwrap()
            .unwrap();
        assert_eq!(plan.upstreams, [ANTHROPIC_DEFAULT_BASE_URL]);
    }

    #[test]
    fn codex_forwards_to_its_providers_base_url() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".codex")).unwrap();
        let write =
            |text: &str| std::fs::write(home.path().join(".codex/config.toml"), text).unwrap();
        write(
            "model_provider = \"fake\"\n[model_providers.fake]\nbase_url = \"http://127.0.0.1:9/v1\"\n",
        );
        let plan = ProxyPlan::for_run(ProxyKind::CodexProvider, home.path(), &vars(&[]))
            .unwrap()
            .unwrap();
        assert_eq!(plan.upstreams, ["http://127.0.0.1:9/v1"]);
        assert_eq!(
            plan.codex_overrides,
            [("model_providers.fake.base_url".to_owned(), 0)]
        );
        // the built-in provider: OPENAI_BASE_URL, else OpenAI's API (a key) or ChatGPT's (a login)
        write("model = \"gpt-5\"\n");
        let with = |v: &[(&str, &str)]| {
            ProxyPlan::for_run(ProxyKind::CodexProvider, home.path(), &vars(v))
                .unwrap()
                .unwrap()
        };
        let plan = with(&[("OPENAI_BASE_URL", "http://127.0.0.1:8/v1")]);
        assert_eq!(plan.upstreams, ["http://127.0.0.1:8/v1"]);
        assert_eq!(plan.codex_overrides, [("openai_base_url".to_owned(), 0)]);
        assert_eq!(with(&[]).upstreams, [OPENAI_DEFAULT_BASE_URL]);
        std::fs::write(
            home.path().join(".codex/auth.json"),
            r#"{"OPENAI_API_KEY": null, "tokens": {"id_token": "x"}}"#,
        )
        .unwrap();
        assert_eq!(with(&[]).upstreams, [CHATGPT_BASE_URL]);
        assert_eq!(
            with(&[("OPENAI_API_KEY", "sk")]).upstreams,
            [OPENAI_DEFAULT_BASE_URL]
        );
        // another built-in provider: no proxy
        write("model_provider = \"oss\"\n");
        assert_eq!(
            ProxyPlan::for_run(ProxyKind::CodexProvider, home.path(), &vars(&[])).unwrap(),
            None
        );
        write("model_provider = [");
        let error =
            ProxyPlan::for_run(ProxyKind::CodexProvider, home.path(), &vars(&[])).unwrap_err();
        assert!(error.contains("config.toml"), "{error}");
    }

    #[test]
    fn opencode_forwards_each_provider_with_a_base_url() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join(".config/opencode");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("opencode.json"),
            r#"{"provider": {"a": {"options": {"baseURL": "http://127.0.0.1:1/v1"}}, "anthropic": {"options": {}}}}"#,
        )
        .unwrap();
        let explicit = home.path().join("explicit.json");
        std::fs::write(
            &explicit,
            r#"{"provider": {"b": {"options": {"baseURL": "https://b.example/v1"}}}}"#,
        )
        .unwrap();
        let at = explicit.display().to_string();
        let plan = ProxyPlan::for_run(
            ProxyKind::OpencodeProvider,
            home.path(),
            &vars(&[("OPENCODE_CONFIG", &at)]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            plan.upstreams,
            ["http://127.0.0.1:1/v1", "https://b.example/v1"]
        );
        assert_eq!(
            plan.opencode_providers,
            [("a".to_owned(), 0), ("b".to_owned(), 1)]
        );
        std::fs::remove_file(dir.join("opencode.json")).unwrap();
        assert_eq!(
            ProxyPlan::for_run(ProxyKind::OpencodeProvider, home.path(), &vars(&[])).unwrap(),
            None,
            "no provider with a base URL: no proxy"
        );
    }
}
