//! Resolving the evaluator profile a run names, and classifying its checks into stages.
//!
//! The base profile is the contract's `build_evaluator_profile` (facts §1 `BuildEvaluatorProfile`)
//! from the run's evaluator config (run metadata minus `mode`/`feedback_source`, exactly what the
//! export writes as `evaluator_config`). skillforge then overlays what the config spells out, so a
//! generic profile can carry real checks and judge prompts without a contract change:
//!
//! * `checks`: a list of `EvaluatorCheckConfig`; an entry whose `id` matches a base check
//!   replaces it, others are appended (in the config's order);
//! * `check_config`: `{check_id: config}`, the `config` of a base check (e.g. the
//!   `required_files` of `landing_page_v1`);
//! * `judge_prompt_templates` (`{task_kind: prompt}`), `judge_prompt_version`, `judge_runtime`:
//!   copied into `judge.config` (seed "Training Package": the judge's config carries per-task_kind
//!   judge prompts and a `judge_prompt_version`).
//!
//! The exported `evaluator_profile` is still the base profile (its `metadata` is the raw config,
//! overlay keys included); each score's `stage_status` details record the checks actually run.

use serde_json::{Map, Value};
use skillforge_contract::{EvaluatorCheckConfig, EvaluatorProfile, build_evaluator_profile};
use skillforge_store::review::package::evaluator_config;

/// Evaluator ids with a built-in meaning (facts §1 `BuildEvaluatorProfile`): the landing-page
/// profile under both its names, and `generic` (no checks; the judge only).
pub const BUILTIN_EVALUATOR_IDS: &[&str] = &["landing_page_v1", "vue_landing_page_v1", "generic"];

/// The evaluator ids `review evaluate --evaluator` accepts for a run with `metadata`: the
/// built-ins, then the id the run's own evaluator config names (any other id builds a bare
/// generic profile, which is almost always a typo).
pub fn known_evaluator_ids(metadata: Option<&Value>) -> Vec<String> {
    let mut ids: Vec<String> = BUILTIN_EVALUATOR_IDS
        .iter()
        .map(|id| (*id).to_owned())
        .collect();
    if let Some(profile) = effective_profile(metadata, None)
        && !ids
            .iter()
            .any(|id| id.eq_ignore_ascii_case(&profile.profile_id))
    {
        ids.push(profile.profile_id);
    }
    ids
}

/// Which stage a check belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckClass {
    /// A cheap artifact check (`artifact_contract`, `required_files`, `required_sections`): stage 1.
    Artifact,
    /// A render adapter (`playwright`, `render_smoke`, `render`): stage 2.
    Render,
    /// A type skillforge does not know: recorded in stage 1 as `skipped`, never as a pass.
    Unknown,
}

/// The stage of a check type (case-insensitive).
pub fn check_class(check_type: &str) -> CheckClass {
    match check_type.trim().to_ascii_lowercase().as_str() {
        "artifact_contract" | "required_files" | "required_sections" => CheckClass::Artifact,
        "playwright" | "render_smoke" | "render" => CheckClass::Render,
        _ => CheckClass::Unknown,
    }
}

/// The profile to evaluate with: `evaluator_override` (when non-empty) or the config's
/// `evaluator_id` / `evaluation.evaluator_id`, judge model from `judge_model`, then the overlay
/// described in the module docs. `metadata` is the run's metadata object. Returns `None` when no
/// evaluator is named.
pub fn effective_profile(
    metadata: Option<&Value>,
    evaluator_override: Option<&str>,
) -> Option<EvaluatorProfile> {
    let config = evaluator_config(metadata);
    let field = |key: &str| -> String {
        config
            .as_ref()
            .and_then(|c| {
                c.get(key)
                    .or_else(|| c.get("evaluation").and_then(|e| e.get(key)))
            })
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let id = evaluator_override
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .unwrap_or_else(|| field("evaluator_id"));
    let mut profile = build_evaluator_profile(&id, &field("judge_model"), config.clone())?;
    let Some(Value::Object(config)) = config else {
        return Some(profile);
    };
    if let Some(Value::Array(list)) = config.get("checks") {
        for check in list
            .iter()
            .filter_map(|v| serde_json::from_value::<EvaluatorCheckConfig>(v.clone()).ok())
        {
            match profile
                .checks
                .iter_mut()
                .find(|c| !c.id.is_empty() && c.id == check.id)
            {
                Some(slot) => *slot = check,
                None => profile.checks.push(check),
            }
        }
    }
    if let Some(Value::Object(per_check)) = config.get("check_config") {
        for check in &mut profile.checks {
            if let Some(value) = per_check.get(&check.id) {
                check.config = Some(value.clone());
            }
        }
    }
    if let Some(judge) = &mut profile.judge {
        let mut judge_config = match judge.config.take() {
            Some(Value::Object(map)) => map,
            _ => Map::new(),
        };
        for (from, to) in [
            ("judge_prompt_templates", "judge_prompt_templates"),
            ("judge_prompt_version", "judge_prompt_version"),
            ("judge_runtime", "runtime"),
        ] {
            if let Some(value) = config.get(from) {
                judge_config.insert(to.to_owned(), value.clone());
            }
        }
        judge.config = (!judge_config.is_empty()).then_some(Value::Object(judge_config));
    }
    Some(profile)
}

/// The judge runtime the profile names (`judge.config.runtime`, from the config's
/// `judge_runtime`); `None` when unset or empty.
pub fn judge_runtime_of(profile: &EvaluatorProfile) -> Option<String> {
    profile
        .judge
        .as_ref()?
        .config
        .as_ref()?
        .get("runtime")?
        .as_str()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}
