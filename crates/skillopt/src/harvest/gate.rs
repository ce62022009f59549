//! The merge side of the empty gate: when a pull request with no external CI may be stamped
//! `gitmoot/ci` "no external CI" (seed: SkillOpt, "Automatic trace-harvested feedback (Mode A,
//! off by default)" › Outcome → score, the parenthesis on the merge side: "an empty gate is itself
//! deferred by a grace window — a second zero-external observation at the same head at least
//! `[merge_gate] min_ci_wait` later — plus `.github/workflows/` awareness before it ever stamps
//! gitmoot/ci. Set `[merge_gate] require_external_ci = true` to hard-block an empty gate
//! instead."; resolutions §8: `min_ci_wait` 10 min; S-19).
//!
//! [`decide`] is the pure decision; [`observe`] records one observation in the store (the CLI's
//! `skillforge harvest gate`), reads back the first zero-external observation at the same head,
//! decides, and stamps. A stamp is recorded as a CI observation `gitmoot/ci` = `success`, description
//! [`STAMP_DESCRIPTION`], at the head, so a later `harvest outcome --outcome merged --head SHA`
//! (without `--ci`) reads a confirmed empty gate (S-18: `has_score = false`, reasoning marks it).

use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use skillforge_store::harvest::{
    GateObservation, ci_at, first_zero_observation, record_ci, record_gate_observation,
};
use skillforge_store::{Store, StoreError};

use super::HarvestError;
use super::outcome::{EMPTY_GATE_CONTEXT, SYNTHETIC_CONTEXT_PREFIXES};

/// `[merge_gate] min_ci_wait` default: 10 minutes (resolutions §8).
pub const DEFAULT_MIN_CI_WAIT: Duration = Duration::from_secs(10 * 60);
/// Description of the empty-gate stamp; [`super::CiEvidence::classify`] reads "no external CI".
pub const STAMP_DESCRIPTION: &str = "no external CI";
/// Context of the stamp (`gitmoot/ci`).
pub const STAMP_CONTEXT: &str = EMPTY_GATE_CONTEXT;

/// `[merge_gate]` keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeGateConfig {
    /// `min_ci_wait`: least time between the first and the stamping zero-external observation
    /// at one head (default [`DEFAULT_MIN_CI_WAIT`]).
    pub min_ci_wait: Duration,
    /// `require_external_ci` (default false): an empty gate is refused instead of stamped.
    pub require_external_ci: bool,
}

impl Default for MergeGateConfig {
    fn default() -> Self {
        Self {
            min_ci_wait: DEFAULT_MIN_CI_WAIT,
            require_external_ci: false,
        }
    }
}

/// What the repository at the head says about CI (`.github/workflows/` awareness).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Workflows {
    /// `.github/workflows/` holds at least one `*.yml`/`*.yaml` file: external CI is expected.
    Present,
    /// The repository has no workflow file: nothing in it starts CI.
    Absent,
    /// Not known (no repository path given); treated as [`Workflows::Present`] (fail-safe).
    Unknown,
}

impl Workflows {
    /// Looks at `<repo_path>/.github/workflows/` (a checkout at the head): [`Workflows::Present`]
    /// when it holds a `*.yml` or `*.yaml` file, else [`Workflows::Absent`]. An unreadable
    /// directory counts as absent only when it does not exist; any other read error is
    /// [`Workflows::Unknown`].
    pub fn at(repo_path: &Path) -> Workflows {
        let dir = repo_path.join(".github").join("workflows");
        match std::fs::read_dir(&dir) {
            Ok(entries) => {
                let is_workflow = |name: &str| name.ends_with(".yml") || name.ends_with(".yaml");
                if entries
                    .flatten()
                    .any(|e| is_workflow(&e.file_name().to_string_lossy()))
                {
                    Workflows::Present
                } else {
                    Workflows::Absent
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Workflows::Absent,
            Err(_) => Workflows::Unknown,
        }
    }
}

/// The gate's answer for one observation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum GateDecision {
    /// External CI contexts exist at the head: not an empty gate; nothing is stamped.
    External,
    /// Stamp `gitmoot/ci` "no external CI": the gate is a confirmed empty gate.
    Stamp,
    /// Not yet: observe again at or after `not_before` (RFC 3339, UTC).
    Wait {
        /// Earliest time a zero-external observation can stamp.
        not_before: String,
    },
    /// `require_external_ci = true` and no external CI: the merge is refused.
    Blocked,
}

impl GateDecision {
    /// `external`, `stamp`, `wait` or `blocked`.
    pub fn name(&self) -> &'static str {
        match self {
            GateDecision::External => "external",
            GateDecision::Stamp => "stamp",
            GateDecision::Wait { .. } => "wait",
            GateDecision::Blocked => "blocked",
        }
    }
}

/// Decides one observation at `now` of a head with `external_contexts` non-synthetic CI
/// contexts (any state), where `first_zero_at` is the earliest recorded zero-external
/// observation at the same `(repo, pr, head)` (`now` itself when this is the first):
///
/// 1. `external_contexts > 0` ⇒ [`GateDecision::External`] (not an empty gate).
/// 2. `require_external_ci` ⇒ [`GateDecision::Blocked`] (never a stamp).
/// 3. Otherwise the grace window: [`GateDecision::Stamp`] only when `now` is a *second*
///    observation (strictly after `first_zero_at`) and at least the window after it; else
///    [`GateDecision::Wait`] until `first_zero_at + window`.
///
/// The grace window is `min_ci_wait` for every repository (S-19, issue 34 item 3): CI outside
/// GitHub Actions (CircleCI, Jenkins, a status-API integration) posts statuses too, so a
/// repository without `.github/workflows/` may still be racing its CI. `.github/workflows/`
/// awareness ([`Workflows`]) is recorded with each observation ([`GateReport::workflows`]) and
/// never shortens the window.
pub fn decide(
    config: &MergeGateConfig,
    external_contexts: u64,
    _workflows: Workflows,
    first_zero_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> GateDecision {
    if external_contexts > 0 {
        return GateDecision::External;
    }
    if config.require_external_ci {
        return GateDecision::Blocked;
    }
    let window = chrono::Duration::from_std(config.min_ci_wait).unwrap_or(chrono::Duration::MAX);
    let not_before = first_zero_at
        .checked_add_signed(window)
        .unwrap_or(DateTime::<Utc>::MAX_UTC);
    if now > first_zero_at && now >= not_before {
        GateDecision::Stamp
    } else {
        let not_before = if now > first_zero_at {
            not_before
        } else {
            not_before.max(now + chrono::Duration::milliseconds(1))
        };
        GateDecision::Wait {
            not_before: not_before.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        }
    }
}

/// What one [`observe`] call saw and decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GateReport {
    /// `owner/repo`.
    pub repo: String,
    /// PR number.
    pub pr: i64,
    /// PR head SHA.
    pub head: String,
    /// This observation's time, RFC 3339 UTC (milliseconds).
    pub observed_at: String,
    /// Non-synthetic CI contexts counted at the head.
    pub external_contexts: u64,
    /// `.github/workflows/` awareness used.
    pub workflows: Workflows,
    /// The first zero-external observation at this head (RFC 3339), when there is one.
    pub first_zero_at: Option<String>,
    /// The decision (serialized flat: `decision`, and `not_before` for `wait`).
    #[serde(flatten)]
    pub decision: GateDecision,
    /// True when this call wrote the `gitmoot/ci` stamp (a repeated stamp rewrites it in place).
    pub stamped: bool,
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// One merge-gate observation to record: `repo#pr` at `head`, made at `now`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateQuery<'a> {
    /// `owner/repo`.
    pub repo: &'a str,
    /// PR number, ≥ 1.
    pub pr: i64,
    /// PR head SHA.
    pub head: &'a str,
    /// `.github/workflows/` awareness at the head.
    pub workflows: Workflows,
    /// The caller's count of non-synthetic CI contexts at the head; `None`: count the recorded ones.
    pub external_contexts: Option<u64>,
    /// Observation time (the CLI's hidden `--at`, else the clock).
    pub now: DateTime<Utc>,
}

/// Records one merge-gate observation ([`GateQuery`]) in one write transaction and decides it
/// ([`decide`]). `external_contexts`: the caller's count of
/// non-synthetic CI contexts at the head; `None` counts the recorded CI observations at
/// `repo@head` (webhook `status`/`check_suite` deliveries) whose context is not `gitmoot/` or
/// `skillforge/`. On [`GateDecision::Stamp`] writes the CI observation `gitmoot/ci` = `success`,
/// [`STAMP_DESCRIPTION`] at `repo@head`, which outcome ingestion reads as a confirmed empty gate
/// (S-18). The observation is idempotent per `(repo, pr, head, now)`.
///
/// # Errors
/// [`HarvestError::Store`] when the store refuses a read or write (nothing is recorded).
pub async fn observe(
    store: &Store,
    config: &MergeGateConfig,
    query: &GateQuery<'_>,
) -> Result<GateReport, HarvestError> {
    let GateQuery {
        repo,
        pr,
        head,
        workflows,
        external_contexts,
        now,
    } = *query;
    let mut tx = skillforge_store::templates::begin_write(store).await?;
    let external = match external_contexts {
        Some(n) => n,
        None => {
            let seen = ci_at(&mut *tx, repo, head).await?;
            let is_external =
                |c: &str| !SYNTHETIC_CONTEXT_PREFIXES.iter().any(|p| c.starts_with(p));
            seen.iter().filter(|o| is_external(&o.context)).count() as u64
        }
    };
    let observed_at = rfc3339(now);
    let recorded = first_zero_observation(&mut *tx, repo, pr, head).await?;
    let recorded = recorded
        .and_then(|t| DateTime::parse_from_rfc3339(&t).ok())
        .map(|t| t.with_timezone(&Utc));
    let first_zero = match (external, recorded) {
        (0, Some(first)) => Some(first.min(now)),
        (0, None) => Some(now),
        (_, first) => first,
    };
    let decision = decide(config, external, workflows, first_zero.unwrap_or(now), now);
    let workflows_name = match workflows {
        Workflows::Present => "present",
        Workflows::Absent => "absent",
        Workflows::Unknown => "unknown",
    };
    record_gate_observation(
        &mut tx,
        &GateObservation {
            repo: repo.to_owned(),
            pr,
            head: head.to_owned(),
            observed_at: observed_at.clone(),
            external_contexts: i64::try_from(external).unwrap_or(i64::MAX),
            workflows: workflows_name.to_owned(),
            decision: decision.name().to_owned(),
        },
    )
    .await?;
    let stamped = decision == GateDecision::Stamp;
    if stamped {
        record_ci(
            &mut tx,
            repo,
            head,
            STAMP_CONTEXT,
            "success",
            STAMP_DESCRIPTION,
        )
        .await?;
    }
    tx.commit().await.map_err(StoreError::from)?;
    Ok(GateReport {
        repo: repo.to_owned(),
        pr,
        head: head.to_owned(),
        observed_at,
        external_contexts: external,
        workflows,
        first_zero_at: first_zero.map(rfc3339),
        decision,
        stamped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000 + secs, 0).unwrap()
    }

    fn check(
        config: &MergeGateConfig,
        external: u64,
        workflows: Workflows,
        first: i64,
        now: i64,
        want: &str,
    ) {
        let got = decide(config, external, workflows, at(first), at(now));
        assert_eq!(
            got.name(),
            want,
            "external {external}, {workflows:?}, first {first}, now {now}: {got:?}"
        );
    }

    #[test]
    fn s19_grace_window_table() {
        let config = MergeGateConfig {
            min_ci_wait: Duration::from_secs(600),
            require_external_ci: false,
        };
        use Workflows::*;
        check(&config, 0, Present, 0, 0, "wait"); // the first observation never stamps
        check(&config, 0, Present, 0, 599, "wait"); // second, before min_ci_wait
        check(&config, 0, Present, 0, 600, "stamp"); // second, at min_ci_wait
        check(&config, 0, Present, 0, 3600, "stamp");
        check(&config, 0, Unknown, 0, 599, "wait"); // unknown awareness fails safe
        // no workflow files: the same window (CI outside GitHub Actions posts statuses too)
        check(&config, 0, Absent, 0, 0, "wait");
        check(&config, 0, Absent, 0, 1, "wait");
        check(&config, 0, Absent, 0, 599, "wait");
        check(&config, 0, Absent, 0, 600, "stamp");
        check(&config, 2, Present, 0, 0, "external");
        let strict = MergeGateConfig {
            require_external_ci: true,
            ..config
        };
        check(&strict, 0, Present, 0, 3600, "blocked");
        check(&strict, 0, Absent, 0, 3600, "blocked");
        check(&strict, 1, Present, 0, 0, "external");
    }

    #[test]
    fn wait_names_when_to_look_again() {
        let config = MergeGateConfig {
            min_ci_wait: Duration::from_secs(60),
            require_external_ci: false,
        };
        let got = decide(&config, 0, Workflows::Present, at(0), at(10));
        assert_eq!(
            got,
            GateDecision::Wait {
                not_before: at(60).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            }
        );
    }

    #[test]
    fn workflow_awareness_reads_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Workflows::at(dir.path()), Workflows::Absent);
        std::fs::create_dir_all(dir.path().join(".github/workflows")).unwrap();
        assert_eq!(Workflows::at(dir.path()), Workflows::Absent);
        std::fs::write(dir.path().join(".github/workflows/ci.yml"), "on: push\n").unwrap();
        assert_eq!(Workflows::at(dir.path()), Workflows::Present);
    }
}
