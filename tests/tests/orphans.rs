//! A SIGKILLed worker's job leaves no process behind on its host: the job's direct child dies
//! with the worker (PR_SET_PDEATHSIG) and its detached descendants are killed by the orphan
//! sweep of any other worker on the host (`skillforge_runner_process::sweep_orphans`).

use std::process::Stdio;
use std::time::Duration;

use skillforge_tests::{Home, Reaped, wait_for};

const T: Duration = Duration::from_secs(60);

/// Alive and not a zombie.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(") ")
                .map(|(_, rest)| !rest.starts_with('Z'))
        })
        .unwrap_or(false)
}

fn read_pid(path: &std::path::Path) -> i32 {
    wait_for(T, "the job to write its grandchild's pid", || {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|t| t.trim().parse().ok())
    })
}

#[test]
fn a_sigkilled_workers_grandchildren_are_killed_by_the_survivor() {
    let home = Home::embedded();
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("grandchild");
    let mut victim = Reaped(home.spawn_worker("victim", &[]));
    // The shell (the job's direct child) backgrounds a grandchild that outlives it unless killed.
    let script = format!(
        "sh -c 'echo $$ > {}; exec sleep 300' & wait",
        pid_file.display()
    );
    let id = home.submit(&["--stale-after", "600"], &["sh", "-c", &script]);
    home.wait_job(&id, T, "job running", |j| j["state"] == "running");
    let grandchild = read_pid(&pid_file);
    let survivor_log = home.path().join("worker-survivor.log");
    let survivor = home
        .cmd()
        .args(["worker", "--name", "survivor"])
        .env("SKILLFORGE_LOG", "skillforge_runner_process=debug,info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&survivor_log).unwrap())
        .spawn()
        .expect("spawn the survivor");
    let _survivor = Reaped(survivor);
    // The survivor's sweeps spare a job whose worker lives: wait for two of its passes (each logs
    // a line), then the grandchild must still be alive.
    wait_for(T, "two orphan sweep passes of the survivor", || {
        let log = std::fs::read_to_string(&survivor_log).unwrap_or_default();
        (log.matches("orphan sweep pass").count() >= 2).then_some(())
    });
    assert!(
        alive(grandchild),
        "a live worker's job process is never swept"
    );
    victim.0.kill().unwrap();
    let _ = victim.0.wait();
    wait_for(
        Duration::from_secs(15),
        "the dead worker's grandchild to be killed by a sweep",
        || (!alive(grandchild)).then_some(()),
    );
    // Which worker's sweep killed it is not asserted: every job-running skillforge process on the
    // host sweeps (parallel tests' workers too), and any of them may be first.
}
