//! JSON Schemas generated from the wire types (DESIGN §7), checked into `docs/schemas/`.
//! A test regenerates them and fails on drift; `SKILLFORGE_BLESS=1` rewrites the files.

use schemars::{JsonSchema, Schema, schema_for};

use crate::{
    Assignments, CandidatePackage, FeedbackFile, Metadata, PairwisePicks, PairwiseReviewPacket,
    PairwiseSecretMap, TrainingPackage,
};

/// Every schema as `(file name, schema)`, in a fixed order.
pub fn all() -> Vec<(&'static str, Schema)> {
    vec![
        ("training-package.json", schema_for!(TrainingPackage)),
        ("candidate-package.json", schema_for!(CandidatePackage)),
        ("agent-template-metadata.json", schema_for!(Metadata)),
        ("feedback-yml.json", schema_for!(FeedbackFile)),
        ("assignments.json", schema_for!(Assignments)),
        (
            "pairwise-review-packet.json",
            schema_for!(PairwiseReviewPacket),
        ),
        ("pairwise-secret-map.json", schema_for!(PairwiseSecretMap)),
        ("pairwise-picks.json", schema_for!(PairwisePicks)),
    ]
}

/// The schema of `T` as checked-in text: 2-space JSON plus a trailing newline.
pub fn render<T: JsonSchema>() -> String {
    render_schema(&schema_for!(T))
}

/// A schema as checked-in text: 2-space JSON plus a trailing newline, its descriptions as users
/// read them ([`for_users`]).
pub fn render_schema(schema: &Schema) -> String {
    let mut value = schema.as_value().clone();
    for_users(&mut value);
    let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
    text.push('\n');
    text
}

/// Rewrites every `description` and `title` in `value` with [`user_text`]: the schemas are
/// generated from the types' docstrings, which cite where a rule comes from (seed sections, rule
/// ids, issue numbers) and link Rust items; an editor shows the text to the person writing the
/// file, who needs neither.
pub fn for_users(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                match (key.as_str(), v) {
                    ("description" | "title", serde_json::Value::String(text)) => {
                        *text = user_text(text);
                    }
                    (_, v) => for_users(v),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(for_users),
        _ => {}
    }
}

/// A docstring as user text: rustdoc links become the item's plain name (`` [`a::B`] `` →
/// `` `B` ``); citations are dropped — rule ids (`S-88`, `E-41`, `O-12`, `CP-2`), `issue N item
/// M`, `facts §N`, `resolutions §N`, `DESIGN §N`, `loop.md N.N`, `seed …`, a leading `Ours:` —
/// from parentheses (a parenthesis left empty goes) and as a `S-03:` prefix.
pub fn user_text(text: &str) -> String {
    use std::sync::LazyLock;
    static LINK: LazyLock<regex::Regex> =
        LazyLock::new(|| regex::Regex::new(r"\[`([^`\]]+)`\]").expect("valid regex"));
    static PAREN: LazyLock<regex::Regex> =
        LazyLock::new(|| regex::Regex::new(r" ?\(([^()]*)\)").expect("valid regex"));
    static CITATION: LazyLock<regex::Regex> = LazyLock::new(|| {
        regex::Regex::new(
            r"^(?:seed\b.*|[SEO]-\d+|CP-\d+(?: shape)?|issue \d+(?: item \d+)?|facts §[\d.]+.*|resolutions(?: §)? ?\d+|DESIGN §\d+.*|loop\.md [\d.]+)$",
        )
        .expect("valid regex")
    });
    static PREFIX: LazyLock<regex::Regex> = LazyLock::new(|| {
        regex::Regex::new(r"(?:^|\b)(?:[SEO]-\d+|CP-\d+)(?:, ?[SEO]-\d+)*: |\bOurs: ")
            .expect("valid regex")
    });
    let linked = LINK.replace_all(text, |c: &regex::Captures| {
        let path = &c[1];
        format!("`{}`", path.rsplit("::").next().unwrap_or(path))
    });
    static JARGON: LazyLock<regex::Regex> = LazyLock::new(|| {
        regex::Regex::new(r"\s*Field order = Go struct order\.?| at CP-\d+").expect("valid regex")
    });
    let unprefixed = PREFIX.replace_all(&linked, "");
    let unprefixed = JARGON.replace_all(&unprefixed, "");
    let out = PAREN.replace_all(&unprefixed, |c: &regex::Captures| {
        let groups: Vec<String> = c[1]
            .split(';')
            .map(|group| {
                group
                    .split(',')
                    .map(|part| part.split_whitespace().collect::<Vec<_>>().join(" "))
                    .filter(|part| !part.is_empty() && !CITATION.is_match(part))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .filter(|group| !group.is_empty())
            .collect();
        if groups.is_empty() {
            String::new()
        } else {
            let lead = if c[0].starts_with(' ') { " " } else { "" };
            format!("{lead}({})", groups.join("; "))
        }
    });
    let mut out = out.into_owned();
    if let Some(first) = out.chars().next()
        && first.is_lowercase()
        && text.chars().next().is_some_and(char::is_uppercase)
    {
        out.replace_range(..first.len_utf8(), &first.to_uppercase().to_string());
    }
    out
}

/// The drift check of checked-in schemas (every crate that generates some): compares each
/// `(file name, schema)` with `dir/<file name>` as [`render_schema`] writes it and returns the
/// names that differ or are missing; with `bless` (tests run with `SKILLFORGE_BLESS=1`) writes
/// them instead and returns none.
///
/// # Errors
/// The I/O error of a write when blessing.
pub fn stale_schemas(
    dir: &std::path::Path,
    schemas: impl IntoIterator<Item = (String, Schema)>,
    bless: bool,
) -> std::io::Result<Vec<String>> {
    let mut stale = Vec::new();
    for (name, schema) in schemas {
        let path = dir.join(&name);
        let want = render_schema(&schema);
        if bless {
            std::fs::create_dir_all(dir)?;
            std::fs::write(&path, &want)?;
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(want.as_str()) {
            stale.push(name);
        }
    }
    Ok(stale)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn checked_in_schemas_are_current() {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/schemas");
        let bless = std::env::var("SKILLFORGE_BLESS").is_ok_and(|v| v == "1");
        let stale = stale_schemas(
            &dir,
            all().into_iter().map(|(n, s)| (n.to_owned(), s)),
            bless,
        )
        .unwrap();
        assert!(
            stale.is_empty(),
            "stale schemas {stale:?}; rerun with SKILLFORGE_BLESS=1"
        );
    }

    #[test]
    fn user_text_drops_citations_and_rust_links_and_keeps_the_words() {
        for (doc, want) in [
            ("Kind tag (S-88).", "Kind tag."),
            (
                "The log record (loop.md 2.2): one per hypothesis (O-12).",
                "The log record: one per hypothesis.",
            ),
            (
                "Seconds (default 600 = 10 min,\nresolutions §8).",
                "Seconds (default 600 = 10 min).",
            ),
            (
                "Switches (seed key names; everything off by default).",
                "Switches (everything off by default).",
            ),
            (
                "Mode (explore|refine); S-03: only here.",
                "Mode (explore|refine); only here.",
            ),
            ("Ours: run in containers.", "Run in containers."),
            (
                "See [`crate::project_signal`] and [`Estimate`].",
                "See `project_signal` and `Estimate`.",
            ),
            (
                "Gate (issue 34 item 12; unset = no gate).",
                "Gate (unset = no gate).",
            ),
            (
                "A test (must differ from `sample_seed`).",
                "A test (must differ from `sample_seed`).",
            ),
        ] {
            assert_eq!(user_text(doc), want, "{doc:?}");
        }
    }
}
