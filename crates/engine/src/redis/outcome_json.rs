//! The run outcome as the job hash stores it (field `o`): the JSON of [`RunOutcome`] without
//! its empty parts (empty output tails, a `null` detail or exit code), so the outcome of a quiet
//! run stays under the hash's 64-byte value limit (see "The job hash" in `redis.rs`). Full JSON
//! (older builds, or an outcome with output) decodes the same way.

use serde_json::{Map, Value};
use skillforge_runner::RunOutcome;

use crate::error::EngineError;

/// The fields dropped when empty, with the value they take back on decode.
fn defaults() -> [(&'static str, Value); 4] {
    [
        ("stdout_tail", Value::String(String::new())),
        ("stderr_tail", Value::String(String::new())),
        ("detail", Value::Null),
        ("exit_code", Value::Null),
    ]
}

/// Encodes `outcome` of job `job_id` compactly.
///
/// Errors: [`EngineError::Backend`] when it does not serialize.
pub(super) fn encode(job_id: &str, outcome: &RunOutcome) -> Result<String, EngineError> {
    let bad = |e: serde_json::Error| EngineError::redis(format!("encode run outcome of job `{job_id}`: {e}"));
    let mut v = serde_json::to_value(outcome).map_err(bad)?;
    if let Value::Object(map) = &mut v {
        for (name, empty) in defaults() {
            if map.get(name) == Some(&empty) {
                map.remove(name);
            }
        }
    }
    serde_json::to_string(&v).map_err(bad)
}

/// Decodes an outcome written by [`encode`] (or in full).
///
/// Errors: [`EngineError::Corrupt`] when it does not parse.
pub(super) fn decode(job_id: &str, raw: &str) -> Result<RunOutcome, EngineError> {
    let corrupt = |e: serde_json::Error| EngineError::Corrupt { job_id: job_id.to_owned(), message: format!("run outcome: {e}") };
    let mut map: Map<String, Value> = serde_json::from_str(raw).map_err(corrupt)?;
    for (name, empty) in defaults() {
        map.entry(name).or_insert(empty);
    }
    serde_json::from_value(Value::Object(map)).map_err(corrupt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use skillforge_runner::ExitClass;

    #[test]
    fn a_quiet_outcome_is_short_and_every_outcome_round_trips() {
        let quiet = RunOutcome {
            exit: ExitClass::Passed,
            exit_code: Some(0),
            duration_ms: 1234,
            stdout_tail: String::new(),
            stderr_tail: String::new(),
            detail: Value::Null,
        };
        let short = encode("j", &quiet).unwrap();
        assert!(short.len() <= 64, "{short}");
        assert_eq!(decode("j", &short).unwrap(), quiet);
        let loud = RunOutcome {
            exit: ExitClass::Failed { code: 2 },
            exit_code: None,
            duration_ms: 1,
            stdout_tail: "out".into(),
            stderr_tail: "err".into(),
            detail: serde_json::json!({"k": [1, 2]}),
        };
        assert_eq!(decode("j", &encode("j", &loud).unwrap()).unwrap(), loud);
        assert_eq!(decode("j", &serde_json::to_string(&loud).unwrap()).unwrap(), loud, "full JSON too");
    }
}
