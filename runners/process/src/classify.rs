//! Exit classification: the one function mapping how a child ended to an [`ExitClass`]
//! (resolutions.md §1, "Exit classification is one function").

use skillforge_runner::ExitClass;

/// Exit code `timeout(1)` uses when its command timed out.
pub const EXIT_TIMED_OUT: i32 = 124;
/// Exit code with which a command, together with a censor marker line on stderr, declares its
/// result unusable.
pub const EXIT_CENSORED: i32 = 125;
/// Shell exit code for "found but not executable".
pub const EXIT_NOT_EXECUTABLE: i32 = 126;
/// Shell exit code for "command not found".
pub const EXIT_NOT_FOUND: i32 = 127;
/// Shells report a child killed by signal `n` as exit code `128 + n`.
const SHELL_SIGNAL_BASE: i32 = 128;
/// Highest signal number (Linux real-time signals end at 64).
const MAX_SIGNAL: i32 = 64;

/// How a run ended, before classification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The child could not be started (program or interpreter missing, not executable).
    NotStarted {
        /// Why, e.g. ``program `foo` not found``.
        reason: String,
    },
    /// The child exited on its own with this code.
    Exited {
        /// The exit code, 0..=255.
        code: i32,
    },
    /// The child was ended by a signal nobody in the runner sent.
    Signalled {
        /// The signal number.
        signal: i32,
    },
    /// Our timeout fired; the group was terminated.
    TimedOut,
    /// The cancellation token fired; the group was terminated.
    Cancelled {
        /// The signal that ended the direct child: 15 (SIGTERM, within the grace) or 9 (SIGKILL).
        signal: i32,
    },
}

/// Classifies how a run ended.
///
/// `is_shell` says exit codes 129..=192 are a shell reporting a child killed by signal
/// `code − 128` (see [`crate::Command::is_shell`]); `has_censor_marker` says a censor marker
/// line (see [`crate::is_censor_line`]) appeared on stderr.
///
/// | ending | class |
/// |---|---|
/// | not started | `NotRunnable` |
/// | exit 0 | `Passed` |
/// | exit 124, or our timeout | `TimedOut` |
/// | exit 125 with the censor marker | `Censored` |
/// | exit 126 / 127 | `NotRunnable` |
/// | exit 129..=192 from a shell | `Killed { signal: code − 128 }` |
/// | killed by a signal | `Killed { signal }` |
/// | cancelled | `Killed { signal: 15 or 9 }` |
/// | any other exit code (including 125 without the marker) | `Failed { code }` |
pub fn classify(ending: &Ending, is_shell: bool, has_censor_marker: bool) -> ExitClass {
    match *ending {
        Ending::NotStarted { ref reason } => ExitClass::NotRunnable {
            reason: reason.clone(),
        },
        Ending::TimedOut => ExitClass::TimedOut,
        Ending::Cancelled { signal } | Ending::Signalled { signal } => ExitClass::Killed { signal },
        Ending::Exited { code: 0 } => ExitClass::Passed,
        Ending::Exited {
            code: EXIT_TIMED_OUT,
        } => ExitClass::TimedOut,
        Ending::Exited {
            code: EXIT_CENSORED,
        } if has_censor_marker => ExitClass::Censored,
        Ending::Exited {
            code: EXIT_NOT_EXECUTABLE,
        } => ExitClass::NotRunnable {
            reason: format!("command not executable (exit {EXIT_NOT_EXECUTABLE})"),
        },
        Ending::Exited {
            code: EXIT_NOT_FOUND,
        } => ExitClass::NotRunnable {
            reason: format!("command not found (exit {EXIT_NOT_FOUND})"),
        },
        Ending::Exited { code }
            if is_shell
                && (SHELL_SIGNAL_BASE + 1..=SHELL_SIGNAL_BASE + MAX_SIGNAL).contains(&code) =>
        {
            ExitClass::Killed {
                signal: code - SHELL_SIGNAL_BASE,
            }
        }
        Ending::Exited { code } => ExitClass::Failed { code },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exited(code: i32) -> Ending {
        Ending::Exited { code }
    }

    fn not_runnable(reason: &str) -> ExitClass {
        ExitClass::NotRunnable {
            reason: reason.to_owned(),
        }
    }

    #[test]
    fn classification_table() {
        let check = |ending: Ending, is_shell: bool, has_marker: bool, expected: ExitClass| {
            assert_eq!(
                classify(&ending, is_shell, has_marker),
                expected,
                "{ending:?} shell={is_shell} marker={has_marker}"
            );
        };
        check(exited(0), false, false, ExitClass::Passed);
        check(exited(0), true, true, ExitClass::Passed);
        check(exited(1), true, false, ExitClass::Failed { code: 1 });
        check(exited(2), false, false, ExitClass::Failed { code: 2 });
        check(exited(124), false, false, ExitClass::TimedOut);
        check(exited(125), true, true, ExitClass::Censored);
        check(exited(125), true, false, ExitClass::Failed { code: 125 });
        check(exited(1), true, true, ExitClass::Failed { code: 1 });
        check(
            exited(126),
            true,
            false,
            not_runnable("command not executable (exit 126)"),
        );
        check(
            exited(127),
            false,
            false,
            not_runnable("command not found (exit 127)"),
        );
        check(exited(128), true, false, ExitClass::Failed { code: 128 });
        check(exited(129), true, false, ExitClass::Killed { signal: 1 });
        check(exited(137), true, false, ExitClass::Killed { signal: 9 });
        check(exited(142), true, false, ExitClass::Killed { signal: 14 });
        check(exited(192), true, false, ExitClass::Killed { signal: 64 });
        check(exited(193), true, false, ExitClass::Failed { code: 193 });
        check(exited(137), false, false, ExitClass::Failed { code: 137 });
        check(exited(255), true, false, ExitClass::Failed { code: 255 });
        check(
            Ending::Signalled { signal: 9 },
            false,
            false,
            ExitClass::Killed { signal: 9 },
        );
        check(
            Ending::Signalled { signal: 11 },
            true,
            true,
            ExitClass::Killed { signal: 11 },
        );
        check(Ending::TimedOut, true, true, ExitClass::TimedOut);
        check(
            Ending::Cancelled { signal: 15 },
            true,
            false,
            ExitClass::Killed { signal: 15 },
        );
        check(
            Ending::Cancelled { signal: 9 },
            false,
            false,
            ExitClass::Killed { signal: 9 },
        );
        check(
            Ending::NotStarted {
                reason: "program `x` not found".into(),
            },
            false,
            false,
            not_runnable("program `x` not found"),
        );
    }
}
