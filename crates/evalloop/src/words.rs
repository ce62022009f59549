//! Words of correction text: one tokenizer and one English + German function-word stopword list,
//! shared by the recheck, backfill and theme (seed: skill-eval-loop, "theme.py").

use std::collections::BTreeSet;

/// English and German function words (the user corrects in both), lowercase.
pub const STOPWORDS: &[&str] = &[
    "a", "about", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at",
    "be", "because", "been", "before", "being", "but", "by", "can", "could", "did", "do", "does",
    "doing", "dont", "don", "down", "each", "for", "from", "had", "has", "have", "having", "he",
    "her", "here", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "let",
    "like", "me", "more", "most", "my", "no", "not", "now", "of", "off", "ok", "okay", "on",
    "once", "only", "or", "other", "our", "out", "over", "please", "same", "she", "should", "so",
    "some", "such", "than", "that", "thats", "the", "their", "them", "then", "there", "these",
    "they", "this", "those", "through", "to", "too", "under", "until", "up", "us", "very", "was",
    "we", "were", "what", "when", "where", "which", "while", "who", "why", "will", "with", "would",
    "yes", "you", "your", "youre", "im", "ive", "use", "make", "get", "got", "one", "need", "der",
    "die", "das", "den", "dem", "des", "ein", "eine", "einen", "einem", "einer", "und", "oder",
    "aber", "nicht", "kein", "keine", "ist", "sind", "war", "bitte", "ich", "du", "wir", "ihr",
    "sie", "er", "es", "mit", "von", "zu", "auf", "für", "fur", "bei", "nach", "noch", "schon",
    "auch", "nur", "so", "wie", "was", "wenn", "dass", "da", "hier", "jetzt", "mal", "doch", "ja",
    "nein", "im", "am", "an", "aus", "um", "man", "mich", "mir", "dich", "dir", "sich",
];

/// Lowercase word tokens of `text`: runs of letters or digits (Unicode, so `umlaute` and `für`
/// survive), apostrophes removed (`don't` → `dont`), tokens of one character dropped.
pub fn tokens(text: &str) -> Vec<String> {
    text.to_lowercase()
        .replace(['\'', '’'], "")
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| t.chars().count() > 1)
        .map(str::to_owned)
        .collect()
}

/// Distinct content words of `text`: [`tokens`] without [`STOPWORDS`].
pub fn content_words(text: &str) -> BTreeSet<String> {
    tokens(text)
        .into_iter()
        .filter(|t| !is_stopword(t))
        .collect()
}

/// Whether `word` (lowercase) is a stopword.
pub fn is_stopword(word: &str) -> bool {
    STOPWORDS.contains(&word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_keep_umlauts_and_drop_function_words() {
        assert_eq!(
            tokens("Don't use Ümlaute, für-real!"),
            ["dont", "use", "ümlaute", "für", "real"]
        );
        assert_eq!(content_words("but can dont have"), BTreeSet::new());
    }
}
