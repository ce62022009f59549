//! Weight tiers of the rows an auto-trace export carries, as item tags a consumer can order by
//! (seed: SkillOpt, "Cross-family review soft signal": "weight tiers: human gold > verifiable
//! floor > cross-family judge > same-family judge"; "Deterministic checker objective signal":
//! "the export/optimizer weights them distinctly from the subjective judge row via the
//! gitmoot-checker sentinel + the objective item tag"; S-31).
//!
//! **Where the tag lives:** in the item metadata of every harvested item, as `evidence_tier`
//! (a name) and `evidence_rank` (1 = most trusted). No package struct gains a field (S-01) and
//! the reasoning stays the projected `NormalizedSignal.feedback`. Each harvested item has exactly
//! one harvester row (its sentinel's), so the item's tag is that row's tag. A person's row never
//! comes from the harvester: it is recognised by its human `source` (the same list `distill`
//! uses) and is [`EvidenceTier::HumanGold`] whatever item it sits on — see [`tier_of_row`], the
//! reference consumer rule. No judge item is ever tagged human gold or verifiable floor.

use serde_json::Value;

/// Item metadata key of the tier name.
pub const TIER_KEY: &str = "evidence_tier";
/// Item metadata key of the tier rank (1 = most trusted, 5 = least).
pub const RANK_KEY: &str = "evidence_rank";

/// Feedback sources a person writes (Markdown packet, GitHub comments, paired review, A/B pick,
/// hand-entered) — the list `distill`'s tiers use.
pub const HUMAN_SOURCES: &[&str] = crate::distill::tier::HUMAN_SOURCES;

/// How much one row counts, most trusted first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EvidenceTier {
    /// A person's review (rank 1).
    HumanGold,
    /// A verifiable outcome: the merge/CI floor (`gitmoot-auto`) and the hard verifier
    /// (`gitmoot-verifier`) (rank 2).
    VerifiableFloor,
    /// The deterministic checkers (`gitmoot-checker`): objective, un-gameable, but soft quality
    /// priors — weighted distinctly from, and above, every judge row (rank 3).
    ObjectiveChecker,
    /// The cross-family review (`gitmoot-review`, another family) (rank 4).
    CrossFamilyJudge,
    /// The same-family review fallback (`gitmoot-review`, `self_family = true`) (rank 5).
    SameFamilyJudge,
}

impl EvidenceTier {
    /// Every tier, most trusted first.
    pub const ALL: [EvidenceTier; 5] = [
        EvidenceTier::HumanGold,
        EvidenceTier::VerifiableFloor,
        EvidenceTier::ObjectiveChecker,
        EvidenceTier::CrossFamilyJudge,
        EvidenceTier::SameFamilyJudge,
    ];

    /// Tag value: `human_gold`, `verifiable_floor`, `objective_checker`, `cross_family_judge`,
    /// `same_family_judge`.
    pub fn as_str(self) -> &'static str {
        match self {
            EvidenceTier::HumanGold => "human_gold",
            EvidenceTier::VerifiableFloor => "verifiable_floor",
            EvidenceTier::ObjectiveChecker => "objective_checker",
            EvidenceTier::CrossFamilyJudge => "cross_family_judge",
            EvidenceTier::SameFamilyJudge => "same_family_judge",
        }
    }

    /// Rank, 1 (most trusted) ..= 5.
    pub fn rank(self) -> u8 {
        match self {
            EvidenceTier::HumanGold => 1,
            EvidenceTier::VerifiableFloor => 2,
            EvidenceTier::ObjectiveChecker => 3,
            EvidenceTier::CrossFamilyJudge => 4,
            EvidenceTier::SameFamilyJudge => 5,
        }
    }

    /// The tier named `name` (a tag value).
    pub fn from_name(name: &str) -> Option<EvidenceTier> {
        EvidenceTier::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// Adds `evidence_tier` and `evidence_rank` to an item's metadata object (no-op on a
    /// non-object).
    pub fn tag(self, metadata: &mut Value) {
        if let Some(map) = metadata.as_object_mut() {
            map.insert(TIER_KEY.to_owned(), Value::from(self.as_str()));
            map.insert(RANK_KEY.to_owned(), Value::from(self.rank()));
        }
    }
}

/// The reference consumer rule: the tier of one exported feedback row from its `source` and its
/// item's `metadata`. A human source ⇒ [`EvidenceTier::HumanGold`]; else the item's
/// `evidence_tier` tag; `None` for a row no rule places (untagged, not human).
pub fn tier_of_row(source: &str, item_metadata: &Value) -> Option<EvidenceTier> {
    let source = source.trim().to_ascii_lowercase();
    if HUMAN_SOURCES.contains(&source.as_str()) {
        return Some(EvidenceTier::HumanGold);
    }
    item_metadata
        .get(TIER_KEY)
        .and_then(Value::as_str)
        .and_then(EvidenceTier::from_name)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn s31_tiers_order_human_floor_checker_cross_same() {
        let ranks: Vec<u8> = EvidenceTier::ALL.iter().map(|t| t.rank()).collect();
        assert_eq!(ranks, vec![1, 2, 3, 4, 5]);
        assert!(EvidenceTier::HumanGold < EvidenceTier::VerifiableFloor);
        assert!(EvidenceTier::CrossFamilyJudge < EvidenceTier::SameFamilyJudge);
        for t in EvidenceTier::ALL {
            assert_eq!(EvidenceTier::from_name(t.as_str()), Some(t));
        }
    }

    #[test]
    fn s31_reference_consumer_rule() {
        let mut floor = json!({"outcome": "merged"});
        EvidenceTier::VerifiableFloor.tag(&mut floor);
        assert_eq!(floor[RANK_KEY], 2);
        assert_eq!(
            tier_of_row("auto-trace", &floor),
            Some(EvidenceTier::VerifiableFloor)
        );
        assert_eq!(
            tier_of_row("markdown", &floor),
            Some(EvidenceTier::HumanGold),
            "a person's row on a harvested item"
        );
        assert_eq!(tier_of_row("auto-trace", &json!({})), None);
    }
}
