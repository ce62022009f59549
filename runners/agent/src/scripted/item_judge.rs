//! Scripted optimize-loop judges: a deterministic stand-in for the judge sub-agent of the
//! optimize loop, so its tests dispatch real `agent` judge jobs without a model.
//!
//! When [`super::edits::SCRIPTED_EDITS_ENV`] names a plan whose `judge` section is set and the
//! prompt is an optimize judge prompt (it contains [`JUDGE_MARKER`] and an `<items>` JSON array),
//! the scripted agent scores every item by the first rule whose `when` occurs in the item's JSON
//! text (else `default`) and answers with the JSON array the judge contract asks for:
//!
//! ```json
//! {"experiments": [],
//!  "judge": {"field": "score",
//!            "rules": [{"when": "billing", "score": 2, "reason": "mixed topics",
//!                       "feedback": "split billing from login"},
//!                      {"when": "terse", "score": 3, "reason": "short"},
//!                      {"when": "skipme", "omit": true}],
//!            "default": {"score": 5, "reason": "one topic", "feedback": "keeps one topic"},
//!            "fail_when": "unjudgeable"}}
//! ```
//!
//! A rule without `feedback` leaves it out of the reply (the loop re-dispatches such a batch
//! once); `omit` leaves the item out; a batch with an item containing `fail_when` makes the agent
//! exit 3 with nothing on stdout (a judge that cannot run). A batch with an item containing
//! `sleep_when` sleeps `sleep_ms` before answering (a judge still running when a test kills the
//! orchestrator).

use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::AgentError;

/// The first line of the optimize judge prompt.
pub const JUDGE_MARKER: &str =
    "You are a quality judge evaluating output items for an optimization experiment.";
/// The first line of the optimize singleton judge prompt.
pub const SINGLETON_MARKER: &str = "You are a quality judge evaluating singleton items";

/// Whether `prompt` is one of the optimize loop's judge prompts.
pub fn is_judge_prompt(prompt: &str) -> bool {
    prompt.contains(JUDGE_MARKER) || prompt.contains(SINGLETON_MARKER)
}

/// The `singleton` part of a judge plan: the reply fields per singleton, first match wins.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SingletonPlan {
    /// Rules: `when` (text the item's JSON contains) and the reply `fields`.
    #[serde(default)]
    pub rules: Vec<SingletonRule>,
    /// Fields of a singleton no rule matches.
    pub default: serde_json::Map<String, Value>,
}

/// One singleton rule.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SingletonRule {
    /// Text the item's JSON must contain.
    pub when: String,
    /// The reply fields.
    pub fields: serde_json::Map<String, Value>,
}

/// The `judge` section of an edit plan.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgePlan {
    /// The rubric's score field (default `score`).
    #[serde(default = "score_field")]
    pub field: String,
    /// Rules, first match wins.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// The score of an item no rule matches.
    pub default: Rule,
    /// An item containing this text makes the whole call fail.
    #[serde(default)]
    pub fail_when: Option<String>,
    /// Singleton evaluation replies.
    #[serde(default)]
    pub singleton: Option<SingletonPlan>,
    /// A batch with an item containing this text sleeps [`JudgePlan::sleep_ms`] first.
    #[serde(default)]
    pub sleep_when: Option<String>,
    /// Milliseconds a `sleep_when` batch sleeps before answering.
    #[serde(default)]
    pub sleep_ms: u64,
}

fn score_field() -> String {
    "score".to_owned()
}

/// One scoring rule.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Text the item's JSON must contain (ignored on `default`).
    #[serde(default)]
    pub when: String,
    /// The score.
    #[serde(default)]
    pub score: f64,
    /// The reason.
    #[serde(default)]
    pub reason: String,
    /// The feedback; absent ⇒ left out of the reply.
    #[serde(default)]
    pub feedback: Option<String>,
    /// Leave the item out of the reply.
    #[serde(default)]
    pub omit: bool,
}

/// What the scripted judge does with one prompt.
#[derive(Debug, Clone, PartialEq)]
pub enum JudgeRun {
    /// The `scripted_jsonl` transcript whose final message is the reply.
    Reply(String),
    /// The call fails (exit 3, the message on stderr).
    Fail(String),
}

/// The judge run for `prompt` when it is an optimize judge prompt and `plan` has a judge section;
/// `Ok(None)` otherwise.
///
/// # Errors
/// [`AgentError::Scripted`] when the prompt's `<items>` are not a JSON array.
pub fn judge_run(prompt: &str, plan: Option<&JudgePlan>) -> Result<Option<JudgeRun>, AgentError> {
    let Some(plan) = plan else { return Ok(None) };
    if prompt.contains(SINGLETON_MARKER) {
        return singleton_run(prompt, plan.singleton.as_ref());
    }
    if !prompt.contains(JUDGE_MARKER) {
        return Ok(None);
    }
    let items = prompt
        .split_once("<items>")
        .and_then(|(_, rest)| rest.split_once("</items>"))
        .map(|(inside, _)| inside.trim())
        .ok_or_else(|| AgentError::Scripted("judge prompt has no <items> block".into()))?;
    let items: Vec<Value> = serde_json::from_str(items).map_err(|e| {
        AgentError::Scripted(format!("judge prompt <items> is not a JSON array: {e}"))
    })?;
    if let Some(when) = plan.sleep_when.as_deref().filter(|w| !w.is_empty())
        && items.iter().any(|item| item.to_string().contains(when))
    {
        std::thread::sleep(std::time::Duration::from_millis(plan.sleep_ms));
    }
    let mut reply = Vec::new();
    for item in &items {
        let text = item.to_string();
        if plan.fail_when.as_deref().is_some_and(|f| text.contains(f)) {
            return Ok(Some(JudgeRun::Fail(
                "scripted judge: this batch cannot be judged".into(),
            )));
        }
        let rule = plan
            .rules
            .iter()
            .find(|r| !r.when.is_empty() && text.contains(&r.when))
            .unwrap_or(&plan.default);
        if rule.omit {
            continue;
        }
        let id = item
            .get("id")
            .or_else(|| item.get("item_id"))
            .cloned()
            .unwrap_or(Value::Null);
        let mut el = json!({"item_id": id, "reason": rule.reason, "ambiguous": false});
        el[plan.field.as_str()] = json!(rule.score);
        if let Some(f) = &rule.feedback {
            el["feedback"] = json!(f);
        }
        reply.push(el);
    }
    let start = json!({"type": "start", "task": "item_judge", "prompt_sha256": hex::encode(Sha256::digest(prompt.as_bytes()))});
    let fin = json!({"type": "final", "text": Value::Array(reply).to_string()});
    Ok(Some(JudgeRun::Reply(format!("{start}\n{fin}\n"))))
}

fn singleton_run(
    prompt: &str,
    plan: Option<&SingletonPlan>,
) -> Result<Option<JudgeRun>, AgentError> {
    let Some(plan) = plan else { return Ok(None) };
    let items = prompt
        .split_once("<singletons>")
        .and_then(|(_, rest)| rest.split_once("</singletons>"))
        .map(|(inside, _)| inside.trim())
        .ok_or_else(|| AgentError::Scripted("singleton prompt has no <singletons> block".into()))?;
    let items: Vec<Value> = serde_json::from_str(items).map_err(|e| {
        AgentError::Scripted(format!(
            "singleton prompt <singletons> is not a JSON array: {e}"
        ))
    })?;
    let reply: Vec<Value> = items
        .iter()
        .map(|item| {
            let text = item.to_string();
            let fields = plan
                .rules
                .iter()
                .find(|r| text.contains(&r.when))
                .map_or(&plan.default, |r| &r.fields);
            let mut el = fields.clone();
            el.insert(
                "item_id".into(),
                item.get("id")
                    .or_else(|| item.get("item_id"))
                    .cloned()
                    .unwrap_or(Value::Null),
            );
            Value::Object(el)
        })
        .collect();
    let start = json!({"type": "start", "task": "singleton_judge", "prompt_sha256": hex::encode(Sha256::digest(prompt.as_bytes()))});
    let fin = json!({"type": "final", "text": Value::Array(reply).to_string()});
    Ok(Some(JudgeRun::Reply(format!("{start}\n{fin}\n"))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> JudgePlan {
        serde_json::from_value(json!({"rules": [{"when": "billing", "score": 2, "reason": "mixed", "feedback": "split it"}, {"when": "terse", "score": 3}, {"when": "skipme", "omit": true}], "default": {"score": 5, "reason": "clean", "feedback": "fine"}, "fail_when": "unjudgeable"})).unwrap()
    }

    fn prompt(items: &Value) -> String {
        format!("{JUDGE_MARKER}\n<rubric>\nr\n</rubric>\n\n<items>\n{items}\n</items>\n")
    }

    fn reply(run: JudgeRun) -> Vec<Value> {
        let JudgeRun::Reply(t) = run else {
            panic!("{run:?}")
        };
        let fin: Value = serde_json::from_str(t.lines().nth(1).unwrap()).unwrap();
        serde_json::from_str(fin["text"].as_str().unwrap()).unwrap()
    }

    #[test]
    fn items_are_scored_by_the_first_matching_rule() {
        let items = json!([{"id": "a", "content": "login and billing"}, {"id": "b", "content": "login"}, {"id": "c", "content": "terse"}, {"id": "d", "content": "skipme"}]);
        let r = reply(judge_run(&prompt(&items), Some(&plan())).unwrap().unwrap());
        assert_eq!(r.len(), 3, "the omitted item is left out: {r:?}");
        assert_eq!(
            (
                r[0]["item_id"].as_str(),
                r[0]["score"].as_f64(),
                r[0]["feedback"].as_str()
            ),
            (Some("a"), Some(2.0), Some("split it"))
        );
        assert_eq!(r[1]["score"].as_f64(), Some(5.0));
        assert!(
            r[2].get("feedback").is_none(),
            "a rule without feedback leaves it out"
        );
        assert!(matches!(
            judge_run(
                &prompt(&json!([{"id": "x", "content": "unjudgeable"}])),
                Some(&plan())
            )
            .unwrap(),
            Some(JudgeRun::Fail(_))
        ));
        assert!(judge_run("task: judge\n", Some(&plan())).unwrap().is_none());
        assert!(judge_run(&prompt(&items), None).unwrap().is_none());
        assert!(
            judge_run(
                &format!("{JUDGE_MARKER}\n<items>\nnot json\n</items>"),
                Some(&plan())
            )
            .is_err()
        );
        let mut p = plan();
        p.singleton = Some(serde_json::from_value(json!({"rules": [{"when": "refund", "fields": {"should_cluster": true}}], "default": {"should_cluster": false}})).unwrap());
        let singles = format!(
            "{SINGLETON_MARKER} -- x\n<singletons>\n[{{\"id\": \"s-1\", \"content\": \"refund\"}}, {{\"id\": \"s-2\", \"content\": \"other\"}}]\n</singletons>\n"
        );
        let r = reply(judge_run(&singles, Some(&p)).unwrap().unwrap());
        assert_eq!(
            (
                r[0]["item_id"].as_str(),
                r[0]["should_cluster"].as_bool(),
                r[1]["should_cluster"].as_bool()
            ),
            (Some("s-1"), Some(true), Some(false))
        );
    }
}
