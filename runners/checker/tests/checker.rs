//! End-to-end tests of the checker: real git repositories built in temp dirs, the runner
//! contract, and tool dimensions with missing or fake tools.
//!
//! Tool-invoking tests depend on `skillforge-runner-process`; while its `run_process` is not
//! implemented (or a tool is absent), a tool dimension is skipped, and those tests check the skip
//! instead of the score, saying so on stderr.

use std::path::Path;
use std::time::Duration;

use git2::{Oid, Repository, Signature};
use serde_json::json;
use skillforge_runner::{ExitClass, RunContext, RunSpec, Runner};
use skillforge_runner_checker::{
    CheckConfig, CheckReport, Checker, CheckerPayload, CheckerRunner, CountSpec, DimensionProfile,
    LanguageProfile, Normalize, ToolSpec, Workspace, check, diff_between, diff_text_between,
    export_tree, parse_unified_diff, run_checks,
};
use tempfile::TempDir;

/// Writes `files` (path, content; `None` deletes) into the work tree of `repo` and commits them.
fn commit(repo: &Repository, files: &[(&str, Option<&str>)], message: &str) -> Oid {
    let root = repo.workdir().unwrap().to_path_buf();
    let mut index = repo.index().unwrap();
    for (path, content) in files {
        let full = root.join(path);
        match content {
            Some(text) => {
                std::fs::create_dir_all(full.parent().unwrap()).unwrap();
                std::fs::write(&full, text).unwrap();
                index.add_path(Path::new(path)).unwrap();
            }
            None => {
                std::fs::remove_file(&full).unwrap();
                index.remove_path(Path::new(path)).unwrap();
            }
        }
    }
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let signature = Signature::now("test", "test@example.com").unwrap();
    let parents: Vec<_> = repo
        .head()
        .ok()
        .map(|h| h.peel_to_commit().unwrap())
        .into_iter()
        .collect();
    let parent_refs: Vec<_> = parents.iter().collect();
    repo.commit(
        Some("HEAD"),
        &signature,
        &signature,
        message,
        &tree,
        &parent_refs,
    )
    .unwrap()
}

fn lines(n: usize, prefix: &str) -> String {
    (0..n).map(|i| format!("{prefix}{i}\n")).collect()
}

/// A repository with two commits: base has `a.py` (10 lines) and `README.md`; head changes two
/// lines of `a.py`, adds `src/lib.rs` (3 lines) and deletes `README.md` (2 lines).
struct Fixture {
    dir: TempDir,
    base: Oid,
    head: Oid,
}

fn fixture() -> Fixture {
    let dir = TempDir::new().unwrap();
    let repo = Repository::init(dir.path()).unwrap();
    let a_base = lines(10, "x = ");
    let base = commit(
        &repo,
        &[
            ("a.py", Some(&a_base)),
            ("README.md", Some("# t\n\nhello\n")),
        ],
        "base",
    );
    let a_head = a_base
        .replace("x = 3\n", "y = 3\n")
        .replace("x = 7\n", "y = 7\n");
    let head = commit(
        &repo,
        &[
            ("a.py", Some(&a_head)),
            ("src/lib.rs", Some("pub fn f() -> u8 {\n    1\n}\n")),
            ("README.md", None),
        ],
        "head",
    );
    Fixture { dir, base, head }
}

#[test]
fn diff_size_counts_a_real_two_commit_range() {
    let f = fixture();
    let stats = diff_between(f.dir.path(), &f.base.to_string(), &f.head.to_string()).unwrap();
    assert_eq!(stats.added_lines(), 2 + 3);
    assert_eq!(stats.removed_lines(), 2 + 3);
    assert_eq!(stats.changed_lines(), 10);
    assert_eq!(stats.changed_files(), 3);
    let mut paths: Vec<_> = stats
        .files
        .iter()
        .map(|c| (c.path.as_str(), c.is_deleted))
        .collect();
    paths.sort();
    assert_eq!(
        paths,
        [("README.md", true), ("a.py", false), ("src/lib.rs", false)]
    );

    // Cross-check against libgit2's own statistics for the same range.
    let repo = Repository::open(f.dir.path()).unwrap();
    let base_tree = repo.find_commit(f.base).unwrap().tree().unwrap();
    let head_tree = repo.find_commit(f.head).unwrap().tree().unwrap();
    let git_stats = repo
        .diff_tree_to_tree(Some(&base_tree), Some(&head_tree), None)
        .unwrap()
        .stats()
        .unwrap();
    assert_eq!(stats.added_lines() as usize, git_stats.insertions());
    assert_eq!(stats.removed_lines() as usize, git_stats.deletions());
    assert_eq!(stats.changed_files(), git_stats.files_changed());

    // The rendered patch parses to the same counts as the direct path.
    let text = diff_text_between(f.dir.path(), &f.base.to_string(), "HEAD").unwrap();
    assert_eq!(parse_unified_diff(&text).unwrap(), stats);
}

#[test]
fn unknown_revision_is_an_error_naming_it() {
    let f = fixture();
    let err = diff_between(f.dir.path(), "no-such-rev", "HEAD").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("resolve revision `no-such-rev` to a commit in `"),
        "{err}"
    );
}

// S-34: a 10-line diff scores above a 5,000-line diff; the default list is diff_size only.
#[tokio::test]
async fn s34_runner_scores_diff_size_by_default_tight_above_large() {
    let f = fixture();
    let repo = Repository::open(f.dir.path()).unwrap();
    let big = commit(&repo, &[("big.py", Some(&lines(5_000, "z = ")))], "big");
    let scratch = TempDir::new().unwrap();
    let ctx = RunContext::detached(scratch.path().to_path_buf());
    let spec = |base: Oid, head: Oid| RunSpec {
        job_id: "job-1".into(),
        payload: json!({"repo": f.dir.path(), "base": base.to_string(), "head": head.to_string()}),
        timeout: Duration::from_secs(60),
    };
    assert_eq!(CheckerRunner.kind(), "checker");
    let tight = CheckerRunner
        .run(&spec(f.base, f.head), &ctx)
        .await
        .unwrap();
    assert_eq!(tight.exit, ExitClass::Passed);
    let tight: CheckReport = serde_json::from_value(tight.detail).unwrap();
    assert_eq!(tight.dimensions.len(), 1);
    assert_eq!(tight.dimensions[0].name, "diff_size");
    assert_eq!(tight.dimensions[0].raw["changed_lines"], 10);
    assert_eq!(tight.dimensions[0].raw["changed_files"], 3);
    assert_eq!(tight.mean, Some(1.0));

    let large = CheckerRunner.run(&spec(f.head, big), &ctx).await.unwrap();
    let large: CheckReport = serde_json::from_value(large.detail).unwrap();
    assert_eq!(large.dimensions[0].raw["changed_lines"], 5_000);
    assert_eq!(large.mean, Some(0.0));
    assert!(tight.mean > large.mean);
    // diff_size needs no checkout: nothing was written to the scratch dir.
    assert!(!scratch.path().join("head").exists());
}

#[tokio::test]
async fn diff_text_payload_and_custom_caps() {
    let scratch = TempDir::new().unwrap();
    let ctx = RunContext::detached(scratch.path().to_path_buf());
    let diff = format!(
        "--- a/x.go\n+++ b/x.go\n@@ -0,0 +1,150 @@\n{}",
        lines(150, "+l")
    );
    let spec = RunSpec {
        job_id: "job-2".into(),
        payload: json!({"diff": diff, "diff_size": {"soft_cap_lines": 100, "zero_at_lines": 200}}),
        timeout: Duration::from_secs(10),
    };
    let outcome = CheckerRunner.run(&spec, &ctx).await.unwrap();
    let report: CheckReport = serde_json::from_value(outcome.detail).unwrap();
    assert_eq!(report.mean, Some(0.5));
    assert_eq!(outcome.stdout_tail, "diff_size 0.500\nmean 0.500");
}

#[tokio::test]
async fn invalid_payloads_are_refused() {
    let ctx = RunContext::detached(std::env::temp_dir());
    for payload in [
        json!({"repo": "/x"}),
        json!({"diff": "", "checkers": ["typos"]}),
        json!({"diff": 1}),
    ] {
        let spec = RunSpec {
            job_id: "j".into(),
            payload: payload.clone(),
            timeout: Duration::from_secs(1),
        };
        let err = CheckerRunner.run(&spec, &ctx).await.unwrap_err();
        assert!(
            err.to_string()
                .starts_with("invalid payload for runner `checker`: "),
            "{payload}: {err}"
        );
    }
}

#[tokio::test]
async fn missing_repository_fails_with_its_path() {
    let ctx = RunContext::detached(std::env::temp_dir());
    let spec = RunSpec {
        job_id: "j".into(),
        payload: json!({"repo": "/nonexistent/skillforge-repo", "base": "a", "head": "b"}),
        timeout: Duration::from_secs(5),
    };
    let err = CheckerRunner.run(&spec, &ctx).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("open repository `/nonexistent/skillforge-repo`"),
        "{err}"
    );
}

/// A Python profile whose only tool is `argv` for the `lint` dimension.
fn python_profile(argv: &[&str]) -> LanguageProfile {
    LanguageProfile {
        language: "python".into(),
        extensions: vec!["py".into()],
        dimensions: [(
            Checker::Lint,
            DimensionProfile {
                normalize: Normalize::LinearPenalty { per_item: 0.05 },
                tools: vec![ToolSpec {
                    name: argv[0].into(),
                    argv: argv.iter().map(|s| s.to_string()).collect(),
                    ok_exit_codes: vec![0],
                    report_file: None,
                    inherit_env: vec![],
                    count: CountSpec::Json {
                        select: vec!["*".into()],
                        filters: vec![],
                    },
                    locate: None,
                }],
            },
        )]
        .into(),
    }
}

async fn run_with_profile(
    checkers: Vec<Checker>,
    profile: LanguageProfile,
    checkout: Option<&Path>,
) -> CheckReport {
    let f = fixture();
    let stats = diff_between(f.dir.path(), &f.base.to_string(), &f.head.to_string()).unwrap();
    let work = TempDir::new().unwrap();
    let mut config = CheckConfig::new(checkers, Duration::from_secs(30));
    config.profiles = vec![profile];
    let workspace = Workspace {
        checkout: Some(checkout.unwrap_or(f.dir.path())),
        work_dir: work.path(),
    };
    run_checks(&stats, workspace, &config, &Default::default()).await
}

// S-35: a missing tool skips only its dimension (absent, not 0); diff_size still scores.
#[tokio::test]
async fn s35_missing_tool_skips_only_its_dimension() {
    let profile = python_profile(&["skillforge-no-such-linter", "--json"]);
    let report = run_with_profile(
        vec![Checker::DiffSize, Checker::Lint, Checker::Complexity],
        profile,
        None,
    )
    .await;
    let [diff_size, lint, complexity] = &report.dimensions[..] else {
        panic!("{report:?}")
    };
    assert_eq!(diff_size.score, Some(1.0));
    assert_eq!(lint.score, None);
    let reason = lint.skipped.as_deref().unwrap();
    assert!(
        reason.starts_with("python: tool `skillforge-no-such-linter` "),
        "{reason}"
    );
    assert_eq!(complexity.score, None);
    assert_eq!(
        complexity.skipped.as_deref(),
        Some("python: the python profile has no complexity tool")
    );
    assert_eq!(report.mean, Some(1.0));
    assert_eq!(report.dimension_scores(), [("diff_size", 1.0)]);
}

// S-35: all dimensions skipped ⇒ no score (mean None), never a fabricated one.
#[tokio::test]
async fn s35_all_skipped_means_no_score() {
    let profile = python_profile(&["skillforge-no-such-linter"]);
    let report = run_with_profile(vec![Checker::Lint], profile, None).await;
    assert_eq!(report.mean, None);
    assert!(!report.has_score());
    assert!(report.dimensions[0].skipped.is_some());

    // Diff text only: no head checkout, every tool dimension skips with that reason.
    let scratch = TempDir::new().unwrap();
    let payload = CheckerPayload::diff_text(
        "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-a\n+b\n",
        vec![Checker::Lint, Checker::Duplication, Checker::Complexity],
    );
    let report = check(
        &payload,
        scratch.path(),
        Duration::from_secs(5),
        &Default::default(),
    )
    .await
    .unwrap();
    assert_eq!(report.mean, None);
    for dimension in &report.dimensions {
        assert_eq!(
            dimension.skipped.as_deref(),
            Some("no head checkout (diff text only)"),
            "{dimension:?}"
        );
    }
}

#[tokio::test]
async fn tool_dimension_skips_when_no_changed_file_has_a_profile() {
    let scratch = TempDir::new().unwrap();
    let diff = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1 @@\n-a\n+b\n";
    let stats = parse_unified_diff(diff).unwrap();
    let config = CheckConfig::new(vec![Checker::Lint], Duration::from_secs(5));
    let workspace = Workspace {
        checkout: Some(scratch.path()),
        work_dir: scratch.path(),
    };
    let report = run_checks(&stats, workspace, &config, &Default::default()).await;
    assert_eq!(
        report.dimensions[0].skipped.as_deref(),
        Some("no changed file in a profiled language (rust, python, go, javascript)")
    );
}

/// A fake linter printing three issues scores 1 − 3·0.05 (S-34 linear penalty).
#[tokio::test]
async fn fake_tool_output_is_counted_and_normalized() {
    let profile = python_profile(&[
        "sh",
        "-c",
        "printf '[{\"code\":\"F401\"},{\"code\":\"E711\"},{\"code\":\"E501\"}]'",
    ]);
    let report = run_with_profile(vec![Checker::Lint], profile, None).await;
    let lint = &report.dimensions[0];
    assert!(lint.skipped.is_none(), "the fake tool ran: {lint:?}");
    assert!((lint.score.unwrap() - 0.85).abs() < 1e-9, "{lint:?}");
    assert_eq!(lint.raw["languages"]["python"]["count"], 3);
    assert_eq!(lint.raw["languages"]["python"]["tool"], "sh");
}

#[tokio::test]
async fn cancelled_job_reports_killed_without_scores() {
    let f = fixture();
    let scratch = TempDir::new().unwrap();
    let ctx = RunContext::detached(scratch.path().to_path_buf());
    ctx.cancel.cancel();
    let spec = RunSpec {
        job_id: "j".into(),
        payload: json!({"repo": f.dir.path(), "base": f.base.to_string(), "head": f.head.to_string(), "checkers": ["diff_size", "lint"]}),
        timeout: Duration::from_secs(30),
    };
    let outcome = CheckerRunner.run(&spec, &ctx).await.unwrap();
    assert_eq!(outcome.exit, ExitClass::Killed { signal: 15 });
    let report: CheckReport = serde_json::from_value(outcome.detail).unwrap();
    assert_eq!(report.mean, None);
    assert!(
        report
            .dimensions
            .iter()
            .all(|d| d.skipped.as_deref() == Some("cancelled"))
    );
}

#[test]
fn export_tree_writes_head_files_and_leaves_the_repository_alone() {
    let f = fixture();
    let repo = Repository::open(f.dir.path()).unwrap();
    let script_oid = {
        let root = f.dir.path();
        std::fs::write(root.join("run.sh"), "#!/bin/sh\necho hi\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(root.join("run.sh"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        commit(&repo, &[("run.sh", Some("#!/bin/sh\necho hi\n"))], "script")
    };
    let refs_before: Vec<String> = repo
        .references()
        .unwrap()
        .map(|r| r.unwrap().name().unwrap().to_string())
        .collect();
    let config_before = std::fs::read(f.dir.path().join(".git/config")).unwrap();

    let dest = TempDir::new().unwrap();
    let n_files = export_tree(
        f.dir.path(),
        &script_oid.to_string(),
        &dest.path().join("head"),
    )
    .unwrap();
    assert_eq!(n_files, 3);
    let head = dest.path().join("head");
    assert_eq!(
        std::fs::read_to_string(head.join("src/lib.rs")).unwrap(),
        "pub fn f() -> u8 {\n    1\n}\n"
    );
    assert!(head.join("a.py").is_file());
    assert!(!head.join("README.md").exists());
    assert!(!head.join(".git").exists());
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(head.join("run.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o111,
        0o111
    );
    assert_eq!(
        std::fs::metadata(head.join("a.py"))
            .unwrap()
            .permissions()
            .mode()
            & 0o111,
        0
    );

    let refs_after: Vec<String> = repo
        .references()
        .unwrap()
        .map(|r| r.unwrap().name().unwrap().to_string())
        .collect();
    assert_eq!(refs_before, refs_after);
    assert_eq!(
        config_before,
        std::fs::read(f.dir.path().join(".git/config")).unwrap()
    );
}

/// With tool checkers and a repository, the head tree is exported and the tools run there; any
/// shipped tool that is absent on this host skips only its dimension.
#[tokio::test]
async fn shipped_profiles_on_a_real_range_never_fabricate() {
    let f = fixture();
    let scratch = TempDir::new().unwrap();
    let payload = CheckerPayload::commits(
        f.dir.path(),
        f.base.to_string(),
        f.head.to_string(),
        vec![
            Checker::DiffSize,
            Checker::Duplication,
            Checker::Lint,
            Checker::Complexity,
        ],
    );
    let report = check(
        &payload,
        scratch.path(),
        Duration::from_secs(300),
        &Default::default(),
    )
    .await
    .unwrap();
    assert!(scratch.path().join("head/a.py").is_file());
    assert_eq!(report.dimensions[0].score, Some(1.0));
    for dimension in &report.dimensions[1..] {
        match (dimension.score, &dimension.skipped) {
            (Some(score), None) => assert!((0.0..=1.0).contains(&score), "{dimension:?}"),
            (None, Some(reason)) => {
                assert!(!reason.is_empty());
                eprintln!("{} skipped: {reason}", dimension.name);
            }
            _ => panic!("exactly one of score and skipped must be set: {dimension:?}"),
        }
    }
    let scored: Vec<f64> = report.dimensions.iter().filter_map(|d| d.score).collect();
    assert_eq!(
        report.mean,
        Some(scored.iter().sum::<f64>() / scored.len() as f64)
    );
}
