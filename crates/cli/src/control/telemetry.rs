//! OpenTelemetry traces of jobs (issue 36 item 3): the binary's tracer provider, exporting over
//! OTLP/HTTP (protobuf) to the collector `[telemetry] otlp_endpoint` names, off by default.
//!
//! The spans themselves are made where the work happens, through the OpenTelemetry API
//! (`skillforge_engine::telemetry`: enqueue, attempt, runner step, apply; the agent runner's
//! `invoke_agent` span with the GenAI attributes). Without a provider installed here they are
//! no-ops, and no job carries a `traceparent`. Export never blocks or fails a job: spans are
//! queued to a batch processor's own thread (a full queue drops them), a collector that does
//! not answer is logged once per outage and its spans dropped, and the queue is flushed when the
//! process ends ([`shutdown`]).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::anyhow;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing::{info, warn};

use crate::config::TelemetrySection;
use crate::exit::CliError;

/// How long one export to the collector may take before it is dropped.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(3);

/// The installed provider, flushed by [`shutdown`].
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// Where traces go: the configured URL (its `/v1/traces` added), the standard variables, or
/// nowhere (off).
#[derive(Debug, PartialEq)]
enum Target {
    /// `[telemetry] otlp_endpoint`, as the full traces URL.
    Configured(String),
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT`, resolved by the
    /// exporter as the OpenTelemetry specification says.
    FromEnv,
    /// Off.
    Off,
}

/// The target of `section` given the environment `var`.
///
/// # Errors
/// Exit 2 for an `otlp_endpoint` that is not an `http://` or `https://` URL.
fn target(
    section: &TelemetrySection,
    var: impl Fn(&str) -> Option<String>,
) -> Result<Target, CliError> {
    let set = |name: &str| var(name).is_some_and(|v| !v.trim().is_empty());
    if var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return Ok(Target::Off);
    }
    match section.otlp_endpoint.as_deref().map(str::trim) {
        Some(url) => {
            let rest = url
                .strip_prefix("http://")
                .or_else(|| url.strip_prefix("https://"));
            if !rest.is_some_and(|r| !r.is_empty() && !r.starts_with('/')) {
                return Err(CliError::usage(anyhow!(
                    "config.toml [telemetry] otlp_endpoint `{url}`: not an http:// or https:// URL of an OTLP/HTTP collector (e.g. `http://127.0.0.1:4318`)"
                )));
            }
            let base = url.trim_end_matches('/');
            Ok(Target::Configured(if base.ends_with("/v1/traces") {
                base.to_owned()
            } else {
                format!("{base}/v1/traces")
            }))
        }
        None if set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") || set("OTEL_EXPORTER_OTLP_ENDPOINT") => {
            Ok(Target::FromEnv)
        }
        None => Ok(Target::Off),
    }
}

/// Installs the global tracer provider when `section` (or the standard variables) turn traces
/// on; does nothing when they are off. Call once, inside the async runtime.
///
/// # Errors
/// Exit 2 for a bad `otlp_endpoint` (or a bad endpoint variable), naming it.
pub fn install(section: &TelemetrySection) -> Result<(), CliError> {
    let target = target(section, |name| std::env::var(name).ok())?;
    let builder = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_timeout(EXPORT_TIMEOUT);
    let (builder, shown) = match target {
        Target::Off => return Ok(()),
        Target::Configured(url) => (builder.with_endpoint(url.clone()), url),
        Target::FromEnv => (builder, "the OTEL_EXPORTER_OTLP_* endpoint".to_owned()),
    };
    let exporter = builder.build().map_err(|e| {
        CliError::usage(anyhow!(
            "OpenTelemetry traces to {shown}: {e} (config.toml [telemetry] otlp_endpoint, or OTEL_EXPORTER_OTLP_ENDPOINT)"
        ))
    })?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name("skillforge")
        .with_attributes([opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        )])
        .build();
    let provider = SdkTracerProvider::builder()
        .with_resource(resource)
        .with_batch_exporter(LoggedOnce {
            inner: exporter,
            endpoint: shown,
            is_failing: AtomicBool::new(false),
        })
        .build();
    opentelemetry::global::set_tracer_provider(provider.clone());
    let _ = PROVIDER.set(provider);
    Ok(())
}

/// Flushes the spans still queued and stops the exporter (each export bounded by
/// [`EXPORT_TIMEOUT`]); nothing when traces are off. Call once, when the command ends.
pub fn shutdown() {
    if let Some(provider) = PROVIDER.get()
        && let Err(e) = provider.shutdown()
    {
        warn!(error = %e, "OpenTelemetry traces not flushed at exit");
    }
}

/// An exporter whose failures are logged once per outage and never reported back to the SDK
/// (whose spans are then dropped): a dead collector costs a job nothing.
#[derive(Debug)]
struct LoggedOnce<E> {
    inner: E,
    /// The collector's URL as shown in the log.
    endpoint: String,
    is_failing: AtomicBool,
}

impl<E: SpanExporter> SpanExporter for LoggedOnce<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n_spans = batch.len();
        match self.inner.export(batch).await {
            Ok(()) => {
                if self.is_failing.swap(false, Ordering::Relaxed) {
                    info!(endpoint = %self.endpoint, "the OpenTelemetry collector takes traces again");
                }
            }
            Err(e) => {
                if !self.is_failing.swap(true, Ordering::Relaxed) {
                    warn!(endpoint = %self.endpoint, error = %e, dropped_spans = n_spans,
                          "the OpenTelemetry collector does not take traces: they are dropped until it does (jobs are not affected; check that it runs at this address, or unset [telemetry] otlp_endpoint)");
                }
            }
        }
        Ok(())
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_follows_the_key_then_the_standard_variables() {
        let check = |key: Option<&str>, env: &[(&str, &str)], expected: Result<Target, ()>| {
            let section = TelemetrySection {
                otlp_endpoint: key.map(str::to_owned),
            };
            let var = |name: &str| {
                env.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            };
            assert_eq!(
                target(&section, var).map_err(|_| ()),
                expected,
                "{key:?} {env:?}"
            );
        };
        let url = |u: &str| Ok(Target::Configured(u.to_owned()));
        check(None, &[], Ok(Target::Off));
        check(
            Some("http://127.0.0.1:4318"),
            &[],
            url("http://127.0.0.1:4318/v1/traces"),
        );
        check(
            Some("https://c.example/"),
            &[],
            url("https://c.example/v1/traces"),
        );
        check(
            Some("http://c:4318/v1/traces"),
            &[],
            url("http://c:4318/v1/traces"),
        );
        check(Some("127.0.0.1:4318"), &[], Err(()));
        check(Some("http://"), &[], Err(()));
        check(
            None,
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")],
            Ok(Target::FromEnv),
        );
        check(
            None,
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")],
            Ok(Target::Off),
        );
        check(
            Some("http://c:4318"),
            &[("OTEL_SDK_DISABLED", "true")],
            Ok(Target::Off),
        );
    }
}
