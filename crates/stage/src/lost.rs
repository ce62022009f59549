//! What a queue that lost its data took with it: the store's pending work the queue no longer has.
//!
//! The store records every job a control plane enqueues until its first result is applied
//! ([`skillforge_store::submitted`]). When the queue reports a lost namespace
//! ([`skillforge_engine::NamespaceLoss`], issue 12 item 6), those records are the work the store
//! still expects; the ones the queue cannot find will never report, and [`LostWork`] names them.

use std::fmt;

use skillforge_engine::{EngineError, QueueBackend};
use skillforge_store::Store;
use skillforge_store::submitted::{Submitted, pending};

/// At most this many pending jobs are looked up in the queue per report (the rest are counted).
pub const LOST_WORK_CHECK_LIMIT: u32 = 200;

/// The store's pending work the queue no longer has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostWork {
    /// Pending jobs not found in the queue, oldest first.
    pub missing: Vec<Submitted>,
    /// Pending jobs looked up (at most [`LOST_WORK_CHECK_LIMIT`]).
    pub checked: usize,
    /// Pending jobs the store holds in all.
    pub pending_total: u64,
}

/// Looks the store's pending jobs up in `queue` and returns the missing ones.
///
/// # Errors
/// The queue's; a store error as [`EngineError::Backend`] with backend `store`.
pub async fn lost_work(queue: &dyn QueueBackend, store: &Store) -> Result<LostWork, EngineError> {
    let (rows, pending_total) =
        pending(store.pool(), LOST_WORK_CHECK_LIMIT)
            .await
            .map_err(|e| EngineError::Backend {
                backend: "store",
                message: e.to_string(),
            })?;
    let checked = rows.len();
    let mut missing = Vec::new();
    for row in rows {
        if queue.get(&row.job_id).await?.is_none() {
            missing.push(row);
        }
    }
    Ok(LostWork {
        missing,
        checked,
        pending_total,
    })
}

impl fmt::Display for LostWork {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.missing.is_empty() {
            return write!(
                f,
                "the store's pending work is all still in the queue ({} job(s) checked)",
                self.checked
            );
        }
        write!(
            f,
            "{} job(s) the store awaits are gone from the queue",
            self.missing.len()
        )?;
        if self.checked < usize::try_from(self.pending_total).unwrap_or(usize::MAX) {
            write!(
                f,
                " (first {} of {} pending checked)",
                self.checked, self.pending_total
            )?;
        }
        f.write_str(":")?;
        for job in &self.missing {
            write!(f, " {} ({}/{}", job.job_id, job.workflow, job.stage)?;
            if let Some(key) = &job.idempotency_key {
                write!(f, ", key `{key}`")?;
            }
            write!(f, ", submitted {})", job.submitted_at)?;
        }
        f.write_str(
            "; their results will never arrive: `skillforge jobs resubmit-lost` enqueues them again, or re-run the \
             workflow steps that submitted them",
        )
    }
}

/// What [`resubmit_lost`] did with one lost job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resubmitted {
    /// Enqueued again from its recorded spec (same idempotency key) as job `new_id`.
    Again {
        /// The lost job.
        lost: Submitted,
        /// The job enqueued in its place.
        new_id: String,
    },
    /// Not enqueued again, and why.
    Skipped {
        /// The lost job.
        lost: Submitted,
        /// Why (no recorded spec, input files lost with the queue).
        reason: String,
    },
}

/// Enqueues again, from the spec the store recorded ([`skillforge_store::submitted::spec_of`]),
/// each job of the store's pending work the queue no longer has ([`lost_work`]), through
/// [`super::submit_recorded`] (the new job replaces the lost one in the outbox; its idempotency
/// key is the lost job's, so a step waiting by key finds it). A job whose input files travelled
/// through the queue's transfer area is skipped (they went with the queue's data: re-run the
/// step that submitted it), as is one recorded without a spec (an older build).
///
/// # Errors
/// The queue's; a store error as [`EngineError::Backend`] with backend `store`.
pub async fn resubmit_lost(
    queue: &dyn QueueBackend,
    store: &Store,
) -> Result<Vec<Resubmitted>, EngineError> {
    let store_err = |e: skillforge_store::StoreError| EngineError::Backend {
        backend: "store",
        message: e.to_string(),
    };
    let work = lost_work(queue, store).await?;
    let mut out = Vec::with_capacity(work.missing.len());
    for lost in work.missing {
        let Some(json) = skillforge_store::submitted::spec_of(store.pool(), &lost.job_id)
            .await
            .map_err(store_err)?
        else {
            out.push(Resubmitted::Skipped { lost, reason: "no spec recorded (submitted by an older build): re-run the step that submitted it".into() });
            continue;
        };
        let spec: skillforge_engine::JobSpec = match serde_json::from_str(&json) {
            Ok(spec) => spec,
            Err(e) => {
                out.push(Resubmitted::Skipped {
                    lost,
                    reason: format!("its recorded spec does not parse: {e}"),
                });
                continue;
            }
        };
        if !spec.files.inputs.is_empty() {
            out.push(Resubmitted::Skipped {
                lost,
                reason:
                    "its input files went with the queue's data: re-run the step that submitted it"
                        .into(),
            });
            continue;
        }
        let enqueued = super::submit_recorded(queue, store, &spec).await?;
        skillforge_store::submitted::forget(store.pool(), &lost.job_id)
            .await
            .map_err(store_err)?;
        out.push(Resubmitted::Again {
            lost,
            new_id: enqueued.job_id,
        });
    }
    Ok(out)
}
