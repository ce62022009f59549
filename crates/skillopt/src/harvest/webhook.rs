//! Forge and CI events for `POST /events`: HMAC signature verification (`X-Hub-Signature-256`) and
//! GitHub webhook payloads → [`HarvestEvent`]s (seed: SkillOpt, "Automatic trace-harvested
//! feedback (Mode A, off by default)"; issue 6 item 2).
//!
//! Event types read (the `X-GitHub-Event` header, [`READ_EVENTS`]): `pull_request` (closed and
//! merged → a merged outcome, its body read for `Reverts …`; `opened`, `edited`, `synchronize` →
//! the attribution only), `status` and `check_suite` (completed) → CI observations,
//! `pull_request_review` (submitted, `changes_requested`) → a fix round, `ping` → nothing, and
//! `skillforge_outcome` — a CI pipeline's report with the fields of `skillforge harvest outcome`
//! (`{"repo","pr","outcome","ci"?,"rounds"?,"head"?,"reverts_body"?}`). A `Skillforge-Template`
//! trailer in `pull_request.body` of a `pull_request` or `pull_request_review` delivery attributes
//! the PR before anything else in it is applied ([`super::trailer`]), so a review's fix round is
//! negative evidence with webhooks alone. A delivery that carries nothing (another event type, a
//! PR closed without merging, an approving review, …) says why in [`Delivery::skipped`].

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

/// The event types [`parse_event`] reads; any other is acknowledged and skipped with a reason.
pub const READ_EVENTS: [&str; 6] = [
    "pull_request",
    "pull_request_review",
    "status",
    "check_suite",
    SKILLFORGE_OUTCOME_EVENT,
    "ping",
];

/// `pull_request` actions whose body's trailer attributes the PR before it is merged.
const ATTRIBUTING_ACTIONS: [&str; 3] = ["opened", "edited", "synchronize"];

/// What one webhook delivery carries: the harvest events to apply, in order, and why the
/// delivery (or part of it) carries nothing — reasons for the sender, shown in the reply's
/// `skipped` next to the harvester's own.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Delivery {
    /// Events to apply, an attribution before the outcome or fix round it concerns.
    pub events: Vec<HarvestEvent>,
    /// Why nothing (or not everything) is read, e.g. `acme/app#7 closed without merging: not an
    /// outcome`.
    pub skipped: Vec<String>,
}

impl Delivery {
    fn skip(reason: String) -> Self {
        Self {
            events: Vec::new(),
            skipped: vec![reason],
        }
    }
}

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

/// The harvest events in one webhook delivery of type `event`, and the reasons when it carries
/// none: an event type not in [`READ_EVENTS`] (its body is not read), a PR closed without
/// merging, a `pull_request` action other than a merge or an attributing one, a review that does
/// not request changes, a check suite not completed, a `ping`.
///
/// # Errors
/// [`WebhookError::Payload`] when the body of a read event type is not JSON or misses a field its
/// type requires.
pub fn parse_event(event: &str, body: &[u8]) -> Result<Delivery, WebhookError> {
    if !READ_EVENTS.contains(&event) {
        return Ok(Delivery::skip(format!(
            "event `{event}` is not read: skillforge reads {}",
            READ_EVENTS.join(", ")
        )));
    }
    let json: Value =
        serde_json::from_slice(body).map_err(|e| payload_error(event, format!("not JSON: {e}")))?;
    if !json.is_object() {
        return Err(payload_error(event, "the body must be a JSON object"));
    }
    let events = match event {
        "pull_request" => return pull_request(event, &json),
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
            vec![HarvestEvent::Ci {
                repo,
                sha,
                context,
                state,
                description,
            }]
        }
        "check_suite" => {
            let repo = repo_of(event, &json)?;
            let action = str_at(&json, &["action"]).unwrap_or("");
            if action != "completed" {
                return Ok(Delivery::skip(format!(
                    "check_suite `{action}` in {repo}: only completed check suites are read"
                )));
            }
            let sha = str_at(&json, &["check_suite", "head_sha"])
                .ok_or_else(|| payload_error(event, "`check_suite.head_sha` is required"))?;
            let conclusion = str_at(&json, &["check_suite", "conclusion"]).unwrap_or("neutral");
            let app = str_at(&json, &["check_suite", "app", "slug"]).unwrap_or("check-suite");
            vec![HarvestEvent::Ci {
                repo,
                sha: sha.to_owned(),
                context: format!("check_suite/{app}"),
                state: conclusion.to_owned(),
                description: String::new(),
            }]
        }
        "pull_request_review" => return review(event, &json),
        SKILLFORGE_OUTCOME_EVENT => skillforge_outcome(event, &json)?,
        _ => {
            return Ok(Delivery::skip(
                "ping: the webhook reaches skillforge; nothing to harvest".to_owned(),
            ));
        }
    };
    Ok(Delivery {
        events,
        skipped: Vec::new(),
    })
}

/// `pull_request.number` of a delivery, when present and ≥ 1.
fn pr_number(json: &Value) -> Option<i64> {
    json.pointer("/pull_request/number")
        .or_else(|| json.get("number"))
        .and_then(Value::as_i64)
        .filter(|n| *n > 0)
}

/// `repo#pr`, or `a pull request in repo` when the number is missing (for skip reasons).
fn pr_label(repo: &str, pr: Option<i64>) -> String {
    pr.map_or_else(
        || format!("a pull request in {repo}"),
        |n| format!("{repo}#{n}"),
    )
}

/// The attribution a `pull_request.body` trailer gives `repo#pr`, when it has one.
fn body_attribution(repo: &str, pr: i64, body: Option<&str>) -> Option<HarvestEvent> {
    body.and_then(|b| trailer::parse(b, TrailerPlace::Body))
        .map(|trailer| HarvestEvent::Attributed {
            repo: repo.to_owned(),
            pr,
            trailer,
        })
}

fn review(event: &str, json: &Value) -> Result<Delivery, WebhookError> {
    let repo = repo_of(event, json)?;
    let state = str_at(json, &["review", "state"])
        .unwrap_or("")
        .to_ascii_lowercase();
    let action = str_at(json, &["action"]).unwrap_or("");
    if action != "submitted" {
        return Ok(Delivery::skip(format!(
            "review of {} `{action}`: only submitted reviews are read",
            pr_label(&repo, pr_number(json))
        )));
    }
    if state != "changes_requested" {
        return Ok(Delivery::skip(format!(
            "review of {} is `{state}`: only reviews requesting changes are read",
            pr_label(&repo, pr_number(json))
        )));
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
    // The trailer in the PR body attributes the PR first, as on a merge, so the fix round finds it.
    let mut events: Vec<HarvestEvent> =
        body_attribution(&repo, pr, str_at(json, &["pull_request", "body"]))
            .into_iter()
            .collect();
    events.push(HarvestEvent::ChangesRequested {
        repo,
        pr,
        review_id,
    });
    Ok(Delivery {
        events,
        skipped: Vec::new(),
    })
}

fn pull_request(event: &str, json: &Value) -> Result<Delivery, WebhookError> {
    let repo = repo_of(event, json)?;
    let pr_json = json
        .get("pull_request")
        .ok_or_else(|| payload_error(event, "`pull_request` is required"))?;
    let merged = pr_json
        .get("merged")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let action = str_at(json, &["action"]).unwrap_or("");
    let number = pr_number(json);
    let body = str_at(pr_json, &["body"]).map(str::to_owned);
    if action == "closed" && !merged {
        return Ok(Delivery::skip(format!(
            "{} closed without merging: not an outcome",
            pr_label(&repo, number)
        )));
    }
    if ATTRIBUTING_ACTIONS.contains(&action) {
        let pr = number.ok_or_else(|| payload_error(event, "`pull_request.number` is required"))?;
        return Ok(match body_attribution(&repo, pr, body.as_deref()) {
            Some(attributed) => Delivery {
                events: vec![attributed],
                skipped: Vec::new(),
            },
            None => Delivery::skip(format!(
                "{repo}#{pr} {action}: no {} trailer in its body; nothing to attribute yet",
                trailer::TEMPLATE_TRAILER
            )),
        });
    }
    if action != "closed" {
        return Ok(Delivery::skip(format!(
            "{} `{action}`: only a merge, or a body's {} trailer on {}, is read",
            pr_label(&repo, number),
            trailer::TEMPLATE_TRAILER,
            ATTRIBUTING_ACTIONS.join(", ")
        )));
    }
    let pr = number.ok_or_else(|| payload_error(event, "`pull_request.number` is required"))?;
    let pr_head = str_at(pr_json, &["head", "sha"]).map(str::to_owned);
    let merge_sha = str_at(pr_json, &["merge_commit_sha"]).map(str::to_owned);
    let head = merge_sha.clone().or_else(|| pr_head.clone());
    let ci_shas = [pr_head, merge_sha].into_iter().flatten().collect();
    // Issue 37 item 8: a trailer in the body attributes the PR before its outcome is applied; one
    // in its commits is read by the endpoint from the commits list ([`needs_commit_trailer`]).
    let mut events: Vec<HarvestEvent> = body_attribution(&repo, pr, body.as_deref())
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
    Ok(Delivery {
        events,
        skipped: Vec::new(),
    })
}

/// The merged or change-requested PR (`owner/repo`, number) of a delivery's events whose body
/// carried no `Skillforge-Template` trailer: the one whose commits the endpoint reads for a
/// trailer (`GET /repos/{o}/{r}/pulls/{n}/commits`) when a GitHub token is configured (issue 37
/// item 8).
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
        }
        | HarvestEvent::ChangesRequested { repo, pr, .. } => Some((repo.clone(), *pr)),
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
        let events = parse_event("pull_request", merged.to_string().as_bytes())
            .unwrap()
            .events;
        assert!(
            matches!(&events[..], [HarvestEvent::Outcome { pr: 13, head: Some(h), body: Some(b), .. }] if h == "m1" && b == "Reverts #12")
        );
        assert_eq!(needs_commit_trailer(&events), Some(("acme/app".into(), 13)));
        let trailered = json!({"action":"closed","repository":{"full_name":"acme/app"},
            "pull_request":{"number":14,"merged":true,"merge_commit_sha":"m2","head":{"sha":"h2"},"body":"Adds X\n\nSkillforge-Template: planner@v3"}});
        let events = parse_event("pull_request", trailered.to_string().as_bytes())
            .unwrap()
            .events;
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
        assert_eq!(
            parse_event("pull_request", closed.to_string().as_bytes()).unwrap(),
            Delivery::skip("acme/app#13 closed without merging: not an outcome".into())
        );
        let review = json!({"action":"submitted","repository":{"full_name":"acme/app"},"review":{"id":5,"state":"changes_requested"},"pull_request":{"number":3}});
        assert_eq!(
            parse_event("pull_request_review", review.to_string().as_bytes())
                .unwrap()
                .events,
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
        assert!(parse_event("ping", b"{}").unwrap().events.is_empty());
        let ci = json!({"repo":"acme/app","pr":4,"outcome":"changes_requested","rounds":3});
        let events = parse_event(SKILLFORGE_OUTCOME_EVENT, ci.to_string().as_bytes())
            .unwrap()
            .events;
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

    #[test]
    fn a_body_trailer_attributes_before_merge_and_unread_deliveries_say_why() {
        let body = "Summarize\n\nSkillforge-Template: change-summarizer@v2";
        let review = json!({"action":"submitted","repository":{"full_name":"acme/app"},
            "review":{"id":9,"state":"changes_requested"},"pull_request":{"number":304,"body":body}});
        let d = parse_event("pull_request_review", review.to_string().as_bytes()).unwrap();
        assert!(
            matches!(&d.events[..], [HarvestEvent::Attributed { pr: 304, trailer, .. }, HarvestEvent::ChangesRequested { pr: 304, .. }] if trailer.version == "change-summarizer@v2"),
            "{d:?}"
        );
        assert_eq!(needs_commit_trailer(&d.events), None);
        let bare = json!({"action":"submitted","repository":{"full_name":"acme/app"},
            "review":{"id":9,"state":"changes_requested"},"pull_request":{"number":304,"body":"no trailer"}});
        let d = parse_event("pull_request_review", bare.to_string().as_bytes()).unwrap();
        assert_eq!(
            needs_commit_trailer(&d.events),
            Some(("acme/app".into(), 304)),
            "no body trailer: the commits are read, as on a merge"
        );
        for action in ATTRIBUTING_ACTIONS {
            let opened = json!({"action":action,"repository":{"full_name":"acme/app"},
                "pull_request":{"number":5,"merged":false,"body":body}});
            let d = parse_event("pull_request", opened.to_string().as_bytes()).unwrap();
            assert!(
                matches!(&d.events[..], [HarvestEvent::Attributed { pr: 5, .. }]),
                "{action}: {d:?}"
            );
        }
        let labeled = json!({"action":"labeled","repository":{"full_name":"acme/app"},"pull_request":{"number":5}});
        let d = parse_event("pull_request", labeled.to_string().as_bytes()).unwrap();
        assert!(
            d.events.is_empty() && d.skipped[0].contains("acme/app#5 `labeled`"),
            "{d:?}"
        );
        let approved = json!({"action":"submitted","repository":{"full_name":"acme/app"},
            "review":{"id":9,"state":"APPROVED"},"pull_request":{"number":304,"body":body}});
        let d = parse_event("pull_request_review", approved.to_string().as_bytes()).unwrap();
        assert!(
            d.events.is_empty() && d.skipped[0].contains("`approved`"),
            "{d:?}"
        );
        for other in ["issues", "check_run"] {
            assert_eq!(
                parse_event(other, b"not even JSON").unwrap(),
                Delivery::skip(format!(
                    "event `{other}` is not read: skillforge reads pull_request, pull_request_review, status, check_suite, skillforge_outcome, ping"
                ))
            );
        }
    }
}
