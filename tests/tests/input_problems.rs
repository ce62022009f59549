//! A team's first day, the files they write (issue 35 item 1): a brief, an optimize spec, an items
//! file or a BINEVAL question set with several problems is refused with every problem at once,
//! each naming the file, the key path and what is allowed, exit 2 and nothing stored; and
//! `optimize init` on a directory it cannot start from says what is wrong and what to do
//! (issue 35 item 2), writing nothing.

use std::path::Path;

use skillforge_tests::{Home, git, ok, path_arg, run_code, write};

/// Every file and directory under `dir` with its size, sorted (what a refused command must not
/// change).
fn listing(dir: &Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let meta = e.metadata().unwrap();
            if meta.is_dir() {
                stack.push(p.clone());
            }
            out.push((p.display().to_string(), meta.len()));
        }
    }
    out.sort();
    out
}

/// Asserts every line of `want` is in `stderr`, and the problem count.
fn assert_lists(stderr: &str, count: usize, want: &[&str]) {
    assert!(
        stderr.contains(&format!("{count} problems:")),
        "{count} problems listed:\n{stderr}"
    );
    for w in want {
        assert!(stderr.contains(w), "{w:?} missing from:\n{stderr}");
    }
}

/// A repository with one commit holding `measure.sh` and `src/app.sh`.
fn project() -> tempfile::TempDir {
    let repo = tempfile::tempdir().unwrap();
    let r = repo.path();
    write(&r.join("src/app.sh"), "echo work\n");
    write(
        &r.join("measure.sh"),
        "#!/bin/sh\necho '{\"metrics\": {\"ops\": 12}}'\n",
    );
    git(r, &["init", "-q", "-b", "main"]);
    git(r, &["add", "-A"]);
    git(r, &["commit", "-q", "-m", "app"]);
    repo
}

const SPEC: &str = "\
name: ops
description: fewer operations
metric:
  primary: { name: ops, direction: minimize }
measurement:
  command: sh measure.sh
scope:
  mutable: [src]
execution: { mode: parallel, max_concurrent: 2 }
stopping: { max_iterations: 2 }
";

#[test]
fn an_optimize_spec_with_several_problems_lists_them_all_and_writes_nothing() {
    let home = Home::embedded();
    let repo = project();
    let r = repo.path();
    let before = listing(home.path());
    // Shape: an unknown key (with the allowed ones), a value outside its enum, a missing key.
    let spec = write(
        &r.join("shape.yml"),
        &SPEC
            .replace("max_concurrent: 2", "max_concurent: 2")
            .replace("direction: minimize", "direction: down")
            .replace("  command: sh measure.sh\n", "  comand: sh measure.sh\n"),
    );
    let (_, stderr) = run_code(&home, &["optimize", "init", "--spec", path_arg(&spec)], 2);
    assert_lists(
        &stderr,
        4,
        &[
            "shape.yml",
            "`execution`: unknown key `max_concurent` (did you mean `max_concurrent`?); allowed: `mode`, `backend`, `max_concurrent`",
            "`metric.primary.direction`: `down` is not allowed; one of: `maximize`, `minimize`",
            "`measurement`: unknown key `comand` (did you mean `command`?); allowed: `command`",
            "`measurement.command`: is required but missing",
        ],
    );
    // Values: each semantic check, all at once.
    let spec = write(
        &r.join("values.yml"),
        &SPEC
            .replace("name: ops\n", "name: Ops Run\n")
            .replace("description: fewer operations", "description: \" \"")
            .replace("mutable: [src]", "mutable: [../up]"),
    );
    let (_, stderr) = run_code(&home, &["optimize", "init", "--spec", path_arg(&spec)], 2);
    assert_lists(
        &stderr,
        3,
        &[
            "`name`: must match [a-z0-9][a-z0-9._-]*",
            "`description`: must not be empty",
            "`scope.mutable[0]`: must be a relative path inside the repository",
        ],
    );
    assert_eq!(
        listing(home.path()),
        before,
        "a refused spec writes nothing"
    );
    assert!(
        !git(r, &["branch", "--list", "optimize/*"]).contains("optimize/"),
        "no optimization branch"
    );
}

#[test]
fn an_items_file_a_question_set_and_a_brief_with_several_problems_list_them_all() {
    let home = Home::embedded();
    ok(&home, &["init"]);
    let skill = home.path().join("skills/example-skill");
    ok(&home, &["template", "add", path_arg(&skill)]);

    let items = write(
        &home.path().join("in/items.yml"),
        "items:\n  - id: a\n    titel: x\n  - title: no id\n  - id: b\n    input: [not, text]\n",
    );
    let (_, stderr) = run_code(
        &home,
        &[
            "train",
            "start",
            "--template",
            "example-skill",
            "--repo",
            "me/project",
            "--request",
            "name the effect",
            "--items-file",
            path_arg(&items),
            "--yes",
            "--session",
            "s1",
            "--workspace-repo",
            "me/workspace",
        ],
        2,
    );
    assert_lists(
        &stderr,
        3,
        &[
            "items.yml",
            "`items[0]`: unknown key `titel` (did you mean `title`?); allowed: `id`, `title`, `input`",
            "`items[1].id`: is required but missing",
            "`items[2].input`: a list is not a string",
        ],
    );
    let (_, stderr) = run_code(&home, &["train", "status", "--session", "s1"], 2);
    assert!(stderr.contains("not found"), "no session stored: {stderr}");

    // S-42: the question set's shape problems together, then its rule problems together.
    ok(
        &home,
        &[
            "review",
            "create",
            "--template",
            "example-skill",
            "--repo",
            "me/project",
            "--run",
            "b1",
        ],
    );
    let output = write(&home.path().join("in/out.md"), "a summary\n");
    let bineval = |name: &str, text: &str, count: usize, want: &[&str]| {
        let set = write(&home.path().join("in").join(name), text);
        let (_, stderr) = run_code(
            &home,
            &[
                "binary",
                "run",
                "--set",
                path_arg(&set),
                "--run",
                "b1",
                "--source",
                path_arg(&output),
                "--deterministic",
            ],
            2,
        );
        assert_lists(&stderr, count, want);
        assert!(stderr.contains(name), "names the file: {stderr}");
    };
    bineval(
        "shape.yml",
        "kind: x\ndimensions:\n  - name: a\n    weight: heavy\n    questions:\n      - {id: q1, text: Ok?, contain: x}\n",
        3,
        &[
            "unknown key `kind`; allowed: `version`, `template_or_task_kind`, `dimensions`",
            "`dimensions[0].weight`: `heavy` is not a number",
            "`dimensions[0].questions[0]`: unknown key `contain` (did you mean `contains`?); allowed: `id`, `text`",
        ],
    );
    bineval(
        "rules.yml",
        "dimensions:\n  - name: a\n    weight: 0\n    questions:\n      - {id: q1, text: Ok?, regex: \"(\"}\n      - {id: q1, text: \"\"}\n",
        4,
        &[
            "dimension `a`: weight 0 is not a number > 0",
            "question `q1`: invalid regex `(`",
            "question id `q1` appears twice",
            "question `q1`: no text",
        ],
    );
    let verdicts = home.json(&["binary", "show", "--run", "b1"]);
    assert!(
        !verdicts.to_string().contains("q1"),
        "no verdicts stored: {verdicts:#}"
    );

    // E-03: a brief's problems, shape and values together.
    let brief = write(
        &home.path().join("in/brief.json"),
        r#"{"id": "Bad Id", "prompt": " ", "verify": 3, "output": "/etc/x", "extra": 1}"#,
    );
    let (_, stderr) = run_code(&home, &["eval", "brief", "--check", path_arg(&brief)], 2);
    assert_lists(
        &stderr,
        6,
        &[
            "brief.json",
            "unknown field `extra`, expected one of `id`, `prompt`",
            "missing field `rubric`",
            "field `verify` must be a string",
            "field `id` `Bad Id` must be 1-80 characters",
            "field `prompt` is empty",
            "field `output` `/etc/x` must be `reply` or a relative path",
        ],
    );
}

// A correction theme (`eval forge --mode corrections --theme`) with several problems lists them all.
#[test]
fn a_theme_with_several_problems_lists_them_all_and_drafts_nothing() {
    let home = Home::embedded();
    ok(&home, &["init"]);
    let theme = write(
        &home.path().join("in/theme.json"),
        r#"{"name": 3, "rule": ["replies stay short"]}"#,
    );
    let skill = home.path().join("skills/example-skill");
    let (_, stderr) = run_code(
        &home,
        &[
            "eval",
            "forge",
            "--mode",
            "corrections",
            "--theme",
            path_arg(&theme),
            "--skill-dir",
            path_arg(&skill),
            "--runtime",
            "scripted",
            "--install-root",
            path_arg(&home.path().join("in/skills")),
        ],
        2,
    );
    assert_lists(
        &stderr,
        3,
        &[
            "theme.json",
            "unknown key `rule` (did you mean `rules`?); allowed: `name`, `rules`, `corrections`, `signature`",
            "`rules`: is required but missing",
            "`name`: 3 is not a string",
        ],
    );
    assert!(
        !home.path().join("eval/briefs").exists(),
        "no brief drafted"
    );
}

// A config.toml with several problems lists them all, each with its key path and the keys allowed.
#[test]
fn a_config_with_several_problems_lists_them_all() {
    let home = Home::embedded();
    write(
        &home.path().join("config.toml"),
        "[skillopt]\nauto_promte = true\n[server]\nlisten = 5\nfoo = 1\n",
    );
    let (_, stderr) = run_code(&home, &["template", "list"], 2);
    assert_lists(
        &stderr,
        3,
        &[
            "config.toml",
            "`server.listen`: 5 is not a string",
            "`server`: unknown key `foo`; allowed: `listen`, ",
            "`skillopt`: unknown key `auto_promte` (did you mean `auto_promote`?); allowed: `auto_trace_enabled`, ",
        ],
    );
    // One problem keeps the TOML parser's own message with its line.
    write(&home.path().join("config.toml"), "[server]\nfoo = 1\n");
    let (_, stderr) = run_code(&home, &["template", "list"], 2);
    assert!(
        stderr.contains("line 2") && stderr.contains("unknown field `foo`"),
        "{stderr}"
    );
}

// `review item add` names every file it cannot read at once, and adds nothing.
#[test]
fn review_item_add_names_every_missing_file_at_once() {
    let home = Home::embedded();
    ok(&home, &["init"]);
    let skill = home.path().join("skills/example-skill");
    ok(&home, &["template", "add", path_arg(&skill)]);
    ok(
        &home,
        &[
            "review",
            "create",
            "--template",
            "example-skill",
            "--repo",
            "me/project",
            "--run",
            "ab1",
        ],
    );
    let missing = home.path().join("in/missing");
    let baseline = missing.join("baseline.md");
    let candidate = missing.join("candidate.md");
    let (_, stderr) = run_code(
        &home,
        &[
            "review",
            "item",
            "add",
            "--run",
            "ab1",
            "--item",
            "i1",
            "--baseline",
            path_arg(&baseline),
            "--candidate",
            path_arg(&candidate),
        ],
        2,
    );
    assert!(
        stderr.contains("2 files cannot be read; nothing was added")
            && stderr.contains(&format!("--baseline file `{}`", baseline.display()))
            && stderr.contains(&format!("--candidate file `{}`", candidate.display())),
        "{stderr}"
    );
    let status = home.json(&["review", "status", "--run", "ab1"]);
    assert!(status["items"] == 0, "no item added: {status:#}");
}

// Issue 35 item 2: what the repository lacks is said, with what to do, before anything is written.
#[test]
fn optimize_init_says_what_the_repository_lacks_and_writes_nothing() {
    let home = Home::embedded();
    let before = listing(home.path());
    let dir = tempfile::tempdir().unwrap();
    let spec = write(&dir.path().join("spec.yml"), SPEC);
    let init = |repo: &Path| {
        run_code(
            &home,
            &[
                "optimize",
                "init",
                "--spec",
                path_arg(&spec),
                "--repo",
                path_arg(repo),
            ],
            2,
        )
        .1
    };
    let missing = dir.path().join("no-such-dir");
    let stderr = init(&missing);
    assert!(
        stderr.contains("does not exist") && stderr.contains("--repo DIR"),
        "{stderr}"
    );
    let plain = dir.path().join("plain");
    write(&plain.join("src/app.sh"), "echo work\n");
    let stderr = init(&plain);
    assert!(
        stderr.contains("is not a git repository")
            && stderr.contains("git init")
            && !stderr.contains("fatal:"),
        "{stderr}"
    );
    git(&plain, &["init", "-q", "-b", "main"]);
    let stderr = init(&plain);
    assert!(
        stderr.contains("has no commit yet")
            && stderr.contains("git add -A && git commit -m initial")
            && !stderr.contains("fatal:"),
        "{stderr}"
    );
    assert_eq!(listing(home.path()), before, "nothing written in the home");
    assert!(
        git(&plain, &["branch", "--list"]).is_empty(),
        "no branch created"
    );

    // A detached HEAD with uncommitted changes starts from the commit checked out, and says the
    // changes are not in the baseline.
    let repo = project();
    let r = repo.path();
    write(&r.join("src/app.sh"), "echo changed\n");
    git(r, &["checkout", "-q", "--detach"]);
    let (_, stderr) = run_code(
        &home,
        &[
            "optimize",
            "init",
            "--spec",
            path_arg(&spec),
            "--repo",
            path_arg(r),
        ],
        0,
    );
    assert!(
        stderr.contains("uncommitted changes") && stderr.contains("without them"),
        "{stderr}"
    );
    assert_eq!(
        git(r, &["rev-parse", "optimize/ops"]),
        git(r, &["rev-parse", "HEAD"]),
        "the optimization branch starts at the commit checked out"
    );
    assert!(
        !stderr.contains("is not in the repository"),
        "every scope path exists: {stderr}"
    );

    // Scope paths missing from the commit are noted; a measurement that cannot run at the last
    // commit says so in words (exit 3), naming the command.
    let repo = project();
    let r = repo.path();
    let spec = write(
        &dir.path().join("missing.yml"),
        &SPEC
            .replace("name: ops", "name: ops2")
            .replace("sh measure.sh", "sh measure-all.sh")
            .replace("mutable: [src]", "mutable: [src]\n  immutable: [data]"),
    );
    let (_, stderr) = run_code(
        &home,
        &[
            "optimize",
            "init",
            "--spec",
            path_arg(&spec),
            "--repo",
            path_arg(r),
        ],
        3,
    );
    assert!(
        stderr.contains("`scope.immutable[0]` `data` is not in the repository at HEAD"),
        "{stderr}"
    );
    assert!(
        stderr.contains("baseline measurement of `sh measure-all.sh` failed at the last commit")
            && stderr.contains("measure-all.sh")
            && !stderr.contains("Error("),
        "{stderr}"
    );
}

// A section pasted at the end of init's config repeats a table header the file already has
// (every table is there, its keys commented out): the error says where the table starts and
// what to do, not only "duplicate key"; a key set twice names its first line.
#[test]
fn a_repeated_config_table_or_key_names_where_it_first_is() {
    let home = Home::embedded();
    ok(&home, &["init"]);
    let config = home.path().join("config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    let eval_line = text
        .lines()
        .position(|l| l.trim() == "[eval]")
        .expect("init's config has an [eval] table")
        + 1;
    let pasted = format!("{text}\n[eval]\ninstall_root = \"./adopted\"\n");
    std::fs::write(&config, &pasted).unwrap();
    let header_line = pasted.lines().count() - 1;
    let (_, stderr) = run_code(&home, &["jobs", "list"], 2);
    assert!(
        stderr.contains(&format!("`[eval]` already starts at line {eval_line}"))
            && stderr.contains(&format!("delete the header at line {header_line}")),
        "{stderr}"
    );
    std::fs::write(&config, "[worker]\nconcurrency = 2\nconcurrency = 3\n").unwrap();
    let (_, stderr) = run_code(&home, &["jobs", "list"], 2);
    assert!(
        stderr.contains("this key is already set at line 2"),
        "{stderr}"
    );
}
