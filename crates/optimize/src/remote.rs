//! Remote results: `result.yaml` on the result ref, and the checks every one must pass before it
//! is accepted (seed: optimize-loop, loop.md 3.3 "Collecting a remote result"; O-07, O-25).
//!
//! A result failing any check is `error` with the reason; the worker's numbers are never repaired.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::OptimizeError;
use super::git::{files_between, git, rev_parse};
use super::snapshot::Snapshot;
use super::spec::ScopeSpec;

/// The marker file a remote worker commits on top of its candidate.
pub const RESULT_FILE: &str = "result.yaml";

/// A remote worker's `result.yaml` (experiment-prompt-template.md, remote delta).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemoteResult {
    /// Experiment number.
    pub experiment: u32,
    /// The base it measured against.
    pub base_sha: String,
    /// The candidate commit.
    pub head_sha: String,
    /// Stable machine id.
    pub machine: String,
    /// ISO 8601.
    pub measured_at: String,
    /// Baseline snapshot.
    pub baseline: Option<Snapshot>,
    /// Candidate snapshot.
    pub candidate: Option<Snapshot>,
    /// Correctness checks run.
    #[serde(default)]
    pub correctness: serde_json::Value,
}

/// What git says about the result ref.
#[derive(Debug, Clone, PartialEq)]
pub struct RefFacts {
    /// The tip commit of the result ref.
    pub tip: String,
    /// The tip's first parent.
    pub tip_parent: String,
    /// Files the tip changes relative to its parent.
    pub tip_files: Vec<String>,
    /// Files changed in `base_sha..head_sha`.
    pub range_files: Vec<String>,
    /// The parsed `result.yaml` at the tip.
    pub result: RemoteResult,
    /// Its text, as committed (copied into the state root when accepted, O-26).
    pub text: String,
}

/// Fetches `result_ref` from `remote` into the repository and gathers the [`RefFacts`].
///
/// # Errors
/// [`OptimizeError::Git`] when the ref cannot be fetched or read; [`OptimizeError::Invalid`]
/// when `result.yaml` is missing or does not parse.
pub fn collect(repo: &Path, remote: &str, result_ref: &str) -> Result<RefFacts, OptimizeError> {
    let local = format!("refs/optimize-results/{result_ref}");
    git(
        repo,
        &[
            "fetch",
            "--no-tags",
            "--force",
            remote,
            &format!("refs/heads/{result_ref}:{local}"),
        ],
    )?;
    let tip = rev_parse(repo, &local)?;
    let tip_parent = rev_parse(repo, &format!("{tip}^"))?;
    let tip_files = files_between(repo, &tip_parent, &tip)?;
    let text = git(repo, &["show", &format!("{tip}:{RESULT_FILE}")]).map_err(|e| {
        OptimizeError::Invalid(format!(
            "result ref `{result_ref}` has no {RESULT_FILE}: {e}"
        ))
    })?;
    super::check_yaml(&text, &format!("{RESULT_FILE} on `{result_ref}`"))?;
    let result: RemoteResult = serde_norway::from_str(&text)
        .map_err(|e| OptimizeError::Invalid(format!("{RESULT_FILE} on `{result_ref}`: {e}")))?;
    let range_files = files_between(repo, &result.base_sha, &result.head_sha)
        .unwrap_or_else(|_| vec!["<base..head range unreadable>".into()]);
    Ok(RefFacts {
        tip,
        tip_parent,
        tip_files,
        range_files,
        result,
        text,
    })
}

/// Why a remote result is rejected: the first acceptance check it fails (O-25), recorded as the
/// experiment's `error` reason. Its `Display` is that reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// `base_sha` is not the base the experiment was dispatched on.
    #[error("base_sha {base_sha} does not match the dispatched base {dispatched}")]
    BaseMismatch {
        /// The result's `base_sha`.
        base_sha: String,
        /// The base dispatched.
        dispatched: String,
    },
    /// The tip changes more (or other) files than `result.yaml`.
    #[error("the result ref's tip must add only {RESULT_FILE}; it changes {}", .files.join(", "))]
    TipFiles {
        /// The files the tip changes.
        files: Vec<String>,
    },
    /// The tip's parent is not the result's `head_sha`.
    #[error("the tip's parent {parent} is not head_sha {head_sha}")]
    TipParent {
        /// The tip's first parent.
        parent: String,
        /// The result's `head_sha`.
        head_sha: String,
    },
    /// `base..head` touches files outside `scope.mutable`.
    #[error("base..head touches files outside scope.mutable: {}", .files.join(", "))]
    OutsideScope {
        /// The files outside the scope.
        files: Vec<String>,
    },
    /// A snapshot (`baseline` or `candidate`) is missing.
    #[error("the {side} snapshot is missing")]
    MissingSnapshot {
        /// `baseline` or `candidate`.
        side: &'static str,
    },
    /// A snapshot lacks a required objective.
    #[error("the {side} snapshot lacks required objective `{objective}`")]
    MissingObjective {
        /// `baseline` or `candidate`.
        side: &'static str,
        /// The objective's name.
        objective: String,
    },
}

/// The acceptance checks, in the seed's order (O-25): `base_sha` equals the dispatched base; the
/// tip adds only `result.yaml` and its parent is `head_sha`; `base..head` touches only
/// `scope.mutable`; both snapshots present with every required objective.
///
/// # Errors
/// The first failed check, as a [`Rejection`] (its message is the `error` reason).
pub fn accept(
    facts: &RefFacts,
    dispatched_base: &str,
    scope: &ScopeSpec,
    required: &[String],
) -> Result<(), Rejection> {
    let r = &facts.result;
    if r.base_sha != dispatched_base {
        return Err(Rejection::BaseMismatch {
            base_sha: r.base_sha.clone(),
            dispatched: dispatched_base.to_owned(),
        });
    }
    if facts.tip_files != [RESULT_FILE] {
        return Err(Rejection::TipFiles {
            files: facts.tip_files.clone(),
        });
    }
    if facts.tip_parent != r.head_sha {
        return Err(Rejection::TipParent {
            parent: facts.tip_parent.clone(),
            head_sha: r.head_sha.clone(),
        });
    }
    let outside: Vec<String> = facts
        .range_files
        .iter()
        .filter(|p| !scope.is_mutable(p))
        .cloned()
        .collect();
    if !outside.is_empty() {
        return Err(Rejection::OutsideScope { files: outside });
    }
    for (side, snap) in [("baseline", &r.baseline), ("candidate", &r.candidate)] {
        let Some(snap) = snap else {
            return Err(Rejection::MissingSnapshot { side });
        };
        if let Some(name) = required.iter().find(|n| snap.aggregate(n).is_none()) {
            return Err(Rejection::MissingObjective {
                side,
                objective: name.clone(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::process::Command;

    use super::*;

    fn g(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// A "remote worker" with its own clone of a bare repository: it commits its candidate
    /// (touching `files`), then `result.yaml` (plus `extra_in_tip`), and pushes the result ref.
    fn worker_run(
        origin: &Path,
        exp: u32,
        files: &[&str],
        extra_in_tip: Option<&str>,
        candidate_metrics: &str,
    ) -> String {
        let clone = tempfile::tempdir().unwrap();
        let c = clone.path().join("w");
        g(
            origin,
            &[
                "clone",
                "-q",
                "-b",
                "optimize/ops",
                &origin.to_string_lossy(),
                &c.to_string_lossy(),
            ],
        );
        let base = g(&c, &["rev-parse", "HEAD"]);
        for f in files {
            std::fs::write(c.join(f), format!("changed by exp {exp}\n")).unwrap();
        }
        g(&c, &["add", "-A"]);
        g(
            &c,
            &[
                "commit",
                "-q",
                "-m",
                &format!("optimize(ops): exp-{exp} candidate"),
            ],
        );
        let head = g(&c, &["rev-parse", "HEAD"]);
        let result = format!(
            "experiment: {exp}\nbase_sha: {base}\nhead_sha: {head}\nmachine: worker-2\nmeasured_at: 2026-12-01T20:00:00Z\nbaseline: {{ gates: {{}}, metrics: {{ ops: {{ aggregate: 34, samples: [34] }} }} }}\ncandidate: {{ gates: {{}}, metrics: {candidate_metrics} }}\ncorrectness: none\n"
        );
        std::fs::write(c.join(RESULT_FILE), result).unwrap();
        if let Some(extra) = extra_in_tip {
            std::fs::write(c.join(extra), "sneaked in\n").unwrap();
        }
        g(&c, &["add", "-A"]);
        g(&c, &["commit", "-q", "-m", "result"]);
        g(
            &c,
            &[
                "push",
                "-q",
                "origin",
                &format!("HEAD:refs/heads/optimize-exp/ops/exp-{exp:03}"),
            ],
        );
        base
    }

    // O-25, O-07
    #[test]
    fn o25_remote_results_are_accepted_only_under_every_check() {
        let dir = tempfile::tempdir().unwrap();
        let orch = dir.path().join("orch");
        std::fs::create_dir_all(orch.join("src")).unwrap();
        g(
            dir.path(),
            &["init", "-q", "-b", "optimize/ops", &orch.to_string_lossy()],
        );
        std::fs::write(orch.join("src/count.sh"), "slow\n").unwrap();
        std::fs::write(orch.join("measure.sh"), "harness\n").unwrap();
        g(&orch, &["add", "-A"]);
        g(&orch, &["commit", "-q", "-m", "base"]);
        let origin = dir.path().join("origin.git");
        g(
            dir.path(),
            &[
                "clone",
                "-q",
                "--bare",
                &orch.to_string_lossy(),
                &origin.to_string_lossy(),
            ],
        );
        let scope = ScopeSpec {
            mutable: vec!["src".into()],
            immutable: vec!["measure.sh".into()],
        };
        let required = vec!["ops".to_string()];
        let good = "{ ops: { aggregate: 12, samples: [12] } }";
        let origin_s = origin.to_string_lossy().to_string();

        let base = worker_run(&origin, 1, &["src/count.sh"], None, good);
        let facts = collect(&orch, &origin_s, "optimize-exp/ops/exp-001").expect("collect");
        assert_eq!(facts.tip_files, ["result.yaml"]);
        assert_eq!(
            facts.tip_parent, facts.result.head_sha,
            "O-07: the tip's parent is head_sha"
        );
        accept(&facts, &base, &scope, &required).expect("a clean result is accepted");
        assert!(
            accept(&facts, &"0".repeat(40), &scope, &required)
                .unwrap_err()
                .to_string()
                .contains("does not match the dispatched base")
        );

        worker_run(&origin, 2, &["src/count.sh", "measure.sh"], None, good);
        let facts = collect(&orch, &origin_s, "optimize-exp/ops/exp-002").unwrap();
        let err = accept(&facts, &base, &scope, &required)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("outside scope.mutable") && err.contains("measure.sh"),
            "{err}"
        );

        worker_run(&origin, 3, &["src/count.sh"], Some("src/extra.sh"), good);
        let facts = collect(&orch, &origin_s, "optimize-exp/ops/exp-003").unwrap();
        assert!(
            accept(&facts, &base, &scope, &required)
                .unwrap_err()
                .to_string()
                .contains("must add only result.yaml")
        );

        worker_run(
            &origin,
            4,
            &["src/count.sh"],
            None,
            "{ latency: { aggregate: 3, samples: [3] } }",
        );
        let facts = collect(&orch, &origin_s, "optimize-exp/ops/exp-004").unwrap();
        assert!(
            accept(&facts, &base, &scope, &required)
                .unwrap_err()
                .to_string()
                .contains("candidate snapshot lacks required objective `ops`")
        );
        // the orchestrator's optimization branch never moved
        assert_eq!(g(&orch, &["rev-parse", "optimize/ops"]), base);

        // issue 12 item 7: a result.yaml nested 100 000 deep is refused before parsing, naming the ref
        let clone = dir.path().join("deep");
        g(
            dir.path(),
            &[
                "clone",
                "-q",
                "-b",
                "optimize/ops",
                &origin_s,
                &clone.to_string_lossy(),
            ],
        );
        std::fs::write(
            clone.join(RESULT_FILE),
            format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)),
        )
        .unwrap();
        g(&clone, &["add", "-A"]);
        g(&clone, &["commit", "-q", "-m", "deep"]);
        g(
            &clone,
            &[
                "push",
                "-q",
                "origin",
                "HEAD:refs/heads/optimize-exp/ops/exp-009",
            ],
        );
        let err = collect(&orch, &origin_s, "optimize-exp/ops/exp-009")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("result.yaml on `optimize-exp/ops/exp-009`")
                && err.contains("nests collections deeper"),
            "{err}"
        );
    }
}
