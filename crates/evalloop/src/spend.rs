//! What a forge spent (issue 31 item 7): tokens and cost per arm, sample and brief, read from the
//! arms' `run.json` and the judge's `verdict.json`. A run whose transcript reported nothing is
//! counted as such (unknown), never as 0.

use std::path::Path;

use serde::Serialize;
use skillforge_runner_agent::Spend;

use super::arm::{ArmRecord, ArmSide};
use super::layout::{meta_dir, read_json, sample_dir};
use super::sample::{SampleVerdict, VERDICT_FILE};
use super::steps::arm::RUN_FILE;

/// One sample's spend.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SampleSpend {
    /// Sample number.
    pub sample: u32,
    /// The with-arm's run (no run counted when it has not finished).
    pub with: Spend,
    /// The without-arm's run.
    pub without: Spend,
    /// The judge's run (none for a sample found invalid before the judge).
    pub judge: Spend,
}

impl SampleSpend {
    /// The sample's three runs together.
    pub fn total(&self) -> Spend {
        let mut total = self.with;
        total.merge(&self.without);
        total.merge(&self.judge);
        total
    }
}

/// A brief's spend: per sample, and in all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BriefSpend {
    /// Samples 1..=n that have any run.
    pub samples: Vec<SampleSpend>,
    /// Every run of the brief.
    pub total: Spend,
}

/// Reads the spend of samples `1..=n` under `brief_dir`.
pub fn brief_spend(brief_dir: &Path, n: u32) -> BriefSpend {
    let mut spend = BriefSpend::default();
    for sample in 1..=n {
        let sdir = sample_dir(brief_dir, sample);
        let mut s = SampleSpend {
            sample,
            ..SampleSpend::default()
        };
        for side in ArmSide::BOTH {
            let record: Option<ArmRecord> = read_json(&meta_dir(&sdir, side).join(RUN_FILE))
                .ok()
                .flatten();
            if let Some(record) = record {
                let slot = match side {
                    ArmSide::With => &mut s.with,
                    ArmSide::Without => &mut s.without,
                };
                slot.add_run(record.usage.as_ref());
            }
        }
        let verdict: Option<SampleVerdict> = read_json(&sdir.join(VERDICT_FILE)).ok().flatten();
        if let Some(v) = verdict.filter(|v| v.mapping.is_some()) {
            // A mapping is drawn only for a pair that went to the judge.
            s.judge.add_run(v.judge_usage.as_ref());
        }
        let total = s.total();
        if total.runs > 0 {
            spend.total.merge(&total);
            spend.samples.push(s);
        }
    }
    spend
}
