//! skillforge wire formats: what crosses a process boundary, with its validation (DESIGN §7).
