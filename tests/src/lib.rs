//! Shared harness of the end-to-end tests: the built binary, a real redis-server, temp homes,
//! process helpers, and the files and command helpers every test file uses (`write`,
//! `path_arg`, `run_code`, `ok`, `add_template`, the shipped test templates).
//!
//! Every test here drives the real `skillforge` binary (built by `cargo build -p skillforge`, which
//! the README's test command runs first) against real SQLite files, a real `redis-server` started
//! on a free loopback port, and real child processes.

pub mod agent_user;
pub mod browser;
pub mod decide;
pub mod eval;
pub mod fake_github;
pub mod fake_model;
pub mod isolated;
pub mod loader;
pub mod optimize;
pub mod train;
pub mod webhook;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

/// The `planner` agent template (`id: planner`, body `# Plan` / `Do it.`) of the review, packet
/// and train tests.
pub const PLANNER_TEMPLATE: &str = "---\nid: planner\nname: Planner\ndescription: Plans work\nkind: agent-template\nversion: 1\n\
capabilities: [ask]\nruntime_compatibility: [codex, claude]\ntags: [planning]\ninputs: [task]\noutputs: [plan]\n---\n# Plan\nDo it.\n";

/// The `coder` agent template (`id: coder`, body `# Code` / `Do it.`) of the harvest tests.
pub const CODER_TEMPLATE: &str = "---\nid: coder\nname: Coder\ndescription: Implements changes\nkind: agent-template\nversion: 1\n\
capabilities: [implement]\nruntime_compatibility: [codex, claude]\ntags: [code]\ninputs: [task]\noutputs: [diff]\n---\n# Code\nDo it.\n";

/// Writes `text` to `path`, creating its parent directories; returns `path`.
///
/// # Panics
/// When a directory or the file cannot be written.
pub fn write(path: &Path, text: &str) -> PathBuf {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, text).unwrap();
    path.to_path_buf()
}

/// `path` as a command-line argument.
///
/// # Panics
/// When `path` is not UTF-8 (temp dirs are).
pub fn path_arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Runs `skillforge ARGS` in `home`, asserts exit `code`, returns (stdout, stderr). The failure
/// message carries both streams and the home's background logs.
pub fn run_code(home: &Home, args: &[&str], code: i32) -> (String, String) {
    let out = home.run(args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(code),
        "skillforge {args:?}\nstdout:\n{stdout}\nstderr:\n{stderr}\n{}",
        home.logs()
    );
    (stdout, stderr)
}

/// Runs `skillforge ARGS` in `home`, asserts exit 0, returns stdout.
pub fn ok(home: &Home, args: &[&str]) -> String {
    run_code(home, args, 0).0
}

/// Runs `skillforge --json candidate decide ...` (`args` from `candidate`) and checks its exit
/// against its report: 1 when the pass was blocked, 4 when the candidate stays pending for a
/// person (`notify`), else 0. Returns the report.
pub fn decide_json(home: &Home, args: &[&str]) -> Value {
    json_with_exit(home, args, |report| {
        if report["blocked"].is_string() {
            1
        } else if report["decision"]["decision"] == "notify" {
            4
        } else {
            0
        }
    })
}

/// Runs `skillforge --json candidate canary-check ...` and checks its exit against its report: 4
/// while a window holds or a decision is not applied yet, else 0. Returns the report.
pub fn canary_check_json(home: &Home, args: &[&str]) -> Value {
    json_with_exit(home, args, |report| {
        let open = report
            .as_array()
            .is_some_and(|a| a.iter().any(|e| e["applied"] != true));
        if open { 4 } else { 0 }
    })
}

/// Runs `skillforge --json ARGS`, parses its report and asserts the exit code `expected` derives
/// from it. Returns the report.
fn json_with_exit(home: &Home, args: &[&str], expected: impl Fn(&Value) -> i32) -> Value {
    let out = home
        .cmd()
        .arg("--json")
        .args(args)
        .output()
        .expect("run skillforge");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "skillforge {args:?}: stdout is not JSON ({e}):\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(
        out.status.code(),
        Some(expected(&report)),
        "skillforge {args:?}: {report:#}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    report
}

/// Writes the agent template `text` to `<home>/in/<id>.md` (`id` from its frontmatter) and adds
/// it with `skillforge template add FILE --repo REPO`, asserting exit 0; returns the file.
///
/// # Panics
/// When `text` has no `id:` line or the command fails.
pub fn add_template(home: &Home, text: &str, repo: &str) -> PathBuf {
    let id = text
        .lines()
        .find_map(|l| l.strip_prefix("id: "))
        .expect("template frontmatter has an `id:` line");
    let file = write(&home.path().join("in").join(format!("{id}.md")), text);
    run_code(
        home,
        &["template", "add", path_arg(&file), "--repo", repo],
        0,
    );
    file
}

/// Path of the built `skillforge` binary (`target/<profile>/skillforge`, next to the test binary's dir).
///
/// # Panics
/// When the binary has not been built: run `cargo build -p skillforge` first.
pub fn bin() -> PathBuf {
    if let Some(p) = std::env::var_os("SKILLFORGE_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current test executable");
    // target/debug/deps/<test> → target/debug/skillforge; a binary of this crate
    // (target/debug/skillforge-soak) has it beside itself.
    let beside = exe
        .parent()
        .map(|d| d.join("skillforge"))
        .filter(|p| p.exists());
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let p = beside.unwrap_or_else(|| dir.join("skillforge"));
    assert!(
        p.exists(),
        "`{}` is missing: run `cargo build -p skillforge` before the end-to-end tests",
        p.display()
    );
    p
}

/// Polls `f` every 20 ms until it returns `Some`, or panics with `what` after `timeout`.
pub fn wait_for<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A free TCP port on 127.0.0.1 (bound then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind loopback")
        .local_addr()
        .expect("local addr")
        .port()
}

/// A real `redis-server` on a free loopback port in a temp dir, shut down on drop.
pub struct RedisServer {
    /// The port.
    pub port: u16,
    dir: TempDir,
    aof: bool,
    /// `--requirepass` of the server, which [`RedisServer::cli`] authenticates with.
    password: Option<String>,
    /// More `redis-server` arguments (`--maxmemory 10mb`, …), kept for restarts.
    extra: Vec<String>,
}

impl RedisServer {
    /// Starts a server without persistence.
    pub fn start() -> Self {
        Self::start_with(false)
    }

    /// Starts a server; with `aof`, append-only with fsync on every write (survives restarts).
    pub fn start_with(aof: bool) -> Self {
        Self::start_configured(aof, None, &[])
    }

    /// Starts a server without persistence that requires `password` (`--requirepass`) and
    /// takes the further `redis-server` arguments `extra` (e.g. `["--maxmemory", "10mb"]`).
    pub fn start_configured(aof: bool, password: Option<&str>, extra: &[&str]) -> Self {
        let server = Self {
            port: free_port(),
            dir: tempfile::tempdir().expect("redis temp dir"),
            aof,
            password: password.map(str::to_owned),
            extra: extra.iter().map(|a| (*a).to_owned()).collect(),
        };
        server.launch();
        server
    }

    fn launch(&self) {
        let dir = self.dir.path();
        let status = Command::new("redis-server")
            .args([
                "--bind",
                "127.0.0.1",
                "--port",
                &self.port.to_string(),
                "--daemonize",
                "yes",
            ])
            .arg("--pidfile")
            .arg(dir.join("redis.pid"))
            .arg("--dir")
            .arg(dir)
            .arg("--logfile")
            .arg(dir.join("redis.log"))
            .args(["--save", ""])
            .args(if self.aof {
                ["--appendonly", "yes", "--appendfsync", "always"]
            } else {
                ["--appendonly", "no", "--appendfsync", "everysec"]
            })
            .args(
                self.password
                    .iter()
                    .flat_map(|p| ["--requirepass", p.as_str()]),
            )
            .args(&self.extra)
            .status()
            .expect("redis-server is installed (the README's test command installs it)");
        assert!(status.success(), "redis-server failed to start");
        wait_for(
            Duration::from_secs(10),
            "redis-server to accept connections",
            || self.cli(&["ping"]).filter(|o| o.trim() == "PONG"),
        );
    }

    /// Runs `redis-cli -p PORT ARGS...`; `None` when it fails.
    pub fn cli(&self, args: &[&str]) -> Option<String> {
        let mut cmd = Command::new("redis-cli");
        cmd.args(["-p", &self.port.to_string()]);
        if let Some(password) = &self.password {
            cmd.args(["--no-auth-warning", "-a", password]);
        }
        let out = cmd.args(args).output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The server's pid (from its pid file), `None` while it is not running.
    pub fn pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.dir.path().join("redis.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Shuts the server down (saving nothing beyond the AOF) and starts it again on the same port and dir.
    pub fn restart(&self) {
        let _ = self.cli(&["shutdown", "nosave"]);
        // Stopped means its port is free: a launch while the exiting server's threads still hold
        // the socket fails to bind.
        wait_for(Duration::from_secs(10), "redis-server to stop", || {
            (self.cli(&["ping"]).is_none()
                && std::net::TcpListener::bind(("127.0.0.1", self.port)).is_ok())
            .then_some(())
        });
        self.launch();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.cli(&["shutdown", "nosave"]);
    }
}

/// How a [`Home`] is named to the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HomeArg {
    /// `--home <absolute path>`.
    Absolute,
    /// `--home <relative path>`, every command run from the directory it is relative to.
    RelativeFlag,
    /// `SKILLFORGE_HOME=<relative path>`, every command run from the directory it is relative to.
    RelativeEnv,
}

/// Name of the home directory inside the working directory of a relative [`Home`].
pub const RELATIVE_HOME: &str = "rel-home";

/// A temporary `$SKILLFORGE_HOME` and the queue the commands use.
pub struct Home {
    dir: TempDir,
    home: PathBuf,
    how: HomeArg,
    /// `--queue` value, `None` for the embedded default.
    pub queue: Option<String>,
}

impl Home {
    /// A fresh home on the embedded SQLite queue.
    pub fn embedded() -> Self {
        Self::with(HomeArg::Absolute, None)
    }

    /// A fresh home on a Redis queue.
    pub fn redis(url: &str) -> Self {
        Self::with(HomeArg::Absolute, Some(url.to_owned()))
    }

    /// A fresh home on the embedded queue, named to the binary as `how` says: a relative home is
    /// [`RELATIVE_HOME`] inside a temp dir that is every command's working directory.
    pub fn with(how: HomeArg, queue: Option<String>) -> Self {
        let dir = tempfile::tempdir().expect("home temp dir");
        let home = match how {
            HomeArg::Absolute => dir.path().to_path_buf(),
            HomeArg::RelativeFlag | HomeArg::RelativeEnv => dir.path().join(RELATIVE_HOME),
        };
        Self {
            dir,
            home,
            how,
            queue,
        }
    }

    /// The home directory (absolute, also for a relative home).
    pub fn path(&self) -> &Path {
        &self.home
    }

    /// `skillforge --home HOME [--queue URL]` ready for more arguments (for a relative home:
    /// `--home rel-home` or `SKILLFORGE_HOME=rel-home`, run from the directory holding it).
    pub fn cmd(&self) -> Command {
        let mut c = Command::new(bin());
        match self.how {
            HomeArg::Absolute => {
                c.arg("--home").arg(self.path());
            }
            HomeArg::RelativeFlag => {
                c.current_dir(self.dir.path())
                    .env_remove("SKILLFORGE_HOME")
                    .args(["--home", RELATIVE_HOME]);
            }
            HomeArg::RelativeEnv => {
                c.current_dir(self.dir.path())
                    .env("SKILLFORGE_HOME", RELATIVE_HOME);
            }
        }
        if let Some(q) = &self.queue {
            c.arg("--queue").arg(q);
        }
        c.env(
            "SKILLFORGE_LOG",
            std::env::var("SKILLFORGE_LOG").unwrap_or_else(|_| "info".into()),
        );
        c
    }

    /// Runs `skillforge ARGS` to completion.
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().expect("run skillforge")
    }

    /// Runs `skillforge --json ARGS`, asserts exit 0 and parses stdout.
    pub fn json(&self, args: &[&str]) -> Value {
        let out = self
            .cmd()
            .arg("--json")
            .args(args)
            .output()
            .expect("run skillforge");
        assert!(
            out.status.success(),
            "skillforge {args:?} failed: {}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "skillforge {args:?}: stdout is not JSON ({e}):\n{}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }

    /// Runs `skillforge --json ARGS`, asserts exit `code` (e.g. 4: not decided yet) and parses
    /// stdout.
    pub fn json_code(&self, args: &[&str], code: i32) -> Value {
        let out = self
            .cmd()
            .arg("--json")
            .args(args)
            .output()
            .expect("run skillforge");
        assert_eq!(
            out.status.code(),
            Some(code),
            "skillforge {args:?}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "skillforge {args:?}: stdout is not JSON ({e}):\n{}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }

    /// Submits `cmd` without waiting (extra flags before `--`); returns the job id.
    pub fn submit(&self, flags: &[&str], cmd: &[&str]) -> String {
        let mut args = vec!["jobs", "submit"];
        args.extend_from_slice(flags);
        args.push("--");
        args.extend_from_slice(cmd);
        self.json(&args)["id"].as_str().expect("job id").to_owned()
    }

    /// `jobs show --json ID`.
    pub fn job(&self, id: &str) -> Value {
        self.json(&["jobs", "show", id])
    }

    /// Polls `jobs show` until `pred` holds, or panics after `timeout` with the last job and every log.
    pub fn wait_job(
        &self,
        id: &str,
        timeout: Duration,
        what: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let job = self.job(id);
            if pred(&job) {
                return job;
            }
            if Instant::now() >= deadline {
                panic!(
                    "timed out after {timeout:?} waiting for {what}; last seen:\n{job:#}\n{}",
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Like [`wait_for`], but the panic message carries this home's background logs.
    pub fn wait<T>(&self, timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(v) = f() {
                return v;
            }
            if Instant::now() >= deadline {
                panic!(
                    "timed out after {timeout:?} waiting for {what}\n{}",
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Pauses `child` (SIGSTOP) at a moment it holds no write lock of the embedded queue file.
    ///
    /// A process stopped inside a SQLite write transaction keeps the file's write lock until it
    /// resumes (SQLite cannot take a lock from a live process), so every other process's writes
    /// wait, and recovery cannot run. That is a limit of the embedded queue, not of fencing, which
    /// is what the pausing tests check. So on the embedded queue a stop that lands inside a write
    /// (`BEGIN IMMEDIATE` from `sqlite3` is refused at once) is undone with SIGCONT and tried
    /// again, polling for up to 60 s. On Redis, where no client holds a lock across a pause, one
    /// SIGSTOP is sent.
    ///
    /// # Panics
    /// When no stop outside a write is found within 60 s, or `sqlite3` cannot be run.
    pub fn pause_outside_writes(&self, child: &Child) {
        let queue = self.path().join("queue.db");
        if self.queue.is_some() || !queue.exists() {
            signal(child, nix::sys::signal::Signal::SIGSTOP);
            return;
        }
        wait_for(
            Duration::from_secs(60),
            "a SIGSTOP outside the queue's write transactions",
            || {
                signal(child, nix::sys::signal::Signal::SIGSTOP);
                let free = Command::new("sqlite3")
                    .arg(&queue)
                    .arg("BEGIN IMMEDIATE; ROLLBACK;")
                    .stdin(Stdio::null())
                    .output()
                    .expect("run sqlite3 (scripts/test installs it)")
                    .status
                    .success();
                if !free {
                    signal(child, nix::sys::signal::Signal::SIGCONT);
                }
                free.then_some(())
            },
        );
    }

    /// Starts `skillforge worker --name NAME EXTRA...` in the background, its log in the home dir.
    pub fn spawn_worker(&self, name: &str, extra: &[&str]) -> Child {
        self.spawn(
            &["worker", "--name", name],
            extra,
            &format!("worker-{name}"),
        )
    }

    /// Starts `skillforge serve` in the background.
    pub fn spawn_serve(&self) -> Child {
        self.spawn(&["serve"], &[], "serve")
    }

    fn spawn(&self, base: &[&str], extra: &[&str], log: &str) -> Child {
        std::fs::create_dir_all(self.path()).expect("create home");
        let n = std::fs::read_dir(self.path())
            .map(|d| d.count())
            .unwrap_or(0);
        let log =
            std::fs::File::create(self.path().join(format!("{log}-{n}.log"))).expect("log file");
        self.cmd()
            .args(base)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn skillforge")
    }

    /// Everything background processes of this home logged, for failure messages.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        if let Ok(dir) = std::fs::read_dir(self.path()) {
            let mut paths: Vec<_> = dir
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "log"))
                .collect();
            paths.sort();
            for p in paths {
                out.push_str(&format!(
                    "==> {} <==\n{}\n",
                    p.display(),
                    std::fs::read_to_string(&p).unwrap_or_default()
                ));
            }
        }
        out
    }
}

/// Sends `signal` to a child process.
pub fn signal(child: &Child, signal: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal);
}

/// Waits for a child to exit, up to `timeout`; returns its status or panics.
pub fn wait_exit(child: &mut Child, timeout: Duration) -> std::process::ExitStatus {
    wait_for(timeout, "process to exit", || {
        child.try_wait().ok().flatten()
    })
}

/// A child process killed (SIGKILL) and reaped on drop, so no test leaves workers behind.
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `git ARGS` in `dir` with a fixed identity; panics on failure; returns stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "skillforge tests")
        .env("GIT_AUTHOR_EMAIL", "tests@skillforge.invalid")
        .env("GIT_COMMITTER_NAME", "skillforge tests")
        .env("GIT_COMMITTER_EMAIL", "tests@skillforge.invalid")
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A real git repository in a temp dir with two commits; returns (dir, base commit, head commit).
///
/// The base commit holds `README.md`; the head commit adds `src/lib.rs` (12 lines) and edits the README.
pub fn two_commit_repo() -> (TempDir, String, String) {
    let dir = tempfile::tempdir().expect("repo temp dir");
    let p = dir.path();
    git(p, &["init", "-q", "-b", "main"]);
    std::fs::write(p.join("README.md"), "# demo\n\nfirst line\n").unwrap();
    git(p, &["add", "-A"]);
    git(p, &["commit", "-q", "-m", "base"]);
    let base = git(p, &["rev-parse", "HEAD"]);
    std::fs::create_dir_all(p.join("src")).unwrap();
    let body: String = (0..12)
        .map(|i| format!("pub fn f{i}() -> u32 {{ {i} }}\n"))
        .collect();
    std::fs::write(p.join("src/lib.rs"), body).unwrap();
    std::fs::write(p.join("README.md"), "# demo\n\nsecond line\n").unwrap();
    git(p, &["add", "-A"]);
    git(p, &["commit", "-q", "-m", "head"]);
    let head = git(p, &["rev-parse", "HEAD"]);
    (dir, base, head)
}

/// Runs `skillforge --json verify --repo REPO EXTRA… -- COMMANDS…` in `home`: (exit code, the JSON
/// report on stdout, stderr). Panics when stdout is not JSON.
pub fn verify(
    home: &Home,
    extra: &[&str],
    repo: &Path,
    commands: &[&str],
) -> (Option<i32>, serde_json::Value, String) {
    let mut cmd = home.cmd();
    cmd.args(["--json", "verify", "--repo"])
        .arg(repo)
        .args(extra)
        .arg("--")
        .args(commands);
    let out = cmd.output().expect("run verify");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "verify stdout is not JSON ({e}): {}\n{stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    (out.status.code(), json, stderr)
}

/// The Debian base image `scripts/test` makes (`SKILLFORGE_TEST_DEBIAN_IMAGE`: glibc, a shell, git;
/// the built binary runs in it), when the harness made one; `None` (loudly) outside CI without it.
///
/// # Panics
/// In CI (`CI` or `SKILLFORGE_REQUIRE_CONTAINERS` set) without an engine or the image.
pub fn debian_base() -> Option<String> {
    let host = std::env::var("DOCKER_HOST").ok().filter(|h| !h.is_empty());
    let base = std::env::var("SKILLFORGE_TEST_DEBIAN_IMAGE")
        .ok()
        .filter(|i| !i.is_empty());
    match (host, base) {
        (Some(_), Some(base)) => Some(base),
        _ if std::env::var_os("CI").is_some()
            || std::env::var_os("SKILLFORGE_REQUIRE_CONTAINERS").is_some() =>
        {
            panic!(
                "image tests must run here but DOCKER_HOST / SKILLFORGE_TEST_DEBIAN_IMAGE are unset: run scripts/test"
            )
        }
        _ => {
            eprintln!(
                "\n*** SKIPPED: image test needs an engine and a Debian base; run `source scripts/containers-env && \
                 sf_containers_up && sf_containers_debian_base` (or scripts/test). ***\n"
            );
            None
        }
    }
}

/// Which queue backend an end-to-end scenario runs on; holds the Redis server alive for the test.
pub enum Backend {
    /// The embedded SQLite queue.
    Sqlite,
    /// A real redis-server started by the harness.
    Redis(RedisServer),
}

impl Backend {
    /// A fresh home on this backend.
    pub fn home(&self) -> Home {
        match self {
            Backend::Sqlite => Home::embedded(),
            Backend::Redis(r) => Home::redis(&r.url()),
        }
    }
}

/// Runs each scenario `fn name(b: Backend)` once per backend, as `sqlite::name` and
/// `redis::name` (the Redis one on a fresh redis-server).
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $( #[test] fn $name() { super::$name($crate::Backend::Sqlite) } )*
        }
        mod redis {
            $( #[test] fn $name() { super::$name($crate::Backend::Redis($crate::RedisServer::start())) } )*
        }
    };
}

/// libfaketime's multi-threaded build (Debian's `faketime` package installs it), to preload
/// (`LD_PRELOAD`, with `FAKETIME`) into a process that runs with a stepped clock. The `faketime`
/// program instead runs its command as a child, which a test's kill of the wrapper leaves running.
///
/// # Panics
/// When the library is not installed (`apt-get install faketime`).
pub fn faketime_lib() -> PathBuf {
    std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|arch| arch.path().join("faketime/libfaketimeMT.so.1"))
        .chain([PathBuf::from("/usr/lib/faketime/libfaketimeMT.so.1")])
        .find(|p| p.is_file())
        .expect("libfaketime is installed (apt-get install faketime)")
}

/// Makes `cmd` run as a user on whose machine Claude Code is not logged in, whatever this
/// machine's user has: `HOME` is `user_home` (created), Claude's config dir an empty one under it,
/// and the Anthropic credentials removed from the environment.
///
/// # Panics
/// When `user_home` cannot be created.
pub fn logged_out_claude<'a>(cmd: &'a mut Command, user_home: &Path) -> &'a mut Command {
    std::fs::create_dir_all(user_home).expect("create the user's home");
    cmd.env("HOME", user_home)
        .env("CLAUDE_CONFIG_DIR", user_home.join(".claude"))
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_AUTH_TOKEN")
        .env_remove("CLAUDE_CODE_OAUTH_TOKEN")
}
