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
}

/// Fetches `result_ref` from `remote` into the repository and gathers the [`RefFacts`].
///
/// # Errors
/// [`OptimizeError::Git`] when the ref cannot be fetched or read; [`OptimizeError::Invalid`]
/// when `result.yaml` is missing or does not parse.
pub fn collect(repo: &Path, remote: &str, result_ref: &str) -> Result<RefFacts, OptimizeError> {
    let local = format!("refs/optimize-results/{result_ref}");
    git(repo, &["fetch", "--no-tags", "--force", remote, &format!("refs/heads/{result_ref}:{local}")])?;
    let tip = rev_parse(repo, &local)?;
    let tip_parent = rev_parse(repo, &format!("{tip}^"))?;
    let tip_files = files_between(repo, &tip_parent, &tip)?;
    let text = git(repo, &["show", &format!("{tip}:{RESULT_FILE}")])
        .map_err(|e| OptimizeError::Invalid(format!("result ref `{result_ref}` has no {RESULT_FILE}: {e}")))?;
    let result: RemoteResult = serde_norway::from_str(&text).map_err(|e| OptimizeError::Invalid(format!("{RESULT_FILE} on `{result_ref}`: {e}")))?;
    let range_files = files_between(repo, &result.base_sha, &result.head_sha).unwrap_or_else(|_| vec!["<base..head range unreadable>".into()]);
    Ok(RefFacts { tip, tip_parent, tip_files, range_files, result })
}

/// The acceptance checks, in the seed's order (O-25): `base_sha` equals the dispatched base; the
/// tip adds only `result.yaml` and its parent is `head_sha`; `base..head` touches only
/// `scope.mutable`; both snapshots present with every required objective.
///
/// # Errors
/// The first failed check, as the `error` reason.
pub fn accept(facts: &RefFacts, dispatched_base: &str, scope: &ScopeSpec, required: &[String]) -> Result<(), String> {
    let r = &facts.result;
    if r.base_sha != dispatched_base {
        return Err(format!("base_sha {} does not match the dispatched base {dispatched_base}", r.base_sha));
    }
    if facts.tip_files != [RESULT_FILE] {
        return Err(format!("the result ref's tip must add only {RESULT_FILE}; it changes {}", facts.tip_files.join(", ")));
    }
    if facts.tip_parent != r.head_sha {
        return Err(format!("the tip's parent {} is not head_sha {}", facts.tip_parent, r.head_sha));
    }
    let outside: Vec<&String> = facts.range_files.iter().filter(|p| !scope.is_mutable(p)).collect();
    if !outside.is_empty() {
        return Err(format!("base..head touches files outside scope.mutable: {}", outside.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")));
    }
    for (side, snap) in [("baseline", &r.baseline), ("candidate", &r.candidate)] {
        let Some(snap) = snap else {
            return Err(format!("the {side} snapshot is missing"));
        };
        if let Some(name) = required.iter().find(|n| snap.aggregate(n).is_none()) {
            return Err(format!("the {side} snapshot lacks required objective `{name}`"));
        }
    }
    Ok(())
}
