//! Judge passes in the loop: the sampled items of one measured output scored by judge batches
//! dispatched as independent `agent` jobs (stage `judge`), with the per-run cache, the one
//! re-dispatch of a batch without `feedback` or with a missing item, and the aggregate put into
//! the sample's metrics under `metric.primary.name` (seed: optimize-loop, loop.md 3.3 steps 4–5,
//! judge-prompt-template.md; O-08, O-09, O-11, O-30 … O-34, resolutions 17).
//!
//! **Independence (O-11):** every batch is its own job with its own prompt holding only that
//! batch's items and the rubric; the job has no work dir (it runs in its attempt's scratch dir,
//! never the experiment's worktree) and sees no other batch's scores. The orchestrator never
//! scores anything itself: a judge job that cannot run (`not_runnable`: its runtime is missing
//! or not logged in) or ends without passing after its attempts makes the pass
//! [`Judged::Undispatchable`], and the caller records the experiment `error` (O-31).
//!
//! Job keys are `judge:<tag>:<digest of the batch's content hashes>:<call>`, so a resumed run
//! finds the batches it dispatched, and a batch that landed is in the cache before the next.

use std::collections::BTreeSet;

use serde_json::Value;
use skillforge_engine::Job;
use skillforge_runner_agent::{AgentPayload, Spend as AgentSpend, Usage};

use crate::OptimizeError;
use crate::ctx::{Ctx, passed};
use crate::judge::{self, JudgeCache, JudgedItem, Reply};
use crate::log::JudgeRecord;
use crate::measure::{Sample, SampleOutput};
use crate::snapshot::WorstCase;
use crate::spec::{JudgeSpec, MetricKind};
use skillforge_stage::fs::{sha256_hex, write_atomic};

/// The judge pass of one output.
#[derive(Debug, Clone, PartialEq)]
pub enum Judged {
    /// Scored: the record of the sampled items and their worst cases.
    Scored {
        /// Items, calls, cached and unscored counts.
        record: JudgeRecord,
        /// About five worst items by `metric.primary.direction`, with reasons (O-34).
        worst: Vec<WorstCase>,
    },
    /// A judge job could not run: the reason (O-31).
    Undispatchable(String),
}

/// A pair after its judge passes.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgedPair {
    /// The reference sample (its metrics carry the judge aggregate).
    pub reference: Sample,
    /// The candidate sample; `error` (judges undispatchable) when a judge could not run.
    pub candidate: Sample,
    /// The candidate's judge record (the selection sample's items, O-39).
    pub record: Option<JudgeRecord>,
    /// The candidate's worst items.
    pub worst: Vec<WorstCase>,
    /// Judge calls dispatched for both sides.
    pub calls: u32,
    /// Tokens and cost the judge runs of both sides reported (runs of a side whose judges could
    /// not all run are not counted).
    pub spend: AgentSpend,
    /// The undispatchable reason, when a judge could not run.
    pub blocker: Option<String>,
}

/// The prefix of the `error` reason of an experiment whose judges could not run (O-31).
pub const UNDISPATCHABLE: &str = "judges undispatchable";

/// Whether this run judges its primary.
pub fn judges<'a>(ctx: &'a Ctx<'_>) -> Option<&'a JudgeSpec> {
    (ctx.spec.metric.primary.kind == MetricKind::Judge)
        .then_some(ctx.spec.metric.judge.as_ref())
        .flatten()
}

fn score_field<'a>(ctx: &'a Ctx<'_>, j: &'a JudgeSpec) -> &'a str {
    j.score_field
        .as_deref()
        .unwrap_or(&ctx.spec.metric.primary.name)
}

/// Reads `judge-cache.yaml` (empty when absent).
///
/// # Errors
/// [`OptimizeError::Invalid`] when the file exists but does not parse, naming it.
pub fn read_cache(root: &crate::state::StateRoot) -> Result<JudgeCache, OptimizeError> {
    let path = root.judge_cache();
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            crate::check_yaml(&text, &format!("judge cache `{}`", path.display()))?;
            serde_norway::from_str(&text)
                .map_err(|e| OptimizeError::Invalid(format!("`{}`: {e}", path.display())))
        }
        Err(_) => Ok(JudgeCache::default()),
    }
}

fn write_cache(ctx: &Ctx<'_>, cache: &JudgeCache) -> Result<(), OptimizeError> {
    let text = serde_norway::to_string(cache).map_err(|e| OptimizeError::Invalid(e.to_string()))?;
    Ok(write_atomic(&ctx.root.judge_cache(), &text)?)
}

/// The first 16 hex digits of the sha256 of the batch's content hashes, concatenated.
fn batch_digest(batch: &[(String, Value)]) -> String {
    let joined: String = batch.iter().map(|(hash, _)| hash.as_str()).collect();
    sha256_hex(joined.as_bytes())[..16].to_owned()
}

fn final_message(job: &Job) -> String {
    job.outcome
        .as_ref()
        .and_then(|o| o.detail.get("final_message"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

fn why_not(job: &Job) -> String {
    let outcome = job.outcome.as_ref().map(|o| {
        format!(
            "{} {}",
            o.exit.label(),
            o.stderr_tail.lines().last().unwrap_or("").trim()
        )
    });
    format!(
        "judge job {} ended {}: {}",
        job.id,
        job.state,
        job.error.clone().or(outcome).unwrap_or_default().trim()
    )
}

/// What one pass scores: the items under `metric.judge.rubric`, or the singletons under
/// `singleton_rubric` with the clusters' summaries.
#[derive(Debug, Clone, Copy)]
struct Pass<'a> {
    rubric: &'a str,
    sample_size: usize,
    stratify: Option<&'a str>,
    singleton_summaries: Option<&'a [Value]>,
}

impl Pass<'_> {
    fn prompt(&self, batch: &[(String, Value)]) -> String {
        match self.singleton_summaries {
            Some(summaries) => judge::render_singleton_prompt(self.rubric, batch, summaries),
            None => judge::render_prompt(self.rubric, batch),
        }
    }

    fn read(&self, text: &str, batch: &[(String, Value)], score_field: &str) -> Reply {
        match self.singleton_summaries {
            Some(_) => judge::read_singleton_reply(text, batch),
            None => judge::read_reply(text, batch, score_field),
        }
    }
}

/// One round of judge calls: every batch in `batches` as its own job, all submitted before any
/// is awaited. `Err` is the undispatchable reason.
async fn round(
    ctx: &Ctx<'_>,
    j: &JudgeSpec,
    pass: Pass<'_>,
    batches: &[&Vec<(String, Value)>],
    tag: &str,
    call: u32,
    spend: &mut AgentSpend,
) -> Result<Result<Vec<Reply>, String>, OptimizeError> {
    let runtime = j.runtime_for(&ctx.spec.execution);
    // The tier resolved by the runtime's profile; the spec was checked at load.
    let model = j
        .model_for(&ctx.spec.execution)
        .map_err(|(key, message)| OptimizeError::Invalid(format!("`{key}`: {message}")))?;
    let mut specs = Vec::with_capacity(batches.len());
    for batch in batches {
        let mut payload = AgentPayload::new(runtime, pass.prompt(batch));
        payload.model = Some(model.clone());
        specs.push(ctx.job(
            "judge",
            &payload,
            ctx.key(&format!("judge:{tag}:{}:{call}", batch_digest(batch))),
            None,
        )?);
    }
    let jobs = crate::stages::run_all(ctx.port, &specs, "judging").await?;
    for job in jobs.iter().filter(|job| job.outcome.is_some()) {
        let usage: Option<Usage> = job
            .outcome
            .as_ref()
            .and_then(|o| o.detail.get("usage"))
            .and_then(|u| serde_json::from_value(u.clone()).ok());
        spend.add_run(usage.as_ref());
    }
    let mut replies = Vec::with_capacity(jobs.len());
    for (job, batch) in jobs.iter().zip(batches) {
        if !passed(job) {
            return Ok(Err(why_not(job)));
        }
        replies.push(pass.read(&final_message(job), batch, score_field(ctx, j)));
    }
    Ok(Ok(replies))
}

/// Scores the items of `items` sampled with `seed` (never an id in `exclude`) under `tag`: cache
/// first, then the uncached batches as judge jobs, each re-dispatched once when its reply lacks
/// feedback or an item (O-32, O-33); results go to the cache as they land.
///
/// # Errors
/// As the port and the cache file; a judge that cannot run is [`Judged::Undispatchable`].
pub async fn judge_items(
    ctx: &Ctx<'_>,
    j: &JudgeSpec,
    items: &[Value],
    seed: u64,
    exclude: &BTreeSet<String>,
    tag: &str,
) -> Result<Judged, OptimizeError> {
    let pass = Pass {
        rubric: &j.rubric,
        sample_size: j.sample_size as usize,
        stratify: j.stratification.as_ref().map(|s| s.field.as_str()),
        singleton_summaries: None,
    };
    run_pass(ctx, j, pass, items, seed, exclude, tag).await
}

/// The summaries singleton judges see: the output's own, else `id` + `title`/`summary`/the first
/// 80 characters of `content` of each item.
fn summaries(out: &SampleOutput) -> Vec<Value> {
    if !out.cluster_summaries.is_empty() {
        return out.cluster_summaries.clone();
    }
    out.items
        .iter()
        .map(|i| {
            let text = i.get("title").or_else(|| i.get("summary")).or_else(|| i.get("content")).map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned)).unwrap_or_default();
            serde_json::json!({"id": judge::item_id(i), "title": text.chars().take(80).collect::<String>()})
        })
        .collect()
}

async fn run_pass(
    ctx: &Ctx<'_>,
    j: &JudgeSpec,
    pass: Pass<'_>,
    items: &[Value],
    seed: u64,
    exclude: &BTreeSet<String>,
    tag: &str,
) -> Result<Judged, OptimizeError> {
    let sampled = judge::sample(items, pass.sample_size, seed, pass.stratify, exclude);
    let mut cache = read_cache(&ctx.root)?;
    let plan = judge::plan(&sampled, &cache, pass.rubric, j.batch_size as usize);
    let mut record = JudgeRecord {
        cached: plan.cached.len() as u32,
        ..JudgeRecord::default()
    };
    let all: Vec<&Vec<(String, Value)>> = plan.batches.iter().collect();
    let first = match round(ctx, j, pass, &all, tag, 0, &mut record.spend).await? {
        Ok(r) => r,
        Err(reason) => return Ok(Judged::Undispatchable(reason)),
    };
    record.calls += all.len() as u32;
    let again: Vec<usize> = first
        .iter()
        .enumerate()
        .filter(|(_, r)| r.needs_redispatch())
        .map(|(i, _)| i)
        .collect();
    let retry_batches: Vec<&Vec<(String, Value)>> =
        again.iter().map(|i| &plan.batches[*i]).collect();
    let mut second = match round(ctx, j, pass, &retry_batches, tag, 1, &mut record.spend).await? {
        Ok(r) => r.into_iter(),
        Err(reason) => return Ok(Judged::Undispatchable(reason)),
    };
    record.calls += retry_batches.len() as u32;
    let mut scored: Vec<JudgedItem> = Vec::new();
    for (i, (batch, reply)) in plan.batches.iter().zip(first).enumerate() {
        let retry = if again.contains(&i) {
            second.next()
        } else {
            None
        };
        for item in judge::settle(batch, reply, retry) {
            if !item.unscored {
                cache.items.insert(item.content_hash.clone(), item.clone());
            }
            scored.push(item);
        }
    }
    if !scored.is_empty() {
        write_cache(ctx, &cache)?;
    }
    // the sample's own order, every drawn item once (identical items share one judged result)
    let mut items_out = Vec::with_capacity(sampled.len());
    for item in &sampled {
        let (id, hash) = (judge::item_id(item), judge::content_hash(pass.rubric, item));
        let found = plan
            .cached
            .iter()
            .chain(&scored)
            .find(|x| x.content_hash == hash)
            .cloned();
        if let Some(mut x) = found {
            x.item_id = id;
            items_out.push(x);
        }
    }
    record.unscored = items_out.iter().filter(|i| i.unscored).count() as u32;
    let worst = judge::worst_items(
        &items_out,
        score_field(ctx, j),
        ctx.spec.metric.primary.direction,
    );
    record.items = items_out;
    Ok(Judged::Scored { record, worst })
}

/// Judges one output in place: its sampled items' aggregate becomes `metrics[primary]`
/// (absent when every item went unscored, so the decide step reports the missing objective).
/// [`Judged::Scored`] with the record of both passes (an empty one when the primary is not a
/// judge metric); [`Judged::Undispatchable`] when a judge could not run.
///
/// # Errors
/// As [`judge_items`].
pub async fn judge_output(
    ctx: &Ctx<'_>,
    out: &mut SampleOutput,
    seed: u64,
    exclude: &BTreeSet<String>,
    tag: &str,
) -> Result<Judged, OptimizeError> {
    let Some(j) = judges(ctx) else {
        return Ok(Judged::Scored {
            record: JudgeRecord::default(),
            worst: Vec::new(),
        });
    };
    match judge_items(ctx, j, &out.items, seed, exclude, tag).await? {
        Judged::Undispatchable(reason) => Ok(Judged::Undispatchable(reason)),
        Judged::Scored { mut record, worst } => {
            if let Some(v) = judge::aggregate(&record.items, score_field(ctx, j)) {
                out.metrics.insert(ctx.spec.metric.primary.name.clone(), v);
            }
            // singleton evaluation (loop.md 3.3 step 5): its own judges, its own metrics
            if let (Some(rubric), true) = (
                j.singleton_rubric.as_deref(),
                j.singleton_sample > 0 && !out.singletons.is_empty(),
            ) {
                let summaries = summaries(out);
                let pass = Pass {
                    rubric,
                    sample_size: j.singleton_sample as usize,
                    stratify: None,
                    singleton_summaries: Some(&summaries),
                };
                match run_pass(
                    ctx,
                    j,
                    pass,
                    &out.singletons,
                    seed,
                    exclude,
                    &format!("{tag}:singletons"),
                )
                .await?
                {
                    Judged::Undispatchable(reason) => return Ok(Judged::Undispatchable(reason)),
                    Judged::Scored {
                        record: singles, ..
                    } => {
                        record.calls += singles.calls;
                        record.spend.merge(&singles.spend);
                        record.cached += singles.cached;
                        out.metrics.extend(judge::singleton_metrics(&singles.items));
                        record.singletons = singles.items;
                    }
                }
            }
            Ok(Judged::Scored { record, worst })
        }
    }
}

/// The judge passes of one measured pair (loop.md 3.3 steps 4–5): none when the primary is not a
/// judge metric, a side failed, or a candidate gate failed (O-30: degenerate, no judge call);
/// else the reference, then the candidate. A judge that cannot run turns the candidate into
/// `error` ([`UNDISPATCHABLE`], O-31).
///
/// # Errors
/// As [`judge_items`].
pub async fn judge_pair(
    ctx: &Ctx<'_>,
    reference: Sample,
    candidate: Sample,
    tag: &str,
    seed: u64,
    exclude: &BTreeSet<String>,
) -> Result<JudgedPair, OptimizeError> {
    let unjudged = |reference, candidate| JudgedPair {
        reference,
        candidate,
        record: None,
        worst: vec![],
        calls: 0,
        spend: AgentSpend::default(),
        blocker: None,
    };
    if judges(ctx).is_none() {
        return Ok(unjudged(reference, candidate));
    }
    let (mut r, mut c) = match (reference, candidate) {
        (Sample::Ok(r), Sample::Ok(c)) => (r, c),
        (reference, candidate) => return Ok(unjudged(reference, candidate)),
    };
    if crate::gates::evaluate(&ctx.spec.metric.degenerate_gates, &c.metrics)
        .values()
        .any(|ok| !ok)
    {
        return Ok(unjudged(Sample::Ok(r), Sample::Ok(c)));
    }
    let undispatchable =
        |r: SampleOutput, calls: u32, spend: AgentSpend, reason: String| JudgedPair {
            reference: Sample::Ok(r),
            candidate: Sample::Failed(crate::decide::Measured::Error(format!(
                "{UNDISPATCHABLE}: {reason}"
            ))),
            record: None,
            worst: vec![],
            calls,
            spend,
            blocker: Some(reason),
        };
    let ref_record = match judge_output(ctx, &mut r, seed, exclude, &format!("{tag}:ref")).await? {
        Judged::Scored { record, .. } => record,
        Judged::Undispatchable(reason) => {
            return Ok(undispatchable(r, 0, AgentSpend::default(), reason));
        }
    };
    let (record, worst) =
        match judge_output(ctx, &mut c, seed, exclude, &format!("{tag}:cand")).await? {
            Judged::Scored { record, worst } => (record, worst),
            Judged::Undispatchable(reason) => {
                return Ok(undispatchable(
                    r,
                    ref_record.calls,
                    ref_record.spend,
                    reason,
                ));
            }
        };
    let mut spend = ref_record.spend;
    spend.merge(&record.spend);
    Ok(JudgedPair {
        reference: Sample::Ok(r),
        candidate: Sample::Ok(c),
        calls: ref_record.calls + record.calls,
        spend,
        record: Some(record),
        worst,
        blocker: None,
    })
}
