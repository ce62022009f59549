//! The agent span (issue 36 item 3): one `invoke_agent <runtime>` span per agent run, a child of
//! the worker's runner step, with the OpenTelemetry GenAI semantic conventions' attributes.
//!
//! It uses the OpenTelemetry API only: without a tracer provider installed by the binary (the
//! default) the span is a no-op and nothing is recorded. A figure the run did not report is
//! left out (an absent attribute, never 0).

use opentelemetry::trace::{Span as _, SpanKind, Status, Tracer as _};
use opentelemetry::{Context, KeyValue, global};
use skillforge_runner::{ExitClass, RunOutcome};

use crate::payload::AgentPayload;
use crate::report::AgentReport;

/// The GenAI `gen_ai.system` of a run: `anthropic` for Claude Code, `openai` for Codex, the
/// provider prefix of an OpenCode model (`anthropic/claude-…` → `anthropic`), the runtime's
/// family for the scripted agents; `None` when unknown (an OpenCode run without a model).
fn gen_ai_system(family: &str, model: Option<&str>) -> Option<String> {
    match family {
        "claude" => Some("anthropic".to_owned()),
        "codex" => Some("openai".to_owned()),
        "opencode" => model
            .and_then(|m| m.split_once('/'))
            .map(|(provider, _)| provider.to_owned()),
        other => Some(other.to_owned()),
    }
}

/// Starts the span of one agent run of `payload` in the current context (the worker's runner
/// step when it runs under one).
pub(crate) fn start(payload: &AgentPayload) -> global::BoxedSpan {
    let tracer = global::tracer("skillforge");
    let mut attributes = vec![
        KeyValue::new("gen_ai.operation.name", "invoke_agent"),
        KeyValue::new("gen_ai.agent.name", payload.runtime.clone()),
    ];
    if let Some(model) = payload
        .model
        .as_ref()
        .filter(|m| *m != crate::profile::CONFIGURED_MODEL)
    {
        attributes.push(KeyValue::new("gen_ai.request.model", model.clone()));
    }
    tracer
        .span_builder(format!("invoke_agent {}", payload.runtime))
        .with_kind(SpanKind::Client)
        .with_attributes(attributes)
        .start_with_context(&tracer, &Context::current())
}

/// Ends `span` with what the run reported (its [`AgentReport`] in `RunOutcome::detail`): the
/// system, the model the transcript names (`gen_ai.response.model`), input and output tokens
/// (`gen_ai.usage.*`), the cost in US dollars (`skillforge.agent.cost_usd`) and the exit.
pub(crate) fn end(
    mut span: global::BoxedSpan,
    payload: &AgentPayload,
    result: &Result<RunOutcome, skillforge_runner::RunnerError>,
) {
    let outcome = match result {
        Ok(outcome) => outcome,
        Err(e) => {
            span.set_status(Status::error(e.to_string()));
            span.end();
            return;
        }
    };
    let report: Option<AgentReport> = serde_json::from_value(outcome.detail.clone()).ok();
    let model = report
        .as_ref()
        .and_then(|r| r.model.clone())
        .or_else(|| payload.model.clone())
        .filter(|m| m != crate::profile::CONFIGURED_MODEL);
    if let Some(report) = &report {
        if let Some(system) = gen_ai_system(&report.family, model.as_deref()) {
            span.set_attribute(KeyValue::new("gen_ai.system", system.clone()));
            span.set_attribute(KeyValue::new("gen_ai.provider.name", system));
        }
        if let Some(model) = &report.model {
            span.set_attribute(KeyValue::new("gen_ai.response.model", model.clone()));
        }
        if let Some(usage) = &report.usage {
            let tokens = [
                ("gen_ai.usage.input_tokens", usage.input_tokens),
                ("gen_ai.usage.output_tokens", usage.output_tokens),
            ];
            for (name, n) in tokens {
                if let Some(n) = n {
                    span.set_attribute(KeyValue::new(name, n as i64));
                }
            }
            if let Some(cost) = usage.cost_usd {
                span.set_attribute(KeyValue::new("skillforge.agent.cost_usd", cost));
            }
        }
    }
    span.set_attribute(KeyValue::new("skillforge.exit", outcome.exit.label()));
    if !matches!(outcome.exit, ExitClass::Passed) {
        span.set_status(Status::error(outcome.exit.label()));
    }
    span.end();
}

#[cfg(test)]
mod tests {
    use super::gen_ai_system;

    #[test]
    fn the_system_follows_the_runtime_and_unknown_is_none() {
        let check = |family: &str, model: Option<&str>, expected: Option<&str>| {
            assert_eq!(
                gen_ai_system(family, model).as_deref(),
                expected,
                "{family} {model:?}"
            );
        };
        check("claude", None, Some("anthropic"));
        check("codex", Some("gpt-5"), Some("openai"));
        check(
            "opencode",
            Some("anthropic/claude-sonnet-4"),
            Some("anthropic"),
        );
        check("opencode", None, None);
        check("opencode", Some("local"), None);
        check("scripted", None, Some("scripted"));
    }
}
