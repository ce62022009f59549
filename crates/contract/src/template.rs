//! Agent-template Markdown: `---\n<yaml>\n---\n<body>` with the [`Metadata`] frontmatter,
//! and the metadata validation rules (facts §1 "Metadata", §2 check 3).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `kind` every agent template declares.
pub const AGENT_TEMPLATE_KIND: &str = "agent-template";
/// The only metadata `version` accepted.
pub const AGENT_TEMPLATE_VERSION: i64 = 1;
/// Allowed `capabilities` values.
pub const CAPABILITIES: &[&str] = &["ask", "review", "implement"];
/// Allowed `runtime_compatibility` values. Older external optimizers accept only
/// codex|claude|shell; `kimi` is accepted here as newer ones do (facts §9), and `opencode`
/// because skillforge runs OpenCode as an agent runtime (issue 38 item 7; an external optimizer
/// that predates it may refuse a package declaring it).
pub const RUNTIMES: &[&str] = &["codex", "claude", "kimi", "shell", "opencode"];

/// Agent-template metadata, the YAML frontmatter of a template and `template.metadata` /
/// `candidate.metadata` on the wire. Field order = Go struct order; only `evaluation` is
/// omitted when empty (facts §1 "Metadata").
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Metadata {
    /// Template id, `^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$`.
    #[serde(default)]
    pub id: String,
    /// Human name, non-empty.
    #[serde(default)]
    pub name: String,
    /// One-line description, non-empty.
    #[serde(default)]
    pub description: String,
    /// Always `agent-template`.
    #[serde(default)]
    pub kind: String,
    /// Always 1.
    #[serde(default)]
    pub version: i64,
    /// Non-empty subset of `ask`, `review`, `implement`.
    #[serde(default, deserialize_with = "crate::omit::null_as_default")]
    pub capabilities: Vec<String>,
    /// Non-empty subset of `codex`, `claude`, `kimi`, `shell`, `opencode`.
    #[serde(default, deserialize_with = "crate::omit::null_as_default")]
    pub runtime_compatibility: Vec<String>,
    /// Non-empty free-form tags.
    #[serde(default, deserialize_with = "crate::omit::null_as_default")]
    pub tags: Vec<String>,
    /// Non-empty list of input names.
    #[serde(default, deserialize_with = "crate::omit::null_as_default")]
    pub inputs: Vec<String>,
    /// Non-empty list of output names.
    #[serde(default, deserialize_with = "crate::omit::null_as_default")]
    pub outputs: Vec<String>,
    /// Optional evaluator settings (string → string), keys sorted as Go writes maps.
    #[serde(default, deserialize_with = "crate::omit::null_as_default", skip_serializing_if = "BTreeMap::is_empty")]
    pub evaluation: BTreeMap<String, String>,
}

/// A parsed agent template: validated, normalised metadata plus the Markdown body.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedTemplate {
    /// Normalised frontmatter (see [`normalize_metadata`]).
    pub metadata: Metadata,
    /// Everything after the closing `---` line, unchanged.
    pub body: String,
}

/// Why a template or its metadata is invalid. Messages name the field (facts §2, check 3).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// Content is empty or whitespace.
    #[error("template content is empty")]
    EmptyContent,
    /// First line is not `---`.
    #[error("template must start with YAML frontmatter")]
    MissingFrontmatter,
    /// No closing `---` line.
    #[error("template frontmatter is missing closing ---")]
    UnclosedFrontmatter,
    /// The frontmatter is not YAML of the metadata shape.
    #[error("parse template frontmatter: {0}")]
    FrontmatterYaml(String),
    /// Nothing but whitespace after the frontmatter.
    #[error("template body is empty")]
    EmptyBody,
    /// `id` empty.
    #[error("agent template id is required")]
    IdRequired,
    /// `id` does not match the id pattern.
    #[error("invalid agent template id {0:?}; use lowercase letters, numbers, and single dashes")]
    IdInvalid(String),
    /// A required string field (`name`, `description`) is empty.
    #[error("agent template {0} is required")]
    FieldRequired(&'static str),
    /// `kind` is not `agent-template`.
    #[error("agent template kind must be \"agent-template\", got {0:?}")]
    Kind(String),
    /// `version` is not 1.
    #[error("agent template version must be 1, got {0}")]
    Version(i64),
    /// A required list is empty.
    #[error("agent template {0} must not be empty")]
    EmptyList(&'static str),
    /// An unknown value in `capabilities` or `runtime_compatibility`.
    #[error("agent template {field} has unsupported value {value:?}; use one of {allowed}")]
    Unsupported {
        /// Field name.
        field: &'static str,
        /// Offending value.
        value: String,
        /// Allowed values, comma-separated.
        allowed: String,
    },
    /// An empty entry inside a list.
    #[error("agent template {0} contains an empty value")]
    EmptyListValue(&'static str),
}

/// Whether `id` matches `^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$` (facts §1).
pub fn is_valid_template_id(id: &str) -> bool {
    let mut chars = id.chars();
    if !chars.next().is_some_and(|c| c.is_ascii_lowercase()) {
        return false;
    }
    let mut prev_dash = false;
    for c in chars {
        match c {
            'a'..='z' | '0'..='9' => prev_dash = false,
            '-' if !prev_dash => prev_dash = true,
            _ => return false,
        }
    }
    !prev_dash
}

/// Checks a template id: empty → [`TemplateError::IdRequired`], bad pattern → [`TemplateError::IdInvalid`].
///
/// # Errors
/// As above.
pub fn validate_template_id(id: &str) -> Result<(), TemplateError> {
    let id = id.trim();
    if id.is_empty() {
        return Err(TemplateError::IdRequired);
    }
    if !is_valid_template_id(id) {
        return Err(TemplateError::IdInvalid(id.to_owned()));
    }
    Ok(())
}

/// Normalises metadata for comparison and storage: trims every string, lowercases `kind`,
/// `capabilities` and `runtime_compatibility`. Our choice: the Go code compares the JSON of
/// normalised metadata (facts §2) without saying what normalising does; this is the minimum.
pub fn normalize_metadata(metadata: &Metadata) -> Metadata {
    let trim_all = |values: &[String], lower: bool| -> Vec<String> {
        values
            .iter()
            .map(|v| if lower { v.trim().to_lowercase() } else { v.trim().to_owned() })
            .collect()
    };
    Metadata {
        id: metadata.id.trim().to_owned(),
        name: metadata.name.trim().to_owned(),
        description: metadata.description.trim().to_owned(),
        kind: metadata.kind.trim().to_lowercase(),
        version: metadata.version,
        capabilities: trim_all(&metadata.capabilities, true),
        runtime_compatibility: trim_all(&metadata.runtime_compatibility, true),
        tags: trim_all(&metadata.tags, false),
        inputs: trim_all(&metadata.inputs, false),
        outputs: trim_all(&metadata.outputs, false),
        evaluation: metadata
            .evaluation
            .iter()
            .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
            .collect(),
    }
}

/// Validates metadata and returns its normalised form. Checks in order: id, name,
/// description, kind, version, capabilities, runtime_compatibility, tags, inputs, outputs.
///
/// # Errors
/// The first failing check as a [`TemplateError`] naming the field.
pub fn validate_metadata(metadata: &Metadata) -> Result<Metadata, TemplateError> {
    let m = normalize_metadata(metadata);
    validate_template_id(&m.id)?;
    if m.name.is_empty() {
        return Err(TemplateError::FieldRequired("name"));
    }
    if m.description.is_empty() {
        return Err(TemplateError::FieldRequired("description"));
    }
    if m.kind != AGENT_TEMPLATE_KIND {
        return Err(TemplateError::Kind(m.kind));
    }
    if m.version != AGENT_TEMPLATE_VERSION {
        return Err(TemplateError::Version(m.version));
    }
    check_list("capabilities", &m.capabilities, Some(CAPABILITIES))?;
    check_list("runtime_compatibility", &m.runtime_compatibility, Some(RUNTIMES))?;
    check_list("tags", &m.tags, None)?;
    check_list("inputs", &m.inputs, None)?;
    check_list("outputs", &m.outputs, None)?;
    Ok(m)
}

fn check_list(field: &'static str, values: &[String], allowed: Option<&[&str]>) -> Result<(), TemplateError> {
    if values.is_empty() {
        return Err(TemplateError::EmptyList(field));
    }
    for value in values {
        if value.is_empty() {
            return Err(TemplateError::EmptyListValue(field));
        }
        if let Some(allowed) = allowed
            && !allowed.contains(&value.as_str())
        {
            return Err(TemplateError::Unsupported { field, value: value.clone(), allowed: allowed.join(", ") });
        }
    }
    Ok(())
}

/// Splits `content` into YAML frontmatter and body. Accepts `\n` or `\r\n` line ends; the first
/// line must be `---` and the frontmatter ends at the next line that is exactly `---`.
///
/// # Errors
/// [`TemplateError::EmptyContent`], [`TemplateError::MissingFrontmatter`], [`TemplateError::UnclosedFrontmatter`].
pub fn split_frontmatter(content: &str) -> Result<(&str, &str), TemplateError> {
    if content.trim().is_empty() {
        return Err(TemplateError::EmptyContent);
    }
    let rest = content
        .strip_prefix("---\n")
        .or_else(|| content.strip_prefix("---\r\n"))
        .ok_or(TemplateError::MissingFrontmatter)?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end_matches(['\r', '\n']) == "---" {
            return Ok((&rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    Err(TemplateError::UnclosedFrontmatter)
}

/// Parses agent-template Markdown: frontmatter split, YAML decode into [`Metadata`],
/// [`validate_metadata`], then a non-empty body.
///
/// # Errors
/// Any [`TemplateError`]; YAML errors as [`TemplateError::FrontmatterYaml`].
pub fn parse_template(content: &str) -> Result<ParsedTemplate, TemplateError> {
    let (yaml, body) = split_frontmatter(content)?;
    let raw: Metadata = if yaml.trim().is_empty() {
        Metadata::default()
    } else {
        crate::limits::check_yaml(yaml).map_err(|e| TemplateError::FrontmatterYaml(format!("the frontmatter {e}")))?;
        serde_norway::from_str(yaml).map_err(|e| TemplateError::FrontmatterYaml(e.to_string()))?
    };
    let metadata = validate_metadata(&raw)?;
    if body.trim().is_empty() {
        return Err(TemplateError::EmptyBody);
    }
    Ok(ParsedTemplate { metadata, body: body.to_owned() })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn template_text(id: &str, name: &str, body: &str) -> String {
        format!(
            "---\nid: {id}\nname: {name}\ndescription: Plans work\nkind: agent-template\nversion: 1\ncapabilities: [ask]\nruntime_compatibility: [codex, claude]\ntags: [planning]\ninputs: [task]\noutputs: [plan]\n---\n{body}"
        )
    }

    #[test]
    fn template_id_pattern() {
        for (id, ok) in [
            ("planner", true),
            ("a1-b2-c3", true),
            ("x", true),
            ("", false),
            ("1abc", false),
            ("Planner", false),
            ("a--b", false),
            ("a-", false),
            ("-a", false),
            ("a_b", false),
        ] {
            assert_eq!(is_valid_template_id(id), ok, "id {id:?}");
        }
    }

    #[test]
    fn parses_valid_template() {
        let parsed = parse_template(&template_text("planner", "Planner", "# Plan\nDo it.\n")).unwrap();
        assert_eq!(parsed.metadata.id, "planner");
        assert_eq!(parsed.metadata.runtime_compatibility, vec!["codex", "claude"]);
        // issue 38 item 7: OpenCode is a runtime a template may declare
        let opencode = parse_template(&template_text("planner", "Planner", "body\n").replace("[codex, claude]", "[opencode]")).expect("opencode is accepted");
        assert_eq!(opencode.metadata.runtime_compatibility, vec!["opencode"]);
        assert_eq!(parsed.body, "# Plan\nDo it.\n");
    }

    #[test]
    fn template_errors_name_the_field() {
        let good = template_text("planner", "Planner", "body\n");
        let table: Vec<(String, &str)> = vec![
            (String::new(), "template content is empty"),
            ("# no frontmatter".into(), "template must start with YAML frontmatter"),
            ("---\nid: x\n".into(), "template frontmatter is missing closing ---"),
            (template_text("planner", "Planner", "  \n"), "template body is empty"),
            (template_text("Bad_Id", "Planner", "b"), "invalid agent template id \"Bad_Id\""),
            (template_text("planner", "''", "b"), "agent template name is required"),
            (good.replace("kind: agent-template", "kind: agent"), "agent template kind must be"),
            (good.replace("version: 1", "version: 2"), "agent template version must be 1, got 2"),
            (good.replace("capabilities: [ask]", "capabilities: []"), "agent template capabilities must not be empty"),
            (good.replace("capabilities: [ask]", "capabilities: [fly]"), "agent template capabilities has unsupported value \"fly\""),
            (good.replace("[codex, claude]", "[gpt]"), "agent template runtime_compatibility has unsupported value"),
            (good.replace("[codex, claude]", "[opencode, gpt]"), "agent template runtime_compatibility has unsupported value \"gpt\""),
            (good.replace("outputs: [plan]\n", ""), "agent template outputs must not be empty"),
            (good.replace("tags: [planning]", "tags: {a: 1}"), "parse template frontmatter"),
        ];
        for (content, want) in table {
            let err = parse_template(&content).unwrap_err().to_string();
            assert!(err.starts_with(want), "content {content:?}: got {err:?}, want prefix {want:?}");
        }
    }
}
