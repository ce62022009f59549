//! The `skillforge` command-line interface.

fn main() {}
