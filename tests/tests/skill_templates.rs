//! A skill is a template (issue 35 item 1): `template add` takes a `SKILL.md` with only the
//! Agent Skills frontmatter, or its skill directory, derives the rest with stated defaults, never
//! rewrites the file, reports every problem at once, and the review → export → optimizer →
//! import → promote path runs on it.

use serde_json::Value;
use skillforge_contract::validate_training_package_json;
use skillforge_tests::{Home, ok, path_arg, run_code, write};

const SKILL_MD: &str = "---\nname: commit-notes\ndescription: Writes commit messages that name the user-visible effect first\nlicense: MIT\n---\n# Commit notes\nSummarize the change in one line.\n";

#[test]
fn a_skill_directory_is_added_with_derived_defaults_and_its_file_untouched() {
    let home = Home::embedded();
    let skill = write(&home.path().join("in/commit-notes/SKILL.md"), SKILL_MD);
    let dir = skill.parent().unwrap();
    let before = std::fs::metadata(&skill).unwrap().modified().unwrap();

    let (out, _) = run_code(&home, &["template", "add", path_arg(dir)], 0);
    assert!(out.contains("added commit-notes@v1 (current)"), "{out}");
    for line in [
        "derived (not in the file, defaults):",
        "kind",
        "agent-template",
        "capabilities",
        "ask, review, implement",
        "runtime_compatibility",
        "claude, codex",
        "outputs",
    ] {
        assert!(out.contains(line), "missing {line:?}:\n{out}");
    }
    assert_eq!(
        std::fs::read_to_string(&skill).unwrap(),
        SKILL_MD,
        "the user's file is never rewritten"
    );
    assert_eq!(
        std::fs::metadata(&skill).unwrap().modified().unwrap(),
        before
    );

    let shown = home.json(&["template", "show", "commit-notes"]);
    assert_eq!(
        shown["content"], SKILL_MD,
        "the stored content is the file byte for byte"
    );
    assert_eq!(shown["metadata"]["id"], "commit-notes");
    assert_eq!(shown["metadata"]["version"], 1);
    assert_eq!(shown["metadata"]["tags"], serde_json::json!(["skill"]));
    assert_eq!(
        shown["derived"],
        serde_json::json!([
            "id",
            "kind",
            "version",
            "capabilities",
            "runtime_compatibility",
            "tags",
            "inputs",
            "outputs"
        ])
    );
    let human = ok(&home, &["template", "show", "commit-notes"]);
    assert!(
        human.contains("* derived default, not in the file") && human.contains("* kind"),
        "{human}"
    );
    assert!(
        human.contains("    name "),
        "name is from the file, unmarked:\n{human}"
    );

    // The same file again is no new version; the file path form works too.
    let again = home.json(&["template", "add", path_arg(&skill)]);
    assert_eq!(
        (again["created"].as_bool(), again["version_id"].as_str()),
        (Some(false), Some("commit-notes@v1"))
    );
}

#[test]
fn every_problem_is_reported_at_once_and_nothing_is_stored() {
    let home = Home::embedded();
    let bad = write(
        &home.path().join("in/planner/SKILL.md"),
        "---\nname: Other Name\ncapabilities: [fly]\ntags: {a: 1}\n---\n\n",
    );
    let (_, err) = run_code(
        &home,
        &["template", "add", path_arg(bad.parent().unwrap())],
        2,
    );
    for want in [
        "problems:",
        "description is required",
        "capabilities has unsupported value \"fly\"",
        "ask (answers",
        "tags: invalid type",
        "expected a list (`[a, b]`, or `- a` lines)",
        "template body is empty",
        "differs from its directory \"planner\"",
        path_arg(&bad),
    ] {
        assert!(err.contains(want), "missing {want:?}:\n{err}");
    }
    assert_eq!(
        home.json(&["template", "list"]),
        Value::Array(vec![]),
        "nothing stored"
    );
    let empty = home.path().join("in/empty");
    std::fs::create_dir_all(&empty).unwrap();
    let (_, err) = run_code(&home, &["template", "add", path_arg(&empty)], 2);
    assert!(err.contains("has no SKILL.md"), "{err}");
}

// A file whose text an earlier version had is added as a new current version, and the output
// says it is that version's text again (a roll-back), in words and in --json.
#[test]
fn adding_an_earlier_versions_text_says_it_is_a_roll_back() {
    let home = Home::embedded();
    let skill = home.path().join("in/tidy/SKILL.md");
    let first = "---\nname: tidy\ndescription: Keep replies short\n---\nBe brief.\n";
    write(&skill, first);
    ok(&home, &["template", "add", path_arg(&skill)]);
    write(&skill, &format!("{first}Name the effect first.\n"));
    ok(&home, &["template", "add", path_arg(&skill)]);
    write(&skill, first);
    let said = ok(&home, &["template", "add", path_arg(&skill)]);
    assert!(
        said.contains("added tidy@v3 (current)")
            && said.contains("the same text as tidy@v1 (a roll-back to it)"),
        "{said}"
    );
    write(&skill, &format!("{first}Name the effect first.\n"));
    assert_eq!(
        home.json(&["template", "add", path_arg(&skill)])["same_as"],
        "tidy@v2"
    );
}

/// The seed's local review path on a skill added from its SKILL.md: the training package passes
/// the strict external-optimizer rules, the optimizer's candidate imports and promotes.
#[test]
fn review_export_optimize_import_promote_on_a_skill_md() {
    let home = Home::embedded();
    let skill = write(&home.path().join("in/commit-notes/SKILL.md"), SKILL_MD);
    ok(
        &home,
        &[
            "template",
            "add",
            path_arg(skill.parent().unwrap()),
            "--repo",
            "owner/repo",
        ],
    );
    ok(
        &home,
        &[
            "review",
            "create",
            "--template",
            "commit-notes",
            "--repo",
            "owner/repo",
            "--run",
            "r1",
        ],
    );
    for item in ["i1", "i2"] {
        let baseline = write(
            &home.path().join(format!("in/{item}-a.md")),
            "Refactor module\n",
        );
        let candidate = write(
            &home.path().join(format!("in/{item}-b.md")),
            "Login no longer fails on long passwords\n",
        );
        ok(
            &home,
            &[
                "review",
                "item",
                "add",
                "--run",
                "r1",
                "--item",
                item,
                "--baseline",
                path_arg(&baseline),
                "--candidate",
                path_arg(&candidate),
            ],
        );
    }
    let packet = home.path().join("evals/r1");
    ok(
        &home,
        &[
            "feedback",
            "markdown",
            "export",
            "--run",
            "r1",
            "--output",
            path_arg(&packet),
        ],
    );
    let assignments: Value =
        serde_json::from_str(&std::fs::read_to_string(packet.join(".assignments.json")).unwrap())
            .unwrap();
    let mut feedback = String::from("run_id: r1\nreviewer: alice\nitems:\n");
    for entry in assignments["items"].as_array().unwrap() {
        let shown = if entry["a"] == entry["candidate"] {
            "a"
        } else {
            "b"
        };
        feedback.push_str(&format!(
            "  - item_id: {}\n    choice: {shown}\n    reasoning: Name the user-visible effect in the first line.\n",
            entry["item_id"].as_str().unwrap()
        ));
    }
    write(&packet.join("feedback.yml"), &feedback);
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

    let training = home.path().join("training.json");
    ok(
        &home,
        &["export", "--run", "r1", "--output", path_arg(&training)],
    );
    let bytes = std::fs::read_to_string(&training).unwrap();
    validate_training_package_json(&bytes)
        .expect("the strict external-optimizer rules accept the export");
    let package: Value = serde_json::from_str(&bytes).unwrap();
    assert_eq!(package["template"]["content"], SKILL_MD);
    assert_eq!(package["template"]["metadata"]["kind"], "agent-template");
    let loaded =
        skillforge_tests::loader::load_like_optimizer(&package, &home.path().join("blobs"))
            .unwrap_or_else(|e| panic!("the optimizer's data loader refuses the package: {e:?}"));
    assert_eq!(loaded.len(), 2, "both items load");

    let out_root = home.path().join("skillopt/r1");
    let candidate = home.path().join("candidate.json");
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
            path_arg(&candidate),
        ],
    );
    let imported = home.json(&[
        "import",
        "--file",
        path_arg(&candidate),
        "--artifact-dir",
        path_arg(&out_root.join("artifacts")),
    ]);
    let version = imported["version_id"]
        .as_str()
        .or_else(|| imported["version"].as_str())
        .expect("version id")
        .to_owned();
    assert_eq!(version, "commit-notes@v2");
    ok(&home, &["candidate", "promote", &version]);
    let current = home.json(&["template", "show", "commit-notes"]);
    assert_eq!(current["version_id"], "commit-notes@v2");
    let content = current["content"].as_str().unwrap();
    assert!(
        content.starts_with("---\nname: commit-notes\n") && content.contains("user-visible effect"),
        "{content}"
    );
    assert_eq!(
        std::fs::read_to_string(&skill).unwrap(),
        SKILL_MD,
        "promotion does not touch the user's file"
    );
}
