//! The pull-request watcher of `skillforge serve` (issue 16 item 5; seed Mode A: "the daemon
//! PR-watcher detects a GitHub Revert-button PR … being merged"): polls each watched repository's
//! pull requests with an ETag-conditional request (a 304 costs no rate limit on GitHub) and turns
//! what changed into the same [`HarvestEvent`]s the webhook endpoint produces, so a webhook and a
//! poll of one event apply once (the floor row is an upsert on the five-column key, review rounds
//! count once per review id).
//!
//! Per PR whose `updated_at` moved since the last harvested poll:
//! * reviews with `CHANGES_REQUESTED` → one [`HarvestEvent::ChangesRequested`] per review id
//!   (fix rounds);
//! * once merged: the commit statuses and check runs at the PR head and the merge commit → CI
//!   observations; the PR's `Skillforge-Template` trailer (its body, else its commits, read from
//!   `GET /pulls/{n}/commits` only when the body has none) → an attribution ([`super::trailer`],
//!   issue 37 item 8); then the merged outcome with the PR body (a `Reverts owner/repo#NN` body
//!   flips the original PR's row; same repository only).
//!
//! The ETag and each PR's `updated_at` are recorded only after its events were harvested, so a
//! poll that fails half-way is simply repeated (every write is idempotent).

use skillforge_forge::{
    CheckRun, CommitStatus, Conditional, Forge, ForgeError, PullRequest, RepoRef, Review,
};
use skillforge_store::Store;
use tracing::warn;

use super::apply::{HarvestReport, available_reviewers, dispatch_legs, harvest};
use super::config::HarvestConfig;
use super::outcome::{HarvestEvent, Outcome};
use super::trailer;
use skillforge_engine::QueueBackend;

/// ETag resource name of the pulls list.
pub const PULLS_RESOURCE: &str = "pulls";

/// What one poll of one repository did.
#[derive(Debug, Default)]
pub struct PollReport {
    /// The list answered 304 (nothing changed, no rate limit spent).
    pub not_modified: bool,
    /// PRs whose `updated_at` moved and were harvested.
    pub pulls_harvested: usize,
    /// Events harvested.
    pub events: usize,
    /// Rows written (floor rows; legs are dispatched as jobs).
    pub rows: usize,
    /// Why events wrote nothing (unattributed PRs, …).
    pub skipped: Vec<String>,
}

/// Why a poll failed (the loop logs it and polls again next time).
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// GitHub could not be read.
    #[error(transparent)]
    Forge(#[from] ForgeError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] skillforge_store::StoreError),
    /// A harvest could not be written (recorded as `auto_trace_harvest_failed`).
    #[error(transparent)]
    Harvest(#[from] super::apply::HarvestError),
}

/// The events of one PR (pure): changes-requested reviews, and when merged the CI observations
/// at its head and merge commit, the trailer's attribution (body, else the newest of `commits`
/// `(sha, message)` that has one), then the merged outcome, shaped exactly as the webhook's.
pub fn pull_events(
    repo: &str,
    pull: &PullRequest,
    reviews: &[Review],
    ci: &[(String, Vec<CommitStatus>, Vec<CheckRun>)],
    commits: &[(String, String)],
) -> Vec<HarvestEvent> {
    let pr = i64::try_from(pull.number).unwrap_or(i64::MAX);
    let mut events: Vec<HarvestEvent> = reviews
        .iter()
        .filter(|r| r.state.eq_ignore_ascii_case("changes_requested"))
        .map(|r| HarvestEvent::ChangesRequested {
            repo: repo.to_owned(),
            pr,
            review_id: r.id.to_string(),
        })
        .collect();
    if pull.merged_at.is_none() {
        return events;
    }
    for (sha, statuses, checks) in ci {
        for s in statuses {
            events.push(HarvestEvent::Ci {
                repo: repo.to_owned(),
                sha: sha.clone(),
                context: s.context.clone(),
                state: s.state.clone(),
                description: s.description.clone(),
            });
        }
        for c in checks.iter().filter(|c| c.status == "completed") {
            events.push(HarvestEvent::Ci {
                repo: repo.to_owned(),
                sha: sha.clone(),
                context: format!("check_run/{}", c.name),
                state: c.conclusion.clone().unwrap_or_else(|| "neutral".into()),
                description: String::new(),
            });
        }
    }
    if let Some(trailer) = trailer::find(Some(&pull.body), commits) {
        events.push(HarvestEvent::Attributed {
            repo: repo.to_owned(),
            pr,
            trailer,
        });
    }
    let pr_head = Some(pull.head.sha.clone()).filter(|s| !s.is_empty());
    let merge_sha = pull.merge_commit_sha.clone().filter(|s| !s.is_empty());
    events.push(HarvestEvent::Outcome {
        repo: repo.to_owned(),
        pr,
        outcome: Outcome::Merged { ci: None },
        head: merge_sha.clone().or_else(|| pr_head.clone()),
        ci_shas: [pr_head, merge_sha].into_iter().flatten().collect(),
        body: Some(pull.body.clone()),
    });
    events
}

fn pull_state(pull: &PullRequest) -> &'static str {
    match (pull.merged_at.is_some(), pull.state.as_str()) {
        (true, _) => "merged",
        (false, "closed") => "closed",
        _ => "open",
    }
}

/// Polls `repo` once: a conditional list, then each changed PR's reviews and (merged) CI, harvested
/// and their legs dispatched through the same functions as `POST /events`.
///
/// # Errors
/// [`WatchError`]; nothing is recorded as seen for the PR that failed, so the next poll retries it.
pub async fn poll_repo(
    store: &Store,
    backend: &dyn QueueBackend,
    forge: &dyn Forge,
    config: &HarvestConfig,
    repo: &RepoRef,
) -> Result<PollReport, WatchError> {
    let name = repo.to_string();
    let mut report = PollReport::default();
    let etag = skillforge_store::github::get_etag(store.pool(), &name, PULLS_RESOURCE).await?;
    let (pulls, new_etag) = match forge.list_recent_pulls(repo, etag.as_deref()).await? {
        Conditional::NotModified => {
            report.not_modified = true;
            return Ok(report);
        }
        Conditional::Modified { value, etag } => (value, etag),
    };
    let reviewers = available_reviewers(config);
    for pull in &pulls {
        let pr = i64::try_from(pull.number).unwrap_or(i64::MAX);
        if skillforge_store::github::pull_seen_at(store.pool(), &name, pr)
            .await?
            .as_deref()
            == Some(pull.updated_at.as_str())
        {
            continue;
        }
        let reviews = forge.list_reviews(repo, pull.number).await?;
        let mut ci = Vec::new();
        let mut commits = Vec::new();
        if pull.merged_at.is_some()
            && trailer::parse(&pull.body, trailer::TrailerPlace::Body).is_none()
        {
            commits = forge
                .list_pull_commits(repo, pull.number)
                .await?
                .into_iter()
                .map(|c| (c.sha, c.commit.message))
                .collect();
        }
        if pull.merged_at.is_some() {
            let shas = [Some(pull.head.sha.clone()), pull.merge_commit_sha.clone()];
            for sha in shas.into_iter().flatten().filter(|s| !s.is_empty()) {
                let statuses = forge.commit_statuses(repo, &sha).await?;
                let checks = forge.check_runs(repo, &sha).await?;
                ci.push((sha, statuses, checks));
            }
        }
        for event in pull_events(&name, pull, &reviews, &ci, &commits) {
            let HarvestReport {
                rows,
                skipped,
                legs,
                ..
            } = harvest(store, config, &event, &reviewers).await?;
            if let Err(e) = dispatch_legs(backend, store, &legs).await {
                warn!(repo = %name, pr, error = %e, "harvest legs not dispatched");
            }
            report.events += 1;
            report.rows += rows.len();
            report.skipped.extend(skipped);
        }
        let mut conn = store
            .pool()
            .acquire()
            .await
            .map_err(skillforge_store::StoreError::from)?;
        skillforge_store::github::set_pull_seen(
            &mut conn,
            &name,
            pr,
            &pull.updated_at,
            pull_state(pull),
        )
        .await?;
        report.pulls_harvested += 1;
    }
    if let Some(tag) = new_etag {
        let mut conn = store
            .pool()
            .acquire()
            .await
            .map_err(skillforge_store::StoreError::from)?;
        skillforge_store::github::set_etag(&mut conn, &name, PULLS_RESOURCE, &tag).await?;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use skillforge_forge::GitRef;

    fn pull(merged: bool, body: &str) -> PullRequest {
        PullRequest {
            number: 7,
            html_url: String::new(),
            state: if merged {
                "closed".into()
            } else {
                "open".into()
            },
            body: body.into(),
            merged_at: merged.then(|| "2026-12-01T10:00:00Z".into()),
            merge_commit_sha: merged.then(|| "m7".into()),
            head: GitRef { sha: "h7".into() },
            updated_at: "2026-12-01T10:00:00Z".into(),
        }
    }

    #[test]
    fn an_open_pr_gives_its_changes_requested_reviews_only() {
        let reviews = [
            Review {
                id: 1,
                state: "APPROVED".into(),
                user: None,
            },
            Review {
                id: 2,
                state: "CHANGES_REQUESTED".into(),
                user: None,
            },
            Review {
                id: 3,
                state: "COMMENTED".into(),
                user: None,
            },
        ];
        let events = pull_events("o/r", &pull(false, ""), &reviews, &[], &[]);
        assert_eq!(
            events,
            vec![HarvestEvent::ChangesRequested {
                repo: "o/r".into(),
                pr: 7,
                review_id: "2".into()
            }]
        );
    }

    #[test]
    fn a_merged_pr_gives_ci_at_head_and_merge_then_the_outcome_with_its_body() {
        let status = CommitStatus {
            context: "ci/test".into(),
            state: "success".into(),
            description: String::new(),
        };
        let queued = CheckRun {
            name: "lint".into(),
            status: "queued".into(),
            conclusion: None,
        };
        let done = CheckRun {
            name: "build".into(),
            status: "completed".into(),
            conclusion: Some("failure".into()),
        };
        let ci = vec![
            ("h7".to_owned(), vec![status], vec![queued, done]),
            ("m7".to_owned(), vec![], vec![]),
        ];
        let events = pull_events("o/r", &pull(true, "Reverts o/r#3"), &[], &ci, &[]);
        assert_eq!(events.len(), 3, "{events:?}");
        assert!(
            matches!(&events[0], HarvestEvent::Ci { sha, context, state, .. } if sha == "h7" && context == "ci/test" && state == "success")
        );
        assert!(
            matches!(&events[1], HarvestEvent::Ci { context, state, .. } if context == "check_run/build" && state == "failure")
        );
        let HarvestEvent::Outcome {
            head,
            ci_shas,
            body,
            outcome,
            ..
        } = &events[2]
        else {
            panic!("{events:?}")
        };
        assert_eq!(
            (head.as_deref(), ci_shas.as_slice(), body.as_deref()),
            (
                Some("m7"),
                &["h7".to_owned(), "m7".to_owned()][..],
                Some("Reverts o/r#3")
            )
        );
        assert_eq!(*outcome, Outcome::Merged { ci: None });
    }

    #[test]
    fn a_merged_pr_is_attributed_by_its_newest_commit_trailer_before_its_outcome() {
        let commits = vec![
            (
                "c1".to_owned(),
                "one\n\nSkillforge-Template: coder@v1".to_owned(),
            ),
            (
                "c2".to_owned(),
                "two\n\nSkillforge-Template: coder@v2".to_owned(),
            ),
        ];
        let events = pull_events("o/r", &pull(true, "no trailer"), &[], &[], &commits);
        assert!(
            matches!(&events[..], [HarvestEvent::Attributed { trailer, .. }, HarvestEvent::Outcome { .. }] if trailer.version == "coder@v2"),
            "{events:?}"
        );
        let events = pull_events(
            "o/r",
            &pull(true, "Body\n\nSkillforge-Template: coder@v3"),
            &[],
            &[],
            &commits,
        );
        assert!(
            matches!(&events[0], HarvestEvent::Attributed { trailer, .. } if trailer.version == "coder@v3"),
            "the body wins: {events:?}"
        );
        assert!(
            pull_events(
                "o/r",
                &pull(false, "Skillforge-Template: coder@v1"),
                &[],
                &[],
                &[]
            )
            .is_empty(),
            "an open PR is not attributed"
        );
    }
}
