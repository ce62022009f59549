//! Scripted remote experiment workers: what the optimize loop's remote delta asks a detached
//! worker to do, done for real in the worker's own checkout, so the loop's remote backend is
//! tested against real git and real measurements without a model.
//!
//! For a brief holding the `<remote-worker>` block, the scripted agent (in its attempt's scratch
//! dir) clones the brief's repository, checks out the base commit and verifies HEAD is it
//! (a base it cannot get is reported as a `blocker:` line, never a result), applies the plan
//! entry's edits, measures baseline and candidate paired with the brief's command and sample
//! count (alternating, in two checkouts), commits the candidate, commits `result.yaml` alone on
//! top of it and pushes that to the result ref. Two test knobs of the plan entry make a
//! misbehaving worker: `remote_base` (work from another rev and report it as `base_sha`, never
//! checking it against the brief) and `claim` (report these candidate aggregates instead of what
//! was measured).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::AgentError;

/// What the remote block of a brief says.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteBrief {
    /// Repository to clone.
    pub url: String,
    /// The base commit.
    pub base: String,
    /// The measurement command.
    pub command: String,
    /// Paired samples per side.
    pub n: usize,
    /// The result ref (a branch name).
    pub result_ref: String,
    /// Experiment number.
    pub experiment: u32,
    /// The commit message prefix, `optimize(<spec>)`.
    pub message_prefix: String,
    /// For a re-dispatch for more samples: the already pushed candidate.
    pub samples_of: Option<String>,
}

fn samples_head_of(brief: &RemoteBrief) -> Option<String> {
    brief.samples_of.clone()
}

/// A re-dispatch for more samples: one more pair of `head` against the base, pushed as a new
/// `result.yaml` on top of `head`.
fn more_samples(
    brief: &RemoteBrief,
    head: &str,
    claim: &BTreeMap<String, f64>,
    checkout: &Path,
    workdir: &Path,
) -> Result<String, AgentError> {
    let fail = |e: String| AgentError::Scripted(format!("remote worker: {e}"));
    git(
        checkout,
        &[
            "fetch",
            "-q",
            "origin",
            &format!(
                "+refs/heads/{}:refs/remotes/origin/result",
                brief.result_ref
            ),
        ],
    )
    .map_err(fail)?;
    if let Err(e) = git(checkout, &["checkout", "-q", "--force", "--detach", head]) {
        return Ok(format!(
            "blocker: head {head} is not available from {}: {e}",
            brief.url
        ));
    }
    let baseline_dir = workdir.join("baseline-more");
    if !baseline_dir.exists() {
        git(
            checkout,
            &[
                "worktree",
                "add",
                "-q",
                "--detach",
                &baseline_dir.to_string_lossy(),
                &brief.base,
            ],
        )
        .map_err(fail)?;
    }
    let reference = vec![measure(&baseline_dir, &brief.command).map_err(fail)?];
    let candidate = vec![measure(checkout, &brief.command).map_err(fail)?];
    push_result(
        brief,
        &brief.base,
        head,
        &reference,
        &candidate,
        claim,
        checkout,
    )
}

/// Writes `result.yaml` (as JSON text, which is YAML), commits it alone on top of `head` and
/// pushes it to the result ref; returns the final message.
fn push_result(
    brief: &RemoteBrief,
    base: &str,
    head: &str,
    reference: &[BTreeMap<String, f64>],
    candidate: &[BTreeMap<String, f64>],
    claim: &BTreeMap<String, f64>,
    checkout: &Path,
) -> Result<String, AgentError> {
    let fail = |e: String| AgentError::Scripted(format!("remote worker: {e}"));
    let mut cand = snapshot(candidate);
    for (name, v) in claim {
        cand["metrics"][name] = json!({"aggregate": v, "samples": vec![*v; candidate.len()]});
    }
    let machine = format!(
        "scripted-worker@{}",
        std::fs::read_to_string("/etc/hostname")
            .unwrap_or_default()
            .trim()
    );
    let result = json!({
        "experiment": brief.experiment, "base_sha": base, "head_sha": head, "machine": machine,
        "measured_at": chrono_now(), "baseline": snapshot(reference), "candidate": cand, "correctness": "none",
    });
    std::fs::write(
        checkout.join("result.yaml"),
        serde_json::to_string_pretty(&result).unwrap_or_default(),
    )
    .map_err(|e| fail(format!("write result.yaml: {e}")))?;
    git(checkout, &["add", "result.yaml"]).map_err(fail)?;
    git(checkout, &["commit", "-q", "-m", "result"]).map_err(fail)?;
    git(
        checkout,
        &[
            "push",
            "-q",
            "--force",
            "origin",
            &format!("HEAD:refs/heads/{}", brief.result_ref),
        ],
    )
    .map_err(fail)?;
    let agg = |s: &Value| {
        s["metrics"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{k} {}", v["aggregate"]))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    };
    Ok(format!(
        "pushed {}; head_sha {head}; machine {machine}; baseline {}; candidate {}",
        brief.result_ref,
        agg(&snapshot(reference)),
        agg(&cand)
    ))
}

fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let rest = &text[text.find(start)? + start.len()..];
    Some(&rest[..rest.find(end)?])
}

/// Reads the remote block of `prompt`; `None` when the brief has none.
pub fn parse(prompt: &str) -> Option<RemoteBrief> {
    let block = between(prompt, "<remote-worker>", "</remote-worker>")?;
    let run = between(block, "1. Baseline:", "\n")?;
    let command = between(run, "run `", "` ")?.to_owned();
    let n = between(run, &format!("`{command}` "), " time")?
        .trim()
        .parse()
        .ok()?;
    Some(RemoteBrief {
        url: between(block, "clone or fetch `", "`")?.to_owned(),
        base: between(block, "Base: commit ", " ")?.to_owned(),
        command,
        n,
        result_ref: between(block, "and push to `", "`")?.to_owned(),
        experiment: between(prompt, "Experiment: #", " ")?.trim().parse().ok()?,
        message_prefix: format!("optimize({})", between(block, "message `optimize(", ")")?),
        samples_of: samples_head(prompt),
    })
}

fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=scripted worker",
            "-c",
            "user.email=worker@skillforge.invalid",
        ])
        .args(args)
        .output()
        .map_err(|e| format!("run git: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn measure(dir: &Path, command: &str) -> Result<BTreeMap<String, f64>, String> {
    let out = Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("run `{command}`: {e}"))?;
    if !out.status.success() {
        return Err(format!("`{command}` exited {}", out.status));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    let v: Value = serde_json::from_str(line.trim())
        .map_err(|e| format!("`{command}` printed no metrics JSON: {e}"))?;
    Ok(v["metrics"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_f64().map(|f| (k.clone(), f)))
                .collect()
        })
        .unwrap_or_default())
}

fn snapshot(samples: &[BTreeMap<String, f64>]) -> Value {
    let mut metrics = serde_json::Map::new();
    if let Some(first) = samples.first() {
        for name in first.keys() {
            let xs: Vec<f64> = samples
                .iter()
                .filter_map(|s| s.get(name).copied())
                .collect();
            let mean = xs.iter().sum::<f64>() / xs.len().max(1) as f64;
            metrics.insert(name.clone(), json!({"aggregate": mean, "samples": xs}));
        }
    }
    json!({"gates": {}, "metrics": metrics})
}

/// The head of a re-dispatch for more samples (the `<remote-worker-samples>` block), if any.
pub fn samples_head(prompt: &str) -> Option<String> {
    let block = between(
        prompt,
        "<remote-worker-samples>",
        "</remote-worker-samples>",
    )?;
    Some(between(block, "head_sha ", ".")?.trim().to_owned())
}

/// Runs the remote worker for `brief` in `workdir` with the plan entry's edits (applied by
/// `apply`), `remote_base` and `claim`; returns the final message (a `blocker:` line when the
/// base cannot be had).
///
/// # Errors
/// [`AgentError::Scripted`] when git, an edit or the measurement fails.
pub fn run(
    brief: &RemoteBrief,
    remote_base: Option<&str>,
    claim: &BTreeMap<String, f64>,
    workdir: &Path,
    apply: impl Fn(&Path) -> Result<(), AgentError>,
) -> Result<String, AgentError> {
    let fail = |e: String| AgentError::Scripted(format!("remote worker: {e}"));
    let checkout = workdir.join("checkout");
    if !checkout.exists() {
        git(workdir, &["clone", "-q", &brief.url, "checkout"]).map_err(fail)?;
    }
    git(
        &checkout,
        &[
            "fetch",
            "-q",
            "origin",
            "+refs/heads/*:refs/remotes/origin/*",
        ],
    )
    .map_err(fail)?;
    if let Some(head) = samples_head_of(brief) {
        return more_samples(brief, &head, claim, &checkout, workdir);
    }
    let target = remote_base.unwrap_or(&brief.base);
    if let Err(e) = git(&checkout, &["checkout", "-q", "--detach", target]) {
        return Ok(format!(
            "{}\nblocker: base {target} is not available from {}: {e}",
            "I could not start the experiment.", brief.url
        ));
    }
    let base = git(&checkout, &["rev-parse", "HEAD"]).map_err(fail)?;
    if remote_base.is_none() && base != brief.base {
        return Ok(format!(
            "blocker: HEAD {base} is not the base {}",
            brief.base
        ));
    }
    let baseline_dir = workdir.join("baseline");
    if !baseline_dir.exists() {
        git(
            &checkout,
            &[
                "worktree",
                "add",
                "-q",
                "--detach",
                &baseline_dir.to_string_lossy(),
                &base,
            ],
        )
        .map_err(fail)?;
    }
    apply(&checkout)?;
    let (mut reference, mut candidate) = (Vec::new(), Vec::new());
    for _ in 0..brief.n.max(1) {
        reference.push(measure(&baseline_dir, &brief.command).map_err(fail)?);
        candidate.push(measure(&checkout, &brief.command).map_err(fail)?);
    }
    git(&checkout, &["add", "-A"]).map_err(fail)?;
    git(
        &checkout,
        &[
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            &format!(
                "{}: exp-{} candidate",
                brief.message_prefix, brief.experiment
            ),
        ],
    )
    .map_err(fail)?;
    let head = git(&checkout, &["rev-parse", "HEAD"]).map_err(fail)?;
    push_result(
        brief, &base, &head, &reference, &candidate, claim, &checkout,
    )
}

/// ISO 8601 UTC now, from `date(1)`.
fn chrono_now() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_remote_block_is_read() {
        let prompt = "Experiment: #7 for optimization target: ops\n<remote-worker>\nRepository: clone or fetch `file:///tmp/o.git`; the base\n\nBase: commit abc123 on branch optimize/ops. Before\n1. Baseline: check out abc123 (stash or branch your change), run `sh measure.sh` 2 time(s), record every sample.\nwith the message `optimize(ops): exp-7 <hypothesis, short>`. That\nand push to `optimize-exp/ops/exp-007`. Do not push\n</remote-worker>\n";
        let b = parse(prompt).expect("remote block");
        assert_eq!(
            b,
            RemoteBrief {
                url: "file:///tmp/o.git".into(),
                base: "abc123".into(),
                command: "sh measure.sh".into(),
                n: 2,
                result_ref: "optimize-exp/ops/exp-007".into(),
                experiment: 7,
                message_prefix: "optimize(ops)".into(),
                samples_of: None
            }
        );
        let more = format!(
            "{prompt}\n<remote-worker-samples>\nThis is a re-dispatch; your candidate is already pushed: head_sha def456. Do not\n</remote-worker-samples>\n"
        );
        assert_eq!(parse(&more).unwrap().samples_of.as_deref(), Some("def456"));
        assert!(parse("Experiment: #1 for x\nno block").is_none());
    }
}
