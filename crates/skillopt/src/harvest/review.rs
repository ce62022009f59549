//! The cross-family review leg: who reviews, what they are asked, and how their rubric is read
//! (seed: SkillOpt, "Cross-family review soft signal (off by default)"; S-28..S-32).

use std::collections::BTreeMap;

use serde_json::Value;

/// The six rubric dimensions, each scored in `[0,1]` (seed: "scores subjective quality and
/// scope-fidelity as ONE rubric").
pub const RUBRIC_DIMENSIONS: [&str; 6] = [
    "coverage",
    "containment",
    "fidelity",
    "architecture",
    "readability",
    "abstraction",
];

/// The rubric as the reviewer reads it. **Anti-gaming (S-32):** this text is only ever placed in a
/// review-leg prompt ([`review_prompt`]), never in an implementer's prompt.
pub const REVIEW_RUBRIC: &str = "\
Score each dimension from 0.0 (worst) to 1.0 (best):
- coverage: the change does all of the ask.
- containment: no creep beyond the ask.
- fidelity: the change does the ask, not something adjacent.
- architecture: the structure of the change is sound.
- readability: the code is easy to read.
- abstraction: abstractions fit the problem, neither missing nor gratuitous.
Reply with one JSON object and nothing else, e.g.
{\"coverage\": 0.9, \"containment\": 1.0, \"fidelity\": 0.8, \"architecture\": 0.7, \"readability\": 0.9, \"abstraction\": 0.8, \"notes\": \"…\"}";

/// The reviewer chosen for a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reviewer {
    /// Runtime profile name, e.g. `claude`.
    pub runtime: String,
    /// Its model family.
    pub family: String,
    /// True on the same-family fallback (S-29): tagged, logged and recorded as a job event.
    pub self_family: bool,
}

/// Picks the reviewer among `available` `(runtime, family)` pairs, in preference order: the first
/// of a family other than `implementer_family` (S-28); else the first available one as a
/// same-family fallback with `self_family = true` (S-29); `None` when nothing is available (no
/// review row). An unknown implementer family (`""`) takes the first available reviewer, not
/// tagged same-family.
pub fn pick_reviewer(implementer_family: &str, available: &[(String, String)]) -> Option<Reviewer> {
    if let Some((runtime, family)) = available
        .iter()
        .find(|(_, f)| implementer_family.is_empty() || f != implementer_family)
    {
        return Some(Reviewer {
            runtime: runtime.clone(),
            family: family.clone(),
            self_family: false,
        });
    }
    available.first().map(|(runtime, family)| Reviewer {
        runtime: runtime.clone(),
        family: family.clone(),
        self_family: true,
    })
}

/// The review prompt: read-only instructions, the intended scope (title and the implement job's
/// instructions), the PR coordinates, and [`REVIEW_RUBRIC`]. The scripted runtime reads the
/// `task: judge` header (its answer carries no rubric, so it writes no row, S-30).
pub fn review_prompt(
    repo: &str,
    pr: i64,
    head: &str,
    base: &str,
    title: &str,
    instructions: &str,
) -> String {
    format!(
        "task: judge\n\
         You are a read-only reviewer. Do not modify any file, branch or pull request.\n\
         Review pull request {repo}#{pr}: the change {base}..{head} in the working directory's repository.\n\
         Intended scope (title): {title}\n\
         Intended scope (instructions): {instructions}\n\n\
         {REVIEW_RUBRIC}\n"
    )
}

/// The rubric in a reviewer's final message: the first JSON object in it (bare, or inside a
/// fenced block) whose rubric keys ([`RUBRIC_DIMENSIONS`], at top level or under `dimensions`)
/// hold numbers in `[0,1]`; out-of-range or non-numeric values are dropped. Empty when there is
/// none (⇒ no review row, S-30). Also returns the reviewer's `notes`/`reasoning` text.
pub fn parse_rubric(message: &str) -> (BTreeMap<String, f64>, String) {
    for (start, _) in message.match_indices('{') {
        let mut stream = serde_json::Deserializer::from_str(&message[start..]).into_iter::<Value>();
        let Some(Ok(Value::Object(map))) = stream.next() else {
            continue;
        };
        let source = match map.get("dimensions") {
            Some(Value::Object(inner)) => inner.clone(),
            _ => map.clone(),
        };
        let dimensions: BTreeMap<String, f64> = RUBRIC_DIMENSIONS
            .iter()
            .filter_map(|d| {
                let v = source.get(*d)?.as_f64()?;
                (0.0..=1.0).contains(&v).then(|| ((*d).to_owned(), v))
            })
            .collect();
        if dimensions.is_empty() {
            continue;
        }
        let notes = ["notes", "reasoning"]
            .iter()
            .find_map(|k| map.get(*k).and_then(Value::as_str))
            .unwrap_or("")
            .to_owned();
        return (dimensions, notes);
    }
    (BTreeMap::new(), String::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn available(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(r, f)| ((*r).to_owned(), (*f).to_owned()))
            .collect()
    }

    #[test]
    fn s28_s29_reviewer_selection() {
        let both = available(&[("codex", "codex"), ("claude", "claude")]);
        assert_eq!(
            pick_reviewer("codex", &both).unwrap().runtime,
            "claude",
            "never the implementer's family"
        );
        assert_eq!(pick_reviewer("claude", &both).unwrap().runtime, "codex");
        let only_codex = available(&[("codex", "codex")]);
        let fallback = pick_reviewer("codex", &only_codex).unwrap();
        assert!(fallback.self_family && fallback.family == "codex");
        assert_eq!(pick_reviewer("codex", &[]), None);
        assert!(!pick_reviewer("", &only_codex).unwrap().self_family);
    }

    #[test]
    fn s30_rubric_parsing() {
        let (dims, notes) = parse_rubric(
            "Here:\n```json\n{\"coverage\": 0.2, \"fidelity\": 0.4, \"readability\": 2, \"notes\": \"thin\"}\n```",
        );
        assert_eq!(dims.len(), 2, "{dims:?}");
        assert_eq!(notes, "thin");
        let (dims, _) = parse_rubric("{\"dimensions\": {\"architecture\": 0.9}}");
        assert_eq!(dims.get("architecture"), Some(&0.9));
        assert!(
            parse_rubric("{\"verdict\":\"a\",\"reasoning\":\"x\"}")
                .0
                .is_empty(),
            "a judge verdict is no rubric"
        );
        assert!(parse_rubric("no json at all").0.is_empty());
    }

    /// The rubric's wording: every dimension line of [`REVIEW_RUBRIC`] and its reply shape.
    fn rubric_phrases() -> Vec<&'static str> {
        let mut phrases: Vec<&str> = REVIEW_RUBRIC
            .lines()
            .filter(|l| l.starts_with("- "))
            .collect();
        phrases.extend([
            "Score each dimension from 0.0",
            "\"containment\":",
            "no creep beyond the ask",
            "not something adjacent",
        ]);
        phrases
    }

    #[test]
    fn s32_no_implementer_or_train_prompt_carries_the_rubric() {
        use crate::train::generation::generation_prompt;
        use crate::train::items::ItemSpec;
        // Every prompt skillforge builds for an implementing agent is a train option-generation
        // prompt (the only agent job outside the review leg and the evaluator's judge); build it
        // over empty and realistic inputs and look for the rubric's wording.
        let items = [
            ItemSpec {
                id: "i1".into(),
                title: String::new(),
                input: String::new(),
            },
            ItemSpec {
                id: "c-1a2b".into(),
                title: "Summarize the change".into(),
                input: "diff --git a/x b/x\n+fn f() {}".into(),
            },
        ];
        let templates = [
            "",
            "---\nid: coder\n---\n# Code\nDo the ask; keep the change small.\n",
        ];
        for item in &items {
            for template in templates {
                for n in [1, 2, 4] {
                    let prompt =
                        generation_prompt("Implement the request", item, n, "coder@v1", template);
                    for phrase in rubric_phrases() {
                        assert!(
                            !prompt.contains(phrase),
                            "S-32: generation prompt carries rubric wording `{phrase}`:\n{prompt}"
                        );
                    }
                }
            }
        }
        // The rubric does reach the reviewer, so the check above can fail.
        let review = review_prompt("acme/app", 1, "h", "b", "t", "i");
        assert!(rubric_phrases().iter().all(|p| review.contains(p)));
    }

    #[test]
    fn s32_only_the_review_leg_builds_a_prompt_from_the_rubric() {
        // Structural guard: outside this module, the rubric constant and the review prompt are
        // referenced only by the harvester's own dispatch (apply.rs), never by train, the
        // evaluator or the CLI's prompt builders.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut offenders = Vec::new();
        let mut stack = vec![
            root.join("skillopt/src"),
            root.join("evalloop/src"),
            root.join("optimize/src"),
            root.join("stage/src"),
            root.join("cli/src"),
        ];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                let allowed =
                    path.ends_with("harvest/review.rs") || path.ends_with("harvest/apply.rs");
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                if !allowed && (text.contains("REVIEW_RUBRIC") || text.contains("review_prompt(")) {
                    offenders.push(path.display().to_string());
                }
            }
        }
        assert!(
            offenders.is_empty(),
            "S-32: the rubric is used outside the review leg: {offenders:?}"
        );
    }

    #[test]
    fn review_prompt_carries_scope_and_rubric() {
        let prompt = review_prompt("acme/app", 1, "h", "b", "Add x", "do x");
        assert!(prompt.starts_with("task: judge\n"));
        assert!(
            prompt.contains(REVIEW_RUBRIC)
                && prompt.contains("do x")
                && prompt.contains("acme/app#1")
        );
    }
}
