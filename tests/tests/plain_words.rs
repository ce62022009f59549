//! Output a person reads, in words (issue 35 part C items 3 and 4): logs with fields rather than
//! Rust's debug form, config type errors without Rust type names, `candidate list` over every
//! template, a derived `version` shown as the version it is, a misspelled frontmatter key and a
//! missing frontmatter explained, an ad hoc `jobs submit -- true` named by its command.

use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::Value;
use skillforge_tests::{
    Home, Reaped, ok, path_arg, run_code, signal, two_commit_repo, wait_exit, wait_for, write,
};

const WAIT: Duration = Duration::from_secs(60);

/// A SKILL.md with only the Agent Skills frontmatter.
fn skill(home: &Home, name: &str, frontmatter_extra: &str, body: &str) -> std::path::PathBuf {
    write(
        &home.path().join("skills").join(name).join("SKILL.md"),
        &format!("---\nname: {name}\ndescription: Plans work\n{frontmatter_extra}---\n{body}\n"),
    )
}

// The worker's shutdown line logs its counts as fields (`finished=0 fenced=0 …`), never the
// report struct's debug form.
#[test]
fn the_worker_logs_its_shutdown_counts_as_fields() {
    let home = Home::embedded();
    let mut worker = Reaped(home.spawn_worker("words", &[]));
    wait_for(WAIT, "the worker to start", || {
        home.logs().contains("worker started").then_some(())
    });
    signal(&worker.0, Signal::SIGTERM);
    assert!(wait_exit(&mut worker.0, WAIT).success(), "{}", home.logs());
    let logs = home.logs();
    let stopped = logs
        .lines()
        .find(|l| l.contains("worker stopped"))
        .unwrap_or_else(|| panic!("a shutdown line:\n{logs}"));
    assert!(
        stopped.contains("finished=0")
            && stopped.contains("fenced=0")
            && stopped.contains("released=0")
            && stopped.contains("left_stale=0"),
        "{stopped}"
    );
    assert!(
        !stopped.contains("WorkerReport") && !stopped.contains('{'),
        "{stopped}"
    );
}

// A config value of the wrong type names the type in words, not Rust's (`usize`).
#[test]
fn a_config_type_error_says_a_whole_number() {
    let home = Home::embedded();
    write(
        &home.path().join("config.toml"),
        "[worker]\nconcurrency = \"two\"\n",
    );
    let out = home.run(&["template", "list"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("concurrency") && err.contains("a whole number ≥ 0") && !err.contains("usize"),
        "{err}"
    );
}

// `-v check` logs each dimension's score as a number (`score=1.000`), not `Some(1.0)`.
#[test]
fn the_check_log_shows_a_score_as_a_number() {
    let (repo, base, head) = two_commit_repo();
    let home = Home::embedded();
    let out = home
        .cmd()
        .env("SKILLFORGE_LOG", "info")
        .args(["check", "--repo", path_arg(repo.path())])
        .args(["--base", &base, "--head", &head])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let line = err
        .lines()
        .find(|l| l.contains("checker dimension measured"))
        .unwrap_or_else(|| panic!("the dimension's log line:\n{err}"));
    assert!(
        line.contains("score=") && !line.contains("Some(") && !line.contains("None"),
        "{line}"
    );
}

// `candidate list` without `--template` lists every template's candidates (none yet: an empty
// list, exit 0), not a usage error.
#[test]
fn candidate_list_without_a_template_lists_every_templates() {
    let home = Home::embedded();
    let listed: Value = serde_json::from_str(&ok(&home, &["--json", "candidate", "list"])).unwrap();
    assert_eq!(listed, serde_json::json!([]));
    let (_, err) = run_code(&home, &["candidate", "list"], 0);
    assert!(err.contains("no candidates"), "{err}");
}

// A `version` the SKILL.md does not set is shown as the version it is: after an edit the skill
// is `@v2`, and `template show` says version 2 (marked derived), not the parser's default 1.
#[test]
fn template_show_gives_a_derived_version_as_the_stored_one() {
    let home = Home::embedded();
    let file = skill(&home, "planner", "", "# Plan\nStep by step.");
    ok(
        &home,
        &["template", "add", path_arg(file.parent().unwrap())],
    );
    skill(&home, "planner", "", "# Plan\nStep by step, then check.");
    let added = home.json(&["template", "add", path_arg(file.parent().unwrap())]);
    assert_eq!(added["version_id"], "planner@v2", "{added:#}");
    assert_eq!(added["metadata"]["version"], 2, "{added:#}");
    let shown = home.json(&["template", "show", "planner"]);
    assert_eq!(
        (shown["version_id"].as_str(), &shown["metadata"]["version"]),
        (Some("planner@v2"), &serde_json::json!(2)),
        "{shown:#}"
    );
    let human = ok(&home, &["template", "show", "planner"]);
    let line = human
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("version"))
        .unwrap_or_else(|| panic!("a version line:\n{human}"));
    assert_eq!(
        line.split_whitespace().collect::<Vec<_>>(),
        ["*", "version", "2"],
        "{human}"
    );
}

// A misspelled frontmatter key is named with the nearest known one; the Agent Skills keys are
// known and draw no warning.
#[test]
fn a_misspelled_frontmatter_key_is_named_with_the_nearest_known_one() {
    let home = Home::embedded();
    let file = skill(
        &home,
        "planner",
        "versoin: 2\nlicense: MIT\nallowed-tools: Read\nmetadata:\n  team: core\ncompatibility: any\n",
        "# Plan",
    );
    let (_, err) = run_code(&home, &["template", "add", path_arg(&file)], 0);
    assert!(
        err.contains("`versoin`") && err.contains("did you mean `version`?"),
        "{err}"
    );
    for known in ["license", "allowed-tools", "metadata", "compatibility"] {
        assert!(!err.contains(&format!("`{known}`")), "{known}: {err}");
    }
    let file = skill(&home, "coder", "", "# Code");
    let (_, err) = run_code(&home, &["template", "add", path_arg(&file)], 0);
    assert!(!err.contains("warning"), "{err}");
}

// A file with no frontmatter is refused with the least frontmatter a skill needs.
#[test]
fn a_template_without_frontmatter_is_shown_the_minimal_one() {
    let home = Home::embedded();
    let file = write(&home.path().join("plain.md"), "# Plan\nStep by step.\n");
    let (_, err) = run_code(&home, &["template", "add", path_arg(&file)], 2);
    assert!(
        err.contains("must start with YAML frontmatter")
            && err.contains("---\nname: my-skill\ndescription: "),
        "{err}"
    );
    assert_eq!(
        home.json(&["template", "list"]),
        serde_json::json!([]),
        "nothing stored"
    );
}

// `jobs submit -- true` is named by its command in `jobs list`, like any other submit (only a
// workflow's own placeholder step is named by its workflow and stage).
#[test]
fn an_ad_hoc_true_is_listed_by_its_command() {
    let home = Home::embedded();
    ok(
        &home,
        &["jobs", "submit", "--require", "gpu=yes", "--", "true"],
    );
    let listed = ok(&home, &["jobs", "list"]);
    let row = listed
        .lines()
        .nth(1)
        .unwrap_or_else(|| panic!("one job:\n{listed}"));
    assert!(
        row.trim_end().ends_with(" true") && !row.contains("adhoc/"),
        "{listed}"
    );
}
