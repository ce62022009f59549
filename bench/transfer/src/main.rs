//! Staging cost of a 50 MB artifact set through the Redis transfer area against copying the same
//! files over loopback TCP, measured in the same run (issue 20; goal: ≤ 1.5×).
//!
//! The set: 50 files of 1 MiB of deterministic pseudo-random bytes (sha256 chain) in a temp dir.
//! * **skillforge**: a `Stager` reads each file, hashes it and stores it in the Redis transfer area
//!   (1 MiB chunks with a TTL, one pipelined write per file) of a fresh namespace per trial (no
//!   dedup hits); the figure also reports the worker side (`materialize`: fetch, verify, write).
//! * **peer**: a client reads each file and writes it, length-prefixed, to a loopback TCP socket;
//!   a server thread writes each to a file in a fresh dir and acknowledges the end.
//!
//! * **re-stage**: the same set staged again into the same namespace: deduplicated, each chunk
//!   checked in the server (its SHA-1 against the stager's, a Lua script) and its TTL refreshed.
//!
//! Trials interleave the two, median of 5. `REDIS_URL` names the server (run.sh starts one).
//! `--quick`: 5 files, 1 trial — a smoke run that the benchmark still builds and runs, not a
//! measurement.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use skillforge_engine::QueueBackend;
use skillforge_engine::redis::RedisBackend;
use skillforge_engine::transfer::{Stager, TransferLimits, materialize};

const FILE_BYTES: usize = 1 << 20;

fn make_set(dir: &Path, files: usize) -> anyhow::Result<Vec<PathBuf>> {
    let mut seed = Sha256::digest(b"skillforge transfer bench").to_vec();
    std::fs::create_dir_all(dir)?;
    let mut paths = Vec::new();
    for i in 0..files {
        let mut bytes = Vec::with_capacity(FILE_BYTES);
        while bytes.len() < FILE_BYTES {
            seed = Sha256::digest(&seed).to_vec();
            bytes.extend_from_slice(&seed);
        }
        bytes.truncate(FILE_BYTES);
        bytes[..8].copy_from_slice(&(i as u64).to_le_bytes());
        let path = dir.join(format!("artifact-{i:03}.bin"));
        std::fs::write(&path, &bytes)?;
        paths.push(path);
    }
    Ok(paths)
}

/// Copies `paths` to a fresh dir through loopback TCP; returns the wall time.
fn tcp_copy(paths: &[PathBuf], dest: &Path) -> anyhow::Result<Duration> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let dest = dest.to_path_buf();
    let n = paths.len();
    let server = std::thread::spawn(move || -> anyhow::Result<()> {
        let (mut sock, _) = listener.accept()?;
        std::fs::create_dir_all(&dest)?;
        for i in 0..n {
            let mut len = [0u8; 8];
            sock.read_exact(&mut len)?;
            let mut buf = vec![0u8; u64::from_le_bytes(len) as usize];
            sock.read_exact(&mut buf)?;
            std::fs::write(dest.join(format!("f{i}")), &buf)?;
        }
        sock.write_all(b"k")?;
        Ok(())
    });
    let started = Instant::now();
    let mut sock = TcpStream::connect(addr)?;
    for p in paths {
        let bytes = std::fs::read(p)?;
        sock.write_all(&(bytes.len() as u64).to_le_bytes())?;
        sock.write_all(&bytes)?;
    }
    let mut ack = [0u8; 1];
    sock.read_exact(&mut ack)?;
    let took = started.elapsed();
    server.join().map_err(|_| anyhow::anyhow!("tcp server panicked"))??;
    Ok(took)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/0".into());
    let quick = std::env::args().any(|a| a == "--quick");
    let (files, trials) = if quick { (5, 1) } else { (50, 5) };
    let dir = tempfile::tempdir()?;
    let paths = make_set(&dir.path().join("set"), files)?;
    let (mut staged, mut restaged, mut fetched, mut copied) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for trial in 0..trials {
        let backend = RedisBackend::connect(&url, &format!("bench-transfer-{trial}-{}", std::process::id()))
            .await?
            .with_transfer_limits(TransferLimits::default());
        let area = backend.transfer_area().expect("redis has a transfer area");
        let started = Instant::now();
        let mut stager = Stager::new(area.as_ref());
        for (i, p) in paths.iter().enumerate() {
            stager.add_file(&format!("in/{i}"), p).await?;
        }
        staged.push(started.elapsed());
        anyhow::ensure!(stager.uploaded == files, "every file uploaded (no dedup within a trial)");
        let entries = stager.finish();
        let started = Instant::now();
        let mut again = Stager::new(area.as_ref());
        for (i, p) in paths.iter().enumerate() {
            again.add_file(&format!("in/{i}"), p).await?;
        }
        restaged.push(started.elapsed());
        anyhow::ensure!(again.uploaded == 0, "the second stage of the same set is deduplicated");
        let started = Instant::now();
        materialize(area.as_ref(), &entries, &dir.path().join(format!("worker-{trial}"))).await?;
        fetched.push(started.elapsed());
        copied.push(tcp_copy(&paths, &dir.path().join(format!("tcp-{trial}")))?);
    }
    let (s, r, f, c) = (median(staged.clone()), median(restaged.clone()), median(fetched.clone()), median(copied.clone()));
    let ratio = s.as_secs_f64() / c.as_secs_f64();
    if quick {
        println!("(--quick: a smoke run, not a measurement)");
    }
    println!("| figure ({} MiB, {files} files, median of {trials}) | time |", files * FILE_BYTES >> 20);
    println!("|---|---|");
    println!("| stage through the Redis transfer area (read, sha256, chunked SET with TTL) | {:.1} ms |", s.as_secs_f64() * 1e3);
    println!("| re-stage of the same set (deduplicated: chunks verified in the server, TTL refreshed) | {:.1} ms |", r.as_secs_f64() * 1e3);
    println!("| worker side: fetch, verify, write (materialize) | {:.1} ms |", f.as_secs_f64() * 1e3);
    println!("| peer: copy over loopback TCP (read, send, write) | {:.1} ms |", c.as_secs_f64() * 1e3);
    println!("| **ratio staging / TCP copy** (goal ≤ 1.5×) | **{ratio:.2}×** |");
    println!("\nper-trial ms: staged {:?}, re-staged {:?}, fetched {:?}, tcp {:?}", ms(&staged), ms(&restaged), ms(&fetched), ms(&copied));
    Ok(())
}

fn ms(v: &[Duration]) -> Vec<u64> {
    v.iter().map(|d| d.as_millis() as u64).collect()
}
