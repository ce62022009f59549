//! The run outcome as the job hash stores it (field `o`). A quiet run's outcome (no output
//! tails, a `null` detail, an exit class without a text) is a short positional text,
//! `~{exit}:{exit_code}:{duration_ms}` with `{exit}` = `p` passed, `f{code}` failed, `t` timed
//! out, `k{signal}` killed, `c` censored and an empty `{exit_code}` for none: `~p:0:12` (layout
//! 4). Any other outcome is the JSON of [`RunOutcome`] without its empty parts (empty output
//! tails, a `null` detail or exit code), so it too mostly stays under the hash's 64-byte value
//! limit (see "The job hash" in `redis.rs`). Full JSON (older builds) decodes the same way.

use serde_json::{Map, Value};
use skillforge_runner::{ExitClass, RunOutcome};

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
    if let Some(short) = quiet(outcome) {
        return Ok(short);
    }
    let bad = |e: serde_json::Error| {
        EngineError::redis(format!("encode run outcome of job `{job_id}`: {e}"))
    };
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
    if let Some(short) = raw.strip_prefix('~') {
        return unquiet(short).ok_or_else(|| EngineError::Corrupt {
            job_id: job_id.to_owned(),
            message: format!("run outcome `{raw}`"),
        });
    }
    let corrupt = |e: serde_json::Error| EngineError::Corrupt {
        job_id: job_id.to_owned(),
        message: format!("run outcome: {e}"),
    };
    let mut map: Map<String, Value> = serde_json::from_str(raw).map_err(corrupt)?;
    for (name, empty) in defaults() {
        map.entry(name).or_insert(empty);
    }
    serde_json::from_value(Value::Object(map)).map_err(corrupt)
}

/// The positional text of a quiet outcome (see the module doc), `None` for any other.
fn quiet(o: &RunOutcome) -> Option<String> {
    if !o.stdout_tail.is_empty() || !o.stderr_tail.is_empty() || !o.detail.is_null() {
        return None;
    }
    let exit = match &o.exit {
        ExitClass::Passed => "p".to_owned(),
        ExitClass::Failed { code } => format!("f{code}"),
        ExitClass::TimedOut => "t".to_owned(),
        ExitClass::Killed { signal } => format!("k{signal}"),
        ExitClass::Censored => "c".to_owned(),
        ExitClass::NotRunnable { .. } => return None,
    };
    let code = o.exit_code.map(|c| c.to_string()).unwrap_or_default();
    Some(format!("~{exit}:{code}:{}", o.duration_ms))
}

/// The outcome of a quiet outcome's text after its `~`.
fn unquiet(s: &str) -> Option<RunOutcome> {
    let mut parts = s.split(':');
    let (exit, code, duration) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let (tag, arg) = exit.split_at(exit.char_indices().nth(1).map_or(exit.len(), |(i, _)| i));
    let exit = match (tag, arg) {
        ("p", "") => ExitClass::Passed,
        ("f", n) => ExitClass::Failed {
            code: n.parse().ok()?,
        },
        ("t", "") => ExitClass::TimedOut,
        ("k", n) => ExitClass::Killed {
            signal: n.parse().ok()?,
        },
        ("c", "") => ExitClass::Censored,
        _ => return None,
    };
    Some(RunOutcome {
        exit,
        exit_code: if code.is_empty() {
            None
        } else {
            Some(code.parse().ok()?)
        },
        duration_ms: duration.parse().ok()?,
        stdout_tail: String::new(),
        stderr_tail: String::new(),
        detail: Value::Null,
    })
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
        assert_eq!(short, "~p:0:1234");
        assert_eq!(decode("j", &short).unwrap(), quiet);
        for exit in [
            ExitClass::Failed { code: -3 },
            ExitClass::TimedOut,
            ExitClass::Killed { signal: 9 },
            ExitClass::Censored,
        ] {
            let o = RunOutcome {
                exit,
                exit_code: None,
                ..quiet.clone()
            };
            let text = encode("j", &o).unwrap();
            assert!(text.starts_with('~') && text.len() <= 12, "{text}");
            assert_eq!(decode("j", &text).unwrap(), o);
        }
        let unrunnable = RunOutcome {
            exit: ExitClass::NotRunnable {
                reason: "no `x`".into(),
            },
            ..quiet.clone()
        };
        let json = encode("j", &unrunnable).unwrap();
        assert!(
            json.starts_with('{'),
            "a text-bearing exit class stays JSON: {json}"
        );
        assert_eq!(decode("j", &json).unwrap(), unrunnable);
        for bad in ["~", "~p:0", "~x:0:1", "~f:0:1", "~p:0:1:2", "~p:a:1"] {
            assert!(decode("j", bad).is_err(), "{bad}");
        }
        let loud = RunOutcome {
            exit: ExitClass::Failed { code: 2 },
            exit_code: None,
            duration_ms: 1,
            stdout_tail: "out".into(),
            stderr_tail: "err".into(),
            detail: serde_json::json!({"k": [1, 2]}),
        };
        assert_eq!(decode("j", &encode("j", &loud).unwrap()).unwrap(), loud);
        assert_eq!(
            decode("j", &serde_json::to_string(&loud).unwrap()).unwrap(),
            loud,
            "full JSON too"
        );
    }
}
