//! The commented `config.toml` of `skillforge init`, generated from the JSON Schema of
//! [`crate::config::Config`]: one `[section]` per table, every key commented out with its
//! description (which states its default) and its type. A unit test checks that every key the
//! schema has is in the text and that the text loads as the default configuration.

use serde_json::Value;

/// The commented configuration text.
pub fn commented_config() -> String {
    let mut schema =
        serde_json::to_value(schemars::schema_for!(crate::config::Config)).unwrap_or(Value::Null);
    skillforge_contract::schema::for_users(&mut schema);
    let defs = schema.get("$defs").cloned().unwrap_or(Value::Null);
    let mut out = String::from(
        "#:schema ./schemas/config.json\n\
         # skillforge configuration (`skillforge schema config` prints its JSON Schema).\n\
         # Every key is optional and shown commented out: to set one, uncomment its line and put a value\n\
         # of the type shown in place of `<type>` (e.g. `concurrency = 8`).\n\
         # Unknown keys are an error that names the key and this file.\n",
    );
    section(&mut out, "", &schema, &defs);
    out
}

/// Resolves a `$ref` (also inside a one-element-plus-null `anyOf`) against `defs`.
fn resolve<'a>(schema: &'a Value, defs: &'a Value) -> &'a Value {
    if let Some(name) = schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
    {
        return defs.get(name).unwrap_or(schema);
    }
    schema
}

fn section(out: &mut String, path: &str, schema: &Value, defs: &Value) {
    let Some(props) = resolve(schema, defs)
        .get("properties")
        .and_then(Value::as_object)
    else {
        return;
    };
    let mut tables = Vec::new();
    let mut wrote_header = false;
    for (key, prop) in props {
        let target = resolve(prop, defs);
        if target.get("properties").is_some() {
            tables.push((key, prop));
            continue;
        }
        if !wrote_header && !path.is_empty() {
            out.push_str(&format!("\n[{path}]\n"));
            comment(
                out,
                resolve(schema, defs)
                    .get("description")
                    .or_else(|| schema.get("description")),
            );
            wrote_header = true;
        }
        out.push('\n');
        comment(out, prop.get("description"));
        let described = prop
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_lowercase();
        if !["default", "absent", "unset"]
            .iter()
            .any(|w| described.contains(w))
        {
            out.push_str("# (default: unset)\n");
        }
        out.push_str(&format!("# {key} = <{}>\n", type_of(prop, defs)));
    }
    for (key, prop) in tables {
        // A table of tables (`[runners]`) gets no header of its own: only its sub-tables have keys.
        let sub = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        section(out, &sub, prop, defs);
    }
}

fn comment(out: &mut String, description: Option<&Value>) {
    if let Some(text) = description.and_then(Value::as_str) {
        let text = without_seed_refs(text);
        for line in text.lines() {
            out.push_str(&format!("# {}\n", line.trim_end()).replace("#  \n", "#\n"));
        }
    }
}

/// `text` without its `(seed: …)` references (where a rule comes from, for maintainers).
fn without_seed_refs(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(" (seed:") {
        out.push_str(&rest[..at]);
        let mut depth = 0usize;
        let mut end = rest.len();
        for (idx, c) in rest[at + 1..].char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = at + 1 + idx + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// A short type name: `boolean`, `integer`, `number`, `string`, `list of string`, or the
/// alternatives of an `anyOf` joined by `|`.
fn type_of(prop: &Value, defs: &Value) -> String {
    let prop = resolve(prop, defs);
    if let Some(alts) = prop
        .get("anyOf")
        .or_else(|| prop.get("oneOf"))
        .and_then(Value::as_array)
    {
        let names: Vec<String> = alts
            .iter()
            .filter(|a| a.get("type").and_then(Value::as_str) != Some("null"))
            .map(|a| type_of(a, defs))
            .collect();
        return names.join(" | ");
    }
    let ty = match prop.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("value")
            .to_owned(),
        _ if prop.get("properties").is_some() => "table".to_owned(),
        _ => "value".to_owned(),
    };
    match ty.as_str() {
        "array" => format!(
            "list of {}",
            prop.get("items")
                .map(|i| type_of(i, defs))
                .unwrap_or_else(|| "value".into())
        ),
        "object" => "table".to_owned(),
        _ => ty,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key of every table of the schema, as `section.key` (top-level tables by name).
    fn schema_keys() -> Vec<String> {
        fn walk(prefix: &str, schema: &Value, defs: &Value, out: &mut Vec<String>) {
            let Some(props) = resolve(schema, defs)
                .get("properties")
                .and_then(Value::as_object)
            else {
                return;
            };
            for (key, prop) in props {
                let name = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                if resolve(prop, defs).get("properties").is_some() {
                    walk(&name, prop, defs, out);
                } else {
                    out.push(name);
                }
            }
        }
        let schema = serde_json::to_value(schemars::schema_for!(crate::config::Config)).unwrap();
        let mut out = Vec::new();
        walk("", &schema, &schema["$defs"], &mut out);
        out
    }

    #[test]
    fn the_commented_config_names_every_key_under_its_table_and_loads() {
        let text = commented_config();
        let keys = schema_keys();
        assert!(keys.len() >= 40, "{keys:?}");
        for key in &keys {
            let (table, name) = key.rsplit_once('.').unwrap();
            let header = format!("\n[{table}]\n");
            let at = text
                .find(&header)
                .unwrap_or_else(|| panic!("no [{table}] in:\n{text}"));
            let body = &text[at + header.len()..];
            let body = &body[..body.find("\n[").unwrap_or(body.len())];
            assert!(
                body.contains(&format!("\n# {name} = <")),
                "key {key} missing from [{table}]:\n{body}"
            );
        }
        for key in [
            "skillopt.hard_verifiers_enabled",
            "skillopt.hard_verifier_commands",
            "skillopt.deterministic_checkers_enabled",
            "server.listen",
            "queue.keep_failed",
            "runners.container.host",
        ] {
            assert!(keys.contains(&key.to_owned()), "{key}");
        }
        let parsed: crate::config::Config =
            toml::from_str(&text).expect("the commented file is a valid, empty config");
        assert!(parsed.queue.url.is_none());
    }

    #[test]
    fn seed_references_are_left_out() {
        assert_eq!(
            without_seed_refs("`[x]` (seed: A, \"b (c)\"). Every key"),
            "`[x]`. Every key"
        );
        assert!(!commented_config().contains("(seed:"));
    }

    #[test]
    fn an_uncommented_key_is_read() {
        let text = commented_config().replace("# concurrency = <integer>", "concurrency = 2");
        let parsed: crate::config::Config = toml::from_str(&text).unwrap();
        assert_eq!(parsed.worker.concurrency, Some(2));
    }
}
