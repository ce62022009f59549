//! JSON bytes as Go's `encoding/json` writes them, so exported packages are byte-compatible
//! with the Go exporter (facts §1: `json.MarshalIndent(pkg, "", "  ") + "\n"`).
//!
//! Differences from serde_json's defaults that this module removes:
//! * Go escapes `<`, `>`, `&` as `\u003c`, `\u003e`, `\u0026` and U+2028/U+2029 as `\u2028`/`\u2029`.
//! * Go writes floats in the shortest round-trip form without a trailing `.0` (`1`, not `1.0`) and
//!   switches to exponent form below 1e-6 or from 1e21 (`1e-7`, `1e+21`).
//!
//! Known remaining difference: a `raw` field (Go `json.RawMessage`) keeps its source number text in
//! Go; here it passes through `serde_json::Value`, so `1.0` inside raw JSON is written `1`.

use std::io;

use serde::Serialize;
use serde_json::ser::{CharEscape, CompactFormatter, Formatter, PrettyFormatter};

/// Serialises `value` as Go's `json.MarshalIndent(value, "", "  ")` followed by `"\n"`:
/// 2-space indentation, struct field order, Go escaping and float formatting.
/// This is the exported training package's exact byte form (seed "Training Package").
///
/// # Errors
/// Only if `value`'s `Serialize` impl fails (e.g. a map with non-string keys).
pub fn serialize_package<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    let mut out = to_go_json_pretty(value)?;
    out.push('\n');
    Ok(out)
}

/// Go's `json.MarshalIndent(value, "", "  ")` without a trailing newline.
///
/// # Errors
/// As [`serialize_package`].
pub fn to_go_json_pretty<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    write_with(value, GoFormatter(PrettyFormatter::with_indent(b"  ")))
}

/// Go's `json.Marshal(value)`: compact, Go escaping and float formatting.
///
/// # Errors
/// As [`serialize_package`].
pub fn to_go_json_compact<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    write_with(value, GoFormatter(CompactFormatter))
}

fn write_with<T: Serialize + ?Sized, F: Formatter>(
    value: &T,
    formatter: F,
) -> Result<String, serde_json::Error> {
    let mut buf = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, formatter);
    value.serialize(&mut ser)?;
    // serde_json only writes valid UTF-8 built from `str` fragments and ASCII escapes.
    Ok(String::from_utf8(buf)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// Go's float text: shortest round-trip digits, `'f'` form in [1e-6, 1e21), else `'e'` form with
/// an explicit `+` on positive exponents (`strconv.AppendFloat` + encoding/json's cleanup).
fn go_float(value: f64) -> String {
    if !value.is_finite() {
        return "null".to_owned();
    }
    let abs = value.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let text = format!("{value:e}");
        match text.split_once('e') {
            Some((mantissa, exp)) if !exp.starts_with('-') => format!("{mantissa}e+{exp}"),
            _ => text,
        }
    } else {
        format!("{value}")
    }
}

/// Wraps a serde_json formatter with Go's string escaping and float formatting.
struct GoFormatter<F>(F);

impl<F: Formatter> Formatter for GoFormatter<F> {
    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        writer.write_all(go_float(value).as_bytes())
    }

    fn write_f32<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        // Go formats float32 with 32-bit shortest digits; f32's Display gives the same digits.
        let wide: f64 = format!("{value}").parse().unwrap_or(f64::from(value));
        writer.write_all(go_float(wide).as_bytes())
    }

    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (idx, ch) in fragment.char_indices() {
            let escape = match ch {
                '<' => "\\u003c",
                '>' => "\\u003e",
                '&' => "\\u0026",
                '\u{2028}' => "\\u2028",
                '\u{2029}' => "\\u2029",
                _ => continue,
            };
            writer.write_all(&fragment.as_bytes()[start..idx])?;
            writer.write_all(escape.as_bytes())?;
            start = idx + ch.len_utf8();
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }

    fn write_char_escape<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        char_escape: CharEscape,
    ) -> io::Result<()> {
        self.0.write_char_escape(writer, char_escape)
    }

    fn begin_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.begin_array(writer)
    }

    fn end_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_array(writer)
    }

    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.0.begin_array_value(writer, first)
    }

    fn end_array_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_array_value(writer)
    }

    fn begin_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.begin_object(writer)
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_object(writer)
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.0.begin_object_key(writer, first)
    }

    fn end_object_key<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_object_key(writer)
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.begin_object_value(writer)
    }

    fn end_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_object_value(writer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_escapes_html_characters_and_line_separators() {
        let value = json!({"s": "<a href=\"x\">&amp;</a>\u{2028}\u{2029}é\n\t"});
        assert_eq!(
            to_go_json_compact(&value).unwrap(),
            r#"{"s":"\u003ca href=\"x\"\u003e\u0026amp;\u003c/a\u003e\u2028\u2029é\n\t"}"#
        );
    }

    #[test]
    fn go_float_formatting() {
        let table: &[(f64, &str)] = &[
            (1.0, "1"),
            (0.0, "0"),
            (0.5, "0.5"),
            (-2.25, "-2.25"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1e20, "100000000000000000000"),
            (1e21, "1e+21"),
            (1.5e-7, "1.5e-7"),
            (1e-6, "0.000001"),
            (123456.789, "123456.789"),
        ];
        for (value, want) in table {
            assert_eq!(go_float(*value), *want, "value {value}");
        }
    }

    #[test]
    fn marshal_indent_shape_with_trailing_newline() {
        let value = json!({"kind": "k", "items": [], "obj": {}, "nested": [1, {"a": 2.0}]});
        let want = "{\n  \"kind\": \"k\",\n  \"items\": [],\n  \"obj\": {},\n  \"nested\": [\n    1,\n    {\n      \"a\": 2\n    }\n  ]\n}\n";
        assert_eq!(serialize_package(&value).unwrap(), want);
    }
}
