//! Progress of a long step, reported by the workflows and printed by the CLI: nothing below the
//! CLI prints.

/// Where progress lines go (the CLI: stderr, or the demo's numbered steps).
pub trait Progress: Send + Sync {
    /// One human line about a step taken (no trailing newline).
    fn step(&self, line: &str);
}
