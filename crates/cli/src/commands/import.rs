//! `skillforge import --file candidate.json [--artifact-dir DIR]`: import an external optimizer's
//! candidate package as a `pending` template version (seed "Candidate Package"; facts §2;
//! S-51, S-86..S-91).
//!
//! Every check of facts §2 runs (in [`skillforge_contract::validate_candidate_import`]) before
//! anything is written; then blobs, `eval_artifacts` rows, the pending version and its review row
//! are written in one transaction. A refused package writes nothing. Importing never promotes.
//!
//! Re-importing the same package (same content hash and base, every artifact registered with the
//! same hash) is a no-op that reports the earlier version (`created: false`); a package that reuses
//! a registered artifact id for other content is refused (facts §2 check 4).
//!
//! Exit codes: 0 imported (or already imported); 1 "optimizer produced no candidate" (S-88, S-89: the package is
//! well-formed, the check that it carries a new candidate failed — nothing to review); 2 any
//! other refusal (bad package, missing or mismatching artifact, unknown template or base);
//! 3 the store or blob store could not be written.

use std::path::PathBuf;

use anyhow::anyhow;
use clap::Args;
use serde_json::json;
use skillforge_contract::{
    CandidatePackage, ImportOptions, ImportState, validate_candidate_import,
};
use skillforge_store::blobs::BlobStore;
use skillforge_store::candidates::{
    PriorImport, find_prior_import, import_verified, load_import_state,
};

use crate::context::Context;
use crate::exit::{CHECK_FAILED, CliError, CliResult, OK};
use crate::output::print_json;

/// Arguments of `import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The candidate package JSON (`kind: gitmoot-skillopt-candidate-package`; gitmoot (the Go tool whose SkillOpt formats and status names skillforge keeps); `skillforge
    /// schema candidate-package`).
    #[arg(long, value_name = "FILE")]
    file: PathBuf,
    /// Directory the package's artifact paths are relative to; required when it lists artifacts.
    #[arg(long = "artifact-dir", value_name = "DIR")]
    artifact_dir: Option<PathBuf>,
}

/// Runs `import`: prints the new version id `<template>@vN` (a JSON object with `--json`).
pub async fn run(ctx: &Context, args: ImportArgs) -> CliResult {
    let file = args.file.display().to_string();
    let bytes = std::fs::read(&args.file)
        .map_err(|e| CliError::usage(anyhow!("read candidate package `{file}`: {e}")))?;
    skillforge_contract::limits::check_json_bytes(&bytes)
        .map_err(|e| CliError::usage(anyhow!("candidate package `{file}` {e}")))?;
    let package: CandidatePackage = serde_json::from_slice(&bytes)
        .map_err(|e| CliError::usage(anyhow!("parse candidate package `{file}`: {e}")))?;

    let store = ctx.store().await?;
    let blobs = BlobStore::in_home(&ctx.home);
    let mut state = {
        let mut conn = store.pool().acquire().await?;
        load_import_state(&mut conn, &ImportState::needed(&package)).await?
    };
    // Registered package artifact ids are judged after validation, against what is stored
    // (idempotent re-import); a stored `summary.diff_artifact_id` outside the package stays known.
    let package_ids: Vec<&str> = package.artifacts.iter().map(|a| a.id.trim()).collect();
    state
        .existing_artifact_ids
        .retain(|id| !package_ids.contains(&id.as_str()));
    // A package that says it holds no candidate is answered with that first: its artifacts (or
    // a missing `--artifact-dir`) would otherwise be the first complaint about a package that
    // was never to be imported.
    let base = state.pinned_base.as_ref().or(state
        .template
        .as_ref()
        .and_then(|t| t.current_version.as_ref()));
    if let Some(base) = base
        && let Some(gate) = skillforge_contract::no_candidate_reason(&package, base)
    {
        let e = skillforge_contract::ImportError::NoCandidate {
            reason: gate.reason,
            field: gate.field,
            note: gate.note,
            hint: skillforge_contract::no_candidate_hint(&package),
        };
        return Err(CliError {
            code: CHECK_FAILED,
            error: anyhow!("import candidate package `{file}`: {e}"),
        });
    }
    let options = ImportOptions {
        artifact_dir: args.artifact_dir.as_deref(),
        has_blob_store: true,
    };
    let verified = validate_candidate_import(&package, options, &state).map_err(|e| {
        let error = anyhow!("import candidate package `{file}`: {e}");
        if e.is_no_candidate() {
            CliError {
                code: CHECK_FAILED,
                error,
            }
        } else {
            CliError::usage(error)
        }
    })?;
    let prior = {
        let mut conn = store.pool().acquire().await?;
        find_prior_import(&mut conn, &verified).await?
    };
    match prior {
        PriorImport::NotImported => {}
        PriorImport::Same { version_id } => {
            if ctx.json {
                print_json(
                    &json!({"created": false, "version_id": version_id, "template_id": verified.template_id}),
                );
            } else {
                println!("{version_id}");
                eprintln!("already imported as {version_id}; nothing was written");
            }
            return Ok(OK);
        }
        PriorImport::HashConflict {
            artifact_id,
            stored_hash,
            package_hash,
        } => {
            return Err(CliError::usage(anyhow!(
                "import candidate package `{file}`: candidate artifact {artifact_id:?} already exists with hash \
                 {stored_hash}, but the package's file hashes to {package_hash}; give the new artifact a new id"
            )));
        }
        PriorImport::Taken { artifact_id } => {
            return Err(CliError::usage(anyhow!(
                "import candidate package `{file}`: candidate artifact {artifact_id:?} already exists and belongs to \
                 another candidate (no imported candidate of `{}` has this content and base `{}`); give the \
                 package's artifacts new ids",
                verified.template_id,
                verified.base_version_id
            )));
        }
    }

    let imported = import_verified(&store, &blobs, &verified, &file)
        .await
        .map_err(|e| CliError::env(anyhow!("store candidate from `{file}`: {e}")))?;
    let version = &imported.version;
    if ctx.json {
        print_json(&json!({
            "created": true,
            "version_id": version.id,
            "template_id": version.template_id,
            "version_number": version.version,
            "state": version.state,
            "base_version_id": verified.base_version_id,
            "content_hash": version.content_hash,
            "artifacts": imported.artifacts.iter().map(|a| json!({"id": a.id, "hash": a.hash})).collect::<Vec<_>>(),
        }));
    } else {
        println!("{}", version.id);
        eprintln!(
            "imported {} as pending (base {}); review with `skillforge candidate show {}`",
            version.id, verified.base_version_id, version.id
        );
    }
    // The notify seam runs after the import has returned, never inside it (S-51).
    let seam = crate::control::promotion::after_import(ctx, &store, &version.id).await?;
    if seam["manual"] != true {
        eprintln!(
            "auto-promote: {}",
            seam["reason"].as_str().unwrap_or_default()
        );
    }
    Ok(OK)
}
