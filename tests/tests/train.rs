//! Train mode end to end through the built binary (issue 5 items 1, 3, 6, 7; seed SkillOpt
//! "Complete train-mode path" steps 1–10; facts §3 states, status phases, locks; rules S-98,
//! S-99, S-100): a full iteration on the embedded queue and on a Redis fleet, SIGKILLed workers
//! during option generation and during the optimizer, `train recover`, no-candidate results,
//! a missing optimizer executable, and the optimizer's dry run.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use nix::sys::signal::Signal;
use serde_json::Value;
use skillforge_tests::eval::{BRIEF_ID, GOOD_SKILL, Setup, VERIFY_SHORT};
use skillforge_tests::train::{
    ITEMS, SESSION, WAIT, candidates, cont, distill_backend, fill_feedback, out_root, packet,
    recover, start, start_to_feedback, start_with, status, train_config, wait_phase,
};
use skillforge_tests::{
    Home, PLANNER_TEMPLATE, Reaped, RedisServer, add_template, bin, logged_out_claude, path_arg,
    run_code, signal, wait_exit, write,
};

const N_OPTIONS: usize = 3;

fn assert_options_once(st: &Value) {
    assert_eq!(st["progress"]["generated_options"], 2 * N_OPTIONS, "{st:#}");
    for item in st["verbose"]["items"].as_array().unwrap() {
        let labels: Vec<&str> = item["option_labels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap())
            .collect();
        assert_eq!(labels, ["a", "b", "c"], "{st:#}");
    }
}

/// A `skillforge worker` with extra environment, its log in the home dir.
fn spawn_worker_env(home: &Home, name: &str, env: &[(&str, &str)]) -> Child {
    let log = std::fs::File::create(home.path().join(format!("worker-{name}.log"))).unwrap();
    let mut cmd = home.cmd();
    cmd.args(["worker", "--name", name])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("spawn worker")
}

/// Starts session `s1` with options and feedback, then runs its optimizer through a backend
/// `wrap` that writes the candidate and then fails (exit 1, as an upload step would); returns
/// the `train continue` stderr.
fn optimize_through_a_failing_wrapper(home: &Home) -> String {
    distill_backend(
        home,
        "wrap",
        &home.path().join("wrap.sh"),
        "echo 'wrapper: upload failed' >&2\nexit 1\n",
    );
    start_to_feedback(home, true);
    cont(home, &["--backend", "wrap"], 1).1
}

/// Runs one iteration from `items_ready` to a pending candidate; returns the candidate version.
fn iterate_to_candidate(home: &Home) -> String {
    generate_options(home);
    optimize_to_candidate(home)
}

/// `items_ready` → `review_published`: options generated once, the human gate holds (exit 4:
/// waiting for a person, the `next:` line saying what to do).
fn generate_options(home: &Home) {
    let (out, _) = cont(home, &[], 4);
    assert!(
        out.contains("review published, waiting for feedback"),
        "{out}"
    );
    let st = status(home);
    assert_eq!(st["status_phase"], "review_published");
    assert_options_once(&st);
    // Issue 35 item 4: feedback.yml names its schema, written in the home, for editors.
    let dir = packet(home);
    let feedback = std::fs::read_to_string(dir.join("feedback.yml")).unwrap();
    let pointer = feedback
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("# yaml-language-server: $schema="))
        .unwrap_or_else(|| panic!("a schema pointer first:\n{feedback}"));
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(pointer)).unwrap()).unwrap();
    assert!(schema["properties"]["items"].is_object(), "{schema:#}");
    // Continue before the human filled the packet: nothing moves (the gate is the human's).
    let (out, _) = cont(home, &[], 4);
    assert!(out.contains("waiting for human feedback"), "{out}");
    assert!(
        out.contains("next: waiting for human feedback: fill"),
        "{out}"
    );
    assert_eq!(status(home)["current_phase"], "review_published");
}

/// The human fills the packet; `review_published` → a pending candidate (optimizer job).
fn optimize_to_candidate(home: &Home) -> String {
    fill_feedback(home, true);
    // At the default log level: the optimizer's argv and lock are internals, shown with -v.
    let done = home
        .cmd()
        .env("SKILLFORGE_LOG", "warn")
        .args(["train", "continue", "--session", SESSION])
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&done.stdout).into_owned(),
        String::from_utf8_lossy(&done.stderr).into_owned(),
    );
    assert_eq!(done.status.code(), Some(0), "{out}\n{err}");
    assert!(
        err.contains("optimizer preflight: backend distill"),
        "the preflight report comes first:\n{err}"
    );
    assert!(err.contains("attempt-001"), "{err}");
    // The feedback names traits for add-cache only: the item ranked without them is named.
    assert!(
        err.contains("note: fix-login ranks the options without useful_traits"),
        "{err}"
    );
    assert!(
        !err.contains("argv") && !err.contains("--training-package") && !err.contains("lock "),
        "issue 35 item 3: no argv or lock at the default level:\n{err}"
    );
    // On a fleet the worker fills its program and job dir in: said in words, not placeholders.
    assert!(
        !err.contains("@worker_exe@") && !err.contains("@job_dir@"),
        "{err}"
    );
    let st = status(home);
    assert_eq!(st["current_phase"], "candidate_created", "{out}\n{st:#}");
    assert_eq!(st["status_phase"], "optimizer_completed_candidate");
    assert_eq!(st["counts"]["ranked_feedback_events"], 2);
    st["candidate_version"].as_str().unwrap().to_owned()
}

/// The rest of an iteration: candidate review, S-99 refusal, promote, start-next.
fn review_promote_next(home: &Home, version: &str) {
    // S-99: no next iteration while the candidate is unresolved.
    let (_, err) = cont(home, &["--start-next"], 2);
    assert!(
        err.contains("--start-next refused") && !err.contains("S-99"),
        "{err}"
    );
    // The candidate review published: a person promotes or rejects (exit 4, saying how).
    let (out, _) = cont(home, &[], 4);
    assert!(
        out.contains("next: decide:") && out.contains("--promote"),
        "{out}"
    );
    let st = status(home);
    assert_eq!(st["current_phase"], "candidate_review_published");
    let review = std::fs::read_to_string(
        Path::new(st["review_packet"].as_str().unwrap())
            .parent()
            .unwrap()
            .join("candidate-review.md"),
    )
    .unwrap();
    assert!(
        review.contains(version) && review.contains("promotable | true"),
        "{review}"
    );
    // Issue 35 item 3: the evaluator's scores in words, not its JSON.
    let scores = review
        .lines()
        .find(|l| l.starts_with("| evaluator / test scores |"))
        .unwrap_or_else(|| panic!("a scores row:\n{review}"));
    assert!(
        !scores.contains('{') && !scores.contains('`') && scores.contains("held-out replay"),
        "{scores}"
    );
    // Continue without a decision stays at the gate.
    cont(home, &[], 4);
    assert_eq!(status(home)["current_phase"], "candidate_review_published");
    cont(home, &["--promote", version], 0);
    assert_eq!(status(home)["current_phase"], "candidate_promoted");
    let shown = home.json(&["template", "show", "planner"]);
    assert_eq!(
        (
            shown["version_id"].as_str(),
            shown["version_state"].as_str()
        ),
        (Some(version), Some("current")),
        "{shown:#}"
    );
    let (out, err) = cont(home, &["--start-next"], 0);
    let said = format!("{out}{err}");
    assert!(
        said.contains("previous iteration s1-i001: ") && !said.contains("candidate_promoted"),
        "the previous iteration's state in words:\n{said}"
    );
    let st = status(home);
    assert_eq!(st["current_phase"], "items_ready");
    assert_eq!(
        st["template_version"], version,
        "the next iteration reviews the promoted version"
    );
    assert_eq!(st["iteration_id"], "s1-i002");
}

#[test]
fn train_full_iteration_embedded_s99() {
    let home = Home::embedded();
    let started = start(&home, true);
    assert_eq!(started["state"], "items_ready");
    let version = iterate_to_candidate(&home);
    assert_eq!(version, "planner@v2");
    assert_eq!(candidates(&home).len(), 1);
    // Issue 35 item 4: without --template, every template's candidates.
    let every = home.json(&["candidate", "list"]);
    assert_eq!(every[0]["version_id"], version.as_str(), "{every:#}");
    review_promote_next(&home, &version);
}

/// Issue 35 item 4: a candidate rejected with `candidate reject` before its review was published:
/// `train status` suggests recording it and starting the next iteration (never publishing the
/// review of a rejected candidate), and one `continue` records it.
#[test]
fn a_candidate_rejected_outside_the_session_before_its_review_points_to_the_next_iteration() {
    let home = Home::embedded();
    start(&home, true);
    let version = iterate_to_candidate(&home);
    assert_eq!(status(&home)["current_phase"], "candidate_created");
    run_code(
        &home,
        &["candidate", "reject", &version, "--reason", "too terse"],
        0,
    );
    let st = status(&home);
    let next = st["next_action"].as_str().unwrap();
    assert!(
        next.contains("rejected outside this session")
            && next.contains("--start-next")
            && !next.contains("publish candidate review"),
        "{st:#}"
    );
    run_code(&home, &["train", "continue", "--session", SESSION], 0);
    assert_eq!(status(&home)["current_phase"], "candidate_rejected");
    run_code(
        &home,
        &["train", "continue", "--session", SESSION, "--start-next"],
        0,
    );
    assert_eq!(status(&home)["iteration_id"], "s1-i002");
}

/// A candidate promoted with `candidate promote` (outside the session): `train status` says so and
/// how to record it, `train continue` records it, and the next iteration starts (S-99: the
/// iteration is resolved).
#[test]
fn s99_a_candidate_promoted_outside_the_session_is_recorded_and_the_next_iteration_starts() {
    let home = Home::embedded();
    start(&home, true);
    let version = iterate_to_candidate(&home);
    cont(&home, &[], 4);
    assert_eq!(status(&home)["current_phase"], "candidate_review_published");
    run_code(
        &home,
        &["candidate", "promote", &version, "--reason", "looks right"],
        0,
    );
    let st = status(&home);
    let next = st["next_action"].as_str().unwrap();
    assert!(
        next.contains("promoted outside this session") && next.contains("train continue --session"),
        "{st:#}"
    );
    let (out, err) = cont(&home, &[], 0);
    assert!(
        format!("{out}{err}").contains("was promoted outside this session"),
        "{out}{err}"
    );
    let st = status(&home);
    assert_eq!(st["current_phase"], "candidate_promoted", "{st:#}");
    // The documented decision again is a no-op that says so; then the next iteration starts.
    let (out, err) = cont(&home, &["--promote", &version], 0);
    assert!(
        format!("{out}{err}").contains("already promoted"),
        "{out}{err}"
    );
    cont(&home, &["--start-next"], 0);
    assert_eq!(status(&home)["iteration_id"], "s1-i002");
}

#[test]
fn train_full_iteration_on_a_redis_fleet_with_two_workers() {
    let redis = RedisServer::start();
    let home = Home::redis(&redis.url());
    // w1 alone runs option generation; then w1 stops and w2 alone runs the optimizer, so each
    // worker's work is known and checked by the jobs' lease owners, not by log-file names.
    let mut w1 = Reaped(home.spawn_worker("w1", &[]));
    start(&home, true);
    generate_options(&home);
    signal(&w1.0, Signal::SIGTERM);
    assert!(
        wait_exit(&mut w1.0, WAIT).success(),
        "w1 stops gracefully:\n{}",
        home.logs()
    );
    let _w2 = Reaped(home.spawn_worker("w2", &[]));
    let version = optimize_to_candidate(&home);
    review_promote_next(&home, &version);
    let owners = train_job_owners(&home);
    let of_stage = |stage: &str| {
        owners
            .iter()
            .filter(|(s, _)| s == stage)
            .map(|(_, o)| o.as_str())
            .collect::<Vec<_>>()
    };
    let generation = of_stage("option_generation");
    assert_eq!(
        generation.len(),
        2,
        "one generation job per item: {owners:?}"
    );
    assert!(
        generation.iter().all(|o| o.starts_with("w1-")),
        "generation ran on w1: {owners:?}"
    );
    let optimizer = of_stage("optimizer");
    assert!(
        !optimizer.is_empty() && optimizer.iter().all(|o| o.starts_with("w2-")),
        "the optimizer ran on w2: {owners:?}"
    );
}

/// (stage, worker) of every attempt of every `train` job, from `jobs list` / `jobs show`.
fn train_job_owners(home: &Home) -> Vec<(String, String)> {
    let jobs = home.json(&["jobs", "list"]);
    let mut owners = Vec::new();
    for job in jobs
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["workflow"] == "train")
    {
        let shown = home.job(job["id"].as_str().unwrap());
        let stage = shown["stage"].as_str().unwrap().to_owned();
        let attempts = shown["history"].as_array().unwrap();
        assert!(
            !attempts.is_empty(),
            "a finished train job records who ran it: {shown:#}"
        );
        owners.extend(
            attempts
                .iter()
                .map(|a| (stage.clone(), a["worker"].as_str().unwrap().to_owned())),
        );
    }
    owners
}

#[test]
fn s98_without_workspace_repo_the_session_stays_at_request_confirmed() {
    let home = Home::embedded();
    let started = start(&home, false);
    assert_eq!(started["state"], "request_confirmed");
    let (_, err) = cont(&home, &[], 2);
    assert!(
        err.contains("--workspace-repo") && !err.contains("S-98"),
        "what to do, without the rule's id: {err}"
    );
    let (out, _) = run_code(&home, &["train", "status", "--session", SESSION], 0);
    assert!(
        out.contains(
            "next: start a new session with --workspace-repo (a local checkout such as `.`"
        ) && !out.contains("S-98"),
        "{out}"
    );
    let st = status(&home);
    assert_eq!(st["current_phase"], "request_confirmed");
    assert_eq!(st["status_phase"], "request_confirmed");
    assert_eq!(st["progress"]["generated_options"], 0);
    assert_eq!(
        st["verbose"]["jobs"]["total"], 0,
        "no generation job was enqueued"
    );
}

#[test]
fn start_refuses_bad_input_naming_the_flag_and_writes_nothing() {
    let home = Home::embedded();
    add_template(&home, PLANNER_TEMPLATE, "owner/repo");
    let items = write(&home.path().join("in/items.yml"), ITEMS);
    let base = [
        "train",
        "start",
        "--template",
        "planner",
        "--repo",
        "owner/repo",
        "--items-file",
        path_arg(&items),
        "--yes",
        "--session",
        SESSION,
    ];
    let table: [(&[&str], &str); 4] = [
        (
            &["--request", "x", "--workspace-repo", "/nonexistent"],
            "--workspace-repo `/nonexistent`: no such directory",
        ),
        (
            &["--request", "x", "--workspace-repo", "./nope"],
            "--workspace-repo `./nope`: no such directory",
        ),
        (
            &[
                "--request",
                "x",
                "--workspace-repo",
                "owner/workspace",
                "--runtime",
                "bogus",
            ],
            "--runtime `bogus`: unknown agent runtime `bogus`",
        ),
        (
            &["--request", " ", "--workspace-repo", "owner/workspace"],
            "--request must not be empty",
        ),
    ];
    for (extra, want) in table {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        let (_, err) = run_code(&home, &args, 2);
        assert!(err.contains(want), "{extra:?}: {err}");
        run_code(&home, &["train", "status", "--session", SESSION], 2);
    }
    // An existing local checkout is a workspace.
    let mut args = base.to_vec();
    args.extend(["--request", "x", "--workspace-repo", path_arg(home.path())]);
    assert_eq!(home.json(&args)["state"], "items_ready");
}

#[test]
fn s100_no_candidate_is_recorded_and_recover_does_not_duplicate() {
    let home = Home::embedded();
    start_to_feedback(&home, false);
    // Rankings alone are refused, naming the items and the way on, and nothing is written: the
    // review round is not spent on a result that cannot have a candidate.
    let before = status(&home);
    let (_, refused) = cont(&home, &[], 2);
    assert!(
        refused.contains("no item names useful_traits")
            && refused.contains("add-cache, fix-login")
            && refused.contains("Nothing was written")
            && refused.contains("--rankings-only"),
        "{refused}"
    );
    let after = status(&home);
    assert_eq!(after["status_phase"], before["status_phase"], "{after:#}");
    assert_eq!(after["progress"], before["progress"], "{after:#}");
    let synced = home.run(&["train", "continue", "--session", SESSION, "--rankings-only"]);
    let said = String::from_utf8_lossy(&synced.stderr);
    assert_eq!(synced.status.code(), Some(0), "{said}");
    // Said when the feedback is synced, before the optimizer runs on it.
    assert!(
        said.contains("no item of this feedback names useful_traits"),
        "{said}"
    );
    let st = status(&home);
    assert_eq!(
        st["status_phase"], "optimizer_completed_no_candidate",
        "{st:#}"
    );
    assert_eq!(
        st["no_candidate_reason"], "no_actionable_feedback",
        "{st:#}"
    );
    // Rankings alone teach nothing: status names the fields to fill and the file.
    let feedback_file = format!("{}/feedback.yml", packet(&home).display());
    let hint = st["no_candidate_details"]["no_candidate_hint"]
        .as_str()
        .expect("a hint");
    assert!(
        hint.contains("useful_traits, rejected_traits or required_improvements")
            && hint.contains(&feedback_file),
        "{hint}"
    );
    let next = st["next_action"].as_str().unwrap();
    assert!(
        next.contains("useful_traits")
            && next.contains(&feedback_file)
            && next.contains("--start-next"),
        "{next}"
    );
    assert!(candidates(&home).is_empty(), "no pending version");
    // In words, with one way on: the next iteration (not the optimizer's re-import hint).
    let (text, _) = run_code(&home, &["train", "status", "--session", SESSION], 0);
    assert!(
        text.contains("not what to change")
            && text.contains("--start-next")
            && !text.contains("import it again"),
        "{text}"
    );
    let out_root = out_root(&st);
    let (out, err) = recover(&home, &out_root, 0);
    assert!(
        err.contains("already recorded") && err.contains("no candidate"),
        "{out}\n{err}"
    );
    assert!(candidates(&home).is_empty(), "recover wrote no version");
    assert_eq!(
        status(&home)["status_phase"],
        "optimizer_completed_no_candidate"
    );
    // S-99: a no-candidate iteration is resolved, so the next one may start.
    cont(&home, &["--start-next"], 0);
    assert_eq!(status(&home)["iteration_id"], "s1-i002");
}

#[test]
fn s100_the_optimizer_dry_run_is_imported_as_no_candidate() {
    let home = Home::embedded();
    start_to_feedback(&home, true);
    let (_, err) = cont(&home, &["--backend", "distill-dry-run"], 0);
    assert!(err.contains("--dry-run"), "{err}");
    let st = status(&home);
    assert_eq!(
        st["status_phase"], "optimizer_completed_no_candidate",
        "{st:#}"
    );
    assert!(
        st["no_candidate_reason"]
            .as_str()
            .unwrap()
            .contains("unchanged"),
        "{st:#}"
    );
    assert!(candidates(&home).is_empty());
}

#[test]
fn a_missing_optimizer_executable_is_blocked_config() {
    let home = Home::embedded();
    train_config(
        &home,
        "[backends.missing]\ncommand = [\"/nonexistent/gitmoot-skillopt\", \"optimize\"]\n",
    );
    start_to_feedback(&home, true);
    let (_, err) = cont(&home, &["--backend", "missing"], 3);
    assert!(
        err.contains("the optimizer cannot run (blocked on configuration)")
            && err.contains("/nonexistent/gitmoot-skillopt"),
        "{err}"
    );
    let st = status(&home);
    assert_eq!(st["status_phase"], "blocked_config", "{st:#}");
    assert_eq!(st["blocked_step"], "optimizer");
    // Fixing the backend (the default one) unblocks the same iteration.
    cont(&home, &["--backend", "distill"], 0);
    assert_eq!(status(&home)["current_phase"], "candidate_created");
    assert_eq!(candidates(&home).len(), 1);
}

#[test]
fn train_recover_imports_what_a_failed_wrapper_left_without_duplicates() {
    let home = Home::embedded();
    let err = optimize_through_a_failing_wrapper(&home);
    assert!(
        err.contains("recovery_available") && err.contains("train recover"),
        "{err}"
    );
    let st = status(&home);
    assert_eq!(st["status_phase"], "recovery_available", "{st:#}");
    assert_eq!(st["recovery_available"], true);
    assert!(
        candidates(&home).is_empty(),
        "nothing imported before recover"
    );
    let out_root = out_root(&st);
    recover(&home, &out_root, 0);
    let st = status(&home);
    assert_eq!(st["current_phase"], "candidate_created", "{st:#}");
    let version = st["candidate_version"].as_str().unwrap().to_owned();
    let (_, err) = recover(&home, &out_root, 0);
    assert!(
        err.contains("already recorded") && err.contains(&version),
        "{err}"
    );
    assert_eq!(
        candidates(&home).len(),
        1,
        "a second recover imports nothing new"
    );
}

#[test]
fn sigkill_during_option_generation_goes_stale_and_recovers_without_duplicates() {
    sigkill_during_option_generation(Home::embedded(), None);
}

// Issue 13 item 10: the same failure on a Redis fleet: the dead worker's leases go stale, a
// second worker's reaper re-queues them and it runs them; each option is applied once.
#[test]
fn sigkill_during_option_generation_on_a_redis_fleet_recovers_without_duplicates() {
    let redis = RedisServer::start();
    let home = Home::redis(&redis.url());
    sigkill_during_option_generation(home, Some(&redis));
}

/// `fleet`: on Redis, nobody runs jobs for `train continue` (no in-process worker): a second
/// worker is started after the first died.
fn sigkill_during_option_generation(home: Home, fleet: Option<&RedisServer>) {
    train_config(&home, "");
    start(&home, true);
    let mut worker = Reaped(spawn_worker_env(
        &home,
        "slow",
        &[("SKILLFORGE_SCRIPTED_DELAY_MS", "20000")],
    ));
    cont(&home, &["--no-wait"], 4);
    let st = wait_phase(&home, "generating_options");
    assert_eq!(st["current_phase"], "items_ready");
    let locks = st["verbose"]["active_locks"].as_array().unwrap();
    assert!(
        !locks.is_empty() && locks.iter().all(|l| l["owner_pid"] == worker.0.id()),
        "{st:#}"
    );
    // README: `train status --json` shows the locks with owner and heartbeat age, without --detail.
    let plain = home.json(&["train", "status", "--session", SESSION]);
    let top = plain["active_locks"]
        .as_array()
        .expect("active_locks at the top level");
    assert_eq!(top.len(), locks.len(), "{plain:#}");
    assert!(
        top.iter()
            .all(|l| l["owner_pid"] == worker.0.id() && l["heartbeat_age_ms"].is_i64()),
        "{plain:#}"
    );
    signal(&worker.0, Signal::SIGKILL);
    let _ = worker.0.wait();
    wait_phase(&home, "generating_options_heartbeat_stale");
    let st = wait_phase(&home, "blocked_stale_lock");
    assert_eq!(st["blocked_step"], "option_generation");
    let _second = fleet.map(|_| Reaped(home.spawn_worker("w2", &[])));
    // The next continue (embedded: its in-process worker's reaper; Redis: w2's) reaps the stale
    // leases, re-runs the jobs and applies each result once.
    cont(&home, &[], 4);
    let st = status(&home);
    assert_eq!(st["current_phase"], "review_published", "{st:#}");
    assert_options_once(&st);
    assert_eq!(
        st["verbose"]["jobs"]["total"], 2,
        "the idempotency key kept one job per item: {st:#}"
    );
    cont(&home, &[], 4);
    assert_options_once(&status(&home));
    if fleet.is_some() {
        let owners = train_job_owners(&home);
        assert!(
            owners.iter().any(|(_, o)| o.starts_with("slow-"))
                && owners.iter().any(|(_, o)| o.starts_with("w2-")),
            "{owners:?}"
        );
    }
}

#[test]
fn sigkill_during_the_optimizer_goes_stale_then_recovery_available_and_recovers_once() {
    sigkill_during_the_optimizer(Home::embedded(), None, true);
}

// Issue 32 item 11: with no `serve` running, the stale optimizer job is recovered by the next
// continue alone: its one-shot reap (confirmed on its own monotonic clock, so a clock step of
// the continue's process cannot reap live work) parks the job, and the continue starts a fresh
// attempt and imports once. (Left to the wait's in-process reaper instead, the job would end
// the continue as "went stale" and only the one after would recover it.)
#[test]
fn a_stale_optimizer_is_recovered_by_train_continue_without_serve() {
    sigkill_during_the_optimizer(Home::embedded(), None, false);
}

// Issue 13 item 10: a stale optimizer on a Redis fleet: `serve` parks it with recovery
// available, `train recover` finds nothing to import (it died before writing), the next
// continue runs a fresh attempt on the second worker and imports once; a second recover adds
// nothing.
#[test]
fn a_stale_optimizer_on_a_redis_fleet_is_recovery_available_and_recovers_once() {
    let redis = RedisServer::start();
    let home = Home::redis(&redis.url());
    sigkill_during_the_optimizer(home, Some(&redis), true);
}

// Issue 32 item 11: `train continue`'s one-shot reap in a process whose clock is 60 s ahead
// (under `faketime +60s`, its monotonic clock real) sees the running optimizer's lease past its
// deadline, but its worker keeps heartbeating: the lease is not reaped (the job keeps running
// under token 1, not parked as stale), the continue says the optimizer is running.
#[test]
fn a_train_continue_whose_clock_is_ahead_does_not_reap_the_running_optimizer() {
    let home = Home::embedded();
    let (script, _pidfile) = slow_optimizer(&home);
    train_config(
        &home,
        &format!(
            "[backends.slow]\ncommand = [\"sh\", \"{}\"]\n",
            path_arg(&script)
        ),
    );
    start_to_feedback(&home, true);
    let _worker = Reaped(home.spawn_worker("w1", &[]));
    cont(&home, &["--backend", "slow", "--no-wait"], 4);
    wait_phase(&home, "optimizer_running");
    let job = home
        .json(&["jobs", "list"])
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["stage"] == "optimizer")
        .cloned()
        .expect("the optimizer job");
    let id = job["id"].as_str().unwrap().to_owned();
    let mut cmd = home.cmd();
    cmd.args(["train", "continue", "--session", SESSION, "--no-wait"]);
    let log = home.path().join("continue-ahead.txt");
    let mut ahead = Reaped(
        std::process::Command::new(cmd.get_program())
            .args(cmd.get_args())
            // libfaketime preloaded into the process itself: the `faketime` program would
            // run it as a child, left running when the wrapper is killed.
            .env("LD_PRELOAD", skillforge_tests::faketime_lib())
            .env("FAKETIME", "+60s")
            .envs(
                cmd.get_envs()
                    .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))),
            )
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start a process under libfaketime"),
    );
    wait_exit(&mut ahead.0, WAIT);
    let said = std::fs::read_to_string(&log).unwrap();
    let job = home.job(&id);
    assert_eq!(
        (job["state"].as_str(), job["fencing_token"].as_u64()),
        (Some("running"), Some(1)),
        "{job:#}\n{said}"
    );
    assert!(!said.contains("stale lease reaped"), "{said}");
}

/// The `slow` optimizer backend of the stale-optimizer tests: its first run writes its pid to
/// the returned pid file and sleeps 30 s; later runs are the real distiller.
fn slow_optimizer(home: &Home) -> (PathBuf, PathBuf) {
    let mark = write(&home.path().join("slow.mark"), "");
    let pidfile = home.path().join("slow.pid");
    let script = write(
        &home.path().join("slow.sh"),
        &format!(
            "#!/bin/sh\nif [ -e \"{mark}\" ]; then rm -f \"{mark}\"; echo $$ > \"{pid}\"; sleep 30; fi\nexec \"{bin}\" optimizer distill \"$@\"\n",
            mark = path_arg(&mark),
            pid = path_arg(&pidfile),
            bin = bin().display()
        ),
    );
    (script, pidfile)
}

/// `serve_parks`: a `serve` parks the stale job before the next continue; else the continue
/// alone finds it stale.
fn sigkill_during_the_optimizer(home: Home, fleet: Option<&RedisServer>, serve_parks: bool) {
    let (script, pidfile) = slow_optimizer(&home);
    train_config(
        &home,
        &format!(
            "[backends.slow]\ncommand = [\"sh\", \"{}\"]\n",
            path_arg(&script)
        ),
    );
    start(&home, true);
    let generator = fleet.map(|_| Reaped(home.spawn_worker("gen", &[])));
    cont(&home, &[], 4);
    drop(generator);
    fill_feedback(&home, true);
    let mut worker = Reaped(home.spawn_worker("w1", &[]));
    cont(&home, &["--backend", "slow", "--no-wait"], 4);
    let st = wait_phase(&home, "optimizer_running");
    let lock = st["verbose"]["active_locks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["key"] == "skillopt-train:s1")
        .cloned();
    assert!(
        lock.is_some_and(|l| l["owner_pid"] == worker.0.id()),
        "{st:#}"
    );
    let pid: i32 = home.wait(WAIT, "the backend to start", || {
        std::fs::read_to_string(&pidfile).ok()?.trim().parse().ok()
    });
    // The machine dies: the worker and the optimizer's process group.
    signal(&worker.0, Signal::SIGKILL);
    let _ = worker.0.wait();
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(-pid), Signal::SIGKILL);
    wait_phase(&home, "optimizer_heartbeat_stale");
    let st = wait_phase(&home, "blocked_stale_lock");
    assert_eq!(st["blocked_step"], "optimizer");
    let out_root = if serve_parks {
        // A control plane's reaper parks the non-idempotent job: recovery available.
        let serve = Reaped(home.spawn_serve());
        let st = wait_phase(&home, "recovery_available");
        assert_eq!(st["recovery_available"], true);
        drop(serve);
        st["verbose"]["optimizer"]["out_root"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    } else {
        String::new()
    };
    if fleet.is_some() {
        // Nothing was written by the killed attempt: recover imports nothing.
        let out = home.run(&[
            "train",
            "recover",
            "--session",
            SESSION,
            "--out-root",
            &out_root,
        ]);
        assert!(
            candidates(&home).is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _second = fleet.map(|_| Reaped(home.spawn_worker("w2", &[])));
    // The next continue starts a fresh attempt (the first left no candidate) and imports once.
    cont(&home, &[], 0);
    let st = status(&home);
    assert_eq!(st["current_phase"], "candidate_created", "{st:#}");
    assert_eq!(st["verbose"]["optimizer"]["attempt"], 2);
    assert_eq!(candidates(&home).len(), 1);
    cont(&home, &[], 4);
    assert_eq!(candidates(&home).len(), 1, "no duplicate candidate version");
    if fleet.is_some() {
        let version = status(&home)["candidate_version"]
            .as_str()
            .unwrap()
            .to_owned();
        let (_, err) = recover(&home, &out_root, 0);
        assert!(
            err.contains("already recorded") && err.contains(&version),
            "{err}"
        );
        assert_eq!(
            candidates(&home).len(),
            1,
            "a recover after the import adds nothing"
        );
    }
}

// Issue 35 item 7 (a new user's finding): `train start --runtime claude` on a machine where Claude
// Code has no credential records the session (a worker elsewhere may have one) and says at once
// that option generation cannot run here, and what to do, instead of failing later at `continue`.
#[test]
fn train_start_on_a_runtime_without_credentials_warns_at_once() {
    let home = Home::embedded();
    add_template(&home, PLANNER_TEMPLATE, "owner/repo");
    let items = write(&home.path().join("in/items.yml"), ITEMS);
    let mut cmd = home.cmd();
    let out = logged_out_claude(&mut cmd, &home.path().join("user-home"))
        .args(skillforge_tests::train::start_args(
            &items,
            &["--workspace-repo", "owner/workspace", "--runtime", "claude"],
        ))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("warning: option generation cannot run on this machine: runtime `claude`")
            && stderr.contains("CLAUDE_CODE_OAUTH_TOKEN")
            && stderr.contains("--runtime scripted"),
        "{stderr}"
    );
    assert_eq!(status(&home)["status_phase"], "items_ready");
}

/// Option generation with `--runtime claude` when Claude Code is installed but not logged in (the
/// real CLI, installed by scripts/test): the stage fails once (no retries), `train continue` exits
/// 3 naming the runtime, the agent's message and the login, and `train status` shows
/// `blocked_config` at `option_generation` instead of `items_ready`.
/// On the embedded queue, whose jobs run on this machine, the same runtime is refused before
/// anything is queued (exit 3), naming the credential it lacks; the session stays where it was.
#[test]
fn a_not_logged_in_claude_is_refused_before_option_generation_is_queued() {
    let home = Home::embedded();
    start_with(
        &home,
        &["--workspace-repo", "owner/workspace", "--runtime", "claude"],
    );
    let mut cmd = home.cmd();
    let out = logged_out_claude(&mut cmd, &home.path().join("user-home"))
        .args(["train", "continue", "--session", SESSION])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains(
            "option generation cannot run on this machine, nothing was queued: runtime `claude`"
        ) && stderr.contains("CLAUDE_CODE_OAUTH_TOKEN")
            && stderr.contains("--runtime scripted"),
        "{stderr}"
    );
    assert_eq!(status(&home)["status_phase"], "items_ready");
    assert_eq!(home.json(&["jobs", "list"]), Value::Array(vec![]));
}

/// On a fleet (a Redis queue) the runtime may run on another machine's worker: `train continue`
/// warns and queues; a worker where Claude Code is not logged in fails the stage once (no
/// retries), `train continue` exits 3 naming the runtime, the agent's message and the login, and
/// `train status` shows `blocked_config` at `option_generation` instead of `items_ready`.
#[test]
fn a_not_logged_in_claude_blocks_option_generation_once_with_exit_3() {
    let redis = RedisServer::start();
    let home = Home::redis(&redis.url());
    start_with(
        &home,
        &["--workspace-repo", "owner/workspace", "--runtime", "claude"],
    );
    // Claude Code's own state dir, empty: logged out whatever the machine's user has.
    let user = home.path().join("user-home");
    let quiet = [
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ("DISABLE_TELEMETRY", "1"),
    ];
    let mut worker = home.cmd();
    logged_out_claude(&mut worker, &user)
        .args(["worker", "--name", "w-logged-out"])
        .envs(quiet)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(home.path().join("worker.log")).unwrap());
    let _worker = Reaped(worker.spawn().unwrap());
    let mut cmd = home.cmd();
    let out = logged_out_claude(&mut cmd, &user)
        .envs(quiet)
        .args(["train", "continue", "--session", SESSION])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(3),
        "an environment error:\n{stderr}\n{}",
        home.logs()
    );
    assert!(
        stderr.contains("warning: option generation cannot run on this machine"),
        "{stderr}"
    );
    assert!(
        stderr.contains("option generation cannot run (blocked on configuration)")
            && stderr.contains("agent runtime `claude` is not authenticated")
            && stderr.contains("--runtime scripted --session NEW"),
        "{stderr}"
    );
    assert!(
        stderr.contains("Not logged in") && stderr.contains("ANTHROPIC_API_KEY"),
        "the agent's message and what to do:\n{stderr}"
    );
    let st = status(&home);
    assert_eq!(
        (st["status_phase"].as_str(), st["blocked_step"].as_str()),
        (Some("blocked_config"), Some("option_generation")),
        "{st:#}"
    );
    assert!(
        st["next_action"].as_str().unwrap().contains("/login"),
        "{st:#}"
    );
    let jobs = home.json(&["jobs", "list"]);
    let generation: Vec<&Value> = jobs
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["stage"] == "option_generation")
        .collect();
    assert_eq!(generation.len(), 2, "{jobs:#}");
    for job in generation {
        assert_eq!(
            (job["state"].as_str(), job["attempts"].as_u64()),
            (Some("failed"), Some(1)),
            "one attempt, not retried: {job:#}"
        );
    }
}

/// Waits until the isolated worker `name` holds its presence lock, and proves that it cannot
/// see the control plane's home: a job testing for the domain store's file fails there.
fn isolated_worker_ready(home: &Home, name: &str) {
    home.wait(WAIT, "the isolated worker's presence lock", || {
        let locks = home.json(&["locks"]);
        locks
            .as_array()?
            .iter()
            .any(|l| {
                l["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with(&format!("worker:{name}-")))
            })
            .then_some(())
    });
    let db = home.path().join("skillforge.db");
    assert!(db.is_file(), "the control plane has its store");
    let id = home.submit(&["--attempts", "1"], &["test", "-e", path_arg(&db)]);
    let job = home.wait_job(&id, WAIT, "the visibility probe", |j| {
        j["state"] == "failed" || j["state"] == "succeeded" || j["state"] == "dead"
    });
    assert_ne!(
        job["state"], "succeeded",
        "the isolated worker must not see the control plane's home: {job:#}"
    );
}

/// Starts session `s1` (with a workspace) and the isolated worker `vm` (ready, proven blind to
/// the home), then generates the options on it ([`generate_options`]); returns the worker.
fn start_on_an_isolated_worker(home: &Home) -> Reaped {
    start(home, true);
    let vm = Reaped(skillforge_tests::isolated::spawn_isolated_worker(
        home,
        "vm",
        &[],
    ));
    isolated_worker_ready(home, "vm");
    generate_options(home);
    vm
}

// Issue 20: a worker that shares nothing with the control plane but the queue URL runs every
// stage of a train iteration (agent option generation, the distill optimizer with worker-local
// paths for all four flags, its attempt dir uploaded back and imported).
#[test]
fn a_worker_that_cannot_see_the_home_runs_a_full_train_iteration_with_distill() {
    let redis = RedisServer::start();
    let home = Home::redis(&redis.url());
    let _vm = start_on_an_isolated_worker(&home);
    let version = optimize_to_candidate(&home);
    let st = status(&home);
    let argv: Vec<String> = st["verbose"]["optimizer"]["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    let home_text = home.path().display().to_string();
    for flag in [
        "--training-package",
        "--artifact-root",
        "--out-root",
        "--candidate-output",
    ] {
        let i = argv
            .iter()
            .position(|a| a == flag)
            .unwrap_or_else(|| panic!("{flag} in {argv:?}"));
        assert!(
            argv[i + 1].starts_with("@job_dir@/") && !argv[i + 1].contains(&home_text),
            "{flag} is a worker-local path: {argv:?}"
        );
    }
    let attempt = PathBuf::from(st["verbose"]["optimizer"]["attempt_dir"].as_str().unwrap());
    assert!(
        attempt.starts_with(home.path()) && attempt.join("candidate.json").is_file(),
        "the attempt dir was uploaded back: {st:#}"
    );
    review_promote_next(&home, &version);
    let owners = train_job_owners(&home);
    assert!(
        owners.iter().any(|(s, _)| s == "optimizer")
            && owners.iter().all(|(_, o)| o.starts_with("vm-")),
        "{owners:?}"
    );
}

// Issue 20: the optimizer SIGKILLed on the isolated worker after writing its candidate: the
// attempt dir it left is uploaded, and `train recover` imports it from the transfer area even
// when the control plane's copy is gone.
#[test]
fn train_recover_reads_the_outputs_a_sigkilled_optimizer_uploaded_from_another_machine() {
    let redis = RedisServer::start();
    let home = Home::redis(&redis.url());
    // The backend's script lives outside the home, as a build machine's installed tool would.
    let tools = tempfile::tempdir().unwrap();
    distill_backend(
        &home,
        "killed",
        &tools.path().join("killed.sh"),
        "kill -9 $$\n",
    );
    let _vm = start_on_an_isolated_worker(&home);
    fill_feedback(&home, true);
    let (_, err) = cont(&home, &["--backend", "killed"], 1);
    assert!(
        err.contains("killed")
            && err.contains("recovery_available")
            && err.contains("train recover"),
        "{err}"
    );
    let st = status(&home);
    assert_eq!(st["status_phase"], "recovery_available", "{st:#}");
    assert!(
        candidates(&home).is_empty(),
        "nothing imported before recover"
    );
    let out_root = out_root(&st);
    std::fs::remove_dir_all(&out_root).unwrap();
    recover(&home, &out_root, 0);
    let st = status(&home);
    assert_eq!(st["current_phase"], "candidate_created", "{st:#}");
    assert!(
        Path::new(st["verbose"]["optimizer"]["attempt_dir"].as_str().unwrap())
            .join("candidate.json")
            .is_file()
    );
    assert_eq!(candidates(&home).len(), 1);
    recover(&home, &out_root, 0);
    assert_eq!(
        candidates(&home).len(),
        1,
        "a second recover imports nothing new"
    );
}

/// Starts `skillforge ARGS` for `home` without waiting (stdout/stderr piped).
fn spawn_cmd(home: &Home, args: &[&str]) -> Child {
    home.cmd()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn skillforge")
}

/// Waits for both and returns their (exit code, stderr).
fn both(a: Child, b: Child) -> [(Option<i32>, String); 2] {
    [a, b].map(|c| {
        let out = c.wait_with_output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    })
}

/// The session's optimizer jobs.
fn optimizer_jobs(home: &Home) -> Vec<Value> {
    let jobs = home.json(&["jobs", "list"]);
    jobs.as_array()
        .unwrap()
        .iter()
        .filter(|j| j["workflow"] == "train" && j["stage"] == "optimizer")
        .cloned()
        .collect()
}

// Issue 13 item 12: two `train continue` at once on one session at the optimizer step: one
// optimizer job runs and one candidate is imported; neither command fails for the other's sake
// beyond a clear refusal.
#[test]
fn two_train_continue_at_once_run_one_optimizer_and_import_one_candidate() {
    let home = Home::embedded();
    start_to_feedback(&home, true);
    let args = ["train", "continue", "--session", SESSION];
    let results = both(spawn_cmd(&home, &args), spawn_cmd(&home, &args));
    for (code, err) in &results {
        assert!(matches!(code, Some(0 | 2 | 3 | 4)), "exit {code:?}: {err}");
    }
    assert!(results.iter().any(|(c, _)| *c == Some(0)), "{results:?}");
    let st = status(&home);
    assert_eq!(
        st["current_phase"], "candidate_created",
        "{results:?}\n{st:#}"
    );
    assert_eq!(
        optimizer_jobs(&home).len(),
        1,
        "one optimizer job: {results:?}"
    );
    assert_eq!(candidates(&home).len(), 1, "one candidate: {results:?}");
    cont(&home, &[], 4);
    assert_eq!(candidates(&home).len(), 1);
}

// Issue 13 item 12: `train continue` and `train recover` at once on a session whose optimizer
// wrapper failed after writing its candidate: the candidate is imported once.
#[test]
fn train_continue_and_recover_at_once_import_one_candidate() {
    let home = Home::embedded();
    optimize_through_a_failing_wrapper(&home);
    let st = status(&home);
    assert_eq!(st["status_phase"], "recovery_available", "{st:#}");
    let out_root = out_root(&st);
    let results = both(
        spawn_cmd(
            &home,
            &[
                "train",
                "continue",
                "--session",
                SESSION,
                "--backend",
                "wrap",
            ],
        ),
        spawn_cmd(
            &home,
            &[
                "train",
                "recover",
                "--session",
                SESSION,
                "--out-root",
                &out_root,
            ],
        ),
    );
    assert_eq!(candidates(&home).len(), 1, "one candidate: {results:?}");
    let st = status(&home);
    assert!(st["candidate_version"].is_string(), "{results:?}\n{st:#}");
    recover(&home, &out_root, 0);
    assert_eq!(candidates(&home).len(), 1);
}

/// Adds the skill dir `skill` as a template and starts session `s1` on it (repo and workspace
/// `owner/repo`) with [`ITEMS`].
fn start_on_skill(home: &Home, skill: &Path) {
    let added = home.run(&["template", "add", path_arg(skill)]);
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let items = write(&home.path().join("in/items.yml"), ITEMS);
    let name = skill.file_name().unwrap().to_str().unwrap();
    let started = home.run(&[
        "train",
        "start",
        "--template",
        name,
        "--repo",
        "owner/repo",
        "--workspace-repo",
        "owner/repo",
        "--request",
        "short",
        "--items-file",
        path_arg(&items),
        "--yes",
        "--session",
        SESSION,
    ]);
    assert!(
        started.status.success(),
        "{}",
        String::from_utf8_lossy(&started.stderr)
    );
}

// One skill for both loops without a model (issue 35 item 1: one representation): the eval loop's
// quickstart skill scripts its arms' answer with `scripted: reply`, and the same SKILL.md, added
// as a template, trains on the scripted runtime: a `reply` line answers the arms, never option
// generation, so the session reaches its review packet (a new user had to keep two copies of the
// skill, one without the line, and saw option generation fail on the one they had forged).
#[test]
fn the_forged_quickstart_skill_trains_on_scripted_as_the_same_skill() {
    let setup = Setup::new();
    let skill = setup.skill("tldr", GOOD_SKILL);
    let brief = setup.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let (code, report, stderr) = setup.forge(&brief, &skill, &[]);
    assert_eq!(code, 0, "{stderr}\n{report:#}");
    assert_eq!(report["gate"]["decision"], "adopt", "{report:#}");
    let home = &setup.home;
    start_on_skill(home, &skill);
    let (out, err) = cont(home, &[], 4);
    assert!(
        out.contains("review published, waiting for feedback") && !err.contains("options-reply"),
        "{out}\n{err}"
    );
    let st = status(home);
    assert_eq!(st["status_phase"], "review_published", "{st:#}");
    assert!(
        st["progress"]["generated_options"].as_u64().unwrap() >= 4,
        "options for both items: {st:#}"
    );
    let index = std::fs::read_to_string(packet(home).join("index.md")).unwrap();
    assert!(
        !index.contains("SHORT: shipped 1.2"),
        "the arms' scripted answer is not an option:\n{index}"
    );
}

// A template whose `scripted: options-reply` line holds no options makes option generation answer
// it instead: `train continue` fails at once saying why and what to do, instead of retrying the
// unusable result until a 60 s deadline with a warning per try (a new user saw 16 705 of them).
#[test]
fn an_options_reply_without_options_fails_option_generation_at_once_saying_why() {
    let setup = Setup::new();
    let skill = setup.skill("tldr", "scripted: options-reply shipped 1.2, fixed login");
    let home = &setup.home;
    start_on_skill(home, &skill);
    let out = home.run(&["train", "continue", "--session", SESSION]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("option generation failed")
            && stderr.contains("`scripted: options-reply`")
            && stderr.contains("train start --runtime claude"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("result left pending") && !stderr.contains("could not be applied within"),
        "the unusable answer is the result, applied without effect:\n{stderr}"
    );
    assert_eq!(
        stderr.matches("`scripted: options-reply`").count(),
        1,
        "what to do is said once for both items:\n{stderr}"
    );
    // Continuing fails the same way: status says a new session is the way on.
    let st = home.run(&["train", "status", "--session", SESSION]);
    let said = String::from_utf8_lossy(&st.stdout);
    assert!(
        said.contains("option generation failed") && said.contains("start a new session"),
        "{said}"
    );
    let jobs = home.json(&["jobs", "list"]);
    assert!(
        jobs.as_array()
            .unwrap()
            .iter()
            .all(|j| j["state"] == "succeeded"),
        "{jobs:#}"
    );
}

// A decision on the candidate the session just made needs no extra `continue`: `--reject` (or
// `--promote`) right after the candidate is created publishes its review first, then applies the
// decision (a new user following docs/train.md was refused "promote or reject only after the
// candidate review is published").
#[test]
fn a_decision_right_after_the_candidate_is_made_publishes_its_review_first() {
    let home = Home::embedded();
    start(&home, true);
    let version = iterate_to_candidate(&home);
    assert_eq!(status(&home)["current_phase"], "candidate_created");
    let (_, err) = cont(&home, &["--reject", &version, "--reason", "not yet"], 0);
    let st = status(&home);
    assert_eq!(st["current_phase"], "candidate_rejected", "{err}\n{st:#}");
    let review = Path::new(st["review_packet"].as_str().unwrap())
        .parent()
        .unwrap()
        .join("candidate-review.md");
    assert!(review.is_file(), "the candidate review was published first");
    // Deciding again, on a version that is not the candidate, says the iteration is decided,
    // which version its candidate was, and how to train further (a new user was told to wait
    // for a review that had long been published).
    let (_, err) = cont(&home, &["--promote", "planner@v9"], 2);
    assert!(
        err.contains(&format!(
            "already decided: its candidate `{version}` was rejected"
        )) && err.contains("`planner@v9` is not its candidate")
            && err.contains("--start-next"),
        "{err}"
    );
}

// E-12: one wording of a runtime's credentials. With no login and no key, `eval forge`,
// `train continue` and `doctor` each say how to give Codex and Claude Code credentials in the
// same words: the runtime profile's one list of every route it accepts (`codex login` and the
// keys, with the forge's CODEX_FORCE_AUTH_JSON=0 rule; Claude Code's login and its three
// variables).
#[test]
fn eval_forge_train_continue_and_doctor_word_a_runtimes_credentials_alike() {
    let s = Setup::new();
    let user_home = s.path("logged-out-user");
    std::fs::create_dir_all(&user_home).unwrap();
    let claude_config = s.path("claude-config");
    let logged_out = |cmd: &mut std::process::Command| {
        for var in [
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_AUTH_TOKEN",
            "CLAUDE_CODE_OAUTH_TOKEN",
            "OPENAI_API_KEY",
            "CODEX_API_KEY",
            "CODEX_HOME",
            "CODEX_FORCE_AUTH_JSON",
            "XDG_CONFIG_HOME",
        ] {
            cmd.env_remove(var);
        }
        cmd.env("HOME", &user_home)
            .env("CLAUDE_CONFIG_DIR", &claude_config)
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_TELEMETRY", "1");
    };
    let doctor = {
        let mut cmd = s.home.cmd();
        cmd.args(["--json", "doctor"]);
        logged_out(&mut cmd);
        let out = cmd.output().unwrap();
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    for runtime in ["codex", "claude"] {
        let help = skillforge_runner_agent::profile::credential_help(runtime);
        // eval forge: its preflight, before any arm.
        let mut cmd = s.home.cmd();
        cmd.args(["eval", "forge", "--runtime", runtime, "--brief"])
            .arg(&brief)
            .arg("--skill-dir")
            .arg(&skill);
        logged_out(&mut cmd);
        let out = cmd.output().unwrap();
        let forge = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(3), "{forge}");
        assert!(
            forge.contains(&help),
            "eval forge --runtime {runtime}:\n{forge}"
        );
        // doctor: the runtime's line.
        let line = doctor["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == format!("runtime {runtime}"))
            .unwrap_or_else(|| panic!("{doctor:#}"));
        assert!(
            line["fix"].as_str().unwrap_or_default().contains(&help),
            "doctor on {runtime}: {line:#}"
        );
        // train continue: option generation on the runtime.
        let home = Home::embedded();
        start_with(
            &home,
            &["--workspace-repo", "owner/workspace", "--runtime", runtime],
        );
        let mut cmd = home.cmd();
        cmd.args(["train", "continue", "--session", SESSION]);
        logged_out(&mut cmd);
        let out = cmd.output().unwrap();
        let train = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(3), "{train}\n{}", home.logs());
        assert!(
            train.contains(&help),
            "train continue --runtime {runtime}:\n{train}"
        );
    }
}

// A way out of an iteration that cannot go on (a new user's session was stuck on a runtime that
// could not run, and nothing said how to leave it): `--abandon --reason` moves it to abandoned
// from where it is, the reason recorded; `--start-next` then starts the next iteration; a second
// abandon is refused saying the iteration is resolved.
#[test]
fn an_iteration_that_cannot_go_on_is_abandoned_and_the_next_one_starts() {
    let home = Home::embedded();
    start(&home, true);
    let (_, err) = cont(&home, &["--start-next"], 2);
    assert!(err.contains("--abandon --reason TEXT"), "{err}");
    let (out, err) = cont(
        &home,
        &["--abandon", "--reason", "runtime cannot run here"],
        0,
    );
    assert!(
        err.contains("abandoned: runtime cannot run here") && out.contains("--start-next"),
        "{out}\n{err}"
    );
    let st = status(&home);
    assert_eq!(st["current_phase"], "run_abandoned", "{st:#}");
    let (_, err) = cont(&home, &["--abandon", "--reason", "again"], 2);
    assert!(err.contains("already resolved"), "{err}");
    cont(&home, &["--start-next"], 0);
    let st = status(&home);
    assert_eq!(
        (st["iteration_id"].as_str(), st["status_phase"].as_str()),
        (Some("s1-i002"), Some("items_ready")),
        "{st:#}"
    );
}

// A mistyped `--template` lists what is installed; a version that does not exist lists the
// template's versions.
#[test]
fn an_unknown_template_or_version_lists_what_there_is() {
    let home = Home::embedded();
    add_template(&home, PLANNER_TEMPLATE, "owner/repo");
    let items = write(&home.path().join("in/items.yml"), ITEMS);
    for (template, want) in [
        (
            "plannr",
            "template `plannr` is not installed (installed: planner)",
        ),
        (
            "planner@v9",
            "no version of `planner` matches; it has planner@v1 (current)",
        ),
    ] {
        let args = [
            "train",
            "start",
            "--template",
            template,
            "--items-file",
            items.to_str().unwrap(),
            "--request",
            "x",
            "--yes",
        ];
        let (_, err) = run_code(&home, &args, 2);
        assert!(err.contains(want), "{template}: {err}");
    }
}
