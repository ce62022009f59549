//! `eval deploy` through the built binary (seed: skill-eval-loop, "deploy.sh [--to host]"; E-40):
//! into a local install root, and to another machine — a worker in a private mount namespace that
//! cannot see the control plane's home, labelled `host=box` — through the Redis transfer area, the
//! digest checked on the copy there; a blob corrupted in transit and a tree that does not hash to
//! the sender's digest are both refused with nothing installed.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use skillforge_tests::{Home, Reaped, RedisServer};

const WAIT: Duration = Duration::from_secs(90);

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Two skill trees under `dir`: `tldr` (with a subdir) and `voice`.
fn trees(dir: &Path) -> (PathBuf, PathBuf) {
    let tldr = dir.join("checkout/tldr");
    std::fs::create_dir_all(tldr.join("refs")).unwrap();
    std::fs::write(
        tldr.join("SKILL.md"),
        "---\nname: tldr\ndescription: short replies\n---\nKeep it short.\n",
    )
    .unwrap();
    std::fs::write(tldr.join("refs/examples.md"), "shipped 1.2, fixed login\n").unwrap();
    let voice = dir.join("checkout/voice");
    std::fs::create_dir_all(&voice).unwrap();
    std::fs::write(
        voice.join("SKILL.md"),
        "---\nname: voice\ndescription: the user's voice\n---\nNo buzzwords.\n",
    )
    .unwrap();
    (tldr, voice)
}

/// `skillforge --json eval deploy ARGS`: (exit code, stdout JSON, stderr).
fn deploy(home: &Home, args: &[&str]) -> (i32, Value, String) {
    let out = home
        .cmd()
        .current_dir("/")
        .args(["--json", "eval", "deploy"])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Each deployed tree's digest, by skill.
fn digests(report: &Value) -> Vec<(String, String)> {
    let mut d: Vec<(String, String)> = report
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["skill"].as_str().unwrap().to_owned(),
                t["digest"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    d.sort();
    d
}

/// Waits until the worker `name` holds its presence lock.
fn ready(home: &Home, name: &str) {
    home.wait(WAIT, &format!("worker {name}"), || {
        let locks = home.json(&["locks"]);
        locks
            .as_array()?
            .iter()
            .any(|l| {
                l["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with(&format!("worker:{name}-")))
            })
            .then_some(())
    });
}

/// Runs `sh -c LINE` on the worker labelled `host=box`; its stdout.
fn on_box(home: &Home, line: &str) -> String {
    let out = home
        .cmd()
        .current_dir("/")
        .args([
            "--json",
            "jobs",
            "submit",
            "--wait",
            "--no-local-worker",
            "--require",
            "host=box",
            "--",
            "sh",
            "-c",
            line,
        ])
        .output()
        .unwrap();
    let job: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(
        job["state"],
        "succeeded",
        "{job:#}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    job["outcome"]["stdout_tail"]
        .as_str()
        .or(job["stdout_tail"].as_str())
        .unwrap_or_default()
        .to_owned()
}

// E-40 locally: each tree copied and verified; a tree that does not hash to the digest it must
// have (`--expect`, what the installing side of a remote deploy is given) is refused and the
// install root keeps what it had.
#[test]
fn e40_local_deploy_verifies_each_tree_and_refuses_an_unexpected_digest() {
    let home = Home::embedded();
    let dir = tempfile::tempdir().unwrap();
    let (tldr, voice) = trees(dir.path());
    let root = dir.path().join("root");
    let (code, report, err) = deploy(&home, &["--root", s(&root), s(&tldr), s(&voice)]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(digests(&report).len(), 2, "{report:#}");
    assert!(root.join("tldr/refs/examples.md").is_file() && root.join("voice/SKILL.md").is_file());
    std::fs::write(tldr.join("refs/examples.md"), "changed\n").unwrap();
    let wrong = format!("tldr={}", digests(&report)[0].1);
    let (code, _, err) = deploy(&home, &["--root", s(&root), "--expect", &wrong, s(&tldr)]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("digest mismatch for `tldr`") && err.contains("nothing installed"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("tldr/refs/examples.md")).unwrap(),
        "shipped 1.2, fixed login\n",
        "the installed tree is unchanged"
    );
    let (code, _, err) = deploy(
        &home,
        &["--root", s(&root), s(&dir.path().join("checkout"))],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a skill tree"), "{err}");
}

// E-40 on another machine: `--to box` hands the trees to the worker labelled host=box, which
// cannot see the control plane's home (where the checkout and the asked install root are); it
// installs them in its own file system and verifies each copy there; the digests it reports are
// the ones a local deploy of the same trees computes. Nothing lands on the control plane's side.
#[test]
fn e40_deploy_to_a_host_installs_on_the_worker_labelled_for_it_and_verifies_there() {
    let redis = RedisServer::start();
    let home = Home::redis(&redis.url());
    let (tldr, voice) = trees(home.path());
    let local = tempfile::tempdir().unwrap();
    let (code, here, err) = deploy(&home, &["--root", s(local.path()), s(&tldr), s(&voice)]);
    assert_eq!(code, 0, "{err}");
    let _other = Reaped(home.spawn_worker("other", &["--label", "host=elsewhere"]));
    let _vm = Reaped(skillforge_tests::isolated::spawn_isolated_worker(
        &home,
        "vm",
        &["--label", "host=box"],
    ));
    ready(&home, "vm");
    let remote_root = home.path().join("remote-skills");
    assert_eq!(
        on_box(
            &home,
            &format!("test -e {} && echo visible || echo hidden", s(&tldr))
        )
        .trim(),
        "hidden",
        "the worker cannot see the checkout"
    );
    let (code, report, err) = deploy(
        &home,
        &[
            "--to",
            "box",
            "--root",
            s(&remote_root),
            s(&tldr),
            s(&voice),
        ],
    );
    assert_eq!(code, 0, "{err}\n{}", home.logs());
    assert_eq!(
        digests(&report),
        digests(&here),
        "the copies on box hash to the trees sent: {report:#}"
    );
    assert!(!remote_root.exists(), "installed on box, not here");
    let listing = on_box(
        &home,
        &format!(
            "cd {} && find . | sort && cat tldr/refs/examples.md",
            s(&remote_root)
        ),
    );
    let want = ".\n./tldr\n./tldr/SKILL.md\n./tldr/refs\n./tldr/refs/examples.md\n./voice\n./voice/SKILL.md\nshipped 1.2, fixed login\n";
    assert_eq!(
        listing, want,
        "exactly the two trees, no staging dir left: {listing}"
    );
    let jobs = home.json(&["jobs", "list"]);
    let deploys: Vec<&Value> = jobs
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["workflow"] == "evalloop" && j["stage"] == "deploy")
        .collect();
    assert_eq!(deploys.len(), 1, "{jobs:#}");
    let job = home.job(deploys[0]["id"].as_str().unwrap());
    assert!(
        job["history"][0]["worker"]
            .as_str()
            .unwrap()
            .starts_with("vm-"),
        "only the box worker ran it: {job:#}"
    );
    assert!(
        !job["payload"].to_string().contains(s(&tldr)),
        "the job names no control-plane path of the trees: {job:#}"
    );
}

// E-40, "corrupt one file in transit": the blob of one file is altered in the Redis transfer area
// after the deploy staged it and before the box worker fetched it. The worker refuses it by hash,
// the deploy fails naming the blob, and box's install root holds nothing.
#[test]
fn e40_a_tree_corrupted_in_transit_is_refused_and_nothing_is_installed() {
    let redis = RedisServer::start();
    let home = Home::redis(&redis.url());
    let (tldr, _) = trees(home.path());
    let remote_root = home.path().join("remote-skills");
    let log = home.path().join("deploy.log");
    let mut deploying = Reaped(
        home.cmd()
            .current_dir("/")
            .args([
                "eval",
                "deploy",
                "--to",
                "box",
                "--root",
                s(&remote_root),
                s(&tldr),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let bytes = std::fs::read(tldr.join("refs/examples.md")).unwrap();
    let digest = {
        let out = std::process::Command::new("sha256sum")
            .arg(tldr.join("refs/examples.md"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .next()
            .unwrap()
            .to_owned()
    };
    let chunk = home.wait(WAIT, "the staged blob", || {
        let keys = redis.cli(&["--scan", "--pattern", &format!("*xfer:{digest}:0")])?;
        keys.lines().next().map(str::to_owned)
    });
    home.wait(WAIT, "the deploy job", || {
        let jobs = home.json(&["jobs", "list"]);
        jobs.as_array()?
            .iter()
            .any(|j| j["stage"] == "deploy")
            .then_some(())
    });
    let mut tampered = bytes.clone();
    tampered[0] ^= 0x20;
    redis
        .cli(&["set", &chunk, std::str::from_utf8(&tampered).unwrap()])
        .unwrap();
    let _vm = Reaped(skillforge_tests::isolated::spawn_isolated_worker(
        &home,
        "vm",
        &["--label", "host=box"],
    ));
    let status = skillforge_tests::wait_exit(&mut deploying.0, WAIT);
    let err = std::fs::read_to_string(&log).unwrap();
    assert_eq!(status.code(), Some(1), "{err}\n{}", home.logs());
    assert!(err.contains("is corrupt") && err.contains(&digest), "{err}");
    assert_eq!(
        on_box(
            &home,
            &format!("ls -A {} 2>/dev/null | wc -l", s(&remote_root))
        )
        .trim(),
        "0",
        "nothing installed on box"
    );
}
