//! The optimizer stage (seed "Complete train-mode path" steps 6–7; facts §3, §9): backend
//! resolution and preflight, the `process` job, attempt directories, and the candidate-import
//! gate shared by `train continue` and `train recover`.
//!
//! Attempts live in `<out-root>/attempts/attempt-NNN/` (`candidate.json`, `artifacts/`, the
//! optimizer's own files); each attempt's argv is
//! `<backend command> --training-package FILE --artifact-root <home>/blobs --out-root <attempt>
//! --candidate-output <attempt>/candidate.json [extra args]`.

use std::path::{Path, PathBuf};

use serde::Serialize;
use skillforge_contract::{
    CandidatePackage, ImportOptions, ImportState, validate_candidate_import,
};
use skillforge_engine::JobSpec;
use skillforge_runner::PayloadError;
use skillforge_runner_process::ProcessPayload;
use skillforge_store::artifacts::StoreArtifactError;
use skillforge_store::blobs::BlobStore;
use skillforge_store::candidates::{import_verified, list_candidates, load_import_state};
use skillforge_store::{Store, StoreError};

use super::stages::{BackendDef, SKILLFORGE_BIN_PLACEHOLDER, StageDef, TrainWorkflow};

/// Stage name of optimizer jobs.
pub const OPTIMIZER_STAGE: &str = "optimizer";
/// File name of the candidate package in an attempt dir.
pub const CANDIDATE_FILE: &str = "candidate.json";

/// The optimizer lock of a session (facts §3): one optimizer per session.
pub fn optimizer_lock_key(session_id: &str) -> String {
    format!("skillopt-train:{session_id}")
}

/// `<out-root>/attempts/attempt-NNN`.
pub fn attempt_dir(out_root: &Path, attempt: u32) -> PathBuf {
    out_root
        .join("attempts")
        .join(format!("attempt-{attempt:03}"))
}

/// The preflight report printed before an optimizer run (seed step 6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Preflight {
    /// Backend name.
    pub backend: String,
    /// Its description.
    pub description: String,
    /// The program as configured.
    pub program: String,
    /// Where it resolved on this machine, `None` when it did not.
    pub resolved_program: Option<String>,
    /// The full argv.
    pub argv: Vec<String>,
    /// The attempt directory (`--out-root`).
    pub attempt_dir: String,
    /// `--candidate-output`.
    pub candidate_output: String,
    /// The named lock the job holds.
    pub lock: String,
}

/// Why a backend cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// `--backend NAME` is not configured.
    #[error(
        "unknown optimizer backend `{name}` (configured: {known}; add [backends.{name}] to <home>/train.toml)"
    )]
    Unknown {
        /// The name.
        name: String,
        /// Names that exist.
        known: String,
    },
    /// The program is missing (facts §3: error text with "executable"/"not found" ⇒ blocked_config).
    #[error(
        "optimizer backend `{name}`: executable `{program}` not found (install it, or fix [backends.{name}] command in <home>/train.toml)"
    )]
    MissingExecutable {
        /// Backend name.
        name: String,
        /// The program.
        program: String,
    },
}

/// Looks `program` up like `execvp`: a path containing `/` must exist and be executable; a bare
/// name is searched on `PATH`.
pub fn resolve_program(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let is_exec = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let p = PathBuf::from(program);
        return is_exec(&p).then_some(p);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| is_exec(p))
    })
}

/// Resolves backend `name` into the attempt's argv and preflight report.
///
/// # Errors
/// [`BackendError::Unknown`] or [`BackendError::MissingExecutable`].
pub fn preflight(
    workflow: &TrainWorkflow,
    name: &str,
    skillforge_bin: &Path,
    training_package: &Path,
    artifact_root: &Path,
    attempt_dir: &Path,
    session_id: &str,
) -> Result<Preflight, BackendError> {
    let def: &BackendDef =
        workflow
            .sections
            .backends
            .get(name)
            .ok_or_else(|| BackendError::Unknown {
                name: name.to_owned(),
                known: workflow
                    .sections
                    .backends
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
    let bin = skillforge_bin.display().to_string();
    let mut argv: Vec<String> = def
        .command
        .iter()
        .map(|a| a.replace(SKILLFORGE_BIN_PLACEHOLDER, &bin))
        .collect();
    let program = argv[0].clone();
    // A fleet worker runs its own skillforge: nothing to resolve on this machine.
    let resolved = if program == skillforge_engine::transfer::WORKER_EXE {
        program.clone()
    } else {
        resolve_program(&program)
            .ok_or_else(|| BackendError::MissingExecutable {
                name: name.to_owned(),
                program: program.clone(),
            })?
            .display()
            .to_string()
    };
    let candidate_output = attempt_dir.join(CANDIDATE_FILE);
    for (flag, value) in [
        ("--training-package", training_package),
        ("--artifact-root", artifact_root),
        ("--out-root", attempt_dir),
        ("--candidate-output", candidate_output.as_path()),
    ] {
        argv.push(flag.to_owned());
        argv.push(value.display().to_string());
    }
    argv.extend(def.extra_args.iter().cloned());
    Ok(Preflight {
        backend: name.to_owned(),
        description: def.description.clone(),
        program,
        resolved_program: Some(resolved),
        argv,
        attempt_dir: attempt_dir.display().to_string(),
        candidate_output: candidate_output.display().to_string(),
        lock: optimizer_lock_key(session_id),
    })
}

/// The optimizer job: `process` runner, `idempotent: false` (a stale lease parks it with
/// recovery available instead of re-running it), holding `skillopt-train:<session>`, a failed
/// run not retried (`retry_failed_runs = false` in `workflows/train.toml`: its files are evidence
/// for `train recover`).
///
/// # Errors
/// [`PayloadError`] when the payload does not serialize.
pub fn optimizer_job(
    stage: &StageDef,
    preflight: &Preflight,
    key: String,
) -> Result<JobSpec, PayloadError> {
    let mut payload = ProcessPayload::argv(preflight.argv.clone());
    payload.cwd = Some(PathBuf::from(&preflight.attempt_dir));
    let mut spec = stage.job(&payload, Some(key))?;
    spec.locks = vec![preflight.lock.clone()];
    Ok(spec)
}

/// The newest attempt under `out_root` (or `out_root` itself) whose `candidate.json` exists:
/// (attempt dir, package file). The optimizer writes the package last, so its presence means
/// the attempt completed.
pub fn completed_attempt(out_root: &Path) -> Option<(PathBuf, PathBuf)> {
    let direct = out_root.join(CANDIDATE_FILE);
    if direct.is_file() {
        return Some((out_root.to_path_buf(), direct));
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(out_root.join("attempts"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("attempt-"))
        })
        .collect();
    dirs.sort();
    dirs.into_iter()
        .rev()
        .find(|d| d.join(CANDIDATE_FILE).is_file())
        .map(|d| {
            let f = d.join(CANDIDATE_FILE);
            (d, f)
        })
}

/// What the import gate decided.
#[derive(Debug, Clone, PartialEq)]
pub enum GateResult {
    /// A pending version (new, or found already imported from the same file).
    Candidate {
        /// `<template>@vN`.
        version_id: String,
        /// False when the same package file had been imported before (no duplicate written).
        is_new: bool,
    },
    /// "optimizer produced no candidate" (S-100): no version written.
    NoCandidate {
        /// The reason.
        reason: String,
        /// The optimizer's report, if any.
        details: Option<serde_json::Value>,
    },
}

/// Why a candidate package could not go through the import gate; every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// The optimizer left no package file where the attempt said it would.
    #[error("the optimizer wrote no candidate package at `{}`", .0.display())]
    NoPackage(PathBuf),
    /// The file could not be read.
    #[error("read candidate package `{file}`: {error}")]
    Read {
        /// The file.
        file: String,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The file is over the document limits.
    #[error("candidate package `{file}` {error}")]
    Limit {
        /// The file.
        file: String,
        /// The limit it breaks.
        error: skillforge_contract::limits::LimitError,
    },
    /// The file is not a candidate package.
    #[error("parse candidate package `{file}`: {error}")]
    Parse {
        /// The file.
        file: String,
        /// The parser's error.
        error: serde_json::Error,
    },
    /// Reading what the gate checks against failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No store connection.
    #[error(transparent)]
    Pool(#[from] sqlx::Error),
    /// The gate refused the package (facts §2).
    #[error("import candidate package `{file}`: {error}")]
    Refused {
        /// The file.
        file: String,
        /// The broken rule.
        error: skillforge_contract::ImportError,
    },
    /// Writing the verified candidate failed.
    #[error("store candidate from `{file}`: {error}")]
    Write {
        /// The file.
        file: String,
        /// The store's error.
        error: StoreArtifactError,
    },
}

/// Imports `candidate_file` through the same gate as `skillforge import` (facts §2: every check
/// before anything is written; never promotes). A package already imported from the same path
/// returns its version instead of a duplicate. Artifact paths are relative to
/// `<attempt dir>/artifacts`.
///
/// # Errors
/// [`GateError`] for an unreadable or refused package, or a store failure.
pub async fn import_gate(
    store: &Store,
    blobs: &BlobStore,
    attempt_dir: &Path,
    candidate_file: &Path,
) -> Result<GateResult, GateError> {
    let file = candidate_file.display().to_string();
    let bytes = std::fs::read(candidate_file).map_err(|error| GateError::Read {
        file: file.clone(),
        error,
    })?;
    skillforge_contract::limits::check_json_bytes(&bytes).map_err(|error| GateError::Limit {
        file: file.clone(),
        error,
    })?;
    let package: CandidatePackage =
        serde_json::from_slice(&bytes).map_err(|error| GateError::Parse {
            file: file.clone(),
            error,
        })?;
    let existing = list_candidates(store.pool(), &package.template_id).await?;
    if let Some(found) = existing.iter().find(|c| c.source_path == file) {
        return Ok(GateResult::Candidate {
            version_id: found.version_id.clone(),
            is_new: false,
        });
    }
    let state = {
        let mut conn = store.pool().acquire().await?;
        load_import_state(&mut conn, &ImportState::needed(&package)).await?
    };
    let artifact_dir = attempt_dir.join("artifacts");
    let options = ImportOptions {
        artifact_dir: Some(&artifact_dir),
        has_blob_store: true,
    };
    match validate_candidate_import(&package, options, &state) {
        Ok(verified) => {
            let imported = import_verified(store, blobs, &verified, &file)
                .await
                .map_err(|error| GateError::Write { file, error })?;
            Ok(GateResult::Candidate {
                version_id: imported.version.id,
                is_new: true,
            })
        }
        Err(e) if e.is_no_candidate() => {
            let reason = match e {
                skillforge_contract::ImportError::NoCandidate { reason, .. } => reason,
                other => other.to_string(),
            };
            Ok(GateResult::NoCandidate {
                reason,
                details: package.eval_report.clone(),
            })
        }
        Err(error) => Err(GateError::Refused { file, error }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preflight_builds_the_external_optimizer_command_line() {
        let w = crate::train::stages::shipped().unwrap();
        let bin = std::env::current_exe().unwrap();
        let p = preflight(
            &w,
            "distill",
            &bin,
            Path::new("/t/training.json"),
            Path::new("/h/blobs"),
            Path::new("/o/attempts/attempt-001"),
            "s1",
        )
        .unwrap();
        assert_eq!(p.argv[1..3], ["optimizer".to_owned(), "distill".to_owned()]);
        let tail: Vec<&str> = p.argv[3..].iter().map(String::as_str).collect();
        assert_eq!(
            tail,
            [
                "--training-package",
                "/t/training.json",
                "--artifact-root",
                "/h/blobs",
                "--out-root",
                "/o/attempts/attempt-001",
                "--candidate-output",
                "/o/attempts/attempt-001/candidate.json"
            ]
        );
        assert_eq!(p.lock, "skillopt-train:s1");
        let dry = preflight(
            &w,
            "distill-dry-run",
            &bin,
            Path::new("t"),
            Path::new("b"),
            Path::new("o"),
            "s1",
        )
        .unwrap();
        assert_eq!(dry.argv.last().map(String::as_str), Some("--dry-run"));
        let missing = BackendDef {
            command: vec!["/nonexistent/optimizer".into()],
            extra_args: vec![],
            description: String::new(),
        };
        let mut w2 = w.clone();
        w2.sections.backends.insert("gone".into(), missing);
        let err = preflight(
            &w2,
            "gone",
            &bin,
            Path::new("t"),
            Path::new("b"),
            Path::new("o"),
            "s1",
        )
        .unwrap_err();
        assert!(
            super::super::phase::is_config_error(&err.to_string()),
            "{err}"
        );
        assert!(matches!(
            preflight(
                &w,
                "nope",
                &bin,
                Path::new("t"),
                Path::new("b"),
                Path::new("o"),
                "s1"
            ),
            Err(BackendError::Unknown { .. })
        ));
    }

    #[test]
    fn completed_attempt_picks_the_newest_with_a_package() {
        let dir = tempfile::tempdir().unwrap();
        assert!(completed_attempt(dir.path()).is_none());
        for n in [1, 2, 3] {
            std::fs::create_dir_all(attempt_dir(dir.path(), n)).unwrap();
        }
        std::fs::write(attempt_dir(dir.path(), 2).join(CANDIDATE_FILE), "{}").unwrap();
        assert_eq!(
            completed_attempt(dir.path()).unwrap().0,
            attempt_dir(dir.path(), 2)
        );
    }
}
