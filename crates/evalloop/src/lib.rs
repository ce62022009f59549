//! The skill eval loop (seed: `skill-eval-loop.txt`): brief → with/without (or rival) arms, N
//! samples → blind judge with invalid-pair codes → strict-majority aggregate → ADOPT / PROBATION /
//! REJECT gate → ledger → recheck that confirms or revokes on measured evidence only.
//!
//! The product's skeleton: [`FAMILY`] (its line in the family registry), [`stages`] (its stage
//! definitions), [`handler`] ([`handler::EvalResultHandler`], applying finished jobs as files),
//! [`steps`] (the forge's steps, one per file: arm, verify, judge), and the pure decision files.
//!
//! Pure decision logic, one concept per file: [`brief`], [`arm`], [`inventory`], [`predicate`],
//! [`invalid`], [`mapping`], [`verdict`], [`sample`], [`stop`], [`aggregate`], [`gate`], [`pace`],
//! [`ledger`]; session corpora and the recheck: [`sessions`], [`corrections`], [`words`],
//! [`recheck`]. The durable forge: [`forge`] (the chain for one brief and one skill over the
//! steps), [`layout`] (where its evidence lives), [`arm_runner`], [`tool_errors`], [`install`];
//! their shared errors: [`error`]. Upkeep: [`backfill`], [`theme`], [`deploy`], [`draft`] (a
//! knowledge-gap brief drafted by a model). Helpers: [`check`] (a verify that checks the
//! delivered document), [`credentials`] (the arms' credential preflight).

pub mod aggregate;
pub mod arm;
pub mod arm_runner;
pub mod backfill;
pub mod brief;
pub mod check;
pub mod corrections;
pub mod credentials;
pub mod deploy;
pub mod draft;
pub mod error;
pub mod forge;
pub mod gate;
pub mod handler;
pub mod install;
pub mod invalid;
pub mod inventory;
pub mod layout;
pub mod ledger;
pub mod mapping;
pub mod pace;
pub mod predicate;
pub mod recheck;
pub mod sample;
pub mod sessions;
pub mod spend;
pub mod stages;
pub mod stats;
pub mod steps;
pub mod stop;
pub mod theme;
pub mod tool_errors;
pub mod verdict;
pub mod words;

/// The eval loop's line in the family registry: arm, verify and judge jobs, whose results
/// ingestion writes into the sample's files.
pub static FAMILY: skillforge_stage::Family = skillforge_stage::Family {
    name: "evalloop",
    workflow: stages::EVAL_WORKFLOW,
    summary: "the skill eval loop: arm, verify and judge jobs become their files (run.json, verify.json, verdict.json)",
    stages: Some(stages::SOURCE),
    handler: |_| std::sync::Arc::new(handler::EvalResultHandler),
};
