//! Which attributed job kinds are harvested, and which legs each kind gets (seed: SkillOpt,
//! "Automatic trace-harvested feedback (Mode A, off by default)" › Scope: "Only implement-family
//! jobs that carry a template attribution are harvested"; "Deterministic hard-verifier tier":
//! "Because it re-runs the tests, it only maps onto testable implement legs — subjective
//! review-quality kinds keep the soft cross-family signal"; S-16, S-41).

use super::legs::Leg;

/// Attribution kind of a testable implement job (the default of `harvest attribute --kind`).
pub const IMPLEMENT_KIND: &str = "implement";
/// Attribution kind of an implement-family job whose change is judged subjectively (prose,
/// documentation, design): harvested, but never by the hard verifier.
pub const REVIEW_QUALITY_KIND: &str = "review-quality";

/// An implement-family job kind the harvester accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    /// `implement`: the floor row and every enabled leg.
    Testable,
    /// `review-quality`: the floor row (its merge outcome) and the soft cross-family review only;
    /// no hard verifier (there is nothing to re-run) and no objective checkers (S-41).
    ReviewQuality,
}

impl JobKind {
    /// The kind an attribution's `kind` names; `None` for anything outside the implement family
    /// (`coordinator`, `ask`, …), which is never harvested (S-16).
    pub fn parse(kind: &str) -> Option<JobKind> {
        match kind {
            IMPLEMENT_KIND => Some(JobKind::Testable),
            REVIEW_QUALITY_KIND => Some(JobKind::ReviewQuality),
            _ => None,
        }
    }

    /// Whether `leg` maps onto this kind: every leg for a testable job; only the review for a
    /// review-quality one (S-41).
    pub fn has_leg(self, leg: Leg) -> bool {
        match self {
            JobKind::Testable => true,
            JobKind::ReviewQuality => leg == Leg::Review,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s16_s41_kinds_and_their_legs() {
        assert_eq!(JobKind::parse("implement"), Some(JobKind::Testable));
        assert_eq!(
            JobKind::parse("review-quality"),
            Some(JobKind::ReviewQuality)
        );
        assert_eq!(JobKind::parse("coordinator"), None);
        assert!(Leg::ALL.into_iter().all(|l| JobKind::Testable.has_leg(l)));
        assert!(
            !JobKind::ReviewQuality.has_leg(Leg::HardVerifier),
            "S-41: no hard verifier on a review-quality kind"
        );
        assert!(!JobKind::ReviewQuality.has_leg(Leg::Checkers));
        assert!(JobKind::ReviewQuality.has_leg(Leg::Review));
    }
}
