//! Train review through GitHub (issue 16 item 4; seed "Complete train-mode path" steps 3, 4 and 8):
//! for a session started with `--forge github`, the blind review packet becomes an issue of the
//! workspace repository (watched by a review watch with the stale reminder threshold), `continue`
//! syncs the reviewers' comments when feedback is missing, and the candidate review context is a
//! comment on the same issue.
//!
//! Every write is a durable job ([`crate::github_write`]) waited for through the stage port and
//! applied by the `github` family's handler; its marker makes a retried attempt find what an
//! earlier one posted and post nothing new. The local Markdown packet is still written (it is
//! what `feedback markdown import` would read and keeps the blind mapping on disk).

use skillforge_forge::RepoRef;
use skillforge_forge::grammar::PACKET_MARKER;
use skillforge_stage::fs::sha256_hex;
use skillforge_store::train::SessionRow;

use crate::github_review::{GithubReviewError, Target, publish_request, sync};
use crate::github_write::{
    WriteError, WriteJobs, WriteOp, WriteRequest, WriteResult, write_durably,
};
use crate::train::iteration::Iteration;
use crate::train::meta::{IterationMeta, SessionMeta};
use crate::train::session::*;
use crate::train::state::TrainState;
use crate::train::{GithubEnv, TrainEnv, TrainError};

/// The forge name of GitHub sessions (`train start --forge github`).
pub const GITHUB_FORGE: &str = "github";

/// The repository a GitHub session publishes to, or `None` for a local session.
///
/// # Errors
/// [`TrainError::Invalid`] when the recorded workspace is not `owner/repo`.
pub(crate) fn github_repo(session: &SessionRow) -> Result<Option<RepoRef>, TrainError> {
    if SessionMeta::parse(&session.metadata_json)
        .review_forge
        .as_deref()
        != Some(GITHUB_FORGE)
    {
        return Ok(None);
    }
    RepoRef::parse(&session.workspace_repo)
        .map(Some)
        .map_err(|e| TrainError::Invalid(format!("workspace repo: {e}")))
}

fn github<'a>(env: &TrainEnv<'a>) -> Result<GithubEnv<'a>, TrainError> {
    env.github.ok_or_else(|| TrainError::Blocked("this session reviews on GitHub, but no GitHub client is configured ([github] api_url / token)".into()))
}

async fn write(
    env: &TrainEnv<'_>,
    gh: &GithubEnv<'_>,
    req: &WriteRequest,
) -> Result<WriteResult, TrainError> {
    let at = WriteJobs {
        skillforge_bin: &env.skillforge_bin,
        home: env.home,
        api_url: gh.api_url,
    };
    write_durably(env.jobs, env.store, &at, req)
        .await
        .map_err(|e| match e {
            WriteError::Store(s) => TrainError::Store(s),
            WriteError::Engine(q) => TrainError::Engine(q),
            WriteError::Payload(p) => TrainError::Invalid(p.to_string()),
            WriteError::Stages(s) => TrainError::Invalid(s.to_string()),
            failed @ WriteError::Failed { .. } => {
                TrainError::Env(format!("{failed}; run `train continue` again"))
            }
        })
}

fn forge_error(e: GithubReviewError) -> TrainError {
    match e {
        GithubReviewError::Invalid(m) => TrainError::Invalid(m),
        GithubReviewError::Store(s) => TrainError::Store(s),
        GithubReviewError::Packet(p) => TrainError::Failed(p.to_string()),
        GithubReviewError::Forge(skillforge_forge::ForgeError::Config(m)) => TrainError::Blocked(m),
        GithubReviewError::Forge(f) => {
            TrainError::Env(format!("GitHub: {f}; run `train continue` again"))
        }
    }
}

/// After the local packet is written: opens (or finds) the review issue, records it on the
/// iteration and starts its review watch.
pub(crate) async fn publish_review_issue(
    env: &TrainEnv<'_>,
    repo: &RepoRef,
    it: &mut Iteration,
    meta: &mut IterationMeta,
) -> Result<String, TrainError> {
    let gh = github(env)?;
    let blobs = skillforge_store::blobs::BlobStore::in_home(env.home);
    let req = publish_request(env.store, &blobs, &it.eval_run_id, repo, Target::NewIssue)
        .await
        .map_err(forge_error)?;
    let done = write(env, &gh, &req).await?;
    let number = i64::try_from(done.number).unwrap_or(i64::MAX);
    let items: Vec<String> =
        skillforge_store::review::list_items(env.store.pool(), &it.eval_run_id)
            .await?
            .into_iter()
            .map(|i| i.item.item_id)
            .collect();
    let mut tx = env.store.begin().await?;
    skillforge_store::train::set_iteration_issue(
        &mut tx,
        &it.id,
        &repo.to_string(),
        number,
        &done.url,
    )
    .await?;
    skillforge_store::github::create_review_watch(
        &mut tx,
        &repo.to_string(),
        number,
        &it.eval_run_id,
        &items,
        gh.stale_threshold_secs,
    )
    .await?;
    tx.commit().await?;
    it.issue_repo = repo.to_string();
    it.issue_number = number;
    it.issue_url = done.url.clone();
    meta.review.url = done.url.clone();
    Ok(done.url)
}

/// review_published → feedback_synced for a GitHub review: syncs the issue's comments (all pages)
/// and moves on once every item of the run has feedback; false while some are missing. Malformed
/// comments are reported with their URLs and skipped.
pub(crate) async fn sync_review_issue(
    env: &TrainEnv<'_>,
    it: &mut Iteration,
    report: &mut StepReport,
) -> Result<bool, TrainError> {
    let gh = github(env)?;
    let repo = RepoRef::parse(&it.issue_repo)
        .map_err(|e| TrainError::Invalid(format!("review issue repo: {e}")))?;
    let number = u64::try_from(it.issue_number).unwrap_or(0);
    let done = sync(env.store, gh.forge, &it.eval_run_id, &repo, number)
        .await
        .map_err(forge_error)?;
    for refused in &done.refused {
        report.steps.push(format!(
            "skipped malformed comment {}: {}",
            refused.url, refused.reason
        ));
    }
    let have =
        skillforge_store::feedback::items_with_feedback(env.store.pool(), &it.eval_run_id).await?;
    let expected: Vec<String> =
        skillforge_store::review::list_items(env.store.pool(), &it.eval_run_id)
            .await?
            .into_iter()
            .map(|i| i.item.item_id)
            .collect();
    let missing: Vec<&String> = expected.iter().filter(|id| !have.contains(*id)).collect();
    let errors = done
        .refused
        .iter()
        .map(|r| format!("{}\n{}", r.url, r.reason))
        .collect::<Vec<_>>()
        .join("\n");
    let error_hash = if errors.is_empty() {
        String::new()
    } else {
        sha256_hex(errors.as_bytes())
    };
    {
        let mut conn = env.store.pool().acquire().await?;
        let last = i64::try_from(done.last_comment_id).unwrap_or(i64::MAX);
        skillforge_store::github::record_watch_sync(
            &mut conn,
            &it.issue_repo,
            it.issue_number,
            last,
            &error_hash,
            missing.is_empty(),
        )
        .await?;
    }
    let c = done.counts;
    report.steps.push(format!(
        "synced {} comments of {}: {} imported, {} skipped, {} malformed; {} new events",
        done.comments,
        done.review_issue,
        done.imported,
        done.skipped,
        done.refused.len(),
        c.feedback_inserted + c.ranked_inserted
    ));
    let mut meta = IterationMeta::parse(&it.metadata_json);
    if !missing.is_empty() {
        let list = missing
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        meta.feedback_sync.status = "waiting".into();
        meta.feedback_sync.error = format!("no feedback yet for {list}");
        save_meta(env, it, &meta).await?;
        return Ok(false);
    }
    meta.feedback_sync.status = "succeeded".into();
    meta.feedback_sync.error.clear();
    meta.feedback_sync.url = it.issue_url.clone();
    advance_with_meta(env, it, TrainState::FeedbackSynced, &meta).await?;
    Ok(true)
}

/// The candidate review context as a comment on the review issue (seed step 8), skipped by
/// sync as a packet body. Returns its URL.
pub(crate) async fn publish_candidate_comment(
    env: &TrainEnv<'_>,
    it: &Iteration,
    text: &str,
) -> Result<String, TrainError> {
    let gh = github(env)?;
    let repo = RepoRef::parse(&it.issue_repo)
        .map_err(|e| TrainError::Invalid(format!("review issue repo: {e}")))?;
    let number = u64::try_from(it.issue_number).unwrap_or(0);
    let req = WriteRequest {
        op: WriteOp::Comment { number },
        repo: repo.to_string(),
        key: format!("{}:candidate-review:{}", it.id, it.candidate_version_id),
        body: format!("{PACKET_MARKER}\n{text}"),
    };
    Ok(write(env, &gh, &req).await?.url)
}
