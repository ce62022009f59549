//! [`QueueMetrics`]: the queue's counters for `/metrics`, read in O(label sets).

use crate::error::EngineError;
use crate::metrics::MetricsSnapshot;

/// Counters, depth and histograms the backend keeps as jobs change state (issue 36 item 2).
#[async_trait::async_trait]
pub trait QueueMetrics: super::QueueCore {
    /// The kept figures, or `None` when this backend keeps none (the default): a scrape then
    /// shows no queue figures rather than made-up zeros.
    async fn metrics(&self) -> Result<Option<MetricsSnapshot>, EngineError> {
        Ok(None)
    }
}
