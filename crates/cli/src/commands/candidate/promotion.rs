//! `candidate list --pending`, `candidate canary`, `candidate canary-check` and `candidate decide`
//! (seed: SkillOpt, "Promotion policy + notifications"; S-51..S-63, resolutions 7): the commands;
//! the decisions and the notify seam are in [`crate::control::promotion`].

use anyhow::anyhow;
use serde_json::json;
use skillforge_skillopt::promotion::events::{Detail, Event, EventKind, HAND_STARTED_REASON};
use skillforge_store::candidates::{get_candidate, list_candidates};
use skillforge_store::promotion::{CanaryStart, start_canary};
use skillforge_store::templates::{begin_write, list_templates};

use skillforge_stage::Wait;

use crate::context::Context;
use crate::control::promotion::{after_import, check_canaries, emit};
use crate::exit::{CliError, CliResult, OK};
use crate::output::print_json;

/// `candidate decide V`: the seam of [`after_import`] again, for a candidate still pending.
pub async fn decide_cmd(ctx: &Context, version_id: &str) -> CliResult {
    let store = ctx.store().await?;
    let candidate = get_candidate(store.pool(), version_id)
        .await?
        .ok_or_else(|| CliError::usage(anyhow!("`{version_id}` is not an imported candidate")))?;
    if candidate.version_state != "pending" {
        return Err(CliError::usage(anyhow!(
            "`{version_id}` is {}, not pending",
            candidate.version_state
        )));
    }
    let report = after_import(ctx, &store, version_id).await?;
    if ctx.json {
        print_json(&report);
    } else {
        println!(
            "{version_id}: {}",
            report["reason"].as_str().unwrap_or_default()
        );
        if report["decision"]["decision"] == "notify" && !report["blocked"].is_string() {
            let again = if report["manual"] == true {
                ""
            } else {
                ", or decide again once more evidence is in"
            };
            println!(
                "{version_id} stays pending: promote it with `skillforge candidate promote {version_id}`, reject it with \
                 `skillforge candidate reject {version_id} --reason WHY`{again}"
            );
        }
    }
    // Issue 37 item 4: a pass that changed nothing (another canary runs, the base is stale) is
    // said and is not success; a candidate left for a person is not decided yet (exit 4, the
    // line above says what to run).
    Ok(if report["blocked"].is_string() {
        crate::exit::CHECK_FAILED
    } else if report["decision"]["decision"] == "notify" {
        crate::exit::WAITING
    } else {
        OK
    })
}

/// `candidate list --pending`: every pending (or canary) candidate across templates (S-52:
/// visible with or without `[events]`).
pub async fn list_pending(ctx: &Context) -> CliResult {
    let store = ctx.store().await?;
    let mut rows = Vec::new();
    for template in list_templates(store.pool()).await? {
        for c in list_candidates(store.pool(), &template.id).await? {
            if c.version_state == "pending" || c.version_state == "canary" {
                rows.push(c);
            }
        }
    }
    if ctx.json {
        print_json(&rows.iter().map(|c| json!({
            "version_id": c.version_id, "template_id": c.template_id, "state": c.version_state,
            "score": c.score, "created_at": c.created_at,
        })).collect::<Vec<_>>());
        return Ok(OK);
    }
    if rows.is_empty() {
        eprintln!("no pending candidates");
    }
    for c in &rows {
        let score = c
            .score
            .map_or_else(|| "-".to_owned(), |s| format!("{s:.3}"));
        println!(
            "{:<24} {:<8} score {:<6} {}",
            c.version_id, c.version_state, score, c.created_at
        );
    }
    Ok(OK)
}

/// `candidate canary V --sample F` (resolutions 7): a pending candidate goes behind the champion.
pub async fn canary(ctx: &Context, version_id: &str, sample: f64) -> CliResult {
    if !(sample.is_finite() && sample > 0.0 && sample <= 1.0) {
        return Err(CliError::usage(anyhow!(
            "--sample must be a fraction in (0,1], got {sample}"
        )));
    }
    let store = ctx.store().await?;
    let candidate = get_candidate(store.pool(), version_id)
        .await?
        .ok_or_else(|| CliError::usage(anyhow!("`{version_id}` is not an imported candidate")))?;
    let mut tx = begin_write(&store).await?;
    let started = start_canary(&mut tx, version_id, sample).await?;
    match &started {
        CanaryStart::Started | CanaryStart::AlreadyCanary => tx.commit().await?,
        CanaryStart::WrongState(state) => {
            return Err(CliError::usage(anyhow!(
                "`{version_id}` is {state}, not pending"
            )));
        }
        CanaryStart::OtherCanary(other) => {
            return Err(CliError::usage(anyhow!(
                "template `{}` already has canary `{other}`",
                candidate.template_id
            )));
        }
        CanaryStart::StaleBase { base, champion } => {
            return Err(CliError::usage(anyhow!(
                "rebase needed: `{version_id}` was built on {base}, but {champion} is the champion now; train a candidate on {champion}"
            )));
        }
        CanaryStart::NotFound => return Err(CliError::usage(anyhow!("no version `{version_id}`"))),
    }
    if started == CanaryStart::Started {
        let detail = Detail {
            canary_sample: Some(sample),
            score: candidate.score,
            ..Detail::default()
        }
        .with_reason(HAND_STARTED_REASON);
        emit(
            ctx,
            &store,
            &Event::new(
                EventKind::CanaryStarted,
                version_id,
                &candidate.template_id,
                detail,
            ),
        )
        .await?;
    }
    if ctx.json {
        print_json(
            &json!({"version_id": version_id, "state": "canary", "canary_sample": sample, "started": started == CanaryStart::Started}),
        );
    } else {
        println!(
            "{version_id} is the canary of `{}` at sample {sample}",
            candidate.template_id
        );
    }
    Ok(OK)
}

/// `candidate canary-check [--no-wait]`: decides every canary's regression window (S-61, S-62)
/// and waits for the graduate / roll-back jobs it submits ([`Wait::Block`]) or returns once they
/// are submitted ([`Wait::Return`]); idempotent.
pub async fn canary_check(ctx: &Context, wait: Wait) -> CliResult {
    let store = ctx.store().await?;
    let report = check_canaries(ctx, &store, wait).await?;
    if ctx.json {
        print_json(&report);
    } else if report.is_empty() {
        eprintln!("no canaries");
    } else {
        for entry in &report {
            println!(
                "{:<24} {}{}",
                entry["version_id"].as_str().unwrap_or_default(),
                window_text(&entry["window"]),
                if entry["applied"] == true {
                    " (applied)"
                } else {
                    ""
                }
            );
            if let Some(pace) = entry["pace"]["reason"].as_str() {
                println!("{:<24} {pace}", "");
            }
        }
    }
    // A window that holds (or a decision submitted and not yet applied) is not decided yet.
    let open = report.iter().filter(|e| e["applied"] != true).count();
    if open == 0 {
        return Ok(OK);
    }
    if !ctx.json {
        println!(
            "{open} canary window(s) not decided yet: run `skillforge candidate canary-check` again later \
             (a running `skillforge serve` checks them every minute)"
        );
    }
    Ok(crate::exit::WAITING)
}

/// A canary window's decision for a person (`graduate`, `roll back`, `hold: <why>`,
/// `inconclusive: <why>`), from its JSON form (`{"decision": "hold", "reason": …}`).
fn window_text(window: &serde_json::Value) -> String {
    let decision = window
        .get("decision")
        .and_then(serde_json::Value::as_str)
        .map(|d| d.replace('_', " "));
    match (
        decision,
        window.get("reason").and_then(serde_json::Value::as_str),
    ) {
        (Some(d), Some(reason)) => format!("{d}: {reason}"),
        (Some(d), None) => d,
        (None, _) => window.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_decision_reads_as_words() {
        let text = |d: skillforge_skillopt::promotion::canary::WindowDecision| {
            window_text(&serde_json::to_value(d).unwrap())
        };
        use skillforge_skillopt::promotion::canary::WindowDecision as W;
        assert_eq!(text(W::RollBack), "roll back");
        assert_eq!(text(W::Graduate), "graduate");
        assert_eq!(
            text(W::Hold {
                reason: "3 of 20 canary outcomes".into()
            }),
            "hold: 3 of 20 canary outcomes"
        );
        assert_eq!(
            text(W::Inconclusive {
                reason: "window spent".into()
            }),
            "inconclusive: window spent"
        );
    }
}
