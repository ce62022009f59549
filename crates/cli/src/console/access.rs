//! Who may use the web console (issue 36 item 1, "Access"): the admin and read-only tokens, the
//! login form's sessions (an HttpOnly, SameSite=Strict cookie), `Authorization: Bearer`, and the
//! per-session CSRF token every action checks.
//!
//! Tokens come from `SKILLFORGE_SERVER_TOKEN` / `SKILLFORGE_SERVER_READ_TOKEN`, else `[server]
//! token` / `read_token`, else `[server] token_file` / `read_token_file` (first line; relative to the home). A token is
//! at least [`MIN_TOKEN_LEN`] characters; the two must differ. Every token is registered for
//! redaction, so no log line or page shows it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use rand::RngCore;
use subtle::ConstantTimeEq;

/// Environment variable holding the admin token (wins over `[server] token` and `token_file`).
pub const TOKEN_ENV: &str = "SKILLFORGE_SERVER_TOKEN";
/// Environment variable holding the read-only token (wins over `[server] read_token` and `read_token_file`).
pub const READ_TOKEN_ENV: &str = "SKILLFORGE_SERVER_READ_TOKEN";
/// Shortest token accepted: a short one could be guessed.
pub const MIN_TOKEN_LEN: usize = 16;
/// The session cookie's name.
pub const COOKIE: &str = "skillforge_session";
/// How long a login lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// Most sessions kept at once (the oldest is dropped first), so logins cannot grow memory.
const MAX_SESSIONS: usize = 1024;

/// What a signed-in client may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Pages only: every action is refused (403).
    Read,
    /// Pages and actions (cancel, retry, prune).
    Admin,
}

/// The console's tokens, as configured.
#[derive(Clone, Default)]
pub struct Tokens {
    /// The admin token.
    pub admin: Option<String>,
    /// The read-only token.
    pub read: Option<String>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("admin", &self.admin.as_ref().map(|_| "***"))
            .field("read", &self.read.as_ref().map(|_| "***"))
            .finish()
    }
}

impl Tokens {
    /// The tokens of `server` and the environment (see the module docs).
    ///
    /// # Errors
    /// A message naming the key or file: an unreadable token file, a token shorter than
    /// [`MIN_TOKEN_LEN`], or the same token for both roles.
    pub fn load(
        server: &crate::config::ServerSection,
        home: &std::path::Path,
    ) -> Result<Self, String> {
        let in_home = |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| home.join(p));
        let admin = pick(
            TOKEN_ENV,
            server.token.as_deref(),
            in_home(&server.token_file).as_deref(),
            "token",
        )?;
        let read = pick(
            READ_TOKEN_ENV,
            server.read_token.as_deref(),
            in_home(&server.read_token_file).as_deref(),
            "read_token",
        )?;
        if admin.is_some() && admin == read {
            return Err("[server] token and read_token are the same: give the read-only role a token of its own".to_owned());
        }
        for t in admin.iter().chain(read.iter()) {
            crate::control::redact::register_secret(t);
        }
        Ok(Self { admin, read })
    }

    /// Whether any token is set (the console is served only then).
    pub fn any(&self) -> bool {
        self.admin.is_some() || self.read.is_some()
    }

    /// The role `presented` grants, compared in constant time; `None` for a wrong token.
    pub fn role_of(&self, presented: &str) -> Option<Role> {
        let same = |t: &Option<String>| {
            t.as_deref()
                .is_some_and(|t| bool::from(t.as_bytes().ct_eq(presented.as_bytes())))
        };
        if same(&self.admin) {
            Some(Role::Admin)
        } else if same(&self.read) {
            Some(Role::Read)
        } else {
            None
        }
    }
}

fn pick(
    env: &str,
    value: Option<&str>,
    file: Option<&std::path::Path>,
    key: &str,
) -> Result<Option<String>, String> {
    let token = if let Some(v) = std::env::var(env).ok().filter(|v| !v.is_empty()) {
        Some((v, env.to_owned()))
    } else if let Some(v) = value.filter(|v| !v.is_empty()) {
        Some((v.to_owned(), format!("[server] {key}")))
    } else if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("[server] {key}_file `{}`: {e}", path.display()))?;
        let line = text.lines().next().unwrap_or_default().trim().to_owned();
        if line.is_empty() {
            return Err(format!(
                "[server] {key}_file `{}` is empty: write the token on its first line",
                path.display()
            ));
        }
        Some((line, format!("[server] {key}_file")))
    } else {
        None
    };
    match token {
        Some((t, from)) if t.chars().count() < MIN_TOKEN_LEN => Err(format!(
            "{from} is {} characters: a console token needs at least {MIN_TOKEN_LEN} (e.g. `openssl rand -hex 24`)",
            t.chars().count()
        )),
        Some((t, _)) => Ok(Some(t)),
        None => Ok(None),
    }
}

/// A login: its role, its CSRF token and when it ends.
#[derive(Debug, Clone)]
struct Session {
    role: Role,
    csrf: String,
    expires: Instant,
}

/// The tokens and the live sessions of one console.
#[derive(Debug, Default)]
pub struct Access {
    tokens: Tokens,
    sessions: Mutex<HashMap<String, Session>>,
}

/// Who sent a request (put in the request's extensions by [`require`]).
#[derive(Debug, Clone)]
pub struct Viewer {
    /// What they may do.
    pub role: Role,
    /// The session's CSRF token; `None` for a bearer-token client (no cookie: no CSRF risk).
    pub csrf: Option<String>,
}

impl Viewer {
    /// Whether an action with the form's `csrf` value may run: 403 for a read-only viewer, 403
    /// for a session whose form carries the wrong (or no) CSRF token.
    ///
    /// # Errors
    /// The refusal, as a page.
    pub fn may_act(&self, csrf: Option<&str>) -> Result<(), Box<Response>> {
        if self.role != Role::Admin {
            return Err(Box::new(refused(
                StatusCode::FORBIDDEN,
                "This token is read-only: actions need the admin token ([server] token).",
            )));
        }
        if let Some(expected) = &self.csrf {
            let ok = csrf.is_some_and(|c| bool::from(c.as_bytes().ct_eq(expected.as_bytes())));
            if !ok {
                return Err(Box::new(refused(
                    StatusCode::FORBIDDEN,
                    "The form's security token is missing or out of date: reload the page and try again.",
                )));
            }
        }
        Ok(())
    }
}

fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Access {
    /// Access checked against `tokens`.
    pub fn new(tokens: Tokens) -> Self {
        Self {
            tokens,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// A new session for `token` (the login form), or `None` for a wrong token: (session id, role).
    pub fn login(&self, token: &str) -> Option<(String, Role)> {
        let role = self.tokens.role_of(token.trim())?;
        let id = random_hex();
        let now = Instant::now();
        let mut sessions = self
            .sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        sessions.retain(|_, s| s.expires > now);
        if sessions.len() >= MAX_SESSIONS
            && let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, s)| s.expires)
                .map(|(k, _)| k.clone())
        {
            sessions.remove(&oldest);
        }
        sessions.insert(
            id.clone(),
            Session {
                role,
                csrf: random_hex(),
                expires: now + SESSION_TTL,
            },
        );
        Some((id, role))
    }

    /// Ends the session `id`.
    pub fn logout(&self, id: &str) {
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(id);
    }

    /// Who sent `headers`: a valid bearer token, else a live session cookie.
    pub fn viewer(&self, headers: &HeaderMap) -> Option<Viewer> {
        if let Some(bearer) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
        {
            return self
                .tokens
                .role_of(bearer.trim())
                .map(|role| Viewer { role, csrf: None });
        }
        let id = session_cookie(headers)?;
        let sessions = self
            .sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let s = sessions.get(&id).filter(|s| s.expires > Instant::now())?;
        Some(Viewer {
            role: s.role,
            csrf: Some(s.csrf.clone()),
        })
    }
}

/// The session id of the request's cookie.
pub fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_owned())
}

/// The `Set-Cookie` value of a new session (`None`: the cookie that ends it).
pub fn set_cookie(id: Option<&str>) -> String {
    match id {
        Some(id) => format!(
            "{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}",
            SESSION_TTL.as_secs()
        ),
        None => format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"),
    }
}

/// A short refusal page.
pub fn refused(status: StatusCode, message: &str) -> Response {
    let body = super::html::page_plain(
        "Refused",
        &format!(
            "<p class=\"refused\">{}</p><p><a href=\"/\">Back to the console</a></p>",
            super::html::esc(message)
        ),
    );
    (status, body).into_response()
}

/// The middleware in front of every console route but the login page and the assets: a
/// request without a valid token or session is sent to the login form (a page) or refused
/// with 401 (anything else); the [`Viewer`] goes into the request's extensions.
pub async fn require(
    State(state): State<std::sync::Arc<super::ConsoleState>>,
    mut request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path();
    if path == "/login" || path.starts_with("/assets/") {
        return next.run(request).await;
    }
    match state.access.viewer(request.headers()) {
        Some(viewer) => {
            request.extensions_mut().insert(viewer);
            next.run(request).await
        }
        None if request.method() == Method::GET && !path.ends_with("/output") => {
            let next_page = request
                .uri()
                .path_and_query()
                .map(|p| p.as_str().to_owned())
                .unwrap_or_else(|| "/".to_owned());
            Redirect::to(&format!(
                "/login?next={}",
                super::html::url_encode(&next_page)
            ))
            .into_response()
        }
        None => refused(
            StatusCode::UNAUTHORIZED,
            "Sign in first: this console needs a token (Authorization: Bearer, or the login form).",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> Tokens {
        Tokens {
            admin: Some("admin-token-0123456789".into()),
            read: Some("read-token-0123456789".into()),
        }
    }

    #[test]
    fn tokens_grant_their_role_and_nothing_else() {
        let t = tokens();
        assert_eq!(t.role_of("admin-token-0123456789"), Some(Role::Admin));
        assert_eq!(t.role_of("read-token-0123456789"), Some(Role::Read));
        assert_eq!(
            t.role_of("admin-token-012345678"),
            None,
            "a prefix is not the token"
        );
        assert_eq!(t.role_of(""), None);
        assert_eq!(
            Tokens::default().role_of(""),
            None,
            "no token configured: nobody signs in"
        );
    }

    #[test]
    fn a_session_acts_only_with_its_csrf_token_and_the_admin_role() {
        let access = Access::new(tokens());
        let (id, role) = access.login("admin-token-0123456789").expect("signed in");
        assert_eq!(role, Role::Admin);
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            format!("other=1; {COOKIE}={id}").parse().unwrap(),
        );
        let viewer = access.viewer(&headers).expect("the session");
        let csrf = viewer.csrf.clone().expect("a CSRF token");
        assert!(viewer.may_act(Some(&csrf)).is_ok());
        assert_eq!(
            viewer.may_act(None).unwrap_err().status(),
            StatusCode::FORBIDDEN
        );
        assert_eq!(
            viewer.may_act(Some("0000")).unwrap_err().status(),
            StatusCode::FORBIDDEN
        );
        let read = Viewer {
            role: Role::Read,
            csrf: None,
        };
        assert_eq!(
            read.may_act(None).unwrap_err().status(),
            StatusCode::FORBIDDEN,
            "read-only never acts"
        );
        access.logout(&id);
        assert!(access.viewer(&headers).is_none(), "signed out");
        assert!(access.login("wrong").is_none());
    }

    #[test]
    fn bearer_clients_need_no_csrf_token() {
        let access = Access::new(tokens());
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            "Bearer admin-token-0123456789".parse().unwrap(),
        );
        let viewer = access.viewer(&headers).expect("bearer");
        assert!(viewer.may_act(None).is_ok());
        headers.insert(header::AUTHORIZATION, "Bearer nope".parse().unwrap());
        assert!(access.viewer(&headers).is_none());
    }

    #[test]
    fn short_or_shared_tokens_are_refused_naming_the_key() {
        let server = crate::config::ServerSection {
            token: Some("short".into()),
            ..Default::default()
        };
        let home = tempfile::tempdir().unwrap();
        // The variables win over the file; this test sets none (a process-wide change would race).
        if std::env::var_os(TOKEN_ENV).is_none() && std::env::var_os(READ_TOKEN_ENV).is_none() {
            let e = Tokens::load(&server, home.path()).unwrap_err();
            assert!(e.contains("[server] token is 5 characters"), "{e}");
            let same = crate::config::ServerSection {
                token: Some("x".repeat(20)),
                read_token: Some("x".repeat(20)),
                ..Default::default()
            };
            assert!(
                Tokens::load(&same, home.path())
                    .unwrap_err()
                    .contains("are the same")
            );
            std::fs::write(home.path().join("t"), "\n").unwrap();
            let empty = crate::config::ServerSection {
                read_token_file: Some("t".into()),
                ..Default::default()
            };
            assert!(
                Tokens::load(&empty, home.path())
                    .unwrap_err()
                    .contains("read_token_file")
            );
        }
    }
}
