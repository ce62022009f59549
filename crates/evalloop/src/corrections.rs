//! Correction episodes, extracted without a model (resolution 19; E-29): a user turn that follows
//! an assistant turn (and an earlier user turn) and corrects it, found by a phrase list kept as
//! data.

use super::sessions::{Role, Session};

/// Phrases that open or carry a correction (English and German), lowercase.
pub const CORRECTION_PHRASES: &[&str] = &[
    "no,",
    "no.",
    "nope",
    "don't",
    "dont",
    "do not",
    "stop",
    "that's wrong",
    "thats wrong",
    "that is wrong",
    "wrong",
    "i said",
    "i told you",
    "instead",
    "not what i",
    "you forgot",
    "you missed",
    "never ",
    "why did you",
    "nein",
    "nicht so",
    "falsch",
    "ich sagte",
    "ich habe gesagt",
    "stattdessen",
    "bitte nicht",
    "hör auf",
    "hoer auf",
];

/// One correction episode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Episode {
    /// The session it is in.
    pub session_id: String,
    /// Index of the correcting turn in the session's turns.
    pub turn_idx: usize,
    /// The correcting turn's text.
    pub text: String,
}

/// Whether `session` could carry a correction: some user turn has both a previous user turn and
/// a previous assistant turn (E-29). One-shot questions cannot, however badly they went.
pub fn is_eligible(session: &Session) -> bool {
    candidate_turns(session).next().is_some()
}

fn candidate_turns(session: &Session) -> impl Iterator<Item = usize> + '_ {
    let mut seen_user = false;
    let mut seen_assistant_after_user = false;
    session
        .turns
        .iter()
        .enumerate()
        .filter_map(move |(idx, turn)| match turn.role {
            Role::Assistant => {
                seen_assistant_after_user |= seen_user;
                None
            }
            Role::User => {
                let candidate = seen_user
                    && seen_assistant_after_user
                    && session.turns[idx - 1].role == Role::Assistant;
                seen_user = true;
                candidate.then_some(idx)
            }
        })
}

/// The correction episodes of `session`, in order.
pub fn episodes(session: &Session) -> Vec<Episode> {
    candidate_turns(session)
        .filter(|idx| is_correction(&session.turns[*idx].text))
        .map(|idx| Episode {
            session_id: session.id.clone(),
            turn_idx: idx,
            text: session.turns[idx].text.clone(),
        })
        .collect()
}

/// Whether `text` reads as a correction (a phrase of [`CORRECTION_PHRASES`] in its first 200 characters).
pub fn is_correction(text: &str) -> bool {
    let head: String = text.to_lowercase().chars().take(200).collect();
    CORRECTION_PHRASES
        .iter()
        .any(|p| head.starts_with(p) || head.contains(&format!(" {p}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::{Source, parse_session, tests::CLAUDE};

    // E-29
    #[test]
    fn e29_only_sessions_with_a_previous_user_and_assistant_turn_count() {
        let session = parse_session(Source::Claude, CLAUDE).unwrap();
        assert!(is_eligible(&session));
        let eps = episodes(&session);
        assert_eq!(eps.len(), 1);
        assert!(eps[0].text.starts_with("no, that's far too long"));
        let mut one_shot = session.clone();
        one_shot.turns.truncate(2);
        one_shot.turns[0].text = "no, don't do that".into();
        assert!(
            !is_eligible(&one_shot),
            "a one-shot question cannot carry a correction"
        );
        assert!(episodes(&one_shot).is_empty());
        assert!(is_correction("Nein, ich sagte kurz"));
        assert!(!is_correction("thanks, looks great"));
    }
}
