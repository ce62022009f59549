//! The shape every CI report is made from: one [`Suite`] per command run, one [`Case`] per
//! verify command, checker dimension or eval sample, each with its [`Outcome`], its output tails
//! and the [`Annotation`] `--format github` prints for it.

use std::borrow::Cow;

/// One command run as a test suite: `verify`, `check` or `eval forge`.
#[derive(Debug, Clone, PartialEq)]
pub struct Suite {
    /// The suite's name, e.g. `skillforge verify /repo @ HEAD`.
    pub name: String,
    /// Facts of the run (`job_id`, `commit`, `verdict`, …), in order; JUnit `<properties>`.
    pub properties: Vec<(String, String)>,
    /// The cases, in the command's order.
    pub cases: Vec<Case>,
}

impl Suite {
    /// A suite named `name` with no properties and no cases.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            properties: Vec::new(),
            cases: Vec::new(),
        }
    }

    /// Adds the property `name = value` (an empty `value` is left out).
    pub fn property(&mut self, name: &str, value: impl Into<String>) {
        let value = value.into();
        if !value.is_empty() {
            self.properties.push((name.to_owned(), value));
        }
    }

    /// Counts of the cases by outcome.
    pub fn tally(&self) -> Tally {
        let mut tally = Tally::default();
        for case in &self.cases {
            match case.outcome {
                Outcome::Passed => tally.passed += 1,
                Outcome::Failed { .. } => tally.failed += 1,
                Outcome::Errored { .. } => tally.errored += 1,
                Outcome::Skipped { .. } => tally.skipped += 1,
            }
        }
        tally
    }

    /// Sum of the cases' times, milliseconds.
    pub fn time_ms(&self) -> u64 {
        self.cases.iter().map(|c| c.time_ms).sum()
    }
}

/// How many cases of a suite ended each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Passed.
    pub passed: usize,
    /// Failed (JUnit `<failure>`).
    pub failed: usize,
    /// Could not be judged (JUnit `<error>`).
    pub errored: usize,
    /// Skipped with a reason (JUnit `<skipped>`).
    pub skipped: usize,
}

impl Tally {
    /// Every case.
    pub fn total(&self) -> usize {
        self.passed + self.failed + self.errored + self.skipped
    }
}

/// How a case ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// It passed.
    Passed,
    /// The thing checked failed (a command exited non-zero, a dimension scored below 1, the
    /// baseline won a sample).
    Failed {
        /// A short machine word: `failed`, `timed_out`, `score`, `baseline_won`, `gate`.
        kind: String,
        /// One line.
        message: String,
        /// More lines (the body of JUnit's `<failure>`); may be empty.
        detail: String,
    },
    /// The case could not be judged (a command that could not run, an invalid eval sample, a
    /// verification job without a report).
    Errored {
        /// A short machine word: `not_runnable`, an invalid code, `environment`.
        kind: String,
        /// One line.
        message: String,
        /// More lines; may be empty.
        detail: String,
    },
    /// Not measured, with why (a checker with no tool, a command after a failing one).
    Skipped {
        /// One line.
        reason: String,
    },
}

/// One case: a verify command, a checker dimension, an eval sample or a gate.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// The case's name (the command line, the dimension, `sample 2`).
    pub name: String,
    /// JUnit `classname`: `skillforge.verify`, `skillforge.check`, `skillforge.eval.forge`.
    pub classname: String,
    /// Wall-clock milliseconds (0 when unknown or not run).
    pub time_ms: u64,
    /// How it ended.
    pub outcome: Outcome,
    /// The case's standard output tail (JUnit `<system-out>`); may be empty.
    pub stdout: String,
    /// The case's standard error tail (JUnit `<system-err>`); may be empty.
    pub stderr: String,
    /// What `--format github` prints for it; `None` prints nothing.
    pub annotation: Option<Annotation>,
    /// Annotations at the places the case's tool reported (a linter's items), printed after
    /// [`Case::annotation`].
    pub located: Vec<Annotation>,
}

impl Case {
    /// A case of class `classname` named `name` with `outcome`, no output, and the annotation
    /// the outcome calls for ([`Annotation::for_outcome`]).
    pub fn new(classname: &str, name: impl Into<String>, outcome: Outcome) -> Self {
        let name = name.into();
        let annotation = Annotation::for_outcome(&name, &outcome);
        Self {
            name,
            classname: classname.to_owned(),
            time_ms: 0,
            outcome,
            stdout: String::new(),
            stderr: String::new(),
            annotation,
            located: Vec::new(),
        }
    }
}

/// Severity of a GitHub Actions annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// `::error`.
    Error,
    /// `::warning`.
    Warning,
}

/// One GitHub Actions annotation: `::error file=F,line=L,title=T::message`.
#[derive(Debug, Clone, PartialEq)]
pub struct Annotation {
    /// Error or warning.
    pub level: Level,
    /// The annotation's title.
    pub title: String,
    /// The message (may span lines: they are escaped into one workflow command).
    pub message: String,
    /// The file, relative to the repository root, when the report names one (a checker's
    /// located items: `raw.languages.<lang>.locations`).
    pub file: Option<String>,
    /// The line in `file`, from 1.
    pub line: Option<u32>,
}

impl Annotation {
    /// The annotation a case with `outcome` gets by default: an error for a failure or an
    /// error, a warning for a skip, none for a pass. Its title is `name`.
    pub fn for_outcome(name: &str, outcome: &Outcome) -> Option<Self> {
        let (level, message) = match outcome {
            Outcome::Passed => return None,
            Outcome::Failed { message, .. } | Outcome::Errored { message, .. } => {
                (Level::Error, message.clone())
            }
            Outcome::Skipped { reason } => (Level::Warning, format!("skipped: {reason}")),
        };
        Some(Self {
            level,
            title: name.to_owned(),
            message,
            file: None,
            line: None,
        })
    }
}

/// `text` as plain characters every CI format can carry: ANSI escape sequences (a tool's
/// colours) removed, and every other character XML 1.0 cannot hold (control characters other
/// than tab, newline and carriage return; U+FFFE, U+FFFF) replaced by U+FFFD.
pub fn plain(text: &str) -> Cow<'_, str> {
    let is_xml_char = |c: char| {
        matches!(c, '\t' | '\n' | '\r') || (c >= ' ' && c != '\u{FFFE}' && c != '\u{FFFF}')
    };
    if text.chars().all(is_xml_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            skip_escape_sequence(&mut chars);
        } else if is_xml_char(c) {
            out.push(c);
        } else {
            out.push('\u{FFFD}');
        }
    }
    Cow::Owned(out)
}

/// Consumes the rest of an escape sequence after ESC: a CSI (`[` parameters, final byte
/// `@`..`~`), an OSC (`]` … BEL or ESC `\`), or one more character.
fn skip_escape_sequence(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    match chars.next() {
        Some('[') => {
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        }
        Some(']') => {
            while let Some(c) = chars.next() {
                if c == '\u{7}' || (c == '\u{1b}' && chars.next_if_eq(&'\\').is_some()) {
                    break;
                }
            }
        }
        _ => {}
    }
}

/// The last `max_lines` lines of `text` (trailing blank lines dropped), for messages.
pub fn last_lines(text: &str, max_lines: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(max_lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_keeps_what_xml_holds_and_drops_the_rest() {
        for (input, expected) in [
            ("ok\ttext\r\nnext", "ok\ttext\r\nnext"),
            ("\u{1b}[31merror\u{1b}[0m: x", "error: x"),
            (
                "\u{1b}]8;;http://x\u{7}link\u{1b}]8;;\u{1b}\\ done",
                "link done",
            ),
            (
                "nul\0 bell\u{7} bs\u{8}",
                "nul\u{FFFD} bell\u{FFFD} bs\u{FFFD}",
            ),
            ("\u{FFFF}\u{FFFE}é✓", "\u{FFFD}\u{FFFD}é✓"),
            ("trailing escape \u{1b}", "trailing escape "),
        ] {
            assert_eq!(plain(input), expected, "{input:?}");
        }
    }

    #[test]
    fn last_lines_keeps_the_tail() {
        for (input, n, expected) in [
            ("a\nb\nc\n\n", 2, "b\nc"),
            ("a", 5, "a"),
            ("", 3, ""),
            ("a\nb", 0, ""),
        ] {
            assert_eq!(last_lines(input, n), expected, "{input:?} {n}");
        }
    }

    #[test]
    fn a_suite_tallies_its_cases() {
        let mut suite = Suite::new("s");
        for outcome in [
            Outcome::Passed,
            Outcome::Failed {
                kind: "failed".into(),
                message: "m".into(),
                detail: String::new(),
            },
            Outcome::Skipped { reason: "r".into() },
            Outcome::Passed,
        ] {
            suite.cases.push(Case {
                time_ms: 5,
                ..Case::new("c", "n", outcome)
            });
        }
        assert_eq!(
            suite.tally(),
            Tally {
                passed: 2,
                failed: 1,
                errored: 0,
                skipped: 1
            }
        );
        assert_eq!(suite.tally().total(), 4);
        assert_eq!(suite.time_ms(), 20);
        assert_eq!(suite.cases[0].annotation, None, "a pass is not annotated");
        assert_eq!(
            suite.cases[1].annotation.as_ref().map(|a| a.level),
            Some(Level::Error)
        );
        assert_eq!(
            suite.cases[2]
                .annotation
                .as_ref()
                .map(|a| (a.level, a.message.as_str())),
            Some((Level::Warning, "skipped: r"))
        );
    }
}
