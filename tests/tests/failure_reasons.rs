//! A failed job's human output carries its reason on the line that reports it: a person reads
//! why without `jobs show --json`.

use skillforge_tests::Home;

#[test]
fn a_job_that_cannot_run_says_why_on_its_status_line() {
    let home = Home::embedded();
    let out = home.run(&["jobs", "submit", "--wait", "--", "/nonexistent/program-xyz"]);
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.starts_with("job ") && l.contains("(not runnable)"))
        .unwrap_or_else(|| panic!("no status line:\n{stderr}"));
    let (_, reason) = line
        .split_once("(not runnable): ")
        .unwrap_or_else(|| panic!("no reason after the exit class: {line}"));
    assert!(
        reason.contains("program-xyz"),
        "the reason names the program: {line}"
    );
    // `jobs show` says the same.
    let id = line.split_whitespace().nth(1).unwrap();
    let shown = home.run(&["jobs", "show", id]);
    assert!(
        String::from_utf8_lossy(&shown.stdout).contains("program-xyz"),
        "{}",
        String::from_utf8_lossy(&shown.stdout)
    );
}

/// A command that fails every attempt ends `dead`; the status line says how many attempts ran and
/// why, and the next line says how to run a command once.
#[test]
fn a_command_failing_every_attempt_says_it_was_retried_and_how_to_run_it_once() {
    let home = Home::embedded();
    let out = home.run(&[
        "jobs",
        "submit",
        "--wait",
        "--attempts",
        "2",
        "--",
        "sh",
        "-c",
        "echo boom >&2; exit 3",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.starts_with("job ") && l.contains(" dead "))
        .unwrap_or_else(|| panic!("no status line:\n{stderr}"));
    assert!(
        line.contains("dead after 2 of 2 attempts (failed, exit 3): boom"),
        "{line}"
    );
    assert!(
        stderr.contains("it ran 2 times") && stderr.contains("--attempts 1"),
        "{stderr}"
    );
    let once = home.run(&[
        "jobs",
        "submit",
        "--wait",
        "--attempts",
        "1",
        "--",
        "sh",
        "-c",
        "exit 3",
    ]);
    let stderr = String::from_utf8_lossy(&once.stderr);
    assert!(
        !stderr.contains("it ran"),
        "one attempt says nothing of retries: {stderr}"
    );
}

/// Issue 35 item 5: a wait without a terminal (a CI log, a pipe: no spinner) is never silent; a
/// line every 20 s says what it waits for and for how long.
#[test]
fn a_long_wait_without_a_terminal_says_it_goes_on() {
    let home = Home::embedded();
    let out = home.run(&["jobs", "submit", "--wait", "--", "sh", "-c", "sleep 21"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("… ") && l.ends_with(" s so far)"))
        .unwrap_or_else(|| panic!("no line while waiting:\n{stderr}"));
    assert!(line.contains("running"), "says the job's state: {line}");
}
