//! `skillforge-soak`: a randomized fault soak of the real `skillforge` binary (issue 21). Thousands
//! of jobs (short, long, failing-then-passing, non-idempotent, lock-holding, with and without
//! idempotency keys, cancelled and retried) run on a real redis-server or the embedded queue while
//! a seeded schedule SIGKILLs, SIGSTOPs, stops and restarts workers and `serve`, restarts and
//! pauses redis-server and holds the SQLite write locks. After a quiet period an invariant
//! checker reads the whole history (effects log, queue, domain store, processes) and names every
//! violation with its jobs. A seed replays the same plan (mix and schedule).
//!
//! ```text
//! skillforge-soak --backend both --seeds 1,2,new --jobs 500
//! ```
//! Exit 0: no violation; 1: violations (the report names them and the seed); 2: bad usage.

mod checker;
mod cluster;
mod history;
mod plan;
mod report;
mod run;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::history::Growth;
use crate::plan::Shape;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Backend {
    /// The embedded SQLite queue.
    Sqlite,
    /// A real redis-server (AOF, fsync always) on a free loopback port.
    Redis,
    /// Both, one after the other.
    Both,
}

/// Randomized fault soak of the `skillforge` binary with an invariant checker.
#[derive(Debug, Parser)]
#[command(name = "skillforge-soak")]
struct Args {
    /// Queue backend(s) to soak.
    #[arg(long, value_enum, default_value = "both")]
    backend: Backend,
    /// Seeds, comma-separated; `new` is a fresh seed, printed in the report.
    #[arg(long, value_delimiter = ',', default_value = "new")]
    seeds: Vec<String>,
    /// Jobs per seed.
    #[arg(long, default_value_t = 2000)]
    jobs: usize,
    /// Worker processes.
    #[arg(long, default_value_t = 3)]
    workers: usize,
    /// Jobs each worker runs at once.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Concurrent `jobs submit` processes.
    #[arg(long, default_value_t = 3)]
    submitters: usize,
    /// Seconds faults are injected (the submitting goes on past it if needed, without faults).
    #[arg(long = "fault-window", default_value_t = 60)]
    fault_window_secs: u64,
    /// Mean milliseconds between faults.
    #[arg(long = "fault-every", default_value_t = 1500)]
    fault_every_ms: u64,
    /// Longest wait, seconds, for every job to settle once the faults are undone.
    #[arg(long = "quiet", default_value_t = 120)]
    quiet_secs: u64,
    /// Seconds a worker or `serve` runs before its warm sample of memory and open fds; growth
    /// is measured from there to its last sample at the end.
    #[arg(long = "warm-up", default_value_t = 5)]
    warm_up_secs: u64,
    /// Resident-set growth a surviving worker or `serve` may show whatever the work, MiB.
    #[arg(long = "rss-slack-mb", default_value_t = 24)]
    rss_slack_mb: u64,
    /// Resident-set growth allowed per 1 000 attempts run, KiB (a leak of ~1 KiB per job).
    #[arg(long = "rss-kb-per-1000", default_value_t = 1024)]
    rss_kb_per_1000: u64,
    /// Open-fd growth a surviving worker or `serve` may show whatever the work.
    #[arg(long = "fds-slack", default_value_t = 16)]
    fds_slack: u64,
    /// Open-fd growth allowed per 1 000 attempts run.
    #[arg(long = "fds-per-1000", default_value_t = 1)]
    fds_per_1000: u64,
    /// Keep each run's directory (home, effects log, process logs) here instead of a temp dir
    /// (a temp dir is kept anyway when a run finds a violation).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Append every run's report to this markdown file.
    #[arg(long = "append-report")]
    append_report: Option<PathBuf>,
    /// The `skillforge` binary (default: the one beside this binary).
    #[arg(long)]
    bin: Option<PathBuf>,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let bin = args.bin.clone().unwrap_or_else(skillforge_tests::bin);
    let backends: &[bool] = match args.backend {
        Backend::Sqlite => &[false],
        Backend::Redis => &[true],
        Backend::Both => &[false, true],
    };
    let mut seeds = Vec::new();
    for s in &args.seeds {
        match s.as_str() {
            "new" => seeds.push(rand::random::<u32>() as u64),
            n => match n.parse() {
                Ok(n) => seeds.push(n),
                Err(_) => {
                    eprintln!("error: --seeds: `{n}` is neither a number nor `new`");
                    return std::process::ExitCode::from(2);
                }
            },
        }
    }
    let mut failed = 0;
    for &redis in backends {
        for &seed in &seeds {
            let shape = Shape {
                jobs: args.jobs,
                workers: args.workers,
                redis,
                fault_window_ms: args.fault_window_secs * 1000,
                fault_every_ms: args.fault_every_ms.max(2),
            };
            let plan = plan::plan(seed, shape);
            let temp = tempfile::Builder::new()
                .prefix("skillforge-soak-")
                .tempdir()
                .expect("create a temp dir");
            let dir = match &args.dir {
                Some(d) => d.join(format!("{}-{seed}", if redis { "redis" } else { "sqlite" })),
                None => temp.path().to_owned(),
            };
            let setup = run::Setup {
                bin: bin.clone(),
                redis,
                workers: args.workers,
                concurrency: args.concurrency,
                submitters: args.submitters,
                quiet: Duration::from_secs(args.quiet_secs),
                dir: dir.clone(),
                growth: Growth {
                    warm_up_ms: args.warm_up_secs * 1000,
                    rss_slack_kb: args.rss_slack_mb * 1024,
                    rss_kb_per_1000: args.rss_kb_per_1000,
                    fds_slack: args.fds_slack,
                    fds_per_1000: args.fds_per_1000,
                },
            };
            eprintln!(
                "soak: seed {seed} on {}: {} jobs, {} faults planned in {} s (dir {})",
                if redis { "redis" } else { "sqlite" },
                plan.jobs.len(),
                plan.faults.len(),
                args.fault_window_secs,
                dir.display()
            );
            let outcome = run::run(&plan, &setup);
            let replay = replay_command(&args, redis, seed);
            let text = report::render(&plan, &setup, &outcome, &replay);
            println!("{text}");
            let _ = std::fs::write(dir.join("report.md"), &text);
            if let Some(f) = &args.append_report {
                use std::io::Write;
                let mut file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(f)
                    .expect("open the report file");
                writeln!(file, "{text}").expect("append the report");
            }
            if !outcome.violations.is_empty() {
                failed += 1;
                if args.dir.is_none() {
                    eprintln!("soak: kept {} for inspection", temp.keep().display());
                }
            }
        }
    }
    if failed > 0 {
        std::process::ExitCode::from(1)
    } else {
        std::process::ExitCode::SUCCESS
    }
}

fn replay_command(a: &Args, redis: bool, seed: u64) -> String {
    format!(
        "skillforge-soak --backend {} --seeds {seed} --jobs {} --workers {} --concurrency {} --submitters {} --fault-window {} --fault-every {}",
        if redis { "redis" } else { "sqlite" },
        a.jobs,
        a.workers,
        a.concurrency,
        a.submitters,
        a.fault_window_secs,
        a.fault_every_ms
    )
}
