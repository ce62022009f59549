//! The human-facing packets: the blind review packet (options_generated → review_published), the
//! feedback sync (→ feedback_synced) and the candidate review (candidate_created →
//! candidate_review_published; seed steps 4 and 8).

use std::path::PathBuf;

use skillforge_stage::fs::sha256_hex;
use skillforge_store::blobs::BlobStore;
use skillforge_store::candidates::get_candidate;
use skillforge_store::train::SessionRow;

use crate::train::iteration::Iteration;
use crate::train::meta::IterationMeta;
use crate::train::session::*;
use crate::train::state::TrainState;
use crate::train::steps::github::{
    github_repo, publish_candidate_comment, publish_review_issue, sync_review_issue,
};
use crate::train::{TrainEnv, TrainError};

/// options_generated → review_published: the blind Markdown packet in `<iteration>/review`.
pub(crate) async fn publish_review(
    env: &TrainEnv<'_>,
    session: &SessionRow,
    it: &mut Iteration,
    report: &mut StepReport,
) -> Result<PathBuf, TrainError> {
    let dir = env.iteration_dir(&session.id, &it.id).join(REVIEW_DIR);
    let blobs = BlobStore::in_home(env.home);
    let done =
        crate::packet::export_packet(env.store, &blobs, env.home, &it.eval_run_id, &dir, true)
            .await
            .map_err(|e| match e {
                crate::packet::PacketError::Store(s) => TrainError::Store(s),
                crate::packet::PacketError::Io(m) => TrainError::Env(m),
                crate::packet::PacketError::Invalid(m) => TrainError::Failed(m),
            })?;
    let mut meta = IterationMeta::parse(&it.metadata_json);
    meta.review.status = "succeeded".into();
    meta.review.path = dir.display().to_string();
    meta.review.written_sha256 = sha256_hex(done.feedback_template.as_bytes());
    meta.feedback_sync.status = "waiting".into();
    if let Some(repo) = github_repo(session)? {
        let url = publish_review_issue(env, &repo, it, &mut meta).await?;
        report.steps.push(format!(
            "review issue published: {url} ({} items)",
            done.n_items
        ));
        report.issue_url = Some(url);
    }
    advance_with_meta(env, it, TrainState::ReviewPublished, &meta).await?;
    report.steps.push(format!(
        "review packet published: {} ({} items)",
        dir.display(),
        done.n_items
    ));
    Ok(dir)
}

/// review_published → feedback_synced when a human filled `feedback.yml`; false while it is
/// still the template as written.
///
/// Feedback whose ranked items all name no traits or improvements is refused, nothing written,
/// unless `rankings_only` (`--rankings-only`): the built-in optimizer learns what to change only
/// from those, so the round would end without a candidate and the review work would be spent.
/// Items that rank without them beside others that do are named in a note.
pub(crate) async fn sync_feedback(
    env: &TrainEnv<'_>,
    session: &SessionRow,
    it: &mut Iteration,
    rankings_only: bool,
    report: &mut StepReport,
) -> Result<bool, TrainError> {
    if it.issue_number > 0 {
        // Published on GitHub: `continue` syncs the issue's comments while feedback is missing.
        report.issue_url = Some(it.issue_url.clone());
        return sync_review_issue(env, it, report).await;
    }
    let mut meta = IterationMeta::parse(&it.metadata_json);
    let dir = PathBuf::from(&meta.review.path);
    let text =
        std::fs::read_to_string(dir.join(skillforge_contract::FEEDBACK_FILE)).unwrap_or_default();
    if text.is_empty() || sha256_hex(text.as_bytes()) == meta.review.written_sha256 {
        return Ok(false);
    }
    let invalid = |e: crate::packet::PacketError| match e {
        crate::packet::PacketError::Store(s) => TrainError::Store(s),
        other => TrainError::Invalid(format!(
            "{other}; fix feedback.yml and run `train continue` again"
        )),
    };
    let (ranked_only, actionable) = crate::packet::unactionable_items(env.store, &dir)
        .await
        .map_err(invalid)?;
    if actionable == 0 && !ranked_only.is_empty() && !rankings_only {
        return Err(TrainError::Invalid(format!(
            "{}/feedback.yml ranks the options but no item names useful_traits, rejected_traits or \
             required_improvements ({}); the optimizer learns what to change only from those, so this \
             round would end without a candidate. Nothing was written: fill at least one in for the \
             items you ranked (index.md shows how) and run `skillforge train continue --session {}` \
             again, or go on with rankings alone: `skillforge train continue --session {} --rankings-only`",
            dir.display(),
            ranked_only.join(", "),
            session.id,
            session.id
        )));
    }
    let done = crate::packet::import_packet(env.store, &dir, None)
        .await
        .map_err(invalid)?;
    meta.feedback_sync.status = "succeeded".into();
    meta.feedback_sync.path = done.source_url.clone();
    advance_with_meta(env, it, TrainState::FeedbackSynced, &meta).await?;
    report.steps.push(format!(
        "feedback synced from {} ({} ranked, {} A/B events)",
        done.reviewer,
        done.counts.ranked_inserted + done.counts.ranked_updated,
        done.counts.feedback_inserted + done.counts.feedback_updated
    ));
    if done.actionable > 0 && !ranked_only.is_empty() {
        report.steps.push(format!(
            "note: {} rank{} the options without useful_traits, rejected_traits or required_improvements; \
             the optimizer learns nothing from {}",
            ranked_only.join(", "),
            if ranked_only.len() == 1 { "s" } else { "" },
            if ranked_only.len() == 1 { "it" } else { "them" }
        ));
    }
    if done.actionable == 0 {
        report.steps.push(
            "note: no item of this feedback names useful_traits, rejected_traits or \
             required_improvements (or A/B reasoning): the built-in optimizer learns what to change \
             only from those, so it may finish without a candidate; next time fill them in the packet"
                .to_owned(),
        );
    }
    Ok(true)
}

/// candidate_created → candidate_review_published: `<iteration>/candidate-review.md` with the
/// selection score, evaluator report, no-op status, promotability and the diff (seed step 8).
pub(crate) async fn publish_candidate_review(
    env: &TrainEnv<'_>,
    session: &SessionRow,
    it: &mut Iteration,
    report: &mut StepReport,
) -> Result<(), TrainError> {
    let candidate = get_candidate(env.store.pool(), &it.candidate_version_id)
        .await?
        .ok_or_else(|| {
            TrainError::Failed(format!(
                "candidate `{}` is missing",
                it.candidate_version_id
            ))
        })?;
    let eval_report: Option<serde_json::Value> =
        serde_json::from_str(&candidate.eval_report_json).ok();
    let promotable = eval_report
        .as_ref()
        .and_then(|r| r.get("promotable"))
        .map_or("unknown".to_owned(), |v| v.to_string());
    let diff = if candidate.diff_artifact_id.is_empty() {
        String::new()
    } else {
        match skillforge_store::artifacts::get_artifact(
            env.store.pool(),
            &candidate.diff_artifact_id,
        )
        .await?
        {
            Some(a) => BlobStore::in_home(env.home)
                .get(&a.hash)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default(),
            None => String::new(),
        }
    };
    let base_content =
        skillforge_store::templates::get_version(env.store.pool(), &candidate.base_version_id)
            .await?
            .map(|v| v.content_hash);
    let is_noop = base_content.as_deref() == Some(candidate.content_hash.as_str());
    let text = format!(
        "# Candidate review: {v}\n\nSession `{s}` · iteration `{i}` · base `{b}`\n\n\
         | | |\n|---|---|\n| selection score | {score} |\n| evaluator / test scores | {eval} |\n| gate status | not run |\n\
         | no-op (content unchanged) | {noop} |\n| promotable | {promotable} |\n| preference summary | {pref} |\n\n\
         ## Diff\n\n```diff\n{diff}\n```\n\n\
         Decide with `skillforge train continue --session {s} --promote {v}` or `--reject {v} --reason TEXT`.\n",
        v = candidate.version_id,
        s = session.id,
        i = it.id,
        b = candidate.base_version_id,
        score = candidate
            .score
            .map_or("none".to_owned(), |s| format!("{s:.3}")),
        eval = eval_in_words(eval_report.as_ref(), &candidate.eval_report_json),
        noop = if is_noop { "yes" } else { "no" },
        pref = if candidate.preference_summary.is_empty() {
            "none"
        } else {
            &candidate.preference_summary
        },
        diff = diff.trim_end(),
    );
    let path = env
        .iteration_dir(&session.id, &it.id)
        .join(CANDIDATE_REVIEW_FILE);
    write_file(&path, text.as_bytes())?;
    let mut meta = IterationMeta::parse(&it.metadata_json);
    if it.issue_number > 0 {
        let url = publish_candidate_comment(env, it, &text).await?;
        report
            .steps
            .push(format!("candidate review context published: {url}"));
        meta.candidate_review.url = url;
    }
    meta.candidate_review.status = "succeeded".into();
    meta.candidate_review.path = path.display().to_string();
    meta.candidate_decision.status = "waiting".into();
    advance_with_meta(env, it, TrainState::CandidateReviewPublished, &meta).await?;
    report
        .steps
        .push(format!("candidate review published: {}", path.display()));
    Ok(())
}

/// The evaluator report's scores for the review packet's table cell, in words (issue 35 item 3):
/// each score (`dimension_scores`, any `*score*` field) as `name 0.800`, the held-out replay as
/// `held-out replay: agreed A of P picked (R rankings)`, then why there is no candidate. `none`
/// without a report; a report with no score says so (the whole report is in `candidate show`).
fn eval_in_words(report: Option<&serde_json::Value>, raw: &str) -> String {
    use serde_json::Value;
    let Some(fields) = report.and_then(Value::as_object) else {
        return if raw.trim().is_empty() {
            "none".to_owned()
        } else {
            "not readable as JSON (`skillforge candidate show` prints it)".to_owned()
        };
    };
    let words = |key: &str| key.replace('_', " ");
    let mut parts = Vec::new();
    for (key, value) in fields {
        match value {
            Value::Number(n) if key.contains("score") => {
                if let Some(x) = n.as_f64() {
                    parts.push(format!("{} {x:.3}", words(key)));
                }
            }
            Value::Object(inner) if key.contains("score") => {
                for (dim, v) in inner {
                    if let Some(x) = v.as_f64() {
                        parts.push(format!("{} {x:.3}", words(dim)));
                    }
                }
            }
            Value::Object(inner) if key == "held_out_replay" => {
                let n = |k: &str| inner.get(k).and_then(Value::as_u64).unwrap_or(0);
                parts.push(format!(
                    "held-out replay: agreed {} of {} picked ({} rankings)",
                    n("agreed"),
                    n("picked"),
                    n("rankings")
                ));
            }
            _ => {}
        }
    }
    if parts.is_empty() {
        parts.push("no score in the evaluator report".to_owned());
    }
    if let Some(reason) = fields.get("no_candidate_reason").and_then(Value::as_str) {
        parts.push(format!("no candidate: {}", words(reason)));
    }
    parts.join("; ").replace('|', "\\|")
}

#[cfg(test)]
mod eval_words_tests {
    use super::eval_in_words;
    use serde_json::json;

    #[test]
    fn scores_read_as_words_never_json() {
        let check = |report: serde_json::Value, want: &str| {
            let raw = report.to_string();
            assert_eq!(eval_in_words(Some(&report), &raw), want);
        };
        check(
            json!({"optimizer": "x", "dimension_scores": {"clarity": 0.8, "coverage": 1}, "soft_score": 0.75}),
            "clarity 0.800; coverage 1.000; soft score 0.750",
        );
        check(
            json!({"held_out_replay": {"rankings": 4, "picked": 3, "agreed": 2}, "guidance": [{"a": 1}]}),
            "held-out replay: agreed 2 of 3 picked (4 rankings)",
        );
        check(
            json!({"promotable": false, "no_candidate_reason": "candidate_content_unchanged"}),
            "no score in the evaluator report; no candidate: candidate content unchanged",
        );
        assert_eq!(eval_in_words(None, ""), "none");
    }
}
