//! Workflow families at result ingestion (issue 11, item 1): a finished job's result is applied by
//! its own family's handler whichever control plane ingests it next — a waiting command (the
//! stage port's wait, e.g. `jobs submit --wait`) or `serve` — never acknowledged by a command that
//! does not know the job's workflow, and never by a command that waits for nothing.
//!
//! The data-loss scenario of the issue: a harvest hard-verifier leg finishes on a worker after
//! `harvest outcome` returned without waiting; the next control-plane command used to be
//! `train continue`, which ingested with the train handler only and recorded the leg's result as
//! applied without writing its row.

use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::Value;
use skillforge_tests::{Home, Reaped, signal, two_commit_repo, wait_exit};

const TEMPLATE: &str = "---\nid: coder\nname: Coder\ndescription: Implements changes\nkind: agent-template\nversion: 1\n\
capabilities: [implement]\nruntime_compatibility: [codex, claude]\ntags: [code]\ninputs: [task]\noutputs: [diff]\n---\n# Code\nDo it.\n";

fn write(path: &Path, text: &str) -> PathBuf {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, text).unwrap();
    path.to_path_buf()
}

fn feedback_events(home: &Home) -> u64 {
    home.json(&["harvest", "status"])["feedback_events"]
        .as_u64()
        .expect("feedback_events count")
}

/// `harvest outcome` (merged, empty gate) for PR `pr` without `--wait`; returns the hard-verifier
/// leg's job id.
fn merged_without_waiting(home: &Home, pr: u32, head: &str) -> String {
    let pr = pr.to_string();
    let report = home.json(&[
        "harvest",
        "outcome",
        "--repo",
        "acme/app",
        "--pr",
        &pr,
        "--outcome",
        "merged",
        "--ci",
        "none",
        "--head",
        head,
    ]);
    let legs = report["legs"].as_array().expect("legs");
    assert_eq!(legs.len(), 1, "one hard-verifier leg: {report}");
    assert_eq!(legs[0]["leg"], "hard_verifier");
    legs[0]["job_id"].as_str().unwrap().to_owned()
}

/// Runs a worker until job `id` succeeded, then stops it gracefully (SIGTERM: its presence lock
/// is released, so a later waiting command serves the queue itself at once).
fn run_leg_on_a_worker(home: &Home, id: &str) {
    let mut worker = Reaped(home.spawn_worker("fleet", &[]));
    home.wait_job(
        id,
        Duration::from_secs(60),
        "the hard-verifier leg to finish",
        |j| j["state"] == "succeeded",
    );
    signal(&worker.0, Signal::SIGTERM);
    wait_exit(&mut worker.0, Duration::from_secs(30));
}

fn applied_tokens(job: &Value) -> usize {
    job["applied"].as_array().map_or(0, Vec::len)
}

#[test]
fn a_harvest_legs_result_is_applied_whichever_command_ingests_it_next() {
    let (repo, _base, head) = two_commit_repo();
    let home = Home::embedded();
    let file = write(&home.path().join("in/coder.md"), TEMPLATE);
    let out = home.run(&[
        "template",
        "add",
        file.to_str().unwrap(),
        "--repo",
        "acme/templates",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    write(
        &home.path().join("config.toml"),
        "[skillopt]\nauto_trace_enabled = true\nhard_verifiers_enabled = true\nhard_verifier_commands = [\"test -f src/lib.rs\"]\n",
    );
    for pr in 1..=3 {
        let pr = pr.to_string();
        home.json(&[
            "harvest",
            "attribute",
            "--repo",
            "acme/app",
            "--pr",
            &pr,
            "--template",
            "coder@v1",
            "--resolved-commit",
            "c0ffee",
            "--checkout",
            repo.path().to_str().unwrap(),
        ]);
    }

    // 1. A command that waits for no job (`train continue` for a session that does not exist)
    //    applies nothing: ingestion belongs to the stage port's wait and to `serve`.
    let leg1 = merged_without_waiting(&home, 1, &head);
    run_leg_on_a_worker(&home, &leg1);
    assert_eq!(
        feedback_events(&home),
        1,
        "the floor row only: the leg's result is not ingested yet"
    );
    let out = home.run(&["train", "continue", "--session", "anything"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "unknown session: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        feedback_events(&home),
        1,
        "a command that waited for nothing ingested nothing"
    );

    // 2. A waiting command of another noun (`jobs submit --wait`) is the next control plane: its
    //    wait applies every pending result, the earlier leg's too.
    let leg = merged_without_waiting(&home, 2, &head);
    run_leg_on_a_worker(&home, &leg);
    assert_eq!(feedback_events(&home), 2);
    let done = home.json(&["jobs", "submit", "--wait", "--", "true"]);
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(
        feedback_events(&home),
        4,
        "both hard-verifier rows are written by `jobs submit --wait`"
    );
    assert_eq!(applied_tokens(&home.job(&leg1)), 1, "applied exactly once");
    assert_eq!(applied_tokens(&home.job(&leg)), 1, "applied exactly once");

    // 3. `serve` is the next control plane.
    let leg = merged_without_waiting(&home, 3, &head);
    run_leg_on_a_worker(&home, &leg);
    assert_eq!(feedback_events(&home), 5);
    let _serve = Reaped(home.spawn_serve());
    home.wait(
        Duration::from_secs(30),
        "serve to write the hard-verifier row",
        || (feedback_events(&home) == 6).then_some(()),
    );
    home.wait(
        Duration::from_secs(30),
        "serve to record the leg as applied",
        || (applied_tokens(&home.job(&leg)) == 1).then_some(()),
    );

    // Every ingestion wrote exactly one hard row per PR, beside its floor row.
    let export = home.path().join("out/auto-trace.json");
    home.json(&[
        "export",
        "--run",
        "auto-trace:coder@v1",
        "--output",
        export.to_str().unwrap(),
    ]);
    let package: Value = serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
    for pr in 1..=3 {
        let item = format!("hard#acme/app#{pr}");
        let rows: Vec<&Value> = package["feedback_events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["item_id"] == item.as_str())
            .collect();
        assert_eq!(rows.len(), 1, "{item}: {package:#}");
        assert_eq!(
            (rows[0]["reviewer"].as_str(), rows[0]["choice"].as_str()),
            (Some("gitmoot-verifier"), Some("a")),
            "{item}"
        );
    }
}
