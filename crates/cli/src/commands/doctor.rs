//! `skillforge doctor [--json]`: what this machine can run, one line per check with what to do.
//!
//! Checks: the config file, the home (writable, disk free), git, bwrap, the queue (embedded file,
//! or Redis: reachable, version, `maxmemory-policy`, persistence), the container engine, each
//! agent runtime (installed, version, credentials as `eval forge`'s preflight reads them,
//! required programs such as OpenCode's `rg`, its model API accepting a TCP connection),
//! the checker tools per language. A check is `ok`, `warn` (optional: a feature is limited) or
//! `fail` (needed: skillforge cannot work as configured). Exit 0 when nothing fails, 1 otherwise;
//! `--json` prints one document `{home, ok, checks: [{name, status, detail, fix}]}`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use serde::Serialize;

use crate::config::Config;
use crate::control::model_api;
use crate::exit::{CHECK_FAILED, CliResult, OK};
use crate::output::print_json;

/// How long one probe (a `--version`, a connection) may take before it counts as failed.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// Free space in the home below which a run can fail (blobs, queue, clones), bytes.
const DISK_FAIL_BYTES: u64 = 100 << 20;
/// Free space in the home below which doctor warns, bytes.
const DISK_WARN_BYTES: u64 = 1 << 30;

/// `skillforge doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {}

/// The verdict of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Works.
    Ok,
    /// Optional and missing or limited: a feature is unavailable, the rest works.
    Warn,
    /// Needed and missing or broken.
    Fail,
}

/// One check's line.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// What was checked, e.g. `git`, `queue`, `runtime claude`.
    pub name: String,
    /// Its verdict.
    pub status: Status,
    /// What was found (a version, an address, an error).
    pub detail: String,
    /// What to do; empty when nothing.
    pub fix: String,
}

fn check(
    name: impl Into<String>,
    status: Status,
    detail: impl Into<String>,
    fix: impl Into<String>,
) -> Check {
    Check {
        name: name.into(),
        status,
        detail: detail.into(),
        fix: fix.into(),
    }
}

/// Runs every check and prints them.
///
/// # Errors
/// Exit 3 when the home cannot be resolved; a failed check is exit 1, not an error.
pub async fn run(
    home: Option<PathBuf>,
    queue: Option<String>,
    json_out: bool,
    _args: DoctorArgs,
) -> CliResult {
    let home = crate::config::resolve_home(home)?;
    let mut checks = Vec::new();
    let config = match Config::load(&home) {
        Ok(config) => {
            let file = home.join(crate::config::CONFIG_FILE);
            let (detail, fix) = if file.exists() {
                (format!("{} loads", file.display()), String::new())
            } else if !home.exists() {
                (
                    format!("no home at {} yet: defaults", home.display()),
                    format!(
                        "`skillforge --home {} init` makes one (or check --home / SKILLFORGE_HOME)",
                        home.display()
                    ),
                )
            } else {
                ("no config.toml: defaults".to_owned(), String::new())
            };
            checks.push(check("config", Status::Ok, detail, fix));
            config
        }
        Err(e) => {
            checks.push(check(
                "config",
                Status::Fail,
                format!("{e:#}"),
                "fix the key it names (`skillforge schema config` lists every key)",
            ));
            Config::default()
        }
    };
    crate::runners::configure(&config);
    checks.push(home_check(&home));
    checks.push(
        program_check(
            "git",
            &["--version"],
            Status::Fail,
            "install git (apt-get install git); every repository step needs it",
        )
        .await,
    );
    checks.push(bwrap_check().await);
    checks.push(queue_check(queue.or_else(|| config.queue.url.clone()), &home).await);
    checks.push(container_check().await);
    checks.extend(runtime_checks().await);
    checks.extend(checker_checks());
    let is_ok = checks.iter().all(|c| c.status != Status::Fail);
    if json_out {
        print_json(&serde_json::json!({"home": home, "ok": is_ok, "checks": checks}));
    } else {
        let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
        for c in &checks {
            let status = match c.status {
                Status::Ok => "ok",
                Status::Warn => "warn",
                Status::Fail => "FAIL",
            };
            let fix = if c.fix.is_empty() {
                String::new()
            } else {
                format!(" — {}", c.fix)
            };
            println!("{status:<4}  {:<width$}  {}{fix}", c.name, c.detail);
        }
        let n_warn = checks.iter().filter(|c| c.status == Status::Warn).count();
        let n_fail = checks.iter().filter(|c| c.status == Status::Fail).count();
        println!(
            "{n_fail} failed, {n_warn} warning(s), {} ok",
            checks.len() - n_fail - n_warn
        );
    }
    Ok(if is_ok { OK } else { CHECK_FAILED })
}

/// The home: its nearest existing ancestor writable, and the disk's free space there.
fn home_check(home: &Path) -> Check {
    let existing = home
        .ancestors()
        .find(|p| p.exists())
        .unwrap_or(Path::new("/"));
    let stat = match nix::sys::statvfs::statvfs(existing) {
        Ok(s) => s,
        Err(e) => {
            return check(
                "home",
                Status::Fail,
                format!("{}: {e}", existing.display()),
                "pick a home on a readable disk (--home DIR)",
            );
        }
    };
    let free = stat.blocks_available().saturating_mul(stat.fragment_size());
    let writable = nix::unistd::access(existing, nix::unistd::AccessFlags::W_OK).is_ok();
    let detail = format!(
        "{} ({} free{})",
        home.display(),
        human_bytes(free),
        if home.exists() {
            ""
        } else {
            ", created on first use"
        }
    );
    if !writable {
        return check(
            "home",
            Status::Fail,
            format!("{detail}: `{}` is not writable", existing.display()),
            "pick a writable home (--home DIR or SKILLFORGE_HOME)",
        );
    }
    if free < DISK_FAIL_BYTES {
        return check(
            "home",
            Status::Fail,
            detail,
            "free disk space (blobs, the queue and clones live here) or move the home",
        );
    }
    if free < DISK_WARN_BYTES {
        return check(
            "home",
            Status::Warn,
            detail,
            "less than 1 GiB free: free some space before long runs",
        );
    }
    check("home", Status::Ok, detail, "")
}

fn human_bytes(n: u64) -> String {
    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;
    if n >= GIB {
        format!("{:.1} GiB", n as f64 / GIB as f64)
    } else {
        format!("{} MiB", n / MIB)
    }
}

/// Runs `program args` with [`PROBE_TIMEOUT`]; `Ok(first line of its output)` when it exits 0.
async fn probe(program: &str, args: &[&str]) -> Result<String, String> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    match tokio::time::timeout(PROBE_TIMEOUT, cmd.output()).await {
        Err(_) => Err(format!(
            "`{program} {}` did not answer within {} s",
            args.join(" "),
            PROBE_TIMEOUT.as_secs()
        )),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            Err("not found on PATH".to_owned())
        }
        Ok(Err(e)) => Err(format!("cannot run: {e}")),
        Ok(Ok(out)) => {
            let text = if out.stdout.is_empty() {
                &out.stderr
            } else {
                &out.stdout
            };
            let first = String::from_utf8_lossy(text)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_owned();
            if out.status.success() {
                Ok(first)
            } else {
                Err(format!("exited {}: {first}", out.status))
            }
        }
    }
}

async fn program_check(program: &str, args: &[&str], missing: Status, fix: &str) -> Check {
    match probe(program, args).await {
        Ok(version) => check(program, Status::Ok, version, ""),
        Err(e) => check(program, missing, e, fix),
    }
}

/// bwrap: present and able to make the namespaces the sandbox asks for.
async fn bwrap_check() -> Check {
    let fix_missing = "install bubblewrap (apt-get install bubblewrap); until then `verify` and hard verifiers run commands unconfined";
    let version = match probe("bwrap", &["--version"]).await {
        Ok(v) => v,
        Err(e) => return check("bwrap", Status::Warn, e, fix_missing),
    };
    match probe(
        "bwrap",
        &[
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--unshare-net",
            "--unshare-pid",
            "true",
        ],
    )
    .await
    {
        Ok(_) => check(
            "bwrap",
            Status::Ok,
            format!("{version}, namespaces work"),
            "",
        ),
        Err(e) => check(
            "bwrap",
            Status::Warn,
            format!("{version} cannot confine here ({e})"),
            "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1) or run verifiers in containers (`[skillopt] hard_verifier_image`)",
        ),
    }
}

/// The queue: the embedded file, or a Redis server's reachability, version, eviction policy and
/// persistence.
async fn queue_check(url: Option<String>, home: &Path) -> Check {
    // The same parse every command does: a URL they refuse is a failure here, never the default.
    let url = match skillforge_engine::open::QueueUrl::parse(url.as_deref(), home) {
        Err(e) => {
            return check(
                "queue",
                Status::Fail,
                e.to_string(),
                "fix `--queue` / `[queue] url`: redis://HOST:PORT[/DB], rediss:// for TLS, or sqlite://PATH",
            );
        }
        Ok(skillforge_engine::open::QueueUrl::Sqlite(file)) => {
            return check(
                "queue",
                Status::Ok,
                format!(
                    "embedded SQLite queue {} (one machine; `--queue redis://…` for a fleet)",
                    file.display()
                ),
                "",
            );
        }
        Ok(skillforge_engine::open::QueueUrl::Redis(url)) => url,
    };
    match tokio::time::timeout(PROBE_TIMEOUT, redis_facts(&url)).await {
        Err(_) => check(
            "queue",
            Status::Fail,
            format!("{url}: no answer within {} s", PROBE_TIMEOUT.as_secs()),
            "start redis-server or fix `--queue` / `[queue] url`",
        ),
        Ok(Err(e)) => check(
            "queue",
            Status::Fail,
            format!("{url}: {e}"),
            "start redis-server or fix `--queue` / `[queue] url`",
        ),
        Ok(Ok(facts)) => {
            let detail = format!(
                "Redis {} at {url}, maxmemory-policy {}, {}",
                facts.version,
                facts.policy.as_deref().unwrap_or("unknown"),
                if facts.aof { "AOF on" } else { "AOF off" }
            );
            match facts.policy.as_deref() {
                Some("noeviction") if facts.aof => check("queue", Status::Ok, detail, ""),
                Some("noeviction") => check(
                    "queue",
                    Status::Warn,
                    detail,
                    "a restart loses jobs written since the last snapshot: `CONFIG SET appendonly yes` (and in redis.conf)",
                ),
                Some(_) => check(
                    "queue",
                    Status::Fail,
                    detail,
                    "an evicting policy deletes queued jobs under memory pressure: `CONFIG SET maxmemory-policy noeviction` (and in redis.conf)",
                ),
                None => check(
                    "queue",
                    Status::Warn,
                    detail,
                    "CONFIG GET is not allowed here: make sure maxmemory-policy is noeviction",
                ),
            }
        }
    }
}

struct RedisFacts {
    version: String,
    policy: Option<String>,
    aof: bool,
}

async fn redis_facts(url: &str) -> Result<RedisFacts, String> {
    let client = redis::Client::open(url).map_err(|e| e.to_string())?;
    let mut con = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .arg("persistence")
        .query_async(&mut con)
        .await
        .map_err(|e| e.to_string())?;
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(|v| v.trim().to_owned())
    };
    let policy: Option<Vec<String>> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory-policy")
        .query_async(&mut con)
        .await
        .ok();
    Ok(RedisFacts {
        version: field("redis_version").unwrap_or_else(|| "unknown".into()),
        policy: policy.and_then(|v| v.get(1).cloned()),
        aof: field("aof_enabled").as_deref() == Some("1"),
    })
}

/// The container engine the container runner would use.
async fn container_check() -> Check {
    let host = skillforge_runner_container::resolve_host(None);
    let fix = "optional (`jobs submit --image`, `verify --image`, container arms): start podman's socket \
               (`podman system service --time=0 unix:///run/podman/podman.sock &`) or docker, or set DOCKER_HOST / `[runners.container] host`";
    if !skillforge_runner_container::engine_configured() {
        return check("containers", Status::Warn, "no engine socket found", fix);
    }
    match tokio::time::timeout(
        PROBE_TIMEOUT,
        skillforge_runner_container::Engine::connect(&host),
    )
    .await
    {
        Ok(Ok(engine)) => check(
            "containers",
            Status::Ok,
            format!("{} {} at {host}", engine.info.name, engine.info.version),
            "",
        ),
        Ok(Err(e)) => check("containers", Status::Warn, e.to_string(), fix),
        Err(_) => check(
            "containers",
            Status::Warn,
            format!("{host}: no answer within {} s", PROBE_TIMEOUT.as_secs()),
            fix,
        ),
    }
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| {
            let p = dir.join(program);
            p.is_file() && nix::unistd::access(&p, nix::unistd::AccessFlags::X_OK).is_ok()
        })
    })
}

/// Each shipped agent runtime but the scripted ones (built in): installed, its version, its
/// credentials and the programs it requires. The runtimes are probed at once (a CLI's
/// `--version` can take seconds); the lines keep the profiles' order.
async fn runtime_checks() -> Vec<Check> {
    let profiles = skillforge_runner_agent::profile::all().iter().filter(|p| {
        !p.program
            .contains(skillforge_runner_agent::profile::SKILLFORGE_BIN_PLACEHOLDER)
    });
    futures::future::join_all(profiles.map(runtime_check)).await
}

async fn runtime_check(profile: &skillforge_runner_agent::RuntimeProfile) -> Check {
    let name = format!("runtime {}", profile.name);
    let install = profile
        .install_hint
        .clone()
        .unwrap_or_else(|| format!("install `{}`", profile.program));
    let version = match probe(&profile.program, &["--version"]).await {
        Ok(v) => v,
        Err(e) => {
            return check(
                name,
                Status::Warn,
                e,
                format!("optional: {install}, to use `--runtime {}`", profile.name),
            );
        }
    };
    if let Some(missing) = profile.missing_requirement(on_path) {
        return check(
            name,
            Status::Warn,
            format!("{version}; {missing}"),
            "install the program it names",
        );
    }
    // The runtime's one wording of how to give it credentials, as every other message says it.
    let login_fix = || profile.credential_help();
    // Issue 35 item 1: the same preflight `eval forge` runs before any arm starts, so an `ok`
    // here is a runtime that command accepts.
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    let user_home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let now_ms = chrono::Utc::now().timestamp_millis();
    if let Err(e) =
        skillforge_evalloop::credentials::preflight(&profile.name, &env, &user_home, now_ms)
    {
        // The preflight's message says what is missing and what to do (the runtime's one
        // wording of its credentials): it is the fix, said once.
        return check(
            name,
            Status::Warn,
            format!("{version} installed, not logged in"),
            e.to_string(),
        );
    }
    if let Some(reason) =
        profile.missing_credential(|k| std::env::var_os(k).is_some(), |k| std::env::var(k).ok())
    {
        return check(
            name,
            Status::Warn,
            format!("{version} installed, not logged in: {reason}"),
            login_fix(),
        );
    }
    let var = |k: &str| std::env::var(k).ok();
    let probe = match model_api::probe(profile, &user_home, &var).await {
        Ok(Some(probe)) => probe,
        Ok(None) => return check(name, Status::Ok, version, ""),
        Err(e) => {
            return check(
                name,
                Status::Warn,
                format!("{version}; {e}"),
                "fix the runtime's config file it names",
            );
        }
    };
    if probe.unreachable.is_empty() {
        let apis = if probe.upstreams.is_empty() {
            String::new()
        } else {
            format!(
                ", model API {} accepts connections",
                probe.upstreams.join(", ")
            )
        };
        return check(name, Status::Ok, format!("{version}{apis}"), "");
    }
    check(
        name,
        Status::Warn,
        format!(
            "{version}; its model API does not accept a connection: {}",
            probe.unreachable.join("; ")
        ),
        model_api::unreachable_fix(probe.setting),
    )
}

/// The checker tools of each shipped language profile: a dimension is measurable when one of its
/// alternative tools is on PATH.
fn checker_checks() -> Vec<Check> {
    let mut out = Vec::new();
    for profile in skillforge_runner_checker::shipped_profiles() {
        let mut found = Vec::new();
        let mut skipped = Vec::new();
        for (dimension, spec) in &profile.dimensions {
            let mut programs: Vec<&str> = spec
                .tools
                .iter()
                .filter_map(|t| t.argv.first().map(String::as_str))
                .collect();
            // Alternatives of one program (golangci-lint's v2 and v1 spellings) are named once.
            programs.dedup();
            match programs.iter().find(|p| on_path(p)) {
                Some(p) => found.push(format!("{dimension}: {p}")),
                None => skipped.push(format!(
                    "{dimension} (needs one of {})",
                    programs.join(", ")
                )),
            }
        }
        let name = format!("checkers {}", profile.language);
        if skipped.is_empty() {
            out.push(check(name, Status::Ok, found.join("; "), ""));
        } else {
            out.push(check(
                name,
                Status::Warn,
                format!("skipped: {}", skipped.join("; ")),
                "optional: `check` scores diff_size always and skips these dimensions until a tool is installed",
            ));
        }
    }
    out
}
