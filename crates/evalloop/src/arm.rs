//! One arm of a sample: its side, the record the runner leaves in `<arm>.meta/run.json`, and the
//! two readings of an arm that never ran and of an arm the clock killed (seed: skill-eval-loop,
//! "Hard rules").

use serde::{Deserialize, Serialize};
use skillforge_runner_agent::{ApiError, OfferedFrom, PermissionDenial, Usage};

/// Characters of the runner's error text kept in `run.json` (the seed's 300).
pub const RUN_ERROR_CHARS: usize = 300;

/// Which arm: the candidate (`with`) or the baseline (`without`: no skill, or the rival).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArmSide {
    /// The candidate skill installed.
    With,
    /// The baseline: nothing installed, or the incumbent (`--rival`).
    Without,
}

impl ArmSide {
    /// Both sides, `with` first.
    pub const BOTH: [ArmSide; 2] = [ArmSide::With, ArmSide::Without];

    /// `with` or `without` (also the work dir's name).
    pub fn as_str(self) -> &'static str {
        match self {
            ArmSide::With => "with",
            ArmSide::Without => "without",
        }
    }

    /// The other side.
    pub fn other(self) -> ArmSide {
        match self {
            ArmSide::With => ArmSide::Without,
            ArmSide::Without => ArmSide::With,
        }
    }
}

impl std::fmt::Display for ArmSide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A value per side.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArmPair<T> {
    /// The candidate arm's.
    pub with: T,
    /// The baseline arm's.
    pub without: T,
}

impl<T> ArmPair<T> {
    /// The value of `side`.
    pub fn get(&self, side: ArmSide) -> &T {
        match side {
            ArmSide::With => &self.with,
            ArmSide::Without => &self.without,
        }
    }

    /// Mutable value of `side`.
    pub fn get_mut(&mut self, side: ArmSide) -> &mut T {
        match side {
            ArmSide::With => &mut self.with,
            ArmSide::Without => &mut self.without,
        }
    }
}

/// What the runner recorded about one arm (`<arm>.meta/run.json`).
///
/// `skills_offered` / `skills_loaded` are `None` when the runtime records no inventory or no skill
/// call (Codex), serialized as `"unknown"`, never as an empty list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArmRecord {
    /// Which arm.
    pub side: ArmSide,
    /// Sample number, from 1.
    pub sample: u32,
    /// Agent runtime profile, e.g. `claude`.
    pub runtime: String,
    /// The job that ran it.
    pub job_id: String,
    /// Exit class label: `passed`, `failed`, `timed_out`, `not_runnable`, `killed`, `censored`.
    pub exit: String,
    /// Raw exit code when the process exited normally.
    pub exit_code: Option<i32>,
    /// Signal number when killed by one (e.g. 14 = SIGALRM, exit 142).
    #[serde(default)]
    pub signal: Option<i32>,
    /// Wall-clock milliseconds.
    pub duration_ms: u64,
    /// The runner's own error text (its stderr's last line, or why it could not start), at most
    /// [`RUN_ERROR_CHARS`] characters.
    pub error: Option<String>,
    /// Bytes of transcript written (0 = empty transcript).
    pub transcript_bytes: u64,
    /// Skills installed for or handed to this arm (workdir scan + what the runner handed over).
    pub skills_installed: Vec<String>,
    /// Skills the model was offered: read from the arm's model requests when its run recorded
    /// them, else from the transcript; `None` = unknown.
    #[serde(with = "known_or_unknown")]
    pub skills_offered: Option<Vec<String>>,
    /// Where `skills_offered` was read (`request` or `transcript`); absent when unknown or in
    /// records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills_offered_from: Option<OfferedFrom>,
    /// The transcript's own list when it names other skills than the model requests did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills_offered_transcript: Option<Vec<String>>,
    /// Skills the transcript says were loaded; `None` = unknown.
    #[serde(with = "known_or_unknown")]
    pub skills_loaded: Option<Vec<String>>,
    /// Tool results marked as errors in the transcript; `None` = the runtime records none.
    pub tool_errors: Option<u32>,
    /// When the arm ran in a container: the engine, the image (with its digest) and the
    /// container's name, as the agent runner reported them. Absent for a local arm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<serde_json::Value>,
    /// Tokens and cost the arm's transcript reported; absent = unknown (never 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The API error that ended the arm's run (it gave no answer); absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_error: Option<ApiError>,
    /// Writes or commands the runtime's permission rules refused the arm.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permission_denials: Vec<PermissionDenial>,
}

/// `Option<Vec<String>>` as a list, or the string `"unknown"` for `None`.
pub mod known_or_unknown {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Wire {
        Known(Vec<String>),
        Marker(String),
    }

    /// Serializes `None` as `"unknown"`.
    ///
    /// # Errors
    /// The serializer's.
    pub fn serialize<S: Serializer>(
        value: &Option<Vec<String>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(names) => names.serialize(serializer),
            None => serializer.serialize_str("unknown"),
        }
    }

    /// Reads a list or `"unknown"`.
    ///
    /// # Errors
    /// Any other string.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Vec<String>>, D::Error> {
        match Wire::deserialize(deserializer)? {
            Wire::Known(names) => Ok(Some(names)),
            Wire::Marker(m) if m == "unknown" => Ok(None),
            Wire::Marker(other) => Err(serde::de::Error::custom(format!(
                "expected a list or \"unknown\", got \"{other}\""
            ))),
        }
    }
}

/// Which of the two shapes of a dead arm was seen (the reason text says which).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeverRanShape {
    /// Non-zero exit, empty transcript and no final message, all three together (E-43).
    NoTrace,
    /// The final message starts with the runner's recorded error: the runner talking (E-44).
    RunnerError,
}

/// Whether the arm never ran, and in which shape (E-43, E-44).
///
/// The first shape needs all three signs; the second a non-passing run whose final message starts
/// with `error` (compared by prefix, since `run.json` keeps [`RUN_ERROR_CHARS`]). A timeout after
/// real work is not a dead arm: its final message does not open with its stderr.
pub fn never_ran(record: &ArmRecord, final_message: Option<&str>) -> Option<NeverRanShape> {
    let failed = record.exit != "passed";
    let final_message = final_message.map(str::trim).filter(|m| !m.is_empty());
    if failed && record.transcript_bytes == 0 && final_message.is_none() {
        return Some(NeverRanShape::NoTrace);
    }
    let error = record
        .error
        .as_deref()
        .map(str::trim)
        .filter(|e| !e.is_empty());
    if let (true, Some(error), Some(message)) = (failed, error, final_message) {
        let error = truncate_chars(error, RUN_ERROR_CHARS);
        if message.starts_with(error)
            || (message.chars().count() < error.chars().count() && error.starts_with(message))
        {
            return Some(NeverRanShape::RunnerError);
        }
    }
    None
}

/// Whether the clock killed the arm (E-56): our own timeout, exit 124 (`timeout(1)`), or 142 /
/// SIGALRM (the perl alarm) — resolution 1.
pub fn timed_out(record: &ArmRecord) -> bool {
    record.exit == "timed_out"
        || matches!(record.exit_code, Some(124 | 142))
        || record.signal == Some(14)
}

/// `text` cut to at most `n` characters.
pub fn truncate_chars(text: &str, n: usize) -> &str {
    match text.char_indices().nth(n) {
        Some((idx, _)) => &text[..idx],
        None => text,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn record(
        exit: &str,
        code: Option<i32>,
        transcript_bytes: u64,
        error: Option<&str>,
    ) -> ArmRecord {
        ArmRecord {
            side: ArmSide::With,
            sample: 1,
            runtime: "scripted".into(),
            job_id: "j".into(),
            exit: exit.into(),
            exit_code: code,
            signal: None,
            duration_ms: 10,
            error: error.map(str::to_owned),
            transcript_bytes,
            skills_installed: vec![],
            skills_offered: Some(vec![]),
            skills_offered_from: None,
            skills_offered_transcript: None,
            skills_loaded: Some(vec![]),
            tool_errors: Some(0),
            usage: None,
            api_error: None,
            permission_denials: Vec::new(),
            container: None,
        }
    }

    // E-43
    #[test]
    fn e43_never_ran_needs_all_three_signs() {
        let check = |r: ArmRecord, final_message: Option<&str>, want: Option<NeverRanShape>| {
            assert_eq!(
                never_ran(&r, final_message),
                want,
                "{r:?} {final_message:?}"
            );
        };
        check(
            record("not_runnable", Some(127), 0, Some("program not found")),
            None,
            Some(NeverRanShape::NoTrace),
        );
        check(
            record("timed_out", Some(124), 500, Some("killed")),
            Some("Now rendering..."),
            None,
        );
        check(
            record("failed", Some(1), 0, None),
            Some("edited files only"),
            None,
        );
        check(record("failed", Some(1), 400, None), None, None);
        check(record("passed", Some(0), 0, None), None, None);
    }

    // E-44
    #[test]
    fn e44_final_message_opening_with_the_runner_error_is_the_runner_talking() {
        let long_error = format!(
            "Failed to authenticate: OAuth session expired and could not be refreshed {}",
            "x".repeat(400)
        );
        let r = record(
            "failed",
            Some(1),
            200,
            Some(truncate_chars(&long_error, RUN_ERROR_CHARS)),
        );
        assert_eq!(
            never_ran(&r, Some(&long_error)),
            Some(NeverRanShape::RunnerError)
        );
        let real = record(
            "timed_out",
            Some(124),
            200,
            Some("timeout: sending signal TERM"),
        );
        assert_eq!(
            never_ran(&real, Some("Here is the summary you asked for")),
            None
        );
    }

    // E-56
    #[test]
    fn e56_the_clock_killed_it() {
        assert!(timed_out(&record("timed_out", Some(124), 1, None)));
        assert!(timed_out(&record("killed", Some(142), 1, None)));
        assert!(!timed_out(&record("failed", Some(1), 1, None)));
    }

    #[test]
    fn unknown_inventory_round_trips_as_unknown() {
        let mut r = record("passed", Some(0), 1, None);
        r.skills_loaded = None;
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["skills_loaded"], "unknown");
        assert_eq!(
            serde_json::from_value::<ArmRecord>(v)
                .unwrap()
                .skills_loaded,
            None
        );
    }
}
