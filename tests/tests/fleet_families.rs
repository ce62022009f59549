//! Families whose jobs work in control-plane dirs, on a worker that shares nothing with the
//! control plane but the queue URL (issue 20 item 4; `skillforge_tests::isolated`): the eval
//! forge's arms, verifies and judge carry their work dirs by content and get them back, so no
//! job names a path of the control plane's home.

use serde_json::Value;
use skillforge_tests::eval::{BRIEF_ID, GOOD_SKILL, Setup, VERIFY_SHORT};
use skillforge_tests::isolated::spawn_isolated_worker;
use skillforge_tests::{Home, Reaped, RedisServer};

// Issue 17 item 7 on another machine: arms + verifies + judge of two samples, every job run by the
// isolated worker, the evidence back in the control plane's run dir, the same adoption.
#[test]
fn eval_forge_arms_verifies_and_judge_run_on_a_worker_that_cannot_see_the_home() {
    let redis = RedisServer::start();
    let s = Setup::on(Home::redis(&redis.url()));
    // The skill lives in the home too: only its copy in the with-arm's work dir can reach the worker.
    let skill = s.home.path().join("skills/tldr");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        format!("---\nname: tldr\ndescription: Keep status replies short\n---\n{GOOD_SKILL}\n"),
    )
    .unwrap();
    // Both arms delete the brief's setup file; the verify passes only where it is gone, so a
    // control-plane copy that kept it (delivery never removes) fails both arms' verifies.
    let brief = s.brief(
        BRIEF_ID,
        "scripted: delete notes.md",
        "",
        &format!("test ! -e notes.md && {VERIFY_SHORT}"),
    );
    let _vm = Reaped(spawn_isolated_worker(&s.home, "vm", &[]));
    let hidden = s.home.run(&[
        "jobs",
        "submit",
        "--wait",
        "--",
        "test",
        "!",
        "-e",
        skill.join("SKILL.md").to_str().unwrap(),
    ]);
    assert!(
        hidden.status.success(),
        "the worker cannot see the home: {}",
        String::from_utf8_lossy(&hidden.stderr)
    );
    let (code, report, stderr) = s.forge(&brief, &skill, &["--samples", "2"]);
    assert_eq!(code, 0, "{stderr}\n{report:#}\n{}", s.home.logs());
    assert_eq!(report["gate"]["decision"], "adopt", "{report:#}");
    for n in 1..=2 {
        let v = s.verdict(BRIEF_ID, n).unwrap();
        assert_eq!(v["winner"], "with", "{v:#}");
        assert_eq!(
            v["skills"]["with"]["loaded"],
            serde_json::json!(["tldr"]),
            "{v:#}"
        );
    }
    let sample = s.run_dir(BRIEF_ID).join("s1");
    for side in ["with", "without"] {
        let run: Value = serde_json::from_str(
            &std::fs::read_to_string(sample.join(format!("{side}.meta/run.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(run["exit"], "passed", "{run:#}");
        assert!(
            run["transcript_bytes"].as_u64().unwrap() > 0,
            "the transcript came back: {run:#}"
        );
        assert!(sample.join(format!("{side}.meta/final.txt")).is_file());
        assert!(sample.join(format!("{side}.meta/verify.json")).is_file());
        assert!(
            !sample.join(format!("{side}/notes.md")).exists(),
            "the file the {side} arm deleted is gone from the control plane's copy"
        );
    }
    assert!(
        sample.join("judge.transcript.jsonl").is_file(),
        "the judge's transcript came back"
    );
    let home_text = s.home.path().display().to_string();
    let jobs = s.home.json(&["jobs", "list"]);
    let stages: Vec<&str> = jobs
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["stage"].as_str().unwrap())
        .collect();
    for stage in ["arm", "verify", "judge"] {
        assert!(stages.contains(&stage), "{stages:?}");
    }
    let forge_jobs: Vec<&Value> = jobs
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["workflow"] == "evalloop")
        .collect();
    assert_eq!(
        forge_jobs.len(),
        10,
        "2 samples × (2 arms + 2 verifies + 1 judge): {jobs:#}"
    );
    for listed in forge_jobs {
        let job = s.home.job(listed["id"].as_str().unwrap());
        // Every job ran to an outcome (the baseline's LONG reply fails the verify: exit 1).
        let passed = job["state"] == "succeeded"
            || (job["stage"] == "verify" && job["outcome"]["exit_code"] == 1);
        assert!(passed, "{job:#}");
        assert!(
            job["history"][0]["worker"]
                .as_str()
                .unwrap()
                .starts_with("vm-"),
            "run by the isolated worker: {job:#}"
        );
        let payload = job["payload"].to_string();
        assert!(
            !payload.contains(&home_text),
            "no control-plane path in the {} job: {payload}",
            job["stage"]
        );
    }
}
