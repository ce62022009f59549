//! OpenTelemetry spans of a job's life (issue 36 item 3): one trace per job from its enqueue to
//! its applied result, carried between processes by the job's W3C `traceparent`.
//!
//! The engine uses the OpenTelemetry API only. Until the binary installs a tracer provider
//! (`[telemetry] otlp_endpoint`, docs/reference/config.md) every span here is a no-op whose
//! context is invalid: no `traceparent` is written on a job, so a job record is byte-identical
//! to one of a build without telemetry, and nothing is sent.
//!
//! The spans, all named `skillforge.*` and carrying the job's id, workflow and stage:
//! * `skillforge.enqueue` (producer, the control plane): the trace's root, ended once the queue
//!   answered; its context is the job's `traceparent`;
//! * `skillforge.attempt` (consumer, the worker): one per lease, child of the enqueue span;
//! * `skillforge.run <kind>` (internal, the worker): the runner step, child of the attempt; a
//!   runner may add its own spans under it (the agent runner's `invoke_agent` span);
//! * `skillforge.apply` (internal, the control plane): ingestion of a result, child of the
//!   enqueue span.

use opentelemetry::trace::{
    Span as _, SpanContext, SpanKind, Status, TraceContextExt as _, TraceFlags, TraceState,
    Tracer as _,
};
use opentelemetry::{Context, KeyValue, SpanId, TraceId, global};
use skillforge_runner::{ExitClass, RunOutcome};

use crate::job::{Job, JobSpec};

/// The instrumentation scope name of every skillforge span.
pub const TRACER_NAME: &str = "skillforge";

fn tracer() -> global::BoxedTracer {
    global::tracer(TRACER_NAME)
}

/// `span_context` as a W3C `traceparent` header value: `00-<trace id, 32 hex>-<span id, 16
/// hex>-<flags, 2 hex>`; `None` for an invalid (no-op) context.
pub fn traceparent(span_context: &SpanContext) -> Option<String> {
    span_context.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            span_context.trace_id(),
            span_context.span_id(),
            span_context.trace_flags().to_u8()
        )
    })
}

/// Parses a W3C `traceparent` (version `00`) into a remote span context; `None` when it is not
/// one (wrong length, version, non-hex, all-zero ids). A job whose `traceparent` does not parse
/// is traced as a new trace, never refused.
pub fn parse_traceparent(value: &str) -> Option<SpanContext> {
    let mut parts = value.trim().split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || version != "00" || trace.len() != 32 || span.len() != 16 {
        return None;
    }
    let flags = u8::from_str_radix(flags, 16)
        .ok()
        .filter(|_| flags.len() == 2)?;
    let context = SpanContext::new(
        TraceId::from_hex(trace).ok()?,
        SpanId::from_hex(span).ok()?,
        TraceFlags::new(flags),
        true,
        TraceState::default(),
    );
    context.is_valid().then_some(context)
}

/// The context a job's spans are children of: its `traceparent`, or none (a new trace).
fn job_parent(spec: &JobSpec) -> Context {
    match spec.traceparent.as_deref().and_then(parse_traceparent) {
        Some(remote) => Context::new().with_remote_span_context(remote),
        None => Context::new(),
    }
}

fn job_attributes(spec: &JobSpec) -> Vec<KeyValue> {
    vec![
        KeyValue::new("skillforge.queue", spec.queue.clone()),
        KeyValue::new("skillforge.workflow", spec.workflow.clone()),
        KeyValue::new("skillforge.stage", spec.stage.clone()),
        KeyValue::new("skillforge.runner", spec.kind.clone()),
    ]
}

/// The enqueue span of one job, from before the enqueue until the queue answered.
pub struct EnqueueSpan(Option<global::BoxedSpan>);

/// Starts the enqueue span of `spec` and returns the spec to enqueue: `spec` itself (borrowed,
/// unchanged) when telemetry is off, else a copy whose `traceparent` names the new span. A
/// spec that already carries a `traceparent` (work enqueued again after the queue lost it)
/// keeps its trace: the new enqueue span is a child of it.
pub fn start_enqueue(spec: &JobSpec) -> (std::borrow::Cow<'_, JobSpec>, EnqueueSpan) {
    let span = tracer()
        .span_builder("skillforge.enqueue")
        .with_kind(SpanKind::Producer)
        .with_attributes(job_attributes(spec))
        .start_with_context(&tracer(), &job_parent(spec));
    match traceparent(span.span_context()) {
        None => (std::borrow::Cow::Borrowed(spec), EnqueueSpan(None)),
        Some(value) => {
            let mut traced = spec.clone();
            traced.traceparent = Some(value);
            (std::borrow::Cow::Owned(traced), EnqueueSpan(Some(span)))
        }
    }
}

impl EnqueueSpan {
    /// Ends the span with the queue's answer: the job's id and whether it was created (an
    /// idempotency key seen before returns the first job), or the error.
    pub fn end(self, answer: Result<(&str, bool), &dyn std::fmt::Display>) {
        let Some(mut span) = self.0 else { return };
        match answer {
            Ok((job_id, created)) => {
                span.set_attribute(KeyValue::new("skillforge.job_id", job_id.to_owned()));
                span.set_attribute(KeyValue::new("skillforge.created", created));
            }
            Err(e) => span.set_status(Status::error(e.to_string())),
        }
        span.end();
    }
}

/// The attempt span of one leased job on a worker, and the context its runner step runs in.
pub struct AttemptSpan {
    context: Context,
}

/// Starts the attempt span of `job` (leased with `fencing_token` by `worker_id`), a child of
/// the job's `traceparent` (a new trace when it has none).
pub fn start_attempt(job: &Job, fencing_token: u64, worker_id: &str) -> AttemptSpan {
    let mut attributes = job_attributes(&job.spec);
    attributes.extend([
        KeyValue::new("skillforge.job_id", job.id.clone()),
        KeyValue::new("skillforge.attempt", i64::from(job.attempts)),
        KeyValue::new("skillforge.fencing_token", fencing_token as i64),
        KeyValue::new("skillforge.worker", worker_id.to_owned()),
    ]);
    let span = tracer()
        .span_builder("skillforge.attempt")
        .with_kind(SpanKind::Consumer)
        .with_attributes(attributes)
        .start_with_context(&tracer(), &job_parent(&job.spec));
    AttemptSpan {
        context: Context::new().with_span(span),
    }
}

impl AttemptSpan {
    /// Starts the runner step's span (`skillforge.run <kind>`) under this attempt; the returned
    /// context is the one the runner's future runs in (`FutureExt::with_context`), so a runner's
    /// own spans are its children.
    pub fn start_run(&self, kind: &str) -> Context {
        let span = tracer()
            .span_builder(format!("skillforge.run {kind}"))
            .with_kind(SpanKind::Internal)
            .with_attributes([KeyValue::new("skillforge.runner", kind.to_owned())])
            .start_with_context(&tracer(), &self.context);
        self.context.with_span(span)
    }

    /// Ends the attempt span with the job's state after the finish (`succeeded`, `queued` for a
    /// retry, …), or the reason no result was delivered.
    pub fn end(self, state: Result<&str, &str>) {
        let span = self.context.span();
        match state {
            Ok(state) => span.set_attribute(KeyValue::new("skillforge.state", state.to_owned())),
            Err(why) => span.set_status(Status::error(why.to_owned())),
        }
        span.end();
    }
}

/// Ends the runner step's span started by [`AttemptSpan::start_run`] with the run's result:
/// its exit class, exit code and duration; an error status unless it passed.
pub fn end_run(run: &Context, result: &Result<RunOutcome, String>) {
    let span = run.span();
    match result {
        Ok(outcome) => {
            span.set_attribute(KeyValue::new("skillforge.exit", outcome.exit.label()));
            if let Some(code) = outcome.exit_code {
                span.set_attribute(KeyValue::new("process.exit.code", i64::from(code)));
            }
            span.set_attribute(KeyValue::new(
                "skillforge.duration_ms",
                outcome.duration_ms as i64,
            ));
            if !matches!(outcome.exit, ExitClass::Passed) {
                span.set_status(Status::error(outcome.exit.label()));
            }
        }
        Err(why) => span.set_status(Status::error(why.clone())),
    }
    span.end();
}

/// Starts the apply span of `job`'s result in the control plane, a child of the job's
/// `traceparent`; end it with [`end_apply`].
pub fn start_apply(job: &Job) -> Context {
    let mut attributes = job_attributes(&job.spec);
    attributes.extend([
        KeyValue::new("skillforge.job_id", job.id.clone()),
        KeyValue::new("skillforge.state", job.state.as_str()),
        KeyValue::new("skillforge.fencing_token", job.fencing_token as i64),
    ]);
    let span = tracer()
        .span_builder("skillforge.apply")
        .with_kind(SpanKind::Internal)
        .with_attributes(attributes)
        .start_with_context(&tracer(), &job_parent(&job.spec));
    Context::new().with_span(span)
}

/// Ends an apply span: `applied` says what ingestion did (`new`, `duplicate`, `deferred`,
/// `rerun`), or the error.
pub fn end_apply(apply: &Context, applied: Result<&str, String>) {
    let span = apply.span();
    match applied {
        Ok(what) => span.set_attribute(KeyValue::new("skillforge.applied", what.to_owned())),
        Err(e) => span.set_status(Status::error(e)),
    }
    span.end();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_bad_values_are_none() {
        let value = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let parsed = parse_traceparent(value).unwrap();
        assert_eq!(traceparent(&parsed).as_deref(), Some(value));
        for bad in [
            "",
            "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-1",
            "00-zzf7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn without_a_provider_no_traceparent_is_written() {
        let spec = JobSpec::new("noop", serde_json::json!({}));
        let (traced, span) = start_enqueue(&spec);
        assert!(matches!(traced, std::borrow::Cow::Borrowed(_)));
        assert!(traced.traceparent.is_none());
        span.end(Ok(("j", true)));
    }
}
