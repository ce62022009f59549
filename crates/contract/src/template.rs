//! Agent-template Markdown: `---\n<yaml>\n---\n<body>` with the [`Metadata`] frontmatter,
//! and the metadata validation rules (facts §1 "Metadata", §2 check 3).
//!
//! A skill is a template: a `SKILL.md` with only the Agent Skills frontmatter (`name`,
//! `description`, optionally `license`, `compatibility`, `metadata`, `allowed-tools`) parses as
//! one. Every skillforge field it leaves out is derived ([`derive_missing`]): `id` from `name`
//! ([`id_from_name`]), `kind` = `agent-template`, `version` = 1 and the `DEFAULT_*` lists below.
//! The content is never rewritten; the derivation is a pure function of it, so the training
//! package, the optimizer and the candidate import all see the same metadata. Validation
//! collects every problem ([`TemplateError::Several`]) instead of stopping at the first.

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
/// What each `capabilities` value means, for error messages and `template show`.
pub const CAPABILITY_MEANINGS: &[(&str, &str)] = &[
    ("ask", "answers a request (`skillforge ask`, A/B, BINEVAL)"),
    ("review", "reviews a change"),
    ("implement", "makes a change in a repository"),
];
/// `capabilities` of a skill that leaves them out: every capability (a SKILL.md does not
/// restrict how it is used).
pub const DEFAULT_CAPABILITIES: &[&str] = &["ask", "review", "implement"];
/// `runtime_compatibility` of a skill that leaves it out: the agent CLIs that load `SKILL.md`
/// skills and that external optimizers accept.
pub const DEFAULT_RUNTIMES: &[&str] = &["claude", "codex"];
/// `tags` of a skill that leaves them out.
pub const DEFAULT_TAGS: &[&str] = &["skill"];
/// `inputs` of a skill that leaves them out.
pub const DEFAULT_INPUTS: &[&str] = &["task"];
/// `outputs` of a skill that leaves them out.
pub const DEFAULT_OUTPUTS: &[&str] = &["result"];

/// Agent-template metadata, the YAML frontmatter of a template and `template.metadata` /
/// `candidate.metadata` on the wire. Field order = Go struct order; only `evaluation` is
/// omitted when empty (facts §1 "Metadata").
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Metadata {
    /// Template id, `^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$`; absent = derived from `name` (`PDF Tools` → `pdf-tools`).
    #[serde(default)]
    pub id: String,
    /// Human name, non-empty (a SKILL.md's Agent Skills `name`).
    #[serde(default)]
    pub name: String,
    /// One-line description, non-empty (a SKILL.md's Agent Skills `description`).
    #[serde(default)]
    pub description: String,
    /// Always `agent-template` (default).
    #[serde(default)]
    pub kind: String,
    /// Always 1 (default).
    #[serde(default)]
    pub version: i64,
    /// Non-empty subset of `ask` (answers a request), `review` (reviews a change), `implement`
    /// (makes a change); default all three.
    #[serde(default, deserialize_with = "crate::omit::null_as_default")]
    pub capabilities: Vec<String>,
    /// Non-empty subset of `codex`, `claude`, `kimi`, `shell`, `opencode`; default `claude`, `codex`.
    #[serde(default, deserialize_with = "crate::omit::null_as_default")]
    pub runtime_compatibility: Vec<String>,
    /// Non-empty free-form tags; default `skill`.
    #[serde(default, deserialize_with = "crate::omit::null_as_default")]
    pub tags: Vec<String>,
    /// Non-empty list of input names; default `task`.
    #[serde(default, deserialize_with = "crate::omit::null_as_default")]
    pub inputs: Vec<String>,
    /// Non-empty list of output names; default `result`.
    #[serde(default, deserialize_with = "crate::omit::null_as_default")]
    pub outputs: Vec<String>,
    /// Optional evaluator settings (string → string), keys sorted as Go writes maps.
    #[serde(
        default,
        deserialize_with = "crate::omit::null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub evaluation: BTreeMap<String, String>,
}

/// A parsed agent template: validated, normalised metadata plus the Markdown body.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedTemplate {
    /// Normalised frontmatter (see [`normalize_metadata`]).
    pub metadata: Metadata,
    /// Everything after the closing `---` line, unchanged.
    pub body: String,
    /// The skillforge fields the frontmatter left out, in [`Metadata`] field order, each filled
    /// with its default by [`derive_missing`] (empty for a full agent template).
    pub derived: Vec<&'static str>,
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
    /// A frontmatter field has the wrong YAML type (e.g. a map where a list belongs).
    #[error("agent template {field}: {detail}")]
    FieldType {
        /// Field name.
        field: &'static str,
        /// What the YAML parser said.
        detail: String,
    },
    /// `id` was left out and cannot be derived from `name`.
    #[error(
        "agent template id cannot be derived from name {0:?}; give `id:` (lowercase letters, numbers, single dashes) or such a name"
    )]
    IdUnderivable(String),
    /// More than one problem; each on its own line.
    #[error("{} problems:\n{}", .0.len(), .0.iter().map(|e| format!("  - {e}")).collect::<Vec<_>>().join("\n"))]
    Several(Vec<TemplateError>),
}

impl TemplateError {
    /// Folds a list of problems: none → `Ok(())`, one → itself, more → [`TemplateError::Several`].
    ///
    /// # Errors
    /// When `problems` is not empty.
    pub fn from_problems(mut problems: Vec<TemplateError>) -> Result<(), TemplateError> {
        match problems.len() {
            0 => Ok(()),
            1 => Err(problems.remove(0)),
            _ => Err(TemplateError::Several(problems)),
        }
    }

    /// The frontmatter field a single problem is about, if any.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            TemplateError::IdRequired
            | TemplateError::IdInvalid(_)
            | TemplateError::IdUnderivable(_) => Some("id"),
            TemplateError::Kind(_) => Some("kind"),
            TemplateError::Version(_) => Some("version"),
            TemplateError::FieldRequired(f)
            | TemplateError::EmptyList(f)
            | TemplateError::EmptyListValue(f)
            | TemplateError::Unsupported { field: f, .. }
            | TemplateError::FieldType { field: f, .. } => Some(f),
            _ => None,
        }
    }

    /// Every single problem this error holds (a [`TemplateError::Several`] flattened).
    pub fn into_problems(self) -> Vec<TemplateError> {
        match self {
            TemplateError::Several(v) => v,
            e => vec![e],
        }
    }
}

/// Derives a template id from an Agent Skills `name`: lowercased, every run of characters other
/// than ASCII letters and digits becomes one dash, leading and trailing dashes dropped
/// (`"PDF Processing"` → `pdf-processing`). `None` when the result is not a valid id.
pub fn id_from_name(name: &str) -> Option<String> {
    let mut id = String::new();
    for c in name.trim().chars() {
        if c.is_ascii_alphanumeric() {
            id.push(c.to_ascii_lowercase());
        } else if !id.is_empty() && !id.ends_with('-') {
            id.push('-');
        }
    }
    let id = id.trim_end_matches('-').to_owned();
    is_valid_template_id(&id).then_some(id)
}

/// Fills every field `present` does not name with its default (see the module docs) and returns
/// the names of the fields it filled, in [`Metadata`] field order. `id` is derived from `name`
/// when [`id_from_name`] can; otherwise it stays empty and validation reports it.
pub fn derive_missing(metadata: &mut Metadata, present: &[&str]) -> Vec<&'static str> {
    let mut derived = Vec::new();
    let list = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let missing = |field: &str| !present.contains(&field);
    if (missing("id") || metadata.id.trim().is_empty())
        && let Some(id) = id_from_name(&metadata.name)
    {
        metadata.id = id;
        derived.push("id");
    }
    if missing("kind") {
        metadata.kind = AGENT_TEMPLATE_KIND.to_owned();
        derived.push("kind");
    }
    if missing("version") {
        metadata.version = AGENT_TEMPLATE_VERSION;
        derived.push("version");
    }
    let lists: [(&'static str, &mut Vec<String>, &[&str]); 5] = [
        (
            "capabilities",
            &mut metadata.capabilities,
            DEFAULT_CAPABILITIES,
        ),
        (
            "runtime_compatibility",
            &mut metadata.runtime_compatibility,
            DEFAULT_RUNTIMES,
        ),
        ("tags", &mut metadata.tags, DEFAULT_TAGS),
        ("inputs", &mut metadata.inputs, DEFAULT_INPUTS),
        ("outputs", &mut metadata.outputs, DEFAULT_OUTPUTS),
    ];
    for (field, values, default) in lists {
        if missing(field) {
            *values = list(default);
            derived.push(field);
        }
    }
    derived
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
            .map(|v| {
                if lower {
                    v.trim().to_lowercase()
                } else {
                    v.trim().to_owned()
                }
            })
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

/// Validates metadata and returns its normalised form. Checks, all of them: id, name,
/// description, kind, version, capabilities, runtime_compatibility, tags, inputs, outputs.
///
/// # Errors
/// The failing check as a [`TemplateError`] naming the field, or [`TemplateError::Several`]
/// with every failing check in the order above.
pub fn validate_metadata(metadata: &Metadata) -> Result<Metadata, TemplateError> {
    let m = normalize_metadata(metadata);
    TemplateError::from_problems(metadata_problems(&m))?;
    Ok(m)
}

/// Every problem of normalised metadata `m`, in field order (empty when valid).
fn metadata_problems(m: &Metadata) -> Vec<TemplateError> {
    let mut problems = Vec::new();
    if let Err(e) = validate_template_id(&m.id) {
        problems.push(e);
    }
    if m.name.is_empty() {
        problems.push(TemplateError::FieldRequired("name"));
    }
    if m.description.is_empty() {
        problems.push(TemplateError::FieldRequired("description"));
    }
    if m.kind != AGENT_TEMPLATE_KIND {
        problems.push(TemplateError::Kind(m.kind.clone()));
    }
    if m.version != AGENT_TEMPLATE_VERSION {
        problems.push(TemplateError::Version(m.version));
    }
    let capabilities = CAPABILITY_MEANINGS
        .iter()
        .map(|(v, what)| format!("{v} ({what})"))
        .collect::<Vec<_>>()
        .join(", ");
    check_list(
        &mut problems,
        "capabilities",
        &m.capabilities,
        Some((CAPABILITIES, &capabilities)),
    );
    check_list(
        &mut problems,
        "runtime_compatibility",
        &m.runtime_compatibility,
        Some((RUNTIMES, &RUNTIMES.join(", "))),
    );
    check_list(&mut problems, "tags", &m.tags, None);
    check_list(&mut problems, "inputs", &m.inputs, None);
    check_list(&mut problems, "outputs", &m.outputs, None);
    problems
}

fn check_list(
    problems: &mut Vec<TemplateError>,
    field: &'static str,
    values: &[String],
    allowed: Option<(&[&str], &str)>,
) {
    if values.is_empty() {
        problems.push(TemplateError::EmptyList(field));
        return;
    }
    for value in values {
        if value.is_empty() {
            problems.push(TemplateError::EmptyListValue(field));
        } else if let Some((allowed, explained)) = allowed
            && !allowed.contains(&value.as_str())
        {
            problems.push(TemplateError::Unsupported {
                field,
                value: value.clone(),
                allowed: explained.to_owned(),
            });
        }
    }
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

/// Parses agent-template Markdown: frontmatter split, YAML decode into [`Metadata`] field by
/// field, [`derive_missing`] for the fields it leaves out (a `SKILL.md` with only `name` and
/// `description` is a template), [`validate_metadata`], then a non-empty body. Keys other than
/// the [`Metadata`] fields (Agent Skills' `license`, `allowed-tools`, …) are kept in the content
/// and otherwise ignored.
///
/// # Errors
/// A frontmatter that does not split or is not a YAML mapping as its own [`TemplateError`];
/// otherwise every problem at once ([`TemplateError::Several`] when more than one): fields of the
/// wrong YAML type ([`TemplateError::FieldType`]), failed checks, an empty body.
pub fn parse_template(content: &str) -> Result<ParsedTemplate, TemplateError> {
    let (yaml, body) = split_frontmatter(content)?;
    let mut problems = Vec::new();
    let mut raw = Metadata::default();
    let mut present: Vec<&str> = Vec::new();
    if !yaml.trim().is_empty() {
        crate::limits::check_yaml(yaml)
            .map_err(|e| TemplateError::FrontmatterYaml(format!("the frontmatter {e}")))?;
        // Parsed one line down, so the parser's line numbers are the file's (the frontmatter
        // starts on line 2, after `---`).
        let value: serde_norway::Value = serde_norway::from_str(&format!("\n{yaml}"))
            .map_err(|e| {
                let mut said = e.to_string();
                // The usual cause: an unquoted value holding `: ` (`description: Use when: x`).
                if said.contains("mapping values are not allowed") {
                    said.push_str(
                        " (a value holding `: ` must be quoted: `description: \"Use when: a diff is open\"`)",
                    );
                }
                TemplateError::FrontmatterYaml(said)
            })?;
        let serde_norway::Value::Mapping(map) = value else {
            return Err(TemplateError::FrontmatterYaml(
                "the frontmatter is not a mapping of `key: value` lines".into(),
            ));
        };
        read_fields(&map, &mut raw, &mut present, &mut problems);
    }
    let derived = derive_missing(&mut raw, &present);
    if raw.id.trim().is_empty() && !raw.name.trim().is_empty() {
        problems.push(TemplateError::IdUnderivable(raw.name.trim().to_owned()));
    }
    let metadata = normalize_metadata(&raw);
    // A field of the wrong type, or an id that cannot be derived, is reported once.
    let reported: Vec<&'static str> = problems.iter().filter_map(TemplateError::field).collect();
    problems.extend(
        metadata_problems(&metadata)
            .into_iter()
            .filter(|p| p.field().is_none_or(|f| !reported.contains(&f))),
    );
    if body.trim().is_empty() {
        problems.push(TemplateError::EmptyBody);
    }
    TemplateError::from_problems(problems)?;
    Ok(ParsedTemplate {
        metadata,
        body: body.to_owned(),
        derived,
    })
}

/// The frontmatter's `name` as written (trimmed), when the content has a frontmatter mapping with
/// a string `name`; `None` otherwise (for checks beside [`parse_template`], e.g. a skill
/// directory's name).
pub fn frontmatter_name(content: &str) -> Option<String> {
    let (yaml, _) = split_frontmatter(content).ok()?;
    let value: serde_norway::Value = serde_norway::from_str(yaml).ok()?;
    value.get("name")?.as_str().map(|s| s.trim().to_owned())
}

/// The frontmatter keys a template may carry: the Agent Skills ones (`name`, `description`,
/// `license`, `allowed-tools`, `metadata`, `compatibility`) and skillforge's ([`Metadata`]'s
/// fields, derived when left out).
pub const FRONTMATTER_KEYS: &[&str] = &[
    "name",
    "description",
    "license",
    "allowed-tools",
    "metadata",
    "compatibility",
    "id",
    "kind",
    "version",
    "capabilities",
    "runtime_compatibility",
    "tags",
    "inputs",
    "outputs",
    "evaluation",
];

/// The frontmatter keys of `content` that are not [`FRONTMATTER_KEYS`], in the file's order
/// (a misspelled `versoin` is otherwise ignored and its field derived). Empty when the content
/// has no frontmatter mapping.
pub fn unknown_frontmatter_keys(content: &str) -> Vec<String> {
    let Ok((yaml, _)) = split_frontmatter(content) else {
        return Vec::new();
    };
    let Ok(serde_norway::Value::Mapping(map)) = serde_norway::from_str(yaml) else {
        return Vec::new();
    };
    map.keys()
        .map(|k| match k {
            serde_norway::Value::String(s) => s.clone(),
            other => serde_norway::to_string(other)
                .map(|t| t.trim().to_owned())
                .unwrap_or_default(),
        })
        .filter(|k| !FRONTMATTER_KEYS.contains(&k.as_str()))
        .collect()
}

/// Reads each [`Metadata`] field of the frontmatter `map` into `raw`, recording which were
/// present (a `null` value counts as absent) and a [`TemplateError::FieldType`] for each of the
/// wrong type.
fn read_fields(
    map: &serde_norway::Mapping,
    raw: &mut Metadata,
    present: &mut Vec<&'static str>,
    problems: &mut Vec<TemplateError>,
) {
    fn take<T: serde::de::DeserializeOwned>(
        map: &serde_norway::Mapping,
        field: &'static str,
        present: &mut Vec<&'static str>,
        problems: &mut Vec<TemplateError>,
    ) -> Option<T> {
        let value = map.get(field).filter(|v| !v.is_null())?;
        present.push(field);
        match serde_norway::from_value::<T>(value.clone()) {
            Ok(v) => Some(v),
            Err(e) => {
                problems.push(TemplateError::FieldType {
                    field,
                    detail: e.to_string(),
                });
                None
            }
        }
    }
    let scalar = |v: Option<serde_norway::Value>| -> Option<String> {
        match v? {
            serde_norway::Value::String(s) => Some(s),
            serde_norway::Value::Number(n) => Some(n.to_string()),
            serde_norway::Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    };
    for (field, slot) in [
        ("id", &mut raw.id),
        ("name", &mut raw.name),
        ("description", &mut raw.description),
        ("kind", &mut raw.kind),
    ] {
        if let Some(value) = take::<serde_norway::Value>(map, field, present, problems) {
            match scalar(Some(value)) {
                Some(s) => *slot = s,
                None => problems.push(TemplateError::FieldType {
                    field,
                    detail: "expected a string".into(),
                }),
            }
        }
    }
    if let Some(version) = take::<i64>(map, "version", present, problems) {
        raw.version = version;
    }
    for (field, slot) in [
        ("capabilities", &mut raw.capabilities),
        ("runtime_compatibility", &mut raw.runtime_compatibility),
        ("tags", &mut raw.tags),
        ("inputs", &mut raw.inputs),
        ("outputs", &mut raw.outputs),
    ] {
        if let Some(values) = take::<Vec<String>>(map, field, present, problems) {
            *slot = values;
        }
    }
    if let Some(evaluation) = take::<BTreeMap<String, String>>(map, "evaluation", present, problems)
    {
        raw.evaluation = evaluation;
    }
}

#[cfg(test)]
pub(crate) mod tests {

    /// A YAML error in the frontmatter names the line of the file, not of the frontmatter.
    #[test]
    fn a_frontmatter_yaml_error_names_the_files_line() {
        let e = parse_template("---\nname: x\ndescription: \"unclosed\n---\nbody\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 3"), "{e}");
        // An unquoted value holding `: ` says how to quote it.
        let e = parse_template("---\nname: x\ndescription: Use when: a diff is open\n---\nbody\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 3") && e.contains("must be quoted"), "{e}");
    }
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
        let parsed =
            parse_template(&template_text("planner", "Planner", "# Plan\nDo it.\n")).unwrap();
        assert_eq!(parsed.metadata.id, "planner");
        assert_eq!(
            parsed.metadata.runtime_compatibility,
            vec!["codex", "claude"]
        );
        // issue 38 item 7: OpenCode is a runtime a template may declare
        let opencode = parse_template(
            &template_text("planner", "Planner", "body\n").replace("[codex, claude]", "[opencode]"),
        )
        .expect("opencode is accepted");
        assert_eq!(opencode.metadata.runtime_compatibility, vec!["opencode"]);
        assert_eq!(parsed.body, "# Plan\nDo it.\n");
    }

    #[test]
    fn template_errors_name_the_field() {
        let good = template_text("planner", "Planner", "body\n");
        let table: Vec<(String, &str)> = vec![
            (String::new(), "template content is empty"),
            (
                "# no frontmatter".into(),
                "template must start with YAML frontmatter",
            ),
            (
                "---\nid: x\n".into(),
                "template frontmatter is missing closing ---",
            ),
            (
                template_text("planner", "Planner", "  \n"),
                "template body is empty",
            ),
            (
                template_text("Bad_Id", "Planner", "b"),
                "invalid agent template id \"Bad_Id\"",
            ),
            (
                template_text("planner", "''", "b"),
                "agent template name is required",
            ),
            (
                good.replace("kind: agent-template", "kind: agent"),
                "agent template kind must be",
            ),
            (
                good.replace("version: 1", "version: 2"),
                "agent template version must be 1, got 2",
            ),
            (
                good.replace("capabilities: [ask]", "capabilities: []"),
                "agent template capabilities must not be empty",
            ),
            (
                good.replace("capabilities: [ask]", "capabilities: [fly]"),
                "agent template capabilities has unsupported value \"fly\"",
            ),
            (
                good.replace("[codex, claude]", "[gpt]"),
                "agent template runtime_compatibility has unsupported value",
            ),
            (
                good.replace("[codex, claude]", "[opencode, gpt]"),
                "agent template runtime_compatibility has unsupported value \"gpt\"",
            ),
            (
                good.replace("outputs: [plan]", "outputs: []"),
                "agent template outputs must not be empty",
            ),
            (
                good.replace("tags: [planning]", "tags: {a: 1}"),
                "agent template tags: invalid type: map",
            ),
            (
                "---\n- a\n---\nb".into(),
                "parse template frontmatter: the frontmatter is not a mapping",
            ),
        ];
        for (content, want) in table {
            let err = parse_template(&content).unwrap_err().to_string();
            assert!(
                err.starts_with(want),
                "content {content:?}: got {err:?}, want prefix {want:?}"
            );
        }
    }

    #[test]
    fn a_skill_md_is_a_template_with_derived_defaults() {
        let skill = "---\nname: pdf-processing\ndescription: Extracts text from PDF files\nlicense: MIT\nallowed-tools: Read\n---\n# PDF\nUse pdftotext.\n";
        let parsed = parse_template(skill).unwrap();
        let m = &parsed.metadata;
        assert_eq!(
            (m.id.as_str(), m.name.as_str(), m.kind.as_str(), m.version),
            ("pdf-processing", "pdf-processing", "agent-template", 1)
        );
        assert_eq!(m.capabilities, DEFAULT_CAPABILITIES);
        assert_eq!(m.runtime_compatibility, DEFAULT_RUNTIMES);
        assert_eq!(
            (&m.tags, &m.inputs, &m.outputs),
            (
                &vec!["skill".to_owned()],
                &vec!["task".to_owned()],
                &vec!["result".to_owned()]
            )
        );
        assert_eq!(
            parsed.derived,
            [
                "id",
                "kind",
                "version",
                "capabilities",
                "runtime_compatibility",
                "tags",
                "inputs",
                "outputs"
            ]
        );
        // A full template derives nothing; one given field is kept, the rest derived.
        assert!(
            parse_template(&template_text("planner", "Planner", "b\n"))
                .unwrap()
                .derived
                .is_empty()
        );
        let tagged =
            parse_template("---\nname: Planner Bot\ndescription: d\ntags: [plans]\n---\nb\n")
                .unwrap();
        assert_eq!(
            (tagged.metadata.id.as_str(), tagged.metadata.tags.as_slice()),
            ("planner-bot", &["plans".to_owned()][..])
        );
        assert!(!tagged.derived.contains(&"tags"));
    }

    #[test]
    fn id_from_name_table() {
        for (name, want) in [
            ("pdf-processing", Some("pdf-processing")),
            ("PDF Processing", Some("pdf-processing")),
            ("  Plan / Review!  ", Some("plan-review")),
            ("a__b", Some("a-b")),
            ("1st", None),
            ("", None),
            ("日本", None),
        ] {
            assert_eq!(id_from_name(name).as_deref(), want, "name {name:?}");
        }
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let text =
            "---\nname: ''\nkind: agent\nversion: 2\ncapabilities: [fly]\ntags: {a: 1}\n---\n  \n";
        let err = parse_template(text).unwrap_err();
        let shown = err.to_string();
        let problems = err.into_problems();
        assert_eq!(problems.len(), 8, "{shown}");
        for want in [
            "agent template tags: invalid type: map",
            "agent template id is required",
            "agent template name is required",
            "agent template description is required",
            "agent template kind must be \"agent-template\", got \"agent\"",
            "agent template version must be 1, got 2",
            "capabilities has unsupported value \"fly\"; use one of ask (answers",
        ] {
            assert!(shown.contains(want), "missing {want:?} in:\n{shown}");
        }
        assert!(shown.starts_with("8 problems:\n  - "), "{shown}");
        assert!(
            matches!(problems.last(), Some(TemplateError::EmptyBody)),
            "{problems:?}"
        );
        let underivable = parse_template("---\nname: '1st'\ndescription: d\n---\nb\n")
            .unwrap_err()
            .to_string();
        assert!(
            underivable.starts_with("agent template id cannot be derived from name \"1st\""),
            "{underivable}"
        );
    }
}
