//! Gathering review evidence from a training package into flat [`Evidence`] items, each with a
//! kind of guidance, a normalised key, a tier and where it came from (seed: SkillOpt, "Ranked
//! Exploration Export", "Markdown Feedback Packet", "Binary-disagreement lessons (#527)",
//! "Evaluator profiles and structured failures").
//!
//! What counts, per source:
//! * ranked feedback events: every `required_improvements` entry ([`GuidanceKind::Improve`]),
//!   every `rejected_traits` entry ([`GuidanceKind::Avoid`]) and every `useful_traits` entry
//!   ([`GuidanceKind::Keep`]); traits are `{label: [text]}` or `[text]`. Ranked `reasoning` is
//!   not used: it compares blind option labels and has no meaning outside its packet.
//! * A/B feedback events (`a` = baseline = the current template's output, `b` = the candidate
//!   artifact): `b` from a person → [`GuidanceKind::Prefer`] (what the preferred output did);
//!   `b` from automatic tiers (a negative outcome) and `neither` → [`GuidanceKind::Address`];
//!   `a` from a person → [`GuidanceKind::Keep`]; `a` from automatic tiers (a positive outcome
//!   such as a merge) describes no change and is skipped; `tie`/`skip` carry no direction.
//!   Reasoning in the projection's section form (`Optimizer hint:`, `Required improvements:`, …;
//!   seed "Normalized projection") is split into its sections first.
//! * evaluator scores in item metadata (`metadata.evaluator_score`, an object, or
//!   `metadata.evaluator_scores`, an array): `failure.optimizer_hint` and
//!   `gate_rejection.optimizer_hint` ([`GuidanceKind::Improve`]), each failed check's reason
//!   ([`GuidanceKind::Improve`], verifiable floor), `fail_reason` when no packet explains it
//!   ([`GuidanceKind::Address`]).
//! * harvested checker and hard-verifier rows (reviewers `gitmoot-checker`, `gitmoot-verifier`):
//!   never their summary reasoning (plain, or the `Reasoning:` section; "Deterministic checkers
//!   over 1 dimension(s)." is no rule); when the row is against the change (`b`), each `rule` of
//!   its item's `metadata.findings` (the tools' messages) is a [`GuidanceKind::Improve`] line
//!   (verifiable floor; issue 37 item 10); projected hint, improvement and trait sections count
//!   as for any row.
//! * replay gate failures (`eval_run.metadata.replay_gate_failures`, written by the replay gate's
//!   retry, issue 34 item 11): each corpus item the candidate did not pass is a
//!   [`GuidanceKind::Improve`] line naming the prompt and what its answer must contain
//!   (verifiable floor: the gate's deterministic scorer failed it).
//! * BINEVAL verdicts: every `no` verdict is a lesson for its question ([`GuidanceKind::Lesson`],
//!   keyed by question id so repeated failures of one question add support). The verdict rows do
//!   not say whether a deterministic or an LLM runner answered, so they count as judge evidence.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use skillforge_contract::{
    EvalItem, EvaluatorScore, FeedbackEvent, RankedFeedbackEvent, TrainingPackage,
};

use super::tier::{EvidenceTier, classify_tier};

/// Longest evidence text kept, in characters; longer text is cut and ends with `…`.
pub const MAX_EVIDENCE_CHARS: usize = 240;

/// What a guidance line asks the template to do; also its rendered prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GuidanceKind {
    /// A requested change, already phrased as an instruction (`Add a test plan.`).
    Improve,
    /// A problem to fix (`Address: blocked at the merge gate.`).
    Address,
    /// A rejected trait (`Avoid: marketing fluff.`).
    Avoid,
    /// What a preferred output did (`Aim for: concrete steps.`).
    Prefer,
    /// A useful trait to preserve (`Keep: short summary first.`).
    Keep,
    /// A failed BINEVAL question (``Make sure `has_test` (correctness) holds: no test.``).
    Lesson,
}

impl GuidanceKind {
    /// Snake-case name used in keys and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            GuidanceKind::Improve => "improve",
            GuidanceKind::Address => "address",
            GuidanceKind::Avoid => "avoid",
            GuidanceKind::Prefer => "prefer",
            GuidanceKind::Keep => "keep",
            GuidanceKind::Lesson => "lesson",
        }
    }
}

/// The package field a piece of evidence was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceOrigin {
    /// `ranked_feedback_events[].required_improvements` (or that section of projected reasoning).
    RequiredImprovement,
    /// `ranked_feedback_events[].rejected_traits`.
    RejectedTrait,
    /// `ranked_feedback_events[].useful_traits`.
    UsefulTrait,
    /// `feedback_events[].reasoning` with its `choice`.
    FeedbackReasoning,
    /// An evaluator's `optimizer_hint` (failure packet or gate rejection).
    OptimizerHint,
    /// An evaluator's failed check or `fail_reason`.
    FailedCheck,
    /// A BINEVAL `no` verdict.
    BinaryLesson,
    /// A line of the template's maintained guidance section: the evidence of earlier runs
    /// ([`super::prior`]).
    PriorGuidance,
    /// A harvested checker or hard-verifier finding (item metadata `findings`: the tool's message
    /// as a rule; issue 37 item 10).
    Finding,
    /// A corpus item the replay gate failed the candidate on (`eval_run.metadata
    /// .replay_gate_failures`; issue 34 item 11).
    ReplayFailure,
}

/// One piece of evidence for one guidance line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evidence {
    /// What the line asks for.
    pub kind: GuidanceKind,
    /// Deduplication key: `<kind>:<normalised text>` ([`normalize_key`]), or
    /// `lesson:<question_id>` for BINEVAL lessons.
    pub key: String,
    /// Cleaned display text ([`clean_text`]), without the kind's prefix.
    pub text: String,
    /// How much it counts.
    pub tier: EvidenceTier,
    /// Which field it came from.
    pub origin: EvidenceOrigin,
    /// The row it came from (`ranked:<id>`, `feedback:<n>`, `item:<id>:score:<n>`,
    /// `verdict:<question_id>:<n>`); one row supports a key at most once.
    pub source_ref: String,
}

/// Collapses whitespace (newlines included) to single spaces, drops a leading list bullet
/// (`- `, `* `, `• `) and trailing `.`/`;`/`,`/`:`, and cuts at [`MAX_EVIDENCE_CHARS`] characters
/// (ending with `…`). Returns `""` when nothing is left.
pub fn clean_text(text: &str) -> String {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut s = collapsed.as_str();
    for bullet in ["- ", "* ", "• "] {
        if let Some(rest) = s.strip_prefix(bullet) {
            s = rest;
            break;
        }
    }
    let s = s.trim().trim_end_matches(['.', ';', ',', ':']).trim_end();
    if s.chars().count() > MAX_EVIDENCE_CHARS {
        let cut: String = s.chars().take(MAX_EVIDENCE_CHARS - 1).collect();
        format!("{}…", cut.trim_end())
    } else {
        s.to_owned()
    }
}

/// The deduplication key of `text` for `kind`: `<kind>:` then the text lowercased with every run
/// of non-alphanumeric characters turned into one space (so `Add a test-plan.` and
/// `add a test plan` share a key).
pub fn normalize_key(kind: GuidanceKind, text: &str) -> String {
    let lowered = text.to_lowercase();
    let words: Vec<&str> = lowered
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    format!("{}:{}", kind.as_str(), words.join(" "))
}

/// Everything [`gather_evidence`] found, plus per-source counts for the report.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GatheredEvidence {
    /// Evidence in package order: ranked events, feedback events, item scores, verdicts.
    pub items: Vec<Evidence>,
    /// How many rows of each source were read (even those that yielded nothing).
    pub counts: SourceCounts,
}

/// Rows read per source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct SourceCounts {
    /// `ranked_feedback_events` rows.
    pub ranked_feedback_events: usize,
    /// `feedback_events` rows.
    pub feedback_events: usize,
    /// Evaluator scores found in item metadata.
    pub evaluator_scores: usize,
    /// `binary_verdicts` rows with verdict `no`.
    pub binary_no_verdicts: usize,
    /// Replay gate failures fed back by the gate's retry (absent from the report when 0).
    #[serde(skip_serializing_if = "is_zero")]
    pub replay_gate_failures: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The key of `eval_run.metadata` the replay gate's retry writes its failures under: an array of
/// `{"id", "prompt", "expected", "note"}` (issue 34 item 11).
pub const REPLAY_GATE_FAILURES_KEY: &str = "replay_gate_failures";

struct Sink {
    items: Vec<Evidence>,
}

impl Sink {
    fn push(
        &mut self,
        kind: GuidanceKind,
        raw: &str,
        tier: EvidenceTier,
        origin: EvidenceOrigin,
        source_ref: &str,
    ) {
        let text = clean_text(raw);
        if text.is_empty() {
            return;
        }
        let key = normalize_key(kind, &text);
        self.push_keyed(kind, key, text, tier, origin, source_ref);
    }

    fn push_keyed(
        &mut self,
        kind: GuidanceKind,
        key: String,
        text: String,
        tier: EvidenceTier,
        origin: EvidenceOrigin,
        source_ref: &str,
    ) {
        if self
            .items
            .iter()
            .any(|e| e.key == key && e.source_ref == source_ref)
        {
            return;
        }
        self.items.push(Evidence {
            kind,
            key,
            text,
            tier,
            origin,
            source_ref: source_ref.to_owned(),
        });
    }
}

/// Reads every evidence source of `package` (see the module docs for the rules).
pub fn gather_evidence(package: &TrainingPackage) -> GatheredEvidence {
    let mut sink = Sink { items: Vec::new() };
    let mut counts = SourceCounts::default();
    for event in &package.ranked_feedback_events {
        counts.ranked_feedback_events += 1;
        gather_ranked(&mut sink, event);
    }
    let findings: BTreeMap<&str, Vec<String>> = package
        .items
        .iter()
        .filter_map(|i| Some((i.id.as_str(), item_findings(i)?)))
        .collect();
    for (idx, event) in package.feedback_events.iter().enumerate() {
        counts.feedback_events += 1;
        let leg_row = is_leg_row(event);
        if leg_row {
            gather_findings(&mut sink, event, findings.get(event.item_id.as_str()), idx);
        }
        gather_feedback(&mut sink, event, idx, !leg_row);
    }
    for item in &package.items {
        for (idx, score) in item_scores(item).iter().enumerate() {
            counts.evaluator_scores += 1;
            gather_score(&mut sink, score, &format!("item:{}:score:{idx}", item.id));
        }
    }
    for (idx, verdict) in package.binary_verdicts.iter().enumerate() {
        if !verdict.verdict.trim().eq_ignore_ascii_case("no") {
            continue;
        }
        counts.binary_no_verdicts += 1;
        let question = verdict.question_id.trim();
        let dimension = verdict.dimension.trim();
        let explanation = clean_text(&verdict.explanation);
        let subject = if dimension.is_empty() {
            format!("`{question}`")
        } else {
            format!("`{question}` ({dimension})")
        };
        let text = if explanation.is_empty() {
            subject
        } else {
            format!("{subject} holds: {explanation}")
        };
        sink.push_keyed(
            GuidanceKind::Lesson,
            format!("lesson:{question}"),
            text,
            EvidenceTier::Judge,
            EvidenceOrigin::BinaryLesson,
            &format!("verdict:{question}:{idx}"),
        );
    }
    let failures = package
        .eval_run
        .metadata
        .as_ref()
        .and_then(|m| m.get(REPLAY_GATE_FAILURES_KEY))
        .and_then(Value::as_array);
    for failure in failures.into_iter().flatten() {
        let field = |k: &str| clean_text(failure.get(k).and_then(Value::as_str).unwrap_or(""));
        let (id, prompt, expected) = (field("id"), field("prompt"), field("expected"));
        if expected.is_empty() {
            continue;
        }
        counts.replay_gate_failures += 1;
        let text = if prompt.is_empty() {
            format!("Include \"{expected}\"")
        } else {
            format!("When asked \"{prompt}\", include \"{expected}\"")
        };
        sink.push(
            GuidanceKind::Improve,
            &text,
            EvidenceTier::VerifiableFloor,
            EvidenceOrigin::ReplayFailure,
            &format!("replay:{id}"),
        );
    }
    GatheredEvidence {
        items: sink.items,
        counts,
    }
}

fn gather_ranked(sink: &mut Sink, event: &RankedFeedbackEvent) {
    let tier = classify_tier(&event.source, &event.reviewer, &event.item_id);
    let source_ref = format!("ranked:{}:{}", event.id, event.item_id);
    for text in event
        .required_improvements
        .as_ref()
        .map(text_list)
        .unwrap_or_default()
    {
        sink.push(
            GuidanceKind::Improve,
            &text,
            tier,
            EvidenceOrigin::RequiredImprovement,
            &source_ref,
        );
    }
    for text in event
        .rejected_traits
        .as_ref()
        .map(trait_list)
        .unwrap_or_default()
    {
        sink.push(
            GuidanceKind::Avoid,
            &text,
            tier,
            EvidenceOrigin::RejectedTrait,
            &source_ref,
        );
    }
    for text in event
        .useful_traits
        .as_ref()
        .map(trait_list)
        .unwrap_or_default()
    {
        sink.push(
            GuidanceKind::Keep,
            &text,
            tier,
            EvidenceOrigin::UsefulTrait,
            &source_ref,
        );
    }
}

/// `summary_is_guidance`: false for checker and verifier rows, whose plain reasoning (and the
/// `Reasoning:` section of projected reasoning) only summarises the run.
fn gather_feedback(sink: &mut Sink, event: &FeedbackEvent, idx: usize, summary_is_guidance: bool) {
    let tier = classify_tier(&event.source, &event.reviewer, &event.item_id);
    let is_human = tier == EvidenceTier::HumanGold;
    let kind = match event.choice.trim().to_ascii_lowercase().as_str() {
        "b" if is_human => GuidanceKind::Prefer,
        "b" | "neither" => GuidanceKind::Address,
        "a" if is_human => GuidanceKind::Keep,
        _ => return,
    };
    let source_ref = format!("feedback:{idx}:{}", event.item_id);
    let reasoning = event.reasoning.trim();
    if reasoning.is_empty() {
        return;
    }
    let sections = projected_sections(reasoning);
    if sections.is_empty() {
        if summary_is_guidance {
            sink.push(
                kind,
                reasoning,
                tier,
                EvidenceOrigin::FeedbackReasoning,
                &source_ref,
            );
        }
        return;
    }
    // Only a negative outcome's hints and improvements are instructions; a preferred or kept
    // output's projected feedback keeps the event's own kind.
    let is_negative = matches!(kind, GuidanceKind::Address);
    for (section, lines) in sections {
        for line in lines {
            let text = if matches!(section, Section::Useful | Section::Rejected) {
                strip_label(&line)
            } else {
                line
            };
            match section {
                Section::Hint if is_negative => sink.push(
                    GuidanceKind::Improve,
                    &text,
                    tier,
                    EvidenceOrigin::OptimizerHint,
                    &source_ref,
                ),
                Section::Required if is_negative => sink.push(
                    GuidanceKind::Improve,
                    &text,
                    tier,
                    EvidenceOrigin::RequiredImprovement,
                    &source_ref,
                ),
                Section::Useful => sink.push(
                    GuidanceKind::Keep,
                    &text,
                    tier,
                    EvidenceOrigin::UsefulTrait,
                    &source_ref,
                ),
                Section::Rejected => sink.push(
                    GuidanceKind::Avoid,
                    &text,
                    tier,
                    EvidenceOrigin::RejectedTrait,
                    &source_ref,
                ),
                _ if summary_is_guidance => sink.push(
                    kind,
                    &text,
                    tier,
                    EvidenceOrigin::FeedbackReasoning,
                    &source_ref,
                ),
                _ => {}
            }
        }
    }
}

/// Whether `event` is a harvested checker or hard-verifier row (reviewer `gitmoot-checker` /
/// `gitmoot-verifier`): its reasoning only summarises ("Deterministic checkers over 1
/// dimension(s).") and is never a guidance line; its item's findings are.
fn is_leg_row(event: &FeedbackEvent) -> bool {
    let reviewer = event.reviewer.trim().to_ascii_lowercase();
    reviewer == crate::harvest::CHECKER_REVIEWER || reviewer == crate::harvest::VERIFIER_REVIEWER
}

/// The `rule`s of an item's `metadata.findings` (written by the harvest's checker and verifier
/// legs); `None` when it has none.
fn item_findings(item: &EvalItem) -> Option<Vec<String>> {
    let list = item
        .metadata
        .as_ref()?
        .get(crate::harvest::legs::FINDINGS_KEY)?
        .as_array()?;
    let rules: Vec<String> = list
        .iter()
        .filter_map(|f| f.get("rule")?.as_str())
        .map(str::to_owned)
        .collect();
    (!rules.is_empty()).then_some(rules)
}

/// A checker or verifier row against the change (`b`): each finding of its item is a rule
/// ([`GuidanceKind::Improve`], verifiable floor); a passing row or one without findings says
/// nothing to change.
fn gather_findings(
    sink: &mut Sink,
    event: &FeedbackEvent,
    findings: Option<&Vec<String>>,
    idx: usize,
) {
    if !event.choice.trim().eq_ignore_ascii_case("b") {
        return;
    }
    let source_ref = format!("feedback:{idx}:{}", event.item_id);
    for rule in findings.into_iter().flatten() {
        sink.push(
            GuidanceKind::Improve,
            rule,
            EvidenceTier::VerifiableFloor,
            EvidenceOrigin::Finding,
            &source_ref,
        );
    }
}

/// Evaluator scores carried in an item's metadata: `evaluator_score` (one object) and
/// `evaluator_scores` (an array); entries that do not decode are skipped.
fn item_scores(item: &EvalItem) -> Vec<EvaluatorScore> {
    let Some(Value::Object(meta)) = &item.metadata else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(v) = meta.get("evaluator_score") {
        out.extend(serde_json::from_value::<EvaluatorScore>(v.clone()).ok());
    }
    if let Some(Value::Array(list)) = meta.get("evaluator_scores") {
        out.extend(
            list.iter()
                .filter_map(|v| serde_json::from_value::<EvaluatorScore>(v.clone()).ok()),
        );
    }
    out
}

fn gather_score(sink: &mut Sink, score: &EvaluatorScore, source_ref: &str) {
    let contract_failed = matches!(
        score.contract_status.trim().to_ascii_lowercase().as_str(),
        "fail" | "failed"
    );
    let is_verifiable = score.judge_evaluator_id.trim().is_empty()
        && (score.hard.is_some_and(|h| h <= 0.0) || contract_failed);
    let hint_tier = if is_verifiable {
        EvidenceTier::VerifiableFloor
    } else {
        EvidenceTier::Judge
    };
    let mut explained = false;
    if let Some(failure) = &score.failure {
        if !failure.optimizer_hint.trim().is_empty() {
            explained = true;
            sink.push(
                GuidanceKind::Improve,
                &failure.optimizer_hint,
                hint_tier,
                EvidenceOrigin::OptimizerHint,
                source_ref,
            );
        }
        for check in &failure.failed_checks {
            let reason = clean_text(&check.reason);
            if reason.is_empty() {
                continue;
            }
            explained = true;
            let name = check.check.trim();
            let text = if name.is_empty() {
                reason
            } else {
                format!("Pass the `{name}` check: {reason}")
            };
            sink.push(
                GuidanceKind::Improve,
                &text,
                EvidenceTier::VerifiableFloor,
                EvidenceOrigin::FailedCheck,
                source_ref,
            );
        }
    }
    if let Some(gate) = &score.gate_rejection
        && !gate.optimizer_hint.trim().is_empty()
    {
        explained = true;
        sink.push(
            GuidanceKind::Improve,
            &gate.optimizer_hint,
            hint_tier,
            EvidenceOrigin::OptimizerHint,
            source_ref,
        );
    }
    if !explained && !score.fail_reason.trim().is_empty() {
        sink.push(
            GuidanceKind::Address,
            &score.fail_reason,
            hint_tier,
            EvidenceOrigin::FailedCheck,
            source_ref,
        );
    }
}

/// Strings of a JSON value that is a string or an array of strings (non-strings skipped).
fn text_list(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// Trait texts of `{label: [text]}` (labels in sorted order, so output is deterministic) or
/// `[text]`; other shapes yield nothing (as the projection skips what does not decode).
fn trait_list(value: &Value) -> Vec<String> {
    match value {
        Value::Object(map) => {
            let sorted: BTreeMap<&String, &Value> = map.iter().collect();
            sorted.values().flat_map(|v| text_list(v)).collect()
        }
        other => text_list(other),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    Hint,
    Required,
    Useful,
    Rejected,
    Reasoning,
}

const SECTION_HEADERS: &[(&str, Section)] = &[
    ("Optimizer hint:", Section::Hint),
    ("Required improvements:", Section::Required),
    ("Useful traits:", Section::Useful),
    ("Rejected traits:", Section::Rejected),
    ("Reasoning:", Section::Reasoning),
];

/// Splits text in the projection's section form into (section, non-empty lines); `[]` when the
/// text does not start with a known header. Hint and reasoning sections are one entry each.
fn projected_sections(text: &str) -> Vec<(Section, Vec<String>)> {
    let header_of = |line: &str| {
        SECTION_HEADERS
            .iter()
            .find(|(h, _)| line.trim() == *h)
            .map(|(_, s)| *s)
    };
    let Some(first) = text.lines().next() else {
        return Vec::new();
    };
    if header_of(first).is_none() {
        return Vec::new();
    }
    let mut out: Vec<(Section, Vec<String>)> = Vec::new();
    for line in text.lines() {
        if let Some(section) = header_of(line) {
            out.push((section, Vec::new()));
        } else if !line.trim().is_empty()
            && let Some((_, lines)) = out.last_mut()
        {
            lines.push(line.trim().to_owned());
        }
    }
    for (section, lines) in &mut out {
        if matches!(section, Section::Hint | Section::Reasoning) && lines.len() > 1 {
            *lines = vec![lines.join(" ")];
        }
    }
    out
}

/// Drops a projected trait line's `label: ` prefix (`A: short intro` → `short intro`); labels are
/// short blind option labels without spaces.
fn strip_label(line: &str) -> String {
    let line = line.trim();
    if let Some((label, rest)) = line.split_once(": ")
        && !label.is_empty()
        && label.len() <= 16
        && !label.contains(' ')
        && !label.starts_with('-')
    {
        return rest.to_owned();
    }
    line.to_owned()
}

#[cfg(test)]
mod tests;
