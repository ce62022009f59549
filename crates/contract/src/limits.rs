//! Parser limits for YAML and JSON read from users: a size cap and a nesting-depth cap checked
//! by a linear scan before the parser runs, so a hostile or broken document (200 KB nested
//! 100 000 levels deep took the YAML parser 38 s) is refused at once with the limit named.

/// Largest YAML or JSON document accepted, in bytes (16 MiB).
pub const MAX_DOCUMENT_BYTES: usize = 16 * 1024 * 1024;

/// Deepest nesting of collections (mappings, sequences, objects, arrays) accepted. Every format
/// skillforge reads nests a handful of levels; 64 leaves room for free-form metadata.
pub const MAX_NESTING_DEPTH: usize = 64;

/// A document over a parser limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    /// More bytes than [`MAX_DOCUMENT_BYTES`].
    #[error("is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// The document's size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// Collections nested deeper than [`MAX_NESTING_DEPTH`].
    #[error("nests collections deeper than the limit of {limit} levels (line {line})")]
    TooDeep {
        /// The limit.
        limit: usize,
        /// 1-based line where the limit was crossed.
        line: usize,
    },
}

fn check_size(len: usize) -> Result<(), LimitError> {
    if len > MAX_DOCUMENT_BYTES {
        return Err(LimitError::TooLarge {
            size: len,
            limit: MAX_DOCUMENT_BYTES,
        });
    }
    Ok(())
}

/// Checks a JSON document against [`MAX_DOCUMENT_BYTES`] and [`MAX_NESTING_DEPTH`] (brackets
/// outside strings), in one pass.
///
/// # Errors
/// [`LimitError`] naming the limit crossed.
pub fn check_json(text: &str) -> Result<(), LimitError> {
    check_json_bytes(text.as_bytes())
}

/// [`check_json`] of raw bytes (a file read with `std::fs::read`).
///
/// # Errors
/// [`LimitError`] naming the limit crossed.
pub fn check_json_bytes(bytes: &[u8]) -> Result<(), LimitError> {
    check_size(bytes.len())?;
    let (mut depth, mut line, mut in_string, mut escaped) = (0usize, 1usize, false, false);
    for &b in bytes {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'\n' => line += 1,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_NESTING_DEPTH {
                    return Err(LimitError::TooDeep {
                        limit: MAX_NESTING_DEPTH,
                        line,
                    });
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// Checks a YAML document against [`MAX_DOCUMENT_BYTES`] and [`MAX_NESTING_DEPTH`], in one pass.
///
/// The depth is estimated from the structure a YAML parser would see: block collections by
/// their indentation (a stack of columns, compact `- ` / `? ` entries counting one level each)
/// plus flow collections (`[` / `{` where a value starts, and any bracket inside a flow
/// collection), outside quoted scalars, comments and block scalars (`|`, `>`). Brackets in
/// prose (`comment: see [1`) do not count.
///
/// # Errors
/// [`LimitError`] naming the limit crossed.
pub fn check_yaml(text: &str) -> Result<(), LimitError> {
    check_size(text.len())?;
    let mut blocks: Vec<usize> = Vec::new();
    let mut flow = 0usize;
    // Indentation of the node whose block scalar is being skipped.
    let mut block_scalar: Option<usize> = None;
    let too_deep = |line: usize| LimitError::TooDeep {
        limit: MAX_NESTING_DEPTH,
        line,
    };
    for (i, raw) in text.split('\n').enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let indent = line.len() - line.trim_start_matches(' ').len();
        let rest = &line[indent..];
        if let Some(parent) = block_scalar {
            if rest.is_empty() || indent > parent {
                continue;
            }
            block_scalar = None;
        }
        if rest.is_empty()
            || rest.starts_with('#')
            || (flow == 0 && (rest.starts_with("---") || rest.starts_with("...")))
        {
            continue;
        }
        let bytes = rest.as_bytes();
        let mut pos = 0;
        if flow == 0 {
            while blocks.last().is_some_and(|&c| c >= indent) {
                blocks.pop();
            }
            blocks.push(indent);
            // Compact nested entries: `- - x`, `- key: v`, `? - x`.
            while pos + 1 < bytes.len()
                && matches!(bytes[pos], b'-' | b'?')
                && bytes[pos + 1] == b' '
            {
                pos += 2;
                while pos < bytes.len() && bytes[pos] == b' ' {
                    pos += 1;
                }
                if pos < bytes.len() && bytes[pos] != b'#' {
                    blocks.push(indent + pos);
                }
            }
            if blocks.len() + flow > MAX_NESTING_DEPTH {
                return Err(too_deep(i + 1));
            }
        }
        scan_yaml_line(&bytes[pos..], &mut flow, blocks.len(), i + 1)?;
        if flow == 0 && ends_with_block_scalar(rest) {
            block_scalar = Some(indent);
        }
    }
    Ok(())
}

/// Flow brackets of one line (from where its content starts), outside quotes and comments.
fn scan_yaml_line(
    bytes: &[u8],
    flow: &mut usize,
    blocks: usize,
    line: usize,
) -> Result<(), LimitError> {
    let mut value_start = true;
    let mut quote: Option<u8> = None;
    let mut prev = b' ';
    for &b in bytes {
        if let Some(q) = quote {
            if b == q {
                quote = None;
            }
            prev = b;
            continue;
        }
        match b {
            b'#' if prev == b' ' || prev == b'\t' => break,
            b'"' | b'\'' if value_start => quote = Some(b),
            b'[' | b'{' if value_start || *flow > 0 => {
                *flow += 1;
                if blocks + *flow > MAX_NESTING_DEPTH {
                    return Err(LimitError::TooDeep {
                        limit: MAX_NESTING_DEPTH,
                        line,
                    });
                }
            }
            b']' | b'}' if *flow > 0 => *flow -= 1,
            _ => {}
        }
        // A value starts after `: `, `- `, `, `, an opening bracket, or at the line start.
        value_start = match b {
            b' ' | b'\t' => value_start || matches!(prev, b':' | b'-' | b',' | b'?'),
            b'[' | b'{' | b',' if *flow > 0 => true,
            _ => false,
        };
        prev = b;
    }
    Ok(())
}

/// Whether the line's value is a block scalar header (`key: |`, `- >-`, `|2`, …).
fn ends_with_block_scalar(rest: &str) -> bool {
    let content = match rest.find(" #") {
        Some(i) => &rest[..i],
        None => rest,
    }
    .trim_end();
    let header = content.rsplit([' ', '\t']).next().unwrap_or(content);
    let Some(first) = header.chars().next() else {
        return false;
    };
    let before = content.len() - header.len();
    let at_value = before == 0 || content[..before].trim_end().ends_with([':', '-', '?']);
    matches!(first, '|' | '>')
        && at_value
        && header[1..]
            .chars()
            .all(|c| matches!(c, '+' | '-' | '1'..='9'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_documents_pass() {
        let yaml = "run_id: r1\nreviewer: ann\nitems:\n  - item_id: a\n    comment: |\n      see [1 and {x\n      [[[[[[[[\n    tags: [short, {k: v}]\n    best: 'B [x'\n  - - nested\n    - more\n";
        assert_eq!(check_yaml(yaml), Ok(()));
        assert_eq!(
            check_json(r#"{"a": [1, {"b": "]]]]["}], "c": "x\"[["}"#),
            Ok(())
        );
    }

    #[test]
    fn deep_flow_yaml_is_refused_at_once_naming_the_limit() {
        let deep = format!("a: {}1{}\n", "[".repeat(100_000), "]".repeat(100_000));
        let started = std::time::Instant::now();
        let e = check_yaml(&deep).unwrap_err();
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(
            e,
            LimitError::TooDeep {
                limit: MAX_NESTING_DEPTH,
                line: 1
            }
        );
        assert!(e.to_string().contains("64 levels"), "{e}");
    }

    #[test]
    fn deep_block_yaml_is_refused() {
        let compact = format!("{}x\n", "- ".repeat(65));
        assert!(matches!(
            check_yaml(&compact),
            Err(LimitError::TooDeep { .. })
        ));
        let indented: String = (0..65)
            .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
            .collect();
        assert!(matches!(
            check_yaml(&indented),
            Err(LimitError::TooDeep { line: 65, .. })
        ));
        let ok: String = (0..60)
            .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
            .collect();
        assert_eq!(check_yaml(&ok), Ok(()));
    }

    #[test]
    fn deep_json_and_large_documents_are_refused() {
        let deep = format!("{}{}", "[".repeat(65), "]".repeat(65));
        assert_eq!(
            check_json(&deep),
            Err(LimitError::TooDeep { limit: 64, line: 1 })
        );
        let big = " ".repeat(MAX_DOCUMENT_BYTES + 1);
        assert!(matches!(check_json(&big), Err(LimitError::TooLarge { .. })));
        assert!(matches!(check_yaml(&big), Err(LimitError::TooLarge { .. })));
    }
}
