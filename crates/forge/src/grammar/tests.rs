//! The comment grammar table: every form of facts §4, plus malformed and unrelated comments.

use super::*;

fn feedback(body: &str) -> FeedbackFile {
    match parse_comment(body) {
        CommentFeedback::Feedback(file) => file,
        other => panic!("expected feedback from {body:?}, got {other:?}"),
    }
}

fn entry<'a>(file: &'a FeedbackFile, item: &str) -> &'a FeedbackEntry {
    file.items
        .iter()
        .find(|e| e.item_id == item)
        .unwrap_or_else(|| panic!("no entry for {item} in {file:?}"))
}

fn ranking(e: &FeedbackEntry) -> &str {
    match &e.ranking {
        Some(RankingText::One(s)) => s,
        other => panic!("ranking {other:?}"),
    }
}

#[test]
fn packet_bodies_are_ours() {
    assert_eq!(
        parse_comment(&format!(
            "{PACKET_MARKER}\n# skillforge review packet: r1\nitems:\n- item_id: x"
        )),
        CommentFeedback::Packet
    );
    assert_eq!(
        parse_comment("# Gitmoot SkillOpt Feedback: run-1\n\nitem-001: a"),
        CommentFeedback::Packet
    );
}

#[test]
fn unrelated_comments_are_not_feedback() {
    for body in [
        "LGTM, thanks!",
        "Looks great.\n\nI'll review tomorrow",
        "> item-001: b\n\nquoting someone",
        "```rust\nfn main() {}\n```",
        "",
    ] {
        assert_eq!(parse_comment(body), CommentFeedback::Unrelated, "{body:?}");
    }
}

#[test]
fn short_form_ab_lines_of_the_seed() {
    let file = feedback(
        "run_id: run-2026-05-31\nitem-001: b - More concrete and easier to execute.\nitem-002: tie\n",
    );
    assert_eq!(file.run_id, "run-2026-05-31");
    assert_eq!(entry(&file, "item-001").choice, "b");
    assert_eq!(
        entry(&file, "item-001").reasoning,
        "More concrete and easier to execute."
    );
    assert_eq!(entry(&file, "item-002").choice, "tie");
    assert_eq!(entry(&file, "item-002").reasoning, "");
}

#[test]
fn short_form_ranking_and_traits_of_the_seed() {
    let body = "run_id: landing-page-explore-001\nhero-001 ranking: C > A > D > B\nbest traits:\n- C: clearest product explanation\n- A: best mascot placement\nreject:\n- B: too generic\n";
    let file = feedback(body);
    let hero = entry(&file, "hero-001");
    assert_eq!(ranking(hero), "C > A > D > B");
    assert_eq!(
        hero.useful_traits["c"],
        vec!["clearest product explanation"]
    );
    assert_eq!(hero.useful_traits["a"], vec!["best mascot placement"]);
    assert_eq!(hero.rejected_traits["b"], vec!["too generic"]);
}

#[test]
fn short_form_direct_ranking_signals_and_reviewer() {
    let file = feedback(
        "reviewer: dana\nhero-001: C > A = D | B - C explains it best\nhero-001 quality: strong\nhero-001 continue_mode: refine\nhero-001 promote: y\n# a heading is ignored\n",
    );
    assert_eq!(file.reviewer, "dana");
    let hero = entry(&file, "hero-001");
    assert_eq!(ranking(hero), "C > A = D | B");
    assert_eq!(hero.reasoning, "C explains it best");
    assert_eq!(
        (
            hero.quality.as_str(),
            hero.continue_mode.as_str(),
            hero.promote.as_str()
        ),
        ("strong", "refine", "y")
    );
}

#[test]
fn ranking_line_reason_after_dash() {
    let file = feedback("hero-001 ranking: b > a - a is too long");
    assert_eq!(ranking(entry(&file, "hero-001")), "b > a");
    assert_eq!(entry(&file, "hero-001").reasoning, "a is too long");
}

#[test]
fn fenced_yaml_block() {
    let body = "Here is my review:\n\n```yaml\nrun_id: r1\nreviewer: sam\nitems:\n  - item_id: item-001\n    choice: a\n    reasoning: shorter\n```\nthanks";
    let file = feedback(body);
    assert_eq!(
        (file.run_id.as_str(), file.reviewer.as_str()),
        ("r1", "sam")
    );
    assert_eq!(entry(&file, "item-001").choice, "a");
    assert_eq!(entry(&file, "item-001").reasoning, "shorter");
}

#[test]
fn fenced_yaml_without_run_id_is_for_the_issue_run() {
    let file = feedback(
        "```\nitems:\n- item_id: hero-001\n  ranking: c > a\n  useful_traits: {c: [short]}\n```",
    );
    assert_eq!(file.run_id, "");
    assert_eq!(ranking(entry(&file, "hero-001")), "c > a");
}

#[test]
fn whole_body_yaml() {
    let file = feedback(
        "run_id: r1\nitems:\n- item_id: item-002\n  choice: neither\n  reasoning: both miss the point\n",
    );
    assert_eq!(entry(&file, "item-002").choice, "neither");
}

#[test]
fn whole_body_is_not_tried_when_quoted() {
    // A quote line means a reply quoting the packet: the whole body is not YAML, the short form reads it.
    let file = feedback("> run_id: r1\nitems:\nitem-001: a");
    assert_eq!(entry(&file, "item-001").choice, "a");
}

#[test]
fn malformed_comments_say_why() {
    let table = [
        ("```yaml\nrun_id: r1\nitems: [\n```", "YAML does not parse"),
        (
            "```yaml\nrun_id: r1\nitems:\n- item_id: a\n  colour: red\n```",
            "unknown key",
        ),
        ("```yaml\nrun_id: r1\n```", "no items"),
        (
            "run_id: r1\nitems:\n- item_id: x\n  choice: [a, b]\n",
            "feedback.yml",
        ),
        (
            "best traits:\n- C: clear\nhero-001: C > A",
            "before any item",
        ),
    ];
    for (body, want) in table {
        match parse_comment(body) {
            CommentFeedback::Malformed(reason) => {
                assert!(reason.contains(want), "{body:?}: {reason}")
            }
            other => panic!("{body:?} should be malformed, got {other:?}"),
        }
    }
}

#[test]
fn invalid_choice_is_read_and_left_to_validation() {
    // The grammar reads `maybe` as a choice word; validation against the run refuses it (S-94).
    assert_eq!(
        entry(&feedback("item-001: maybe"), "item-001").choice,
        "maybe"
    );
}

fn assignments() -> skillforge_contract::Assignments {
    use skillforge_contract::{AssignmentOption, BlindAssignment, blind_assignment};
    let option = |label: &str| AssignmentOption {
        label: label.into(),
        artifact_id: format!("art-{label}"),
        ..Default::default()
    };
    skillforge_contract::Assignments {
        run_id: "r1".into(),
        items: vec![
            blind_assignment("r1", "item-001", "base-1", "cand-1"),
            blind_assignment("r1", "item-002", "base-2", "cand-2"),
            BlindAssignment {
                item_id: "hero-001".into(),
                options: ["a", "b", "c", "d"].map(option).to_vec(),
                ..Default::default()
            },
        ],
    }
}

// S-97: unrelated comments, packet bodies and other runs' feedback are never imported.
#[test]
fn s97_unrelated_comments_are_skipped() {
    let a = assignments();
    for body in [
        "LGTM!",
        &format!("{PACKET_MARKER}\nitem-001: a"),
        "run_id: other-run\nitem-001: a",
    ] {
        assert_eq!(
            resolve_comment(body, Some("ann"), "r1", &a),
            CommentImport::Skipped,
            "{body:?}"
        );
    }
}

#[test]
fn comment_answers_some_items_deblinded_with_author_as_reviewer() {
    let a = assignments();
    let CommentImport::Resolved(r) = resolve_comment(
        "reviewer: someone-else\nitem-001: b - clearer",
        Some("ann"),
        "r1",
        &a,
    ) else {
        panic!()
    };
    assert_eq!(r.reviewer, "ann");
    assert_eq!(r.entries.len(), 1);
    let skillforge_contract::ResolvedEntry::Choice { choice, .. } = &r.entries[0] else {
        panic!()
    };
    // Displayed B is de-blinded to the stored meaning (S-95).
    let shown_b_is_candidate = !skillforge_contract::shows_candidate_as_a("r1", "item-001");
    assert_eq!(
        *choice,
        if shown_b_is_candidate {
            skillforge_contract::Choice::B
        } else {
            skillforge_contract::Choice::A
        }
    );
    let CommentImport::Resolved(r) = resolve_comment(
        "hero-001 ranking: C > A > D > B\nbest traits:\n- C: clear",
        None,
        "r1",
        &a,
    ) else {
        panic!()
    };
    assert_eq!(r.reviewer, "github");
}

#[test]
fn malformed_comment_is_refused_whole() {
    let a = assignments();
    let table = [
        ("item-001: a\nitem-002: maybe", "invalid feedback choice"),
        ("item-001: a\nitem-999: b", "not in review run"),
        ("hero-001 ranking: C > A", "ranking"),
    ];
    for (body, want) in table {
        match resolve_comment(body, Some("ann"), "r1", &a) {
            CommentImport::Malformed(reason) => {
                assert!(reason.contains(want), "{body:?}: {reason}")
            }
            other => panic!("{body:?}: {other:?}"),
        }
    }
}

// Issue 12 item 7: comment YAML nested 100 000 levels deep is refused by the parser limits before
// the YAML parser runs, with the limit named, in a fenced block and as a whole body.
#[test]
fn yaml_nested_100_000_levels_is_refused_by_the_limits() {
    let deep = format!(
        "run_id: r1\nitems: {}{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let fenced = format!("```yaml\n{deep}```\n");
    for body in [fenced.as_str(), deep.as_str()] {
        match parse_comment(body) {
            CommentFeedback::Malformed(reason) => assert!(
                reason.contains("deeper than the limit of 64 levels"),
                "{reason}"
            ),
            other => panic!("{other:?}"),
        }
    }
}
