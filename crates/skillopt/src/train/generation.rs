//! Option generation (seed "Complete train-mode path" step 3): one `agent` job per review item,
//! and the [`TrainResultHandler`] that turns a finished job into review options exactly once.
//!
//! The job's idempotency key is `<session>:<iteration>:<item>:options`, so enqueueing the stage
//! again returns the same job; the handler writes option `<run>/<item>/<label>` with artifact
//! `<run>/<item>/option-<label>` only when missing, so re-applying a result (a second ingestion,
//! a re-run after a stale lease) never duplicates options.

use serde::Deserialize;
use skillforge_contract::driver_for_media_type;
use skillforge_engine::ingest::{ApplyError, ResultHandler};
use skillforge_engine::{Job, JobSpec, JobState};
use skillforge_runner::PayloadError;
use skillforge_runner_agent::{AgentPayload, AgentReport};
use skillforge_store::artifacts::{StoreArtifactError, get_artifact, store_artifact};
use skillforge_store::blobs::BlobStore;
use skillforge_store::train::{count_item_options, insert_generated_option};
use sqlx::SqliteConnection;

use super::items::ItemSpec;
use skillforge_stage::StageDef;

/// Workflow name of every train job.
pub const TRAIN_WORKFLOW: &str = "train";
/// Stage name of generation jobs.
pub const GENERATION_STAGE: &str = "option_generation";
/// Media type of generated option artifacts.
pub const OPTION_MEDIA_TYPE: &str = "text/markdown";

/// The idempotency key of an item's generation job: `<session>:<iteration>:<item>:options`.
pub fn generation_key(session_id: &str, iteration_id: &str, item_id: &str) -> String {
    format!("{session_id}:{iteration_id}:{item_id}:options")
}

/// Parses a generation key back into (session, iteration, item); `None` for other keys.
pub fn parse_generation_key(key: &str) -> Option<(&str, &str, &str)> {
    let rest = key.strip_suffix(":options")?;
    let mut parts = rest.splitn(3, ':');
    Some((parts.next()?, parts.next()?, parts.next()?))
}

/// Artifact id of a generated option: `<run>/<item>/option-<label>`.
pub fn option_artifact_id(run_id: &str, item_id: &str, label: &str) -> String {
    format!("{run_id}/{item_id}/option-{label}")
}

/// The prompt of one item: the scripted runtime's header (`task: generate_options`,
/// `options: N`), then the request, the item and the template the options must follow.
pub fn generation_prompt(
    request: &str,
    item: &ItemSpec,
    n_options: i64,
    template_version: &str,
    template: &str,
) -> String {
    let title = if item.title.is_empty() {
        &item.id
    } else {
        &item.title
    };
    format!(
        "task: generate_options\noptions: {n_options}\n\n\
         Write {n_options} clearly different options for the review item below, each following the agent \
         template. Answer with JSON only: {{\"options\":[{{\"label\":\"a\",\"content\":\"...\"}}, ...]}}.\n\n\
         Request — {request}\n\nItem {} — {title}\n{}\n\nTemplate {template_version}:\n{template}\n",
        item.id, item.input
    )
}

/// The job spec of one item's generation (runner `agent`, times from the stage definition).
///
/// # Errors
/// [`PayloadError`] when the payload does not serialize.
pub fn generation_job(
    stage: &StageDef,
    payload: &AgentPayload,
    key: String,
) -> Result<JobSpec, PayloadError> {
    stage.job(payload, Some(key))
}

/// One option as an agent returns it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct GeneratedOption {
    /// Label (lowercased when stored).
    pub label: String,
    /// The option's text.
    pub content: String,
}

#[derive(Deserialize)]
struct OptionsMessage {
    options: Vec<GeneratedOption>,
}

/// An agent's final message without `{"options":[...]}` (the parser's error text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the agent's final message is not {{\"options\":[...]}}: {0}")]
pub struct OptionsError(pub String);

/// Reads `{"options":[{label, content}]}` from an agent's final message; a JSON object embedded
/// in prose (the first `{` to the last `}`) is accepted.
///
/// # Errors
/// [`OptionsError`] when no such object is found.
pub fn parse_options(final_message: &str) -> Result<Vec<GeneratedOption>, OptionsError> {
    let text = final_message.trim();
    let parsed: Result<OptionsMessage, _> =
        serde_json::from_str(text).or_else(|e| match (text.find('{'), text.rfind('}')) {
            (Some(a), Some(b)) if a < b => serde_json::from_str(&text[a..=b]),
            _ => Err(e),
        });
    parsed
        .map(|m| m.options)
        .map_err(|e| OptionsError(e.to_string()))
}

/// Applies train job results to the domain store (DESIGN §3: the control plane is the only writer).
///
/// Generation jobs that succeeded become options; everything else has no domain effect here
/// (the optimizer's output is imported from its files by the candidate-import step). Idempotent
/// on its own — it writes only missing options and artifacts — so it is exactly-once whether it
/// runs under [`skillforge_engine::ingest::ingest_once`] or directly from `train continue`.
#[derive(Debug, Clone)]
pub struct TrainResultHandler {
    /// The home's blob store.
    pub blobs: BlobStore,
}

/// What applying one generation result did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AppliedOptions {
    /// Options written now.
    pub inserted: usize,
    /// Options that were already there.
    pub existing: usize,
    /// The job succeeded but its agent answered no usable options (not `{"options":[...]}`, or
    /// too few): nothing was written, and why. Applying the result again cannot change what the
    /// agent said, so this is the result applied without effect; the train step reports it as
    /// the item's failure.
    pub unusable_output: Option<String>,
    /// With `unusable_output`: the `scripted` stand-in answered plain text, i.e. a
    /// `scripted: options-reply` line of the template or prompt (see [`SCRIPTED_REPLY_HINT`]).
    pub scripted_reply: bool,
}

/// What to do when the `scripted` stand-in answered a `scripted: options-reply` line that holds no
/// options (its `reply` lines answer the eval loop's arms and `ask`, never option generation:
/// docs/reference/scripted.md).
pub const SCRIPTED_REPLY_HINT: &str = "the scripted agent answered the `scripted: options-reply` \
     line of the template (or its prompt), which holds no options as JSON: remove that line, or \
     start the session with a model runtime, `train start --runtime claude`";

impl TrainResultHandler {
    /// Writes the options of a finished generation job (no-op for other jobs).
    ///
    /// # Errors
    /// [`ApplyError::Unusable`] when the job succeeded but its report cannot be read (or its
    /// review run is gone; an answer without usable options is
    /// [`AppliedOptions::unusable_output`]); [`ApplyError::Env`] when a blob cannot be written;
    /// [`ApplyError::Store`].
    pub async fn apply_generation(
        &self,
        conn: &mut SqliteConnection,
        job: &Job,
    ) -> Result<AppliedOptions, ApplyError> {
        let mut applied = AppliedOptions::default();
        if job.spec.workflow != TRAIN_WORKFLOW
            || job.spec.stage != GENERATION_STAGE
            || job.state != JobState::Succeeded
        {
            return Ok(applied);
        }
        let unusable = |reason: String| ApplyError::Unusable {
            job_id: job.id.clone(),
            reason,
        };
        let Some((_, run_id, item_id)) = job
            .spec
            .idempotency_key
            .as_deref()
            .and_then(parse_generation_key)
        else {
            return Err(unusable(format!(
                "generation job {} has no train idempotency key",
                job.id
            )));
        };
        let n_wanted: i64 = sqlx::query_scalar("SELECT options_count FROM eval_runs WHERE id = ?")
            .bind(run_id)
            .fetch_optional(&mut *conn)
            .await?
            .ok_or_else(|| {
                unusable(format!(
                    "review run `{run_id}` of job {} is missing",
                    job.id
                ))
            })?;
        let have = count_item_options(&mut *conn, run_id, item_id).await?;
        if have >= n_wanted {
            applied.existing = usize::try_from(have).unwrap_or(0);
            return Ok(applied);
        }
        let report: AgentReport = job
            .outcome
            .as_ref()
            .ok_or_else(|| unusable(format!("generation job {} has no outcome", job.id)))
            .and_then(|o| {
                serde_json::from_value(o.detail.clone())
                    .map_err(|e| unusable(format!("generation job {}: agent report: {e}", job.id)))
            })?;
        let message = report.final_message.unwrap_or_default();
        let n = usize::try_from(n_wanted).unwrap_or(0);
        let options = match parse_options(&message) {
            Ok(options) if options.len() >= n => options,
            Ok(options) => {
                applied.unusable_output = Some(format!(
                    "generation job {} (item `{item_id}`) returned {} options, {n} needed",
                    job.id,
                    options.len()
                ));
                return Ok(applied);
            }
            Err(e) => {
                applied.unusable_output =
                    Some(format!("generation job {} (item `{item_id}`): {e}", job.id));
                applied.scripted_reply =
                    report.runtime == "scripted" && !message.trim_start().starts_with('{');
                return Ok(applied);
            }
        };
        let role_meta =
            serde_json::json!({"generated_by": report.runtime, "job_id": job.id}).to_string();
        for option in options.into_iter().take(n) {
            let label = option.label.trim().to_lowercase();
            let artifact_id = option_artifact_id(run_id, item_id, &label);
            if get_artifact(&mut *conn, &artifact_id).await?.is_none() {
                store_artifact(
                    &mut *conn,
                    &self.blobs,
                    &artifact_id,
                    option.content.as_bytes(),
                    OPTION_MEDIA_TYPE,
                    driver_for_media_type(OPTION_MEDIA_TYPE),
                )
                .await
                .map_err(|e| match e {
                    StoreArtifactError::Store(s) => ApplyError::Store(s),
                    StoreArtifactError::Blob(b) => ApplyError::Env {
                        job_id: job.id.clone(),
                        reason: format!("write option blob: {b}"),
                    },
                })?;
            }
            if insert_generated_option(
                &mut *conn,
                run_id,
                item_id,
                &label,
                &artifact_id,
                "",
                &role_meta,
            )
            .await?
            {
                applied.inserted += 1;
            } else {
                applied.existing += 1;
            }
        }
        Ok(applied)
    }
}

#[async_trait::async_trait]
impl ResultHandler for TrainResultHandler {
    async fn apply(&self, conn: &mut SqliteConnection, job: &Job) -> Result<(), ApplyError> {
        let applied = self.apply_generation(conn, job).await?;
        if let Some(why) = applied.unusable_output {
            // Applied without effect: the step that waits for the job reports it.
            tracing::info!(job_id = %job.id, %why, "generation result holds no usable options");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    use super::*;

    #[test]
    fn generation_job_runs_on_the_agent_runner_and_a_payload_that_does_not_serialize_is_an_error() {
        let workflow = crate::train::stages::shipped().unwrap();
        let stage = workflow.stage(GENERATION_STAGE);
        let payload = AgentPayload::new("scripted", "task: generate_options");
        let spec = generation_job(stage, &payload, "s:i:item:options".into()).unwrap();
        assert_eq!(
            (spec.kind.as_str(), stage.runner.as_deref()),
            ("agent", Some("agent"))
        );
        assert_eq!(spec.payload, serde_json::to_value(&payload).unwrap());
        let mut unserializable = payload;
        unserializable.workdir = Some(OsStr::from_bytes(b"/work/\xff").into());
        let error = generation_job(stage, &unserializable, "s:i:item:options".into()).unwrap_err();
        assert_eq!(error.kind, "agent");
        assert!(error.to_string().contains("invalid UTF-8"), "{error}");
    }

    #[test]
    fn keys_round_trip() {
        let key = generation_key("ts-1", "ts-1-i001", "item-a");
        assert_eq!(key, "ts-1:ts-1-i001:item-a:options");
        assert_eq!(
            parse_generation_key(&key),
            Some(("ts-1", "ts-1-i001", "item-a"))
        );
        assert_eq!(parse_generation_key("other"), None);
    }

    #[test]
    fn options_parse_plain_and_embedded() {
        let plain = r#"{"options":[{"label":"a","content":"x"}]}"#;
        assert_eq!(parse_options(plain).unwrap().len(), 1);
        assert_eq!(
            parse_options(&format!("Here:\n{plain}\nDone.")).unwrap()[0].content,
            "x"
        );
        assert!(parse_options("no json").is_err());
    }
}
