//! `skillforge ask AGENT "PROMPT"`: the foreground ask (issue 15 item 1; seed: SkillOpt,
//! "Live-traffic A/B interception (off by default, #482)", "auto_promote_canary (#484)"; S-60,
//! S-69..S-74).
//!
//! The version is resolved once: the current version, or the template's canary for its sampled
//! fraction (`promotion::resolve::version_for_job`, the one resolution rule). The answer is one durable `agent` job. With
//! `[skillopt] live_ab_sample_rate` > 0 (default 0: nothing below runs, the ask is byte-identical)
//! an ask served by the champion whose arm has at least `bandit_min_samples` pulls is sampled for
//! a live A/B: the single pending challenger answers right after, in the same process and the
//! same serialized path, and a pick (`--pick`, or asked for on a terminal) is recorded like a
//! manual one. Any failure falls
//! back to the champion answer alone, with a `live_ab_skipped` event. Live A/B never promotes.

use anyhow::anyhow;
use clap::Args;
use rand::Rng;
use serde_json::{Value, json};
use skillforge_engine::WorkerIdentity;
use skillforge_skillopt::ab::ask::ask_prompt;
use skillforge_skillopt::ab::bandit::DEFAULT_MIN_SAMPLES;
use skillforge_skillopt::ab::live::{Interception, decide};
use skillforge_skillopt::ab::pick::{Label, Role, Shuffle};
use skillforge_skillopt::ab::record::{AbRecord, record};
use skillforge_skillopt::ab::session::{SessionError, SessionLock, session_lock_name};
use skillforge_skillopt::promotion::events::{Detail, Event, EventKind};
use skillforge_skillopt::promotion::resolve::{draw, version_for_job};
use skillforge_store::Store;
use skillforge_store::bandit::get_arm;
use skillforge_store::blobs::BlobStore;
use skillforge_store::live_ab::{PendingPick, insert_pending};
use skillforge_store::promotion::pending_versions;
use skillforge_store::templates::{
    VersionRef, VersionRow, VersionSelector, get_template, get_version,
};

use crate::context::Context;
use crate::control::agent::{AgentAnswer, AgentCall, call_agent};
use crate::control::pick_prompt;
use crate::control::promotion::emit_job_event;
use crate::exit::{CliError, CliResult, OK};
use crate::output::print_json;

/// How long an ask that may be intercepted waits for its agent's session while another ask holds it.
const SESSION_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

/// Arguments of `skillforge ask`.
#[derive(Debug, Args)]
pub struct AskArgs {
    /// The agent: an installed template id.
    pub agent: String,
    /// The prompt.
    pub prompt: String,
    /// Agent runtime that answers.
    #[arg(long, default_value = "scripted")]
    pub runtime: String,
    /// Model the runtime runs: a name, or a tier of the runtime's `[models]` table (`cheap`,
    /// `standard`, `strong`). Default: the runtime's own.
    #[arg(long)]
    pub model: Option<String>,
    /// The pick when this ask is intercepted for a live A/B (`a` or `b`); without it the pick is
    /// asked for when stdin is a terminal, and otherwise (or when skipped) an intercepted ask
    /// records no pick (`live_ab_skipped`, the pick owed to `skillforge live-ab pick`).
    #[arg(long)]
    pub pick: Option<String>,
}

/// Resolves the version an ask of `template` runs through the one resolution rule
/// ([`version_for_job`], S-60): the canary for its sampled fraction of draws, else the current
/// version. Returns the version and whether it is the canary.
async fn resolve_version(store: &Store, template: &str) -> Result<(VersionRow, bool), CliError> {
    let reference = VersionRef {
        template_id: template.to_owned(),
        selector: VersionSelector::Current,
    };
    let resolved = version_for_job(store.pool(), &reference, draw())
        .await?
        .ok_or_else(|| CliError::usage(anyhow!("template `{template}` has no current version")))?;
    Ok((resolved.version, resolved.canary))
}

/// Whether the ask's agent job carries its template version into its commits (the
/// `Skillforge-Template` trailer, issue 37 item 8): only while harvesting is on (`[skillopt]
/// auto_trace_enabled`), so with it off the ask's job is byte-identical to before.
fn trailer_on(ctx: &Context) -> bool {
    ctx.config
        .skillopt
        .harvest_config(&ctx.home)
        .is_ok_and(|c| c.is_enabled())
}

/// The model `--model` asks for: a tier of the runtime's `[models]` table becomes its model
/// name, any other value is a name; `None` without the flag.
fn requested_model(args: &AskArgs) -> Option<String> {
    let model = args.model.as_deref()?;
    let tier = skillforge_runner_agent::find(&args.runtime)
        .ok()
        .and_then(|profile| profile.model_for_tier(model).ok().map(str::to_owned));
    Some(tier.unwrap_or_else(|| model.to_owned()))
}

/// Runs `skillforge ask`.
pub async fn run(ctx: &Context, args: AskArgs) -> CliResult {
    skillforge_runner_agent::find(&args.runtime)
        .map_err(|e| CliError::usage(anyhow!("--runtime: {e}")))?;
    crate::control::model_api::before_agent_jobs(ctx, &[args.runtime.as_str()], "ask").await?;
    let model = requested_model(&args);
    let store = ctx.store().await?;
    if get_template(store.pool(), &args.agent).await?.is_none() {
        return Err(CliError::usage(anyhow!(
            "agent template `{}` is not installed",
            args.agent
        )));
    }
    let (version, is_canary) = resolve_version(&store, &args.agent).await?;
    let backend = ctx.queue().await?;
    let nonce = uuid::Uuid::now_v7().simple().to_string();
    let rate = ctx.config.skillopt.live_ab_sample_rate.unwrap_or(0.0);
    // S-72: an ask that may be intercepted holds its runtime session once, for the champion and
    // the challenger; with the rate at 0 (S-70) the ask path takes nothing.
    let session = if rate > 0.0 && !is_canary {
        let name = session_lock_name(&args.agent, &args.runtime);
        let owner = WorkerIdentity::new("ask");
        let on_busy = |holder: &str| {
            eprintln!(
                "waiting for session `{name}` (held by {holder}; up to {} s)",
                SESSION_WAIT.as_secs()
            )
        };
        Some(
            SessionLock::acquire(backend.clone(), &owner, &name, SESSION_WAIT, on_busy)
                .await
                .map_err(|e| match e {
                    SessionError::Queue(q) => CliError::env(anyhow!(q)),
                    busy => CliError::env(anyhow!(busy)),
                })?,
        )
    } else {
        None
    };
    let trailer = trailer_on(ctx);
    let answer = call_agent(
        ctx,
        &backend,
        AgentCall {
            stages: &skillforge_stage::family::ASK_SOURCE,
            stage: "answer",
            runtime: &args.runtime,
            prompt: ask_prompt(&version.content, &args.prompt),
            key: format!("ask:{}:{nonce}", version.id),
            template_version: trailer.then(|| version.id.clone()),
            model: model.clone(),
        },
    )
    .await?;
    // S-70: with the rate at 0 nothing below runs: no draw, no read, no row.
    let mut live = match &session {
        Some(held) => live_ab(ctx, &store, &args, &version, &answer, rate, &nonce, held).await?,
        None => None,
    };
    if let (Some(live), Some(held)) = (&mut live, &session) {
        live["session"] = json!({"lock": held.name(), "fencing_token": held.fencing_token()});
    }
    if let Some(held) = session {
        if let Err(e) = held.release().await {
            tracing::warn!(error = %e, "the ask's session lock was not released; it goes stale");
        }
    }
    if ctx.json {
        let mut out =
            json!({"version": version.id, "job_id": answer.job_id, "answer": answer.message});
        if let Some(live) = live {
            out["live_ab"] = live;
        }
        print_json(&out);
    } else {
        println!("{}", answer.message);
        eprintln!("answered by {} (job {})", version.id, answer.job_id);
        if let Some(live) = live {
            eprintln!("live A/B: {}", live_ab_text(&live));
        }
    }
    Ok(OK)
}

/// The live A/B of one ask (S-71..S-74); `None` when not intercepted. Never fails the ask. The
/// challenger runs under `held`, the session the ask already holds (S-72: never a second lock).
#[expect(
    clippy::too_many_arguments,
    reason = "the ask's resolved champion, its answer and its held session, read once"
)]
async fn live_ab(
    ctx: &Context,
    store: &Store,
    args: &AskArgs,
    champion: &VersionRow,
    champion_answer: &AgentAnswer,
    rate: f64,
    nonce: &str,
    held: &SessionLock,
) -> Result<Option<serde_json::Value>, CliError> {
    let pulls = get_arm(store.pool(), &args.agent, &champion.id)
        .await?
        .map_or(0, |a| u64::try_from(a.pulls).unwrap_or(0));
    let min = ctx
        .config
        .skillopt
        .bandit_min_samples
        .unwrap_or(DEFAULT_MIN_SAMPLES);
    if decide(rate, pulls, min, rand::rng().random()) != Interception::Intercept {
        return Ok(None);
    }
    let skip = |reason: String| async move {
        let event = Event::new(
            EventKind::LiveAbSkipped,
            &champion_answer.job_id,
            &args.agent,
            Detail::default().with_reason(&reason),
        );
        emit_job_event(ctx, store, &event).await?;
        Ok::<_, CliError>(Some(json!({"intercepted": true, "skipped": reason})))
    };
    let pending = pending_versions(store.pool(), &args.agent).await?;
    let [challenger_id] = pending.as_slice() else {
        return skip(format!(
            "{} pending challengers (need exactly one)",
            pending.len()
        ))
        .await;
    };
    let Some(challenger) = get_version(store.pool(), challenger_id).await? else {
        return skip("challenger vanished".to_owned()).await;
    };
    let backend = ctx.queue().await?;
    let call = AgentCall {
        stages: &skillforge_stage::family::ASK_SOURCE,
        stage: "live_ab_challenger",
        runtime: &args.runtime,
        prompt: ask_prompt(&challenger.content, &args.prompt),
        key: format!("ask:{}:{nonce}:challenger", challenger.id),
        template_version: trailer_on(ctx).then(|| challenger.id.clone()),
        model: requested_model(args),
    };
    // Under the session the ask holds: the challenger's call takes no lock of its own (S-72).
    tracing::debug!(
        session = held.name(),
        token = held.fencing_token(),
        "live A/B challenger under the ask's session"
    );
    let challenger_answer = match call_agent(ctx, &backend, call).await {
        Ok(a) => a,
        Err(e) => return skip(format!("challenger answer failed: {:#}", e.error)).await,
    };
    let shuffle = Shuffle::from_seed(rand::rng().random());
    let shown = |label: Label| {
        if shuffle.role_of(label) == Role::Challenger {
            challenger_answer.message.as_str()
        } else {
            champion_answer.message.as_str()
        }
    };
    eprintln!(
        "live A/B — Option A:\n{}\n\nOption B:\n{}\n",
        shown(Label::A),
        shown(Label::B)
    );
    let mut ab = AbRecord {
        pick_id: format!("pick-{}", champion_answer.job_id),
        template_id: args.agent.clone(),
        champion: champion.id.clone(),
        challenger: challenger.id.clone(),
        prompt: args.prompt.clone(),
        champion_answer: champion_answer.message.clone(),
        challenger_answer: challenger_answer.message,
        shuffle,
        human: None,
        judge: None,
        origin: "live",
        jurors: vec![],
    };
    // Without --pick, a human at a terminal is asked (S-65); a skip, or stdin not a terminal,
    // leaves the pick owed (S-73).
    let label = match args.pick.as_deref() {
        Some(p) => Label::parse(p),
        None if pick_prompt::stdin_is_terminal() => pick_prompt::ask_on_terminal()?,
        None => None,
    };
    let Some(label) = label else {
        // S-73: no pick now ⇒ the champion answer alone and `live_ab_skipped`; what was shown is
        // kept so the human's pick can still be recorded later (`skillforge live-ab pick`).
        let mut conn = store.pool().acquire().await?;
        insert_pending(&mut conn, &owed_pick(&ab)).await?;
        drop(conn);
        let mut out = skip("no pick captured".to_owned())
            .await?
            .unwrap_or_default();
        out["pending_pick"] = json!(ab.pick_id);
        eprintln!(
            "record the pick later with `skillforge live-ab pick {} a|b`",
            ab.pick_id
        );
        return Ok(Some(out));
    };
    ab.human = Some(shuffle.role_of(label));
    match record(store, &BlobStore::in_home(&ctx.home), &ab).await {
        Ok(r) => Ok(Some(
            json!({"intercepted": true, "pick_id": ab.pick_id, "winner": ab.human, "arms_moved": r.arms_moved}),
        )),
        Err(e) => skip(format!("pick not recorded: {e}")).await,
    }
}

/// What an intercepted ask showed, kept until its pick is recorded (`skillforge live-ab pick`).
fn owed_pick(ab: &AbRecord) -> PendingPick {
    PendingPick {
        pick_id: ab.pick_id.clone(),
        template_id: ab.template_id.clone(),
        champion_version_id: ab.champion.clone(),
        challenger_version_id: ab.challenger.clone(),
        prompt: ab.prompt.clone(),
        champion_answer: ab.champion_answer.clone(),
        challenger_answer: ab.challenger_answer.clone(),
        challenger_label: ab.shuffle.label_of(Role::Challenger).as_str().to_owned(),
        created_at: String::new(),
    }
}

/// The live A/B an `ask` joined, for a person: skipped and why, or the pick to record.
fn live_ab_text(live: &Value) -> String {
    if let Some(why) = live.get("skipped").and_then(Value::as_str) {
        return format!("skipped ({why})");
    }
    let mut text = match live.get("pick_id").and_then(Value::as_str) {
        Some(pick) => format!("shown both answers; pick `{pick}`"),
        None => "shown both answers".to_owned(),
    };
    match live.get("winner").and_then(Value::as_str) {
        Some(winner) => text.push_str(&format!(", picked {winner}")),
        None => text.push_str(", no pick yet"),
    }
    if let Some(moved) = live.get("arms_moved").and_then(Value::as_bool) {
        text.push_str(if moved {
            " (the bandit's arms moved)"
        } else {
            ""
        });
    }
    text
}
