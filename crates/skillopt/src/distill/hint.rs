//! What a reviewer must fill in when distill finds nothing to learn from
//! ([`super::NO_ACTIONABLE_FEEDBACK`]): the fields it reads and the file they live in.
//!
//! A ranking or an A/B choice says which output won, not what the template should do
//! differently, and the winner's text cannot be turned into guidance deterministically; so distill
//! learns only from `useful_traits`, `rejected_traits` and `required_improvements` (ranked items)
//! and `reasoning` (A/B items choosing `a`, `b` or `neither`). The hint names those fields and the
//! Markdown packet the events came from (a Markdown event's `source_url` is its packet directory,
//! facts §4).

use std::collections::BTreeSet;

use skillforge_contract::TrainingPackage;

use crate::harvest::AUTO_TRACE_SOURCE;
use crate::packet::MARKDOWN_SOURCE;

/// The fields distill learns from, as a reviewer reads them in `feedback.yml`.
pub const LEARNED_FIELDS: &str = "useful_traits, rejected_traits or required_improvements (ranked items) and reasoning (A/B items)";

/// One sentence for a no-candidate package: how many feedback rows the package had, which fields
/// were missing, and which `feedback.yml` to fill (the Markdown packet directories of the events,
/// else "the review packet's feedback.yml").
pub fn no_actionable_hint(package: &TrainingPackage) -> String {
    let n_ranked = package.ranked_feedback_events.len();
    let n_ab = package.feedback_events.len();
    let packets: BTreeSet<&str> = package
        .ranked_feedback_events
        .iter()
        .map(|e| (e.source.as_str(), e.source_url.as_str()))
        .chain(
            package
                .feedback_events
                .iter()
                .map(|e| (e.source.as_str(), e.source_url.as_str())),
        )
        .filter(|(source, url)| *source == MARKDOWN_SOURCE && !url.trim().is_empty())
        .map(|(_, url)| url.trim())
        .collect();
    let file = if packets.is_empty() {
        "the review packet's feedback.yml".to_owned()
    } else {
        packets
            .iter()
            .map(|dir| format!("`{}/feedback.yml`", dir.trim_end_matches('/')))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let automatic_positive = package
        .feedback_events
        .iter()
        .filter(|e| {
            e.source.trim() == AUTO_TRACE_SOURCE && e.choice.trim().eq_ignore_ascii_case("a")
        })
        .count();
    if n_ranked == 0 && n_ab > 0 && automatic_positive == n_ab {
        // Issue 37 item 10: harvested rows carry reasoning; what they lack is a direction.
        return format!(
            "the package's {n_ab} feedback event(s) are harvested outcomes that all went well (merged, passing \
             verifier and checkers): a good outcome confirms the template and names nothing to change; a candidate \
             needs a negative outcome (blocked, changes requested, reverted, a failing verifier or a checker \
             finding) or human feedback ({LEARNED_FIELDS})"
        );
    }
    let seen = if n_ranked + n_ab == 0 {
        "the package has no feedback events".to_owned()
    } else {
        format!(
            "the package's {n_ranked} ranked and {n_ab} A/B feedback event(s) carry no useful_traits, \
             rejected_traits, required_improvements or reasoning (a ranking or choice alone says which \
             output won, not what to change)"
        )
    };
    format!(
        "{seen}; the optimizer learns from {LEARNED_FIELDS}: fill them in {file}, import it again \
         (skillforge feedback markdown import --packet DIR) and re-export the training package"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distill::fixtures::package;
    use skillforge_contract::RankedFeedbackEvent;

    #[test]
    fn names_the_fields_and_the_packet_file() {
        let mut pkg = package();
        pkg.ranked_feedback_events.push(RankedFeedbackEvent {
            id: "r1".into(),
            run_id: pkg.eval_run.id.clone(),
            item_id: "i1".into(),
            ranking: vec!["a".into(), "b".into()],
            reviewer: "alice".into(),
            source: MARKDOWN_SOURCE.into(),
            source_url: "/packets/run-1".into(),
            ..Default::default()
        });
        let hint = no_actionable_hint(&pkg);
        assert!(hint.contains("1 ranked and 0 A/B"), "{hint}");
        assert!(
            hint.contains("useful_traits, rejected_traits or required_improvements"),
            "{hint}"
        );
        assert!(hint.contains("reasoning (A/B items)"), "{hint}");
        assert!(hint.contains("`/packets/run-1/feedback.yml`"), "{hint}");
    }

    #[test]
    fn without_events_says_so() {
        let hint = no_actionable_hint(&package());
        assert!(
            hint.starts_with("the package has no feedback events;"),
            "{hint}"
        );
        assert!(hint.contains("the review packet's feedback.yml"), "{hint}");
    }
}
