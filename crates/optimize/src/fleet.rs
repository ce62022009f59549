//! The optimize loop on a fleet whose workers do not share this disk (Redis; issue 20): an
//! experiment's `agent` job works in the job dir's `work/`, a copy of its worktree sent by
//! content (without the worktree's `.git` pointer, which names a control-plane path), and that
//! copy comes back into the worktree when the job is finished — files the agent deleted are
//! removed there — so scope checks, reverts and commits run on the control plane as on one
//! machine. Measurement, smoke and locating `process` jobs get a copy of their checkout the same
//! way and send nothing back (their result is the job's output). Its transcript comes back from
//! the job dir's `out/`. On a queue whose workers share this disk, jobs name the paths.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use skillforge_engine::{Job, JobSpec};

use super::OptimizeError;
use super::ctx::Ctx;
use super::measure;
use skillforge_stage::files::{self, FilesError, ShippedDir};

/// A checkout's dir in the job dir.
const WORK: &str = "work";
/// The experiment's transcript dir in the job dir.
const OUT: &str = "out";
/// Never sent: the worktree's `.git` file points at the control plane's repository.
const SKIP: &[&str] = &[".git"];

fn env(what: &str) -> impl Fn(FilesError) -> OptimizeError + '_ {
    move |e| OptimizeError::Env(format!("{what}: {e}"))
}

impl Ctx<'_> {
    /// Whether this run's jobs carry their dirs ([`files::ships`]).
    pub(crate) fn ships(&self) -> bool {
        files::ships(self.backend.as_ref())
    }

    /// The `process` job of `stage` running `command` in `checkout` with `vars`: a
    /// `measurement` (or smoke check) in the spec's working directory with its timeout, a
    /// `locating` measurement at the checkout's root with the stage's. On a fleet it runs in a
    /// copy of the checkout sent along.
    ///
    /// # Errors
    /// [`OptimizeError::Invalid`] for a payload that does not serialize; [`OptimizeError::Env`]
    /// when the checkout cannot be sent.
    pub(crate) async fn checkout_job(
        &self,
        stage: &str,
        command: &str,
        checkout: &Path,
        vars: BTreeMap<String, String>,
        key: String,
    ) -> Result<JobSpec, OptimizeError> {
        let is_measurement = stage == "measurement";
        let wd = if is_measurement {
            self.spec.measurement.working_directory.as_deref()
        } else {
            None
        };
        let timeout =
            is_measurement.then(|| Duration::from_secs(self.spec.measurement.timeout_secs()));
        let at = if self.ships() {
            files::worker_path(WORK)
        } else {
            checkout.to_path_buf()
        };
        let mut spec = self.job(
            stage,
            &measure::payload(command, &at, wd, vars),
            key,
            timeout,
        )?;
        if self.ships() {
            let dirs = [ShippedDir {
                rel: WORK,
                local: checkout,
                send: true,
                deliver: false,
                skip: SKIP,
            }];
            files::ship_dirs(self.backend.as_ref(), &mut spec, &dirs)
                .await
                .map_err(env("send the checkout"))?;
        }
        Ok(spec)
    }

    /// The experiment's workdir and transcript path as its payload names them.
    pub(crate) fn experiment_paths(
        &self,
        worktree: &Path,
        transcript: &Path,
    ) -> (std::path::PathBuf, std::path::PathBuf) {
        match self.ships() {
            true => (
                files::worker_path(WORK),
                files::worker_path(OUT).join(transcript.file_name().unwrap_or_default()),
            ),
            false => (worktree.to_path_buf(), transcript.to_path_buf()),
        }
    }

    /// On a fleet, adds the worktree (sent and brought back) and the transcript dir (brought
    /// back) to the experiment's job.
    ///
    /// # Errors
    /// [`OptimizeError::Env`] when the worktree cannot be sent.
    pub(crate) async fn ship_experiment(
        &self,
        spec: &mut JobSpec,
        worktree: &Path,
        transcripts: &Path,
    ) -> Result<(), OptimizeError> {
        if !self.ships() {
            return Ok(());
        }
        let dirs = [
            ShippedDir {
                rel: WORK,
                local: worktree,
                send: true,
                deliver: true,
                skip: SKIP,
            },
            ShippedDir {
                rel: OUT,
                local: transcripts,
                send: false,
                deliver: true,
                skip: &[],
            },
        ];
        files::ship_dirs(self.backend.as_ref(), spec, &dirs)
            .await
            .map_err(env("send the experiment's worktree"))
    }

    /// On a fleet, makes the worktree the worker's copy once the experiment's job is finished
    /// (see [`files::bring_back`]).
    ///
    /// # Errors
    /// [`OptimizeError::Env`] for an expired or corrupt upload or a write failure.
    pub(crate) async fn bring_back_experiment(&self, job: &Job) -> Result<(), OptimizeError> {
        if !self.ships() {
            return Ok(());
        }
        let recorded = self
            .port
            .recorded_outputs(&job.id)
            .await
            .map_err(|e| OptimizeError::Env(format!("the experiment's worktree: {e}")))?;
        files::bring_back(self.backend.as_ref(), &recorded, job, WORK, SKIP)
            .await
            .map_err(env("the experiment's worktree"))
    }
}
