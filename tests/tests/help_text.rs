//! Help a person can act on (issue 35 items 7 and 8): `--help` of every command and subcommand
//! carries no internal ids (rule ids `S-16`, `E-01`, `O-13`, checkpoint ids `CP-2`), code names
//! (`struct …`, `@placeholder@`, "seam"), or "gitmoot" without saying what it is.

use std::process::Command;

use regex::Regex;
use skillforge_tests::bin;

fn help(path: &[String]) -> String {
    let out = Command::new(bin())
        .args(path)
        .arg("--help")
        .output()
        .expect("run --help");
    assert!(
        out.status.success(),
        "skillforge {} --help failed",
        path.join(" ")
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The subcommands a help text lists under `Commands:` (without `help`).
fn subcommands(text: &str) -> Vec<String> {
    let Some(start) = text.find("Commands:\n") else {
        return Vec::new();
    };
    text[start + "Commands:\n".len()..]
        .lines()
        .take_while(|l| l.starts_with("  "))
        // A wrapped description continues deeper indented; a command starts at two spaces.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// Every command path, depth first, with its help text.
fn every_help() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut todo = vec![Vec::<String>::new()];
    while let Some(path) = todo.pop() {
        let text = help(&path);
        for sub in subcommands(&text) {
            let mut next = path.clone();
            next.push(sub);
            todo.push(next);
        }
        out.push((format!("skillforge {}", path.join(" ")), text));
    }
    out
}

#[test]
fn no_internal_ids_or_code_names_in_any_help() {
    let banned = [
        (Regex::new(r"\b[SEO]-\d+\b").unwrap(), "a rule id"),
        (Regex::new(r"\bCP-\d").unwrap(), "a checkpoint id"),
        (Regex::new(r"\bstruct ").unwrap(), "a Rust type"),
        (Regex::new(r"@\w+@").unwrap(), "a payload placeholder"),
        (Regex::new(r"(?i)\bseam\b").unwrap(), "an internal term"),
        (
            Regex::new(r"\b(?:facts|resolutions|DESIGN) ?§ ?\d|\bresolutions \d|\bissue \d+|\(seed\b|\bseed:|\bthe seed\b|crate::|loop\.md")
                .unwrap(),
            "a citation of where a rule comes from",
        ),
        (Regex::new(r"\bMode [AB]\b").unwrap(), "an internal mode name"),
        // A constant's name, not a flag's `<MAX_WORDS>` value placeholder.
        (
            Regex::new(r"(?:^|[^<A-Z_])(MAX_[A-Z_]+)\b").unwrap(),
            "a constant's name",
        ),
    ];
    let gitmoot = Regex::new(r"(?i)gitmoot").unwrap();
    let helps = every_help();
    assert!(helps.len() > 60, "found only {} commands", helps.len());
    let mut found = Vec::new();
    for (command, text) in &helps {
        // clap wraps lines: a citation can straddle a line break.
        let text = &text.split_whitespace().collect::<Vec<_>>().join(" ");
        for (re, what) in &banned {
            for m in re.find_iter(text) {
                found.push(format!("{command}: {what} `{}`", m.as_str()));
            }
        }
        // "gitmoot" only with what it is: the Go tool whose training-package format is kept.
        if gitmoot.is_match(text) && !text.contains("gitmoot (the Go") {
            found.push(format!("{command}: `gitmoot` unexplained"));
        }
    }
    assert!(
        found.is_empty(),
        "{} finding(s):\n{}",
        found.len(),
        found.join("\n")
    );
}

/// No runtime is assumed (issue 35 item 7): `eval forge` and `eval brief --theme` without
/// `--runtime`/`FORGE_AGENT`, and a judged `ab` without `[skillopt] review_runtimes`, stop with
/// exit 2 naming what to set, before anything runs.
#[test]
fn no_runtime_is_assumed_for_the_eval_arms_or_the_ab_judge() {
    let home = skillforge_tests::Home::embedded();
    let skill = skillforge_tests::write(
        &home.path().join("in/notes/SKILL.md"),
        "---\nname: notes\ndescription: d\n---\nbody\n",
    );
    let brief = skillforge_tests::write(
        &home.path().join("in/brief.json"),
        r#"{"id": "b1", "prompt": "p", "verify": "true", "rubric": "r", "output": "reply"}"#,
    );
    let run = |args: &[&str]| {
        home.cmd()
            .env_remove("FORGE_AGENT")
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&[
        "eval",
        "forge",
        "--brief",
        brief.to_str().unwrap(),
        "--skill-dir",
        skill.parent().unwrap().to_str().unwrap(),
        "--install-root",
        home.path().join("inst").to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--runtime") && err.contains("FORGE_AGENT") && err.contains("claude, codex"),
        "{err}"
    );
    let theme = skillforge_tests::write(&home.path().join("in/theme.json"), "{}");
    let out = run(&[
        "eval",
        "brief",
        "--knowledge-gap",
        "--theme",
        theme.to_str().unwrap(),
        "--out",
        home.path().join("b.json").to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.code() == Some(2) && err.contains("--runtime") && err.contains("FORGE_AGENT"),
        "{err}"
    );

    let out = run(&["ab", "planner", "question", "--judge", "--pick", "a"]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.code() == Some(2)
            && err.contains("[skillopt] review_runtimes")
            && err.contains("config.toml"),
        "{err}"
    );
    assert_eq!(
        home.json(&["jobs", "list"]),
        serde_json::json!([]),
        "nothing ran"
    );
}

/// Global flags are listed once, in their own `Global options:` group after each command's own
/// options, never interleaved with them (issue 35 item 8).
#[test]
fn global_flags_are_listed_once_after_each_commands_own_options() {
    let global =
        Regex::new(r"(?m)^\s+(?:-[vq], )?--(home|queue|json|verbose|quiet)(?:\s|\.\.\.|$)")
            .unwrap();
    let mut found = Vec::new();
    for (command, text) in every_help() {
        let Some(at) = text.find("\nGlobal options:\n") else {
            found.push(format!("{command}: no `Global options:` group"));
            continue;
        };
        let (own, globals) = text.split_at(at);
        if let Some(m) = global.find(own) {
            found.push(format!(
                "{command}: `{}` among the command's own options",
                m.as_str().trim()
            ));
        }
        let listed: Vec<&str> = global
            .captures_iter(globals)
            .map(|c| c.get(1).unwrap().as_str())
            .collect();
        if listed != ["home", "queue", "json", "verbose", "quiet"] {
            found.push(format!("{command}: global group lists {listed:?}"));
        }
    }
    assert!(
        found.is_empty(),
        "{} finding(s):\n{}",
        found.len(),
        found.join("\n")
    );
}

/// The JSON Schemas an editor shows while a person writes a file say no rule ids, citations,
/// Rust or Go type talk (they are generated from docstrings that do: `contract::schema::for_users`).
#[test]
fn the_checked_in_schemas_read_without_internal_ids_or_citations() {
    let banned = Regex::new(
        r"\b[SEO]-\d+\b|\bCP-\d|\b(?:facts|resolutions|DESIGN) ?§|\bissue \d+|\(seed\b|\bseed:|crate::|loop\.md|Go struct|\bMode [AB]\b|Ours:",
    )
    .unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/schemas");
    let mut found = Vec::new();
    for file in std::fs::read_dir(&dir).unwrap() {
        let path = file.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for m in banned.find_iter(&text) {
            found.push(format!("{}: `{}`", path.display(), m.as_str()));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}
