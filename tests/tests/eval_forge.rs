//! The skill eval loop end to end through the built binary (issue 17; seed skill-eval-loop): every
//! invalid code comes from arm outputs the real agent runner stored while running the `scripted`
//! agent in real work dirs — never from hand-built verdicts — and one forge runs judge →
//! aggregate → gate → ledger together. The harness (`Setup`, the scripted skill and brief) is
//! `skillforge_tests::eval`.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::{Value, json};
use skillforge_tests::eval::{BRIEF_ID, GOOD_SKILL, Setup, VERIFY_SHORT, codes};
use skillforge_tests::{Home, Reaped, RedisServer, signal, wait_exit, wait_for};

// E-14, E-04, E-05, E-52: one test runs judge → aggregate → gate → ledger together.
#[test]
fn e14_forge_adopts_through_judge_aggregate_gate_and_ledger() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let (code, report, stderr) = s.forge(&brief, &skill, &[]);
    assert_eq!(code, 0, "{stderr}\n{report:#}");
    assert_eq!(codes(&report), vec![None, None, None], "{report:#}");
    for n in 1..=3 {
        let v = s.verdict(BRIEF_ID, n).unwrap();
        assert_eq!(v["winner"], "with", "{v:#}");
        assert_eq!(v["skills"]["with"]["loaded"], json!(["tldr"]));
        let sample = s.run_dir(BRIEF_ID).join(format!("s{n}"));
        assert!(sample.join("mapping.private.json").is_file());
        let prompt = std::fs::read_to_string(sample.join("judge.prompt.txt")).unwrap();
        for leak in ["tldr", ".claude", "with.meta", "without", "mapping"] {
            assert!(
                !prompt.contains(leak),
                "judge prompt leaks {leak:?}:\n{prompt}"
            );
        }
        assert!(
            prompt.contains("notes.md"),
            "the file list reaches the judge: {prompt}"
        );
        let run: Value = serde_json::from_str(
            &std::fs::read_to_string(sample.join("with.meta/run.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(run["skills_installed"], json!(["tldr"]));
        assert_eq!(run["exit"], "passed");
    }
    assert_eq!(report["aggregate"]["wins_with"], 3);
    assert_eq!(report["gate"]["decision"], "adopt");
    assert!(
        report["gate"]["lines"][0]
            .as_str()
            .unwrap()
            .contains("over an empty baseline"),
        "{report:#}"
    );
    let ledger = s.ledger();
    assert_eq!(ledger.len(), 1);
    assert_eq!(ledger[0]["decision"], "adopt");
    assert_eq!(ledger[0]["baseline_skills"], json!([]));
    assert!(ledger[0]["recheck_due"].is_string());
    assert!(
        s.path("agents-skills/tldr/SKILL.md").is_file(),
        "installed by symlink"
    );
    let (html, out) = s.report_html(BRIEF_ID);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("SHORT: shipped 1.2")
            && page.contains("LONG status")
            && page.contains("winner: with"),
        "{page}"
    );
    let status = s.home.json(&["eval", "status", "--brief", BRIEF_ID]);
    assert_eq!(status["ledger_row"]["decision"], "adopt");
    // The human report says where the adoption went (the recorded forge again: nothing new).
    let root = s.path("agents-skills");
    let again = s.forge_human(&brief, &skill, &[]);
    let stdout = String::from_utf8_lossy(&again.stdout);
    let installed = stdout
        .lines()
        .find(|l| l.starts_with("installed then: "))
        .unwrap_or_else(|| panic!("no installed line:\n{stdout}"));
    assert!(
        stdout.contains("already forged") && stdout.contains("nothing ran"),
        "{stdout}"
    );
    assert!(
        installed.contains(&root.join("tldr").display().to_string()),
        "{installed}"
    );
    assert_eq!(s.ledger().len(), 1, "the same forge records nothing again");
}

// E-48, E-54
#[test]
fn e48_with_arm_that_never_loaded_is_invalid_and_stops_nothing() {
    let s = Setup::new();
    let skill = s.skill("tldr", &format!("{GOOD_SKILL}\nscripted: no-load"));
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let (code, report, stderr) = s.forge(&brief, &skill, &[]);
    assert_eq!(code, 1, "{stderr}");
    let want = Some("skill_never_loaded".to_owned());
    assert_eq!(
        codes(&report),
        vec![want.clone(), want.clone(), want],
        "all three samples ran: {report:#}"
    );
    assert_eq!(report["aggregate"]["arms_never_loaded"]["with"], 3);
    assert_eq!(report["gate"]["decision"], "undecided");
    assert!(
        s.ledger().is_empty(),
        "undecided writes no ledger row (resolution 12)"
    );
}

// E-43, E-45
#[test]
fn e45_arm_never_ran_stops_the_brief_before_any_mapping() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let (code, report, stderr) = s.forge_with_no_cli(&brief, &skill);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        codes(&report),
        vec![Some("arm_never_ran".to_owned())],
        "{report:#}"
    );
    let v = s.verdict(BRIEF_ID, 1).unwrap();
    assert!(
        v["reason"].as_str().unwrap().contains("empty transcript"),
        "{v:#}"
    );
    assert!(!s.run_dir(BRIEF_ID).join("s1/mapping.private.json").exists());
    assert!(
        !s.run_dir(BRIEF_ID).join("s2").exists(),
        "samples 2-3 not run"
    );
    assert_eq!(report["gate"]["decision"], "stopped");
}

// E-44
#[test]
fn e44_runner_error_as_final_message_is_arm_never_ran() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let error = "Failed to authenticate: OAuth session expired and could not be refreshed";
    let brief = s.brief(
        BRIEF_ID,
        &format!(
            "scripted: exit 1\nscripted: stderr {error}\nscripted: reply {error}\nscripted: no-load"
        ),
        "",
        VERIFY_SHORT,
    );
    let (_, report, stderr) = s.forge(&brief, &skill, &[]);
    assert_eq!(
        codes(&report),
        vec![Some("arm_never_ran".to_owned())],
        "{stderr}\n{report:#}"
    );
    let reason = s.verdict(BRIEF_ID, 1).unwrap()["reason"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(reason.contains("runner's own error"), "{reason}");
}

// E-56
#[test]
fn e56_arm_killed_by_the_clock_is_arm_timed_out_and_the_brief_continues() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(
        BRIEF_ID,
        "scripted@1: exit 124\nscripted@2: exit 124",
        "",
        "false",
    );
    let (_, report, stderr) = s.forge(&brief, &skill, &[]);
    assert_eq!(
        codes(&report),
        vec![
            Some("arm_timed_out".to_owned()),
            Some("arm_timed_out".to_owned()),
            Some("both_arms_failed_verify".to_owned())
        ],
        "two timeouts do not trip the two-in-a-row stop: {stderr}\n{report:#}"
    );
}

// E-41, E-42
#[test]
fn e42_two_both_failed_verify_in_a_row_stop_the_brief() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(BRIEF_ID, "", "", "false");
    let (_, report, stderr) = s.forge(&brief, &skill, &[]);
    assert_eq!(
        codes(&report),
        vec![Some("both_arms_failed_verify".to_owned()); 2],
        "{stderr}\n{report:#}"
    );
    assert!(!s.run_dir(BRIEF_ID).join("s3").exists(), "sample 3 not run");
    assert!(
        s.verdict(BRIEF_ID, 1).unwrap()["winner"].is_null(),
        "no winner over two broken runs"
    );
}

// Issue 34 item 9: `eval report` and `eval status` show each arm's verify (its exit said
// "passed" while verify.json said failed); an invalid sample renders as invalid in the HTML.
#[test]
fn eval_report_and_status_show_each_arms_verify_and_invalid_samples_as_invalid() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let (_, report, stderr) = s.forge(&s.brief(BRIEF_ID, "", "", VERIFY_SHORT), &skill, &[]);
    assert_eq!(report["gate"]["decision"], "adopt", "{stderr}");
    let json = s.home.json(&["eval", "report", "--brief", BRIEF_ID]);
    let arms = &json["samples"][0]["arms"];
    assert_eq!(
        (
            arms[0]["arm"].as_str(),
            arms[0]["verify"]["passed"].as_bool()
        ),
        (Some("with"), Some(true)),
        "{json:#}"
    );
    assert_eq!(
        (
            arms[1]["arm"].as_str(),
            arms[1]["verify"]["passed"].as_bool()
        ),
        (Some("without"), Some(false)),
        "{json:#}"
    );
    assert_eq!(
        arms[1]["run"]["exit"], "passed",
        "the run itself passed: only verify tells"
    );
    let text =
        String::from_utf8(s.home.run(&["eval", "report", "--brief", BRIEF_ID]).stdout).unwrap();
    assert!(
        text.contains("[without]")
            && text.contains("verify failed (exit 1)")
            && text.contains("verify passed"),
        "{text}"
    );
    // Issue 34 item 13: the verdict with its uncertainty: Wilson intervals, margin, sign test.
    assert_eq!(
        (
            json["stats"]["verify"]["with"]["k"].as_u64(),
            json["stats"]["verify"]["with"]["n"].as_u64()
        ),
        (Some(3), Some(3)),
        "{json:#}"
    );
    assert_eq!(json["stats"]["verify"]["without"]["k"], 0);
    assert_eq!(json["stats"]["margin"], 3);
    assert!(
        (json["stats"]["sign_test_p"].as_f64().unwrap() - 0.25).abs() < 1e-9,
        "3-0 is p = 0.25 two-sided"
    );
    assert!(text.contains("verify passed: with 3 of 3 (100%, 95% interval 44–100%); without 0 of 3 (0%, 95% interval 0–56%)"), "{text}");
    assert!(
        text.contains("candidate won 3 of 3")
            && text.contains("margin +3")
            && text.contains("p = 0.250"),
        "{text}"
    );
    let status =
        String::from_utf8(s.home.run(&["eval", "status", "--brief", BRIEF_ID]).stdout).unwrap();
    assert!(
        status.contains("verify: with passed · without failed"),
        "{status}"
    );

    let broken = Setup::new();
    let (_, _, stderr) = broken.forge(
        &broken.brief(BRIEF_ID, "", "", "false"),
        &broken.skill("tldr", GOOD_SKILL),
        &[],
    );
    let (html, out) = broken.report_html(BRIEF_ID);
    assert!(out.status.success(), "{stderr}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("<span class=\"verdict invalid\">invalid (both_arms_failed_verify)</span>"),
        "{page}"
    );
    // Issue 35: `eval status` says why a sample is invalid in words (`--json` keeps the code).
    let status = String::from_utf8(
        broken
            .home
            .run(&["eval", "status", "--brief", BRIEF_ID])
            .stdout,
    )
    .unwrap();
    assert!(
        status.contains("invalid: both arms failed verify")
            && !status.contains("both_arms_failed_verify"),
        "{status}"
    );
    let json = broken.home.json(&["eval", "status", "--brief", BRIEF_ID]);
    assert_eq!(
        json["samples"][0]["invalid_code"],
        "both_arms_failed_verify"
    );
    // `eval report` too, saying it once (the reason starts with the words already).
    let report = String::from_utf8(
        broken
            .home
            .run(&["eval", "report", "--brief", BRIEF_ID])
            .stdout,
    )
    .unwrap();
    assert!(
        report.contains("sample 1: invalid: both arms failed verify")
            && !report.contains("both_arms_failed_verify")
            && !report.contains("both arms failed verify — both arms failed verify"),
        "{report}"
    );
}

// E-13 (resolutions 21, issue 34 item 7): a sample's two arms may run side by side on this
// machine: both arm jobs of a sample are running at once (their recorded attempts overlap), while
// a remote engine or a cloud environment is refused before anything starts
// (tests/tests/eval_containers.rs `e13_*`).
#[test]
fn e13_a_samples_two_arms_may_run_side_by_side_on_this_machine() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let (_, report, stderr) = s.forge_env(
        &s.brief(BRIEF_ID, "", "", VERIFY_SHORT),
        &skill,
        &["--samples", "2"],
        &[("SKILLFORGE_SCRIPTED_DELAY_MS", "1500")],
    );
    assert_eq!(report["gate"]["decision"], "adopt", "{stderr}\n{report:#}");
    let jobs = s.home.json(&["jobs", "list", "--limit", "100"]);
    let arms: Vec<Value> = jobs
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["stage"] == "arm")
        .map(|j| s.home.job(j["id"].as_str().unwrap()))
        .collect();
    assert_eq!(arms.len(), 4);
    let span = |job: &Value| {
        (
            job["history"][0]["started_at"].as_str().unwrap().to_owned(),
            job["history"][0]["ended_at"].as_str().unwrap().to_owned(),
        )
    };
    let overlapping = (1..=2).any(|n| {
        let of: Vec<(String, String)> = arms
            .iter()
            .filter(|j| {
                j["idempotency_key"]
                    .as_str()
                    .unwrap()
                    .contains(&format!(":{n}:"))
            })
            .map(span)
            .collect();
        of.len() == 2 && of[0].0 < of[1].1 && of[1].0 < of[0].1
    });
    assert!(
        overlapping,
        "no sample's arms ran side by side: {:?}",
        arms.iter().map(span).collect::<Vec<_>>()
    );
}

// E-06
#[test]
fn e06_arm_naming_the_skill_is_invalid_not_a_win() {
    let s = Setup::new();
    let skill = s.skill(
        "tldr",
        "scripted: reply SHORT: following the tldr skill, shipped 1.2",
    );
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let (_, report, stderr) = s.forge(&brief, &skill, &[]);
    assert_eq!(
        codes(&report),
        vec![Some("skill_named".to_owned()); 3],
        "never stops: {stderr}\n{report:#}"
    );
    assert_eq!(report["aggregate"]["wins_with"], 0);
}

// E-55
#[test]
fn e55_baseline_offered_the_skill_stops_the_brief() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(BRIEF_ID, "scripted: offer tldr", "", VERIFY_SHORT);
    let (_, report, stderr) = s.forge(&brief, &skill, &[]);
    assert_eq!(
        codes(&report),
        vec![Some("baseline_had_the_skill".to_owned())],
        "{stderr}\n{report:#}"
    );
    assert!(!s.run_dir(BRIEF_ID).join("s2").exists());
}

// E-07
#[test]
fn e07_unreadable_judge_reply_is_invalid_never_a_tie() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(
        BRIEF_ID,
        "",
        "scripted: judge-reply Run A (with the skill)",
        VERIFY_SHORT,
    );
    let (code, report, stderr) = s.forge(&brief, &skill, &["--probation", "--failure-rate", "0.4"]);
    assert_eq!(
        codes(&report),
        vec![Some("unreadable_verdict".to_owned()); 3],
        "{stderr}\n{report:#}"
    );
    assert_eq!(report["aggregate"]["ties"], 0);
    assert_eq!(
        code, 1,
        "--probation cannot install on an unreadable verdict"
    );
    assert!(!s.path("agents-skills/tldr").exists());
}

// E-51
#[test]
fn e51_rival_the_baseline_never_loaded_names_the_baseline_arm() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let rival = s.skill("incumbent", "scripted: no-load");
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let (_, report, stderr) = s.forge(&brief, &skill, &["--rival", rival.to_str().unwrap()]);
    assert_eq!(
        codes(&report),
        vec![Some("skill_never_loaded".to_owned()); 3],
        "{stderr}\n{report:#}"
    );
    assert_eq!(s.verdict(BRIEF_ID, 1).unwrap()["invalid_arm"], "without");
    assert_eq!(report["aggregate"]["arms_never_loaded"]["without"], 3);
    let lines = report["gate"]["lines"].to_string();
    assert!(
        lines.contains("never loaded incumbent in 3 of 3") && !lines.contains("rerun"),
        "{lines}"
    );
}

// E-17, E-16
#[test]
fn e17_a_rejected_skill_is_never_evaluated_again() {
    let s = Setup::new();
    let (skill, brief) = s.tie();
    let (code, report, stderr) = s.forge(&brief, &skill, &[]);
    assert_eq!(
        (code, report["gate"]["decision"].as_str()),
        (1, Some("reject")),
        "clean tie without --probation: {stderr}"
    );
    assert!(
        s.ledger()[0]["skill_digest"]
            .as_str()
            .is_some_and(|d| d.starts_with("sha256:")),
        "{:#?}",
        s.ledger()
    );
    // The same content: skipped citing the ledger, and the reject stands for CI (exit 1).
    let other = s.brief("another-brief", "", "", "true");
    let (code, report, _) = s.forge(&other, &skill, &[]);
    assert_eq!(code, 1, "{report:#}");
    let skipped = report["skipped"].as_str().unwrap();
    assert!(
        skipped.contains("never evaluated again") && skipped.contains("ledger.jsonl"),
        "{report:#}"
    );
    assert!(!s.run_dir("another-brief").exists());
    // An edited skill is a new candidate: evaluated.
    let edited = s.skill("tldr", GOOD_SKILL);
    let (code, report, stderr) = s.forge(&other, &edited, &[]);
    assert_eq!(
        (code, report["gate"]["decision"].as_str()),
        (0, Some("adopt")),
        "{stderr}\n{report:#}"
    );
    assert!(report["skipped"].is_null(), "{report:#}");
}

// E-07: the scripted judge without a `prefer` line picks by digest and says it did not assess
// the answers; the forge counts no such pick, so it ends undecided: nothing adopted, installed or
// recorded as a loss.
#[test]
fn e07_a_judge_that_did_not_assess_the_answers_decides_nothing() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.path("no-prefer.json");
    std::fs::write(
        &brief,
        json!({"id": "no-prefer", "prompt": "Write the team's status reply from notes.md.", "setup": {"notes.md": "- shipped 1.2\n"},
               "verify": "true", "rubric": "Which reply would the team rather read?", "output": "reply"})
        .to_string(),
    )
    .unwrap();
    let (code, report, stderr) = s.forge(&brief, &skill, &[]);
    assert_eq!(
        codes(&report),
        vec![Some("unreadable_verdict".to_owned()); 3],
        "{stderr}\n{report:#}"
    );
    assert!(
        report["samples"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("did not assess"),
        "{report:#}"
    );
    assert_ne!(report["gate"]["decision"], "adopt");
    assert_ne!(code, 0);
    assert!(
        s.ledger()
            .iter()
            .all(|r| r["decision"] != "reject" && r["decision"] != "adopt"),
        "{:#?}",
        s.ledger()
    );
    assert!(!s.path("agents-skills/tldr").exists());
}

// The same brief forged again: its earlier results are read again (and said to be); after the
// skill changed, the forge is refused naming the change and how to forge again.
#[test]
fn a_brief_forged_again_says_its_results_are_the_earlier_forges_and_refuses_an_edited_skill() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let (code, first, _) = s.forge(&brief, &skill, &[]);
    assert_eq!(code, 0, "{first:#}");
    assert!(first["reused"].is_null(), "{first:#}");
    let (code, again, _) = s.forge(&brief, &skill, &[]);
    assert_eq!(
        (code, again["reused"].as_bool()),
        (0, Some(true)),
        "{again:#}"
    );
    assert_eq!(s.ledger().len(), 1, "read again, not recorded again");
    // Issue 35 item 4: the human progress says the samples were read back, not that arms run.
    let human = s
        .home
        .cmd()
        .args(["eval", "forge", "--runtime", "scripted", "--brief"])
        .arg(&brief)
        .arg("--skill-dir")
        .arg(&skill)
        .arg("--install-root")
        .arg(s.path("agents-skills"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&human.stderr);
    assert_eq!(human.status.code(), Some(0), "{err}");
    assert!(
        err.contains("sample 1: arms ran before") && err.contains("nothing ran"),
        "{err}"
    );
    assert!(!err.contains("arms running"), "{err}");
    s.skill("tldr", "scripted: reply SHORT: shipped 1.2 (edited)");
    let (code, _, stderr) = s.forge(&brief, &skill, &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("changed since this brief's forge") && stderr.contains("new id"),
        "{stderr}"
    );
}

// An edited skill adopted again under the same name: the install (the home's copy behind the
// link) holds the content adopted now, and the link already there is kept.
#[test]
fn a_second_adoption_of_an_edited_skill_installs_its_new_content() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let (code, report, _) = s.forge(&s.brief(BRIEF_ID, "", "", VERIFY_SHORT), &skill, &[]);
    assert_eq!(
        (code, report["gate"]["decision"].as_str()),
        (0, Some("adopt")),
        "{report:#}"
    );
    let edited_body = "scripted: reply SHORT: shipped 1.2 (v2)";
    s.skill("tldr", edited_body);
    let (code, report, stderr) =
        s.forge(&s.brief("second-brief", "", "", VERIFY_SHORT), &skill, &[]);
    assert_eq!(
        (code, report["gate"]["decision"].as_str()),
        (0, Some("adopt")),
        "{stderr}\n{report:#}"
    );
    let installed = std::fs::read_to_string(s.path("agents-skills/tldr/SKILL.md")).unwrap();
    assert!(installed.contains(edited_body), "{installed}");
}

// E-16
#[test]
fn e16_clean_tie_with_probation_installs_with_a_7_day_recheck() {
    let s = Setup::new();
    let (skill, brief) = s.tie();
    let (code, report, stderr) = s.forge(&brief, &skill, &["--probation", "--failure-rate", "0.4"]);
    assert_eq!(
        (code, report["gate"]["decision"].as_str()),
        (0, Some("probation")),
        "{stderr}\n{report:#}"
    );
    let row = &s.ledger()[0];
    let at: chrono_free::Instant = chrono_free::parse(row["at"].as_str().unwrap());
    let due: chrono_free::Instant = chrono_free::parse(row["recheck_due"].as_str().unwrap());
    assert_eq!(due.days_since(at), 7);
    assert_eq!(row["failure_rate"], 0.4);
}

// E-18
#[test]
fn e18_dry_run_runs_nothing_and_adopt_dir_stages() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let (code, report, _) = s.forge(&brief, &skill, &["--dry-run"]);
    assert_eq!(code, 0);
    let skipped = report["skipped"].as_str().unwrap();
    assert!(skipped.contains("dry run"));
    assert!(
        skipped.contains(&format!(
            "an adoption would go to {}",
            s.path("agents-skills").display()
        )),
        "{skipped}"
    );
    assert!(!s.run_dir(BRIEF_ID).exists(), "no arm ran");
    let adopt = s.path("adopt");
    let (code, _, stderr) = s.forge(&brief, &skill, &["--adopt-dir", adopt.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(adopt.join("tldr/SKILL.md").is_file());
    assert!(
        !s.path("agents-skills").exists(),
        "the install root is unchanged when staging"
    );
}

// E-46
#[test]
fn e46_leftover_meta_dir_refuses_the_run_and_is_left_untouched() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let leftover = s.run_dir(BRIEF_ID).join("s1/with.meta/final.txt");
    std::fs::create_dir_all(leftover.parent().unwrap()).unwrap();
    std::fs::write(&leftover, "an earlier pass's answer").unwrap();
    let (code, _, stderr) = s.forge(&brief, &skill, &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("delete the sample dir") && stderr.contains("s1"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&leftover).unwrap(),
        "an earlier pass's answer"
    );
}

// Issue 17 item 7: a SIGKILLed orchestrator + in-process worker mid-arm resumes; every arm's result
// is applied once and no finished arm runs again.
#[test]
fn forge_resumes_after_sigkill_mid_arm_applying_each_arm_once() {
    let s = Setup::new();
    std::fs::write(
        s.home.path().join("evalloop.toml"),
        "[stages.arm]\ntimeout_secs = 60\nheartbeat_secs = 1\nstale_after_secs = 3\n\
         [stages.verify]\ntimeout_secs = 60\nheartbeat_secs = 1\nstale_after_secs = 3\n\
         [stages.judge]\ntimeout_secs = 60\nheartbeat_secs = 1\nstale_after_secs = 3\n",
    )
    .unwrap();
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(BRIEF_ID, "scripted@2: sleep 6000", "", VERIFY_SHORT);
    let args = s.forge_args(&brief, &skill, &[]);
    let mut child = s
        .home
        .cmd()
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let s2 = s.run_dir(BRIEF_ID).join("s2");
    wait_for(Duration::from_secs(60), "sample 2's arms to start", || {
        let jobs = s.home.json(&["jobs", "list"]);
        let running = jobs
            .as_array()
            .into_iter()
            .flatten()
            .filter(|j| j["state"] == "running" && j["stage"] == "arm")
            .count();
        (s2.exists() && running == 2).then_some(())
    });
    assert!(
        s.run_dir(BRIEF_ID).join("s1/with.meta/run.json").is_file(),
        "sample 1 finished before the kill"
    );
    signal(&child, Signal::SIGKILL);
    wait_exit(&mut child, Duration::from_secs(10));
    let (code, report, stderr) = s.forge(&brief, &skill, &[]);
    assert_ne!(code, 2, "the resume is not refused: {stderr}");
    assert_eq!(
        report["samples"].as_array().map(Vec::len),
        Some(3),
        "{stderr}\n{report:#}"
    );
    let jobs = s.home.json(&["jobs", "list"]);
    let arms: Vec<&Value> = jobs
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["workflow"] == "evalloop" && j["stage"] == "arm")
        .collect();
    assert_eq!(arms.len(), 6, "one job per arm, never a second: {jobs:#}");
    let s1_attempts: Vec<u64> = arms
        .iter()
        .filter(|j| j["idempotency_key"].as_str().unwrap().contains(":1:"))
        .map(|j| j["attempts"].as_u64().unwrap())
        .collect();
    assert_eq!(
        s1_attempts,
        vec![1, 1],
        "sample 1's finished arms did not run again"
    );
    for arm in &arms {
        let shown = s.home.json(&["jobs", "show", arm["id"].as_str().unwrap()]);
        assert_eq!(
            shown["applied"].as_array().map(Vec::len),
            Some(1),
            "each arm's result applied once: {shown:#}"
        );
    }
    assert_eq!(s.ledger().len(), 1, "one ledger row");
}

/// RFC 3339 day arithmetic without a date crate in this test crate.
mod chrono_free {
    /// Seconds since the epoch.
    pub(super) struct Instant(i64);

    /// Parses `YYYY-MM-DDTHH:MM:SS...Z` (UTC).
    pub(super) fn parse(text: &str) -> Instant {
        let n = |a: usize, b: usize| text[a..b].parse::<i64>().unwrap();
        let (y, m, d) = (n(0, 4), n(5, 7), n(8, 10));
        let (y2, m2) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
        let days = 365 * y2 + y2 / 4 - y2 / 100 + y2 / 400 + (m2 * 306 + 5) / 10 + (d - 1);
        Instant(days * 86400 + n(11, 13) * 3600 + n(14, 16) * 60 + n(17, 19))
    }

    impl Instant {
        /// Whole days from `other` to `self`.
        pub(super) fn days_since(&self, other: Instant) -> i64 {
            (self.0 - other.0) / 86400
        }
    }
}

// E-47, E-03: the brief's verify (`skillforge eval check`) reads the delivered document inside the
// reply via $FORGE_FINAL, not the prose around it.
#[test]
fn e47_verify_checks_the_document_inside_the_reply_not_the_prose() {
    let s = Setup::new();
    let skill = s.skill("fonts", "scripted: reply AX41 has no Arial, so:\\n```css\\n/* rejected:\\n Helvetica\\n Roboto\\n Arial\\n*/\\nbody { font-family: Inter; }\\n```");
    let verify = format!(
        "{} eval check --forbid Arial",
        skillforge_tests::bin().display()
    );
    let brief = s.brief(
        BRIEF_ID,
        "scripted@1: reply ```css\\nbody { font-family: Arial; }\\n```",
        "",
        &verify,
    );
    let (_, report, stderr) = s.forge(&brief, &skill, &["--samples", "1"]);
    let v = &report["samples"][0];
    assert_eq!(
        v["verify_passed"],
        json!({"with": true, "without": false}),
        "{stderr}\n{report:#}"
    );
}

// E-12: an unreadable Codex auth.json stops the run before any arm, even with OPENAI_API_KEY set.
#[test]
fn e12_unreadable_codex_auth_stops_before_any_arm() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let home = s.path("empty-home").display().to_string();
    let (code, _, stderr) = s.forge_env(
        &brief,
        &skill,
        &["--runtime", "codex"],
        &[("HOME", &home), ("OPENAI_API_KEY", "sk-test")],
    );
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("auth.json") && stderr.contains("no arm started"),
        "{stderr}"
    );
    assert!(!s.run_dir(BRIEF_ID).exists());
}

// E-12: CODEX_FORCE_AUTH_JSON=0 chooses the API key deliberately: with no auth.json the forge
// goes on and its arms run (no Codex CLI on the arms' PATH, so they never ran — an arm fault, not
// a credential stop), where the same run without the switch stopped before any arm.
#[test]
fn e12_codex_force_auth_json_0_uses_the_key_and_the_arms_run() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let (home, path) = (s.path("empty-home").display().to_string(), s.empty_path());
    let env = [
        ("HOME", home.as_str()),
        ("OPENAI_API_KEY", "sk-test"),
        ("CODEX_FORCE_AUTH_JSON", "0"),
        ("PATH", path.as_str()),
    ];
    let (code, report, stderr) = s.forge_env(
        &brief,
        &skill,
        &["--runtime", "codex", "--judge-runtime", "scripted"],
        &env,
    );
    assert_ne!(code, 3, "no credential stop: {stderr}");
    assert_eq!(
        codes(&report),
        vec![Some("arm_never_ran".to_owned())],
        "the arms ran (and found no codex): {stderr}\n{report:#}"
    );
    let run: Value = serde_json::from_str(
        &std::fs::read_to_string(s.run_dir(BRIEF_ID).join("s1/with.meta/run.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        (run["runtime"].as_str(), run["exit"].as_str()),
        (Some("codex"), Some("not_runnable")),
        "{run:#}"
    );
}

// Issue 17 item 7 on a fleet: a Redis queue, two workers running the arms in parallel, the forging
// CLI as the control plane applying results; the same chain adopts.
#[test]
fn forge_on_a_two_worker_redis_fleet_adopts() {
    let redis = RedisServer::start();
    let s = Setup::on(Home::redis(&redis.url()));
    let _workers: Vec<Reaped> = ["w1", "w2"]
        .iter()
        .map(|n| Reaped(s.home.spawn_worker(n, &[])))
        .collect();
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let (code, report, stderr) = s.forge(&brief, &skill, &[]);
    assert_eq!(code, 0, "{stderr}\n{}", s.home.logs());
    assert_eq!(report["gate"]["decision"], "adopt");
    let jobs = s.home.json(&["jobs", "list"]);
    let arms: Vec<&Value> = jobs
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["stage"] == "arm")
        .collect();
    assert_eq!(arms.len(), 6);
    for arm in arms {
        assert_eq!(arm["state"], "succeeded", "{arm:#}");
        let worker = arm["history"][0]["worker"].as_str().unwrap_or_default();
        assert!(
            worker.starts_with("w1") || worker.starts_with("w2"),
            "run by a fleet worker, not the CLI: {arm:#}"
        );
    }
}

/// Renders `page` in headless Chromium: (the DOM as rendered, the screenshot's PNG bytes).
fn chromium(page: &Path, dir: &Path) -> (String, Vec<u8>) {
    let shot = dir.join(format!(
        "{}.png",
        page.file_stem().unwrap().to_string_lossy()
    ));
    let url = format!("file://{}", page.display());
    let base = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--window-size=1200,900",
    ];
    let dom = std::process::Command::new("chromium")
        .args(base)
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .expect("chromium (Debian package `chromium`, installed by scripts/test)");
    let out = std::process::Command::new("chromium")
        .args(base)
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&dom.stdout).into_owned(),
        std::fs::read(&shot).unwrap(),
    )
}

// Issue 17 item 8: the HTML report loads in headless Chromium and shows both arms and the verdict.
#[test]
fn html_report_renders_both_arms_and_the_verdict_in_chromium() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let (code, _, stderr) = s.forge(&brief, &skill, &["--samples", "2"]);
    assert_eq!(code, 0, "{stderr}");
    let (page, out) = s.report_html(BRIEF_ID);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (dom, png) = chromium(&page, s.dir.path());
    for want in [
        "SHORT: shipped 1.2, fixed login",
        "LONG status",
        "winner: with",
        "ADOPT",
        "<h3>with</h3>",
        "<h3>without</h3>",
    ] {
        assert!(dom.contains(want), "rendered page lacks {want:?}:\n{dom}");
    }
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG screenshot");
    assert_eq!(
        (
            u32::from_be_bytes(png[16..20].try_into().unwrap()),
            u32::from_be_bytes(png[20..24].try_into().unwrap())
        ),
        (1200, 900)
    );
    let blank = s.path("blank.html");
    std::fs::write(&blank, "<!doctype html><html><body></body></html>").unwrap();
    let (_, blank_png) = chromium(&blank, s.dir.path());
    assert!(
        png.len() > 4 * blank_png.len(),
        "the screenshot shows content ({} bytes vs a blank page's {})",
        png.len(),
        blank_png.len()
    );
}

// Issue 13 item 8: `eval status` of a running forge shows the running stage's live output (the
// scripted arm writes its stderr line, then sleeps until cancelled).
#[test]
fn eval_status_shows_the_running_arms_output_tail() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(
        BRIEF_ID,
        "scripted: stderr arm is thinking\nscripted@1: sleep 600000",
        "",
        VERIFY_SHORT,
    );
    let args = s.forge_args(&brief, &skill, &[]);
    let forge = Reaped(
        s.home
            .cmd()
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let shown = s.home.wait(
        Duration::from_secs(60),
        "eval status to show the running arm's output",
        || {
            let out = s.home.run(&["eval", "status", "--brief", BRIEF_ID]);
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            (text.contains("running: arm job") && text.contains("│ arm is thinking"))
                .then_some(text)
        },
    );
    assert!(shown.contains("jobs logs --follow"), "{shown}");
    // `--json` is unchanged: the files' status only.
    let json = s.home.json(&["eval", "status", "--brief", BRIEF_ID]);
    assert!(json.get("running").is_none(), "{json:#}");
    // Stop the sleeping arms through the queue (their worker kills them), then the forge.
    let running = || -> Vec<String> {
        let jobs = s.home.json(&["jobs", "list", "--state", "running"]);
        jobs.as_array()
            .into_iter()
            .flatten()
            .filter_map(|j| j["id"].as_str().map(str::to_owned))
            .collect()
    };
    for id in running() {
        s.home.run(&["jobs", "cancel", &id]);
    }
    s.home.wait(
        Duration::from_secs(60),
        "the cancelled arms to stop",
        || running().is_empty().then_some(()),
    );
    drop(forge);
}

// `eval forge --mode corrections --theme T`: a model (the scripted runtime, as an `agent` job)
// drafts the knowledge-gap brief from the correction theme, the brief passes E-01/E-02 and is
// written under the home, and the same forge runs it to a decision; `--dry-run` drafts nothing.
#[test]
fn forge_mode_corrections_drafts_the_brief_from_a_theme_then_adopts() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let draft = json!({
        "brief": {"id": "kg-status", "prompt": "scripted: reply LONG status: here is every detail of the week, item by item, with context and caveats",
                  "setup": {"notes.md": "shipped 1.2; fixed login"}, "verify": VERIFY_SHORT,
                  "rubric": "scripted: prefer SHORT", "output": "reply"},
        "rules": [], "good_example": "shipped 1.2, fixed login", "bad_example": "here is every detail of the week, item by item, with context"
    });
    let theme = s.path("status.theme.json");
    let corrections = [format!(
        "no, nobody reads all that\nscripted: reply {draft}"
    )];
    std::fs::write(&theme, json!({"name": "status", "rules": ["status replies stay under nine words"], "corrections": corrections}).to_string()).unwrap();
    let (code, report, stderr) = s.forge(
        Path::new(""),
        &skill,
        &[
            "--mode",
            "corrections",
            "--theme",
            theme.to_str().unwrap(),
            "--dry-run",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        report["skipped"].as_str().unwrap().contains("would draft"),
        "{report:#}"
    );
    assert!(
        !s.home.path().join("eval/briefs").exists(),
        "a dry run drafts nothing"
    );
    let (code, report, stderr) = s.forge(
        Path::new(""),
        &skill,
        &["--mode", "corrections", "--theme", theme.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{stderr}\n{report:#}");
    let written: Value = serde_json::from_str(
        &std::fs::read_to_string(s.home.path().join("eval/briefs/kg-status.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(written, draft["brief"]);
    assert_eq!(report["gate"]["decision"], "adopt", "{report:#}");
    assert_eq!(s.ledger()[0]["brief_id"], "kg-status");
}

// Issue 35 item 10: `eval forge --mode corrections --runtime scripted` on a theme of plain
// corrections (no `scripted:` line in them) runs: the scripted stand-in drafts a brief (E-01 and
// E-02 checked on it as on a model's), the forge runs it, and its scripted judge's picks are
// reported as no evidence with what to do, instead of "the drafting model's reply holds no JSON
// object".
#[test]
fn forge_mode_corrections_runs_on_the_scripted_runtime_with_plain_corrections() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let theme = s.path("status.theme.json");
    std::fs::write(
        &theme,
        json!({"name": "Status replies", "rules": ["status replies stay under nine words"],
               "corrections": ["no, nobody reads all that", "too long again"]})
        .to_string(),
    )
    .unwrap();
    let (code, report, stderr) = s.forge(
        Path::new(""),
        &skill,
        &["--mode", "corrections", "--theme", theme.to_str().unwrap()],
    );
    assert!(!stderr.contains("holds no JSON object"), "{stderr}");
    let brief: Value = serde_json::from_str(
        &std::fs::read_to_string(s.home.path().join("eval/briefs/kg-status-replies.json"))
            .unwrap_or_else(|e| panic!("the drafted brief is written ({e}): {stderr}")),
    )
    .unwrap();
    assert!(
        brief["rubric"]
            .as_str()
            .unwrap()
            .contains("scripted stand-in"),
        "the brief says who drafted it: {brief:#}"
    );
    assert!(
        !brief.to_string().contains("nine words"),
        "E-02: the rule stays out of the brief: {brief:#}"
    );
    assert_eq!(code, 1, "{stderr}\n{report:#}");
    assert_eq!(report["gate"]["decision"], "undecided", "{report:#}");
    let said = report.to_string();
    assert!(
        said.contains("scripted: prefer TEXT") && said.contains("judge with a model runtime"),
        "says what to do about the scripted judge: {report:#}"
    );
    // In words, the undecided forge says where the drafted brief is and how to forge it after
    // editing it: another `--theme` forge would draft it anew over the edit.
    let drafted = s.home.path().join("eval/briefs/kg-status-replies.json");
    let out = s
        .home
        .cmd()
        .args([
            "eval",
            "forge",
            "--runtime",
            "scripted",
            "--fresh",
            "--mode",
            "corrections",
        ])
        .arg("--theme")
        .arg(&theme)
        .arg("--skill-dir")
        .arg(&skill)
        .arg("--install-root")
        .arg(s.path("agents-skills"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "the brief was drafted to {}: edit it there",
            drafted.display()
        )) && stdout.contains(&format!("`--brief {} --fresh`", drafted.display())),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// What `eval forge` refuses before anything runs names the flag or file to fix: a mistyped
// runtime names `--runtime`; a SKILL.md given for the skill dir names the dir; a skill whose
// name differs from its directory is refused as `template add` refuses it.
// A dry run spends nothing but says what would stop the real forge (a new user's `--dry-run` on a
// logged-out Claude Code exited 0 without a word): the credential the runtime lacks, as the
// real run's check words it.
#[test]
fn a_dry_run_warns_of_a_runtime_without_credentials() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let mut cmd = s.home.cmd();
    let out = skillforge_tests::logged_out_claude(&mut cmd, &s.path("user-home"))
        .args([
            "eval",
            "forge",
            "--runtime",
            "claude",
            "--dry-run",
            "--brief",
        ])
        .arg(&brief)
        .arg("--skill-dir")
        .arg(&skill)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("warning: the forge would stop before any arm: runtime `claude`")
            && stderr.contains("CLAUDE_CODE_OAUTH_TOKEN"),
        "{stderr}"
    );
}

#[test]
fn forge_input_errors_name_what_to_fix() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let (code, _, stderr) = s.forge(&brief, &skill, &["--runtime", "scriptd"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--runtime: ") && !stderr.contains("--judge-runtime"),
        "{stderr}"
    );
    let (code, _, stderr) = s.forge(&brief, &skill.join("SKILL.md"), &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("give its directory") && stderr.contains(skill.to_str().unwrap()),
        "{stderr}"
    );
    let odd = s.path("skills/other-dir");
    std::fs::create_dir_all(&odd).unwrap();
    std::fs::write(odd.join("SKILL.md"), "---\nname: tldr\n---\nbody\n").unwrap();
    let (code, _, stderr) = s.forge(&brief, &odd, &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("differs from its directory") && stderr.contains("problems"),
        "{stderr}"
    );
    // A mistyped skill dir is no such directory (not "has no SKILL.md").
    let (code, _, stderr) = s.forge(&brief, &s.path("skills/tldrr"), &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("no such directory") && stderr.contains("skills/tldrr"),
        "{stderr}"
    );
    // No skill at all: both ways to give one are named.
    let out = s
        .home
        .cmd()
        .args(["eval", "forge", "--runtime", "scripted", "--brief"])
        .arg(&brief)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() == Some(2)
            && said.contains("--skill-dir")
            && said.contains("--skill-version"),
        "{said}"
    );
    assert!(!s.run_dir(BRIEF_ID).exists(), "nothing ran");
    // `eval brief --check --json` answers one JSON document.
    let out = s.home.run(&[
        "--json",
        "eval",
        "brief",
        "--check",
        brief.to_str().unwrap(),
    ]);
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(
        (doc["valid"].as_bool(), doc["brief"]["id"].as_str()),
        (Some(true), Some(BRIEF_ID))
    );
}

// Issue 34 item 12: with the measured-judge gate on (`[skillopt] judge_kappa_floor`,
// `judge_min_paired_picks`), a forge whose judge has no paired picks with the humans' A/Bs is not
// applied: UNDECIDED, exit 1, no ledger row, nothing installed, the reason named; with the gate
// off again, the same forge (its samples reused, no arm runs again) adopts as without the gate.
#[test]
fn a_forge_verdict_counts_only_from_a_measured_judge() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let config = s.home.path().join("config.toml");
    std::fs::write(
        &config,
        "[skillopt]\njudge_kappa_floor = 0.2\njudge_min_paired_picks = 3\n",
    )
    .unwrap();
    let (code, report, stderr) = s.forge(&brief, &skill, &[]);
    assert_eq!(code, 1, "{stderr}\n{report:#}");
    assert_eq!(
        report["aggregate"]["wins_with"], 3,
        "the samples ran and were judged"
    );
    assert_eq!(report["gate"]["decision"], "undecided", "{report:#}");
    let headline = report["gate"]["lines"][0].as_str().unwrap();
    assert!(
        headline.starts_with("UNDECIDED (judge not measured): the judge scripted (model scripted-cheap) is not measured")
            && headline.contains("0 paired pick(s) with a human, fewer than judge_min_paired_picks 3")
            && headline.contains("the verdict `adopt` on `tldr` is not applied"),
        "{headline}"
    );
    assert!(
        report["gate"]["lines"][1]
            .as_str()
            .unwrap()
            .starts_with("unmeasured judge's verdict: ADOPT"),
        "{report:#}"
    );
    assert!(report["ledger_row"].is_null(), "{report:#}");
    assert!(s.ledger().is_empty(), "no verdict recorded");
    assert!(!s.path("agents-skills/tldr").exists(), "nothing installed");
    assert!(
        stderr.contains("its verdict will not be applied"),
        "{stderr}"
    );
    // gate off: the forge's own samples decide, as they always did
    std::fs::write(&config, "").unwrap();
    let (code, again, stderr) = s.forge(&brief, &skill, &[]);
    assert_eq!(code, 0, "{stderr}\n{again:#}");
    assert_eq!(again["reused"], true, "{again:#}");
    assert_eq!(again["gate"]["decision"], "adopt", "{again:#}");
    assert_eq!(s.ledger().len(), 1);
    assert!(s.path("agents-skills/tldr/SKILL.md").is_file());
}

// Issue 34 item 12, the measured case end to end: the judge `eval forge` uses (scripted, model
// `scripted-cheap`) is measured by A/B picks where a human and the same judge, asked by that
// model name (`ab --judge-model`), agreed on four pairs; with the gate on, its verdict is applied.
// Measured under another model name, it is not.
#[test]
fn a_forge_verdict_from_a_judge_measured_by_ab_picks_is_applied() {
    let s = Setup::new();
    s.ab_judge_gate();
    let measure = |model: &str| s.agree_by_ab(model, &format!(" of {model}"));
    // Measured under another name: the forge's judge is still unmeasured.
    measure("scripted-strong");
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let (code, report, stderr) = s.forge(&brief, &skill, &[]);
    assert_eq!(code, 1, "{stderr}\n{report:#}");
    assert!(
        report["gate"]["lines"][0].as_str().unwrap().starts_with(
            "UNDECIDED (judge not measured): the judge scripted (model scripted-cheap)"
        ),
        "{report:#}"
    );
    // Measured under its own name: the same samples, reused, now adopt.
    measure("scripted-cheap");
    let agreement = s.home.json(&["judge", "agreement"]);
    let cheap = agreement["judges"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["model"] == "scripted-cheap")
        .unwrap_or_else(|| panic!("no scripted-cheap judge: {agreement:#}"));
    assert_eq!(cheap["measured"], true, "{cheap:#}");
    let (code, again, stderr) = s.forge(&brief, &skill, &[]);
    assert_eq!(code, 0, "{stderr}\n{again:#}");
    assert_eq!(again["reused"], true, "{again:#}");
    assert_eq!(again["gate"]["decision"], "adopt", "{again:#}");
    assert_eq!(s.ledger().len(), 1);
}

// Issue 34 item 12, the bypass: a forge whose judge (scripted, `scripted-cheap`) is not measured
// is UNDECIDED; forging the brief again under a measured judge (`--judge-model judge-x`, measured
// by A/B picks) must not apply the unmeasured judge's reused verdicts: it is refused (exit 2,
// naming both judge models and the way on), nothing is recorded or installed. Forged anew under
// judge-x, its verdicts, the ledger row and the human report name the judge that decided.
#[test]
fn reforging_under_another_judge_does_not_reuse_the_first_judges_verdicts() {
    let s = Setup::new();
    s.ab_judge_gate();
    s.agree_by_ab("judge-x", "");
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let (code, report, stderr) = s.forge(&brief, &skill, &[]);
    assert_eq!(code, 1, "{stderr}\n{report:#}");
    assert_eq!(report["gate"]["decision"], "undecided", "{report:#}");
    let forge_file = s.run_dir(BRIEF_ID).join("forge.json");
    let state_before = std::fs::read(&forge_file).unwrap();
    let state: Value = serde_json::from_slice(&state_before).unwrap();
    assert_eq!(
        state["judge"],
        json!({"runtime": "scripted", "model": "scripted-cheap"}),
        "{state:#}"
    );
    assert_eq!(state["arms"], json!({"runtime": "scripted"}), "{state:#}");
    for n in 1..=3 {
        assert_eq!(
            s.verdict(BRIEF_ID, n).unwrap()["judge"],
            json!({"runtime": "scripted", "model": "scripted-cheap"})
        );
    }
    // The bypass: the same brief under the measured judge.
    let (code, again, stderr) = s.forge(&brief, &skill, &["--judge-model", "judge-x"]);
    assert_eq!(code, 2, "{stderr}\n{again:#}");
    assert!(
        stderr.contains("judge model `scripted-cheap` then, `judge-x` now (--judge-model)")
            && stderr.contains("--judge-model scripted-cheap")
            && stderr.contains("delete the brief's run dir")
            && stderr.contains(&s.run_dir(BRIEF_ID).display().to_string()),
        "{stderr}"
    );
    assert!(s.ledger().is_empty(), "no verdict recorded");
    assert!(!s.path("agents-skills/tldr").exists(), "nothing installed");
    assert_eq!(
        std::fs::read(&forge_file).unwrap(),
        state_before,
        "the earlier forge's state is unchanged"
    );
    // The way on: a new forge of the brief under the measured judge decides, naming it.
    std::fs::remove_dir_all(s.run_dir(BRIEF_ID)).unwrap();
    let (code, anew, stderr) = s.forge(&brief, &skill, &["--judge-model", "judge-x"]);
    assert_eq!(code, 0, "{stderr}\n{anew:#}");
    assert_eq!(anew["reused"], Value::Null, "{anew:#}");
    assert_eq!(anew["gate"]["decision"], "adopt", "{anew:#}");
    let judge_x = json!({"runtime": "scripted", "model": "judge-x"});
    assert_eq!(anew["ledger_row"]["judge"], judge_x, "{anew:#}");
    let ledger = s.ledger();
    assert_eq!(ledger.len(), 1);
    assert_eq!(ledger[0]["judge"], judge_x);
    for n in 1..=3 {
        assert_eq!(s.verdict(BRIEF_ID, n).unwrap()["judge"], judge_x);
    }
    // Read again with the same flags: reused, and the human report names the judge.
    let out = s.forge_human(&brief, &skill, &["--judge-model", "judge-x"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("already forged")
            && stdout.contains("decided by the judge scripted (model judge-x)"),
        "{stdout}"
    );
    assert_eq!(s.ledger().len(), 1);
}

// A brief forged again with another arms runtime is refused (exit 2) naming both runtimes and the
// way on, and `--dry-run` says the same instead of "would run"; the same flags read the forge
// again (nothing runs). A forge that did not record its runtime and judge (written before they
// were recorded) is not reused either: which agents made its evidence is unknown.
#[test]
fn reforging_with_another_runtime_is_refused_and_the_same_flags_reuse() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let (code, report, stderr) = s.forge(&brief, &skill, &[]);
    assert_eq!(code, 0, "{stderr}\n{report:#}");
    let ledger = s.ledger();
    assert_eq!(ledger.len(), 1);
    for extra in [
        &["--runtime", "scripted-b"][..],
        &["--runtime", "scripted-b", "--dry-run"],
    ] {
        let (code, again, stderr) = s.forge(&brief, &skill, extra);
        assert_eq!(code, 2, "{extra:?}: {stderr}\n{again:#}");
        assert!(
            stderr.contains("arms runtime `scripted` then, `scripted-b` now (--runtime)")
                && stderr.contains("judge runtime `scripted` then, `scripted-b` now")
                && stderr
                    .contains("forge it again with the same flags (--samples 3 --runtime scripted")
                && stderr.contains("delete the brief's run dir"),
            "{extra:?}: {stderr}"
        );
        assert!(!stderr.contains("would run"), "{stderr}");
    }
    assert_eq!(s.ledger(), ledger, "nothing recorded");
    let (code, same, stderr) = s.forge(&brief, &skill, &[]);
    assert_eq!(code, 0, "{stderr}\n{same:#}");
    assert_eq!(same["reused"], true, "{same:#}");
    assert_eq!(same["gate"]["decision"], "adopt", "{same:#}");
    assert_eq!(s.ledger(), ledger, "the same forge records nothing again");
    // An older forge.json, without the record of who ran and judged it.
    let forge_file = s.run_dir(BRIEF_ID).join("forge.json");
    let mut state: Value = serde_json::from_slice(&std::fs::read(&forge_file).unwrap()).unwrap();
    let obj = state.as_object_mut().unwrap();
    assert!(obj.remove("arms").is_some() && obj.remove("judge").is_some());
    std::fs::write(&forge_file, serde_json::to_vec(&state).unwrap()).unwrap();
    let (code, old, stderr) = s.forge(&brief, &skill, &[]);
    assert_eq!(code, 2, "{stderr}\n{old:#}");
    assert!(
        stderr.contains("the arms' runtime and model were not recorded"),
        "{stderr}"
    );
    assert!(
        stderr.contains("judge's runtime and model were not recorded"),
        "{stderr}"
    );
}

// Issue 34 item 10, end to end: with `--pace` the anytime-valid gate decides across forges of one
// skill. Three samples won by the with-arm adopt under the majority gate, but PACE holds (wealth
// 1.5³ = 3.4 < 20: UNDECIDED, exit 4 (not decided yet), nothing recorded or installed); a second forge on another
// brief still holds (1.5⁶ = 11.4); the third commits at the eighth win (1.5⁸ = 25.6 ≥ 20) and
// adopts, the PACE report kept beside the aggregate. Without `--pace` the report carries no PACE
// and no `pace.json` is written.
#[test]
fn forge_pace_holds_until_the_e_process_commits_across_forges() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let mut reports = Vec::new();
    for id in ["pace-1", "pace-2", "pace-3"] {
        let brief = s.brief(id, "", "", VERIFY_SHORT);
        let (code, report, stderr) = s.forge(&brief, &skill, &["--pace"]);
        reports.push((code, report, stderr));
    }
    for (i, (code, report, stderr)) in reports.iter().take(2).enumerate() {
        assert_eq!(*code, 4, "forge {}: {stderr}\n{report:#}", i + 1);
        assert_eq!(report["aggregate"]["wins_with"], 3, "{report:#}");
        assert_eq!(report["gate"]["decision"], "undecided", "{report:#}");
        assert_eq!(report["pace"]["verdict"], "continue", "{report:#}");
        assert_eq!(report["pace"]["wins"], 3 * (i as u64 + 1), "{report:#}");
        let headline = report["gate"]["lines"][0].as_str().unwrap();
        assert!(
            headline.starts_with("UNDECIDED (PACE)")
                && headline.contains(&format!("over {} forge", i + 1)),
            "{headline}"
        );
        assert!(
            report["gate"]["lines"][1]
                .as_str()
                .unwrap()
                .starts_with("this forge alone: ADOPT"),
            "the majority gate alone would adopt: {report:#}"
        );
        assert!(report["ledger_row"].is_null());
    }
    let (code, third, stderr) = &reports[2];
    assert_eq!(*code, 0, "{stderr}\n{third:#}");
    assert_eq!(third["gate"]["decision"], "adopt", "{third:#}");
    assert_eq!(
        (
            third["pace"]["verdict"].as_str(),
            third["pace"]["pairs"].as_u64(),
            third["pace"]["losses"].as_u64()
        ),
        (Some("commit"), Some(8), Some(0)),
        "{third:#}"
    );
    assert!((third["pace"]["wealth"].as_f64().unwrap() - 1.5f64.powi(8)).abs() < 1e-9);
    assert!(
        third["gate"]["lines"][0]
            .as_str()
            .unwrap()
            .starts_with("ADOPT `tldr` (PACE)"),
        "{third:#}"
    );
    let ledger = s.ledger();
    assert_eq!(ledger.len(), 1, "only the committing forge records");
    assert_eq!(
        (
            ledger[0]["decision"].as_str(),
            ledger[0]["brief_id"].as_str()
        ),
        (Some("adopt"), Some("pace-3"))
    );
    assert!(s.path("agents-skills/tldr/SKILL.md").is_file());
    let kept: Value = serde_json::from_str(
        &std::fs::read_to_string(s.run_dir("pace-3").join("pace.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(kept, third["pace"], "the report kept beside the aggregate");
    // off: no PACE anywhere
    let other = Setup::new();
    let skill = other.skill("tldr", GOOD_SKILL);
    let (code, plain, _) = other.forge(&other.brief("plain", "", "", VERIFY_SHORT), &skill, &[]);
    assert_eq!(code, 0);
    assert!(plain.get("pace").is_none(), "{plain:#}");
    assert!(!other.run_dir("plain").join("pace.json").exists());
    assert!(
        !plain["gate"]["lines"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().contains("PACE")),
        "{plain:#}"
    );
}

/// `eval forge` with neither `--install-root` nor `--adopt-dir`, run by a user whose home is
/// `user_home`: (exit code, human stdout, stderr).
fn forge_as_user(s: &Setup, user_home: &Path, brief: &Path, skill: &Path) -> (i32, String, String) {
    let out = s
        .home
        .cmd()
        .env("HOME", user_home)
        .args(["eval", "forge", "--runtime", "scripted", "--brief"])
        .arg(brief)
        .arg("--skill-dir")
        .arg(skill)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// Issue 35 item 7: an adoption is installed only where `--install-root` or `[eval] install_root`
// says. With neither, it is kept in the home, linked for no agent, and the output says how to
// install it; with the key (`~/` is the user's home), it is linked there.
#[test]
fn an_adoption_is_installed_only_where_the_flag_or_the_config_says() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let user = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = forge_as_user(&s, user.path(), &brief, &skill);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("ADOPT"), "{stdout}");
    let anything_in_user_home = std::fs::read_dir(user.path()).unwrap().count();
    assert_eq!(
        anything_in_user_home, 0,
        "the forge wrote into the user's home unasked:\n{stdout}"
    );
    assert!(
        s.home.path().join("eval/installed/tldr/SKILL.md").is_file(),
        "the home keeps the adopted copy"
    );
    assert!(
        stdout.contains("linked for no agent")
            && stdout.contains("skillforge eval deploy --runtime")
            && stdout.contains("[eval] install_root"),
        "says where it is and how to install it:\n{stdout}"
    );

    // The key: a second skill adopted under a config that names the user's Claude Code dir.
    skillforge_tests::decide::config(&s.home, "[eval]\ninstall_root = \"~/.claude/skills\"\n");
    let other = s.skill("brief-reply", GOOD_SKILL);
    let brief2 = s.brief("status-reply-2", "", "", VERIFY_SHORT);
    let (code, stdout, stderr) = forge_as_user(&s, user.path(), &brief2, &other);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let link = user.path().join(".claude/skills/brief-reply");
    assert!(
        link.symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink())
            && link.join("SKILL.md").is_file(),
        "linked where `[eval] install_root` says:\n{stdout}"
    );
    assert!(stdout.contains(&link.display().to_string()), "{stdout}");
}

// Issue 35 item 7: a relative `[eval] install_root` is refused before anything runs, naming the
// key and what to write instead; nothing is written.
#[test]
fn a_relative_eval_install_root_is_refused_naming_the_key() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    skillforge_tests::decide::config(&s.home, "[eval]\ninstall_root = \"skills\"\n");
    let user = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = forge_as_user(&s, user.path(), &brief, &skill);
    assert_eq!(code, 2, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("[eval] install_root") && stderr.contains("~/.claude/skills"),
        "{stderr}"
    );
    assert!(!s.run_dir(BRIEF_ID).exists(), "nothing ran");
}

// Issue 35 item 9: `eval status` without `--brief` lists every forged brief (skill, status,
// samples judged, decision, judge) as an aligned table, and `--json` as one array; the one-brief
// view names the arms and the judge.
#[test]
fn eval_status_without_a_brief_lists_every_forge_with_its_decision_and_judge() {
    let s = Setup::new();
    let empty = s.home.run(&["eval", "status"]);
    assert!(
        String::from_utf8_lossy(&empty.stdout).contains("no brief has been forged"),
        "{}",
        String::from_utf8_lossy(&empty.stdout)
    );
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let (code, report, stderr) = s.forge(&brief, &skill, &[]);
    assert_eq!(code, 0, "{stderr}\n{report:#}");
    let listed = s.home.json(&["eval", "status"]);
    assert_eq!(
        listed,
        json!([{"brief": BRIEF_ID, "skill": "tldr", "status": "done", "samples": 3, "judged": 3,
                "decision": "adopt", "judge": {"runtime": "scripted", "model": "scripted-cheap"}}]),
        "{listed:#}"
    );
    let text = String::from_utf8(s.home.run(&["eval", "status"]).stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("BRIEF") && lines[1].starts_with(BRIEF_ID),
        "{text}"
    );
    assert_eq!(
        lines[0].find("DECISION"),
        lines[1].find("adopt"),
        "aligned:\n{text}"
    );
    let one =
        String::from_utf8(s.home.run(&["eval", "status", "--brief", BRIEF_ID]).stdout).unwrap();
    assert!(
        one.contains("judge: scripted (model scripted-cheap)"),
        "{one}"
    );
    // The ledger's `forge:<id>` tag (how a row finds its forge) is not shown to people.
    let report =
        String::from_utf8(s.home.run(&["eval", "report", "--brief", BRIEF_ID]).stdout).unwrap();
    assert!(
        !one.contains("forge:") && !report.contains("forge:") && report.contains("gate: ADOPT"),
        "{one}\n{report}"
    );
}

// `--pace` pools only earlier forges of the same comparison: a forge judged by another judge, or
// of an edited skill, bets on another question; it is left out and the gate's line says so.
#[test]
fn forge_pace_pools_only_forges_of_the_same_skill_content_and_judge() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let pace = |id: &str, extra: &[&str]| {
        let brief = s.brief(id, "", "", VERIFY_SHORT);
        let mut args = vec!["--pace"];
        args.extend_from_slice(extra);
        let (code, report, stderr) = s.forge(&brief, &skill, &args);
        assert_eq!(code, 4, "PACE holds: not decided yet\n{stderr}\n{report:#}");
        report
    };
    let first = pace("pace-a", &[]);
    assert_eq!(first["pace"]["wins"], 3, "{first:#}");
    let other_judge = pace("pace-b", &["--judge-model", "scripted-strict"]);
    assert_eq!(
        other_judge["pace"]["wins"], 3,
        "another judge's forge is not pooled: {other_judge:#}"
    );
    let headline = other_judge["gate"]["lines"][0].as_str().unwrap();
    assert!(
        headline.contains("over 1 forge of `tldr`; 1 earlier forge left out (1: another judge)"),
        "{headline}"
    );
    let same_judge = pace("pace-c", &["--judge-model", "scripted-strict"]);
    assert_eq!(same_judge["pace"]["wins"], 6, "{same_judge:#}");
    // The skill edited: nothing earlier is the same comparison.
    std::fs::write(
        skill.join("SKILL.md"),
        format!("---\nname: tldr\ndescription: Keep status replies short\n---\n{GOOD_SKILL}\nBe brief.\n"),
    )
    .unwrap();
    let edited = pace("pace-d", &["--judge-model", "scripted-strict"]);
    assert_eq!(edited["pace"]["wins"], 3, "{edited:#}");
    let headline = edited["gate"]["lines"][0].as_str().unwrap();
    assert!(
        headline.contains("3 earlier forges left out (3: another version of the skill)"),
        "{headline}"
    );
}

// Issue 35 item 1 (one representation): the eval loop forges installed template versions — a
// train candidate against the current version — without the user writing either out: the
// candidate's SKILL.md in the with-arm, the incumbent's in the baseline arm (a head-to-head).
#[test]
fn a_template_version_is_forged_against_another_version_of_the_same_skill() {
    let s = Setup::new();
    let skill = s.skill(
        "tldr",
        "scripted: reply LONG: every detail of the week, shipped 1.2 and fixed login",
    );
    let added = s.home.run(&["template", "add", skill.to_str().unwrap()]);
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let skill = s.skill("tldr", GOOD_SKILL);
    let added = s.home.run(&["template", "add", skill.to_str().unwrap()]);
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let forge = |candidate: &str, rival: &str| {
        s.home
            .cmd()
            .args([
                "--json",
                "eval",
                "forge",
                "--runtime",
                "scripted",
                "--brief",
            ])
            .arg(&brief)
            .args(["--skill-version", candidate, "--rival-version", rival])
            .arg("--adopt-dir")
            .arg(s.path("adopted"))
            .output()
            .unwrap()
    };
    let bad = forge("tldr@v9", "tldr@v1");
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("no version of `tldr` matches `tldr@v9`"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    // It lists the versions there are to choose from.
    let said = String::from_utf8_lossy(&bad.stderr);
    assert!(
        said.contains("its versions: tldr@v1 (") && said.contains("tldr@v2 ("),
        "{said}"
    );
    assert!(!s.run_dir(BRIEF_ID).exists(), "nothing ran");
    let out = forge("tldr@v2", "tldr@v1");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(
        report["gate"]["decision"],
        "adopt",
        "{}\n{report:#}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ledger = s.ledger();
    assert_eq!(ledger[0]["baseline_skills"], json!(["tldr"]), "{ledger:#?}");
    let v1 = s.home.path().join("eval/versions/tldr@v1/tldr/SKILL.md");
    let v2 = s.home.path().join("eval/versions/tldr@v2/tldr/SKILL.md");
    assert!(std::fs::read_to_string(v1).unwrap().contains("LONG"));
    assert!(std::fs::read_to_string(v2).unwrap().contains(GOOD_SKILL));
    let verdict = s.verdict(BRIEF_ID, 1).unwrap();
    assert_eq!(verdict["winner"], "with", "{verdict:#}");
    assert!(
        s.path("adopted/tldr/SKILL.md").is_file(),
        "the adopted version staged"
    );
}

// Issue 35 item 6 (no traps): a forge that stopped on a setup fault says to fix the setup and run
// the brief again, and running it again forges anew (the earlier forge archived, not read back);
// a brief edited since its forge is refused naming the change, and `--fresh` forges it anew.
#[test]
fn a_brief_stopped_on_a_setup_fault_or_edited_is_forged_anew_not_read_back() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let (code, report, stderr) = s.forge_with_no_cli(&brief, &skill);
    assert_eq!(
        (code, report["gate"]["decision"].as_str()),
        (1, Some("stopped")),
        "{stderr}"
    );
    let forge_file: Value =
        serde_json::from_slice(&std::fs::read(s.run_dir(BRIEF_ID).join("forge.json")).unwrap())
            .unwrap();
    let first_id = forge_file["forge_id"].as_str().unwrap().to_owned();
    // The setup fixed (a runtime that runs): forged anew, the stopped forge archived.
    let (code, report, stderr) = s.forge(&brief, &skill, &[]);
    assert_eq!(code, 0, "{stderr}\n{report:#}");
    assert_eq!(report["gate"]["decision"], "adopt", "{report:#}");
    assert!(
        stderr.contains("forging the brief anew (its earlier forge stopped on a setup fault"),
        "{stderr}"
    );
    let archived = s
        .home
        .path()
        .join(format!("eval/archive/{BRIEF_ID}-{first_id}/forge.json"));
    assert!(archived.is_file(), "the stopped forge is kept");
    // The brief edited: refused, naming the change and the way on; nothing changes.
    let edited = s.brief(BRIEF_ID, "Mention the release.", "", VERIFY_SHORT);
    let before = std::fs::read(s.run_dir(BRIEF_ID).join("forge.json")).unwrap();
    let (code, _, stderr) = s.forge(&edited, &skill, &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!("brief `{BRIEF_ID}` changed since its forge"))
            && stderr.contains("--fresh"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(s.run_dir(BRIEF_ID).join("forge.json")).unwrap(),
        before
    );
    let (code, report, stderr) = s.forge(&edited, &skill, &["--fresh"]);
    assert_eq!(code, 0, "{stderr}\n{report:#}");
    assert!(
        stderr.contains("forging the brief anew (--fresh)"),
        "{stderr}"
    );
    assert_ne!(report["reused"], true, "{report:#}");
    assert_eq!(
        std::fs::read_dir(s.home.path().join("eval/archive"))
            .unwrap()
            .count(),
        2,
        "both earlier forges kept"
    );
    assert_eq!(s.ledger().len(), 2, "the ledger keeps every verdict");
}

/// `eval forge --json --runtime scripted --brief BRIEF --skill-version CANDIDATE --rival-version
/// RIVAL`: (exit code, report, stderr).
fn forge_versions(s: &Setup, brief: &Path, candidate: &str, rival: &str) -> (i32, Value, String) {
    let out = s
        .home
        .cmd()
        .args([
            "--json",
            "eval",
            "forge",
            "--runtime",
            "scripted",
            "--brief",
        ])
        .arg(brief)
        .args(["--skill-version", candidate, "--rival-version", rival])
        .arg("--adopt-dir")
        .arg(s.path("adopted"))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// E-17 per question: a trained version that ties its predecessor is rejected naming both versions
// (gate, ledger, status, report, human and JSON); the reject bars that content against that rival
// only, so the same content still meets an empty baseline; there, a reject the scripted stand-in
// judged skips the next scripted forge saying whose reject it was and that a model judge
// evaluates it.
#[test]
fn e17_a_version_that_tied_its_predecessor_is_rejected_naming_both_and_still_meets_an_empty_baseline()
 {
    let s = Setup::new();
    let first = s.skill("tldr", "scripted: reply SHORT tie, the first version");
    let add = |dir: &Path| {
        let added = s.home.run(&["template", "add", dir.to_str().unwrap()]);
        assert!(
            added.status.success(),
            "{}",
            String::from_utf8_lossy(&added.stderr)
        );
    };
    add(&first);
    let (second, brief) = s.tie();
    add(&second);
    let (code, report, stderr) = forge_versions(&s, &brief, "tldr@v2", "tldr@v1");
    assert_eq!(
        (code, report["gate"]["decision"].as_str()),
        (1, Some("reject")),
        "{stderr}\n{report:#}"
    );
    let headline = report["gate"]["lines"][0].as_str().unwrap();
    assert!(
        headline.starts_with("REJECT: tldr@v2 did not beat tldr@v1: clean tie"),
        "{headline}"
    );
    let row = &s.ledger()[0];
    assert!(
        row["reason"]
            .as_str()
            .unwrap()
            .contains("tldr@v2 did not beat tldr@v1"),
        "{row:#}"
    );
    assert_eq!(
        row["versions"],
        json!({"candidate": "tldr@v2", "rival": "tldr@v1"})
    );
    assert_eq!(row["baseline_skills"], json!(["tldr"]));
    // `eval status` and `eval report` name both versions, in words and in JSON.
    for cmd in ["status", "report"] {
        let out = s.home.run(&["eval", cmd, "--brief", BRIEF_ID]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("tldr@v2") && text.contains("tldr@v1"),
            "eval {cmd}:\n{text}"
        );
        let doc = s.home.json(&["eval", cmd, "--brief", BRIEF_ID]);
        assert_eq!(
            doc["forge"]["versions"],
            json!({"candidate": "tldr@v2", "rival": "tldr@v1"}),
            "eval {cmd} --json: {doc:#}"
        );
    }
    let human = s.home.run(&["eval", "status"]);
    assert!(
        String::from_utf8_lossy(&human.stdout).contains("tldr@v2 vs tldr@v1"),
        "{}",
        String::from_utf8_lossy(&human.stdout)
    );
    // The same question again (another brief): skipped, naming the versions.
    let again = s.brief(
        "again",
        "",
        "scripted: judge-reply {\"winner\":\"tie\"}",
        "true",
    );
    let (code, report, _) = forge_versions(&s, &again, "tldr@v2", "tldr@v1");
    let skipped = report["skipped"].as_str().unwrap_or_default();
    assert!(
        code == 1 && skipped.contains("tldr@v2 against tldr@v1"),
        "{report:#}"
    );
    // The same content over an empty baseline is another question: evaluated.
    let v2_dir = s.home.path().join("eval/versions/tldr@v2/tldr");
    let empty = s.brief(
        "empty-baseline",
        "",
        "scripted: judge-reply {\"winner\":\"tie\"}",
        "true",
    );
    let (code, report, stderr) = s.forge(&empty, &v2_dir, &[]);
    assert!(report["skipped"].is_null(), "{stderr}\n{report:#}");
    assert_eq!(
        (code, report["gate"]["decision"].as_str()),
        (1, Some("reject")),
        "{report:#}"
    );
    // And that reject (by the scripted stand-in) skips the next scripted forge of it, saying so.
    let third = s.brief(
        "third",
        "",
        "scripted: judge-reply {\"winner\":\"tie\"}",
        "true",
    );
    let (code, report, _) = s.forge(&third, &v2_dir, &[]);
    let skipped = report["skipped"].as_str().unwrap_or_default();
    assert_eq!(code, 1, "{report:#}");
    for said in [
        "never evaluated again",
        "the judge scripted",
        "over an empty baseline",
        "only scripted-judged runs",
        "--judge-runtime claude",
    ] {
        assert!(skipped.contains(said), "{said:?} in {skipped}");
    }
    assert!(!s.run_dir("third").exists());
}

// E-07: on a real skill (no `scripted:` lines) both scripted arms give the same stand-in answer;
// the scripted judge assesses nothing there (not a tie that rejects), and each sample's reason is
// the judge's own: the same text, nothing to prefer, and what gives an arm its answer. The
// undecided gate says to forge the brief anew with --fresh, which an edited brief then takes.
#[test]
fn e07_two_same_stand_in_answers_are_no_verdict_and_the_reason_says_what_to_do() {
    let s = Setup::new();
    let skill = s.skill("changelog-writer", "Group the changelog's entries by type.");
    let brief = s.path("changelog.json");
    let write_brief = |prompt_extra: &str| {
        std::fs::write(
            &brief,
            json!({"id": "changelog", "prompt": format!("Write the changelog for #42 from notes.md.\n{prompt_extra}"),
                   "setup": {"notes.md": "- fixed #42\n"}, "verify": "true",
                   "rubric": "Which changelog is better?\nscripted: prefer #42", "output": "reply"})
            .to_string(),
        )
        .unwrap();
    };
    write_brief("");
    let (code, report, stderr) = s.forge(&brief, &skill, &[]);
    assert_eq!(
        codes(&report),
        vec![Some("unreadable_verdict".to_owned()); 3],
        "{stderr}\n{report:#}"
    );
    let reason = report["samples"][0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("same text")
            && reason.contains("nothing to prefer")
            && reason.contains("scripted: reply"),
        "{reason}"
    );
    assert!(!reason.contains("preferred the slot"), "{reason}");
    assert_eq!(
        (code, report["gate"]["decision"].as_str()),
        (1, Some("undecided")),
        "{report:#}"
    );
    assert!(
        s.ledger().is_empty(),
        "no reject recorded: {:#?}",
        s.ledger()
    );
    let gate = report["gate"]["lines"].to_string();
    assert!(gate.contains("anew with --fresh"), "{gate}");
    // The fix was to the brief: --fresh forges it anew (not refused as changed).
    write_brief("scripted: reply a changelog without the issue number");
    let (code, report, stderr) = s.forge(&brief, &skill, &["--fresh"]);
    assert_ne!(code, 2, "{stderr}");
    assert!(!stderr.contains("changed since"), "{stderr}");
    assert_eq!(
        report["samples"].as_array().map(Vec::len),
        Some(3),
        "{report:#}"
    );
}

// A brief forged under other settings is refused naming each value that differs, was and now
// (a new user re-forging without the rival of the earlier forge could not tell what differed).
#[test]
fn a_reforge_under_other_settings_names_each_difference() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let rival = s.skill("rival", "scripted: reply LONG rival");
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let (code, report, stderr) = s.forge(&brief, &skill, &["--rival", rival.to_str().unwrap()]);
    assert!(code == 0 || code == 1, "{stderr}\n{report:#}");
    let (code, _, stderr) = s.forge(&brief, &skill, &["--samples", "5"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("under other settings (samples: was 3, now 5; rival: was `")
            && stderr.contains(&format!("{}`, now none)", rival.display()))
            && stderr.contains("--fresh"),
        "{stderr}"
    );
}
