//! Review through GitHub: publish a run's blind packet to an issue or a PR comment, and sync
//! reviewers' comments back into feedback events (seed "GitHub Feedback Collector", "Complete
//! GitHub review path"; facts §4; S-96, S-97, S-04).
//!
//! * **Publish** — the body is the blind packet ([`crate::packet::render_body`]) under the packet
//!   marker, so sync skips it. [`publish_request`] builds the write; it runs as a durable job
//!   ([`crate::github_write`]): retried by the engine, and never posting twice, since the body
//!   carries the idempotency marker `<!-- skillforge:publish-key=KEY -->` (KEY = run, repo and
//!   target) that the job looks for before posting.
//! * **Sync** — every comment (all pages) is read by [`resolve_comment`]; packets, unrelated
//!   comments and other runs' feedback are skipped; a malformed comment is reported with its URL
//!   and nothing of it is written. All resolved comments are written in one transaction under the
//!   five-column key with `source = "github"` and `source_url` = the comment's URL (else
//!   `github-comment:<id>`), so a repeated sync and an edited comment upsert the same rows.

use skillforge_contract::Assignments;
use skillforge_forge::grammar::{CommentImport, PACKET_MARKER, resolve_comment};
use skillforge_forge::{Forge, ForgeError, RepoRef};
use skillforge_store::blobs::BlobStore;
use skillforge_store::feedback::{
    WriteCounts, delete_superseded, event_created_at_now, write_resolved,
};
use skillforge_store::{Store, StoreError};

use crate::github_write::{WriteJobs, WriteOp, WriteRequest, submit_write};
use crate::packet::{PacketError, item_assignment, render_body};

/// `source` of events synced from GitHub (facts §4).
pub const GITHUB_SOURCE: &str = "github";

/// Why publish or sync failed.
#[derive(Debug, thiserror::Error)]
pub enum GithubReviewError {
    /// Bad input (unknown run, no repo, an item that does not fit): exit 2 material.
    #[error("{0}")]
    Invalid(String),
    /// The forge failed (unreachable, refused, rate limited past patience).
    #[error(transparent)]
    Forge(#[from] ForgeError),
    /// The packet could not be rendered.
    #[error(transparent)]
    Packet(#[from] PacketError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Where a packet goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A new issue.
    NewIssue,
    /// A comment on this PR.
    PullRequest(u64),
}

/// The publish target when `--repo` is omitted (S-96): the run's target repo, else the template
/// source repo, else `[feedback] repo`, else an error asking for `--repo`. Values that are not
/// `owner/repo` are passed over.
///
/// # Errors
/// [`GithubReviewError::Invalid`] naming `--repo`.
pub fn resolve_repo(
    flag: Option<&str>,
    run_target: &str,
    template_source: &str,
    config_repo: Option<&str>,
) -> Result<RepoRef, GithubReviewError> {
    if let Some(flag) = flag {
        return RepoRef::parse(flag)
            .map_err(|e| GithubReviewError::Invalid(format!("--repo: {e}")));
    }
    [run_target, template_source, config_repo.unwrap_or("")]
        .into_iter()
        .find_map(|candidate| RepoRef::parse(candidate).ok())
        .ok_or_else(|| {
            GithubReviewError::Invalid(
                "no repository to publish to: the run has no target repo, the template no source repo and [feedback] repo is unset; pass --repo owner/repo".into(),
            )
        })
}

/// The idempotency key of a publish.
pub fn publish_key(run_id: &str, repo: &RepoRef, target: Target) -> String {
    match target {
        Target::NewIssue => format!("{run_id}:{repo}:issue"),
        Target::PullRequest(n) => format!("{run_id}:{repo}:pr-{n}"),
    }
}

/// The write that publishes run `run_id`'s blind packet to `repo` (S-96 resolution is the
/// caller's, through [`resolve_repo`]): a new issue, or a comment on a PR, under the packet
/// marker and the idempotency key [`publish_key`]. Run it with
/// [`crate::github_write::write_durably`].
///
/// # Errors
/// [`GithubReviewError::Packet`] for a run that cannot be rendered.
pub async fn publish_request(
    store: &Store,
    blobs: &BlobStore,
    run_id: &str,
    repo: &RepoRef,
    target: Target,
) -> Result<WriteRequest, GithubReviewError> {
    let (run, items, _) = render_body(store, blobs, run_id).await?;
    let key = publish_key(&run.id, repo, target);
    let body = format!(
        "{PACKET_MARKER}\n# skillforge review packet: {run}\n\nTemplate version: `{version}` · mode: {mode}\n\n\
         Reply with a comment per review. Short form, one line per item:\n\n```\nrun_id: {run}\nitem-001: b - what made B better\nhero-001 ranking: C > A > D > B\nbest traits:\n- C: what to keep\nreject:\n- B: what to avoid\n```\n\n\
         or a fenced YAML block in the `feedback.yml` shape (`run_id`, `items: [{{item_id, choice | ranking, useful_traits, rejected_traits, required_improvements, reasoning}}]`). \
         A/B choices are `a`, `b`, `tie`, `neither`, `skip`. Edit your comment to change your answer.\n{items}",
        run = run.id,
        version = run.template_version_id,
        mode = run.mode,
    );
    let op = match target {
        Target::NewIssue => WriteOp::CreateIssue {
            title: format!("skillforge review: {}", run.id),
        },
        Target::PullRequest(number) => WriteOp::Comment { number },
    };
    Ok(WriteRequest {
        op,
        repo: repo.to_string(),
        key,
        body,
    })
}

fn entry_item(entry: &skillforge_contract::ResolvedEntry) -> &str {
    match entry {
        skillforge_contract::ResolvedEntry::Choice { item_id, .. } => item_id,
        skillforge_contract::ResolvedEntry::Ranked(r) => &r.item_id,
    }
}

/// A comment sync refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The comment's URL.
    pub url: String,
    /// Why.
    pub reason: String,
}

/// What sync did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Synced {
    /// Comments read.
    pub comments: usize,
    /// Comments imported.
    pub imported: usize,
    /// Comments skipped as packets, unrelated or for another run.
    pub skipped: usize,
    /// Malformed comments (nothing of them written).
    pub refused: Vec<Refused>,
    /// Rows written.
    pub counts: WriteCounts,
    /// Old rows removed because an edited comment no longer answers their item.
    pub superseded: u64,
    /// Highest comment id read (0 when none).
    pub last_comment_id: u64,
    /// `owner/repo#N`.
    pub review_issue: String,
}

/// Syncs the comments of `repo#number` into run `run_id`'s feedback.
///
/// # Errors
/// [`GithubReviewError::Invalid`] for an unknown run; [`GithubReviewError::Forge`] when the
/// comments cannot be read (nothing is written then); [`GithubReviewError::Store`].
pub async fn sync(
    store: &Store,
    forge: &dyn Forge,
    run_id: &str,
    repo: &RepoRef,
    number: u64,
) -> Result<Synced, GithubReviewError> {
    let run = skillforge_store::review::get_run(store.pool(), run_id)
        .await?
        .ok_or_else(|| {
            GithubReviewError::Invalid(format!(
                "review run `{run_id}` not found; create it with `skillforge review create`"
            ))
        })?;
    let items = skillforge_store::review::list_items(store.pool(), &run.id).await?;
    let assignments = Assignments {
        run_id: run.id.clone(),
        items: items
            .iter()
            .map(|i| item_assignment(&run, i))
            .collect::<Result<_, _>>()
            .map_err(|e| GithubReviewError::Invalid(e.to_string()))?,
    };
    let comments = forge.list_comments(repo, number).await?;
    let mut synced = Synced {
        comments: comments.len(),
        review_issue: format!("{repo}#{number}"),
        last_comment_id: comments.iter().map(|c| c.id).max().unwrap_or(0),
        ..Default::default()
    };
    let mut resolved = Vec::new();
    for comment in &comments {
        let url = if comment.html_url.is_empty() {
            format!("github-comment:{}", comment.id)
        } else {
            comment.html_url.clone()
        };
        let author = comment.user.as_ref().map(|u| u.login.as_str());
        match resolve_comment(&comment.body, author, &run.id, &assignments) {
            CommentImport::Skipped => synced.skipped += 1,
            CommentImport::Malformed(reason) => {
                tracing::warn!(url = %url, reason = %reason, "malformed review comment skipped");
                synced.refused.push(Refused { url, reason });
            }
            CommentImport::Resolved(feedback) => resolved.push((feedback, url)),
        }
    }
    let created_at = event_created_at_now();
    let mut tx = store.begin().await?;
    for (feedback, url) in &resolved {
        let answered: std::collections::BTreeSet<String> = feedback
            .entries
            .iter()
            .map(|e| entry_item(e).to_owned())
            .collect();
        synced.superseded +=
            delete_superseded(&mut tx, &run.id, GITHUB_SOURCE, url, &answered).await?;
        let counts = write_resolved(&mut tx, feedback, GITHUB_SOURCE, url, &created_at).await?;
        synced.counts.feedback_inserted += counts.feedback_inserted;
        synced.counts.feedback_updated += counts.feedback_updated;
        synced.counts.ranked_inserted += counts.ranked_inserted;
        synced.counts.ranked_updated += counts.ranked_updated;
    }
    tx.commit().await.map_err(StoreError::from)?;
    synced.imported = resolved.len();
    Ok(synced)
}

/// What one review-watch pass did to one watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchPass {
    /// `owner/repo#N`.
    pub issue: String,
    /// Items still without feedback after the sync.
    pub missing: Vec<String>,
    /// The stale reminder's write job, when this pass submitted it.
    pub reminded: Option<String>,
}

/// The body of a stale reminder (facts §3: after the watch's threshold without feedback).
fn reminder_body(run_id: &str, missing: &[String], threshold_secs: i64) -> String {
    format!(
        "{PACKET_MARKER}\nReminder: review run `{run_id}` has had no feedback for {} on {}. Reply with one comment per review \
         (short form such as `{}: b - reason`, or a fenced YAML block).",
        humanize(threshold_secs),
        missing
            .iter()
            .map(|m| format!("`{m}`"))
            .collect::<Vec<_>>()
            .join(", "),
        missing.first().map_or("item-001", String::as_str),
    )
}

fn humanize(secs: i64) -> String {
    match secs {
        s if s % 86_400 == 0 => format!("{} day(s)", s / 86_400),
        s if s % 3_600 == 0 => format!("{} hour(s)", s / 3_600),
        s => format!("{s} seconds"),
    }
}

/// One pass over the review watches still `watching` (what `serve` runs every
/// `[github] watch_every_secs`): syncs each issue's comments, marks the watch `synced` once every
/// expected item has feedback, and past `stale_after` with items still missing posts the stale
/// reminder once (marker-idempotent, then `stale_notified`). A watch that fails is logged and
/// left for the next pass.
///
/// # Errors
/// [`GithubReviewError::Store`] when the watches cannot be listed.
pub async fn review_watch_pass(
    store: &Store,
    forge: &dyn Forge,
    writes: (&dyn skillforge_engine::QueueBackend, &WriteJobs<'_>),
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<WatchPass>, GithubReviewError> {
    let mut out = Vec::new();
    for watch in skillforge_store::github::list_watching(store.pool()).await? {
        let issue = format!("{}#{}", watch.repo, watch.issue_number);
        match watch_one(store, forge, writes, &watch, now).await {
            Ok(pass) => out.push(pass),
            Err(e) => {
                tracing::warn!(issue = %issue, error = %e, "review watch pass failed; retried next pass")
            }
        }
    }
    Ok(out)
}

async fn watch_one(
    store: &Store,
    forge: &dyn Forge,
    (queue, at): (&dyn skillforge_engine::QueueBackend, &WriteJobs<'_>),
    watch: &skillforge_store::github::ReviewWatch,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<WatchPass, GithubReviewError> {
    let repo = RepoRef::parse(&watch.repo).map_err(GithubReviewError::Invalid)?;
    let number = u64::try_from(watch.issue_number).unwrap_or(0);
    let done = sync(store, forge, &watch.run_id, &repo, number).await?;
    let have = skillforge_store::feedback::items_with_feedback(store.pool(), &watch.run_id).await?;
    let missing: Vec<String> = watch
        .expected_item_ids()
        .into_iter()
        .filter(|id| !have.contains(id))
        .collect();
    let errors = done
        .refused
        .iter()
        .map(|r| format!("{}\n{}", r.url, r.reason))
        .collect::<Vec<_>>()
        .join("\n");
    let error_hash = if errors.is_empty() {
        String::new()
    } else {
        skillforge_stage::fs::sha256_hex(errors.as_bytes())
    };
    let last = i64::try_from(done.last_comment_id).unwrap_or(i64::MAX);
    {
        let mut conn = store.pool().acquire().await.map_err(StoreError::from)?;
        skillforge_store::github::record_watch_sync(
            &mut conn,
            &watch.repo,
            watch.issue_number,
            last,
            &error_hash,
            missing.is_empty(),
        )
        .await?;
    }
    let due = chrono::DateTime::parse_from_rfc3339(&watch.stale_after).is_ok_and(|t| now >= t);
    let mut reminded = None;
    if !missing.is_empty() && due && watch.stale_notified == 0 {
        let req = WriteRequest {
            op: WriteOp::Comment { number },
            repo: watch.repo.clone(),
            key: format!("{}:{}:stale-reminder", watch.run_id, done.review_issue),
            body: reminder_body(&watch.run_id, &missing, watch.stale_threshold_seconds),
        };
        // A durable write job keyed by the reminder: submitting it again returns the same job,
        // and its marker keeps a retried attempt from posting twice.
        let job_id = submit_write(queue, store, at, &req)
            .await
            .map_err(|e| GithubReviewError::Invalid(format!("submit the stale reminder: {e}")))?;
        let mut conn = store.pool().acquire().await.map_err(StoreError::from)?;
        skillforge_store::github::mark_stale_notified(&mut conn, &watch.repo, watch.issue_number)
            .await?;
        reminded = Some(job_id);
    }
    Ok(WatchPass {
        issue: done.review_issue,
        missing,
        reminded,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // S-96: --repo omitted → run target repo, template source repo, [feedback] repo, else an error naming --repo.
    #[test]
    fn s96_publish_target_precedence() {
        let r = |flag, run, tpl, cfg| resolve_repo(flag, run, tpl, cfg).map(|r| r.to_string());
        assert_eq!(
            r(Some("a/flag"), "b/run", "c/tpl", Some("d/cfg")).unwrap(),
            "a/flag"
        );
        assert_eq!(r(None, "b/run", "c/tpl", Some("d/cfg")).unwrap(), "b/run");
        assert_eq!(r(None, "", "c/tpl", Some("d/cfg")).unwrap(), "c/tpl");
        assert_eq!(r(None, "", "", Some("d/cfg")).unwrap(), "d/cfg");
        // A local path as template source is not a repository.
        assert_eq!(
            r(None, "", "/home/me/templates", Some("d/cfg")).unwrap(),
            "d/cfg"
        );
        let err = r(None, "", "", None).unwrap_err().to_string();
        assert!(err.contains("--repo"), "{err}");
    }
}
