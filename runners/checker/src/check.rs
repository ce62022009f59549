//! Running a check: every requested dimension over one diff and (for tool dimensions) a head
//! checkout, each normalized to [0,1] or skipped with its reason.
//!
//! Fail-safe per dimension (rules S-35; seed: SkillOpt, "Deterministic checker objective
//! signal"): a missing tool, a tool error, unreadable tool output, no head checkout or a timeout
//! skips that one dimension; the others still score. Tools run one at a time through
//! `skillforge-runner-process` (own process group, killed on timeout or cancel), with the head
//! checkout as working directory.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use skillforge_runner::{CancellationToken, ExitClass};
use skillforge_runner_process::{
    DEFAULT_ENV_ALLOWLIST, ProcessPayload, TRUNCATION_MARKER, run_process,
};

use crate::checker::Checker;
use crate::diff::DiffStats;
use crate::normalize::DiffSizeConfig;
use crate::profile::{DimensionProfile, LanguageProfile, ToolSpec};
use crate::report::{CheckReport, DimensionResult};

/// Cap on captured tool stdout/stderr, bytes (32 MiB): tool reports are parsed whole.
pub const TOOL_MAX_OUTPUT_BYTES: usize = 32 * 1024 * 1024;

/// What to check and with which limits.
#[derive(Debug, Clone)]
pub struct CheckConfig {
    /// Dimensions to measure, in report order.
    pub checkers: Vec<Checker>,
    /// `diff_size` normalization (soft cap and zero point, in changed lines).
    pub diff_size: DiffSizeConfig,
    /// Language profiles for the tool dimensions; normally [`crate::shipped_profiles`].
    pub profiles: Vec<LanguageProfile>,
    /// Budget for the whole check; each tool gets what is left of it. Facts §5: 10 min for
    /// the checker leg.
    pub timeout: Duration,
}

impl CheckConfig {
    /// A config for `checkers` with the shipped profiles, default `diff_size` caps and `timeout`.
    pub fn new(checkers: Vec<Checker>, timeout: Duration) -> Self {
        Self {
            checkers,
            diff_size: DiffSizeConfig::default(),
            profiles: crate::profile::shipped_profiles().to_vec(),
            timeout,
        }
    }
}

/// Where the tool dimensions run.
#[derive(Debug, Clone, Copy)]
pub struct Workspace<'a> {
    /// A working tree at the head commit (tools' working directory); `None` when only diff text
    /// is available, which skips every tool dimension.
    pub checkout: Option<&'a Path>,
    /// A private directory for tool report files (`{out_dir}`), e.g. the job's scratch dir.
    pub work_dir: &'a Path,
}

/// Measures every checker in `config` over `diff`.
///
/// `diff_size` is pure and always scores. Tool dimensions detect the languages of the changed
/// (non-deleted) files, run each language's tools (first alternative that yields a count wins)
/// and score the dimension as the mean over the languages that produced a count; a language
/// whose tools all fail is listed with its reasons in `raw`. A dimension with no language
/// scored is skipped with the reasons joined by `; `.
///
/// On cancel the running tool's process group is killed and this and every later tool
/// dimension is skipped with `cancelled`; on budget expiry likewise with a timeout reason.
/// Never fails: problems become skip reasons.
pub async fn run_checks(
    diff: &DiffStats,
    workspace: Workspace<'_>,
    config: &CheckConfig,
    cancel: &CancellationToken,
) -> CheckReport {
    let deadline = Instant::now() + config.timeout;
    let mut dimensions = Vec::with_capacity(config.checkers.len());
    for &checker in &config.checkers {
        let result = if checker.is_tool_backed() {
            tool_dimension(checker, diff, workspace, &config.profiles, deadline, cancel).await
        } else {
            diff_size_dimension(diff, &config.diff_size)
        };
        tracing::info!(
            checker = checker.name(),
            score = %result
                .score
                .map_or_else(|| "none".to_owned(), |s| format!("{s:.3}")),
            skipped = result.skipped.as_deref().unwrap_or(""),
            "checker dimension measured"
        );
        dimensions.push(result);
    }
    CheckReport::from_dimensions(dimensions)
}

/// The `diff_size` dimension: always scored (rules S-34).
pub fn diff_size_dimension(diff: &DiffStats, config: &DiffSizeConfig) -> DimensionResult {
    let changed_lines = diff.changed_lines();
    DimensionResult::scored(
        Checker::DiffSize,
        config.score(changed_lines),
        json!({
            "changed_lines": changed_lines,
            "added_lines": diff.added_lines(),
            "removed_lines": diff.removed_lines(),
            "changed_files": diff.changed_files(),
            "soft_cap_lines": config.soft_cap_lines,
            "zero_at_lines": config.zero_at_lines,
        }),
    )
}

/// Changed files present at head per profile that matches at least one of them.
pub fn detect_languages<'p>(
    diff: &DiffStats,
    profiles: &'p [LanguageProfile],
) -> Vec<(&'p LanguageProfile, Vec<String>)> {
    profiles
        .iter()
        .filter_map(|profile| {
            let files: Vec<String> = diff
                .head_paths()
                .filter(|p| profile.matches_path(p))
                .map(String::from)
                .collect();
            (!files.is_empty()).then_some((profile, files))
        })
        .collect()
}

async fn tool_dimension(
    checker: Checker,
    diff: &DiffStats,
    workspace: Workspace<'_>,
    profiles: &[LanguageProfile],
    deadline: Instant,
    cancel: &CancellationToken,
) -> DimensionResult {
    if cancel.is_cancelled() {
        return DimensionResult::skipped(checker, "cancelled", Value::Null);
    }
    let Some(checkout) = workspace.checkout else {
        return DimensionResult::skipped(checker, "no head checkout (diff text only)", Value::Null);
    };
    let languages = detect_languages(diff, profiles);
    if languages.is_empty() {
        let known: Vec<&str> = profiles.iter().map(|p| p.language.as_str()).collect();
        return DimensionResult::skipped(
            checker,
            format!(
                "no changed file in a profiled language ({})",
                known.join(", ")
            ),
            Value::Null,
        );
    }
    let mut raw = Map::new();
    let mut scores = Vec::new();
    let mut reasons = Vec::new();
    for (profile, files) in languages {
        let language = profile.language.as_str();
        let Some(dimension) = profile.dimensions.get(&checker) else {
            let reason = format!("the {language} profile has no {checker} tool");
            raw.insert(language.into(), json!({"skipped": reason}));
            reasons.push(format!("{language}: {reason}"));
            continue;
        };
        let out_base = workspace
            .work_dir
            .join("reports")
            .join(format!("{checker}-{language}"));
        match measure(dimension, &files, checkout, &out_base, deadline, cancel).await {
            Ok(Measured {
                tool,
                count,
                locations,
                attempts,
            }) => {
                let score = dimension.normalize.score(count);
                scores.push(score);
                let mut entry = json!({"tool": tool, "count": count, "score": score, "files": files.len(), "failed_attempts": attempts});
                if !locations.is_empty() {
                    entry["locations"] = json!(locations);
                }
                raw.insert(language.into(), entry);
            }
            Err(attempts) => {
                let reason = attempts.join("; ");
                raw.insert(
                    language.into(),
                    json!({"skipped": reason, "files": files.len()}),
                );
                reasons.push(format!("{language}: {reason}"));
            }
        }
    }
    let raw = json!({"languages": raw});
    if scores.is_empty() {
        DimensionResult::skipped(checker, reasons.join("; "), raw)
    } else {
        DimensionResult::scored(
            checker,
            scores.iter().sum::<f64>() / scores.len() as f64,
            raw,
        )
    }
}

struct Measured {
    tool: String,
    count: u64,
    /// The first [`MAX_LOCATIONS`] items' places, files relative to the checkout.
    locations: Vec<crate::count::Location>,
    attempts: Vec<String>,
}

/// Items located per language and dimension at most (annotations, not a full listing).
pub(crate) const MAX_LOCATIONS: usize = 50;

/// Tries `dimension`'s tools in order; `Err` holds one reason per failed attempt.
async fn measure(
    dimension: &DimensionProfile,
    files: &[String],
    checkout: &Path,
    out_base: &Path,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<Measured, Vec<String>> {
    let mut attempts = Vec::new();
    for (tool_idx, tool) in dimension.tools.iter().enumerate() {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            attempts.push(format!(
                "tool `{}` not run: timed out (checker budget spent)",
                tool.name
            ));
            break;
        }
        let out_dir = out_base.join(format!("{tool_idx}-{}", tool.name));
        match run_tool(tool, files, checkout, &out_dir, remaining, cancel).await {
            Ok((count, locations)) => {
                return Ok(Measured {
                    tool: tool.name.clone(),
                    count,
                    locations,
                    attempts,
                });
            }
            Err(ToolFailure { reason, is_final }) => {
                attempts.push(reason);
                if is_final {
                    break;
                }
            }
        }
    }
    Err(attempts)
}

struct ToolFailure {
    reason: String,
    /// Timeout or cancel: trying the next alternative would not help.
    is_final: bool,
}

fn failure(reason: String) -> ToolFailure {
    ToolFailure {
        reason,
        is_final: false,
    }
}

/// `argv` with `{files}` expanded to the files and `{out_dir}` substituted.
pub(crate) fn expand_argv(argv: &[String], files: &[String], out_dir: &Path) -> Vec<String> {
    let out_dir = out_dir.to_string_lossy();
    argv.iter()
        .flat_map(|arg| -> Vec<String> {
            if arg == "{files}" {
                files.to_vec()
            } else {
                vec![arg.replace("{out_dir}", &out_dir)]
            }
        })
        .collect()
}

async fn run_tool(
    tool: &ToolSpec,
    files: &[String],
    checkout: &Path,
    out_dir: &Path,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<(u64, Vec<crate::count::Location>), ToolFailure> {
    let name = &tool.name;
    std::fs::create_dir_all(out_dir).map_err(|e| {
        failure(format!(
            "tool `{name}`: create report dir `{}`: {e}",
            out_dir.display()
        ))
    })?;
    let mut payload = ProcessPayload::argv(expand_argv(&tool.argv, files, out_dir));
    payload.cwd = Some(checkout.to_path_buf());
    payload.max_output_bytes = Some(TOOL_MAX_OUTPUT_BYTES);
    if !tool.inherit_env.is_empty() {
        let mut allow: Vec<String> = DEFAULT_ENV_ALLOWLIST
            .iter()
            .map(|s| s.to_string())
            .collect();
        allow.extend(tool.inherit_env.iter().cloned());
        payload.env_allowlist = Some(allow);
    }
    let outcome = run_process(&payload, timeout, cancel)
        .await
        .map_err(|e| failure(format!("tool `{name}` could not run: {e}")))?;
    let code = match &outcome.exit {
        ExitClass::Passed => 0,
        ExitClass::Failed { code } => *code,
        ExitClass::NotRunnable { reason } => {
            return Err(failure(format!("tool `{name}` not runnable: {reason}")));
        }
        ExitClass::TimedOut => {
            return Err(ToolFailure {
                reason: format!("tool `{name}` timed out after {} s", timeout.as_secs()),
                is_final: true,
            });
        }
        ExitClass::Killed { .. } if cancel.is_cancelled() => {
            return Err(ToolFailure {
                reason: format!("tool `{name}` cancelled"),
                is_final: true,
            });
        }
        ExitClass::Killed { signal } => {
            return Err(failure(format!("tool `{name}` killed by signal {signal}")));
        }
        ExitClass::Censored => {
            return Err(failure(format!("tool `{name}` censored its own result")));
        }
    };
    if !tool.ok_exit_codes.contains(&code) {
        let stderr = last_line(&outcome.stderr_tail);
        return Err(failure(format!(
            "tool `{name}` failed with exit code {code}: {stderr}"
        )));
    }
    let output = match &tool.report_file {
        Some(report) => {
            let path = resolve_report(
                checkout,
                &report.replace("{out_dir}", &out_dir.to_string_lossy()),
            );
            std::fs::read_to_string(&path).map_err(|e| {
                failure(format!(
                    "tool `{name}`: read report `{}`: {e}",
                    path.display()
                ))
            })?
        }
        None if outcome.stdout_tail.starts_with(TRUNCATION_MARKER) => {
            return Err(failure(format!(
                "tool `{name}` output exceeded {TOOL_MAX_OUTPUT_BYTES} bytes"
            )));
        }
        None => outcome.stdout_tail,
    };
    let count = tool
        .count
        .count(&output)
        .map_err(|e| failure(format!("tool `{name}`: {e}")))?;
    let locations = match &tool.locate {
        Some(locate) => tool
            .count
            .locate(&output, locate, MAX_LOCATIONS)
            .into_iter()
            .map(|mut l| {
                // Tools print absolute paths inside the worker's checkout: the annotation wants
                // the repository's path.
                if let Ok(rel) = Path::new(&l.file).strip_prefix(checkout) {
                    l.file = rel.to_string_lossy().into_owned();
                }
                l
            })
            // One place once: clippy reports a lint of shared code for each target it builds.
            .fold(Vec::new(), |mut seen: Vec<crate::count::Location>, l| {
                if !seen.contains(&l) {
                    seen.push(l);
                }
                seen
            }),
        None => Vec::new(),
    };
    Ok((count, locations))
}

fn resolve_report(checkout: &Path, report: &str) -> PathBuf {
    let path = Path::new(report);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        checkout.join(path)
    }
}

/// Last non-empty line of `text`, at most 200 characters, for skip reasons.
fn last_line(text: &str) -> String {
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("(no stderr)")
        .trim();
    line.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_placeholders_expand() {
        let argv: Vec<String> = [
            "jscpd",
            "--output",
            "{out_dir}",
            "{files}",
            "--x={out_dir}/r.json",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let files = vec!["a.js".to_string(), "b c.ts".to_string()];
        assert_eq!(
            expand_argv(&argv, &files, Path::new("/tmp/o")),
            [
                "jscpd",
                "--output",
                "/tmp/o",
                "a.js",
                "b c.ts",
                "--x=/tmp/o/r.json"
            ]
        );
    }

    #[test]
    fn detects_languages_from_changed_head_files() {
        let diff = crate::parse_unified_diff(
            "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-a\n+b\n--- a/gone.go\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n--- a/web/x.tsx\n+++ b/web/x.tsx\n@@ -1 +1 @@\n-a\n+b\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-a\n+b\n",
        )
        .unwrap();
        let detected: Vec<(String, Vec<String>)> =
            detect_languages(&diff, crate::shipped_profiles())
                .into_iter()
                .map(|(p, files)| (p.language.clone(), files))
                .collect();
        assert_eq!(
            detected,
            [
                ("python".to_string(), vec!["a.py".to_string()]),
                ("javascript".to_string(), vec!["web/x.tsx".to_string()])
            ]
        );
    }
}
