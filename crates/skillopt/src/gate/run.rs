//! Running the replay gate (issue 34 item 11): one durable job per (corpus item, side) through
//! the stage port, scored when they end, recorded as a `skillopt_gate_runs` row with its per-item
//! deltas. Job keys name the candidate, the champion, the corpus hash, the attempt, the item and
//! the side, so a gate run interrupted and started again finds its jobs instead of replaying twice.

use std::collections::BTreeMap;

use skillforge_engine::Job;
use skillforge_runner::ExitClass;
use skillforge_runner_agent::{AgentPayload, AgentReport};
use skillforge_runner_process::ProcessPayload;
use skillforge_stage::{StageJobs, WorkflowDef};
use skillforge_store::Store;
use skillforge_store::candidates::CandidateRow;
use skillforge_store::gates::{GateRunRow, record_gate_run, score_from_gate};
use skillforge_store::templates::{current_version, get_version};

use super::corpus::{Corpus, CorpusItem};
use super::score::{GateVerdict, ItemDelta, ItemScore, decide_gate, score_replay};
use super::{ASK_STAGE, COMMAND_STAGE};

/// Why a gate run could not be made (nothing is recorded then).
#[derive(Debug, thiserror::Error)]
pub enum GateRunError {
    /// The template has no champion to replay against.
    #[error("template `{0}` has no current version to replay against")]
    NoChampion(String),
    /// The candidate is the champion already.
    #[error("`{0}` is the current version: there is nothing to gate")]
    IsChampion(String),
    /// The domain store failed.
    #[error(transparent)]
    Store(#[from] skillforge_store::StoreError),
    /// The queue failed.
    #[error("job queue: {0}")]
    Queue(#[from] skillforge_engine::EngineError),
    /// A job payload did not serialize.
    #[error(transparent)]
    Payload(#[from] skillforge_runner::PayloadError),
}

/// What one gate run is asked to do.
#[derive(Debug, Clone)]
pub struct GateRequest<'a> {
    /// The corpus, validated.
    pub corpus: &'a Corpus,
    /// Where it was read from, as given (recorded).
    pub corpus_path: &'a str,
    /// The candidate.
    pub candidate: &'a CandidateRow,
    /// The agent runtime of `ask` replays (unused with a `replay_command`).
    pub runtime: &'a str,
    /// 1 for a first run, 2 for the retry after a failed one.
    pub attempt: i64,
}

/// A recorded gate run: the row (with its per-item deltas) and the verdict.
#[derive(Debug, Clone)]
pub struct GateOutcome {
    /// The stored row.
    pub row: GateRunRow,
    /// The per-item scores and deltas.
    pub deltas: Vec<ItemDelta>,
    /// The verdict.
    pub verdict: GateVerdict,
    /// Whether the candidate had no score and took the candidate mean as its score now.
    pub scored_candidate: bool,
    /// The replay log of the items the candidate did not pass (side, item, note, output tail):
    /// what a retry feeds back to the optimizer.
    pub failing_log: String,
    /// The same items, structured for the optimizer's training package: `{"id", "prompt",
    /// "expected", "note"}` each (the distill optimizer's `replay_gate_failures`).
    pub failures: Vec<serde_json::Value>,
}

const SIDES: [&str; 2] = ["champion", "candidate"];

#[expect(
    clippy::too_many_arguments,
    reason = "one replay: the corpus, its item, the side and its template"
)]
fn replay_job(
    stages: &WorkflowDef,
    corpus: &Corpus,
    item: &CorpusItem,
    side: &str,
    version_id: &str,
    content: &str,
    runtime: &str,
    key: String,
) -> Result<skillforge_engine::JobSpec, skillforge_runner::PayloadError> {
    match &corpus.replay_command {
        Some(line) => {
            // The template travels in the environment, not on stdin: a command that exits without
            // reading its stdin would break the pipe under the worker writing it.
            let mut payload = ProcessPayload::shell(line.clone());
            payload.env = BTreeMap::from([
                ("SKILLFORGE_REPLAY_TEMPLATE".to_owned(), content.to_owned()),
                ("SKILLFORGE_REPLAY_ITEM".to_owned(), item.id.clone()),
                ("SKILLFORGE_REPLAY_PROMPT".to_owned(), item.prompt.clone()),
                (
                    "SKILLFORGE_REPLAY_EXPECTED".to_owned(),
                    item.expected.clone(),
                ),
                (
                    "SKILLFORGE_REPLAY_VERSION".to_owned(),
                    version_id.to_owned(),
                ),
                ("SKILLFORGE_REPLAY_SIDE".to_owned(), side.to_owned()),
            ]);
            stages.stage(COMMAND_STAGE).job(&payload, Some(key))
        }
        None => {
            let payload =
                AgentPayload::new(runtime, crate::ab::ask::ask_prompt(content, &item.prompt));
            stages.stage(ASK_STAGE).job(&payload, Some(key))
        }
    }
}

/// The score of a finished replay job and its output (for the failing log).
fn score_job(job: &Job, corpus: &Corpus, expected: &str) -> (ItemScore, String) {
    let Some(outcome) = job.outcome.as_ref() else {
        return (
            score_replay(None, "", expected),
            job.error.clone().unwrap_or_default(),
        );
    };
    if corpus.replay_command.is_some() {
        return (
            score_replay(Some(&outcome.exit), &outcome.stdout_tail, expected),
            format!("{}{}", outcome.stdout_tail, outcome.stderr_tail),
        );
    }
    // An agent replay: a run that did not pass gave no answer to score (not a wrong answer).
    let answer = serde_json::from_value::<AgentReport>(outcome.detail.clone())
        .ok()
        .and_then(|r| r.final_message);
    match (&outcome.exit, answer) {
        (ExitClass::Passed, Some(answer)) => (
            score_replay(Some(&ExitClass::Passed), &answer, expected),
            answer,
        ),
        (exit, _) => (
            ItemScore::Unscorable {
                note: format!("the agent gave no answer ({})", exit.label()),
            },
            outcome.stderr_tail.clone(),
        ),
    }
}

/// Runs the gate: replays every item for the champion and the candidate as durable jobs, waits
/// for them, scores them, records the run (and, for a candidate without a score, its corpus mean
/// as the score, issue 37 item 6).
///
/// # Errors
/// [`GateRunError`]: no champion, the candidate is the champion, or the store or queue failed.
pub async fn run_gate(
    store: &Store,
    jobs: &dyn StageJobs,
    stages: &WorkflowDef,
    req: &GateRequest<'_>,
) -> Result<GateOutcome, GateRunError> {
    let candidate = req.candidate;
    let champion = current_version(store.pool(), &candidate.template_id)
        .await?
        .ok_or_else(|| GateRunError::NoChampion(candidate.template_id.clone()))?;
    if champion.id == candidate.version_id {
        return Err(GateRunError::IsChampion(candidate.version_id.clone()));
    }
    let candidate_content = get_version(store.pool(), &candidate.version_id)
        .await?
        .map(|v| v.content)
        .unwrap_or_default();
    let hash = req.corpus.hash();
    let mut ids = Vec::new();
    for item in &req.corpus.items {
        for side in SIDES {
            let (version_id, content) = if side == "champion" {
                (champion.id.as_str(), champion.content.as_str())
            } else {
                (candidate.version_id.as_str(), candidate_content.as_str())
            };
            let key = format!(
                "replay:{}:{}:{}:a{}:{}:{side}",
                candidate.version_id,
                champion.id,
                &hash[..16],
                req.attempt,
                item.id
            );
            let spec = replay_job(
                stages,
                req.corpus,
                item,
                side,
                version_id,
                content,
                req.runtime,
                key,
            )?;
            ids.push(jobs.submit(&spec).await?.job_id);
        }
    }
    let done = jobs.wait(&ids, "replaying the corpus").await?;
    let mut deltas = Vec::new();
    let mut failing_log = String::new();
    let mut failures = Vec::new();
    for (item, pair) in req.corpus.items.iter().zip(done.chunks(2)) {
        let (champion_score, _) = score_job(&pair[0], req.corpus, &item.expected);
        let (candidate_score, output) = score_job(&pair[1], req.corpus, &item.expected);
        if candidate_score.score() != Some(1.0) {
            failing_log.push_str(&format!(
                "## item {} (candidate {}): {}\nprompt: {}\nexpected: {}\noutput:\n{}\n\n",
                item.id,
                candidate.version_id,
                candidate_score.note(),
                item.prompt.trim(),
                item.expected.trim(),
                output.trim()
            ));
            failures.push(serde_json::json!({
                "id": item.id,
                "prompt": item.prompt,
                "expected": item.expected,
                "note": candidate_score.note(),
            }));
        }
        deltas.push(ItemDelta::new(&item.id, champion_score, candidate_score));
    }
    let verdict = decide_gate(&deltas);
    let row = GateRunRow {
        id: format!("gate-{}", uuid::Uuid::now_v7().simple()),
        template_id: candidate.template_id.clone(),
        candidate_version_id: candidate.version_id.clone(),
        champion_version_id: champion.id.clone(),
        corpus_path: req.corpus_path.to_owned(),
        corpus_version: i64::from(req.corpus.version),
        corpus_items: i64::try_from(req.corpus.items.len()).unwrap_or(i64::MAX),
        attempts: req.attempt,
        accepted: verdict.accepted,
        champion_mean: verdict.champion_mean,
        candidate_mean: verdict.candidate_mean,
        reason: verdict.reason.clone(),
        deltas_json: serde_json::to_string(&deltas).unwrap_or_else(|_| "[]".to_owned()),
        created_at: String::new(),
        corpus_hash: hash,
    };
    record_gate_run(store.pool(), &row).await?;
    let scored_candidate = match verdict.candidate_mean {
        Some(mean) => {
            let evidence = format!(
                "replay gate {}: corpus mean over {} items of corpus version {} ({})",
                row.id, row.corpus_items, row.corpus_version, row.corpus_path
            );
            score_from_gate(store.pool(), &candidate.version_id, mean, &evidence).await?
        }
        None => false,
    };
    Ok(GateOutcome {
        row,
        deltas,
        verdict,
        scored_candidate,
        failing_log,
        failures,
    })
}
