//! CI-native output of `verify`, `check` and `eval forge` (issue 36 item 4).
//!
//! Each of the three commands takes [`CiArgs`]: `--junit FILE` writes a JUnit XML report
//! ([`junit`]) and `--format github` prints GitHub Actions workflow commands and appends a
//! Markdown job summary to `$GITHUB_STEP_SUMMARY` ([`github`]). A command turns its report into a
//! [`Suite`] (one [`Case`] per verify command, checker dimension or eval sample: [`verify`],
//! [`check`], [`forge`]) and hands it, or the error that stopped it, to [`CiRun::finish`].
//!
//! **API Boundary:** the report files and annotations never change the exit code: a failing
//! verify still exits 1, with its report written. Only a report that cannot be written is an
//! error of its own (exit 3). `--format github` conflicts with `--json`; `--junit` works with
//! either (JSON on stdout, XML in the file).

pub mod check;
pub mod forge;
mod github;
mod junit;
mod suite;
pub mod verify;

use std::path::PathBuf;

use anyhow::anyhow;
use clap::{Args, ValueEnum};

pub use suite::{Case, Outcome, Suite};

use crate::exit::{CliError, CliResult, ENVIRONMENT, USAGE};

/// The environment variable naming the job summary file GitHub Actions renders.
pub const STEP_SUMMARY_ENV: &str = "GITHUB_STEP_SUMMARY";

/// `--format` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Text for a person.
    Human,
    /// GitHub Actions workflow commands and a job summary.
    Github,
}

/// The CI flags of `verify`, `check` and `eval forge`.
#[derive(Debug, Clone, Args)]
pub struct CiArgs {
    /// Also write a JUnit XML report to FILE (one testcase per verify command, checker dimension or eval sample, with failure messages and output tails); written atomically, also when the run fails; the exit code does not change.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Output format: `github` prints the report in a folded log group, then a GitHub Actions annotation (`::error`, `::warning`) per case that did not pass, and appends a Markdown job summary to `$GITHUB_STEP_SUMMARY` when it is set; not with `--json`.
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = Format::Human, conflicts_with = "json")]
    pub format: Format,
}

/// What a command that ran hands to [`CiRun::finish`]: its exit code and its suite.
#[derive(Debug)]
pub struct Finished {
    /// The command's exit code (0 pass, 1 failed, 3 could not run).
    pub code: u8,
    /// Its report as a suite.
    pub suite: Suite,
}

/// One command's CI output from start to finish: opens the log group on start, writes the
/// report files and annotations on finish.
#[derive(Debug)]
pub struct CiRun {
    args: CiArgs,
    /// `verify`, `check`, `eval forge`: the suite name when the command stopped with an error.
    command: &'static str,
    /// RFC 3339 start time, the JUnit `timestamp`.
    started: String,
    /// The `::stop-commands::` token while the human output is paused (`--format github`).
    stop_token: Option<String>,
}

impl CiRun {
    /// Starts `command`'s CI output. With `--format github` this prints `::group::` and
    /// `::stop-commands::TOKEN`: what the command prints until [`CiRun::finish`] (which quotes
    /// the repository's own output) is folded and never read as a workflow command.
    ///
    /// # Errors
    /// Exit 2 for `--format github` with `--json` (`is_json`). Clap refuses the pair when
    /// `--json` follows the command; given before it, the global flag is not in the command's
    /// own matches, so it is checked here.
    pub fn start(args: CiArgs, command: &'static str, is_json: bool) -> Result<Self, CliError> {
        if is_json && args.format == Format::Github {
            return Err(CliError::usage(anyhow!(
                "the argument '--json' cannot be used with '--format github'"
            )));
        }
        let started = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let stop_token = (args.format == Format::Github).then(|| {
            let token = github::stop_token();
            println!(
                "{}",
                github::command("group", &[], &format!("skillforge {command}"))
            );
            println!("{}", github::command("stop-commands", &[], &token));
            token
        });
        Ok(Self {
            args,
            command,
            started,
            stop_token,
        })
    }

    /// Ends the run with the command's `result`: resumes workflow commands and closes the group,
    /// prints one annotation per case that has one, appends the job summary, and writes the JUnit
    /// report. A command that stopped with an error gets a suite of one errored case carrying
    /// its message. Returns `result`'s exit code or error unchanged.
    ///
    /// # Errors
    /// `result`'s error; exit 3 when the JUnit report or the step summary cannot be written.
    pub fn finish(self, result: Result<Finished, CliError>) -> CliResult {
        let (suite, result) = match result {
            Ok(Finished { code, suite }) => (suite, Ok(code)),
            Err(e) => (self.error_suite(&e), Err(e)),
        };
        let mut trouble = Vec::new();
        if let Some(token) = &self.stop_token {
            println!("::{token}::");
            println!("::endgroup::");
            for case in &suite.cases {
                for a in case.annotation.iter().chain(&case.located) {
                    println!("{}", github::annotation(a));
                }
            }
            if let Some(path) = std::env::var_os(STEP_SUMMARY_ENV).filter(|p| !p.is_empty())
                && let Err(e) =
                    github::append_summary(PathBuf::from(path).as_path(), &github::summary(&suite))
            {
                trouble.push(e);
            }
        }
        if let Some(path) = &self.args.junit
            && let Err(e) = junit::write(path, &suite, &self.started)
        {
            trouble.push(e);
        }
        match (trouble.is_empty(), result) {
            (true, result) => result,
            (false, Err(e)) => {
                for t in &trouble {
                    eprintln!("error: {t:#}");
                }
                Err(e)
            }
            (false, Ok(_)) => {
                let message = trouble
                    .iter()
                    .map(|t| format!("{t:#}"))
                    .collect::<Vec<_>>()
                    .join("; ");
                Err(CliError::env(anyhow!(message)))
            }
        }
    }

    /// The suite of a command that stopped with `error` before it had a report.
    fn error_suite(&self, error: &CliError) -> Suite {
        let kind = match error.code {
            USAGE => "usage",
            ENVIRONMENT => "environment",
            _ => "error",
        };
        let message = crate::control::redact::redact(&format!("{:#}", error.error));
        let mut suite = Suite::new(format!("skillforge {}", self.command));
        suite.property("exit_code", error.code.to_string());
        let outcome = Outcome::Errored {
            kind: kind.to_owned(),
            message: message.clone(),
            detail: message,
        };
        suite.cases.push(Case::new(
            &format!("skillforge.{}", self.command.replace(' ', ".")),
            self.command,
            outcome,
        ));
        suite
    }
}
