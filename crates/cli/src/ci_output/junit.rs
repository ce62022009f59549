//! `--junit FILE`: a [`Suite`] as JUnit XML, the Ant/Jenkins shape CI systems read
//! (`<testsuites>` → `<testsuite>` with `<properties>` → `<testcase>` with `<failure>`,
//! `<error>` or `<skipped>` and `<system-out>`/`<system-err>`), written by `quick-xml` (which
//! escapes text and attribute values) and placed atomically.
//!
//! The shape validates against the Jenkins xUnit plug-in's `junit-10.xsd`
//! (tests/fixtures/junit-10.xsd; tests/tests/ci_output.rs checks every command's file with
//! `xmllint --schema`). That schema fixes, among others: `time` with at most 3 decimals,
//! `tests`/`failures`/`errors` required on `<testsuite>`, no `skipped` on `<testsuites>`.

use std::io::Write as _;
use std::path::Path;

use quick_xml::Writer;
use quick_xml::events::{BytesDecl, BytesText, Event};

use super::suite::{Case, Outcome, Suite, plain};

/// The suite as a JUnit XML document (UTF-8, indented by 2). `timestamp` is the run's start,
/// RFC 3339 (`2026-12-05T15:31:39Z`).
///
/// # Errors
/// Never in practice: the writer's I/O errors, writing to memory.
pub fn render(suite: &Suite, timestamp: &str) -> std::io::Result<Vec<u8>> {
    let tally = suite.tally();
    let (tests, failures, errors, skipped) = (
        tally.total().to_string(),
        tally.failed.to_string(),
        tally.errored.to_string(),
        tally.skipped.to_string(),
    );
    let time = seconds(suite.time_ms());
    let name = plain(&suite.name);
    let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
    w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    w.create_element("testsuites")
        .with_attributes([
            ("name", &*name),
            ("tests", &tests),
            ("failures", &failures),
            ("errors", &errors),
            ("time", &time),
        ])
        .write_inner_content(|w| {
            w.create_element("testsuite")
                .with_attributes([
                    ("name", &*name),
                    ("tests", &tests),
                    ("failures", &failures),
                    ("errors", &errors),
                    ("skipped", &skipped),
                    ("time", &time),
                    ("timestamp", timestamp),
                ])
                .write_inner_content(|w| {
                    if !suite.properties.is_empty() {
                        w.create_element("properties").write_inner_content(|w| {
                            for (key, value) in &suite.properties {
                                w.create_element("property")
                                    .with_attributes([
                                        ("name", &*plain(key)),
                                        ("value", &*plain(value)),
                                    ])
                                    .write_empty()?;
                            }
                            Ok(())
                        })?;
                    }
                    for case in &suite.cases {
                        test_case(w, case)?;
                    }
                    Ok(())
                })?;
            Ok(())
        })?;
    let mut bytes = w.into_inner();
    bytes.push(b'\n');
    Ok(bytes)
}

fn test_case(w: &mut Writer<Vec<u8>>, case: &Case) -> std::io::Result<()> {
    let element = w.create_element("testcase").with_attributes([
        ("name", &*plain(&case.name)),
        ("classname", &*plain(&case.classname)),
        ("time", &seconds(case.time_ms)),
    ]);
    if case.outcome == Outcome::Passed && case.stdout.is_empty() && case.stderr.is_empty() {
        element.write_empty()?;
        return Ok(());
    }
    element.write_inner_content(|w| {
        match &case.outcome {
            Outcome::Passed => {}
            Outcome::Failed {
                kind,
                message,
                detail,
            } => verdict(w, "failure", kind, message, detail)?,
            Outcome::Errored {
                kind,
                message,
                detail,
            } => verdict(w, "error", kind, message, detail)?,
            Outcome::Skipped { reason } => {
                w.create_element("skipped")
                    .with_attribute(("message", &*one_line(reason)))
                    .write_empty()?;
            }
        }
        for (tag, text) in [("system-out", &case.stdout), ("system-err", &case.stderr)] {
            if !text.is_empty() {
                w.create_element(tag)
                    .write_text_content(BytesText::new(&plain(text)))?;
            }
        }
        Ok(())
    })?;
    Ok(())
}

/// `<failure>` or `<error>` with its `type`, one-line `message` and the detail as its text.
fn verdict(
    w: &mut Writer<Vec<u8>>,
    tag: &str,
    kind: &str,
    message: &str,
    detail: &str,
) -> std::io::Result<()> {
    let element = w
        .create_element(tag)
        .with_attributes([("type", &*plain(kind)), ("message", &*one_line(message))]);
    if detail.is_empty() {
        element.write_empty()?;
    } else {
        element.write_text_content(BytesText::new(&plain(detail)))?;
    }
    Ok(())
}

/// `text` on one line (an attribute's line breaks would be read back as spaces anyway).
fn one_line(text: &str) -> String {
    plain(text)
        .split(['\r', '\n'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Milliseconds as JUnit seconds, three decimals (`1.250`).
fn seconds(ms: u64) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

/// Writes the suite's XML to `path` atomically: a temp file in the same directory (created
/// when missing), flushed, then renamed over `path`, so a reader never sees half a report.
///
/// # Errors
/// The directory, the temp file or the rename failed (the message names `path`).
pub fn write(path: &Path, suite: &Suite, timestamp: &str) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let bytes = render(suite, timestamp).context("render the JUnit report")?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)
        .with_context(|| format!("create the JUnit report's directory `{}`", dir.display()))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".junit-")
        .suffix(".xml.tmp")
        .tempfile_in(dir)
        .with_context(|| format!("create a temp file beside `{}`", path.display()))?;
    tmp.write_all(&bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .with_context(|| format!("write the JUnit report `{}`", path.display()))?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("write the JUnit report `{}`", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suite() -> Suite {
        let mut suite = Suite::new("skillforge verify /r @ HEAD");
        suite.property("commit", "abc");
        suite.property("empty", "");
        let mut pass = Case::new("skillforge.verify", "true", Outcome::Passed);
        pass.time_ms = 1250;
        let mut fail = Case::new(
            "skillforge.verify",
            "test \"$x\" < 3 && echo 'ok'",
            Outcome::Failed {
                kind: "failed".into(),
                message: "exit 1\nsecond line".into(),
                detail: "a <b> & \u{1b}[31mred\u{1b}[0m".into(),
            },
        );
        fail.stdout = "out ]]> \0".into();
        let skip = Case::new(
            "skillforge.verify",
            "later",
            Outcome::Skipped {
                reason: "not run: an earlier command failed".into(),
            },
        );
        suite.cases = vec![pass, fail, skip];
        suite
    }

    #[test]
    fn a_suite_renders_as_junit() {
        let xml = String::from_utf8(render(&suite(), "2026-01-02T03:04:05Z").unwrap()).unwrap();
        let expected = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="skillforge verify /r @ HEAD" tests="3" failures="1" errors="0" time="1.250">
  <testsuite name="skillforge verify /r @ HEAD" tests="3" failures="1" errors="0" skipped="1" time="1.250" timestamp="2026-01-02T03:04:05Z">
    <properties>
      <property name="commit" value="abc"/>
    </properties>
    <testcase name="true" classname="skillforge.verify" time="1.250"/>
    <testcase name="test &quot;$x&quot; &lt; 3 &amp;&amp; echo &apos;ok&apos;" classname="skillforge.verify" time="0.000">
      <failure type="failed" message="exit 1 second line">a &lt;b&gt; &amp; red</failure>
      <system-out>out ]]&gt; �</system-out>
    </testcase>
    <testcase name="later" classname="skillforge.verify" time="0.000">
      <skipped message="not run: an earlier command failed"/>
    </testcase>
  </testsuite>
</testsuites>
"#;
        assert_eq!(xml, expected);
    }

    #[test]
    fn seconds_have_three_decimals() {
        for (ms, expected) in [
            (0, "0.000"),
            (7, "0.007"),
            (1250, "1.250"),
            (61_001, "61.001"),
        ] {
            assert_eq!(seconds(ms), expected);
        }
    }

    #[test]
    fn the_report_replaces_the_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/report.xml");
        write(&path, &suite(), "t").unwrap();
        std::fs::write(&path, "old").unwrap();
        write(&path, &suite(), "t").unwrap();
        assert!(std::fs::read_to_string(&path).unwrap().starts_with("<?xml"));
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["report.xml"], "no temp file left behind");
    }
}
