//! Review runs, blind Markdown feedback, pairwise import and training-package export, end to end
//! through the built binary (seed "Human Feedback Trial Happy Path", "Markdown Feedback Packet",
//! "Ranked Exploration Workflow", "Training Package"; rules S-01, S-03..S-05, S-83..S-85, S-94, S-95).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use skillforge_contract::{
    serialize_package, shows_candidate_as_a, validate_training_package_json,
};
use skillforge_tests::{Home, PLANNER_TEMPLATE, add_template, path_arg, run_code, write};

/// A ranked explore run with 4 options per item and the given items (options a..d).
fn ranked_run(home: &Home, run: &str, items: &[&str]) {
    add_template(home, PLANNER_TEMPLATE, "owner/repo");
    home.json(&[
        "review",
        "create",
        "--template",
        "planner",
        "--repo",
        "owner/web",
        "--run",
        run,
        "--mode",
        "explore",
        "--options",
        "4",
    ]);
    for item in items {
        let mut args: Vec<String> = [
            "review",
            "item",
            "add",
            "--run",
            run,
            "--item",
            item,
            "--title",
            &format!("Title {item}"),
        ]
        .iter()
        .map(|a| (*a).to_owned())
        .collect();
        for label in ["a", "b", "c", "d"] {
            let file = write(
                &home.path().join(format!("in/{item}-{label}.md")),
                &format!("{item} option {label}\n"),
            );
            args.push("--option".into());
            args.push(format!("{label}={}", file.display()));
        }
        args.push("--metadata-json".into());
        args.push(r#"{"split":"train"}"#.into());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        home.json(&args);
    }
}

/// An A/B run (mode validate) with baseline/candidate files per item.
fn ab_run(home: &Home, run: &str, items: &[&str], extra: &[&str]) {
    add_template(home, PLANNER_TEMPLATE, "owner/repo");
    let mut args = vec![
        "review",
        "create",
        "--template",
        "planner",
        "--repo",
        "owner/repo",
        "--run",
        run,
    ];
    args.extend_from_slice(extra);
    home.json(&args);
    for item in items {
        let baseline = write(
            &home.path().join(format!("in/{item}-baseline.md")),
            &format!("{item} baseline\n"),
        );
        let candidate = write(
            &home.path().join(format!("in/{item}-candidate.md")),
            &format!("{item} candidate\n"),
        );
        home.json(&[
            "review",
            "item",
            "add",
            "--run",
            run,
            "--item",
            item,
            "--baseline",
            path_arg(&baseline),
            "--candidate",
            path_arg(&candidate),
        ]);
    }
}

fn export_packet(home: &Home, run: &str, dir: &Path) {
    home.json(&[
        "feedback",
        "markdown",
        "export",
        "--run",
        run,
        "--output",
        path_arg(dir),
        "--force",
    ]);
}

fn status(home: &Home, run: &str) -> Value {
    home.json(&["review", "status", "--run", run])
}

/// (feedback_events, ranked_feedback_events) rows of the run.
fn counts(home: &Home, run: &str) -> (u64, u64) {
    let st = status(home, run);
    (
        st["feedback_events"].as_u64().unwrap(),
        st["ranked_feedback_events"].as_u64().unwrap(),
    )
}

/// Exports the training package; returns (bytes, parsed JSON).
fn export_package(home: &Home, run: &str) -> (String, Value) {
    let out = home.path().join(format!("out/{run}.json"));
    home.json(&["export", "--run", run, "--output", path_arg(&out)]);
    let text = std::fs::read_to_string(&out).unwrap();
    let value = serde_json::from_str(&text).unwrap();
    (text, value)
}

fn schema_validator() -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/schemas/training-package.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    jsonschema::validator_for(&schema).expect("the checked-in schema compiles")
}

fn pairs(package: &Value, item: &str) -> Vec<(String, String, String)> {
    package["pairwise_preferences"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["item_id"] == item)
        .map(|p| {
            (
                p["preferred"].as_str().unwrap().to_owned(),
                p["rejected"].as_str().unwrap().to_owned(),
                p["ranked_event_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn s01_s05_ranked_round_trip_with_ties_is_accepted_by_the_strict_validator_and_the_schema() {
    let home = Home::embedded();
    ranked_run(&home, "explore-1", &["hero-001", "hero-002"]);
    let packet = home.path().join("packet");
    export_packet(&home, "explore-1", &packet);
    let template = std::fs::read_to_string(packet.join("feedback.yml")).unwrap();
    assert!(
        template.contains("item_id: hero-001") && template.contains("ranking:"),
        "{template}"
    );
    // A reviewer fills feedback.yml: ties in one item, a strict ranking in the other.
    write(
        &packet.join("feedback.yml"),
        "run_id: explore-1\nreviewer: alice\nitems:\n\
         \x20 - item_id: hero-001\n    ranking:\n      - C > A = D > B\n    useful_traits:\n      C: [explains the product]\n\
         \x20     A: [strongest mascot]\n    rejected_traits:\n      B: [too generic]\n\
         \x20   required_improvements: [better mobile layout]\n    quality: strong\n    continue_mode: refine\n\
         \x20   reasoning: C is clearest.\n\
         \x20 - item_id: hero-002\n    ranking: c > a > d > b\n",
    );
    let imported = home.json(&[
        "feedback",
        "markdown",
        "import",
        "--packet",
        path_arg(&packet),
    ]);
    assert_eq!(imported["ranked_feedback_events"]["inserted"], 2);
    // Issue 12 item 9: the import says what it read (a file cut short but still valid shows).
    let filled = std::fs::read(packet.join("feedback.yml")).unwrap();
    assert_eq!(imported["read"]["bytes"], filled.len());
    assert_eq!(imported["read"]["items"], 2);
    let sum = std::process::Command::new("sha256sum")
        .arg(packet.join("feedback.yml"))
        .output()
        .unwrap();
    let sum = String::from_utf8_lossy(&sum.stdout);
    assert_eq!(
        imported["read"]["sha256"],
        sum.split_whitespace().next().unwrap()
    );

    let (bytes, package) = export_package(&home, "explore-1");
    // S-01: fixed kind and version, no key beyond the documented v1 sections.
    assert_eq!(package["kind"], "gitmoot-skillopt-training-package");
    assert_eq!(package["contract_version"], 1);
    let documented = [
        "kind",
        "contract_version",
        "training_mode",
        "template",
        "eval_run",
        "items",
        "artifacts",
        "feedback_events",
        "ranked_feedback_events",
        "pairwise_preferences",
        "feedback_context",
        "evaluator_config",
        "evaluator_profile",
        "binary_verdicts",
    ];
    for key in package.as_object().unwrap().keys() {
        assert!(
            documented.contains(&key.as_str()),
            "undocumented top-level key {key}"
        );
    }
    assert_eq!(package["training_mode"], "explore");
    // The strict validator (the external optimizer's rules) and the generated schema accept it.
    validate_training_package_json(&bytes).expect("strict validator accepts the export");
    let validator = schema_validator();
    let errors: Vec<String> = validator
        .iter_errors(&package)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "schema errors: {errors:?}");
    // Go-compatible bytes: re-serialising the parsed package gives the same bytes (2-space, newline).
    let parsed: skillforge_contract::TrainingPackage = serde_json::from_str(&bytes).unwrap();
    assert_eq!(serialize_package(&parsed).unwrap(), bytes);
    assert!(bytes.ends_with("}\n") && bytes.contains("\n  \"contract_version\": 1,\n"));

    // Items carry their options; artifacts are sorted by id and their blobs are in the home.
    assert_eq!(package["items"][0]["options"].as_array().unwrap().len(), 4);
    let ids: Vec<&str> = package["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted);
    assert_eq!(ids.len(), 8);
    for artifact in package["artifacts"].as_array().unwrap() {
        let hex = artifact["hash"]
            .as_str()
            .unwrap()
            .strip_prefix("sha256:")
            .unwrap();
        assert!(
            home.path()
                .join("blobs/sha256")
                .join(&hex[..2])
                .join(hex)
                .is_file(),
            "blob of {artifact}"
        );
    }

    // The tied ranking keeps its tie group and trait notes; pairwise rows carry the event id only.
    let ranked = package["ranked_feedback_events"].as_array().unwrap();
    let tied = ranked.iter().find(|e| e["item_id"] == "hero-001").unwrap();
    assert_eq!(tied["ranking"], json!(["c", "a", "d", "b"]));
    assert_eq!(tied["tie_groups"], json!([["a", "d"]]));
    assert_eq!(tied["winner"], "c");
    assert_eq!(
        tied["useful_traits"],
        json!({"a": ["strongest mascot"], "c": ["explains the product"]})
    );
    assert_eq!(
        tied["required_improvements"],
        json!(["better mobile layout"])
    );
    let tied_pairs = pairs(&package, "hero-001");
    let want: Vec<(String, String)> = [("c", "a"), ("c", "d"), ("c", "b"), ("a", "b"), ("d", "b")]
        .iter()
        .map(|(p, r)| ((*p).into(), (*r).into()))
        .collect();
    assert_eq!(
        tied_pairs
            .iter()
            .map(|(p, r, _)| (p.clone(), r.clone()))
            .collect::<Vec<_>>(),
        want
    );
    assert!(
        tied_pairs
            .iter()
            .all(|(_, _, id)| id == tied["id"].as_str().unwrap())
    );
    // S-05: a strict ranking of 4 gives exactly 6 rows, in ranking order.
    let strict = ranked.iter().find(|e| e["item_id"] == "hero-002").unwrap();
    let strict_pairs = pairs(&package, "hero-002");
    let want: Vec<(String, String)> = [
        ("c", "a"),
        ("c", "d"),
        ("c", "b"),
        ("a", "d"),
        ("a", "b"),
        ("d", "b"),
    ]
    .iter()
    .map(|(p, r)| ((*p).into(), (*r).into()))
    .collect();
    assert_eq!(
        strict_pairs
            .iter()
            .map(|(p, r, _)| (p.clone(), r.clone()))
            .collect::<Vec<_>>(),
        want
    );
    assert!(
        strict_pairs
            .iter()
            .all(|(_, _, id)| id == strict["id"].as_str().unwrap())
    );
    for pref in package["pairwise_preferences"].as_array().unwrap() {
        assert!(
            pref.get("useful_traits").is_none() && pref.get("reasoning").is_none(),
            "trait text on {pref}"
        );
    }
    // S-04: Markdown feedback → context without review_issue.
    let context = &package["feedback_context"];
    assert_eq!(context["feedback_source"], "imported_human_review");
    assert_eq!(context["feedback_target"], "baseline_review_outputs");
    assert_eq!(context["review_run_id"], "explore-1");
    assert_eq!(context["reviewed_skill_version"], "planner@v1");
    assert_eq!(context["target_repo"], "owner/web");
    assert!(context.get("review_issue").is_none());
    assert!(package.get("evaluator_profile").is_none());
}

/// An item id of `run` whose candidate is shown as Option A (`want = true`) or B.
fn item_with_candidate_as_a(run: &str, want: bool) -> String {
    (0..100)
        .map(|n| format!("item-{n:03}"))
        .find(|id| shows_candidate_as_a(run, id) == want)
        .unwrap()
}

#[test]
fn s95_candidate_shown_as_a_and_picked_a_is_stored_as_b() {
    let home = Home::embedded();
    let run = "ab-1";
    let swapped = item_with_candidate_as_a(run, true);
    let straight = item_with_candidate_as_a(run, false);
    ab_run(&home, run, &[&swapped, &straight], &[]);
    let packet = home.path().join("packet");
    export_packet(&home, run, &packet);
    let assignments: Value =
        serde_json::from_str(&std::fs::read_to_string(packet.join(".assignments.json")).unwrap())
            .unwrap();
    let entry = assignments["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["item_id"] == swapped.as_str())
        .unwrap()
        .clone();
    assert_eq!(
        entry["a"], entry["candidate"],
        "the candidate is displayed as Option A"
    );
    // The item file shows the candidate's text under Option A.
    let item_file = std::fs::read_dir(packet.join("items"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .contains(&format!("`{swapped}`"))
        })
        .unwrap();
    let text = std::fs::read_to_string(item_file).unwrap();
    let option_a = text
        .split("## Option A")
        .nth(1)
        .unwrap()
        .split("## Option B")
        .next()
        .unwrap();
    assert!(option_a.contains(&format!("{swapped} candidate")), "{text}");
    write(
        &packet.join("feedback.yml"),
        &format!(
            "run_id: {run}\nreviewer: bob\nitems:\n  - item_id: {swapped}\n    choice: A\n  - item_id: {straight}\n    choice: a\n    reasoning: steadier\n"
        ),
    );
    home.json(&[
        "feedback",
        "markdown",
        "import",
        "--packet",
        path_arg(&packet),
    ]);
    let (bytes, package) = export_package(&home, run);
    validate_training_package_json(&bytes).unwrap();
    assert!(
        package["training_mode"] == "validate" && package.get("ranked_feedback_events").is_none()
    );
    let choice = |item: &str| {
        package["feedback_events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["item_id"] == item)
            .unwrap()["choice"]
            .clone()
    };
    assert_eq!(
        choice(&swapped),
        "b",
        "candidate picked while shown as A is stored as b"
    );
    assert_eq!(
        choice(&straight),
        "a",
        "baseline picked while shown as A is stored as a"
    );
    let event = &package["feedback_events"][0];
    assert_eq!(event["source"], "markdown");
    assert_eq!(event["reviewer"], "bob");
    assert_eq!(
        event["source_url"],
        std::fs::canonicalize(&packet).unwrap().to_str().unwrap()
    );
}

#[test]
fn s94_one_bad_choice_among_valid_ones_writes_nothing() {
    let home = Home::embedded();
    ab_run(&home, "ab-2", &["i1", "i2", "i3", "i4"], &[]);
    let packet = home.path().join("packet");
    export_packet(&home, "ab-2", &packet);
    write(
        &packet.join("feedback.yml"),
        "run_id: ab-2\nreviewer: carol\nitems:\n  - {item_id: i1, choice: a}\n  - {item_id: i2, choice: tie}\n\
         \x20 - {item_id: i3, choice: neither}\n  - {item_id: i4, choice: maybe}\n",
    );
    let (_, stderr) = run_code(
        &home,
        &[
            "feedback",
            "markdown",
            "import",
            "--packet",
            path_arg(&packet),
        ],
        2,
    );
    assert!(
        stderr.contains("invalid feedback choice \"maybe\"")
            && stderr.contains("nothing was written"),
        "{stderr}"
    );
    assert_eq!(counts(&home, "ab-2"), (0, 0));
    // A missing item is refused the same way.
    write(
        &packet.join("feedback.yml"),
        "run_id: ab-2\nreviewer: carol\nitems:\n  - {item_id: i1, choice: a}\n",
    );
    let (_, stderr) = run_code(
        &home,
        &[
            "feedback",
            "markdown",
            "import",
            "--packet",
            path_arg(&packet),
        ],
        2,
    );
    assert!(stderr.contains("missing feedback for item_id"), "{stderr}");
    assert_eq!(counts(&home, "ab-2"), (0, 0));
}

#[test]
fn s94_reimport_upserts_under_the_five_column_key_and_changes_no_row_count() {
    let home = Home::embedded();
    ab_run(&home, "ab-3", &["i1", "i2"], &[]);
    let packet = home.path().join("packet");
    export_packet(&home, "ab-3", &packet);
    let feedback = "run_id: ab-3\nreviewer: dan\nitems:\n  - {item_id: i1, choice: a}\n  - {item_id: i2, choice: skip}\n";
    write(&packet.join("feedback.yml"), feedback);
    home.json(&[
        "feedback",
        "markdown",
        "import",
        "--packet",
        path_arg(&packet),
    ]);
    assert_eq!(counts(&home, "ab-3"), (2, 0));
    let again = home.json(&[
        "feedback",
        "markdown",
        "import",
        "--packet",
        path_arg(&packet),
    ]);
    assert_eq!(
        again["feedback_events"],
        json!({"inserted": 0, "updated": 2})
    );
    assert_eq!(counts(&home, "ab-3"), (2, 0));
    // A changed answer from the same reviewer and packet rewrites the row in place.
    write(
        &packet.join("feedback.yml"),
        &feedback.replace("choice: skip", "choice: tie"),
    );
    home.json(&[
        "feedback",
        "markdown",
        "import",
        "--packet",
        path_arg(&packet),
    ]);
    assert_eq!(counts(&home, "ab-3"), (2, 0));
    let (_, package) = export_package(&home, "ab-3");
    let i2 = package["feedback_events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["item_id"] == "i2")
        .unwrap()
        .clone();
    assert_eq!(i2["choice"], "tie");
    // Another reviewer is another key.
    home.json(&[
        "feedback",
        "markdown",
        "import",
        "--packet",
        path_arg(&packet),
        "--reviewer",
        "erin",
    ]);
    assert_eq!(counts(&home, "ab-3"), (4, 0));
}

/// Fills every item of a ranked packet with one ranking by `reviewer` and imports it.
fn rank_all(home: &Home, run: &str, packet: &Path, items: &[&str], reviewer: &str, ranking: &str) {
    export_packet(home, run, packet);
    let mut text = format!("run_id: {run}\nreviewer: {reviewer}\nitems:\n");
    for item in items {
        text.push_str(&format!(
            "  - item_id: {item}\n    ranking: \"{ranking}\"\n"
        ));
    }
    write(&packet.join("feedback.yml"), &text);
    home.json(&[
        "feedback",
        "markdown",
        "import",
        "--packet",
        path_arg(packet),
    ]);
}

fn packet_text(packet: &Path) -> String {
    let mut text = std::fs::read_to_string(packet.join("index.md")).unwrap();
    let mut files: Vec<PathBuf> = std::fs::read_dir(packet.join("items"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for file in files {
        text.push_str(&std::fs::read_to_string(file).unwrap());
    }
    text
}

#[test]
fn s84_s83_s85_recommendation_waits_for_every_item_stays_advisory_and_packets_hide_it() {
    let home = Home::embedded();
    ranked_run(&home, "explore-2", &["i1", "i2"]);
    let before_feedback = home.path().join("before");
    export_packet(&home, "explore-2", &before_feedback);
    // Two items heavily reviewed (three reviewers agreeing), then a third item with none.
    for reviewer in ["alice", "bob", "carol"] {
        rank_all(
            &home,
            "explore-2",
            &home.path().join(format!("p-{reviewer}")),
            &["i1", "i2"],
            reviewer,
            "a > b > c > d",
        );
    }
    let st = status(&home, "explore-2");
    assert_eq!(st["recommendation"]["status"], "ready");
    assert_eq!(st["recommendation"]["next_mode"], "refine");
    assert_eq!(st["ranking_stability"]["level"], "stable");
    let file = write(&home.path().join("in/i3.md"), "x\n");
    let mut args = vec![
        "review",
        "item",
        "add",
        "--run",
        "explore-2",
        "--item",
        "i3",
    ];
    let options: Vec<String> = ["a", "b", "c", "d"]
        .iter()
        .map(|l| format!("{l}={}", file.display()))
        .collect();
    for option in &options {
        args.extend_from_slice(&["--option", option]);
    }
    home.json(&args);
    // S-84: 3 items, 2 heavily reviewed, 1 with none → no next-mode recommendation.
    let st = status(&home, "explore-2");
    assert_eq!(st["recommendation"]["status"], "withheld");
    assert!(st["recommendation"].get("next_mode").is_none(), "{st}");
    assert_eq!(st["items_without_feedback"], json!(["i3"]));
    assert_eq!(
        (
            st["ranked_feedback_events"].as_u64(),
            st["pairwise_preferences"].as_u64()
        ),
        (Some(6), Some(36))
    );
    let human =
        String::from_utf8(home.run(&["review", "status", "--run", "explore-2"]).stdout).unwrap();
    assert!(human.contains("recommended next mode: withheld"), "{human}");

    // S-85: a packet exported after partial feedback shows no outcome-bearing detail.
    let after = home.path().join("after");
    export_packet(&home, "explore-2", &after);
    let text = packet_text(&after).to_lowercase();
    for word in [
        "winner",
        "stability",
        "stable",
        "recommend",
        "first place",
        "refine (",
        "agreement",
    ] {
        assert!(!text.contains(word), "packet mentions {word:?}:\n{text}");
    }
    // The two-item part of the packet is what it was before any feedback existed.
    assert_eq!(
        std::fs::read_to_string(after.join("items/001-i1.md")).unwrap(),
        std::fs::read_to_string(before_feedback.join("items/001-i1.md")).unwrap()
    );

    // Once every item has feedback the recommendation is back, and it stays advisory (S-83).
    rank_all(
        &home,
        "explore-2",
        &home.path().join("p-last"),
        &["i1", "i2", "i3"],
        "dave",
        "a > b > c > d",
    );
    let st = status(&home, "explore-2");
    assert_eq!(st["recommendation"]["status"], "ready");
    assert_eq!(
        st["ranking_stability"]["level"], "insufficient",
        "i3 has one ranking so far"
    );
    assert_eq!(st["recommendation"]["next_mode"], "explore");
    assert_eq!(st["recommendation"]["advisory_only"], true);
    assert_eq!(st["mode"], "explore", "status never changes the run mode");
    assert_eq!(status(&home, "explore-2")["mode"], "explore");
    assert_eq!(
        home.json(&["candidate", "list", "--template", "planner"]),
        json!([]),
        "no candidate imported"
    );
    assert_eq!(
        home.json(&["template", "show", "planner"])["version_id"],
        "planner@v1",
        "nothing promoted"
    );
}

#[test]
fn facts4_blinding_is_deterministic_across_exports() {
    let home = Home::embedded();
    ab_run(&home, "ab-4", &["i1", "i2", "i3"], &[]);
    let (one, two) = (home.path().join("one"), home.path().join("two"));
    export_packet(&home, "ab-4", &one);
    export_packet(&home, "ab-4", &two);
    for file in [".assignments.json", "feedback.yml", "index.md"] {
        assert_eq!(
            std::fs::read(one.join(file)).unwrap(),
            std::fs::read(two.join(file)).unwrap(),
            "{file}"
        );
    }
    assert_eq!(packet_text(&one), packet_text(&two));
    // Exporting over a packet that holds a feedback.yml needs --force.
    let (_, stderr) = run_code(
        &home,
        &[
            "feedback",
            "markdown",
            "export",
            "--run",
            "ab-4",
            "--output",
            path_arg(&one),
        ],
        2,
    );
    assert!(stderr.contains("already exists"), "{stderr}");
}

#[test]
fn s04_run_without_feedback_exports_without_feedback_context_or_evaluator_profile() {
    let home = Home::embedded();
    ab_run(&home, "ab-5", &["i1"], &[]);
    let (bytes, package) = export_package(&home, "ab-5");
    validate_training_package_json(&bytes).unwrap();
    assert!(package.get("feedback_context").is_none(), "{bytes}");
    assert!(package.get("evaluator_profile").is_none());
    assert!(package.get("evaluator_config").is_none());
    assert_eq!(
        package["feedback_events"],
        json!([]),
        "feedback_events is always an array"
    );
    assert!(
        package.get("binary_verdicts").is_none() && package.get("pairwise_preferences").is_none()
    );
    // Exporting twice gives the same bytes.
    assert_eq!(export_package(&home, "ab-5").0, bytes);
}

#[test]
fn s03_s04_workflow_mode_only_as_training_mode_and_profile_when_the_run_names_an_evaluator() {
    let home = Home::embedded();
    let metadata = r#"{"mode":"render-v1","evaluator_id":"landing_page_v1","feedback_source":"imported_human_review"}"#;
    add_template(&home, PLANNER_TEMPLATE, "owner/repo");
    home.json(&[
        "review",
        "create",
        "--template",
        "planner",
        "--repo",
        "o/r",
        "--run",
        "refine-1",
        "--mode",
        "refine",
        "--metadata-json",
        metadata,
    ]);
    let (bytes, package) = export_package(&home, "refine-1");
    validate_training_package_json(&bytes).unwrap();
    assert_eq!(package["training_mode"], "refine");
    assert_eq!(package["eval_run"]["mode"], "refine");
    assert_eq!(
        package["evaluator_config"],
        json!({"mode": "render-v1", "evaluator_id": "landing_page_v1"})
    );
    assert_eq!(
        package["evaluator_profile"]["profile_id"],
        "landing_page_v1"
    );
    assert_eq!(
        package["evaluator_profile"]["task_kind"],
        "vue_landing_page"
    );
    // A workflow mode in the metadata never reaches evaluator_config.mode.
    home.json(&[
        "review",
        "create",
        "--template",
        "planner",
        "--repo",
        "o/r",
        "--run",
        "m2",
        "--metadata-json",
        r#"{"mode":"refine"}"#,
    ]);
    let (_, package) = export_package(&home, "m2");
    assert!(package.get("evaluator_config").is_none(), "{package}");
    assert!(package.get("evaluator_profile").is_none());
}

#[test]
fn review_refusals_name_the_problem() {
    let home = Home::embedded();
    add_template(&home, PLANNER_TEMPLATE, "owner/repo");
    let (_, stderr) = run_code(
        &home,
        &[
            "review",
            "create",
            "--template",
            "nope",
            "--repo",
            "o/r",
            "--run",
            "r",
        ],
        2,
    );
    assert!(stderr.contains("template `nope`"), "{stderr}");
    let (_, stderr) = run_code(
        &home,
        &[
            "review",
            "create",
            "--template",
            "planner",
            "--repo",
            "o/r",
            "--run",
            "r",
            "--mode",
            "train",
        ],
        2,
    );
    assert!(
        stderr.contains("review mode \"train\" is invalid"),
        "{stderr}"
    );
    home.json(&[
        "review",
        "create",
        "--template",
        "planner",
        "--repo",
        "o/r",
        "--run",
        "r",
        "--mode",
        "explore",
        "--options",
        "3",
    ]);
    let (_, stderr) = run_code(
        &home,
        &[
            "review",
            "create",
            "--template",
            "planner",
            "--repo",
            "o/r",
            "--run",
            "r",
        ],
        2,
    );
    assert!(stderr.contains("already exists"), "{stderr}");
    let f = write(&home.path().join("in/x.md"), "x\n");
    let a = format!("a={}", f.display());
    let (_, stderr) = run_code(
        &home,
        &[
            "review", "item", "add", "--run", "r", "--item", "i", "--option", &a,
        ],
        2,
    );
    assert!(stderr.contains("3 options per item; got 1"), "{stderr}");
    let (_, stderr) = run_code(
        &home,
        &[
            "review",
            "item",
            "add",
            "--run",
            "r",
            "--item",
            "i",
            "--baseline",
            path_arg(&f),
            "--candidate",
            path_arg(&f),
        ],
        2,
    );
    assert!(stderr.contains("is ranked"), "{stderr}");
    let (_, stderr) = run_code(&home, &["review", "status", "--run", "missing"], 2);
    assert!(
        stderr.contains("review run `missing` not found"),
        "{stderr}"
    );
}

fn pairwise_files(dir: &Path, picks: Value) {
    let packet = json!({
        "kind": "gitmoot-skillopt-pairwise-review-packet", "contract_version": 1, "mode": "live-pairwise",
        "template_id": "planner", "base_version_id": "planner@v1", "run_id": "pw-1",
        "items": [
            {"item_id": "q1", "prompt": "first prompt", "outputs": [{"label": "A", "response": "alpha"}, {"label": "B", "response": "beta"}]},
            {"item_id": "q2", "prompt": "second prompt", "outputs": [{"label": "A", "response": "gamma"}, {"label": "B", "response": "delta"}]}
        ]
    });
    let secret = json!({
        "kind": "gitmoot-skillopt-pairwise-secret-map", "contract_version": 1, "run_id": "pw-1", "template_id": "planner",
        "champion_role": "promoted", "challenger_role": "candidate",
        "items": [
            {"item_id": "q1", "champion_label": "B", "challenger_label": "A", "mapping": {"A": "candidate", "B": "promoted"}},
            {"item_id": "q2", "champion_label": "A", "challenger_label": "B", "mapping": {"A": "promoted", "B": "candidate"}}
        ]
    });
    write(&dir.join("pairwise-review.json"), &packet.to_string());
    write(&dir.join("pairwise-secret-map.json"), &secret.to_string());
    write(&dir.join("pairwise-picks.json"), &picks.to_string());
}

#[test]
fn pairwise_import_unblinds_through_the_secret_map_and_reimports_in_place() {
    let home = Home::embedded();
    add_template(&home, PLANNER_TEMPLATE, "owner/repo");
    let dir = home.path().join("pairwise");
    pairwise_files(
        &dir,
        json!({"run_id": "pw-1", "reviewer": "frank", "picks": {"q1": "A", "q2": "a"}}),
    );
    let out = home.json(&["pairwise", "import", path_arg(&dir)]);
    assert_eq!(out["ranked_feedback_events"]["inserted"], 2);
    let (bytes, package) = export_package(&home, "pw-1");
    validate_training_package_json(&bytes).unwrap();
    let ranking = |item: &str| {
        package["ranked_feedback_events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["item_id"] == item)
            .unwrap()["ranking"]
            .clone()
    };
    assert_eq!(
        ranking("q1"),
        json!(["challenger", "champion"]),
        "A was the challenger in q1"
    );
    assert_eq!(
        ranking("q2"),
        json!(["champion", "challenger"]),
        "A was the champion in q2"
    );
    assert_eq!(package["pairwise_preferences"].as_array().unwrap().len(), 2);
    assert_eq!(counts(&home, "pw-1"), (0, 2));
    home.json(&["pairwise", "import", path_arg(&dir)]);
    assert_eq!(
        counts(&home, "pw-1"),
        (0, 2),
        "a re-import changes no row count"
    );
    // An item the secret map cannot decide is reported and skipped (exit 1); the rest is stored.
    pairwise_files(
        &dir,
        json!({"run_id": "pw-1", "picks": {"q1": "C", "q2": "B"}}),
    );
    let (_, stderr) = run_code(
        &home,
        &["pairwise", "import", path_arg(&dir), "--reviewer", "gina"],
        1,
    );
    assert!(stderr.contains("skipped q1"), "{stderr}");
    assert_eq!(counts(&home, "pw-1"), (0, 3));
}

/// Every artifact id the packet's `.assignments.json` hides (who is A, who is B, which is which).
fn hidden_mapping(packet: &Path) -> Vec<String> {
    let assignments: Value =
        serde_json::from_str(&std::fs::read_to_string(packet.join(".assignments.json")).unwrap())
            .unwrap();
    let mut hidden = Vec::new();
    for item in assignments["items"].as_array().unwrap() {
        for key in ["a", "b", "baseline", "candidate"] {
            hidden.push(item[key].as_str().unwrap().to_owned());
        }
    }
    hidden
}

/// S-92 with a candidate that belongs to the blind run: the run's feedback is exported, the
/// built-in optimizer distills it into `planner@v2`, and while a new blind packet of the same run
/// is active, `candidate show` / `candidate list` reveal none of its hidden mapping.
#[test]
fn s92_a_candidate_distilled_from_the_blind_run_hides_that_runs_active_mapping() {
    let home = Home::embedded();
    ab_run(&home, "blind-1", &["i1", "i2"], &[]);
    let packet = home.path().join("packet");
    export_packet(&home, "blind-1", &packet);
    // The reviewer prefers whichever side shows the candidate, with a reason that names no side.
    let assignments: Value =
        serde_json::from_str(&std::fs::read_to_string(packet.join(".assignments.json")).unwrap())
            .unwrap();
    let mut feedback = String::from("run_id: blind-1\nreviewer: alice\nitems:\n");
    for item in assignments["items"].as_array().unwrap() {
        let pick = if item["a"] == item["candidate"] {
            "a"
        } else {
            "b"
        };
        feedback.push_str(&format!(
            "  - item_id: {}\n    choice: {pick}\n    reasoning: Lists every step as a numbered bullet.\n",
            item["item_id"].as_str().unwrap()
        ));
    }
    write(&packet.join("feedback.yml"), &feedback);
    home.json(&[
        "feedback",
        "markdown",
        "import",
        "--packet",
        path_arg(&packet),
    ]);

    let (_, _) = export_package(&home, "blind-1");
    let training = home.path().join("out/blind-1.json");
    let out_root = home.path().join("distill-out");
    let candidate_file = home.path().join("candidate.json");
    let blobs = home.path().join("blobs");
    let report = home.json(&[
        "optimizer",
        "distill",
        "--training-package",
        path_arg(&training),
        "--artifact-root",
        path_arg(&blobs),
        "--out-root",
        path_arg(&out_root),
        "--candidate-output",
        path_arg(&candidate_file),
    ]);
    assert_eq!(report["promotable"], true, "{report:#}");
    let imported = home.json(&[
        "import",
        "--file",
        path_arg(&candidate_file),
        "--artifact-dir",
        path_arg(&out_root.join("artifacts")),
    ]);
    assert_eq!(imported["version_id"], "planner@v2", "{imported:#}");

    // A second blind review of the same run is active now.
    let active = home.path().join("packet-2");
    export_packet(&home, "blind-1", &active);
    let hidden = hidden_mapping(&active);
    assert_eq!(hidden.len(), 8);

    let shown = home.json(&["candidate", "show", "planner@v2"]);
    assert_eq!(
        shown["eval_report"]["run_id"], "blind-1",
        "the candidate comes from the blind run: {shown:#}"
    );
    let human = String::from_utf8_lossy(&home.run(&["candidate", "show", "planner@v2"]).stdout)
        .into_owned();
    let list = home
        .json(&["candidate", "list", "--template", "planner"])
        .to_string();
    for output in [human, shown.to_string(), list] {
        assert!(!output.contains("assignments"), "{output}");
        for value in &hidden {
            assert!(
                !output.contains(value.as_str()),
                "S-92: candidate output reveals `{value}`:\n{output}"
            );
        }
        for label in ["Option A", "Option B", "\"a\":", "\"b\":"] {
            assert!(
                !output.contains(label),
                "S-92: candidate output names a blind side ({label}):\n{output}"
            );
        }
    }
}
