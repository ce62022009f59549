//! Compact JSON of the stored `JobSpec` (`job_specs.spec`) and `RunOutcome` (`jobs.outcome`):
//! top-level fields equal to a frozen baseline are left out when written and filled back in
//! when read (issue 19: a no-op job's spec was 258 bytes, most of a queued job's size).
//!
//! The baselines below are part of the file format, not copies of `JobSpec::new`'s defaults: a
//! row written with one baseline must read back the same under every later build, so they never
//! change (a different baseline needs a migration rewriting every row). A row holding every field
//! (written before schema v5) reads back unchanged, since nothing is missing from it.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// The `JobSpec` fields left out of `job_specs.spec` when equal (schema v5 on).
const SPEC_BASELINE: &str = r#"{"queue":"default","workflow":"adhoc","stage":"run","payload":{},
"idempotency_key":null,"max_attempts":3,"timeout_ms":3600000,"heartbeat_ms":2000,
"stale_after_ms":15000,"idempotent":true,"not_before_ms":null,"retry_failed_runs":true,"locks":[]}"#;

/// The `RunOutcome` fields left out of `jobs.outcome` when equal (schema v5 on).
const OUTCOME_BASELINE: &str = r#"{"exit":{"status":"passed"},"exit_code":0,"duration_ms":0,
"stdout_tail":"","stderr_tail":"","detail":null}"#;

fn baseline(text: &str) -> Map<String, Value> {
    match serde_json::from_str(text) {
        Ok(Value::Object(map)) => map,
        _ => unreachable!("the baselines are JSON objects"),
    }
}

static SPEC: std::sync::LazyLock<Map<String, Value>> =
    std::sync::LazyLock::new(|| baseline(SPEC_BASELINE));
static OUTCOME: std::sync::LazyLock<Map<String, Value>> =
    std::sync::LazyLock::new(|| baseline(OUTCOME_BASELINE));

/// Which stored document a value is.
#[derive(Clone, Copy)]
pub(super) enum Doc {
    /// `job_specs.spec` (a `JobSpec`).
    Spec,
    /// `jobs.outcome` (a `RunOutcome`).
    Outcome,
}

impl Doc {
    fn baseline(self) -> &'static Map<String, Value> {
        match self {
            Doc::Spec => &SPEC,
            Doc::Outcome => &OUTCOME,
        }
    }
}

/// `value` as compact JSON text: its top-level fields equal to `doc`'s baseline left out.
///
/// Errors with serde's message when `value` cannot be encoded.
pub(super) fn encode<T: Serialize>(doc: Doc, value: &T) -> Result<String, serde_json::Error> {
    let mut json = serde_json::to_value(value)?;
    if let Value::Object(map) = &mut json {
        map.retain(|k, v| doc.baseline().get(k) != Some(v));
    }
    serde_json::to_string(&json)
}

/// Decodes JSON text written by [`encode`] (or a full document of an older schema): fields
/// missing from it take `doc`'s baseline value.
///
/// Errors with serde's message when `text` is not JSON of a `T`.
pub(super) fn decode<T: DeserializeOwned>(doc: Doc, text: &str) -> Result<T, serde_json::Error> {
    let mut json: Value = serde_json::from_str(text)?;
    if let Value::Object(map) = &mut json {
        for (k, v) in doc.baseline() {
            if !map.contains_key(k) {
                map.insert(k.clone(), v.clone());
            }
        }
    }
    serde_json::from_value(json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::JobSpec;
    use skillforge_runner::{ExitClass, RunOutcome};

    #[test]
    fn a_default_spec_is_stored_as_its_kind_and_reads_back_equal() {
        let spec = JobSpec::new("noop", serde_json::json!({}));
        let text = encode(Doc::Spec, &spec).unwrap();
        assert_eq!(text, r#"{"kind":"noop"}"#);
        assert_eq!(decode::<JobSpec>(Doc::Spec, &text).unwrap(), spec);
    }

    #[test]
    fn fields_that_differ_from_the_baseline_are_kept_and_full_rows_read_unchanged() {
        let mut spec = JobSpec::new("shell", serde_json::json!({"cmd": "true"}));
        spec.queue = "gpu".into();
        spec.max_attempts = 1;
        spec.idempotent = false;
        spec.idempotency_key = Some("k".into());
        spec.not_before_ms = Some(5);
        spec.locks = vec!["l".into()];
        let text = encode(Doc::Spec, &spec).unwrap();
        assert_eq!(decode::<JobSpec>(Doc::Spec, &text).unwrap(), spec);
        let full = serde_json::to_string(&spec).unwrap();
        assert_eq!(
            decode::<JobSpec>(Doc::Spec, &full).unwrap(),
            spec,
            "a pre-v5 row"
        );
        let outcome = RunOutcome {
            exit: ExitClass::Failed { code: 3 },
            exit_code: Some(3),
            duration_ms: 12,
            stdout_tail: "out".into(),
            stderr_tail: String::new(),
            detail: serde_json::Value::Null,
        };
        let text = encode(Doc::Outcome, &outcome).unwrap();
        assert!(
            !text.contains("stderr_tail")
                && !text.contains("detail")
                && text.contains("stdout_tail"),
            "{text}"
        );
        assert_eq!(decode::<RunOutcome>(Doc::Outcome, &text).unwrap(), outcome);
    }
}
