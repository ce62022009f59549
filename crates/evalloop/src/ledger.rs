//! `ledger.jsonl`: one JSON row per decision (seed: skill-eval-loop, "Three-tier gate",
//! "recheck.py", "backfill.py"; E-17, E-19, E-20, E-34, E-52, E-54). Rows are appended; backfill
//! and theme rewrite the file atomically after a backup.

use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use super::arm::ArmPair;

/// A theme signature the recheck matches correction episodes with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Signature {
    /// The words.
    pub words: Vec<String>,
    /// Where it came from: `None` = written by hand; `skill_md:<path>` (backfill, a matcher the
    /// recheck refuses on sight) or `corrections:<n>` (theme).
    #[serde(default)]
    pub derived_from: Option<String>,
}

/// The template versions a forge compared (`eval forge --skill-version` / `--rival-version`):
/// ids as `ID@vN`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Versions {
    /// The candidate's version, in the with-arm (`changelog-writer@v4`).
    pub candidate: String,
    /// The incumbent's version, in the baseline arm (`changelog-writer@v3`); `None` for an empty
    /// baseline or a rival given as a directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rival: Option<String>,
}

impl Versions {
    /// `changelog-writer@v4 against changelog-writer@v3` (or the candidate alone).
    pub fn words(&self) -> String {
        match &self.rival {
            Some(r) => format!("{} against {r}", self.candidate),
            None => self.candidate.clone(),
        }
    }
}

/// One ledger row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LedgerRow {
    /// The skill's name.
    pub skill: String,
    /// The brief that decided it (empty for recheck rows of hand-adopted skills).
    pub brief_id: String,
    /// `adopt`, `probation`, `reject`, `adopt-confirmed` or `revoked`.
    pub decision: String,
    /// When, UTC.
    pub at: DateTime<Utc>,
    /// When the recheck is due (adopt 14 days, probation 7).
    #[serde(default)]
    pub recheck_due: Option<DateTime<Utc>>,
    /// What the baseline arm was given, read off the run (empty: an empty baseline).
    #[serde(default)]
    pub baseline_skills: Vec<String>,
    /// Silent arms per side.
    #[serde(default)]
    pub arms_never_loaded: ArmPair<u32>,
    /// Valid samples and wins, when decided by a forge.
    #[serde(default)]
    pub n_valid: u32,
    /// Valid samples the candidate won.
    #[serde(default)]
    pub wins_with: u32,
    /// The operator's `--failure-rate` for a probation.
    #[serde(default)]
    pub failure_rate: Option<f64>,
    /// The theme the recheck measures by.
    #[serde(default)]
    pub signature: Option<Signature>,
    /// Where the skill was installed or staged (copy first, then symlinks).
    #[serde(default)]
    pub installed: Vec<PathBuf>,
    /// Skill loads the recheck counted, on recheck rows.
    #[serde(default)]
    pub loads: Option<u32>,
    /// Human reason / the gate's headline.
    #[serde(default)]
    pub reason: String,
    /// `sha256:<hex>` of the skill's tree the forge decided on ([`crate::deploy::tree_digest`]);
    /// absent on rows written before it was recorded and on rows no forge wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill_digest: Option<String>,
    /// The judge (runtime, model) whose verdicts decided a forge's row; absent on rows written
    /// before it was recorded and on rows no forge wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<crate::sample::AgentSetup>,
    /// The template versions a forge of versions compared; absent for a forge of directories.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versions: Option<Versions>,
}

impl LedgerRow {
    /// Whether the row opens an entry a recheck is due for.
    pub fn is_open_install(&self) -> bool {
        matches!(self.decision.as_str(), "adopt" | "probation")
    }
}

/// The recheck date of a decision taken `at` (E-20).
pub fn recheck_due(at: DateTime<Utc>, days: i64) -> DateTime<Utc> {
    at + Duration::days(days)
}

/// Ledger I/O failures, naming the file (and line).
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// Unreadable or unwritable.
    #[error("ledger `{path}`: {message}")]
    Io {
        /// The file.
        path: String,
        /// What failed.
        message: String,
    },
    /// A row that does not parse.
    #[error("ledger `{path}` line {line}: {message}")]
    Row {
        /// The file.
        path: String,
        /// 1-based line.
        line: usize,
        /// The parser's message.
        message: String,
    },
}

fn io(path: &Path, e: impl std::fmt::Display) -> LedgerError {
    LedgerError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// Every row of `path`; a missing file is an empty ledger.
///
/// # Errors
/// [`LedgerError`] for an unreadable file or a row that does not parse.
pub fn read_ledger(path: &Path) -> Result<Vec<LedgerRow>, LedgerError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(path, e)),
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(idx, l)| {
            skillforge_contract::limits::check_json(l).map_err(|e| LedgerError::Row {
                path: path.display().to_string(),
                line: idx + 1,
                message: format!("the row {e}"),
            })?;
            serde_json::from_str(l).map_err(|e| LedgerError::Row {
                path: path.display().to_string(),
                line: idx + 1,
                message: e.to_string(),
            })
        })
        .collect()
}

/// Appends `row` as one line and syncs it to disk.
///
/// # Errors
/// [`LedgerError::Io`].
pub fn append_row(path: &Path, row: &LedgerRow) -> Result<(), LedgerError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| io(path, e))?;
    }
    let line = serde_json::to_string(row).map_err(|e| io(path, e))?;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| io(path, e))?;
    file.write_all(format!("{line}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| io(path, e))
}

/// Replaces the ledger with `rows` atomically ([`skillforge_stage::fs::write_atomic`]).
///
/// # Errors
/// [`LedgerError::Io`].
pub fn rewrite_ledger(path: &Path, rows: &[LedgerRow]) -> Result<(), LedgerError> {
    let mut text = String::new();
    for row in rows {
        text.push_str(&serde_json::to_string(row).map_err(|e| io(path, e))?);
        text.push('\n');
    }
    skillforge_stage::fs::write_atomic(path, text).map_err(|e| io(path, e.source))
}

/// Copies the ledger to `ledger.jsonl.bak-<UTC timestamp>` next to it and returns the copy's path.
///
/// # Errors
/// [`LedgerError::Io`].
pub fn backup_ledger(path: &Path, now: DateTime<Utc>) -> Result<PathBuf, LedgerError> {
    let backup = path.with_extension(format!("jsonl.bak-{}", now.format("%Y%m%dT%H%M%S%.3fZ")));
    std::fs::copy(path, &backup).map_err(|e| io(path, e))?;
    Ok(backup)
}

/// The runtime whose judge is a deterministic stand-in, not a model.
pub const STAND_IN_RUNTIME: &str = "scripted";

/// The row that makes `skill` (its tree's `digest`, `sha256:<hex>`) a loser for a forge over
/// `baseline` (the skills its baseline arm is given: the rival's name, or none), if any (E-17:
/// losers are never re-evaluated). A reject answers one question, this content against this
/// baseline: the skill's latest forge decision over the same baseline counts, and bars the
/// forge when it is a reject of the same content. A reject recorded without a digest (before
/// digests were recorded) stands for any content; a later adopt or probation ends it; an edited
/// skill (another digest) is a new candidate and is evaluated, and so is the same content
/// against another baseline (a version that tied its predecessor still meets an empty
/// baseline). A decision the `scripted` stand-in judged is no evaluation for a forge judged by a
/// model (`judge_runtime` another runtime): it counts only for scripted forges, so trying a
/// skill without a model never bars it from a real evaluation.
pub fn rejected<'a>(
    rows: &'a [LedgerRow],
    skill: &str,
    digest: &str,
    judge_runtime: &str,
    baseline: &[String],
) -> Option<&'a LedgerRow> {
    let counts = |r: &LedgerRow| {
        judge_runtime == STAND_IN_RUNTIME
            || r.judge
                .as_ref()
                .is_none_or(|j| j.runtime != STAND_IN_RUNTIME)
    };
    rows.iter()
        .rev()
        .find(|r| {
            r.skill == skill
                && matches!(r.decision.as_str(), "reject" | "adopt" | "probation")
                && r.baseline_skills == baseline
                && counts(r)
        })
        .filter(|r| r.decision == "reject" && r.skill_digest.as_deref().is_none_or(|d| d == digest))
}

/// Whether `row` was judged by the `scripted` stand-in.
pub fn judged_by_stand_in(row: &LedgerRow) -> bool {
    row.judge
        .as_ref()
        .is_some_and(|j| j.runtime == STAND_IN_RUNTIME)
}

/// Open entries: per skill, its latest row when that row is an adopt or probation install.
pub fn open_entries(rows: &[LedgerRow]) -> Vec<&LedgerRow> {
    let mut latest: Vec<&LedgerRow> = Vec::new();
    // A version that did not beat its predecessor (a forge of versions that rejected) leaves
    // what is installed as it was: it neither opens nor closes an entry.
    for row in rows
        .iter()
        .filter(|r| !(r.decision == "reject" && r.versions.is_some()))
    {
        match latest.iter_mut().find(|r| r.skill == row.skill) {
            Some(slot) => *slot = row,
            None => latest.push(row),
        }
    }
    latest.into_iter().filter(|r| r.is_open_install()).collect()
}

/// The first open install of `skill`'s current entry (its adoption row).
pub fn adoption_of<'a>(rows: &'a [LedgerRow], skill: &str) -> Option<&'a LedgerRow> {
    rows.iter()
        .rev()
        .find(|r| r.skill == skill && r.is_open_install())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn row(skill: &str, decision: &str, at: DateTime<Utc>) -> LedgerRow {
        LedgerRow {
            skill: skill.into(),
            brief_id: "b".into(),
            decision: decision.into(),
            at,
            recheck_due: None,
            baseline_skills: vec![],
            arms_never_loaded: ArmPair::default(),
            n_valid: 3,
            wins_with: 2,
            failure_rate: None,
            signature: None,
            installed: vec![],
            loads: None,
            reason: String::new(),
            skill_digest: None,
            judge: None,
            versions: None,
        }
    }

    // E-17
    #[test]
    fn e17_losers_are_found_and_rows_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.jsonl");
        let now = Utc::now();
        append_row(&path, &row("a", "adopt", now)).unwrap();
        append_row(&path, &row("l", "reject", now)).unwrap();
        let rows = read_ledger(&path).unwrap();
        assert_eq!(rows.len(), 2);
        assert!(
            rejected(&rows, "l", "sha256:1", "claude", &[]).is_some(),
            "a reject without a digest stands for any content"
        );
        assert!(rejected(&rows, "a", "sha256:1", "claude", &[]).is_none());
        assert_eq!(open_entries(&rows).len(), 1);
        std::fs::write(&path, "{\"skill\":1}\n").unwrap();
        assert!(
            read_ledger(&path)
                .unwrap_err()
                .to_string()
                .contains("line 1")
        );
    }

    // A version that lost to its predecessor does not close the predecessor's adoption: the
    // recheck keeps measuring what is installed.
    #[test]
    fn a_version_that_lost_to_its_predecessor_leaves_the_adoption_open() {
        let now = Utc::now();
        let mut lost = row("a", "reject", now);
        lost.versions = Some(Versions {
            candidate: "a@v2".into(),
            rival: Some("a@v1".into()),
        });
        let rows = vec![row("a", "adopt", now), lost];
        let open = open_entries(&rows);
        assert_eq!(open.len(), 1, "{open:?}");
        assert_eq!(open[0].decision, "adopt");
        // A plain reject of the skill still closes it.
        let rows = vec![row("a", "adopt", now), row("a", "reject", now)];
        assert!(open_entries(&rows).is_empty());
    }

    // E-17: the same content that lost is never evaluated again; an edited skill is a new
    // candidate; the skill's latest forge decision is the one that counts.
    #[test]
    fn e17_only_the_content_that_lost_is_never_evaluated_again() {
        let now = Utc::now();
        let with = |decision: &str, digest: &str| LedgerRow {
            skill_digest: Some(digest.into()),
            ..row("s", decision, now)
        };
        let rows = vec![with("reject", "sha256:1")];
        assert_eq!(
            rejected(&rows, "s", "sha256:1", "claude", &[]).map(|r| r.decision.as_str()),
            Some("reject")
        );
        assert!(
            rejected(&rows, "s", "sha256:2", "claude", &[]).is_none(),
            "edited content is evaluated"
        );
        let rows = vec![with("reject", "sha256:1"), with("adopt", "sha256:2")];
        assert!(
            rejected(&rows, "s", "sha256:1", "claude", &[]).is_none(),
            "a later adopt ends the reject"
        );
        let rows = vec![
            with("adopt", "sha256:2"),
            with("reject", "sha256:3"),
            LedgerRow {
                reason: "revoked".into(),
                ..row("s", "revoked", now)
            },
        ];
        assert!(
            rejected(&rows, "s", "sha256:3", "claude", &[]).is_some(),
            "a recheck row is not a forge decision"
        );
        // E-17 with the scripted stand-in: its reject bars only scripted forges of the content.
        let stand_in = LedgerRow {
            judge: Some(crate::sample::AgentSetup {
                runtime: STAND_IN_RUNTIME.into(),
                model: Some("scripted-cheap".into()),
            }),
            ..with("reject", "sha256:4")
        };
        let rows = vec![stand_in];
        assert!(
            rejected(&rows, "s", "sha256:4", "claude", &[]).is_none(),
            "a stand-in's verdict is no evaluation for a model's forge"
        );
        assert!(rejected(&rows, "s", "sha256:4", STAND_IN_RUNTIME, &[]).is_some());
        // E-17 per question: a reject against a rival bars the same content only against a rival
        // of that name; over an empty baseline the content is evaluated (and the other way round).
        let rival = vec!["s".to_owned()];
        let head_to_head = LedgerRow {
            baseline_skills: rival.clone(),
            ..with("reject", "sha256:5")
        };
        let rows = vec![head_to_head.clone()];
        assert!(rejected(&rows, "s", "sha256:5", "claude", &rival).is_some());
        assert!(
            rejected(&rows, "s", "sha256:5", "claude", &[]).is_none(),
            "another baseline is another question"
        );
        let rows = vec![with("reject", "sha256:5"), head_to_head];
        assert!(rejected(&rows, "s", "sha256:5", "claude", &[]).is_some());
        let rows = vec![
            with("reject", "sha256:5"),
            LedgerRow {
                baseline_skills: rival.clone(),
                ..with("adopt", "sha256:6")
            },
        ];
        assert!(
            rejected(&rows, "s", "sha256:5", "claude", &[]).is_some(),
            "an adoption against a rival does not end the empty-baseline reject"
        );
    }

    // E-20
    #[test]
    fn e20_recheck_due_after_14_and_7_days() {
        let t0 = "2026-09-17T00:00:00Z".parse::<DateTime<Utc>>().unwrap();
        let due = recheck_due(t0, super::super::gate::ADOPT_RECHECK_DAYS);
        assert!(t0 + Duration::days(13) < due && t0 + Duration::days(14) >= due);
        assert_eq!(
            recheck_due(t0, super::super::gate::PROBATION_RECHECK_DAYS),
            t0 + Duration::days(7)
        );
    }

    // Issue 12 item 7: a 100 000-level row is refused by the parser limits, naming file and line.
    #[test]
    fn deeply_nested_ledger_row_is_refused_naming_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.jsonl");
        std::fs::write(&path, format!("\n{}\n", "[".repeat(100_000))).unwrap();
        let e = read_ledger(&path).unwrap_err().to_string();
        assert!(
            e.contains(&path.display().to_string())
                && e.contains("line 2")
                && e.contains("64 levels"),
            "{e}"
        );
    }
}
