//! `docker/`: the worker image builds from `docker/Dockerfile` on a local base (the binary this
//! workspace built, `BINARY_FROM=prebuilt`), and the compose stack (Redis, serve, two workers)
//! comes up under `podman-compose` and runs jobs a host CLI submits with `--queue`, spread over
//! both workers. Needs the engine and the Debian base `scripts/test` makes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;
use skillforge_tests::{Home, bin, debian_base, free_port};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Builds the worker image from docker/Dockerfile with the workspace's binary; returns its tag.
fn build_image(base: &str) -> String {
    let context = tempfile::tempdir().expect("build context");
    std::fs::copy(bin(), context.path().join("skillforge"))
        .expect("copy the binary into the context");
    let tag = format!("localhost/skillforge-worker:test-{}", std::process::id());
    run(Command::new("podman")
        .args(["build", "-q", "--format", "docker", "-f"])
        .arg(repo_root().join("docker/Dockerfile"))
        .args([
            "--build-arg",
            &format!("BASE={base}"),
            "--build-arg",
            "BINARY_FROM=prebuilt",
        ])
        .args(["--build-arg", "BIN=skillforge", "-t", &tag])
        .arg(context.path()));
    tag
}

fn in_image(tag: &str, line: &str) -> String {
    let out =
        run(Command::new("podman").args(["run", "--rm", "--entrypoint", "sh", tag, "-c", line]));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_worker_image_builds_and_the_compose_fleet_runs_host_submitted_jobs() {
    let Some(base) = debian_base() else { return };
    let tag = build_image(&base);
    // The image: the binary, git, bubblewrap and certificates, a non-root user, the worker entrypoint.
    assert_eq!(
        in_image(&tag, "skillforge --version").trim(),
        format!("skillforge {}", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(in_image(&tag, "id -u; id -un").trim(), "10001\nskillforge");
    assert_eq!(
        in_image(
            &tag,
            "command -v git; command -v bwrap; test -s /etc/ssl/certs/ca-certificates.crt && echo certs"
        ),
        "/usr/bin/git\n/usr/bin/bwrap\ncerts\n"
    );
    let inspect = run(Command::new("podman").args(["image", "inspect", &tag]));
    let config: Value = serde_json::from_slice(&inspect.stdout).expect("inspect JSON");
    let image = &config[0];
    assert_eq!(
        image["Config"]["Entrypoint"],
        serde_json::json!(["skillforge", "worker"]),
        "{image:#}"
    );
    // podman reports a docker-format image's HEALTHCHECK beside its config.
    assert!(
        image["Healthcheck"]["Test"]
            .to_string()
            .contains("jobs list"),
        "{image:#}"
    );

    let fleet = Fleet::up(&tag, &base);
    fleet.spreads_jobs_over_both_workers();
}

/// A compose project under podman-compose, brought down (with its volumes) on drop.
struct Fleet {
    project: String,
    env: Vec<(String, String)>,
    queue: String,
}

impl Fleet {
    fn up(tag: &str, base: &str) -> Self {
        let port = free_port();
        let fleet = Fleet {
            project: format!("sftest{}", std::process::id()),
            env: vec![
                ("SKILLFORGE_IMAGE".into(), tag.to_owned()),
                ("REDIS_IMAGE".into(), base.to_owned()),
                ("REDIS_PORT".into(), port.to_string()),
                ("WORKERS".into(), "2".into()),
                ("WORKER_CONCURRENCY".into(), "1".into()),
            ],
            queue: format!("redis://127.0.0.1:{port}"),
        };
        run(&mut fleet.compose(&["up", "-d"]));
        fleet
    }

    fn compose(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("podman-compose");
        cmd.arg("-f")
            .arg(repo_root().join("docker/compose.yaml"))
            .args(["-p", &self.project])
            .args(args);
        cmd.envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        cmd
    }

    /// Container ids (12 hex, the containers' host names) of the project's workers.
    fn worker_hosts(&self) -> Vec<String> {
        let out = run(Command::new("podman").args([
            "ps",
            "--filter",
            &format!("label=io.podman.compose.project={}", self.project),
            "--filter",
            "label=com.docker.compose.service=worker",
            "--format",
            "{{.ID}}",
        ]));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.chars().take(12).collect())
            .collect()
    }

    /// One worker (concurrency 1) busy with a long job: a second job can only run on the other.
    fn spreads_jobs_over_both_workers(&self) {
        let home = Home::redis(&self.queue);
        let workers = self.worker_hosts();
        assert_eq!(workers.len(), 2, "two workers up: {workers:?}");
        // `jobs submit` sends its working directory along: `/` exists in the workers' containers.
        let out = run(home
            .cmd()
            .current_dir("/")
            .args(["--json", "jobs", "submit", "--", "sleep", "600"]));
        let busy = serde_json::from_slice::<Value>(&out.stdout).expect("job JSON")["id"]
            .as_str()
            .expect("id")
            .to_owned();
        let busy_host = home.wait_job(
            &busy,
            Duration::from_secs(90),
            "a stack worker to lease the first job",
            |j| j["state"] == "running",
        )["lease"]["owner_host"]
            .as_str()
            .expect("lease host")
            .to_owned();
        assert!(
            workers.contains(&busy_host),
            "{busy_host} is a stack worker of {workers:?}"
        );

        let mut submit = home.cmd();
        submit.current_dir("/").args([
            "--json",
            "jobs",
            "submit",
            "--wait",
            "--no-local-worker",
            "--",
            "hostname",
        ]);
        let out = submit.output().expect("submit");
        let job: Value = serde_json::from_slice(&out.stdout).expect("job JSON");
        assert_eq!(
            job["state"],
            "succeeded",
            "{job:#}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let host = job["stdout_tail"]
            .as_str()
            .unwrap_or_default()
            .trim()
            .to_owned();
        assert!(
            workers.contains(&host) && host != busy_host,
            "ran on the other stack worker: {host} (busy {busy_host}, {workers:?})"
        );
        assert_eq!(job["history"][0]["host"], host.as_str());
        home.run(&["jobs", "cancel", &busy]);
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        let _ = self.compose(&["down", "-v"]).output();
    }
}
