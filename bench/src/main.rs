//! `skillforge-bench`: skillforge's engine against BullMQ (Redis) and apalis-sqlite (embedded),
//! every figure measured in the same run, reported as ratios. See `bench/README.md`.
//!
//! `bench/run.sh` starts a private redis-server and runs `skillforge-bench all`; the other
//! subcommands are the child processes that `all` spawns (producers, recovery workers).

mod apalis_peer;
mod bullmq;
mod console;
mod model;
mod report;
mod scale;
mod sf;
mod timed;
mod util;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use serde::Serialize;

use crate::model::{LatencyTrial, RecoveryTrial, ThroughputTrial};
use crate::sf::{Backend, Target};

#[derive(Parser)]
#[command(about = "skillforge engine benchmark (see bench/README.md)")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Every figure, skillforge and its peers, in one run; prints the ratio table.
    All(AllArgs),
    /// The web console's page-render figure with N finished jobs (bench/console.sh).
    Console {
        /// The skillforge binary whose `serve` is measured.
        #[arg(long)]
        skillforge: PathBuf,
        /// A private redis-server (flushed); without it SQLite only.
        #[arg(long)]
        redis_url: Option<String>,
        #[arg(long, default_value_t = 100_000)]
        n: u64,
        #[arg(long, default_value_t = 20)]
        calls: usize,
        #[arg(long, default_value = "results")]
        out_dir: PathBuf,
    },
    /// Child: adds jobs one at a time at a fixed rate (latency figure).
    Produce {
        #[arg(long, value_enum)]
        backend: Backend,
        #[arg(long)]
        url: Option<String>,
        #[arg(long)]
        namespace: Option<String>,
        #[arg(long)]
        path: Option<PathBuf>,
        #[arg(long)]
        n: u64,
        #[arg(long)]
        rate: u64,
    },
    /// Child: apalis-sqlite producer (latency figure).
    ProduceApalis {
        #[arg(long)]
        path: PathBuf,
        #[arg(long)]
        n: u64,
        #[arg(long)]
        rate: u64,
    },
    /// Child: a skillforge worker (concurrency 1, a long `sleep` runner) for the recovery figure.
    RecoveryWorker {
        #[arg(long, value_enum)]
        backend: Backend,
        #[arg(long)]
        url: Option<String>,
        #[arg(long)]
        namespace: Option<String>,
        #[arg(long)]
        path: Option<PathBuf>,
        #[arg(long)]
        name: String,
    },
    /// Prints the CPU-speed probe as JSON.
    Probe,
    /// Diagnostic: apalis-sqlite's throughput alone (one trial, fresh file), to check its
    /// configuration against peers.md.
    ApalisThroughput {
        #[arg(long, default_value_t = 20_000)]
        n: u64,
        #[arg(long, default_value_t = 50)]
        concurrency: usize,
        /// Run apalis's `setup` only before the push (the first runs' configuration).
        #[arg(long)]
        setup_before_push_only: bool,
    },
    /// Diagnostic: skillforge's throughput alone (one trial; a fresh SQLite file, or a Redis
    /// namespace that must be empty), e.g. under `perf record`.
    SfThroughput {
        #[arg(long, value_enum)]
        backend: Backend,
        #[arg(long)]
        url: Option<String>,
        #[arg(long)]
        namespace: Option<String>,
        #[arg(long, default_value_t = 20_000)]
        n: u64,
        #[arg(long, default_value_t = 50)]
        concurrency: usize,
        /// Time every backend call of the worker (the profile pass's wrapper).
        #[arg(long)]
        profile: bool,
    },
    /// Diagnostic: skillforge's enqueue→start latency alone (one trial, as in `all`).
    SfLatency {
        #[arg(long, value_enum)]
        backend: Backend,
        #[arg(long)]
        url: Option<String>,
        #[arg(long)]
        namespace: Option<String>,
        #[arg(long, default_value_t = 2_000)]
        n: u64,
        #[arg(long, default_value_t = 200)]
        rate: u64,
    },
}

#[derive(clap::Args, Clone)]
struct AllArgs {
    /// redis-server to use (bench/run.sh starts a private one).
    #[arg(long)]
    redis_url: String,
    /// Its port (for the BullMQ scripts).
    #[arg(long)]
    redis_port: u16,
    /// Directory of the BullMQ peer (package.json, node_modules, bench.js).
    #[arg(long)]
    bullmq_dir: PathBuf,
    /// Where to write `<stamp>.json` and `<stamp>.md`.
    #[arg(long)]
    out_dir: PathBuf,
    /// One trial per figure and smaller N: a smoke run, not a measurement.
    #[arg(long)]
    quick: bool,
    /// Figures to run (comma-separated): throughput, latency, recovery, and (not by default)
    /// scale: bytes per job, drain and latency with a large backlog, pages over retained jobs;
    /// memory: the bytes per job of the scale figure alone (`--memory-n` jobs);
    /// backlog: the scale figure's enqueue→start p99, empty and with `--scale-n` delayed jobs behind, alone.
    #[arg(long, default_value = "throughput,latency,recovery", value_delimiter = ',')]
    figures: Vec<String>,
    /// Scale figure: the large backlog (drain, pages) and the delayed backlog behind the latency jobs.
    #[arg(long, default_value_t = 1_000_000)]
    scale_n: u64,
    /// Memory figure (alone or in the scale figure): jobs queued, then drained and retained.
    #[arg(long, default_value_t = 100_000)]
    memory_n: u64,
}

/// Workload parameters of one run.
#[derive(Debug, Clone, Serialize)]
struct Params {
    trials: usize,
    recovery_trials: usize,
    throughput_n: u64,
    concurrency: usize,
    latency_n: u64,
    latency_rate_per_s: u64,
    apalis_poll_ms: u64,
}

#[derive(Debug, Serialize)]
struct Versions {
    redis_server: String,
    node: String,
    bullmq: String,
    ioredis: String,
    apalis: String,
    apalis_sqlite: String,
}

#[derive(Debug, Serialize)]
struct Results {
    date_utc: String,
    quick: bool,
    params: Params,
    versions: Versions,
    cpu_probe_before: util::CpuProbe,
    cpu_probe_after: Option<util::CpuProbe>,
    throughput: BTreeMap<String, Vec<ThroughputTrial>>,
    latency: BTreeMap<String, Vec<LatencyTrial>>,
    recovery: BTreeMap<String, Vec<RecoveryTrial>>,
    scale: Option<(scale::ScaleParams, scale::ScaleResults)>,
    /// The memory figure run alone (`--figures memory`): its n and the bytes per job per system.
    memory: Option<(u64, BTreeMap<String, scale::Memory>)>,
    errors: Vec<String>,
}

fn lock_version(name: &str) -> String {
    let lock = include_str!("../Cargo.lock");
    let needle = format!("name = \"{name}\"\nversion = \"");
    lock.find(&needle)
        .map(|i| {
            let rest = &lock[i + needle.len()..];
            rest[..rest.find('"').unwrap_or(0)].to_owned()
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

fn shell(cmd: &str, args: &[&str]) -> String {
    std::process::Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned())
}

fn note<T>(errors: &mut Vec<String>, what: &str, r: Result<T>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            let msg = format!("{what}: {e:#}");
            eprintln!("  ERROR {msg}");
            errors.push(msg);
            None
        }
    }
}

fn push<T>(map: &mut BTreeMap<String, Vec<T>>, key: &str, v: Option<T>) {
    let entry = map.entry(key.to_owned()).or_default();
    if let Some(v) = v {
        entry.push(v);
    }
}

async fn all(a: AllArgs) -> Result<()> {
    let quick = a.quick;
    let params = Params {
        trials: if quick { 1 } else { 3 },
        recovery_trials: if quick { 1 } else { 3 },
        throughput_n: if quick { 2_000 } else { 20_000 },
        concurrency: 50,
        latency_n: if quick { 400 } else { 2_000 },
        latency_rate_per_s: 200,
        apalis_poll_ms: apalis_peer::POLL.as_millis() as u64,
    };
    let bull = bullmq::BullMq { dir: a.bullmq_dir.clone(), port: a.redis_port };
    eprintln!("probing CPU speed…");
    let probe = util::cpu_probe();
    eprintln!("  {probe:?}");
    let versions = Versions {
        redis_server: util::redis_info_field(&a.redis_url, "server", "redis_version").await.unwrap_or_default(),
        node: shell("node", &["--version"]),
        bullmq: bull.version(),
        ioredis: bullmq::version_of(&a.bullmq_dir, "ioredis"),
        apalis: lock_version("apalis"),
        apalis_sqlite: lock_version("apalis-sqlite"),
    };
    let mut r = Results {
        date_utc: shell("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]),
        quick,
        params: params.clone(),
        versions,
        cpu_probe_before: probe,
        cpu_probe_after: None,
        throughput: BTreeMap::new(),
        latency: BTreeMap::new(),
        recovery: BTreeMap::new(),
        scale: None,
        memory: None,
        errors: Vec::new(),
    };
    let url = a.redis_url.clone();
    let want = |f: &str| a.figures.iter().any(|x| x == f);

    if want("throughput") {
        for t in 0..params.trials {
            eprintln!("throughput trial {}/{}", t + 1, params.trials);
            util::redis_flushall(&url).await?;
            let target = Target::Redis { url: url.clone(), namespace: format!("tp{t}") };
            let v = note(&mut r.errors, "throughput skillforge redis", sf::throughput(&target, params.throughput_n, params.concurrency, false).await);
            eprintln!("  skillforge redis: {:?}", v.as_ref().map(|x| x.rate));
            push(&mut r.throughput, "skillforge_redis", v);

            util::redis_flushall(&url).await?;
            let v = note(&mut r.errors, "throughput bullmq", bull.throughput(&format!("tp{t}"), params.throughput_n, params.concurrency).await);
            eprintln!("  bullmq: {:?}", v.as_ref().map(|x| x.rate));
            push(&mut r.throughput, "bullmq", v);
            util::redis_flushall(&url).await?;

            let dir = tempfile::tempdir()?;
            let target = Target::Sqlite { path: sf::sqlite_file(dir.path(), "queue") };
            let v = note(&mut r.errors, "throughput skillforge sqlite", sf::throughput(&target, params.throughput_n, params.concurrency, false).await);
            eprintln!("  skillforge sqlite: {:?}", v.as_ref().map(|x| x.rate));
            push(&mut r.throughput, "skillforge_sqlite", v);
            drop(dir);

            let dir = tempfile::tempdir()?;
            let v = note(&mut r.errors, "throughput apalis-sqlite", apalis_peer::throughput(dir.path(), params.throughput_n, params.concurrency, apalis_peer::Setup::AtWorkerStart).await);
            eprintln!("  apalis-sqlite: {:?}", v.as_ref().map(|x| x.rate));
            push(&mut r.throughput, "apalis_sqlite", v);
        }
    }

    if want("throughput") || want("profile") {
        // One extra, unmeasured pass per skillforge backend with every backend call timed.
        eprintln!("profile pass (backend calls timed; not part of the figures)");
        util::redis_flushall(&url).await?;
        let target = Target::Redis { url: url.clone(), namespace: "profile".into() };
        let v = note(&mut r.errors, "profile skillforge redis", sf::throughput(&target, params.throughput_n, params.concurrency, true).await);
        push(&mut r.throughput, "profile_skillforge_redis", v);
        util::redis_flushall(&url).await?;
        let dir = tempfile::tempdir()?;
        let target = Target::Sqlite { path: sf::sqlite_file(dir.path(), "queue") };
        let v = note(&mut r.errors, "profile skillforge sqlite", sf::throughput(&target, params.throughput_n, params.concurrency, true).await);
        push(&mut r.throughput, "profile_skillforge_sqlite", v);
    }

    if want("latency") {
        let (n, rate, c) = (params.latency_n, params.latency_rate_per_s, params.concurrency);
        for t in 0..params.trials {
            eprintln!("latency trial {}/{}", t + 1, params.trials);
            util::redis_flushall(&url).await?;
            let target = Target::Redis { url: url.clone(), namespace: format!("lat{t}") };
            let v = note(&mut r.errors, "latency skillforge redis", sf::latency(&target, n, rate, c).await);
            eprintln!("  skillforge redis: {:?}", v.as_ref().map(|x| (x.p50_ms, x.p99_ms)));
            push(&mut r.latency, "skillforge_redis", v);

            util::redis_flushall(&url).await?;
            let v = note(&mut r.errors, "latency bullmq", bull.latency(&format!("lat{t}"), n, rate, c).await);
            eprintln!("  bullmq: {:?}", v.as_ref().map(|x| (x.p50_ms, x.p99_ms)));
            push(&mut r.latency, "bullmq", v);

            let dir = tempfile::tempdir()?;
            let target = Target::Sqlite { path: sf::sqlite_file(dir.path(), "queue") };
            let v = note(&mut r.errors, "latency skillforge sqlite", sf::latency(&target, n, rate, c).await);
            eprintln!("  skillforge sqlite: {:?}", v.as_ref().map(|x| (x.p50_ms, x.p99_ms)));
            push(&mut r.latency, "skillforge_sqlite", v);
            drop(dir);

            let dir = tempfile::tempdir()?;
            let v = note(&mut r.errors, "latency apalis-sqlite", apalis_peer::latency(dir.path(), n, rate, c).await);
            eprintln!("  apalis-sqlite: {:?}", v.as_ref().map(|x| (x.p50_ms, x.p99_ms)));
            push(&mut r.latency, "apalis_sqlite", v);
        }
    }

    if want("recovery") {
        // Kill offsets spread over the heartbeat (lock-renewal) period: 1/8, 1/2, 7/8 of it.
        let fractions = [0.125, 0.5, 0.875];
        let variants: [(&str, Duration, Duration); 2] = [
            ("defaults", Duration::from_secs(2), Duration::from_secs(15)),
            ("hb1_stale3", Duration::from_secs(1), Duration::from_secs(3)),
        ];
        for t in 0..params.recovery_trials {
            let frac = fractions[t % fractions.len()];
            eprintln!("recovery trial {}/{} (kill at {frac} of the heartbeat period)", t + 1, params.recovery_trials);
            for (name, hb, stale) in variants {
                util::redis_flushall(&url).await?;
                let target = Target::Redis { url: url.clone(), namespace: format!("rec{t}{name}") };
                let key = format!("skillforge_redis_{name}");
                let v = note(&mut r.errors, &key, sf::recovery(&target, hb, stale, hb.mul_f64(frac)).await);
                eprintln!("  {key}: {:?}", v.as_ref().map(|x| x.recovery_s));
                push(&mut r.recovery, &key, v);

                let dir = tempfile::tempdir()?;
                let target = Target::Sqlite { path: sf::sqlite_file(dir.path(), "queue") };
                let key = format!("skillforge_sqlite_{name}");
                let v = note(&mut r.errors, &key, sf::recovery(&target, hb, stale, hb.mul_f64(frac)).await);
                eprintln!("  {key}: {:?}", v.as_ref().map(|x| x.recovery_s));
                push(&mut r.recovery, &key, v);
            }
            util::redis_flushall(&url).await?;
            // BullMQ renews its 30 s lock every 15 s.
            let v = note(&mut r.errors, "bullmq_defaults", bull.recovery(&format!("rec{t}"), Duration::from_secs(15).mul_f64(frac)).await);
            eprintln!("  bullmq_defaults: {:?}", v.as_ref().map(|x| x.recovery_s));
            push(&mut r.recovery, "bullmq_defaults", v);
        }
    }

    if want("memory") {
        let n = if quick { 2_000 } else { a.memory_n };
        let mut errors = Vec::new();
        let res = scale::memory(&url, &bull, n, params.concurrency, &mut errors).await;
        r.errors.extend(errors);
        if let Some(m) = note(&mut r.errors, "memory", res) {
            r.memory = Some((n, m));
        }
    }

    for (figure, latency_only) in [("scale", false), ("backlog", true)] {
        // The scale figure includes the backlog figure's part: asked for both, it runs once.
        if !want(figure) || (latency_only && want("scale")) {
            continue;
        }
        let p = scale::ScaleParams {
            memory_n: if quick { 2_000 } else { a.memory_n },
            small_n: if quick { 2_000 } else { 20_000 },
            large_n: if quick { 20_000 } else { a.scale_n },
            backlog_n: if quick { 20_000 } else { a.scale_n },
            page_calls: 200,
            concurrency: params.concurrency,
            latency_n: params.latency_n,
            latency_rate: params.latency_rate_per_s,
            latency_only,
        };
        let mut errors = Vec::new();
        let res = scale::run(&url, &bull, &p, &mut errors).await;
        r.errors.extend(errors);
        if let Some(res) = note(&mut r.errors, figure, res) {
            r.scale = Some((p, res));
        }
        util::redis_flushall(&url).await?;
    }

    r.cpu_probe_after = Some(util::cpu_probe());
    std::fs::create_dir_all(&a.out_dir)?;
    let stamp = r.date_utc.replace(':', "");
    let json_path = a.out_dir.join(format!("{stamp}{}.json", if quick { "-quick" } else { "" }));
    std::fs::write(&json_path, serde_json::to_string_pretty(&r)?).context("write results json")?;
    let mut md = report::markdown(&r);
    if let Some((p, s)) = &r.scale {
        md.push_str(&scale::markdown(s, p));
    }
    if let Some((n, m)) = &r.memory {
        md.push_str(&scale::memory_markdown(m, *n));
    }
    let md_path = json_path.with_extension("md");
    std::fs::write(&md_path, &md)?;
    println!("{md}");
    eprintln!("raw figures: {}\ntable: {}", json_path.display(), md_path.display());
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::All(a) => all(a).await,
        Cmd::Console { skillforge, redis_url, n, calls, out_dir } => console::run(&skillforge, redis_url.as_deref(), n, calls, &out_dir).await,
        Cmd::Produce { backend, url, namespace, path, n, rate } => {
            sf::produce(&Target::from_args(backend, url, namespace, path)?, n, rate).await
        }
        Cmd::ProduceApalis { path, n, rate } => apalis_peer::produce(&path, n, rate).await,
        Cmd::RecoveryWorker { backend, url, namespace, path, name } => {
            sf::recovery_worker(&Target::from_args(backend, url, namespace, path)?, &name).await
        }
        Cmd::ApalisThroughput { n, concurrency, setup_before_push_only } => {
            let dir = tempfile::tempdir()?;
            let setup = if setup_before_push_only {
                apalis_peer::Setup::BeforePushOnly
            } else {
                apalis_peer::Setup::AtWorkerStart
            };
            let t = apalis_peer::throughput(dir.path(), n, concurrency, setup).await?;
            println!("{}", serde_json::to_string(&t)?);
            Ok(())
        }
        Cmd::SfThroughput { backend, url, namespace, n, concurrency, profile } => {
            let dir = tempfile::tempdir()?;
            let target = Target::from_args(backend, url, namespace, Some(sf::sqlite_file(dir.path(), "queue")))?;
            let t = sf::throughput(&target, n, concurrency, profile).await?;
            println!("{}", serde_json::to_string(&t)?);
            Ok(())
        }
        Cmd::SfLatency { backend, url, namespace, n, rate } => {
            let dir = tempfile::tempdir()?;
            let target = Target::from_args(backend, url, namespace, Some(sf::sqlite_file(dir.path(), "queue")))?;
            let t = sf::latency(&target, n, rate, 50).await?;
            println!("{}", serde_json::to_string(&t)?);
            Ok(())
        }
        Cmd::Probe => {
            println!("{}", serde_json::to_string_pretty(&util::cpu_probe())?);
            Ok(())
        }
    }
}
