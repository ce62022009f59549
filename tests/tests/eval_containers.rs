//! Eval arms in containers end to end (issue 17 item 2; seed skill-eval-loop, "Optional: run the
//! arms in containers"): `eval forge --runner container` on the engine `scripts/test` starts
//! (podman's Docker API), each arm's scripted agent running in a container of the Debian base
//! with the built binary mounted, the judge and the verify on the host.

use std::path::Path;
use std::process::Stdio;

use serde_json::{Value, json};
use skillforge_tests::debian_base;
use skillforge_tests::eval::{BRIEF_ID, GOOD_SKILL, Setup, VERIFY_SHORT, codes};

/// Every path under `dir` whose name is `SKILL.md` or starts with `skill`.
fn skill_paths(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().to_lowercase();
            if name == "skill.md" || name.starts_with("skill") {
                found.push(entry.path().display().to_string());
            }
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(entry.path());
            }
        }
    }
    found
}

fn read(path: &Path) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap()
}

// E-09, E-10, E-49: the forge adopts with both arms in containers. The candidate is handed to the
// with-arm's container only (its host work dir never holds it, the arm records it installed); the
// baseline's container gets no mount and no skills directory and is offered nothing; both arms get
// the brief's prompt verbatim. The with-arm writes a container-side `reward.txt` of 0 (Harbor's
// "not scored"), which nothing reads: the brief's verify runs on the host in the arm's work dir as
// a `process` job, the same gate as the local runner's, and passes.
#[test]
fn e09_container_arms_hand_the_skill_to_the_with_arm_only_and_adopt() {
    let Some(image) = debian_base() else { return };
    let s = Setup::new();
    let skill = s.skill(
        "tldr",
        &format!("{GOOD_SKILL}\nscripted: write reward.txt 0"),
    );
    let brief_path = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let brief = read(&brief_path);
    let (code, report, stderr) = s.forge(
        &brief_path,
        &skill,
        &["--runner", "container", "--image", &image, "--no-network"],
    );
    assert_eq!(code, 0, "{stderr}\n{report:#}");
    assert_eq!(codes(&report), vec![None, None, None], "{report:#}");
    assert_eq!(report["gate"]["decision"], "adopt", "{report:#}");
    for n in 1..=3 {
        let sample = s.run_dir(BRIEF_ID).join(format!("s{n}"));
        let with = read(&sample.join("with.meta/run.json"));
        let without = read(&sample.join("without.meta/run.json"));
        assert_eq!(with["exit"], "passed", "{with:#}");
        assert_eq!(
            with["skills_installed"],
            json!(["tldr"]),
            "the handed skill counts as installed (E-49): {with:#}"
        );
        assert_eq!(with["skills_loaded"], json!(["tldr"]), "{with:#}");
        for run in [&with, &without] {
            let digest = run["container"]["image"]["digest"]
                .as_str()
                .unwrap_or_default();
            assert!(
                digest.starts_with("sha256:"),
                "the arm ran in a container: {run:#}"
            );
        }
        assert_eq!(without["skills_installed"], json!([]), "{without:#}");
        assert_eq!(
            without["skills_offered"],
            json!([]),
            "the baseline's container holds no skill: {without:#}"
        );
        assert!(sample.join("with.meta/skill/tldr/SKILL.md").is_file());
        assert!(
            !sample.join("with/.claude/skills/tldr/SKILL.md").exists(),
            "the skill never lands in the host work dir"
        );
        for dir in ["without", "without.meta"] {
            assert_eq!(
                skill_paths(&sample.join(dir)),
                Vec::<String>::new(),
                "E-09: nothing skill-like for the baseline in {dir}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(sample.join("with/reward.txt"))
                .unwrap()
                .trim(),
            "0"
        );
        let verify = read(&sample.join("with.meta/verify.json"));
        assert_eq!(
            verify["passed"], true,
            "E-10: the host verify decides, not the container's reward: {verify:#}"
        );
    }
    let jobs = s.home.json(&["jobs", "list"]);
    let jobs = jobs.as_array().unwrap();
    for job in jobs.iter().filter(|j| j["workflow"] == "evalloop") {
        let shown = s.home.json(&["jobs", "show", job["id"].as_str().unwrap()]);
        let payload = &shown["payload"];
        match job["stage"].as_str().unwrap() {
            "arm" => {
                assert_eq!(
                    payload["prompt"], brief["prompt"],
                    "the instruction is the brief's prompt verbatim: {payload:#}"
                );
                assert_eq!(payload["container"]["image"], image.as_str());
                let mounts = payload["container"]["mounts"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                if job["idempotency_key"]
                    .as_str()
                    .unwrap()
                    .ends_with(":without")
                {
                    assert!(
                        mounts.is_empty(),
                        "E-09: no skill mount for the baseline: {payload:#}"
                    );
                } else {
                    assert_eq!(mounts.len(), 1, "{payload:#}");
                    assert_eq!(mounts[0]["target"], "/work/.claude/skills/tldr");
                }
            }
            "verify" => assert_eq!(
                job["kind"], "process",
                "E-10: one gate, on the host: {shown:#}"
            ),
            _ => {}
        }
    }
    assert_eq!(jobs.iter().filter(|j| j["stage"] == "verify").count(), 6);
    assert_eq!(s.ledger().len(), 1);
}

// E-13: a cloud environment, or an engine that is not on this machine, is refused before anything
// runs (the arm's credential rides in the container's environment).
#[test]
fn e13_cloud_environments_and_remote_engines_are_refused_before_any_arm() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    for extra in [
        &[
            "--runner",
            "container",
            "--image",
            "img",
            "--environment",
            "modal",
        ][..],
        &[
            "--runner",
            "container",
            "--image",
            "img",
            "--environment",
            "daytona",
        ],
        &[
            "--runner",
            "container",
            "--image",
            "img",
            "--container-host",
            "tcp://203.0.113.7:2375",
        ],
        &["--environment", "blaxel"],
    ] {
        let (code, _, stderr) = s.forge(&brief, &skill, extra);
        assert_eq!(code, 2, "{extra:?}: {stderr}");
        assert!(
            stderr.contains("credential") || stderr.contains("--runner container"),
            "{extra:?}: {stderr}"
        );
        assert!(!s.run_dir(BRIEF_ID).exists(), "{extra:?}: nothing ran");
    }
}

// E-13 on the worker's side: the control plane names no engine (its own is a local socket), but
// the worker that leases the arms resolves its own `DOCKER_HOST`, an engine on another machine.
// The worker's agent runner refuses to start the agent there (the credential would ride in that
// container's environment): each arm is recorded as a run that never started, naming the engine,
// and the brief stops on the first sample as `arm_never_ran`; the engine is never asked for the
// image (nothing listens there, and the arm's error is the refusal, not an unreachable engine).
#[test]
fn e13_a_worker_whose_engine_is_elsewhere_refuses_the_container_arm() {
    let s = Setup::new();
    let skill = s.skill("tldr", GOOD_SKILL);
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let far = "tcp://203.0.113.7:2375";
    std::fs::create_dir_all(s.home.path()).unwrap();
    let log = std::fs::File::create(s.home.path().join("worker-far.log")).unwrap();
    let _worker = skillforge_tests::Reaped(
        s.home
            .cmd()
            .env("DOCKER_HOST", far)
            .args(["worker", "--name", "far"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    s.home.wait(
        std::time::Duration::from_secs(60),
        "the worker's presence lock",
        || {
            let locks = s.home.json(&["locks"]);
            locks
                .as_array()?
                .iter()
                .any(|l| {
                    l["name"]
                        .as_str()
                        .is_some_and(|n| n.starts_with("worker:far-"))
                })
                .then_some(())
        },
    );
    let (code, report, stderr) = s.forge_env(
        &brief,
        &skill,
        &["--runner", "container", "--image", "img"],
        &[("DOCKER_HOST", "unix:///run/skillforge-e13-none.sock")],
    );
    assert_eq!(code, 1, "nothing decided: {stderr}\n{report:#}");
    assert_eq!(
        codes(&report),
        vec![Some("arm_never_ran".to_owned())],
        "the brief stops on the first sample: {report:#}"
    );
    let sample = s.run_dir(BRIEF_ID).join("s1");
    for arm in ["with", "without"] {
        let run = read(&sample.join(format!("{arm}.meta/run.json")));
        let error = run["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(far)
                && error.contains("not on this machine")
                && error.contains("credential"),
            "{arm}: {run:#}"
        );
    }
    let jobs = s.home.json(&["jobs", "list"]);
    let arms: Vec<&Value> = jobs
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["stage"] == "arm")
        .collect();
    assert_eq!(arms.len(), 2, "{jobs:#}");
    for job in arms {
        let shown = s.home.json(&["jobs", "show", job["id"].as_str().unwrap()]);
        assert!(
            shown["history"][0]["worker"]
                .as_str()
                .unwrap()
                .starts_with("far-"),
            "the far worker ran it: {shown:#}"
        );
        assert!(
            shown["payload"]["container"]["host"].is_null(),
            "the control plane named no engine: {shown:#}"
        );
    }
}

/// Every process's argv on this machine, joined, that contains `needle`.
fn argv_containing(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
    {
        if let Ok(bytes) = std::fs::read(entry.path().join("cmdline")) {
            let argv = String::from_utf8_lossy(&bytes).replace('\0', " ");
            if argv.contains(needle) {
                found.push(argv);
            }
        }
    }
    found
}

// E-11: a container pair with a token in the worker's environment and a Claude credentials file in
// HOME: no process argv on the machine carries the token while the arms run (sampled until the
// forge exits), no job payload in the queue carries it, and the credentials file is only read.
#[test]
fn e11_a_container_pair_keeps_the_token_off_argv_and_the_credentials_file_unchanged() {
    let Some(image) = debian_base() else { return };
    let s = Setup::new();
    let skill = s.skill("tldr", &format!("{GOOD_SKILL}\nscripted: sleep 1500"));
    let brief = s.brief(BRIEF_ID, "", "", VERIFY_SHORT);
    let token = format!("sk-ant-oat-e11-{}", std::process::id());
    let user_home = s.path("user-home");
    std::fs::create_dir_all(user_home.join(".claude")).unwrap();
    let creds = user_home.join(".claude/.credentials.json");
    std::fs::write(
        &creds,
        json!({"claudeAiOauth": {"accessToken": token, "expiresAt": 99_999_999_999_999_i64}})
            .to_string(),
    )
    .unwrap();
    let before = (
        std::fs::metadata(&creds).unwrap().modified().unwrap(),
        std::fs::read(&creds).unwrap(),
    );
    let mut child = s
        .home
        .cmd()
        .env("HOME", &user_home)
        .env("SKILLFORGE_SCRIPTED_TOKEN", &token)
        .args([
            "--json",
            "eval",
            "forge",
            "--runtime",
            "scripted",
            "--samples",
            "1",
            "--runner",
            "container",
            "--image",
            &image,
            "--no-network",
        ])
        .args([
            "--brief",
            brief.to_str().unwrap(),
            "--skill-dir",
            skill.to_str().unwrap(),
            "--install-root",
            s.path("r").to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut samples = 0;
    while child.try_wait().unwrap().is_none() {
        assert_eq!(
            argv_containing(&token),
            Vec::<String>::new(),
            "the token is on an argv"
        );
        samples += 1;
        // Sampling the process table while the arms run (not waiting for a condition).
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "one sample decides nothing: {stderr}"
    );
    assert!(samples > 0);
    let run = read(&s.run_dir(BRIEF_ID).join("s1/with.meta/run.json"));
    assert!(
        run["container"]["image"]["digest"].is_string(),
        "the arm ran in a container: {run:#}"
    );
    let jobs = s.home.json(&["jobs", "list"]);
    for job in jobs.as_array().unwrap() {
        let shown = s.home.json(&["jobs", "show", job["id"].as_str().unwrap()]);
        assert!(
            !shown["payload"].to_string().contains(&token),
            "the token is in a queued payload: {shown:#}"
        );
    }
    assert_eq!(
        (
            std::fs::metadata(&creds).unwrap().modified().unwrap(),
            std::fs::read(&creds).unwrap()
        ),
        before,
        "the credentials file is only read"
    );
}
