//! What a blind Markdown packet asks for and what its import accepts, seen from the optimizer's
//! side: the `feedback.yml` template offers the fields `optimizer distill` learns from, a packet
//! that fills none of them ends in a no-candidate reason naming the fields and the file, and values
//! or keys outside facts §4 are refused with nothing written (facts §4; S-94).

use std::path::{Path, PathBuf};

use skillforge_tests::Home;

const TEMPLATE: &str = "---\nid: planner\nname: Planner\ndescription: Plans work\nkind: agent-template\nversion: 1\n\
capabilities: [ask]\nruntime_compatibility: [codex, claude]\ntags: [planning]\ninputs: [task]\noutputs: [plan]\n---\n# Plan\nDo it.\n";

fn write(path: &Path, text: &str) -> PathBuf {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, text).unwrap();
    path.to_path_buf()
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Runs `skillforge ARGS`, asserts exit `code`, returns (stdout, stderr).
fn run_code(home: &Home, args: &[&str], code: i32) -> (String, String) {
    let out = home.run(args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "skillforge {args:?}\nstdout:\n{stdout}\nstderr:\n{stderr}");
    (stdout, stderr)
}

fn install_template(home: &Home) {
    let file = write(&home.path().join("in/planner.md"), TEMPLATE);
    run_code(home, &["template", "add", s(&file), "--repo", "owner/repo"], 0);
}

/// A ranked explore run with options a..c on every item.
fn ranked_run(home: &Home, run: &str, items: &[&str]) {
    install_template(home);
    home.json(&["review", "create", "--template", "planner", "--repo", "owner/web", "--run", run, "--mode", "explore", "--options", "3"]);
    for item in items {
        let mut args: Vec<String> =
            ["review", "item", "add", "--run", run, "--item", item].iter().map(|a| (*a).to_owned()).collect();
        for label in ["a", "b", "c"] {
            let file = write(&home.path().join(format!("in/{item}-{label}.md")), &format!("{item} option {label}\n"));
            args.push("--option".into());
            args.push(format!("{label}={}", file.display()));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        home.json(&args);
    }
}

/// An A/B run (mode validate).
fn ab_run(home: &Home, run: &str, items: &[&str]) {
    install_template(home);
    home.json(&["review", "create", "--template", "planner", "--repo", "owner/repo", "--run", run]);
    for item in items {
        let baseline = write(&home.path().join(format!("in/{item}-baseline.md")), &format!("{item} baseline\n"));
        let candidate = write(&home.path().join(format!("in/{item}-candidate.md")), &format!("{item} candidate\n"));
        home.json(&["review", "item", "add", "--run", run, "--item", item, "--baseline", s(&baseline), "--candidate", s(&candidate)]);
    }
}

fn export_packet(home: &Home, run: &str, dir: &Path) -> String {
    home.json(&["feedback", "markdown", "export", "--run", run, "--output", s(dir), "--force"]);
    std::fs::read_to_string(dir.join("feedback.yml")).unwrap()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn templates_offer_the_fields_the_optimizer_learns_from() {
    let home = Home::embedded();
    ab_run(&home, "ab-1", &["i1"]);
    let ab = home.path().join("ab-packet");
    let template = export_packet(&home, "ab-1", &ab);
    assert!(template.contains("  reasoning: ''"), "{template}");
    for absent in ["quality:", "continue_mode:", "promote:", "useful_traits:"] {
        assert!(!template.contains(absent), "an A/B item stores no {absent}\n{template}");
    }
    let index = read(&ab.join("index.md"));
    assert!(index.contains("the optimizer learns only from `reasoning`"), "{index}");
    assert!(!index.contains("`reasoning` is optional"), "{index}");

    ranked_run(&home, "rk-1", &["h1"]);
    let ranked = home.path().join("rk-packet");
    let template = export_packet(&home, "rk-1", &ranked);
    for key in ["ranking: ''", "useful_traits: {}", "rejected_traits: {}", "required_improvements: []", "quality: ''", "reasoning: ''"] {
        assert!(template.contains(key), "missing {key}\n{template}");
    }
    let index = read(&ranked.join("index.md"));
    assert!(index.contains("the optimizer learns only from `useful_traits` and `rejected_traits`"), "{index}");

    // The template filled only where a reviewer must answer imports as written.
    write(&ranked.join("feedback.yml"), &template.replace("reviewer: ''", "reviewer: alice").replace("ranking: ''", "ranking: C > A > B"));
    home.json(&["feedback", "markdown", "import", "--packet", s(&ranked)]);
}

#[test]
fn rankings_alone_end_in_a_reason_naming_the_fields_and_the_file() {
    let home = Home::embedded();
    ranked_run(&home, "rk-2", &["h1", "h2"]);
    let packet = home.path().join("packet");
    export_packet(&home, "rk-2", &packet);
    write(
        &packet.join("feedback.yml"),
        "run_id: rk-2\nreviewer: alice\nitems:\n  - {item_id: h1, ranking: C > A > B}\n  - {item_id: h2, ranking: B > C > A}\n",
    );
    home.json(&["feedback", "markdown", "import", "--packet", s(&packet)]);
    let training = home.path().join("training.json");
    home.json(&["export", "--run", "rk-2", "--output", s(&training)]);

    let out_root = home.path().join("out");
    let candidate = home.path().join("candidate.json");
    let report = home.json(&[
        "optimizer", "distill", "--training-package", s(&training), "--artifact-root", s(&home.path().join("blobs")),
        "--out-root", s(&out_root), "--candidate-output", s(&candidate),
    ]);
    assert_eq!(report["no_candidate_reason"], "no_actionable_feedback");
    let hint = report["no_candidate_hint"].as_str().expect("a hint").to_owned();
    let file = format!("`{}/feedback.yml`", std::fs::canonicalize(&packet).unwrap().display());
    for want in ["2 ranked and 0 A/B", "useful_traits, rejected_traits or required_improvements", "reasoning (A/B items)", &file] {
        assert!(hint.contains(want), "missing {want}: {hint}");
    }

    let out = home.run(&["import", "--file", s(&candidate), "--artifact-dir", s(&out_root.join("artifacts"))]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("optimizer produced no candidate: no_actionable_feedback"), "{stderr}");
    assert!(stderr.contains("useful_traits, rejected_traits or required_improvements") && stderr.contains(&file), "{stderr}");
}

#[test]
fn ab_signals_and_unknown_keys_are_refused_and_nothing_is_written() {
    let home = Home::embedded();
    ab_run(&home, "ab-3", &["i1", "i2"]);
    let packet = home.path().join("packet");
    export_packet(&home, "ab-3", &packet);
    let ok = "run_id: ab-3\nreviewer: carol\nitems:\n  - {item_id: i1, choice: a, reasoning: steadier}\n  - item_id: i2\n    choice: b\n";
    let table = [
        (format!("{ok}    quality: great\n"), "quality \"great\" is invalid; use one of poor, acceptable, strong"),
        (format!("{ok}    continue_mode: wander\n"), "continue_mode \"wander\" is invalid"),
        (format!("{ok}    promote: maybe\n"), "promote \"maybe\" is invalid; use one of yes, no"),
        (format!("{ok}reviewr: bob\n"), "feedback.yml: unknown key \"reviewr\"; use run_id, reviewer, items"),
        (format!("{ok}    reasonning: typo\n"), "feedback.yml item 2: unknown key \"reasonning\""),
    ];
    let dir = std::fs::canonicalize(&packet).unwrap();
    for (text, want) in table {
        write(&packet.join("feedback.yml"), &text);
        let (_, stderr) = run_code(&home, &["feedback", "markdown", "import", "--packet", s(&packet)], 2);
        assert!(stderr.contains(want), "want {want}:\n{stderr}");
        assert!(stderr.contains(&format!("import packet `{}`", dir.display())) && stderr.contains("nothing was written"), "{stderr}");
        assert_eq!(home.json(&["review", "status", "--run", "ab-3"])["feedback_events"], 0, "{text}");
    }
    write(&packet.join("feedback.yml"), &format!("{ok}    quality: Strong\n    promote: y\n"));
    home.json(&["feedback", "markdown", "import", "--packet", s(&packet)]);
    assert_eq!(home.json(&["review", "status", "--run", "ab-3"])["feedback_events"], 2);
}
