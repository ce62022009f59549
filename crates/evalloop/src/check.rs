//! A verify helper for briefs (seed: skill-eval-loop, "Hard rules": "A verify that reads prose
//! punishes the arm that explains itself"; E-47): check the delivered document, not the sentences
//! around it — the first fenced block of a reply when there is one — with comment spans
//! (`/* … */`, `<!-- … -->`) stripped before matching, spans and not lines.

/// The document a reply delivers: the body of its first fenced code block (```` ``` ````), or the
/// whole reply when it has none.
pub fn delivered_document(reply: &str) -> &str {
    let Some(open) = reply.find("```") else {
        return reply;
    };
    let after = &reply[open + 3..];
    let body_start = after.find('\n').map_or(after.len(), |i| i + 1);
    let body = &after[body_start..];
    match body.find("```") {
        Some(close) => &body[..close],
        None => body,
    }
}

/// `text` with every `/* … */` and `<!-- … -->` span removed (an unclosed span runs to the end).
pub fn strip_comment_spans(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let next = [("/*", "*/"), ("<!--", "-->")]
            .iter()
            .filter_map(|(o, c)| rest.find(o).map(|i| (i, *o, *c)))
            .min_by_key(|(i, _, _)| *i);
        let Some((idx, open, close)) = next else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[..idx]);
        let tail = &rest[idx + open.len()..];
        match tail.find(close) {
            Some(end) => rest = &tail[end + close.len()..],
            None => return out,
        }
    }
}

/// Violations of `document` (comment spans stripped): each forbidden word found (whole word,
/// case-insensitive), and a word count over `max_words`.
pub fn violations(document: &str, forbid: &[String], max_words: Option<usize>) -> Vec<String> {
    let text = strip_comment_spans(document);
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric() && c != '-')
        .filter(|w| !w.is_empty())
        .collect();
    let mut out: Vec<String> = forbid
        .iter()
        .filter(|f| words.contains(&f.to_lowercase().as_str()))
        .map(|f| format!("forbidden `{f}`"))
        .collect();
    if let Some(max) = max_words {
        let n = text.split_whitespace().count();
        if n > max {
            out.push(format!("{n} words, more than {max}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // E-47
    #[test]
    fn e47_check_the_delivered_document_with_comment_spans_stripped() {
        let forbid = vec!["Arial".to_string()];
        let reply = "AX41 has no Arial, so I chose Inter.\n```css\nbody { font-family: Inter, sans-serif; }\n```\nDone.";
        assert!(
            violations(delivered_document(reply), &forbid, None).is_empty(),
            "the explanation is not the deliverable"
        );
        assert_eq!(
            violations(reply, &forbid, None),
            ["forbidden `Arial`"],
            "reading the prose would fail it"
        );
        let css = "/* rejected faces:\n   Helvetica\n   Roboto\n   Arial\n*/\nbody { font-family: Inter; }\n";
        assert!(
            violations(css, &forbid, None).is_empty(),
            "Arial on line 4 of a /* */ span is no violation"
        );
        assert_eq!(
            violations("h1 { font-family: Arial; }", &forbid, None).len(),
            1
        );
        assert_eq!(
            violations("<!-- x -->one two three", &[], Some(2)),
            ["3 words, more than 2"]
        );
    }
}
