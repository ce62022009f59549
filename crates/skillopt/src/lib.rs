//! SkillOpt: review runs and blind feedback ([`train`], [`github_review`], [`github_write`],
//! [`packet`]), the training/candidate exchange and train mode ([`train`]), trace harvesting
//! ([`harvest`], [`distill`]), evaluator profiles ([`evaluator`]), and deciding between versions
//! ([`ab`], [`bineval`], [`promotion`], the replay [`gate`]). Its families are [`FAMILIES`].

use std::sync::Arc;

use skillforge_stage::Family;
use skillforge_stage::family::record_only;
use skillforge_store::blobs::BlobStore;

pub mod ab;
pub mod bineval;
pub mod distill;
pub mod evaluator;
pub mod gate;
pub mod github_review;
pub mod github_write;
pub mod harvest;
pub mod packet;
pub mod promotion;
pub mod train;

/// Workflow of `skillforge ab` agent jobs (both arms' answers, read back by the command).
pub const AB_WORKFLOW: &str = "ab";
/// Workflow of `skillforge binary` judge jobs (BINEVAL answers, read back by the command).
pub const BINEVAL_WORKFLOW: &str = "bineval";

/// `ab`'s stages (`workflows/ab.toml`): one `agent` job per arm and one for the judge.
pub const AB_SOURCE: skillforge_stage::StageSource = skillforge_stage::StageSource {
    family: "ab",
    workflow: AB_WORKFLOW,
    shipped: include_str!("../../../workflows/ab.toml"),
    stage_names: &["champion", "challenger", "judge"],
};
/// `binary run --reviewer`'s stage (`workflows/bineval.toml`): one `agent` job per question.
pub const BINEVAL_SOURCE: skillforge_stage::StageSource = skillforge_stage::StageSource {
    family: "bineval",
    workflow: BINEVAL_WORKFLOW,
    shipped: include_str!("../../../workflows/bineval.toml"),
    stage_names: &["question"],
};

/// SkillOpt's lines in the family registry.
pub static FAMILIES: [Family; 8] = [
    Family {
        name: "train",
        workflow: train::generation::TRAIN_WORKFLOW,
        summary: "train mode: option-generation jobs become review options; the optimizer's files are imported by its step",
        stages: Some(train::stages::SOURCE),
        handler: |env| {
            Arc::new(train::TrainResultHandler {
                blobs: BlobStore::in_home(env.home),
            })
        },
    },
    Family {
        name: "harvest",
        workflow: harvest::WORKFLOW,
        summary: "Mode A harvesting: hard-verifier, checker and review leg jobs become their feedback rows",
        stages: Some(harvest::stages::SOURCE),
        handler: |_| Arc::new(harvest::HarvestHandler),
    },
    Family {
        name: "github",
        workflow: github_write::GITHUB_WORKFLOW,
        summary: "GitHub writes (review issues, comments): a succeeded write is recorded once under its idempotency key",
        stages: Some(github_write::SOURCE),
        handler: |_| Arc::new(github_write::GithubWriteHandler),
    },
    Family {
        name: "evaluator",
        workflow: evaluator::EVALUATE_WORKFLOW,
        summary: "evaluator profiles: judge and render jobs, read back by the evaluation that enqueued them",
        stages: Some(evaluator::defs::SOURCE),
        handler: |_| Arc::new(evaluator::EvaluatorHandler),
    },
    Family {
        name: "promotion",
        workflow: promotion::events::EVENTS_WORKFLOW,
        summary: "promotion: webhook delivery jobs (no domain effect) and canary decision jobs, applied at ingestion (graduate or roll back)",
        stages: Some(promotion::stages::SOURCE),
        handler: |_| Arc::new(promotion::window::CanaryDecisionHandler),
    },
    Family {
        name: "ab",
        workflow: AB_WORKFLOW,
        summary: "`ab`: champion and challenger answers, read back by the command that records the A/B",
        stages: Some(AB_SOURCE),
        handler: record_only,
    },
    Family {
        name: "replay",
        workflow: gate::REPLAY_WORKFLOW,
        summary: "the replay gate: champion and candidate replays of a corpus, read back and scored by `candidate gate`",
        stages: Some(gate::SOURCE),
        handler: record_only,
    },
    Family {
        name: "bineval",
        workflow: BINEVAL_WORKFLOW,
        summary: "`binary`: BINEVAL judge answers, read back by the command",
        stages: Some(BINEVAL_SOURCE),
        handler: record_only,
    },
];
