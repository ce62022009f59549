//! `eval forge` with the real CLIs (Claude Code, Codex, OpenCode) for arms and judge, against the
//! model API the test serves on loopback (issue 31 "Done when", issue 38): the README's status
//! brief adopts; a file-output brief adopts when the with-arm's file passes verify and the judge
//! is shown the files' content; an HTTP 400 on one arm makes that sample invalid and no ADOPT
//! follows; a user-level copy of the skill reaches no request of the without-arm or the judge;
//! `eval report` shows the tokens and cost the fake reported.

use serde_json::Value;
use skillforge_tests::agent_user::{AgentUser, REAL_RUNTIMES, USER_MARKER};
use skillforge_tests::eval::{BRIEF_ID, Setup, VERIFY_SHORT};
use skillforge_tests::fake_model::{FakeModel, Reply, Seen, Tokens};

/// In the candidate's description: the model sees it only when the skill was listed to it.
const CANDIDATE_MARK: &str = "CANDIDATE-TLDR-3e9";
const SHORT: &str = "shipped 1.2, fixed login";
const LONG: &str = "Here is every detail of the week, item by item, with all the context and caveats you could want";
const JUDGE_HEADER: &str = "Two anonymous runs answered the same task";

fn candidate(s: &Setup) -> std::path::PathBuf {
    let dir = s.path("skills/tldr");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("SKILL.md"), format!("---\nname: tldr\ndescription: Keep status replies short ({CANDIDATE_MARK})\n---\nReply in at most eight words.\n")).unwrap();
    dir
}

/// Which slot of a judge prompt holds `needle` (in its final message or a delivered file).
fn slot_with(prompt: &str, needle: &str) -> Option<&'static str> {
    let a = prompt.find("### A")?;
    let b = prompt.find("### B")?;
    let (in_a, in_b) = (prompt[a..b].contains(needle), prompt[b..].contains(needle));
    match (in_a, in_b) {
        (true, false) => Some("A"),
        (false, true) => Some("B"),
        _ => None,
    }
}

/// The model behind every run of a forge: the judge picks the slot holding the short answer; an
/// arm that was offered the candidate loads it, then answers short (`deliver`: writes it to
/// `STATUS.md` first); any other arm answers long.
fn forge_model(deliver: Option<&'static str>) -> impl Fn(&Seen) -> Reply + Send + Sync + 'static {
    move |seen: &Seen| {
        if seen.first_user.contains(JUDGE_HEADER) || seen.messages.contains(JUDGE_HEADER) {
            let prompt = if seen.first_user.contains(JUDGE_HEADER) {
                &seen.first_user
            } else {
                &seen.messages
            };
            let winner = slot_with(prompt, SHORT).unwrap_or("tie");
            return Reply::Text(format!(
                "Comparing the {{two}} runs.\n{{\"winner\": \"{winner}\", \"reason\": \"the short one\"}}"
            ));
        }
        if !seen.is_agent_turn() {
            return Reply::Text("status".into());
        }
        let with_arm = seen.shows(CANDIDATE_MARK);
        let answer = if with_arm { SHORT } else { LONG };
        match (with_arm, seen.n_tool_results, deliver) {
            (true, 0, _) => Reply::Skill("tldr".into()),
            (true, 1, Some(file)) | (false, 0, Some(file)) => Reply::Write {
                path: file.into(),
                content: answer.into(),
            },
            _ => Reply::Text(answer.into()),
        }
    }
}

fn forge(
    s: &Setup,
    user: &AgentUser,
    runtime: &str,
    brief: &std::path::Path,
    skill: &std::path::Path,
    extra: &[&str],
) -> (i32, Value, String) {
    let mut args: Vec<String> = [
        "--json",
        "eval",
        "forge",
        "--runtime",
        runtime,
        "--samples",
        "2",
        "--brief",
    ]
    .iter()
    .map(|a| (*a).to_owned())
    .collect();
    args.push(brief.display().to_string());
    args.extend(["--skill-dir".to_owned(), skill.display().to_string()]);
    if !extra.contains(&"--install") {
        args.extend([
            "--adopt-dir".to_owned(),
            s.path("adopted").display().to_string(),
        ]);
    }
    let extra: Vec<&str> = extra
        .iter()
        .copied()
        .filter(|a| *a != "--install")
        .collect();
    if runtime == "opencode" {
        // OpenCode's model names are `provider/model`; the user's only provider is the fake.
        args.extend(["--model".to_owned(), "fake/test".to_owned()]);
    }
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    let mut cmd = s.home.cmd();
    user.apply(&mut cmd);
    let out = cmd.args(&args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        stderr,
    )
}

fn decision(report: &Value) -> String {
    report["gate"]["decision"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn reply_brief(s: &Setup) -> std::path::PathBuf {
    let path = s.path("brief.json");
    let brief = serde_json::json!({"id": BRIEF_ID, "setup": {"notes.md": "- shipped 1.2\n- fixed login\n"},
        "prompt": "Write the team's status reply from notes.md.", "verify": VERIFY_SHORT, "output": "reply",
        "rubric": "Which reply would the team rather read?"});
    std::fs::write(&path, brief.to_string()).unwrap();
    path
}

/// Every request of the forge: none shows the user's own skill or instructions; the candidate
/// reaches only with-arm requests (a without-arm or judge request never lists it).
fn assert_blind_and_private(runtime: &str, fake: &FakeModel) {
    let requests = fake.requests();
    assert!(
        !requests.is_empty(),
        "{runtime}: no request reached the model"
    );
    for r in &requests {
        assert!(
            !r.shows(USER_MARKER),
            "{runtime}: the user's own skill or instructions reached the model:\n{}",
            r.everything()
        );
        let judge = r.first_user.contains(JUDGE_HEADER) || r.messages.contains(JUDGE_HEADER);
        if judge {
            assert!(
                !r.shows(CANDIDATE_MARK) && !r.shows("tldr"),
                "{runtime}: the judge was shown the skill:\n{}",
                r.everything()
            );
        }
    }
    let judges = requests
        .iter()
        .filter(|r| r.first_user.contains(JUDGE_HEADER) || r.messages.contains(JUDGE_HEADER))
        .count();
    assert!(judges >= 2, "{runtime}: one judge per sample, got {judges}");
    let with = requests.iter().filter(|r| r.shows(CANDIDATE_MARK)).count();
    assert!(
        with >= 2,
        "{runtime}: the with-arm's requests list the candidate"
    );
}

// Issue 31 "Done when": the README's status brief adopts with each real CLI for arms and judge;
// the without-arm and the judge never see the user's `tldr`; the report shows the fake's tokens.
#[test]
fn the_status_brief_adopts_with_each_real_cli_and_the_baseline_never_sees_the_users_copy() {
    for runtime in REAL_RUNTIMES {
        let fake = FakeModel::start();
        fake.report_tokens(Tokens {
            input: 2000,
            output: 30,
        });
        fake.respond(forge_model(None));
        let user = AgentUser::new(&fake);
        let s = Setup::new();
        let skill = candidate(&s);
        let (code, report, stderr) = forge(&s, &user, runtime, &reply_brief(&s), &skill, &[]);
        assert_eq!(
            decision(&report),
            "adopt",
            "{runtime}: exit {code}\n{stderr}\n{report:#}"
        );
        assert_eq!(code, 0, "{runtime}");
        assert!(
            s.path("adopted/tldr/SKILL.md").is_file(),
            "{runtime}: staged in the adopt dir"
        );
        assert_blind_and_private(runtime, &fake);
        for n in [1, 2] {
            let v = s.verdict(BRIEF_ID, n).unwrap();
            assert_eq!(v["winner"], "with", "{runtime} sample {n}: {v:#}");
        }
        // Tokens and cost in the report, as the fake reported them (Codex: cost unknown).
        let out = s
            .home
            .cmd()
            .args(["--json", "eval", "report", "--brief", BRIEF_ID])
            .output()
            .unwrap();
        let json: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
        let total = &json["spend"];
        assert_eq!(
            total["runs"], 6,
            "{runtime}: 2 samples × (2 arms + judge): {total:#}"
        );
        assert!(
            total["usage"]["output_tokens"].as_u64().unwrap() >= 6 * 30,
            "{runtime}: {total:#}"
        );
        assert_eq!(total["runs_without_tokens"], 0, "{runtime}");
        let text = String::from_utf8(
            s.home
                .cmd()
                .args(["eval", "report", "--brief", BRIEF_ID])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap();
        let spend_line = text
            .lines()
            .find(|l| l.starts_with("spend: "))
            .unwrap_or_else(|| panic!("{text}"));
        match runtime {
            "codex" => assert!(spend_line.ends_with("cost unknown"), "{spend_line}"),
            _ => assert!(
                spend_line.contains('$') && !spend_line.contains("unknown"),
                "{spend_line}"
            ),
        }
    }
}

// Issue 31 item 8 and issue 35 item 7: without --adopt-dir, --install-root or `[eval]
// install_root`, an adoption is kept in the home and linked for no agent (the user's own skill
// directory is untouched); `eval deploy --runtime R` then installs it where that runtime reads the
// user's skills.
#[test]
fn an_adoption_is_installed_only_where_asked_and_deploy_puts_it_where_its_runtime_reads() {
    for (runtime, root) in [
        ("claude", ".claude/skills"),
        ("codex", ".agents/skills"),
        ("opencode", ".config/opencode/skills"),
    ] {
        let fake = FakeModel::start();
        fake.respond(forge_model(None));
        let user = AgentUser::new(&fake);
        // This user has no `tldr` of their own in that runtime's directory (an existing one is
        // never overwritten).
        std::fs::remove_dir_all(user.home().join(root).join("tldr")).unwrap();
        let s = Setup::new();
        let skill = candidate(&s);
        let (code, report, stderr) =
            forge(&s, &user, runtime, &reply_brief(&s), &skill, &["--install"]);
        assert_eq!(
            (code, decision(&report).as_str()),
            (0, "adopt"),
            "{runtime}: {stderr}\n{report:#}"
        );
        let installed = user.home().join(root).join("tldr/SKILL.md");
        assert!(
            !installed.exists(),
            "{runtime}: the forge linked the adoption into {} unasked",
            installed.display()
        );
        let mut deploy = s.home.cmd();
        user.apply(&mut deploy);
        let out = deploy
            .args(["eval", "deploy", "--runtime", runtime])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{runtime}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            std::fs::read_to_string(&installed).is_ok_and(|t| t.contains(CANDIDATE_MARK)),
            "{runtime}: `eval deploy` did not install it at {}",
            installed.display()
        );
    }
}

// Issue 31 items 3, 5 and 6: a brief whose output is a file: the with-arm writes it (edits in its
// work dir are allowed), verify passes on it, and the judge is shown the files' content.
#[test]
fn a_file_output_brief_adopts_and_the_judge_sees_the_files_content() {
    for runtime in REAL_RUNTIMES {
        let fake = FakeModel::start();
        fake.respond(forge_model(Some("STATUS.md")));
        let user = AgentUser::new(&fake);
        let s = Setup::new();
        let skill = candidate(&s);
        let brief = s.path("file-brief.json");
        std::fs::write(
            &brief,
            serde_json::json!({"id": BRIEF_ID, "setup": {"notes.md": "- shipped 1.2\n- fixed login\n"},
                "prompt": "Write the team's status to STATUS.md from notes.md.", "verify": "test \"$(wc -w < STATUS.md)\" -le 8",
                "output": "STATUS.md", "rubric": "Which status would the team rather read?"})
            .to_string(),
        )
        .unwrap();
        let (code, report, stderr) = forge(&s, &user, runtime, &brief, &skill, &[]);
        assert_eq!(
            decision(&report),
            "adopt",
            "{runtime}: exit {code}\n{stderr}\n{report:#}"
        );
        let judge = fake
            .requests()
            .into_iter()
            .find(|r| r.first_user.contains(JUDGE_HEADER) || r.messages.contains(JUDGE_HEADER))
            .unwrap();
        assert!(
            judge.shows("Delivered file `STATUS.md`") && judge.shows(SHORT) && judge.shows(LONG),
            "{runtime}: the judge saw the files' content:\n{}",
            judge.everything()
        );
        assert_blind_and_private(runtime, &fake);
    }
}

// Issue 31 item 4: an HTTP 400 on the without-arm makes the sample invalid (`arm_api_error`,
// naming the status), stops the brief, and no ADOPT follows (it was "ADOPT over an empty
// baseline").
#[test]
fn an_http_400_on_one_arm_is_an_invalid_sample_and_never_an_adoption() {
    for runtime in REAL_RUNTIMES {
        let fake = FakeModel::start();
        let inner = forge_model(None);
        fake.respond(move |seen: &Seen| {
            match seen.is_agent_turn() && !seen.shows(CANDIDATE_MARK) {
                true => Reply::Error(400, "fake bad request 7c1".into()),
                false => inner(seen),
            }
        });
        let user = AgentUser::new(&fake);
        let s = Setup::new();
        let skill = candidate(&s);
        let (code, report, stderr) = forge(&s, &user, runtime, &reply_brief(&s), &skill, &[]);
        assert_ne!(
            decision(&report),
            "adopt",
            "{runtime}: {report:#}\n{stderr}"
        );
        assert_ne!(code, 0, "{runtime}");
        let v = s.verdict(BRIEF_ID, 1).unwrap();
        assert_eq!(
            (v["invalid_code"].as_str(), v["invalid_arm"].as_str()),
            (Some("arm_api_error"), Some("without")),
            "{runtime}: {v:#}"
        );
        assert!(
            v["reason"]
                .as_str()
                .unwrap()
                .contains("fake bad request 7c1"),
            "{runtime}: {v:#}"
        );
        assert!(
            s.verdict(BRIEF_ID, 2).is_none(),
            "{runtime}: the brief stopped at the first sample"
        );
        assert!(
            !fake
                .requests()
                .iter()
                .any(|r| r.first_user.contains(JUDGE_HEADER)),
            "{runtime}: no judge over a dead arm"
        );
        assert!(!s.path("adopted/tldr").exists());
    }
}

// E-55 with the real Claude Code (issue 31 item 9): a brief whose setup ships a project command
// of the candidate's name (`.claude/commands/tldr.md`: not a skill skillforge installs, so not
// "handed", but Claude Code lists it to the model as a skill: an ambient install both arms get)
// makes the without-arm's model requests offer `tldr`. Claude Code's init line leaves project
// commands out, so only the inventory read from the requests through the run's recording proxy
// sees it: the first sample is baseline_had_the_skill and the brief stops there. The without-arm
// never loads the skill, so only its offered inventory can tell. (Codex and OpenCode read no
// such file a brief's setup can ship outside what skillforge counts as handed; their requests'
// inventories are checked in `real_agents.rs`.)
#[test]
fn e55_an_ambient_command_offered_to_the_without_arm_stops_the_brief_with_claude_code() {
    const AMBIENT: &str = "AMBIENT-TLDR-51d";
    let (runtime, ambient) = ("claude", ".claude/commands/tldr.md");
    let fake = FakeModel::start();
    fake.respond(|seen: &Seen| {
        if seen.first_user.contains(JUDGE_HEADER) || seen.messages.contains(JUDGE_HEADER) {
            return Reply::Text("{\"winner\": \"tie\", \"reason\": \"same\"}".into());
        }
        // The with-arm (offered the candidate) loads it; the without-arm never loads a skill.
        match (seen.shows(CANDIDATE_MARK), seen.n_tool_results) {
            (true, 0) => Reply::Skill("tldr".into()),
            (true, _) => Reply::Text(SHORT.into()),
            _ => Reply::Text(LONG.into()),
        }
    });
    let user = AgentUser::new(&fake);
    let s = Setup::new();
    let skill = candidate(&s);
    let path = s.path("brief.json");
    let brief = serde_json::json!({"id": BRIEF_ID,
        "setup": {"notes.md": "- shipped 1.2\n", ambient:
            format!("---\ndescription: an ambient copy ({AMBIENT})\n---\nBe brief.\n")},
        "prompt": "Write the team's status reply from notes.md.", "verify": VERIFY_SHORT,
        "output": "reply", "rubric": "Which reply would the team rather read?"});
    std::fs::write(&path, brief.to_string()).unwrap();
    let (_, report, stderr) = forge(&s, &user, runtime, &path, &skill, &[]);
    let without: Vec<Seen> = fake
        .requests()
        .into_iter()
        .filter(|r| r.is_agent_turn() && !r.shows(CANDIDATE_MARK))
        .filter(|r| !r.first_user.contains(JUDGE_HEADER))
        .collect();
    assert!(
        without.iter().any(|r| r.shows(AMBIENT)),
        "{runtime}: the ambient copy was listed to the without-arm\n{stderr}\n{report:#}"
    );
    let v = s
        .verdict(BRIEF_ID, 1)
        .unwrap_or_else(|| panic!("{runtime}: no verdict\n{stderr}\n{report:#}"));
    assert_eq!(
        (v["invalid_code"].as_str(), v["invalid_arm"].as_str()),
        (Some("baseline_had_the_skill"), Some("without")),
        "{runtime}: {v:#}\n{}",
        arm_records(&s.run_dir(BRIEF_ID))
    );
    assert!(
        s.verdict(BRIEF_ID, 2).is_none(),
        "{runtime}: the brief stopped at the first sample"
    );
    assert_ne!(decision(&report), "adopt", "{runtime}");
    // The arm's evidence shows both lists: the request's (with the command) and the init line's.
    let record: Value = serde_json::from_str(
        &std::fs::read_to_string(s.run_dir(BRIEF_ID).join("s1/without.meta/run.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(record["skills_offered_from"], "request", "{record:#}");
    let listed = |key: &str| {
        record[key]
            .as_array()
            .is_some_and(|a| a.iter().any(|n| n == "tldr"))
    };
    assert!(
        listed("skills_offered") && !listed("skills_offered_transcript"),
        "{record:#}"
    );
}

/// Every arm's `run.json` under a brief's run dir, for a failure message.
fn arm_records(dir: &std::path::Path) -> String {
    let mut out = String::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                pending.push(p);
            } else if e.file_name() == "run.json" {
                out.push_str(&format!(
                    "{}: {}\n",
                    p.display(),
                    std::fs::read_to_string(&p).unwrap_or_default()
                ));
            }
        }
    }
    out
}

// An unreachable model API stops `eval forge` before any arm job, as `doctor` finds it: exit 3
// (an environment problem) at once, one line naming the URL and where its base URL is set, for
// each real CLI (Codex's and OpenCode's config files, ANTHROPIC_BASE_URL) pointed at a loopback
// port nothing listens on.
#[test]
fn an_unreachable_model_api_stops_the_forge_before_any_arm_naming_the_url_and_setting() {
    let fake = FakeModel::start();
    let user = AgentUser::new(&fake);
    let closed = format!("http://127.0.0.1:{}", skillforge_tests::free_port());
    std::fs::write(
        user.home().join(".codex/config.toml"),
        fake.codex_config().replace(&fake.url, &closed),
    )
    .unwrap();
    std::fs::write(
        user.home().join(".config/opencode/opencode.json"),
        fake.opencode_config()
            .to_string()
            .replace(&fake.url, &closed),
    )
    .unwrap();
    for (runtime, setting) in [
        ("claude", "ANTHROPIC_BASE_URL"),
        ("codex", ".codex/config.toml"),
        ("opencode", "opencode.json"),
    ] {
        let s = Setup::new();
        let skill = candidate(&s);
        let brief = reply_brief(&s);
        let mut cmd = s.home.cmd();
        user.apply(&mut cmd);
        let out = cmd
            .env("ANTHROPIC_BASE_URL", &closed)
            .args(["eval", "forge", "--runtime", runtime, "--brief"])
            .arg(&brief)
            .arg("--skill-dir")
            .arg(&skill)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{runtime}: {stderr}");
        let said: Vec<&str> = stderr.lines().filter(|l| l.contains(&closed)).collect();
        assert_eq!(said.len(), 1, "{runtime}: one line:\n{stderr}");
        assert!(
            said[0].contains("does not accept a connection")
                && said[0].contains(setting)
                && said[0].contains("no arm started"),
            "{runtime}: {stderr}"
        );
        assert!(!s.run_dir(BRIEF_ID).exists(), "{runtime}: no arm job");
    }
    assert!(fake.requests().is_empty(), "no request reached any model");
}
