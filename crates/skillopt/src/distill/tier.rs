//! Evidence tiers: how much one piece of review evidence counts (seed: SkillOpt, "Cross-family
//! review soft signal": weight tiers human gold > verifiable floor > judge; "Automatic
//! trace-harvested feedback" and "Deterministic checker objective signal" for the sentinels).

use serde::Serialize;

/// Sources whose rows a person wrote: the Markdown packet, GitHub comments, the paired-review
/// packet, the champion/challenger A/B pick, and hand-entered feedback.
pub const HUMAN_SOURCES: &[&str] = &[
    "markdown",
    "github",
    "pairwise-review",
    "pairwise",
    "skillopt-ab",
    "human",
    "manual",
];

/// Reviewer sentinels of the verifiable floor in an auto-trace run: the merge/CI outcome
/// (`gitmoot-auto`), the objective checker (`gitmoot-checker`) and the hard verifier
/// (`gitmoot-verifier`).
pub const VERIFIABLE_REVIEWERS: &[&str] = &["gitmoot-auto", "gitmoot-checker", "gitmoot-verifier"];

/// How much a piece of evidence is trusted. Ordered: `Judge < VerifiableFloor < HumanGold`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceTier {
    /// An LLM judge, a cross-family review row, BINEVAL verdicts, or provenance we cannot place.
    Judge,
    /// Deterministic outcomes: merge/CI floor, checkers, hard verifiers, failed artifact checks.
    VerifiableFloor,
    /// A person's review (Markdown, GitHub, paired review, A/B pick).
    HumanGold,
}

impl EvidenceTier {
    /// Every tier, most trusted first.
    pub const ALL: [EvidenceTier; 3] = [
        EvidenceTier::HumanGold,
        EvidenceTier::VerifiableFloor,
        EvidenceTier::Judge,
    ];

    /// Weight of one supporting item: human gold 4, verifiable floor 2, judge 1. Chosen so two
    /// verifiable rows equal one human row and a judge row never outweighs a verifiable one.
    pub fn weight(self) -> u32 {
        match self {
            EvidenceTier::HumanGold => 4,
            EvidenceTier::VerifiableFloor => 2,
            EvidenceTier::Judge => 1,
        }
    }

    /// Wire and display name: `human_gold`, `verifiable_floor`, `judge`.
    pub fn as_str(self) -> &'static str {
        match self {
            EvidenceTier::HumanGold => "human_gold",
            EvidenceTier::VerifiableFloor => "verifiable_floor",
            EvidenceTier::Judge => "judge",
        }
    }

    /// Short label used in the rendered guidance section: `human`, `verifiable`, `judge`.
    pub fn label(self) -> &'static str {
        match self {
            EvidenceTier::HumanGold => "human",
            EvidenceTier::VerifiableFloor => "verifiable",
            EvidenceTier::Judge => "judge",
        }
    }
}

/// Classifies a feedback row by its `source`, `reviewer` and `item_id` (all compared trimmed,
/// case-insensitively), first match wins:
/// 1. judge: a reviewer or source naming a judge, source `binary-disagreement` (projected
///    BINEVAL lessons), reviewer `gitmoot-review` or an item `review#…` (the cross-family review row);
/// 2. verifiable floor: a [`VERIFIABLE_REVIEWERS`] sentinel, or an item `hard#…` / `checker#…`;
/// 3. human gold: a [`HUMAN_SOURCES`] source;
/// 4. anything else (including other `auto-trace` rows): judge — provenance we cannot place is
///    weighted low rather than trusted.
pub fn classify_tier(source: &str, reviewer: &str, item_id: &str) -> EvidenceTier {
    let source = source.trim().to_ascii_lowercase();
    let reviewer = reviewer.trim().to_ascii_lowercase();
    let item_id = item_id.trim().to_ascii_lowercase();
    if reviewer.contains("judge")
        || source.contains("judge")
        || source == "binary-disagreement"
        || reviewer == "gitmoot-review"
        || item_id.starts_with("review#")
    {
        return EvidenceTier::Judge;
    }
    if VERIFIABLE_REVIEWERS.contains(&reviewer.as_str())
        || item_id.starts_with("hard#")
        || item_id.starts_with("checker#")
    {
        return EvidenceTier::VerifiableFloor;
    }
    if HUMAN_SOURCES.contains(&source.as_str()) {
        return EvidenceTier::HumanGold;
    }
    EvidenceTier::Judge
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_tier_table() {
        use EvidenceTier::*;
        let table: &[((&str, &str, &str), EvidenceTier)] = &[
            (("markdown", "alice", "item-1"), HumanGold),
            (("GitHub", "bob", "item-1"), HumanGold),
            (("pairwise-review", "carol", "item-1"), HumanGold),
            (("skillopt-ab", "human", "q-1"), HumanGold),
            (
                ("auto-trace", "gitmoot-auto", "owner/repo#12"),
                VerifiableFloor,
            ),
            (
                ("auto-trace", "gitmoot-checker", "checker#owner/repo#12"),
                VerifiableFloor,
            ),
            (
                ("auto-trace", "gitmoot-verifier", "hard#owner/repo#12"),
                VerifiableFloor,
            ),
            (
                ("auto-trace", "someone", "hard#owner/repo#12"),
                VerifiableFloor,
            ),
            (
                ("auto-trace", "gitmoot-review", "review#owner/repo#12"),
                Judge,
            ),
            (("markdown", "llm-judge", "item-1"), Judge),
            (("binary-disagreement", "alice", "item-1"), Judge),
            (("auto-trace", "unknown", "owner/repo#12"), Judge),
            (("somewhere-else", "alice", "item-1"), Judge),
        ];
        for ((source, reviewer, item), want) in table {
            assert_eq!(
                classify_tier(source, reviewer, item),
                *want,
                "{source}/{reviewer}/{item}"
            );
        }
    }

    #[test]
    fn tiers_are_ordered_and_weighted() {
        assert!(EvidenceTier::HumanGold > EvidenceTier::VerifiableFloor);
        assert!(EvidenceTier::VerifiableFloor > EvidenceTier::Judge);
        assert!(EvidenceTier::HumanGold.weight() > EvidenceTier::VerifiableFloor.weight());
        assert!(EvidenceTier::VerifiableFloor.weight() > EvidenceTier::Judge.weight());
    }
}
