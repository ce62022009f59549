//! The blinded pairwise review packet an external optimizer writes (`pairwise-review.json`),
//! its separate secret map (`pairwise-secret-map.json`) and the reviewer's picks
//! (`pairwise-picks.json`), and the unblinding that turns a pick into champion/challenger
//! (seed: the pairwise-packet import paragraph). Shapes follow the optimizer's files.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::training::CONTRACT_VERSION;

/// `kind` of the blinded packet.
pub const PAIRWISE_PACKET_KIND: &str = "gitmoot-skillopt-pairwise-review-packet";
/// `kind` of the secret map.
pub const PAIRWISE_SECRET_MAP_KIND: &str = "gitmoot-skillopt-pairwise-secret-map";
/// `kind` of the picks file.
pub const PAIRWISE_PICKS_KIND: &str = "gitmoot-skillopt-pairwise-picks";
/// Default file names inside a packet dir.
pub const PAIRWISE_FILES: [&str; 3] = [
    "pairwise-review.json",
    "pairwise-secret-map.json",
    "pairwise-picks.json",
];
/// Role the unblinding yields for the promoted (current) version.
pub const CHAMPION: &str = "champion";
/// Role the unblinding yields for the candidate.
pub const CHALLENGER: &str = "challenger";

/// The blinded, reviewer-visible packet.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct PairwiseReviewPacket {
    /// [`PAIRWISE_PACKET_KIND`].
    #[serde(default)]
    pub kind: String,
    /// 1.
    #[serde(default)]
    pub contract_version: i64,
    /// `live-pairwise`.
    #[serde(default)]
    pub mode: String,
    /// Template id.
    #[serde(default)]
    pub template_id: String,
    /// The champion version id.
    #[serde(default)]
    pub base_version_id: String,
    /// Run id (required).
    #[serde(default)]
    pub run_id: String,
    /// Items (at least one).
    #[serde(default)]
    pub items: Vec<PairwisePacketItem>,
}

/// One item: the prompt and two anonymous outputs.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct PairwisePacketItem {
    /// Item id.
    #[serde(default)]
    pub item_id: String,
    /// Title.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub title: String,
    /// Prompt.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prompt: String,
    /// The anonymous sides.
    #[serde(default)]
    pub outputs: Vec<PairwisePacketSide>,
}

/// One anonymous side; carries nothing that reveals its role.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct PairwisePacketSide {
    /// `A` or `B`.
    #[serde(default)]
    pub label: String,
    /// Output text.
    #[serde(default)]
    pub response: String,
    /// Whether producing it failed.
    #[serde(default)]
    pub failed: bool,
    /// Why.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fail_reason: String,
    /// Raw token usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_usage: Option<Value>,
}

/// The secret unblinding map; the only file that knows which label is which.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct PairwiseSecretMap {
    /// [`PAIRWISE_SECRET_MAP_KIND`].
    #[serde(default)]
    pub kind: String,
    /// 1.
    #[serde(default)]
    pub contract_version: i64,
    /// Run id; must match the packet when set.
    #[serde(default)]
    pub run_id: String,
    /// Template id.
    #[serde(default)]
    pub template_id: String,
    /// Champion role name.
    #[serde(default)]
    pub champion_role: String,
    /// Challenger role name.
    #[serde(default)]
    pub challenger_role: String,
    /// Hash of the promoted content.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub promoted_content_hash: String,
    /// Hash of the candidate content.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub candidate_content_hash: String,
    /// Per-item mapping.
    #[serde(default)]
    pub items: Vec<PairwiseSecretItem>,
}

/// Per-item unblinding record: `mapping[label]` is `promoted` or `candidate`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct PairwiseSecretItem {
    /// Item id.
    #[serde(default)]
    pub item_id: String,
    /// Label shown for the champion.
    #[serde(default)]
    pub champion_label: String,
    /// Label shown for the challenger.
    #[serde(default)]
    pub challenger_label: String,
    /// label → promoted|candidate.
    #[serde(default)]
    pub mapping: BTreeMap<String, String>,
    /// Debug only.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub promoted_trace_path: String,
    /// Debug only.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub candidate_trace_path: String,
}

/// The reviewer's picks; `picks` may be a list of `{item_id, pick}` or a map item → pick.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct PairwisePicks {
    /// [`PAIRWISE_PICKS_KIND`], optional.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Run id; must match the packet when set.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub run_id: String,
    /// Reviewer.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reviewer: String,
    /// Picks.
    #[serde(default)]
    pub picks: Vec<PairwisePick>,
}

/// One pick: the anonymous label preferred.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct PairwisePick {
    /// Item id.
    #[serde(default)]
    pub item_id: String,
    /// `A` or `B`.
    #[serde(default)]
    pub pick: String,
}

impl PairwisePick {
    /// A pick of `label` for `item_id`.
    pub fn new(item_id: impl Into<String>, label: impl Into<String>) -> Self {
        PairwisePick {
            item_id: item_id.into(),
            pick: label.into(),
        }
    }
}

/// Why a pairwise file, or one item of it, cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PairwiseError {
    /// Empty file.
    #[error("{0} is empty")]
    Empty(&'static str),
    /// JSON problem.
    #[error("decode {what}: {message}")]
    Decode {
        /// Which file.
        what: &'static str,
        /// Parser message.
        message: String,
    },
    /// Wrong kind.
    #[error("{what} kind must be {want:?}, got {got:?}")]
    Kind {
        /// Which file.
        what: &'static str,
        /// Expected kind.
        want: &'static str,
        /// Found kind.
        got: String,
    },
    /// Wrong contract version.
    #[error("{what} contract_version must be 1, got {got}")]
    ContractVersion {
        /// Which file.
        what: &'static str,
        /// Found version.
        got: i64,
    },
    /// Packet without run id.
    #[error("pairwise review packet run_id is required")]
    RunIdRequired,
    /// Packet or picks without items.
    #[error("{0} has no items")]
    NoItems(&'static str),
    /// Secret map or picks for another run.
    #[error("{what} run_id {got:?} does not match packet run_id {want:?}")]
    RunIdMismatch {
        /// Which file.
        what: &'static str,
        /// Its run id.
        got: String,
        /// The packet's.
        want: String,
    },
    /// No secret entry for an item.
    #[error("no secret map entry for item {0:?}")]
    NoSecret(String),
    /// No pick for an item.
    #[error("no reviewer pick for item {0:?}")]
    NoPick(String),
    /// The secret entry cannot decide the label.
    #[error("unblind item {item_id:?}: {reason}")]
    Unblind {
        /// Item id.
        item_id: String,
        /// Why.
        reason: String,
    },
}

fn check_header(
    what: &'static str,
    want: &'static str,
    kind: &str,
    version: i64,
) -> Result<(), PairwiseError> {
    if kind != want {
        return Err(PairwiseError::Kind {
            what,
            want,
            got: kind.to_owned(),
        });
    }
    if version != CONTRACT_VERSION {
        return Err(PairwiseError::ContractVersion { what, got: version });
    }
    Ok(())
}

fn decode<T: serde::de::DeserializeOwned>(
    what: &'static str,
    text: &str,
) -> Result<T, PairwiseError> {
    if text.trim().is_empty() {
        return Err(PairwiseError::Empty(what));
    }
    crate::limits::check_json(text).map_err(|e| PairwiseError::Decode {
        what,
        message: format!("the file {e}"),
    })?;
    serde_json::from_str(text).map_err(|e| PairwiseError::Decode {
        what,
        message: e.to_string(),
    })
}

/// Parses the blinded packet: kind, contract_version 1, run_id, at least one item.
///
/// # Errors
/// A [`PairwiseError`].
pub fn parse_pairwise_packet(text: &str) -> Result<PairwiseReviewPacket, PairwiseError> {
    const WHAT: &str = "pairwise review packet";
    let packet: PairwiseReviewPacket = decode(WHAT, text)?;
    check_header(
        WHAT,
        PAIRWISE_PACKET_KIND,
        &packet.kind,
        packet.contract_version,
    )?;
    if packet.run_id.trim().is_empty() {
        return Err(PairwiseError::RunIdRequired);
    }
    if packet.items.is_empty() {
        return Err(PairwiseError::NoItems(WHAT));
    }
    Ok(packet)
}

/// Parses the secret map: kind and contract_version 1.
///
/// # Errors
/// A [`PairwiseError`].
pub fn parse_pairwise_secret_map(text: &str) -> Result<PairwiseSecretMap, PairwiseError> {
    const WHAT: &str = "pairwise secret map";
    let secret: PairwiseSecretMap = decode(WHAT, text)?;
    check_header(
        WHAT,
        PAIRWISE_SECRET_MAP_KIND,
        &secret.kind,
        secret.contract_version,
    )?;
    Ok(secret)
}

/// Parses picks; `picks` as a list of `{item_id, pick}` or an object `{item_id: pick}` (then
/// sorted by item id). At least one pick.
///
/// # Errors
/// A [`PairwiseError`].
pub fn parse_pairwise_picks(text: &str) -> Result<PairwisePicks, PairwiseError> {
    const WHAT: &str = "pairwise picks file";
    let raw: Value = decode(WHAT, text)?;
    let field = |key: &str| {
        raw.get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let picks = match raw.get("picks") {
        Some(Value::Array(list)) => {
            let list: Vec<PairwisePick> = serde_json::from_value(Value::Array(list.clone()))
                .map_err(|e| PairwiseError::Decode {
                    what: WHAT,
                    message: e.to_string(),
                })?;
            list
        }
        Some(Value::Object(map)) => map
            .iter()
            .map(|(item, pick)| match pick.as_str() {
                Some(p) => Ok(PairwisePick::new(item.clone(), p)),
                None => Err(PairwiseError::Decode {
                    what: WHAT,
                    message: format!("pick for {item:?} is not a string"),
                }),
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(Value::Null) | None => Vec::new(),
        Some(_) => {
            return Err(PairwiseError::Decode {
                what: WHAT,
                message: "picks must be an array or object".into(),
            });
        }
    };
    if picks.is_empty() {
        return Err(PairwiseError::NoItems(WHAT));
    }
    Ok(PairwisePicks {
        kind: field("kind"),
        run_id: field("run_id"),
        reviewer: field("reviewer"),
        picks,
    })
}

/// Checks that the secret map and picks describe the packet's run (when they name one).
///
/// # Errors
/// [`PairwiseError::RunIdMismatch`].
pub fn check_pairwise_runs(
    packet: &PairwiseReviewPacket,
    secret: &PairwiseSecretMap,
    picks: &PairwisePicks,
) -> Result<(), PairwiseError> {
    let want = packet.run_id.trim();
    for (what, got) in [
        ("secret map", secret.run_id.trim()),
        ("picks", picks.run_id.trim()),
    ] {
        if !got.is_empty() && got != want {
            return Err(PairwiseError::RunIdMismatch {
                what,
                got: got.to_owned(),
                want: want.to_owned(),
            });
        }
    }
    Ok(())
}

/// One item's unblinded preference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnblindedPick {
    /// Item id.
    pub item_id: String,
    /// Title, else prompt, else item id.
    pub title: String,
    /// The label picked, uppercased.
    pub pick: String,
    /// [`CHAMPION`] or [`CHALLENGER`].
    pub winner: &'static str,
    /// The other role.
    pub loser: &'static str,
    /// Champion output text.
    pub champion_response: String,
    /// Challenger output text.
    pub challenger_response: String,
}

fn norm_label(label: &str) -> String {
    label.trim().to_uppercase()
}

/// Resolves `label` to a role from the secret entry only: `mapping` (promoted → champion,
/// candidate → challenger) cross-checked with champion_label / challenger_label; a disagreement or
/// a label shared by both roles is an error, never a guess.
fn role_for_label(secret: &PairwiseSecretItem, label: &str) -> Result<&'static str, String> {
    let label = norm_label(label);
    if label.is_empty() {
        return Err("empty pick label".into());
    }
    let champion = norm_label(&secret.champion_label);
    let challenger = norm_label(&secret.challenger_label);
    if !champion.is_empty() && champion == challenger {
        return Err(format!(
            "secret map champion and challenger share label {champion:?}"
        ));
    }
    let mut from_mapping = None;
    for (raw_label, raw_role) in &secret.mapping {
        if norm_label(raw_label) != label {
            continue;
        }
        from_mapping = Some(match raw_role.trim().to_lowercase().as_str() {
            "promoted" => CHAMPION,
            "candidate" => CHALLENGER,
            _ => {
                return Err(format!(
                    "secret map label {label:?} has unknown role {raw_role:?}"
                ));
            }
        });
    }
    let from_labels = if !champion.is_empty() && label == champion {
        Some(CHAMPION)
    } else if !challenger.is_empty() && label == challenger {
        Some(CHALLENGER)
    } else {
        None
    };
    match (from_mapping, from_labels) {
        (Some(m), Some(l)) if m != l => Err(format!(
            "secret map mapping and labels disagree for {label:?}"
        )),
        (Some(role), _) | (None, Some(role)) => Ok(role),
        (None, None) => Err(format!(
            "secret map has no champion/challenger entry for label {label:?}"
        )),
    }
}

/// Unblinds every packet item (in packet order) using only the secret map. Per-item failures are
/// returned in place so the good items can still be recorded.
pub fn unblind_pairwise(
    packet: &PairwiseReviewPacket,
    secret: &PairwiseSecretMap,
    picks: &PairwisePicks,
) -> Vec<Result<UnblindedPick, PairwiseError>> {
    let secrets: BTreeMap<&str, &PairwiseSecretItem> =
        secret.items.iter().map(|s| (s.item_id.trim(), s)).collect();
    let chosen: BTreeMap<&str, &str> = picks
        .picks
        .iter()
        .map(|p| (p.item_id.trim(), p.pick.as_str()))
        .collect();
    packet
        .items
        .iter()
        .map(|item| {
            let item_id = item.item_id.trim();
            let unblind = |reason: String| PairwiseError::Unblind {
                item_id: item_id.to_owned(),
                reason,
            };
            let secret_item = secrets
                .get(item_id)
                .ok_or_else(|| PairwiseError::NoSecret(item_id.to_owned()))?;
            let pick = chosen
                .get(item_id)
                .map(|p| norm_label(p))
                .filter(|p| !p.is_empty())
                .ok_or_else(|| PairwiseError::NoPick(item_id.to_owned()))?;
            let winner = role_for_label(secret_item, &pick).map_err(unblind)?;
            let champion_label = norm_label(&secret_item.champion_label);
            let challenger_label = norm_label(&secret_item.challenger_label);
            if champion_label.is_empty() || challenger_label.is_empty() {
                return Err(unblind(
                    "secret map item is missing champion/challenger label".into(),
                ));
            }
            let response = |label: &str| {
                item.outputs
                    .iter()
                    .find(|o| norm_label(&o.label) == label)
                    .map(|o| o.response.clone())
            };
            let (Some(champion_response), Some(challenger_response)) =
                (response(&champion_label), response(&challenger_label))
            else {
                return Err(unblind(
                    "missing an output for the champion or challenger side".into(),
                ));
            };
            let title = [&item.title, &item.prompt]
                .into_iter()
                .map(|s| s.trim())
                .find(|s| !s.is_empty())
                .unwrap_or(item_id)
                .to_owned();
            Ok(UnblindedPick {
                item_id: item_id.to_owned(),
                title,
                pick,
                winner,
                loser: if winner == CHAMPION {
                    CHALLENGER
                } else {
                    CHAMPION
                },
                champion_response,
                challenger_response,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn packet() -> PairwiseReviewPacket {
        parse_pairwise_packet(
            &json!({
                "kind": PAIRWISE_PACKET_KIND, "contract_version": 1, "mode": "live-pairwise",
                "template_id": "planner", "base_version_id": "planner@v1", "run_id": "r1",
                "items": [
                    {"item_id": "i1", "prompt": "p1", "outputs": [{"label": "A", "response": "one"}, {"label": "B", "response": "two"}]},
                    {"item_id": "i2", "outputs": [{"label": "A", "response": "x"}, {"label": "B", "response": "y"}]},
                    {"item_id": "i3", "outputs": [{"label": "A", "response": "x"}]}
                ]
            })
            .to_string(),
        )
        .unwrap()
    }

    fn secret() -> PairwiseSecretMap {
        parse_pairwise_secret_map(
            &json!({
                "kind": PAIRWISE_SECRET_MAP_KIND, "contract_version": 1, "run_id": "r1", "template_id": "planner",
                "champion_role": "promoted", "challenger_role": "candidate",
                "items": [
                    {"item_id": "i1", "champion_label": "B", "challenger_label": "A", "mapping": {"a": "candidate", "B": "promoted"}},
                    {"item_id": "i2", "champion_label": "A", "challenger_label": "B", "mapping": {"A": "candidate"}},
                    {"item_id": "i3", "champion_label": "A", "challenger_label": "B", "mapping": {}}
                ]
            })
            .to_string(),
        )
        .unwrap()
    }

    #[test]
    fn unblinds_from_the_secret_map_only() {
        let picks =
            parse_pairwise_picks(r#"{"run_id": "r1", "picks": {"i1": "a", "i2": "A", "i3": "A"}}"#)
                .unwrap();
        check_pairwise_runs(&packet(), &secret(), &picks).unwrap();
        let results = unblind_pairwise(&packet(), &secret(), &picks);
        let first = results[0].as_ref().unwrap();
        assert_eq!(
            (first.winner, first.loser, first.pick.as_str()),
            (CHALLENGER, CHAMPION, "A")
        );
        assert_eq!(
            (
                first.champion_response.as_str(),
                first.challenger_response.as_str()
            ),
            ("two", "one")
        );
        assert_eq!(first.title, "p1");
        assert!(
            results[1]
                .as_ref()
                .unwrap_err()
                .to_string()
                .contains("mapping and labels disagree")
        );
        assert!(
            results[2]
                .as_ref()
                .unwrap_err()
                .to_string()
                .contains("missing an output")
        );
    }

    #[test]
    fn pairwise_file_refusals() {
        assert!(
            parse_pairwise_packet("")
                .unwrap_err()
                .to_string()
                .contains("is empty")
        );
        let wrong_kind =
            json!({"kind": "x", "contract_version": 1, "run_id": "r", "items": [{}]}).to_string();
        assert!(
            parse_pairwise_packet(&wrong_kind)
                .unwrap_err()
                .to_string()
                .contains("kind must be")
        );
        let no_items = json!({"kind": PAIRWISE_PACKET_KIND, "contract_version": 1, "run_id": "r", "items": []}).to_string();
        assert_eq!(
            parse_pairwise_packet(&no_items).unwrap_err(),
            PairwiseError::NoItems("pairwise review packet")
        );
        assert!(parse_pairwise_picks(r#"{"picks": 3}"#).is_err());
        assert!(parse_pairwise_picks(r#"{"picks": []}"#).is_err());
        let picks = parse_pairwise_picks(
            r#"{"run_id": "other", "picks": [{"item_id": "i1", "pick": "A"}]}"#,
        )
        .unwrap();
        assert!(matches!(
            check_pairwise_runs(&packet(), &secret(), &picks),
            Err(PairwiseError::RunIdMismatch { .. })
        ));
        let none = PairwisePicks {
            picks: vec![PairwisePick::new("zz", "A")],
            ..Default::default()
        };
        assert!(matches!(
            unblind_pairwise(&packet(), &secret(), &none)[0],
            Err(PairwiseError::NoPick(_))
        ));
    }
}
