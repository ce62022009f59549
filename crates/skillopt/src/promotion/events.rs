//! Typed promotion events and their sinks (seed: SkillOpt, "Promotion policy + notifications";
//! S-52, S-61, S-73): `candidate.awaiting_promotion`, `candidate.auto_promoted`,
//! `candidate.canary_started`, `candidate.rolled_back`, `candidate.canary_graduated`,
//! `candidate.promoted`, `candidate.rejected`, `live_ab_skipped`.
//!
//! An event carries ids and a redacted [`Detail`] — scalars and a short reason, never template
//! content, prompts or answers — so it is safe to send to any sink. Sinks under `[events]`: a
//! JSONL file (one line per event, appended), a Redis stream (`XADD <stream> * event <name>
//! payload <json>`), and an HTTP webhook whose body is signed with HMAC-SHA256
//! (`X-Skillforge-Signature-256: sha256=<hex>`) and sent by a durable `process` job running
//! `curl`, so a failed delivery is retried by the engine.

use std::io::Write;
use std::path::{Path, PathBuf};

use hmac::{Hmac, KeyInit, Mac};
use serde::Serialize;
use sha2::Sha256;
use skillforge_engine::JobSpec;
use skillforge_runner::PayloadError;
use skillforge_runner_process::ProcessPayload;

use skillforge_stage::StageDef;

/// Longest reason text kept in an event's detail (characters).
pub const MAX_REASON_CHARS: usize = 200;
/// The reason of a `candidate.canary_started` event of a canary started by hand (`candidate
/// canary`): its graduation is `candidate.canary_graduated`, not `candidate.auto_promoted`.
pub const HAND_STARTED_REASON: &str = "started by hand";
/// Header carrying a webhook body's signature.
pub const SIGNATURE_HEADER: &str = "X-Skillforge-Signature-256";
/// Default Redis stream key.
pub const DEFAULT_STREAM: &str = "skillforge:events";
/// Workflow of webhook delivery jobs.
pub const EVENTS_WORKFLOW: &str = "events";

/// The event types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum EventKind {
    /// A candidate became pending (always, when `[events]` is configured; S-52).
    #[serde(rename = "candidate.awaiting_promotion")]
    AwaitingPromotion,
    /// A candidate became current automatically (direct, or a graduated canary; S-52, S-61).
    #[serde(rename = "candidate.auto_promoted")]
    AutoPromoted,
    /// A candidate went to a canary behind the champion (S-60).
    #[serde(rename = "candidate.canary_started")]
    CanaryStarted,
    /// A canary was rejected on a material regression (S-61).
    #[serde(rename = "candidate.rolled_back")]
    RolledBack,
    /// A canary started by hand (`candidate canary`) graduated on its window: promoted on evidence,
    /// but not automatically chosen (issue 37 item 11).
    #[serde(rename = "candidate.canary_graduated")]
    CanaryGraduated,
    /// A candidate promoted by hand (`candidate promote`; issue 37 item 11).
    #[serde(rename = "candidate.promoted")]
    Promoted,
    /// A candidate rejected by hand (`candidate reject`; issue 37 item 11).
    #[serde(rename = "candidate.rejected")]
    Rejected,
    /// A live A/B fell back to the champion answer (S-73).
    #[serde(rename = "live_ab_skipped")]
    LiveAbSkipped,
}

impl EventKind {
    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::AwaitingPromotion => "candidate.awaiting_promotion",
            EventKind::AutoPromoted => "candidate.auto_promoted",
            EventKind::CanaryStarted => "candidate.canary_started",
            EventKind::RolledBack => "candidate.rolled_back",
            EventKind::CanaryGraduated => "candidate.canary_graduated",
            EventKind::Promoted => "candidate.promoted",
            EventKind::Rejected => "candidate.rejected",
            EventKind::LiveAbSkipped => "live_ab_skipped",
        }
    }
}

/// The redacted detail: only these fields exist, so nothing else can leak.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Detail {
    /// The candidate's `summary.score`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Auto-trace samples read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<u64>,
    /// P(challenger > champion), when the arms exist.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// Whether a real-CI positive was seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_ci: Option<bool>,
    /// The canary's sample.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary_sample: Option<f64>,
    /// Auto-trace events recording a merge that passed real external CI (S-58).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub real_ci_positives: Option<u64>,
    /// The challenger arm's pulls behind `confidence` (S-63).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pulls: Option<u64>,
    /// The guardrail that stopped the candidate (`auto_promote_min_samples`, …; `passed` when none
    /// did), on `candidate.awaiting_promotion` (issue 37 item 11).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guardrail: Option<String>,
    /// The canary's window: positive outcomes and all outcomes since it started, and their rate in [0,1].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary_outcomes: Option<WindowCounts>,
    /// The champion's outcomes over the same window, and their rate in [0,1].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub champion_outcomes: Option<WindowCounts>,
    /// The PACE gate's state (wealth, discordant pairs, verdict and why), when `pace_enabled` is
    /// on and it was read (issue 34 item 10).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pace: Option<skillforge_contract::pace::PaceReport>,
    /// The accepted replay gate run the promotion rests on, when `gate_enabled` is on (issue 34 item 11).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate_run: Option<String>,
    /// Why (cut to [`MAX_REASON_CHARS`]).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// Outcomes of one side of a canary window, as a decision event carries them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct WindowCounts {
    /// Positive outcomes (merged, not reverted).
    pub positives: u64,
    /// All outcomes.
    pub total: u64,
    /// `positives / total` in [0,1]; `None` when there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
}

impl WindowCounts {
    /// The counts with their rate.
    pub fn new(positives: u64, total: u64) -> Self {
        let rate = (total > 0).then(|| positives as f64 / total as f64);
        Self {
            positives,
            total,
            rate,
        }
    }
}

impl Detail {
    /// `reason` cut to [`MAX_REASON_CHARS`] characters.
    pub fn with_reason(mut self, reason: &str) -> Self {
        self.reason = reason.chars().take(MAX_REASON_CHARS).collect();
        self
    }
}

/// One event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// The type's wire name.
    pub event: EventKind,
    /// The version id (or the ask's job id for `live_ab_skipped`).
    pub job_id: String,
    /// The template id.
    pub root_id: String,
    /// Redacted detail.
    pub detail: Detail,
    /// RFC 3339 UTC.
    pub created_at: String,
}

impl Event {
    /// An event created now.
    pub fn new(event: EventKind, job_id: &str, root_id: &str, detail: Detail) -> Self {
        Self {
            event,
            job_id: job_id.to_owned(),
            root_id: root_id.to_owned(),
            detail,
            created_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        }
    }

    /// The compact JSON body every sink sends.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned())
    }
}

/// The `[events]` sinks, resolved (paths absolute).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sinks {
    /// Append events to this JSONL file.
    pub jsonl: Option<PathBuf>,
    /// XADD events to this Redis server…
    pub redis_url: Option<String>,
    /// …under this stream key.
    pub redis_stream: String,
    /// POST events to this URL…
    pub webhook_url: Option<String>,
    /// …signed with this secret.
    pub webhook_secret: Option<String>,
}

impl Sinks {
    /// Whether `[events]` is configured at all (S-52: notifications only then).
    pub fn is_configured(&self) -> bool {
        self.jsonl.is_some() || self.redis_url.is_some() || self.webhook_url.is_some()
    }
}

/// Why an event did not reach a sink; the caller logs it and goes on (notifications never fail
/// a command).
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The JSONL sink's directory could not be created.
    #[error("create `{}`: {error}", dir.display())]
    CreateDir {
        /// The directory.
        dir: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The JSONL sink could not be opened.
    #[error("open `{}`: {error}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The line could not be appended.
    #[error("append to `{}`: {error}", path.display())]
    Append {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The Redis URL is invalid.
    #[error("redis url `{url}`: {error}")]
    RedisUrl {
        /// The URL.
        url: String,
        /// The client's error.
        error: redis::RedisError,
    },
    /// The Redis server cannot be reached.
    #[error("connect to `{url}`: {error}")]
    Connect {
        /// The URL.
        url: String,
        /// The client's error.
        error: redis::RedisError,
    },
    /// The server refused the XADD.
    #[error("XADD {stream}: {error}")]
    Xadd {
        /// The stream.
        stream: String,
        /// The server's error.
        error: redis::RedisError,
    },
}

/// Appends one line to the JSONL sink (created 0600 with parents if missing).
///
/// # Errors
/// [`SinkError::CreateDir`], [`SinkError::Open`] or [`SinkError::Append`], naming the file.
pub fn append_jsonl(path: &Path, event: &Event) -> Result<(), SinkError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|error| SinkError::CreateDir {
            dir: parent.to_owned(),
            error,
        })?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(|error| SinkError::Open {
        path: path.to_owned(),
        error,
    })?;
    let mut line = event.to_json();
    line.push('\n');
    file.write_all(line.as_bytes())
        .map_err(|error| SinkError::Append {
            path: path.to_owned(),
            error,
        })
}

/// XADDs one event to `stream` on the Redis server at `url`: fields `event` and `payload`.
/// Returns the entry id the server assigned.
///
/// # Errors
/// [`SinkError::RedisUrl`], [`SinkError::Connect`] or [`SinkError::Xadd`] when the server cannot
/// be reached or refuses the command.
pub async fn xadd(url: &str, stream: &str, event: &Event) -> Result<String, SinkError> {
    let client = redis::Client::open(url).map_err(|error| SinkError::RedisUrl {
        url: url.to_owned(),
        error,
    })?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|error| SinkError::Connect {
            url: url.to_owned(),
            error,
        })?;
    redis::cmd("XADD")
        .arg(stream)
        .arg("*")
        .arg("event")
        .arg(event.event.name())
        .arg("payload")
        .arg(event.to_json())
        .query_async::<String>(&mut conn)
        .await
        .map_err(|error| SinkError::Xadd {
            stream: stream.to_owned(),
            error,
        })
}

/// `sha256=<hex>` of HMAC-SHA256(`secret`, `body`).
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// The durable webhook delivery job: `curl` POSTs the body (on stdin) with its signature; a
/// non-2xx reply fails the attempt (`--fail`), and the engine retries with backoff. The secret
/// never reaches the job, only the signature. Idempotency key `events:webhook:<event>:<job id>:<created_at>`.
/// Built by the stage core from `stage` (`workflows/promotion.toml` `[stages.webhook]`: attempts,
/// timeout, heartbeat).
///
/// # Errors
/// [`PayloadError`] when the payload does not serialize.
pub fn webhook_job(
    stage: &StageDef,
    url: &str,
    secret: &str,
    event: &Event,
) -> Result<JobSpec, PayloadError> {
    let body = event.to_json();
    let signature = sign(secret.as_bytes(), body.as_bytes());
    let mut payload = ProcessPayload::argv(vec![
        "curl".into(),
        "--silent".into(),
        "--show-error".into(),
        "--fail".into(),
        "--max-time".into(),
        "30".into(),
        "-X".into(),
        "POST".into(),
        "-H".into(),
        "Content-Type: application/json".into(),
        "-H".into(),
        format!("{SIGNATURE_HEADER}: {signature}"),
        "--data-binary".into(),
        "@-".into(),
        url.to_owned(),
    ]);
    payload.stdin = Some(body);
    stage.job(
        &payload,
        Some(format!(
            "events:webhook:{}:{}:{}",
            event.event.name(),
            event.job_id,
            event.created_at
        )),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialize_with_their_wire_names_and_only_redacted_fields() {
        let detail = Detail {
            score: Some(0.8),
            samples: Some(4),
            ..Detail::default()
        }
        .with_reason(&"x".repeat(500));
        let event = Event::new(
            EventKind::AwaitingPromotion,
            "planner@v2",
            "planner",
            detail,
        );
        let value: serde_json::Value = serde_json::from_str(&event.to_json()).unwrap();
        assert_eq!(value["event"], "candidate.awaiting_promotion");
        assert_eq!(
            (value["job_id"].as_str(), value["root_id"].as_str()),
            (Some("planner@v2"), Some("planner"))
        );
        let keys: Vec<&str> = value["detail"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["score", "samples", "reason"]);
        assert_eq!(
            value["detail"]["reason"].as_str().unwrap().chars().count(),
            MAX_REASON_CHARS
        );
        for kind in [
            EventKind::AutoPromoted,
            EventKind::CanaryStarted,
            EventKind::RolledBack,
            EventKind::CanaryGraduated,
            EventKind::Promoted,
            EventKind::Rejected,
            EventKind::LiveAbSkipped,
        ] {
            let v = serde_json::to_value(kind).unwrap();
            assert_eq!(v.as_str(), Some(kind.name()));
        }
    }

    #[test]
    fn jsonl_appends_one_line_per_event() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/events.jsonl");
        let event = Event::new(EventKind::RolledBack, "t@v2", "t", Detail::default());
        append_jsonl(&path, &event).unwrap();
        append_jsonl(&path, &event).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2);
        assert!(text.lines().all(
            |l| serde_json::from_str::<serde_json::Value>(l).unwrap()["event"]
                == "candidate.rolled_back"
        ));
    }

    #[test]
    fn webhook_signature_is_hmac_sha256_and_the_secret_stays_out_of_the_job() {
        // RFC 4231 test case 2.
        assert_eq!(
            sign(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let event = Event::new(EventKind::AutoPromoted, "t@v2", "t", Detail::default());
        let spec = webhook_job(
            crate::promotion::stages::PromotionStages::default().stage("webhook"),
            "http://127.0.0.1:9/hook",
            "s3cret-value",
            &event,
        )
        .unwrap();
        let text = spec.payload.to_string();
        assert!(!text.contains("s3cret-value"));
        assert!(text.contains(&sign(b"s3cret-value", event.to_json().as_bytes())));
        assert_eq!(spec.kind, "process");
    }
}
