//! skillforge workflow state machines (train, harvest, verify, ...), driven by the engine.

pub mod ab;
pub mod distill;
pub mod evaluator;
pub mod families;
pub mod harvest;
pub mod packet;
pub mod stage;
pub mod train;
