//! The markdown report of one run: seed, backend and how to replay it, what ran and what was
//! injected, every check with its count, and each violation with its job ids.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::checker::CHECKS;
use crate::history::{Event, Growth, History};
use crate::plan::Plan;
use crate::run::{Outcome, Setup};

/// Violations listed per check before "… and N more".
const LISTED: usize = 12;

fn counts<'a>(it: impl Iterator<Item = &'a str>) -> String {
    let mut m: BTreeMap<&str, usize> = BTreeMap::new();
    for k in it {
        *m.entry(k).or_default() += 1;
    }
    m.iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The survivors' largest growth from their warm sample to their last, and the bound.
fn growth_line(h: &History, g: &Growth) -> String {
    let grown: Vec<(i64, i64, u64, &str)> = h
        .processes
        .iter()
        .filter(|p| p.survived)
        .filter_map(|p| {
            let (w, l) = (p.warm?, p.last?);
            Some((
                l.rss_kb as i64 - w.rss_kb as i64,
                l.fds as i64 - w.fds as i64,
                l.attempts.saturating_sub(w.attempts),
                p.name.as_str(),
            ))
        })
        .collect();
    let rss = grown.iter().max_by_key(|g| g.0);
    let fds = grown.iter().max_by_key(|g| g.1);
    let bound = format!(
        "bound {} MiB + {} KiB and {} + {} fds per 1 000 attempts after a {} s warm-up",
        g.rss_slack_kb / 1024,
        g.rss_kb_per_1000,
        g.fds_slack,
        g.fds_per_1000,
        g.warm_up_ms / 1000
    );
    match (rss, fds) {
        (Some(r), Some(f)) => format!(
            "growth of the {} survivors: RSS at most {:+} KiB ({}, over {} attempts), fds at most {:+} ({}); {bound}",
            grown.len(),
            r.0,
            r.3,
            r.2,
            f.1,
            f.3
        ),
        _ => format!("growth: no survivor sampled after its warm-up; {bound}"),
    }
}

/// Renders the report of `outcome`.
pub(crate) fn render(plan: &Plan, setup: &Setup, o: &Outcome, replay: &str) -> String {
    let h = &o.history;
    let backend = if setup.redis {
        "redis (AOF, fsync always)"
    } else {
        "embedded SQLite"
    };
    let verdict = if o.violations.is_empty() {
        "PASS, 0 violations".to_owned()
    } else {
        format!("FAIL, {} violations", o.violations.len())
    };
    let mut r = String::new();
    let _ = writeln!(r, "### soak seed {} on {backend}: {verdict}\n", plan.seed);
    let _ = writeln!(r, "- replay: `{replay}`");
    let _ = writeln!(
        r,
        "- setup: {} workers × concurrency {}, {} submitters; {} s submitting under faults, {:.1} s quiet period (limit {} s)",
        setup.workers,
        setup.concurrency,
        setup.submitters,
        o.phases.0.round(),
        o.phases.1,
        setup.quiet.as_secs()
    );
    let _ = writeln!(
        r,
        "- jobs: {} submitted ({})",
        h.submitted.len(),
        counts(h.submitted.iter().map(|s| s.kind.as_str()))
    );
    let _ = writeln!(
        r,
        "- final states: {}",
        counts(h.jobs.values().map(|j| j.state.as_str()))
    );
    let starts = h.effects.iter().filter(|e| e.event == Event::Start).count();
    let effects = h
        .effects
        .iter()
        .filter(|e| e.event == Event::Effect)
        .count();
    let _ = writeln!(
        r,
        "- effects log: {} lines, {starts} attempts started, {effects} effects; {} applied results; {} recovery decisions (`jobs retry`); {} keyed submits",
        h.effects.len(),
        h.applied.len(),
        h.retries.len(),
        h.key_returns.len()
    );
    let faults = o
        .faults
        .iter()
        .map(|(k, n)| format!("{k} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(
        r,
        "- faults: {} injected ({faults})",
        o.faults.values().sum::<usize>()
    );
    if o.faults
        .keys()
        .any(|k| k.starts_with("redis eviction pressure"))
    {
        let (ooms, evicted) = o.pressure_effect;
        let _ = writeln!(
            r,
            "- eviction pressure: {ooms} commands refused with OOM, {evicted} keys evicted"
        );
    }
    let (rss, fds) = h
        .processes
        .iter()
        .fold((0, 0), |(r, f), p| (r.max(p.max_rss_kb), f.max(p.max_fds)));
    let _ = writeln!(
        r,
        "- processes: {} started (workers and serve); largest RSS {} MiB, most fds {}",
        h.processes.len(),
        rss / 1024,
        fds
    );
    let _ = writeln!(r, "- {}", growth_line(h, &setup.growth));
    if !o.failed_submits.is_empty() {
        let _ = writeln!(
            r,
            "- unkeyed submits that failed (not retried): {}; first: {}",
            o.failed_submits.len(),
            o.failed_submits[0]
        );
    }
    if !o.unclean_shutdowns.is_empty() {
        let _ = writeln!(
            r,
            "- did not exit 0 at the final SIGTERM: {:?}",
            o.unclean_shutdowns
        );
    }
    let by_check: BTreeMap<&str, Vec<_>> = o.violations.iter().fold(BTreeMap::new(), |mut m, v| {
        m.entry(v.check).or_insert_with(Vec::new).push(v);
        m
    });
    let line = CHECKS
        .iter()
        .map(|c| format!("{c} {}", by_check.get(c).map_or(0, Vec::len)))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(r, "- checks ({}): {line}", CHECKS.len());
    for (check, vs) in &by_check {
        let _ = writeln!(r, "\n**{check}** ({}):", vs.len());
        for v in vs.iter().take(LISTED) {
            let _ = writeln!(r, "- `{}`: {}", v.subject, v.detail.replace('\n', "\n  "));
        }
        if vs.len() > LISTED {
            let _ = writeln!(r, "- … and {} more", vs.len() - LISTED);
        }
    }
    r
}
