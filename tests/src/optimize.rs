//! Helpers of the optimize loop's end-to-end tests (`tests/tests/optimize.rs`,
//! `tests/tests/optimize_evidence.rs`, `tests/tests/optimize_judge.rs`): the spec and the scripted
//! runtime's edit plan written to files, `skillforge optimize` (init, run, status, report, a run
//! in the background) with that plan, its JSON, fleet workers carrying the plan, the queue's jobs
//! of a stage, the experiment log, and the harness measured again on a fresh clone of a branch.

use std::path::Path;
use std::process::{Output, Stdio};

use serde_json::Value;

use crate::{Home, Reaped};

/// Writes a spec's YAML `text` to `<dir>/<file>` (e.g. `ops.yaml`); returns its path.
///
/// # Panics
/// When the file cannot be written.
pub fn write_spec(dir: &Path, file: &str, text: &str) -> String {
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

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

/// `skillforge optimize [--json] init --spec SPEC --repo REPO` with the plan, not checked: for
/// the refusals' exit codes and messages.
///
/// # Panics
/// When the binary cannot be run.
pub fn try_init(home: &Home, plan: &str, spec: &str, repo: &Path, json: bool) -> Output {
    let repo = repo.display().to_string();
    let args = ["--json", "init", "--spec", spec, "--repo", &repo];
    optimize(home, plan, if json { &args[..] } else { &args[1..] })
}

/// `skillforge optimize --json init --spec SPEC --repo REPO`, asserted to succeed: its JSON (the
/// baseline under `baseline`).
///
/// # Panics
/// When the command failed.
pub fn init(home: &Home, plan: &str, spec: &str, repo: &Path) -> Value {
    ok(&try_init(home, plan, spec, repo, true), "init")
}

/// `skillforge optimize --json VERB --spec SPEC` (`run`, `resume`, `status`, `report`), asserted
/// to succeed: its JSON.
///
/// # Panics
/// When the command failed (the message names `verb`).
pub fn call(home: &Home, plan: &str, verb: &str, spec: &str) -> Value {
    ok(
        &optimize(home, plan, &["--json", verb, "--spec", spec]),
        verb,
    )
}

/// The text of `optimize --json report --spec SPEC` (its `text` field).
///
/// # Panics
/// When the command failed or the JSON has no text.
pub fn report_text(home: &Home, plan: &str, spec: &str) -> String {
    call(home, plan, "report", spec)["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// `skillforge optimize run --spec SPEC` started in the background with the plan (no output
/// kept), killed and reaped on drop: the orchestrator a test SIGKILLs or interrupts.
///
/// # Panics
/// When the binary cannot be started.
pub fn spawn_run(home: &Home, plan: &str, spec: &str) -> Reaped {
    Reaped(
        home.cmd()
            .env("SKILLFORGE_SCRIPTED_EDITS", plan)
            .args(["optimize", "run", "--spec", spec])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn run"),
    )
}

/// A `skillforge worker --name NAME` on the home's queue carrying the plan, its stderr in
/// `<home>/worker-<name>.log` (shown by [`Home::logs`]), killed and reaped on drop.
///
/// # Panics
/// When the log cannot be created or the binary cannot be started.
pub fn spawn_worker(home: &Home, plan: &str, name: &str) -> Reaped {
    let log = std::fs::File::create(home.path().join(format!("worker-{name}.log"))).unwrap();
    Reaped(
        home.cmd()
            .env("SKILLFORGE_SCRIPTED_EDITS", plan)
            .args(["worker", "--name", name])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn worker"),
    )
}

/// [`spawn_worker`] for each of `names`.
pub fn spawn_workers(home: &Home, plan: &str, names: &[&str]) -> Vec<Reaped> {
    names
        .iter()
        .map(|name| spawn_worker(home, plan, name))
        .collect()
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

/// `(experiment, hypothesis id, outcome)` of every experiment in `optimize status --json`,
/// borrowed from `status`.
///
/// # Panics
/// When the status has no experiments list or an experiment lacks one of the three.
pub fn experiments(status: &Value) -> Vec<(u64, &str, &str)> {
    status["experiments"]
        .as_array()
        .expect("experiments")
        .iter()
        .map(|e| {
            (
                e["experiment"].as_u64().unwrap(),
                e["hypothesis_id"].as_str().unwrap(),
                e["outcome"].as_str().unwrap(),
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

/// A YAML file of the state root (`experiment-log.yaml`, `exp-001-result.yaml`,
/// `judge-cache.yaml`) as JSON.
///
/// # Panics
/// When the file cannot be read or is not YAML.
pub fn read_yaml(path: &Path) -> Value {
    serde_norway::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The run `name`'s whole experiment log (`<home>/optimize/<name>/experiment-log.yaml`).
///
/// # Panics
/// When the log cannot be read.
pub fn experiment_log(home: &Home, name: &str) -> Value {
    read_yaml(
        &home
            .path()
            .join("optimize")
            .join(name)
            .join("experiment-log.yaml"),
    )
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

/// The project's harness (`sh measure.sh`, run in the clone's root) measured again on a fresh
/// clone of `branch` of `repo`: its JSON (the metrics under `metrics`), the number the loop
/// claims checked from outside it.
///
/// # Panics
/// When the clone fails or the harness prints no JSON.
pub fn measure_branch(repo: &Path, branch: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("git")
        .args(["clone", "-q", "-b", branch])
        .arg(repo)
        .arg(dir.path().join("c"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = std::process::Command::new("sh")
        .arg("measure.sh")
        .current_dir(dir.path().join("c"))
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).expect("harness JSON")
}
