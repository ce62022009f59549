//! The optimizer stage on a fleet that does not share the control plane's disk (Redis; issue
//! 20): its four path flags name the worker's job dir, its inputs travel through the queue's
//! transfer area and its attempt dir comes back as an uploaded output.
//!
//! Job dir layout (every path is the worker's, through [`transfer::JOB_DIR`]):
//! `in/training.json` (`--training-package`), `in/blobs/sha256/<hex[:2]>/<hex>` for every
//! artifact the package lists (`--artifact-root`), `out/` (`--out-root`, the cwd) and
//! `out/candidate.json` (`--candidate-output`). `out/` is delivered to the control plane's
//! attempt dir (`<iteration>/optimizer/attempts/attempt-NNN`), so import, recovery and
//! `train recover` read the same files as on one machine.

use std::path::Path;

use skillforge_contract::TrainingPackage;
use skillforge_engine::transfer::{self, JobFiles, OutputDir, Stager};
use skillforge_engine::{Job, QueueBackend};
use skillforge_store::blobs::BlobStore;

use super::TrainError;

/// `--training-package` on the worker.
pub fn training_package_path() -> String {
    format!("{}/in/training.json", transfer::JOB_DIR)
}

/// `--artifact-root` on the worker.
pub fn artifact_root_path() -> String {
    format!("{}/in/blobs", transfer::JOB_DIR)
}

/// `--out-root` (and the cwd) on the worker.
pub fn out_root_path() -> String {
    format!("{}/out", transfer::JOB_DIR)
}

/// Stages the training package at `training` and every blob it lists from `blobs` into the
/// queue's transfer area; the returned files deliver the worker's `out/` to `attempt_dir`.
///
/// # Errors
/// [`TrainError::Env`] when the queue has no transfer area, a file is unreadable or over the
/// cap (the message names it and `[queue] transfer_max_mb`), or the queue fails.
pub async fn stage_inputs(
    queue: &dyn QueueBackend,
    training: &Path,
    blobs: &BlobStore,
    attempt_dir: &Path,
) -> Result<JobFiles, TrainError> {
    let area = queue.transfer_area().ok_or_else(|| {
        TrainError::Env(format!(
            "the `{}` queue has no transfer area for the optimizer's files",
            queue.name()
        ))
    })?;
    let env =
        |e: transfer::TransferError| TrainError::Env(format!("stage the optimizer's inputs: {e}"));
    let bytes = std::fs::read(training).map_err(|e| {
        TrainError::Env(format!(
            "read training package `{}`: {e}",
            training.display()
        ))
    })?;
    let package: TrainingPackage = serde_json::from_slice(&bytes).map_err(|e| {
        TrainError::Failed(format!(
            "training package `{}` is unreadable: {e}",
            training.display()
        ))
    })?;
    let mut stager = Stager::new(area.as_ref());
    stager
        .add_bytes("in/training.json", &bytes, false)
        .await
        .map_err(env)?;
    let mut hashes: Vec<&str> = package.artifacts.iter().map(|a| a.hash.as_str()).collect();
    hashes.sort_unstable();
    hashes.dedup();
    for hash in hashes {
        let hex = hash.trim_start_matches("sha256:");
        let blob = blobs
            .get(hash)
            .map_err(|e| TrainError::Env(format!("read artifact blob {hash} to stage it: {e}")))?;
        let rel = format!("in/blobs/sha256/{}/{hex}", hex.get(..2).unwrap_or("00"));
        stager.add_bytes(&rel, &blob, false).await.map_err(env)?;
    }
    Ok(JobFiles {
        inputs: stager.finish(),
        outputs: vec![OutputDir {
            dir: "out".into(),
            deliver_to: attempt_dir.to_path_buf(),
        }],
    })
}

/// Delivers what `job`'s current attempt uploaded (see [`transfer::deliver_outputs`]) into its
/// attempt dir as the store recorded it (never the queue's `deliver_to`); the same delivery ingestion does, run here because the train steps read the
/// attempt dir as soon as the job is finished. Idempotent; nothing for a job without outputs.
///
/// # Errors
/// [`TrainError::Env`] for an expired or corrupt upload (named by hash) or a write failure.
pub async fn deliver(
    queue: &dyn QueueBackend,
    store: &skillforge_store::Store,
    job: &Job,
) -> Result<usize, TrainError> {
    if job.spec.files.outputs.is_empty() {
        return Ok(0);
    }
    let Some(area) = queue.transfer_area() else {
        return Ok(0);
    };
    let recorded = skillforge_stage::files::recorded_outputs(store, &job.id)
        .await
        .map_err(|e| TrainError::Env(e.to_string()))?;
    transfer::deliver_outputs(area.as_ref(), job, &recorded)
        .await
        .map_err(|e| {
            TrainError::Env(format!(
                "deliver the outputs of optimizer job {}: {e}",
                job.id
            ))
        })
}
