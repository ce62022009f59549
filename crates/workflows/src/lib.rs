//! skillforge workflow state machines (train, harvest, verify, ...), driven by the engine.

pub mod ab;
pub mod bineval;
pub mod distill;
pub mod evalloop;
pub mod evaluator;
pub mod families;
pub mod github_review;
pub mod github_write;
pub mod harvest;
pub mod judge_reply;
pub mod optimize;
pub mod packet;
pub mod promotion;
pub mod stage;
pub mod train;
