//! Helpers of the decide end-to-end tests (`tests/tests/decide.rs`, `tests/tests/decide_routes.rs`;
//! issue 15): a home with `planner@v1`, candidate imports, harvested outcomes, `sqlite3` reads
//! of the store and the JSONL event sink.

use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::{Home, PLANNER_TEMPLATE, add_template, write};

/// The `planner` template with `body` in place of its own (`runtime_compatibility: [codex, claude]`:
/// codex-family, so the scripted runtime is another family for judges and reviewers).
pub fn template_text(body: &str) -> String {
    PLANNER_TEMPLATE.replace("# Plan\nDo it.\n", body)
}

/// A command's stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A home with `planner@v1` current.
pub fn home() -> Home {
    home_on(Home::embedded())
}

/// [`home`] on a given home (e.g. `Home::redis(url)`).
pub fn home_on(home: Home) -> Home {
    add_template(&home, PLANNER_TEMPLATE, "acme/templates");
    home
}

/// Writes `<home>/config.toml`.
pub fn config(home: &Home, text: &str) {
    write(&home.path().join("config.toml"), text);
}

/// Imports a candidate whose body is `body` (score 0.8); returns the import's stderr.
pub fn import(home: &Home, body: &str, score: f64) -> String {
    let package = json!({
        "kind": "gitmoot-skillopt-candidate-package",
        "contract_version": 1,
        "template_id": "planner",
        "candidate": {"content": template_text(body), "metadata": {
            "id": "planner", "name": "Planner", "description": "Plans work", "kind": "agent-template", "version": 1,
            "capabilities": ["ask"], "runtime_compatibility": ["codex", "claude"], "tags": ["planning"],
            "inputs": ["task"], "outputs": ["plan"]}},
        "summary": {"score": score},
    });
    let file = write(
        &home
            .path()
            .join(format!("in/candidate-{}.json", body.len())),
        &package.to_string(),
    );
    let out = home.run(&["import", "--file", file.to_str().unwrap()]);
    assert!(out.status.success(), "import: {}", stderr(&out));
    stderr(&out)
}

/// One value from the store: `sqlite3 <db> QUERY`, trimmed.
pub fn sql(home: &Home, query: &str) -> String {
    let out = Command::new("sqlite3")
        .arg(home.path().join("skillforge.db"))
        .arg(query)
        .output()
        .expect("sqlite3 (Debian package sqlite3) is installed");
    assert!(out.status.success(), "sqlite3 {query}: {}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Rows of `table`.
pub fn count(home: &Home, table: &str) -> i64 {
    sql(home, &format!("SELECT COUNT(*) FROM {table}"))
        .parse()
        .unwrap()
}

/// Rows a decision must not add when it is a no-op.
pub fn decide_tables(home: &Home) -> Vec<i64> {
    [
        "eval_runs",
        "ranked_feedback_events",
        "skillopt_bandit_arms",
        "skillopt_ab_picks",
        "skillopt_binary_verdicts",
        "promotion_events",
    ]
    .iter()
    .map(|t| count(home, t))
    .collect()
}

/// `ab planner ARGS…` with `--json`.
pub fn ab(home: &Home, args: &[&str]) -> Value {
    let mut all = vec!["ab", "planner"];
    all.extend_from_slice(args);
    home.json(&all)
}

/// Attributes PR `pr` of `acme/app` to `version` and records its outcome: merged with external
/// CI (`merged_ok`) or reverted.
pub fn harvest_outcome(home: &Home, pr: u32, version: &str, merged_ok: bool) {
    let pr_s = pr.to_string();
    home.json(&[
        "harvest",
        "attribute",
        "--repo",
        "acme/app",
        "--pr",
        &pr_s,
        "--template",
        version,
        "--resolved-commit",
        "c0ffee",
    ]);
    let outcome = if merged_ok {
        vec!["--outcome", "merged", "--ci", "external"]
    } else {
        vec!["--outcome", "reverted"]
    };
    let mut args = vec!["harvest", "outcome", "--repo", "acme/app", "--pr", &pr_s];
    args.extend(outcome);
    home.json(&args);
}

/// The events of the JSONL sink `<home>/events.jsonl`, oldest first.
pub fn events(home: &Home) -> Vec<Value> {
    std::fs::read_to_string(home.path().join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}
