//! The shipped Python and JavaScript profiles against their real tools (issue 13 item 5): ruff,
//! radon and lizard (pip), eslint and jscpd (npm), installed by `scripts/test`. Each test builds a
//! small project in a real git repository whose head adds files with known problems, runs the
//! checker over the range with the shipped profiles, and checks which tool measured each
//! dimension, its count and the score `max(0, 1 - per_item * count)`. A tool that exits with its
//! "found issues" code is a measurement, not a tool error. Go's tools are not installable here;
//! its profile is covered by recorded output in the crate's unit tests.

use std::time::Duration;

use git2::{Repository, Signature};
use serde_json::Value;
use skillforge_runner_checker::{
    CheckConfig, CheckReport, Checker, LanguageProfile, Workspace, diff_between, run_checks,
    shipped_profiles,
};
use tempfile::TempDir;

/// Panics unless `tool` is on PATH: these tests measure the real tool, never skip it.
fn require(tool: &str) {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
        .unwrap_or(false);
    assert!(
        found,
        "`{tool}` is not on PATH: scripts/test installs it (pip: ruff radon lizard; npm: eslint jscpd)"
    );
}

fn commit_all(repo: &Repository, message: &str) -> git2::Oid {
    let mut index = repo.index().unwrap();
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .unwrap();
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

/// A repository whose base holds a README and whose head adds `files`; runs `checkers` over the
/// range with `profiles`.
async fn measure(
    files: &[(&str, String)],
    checkers: Vec<Checker>,
    profiles: Vec<LanguageProfile>,
) -> CheckReport {
    let dir = TempDir::new().unwrap();
    let repo = Repository::init(dir.path()).unwrap();
    std::fs::write(dir.path().join("README.md"), "# sample\n").unwrap();
    let base = commit_all(&repo, "base");
    for (path, text) in files {
        let full = dir.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
    }
    let head = commit_all(&repo, "head");
    let stats = diff_between(dir.path(), &base.to_string(), &head.to_string()).unwrap();
    let work = TempDir::new().unwrap();
    let mut config = CheckConfig::new(checkers, Duration::from_secs(120));
    config.profiles = profiles;
    let workspace = Workspace {
        checkout: Some(dir.path()),
        work_dir: work.path(),
    };
    run_checks(&stats, workspace, &config, &Default::default()).await
}

fn profile(language: &str) -> LanguageProfile {
    shipped_profiles()
        .iter()
        .find(|p| p.language == language)
        .unwrap_or_else(|| panic!("no shipped {language} profile"))
        .clone()
}

/// (tool, count, score) of `language` in dimension `name`; panics with the report when absent.
fn measured(report: &CheckReport, name: &str, language: &str) -> (String, u64, f64) {
    let dimension = report.dimensions.iter().find(|d| d.name == name).unwrap();
    let entry: &Value = &dimension.raw["languages"][language];
    let tool = entry["tool"]
        .as_str()
        .unwrap_or_else(|| panic!("{name}/{language} was not measured: {dimension:?}"));
    (
        tool.to_owned(),
        entry["count"].as_u64().unwrap(),
        entry["score"].as_f64().unwrap(),
    )
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// A function with 16 branches (cyclomatic complexity 16 > 15), two unused imports.
fn python_module() -> String {
    let mut text = String::from("import os\nimport sys\n\n\ndef pick(x):\n");
    for i in 1..=15 {
        let keyword = if i == 1 { "if" } else { "elif" };
        text.push_str(&format!("    {keyword} x == {i}:\n        return {i}\n"));
    }
    text.push_str("    return 0\n");
    text
}

/// Two files with one 16-line block in common (one clone for jscpd).
fn python_clones() -> Vec<(&'static str, String)> {
    ["dup1", "dup2"]
        .iter()
        .enumerate()
        .map(|(n, name)| {
            let mut text = format!("def total_{n}(values):\n    total = 0\n");
            for i in 0..14 {
                text.push_str(&format!("    total = total + values[{i}] * {i}\n"));
            }
            text.push_str("    return total\n");
            (
                if *name == "dup1" {
                    "pkg/dup1.py"
                } else {
                    "pkg/dup2.py"
                },
                text,
            )
        })
        .collect()
}

#[tokio::test]
async fn python_profile_measures_ruff_radon_and_jscpd_output() {
    for tool in ["ruff", "radon", "jscpd"] {
        require(tool);
    }
    let mut files = vec![("pkg/pick.py", python_module())];
    files.extend(python_clones());
    let report = measure(
        &files,
        vec![Checker::Lint, Checker::Complexity, Checker::Duplication],
        vec![profile("python")],
    )
    .await;
    let (tool, count, score) = measured(&report, "lint", "python");
    assert_eq!(
        (tool.as_str(), count),
        ("ruff", 2),
        "F401 twice: {report:?}"
    );
    assert!(close(score, 0.9), "1 - 0.05 * 2: {score}");
    let (tool, count, score) = measured(&report, "complexity", "python");
    assert_eq!(
        (tool.as_str(), count),
        ("radon", 1),
        "pick() is over 15: {report:?}"
    );
    assert!(close(score, 0.9), "1 - 0.1 * 1: {score}");
    let (tool, count, score) = measured(&report, "duplication", "python");
    assert_eq!(
        (tool.as_str(), count),
        ("jscpd", 1),
        "one clone: {report:?}"
    );
    assert!(close(score, 0.9), "{score}");
}

/// Without radon, the profile's second complexity tool (lizard) measures the same function.
#[tokio::test]
async fn python_complexity_falls_back_to_lizard() {
    require("lizard");
    let mut python = profile("python");
    let complexity = python.dimensions.get_mut(&Checker::Complexity).unwrap();
    complexity.tools.retain(|t| t.name == "lizard");
    assert_eq!(
        complexity.tools.len(),
        1,
        "the shipped profile lists lizard"
    );
    let report = measure(
        &[("pkg/pick.py", python_module())],
        vec![Checker::Complexity],
        vec![python],
    )
    .await;
    let (tool, count, score) = measured(&report, "complexity", "python");
    assert_eq!((tool.as_str(), count), ("lizard", 1), "{report:?}");
    assert!(close(score, 0.9), "{score}");
}

/// A flat ESLint config with two rules; `lib/d.js` breaks them three times (exit 1: found).
const ESLINT_CONFIG: &str = "export default [{ files: [\"**/*.js\"], languageOptions: { sourceType: \"commonjs\" }, \
rules: { \"no-unused-vars\": \"error\", \"no-var\": \"error\" } }];\n";

fn javascript_files() -> Vec<(&'static str, String)> {
    let clone = |n: &str| {
        let mut text = format!("function sum_{n}(values) {{\n  let total = 0;\n");
        for i in 0..14 {
            text.push_str(&format!("  total = total + values[{i}] * {i};\n"));
        }
        text.push_str(&format!(
            "  return total;\n}}\nmodule.exports = {{ sum_{n} }};\n"
        ));
        text
    };
    let mut branches = String::from("function g(x) {\n");
    for i in 0..16 {
        branches.push_str(&format!("  if (x === {i}) {{ return {i}; }}\n"));
    }
    branches.push_str("  return 0;\n}\nmodule.exports = { g };\n");
    vec![
        ("eslint.config.mjs", ESLINT_CONFIG.to_owned()),
        (
            "lib/d.js",
            "var unused = 1;\nfunction f(a) { return 2; }\nmodule.exports = { f };\n".to_owned(),
        ),
        ("lib/b.js", clone("b")),
        ("lib/c.js", clone("c")),
        ("lib/e.js", branches),
    ]
}

#[tokio::test]
async fn javascript_profile_measures_eslint_jscpd_and_lizard_output() {
    for tool in ["eslint", "jscpd", "lizard"] {
        require(tool);
    }
    let report = measure(
        &javascript_files(),
        vec![Checker::Lint, Checker::Duplication, Checker::Complexity],
        vec![profile("javascript")],
    )
    .await;
    // eslint exits 1 when it finds problems: a measurement (ok_exit_codes), not a tool error.
    let (tool, count, score) = measured(&report, "lint", "javascript");
    assert_eq!(
        (tool.as_str(), count),
        ("eslint", 3),
        "no-var, two unused: {report:?}"
    );
    assert!(close(score, 0.85), "1 - 0.05 * 3: {score}");
    let (tool, count, score) = measured(&report, "duplication", "javascript");
    assert_eq!((tool.as_str(), count), ("jscpd", 1), "{report:?}");
    assert!(close(score, 0.9), "{score}");
    let (tool, count, score) = measured(&report, "complexity", "javascript");
    assert_eq!(
        (tool.as_str(), count),
        ("lizard", 1),
        "g() is over 15: {report:?}"
    );
    assert!(close(score, 0.9), "{score}");
}

/// eslint without a config file exits 2 (a configuration error): the lint dimension is skipped
/// with the tool's failure, never scored as clean.
#[tokio::test]
async fn eslint_without_a_config_is_a_tool_error_not_a_clean_score() {
    require("eslint");
    let files: Vec<(&str, String)> = javascript_files()
        .into_iter()
        .filter(|(path, _)| *path != "eslint.config.mjs")
        .collect();
    let report = measure(&files, vec![Checker::Lint], vec![profile("javascript")]).await;
    let lint = &report.dimensions[0];
    assert_eq!(lint.score, None, "{lint:?}");
    let reason = lint.skipped.as_deref().unwrap();
    assert!(
        reason.contains("eslint") && reason.contains('2'),
        "names the tool and its exit code: {reason}"
    );
}
