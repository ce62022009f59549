//! The maintained guidance section of a template body: rendered from ranked guidance lines and
//! written into the body in place of the previous one, so a template carries exactly one section
//! and re-running with the same evidence changes nothing. The frontmatter is never touched, so
//! the candidate's metadata still equals its frontmatter (facts §2, check 3).

use skillforge_contract::{TemplateError, split_frontmatter};

use super::guidance::GuidanceLine;

/// The section heading (a level-2 Markdown heading).
pub const GUIDANCE_HEADING: &str = "## Guidance from review evidence";

/// The fixed note under the heading.
pub const GUIDANCE_NOTE: &str = "<!-- Maintained by `skillforge optimizer distill`: regenerated from review evidence on each run; edits here are replaced. -->";

/// Start of the comment naming the runs whose evidence the section holds (issue 37 item 10).
pub const RUNS_NOTE_PREFIX: &str = "<!-- Evidence from runs: ";

/// The section text: heading, note, the runs whose evidence it holds (a comment; none when
/// `runs` is empty), an intro sentence and one list item per line, ending with `\n`. No times, so
/// the same lines and runs always render the same bytes.
pub fn render_section(lines: &[GuidanceLine], runs: &[String]) -> String {
    let runs_note = if runs.is_empty() {
        String::new()
    } else {
        format!("{RUNS_NOTE_PREFIX}{} -->\n\n", runs.join(", "))
    };
    let mut out = format!(
        "{GUIDANCE_HEADING}\n\n{GUIDANCE_NOTE}\n\n{runs_note}Apply these rules, learned from reviewed outputs (most supported first):\n\n"
    );
    for line in lines {
        out.push_str(&line.render());
        out.push('\n');
    }
    out
}

/// Writes `section` into `content`'s body: replaces the existing section (from its heading line
/// to the next heading of level 1 or 2, or the end) or, when there is none, appends it after one
/// blank line. The frontmatter bytes are kept exactly. Idempotent:
/// `apply_section(apply_section(c, s)?, s)? == apply_section(c, s)?`.
///
/// # Errors
/// The content has no well-formed frontmatter ([`split_frontmatter`]).
pub fn apply_section(content: &str, section: &str) -> Result<String, TemplateError> {
    let (_, body) = split_frontmatter(content)?;
    let frontmatter = &content[..content.len() - body.len()];
    let section = if section.ends_with('\n') {
        section.to_owned()
    } else {
        format!("{section}\n")
    };
    let new_body = match find_section(body) {
        Some((start, end)) => {
            let rest = &body[end..];
            let mut out = String::with_capacity(body.len() + section.len());
            out.push_str(&body[..start]);
            out.push_str(&section);
            if !rest.is_empty() {
                out.push('\n');
                out.push_str(rest);
            }
            out
        }
        None => {
            let kept = body.trim_end_matches(['\n', '\r', ' ', '\t']);
            if kept.is_empty() {
                section
            } else {
                format!("{kept}\n\n{section}")
            }
        }
    };
    Ok(format!("{frontmatter}{new_body}"))
}

/// The guidance section of `content`'s body (heading included), when it has one and well-formed
/// frontmatter.
pub fn section_body(content: &str) -> Option<&str> {
    let (_, body) = split_frontmatter(content).ok()?;
    find_section(body).map(|(start, end)| &body[start..end])
}

/// The runs named by the section's runs comment ([`render_section`]), in order; empty without
/// a section or comment.
pub fn section_runs(content: &str) -> Vec<String> {
    let Some(section) = section_body(content) else {
        return Vec::new();
    };
    section
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix(RUNS_NOTE_PREFIX)?
                .strip_suffix("-->")
                .map(str::trim)
        })
        .map(|list| {
            list.split(", ")
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Byte range of the guidance section in `body`: its heading line up to (not including) the next
/// `#`/`##` heading line outside a code fence, or the end.
fn find_section(body: &str) -> Option<(usize, usize)> {
    let mut offset = 0;
    let mut start = None;
    let mut in_fence = false;
    for line in body.split_inclusive('\n') {
        let trimmed = line.trim_end_matches(['\r', '\n']);
        if trimmed.trim_start().starts_with("```") || trimmed.trim_start().starts_with("~~~") {
            in_fence = !in_fence;
        } else if !in_fence {
            if start.is_none() && trimmed.trim_end() == GUIDANCE_HEADING {
                start = Some(offset);
            } else if start.is_some() && (trimmed.starts_with("# ") || trimmed.starts_with("## ")) {
                return start.map(|s| (s, offset));
            }
        }
        offset += line.len();
    }
    start.map(|s| (s, body.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FM: &str = "---\nid: planner\nname: Planner\n---\n";

    #[test]
    fn apply_section_table() {
        let section = "## Guidance from review evidence\n\n- Do it. (support 1: human 1)\n";
        let table: &[(&str, &str, &str)] = &[
            (
                "append after body",
                "Plan the task.\n",
                "Plan the task.\n\n{S}",
            ),
            (
                "append trims trailing blank lines",
                "Plan the task.\n\n\n",
                "Plan the task.\n\n{S}",
            ),
            (
                "replace at end",
                "Plan.\n\n## Guidance from review evidence\n\n- Old. (support 9: judge 9)\n",
                "Plan.\n\n{S}",
            ),
            (
                "replace in the middle keeps what follows",
                "Plan.\n\n## Guidance from review evidence\n\n- Old.\n\n## Output\n\nJSON.\n",
                "Plan.\n\n{S}\n## Output\n\nJSON.\n",
            ),
            (
                "level-3 headings stay inside the section",
                "Plan.\n\n## Guidance from review evidence\n\n### old sub\n- Old.\n",
                "Plan.\n\n{S}",
            ),
            (
                "a heading in a code fence is not the section",
                "```\n## Guidance from review evidence\n```\n",
                "```\n## Guidance from review evidence\n```\n\n{S}",
            ),
        ];
        for (name, body, want) in table {
            let content = format!("{FM}{body}");
            let got = apply_section(&content, section).unwrap();
            let want = format!("{FM}{}", want.replace("{S}", section));
            assert_eq!(got, want, "{name}");
            assert_eq!(
                apply_section(&got, section).unwrap(),
                got,
                "{name}: not idempotent"
            );
            assert!(got.starts_with(FM), "{name}: frontmatter changed");
        }
    }

    #[test]
    fn apply_section_needs_frontmatter() {
        assert_eq!(
            apply_section("no frontmatter", "x"),
            Err(TemplateError::MissingFrontmatter)
        );
    }
}
