//! feedback.yml / .assignments.json: blinding, de-blinding, all-or-nothing validation.

use proptest::prelude::*;

use super::*;

fn ab_assignments() -> Assignments {
    Assignments {
        run_id: "run-1".into(),
        items: vec![
            blind_assignment("run-1", "item-001", "art-base-1", "art-cand-1"),
            blind_assignment("run-1", "item-002", "art-base-2", "art-cand-2"),
        ],
    }
}

fn ranked_assignments() -> Assignments {
    let options = ["a", "b", "c", "d"]
        .iter()
        .map(|l| AssignmentOption {
            label: (*l).into(),
            artifact_id: format!("art-{l}"),
            ..Default::default()
        })
        .collect();
    Assignments {
        run_id: "run-r".into(),
        items: vec![BlindAssignment {
            item_id: "item-1".into(),
            options,
            ..Default::default()
        }],
    }
}

#[test]
fn blinding_follows_the_first_hash_byte() {
    // Find one item of each parity and check the swap.
    let mut seen = [false, false];
    for n in 0..64 {
        let item = format!("item-{n}");
        let odd = Sha256::digest(format!("run-1\x00{item}").as_bytes())[0] % 2 == 1;
        let asg = blind_assignment("run-1", &item, "base", "cand");
        assert_eq!(asg.a, if odd { "cand" } else { "base" });
        assert_eq!(asg.b, if odd { "base" } else { "cand" });
        seen[usize::from(odd)] = true;
    }
    assert_eq!(seen, [true, true]);
}

#[test]
fn s95_candidate_shown_as_a_picked_a_is_stored_b() {
    let item = (0..64)
        .map(|n| format!("item-{n}"))
        .find(|i| shows_candidate_as_a("run-1", i))
        .unwrap();
    let asg = blind_assignment("run-1", &item, "base", "cand");
    assert_eq!(asg.a, "cand");
    assert_eq!(deblind_choice(Choice::A, &asg).unwrap(), Choice::B);
    assert_eq!(deblind_choice(Choice::B, &asg).unwrap(), Choice::A);
    assert_eq!(deblind_choice(Choice::Tie, &asg).unwrap(), Choice::Tie);
}

#[test]
fn s94_valid_ab_response_resolves() {
    let yml = "run_id: run-1\nreviewer: alice\nitems:\n  - item_id: item-001\n    choice: B\n    reasoning: More concrete.\n  - item_id: item-002\n    choice: tie\n";
    let file = parse_feedback_yml(yml).unwrap();
    let resolved = resolve_feedback(&ab_assignments(), &file, None).unwrap();
    assert_eq!(resolved.reviewer, "alice");
    let asg = &ab_assignments().items[0];
    let ResolvedEntry::Choice {
        choice, reasoning, ..
    } = &resolved.entries[0]
    else {
        panic!("not a choice")
    };
    assert_eq!(*choice, deblind_choice(Choice::B, asg).unwrap());
    assert_eq!(reasoning, "More concrete.");
    // The override wins over the file.
    assert_eq!(
        resolve_feedback(&ab_assignments(), &file, Some("bob"))
            .unwrap()
            .reviewer,
        "bob"
    );
}

#[test]
fn s94_whole_response_refused_on_any_bad_item() {
    let head = "run_id: run-1\nreviewer: alice\nitems:\n";
    let ok1 = "  - item_id: item-001\n    choice: a\n";
    let ok2 = "  - item_id: item-002\n    choice: b\n";
    let table: Vec<(String, &str)> = vec![
        (
            format!("{head}{ok1}  - item_id: item-002\n    choice: maybe\n"),
            "item item-002: invalid feedback choice \"maybe\"",
        ),
        (
            format!("{head}{ok1}"),
            "feedback.yml missing feedback for item_id \"item-002\"",
        ),
        (
            format!("{head}{ok1}{ok2}  - item_id: item-003\n    choice: a\n"),
            "unknown feedback item_id \"item-003\"",
        ),
        (
            format!("{head}{ok1}{ok1}{ok2}"),
            "duplicate feedback item_id \"item-001\"",
        ),
        (
            format!("run_id: run-2\nreviewer: a\nitems:\n{ok1}{ok2}"),
            "feedback run_id \"run-2\" does not match",
        ),
        (
            format!("run_id: run-1\nitems:\n{ok1}{ok2}"),
            "feedback reviewer is required",
        ),
        (
            format!("{head}{ok1}  - item_id: item-002\n    choice: ''\n"),
            "invalid feedback choice",
        ),
    ];
    for (yml, want) in table {
        let err = parse_feedback_yml(&yml)
            .and_then(|f| resolve_feedback(&ab_assignments(), &f, None))
            .unwrap_err();
        assert!(err.to_string().contains(want), "got {err}, want {want}");
    }
    assert_eq!(
        parse_feedback_yml("reviewer: a\n").unwrap_err(),
        FeedbackPacketError::MissingRunId
    );
}

// S-94: the whole response is refused, and every bad item is named in that one refusal.
#[test]
fn s94_every_bad_item_is_named_at_once() {
    let yml = "run_id: run-1\nreviewer: alice\nitems:\n  - item_id: item-001\n    choice: maybe\n  - item_id: item-009\n    choice: a\n";
    let err = parse_feedback_yml(yml)
        .and_then(|f| resolve_feedback(&ab_assignments(), &f, None))
        .unwrap_err();
    let FeedbackPacketError::Several(problems) = &err else {
        panic!("{err:?}")
    };
    let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(text.len(), 3, "{text:#?}");
    assert!(
        text[0].starts_with("item item-001: invalid feedback choice \"maybe\""),
        "{text:#?}"
    );
    assert_eq!(text[1], "unknown feedback item_id \"item-009\"");
    assert_eq!(
        text[2],
        "feedback.yml missing feedback for item_id \"item-002\""
    );
    assert!(
        err.to_string().starts_with("feedback.yml has 3 problems:"),
        "{err}"
    );
}

#[test]
fn bad_assignment_maps_are_refused() {
    let mut asg = ab_assignments();
    asg.items[0].candidate = asg.items[0].baseline.clone();
    let file = parse_feedback_yml("run_id: run-1\nreviewer: a\nitems: []\n").unwrap();
    assert!(matches!(
        resolve_feedback(&asg, &file, None),
        Err(FeedbackPacketError::BadAssignment { .. })
    ));
    let mut asg = ab_assignments();
    asg.items[0].b = asg.items[0].a.clone();
    assert!(matches!(
        resolve_feedback(&asg, &file, None),
        Err(FeedbackPacketError::BadAssignment { .. })
    ));
}

#[test]
fn ranked_response_resolves_with_ties_traits_and_signals() {
    let yml = r#"
run_id: run-r
reviewer: carol
items:
  - item_id: item-1
    choice: ""
    ranking: "C > A = D > B"
    useful_traits:
      C: [bold headline]
      a: [short]
    rejected_traits:
      b: [vague]
    required_improvements: [add examples]
    quality: Strong
    continue_mode: refine
    promote: true
    reasoning: C reads best
"#;
    let file = parse_feedback_yml(yml).unwrap();
    let resolved = resolve_feedback(&ranked_assignments(), &file, None).unwrap();
    let ResolvedEntry::Ranked(entry) = &resolved.entries[0] else {
        panic!("not ranked")
    };
    assert_eq!(entry.ranking.labels(), vec!["c", "a", "d", "b"]);
    assert_eq!(
        entry.ranking.tie_groups(),
        vec![vec!["a".to_owned(), "d".to_owned()]]
    );
    assert_eq!(entry.winner.as_deref(), Some("c"));
    assert_eq!(entry.useful_traits["c"], vec!["bold headline"]);
    assert_eq!(
        (
            entry.quality.as_str(),
            entry.continue_mode.as_str(),
            entry.promote.as_str()
        ),
        ("strong", "refine", "yes")
    );
}

#[test]
fn ranked_response_refusals() {
    let base = "run_id: run-r\nreviewer: c\nitems:\n  - item_id: item-1\n";
    let table: &[(&str, &str)] = &[
        (
            "    ranking: c > a > b\n",
            "ranking is missing option \"d\"",
        ),
        (
            "    ranking: c > a > b > e\n",
            "ranking label \"e\" is not an option",
        ),
        (
            "    ranking: c > a > b > c\n",
            "ranking label \"c\" is duplicated",
        ),
        (
            "    ranking: c > a > b > d\n    winner: a\n",
            "winner \"a\" is not ranked first",
        ),
        ("    choice: a\n", "ranking is required for a ranked item"),
        (
            "    ranking: [c, a, b, d]\n    useful_traits: {z: [x]}\n",
            "useful_traits label \"z\" is not an option",
        ),
        (
            "    ranking: c > a > b > d\n    quality: great\n",
            "quality \"great\" is invalid",
        ),
        (
            "    ranking: c > a > b > d\n    continue_mode: stop\n",
            "continue_mode \"stop\" is invalid",
        ),
        (
            "    ranking: c > a > b > d\n    promote: maybe\n",
            "promote \"maybe\" is invalid",
        ),
    ];
    for (tail, want) in table {
        let file = parse_feedback_yml(&format!("{base}{tail}")).unwrap();
        let err = resolve_feedback(&ranked_assignments(), &file, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "tail {tail:?}: got {err}, want {want}");
    }
    // A skipped ranked item needs no ranking.
    let file = parse_feedback_yml(&format!("{base}    choice: skip\n")).unwrap();
    let resolved = resolve_feedback(&ranked_assignments(), &file, None).unwrap();
    assert!(matches!(
        resolved.entries[0],
        ResolvedEntry::Choice {
            choice: Choice::Skip,
            ..
        }
    ));
}

#[test]
fn ranked_mode_rule() {
    for (mode, count, want) in [
        ("", 2, false),
        ("validate", 2, false),
        ("explore", 2, true),
        ("", 3, true),
        ("validate", 5, true),
    ] {
        assert_eq!(is_ranked_mode(mode, count), want, "{mode} {count}");
    }
}

#[test]
fn packet_files_round_trip() {
    let file = FeedbackFile {
        run_id: "run-1".into(),
        reviewer: String::new(),
        items: vec![FeedbackEntry {
            item_id: "item-001".into(),
            ..Default::default()
        }],
    };
    let text = render_feedback_yml(&file).unwrap();
    assert!(
        text.contains("quality: ''") && !text.contains("ranking"),
        "{text}"
    );
    assert_eq!(parse_feedback_yml(&text).unwrap(), file);
    let json = serde_json::to_string(&ab_assignments()).unwrap();
    assert_eq!(parse_assignments(&json).unwrap(), ab_assignments());
    assert!(json.starts_with(r#"{"run_id":"run-1","items":[{"item_id":"item-001","a":"#));
}

#[test]
fn lenient_scalars_in_feedback_yml() {
    let file = parse_feedback_yml("run_id: 2026\nreviewer: alice\nitems:\n  - item_id: 001\n    choice: a\n    promote: false\n    reasoning:\n").unwrap();
    assert_eq!(file.run_id, "2026");
    assert_eq!(
        file.items[0].item_id, "001",
        "YAML 1.2: a leading zero stays a string"
    );
    assert_eq!(file.items[0].promote, "false");
    assert_eq!(file.items[0].reasoning, "");
}

#[test]
fn ab_items_check_quality_continue_mode_and_promote() {
    let head = "run_id: run-1\nreviewer: alice\nitems:\n  - item_id: item-002\n    choice: b\n  - item_id: item-001\n    choice: a\n";
    let table = [
        (
            "    quality: great\n",
            Some(
                "item item-001: quality \"great\" is invalid; use one of poor, acceptable, strong",
            ),
        ),
        (
            "    continue_mode: wander\n",
            Some("item item-001: continue_mode \"wander\" is invalid"),
        ),
        (
            "    promote: maybe\n",
            Some("item item-001: promote \"maybe\" is invalid; use one of yes, no"),
        ),
        (
            "    quality: Strong\n    continue_mode: refine\n    promote: y\n",
            None,
        ),
    ];
    for (tail, want) in table {
        let result = parse_feedback_yml(&format!("{head}{tail}"))
            .and_then(|f| resolve_feedback(&ab_assignments(), &f, None));
        match want {
            Some(want) => assert!(
                result.as_ref().is_err_and(|e| e.to_string().contains(want)),
                "{tail}: {result:?}"
            ),
            None => assert!(result.is_ok(), "{tail}: {result:?}"),
        }
    }
}

#[test]
fn unknown_keys_are_refused_with_their_name() {
    let ok = "run_id: run-1\nreviewer: alice\nitems:\n  - item_id: item-001\n    choice: a\n";
    assert_eq!(
        parse_feedback_yml(&format!("{ok}reviewr: bob\n"))
            .unwrap_err()
            .to_string(),
        "feedback.yml: unknown key \"reviewr\"; use run_id, reviewer, items"
    );
    let err = parse_feedback_yml(&format!("{ok}    reasonning: typo\n"))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(
            "feedback.yml item 1 (item-001): unknown key \"reasonning\"; use item_id, choice"
        ),
        "{err}"
    );
    assert!(parse_feedback_yml(ok).is_ok());
    // Every unknown key at once.
    let err = parse_feedback_yml(&format!(
        "{ok}    reasonning: typo\n    qualty: strong\nreviewr: bob\n"
    ))
    .unwrap_err()
    .to_string();
    assert!(err.starts_with("feedback.yml has 3 problems:\n"), "{err}");
    for key in ["reasonning", "qualty", "reviewr"] {
        assert!(err.contains(&format!("unknown key \"{key}\"")), "{err}");
    }
}

fn choice_strategy() -> impl Strategy<Value = Choice> {
    prop::sample::select(Choice::ALL.to_vec())
}

proptest! {
    #[test]
    fn deblinding_inverts_blinding(
        run_id in ".{0,24}",
        item_id in ".{0,24}",
        baseline in "[a-z0-9/-]{1,16}",
        candidate in "[a-z0-9/-]{1,16}",
        stored in choice_strategy(),
    ) {
        prop_assume!(baseline != candidate);
        let asg = blind_assignment(&run_id, &item_id, &baseline, &candidate);
        let displayed = blind_choice(stored, &asg).unwrap();
        prop_assert_eq!(deblind_choice(displayed, &asg).unwrap(), stored);
        // The displayed option really showed that artifact.
        if displayed == Choice::A { prop_assert_eq!(&asg.a, if stored == Choice::A { &baseline } else { &candidate }); }
        if displayed == Choice::B { prop_assert_eq!(&asg.b, if stored == Choice::A { &baseline } else { &candidate }); }
    }

    #[test]
    fn arbitrary_feedback_yml_never_panics(text in "\\PC*") {
        if let Ok(file) = parse_feedback_yml(&text) {
            let _ = resolve_feedback(&ab_assignments(), &file, None);
            let _ = resolve_feedback(&ranked_assignments(), &file, Some("x"));
        }
    }

    #[test]
    fn yaml_shaped_feedback_never_panics(
        lines in prop::collection::vec(
            prop::sample::select(vec![
                "run_id: run-1", "reviewer: a", "items:", "  - item_id: item-001", "    choice: a",
                "    ranking: c > a = d > b", "    ranking: [a, b]", "    winner: c", "    promote: yes",
                "    useful_traits: {a: [x]}", "    useful_traits: 42", "  -", "- x", "items: 3", "    quality: [1]",
                ": :", "&a x", "*a", "!!binary x", "'", "\"", "{", "[",
            ]),
            0..12,
        )
    ) {
        let text = lines.join("\n");
        if let Ok(file) = parse_feedback_yml(&text) {
            let _ = resolve_feedback(&ab_assignments(), &file, None);
            let _ = resolve_feedback(&ranked_assignments(), &file, None);
        }
    }
}

/// Issue 12 item 7: a feedback.yml nested 100 000 levels deep (200 KB) is refused at once, the
/// message naming the limit, before the YAML parser runs (which took 38 s of CPU on it).
#[test]
fn deeply_nested_feedback_yml_is_refused_at_once_naming_the_limit() {
    let deep = format!(
        "run_id: run-1\nitems: {}x{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let started = std::time::Instant::now();
    let e = parse_feedback_yml(&deep).unwrap_err();
    let message = e.to_string();
    assert!(
        message.contains("feedback.yml") && message.contains("64 levels"),
        "{message}"
    );
    // Far below the parser's time on it; not a benchmark, a sanity bound.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let blocks = format!("run_id: run-1\nitems:\n{}x\n", "- ".repeat(100_000));
    assert!(
        parse_feedback_yml(&blocks)
            .unwrap_err()
            .to_string()
            .contains("64 levels")
    );
}
