//! The optimize loop's ingestion handler, which has no domain effect: the loop applies each
//! job's result where it decides on it (it reads the applied job back through its port and
//! writes the experiment log at a verified checkpoint), so ingestion only records the result.

use std::sync::Arc;

use skillforge_engine::ingest::ResultHandler;
use skillforge_stage::HandlerEnv;

/// The handler [`super::FAMILY`] registers: [`skillforge_stage::family::record_only`] (the engine
/// records the applied result; nothing else is written at ingestion).
pub fn handler(env: HandlerEnv<'_>) -> Arc<dyn ResultHandler> {
    skillforge_stage::family::record_only(env)
}
