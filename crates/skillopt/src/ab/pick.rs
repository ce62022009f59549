//! Blind presentation and the pick of a Mode B A/B (seed: SkillOpt, "Champion-challenger A/B
//! preferences (Mode B)"; S-64..S-67): who the two arms are, the label shuffle, mapping a pick
//! back to champion/challenger, and the rows one pick writes.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use skillforge_contract::{RankedFeedbackEvent, ranked_feedback_event_id};

/// Run id prefix of A/B picks: `skillopt-ab:<challenger version id>` (S-66).
pub const RUN_PREFIX: &str = "skillopt-ab:";
/// Source (and reviewer family tag) of a human pick (S-66).
pub const HUMAN_SOURCE: &str = "skillopt-ab";
/// Reviewer of a human pick (S-66).
pub const HUMAN_REVIEWER: &str = "human";
/// Reviewer and source of an LLM judge row (S-79).
pub const JUDGE_SOURCE: &str = "skillopt-ab-judge";
/// `eval_runs.metadata_json.feedback_source` of an A/B run (S-66).
pub const FEEDBACK_SOURCE: &str = "preference_ab";

/// `skillopt-ab:<challenger version id>`.
pub fn run_id(challenger_version_id: &str) -> String {
    format!("{RUN_PREFIX}{challenger_version_id}")
}

/// One side of the A/B; also the option label stored for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The template's current version.
    Champion,
    /// The pending candidate.
    Challenger,
}

impl Role {
    /// `champion` | `challenger` (option label and role of the stored option).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Champion => "champion",
            Role::Challenger => "challenger",
        }
    }

    /// The other side.
    pub fn other(self) -> Role {
        match self {
            Role::Champion => Role::Challenger,
            Role::Challenger => Role::Champion,
        }
    }
}

/// A blind label as shown to the human and the judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Label {
    /// Option A.
    A,
    /// Option B.
    B,
}

impl Label {
    /// Parses `a`/`b` (any case, trimmed); anything else is `None`.
    pub fn parse(text: &str) -> Option<Label> {
        match text.trim().to_ascii_lowercase().as_str() {
            "a" => Some(Label::A),
            "b" => Some(Label::B),
            _ => None,
        }
    }

    /// `a` | `b`.
    pub fn as_str(self) -> &'static str {
        match self {
            Label::A => "a",
            Label::B => "b",
        }
    }
}

/// The label shuffle of one A/B: which role shows as Option A. Recorded with the pick (S-65).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Shuffle {
    /// True when the challenger is shown as Option A.
    pub challenger_is_a: bool,
}

impl Shuffle {
    /// A fair coin from `seed` (`ab --seed N` uses N itself, facts §6).
    pub fn from_seed(seed: u64) -> Shuffle {
        Shuffle {
            challenger_is_a: StdRng::seed_from_u64(seed).random::<bool>(),
        }
    }

    /// The role shown under `label`.
    pub fn role_of(self, label: Label) -> Role {
        match (label, self.challenger_is_a) {
            (Label::A, true) | (Label::B, false) => Role::Challenger,
            (Label::A, false) | (Label::B, true) => Role::Champion,
        }
    }

    /// The label `role` is shown under.
    pub fn label_of(self, role: Role) -> Label {
        if self.role_of(Label::A) == role {
            Label::A
        } else {
            Label::B
        }
    }
}

/// What one pick writes as its ranked event (S-66): ranking `[winner, loser]` by role label,
/// winner, reviewer/source, and the per-pick `source_url` (S-67, resolutions 4).
#[derive(Debug, Clone, PartialEq)]
pub struct PickRecord {
    /// `skillopt-ab:<challenger>`.
    pub run_id: String,
    /// The pick's item (one per A/B, so each pick keeps its own two answers).
    pub item_id: String,
    /// Who won.
    pub winner: Role,
    /// `human` or `skillopt-ab-judge`.
    pub reviewer: String,
    /// `skillopt-ab` or `skillopt-ab-judge`.
    pub source: String,
    /// `skillforge://ab/<pick id>`: stable per pick, so a retried job upserts the same row.
    pub source_url: String,
    /// Free text (the judge's reasoning, the shuffle for a human pick).
    pub reasoning: String,
}

/// `skillforge://ab/<pick id>`, the per-pick source URL (resolutions 4).
pub fn pick_source_url(pick_id: &str) -> String {
    format!("skillforge://ab/{pick_id}")
}

impl PickRecord {
    /// The contract event: ranking `[winner, loser]`, winner label, created now.
    pub fn to_event(&self, created_at: &str) -> RankedFeedbackEvent {
        RankedFeedbackEvent {
            id: ranked_feedback_event_id(
                &self.run_id,
                &self.item_id,
                &self.reviewer,
                &self.source,
                &self.source_url,
            ),
            run_id: self.run_id.clone(),
            item_id: self.item_id.clone(),
            ranking: vec![
                self.winner.as_str().to_owned(),
                self.winner.other().as_str().to_owned(),
            ],
            winner: self.winner.as_str().to_owned(),
            reasoning: self.reasoning.clone(),
            reviewer: self.reviewer.clone(),
            source: self.source.clone(),
            source_url: self.source_url.clone(),
            created_at: created_at.to_owned(),
            ..RankedFeedbackEvent::default()
        }
    }
}

/// Who the challenger is (S-64, resolutions 10): `--challenger` when given (it must be pending),
/// else the sole pending version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChallengerChoice {
    /// A/B against this version.
    Chosen(String),
    /// No pending version: a clean no-op, nothing written.
    NoneToAb,
    /// Several pending and no `--challenger`: refused with the list.
    Ambiguous(Vec<String>),
    /// `--challenger` names a version that is not pending.
    NotPending(String),
}

/// Chooses the challenger among `pending` version ids (S-64, resolutions 10).
pub fn choose_challenger(pending: &[String], requested: Option<&str>) -> ChallengerChoice {
    match requested {
        Some(id) if pending.iter().any(|p| p == id) => ChallengerChoice::Chosen(id.to_owned()),
        Some(id) => ChallengerChoice::NotPending(id.to_owned()),
        None => match pending {
            [] => ChallengerChoice::NoneToAb,
            [only] => ChallengerChoice::Chosen(only.clone()),
            many => ChallengerChoice::Ambiguous(many.to_vec()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // S-65
    #[test]
    fn s65_pick_maps_back_through_the_shuffle() {
        let mut seen = [false, false];
        for seed in 0..64 {
            let shuffle = Shuffle::from_seed(seed);
            assert_eq!(
                shuffle,
                Shuffle::from_seed(seed),
                "seeded shuffle reproduces"
            );
            seen[usize::from(shuffle.challenger_is_a)] = true;
            for role in [Role::Champion, Role::Challenger] {
                assert_eq!(shuffle.role_of(shuffle.label_of(role)), role);
            }
            assert_ne!(shuffle.role_of(Label::A), shuffle.role_of(Label::B));
        }
        assert!(seen[0] && seen[1], "both orders occur");
        let challenger_a = Shuffle {
            challenger_is_a: true,
        };
        assert_eq!(challenger_a.role_of(Label::A), Role::Challenger);
        let record = PickRecord {
            run_id: run_id("planner@v2"),
            item_id: "pick-1".into(),
            winner: challenger_a.role_of(Label::parse(" A ").unwrap()),
            reviewer: HUMAN_REVIEWER.into(),
            source: HUMAN_SOURCE.into(),
            source_url: pick_source_url("job-1"),
            reasoning: String::new(),
        };
        let event = record.to_event("2026-01-01T00:00:00Z");
        assert_eq!(event.ranking, ["challenger", "champion"]);
        assert_eq!(event.winner, "challenger");
        assert_eq!(event.run_id, "skillopt-ab:planner@v2");
        assert_eq!(Label::parse("tie"), None);
    }

    // S-64
    #[test]
    fn s64_challenger_choice() {
        let ids = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(choose_challenger(&[], None), ChallengerChoice::NoneToAb);
        assert_eq!(
            choose_challenger(&ids(&["t@v2"]), None),
            ChallengerChoice::Chosen("t@v2".into())
        );
        assert_eq!(
            choose_challenger(&ids(&["t@v2", "t@v3"]), None),
            ChallengerChoice::Ambiguous(ids(&["t@v2", "t@v3"]))
        );
        assert_eq!(
            choose_challenger(&ids(&["t@v2", "t@v3"]), Some("t@v3")),
            ChallengerChoice::Chosen("t@v3".into())
        );
        assert_eq!(
            choose_challenger(&ids(&["t@v2"]), Some("t@v1")),
            ChallengerChoice::NotPending("t@v1".into())
        );
    }

    // S-67
    #[test]
    fn s67_each_pick_has_its_own_source_url() {
        assert_ne!(pick_source_url("job-1"), pick_source_url("job-2"));
        assert_eq!(
            pick_source_url("job-1"),
            pick_source_url("job-1"),
            "a retry of one job keeps its url"
        );
    }
}
