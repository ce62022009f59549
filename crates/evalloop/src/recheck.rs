//! The recheck (seed: skill-eval-loop, "recheck.py (weekly)"; E-19..E-33; resolutions 14, 19): does
//! an adopted skill's failure session-rate drop by at least 30% after adoption? Confirms, revokes
//! or skips — and skips whenever the evidence is absent, never confirming or revoking on it. No
//! model is ever called.
//!
//! Refusals, in the order checked: no recorded signature; a signature lifted from the skill's own
//! description; fewer than two distinct words once common ones are dropped; more than 20;
//! under five days since adoption; no corrections at all in the corpus (a headless box); no
//! baseline (no eligible session before adoption); too few eligible sessions (< 10) on either
//! side; a baseline rate of zero; the length confound (length alone moves the expected rate by
//! the verdict's own factor); zero loads of the skill in the window (naming which kind of zero).

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use super::corrections::{Episode, episodes, is_eligible};
use super::ledger::{LedgerRow, Signature};
use super::sessions::Session;
use super::words::{content_words, is_stopword};

/// Thresholds (seed values and resolution 14's defaults).
#[derive(Debug, Clone, PartialEq)]
pub struct RecheckConfig {
    /// Relative drop that confirms (0.30).
    pub confirm_drop: f64,
    /// Days of sessions since adoption before any verdict (5).
    pub min_days: i64,
    /// Eligible sessions needed on each side (10).
    pub min_sessions: usize,
    /// Fewest distinct signature words left after dropping common ones (2).
    pub min_words: usize,
    /// Most distinct signature words (20).
    pub max_words: usize,
    /// A word in at least this share of all episodes is common and dropped (0.25).
    pub common_share: f64,
    /// A word in under this share of episodes matches alone (1/8).
    pub rare_share: f64,
}

impl Default for RecheckConfig {
    fn default() -> Self {
        Self {
            confirm_drop: 0.30,
            min_days: 5,
            min_sessions: 10,
            min_words: 2,
            max_words: 20,
            common_share: 0.25,
            rare_share: 0.125,
        }
    }
}

/// A recheck's verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum RecheckVerdict {
    /// The rate dropped by at least the factor and the skill was loaded.
    AdoptConfirmed,
    /// No drop: uninstall.
    Revoked,
    /// No verdict; the entry stays due.
    Skip {
        /// Why.
        reason: String,
    },
}

/// The verdict with the numbers behind it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecheckOutcome {
    /// The skill.
    pub skill: String,
    /// The verdict.
    pub verdict: RecheckVerdict,
    /// Loads of the skill in sessions since adoption (always stated).
    pub loads: u32,
    /// Failure session-rate before adoption, when measured.
    pub rate_before: Option<f64>,
    /// After, when measured.
    pub rate_after: Option<f64>,
    /// Eligible sessions before / after.
    pub n_before: usize,
    /// Eligible sessions after.
    pub n_after: usize,
}

impl RecheckOutcome {
    /// One human line: verdict, rates, load count.
    pub fn line(&self) -> String {
        let rates = match (self.rate_before, self.rate_after) {
            (Some(b), Some(a)) => format!(
                " (rate {:.0}% → {:.0}%, {} / {} sessions)",
                b * 100.0,
                a * 100.0,
                self.n_before,
                self.n_after
            ),
            _ => String::new(),
        };
        match &self.verdict {
            RecheckVerdict::AdoptConfirmed => format!(
                "{}: adopt-confirmed{rates}, loaded {} times",
                self.skill, self.loads
            ),
            RecheckVerdict::Revoked => format!(
                "{}: revoked{rates}, loaded {} times",
                self.skill, self.loads
            ),
            RecheckVerdict::Skip { reason } => format!(
                "{}: SKIP — {reason}{rates}; loaded {} times",
                self.skill, self.loads
            ),
        }
    }
}

/// What the recheck reads about one open entry.
#[derive(Debug, Clone)]
pub struct RecheckInput<'a> {
    /// The adoption row (its `at`, `signature`).
    pub entry: &'a LedgerRow,
    /// The skill's own description (front matter), for the lifted-from-description refusal.
    pub description: Option<&'a str>,
    /// Whether the skill is installed in the roots `uninstall` clears (colours a zero-load SKIP only).
    pub installed: bool,
    /// The corpus.
    pub sessions: &'a [Session],
    /// Now.
    pub now: DateTime<Utc>,
}

/// Per-word episode counts over a corpus: how many episodes contain each content word.
#[derive(Debug, Clone, Default)]
pub struct WordStats {
    /// Episodes in the corpus.
    pub n_episodes: usize,
    /// Word → episodes containing it.
    pub df: BTreeMap<String, usize>,
}

impl WordStats {
    /// Counts over `episodes`.
    pub fn of(episodes: &[Episode]) -> Self {
        let mut df = BTreeMap::new();
        for e in episodes {
            for w in content_words(&e.text) {
                *df.entry(w).or_insert(0) += 1;
            }
        }
        Self {
            n_episodes: episodes.len(),
            df,
        }
    }

    fn share(&self, word: &str) -> f64 {
        if self.n_episodes == 0 {
            return 0.0;
        }
        self.df.get(word).copied().unwrap_or(0) as f64 / self.n_episodes as f64
    }
}

/// The signature's matching words: distinct, lowercase, without stopwords or words common across
/// all corrections (E-25).
pub fn usable_words(
    signature: &Signature,
    stats: &WordStats,
    cfg: &RecheckConfig,
) -> BTreeSet<String> {
    signature
        .words
        .iter()
        .map(|w| w.trim().to_lowercase())
        .filter(|w| !w.is_empty() && !is_stopword(w) && stats.share(w) < cfg.common_share)
        .collect()
}

/// Whether `episode` matches: one rare word (in under [`RecheckConfig::rare_share`] of episodes)
/// or two signature words (E-28).
pub fn matches(
    episode_text: &str,
    words: &BTreeSet<String>,
    stats: &WordStats,
    cfg: &RecheckConfig,
) -> bool {
    let hit: Vec<String> = content_words(episode_text)
        .into_iter()
        .filter(|w| words.contains(w))
        .collect();
    hit.len() >= 2 || hit.first().is_some_and(|w| stats.share(w) < cfg.rare_share)
}

/// Why a signature cannot measure one theme (E-25, E-26, E-27); its message is the SKIP line's
/// reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureRefusal {
    /// E-27: `derived_from` names the skill's own description (`skill_md:`).
    #[error(
        "the signature was lifted from the skill's own description (derived_from skill_md): refused on sight; mine a theme with `eval theme`"
    )]
    LiftedFromSkillMd,
    /// E-27: four in five of its words are in the skill's description.
    #[error(
        "the signature is the skill's own description, not a mistake it prevents: refused on sight"
    )]
    IsDescription,
    /// E-25: too few distinct words left once words common to all corrections are dropped.
    #[error(
        "the signature has {n_words} distinct word(s) left once words common to all corrections are dropped (needs {min_words})"
    )]
    TooFewWords {
        /// Words left.
        n_words: usize,
        /// Words needed.
        min_words: usize,
    },
    /// E-26: more distinct words than `max_words`.
    #[error(
        "the signature matches on {n_words} distinct words, more than {max_words}: too broad to be about one theme"
    )]
    TooBroad {
        /// Words it matches on.
        n_words: usize,
        /// The cap.
        max_words: usize,
    },
}

/// Refuses a signature that cannot measure one theme (E-25, E-26, E-27); `Ok(words)` otherwise.
///
/// # Errors
/// The [`SignatureRefusal`], as the SKIP line says it.
pub fn check_signature(
    signature: &Signature,
    description: Option<&str>,
    stats: &WordStats,
    cfg: &RecheckConfig,
) -> Result<BTreeSet<String>, SignatureRefusal> {
    if signature
        .derived_from
        .as_deref()
        .is_some_and(|d| d.starts_with("skill_md:"))
    {
        return Err(SignatureRefusal::LiftedFromSkillMd);
    }
    if let Some(description) = description {
        let desc = content_words(description);
        let words: BTreeSet<String> = signature
            .words
            .iter()
            .map(|w| w.to_lowercase())
            .filter(|w| !is_stopword(w))
            .collect();
        if !words.is_empty()
            && words.iter().filter(|w| desc.contains(*w)).count() * 5 >= words.len() * 4
        {
            return Err(SignatureRefusal::IsDescription);
        }
    }
    let words = usable_words(signature, stats, cfg);
    if words.len() < cfg.min_words {
        return Err(SignatureRefusal::TooFewWords {
            n_words: words.len(),
            min_words: cfg.min_words,
        });
    }
    if words.len() > cfg.max_words {
        return Err(SignatureRefusal::TooBroad {
            n_words: words.len(),
            max_words: cfg.max_words,
        });
    }
    Ok(words)
}

/// Rechecks one entry (see the module docs for the order of refusals).
pub fn recheck(input: &RecheckInput<'_>, cfg: &RecheckConfig) -> RecheckOutcome {
    let entry = input.entry;
    let adopted = entry.at;
    let after: Vec<&Session> = input
        .sessions
        .iter()
        .filter(|s| s.started_at >= adopted && s.started_at <= input.now)
        .collect();
    let loads: u32 = after.iter().map(|s| s.loads_of(&entry.skill)).sum();
    let mut out = RecheckOutcome {
        skill: entry.skill.clone(),
        verdict: RecheckVerdict::AdoptConfirmed,
        loads,
        rate_before: None,
        rate_after: None,
        n_before: 0,
        n_after: 0,
    };
    let skip = |mut out: RecheckOutcome, reason: String| {
        out.verdict = RecheckVerdict::Skip { reason };
        out
    };
    let Some(signature) = &entry.signature else {
        return skip(
            out,
            format!(
                "no recorded signature: nothing to measure the skill by (record one from your \
                 corrections with `skillforge eval theme --skill {} --apply`)",
                entry.skill
            ),
        );
    };
    let all_episodes: Vec<Episode> = input.sessions.iter().flat_map(episodes).collect();
    let stats = WordStats::of(&all_episodes);
    let words = match check_signature(signature, input.description, &stats, cfg) {
        Ok(w) => w,
        Err(reason) => return skip(out, reason.to_string()),
    };
    if input.now - adopted < Duration::days(cfg.min_days) {
        return skip(
            out,
            format!(
                "fewer than {} days of sessions since adoption",
                cfg.min_days
            ),
        );
    }
    if all_episodes.is_empty() {
        return skip(
            out,
            "no corrections to count on this machine (run the recheck where the user types)"
                .to_owned(),
        );
    }
    let eligible = |s: &&Session| is_eligible(s);
    let before: Vec<&Session> = input
        .sessions
        .iter()
        .filter(|s| s.started_at < adopted)
        .filter(eligible)
        .collect();
    let after: Vec<&Session> = after.into_iter().filter(eligible).collect();
    (out.n_before, out.n_after) = (before.len(), after.len());
    if before.is_empty() {
        return skip(
            out,
            "no baseline: no eligible session before the adoption date".to_owned(),
        );
    }
    if before.len() < cfg.min_sessions || after.len() < cfg.min_sessions {
        return skip(
            out,
            format!(
                "too few sessions: {} before and {} after adoption (needs {} each)",
                before.len(),
                after.len(),
                cfg.min_sessions
            ),
        );
    }
    let failed = |s: &Session| {
        episodes(s)
            .iter()
            .any(|e| matches(&e.text, &words, &stats, cfg))
    };
    let rate = |w: &[&Session]| w.iter().filter(|s| failed(s)).count() as f64 / w.len() as f64;
    let (rate_before, rate_after) = (rate(&before), rate(&after));
    (out.rate_before, out.rate_after) = (Some(rate_before), Some(rate_after));
    if rate_before == 0.0 {
        return skip(
            out,
            "a baseline of zero: a rate of zero cannot drop".to_owned(),
        );
    }
    if let Some(shift) = length_shift(&before, &after, &failed)
        && shift >= cfg.confirm_drop
    {
        return skip(
            out,
            format!(
                "session length alone moves the expected rate by {:.0}%, as much as the verdict's own {:.0}% factor (length confound)",
                shift * 100.0,
                cfg.confirm_drop * 100.0
            ),
        );
    }
    if loads == 0 {
        let kind = if input.installed {
            "installed where the sessions ran but never chosen (passed over)"
        } else {
            "not installed in a root these sessions could reach"
        };
        return skip(
            out,
            format!("the skill was loaded 0 times since adoption: {kind}; the entry stays due"),
        );
    }
    out.verdict = if (rate_before - rate_after) / rate_before >= cfg.confirm_drop {
        RecheckVerdict::AdoptConfirmed
    } else {
        RecheckVerdict::Revoked
    };
    out
}

/// E-30: the relative change between the two windows' expected rates read off session lengths
/// alone (user turns, capped at 12), with per-length rates pooled over both windows; `None`
/// when the before-window's expected rate is zero.
fn length_shift(
    before: &[&Session],
    after: &[&Session],
    failed: &dyn Fn(&Session) -> bool,
) -> Option<f64> {
    let bucket = |s: &Session| s.n_user_turns().min(12);
    let mut by_len: BTreeMap<usize, (usize, usize)> = BTreeMap::new();
    for s in before.iter().chain(after) {
        let e = by_len.entry(bucket(s)).or_insert((0, 0));
        e.0 += usize::from(failed(s));
        e.1 += 1;
    }
    let expected = |w: &[&Session]| {
        w.iter()
            .map(|s| by_len[&bucket(s)].0 as f64 / by_len[&bucket(s)].1 as f64)
            .sum::<f64>()
            / w.len() as f64
    };
    let (b, a) = (expected(before), expected(after));
    (b > 0.0).then(|| ((b - a) / b).abs())
}

#[cfg(test)]
#[path = "recheck_tests.rs"]
mod tests;
