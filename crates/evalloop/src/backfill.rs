//! Backfill (seed: skill-eval-loop, "backfill.py"; E-34): gives already-adopted skills a matcher
//! by lifting a theme out of the installed SKILL.md — the front-matter description plus the
//! user's own quoted corrections — tagged `derived_from: skill_md:<path>`. A matcher, never a
//! measurement: the recheck refuses these on sight (resolution 14). `--redo` re-derives only
//! signatures backfill wrote; a hand-written one is never touched.

use std::path::Path;

use super::ledger::{LedgerRow, Signature};
use super::words::tokens;

/// Most words a lifted signature keeps.
pub const MAX_LIFTED_WORDS: usize = 40;

/// The signature lifted from a SKILL.md at `path` with text `text`: content words of the
/// `description:` line and of quoted lines (`"..."` or `> ...`), most frequent first.
pub fn lift_signature(path: &Path, text: &str) -> Signature {
    let mut source = String::new();
    for line in text.lines().map(str::trim) {
        if let Some(d) = line.strip_prefix("description:") {
            source.push_str(d);
            source.push('\n');
        } else if let Some(q) = line.strip_prefix('>') {
            source.push_str(q);
            source.push('\n');
        } else if line.starts_with('"') && line.ends_with('"') && line.len() > 2 {
            source.push_str(line);
            source.push('\n');
        }
    }
    let mut counts: Vec<(String, usize)> = Vec::new();
    for t in tokens(&source)
        .into_iter()
        .filter(|t| !super::words::is_stopword(t))
    {
        match counts.iter_mut().find(|(w, _)| *w == t) {
            Some((_, n)) => *n += 1,
            None => counts.push((t, 1)),
        }
    }
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    Signature {
        words: counts
            .into_iter()
            .take(MAX_LIFTED_WORDS)
            .map(|(w, _)| w)
            .collect(),
        derived_from: Some(format!("skill_md:{}", path.display())),
    }
}

/// Fills signatures on open install rows: missing ones always; with `redo`, those backfill
/// wrote before (`skill_md:`). `skill_md(row)` finds the installed SKILL.md (path, text).
/// Returns the skills whose rows changed.
pub fn backfill(
    rows: &mut [LedgerRow],
    redo: bool,
    skill_md: impl Fn(&LedgerRow) -> Option<(std::path::PathBuf, String)>,
) -> Vec<String> {
    let mut changed = Vec::new();
    for row in rows.iter_mut().filter(|r| r.is_open_install()) {
        let ours = row.signature.as_ref().is_some_and(|s| {
            s.derived_from
                .as_deref()
                .is_some_and(|d| d.starts_with("skill_md:"))
        });
        if row.signature.is_some() && !(redo && ours) {
            continue;
        }
        if let Some((path, text)) = skill_md(row) {
            row.signature = Some(lift_signature(&path, &text));
            changed.push(row.skill.clone());
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;
    use crate::ledger::tests::row;
    use crate::ledger::{backup_ledger, read_ledger, rewrite_ledger};

    // E-34
    #[test]
    fn e34_backfill_tags_skill_md_backs_up_and_redo_spares_hand_written() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = dir.path().join("ledger.jsonl");
        let mut hand = row("hand", "adopt", Utc::now());
        hand.signature = Some(Signature {
            words: vec!["umlaute".into(), "ascii".into()],
            derived_from: None,
        });
        let mut rows = vec![row("tldr", "adopt", Utc::now()), hand.clone()];
        rewrite_ledger(&ledger, &rows).unwrap();
        let md = "---\nname: tldr\ndescription: Keep status replies short and scannable\n---\n> \"no, three lines max\"\n";
        let find =
            |r: &LedgerRow| Some((dir.path().join(&r.skill).join("SKILL.md"), md.to_owned()));
        let backup = backup_ledger(&ledger, Utc::now()).unwrap();
        assert!(backup.is_file());
        let changed = backfill(&mut rows, true, find);
        assert_eq!(
            changed,
            ["tldr"],
            "the hand-written signature is untouched by --redo"
        );
        let sig = rows[0].signature.clone().unwrap();
        assert!(sig.derived_from.unwrap().starts_with("skill_md:"));
        assert!(
            sig.words.contains(&"short".to_string()) && sig.words.contains(&"lines".to_string()),
            "{:?}",
            sig.words
        );
        assert_eq!(rows[1], hand);
        rewrite_ledger(&ledger, &rows).unwrap();
        assert_eq!(read_ledger(&ledger).unwrap().len(), 2);
        assert_eq!(
            read_ledger(&backup).unwrap()[0].signature,
            None,
            "the backup holds the ledger as it was"
        );
    }
}
