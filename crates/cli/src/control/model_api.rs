//! Whether a runtime's model API accepts a connection, as `doctor` and `eval forge` check it: the
//! base URLs the runtime is configured with (its profile's proxy kind reads them: environment,
//! `~/.codex/config.toml`, `~/.config/opencode/opencode.json`), one TCP connection each within
//! [`CONNECT_TIMEOUT`], no request sent; and, when one refuses, where the user sets that URL.

use std::path::Path;
use std::time::Duration;

use skillforge_runner_agent::RuntimeProfile;
use skillforge_runner_agent::profile::ProxyKind;

/// How long a runtime's model API may take to accept a TCP connection (name lookup included).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The model API OpenCode uses when no provider of the user's own is configured (the URL its
/// own connection errors name).
pub const OPENCODE_HOSTED_API: &str = "https://opencode.ai/zen/v1";

/// What a probe of one runtime's model APIs found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiProbe {
    /// The base URLs probed.
    pub upstreams: Vec<String>,
    /// Those that did not accept a connection: `URL (why)`.
    pub unreachable: Vec<String>,
    /// Where the user sets the base URL of this runtime.
    pub setting: &'static str,
}

/// Probes the model APIs `profile` is configured with for the user whose home is `user_home`
/// (variables read through `var`). `Ok(None)` for a runtime with no model API to probe (no
/// proxy kind: the scripted runtimes).
///
/// # Errors
/// A runtime config file that exists and cannot be read or parsed, named.
pub async fn probe(
    profile: &RuntimeProfile,
    user_home: &Path,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<ApiProbe>, String> {
    let Some(kind) = profile.proxy else {
        return Ok(None);
    };
    let upstreams = match skillforge_runner_agent::proxy::ProxyPlan::for_run(kind, user_home, var)?
    {
        // OpenCode with no provider of the user's own uses its hosted one: probed too.
        None if kind == ProxyKind::OpencodeProvider => vec![OPENCODE_HOSTED_API.to_owned()],
        plan => plan.map(|p| p.upstreams).unwrap_or_default(),
    };
    let probes = upstreams.iter().map(|url| async move {
        connect_probe(url)
            .await
            .err()
            .map(|e| format!("{url} ({e})"))
    });
    let unreachable = futures::future::join_all(probes)
        .await
        .into_iter()
        .flatten()
        .collect();
    Ok(Some(ApiProbe {
        upstreams,
        unreachable,
        setting: base_url_setting(kind),
    }))
}

/// Where a user sets the model API base URL of a runtime pointed at it by `kind`.
pub fn base_url_setting(kind: ProxyKind) -> &'static str {
    match kind {
        ProxyKind::AnthropicBaseUrl => "ANTHROPIC_BASE_URL",
        ProxyKind::CodexProvider => {
            "the provider's `base_url` in ~/.codex/config.toml, or OPENAI_BASE_URL"
        }
        ProxyKind::OpencodeProvider => {
            "the provider's `options.baseURL` in ~/.config/opencode/opencode.json"
        }
    }
}

/// What to do about an unreachable model API, naming where its base URL is set.
pub fn unreachable_fix(setting: &str) -> String {
    format!("start the model API or fix its base URL ({setting}), and check the network and proxy")
}

/// Opens (and drops) one TCP connection to `url`'s host and port (443 for https, else 80),
/// within [`CONNECT_TIMEOUT`] including the name lookup; no request is sent.
///
/// # Errors
/// A URL with no host, a name that does not resolve, a refused or timed-out connection.
pub async fn connect_probe(url: &str) -> Result<(), String> {
    let uri: hyper::Uri = url.parse().map_err(|e| format!("not a URL: {e}"))?;
    let host = uri.host().ok_or("no host in the URL")?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        });
    match tokio::time::timeout(
        CONNECT_TIMEOUT,
        tokio::net::TcpStream::connect((host, port)),
    )
    .await
    {
        Err(_) => Err(format!(
            "no connection within {} s",
            CONNECT_TIMEOUT.as_secs()
        )),
        Ok(Err(e)) => Err(e.to_string()),
        Ok(Ok(_)) => Ok(()),
    }
}

/// Whether `program` is an executable file in a directory of this process's `PATH` (or a path
/// to one).
pub fn installed(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(Path::new(program));
    }
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| executable(&dir.join(program)))
    })
}

/// `eval forge`'s check before any arm job: each of `runtimes` (the arms' and the judge's)
/// installed on this machine whose model API does not accept a connection is an environment
/// problem, said in one line naming the URL and where its base URL is set. A runtime not
/// installed here is not probed (its arms fail at once, naming the missing program).
///
/// # Errors
/// The line, for exit 3.
pub async fn check_reachable(runtimes: &[&str]) -> Result<(), String> {
    let user_home = std::env::var_os("HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_default();
    let var = |k: &str| std::env::var(k).ok();
    let mut seen: Vec<&str> = Vec::new();
    for name in runtimes {
        if seen.contains(name) {
            continue;
        }
        seen.push(name);
        let Ok(profile) = skillforge_runner_agent::find(name) else {
            continue;
        };
        if !installed(&profile.program) {
            continue;
        }
        let probe = probe(profile, &user_home, &var)
            .await
            .map_err(|e| format!("runtime `{name}`: {e}; no arm started: fix the file it names"))?;
        if let Some(probe) = probe
            && !probe.unreachable.is_empty()
        {
            return Err(format!(
                "runtime `{name}`'s model API does not accept a connection: {}; no arm started: {}",
                probe.unreachable.join("; "),
                unreachable_fix(probe.setting)
            ));
        }
    }
    Ok(())
}

/// What stands between `runtimes` and a run on this machine, each in one line: a credential the
/// runtime would refuse ([`skillforge_evalloop::credentials::preflight`], as `eval forge` checks
/// it) and a model API that does not accept a connection ([`check_reachable`]); empty when
/// nothing does. For commands that warn rather than stop (a dry run; `train start`, whose jobs
/// may run on another machine's worker).
pub async fn readiness_problems(runtimes: &[&str]) -> Vec<String> {
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    let user_home = std::env::var_os("HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_default();
    let now_ms = chrono::Utc::now().timestamp_millis();
    let mut problems = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for runtime in runtimes {
        if seen.contains(runtime) {
            continue;
        }
        seen.push(runtime);
        if let Err(e) =
            skillforge_evalloop::credentials::preflight(runtime, &env, &user_home, now_ms)
        {
            problems.push(format!("runtime `{runtime}`: {e}"));
        }
    }
    if let Err(e) = check_reachable(runtimes).await {
        problems.push(e.replace("; no arm started", ""));
    }
    problems
}

/// Before queuing agent jobs on `runtimes` (`what` runs them: "ask", "option generation"): on the
/// embedded queue, whose jobs run on this machine, a runtime that cannot run here
/// ([`readiness_problems`]) stops the command (exit 3) before anything is queued; on a shared
/// queue, where another machine's worker may hold what is missing, it is a warning.
///
/// # Errors
/// Exit 3 on the embedded queue, naming each problem.
pub async fn before_agent_jobs(
    ctx: &crate::context::Context,
    runtimes: &[&str],
    what: &str,
) -> Result<(), crate::exit::CliError> {
    let problems = readiness_problems(runtimes).await;
    if problems.is_empty() {
        return Ok(());
    }
    match ctx.queue_url {
        skillforge_engine::open::QueueUrl::Sqlite(_) => {
            Err(crate::exit::CliError::env(anyhow::anyhow!(
                "{what} cannot run on this machine, nothing was queued: {} (`skillforge doctor` checks every runtime; `--runtime scripted` needs no model)",
                problems.join("; ")
            )))
        }
        _ => {
            for problem in problems {
                eprintln!(
                    "warning: {what} cannot run on this machine: {problem}; it runs where a worker has what it needs"
                );
            }
            Ok(())
        }
    }
}
