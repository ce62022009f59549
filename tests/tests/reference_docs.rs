//! The docs a user reads stay true to the binary (issue 35 items 4 and 8):
//!
//! * `docs/reference/commands.md` and `docs/man/` are what `skillforge docs --out` generates from
//!   the CLI now, and every command `--help` reaches has its section and its man page;
//! * `docs/reference/config.md` lists exactly the keys of `config.toml`'s types
//!   (`skillforge schema config`);
//! * `docs/reference/scripted.md` lists every directive, header line and variable the scripted
//!   runtime reads, and its example runs;
//! * every example in `docs/reference/formats.md` is valid against its schema, and every schema
//!   is linked from there;
//! * the README stays under 12 KB, names the test command `.ci/run` runs, and no relative link in
//!   the README or `docs/` points at a missing file or heading;
//! * `skillforge completions SHELL` works for every shell and offers no hidden command.
//!
//! After changing the CLI: `cargo build -p skillforge && target/debug/skillforge docs --out docs`
//! (or run this file with `SKILLFORGE_BLESS=1`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use skillforge_tests::bin;

/// The repository root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
}

fn skillforge(args: &[&str]) -> String {
    let out = Command::new(bin())
        .args(args)
        .output()
        .expect("run skillforge");
    assert!(
        out.status.success(),
        "skillforge {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Every `*.md`/`*.1` file under `dir`, by name.
fn files(dir: &Path) -> BTreeMap<String, String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().path())
                .filter(|p| p.is_file())
                .map(|p| {
                    (
                        p.file_name().unwrap().to_string_lossy().into_owned(),
                        std::fs::read_to_string(&p).unwrap(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_command_reference_and_man_pages_are_what_the_cli_generates() {
    let out = tempfile::tempdir().unwrap();
    skillforge(&["docs", "--out", out.path().to_str().unwrap()]);
    let docs = root().join("docs");
    let bless = std::env::var("SKILLFORGE_BLESS").is_ok_and(|v| v == "1");
    let mut stale = Vec::new();
    let generated = std::fs::read_to_string(out.path().join("reference/commands.md")).unwrap();
    if std::fs::read_to_string(docs.join("reference/commands.md"))
        .ok()
        .as_deref()
        != Some(generated.as_str())
    {
        stale.push("docs/reference/commands.md".to_owned());
    }
    let (want, have) = (files(&out.path().join("man")), files(&docs.join("man")));
    assert!(want.len() > 60, "only {} man pages generated", want.len());
    for (name, text) in &want {
        if have.get(name) != Some(text) {
            stale.push(format!("docs/man/{name}"));
        }
    }
    for name in have.keys().filter(|n| !want.contains_key(*n)) {
        stale.push(format!("docs/man/{name} (no such command)"));
    }
    if bless && !stale.is_empty() {
        skillforge(&["docs", "--out", docs.to_str().unwrap()]);
        return;
    }
    assert!(
        stale.is_empty(),
        "not what the CLI generates: {stale:?}\nregenerate: cargo build -p skillforge && target/debug/skillforge docs --out docs \
         (or rerun this test with SKILLFORGE_BLESS=1)"
    );
}

/// The subcommands a help text lists under `Commands:` (without `help`).
fn subcommands(text: &str) -> Vec<String> {
    let Some(start) = text.find("Commands:\n") else {
        return Vec::new();
    };
    text[start + "Commands:\n".len()..]
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// Independent of the generator: every command `--help` reaches has a section in the reference
/// and a man page.
#[test]
fn every_command_help_reaches_is_in_the_reference_and_has_a_man_page() {
    let reference = read("docs/reference/commands.md");
    let man = files(&root().join("docs/man"));
    let mut todo = vec![Vec::<String>::new()];
    let mut missing = Vec::new();
    let mut n_commands = 0;
    while let Some(path) = todo.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        for sub in subcommands(&skillforge(&args)) {
            let mut next = path.clone();
            next.push(sub);
            todo.push(next);
        }
        if path.is_empty() {
            continue;
        }
        n_commands += 1;
        let name = format!("skillforge {}", path.join(" "));
        if !reference.contains(&format!("\n### `{name}`\n")) {
            missing.push(format!("{name}: no section in docs/reference/commands.md"));
        }
        let page = format!("skillforge-{}.1", path.join("-"));
        if !man.contains_key(&page) {
            missing.push(format!("{name}: no docs/man/{page}"));
        }
    }
    assert!(n_commands > 60, "found only {n_commands} commands");
    assert!(man.contains_key("skillforge.1"));
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// `section.key` of every key of the config schema (tables of tables flattened: `runners.container.host`).
fn schema_keys(schema: &Value) -> BTreeSet<String> {
    fn resolve<'a>(node: &'a Value, defs: &'a Value) -> &'a Value {
        match node
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix("#/$defs/"))
        {
            Some(name) => &defs[name],
            None => node,
        }
    }
    fn walk(prefix: &str, node: &Value, defs: &Value, out: &mut BTreeSet<String>) {
        let Some(props) = resolve(node, defs)
            .get("properties")
            .and_then(Value::as_object)
        else {
            return;
        };
        for (key, prop) in props {
            let path = if prefix.is_empty() {
                key.clone()
            } else {
                format!("{prefix}.{key}")
            };
            if resolve(prop, defs).get("properties").is_some() {
                walk(&path, prop, defs, out);
            } else {
                out.insert(path);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk("", schema, &schema["$defs"], &mut out);
    out
}

/// `section.key` of every key row of the config reference: `## \`[section]\`` headings, then
/// table rows `| \`key\` | …`.
fn documented_keys(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut section = None;
    for line in text.lines() {
        if let Some(head) = line.strip_prefix("## ") {
            section = head
                .strip_prefix("`[")
                .and_then(|h| h.strip_suffix("]`"))
                .map(str::to_owned);
        } else if let (Some(section), Some(row)) = (&section, line.strip_prefix("| `"))
            && let Some((key, _)) = row.split_once('`')
        {
            out.insert(format!("{section}.{key}"));
        }
    }
    out
}

#[test]
fn the_configuration_reference_lists_exactly_the_keys_of_the_config_types() {
    let schema: Value = serde_json::from_str(&skillforge(&["schema", "config"])).unwrap();
    let keys = schema_keys(&schema);
    assert!(
        keys.len() > 40 && keys.contains("runners.container.host") && keys.contains("queue.url"),
        "{keys:?}"
    );
    let documented = documented_keys(&read("docs/reference/config.md"));
    let undocumented: Vec<_> = keys.difference(&documented).collect();
    let unknown: Vec<_> = documented.difference(&keys).collect();
    assert!(
        undocumented.is_empty(),
        "config keys missing from docs/reference/config.md: {undocumented:?}"
    );
    assert!(
        unknown.is_empty(),
        "docs/reference/config.md lists keys the config does not have: {unknown:?}"
    );
}

/// The quoted names of the `"name" =>` arms in `source` between `start` and the next `_ =>`.
fn match_arms(source: &str, start: &str) -> Vec<String> {
    let from = source
        .find(start)
        .unwrap_or_else(|| panic!("`{start}` not found: did the scripted runtime's parser move?"));
    let body = &source[from..];
    let body = &body[..body.find("_ =>").expect("a match with a `_ =>` arm")];
    let arm = regex::Regex::new(r#"(?m)^\s*"([a-z_-]+)"(?: if [^=]*)? =>"#).unwrap();
    arm.captures_iter(body).map(|c| c[1].to_owned()).collect()
}

#[test]
fn the_scripted_reference_lists_every_directive_header_and_variable_and_its_example_runs() {
    let doc = read("docs/reference/scripted.md");
    let directives = match_arms(
        &read("runners/agent/src/scripted/directive.rs"),
        "match key {",
    );
    assert!(
        directives.len() >= 14 && directives.contains(&"write".to_owned()),
        "{directives:?}"
    );
    let headers = match_arms(
        &read("runners/agent/src/scripted/mod.rs"),
        "let slot = match key {",
    );
    assert_eq!(headers, ["task", "options", "skills", "load"]);
    let mut missing: Vec<String> = directives
        .iter()
        .filter(|d| !doc.contains(&format!("| `{d}")))
        .map(|d| format!("directive `{d}`"))
        .collect();
    missing.extend(
        headers
            .iter()
            .filter(|h| !doc.contains(&format!("| `{h}: ")))
            .map(|h| format!("header line `{h}:`")),
    );
    let profile: Value = toml_values(&read("runners/agent/runtimes/scripted.toml"));
    for var in ["FORGE_SAMPLE"].into_iter().map(str::to_owned).chain(
        profile
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned()),
    ) {
        if !doc.contains(&format!("| `{var}`")) {
            missing.push(format!("variable `{var}`"));
        }
    }
    assert!(
        missing.is_empty(),
        "docs/reference/scripted.md does not document: {missing:?}"
    );

    // The "Try it" example, run as written with this build's skillforge first on PATH.
    let example = code_block_after(&doc, "## Try it", "sh");
    let dir = tempfile::tempdir().unwrap();
    let path = format!(
        "{}:{}",
        bin().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &example])
        .current_dir(dir.path())
        .env("PATH", path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the example failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(r#""text":"Login accepts 256-character passwords""#),
        "{stdout}"
    );
    assert!(
        stdout.contains("- Login accepts 256-character passwords\n"),
        "the `write` directive wrote the file: {stdout}"
    );
    assert!(
        stdout.contains(r#"\"verdict\":\"b\""#),
        "the `prefer` directive picked B: {stdout}"
    );
}

/// The `pass_env` and `credential_env` entries of a runtime profile.
fn toml_values(text: &str) -> Value {
    let mut vars = Vec::new();
    for line in text.lines() {
        if let Some(list) = line
            .strip_prefix("pass_env = ")
            .or_else(|| line.strip_prefix("credential_env = "))
        {
            let list: Value = serde_json::from_str(list).expect("a one-line list of strings");
            vars.extend(list.as_array().unwrap().iter().cloned());
        }
    }
    assert!(
        !vars.is_empty(),
        "no pass_env / credential_env in the scripted profile"
    );
    Value::Array(vars)
}

/// The first fenced block of language `lang` after the line `heading`.
fn code_block_after(doc: &str, heading: &str, lang: &str) -> String {
    let from = doc
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("no heading `{heading}`"));
    let rest = &doc[from..];
    let open = format!("```{lang}\n");
    let start = rest
        .find(&open)
        .unwrap_or_else(|| panic!("no ```{lang} block after `{heading}`"))
        + open.len();
    let end = rest[start..].find("\n```").unwrap();
    rest[start..start + end + 1].to_owned()
}

#[test]
fn every_format_example_is_valid_against_its_schema_and_every_schema_is_linked() {
    let doc = read("docs/reference/formats.md");
    let examples = [
        ("### Eval brief", "json", "eval-brief"),
        ("### Train items", "yaml", "train-items"),
        ("### `feedback.yml`", "yaml", "feedback-yml"),
        ("### Optimize spec", "yaml", "optimize-spec"),
        ("### BINEVAL question set", "yaml", "bineval-question-set"),
        ("### Correction theme", "json", "correction-theme"),
    ];
    for (heading, lang, schema) in examples {
        let text = code_block_after(&doc, heading, lang);
        let instance: Value = if lang == "json" {
            serde_json::from_str(&text).unwrap()
        } else {
            serde_norway::from_str(&text).unwrap()
        };
        let schema_value: Value =
            serde_json::from_str(&read(&format!("docs/schemas/{schema}.json"))).unwrap();
        let validator =
            jsonschema::validator_for(&schema_value).expect("the checked-in schema compiles");
        let errors: Vec<String> = validator
            .iter_errors(&instance)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "the {heading} example does not match docs/schemas/{schema}.json: {errors:?}"
        );
    }
    for name in files(&root().join("docs/schemas")).keys() {
        assert!(
            doc.contains(&format!("(../schemas/{name})")),
            "docs/reference/formats.md does not link docs/schemas/{name}"
        );
    }
    // The brief example is accepted by the command that reads briefs, too.
    let dir = tempfile::tempdir().unwrap();
    let brief = skillforge_tests::write(
        &dir.path().join("brief.json"),
        &code_block_after(&doc, "### Eval brief", "json"),
    );
    let home = skillforge_tests::Home::embedded();
    skillforge_tests::ok(
        &home,
        &["eval", "brief", "--check", brief.to_str().unwrap()],
    );
}

#[test]
fn the_readme_is_short_and_names_the_command_ci_runs() {
    let readme = read("README.md");
    assert!(
        readme.len() <= 12 * 1024,
        "README.md is {} bytes; the limit is 12 KB: move detail into docs/",
        readme.len()
    );
    // `.ci/run` runs the README's test command: its last line is `exec COMMAND`.
    let ci = read(".ci/run");
    let command = ci
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("exec "))
        .expect(".ci/run ends with `exec COMMAND`");
    assert!(
        root().join(command).is_file(),
        "`{command}` from .ci/run is not a file of the repository"
    );
    assert!(
        readme.contains(&format!("```sh\n{command}\n```")),
        "README.md does not show `{command}` (what .ci/run runs) as its test command"
    );
    for job in [
        "Evaluate a skill",
        "Train a template",
        "Decide between versions",
        "Optimize code",
        "A fleet on Redis",
        "CI verification",
    ] {
        assert!(
            readme.contains(&format!("\n### {job}\n")),
            "README.md has no quickstart `### {job}`"
        );
    }
}

/// GitHub's anchor of a heading: lowercase, punctuation dropped, spaces to dashes.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut in_code = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        } else if !in_code && line.starts_with('#') {
            out.insert(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

#[test]
fn relative_links_in_the_readme_and_docs_point_at_files_and_headings_that_exist() {
    let mut pages = vec![
        root().join("README.md"),
        root().join("CHANGELOG.md"),
        root().join("UPGRADING.md"),
    ];
    let mut todo = vec![root().join("docs")];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    let link = regex::Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    let mut broken = Vec::new();
    let mut n_links = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for cap in link.captures_iter(&text) {
            let target = &cap[1];
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            n_links += 1;
            let (file, fragment) = target.split_once('#').unwrap_or((target, ""));
            let resolved = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(file)
            };
            let shown = page.strip_prefix(root()).unwrap().display();
            if !resolved.exists() {
                broken.push(format!("{shown}: {target} (no such file)"));
            } else if !fragment.is_empty()
                && !anchors(&std::fs::read_to_string(&resolved).unwrap()).contains(fragment)
            {
                broken.push(format!("{shown}: {target} (no such heading)"));
            }
        }
    }
    assert!(n_links > 50, "found only {n_links} relative links");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn completions_are_generated_for_every_shell_without_hidden_commands() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = skillforge(&["completions", shell]);
        assert!(
            script.contains("resubmit-lost") && script.contains("canary-check"),
            "{shell}: the nested commands are offered"
        );
        assert!(
            !script.contains("agent-scripted"),
            "{shell}: a hidden command is offered"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let file = skillforge_tests::write(
        &dir.path().join("skillforge.bash"),
        &skillforge(&["completions", "bash"]),
    );
    let status = Command::new("bash").arg("-n").arg(&file).status().unwrap();
    assert!(
        status.success(),
        "the bash completion script does not parse"
    );
    // Sourced, it completes `skillforge jobs re` to the jobs subcommands starting with `re`.
    let probe = format!(
        "source {}; COMP_WORDS=(skillforge jobs re); COMP_CWORD=2; _skillforge skillforge re jobs; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        file.display()
    );
    let out = Command::new("bash").args(["-c", &probe]).output().unwrap();
    let offered: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(
        offered,
        BTreeSet::from(["retry".to_owned(), "resubmit-lost".to_owned()]),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
