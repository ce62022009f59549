//! Container job overhead (issue 14): `true` through the `container` runner against `true`
//! through the `process` runner and against `podman run --rm IMG true` alone, measured in one run,
//! interleaved trial by trial, reported as p50/p90 and ratios.

use std::process::Command as Proc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use skillforge_runner::{CancellationToken, ExitClass};
use skillforge_runner_container::{Command, ContainerPayload, Network, PullPolicy, run_container};
use skillforge_runner_process::{ProcessPayload, run_process};

/// Arguments.
#[derive(Debug, Parser)]
struct Args {
    /// Image to run `true` in (a local image: nothing is pulled).
    #[arg(long, env = "SKILLFORGE_TEST_IMAGE")]
    image: String,
    /// Trials per system.
    #[arg(long, default_value_t = 30)]
    n: usize,
    /// The podman CLI used for the peer figure (talks to the same engine via `--url $DOCKER_HOST`).
    #[arg(long, default_value = "podman")]
    podman: String,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let host = std::env::var("DOCKER_HOST").context("DOCKER_HOST must name the engine")?;
    let work = tempfile::tempdir()?;
    let cancel = CancellationToken::new();
    let mut container_payload = ContainerPayload::new(&args.image, Command::Argv(vec!["true".into()]));
    container_payload.pull = PullPolicy::Never;
    container_payload.network = Network::None;
    let process_payload = ProcessPayload::argv(vec!["true".into()]);
    let timeout = Duration::from_secs(60);

    // Warm-up: the engine connection (negotiated once per process) and the image's layers.
    run_container(&container_payload, "bench-warmup", work.path(), timeout, &cancel).await?;

    let (mut process, mut container, mut podman) = (Vec::new(), Vec::new(), Vec::new());
    for trial in 0..args.n {
        let started = Instant::now();
        let outcome = run_process(&process_payload, timeout, &cancel).await?;
        process.push(started.elapsed());
        if outcome.exit != ExitClass::Passed {
            bail!("process trial {trial}: {outcome:?}");
        }

        let started = Instant::now();
        let outcome = run_container(&container_payload, "bench", work.path(), timeout, &cancel).await?;
        container.push(started.elapsed());
        if outcome.exit != ExitClass::Passed {
            bail!("container trial {trial}: {outcome:?}");
        }

        let started = Instant::now();
        let status = Proc::new(&args.podman)
            .args(["--url", &host, "run", "--rm", "--network", "none", &args.image, "true"])
            .status()
            .context("run podman")?;
        podman.push(started.elapsed());
        if !status.success() {
            bail!("podman run trial {trial}: {status}");
        }
    }
    for v in [&mut process, &mut container, &mut podman] {
        v.sort();
    }
    let p50 = |v: &[Duration]| percentile(v, 0.5);
    println!("# container job overhead: `true`, n = {} per system, interleaved (engine {host}, image {})\n", args.n, args.image);
    println!("| system | p50 ms | p90 ms |");
    println!("|---|---:|---:|");
    for (name, v) in [
        ("process runner", &process),
        ("container runner (create/start/logs/wait/remove)", &container),
        ("`podman run --rm IMG true` (CLI)", &podman),
    ] {
        println!("| {name} | {:.1} | {:.1} |", ms(p50(v)), ms(percentile(v, 0.9)));
    }
    println!();
    println!("container / process (p50): {:.1}×", ms(p50(&container)) / ms(p50(&process)));
    println!(
        "container / podman run (p50): {:.2}× (goal ≤ 1.2×; the runner's own start is the process-runner figure)",
        ms(p50(&container)) / ms(p50(&podman))
    );
    Ok(())
}
