//! The blind Markdown feedback packet as a library: export a review run into a packet directory and
//! import a filled `feedback.yml` back (seed "Markdown Feedback Packet"; facts §4; S-85, S-94, S-95).
//!
//! `skillforge feedback markdown export|import` and the train workflow's review publication and
//! feedback sync both call [`export_packet`] and [`import_packet`]; the CLI only parses arguments
//! and prints.
//!
//! A packet directory holds `index.md` (instructions and item links), `items/NNN-<item>.md` (one
//! file per item with its blind options), the editable `feedback.yml` and the hidden
//! `.assignments.json` that maps the blind labels back to artifacts.
//!
//! **Architecture Invariant:** packets never carry outcome-bearing details (current first place,
//! ranking stability, recommended mode). Before any feedback exists there are none to show (S-84
//! withholds them), and after feedback exists they must stay hidden (S-85); so an export is a pure
//! function of the run's items and artifacts, whatever feedback the store holds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use skillforge_contract::{
    ASSIGNMENTS_FILE, AssignmentOption, Assignments, BlindAssignment, FEEDBACK_FILE,
    ResolvedFeedback, blind_assignment, is_ranked_mode, parse_assignments, parse_feedback_yml,
    resolve_feedback,
};
use skillforge_store::blobs::BlobStore;
use skillforge_store::feedback::{WriteCounts, event_created_at_now, write_resolved};
use skillforge_store::review::{EvalRunRow, ReviewItem, get_run, list_items};
use skillforge_store::{Store, StoreError};

/// `source` of events imported from a Markdown packet (facts §4).
pub const MARKDOWN_SOURCE: &str = "markdown";
/// Index file of a packet.
pub const INDEX_FILE: &str = "index.md";
/// Directory of the per-item files.
pub const ITEMS_DIR: &str = "items";

/// Why a packet could not be exported or imported.
#[derive(Debug, thiserror::Error)]
pub enum PacketError {
    /// The input is wrong (unknown run, unfilled or invalid feedback, stale packet): exit 2 material.
    #[error("{0}")]
    Invalid(String),
    /// A file could not be read or written.
    #[error("{0}")]
    Io(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What [`export_packet`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketExport {
    /// Run id.
    pub run_id: String,
    /// The packet directory.
    pub dir: PathBuf,
    /// Number of items.
    pub n_items: usize,
    /// Whether the items are ranked (else A/B).
    pub is_ranked: bool,
    /// The exact text written to `feedback.yml` (an unfilled template).
    pub feedback_template: String,
}

/// What [`import_packet`] stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketImport {
    /// Run id.
    pub run_id: String,
    /// Reviewer of the events.
    pub reviewer: String,
    /// `source_url` of the events: the canonical packet directory.
    pub source_url: String,
    /// Rows inserted / updated.
    pub counts: WriteCounts,
    /// What was read of `feedback.yml`, so that a file cut short (but still valid YAML) shows
    /// in the import's report instead of importing silently.
    pub read: FeedbackRead,
    /// Entries that say what to change: ranked items naming `useful_traits`, `rejected_traits`
    /// or `required_improvements`, A/B items with `reasoning`. Zero means rankings alone, from
    /// which the built-in optimizer learns nothing.
    pub actionable: usize,
}

/// The item ids of a filled packet's ranked entries that rank options but say nothing about what
/// to change (no `useful_traits`, `rejected_traits` or `required_improvements`), and how many
/// entries say what to change ([`PacketImport::actionable`]); validated as [`resolve_packet`]
/// validates, nothing written.
///
/// # Errors
/// As [`resolve_packet`].
pub async fn unactionable_items(
    store: &Store,
    dir: &Path,
) -> Result<(Vec<String>, usize), PacketError> {
    let (resolved, _) = resolve_packet(store, dir, None).await?;
    let actionable = resolved.entries.iter().filter(|e| is_actionable(e)).count();
    let ranked_only = resolved
        .entries
        .iter()
        .filter_map(|e| match e {
            skillforge_contract::ResolvedEntry::Ranked(r) if !is_actionable(e) => {
                Some(r.item_id.clone())
            }
            _ => None,
        })
        .collect();
    Ok((ranked_only, actionable))
}

/// Whether `entry` says what to change, not only which option won.
fn is_actionable(entry: &skillforge_contract::ResolvedEntry) -> bool {
    match entry {
        skillforge_contract::ResolvedEntry::Choice { reasoning, .. } => {
            !reasoning.trim().is_empty()
        }
        skillforge_contract::ResolvedEntry::Ranked(r) => {
            !r.useful_traits.is_empty()
                || !r.rejected_traits.is_empty()
                || !r.required_improvements.is_empty()
        }
    }
}

/// Size, line count and SHA-256 of the `feedback.yml` an import read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedbackRead {
    /// Bytes.
    pub bytes: usize,
    /// Lines (newline-terminated or not).
    pub lines: usize,
    /// SHA-256 of the bytes, lowercase hex.
    pub sha256: String,
    /// Items the file answers.
    pub items: usize,
}

impl FeedbackRead {
    fn of(text: &str, items: usize) -> Self {
        Self {
            bytes: text.len(),
            lines: text.lines().count(),
            sha256: skillforge_stage::fs::sha256_hex(text.as_bytes()),
            items,
        }
    }
}

/// Why an item cannot be reviewed as its run's mode requires ([`item_assignment`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssignmentError {
    /// A ranked run's item without options.
    #[error("item `{item_id}` has no options, but run `{run_id}` is ranked")]
    NoOptions {
        /// The item.
        item_id: String,
        /// Its run.
        run_id: String,
    },
    /// An A/B item without both artifacts.
    #[error("item `{item_id}` needs both a baseline and a candidate artifact")]
    NoPair {
        /// The item.
        item_id: String,
    },
    /// A ranked run's item with another number of options than the run's.
    #[error("item `{item_id}` has {n_options} options, run `{run_id}` expects {options_count}")]
    OptionCount {
        /// The item.
        item_id: String,
        /// Its options.
        n_options: usize,
        /// Its run.
        run_id: String,
        /// The run's `options_count`.
        options_count: i64,
    },
}

/// The assignment of one item (facts §4): an A/B item is blinded by
/// [`blind_assignment`]; a ranked item lists its options by label. In a ranked run every item must
/// have exactly `options_count` options.
///
/// # Errors
/// [`AssignmentError`] naming the item when it cannot be reviewed as the run's mode requires.
pub fn item_assignment(
    run: &EvalRunRow,
    item: &ReviewItem,
) -> Result<BlindAssignment, AssignmentError> {
    let row = &item.item;
    if item.options.is_empty() {
        if is_ranked_mode(&run.mode, run.options_count) {
            return Err(AssignmentError::NoOptions {
                item_id: row.item_id.clone(),
                run_id: run.id.clone(),
            });
        }
        if row.baseline_artifact_id.is_empty() || row.candidate_artifact_id.is_empty() {
            return Err(AssignmentError::NoPair {
                item_id: row.item_id.clone(),
            });
        }
        return Ok(blind_assignment(
            &run.id,
            &row.item_id,
            &row.baseline_artifact_id,
            &row.candidate_artifact_id,
        ));
    }
    let n_options = i64::try_from(item.options.len()).unwrap_or(i64::MAX);
    if is_ranked_mode(&run.mode, run.options_count) && n_options != run.options_count {
        return Err(AssignmentError::OptionCount {
            item_id: row.item_id.clone(),
            n_options: item.options.len(),
            run_id: run.id.clone(),
            options_count: run.options_count,
        });
    }
    Ok(BlindAssignment {
        item_id: row.item_id.clone(),
        options: item
            .options
            .iter()
            .map(|o| AssignmentOption {
                label: o.label.clone(),
                artifact_id: o.artifact_id.clone(),
                role: o.role.clone(),
                metadata_json: o.metadata_json.clone(),
            })
            .collect(),
        ..Default::default()
    })
}

/// File name of the `index`-th item (0-based) under `items/`: `NNN-<item id with anything but
/// ASCII letters, digits, `.`, `_`, `-` replaced by `-`>.md`.
pub fn item_file_name(index: usize, item_id: &str) -> String {
    let slug: String = item_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("{:03}-{}.md", index + 1, slug.trim_matches('.'))
}

/// A fenced block that cannot be closed early by the content: one backtick more than the longest
/// run inside, at least three.
fn fenced(content: &str) -> String {
    let mut longest = 0;
    let mut current = 0;
    for c in content.chars() {
        current = if c == '`' { current + 1 } else { 0 };
        longest = longest.max(current);
    }
    let fence = "`".repeat((longest + 1).max(3));
    let body = content.strip_suffix('\n').unwrap_or(content);
    format!("{fence}\n{body}\n{fence}\n")
}

/// What a reviewer sees of one artifact: its text fenced, or a note for non-text bytes.
fn artifact_block(bytes: &[u8], media_type: &str) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => fenced(text),
        Err(_) => format!(
            "_Binary artifact ({media_type}, {} bytes); not shown inline._\n",
            bytes.len()
        ),
    }
}

fn preview_url(metadata_json: &str) -> Option<String> {
    let value: Value = serde_json::from_str(metadata_json).ok()?;
    value.get("preview_url")?.as_str().map(str::to_owned)
}

/// Artifact id → (bytes, media type), read before rendering.
type Contents = BTreeMap<String, (Vec<u8>, String)>;

/// The blind assignments of `run`'s `items`; an item that does not fit the run's mode is
/// [`PacketError::Invalid`], its message starting with `what` (`"publish"`, …).
fn run_assignments(
    run: &EvalRunRow,
    items: &[ReviewItem],
    what: &str,
) -> Result<Assignments, PacketError> {
    Ok(Assignments {
        run_id: run.id.clone(),
        items: items
            .iter()
            .map(|item| item_assignment(run, item))
            .collect::<Result<_, _>>()
            .map_err(|e| PacketError::Invalid(format!("{what} review run `{}`: {e}", run.id)))?,
    })
}

/// The bytes and media type of every artifact `assignments` show (options A/B and ranked
/// options), by artifact id.
///
/// # Errors
/// [`PacketError::Invalid`] for an unregistered artifact; [`PacketError::Io`] for an unreadable
/// blob; [`PacketError::Store`].
async fn artifact_contents(
    store: &Store,
    blobs: &BlobStore,
    assignments: &Assignments,
) -> Result<Contents, PacketError> {
    let mut contents = Contents::new();
    for assignment in &assignments.items {
        let ids = [assignment.a.clone(), assignment.b.clone()]
            .into_iter()
            .chain(assignment.options.iter().map(|o| o.artifact_id.clone()))
            .filter(|id| !id.is_empty());
        for id in ids {
            let row = skillforge_store::artifacts::get_artifact(store.pool(), &id)
                .await?
                .ok_or_else(|| {
                    PacketError::Invalid(format!("artifact `{id}` is not registered"))
                })?;
            let bytes = blobs
                .get(&row.hash)
                .map_err(|e| PacketError::Io(format!("read artifact `{id}`: {e}")))?;
            contents.insert(id, (bytes, row.media_type));
        }
    }
    Ok(contents)
}

fn render_item(
    index: usize,
    item: &ReviewItem,
    assignment: &BlindAssignment,
    contents: &Contents,
) -> Result<String, PacketError> {
    let row = &item.item;
    let title = if row.title.is_empty() {
        row.item_id.as_str()
    } else {
        row.title.as_str()
    };
    let mut out = format!(
        "# Item {}: {title}\n\nItem id: `{}`\n",
        index + 1,
        row.item_id
    );
    if let Some(metadata) = serde_json::from_str::<Value>(&row.metadata_json)
        .ok()
        .filter(|m| m.as_object().is_some_and(|o| !o.is_empty()))
    {
        out.push_str(&format!(
            "\n## Context\n\n{}",
            fenced(&serde_json::to_string_pretty(&metadata).unwrap_or_default())
        ));
    }
    let sides: Vec<(String, &str, String)> = if assignment.options.is_empty() {
        vec![
            ("A".into(), assignment.a.as_str(), String::new()),
            ("B".into(), assignment.b.as_str(), String::new()),
        ]
    } else {
        assignment
            .options
            .iter()
            .map(|o| {
                (
                    o.label.to_uppercase(),
                    o.artifact_id.as_str(),
                    o.metadata_json.clone(),
                )
            })
            .collect()
    };
    for (label, artifact_id, metadata_json) in sides {
        let (bytes, media_type) = contents.get(artifact_id).ok_or_else(|| {
            PacketError::Invalid(format!("artifact `{artifact_id}` is not registered"))
        })?;
        out.push_str(&format!("\n## Option {label}\n\n"));
        if let Some(url) = preview_url(&metadata_json) {
            out.push_str(&format!("Preview: <{url}>\n\n"));
        }
        out.push_str(&artifact_block(bytes, media_type));
    }
    Ok(out)
}

fn render_index(
    run: &EvalRunRow,
    items: &[ReviewItem],
    files: &[String],
    is_ranked: bool,
) -> String {
    let mut out = format!(
        "# skillforge review packet: {}\n\nTemplate version: `{}` · mode: {} · items: {}\n\n## How to review\n\n",
        run.id,
        run.template_version_id,
        run.mode,
        items.len()
    );
    if is_ranked {
        out.push_str(
            "Open each item file and compare its options. In `feedback.yml`, give each item a `ranking` of every \
             option from best to worst, such as `C > A = D > B` (`>`, `,` or `|` separate ranks; `=` joins equal \
             options). A ranking says which option won, not what to change: the optimizer learns only from \
             `useful_traits` and `rejected_traits` (lists keyed by option label, such as `C: [short summary first]`) \
             and `required_improvements` (a list), so fill at least one of them for every item you rank. Optionally \
             add `quality` (poor, acceptable, strong), `continue_mode` (explore, refine, distill, validate), \
             `promote` (yes, no) and `reasoning`. Set `choice: skip` to skip an item.\n",
        );
    } else {
        out.push_str(
            "Open each item file and compare Option A with Option B. In `feedback.yml`, set each item's `choice` to \
             exactly one of `a`, `b`, `tie`, `neither` or `skip`, and write in `reasoning` what made the better \
             option better (or, for `neither`, what both lack). The choice alone says which option won, not what \
             to change: the optimizer learns only from `reasoning`.\n",
        );
    }
    out.push_str(
        "\nSet `reviewer` at the top of `feedback.yml`, then run \
         `skillforge feedback markdown import --packet <this directory>` (for a train session's packet, \
         `skillforge train continue --session <session>` imports it for you). Every item needs an answer; \
         nothing is stored unless the whole file is valid. Do not edit `.assignments.json`.\n\n## Items\n\n",
    );
    for (index, (item, file)) in items.iter().zip(files).enumerate() {
        let row = &item.item;
        let title = if row.title.is_empty() {
            row.item_id.as_str()
        } else {
            row.title.as_str()
        };
        out.push_str(&format!(
            "{}. [{title}]({ITEMS_DIR}/{file}) (`{}`)\n",
            index + 1,
            row.item_id
        ));
    }
    out
}

/// The unfilled `feedback.yml`: every key a reviewer may set, empty, in facts §4 order. A/B items
/// get `choice` and `reasoning` (the A/B event stores only those, facts §1 `FeedbackEvent`, so
/// `quality`, `continue_mode` and `promote` are not offered there); ranked items get `choice`,
/// `ranking`, the trait and improvement placeholders the optimizer learns from, `quality`,
/// `continue_mode`, `promote` and `reasoning`.
fn feedback_template(run: &EvalRunRow, assignments: &Assignments) -> Result<String, PacketError> {
    let quote = |s: &str| {
        serde_norway::to_string(s)
            .map(|text| text.trim_end().to_owned())
            .map_err(|e| PacketError::Invalid(format!("render feedback.yml: {e}")))
    };
    let mut yaml = format!("run_id: {}\nreviewer: ''\nitems:\n", quote(&run.id)?);
    for assignment in &assignments.items {
        yaml.push_str(&format!(
            "- item_id: {}\n  choice: ''\n",
            quote(&assignment.item_id)?
        ));
        if assignment.options.is_empty() {
            yaml.push_str(
                "  reasoning: ''  # what the better option did; the optimizer learns from this\n",
            );
        } else {
            yaml.push_str(
                "  ranking: ''\n  \
                 useful_traits: {}  # {LABEL: [trait to keep]}; the optimizer learns from this\n  \
                 rejected_traits: {}  # {LABEL: [trait to avoid]}; the optimizer learns from this\n  \
                 required_improvements: []  # [change every output needs]; the optimizer learns from this\n  \
                 quality: ''\n  continue_mode: ''\n  promote: ''\n  reasoning: ''\n",
            );
        }
    }
    // The template must parse as it is written (and be refused only for its empty answers).
    parse_feedback_yml(&yaml)
        .map_err(|e| PacketError::Invalid(format!("render feedback.yml: {e}")))?;
    Ok(format!(
        "# skillforge feedback for review run {}: set reviewer, then answer every item (see index.md).\n\
         # A/B items: choice is one of a, b, tie, neither, skip; reasoning is what the optimizer learns from.\n\
         # Ranked items: ranking such as \"C > A = D > B\"; choice: skip skips the item. The optimizer learns\n\
         # from useful_traits, rejected_traits and required_improvements, not from the ranking alone.\n{yaml}",
        run.id
    ))
}

fn write(path: &Path, text: &str) -> Result<(), PacketError> {
    std::fs::write(path, text)
        .map_err(|e| PacketError::Io(format!("write `{}`: {e}", path.display())))
}

/// Loads run `run_id` or says how to create it.
async fn load_run(store: &Store, run_id: &str) -> Result<EvalRunRow, PacketError> {
    get_run(store.pool(), run_id).await?.ok_or_else(|| {
        PacketError::Invalid(format!(
            "review run `{run_id}` not found; create it with `skillforge review create`"
        ))
    })
}

/// The schema of `feedback.yml` in a home, `schemas/feedback-yml.json` (the file `init` writes).
pub const FEEDBACK_SCHEMA_FILE: &str = "schemas/feedback-yml.json";

/// The `# yaml-language-server: $schema=…` line that points an editor at `feedback.yml`'s
/// schema in `home` (issue 35 item 4), writing `home/schemas/feedback-yml.json` when it is
/// missing. The path is relative to the packet `dir` when `dir` is inside the home, else
/// absolute.
///
/// # Errors
/// [`PacketError::Io`] when the schema cannot be written.
fn feedback_schema_line(home: &Path, dir: &Path) -> Result<String, PacketError> {
    let schema = home.join(FEEDBACK_SCHEMA_FILE);
    if !schema.exists() {
        if let Some(parent) = schema.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| PacketError::Io(format!("create `{}`: {e}", parent.display())))?;
        }
        let text = skillforge_contract::schema::render_schema(&schemars::schema_for!(
            skillforge_contract::FeedbackFile
        ));
        write(&schema, &text)?;
    }
    let pointer = match dir.strip_prefix(home) {
        Ok(inside) => format!(
            "{}{FEEDBACK_SCHEMA_FILE}",
            "../".repeat(inside.components().count())
        ),
        Err(_) => schema.display().to_string(),
    };
    Ok(format!("# yaml-language-server: $schema={pointer}\n"))
}

/// Writes the blind packet of run `run_id` into `dir` (created): `index.md`, `items/*.md`,
/// `.assignments.json` and an unfilled `feedback.yml` whose first line names its schema in
/// `home` (written there when missing). Of an auto-trace run only the items with
/// artifacts (added by `review item add`) are in the packet; harvested items have none. Refuses to overwrite a packet whose
/// `feedback.yml` exists unless `force`.
///
/// # Errors
/// [`PacketError::Invalid`] for an unknown run, a run without items, an item that does not fit
/// the run's mode, an unregistered artifact or an existing `feedback.yml`; [`PacketError::Io`]
/// when a file or blob cannot be read or written; [`PacketError::Store`].
pub async fn export_packet(
    store: &Store,
    blobs: &BlobStore,
    home: &Path,
    run_id: &str,
    dir: &Path,
    force: bool,
) -> Result<PacketExport, PacketError> {
    let run = load_run(store, run_id).await?;
    let mut items = list_items(store.pool(), &run.id).await?;
    // An auto-trace run's harvested items (one per PR and leg) carry no artifacts to show; a
    // person reviews the items added to it with `review item add`, so the packet holds those.
    let is_auto_trace = run
        .metadata()
        .and_then(|m| m.get("feedback_source").cloned())
        == Some(Value::from(crate::harvest::AUTOMATIC_TRACE));
    if is_auto_trace {
        items.retain(|i| {
            !i.options.is_empty()
                || !i.item.baseline_artifact_id.is_empty()
                || !i.item.candidate_artifact_id.is_empty()
        });
    }
    if items.is_empty() {
        return Err(PacketError::Invalid(format!(
            "review run `{}` has no items{}; add them with `skillforge review item add`",
            run.id,
            if is_auto_trace {
                " with artifacts to review"
            } else {
                ""
            }
        )));
    }
    let assignments = run_assignments(&run, &items, "export packet for")?;
    let feedback_path = dir.join(FEEDBACK_FILE);
    if feedback_path.exists() && !force {
        return Err(PacketError::Invalid(format!(
            "`{}` already exists; import it first or pass --force to overwrite the packet",
            feedback_path.display()
        )));
    }
    let contents = artifact_contents(store, blobs, &assignments).await?;
    let items_dir = dir.join(ITEMS_DIR);
    std::fs::create_dir_all(&items_dir).map_err(|e| {
        PacketError::Io(format!(
            "create packet directory `{}`: {e}",
            items_dir.display()
        ))
    })?;
    let mut files = Vec::new();
    for (index, (item, assignment)) in items.iter().zip(&assignments.items).enumerate() {
        let name = item_file_name(index, &item.item.item_id);
        write(
            &items_dir.join(&name),
            &render_item(index, item, assignment, &contents)?,
        )?;
        files.push(name);
    }
    let is_ranked = assignments.items.iter().any(|a| !a.options.is_empty());
    write(
        &dir.join(INDEX_FILE),
        &render_index(&run, &items, &files, is_ranked),
    )?;
    let mut assignments_text = serde_json::to_string_pretty(&assignments)
        .map_err(|e| PacketError::Io(format!("encode assignments: {e}")))?;
    assignments_text.push('\n');
    write(&dir.join(ASSIGNMENTS_FILE), &assignments_text)?;
    let template = feedback_schema_line(home, dir)? + &feedback_template(&run, &assignments)?;
    write(&feedback_path, &template)?;
    Ok(PacketExport {
        run_id: run.id,
        dir: dir.to_path_buf(),
        n_items: items.len(),
        is_ranked,
        feedback_template: template,
    })
}

/// Checks that a packet still describes the run as stored: every assigned item exists and shows the
/// same artifacts (A/B) or the same option labels and artifacts (ranked).
fn check_packet_matches(
    run: &EvalRunRow,
    assignments: &Assignments,
    items: &[ReviewItem],
) -> Result<(), String> {
    for assignment in &assignments.items {
        let item_id = assignment.item_id.trim();
        let item = items
            .iter()
            .find(|i| i.item.item_id == item_id)
            .ok_or_else(|| format!("packet item `{item_id}` is not in review run `{}`", run.id))?;
        let stale = || {
            format!(
                "packet item `{item_id}` no longer matches review run `{}`; export a fresh packet",
                run.id
            )
        };
        if assignment.options.is_empty() {
            if assignment.baseline != item.item.baseline_artifact_id
                || assignment.candidate != item.item.candidate_artifact_id
            {
                return Err(stale());
            }
        } else {
            let stored: Vec<(&str, &str)> = item
                .options
                .iter()
                .map(|o| (o.label.as_str(), o.artifact_id.as_str()))
                .collect();
            let mut packet: Vec<(String, &str)> = assignment
                .options
                .iter()
                .map(|o| (o.label.trim().to_lowercase(), o.artifact_id.as_str()))
                .collect();
            packet.sort();
            if stored.len() != packet.len()
                || stored
                    .iter()
                    .zip(&packet)
                    .any(|(s, p)| s.0 != p.0 || s.1 != p.1)
            {
                return Err(stale());
            }
        }
    }
    Ok(())
}

fn read_packet_file(dir: &Path, name: &str) -> Result<String, PacketError> {
    let path = dir.join(name);
    let limit = skillforge_contract::limits::MAX_DOCUMENT_BYTES;
    if let Ok(meta) = std::fs::metadata(&path)
        && meta.len() > limit as u64
    {
        return Err(PacketError::Invalid(format!(
            "packet file `{}` is {} bytes, over the limit of {limit} bytes",
            path.display(),
            meta.len()
        )));
    }
    std::fs::read_to_string(&path)
        .map_err(|e| PacketError::Invalid(format!("read packet file `{}`: {e}", path.display())))
}

/// Longest reviewer name accepted, in characters.
pub const MAX_REVIEWER_CHARS: usize = 128;

/// A reviewer name as stored with feedback events: not empty, at most [`MAX_REVIEWER_CHARS`]
/// characters, no control characters (NUL, newlines, escapes), which would forge or break the
/// rows and reports that show it.
///
/// # Errors
/// [`ReviewerError`] naming what is wrong.
pub fn check_reviewer(name: &str) -> Result<(), ReviewerError> {
    if name.trim().is_empty() {
        return Err(ReviewerError::Empty);
    }
    if let Some(c) = name.chars().find(|c| c.is_control()) {
        return Err(ReviewerError::ControlCharacter {
            escaped_name: name.escape_debug().to_string(),
            c,
        });
    }
    let n_chars = name.chars().count();
    if n_chars > MAX_REVIEWER_CHARS {
        return Err(ReviewerError::TooLong { n_chars });
    }
    Ok(())
}

/// Why a reviewer name is refused ([`check_reviewer`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReviewerError {
    /// Empty or only whitespace.
    #[error("the reviewer name is empty")]
    Empty,
    /// It holds a control character.
    #[error("the reviewer name `{escaped_name}` holds the control character {c:?}")]
    ControlCharacter {
        /// The name, escaped for display.
        escaped_name: String,
        /// The first control character.
        c: char,
    },
    /// Longer than [`MAX_REVIEWER_CHARS`].
    #[error(
        "the reviewer name is {n_chars} characters long, over the limit of {MAX_REVIEWER_CHARS}"
    )]
    TooLong {
        /// Its length in characters.
        n_chars: usize,
    },
}

/// Validates the packet in `dir` (assignments, `feedback.yml`, the run as stored) without writing:
/// the de-blinded response and the canonical directory.
///
/// # Errors
/// [`PacketError::Invalid`] naming the packet and what is wrong (nothing is written).
pub async fn resolve_packet(
    store: &Store,
    dir: &Path,
    reviewer: Option<&str>,
) -> Result<(ResolvedFeedback, PathBuf), PacketError> {
    let dir = std::fs::canonicalize(dir).map_err(|e| {
        PacketError::Invalid(format!("open packet directory `{}`: {e}", dir.display()))
    })?;
    let refuse = |e: &dyn std::fmt::Display| {
        PacketError::Invalid(format!(
            "import packet `{}`: {e}; nothing was written",
            dir.display()
        ))
    };
    let assignments =
        parse_assignments(&read_packet_file(&dir, ASSIGNMENTS_FILE)?).map_err(|e| refuse(&e))?;
    let feedback =
        parse_feedback_yml(&read_packet_file(&dir, FEEDBACK_FILE)?).map_err(|e| refuse(&e))?;
    let resolved = resolve_feedback(&assignments, &feedback, reviewer).map_err(|e| refuse(&e))?;
    check_reviewer(&resolved.reviewer).map_err(|e| refuse(&e))?;
    let run = load_run(store, &resolved.run_id).await?;
    let items = list_items(store.pool(), &run.id).await?;
    check_packet_matches(&run, &assignments, &items).map_err(|e| refuse(&e))?;
    Ok((resolved, dir))
}

/// Imports a filled packet: validates everything ([`resolve_packet`]), then upserts the de-blinded
/// events (source [`MARKDOWN_SOURCE`], `source_url` the canonical directory) in one transaction.
/// A re-import of the same response updates the rows in place (five-column key), so it never
/// duplicates events.
///
/// # Errors
/// [`PacketError::Invalid`] when the packet is refused (nothing written); [`PacketError::Store`].
pub async fn import_packet(
    store: &Store,
    dir: &Path,
    reviewer: Option<&str>,
) -> Result<PacketImport, PacketError> {
    let (resolved, dir) = resolve_packet(store, dir, reviewer).await?;
    let read = FeedbackRead::of(
        &read_packet_file(&dir, FEEDBACK_FILE)?,
        resolved.entries.len(),
    );
    let source_url = dir.display().to_string();
    let actionable = resolved.entries.iter().filter(|e| is_actionable(e)).count();
    let mut tx = store.begin().await?;
    let counts = write_resolved(
        &mut tx,
        &resolved,
        MARKDOWN_SOURCE,
        &source_url,
        &event_created_at_now(),
    )
    .await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(PacketImport {
        run_id: resolved.run_id,
        reviewer: resolved.reviewer,
        source_url,
        counts,
        read,
        actionable,
    })
}

/// The blind packet of run `run_id` as one Markdown body (a GitHub issue or PR comment): every
/// item with its options, no outcome-bearing details (S-85, as [`export_packet`]), and the
/// run's assignments (recomputed by sync, never published).
///
/// # Errors
/// As [`export_packet`].
pub async fn render_body(
    store: &Store,
    blobs: &BlobStore,
    run_id: &str,
) -> Result<(EvalRunRow, String, Assignments), PacketError> {
    let run = load_run(store, run_id).await?;
    let items = list_items(store.pool(), &run.id).await?;
    if items.is_empty() {
        return Err(PacketError::Invalid(format!(
            "review run `{}` has no items; add them with `skillforge review item add`",
            run.id
        )));
    }
    let assignments = run_assignments(&run, &items, "publish")?;
    let contents = artifact_contents(store, blobs, &assignments).await?;
    let mut body = String::new();
    for (index, (item, assignment)) in items.iter().zip(&assignments.items).enumerate() {
        body.push_str("\n---\n\n");
        body.push_str(
            &render_item(index, item, assignment, &contents)?
                .replacen("# Item", "## Item", 1)
                .replace("\n## Option", "\n### Option")
                .replace("\n## Context", "\n### Context"),
        );
    }
    Ok((run, body, assignments))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_file_names_are_ordered_and_safe() {
        assert_eq!(item_file_name(0, "item-001"), "001-item-001.md");
        assert_eq!(item_file_name(11, "../a b/c"), "012--a-b-c.md");
    }

    #[test]
    fn fence_outlasts_backticks_in_content() {
        assert_eq!(fenced("x\n"), "```\nx\n```\n");
        assert_eq!(fenced("a ```` b"), "`````\na ```` b\n`````\n");
    }
}
