//! Measured snapshots: per-metric samples of one side (reference or candidate) of a pairing,
//! in the shape of the seed's `result.yaml` snapshots (experiment-prompt-template.md, remote delta).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One metric's samples and their aggregate (the mean).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct MetricSamples {
    /// Mean of `samples`.
    pub aggregate: f64,
    /// Every sample, in collection order.
    pub samples: Vec<f64>,
}

impl MetricSamples {
    /// From samples (aggregate = mean; 0 when empty).
    pub fn from_samples(samples: Vec<f64>) -> Self {
        Self {
            aggregate: mean(&samples),
            samples,
        }
    }

    /// Appends one sample and recomputes the aggregate.
    pub fn push(&mut self, value: f64) {
        self.samples.push(value);
        self.aggregate = mean(&self.samples);
    }
}

/// A worst case kept with its reason (O-34).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorstCase {
    /// Case or item id.
    pub id: String,
    /// Its value on the primary metric (or judge score).
    pub value: f64,
    /// What went wrong.
    pub reason: String,
}

/// One side of a pairing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Snapshot {
    /// Degenerate gate expression → passed.
    #[serde(default)]
    pub gates: BTreeMap<String, bool>,
    /// Metric name → samples.
    #[serde(default)]
    pub metrics: BTreeMap<String, MetricSamples>,
    /// Cost, tokens, latency and other diagnostics; recorded, never decisive (O-40).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub diagnostics: BTreeMap<String, serde_json::Value>,
    /// The worst cases of the last sample, when the harness reports per-case results.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worst_cases: Vec<WorstCase>,
}

impl Snapshot {
    /// Appends one sample of every metric in `values` (creating metrics as needed).
    pub fn push_sample(&mut self, values: &BTreeMap<String, f64>) {
        for (name, v) in values {
            self.metrics.entry(name.clone()).or_default().push(*v);
        }
    }

    /// Samples collected (the smallest count over the metrics; 0 when none).
    pub fn n_samples(&self) -> usize {
        self.metrics
            .values()
            .map(|m| m.samples.len())
            .min()
            .unwrap_or(0)
    }

    /// The aggregate of `name`, if measured.
    pub fn aggregate(&self, name: &str) -> Option<f64> {
        self.metrics
            .get(name)
            .filter(|m| !m.samples.is_empty())
            .map(|m| m.aggregate)
    }
}

/// Arithmetic mean (0 for an empty slice).
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Sample standard deviation (n − 1 denominator; 0 for fewer than two samples).
pub fn std_dev(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let m = mean(xs);
    (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64).sqrt()
}
