//! `skillforge-agent-scripted`: the scripted agent as a stand-alone program (the same code as
//! the hidden `skillforge agent-scripted` subcommand). Reads the prompt on stdin and writes the
//! transcript on stdout; see `skillforge_runner_agent::scripted_main`.

use std::process::ExitCode;

fn main() -> ExitCode {
    skillforge_runner_agent::scripted_main(std::env::args().skip(1))
}
