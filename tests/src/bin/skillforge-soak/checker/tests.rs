//! The checker on hand-written histories: a clean one passes, and each broken invariant is named
//! with the job (or process) that breaks it.

use super::*;
use crate::history::{Applied, Effect, FinalJob, Growth, ProcessRecord, Sample, Submitted};

fn job(id: &str, kind: &str) -> Submitted {
    Submitted {
        id: id.into(),
        kind: kind.into(),
        key: None,
        lock: None,
        max_attempts: 3,
        idempotent: true,
        stale_after_ms: 3000,
    }
}

fn fx(event: Event, job: &str, attempt: u32, token: u64, at_us: i64) -> Effect {
    Effect {
        event,
        job: job.into(),
        attempt,
        token,
        at_us,
    }
}

/// A job that ran once under `token` from `at` and succeeded: its effects and the queue's view.
fn ran_ok(h: &mut History, id: &str, token: u64, at: i64) {
    h.effects.push(fx(Event::Start, id, 1, token, at));
    h.effects.push(fx(Event::Effect, id, 1, token, at + 10));
    h.effects.push(fx(Event::Exit(0), id, 1, token, at + 20));
    h.jobs.insert(
        id.into(),
        FinalJob {
            state: "succeeded".into(),
            token,
            attempts: 1,
            max_attempts: 3,
            history: vec![(token, Some("succeeded".into()))],
            ..FinalJob::default()
        },
    );
}

fn applied(job: &str, token: u64, state: &str) -> Applied {
    Applied {
        job: job.into(),
        token,
        state: state.into(),
    }
}

/// A clean history: two jobs, each succeeded once and applied once; `b` was cancelled while
/// queued (applied under token 0) and retried before it ran.
fn clean() -> History {
    let mut h = History::default();
    for (i, id) in ["a", "b"].into_iter().enumerate() {
        h.submitted.push(job(id, "short"));
        ran_ok(&mut h, id, 1, 1000 * i as i64);
        h.applied.push(applied(id, 1, "succeeded"));
    }
    h.applied.push(applied("b", 0, "cancelled"));
    h.retries.push(("b".into(), 900));
    h.processes.push(survivor(
        "worker-0#1",
        10,
        (100, 20_000, 30),
        (2100, 21_000, 31),
    ));
    h.growth = Some(GROWTH);
    h
}

/// 8 MiB + 1 MiB per 1 000 attempts; 10 + 2 fds per 1 000 attempts.
const GROWTH: Growth = Growth {
    warm_up_ms: 5000,
    rss_slack_kb: 8192,
    rss_kb_per_1000: 1024,
    fds_slack: 10,
    fds_per_1000: 2,
};

/// A process alive at the end with its warm and last samples (attempts, RSS KiB, fds).
fn survivor(name: &str, pid: u32, warm: (u64, u64, u64), last: (u64, u64, u64)) -> ProcessRecord {
    let sample = |(attempts, rss_kb, fds)| Sample {
        attempts,
        rss_kb,
        fds,
    };
    ProcessRecord {
        name: name.into(),
        pid,
        survived: true,
        exited: Some("exit status: 0".into()),
        on_purpose: true,
        max_rss_kb: warm.1.max(last.1),
        max_fds: warm.2.max(last.2),
        warm: Some(sample(warm)),
        last: Some(sample(last)),
        ..Default::default()
    }
}

/// The (check, subject) pairs the checker reports.
fn named(h: &History) -> Vec<(&'static str, String)> {
    let mut v: Vec<_> = check(h).into_iter().map(|v| (v.check, v.subject)).collect();
    v.sort();
    v.dedup();
    v
}

#[test]
fn a_clean_history_has_no_violations() {
    assert_eq!(check(&clean()), vec![]);
}

/// Issue 12 item 1's loss: the retried job shows `succeeded` under token 2, while the store holds
/// only token 1's `dead` (the ack by job id erased token 2's pending result).
#[test]
fn a_lost_result_is_named() {
    let mut h = clean();
    h.submitted.push(job("c", "flaky"));
    h.effects.push(fx(Event::Start, "c", 1, 1, 5000));
    h.effects.push(fx(Event::Exit(1), "c", 1, 1, 5010));
    h.retries.push(("c".into(), 6000));
    h.effects.push(fx(Event::Start, "c", 1, 2, 7000));
    h.effects.push(fx(Event::Effect, "c", 1, 2, 7010));
    h.jobs.insert(
        "c".into(),
        FinalJob {
            state: "succeeded".into(),
            token: 2,
            attempts: 1,
            max_attempts: 1,
            history: vec![(1, Some("failed".into())), (2, Some("succeeded".into()))],
            ..FinalJob::default()
        },
    );
    h.applied.push(applied("c", 1, "dead"));
    assert_eq!(named(&h), vec![(RESULT_NOT_APPLIED, "c".to_owned())]);
}

/// A job the store applied with another state than the queue's (a retried-then-cancelled job
/// that kept its token: its `cancelled` deduplicated as the earlier `dead`).
#[test]
fn a_current_result_applied_with_another_state_is_named() {
    let mut h = clean();
    h.jobs.get_mut("a").unwrap().state = "cancelled".into();
    assert_eq!(named(&h), vec![(RESULT_NOT_APPLIED, "a".to_owned())]);
}

#[test]
fn a_double_application_is_named() {
    let mut h = clean();
    h.applied.push(applied("b", 1, "succeeded"));
    assert_eq!(named(&h), vec![(DOUBLE_APPLICATION, "b".to_owned())]);

    // The same success under two tokens: a late result of a superseded lease applied as well.
    let mut h = clean();
    h.effects.push(fx(Event::Start, "a", 2, 2, 50));
    h.effects.push(fx(Event::Effect, "a", 2, 2, 60));
    let a = h.jobs.get_mut("a").unwrap();
    a.token = 2;
    a.history = vec![(1, Some("stale".into())), (2, Some("succeeded".into()))];
    h.applied.push(applied("a", 2, "succeeded"));
    let got = named(&h);
    assert!(
        got.contains(&(DOUBLE_APPLICATION, "a".to_owned())),
        "{got:?}"
    );
    assert!(
        got.contains(&(SUPERSEDED_TOKEN_APPLIED, "a".to_owned())),
        "{got:?}"
    );
}

#[test]
fn two_lock_holders_at_once_are_named() {
    let mut h = History::default();
    for (id, token, from, to) in [
        ("x", 4, 1000, 3000),
        ("y", 9, 2500, 4000),
        ("z", 2, 4100, 5000),
    ] {
        let mut s = job(id, "locked");
        s.lock = Some("soak-lock-0".into());
        h.submitted.push(s);
        ran_ok(&mut h, id, token, from);
        h.effects.push(fx(Event::Tick, id, 1, token, to));
        h.applied.push(applied(id, token, "succeeded"));
    }
    assert_eq!(
        named(&h),
        vec![
            (TWO_LOCK_HOLDERS, "x".to_owned()),
            (TWO_LOCK_HOLDERS, "y".to_owned())
        ]
    );
    // Other locks and the same holder's own lines never count as a second holder.
    h.submitted[1].lock = Some("soak-lock-1".into());
    assert_eq!(check(&h), vec![]);
}

#[test]
fn attempts_over_max_are_named() {
    let mut h = clean();
    h.jobs.get_mut("a").unwrap().attempts = 4;
    assert_eq!(named(&h), vec![(ATTEMPTS_OVER_MAX, "a".to_owned())]);

    // Four starts in one budget of three, though the queue's counter says 1.
    let mut h = clean();
    for token in 2..=4 {
        h.effects
            .push(fx(Event::Start, "b", 1, token, 2000 + token as i64));
    }
    assert_eq!(named(&h), vec![(ATTEMPTS_OVER_MAX, "b".to_owned())]);
    // A `jobs retry` in between starts a new budget.
    h.retries.push(("b".into(), 2002));
    assert_eq!(check(&h), vec![]);
}

#[test]
fn a_non_idempotent_rerun_without_a_recovery_decision_is_named() {
    let mut h = clean();
    h.submitted[0].idempotent = false;
    h.effects.push(fx(Event::Start, "a", 2, 2, 40));
    let a = h.jobs.get_mut("a").unwrap();
    a.token = 2;
    a.history = vec![(1, Some("stale".into())), (2, Some("succeeded".into()))];
    h.applied.retain(|a| a.job != "a");
    h.applied
        .extend([applied("a", 1, "stale"), applied("a", 2, "succeeded")]);
    h.effects
        .retain(|e| !(e.job == "a" && e.token == 1 && e.event == Event::Effect));
    h.effects.push(fx(Event::Effect, "a", 2, 2, 45));
    assert_eq!(named(&h), vec![(NON_IDEMPOTENT_RERUN, "a".to_owned())]);
    h.retries.push(("a".into(), 30));
    assert_eq!(check(&h), vec![]);
}

#[test]
fn a_lost_or_unsettled_or_stuck_job_is_named() {
    let mut h = clean();
    h.submitted.push(job("gone", "short"));
    h.submitted.push(job("q", "short"));
    h.jobs.insert(
        "q".into(),
        FinalJob {
            state: "queued".into(),
            ..FinalJob::default()
        },
    );
    h.submitted.push(job("r", "long"));
    h.jobs.insert(
        "r".into(),
        FinalJob {
            state: "running".into(),
            token: 1,
            heartbeat_age_ms: Some(9000),
            ..FinalJob::default()
        },
    );
    h.submitted.push(job("s", "nonidem"));
    h.jobs.insert(
        "s".into(),
        FinalJob {
            state: "stale".into(),
            token: 1,
            recovery_available: true,
            ..FinalJob::default()
        },
    );
    h.applied.push(applied("s", 1, "stale"));
    assert_eq!(
        named(&h),
        vec![
            (LOST_JOB, "gone".to_owned()),
            (NOT_SETTLED, "q".to_owned()),
            (STUCK_RUNNING, "r".to_owned())
        ]
    );
}

#[test]
fn duplicate_effects_and_effectless_successes_are_named() {
    let mut h = clean();
    h.effects.push(fx(Event::Effect, "a", 1, 1, 15));
    h.effects
        .retain(|e| !(e.job == "b" && e.event == Event::Effect));
    assert_eq!(
        named(&h),
        vec![
            (APPLIED_WITHOUT_EFFECT, "b".to_owned()),
            (DUPLICATE_EFFECT, "a".to_owned())
        ]
    );
}

#[test]
fn a_silent_death_is_named() {
    let mut h = clean();
    h.processes.push(ProcessRecord {
        name: "worker-1#1".into(),
        pid: 11,
        exited: Some("signal 13".into()),
        ..Default::default()
    });
    h.processes.push(ProcessRecord {
        name: "serve#1".into(),
        pid: 12,
        exited: Some("signal 9".into()),
        on_purpose: true,
        ..Default::default()
    });
    assert_eq!(named(&h), vec![(SILENT_DEATH, "worker-1#1".to_owned())]);
}

/// Growth from the warm sample to the last, per the work in between: a survivor that grew
/// within the slack plus the per-1 000-attempts allowance passes (however large it is); one
/// that grew past it is named, by process, with what grew; a process that did not survive,
/// or was never sampled after its warm-up, is not judged.
#[test]
fn resource_growth_past_the_bound_for_the_work_is_named_by_process() {
    let mut h = clean();
    // 10 000 attempts: 8 + 10 MiB and 10 + 20 fds allowed; a large but flat process passes.
    h.processes.push(survivor(
        "worker-1#1",
        11,
        (0, 400_000, 200),
        (10_000, 400_000 + 18 * 1024, 230),
    ));
    assert_eq!(check(&h), vec![]);

    // One KiB over the RSS bound for its 10 000 attempts.
    h.processes.push(survivor(
        "serve#1",
        12,
        (0, 30_000, 20),
        (10_000, 30_000 + 18 * 1024 + 1, 20),
    ));
    // Fds: 500 attempts allow 10 + 1; it gained 12 (one per ~40 jobs: a leak).
    h.processes.push(survivor(
        "worker-2#3",
        13,
        (1000, 30_000, 20),
        (1500, 30_000, 32),
    ));
    // The same growth in a process killed mid-run, or one never sampled after its warm-up, is
    // not judged.
    let mut killed = survivor("worker-0#2", 14, (0, 30_000, 20), (10_000, 900_000, 900));
    killed.survived = false;
    h.processes.push(killed);
    let mut cold = survivor("worker-0#3", 15, (0, 30_000, 20), (10_000, 900_000, 900));
    cold.warm = None;
    h.processes.push(cold);

    let found = check(&h);
    assert_eq!(
        named(&h),
        vec![
            (RESOURCES_UNBOUNDED, "serve#1".to_owned()),
            (RESOURCES_UNBOUNDED, "worker-2#3".to_owned())
        ]
    );
    let serve = found.iter().find(|v| v.subject == "serve#1").unwrap();
    assert!(
        serve.detail.contains("RSS grew 18433 KiB") && serve.detail.contains("bound 18432 KiB"),
        "{}",
        serve.detail
    );
    assert!(!serve.detail.contains("fds"), "{}", serve.detail);
    let worker = found.iter().find(|v| v.subject == "worker-2#3").unwrap();
    assert!(
        worker
            .detail
            .contains("open fds grew 12 (20 → 32), bound 11")
            && worker.detail.contains("over 500 attempts"),
        "{}",
        worker.detail
    );
}

#[test]
fn one_key_answered_with_two_jobs_is_named() {
    let mut h = clean();
    h.key_returns = vec![("k".into(), "a".into()), ("k".into(), "a".into())];
    assert_eq!(check(&h), vec![]);
    h.key_returns.push(("k".into(), "b".into()));
    assert_eq!(
        named(&h),
        vec![
            (IDEMPOTENCY_KEY_SPLIT, "a".to_owned()),
            (IDEMPOTENCY_KEY_SPLIT, "b".to_owned())
        ]
    );
}
