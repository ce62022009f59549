//! The seed's "Complete local review path", steps 1–10, with only skillforge commands: review run →
//! blind Markdown packet → human feedback → training package → optimizer (the built-in
//! `optimizer distill` standing in at step 7) → candidate import → show → promote.

use serde_json::Value;
use skillforge_contract::validate_training_package_json;
use skillforge_tests::{Home, PLANNER_TEMPLATE, add_template, ok, path_arg};

#[test]
fn complete_local_review_path_steps_1_to_10() {
    let home = Home::embedded();
    let input = home.path().join("in");
    add_template(&home, PLANNER_TEMPLATE, "owner/repo");

    // 1–2. A review run with baseline/candidate outputs per item.
    ok(
        &home,
        &[
            "review",
            "create",
            "--template",
            "planner",
            "--repo",
            "owner/repo",
            "--run",
            "trial-1",
        ],
    );
    for item in ["i1", "i2"] {
        let baseline = input.join(format!("{item}-baseline.md"));
        let candidate = input.join(format!("{item}-candidate.md"));
        std::fs::write(&baseline, format!("{item}: plan with no test steps\n")).unwrap();
        std::fs::write(
            &candidate,
            format!("{item}: plan with a test plan and rollback\n"),
        )
        .unwrap();
        ok(
            &home,
            &[
                "review",
                "item",
                "add",
                "--run",
                "trial-1",
                "--item",
                item,
                "--baseline",
                path_arg(&baseline),
                "--candidate",
                path_arg(&candidate),
            ],
        );
    }

    // 3–5. Blind packet out, a human's feedback.yml back in.
    let packet = home.path().join("evals/trial-1");
    ok(
        &home,
        &[
            "feedback",
            "markdown",
            "export",
            "--run",
            "trial-1",
            "--output",
            path_arg(&packet),
        ],
    );
    assert!(packet.join("index.md").exists() && packet.join(".assignments.json").exists());
    let assignments: Value =
        serde_json::from_str(&std::fs::read_to_string(packet.join(".assignments.json")).unwrap())
            .unwrap();
    // The human prefers the candidate on both items, whichever side it is displayed on.
    let mut feedback = String::from("run_id: trial-1\nreviewer: alice\nitems:\n");
    for entry in assignments["items"].as_array().unwrap() {
        let shown = if entry["a"] == entry["candidate"] {
            "a"
        } else {
            "b"
        };
        feedback.push_str(&format!(
            "  - item_id: {}\n    choice: {shown}\n    reasoning: Add a test plan and a rollback step to every plan.\n",
            entry["item_id"].as_str().unwrap()
        ));
    }
    std::fs::write(packet.join("feedback.yml"), feedback).unwrap();
    ok(
        &home,
        &[
            "feedback",
            "markdown",
            "import",
            "--packet",
            path_arg(&packet),
        ],
    );

    // 6. The training package, as external optimizers read it.
    let training = home.path().join("training.json");
    ok(
        &home,
        &[
            "export",
            "--run",
            "trial-1",
            "--output",
            path_arg(&training),
        ],
    );
    let bytes = std::fs::read_to_string(&training).unwrap();
    validate_training_package_json(&bytes)
        .expect("the strict external-optimizer rules accept the export");
    let package: Value = serde_json::from_str(&bytes).unwrap();
    let choices: Vec<&str> = package["feedback_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["choice"].as_str().unwrap())
        .collect();
    assert_eq!(choices, ["b", "b"], "de-blinded: the candidate is b");

    // 7. The optimizer, with the external optimizer's command line.
    let out_root = home.path().join("skillopt/trial-1");
    let candidate_file = home.path().join("candidate.json");
    ok(
        &home,
        &[
            "optimizer",
            "distill",
            "--training-package",
            path_arg(&training),
            "--artifact-root",
            path_arg(&home.path().join("blobs")),
            "--out-root",
            path_arg(&out_root),
            "--candidate-output",
            path_arg(&candidate_file),
        ],
    );

    // 8. Import: a pending version, never promoted by the import itself.
    let imported = home.json(&[
        "import",
        "--file",
        path_arg(&candidate_file),
        "--artifact-dir",
        path_arg(&out_root.join("artifacts")),
    ]);
    let version = imported["version_id"]
        .as_str()
        .or_else(|| imported["version"].as_str())
        .expect("version id")
        .to_owned();
    assert_eq!(version, "planner@v2");
    assert_eq!(
        home.json(&["template", "show", "planner"])["version_id"],
        "planner@v1",
        "still v1 current"
    );

    // 9. Show: state, base and a diff that carries the guidance the feedback asked for.
    let shown = ok(&home, &["candidate", "show", &version]);
    assert!(shown.contains("pending"), "{shown}");
    assert!(
        shown.contains("test plan"),
        "the diff carries the feedback's guidance:\n{shown}"
    );

    // 10. Promote.
    ok(&home, &["candidate", "promote", &version]);
    let current = home.json(&["template", "show", "planner"]);
    assert_eq!(current["version_id"], "planner@v2");
    assert!(current["content"].as_str().unwrap().contains("test plan"));
}
