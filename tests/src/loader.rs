//! A conformance check that does what the external optimizer's data loader does with a training
//! package (`gitmoot-skillopt`, `GitmootDataLoader.setup`, the path of every real run; its
//! `--dry-run` reads no blob), written from its documented behaviour, independent of skillforge's
//! own code so it can catch skillforge's mistakes:
//!
//! 1. every item id is one filesystem path segment (no `/`, `\`, not `.`, `..` or blank);
//! 2. each artifact id of the item (source, baseline, candidate, preview, diff, then each option)
//!    is in `artifacts[]`;
//! 3. its blob resolves by hash under the artifact root (`sha256/<hex[:2]>/<hex>`), hashes to that
//!    hash and has `size_bytes` bytes;
//! 4. it decodes as UTF-8, and its driver is one the loader reads: `text`, `markdown`,
//!    `text/markdown` with a `text/*` or `application/markdown` media type, or `vue-vite` with
//!    `application/json` holding `{"files": [{path, content}, ...]}`;
//! 5. splits: explicit `metadata.split` values must be known and fill train, val and test;
//!    without them at least one item is needed.
//!
//! Messages are the loader's own, prefixed with the item id.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Drivers the loader reads as text.
pub const TEXT_DRIVERS: [&str; 3] = ["text", "markdown", "text/markdown"];
/// Drivers the loader reads as preview bundles.
pub const PREVIEW_DRIVERS: [&str; 1] = ["vue-vite"];

/// One item as the loader would hand it to training: its id and each role's artifact text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedItem {
    /// Item id.
    pub id: String,
    /// Role (`baseline`, `option:a`, …) → artifact text.
    pub artifacts: BTreeMap<String, String>,
}

/// Loads `package` (parsed JSON) against `artifact_root` as the loader does. `Ok` holds every
/// item; `Err` holds one message per refused item (the loader stops at the first; all are listed
/// here so a test can say exactly which items fail), or the split error.
///
/// # Errors
/// The loader's refusals, as described in the module docs.
pub fn load_like_optimizer(
    package: &Value,
    artifact_root: &Path,
) -> Result<Vec<LoadedItem>, Vec<String>> {
    let Some(items) = package["items"].as_array() else {
        return Err(vec![
            "items is not a list (the loader crashes with a TypeError)".to_owned(),
        ]);
    };
    let refs: BTreeMap<&str, &Value> = package["artifacts"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| Some((r["id"].as_str()?, r)))
                .collect()
        })
        .unwrap_or_default();
    let mut loaded = Vec::new();
    let mut errors = Vec::new();
    for item in items {
        let id = item["id"].as_str().unwrap_or("");
        match load_item(item, &refs, artifact_root) {
            Ok(artifacts) => loaded.push(LoadedItem {
                id: id.to_owned(),
                artifacts,
            }),
            Err(e) => errors.push(format!("item {id:?}: {e}")),
        }
    }
    if errors.is_empty()
        && let Err(e) = check_splits(items)
    {
        errors.push(e);
    }
    if errors.is_empty() {
        Ok(loaded)
    } else {
        Err(errors)
    }
}

fn load_item(
    item: &Value,
    refs: &BTreeMap<&str, &Value>,
    root: &Path,
) -> Result<BTreeMap<String, String>, String> {
    let id = item["id"].as_str().unwrap_or("").trim();
    if id.is_empty() {
        return Err("Gitmoot item id is required".to_owned());
    }
    if id == "." || id == ".." || id.contains('/') || id.contains('\\') {
        return Err(format!(
            "Gitmoot item id {id:?} is not safe for filesystem output"
        ));
    }
    let mut roles: Vec<(String, String)> = ["source", "baseline", "candidate", "preview", "diff"]
        .iter()
        .map(|role| {
            (
                (*role).to_owned(),
                item[format!("{role}_artifact_id")]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
            )
        })
        .collect();
    for option in item["options"].as_array().into_iter().flatten() {
        let label = option["label"].as_str().unwrap_or("");
        roles.push((
            format!("option:{label}"),
            option["artifact_id"].as_str().unwrap_or("").to_owned(),
        ));
    }
    let mut resolved = BTreeMap::new();
    for (role, artifact_id) in roles.into_iter().filter(|(_, a)| !a.is_empty()) {
        let reference = refs
            .get(artifact_id.as_str())
            .ok_or_else(|| format!("KeyError: {artifact_id:?}"))?;
        let content = read_blob(root, reference)?;
        let text = String::from_utf8(content)
            .map_err(|_| format!("artifact {artifact_id:?} is not valid UTF-8 text"))?;
        check_driver(reference, &text)?;
        resolved.insert(role, text);
    }
    Ok(resolved)
}

fn read_blob(root: &Path, reference: &Value) -> Result<Vec<u8>, String> {
    let declared = reference["hash"]
        .as_str()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let hex_hash = declared.strip_prefix("sha256:").unwrap_or(&declared);
    if hex_hash.len() != 64 {
        return Err("artifact hash must be 64 hex characters".to_owned());
    }
    if !hex_hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("artifact hash is not valid hex".to_owned());
    }
    let normalized = format!("sha256:{hex_hash}");
    let path = root.join("sha256").join(&hex_hash[..2]).join(hex_hash);
    if !path.is_file() {
        return Err(format!(
            "artifact blob {normalized} not found (looked for {})",
            path.display()
        ));
    }
    let content = std::fs::read(&path).map_err(|e| format!("read {}: {e}", path.display()))?;
    let actual = format!("sha256:{}", hex::encode(Sha256::digest(&content)));
    if actual != normalized {
        return Err(format!(
            "artifact blob {normalized} content hash mismatch: got {actual}"
        ));
    }
    if let Some(want) = reference["size_bytes"].as_i64()
        && i64::try_from(content.len()).ok() != Some(want)
    {
        return Err(format!(
            "artifact blob {normalized} has size {}, want {want}",
            content.len()
        ));
    }
    Ok(content)
}

fn check_driver(reference: &Value, text: &str) -> Result<(), String> {
    let raw_driver = reference["driver"].as_str().unwrap_or("");
    let driver = raw_driver.trim().to_ascii_lowercase();
    let raw_media = reference["media_type"].as_str().unwrap_or("");
    let media = raw_media.trim().to_ascii_lowercase();
    let id = reference["id"].as_str().unwrap_or("");
    if TEXT_DRIVERS.contains(&driver.as_str()) {
        if !(media.is_empty() || media.starts_with("text/") || media == "application/markdown") {
            return Err(format!(
                "artifact media type not supported yet: {raw_media}"
            ));
        }
        return Ok(());
    }
    if PREVIEW_DRIVERS.contains(&driver.as_str()) {
        if media != "application/json" {
            return Err(format!(
                "preview artifact media type not supported yet: {raw_media}"
            ));
        }
        let bundle: Value = serde_json::from_str(text)
            .map_err(|_| format!("preview artifact {id:?} is not valid JSON"))?;
        let files = bundle
            .get("files")
            .and_then(Value::as_array)
            .filter(|f| !f.is_empty());
        let files = files.ok_or_else(|| format!("preview artifact {id:?} must include files"))?;
        for (index, file) in files.iter().enumerate() {
            let path = file
                .get("path")
                .and_then(Value::as_str)
                .unwrap_or("")
                .trim();
            if path.is_empty() || file.get("content").is_none() {
                return Err(format!(
                    "preview artifact {id:?} file {} must include path and content",
                    index + 1
                ));
            }
        }
        return Ok(());
    }
    Err(format!(
        "ArtifactError: artifact driver not supported yet: {raw_driver}"
    ))
}

fn check_splits(items: &[Value]) -> Result<(), String> {
    let splits: Vec<&str> = items
        .iter()
        .map(|i| i["metadata"]["split"].as_str().unwrap_or("").trim())
        .collect();
    if !splits.iter().any(|s| !s.is_empty()) {
        return if items.is_empty() {
            Err("Gitmoot split planning requires at least one item".to_owned())
        } else {
            Ok(())
        };
    }
    let mut filled = BTreeMap::new();
    for split in splits {
        let canonical = match split {
            "" | "train" => "train",
            "selection" | "valid_seen" | "val" => "val",
            "test" | "valid_unseen" => "test",
            other => return Err(format!("Gitmoot metadata.split {other:?} is not supported")),
        };
        *filled.entry(canonical).or_insert(0) += 1;
    }
    if ["train", "val", "test"]
        .iter()
        .all(|s| filled.contains_key(s))
    {
        Ok(())
    } else {
        Err("Gitmoot metadata.split must provide non-empty train, val, and test splits".to_owned())
    }
}
