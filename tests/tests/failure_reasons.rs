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
        .find(|l| l.starts_with("job ") && l.contains("(not_runnable)"))
        .unwrap_or_else(|| panic!("no status line:\n{stderr}"));
    let (_, reason) = line
        .split_once("(not_runnable): ")
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
