//! What a blind Markdown packet asks for and what its import accepts, seen from the optimizer's
//! side: the `feedback.yml` template offers the fields `optimizer distill` learns from, a packet
//! that fills none of them ends in a no-candidate reason naming the fields and the file, and values
//! or keys outside facts §4 are refused with nothing written (facts §4; S-94).

use std::path::Path;

use skillforge_tests::{Home, PLANNER_TEMPLATE, add_template, path_arg, run_code, write};

/// A ranked explore run with options a..c on every item.
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
        "3",
    ]);
    for item in items {
        let mut args: Vec<String> = ["review", "item", "add", "--run", run, "--item", item]
            .iter()
            .map(|a| (*a).to_owned())
            .collect();
        for label in ["a", "b", "c"] {
            let file = write(
                &home.path().join(format!("in/{item}-{label}.md")),
                &format!("{item} option {label}\n"),
            );
            args.push("--option".into());
            args.push(format!("{label}={}", file.display()));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        home.json(&args);
    }
}

/// An A/B run (mode validate).
fn ab_run(home: &Home, run: &str, items: &[&str]) {
    add_template(home, PLANNER_TEMPLATE, "owner/repo");
    home.json(&[
        "review",
        "create",
        "--template",
        "planner",
        "--repo",
        "owner/repo",
        "--run",
        run,
    ]);
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

fn export_packet(home: &Home, run: &str, dir: &Path) -> String {
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
        assert!(
            !template.contains(absent),
            "an A/B item stores no {absent}\n{template}"
        );
    }
    let index = read(&ab.join("index.md"));
    assert!(
        index.contains("the optimizer learns only from `reasoning`"),
        "{index}"
    );
    assert!(!index.contains("`reasoning` is optional"), "{index}");

    ranked_run(&home, "rk-1", &["h1"]);
    let ranked = home.path().join("rk-packet");
    let template = export_packet(&home, "rk-1", &ranked);
    for key in [
        "ranking: ''",
        "useful_traits: {}",
        "rejected_traits: {}",
        "required_improvements: []",
        "quality: ''",
        "reasoning: ''",
    ] {
        assert!(template.contains(key), "missing {key}\n{template}");
    }
    let index = read(&ranked.join("index.md"));
    assert!(
        index.contains("the optimizer learns only from `useful_traits` and `rejected_traits`"),
        "{index}"
    );

    // The template filled only where a reviewer must answer imports as written.
    write(
        &ranked.join("feedback.yml"),
        &template
            .replace("reviewer: ''", "reviewer: alice")
            .replace("ranking: ''", "ranking: C > A > B"),
    );
    home.json(&[
        "feedback",
        "markdown",
        "import",
        "--packet",
        path_arg(&ranked),
    ]);
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
    home.json(&[
        "feedback",
        "markdown",
        "import",
        "--packet",
        path_arg(&packet),
    ]);
    let training = home.path().join("training.json");
    home.json(&["export", "--run", "rk-2", "--output", path_arg(&training)]);

    let out_root = home.path().join("out");
    let candidate = home.path().join("candidate.json");
    let report = home.json(&[
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
    ]);
    assert_eq!(report["no_candidate_reason"], "no_actionable_feedback");
    let hint = report["no_candidate_hint"]
        .as_str()
        .expect("a hint")
        .to_owned();
    let file = format!(
        "`{}/feedback.yml`",
        std::fs::canonicalize(&packet).unwrap().display()
    );
    for want in [
        "2 ranked and 0 A/B",
        "useful_traits, rejected_traits or required_improvements",
        "reasoning (A/B items)",
        &file,
    ] {
        assert!(hint.contains(want), "missing {want}: {hint}");
    }

    let out = home.run(&[
        "import",
        "--file",
        path_arg(&candidate),
        "--artifact-dir",
        path_arg(&out_root.join("artifacts")),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("optimizer produced no candidate: no_actionable_feedback"),
        "{stderr}"
    );
    assert!(
        stderr.contains("useful_traits, rejected_traits or required_improvements")
            && stderr.contains(&file),
        "{stderr}"
    );
}

#[test]
fn ab_signals_and_unknown_keys_are_refused_and_nothing_is_written() {
    let home = Home::embedded();
    ab_run(&home, "ab-3", &["i1", "i2"]);
    let packet = home.path().join("packet");
    export_packet(&home, "ab-3", &packet);
    let ok = "run_id: ab-3\nreviewer: carol\nitems:\n  - {item_id: i1, choice: a, reasoning: steadier}\n  - item_id: i2\n    choice: b\n";
    let table = [
        (
            format!("{ok}    quality: great\n"),
            "quality \"great\" is invalid; use one of poor, acceptable, strong",
        ),
        (
            format!("{ok}    continue_mode: wander\n"),
            "continue_mode \"wander\" is invalid",
        ),
        (
            format!("{ok}    promote: maybe\n"),
            "promote \"maybe\" is invalid; use one of yes, no",
        ),
        (
            format!("{ok}reviewr: bob\n"),
            "feedback.yml: unknown key \"reviewr\"; use run_id, reviewer, items",
        ),
        (
            format!("{ok}    reasonning: typo\n"),
            "feedback.yml item 2: unknown key \"reasonning\"",
        ),
    ];
    let dir = std::fs::canonicalize(&packet).unwrap();
    for (text, want) in table {
        write(&packet.join("feedback.yml"), &text);
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
        assert!(stderr.contains(want), "want {want}:\n{stderr}");
        assert!(
            stderr.contains(&format!("import packet `{}`", dir.display()))
                && stderr.contains("nothing was written"),
            "{stderr}"
        );
        assert_eq!(
            home.json(&["review", "status", "--run", "ab-3"])["feedback_events"],
            0,
            "{text}"
        );
    }
    write(
        &packet.join("feedback.yml"),
        &format!("{ok}    quality: Strong\n    promote: y\n"),
    );
    home.json(&[
        "feedback",
        "markdown",
        "import",
        "--packet",
        path_arg(&packet),
    ]);
    assert_eq!(
        home.json(&["review", "status", "--run", "ab-3"])["feedback_events"],
        2
    );
}
