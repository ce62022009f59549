//! The job envelope, its states, leases and attempt history (DESIGN §4).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use skillforge_runner::{PayloadError, RunOutcome, RunnerPayload};

/// Default heartbeat period (DESIGN §4).
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(2);
/// Default stale threshold: a lease with no heartbeat for this long is stale (DESIGN §4).
pub const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(15);
/// Default number of attempts, the first run included (DESIGN §4).
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
/// Default job timeout when none is given.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3600);
/// Default queue name.
pub const DEFAULT_QUEUE: &str = "default";

/// What a producer asks for: everything needed to run a job, before it has an id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    /// Explicit queue name (never derived from a Rust type name), e.g. `"default"`, `"verify"`.
    pub queue: String,
    /// Workflow family this job belongs to, e.g. `"adhoc"`, `"train"`, `"verify"`.
    pub workflow: String,
    /// Stage inside the workflow, e.g. `"optimizer"`.
    pub stage: String,
    /// Runner kind that executes it, e.g. `"process"`, `"sandbox"`.
    pub kind: String,
    /// Runner-specific payload.
    pub payload: serde_json::Value,
    /// Deduplication key: a second enqueue with the same key returns the first job.
    pub idempotency_key: Option<String>,
    /// Total attempts allowed, the first included (≥ 1).
    pub max_attempts: u32,
    /// Wall-clock budget per attempt, in milliseconds.
    pub timeout_ms: u64,
    /// Heartbeat period of the running attempt, in milliseconds.
    pub heartbeat_ms: u64,
    /// A lease with no heartbeat for this long (milliseconds) is stale.
    pub stale_after_ms: u64,
    /// Whether re-running the stage after a stale lease is safe. Non-idempotent stages are
    /// parked as `stale` with recovery available instead of being re-queued.
    pub idempotent: bool,
    /// Earliest start, milliseconds since the Unix epoch; `None` = now.
    pub not_before_ms: Option<i64>,
    /// Whether a run that completed without passing (non-zero exit, timeout, signal) is retried.
    /// `false` for checks whose failing result is itself the answer (a verifier's fail verdict):
    /// such a run ends `failed` at once. A dead worker's lease is recovered either way.
    #[serde(default = "retry_failed_runs_default")]
    pub retry_failed_runs: bool,
    /// Named resource locks the running attempt holds (e.g. `skillopt-train:<session>` for one
    /// optimizer per train session). The worker takes them before the runner starts (waiting,
    /// with the lease heartbeating, while another holder has them), renews them with every
    /// heartbeat and releases them when the attempt ends; a dead worker's locks go stale
    /// after `stale_after` like its lease.
    #[serde(default)]
    pub locks: Vec<String>,
    /// Files the job carries by content (inputs placed in its job dir, output dirs uploaded
    /// after the run): see [`crate::transfer`]. Empty (and absent from the JSON) for jobs whose
    /// inputs ride in the payload.
    #[serde(default, skip_serializing_if = "crate::transfer::JobFiles::is_empty")]
    pub files: crate::transfer::JobFiles,
    /// Labels a worker must advertise to lease this job (`key=value` or a bare `key`, e.g.
    /// `os=linux`, `gpu`, `tool:git`): see [`crate::labels`]. Empty = any worker.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<String>,
    /// The W3C `traceparent` of the job's enqueue span (`00-<trace>-<span>-<flags>`), which
    /// the worker's attempt and the control plane's apply spans are children of: one trace per
    /// job (issue 36 item 3; [`crate::telemetry`]). `None`, and absent from every stored form,
    /// while telemetry is off. Not part of [`JobSpec::disagreement_with`]'s checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

impl JobSpec {
    /// Which field the control plane relies on at ingestion differs between this spec (read
    /// back from the queue) and `recorded` (the one the control plane recorded when it enqueued
    /// the job), or `None` when they agree: runner kind, workflow, stage, idempotency key,
    /// files, and the payload apart from its `env` (which a control plane replaces when it
    /// starts a job again with the current environment: `jobs retry --env`, a keyed submit
    /// restarting a job that could not run). Anyone with queue access can rewrite a queued spec;
    /// a disagreement means it was (issue 32 item 7).
    pub fn disagreement_with(&self, recorded: &JobSpec) -> Option<&'static str> {
        let without_env = |payload: &serde_json::Value| {
            let mut p = payload.clone();
            if let Some(obj) = p.as_object_mut() {
                obj.remove("env");
            }
            p
        };
        if self.kind != recorded.kind {
            Some("runner kind")
        } else if self.workflow != recorded.workflow || self.stage != recorded.stage {
            Some("workflow or stage")
        } else if self.idempotency_key != recorded.idempotency_key {
            Some("idempotency key")
        } else if self.files != recorded.files {
            Some("files")
        } else if without_env(&self.payload) != without_env(&recorded.payload) {
            Some("payload")
        } else {
            None
        }
    }
}

fn retry_failed_runs_default() -> bool {
    true
}

impl JobSpec {
    /// A spec with the engine defaults running `payload` on its runner ([`RunnerPayload::KIND`]).
    ///
    /// # Errors
    /// [`PayloadError`] when the payload does not serialize (never a `null` payload).
    pub fn for_payload<P: RunnerPayload>(payload: &P) -> Result<Self, PayloadError> {
        Ok(Self::new(P::KIND, payload.to_json()?))
    }

    /// A spec with the engine defaults for the given runner kind and payload.
    pub fn new(kind: impl Into<String>, payload: serde_json::Value) -> Self {
        Self {
            queue: DEFAULT_QUEUE.to_owned(),
            workflow: "adhoc".to_owned(),
            stage: "run".to_owned(),
            kind: kind.into(),
            payload,
            idempotency_key: None,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            timeout_ms: DEFAULT_TIMEOUT.as_millis() as u64,
            heartbeat_ms: DEFAULT_HEARTBEAT.as_millis() as u64,
            stale_after_ms: DEFAULT_STALE_AFTER.as_millis() as u64,
            idempotent: true,
            not_before_ms: None,
            retry_failed_runs: true,
            locks: Vec::new(),
            files: crate::transfer::JobFiles::default(),
            requires: Vec::new(),
            traceparent: None,
        }
    }
}

/// Job states (DESIGN §4). Terminal: `succeeded`, `failed`, `dead`, `cancelled`.
/// `stale` is parked: a non-idempotent job whose lease went stale, awaiting recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting to be leased (possibly delayed until `not_before`).
    Queued,
    /// Leased by a worker.
    Running,
    /// Finished and passed.
    Succeeded,
    /// Finished without a retry: the runner could not run it (not runnable, invalid payload).
    Failed,
    /// Dead-lettered: every attempt was used.
    Dead,
    /// Cancelled by an operator.
    Cancelled,
    /// Lease went stale on a non-idempotent stage: `recovery_available`.
    Stale,
}

impl JobState {
    /// Every state, in display order.
    pub const ALL: [JobState; 7] = [
        JobState::Queued,
        JobState::Running,
        JobState::Succeeded,
        JobState::Failed,
        JobState::Dead,
        JobState::Cancelled,
        JobState::Stale,
    ];

    /// Stable lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
            JobState::Dead => "dead",
            JobState::Cancelled => "cancelled",
            JobState::Stale => "stale",
        }
    }

    /// True for states no worker will move out of on its own.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Succeeded | JobState::Failed | JobState::Dead | JobState::Cancelled
        )
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for JobState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobState::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| {
                format!("unknown job state `{s}` (expected queued, running, succeeded, failed, dead, cancelled or stale)")
            })
    }
}

/// Who holds a lease: unique per process (`name-<random suffix>`), plus host and pid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerIdentity {
    /// `NAME-xxxxxxxx`: the operator's name plus a random suffix, so two workers started with
    /// the same `--name` never share an identity.
    pub worker_id: String,
    /// Hostname of the worker's machine.
    pub host: String,
    /// Process id of the worker.
    pub pid: u32,
}

impl WorkerIdentity {
    /// A fresh identity for this process: `name` plus an 8-hex-digit random suffix.
    pub fn new(name: &str) -> Self {
        let suffix: u32 = rand::random();
        let host = hostname::get()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "unknown-host".to_owned());
        Self {
            worker_id: format!("{name}-{suffix:08x}"),
            host,
            pid: std::process::id(),
        }
    }
}

/// A lease on a job or a named resource (DESIGN §4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lease {
    /// Holder's worker id.
    pub owner_worker: String,
    /// Holder's host.
    pub owner_host: String,
    /// Holder's pid.
    pub owner_pid: u32,
    /// Strictly increasing per job (or per lock name); a result must carry the current one.
    pub fencing_token: u64,
    /// When the lease was taken, ms since the Unix epoch.
    pub acquired_at_ms: i64,
    /// Last heartbeat, ms since the Unix epoch.
    pub heartbeat_at_ms: i64,
}

/// One attempt in a job's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptRecord {
    /// 1-based attempt number.
    pub attempt: u32,
    /// Fencing token this attempt ran under.
    pub fencing_token: u64,
    /// Worker that ran it.
    pub worker: String,
    /// Its host.
    pub host: String,
    /// Its pid.
    pub pid: u32,
    /// Start, ms since the Unix epoch.
    pub started_at_ms: i64,
    /// End (result, stale detection, release or cancel), ms since the Unix epoch.
    pub ended_at_ms: Option<i64>,
    /// How it ended: `succeeded`, `failed`, `timed_out`, `killed`, `not_runnable`, `censored`,
    /// `stale`, `released`, `cancelled`, `error`.
    pub result: Option<String>,
    /// Delay before the next attempt, milliseconds, when one was scheduled.
    pub retry_delay_ms: Option<u64>,
}

/// A job as stored by a backend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// Job id (UUID v7 text).
    pub id: String,
    /// What was asked for.
    pub spec: JobSpec,
    /// Current state.
    pub state: JobState,
    /// Attempts started so far (a stale recovery counts as one).
    pub attempts: u32,
    /// Current fencing token (0 before the first lease).
    pub fencing_token: u64,
    /// The active lease, when running.
    pub lease: Option<Lease>,
    /// Earliest next start while queued, ms since the Unix epoch.
    pub not_before_ms: i64,
    /// Creation time, ms since the Unix epoch.
    pub created_at_ms: i64,
    /// Last state change, ms since the Unix epoch.
    pub updated_at_ms: i64,
    /// An operator asked to cancel while it was running.
    pub cancel_requested: bool,
    /// Set when a non-idempotent job's lease went stale: `train recover` / `jobs retry` can act.
    pub recovery_available: bool,
    /// Outcome of the last finished attempt.
    pub outcome: Option<RunOutcome>,
    /// Error text when the runner could not run the job.
    pub error: Option<String>,
    /// Every attempt, oldest first.
    pub history: Vec<AttemptRecord>,
}

/// A job handed to a worker together with its lease.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeasedJob {
    /// The job, state `running`, with `lease` set.
    pub job: Job,
    /// The fencing token of this lease (equal to `job.fencing_token`).
    pub fencing_token: u64,
}

/// How a finished attempt moves the job (computed by the engine, applied by the backend).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finish {
    /// Next state: `succeeded`, `failed`, `dead`, `cancelled`, or `queued` for a retry.
    pub next: JobState,
    /// Delay before the retry when `next` is `queued`, in milliseconds.
    pub retry_delay_ms: u64,
    /// Short label for the attempt history (e.g. `failed`, `timed_out`).
    pub attempt_result: String,
    /// The runner's outcome, when it ran.
    pub outcome: Option<RunOutcome>,
    /// Error text when the runner could not run the job.
    pub error: Option<String>,
}

/// A lease whose heartbeat deadline has passed, as seen by the reaper before it acts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExpiredLease {
    /// The job.
    pub job_id: String,
    /// Token of the expired lease (the reap is fenced on it).
    pub fencing_token: u64,
    /// Attempts started so far.
    pub attempts: u32,
    /// Attempts allowed.
    pub max_attempts: u32,
    /// Whether the stage may be re-run.
    pub idempotent: bool,
    /// Whether an operator asked to cancel it.
    pub cancel_requested: bool,
}

/// What a heartbeat learned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HeartbeatReply {
    /// Lease renewed.
    Renewed,
    /// Lease renewed, and an operator asked to cancel: stop the runner.
    CancelRequested,
    /// The lease is no longer ours (stale and reaped, or finished elsewhere): stop at once.
    LeaseLost,
}

/// What applying a finish learned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum FinishReply {
    /// Applied; the job is now in this state.
    Applied(JobState),
    /// Rejected: the lease was superseded (the job's token is now `current_token`) or the job
    /// is no longer running under this token.
    Fenced {
        /// The job's current fencing token.
        current_token: u64,
    },
}

/// Result of an enqueue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enqueued {
    /// The job id (the existing one when the idempotency key was seen before).
    pub job_id: String,
    /// False when an existing job with the same idempotency key was returned.
    pub created: bool,
}

/// Result of a cancel request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CancelReply {
    /// It was queued or stale; it is now `cancelled`.
    Cancelled,
    /// It is running; the worker learns at its next heartbeat and kills it.
    Requested,
    /// It had already ended in this state; nothing changed.
    AlreadyTerminal(JobState),
}

/// Status of a lease or named lock as `skillforge locks` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeaseStatus {
    /// Heartbeat within its period.
    Active,
    /// Heartbeat older than its period but not yet past `stale_after`.
    ActiveExpiredHeartbeat,
    /// Past `stale_after`; the reaper will free it.
    Stale,
}

/// Kind of a row in `skillforge locks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeaseKind {
    /// A running job's lease.
    Job,
    /// A named resource lock (e.g. `skillopt-train:<session>:optimizer`).
    Lock,
}

/// One active lease or named lock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaseView {
    /// Job or lock.
    pub kind: LeaseKind,
    /// Job id or lock name.
    pub name: String,
    /// The lease.
    pub lease: Lease,
    /// Heartbeat period, ms.
    pub heartbeat_ms: u64,
    /// Stale threshold, ms.
    pub stale_after_ms: u64,
}

impl LeaseView {
    /// Status at time `now_ms` (ms since the Unix epoch).
    pub fn status(&self, now_ms: i64) -> LeaseStatus {
        let age = now_ms.saturating_sub(self.lease.heartbeat_at_ms).max(0) as u64;
        if age > self.stale_after_ms {
            LeaseStatus::Stale
        } else if age > self.heartbeat_ms.saturating_mul(2) {
            LeaseStatus::ActiveExpiredHeartbeat
        } else {
            LeaseStatus::Active
        }
    }
}

/// Result of trying to take a named lock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum LockAcquire {
    /// Taken; renew with this fencing token.
    Acquired {
        /// Token of the new lease (strictly increasing per lock name).
        fencing_token: u64,
    },
    /// Someone else holds it and it is not stale.
    Held(Lease),
}

/// Current time in ms since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A new job id: UUID v7 (time-ordered) as text.
pub fn new_job_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

#[cfg(test)]
mod tests {
    use super::JobSpec;

    /// What the control plane relies on must agree with its record; `env` and the fields a
    /// queue may normalise (queue, timings, not_before) may differ.
    #[test]
    fn a_queued_spec_disagrees_with_the_record_only_where_the_control_plane_relies_on_it() {
        let recorded = {
            let mut s = JobSpec::new(
                "agent",
                serde_json::json!({"transcript_path": "@job_dir@/meta/t.jsonl", "env": {"A": "1"}}),
            );
            s.workflow = "evalloop".into();
            s.idempotency_key = Some("k".into());
            s.files.outputs.push(crate::transfer::OutputDir {
                dir: "meta".into(),
                deliver_to: "/h/eval/s1/meta".into(),
            });
            s
        };
        let check = |change: &dyn Fn(&mut JobSpec), expected: Option<&str>| {
            let mut queued = recorded.clone();
            change(&mut queued);
            assert_eq!(queued.disagreement_with(&recorded), expected);
        };
        check(&|_| {}, None);
        check(&|s| s.payload["env"]["A"] = "2".into(), None);
        check(&|s| s.payload["env"]["B"] = "new".into(), None);
        check(&|s| s.queue = "default@gpu".into(), None);
        check(&|s| s.max_attempts = 9, None);
        check(
            &|s| s.payload["transcript_path"] = "/root/.ssh/t.jsonl".into(),
            Some("payload"),
        );
        check(
            &|s| s.files.outputs[0].deliver_to = "/root/.ssh".into(),
            Some("files"),
        );
        check(&|s| s.kind = "process".into(), Some("runner kind"));
        check(&|s| s.stage = "judge".into(), Some("workflow or stage"));
        check(&|s| s.idempotency_key = None, Some("idempotency key"));
    }
}
