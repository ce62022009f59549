//! Judge batches: stratified sampling with a fixed seed, batching, the per-run judge cache keyed
//! by content hash, the judge prompt, and reading replies (seed: optimize-loop,
//! judge-prompt-template.md; loop.md 3.3 step 5; resolutions 17).
//!
//! Sampling is reproducible forever: within a stratum, items are ordered by
//! `sha256("<seed>:<item_id>")` and the first ones taken (no RNG whose stream could change
//! between library versions). Strata get `sample_size` in proportion to their size (largest
//! remainder).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::snapshot::WorstCase;
use super::spec::Direction;

/// An item's id: its `id` (or `item_id`) field as a string.
pub fn item_id(item: &Value) -> String {
    match item.get("id").or_else(|| item.get("item_id")) {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

fn order_key(seed: u64, id: &str) -> [u8; 32] {
    Sha256::digest(format!("{seed}:{id}").as_bytes()).into()
}

/// Draws up to `sample_size` items, stratified by `field` when given, with `seed`, never drawing
/// an id in `exclude` (the holdout draws with `confirmation_seed` excluding the selection ids, O-38).
pub fn sample(
    items: &[Value],
    sample_size: usize,
    seed: u64,
    field: Option<&str>,
    exclude: &BTreeSet<String>,
) -> Vec<Value> {
    let mut strata: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for item in items.iter().filter(|i| !exclude.contains(&item_id(i))) {
        let key = field
            .and_then(|f| item.get(f))
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .unwrap_or_default();
        strata.entry(key).or_default().push(item);
    }
    let total: usize = strata.values().map(Vec::len).sum();
    let want = sample_size.min(total);
    if want == 0 {
        return Vec::new();
    }
    // proportional allocation, largest remainder
    let mut alloc: Vec<(String, usize, f64)> = strata
        .iter()
        .map(|(k, v)| {
            let exact = want as f64 * v.len() as f64 / total as f64;
            (k.clone(), exact.floor() as usize, exact - exact.floor())
        })
        .collect();
    let mut left = want - alloc.iter().map(|a| a.1).sum::<usize>();
    let mut by_remainder: Vec<usize> = (0..alloc.len()).collect();
    by_remainder.sort_by(|&a, &b| alloc[b].2.total_cmp(&alloc[a].2).then(a.cmp(&b)));
    for idx in by_remainder {
        if left == 0 {
            break;
        }
        if alloc[idx].1 < strata[&alloc[idx].0].len() {
            alloc[idx].1 += 1;
            left -= 1;
        }
    }
    let mut out = Vec::new();
    for (key, n, _) in alloc {
        let mut members = strata[&key].clone();
        members.sort_by_key(|i| order_key(seed, &item_id(i)));
        out.extend(members.into_iter().take(n).cloned());
    }
    out
}

/// `ceil(n_items / batch_size)` (O-09).
pub fn n_batches(n_items: usize, batch_size: usize) -> usize {
    n_items.div_ceil(batch_size.max(1))
}

/// The cache key of `item` under `rubric`: sha256 over the rubric's sha256 and the item's JSON bytes.
pub fn content_hash(rubric: &str, item: &Value) -> String {
    let mut h = Sha256::new();
    h.update(Sha256::digest(rubric.as_bytes()));
    h.update(serde_json::to_vec(item).unwrap_or_default());
    hex::encode(h.finalize())
}

/// One judged item as stored under the entry's `judge.items[]` and in the cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgedItem {
    /// The item's id.
    pub item_id: String,
    /// Cache key ([`content_hash`]).
    pub content_hash: String,
    /// Rubric fields (score, counts…).
    #[serde(default)]
    pub scores: BTreeMap<String, f64>,
    /// What held the score down.
    #[serde(default)]
    pub reason: String,
    /// What is wrong and what would fix it.
    #[serde(default)]
    pub feedback: String,
    /// Flagged as noisy; still counted (O-08).
    #[serde(default)]
    pub ambiguous: bool,
    /// Missing from both replies: excluded from the aggregate (resolutions 17).
    #[serde(default)]
    pub unscored: bool,
}

/// The per-run judge cache (`judge-cache.yaml`): content hash → judged item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct JudgeCache {
    /// Entries.
    pub items: BTreeMap<String, JudgedItem>,
}

/// What a judge pass must still dispatch.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgePlan {
    /// Items served from the cache.
    pub cached: Vec<JudgedItem>,
    /// Uncached items grouped into batches: `(content_hash, item)`.
    pub batches: Vec<Vec<(String, Value)>>,
}

/// Splits `sampled` into cached items and batches of uncached ones (O-32): identical items
/// (same hash) are dispatched once.
pub fn plan(sampled: &[Value], cache: &JudgeCache, rubric: &str, batch_size: usize) -> JudgePlan {
    let mut cached = Vec::new();
    let mut todo: Vec<(String, Value)> = Vec::new();
    let mut seen = BTreeSet::new();
    for item in sampled {
        let hash = content_hash(rubric, item);
        if let Some(hit) = cache.items.get(&hash) {
            let mut hit = hit.clone();
            hit.item_id = item_id(item);
            cached.push(hit);
        } else if seen.insert(hash.clone()) {
            todo.push((hash, item.clone()));
        }
    }
    let batches = todo.chunks(batch_size.max(1)).map(<[_]>::to_vec).collect();
    JudgePlan { cached, batches }
}

/// The judge prompt for one batch (judge-prompt-template.md, item evaluation template).
pub fn render_prompt(rubric: &str, batch: &[(String, Value)]) -> String {
    let items: Vec<&Value> = batch.iter().map(|(_, v)| v).collect();
    let items_json = serde_json::to_string_pretty(&items).unwrap_or_default();
    format!(
        "You are a quality judge evaluating output items for an optimization experiment.\n\n\
Your job is to score each item using the rubric below and return structured JSON. Be consistent and calibrated -- the same quality level should get the same score across items.\n\n\
<rubric>\n{rubric}\n</rubric>\n\n<items>\n{items_json}\n</items>\n\n<output-contract>\n\
Return ONLY a valid JSON array. No prose, no markdown, no explanation outside the JSON.\n\n\
Each element must have:\n\
- \"item_id\": the identifier of the item being evaluated (string or number, matching the input)\n\
- All fields requested by the rubric (scores, counts, etc.)\n\
- \"reason\": one short sentence naming what most held this item's score down, or what earned it the score when nothing did\n\
- \"feedback\": one or two sentences naming what is wrong with this item and what change would fix it. For an item at the top of the scale, name what keeps it there. This text drives the next round of hypotheses, so name the defect, not the score.\n\
- \"ambiguous\": true if you cannot confidently score this item (e.g., insufficient context, borderline case). When ambiguous, still provide your best-guess score but flag it.\n\n\
Rules:\n- Evaluate each item independently\n\
- Score the same content the same way every time: the same item must receive the same score and the same fields on a repeat call\n\
- Score based on the rubric, not on how other items in this batch scored\n\
- If an item is empty or has only 1 element when it should have more, score it based on what is present\n\
- For very large items (many elements), focus on a representative subset and note if quality varies across the item\n\
- Every item in the batch MUST appear in your output\n</output-contract>\n"
    )
}

/// The singleton prompt for one batch (judge-prompt-template.md, singleton evaluation template):
/// items in no cluster, with the existing clusters' summaries (titles/themes only).
pub fn render_singleton_prompt(
    rubric: &str,
    batch: &[(String, Value)],
    cluster_summaries: &[Value],
) -> String {
    let items: Vec<&Value> = batch.iter().map(|(_, v)| v).collect();
    let singletons = serde_json::to_string_pretty(&items).unwrap_or_default();
    let summaries = serde_json::to_string_pretty(cluster_summaries).unwrap_or_default();
    format!(
        "{SINGLETON_MARKER}\n\n\
Your job is to determine whether each singleton should have been grouped with an existing cluster, or whether it is genuinely unique. Return structured JSON.\n\n\
<rubric>\n{rubric}\n</rubric>\n\n<singletons>\n{singletons}\n</singletons>\n\n\
<existing-clusters>\nA summary of existing clusters for reference (titles/themes only, not full contents):\n{summaries}\n</existing-clusters>\n\n\
<output-contract>\nReturn ONLY a valid JSON array. No prose, no markdown, no explanation outside the JSON.\n\n\
Each element must have:\n- \"item_id\": the identifier of the singleton\n- All fields requested by the singleton rubric (should_cluster, best_cluster_id, confidence, etc.)\n\n\
Example output format (adapt field names to match the rubric):\n[\n  {{\"item_id\": \"issue-1234\", \"should_cluster\": true, \"best_cluster_id\": \"cluster-42\", \"confidence\": 4}},\n  {{\"item_id\": \"issue-5678\", \"should_cluster\": false, \"best_cluster_id\": null, \"confidence\": 5}}\n]\n\n\
Rules:\n- A singleton that genuinely has no match in existing clusters should get should_cluster: false\n\
- A singleton that clearly belongs in an existing cluster should get should_cluster: true with the cluster ID\n\
- High confidence (4-5) means you are very sure. Low confidence (1-2) means the item is borderline.\n\
- Every singleton in the batch MUST appear in your output\n</output-contract>\n"
    )
}

/// The first line of the singleton prompt.
pub const SINGLETON_MARKER: &str = "You are a quality judge evaluating singleton items -- items that are currently NOT in any group/cluster.";

/// Reads a singleton reply against `batch`: every returned item's numeric fields, booleans as
/// 1/0 (no `feedback` is asked for); a missing item is re-dispatched once (resolutions 17).
pub fn read_singleton_reply(text: &str, batch: &[(String, Value)]) -> Reply {
    let array = text
        .find('[')
        .and_then(|start| text.rfind(']').map(|end| &text[start..=end]))
        .and_then(|s| serde_json::from_str::<Vec<Value>>(s).ok())
        .unwrap_or_default();
    let mut reply = Reply::default();
    for (hash, item) in batch {
        let id = item_id(item);
        let Some(el) = array.iter().find(|el| item_id_of_reply(el) == id) else {
            reply.missing.push(id);
            continue;
        };
        let scores = el
            .as_object()
            .map(|o| {
                o.iter()
                    .filter_map(|(k, v)| {
                        v.as_f64()
                            .or_else(|| v.as_bool().map(|b| if b { 1.0 } else { 0.0 }))
                            .map(|f| (k.clone(), f))
                    })
                    .collect()
            })
            .unwrap_or_default();
        reply.items.push(JudgedItem {
            item_id: id,
            content_hash: hash.clone(),
            scores,
            reason: String::new(),
            feedback: String::new(),
            ambiguous: false,
            unscored: false,
        });
    }
    reply
}

/// The mean of every field over scored singletons, as `singleton_<field>` metrics.
pub fn singleton_metrics(items: &[JudgedItem]) -> BTreeMap<String, f64> {
    let mut fields: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for i in items.iter().filter(|i| !i.unscored) {
        for (k, v) in &i.scores {
            fields.entry(format!("singleton_{k}")).or_default().push(*v);
        }
    }
    fields
        .into_iter()
        .map(|(k, xs)| (k, super::snapshot::mean(&xs)))
        .collect()
}

/// A judge reply read against its batch.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reply {
    /// Items present in the reply (with their batch hashes).
    pub items: Vec<JudgedItem>,
    /// Batch ids the reply lacks.
    pub missing: Vec<String>,
    /// Whether some returned item has no `feedback`.
    pub lacks_feedback: bool,
}

impl Reply {
    /// Whether the batch is re-dispatched once (O-33, resolutions 17).
    pub fn needs_redispatch(&self) -> bool {
        self.lacks_feedback || !self.missing.is_empty()
    }
}

/// Reads a reply (a JSON array, possibly after prose) against `batch`; `score_field` must be a
/// number on each element. An unreadable reply counts every item missing.
pub fn read_reply(text: &str, batch: &[(String, Value)], score_field: &str) -> Reply {
    let array = text
        .find('[')
        .and_then(|start| text.rfind(']').map(|end| &text[start..=end]))
        .and_then(|s| serde_json::from_str::<Vec<Value>>(s).ok())
        .unwrap_or_default();
    let mut by_id: BTreeMap<String, &Value> = BTreeMap::new();
    for el in &array {
        by_id.entry(item_id_of_reply(el)).or_insert(el);
    }
    let mut reply = Reply::default();
    for (hash, item) in batch {
        let id = item_id(item);
        let Some(el) = by_id
            .get(&id)
            .filter(|el| el.get(score_field).and_then(Value::as_f64).is_some())
        else {
            reply.missing.push(id);
            continue;
        };
        let scores = el
            .as_object()
            .map(|o| {
                o.iter()
                    .filter_map(|(k, v)| v.as_f64().map(|f| (k.clone(), f)))
                    .collect()
            })
            .unwrap_or_default();
        let feedback = el
            .get("feedback")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim()
            .to_owned();
        reply.lacks_feedback |= feedback.is_empty();
        reply.items.push(JudgedItem {
            item_id: id,
            content_hash: hash.clone(),
            scores,
            reason: el
                .get("reason")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            feedback,
            ambiguous: el
                .get("ambiguous")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            unscored: false,
        });
    }
    reply
}

fn item_id_of_reply(el: &Value) -> String {
    match el.get("item_id") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// Settles one batch from its first reply and, when it needed one, the second (O-33): whatever
/// the second call returns is kept; an item missing from the last reply is marked unscored
/// (resolutions 17).
pub fn settle(batch: &[(String, Value)], first: Reply, second: Option<Reply>) -> Vec<JudgedItem> {
    let last = second.unwrap_or(first);
    let mut out = last.items;
    for (hash, item) in batch {
        let id = item_id(item);
        if !out.iter().any(|j| j.item_id == id) {
            out.push(JudgedItem {
                item_id: id,
                content_hash: hash.clone(),
                scores: BTreeMap::new(),
                reason: String::new(),
                feedback: String::new(),
                ambiguous: false,
                unscored: true,
            });
        }
    }
    out
}

/// Mean of `field` over scored items (ambiguous ones included, O-08); `None` when none scored.
pub fn aggregate(items: &[JudgedItem], field: &str) -> Option<f64> {
    let xs: Vec<f64> = items
        .iter()
        .filter(|i| !i.unscored)
        .filter_map(|i| i.scores.get(field).copied())
        .collect();
    (!xs.is_empty()).then(|| super::snapshot::mean(&xs))
}

/// The worst scored items by `direction`, about five, with their reasons (O-34).
pub fn worst_items(items: &[JudgedItem], field: &str, direction: Direction) -> Vec<WorstCase> {
    let cases: Vec<super::measure::Case> = items
        .iter()
        .filter(|i| !i.unscored)
        .filter_map(|i| {
            i.scores.get(field).map(|v| super::measure::Case {
                id: i.item_id.clone(),
                value: *v,
                reason: i.reason.clone(),
            })
        })
        .collect();
    super::measure::worst_cases(&cases, direction)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn items(n: usize) -> Vec<Value> {
        (0..n).map(|i| json!({"id": format!("c-{i}"), "stratum": if i % 3 == 0 { "big" } else { "small" }, "content": format!("cluster {i}")})).collect()
    }

    // O-09
    #[test]
    fn o09_sampling_is_stratified_and_reproducible_with_the_seed() {
        let all = items(60);
        let a = sample(&all, 30, 7, Some("stratum"), &BTreeSet::new());
        let b = sample(&all, 30, 7, Some("stratum"), &BTreeSet::new());
        assert_eq!(a, b, "same seed → same items");
        assert_eq!(a.len(), 30);
        assert_eq!(
            a.iter().filter(|i| i["stratum"] == "big").count(),
            10,
            "proportional: 20 of 60 are big"
        );
        assert_ne!(
            sample(&all, 30, 8, Some("stratum"), &BTreeSet::new()),
            a,
            "another seed → another sample"
        );
        assert_eq!(n_batches(30, 8), 4);
        assert_eq!(
            plan(&a, &JudgeCache::default(), "rubric", 8).batches.len(),
            4
        );
    }

    // O-38
    #[test]
    fn o38_holdout_sample_uses_the_confirmation_seed_and_only_undrawn_items() {
        let all = items(40);
        let selection = sample(&all, 10, 1, None, &BTreeSet::new());
        let drawn: BTreeSet<String> = selection.iter().map(item_id).collect();
        let holdout = sample(&all, 10, 2, None, &drawn);
        assert_eq!(holdout.len(), 10);
        assert!(
            holdout.iter().all(|i| !drawn.contains(&item_id(i))),
            "holdout items are disjoint from selection items"
        );
    }

    // O-32
    #[test]
    fn o32_cached_items_are_not_dispatched_and_identical_items_once() {
        let sampled = vec![
            json!({"id": "a", "content": "x"}),
            json!({"id": "b", "content": "x2"}),
            json!({"id": "a", "content": "x"}),
        ];
        let p = plan(&sampled, &JudgeCache::default(), "r", 8);
        assert_eq!(
            p.batches.iter().map(Vec::len).sum::<usize>(),
            2,
            "identical output scored once"
        );
        let mut cache = JudgeCache::default();
        for (hash, item) in &p.batches[0] {
            cache.items.insert(
                hash.clone(),
                JudgedItem {
                    item_id: item_id(item),
                    content_hash: hash.clone(),
                    scores: BTreeMap::from([("score".into(), 4.0)]),
                    reason: "r".into(),
                    feedback: "f".into(),
                    ambiguous: false,
                    unscored: false,
                },
            );
        }
        let p = plan(&sampled, &cache, "r", 8);
        assert!(
            p.batches.is_empty(),
            "a batch served from the cache does not dispatch"
        );
        assert_eq!(p.cached.len(), 3);
        assert_eq!(
            plan(&sampled, &cache, "another rubric", 8).batches.len(),
            1,
            "the key includes the rubric"
        );
    }

    // O-08
    #[test]
    fn o08_ambiguous_items_keep_their_score_and_count() {
        let batch = vec![
            ("h1".to_string(), json!({"id": "a"})),
            ("h2".to_string(), json!({"id": "b"})),
        ];
        let reply = read_reply(
            r#"[{"item_id":"a","score":3,"reason":"r","feedback":"f","ambiguous":true},{"item_id":"b","score":5,"reason":"r","feedback":"f","ambiguous":false}]"#,
            &batch,
            "score",
        );
        assert!(!reply.needs_redispatch());
        assert!(reply.items[0].ambiguous && reply.items[0].scores["score"] == 3.0);
        assert_eq!(aggregate(&reply.items, "score"), Some(4.0));
    }

    // O-10
    #[test]
    fn o10_reason_never_changes_the_score() {
        let batch = vec![
            ("h1".to_string(), json!({"id": "a"})),
            ("h2".to_string(), json!({"id": "b"})),
        ];
        let one = read_reply(
            r#"[{"item_id":"a","score":3,"reason":"short","feedback":"f"},{"item_id":"b","score":3,"reason":"a long and different reason","feedback":"f"}]"#,
            &batch,
            "score",
        );
        assert_eq!(aggregate(&one.items, "score"), Some(3.0));
        assert_eq!(one.items[0].scores, one.items[1].scores);
    }

    // O-33
    #[test]
    fn o33_missing_feedback_redispatches_once_and_keeps_the_second_reply() {
        let batch = vec![("h1".to_string(), json!({"id": "a"}))];
        let first = read_reply(
            r#"[{"item_id":"a","score":3,"reason":"r"}]"#,
            &batch,
            "score",
        );
        assert!(first.needs_redispatch());
        let second = read_reply(
            r#"[{"item_id":"a","score":2,"reason":"r2"}]"#,
            &batch,
            "score",
        );
        let settled = settle(&batch, first, Some(second));
        assert_eq!(settled.len(), 1);
        assert_eq!(
            (settled[0].scores["score"], settled[0].content_hash.as_str()),
            (2.0, "h1")
        );
    }

    #[test]
    fn singleton_replies_read_booleans_and_numbers_and_average_them() {
        let batch = vec![
            ("h1".to_string(), json!({"id": "s-1"})),
            ("h2".to_string(), json!({"id": "s-2"})),
        ];
        let prompt = render_singleton_prompt(
            "should it cluster?",
            &batch,
            &[json!({"id": "c-1", "title": "login"})],
        );
        assert!(
            prompt.starts_with(SINGLETON_MARKER)
                && prompt.contains("<existing-clusters>")
                && prompt.contains("\"title\": \"login\""),
            "{prompt}"
        );
        let reply = read_singleton_reply(
            r#"[{"item_id":"s-1","should_cluster":true,"confidence":4},{"item_id":"s-2","should_cluster":false,"confidence":2}]"#,
            &batch,
        );
        assert!(!reply.needs_redispatch());
        let m = singleton_metrics(&reply.items);
        assert_eq!(
            (m["singleton_should_cluster"], m["singleton_confidence"]),
            (0.5, 3.0)
        );
        assert_eq!(read_singleton_reply("[]", &batch).missing, ["s-1", "s-2"]);
    }

    // O-31 (the unscored half: resolutions 17)
    #[test]
    fn res17_an_item_missing_twice_is_unscored_and_excluded() {
        let batch = vec![
            ("h1".to_string(), json!({"id": "a"})),
            ("h2".to_string(), json!({"id": "b"})),
        ];
        let first = read_reply(
            r#"[{"item_id":"a","score":3,"reason":"r","feedback":"f"}]"#,
            &batch,
            "score",
        );
        assert_eq!(first.missing, ["b"]);
        let second = read_reply("sorry, no JSON", &batch, "score");
        let settled = settle(&batch, first, Some(second));
        assert!(settled.iter().all(|i| i.unscored), "{settled:?}");
        assert_eq!(aggregate(&settled, "score"), None);
    }
}
