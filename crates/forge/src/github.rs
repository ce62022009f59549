//! [`Forge`] on GitHub's REST API through `octocrab` (rustls, no default features).
//!
//! * **Base URL** — [`GitHubConfig::api_url`]: `https://api.github.com` by default; a GitHub
//!   Enterprise server (`https://HOST/api/v3`) or a test server on loopback work the same.
//! * **Token** — from the environment (`SKILLFORGE_GITHUB_TOKEN`, else `GITHUB_TOKEN`, else
//!   `GH_TOKEN`) or `[github] token` in config; held as a secret, never logged, never on argv;
//!   the `Debug` of the config prints `<redacted>`.
//! * **Rate limits** — a 403/429 that [`rate_limit_wait`] reads as a primary or secondary limit is
//!   retried after the wait GitHub asked for, up to [`GitHubConfig::max_attempts`] attempts and as
//!   long as one wait is at most [`GitHubConfig::max_wait`]; beyond that the call fails with
//!   [`ForgeError::RateLimited`] and the caller's job retries later.
//! * **Pagination** — list calls ask for 100 per page and follow the `Link: <…>; rel="next"` header.

use std::time::Duration;

use async_trait::async_trait;
use http::{HeaderMap, StatusCode, Uri};
use octocrab::Octocrab;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tracing::{debug, warn};

use crate::ratelimit::rate_limit_wait;
use crate::{
    CheckRun, Comment, CommitStatus, Conditional, Forge, ForgeError, Issue, PullCommit,
    PullRequest, RepoRef, Review,
};

/// GitHub's public API.
pub const DEFAULT_API_URL: &str = "https://api.github.com";
/// Environment variables read for the token, in order.
pub const TOKEN_ENV: [&str; 3] = ["SKILLFORGE_GITHUB_TOKEN", "GITHUB_TOKEN", "GH_TOKEN"];
/// Environment variable overriding the API base URL.
pub const API_URL_ENV: &str = "SKILLFORGE_GITHUB_API_URL";

/// How to reach GitHub.
#[derive(Clone)]
pub struct GitHubConfig {
    /// REST base URL without a trailing slash (default [`DEFAULT_API_URL`]).
    pub api_url: String,
    /// Personal or installation token; `None` = anonymous (reads of public repositories only).
    pub token: Option<String>,
    /// Attempts per call when rate limited (default 5).
    pub max_attempts: u32,
    /// The longest single wait honoured in-process (default 15 min); a longer one fails the call.
    pub max_wait: Duration,
}

impl std::fmt::Debug for GitHubConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitHubConfig")
            .field("api_url", &self.api_url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("max_attempts", &self.max_attempts)
            .field("max_wait", &self.max_wait)
            .finish()
    }
}

impl GitHubConfig {
    /// The configuration from the environment, falling back to config-file values: API URL from
    /// [`API_URL_ENV`], else `config_api_url`, else [`DEFAULT_API_URL`]; token from [`TOKEN_ENV`],
    /// else `config_token`. Empty values count as unset.
    pub fn resolve(config_api_url: Option<&str>, config_token: Option<&str>) -> GitHubConfig {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let api_url = env(API_URL_ENV)
            .or_else(|| {
                config_api_url
                    .filter(|u| !u.trim().is_empty())
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| DEFAULT_API_URL.to_owned());
        let token = TOKEN_ENV.iter().find_map(|name| env(name)).or_else(|| {
            config_token
                .filter(|t| !t.trim().is_empty())
                .map(str::to_owned)
        });
        GitHubConfig {
            api_url: api_url.trim().trim_end_matches('/').to_owned(),
            token: token.map(|t| t.trim().to_owned()),
            max_attempts: 5,
            max_wait: Duration::from_secs(15 * 60),
        }
    }
}

/// The web address of the GitHub whose REST API is at `api_url`: `https://api.github.com` →
/// `https://github.com`; a GitHub Enterprise server's `https://HOST/api/v3` → `https://HOST`
/// (GitHub Enterprise Server docs, "REST API endpoints": the API lives under `/api/v3` of the web
/// host); any other base URL (a test server) is its own web address.
pub fn web_url_for(api_url: &str) -> String {
    let api = api_url.trim().trim_end_matches('/');
    if let Some(rest) = api.strip_prefix("https://api.") {
        return format!("https://{rest}");
    }
    api.strip_suffix("/api/v3").unwrap_or(api).to_owned()
}

/// The GitHub forge.
#[derive(Clone)]
pub struct GitHub {
    client: Octocrab,
    api_url: String,
    max_attempts: u32,
    max_wait: Duration,
}

impl std::fmt::Debug for GitHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitHub")
            .field("api_url", &self.api_url)
            .finish_non_exhaustive()
    }
}

/// One raw answer.
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

#[derive(Clone, Copy)]
enum Method {
    Get,
    Post,
    Patch,
}

impl Method {
    fn name(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Patch => "PATCH",
        }
    }
}

impl GitHub {
    /// A client for `config`.
    ///
    /// # Errors
    /// [`ForgeError::Config`] when the base URL does not parse or the TLS setup fails.
    pub fn new(config: &GitHubConfig) -> Result<GitHub, ForgeError> {
        let api_url = config.api_url.trim_end_matches('/').to_owned();
        let uri: Uri = api_url.parse().map_err(|e| {
            ForgeError::Config(format!("GitHub API URL `{api_url}` does not parse: {e}"))
        })?;
        let mut builder = Octocrab::builder()
            .base_uri(uri)
            .map_err(|e| ForgeError::Config(format!("GitHub API URL `{api_url}`: {e}")))?;
        if let Some(token) = &config.token {
            builder = builder.personal_token(token.clone());
        }
        let client = builder
            .build()
            .map_err(|e| ForgeError::Config(format!("set up the GitHub client: {e}")))?;
        Ok(GitHub {
            client,
            api_url,
            max_attempts: config.max_attempts.max(1),
            max_wait: config.max_wait,
        })
    }

    /// The base URL calls go to.
    pub fn api_url(&self) -> &str {
        &self.api_url
    }

    /// The web address of this GitHub ([`web_url_for`]).
    pub fn web_url(&self) -> String {
        web_url_for(&self.api_url)
    }

    /// `issue` with its web address filled in when the server left `html_url` out.
    fn with_html_url(&self, repo: &RepoRef, mut issue: Issue) -> Issue {
        if issue.html_url.is_empty() {
            issue.html_url = format!("{}/{repo}/issues/{}", self.web_url(), issue.number);
        }
        issue
    }

    fn absolute(&self, path_or_url: &str) -> String {
        if path_or_url.starts_with("http://") || path_or_url.starts_with("https://") {
            path_or_url.to_owned()
        } else {
            format!("{}{path_or_url}", self.api_url)
        }
    }

    /// Sends one request, waiting out rate limits; any other status is returned as is.
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        headers: Option<HeaderMap>,
    ) -> Result<Answer, ForgeError> {
        let url = self.absolute(path);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let response = match method {
                Method::Get => {
                    self.client
                        ._get_with_headers(url.as_str(), headers.clone())
                        .await
                }
                Method::Post => self.client._post(url.as_str(), body).await,
                Method::Patch => self.client._patch(url.as_str(), body).await,
            }
            .map_err(|e| ForgeError::Transport(format!("{} {path}: {e}", method.name())))?;
            let status = response.status();
            let response_headers = response.headers().clone();
            let text = self.client.body_to_string(response).await.map_err(|e| {
                ForgeError::Transport(format!("{} {path}: read the response: {e}", method.name()))
            })?;
            let now = chrono::Utc::now().timestamp().max(0) as u64;
            match rate_limit_wait(status, &response_headers, &text, attempt, now) {
                Some(wait) if attempt < self.max_attempts && wait <= self.max_wait => {
                    warn!(
                        method = method.name(),
                        path,
                        status = status.as_u16(),
                        wait_secs = wait.as_secs(),
                        attempt,
                        "GitHub rate limit: waiting"
                    );
                    tokio::time::sleep(wait).await;
                }
                Some(wait) => {
                    return Err(ForgeError::RateLimited {
                        method: method.name(),
                        path: path.to_owned(),
                        wait_secs: wait.as_secs(),
                    });
                }
                None => {
                    debug!(
                        method = method.name(),
                        path,
                        status = status.as_u16(),
                        "GitHub answered"
                    );
                    return Ok(Answer {
                        status,
                        headers: response_headers,
                        body: text,
                    });
                }
            }
        }
    }

    fn http_error(method: Method, path: &str, answer: &Answer) -> ForgeError {
        let message = serde_json::from_str::<Value>(&answer.body)
            .ok()
            .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_else(|| answer.body.chars().take(200).collect());
        ForgeError::Http {
            method: method.name(),
            path: path.to_owned(),
            status: answer.status.as_u16(),
            message,
        }
    }

    fn decode<T: DeserializeOwned>(
        method: Method,
        path: &str,
        answer: &Answer,
    ) -> Result<T, ForgeError> {
        serde_json::from_str(&answer.body).map_err(|e| {
            ForgeError::Transport(format!(
                "{} {path}: unexpected response body: {e}",
                method.name()
            ))
        })
    }

    /// A call that must succeed (2xx) and return `T`.
    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<T, ForgeError> {
        let answer = self.send(method, path, body, None).await?;
        if !answer.status.is_success() {
            return Err(Self::http_error(method, path, &answer));
        }
        Self::decode(method, path, &answer)
    }

    /// Every page of a list, following `Link: rel="next"`. `pick` takes the items out of a page
    /// body (a bare array, or a field of an object as the check-runs API has).
    async fn all_pages<T: DeserializeOwned>(
        &self,
        path: &str,
        pick: fn(Value) -> Value,
    ) -> Result<Vec<T>, ForgeError> {
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut next = Some(format!("{path}{sep}per_page=100"));
        let mut out = Vec::new();
        while let Some(page) = next.take() {
            let answer = self.send(Method::Get, &page, None, None).await?;
            if !answer.status.is_success() {
                return Err(Self::http_error(Method::Get, path, &answer));
            }
            let value: Value = Self::decode(Method::Get, path, &answer)?;
            let items: Vec<T> = serde_json::from_value(pick(value))
                .map_err(|e| ForgeError::Transport(format!("GET {path}: unexpected page: {e}")))?;
            out.extend(items);
            next = answer
                .headers
                .get("link")
                .and_then(|v| v.to_str().ok())
                .and_then(next_link);
        }
        Ok(out)
    }
}

/// The `rel="next"` target of a `Link` header (RFC 8288, as GitHub writes it).
pub fn next_link(header: &str) -> Option<String> {
    header.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        let is_next = params
            .split(';')
            .any(|p| p.trim().replace(' ', "") == "rel=\"next\"");
        is_next.then(|| {
            target
                .trim()
                .trim_start_matches('<')
                .trim_end_matches('>')
                .to_owned()
        })
    })
}

fn whole(value: Value) -> Value {
    value
}

#[async_trait]
impl Forge for GitHub {
    async fn create_issue(
        &self,
        repo: &RepoRef,
        title: &str,
        body: &str,
    ) -> Result<Issue, ForgeError> {
        let issue = self
            .call(
                Method::Post,
                &format!("/repos/{repo}/issues"),
                Some(&json!({"title": title, "body": body})),
            )
            .await?;
        Ok(self.with_html_url(repo, issue))
    }

    async fn find_issues(&self, repo: &RepoRef, needle: &str) -> Result<Vec<Issue>, ForgeError> {
        let issues: Vec<Issue> = self
            .all_pages(&format!("/repos/{repo}/issues?state=all"), whole)
            .await?;
        Ok(issues
            .into_iter()
            .filter(|i| i.body.contains(needle))
            .map(|i| self.with_html_url(repo, i))
            .collect())
    }

    async fn get_issue(&self, repo: &RepoRef, number: u64) -> Result<Issue, ForgeError> {
        let issue = self
            .call(Method::Get, &format!("/repos/{repo}/issues/{number}"), None)
            .await?;
        Ok(self.with_html_url(repo, issue))
    }

    async fn list_comments(&self, repo: &RepoRef, number: u64) -> Result<Vec<Comment>, ForgeError> {
        self.all_pages(&format!("/repos/{repo}/issues/{number}/comments"), whole)
            .await
    }

    async fn get_comment(
        &self,
        repo: &RepoRef,
        comment_id: u64,
    ) -> Result<Option<Comment>, ForgeError> {
        let path = format!("/repos/{repo}/issues/comments/{comment_id}");
        let answer = self.send(Method::Get, &path, None, None).await?;
        match answer.status {
            StatusCode::NOT_FOUND => Ok(None),
            s if s.is_success() => Self::decode(Method::Get, &path, &answer).map(Some),
            _ => Err(Self::http_error(Method::Get, &path, &answer)),
        }
    }

    async fn create_comment(
        &self,
        repo: &RepoRef,
        number: u64,
        body: &str,
    ) -> Result<Comment, ForgeError> {
        self.call(
            Method::Post,
            &format!("/repos/{repo}/issues/{number}/comments"),
            Some(&json!({"body": body})),
        )
        .await
    }

    async fn update_comment(
        &self,
        repo: &RepoRef,
        comment_id: u64,
        body: &str,
    ) -> Result<Comment, ForgeError> {
        self.call(
            Method::Patch,
            &format!("/repos/{repo}/issues/comments/{comment_id}"),
            Some(&json!({"body": body})),
        )
        .await
    }

    async fn get_pull(&self, repo: &RepoRef, number: u64) -> Result<PullRequest, ForgeError> {
        self.call(Method::Get, &format!("/repos/{repo}/pulls/{number}"), None)
            .await
    }

    async fn list_recent_pulls(
        &self,
        repo: &RepoRef,
        etag: Option<&str>,
    ) -> Result<Conditional<Vec<PullRequest>>, ForgeError> {
        let path =
            format!("/repos/{repo}/pulls?state=all&sort=updated&direction=desc&per_page=100");
        let mut headers = HeaderMap::new();
        if let Some(tag) = etag {
            let value = tag
                .parse()
                .map_err(|_| ForgeError::Config(format!("ETag `{tag}` is not a header value")))?;
            headers.insert(http::header::IF_NONE_MATCH, value);
        }
        let answer = self.send(Method::Get, &path, None, Some(headers)).await?;
        if answer.status == StatusCode::NOT_MODIFIED {
            return Ok(Conditional::NotModified);
        }
        if !answer.status.is_success() {
            return Err(Self::http_error(Method::Get, &path, &answer));
        }
        let etag = answer
            .headers
            .get(http::header::ETAG)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        Ok(Conditional::Modified {
            value: Self::decode(Method::Get, &path, &answer)?,
            etag,
        })
    }

    async fn list_reviews(&self, repo: &RepoRef, number: u64) -> Result<Vec<Review>, ForgeError> {
        self.all_pages(&format!("/repos/{repo}/pulls/{number}/reviews"), whole)
            .await
    }

    async fn list_pull_commits(
        &self,
        repo: &RepoRef,
        number: u64,
    ) -> Result<Vec<PullCommit>, ForgeError> {
        self.all_pages(&format!("/repos/{repo}/pulls/{number}/commits"), whole)
            .await
    }

    async fn commit_statuses(
        &self,
        repo: &RepoRef,
        sha: &str,
    ) -> Result<Vec<CommitStatus>, ForgeError> {
        let value: Value = self
            .call(
                Method::Get,
                &format!("/repos/{repo}/commits/{sha}/status"),
                None,
            )
            .await?;
        serde_json::from_value(
            value
                .get("statuses")
                .cloned()
                .unwrap_or(Value::Array(Vec::new())),
        )
        .map_err(|e| {
            ForgeError::Transport(format!(
                "GET /repos/{repo}/commits/{sha}/status: unexpected body: {e}"
            ))
        })
    }

    async fn check_runs(&self, repo: &RepoRef, sha: &str) -> Result<Vec<CheckRun>, ForgeError> {
        self.all_pages(&format!("/repos/{repo}/commits/{sha}/check-runs"), |v| {
            v.get("check_runs")
                .cloned()
                .unwrap_or(Value::Array(Vec::new()))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_headers() {
        let h = r#"<https://api.github.com/repositories/1/issues/2/comments?page=2>; rel="next", <https://api.github.com/repositories/1/issues/2/comments?page=5>; rel="last""#;
        assert_eq!(
            next_link(h).as_deref(),
            Some("https://api.github.com/repositories/1/issues/2/comments?page=2")
        );
        assert_eq!(
            next_link(r#"<https://x/y?page=1>; rel="prev", <https://x/y?page=1>; rel="first""#),
            None
        );
        assert_eq!(next_link(""), None);
    }

    #[test]
    fn web_urls_of_github_com_and_enterprise() {
        let table = [
            ("https://api.github.com", "https://github.com"),
            ("https://api.github.com/", "https://github.com"),
            ("https://ghe.example.com/api/v3", "https://ghe.example.com"),
            ("https://ghe.example.com/api/v3/", "https://ghe.example.com"),
            ("http://127.0.0.1:4000", "http://127.0.0.1:4000"),
        ];
        for (api, web) in table {
            assert_eq!(web_url_for(api), web, "{api}");
        }
    }

    #[test]
    fn debug_never_shows_the_token() {
        let config = GitHubConfig {
            token: Some("ghp_secret123".into()),
            ..GitHubConfig::resolve(Some("http://127.0.0.1:1"), None)
        };
        assert!(!format!("{config:?}").contains("ghp_secret123"));
    }
}
