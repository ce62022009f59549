//! Counting items (issues, clones, over-threshold functions) in a tool's output, as a profile's
//! `count` table describes.
//!
//! Formats: `json` (one JSON document; trailing text after it is ignored), `json_lines` (one
//! JSON document per non-empty line, as `cargo --message-format=json` prints), `lines` (non-empty
//! lines, optionally only those containing a marker) and `number_after` (the integer following a
//! prefix on the last line that has it, e.g. dupl's `Found total 3 clone groups.`).
//!
//! For the JSON formats, `select` walks from each document to the items: a step `*` expands an
//! array's elements or an object's values, any other step takes that object key (or array
//! index). Missing keys and `null` yield no items. `filters` then keep the items whose dotted
//! `path` satisfies `op` (`eq`, `ne`, `gt`, `ge`, `not_null`) against `value`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How to count items in a tool's output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "format", rename_all = "snake_case", deny_unknown_fields)]
pub enum CountSpec {
    /// One JSON document.
    Json {
        /// Path steps from the document to the items; empty = the document itself is one item.
        #[serde(default)]
        select: Vec<String>,
        /// Conditions every counted item meets.
        #[serde(default)]
        filters: Vec<Filter>,
    },
    /// One JSON document per non-empty line.
    JsonLines {
        /// Path steps from each line's document to the items; empty = the document itself.
        #[serde(default)]
        select: Vec<String>,
        /// Conditions every counted item meets.
        #[serde(default)]
        filters: Vec<Filter>,
    },
    /// Non-empty lines.
    Lines {
        /// Count only lines containing this text.
        #[serde(default)]
        contains: Option<String>,
    },
    /// The unsigned integer right after `prefix` on the last line containing it.
    NumberAfter {
        /// Text preceding the number, e.g. `Found total `.
        prefix: String,
    },
}

/// A condition on one item: the value at dotted `path` compared with `value` by `op`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Filter {
    /// Dotted path inside the item, e.g. `message.level`.
    pub path: String,
    /// Comparison.
    pub op: FilterOp,
    /// Operand for `eq`, `ne` (any JSON value) and `gt`, `ge` (a number); unused by `not_null`.
    #[serde(default)]
    pub value: Value,
}

/// Comparison of a [`Filter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FilterOp {
    /// Equal to `value`.
    Eq,
    /// Present and not equal to `value` (a missing path fails).
    Ne,
    /// A number greater than `value`.
    Gt,
    /// A number greater than or equal to `value`.
    Ge,
    /// Present and not `null`.
    NotNull,
}

impl CountSpec {
    /// Checks the spec; `Err` names what is wrong.
    pub(crate) fn validate(&self) -> Result<(), String> {
        match self {
            CountSpec::Json { filters, .. } | CountSpec::JsonLines { filters, .. } => {
                for filter in filters {
                    if filter.path.is_empty() {
                        return Err("a filter has an empty path".into());
                    }
                    if matches!(filter.op, FilterOp::Gt | FilterOp::Ge) && !filter.value.is_number()
                    {
                        return Err(format!(
                            "filter on `{}` compares with a non-number",
                            filter.path
                        ));
                    }
                }
                Ok(())
            }
            CountSpec::Lines { .. } => Ok(()),
            CountSpec::NumberAfter { prefix } if prefix.is_empty() => {
                Err("number_after needs a prefix".into())
            }
            CountSpec::NumberAfter { .. } => Ok(()),
        }
    }

    /// Counts items in `output`.
    ///
    /// # Errors
    /// A lowercase reason when the output does not have the expected shape (not JSON, empty, no
    /// line with the prefix).
    pub fn count(&self, output: &str) -> Result<u64, String> {
        match self {
            CountSpec::Json { select, filters } => {
                let doc = serde_json::Deserializer::from_str(output)
                    .into_iter::<Value>()
                    .next()
                    .ok_or_else(|| "empty output, expected a json document".to_string())?
                    .map_err(|e| format!("output is not json: {e}"))?;
                Ok(count_items(&doc, select, filters))
            }
            CountSpec::JsonLines { select, filters } => {
                let mut total = 0;
                for (idx, line) in output
                    .lines()
                    .enumerate()
                    .filter(|(_, l)| !l.trim().is_empty())
                {
                    let doc: Value = serde_json::from_str(line)
                        .map_err(|e| format!("output line {} is not json: {e}", idx + 1))?;
                    total += count_items(&doc, select, filters);
                }
                Ok(total)
            }
            CountSpec::Lines { contains } => Ok(output
                .lines()
                .filter(|l| !l.trim().is_empty())
                .filter(|l| contains.as_ref().is_none_or(|c| l.contains(c.as_str())))
                .count() as u64),
            CountSpec::NumberAfter { prefix } => {
                let line = output
                    .lines()
                    .rfind(|l| l.contains(prefix.as_str()))
                    .ok_or_else(|| format!("no output line contains `{prefix}`"))?;
                let after = &line[line.find(prefix.as_str()).unwrap_or(0) + prefix.len()..];
                let digits: String = after
                    .trim_start()
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                digits
                    .parse()
                    .map_err(|_| format!("no number after `{prefix}` in `{line}`"))
            }
        }
    }
}

fn count_items(doc: &Value, select: &[String], filters: &[Filter]) -> u64 {
    select_items(doc, select, filters).len() as u64
}

/// The items `select` reaches from `doc` that meet every filter.
fn select_items<'v>(doc: &'v Value, select: &[String], filters: &[Filter]) -> Vec<&'v Value> {
    let mut items = vec![doc];
    for step in select {
        items = items
            .into_iter()
            .flat_map(|item| -> Vec<&Value> {
                match (step.as_str(), item) {
                    ("*", Value::Array(values)) => values.iter().collect(),
                    ("*", Value::Object(map)) => map.values().collect(),
                    (key, Value::Object(map)) => map.get(key).into_iter().collect(),
                    (key, Value::Array(values)) => key
                        .parse::<usize>()
                        .ok()
                        .and_then(|i| values.get(i))
                        .into_iter()
                        .collect(),
                    _ => Vec::new(),
                }
            })
            .filter(|v| !v.is_null())
            .collect();
    }
    items
        .into_iter()
        .filter(|item| filters.iter().all(|f| f.matches(item)))
        .collect()
}

/// The value at dotted `path` inside `item` (object keys, array indices).
fn at<'v>(item: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.').try_fold(item, |v, key| match v {
        Value::Object(map) => map.get(key),
        Value::Array(values) => key.parse::<usize>().ok().and_then(|i| values.get(i)),
        _ => None,
    })
}

/// Where a counted item is, as dotted paths inside each item (a profile's `locate` table): the
/// file, the 1-based line and, optionally, the message. JSON formats only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Locate {
    /// Path of the file name, e.g. `filename`.
    pub file: String,
    /// Path of the 1-based line number, e.g. `location.row`.
    pub line: String,
    /// Path of the item's message, e.g. `message`.
    #[serde(default)]
    pub message: Option<String>,
}

/// One located item: `{file, line, message}` (the file as the tool printed it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Location {
    /// The file.
    pub file: String,
    /// The 1-based line.
    pub line: u64,
    /// The tool's message ('' when the profile names none).
    pub message: String,
}

impl CountSpec {
    /// The first `limit` counted items of `output` that `locate` can place (a file and a line),
    /// in output order; empty for the non-JSON formats or output that does not parse.
    pub fn locate(&self, output: &str, locate: &Locate, limit: usize) -> Vec<Location> {
        let place = |item: &Value| -> Option<Location> {
            let file = at(item, &locate.file)?.as_str()?.to_owned();
            let line = at(item, &locate.line)?.as_u64()?;
            let message = locate
                .message
                .as_deref()
                .and_then(|m| at(item, m))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            Some(Location {
                file,
                line,
                message,
            })
        };
        let docs: Vec<Value> = match self {
            CountSpec::Json { .. } => serde_json::Deserializer::from_str(output)
                .into_iter::<Value>()
                .next()
                .and_then(Result::ok)
                .into_iter()
                .collect(),
            CountSpec::JsonLines { .. } => output
                .lines()
                .filter(|l| !l.trim().is_empty())
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect(),
            CountSpec::Lines { .. } | CountSpec::NumberAfter { .. } => return Vec::new(),
        };
        let (CountSpec::Json { select, filters } | CountSpec::JsonLines { select, filters }) = self
        else {
            return Vec::new();
        };
        docs.iter()
            .flat_map(|doc| select_items(doc, select, filters))
            .filter_map(place)
            .take(limit)
            .collect()
    }
}

impl Filter {
    fn matches(&self, item: &Value) -> bool {
        let found = at(item, &self.path);
        let number = |v: &Value| v.as_f64();
        match (self.op, found) {
            (FilterOp::Eq, Some(v)) => *v == self.value,
            (FilterOp::Eq, None) => self.value.is_null(),
            (FilterOp::Ne, Some(v)) => *v != self.value,
            (FilterOp::Gt, Some(v)) => {
                matches!((number(v), number(&self.value)), (Some(a), Some(b)) if a > b)
            }
            (FilterOp::Ge, Some(v)) => {
                matches!((number(v), number(&self.value)), (Some(a), Some(b)) if a >= b)
            }
            (FilterOp::NotNull, Some(v)) => !v.is_null(),
            (FilterOp::Ne | FilterOp::Gt | FilterOp::Ge | FilterOp::NotNull, None) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    //! Table tests against captured (abridged) tool outputs; the spec used for each is the one in
    //! the shipped profile, so a profile edit that breaks parsing fails here.

    use super::*;
    use crate::checker::Checker;
    use crate::profile::shipped_profiles;

    fn shipped(language: &str, checker: Checker, tool: &str) -> CountSpec {
        let profile = shipped_profiles()
            .iter()
            .find(|p| p.language == language)
            .unwrap();
        profile.dimensions[&checker]
            .tools
            .iter()
            .find(|t| t.name == tool)
            .unwrap()
            .count
            .clone()
    }

    fn check(spec: &CountSpec, output: &str, expected: Result<u64, &str>) {
        let got = spec.count(output);
        match expected {
            Ok(n) => assert_eq!(got, Ok(n), "{output}"),
            Err(fragment) => {
                let err = got.expect_err(output);
                assert!(err.contains(fragment), "{err:?} lacks {fragment:?}");
            }
        }
    }

    const CLIPPY: &str = r#"{"reason":"compiler-artifact","package_id":"x","target":{"name":"x"},"fresh":true}
{"reason":"compiler-message","package_id":"x","message":{"level":"warning","code":{"code":"clippy::needless_return","explanation":null},"message":"unneeded `return` statement","spans":[{"file_name":"src/lib.rs"}]}}
{"reason":"compiler-message","package_id":"x","message":{"level":"warning","code":{"code":"unused_variables","explanation":null},"message":"unused variable: `a`","spans":[{"file_name":"src/lib.rs"}]}}
{"reason":"compiler-message","package_id":"x","message":{"level":"warning","code":null,"message":"2 warnings emitted","spans":[]}}
{"reason":"compiler-message","package_id":"x","message":{"level":"error","code":{"code":"E0425"},"message":"cannot find value","spans":[{"file_name":"src/lib.rs"}]}}
{"reason":"build-finished","success":true}
"#;

    #[test]
    fn clippy_json_lines_counts_coded_warnings_only() {
        let spec = shipped("rust", Checker::Lint, "clippy");
        check(&spec, CLIPPY, Ok(2));
        check(
            &spec,
            "{\"reason\":\"build-finished\",\"success\":true}\n",
            Ok(0),
        );
        check(&spec, "warning: not json\n", Err("line 1 is not json"));
    }

    #[test]
    fn ruff_json_array() {
        let spec = shipped("python", Checker::Lint, "ruff");
        let ruff = r#"[{"cell":null,"code":"F401","filename":"/w/a.py","message":"`os` imported but unused","location":{"row":1,"column":8}},
{"cell":null,"code":"E711","filename":"/w/a.py","message":"Comparison to `None`","location":{"row":3,"column":6}}]"#;
        check(&spec, ruff, Ok(2));
        check(&spec, "[]", Ok(0));
        check(&spec, "", Err("empty output"));
        check(&spec, "error: Failed to parse", Err("not json"));
    }

    #[test]
    fn radon_cc_counts_functions_and_methods_over_15_not_classes() {
        let spec = shipped("python", Checker::Complexity, "radon");
        let radon = r#"{"a.py": [
 {"type": "function", "rank": "C", "complexity": 16, "name": "big", "lineno": 1, "closures": []},
 {"type": "function", "rank": "C", "complexity": 15, "name": "edge", "lineno": 40, "closures": []},
 {"type": "class", "rank": "D", "complexity": 22, "name": "K", "lineno": 60, "methods": []},
 {"type": "method", "rank": "D", "complexity": 21, "name": "m", "classname": "K", "lineno": 61, "closures": []}],
 "b.py": [{"type": "function", "rank": "A", "complexity": 1, "name": "f", "lineno": 1, "closures": []}],
 "broken.py": {"error": "invalid syntax"}}"#;
        check(&spec, radon, Ok(2));
        check(&spec, "{}", Ok(0));
    }

    #[test]
    fn lizard_warning_lines() {
        let spec = shipped("python", Checker::Complexity, "lizard");
        let lizard = "a.py:1: warning: big has 40 NLOC, 16 CCN, 300 token, 2 PARAM, 45 length\n\
                      a.py:60: warning: K::m has 50 NLOC, 21 CCN, 400 token, 1 PARAM, 55 length\n\n";
        check(&spec, lizard, Ok(2));
        check(&spec, "", Ok(0));
    }

    #[test]
    fn golangci_lint_issues_including_null() {
        let spec = shipped("go", Checker::Lint, "golangci-lint");
        check(
            &spec,
            r#"{"Issues":[{"FromLinter":"errcheck","Text":"Error return value is not checked"},{"FromLinter":"unused","Text":"func `f` is unused"},{"FromLinter":"govet","Text":"printf"}],"Report":{"Linters":[]}}"#,
            Ok(3),
        );
        check(&spec, r#"{"Issues":null,"Report":{}}"#, Ok(0));
        // v2 may print a text summary after the document; it is ignored.
        check(&spec, "{\"Issues\":[]}\n0 issues.\n", Ok(0));
    }

    #[test]
    fn gocyclo_lines() {
        let spec = shipped("go", Checker::Complexity, "gocyclo");
        check(
            &spec,
            "18 main run cmd/main.go:12:1\n16 x (*T).Do x/t.go:30:1\n",
            Ok(2),
        );
        check(&spec, "", Ok(0));
    }

    #[test]
    fn dupl_total_clone_groups() {
        let spec = shipped("go", Checker::Duplication, "dupl");
        let dupl = "found 2 clones:\n  a.go:3,20\n  b.go:5,22\n\nFound total 3 clone groups.\n";
        check(&spec, dupl, Ok(3));
        check(&spec, "Found total 0 clone groups.\n", Ok(0));
        check(
            &spec,
            "dupl: open x.go: no such file\n",
            Err("no output line contains"),
        );
    }

    #[test]
    fn eslint_counts_messages_across_files() {
        let spec = shipped("javascript", Checker::Lint, "eslint");
        let eslint = r#"[{"filePath":"/w/a.js","messages":[{"ruleId":"no-unused-vars","severity":2},{"ruleId":"semi","severity":1}],"errorCount":1,"warningCount":1},
{"filePath":"/w/b.ts","messages":[],"errorCount":0,"warningCount":0},
{"filePath":"/w/c.js","messages":[{"ruleId":"eqeqeq","severity":2}],"errorCount":1,"warningCount":0}]"#;
        check(&spec, eslint, Ok(3));
    }

    #[test]
    fn jscpd_report_duplicates() {
        let spec = shipped("javascript", Checker::Duplication, "jscpd");
        let report = r#"{"statistics":{"total":{"clones":2}},"duplicates":[{"format":"javascript","lines":12,"firstFile":{"name":"a.js"},"secondFile":{"name":"b.js"}},{"format":"typescript","lines":9,"firstFile":{"name":"c.ts"},"secondFile":{"name":"c.ts"}}]}"#;
        check(&spec, report, Ok(2));
        check(&spec, r#"{"statistics":{},"duplicates":[]}"#, Ok(0));
    }

    #[test]
    fn filter_ops() {
        let item: Value = serde_json::json!({"a": {"n": 3, "s": "x", "z": null}, "list": [5]});
        for (path, op, value, expected) in [
            ("a.n", FilterOp::Gt, serde_json::json!(2), true),
            ("a.n", FilterOp::Gt, serde_json::json!(3), false),
            ("a.n", FilterOp::Ge, serde_json::json!(3), true),
            ("a.s", FilterOp::Eq, serde_json::json!("x"), true),
            ("a.s", FilterOp::Ne, serde_json::json!("x"), false),
            ("a.missing", FilterOp::Ne, serde_json::json!("x"), false),
            ("a.z", FilterOp::NotNull, Value::Null, false),
            ("a.n", FilterOp::NotNull, Value::Null, true),
            ("list.0", FilterOp::Eq, serde_json::json!(5), true),
            ("a.s", FilterOp::Gt, serde_json::json!(1), false),
        ] {
            let filter = Filter {
                path: path.into(),
                op,
                value,
            };
            assert_eq!(filter.matches(&item), expected, "{filter:?}");
        }
    }

    #[test]
    fn located_items_are_the_counted_ones_with_a_file_and_a_line() {
        let ruff = r#"[{"filename":"/w/src/a.py","location":{"row":3,"column":1},"message":"unused import","code":"F401"},
                       {"filename":"/w/src/b.py","location":{"row":9,"column":5},"message":"undefined name","code":"F821"}]"#;
        let spec = CountSpec::Json {
            select: vec!["*".into()],
            filters: vec![],
        };
        let locate = Locate {
            file: "filename".into(),
            line: "location.row".into(),
            message: Some("message".into()),
        };
        let found = spec.locate(ruff, &locate, 50);
        assert_eq!(
            found.len() as u64,
            spec.count(ruff).unwrap(),
            "every counted item is placed"
        );
        assert_eq!(
            found[1],
            Location {
                file: "/w/src/b.py".into(),
                line: 9,
                message: "undefined name".into()
            }
        );
        assert_eq!(spec.locate(ruff, &locate, 1).len(), 1, "at most the limit");
        // clippy's JSON lines: only the counted diagnostics (warnings with a lint code) are placed.
        let clippy = concat!(
            r#"{"reason":"compiler-message","message":{"level":"warning","code":{"code":"clippy::x"},"message":"needless borrow","spans":[{"file_name":"src/lib.rs","line_start":7}]}}"#,
            "\n",
            r#"{"reason":"compiler-message","message":{"level":"warning","code":null,"message":"summary","spans":[]}}"#,
            "\n",
            r#"{"reason":"build-finished","success":true}"#,
            "\n",
        );
        let rust =
            crate::profile::LanguageProfile::parse("rust.toml", include_str!("../tools/rust.toml"))
                .unwrap();
        let tool = &rust.dimensions[&crate::checker::Checker::Lint].tools[0];
        let found = tool
            .count
            .locate(clippy, tool.locate.as_ref().expect("clippy is located"), 50);
        assert_eq!(
            found,
            vec![Location {
                file: "src/lib.rs".into(),
                line: 7,
                message: "needless borrow".into()
            }]
        );
        assert_eq!(
            CountSpec::Lines { contains: None }.locate("a\nb\n", &locate, 50),
            vec![],
            "line counts have no places"
        );
    }
}
