//! skillforge workflow state machines (train, harvest, verify, ...), driven by the engine.

pub mod ab;
pub mod bineval;
pub mod distill;
pub mod evalloop;
pub mod evaluator;
pub mod harvest;
pub mod packet;
pub mod promotion;
pub mod train;
pub mod optimize;
