//! Reading the blind judge's reply (seed: skill-eval-loop, "The blind is enforced, not assumed";
//! resolution 2): the first JSON object carrying a verdict, found as every judge's is
//! ([`skillforge_stage::judge_reply::verdict_object`]: prose braces before it are skipped, text after it
//! ignored), then `Pick(slot) | Tie | Unreadable`. The eval loop's policy: unreadable is an invalid sample, never a tie.

use serde_json::Value;

use super::mapping::Slot;

/// What the judge said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JudgeReading {
    /// A slot won.
    Pick {
        /// The winning slot.
        slot: Slot,
        /// The judge's reason, if given.
        reason: String,
    },
    /// A tie, stated as one.
    Tie {
        /// The judge's reason, if given.
        reason: String,
    },
    /// No readable verdict; the text says what was wrong.
    Unreadable(String),
}

/// The first complete JSON object in `text`: from its first `{` to the brace that closes it
/// (braces inside strings ignored); `None` when no object closes (E-08).
pub fn first_json_object(text: &str) -> Option<&str> {
    let start = text.find('{')?;
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (offset, ch) in text[start..].char_indices() {
        if in_string {
            match (escaped, ch) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match ch {
            '"' => in_string = true,
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&text[start..start + offset + 1]);
                }
            }
            _ => {}
        }
    }
    None
}

/// Reads a judge reply (E-07, E-08): the first JSON object carrying `winner` (or `verdict`) as a
/// string must say of `A`, `B` or `tie` (any case); `reason` (or `reasoning`) is kept. Anything else
/// — prose such as "Run A (with the skill)", a missing or unknown winner — is
/// [`JudgeReading::Unreadable`] with the reason.
pub fn parse_verdict(reply: &str) -> JudgeReading {
    if let Err(e) = skillforge_contract::limits::check_json(reply) {
        return JudgeReading::Unreadable(format!("the judge's reply {e}"));
    }
    let Some((value, _)) =
        skillforge_stage::judge_reply::verdict_object(reply, &["winner", "verdict"])
    else {
        return match first_json_object(reply) {
            None => JudgeReading::Unreadable(format!(
                "no JSON object in the judge's reply: {:?}",
                excerpt(reply)
            )),
            Some(object) => match serde_json::from_str::<Value>(object) {
                Err(e) => JudgeReading::Unreadable(format!(
                    "the judge's JSON does not parse ({e}): {:?}",
                    excerpt(object)
                )),
                Ok(_) => JudgeReading::Unreadable("the judge's JSON has no `winner`".to_owned()),
            },
        };
    };
    let reason = ["reason", "reasoning"]
        .iter()
        .find_map(|k| value.get(*k).and_then(Value::as_str))
        .unwrap_or_default()
        .to_owned();
    // A pick the judge says it did not make by reading the answers (the scripted runtime's judge
    // without a `prefer` line) is no evidence: an invalid sample, never a win or a tie.
    // Its reasoning says why and what to do (the scripted judge's does); without one, the
    // general way on.
    if value.get("assessed") == Some(&Value::Bool(false)) {
        return JudgeReading::Unreadable(if reason.trim().is_empty() {
            "the judge did not assess the answers; for the scripted runtime, give the rubric a \
             `scripted: prefer TEXT` line, or judge with a model runtime"
                .to_owned()
        } else {
            format!("the judge did not assess the answers: {}", reason.trim())
        });
    }
    let winner = ["winner", "verdict"]
        .iter()
        .find_map(|k| value.get(*k).and_then(Value::as_str));
    match winner.map(|w| w.trim().to_ascii_lowercase()).as_deref() {
        Some("a") => JudgeReading::Pick {
            slot: Slot::A,
            reason,
        },
        Some("b") => JudgeReading::Pick {
            slot: Slot::B,
            reason,
        },
        Some("tie") => JudgeReading::Tie { reason },
        Some(other) => {
            JudgeReading::Unreadable(format!("the judge's winner {other:?} is not A, B or tie"))
        }
        None => JudgeReading::Unreadable("the judge's JSON has no `winner`".to_owned()),
    }
}

fn excerpt(text: &str) -> String {
    super::arm::truncate_chars(text.trim(), 120).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    // E-07: a pick its judge says it did not make by reading the answers is no verdict.
    #[test]
    fn e07_a_pick_not_made_by_assessing_the_answers_is_unreadable() {
        let r = parse_verdict(r#"{"verdict": "a", "assessed": false}"#);
        let JudgeReading::Unreadable(why) = r else {
            panic!("{r:?}")
        };
        assert!(
            why.contains("did not assess") && why.contains("scripted: prefer TEXT"),
            "{why}"
        );
        // The judge's own reasoning is the reason, so the user reads what to do.
        let r = parse_verdict(
            r#"{"verdict": "tie", "reasoning": "both answers are the same text", "assessed": false}"#,
        );
        assert_eq!(
            r,
            JudgeReading::Unreadable(
                "the judge did not assess the answers: both answers are the same text".to_owned()
            )
        );
        assert!(matches!(
            parse_verdict(r#"{"verdict": "a", "assessed": true}"#),
            JudgeReading::Pick { slot: Slot::A, .. }
        ));
    }

    // E-08
    #[test]
    fn e08_parsed_to_the_end_of_the_first_object() {
        let check =
            |reply: &str, want: JudgeReading| assert_eq!(parse_verdict(reply), want, "{reply}");
        check(
            r#"{"winner":"A"} and some more commentary {"winner":"B"}"#,
            JudgeReading::Pick {
                slot: Slot::A,
                reason: String::new(),
            },
        );
        check(
            "Verdict:\n{\"winner\": \"b\", \"reason\": \"tighter {really}\"}\nThanks!",
            JudgeReading::Pick {
                slot: Slot::B,
                reason: "tighter {really}".into(),
            },
        );
        check(
            r#"{"verdict":"tie","reasoning":"same"}"#,
            JudgeReading::Tie {
                reason: "same".into(),
            },
        );
        assert_eq!(first_json_object(r#"x {"a":"}"} y"#), Some(r#"{"a":"}"}"#));
    }

    // E-07
    #[test]
    fn e07_unreadable_is_refused_by_name_never_a_tie() {
        for reply in [
            "Run A (with the skill)",
            r#"{"winner":"both"}"#,
            r#"{"score":3}"#,
            "{\"winner\":",
        ] {
            match parse_verdict(reply) {
                JudgeReading::Unreadable(why) => assert!(!why.is_empty()),
                other => panic!("{reply:?} read as {other:?}"),
            }
        }
    }

    // Issue 12 item 7: a 100 000-level reply is unreadable by the parser limits, never a tie.
    #[test]
    fn deeply_nested_reply_is_unreadable_by_the_limits() {
        match parse_verdict(&format!("{{\"winner\":{}", "[".repeat(100_000))) {
            JudgeReading::Unreadable(reason) => assert!(reason.contains("64 levels"), "{reason}"),
            other => panic!("{other:?}"),
        }
    }
}
