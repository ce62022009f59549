//! A team's first day (issue 35 items 2 and 3): `skillforge init` writes a home whose every
//! starter file is valid as written — each is fed to the command that reads it — and names its
//! schema; `init` refuses to overwrite; `skillforge schema NAME` prints the checked-in schema.

use std::path::Path;

use serde_json::Value;
use skillforge_tests::{Home, git, ok, path_arg, run_code, write};

/// The starter files `init` writes, relative to the home, with the schema each names.
const STARTERS: &[(&str, &str)] = &[
    ("skills/example-skill/SKILL.md", "agent-template-metadata.json"),
    ("evals/briefs/example-brief.json", "eval-brief.json"),
    ("train/items.yml", "train-items.json"),
    ("optimize/spec.yml", "optimize-spec.json"),
    ("bineval/questions.yml", "bineval-question-set.json"),
    ("config.toml", "config.json"),
];

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

#[test]
fn init_writes_a_home_whose_starter_files_are_valid_as_written() {
    let home = Home::embedded();
    let (out, _) = run_code(&home, &["init"], 0);
    assert!(out.contains("doctor") && out.contains("template add"), "init says what to run next:\n{out}");
    let h = home.path();
    for (file, schema) in STARTERS {
        let text = read(&h.join(file));
        assert!(text.contains(schema), "{file} names its schema {schema}:\n{text}");
        assert!(h.join("schemas").join(schema).is_file(), "init writes schemas/{schema}");
    }

    // config.toml: every command loads it (it is all comments).
    ok(&home, &["template", "list"]);

    // The skill: `template add DIR`, derived defaults shown.
    let skill_dir = h.join("skills/example-skill");
    let added = home.json(&["template", "add", path_arg(&skill_dir)]);
    assert_eq!(added["version_id"], "example-skill@v1", "{added:#}");

    // The eval brief.
    let brief = h.join("evals/briefs/example-brief.json");
    ok(&home, &["eval", "brief", "--check", path_arg(&brief)]);

    // The items file, on the starter skill.
    let items = h.join("train/items.yml");
    let started = home.json(&["train", "start", "--template", "example-skill", "--repo", "me/project", "--request", "name the effect", "--items-file", path_arg(&items), "--yes", "--session", "first", "--workspace-repo", "me/workspace"]);
    assert_eq!(started["state"], "items_ready", "{started:#}");

    // The BINEVAL set, deterministically on an output.
    ok(&home, &["review", "create", "--template", "example-skill", "--repo", "me/project", "--run", "b1"]);
    let output = write(&h.join("in/summary.md"), "Login accepts passwords up to 256 characters\n");
    let scored = home.json(&["binary", "run", "--set", path_arg(&h.join("bineval/questions.yml")), "--run", "b1", "--source", path_arg(&output), "--deterministic"]);
    assert!(scored.to_string().contains("names-effect"), "{scored:#}");

    // The optimize spec, in a repository that has its measurement command.
    let repo = tempfile::tempdir().unwrap();
    let r = repo.path();
    write(&r.join("src/app.sh"), "echo work\n");
    write(&r.join("measure.sh"), "#!/bin/sh\nsh src/app.sh >/dev/null\necho '{\"metrics\": {\"seconds\": 1.5}}'\n");
    git(r, &["init", "-q", "-b", "main"]);
    git(r, &["add", "-A"]);
    git(r, &["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "app"]);
    let spec = h.join("optimize/spec.yml");
    let out = home.run(&["optimize", "init", "--spec", path_arg(&spec), "--repo", path_arg(r)]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "optimize init on the starter spec:\n{stderr}");
}

#[test]
fn init_refuses_to_overwrite_and_names_every_existing_file() {
    let home = Home::embedded();
    let dir = home.path().join("team-home");
    write(&dir.join("config.toml"), "[worker]\nconcurrency = 2\n");
    write(&dir.join("train/items.yml"), "mine\n");
    let (_, err) = run_code(&home, &["init", path_arg(&dir)], 2);
    assert!(err.contains("config.toml") && err.contains("train/items.yml") && err.contains("nothing was written"), "{err}");
    assert_eq!(read(&dir.join("config.toml")), "[worker]\nconcurrency = 2\n");
    assert!(!dir.join("skills").exists() && !dir.join("schemas").exists(), "nothing written");
    // Into a fresh DIR it works, and a second run refuses.
    let fresh = home.path().join("fresh");
    ok(&home, &["init", path_arg(&fresh)]);
    assert!(fresh.join("skills/example-skill/SKILL.md").is_file());
    let (_, err) = run_code(&home, &["init", path_arg(&fresh)], 2);
    assert!(err.contains("skills/example-skill/SKILL.md"), "{err}");
}

#[test]
fn schema_prints_the_checked_in_schema_and_lists_them() {
    let home = Home::embedded();
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/schemas");
    for name in ["config", "eval-brief", "optimize-spec", "train-items", "bineval-question-set", "feedback-yml", "agent-template-metadata"] {
        let printed = ok(&home, &["schema", name]);
        assert_eq!(printed, read(&docs.join(format!("{name}.json"))), "{name}");
    }
    let listed = home.json(&["schema"]);
    assert!(listed.as_array().unwrap().iter().any(|e| e["name"] == "optimize-spec"), "{listed:#}");
    let (_, err) = run_code(&home, &["schema", "nope"], 2);
    assert!(err.contains("no schema `nope`") && err.contains("eval-brief"), "{err}");
    let _: Value = serde_json::from_str(&ok(&home, &["schema", "config"])).unwrap();
}
