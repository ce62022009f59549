//! A team's first day (issue 35 items 2 and 3): `skillforge init` writes a home whose every
//! starter file is valid as written — each is fed to the command that reads it — and names its
//! schema; `init` refuses to overwrite; `skillforge schema NAME` prints the checked-in schema.

use std::path::Path;

use serde_json::Value;
use skillforge_tests::{Home, git, ok, path_arg, run_code, write};

/// The starter files `init` writes, relative to the home, with the schema each names.
const STARTERS: &[(&str, &str)] = &[
    (
        "skills/example-skill/SKILL.md",
        "agent-template-metadata.json",
    ),
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
    assert!(
        out.contains("doctor") && out.contains("template add"),
        "init says what to run next:\n{out}"
    );
    // Issue 35 item 4: the guide by a path that exists wherever the command runs (this test runs
    // from a checkout: its absolute path), never the relative `docs/getting-started.md`.
    let guide = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("the guide: "))
        .unwrap_or_else(|| panic!("where the guide is:\n{out}"));
    assert!(
        Path::new(guide).is_absolute() && Path::new(guide).is_file(),
        "{out}"
    );
    let h = home.path();
    for (file, schema) in STARTERS {
        let text = read(&h.join(file));
        assert!(
            text.contains(schema),
            "{file} names its schema {schema}:\n{text}"
        );
        assert!(
            h.join("schemas").join(schema).is_file(),
            "init writes schemas/{schema}"
        );
    }

    // config.toml: every command loads it (it is all comments).
    ok(&home, &["template", "list"]);

    // The skill: `template add DIR`, derived defaults shown.
    let skill_dir = h.join("skills/example-skill");
    let added = home.json(&["template", "add", path_arg(&skill_dir)]);
    assert_eq!(added["version_id"], "example-skill@v1", "{added:#}");

    // The eval brief.
    let brief = h.join("evals/briefs/example-brief.json");
    let checked = ok(&home, &["eval", "brief", "--check", path_arg(&brief)]);
    assert!(checked.contains("(1 setup file,"), "{checked}");

    // The items file, on the starter skill.
    let items = h.join("train/items.yml");
    let started = home.json(&[
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
        "first",
        "--workspace-repo",
        "me/workspace",
    ]);
    assert_eq!(started["state"], "items_ready", "{started:#}");
    // Options for every starter item on the starter skill (scripted runtime), then the blind packet.
    let (out, _) = run_code(&home, &["train", "continue", "--session", "first"], 4);
    assert!(
        out.contains("review published, waiting for feedback"),
        "{out}"
    );
    let status = home.json(&["train", "status", "--session", "first"]);
    assert_eq!(status["status_phase"], "review_published", "{status:#}");

    // The BINEVAL set, deterministically on an output.
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
    let output = write(
        &h.join("in/summary.md"),
        "Login accepts passwords up to 256 characters\n",
    );
    let scored = home.json(&[
        "binary",
        "run",
        "--set",
        path_arg(&h.join("bineval/questions.yml")),
        "--run",
        "b1",
        "--source",
        path_arg(&output),
        "--deterministic",
    ]);
    assert!(scored.to_string().contains("names-effect"), "{scored:#}");

    // The optimize spec, in a repository that has its measurement command.
    let repo = tempfile::tempdir().unwrap();
    let r = repo.path();
    write(&r.join("src/app.sh"), "echo work\n");
    write(
        &r.join("measure.sh"),
        "#!/bin/sh\nsh src/app.sh >/dev/null\necho '{\"metrics\": {\"seconds\": 1.5}}'\n",
    );
    git(r, &["init", "-q", "-b", "main"]);
    git(r, &["add", "-A"]);
    git(
        r,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "commit",
            "-q",
            "-m",
            "app",
        ],
    );
    let spec = h.join("optimize/spec.yml");
    let out = home.run(&[
        "optimize",
        "init",
        "--spec",
        path_arg(&spec),
        "--repo",
        path_arg(r),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "optimize init on the starter spec:\n{stderr}"
    );
}

#[test]
fn init_refuses_to_overwrite_and_names_every_existing_file() {
    let home = Home::embedded();
    let dir = home.path().join("team-home");
    write(&dir.join("config.toml"), "[worker]\nconcurrency = 2\n");
    write(&dir.join("train/items.yml"), "mine\n");
    let (_, err) = run_code(&home, &["init", path_arg(&dir)], 2);
    assert!(
        err.contains("config.toml")
            && err.contains("train/items.yml")
            && err.contains("nothing was written"),
        "{err}"
    );
    assert_eq!(
        read(&dir.join("config.toml")),
        "[worker]\nconcurrency = 2\n"
    );
    assert!(
        !dir.join("skills").exists() && !dir.join("schemas").exists(),
        "nothing written"
    );
    // Into a fresh DIR it works, and a second run refuses.
    let fresh = home.path().join("fresh");
    ok(&home, &["init", path_arg(&fresh)]);
    assert!(fresh.join("skills/example-skill/SKILL.md").is_file());
    let (_, err) = run_code(&home, &["init", path_arg(&fresh)], 2);
    assert!(
        err.contains("skills/example-skill/SKILL.md") && err.contains("init --update"),
        "{err}"
    );
}

// Issue 35 item 2: an existing home is brought up to this build with `init --update`: a schema
// from an older build is rewritten, a missing starter file is written, and the user's own files
// (config.toml, an edited starter) are kept byte for byte.
#[test]
fn init_update_refreshes_schemas_and_keeps_the_users_files() {
    let home = Home::embedded();
    let dir = home.path().join("team-home");
    ok(&home, &["init", path_arg(&dir)]);
    let config = "[worker]\nconcurrency = 2\n";
    write(&dir.join("config.toml"), config);
    write(&dir.join("train/items.yml"), "items: []\n");
    write(&dir.join("schemas/eval-brief.json"), "{\"old\": true}\n");
    std::fs::remove_file(dir.join("optimize/spec.yml")).unwrap();
    let report = home.json(&["init", "--update", path_arg(&dir)]);
    assert_eq!(
        report["refreshed"],
        serde_json::json!(["schemas/eval-brief.json"]),
        "{report:#}"
    );
    assert_eq!(
        report["written"],
        serde_json::json!(["optimize/spec.yml"]),
        "{report:#}"
    );
    let kept = report["kept"].as_array().unwrap();
    assert!(
        kept.iter().any(|k| k == "config.toml") && kept.iter().any(|k| k == "train/items.yml"),
        "{report:#}"
    );
    assert_eq!(read(&dir.join("config.toml")), config);
    assert_eq!(read(&dir.join("train/items.yml")), "items: []\n");
    assert_eq!(
        read(&dir.join("schemas/eval-brief.json")),
        ok(&home, &["schema", "eval-brief"])
    );
    assert!(dir.join("optimize/spec.yml").is_file());
    // Up to date: nothing refreshed or written, and the person is told so.
    let again = ok(&home, &["init", "--update", path_arg(&dir)]);
    assert!(
        again.contains("schemas refreshed for this build: none")
            && again.contains("files that were missing, written: none")
            && again.contains("skillforge schema config"),
        "{again}"
    );
}

#[test]
fn schema_prints_the_checked_in_schema_and_lists_them() {
    let home = Home::embedded();
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/schemas");
    for name in [
        "config",
        "eval-brief",
        "optimize-spec",
        "train-items",
        "bineval-question-set",
        "feedback-yml",
        "agent-template-metadata",
    ] {
        let printed = ok(&home, &["schema", name]);
        assert_eq!(printed, read(&docs.join(format!("{name}.json"))), "{name}");
    }
    let listed = home.json(&["schema"]);
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "optimize-spec"),
        "{listed:#}"
    );
    let (_, err) = run_code(&home, &["schema", "nope"], 2);
    assert!(
        err.contains("no schema `nope`") && err.contains("eval-brief"),
        "{err}"
    );
    let _: Value = serde_json::from_str(&ok(&home, &["schema", "config"])).unwrap();
}

fn checks(doc: &Value) -> Vec<(String, String, String)> {
    doc["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                c["status"].as_str().unwrap().to_owned(),
                format!("{} {}", c["detail"], c["fix"]),
            )
        })
        .collect()
}

fn doctor(home: &Home, extra: &[&str], path: Option<&str>) -> (i32, Value, String) {
    let mut cmd = home.cmd();
    cmd.args(["doctor", "--json"]).args(extra);
    if let Some(p) = path {
        cmd.env("PATH", p);
    }
    let out = cmd.output().expect("run doctor");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "one JSON document ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_every_problem_has_a_fix(&doc);
    (
        out.status.code().unwrap(),
        doc,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Issue 35 item 1: in `doctor --json` every check that is not `ok` says what to do in `fix`
/// (never an empty `fix` with the advice inside `detail`).
fn assert_every_problem_has_a_fix(doc: &Value) {
    for c in doc["checks"].as_array().expect("checks") {
        if c["status"] != "ok" {
            assert!(
                c["fix"].as_str().is_some_and(|f| !f.trim().is_empty()),
                "a {} check with no fix: {c:#}",
                c["status"]
            );
        }
    }
}

/// A `doctor --json` run with `HOME` at `user_home` and no model credential or base URL
/// inherited from the machine, plus `env`.
fn doctor_as(home: &Home, user_home: &Path, env: &[(&str, String)]) -> Value {
    let mut cmd = home.cmd();
    cmd.args(["doctor", "--json"]).env("HOME", user_home);
    for var in [
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "CLAUDE_CONFIG_DIR",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "CODEX_API_KEY",
        "CODEX_HOME",
        "CODEX_FORCE_AUTH_JSON",
        "OPENCODE_CONFIG",
        "OPENCODE_CONFIG_CONTENT",
        "XDG_CONFIG_HOME",
    ] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run doctor");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "one JSON document ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_every_problem_has_a_fix(&doc);
    doc
}

// Issue 35 item 1: an installed runtime is `ok` only when `eval forge` could run it: logged in
// (the forge's own credential preflight) and its model API accepting a connection. Either
// missing is a warning (a runtime is optional) that says what to do.
#[test]
fn doctor_warns_on_a_runtime_that_is_installed_but_not_logged_in_or_cannot_reach_its_api() {
    let home = Home::embedded();
    let user = tempfile::tempdir().unwrap();
    // `scripts/test` installs the three CLIs.
    let installed = |doc: &Value, name: &str| {
        let c = find(&checks(doc), name).clone();
        assert!(
            !c.2.contains("not found on PATH"),
            "{name} is installed: {c:?}"
        );
        Some(c)
    };

    // No login anywhere.
    let doc = doctor_as(&home, user.path(), &[]);
    for name in ["runtime claude", "runtime codex"] {
        if let Some(c) = installed(&doc, name) {
            assert!(
                c.1 == "warn" && c.2.contains("not logged in") && c.2.contains("log in"),
                "{c:?}"
            );
        }
    }

    // Logged in, each model API at `base` (Codex's and OpenCode's configs, ANTHROPIC_BASE_URL).
    let point_at = |base: &str| {
        write(
            &user.path().join(".codex/config.toml"),
            &format!(
                "model_provider = \"local\"\n[model_providers.local]\nname = \"local\"\nbase_url = \"{base}/v1\"\n"
            ),
        );
        write(
            &user.path().join(".config/opencode/opencode.json"),
            &serde_json::json!({"provider": {"local": {"options": {"baseURL": format!("{base}/v1")}}}})
                .to_string(),
        );
        doctor_as(
            &home,
            user.path(),
            &[
                ("ANTHROPIC_API_KEY", "sk-fake".to_owned()),
                ("ANTHROPIC_BASE_URL", base.to_owned()),
            ],
        )
    };
    write(
        &user.path().join(".codex/auth.json"),
        r#"{"OPENAI_API_KEY": "sk-fake"}"#,
    );
    // A loopback port nothing listens on.
    let closed = format!("http://127.0.0.1:{}", skillforge_tests::free_port());
    let doc = point_at(&closed);
    for name in ["runtime claude", "runtime codex", "runtime opencode"] {
        if let Some(c) = installed(&doc, name) {
            assert!(
                c.1 == "warn"
                    && c.2.contains(&closed)
                    && c.2.contains("does not accept a connection")
                    && c.2.contains("base URL"),
                "{c:?}"
            );
        }
    }

    // The same with something listening there: ok.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let open = format!("http://{}", listener.local_addr().unwrap());
    let doc = point_at(&open);
    for name in ["runtime claude", "runtime codex", "runtime opencode"] {
        if let Some(c) = installed(&doc, name) {
            assert_eq!(c.1, "ok", "{c:?}");
        }
    }
    drop(listener);
}

fn find<'a>(checks: &'a [(String, String, String)], name: &str) -> &'a (String, String, String) {
    checks
        .iter()
        .find(|c| c.0 == name)
        .unwrap_or_else(|| panic!("no check {name} in {checks:?}"))
}

#[test]
fn doctor_lists_every_check_and_exits_0_when_nothing_needed_is_missing() {
    let home = Home::embedded();
    let (code, doc, err) = doctor(&home, &[], None);
    let all = checks(&doc);
    assert_eq!(code, 0, "{all:#?}\n{err}");
    assert_eq!(doc["ok"], true);
    for name in [
        "config",
        "home",
        "git",
        "bwrap",
        "queue",
        "containers",
        "runtime claude",
        "runtime codex",
        "runtime opencode",
        "checkers python",
        "checkers javascript",
    ] {
        find(&all, name);
    }
    assert_eq!(find(&all, "queue").1, "ok");
    assert!(find(&all, "home").2.contains("free"), "{all:?}");
    // Human output: one line per check, each with its status first.
    let human = ok(&home, &["doctor"]);
    let lines: Vec<&str> = human.lines().collect();
    assert_eq!(lines.len(), all.len() + 1, "{human}");
    assert!(
        lines
            .iter()
            .take(all.len())
            .all(|l| ["ok", "warn", "FAIL"].contains(&l.split_whitespace().next().unwrap())),
        "{human}"
    );
}

#[test]
fn doctor_fails_on_a_missing_git_a_broken_config_and_an_unreachable_queue() {
    let home = Home::embedded();
    let empty = tempfile::tempdir().unwrap();
    let (code, doc, _) = doctor(&home, &[], Some(path_arg(empty.path())));
    let all = checks(&doc);
    assert_eq!((code, doc["ok"].as_bool()), (1, Some(false)), "{all:#?}");
    let git = find(&all, "git");
    assert!(
        git.1 == "fail" && git.2.contains("not found") && git.2.contains("install git"),
        "{git:?}"
    );
    assert_eq!(
        find(&all, "runtime claude").1,
        "warn",
        "a runtime is optional"
    );

    write(
        &home.path().join("config.toml"),
        "[worker]\nconcurency = 2\n",
    );
    let (code, doc, _) = doctor(&home, &[], None);
    let all = checks(&doc);
    let config = find(&all, "config");
    assert!(
        code == 1
            && config.1 == "fail"
            && config.2.contains("concurency")
            && config.2.contains("config.toml"),
        "{config:?}"
    );
    assert!(all.len() > 5, "the other checks still run: {all:?}");
    std::fs::remove_file(home.path().join("config.toml")).unwrap();

    let port = skillforge_tests::free_port();
    let (code, doc, _) = doctor(
        &home,
        &["--queue", &format!("redis://127.0.0.1:{port}")],
        None,
    );
    let queue = find(&checks(&doc), "queue").clone();
    assert!(
        code == 1 && queue.1 == "fail" && queue.2.contains("start redis-server"),
        "{queue:?}"
    );

    // A URL every command refuses is a failure here too, never the embedded default.
    let (code, doc, _) = doctor(&home, &["--queue", "reddis://127.0.0.1:6379"], None);
    let queue = find(&checks(&doc), "queue").clone();
    assert!(
        code == 1
            && queue.1 == "fail"
            && queue.2.contains("reddis://")
            && queue.2.contains("rediss://"),
        "{queue:?}"
    );
}

#[test]
fn doctor_reads_the_redis_version_and_refuses_an_evicting_policy() {
    let redis = skillforge_tests::RedisServer::start();
    let home = Home::redis(&redis.url());
    let (code, doc, _) = doctor(&home, &[], None);
    let queue = find(&checks(&doc), "queue").clone();
    assert_eq!(code, 0, "{queue:?}");
    assert!(
        queue.1 != "fail"
            && queue.2.contains("Redis ")
            && queue.2.contains("maxmemory-policy noeviction"),
        "{queue:?}"
    );
    redis
        .cli(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"])
        .expect("config set");
    let (code, doc, _) = doctor(&home, &[], None);
    let queue = find(&checks(&doc), "queue").clone();
    assert!(
        code == 1
            && queue.1 == "fail"
            && queue.2.contains("allkeys-lru")
            && queue.2.contains("CONFIG SET maxmemory-policy noeviction"),
        "{queue:?}"
    );
}
