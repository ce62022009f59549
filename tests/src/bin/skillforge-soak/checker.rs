//! The invariant checker: reads a whole [`History`] and names every violation of issue 21's
//! invariants with the jobs (or processes) that break it. Pure: no I/O, so it is tested on
//! hand-written histories (`checker/tests.rs`).

use std::collections::{BTreeMap, BTreeSet};

use crate::history::{Event, Growth, History, ProcessRecord};

/// A submitted job the queue no longer has.
pub(crate) const LOST_JOB: &str = "lost_job";
/// A job neither terminal nor parked `stale` with recovery available after the quiet period.
pub(crate) const NOT_SETTLED: &str = "not_settled";
/// A job still `running` with a heartbeat older than its stale deadline.
pub(crate) const STUCK_RUNNING: &str = "stuck_running";
/// A terminal (or stale) job whose current (job, token) result the store does not hold with its state.
pub(crate) const RESULT_NOT_APPLIED: &str = "result_not_applied";
/// One (job, token) applied twice, or one job's success applied under two tokens.
pub(crate) const DOUBLE_APPLICATION: &str = "double_application";
/// A result applied for a token that never ended that way (a superseded lease's late result).
pub(crate) const SUPERSEDED_TOKEN_APPLIED: &str = "superseded_token_applied";
/// One (job, token) wrote its effect more than once (the same lease ran twice).
pub(crate) const DUPLICATE_EFFECT: &str = "duplicate_effect";
/// A success applied for a token that wrote no effect.
pub(crate) const APPLIED_WITHOUT_EFFECT: &str = "applied_without_effect";
/// A non-idempotent job started again with no recovery decision (`jobs retry`) in between.
pub(crate) const NON_IDEMPOTENT_RERUN: &str = "non_idempotent_rerun_without_recovery";
/// Two holders of one named lock at once.
pub(crate) const TWO_LOCK_HOLDERS: &str = "two_lock_holders";
/// More attempts than `max_attempts` (per attempt budget: `jobs retry` starts a new one).
pub(crate) const ATTEMPTS_OVER_MAX: &str = "attempts_over_max";
/// A worker or `serve` exited without the soak stopping it.
pub(crate) const SILENT_DEATH: &str = "silent_death";
/// A surviving process whose memory or open fds grew past the bound for the work it did.
pub(crate) const RESOURCES_UNBOUNDED: &str = "resources_unbounded";
/// One idempotency key answered with two different jobs.
pub(crate) const IDEMPOTENCY_KEY_SPLIT: &str = "idempotency_key_split";

/// A record the soak corrupted that ended neither quarantined nor applied (issue 32 item 2;
/// checked by the run, not by [`check`]).
pub(crate) const BROKEN_NOT_QUARANTINED: &str = "broken_record_not_quarantined";

/// Every check, in report order.
pub(crate) const CHECKS: [&str; 15] = [
    LOST_JOB,
    NOT_SETTLED,
    STUCK_RUNNING,
    RESULT_NOT_APPLIED,
    DOUBLE_APPLICATION,
    SUPERSEDED_TOKEN_APPLIED,
    DUPLICATE_EFFECT,
    APPLIED_WITHOUT_EFFECT,
    NON_IDEMPOTENT_RERUN,
    TWO_LOCK_HOLDERS,
    ATTEMPTS_OVER_MAX,
    SILENT_DEATH,
    RESOURCES_UNBOUNDED,
    IDEMPOTENCY_KEY_SPLIT,
    BROKEN_NOT_QUARANTINED,
];

/// One broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Violation {
    /// The check's name (one of [`CHECKS`]).
    pub(crate) check: &'static str,
    /// The offending job id (or process name for the process checks).
    pub(crate) subject: String,
    /// What was seen.
    pub(crate) detail: String,
}

const TERMINAL: [&str; 4] = ["succeeded", "failed", "dead", "cancelled"];

/// Checks every invariant over `h`; an empty list means none was broken.
pub(crate) fn check(h: &History) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut v = |check: &'static str, subject: &str, detail: String| {
        out.push(Violation {
            check,
            subject: subject.to_owned(),
            detail,
        });
    };
    let ix = Index::new(h);
    settled(h, &mut v);
    applied(h, &mut v);
    effects(h, &mut v);
    non_idempotent(h, &ix, &mut v);
    locks(h, &mut v);
    attempts(h, &ix, &mut v);
    processes(h, &mut v);
    out
}

type Sink<'a> = dyn FnMut(&'static str, &str, String) + 'a;

fn settled(h: &History, v: &mut Sink<'_>) {
    for s in &h.submitted {
        let Some(j) = h.jobs.get(&s.id) else {
            v(
                LOST_JOB,
                &s.id,
                format!("submitted ({}) but the queue has no such job", s.kind),
            );
            continue;
        };
        let parked = j.state == "stale" && j.recovery_available;
        if TERMINAL.contains(&j.state.as_str()) || parked {
            continue;
        }
        match j.heartbeat_age_ms {
            Some(age) if j.state == "running" && age > s.stale_after_ms => v(
                STUCK_RUNNING,
                &s.id,
                format!(
                    "running, heartbeat {age} ms old, stale after {} ms",
                    s.stale_after_ms
                ),
            ),
            _ => v(
                NOT_SETTLED,
                &s.id,
                format!("{} (token {}) after the quiet period", j.state, j.token),
            ),
        }
    }
    let mut by_key: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (key, id) in &h.key_returns {
        by_key.entry(key).or_default().insert(id);
    }
    for (key, ids) in by_key.into_iter().filter(|(_, ids)| ids.len() > 1) {
        for id in &ids {
            v(
                IDEMPOTENCY_KEY_SPLIT,
                id,
                format!("key `{key}` returned {} jobs: {ids:?}", ids.len()),
            );
        }
    }
}

fn applied(h: &History, v: &mut Sink<'_>) {
    let mut rows: BTreeMap<(&str, u64), Vec<&str>> = BTreeMap::new();
    for a in &h.applied {
        rows.entry((a.job.as_str(), a.token))
            .or_default()
            .push(a.state.as_str());
    }
    for ((job, token), states) in &rows {
        if states.len() > 1 {
            v(
                DOUBLE_APPLICATION,
                job,
                format!("token {token} applied {} times ({states:?})", states.len()),
            );
        }
    }
    let mut successes: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for a in h.applied.iter().filter(|a| a.state == "succeeded") {
        successes.entry(a.job.as_str()).or_default().push(a.token);
    }
    for (job, tokens) in successes.iter().filter(|(_, t)| t.len() > 1) {
        v(
            DOUBLE_APPLICATION,
            job,
            format!("success applied under tokens {tokens:?}"),
        );
    }
    for (id, j) in &h.jobs {
        let settled = TERMINAL.contains(&j.state.as_str()) || j.state == "stale";
        if !settled {
            continue;
        }
        match rows.get(&(id.as_str(), j.token)) {
            None => v(
                RESULT_NOT_APPLIED,
                id,
                format!(
                    "{} under token {}: no applied result for that token",
                    j.state, j.token
                ),
            ),
            Some(states) if !states.contains(&j.state.as_str()) => v(
                RESULT_NOT_APPLIED,
                id,
                format!(
                    "{} under token {}: the store applied {states:?} for that token",
                    j.state, j.token
                ),
            ),
            Some(_) => {}
        }
    }
    for a in &h.applied {
        let Some(j) = h.jobs.get(&a.job) else {
            continue;
        };
        if a.token == j.token {
            continue;
        }
        let ended = j
            .history
            .iter()
            .find(|(t, _)| *t == a.token)
            .map(|(_, r)| r.as_deref());
        let why = match ended {
            _ if a.token > j.token => Some(format!(
                "token {} is newer than the job's {}",
                a.token, j.token
            )),
            // An operator's cancel of a queued job is a result under the token it had then,
            // which no lease may have run under (token 0: cancelled before its first lease).
            None if a.state == "cancelled" => None,
            None => Some(format!(
                "token {} ({}) is not in the job's history",
                a.token, a.state
            )),
            Some(Some("released")) => Some(format!(
                "token {} was handed back, yet its result was applied",
                a.token
            )),
            Some(r) if a.state == "succeeded" && r != Some("succeeded") => Some(format!(
                "token {} ended {r:?}, yet a success was applied for it",
                a.token
            )),
            Some(_) => None,
        };
        if let Some(why) = why {
            v(SUPERSEDED_TOKEN_APPLIED, &a.job, why);
        }
    }
}

fn effects(h: &History, v: &mut Sink<'_>) {
    let mut count: BTreeMap<(&str, u64), usize> = BTreeMap::new();
    let mut starts: BTreeMap<(&str, u64), usize> = BTreeMap::new();
    for e in &h.effects {
        match e.event {
            Event::Effect => *count.entry((e.job.as_str(), e.token)).or_default() += 1,
            Event::Start => *starts.entry((e.job.as_str(), e.token)).or_default() += 1,
            _ => {}
        }
    }
    for ((job, token), n) in count.iter().filter(|(_, n)| **n > 1) {
        v(
            DUPLICATE_EFFECT,
            job,
            format!("token {token} wrote its effect {n} times"),
        );
    }
    for ((job, token), n) in starts.iter().filter(|(_, n)| **n > 1) {
        v(
            DUPLICATE_EFFECT,
            job,
            format!("token {token} started {n} times (one lease ran twice)"),
        );
    }
    for a in h.applied.iter().filter(|a| a.state == "succeeded") {
        if !count.contains_key(&(a.job.as_str(), a.token)) {
            v(
                APPLIED_WITHOUT_EFFECT,
                &a.job,
                format!(
                    "success of token {} applied, but that token wrote no effect",
                    a.token
                ),
            );
        }
    }
}

/// Per job: its effects-log starts (one per token, oldest first) and its `jobs retry` times,
/// built once (a run of 20 000 jobs has ~100 000 effects lines).
struct Index<'a> {
    starts: BTreeMap<&'a str, Vec<(i64, u64)>>,
    retries: BTreeMap<&'a str, Vec<i64>>,
}

impl<'a> Index<'a> {
    fn new(h: &'a History) -> Self {
        let mut starts: BTreeMap<&str, Vec<(i64, u64)>> = BTreeMap::new();
        let mut seen = BTreeSet::new();
        for e in h.effects.iter().filter(|e| e.event == Event::Start) {
            if seen.insert((e.job.as_str(), e.token)) {
                starts
                    .entry(e.job.as_str())
                    .or_default()
                    .push((e.at_us, e.token));
            }
        }
        for s in starts.values_mut() {
            s.sort_unstable();
        }
        let mut retries: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
        for (job, at) in &h.retries {
            retries.entry(job.as_str()).or_default().push(*at);
        }
        Self { starts, retries }
    }

    fn starts(&self, job: &str) -> &[(i64, u64)] {
        self.starts.get(job).map_or(&[], Vec::as_slice)
    }

    fn retries(&self, job: &str) -> &[i64] {
        self.retries.get(job).map_or(&[], Vec::as_slice)
    }
}

fn non_idempotent(h: &History, ix: &Index<'_>, v: &mut Sink<'_>) {
    for s in h.submitted.iter().filter(|s| !s.idempotent) {
        let retries = ix.retries(&s.id);
        for pair in ix.starts(&s.id).windows(2) {
            let ((t1, k1), (t2, k2)) = (pair[0], pair[1]);
            if !retries.iter().any(|r| *r > t1 && *r < t2) {
                v(
                    NON_IDEMPOTENT_RERUN,
                    &s.id,
                    format!("token {k2} started after token {k1} with no `jobs retry` in between"),
                );
            }
        }
    }
}

fn locks(h: &History, v: &mut Sink<'_>) {
    let lock_of: BTreeMap<&str, &str> = h
        .submitted
        .iter()
        .filter_map(|s| s.lock.as_deref().map(|l| (s.id.as_str(), l)))
        .collect();
    let mut spans: BTreeMap<(&str, &str, u64), (i64, i64)> = BTreeMap::new();
    for e in &h.effects {
        let Some(lock) = lock_of.get(e.job.as_str()) else {
            continue;
        };
        let span = spans
            .entry((lock, e.job.as_str(), e.token))
            .or_insert((e.at_us, e.at_us));
        span.0 = span.0.min(e.at_us);
        span.1 = span.1.max(e.at_us);
    }
    let mut by_lock: BTreeMap<&str, Vec<(i64, i64, &str, u64)>> = BTreeMap::new();
    for ((lock, job, token), (from, to)) in spans {
        by_lock
            .entry(lock)
            .or_default()
            .push((from, to, job, token));
    }
    for (lock, mut holders) in by_lock {
        holders.sort_unstable();
        let mut open: Option<(i64, &str, u64)> = None;
        for (from, to, job, token) in holders {
            if let Some((until, other, other_token)) = open {
                if from < until {
                    let detail = format!(
                        "`{lock}` held by {other} (token {other_token}) and {job} (token {token}) at once"
                    );
                    v(TWO_LOCK_HOLDERS, job, detail.clone());
                    v(TWO_LOCK_HOLDERS, other, detail);
                }
            }
            if open.is_none_or(|(until, _, _)| to > until) {
                open = Some((to, job, token));
            }
        }
    }
}

fn attempts(h: &History, ix: &Index<'_>, v: &mut Sink<'_>) {
    for s in &h.submitted {
        let Some(j) = h.jobs.get(&s.id) else { continue };
        if j.attempts > s.max_attempts {
            v(
                ATTEMPTS_OVER_MAX,
                &s.id,
                format!("attempts {} of max {}", j.attempts, s.max_attempts),
            );
            continue;
        }
        let released = j
            .history
            .iter()
            .filter(|(_, r)| r.as_deref() == Some("released"))
            .count();
        let allowed = s.max_attempts as usize + released;
        let retries = ix.retries(&s.id);
        let mut per_budget: BTreeMap<usize, usize> = BTreeMap::new();
        for &(at, _) in ix.starts(&s.id) {
            *per_budget
                .entry(retries.iter().filter(|r| **r < at).count())
                .or_default() += 1;
        }
        if let Some((budget, n)) = per_budget.into_iter().find(|(_, n)| *n > allowed) {
            v(
                ATTEMPTS_OVER_MAX,
                &s.id,
                format!(
                    "{n} attempts started in attempt budget {budget} (max {}, {released} handed back)",
                    s.max_attempts
                ),
            );
        }
    }
}

fn processes(h: &History, v: &mut Sink<'_>) {
    for p in &h.processes {
        if let (Some(status), false) = (&p.exited, p.on_purpose) {
            v(
                SILENT_DEATH,
                &p.name,
                format!(
                    "pid {} exited ({status}) without being stopped; log tail:\n{}",
                    p.pid, p.log_tail
                ),
            );
        }
        if let Some(growth) = h.growth {
            if let Some(detail) = grew_past(p, &growth) {
                v(RESOURCES_UNBOUNDED, &p.name, detail);
            }
        }
    }
}

/// What grew past `g` between a survivor's warm and last samples (`None`: within bounds, not a
/// survivor, or never sampled after its warm-up).
fn grew_past(p: &ProcessRecord, g: &Growth) -> Option<String> {
    let (true, Some(warm), Some(last)) = (p.survived, p.warm, p.last) else {
        return None;
    };
    let attempts = last.attempts.saturating_sub(warm.attempts);
    let rss = last.rss_kb.saturating_sub(warm.rss_kb);
    let fds = last.fds.saturating_sub(warm.fds);
    let mut over = Vec::new();
    if rss > g.rss_bound_kb(attempts) {
        over.push(format!(
            "RSS grew {rss} KiB ({} → {} KiB), bound {} KiB",
            warm.rss_kb,
            last.rss_kb,
            g.rss_bound_kb(attempts)
        ));
    }
    if fds > g.fds_bound(attempts) {
        over.push(format!(
            "open fds grew {fds} ({} → {}), bound {}",
            warm.fds,
            last.fds,
            g.fds_bound(attempts)
        ));
    }
    (!over.is_empty()).then(|| {
        format!(
            "pid {}: {} over {attempts} attempts after its warm-up",
            p.pid,
            over.join("; ")
        )
    })
}

#[cfg(test)]
mod tests;
