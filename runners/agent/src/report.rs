//! The agent runner's structured result, stored as `RunOutcome::detail`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use skillforge_runner::ExitClass;

use crate::signals::{ApiError, PermissionDenial, Usage};

/// What one agent run produced, as JSON in `RunOutcome::detail`.
///
/// `skills_offered` / `skills_loaded` are `None` when the runtime's transcript does not record
/// them, serialized as the string `"unknown"` — never as an empty list, which would claim the
/// agent was offered or loaded nothing (seed: skill-eval-loop, "a runner that records no skill
/// call at all is never counted").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentReport {
    /// Runtime profile name, e.g. `claude`.
    pub runtime: String,
    /// The runtime's model family, e.g. `claude`.
    pub family: String,
    /// The program that was run (resolved path or name).
    pub program: String,
    /// The agent's final message, when the transcript has one.
    pub final_message: Option<String>,
    /// Where the full transcript was written (payload `transcript_path`), if it was.
    pub transcript_path: Option<PathBuf>,
    /// The transcript's last [`crate::TRANSCRIPT_TAIL_BYTES`] bytes when it was not written to a
    /// file (starts with a `[... truncated N bytes]` line when cut).
    pub transcript_tail: Option<String>,
    /// Transcript bytes lost to the capture cap ([`crate::TRANSCRIPT_MAX_BYTES`]); when non-zero,
    /// early events (such as Claude's offered-skills line) may be missing.
    pub transcript_truncated_bytes: u64,
    /// The payload's `skills`: what the caller handed the agent.
    pub skills_handed: Vec<String>,
    /// Skills the transcript says the agent was offered, in order; `"unknown"` when not recorded.
    #[serde(with = "known_or_unknown")]
    pub skills_offered: Option<Vec<String>>,
    /// Where `skills_offered` was read: the model requests the run's recording proxy saw, or
    /// the transcript's own listing (Claude Code's init line); absent when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills_offered_from: Option<OfferedFrom>,
    /// The transcript's own listing when it differs from what the model requests offered
    /// (`skills_offered` is then the requests'); absent when they agree or it listed none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills_offered_transcript: Option<Vec<String>>,
    /// Agent turns the run's recording proxy forwarded to the model API; absent when the run
    /// had no proxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxied_requests: Option<u64>,
    /// Skills the transcript says the agent loaded, in first-load order, deduplicated;
    /// `"unknown"` when not recorded.
    #[serde(with = "known_or_unknown")]
    pub skills_loaded: Option<Vec<String>>,
    /// The model the transcript says the run used (the scripted agent records the one its
    /// profile's `model_args` gave it); absent when the transcript does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// How the run ended.
    pub exit: ExitClass,
    /// When the agent ran in a container (payload `container`): `{"engine", "image" (with its
    /// digest), "container_name"}`. Absent for a local run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<serde_json::Value>,
    /// Tokens and cost the transcript reported; absent when it reported none ("unknown",
    /// never 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The API error that ended the run (the run gave no answer, whatever `final_message`
    /// says); absent when there was none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_error: Option<ApiError>,
    /// Tool calls the runtime's permission rules refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permission_denials: Vec<PermissionDenial>,
    /// Runs of the CLI this report covers beyond the first (transient API errors retried by the
    /// runner, issue 31 item 4).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub transient_retries: u32,
}

/// Where an [`AgentReport`]'s `skills_offered` was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OfferedFrom {
    /// The model requests, recorded by the run's proxy: what the model was really shown.
    Request,
    /// The transcript's listing (what the CLI says it offered).
    Transcript,
}

impl AgentReport {
    /// Sets `skills_offered` from the model requests (`requested`, when the proxy recorded them)
    /// over the transcript's list (`transcribed`): the requests win; the transcript's list is
    /// kept in `skills_offered_transcript` when it names other skills.
    pub fn set_offered(
        &mut self,
        transcribed: Option<Vec<String>>,
        requested: Option<Vec<String>>,
    ) {
        match requested {
            Some(requested) => {
                let same = |a: &[String], b: &[String]| {
                    a.iter().all(|n| b.contains(n)) && b.iter().all(|n| a.contains(n))
                };
                self.skills_offered_transcript = transcribed.filter(|t| !same(t, &requested));
                self.skills_offered = Some(requested);
                self.skills_offered_from = Some(OfferedFrom::Request);
            }
            None => {
                self.skills_offered_from = transcribed.as_ref().map(|_| OfferedFrom::Transcript);
                self.skills_offered = transcribed;
                self.skills_offered_transcript = None;
            }
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl AgentReport {
    /// The answer the run gave: its final message, unless an API error ended the run (then the
    /// final message is the CLI talking, never an answer).
    pub fn answer(&self) -> Option<&str> {
        match self.api_error {
            Some(_) => None,
            None => self.final_message.as_deref(),
        }
    }
}

/// Serializes `Option<Vec<String>>` as the list, or the string `"unknown"` for `None`.
mod known_or_unknown {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    const UNKNOWN: &str = "unknown";

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Wire {
        Known(Vec<String>),
        Marker(String),
    }

    pub(super) fn serialize<S: Serializer>(
        value: &Option<Vec<String>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(names) => names.serialize(serializer),
            None => serializer.serialize_str(UNKNOWN),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Vec<String>>, D::Error> {
        match Wire::deserialize(deserializer)? {
            Wire::Known(names) => Ok(Some(names)),
            Wire::Marker(marker) if marker == UNKNOWN => Ok(None),
            Wire::Marker(other) => Err(serde::de::Error::custom(format!(
                "expected a list of skill names or \"unknown\", got \"{other}\""
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(offered: Option<Vec<String>>, loaded: Option<Vec<String>>) -> AgentReport {
        AgentReport {
            runtime: "codex".into(),
            family: "codex".into(),
            program: "codex".into(),
            final_message: Some("done".into()),
            transcript_path: None,
            transcript_tail: Some(String::new()),
            transcript_truncated_bytes: 0,
            skills_handed: vec!["s".into()],
            skills_offered: offered,
            skills_offered_from: None,
            skills_offered_transcript: None,
            proxied_requests: None,
            skills_loaded: loaded,
            model: None,
            exit: ExitClass::Passed,
            container: None,
            usage: None,
            api_error: None,
            permission_denials: Vec::new(),
            transient_retries: 0,
        }
    }

    #[test]
    fn unknown_skills_serialize_as_unknown_and_round_trip() {
        let check = |offered: Option<Vec<String>>,
                     loaded: Option<Vec<String>>,
                     expected: serde_json::Value| {
            let value = serde_json::to_value(report(offered.clone(), loaded.clone())).unwrap();
            assert_eq!(value["skills_offered"], expected["offered"]);
            assert_eq!(value["skills_loaded"], expected["loaded"]);
            let back: AgentReport = serde_json::from_value(value).unwrap();
            assert_eq!((back.skills_offered, back.skills_loaded), (offered, loaded));
        };
        check(
            None,
            None,
            serde_json::json!({"offered": "unknown", "loaded": "unknown"}),
        );
        check(
            Some(vec!["a".into()]),
            Some(Vec::new()),
            serde_json::json!({"offered": ["a"], "loaded": []}),
        );
    }

    // Issue 31 item 9: the request's list wins over the transcript's, which is kept when it
    // differs; without a recorded request the transcript's stands (or unknown stays unknown).
    #[test]
    fn the_requests_offered_skills_win_and_a_differing_transcript_list_is_kept() {
        let names = |n: &[&str]| n.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let mut r = report(None, None);
        r.set_offered(Some(names(&["a", "b"])), Some(names(&["b", "a", "c"])));
        assert_eq!(r.skills_offered, Some(names(&["b", "a", "c"])));
        assert_eq!(r.skills_offered_transcript, Some(names(&["a", "b"])));
        assert_eq!(r.skills_offered_from, Some(OfferedFrom::Request));
        r.set_offered(Some(names(&["a", "b"])), Some(names(&["b", "a"])));
        assert_eq!(
            r.skills_offered_transcript, None,
            "same skills, other order"
        );
        r.set_offered(None, Some(Vec::new()));
        assert_eq!(
            r.skills_offered,
            Some(Vec::new()),
            "codex: a known inventory"
        );
        r.set_offered(Some(names(&["a"])), None);
        assert_eq!(
            (r.skills_offered.clone(), r.skills_offered_from),
            (Some(names(&["a"])), Some(OfferedFrom::Transcript))
        );
        r.set_offered(None, None);
        assert_eq!(
            (r.skills_offered.clone(), r.skills_offered_from),
            (None, None)
        );
        let value = serde_json::to_value(&r).unwrap();
        assert_eq!(value["skills_offered"], "unknown");
        assert!(value.get("skills_offered_from").is_none());
    }

    #[test]
    fn other_markers_are_rejected() {
        let mut value = serde_json::to_value(report(None, None)).unwrap();
        value["skills_loaded"] = serde_json::json!("none");
        let error = serde_json::from_value::<AgentReport>(value).expect_err("none is not a marker");
        assert!(error.to_string().contains("\"unknown\""), "{error}");
    }
}
