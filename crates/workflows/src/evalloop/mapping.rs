//! The blind (E-04): two anonymous slots, a random slot → arm mapping kept on disk in
//! `mapping.private.json` apart from the prompt, and the judge prompt built from the slots only.

use serde::{Deserialize, Serialize};

use super::arm::ArmSide;
use super::brief::Brief;

/// File name of the private mapping in a sample dir.
pub const MAPPING_FILE: &str = "mapping.private.json";

/// An anonymous slot of the judge's prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Slot {
    /// Slot A.
    A,
    /// Slot B.
    B,
}

/// Which arm sits in which slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mapping {
    /// The arm in slot A.
    #[serde(rename = "A")]
    pub a: ArmSide,
    /// The arm in slot B.
    #[serde(rename = "B")]
    pub b: ArmSide,
}

impl Mapping {
    /// The mapping with the `with` arm in slot A when `with_in_a`.
    pub fn new(with_in_a: bool) -> Self {
        if with_in_a {
            Self { a: ArmSide::With, b: ArmSide::Without }
        } else {
            Self { a: ArmSide::Without, b: ArmSide::With }
        }
    }

    /// A fresh random mapping.
    pub fn draw() -> Self {
        Self::new(rand::random::<bool>())
    }

    /// The arm in `slot`.
    pub fn arm(&self, slot: Slot) -> ArmSide {
        match slot {
            Slot::A => self.a,
            Slot::B => self.b,
        }
    }
}

/// What the judge sees of one arm: its final message and its file list (skill subtrees removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotView {
    /// The arm's final message (empty when it has none).
    pub final_message: String,
    /// Relative paths from [`super::inventory::judge_manifest`].
    pub files: Vec<String>,
}

/// The judge's prompt: the scripted runtime's `task: judge` header, the brief's prompt and rubric,
/// then `### A` and `### B` with each slot's final message and file list, and the answer format
/// `{"winner": "A" | "B" | "tie", "reason": "..."}`. Nothing else: no arm label, skill name or
/// runner path is added.
pub fn judge_prompt(brief: &Brief, a: &SlotView, b: &SlotView) -> String {
    let slot = |name: &str, view: &SlotView| {
        let files = if view.files.is_empty() { "(no files)".to_owned() } else { view.files.join("\n") };
        format!("### {name}\nFinal message:\n{}\n\nFiles:\n{files}\n", view.final_message.trim())
    };
    format!(
        "task: judge\n\nTwo anonymous runs answered the same task. Judge which one did it better.\n\n\
         Task:\n{}\n\nRubric:\n{}\n\n{}\n{}\n\
         Reply as one JSON object only: {{\"winner\": \"A\" | \"B\" | \"tie\", \"reason\": \"...\"}}\n",
        brief.prompt.trim(),
        brief.rubric.trim(),
        slot("A", a),
        slot("B", b)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    // E-04
    #[test]
    fn e04_mapping_is_random_and_prompt_has_no_arm_identity() {
        let n_with_in_a = (0..400).filter(|_| Mapping::draw().a == ArmSide::With).count();
        assert!((120..=280).contains(&n_with_in_a), "with-arm in slot A {n_with_in_a}/400 times");
        let brief: Brief = serde_json::from_value(serde_json::json!({
            "id": "b", "prompt": "Write it.", "verify": "true", "rubric": "Better?", "output": "reply"
        }))
        .unwrap();
        let view = |m: &str| SlotView { final_message: m.into(), files: vec!["out.md".into()] };
        let prompt = judge_prompt(&brief, &view("one"), &view("two"));
        for leak in ["with", "without", "skill", "baseline", "candidate", ".claude", "mapping"] {
            assert!(!prompt.to_lowercase().contains(leak), "prompt leaks {leak:?}: {prompt}");
        }
        let m = Mapping::new(false);
        assert_eq!(serde_json::to_value(m).unwrap(), serde_json::json!({"A": "without", "B": "with"}));
        assert_eq!(m.arm(Slot::B), ArmSide::With);
    }
}
