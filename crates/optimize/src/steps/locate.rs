//! Locating measurements: cheap `process` jobs that find where the cost sits, taken before any
//! implementation experiment they would change (seed: optimize-loop, loop.md 2.1 and 3.1; O-14).
//!
//! The command runs in the optimization branch's checkout. Its stdout is recorded as evidence;
//! a JSON object with an `estimate` ([`crate::backlog::Estimate`]) sets the hypothesis's numbers.
//! A command that cannot be taken is a blocker: the run wraps up naming it.

use crate::OptimizeError;
use crate::backlog::Estimate;
use crate::ctx::{Ctx, Event, passed};
use crate::log::ExperimentLog;

/// What [`locate`] ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Located {
    /// Every locating measurement asked for was taken (and recorded at a verified checkpoint).
    Taken,
    /// One could not be taken: the blocker, naming the hypothesis and the command; the run wraps
    /// up with it.
    Blocked(String),
}

/// Takes the locating measurements of hypotheses `ids`, in order, stopping at the first that
/// cannot be taken ([`Located::Blocked`], also noted in the log).
///
/// # Errors
/// As the job port and the verified write.
pub async fn locate(
    ctx: &Ctx<'_>,
    log: &mut ExperimentLog,
    ids: &[String],
) -> Result<Located, OptimizeError> {
    for id in ids {
        let Some(command) = log
            .hypothesis_backlog
            .iter()
            .find(|h| &h.id == id)
            .and_then(|h| h.locating.as_ref())
            .map(|l| l.command.clone())
        else {
            continue;
        };
        let spec = ctx
            .checkout_job(
                "locating",
                &command,
                &ctx.root.integration_worktree(),
                Default::default(),
                ctx.key(&format!("locate:{id}")),
            )
            .await?;
        let job = ctx.run_one(spec, "locating").await?;
        if !passed(&job) {
            let why = crate::ctx::failure_reason(&job);
            let reason = format!(
                "the locating measurement for {id} (`{command}`) could not be taken: {why}; implementing without it is not allowed"
            );
            log.notes.push(reason.clone());
            ctx.save(log, "blocker", |_| true)?;
            return Ok(Located::Blocked(reason));
        }
        let stdout = job
            .outcome
            .as_ref()
            .map(|o| o.stdout_tail.trim().to_owned())
            .unwrap_or_default();
        let estimate = serde_json::from_str::<serde_json::Value>(&stdout)
            .ok()
            .and_then(|v| v.get("estimate").cloned())
            .and_then(|e| serde_json::from_value::<Estimate>(e).ok());
        let h = log
            .hypothesis_backlog
            .iter_mut()
            .find(|h| &h.id == id)
            .expect("found above");
        let excerpt: String = stdout.chars().take(2000).collect();
        if let Some(o) = h.opportunity.as_mut() {
            o.evidence = format!("{}; locating measurement: {excerpt}", o.evidence);
            if let Some(e) = estimate {
                o.estimate = Some(e);
                o.expected_benefit = format!(
                    "{:.1}% relative (from the locating measurement)",
                    e.benefit * 100.0
                );
            }
        }
        if let Some(l) = h.locating.as_mut() {
            l.result = Some(excerpt);
        }
        let id2 = id.clone();
        ctx.save(log, "locating", move |l| {
            l.hypothesis_backlog
                .iter()
                .any(|h| h.id == id2 && !h.needs_locating())
        })?;
        ctx.emit(Event::Note(format!("locating measurement for {id} taken")));
    }
    Ok(Located::Taken)
}
