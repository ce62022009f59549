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

/// A schema as checked-in text: 2-space JSON plus a trailing newline.
pub fn render_schema(schema: &Schema) -> String {
    let mut text = serde_json::to_string_pretty(schema).unwrap_or_default();
    text.push('\n');
    text
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
}
