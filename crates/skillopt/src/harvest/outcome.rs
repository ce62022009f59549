//! Verifiable outcomes of an implement job and the floor row they project to (seed: SkillOpt,
//! "Automatic trace-harvested feedback (Mode A, off by default)" › Outcome → score; facts §5;
//! resolutions §8; S-17..S-22).

use serde_json::{Value, json};
use skillforge_contract::{EvaluatorScore, NormalizedSignal, SignalInput, project_signal};

use super::tier::EvidenceTier;
use super::{FLOOR_REVIEWER, floor_item_id};

/// Context prefix of the synthetic merge-gate statuses (`gitmoot/ci`); such a status is never
/// external CI. `skillforge/` statuses are treated the same way.
pub const SYNTHETIC_CONTEXT_PREFIXES: [&str; 2] = ["gitmoot/", "skillforge/"];
/// The empty-gate stamp context.
pub const EMPTY_GATE_CONTEXT: &str = "gitmoot/ci";
/// Phrase of the floor reasoning for a merge with passing external CI, for people. The
/// `auto_promote_require_external_ci` guardrail never reads text: it reads the item's `outcome`
/// and `ci` fields written beside it (S-58).
pub const EXTERNAL_CI_PHRASE: &str = "passing external CI";
/// Marker of a confirmed empty gate in the floor reasoning (S-18).
pub const CONFIRMED_EMPTY_GATE: &str = "confirmed empty gate";

/// What CI said at the merged head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CiEvidence {
    /// A passing status/check whose context is not synthetic (`ci/build`, a check suite app, …).
    External {
        /// The passing context.
        context: String,
    },
    /// No passing external CI. `confirmed` when the `gitmoot/ci` "no external CI" stamp is
    /// present (the grace window elapsed: genuinely no CI, not a still-racing zero).
    EmptyGate {
        /// Whether the stamp is present.
        confirmed: bool,
    },
}

impl CiEvidence {
    /// Classifies `(context, state, description)` observations at the merged head: any
    /// `success` of a non-synthetic context is external CI; else an empty gate, confirmed when a
    /// `gitmoot/ci` (or `skillforge/ci`) status says "no external CI".
    pub fn classify<'a>(
        observations: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
    ) -> Self {
        let mut confirmed = false;
        for (context, state, description) in observations {
            let synthetic = SYNTHETIC_CONTEXT_PREFIXES
                .iter()
                .any(|p| context.starts_with(p));
            if !synthetic && state.eq_ignore_ascii_case("success") {
                return CiEvidence::External {
                    context: context.to_owned(),
                };
            }
            if synthetic
                && context.ends_with("/ci")
                && description.to_ascii_lowercase().contains("no external ci")
            {
                confirmed = true;
            }
        }
        CiEvidence::EmptyGate { confirmed }
    }
}

/// A verifiable outcome of an attributed implement job's pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Merged; `ci` is what CI said at the merged head (`None`: read the recorded observations).
    Merged {
        /// CI evidence given by the reporter, else derived from observations.
        ci: Option<CiEvidence>,
    },
    /// Blocked at the merge gate.
    Blocked,
    /// A review requested changes; `rounds` ≥ 1 fix rounds so far.
    ChangesRequested {
        /// Fix rounds (1 = the first request).
        rounds: u32,
    },
    /// Reverted after merging; `by_pr` is the revert PR when known.
    Reverted {
        /// The revert PR, if known.
        by_pr: Option<i64>,
    },
}

impl Outcome {
    /// Stable name: `merged`, `blocked`, `changes_requested`, `reverted`.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Merged { .. } => "merged",
            Outcome::Blocked => "blocked",
            Outcome::ChangesRequested { .. } => "changes_requested",
            Outcome::Reverted { .. } => "reverted",
        }
    }
}

/// An event the control plane harvests (from `skillforge harvest outcome` or `POST /events`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HarvestEvent {
    /// An outcome of `repo#pr`. `head` is the merged head SHA when known; `body` is the PR body
    /// (read only for revert detection, only when revert detection is on).
    Outcome {
        /// `owner/repo`.
        repo: String,
        /// PR number.
        pr: i64,
        /// What happened.
        outcome: Outcome,
        /// Merged head SHA (where the hard verifier and checkers run).
        head: Option<String>,
        /// SHAs whose recorded CI observations count for a merge without explicit CI evidence
        /// (the PR head and the merge commit).
        ci_shas: Vec<String>,
        /// PR body, for `Reverts …` detection on a merge.
        body: Option<String>,
    },
    /// A commit status or check suite at `repo@sha`.
    Ci {
        /// `owner/repo`.
        repo: String,
        /// Commit SHA.
        sha: String,
        /// Status context or check-suite app slug.
        context: String,
        /// `success`, `failure`, ….
        state: String,
        /// Status description.
        description: String,
    },
    /// A `Skillforge-Template` trailer found on `repo#pr` (issue 37 item 8): attributes the PR to
    /// the version it names unless a manual attribution exists ([`super::trailer`]). Delivered
    /// before the PR's outcome, so the outcome finds the attribution.
    Attributed {
        /// `owner/repo`.
        repo: String,
        /// PR number.
        pr: i64,
        /// The trailer and where it was read.
        trailer: super::trailer::TemplateTrailer,
    },
    /// A submitted review that requested changes (counted once per `review_id`).
    ChangesRequested {
        /// `owner/repo`.
        repo: String,
        /// PR number.
        pr: i64,
        /// The review's id.
        review_id: String,
    },
}

/// One feedback row to upsert, with its item: the shape every leg produces.
#[derive(Debug, Clone, PartialEq)]
pub struct RowPlan {
    /// Item id (`<repo>#<pr>`, `review#…`, `checker#…`, `hard#…`).
    pub item_id: String,
    /// Item title.
    pub title: String,
    /// Item metadata (tags, projected score).
    pub item_metadata: Value,
    /// Reviewer sentinel.
    pub reviewer: &'static str,
    /// `a` (baseline champion holds) or `b` (a vote against it).
    pub choice: &'static str,
    /// The projected signal; `feedback` is the row's reasoning.
    pub signal: NormalizedSignal,
}

/// `changes_requested` score: 0.6 − 0.2·(rounds − 1), floored at 0; rounds < 1 count as 1
/// (resolutions §8).
pub fn changes_requested_score(rounds: u32) -> f64 {
    let rounds = f64::from(rounds.max(1));
    (0.6 - 0.2 * (rounds - 1.0)).max(0.0)
}

/// The floor row (`<repo>#<pr>`, reviewer `gitmoot-auto`) of `outcome`, with `ci` already
/// resolved for a merge (S-17, S-18, S-20, S-21, S-22):
///
/// | outcome | score fields | choice |
/// |---|---|---|
/// | merged, external CI | soft 1.0 | a |
/// | merged, empty gate | none (`has_score = false`, never 0.5) | a |
/// | blocked | hard 0 | b |
/// | changes requested, k rounds | soft 0.6 − 0.2·(k−1), floor 0 | b |
/// | reverted | hard 0 | b |
///
/// The item is tagged `evidence_tier = verifiable_floor`, `evidence_rank = 2` (S-31, [`super::tier`]).
pub fn floor_row(
    repo: &str,
    pr: i64,
    outcome: &Outcome,
    ci: Option<&CiEvidence>,
    head: Option<&str>,
) -> RowPlan {
    let at = head.map(|h| format!(" at {h}")).unwrap_or_default();
    let mut score = EvaluatorScore::default();
    let (choice, reasoning, ci_label) = match (outcome, ci) {
        (Outcome::Merged { .. }, Some(CiEvidence::External { context })) => {
            score.soft = Some(1.0);
            (
                "a",
                format!("Merged with {EXTERNAL_CI_PHRASE} ({context}){at}."),
                "external",
            )
        }
        (Outcome::Merged { .. }, Some(CiEvidence::EmptyGate { confirmed: true })) => (
            "a",
            format!(
                "Merged through an empty gate{at}: {CONFIRMED_EMPTY_GATE} (the {EMPTY_GATE_CONTEXT} \"no external CI\" \
                 stamp is present). No quality score is recorded."
            ),
            "gitmoot",
        ),
        (Outcome::Merged { .. }, _) => (
            "a",
            format!(
                "Merged through an empty gate{at}: no passing external CI at the merged head. No quality score is recorded."
            ),
            "none",
        ),
        (Outcome::Blocked, _) => {
            score.hard = Some(0.0);
            ("b", "Blocked at the merge gate.".to_owned(), "")
        }
        (Outcome::ChangesRequested { rounds }, _) => {
            score.soft = Some(changes_requested_score(*rounds));
            (
                "b",
                format!(
                    "A review requested changes ({} fix round(s)).",
                    rounds.max(&1)
                ),
                "",
            )
        }
        (Outcome::Reverted { by_pr }, _) => {
            score.hard = Some(0.0);
            let by = by_pr.map(|n| format!(" by #{n}")).unwrap_or_default();
            ("b", format!("Reverted{by} after merging."), "")
        }
    };
    let signal = project(&score, &reasoning);
    let mut metadata = json!({
        "outcome": outcome.name(),
        "has_score": signal.has_score,
        "score": signal.has_score.then_some(signal.score),
    });
    if !ci_label.is_empty() {
        metadata["ci"] = json!(ci_label);
    }
    if let Outcome::ChangesRequested { rounds } = outcome {
        metadata["rounds"] = json!(rounds.max(&1));
    }
    if let Some(h) = head {
        metadata["head"] = json!(h);
    }
    EvidenceTier::VerifiableFloor.tag(&mut metadata);
    RowPlan {
        item_id: floor_item_id(repo, pr),
        title: format!("{repo}#{pr}"),
        item_metadata: metadata,
        reviewer: FLOOR_REVIEWER,
        choice,
        signal,
    }
}

/// `project_signal` over an evaluator score with `reasoning` as the only text.
pub fn project(score: &EvaluatorScore, reasoning: &str) -> NormalizedSignal {
    let mut input = SignalInput::from_parts(Some(score), None);
    input.reasoning = reasoning;
    project_signal(&input)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(outcome: Outcome, ci: Option<CiEvidence>, want_choice: &str, want_score: Option<f64>) {
        let row = floor_row("acme/app", 12, &outcome, ci.as_ref(), Some("abc"));
        assert_eq!(row.choice, want_choice, "{outcome:?}");
        assert_eq!(
            row.signal.has_score.then_some(row.signal.score),
            want_score,
            "{outcome:?}"
        );
        assert_eq!(row.item_id, "acme/app#12");
        assert_eq!(row.reviewer, "gitmoot-auto");
        assert!(
            row.signal.feedback.starts_with("Reasoning:\n"),
            "{}",
            row.signal.feedback
        );
    }

    #[test]
    fn s17_s18_s20_s21_s22_outcome_table() {
        check(
            Outcome::Merged { ci: None },
            Some(CiEvidence::External {
                context: "ci/build".into(),
            }),
            "a",
            Some(1.0),
        );
        check(
            Outcome::Merged { ci: None },
            Some(CiEvidence::EmptyGate { confirmed: false }),
            "a",
            None,
        );
        check(
            Outcome::Merged { ci: None },
            Some(CiEvidence::EmptyGate { confirmed: true }),
            "a",
            None,
        );
        check(Outcome::Blocked, None, "b", Some(0.0));
        check(
            Outcome::ChangesRequested { rounds: 1 },
            None,
            "b",
            Some(0.6),
        );
        check(Outcome::Reverted { by_pr: Some(13) }, None, "b", Some(0.0));
    }

    #[test]
    fn s21_changes_requested_falls_with_rounds_and_floors_at_zero() {
        let scores: Vec<f64> = (1..=5).map(changes_requested_score).collect();
        assert!(scores.windows(2).take(3).all(|w| w[1] < w[0]), "{scores:?}");
        assert!((scores[2] - 0.2).abs() < 1e-9);
        assert_eq!(scores[4], 0.0);
        assert_eq!(changes_requested_score(0), changes_requested_score(1));
    }

    #[test]
    fn s18_empty_gate_marks_confirmation_and_never_half() {
        let row = floor_row(
            "acme/app",
            1,
            &Outcome::Merged { ci: None },
            Some(&CiEvidence::EmptyGate { confirmed: true }),
            None,
        );
        assert!(row.signal.feedback.contains(CONFIRMED_EMPTY_GATE));
        assert_eq!(row.item_metadata["score"], Value::Null);
        assert!(!row.item_metadata.to_string().contains("0.5"));
        let row = floor_row(
            "acme/app",
            1,
            &Outcome::Merged { ci: None },
            Some(&CiEvidence::EmptyGate { confirmed: false }),
            None,
        );
        assert!(!row.signal.feedback.contains(CONFIRMED_EMPTY_GATE));
    }

    #[test]
    fn ci_classification() {
        let check = |obs: &[(&str, &str, &str)], want: CiEvidence| {
            assert_eq!(CiEvidence::classify(obs.iter().copied()), want, "{obs:?}");
        };
        check(
            &[("ci/build", "success", "")],
            CiEvidence::External {
                context: "ci/build".into(),
            },
        );
        check(
            &[("gitmoot/ci", "success", "no external CI")],
            CiEvidence::EmptyGate { confirmed: true },
        );
        check(
            &[("gitmoot/ci", "success", "")],
            CiEvidence::EmptyGate { confirmed: false },
        );
        check(
            &[("ci/build", "failure", "")],
            CiEvidence::EmptyGate { confirmed: false },
        );
        check(&[], CiEvidence::EmptyGate { confirmed: false });
    }
}
