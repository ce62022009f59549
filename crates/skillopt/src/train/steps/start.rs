//! `train start` (seed step 1) and `--start-next` (step 10): the session, its iterations and their
//! review items (S-98: no workspace repo, no review work).

use std::path::Path;

use skillforge_store::review::{NewEvalRun, NewReviewItem, RunSettings, create_run, get_run};
use skillforge_store::templates::{VersionRef, VersionSelector};
use skillforge_store::train::{
    NewIteration, NewSession, SessionRow, create_iteration, create_session, list_iterations,
};

use crate::promotion::resolve::{draw, version_for_job};
use crate::train::items::ItemSpec;
use crate::train::iteration::Iteration;
use crate::train::meta::SessionMeta;
use crate::train::session::*;
use crate::train::state::TrainState;
use crate::train::{TrainEnv, TrainError};

/// What `train start` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartRequest {
    /// Session id; generated when `None`.
    pub session_id: Option<String>,
    /// `ID`, `ID@vN` or `ID@latest`.
    pub template: String,
    /// Target repo.
    pub repo: String,
    /// Workspace repo; `None` leaves the session at `request_confirmed` (S-98).
    pub workspace_repo: Option<String>,
    /// The request text.
    pub request: String,
    /// Parsed items.
    pub items: Vec<ItemSpec>,
    /// Agent runtime for generation.
    pub runtime: String,
    /// Model for the runtime.
    pub model: Option<String>,
    /// Review mode (explore by default).
    pub mode: Option<String>,
    /// Options per item (mode default).
    pub options: Option<i64>,
    /// Task kind (`custom` by default).
    pub task_kind: String,
    /// `github`: publish review packets and candidate review context to the workspace
    /// repository's issues (the workspace must be `owner/repo`); `None` = local Markdown.
    pub forge: Option<String>,
}

/// The evaluator a session runs before each export (`train start --evaluator ID
/// [--judge-runtime NAME]`), recorded in the session metadata and in every iteration's review-run
/// metadata (`evaluator_id`, `judge_runtime`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EvaluatorChoice {
    /// Evaluator profile id, e.g. `release_notes_v1`.
    pub evaluator_id: String,
    /// Agent runtime of the judge; `None` ⇒ the judge stage is skipped with a reason.
    pub judge_runtime: Option<String>,
    /// Profile config merged into the run metadata (see
    /// [`crate::evaluator::effective_profile`]: `checks`, `check_config`, judge prompts); the
    /// keys train mode sets itself (`train_session`, `train_iteration`, `evaluator_id`,
    /// `judge_runtime`) are refused.
    pub config: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Run-metadata keys train mode writes itself.
pub(crate) const RESERVED_RUN_KEYS: &[&str] = &[
    "train_session",
    "train_iteration",
    "evaluator_id",
    "judge_runtime",
];

/// `train start` (seed step 1): resolves the template, records the session and its first
/// iteration at `request_confirmed`; with a workspace repo, moves on to `workspace_ready` and
/// `items_ready` (the items become the iteration's review items). Without one the session stays
/// at `request_confirmed` and cannot reach option generation (S-98).
///
/// # Errors
/// [`TrainError::Invalid`] for an unknown template, a bad mode/option count, a taken session id.
pub async fn start(env: &TrainEnv<'_>, req: &StartRequest) -> Result<StepReport, TrainError> {
    start_with_evaluator(env, req, None).await
}

/// [`start`] with an evaluator (S-101): every iteration's review run names it, and `continue`
/// evaluates the generated options with it before exporting the training package.
///
/// # Errors
/// As [`start`]; [`TrainError::Invalid`] for an empty evaluator id or an unknown judge runtime.
pub async fn start_with_evaluator(
    env: &TrainEnv<'_>,
    req: &StartRequest,
    evaluator: Option<&EvaluatorChoice>,
) -> Result<StepReport, TrainError> {
    check_start_request(req)?;
    let (evaluator_id, judge_runtime, evaluator_config) = check_evaluator(evaluator)?;
    let reference = VersionRef::parse(&req.template).ok_or_else(|| {
        TrainError::Invalid(format!(
            "--template `{}`: expected ID, ID@vN or ID@latest",
            req.template
        ))
    })?;
    // S-60: a bare `ID` starts on the canary for its sampled fraction (the one resolution rule).
    let Some(version) = version_for_job(env.store.pool(), &reference, draw())
        .await?
        .map(|r| r.version)
    else {
        return Err(TrainError::Invalid(
            unknown_template(env, &reference.template_id, &req.template).await?,
        ));
    };
    let settings = RunSettings::normalize(
        Some(req.mode.as_deref().unwrap_or(DEFAULT_MODE)),
        None,
        req.options,
    )
    .map_err(|e| TrainError::Invalid(e.to_string()))?;
    let session_id = req.session_id.clone().unwrap_or_else(new_session_id);
    if session_id.is_empty()
        || !session_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
    {
        return Err(TrainError::Invalid(format!(
            "session id {session_id:?} must be ASCII letters, digits, `_` or `-`"
        )));
    }
    let meta = SessionMeta {
        items: req.items.clone(),
        runtime: req.runtime.clone(),
        model: req.model.clone(),
        mode: settings.mode.clone(),
        exploration_level: settings.exploration_level.clone(),
        options_count: settings.options_count,
        evaluator_id,
        judge_runtime,
        evaluator_config,
        review_forge: req.forge.clone(),
    };
    // A local checkout is recorded as its absolute path (`.` means where `train start` ran).
    let workspace = match req.workspace_repo.as_deref().map(str::trim) {
        None | Some("") => String::new(),
        Some(w) if is_remote_repo(w) => w.to_owned(),
        Some(w) => {
            std::fs::canonicalize(w).map_or_else(|_| w.to_owned(), |p| p.display().to_string())
        }
    };
    // Without --repo: the repository the template was added from (`template add --repo`, else
    // `local`); a promoted candidate's own marker is no repository.
    let target_repo = match req.repo.trim() {
        "" if version.source_repo.is_empty()
            || version.source_repo == skillforge_store::candidates::CANDIDATE_SOURCE_REPO =>
        {
            "local".to_owned()
        }
        "" => version.source_repo.clone(),
        given => given.to_owned(),
    };
    let session = NewSession {
        id: &session_id,
        template_id: &version.template_id,
        template_version_id: &version.id,
        target_repo: &target_repo,
        workspace_repo: &workspace,
        request_summary: &req.request,
        task_kind: if req.task_kind.is_empty() {
            "custom"
        } else {
            &req.task_kind
        },
        metadata_json: &serde_json::to_string(&meta).unwrap_or_default(),
    };
    create_session_and_first_iteration(env, &session, &settings).await?;
    let (session, mut it) = load(env, &session_id).await?;
    let mut report = StepReport {
        session_id: session_id.clone(),
        iteration_id: it.id.clone(),
        ..Default::default()
    };
    report.steps.push(format!(
        "session {session_id} for {} on {target_repo} (request confirmed)",
        version.id
    ));
    if workspace.is_empty() {
        report.next_action = crate::train::session::WITHOUT_WORKSPACE.into();
    } else {
        prepare_items(env, &session, &mut it, &mut report).await?;
        report.next_action = format!("skillforge train continue --session {session_id}");
    }
    report.state = it.state;
    Ok(report)
}

/// Why `--template` names nothing: the template is not installed (the installed ones listed), or
/// no version of it matches (its versions listed).
async fn unknown_template(
    env: &TrainEnv<'_>,
    template_id: &str,
    given: &str,
) -> Result<String, TrainError> {
    let versions =
        skillforge_store::templates::list_versions(env.store.pool(), template_id).await?;
    if !versions.is_empty() {
        let ids: Vec<String> = versions
            .iter()
            .map(|v| format!("{} ({})", v.id, v.state))
            .collect();
        return Ok(format!(
            "--template `{given}`: no version of `{template_id}` matches; it has {}",
            ids.join(", ")
        ));
    }
    let installed: Vec<String> = skillforge_store::templates::list_templates(env.store.pool())
        .await?
        .into_iter()
        .map(|t| t.id)
        .collect();
    Ok(format!(
        "template `{template_id}` is not installed ({}); add it with `skillforge template add PATH`",
        if installed.is_empty() {
            "this home has none yet".to_owned()
        } else {
            format!("installed: {}", installed.join(", "))
        }
    ))
}

/// The evaluator choice checked: `(evaluator id, judge runtime, evaluator config)`, empty
/// strings and maps as `None`.
///
/// # Errors
/// [`TrainError::Invalid`] for an empty profile id, an unknown judge runtime, or a config key
/// train mode sets itself ([`RESERVED_RUN_KEYS`]).
fn check_evaluator(
    evaluator: Option<&EvaluatorChoice>,
) -> Result<
    (
        Option<String>,
        Option<String>,
        Option<serde_json::Map<String, serde_json::Value>>,
    ),
    TrainError,
> {
    let evaluator_id = evaluator.map(|e| e.evaluator_id.trim().to_owned());
    if evaluator_id.as_deref() == Some("") {
        return Err(TrainError::Invalid("--evaluator needs a profile id".into()));
    }
    let judge_runtime = evaluator
        .and_then(|e| e.judge_runtime.as_deref())
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(str::to_owned);
    if let Some(runtime) = &judge_runtime {
        skillforge_runner_agent::find(runtime)
            .map_err(|e| TrainError::Invalid(format!("--judge-runtime: {e}")))?;
    }
    let evaluator_config = evaluator
        .and_then(|e| e.config.clone())
        .filter(|c| !c.is_empty());
    if let Some(key) = evaluator_config
        .as_ref()
        .and_then(|c| c.keys().find(|k| RESERVED_RUN_KEYS.contains(&k.as_str())))
    {
        return Err(TrainError::Invalid(format!(
            "evaluator config: `{key}` is set by train mode; use --evaluator / --judge-runtime"
        )));
    }
    Ok((evaluator_id, judge_runtime, evaluator_config))
}

/// Writes the session row and its first iteration in one transaction.
///
/// # Errors
/// [`TrainError::Invalid`] when the session id exists; store errors.
async fn create_session_and_first_iteration(
    env: &TrainEnv<'_>,
    session: &NewSession<'_>,
    settings: &RunSettings,
) -> Result<(), TrainError> {
    let it_id = iteration_id(session.id, 1);
    let mut tx = env.store.begin().await?;
    if !create_session(&mut tx, session).await? {
        return Err(TrainError::Invalid(format!(
            "train session `{0}` already exists: see it with `skillforge train status --session {0}`, go on with \
             `skillforge train continue --session {0}`, or start another with a new --session id",
            session.id
        )));
    }
    create_iteration(
        &mut tx,
        &NewIteration {
            id: &it_id,
            session_id: session.id,
            eval_run_id: &it_id,
            base_template_version_id: session.template_version_id,
            mode: &settings.mode,
            exploration_level: &settings.exploration_level,
            metadata_json: "{}",
        },
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Whether `workspace` is a remote `owner/repo` (facts §3: sessions record `workspace_repo`, a
/// GitHub repository in the Go implementation): exactly one `/` between two non-empty names of
/// ASCII letters, digits, `.`, `_`, `-`, neither starting with `.`. Anything else is a local path.
pub(crate) fn is_remote_repo(workspace: &str) -> bool {
    let mut parts = workspace.split('/');
    let (Some(owner), Some(name), None) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    [owner, name].iter().all(|part| {
        !part.is_empty()
            && !part.starts_with('.')
            && part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    })
}

/// Checks a start request before anything is written: a non-empty `--request`, a known
/// `--runtime` (empty = [`DEFAULT_RUNTIME`]), and a `--workspace-repo` that is a remote
/// `owner/repo` or an existing local directory.
///
/// # Errors
/// [`TrainError::Invalid`] naming the flag and its value.
pub(crate) fn check_start_request(req: &StartRequest) -> Result<(), TrainError> {
    if req.request.trim().is_empty() {
        return Err(TrainError::Invalid(
            "--request must not be empty: say what the template should learn".into(),
        ));
    }
    let runtime = if req.runtime.trim().is_empty() {
        DEFAULT_RUNTIME
    } else {
        req.runtime.trim()
    };
    skillforge_runner_agent::find(runtime)
        .map_err(|e| TrainError::Invalid(format!("--runtime `{runtime}`: {e}")))?;
    match req.forge.as_deref() {
        None => {}
        Some("github") => {
            let workspace = req.workspace_repo.as_deref().map(str::trim).unwrap_or("");
            if !is_remote_repo(workspace) {
                return Err(TrainError::Invalid(format!(
                    "--forge github publishes review issues to the workspace repository: give --workspace-repo owner/repo (got `{workspace}`)"
                )));
            }
        }
        Some(other) => {
            return Err(TrainError::Invalid(format!(
                "--forge `{other}` is unknown; use github (or leave it out for local packets)"
            )));
        }
    }
    if let Some(workspace) = req
        .workspace_repo
        .as_deref()
        .map(str::trim)
        .filter(|w| !w.is_empty())
        && !is_remote_repo(workspace)
        && !Path::new(workspace).is_dir()
    {
        return Err(TrainError::Invalid(format!(
            "--workspace-repo `{workspace}`: no such directory; give an existing local checkout or a remote owner/repo"
        )));
    }
    Ok(())
}

/// request_confirmed → workspace_ready → items_ready: the iteration's review run and items.
pub(crate) async fn prepare_items(
    env: &TrainEnv<'_>,
    session: &SessionRow,
    it: &mut Iteration,
    report: &mut StepReport,
) -> Result<(), TrainError> {
    if session.workspace_repo.trim().is_empty() {
        return Err(TrainError::Refused(format!(
            "train session `{}` has no workspace repo, so it cannot generate options for review; {}",
            session.id,
            crate::train::session::WITHOUT_WORKSPACE
        )));
    }
    if it.state == TrainState::RequestConfirmed {
        std::fs::create_dir_all(env.iteration_dir(&session.id, &it.id))
            .map_err(|e| TrainError::Env(format!("create the iteration directory: {e}")))?;
        advance(env, it, TrainState::WorkspaceReady).await?;
        report
            .steps
            .push(format!("workspace {} ready", session.workspace_repo));
    }
    if it.state == TrainState::WorkspaceReady {
        let smeta = SessionMeta::parse(&session.metadata_json);
        let settings = RunSettings::normalize(
            Some(&it.mode),
            Some(&it.exploration_level),
            Some(smeta.options_count.max(2)),
        )
        .map_err(|e| TrainError::Invalid(e.to_string()))?;
        let mut run_metadata =
            serde_json::json!({"train_session": session.id, "train_iteration": it.id});
        for (key, value) in smeta.evaluator_config.iter().flatten() {
            run_metadata[key.as_str()] = value.clone();
        }
        if let Some(evaluator_id) = &smeta.evaluator_id {
            run_metadata["evaluator_id"] = serde_json::json!(evaluator_id);
        }
        if let Some(runtime) = &smeta.judge_runtime {
            run_metadata["judge_runtime"] = serde_json::json!(runtime);
        }
        let mut tx = env.store.begin().await?;
        if get_run(env.store.pool(), &it.eval_run_id).await?.is_none() {
            create_run(
                &mut tx,
                &NewEvalRun {
                    id: it.eval_run_id.clone(),
                    template_id: session.template_id.clone(),
                    template_version_id: it.base_template_version_id.clone(),
                    target_repo: session.target_repo.clone(),
                    settings,
                    metadata_json: run_metadata.to_string(),
                },
            )
            .await?;
        }
        for item in &smeta.items {
            let metadata =
                serde_json::json!({"request": session.request_summary, "input": item.input});
            skillforge_store::review::add_item(
                &mut tx,
                &it.eval_run_id,
                &NewReviewItem {
                    item_id: item.id.clone(),
                    title: item.title.clone(),
                    metadata_json: metadata.to_string(),
                    ..Default::default()
                },
            )
            .await?;
        }
        tx.commit().await?;
        advance(env, it, TrainState::ItemsReady).await?;
        report.steps.push(format!(
            "{} review items ready in run {}",
            smeta.items.len(),
            it.eval_run_id
        ));
    }
    Ok(())
}

/// `--start-next` (seed step 10): a new iteration on the template's current version (or its
/// canary for the sampled fraction, S-60).
pub(crate) async fn start_next(
    env: &TrainEnv<'_>,
    session: &SessionRow,
    prev: &Iteration,
    report: &mut StepReport,
) -> Result<(SessionRow, Iteration), TrainError> {
    let iterations = list_iterations(env.store.pool(), &session.id).await?;
    let reference = VersionRef {
        template_id: session.template_id.clone(),
        selector: VersionSelector::Current,
    };
    let base = version_for_job(env.store.pool(), &reference, draw())
        .await?
        .map_or_else(|| prev.base_template_version_id.clone(), |r| r.version.id);
    let id = iteration_id(&session.id, iterations.len() + 1);
    let mut conn = env.store.pool().acquire().await?;
    create_iteration(
        &mut conn,
        &NewIteration {
            id: &id,
            session_id: &session.id,
            eval_run_id: &id,
            base_template_version_id: &base,
            mode: &prev.mode,
            exploration_level: &prev.exploration_level,
            metadata_json: "{}",
        },
    )
    .await?;
    skillforge_store::train::set_session_state(
        &mut conn,
        &session.id,
        TrainState::RequestConfirmed.as_str(),
    )
    .await?;
    drop(conn);
    report.steps.push(format!(
        "iteration {id} started on {base} (previous iteration {}: {})",
        prev.id,
        crate::train::phase::describe(prev.state.as_str())
    ));
    load(env, &session.id).await
}
