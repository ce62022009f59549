//! The store's counters for `/metrics` (issue 36 item 2): `metric_counters` (migration
//! `0017_metrics.sql`), kept by triggers as results are applied (agent tokens and cost, results
//! by workflow, stage and state) and as BINEVAL verdicts and promotion events are written. A read
//! is one scan of that small table: O(label sets), never O(results).

use sqlx::SqlitePool;

use crate::StoreError;

/// One counter: its name and up to three label values (meaning per name in the migration).
#[derive(Debug, Clone, PartialEq)]
pub struct StoreCounter {
    /// `results_applied`, `agent_input_tokens`, `agent_output_tokens`, `agent_cost_usd`,
    /// `bineval_verdicts` or `promotion_events`.
    pub name: String,
    /// First label value (workflow, runtime, verdict or event).
    pub a: String,
    /// Second label value (stage or model), '' when unused.
    pub b: String,
    /// Third label value (state), '' when unused.
    pub c: String,
    /// The count (tokens, dollars for `agent_cost_usd`).
    pub value: f64,
}

/// Every kept counter.
///
/// # Errors
/// [`StoreError`] when the store cannot be read.
pub async fn counters(pool: &SqlitePool) -> Result<Vec<StoreCounter>, StoreError> {
    let rows: Vec<(String, String, String, String, f64)> =
        sqlx::query_as("SELECT name, a, b, c, value FROM metric_counters ORDER BY name, a, b, c")
            .fetch_all(pool)
            .await?;
    Ok(rows
        .into_iter()
        .map(|(name, a, b, c, value)| StoreCounter {
            name,
            a,
            b,
            c,
            value,
        })
        .collect())
}
