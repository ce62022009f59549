//! Raw figures as written to the JSON results file.

use std::collections::BTreeMap;

use serde::Serialize;

/// One throughput trial: N no-op jobs enqueued first, then drained by one worker.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ThroughputTrial {
    pub n: u64,
    /// First handler start → last completion persisted, seconds.
    pub elapsed_s: f64,
    /// `n / elapsed_s`.
    pub rate: f64,
    /// Completions counted in the backend after the drain (must equal `n`).
    pub verified_completed: u64,
    /// CPU seconds of the worker process during the drain.
    pub client_cpu_s: f64,
    /// CPU seconds of redis-server during the drain (Redis backends only).
    pub redis_cpu_s: Option<f64>,
    /// Redis commands per job during the drain (`INFO commandstats` calls / n), by command.
    pub redis_calls_per_job: Option<BTreeMap<String, f64>>,
    /// Server-side microseconds per job, all commands.
    pub redis_usec_per_job: Option<f64>,
    /// Profile pass only: the worker's backend calls (count, time, jobs per lease).
    pub backend_calls: Option<BTreeMap<String, crate::timed::CallStats>>,
}

impl ThroughputTrial {
    pub fn with_redis(mut self, stats: &crate::util::RedisStats) -> Self {
        let n = self.n as f64;
        self.redis_calls_per_job = Some(
            stats.commands.iter().map(|(k, (calls, _))| (k.clone(), *calls as f64 / n)).collect(),
        );
        self.redis_usec_per_job =
            Some(stats.commands.values().map(|(_, usec)| *usec as f64).sum::<f64>() / n);
        self
    }
}

/// One latency trial: enqueue→start of jobs sent one by one from another process.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LatencyTrial {
    pub n: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub verified_completed: u64,
}

impl LatencyTrial {
    pub fn from_latencies(lat: &[f64], verified: u64) -> Self {
        Self {
            n: lat.len() as u64,
            p50_ms: crate::util::percentile(lat, 50.0),
            p99_ms: crate::util::percentile(lat, 99.0),
            max_ms: crate::util::percentile(lat, 100.0),
            verified_completed: verified,
        }
    }
}

/// One recovery trial: SIGKILL of the worker holding a job → the job starting on the survivor.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RecoveryTrial {
    /// SIGKILL this long after the victim's job started, seconds.
    pub kill_offset_s: f64,
    /// Kill → the job's handler starting on the survivor, seconds.
    pub recovery_s: f64,
}
