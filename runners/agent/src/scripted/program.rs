//! The scripted agent as a program: read the prompt on stdin, write the transcript on stdout.
//!
//! This is a process entry point, so unlike the rest of the library it writes to stdout and
//! stderr.

use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use super::{SAMPLE_ENV, ScriptedRun, scripted_run};

/// The CLI's hidden subcommand that runs [`scripted_main`] (`skillforge agent-scripted`); the
/// `scripted` runtime profile passes it as the first argument, and `skillforge-agent-scripted`
/// accepts it too.
pub const SCRIPTED_SUBCOMMAND: &str = "agent-scripted";

/// Milliseconds the scripted agent sleeps before answering (unset: none). For tests that need a
/// run to still be going when they kill or cancel it; the `scripted` profile passes it through.
pub const SCRIPTED_DELAY_ENV: &str = "SKILLFORGE_SCRIPTED_DELAY_MS";

/// The prompt as persona `name` reads it: each `scripted%NAME:` line becomes a `scripted:` line
/// (other personas' lines stay, and apply to nobody else). The `scripted-b` / `scripted-c`
/// runtime profiles run the agent as personas `b` / `c`: other model families in tests.
pub(super) fn as_persona(prompt: &str, name: &str) -> String {
    let head = format!("scripted%{name}:");
    prompt
        .split_inclusive('\n')
        .map(|line| match line.trim_start().strip_prefix(head.as_str()) {
            Some(rest) => format!("scripted:{rest}"),
            None => line.to_owned(),
        })
        .collect()
}

/// The scripted agent's arguments after the optional leading [`SCRIPTED_SUBCOMMAND`]:
/// `--persona NAME` ([`as_persona`]) and `--model NAME` (the profile's `model_args`), each at
/// most once, in any order.
#[derive(Debug, Default, PartialEq, Eq)]
struct ScriptedFlags {
    persona: Option<String>,
    model: Option<String>,
}

impl ScriptedFlags {
    fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, String> {
        let mut flags = Self::default();
        let mut args = args.into_iter().peekable();
        if args.peek().is_some_and(|a| a == SCRIPTED_SUBCOMMAND) {
            args.next();
        }
        while let Some(arg) = args.next() {
            let slot = match arg.as_str() {
                "--persona" => &mut flags.persona,
                "--model" => &mut flags.model,
                _ => {
                    return Err(format!(
                        "unexpected argument `{arg}` (the prompt is read from stdin; only `--persona NAME` and `--model NAME`)"
                    ));
                }
            };
            match args.next().filter(|v| !v.is_empty()) {
                Some(value) if slot.is_none() => *slot = Some(value),
                Some(_) => return Err(format!("`{arg}` given twice")),
                None => return Err(format!("`{arg}` needs a non-empty value")),
            }
        }
        Ok(flags)
    }
}

/// The transcript line recording the model the scripted agent was given:
/// `{"type":"model","model":NAME}` (read into [`crate::AgentReport::model`]).
fn model_event(model: &str) -> String {
    format!("{}\n", serde_json::json!({"type": "model", "model": model}))
}

/// Runs the scripted agent: `args` are the arguments after the program name (an optional leading
/// [`SCRIPTED_SUBCOMMAND`], then `--persona NAME` (see [`as_persona`]) and `--model NAME`, whose
/// name becomes the transcript's first line, `{"type":"model","model":NAME}`). Reads the whole prompt from stdin, sleeps
/// [`SCRIPTED_DELAY_ENV`] ms if set (a `scripted: sleep` directive wins), writes (then deletes) the files its
/// directives ask for under the current directory, then the `scripted_jsonl` transcript (see
/// [`super::scripted_run`]) to stdout; skills are discovered in the current directory and
/// `scripted@N:` directives follow `FORGE_SAMPLE`.
///
/// Exit codes: 0 on success; 2 for unexpected or repeated arguments, a non-UTF-8 prompt, an unknown task or
/// a bad option count (message on stderr); 1 when stdin, stdout or a file write fail; otherwise
/// the `scripted: exit` code (default 0).
pub fn scripted_main(args: impl IntoIterator<Item = String>) -> ExitCode {
    let flags = match ScriptedFlags::parse(args) {
        Ok(flags) => flags,
        Err(message) => {
            eprintln!("scripted agent: {message}");
            return ExitCode::from(2);
        }
    };
    let persona = flags.persona;
    // The model it was given (the profile's `model_args`) is recorded first, whatever follows.
    let model_line = flags.model.as_deref().map(model_event);
    let mut bytes = Vec::new();
    if let Err(error) = std::io::stdin().read_to_end(&mut bytes) {
        eprintln!("scripted agent: read prompt from stdin: {error}");
        return ExitCode::from(1);
    }
    let Ok(prompt) = String::from_utf8(bytes) else {
        eprintln!("scripted agent: prompt on stdin is not UTF-8");
        return ExitCode::from(2);
    };
    let prompt = match &persona {
        Some(name) => as_persona(&prompt, name),
        None => prompt,
    };
    let workdir = std::env::current_dir().ok();
    let sample = std::env::var(SAMPLE_ENV).ok();
    // An optimize-loop experiment brief with an edit plan (`SKILLFORGE_SCRIPTED_EDITS`) applies
    // its edits and answers with its own transcript; every other prompt is a scripted run.
    let plan = std::env::var(super::edits::SCRIPTED_EDITS_ENV).ok();
    match super::edits::judge_transcript(&prompt, plan.as_deref()) {
        Ok(None) => {}
        Ok(Some(super::item_judge::JudgeRun::Reply(transcript))) => {
            let mut stdout = std::io::stdout().lock();
            let transcript = format!("{}{transcript}", model_line.as_deref().unwrap_or(""));
            return match stdout
                .write_all(transcript.as_bytes())
                .and_then(|()| stdout.flush())
            {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("scripted agent: write transcript to stdout: {error}");
                    ExitCode::from(1)
                }
            };
        }
        Ok(Some(super::item_judge::JudgeRun::Fail(message))) => {
            eprintln!("{message}");
            return ExitCode::from(3);
        }
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    }
    let edited = match &workdir {
        Some(cwd) => super::edits::experiment_transcript(&prompt, plan.as_deref(), cwd),
        None => Ok(None),
    };
    let run = match edited.and_then(|edited| match edited {
        Some(stdout) => Ok(ScriptedRun {
            stdout,
            stderr: None,
            exit_code: 0,
            sleep_ms: None,
            writes: Vec::new(),
            deletes: Vec::new(),
        }),
        None => scripted_run(&prompt, workdir.as_deref(), sample.as_deref()),
    }) {
        Ok(run) => run,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    let mut directives = super::Directives::default();
    directives.merge_from(&prompt, sample.as_deref());
    let effects = |event: &str| {
        if let Some((path, label)) = &directives.effects {
            append_effect(path, &format!("{event} {label} {}\n", std::process::id()));
        }
    };
    effects("start");
    if let Some(path) = &directives.wait_for
        && !wait_for(Path::new(path))
    {
        eprintln!(
            "scripted agent: `{path}` did not appear within {} s",
            super::directive::WAIT_FOR_BOUND.as_secs()
        );
        return ExitCode::from(1);
    }
    // The stderr line comes first, before any sleep: a slow agent shows it live (`jobs logs`).
    if let Some(line) = &run.stderr {
        eprintln!("{line}");
    }
    let delay_ms = std::env::var(SCRIPTED_DELAY_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok());
    if let Some(delay_ms) = run.sleep_ms.or(delay_ms) {
        std::thread::sleep(Duration::from_millis(delay_ms));
    }
    if let Some(dir) = &workdir {
        for (path, text) in &run.writes {
            let target = dir.join(path);
            let written = target
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::write(&target, text));
            if let Err(error) = written {
                eprintln!("scripted agent: write `{}`: {error}", target.display());
                return ExitCode::from(1);
            }
        }
        for path in &run.deletes {
            let target = dir.join(path);
            match std::fs::remove_file(&target) {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => {
                    eprintln!("scripted agent: delete `{}`: {error}", target.display());
                    return ExitCode::from(1);
                }
            }
        }
    }
    let mut stdout = std::io::stdout().lock();
    let transcript = format!("{}{}", model_line.as_deref().unwrap_or(""), run.stdout);
    if let Err(error) = stdout
        .write_all(transcript.as_bytes())
        .and_then(|()| stdout.flush())
    {
        eprintln!("scripted agent: write transcript to stdout: {error}");
        return ExitCode::from(1);
    }
    effects("end");
    ExitCode::from(run.exit_code)
}

/// Appends `line` to the `effects` file (one `write` of the whole line, `O_APPEND`).
fn append_effect(path: &str, line: &str) {
    let appended = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(error) = appended {
        eprintln!("scripted agent: append to `{path}`: {error}");
    }
}

/// Waits until `path` exists, polling, for at most [`super::directive::WAIT_FOR_BOUND`].
fn wait_for(path: &Path) -> bool {
    let deadline = std::time::Instant::now() + super::directive::WAIT_FOR_BOUND;
    while !path.exists() {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::{ScriptedFlags, as_persona};

    #[test]
    fn flags_take_a_persona_and_a_model_in_any_order_and_refuse_anything_else() {
        let parse = |args: &[&str]| ScriptedFlags::parse(args.iter().map(|a| a.to_string()));
        let both = ScriptedFlags {
            persona: Some("b".into()),
            model: Some("m-1".into()),
        };
        assert_eq!(
            parse(&["agent-scripted", "--persona", "b", "--model", "m-1"]),
            Ok(both)
        );
        let both = ScriptedFlags {
            persona: Some("b".into()),
            model: Some("m-1".into()),
        };
        assert_eq!(parse(&["--model", "m-1", "--persona", "b"]), Ok(both));
        assert_eq!(parse(&["agent-scripted"]), Ok(ScriptedFlags::default()));
        for bad in [
            &["--model"][..],
            &["--model", ""],
            &["--model", "a", "--model", "b"],
            &["extra"],
            &["--persona", "b", "x"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_persona_reads_its_own_directive_lines_as_its_own() {
        let prompt = "task: judge\nscripted: judge-reply one\n  scripted%b: judge-reply two\nscripted%c: judge-reply three\n";
        assert_eq!(
            as_persona(prompt, "b"),
            "task: judge\nscripted: judge-reply one\nscripted: judge-reply two\nscripted%c: judge-reply three\n"
        );
        let mut d = super::super::Directives::default();
        d.merge_from(&as_persona(prompt, "c"), None);
        assert_eq!(
            d.judge_reply.as_deref(),
            Some("three"),
            "the persona's line comes later and wins"
        );
        let mut plain = super::super::Directives::default();
        plain.merge_from(prompt, None);
        assert_eq!(
            plain.judge_reply.as_deref(),
            Some("one"),
            "without a persona, persona lines apply to nobody"
        );
    }
}
