//! Helpers of the optimize loop's end-to-end tests (`tests/tests/optimize_evidence.rs`,
//! `tests/tests/optimize_judge.rs`): `skillforge optimize` with the scripted runtime's edit plan,
//! its JSON, the queue's jobs of a stage, and the experiment log's entries.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::Home;

/// Writes the scripted runtime's plan (`SKILLFORGE_SCRIPTED_EDITS`) to `<dir>/plan.json`; returns
/// its path.
///
/// # Panics
/// When the file cannot be written.
pub fn write_plan(dir: &Path, plan: &Value) -> String {
    let path = dir.join("plan.json");
    std::fs::write(&path, plan.to_string()).unwrap();
    path.display().to_string()
}

/// `skillforge optimize ARGS` in `home` with the scripted edit plan `plan`.
///
/// # Panics
/// When the binary cannot be run.
pub fn optimize(home: &Home, plan: &str, args: &[&str]) -> Output {
    home.cmd()
        .env("SKILLFORGE_SCRIPTED_EDITS", plan)
        .arg("optimize")
        .args(args)
        .output()
        .expect("run skillforge optimize")
}

/// Asserts `out` succeeded (naming `what` and its stderr) and returns its stdout as JSON (`Null`
/// when it is not JSON).
///
/// # Panics
/// When the command failed.
pub fn ok(out: &Output, what: &str) -> Value {
    assert!(
        out.status.success(),
        "{what} failed: {}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// `(experiment, outcome)` of every experiment in `optimize status --json`.
///
/// # Panics
/// When the status has no experiments list.
pub fn outcomes(status: &Value) -> Vec<(u64, String)> {
    status["experiments"]
        .as_array()
        .expect("experiments")
        .iter()
        .map(|e| {
            (
                e["experiment"].as_u64().unwrap(),
                e["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The jobs of `stage` in the home's queue (up to 1 000, newest first).
pub fn jobs_of(home: &Home, stage: &str) -> Vec<Value> {
    home.json(&["jobs", "list", "--limit", "1000"])
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|j| j["stage"] == stage)
        .collect()
}

/// A job's idempotency key (`""` when it has none).
pub fn key(job: &Value) -> &str {
    job["idempotency_key"].as_str().unwrap_or("")
}

/// Entry `n` of the run `name`'s experiment log (`<home>/optimize/<name>/experiment-log.yaml`).
///
/// # Panics
/// When the log cannot be read or has no such entry.
pub fn log_entry(home: &Home, name: &str, n: u64) -> Value {
    let text = std::fs::read_to_string(
        home.path()
            .join("optimize")
            .join(name)
            .join("experiment-log.yaml"),
    )
    .unwrap();
    let log: Value = serde_norway::from_str(&text).unwrap();
    log["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["experiment"].as_u64() == Some(n))
        .cloned()
        .unwrap_or_else(|| panic!("no exp-{n:03} in {text}"))
}
