//! `skillforge schema [NAME]`: the JSON Schemas of the files a user writes or exchanges, generated
//! from the Rust types that read them (schemars), the same text as `docs/schemas/NAME.json`. A
//! unit test regenerates every file and fails on drift (`SKILLFORGE_BLESS=1` rewrites them).

use anyhow::anyhow;
use clap::Args;
use schemars::{Schema, schema_for};
use serde_json::json;

use crate::exit::{CliError, CliResult, OK};
use crate::output::print_json;

/// `skillforge schema [NAME]`.
#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// The schema to print (e.g. `eval-brief`, `optimize-spec`, `config`); none lists them.
    pub name: Option<String>,
}

/// One schema of the registry.
pub struct Entry {
    /// Name on the command line and file stem in `docs/schemas/`.
    pub name: &'static str,
    /// The file it describes, and which command reads it.
    pub describes: &'static str,
    /// Builds the schema.
    pub schema: fn() -> Schema,
}

/// Every schema, user-written files first; one list drives the command, `docs/schemas/` and its
/// test.
pub fn all() -> &'static [Entry] {
    use skillforge_contract as c;
    &[
        Entry {
            name: "config",
            describes: "<home>/config.toml (every command)",
            schema: || schema_for!(crate::config::Config),
        },
        Entry {
            name: "agent-template-metadata",
            describes: "a template's or SKILL.md's frontmatter (`template add`)",
            schema: || schema_for!(c::Metadata),
        },
        Entry {
            name: "eval-brief",
            describes: "an eval brief, JSON (`eval brief --check`, `eval forge --brief`)",
            schema: || with_schema_key(schema_for!(skillforge_evalloop::brief::Brief)),
        },
        Entry {
            name: "train-items",
            describes: "a train items file, YAML (`train start --items-file`)",
            schema: skillforge_skillopt::train::items::schema,
        },
        Entry {
            name: "optimize-spec",
            describes: "an optimize spec, YAML (`optimize init --spec`)",
            schema: || schema_for!(skillforge_optimize::spec::Spec),
        },
        Entry {
            name: "bineval-question-set",
            describes: "a BINEVAL question set, YAML or JSON (`binary run --set`)",
            schema: skillforge_skillopt::bineval::set::schema,
        },
        Entry {
            name: "correction-theme",
            describes: "a correction theme, JSON (`eval forge --mode corrections --theme`; `eval theme --out` writes one)",
            schema: || schema_for!(skillforge_evalloop::draft::DraftTheme),
        },
        Entry {
            name: "replay-corpus",
            describes: "a replay corpus, JSON (`candidate gate --corpus`)",
            schema: skillforge_skillopt::gate::corpus::schema,
        },
        Entry {
            name: "feedback-yml",
            describes: "a review packet's feedback.yml (`feedback markdown import`)",
            schema: || schema_for!(c::FeedbackFile),
        },
        Entry {
            name: "training-package",
            describes: "a training package (`export`; read by optimizers)",
            schema: || schema_for!(c::TrainingPackage),
        },
        Entry {
            name: "candidate-package",
            describes: "a candidate package (written by optimizers; `import`)",
            schema: || schema_for!(c::CandidatePackage),
        },
        Entry {
            name: "assignments",
            describes: "a review packet's .assignments.json (written by `feedback markdown export`)",
            schema: || schema_for!(c::Assignments),
        },
        Entry {
            name: "pairwise-review-packet",
            describes: "a paired-review packet (`pairwise import`)",
            schema: || schema_for!(c::PairwiseReviewPacket),
        },
        Entry {
            name: "pairwise-secret-map",
            describes: "a paired-review secret map (`pairwise import`)",
            schema: || schema_for!(c::PairwiseSecretMap),
        },
        Entry {
            name: "pairwise-picks",
            describes: "paired-review picks (`pairwise import`)",
            schema: || schema_for!(c::PairwisePicks),
        },
    ]
}

/// `schema` with an optional string property `$schema` (the editor's pointer to the schema, which
/// the file's reader ignores), so a strict schema does not flag it.
fn with_schema_key(mut schema: Schema) -> Schema {
    if let Some(props) = schema
        .get_mut("properties")
        .and_then(serde_json::Value::as_object_mut)
    {
        props.insert(
            "$schema".into(),
            json!({"description": "The JSON Schema of this file, for editors; ignored by skillforge.", "type": "string"}),
        );
    }
    schema
}

/// The `docs/schemas/` file name of schema `name`.
pub fn file_name(name: &str) -> String {
    format!("{name}.json")
}

/// Prints one schema, or lists them.
///
/// # Errors
/// Exit 2 for an unknown name, listing the known ones.
pub fn run(json_out: bool, args: SchemaArgs) -> CliResult {
    let Some(name) = args.name else {
        if json_out {
            print_json(
                &all()
                    .iter()
                    .map(|e| json!({"name": e.name, "describes": e.describes}))
                    .collect::<Vec<_>>(),
            );
        } else {
            for e in all() {
                println!("{:<26} {}", e.name, e.describes);
            }
        }
        return Ok(OK);
    };
    let entry = all()
        .iter()
        .find(|e| e.name == name.trim_end_matches(".json"))
        .ok_or_else(|| {
            CliError::usage(anyhow!(
                "no schema `{name}`; known: {}",
                all().iter().map(|e| e.name).collect::<Vec<_>>().join(", ")
            ))
        })?;
    // A schema is a JSON document either way.
    print!(
        "{}",
        skillforge_contract::schema::render_schema(&(entry.schema)())
    );
    Ok(OK)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn checked_in_schemas_are_current() {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/schemas");
        let bless = std::env::var("SKILLFORGE_BLESS").is_ok_and(|v| v == "1");
        let schemas = all()
            .iter()
            .map(|entry| (file_name(entry.name), (entry.schema)()));
        let stale = skillforge_contract::schema::stale_schemas(&dir, schemas, bless).unwrap();
        assert!(
            stale.is_empty(),
            "stale schemas {stale:?} in docs/schemas; rerun with SKILLFORGE_BLESS=1"
        );
    }

    #[test]
    fn every_checked_in_schema_is_in_the_registry() {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/schemas");
        for file in std::fs::read_dir(dir).unwrap() {
            let name = file.unwrap().file_name().to_string_lossy().into_owned();
            let stem = name.trim_end_matches(".json");
            assert!(
                all().iter().any(|e| e.name == stem),
                "docs/schemas/{name} has no registry entry"
            );
        }
    }
}
