//! The forge port: where review packets are published and where reviewers' comments, pull
//! requests, reviews and CI results come from (DESIGN §2 `forge/`; seed "GitHub Feedback
//! Collector", "Complete GitHub review path"; facts §4).
//!
//! * [`Forge`] — the trait the workflows see (issues, comments, pulls, reviews, statuses, checks).
//! * [`github::GitHub`] — its implementation on `octocrab` against GitHub's REST API at a
//!   configurable base URL (GitHub Enterprise, a test server), with primary and secondary rate
//!   limits honoured by [`ratelimit`].
//! * [`grammar`] — the pure review-comment grammar and the packet markers.
//!
//! Dependency direction: `contract` ← `forge` ← `workflows`. Nothing here touches the store.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub mod github;
pub mod grammar;
pub mod ratelimit;

/// `owner/repo`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RepoRef {
    /// Owner (user or organisation).
    pub owner: String,
    /// Repository name.
    pub name: String,
}

impl RepoRef {
    /// Parses `owner/repo` (both parts non-empty, no further `/`).
    ///
    /// # Errors
    /// A message naming the text and the expected shape.
    pub fn parse(text: &str) -> Result<RepoRef, String> {
        let text = text.trim();
        match text.split_once('/') {
            Some((owner, name))
                if !owner.is_empty()
                    && !name.is_empty()
                    && !name.contains('/')
                    && !text.contains(char::is_whitespace) =>
            {
                Ok(RepoRef {
                    owner: owner.to_owned(),
                    name: name.to_owned(),
                })
            }
            _ => Err(format!("repository `{text}` is not owner/repo")),
        }
    }
}

impl std::fmt::Display for RepoRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.owner, self.name)
    }
}

/// An issue (or a pull request seen through the issues API).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issue {
    /// Issue number.
    pub number: u64,
    /// Web address, e.g. `https://github.com/o/r/issues/42`.
    pub html_url: String,
    /// Title.
    #[serde(default)]
    pub title: String,
    /// Body (Markdown); absent bodies read as empty.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub body: String,
    /// `open` or `closed`.
    #[serde(default)]
    pub state: String,
}

/// The author of a comment or review.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct User {
    /// Login name.
    #[serde(default)]
    pub login: String,
}

/// An issue or pull-request conversation comment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Comment {
    /// Comment id.
    pub id: u64,
    /// Web address, e.g. `https://github.com/o/r/issues/42#issuecomment-7`: the feedback rows'
    /// `source_url` (facts §4).
    #[serde(default)]
    pub html_url: String,
    /// Body (Markdown).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub body: String,
    /// Author; absent for a deleted account ("ghost").
    #[serde(default)]
    pub user: Option<User>,
    /// RFC 3339.
    #[serde(default)]
    pub created_at: String,
    /// RFC 3339; later than `created_at` once edited.
    #[serde(default)]
    pub updated_at: String,
}

/// A git ref of a pull request.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct GitRef {
    /// Commit sha.
    #[serde(default)]
    pub sha: String,
}

/// A pull request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullRequest {
    /// Number.
    pub number: u64,
    /// Web address.
    #[serde(default)]
    pub html_url: String,
    /// `open` or `closed`.
    #[serde(default)]
    pub state: String,
    /// Body; `Reverts owner/repo#NN` marks a Revert-button PR.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub body: String,
    /// RFC 3339 when merged, else absent.
    #[serde(default)]
    pub merged_at: Option<String>,
    /// The merge commit, once merged.
    #[serde(default)]
    pub merge_commit_sha: Option<String>,
    /// Head ref.
    #[serde(default)]
    pub head: GitRef,
    /// RFC 3339.
    #[serde(default)]
    pub updated_at: String,
}

/// A pull-request review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Review {
    /// Review id.
    pub id: u64,
    /// `APPROVED`, `CHANGES_REQUESTED`, `COMMENTED`, `DISMISSED`, `PENDING`.
    #[serde(default)]
    pub state: String,
    /// Author.
    #[serde(default)]
    pub user: Option<User>,
}

/// One commit of a pull request (`GET /repos/{o}/{r}/pulls/{n}/commits`, oldest first).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullCommit {
    /// Commit SHA.
    pub sha: String,
    /// The git commit (`commit.message` is what skillforge reads).
    pub commit: GitCommit,
}

/// The git side of a [`PullCommit`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitCommit {
    /// Full commit message.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub message: String,
}

/// One commit status context (`GET /repos/{o}/{r}/commits/{ref}/status` → `statuses[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitStatus {
    /// Context name, e.g. `ci/test` or `gitmoot/ci`.
    #[serde(default)]
    pub context: String,
    /// `success`, `failure`, `error`, `pending`.
    #[serde(default)]
    pub state: String,
    /// Description.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub description: String,
}

/// One check run (`GET /repos/{o}/{r}/commits/{ref}/check-runs` → `check_runs[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckRun {
    /// Name.
    #[serde(default)]
    pub name: String,
    /// `queued`, `in_progress`, `completed`.
    #[serde(default)]
    pub status: String,
    /// Once completed: `success`, `failure`, `neutral`, `cancelled`, `skipped`, `timed_out`, …
    #[serde(default)]
    pub conclusion: Option<String>,
}

/// The answer to a conditional request (`If-None-Match`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conditional<T> {
    /// 304: nothing changed since the ETag (costs no rate limit on GitHub).
    NotModified,
    /// 200 with the new body and its ETag.
    Modified {
        /// The value.
        value: T,
        /// The response's `ETag`, for the next request.
        etag: Option<String>,
    },
}

/// Why a forge call failed.
#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    /// No token, a bad base URL, a bad repository name: the caller's configuration.
    #[error("{0}")]
    Config(String),
    /// 401/403 (not a rate limit) or 404 of a whole resource: the message says which.
    #[error("{method} {path}: HTTP {status}: {message}")]
    Http {
        /// Method.
        method: &'static str,
        /// Path (never the token).
        path: String,
        /// Status code.
        status: u16,
        /// GitHub's `message`, or the body's start.
        message: String,
    },
    /// Rate limited longer than the configured patience, or after every attempt.
    #[error("{method} {path}: rate limited; retry after {wait_secs} s")]
    RateLimited {
        /// Method.
        method: &'static str,
        /// Path.
        path: String,
        /// What GitHub asked for.
        wait_secs: u64,
    },
    /// The server could not be reached or answered something unreadable.
    #[error("{0}")]
    Transport(String),
}

impl ForgeError {
    /// HTTP status of an [`ForgeError::Http`] error.
    pub fn status(&self) -> Option<u16> {
        match self {
            ForgeError::Http { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// The forge operations skillforge needs. Paging is the implementation's job: list calls return
/// every page.
#[async_trait]
pub trait Forge: Send + Sync {
    /// Opens an issue.
    async fn create_issue(
        &self,
        repo: &RepoRef,
        title: &str,
        body: &str,
    ) -> Result<Issue, ForgeError>;
    /// Every issue and pull request of `repo` (state `all`) whose body contains `needle`, newest first.
    async fn find_issues(&self, repo: &RepoRef, needle: &str) -> Result<Vec<Issue>, ForgeError>;
    /// An issue or PR by number.
    async fn get_issue(&self, repo: &RepoRef, number: u64) -> Result<Issue, ForgeError>;
    /// Comments on an issue or PR conversation (all pages, oldest first).
    async fn list_comments(&self, repo: &RepoRef, number: u64) -> Result<Vec<Comment>, ForgeError>;
    /// One comment; `None` once deleted (404).
    async fn get_comment(
        &self,
        repo: &RepoRef,
        comment_id: u64,
    ) -> Result<Option<Comment>, ForgeError>;
    /// Comments on an issue or PR conversation.
    async fn create_comment(
        &self,
        repo: &RepoRef,
        number: u64,
        body: &str,
    ) -> Result<Comment, ForgeError>;
    /// Rewrites a comment's body.
    async fn update_comment(
        &self,
        repo: &RepoRef,
        comment_id: u64,
        body: &str,
    ) -> Result<Comment, ForgeError>;
    /// A pull request.
    async fn get_pull(&self, repo: &RepoRef, number: u64) -> Result<PullRequest, ForgeError>;
    /// Pull requests of every state, most recently updated first (first page, 100), conditional on
    /// `etag` (a 304 costs no rate limit on GitHub).
    async fn list_recent_pulls(
        &self,
        repo: &RepoRef,
        etag: Option<&str>,
    ) -> Result<Conditional<Vec<PullRequest>>, ForgeError>;
    /// Reviews of a pull request (all pages).
    async fn list_reviews(&self, repo: &RepoRef, number: u64) -> Result<Vec<Review>, ForgeError>;
    /// Commits of a pull request, oldest first (all pages; GitHub lists at most 250).
    async fn list_pull_commits(
        &self,
        repo: &RepoRef,
        number: u64,
    ) -> Result<Vec<PullCommit>, ForgeError>;
    /// Commit statuses at `sha` (the combined status's `statuses`).
    async fn commit_statuses(
        &self,
        repo: &RepoRef,
        sha: &str,
    ) -> Result<Vec<CommitStatus>, ForgeError>;
    /// Check runs at `sha`.
    async fn check_runs(&self, repo: &RepoRef, sha: &str) -> Result<Vec<CheckRun>, ForgeError>;
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(deserializer)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_refs() {
        assert_eq!(RepoRef::parse("o/r").unwrap().to_string(), "o/r");
        for bad in ["o", "/r", "o/", "o/r/x", "o /r", ""] {
            assert!(RepoRef::parse(bad).is_err(), "{bad}");
        }
    }
}
