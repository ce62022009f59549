//! Re-running one harvest leg of a merged PR (S-27: "re-running a leg (incl. a re-review by
//! another family) re-upserts only its own row"): the leg's job again, under a new dispatch key
//! `<merge's key>#rerun-<n>`, whose result the [`super::HarvestHandler`] writes to that leg's
//! row in place. The floor row and the other legs' rows are not touched; nothing is harvested
//! again.

use skillforge_engine::QueueBackend;
use skillforge_store::Store;
use skillforge_store::harvest::{LegJob, leg_jobs_of, record_leg_job};

use super::apply::{HarvestError, LegDispatch, dispatch_legs};
use super::legs::Leg;

/// Why a leg cannot be re-run.
#[derive(Debug, thiserror::Error)]
pub enum RerunError {
    /// The merge of the PR never dispatched this leg (leg off, PR not harvested, no checkout).
    #[error(
        "{repo}#{pr} has no dispatched `{leg}` leg (a leg is dispatched when the PR's merge is harvested with the leg on \
         and a checkout recorded: `harvest attribute --checkout`, then `harvest outcome --outcome merged`)"
    )]
    NotDispatched {
        /// `owner/repo`.
        repo: String,
        /// PR number.
        pr: i64,
        /// The leg's name.
        leg: &'static str,
    },
    /// The leg's last job is gone from the queue (retention, or a queue that lost its data).
    #[error(
        "the `{leg}` leg job {job_id} of {repo}#{pr} is no longer in the queue, so its payload is unknown; report the merge \
         again (`harvest outcome`) to dispatch the leg anew"
    )]
    JobGone {
        /// `owner/repo`.
        repo: String,
        /// PR number.
        pr: i64,
        /// The leg's name.
        leg: &'static str,
        /// The job looked for.
        job_id: String,
    },
    /// The store or queue failed.
    #[error(transparent)]
    Harvest(#[from] HarvestError),
}

/// Enqueues `leg` of `repo#pr` again (the payload of its latest dispatched job, a new dispatch
/// key) and returns the new job's id. Two re-runs asked for at once may share one key (and so one
/// job): each re-run is a request to refresh the row, not a count.
///
/// # Errors
/// [`RerunError::NotDispatched`], [`RerunError::JobGone`] (usage: exit 2 at the CLI); otherwise
/// the store's or queue's.
pub async fn rerun_leg(
    backend: &dyn QueueBackend,
    store: &Store,
    repo: &str,
    pr: i64,
    leg: Leg,
) -> Result<String, RerunError> {
    let dispatches = leg_jobs_of(store.pool(), repo, pr, leg.name())
        .await
        .map_err(HarvestError::from)?;
    let not_dispatched = || RerunError::NotDispatched {
        repo: repo.to_owned(),
        pr,
        leg: leg.name(),
    };
    let base = dispatches.first().ok_or_else(not_dispatched)?;
    let last = dispatches
        .iter()
        .rev()
        .find(|d| !d.job_id.is_empty())
        .ok_or_else(not_dispatched)?;
    let job = backend
        .get(&last.job_id)
        .await
        .map_err(HarvestError::from)?
        .ok_or_else(|| RerunError::JobGone {
            repo: repo.to_owned(),
            pr,
            leg: leg.name(),
            job_id: last.job_id.clone(),
        })?;
    let key = format!("{}#rerun-{}", base.dispatch_key, dispatches.len());
    let mut spec = job.spec;
    spec.idempotency_key = Some(key.clone());
    spec.not_before_ms = None;
    let mut tx = store.begin().await.map_err(HarvestError::from)?;
    record_leg_job(
        &mut tx,
        &LegJob {
            dispatch_key: key,
            job_id: String::new(),
            ..last.clone()
        },
    )
    .await
    .map_err(HarvestError::from)?;
    tx.commit()
        .await
        .map_err(|e| HarvestError::from(skillforge_store::StoreError::from(e)))?;
    let enqueued = dispatch_legs(
        backend,
        store,
        &[LegDispatch {
            leg,
            spec,
            repo: repo.to_owned(),
            pr,
        }],
    )
    .await?;
    // `dispatch_legs` records a refused enqueue as the leg's failure event; say it here too.
    let (_, job_id) = enqueued.into_iter().next().ok_or_else(|| {
        HarvestError::Queue(skillforge_engine::EngineError::Config(format!(
            "the queue refused the re-run of the `{}` leg",
            leg.name()
        )))
    })?;
    Ok(job_id)
}
