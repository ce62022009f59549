//! skillforge workflow state machines (train, harvest, verify, ...), driven by the engine.

pub mod distill;
pub mod evalloop;
pub mod evaluator;
pub mod harvest;
pub mod packet;
pub mod train;
pub mod optimize;
