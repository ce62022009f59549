//! The web console of `skillforge serve --listen` (issue 36 item 1): server-rendered pages of
//! the queue (counts, throughput, workers, locks, jobs and a job's page with its live output),
//! what waits on a person (Attention) and the families' work, with cancel, retry and prune;
//! a little JavaScript and the stylesheet embedded in the binary.
//!
//! [`router`] is the whole console as one `axum::Router` (state applied), merged beside `POST
//! /events` by the server. Access: [`access`] (tokens, sessions, CSRF). Pages read the queue
//! through the engine's `QueueBackend` capability traits and the store through its aggregates
//! and the families' public facades, as the CLI's `list`/`show`/`status` commands do.

pub mod access;
mod attention;
pub mod html;
mod queue;
mod work;

use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use skillforge_engine::QueueBackend;
use skillforge_engine::retention::Retention;
use skillforge_store::Store;

use self::access::{Access, Tokens};
use self::html::esc;

/// What every page reads: the queue, the store, the home, the retention `prune` applies, and
/// who may sign in.
pub struct ConsoleState {
    /// The queue.
    pub backend: Arc<dyn QueueBackend>,
    /// The domain store.
    pub store: Store,
    /// The home directory (family files such as eval reports live under it).
    pub home: PathBuf,
    /// `[queue] keep_succeeded` / `keep_failed`: what the prune action removes.
    pub retention: Retention,
    /// Tokens and sessions.
    pub access: Access,
    /// The PACE gate's settings when `[skillopt] pace_enabled` is on (the Work page then shows
    /// each pending candidate's PACE wealth beside the bandit posterior), else `None`.
    pub pace: Option<skillforge_contract::pace::Pace>,
}

impl ConsoleState {
    /// A console over `backend` and `store` for `tokens`.
    pub fn new(
        backend: Arc<dyn QueueBackend>,
        store: Store,
        home: PathBuf,
        retention: Retention,
        tokens: Tokens,
    ) -> Self {
        Self {
            backend,
            store,
            home,
            retention,
            access: Access::new(tokens),
            pace: None,
        }
    }
}

/// The console's routes, with the access check in front of all of them but `/login` and
/// `/assets/*`: `/` (queue), `/jobs`, `/jobs/{id}`, `/jobs/{id}/output` (JSON, polled by the
/// page), `/workers`, `/attention`, `/work`, and the actions `POST /jobs/{id}/cancel`,
/// `/jobs/{id}/retry`, `/jobs/bulk`, `/prune`, `/logout`; `/work/eval/{brief}/report` is an eval
/// brief's HTML report (`eval report --html`).
pub fn router(state: Arc<ConsoleState>) -> Router {
    Router::new()
        .route("/", get(queue::overview))
        .route("/jobs", get(queue::jobs))
        .route("/jobs/bulk", post(queue::bulk))
        .route("/jobs/{id}", get(queue::job))
        .route("/jobs/{id}/output", get(queue::output))
        .route("/jobs/{id}/cancel", post(queue::cancel))
        .route("/jobs/{id}/retry", post(queue::retry))
        .route("/prune", post(queue::prune))
        .route("/workers", get(queue::workers))
        .route("/attention", get(attention::attention))
        .route("/work", get(work::work))
        .route("/work/eval/{brief}/report", get(work::eval_report))
        .route("/login", get(login_form).post(login))
        .route("/logout", post(logout))
        .route("/assets/console.css", get(css))
        .route("/assets/console.js", get(js))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            access::require,
        ))
        .layer(axum::middleware::map_response(security_headers))
        .with_state(state)
}

/// Headers every console answer carries: no framing, no sniffing, no caching of pages, and a
/// content security policy that allows only the console's own script and stylesheet.
async fn security_headers(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert("x-frame-options", "DENY".parse().expect("static header"));
    h.insert(
        "x-content-type-options",
        "nosniff".parse().expect("static header"),
    );
    h.insert(
        "referrer-policy",
        "no-referrer".parse().expect("static header"),
    );
    if !h.contains_key(header::CONTENT_SECURITY_POLICY) {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            "default-src 'self'; frame-ancestors 'none'; form-action 'self'"
                .parse()
                .expect("static header"),
        );
    }
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(
            header::CACHE_CONTROL,
            "no-store".parse().expect("static header"),
        );
    }
    response
}

async fn css() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("assets/console.css"),
    )
}

async fn js() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("assets/console.js"),
    )
}

/// `?next=` of the login page.
#[derive(serde::Deserialize)]
struct Next {
    next: Option<String>,
}

/// Where to go after signing in: a path of this console only (never another site).
fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.contains('\\') => n.to_owned(),
        _ => "/".to_owned(),
    }
}

fn login_page(next: &str, error: Option<&str>) -> axum::response::Html<String> {
    let error = error
        .map(|e| format!("<p class=\"refused\">{}</p>", esc(e)))
        .unwrap_or_default();
    html::page_plain(
        "Sign in",
        &format!(
            "{error}<form method=\"post\" action=\"/login\"><input type=\"hidden\" name=\"next\" value=\"{}\">\
             <label for=\"token\">Console token (<code>[server] token</code> or <code>read_token</code>)</label>\
             <p><input type=\"password\" id=\"token\" name=\"token\" autocomplete=\"current-password\" size=\"40\" autofocus></p>\
             <p><button type=\"submit\" id=\"sign-in\">Sign in</button></p></form>",
            esc(next)
        ),
    )
}

async fn login_form(Query(q): Query<Next>) -> Response {
    login_page(&safe_next(q.next.as_deref()), None).into_response()
}

async fn login(
    State(state): State<Arc<ConsoleState>>,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    let field = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let next = safe_next(field("next"));
    match state.access.login(field("token").unwrap_or_default()) {
        Some((id, _)) => (
            [(header::SET_COOKIE, access::set_cookie(Some(&id)))],
            Redirect::to(&next),
        )
            .into_response(),
        None => {
            tracing::warn!("console: a sign-in with a wrong token was refused");
            (
                StatusCode::UNAUTHORIZED,
                login_page(
                    &next,
                    Some("That token is not this console's. Check [server] token / read_token."),
                ),
            )
                .into_response()
        }
    }
}

async fn logout(
    State(state): State<Arc<ConsoleState>>,
    headers: HeaderMap,
    axum::Extension(viewer): axum::Extension<access::Viewer>,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    let csrf = form
        .iter()
        .find(|(n, _)| n == "csrf")
        .map(|(_, v)| v.as_str());
    // Signing out needs only a valid session and its CSRF token, whatever the role.
    if viewer.csrf.as_deref() != csrf {
        return access::refused(
            StatusCode::FORBIDDEN,
            "The form's security token is missing or out of date: reload the page and try again.",
        );
    }
    if let Some(id) = access::session_cookie(&headers) {
        state.access.logout(&id);
    }
    (
        [(header::SET_COOKIE, access::set_cookie(None))],
        Redirect::to("/login"),
    )
        .into_response()
}

/// A page that could not be read: the error (redacted) and 500.
pub(crate) fn failed(viewer: &access::Viewer, what: &str, e: impl std::fmt::Display) -> Response {
    tracing::warn!(error = %e, "console: {what} failed");
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        html::page("Could not read", viewer, "", &format!("<p class=\"refused\">{}: {}</p><p>Reload to try again; `skillforge doctor` checks the queue and the store.</p>", esc(what), esc(&e.to_string()))),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::safe_next;

    #[test]
    fn sign_in_goes_back_to_this_console_only() {
        assert_eq!(safe_next(Some("/jobs?state=dead")), "/jobs?state=dead");
        for bad in [
            "//evil.example/x",
            "https://evil.example/",
            "\\\\evil",
            "/\\evil",
            "jobs",
        ] {
            assert_eq!(safe_next(Some(bad)), "/", "{bad}");
        }
        assert_eq!(safe_next(None), "/");
    }
}
