//! Turning a profile and a payload into one process run: program, argv, working directory,
//! environment and stdin. Pure: nothing is written or started here.

use std::path::{Path, PathBuf};

use skillforge_runner_process::{DEFAULT_ENV_ALLOWLIST, ProcessPayload};

use crate::AgentError;
use crate::payload::AgentPayload;
use crate::profile::{PromptDelivery, RuntimeProfile, SKILLFORGE_BIN_PLACEHOLDER};

/// Cap on captured transcript (stdout) bytes per run: 16 MiB. Beyond it the transcript keeps its
/// last 16 MiB and the report counts the dropped bytes.
pub const TRANSCRIPT_MAX_BYTES: usize = 16 * 1024 * 1024;
/// File name of the prompt in the attempt's scratch dir for `prompt = "file"` runtimes.
pub const PROMPT_FILE_NAME: &str = "prompt.md";
/// Environment variable that overrides where `{skillforge_bin}` points (default: the current
/// executable).
pub const SKILLFORGE_BIN_ENV: &str = "SKILLFORGE_BIN";

/// One planned agent run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// What the process runner runs: argv, cwd, env, allowlist, stdin, output cap.
    pub process: ProcessPayload,
    /// Where the prompt must be written before the run (file delivery only).
    pub prompt_file: Option<PathBuf>,
}

/// The program to run for `profile`: `override_program` when given, else the profile's program,
/// with [`SKILLFORGE_BIN_PLACEHOLDER`] resolved by `skillforge_bin`.
///
/// # Errors
/// [`AgentError::SkillforgeBin`] when `skillforge_bin` fails.
pub fn resolve_program(
    profile: &RuntimeProfile,
    override_program: Option<&Path>,
    skillforge_bin: impl FnOnce() -> std::io::Result<PathBuf>,
) -> Result<String, AgentError> {
    if let Some(program) = override_program {
        return Ok(program.to_string_lossy().into_owned());
    }
    if profile.program != SKILLFORGE_BIN_PLACEHOLDER {
        return Ok(profile.program.clone());
    }
    skillforge_bin()
        .map(|path| path.to_string_lossy().into_owned())
        .map_err(|source| AgentError::SkillforgeBin {
            runtime: profile.name.clone(),
            source,
        })
}

/// Plans the run of `payload` on `profile` with `program` (from [`resolve_program`]).
///
/// argv is `program`, the profile's `args`, its `project_scope_args` when the payload sets
/// `project_scope_only`, its `model_args` when the payload names a model, then the `[access]`
/// arguments of the payload's `access` (their variables join the child's env), with
/// placeholders filled: `{prompt_file}` = `scratch_dir/prompt.md`, `{workdir}` =
/// the payload's workdir or `scratch_dir`, `{scratch_dir}`, `{model}`. The prompt text is never
/// placed in argv: it goes to stdin, or to `prompt_file` for the caller to write. The child's
/// environment is the process runner's default allowlist plus the profile's `credential_env`
/// and `pass_env` names (inherited from the worker when set there), plus the payload's `env`.
/// The working directory is the workdir; stdout (the transcript) is capped at
/// [`TRANSCRIPT_MAX_BYTES`].
///
/// # Errors
/// [`AgentError::InvalidPayload`] for a relative workdir, an empty or multi-line model name, or
/// a path that is not UTF-8.
pub fn build_invocation(
    profile: &RuntimeProfile,
    payload: &AgentPayload,
    scratch_dir: &Path,
    program: &str,
) -> Result<Invocation, AgentError> {
    let invalid = |message: String| AgentError::InvalidPayload {
        runtime: profile.name.clone(),
        message,
    };
    let workdir = match &payload.workdir {
        Some(dir) if !dir.is_absolute() => {
            return Err(invalid(format!(
                "workdir `{}` is not absolute",
                dir.display()
            )));
        }
        Some(dir) => dir.clone(),
        None => scratch_dir.to_path_buf(),
    };
    if let Some(model) = &payload.model
        && (model.trim().is_empty() || model.contains('\n'))
    {
        return Err(invalid(format!("model `{model}` is empty or spans lines")));
    }
    let utf8 = |path: &Path| -> Result<String, AgentError> {
        path.to_str()
            .map(str::to_string)
            .ok_or_else(|| invalid(format!("path `{}` is not UTF-8", path.display())))
    };
    let prompt_file =
        (profile.prompt == PromptDelivery::File).then(|| scratch_dir.join(PROMPT_FILE_NAME));
    let prompt_file_text = prompt_file
        .as_deref()
        .map(utf8)
        .transpose()?
        .unwrap_or_default();
    let workdir_text = utf8(&workdir)?;
    let scratch_text = utf8(scratch_dir)?;
    let fill = |arg: &str| {
        arg.replace("{prompt_file}", &prompt_file_text)
            .replace("{workdir}", &workdir_text)
            .replace("{scratch_dir}", &scratch_text)
    };
    let mut argv = vec![program.to_string()];
    argv.extend(profile.args.iter().map(|arg| fill(arg)));
    if payload.project_scope_only {
        argv.extend(profile.project_scope_args.iter().cloned());
    }
    // `{configured}`: the model the runtime's user configured, so no model argument
    if let Some(model) = payload
        .model
        .as_deref()
        .filter(|m| *m != crate::profile::CONFIGURED_MODEL)
    {
        argv.extend(
            profile
                .model_args
                .iter()
                .map(|arg| arg.replace("{model}", model)),
        );
    }
    let access = profile.access.of(payload.access);
    let checkout = workdir.join(".git").is_dir();
    argv.extend(
        access
            .args
            .iter()
            .chain(access.checkout_args.iter().filter(|_| checkout))
            .map(|arg| {
                arg.replace("{workdir}", &workdir_text)
                    .replace("{scratch_dir}", &scratch_text)
            }),
    );
    let mut env_allowlist: Vec<String> = DEFAULT_ENV_ALLOWLIST
        .iter()
        .map(|name| name.to_string())
        .collect();
    for name in profile.credential_env.iter().chain(&profile.pass_env) {
        if !env_allowlist.contains(name) {
            env_allowlist.push(name.clone());
        }
    }
    let mut process = ProcessPayload::argv(argv);
    process.cwd = Some(workdir);
    process.env = payload.env.clone();
    for (name, value) in access.env.iter().chain(&profile.env) {
        process
            .env
            .entry(name.clone())
            .or_insert_with(|| value.replace("{workdir}", &workdir_text));
    }
    process.env_allowlist = Some(env_allowlist);
    process.stdin = match profile.prompt {
        PromptDelivery::Stdin => Some(payload.prompt.clone()),
        PromptDelivery::File => None,
    };
    process.max_output_bytes = Some(TRANSCRIPT_MAX_BYTES);
    Ok(Invocation {
        process,
        prompt_file,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    const CLAUDE_GIT_TOOLS: &str = "Bash(git init:*) Bash(git add:*) Bash(git commit:*) Bash(git status:*) Bash(git diff:*) Bash(git log:*) Bash(git show:*)";

    use skillforge_runner_process::Command;

    use super::*;
    use crate::profile::{Access, all, find};

    const PROMPT: &str = "task: generate_options\nSECRET-PROMPT-LINE describe commit 1a2b3c\n";

    fn argv(invocation: &Invocation) -> &[String] {
        match &invocation.process.command {
            Command::Argv(argv) => argv,
            Command::Shell(line) => panic!("agent runs must not go through a shell: {line}"),
        }
    }

    fn payload() -> AgentPayload {
        let mut payload = AgentPayload::new("x", PROMPT);
        payload.model = Some("model-7".into());
        payload
            .env
            .insert("ANTHROPIC_API_KEY".into(), "sk-secret-value".into());
        payload
    }

    /// No runtime puts the prompt, any line of it, or a credential value into argv.
    #[test]
    fn prompt_and_credentials_never_reach_argv() {
        let scratch = Path::new("/scratch/job-1");
        for profile in all() {
            let invocation =
                build_invocation(profile, &payload(), scratch, "prog").expect("invocation");
            for arg in argv(&invocation) {
                for line in PROMPT.lines() {
                    assert!(
                        !arg.contains(line),
                        "{}: prompt line in argv: {arg}",
                        profile.name
                    );
                }
                assert!(
                    !arg.contains("sk-secret-value"),
                    "{}: secret in argv",
                    profile.name
                );
            }
            assert_eq!(
                invocation
                    .process
                    .env
                    .get("ANTHROPIC_API_KEY")
                    .map(String::as_str),
                Some("sk-secret-value"),
                "{}: payload env goes to the child env",
                profile.name
            );
            match profile.prompt {
                PromptDelivery::Stdin => {
                    assert_eq!(invocation.process.stdin.as_deref(), Some(PROMPT));
                    assert_eq!(invocation.prompt_file, None);
                }
                PromptDelivery::File => {
                    assert_eq!(invocation.process.stdin, None);
                    let file = invocation.prompt_file.clone().expect("prompt file");
                    assert_eq!(file, scratch.join(PROMPT_FILE_NAME));
                    assert!(argv(&invocation).contains(&file.display().to_string()));
                }
            }
        }
    }

    /// Credential names are inherited by name (allowlist), never by value.
    #[test]
    fn credential_env_names_are_allowlisted() {
        let check = |runtime: &str, name: &str| {
            let invocation = build_invocation(
                find(runtime).unwrap(),
                &AgentPayload::new(runtime, "p"),
                Path::new("/s"),
                "p",
            )
            .unwrap();
            let allowlist = invocation.process.env_allowlist.expect("allowlist");
            assert!(
                allowlist.iter().any(|n| n == name),
                "{runtime}: {name} not inherited"
            );
            assert!(
                allowlist.iter().any(|n| n == "PATH"),
                "{runtime}: default allowlist kept"
            );
            let profile = find(runtime).unwrap();
            let expected: BTreeMap<String, String> = profile
                .access
                .edit_workdir
                .env
                .iter()
                .chain(&profile.env)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            assert_eq!(
                invocation.process.env, expected,
                "{runtime}: only the profile's own switches are set by default"
            );
        };
        check("claude", "ANTHROPIC_API_KEY");
        check("codex", "OPENAI_API_KEY");
        check("opencode", "OPENROUTER_API_KEY");
        check("scripted", "SKILLFORGE_SCRIPTED_DELAY_MS");
    }

    /// Table of built argv per runtime, with and without a model.
    #[test]
    fn argv_per_runtime() {
        let check = |runtime: &str, model: Option<&str>, expected: &[&str]| {
            let mut payload = AgentPayload::new(runtime, "p");
            payload.model = model.map(str::to_string);
            payload.workdir = Some("/repo".into());
            let invocation =
                build_invocation(find(runtime).unwrap(), &payload, Path::new("/s"), "PROG")
                    .unwrap();
            assert_eq!(argv(&invocation), expected, "{runtime}");
            assert_eq!(invocation.process.cwd.as_deref(), Some(Path::new("/repo")));
        };
        check(
            "claude",
            Some("sonnet"),
            &[
                "PROG",
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--model",
                "sonnet",
                "--permission-mode",
                "acceptEdits",
                "--allowedTools",
                CLAUDE_GIT_TOOLS,
            ],
        );
        check(
            "claude",
            None,
            &[
                "PROG",
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--permission-mode",
                "acceptEdits",
                "--allowedTools",
                CLAUDE_GIT_TOOLS,
            ],
        );
        check(
            "codex",
            None,
            &[
                "PROG",
                "exec",
                "--json",
                "--skip-git-repo-check",
                "--cd",
                "/repo",
                "-c",
                "analytics.enabled=false",
                "-c",
                "features.plugins=false",
                "-",
                "--sandbox",
                "workspace-write",
                "-c",
                "sandbox_workspace_write.exclude_slash_tmp=true",
                "-c",
                "sandbox_workspace_write.exclude_tmpdir_env_var=true",
            ],
        );
        check(
            "opencode",
            None,
            &["PROG", "run", "--format", "json", "--title", "skillforge"],
        );
        // the scripted agent takes the model too, and records it in its transcript
        check(
            "scripted",
            Some("scripted-cheap"),
            &["PROG", "agent-scripted", "--model", "scripted-cheap"],
        );
        check("scripted", None, &["PROG", "agent-scripted"]);
    }

    /// An eval arm (`project_scope_only`) on Claude Code reads project/local settings only;
    /// runtimes without such a switch get nothing extra.
    #[test]
    fn project_scope_only_appends_the_profiles_switch() {
        let mut payload = AgentPayload::new("claude", "p");
        payload.project_scope_only = true;
        let invocation =
            build_invocation(find("claude").unwrap(), &payload, Path::new("/s"), "claude").unwrap();
        assert_eq!(
            argv(&invocation)[5..7],
            ["--setting-sources".to_string(), "project,local".to_string()]
        );
        let mut scripted = AgentPayload::new("scripted", "p");
        scripted.project_scope_only = true;
        let invocation =
            build_invocation(find("scripted").unwrap(), &scripted, Path::new("/s"), "P").unwrap();
        assert_eq!(argv(&invocation), ["P", "agent-scripted"]);
    }

    /// OpenCode's model tiers are `{configured}`: no `--model`, so the model its user configured
    /// runs (a fixed `anthropic/…` name sent a custom-provider user's judge to the internet);
    /// another runtime's tier becomes `--model NAME`.
    #[test]
    fn the_configured_model_passes_no_model_argument() {
        let run = |runtime: &str| {
            let profile = find(runtime).unwrap();
            let mut payload = AgentPayload::new(runtime, "p");
            payload.model = Some(profile.model_for_tier("cheap").unwrap().to_owned());
            argv(&build_invocation(profile, &payload, Path::new("/s"), "P").unwrap()).to_vec()
        };
        assert_eq!(
            find("opencode").unwrap().model_for_tier("cheap").unwrap(),
            crate::profile::CONFIGURED_MODEL
        );
        assert!(
            !run("opencode")
                .iter()
                .any(|a| a == "--model" || a.contains("configured")),
            "{:?}",
            run("opencode")
        );
        let claude = run("claude");
        assert!(
            claude.windows(2).any(|w| w == ["--model", "haiku"]),
            "{claude:?}"
        );
    }

    /// Issue 31 items 3 and 6: an arm may edit its work dir, a judge only reads; each runtime
    /// says how.
    #[test]
    fn the_access_mode_picks_the_profiles_permission_switches() {
        let check = |runtime: &str, access: Access, expected: &[&str]| {
            let mut payload = AgentPayload::new(runtime, "p");
            payload.access = access;
            payload.workdir = Some("/repo".into());
            let invocation =
                build_invocation(find(runtime).unwrap(), &payload, Path::new("/s"), "P").unwrap();
            let argv = argv(&invocation);
            let tail = &argv[argv.len() - expected.len()..];
            assert_eq!(tail, expected, "{runtime} {access:?}");
        };
        check(
            "claude",
            Access::EditWorkdir,
            &[
                "--permission-mode",
                "acceptEdits",
                "--allowedTools",
                CLAUDE_GIT_TOOLS,
            ],
        );
        check("claude", Access::ReadOnly, &["--tools", ""]);
        check("codex", Access::ReadOnly, &["--sandbox", "read-only"]);
        check(
            "codex",
            Access::EditWorkdir,
            &[
                "--sandbox",
                "workspace-write",
                "-c",
                "sandbox_workspace_write.exclude_slash_tmp=true",
                "-c",
                "sandbox_workspace_write.exclude_tmpdir_env_var=true",
            ],
        );
    }

    // Codex keeps a repository's `.git` read-only under `workspace-write`: a work dir that is a
    // checkout (a `.git` directory as the run starts) names it a writable root; any other does not.
    #[test]
    fn a_checkout_work_dir_gets_the_profiles_checkout_args() {
        let repo = tempfile::tempdir().unwrap();
        let plain = tempfile::tempdir().unwrap();
        std::fs::create_dir(repo.path().join(".git")).unwrap();
        let argv_in = |dir: &Path| {
            let mut payload = AgentPayload::new("codex", "p");
            payload.workdir = Some(dir.to_path_buf());
            let invocation =
                build_invocation(find("codex").unwrap(), &payload, Path::new("/s"), "P").unwrap();
            argv(&invocation).to_vec()
        };
        let root = format!(
            "sandbox_workspace_write.writable_roots=[\"{}/.git\"]",
            repo.path().display()
        );
        assert_eq!(argv_in(repo.path()).last(), Some(&root));
        assert!(
            !argv_in(plain.path())
                .iter()
                .any(|a| a.contains("writable_roots")),
            "a work dir that is no checkout names no git dir"
        );
    }

    #[test]
    fn bad_payloads_are_rejected() {
        let profile = find("claude").unwrap();
        let mut relative = AgentPayload::new("claude", "p");
        relative.workdir = Some("repo".into());
        let error = build_invocation(profile, &relative, Path::new("/s"), "claude").unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid agent payload for runtime `claude`: workdir `repo` is not absolute"
        );
        let mut multiline = AgentPayload::new("claude", "p");
        multiline.model = Some("a\nb".into());
        assert!(build_invocation(profile, &multiline, Path::new("/s"), "claude").is_err());
    }

    #[test]
    fn program_resolution() {
        let scripted = find("scripted").unwrap();
        let bin = || Ok(PathBuf::from("/opt/skillforge"));
        assert_eq!(
            resolve_program(scripted, None, bin).unwrap(),
            "/opt/skillforge"
        );
        assert_eq!(
            resolve_program(scripted, Some(Path::new("/x/agent")), bin).unwrap(),
            "/x/agent"
        );
        assert_eq!(
            resolve_program(find("codex").unwrap(), None, bin).unwrap(),
            "codex"
        );
        let failing = || Err(std::io::Error::other("gone"));
        let error = resolve_program(scripted, None, failing).unwrap_err();
        assert_eq!(
            error.to_string(),
            "locate the skillforge binary for runtime `scripted`: gone"
        );
    }
}
