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
            Self {
                a: ArmSide::With,
                b: ArmSide::Without,
            }
        } else {
            Self {
                a: ArmSide::Without,
                b: ArmSide::With,
            }
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

/// What the judge sees of one arm: its final message, its file list (skill subtrees and the
/// runtimes' own files removed) and, for a brief whose output is files, their content.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SlotView {
    /// The arm's final message (empty when it has none).
    pub final_message: String,
    /// Relative paths from [`super::inventory::judge_manifest`].
    pub files: Vec<String>,
    /// The delivered files' content, `(relative path, text)`, each already bounded by
    /// [`deliverable`] (a cut is marked in the text).
    pub delivered: Vec<(String, String)>,
}

/// Bytes of one delivered file shown to the judge (issue 31 item 5).
pub const DELIVERED_FILE_BYTES: usize = 24 * 1024;
/// Bytes of all delivered files of one slot shown to the judge.
pub const DELIVERED_SLOT_BYTES: usize = 64 * 1024;

/// The content of the files a file-output brief delivers in `workdir` (`output` a file, or a
/// directory whose files in `manifest` are all shown), for the judge: each file cut at
/// [`DELIVERED_FILE_BYTES`] and the slot at [`DELIVERED_SLOT_BYTES`], every cut marked
/// `[... truncated N bytes]`; a file that is not UTF-8 is shown as `(binary file, N bytes)`; a
/// missing deliverable as `(not delivered)`.
pub fn deliverable(
    workdir: &std::path::Path,
    output: &str,
    manifest: &[String],
) -> Vec<(String, String)> {
    let output = output.trim_end_matches('/');
    let mut paths: Vec<&String> = manifest
        .iter()
        .filter(|f| f.as_str() == output || f.starts_with(&format!("{output}/")))
        .collect();
    paths.sort();
    if paths.is_empty() {
        return vec![(output.to_owned(), "(not delivered)".to_owned())];
    }
    let mut budget = DELIVERED_SLOT_BYTES;
    let mut shown = Vec::new();
    for rel in paths {
        let bytes = std::fs::read(workdir.join(rel)).unwrap_or_default();
        let text = match String::from_utf8(bytes) {
            Err(e) => format!("(binary file, {} bytes)", e.as_bytes().len()),
            Ok(text) => {
                let cap = DELIVERED_FILE_BYTES.min(budget);
                let mut cut = cap.min(text.len());
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                budget -= cut;
                match cut < text.len() {
                    true => format!(
                        "{}\n[... truncated {} bytes]",
                        &text[..cut],
                        text.len() - cut
                    ),
                    false => text,
                }
            }
        };
        shown.push((rel.clone(), text));
    }
    shown
}

/// The judge's prompt: the scripted runtime's `task: judge` header, the brief's prompt and rubric,
/// then `### A` and `### B` with each slot's final message, file list and delivered files'
/// content (file-output briefs), and the answer format
/// `{"winner": "A" | "B" | "tie", "reason": "..."}`. Nothing else: no arm label, skill name or
/// runner path is added.
pub fn judge_prompt(brief: &Brief, a: &SlotView, b: &SlotView) -> String {
    let slot = |name: &str, view: &SlotView| {
        let files = if view.files.is_empty() {
            "(no files)".to_owned()
        } else {
            view.files.join("\n")
        };
        // The answer fenced, so its own Markdown (a `### Fixed` heading) cannot read as the
        // prompt's structure.
        let mut text = format!(
            "### {name}\nFinal message:\n~~~~\n{}\n~~~~\n\nFiles:\n{files}\n",
            view.final_message.trim()
        );
        for (path, content) in &view.delivered {
            text.push_str(&format!(
                "\nDelivered file `{path}`:\n~~~~\n{content}\n~~~~\n"
            ));
        }
        text
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
        let n_with_in_a = (0..400)
            .filter(|_| Mapping::draw().a == ArmSide::With)
            .count();
        assert!(
            (120..=280).contains(&n_with_in_a),
            "with-arm in slot A {n_with_in_a}/400 times"
        );
        let brief: Brief = serde_json::from_value(serde_json::json!({
            "id": "b", "prompt": "Write it.", "verify": "true", "rubric": "Better?", "output": "reply"
        }))
        .unwrap();
        let view = |m: &str| SlotView {
            final_message: m.into(),
            files: vec!["out.md".into()],
            delivered: vec![("out.md".into(), format!("{m} in the file"))],
        };
        let prompt = judge_prompt(&brief, &view("one"), &view("two"));
        for leak in [
            "with",
            "without",
            "skill",
            "baseline",
            "candidate",
            ".claude",
            "mapping",
        ] {
            assert!(
                !prompt.to_lowercase().contains(leak),
                "prompt leaks {leak:?}: {prompt}"
            );
        }
        assert!(
            prompt.contains("one in the file") && prompt.contains("two in the file"),
            "{prompt}"
        );
        // Each answer fenced: its own Markdown headings cannot read as the prompt's slots.
        let md = judge_prompt(&brief, &view("### Fixed\n- one"), &view("two"));
        assert!(
            md.contains("Final message:\n~~~~\n### Fixed\n- one\n~~~~\n"),
            "{md}"
        );
        let m = Mapping::new(false);
        assert_eq!(
            serde_json::to_value(m).unwrap(),
            serde_json::json!({"A": "without", "B": "with"})
        );
        assert_eq!(m.arm(Slot::B), ArmSide::With);
    }

    // Issue 31 item 5: a file-output brief's judge sees the files' content, bounded with the cut
    // marked; a 60 KB answer that fits the slot's budget arrives whole.
    #[test]
    fn delivered_files_are_shown_bounded_and_marked_where_cut() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("out")).unwrap();
        std::fs::write(dir.path().join("out/a.md"), "alpha").unwrap();
        std::fs::write(
            dir.path().join("out/big.md"),
            "x".repeat(DELIVERED_FILE_BYTES + 10),
        )
        .unwrap();
        std::fs::write(dir.path().join("other.md"), "not the output").unwrap();
        let manifest = vec![
            "other.md".to_owned(),
            "out/a.md".to_owned(),
            "out/big.md".to_owned(),
        ];
        let shown = deliverable(dir.path(), "out/", &manifest);
        assert_eq!(shown.len(), 2);
        assert_eq!(shown[0], ("out/a.md".to_owned(), "alpha".to_owned()));
        assert!(
            shown[1].1.ends_with("[... truncated 10 bytes]"),
            "{}",
            &shown[1].1[shown[1].1.len() - 40..]
        );
        assert_eq!(
            deliverable(dir.path(), "missing.md", &manifest),
            [("missing.md".to_owned(), "(not delivered)".to_owned())]
        );
        std::fs::write(dir.path().join("report.md"), "y".repeat(20_000)).unwrap();
        let one = deliverable(dir.path(), "report.md", &["report.md".to_owned()]);
        assert_eq!(one[0].1.len(), 20_000, "under the caps nothing is cut");
    }
}
