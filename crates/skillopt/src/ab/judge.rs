//! The cross-family LLM judge of Mode B (seed: SkillOpt, "Cross-family LLM-judge auto-pairwise
//! (off by default, #483)"; S-75..S-80; resolutions 2, 3).
//!
//! The judge sees the same shuffled Option A / Option B as the human, never which is champion or
//! challenger ([`judge_prompt`]); its reply is read leniently by [`parse_verdict`] into
//! `Parsed(pick) | Tie | Unreadable`, and Mode B's policy ([`judge_pick`]) drops both `Tie` and
//! `Unreadable` (no row, no error). Judge rows are evidence only: nothing here touches an arm.

use std::collections::BTreeMap;

use serde_json::Value;

use super::pick::Label;

/// What a judge reply says (resolutions 2: one parser, each caller picks its policy).
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// A readable pick, with any per-option dimension scores the judge gave
    /// (`{"a": {"safety": 0.2}, "b": {...}}`, each in [0,1]).
    Parsed {
        /// The blind label picked.
        pick: Label,
        /// Option label → dimension → score.
        scores: BTreeMap<String, BTreeMap<String, f64>>,
        /// The judge's reasoning, if given.
        reasoning: String,
    },
    /// The judge called it even.
    Tie,
    /// Nothing readable (empty, prose, another shape).
    Unreadable,
}

/// Reads a judge reply leniently (S-78): the first JSON object in the text (bare or fenced) with a
/// `pick` (or `verdict`, the scripted runtime's key, or `winner`), found as every judge's is
/// ([`skillforge_stage::judge_reply::verdict_object`]), of `a`/`b` → `Parsed`; `tie`/`even`/`both`
/// → `Tie`; anything else, or no such object → `Unreadable`. Optional `scores` must be an object
/// of per-label objects of numbers in [0,1]; out-of-range values are dropped.
pub fn parse_verdict(message: &str) -> Verdict {
    let Some((map, raw)) =
        skillforge_stage::judge_reply::verdict_object(message, &["pick", "verdict", "winner"])
    else {
        return Verdict::Unreadable;
    };
    let reasoning = map
        .get("reasoning")
        .or_else(|| map.get("reason"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    match raw.trim().to_ascii_lowercase().as_str() {
        "tie" | "even" | "both" | "neither" => Verdict::Tie,
        other => match Label::parse(other) {
            Some(pick) => Verdict::Parsed {
                pick,
                scores: parse_scores(map.get("scores")),
                reasoning,
            },
            None => Verdict::Unreadable,
        },
    }
}

fn parse_scores(value: Option<&Value>) -> BTreeMap<String, BTreeMap<String, f64>> {
    let Some(Value::Object(per_label)) = value else {
        return BTreeMap::new();
    };
    per_label
        .iter()
        .filter_map(|(label, dims)| {
            let label = Label::parse(label)?.as_str().to_owned();
            let Value::Object(dims) = dims else {
                return None;
            };
            let dims: BTreeMap<String, f64> = dims
                .iter()
                .filter_map(|(d, v)| {
                    v.as_f64()
                        .filter(|x| (0.0..=1.0).contains(x))
                        .map(|x| (d.to_ascii_lowercase(), x))
                })
                .collect();
            Some((label, dims))
        })
        .collect()
}

/// Mode B's policy on a verdict (S-78, resolutions 2): only a readable `a`/`b` yields a pick.
pub fn judge_pick(verdict: &Verdict) -> Option<Label> {
    match verdict {
        Verdict::Parsed { pick, .. } => Some(*pick),
        Verdict::Tie | Verdict::Unreadable => None,
    }
}

/// The blind judge prompt (S-77): the user's prompt and the two answers as Option A / Option B in
/// shuffled order. It never names champion, challenger or a version. The scripted runtime reads
/// the `task: judge` header.
pub fn judge_prompt(user_prompt: &str, option_a: &str, option_b: &str) -> String {
    format!(
        "task: judge\n\
         You compare two answers to the same request. Do not modify any file.\n\
         Reply with one JSON object and nothing else: {{\"pick\": \"a\" or \"b\", \"reasoning\": \"...\"}}; \
         optionally add \"scores\": {{\"a\": {{\"<dimension>\": 0.0-1.0}}, \"b\": {{...}}}}.\n\n\
         Request:\n{user_prompt}\n\nOption A:\n{option_a}\n\nOption B:\n{option_b}\n"
    )
}

/// Judge selection outcome (S-76, resolutions 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JudgeSelection {
    /// Runtimes to use, each of a distinct family other than the agent's, in preference order.
    Judges(Vec<(String, String)>),
    /// No runtime of another family: skip with this message (never a same-family judgement).
    SelfFamily(String),
}

/// Picks up to `n` judges (n ≥ 1) among `available` `(runtime, family)` pairs in preference order:
/// each of a family not in `agent_families` and distinct from the others (S-76, S-81). None left
/// ⇒ [`JudgeSelection::SelfFamily`] with a clear message. `agent_families` are the template's
/// declared family and the family of the runtime that answered ([`agent_families`]).
pub fn select_judges(
    agent_families: &[String],
    available: &[(String, String)],
    n: usize,
) -> JudgeSelection {
    let mut chosen: Vec<(String, String)> = Vec::new();
    for (runtime, family) in available {
        if chosen.len() >= n.max(1) {
            break;
        }
        if !agent_families.contains(family) && !chosen.iter().any(|(_, f)| f == family) {
            chosen.push((runtime.clone(), family.clone()));
        }
    }
    if chosen.is_empty() {
        let seen: Vec<&str> = available.iter().map(|(r, _)| r.as_str()).collect();
        return JudgeSelection::SelfFamily(format!(
            "no judge of a family other than `{}` is available (runtimes: {}); skipping the judge \
             rather than judging the template's own family",
            agent_families.join("`, `"),
            if seen.is_empty() {
                "none".to_owned()
            } else {
                seen.join(", ")
            }
        ));
    }
    JudgeSelection::Judges(chosen)
}

/// The families a judge must not belong to: the template's declared family (the profile family of
/// its first `runtime_compatibility` entry, or the entry itself when no profile has that name)
/// and the family of the runtime that produced the answers — except `scripted`, which is no model
/// family (a deterministic stand-in cannot prefer itself). Deduplicated, in that order.
pub fn agent_families(declared_runtimes: &[String], answering_runtime: &str) -> Vec<String> {
    let family = |runtime: &str| {
        skillforge_runner_agent::find(runtime)
            .map(|p| p.family.clone())
            .unwrap_or_else(|_| runtime.to_owned())
    };
    let mut families: Vec<String> = declared_runtimes
        .first()
        .map(|r| family(r.trim()))
        .into_iter()
        .collect();
    let answering = family(answering_runtime);
    if answering != "scripted" && !families.contains(&answering) {
        families.push(answering);
    }
    families
}

#[cfg(test)]
mod tests {
    use super::*;

    // S-78
    #[test]
    fn s78_verdicts_are_read_leniently_and_ties_or_prose_give_no_pick() {
        let check = |reply: &str, expected: Option<Label>| {
            assert_eq!(judge_pick(&parse_verdict(reply)), expected, "{reply:?}");
        };
        check(r#"{"pick": "a"}"#, Some(Label::A));
        check(
            "Sure.\n```json\n{\"pick\": \"B\", \"reasoning\": \"tighter\"}\n```",
            Some(Label::B),
        );
        check(r#"{"verdict":"b","reasoning":"scripted"}"#, Some(Label::B));
        check(r#"{"pick":"tie"}"#, None);
        check("both are fine", None);
        check("", None);
        check(r#"{"pick":"c"}"#, None);
        check(r#"{"answer":"a"}"#, None);
        assert_eq!(parse_verdict(r#"{"pick":"tie"}"#), Verdict::Tie);
        assert_eq!(parse_verdict("both are fine"), Verdict::Unreadable);
    }

    #[test]
    fn scores_are_kept_per_label_within_range() {
        let Verdict::Parsed { scores, .. } = parse_verdict(
            r#"{"pick":"a","scores":{"A":{"Safety":0.2,"style":3},"b":{"safety":0.9}}}"#,
        ) else {
            panic!("parsed")
        };
        assert_eq!(scores["a"], BTreeMap::from([("safety".to_owned(), 0.2)]));
        assert_eq!(scores["b"]["safety"], 0.9);
    }

    // S-77
    #[test]
    fn s77_judge_prompt_is_blind() {
        let prompt = judge_prompt("What is 2+2?", "four", "4");
        for word in ["champion", "challenger", "@v"] {
            assert!(
                !prompt.to_ascii_lowercase().contains(word),
                "prompt names `{word}`: {prompt}"
            );
        }
        assert!(
            prompt.starts_with("task: judge\n")
                && prompt.contains("Option A:\nfour")
                && prompt.contains("Option B:\n4")
        );
    }

    // S-76, S-81
    #[test]
    fn s76_s81_judges_are_other_and_distinct_families() {
        let pairs = |v: &[(&str, &str)]| {
            v.iter()
                .map(|(r, f)| ((*r).to_owned(), (*f).to_owned()))
                .collect::<Vec<_>>()
        };
        let available = pairs(&[
            ("claude", "claude"),
            ("claude-2", "claude"),
            ("codex", "codex"),
            ("opencode", "opencode"),
        ]);
        let fam = |f: &str| vec![f.to_owned()];
        assert_eq!(
            select_judges(&fam("claude"), &available, 1),
            JudgeSelection::Judges(pairs(&[("codex", "codex")]))
        );
        assert_eq!(
            select_judges(&fam("codex"), &available, 3),
            JudgeSelection::Judges(pairs(&[("claude", "claude"), ("opencode", "opencode")])),
            "distinct families only; fewer than asked when that is all there is"
        );
        let both = vec!["codex".to_owned(), "claude".to_owned()];
        assert_eq!(
            select_judges(&both, &available, 2),
            JudgeSelection::Judges(pairs(&[("opencode", "opencode")]))
        );
        let JudgeSelection::SelfFamily(message) =
            select_judges(&fam("claude"), &pairs(&[("claude", "claude")]), 1)
        else {
            panic!("only the agent's own family ⇒ skipped")
        };
        assert!(message.contains("other than `claude`"), "{message}");
    }

    #[test]
    fn agent_families_are_declared_plus_answering_model_family() {
        let declared = vec!["codex".to_owned(), "claude".to_owned()];
        assert_eq!(
            agent_families(&declared, "scripted"),
            ["codex"],
            "scripted is no model family"
        );
        assert_eq!(agent_families(&declared, "claude"), ["codex", "claude"]);
        assert_eq!(agent_families(&[], "codex"), ["codex"]);
        assert_eq!(agent_families(&["shell".to_owned()], "scripted"), ["shell"]);
    }
}
