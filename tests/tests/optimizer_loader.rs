//! Exports load through a check equivalent to the external optimizer's data loader
//! (`skillforge_tests::loader`; issue 13 items 1, 3, 4): an A/B run, a ranked run, a train
//! iteration's package as the optimizer job receives it, an auto-trace run and the demo's package,
//! the last three from a relative home. Artifacts carry a driver the loader reads; auto-trace item
//! ids, which it refuses, are the only refusal, and `export` warns naming them.

use std::path::{Path, PathBuf};

use serde_json::Value;
use skillforge_contract::validate_training_package_json;
use skillforge_tests::loader::{LoadedItem, load_like_optimizer};
use skillforge_tests::{
    CODER_TEMPLATE, Home, HomeArg, PLANNER_TEMPLATE, add_template, bin, git, path_arg, run_code,
    write,
};

fn install_template(home: &Home) {
    add_template(home, PLANNER_TEMPLATE, "owner/repo");
}

/// `export --json --run RUN`: (the export's JSON report, the package, stderr).
fn export(home: &Home, run: &str) -> (Value, Value, String) {
    let out = home
        .path()
        .join(format!("out/{}.json", run.replace([':', '@'], "_")));
    let (stdout, stderr) = run_code(
        home,
        &["--json", "export", "--run", run, "--output", path_arg(&out)],
        0,
    );
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let bytes = std::fs::read_to_string(&out).unwrap();
    validate_training_package_json(&bytes).expect("the contract validator accepts the export");
    (report, serde_json::from_str(&bytes).unwrap(), stderr)
}

/// Loads the package against the artifact root the export names; panics with the refusals.
fn load(package: &Value, artifact_root: &Path) -> Vec<LoadedItem> {
    load_like_optimizer(package, artifact_root).unwrap_or_else(|errors| {
        panic!(
            "the optimizer's loader refuses the package:\n{}",
            errors.join("\n")
        )
    })
}

fn drivers(package: &Value) -> Vec<(String, String)> {
    package["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["media_type"].as_str().unwrap().to_owned(),
                a["driver"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn an_ab_run_export_loads_with_text_drivers_and_its_files_text() {
    let home = Home::embedded();
    install_template(&home);
    home.json(&[
        "review",
        "create",
        "--template",
        "planner",
        "--repo",
        "owner/repo",
        "--run",
        "ab-1",
    ]);
    for (item, ext) in [
        ("plan-md", "md"),
        ("plan-txt", "txt"),
        ("plan-diff", "diff"),
    ] {
        let baseline = write(
            &home.path().join(format!("in/{item}-baseline.{ext}")),
            &format!("{item} baseline\n"),
        );
        let candidate = write(
            &home.path().join(format!("in/{item}-candidate.{ext}")),
            &format!("{item} candidate\n"),
        );
        home.json(&[
            "review",
            "item",
            "add",
            "--run",
            "ab-1",
            "--item",
            item,
            "--baseline",
            path_arg(&baseline),
            "--candidate",
            path_arg(&candidate),
        ]);
    }
    let (report, package, stderr) = export(&home, "ab-1");
    assert_eq!(report["warnings"], serde_json::json!([]), "{report:#}");
    assert!(!stderr.contains("warning"), "{stderr}");
    let mut seen = drivers(&package);
    seen.sort();
    seen.dedup();
    let want = [
        ("text/markdown", "markdown"),
        ("text/plain", "text"),
        ("text/x-diff", "text"),
    ];
    assert_eq!(seen, want.map(|(m, d)| (m.to_owned(), d.to_owned())));
    let items = load(
        &package,
        Path::new(report["artifact_root"].as_str().unwrap()),
    );
    assert_eq!(items.len(), 3);
    let diff = items.iter().find(|i| i.id == "plan-diff").unwrap();
    assert_eq!(diff.artifacts["baseline"], "plan-diff baseline\n");
    assert_eq!(diff.artifacts["candidate"], "plan-diff candidate\n");
}

#[test]
fn a_ranked_run_export_with_feedback_loads_every_option() {
    let home = Home::embedded();
    install_template(&home);
    home.json(&[
        "review",
        "create",
        "--template",
        "planner",
        "--repo",
        "owner/web",
        "--run",
        "rank-1",
        "--mode",
        "explore",
        "--options",
        "4",
    ]);
    for (item, split) in [
        ("hero-001", "train"),
        ("hero-002", "val"),
        ("hero-003", "test"),
    ] {
        let mut args: Vec<String> = ["review", "item", "add", "--run", "rank-1", "--item", item]
            .map(String::from)
            .to_vec();
        for label in ["a", "b", "c", "d"] {
            let file = write(
                &home.path().join(format!("in/{item}-{label}.md")),
                &format!("{item} option {label}\n"),
            );
            args.extend(["--option".to_owned(), format!("{label}={}", file.display())]);
        }
        args.extend([
            "--metadata-json".to_owned(),
            format!(r#"{{"split":"{split}"}}"#),
        ]);
        home.json(&args.iter().map(String::as_str).collect::<Vec<_>>());
    }
    let packet = home.path().join("packet");
    home.json(&[
        "feedback",
        "markdown",
        "export",
        "--run",
        "rank-1",
        "--output",
        path_arg(&packet),
        "--force",
    ]);
    write(
        &packet.join("feedback.yml"),
        "run_id: rank-1\nreviewer: alice\nitems:\n  - item_id: hero-001\n    ranking: c > a = d > b\n\
         \x20 - item_id: hero-002\n    ranking: a > b > c > d\n  - item_id: hero-003\n    ranking: d > c > b > a\n",
    );
    home.json(&[
        "feedback",
        "markdown",
        "import",
        "--packet",
        path_arg(&packet),
    ]);
    let (report, package, _) = export(&home, "rank-1");
    assert_eq!(
        package["ranked_feedback_events"].as_array().unwrap().len(),
        3
    );
    assert!(
        drivers(&package)
            .iter()
            .all(|(m, d)| m == "text/markdown" && d == "markdown"),
        "{:?}",
        drivers(&package)
    );
    let items = load(
        &package,
        Path::new(report["artifact_root"].as_str().unwrap()),
    );
    let hero = items.iter().find(|i| i.id == "hero-002").unwrap();
    let roles: Vec<&str> = hero.artifacts.keys().map(String::as_str).collect();
    assert_eq!(roles, ["option:a", "option:b", "option:c", "option:d"]);
    assert_eq!(hero.artifacts["option:c"], "hero-002 option c\n");
}

/// The home's artifact rows as an older build stored them (driver `local`) export loadable
/// drivers, and so does a run reviewed after that build.
#[test]
fn a_home_written_with_driver_local_exports_loadable_drivers() {
    let home = Home::embedded();
    install_template(&home);
    home.json(&[
        "review",
        "create",
        "--template",
        "planner",
        "--repo",
        "owner/repo",
        "--run",
        "old-1",
    ]);
    let baseline = write(&home.path().join("in/b.md"), "old baseline\n");
    let candidate = write(&home.path().join("in/c.md"), "old candidate\n");
    home.json(&[
        "review",
        "item",
        "add",
        "--run",
        "old-1",
        "--item",
        "i1",
        "--baseline",
        path_arg(&baseline),
        "--candidate",
        path_arg(&candidate),
    ]);
    // What every build before this one wrote into eval_artifacts.driver.
    let db = home.path().join("skillforge.db");
    let out = std::process::Command::new("sqlite3")
        .arg(&db)
        .arg("UPDATE eval_artifacts SET driver = 'local';")
        .output();
    let out = out.expect("sqlite3 is installed (scripts/test installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (report, package, _) = export(&home, "old-1");
    assert!(
        drivers(&package).iter().all(|(_, d)| d == "markdown"),
        "{:?}",
        drivers(&package)
    );
    load(
        &package,
        Path::new(report["artifact_root"].as_str().unwrap()),
    );
}

const ITEMS: &str = "items:\n  - id: fix-login\n    title: Describe the login fix\n    input: |\n      -    check(password)\n      +    check_hashed(password)\n  - id: add-cache\n    title: Describe the cache\n    input: adds an LRU cache in front of the user lookup\n";

/// A train iteration from a relative home (`SKILLFORGE_HOME=rel-home`, and its worker too): the
/// optimizer backend records the arguments its job got and runs the built-in optimizer; every
/// path it got is absolute, and its training package loads against its `--artifact-root`.
#[test]
fn a_train_iteration_package_loads_as_its_optimizer_job_receives_it_from_a_relative_home() {
    let home = Home::with(HomeArg::RelativeEnv, None);
    let argv_file = home.path().join("optimizer-argv.txt");
    let script = write(
        &home.path().join("record.sh"),
        &format!(
            "#!/bin/sh\nprintf '%s\\n' \"$PWD\" \"$@\" > '{}'\nexec '{}' optimizer distill \"$@\"\n",
            argv_file.display(),
            bin().display()
        ),
    );
    write(
        &home.path().join("train.toml"),
        &format!(
            "[backends.record]\ncommand = [\"sh\", \"{}\"]\n",
            path_arg(&script)
        ),
    );
    install_template(&home);
    let items = write(&home.path().join("in/items.yml"), ITEMS);
    let mut args = vec![
        "train",
        "start",
        "--template",
        "planner",
        "--repo",
        "owner/repo",
        "--request",
        "clearer summaries",
    ];
    args.extend([
        "--items-file",
        path_arg(&items),
        "--yes",
        "--session",
        "s1",
        "--options",
        "3",
        "--workspace-repo",
        "owner/workspace",
    ]);
    home.json(&args);
    run_code(&home, &["train", "continue", "--session", "s1"], 4);
    let status = home.json(&["train", "status", "--session", "s1", "--detail"]);
    let packet = PathBuf::from(
        status["review_packet"]
            .as_str()
            .expect("review packet published"),
    );
    assert!(packet.is_absolute(), "{}", packet.display());
    let run = status["iteration_id"].as_str().unwrap();
    write(
        &packet.join("feedback.yml"),
        &format!(
            "run_id: {run}\nreviewer: alice\nitems:\n  - item_id: add-cache\n    ranking: \"b > a > c\"\n    required_improvements: [name the effect first]\n  - item_id: fix-login\n    ranking: \"a > c > b\"\n"
        ),
    );
    run_code(
        &home,
        &[
            "train",
            "continue",
            "--session",
            "s1",
            "--backend",
            "record",
        ],
        0,
    );
    assert_eq!(
        home.json(&["train", "status", "--session", "s1"])["current_phase"],
        "candidate_created"
    );

    let argv = std::fs::read_to_string(&argv_file).expect("the optimizer backend ran");
    let mut lines = argv.lines();
    let cwd = PathBuf::from(lines.next().unwrap());
    let argv: Vec<&str> = lines.collect();
    let flag = |name: &str| {
        PathBuf::from(
            argv[argv
                .iter()
                .position(|a| *a == name)
                .unwrap_or_else(|| panic!("{name} in {argv:?}"))
                + 1],
        )
    };
    for name in [
        "--training-package",
        "--artifact-root",
        "--out-root",
        "--candidate-output",
    ] {
        assert!(
            flag(name).is_absolute(),
            "{name} {} handed to the job is relative (job cwd {})",
            flag(name).display(),
            cwd.display()
        );
    }
    let package: Value =
        serde_json::from_str(&std::fs::read_to_string(flag("--training-package")).unwrap())
            .unwrap();
    assert!(
        drivers(&package)
            .iter()
            .all(|(m, d)| m == "text/markdown" && d == "markdown"),
        "{:?}",
        drivers(&package)
    );
    let items = load(&package, &flag("--artifact-root"));
    assert_eq!(items.len(), 2);
    assert!(items.iter().all(|i| i.artifacts.len() == 3), "{items:?}");
}

/// An auto-trace run from a relative home (`--home rel-home`): the artifacts load (it has none),
/// the item ids are refused by the loader, and `export` warns naming each of them.
#[test]
fn an_auto_trace_export_is_refused_only_for_its_ids_and_export_names_them() {
    let home = Home::with(HomeArg::RelativeFlag, None);
    write(
        &home.path().join("config.toml"),
        "[skillopt]\nauto_trace_enabled = true\n",
    );
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    for pr in ["1", "2"] {
        home.json(&[
            "harvest",
            "attribute",
            "--repo",
            "acme/app",
            "--pr",
            pr,
            "--template",
            "coder@v1",
            "--resolved-commit",
            "c0ffee",
        ]);
    }
    home.json(&[
        "harvest",
        "outcome",
        "--repo",
        "acme/app",
        "--pr",
        "1",
        "--outcome",
        "merged",
        "--ci",
        "external",
        "--head",
        "aaa",
    ]);
    home.json(&[
        "harvest",
        "outcome",
        "--repo",
        "acme/app",
        "--pr",
        "2",
        "--outcome",
        "blocked",
    ]);
    let (report, package, stderr) = export(&home, "auto-trace:coder@v1");
    let ids: Vec<&str> = package["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["acme/app#1", "acme/app#2"], "Go's id format is kept");
    let refusals = load_like_optimizer(
        &package,
        Path::new(report["artifact_root"].as_str().unwrap()),
    )
    .unwrap_err();
    assert_eq!(
        refusals,
        ids.iter()
            .map(|id| format!(
                "item {id:?}: Gitmoot item id {id:?} is not safe for filesystem output"
            ))
            .collect::<Vec<_>>()
    );
    let warnings = report["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 2, "{report:#}");
    for id in &ids {
        assert!(
            stderr.contains(&format!(
                "item id \"{id}\" is not safe for filesystem output"
            )),
            "{stderr}"
        );
        assert!(
            warnings
                .iter()
                .any(|w| w.as_str().unwrap().contains(&format!("\"{id}\""))),
            "{warnings:?}"
        );
    }
    assert!(
        stderr.contains("docs/train.md")
            && std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/train.md"))
                .unwrap()
                .contains("## Exporting for the external optimizer"),
        "the warning says where it is explained: {stderr}"
    );
}

/// `skillforge --home rel-home demo` (a relative home) runs to its pending candidate, and the
/// demo's training package loads against the home's blob store.
#[test]
fn the_demo_from_a_relative_home_ends_with_a_candidate_and_a_loadable_package() {
    let repo = tempfile::tempdir().unwrap();
    let p = repo.path();
    git(p, &["init", "-q", "-b", "main"]);
    for (n, body) in [
        "pub fn one() -> u8 { 1 }\n",
        "pub fn two() -> u8 { 2 }\n",
        "pub fn three() -> u8 { 3 }\n",
    ]
    .iter()
    .enumerate()
    {
        write(&p.join(format!("src/f{n}.rs")), body);
        git(p, &["add", "-A"]);
        git(p, &["commit", "-q", "-m", &format!("add f{n}")]);
    }
    let home = Home::with(HomeArg::RelativeFlag, None);
    let (stdout, _) = run_code(&home, &["demo", "--repo", path_arg(p)], 0);
    assert!(
        stdout.contains("pending candidate: change-summarizer@v2"),
        "{stdout}"
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with("training package"))
        .unwrap_or_else(|| panic!("{stdout}"));
    let training = PathBuf::from(line["training package".len()..].trim());
    assert!(
        training.is_absolute() && training.starts_with(home.path()),
        "{}",
        training.display()
    );
    let package: Value =
        serde_json::from_str(&std::fs::read_to_string(&training).unwrap()).unwrap();
    let items = load(&package, &home.path().join("blobs"));
    assert_eq!(items.len(), 3, "one item per commit");
}
