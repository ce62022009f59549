//! A fake GitHub REST API on loopback for the forge tests: the one stand-in the brief allows (GitHub
//! cannot run here). It answers the routes skillforge calls with bodies shaped like GitHub's
//! documented REST responses (issues, issue comments with `Link`-header pagination, pulls, reviews,
//! a pull's commits, combined status, check runs) and lets a test inject what GitHub does: a 403 secondary rate
//! limit with `retry-after`, a deleted comment (404), an edited comment, `ETag`/304.
//!
//! Web addresses (`html_url`) are GitHub's own shape (`https://github.com/o/r/issues/N#issuecomment-ID`),
//! as a real server returns them; API addresses (`Link`) point at this server.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

/// What the fake holds; tests read and change it through [`FakeGitHub::state`].
#[derive(Debug, Default)]
pub struct FakeState {
    /// `owner/repo` → number → issue (PRs included, as in GitHub's issues API).
    pub issues: BTreeMap<String, BTreeMap<u64, FakeIssue>>,
    /// Comment id → comment.
    pub comments: BTreeMap<u64, FakeComment>,
    /// `owner/repo` → PR number → pull JSON (as returned by `GET /pulls/N`).
    pub pulls: BTreeMap<String, BTreeMap<u64, Value>>,
    /// `owner/repo#N` → reviews JSON.
    pub reviews: BTreeMap<String, Vec<Value>>,
    /// `owner/repo@sha` → statuses JSON.
    pub statuses: BTreeMap<String, Vec<Value>>,
    /// `owner/repo@sha` → check runs JSON.
    pub check_runs: BTreeMap<String, Vec<Value>>,
    /// `owner/repo#N` → the PR's commits JSON, oldest first (`GET /pulls/{n}/commits`).
    pub pull_commits: BTreeMap<String, Vec<Value>>,
    /// The next this many requests get a 403 secondary rate limit with `retry-after: 1`.
    pub rate_limit_next: u32,
    /// Every request seen: (method, path with query, whether authorized with the expected token).
    pub requests: Vec<(String, String, bool)>,
    /// The next this many issue/comment creations are made but answered 502, as when GitHub
    /// wrote and the answer was lost on the way back.
    pub lose_write_answers: u32,
    /// 304 answers given to conditional (`If-None-Match`) requests.
    pub not_modified: usize,
    /// Items per page of list calls (GitHub's default is 30; small here to force pagination).
    pub page_size: usize,
    next_id: u64,
}

/// One issue or PR.
#[derive(Debug, Clone)]
pub struct FakeIssue {
    /// Title.
    pub title: String,
    /// Body.
    pub body: String,
    /// Comment ids in order.
    pub comments: Vec<u64>,
}

/// One comment.
#[derive(Debug, Clone)]
pub struct FakeComment {
    /// `owner/repo`.
    pub repo: String,
    /// Issue number.
    pub number: u64,
    /// Author login.
    pub login: String,
    /// Body.
    pub body: String,
    /// Edited at least once.
    pub edited: bool,
}

/// A running fake server (stops when dropped with its runtime thread).
pub struct FakeGitHub {
    /// `http://127.0.0.1:PORT` — the API base URL.
    pub url: String,
    /// The server's state.
    pub state: Arc<Mutex<FakeState>>,
    token: String,
    _runtime: tokio::runtime::Runtime,
}

impl FakeState {
    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Opens an issue in `repo` (as a person would), returns its number.
    pub fn add_issue(&mut self, repo: &str, title: &str, body: &str) -> u64 {
        let issues = self.issues.entry(repo.to_owned()).or_default();
        let number = issues.keys().last().copied().unwrap_or(0) + 1;
        issues.insert(
            number,
            FakeIssue {
                title: title.into(),
                body: body.into(),
                comments: Vec::new(),
            },
        );
        number
    }

    /// Comments on `repo#number` as `login`, returns the comment id.
    pub fn add_comment(&mut self, repo: &str, number: u64, login: &str, body: &str) -> u64 {
        let id = self.id();
        self.comments.insert(
            id,
            FakeComment {
                repo: repo.into(),
                number,
                login: login.into(),
                body: body.into(),
                edited: false,
            },
        );
        self.issues
            .entry(repo.to_owned())
            .or_default()
            .entry(number)
            .or_insert_with(|| FakeIssue {
                title: String::new(),
                body: String::new(),
                comments: Vec::new(),
            })
            .comments
            .push(id);
        id
    }

    /// Edits comment `id`.
    pub fn edit_comment(&mut self, id: u64, body: &str) {
        let c = self.comments.get_mut(&id).expect("comment exists");
        c.body = body.into();
        c.edited = true;
    }

    /// Deletes comment `id`.
    pub fn delete_comment(&mut self, id: u64) {
        if let Some(c) = self.comments.remove(&id) {
            if let Some(issue) = self
                .issues
                .get_mut(&c.repo)
                .and_then(|m| m.get_mut(&c.number))
            {
                issue.comments.retain(|x| *x != id);
            }
        }
    }

    /// Adds (or replaces) pull request `repo#number` shaped as `GET /repos/{o}/{r}/pulls/{n}`
    /// answers it: open, or merged (`merge_sha`: `Some`) into `main`, with `body` and head `head_sha`.
    /// `updated_at` moves with every call, as GitHub's does on any change.
    pub fn add_pull(
        &mut self,
        repo: &str,
        number: u64,
        body: &str,
        head_sha: &str,
        merge_sha: Option<&str>,
    ) {
        let stamp = format!(
            "2026-12-01T12:{:02}:{:02}Z",
            (self.next_id / 60) % 60,
            self.next_id % 60
        );
        self.id();
        let merged = merge_sha.is_some();
        let pull = json!({
            "url": format!("/repos/{repo}/pulls/{number}"),
            "id": number * 10_000,
            "node_id": format!("PR_{number}"),
            "html_url": format!("https://github.com/{repo}/pull/{number}"),
            "number": number,
            "state": if merged { "closed" } else { "open" },
            "locked": false,
            "title": format!("change {number}"),
            "user": {"login": "skillforge-bot", "id": 1, "type": "User"},
            "body": body,
            "created_at": "2026-12-01T09:00:00Z",
            "updated_at": stamp,
            "closed_at": if merged { json!(stamp) } else { Value::Null },
            "merged_at": if merged { json!(stamp) } else { Value::Null },
            "merge_commit_sha": merge_sha,
            "draft": false,
            "head": {"label": format!("acme:change-{number}"), "ref": format!("change-{number}"), "sha": head_sha},
            "base": {"label": "acme:main", "ref": "main", "sha": "base0"},
        });
        self.pulls
            .entry(repo.to_owned())
            .or_default()
            .insert(number, pull);
    }

    /// Adds a review of `repo#number` (`state`: `APPROVED`, `CHANGES_REQUESTED`, `COMMENTED`) and
    /// touches the PR's `updated_at`, as GitHub does.
    pub fn add_review(
        &mut self,
        repo: &str,
        number: u64,
        review_id: u64,
        state: &str,
        login: &str,
    ) {
        self.reviews.entry(format!("{repo}#{number}")).or_default().push(json!({
            "id": review_id,
            "node_id": format!("PRR_{review_id}"),
            "user": {"login": login, "id": 2000, "type": "User"},
            "body": "",
            "state": state,
            "html_url": format!("https://github.com/{repo}/pull/{number}#pullrequestreview-{review_id}"),
            "pull_request_url": format!("/repos/{repo}/pulls/{number}"),
            "submitted_at": "2026-12-01T11:00:00Z",
            "commit_id": "h0",
        }));
        let stamp = format!(
            "2026-12-01T13:{:02}:{:02}Z",
            (self.next_id / 60) % 60,
            self.next_id % 60
        );
        self.id();
        if let Some(pull) = self.pulls.get_mut(repo).and_then(|m| m.get_mut(&number)) {
            pull["updated_at"] = json!(stamp);
        }
    }

    /// Appends a commit to pull request `repo#number`, shaped as an item of GitHub's
    /// `GET /repos/{o}/{r}/pulls/{n}/commits` (oldest first, as GitHub lists them).
    pub fn add_pull_commit(&mut self, repo: &str, number: u64, sha: &str, message: &str) {
        let commits = self
            .pull_commits
            .entry(format!("{repo}#{number}"))
            .or_default();
        let parent = commits
            .last()
            .and_then(|c| c["sha"].as_str())
            .unwrap_or("base0")
            .to_owned();
        let person = json!({"name": "skillforge-bot", "email": "bot@example.com", "date": "2026-12-01T10:00:00Z"});
        let user = json!({"login": "skillforge-bot", "id": 1, "type": "User"});
        commits.push(json!({
            "url": format!("/repos/{repo}/commits/{sha}"),
            "sha": sha,
            "node_id": format!("C_{sha}"),
            "html_url": format!("https://github.com/{repo}/commit/{sha}"),
            "comments_url": format!("/repos/{repo}/commits/{sha}/comments"),
            "commit": {
                "url": format!("/repos/{repo}/git/commits/{sha}"),
                "author": person,
                "committer": person,
                "message": message,
                "tree": {"url": format!("/repos/{repo}/git/trees/t{sha}"), "sha": format!("t{sha}")},
                "comment_count": 0,
                "verification": {"verified": false, "reason": "unsigned", "signature": null, "payload": null, "verified_at": null},
            },
            "author": user,
            "committer": user,
            "parents": [{"url": format!("/repos/{repo}/commits/{parent}"), "sha": parent, "html_url": format!("https://github.com/{repo}/commit/{parent}")}],
        }));
    }

    /// Adds a commit status at `repo@sha`.
    pub fn add_status(&mut self, repo: &str, sha: &str, context: &str, state: &str) {
        self.statuses
            .entry(format!("{repo}@{sha}"))
            .or_default()
            .push(json!({
                "url": format!("/repos/{repo}/statuses/{sha}"),
                "id": 1,
                "state": state,
                "description": format!("{context}: {state}"),
                "target_url": null,
                "context": context,
                "created_at": "2026-12-01T10:00:00Z",
                "updated_at": "2026-12-01T10:00:00Z",
            }));
    }

    /// Requests made with `method` whose path starts with `prefix`.
    pub fn count(&self, method: &str, prefix: &str) -> usize {
        self.requests
            .iter()
            .filter(|(m, p, _)| m == method && p.starts_with(prefix))
            .count()
    }
}

fn comment_json(id: u64, c: &FakeComment) -> Value {
    let stamp = "2026-12-01T10:00:00Z";
    json!({
        "id": id,
        "node_id": format!("IC_{id}"),
        "url": format!("/repos/{}/issues/comments/{id}", c.repo),
        "html_url": format!("https://github.com/{}/issues/{}#issuecomment-{id}", c.repo, c.number),
        "issue_url": format!("/repos/{}/issues/{}", c.repo, c.number),
        "body": c.body,
        "user": {"login": c.login, "id": 1000, "type": "User"},
        "created_at": stamp,
        "updated_at": if c.edited { "2026-12-01T11:00:00Z" } else { stamp },
        "author_association": "CONTRIBUTOR",
    })
}

fn issue_json(repo: &str, number: u64, issue: &FakeIssue) -> Value {
    json!({
        "id": number * 1000,
        "number": number,
        "title": issue.title,
        "body": issue.body,
        "state": "open",
        "html_url": format!("https://github.com/{repo}/issues/{number}"),
        "url": format!("/repos/{repo}/issues/{number}"),
        "comments": issue.comments.len(),
        "user": {"login": "skillforge-bot", "id": 1, "type": "User"},
        "labels": [],
        "created_at": "2026-12-01T09:00:00Z",
        "updated_at": "2026-12-01T09:00:00Z",
    })
}

type Shared = (Arc<Mutex<FakeState>>, String, String);

fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(json!({"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})),
    )
        .into_response()
}

fn bad_gateway() -> Response {
    (
        StatusCode::BAD_GATEWAY,
        Json(json!({"message": "Server Error"})),
    )
        .into_response()
}

/// One page of `items` with GitHub's `Link` header.
fn paged(
    base: &str,
    path: &str,
    query: &BTreeMap<String, String>,
    size: usize,
    items: Vec<Value>,
) -> Response {
    let size = query
        .get("per_page")
        .and_then(|p| p.parse::<usize>().ok())
        .unwrap_or(30)
        .min(size)
        .max(1);
    let page = query
        .get("page")
        .and_then(|p| p.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    let last = items.len().div_ceil(size).max(1);
    let body: Vec<Value> = items
        .into_iter()
        .skip((page - 1) * size)
        .take(size)
        .collect();
    let mut headers = HeaderMap::new();
    let mut links = Vec::new();
    let mut rest: Vec<String> = query
        .iter()
        .filter(|(k, _)| k.as_str() != "page")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    rest.sort();
    let link =
        |p: usize, rel: &str| format!("<{base}{path}?{}&page={p}>; rel=\"{rel}\"", rest.join("&"));
    if page < last {
        links.push(link(page + 1, "next"));
        links.push(link(last, "last"));
    }
    if page > 1 {
        links.push(link(1, "first"));
        links.push(link(page - 1, "prev"));
    }
    if !links.is_empty() {
        headers.insert(
            "link",
            HeaderValue::from_str(&links.join(", ")).expect("ascii"),
        );
    }
    (StatusCode::OK, headers, Json(Value::Array(body))).into_response()
}

/// Records the request and answers the injected rate limit, if any.
fn gate(shared: &Shared, method: &str, uri: &str, headers: &HeaderMap) -> Option<Response> {
    let mut s = shared.0.lock().expect("fake state");
    let authorized = headers.get("authorization").and_then(|v| v.to_str().ok())
        == Some(&format!("Bearer {}", shared.2));
    s.requests
        .push((method.to_owned(), uri.to_owned(), authorized));
    if s.rate_limit_next > 0 {
        s.rate_limit_next -= 1;
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("1"));
        let body = json!({"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
            "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"});
        return Some((StatusCode::FORBIDDEN, h, Json(body)).into_response());
    }
    None
}

fn uri_of(path: &str, query: &BTreeMap<String, String>) -> String {
    if query.is_empty() {
        path.to_owned()
    } else {
        format!(
            "{path}?{}",
            query
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("&")
        )
    }
}

async fn issues(
    State(shared): State<Shared>,
    Path((owner, name)): Path<(String, String)>,
    Query(q): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
    body: Option<Json<Value>>,
) -> Response {
    let repo = format!("{owner}/{name}");
    let path = format!("/repos/{repo}/issues");
    let method = if body.is_some() { "POST" } else { "GET" };
    if let Some(r) = gate(&shared, method, &uri_of(&path, &q), &headers) {
        return r;
    }
    let mut s = shared.0.lock().expect("fake state");
    if let Some(Json(body)) = body {
        let title = body
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let text = body.get("body").and_then(Value::as_str).unwrap_or_default();
        let number = s.add_issue(&repo, title, text);
        if s.lose_write_answers > 0 {
            s.lose_write_answers -= 1;
            return bad_gateway();
        }
        let issue = s.issues[&repo][&number].clone();
        return (StatusCode::CREATED, Json(issue_json(&repo, number, &issue))).into_response();
    }
    let items: Vec<Value> = s
        .issues
        .get(&repo)
        .map(|m| {
            m.iter()
                .rev()
                .map(|(n, i)| issue_json(&repo, *n, i))
                .collect()
        })
        .unwrap_or_default();
    let size = s.page_size;
    paged(&shared.1, &path, &q, size, items)
}

async fn issue(
    State(shared): State<Shared>,
    Path((owner, name, number)): Path<(String, String, u64)>,
    headers: HeaderMap,
) -> Response {
    let repo = format!("{owner}/{name}");
    if let Some(r) = gate(
        &shared,
        "GET",
        &format!("/repos/{repo}/issues/{number}"),
        &headers,
    ) {
        return r;
    }
    let s = shared.0.lock().expect("fake state");
    match s.issues.get(&repo).and_then(|m| m.get(&number)) {
        Some(i) => Json(issue_json(&repo, number, i)).into_response(),
        None => not_found(),
    }
}

async fn issue_comments(
    State(shared): State<Shared>,
    Path((owner, name, number)): Path<(String, String, u64)>,
    Query(q): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
    body: Option<Json<Value>>,
) -> Response {
    let repo = format!("{owner}/{name}");
    let path = format!("/repos/{repo}/issues/{number}/comments");
    let method = if body.is_some() { "POST" } else { "GET" };
    if let Some(r) = gate(&shared, method, &uri_of(&path, &q), &headers) {
        return r;
    }
    let mut s = shared.0.lock().expect("fake state");
    if !s.issues.get(&repo).is_some_and(|m| m.contains_key(&number)) {
        return not_found();
    }
    if let Some(Json(body)) = body {
        let text = body
            .get("body")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let id = s.add_comment(&repo, number, "skillforge-bot", &text);
        if s.lose_write_answers > 0 {
            s.lose_write_answers -= 1;
            return bad_gateway();
        }
        let c = s.comments[&id].clone();
        return (StatusCode::CREATED, Json(comment_json(id, &c))).into_response();
    }
    let items = s.issues[&repo][&number]
        .comments
        .iter()
        .filter_map(|id| s.comments.get(id).map(|c| comment_json(*id, c)))
        .collect();
    let size = s.page_size;
    paged(&shared.1, &path, &q, size, items)
}

async fn comment(
    State(shared): State<Shared>,
    Path((owner, name, id)): Path<(String, String, u64)>,
    headers: HeaderMap,
    body: Option<Json<Value>>,
) -> Response {
    let repo = format!("{owner}/{name}");
    let method = if body.is_some() { "PATCH" } else { "GET" };
    if let Some(r) = gate(
        &shared,
        method,
        &format!("/repos/{repo}/issues/comments/{id}"),
        &headers,
    ) {
        return r;
    }
    let mut s = shared.0.lock().expect("fake state");
    if !s.comments.get(&id).is_some_and(|c| c.repo == repo) {
        return not_found();
    }
    if let Some(Json(body)) = body {
        let text = body
            .get("body")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        s.edit_comment(id, &text);
    }
    Json(comment_json(id, &s.comments[&id])).into_response()
}

async fn pulls(
    State(shared): State<Shared>,
    Path((owner, name)): Path<(String, String)>,
    Query(q): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let repo = format!("{owner}/{name}");
    if let Some(r) = gate(
        &shared,
        "GET",
        &uri_of(&format!("/repos/{repo}/pulls"), &q),
        &headers,
    ) {
        return r;
    }
    let mut s = shared.0.lock().expect("fake state");
    let wanted = q.get("state").map_or("open", String::as_str).to_owned();
    let items: Vec<Value> = s
        .pulls
        .get(&repo)
        .map(|m| {
            m.values()
                .rev()
                .filter(|p| wanted == "all" || p["state"] == wanted.as_str())
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    // A strong validator of the whole answer, as GitHub's: any change to any PR changes it.
    let etag = {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        Value::Array(items.clone()).to_string().hash(&mut hasher);
        format!("\"{:016x}\"", hasher.finish())
    };
    if headers.get("if-none-match").and_then(|v| v.to_str().ok()) == Some(etag.as_str()) {
        s.not_modified += 1;
        return StatusCode::NOT_MODIFIED.into_response();
    }
    let mut h = HeaderMap::new();
    h.insert("etag", HeaderValue::from_str(&etag).expect("ascii"));
    (StatusCode::OK, h, Json(Value::Array(items))).into_response()
}

async fn pull(
    State(shared): State<Shared>,
    Path((owner, name, number)): Path<(String, String, u64)>,
    headers: HeaderMap,
) -> Response {
    let repo = format!("{owner}/{name}");
    if let Some(r) = gate(
        &shared,
        "GET",
        &format!("/repos/{repo}/pulls/{number}"),
        &headers,
    ) {
        return r;
    }
    let s = shared.0.lock().expect("fake state");
    s.pulls
        .get(&repo)
        .and_then(|m| m.get(&number))
        .map_or_else(not_found, |p| Json(p.clone()).into_response())
}

async fn reviews(
    State(shared): State<Shared>,
    Path((owner, name, number)): Path<(String, String, u64)>,
    Query(q): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let repo = format!("{owner}/{name}");
    let path = format!("/repos/{repo}/pulls/{number}/reviews");
    if let Some(r) = gate(&shared, "GET", &uri_of(&path, &q), &headers) {
        return r;
    }
    let s = shared.0.lock().expect("fake state");
    let items = s
        .reviews
        .get(&format!("{repo}#{number}"))
        .cloned()
        .unwrap_or_default();
    paged(&shared.1, &path, &q, s.page_size, items)
}

async fn pull_commits(
    State(shared): State<Shared>,
    Path((owner, name, number)): Path<(String, String, u64)>,
    Query(q): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let repo = format!("{owner}/{name}");
    let path = format!("/repos/{repo}/pulls/{number}/commits");
    if let Some(r) = gate(&shared, "GET", &uri_of(&path, &q), &headers) {
        return r;
    }
    let s = shared.0.lock().expect("fake state");
    if !s.pulls.get(&repo).is_some_and(|m| m.contains_key(&number)) {
        return not_found();
    }
    let items = s
        .pull_commits
        .get(&format!("{repo}#{number}"))
        .cloned()
        .unwrap_or_default();
    paged(&shared.1, &path, &q, s.page_size, items)
}

async fn status(
    State(shared): State<Shared>,
    Path((owner, name, sha)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let repo = format!("{owner}/{name}");
    if let Some(r) = gate(
        &shared,
        "GET",
        &format!("/repos/{repo}/commits/{sha}/status"),
        &headers,
    ) {
        return r;
    }
    let s = shared.0.lock().expect("fake state");
    let statuses = s
        .statuses
        .get(&format!("{repo}@{sha}"))
        .cloned()
        .unwrap_or_default();
    let state = if statuses.is_empty() {
        "pending"
    } else if statuses.iter().all(|v| v["state"] == "success") {
        "success"
    } else {
        "failure"
    };
    Json(json!({"state": state, "sha": sha, "total_count": statuses.len(), "statuses": statuses}))
        .into_response()
}

async fn check_runs(
    State(shared): State<Shared>,
    Path((owner, name, sha)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let repo = format!("{owner}/{name}");
    if let Some(r) = gate(
        &shared,
        "GET",
        &format!("/repos/{repo}/commits/{sha}/check-runs"),
        &headers,
    ) {
        return r;
    }
    let s = shared.0.lock().expect("fake state");
    let runs = s
        .check_runs
        .get(&format!("{repo}@{sha}"))
        .cloned()
        .unwrap_or_default();
    Json(json!({"total_count": runs.len(), "check_runs": runs})).into_response()
}

impl FakeGitHub {
    /// Starts the server on a free loopback port; requests authorized with `Bearer <token>` are
    /// marked so in [`FakeState::requests`].
    ///
    /// # Panics
    /// When the runtime or the listener cannot start.
    pub fn start(token: &str) -> FakeGitHub {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind loopback");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let state = Arc::new(Mutex::new(FakeState {
            page_size: 2,
            ..Default::default()
        }));
        let shared: Shared = (state.clone(), url.clone(), token.to_owned());
        let app = axum::Router::new()
            .route("/repos/{owner}/{name}/issues", get(issues).post(issues))
            .route("/repos/{owner}/{name}/issues/{number}", get(issue))
            .route(
                "/repos/{owner}/{name}/issues/{number}/comments",
                get(issue_comments).post(issue_comments),
            )
            .route(
                "/repos/{owner}/{name}/issues/comments/{id}",
                get(comment).patch(comment),
            )
            .route("/repos/{owner}/{name}/pulls", get(pulls))
            .route("/repos/{owner}/{name}/pulls/{number}", get(pull))
            .route("/repos/{owner}/{name}/pulls/{number}/reviews", get(reviews))
            .route(
                "/repos/{owner}/{name}/pulls/{number}/commits",
                get(pull_commits),
            )
            .route("/repos/{owner}/{name}/commits/{sha}/status", get(status))
            .route(
                "/repos/{owner}/{name}/commits/{sha}/check-runs",
                get(check_runs),
            )
            .with_state(shared);
        runtime.spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeGitHub {
            url,
            state,
            token: token.to_owned(),
            _runtime: runtime,
        }
    }

    /// The token the server expects.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Locks the state.
    ///
    /// # Panics
    /// When a handler panicked while holding the lock.
    pub fn state(&self) -> std::sync::MutexGuard<'_, FakeState> {
        self.state.lock().expect("fake state")
    }
}
