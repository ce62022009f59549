//! The Markdown feedback packet's machine files: hidden `.assignments.json`, editable
//! `feedback.yml`, the deterministic A/B blinding and the all-or-nothing de-blinding import
//! (seed "Markdown Feedback Packet"; facts §4; S-94, S-95).

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::ranking::{Ranking, RankingError, parse_ranking, resolve_winner};
use crate::scalar::scalar_string;

/// File name of the hidden assignment map.
pub const ASSIGNMENTS_FILE: &str = ".assignments.json";
/// File name of the editable response.
pub const FEEDBACK_FILE: &str = "feedback.yml";

/// `.assignments.json`: `{run_id, items}`, items sorted by item id.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Assignments {
    /// Run id.
    #[serde(default)]
    pub run_id: String,
    /// One entry per review item.
    #[serde(default, deserialize_with = "crate::omit::null_as_default")]
    pub items: Vec<BlindAssignment>,
}

/// Which artifact is shown as Option A / B for an item. `a`, `b`, `baseline`, `candidate` are
/// artifact ids. Ranked items also list their blind options.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct BlindAssignment {
    /// Item id.
    #[serde(default)]
    pub item_id: String,
    /// Artifact shown as Option A.
    #[serde(default)]
    pub a: String,
    /// Artifact shown as Option B.
    #[serde(default)]
    pub b: String,
    /// Baseline artifact.
    #[serde(default)]
    pub baseline: String,
    /// Candidate artifact.
    #[serde(default)]
    pub candidate: String,
    /// Ranked options, sorted by label (ranked mode only).
    #[serde(
        default,
        deserialize_with = "crate::omit::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub options: Vec<AssignmentOption>,
}

/// A ranked option in the assignment map.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct AssignmentOption {
    /// Blind label.
    #[serde(default)]
    pub label: String,
    /// Artifact id.
    #[serde(default)]
    pub artifact_id: String,
    /// Role.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub role: String,
    /// Option metadata as a JSON string.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub metadata_json: String,
}

/// Whether a run is reviewed by ranking: mode set and not `validate`, or more than two options
/// (facts §4).
pub fn is_ranked_mode(mode: &str, options_count: i64) -> bool {
    let mode = mode.trim();
    (!mode.is_empty() && mode != "validate") || options_count > 2
}

/// Whether the candidate is shown as Option A: the first byte of
/// `sha256(run_id + "\x00" + item_id)` is odd (facts §4).
pub fn shows_candidate_as_a(run_id: &str, item_id: &str) -> bool {
    let digest = Sha256::digest(format!("{run_id}\x00{item_id}").as_bytes());
    digest[0] % 2 == 1
}

/// The deterministic blind assignment of an A/B item: baseline as A and candidate as B, swapped
/// when [`shows_candidate_as_a`].
pub fn blind_assignment(
    run_id: &str,
    item_id: &str,
    baseline: &str,
    candidate: &str,
) -> BlindAssignment {
    let (a, b) = if shows_candidate_as_a(run_id, item_id) {
        (candidate, baseline)
    } else {
        (baseline, candidate)
    };
    BlindAssignment {
        item_id: item_id.to_owned(),
        a: a.to_owned(),
        b: b.to_owned(),
        baseline: baseline.to_owned(),
        candidate: candidate.to_owned(),
        options: Vec::new(),
    }
}

/// A reviewer's A/B choice. Stored events use the de-blinded meaning: `A` = baseline,
/// `B` = candidate (S-95).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Choice {
    /// Option A (stored: baseline).
    A,
    /// Option B (stored: candidate).
    B,
    /// Equally good.
    Tie,
    /// Neither is acceptable.
    Neither,
    /// Not reviewed.
    Skip,
}

impl Choice {
    /// All choices in wire order.
    pub const ALL: [Choice; 5] = [
        Choice::A,
        Choice::B,
        Choice::Tie,
        Choice::Neither,
        Choice::Skip,
    ];

    /// Parses a choice, trimmed and case-insensitive: exactly a|b|tie|neither|skip (S-94).
    ///
    /// # Errors
    /// [`FeedbackPacketError::InvalidChoice`].
    pub fn parse(text: &str) -> Result<Choice, FeedbackPacketError> {
        match text.trim().to_lowercase().as_str() {
            "a" => Ok(Choice::A),
            "b" => Ok(Choice::B),
            "tie" => Ok(Choice::Tie),
            "neither" => Ok(Choice::Neither),
            "skip" => Ok(Choice::Skip),
            _ => Err(FeedbackPacketError::InvalidChoice(text.to_owned())),
        }
    }

    /// Wire text.
    pub fn as_str(self) -> &'static str {
        match self {
            Choice::A => "a",
            Choice::B => "b",
            Choice::Tie => "tie",
            Choice::Neither => "neither",
            Choice::Skip => "skip",
        }
    }
}

/// Maps a displayed choice back to its stored meaning (S-95): `A`/`B` become `A` when that option
/// showed the baseline artifact and `B` when it showed the candidate; others pass through.
///
/// # Errors
/// [`FeedbackPacketError::BadAssignment`] when baseline/candidate are missing or equal, or the
/// shown artifact is neither.
pub fn deblind_choice(
    displayed: Choice,
    assignment: &BlindAssignment,
) -> Result<Choice, FeedbackPacketError> {
    let shown = match displayed {
        Choice::A => &assignment.a,
        Choice::B => &assignment.b,
        other => return Ok(other),
    };
    canonical_for_artifact(shown, assignment)
}

/// The displayed choice that means `stored` under `assignment` (inverse of [`deblind_choice`]).
///
/// # Errors
/// As [`deblind_choice`].
pub fn blind_choice(
    stored: Choice,
    assignment: &BlindAssignment,
) -> Result<Choice, FeedbackPacketError> {
    if !matches!(stored, Choice::A | Choice::B) {
        return Ok(stored);
    }
    for displayed in [Choice::A, Choice::B] {
        if deblind_choice(displayed, assignment)? == stored {
            return Ok(displayed);
        }
    }
    Err(bad_assignment(
        assignment,
        "options a and b must map to different baseline/candidate artifacts",
    ))
}

/// Checks an A/B assignment: baseline and candidate set and distinct, and options a and b show
/// one each.
///
/// # Errors
/// [`FeedbackPacketError::BadAssignment`].
pub fn validate_assignment(assignment: &BlindAssignment) -> Result<(), FeedbackPacketError> {
    let a = deblind_choice(Choice::A, assignment)?;
    let b = deblind_choice(Choice::B, assignment)?;
    if a == b {
        return Err(bad_assignment(
            assignment,
            "options a and b must map to different baseline/candidate artifacts",
        ));
    }
    Ok(())
}

fn bad_assignment(assignment: &BlindAssignment, reason: &str) -> FeedbackPacketError {
    FeedbackPacketError::BadAssignment {
        item_id: assignment.item_id.clone(),
        reason: reason.to_owned(),
    }
}

fn canonical_for_artifact(
    artifact_id: &str,
    assignment: &BlindAssignment,
) -> Result<Choice, FeedbackPacketError> {
    let baseline = assignment.baseline.trim();
    let candidate = assignment.candidate.trim();
    if baseline.is_empty() || candidate.is_empty() {
        return Err(bad_assignment(
            assignment,
            "assignment missing baseline or candidate mapping",
        ));
    }
    if baseline == candidate {
        return Err(bad_assignment(
            assignment,
            "baseline and candidate artifacts must be distinct",
        ));
    }
    match artifact_id.trim() {
        id if id == baseline => Ok(Choice::A),
        id if id == candidate => Ok(Choice::B),
        id => Err(bad_assignment(
            assignment,
            &format!("assignment artifact {id:?} is not baseline or candidate"),
        )),
    }
}

/// `feedback.yml`: `{run_id, reviewer, items}`. Unknown keys are refused at import
/// ([`parse_feedback_yml`]); the schema says so to editors too.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct FeedbackFile {
    /// Run id (required).
    #[serde(default, deserialize_with = "scalar_string")]
    pub run_id: String,
    /// Reviewer (required here or as an override at import).
    #[serde(default, deserialize_with = "scalar_string")]
    pub reviewer: String,
    /// One entry per item.
    #[serde(default)]
    pub items: Vec<FeedbackEntry>,
}

/// Ranking text: one expression (`c > a = d > b`) or a list of ranks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RankingText {
    /// One expression.
    One(String),
    /// Ranks in order; each may itself contain separators.
    Many(Vec<String>),
}

impl RankingText {
    /// The expressions to parse.
    pub fn parts(&self) -> Vec<&str> {
        match self {
            RankingText::One(s) => vec![s.as_str()],
            RankingText::Many(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

/// One item's response (facts §4 field order). `quality`, `continue_mode` and `promote` are
/// always written (empty in a fresh packet).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct FeedbackEntry {
    /// Item id.
    #[serde(default, deserialize_with = "scalar_string")]
    pub item_id: String,
    /// a|b|tie|neither|skip (A/B items; `skip` also skips a ranked item).
    #[serde(default, deserialize_with = "scalar_string")]
    pub choice: String,
    /// Ranked items: the ranking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranking: Option<RankingText>,
    /// Ranked items: the winner (must be ranked first).
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "scalar_string"
    )]
    pub winner: String,
    /// `{label: [trait]}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub useful_traits: BTreeMap<String, Vec<String>>,
    /// `{label: [trait]}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rejected_traits: BTreeMap<String, Vec<String>>,
    /// Improvements not tied to one option.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_improvements: Vec<String>,
    /// poor|acceptable|strong or empty.
    #[serde(default, deserialize_with = "scalar_string")]
    pub quality: String,
    /// explore|refine|distill|validate or empty.
    #[serde(default, deserialize_with = "scalar_string")]
    pub continue_mode: String,
    /// yes|y|true / no|n|false or empty.
    #[serde(default, deserialize_with = "scalar_string")]
    pub promote: String,
    /// Notes.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "scalar_string"
    )]
    pub reasoning: String,
}

/// Why a packet response is refused. Nothing is written when any item fails (S-94).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeedbackPacketError {
    /// YAML syntax or shape.
    #[error("parse feedback.yml: {0}")]
    Yaml(String),
    /// JSON syntax or shape of `.assignments.json`.
    #[error("parse assignments: {0}")]
    AssignmentsJson(String),
    /// `feedback.yml` without `run_id`.
    #[error("feedback.yml missing run_id")]
    MissingRunId,
    /// `.assignments.json` without `run_id`.
    #[error("assignments missing run_id")]
    AssignmentsMissingRunId,
    /// Response for another run.
    #[error("feedback run_id {feedback:?} does not match assignments run_id {assignments:?}")]
    RunIdMismatch {
        /// In feedback.yml.
        feedback: String,
        /// In .assignments.json.
        assignments: String,
    },
    /// No reviewer anywhere.
    #[error("feedback reviewer is required")]
    ReviewerRequired,
    /// An assignment without item id.
    #[error("assignments contain an item with empty item_id")]
    AssignmentEmptyItem,
    /// Two assignments for one item.
    #[error("assignments contain duplicate item_id {0:?}")]
    AssignmentDuplicateItem(String),
    /// A broken assignment entry.
    #[error("packet assignment item_id {item_id:?}: {reason}")]
    BadAssignment {
        /// Item id.
        item_id: String,
        /// What is wrong.
        reason: String,
    },
    /// Feedback for an item not in the packet.
    #[error("unknown feedback item_id {0:?}")]
    UnknownItem(String),
    /// Two entries for one item.
    #[error("duplicate feedback item_id {0:?}")]
    DuplicateItem(String),
    /// An item left out.
    #[error("feedback.yml missing feedback for item_id {0:?}")]
    MissingItem(String),
    /// Choice outside a|b|tie|neither|skip (S-94).
    #[error("invalid feedback choice {0:?}; use a, b, tie, neither, or skip")]
    InvalidChoice(String),
    /// Error inside one item.
    #[error("item {item_id}: {source}")]
    Item {
        /// Item id.
        item_id: String,
        /// The problem.
        source: Box<FeedbackPacketError>,
    },
    /// Bad ranking or winner.
    #[error(transparent)]
    Ranking(#[from] RankingError),
    /// A ranked item without ranking.
    #[error("ranking is required for a ranked item")]
    RankingRequired,
    /// A trait keyed by a label that is not an option.
    #[error("{field} label {label:?} is not an option")]
    UnknownTraitLabel {
        /// useful_traits or rejected_traits.
        field: &'static str,
        /// The label.
        label: String,
    },
    /// A top-level key of `feedback.yml` that is not in facts §4.
    #[error("feedback.yml: unknown key {key:?}; use run_id, reviewer, items")]
    UnknownKey {
        /// The key as written.
        key: String,
    },
    /// An item key of `feedback.yml` that is not in facts §4.
    #[error("feedback.yml item {index}{}: unknown key {key:?}; use {ITEM_KEYS_LISTED}", item_id.as_ref().map(|id| format!(" ({id})")).unwrap_or_default())]
    UnknownItemKey {
        /// 1-based position of the item in `items`.
        index: usize,
        /// The item's `item_id`, when it has one.
        item_id: Option<String>,
        /// The key as written.
        key: String,
    },
    /// More than one problem, each as its own error (the file is fixed in one pass).
    #[error("feedback.yml has {} problems:\n{}", .0.len(), .0.iter().map(|e| format!("  - {e}")).collect::<Vec<_>>().join("\n"))]
    Several(Vec<FeedbackPacketError>),
    /// A value outside its vocabulary.
    #[error("{field} {value:?} is invalid; use one of {allowed}")]
    InvalidValue {
        /// Field.
        field: &'static str,
        /// Value.
        value: String,
        /// Allowed values.
        allowed: &'static str,
    },
}

/// Top-level keys of `feedback.yml` (facts §4).
const TOP_KEYS: [&str; 3] = ["run_id", "reviewer", "items"];
/// Item keys of `feedback.yml` (facts §4).
const ITEM_KEYS: [&str; 11] = [
    "item_id",
    "choice",
    "ranking",
    "winner",
    "useful_traits",
    "rejected_traits",
    "required_improvements",
    "quality",
    "continue_mode",
    "promote",
    "reasoning",
];
const ITEM_KEYS_LISTED: &str = "item_id, choice, ranking, winner, useful_traits, rejected_traits, \
                                required_improvements, quality, continue_mode, promote, reasoning";

/// Refuses keys outside facts §4, at the top level and in each item, so a misspelt key is not
/// silently dropped. Shapes other than mappings are left to the typed parse.
fn check_keys(value: &serde_norway::Value) -> Result<(), FeedbackPacketError> {
    let key_text = |k: &serde_norway::Value| match k {
        serde_norway::Value::String(s) => s.clone(),
        other => serde_norway::to_string(other)
            .unwrap_or_default()
            .trim()
            .to_owned(),
    };
    let Some(top) = value.as_mapping() else {
        return Ok(());
    };
    let mut problems = Vec::new();
    for key in top.keys() {
        let key = key_text(key);
        if !TOP_KEYS.contains(&key.as_str()) {
            problems.push(FeedbackPacketError::UnknownKey { key });
        }
    }
    let items = top.get("items").and_then(serde_norway::Value::as_sequence);
    for (idx, item) in items.into_iter().flatten().enumerate() {
        let Some(item) = item.as_mapping() else {
            continue;
        };
        let item_id = item
            .get("item_id")
            .and_then(serde_norway::Value::as_str)
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty());
        for key in item.keys() {
            let key = key_text(key);
            if !ITEM_KEYS.contains(&key.as_str()) {
                problems.push(FeedbackPacketError::UnknownItemKey {
                    index: idx + 1,
                    item_id: item_id.clone(),
                    key,
                });
            }
        }
    }
    FeedbackPacketError::from_problems(problems)
}

impl FeedbackPacketError {
    /// `Ok` for none, the one problem itself, or [`FeedbackPacketError::Several`].
    fn from_problems(mut problems: Vec<FeedbackPacketError>) -> Result<(), FeedbackPacketError> {
        match problems.len() {
            0 => Ok(()),
            1 => Err(problems.remove(0)),
            _ => Err(FeedbackPacketError::Several(problems)),
        }
    }
}

/// Parses `feedback.yml` leniently (scalars read as strings), refuses keys outside facts §4 and
/// requires `run_id`. Never panics.
///
/// # Errors
/// [`FeedbackPacketError::Yaml`], [`FeedbackPacketError::UnknownKey`],
/// [`FeedbackPacketError::UnknownItemKey`] or [`FeedbackPacketError::MissingRunId`].
pub fn parse_feedback_yml(text: &str) -> Result<FeedbackFile, FeedbackPacketError> {
    crate::limits::check_yaml(text)
        .map_err(|e| FeedbackPacketError::Yaml(format!("feedback.yml {e}")))?;
    let value: serde_norway::Value =
        serde_norway::from_str(text).map_err(|e| FeedbackPacketError::Yaml(e.to_string()))?;
    check_keys(&value)?;
    let mut file: FeedbackFile =
        serde_norway::from_value(value).map_err(|e| FeedbackPacketError::Yaml(e.to_string()))?;
    file.run_id = file.run_id.trim().to_owned();
    if file.run_id.is_empty() {
        return Err(FeedbackPacketError::MissingRunId);
    }
    Ok(file)
}

/// Writes `feedback.yml` text.
///
/// # Errors
/// [`FeedbackPacketError::Yaml`] if YAML serialisation fails.
pub fn render_feedback_yml(file: &FeedbackFile) -> Result<String, FeedbackPacketError> {
    serde_norway::to_string(file).map_err(|e| FeedbackPacketError::Yaml(e.to_string()))
}

/// Parses `.assignments.json` and requires `run_id`.
///
/// # Errors
/// [`FeedbackPacketError::AssignmentsJson`] or [`FeedbackPacketError::AssignmentsMissingRunId`].
pub fn parse_assignments(text: &str) -> Result<Assignments, FeedbackPacketError> {
    crate::limits::check_json(text)
        .map_err(|e| FeedbackPacketError::AssignmentsJson(format!("the file {e}")))?;
    let mut assignments: Assignments = serde_json::from_str(text)
        .map_err(|e| FeedbackPacketError::AssignmentsJson(e.to_string()))?;
    assignments.run_id = assignments.run_id.trim().to_owned();
    if assignments.run_id.is_empty() {
        return Err(FeedbackPacketError::AssignmentsMissingRunId);
    }
    Ok(assignments)
}

/// One validated, de-blinded response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolvedEntry {
    /// An A/B item (or a skipped ranked item); `choice` is de-blinded.
    Choice {
        /// Item id.
        item_id: String,
        /// Stored choice: A = baseline, B = candidate.
        choice: Choice,
        /// Trimmed notes.
        reasoning: String,
    },
    /// A ranked item.
    Ranked(RankedEntry),
}

/// A validated ranked response; labels lowercased.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankedEntry {
    /// Item id.
    pub item_id: String,
    /// The ranking; covers every option.
    pub ranking: Ranking,
    /// Explicit or automatic winner.
    pub winner: Option<String>,
    /// `{label: [trait]}` with lowercased labels.
    pub useful_traits: BTreeMap<String, Vec<String>>,
    /// `{label: [trait]}` with lowercased labels.
    pub rejected_traits: BTreeMap<String, Vec<String>>,
    /// Trimmed, non-empty.
    pub required_improvements: Vec<String>,
    /// poor|acceptable|strong or empty.
    pub quality: String,
    /// explore|refine|distill|validate or empty.
    pub continue_mode: String,
    /// yes|no or empty.
    pub promote: String,
    /// Trimmed notes.
    pub reasoning: String,
}

/// A whole validated response, ready to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedFeedback {
    /// Run id.
    pub run_id: String,
    /// Reviewer (override, else the file's).
    pub reviewer: String,
    /// In feedback.yml order.
    pub entries: Vec<ResolvedEntry>,
}

/// Validates a whole response against the assignment map and de-blinds it (S-94, S-95): run ids
/// match, a reviewer exists, assignments are well-formed, every entry names a known item once,
/// every item has an entry; A/B items need a valid choice; items with options need a complete
/// ranking (unless `choice: skip`), a first-ranked winner, trait labels among the options, and
/// valid quality / continue_mode / promote. Returns only when everything is valid.
///
/// # Errors
/// The problem as a [`FeedbackPacketError`] (item problems wrapped in `Item`); when entries have
/// more than one, all of them in [`FeedbackPacketError::Several`].
pub fn resolve_feedback(
    assignments: &Assignments,
    feedback: &FeedbackFile,
    reviewer_override: Option<&str>,
) -> Result<ResolvedFeedback, FeedbackPacketError> {
    let run_id = feedback.run_id.trim();
    if run_id != assignments.run_id.trim() {
        return Err(FeedbackPacketError::RunIdMismatch {
            feedback: run_id.to_owned(),
            assignments: assignments.run_id.trim().to_owned(),
        });
    }
    let reviewer = reviewer_override
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| feedback.reviewer.trim());
    if reviewer.is_empty() {
        return Err(FeedbackPacketError::ReviewerRequired);
    }
    let mut by_item: BTreeMap<&str, &BlindAssignment> = BTreeMap::new();
    for assignment in &assignments.items {
        let item_id = assignment.item_id.trim();
        if item_id.is_empty() {
            return Err(FeedbackPacketError::AssignmentEmptyItem);
        }
        if by_item.insert(item_id, assignment).is_some() {
            return Err(FeedbackPacketError::AssignmentDuplicateItem(
                item_id.to_owned(),
            ));
        }
        if assignment.options.is_empty() {
            validate_assignment(assignment)?;
        }
    }
    // Every item's problem is reported at once (the reviewer fixes the file in one pass).
    let mut seen = BTreeSet::new();
    let mut entries = Vec::with_capacity(feedback.items.len());
    let mut problems = Vec::new();
    for entry in &feedback.items {
        let item_id = entry.item_id.trim();
        let Some(assignment) = by_item.get(item_id) else {
            problems.push(FeedbackPacketError::UnknownItem(item_id.to_owned()));
            continue;
        };
        if !seen.insert(item_id) {
            problems.push(FeedbackPacketError::DuplicateItem(item_id.to_owned()));
            continue;
        }
        match resolve_entry(entry, assignment) {
            Ok(resolved) => entries.push(resolved),
            Err(source) => problems.push(FeedbackPacketError::Item {
                item_id: item_id.to_owned(),
                source: Box::new(source),
            }),
        }
    }
    for missing in by_item.keys().filter(|id| !seen.contains(*id)) {
        problems.push(FeedbackPacketError::MissingItem((*missing).to_owned()));
    }
    FeedbackPacketError::from_problems(problems)?;
    Ok(ResolvedFeedback {
        run_id: run_id.to_owned(),
        reviewer: reviewer.to_owned(),
        entries,
    })
}

/// Validates and de-blinds one entry. `quality`, `continue_mode` and `promote` are checked against
/// their vocabularies for every item (facts §4 lists them for every item); an A/B event has no
/// place for them (facts §1 `FeedbackEvent`, §8 `feedback_events`), so for A/B items they are
/// validated but not stored, and the A/B template does not offer them.
fn resolve_entry(
    entry: &FeedbackEntry,
    assignment: &BlindAssignment,
) -> Result<ResolvedEntry, FeedbackPacketError> {
    let item_id = entry.item_id.trim().to_owned();
    let reasoning = entry.reasoning.trim().to_owned();
    let quality = vocabulary(
        "quality",
        &entry.quality,
        &["poor", "acceptable", "strong"],
        "poor, acceptable, strong",
    )?;
    let continue_mode = vocabulary(
        "continue_mode",
        &entry.continue_mode,
        &["explore", "refine", "distill", "validate"],
        "explore, refine, distill, validate",
    )?;
    let promote = normalize_promote(&entry.promote)?;
    let has_ranking = entry
        .ranking
        .as_ref()
        .is_some_and(|r| r.parts().iter().any(|p| !p.trim().is_empty()));
    if assignment.options.is_empty()
        || (!has_ranking && entry.choice.trim().eq_ignore_ascii_case("skip"))
    {
        let displayed = Choice::parse(&entry.choice)?;
        let choice = if assignment.options.is_empty() {
            deblind_choice(displayed, assignment)?
        } else {
            displayed
        };
        return Ok(ResolvedEntry::Choice {
            item_id,
            choice,
            reasoning,
        });
    }
    let ranking_text = entry
        .ranking
        .as_ref()
        .filter(|_| has_ranking)
        .ok_or(FeedbackPacketError::RankingRequired)?;
    let labels: Vec<String> = assignment
        .options
        .iter()
        .map(|o| o.label.trim().to_lowercase())
        .collect();
    let ranking = parse_ranking(&ranking_text.parts(), Some(&labels))?;
    let winner = resolve_winner(&ranking, &entry.winner)?;
    let useful_traits = normalize_traits("useful_traits", &entry.useful_traits, &labels)?;
    let rejected_traits = normalize_traits("rejected_traits", &entry.rejected_traits, &labels)?;
    Ok(ResolvedEntry::Ranked(RankedEntry {
        item_id,
        ranking,
        winner,
        useful_traits,
        rejected_traits,
        required_improvements: entry
            .required_improvements
            .iter()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect(),
        quality,
        continue_mode,
        promote,
        reasoning,
    }))
}

fn normalize_traits(
    field: &'static str,
    traits: &BTreeMap<String, Vec<String>>,
    labels: &[String],
) -> Result<BTreeMap<String, Vec<String>>, FeedbackPacketError> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (label, values) in traits {
        let label = label.trim().to_lowercase();
        if !labels.contains(&label) {
            return Err(FeedbackPacketError::UnknownTraitLabel { field, label });
        }
        let values: Vec<String> = values
            .iter()
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
            .collect();
        if !values.is_empty() {
            out.entry(label).or_default().extend(values);
        }
    }
    Ok(out)
}

fn vocabulary(
    field: &'static str,
    value: &str,
    allowed: &[&str],
    listed: &'static str,
) -> Result<String, FeedbackPacketError> {
    let value = value.trim().to_lowercase();
    if value.is_empty() || allowed.contains(&value.as_str()) {
        Ok(value)
    } else {
        Err(FeedbackPacketError::InvalidValue {
            field,
            value,
            allowed: listed,
        })
    }
}

/// `yes|y|true` → `yes`, `no|n|false` → `no`, empty stays empty (facts §4).
///
/// # Errors
/// [`FeedbackPacketError::InvalidValue`] for anything else.
pub fn normalize_promote(value: &str) -> Result<String, FeedbackPacketError> {
    match value.trim().to_lowercase().as_str() {
        "" => Ok(String::new()),
        "yes" | "y" | "true" => Ok("yes".into()),
        "no" | "n" | "false" => Ok("no".into()),
        other => Err(FeedbackPacketError::InvalidValue {
            field: "promote",
            value: other.to_owned(),
            allowed: "yes, no",
        }),
    }
}

#[cfg(test)]
mod tests;
