//! Finding the verdict in an LLM judge's reply, one way for every judge (the eval loop's blind
//! judge and Mode B's A/B judge; resolutions 2: one parser, each caller its own policy).
//!
//! A reply is prose, a fenced block, or bare JSON; models write braces in prose ("the `{}` in
//! option A …") and sometimes a draft object before the real one. The verdict is the first JSON
//! object in the reply that parses and carries one of the caller's keys as a string; objects that
//! do not parse (prose braces) or carry no verdict key are skipped, and whatever follows the
//! object is ignored (E-08: parsed to the end of the first complete verdict object).

use serde_json::{Map, Value};

/// The first JSON object of `reply` (scanning every `{`, bare or inside a fence) that parses and
/// has one of `keys` holding a string: the object, and that string. `None` when there is none.
pub fn verdict_object(reply: &str, keys: &[&str]) -> Option<(Map<String, Value>, String)> {
    for (start, _) in reply.match_indices('{') {
        let mut stream = serde_json::Deserializer::from_str(&reply[start..]).into_iter::<Value>();
        let Some(Ok(Value::Object(map))) = stream.next() else {
            continue;
        };
        if let Some(value) = keys
            .iter()
            .find_map(|k| map.get(*k).and_then(Value::as_str))
        {
            let value = value.to_owned();
            return Some((map, value));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue 31 item 9: braces in prose before the JSON no longer make the reply unreadable.
    #[test]
    fn prose_braces_and_drafts_without_a_verdict_are_skipped() {
        let keys = ["winner"];
        let pick = |reply: &str| verdict_object(reply, &keys).map(|(_, v)| v);
        assert_eq!(
            pick("Both use a {placeholder} style. {\"winner\": \"B\", \"reason\": \"r\"}"),
            Some("B".into())
        );
        assert_eq!(
            pick("```json\n{\"note\": 1}\n```\n```json\n{\"winner\": \"tie\"}\n```"),
            Some("tie".into())
        );
        assert_eq!(
            pick(r#"{"winner":"A"} then {"winner":"B"}"#),
            Some("A".into()),
            "the first verdict object wins (E-08)"
        );
        assert_eq!(pick("no json {at all"), None);
        assert_eq!(pick(r#"{"winner": 3}"#), None);
    }
}
