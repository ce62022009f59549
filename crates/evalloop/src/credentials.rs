//! Credential preflight for arms (seed: skill-eval-loop, "Optional: run the arms in containers":
//! tokens come from a subscription; E-11, E-12): an expired or unreadable credential stops the
//! run before any arm starts, rather than resurfacing as a task failure that reads like the
//! skill's fault. Credential files are only ever read. Credentials reach an arm through its
//! environment (the runtime profile's `credential_env`), never argv.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use skillforge_contract::limits::LimitError;

/// Why a runtime has no usable credential: what is missing or expired and how to fix it, naming
/// the file read.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// No Claude token in the environment and no readable credentials file.
    #[error("no Claude credential: no token in the environment and `{}` is unreadable ({source}): {}", path.display(), help("claude"))]
    NoClaudeCredential {
        /// `~/.claude/.credentials.json`.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The credentials file holds no `claudeAiOauth` object.
    #[error("`{}` holds no claudeAiOauth token: {}", .0.display(), help("claude"))]
    NoOauth(PathBuf),
    /// The `claudeAiOauth` object holds no access token.
    #[error("`{}` holds no access token: {}", .0.display(), help("claude"))]
    NoAccessToken(PathBuf),
    /// The Claude token's `expiresAt` has passed.
    #[error("the Claude token in `{}` expired; an expired token is no token: {}", .0.display(), help("claude"))]
    Expired(PathBuf),
    /// `CODEX_FORCE_AUTH_JSON=0` without a key.
    #[error(
        "CODEX_FORCE_AUTH_JSON=0 but neither OPENAI_API_KEY nor CODEX_API_KEY is set: {}",
        help("codex")
    )]
    NoCodexKey,
    /// Codex's `auth.json` cannot be read (and the key is never a quiet fallback).
    #[error("no Codex login: `{}` is unreadable ({source}), and a key is not used in its place unless asked for: {}", path.display(), help("codex"))]
    NoCodexLogin {
        /// `$CODEX_HOME/auth.json`.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// No Codex login, while a key is set that the forge does not use unless asked to.
    #[error("no Codex login: `{}` is unreadable ({source}); {key} is set but not used in place of a login: set CODEX_FORCE_AUTH_JSON=0 to use it, or run `codex login`", path.display())]
    CodexKeyNotChosen {
        /// `$CODEX_HOME/auth.json`.
        path: PathBuf,
        /// The variable that holds a key (`OPENAI_API_KEY` or `CODEX_API_KEY`).
        key: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A credentials file is over the parser limits.
    #[error("`{}` {source}", path.display())]
    Limits {
        /// The file.
        path: PathBuf,
        /// The limit crossed.
        #[source]
        source: LimitError,
    },
    /// A credentials file is not JSON.
    #[error("`{}` is not JSON: {source}", path.display())]
    NotJson {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
}

/// How to give `runtime` credentials: the runtime profile's one wording
/// ([`skillforge_runner_agent::profile::credential_help`]).
fn help(runtime: &str) -> String {
    skillforge_runner_agent::profile::credential_help(runtime)
}

/// Checks that `runtime` has a usable credential, given the worker's environment `env` and the
/// user's home `home`.
///
/// * `claude`: an `ANTHROPIC_API_KEY` / `CLAUDE_CODE_OAUTH_TOKEN` / `ANTHROPIC_AUTH_TOKEN` in the
///   environment, or `CLAUDE_CODE_USE_BEDROCK=1` / `CLAUDE_CODE_USE_VERTEX=1`, else
///   `.credentials.json` in `$CLAUDE_CONFIG_DIR` (default `~/.claude`): its
///   `claudeAiOauth.accessToken`, refused when `expiresAt` (ms) has passed — an expired token is
///   no token.
/// * `codex`: with `CODEX_FORCE_AUTH_JSON` unset or truthy, `$CODEX_HOME/auth.json` (default
///   `~/.codex/auth.json`) must be
///   readable JSON, whatever `OPENAI_API_KEY` says (no quiet fallback to a billed key);
///   `CODEX_FORCE_AUTH_JSON=0` chooses the key deliberately.
/// * other runtimes: nothing to check.
///
/// # Errors
/// [`CredentialError`]: what is missing or expired and how to fix it.
pub fn preflight(
    runtime: &str,
    env: &BTreeMap<String, String>,
    home: &Path,
    now_ms: i64,
) -> Result<(), CredentialError> {
    let set = |k: &str| env.get(k).is_some_and(|v| !v.trim().is_empty());
    match runtime {
        "claude" => {
            // A key or token in the environment, or a cloud provider whose own credentials
            // Claude Code uses (Bedrock, Vertex): nothing of Claude's to read.
            if set("ANTHROPIC_API_KEY")
                || set("CLAUDE_CODE_OAUTH_TOKEN")
                || set("ANTHROPIC_AUTH_TOKEN")
                || env
                    .get("CLAUDE_CODE_USE_BEDROCK")
                    .is_some_and(|v| v.trim() == "1")
                || env
                    .get("CLAUDE_CODE_USE_VERTEX")
                    .is_some_and(|v| v.trim() == "1")
            {
                return Ok(());
            }
            // Claude Code keeps its login in `$CLAUDE_CONFIG_DIR` when set, else `~/.claude`.
            let config_dir = env
                .get("CLAUDE_CONFIG_DIR")
                .filter(|v| !v.trim().is_empty())
                .map_or_else(|| home.join(".claude"), PathBuf::from);
            let path = config_dir.join(".credentials.json");
            let text = std::fs::read_to_string(&path).map_err(|source| {
                CredentialError::NoClaudeCredential {
                    path: path.clone(),
                    source,
                }
            })?;
            let value = parse_json(&path, &text)?;
            let oauth = value
                .get("claudeAiOauth")
                .ok_or_else(|| CredentialError::NoOauth(path.clone()))?;
            if oauth
                .get("accessToken")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                return Err(CredentialError::NoAccessToken(path));
            }
            match oauth.get("expiresAt").and_then(Value::as_i64) {
                Some(exp) if exp <= now_ms => Err(CredentialError::Expired(path)),
                _ => Ok(()),
            }
        }
        "codex" => {
            if env
                .get("CODEX_FORCE_AUTH_JSON")
                .is_some_and(|v| v.trim() == "0")
            {
                return if set("OPENAI_API_KEY") || set("CODEX_API_KEY") {
                    Ok(())
                } else {
                    Err(CredentialError::NoCodexKey)
                };
            }
            // Issue 31 item 8: the login lives where Codex keeps it, `$CODEX_HOME` (default
            // `~/.codex`).
            let codex_home = env
                .get("CODEX_HOME")
                .filter(|v| !v.trim().is_empty())
                .map_or_else(|| home.join(".codex"), std::path::PathBuf::from);
            let path = codex_home.join("auth.json");
            let key = ["OPENAI_API_KEY", "CODEX_API_KEY"]
                .into_iter()
                .find(|k| set(k));
            let text = std::fs::read_to_string(&path).map_err(|source| match key {
                Some(key) => CredentialError::CodexKeyNotChosen {
                    path: path.clone(),
                    key,
                    source,
                },
                None => CredentialError::NoCodexLogin {
                    path: path.clone(),
                    source,
                },
            })?;
            parse_json(&path, &text).map(|_| ())
        }
        _ => Ok(()),
    }
}

/// A credential file's JSON, over the parser limits refused first (`contract::limits`).
fn parse_json(path: &Path, text: &str) -> Result<Value, CredentialError> {
    skillforge_contract::limits::check_json(text).map_err(|source| CredentialError::Limits {
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_str(text).map_err(|source| CredentialError::NotJson {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    // E-12: Claude's login is read where Claude Code keeps it (`$CLAUDE_CONFIG_DIR` when set), and
    // a cloud provider's own credentials (Bedrock, Vertex) are not refused.
    #[test]
    fn e12_claude_login_is_read_from_its_config_dir_and_cloud_providers_pass() {
        let home = tempfile::tempdir().unwrap();
        let config = home.path().join("claude-config");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::write(
            config.join(".credentials.json"),
            r#"{"claudeAiOauth":{"accessToken":"sk-ant-oat","expiresAt":9000}}"#,
        )
        .unwrap();
        let dir = config.display().to_string();
        assert!(preflight("claude", &env(&[]), home.path(), 0).is_err());
        assert!(
            preflight(
                "claude",
                &env(&[("CLAUDE_CONFIG_DIR", &dir)]),
                home.path(),
                0
            )
            .is_ok()
        );
        assert!(
            preflight(
                "claude",
                &env(&[("CLAUDE_CODE_USE_BEDROCK", "1")]),
                home.path(),
                0
            )
            .is_ok()
        );
        assert!(
            preflight(
                "claude",
                &env(&[("CLAUDE_CODE_USE_VERTEX", "1")]),
                home.path(),
                0
            )
            .is_ok()
        );
    }

    // E-12
    #[test]
    fn e12_expired_is_no_token_and_codex_never_falls_back_quietly() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".claude")).unwrap();
        let creds = home.path().join(".claude/.credentials.json");
        std::fs::write(
            &creds,
            r#"{"claudeAiOauth":{"accessToken":"sk-ant-oat","expiresAt":1000}}"#,
        )
        .unwrap();
        let e = preflight("claude", &env(&[]), home.path(), 2000)
            .unwrap_err()
            .to_string();
        assert!(e.contains("expired"), "{e}");
        assert!(preflight("claude", &env(&[]), home.path(), 500).is_ok());
        assert!(
            preflight(
                "claude",
                &env(&[("CLAUDE_CODE_OAUTH_TOKEN", "t")]),
                home.path(),
                2000
            )
            .is_ok()
        );
        let e = preflight("codex", &env(&[("OPENAI_API_KEY", "sk")]), home.path(), 0)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("auth.json")
                && e.contains("OPENAI_API_KEY is set but not used in place of a login")
                && e.contains("CODEX_FORCE_AUTH_JSON=0")
                && e.contains("codex login"),
            "{e}"
        );
        assert!(
            preflight(
                "codex",
                &env(&[("OPENAI_API_KEY", "sk"), ("CODEX_FORCE_AUTH_JSON", "0")]),
                home.path(),
                0
            )
            .is_ok()
        );
        assert!(preflight("scripted", &env(&[]), home.path(), 0).is_ok());
    }

    // E-11
    #[test]
    fn e11_credentials_file_is_only_read() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".claude")).unwrap();
        let creds = home.path().join(".claude/.credentials.json");
        std::fs::write(
            &creds,
            r#"{"claudeAiOauth":{"accessToken":"sk-ant-oat","expiresAt":99999999999999}}"#,
        )
        .unwrap();
        let before = std::fs::metadata(&creds).unwrap().modified().unwrap();
        let bytes = std::fs::read(&creds).unwrap();
        preflight("claude", &env(&[]), home.path(), 0).unwrap();
        assert_eq!(
            std::fs::metadata(&creds).unwrap().modified().unwrap(),
            before
        );
        assert_eq!(std::fs::read(&creds).unwrap(), bytes);
    }

    // Issue 12 item 7: credential files over the parser limits are refused, naming the file.
    #[test]
    fn deeply_nested_credential_files_are_refused_naming_them() {
        let home = tempfile::tempdir().unwrap();
        for (dir, file, runtime) in [
            (".claude", ".credentials.json", "claude"),
            (".codex", "auth.json", "codex"),
        ] {
            std::fs::create_dir_all(home.path().join(dir)).unwrap();
            std::fs::write(home.path().join(dir).join(file), "[".repeat(100_000)).unwrap();
            let e = preflight(runtime, &env(&[]), home.path(), 0)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(file) && e.contains("64 levels"),
                "{runtime}: {e}"
            );
        }
    }

    // Issue 31 item 8: the Codex login is looked for under $CODEX_HOME when it is set.
    #[test]
    fn e12_codex_login_is_read_from_codex_home() {
        let home = tempfile::tempdir().unwrap();
        let codex_home = tempfile::tempdir().unwrap();
        std::fs::write(codex_home.path().join("auth.json"), r#"{"tokens":{}}"#).unwrap();
        let at = codex_home.path().display().to_string();
        assert!(
            preflight(
                "codex",
                &env(&[("CODEX_HOME", at.as_str())]),
                home.path(),
                0
            )
            .is_ok()
        );
        let e = preflight("codex", &env(&[]), home.path(), 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains(".codex/auth.json"), "{e}");
    }
}
