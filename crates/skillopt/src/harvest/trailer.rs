//! Attribution by trailer (issue 37 item 8): the `Skillforge-Template: <id>@v<N>` line an agent
//! job leaves in its commits (the agent runner's commit hook) or a PR body, read by the webhook
//! and the PR watcher so a merged PR is attributed to the template version that produced it
//! without `skillforge harvest attribute` (seed: SkillOpt, "Automatic trace-harvested feedback
//! (Mode A, off by default)" › Scope: a job "that carries a template attribution").
//!
//! **Where it is read, in order; the first place that has one wins:**
//! 1. the PR body (webhook `pull_request.body`, the watcher's pull JSON `body`);
//! 2. the PR's commits (`GET /repos/{o}/{r}/pulls/{n}/commits`, oldest first as GitHub lists
//!    them): the newest commit whose message carries a trailer, so a rebase or a later agent
//!    round that re-attributes the change is what counts.
//!
//! In a text, the trailer is a line `Skillforge-Template: <id>@v<N>` (key case-insensitive,
//! surrounding spaces ignored); when a text holds several, the last one counts (git's trailer
//! block is at the end). An optional `Skillforge-Runtime: <runtime>` line names the implementer's
//! runtime (for the cross-family reviewer), and `Skillforge-Kind: implement|review-quality` its
//! kind (default `implement`).
//!
//! **Trailer against manual attribution:** a manual attribution (`harvest attribute`) wins and is
//! never overwritten by a trailer; a trailer naming another version is recorded as the harvest
//! event [`TRAILER_DISAGREES_EVENT`] (shown by `harvest events`). A trailer attribution is
//! replaced by a later trailer naming another version, and by any `harvest attribute`.

use super::kind::IMPLEMENT_KIND;

/// The trailer key naming the template version.
pub const TEMPLATE_TRAILER: &str = "Skillforge-Template";
/// The trailer key naming the implementer's runtime.
pub const RUNTIME_TRAILER: &str = "Skillforge-Runtime";
/// The trailer key naming the attributed job kind.
pub const KIND_TRAILER: &str = "Skillforge-Kind";
/// Harvest event: a trailer named another version than the manual attribution, which was kept.
pub const TRAILER_DISAGREES_EVENT: &str = "attribution_trailer_disagrees";
/// Harvest event: a trailer named a template version this store does not hold (nothing attributed).
pub const TRAILER_UNKNOWN_EVENT: &str = "attribution_trailer_unknown";

/// Where a trailer was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrailerPlace {
    /// The PR body.
    Body,
    /// A commit message of the PR (its SHA).
    Commit(String),
}

impl std::fmt::Display for TrailerPlace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TrailerPlace::Body => f.write_str("the PR body"),
            TrailerPlace::Commit(sha) => write!(f, "commit {}", &sha[..sha.len().min(12)]),
        }
    }
}

/// A `Skillforge-Template` trailer read from one text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateTrailer {
    /// The template version id `<id>@v<N>`, as written.
    pub version: String,
    /// `Skillforge-Runtime`, when present.
    pub runtime: Option<String>,
    /// `Skillforge-Kind`, default [`IMPLEMENT_KIND`].
    pub kind: String,
    /// Where it was read.
    pub place: TrailerPlace,
}

fn value_of<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let (k, v) = line.trim().split_once(':')?;
    (k.trim().eq_ignore_ascii_case(key))
        .then(|| v.trim())
        .filter(|v| !v.is_empty())
}

/// Whether `version` is shaped `<id>@v<N>` (N ≥ 1 digits, id without spaces).
fn is_version_id(version: &str) -> bool {
    version.rsplit_once("@v").is_some_and(|(id, n)| {
        !id.is_empty()
            && !id.contains(char::is_whitespace)
            && !n.is_empty()
            && n.bytes().all(|b| b.is_ascii_digit())
    })
}

/// The trailer in `text` (the last `Skillforge-Template: <id>@v<N>` line), with the runtime and
/// kind lines of the same text; `None` when it has none (a malformed value counts as none).
pub fn parse(text: &str, place: TrailerPlace) -> Option<TemplateTrailer> {
    let last = |key: &str| {
        text.lines()
            .rev()
            .find_map(|l| value_of(l, key))
            .map(str::to_owned)
    };
    let version = text
        .lines()
        .rev()
        .filter_map(|l| value_of(l, TEMPLATE_TRAILER))
        .find(|v| is_version_id(v))?
        .to_owned();
    Some(TemplateTrailer {
        version,
        runtime: last(RUNTIME_TRAILER),
        kind: last(KIND_TRAILER).unwrap_or_else(|| IMPLEMENT_KIND.to_owned()),
        place,
    })
}

/// The trailer of a PR: its body's when it has one, else the newest of `commits` (`(sha,
/// message)`, oldest first as GitHub lists them) that has one.
pub fn find(body: Option<&str>, commits: &[(String, String)]) -> Option<TemplateTrailer> {
    body.and_then(|b| parse(b, TrailerPlace::Body)).or_else(|| {
        commits
            .iter()
            .rev()
            .find_map(|(sha, message)| parse(message, TrailerPlace::Commit(sha.clone())))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_well_formed_line_counts_and_the_key_is_case_insensitive() {
        let t = parse(
            "Fix the cache\n\nskillforge-template:  planner@v2\nSkillforge-Template: planner@v3 \n",
            TrailerPlace::Body,
        )
        .unwrap();
        assert_eq!(
            (t.version.as_str(), t.kind.as_str(), t.runtime),
            ("planner@v3", "implement", None)
        );
        let t = parse("x\n\nSkillforge-Template: a.b@v12\nSkillforge-Runtime: codex\nSkillforge-Kind: review-quality", TrailerPlace::Body).unwrap();
        assert_eq!(
            (t.version.as_str(), t.kind.as_str(), t.runtime.as_deref()),
            ("a.b@v12", "review-quality", Some("codex"))
        );
        for bad in [
            "",
            "Skillforge-Template:",
            "Skillforge-Template: planner",
            "Skillforge-Template: planner@vx",
            "Skillforge-Template: @v1",
            "Template: p@v1",
        ] {
            assert_eq!(parse(bad, TrailerPlace::Body), None, "{bad}");
        }
    }

    #[test]
    fn the_body_wins_over_commits_and_the_newest_commit_over_older_ones() {
        let commits = vec![
            (
                "c1".to_owned(),
                "first\n\nSkillforge-Template: p@v1".to_owned(),
            ),
            (
                "c2".to_owned(),
                "second\n\nSkillforge-Template: p@v2".to_owned(),
            ),
            ("c3".to_owned(), "fixup without a trailer".to_owned()),
        ];
        let t = find(Some("no trailer here"), &commits).unwrap();
        assert_eq!(
            (t.version.as_str(), t.place),
            ("p@v2", TrailerPlace::Commit("c2".into()))
        );
        let t = find(Some("body\n\nSkillforge-Template: p@v9"), &commits).unwrap();
        assert_eq!((t.version.as_str(), t.place), ("p@v9", TrailerPlace::Body));
        assert_eq!(find(None, &[]), None);
    }
}
