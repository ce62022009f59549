//! The seed's "Complete local review path", steps 1–10, with only skillforge commands: review run →
//! blind Markdown packet → human feedback → training package → optimizer (the built-in
//! `optimizer distill` standing in at step 7) → candidate import → show → promote.

use std::path::Path;

use serde_json::Value;
use skillforge_contract::validate_training_package_json;
use skillforge_tests::Home;

const TEMPLATE: &str = "---\nid: planner\nname: Planner\ndescription: Plans work\nkind: agent-template\nversion: 1\n\
capabilities: [ask]\nruntime_compatibility: [codex, claude]\ntags: [planning]\ninputs: [task]\noutputs: [plan]\n---\n# Plan\nDo it.\n";

fn ok(home: &Home, args: &[&str]) -> String {
    let out = home.run(args);
    assert!(out.status.success(), "skillforge {args:?}: {}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn complete_local_review_path_steps_1_to_10() {
    let home = Home::embedded();
    let input = home.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(input.join("planner.md"), TEMPLATE).unwrap();
    ok(&home, &["template", "add", p(&input.join("planner.md")), "--repo", "owner/repo"]);

    // 1–2. A review run with baseline/candidate outputs per item.
    ok(&home, &["review", "create", "--template", "planner", "--repo", "owner/repo", "--run", "trial-1"]);
    for item in ["i1", "i2"] {
        let baseline = input.join(format!("{item}-baseline.md"));
        let candidate = input.join(format!("{item}-candidate.md"));
        std::fs::write(&baseline, format!("{item}: plan with no test steps\n")).unwrap();
        std::fs::write(&candidate, format!("{item}: plan with a test plan and rollback\n")).unwrap();
        ok(&home, &["review", "item", "add", "--run", "trial-1", "--item", item, "--baseline", p(&baseline), "--candidate", p(&candidate)]);
    }

    // 3–5. Blind packet out, a human's feedback.yml back in.
    let packet = home.path().join("evals/trial-1");
    ok(&home, &["feedback", "markdown", "export", "--run", "trial-1", "--output", p(&packet)]);
    assert!(packet.join("index.md").exists() && packet.join(".assignments.json").exists());
    let assignments: Value = serde_json::from_str(&std::fs::read_to_string(packet.join(".assignments.json")).unwrap()).unwrap();
    // The human prefers the candidate on both items, whichever side it is displayed on.
    let mut feedback = String::from("run_id: trial-1\nreviewer: alice\nitems:\n");
    for entry in assignments["items"].as_array().unwrap() {
        let shown = if entry["a"] == entry["candidate"] { "a" } else { "b" };
        feedback.push_str(&format!(
            "  - item_id: {}\n    choice: {shown}\n    reasoning: Add a test plan and a rollback step to every plan.\n",
            entry["item_id"].as_str().unwrap()
        ));
    }
    std::fs::write(packet.join("feedback.yml"), feedback).unwrap();
    ok(&home, &["feedback", "markdown", "import", "--packet", p(&packet)]);

    // 6. The training package, as external optimizers read it.
    let training = home.path().join("training.json");
    ok(&home, &["export", "--run", "trial-1", "--output", p(&training)]);
    let bytes = std::fs::read_to_string(&training).unwrap();
    validate_training_package_json(&bytes).expect("the strict external-optimizer rules accept the export");
    let package: Value = serde_json::from_str(&bytes).unwrap();
    let choices: Vec<&str> = package["feedback_events"].as_array().unwrap().iter().map(|e| e["choice"].as_str().unwrap()).collect();
    assert_eq!(choices, ["b", "b"], "de-blinded: the candidate is b");

    // 7. The optimizer, with the external optimizer's command line.
    let out_root = home.path().join("skillopt/trial-1");
    let candidate_file = home.path().join("candidate.json");
    ok(&home, &[
        "optimizer", "distill",
        "--training-package", p(&training),
        "--artifact-root", p(&home.path().join("blobs")),
        "--out-root", p(&out_root),
        "--candidate-output", p(&candidate_file),
    ]);

    // 8. Import: a pending version, never promoted by the import itself.
    let imported = home.json(&["import", "--file", p(&candidate_file), "--artifact-dir", p(&out_root.join("artifacts"))]);
    let version = imported["version_id"].as_str().or_else(|| imported["version"].as_str()).expect("version id").to_owned();
    assert_eq!(version, "planner@v2");
    assert_eq!(home.json(&["template", "show", "planner"])["version_id"], "planner@v1", "still v1 current");

    // 9. Show: state, base and a diff that carries the guidance the feedback asked for.
    let shown = ok(&home, &["candidate", "show", &version]);
    assert!(shown.contains("pending"), "{shown}");
    assert!(shown.contains("test plan"), "the diff carries the feedback's guidance:\n{shown}");

    // 10. Promote.
    ok(&home, &["candidate", "promote", &version]);
    let current = home.json(&["template", "show", "planner"]);
    assert_eq!(current["version_id"], "planner@v2");
    assert!(current["content"].as_str().unwrap().contains("test plan"));
}
