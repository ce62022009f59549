//! Attempt and backoff policy: what a finished or stale attempt turns into, decided once for every backend.

use std::time::Duration;

use rand::Rng;
use skillforge_runner::{ExitClass, RunOutcome};

use crate::backend::ReapAction;
use crate::job::{ExpiredLease, Finish, JobState};

/// Base delay of the exponential backoff (DESIGN §4: "starting at 1 s").
pub const BACKOFF_BASE: Duration = Duration::from_secs(1);
/// Ceiling of the backoff.
pub const BACKOFF_CAP: Duration = Duration::from_secs(300);

/// Backoff before attempt `attempt + 1`, after `attempt` (1-based) attempts have been used.
///
/// Exponential with "equal jitter": the nominal delay is `base · 2^(attempt−1)` (capped), and
/// the returned delay is uniform in `(nominal/2, nominal]`. Successive delays therefore grow
/// strictly (each interval lies above the previous one) while retries of many jobs spread out.
pub fn backoff(attempt: u32) -> Duration {
    backoff_with(attempt, rand::rng().random::<f64>())
}

/// [`backoff`] with the jitter draw `u` in `[0, 1)` given, for tests.
pub fn backoff_with(attempt: u32, u: f64) -> Duration {
    let exp = attempt.saturating_sub(1).min(20);
    let nominal = BACKOFF_BASE
        .saturating_mul(1u32 << exp)
        .min(BACKOFF_CAP)
        .as_secs_f64();
    let half = nominal / 2.0;
    Duration::from_secs_f64(half + half * (1.0 - u.clamp(0.0, 1.0 - f64::EPSILON)))
}

/// Whether a run that ended this way is worth another attempt.
///
/// `not_runnable` is not retried (running it again cannot help); everything else that did not
/// pass is.
pub fn is_retryable(exit: &ExitClass) -> bool {
    !matches!(exit, ExitClass::Passed | ExitClass::NotRunnable { .. })
}

/// What a finished attempt does to the job.
///
/// * passed ⇒ `succeeded`;
/// * cancelled by the operator ⇒ `cancelled`;
/// * not runnable, or the runner refused the job (`Err`) ⇒ `failed` (no retry);
/// * any other non-passing run of a job with `retry_failed_runs = false` ⇒ `failed`;
/// * otherwise, with attempts left ⇒ `queued` after [`backoff`]; without ⇒ `dead`.
pub fn finish_for(
    attempts: u32,
    max_attempts: u32,
    result: Result<RunOutcome, String>,
    was_cancelled: bool,
    retry_failed_runs: bool,
) -> Finish {
    match result {
        Err(error) => Finish {
            next: if was_cancelled {
                JobState::Cancelled
            } else {
                JobState::Failed
            },
            retry_delay_ms: 0,
            attempt_result: "error".to_owned(),
            outcome: None,
            error: Some(error),
        },
        Ok(outcome) => {
            let label = outcome.exit.label().to_owned();
            let (next, delay) = if outcome.exit.is_passed() {
                (JobState::Succeeded, Duration::ZERO)
            } else if was_cancelled {
                (JobState::Cancelled, Duration::ZERO)
            } else if !retry_failed_runs || !is_retryable(&outcome.exit) {
                (JobState::Failed, Duration::ZERO)
            } else if attempts < max_attempts {
                (JobState::Queued, backoff(attempts))
            } else {
                (JobState::Dead, Duration::ZERO)
            };
            Finish {
                next,
                retry_delay_ms: delay.as_millis() as u64,
                attempt_result: if was_cancelled && !outcome.exit.is_passed() {
                    "cancelled".to_owned()
                } else {
                    label
                },
                outcome: Some(outcome),
                error: None,
            }
        }
    }
}

/// What the reaper does with an expired lease. The stale attempt counts as an attempt, but the
/// job is due again at once: its worker died, the job did not fail, so there is nothing to back
/// off from (and recovery time is `stale_after` plus one reaper period, not plus a backoff).
pub fn reap_action_for(lease: &ExpiredLease) -> ReapAction {
    if lease.cancel_requested {
        ReapAction::Cancelled
    } else if !lease.idempotent {
        ReapAction::RecoveryAvailable
    } else if lease.attempts < lease.max_attempts {
        ReapAction::Requeue {
            delay: Duration::ZERO,
        }
    } else {
        ReapAction::Dead
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_strictly_whatever_the_jitter() {
        for attempt in 1..8 {
            let hi_prev = backoff_with(attempt, 0.0);
            let lo_next = backoff_with(attempt + 1, 0.999_999);
            assert!(
                lo_next > hi_prev,
                "attempt {attempt}: {lo_next:?} <= {hi_prev:?}"
            );
        }
        assert_eq!(backoff_with(1, 0.0), Duration::from_secs(1));
        assert!(backoff_with(1, 0.999) > Duration::from_millis(500));
        assert!(backoff_with(40, 0.0) <= BACKOFF_CAP);
    }

    fn outcome(exit: ExitClass) -> RunOutcome {
        RunOutcome {
            exit,
            exit_code: None,
            duration_ms: 1,
            stdout_tail: String::new(),
            stderr_tail: String::new(),
            detail: serde_json::Value::Null,
        }
    }

    #[test]
    fn finish_table() {
        let cases = [
            (1, 3, ExitClass::Passed, false, JobState::Succeeded),
            (1, 3, ExitClass::Failed { code: 1 }, false, JobState::Queued),
            (3, 3, ExitClass::Failed { code: 1 }, false, JobState::Dead),
            (1, 3, ExitClass::TimedOut, false, JobState::Queued),
            (
                1,
                3,
                ExitClass::NotRunnable { reason: "x".into() },
                false,
                JobState::Failed,
            ),
            (
                1,
                3,
                ExitClass::Killed { signal: 15 },
                true,
                JobState::Cancelled,
            ),
            (1, 1, ExitClass::Killed { signal: 9 }, false, JobState::Dead),
        ];
        for (attempts, max, exit, cancelled, want) in cases {
            let got = finish_for(attempts, max, Ok(outcome(exit.clone())), cancelled, true);
            assert_eq!(got.next, want, "{exit:?} at {attempts}/{max}");
            assert_eq!(got.retry_delay_ms > 0, want == JobState::Queued);
        }
        let err = finish_for(1, 3, Err("bad payload".into()), false, true);
        assert_eq!(err.next, JobState::Failed);
        let verdict = finish_for(
            1,
            3,
            Ok(outcome(ExitClass::Failed { code: 1 })),
            false,
            false,
        );
        assert_eq!(
            verdict.next,
            JobState::Failed,
            "a check's failing answer is not retried"
        );
        let passed = finish_for(1, 3, Ok(outcome(ExitClass::Passed)), false, false);
        assert_eq!(passed.next, JobState::Succeeded);
    }

    #[test]
    fn reap_table() {
        let mut lease = ExpiredLease {
            job_id: "j".into(),
            fencing_token: 1,
            attempts: 1,
            max_attempts: 3,
            idempotent: true,
            cancel_requested: false,
        };
        assert_eq!(
            reap_action_for(&lease),
            ReapAction::Requeue {
                delay: Duration::ZERO
            }
        );
        lease.attempts = 3;
        assert_eq!(reap_action_for(&lease), ReapAction::Dead);
        lease.idempotent = false;
        assert_eq!(reap_action_for(&lease), ReapAction::RecoveryAvailable);
        lease.cancel_requested = true;
        assert_eq!(reap_action_for(&lease), ReapAction::Cancelled);
    }
}
