//! The web console's page-render figure (issue 36, "Speed": the console's pages render in
//! ≤ 100 ms with 100 000 finished jobs in the queue). For each backend (the embedded SQLite file
//! of a home, and a Redis namespace on the private redis-server), `n` no-op jobs are run and
//! acknowledged through the engine (as the control plane's ingestion leaves them), then the real
//! `skillforge serve --listen` is started on that home with a console token and each page is
//! fetched `calls` times over HTTP. The baseline, measured in the same run on the same home, is
//! `skillforge --json jobs list --state succeeded` (a process: what an operator ran before the
//! console); the table gives each page's p50 in ms and its ratio to the baseline's p50.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use serde::Serialize;

use crate::sf::Target;
use crate::util;

/// The console token the bench's `serve` runs with.
const TOKEN: &str = "bench-console-token-0123456789";

/// The pages timed (path, label).
fn pages(id: &str) -> Vec<(String, &'static str)> {
    vec![
        ("/".to_owned(), "queue overview"),
        ("/jobs".to_owned(), "jobs, all states"),
        ("/jobs?state=succeeded".to_owned(), "jobs, succeeded"),
        ("/jobs?state=succeeded&page=10".to_owned(), "jobs, succeeded, page 10"),
        ("/jobs?state=succeeded&q=zzz-no-match".to_owned(), "jobs, search"),
        (format!("/jobs/{id}"), "one job"),
        ("/workers".to_owned(), "workers and locks"),
        ("/attention".to_owned(), "attention"),
        ("/work".to_owned(), "work"),
    ]
}

/// One backend's figures: p50 / p95 ms per page and of the baseline.
#[derive(Debug, Clone, Serialize)]
pub struct ConsoleFigures {
    pub backend: String,
    pub n: u64,
    pub calls: usize,
    /// `skillforge --json jobs list --state succeeded` (whole process), ms.
    pub baseline_p50_ms: f64,
    pub baseline_p95_ms: f64,
    /// label → (p50 ms, p95 ms).
    pub pages: Vec<(String, f64, f64)>,
}

/// Runs `n` no-op jobs on `target` and acknowledges them all.
async fn seed(target: &Target, n: u64) -> Result<String> {
    let backend = target.open().await?;
    crate::scale::fill(target, &backend, n, None).await?;
    crate::sf::drain_existing(target, backend.clone(), n, 50).await?;
    crate::scale::ack_all(&backend).await?;
    let one = backend.list(Some(skillforge_engine::job::JobState::Succeeded), 1).await?;
    Ok(one.first().context("no succeeded job after seeding")?.id.clone())
}

/// `GET path` with the console token; (status, ms).
fn get(port: u16, path: &str) -> Result<(u16, f64)> {
    let t = Instant::now();
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n")?;
    let mut body = Vec::new();
    s.read_to_end(&mut body)?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let text = String::from_utf8_lossy(&body);
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    Ok((status, ms))
}

fn skillforge(bin: &Path, home: &Path, queue: Option<&str>) -> Command {
    let mut c = Command::new(bin);
    c.arg("--home").arg(home);
    if let Some(q) = queue {
        c.args(["--queue", q]);
    }
    c
}

struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Seeds `n` jobs on `target` (a home's queue), serves the console on it, times every page and
/// the baseline.
async fn one(bin: &Path, home: &Path, queue: Option<&str>, target: &Target, label: &str, n: u64, calls: usize) -> Result<ConsoleFigures> {
    eprintln!("console figure, {label}: running and acknowledging {n} no-op jobs");
    let id = seed(target, n).await?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let log = std::fs::File::create(home.join("serve.log"))?;
    let child = skillforge(bin, home, queue)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .env("SKILLFORGE_SERVER_TOKEN", TOKEN)
        .env_remove("SKILLFORGE_WEBHOOK_SECRET")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .context("start skillforge serve")?;
    let _serve = Serve(child);
    let up = util::wait_until(Duration::from_millis(20), Duration::from_secs(60), || async move { Ok(TcpStream::connect(("127.0.0.1", port)).is_ok()) }).await?;
    ensure!(up, "serve did not listen within 60 s (see {})", home.join("serve.log").display());

    let mut baseline = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        let out = skillforge(bin, home, queue).args(["--json", "jobs", "list", "--state", "succeeded"]).output()?;
        baseline.push(t.elapsed().as_secs_f64() * 1e3);
        ensure!(out.status.success(), "jobs list failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let mut figures = Vec::new();
    for (path, page) in pages(&id) {
        // One warm-up call (the first read of a cold page cache is not the figure).
        let (status, _) = get(port, &path)?;
        ensure!(status == 200, "{path}: HTTP {status}");
        let mut ms = Vec::with_capacity(calls);
        for _ in 0..calls {
            let (status, t) = get(port, &path)?;
            ensure!(status == 200, "{path}: HTTP {status}");
            ms.push(t);
        }
        figures.push((page.to_owned(), util::percentile(&ms, 50.0), util::percentile(&ms, 95.0)));
    }
    Ok(ConsoleFigures {
        backend: label.to_owned(),
        n,
        calls,
        baseline_p50_ms: util::percentile(&baseline, 50.0),
        baseline_p95_ms: util::percentile(&baseline, 95.0),
        pages: figures,
    })
}

/// The figure on SQLite and (with `redis_url`) Redis; prints the table and writes
/// `out_dir/console-<stamp>.{json,md}`.
pub async fn run(bin: &Path, redis_url: Option<&str>, n: u64, calls: usize, out_dir: &Path) -> Result<()> {
    let mut all = Vec::new();
    let sqlite_home = tempfile::tempdir()?;
    let target = Target::Sqlite { path: sqlite_home.path().join("queue.db") };
    all.push(one(bin, sqlite_home.path(), None, &target, "sqlite", n, calls).await?);
    if let Some(url) = redis_url {
        util::redis_flushall(url).await?;
        let redis_home = tempfile::tempdir()?;
        let target = Target::Redis { url: url.to_owned(), namespace: "skillforge".to_owned() };
        all.push(one(bin, redis_home.path(), Some(url), &target, "redis", n, calls).await?);
    }
    let md = markdown(&all);
    println!("{md}");
    std::fs::create_dir_all(out_dir)?;
    let stamp = chrono_free_stamp();
    let base: PathBuf = out_dir.join(format!("console-{stamp}"));
    std::fs::write(base.with_extension("json"), serde_json::to_string_pretty(&all)?)?;
    std::fs::write(base.with_extension("md"), &md)?;
    eprintln!("written: {}.{{json,md}}", base.display());
    Ok(())
}

/// Seconds since the Unix epoch, for file names.
fn chrono_free_stamp() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

fn markdown(all: &[ConsoleFigures]) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "## Web console pages ({} finished jobs, {} calls each; goal: ≤ 100 ms)\n", all.first().map_or(0, |f| f.n), all.first().map_or(0, |f| f.calls));
    let _ = write!(o, "| page |");
    for f in all {
        let _ = write!(o, " {} p50 ms | {} p95 ms | {} ÷ `jobs list` |", f.backend, f.backend, f.backend);
    }
    let _ = writeln!(o, "\n|---|{}", "---|---|---|".repeat(all.len()));
    let rows = all.first().map_or(0, |f| f.pages.len());
    for i in 0..rows {
        let _ = write!(o, "| {} |", all[0].pages[i].0);
        for f in all {
            let (_, p50, p95) = &f.pages[i];
            let _ = write!(o, " {p50:.1} | {p95:.1} | {:.2} |", p50 / f.baseline_p50_ms);
        }
        let _ = writeln!(o);
    }
    let _ = write!(o, "| baseline: `skillforge --json jobs list --state succeeded` (process) |");
    for f in all {
        let _ = write!(o, " {:.1} | {:.1} | 1.00 |", f.baseline_p50_ms, f.baseline_p95_ms);
    }
    let _ = writeln!(o);
    o
}
