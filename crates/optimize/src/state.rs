//! The run's state root and its files, the per-experiment `result.yaml` crash-recovery marker,
//! and the recovery scan (seed: optimize-loop, loop.md 3.3 step 2, 3.7 "Crash recovery"; O-29, O-66).
//!
//! Layout of `<home>/optimize/<spec>/`:
//!
//! ```text
//! run.yaml              repository, spec path, when it was initialised
//! experiment-log.yaml   the log (source of truth)
//! strategy-digest.md    written at every CP-4
//! source-digest.md      written once at init
//! judge-cache.yaml      content hash → judged item
//! exp-NNN-result.yaml   copies of accepted remote results
//! report.md             the wrap-up report
//! worktrees/exp-NNN     experiment worktrees (each holds its result.yaml marker)
//! worktrees/ref-<sha>   detached reference checkouts
//! worktrees/integration the optimization branch
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::OptimizeError;
use super::decide::Measured;
use super::log::{Comparison, ComparisonKind, Entry, ExperimentLog, Outcome, Side};
use super::snapshot::{Snapshot, WorstCase};
use skillforge_stage::fs::write_atomic;

/// The marker's file name inside an experiment worktree (never committed, never a scope change).
pub const MARKER_FILE: &str = "result.yaml";
/// Files of the orchestrator's own inside a worktree: never scope changes, never committed.
pub const OWN_FILES: &[&str] = &[MARKER_FILE, ".git-optimize-index"];

/// Where one run keeps its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateRoot {
    /// `<home>/optimize/<spec>`.
    pub root: PathBuf,
}

impl StateRoot {
    /// The state root of spec `name` under `home`.
    pub fn new(home: &Path, name: &str) -> Self {
        Self {
            root: home.join("optimize").join(name),
        }
    }

    /// `run.yaml`.
    pub fn run_file(&self) -> PathBuf {
        self.root.join("run.yaml")
    }

    /// `source-digest.md`.
    pub fn source_digest(&self) -> PathBuf {
        self.root.join("source-digest.md")
    }

    /// `strategy-digest.md`.
    pub fn strategy_digest(&self) -> PathBuf {
        self.root.join(super::digest::DIGEST_FILE)
    }

    /// `judge-cache.yaml`.
    pub fn judge_cache(&self) -> PathBuf {
        self.root.join("judge-cache.yaml")
    }

    /// `report.md`.
    pub fn report(&self) -> PathBuf {
        self.root.join("report.md")
    }

    /// The worktree of experiment `n`.
    pub fn experiment_worktree(&self, n: u32) -> PathBuf {
        self.root.join("worktrees").join(format!("exp-{n:03}"))
    }

    /// The detached reference checkout of `sha`.
    pub fn reference_worktree(&self, sha: &str) -> PathBuf {
        self.root
            .join("worktrees")
            .join(format!("ref-{}", &sha[..sha.len().min(12)]))
    }

    /// The optimization branch's worktree.
    pub fn integration_worktree(&self) -> PathBuf {
        self.root.join("worktrees").join("integration")
    }
}

/// `run.yaml`: what `init` recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFile {
    /// The project repository.
    pub repo: PathBuf,
    /// The spec file as given to init.
    pub spec_path: PathBuf,
    /// The spec text as loaded at init (a changed spec file is refused on resume).
    pub spec_text: String,
    /// Unix seconds.
    pub created_at: i64,
}

/// The crash-recovery marker, written right after each measurement and before the log (O-29).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Marker {
    /// Experiment number.
    pub experiment: u32,
    /// Hypothesis id.
    pub hypothesis_id: String,
    /// Base commit.
    pub base_sha: String,
    /// How the last sample ended.
    pub measured: Measured,
    /// Reference side.
    pub reference: Side,
    /// Candidate side.
    pub candidate: Side,
    /// In-scope changed files.
    pub changed_files: Vec<String>,
    /// Reverted out-of-scope files.
    pub scope_violations: Vec<String>,
    /// Worst cases.
    pub worst_cases: Vec<WorstCase>,
    /// The worker's final message.
    #[serde(default)]
    pub worker_message: String,
}

/// Writes the marker into the experiment's worktree.
///
/// # Errors
/// [`OptimizeError::Env`] when it cannot be written.
pub fn write_marker(worktree: &Path, marker: &Marker) -> Result<(), OptimizeError> {
    let text = serde_norway::to_string(marker)
        .map_err(|e| OptimizeError::Invalid(format!("serialize marker: {e}")))?;
    Ok(write_atomic(&worktree.join(MARKER_FILE), &text)?)
}

/// Reads a marker, `None` when absent.
///
/// # Errors
/// [`OptimizeError::Invalid`] when present but unreadable.
pub fn read_marker(worktree: &Path) -> Result<Option<Marker>, OptimizeError> {
    let path = worktree.join(MARKER_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            super::check_yaml(&text, &format!("marker `{}`", path.display()))?;
            serde_norway::from_str(&text)
                .map(Some)
                .map_err(|e| OptimizeError::Invalid(format!("marker `{}`: {e}", path.display())))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(OptimizeError::Env(format!(
            "read `{}`: {e}",
            path.display()
        ))),
    }
}

/// The entry a marker stands for, with the forecast frozen from the backlog (O-19); the outcome
/// stays `measured` with no decision, so the loop decides it again.
pub fn entry_from_marker(
    marker: &Marker,
    log: &ExperimentLog,
    spec: &super::spec::Spec,
    workload: &str,
    machine: &str,
) -> Entry {
    let hyp = log
        .hypothesis_backlog
        .iter()
        .find(|h| h.id == marker.hypothesis_id);
    Entry {
        experiment: marker.experiment,
        hypothesis_id: marker.hypothesis_id.clone(),
        description: hyp.map(|h| h.description.clone()).unwrap_or_default(),
        category: hyp.map(|h| h.category.clone()).unwrap_or_default(),
        forecast: hyp.and_then(|h| h.opportunity.clone()),
        branch: spec.experiment_branch(marker.experiment),
        base_sha: marker.base_sha.clone(),
        outcome: Outcome::Measured,
        measured: marker.measured.clone(),
        decision: None,
        changed_files: marker.changed_files.clone(),
        scope_violations: marker.scope_violations.clone(),
        comparisons: vec![Comparison {
            kind: ComparisonKind::Standalone,
            workload: workload.to_owned(),
            reference: marker.reference.clone(),
            candidate: marker.candidate.clone(),
            machine: machine.to_owned(),
            measured_by: "orchestrator".into(),
            decision: None,
        }],
        worst_cases: marker.worst_cases.clone(),
        judge: None,
        learnings: vec![],
        cost: Default::default(),
        regressions: vec![],
        worker_message: marker.worker_message.clone(),
        spend: Default::default(),
    }
}

/// The recovery scan (O-66): markers of pending experiments whose measurement is not yet in the
/// log (absent, or with fewer samples than the marker) become or refresh their entries. Returns
/// the recovered experiment numbers.
pub fn recover_markers(
    root: &StateRoot,
    log: &mut ExperimentLog,
    spec: &super::spec::Spec,
    machine: &str,
) -> Result<Vec<u32>, OptimizeError> {
    let mut recovered = Vec::new();
    let pending: Vec<u32> = log
        .run_state
        .pending_waits
        .iter()
        .map(|w| w.experiment)
        .collect();
    for n in pending {
        let Some(marker) = read_marker(&root.experiment_worktree(n))? else {
            continue;
        };
        let in_log = log
            .entry(n)
            .and_then(Entry::standalone)
            .map_or(0, |c| c.candidate.snapshot.n_samples());
        let in_marker = marker.candidate.snapshot.n_samples();
        let is_missing = log.entry(n).is_none();
        if is_missing || in_marker > in_log {
            let mut entry =
                entry_from_marker(&marker, log, spec, &spec.measurement.command, machine);
            if let Some(old) = log.entry(n) {
                entry.forecast = old.forecast.clone();
                entry.description = old.description.clone();
                entry.category = old.category.clone();
            }
            log.upsert(entry);
            log.notes
                .push(format!("recovered exp-{n:03} from its result.yaml marker"));
            recovered.push(n);
        }
    }
    Ok(recovered)
}

/// A fresh snapshot side.
pub fn side(identity: String) -> Side {
    Side {
        identity,
        snapshot: Snapshot::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backlog::tests::hyp;
    use crate::log::PendingWait;
    use crate::spec::Spec;

    fn spec() -> Spec {
        Spec::parse("name: ops\ndescription: d\nmetric:\n  primary: { name: ops, direction: minimize }\nmeasurement: { command: sh m.sh }\nscope: { mutable: [src] }\n", "t.yaml").unwrap()
    }

    fn marker(n: u32, samples: usize) -> Marker {
        let mut cand = side("tree:c".into());
        for _ in 0..samples {
            cand.snapshot
                .push_sample(&[("ops".to_string(), 10.0)].into_iter().collect());
        }
        Marker {
            experiment: n,
            hypothesis_id: "h-1".into(),
            base_sha: "b".into(),
            measured: Measured::Ok,
            reference: side("tree:r".into()),
            candidate: cand,
            changed_files: vec!["src/a".into()],
            scope_violations: vec![],
            worst_cases: vec![],
            worker_message: String::new(),
        }
    }

    // O-66, O-19
    #[test]
    fn o66_markers_not_in_the_log_are_recovered_once_with_the_frozen_forecast() {
        let dir = tempfile::tempdir().unwrap();
        let root = StateRoot {
            root: dir.path().to_path_buf(),
        };
        let mut log = ExperimentLog {
            hypothesis_backlog: vec![hyp("h-1", "algorithm", "low", Some(0.3))],
            ..ExperimentLog::default()
        };
        log.run_state.pending_waits.push(PendingWait {
            experiment: 1,
            hypothesis_id: "h-1".into(),
            observable: "k".into(),
            action: "collect".into(),
            base_sha: "b".into(),
            runtime: String::new(),
            collected: None,
            backpressure: 0,
        });
        std::fs::create_dir_all(root.experiment_worktree(1)).unwrap();
        write_marker(&root.experiment_worktree(1), &marker(1, 1)).unwrap();
        assert_eq!(
            recover_markers(&root, &mut log, &spec(), "m").unwrap(),
            vec![1]
        );
        assert_eq!(log.experiments.len(), 1);
        let e = log.entry(1).unwrap();
        assert_eq!(
            e.forecast, log.hypothesis_backlog[0].opportunity,
            "O-19: copied from the backlog at the recovering write"
        );
        assert_eq!(e.outcome, Outcome::Measured);
        assert!(
            recover_markers(&root, &mut log, &spec(), "m")
                .unwrap()
                .is_empty(),
            "recovered exactly once"
        );
        assert_eq!(log.experiments.len(), 1);
        // a later estimate never overwrites the recorded forecast
        log.hypothesis_backlog[0]
            .opportunity
            .as_mut()
            .unwrap()
            .expected_benefit = "revised".into();
        write_marker(&root.experiment_worktree(1), &marker(1, 2)).unwrap();
        assert_eq!(
            recover_markers(&root, &mut log, &spec(), "m").unwrap(),
            vec![1],
            "a marker with more samples refreshes the entry"
        );
        assert_ne!(
            log.entry(1)
                .unwrap()
                .forecast
                .as_ref()
                .unwrap()
                .expected_benefit,
            "revised"
        );
        assert_eq!(
            log.entry(1).unwrap().comparisons[0]
                .candidate
                .snapshot
                .n_samples(),
            2
        );
    }
}
