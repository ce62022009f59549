//! Which agent runtime an experiment worker gets: Codex delegation only outside a Codex sandbox
//! and with a writable `.git`, and the Codex failure cascade (seed: optimize-loop, loop.md 3.2
//! "Codex delegation condition", 3.7 "Codex failure cascade"; O-21, O-63).
//!
//! The seed's "subagent" fallback is `execution.fallback_runtime` here.

use serde::{Deserialize, Serialize};

/// The runtime profile name of Codex.
pub const CODEX: &str = "codex";
/// Consecutive Codex failures after which Codex is disabled for the rest of the run.
pub const CASCADE_AFTER: u32 = 3;

/// Delegation state kept in `run_state`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Delegation {
    /// Consecutive failed Codex worker jobs.
    #[serde(default)]
    pub codex_failures: u32,
    /// Codex is off for the rest of the run.
    #[serde(default)]
    pub codex_disabled: bool,
}

/// What the host looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Host {
    /// `CODEX_SANDBOX` or `CODEX_SESSION_ID` is set.
    pub in_codex_sandbox: bool,
    /// The repository's `.git` is writable.
    pub git_writable: bool,
}

impl Host {
    /// Reads the environment and `.git` of `repo`.
    pub fn detect(repo: &std::path::Path) -> Self {
        let set = |k: &str| std::env::var(k).is_ok_and(|v| !v.is_empty());
        let git = repo.join(".git");
        let git_writable = std::fs::metadata(&git).is_ok_and(|m| !m.permissions().readonly());
        Self {
            in_codex_sandbox: set("CODEX_SANDBOX") || set("CODEX_SESSION_ID"),
            git_writable,
        }
    }
}

/// The runtime for the next worker, and a note to log when it falls back.
pub fn runtime_for(
    wanted: &str,
    fallback: &str,
    host: Host,
    state: &Delegation,
) -> (String, Option<String>) {
    if wanted != CODEX {
        return (wanted.to_owned(), None);
    }
    if state.codex_disabled {
        return (fallback.to_owned(), None);
    }
    if host.in_codex_sandbox || !host.git_writable {
        let why = if host.in_codex_sandbox {
            "inside a Codex sandbox (CODEX_SANDBOX/CODEX_SESSION_ID set)"
        } else {
            ".git is not writable"
        };
        return (
            fallback.to_owned(),
            Some(format!(
                "codex delegation skipped: {why}; using `{fallback}` for this experiment"
            )),
        );
    }
    (CODEX.to_owned(), None)
}

/// What to say when a run starts whose workers will not be Codex although the spec asks for it
/// (issue 38 item 8: said up front, not only in the report): `None` when `wanted` is not Codex
/// or Codex will run.
pub fn startup_note(
    wanted: &str,
    fallback: &str,
    host: Host,
    state: &Delegation,
) -> Option<String> {
    if wanted != CODEX {
        return None;
    }
    let why = if state.codex_disabled {
        format!("it was disabled earlier in this run after {CASCADE_AFTER} consecutive failures")
    } else if host.in_codex_sandbox {
        "this run is inside a Codex sandbox (CODEX_SANDBOX/CODEX_SESSION_ID set)".to_owned()
    } else if !host.git_writable {
        "the repository's .git is not writable".to_owned()
    } else {
        return None;
    };
    Some(format!(
        "execution.runtime is codex, but {why}: experiment workers run on `{fallback}` (execution.fallback_runtime)"
    ))
}

/// Records a Codex worker's result; returns the log note when the cascade disables Codex.
pub fn record(state: &mut Delegation, runtime: &str, ok: bool, fallback: &str) -> Option<String> {
    if runtime != CODEX {
        return None;
    }
    if ok {
        state.codex_failures = 0;
        return None;
    }
    state.codex_failures += 1;
    if state.codex_failures >= CASCADE_AFTER && !state.codex_disabled {
        state.codex_disabled = true;
        return Some(format!(
            "codex disabled after {CASCADE_AFTER} consecutive delegation failures; workers use `{fallback}` for the rest of the run"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK_HOST: Host = Host {
        in_codex_sandbox: false,
        git_writable: true,
    };

    // O-21
    #[test]
    fn o21_codex_only_outside_a_sandbox_with_writable_git() {
        let s = Delegation::default();
        assert_eq!(
            runtime_for("codex", "claude", OK_HOST, &s),
            ("codex".into(), None)
        );
        let (rt, note) = runtime_for(
            "codex",
            "claude",
            Host {
                in_codex_sandbox: true,
                git_writable: true,
            },
            &s,
        );
        assert_eq!(rt, "claude");
        assert!(note.unwrap().contains("Codex sandbox"));
        let (rt, note) = runtime_for(
            "codex",
            "claude",
            Host {
                in_codex_sandbox: false,
                git_writable: false,
            },
            &s,
        );
        assert_eq!(rt, "claude");
        assert!(note.unwrap().contains(".git is not writable"));
        assert_eq!(
            runtime_for(
                "scripted",
                "claude",
                Host {
                    in_codex_sandbox: true,
                    git_writable: false
                },
                &s
            ),
            ("scripted".into(), None)
        );
    }

    // issue 38 item 8
    #[test]
    fn the_fallback_is_announced_at_start_only_when_codex_will_not_run() {
        let s = Delegation::default();
        assert_eq!(startup_note("codex", "claude", OK_HOST, &s), None);
        assert_eq!(
            startup_note(
                "claude",
                "claude",
                Host {
                    in_codex_sandbox: true,
                    git_writable: true
                },
                &s
            ),
            None
        );
        let note = startup_note(
            "codex",
            "opencode",
            Host {
                in_codex_sandbox: true,
                git_writable: true,
            },
            &s,
        )
        .unwrap();
        assert!(
            note.contains("inside a Codex sandbox") && note.contains("`opencode`"),
            "{note}"
        );
        let off = Delegation {
            codex_failures: 3,
            codex_disabled: true,
        };
        assert!(
            startup_note("codex", "claude", OK_HOST, &off)
                .unwrap()
                .contains("disabled earlier")
        );
    }

    // O-63
    #[test]
    fn o63_three_consecutive_codex_failures_disable_codex() {
        let mut s = Delegation::default();
        assert_eq!(record(&mut s, "codex", false, "claude"), None);
        assert_eq!(
            record(&mut s, "codex", true, "claude"),
            None,
            "a success resets the count"
        );
        assert_eq!(record(&mut s, "codex", false, "claude"), None);
        assert_eq!(record(&mut s, "codex", false, "claude"), None);
        let note = record(&mut s, "codex", false, "claude").expect("third consecutive failure");
        assert!(note.contains("codex disabled"), "{note}");
        assert_eq!(
            runtime_for("codex", "claude", OK_HOST, &s).0,
            "claude",
            "the 4th goes to the fallback"
        );
    }
}
