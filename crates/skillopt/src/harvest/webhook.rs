//! Forge and CI events for `POST /events`: HMAC signature verification (`X-Hub-Signature-256`) and
//! GitHub webhook payloads → [`HarvestEvent`]s (seed: SkillOpt, "Automatic trace-harvested
//! feedback (Mode A, off by default)"; issue 6 item 2).
//!
//! Accepted event types (the `X-GitHub-Event` header): `pull_request` (closed and merged →
//! a merged outcome, its body read for `Reverts …` and for a `Skillforge-Template` trailer, which
//! attributes the PR first: [`super::trailer`]), `status` and `check_suite` (completed) → CI
//! observations, `pull_request_review` (submitted, `changes_requested`) → a fix round, `ping` →
//! nothing, and `skillforge_outcome` — a CI pipeline's report with the fields of
//! `skillforge harvest outcome` (`{"repo","pr","outcome","ci"?,"rounds"?,"head"?,"reverts_body"?}`).

use hmac::{KeyInit, Mac};
use serde_json::Value;
use sha2::Sha256;

use super::outcome::{CiEvidence, HarvestEvent, Outcome};
use super::trailer::{self, TrailerPlace};

/// Header carrying `sha256=<hex HMAC-SHA256 of the raw body>`.
pub const SIGNATURE_HEADER: &str = "x-hub-signature-256";
/// Header naming the event type.
pub const EVENT_HEADER: &str = "x-github-event";
/// Event type of a CI pipeline's own outcome report.
pub const SKILLFORGE_OUTCOME_EVENT: &str = "skillforge_outcome";

/// Why an event was refused (every variant is a 4xx: nothing is written).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookError {
    /// No `X-Hub-Signature-256` header.
    #[error(
        "missing `X-Hub-Signature-256` header: sign the body with the webhook secret (HMAC-SHA256)"
    )]
    MissingSignature,
    /// The signature does not match the body under the configured secret.
    #[error("`X-Hub-Signature-256` does not match the body: check the webhook secret")]
    BadSignature,
    /// No `X-GitHub-Event` header.
    #[error("missing `X-GitHub-Event` header")]
    MissingEvent,
    /// The body is not the expected JSON for its event type.
    #[error("invalid `{event}` payload: {message}")]
    Payload {
        /// Event type.
        event: String,
        /// What was wrong.
        message: String,
    },
}

/// Verifies `header` (`sha256=<hex>`) against HMAC-SHA256 of `body` under `secret`, in constant
/// time.
///
/// # Errors
/// [`WebhookError::MissingSignature`] when `header` is `None`; [`WebhookError::BadSignature`] when
/// it is malformed or does not match.
pub fn verify_signature(
    secret: &[u8],
    body: &[u8],
    header: Option<&str>,
) -> Result<(), WebhookError> {
    let header = header.ok_or(WebhookError::MissingSignature)?;
    let hex_sig = header
        .trim()
        .strip_prefix("sha256=")
        .ok_or(WebhookError::BadSignature)?;
    let expected = hex::decode(hex_sig).map_err(|_| WebhookError::BadSignature)?;
    let mut mac =
        hmac::Hmac::<Sha256>::new_from_slice(secret).map_err(|_| WebhookError::BadSignature)?;
    mac.update(body);
    mac.verify_slice(&expected)
        .map_err(|_| WebhookError::BadSignature)
}

/// `sha256=<hex>` of `body` under `secret` (what a sender puts in `X-Hub-Signature-256`).
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let mut mac =
        hmac::Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

fn payload_error(event: &str, message: impl Into<String>) -> WebhookError {
    WebhookError::Payload {
        event: event.to_owned(),
        message: message.into(),
    }
}

fn str_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(value, |v, key| v.get(key))?.as_str()
}

fn repo_of(event: &str, body: &Value) -> Result<String, WebhookError> {
    str_at(body, &["repository", "full_name"])
        .filter(|r| r.contains('/'))
        .map(str::to_owned)
        .ok_or_else(|| payload_error(event, "`repository.full_name` (owner/repo) is required"))
}

/// Why an outcome name or its options are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutcomeError {
    /// A `ci` value other than external, none or gitmoot.
    #[error("ci `{0}` is invalid; use external, none or gitmoot")]
    Ci(String),
    /// An outcome name other than merged, blocked, changes_requested or reverted.
    #[error("outcome `{0}` is invalid; use merged, blocked, changes_requested or reverted")]
    Name(String),
}

/// Parses an outcome name with its options, as `skillforge harvest outcome` takes them: `merged`
/// (`ci`: `external` | `none` | `gitmoot`, absent = read the recorded observations), `blocked`,
/// `changes_requested` (`rounds` ≥ 1, default 1), `reverted`.
///
/// # Errors
/// [`OutcomeError`] naming the bad value.
pub fn parse_outcome(
    name: &str,
    ci: Option<&str>,
    rounds: Option<u32>,
) -> Result<Outcome, OutcomeError> {
    let ci = match ci {
        None => None,
        Some("external") => Some(CiEvidence::External {
            context: "external".into(),
        }),
        Some("none") => Some(CiEvidence::EmptyGate { confirmed: false }),
        Some("gitmoot") => Some(CiEvidence::EmptyGate { confirmed: true }),
        Some(other) => return Err(OutcomeError::Ci(other.to_owned())),
    };
    match name {
        "merged" => Ok(Outcome::Merged { ci }),
        "blocked" => Ok(Outcome::Blocked),
        "changes_requested" => Ok(Outcome::ChangesRequested {
            rounds: rounds.unwrap_or(1).max(1),
        }),
        "reverted" => Ok(Outcome::Reverted { by_pr: None }),
        other => Err(OutcomeError::Name(other.to_owned())),
    }
}

/// The harvest events in one webhook delivery of type `event`. Deliveries that carry no outcome
/// (a PR closed without merging, a pending status, an approving review, `ping`, other event
/// types) give an empty list.
///
/// # Errors
/// [`WebhookError::Payload`] when the body is not JSON or misses a field its type requires.
pub fn parse_event(event: &str, body: &[u8]) -> Result<Vec<HarvestEvent>, WebhookError> {
    let json: Value =
        serde_json::from_slice(body).map_err(|e| payload_error(event, format!("not JSON: {e}")))?;
    if !json.is_object() {
        return Err(payload_error(event, "the body must be a JSON object"));
    }
    match event {
        "pull_request" => pull_request(event, &json),
        "status" => {
            let repo = repo_of(event, &json)?;
            let field = |k: &str| str_at(&json, &[k]).map(str::to_owned);
            let (Some(sha), Some(state), Some(context)) =
                (field("sha"), field("state"), field("context"))
            else {
                return Err(payload_error(
                    event,
                    "`sha`, `state` and `context` are required",
                ));
            };
            let description = field("description").unwrap_or_default();
            Ok(vec![HarvestEvent::Ci {
                repo,
                sha,
                context,
                state,
                description,
            }])
        }
        "check_suite" => {
            let repo = repo_of(event, &json)?;
            if str_at(&json, &["action"]) != Some("completed") {
                return Ok(Vec::new());
            }
            let sha = str_at(&json, &["check_suite", "head_sha"])
                .ok_or_else(|| payload_error(event, "`check_suite.head_sha` is required"))?;
            let conclusion = str_at(&json, &["check_suite", "conclusion"]).unwrap_or("neutral");
            let app = str_at(&json, &["check_suite", "app", "slug"]).unwrap_or("check-suite");
            Ok(vec![HarvestEvent::Ci {
                repo,
                sha: sha.to_owned(),
                context: format!("check_suite/{app}"),
                state: conclusion.to_owned(),
                description: String::new(),
            }])
        }
        "pull_request_review" => {
            let repo = repo_of(event, &json)?;
            let state = str_at(&json, &["review", "state"])
                .unwrap_or("")
                .to_ascii_lowercase();
            if str_at(&json, &["action"]) != Some("submitted") || state != "changes_requested" {
                return Ok(Vec::new());
            }
            let pr = json
                .pointer("/pull_request/number")
                .and_then(Value::as_i64)
                .ok_or_else(|| payload_error(event, "`pull_request.number` is required"))?;
            let review_id = json
                .pointer("/review/id")
                .map(|v| {
                    v.as_str()
                        .map(str::to_owned)
                        .unwrap_or_else(|| v.to_string())
                })
                .ok_or_else(|| payload_error(event, "`review.id` is required"))?;
            Ok(vec![HarvestEvent::ChangesRequested {
                repo,
                pr,
                review_id,
            }])
        }
        SKILLFORGE_OUTCOME_EVENT => skillforge_outcome(event, &json),
        _ => Ok(Vec::new()),
    }
}

fn pull_request(event: &str, json: &Value) -> Result<Vec<HarvestEvent>, WebhookError> {
    let repo = repo_of(event, json)?;
    let pr_json = json
        .get("pull_request")
        .ok_or_else(|| payload_error(event, "`pull_request` is required"))?;
    let merged = pr_json
        .get("merged")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if str_at(json, &["action"]) != Some("closed") || !merged {
        return Ok(Vec::new());
    }
    let pr = pr_json
        .get("number")
        .or_else(|| json.get("number"))
        .and_then(Value::as_i64)
        .filter(|n| *n > 0)
        .ok_or_else(|| payload_error(event, "`pull_request.number` is required"))?;
    let pr_head = str_at(pr_json, &["head", "sha"]).map(str::to_owned);
    let merge_sha = str_at(pr_json, &["merge_commit_sha"]).map(str::to_owned);
    let head = merge_sha.clone().or_else(|| pr_head.clone());
    let ci_shas = [pr_head, merge_sha].into_iter().flatten().collect();
    let body = str_at(pr_json, &["body"]).map(str::to_owned);
    // Issue 37 item 8: a trailer in the body attributes the PR before its outcome is applied; one
    // in its commits is read by the endpoint from the commits list ([`needs_commit_trailer`]).
    let mut events: Vec<HarvestEvent> = body
        .as_deref()
        .and_then(|b| trailer::parse(b, TrailerPlace::Body))
        .map(|trailer| HarvestEvent::Attributed {
            repo: repo.clone(),
            pr,
            trailer,
        })
        .into_iter()
        .collect();
    events.push(HarvestEvent::Outcome {
        repo,
        pr,
        outcome: Outcome::Merged { ci: None },
        head,
        ci_shas,
        body,
    });
    Ok(events)
}

/// The merged PR (`owner/repo`, number) of a delivery's events whose body carried no
/// `Skillforge-Template` trailer: the one whose commits the endpoint reads for a trailer
/// (`GET /repos/{o}/{r}/pulls/{n}/commits`) when a GitHub token is configured (issue 37 item 8).
pub fn needs_commit_trailer(events: &[HarvestEvent]) -> Option<(String, i64)> {
    if events
        .iter()
        .any(|e| matches!(e, HarvestEvent::Attributed { .. }))
    {
        return None;
    }
    events.iter().find_map(|e| match e {
        HarvestEvent::Outcome {
            repo,
            pr,
            outcome: Outcome::Merged { .. },
            ..
        } => Some((repo.clone(), *pr)),
        _ => None,
    })
}

fn skillforge_outcome(event: &str, json: &Value) -> Result<Vec<HarvestEvent>, WebhookError> {
    let repo = str_at(json, &["repo"])
        .filter(|r| r.contains('/'))
        .ok_or_else(|| payload_error(event, "`repo` (owner/repo) is required"))?
        .to_owned();
    let pr = json
        .get("pr")
        .and_then(Value::as_i64)
        .filter(|n| *n > 0)
        .ok_or_else(|| payload_error(event, "`pr` ≥ 1 is required"))?;
    let name =
        str_at(json, &["outcome"]).ok_or_else(|| payload_error(event, "`outcome` is required"))?;
    let rounds = json
        .get("rounds")
        .and_then(Value::as_u64)
        .map(|r| r.min(u64::from(u32::MAX)) as u32);
    let outcome = parse_outcome(name, str_at(json, &["ci"]), rounds)
        .map_err(|e| payload_error(event, e.to_string()))?;
    let head = str_at(json, &["head"]).map(str::to_owned);
    Ok(vec![HarvestEvent::Outcome {
        repo,
        pr,
        outcome,
        ci_shas: head.iter().cloned().collect(),
        head,
        body: str_at(json, &["reverts_body"]).map(str::to_owned),
    }])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn signatures_good_bad_missing() {
        let body = br#"{"zen":"x"}"#;
        let good = sign(b"s3cret", body);
        assert_eq!(verify_signature(b"s3cret", body, Some(&good)), Ok(()));
        assert_eq!(
            verify_signature(b"other", body, Some(&good)),
            Err(WebhookError::BadSignature)
        );
        assert_eq!(
            verify_signature(b"s3cret", b"{}", Some(&good)),
            Err(WebhookError::BadSignature)
        );
        assert_eq!(
            verify_signature(b"s3cret", body, Some("sha1=00")),
            Err(WebhookError::BadSignature)
        );
        assert_eq!(
            verify_signature(b"s3cret", body, None),
            Err(WebhookError::MissingSignature)
        );
    }

    #[test]
    fn payloads() {
        let merged = json!({"action":"closed","repository":{"full_name":"acme/app"},
            "pull_request":{"number":13,"merged":true,"merge_commit_sha":"m1","head":{"sha":"h1"},"body":"Reverts #12"}});
        let events = parse_event("pull_request", merged.to_string().as_bytes()).unwrap();
        assert!(
            matches!(&events[..], [HarvestEvent::Outcome { pr: 13, head: Some(h), body: Some(b), .. }] if h == "m1" && b == "Reverts #12")
        );
        assert_eq!(needs_commit_trailer(&events), Some(("acme/app".into(), 13)));
        let trailered = json!({"action":"closed","repository":{"full_name":"acme/app"},
            "pull_request":{"number":14,"merged":true,"merge_commit_sha":"m2","head":{"sha":"h2"},"body":"Adds X\n\nSkillforge-Template: planner@v3"}});
        let events = parse_event("pull_request", trailered.to_string().as_bytes()).unwrap();
        assert!(
            matches!(&events[..], [HarvestEvent::Attributed { pr: 14, trailer, .. }, HarvestEvent::Outcome { pr: 14, .. }] if trailer.version == "planner@v3"),
            "{events:?}"
        );
        assert_eq!(
            needs_commit_trailer(&events),
            None,
            "the body's trailer wins: no commits are read"
        );
        let closed = json!({"action":"closed","repository":{"full_name":"acme/app"},"pull_request":{"number":13,"merged":false}});
        assert!(
            parse_event("pull_request", closed.to_string().as_bytes())
                .unwrap()
                .is_empty()
        );
        let review = json!({"action":"submitted","repository":{"full_name":"acme/app"},"review":{"id":5,"state":"changes_requested"},"pull_request":{"number":3}});
        assert_eq!(
            parse_event("pull_request_review", review.to_string().as_bytes()).unwrap(),
            vec![HarvestEvent::ChangesRequested {
                repo: "acme/app".into(),
                pr: 3,
                review_id: "5".into()
            }]
        );
        assert!(matches!(
            parse_event("status", b"{}"),
            Err(WebhookError::Payload { .. })
        ));
        assert!(matches!(
            parse_event("pull_request", b"not json"),
            Err(WebhookError::Payload { .. })
        ));
        assert!(parse_event("ping", b"{}").unwrap().is_empty());
        let ci = json!({"repo":"acme/app","pr":4,"outcome":"changes_requested","rounds":3});
        let events = parse_event(SKILLFORGE_OUTCOME_EVENT, ci.to_string().as_bytes()).unwrap();
        assert!(matches!(
            &events[..],
            [HarvestEvent::Outcome {
                outcome: Outcome::ChangesRequested { rounds: 3 },
                ..
            }]
        ));
        let bad = json!({"repo":"acme/app","pr":4,"outcome":"exploded"});
        assert!(matches!(
            parse_event(SKILLFORGE_OUTCOME_EVENT, bad.to_string().as_bytes()),
            Err(WebhookError::Payload { .. })
        ));
    }
}
