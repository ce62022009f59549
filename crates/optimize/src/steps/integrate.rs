//! Evaluating a batch: the holdout after selection, the winner's commit and merge, file-disjoint
//! runners-up cherry-picked and decided on fresh samples of the combined snapshot, and closing
//! the rest (seed: optimize-loop, loop.md 3.4; O-38, O-43, O-45, O-47 … O-52).

use std::collections::BTreeSet;
use std::path::Path;

use super::experiment::{book_judges, ladder, outcome_of, pair};
use super::judging;
use crate::OptimizeError;
use crate::ctx::{Ctx, Event};
use crate::decide::{self, DecideConfig, DecideInput, Decision, NextMeasurement};
use crate::git;
use crate::log::{Best, Comparison, ComparisonKind, Entry, ExperimentLog, Outcome};
use crate::measure::Sample;
use crate::spec::DEFAULT_MAX_RUNNER_UP_MERGES;
use crate::state::{OWN_FILES, side};

/// The learning of an eligible experiment left unmerged because the wall-clock deadline passed (O-58).
pub const DEADLINE_NOT_MERGED: &str = "max_wall_hours passed before integration; not merged";

/// Evaluates `batch` (loop.md 3.4). With `deadline_passed` nothing is integrated (O-58).
///
/// # Errors
/// As the git and measurement steps.
pub async fn evaluate(
    ctx: &Ctx<'_>,
    log: &mut ExperimentLog,
    batch: &[u32],
    deadline_passed: bool,
) -> Result<(), OptimizeError> {
    let mut ranked: Vec<(u32, f64)> = batch
        .iter()
        .filter_map(|n| log.entry(*n))
        .filter(|e| !e.outcome.is_terminal() && e.decision.as_ref().is_some_and(|d| d.eligible))
        .map(|e| {
            (
                e.experiment,
                e.decision
                    .as_ref()
                    .and_then(|d| d.rank_score)
                    .unwrap_or(0.0),
            )
        })
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    if deadline_passed {
        for (n, _) in &ranked {
            close(log, *n, Outcome::NotSelected, DEADLINE_NOT_MERGED);
        }
        ctx.save(log, "CP-3", |_| true)?;
        return cleanup(ctx, batch);
    }
    let mut winner = batch
        .iter()
        .copied()
        .find(|n| log.entry(*n).is_some_and(|e| e.outcome == Outcome::Kept));
    if winner.is_none() {
        for (n, _) in ranked.clone() {
            if ctx.past_deadline(log) {
                // O-58: the deadline passed during integration: nothing more is measured or merged
                close(log, n, Outcome::NotSelected, DEADLINE_NOT_MERGED);
                continue;
            }
            if log
                .entry(n)
                .is_some_and(|e| e.next_measurement() == NextMeasurement::Holdout)
            {
                holdout(ctx, log, n).await?;
            }
            let e = log.entry(n).expect("ranked from the log");
            let d = e.decision.as_ref().expect("eligible has a decision");
            if d.decision == Decision::Keep && d.next_measurement == NextMeasurement::None {
                keep(ctx, log, n)?;
                winner = Some(n);
                break;
            }
            let outcome = outcome_of(d);
            close(
                log,
                n,
                if outcome.is_terminal() {
                    outcome
                } else {
                    Outcome::Inconclusive
                },
                "the holdout did not confirm the gain; not kept",
            );
            ctx.save(log, "CP-3", |_| true)?;
        }
    }
    let Some(w) = winner else {
        return cleanup(ctx, batch);
    };
    let mut integrated: BTreeSet<String> = log
        .entry(w)
        .map(|e| e.changed_files.iter().cloned().collect())
        .unwrap_or_default();
    let max = ctx
        .spec
        .execution
        .max_runner_up_merges_per_batch
        .unwrap_or(DEFAULT_MAX_RUNNER_UP_MERGES) as usize;
    let (mut tried, mut failed) = (0, false);
    for (n, _) in ranked {
        let Some(e) = log.entry(n) else { continue };
        if e.outcome.is_terminal() {
            continue;
        }
        if ctx.past_deadline(log) {
            close(log, n, Outcome::NotSelected, DEADLINE_NOT_MERGED);
            continue;
        }
        if failed || tried >= max {
            close(
                log,
                n,
                Outcome::NotSelected,
                if failed {
                    "runner-up merging stopped after the first failed combination"
                } else {
                    "runner-up limit reached"
                },
            );
            continue;
        }
        let overlap: Vec<String> = e
            .changed_files
            .iter()
            .filter(|f| integrated.contains(*f))
            .cloned()
            .collect();
        if !overlap.is_empty() {
            close(
                log,
                n,
                Outcome::NotSelected,
                &format!(
                    "not file-disjoint with the kept change ({})",
                    overlap.join(", ")
                ),
            );
            continue;
        }
        tried += 1;
        let files = e.changed_files.clone();
        if runner_up(ctx, log, n).await? {
            integrated.extend(files);
        } else {
            failed = true;
        }
    }
    ctx.save(log, "CP-3", |_| true)?;
    cleanup(ctx, batch)
}

fn close(log: &mut ExperimentLog, n: u32, outcome: Outcome, learning: &str) {
    if let Some(e) = log.entry_mut(n) {
        e.outcome = outcome;
        e.learnings.push(learning.to_owned());
    }
}

/// Collects the held-out pair for experiment `n` and decides again (O-38); only called after selection.
async fn holdout(ctx: &Ctx<'_>, log: &mut ExperimentLog, n: u32) -> Result<(), OptimizeError> {
    let Some(command) = holdout_command(ctx) else {
        return Ok(());
    };
    let mut entry = log.entry(n).cloned().expect("ranked from the log");
    let reference_dir = ctx.root.reference_worktree(&entry.base_sha);
    let candidate_dir = ctx.root.experiment_worktree(n);
    let (r, c) = judged_holdout_pair(
        ctx,
        log,
        &entry,
        &command,
        &format!("exp-{n:03}:holdout:0"),
        (&reference_dir, &candidate_dir),
    )
    .await?;
    let sel = entry
        .standalone()
        .cloned()
        .expect("a standalone comparison exists");
    let mut holdout = Comparison {
        kind: ComparisonKind::Holdout,
        workload: command.clone(),
        reference: sel.reference.clone(),
        candidate: sel.candidate.clone(),
        machine: ctx.machine.clone(),
        measured_by: "orchestrator".into(),
        decision: None,
    };
    holdout.reference.snapshot = Default::default();
    holdout.candidate.snapshot = Default::default();
    let measured = match (r, c) {
        (Sample::Ok(ro), Sample::Ok(co)) => {
            holdout.reference.snapshot.push_sample(&ro.metrics);
            holdout.candidate.snapshot.push_sample(&co.metrics);
            decide::Measured::Ok
        }
        (Sample::Failed(m), _) | (_, Sample::Failed(m)) => m,
    };
    let cfg = DecideConfig::from_spec(&ctx.spec);
    let d = decide::decide(
        &cfg,
        DecideInput {
            measured: &measured,
            reference: &sel.reference.snapshot,
            candidate: &sel.candidate.snapshot,
            holdout: Some((&holdout.reference.snapshot, &holdout.candidate.snapshot)),
        },
    );
    holdout.decision = Some(d.clone());
    entry
        .comparisons
        .retain(|c| c.kind != ComparisonKind::Holdout);
    entry.comparisons.push(holdout);
    entry.decision = Some(d.clone());
    entry.outcome = outcome_of(&d);
    log.upsert(entry);
    ctx.save(log, "CP-3 holdout", |l| {
        l.entry(n).is_some_and(|e| {
            e.comparisons
                .iter()
                .any(|c| c.kind == ComparisonKind::Holdout)
        })
    })?;
    Ok(())
}

/// The held-out measurement: `measurement.holdout.command`, or, for a judge primary with a
/// `confirmation_seed` and no holdout command, the selection command judged on other items.
fn holdout_command(ctx: &Ctx<'_>) -> Option<String> {
    match (
        &ctx.spec.measurement.holdout,
        judging::judges(ctx).and_then(|j| j.confirmation_seed),
    ) {
        (Some(h), _) => Some(h.command.clone()),
        (None, Some(_)) => Some(ctx.spec.measurement.command.clone()),
        (None, None) => None,
    }
}

/// One holdout pair with its judge passes (O-38): a judge primary draws under
/// `confirmation_seed`, only items the selection sample did not draw; the items never reach the
/// entry's `judge.items` (O-39), only the spend is booked.
async fn judged_holdout_pair(
    ctx: &Ctx<'_>,
    log: &mut ExperimentLog,
    entry: &Entry,
    command: &str,
    key: &str,
    dirs: (&Path, &Path),
) -> Result<(Sample, Sample), OptimizeError> {
    let (r, c) = pair(ctx, command, key, dirs.0, dirs.1).await?;
    let Some(j) = judging::judges(ctx) else {
        return Ok((r, c));
    };
    let seed = j.confirmation_seed.unwrap_or(j.sample_seed);
    let drawn: BTreeSet<String> = if j.confirmation_seed.is_some() {
        entry
            .judge
            .iter()
            .flat_map(|r| r.items.iter().map(|i| i.item_id.clone()))
            .collect()
    } else {
        BTreeSet::new()
    };
    let judged = judging::judge_pair(ctx, r, c, key, seed, &drawn).await?;
    book_judges(ctx, log, entry.experiment, &judged);
    Ok((judged.reference, judged.candidate))
}

/// Commits the experiment's in-scope changes (once) and returns the commit.
fn commit_experiment(ctx: &Ctx<'_>, entry: &Entry) -> Result<String, OptimizeError> {
    let worktree = ctx.root.experiment_worktree(entry.experiment);
    let head = git::rev_parse(&worktree, "HEAD")?;
    if head != entry.base_sha {
        return Ok(head);
    }
    // only mutable-scope changes go into the commit (O-48)
    let files: Vec<String> = entry
        .changed_files
        .iter()
        .filter(|f| ctx.spec.scope.is_mutable(f))
        .cloned()
        .collect();
    git::commit_paths(
        &worktree,
        &files,
        &format!("optimize({}): {}", ctx.spec.name, entry.description),
    )
}

/// The O-43 note: a gain above the forecast's upper bound calls for a slower read (recorded in the
/// entry's learnings and the report; the harness is never patched in-run).
pub fn anti_gaming_note(entry: &Entry, primary: &str) -> Option<String> {
    let gain = entry
        .decision
        .as_ref()?
        .objectives
        .iter()
        .find(|o| o.name == primary)?
        .relative_gain;
    let high = entry.forecast.as_ref()?.estimate?.benefit_high?;
    (gain > high).then(|| format!("gain {:.1}% exceeds the forecast's upper bound {:.1}%: the diff calls for a slower read against the description and constraints", gain * 100.0, high * 100.0))
}

/// Commits and merges the winner into the optimization branch (O-48): idempotent across a crash.
fn keep(ctx: &Ctx<'_>, log: &mut ExperimentLog, n: u32) -> Result<(), OptimizeError> {
    let entry = log.entry(n).cloned().expect("winner is in the log");
    let sha = commit_experiment(ctx, &entry)?;
    let integration = ctx.root.integration_worktree();
    if !git::is_ancestor(&integration, &sha, "HEAD") {
        git::git(
            &integration,
            &[
                "-c",
                "user.name=skillforge optimize",
                "-c",
                "user.email=optimize@skillforge.invalid",
                "merge",
                "--no-ff",
                "-m",
                &format!("optimize({}): merge exp-{n:03}", ctx.spec.name),
                &sha,
            ],
        )?;
    }
    let head = git::rev_parse(&integration, "HEAD")?;
    let note = anti_gaming_note(&entry, &ctx.spec.metric.primary.name);
    let e = log.entry_mut(n).expect("winner is in the log");
    e.outcome = Outcome::Kept;
    e.learnings.push(format!(
        "kept: merged into {} at {}",
        ctx.spec.branch(),
        &head[..12]
    ));
    if let Some(note) = note {
        e.learnings.push(note);
    }
    let snap = e
        .standalone()
        .map(|c| c.candidate.snapshot.clone())
        .unwrap_or_default();
    log.best = Best {
        experiment: Some(n),
        sha: head,
        worst_cases: snap.worst_cases.clone(),
        metrics: snap,
    };
    ctx.save(log, "integration", |l| {
        l.entry(n).is_some_and(|e| e.outcome == Outcome::Kept) && l.best.experiment == Some(n)
    })?;
    ctx.emit(Event::Outcome {
        experiment: n,
        outcome: "kept".into(),
        primary: None,
        preliminary: false,
    });
    Ok(())
}

/// Cherry-picks a runner-up onto the new baseline and decides the combination on fresh samples
/// (O-50); reverts it when not kept. Returns whether it was kept.
async fn runner_up(ctx: &Ctx<'_>, log: &mut ExperimentLog, n: u32) -> Result<bool, OptimizeError> {
    let mut entry = log.entry(n).cloned().expect("runner-up is in the log");
    let sha = commit_experiment(ctx, &entry)?;
    let integration = ctx.root.integration_worktree();
    let pre = git::rev_parse(&integration, "HEAD")?;
    if git::git(
        &integration,
        &[
            "-c",
            "user.name=skillforge optimize",
            "-c",
            "user.email=optimize@skillforge.invalid",
            "cherry-pick",
            &sha,
        ],
    )
    .is_err()
    {
        let _ = git::git(&integration, &["cherry-pick", "--abort"]);
        entry.outcome = Outcome::RunnerUpReverted;
        entry
            .learnings
            .push("cherry-pick onto the new baseline conflicted".into());
        log.upsert(entry);
        return Ok(false);
    }
    let reference_dir = ctx.root.reference_worktree(&pre);
    git::worktree_detached(&ctx.repo, &reference_dir, &pre)?;
    let pre_tree = git::git(&integration, &["rev-parse", &format!("{pre}^{{tree}}")])?;
    let identity = git::content_identity(&integration, OWN_FILES)?;
    entry
        .comparisons
        .retain(|c| c.kind != ComparisonKind::Integrated);
    entry.comparisons.push(Comparison {
        kind: ComparisonKind::Integrated,
        workload: ctx.spec.measurement.command.clone(),
        reference: side(format!("tree:{pre_tree}")),
        candidate: side(identity),
        machine: ctx.machine.clone(),
        measured_by: "orchestrator".into(),
        decision: None,
    });
    let mut d = ladder(
        ctx,
        log,
        &mut entry,
        ComparisonKind::Integrated,
        &reference_dir,
        &integration,
        "int",
    )
    .await?;
    if d.next_measurement == NextMeasurement::Holdout
        && let Some(command) = holdout_command(ctx)
    {
        d = combined_holdout(ctx, log, &mut entry, &command, &reference_dir, &integration).await?;
    }
    let kept =
        d.eligible && d.decision == Decision::Keep && d.next_measurement == NextMeasurement::None;
    if kept {
        let head = git::rev_parse(&integration, "HEAD")?;
        entry.outcome = Outcome::RunnerUpKept;
        entry
            .learnings
            .push(format!("runner-up kept in combination at {}", &head[..12]));
        let snap = entry
            .comparisons
            .iter()
            .find(|c| c.kind == ComparisonKind::Integrated)
            .map(|c| c.candidate.snapshot.clone())
            .unwrap_or_default();
        log.best = Best {
            experiment: Some(n),
            sha: head,
            worst_cases: snap.worst_cases.clone(),
            metrics: snap,
        };
    } else {
        git::git(&integration, &["reset", "--hard", &pre])?;
        entry.outcome = Outcome::RunnerUpReverted;
        entry.learnings.push(format!(
            "promising alone but neutral/harmful in combination ({})",
            d.reason
        ));
    }
    let _ = git::remove_worktree(&ctx.repo, &reference_dir);
    log.upsert(entry);
    ctx.save(log, "CP-3 runner-up", |l| {
        l.entry(n)
            .is_some_and(|e| matches!(e.outcome, Outcome::RunnerUpKept | Outcome::RunnerUpReverted))
    })?;
    ctx.emit(Event::Outcome {
        experiment: n,
        outcome: log.entry(n).map(|e| e.outcome.label()).unwrap_or_default(),
        primary: None,
        preliminary: false,
    });
    Ok(kept)
}

/// The held-out pair of a combined snapshot, persisted as its own `kind: holdout` record beside
/// the integrated one (O-24, O-38), and the decision on it.
async fn combined_holdout(
    ctx: &Ctx<'_>,
    log: &mut ExperimentLog,
    entry: &mut Entry,
    command: &str,
    reference_dir: &Path,
    candidate_dir: &Path,
) -> Result<decide::DecideResult, OptimizeError> {
    let n = entry.experiment;
    let (r, c) = judged_holdout_pair(
        ctx,
        log,
        entry,
        command,
        &format!("exp-{n:03}:int-holdout:0"),
        (reference_dir, candidate_dir),
    )
    .await?;
    let integrated = entry
        .comparisons
        .iter()
        .find(|c| c.kind == ComparisonKind::Integrated)
        .cloned()
        .expect("integrated comparison exists");
    let mut holdout = Comparison {
        kind: ComparisonKind::Holdout,
        workload: format!("{command} (integrated)"),
        reference: side(integrated.reference.identity.clone()),
        candidate: side(integrated.candidate.identity.clone()),
        machine: ctx.machine.clone(),
        measured_by: "orchestrator".into(),
        decision: None,
    };
    let measured = match (r, c) {
        (Sample::Ok(ro), Sample::Ok(co)) => {
            holdout.reference.snapshot.push_sample(&ro.metrics);
            holdout.candidate.snapshot.push_sample(&co.metrics);
            decide::Measured::Ok
        }
        (Sample::Failed(m), _) | (_, Sample::Failed(m)) => m,
    };
    let cfg = DecideConfig::from_spec(&ctx.spec);
    let d = decide::decide(
        &cfg,
        DecideInput {
            measured: &measured,
            reference: &integrated.reference.snapshot,
            candidate: &integrated.candidate.snapshot,
            holdout: Some((&holdout.reference.snapshot, &holdout.candidate.snapshot)),
        },
    );
    holdout.decision = Some(d.clone());
    entry.comparisons.push(holdout);
    if let Some(i) = entry
        .comparisons
        .iter_mut()
        .find(|c| c.kind == ComparisonKind::Integrated)
    {
        i.decision = Some(d.clone());
    }
    Ok(d)
}

/// Removes the batch's worktrees, experiment branches and reference checkouts.
fn cleanup(ctx: &Ctx<'_>, batch: &[u32]) -> Result<(), OptimizeError> {
    for n in batch {
        git::remove_worktree(&ctx.repo, &ctx.root.experiment_worktree(*n))?;
        let branch = ctx.spec.experiment_branch(*n);
        if git::branch_exists(&ctx.repo, &branch) {
            git::git(&ctx.repo, &["branch", "-D", &branch])?;
        }
    }
    let dir = ctx.root.root.join("worktrees");
    if let Ok(rd) = std::fs::read_dir(&dir) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with("ref-") {
                git::remove_worktree(&ctx.repo, &e.path())?;
            }
        }
    }
    let _ = Path::new("");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backlog::tests::hyp;
    use crate::decide::{DecideResult, Measured, ObjectiveResult};

    // O-43
    #[test]
    fn o43_a_gain_above_the_forecast_upper_bound_calls_for_a_slower_read() {
        let mut h = hyp("h", "algorithm", "low", Some(0.1));
        h.opportunity
            .as_mut()
            .unwrap()
            .estimate
            .as_mut()
            .unwrap()
            .benefit_high = Some(0.2);
        let mut e = crate::state::entry_from_marker(
            &crate::state::Marker { experiment: 1, hypothesis_id: "h".into(), base_sha: "b".into(), measured: Measured::Ok, reference: side("r".into()), candidate: side("c".into()), changed_files: vec![], scope_violations: vec![], worst_cases: vec![], worker_message: String::new() },
            &ExperimentLog { hypothesis_backlog: vec![h], ..ExperimentLog::default() },
            &crate::spec::Spec::parse("name: ops\ndescription: d\nmetric:\n  primary: { name: ops, direction: minimize }\nmeasurement: { command: sh m.sh }\nscope: { mutable: [src] }\n", "t.yaml").unwrap(),
            "sh m.sh",
            "m",
        );
        let decision = |gain: f64| DecideResult {
            decision: Decision::Keep,
            next_measurement: NextMeasurement::None,
            eligible: true,
            rank_score: Some(gain),
            target_reached: false,
            objectives: vec![ObjectiveResult {
                name: "ops".into(),
                required: true,
                reference: 100.0,
                candidate: 100.0 * (1.0 - gain),
                relative_gain: gain,
                threshold: 0.01,
                verdict: "improved".into(),
            }],
            reason: String::new(),
            pace: None,
        };
        e.decision = Some(decision(0.15));
        assert_eq!(anti_gaming_note(&e, "ops"), None);
        e.decision = Some(decision(0.6));
        assert!(
            anti_gaming_note(&e, "ops")
                .is_some_and(|n| n.contains("slower read") && n.contains("60.0%"))
        );
    }
}
