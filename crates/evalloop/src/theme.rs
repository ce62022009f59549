//! Theme mining (seed: skill-eval-loop, "theme.py: when the skill has no theme worth measuring";
//! E-35..E-39): seed from the skill, pull the correction episodes the seed matches, rank the words
//! those episodes keep returning to by within-theme document frequency (not lift), then refuse a
//! result that is filler, off the skill's subject, without a baseline, or another skill's matcher.
//! Expect it to refuse; every refusal says why. [`forge_theme`] turns a derived theme into the
//! theme file the forge's `--mode corrections` drafts a knowledge-gap brief from: the user's rule
//! lines the theme matches, the corrections it matches, and the signature itself.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use super::corrections::Episode;
use super::draft::DraftTheme;
use super::ledger::Signature;
use super::recheck::{RecheckConfig, WordStats, matches};
use super::words::{content_words, is_stopword, tokens};

/// Thresholds.
#[derive(Debug, Clone, PartialEq)]
pub struct ThemeConfig {
    /// A seed matching more than this share of all episodes is too broad (`MAX_SEED_SHARE`).
    pub max_seed_share: f64,
    /// Absolute floor: a theme word must recur in at least this many seed episodes.
    pub word_floor: usize,
    /// Fewest recurring words a theme needs (4).
    pub min_words: usize,
    /// Most words kept.
    pub max_words: usize,
    /// Matched-session overlap at which two matchers are one.
    pub duplicate_overlap: f64,
    /// Shared prefix length that ties a word to the skill's name.
    pub subject_prefix: usize,
}

impl Default for ThemeConfig {
    fn default() -> Self {
        Self {
            max_seed_share: 0.35,
            word_floor: 3,
            min_words: 4,
            max_words: 8,
            duplicate_overlap: 0.5,
            subject_prefix: 5,
        }
    }
}

/// What theme mining reads.
#[derive(Debug, Clone)]
pub struct ThemeInput<'a> {
    /// The skill's name, e.g. `german-umlauts`.
    pub skill: &'a str,
    /// Its description.
    pub description: &'a str,
    /// Every correction episode of the corpus.
    pub episodes: &'a [Episode],
    /// When each session started (by id).
    pub session_start: &'a BTreeMap<String, DateTime<Utc>>,
    /// The adoption date.
    pub adopted_at: DateTime<Utc>,
    /// Other skills' matchers: name → sessions they match.
    pub others: &'a [(String, BTreeSet<String>)],
}

/// A derived theme.
#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    /// The signature, tagged `corrections:<n>` (n = seed episodes).
    pub signature: Signature,
    /// Sessions it matches.
    pub matched_sessions: BTreeSet<String>,
}

/// Sessions with an episode matching `words`.
pub fn matched_sessions(
    words: &BTreeSet<String>,
    episodes: &[Episode],
    stats: &WordStats,
) -> BTreeSet<String> {
    let cfg = RecheckConfig::default();
    episodes
        .iter()
        .filter(|e| matches(&e.text, words, stats, &cfg))
        .map(|e| e.session_id.clone())
        .collect()
}

fn shares_prefix(a: &str, b: &str, n: usize) -> bool {
    let common = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    common >= n.min(a.chars().count()).min(b.chars().count()) && common >= 3
}

/// Why no theme is derived from a skill's corrections ([`derive_theme`]), or no theme file made of
/// one ([`forge_theme`]). A refusal is the answer, not a failure: the CLI prints it as the reason.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ThemeRefusal {
    /// No correction episodes at all.
    #[error("no correction episodes to mine")]
    NoEpisodes,
    /// E-37: the seed matches more than `max_seed_share` of all episodes.
    #[error("the seed matches {:.0}% of all episodes, more than MAX_SEED_SHARE {:.0}%: too broad to find one theme in", .share * 100.0, .max_seed_share * 100.0)]
    TooBroad {
        /// The seed's share of all episodes, in [0,1].
        share: f64,
        /// The cap, in [0,1].
        max_seed_share: f64,
    },
    /// E-35: fewer than `min_words` words recur in at least `word_floor` seed episodes.
    #[error(
        "only {n_words} word(s) recur in at least {word_floor} seed episodes (needs {min_words}): nothing but filler to measure by"
    )]
    TooFewWords {
        /// Words that recur.
        n_words: usize,
        /// Seed episodes a word must recur in.
        word_floor: usize,
        /// Words needed.
        min_words: usize,
    },
    /// E-36: no theme word shares a prefix with a word of the skill's name.
    #[error(
        "the theme {words:?} does not include the word `{skill}` is named after: it drifted off the skill's subject"
    )]
    OffSubject {
        /// The theme's words.
        words: BTreeSet<String>,
        /// The skill.
        skill: String,
    },
    /// E-38: the theme matches no session before the adoption.
    #[error("the theme matches no session before the adoption date: no baseline")]
    NoBaseline,
    /// E-38: another open install's matcher matches the same sessions.
    #[error(
        "the theme matches the same sessions as `{other}`'s matcher ({overlap} of {smaller}): one matcher, not two; both are refused"
    )]
    Duplicate {
        /// The other skill.
        other: String,
        /// Sessions both match.
        overlap: usize,
        /// Sessions the smaller matcher matches.
        smaller: usize,
    },
    /// No line of the sources states a rule about the theme ([`forge_theme`]).
    #[error(
        "no line of {sources} states a rule about the theme {words:?}: give --memory DIR holding the user's rules (notes, CLAUDE.md), or write them in the skill's SKILL.md"
    )]
    NoRules {
        /// The sources read, joined with `, ` (`any source` when none).
        sources: String,
        /// The theme's words.
        words: Vec<String>,
    },
}

/// Derives a theme or says why not.
///
/// # Errors
/// The [`ThemeRefusal`]: a seed broader than `max_seed_share` (E-37), fewer than `min_words`
/// recurring words (E-35), no overlap with the word the skill is named after (E-36), no baseline
/// before adoption, or another skill's matcher by matched sessions (E-38).
pub fn derive_theme(input: &ThemeInput<'_>, cfg: &ThemeConfig) -> Result<Theme, ThemeRefusal> {
    let stats = WordStats::of(input.episodes);
    let name_words: Vec<String> = tokens(&input.skill.replace(['-', '_'], " "))
        .into_iter()
        .filter(|w| !is_stopword(w))
        .collect();
    let mut seed_words = content_words(input.description);
    seed_words.extend(name_words.iter().cloned());
    let seed: Vec<&Episode> = input
        .episodes
        .iter()
        .filter(|e| matches(&e.text, &seed_words, &stats, &RecheckConfig::default()))
        .collect();
    if input.episodes.is_empty() {
        return Err(ThemeRefusal::NoEpisodes);
    }
    let share = seed.len() as f64 / input.episodes.len() as f64;
    if share > cfg.max_seed_share {
        return Err(ThemeRefusal::TooBroad {
            share,
            max_seed_share: cfg.max_seed_share,
        });
    }
    let mut df: BTreeMap<String, usize> = BTreeMap::new();
    for e in &seed {
        for w in content_words(&e.text) {
            *df.entry(w).or_insert(0) += 1;
        }
    }
    let mut ranked: Vec<(String, usize)> = df
        .into_iter()
        .filter(|(_, n)| *n >= cfg.word_floor)
        .collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let words: BTreeSet<String> = ranked
        .into_iter()
        .take(cfg.max_words)
        .map(|(w, _)| w)
        .collect();
    if words.len() < cfg.min_words {
        return Err(ThemeRefusal::TooFewWords {
            n_words: words.len(),
            word_floor: cfg.word_floor,
            min_words: cfg.min_words,
        });
    }
    if !words.iter().any(|w| {
        name_words
            .iter()
            .any(|n| shares_prefix(w, n, cfg.subject_prefix))
    }) {
        return Err(ThemeRefusal::OffSubject {
            words,
            skill: input.skill.to_owned(),
        });
    }
    let matched = matched_sessions(&words, input.episodes, &stats);
    if !matched.iter().any(|s| {
        input
            .session_start
            .get(s)
            .is_some_and(|t| *t < input.adopted_at)
    }) {
        return Err(ThemeRefusal::NoBaseline);
    }
    for (other, theirs) in input.others {
        let inter = matched.intersection(theirs).count();
        let smaller = matched.len().min(theirs.len()).max(1);
        if inter as f64 / smaller as f64 >= cfg.duplicate_overlap {
            return Err(ThemeRefusal::Duplicate {
                other: other.clone(),
                overlap: inter,
                smaller,
            });
        }
    }
    Ok(Theme {
        signature: Signature {
            words: words.into_iter().collect(),
            derived_from: Some(format!("corrections:{}", seed.len())),
        },
        matched_sessions: matched,
    })
}

/// Most corrections a forge theme carries (the drafting prompt's evidence).
pub const MAX_THEME_CORRECTIONS: usize = 20;
/// Most rule lines a forge theme carries.
pub const MAX_THEME_RULES: usize = 12;

/// Lines of `text` that state something about the theme `words`: list items and sentences
/// (front matter, headings, code fences and lines under three words skipped, list markers
/// stripped) that the theme's own matcher matches (E-28: one rare word, or two). These are the
/// user's rules in the user's words: a memory file's notes, a skill's instructions.
pub fn rule_lines(text: &str, words: &BTreeSet<String>, stats: &WordStats) -> Vec<String> {
    let cfg = RecheckConfig::default();
    let mut lines = text.lines().peekable();
    if lines.peek().is_some_and(|l| l.trim() == "---") {
        lines.next();
        for l in lines.by_ref() {
            if l.trim() == "---" {
                break;
            }
        }
    }
    let mut out: Vec<String> = Vec::new();
    for line in lines {
        let t = line.trim();
        if t.starts_with('#') || t.starts_with("```") || t.starts_with("scripted") {
            continue;
        }
        let t = t
            .trim_start_matches(['-', '*', '+', ' '])
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .trim_start_matches(['.', ')', ' '])
            .trim();
        if tokens(t).len() < 3 || !matches(t, words, stats, &cfg) || out.iter().any(|o| o == t) {
            continue;
        }
        out.push(t.to_owned());
    }
    out
}

/// The theme file `eval forge --mode corrections --theme` reads ([`DraftTheme`]), from a derived
/// theme: `rules` = the rule lines of `sources` ((where, text) pairs: the user's memory files,
/// the skill's `SKILL.md`) the theme matches; `corrections` = the correction episodes it matches,
/// verbatim (at most [`MAX_THEME_CORRECTIONS`]); `signature` = the theme, so the adoption's ledger
/// row carries the matcher its recheck measures by.
///
/// # Errors
/// [`ThemeRefusal::NoRules`] when no rule line matches the theme (a knowledge-gap brief is about
/// the user's own rules; nothing would keep them out of the prompt), naming the sources read.
pub fn forge_theme(
    name: &str,
    theme: &Theme,
    episodes: &[Episode],
    sources: &[(String, String)],
) -> Result<DraftTheme, ThemeRefusal> {
    let stats = WordStats::of(episodes);
    let words: BTreeSet<String> = theme.signature.words.iter().cloned().collect();
    let mut rules: Vec<String> = Vec::new();
    for (_, text) in sources {
        for line in rule_lines(text, &words, &stats) {
            if !rules.contains(&line) && rules.len() < MAX_THEME_RULES {
                rules.push(line);
            }
        }
    }
    if rules.is_empty() {
        let read: Vec<&str> = sources.iter().map(|(w, _)| w.as_str()).collect();
        return Err(ThemeRefusal::NoRules {
            sources: if read.is_empty() {
                "any source".to_owned()
            } else {
                read.join(", ")
            },
            words: theme.signature.words.clone(),
        });
    }
    let mut corrections: Vec<String> = Vec::new();
    let cfg = RecheckConfig::default();
    for e in episodes
        .iter()
        .filter(|e| matches(&e.text, &words, &stats, &cfg))
    {
        if corrections.len() < MAX_THEME_CORRECTIONS && !corrections.contains(&e.text) {
            corrections.push(e.text.clone());
        }
    }
    Ok(DraftTheme {
        name: name.to_owned(),
        rules,
        corrections,
        signature: Some(theme.signature.clone()),
    })
}

#[cfg(test)]
mod tests {
    use chrono::Duration;

    use super::*;
    use crate::recheck::check_signature;

    fn ep(id: &str, text: &str) -> Episode {
        Episode {
            session_id: id.into(),
            turn_idx: 2,
            text: text.into(),
        }
    }

    fn t0() -> DateTime<Utc> {
        "2026-09-17T00:00:00Z".parse().unwrap()
    }

    /// 40 episodes: 8 about umlauts (half before adoption), 32 about other things.
    fn corpus() -> (Vec<Episode>, BTreeMap<String, DateTime<Utc>>) {
        let mut eps = Vec::new();
        for i in 0..8 {
            eps.push(ep(
                &format!("u{i}"),
                "no, write the umlaute properly, not ae oe ue in the german text",
            ));
        }
        for i in 0..32 {
            eps.push(ep(
                &format!("o{i}"),
                &format!("no, the deploy script {i} goes to staging first"),
            ));
        }
        let starts = eps
            .iter()
            .enumerate()
            .map(|(i, e)| {
                (
                    e.session_id.clone(),
                    t0() + Duration::days(i as i64 % 2 * 2 - 1),
                )
            })
            .collect();
        (eps, starts)
    }

    fn input<'a>(
        skill: &'a str,
        description: &'a str,
        eps: &'a [Episode],
        starts: &'a BTreeMap<String, DateTime<Utc>>,
        others: &'a [(String, BTreeSet<String>)],
    ) -> ThemeInput<'a> {
        ThemeInput {
            skill,
            description,
            episodes: eps,
            session_start: starts,
            adopted_at: t0(),
            others,
        }
    }

    // E-36
    #[test]
    fn e36_theme_must_include_the_word_the_skill_is_named_after() {
        let (eps, starts) = corpus();
        let theme = derive_theme(
            &input(
                "german-umlauts",
                "Write proper umlauts in german text",
                &eps,
                &starts,
                &[],
            ),
            &ThemeConfig::default(),
        )
        .unwrap();
        assert!(
            theme.signature.words.contains(&"umlaute".to_string()),
            "{:?}",
            theme.signature.words
        );
        let off = derive_theme(
            &input(
                "asset-reuse",
                "Reuse existing german text",
                &eps,
                &starts,
                &[],
            ),
            &ThemeConfig::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(off.contains("drifted off"), "{off}");
    }

    // E-35
    #[test]
    fn e35_filler_and_too_few_recurring_words_refused() {
        let eps: Vec<Episode> = (0..20)
            .map(|i| {
                ep(
                    &format!("s{i}"),
                    if i < 6 {
                        "no but can dont have umlaute ascii"
                    } else {
                        "no, staging deploy first"
                    },
                )
            })
            .collect();
        let starts = eps
            .iter()
            .map(|e| (e.session_id.clone(), t0() - Duration::days(1)))
            .collect();
        let e = derive_theme(
            &input("umlaute", "umlaute ascii", &eps, &starts, &[]),
            &ThemeConfig::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("only 2 word(s)"),
            "`but can dont have` are stopwords, never theme words: {e}"
        );
    }

    // E-37
    #[test]
    fn e37_broad_seed_refused_and_the_floor_is_absolute() {
        let (eps, starts) = corpus();
        let e = derive_theme(
            &input("deploy-notes", "deploy staging script", &eps, &starts, &[]),
            &ThemeConfig::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("MAX_SEED_SHARE"), "{e}");
        let tripled: Vec<Episode> = (0..3)
            .flat_map(|k| {
                eps.iter()
                    .map(move |e| ep(&format!("{}-{k}", e.session_id), &e.text))
            })
            .collect();
        let starts3 = tripled
            .iter()
            .map(|e| (e.session_id.clone(), t0() - Duration::days(1)))
            .collect();
        let theme = derive_theme(
            &input(
                "german-umlauts",
                "Write proper umlauts in german text",
                &tripled,
                &starts3,
                &[],
            ),
            &ThemeConfig::default(),
        )
        .unwrap();
        assert_eq!(
            ThemeConfig::default().word_floor,
            3,
            "the floor does not grow with the corpus"
        );
        assert!(theme.signature.words.len() >= 4);
    }

    // E-38
    #[test]
    fn e38_baseline_needed_and_duplicates_found_on_matched_sessions() {
        let (eps, starts) = corpus();
        let after: BTreeMap<String, DateTime<Utc>> = starts
            .keys()
            .map(|k| (k.clone(), t0() + Duration::days(1)))
            .collect();
        let e = derive_theme(
            &input(
                "german-umlauts",
                "Write proper umlauts in german text",
                &eps,
                &after,
                &[],
            ),
            &ThemeConfig::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("no baseline"), "{e}");
        let same: BTreeSet<String> = (0..6).map(|i| format!("u{i}")).collect();
        let others = vec![("umlaut-fixer".to_string(), same)];
        let e = derive_theme(
            &input(
                "german-umlauts",
                "Write proper umlauts in german text",
                &eps,
                &starts,
                &others,
            ),
            &ThemeConfig::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("umlaut-fixer") && e.contains("both are refused"),
            "{e}"
        );
    }

    // E-39
    #[test]
    fn e39_applied_theme_is_tagged_and_the_recheck_still_refuses_it_when_too_broad() {
        let (eps, starts) = corpus();
        let theme = derive_theme(
            &input(
                "german-umlauts",
                "Write proper umlauts in german text",
                &eps,
                &starts,
                &[],
            ),
            &ThemeConfig::default(),
        )
        .unwrap();
        assert_eq!(
            theme.signature.derived_from.as_deref(),
            Some("corrections:8")
        );
        let stats = WordStats::of(&eps);
        assert!(check_signature(&theme.signature, None, &stats, &RecheckConfig::default()).is_ok());
        let broad = Signature {
            words: (0..21).map(|i| format!("w{i}")).collect(),
            derived_from: Some("corrections:8".into()),
        };
        assert!(
            check_signature(&broad, None, &stats, &RecheckConfig::default())
                .unwrap_err()
                .to_string()
                .contains("more than 20")
        );
    }

    // E-39 into the forge's theme file: rules are the sources' lines the theme matches (front
    // matter, headings and one-word lines skipped), corrections the matched episodes, and the
    // signature rides along; a theme no source states a rule about is refused.
    #[test]
    fn e39_forge_theme_carries_matched_rules_corrections_and_the_signature() {
        let (eps, starts) = corpus();
        let theme = derive_theme(
            &input(
                "german-umlauts",
                "Write proper umlauts in german text",
                &eps,
                &starts,
                &[],
            ),
            &ThemeConfig::default(),
        )
        .unwrap();
        let skill_md = "---\ndescription: umlaute ascii german text\n---\n# Umlaute\n- Write umlaute in german text, never ae oe ue.\n- Deploy to staging first.\n- umlaute\n".to_owned();
        let file = forge_theme(
            "german-umlauts",
            &theme,
            &eps,
            &[("SKILL.md".into(), skill_md)],
        )
        .unwrap();
        assert_eq!(
            file.rules,
            ["Write umlaute in german text, never ae oe ue."]
        );
        assert_eq!(
            file.corrections,
            ["no, write the umlaute properly, not ae oe ue in the german text"]
        );
        assert_eq!(file.signature.as_ref(), Some(&theme.signature));
        let e = forge_theme(
            "german-umlauts",
            &theme,
            &eps,
            &[("notes.md".into(), "- Deploy to staging first.\n".into())],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("notes.md") && e.contains("--memory"), "{e}");
    }
}
