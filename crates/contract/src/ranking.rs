//! Ranking grammar (`C > A = D > B`; `>`, `,` and `|` order, `=` ties), pairwise derivation, and
//! feedback event ids (seed "Ranked Exploration Export"; facts §4; S-05).

use std::collections::BTreeSet;

use crate::gojson::to_go_json_compact;
use crate::hash::sha256_hex;
use crate::training::{PairwisePreference, RankedFeedbackEvent};

/// A parsed ranking: ordered groups, best first; labels in a group are tied.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ranking {
    /// Groups best to worst; each non-empty; labels lowercased and unique across groups.
    pub groups: Vec<Vec<String>>,
}

impl Ranking {
    /// All labels best to worst (the wire `ranking` field).
    pub fn labels(&self) -> Vec<String> {
        self.groups.iter().flatten().cloned().collect()
    }

    /// Groups of two or more tied labels (the wire `tie_groups` field).
    pub fn tie_groups(&self) -> Vec<Vec<String>> {
        self.groups
            .iter()
            .filter(|g| g.len() > 1)
            .cloned()
            .collect()
    }

    /// The sole label of the first group, if it has exactly one (the automatic winner).
    pub fn sole_first(&self) -> Option<&str> {
        match self.groups.first() {
            Some(first) if first.len() == 1 => Some(first[0].as_str()),
            _ => None,
        }
    }

    /// Rebuilds groups from a wire `ranking` and `tie_groups`: consecutive labels that share a tie
    /// group form one group. Labels are compared as given.
    pub fn from_wire(ranking: &[String], tie_groups: &[Vec<String>]) -> Ranking {
        let group_of = |label: &str| tie_groups.iter().position(|g| g.iter().any(|l| l == label));
        let mut groups: Vec<Vec<String>> = Vec::new();
        let mut last_tie: Option<usize> = None;
        for label in ranking {
            let tie = group_of(label);
            match (tie, last_tie, groups.last_mut()) {
                (Some(t), Some(prev), Some(group)) if t == prev => group.push(label.clone()),
                _ => groups.push(vec![label.clone()]),
            }
            last_tie = tie;
        }
        Ranking { groups }
    }
}

/// Why a ranking or winner is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RankingError {
    /// Nothing to parse.
    #[error("ranking is empty")]
    Empty,
    /// A separator with no label on one side, as in `A > > B`.
    #[error("ranking {0:?} has an empty label")]
    EmptyLabel(String),
    /// Fewer than two labels.
    #[error("ranking must name at least 2 options, got {0}")]
    TooFew(usize),
    /// A label appears twice.
    #[error("ranking label {0:?} is duplicated")]
    Duplicate(String),
    /// A label that is not one of the item's options.
    #[error("ranking label {label:?} is not an option; options are {options}")]
    UnknownLabel {
        /// The label.
        label: String,
        /// The item's options, comma-separated.
        options: String,
    },
    /// An option the ranking leaves out.
    #[error("ranking is missing option {0:?}")]
    MissingOption(String),
    /// Several options the ranking leaves out (each must be ranked).
    #[error("ranking is missing options {}", .0.iter().map(|o| format!("{o:?}")).collect::<Vec<_>>().join(", "))]
    MissingOptions(Vec<String>),
    /// A winner outside the first group.
    #[error("winner {winner:?} is not ranked first (first: {first})")]
    WinnerNotFirst {
        /// The winner given.
        winner: String,
        /// The first group, comma-separated.
        first: String,
    },
}

/// Parses ranking text. Each string is an expression; `>`, `,` and `|` separate ranks, `=` joins
/// tied labels; labels are trimmed and lowercased. Several strings are ranks in sequence
/// (`["c", "a = d", "b"]` ≡ `"c > a = d > b"`). With `options`, labels must be options and every
/// option must be ranked (facts §4). Checks: non-empty, no empty label, ≥ 2 labels, unique,
/// known, complete.
///
/// # Errors
/// A [`RankingError`] naming the label.
pub fn parse_ranking<S: AsRef<str>>(
    texts: &[S],
    options: Option<&[String]>,
) -> Result<Ranking, RankingError> {
    let mut groups = Vec::new();
    for text in texts {
        let text = text.as_ref();
        if text.trim().is_empty() {
            continue;
        }
        for rank in text.split(['>', ',', '|']) {
            let mut group = Vec::new();
            for label in rank.split('=') {
                let label = label.trim().to_lowercase();
                if label.is_empty() {
                    return Err(RankingError::EmptyLabel(text.to_owned()));
                }
                group.push(label);
            }
            groups.push(group);
        }
    }
    if groups.is_empty() {
        return Err(RankingError::Empty);
    }
    let ranking = Ranking { groups };
    let labels = ranking.labels();
    if labels.len() < 2 {
        return Err(RankingError::TooFew(labels.len()));
    }
    let mut seen = BTreeSet::new();
    for label in &labels {
        if !seen.insert(label.as_str()) {
            return Err(RankingError::Duplicate(label.clone()));
        }
    }
    if let Some(options) = options {
        let known: BTreeSet<String> = options.iter().map(|o| o.trim().to_lowercase()).collect();
        let listed = known.iter().cloned().collect::<Vec<_>>().join(", ");
        if let Some(label) = labels.iter().find(|l| !known.contains(*l)) {
            return Err(RankingError::UnknownLabel {
                label: label.clone(),
                options: listed,
            });
        }
        let mut missing: Vec<String> = known
            .iter()
            .filter(|o| !seen.contains(o.as_str()))
            .cloned()
            .collect();
        match missing.len() {
            0 => {}
            1 => return Err(RankingError::MissingOption(missing.remove(0))),
            _ => return Err(RankingError::MissingOptions(missing)),
        }
    }
    Ok(ranking)
}

/// Resolves the winner: a given winner (lowercased) must be in the first group; none given → the
/// sole first label, or `None` when the first group is a tie (facts §4).
///
/// # Errors
/// [`RankingError::WinnerNotFirst`].
pub fn resolve_winner(ranking: &Ranking, winner: &str) -> Result<Option<String>, RankingError> {
    let winner = winner.trim().to_lowercase();
    if winner.is_empty() {
        return Ok(ranking.sole_first().map(str::to_owned));
    }
    let first = ranking.groups.first().cloned().unwrap_or_default();
    if first.contains(&winner) {
        Ok(Some(winner))
    } else {
        Err(RankingError::WinnerNotFirst {
            winner,
            first: first.join(", "),
        })
    }
}

/// `(preferred, rejected)` pairs: for groups i < j, every label of group i over every label of
/// group j, in that loop order; none within a group (facts §4). A strict ranking of n labels gives
/// n·(n−1)/2 pairs (S-05).
pub fn preference_pairs(ranking: &Ranking) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    for (i, better) in ranking.groups.iter().enumerate() {
        for worse in &ranking.groups[i + 1..] {
            for preferred in better {
                for rejected in worse {
                    pairs.push((preferred.clone(), rejected.clone()));
                }
            }
        }
    }
    pairs
}

/// Pairwise preferences derived from a ranked event, each carrying `ranked_event_id = event.id`
/// and the event's reviewer, source, source_url and created_at; no trait text (S-05).
pub fn derive_pairwise(event: &RankedFeedbackEvent) -> Vec<PairwisePreference> {
    preference_pairs(&Ranking::from_wire(&event.ranking, &event.tie_groups))
        .into_iter()
        .map(|(preferred, rejected)| PairwisePreference {
            run_id: event.run_id.clone(),
            item_id: event.item_id.clone(),
            preferred,
            rejected,
            ranked_event_id: event.id.clone(),
            reviewer: event.reviewer.clone(),
            source: event.source.clone(),
            source_url: event.source_url.clone(),
            created_at: event.created_at.clone(),
        })
        .collect()
}

fn event_key_hash(
    run_id: &str,
    item_id: &str,
    reviewer: &str,
    source: &str,
    source_url: &str,
) -> String {
    let key = [run_id, item_id, reviewer, source, source_url];
    // A string array always serialises.
    sha256_hex(to_go_json_compact(&key).unwrap_or_default().as_bytes())
}

/// `feedback:` + sha256 hex of the JSON array `[run_id,item_id,reviewer,source,source_url]`
/// (facts §4): stable under the five-column conflict key, so re-imports upsert.
pub fn feedback_event_id(
    run_id: &str,
    item_id: &str,
    reviewer: &str,
    source: &str,
    source_url: &str,
) -> String {
    format!(
        "feedback:{}",
        event_key_hash(run_id, item_id, reviewer, source, source_url)
    )
}

/// `ranked-feedback:` + the same hash as [`feedback_event_id`].
pub fn ranked_feedback_event_id(
    run_id: &str,
    item_id: &str,
    reviewer: &str,
    source: &str,
    source_url: &str,
) -> String {
    format!(
        "ranked-feedback:{}",
        event_key_hash(run_id, item_id, reviewer, source, source_url)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(groups: &[&[&str]]) -> Vec<Vec<String>> {
        groups
            .iter()
            .map(|grp| grp.iter().map(|s| (*s).to_owned()).collect())
            .collect()
    }

    #[test]
    fn ranking_grammar_table() {
        let table: &[(&[&str], Vec<Vec<String>>)] = &[
            (&["C > A = D > B"], g(&[&["c"], &["a", "d"], &["b"]])),
            (&["c,a,d,b"], g(&[&["c"], &["a"], &["d"], &["b"]])),
            (&["c | a | b"], g(&[&["c"], &["a"], &["b"]])),
            (&["A=B"], g(&[&["a", "b"]])),
            (&["c > a, d | b"], g(&[&["c"], &["a"], &["d"], &["b"]])),
            (&["c", "a = d", "b"], g(&[&["c"], &["a", "d"], &["b"]])),
            (&[" C >A "], g(&[&["c"], &["a"]])),
        ];
        for (input, want) in table {
            assert_eq!(
                &parse_ranking(input, None).unwrap().groups,
                want,
                "input {input:?}"
            );
        }
    }

    #[test]
    fn ranking_refusals() {
        let opts: Vec<String> = ["a", "b", "c", "d"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let table: &[(&[&str], RankingError)] = &[
            (&[""], RankingError::Empty),
            (&["a > > b"], RankingError::EmptyLabel("a > > b".into())),
            (&["a"], RankingError::TooFew(1)),
            (&["a > b > A > c > d"], RankingError::Duplicate("a".into())),
            (
                &["a > b > c > e"],
                RankingError::UnknownLabel {
                    label: "e".into(),
                    options: "a, b, c, d".into(),
                },
            ),
            (&["a > b > c"], RankingError::MissingOption("d".into())),
            (
                &["a > b"],
                RankingError::MissingOptions(vec!["c".into(), "d".into()]),
            ),
        ];
        for (input, want) in table {
            assert_eq!(
                &parse_ranking(input, Some(&opts)).unwrap_err(),
                want,
                "input {input:?}"
            );
        }
    }

    #[test]
    fn winner_resolution() {
        let strict = parse_ranking(&["c > a > b"], None).unwrap();
        assert_eq!(resolve_winner(&strict, "").unwrap().as_deref(), Some("c"));
        assert_eq!(resolve_winner(&strict, "C").unwrap().as_deref(), Some("c"));
        assert!(matches!(
            resolve_winner(&strict, "a"),
            Err(RankingError::WinnerNotFirst { .. })
        ));
        let tied = parse_ranking(&["c = a > b"], None).unwrap();
        assert_eq!(resolve_winner(&tied, "").unwrap(), None);
        assert_eq!(resolve_winner(&tied, "a").unwrap().as_deref(), Some("a"));
    }

    #[test]
    fn s05_strict_ranking_gives_every_ordered_pair() {
        let ranking = parse_ranking(&["C > A > D > B"], None).unwrap();
        let event = RankedFeedbackEvent {
            id: "ranked-feedback:x".into(),
            ranking: ranking.labels(),
            useful_traits: Some(serde_json::json!({"c": ["bold"]})),
            ..Default::default()
        };
        let pairs: Vec<(String, String)> = derive_pairwise(&event)
            .into_iter()
            .map(|p| (p.preferred, p.rejected))
            .collect();
        let want: Vec<(String, String)> = [
            ("c", "a"),
            ("c", "d"),
            ("c", "b"),
            ("a", "d"),
            ("a", "b"),
            ("d", "b"),
        ]
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect();
        assert_eq!(pairs, want);
        assert!(
            derive_pairwise(&event)
                .iter()
                .all(|p| p.ranked_event_id == "ranked-feedback:x")
        );
    }

    #[test]
    fn s05_ties_produce_no_pairs_within_a_group() {
        let table: &[(&str, &[(&str, &str)])] = &[
            (
                "c > a = d > b",
                &[("c", "a"), ("c", "d"), ("c", "b"), ("a", "b"), ("d", "b")],
            ),
            ("a = b", &[]),
            (
                "a = b > c = d",
                &[("a", "c"), ("a", "d"), ("b", "c"), ("b", "d")],
            ),
        ];
        for (input, want) in table {
            let ranking = parse_ranking(&[*input], None).unwrap();
            // Through the wire form, as the exporter does.
            let rebuilt = Ranking::from_wire(&ranking.labels(), &ranking.tie_groups());
            assert_eq!(rebuilt, ranking, "{input}");
            let got = preference_pairs(&rebuilt);
            let want: Vec<(String, String)> = want
                .iter()
                .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
                .collect();
            assert_eq!(got, want, "{input}");
        }
    }

    #[test]
    fn event_ids_are_stable_and_prefixed() {
        let a = feedback_event_id("run", "item", "alice", "markdown", "/p");
        assert_eq!(
            a,
            feedback_event_id("run", "item", "alice", "markdown", "/p")
        );
        assert!(a.starts_with("feedback:") && a.len() == "feedback:".len() + 64);
        let expected = sha256_hex(br#"["run","item","alice","markdown","/p"]"#);
        assert_eq!(a, format!("feedback:{expected}"));
        assert_eq!(
            ranked_feedback_event_id("run", "item", "alice", "markdown", "/p"),
            format!("ranked-feedback:{expected}")
        );
    }
}
