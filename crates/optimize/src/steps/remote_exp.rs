//! Remote experiments in the loop (`execution.backend: remote` with `execution.remote`): the
//! worker is an `agent` job with its own checkout (its attempt's scratch dir, never one of ours),
//! told the remote delta of the brief; it pushes `result.yaml` on the result ref
//! `optimize-exp/<spec>/exp-NNN` of the remote (seed: optimize-loop, loop.md 3.2, 3.3
//! "Collecting a remote result", 3.4 step 3; O-06, O-07, O-25, O-26, O-46, O-48).
//!
//! Collecting: a worker's `blocker:` line is a blocker report, never a result (O-06); the result
//! ref is fetched and accepted only under every check of [`crate::remote::accept`], else the
//! experiment is `error` with the reason and the worker's numbers are never repaired (O-25); an
//! accepted `result.yaml` is copied to `<state-root>/exp-NNN-result.yaml` and its pairing is the
//! `standalone` comparison with the worker's `machine` and `measured_by: worker` (O-26). The
//! degenerate gates are evaluated here on the worker's reported metrics.
//!
//! **Independent confirmation (O-46).** A worker's pair never makes a keep. When its decision is
//! eligible and asks for nothing more than the holdout, or asks for more selection samples, this
//! control plane fetches `head_sha`, checks it out detached in the experiment worktree and
//! measures it paired against `base_sha` on this machine at the full protocol (a second
//! `standalone` comparison, `measured_by: orchestrator`); the decision on those snapshots only is
//! the experiment's. A confirmation that is not a keep takes its terminal and records the
//! worker's claim as unconfirmed. A keep merges `head_sha`, never the result ref's tip (O-48).
//!
//! **Extra samples (O-26).** When the decision on the worker's pair asks for `add_sample` or
//! `confirm`, the worker is re-dispatched (a new `agent` job, key `exp-NNN:worker:more-K`) with
//! the brief plus a `<remote-worker-samples>` block: measure one more pair of the same `head_sha`
//! against `base_sha` and push `result.yaml` again on the same ref. Each accepted round (same
//! checks, and the same `head_sha`) is appended to the worker's pairing of the same entry, copied
//! to `exp-NNN-result-K.yaml`, and decided again: the entry stays one experiment.

use super::experiment::{NEEDS_DEPENDENCY, collect_worker, ladder, outcome_of, skeleton, terminal};
use crate::OptimizeError;
use crate::ctx::{Ctx, Event};
use crate::decide::{self, DecideConfig, DecideInput, Decision, Measured, NextMeasurement};
use crate::git;
use crate::log::{Comparison, ComparisonKind, Entry, ExperimentLog, Outcome};
use crate::remote::{self, RefFacts};
use crate::state::{OWN_FILES, side};
use skillforge_stage::fs::write_atomic;

/// `measured_by` of a pairing a remote worker produced.
pub const MEASURED_BY_WORKER: &str = "worker";
/// The prefix of a worker's final-message line reporting a blocker instead of a result (O-06).
pub const BLOCKER: &str = "blocker:";

/// Pushes the optimization branch to `url` so the worker can fetch `base` (loop.md 3.2 step 1).
///
/// # Errors
/// [`OptimizeError::Git`] when the push fails.
pub fn publish_base(ctx: &Ctx<'_>, url: &str, base: &str) -> Result<(), OptimizeError> {
    let branch = ctx.spec.branch();
    git::git(
        &ctx.repo,
        &[
            "push",
            "--quiet",
            "--force",
            url,
            &format!("{base}:refs/heads/{branch}"),
        ],
    )
    .map(|_| ())
}

/// The candidate commit of a remote entry (`commit:<head_sha>` on the worker's pairing).
pub fn head_sha(entry: &Entry) -> Option<String> {
    entry
        .comparisons
        .iter()
        .find(|c| c.measured_by == MEASURED_BY_WORKER)
        .and_then(|c| c.candidate.identity.strip_prefix("commit:"))
        .map(str::to_owned)
}

/// Collects remote experiment `n` through its selection decision (re-entrant, as
/// [`super::experiment::collect`]).
///
/// # Errors
/// As the steps; a rejected result is an outcome, not an error.
pub async fn collect(
    ctx: &Ctx<'_>,
    log: &mut ExperimentLog,
    n: u32,
    url: &str,
) -> Result<(), OptimizeError> {
    let mut entry = match log.entry(n) {
        Some(e) => e.clone(),
        None => match worker_result(ctx, log, n, url).await? {
            Some(e) => e,
            None => return Ok(()),
        },
    };
    if entry.outcome.is_terminal() || ctx.past_deadline(log) {
        // O-58: the worker's result is persisted; no re-dispatch or confirmation after the deadline
        return Ok(());
    }
    if !more_samples(ctx, log, &mut entry, url).await? {
        return Ok(());
    }
    confirm(ctx, log, &mut entry).await
}

/// The worker's pairing of `entry`.
fn worker_pairing(entry: &Entry) -> Option<&Comparison> {
    entry
        .comparisons
        .iter()
        .find(|c| c.measured_by == MEASURED_BY_WORKER)
}

/// The block appended to the brief of a re-dispatch for more samples of the same `head_sha`.
pub fn samples_block(
    base: &str,
    head: &str,
    command: &str,
    result_ref: &str,
    round: usize,
) -> String {
    format!(
        "\n<remote-worker-samples>\nThis is a re-dispatch for more samples (round {round}); your candidate is already pushed: head_sha {head}. Do not change it or implement anything. \
Check out {head} and {base}, run `{command}` 1 more time(s) on each, paired, and write result.yaml again with exactly the new samples (same shape, base_sha {base}, head_sha {head}). \
Commit it alone on top of {head} and push it to `{result_ref}`, replacing the previous result.\n</remote-worker-samples>\n"
    )
}

/// Re-dispatches the worker while the decision on its pairing asks for more selection samples
/// (O-26). `Ok(false)` when the experiment ended terminal on the way.
async fn more_samples(
    ctx: &Ctx<'_>,
    log: &mut ExperimentLog,
    entry: &mut Entry,
    url: &str,
) -> Result<bool, OptimizeError> {
    let n = entry.experiment;
    let independent = entry
        .comparisons
        .iter()
        .any(|c| c.kind == ComparisonKind::Standalone && c.measured_by != MEASURED_BY_WORKER);
    loop {
        let Some(pairing) = worker_pairing(entry) else {
            return Ok(true);
        };
        let wants_more = pairing.decision.as_ref().is_some_and(|d| {
            matches!(
                d.next_measurement,
                NextMeasurement::AddSample | NextMeasurement::Confirm
            )
        });
        if independent || !wants_more {
            return Ok(true);
        }
        let round = pairing.candidate.snapshot.n_samples();
        let head = head_sha(entry)
            .ok_or_else(|| OptimizeError::Invalid(format!("exp-{n:03} has no head_sha")))?;
        let brief =
            std::fs::read_to_string(ctx.root.root.join("briefs").join(format!("exp-{n:03}.md")))
                .map_err(|e| OptimizeError::Env(format!("read the exp-{n:03} brief: {e}")))?;
        let prompt = format!(
            "{brief}{}",
            samples_block(
                &entry.base_sha,
                &head,
                &ctx.spec.measurement.command,
                &entry.branch,
                round
            )
        );
        super::remote_exp::publish_base(ctx, url, &entry.base_sha)?;
        let mut payload =
            skillforge_runner_agent::AgentPayload::new(pending_runtime(ctx, log, n), prompt);
        payload.model = ctx.spec.execution.model.clone();
        payload.timeout_secs = ctx.spec.execution.worker_timeout_seconds;
        let timeout = ctx
            .spec
            .execution
            .worker_timeout_seconds
            .map(std::time::Duration::from_secs);
        let job = ctx
            .run_one(
                ctx.job(
                    "experiment",
                    &payload,
                    ctx.key(&format!("exp-{n:03}:worker:more-{round}")),
                    timeout,
                )?,
                "experiment running",
            )
            .await?;
        let message = job
            .outcome
            .as_ref()
            .and_then(|o| o.detail.get("final_message"))
            .and_then(|m| m.as_str())
            .unwrap_or("")
            .to_owned();
        let failure = if !crate::ctx::passed(&job) {
            Some(format!(
                "the sample re-dispatch (job {}) ended {}",
                job.id, job.state
            ))
        } else {
            message
                .lines()
                .find_map(|l| l.trim().strip_prefix(BLOCKER))
                .map(|b| format!("worker blocker on the sample re-dispatch: {}", b.trim()))
        };
        let required: Vec<String> = ctx
            .spec
            .objectives()
            .iter()
            .filter(|o| o.required)
            .map(|o| o.name.clone())
            .collect();
        let checked = match failure {
            Some(f) => Err(f),
            None => remote::collect(&ctx.repo, url, &entry.branch)
                .map_err(|e| e.to_string())
                .and_then(|f| {
                    remote::accept(&f, &entry.base_sha, &ctx.spec.scope, &required)
                        .map_err(|e| e.to_string())?;
                    if f.result.head_sha != head {
                        return Err(format!(
                            "the re-dispatch reported head_sha {} instead of {head}",
                            f.result.head_sha
                        ));
                    }
                    Ok(f)
                }),
        };
        let facts = match checked {
            Ok(f) => f,
            Err(reason) => {
                terminal(
                    ctx,
                    log,
                    entry.clone(),
                    Outcome::Error,
                    Measured::Error(format!("remote result rejected: {reason}")),
                    format!("remote result rejected: {reason}"),
                )?;
                return Ok(false);
            }
        };
        write_atomic(
            &ctx.root
                .root
                .join(format!("exp-{n:03}-result-{round}.yaml")),
            &facts.text,
        )?;
        let cfg = DecideConfig::from_spec(&ctx.spec);
        let pairing = entry
            .comparisons
            .iter_mut()
            .find(|c| c.measured_by == MEASURED_BY_WORKER)
            .expect("found above");
        append(
            &mut pairing.reference.snapshot,
            facts.result.baseline.as_ref(),
        );
        append(
            &mut pairing.candidate.snapshot,
            facts.result.candidate.as_ref(),
        );
        let aggregates = pairing
            .candidate
            .snapshot
            .metrics
            .iter()
            .map(|(k, m)| (k.clone(), m.aggregate))
            .collect();
        pairing.candidate.snapshot.gates =
            crate::gates::evaluate(&ctx.spec.metric.degenerate_gates, &aggregates);
        let d = decide::decide(
            &cfg,
            DecideInput {
                measured: &Measured::Ok,
                reference: &pairing.reference.snapshot,
                candidate: &pairing.candidate.snapshot,
                holdout: None,
            },
        );
        pairing.decision = Some(d.clone());
        entry.decision = Some(d.clone());
        entry.outcome = outcome_of(&d);
        entry.learnings.push(format!("sample round {round} re-dispatched from head {}; copied to exp-{n:03}-result-{round}.yaml", &head[..12.min(head.len())]));
        log.upsert(entry.clone());
        let samples = round + 1;
        ctx.save(log, "CP-3", move |l| {
            l.entry(n)
                .and_then(worker_pairing)
                .is_some_and(|c| c.candidate.snapshot.n_samples() >= samples)
        })?;
        if entry.outcome.is_terminal() {
            return Ok(false);
        }
    }
}

/// Appends every sample of `extra` to `snap`.
fn append(snap: &mut crate::snapshot::Snapshot, extra: Option<&crate::snapshot::Snapshot>) {
    for (name, m) in extra.map(|e| e.metrics.iter()).into_iter().flatten() {
        for v in &m.samples {
            snap.metrics.entry(name.clone()).or_default().push(*v);
        }
    }
}

fn pending_runtime(ctx: &Ctx<'_>, log: &ExperimentLog, n: u32) -> String {
    log.run_state
        .pending_waits
        .iter()
        .find(|w| w.experiment == n)
        .map(|w| w.runtime.clone())
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| ctx.spec.execution.runtime.clone())
}

/// Waits for the worker and reads its result: `None` when the experiment ended terminal.
async fn worker_result(
    ctx: &Ctx<'_>,
    log: &mut ExperimentLog,
    n: u32,
    url: &str,
) -> Result<Option<Entry>, OptimizeError> {
    let Some(wr) = collect_worker(ctx, log, n).await? else {
        super::experiment::not_arrived(ctx, log, n)?;
        return Ok(None);
    };
    let mut entry = skeleton(ctx, log, n, &wr)?;
    entry.branch = ctx.spec.experiment_branch(n);
    if !wr.ok {
        terminal(
            ctx,
            log,
            entry,
            Outcome::Error,
            Measured::Error(wr.message.clone()),
            wr.message,
        )?;
        return Ok(None);
    }
    if let Some(blocker) = wr
        .message
        .lines()
        .find_map(|l| l.trim().strip_prefix(BLOCKER))
        .map(str::trim)
    {
        // O-06: a blocker report, not a result: nothing is measured or recorded as one
        let note = format!("exp-{n:03}: the remote worker reported a blocker: {blocker}");
        log.notes.push(note.clone());
        ctx.emit(Event::Note(note));
        terminal(
            ctx,
            log,
            entry,
            Outcome::Error,
            Measured::Error(format!("worker blocker: {blocker}")),
            format!("worker blocker (no result): {blocker}"),
        )?;
        return Ok(None);
    }
    let deps: Vec<String> = wr
        .message
        .lines()
        .filter_map(|l| l.trim().strip_prefix(NEEDS_DEPENDENCY))
        .flat_map(|d| d.split(',').map(|s| s.trim().to_owned()))
        .filter(|d| !d.is_empty())
        .collect();
    if !deps.is_empty() {
        if let Some(h) = log
            .hypothesis_backlog
            .iter_mut()
            .find(|h| h.id == entry.hypothesis_id)
        {
            h.required_deps.extend(
                deps.iter()
                    .filter(|d| !h.required_deps.contains(d))
                    .cloned()
                    .collect::<Vec<_>>(),
            );
        }
        terminal(
            ctx,
            log,
            entry,
            Outcome::DeferredNeedsApproval,
            Measured::Ok,
            format!("needs unapproved dependencies: {}", deps.join(", ")),
        )?;
        return Ok(None);
    }
    let required: Vec<String> = ctx
        .spec
        .objectives()
        .iter()
        .filter(|o| o.required)
        .map(|o| o.name.clone())
        .collect();
    let facts = match remote::collect(&ctx.repo, url, &entry.branch) {
        Ok(f) => f,
        Err(e) => {
            terminal(
                ctx,
                log,
                entry,
                Outcome::Error,
                Measured::Error(e.to_string()),
                format!("remote result unreadable: {e}"),
            )?;
            return Ok(None);
        }
    };
    if let Err(reason) = remote::accept(&facts, &entry.base_sha, &ctx.spec.scope, &required) {
        // O-25: never repaired; logged and closed like a failed measurement
        terminal(
            ctx,
            log,
            entry,
            Outcome::Error,
            Measured::Error(format!("remote result rejected: {reason}")),
            format!("remote result rejected: {reason}"),
        )?;
        return Ok(None);
    }
    write_atomic(
        &ctx.root.root.join(format!("exp-{n:03}-result.yaml")),
        &facts.text,
    )?;
    accepted(ctx, log, &mut entry, &facts)?;
    Ok(Some(entry))
}

/// Records an accepted result as the worker's pairing and decides on it.
fn accepted(
    ctx: &Ctx<'_>,
    log: &mut ExperimentLog,
    entry: &mut Entry,
    facts: &RefFacts,
) -> Result<(), OptimizeError> {
    let r = &facts.result;
    let (mut reference, mut candidate) = (
        side(format!("commit:{}", r.base_sha)),
        side(format!("commit:{}", r.head_sha)),
    );
    reference.snapshot = r.baseline.clone().unwrap_or_default();
    candidate.snapshot = r.candidate.clone().unwrap_or_default();
    let aggregates = candidate
        .snapshot
        .metrics
        .iter()
        .map(|(k, m)| (k.clone(), m.aggregate))
        .collect();
    candidate.snapshot.gates =
        crate::gates::evaluate(&ctx.spec.metric.degenerate_gates, &aggregates);
    let cfg = DecideConfig::from_spec(&ctx.spec);
    let d = decide::decide(
        &cfg,
        DecideInput {
            measured: &Measured::Ok,
            reference: &reference.snapshot,
            candidate: &candidate.snapshot,
            holdout: None,
        },
    );
    entry.changed_files = facts.range_files.clone();
    entry.comparisons.push(Comparison {
        kind: ComparisonKind::Standalone,
        workload: ctx.spec.measurement.command.clone(),
        reference,
        candidate,
        machine: r.machine.clone(),
        measured_by: MEASURED_BY_WORKER.into(),
        decision: Some(d.clone()),
    });
    entry.decision = Some(d.clone());
    entry.outcome = outcome_of(&d);
    entry.learnings.push(format!(
        "remote result accepted from {} (head {}); copied to exp-{:03}-result.yaml",
        r.machine,
        &r.head_sha[..12.min(r.head_sha.len())],
        entry.experiment
    ));
    let n = entry.experiment;
    log.upsert(entry.clone());
    ctx.save(log, "CP-3", |l| {
        l.entry(n).is_some_and(|e| {
            e.comparisons
                .iter()
                .any(|c| c.measured_by == MEASURED_BY_WORKER)
        })
    })?;
    ctx.emit(Event::Outcome {
        experiment: n,
        outcome: format!("{} (worker's pair)", entry.outcome.label()),
        primary: None,
        preliminary: true,
    });
    Ok(())
}

/// Whether a worker's decision calls for the independent pairing: a would-be keep.
fn needs_confirmation(d: &decide::DecideResult) -> bool {
    match d.next_measurement {
        NextMeasurement::AddSample | NextMeasurement::Confirm => false,
        NextMeasurement::Holdout => d.eligible,
        NextMeasurement::None => d.eligible && d.decision == Decision::Keep,
    }
}

/// The independent confirmation of a remote result (O-46), re-entrant.
async fn confirm(
    ctx: &Ctx<'_>,
    log: &mut ExperimentLog,
    entry: &mut Entry,
) -> Result<(), OptimizeError> {
    let n = entry.experiment;
    let independent = entry
        .comparisons
        .iter()
        .any(|c| c.kind == ComparisonKind::Standalone && c.measured_by != MEASURED_BY_WORKER);
    let worker_decision = entry
        .comparisons
        .iter()
        .find(|c| c.measured_by == MEASURED_BY_WORKER)
        .and_then(|c| c.decision.clone());
    if !independent {
        let Some(d) = worker_decision.clone().filter(needs_confirmation) else {
            // not a would-be keep on the worker's own numbers: its decision stands (never a keep)
            let outcome = entry.decision.as_ref().map_or(Outcome::Inconclusive, |d| {
                if d.eligible {
                    Outcome::NotSelected
                } else {
                    outcome_of(d)
                }
            });
            let outcome = if outcome.is_terminal() {
                outcome
            } else {
                Outcome::Inconclusive
            };
            return terminal(
                ctx,
                log,
                entry.clone(),
                outcome,
                entry.measured.clone(),
                "the worker's pair is not a would-be keep; no independent confirmation".into(),
            );
        };
        let head = head_sha(entry)
            .ok_or_else(|| OptimizeError::Invalid(format!("exp-{n:03} has no head_sha")))?;
        git::worktree_detached(&ctx.repo, &ctx.root.experiment_worktree(n), &head)?;
        let base_tree = git::git(
            &ctx.repo,
            &["rev-parse", &format!("{}^{{tree}}", entry.base_sha)],
        )?;
        let identity = git::content_identity(&ctx.root.experiment_worktree(n), OWN_FILES)?;
        entry.comparisons.push(Comparison {
            kind: ComparisonKind::Standalone,
            workload: ctx.spec.measurement.command.clone(),
            reference: side(format!("tree:{base_tree}")),
            candidate: side(identity),
            machine: ctx.machine.clone(),
            measured_by: "orchestrator".into(),
            decision: None,
        });
        entry.learnings.push(format!(
            "independent confirmation of the worker's {} ({}) on {}",
            d.decision.label(),
            d.reason,
            ctx.machine
        ));
        log.upsert(entry.clone());
        ctx.save(log, "CP-3", |l| {
            l.entry(n).is_some_and(|e| e.comparisons.len() >= 2)
        })?;
    }
    let reference_dir = ctx.root.reference_worktree(&entry.base_sha);
    git::worktree_detached(&ctx.repo, &reference_dir, &entry.base_sha)?;
    let d = ladder(
        ctx,
        log,
        entry,
        ComparisonKind::Standalone,
        &reference_dir,
        &ctx.root.experiment_worktree(n),
        "confirm",
    )
    .await?;
    let confirmed = d.eligible
        && (d.next_measurement == NextMeasurement::Holdout
            || (d.decision == Decision::Keep && d.next_measurement == NextMeasurement::None));
    if !confirmed {
        let claim = worker_decision
            .map(|w| format!("{} ({})", w.decision.label(), w.reason))
            .unwrap_or_default();
        entry.learnings.push(format!("worker claim unconfirmed: the worker's pair said {claim}; the independent pairing on {} says {} ({})", ctx.machine, d.decision.label(), d.reason));
        log.upsert(entry.clone());
        ctx.save(log, "CP-3", |l| {
            l.entry(n).is_some_and(|e| {
                e.learnings
                    .iter()
                    .any(|x| x.starts_with("worker claim unconfirmed"))
            })
        })?;
    }
    Ok(())
}
