//! The replay gate (issue 34 item 11; facts §7 `gate_enabled` → `gate_blocked`, §8
//! `skillopt_gate_runs`): a versioned corpus ([`corpus`]) replayed for the champion and the
//! candidate as durable jobs on the fleet (`workflows/replay.toml`), scored by the deterministic
//! scorers and decided on a strict improvement of the corpus mean with every item scorable on
//! both sides ([`score`]); [`run`] submits, waits, scores and records the run with its per-item
//! deltas. With `gate_enabled`, the notify seam promotes only a candidate with an accepted run
//! against the current champion. A candidate without a score (a distill candidate) takes the
//! run's corpus mean as its score, the evidence the guardrails read (issue 37 item 6).

pub mod corpus;
pub mod run;
pub mod score;

/// Workflow of replay jobs.
pub const REPLAY_WORKFLOW: &str = "replay";
/// Stage of a replay through the corpus's `replay_command` (`process`).
pub const COMMAND_STAGE: &str = "command";
/// Stage of a replay asked of an agent (`agent`).
pub const ASK_STAGE: &str = "ask";
/// The name a promotion blocked for want of an accepted gate run is recorded under (facts §7).
pub const GATE_BLOCKED: &str = "gate_blocked";

/// The replay gate's stages (`workflows/replay.toml`, `<home>/replay.toml` overrides).
pub const SOURCE: skillforge_stage::StageSource = skillforge_stage::StageSource {
    family: "replay",
    workflow: REPLAY_WORKFLOW,
    shipped: include_str!("../../../../workflows/replay.toml"),
    stage_names: &[COMMAND_STAGE, ASK_STAGE],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_replay_stages_load() {
        let def: skillforge_stage::WorkflowDef = SOURCE.shipped().unwrap();
        assert_eq!(def.stage(COMMAND_STAGE).runner.as_deref(), Some("process"));
        assert_eq!(def.stage(ASK_STAGE).runner.as_deref(), Some("agent"));
    }
}
