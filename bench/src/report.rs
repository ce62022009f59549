//! The markdown ratio table.

use std::fmt::Write as _;

use crate::Results;
use crate::model::{LatencyTrial, RecoveryTrial, ThroughputTrial};
use crate::util::{Summary, summary};

fn fmt_range(s: &Summary, digits: usize) -> String {
    format!("{:.d$} ({:.d$}–{:.d$})", s.median, s.min, s.max, d = digits)
}

fn tp(r: &Results, key: &str) -> Option<Summary> {
    let v: Vec<f64> = r.throughput.get(key)?.iter().map(|t: &ThroughputTrial| t.rate).collect();
    (!v.is_empty()).then(|| summary(&v))
}

fn lat(r: &Results, key: &str, p99: bool) -> Option<Summary> {
    let v: Vec<f64> =
        r.latency.get(key)?.iter().map(|t: &LatencyTrial| if p99 { t.p99_ms } else { t.p50_ms }).collect();
    (!v.is_empty()).then(|| summary(&v))
}

fn rec(r: &Results, key: &str) -> Option<Summary> {
    let v: Vec<f64> = r.recovery.get(key)?.iter().map(|t: &RecoveryTrial| t.recovery_s).collect();
    (!v.is_empty()).then(|| summary(&v))
}

fn verdict(ok: Option<bool>) -> &'static str {
    match ok {
        Some(true) => "**PASS**",
        Some(false) => "**FAIL**",
        None => "n/a",
    }
}

fn or_na(s: Option<String>) -> String {
    s.unwrap_or_else(|| "n/a".to_owned())
}

pub fn markdown(r: &Results) -> String {
    let mut o = String::new();
    let p = &r.cpu_probe_before;
    let after = r.cpu_probe_after.as_ref();
    let _ = writeln!(
        o,
        "### skillforge bench — {}{}\n",
        r.date_utc,
        if r.quick { " (QUICK smoke run: 1 trial, small N — not a measurement)" } else { "" }
    );
    let _ = writeln!(
        o,
        "Host: {} × {}; sha256 probe {:.0} ms before / {} ms after (lower = faster); load avg {:.2} / {}. \
         redis-server {}, Node {}, BullMQ {} (ioredis {}), apalis {} + apalis-sqlite {}. \
         Median of {} trial(s) (min–max); throughput N = {}, concurrency {}; latency {} jobs at {}/s.\n",
        p.nproc,
        p.model,
        p.sha256_1m_ms,
        after.map(|a| format!("{:.0}", a.sha256_1m_ms)).unwrap_or_else(|| "?".into()),
        p.loadavg_1m,
        after.map(|a| format!("{:.2}", a.loadavg_1m)).unwrap_or_else(|| "?".into()),
        r.versions.redis_server,
        r.versions.node,
        r.versions.bullmq,
        r.versions.ioredis,
        r.versions.apalis,
        r.versions.apalis_sqlite,
        r.params.trials,
        r.params.throughput_n,
        r.params.concurrency,
        r.params.latency_n,
        r.params.latency_rate_per_s,
    );
    let _ = writeln!(o, "| figure | skillforge | peer | ratio | target | result |");
    let _ = writeln!(o, "|---|---|---|---|---|---|");

    // Throughput, Redis.
    let (s, b) = (tp(r, "skillforge_redis"), tp(r, "bullmq"));
    let ratio = s.as_ref().zip(b.as_ref()).map(|(s, b)| s.median / b.median);
    let _ = writeln!(
        o,
        "| no-op throughput, Redis (jobs/s) | {} | BullMQ {} | {} | ≥ 2× | {} |",
        or_na(s.as_ref().map(|x| fmt_range(x, 0))),
        or_na(b.as_ref().map(|x| fmt_range(x, 0))),
        or_na(ratio.map(|x| format!("{x:.2}×"))),
        verdict(ratio.map(|x| x >= 2.0))
    );
    // Latency, Redis.
    let (s, b) = (lat(r, "skillforge_redis", true), lat(r, "bullmq", true));
    let (s50, b50) = (lat(r, "skillforge_redis", false), lat(r, "bullmq", false));
    let ratio = s.as_ref().zip(b.as_ref()).map(|(s, b)| s.median / b.median);
    let _ = writeln!(
        o,
        "| enqueue→start p99, Redis (ms) | {} (p50 {}) | BullMQ {} (p50 {}) | {} | ≤ 0.5× | {} |",
        or_na(s.as_ref().map(|x| fmt_range(x, 2))),
        or_na(s50.as_ref().map(|x| format!("{:.2}", x.median))),
        or_na(b.as_ref().map(|x| fmt_range(x, 2))),
        or_na(b50.as_ref().map(|x| format!("{:.2}", x.median))),
        or_na(ratio.map(|x| format!("{x:.2}×"))),
        verdict(ratio.map(|x| x <= 0.5))
    );
    // Throughput, SQLite.
    let (s, b) = (tp(r, "skillforge_sqlite"), tp(r, "apalis_sqlite"));
    let ratio = s.as_ref().zip(b.as_ref()).map(|(s, b)| s.median / b.median);
    let _ = writeln!(
        o,
        "| no-op throughput, SQLite (jobs/s) | {} | apalis-sqlite (its setup at worker start) {} | {} | ≥ 2× | {} |",
        or_na(s.as_ref().map(|x| fmt_range(x, 0))),
        or_na(b.as_ref().map(|x| fmt_range(x, 0))),
        or_na(ratio.map(|x| format!("{x:.2}×"))),
        verdict(ratio.map(|x| x >= 2.0))
    );
    // Latency, SQLite.
    let (s, b) = (lat(r, "skillforge_sqlite", true), lat(r, "apalis_sqlite", true));
    let (s50, b50) = (lat(r, "skillforge_sqlite", false), lat(r, "apalis_sqlite", false));
    let ratio = s.as_ref().zip(b.as_ref()).map(|(s, b)| s.median / b.median);
    let _ = writeln!(
        o,
        "| enqueue→start p99, SQLite (ms) | {} (p50 {}) | apalis-sqlite, {} ms polling: {} (p50 {}) | {} | ≤ 10 ms | {} |",
        or_na(s.as_ref().map(|x| fmt_range(x, 2))),
        or_na(s50.as_ref().map(|x| format!("{:.2}", x.median))),
        r.params.apalis_poll_ms,
        or_na(b.as_ref().map(|x| fmt_range(x, 2))),
        or_na(b50.as_ref().map(|x| format!("{:.2}", x.median))),
        or_na(ratio.map(|x| format!("{x:.2}×"))),
        verdict(s.as_ref().map(|x| x.median <= 10.0))
    );
    // Recovery.
    let bull = rec(r, "bullmq_defaults");
    for (backend, label) in [("redis", "Redis"), ("sqlite", "SQLite")] {
        for (variant, what, limit) in
            [("defaults", "defaults (heartbeat 2 s, stale 15 s)", 20.0), ("hb1_stale3", "heartbeat 1 s, stale 3 s", 4.0)]
        {
            let s = rec(r, &format!("skillforge_{backend}_{variant}"));
            let peer = if backend == "redis" && variant == "defaults" {
                or_na(bull.as_ref().map(|x| format!("BullMQ defaults (lock 30 s, stalled check 30 s) {}", fmt_range(x, 1))))
            } else {
                "—".to_owned()
            };
            let ratio = if backend == "redis" && variant == "defaults" {
                or_na(s.as_ref().zip(bull.as_ref()).map(|(s, b)| format!("{:.2}×", s.median / b.median)))
            } else {
                "—".to_owned()
            };
            let _ = writeln!(
                o,
                "| SIGKILL → job starts on survivor, {label}, {what} (s) | {} | {peer} | {ratio} | ≤ {limit} s (every trial) | {} |",
                or_na(s.as_ref().map(|x| fmt_range(x, 2))),
                verdict(s.as_ref().map(|x| x.max <= limit))
            );
        }
    }

    // Where the time goes.
    let _ = writeln!(o, "\n**Profile of the throughput drain** (medians over trials):\n");
    let _ = writeln!(o, "| system | drain s | client CPU s | redis-server CPU s | EVALSHA / job | Redis commands / job (top) | Redis µs / job |");
    let _ = writeln!(o, "|---|---|---|---|---|---|---|");
    for key in ["skillforge_redis", "bullmq", "skillforge_sqlite", "apalis_sqlite"] {
        let Some(trials) = r.throughput.get(key).filter(|t| !t.is_empty()) else { continue };
        let cpu: Vec<f64> = trials.iter().map(|t| t.client_cpu_s).collect();
        let rcpu: Vec<f64> = trials.iter().filter_map(|t| t.redis_cpu_s).collect();
        let usec: Vec<f64> = trials.iter().filter_map(|t| t.redis_usec_per_job).collect();
        let calls = trials[trials.len() / 2]
            .redis_calls_per_job
            .as_ref()
            .map(|m| {
                let mut v: Vec<(&String, &f64)> = m.iter().filter(|(_, c)| **c >= 0.05).collect();
                v.sort_by(|a, b| b.1.total_cmp(a.1));
                let total: f64 = m.values().sum();
                let top: Vec<String> = v.iter().take(6).map(|(k, c)| format!("{k} {c:.2}")).collect();
                format!("{total:.1} total: {}", top.join(", "))
            })
            .unwrap_or_else(|| "—".into());
        let el: Vec<f64> = trials.iter().map(|t| t.elapsed_s).collect();
        let evalsha = trials[trials.len() / 2]
            .redis_calls_per_job
            .as_ref()
            .and_then(|m| m.get("evalsha"))
            .map(|x| format!("{x:.2}"))
            .unwrap_or_else(|| "—".into());
        let _ = writeln!(
            o,
            "| {key} | {:.2} | {:.2} | {} | {evalsha} | {calls} | {} |",
            crate::util::median(&el),
            crate::util::median(&cpu),
            if rcpu.is_empty() { "—".into() } else { format!("{:.2}", crate::util::median(&rcpu)) },
            if usec.is_empty() { "—".into() } else { format!("{:.0}", crate::util::median(&usec)) },
        );
    }
    for key in ["profile_skillforge_redis", "profile_skillforge_sqlite"] {
        let Some(t) = r.throughput.get(key).and_then(|v| v.first()) else { continue };
        let Some(calls) = &t.backend_calls else { continue };
        let _ = writeln!(
            o,
            "\n**{key}** (one extra drain with every backend call of the worker timed: {:.0} jobs/s, {:.2} s):\n",
            t.rate, t.elapsed_s
        );
        let _ = writeln!(o, "| call | calls | calls / job | mean ms | max ms | jobs per lease |");
        let _ = writeln!(o, "|---|---|---|---|---|---|");
        for (name, c) in calls {
            let _ = writeln!(
                o,
                "| {name} | {} | {:.3} | {:.3} | {:.1} | {} |",
                c.calls,
                c.calls as f64 / t.n as f64,
                c.mean_ms,
                c.max_ms,
                if c.items > 0 { format!("{:.1}", c.items as f64 / c.calls as f64) } else { "—".into() }
            );
        }
    }
    if !r.errors.is_empty() {
        let _ = writeln!(o, "\n**Errors in this run:**\n");
        for e in &r.errors {
            let _ = writeln!(o, "* {e}");
        }
    }
    o
}
