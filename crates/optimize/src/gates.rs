//! Degenerate gates: cheap hard checks, `<metric> <op> <number>`, that reject obviously broken
//! output before any judge call (seed: optimize-loop, loop.md 3.3 step 4; O-30).

use std::collections::BTreeMap;

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `>=`
    Ge,
    /// `>`
    Gt,
    /// `<=`
    Le,
    /// `<`
    Lt,
    /// `==`
    Eq,
    /// `!=`
    Ne,
}

/// One parsed gate.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    /// Metric name.
    pub metric: String,
    /// Operator.
    pub op: Op,
    /// Threshold.
    pub threshold: f64,
}

/// Why a gate's text is not a gate; each names the gate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    /// Not three words.
    #[error("gate `{text}` is not `<metric> <op> <number>`")]
    Shape {
        /// The gate as written.
        text: String,
    },
    /// The operator is none of `>= > <= < == !=`.
    #[error("gate `{text}`: unknown operator `{op}` (expected >= > <= < == !=)")]
    Operator {
        /// The gate as written.
        text: String,
        /// The operator found.
        op: String,
    },
    /// The threshold does not parse as a number.
    #[error("gate `{text}`: `{threshold}` is not a number")]
    Threshold {
        /// The gate as written.
        text: String,
        /// The threshold found.
        threshold: String,
    },
}

impl Gate {
    /// Parses `clusters >= 2`: `<metric> <op> <number>`, split on whitespace.
    ///
    /// # Errors
    /// [`GateError`] naming the gate and what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, GateError> {
        let parts: Vec<&str> = text.split_whitespace().collect();
        let [metric, op, threshold] = parts.as_slice() else {
            return Err(GateError::Shape {
                text: text.to_owned(),
            });
        };
        let op = match *op {
            ">=" => Op::Ge,
            ">" => Op::Gt,
            "<=" => Op::Le,
            "<" => Op::Lt,
            "==" => Op::Eq,
            "!=" => Op::Ne,
            other => {
                return Err(GateError::Operator {
                    text: text.to_owned(),
                    op: other.to_owned(),
                });
            }
        };
        let threshold: f64 = threshold.parse().map_err(|_| GateError::Threshold {
            text: text.to_owned(),
            threshold: (*threshold).to_owned(),
        })?;
        Ok(Self {
            metric: (*metric).to_owned(),
            op,
            threshold,
        })
    }

    /// Whether `value` passes.
    pub fn passes(&self, value: f64) -> bool {
        match self.op {
            Op::Ge => value >= self.threshold,
            Op::Gt => value > self.threshold,
            Op::Le => value <= self.threshold,
            Op::Lt => value < self.threshold,
            Op::Eq => (value - self.threshold).abs() < 1e-12,
            Op::Ne => (value - self.threshold).abs() >= 1e-12,
        }
    }
}

/// Evaluates every gate against one sample's `values`; a gate whose metric the harness did not
/// print fails (missing evidence is never a pass). Returns gate text → passed.
///
/// Gates are validated when the spec loads, so an unparsable gate here fails too.
pub fn evaluate(gates: &[String], values: &BTreeMap<String, f64>) -> BTreeMap<String, bool> {
    gates
        .iter()
        .map(|text| {
            let passed = Gate::parse(text)
                .ok()
                .is_some_and(|g| values.get(&g.metric).is_some_and(|v| g.passes(*v)));
            (text.clone(), passed)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // O-30
    #[test]
    fn o30_a_failing_gate_is_reported_and_a_missing_metric_fails() {
        let gates = vec!["clusters >= 2".to_string(), "correct == 1".to_string()];
        let values = BTreeMap::from([("clusters".to_string(), 1.0), ("correct".to_string(), 1.0)]);
        let got = evaluate(&gates, &values);
        assert!(!got["clusters >= 2"]);
        assert!(got["correct == 1"]);
        let got = evaluate(&gates, &BTreeMap::from([("clusters".to_string(), 3.0)]));
        assert!(!got["correct == 1"], "missing metric must fail the gate");
        for (text, v, want) in [
            ("a > 1", 1.0, false),
            ("a < 1", 0.5, true),
            ("a <= 1", 1.0, true),
            ("a != 0", 0.0, false),
        ] {
            assert_eq!(Gate::parse(text).unwrap().passes(v), want, "{text} at {v}");
        }
        assert!(
            Gate::parse("a ~ 1")
                .unwrap_err()
                .to_string()
                .contains("unknown operator")
        );
        assert!(
            Gate::parse("a >= x")
                .unwrap_err()
                .to_string()
                .contains("not a number")
        );
    }
}
