//! CLI plumbing shared by commands, so no command imports another: the one waiter (the stage
//! port, [`waiter::CliJobs`]), the HTTP server of `serve --listen` and `worker --metrics` ([`http`]) with its parts, the events endpoint ([`events`]) and `/metrics`, `/health`, `/ready` ([`metrics`]), signals,
//! argument helpers, the GitHub watchers of `serve` ([`github_watch`]), one agent call as a job ([`agent`]), the human pick asked on a terminal ([`pick_prompt`]), whether a runtime's model API accepts a connection ([`model_api`]), the template operations several nouns share ([`templates`]) and the running stage's output tail of status commands ([`tail`]) the redaction of secrets from everything written to stderr ([`redact`]) and the OpenTelemetry exporter ([`telemetry`]). Commands parse arguments, call the workflows and print.

pub mod agent;
pub mod args;
pub mod events;
pub mod github_watch;
pub mod http;
pub mod metrics;
pub mod model_api;
pub mod pick_prompt;
pub mod promotion;
pub mod redact;
pub mod signals;
pub mod tail;
pub mod telemetry;
pub mod templates;
pub mod waiter;
