//! `skillforge completions SHELL`: a shell completion script generated from the CLI's own clap
//! tree (clap_complete), so it lists exactly the commands and flags this build has.

use clap::{Args, Command, CommandFactory};
use clap_complete::Shell;

use crate::exit::{CliResult, OK};

/// `skillforge completions SHELL`.
#[derive(Debug, Args)]
#[command(
    after_help = "Install, e.g.:\n  bash: skillforge completions bash > ~/.local/share/bash-completion/completions/skillforge\n  \
zsh:  skillforge completions zsh > ~/.zfunc/_skillforge   (with `fpath+=~/.zfunc` before `compinit`)\n  \
fish: skillforge completions fish > ~/.config/fish/completions/skillforge.fish"
)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Prints the completion script of `args.shell` on stdout.
///
/// # Errors
/// None: clap_complete writes to stdout (a closed stdout ends the process quietly).
pub fn run(args: CompletionsArgs) -> CliResult {
    let mut command = without_hidden(&crate::Cli::command());
    clap_complete::generate(
        args.shell,
        &mut command,
        "skillforge",
        &mut std::io::stdout(),
    );
    Ok(OK)
}

/// `cmd` without its hidden subcommands (the scripted agent's entry point, the docs generator),
/// at every depth: clap_complete would offer them otherwise. Keeps what completion reads: names,
/// arguments, version, and the visible subcommands. (clap's `string` feature names a copy.)
fn without_hidden(cmd: &Command) -> Command {
    let visible = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(without_hidden);
    let mut out = Command::new(cmd.get_name().to_owned())
        .args(cmd.get_arguments().cloned())
        .subcommands(visible);
    if let Some(about) = cmd.get_about() {
        out = out.about(about.clone());
    }
    if let Some(version) = cmd.get_version() {
        out = out.version(version.to_owned());
    }
    out
}
