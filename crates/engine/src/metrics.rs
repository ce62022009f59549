//! The queue's own figures for `/metrics` (issue 36 item 2): counters, depth by state and
//! histograms kept by the backend in the same transaction (SQLite triggers) or script (Redis
//! Lua) as each transition, so reading them costs O(label sets), never O(jobs).
//!
//! Both backends keep the same rows (see `sqlite/migrations/0009_metrics.sql` for their
//! meaning); [`MetricsSnapshot`] is what one read returns. Counters count from the queue's
//! creation, or from its upgrade to a build that keeps them; depth is exact from then on, with
//! one exception: a Redis job record quarantined as unreadable (`QueueIntegrity::quarantine`)
//! stays counted in the depth of its last state, which cannot be read (on SQLite the row's
//! delete trigger takes it out). Processes of an older build on the same queue do not count.

/// Upper bounds (ms) of the histogram buckets of `wait_ms` and `run_ms`; a larger observation
/// falls in the `+Inf` bucket (stored as `le` −1). The same on both backends.
pub const BUCKETS_MS: [i64; 8] = [10, 100, 1_000, 5_000, 30_000, 120_000, 600_000, 3_600_000];

/// One kept figure: a counter or gauge (`le` 0) or one histogram bucket (`le` its bound in ms,
/// −1 for `+Inf`; `value` counts that bucket alone, `sum_ms` the ms observed in it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetricRow {
    /// `depth`, `enqueued`, `started`, `finished`, `retries`, `lease_recoveries`,
    /// `fencing_rejections`, `wait_ms` or `run_ms`.
    pub name: String,
    /// Queue name ('' for `fencing_rejections`, kept for the whole queue).
    pub queue: String,
    /// Workflow of the jobs counted ('' where the figure is not split by it).
    pub workflow: String,
    /// Stage of the jobs counted ('' where the figure is not split by it).
    pub stage: String,
    /// The final state for `finished`, the state for `depth`, else ''.
    pub outcome: String,
    /// Histogram bucket bound in ms (−1 = `+Inf`), 0 for a counter or gauge.
    pub le_ms: i64,
    /// The count.
    pub value: i64,
    /// Sum of the observed ms (histogram buckets only).
    pub sum_ms: i64,
}

/// What one read of the queue's figures returns.
#[derive(Debug, Clone, Default)]
pub struct MetricsSnapshot {
    /// Every kept row (order unspecified).
    pub rows: Vec<MetricRow>,
    /// Workers whose presence lock (`worker:<id>`) is held and fresh.
    pub workers_alive: u64,
    /// Age in ms (on the queue's clock) of the oldest result not yet applied by a control
    /// plane; `None` when none waits.
    pub oldest_pending_result_ms: Option<i64>,
}

/// Bucket bound (ms) of an observation of `ms` (−1 for `+Inf`).
pub fn bucket_of(ms: i64) -> i64 {
    BUCKETS_MS.iter().copied().find(|b| ms <= *b).unwrap_or(-1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets() {
        assert_eq!(bucket_of(0), 10);
        assert_eq!(bucket_of(10), 10);
        assert_eq!(bucket_of(11), 100);
        assert_eq!(bucket_of(3_600_001), -1);
    }
}
