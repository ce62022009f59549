//! Issue 35, a new user's first day (part A): human output says states in words and what to do
//! next, never a snake_case machine name (`--json` keeps those), and a command that ends waiting
//! for a person exits 4 ("not decided yet", docs/jobs.md "Exit codes") with a line saying what
//! to do. On a home the real `skillforge demo` filled (a session at its candidate review, a
//! pending candidate, finished jobs), through the built binary.

use std::path::Path;

use skillforge_tests::{Home, git, write};
use tempfile::TempDir;

/// A repository with three commits of real code changes (the demo reviews recent commits).
fn repo() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    git(p, &["init", "-q", "-b", "main"]);
    for (i, body) in ["a + b", "a - b", "a * b"].iter().enumerate() {
        write(
            &p.join("src/lib.rs"),
            &format!("pub fn op{i}(a: i64, b: i64) -> i64 {{\n    {body}\n}}\n"),
        );
        git(p, &["add", "-A"]);
        git(p, &["commit", "-q", "-m", &format!("calc: operation {i}")]);
    }
    dir
}

/// A home the demo filled; returns it with the demo's stdout and the session id.
fn demo_home(repo: &Path) -> (Home, String, String) {
    let home = Home::embedded();
    let out = home.run(&["demo", "--repo", repo.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "demo: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let session = std::fs::read_dir(home.path().join("train"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .next()
        .expect("the demo's session");
    (home, stdout, session)
}

/// `skillforge ARGS`: (exit code, stdout, stderr).
fn run(home: &Home, args: &[&str]) -> (Option<i32>, String, String) {
    let out = home.run(args);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The snake_case identifiers (`awaiting_feedback`, `not_runnable`, `run_id`) in human text,
/// leaving out what is not a state or field name: paths and workflow/stage names (a `/`),
/// template versions (`@`), flags, and hashes or ids (digits).
fn snake_words(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || "()[]{},;:'\"`=<>|".contains(c))
        .map(|w| w.trim_matches(|c: char| ".!?".contains(c)))
        .filter(|w| !w.contains('/') && !w.contains('@') && !w.starts_with('-'))
        .filter(|w| !w.chars().any(|c| c.is_ascii_digit()))
        .filter(|w| {
            let parts: Vec<&str> = w.split('_').collect();
            parts.len() > 1
                && parts
                    .iter()
                    .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase()))
        })
        .map(str::to_owned)
        .collect()
}

/// The keys of `config.toml` (docs/reference/config.md): names a user types, so human output
/// may name them (`auto_promote is off`).
fn config_keys() -> Vec<String> {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/reference/config.md"),
    )
    .unwrap();
    doc.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_owned)
        .collect()
}

/// `text` without the parts that are not skillforge's own words: a job's output tails and
/// idempotency key (`jobs show`) and a template's text and diff (`candidate show`).
fn own_words(text: &str) -> String {
    let mut out = String::new();
    let mut skipping = false;
    for line in text.lines() {
        if line.ends_with("(tail)") || line.starts_with("--- a/") {
            skipping = true;
        }
        if !skipping && !line.starts_with("idem key") {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Issue 35 part A item 3: the human stdout of `train status`, `train continue`, `candidate
/// list/show/decide`, `jobs list/show`, `review status` and the demo's summary has no snake_case
/// state or field name; `--json` keeps the machine names. (`optimize status`: the optimize
/// loop's test; `eval status`/`eval forge`: eval_forge's.)
#[test]
fn human_output_says_states_and_fields_in_words() {
    let repo = repo();
    let (home, demo_out, session) = demo_home(repo.path());
    let session_line = demo_out
        .lines()
        .find(|l| l.starts_with("session "))
        .expect("the demo's session line");
    assert!(
        session_line.contains("candidate published for review"),
        "{session_line}"
    );
    let candidate = home.json(&["candidate", "list", "--pending"])[0]["version_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let jobs: Vec<String> = home
        .json(&["jobs", "list"])
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(!jobs.is_empty());
    let template = candidate.split('@').next().unwrap().to_owned();
    // The session's first iteration is its review run.
    let review_run = format!("{session}-i001");
    let mut commands: Vec<Vec<String>> = [
        vec!["train", "status", "--session", &session],
        vec!["train", "status", "--session", &session, "--detail"],
        vec!["train", "continue", "--session", &session],
        vec!["candidate", "list", "--pending"],
        vec!["candidate", "list", "--template", &template],
        vec!["candidate", "show", &candidate],
        vec!["candidate", "decide", &candidate],
        vec!["jobs", "list"],
        vec!["review", "status", "--run", &review_run],
    ]
    .iter()
    .map(|c| c.iter().map(|s| (*s).to_owned()).collect())
    .collect();
    commands.extend(
        jobs.iter()
            .map(|id| vec!["jobs".to_owned(), "show".to_owned(), id.clone()]),
    );
    let keys = config_keys();
    assert!(keys.iter().any(|k| k == "auto_promote"), "{keys:?}");
    let mut found = Vec::new();
    for args in &commands {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, stdout, stderr) = run(&home, &args);
        assert!(
            matches!(code, Some(0 | 4)),
            "{args:?}: {code:?}\n{stdout}\n{stderr}"
        );
        let mut words = snake_words(&own_words(&stdout));
        words.retain(|w| !keys.contains(w));
        if !words.is_empty() {
            found.push(format!("{args:?}: {words:?}\n{stdout}"));
        }
    }
    let words = snake_words(session_line);
    if !words.is_empty() {
        found.push(format!("demo: {words:?}\n{session_line}"));
    }
    assert!(
        found.is_empty(),
        "snake_case names in human output:\n{}",
        found.join("\n")
    );

    // `--json` keeps the machine names.
    let status = home.json(&["train", "status", "--session", &session]);
    assert_eq!(status["current_phase"], "candidate_review_published");
    assert_eq!(status["status_phase"], "optimizer_completed_candidate");
    let shown = home.json(&["candidate", "show", &candidate]);
    assert!(shown.to_string().contains("\"run_id\""), "{shown:#}");
}

/// The filter itself: it finds machine names and leaves words, paths, versions and ids alone.
#[test]
fn the_snake_case_filter_finds_machine_names_only() {
    assert_eq!(
        snake_words("phase: awaiting_feedback (not_runnable), run_id x"),
        ["awaiting_feedback", "not_runnable", "run_id"]
    );
    assert!(
        snake_words(
            "review published, waiting for feedback /tmp/a_b/c planner@v2 demo-20261206_1 --items-file train/option_generation"
        )
        .is_empty()
    );
}

/// Issue 35 part A item 2: `train continue` at the candidate review and `candidate decide` on a
/// candidate left for a person (auto-promotion off) exit 4 ("not decided yet"), each saying what
/// to do next; `--json` exits the same and keeps its report. A decision made exits 0.
#[test]
fn commands_that_wait_for_a_person_exit_4_and_say_what_to_do() {
    let repo = repo();
    let (home, _, session) = demo_home(repo.path());
    let candidate = home.json(&["candidate", "list", "--pending"])[0]["version_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let (code, stdout, stderr) = run(&home, &["train", "continue", "--session", &session]);
    assert_eq!(code, Some(4), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("next: decide:") && stdout.contains("--promote"),
        "{stdout}"
    );
    let report = home.json_code(&["train", "continue", "--session", &session], 4);
    assert_eq!(report["state"], "candidate_review_published", "{report:#}");

    let (code, stdout, stderr) = run(&home, &["candidate", "decide", &candidate]);
    assert_eq!(code, Some(4), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("stays pending")
            && stdout.contains(&format!("skillforge candidate promote {candidate}")),
        "{stdout}"
    );
    let decided = home.json_code(&["candidate", "decide", &candidate], 4);
    assert_eq!(decided["decision"]["decision"], "notify", "{decided:#}");

    // The person decides: the session records it and exits 0.
    let (code, stdout, stderr) = run(
        &home,
        &[
            "train",
            "continue",
            "--session",
            &session,
            "--promote",
            &candidate,
        ],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    // A read command exits 0 whatever it shows.
    let (code, stdout, stderr) = run(&home, &["train", "status", "--session", &session]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
}
