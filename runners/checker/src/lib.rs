//! The checker runner: deterministic quality dimensions normalized to [0,1].
