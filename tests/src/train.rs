//! Helpers of train mode's end-to-end tests (`tests/tests/train.rs`, `train_evaluator.rs`):
//! session `s1` of the `planner` template started on two review items, `train continue` /
//! `train recover` with their exit codes, the human's feedback.yml, `train status`, the
//! candidate list, and `<home>/train.toml` (short stage heartbeats, optimizer backends wrapping
//! the distill optimizer).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::{Home, PLANNER_TEMPLATE, add_template, bin, path_arg, run_code, write};

/// The review items file: `fix-login` and `add-cache`.
pub const ITEMS: &str = "items:\n  - id: fix-login\n    title: Describe the login fix\n    input: |\n      -    check(password)\n      +    check_hashed(password)\n  - id: add-cache\n    title: Describe the cache\n    input: adds an LRU cache in front of the user lookup\n";

/// The session id every helper works on.
pub const SESSION: &str = "s1";

/// How long a wait for a status phase may take.
pub const WAIT: Duration = Duration::from_secs(60);

/// `train status --session s1 --detail` as JSON.
///
/// # Panics
/// When the command fails.
pub fn status(home: &Home) -> Value {
    home.json(&["train", "status", "--session", SESSION, "--detail"])
}

/// Polls [`status`] until its `status_phase` is `phase` (within [`WAIT`]); returns that status.
///
/// # Panics
/// When the phase is not reached in time (the message carries the home's logs).
pub fn wait_phase(home: &Home, phase: &str) -> Value {
    let mut last = Value::Null;
    home.wait(WAIT, &format!("status_phase {phase}"), || {
        last = status(home);
        (last["status_phase"] == phase).then(|| last.clone())
    })
}

/// The `train start` arguments of session `s1` on the `planner` template (repo `owner/repo`,
/// request "clearer commit messages", 3 options per item) reading `items`, `extra` after them.
///
/// # Panics
/// When `items` is not UTF-8 (temp paths are).
pub fn start_args<'a>(items: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "train",
        "start",
        "--template",
        "planner",
        "--repo",
        "owner/repo",
        "--request",
        "clearer commit messages",
        "--items-file",
        path_arg(items),
        "--yes",
        "--session",
        SESSION,
        "--options",
        "3",
    ];
    args.extend_from_slice(extra);
    args
}

/// Installs the `planner` template (repo `owner/repo`), writes [`ITEMS`] to `<home>/in/items.yml`
/// and starts session `s1` on them ([`start_args`]) with `extra` flags after the others; returns
/// the `train start --json` answer.
///
/// # Panics
/// When a command fails.
pub fn start_with(home: &Home, extra: &[&str]) -> Value {
    add_template(home, PLANNER_TEMPLATE, "owner/repo");
    let items = write(&home.path().join("in/items.yml"), ITEMS);
    home.json(&start_args(&items, extra))
}

/// [`start_with`] with the workspace repo `owner/workspace` (`workspace`) or without any.
pub fn start(home: &Home, workspace: bool) -> Value {
    start_with(
        home,
        if workspace {
            &["--workspace-repo", "owner/workspace"]
        } else {
            &[]
        },
    )
}

/// `train continue --session s1 EXTRA...`, asserted to exit `code`: (stdout, stderr).
///
/// # Panics
/// When the exit code differs (the message carries both streams and the home's logs).
pub fn cont(home: &Home, extra: &[&str], code: i32) -> (String, String) {
    let mut args = vec!["train", "continue", "--session", SESSION];
    args.extend_from_slice(extra);
    run_code(home, &args, code)
}

/// `train recover --session s1 --out-root OUT_ROOT`, asserted to exit `code`: (stdout, stderr).
///
/// # Panics
/// When the exit code differs.
pub fn recover(home: &Home, out_root: &str, code: i32) -> (String, String) {
    run_code(
        home,
        &[
            "train",
            "recover",
            "--session",
            SESSION,
            "--out-root",
            out_root,
        ],
        code,
    )
}

/// The optimizer's out root in a `--detail` status (`verbose.optimizer.out_root`).
///
/// # Panics
/// When the status has none.
pub fn out_root(status: &Value) -> String {
    status["verbose"]["optimizer"]["out_root"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The review packet directory of the current iteration.
///
/// # Panics
/// When no packet is published.
pub fn packet(home: &Home) -> PathBuf {
    PathBuf::from(
        status(home)["review_packet"]
            .as_str()
            .expect("review packet published"),
    )
}

/// A human fills feedback.yml: rankings plus trait notes and a required improvement (actionable),
/// or rankings only (`actionable = false`).
///
/// # Panics
/// When no packet is published or the file cannot be written.
pub fn fill_feedback(home: &Home, actionable: bool) {
    let dir = packet(home);
    let run = status(home)["iteration_id"].as_str().unwrap().to_owned();
    let extra = if actionable {
        "    useful_traits:\n      B: [lists each change as a bullet]\n    rejected_traits:\n      C: [too terse]\n    required_improvements: [name the user-visible effect first]\n"
    } else {
        ""
    };
    let text = format!(
        "run_id: {run}\nreviewer: alice\nitems:\n  - item_id: add-cache\n    ranking: \"b > a > c\"\n{extra}  - item_id: fix-login\n    ranking: \"a > c > b\"\n"
    );
    write(&dir.join("feedback.yml"), &text);
}

/// Session `s1` with a workspace, its options generated by one `train continue` (exit 0) and the
/// human's feedback filled in ([`fill_feedback`]): ready for the optimizer step.
///
/// # Panics
/// When a command fails.
pub fn start_to_feedback(home: &Home, actionable: bool) {
    start(home, true);
    cont(home, &[], 4);
    fill_feedback(home, actionable);
}

/// The `planner` template's candidate versions (`candidate list --json`).
pub fn candidates(home: &Home) -> Vec<Value> {
    home.json(&["candidate", "list", "--template", "planner"])
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Writes `<home>/train.toml`: short heartbeats (1 s, stale after 3 s) for option generation and
/// the optimizer, so stale leases show within seconds, then `backends` (TOML tables, or `""`).
pub fn train_config(home: &Home, backends: &str) {
    let text = format!(
        "[stages.option_generation]\nheartbeat_secs = 1\nstale_after_secs = 3\n\n[stages.optimizer]\nheartbeat_secs = 1\nstale_after_secs = 3\n\n{backends}"
    );
    write(&home.path().join("train.toml"), &text);
}

/// Writes `script`, a shell wrapper that runs this build's `skillforge optimizer distill` with its
/// arguments (exit 3 when that fails) and then `tail` (e.g. `kill -9 $$\n`), and configures it as
/// the optimizer backend `name` in `<home>/train.toml` ([`train_config`]).
pub fn distill_backend(home: &Home, name: &str, script: &Path, tail: &str) {
    let script = write(
        script,
        &format!(
            "#!/bin/sh\n\"{}\" optimizer distill \"$@\" || exit 3\n{tail}",
            bin().display()
        ),
    );
    train_config(
        home,
        &format!(
            "[backends.{name}]\ncommand = [\"sh\", \"{}\"]\n",
            path_arg(&script)
        ),
    );
}
