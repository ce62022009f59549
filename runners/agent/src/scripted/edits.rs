//! Scripted experiment workers: real edits in the work dir, from an edit plan, so the optimize
//! loop's tests run the real `agent` runner against a real repository without a model.
//!
//! When [`SCRIPTED_EDITS_ENV`] names a plan file and the prompt is an optimize experiment brief
//! (it contains [`EXPERIMENT_MARKER`] and a `Hypothesis: …` line), the scripted agent applies the
//! first plan entry whose `when` occurs in that hypothesis line, relative to its working
//! directory, and answers with the entry's `message`. The plan is JSON:
//!
//! ```json
//! {"experiments": [
//!   {"when": "lookup table",
//!    "edits": [{"path": "src/count.sh", "replace": "slow", "with": "fast"},
//!              {"path": "src/new.sh", "write": "echo hi\n"},
//!              {"path": "src/old.sh", "delete": true}],
//!    "message": "replaced the loop", "sleep_ms": 0}
//! ]}
//! ```
//!
//! An entry may also hold the worker back (`"wait_for": "/abs/path"`, until the file exists) or
//! end its first runs on an API error (`"api_error": {"status": 529, "times": 3, "tally":
//! "/abs/tally"}`: a transcript `error` event, no edit).
//!
//! Edits are idempotent (a `replace` whose text is already gone is a no-op), so a re-run attempt
//! leaves the same tree.

use std::path::Path;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::AgentError;

/// Environment variable naming the edit plan (passed through by the `scripted` profile).
pub const SCRIPTED_EDITS_ENV: &str = "SKILLFORGE_SCRIPTED_EDITS";
/// The first line of the optimize experiment brief.
pub const EXPERIMENT_MARKER: &str = "You are an optimization experiment worker.";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Plan {
    #[serde(default)]
    experiments: Vec<PlanEntry>,
    /// The optimize judges' scoring ([`super::item_judge`]).
    #[serde(default)]
    judge: Option<super::item_judge::JudgePlan>,
}

fn read_plan(plan_path: &str) -> Result<Plan, AgentError> {
    let text = std::fs::read_to_string(plan_path)
        .map_err(|e| AgentError::Scripted(format!("read edit plan `{plan_path}`: {e}")))?;
    serde_json::from_str(&text)
        .map_err(|e| AgentError::Scripted(format!("edit plan `{plan_path}`: {e}")))
}

/// The scripted judge run for `prompt` when it is an optimize judge prompt and the plan at
/// `plan_path` has a `judge` section ([`super::item_judge::judge_run`]); `Ok(None)` otherwise.
///
/// # Errors
/// [`AgentError::Scripted`] for an unreadable plan or judge prompt.
pub fn judge_transcript(
    prompt: &str,
    plan_path: Option<&str>,
) -> Result<Option<super::item_judge::JudgeRun>, AgentError> {
    let Some(plan_path) = plan_path.filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    if !super::item_judge::is_judge_prompt(prompt) {
        return Ok(None);
    }
    super::item_judge::judge_run(prompt, read_plan(plan_path)?.judge.as_ref())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanEntry {
    when: String,
    #[serde(default)]
    edits: Vec<Edit>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    sleep_ms: Option<u64>,
    /// Waits, before editing, until this absolute path exists (at most
    /// [`super::directive::WAIT_FOR_BOUND`], then the run fails): a worker still out.
    #[serde(default)]
    wait_for: Option<String>,
    /// Ends the run on this API error instead of editing, while fewer than `times` runs have
    /// (counted in the `tally` file): a runtime at capacity or rate-limited.
    #[serde(default)]
    api_error: Option<PlanApiError>,
    /// Remote worker knob: work from this rev and report it as `base_sha` ([`super::remote_worker`]).
    #[serde(default)]
    remote_base: Option<String>,
    /// Remote worker knob: report these candidate aggregates instead of the measured ones.
    #[serde(default)]
    claim: std::collections::BTreeMap<String, f64>,
}

/// `api_error` of a plan entry: the first `times` runs (one line each appended to the absolute
/// `tally` file) end with a transcript `error` event of `status` and `message`, no edit made.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanApiError {
    status: u16,
    #[serde(default)]
    message: Option<String>,
    times: u32,
    tally: String,
}

impl PlanApiError {
    /// Counts this run in the tally; whether it is one of the first `times`.
    fn fires(&self) -> Result<bool, AgentError> {
        let seen = std::fs::read_to_string(&self.tally)
            .map(|t| t.lines().count())
            .unwrap_or(0);
        if seen >= self.times as usize {
            return Ok(false);
        }
        use std::io::Write;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.tally)
            .and_then(|mut f| f.write_all(b"api error\n"))
            .map_err(|e| {
                AgentError::Scripted(format!(
                    "append to the api_error tally `{}`: {e}",
                    self.tally
                ))
            })?;
        Ok(true)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Edit {
    path: String,
    #[serde(default)]
    write: Option<String>,
    #[serde(default)]
    replace: Option<String>,
    #[serde(default)]
    with: Option<String>,
    #[serde(default)]
    delete: bool,
}

/// The experiment transcript for `prompt` when it is an experiment brief and a plan is set:
/// applies the matching entry's edits in `workdir` and returns the `scripted_jsonl` transcript;
/// `Ok(None)` when the prompt is not a brief or no plan is configured.
///
/// # Errors
/// [`AgentError::Scripted`] for an unreadable plan or an edit that cannot be applied.
pub fn experiment_transcript(
    prompt: &str,
    plan_path: Option<&str>,
    workdir: &Path,
) -> Result<Option<String>, AgentError> {
    let Some(plan_path) = plan_path.filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    if !prompt.contains(EXPERIMENT_MARKER) {
        return Ok(None);
    }
    let hypothesis = prompt
        .lines()
        .find_map(|l| l.trim().strip_prefix("Hypothesis: "))
        .unwrap_or("");
    let plan = read_plan(plan_path)?;
    let entry = plan
        .experiments
        .iter()
        .find(|e| hypothesis.contains(&e.when));
    let start = serde_json::json!({"type": "start", "task": "experiment", "prompt_sha256": hex::encode(Sha256::digest(prompt.as_bytes()))});
    if let Some(path) = entry.and_then(|e| e.wait_for.as_deref()) {
        let until = std::time::Instant::now() + super::directive::WAIT_FOR_BOUND;
        while !Path::new(path).exists() {
            if std::time::Instant::now() >= until {
                return Err(AgentError::Scripted(format!(
                    "`{path}` did not appear within {} s",
                    super::directive::WAIT_FOR_BOUND.as_secs()
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    if let Some(error) = entry.and_then(|e| e.api_error.as_ref())
        && error.fires()?
    {
        let message = error
            .message
            .clone()
            .unwrap_or_else(|| format!("API Error: {} (scripted)", error.status));
        let event =
            serde_json::json!({"type": "error", "status": error.status, "message": message});
        return Ok(Some(format!("{start}\n{event}\n")));
    }
    let message = match entry {
        None => format!("no scripted edit for hypothesis `{hypothesis}`"),
        Some(entry) => {
            if let Some(ms) = entry.sleep_ms {
                std::thread::sleep(std::time::Duration::from_millis(ms));
            }
            let applied = entry.message.clone().unwrap_or_else(|| {
                format!("applied {} edit(s) for `{}`", entry.edits.len(), entry.when)
            });
            match super::remote_worker::parse(prompt) {
                // a remote brief: the worker's own clone, measured and pushed as the delta says
                Some(brief) => {
                    let report = super::remote_worker::run(
                        &brief,
                        entry.remote_base.as_deref(),
                        &entry.claim,
                        workdir,
                        |checkout| entry.edits.iter().try_for_each(|e| apply(e, checkout)),
                    )?;
                    if report.contains("blocker:") {
                        report
                    } else {
                        format!("{applied}\n{report}")
                    }
                }
                None => {
                    for edit in &entry.edits {
                        apply(edit, workdir)?;
                    }
                    applied
                }
            }
        }
    };
    let fin = serde_json::json!({"type": "final", "text": message});
    Ok(Some(format!("{start}\n{fin}\n")))
}

fn apply(edit: &Edit, workdir: &Path) -> Result<(), AgentError> {
    if edit.path.starts_with('/') || edit.path.split('/').any(|c| c == "..") {
        return Err(AgentError::Scripted(format!(
            "edit path `{}` leaves the work dir",
            edit.path
        )));
    }
    let path = workdir.join(&edit.path);
    let fail = |what: &str, e: std::io::Error| {
        AgentError::Scripted(format!("{what} `{}`: {e}", path.display()))
    };
    if edit.delete {
        if path.exists() {
            std::fs::remove_file(&path).map_err(|e| fail("delete", e))?;
        }
        return Ok(());
    }
    if let Some(content) = &edit.write {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| fail("create dir for", e))?;
        }
        return std::fs::write(&path, content).map_err(|e| fail("write", e));
    }
    if let (Some(from), Some(to)) = (&edit.replace, &edit.with) {
        let text = std::fs::read_to_string(&path).map_err(|e| fail("read", e))?;
        if text.contains(from.as_str()) {
            std::fs::write(&path, text.replacen(from.as_str(), to, 1))
                .map_err(|e| fail("write", e))?;
        }
        return Ok(());
    }
    Err(AgentError::Scripted(format!(
        "edit of `{}` needs `write`, `replace` + `with`, or `delete`",
        edit.path
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_edits_are_applied_for_the_matching_hypothesis_only() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/a.sh"), "slow slow\n").unwrap();
        let plan = dir.path().join("plan.json");
        std::fs::write(&plan, r#"{"experiments":[{"when":"faster","edits":[{"path":"src/a.sh","replace":"slow","with":"fast"},{"path":"src/b.sh","write":"x\n"}],"message":"done"}]}"#).unwrap();
        let brief = format!("{EXPERIMENT_MARKER}\nHypothesis: make it faster\n");
        let t = experiment_transcript(&brief, plan.to_str(), dir.path())
            .unwrap()
            .expect("a brief");
        assert!(t.contains("\"final\"") && t.contains("done"), "{t}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("src/a.sh")).unwrap(),
            "fast slow\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("src/b.sh")).unwrap(),
            "x\n"
        );
        let other = format!("{EXPERIMENT_MARKER}\nHypothesis: unrelated\n");
        assert!(
            experiment_transcript(&other, plan.to_str(), dir.path())
                .unwrap()
                .unwrap()
                .contains("no scripted edit")
        );
        assert!(
            experiment_transcript("task: judge\n", plan.to_str(), dir.path())
                .unwrap()
                .is_none()
        );
        assert!(
            experiment_transcript(&brief, None, dir.path())
                .unwrap()
                .is_none()
        );
        let escape = dir.path().join("bad.json");
        std::fs::write(
            &escape,
            r#"{"experiments":[{"when":"faster","edits":[{"path":"../x","write":"y"}]}]}"#,
        )
        .unwrap();
        assert!(experiment_transcript(&brief, escape.to_str(), dir.path()).is_err());
    }
}
