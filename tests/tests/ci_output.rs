//! CI-native output (issue 36 item 4) end to end: `verify`, `check` and `eval forge` run for real
//! (real git repositories, ruff for `check`'s lint, the `scripted` agent for the forge) with
//! `--junit FILE` and `--format github`. Every JUnit file is validated against the Jenkins xUnit
//! plug-in's JUnit schema (tests/fixtures/junit-10.xsd) with `xmllint --schema` and read back
//! with `xmllint --xpath`; the workflow commands and the step summary are read line by line.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use skillforge_tests::eval::{BRIEF_ID, GOOD_SKILL, Setup, VERIFY_SHORT};
use skillforge_tests::{Home, git, two_commit_repo};

const XSD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/junit-10.xsd");

/// Asserts `xmllint --schema junit-10.xsd --noout FILE` accepts the file.
fn assert_valid_junit(path: &Path) {
    let (ok, stderr) = validate(path);
    let text = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        ok,
        "`{}` does not validate against the JUnit XSD:\n{stderr}\n{text}",
        path.display()
    );
}

fn validate(path: &Path) -> (bool, String) {
    let out = Command::new("xmllint")
        .args(["--noout", "--schema", XSD])
        .arg(path)
        .output()
        .expect("run xmllint (apt libxml2-utils; scripts/test installs it)");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `xmllint --xpath EXPR FILE`, trimmed (an expression matching nothing gives "").
fn xpath(path: &Path, expr: &str) -> String {
    let out = Command::new("xmllint")
        .args(["--xpath", expr])
        .arg(path)
        .output()
        .expect("run xmllint");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn run(home: &Home, args: &[&str], envs: &[(&str, &Path)]) -> (Option<i32>, String, String) {
    let mut cmd = home.cmd();
    cmd.args(args).env_remove("GITHUB_STEP_SUMMARY");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().expect("run skillforge");
    (
        status.code(),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

/// The workflow commands on stdout outside the `::stop-commands::` pause, in order; panics when
/// the pause is not closed with its token.
fn workflow_commands(stdout: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut paused: Option<String> = None;
    for line in stdout.lines() {
        match &paused {
            Some(token) if line == format!("::{token}::") => paused = None,
            Some(_) => {}
            None => {
                if let Some(token) = line.strip_prefix("::stop-commands::") {
                    paused = Some(token.to_owned());
                }
                if line.starts_with("::") {
                    out.push(line.to_owned());
                }
            }
        }
    }
    assert!(
        paused.is_none(),
        "workflow commands were never resumed:\n{stdout}"
    );
    out
}

// The validator is real: a file the schema refuses (a testcase without its required name, a
// `time` with four decimals) fails it, so the validations below can fail.
#[test]
fn the_junit_schema_refuses_a_malformed_report() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.xml");
    std::fs::write(&good, r#"<testsuites><testsuite name="s" tests="1" failures="0" errors="0" time="0.001"><testcase name="c"/></testsuite></testsuites>"#).unwrap();
    assert_valid_junit(&good);
    for bad in [
        r#"<testsuites><testsuite name="s" tests="1" failures="0" errors="0"><testcase classname="c"/></testsuite></testsuites>"#,
        r#"<testsuites><testsuite name="s" tests="1" failures="0" errors="0" time="0.0001"><testcase name="c"/></testsuite></testsuites>"#,
        r#"<testsuites><testsuite name="s" tests="1" errors="0"><testcase name="c"/></testsuite></testsuites>"#,
    ] {
        let path = dir.path().join("bad.xml");
        std::fs::write(&path, bad).unwrap();
        assert!(!validate(&path).0, "the schema accepted {bad}");
    }
}

// `verify --json --junit`: JSON on stdout, one testcase per command in the file (a pass, a failure
// with its message and output tails, a skip), valid JUnit, and the exit code of the verdict (1).
#[test]
fn verify_junit_has_a_testcase_per_command_and_keeps_the_exit_code() {
    let (repo, _, _) = two_commit_repo();
    let home = Home::embedded();
    let junit = home.path().join("reports/verify.xml");
    let failing =
        r#"echo to-stdout; echo 'broke <&> "here"' >&2; printf '\033[31mred\033[0m\n' >&2; exit 4"#;
    let (code, stdout, stderr) = run(
        &home,
        &[
            "--json",
            "verify",
            "--repo",
            repo.path().to_str().unwrap(),
            "--junit",
            junit.to_str().unwrap(),
            "--",
            "test -f src/lib.rs",
            failing,
            "true",
        ],
        &[],
    );
    assert_eq!(
        code,
        Some(1),
        "a failing verify still exits 1 with --junit:\n{stdout}\n{stderr}"
    );
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is JSON with --junit ({e}):\n{stdout}"));
    assert_eq!(report["verdict"], "fail");
    assert_valid_junit(&junit);
    assert_eq!(xpath(&junit, "string(/testsuites/testsuite/@tests)"), "3");
    assert_eq!(
        xpath(&junit, "string(/testsuites/testsuite/@failures)"),
        "1"
    );
    assert_eq!(xpath(&junit, "string(/testsuites/testsuite/@skipped)"), "1");
    assert_eq!(
        xpath(&junit, "string(//testcase[1]/@name)"),
        "test -f src/lib.rs"
    );
    assert_eq!(
        xpath(&junit, "count(//testcase[1]/*)"),
        "0",
        "a pass has no failure"
    );
    assert_eq!(
        xpath(&junit, "string(//testcase[2]/@name)"),
        failing,
        "the command line, escaped and read back whole"
    );
    assert_eq!(
        xpath(&junit, "string(//testcase[2]/failure/@message)"),
        "exit 4"
    );
    assert_eq!(
        xpath(&junit, "string(//testcase[2]/failure/@type)"),
        "failed"
    );
    let err_tail = xpath(&junit, "string(//testcase[2]/system-err)");
    assert!(
        err_tail.contains(r#"broke <&> "here""#) && err_tail.contains("red"),
        "stderr tail: {err_tail:?}"
    );
    assert!(
        !err_tail.contains('\u{1b}'),
        "colour escapes are dropped: {err_tail:?}"
    );
    assert_eq!(
        xpath(&junit, "string(//testcase[2]/system-out)"),
        "to-stdout"
    );
    assert!(xpath(&junit, "string(//testcase[3]/skipped/@message)").starts_with("not run"));
    assert_eq!(
        xpath(&junit, "string(//property[@name='job_id']/@value)"),
        report["job_id"].as_str().unwrap()
    );
    assert_eq!(
        xpath(&junit, "string(//property[@name='commit']/@value)"),
        report["commit"].as_str().unwrap()
    );
    let leftovers: Vec<_> = std::fs::read_dir(junit.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        leftovers,
        ["verify.xml"],
        "the report is renamed into place, no temp file stays"
    );

    // A pass: exit 0, no failure, and the same file replaced whole.
    let (code, stdout, stderr) = run(
        &home,
        &[
            "--json",
            "verify",
            "--repo",
            repo.path().to_str().unwrap(),
            "--junit",
            junit.to_str().unwrap(),
            "--",
            "true",
        ],
        &[],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert_valid_junit(&junit);
    assert_eq!(xpath(&junit, "string(/testsuites/@tests)"), "1");
    assert_eq!(xpath(&junit, "string(/testsuites/@failures)"), "0");
}

// The report is written when the command cannot run at all: a command not found (verdict
// skipped, exit 3) is an error testcase; an invalid flag value (exit 2) is one errored case with
// the message; and a report that cannot be written is an error of its own (exit 3).
#[test]
fn verify_writes_its_junit_report_when_it_cannot_run() {
    let (repo, _, _) = two_commit_repo();
    let home = Home::embedded();
    let junit = home.path().join("verify.xml");
    let repo_arg = repo.path().to_str().unwrap();
    let (code, _, stderr) = run(
        &home,
        &[
            "verify",
            "--repo",
            repo_arg,
            "--junit",
            junit.to_str().unwrap(),
            "--",
            "no-such-tool-anywhere --version",
        ],
        &[],
    );
    assert_eq!(code, Some(3), "{stderr}");
    assert_valid_junit(&junit);
    assert_eq!(
        xpath(&junit, "string(//testcase[1]/error/@type)"),
        "not_runnable"
    );
    assert_eq!(xpath(&junit, "string(/testsuites/@errors)"), "1");

    std::fs::remove_file(&junit).unwrap();
    let (code, _, stderr) = run(
        &home,
        &[
            "verify",
            "--repo",
            repo_arg,
            "--timeout",
            "0",
            "--junit",
            junit.to_str().unwrap(),
            "--",
            "true",
        ],
        &[],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert_valid_junit(&junit);
    assert_eq!(xpath(&junit, "string(//testcase[1]/error/@type)"), "usage");
    assert_eq!(
        xpath(&junit, "string(//testcase[1]/error/@message)"),
        "--timeout must be at least 1 second"
    );

    let blocker = home.path().join("a-file");
    std::fs::write(&blocker, "").unwrap();
    let unwritable = blocker.join("verify.xml");
    let (code, _, stderr) = run(
        &home,
        &[
            "verify",
            "--repo",
            repo_arg,
            "--junit",
            unwritable.to_str().unwrap(),
            "--",
            "true",
        ],
        &[],
    );
    assert_eq!(
        code,
        Some(3),
        "a pass whose report cannot be written is an environment error:\n{stderr}"
    );
    assert!(
        stderr.contains("JUnit report") && stderr.contains("a-file"),
        "{stderr}"
    );
}

// `verify --format github`: the report folded in a group with workflow commands paused (a
// command's own `::error::` line is not read as one), then one escaped `::error` per failing
// command, and the job summary appended to $GITHUB_STEP_SUMMARY (twice: appended, not replaced).
#[test]
fn verify_format_github_annotates_failures_and_appends_a_step_summary() {
    let (repo, _, _) = two_commit_repo();
    let home = Home::embedded();
    let summary = home.path().join("step-summary.md");
    std::fs::write(&summary, "earlier step\n").unwrap();
    let failing =
        "echo '::error::injected by the repository'; echo '100% broken, really' >&2; exit 3";
    let args = [
        "verify",
        "--repo",
        repo.path().to_str().unwrap(),
        "--format",
        "github",
        "--",
        "true",
        failing,
    ];
    let (code, stdout, stderr) = run(&home, &args, &[("GITHUB_STEP_SUMMARY", &summary)]);
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("::error::injected by the repository"),
        "the human report quotes the output:\n{stdout}"
    );
    let commands = workflow_commands(&stdout);
    assert_eq!(commands[0], "::group::skillforge verify", "{stdout}");
    assert!(
        commands[1].starts_with("::stop-commands::skillforge-"),
        "{stdout}"
    );
    assert_eq!(commands[2], "::endgroup::", "{stdout}");
    let escaped_command = "echo '%3A%3Aerror%3A%3Ainjected by the repository'; echo '100%25 broken%2C really' >&2; exit 3";
    assert_eq!(
        commands[3..],
        [format!(
            "::error title=verify%3A {escaped_command}::`{}`: exit 3%0A100%25 broken, really",
            failing.replace('%', "%25")
        )],
        "one annotation, for the failing command; data and properties escaped:\n{stdout}"
    );
    let _ = run(&home, &args, &[("GITHUB_STEP_SUMMARY", &summary)]);
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(
        md.starts_with("earlier step\n"),
        "appended after what was there:\n{md}"
    );
    assert_eq!(
        md.matches("### skillforge verify").count(),
        2,
        "one summary per run:\n{md}"
    );
    assert!(md.contains("1 failed, 1 passed"), "{md}");
    assert!(md.contains("| ✅ | true | passed |"), "{md}");
    assert!(md.contains("failed: exit 3"), "{md}");
    assert!(md.contains("<details><summary>echo '::error::injected by the repository'; echo '100% broken, really' &gt;&amp;2; exit 3</summary>"), "{md}");
    assert!(
        md.contains("stderr:\n\n```text\n100% broken, really\n```"),
        "{md}"
    );
}

// `--format github` and `--json` cannot be combined (clap refuses, exit 2); `--no-wait` cannot
// take `--junit` (there is no result to report).
#[test]
fn format_github_conflicts_with_json_and_junit_with_no_wait() {
    let (repo, _, _) = two_commit_repo();
    let home = Home::embedded();
    let repo_arg = repo.path().to_str().unwrap();
    for args in [
        vec![
            "--json", "verify", "--repo", repo_arg, "--format", "github", "--", "true",
        ],
        vec![
            "check", "--json", "--repo", repo_arg, "--base", "HEAD~1", "--head", "HEAD",
            "--format", "github",
        ],
        vec![
            "--json",
            "eval",
            "forge",
            "--format",
            "github",
            "--brief",
            "b.json",
            "--skill-dir",
            "s",
        ],
        vec![
            "verify",
            "--no-wait",
            "--junit",
            "x.xml",
            "--repo",
            repo_arg,
            "--",
            "true",
        ],
    ] {
        let (code, stdout, stderr) = run(&home, &args, &[]);
        assert_eq!(code, Some(2), "{args:?}\n{stdout}\n{stderr}");
        assert!(stderr.contains("cannot be used with"), "{args:?}: {stderr}");
    }
}

/// A repository whose commits are: `base` (README), `notes` (a Markdown file only), `lint` (a
/// Python file with two unused imports, ruff's F401).
fn python_repo() -> (tempfile::TempDir, [String; 3]) {
    let (repo, base, _) = two_commit_repo();
    let p = repo.path();
    git(p, &["checkout", "-q", "-b", "ci", &base]);
    std::fs::write(p.join("NOTES.md"), "notes\n").unwrap();
    git(p, &["add", "-A"]);
    git(p, &["commit", "-q", "-m", "notes"]);
    let notes = git(p, &["rev-parse", "HEAD"]);
    std::fs::write(
        p.join("app.py"),
        "import os\nimport sys\n\n\ndef main():\n    return 1\n",
    )
    .unwrap();
    git(p, &["add", "-A"]);
    git(p, &["commit", "-q", "-m", "lint"]);
    let lint = git(p, &["rev-parse", "HEAD"]);
    (repo, [base, notes, lint])
}

// `check --junit --format github` with ruff: diff_size passes, lint fails with ruff's count and
// its raw measurement as output, the exit code stays 0 (check gates nothing), the lint finding
// is a warning annotation, and the job summary lists both dimensions.
#[test]
fn check_junit_and_github_report_each_dimension_with_ruff() {
    let (repo, [_, notes, lint]) = python_repo();
    let home = Home::embedded();
    let junit = home.path().join("check.xml");
    let summary = home.path().join("summary.md");
    let args = [
        "check",
        "--repo",
        repo.path().to_str().unwrap(),
        "--base",
        &notes,
        "--head",
        &lint,
        "--checkers",
        "diff_size,lint",
        "--junit",
        junit.to_str().unwrap(),
        "--format",
        "github",
    ];
    let (code, stdout, stderr) = run(&home, &args, &[("GITHUB_STEP_SUMMARY", &summary)]);
    assert_eq!(
        code,
        Some(0),
        "check exits 0 whenever it ran:\n{stdout}\n{stderr}"
    );
    assert_valid_junit(&junit);
    assert_eq!(xpath(&junit, "string(//testcase[1]/@name)"), "diff_size");
    assert_eq!(xpath(&junit, "count(//testcase[1]/failure)"), "0");
    assert_eq!(xpath(&junit, "string(//testcase[2]/@name)"), "lint");
    assert_eq!(
        xpath(&junit, "string(//testcase[2]/failure/@type)"),
        "score"
    );
    assert_eq!(
        xpath(&junit, "string(//testcase[2]/failure/@message)"),
        "scored 0.900 of 1 (ruff: 2 in python)"
    );
    assert!(xpath(&junit, "string(//testcase[2]/system-out)").contains(r#""tool": "ruff""#));
    assert_eq!(
        xpath(&junit, "string(//property[@name='mean']/@value)"),
        "0.950"
    );
    let commands = workflow_commands(&stdout);
    let annotations: Vec<&String> = commands
        .iter()
        .filter(|c| c.starts_with("::error") || c.starts_with("::warning"))
        .collect();
    assert_eq!(
        annotations.len(),
        3,
        "the dimension, then each item ruff placed:\n{stdout}"
    );
    assert_eq!(
        annotations[0], "::warning title=check%3A lint::scored 0.900 of 1 (ruff: 2 in python)",
        "{stdout}"
    );
    // Each unused import at its file (relative to the repository) and line.
    for (annotation, (line, name)) in annotations[1..].iter().zip([(1, "os"), (2, "sys")]) {
        let place = format!("::warning file=app.py,line={line},title=check%3A lint (ruff)::");
        assert!(
            annotation.starts_with(&place) && annotation.contains(name),
            "{annotation}\n{stdout}"
        );
    }
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(
        md.contains("1 failed, 1 passed") && md.contains("| ✅ | diff\\_size | passed |"),
        "{md}"
    );
    assert!(
        md.contains("| ❌ | lint | failed: scored 0.900 of 1 (ruff: 2 in python) |"),
        "{md}"
    );
}

// Issue 35 item 2: human `check` lists what each tool found under its score line, as
// `path:line: message (tool)`, at most 10, then how many more `--json` lists.
#[test]
fn check_lists_each_finding_under_its_score_in_human_output() {
    let (repo, base, _) = two_commit_repo();
    let p = repo.path();
    git(p, &["checkout", "-q", "-b", "many", &base]);
    let modules = [
        "os", "sys", "json", "re", "math", "time", "glob", "shutil", "string", "random", "uuid",
        "heapq",
    ];
    let text: String = modules.iter().map(|m| format!("import {m}\n")).collect();
    std::fs::write(p.join("many.py"), text).unwrap();
    git(p, &["add", "-A"]);
    git(p, &["commit", "-q", "-m", "imports"]);
    let head = git(p, &["rev-parse", "HEAD"]);
    let home = Home::embedded();
    let repo_arg = p.to_str().unwrap();
    let (code, stdout, stderr) = run(
        &home,
        &[
            "check",
            "--repo",
            repo_arg,
            "--base",
            &base,
            "--head",
            &head,
            "--checkers",
            "lint",
        ],
        &[],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    let score = lines
        .iter()
        .position(|l| l.trim_start().starts_with("lint"))
        .unwrap_or_else(|| panic!("a lint line:\n{stdout}"));
    let listed: Vec<&str> = lines[score + 1..]
        .iter()
        .take_while(|l| l.starts_with("    ") && !l.contains("… and"))
        .copied()
        .collect();
    assert_eq!(listed.len(), 10, "ten findings under the score:\n{stdout}");
    for l in &listed {
        assert!(
            l.trim().starts_with("many.py:") && l.ends_with("(ruff)"),
            "`path:line: message (tool)`: {l}\n{stdout}"
        );
    }
    assert!(
        listed
            .iter()
            .any(|l| l.trim() == "many.py:1: `os` imported but unused (ruff)"),
        "{stdout}"
    );
    // ruff's count on the score line (12 unused imports and, as ruff sees fit, the block's
    // order): all but the ten shown are counted.
    let total: usize = lines[score]
        .split("(ruff: ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("ruff's count:\n{stdout}"));
    assert!(total >= 12, "{stdout}");
    assert_eq!(
        lines[score + 11].trim(),
        format!("… and {} more (--json lists all)", total - 10),
        "{stdout}"
    );
}

// A dimension with nothing to measure is a `<skipped>` testcase with the checker's reason and a
// warning annotation; `--json` and `--junit` together keep JSON on stdout.
#[test]
fn check_reports_a_skipped_dimension_with_its_reason() {
    let (repo, [base, notes, _]) = python_repo();
    let home = Home::embedded();
    let junit = home.path().join("check.xml");
    let args = [
        "--json",
        "check",
        "--repo",
        repo.path().to_str().unwrap(),
        "--base",
        &base,
        "--head",
        &notes,
        "--checkers",
        "lint",
        "--junit",
        junit.to_str().unwrap(),
    ];
    let (code, stdout, stderr) = run(&home, &args, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is JSON with --junit ({e}):\n{stdout}"));
    let reason = report["dimensions"][0]["skipped"]
        .as_str()
        .expect("lint skipped")
        .to_owned();
    assert_valid_junit(&junit);
    assert_eq!(xpath(&junit, "string(/testsuites/testsuite/@skipped)"), "1");
    assert_eq!(
        xpath(&junit, "string(//testcase[@name='lint']/skipped/@message)"),
        reason
    );
    assert_eq!(
        xpath(&junit, "string(//property[@name='mean']/@value)"),
        "none (every dimension skipped)"
    );

    let (code, stdout, _) = run(
        &home,
        &args[1..]
            .iter()
            .copied()
            .chain(["--format", "github"])
            .collect::<Vec<_>>(),
        &[],
    );
    assert_eq!(code, Some(0));
    let commands = workflow_commands(&stdout);
    let last = commands.last().unwrap();
    assert!(
        last.starts_with(
            "::warning title=check%3A lint::skipped: no changed file in a profiled language"
        ),
        "{stdout}"
    );
}

// `eval forge --json --junit` with the scripted runtime: one passing testcase per sample the
// skill won and a passing gate, exit 0, JSON on stdout; each sample's output holds each arm's
// verify result and final message.
#[test]
fn eval_forge_junit_has_a_testcase_per_sample_and_the_gate() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let junit = s.path("forge.xml");
    let (code, report, stderr) = s.forge(&brief, &skill, &["--junit", junit.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}\n{report:#}");
    assert_eq!(
        report["gate"]["decision"], "adopt",
        "JSON on stdout with --junit: {report:#}"
    );
    assert_valid_junit(&junit);
    let names: Vec<String> = (1..=4)
        .map(|i| xpath(&junit, &format!("string(//testcase[{i}]/@name)")))
        .collect();
    assert_eq!(names, ["sample 1", "sample 2", "sample 3", "gate"]);
    assert_eq!(xpath(&junit, "string(/testsuites/@failures)"), "0");
    assert_eq!(xpath(&junit, "string(/testsuites/@errors)"), "0");
    let out = xpath(&junit, "string(//testcase[1]/system-out)");
    assert!(
        out.contains("with arm: verify passed\nSHORT: shipped 1.2, fixed login"),
        "{out}"
    );
    assert!(
        out.contains("without arm: verify failed (exit 1)\nLONG status"),
        "{out}"
    );
    assert!(
        xpath(&junit, "string(//testcase[4]/system-out)").contains("ADOPT"),
        "the gate's lines"
    );
    assert_eq!(
        xpath(&junit, "string(//property[@name='decision']/@value)"),
        "adopt"
    );
}

// A forge whose skill never loads: every sample invalid (an error testcase with its code, a
// warning annotation), the gate undecided (a failure and an `::error`), exit 1 unchanged, the
// summary appended.
#[test]
fn eval_forge_reports_invalid_samples_and_a_failed_gate() {
    let s = Setup::new();
    let skill = s.skill("tldr", &format!("{GOOD_SKILL}\nscripted: no-load"));
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let junit = s.path("forge.xml");
    let summary = s.path("summary.md");
    let mut cmd = s.home.cmd();
    cmd.args([
        "eval",
        "forge",
        "--runtime",
        "scripted",
        "--brief",
        brief.to_str().unwrap(),
        "--skill-dir",
        skill.to_str().unwrap(),
    ])
    .args([
        "--install-root",
        s.path("agents-skills").to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
        "--format",
        "github",
    ])
    .env("GITHUB_STEP_SUMMARY", &summary);
    let out = cmd.output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "an undecided gate still exits 1:\n{stdout}\n{stderr}"
    );
    assert_valid_junit(&junit);
    assert_eq!(xpath(&junit, "string(/testsuites/@errors)"), "3");
    assert_eq!(xpath(&junit, "string(/testsuites/@failures)"), "1");
    assert_eq!(
        xpath(&junit, "string(//testcase[1]/error/@type)"),
        "skill_never_loaded"
    );
    assert!(
        xpath(&junit, "string(//testcase[1]/error/@message)")
            .starts_with("invalid (skill_never_loaded, with arm): ")
    );
    assert_eq!(
        xpath(&junit, "string(//testcase[@name='gate']/failure/@type)"),
        "gate"
    );
    let commands = workflow_commands(&stdout);
    let annotations: Vec<&String> = commands
        .iter()
        .filter(|c| c.starts_with("::error") || c.starts_with("::warning"))
        .collect();
    assert_eq!(annotations.len(), 4, "{stdout}");
    for (idx, a) in annotations[..3].iter().enumerate() {
        assert!(
            a.starts_with(&format!(
                "::warning title=eval forge%3A sample {}::invalid (skill_never_loaded, with arm)",
                idx + 1
            )),
            "{a}"
        );
    }
    assert!(
        annotations[3].starts_with(&format!(
            "::error title=eval forge {BRIEF_ID}%3A gate undecided::"
        )),
        "{}",
        annotations[3]
    );
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(
        md.contains(&format!(
            "### skillforge eval forge {BRIEF_ID}: tldr: 1 failed, 3 errored"
        )),
        "{md}"
    );
}
